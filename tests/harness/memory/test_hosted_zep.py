"""Zep (zep-cloud 4.x) behind the provider contract, against replayed responses (tests/fixtures/hosted/zep.json).

The SDK is real: it builds every request and parses every response; only the network is replaced.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.hosted_replay import Replay, require_sdk
from tests.support.paths import REPO

require_sdk("zep_cloud")

from harness.memory.provider import MemorySession, MemoryTurn, Provenance, ProviderError  # noqa: E402
from harness.memory.zep import MESSAGES_PER_CALL, ZepProvider  # noqa: E402

pytestmark = pytest.mark.hosted

KEY = "zep-test-key-5f1e9c"
ENV = "LME_TEST_ZEP_KEY"
MAY, JUNE, AS_OF = "2023-05-20T02:21:00Z", "2023-06-01T10:00:00Z", "2023-06-10T00:00:00Z"
QUESTION = "What is my cat called?"
V4 = "/api/v4"


def session(sid: str, date: str, *lines: str) -> MemorySession:
    turns: list[MemoryTurn] = []
    for line in lines:
        turns += [MemoryTurn("user", line), MemoryTurn("assistant", "Noted.")]
    return MemorySession(sid, date, tuple(turns))


SESSIONS = [  # given out of date order: the adapter must send them in date order
    session("s-june", JUNE, "Luna chewed my charger."),
    session("s-may", MAY, "I adopted a cat named Luna."),
]


@pytest.fixture
def replay() -> Replay:
    return Replay.load("zep")


@pytest.fixture
def zep(replay: Replay, monkeypatch: pytest.MonkeyPatch) -> ZepProvider:
    monkeypatch.setenv(ENV, KEY)
    monkeypatch.setattr("zep_cloud.core.http_client.time.sleep", lambda s: None)  # the SDK's retry backoff
    return ZepProvider(ENV, scope_prefix="lme-", http_client=replay.client())


def ingested(zep: ZepProvider, unit: str = "q1") -> None:
    zep.setup(unit)
    assert zep.ingest(unit, SESSIONS).ready is False
    assert any(zep.ready(unit) for _ in range(5)), "never ready"


def test_capabilities_name_zep_its_sdk_and_ready() -> None:
    caps = ZepProvider(ENV).capabilities()
    assert caps.name == "zep" and caps.version.startswith("zep-cloud 4.")
    assert caps.supports("ready") and not caps.problems()


def test_every_request_carries_the_key_from_the_env_var(zep: ZepProvider, replay: Replay) -> None:
    ingested(zep)
    zep.retrieve("q1", QUESTION, 5, AS_OF)
    assert replay.requests and not replay.unmatched
    assert {r.headers["authorization"] for r in replay.requests} == {f"Api-Key {KEY}"}


def test_one_user_per_unit_never_shared(zep: ZepProvider, replay: Replay) -> None:
    zep.setup("q1")
    zep.setup("q2")
    assert [r.body["user_id"] for r in replay.sent("POST", f"{V4}/users")] == ["lme-q1", "lme-q2"]
    assert zep.retrieve("q2", QUESTION, 5, AS_OF).items == ()  # q2 searches its own graph (empty), not q1's
    assert [r.path for r in replay.sent("POST", f"{V4}/graphs/.*/search/edges")] == [f"{V4}/graphs/g-0002/search/edges"]
    zep.teardown("q1")
    zep.teardown("q2")
    assert [r.path for r in replay.sent("DELETE", f"{V4}/users/.*")] == [f"{V4}/users/u-0001", f"{V4}/users/u-0002"]


def test_setup_creates_the_user_and_nothing_else(zep: ZepProvider, replay: Replay) -> None:
    zep.setup("q1")
    assert [(r.method, r.path) for r in replay.requests] == [("POST", f"{V4}/users")]


def test_ingest_sends_each_session_as_its_thread_in_date_order(zep: ZepProvider, replay: Replay) -> None:
    zep.setup("q1")
    zep.ingest("q1", SESSIONS)
    assert [r.body for r in replay.sent("POST", f"{V4}/threads")] == [{"user_uuid": "u-0001"}] * 2
    adds = replay.sent("POST", f"{V4}/threads/.*/messages")
    assert [r.path for r in adds] == [f"{V4}/threads/t-0001/messages", f"{V4}/threads/t-0002/messages"]
    may, june = (a.body["messages"] for a in adds)
    assert [m["content"] for m in may] == ["I adopted a cat named Luna.", "Noted."]
    assert [m["role"] for m in may] == ["user", "assistant"] and [m["name"] for m in may] == ["User", "Assistant"]
    assert {m["reference_time"] for m in may} == {MAY} and {m["reference_time"] for m in june} == {JUNE}
    assert may[0]["metadata"] == {"session_id": "s-may", "session_date": MAY}
    assert QUESTION not in str([r.body for r in replay.requests])
    assert not replay.unmatched


def test_a_long_session_goes_in_batches_on_one_thread(zep: ZepProvider, replay: Replay) -> None:
    zep.setup("q1")
    long = MemorySession("s-long", MAY, tuple(MemoryTurn("user", f"line {i}") for i in range(MESSAGES_PER_CALL + 1)))
    zep.ingest("q1", [long])
    adds = replay.sent("POST", f"{V4}/threads/.*/messages")
    assert [len(a.body["messages"]) for a in adds] == [MESSAGES_PER_CALL, 1]
    assert {a.path for a in adds} == {f"{V4}/threads/t-0001/messages"}
    assert [m["content"] for a in adds for m in a.body["messages"]][-1] == f"line {MESSAGES_PER_CALL}"


def test_ready_polls_the_ingest_tasks_until_terminal(zep: ZepProvider, replay: Replay) -> None:
    zep.setup("q1")
    zep.ingest("q1", SESSIONS)
    assert zep.ready("q1") is False  # task-0001 still processing
    assert zep.ready("q1") is True
    polled = [r.path for r in replay.sent("GET", f"{V4}/tasks/.*")]
    assert polled == [f"{V4}/tasks/task-0001", f"{V4}/tasks/task-0002", f"{V4}/tasks/task-0001"]


def test_a_failed_ingest_task_is_a_provider_error(zep: ZepProvider, replay: Replay) -> None:
    replay.routes.insert(
        0,
        {
            "method": "GET",
            "path": f"{V4}/tasks/task-0002",
            "body": {"uuid": "task-0002", "status": "failed", "error": {"message": "extraction quota exceeded"}},
        },
    )
    zep.setup("q1")
    zep.ingest("q1", SESSIONS)
    with pytest.raises(ProviderError) as e:
        zep.ready("q1")
    assert e.value.call == "ready" and "task-0002" in str(e.value) and "quota" in str(e.value)


def test_without_a_task_ready_waits_for_processed_episodes(zep: ZepProvider, replay: Replay) -> None:
    episode = {"uuid": "ep-1", "thread_uuid": "t-0001", "processed": False}
    replay.routes[:0] = [
        {"method": "POST", "path": f"{V4}/threads/.*/messages", "body": {"messages": []}},
        {"method": "GET", "path": f"{V4}/threads/t-0001/episodes", "times": 1, "body": {"items": [episode]}},
        {"method": "GET", "path": f"{V4}/threads/t-0001/episodes", "body": {"items": [episode | {"processed": True}]}},
    ]
    zep.setup("q1")
    zep.ingest("q1", [SESSIONS[1]])  # two messages sent, one episode listed: not ready even once processed
    assert zep.ready("q1") is False and zep.ready("q1") is False
    replay.routes[2]["body"]["items"].append({"uuid": "ep-2", "thread_uuid": "t-0001", "processed": True})
    assert zep.ready("q1") is True


def test_retrieve_sends_the_limit_and_the_as_of_filter(zep: ZepProvider, replay: Replay) -> None:
    ingested(zep)
    zep.retrieve("q1", QUESTION, 7, AS_OF)
    (search,) = replay.sent("POST", f"{V4}/graphs/g-0001/search/edges")
    assert search.query["page_size"] == "7"
    assert search.body["query"] == QUESTION and search.body["reranker"] == "rrf"
    groups = search.body["filters"]["date_filters"]["any_of"]
    (lte,) = groups[0]["all_of"]
    assert lte["field"] == "valid_at" and lte["operator"] == "lte"
    assert lte["value"].replace("+00:00", "Z") == AS_OF
    assert groups[1]["all_of"] == [{"field": "valid_at", "operator": "is_null"}]


def test_retrieve_maps_facts_with_session_and_date(zep: ZepProvider, replay: Replay) -> None:
    ingested(zep)
    items = zep.retrieve("q1", QUESTION, 10, AS_OF).items
    assert [i.text for i in items] == [
        "User adopted a cat named Luna",
        "Luna chewed the user's charger",
        "Luna is the user's cat",
        "User likes tuna",
    ]
    assert [i.score for i in items] == [0.91, 0.52, 0.40, None]
    assert [i.provenance for i in items] == [
        Provenance(session_id="s-may", date=MAY),  # its episode's thread is the May session
        Provenance(session_id="s-june", date=JUNE),  # no valid_at: dated by its session, not created_at (2025)
        Provenance(session_id=None, date=MAY),  # said in both sessions: no one session, the earliest date
        Provenance(session_id=None, date="2023-05-20T22:00:00Z"),  # no episodes: Zep's valid_at, in UTC
    ]
    # each episode looked up once, then kept
    assert sorted(r.path for r in replay.sent("GET", f"{V4}/graphs/.*/episodes/.*")) == [
        f"{V4}/graphs/g-0001/episodes/ep-0001",
        f"{V4}/graphs/g-0001/episodes/ep-0002",
    ]


def test_retrieve_keeps_what_the_service_returns(zep: ZepProvider, replay: Replay) -> None:
    """Items are never dropped here, even one dated after as_of: the harness audits what comes back."""
    ingested(zep)
    assert len(zep.retrieve("q1", QUESTION, 10, "2023-05-25T00:00:00Z").items) == 4
    assert len(zep.retrieve("q1", QUESTION, 2, AS_OF).items) == 2  # never more than top_k


def test_teardown_deletes_the_user_found_by_its_id(zep: ZepProvider, replay: Replay) -> None:
    zep.teardown("q1")  # never set up by this instance (a restart): looked up by user_id, then deleted
    assert replay.sent("POST", f"{V4}/users/lookup")[0].body == {"user_id": "lme-q1"}
    assert [r.path for r in replay.sent("DELETE", f"{V4}/users/.*")] == [f"{V4}/users/u-0001"]


def test_teardown_of_an_unknown_user_is_quiet(zep: ZepProvider, replay: Replay) -> None:
    replay.routes.insert(0, {"method": "POST", "path": f"{V4}/users/lookup", "status": 404, "body": {}})
    zep.teardown("q9")
    assert replay.sent("DELETE", f"{V4}/users/.*") == []


@pytest.mark.parametrize("status", [400, 401, 404, 500, 503])
def test_http_errors_are_one_provider_error_without_the_key(zep: ZepProvider, replay: Replay, status: int) -> None:
    body: dict[str, Any] = {"error": {"message": f"boom {status}", "code": "x"}}
    replay.routes.insert(0, {"method": "POST", "path": f"{V4}/graphs/.*/search/edges", "status": status, "body": body})
    zep.setup("q1")
    with pytest.raises(ProviderError) as e:
        zep.retrieve("q1", QUESTION, 5, AS_OF)
    err = e.value
    assert (err.provider, err.call, err.unit) == ("zep", "retrieve", "q1")
    assert "'zep'" in str(err) and "retrieve" in str(err) and "'q1'" in str(err)
    assert str(status) in str(err)
    assert KEY not in str(err) and KEY not in repr(err) and KEY not in repr(err.args)
    assert err.__cause__ is None and err.__suppress_context__


def test_missing_env_var_names_it_before_any_request(replay: Replay, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("ZEP_API_KEY", raising=False)
    zep = ZepProvider(ENV, http_client=replay.client())
    with pytest.raises(ProviderError) as e:
        zep.setup("q1")
    assert ENV in str(e.value) and e.value.provider == "zep" and e.value.call == "setup"
    assert replay.requests == []


def test_the_hydra_config_instantiates(monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(REPO / "configs" / "memory" / "zep.yaml")
    assert cfg.api_key_env == "ZEP_API_KEY" and cfg.base_url is None
    monkeypatch.setenv("ZEP_API_KEY", KEY)
    zep = instantiate(cfg)
    assert isinstance(zep, ZepProvider)
    assert (zep.timeout_s, zep.scope_prefix, zep.concurrency, zep.reranker) == (
        cfg.timeout_s,
        cfg.scope_prefix,
        cfg.concurrency,
        cfg.reranker,
    )
    assert zep.capabilities().concurrency == cfg.concurrency
    assert KEY not in repr(vars(zep))  # the key is read when the client is built, never kept in settings
