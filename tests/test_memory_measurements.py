"""Measurements of memory providers (issue 23 item 5): gold-label retrieval recall for black-box providers by
provenance or by the stated text-overlap rule (harness/memory/gold.py), recorded per retrieval by the contestant."""

from __future__ import annotations

import json

from harness.contestants.base import CaseHistory, Question
from harness.data.longmemeval import parse_cases
from harness.memory.contestant import ProviderContestant
from harness.memory.gold import Gold, overlaps, words
from harness.memory.provider import Capabilities, Ingest, MemoryItem, Provenance, ProviderBase, Retrieval
from harness.session.events import Session
from tests.conftest import make_row
from tests.test_memory_contestant import Reader, _kit

EVIDENCE = "I adopted a grey cat called Biscuit from the Oslo shelter in March."
FILLER = "Can you suggest a recipe for lentil soup with cumin and carrots?"


def _gold() -> Gold:
    return Gold([("s1", [(FILLER, False), ("Sure, here is one.", False)]), ("s2", [(EVIDENCE, True)])])


def test_the_overlap_rule_matches_containment_either_way_and_never_on_function_words() -> None:
    turn = words(EVIDENCE)
    assert overlaps(words(f"[2023-03-01] user: {EVIDENCE} Also some other chat."), turn)  # the item holds the turn
    assert overlaps(words("User adopted a cat called Biscuit"), turn)  # the turn holds the (extracted) item
    assert not overlaps(words("the user is a person who was in the house"), turn)  # function words only
    assert not overlaps(words("Biscuit"), turn)  # fewer than MIN_SHARED shared words
    # half of a long item's words is not enough when those are under half of the turn's words too
    assert not overlaps(words("grey cat " + " ".join(f"w{i}" for i in range(20))), turn)


def test_labels_use_provenance_first_then_overlap_within_the_named_session_then_everywhere() -> None:
    g = _gold()
    by_turn = g.label("unrelated text", Provenance("s2", 0, None))
    assert by_turn.by == "provenance" and g.hits_turn(by_turn)  # the provenance is believed as given
    in_session = g.label("unrelated text", Provenance("s2", None, None))
    assert g.hits_session(in_session) and not g.hits_turn(in_session)  # session known, no turn matches
    wrong_session = g.label(EVIDENCE, Provenance("s1", None, None))
    assert not g.hits_turn(wrong_session)  # overlap is looked for only in the named session
    free = g.label("the user adopted cat Biscuit from a shelter", None)
    assert free.by == "overlap" and g.hits_turn(free) and g.hits_session(free)
    assert g.label("lentil soup cumin carrots recipe", None).sessions == {"s1"}
    assert g.label("nothing alike", Provenance("unknown", 3, None)).by == "none"
    r = g.recall([g.label(FILLER), free], [1, 2])
    assert r == {
        "turn_recall_any@1": 0.0,
        "session_recall_any@1": 0.0,
        "turn_recall_any@2": 1.0,
        "session_recall_any@2": 1.0,
    }
    assert Gold([("s1", [(FILLER, False)])]).recall([g.label(FILLER)], [1])["turn_recall_any@1"] is None


class BlackBox(ProviderBase):
    """Returns a filler item first and the evidence second, as text only (no provenance): a black box."""

    def __init__(self, evidence_first: bool = False) -> None:
        self.evidence_first = evidence_first

    def capabilities(self) -> Capabilities:
        return Capabilities("blackbox", "0")

    def setup(self, unit: str) -> None:
        pass

    def ingest(self, unit: str, sessions) -> Ingest:
        return Ingest()

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        items = [MemoryItem("user asked for a lentil soup recipe with cumin " * 20), MemoryItem(EVIDENCE)]
        return Retrieval(tuple(reversed(items)) if self.evidence_first else tuple(items))

    def teardown(self, unit: str) -> None:
        pass


def _run(provider, **kw):
    row = make_row(
        sessions=[[{"role": "user", "content": FILLER}], [{"role": "user", "content": EVIDENCE, "has_answer": True}]]
    )
    case = parse_cases(json.dumps([row]).encode(), "x")[0]
    s = Session(id="x", user_id=case.question_id)
    s.extend(case.events())
    c = ProviderContestant(provider, **kw)
    ingested = c.ingest(CaseHistory.of(case, s), _kit(Reader()))
    return ingested, c.answer(ingested.memory, Question.of(case, case.question), _kit(Reader())), c


def test_the_retrieval_trace_holds_gold_recall_and_whether_evidence_reached_the_reader() -> None:
    ingested, out, c = _run(BlackBox())
    assert ingested.trace[0]["ingested_tokens"] > 10
    (rt,) = out.tool_trace
    assert [i["gold"]["evidence_turn"] for i in rt["items"]] == [False, True]
    assert [i["gold"]["by"] for i in rt["items"]] == ["overlap", "overlap"]
    g = rt["gold"]
    assert g["evidence_turns"] == 1 and g["evidence_sessions"] == 1
    assert g["turn_recall_any@1"] == 0.0 and g["turn_recall_any@3"] == 1.0 and g["turn_recall_any@10"] == 1.0
    assert g["shown_evidence_turn"] is True
    assert not c._gold  # forgotten with the unit

    # a cap that the first (filler) item fills: the evidence was retrieved but never reached the reader
    _, cut, _ = _run(BlackBox(), context_tokens=40)
    g = cut.tool_trace[0]["gold"]
    assert g["turn_recall_any@3"] == 1.0 and g["shown_evidence_turn"] is False
    assert cut.truncation is not None and cut.truncation["truncated"]

    # evidence first and whole under the cap: shown
    _, first, _ = _run(BlackBox(evidence_first=True), context_tokens=40)
    assert first.tool_trace[0]["gold"]["turn_recall_any@1"] == 1.0
    assert first.tool_trace[0]["gold"]["shown_evidence_turn"] is True


def test_a_native_answer_is_measured_on_the_items_it_says_it_used_and_not_at_all_when_it_says_none() -> None:
    from harness.memory.provider import REQUIRED_CALLS, ProviderAnswer

    class Answers(BlackBox):
        def __init__(self, items) -> None:
            super().__init__()
            self.items = items

        def capabilities(self) -> Capabilities:
            return Capabilities("answers", "1", REQUIRED_CALLS | {"answer"})

        def answer(self, unit: str, query: str, as_of: str) -> ProviderAnswer:
            return ProviderAnswer("Biscuit", items=self.items)

    _, out, _ = _run(Answers((MemoryItem(EVIDENCE, None, Provenance("s1", 0, None)),)), native_answer=True)
    g = out.tool_trace[0]["gold"]
    assert g["turn_recall_any@1"] == 1.0 and g["shown_evidence_turn"] is True
    _, silent, _ = _run(Answers(()), native_answer=True)
    assert silent.tool_trace[0]["gold"] is None  # not told: never a recall of 0
