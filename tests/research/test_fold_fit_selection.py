"""The fold-fit studies' shared selection (research/retrieval_fold_fit.py, used by retrieval_neutral_fit.py): the
one-knob variants of a chosen setting, and the ranking by the selection rule on one fold's rows only."""

from __future__ import annotations

from research.retrieval_fold_fit import TYPES_SSU, name_of, one_knob_changed, rank


def test_one_knob_changed_names_each_other_value_in_grid_order() -> None:
    grid = {"a": [True, False], "b": [None, 3], "c": [0.5, 0.0, 1.0]}
    got = one_knob_changed({"a": True, "b": None, "c": 0.0}, grid)
    assert got == {
        "a=False": "a=False b=None c=0.0",
        "b=3": "a=True b=3 c=0.0",
        "c=0.5": "a=True b=None c=0.5",
        "c=1.0": "a=True b=None c=1.0",
    }


def test_rank_reads_only_the_fold_it_is_given() -> None:
    folds = {"q1": "A", "q2": "B"}

    def rows(r1_a: float, r1_b: float) -> list[dict]:
        return [
            {"qid": q, "type": TYPES_SSU, "r1": r1, "r5": 1.0, "tok": 100, "ev_tok": 10}
            for q, r1 in (("q1", r1_a), ("q2", r1_b))
        ]

    good_on_a, good_on_b = {"k": 1}, {"k": 2}
    data = {"bm25": rows(0, 0), name_of(good_on_a): rows(1, 0), name_of(good_on_b): rows(0, 1)}
    assert [n for _, n in rank(data, [good_on_a, good_on_b], folds, "A")] == ["k=1", "k=2"]
    assert [n for _, n in rank(data, [good_on_a, good_on_b], folds, "B")] == ["k=2", "k=1"]
