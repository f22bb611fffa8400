"""Letta (`letta-client`) behind the provider contract, offline: the real SDK against replayed responses.

The fixture (tests/fixtures/hosted/letta.json) is written from the SDK's response types, not recorded: these tests
pin what the adapter sends and how it reads what the SDK parses, not the live service's behaviour.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from harness.memory.provider import MemorySession, MemoryTurn, Provenance, ProviderError
from tests.support.hosted_replay import FIXTURES, Replay, require_sdk
from tests.support.paths import REPO

require_sdk("letta_client")

from harness.memory.letta import LettaProvider  # noqa: E402

pytestmark = pytest.mark.hosted

ENV = "LME_TEST_LETTA_KEY"
KEY = "sk-let-test-0123456789abcdef"  # also echoed by the fixture's 401 body: it must come back masked
ERRORS = json.loads((FIXTURES / "letta.json").read_text())["errors"]
CONFIG = REPO / "configs" / "memory" / "letta.yaml"
MAY, JUNE, AS_OF = "2023-05-20T02:21:00Z", "2023-05-28T10:00:00Z", "2023-06-01T00:00:00Z"
AGENTS = r"/v1/agents/?"
PASSAGES = r"/v1/agents/agent-[^/]+/archival-memory"
SEARCH = r"/v1/agents/agent-[^/]+/archival-memory/search"


@pytest.fixture
def replay(monkeypatch: pytest.MonkeyPatch) -> Replay:
    monkeypatch.setenv(ENV, KEY)
    monkeypatch.delenv("LETTA_BASE_URL", raising=False)
    return Replay.load("letta")


def provider(replay: Replay, **kw: Any) -> LettaProvider:
    return LettaProvider(api_key_env=ENV, http_client=replay.client(), max_retries=0, **kw)


def sessions() -> list[MemorySession]:
    june = MemorySession("s2", JUNE, (MemoryTurn("user", "Miso chewed my charger."), MemoryTurn("assistant", "Oh no.")))
    may = MemorySession(
        "s1", MAY, (MemoryTurn("user", "I adopted a cat named Miso."), MemoryTurn("assistant", "Congratulations!"))
    )
    return [june, may]  # out of order: ingest must put them in date order


def fail_with(replay: Replay, method: str, path: str, status: int) -> None:
    replay.routes.insert(0, {"method": method, "path": path, "status": status, "body": ERRORS[str(status)]})


def test_every_request_carries_the_key_from_the_env_var(replay: Replay) -> None:
    p = provider(replay)
    p.setup("q1")
    p.ingest("q1", sessions())
    p.retrieve("q1", "cat?", 3, AS_OF)
    p.teardown("q1")
    assert replay.requests and not replay.unmatched
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in replay.requests)
    assert KEY not in repr(p) and KEY not in repr(vars(p))


def test_one_agent_per_unit_named_by_scope_and_deleted_on_teardown(replay: Replay) -> None:
    p = provider(replay, scope_prefix="bench-")
    p.setup("q1")
    p.setup("q2")
    created = replay.sent("POST", AGENTS)
    assert [r.body["name"] for r in created] == ["bench-q1", "bench-q2"]
    assert created[0].body["model"] == "openai/gpt-4o-mini"
    assert created[0].body["embedding"] == "openai/text-embedding-3-small"
    p.ingest("q1", sessions())
    p.ingest("q2", sessions()[:1])
    paths = {r.path.split("/")[3] for r in replay.sent("POST", PASSAGES)}
    assert paths == {"agent-00000000-0000-4000-8000-000000000001", "agent-00000000-0000-4000-8000-000000000002"}
    p.teardown("q2")
    assert [r.path for r in replay.sent("DELETE", r".*")] == ["/v1/agents/agent-00000000-0000-4000-8000-000000000002"]
    with pytest.raises(ProviderError, match="call setup first"):
        p.retrieve("q2", "cat?", 3, AS_OF)  # its agent is gone; q1's is not reused for it


def test_ingest_sends_every_turn_dated_with_provenance_in_date_order_and_never_the_question(replay: Replay) -> None:
    p = provider(replay)
    p.setup("q1")
    result = p.ingest("q1", sessions())
    assert result.ready and result.usage.input_tokens == 0 and result.usage.llm_calls == 0
    sent = [r.body for r in replay.sent("POST", PASSAGES)]
    assert [b["text"] for b in sent] == [
        f"[{MAY}] user: I adopted a cat named Miso.",
        f"[{MAY}] assistant: Congratulations!",
        f"[{JUNE}] user: Miso chewed my charger.",
        f"[{JUNE}] assistant: Oh no.",
    ]
    assert [b["created_at"] for b in sent] == [MAY, MAY, JUNE, JUNE]
    assert sent[3]["tags"] == ["lme-session:s2", "lme-turn:1", f"lme-date:{JUNE}"]
    assert not any("cat?" in json.dumps(r.body) for r in replay.requests)
    assert p.capabilities().supports("ready") is False  # insertion is synchronous


def test_retrieve_sends_top_k_and_the_as_of_filter_and_maps_items(replay: Replay) -> None:
    p = provider(replay)
    p.setup("q1")
    got = p.retrieve("q1", "What is my cat called?", 3, AS_OF)
    (search,) = replay.sent("GET", SEARCH)
    assert search.query["query"] == "What is my cat called?"
    assert search.query["top_k"] == "3"
    assert search.query["end_datetime"] == AS_OF
    assert [i.text for i in got.items] == [
        f"[{MAY}] user: I adopted a cat named Miso.",
        "[2023-07-01T09:00:00Z] user: Miso turned one today.",
        "A note the agent wrote itself.",
    ]
    assert got.items[0].provenance == Provenance("s1", 0, MAY)
    # dated after as_of, yet kept: the service's answer reaches the harness's leakage audit unfiltered
    assert got.items[1].provenance == Provenance("s9", 2, "2023-07-01T09:00:00Z")
    # no tags: no session or turn; the date from the service's timestamp
    assert got.items[2].provenance == Provenance(None, None, "2023-05-21T08:00:00Z")
    assert all(i.score is None for i in got.items)  # this search reports no score


@pytest.mark.parametrize(
    ("call", "method", "path", "status"),
    [
        ("setup", "POST", AGENTS, 500),
        ("ingest", "POST", PASSAGES, 401),
        ("retrieve", "GET", SEARCH, 401),
        ("teardown", "DELETE", r"/v1/agents/agent-[^/]+", 500),
    ],
)
def test_http_errors_are_one_provider_error_naming_letta_the_call_and_the_unit(
    replay: Replay, call: str, method: str, path: str, status: int
) -> None:
    p = provider(replay)
    if call != "setup":
        p.setup("q7")
    fail_with(replay, method, path, status)
    run = {
        "setup": lambda: p.setup("q7"),
        "ingest": lambda: p.ingest("q7", sessions()),
        "retrieve": lambda: p.retrieve("q7", "cat?", 3, AS_OF),
        "teardown": lambda: p.teardown("q7"),
    }[call]
    with pytest.raises(ProviderError) as err:
        run()
    e = err.value
    assert (e.provider, e.call, e.unit) == ("letta", call, "q7")
    assert str(status) in str(e)
    assert KEY not in str(e) and KEY not in repr(e) and KEY not in e.detail
    assert len(replay.sent(method, path)) == 1  # max_retries=0: one request, one error


def test_a_missing_env_var_is_named_before_any_request(replay: Replay, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV)
    p = provider(replay)
    with pytest.raises(ProviderError, match=ENV) as err:
        p.setup("q1")
    assert (err.value.provider, err.value.call, err.value.unit) == ("letta", "setup", "q1")
    assert replay.requests == []


def test_base_url_is_the_configured_server_else_the_cloud(replay: Replay, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LETTA_BASE_URL", "http://elsewhere:1")  # outside the config: never read
    local = provider(replay, base_url="http://localhost:8283").client().base_url
    assert (local.host, local.port) == ("localhost", 8283)
    assert provider(replay).client().base_url.host == "api.letta.com"


def test_the_hydra_config_instantiates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LETTA_API_KEY", KEY)
    p = instantiate(OmegaConf.load(CONFIG))
    assert isinstance(p, LettaProvider)
    assert (p.api_key_env, p.base_url, p.scope_prefix) == ("LETTA_API_KEY", None, "lme-")
    assert p.agent_embedding == "openai/text-embedding-3-small"
    assert KEY not in json.dumps(OmegaConf.to_container(OmegaConf.load(CONFIG)))


def test_capabilities(replay: Replay) -> None:
    caps = provider(replay, concurrency=4).capabilities()
    assert caps.name == "letta" and caps.version.startswith("letta-client 1.")
    assert caps.calls == frozenset({"setup", "ingest", "retrieve", "teardown", "attach"})
    assert caps.concurrency == 4 and caps.problems() == []


def test_attach_finds_an_earlier_processs_agent_by_name_and_retrieves_from_it(replay: Replay) -> None:
    p = provider(replay)  # a fresh process: it never created the agent
    assert "attach" in p.capabilities().calls
    assert p.attach("q9") is True
    (listed,) = replay.sent("GET", AGENTS)
    assert listed.query["name"] == "lme-q9"
    p.retrieve("q9", "cat?", 3, AS_OF)
    (search,) = replay.sent("GET", SEARCH)
    assert "agent-00000000-0000-4000-8000-000000000009" in search.path
    assert not replay.sent("POST", AGENTS) and not replay.sent("POST", PASSAGES)  # nothing ingested again


def test_attach_is_false_when_no_agent_has_the_units_name(replay: Replay) -> None:
    replay.routes.insert(0, {"method": "GET", "path": AGENTS, "body": []})
    p = provider(replay)
    assert p.attach("q9") is False
    with pytest.raises(ProviderError):  # not attached: the unit stays unknown
        p.retrieve("q9", "cat?", 3, AS_OF)


def test_teardown_of_a_unit_left_by_an_earlier_process_deletes_its_agent_found_by_name(replay: Replay) -> None:
    p = provider(replay)
    p.teardown("q9")
    (deleted,) = replay.sent("DELETE", r"/v1/agents/agent-[^/]+")
    assert deleted.path.endswith("agent-00000000-0000-4000-8000-000000000009")
    replay.routes.insert(0, {"method": "GET", "path": AGENTS, "body": []})
    p.teardown("q10")  # none by that name: nothing to delete
    assert len(replay.sent("DELETE", r"/v1/agents/agent-[^/]+")) == 1
