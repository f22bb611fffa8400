"""Issue 24: folds for fitting on one half and reporting the other, the budget-matched evidence figure, the
turn-pair (question→reply) credit and the recency-aware ranking."""

from __future__ import annotations

import csv
import json
from collections import Counter
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from harness.golang import go_json
from harness.retrieval.config import SearchConfig, preset
from harness.retrieval.evaluation import evidence_tokens
from harness.retrieval.folds import assign_folds, select_fold
from harness.retrieval.retriever import Retriever
from harness.session.boundary import SummaryBoundary
from harness.session.events import Event, Session
from harness.session.tokens import ApproxCounter

QUESTIONS = [(f"q{i:03d}_{t}", t) for t in ("ku", "ms", "ssa", "tr") for i in range(7 + 2 * len(t))]


def test_folds_are_deterministic_disjoint_and_cover_every_question():
    a = assign_folds(QUESTIONS)
    b = assign_folds(list(reversed(QUESTIONS)))  # the order given does not matter
    assert a == b
    assert set(a) == {q for q, _ in QUESTIONS} and set(a.values()) == {"A", "B"}


def test_folds_are_stratified_by_type_and_not_the_input_order():
    folds = assign_folds(QUESTIONS)
    per_type = Counter((t, folds[q]) for q, t in QUESTIONS)
    for t in {t for _, t in QUESTIONS}:
        assert abs(per_type[(t, "A")] - per_type[(t, "B")]) <= 1
    # By hash, not alternately in the given order: some neighbours share a fold.
    ids = [q for q, _ in QUESTIONS]
    assert any(folds[x] == folds[y] for x, y in zip(ids, ids[1:]))


def test_select_fold_keeps_order_and_rejects_unknown_folds_and_repeated_ids():
    cases = [SimpleNamespace(question_id=q, question_type=t) for q, t in QUESTIONS]
    a, b = select_fold(cases, "A"), select_fold(cases, "b")
    assert {c.question_id for c in a}.isdisjoint({c.question_id for c in b})
    assert len(a) + len(b) == len(cases)
    assert [c.question_id for c in a] == [c.question_id for c in cases if c in a]
    with pytest.raises(ValueError, match="fold must be one of"):
        select_fold(cases, "C")
    with pytest.raises(ValueError, match="'q000_ku' appears twice"):
        assign_folds([("q000_ku", "ku"), ("q000_ku", "ms")])


def ev(i, role, content, ts=None, **kw):
    return Event(id=f"e{i:04d}", index=i, role=role, content=content, timestamp=ts or 1_700_000_000.0 + i / 1000, **kw)


def test_evidence_tokens_is_the_response_prefix_that_holds_the_evidence_whole():
    events = [ev(0, "user", 'The code is "7<3" & done', has_answer=True), ev(1, "assistant", "ok")]
    counter = ApproxCounter(1.0)  # one token per character: prefix lengths are exact
    content = go_json({"results": [{"snippet": "filler " * 5}, {"snippet": 'The code is "7<3" & done'}]})
    n = evidence_tokens(content, events, counter)
    assert n == content.index("done") + len("done")
    assert evidence_tokens(content[: n - 1] + "X" + content[n:], events, counter) is None  # cut inside: not whole
    assert evidence_tokens(go_json({"results": []}), events, counter) is None


def _write_two_cases(write_dataset):
    from tests.support.dataset_rows import make_row

    filler = [{"role": "user", "content": f"Tell me about topic {i} please, at length."} for i in range(6)]
    fact = [[*filler[:3], {"role": "user", "content": "I went to Paris last May.", "has_answer": True}], filler[3:]]
    rows = [
        make_row(qid="q1", question="When did I go to Paris?", sessions=fact, qtype="multi-session"),
        make_row(qid="q2", question="When did I go to Paris?", sessions=fact, qtype="knowledge-update"),
    ]
    return write_dataset(rows)


def test_retrieval_eval_budget_column_and_curve(tmp_path, write_dataset):
    from commands.retrieval_eval import run_retrieval_eval

    def run(budget, out):
        cfg = OmegaConf.create(
            {
                "dataset": {
                    "_target_": "harness.data.longmemeval.LongMemEvalSource",
                    "path": str(_write_two_cases(write_dataset)),
                    "question_types": None,
                },
                "retrieval_eval": {"presets": ["bm25"], "budget": budget},
            }
        )
        run_retrieval_eval(cfg, tmp_path / out)
        return json.loads((tmp_path / out / "retrieval_eval.json").read_text())["presets"]["bm25"]

    roomy, tight = run(100_000, "roomy"), run(20, "tight")
    assert roomy["response_has_evidence"] == roomy["evidence_at_budget"] == 1.0
    assert tight["response_has_evidence"] == 1.0 and tight["evidence_at_budget"] == 0.0  # cut before the evidence
    assert tight["by_type"]["knowledge-update"]["evidence_at_budget"] == 0.0
    rows = list(csv.DictReader((tmp_path / "tight" / "retrieval_eval_budget_curve.csv").open()))
    curve = {(r["question_type"], int(r["budget_tokens"])): float(r["evidence_rate"]) for r in rows}
    assert curve[("all", 100)] == 0.0 and curve[("all", 6000)] == 1.0
    assert {t for t, _ in curve} == {"all", "multi-session", "knowledge-update"}
    assert (tmp_path / "tight" / "retrieval_eval_budget_curve.png").stat().st_size > 0


@pytest.mark.parametrize(
    "opts, match",
    [({"budget": "default"}, "not one of the evaluated presets"), ({"fold": "C"}, "fold must be one of")],
)
def test_retrieval_eval_rejects_a_bad_budget_or_fold_before_writing(tmp_path, write_dataset, opts, match):
    from commands.retrieval_eval import run_retrieval_eval

    cfg = OmegaConf.create(
        {
            "dataset": {
                "_target_": "harness.data.longmemeval.LongMemEvalSource",
                "path": str(_write_two_cases(write_dataset)),
                "question_types": None,
            },
            "retrieval_eval": {"presets": ["bm25"], **opts},
        }
    )
    with pytest.raises(ValueError, match=match):
        run_retrieval_eval(cfg, tmp_path / "out")
    assert not (tmp_path / "out" / "retrieval_eval_cases.jsonl").exists()


def _session(events):
    s = Session(id="s", user_id="u")
    s.extend(events)
    return s, SummaryBoundary(1, "", events[-1].timestamp, events[-1].id)


DAY = 86_400.0
UPDATE_EVENTS = [
    ev(0, "user", "My favourite colour is blue.", ts=1_700_000_000.0),
    ev(1, "assistant", "Noted.", ts=1_700_000_001.0),
    ev(2, "user", "Something else entirely about gardening.", ts=1_700_000_000.0 + 30 * DAY),
    ev(3, "user", "These days my favourite colour is green.", ts=1_700_000_000.0 + 60 * DAY),
]


def _top(cfg: SearchConfig, events, query):
    s, b = _session(events)
    return Retriever(cfg).tools(s, boundary=b).call("session_search", {"query": query}).trace["hits"][0]["event_id"]


def test_recency_ranks_the_later_of_two_near_equal_statements_first():
    query = "What is my favourite colour?"
    assert _top(preset("bm25"), UPDATE_EVENTS, query) == "e0000"  # the older, shorter statement scores higher
    assert _top(preset("bm25", recency=0.0, assistant_weight=1.0), UPDATE_EVENTS, query) == "e0000"
    assert _top(preset("bm25", recency=0.3), UPDATE_EVENTS, query) == "e0003"
    # A clearly better match is not overturned by recency alone.
    far = [*UPDATE_EVENTS[:3], ev(3, "user", "I painted the fence.", ts=1_700_000_000.0 + 60 * DAY)]
    assert _top(preset("bm25", recency=0.3), far, query) == "e0000"


def test_turn_pair_credit_lifts_the_reply_to_a_matching_question():
    events = [
        ev(0, "user", "Which knot should I use for climbing rope anchors?"),
        ev(1, "assistant", "Use a figure-eight follow-through; it is strong and easy to check."),
        ev(2, "user", "Unrelated: how do I boil an egg?"),
        ev(3, "assistant", "Boil it for nine minutes, anchors away."),
    ]
    query = "knot for climbing rope anchors"
    s, b = _session(events)

    def ranked(cfg):
        hits = Retriever(cfg).tools(s, boundary=b).call("session_search", {"query": query}).trace["hits"]
        return [h["event_id"] for h in hits]

    assert ranked(preset("bm25"))[1] != "e0001"  # the answer shares no query word: BM25 ranks it low
    assert set(ranked(preset("bm25", propagate_back=1.0))[:2]) == {"e0000", "e0001"}
    with pytest.raises(ValueError, match="propagate_back must be a number >= 0"):
        SearchConfig(propagate_back=-1.0)
