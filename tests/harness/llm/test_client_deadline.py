"""`client.timeout_s` bounds a whole attempt (not each read), and long retry waits are announced."""

import logging
import threading
import time

import pytest

from harness.llm.client import LLMClient
from harness.llm.types import LLMError
from harness.testing.fake_openai import FakeOpenAIServer, Reply, completion, scripted
from tests.support.raw_http import RawServer, trickle

MSGS = [{"role": "user", "content": "hi"}]


@pytest.mark.timeout(30)
def test_a_trickling_endpoint_fails_within_timeout_s_and_the_connection_is_dropped():
    timeout_s = 1.0
    with RawServer(trickle(0.2)) as srv:
        c = LLMClient(base_url=srv.base_url, model="m", timeout_s=timeout_s, max_retries=0)
        threads = threading.active_count()
        t0 = time.monotonic()
        with pytest.raises(LLMError, match=r"CallTimeout: no complete response within timeout_s=1 s"):
            c.chat(MSGS)
        elapsed = time.monotonic() - t0
        # The body trickles forever: without a whole-attempt deadline the call would never end (each read gets a
        # byte in time), so ending at all, with the deadline's CallTimeout, is the proof. The bounds say "not before
        # timeout_s" and "not unbounded"; an upper bound of timeout_s + 0.5 s flipped on a loaded 2-core machine,
        # where a thread can wait longer than that for a CPU.
        assert timeout_s - 0.05 <= elapsed < 10 * timeout_s, elapsed
        # the socket was shut down, not left to trickle: the server's next writes fail (it trickles every 0.2 s)
        deadline = time.monotonic() + 20
        while not srv.abandoned_at and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.abandoned_at and srv.abandoned_at[0] - t0 < 10 * timeout_s + 1
        assert threading.active_count() <= threads + 1  # at most the one shared watchdog thread
        assert c.stats.as_dict()["failures"] == 1


@pytest.mark.timeout(30)
def test_a_fresh_connection_trickling_its_headers_is_cut_off_at_timeout_s_too():
    with RawServer(trickle(0.2, headers=True)) as srv:
        c = LLMClient(base_url=srv.base_url, model="m", timeout_s=1.0, max_retries=0)
        t0 = time.monotonic()
        with pytest.raises(LLMError, match=r"CallTimeout: no complete response within timeout_s=1 s"):
            c.chat(MSGS)
        assert 0.95 <= time.monotonic() - t0 < 10  # watched from the connect (the deadline's trace hook)


@pytest.mark.timeout(30)
def test_each_retry_gets_its_own_total_deadline():
    with RawServer(trickle(0.1)) as srv:
        c = LLMClient(
            base_url=srv.base_url, model="m", timeout_s=0.5, max_retries=1, backoff_base_s=0.0, backoff_max_s=0.0
        )
        t0 = time.monotonic()
        with pytest.raises(LLMError, match="timeout_s=0.5"):
            c.chat(MSGS)
        elapsed = time.monotonic() - t0
        # two whole deadlines, the retry's its own (a shared one would end near 0.5 s); the upper bound only says
        # "bounded" (the trickle never ends), with room for a loaded machine
        assert 2 * 0.5 - 0.1 <= elapsed < 10 * 0.5, elapsed
        assert c.stats.as_dict()["retries"] == 1


def test_a_normal_call_is_unaffected_and_its_connection_is_reused():
    with FakeOpenAIServer(lambda req: completion("fine")) as srv:
        c = LLMClient(base_url=srv.base_url, model="m", timeout_s=5)
        assert [c.chat(MSGS).content for _ in range(3)] == ["fine"] * 3


def test_a_long_retry_after_wait_is_announced(monkeypatch, caplog):
    slept: list[float] = []
    monkeypatch.setattr("harness.llm.client._sleep", slept.append)
    replies = [
        Reply(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "12"}),
        completion("ok"),
    ]
    with FakeOpenAIServer(scripted(replies)) as srv, caplog.at_level(logging.WARNING, logger="harness.llm.client"):
        c = LLMClient(base_url=srv.base_url, model="m", max_retries=2)
        assert c.chat(MSGS).content == "ok"
    assert slept == [12.0]
    (msg,) = [r.getMessage() for r in caplog.records if r.name == "harness.llm.client"]
    assert srv.base_url in msg and "waiting 12 s (Retry-After)" in msg and "attempt 2 of 3" in msg
    assert caplog.records[0].levelno == logging.WARNING


def test_a_short_retry_wait_is_not_announced(monkeypatch, caplog):
    monkeypatch.setattr("harness.llm.client._sleep", lambda s: None)
    replies = [
        Reply(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "2"}),
        completion("ok"),
    ]
    with FakeOpenAIServer(scripted(replies)) as srv, caplog.at_level(logging.WARNING, logger="harness.llm.client"):
        assert LLMClient(base_url=srv.base_url, model="m").chat(MSGS).content == "ok"
    assert not [r for r in caplog.records if r.name == "harness.llm.client"]
