"""supermemory's adapter (harness/memory/supermemory.py) through its real SDK against replayed responses."""

from __future__ import annotations

import hydra.utils
import pytest
from omegaconf import OmegaConf

from harness.memory.provider import MemorySession, MemoryTurn, ProviderError
from tests.hosted_replay import Replay, require_sdk

require_sdk("supermemory")

from harness.memory.supermemory import SupermemoryProvider  # noqa: E402

pytestmark = pytest.mark.hosted

KEY = "sm-test-key-0123456789"
SESSIONS = (  # given out of date order: ingest sends them oldest first
    MemorySession("sess_b", "2023-06-01T10:00:00Z", (MemoryTurn("user", "I'm thinking about a second cat."),)),
    MemorySession(
        "sess_a",
        "2023-05-20T02:21:00Z",
        (MemoryTurn("user", "I adopted a cat named Luna."), MemoryTurn("assistant", "Congratulations on Luna!")),
    ),
)


@pytest.fixture
def replay(monkeypatch: pytest.MonkeyPatch) -> Replay:
    monkeypatch.setenv("SUPERMEMORY_API_KEY", KEY)
    return Replay.load("supermemory")


def provider(replay: Replay, **kw: object) -> SupermemoryProvider:
    return SupermemoryProvider(http_client=replay.client("https://api.supermemory.ai"), **kw)  # type: ignore[arg-type]


def test_a_unit_is_one_namespace_with_one_dated_document_per_session(replay: Replay) -> None:
    p = provider(replay)
    p.setup("u1")
    ingest = p.ingest("u1", SESSIONS)
    assert ingest.ready is False  # processed asynchronously: the harness polls `ready`
    docs = replay.sent("POST", "/ns/[^/]+/document")
    assert [d.path for d in docs] == ["/ns/lme-u1/document"] * 2
    assert [d.body["id"] for d in docs] == ["sess_a", "sess_b"]  # oldest first
    first = docs[0].body
    assert first["date"] == "2023-05-20T02:21:00Z"
    assert first["metadata"] == {
        "session_id": "sess_a",
        "session_date": "2023-05-20T02:21:00Z",
        "session_ts": 1684549260,
    }
    assert first["content"].splitlines() == [
        "Conversation on 2023-05-20T02:21:00Z (session sess_a):",
        "user: I adopted a cat named Luna.",
        "assistant: Congratulations on Luna!",
    ]
    assert all(d.headers["authorization"] == f"Bearer {KEY}" for d in replay.requests)
    assert not replay.unmatched


def test_ready_waits_for_processing_and_memory_generation(replay: Replay) -> None:
    p = provider(replay)
    p.setup("u1")
    p.ingest("u1", SESSIONS)
    assert p.ready("u1") is False  # sess_a still embedding / dreaming
    assert p.ready("u1") is True
    assert [r.path for r in replay.sent("GET", ".*")] == [
        "/ns/lme-u1/document/sess_a",
        "/ns/lme-u1/document/sess_a",
        "/ns/lme-u1/document/sess_b",
    ]


def test_a_failed_document_fails_the_unit(replay: Replay) -> None:
    replay.routes.insert(
        0,
        {
            "method": "GET",
            "path": "/ns/[^/]+/document/sess_a",
            "body": {
                "id": "sess_a",
                "type": "text",
                "metadata": {},
                "system": {
                    "status": "failed",
                    "dreamingStatus": "done",
                    "createdAt": "2026-12-02T06:00:00Z",
                    "updatedAt": "2026-12-02T06:00:00Z",
                },
            },
        },
    )
    p = provider(replay)
    p.setup("u1")
    p.ingest("u1", SESSIONS)
    with pytest.raises(ProviderError, match=r"supermemory.*ready for unit 'u1'.*sess_a.*failed"):
        p.ready("u1")


def test_retrieve_filters_as_of_in_the_service_and_keeps_provenance(replay: Replay) -> None:
    p = provider(replay, search_mode="memories")
    out = p.retrieve("u7", "what is my cat called?", 3, "2023-05-25T00:00:00Z")
    (sent,) = replay.sent("POST", "/ns/[^/]+/search")
    assert sent.path == "/ns/lme-u7/search"
    assert sent.body["query"] == "what is my cat called?"
    assert sent.body["limit"] == 3 and sent.body["searchMode"] == "memories"
    assert sent.body["filter"] == {"field": "session_ts", "operator": "lte", "value": 1684972800}
    assert [i.text for i in out.items] == [
        "The user adopted a cat named Luna in May 2023.",
        "user: I'm thinking about a second cat.",
    ]
    assert [i.score for i in out.items] == [0.87, 0.52]
    assert [(i.provenance.session_id, i.provenance.date) for i in out.items if i.provenance] == [
        ("sess_a", "2023-05-20T02:21:00Z"),
        ("sess_b", "2023-06-01T10:00:00Z"),  # dated after as_of, yet returned: kept for the leakage audit
    ]


def test_teardown_deletes_the_units_namespace_only(replay: Replay) -> None:
    p = provider(replay)
    p.setup("u1")
    p.teardown("u1")
    assert [r.path for r in replay.sent("DELETE", ".*")] == ["/ns/lme-u1"]


@pytest.mark.parametrize("status", [401, 429, 500])
def test_a_service_error_is_one_provider_error_without_the_key(replay: Replay, status: int) -> None:
    replay.routes.insert(
        0, {"method": "POST", "path": "/ns/[^/]+/search", "status": status, "body": {"error": f"bad key {KEY}"}}
    )
    p = provider(replay)
    with pytest.raises(ProviderError) as e:
        p.retrieve("u1", "q", 5, "2023-05-25T00:00:00Z")
    assert (e.value.provider, e.value.call, e.value.unit) == ("supermemory", "retrieve", "u1")
    assert str(status) in str(e.value)
    assert KEY not in str(e.value) and KEY not in repr(p) and KEY not in repr(vars(p))


def test_a_missing_key_is_named_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUPERMEMORY_API_KEY", raising=False)
    replay = Replay.load("supermemory")
    with pytest.raises(ProviderError, match="environment variable SUPERMEMORY_API_KEY is not set"):
        provider(replay).setup("u1")
    assert replay.requests == []


def test_the_hydra_config_builds_it(replay: Replay) -> None:
    from pathlib import Path

    cfg = OmegaConf.load(Path(__file__).parents[1] / "configs" / "memory" / "supermemory.yaml")
    p = hydra.utils.instantiate(cfg)
    assert isinstance(p, SupermemoryProvider)
    assert (p.api_key_env, p.search_mode, p.scope("u")) == ("SUPERMEMORY_API_KEY", "hybrid", "lme-u")
    caps = p.capabilities()
    assert caps.name == "supermemory" and caps.version.startswith("supermemory 5.")
    assert caps.supports("ready")
    with pytest.raises(ValueError, match="search_mode"):
        SupermemoryProvider(search_mode="graph")
