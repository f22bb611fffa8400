"""Built-in memory providers and the provider contestant (harness/memory/): isolation, as-of, the fair reader,
the context cut, ingest apart from answer, and `mode=memory memory=bm25` end to end on the fake endpoint."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.contestants.base import CaseHistory, Question, Toolkit
from harness.data.longmemeval import parse_cases
from harness.llm.types import ChatResult, Usage
from harness.memory.builtin import FullContextProvider, IndexProvider
from harness.memory.contestant import ProviderContestant, cut_to_cap
from harness.memory.provider import (
    Capabilities,
    Ingest,
    MemoryItem,
    MemorySession,
    MemoryTurn,
    Provenance,
    ProviderBase,
    ProviderError,
    Retrieval,
)
from harness.records import load_records
from harness.session.events import Session
from harness.session.tokens import o200k_counter
from tests.support.dataset_rows import make_row
from tests.support.fake_run import conf_dir, run_fake


def _sessions(tag: str) -> list[MemorySession]:
    return [
        MemorySession(f"{tag}-1", "2023-05-01T10:00:00Z", (MemoryTurn("user", f"my cat is named CANARY{tag}"),)),
        MemorySession(f"{tag}-2", "2023-06-01T10:00:00Z", (MemoryTurn("user", f"my dog is named LATE{tag}"),)),
    ]


@pytest.mark.parametrize("make", [IndexProvider, FullContextProvider], ids=lambda c: c.__name__)
def test_builtin_providers_isolate_units_and_respect_as_of(make) -> None:
    p = make()
    assert p.capabilities().problems() == []
    for tag in ("A", "B"):
        p.setup(tag)
        assert p.ingest(tag, _sessions(tag)).ready
    for tag, other in (("A", "B"), ("B", "A")):
        got = " ".join(
            i.text for i in p.retrieve(tag, "what is my cat named? CANARYA CANARYB", 5, "2023-05-15T00:00:00Z").items
        )
        assert f"CANARY{tag}" in got and f"CANARY{other}" not in got
        assert "LATE" not in got  # dated after as_of
        later = p.retrieve(tag, "what is my dog named? LATEA LATEB", 5, "2023-07-01T00:00:00Z").items
        assert f"LATE{tag}" in " ".join(i.text for i in later)
        assert all(i.provenance and i.provenance.session_id.startswith(tag) for i in later)
    p.teardown("A")
    with pytest.raises(ProviderError, match="unknown unit"):
        p.retrieve("A", "cat", 5, "2023-07-01T00:00:00Z")
    assert p.retrieve("B", "cat CANARYB", 5, "2023-07-01T00:00:00Z").items  # B kept


def test_the_bm25_provider_ranks_best_first_and_names_turns() -> None:
    p = IndexProvider()
    p.setup("u")
    p.ingest(
        "u",
        [
            MemorySession(
                "s1",
                "2023-05-01T10:00:00Z",
                (MemoryTurn("user", "I like tea"), MemoryTurn("assistant", "Paris trip was in May")),
            )
        ],
    )
    items = p.retrieve("u", "when was the Paris trip", 1, "2023-05-30T00:00:00Z").items
    assert len(items) == 1 and "Paris" in items[0].text
    assert items[0].provenance == Provenance("s1", 1, "2023-05-01T10:00:00Z")


def test_the_cut_keeps_rank_order_whole_items_then_cuts_one_and_records_it() -> None:
    count = o200k_counter().count
    items = [MemoryItem("alpha " * 50), MemoryItem("beta " * 50), MemoryItem("gamma " * 50)]
    cut = cut_to_cap(items, 75, count)
    assert cut.kept[0] == items[0].text and cut.kept[1].startswith("beta") and len(cut.kept) == 2
    assert sum(count(t) for t in cut.kept) <= 75
    assert cut.info["truncated"] and cut.info["kept_items"] == 2 and cut.info["retrieved_items"] == 3
    assert not cut_to_cap(items, 10_000, count).info["truncated"]


class Recorder(ProviderBase):
    """A provider that records every call and returns one item from its unit, one dated in the future and one
    from another unit's memory it wrongly keeps (the contestant cannot tell the last; provider-check does)."""

    def __init__(self, ready_after: int = 0) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.ready_after = ready_after

    def capabilities(self) -> Capabilities:
        return Capabilities("recorder", "0")

    def setup(self, unit: str) -> None:
        self.calls.append(("setup", unit, ""))

    def ingest(self, unit: str, sessions) -> Ingest:
        self.calls.append(("ingest", unit, json.dumps([[t.content for t in s.turns] for s in sessions])))
        return Ingest(ready=self.ready_after == 0)

    def ready(self, unit: str) -> bool:
        self.ready_after -= 1
        self.calls.append(("ready", unit, ""))
        return self.ready_after <= 0

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        self.calls.append(("retrieve", unit, query))
        return Retrieval(
            (
                MemoryItem("OLDFACT the user lives in Oslo", 2.0, Provenance("s0", 0, "2023-05-01T00:00:00Z")),
                MemoryItem("FUTUREFACT the user moved", 1.0, Provenance("s9", 0, "2030-01-01T00:00:00Z")),
            )
        )

    def teardown(self, unit: str) -> None:
        self.calls.append(("teardown", unit, ""))


class Reader:
    model = "reader"

    def __init__(self) -> None:
        self.sent: list[str] = []

    def chat(self, messages, *, tools=None, purpose: str = "answer", **params: Any) -> ChatResult:
        self.sent.append(json.dumps(list(messages)))
        return ChatResult(" Oslo ", (), Usage(11, 2), 0.0, self.model, "stop", purpose=purpose)


def _case():
    row = make_row(question="QUESTIONCANARY where do I live?")
    row["question_date"] = "2023/05/30 (Tue) 10:00"
    row["haystack_dates"] = ["2023/05/01 (Mon) 10:00"]
    return parse_cases(json.dumps([row]).encode(), "x")[0]


def _kit(reader: Reader) -> Toolkit:
    return Toolkit(model=reader, generation={"temperature": 0}, context_window=100_000, token_counter=o200k_counter())


def test_the_contestant_ingests_without_the_question_answers_fairly_and_tears_down() -> None:
    case, reader, provider = _case(), Reader(), Recorder(ready_after=2)
    s = Session(id="x", user_id=case.question_id)
    s.extend(case.events())
    c = ProviderContestant(provider, ready_poll_s=0)
    ingested = c.ingest(CaseHistory.of(case, s), _kit(reader))
    assert [k for k, _, _ in provider.calls] == ["setup", "ingest", "ready", "ready"]
    assert "QUESTIONCANARY" not in json.dumps(provider.calls) and not reader.sent
    (trace,) = ingested.trace
    assert trace["provider"] == "recorder" and trace["variant"] == "fair" and trace["ready_polls"] == 2
    out = c.answer(ingested.memory, Question.of(case, case.question), _kit(reader))
    unit = provider.calls[0][1]  # opaque, and per run: runs sharing a service never share a unit
    assert case.question_id not in unit and ingested.trace[0]["unit"] == unit
    other_run = Recorder()
    ProviderContestant(other_run, ready_poll_s=0).ingest(CaseHistory.of(case, s), _kit(reader))
    assert other_run.calls[0][1] != unit
    assert {u for _, u, _ in provider.calls} == {unit}
    assert provider.calls[-2] == ("retrieve", unit, case.question)
    assert provider.calls[-1] == ("teardown", unit, "")
    assert out.prediction == "Oslo" and len(out.calls) == 1
    (sent,) = reader.sent
    assert "OLDFACT" in sent and "FUTUREFACT" not in sent  # dated after the question: never shown
    assert "2023/05/30 (Tue) 10:00" in sent and "I will give you several history chats" in sent
    (rt,) = out.tool_trace
    assert rt["name"] == "memory_retrieve" and rt["after_as_of"] == 1 and rt["returned"] == 2 and rt["top_k"] == 10
    assert out.truncation is not None and out.truncation["kept_items"] == 1


def test_changed_settings_or_native_answer_are_labelled_variants() -> None:
    assert ProviderContestant(Recorder(), top_k=3).variant == "settings"
    assert ProviderContestant(Recorder()).variant == "fair"
    with pytest.raises(ProviderError, match="native_answer"):
        ProviderContestant(Recorder(), native_answer=True).ingest(
            CaseHistory("u", Session(id="x", user_id="u"), ()), _kit(Reader())
        )
    with pytest.raises(ValueError, match="memory=<name>"):
        ProviderContestant(None)  # type: ignore[arg-type]


def test_a_failed_ingest_tears_the_unit_down() -> None:
    class Failing(Recorder):
        def ingest(self, unit, sessions):
            raise ProviderError("recorder", "ingest", unit, "boom")

    p = Failing()
    with pytest.raises(ProviderError, match="boom"):
        ProviderContestant(p).ingest(CaseHistory("u", Session(id="x", user_id="u"), ()), _kit(Reader()))
    assert [k for k, _, _ in p.calls] == ["setup", "teardown"] and p.calls[0][1] == p.calls[1][1]


@pytest.mark.e2e
@pytest.mark.parametrize("memory", ["bm25", "full_context", "summary", "summary_tools"])
def test_mode_memory_runs_end_to_end_through_hydra(tmp_path, memory) -> None:
    rc, requests = run_fake(tmp_path, ["mode=memory", f"memory={memory}"])
    assert rc == 0
    recs = load_records(tmp_path / "run" / "records.jsonl")
    assert {r["mode"] for r in recs} == {"memory"} and len(recs) == 2
    assert all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    for r in recs:
        (trace,) = r["ingest"]["trace"]
        assert trace["provider"] == memory and trace["variant"] == "fair" and r["ingest"]["calls"] == 0
        (rt,) = r["tool_calls"]
        assert rt["name"] == "memory_retrieve" and rt["returned"] >= 1 and rt["after_as_of"] == 0
        assert r["usage"]["answer_calls"] == 1
    readers = [q for q in requests if "History Chats" in json.dumps(q.get("messages"))]
    assert len(readers) == 2  # one reader call per case, with LongMemEval's answer prompt
    if memory.startswith("summary"):  # the summary engine ran at ingest, its cost the provider's ingest usage
        for r in recs:
            usage = r["ingest"]["trace"][0]["usage"]
            assert usage["llm_calls"] >= 1 and usage["input_tokens"] > 0
            items = r["tool_calls"][0]["items"]
            assert "session_id" not in items[0]  # item 1: the summary, dated by the newest session it covers
            assert items[0]["date"]
        summaries = [
            q
            for q in requests
            if "[Session date:" in (text := json.dumps(q.get("messages"))) and "History Chats" not in text
        ]
        assert len(summaries) == 2  # one generation per case


def test_memory_configs_compose_into_fair_contestants() -> None:
    from hydra import compose, initialize_config_dir

    from harness.config_files import CONFIG_DIR
    from runners.modes import contestants_from_config

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        rag = compose(config_name="config", overrides=["mode=memory", "memory=rag", "retrieval=bm25"])
        http = compose(
            config_name="config", overrides=["mode=memory", "memory=http", "memory.url=http://127.0.0.1:1/v1"]
        )
        plain = compose(config_name="config")
    (c,) = contestants_from_config(rag.mode)
    assert isinstance(c, ProviderContestant) and c.name == "memory" and c.variant == "fair"
    assert isinstance(c.provider, IndexProvider) and c.provider.name == "rag" and c.provider.retriever.name == "bm25"
    (h,) = contestants_from_config(http.mode)
    assert type(h.provider).__name__ == "HttpProvider" and h.provider.url == "http://127.0.0.1:1/v1"
    assert "memory" not in plain  # no provider unless mode=memory asks for one: other runs' configs are unchanged


def test_the_native_answer_variant_uses_the_providers_answer_and_says_so() -> None:
    from harness.memory.provider import REQUIRED_CALLS, ProviderAnswer

    class Answers(Recorder):
        def capabilities(self) -> Capabilities:
            return Capabilities("answers", "1", REQUIRED_CALLS | {"answer"})

        def answer(self, unit: str, query: str, as_of: str) -> ProviderAnswer:
            self.calls.append(("answer", unit, f"{query}|{as_of}"))
            return ProviderAnswer(" Bergen ")

    case, reader, provider = _case(), Reader(), Answers()
    c = ProviderContestant(provider, native_answer=True)
    s = Session(id="x", user_id=case.question_id)
    s.extend(case.events())
    ingested = c.ingest(CaseHistory.of(case, s), _kit(reader))
    out = c.answer(ingested.memory, Question.of(case, case.question), _kit(reader))
    assert out.prediction == "Bergen" and out.calls == [] and not reader.sent  # the shared reader is not used
    assert provider.calls[-2] == ("answer", ingested.memory, f"{case.question}|2023-05-30T10:00:00Z")
    assert ingested.trace[0]["variant"] == "native_answer" and out.tool_trace[0]["variant"] == "native_answer"


class FlakyBM25(IndexProvider):
    """BM25 whose first ingest of a run fails (a provider error, as a timeout or a 500 would be)."""

    failures = 0

    def ingest(self, unit: str, sessions):
        if FlakyBM25.failures == 0:
            FlakyBM25.failures += 1
            raise ProviderError("flaky", "ingest", unit, "HTTP 503: overloaded")
        return super().ingest(unit, sessions)


@pytest.mark.e2e
def test_a_provider_failure_is_a_failed_case_never_a_wrong_answer(tmp_path) -> None:
    conf = conf_dir(tmp_path, "memory", {"flaky.yaml": f"_target_: {__name__}.FlakyBM25\nname: flaky\n"})
    FlakyBM25.failures = 0
    rc, _ = run_fake(tmp_path, ["mode=memory", "memory=flaky"], conf=conf)
    assert rc == 3  # some case failed: recorded, retried by the next run
    recs = load_records(tmp_path / "run" / "records.jsonl")
    failed = [r for r in recs if r["status"] != "ok"]
    assert len(recs) == 2 and len(failed) == 1
    assert "memory provider 'flaky': ingest" in failed[0]["error"] and "HTTP 503" in failed[0]["error"]
    assert not failed[0].get("metrics")  # not scored: never counted as a wrong answer


def test_a_failed_teardown_is_recorded_with_the_answer_not_raised_over_it() -> None:
    class StickyTeardown(Recorder):
        def teardown(self, unit: str) -> None:
            raise ProviderError("recorder", "teardown", unit, "HTTP 500: disk full")

    case, reader = _case(), Reader()
    c = ProviderContestant(StickyTeardown())
    s = Session(id="x", user_id=case.question_id)
    s.extend(case.events())
    out = c.answer(
        c.ingest(CaseHistory.of(case, s), _kit(reader)).memory, Question.of(case, case.question), _kit(reader)
    )
    assert out.prediction == "Oslo" and "disk full" in out.tool_trace[0]["teardown_error"]


def test_a_provider_with_its_own_llm_gets_the_runs_model_once_before_its_first_unit() -> None:
    """mem0 extracts facts with an LLM while ingesting: the contestant binds the run's answer model to it (one
    client, one cache, one account) once, before setup; a provider without `bind_model` is left alone."""

    class Binding(Recorder):
        def __init__(self) -> None:
            super().__init__()
            self.bound: list[Any] = []

        def bind_model(self, llm: Any) -> None:
            self.calls.append(("bind_model", "", ""))
            self.bound.append(llm)

    case, reader, provider = _case(), Reader(), Binding()
    s = Session(id="x", user_id=case.question_id)
    s.extend(case.events())
    c = ProviderContestant(provider, ready_poll_s=0)
    for _ in range(2):
        c.ingest(CaseHistory.of(case, s), _kit(reader))
    assert provider.bound == [reader] and provider.calls[0][0] == "bind_model"
    assert [k for k, _, _ in provider.calls].count("setup") == 2
    ProviderContestant(Recorder(), ready_poll_s=0).ingest(CaseHistory.of(case, s), _kit(reader))  # no hook: fine


def test_providers_of_one_multirun_get_their_own_run_directories() -> None:
    """`-m memory=bm25,full_context` runs each provider in its own directory, named by its provider (the memory
    group is result-bearing): they never collide on one directory's records."""
    from runners.rundir import overrides_dirname

    names = {m: overrides_dirname(["mode=memory", f"memory={m}"], []) for m in ("bm25", "full_context", "summary")}
    assert names["bm25"] == "memory=bm25,mode=memory"
    assert len(set(names.values())) == 3
