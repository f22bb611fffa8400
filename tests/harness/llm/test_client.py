"""The LLM layer against a real loopback HTTP server through the openai SDK."""

import pytest

from harness.llm.cache import ResponseCache
from harness.llm.client import LLMClient
from harness.llm.types import LLMError
from harness.testing.fake_openai import FakeOpenAIServer, Reply, completion, scripted

MSGS = [{"role": "user", "content": "hi"}]


def client(srv, tmp_path=None, **kw):
    cache = ResponseCache(tmp_path / "c.sqlite") if tmp_path else None
    return LLMClient(base_url=srv.base_url, model="m", cache=cache, backoff_base_s=0.01, backoff_max_s=0.02, **kw)


def test_usage_latency_and_tool_calls_are_reported():
    with FakeOpenAIServer(
        scripted(
            [
                completion(
                    None,
                    [{"name": "session_search", "arguments": {"query": "x"}}],
                    prompt_tokens=42,
                    completion_tokens=7,
                )
            ]
        )
    ) as srv:
        r = client(srv).chat(MSGS, tools=[{"type": "function", "function": {"name": "session_search"}}], temperature=0)
    assert r.usage.prompt_tokens == 42 and r.usage.completion_tokens == 7
    assert r.tool_calls[0]["function"]["name"] == "session_search"
    assert r.latency_s > 0 and not r.cached
    assert srv.requests[0]["temperature"] == 0 and srv.requests[0]["tools"]


def test_identical_request_is_served_from_cache(tmp_path):
    with FakeOpenAIServer(scripted([completion("one"), completion("two")])) as srv:
        c = client(srv, tmp_path)
        a = c.chat(MSGS, temperature=0)
        b = c.chat(MSGS, temperature=0)
        d = c.chat(MSGS, temperature=0.5)  # different params → new call
    assert (a.content, b.content, d.content) == ("one", "one", "two")
    assert b.cached and b.latency_s == a.latency_s and b.usage == a.usage
    assert len(srv.requests) == 2
    assert c.stats.as_dict()["cache_hits"] == 1


def test_cache_bypass_switch(tmp_path):
    with FakeOpenAIServer(scripted([completion("one"), completion("two")])) as srv:
        c = LLMClient(base_url=srv.base_url, model="m", cache=ResponseCache(tmp_path / "c.sqlite"), use_cache=False)
        assert [c.chat(MSGS).content for _ in range(2)] == ["one", "two"]


def test_cache_namespace_survives_a_new_port(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    with FakeOpenAIServer(scripted([completion("first")])) as srv:
        LLMClient(base_url=srv.base_url, model="m", cache=cache, cache_namespace="model-sha").chat(MSGS)
    with FakeOpenAIServer(scripted([completion("second")])) as srv2:
        r = LLMClient(base_url=srv2.base_url, model="m", cache=cache, cache_namespace="model-sha").chat(MSGS)
    assert r.content == "first" and not srv2.requests


def test_retries_429_honouring_retry_after_then_succeeds():
    replies = [
        Reply(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "0.05"}),
        Reply(status=503, body={"error": {"message": "busy"}}),
        completion("ok"),
    ]
    with FakeOpenAIServer(scripted(replies)) as srv:
        c = client(srv)
        assert c.chat(MSGS).content == "ok"
    assert len(srv.requests) == 3 and c.stats.retries == 2


def test_retries_are_bounded_and_the_error_names_the_endpoint():
    with FakeOpenAIServer(scripted([Reply(status=500, body={"error": {"message": "boom"}})])) as srv:
        c = client(srv, max_retries=2)
        with pytest.raises(LLMError, match=srv.base_url):
            c.chat(MSGS)
    assert len(srv.requests) == 3


def test_client_errors_are_not_retried():
    with FakeOpenAIServer(scripted([Reply(status=400, body={"error": {"message": "bad request"}})])) as srv:
        with pytest.raises(LLMError, match="BadRequest"):
            client(srv).chat(MSGS)
    assert len(srv.requests) == 1


def test_malformed_body_is_retried_then_reported():
    with FakeOpenAIServer(scripted([Reply(body={"choices": []})])) as srv:
        with pytest.raises(LLMError, match="no choices"):
            client(srv, max_retries=1).chat(MSGS)
    assert len(srv.requests) == 2


def test_unreachable_endpoint_fails_fast_with_its_url():
    c = LLMClient(base_url="http://127.0.0.1:9/v1", model="m", max_retries=1, backoff_base_s=0.01, timeout_s=2)
    with pytest.raises(LLMError, match="127.0.0.1:9"):
        c.chat(MSGS)


def test_cache_salt_separates_identical_requests_without_being_sent(tmp_path):
    with FakeOpenAIServer(scripted([completion("one"), completion("two")])) as srv:
        c = client(srv, tmp_path)
        a = c.chat(MSGS, cache_salt="summary-for:summary")
        b = c.chat(MSGS, cache_salt="summary-for:summary_ondemand")
        again = c.chat(MSGS, cache_salt="summary-for:summary")
    assert (a.content, b.content, again.content) == ("one", "two", "one")
    assert all("cache_salt" not in r and "_cache_salt" not in r for r in srv.requests)
