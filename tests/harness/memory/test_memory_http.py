"""The HTTP/JSON form of the memory-provider contract (harness/memory/http.py): the reference server serving a
built-in provider and the HTTP client, end to end on loopback; errors named; a run through `memory=http`."""

from __future__ import annotations

import json
import socket

import pytest

from harness.llm.loopback import LoopbackServer, Reply
from harness.memory.builtin import IndexProvider
from harness.memory.http import HttpProvider, MemoryServer, ShapeError, items_of, sessions_json, sessions_of
from harness.memory.provider import MemorySession, MemoryTurn, Provenance, ProviderError
from harness.records import load_records
from tests.support.fake_run import fake_endpoint_args

SESSIONS = (
    MemorySession(
        "s1",
        "2023-05-01T10:00:00Z",
        (MemoryTurn("user", "I adopted a cat named Miso"), MemoryTurn("assistant", "Lovely name")),
    ),
    MemorySession("s2", "2023-06-01T10:00:00Z", (MemoryTurn("user", "The cat Miso now weighs 5 kg"),)),
)


def test_sessions_round_trip_through_json_and_bad_shapes_name_the_field() -> None:
    assert sessions_of(json.loads(json.dumps(sessions_json(SESSIONS)))) == SESSIONS
    with pytest.raises(ShapeError, match=r"sessions\[0\]\.turns\[0\]\.content: missing"):
        sessions_of([{"session_id": "s", "date": "d", "turns": [{"role": "user"}]}])
    with pytest.raises(ShapeError, match=r"items\[1\]\.provenance\.turn_index: expected int"):
        items_of([{"text": "a"}, {"text": "b", "provenance": {"turn_index": "3"}}])


def test_the_reference_server_and_the_http_client_give_what_the_provider_gives() -> None:
    direct = IndexProvider()
    with MemoryServer(IndexProvider()) as srv:
        remote = HttpProvider(srv.base_url)
        caps = remote.capabilities()
        assert caps == direct.capabilities()
        for p in (direct, remote):
            p.setup("u1")
            assert p.ingest("u1", SESSIONS).ready
        for as_of in ("2023-05-15T00:00:00Z", "2023-07-01T00:00:00Z"):
            want = direct.retrieve("u1", "what is my cat called, Miso", 5, as_of)
            got = remote.retrieve("u1", "what is my cat called, Miso", 5, as_of)
            assert got == want and got.items
        assert got.items[0].provenance in (
            Provenance("s2", 0, "2023-06-01T10:00:00Z"),
            Provenance("s1", 0, "2023-05-01T10:00:00Z"),
        )
        remote.teardown("u1")
        with pytest.raises(ProviderError, match=r"retrieve for unit 'u1' failed: HTTP 404: .*unknown unit"):
            remote.retrieve("u1", "cat", 5, "2023-07-01T00:00:00Z")
        with pytest.raises(ProviderError, match=r"answer .*HTTP 500: .*does not answer"):
            remote.setup("u2")
            remote.answer("u2", "cat", "2023-07-01T00:00:00Z")


def test_an_unreachable_or_misbehaving_server_is_one_named_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ProviderError, match="capabilities failed: unreachable"):
        HttpProvider(f"http://127.0.0.1:{port}/v1", timeout_s=5).capabilities()
    bad = LoopbackServer(
        lambda req: Reply(body={"items": [{"score": 1}]}), on_get=lambda p: Reply(body={"name": "x"}), record=False
    )
    with bad:
        p = HttpProvider(bad.base_url, timeout_s=5)
        with pytest.raises(
            ProviderError, match=r"capabilities failed: bad response body: capabilities\.calls: missing"
        ):
            p.capabilities()
        with pytest.raises(
            ProviderError, match=r"retrieve for unit 'u' failed: bad response body: items\[0\]\.text: missing"
        ):
            p.retrieve("u", "q", 3, "2023-07-01T00:00:00Z")


def test_a_bearer_token_comes_from_the_named_environment_variable(monkeypatch) -> None:
    seen: list[str | None] = []
    srv = LoopbackServer(lambda req: (seen.append(req["_auth"]), Reply(body={}))[1], record=False)
    with srv:
        p = HttpProvider(srv.base_url, api_key_env="LME_TEST_MEMORY_KEY")
        monkeypatch.delenv("LME_TEST_MEMORY_KEY", raising=False)
        with pytest.raises(ProviderError, match="LME_TEST_MEMORY_KEY is not set"):
            p.setup("u")
        monkeypatch.setenv("LME_TEST_MEMORY_KEY", "sekrit")
        p.setup("u")
    assert seen == ["Bearer sekrit"]


@pytest.mark.e2e
def test_mode_memory_over_http_runs_end_to_end(tmp_path) -> None:
    from commands.cli import main
    from harness.testing.fake_openai import FakeOpenAIServer
    from harness.testing.faults import FakeModel

    with MemoryServer(IndexProvider()) as mem, FakeOpenAIServer(FakeModel()) as srv:
        rc = main(
            [
                "run",
                f"hydra.run.dir={tmp_path / 'run'}",
                "mode=memory",
                "memory=http",
                f"memory.url={mem.base_url}",
                *fake_endpoint_args(srv.base_url, tmp_path),
            ]
        )
    assert rc == 0
    recs = load_records(tmp_path / "run" / "records.jsonl")
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    for r in recs:
        assert r["ingest"]["trace"][0]["provider"] == "bm25"
        (rt,) = r["tool_calls"]
        assert rt["returned"] >= 1 and all("session_id" in i for i in rt["items"])


def test_python_m_harness_memory_http_serves_a_built_in_provider_that_passes_the_check(capsys) -> None:
    import threading
    import time

    from harness.memory.check import check_url
    from harness.memory.http import main as serve_main

    stop = threading.Event()
    t = threading.Thread(
        target=serve_main, args=(["--provider", "full_context", "--port", "0"],), kwargs={"stop": stop}
    )
    t.start()
    try:
        for _ in range(200):  # until it has printed its address
            out = capsys.readouterr().out
            if "serving" in out:
                break
            time.sleep(0.05)
        url = out.split(" at ")[-1].strip()
        assert out.startswith("serving full_context at http://127.0.0.1:")
        rep = check_url(url)
        assert rep.ok, rep.text()
        assert rep.provider == "full_context 1"
    finally:
        stop.set()
        t.join(10)
    assert not t.is_alive()
