"""mem0 (`mem0ai`, the `memory` extra) for real behind the provider contract, against the fake OpenAI endpoint.

Nothing of mem0 is mocked: its own `Memory.add` pipeline sends its own extraction prompt through the project's
client layer to a loopback server that answers with deterministic JSON facts; its Qdrant (in-process) stores
them; `Memory.search` finds them. Skipped when mem0 is not installed, unless LME_REQUIRE_MEM0=1 (CI) makes
that a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.data.longmemeval import Case, find_local, parse_cases, read_json_bytes
from harness.llm.client import LLMClient
from harness.llm.loopback import Reply
from harness.memory.provider import MemorySession, MemoryTurn, ProviderError, iso_date
from harness.retrieval.embedders import HashingEmbedder
from harness.testing.fake_openai import FakeOpenAIServer, completion, mem0_extraction
from harness.testing.fake_openai import mem0_new_messages as _new_messages

# Looked up, not imported: mem0 must first be imported by the adapter, which turns its telemetry off.
if importlib.util.find_spec("mem0") is None:
    if os.environ.get("LME_REQUIRE_MEM0") == "1":  # CI: a missing extra fails, never a silent skip
        raise ImportError("LME_REQUIRE_MEM0=1 but mem0ai is not installed (pip install -e '.[memory]')")
    pytest.skip("mem0ai not installed (pip install -e '.[memory]')", allow_module_level=True)

from harness.memory.mem0_provider import INGEST_PURPOSE, Mem0Provider  # noqa: E402
from tests.support.paths import REPO

pytestmark = pytest.mark.mem0


def extractor(req: dict[str, Any]) -> Reply:
    """A deterministic stand-in for mem0's extraction LLM (the fake endpoint's): one fact per user line, verbatim."""
    return mem0_extraction(req)


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(extractor) as srv:
        yield srv


@pytest.fixture
def provider(endpoint: FakeOpenAIServer) -> Mem0Provider:
    client = LLMClient(base_url=endpoint.base_url, model="fake-model", api_key="k", max_retries=0)
    return Mem0Provider(HashingEmbedder(256), client, threshold=0.0)


def client_of(p: Mem0Provider) -> LLMClient:
    assert isinstance(p.llm, LLMClient)
    return p.llm


def session(sid: str, date: str, *user_lines: str) -> MemorySession:
    turns: list[MemoryTurn] = []
    for line in user_lines:
        turns += [MemoryTurn("user", line), MemoryTurn("assistant", "Noted.")]
    return MemorySession(sid, date, tuple(turns))


MAY = "2023-05-20T02:21:00Z"
JUNE = "2023-06-01T10:00:00Z"


def test_mem0_stores_and_retrieves_through_its_own_pipeline(provider: Mem0Provider, endpoint: FakeOpenAIServer):
    provider.setup("u1")
    ing = provider.ingest(
        "u1",
        [
            session("s2", JUNE, "I moved to Lisbon in March."),
            session("s1", MAY, "I take yoga classes every Tuesday.", "My sister Ana is a dentist."),
        ],
    )
    # one extraction call per exchange (turns_per_add=2), counted through the client layer
    assert ing.usage.llm_calls == 3 and ing.usage.input_tokens == 300 and ing.usage.output_tokens == 21
    assert client_of(provider).stats.tokens[INGEST_PURPOSE]["calls"] == 3
    chats = [r for r in endpoint.requests if r["_path"].endswith("/chat/completions")]
    assert len(chats) == 3
    # mem0's own extraction prompt and JSON mode went out; sessions in date order with their dates
    from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT

    assert all(r["messages"][0]["content"] == ADDITIVE_EXTRACTION_PROMPT for r in chats)
    assert all(r["response_format"] == {"type": "json_object"} for r in chats)
    assert "yoga" in _new_messages(chats[0]) and MAY in chats[0]["messages"][-1]["content"]
    # the prompt's own date fields are the session's day, not today's (mem0 writes today's by itself)
    assert "## Observation Date\n2023-05-20\n" in chats[0]["messages"][-1]["content"]
    assert "## Current Date\n2023-05-20\n" in chats[0]["messages"][-1]["content"]
    assert "Lisbon" in _new_messages(chats[2]) and JUNE in chats[2]["messages"][-1]["content"]

    got = provider.retrieve("u1", "Which city did I move to, Lisbon?", 2, "2023-07-01T00:00:00Z")
    assert len(got.items) == 2
    top = got.items[0]
    assert top.text == "I moved to Lisbon in March."
    assert top.provenance is not None and (top.provenance.session_id, top.provenance.date) == ("s2", JUNE)
    assert top.provenance.turn_index is None  # a two-turn chunk has no single turn index
    assert got.usage.llm_calls == 0  # mem0's search makes no LLM call
    # what mem0 stored for the unit (get_all): every extracted memory, with its session and date
    stored = provider.stored("u1")
    assert {i.text for i in stored} >= {"I moved to Lisbon in March."} and len(stored) >= 3
    assert all(i.provenance and i.provenance.session_id in ("s1", "s2") and i.provenance.date for i in stored)
    provider.setup("u2")
    assert provider.stored("u2") == ()  # another unit's memories are never listed


def test_as_of_hides_memories_dated_after_the_question(provider: Mem0Provider):
    provider.setup("u1")
    provider.ingest("u1", [session("s1", MAY, "I take yoga classes."), session("s2", JUNE, "I moved to Lisbon.")])
    before = provider.retrieve("u1", "Lisbon yoga", 10, "2023-05-25T00:00:00Z")
    assert [i.text for i in before.items] == ["I take yoga classes."]
    on_the_day = provider.retrieve("u1", "Lisbon yoga", 10, JUNE)  # as of = the session's own date: included
    assert {i.text for i in on_the_day.items} == {"I take yoga classes.", "I moved to Lisbon."}


def test_units_are_isolated_and_teardown_forgets(provider: Mem0Provider):
    canary = "The canary word is zebracrossing42."
    provider.setup("a")
    provider.setup("b")
    provider.ingest("a", [session("s1", MAY, canary)])
    provider.ingest("b", [session("s1", MAY, "I like tea.")])
    assert [i.text for i in provider.retrieve("a", "canary zebracrossing42", 5, JUNE).items] == [canary]
    assert all("zebracrossing42" not in i.text for i in provider.retrieve("b", "canary zebracrossing42", 5, JUNE).items)
    provider.teardown("a")
    with pytest.raises(ProviderError, match=r"'mem0'.*retrieve for unit 'a'.*setup first"):
        provider.retrieve("a", "canary", 5, JUNE)
    provider.setup("a")
    assert provider.retrieve("a", "canary zebracrossing42", 5, JUNE).items == ()
    assert [i.text for i in provider.retrieve("b", "tea", 5, JUNE).items] == ["I like tea."]


def test_single_turn_chunks_carry_the_turn_index(endpoint: FakeOpenAIServer):
    client = LLMClient(base_url=endpoint.base_url, model="fake-model", api_key="k", max_retries=0)
    p = Mem0Provider(HashingEmbedder(256), client, threshold=0.0, turns_per_add=1)
    p.setup("u")
    p.ingest("u", [session("s1", MAY, "I own a red bicycle.", "I play the cello.")])
    (item,) = p.retrieve("u", "cello", 1, JUNE).items
    assert item.text == "I play the cello." and item.provenance is not None
    assert (item.provenance.session_id, item.provenance.turn_index) == ("s1", 2)


def test_json_mode_off_drops_the_response_format(endpoint: FakeOpenAIServer):
    client = LLMClient(base_url=endpoint.base_url, model="fake-model", api_key="k", max_retries=0)
    p = Mem0Provider(HashingEmbedder(64), client, threshold=0.0, json_mode=False)
    p.setup("u")
    p.ingest("u", [session("s1", MAY, "I like chess.")])
    assert "response_format" not in endpoint.requests[-1]
    assert [i.text for i in p.retrieve("u", "chess", 3, JUNE).items] == ["I like chess."]


def test_extraction_replies_mem0_cannot_parse_are_counted_not_silent():
    """mem0 logs an unparsable extraction reply and stores nothing; the usage says how many, per ingest."""
    replies = iter(
        [
            "I'm sorry, here are the facts: none",
            '```json\n{"memory": [{"text": "I like chess."}]}\n```',
            '{"memory": [{"text": "half',
        ]
    )

    def sometimes_prose(req: dict[str, Any]) -> Reply:
        return completion(next(replies), prompt_tokens=100, completion_tokens=9)

    with FakeOpenAIServer(sometimes_prose) as srv:
        client = LLMClient(base_url=srv.base_url, model="fake-model", api_key="k", max_retries=0)
        p = Mem0Provider(HashingEmbedder(64), client, threshold=0.0)
        p.setup("u")
        ing = p.ingest("u", [session("s1", MAY, "I like tea.", "I like chess.", "I like go.")])
        assert ing.usage.llm_calls == 3 and ing.usage.unusable_replies == 2  # prose and a cut-off JSON
        assert [i.text for i in p.stored("u")] == ["I like chess."]  # the fenced JSON was used
        p.setup("v")
        assert p.ingest("v", []).usage.unusable_replies == 0  # counted per ingest, not carried over


def test_a_failing_llm_is_one_provider_error_naming_the_unit():
    with FakeOpenAIServer(lambda req: Reply(status=500, body={"error": {"message": "boom"}})) as srv:
        client = LLMClient(base_url=srv.base_url, model="fake-model", api_key="k", max_retries=0)
        p = Mem0Provider(HashingEmbedder(64), client)
        p.setup("u9")
        with pytest.raises(ProviderError, match=r"memory provider 'mem0': ingest for unit 'u9' failed: .*500"):
            p.ingest("u9", [session("s1", MAY, "hello")])


def test_telemetry_is_off_and_only_loopback_is_contacted(endpoint: FakeOpenAIServer, monkeypatch):
    import mem0.memory.telemetry as telemetry

    assert telemetry.MEM0_TELEMETRY is False
    peers: list[Any] = []
    connect = socket.socket.connect

    def guarded(sock: socket.socket, addr: Any) -> Any:
        peers.append(addr)
        return connect(sock, addr)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    client = LLMClient(base_url=endpoint.base_url, model="fake-model", api_key="k", max_retries=0)
    p = Mem0Provider(HashingEmbedder(64), client, threshold=0.0)
    p.setup("u")
    p.ingest("u", [session("s1", MAY, "I like chess.")])
    assert [i.text for i in p.retrieve("u", "chess", 3, JUNE).items] == ["I like chess."]
    p.teardown("u")
    assert peers and all(a[0] == "127.0.0.1" for a in peers), peers


def _sessions(case: Case) -> list[MemorySession]:
    return [
        MemorySession(sid, iso_date(date), tuple(MemoryTurn(t.role, t.content) for t in turns))
        for sid, date, turns in zip(case.session_ids, case.session_dates, case.sessions, strict=True)
    ]


def test_small_longmemeval_cases_end_to_end(provider: Mem0Provider, endpoint: FakeOpenAIServer):
    """Three of the smallest oracle cases: every case's evidence comes back for its question, never the question
    in what ingest sent, and nothing of another case."""
    path = find_local("longmemeval_oracle_single_session_user.json.gz")
    if path is None:
        pytest.skip("shared LongMemEval oracle file not present")
    cases = sorted(parse_cases(read_json_bytes(path), str(path)), key=lambda c: (c.n_turns, c.question_id))[:3]
    for c in cases:
        provider.setup(c.question_id)
        before = len(endpoint.requests)
        ing = provider.ingest(c.question_id, _sessions(c))
        sent = json.dumps(endpoint.requests[before:], ensure_ascii=False)
        assert c.question not in sent
        assert ing.usage.llm_calls == sum((len(s) + 1) // 2 for s in c.sessions)
    for c in cases:
        got = provider.retrieve(c.question_id, c.question, 5, iso_date(c.question_date))
        assert got.items, c.question_id
        assert {i.provenance.session_id for i in got.items if i.provenance} <= set(c.session_ids)
        assert any(i.provenance and i.provenance.session_id in c.answer_session_ids for i in got.items)
        provider.teardown(c.question_id)


def test_the_hydra_config_builds_it_and_the_run_model_is_bound_later(endpoint: FakeOpenAIServer):
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(REPO / "configs" / "memory" / "mem0.yaml")
    cfg.embedder = {"_target_": "harness.retrieval.embedders.HashingEmbedder", "dim": 64}
    p = instantiate(cfg)
    assert isinstance(p, Mem0Provider) and p.llm is None
    p.setup("u")
    with pytest.raises(ProviderError, match=r"ingest for unit 'u' failed: no model bound"):
        p.ingest("u", [session("s1", MAY, "I like chess.")])
    client = LLMClient(base_url=endpoint.base_url, model="fake-model", api_key="k", max_retries=0)
    p.bind_model(client)
    assert p.ingest("u", [session("s1", MAY, "I like chess.")]).usage.llm_calls == 1
    chat = endpoint.requests[-1]
    assert (chat["temperature"], chat["max_tokens"]) == (0, 1024)  # the config's generation settings went out
    assert [i.text for i in p.retrieve("u", "chess", 3, JUNE).items] == ["I like chess."]


def test_equal_inputs_make_equal_requests(endpoint: FakeOpenAIServer):
    """Nothing of the day or of the run (ids) reaches mem0's prompts: the response cache and replay hold."""
    client = LLMClient(base_url=endpoint.base_url, model="fake-model", api_key="k", max_retries=0)
    history = [session("s1", MAY, "I take yoga classes.", "I like tea."), session("s2", JUNE, "I moved to Lisbon.")]
    sent = []
    for unit in ("first", "second"):
        p = Mem0Provider(HashingEmbedder(64), client, threshold=0.0)
        p.setup(unit)
        before = len(endpoint.requests)
        p.ingest(unit, history)
        sent.append([{k: v for k, v in r.items() if k != "_auth"} for r in endpoint.requests[before:]])
    assert len(sent[0]) == 3 and sent[0] == sent[1]


# A kept store (`keep_units_in`, the run directory's `memory-store.<contestant>/`): units outlive the provider.


def _kept(endpoint: FakeOpenAIServer, store: Path) -> Mem0Provider:
    client = LLMClient(base_url=endpoint.base_url, model="fake-model", api_key="k", max_retries=0)
    p = Mem0Provider(HashingEmbedder(64), client, threshold=0.0)
    p.keep_units_in(store)
    return p


def test_a_kept_store_lets_the_next_provider_attach_an_ingested_unit_without_extracting_again(
    endpoint: FakeOpenAIServer, tmp_path: Path
):
    first = _kept(endpoint, tmp_path / "store")
    assert "attach" in first.capabilities().calls
    for unit, line in (("u1", "I take yoga classes on Tuesdays."), ("u2", "I drink green tea every morning.")):
        first.setup(unit)
        first.ingest(unit, [session("s-" + unit, MAY, line)])
    shown = [i.text for i in first.retrieve("u1", "yoga classes", 3, JUNE).items]
    assert shown == ["I take yoga classes on Tuesdays."]
    first.close()  # as a killed process would leave it: the store on disk, the units not torn down

    sent = len(endpoint.requests)
    second = _kept(endpoint, tmp_path / "store")
    assert not second.attach("never-set-up")
    assert second.attach("u1")
    assert [i.text for i in second.retrieve("u1", "yoga classes", 3, JUNE).items] == shown
    assert len(endpoint.requests) == sent  # nothing extracted again
    # a unit of the earlier process that is not attached is torn down by user id: its memories are gone
    second.teardown("u2")
    assert not second.attach("u2")
    second.setup("u2")
    assert second.stored("u2") == ()
    second.close()


def test_an_in_memory_provider_offers_no_attach(provider: Mem0Provider):
    assert "attach" not in provider.capabilities().calls
    provider.setup("u")
    assert not provider.attach("u")


def test_a_kept_store_is_chosen_before_the_first_unit_and_a_damaged_unit_table_is_one_error(
    endpoint: FakeOpenAIServer, tmp_path: Path
):
    client = LLMClient(base_url=endpoint.base_url, model="fake-model", api_key="k", max_retries=0)
    p = Mem0Provider(HashingEmbedder(64), client, threshold=0.0)
    p.setup("u")
    with pytest.raises(ProviderError, match="after a unit was set up"):
        p.keep_units_in(tmp_path / "late")
    for n, bad in enumerate(("{not json", '["u1"]', '{"u1": 3}')):
        store = tmp_path / f"store{n}"
        store.mkdir()
        (store / "units.json").write_text(bad)
        with pytest.raises(ProviderError, match=r"units\.json"):
            Mem0Provider(HashingEmbedder(64), client).keep_units_in(store)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generated_unit_histories_across_processes_keep_exactly_each_units_own_memories(
    endpoint: FakeOpenAIServer, tmp_path: Path, seed: int
):
    """A probe of the kept store with generated histories: seeded random setup / ingest / teardown / attach over a
    few units, with the store closed and reopened (a new process) between rounds. After every step each unit the
    process holds has exactly the facts a plain model of it says (never another unit's), the store holds under a
    unit's user id nothing else (a torn-down or replaced unit leaves nothing behind), `attach` succeeds exactly for
    a unit an earlier process left and nobody has taken over since, and an attach sends no extraction call."""
    import random

    rng = random.Random(seed)
    store = tmp_path / "store"
    units = ["u1", "u2", "u3"]
    left: dict[str, set[str]] = {}  # units earlier processes left in the store, with their facts
    serial = attached = 0
    for _round in range(4):
        p = _kept(endpoint, store)
        held: dict[str, set[str]] = {}  # units this process holds (set up or attached), with their facts
        ops = [("attach", u) for u in units if rng.random() < 0.6]  # a resumed run attaches first
        kinds = ["setup", "setup", "ingest", "ingest", "ingest", "teardown", "attach"]
        ops += [(rng.choice(kinds), rng.choice(units)) for _ in range(8)]
        for op, unit in ops:
            sent = len(endpoint.requests)
            if op == "setup":
                p.setup(unit)
                left.pop(unit, None)
                held[unit] = set()
            elif op == "ingest" and unit in held:
                serial += 1
                fact = f"Fact number {serial} belongs to {unit} and says the colour is {rng.choice(['red', 'blue'])}."
                p.ingest(unit, [session(f"s{serial}", MAY, fact)])
                held[unit].add(fact)
            elif op == "teardown":
                p.teardown(unit)
                left.pop(unit, None)
                held.pop(unit, None)
            elif op == "attach":
                expected = unit in left and unit not in held
                assert p.attach(unit) is expected, (seed, _round, unit)
                if expected:
                    held[unit] = left.pop(unit)
                    attached += 1
                assert len(endpoint.requests) == sent  # attaching extracts nothing
            for u in units:
                facts = held.get(u, left.get(u, set()))
                everything = p.memory.get_all(filters={"user_id": u}, top_k=1000)["results"]
                assert {m["memory"] for m in everything} == facts, (seed, _round, op, u)
                if u in held:
                    assert {i.text for i in p.stored(u)} == facts, (seed, _round, op, u)
                    shown = {i.text for i in p.retrieve(u, "Fact number colour", 50, JUNE).items}
                    assert shown <= facts, (seed, _round, op, u)
        p.close()
        left.update(held)  # what this process held outlives it
    assert attached > 0  # the draws did exercise attach
