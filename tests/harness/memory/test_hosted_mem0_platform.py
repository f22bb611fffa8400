"""mem0's hosted platform (mem0ai's `MemoryClient`) behind the provider contract, against replayed responses.

The SDK is real; only its network is replaced (tests/support/hosted_replay.py over tests/fixtures/hosted/mem0_platform.json,
whose shapes come from the SDK's source and mem0's API reference, not from the live service).
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

import pytest

from tests.support.hosted_replay import Replay, require_sdk
from tests.support.paths import REPO

require_sdk("mem0")

from harness.memory import mem0_platform  # noqa: E402
from harness.memory.hosted import epoch_seconds  # noqa: E402
from harness.memory.mem0_platform import Mem0PlatformProvider  # noqa: E402
from harness.memory.provider import MemorySession, MemoryTurn, ProviderError, Usage  # noqa: E402

pytestmark = pytest.mark.hosted

ENV = "LME_TEST_MEM0_KEY"
KEY = "m0-test-key-3f9a7c21e5"
CONFIG = REPO / "configs" / "memory" / "mem0_platform.yaml"
QUESTION = "What is the name of my cat?"
AS_OF = "2023-06-01T00:00:00Z"

SESSIONS = [  # handed over out of date order: the adapter must send them in date order
    MemorySession(
        "s2",
        "2023-05-25T10:00:00Z",
        (MemoryTurn("user", "I moved to Lisbon."), MemoryTurn("assistant", "Congratulations on the move!")),
    ),
    MemorySession(
        "s1",
        "2023-05-20T02:21:00Z",
        (MemoryTurn("user", "I adopted a cat named Miso."), MemoryTurn("assistant", "Miso is a lovely name.")),
    ),
]


@pytest.fixture
def replay() -> Replay:
    return Replay.load("mem0_platform")


@pytest.fixture
def provider(replay: Replay, monkeypatch: pytest.MonkeyPatch) -> Mem0PlatformProvider:
    monkeypatch.setenv(ENV, KEY)
    monkeypatch.setattr(mem0_platform, "POLL_S", 0.0)
    return Mem0PlatformProvider(api_key_env=ENV, scope_prefix="lme-t-", http_client=replay.client())


def route(replay: Replay, method: str, path: str, status: int, body: Any, times: int | None = None) -> None:
    """Put a route in front of the fixture's own (answers first)."""
    r: dict[str, Any] = {"method": method, "path": path, "status": status, "body": body}
    if times is not None:
        r["times"] = times
    replay.routes.insert(0, r)


def test_every_request_carries_the_key_from_the_env_var_and_the_provider_does_not_show_it(
    provider: Mem0PlatformProvider, replay: Replay
) -> None:
    provider.setup("q1")
    provider.ingest("q1", SESSIONS)
    provider.retrieve("q1", QUESTION, 5, AS_OF)
    provider.teardown("q1")
    assert replay.requests and not replay.unmatched
    assert {r.headers.get("authorization") for r in replay.requests} == {f"Token {KEY}"}
    assert KEY not in repr(provider) and KEY not in str(vars(provider).get("api_key_env"))


def test_missing_env_var_is_a_provider_error_naming_it_before_any_request(
    replay: Replay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    p = Mem0PlatformProvider(api_key_env=ENV, http_client=replay.client())
    with pytest.raises(ProviderError) as e:
        p.setup("q1")
    assert e.value.provider == "mem0_platform" and ENV in str(e.value)
    assert replay.requests == []


def test_each_unit_has_its_own_user_id(provider: Mem0PlatformProvider, replay: Replay) -> None:
    for unit in ("q1", "q2"):
        provider.setup(unit)
        provider.ingest(unit, SESSIONS[:1])
        provider.retrieve(unit, QUESTION, 3, AS_OF)
        provider.teardown(unit)
    adds = [r.body["user_id"] for r in replay.sent("POST", "/v3/memories/add/")]
    searches = [r.body["filters"]["AND"][0]["user_id"] for r in replay.sent("POST", "/v3/memories/search/")]
    listed = [r.body["filters"]["user_id"] for r in replay.sent("POST", "/v3/memories/")]
    deleted = [r.query["user_id"] for r in replay.sent("DELETE", "/v1/memories/")]
    for seen in (adds, searches, listed, deleted):
        assert seen == ["lme-t-q1", "lme-t-q2"]


def test_ingest_sends_each_session_in_date_order_with_its_date_and_never_the_question(
    provider: Mem0PlatformProvider, replay: Replay
) -> None:
    provider.setup("q1")
    result = provider.ingest("q1", SESSIONS)
    adds = replay.sent("POST", "/v3/memories/add/")
    assert [a.body["metadata"]["session_id"] for a in adds] == ["s1", "s2"]
    for a, s in zip(adds, sorted(SESSIONS, key=lambda s: s.date), strict=True):
        assert a.body["messages"] == [{"role": t.role, "content": t.content} for t in s.turns]
        assert a.body["metadata"] == {
            "session_id": s.session_id,
            "session_date": s.date,
            "session_ts": epoch_seconds(s.date),
        }
        assert a.body["timestamp"] == epoch_seconds(s.date)
    assert all(QUESTION not in str(r.body) for r in replay.requests)
    assert result.ready is False and result.usage == Usage()  # queued by the platform; no tokens reported


def test_ready_polls_the_add_events_until_they_succeed(provider: Mem0PlatformProvider, replay: Replay) -> None:
    assert "ready" in provider.capabilities().calls
    provider.setup("q1")
    provider.ingest("q1", SESSIONS)
    route(replay, "GET", "/v1/event/[0-9a-f-]+/", 200, {"id": "x", "status": "RUNNING"}, times=1)
    assert provider.ready("q1") is False
    assert provider.ready("q1") is True
    polled = replay.sent("GET", "/v1/event/[0-9a-f-]+/")
    assert len(polled) == 3  # two events looked at, then the one still RUNNING once more
    assert provider.ready("q1") is True and len(replay.sent("GET", "/v1/event/[0-9a-f-]+/")) == 3


def test_a_failed_add_event_is_a_provider_error(provider: Mem0PlatformProvider, replay: Replay) -> None:
    provider.setup("q1")
    provider.ingest("q1", SESSIONS[:1])
    route(replay, "GET", "/v1/event/[0-9a-f-]+/", 200, {"id": "x", "status": "FAILED", "error": "extraction failed"})
    with pytest.raises(ProviderError) as e:
        provider.ready("q1")
    assert (e.value.provider, e.value.call, e.value.unit) == ("mem0_platform", "ready", "q1")
    assert "extraction failed" in str(e.value)


def test_retrieve_sends_top_k_and_the_as_of_filter_and_maps_items_with_provenance(
    provider: Mem0PlatformProvider, replay: Replay
) -> None:
    provider.setup("q1")
    got = provider.retrieve("q1", QUESTION, 7, AS_OF)
    (sent,) = replay.sent("POST", "/v3/memories/search/")
    assert sent.body["query"] == QUESTION and sent.body["top_k"] == 7
    assert sent.body["filters"] == {"AND": [{"user_id": "lme-t-q1"}, {"created_at": {"lte": AS_OF}}]}
    assert sent.body["reference_date"] == epoch_seconds(AS_OF)
    texts = [i.text for i in got.items]
    # the service's answer as it came: an item dated after as_of is kept, for the leakage audit to see
    assert texts == ["User adopted a cat named Miso", "User moved to Lisbon", "User sold the car"]
    first, second, third = got.items
    assert first.score == 0.82 and first.provenance is not None
    assert (first.provenance.session_id, first.provenance.date) == ("s1", "2023-05-20T02:21:00Z")
    assert second.provenance is not None and second.provenance.session_id is None
    assert second.provenance.date == "2023-06-02T09:00:00Z"  # no metadata: the backdated created_at
    assert third.provenance is not None and third.provenance.date == "2024-01-01T00:00:00Z"
    assert got.usage == Usage()


def test_setup_deletes_an_earlier_runs_memories_and_waits_until_they_are_gone(
    provider: Mem0PlatformProvider, replay: Replay
) -> None:
    leftover = {"count": 1, "next": None, "previous": None, "results": [{"id": "m", "memory": "old"}]}
    route(replay, "POST", "/v3/memories/", 200, leftover, times=2)
    provider.setup("q1")
    assert [r.query for r in replay.sent("DELETE", "/v1/memories/")] == [{"user_id": "lme-t-q1"}]
    assert len(replay.sent("POST", "/v3/memories/")) == 3  # found, still there after the delete, then gone


def test_setup_of_an_empty_scope_deletes_nothing_and_teardown_deletes_the_scope(
    provider: Mem0PlatformProvider, replay: Replay
) -> None:
    provider.setup("q1")
    assert replay.sent("DELETE", "/v1/memories/") == []
    provider.teardown("q1")
    assert [r.query for r in replay.sent("DELETE", "/v1/memories/")] == [{"user_id": "lme-t-q1"}]


@pytest.mark.parametrize("status", [400, 401, 404, 429, 500, 503])
@pytest.mark.parametrize(
    ("call", "method", "path"),
    [
        ("ingest", "POST", "/v3/memories/add/"),
        ("retrieve", "POST", "/v3/memories/search/"),
        ("teardown", "DELETE", "/v1/memories/"),
    ],
)
def test_http_errors_are_one_provider_error_naming_service_call_and_unit(
    provider: Mem0PlatformProvider, replay: Replay, status: int, call: str, method: str, path: str
) -> None:
    provider.setup("q1")
    route(replay, method, path, status, {"detail": f"service says no ({status})"})
    with pytest.raises(ProviderError) as e:
        if call == "ingest":
            provider.ingest("q1", SESSIONS)
        elif call == "retrieve":
            provider.retrieve("q1", QUESTION, 5, AS_OF)
        else:
            provider.teardown("q1")
    assert (e.value.provider, e.value.call, e.value.unit) == ("mem0_platform", call, "q1")
    assert "mem0_platform" in str(e.value) and call in str(e.value) and "q1" in str(e.value)
    assert KEY not in str(e.value) and KEY not in repr(e.value)


def test_a_rejected_key_at_the_sdks_ping_is_a_provider_error(provider: Mem0PlatformProvider, replay: Replay) -> None:
    route(replay, "GET", "/v1/ping/", 401, {"detail": "Invalid API key."})
    with pytest.raises(ProviderError) as e:
        provider.setup("q1")
    assert (e.value.provider, e.value.call, e.value.unit) == ("mem0_platform", "setup", "q1")
    assert "Invalid API key" in str(e.value) and KEY not in str(e.value)
    assert [r.path for r in replay.requests] == ["/v1/ping/"]


def test_the_hydra_config_instantiates(replay: Replay, monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    monkeypatch.setenv("MEM0_API_KEY", KEY)
    cfg = OmegaConf.load(CONFIG)
    p = instantiate(cfg, http_client=replay.client())
    assert isinstance(p, Mem0PlatformProvider)
    assert (p.api_key_env, p.base_url, p.scope_prefix) == ("MEM0_API_KEY", None, "lme-")
    p.setup("q1")
    assert {r.headers["authorization"] for r in replay.requests} == {f"Token {KEY}"}
    assert str(p.client().client.base_url).rstrip("/") == "https://api.mem0.ai"  # null: the SDK's default host
    other = instantiate(cfg, base_url="https://mem0.example.invalid", http_client=replay.client())
    assert str(other.client().client.base_url).rstrip("/") == "https://mem0.example.invalid"


def test_capabilities_name_the_service_and_the_sdk_version(provider: Mem0PlatformProvider) -> None:
    caps = provider.capabilities()
    assert caps.name == "mem0_platform"
    assert caps.version == f"mem0ai {metadata.version('mem0ai')}"
    assert caps.problems() == [] and caps.supports("ready")


def test_attach_is_true_when_the_units_memories_are_still_there_and_sends_no_add(
    provider: Mem0PlatformProvider, replay: Replay
) -> None:
    assert "attach" in provider.capabilities().calls
    assert provider.attach("q1") is False  # the fixture's get_all: count 0, nothing under the user_id
    route(replay, "POST", "/v3/memories/", 200, {"count": 3, "next": None, "previous": None, "results": []})
    assert provider.attach("q1") is True
    asked = replay.sent("POST", "/v3/memories/")
    assert [r.body["filters"] for r in asked] == [{"user_id": "lme-t-q1"}] * 2
    assert not replay.sent("POST", "/v3/memories/add/") and not replay.sent("DELETE", "/v1/memories/")
