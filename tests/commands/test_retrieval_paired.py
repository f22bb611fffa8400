"""retrieval-eval's paired comparison (commands/retrieval_paired.py): every preset against one of them on the same
questions, per type and over all, with questions won / lost and a seeded paired bootstrap interval."""

from __future__ import annotations

import json

import numpy as np
import pytest
from omegaconf import OmegaConf

from commands.retrieval_eval import BUDGET_KEY, paired_metrics, run_retrieval_eval
from commands.retrieval_paired import below_against, below_lines, paired_against, paired_table


def _row(preset: str, qid: str, qtype: str, r5: float, ev: bool, ev_tokens: int | None) -> dict:
    return {
        "preset": preset,
        "question_id": qid,
        "question_type": qtype,
        "turn_recall_any@5": r5,
        "response_has_evidence": ev,
        "evidence_tokens": ev_tokens,
    }


def _paired(rows, budgets=None):
    return paired_against(rows, "bm25", paired_metrics(budgets))


def test_wins_losses_and_deltas_per_type_and_over_all():
    rows = [
        _row("bm25", "q1", "a", 1.0, True, 900),
        _row("bm25", "q2", "a", 0.0, False, None),
        _row("bm25", "q3", "b", 1.0, True, 50),
        _row("x", "q1", "a", 0.0, True, 100),
        _row("x", "q2", "a", 1.0, True, 120),
        _row("x", "q3", "b", 1.0, False, None),
    ]
    out = _paired(rows, budgets={"q1": 150, "q2": 150, "q3": 150})
    assert set(out) == {"x"} and set(out["x"]) == {"a", "b", "all"}
    a = out["x"]["a"]
    assert (a["turn_recall_any@5"]["wins"], a["turn_recall_any@5"]["losses"]) == (1, 1)
    assert a["turn_recall_any@5"]["delta"] == 0.0
    assert (a["response_has_evidence"]["wins"], a["response_has_evidence"]["delta"]) == (1, 0.5)
    # at 150 tokens: bm25's evidence at 900 tokens is cut away, x's at 100 and 120 is kept
    assert (a[BUDGET_KEY]["wins"], a[BUDGET_KEY]["losses"], a[BUDGET_KEY]["delta"]) == (2, 0, 1.0)
    everything = out["x"]["all"]["response_has_evidence"]
    assert (everything["n"], everything["wins"], everything["losses"]) == (3, 1, 1)
    table = paired_table(out, "bm25")
    assert "| a | x vs bm25 | 2 | +0.000 [" in table and "| 1 / 1 |" in table
    assert BUDGET_KEY not in json.dumps(_paired(rows))  # no budget, no such column


def test_only_questions_both_presets_answered_are_paired():
    rows = [
        _row("bm25", "q1", "a", 1.0, True, 1),
        _row("x", "q1", "a", 1.0, True, 1),
        _row("x", "q2", "a", 1.0, True, 1),
    ]
    assert _paired(rows)["x"]["a"]["turn_recall_any@5"]["n"] == 1


@pytest.mark.parametrize("seed", range(20))
def test_generated_outcomes_give_consistent_deltas_counts_and_intervals(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    theirs, mine = rng.integers(0, 2, n), rng.integers(0, 2, n)
    types = rng.choice(["a", "b", "c"], n)
    rows = [_row("bm25", f"q{i}", types[i], float(theirs[i]), bool(theirs[i]), 5) for i in range(n)]
    rows += [_row("x", f"q{i}", types[i], float(mine[i]), bool(mine[i]), 5) for i in range(n)]
    for t, cells in _paired(rows)["x"].items():
        sel = np.ones(n, bool) if t == "all" else types == t
        for metric in ("turn_recall_any@5", "response_has_evidence"):
            c = cells[metric]
            assert c["n"] == sel.sum()
            assert c["delta"] == pytest.approx(mine[sel].mean() - theirs[sel].mean())
            assert c["wins"] - c["losses"] == int(mine[sel].sum() - theirs[sel].sum())
            assert c["lo"] - 1e-12 <= c["delta"] <= c["hi"] + 1e-12
    assert _paired(rows) == _paired(rows)  # seeded: the same rows give the same intervals
    # below the reference exactly where it has fewer questions right on a type ("all" is not a type)
    listed = {(c["question_type"], c["metric"]) for c in below_against(_paired(rows))["x"]}
    expected = {
        (t, m)
        for t in set(types)
        for m in ("turn_recall_any@5", "response_has_evidence")
        if mine[types == t].sum() < theirs[types == t].sum()
    }
    assert listed == expected
    line = below_lines(below_against(_paired(rows)), "bm25")
    assert line.startswith("- `x`: ") and ("at or above `bm25` on every question type" in line) == (not expected)


def test_below_lines_name_each_shortfall_with_its_questions():
    rows = [
        _row("bm25", "q1", "a", 1.0, True, 1),
        _row("bm25", "q2", "b", 0.0, False, None),
        _row("x", "q1", "a", 0.0, True, 1),
        _row("x", "q2", "b", 1.0, True, 1),
        _row("y", "q1", "a", 1.0, True, 1),
        _row("y", "q2", "b", 0.0, False, None),
    ]
    below = below_against(_paired(rows))
    assert [(c["question_type"], c["metric"]) for c in below["x"]] == [("a", "turn_recall_any@5")]
    assert below["y"] == []  # a tie everywhere is not below
    text = below_lines(below, "bm25")
    assert "- `x`: below `bm25` on a turn_recall_any@5 (-1.000: 0 won / 1 lost of 1)" in text
    assert "- `y`: at or above `bm25` on every question type, for every metric" in text


def test_retrieval_eval_writes_the_comparison_and_refuses_an_unknown_reference_first(tmp_path, paris_dataset):

    dataset = paris_dataset
    from harness.retrieval.config import preset_node

    current = OmegaConf.merge(preset_node("bm25"), {"config": {"window": 1}})
    cfg = OmegaConf.create(
        {"dataset": dataset, "retrieval": current, "retrieval_eval": {"presets": ["bm25", "current"]}}
    )
    md = run_retrieval_eval(cfg, tmp_path / "out").read_text()
    report = json.loads((tmp_path / "out" / "retrieval_eval.json").read_text())
    assert report["against"] == "bm25" and set(report["paired"]) == {"current"}
    assert "## Paired against `bm25`" in md and "| multi-session | current vs bm25 | 1 |" in md
    assert report["below_against"] == below_against(report["paired"])
    assert below_lines(report["below_against"], "bm25") in md
    cfg.retrieval_eval.against = "nonesuch"
    with pytest.raises(ValueError, match="retrieval_eval.against='nonesuch'"):
        run_retrieval_eval(cfg, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
