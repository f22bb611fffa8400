"""The contestant contract (harness/contestants/base.py), passed by every built-in contestant: ingest never
receives the question, a case's memory is never visible to another case, ingest's calls are kept apart from
answer's. Then a toy contestant defined here, selected through a Hydra `mode=` config, runs end to end."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from harness.contestants.base import (
    Answer,
    CaseHistory,
    DatedSession,
    Ingested,
    Question,
    Toolkit,
    question_message,
)
from harness.data.longmemeval import parse_cases
from harness.llm.types import ChatResult, Usage
from harness.records import load_records
from harness.retrieval.retriever import Retriever
from harness.session.events import Session
from harness.session.store import InMemoryStore
from harness.session.summary import Summarizer, SummaryPrompt
from harness.session.tokens import o200k_counter
from runners.modes import LongContextMode, SummaryMode, SummaryOnDemandMode
from runners.official_mode import LongMemEvalOfficialMode
from runners.summaries import SummaryProvider
from tests.support.dataset_rows import make_row
from tests.support.fake_run import conf_dir, run_fake

MARK = re.compile(r"MARK-[A-Z]+")


class Spy:
    """A ChatModel that records every request with the phase it was made in. A summary names every marker of
    what it summarized (so a memory built from a case carries that case's markers); with tools offered it
    searches for the markers once, then answers."""

    model = "spy"

    def __init__(self) -> None:
        self.phase = "ingest"
        self.calls: list[tuple[str, str, str]] = []  # (phase, purpose, request as JSON)

    def chat(self, messages, *, tools=None, purpose: str = "answer", **params: Any) -> ChatResult:
        text = json.dumps({"messages": list(messages), "tools": tools, "params": params})
        self.calls.append((self.phase, purpose, text))
        usage = Usage(7, 3) if purpose == "summary" else Usage(11, 2)
        if purpose == "summary":
            marks = " ".join(sorted(set(MARK.findall(json.dumps(list(messages))))))
            return ChatResult(f"The user said {marks}.", (), usage, 0.0, self.model, "stop", purpose=purpose)
        if tools and not any(m.get("role") == "tool" for m in messages):
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "session_search", "arguments": '{"query": "MARK"}'},
            }
            return ChatResult("", (call,), usage, 0.0, self.model, "tool_calls", purpose=purpose)
        return ChatResult("an answer", (), usage, 0.0, self.model, "stop", purpose=purpose)

    def sent(self, phase: str) -> str:
        return "\n".join(t for p, _, t in self.calls if p == phase)


def _case(tag: str, question: str):
    """A case whose history carries MARK-<tag> (early, so a summary covers it) and whose question and answer are
    the given canaries."""
    turns = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} MARK-{tag} " + "word " * 40}
        for i in range(12)
    ]
    row = make_row(sessions=[turns[:6], turns[6:]])
    row.update(question_id=f"q-{tag.lower()}", question=question, answer=f"ANSWERCANARY{tag}")
    row["haystack_dates"] = ["2023/05/01 (Mon) 10:00", "2023/05/02 (Tue) 10:00"]
    row["haystack_session_ids"] = [f"{tag}-1", f"{tag}-2"]
    return parse_cases(json.dumps([row]).encode(), "x")[0]


def _history(case) -> CaseHistory:
    s = Session(id=f"lme-{case.question_id}", user_id=case.question_id)
    s.extend(case.events())
    return CaseHistory.of(case, s)


def _kit(model: Spy) -> Toolkit:
    counter = o200k_counter()
    # a summary window small enough that the summary covers the older events and on-demand search has hidden ones
    summarizer = Summarizer(model, SummaryPrompt.trpc_default(), context_window=32768, token_counter=counter)
    return Toolkit(
        model=model,
        generation={"temperature": 0, "max_tokens": 64},
        context_window=100_000,
        token_counter=counter,
        summaries=SummaryProvider(summarizer, InMemoryStore()),
        retrieval=Retriever(),
    )


BUILT_IN = [LongContextMode, SummaryMode, SummaryOnDemandMode, LongMemEvalOfficialMode]


def _strings(obj: Any, seen: set[int] | None = None) -> Iterator[str]:
    """Every string reachable from `obj` (dataclasses, mappings, sequences, attributes)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(k, seen)
            yield from _strings(v, seen)
    elif isinstance(obj, list | tuple | set | frozenset):
        for v in obj:
            yield from _strings(v, seen)
    elif dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            yield from _strings(getattr(obj, f.name), seen)
    elif hasattr(obj, "__dict__"):
        for v in vars(obj).values():
            yield from _strings(v, seen)


def test_the_ingest_input_type_has_no_question():
    assert {f.name for f in dataclasses.fields(CaseHistory)} == {"unit_id", "session", "sessions"}
    assert {f.name for f in dataclasses.fields(DatedSession)} == {"session_id", "date", "turns"}
    case = _case("A", "QUESTIONCANARY what did I say?")
    h = _history(case)
    assert [s.session_id for s in h.sessions] == ["A-1", "A-2"]
    assert [s.date for s in h.sessions] == list(case.session_dates) and h.unit_id == case.question_id
    assert not [s for s in _strings(h) if "CANARY" in s]  # neither the question, its date field nor the answer


@pytest.mark.parametrize("make", BUILT_IN, ids=lambda c: c.__name__)
def test_ingest_never_receives_the_question_and_answer_does(make):
    case = _case("A", "QUESTIONCANARY what did I say?")
    spy = Spy()
    kit = _kit(spy)
    contestant = make()
    history = _history(case)
    ingested = contestant.ingest(history, kit)
    assert not [s for s in _strings(history) if "CANARY" in s]
    assert "CANARY" not in spy.sent("ingest")  # nothing ingest sent to a model names the question
    spy.phase = "answer"
    out = contestant.answer(ingested.memory, Question.of(case, case.question), kit)
    assert "QUESTIONCANARY" in spy.sent("answer")  # the probe sees the question where it belongs
    assert "ANSWERCANARY" not in spy.sent("answer") and isinstance(out, Answer)


@pytest.mark.parametrize("make", BUILT_IN, ids=lambda c: c.__name__)
def test_a_cases_memory_is_never_visible_to_another_case(make):
    spy = Spy()
    kit = _kit(spy)
    contestant = make()  # one instance serves every case, as in a run
    a, b = _case("ALPHA", "what about alpha?"), _case("BRAVO", "what about bravo?")
    mem_a = contestant.ingest(_history(a), kit).memory
    mem_b = contestant.ingest(_history(b), kit).memory  # built after a's: a contestant holding state would leak it
    for case, memory, own, other in ((a, mem_a, "MARK-ALPHA", "MARK-BRAVO"), (b, mem_b, "MARK-BRAVO", "MARK-ALPHA")):
        spy.calls.clear()
        spy.phase = "answer"
        out = contestant.answer(memory, Question.of(case, case.question), kit)
        sent = spy.sent("answer") + "".join(content for _, content in out.tool_results)
        assert own in sent and other not in sent, (case.question_id, contestant.name)
        kit.forget(case.question_id)


@pytest.mark.parametrize("make", BUILT_IN, ids=lambda c: c.__name__)
def test_ingest_usage_is_kept_apart_from_answer_usage(make):
    spy = Spy()
    kit = _kit(spy)
    contestant = make()
    case = _case("A", "what did I say?")
    ingested = contestant.ingest(_history(case), kit)
    n_ingest = len(spy.calls)
    spy.phase = "answer"
    out = contestant.answer(ingested.memory, Question.of(case, case.question), kit)
    assert [c.purpose for c in ingested.calls] == [p for _, p, _ in spy.calls[:n_ingest]]
    assert [c.purpose for c in out.calls] == [p for _, p, _ in spy.calls[n_ingest:]]
    assert all(c.purpose == "answer" for c in out.calls) and out.calls
    uses_summary = isinstance(contestant, SummaryMode)
    assert bool(ingested.calls) == uses_summary and (ingested.summary is not None) == uses_summary
    if uses_summary:
        assert all(c.purpose == "summary" for c in ingested.calls)
        assert ingested.summary["calls"] == [c.to_record() for c in ingested.calls]


def test_the_shared_summary_is_generated_once_and_reused_by_the_other_contestant():
    spy = Spy()
    kit = _kit(spy)
    case = _case("A", "what did I say?")
    first = SummaryMode().ingest(_history(case), kit)
    second = SummaryOnDemandMode().ingest(_history(case), kit)
    assert first.calls and not second.calls  # generated by summary, reused at no cost by summary_ondemand
    assert first.summary["reused"] is False and second.summary["reused"] is True
    assert second.summary["generated_for"] == "summary" and second.summary["text"] == first.summary["text"]


# --- a toy contestant, selected through Hydra, end to end on the fake endpoint -------------------


@dataclass
class KeywordNotes:
    """A toy memory system: ingest asks the model for notes on every session (one call per session), answer
    sends the notes and the question. Nothing of the harness's summary engine or retrieval is used."""

    name: str = "keyword_notes"
    instruction: str = "Answer from these notes."

    def ingest(self, history: CaseHistory, kit: Toolkit) -> Ingested:
        calls = [
            kit.model.chat(
                [{"role": "user", "content": f"Note the facts of {s.date}: " + " ".join(t.content for t in s.turns)}],
                purpose="ingest",
                **kit.generation,
            )
            for s in history.sessions
        ]
        return Ingested(memory=[c.content for c in calls], calls=calls, trace=[{"notes": len(calls)}])

    def answer(self, memory: Any, question: Question, kit: Toolkit) -> Answer:
        system = {"role": "system", "content": self.instruction + "\n" + "\n".join(memory)}
        r = kit.model.chat([system, question_message(question)], **kit.generation)
        return Answer(prediction=r.content.strip(), calls=[r], query_latency_s=r.latency_s, final_messages=2)


@pytest.mark.e2e
def test_a_toy_contestant_selected_through_hydra_runs_end_to_end(tmp_path):
    conf = conf_dir(tmp_path, "mode", {"keyword_notes.yaml": f"keyword_notes:\n  _target_: {__name__}.KeywordNotes\n"})
    rc, requests = run_fake(tmp_path, ["mode=keyword_notes"], conf=conf)
    assert rc == 0
    run_dir = tmp_path / "run"
    recs = load_records(run_dir / "records.jsonl")
    assert {r["mode"] for r in recs} == {"keyword_notes"} and len(recs) == 2
    assert all(r["status"] == "ok" for r in recs)
    notes = [r for r in requests if "Note the facts of" in json.dumps(r.get("messages"))]
    for r in recs:
        ing = r["ingest"]
        assert ing["calls"] >= 1 and ing["prompt_tokens"] > 0 and ing["trace"] == [{"notes": ing["calls"]}]
        # answer usage is the answer call only: ingest's calls are never counted in it
        assert r["usage"]["answer_calls"] == 1 and len(r["calls"]) == 1
        assert r["usage"]["prompt_tokens_total"] == r["calls"][0]["usage"]["prompt_tokens"]
        assert r["question"] not in "".join(json.dumps(n.get("messages")) for n in notes)
    assert sum(r["ingest"]["calls"] for r in recs) == len(notes)
    report = (run_dir / "report.md").read_text()
    assert "keyword_notes" in report
