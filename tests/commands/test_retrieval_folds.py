"""Issue 24: folds for fitting on one half and reporting the other, and the budget-matched evidence figure. (The
turn-pair question→reply credit and the recency weight, measured by the fold fit and not adopted, were removed from
the retriever: research/README.md.)"""

from __future__ import annotations

import csv
import json
from collections import Counter
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from harness.golang import go_json
from harness.retrieval.evaluation import evidence_tokens
from harness.retrieval.folds import assign_folds, select_fold
from harness.session.events import Event
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
