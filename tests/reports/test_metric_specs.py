"""Issue 13 item 1: a scorer's MetricSpec is the only declaration of its metrics. A scorer defined only here
reaches report.md/html, compare and the gate with its direction, label and format, with no edit to reports/."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from commands.cli import main
from harness.scoring.base import MetricSpec, ScoreInput, ScoreResult, specs_json
from harness.scoring.lexical import LexicalScorer
from reports.aggregate import judge_table, load_run, scoreboard
from reports.compare import compare_runs, load_runs
from reports.gate import run_gate
from reports.metrics import BUILTIN, catalog_of
from tests.support.report_fixtures import meta, rec, write_run


class HallucinationScorer:
    """Known to no module outside this test."""

    metrics = (
        MetricSpec("halluc", False, "share of invented facts", "hallucination rate", "{:.3f}"),
        MetricSpec("grounded_judge", True, "a judge that may not run", "grounded (judge)", judged=True, binary=True),
    )

    def score(self, item: ScoreInput) -> ScoreResult:
        return ScoreResult({"halluc": 0.0, "grounded_judge": None})


def _run(path: Path, halluc: float, grounded: list[float | None], qtypes: tuple[str, ...] = ()) -> Path:
    records = []
    for i, qid in enumerate(["q1", "q2", "q3"]):
        for mode in ("long_context", "summary"):
            r = rec(qid, mode, em=1.0, f1=0.5, qtype=qtypes[i] if qtypes else "single-session-user")
            r["metrics"].update(halluc=halluc + 0.01 * i, grounded_judge=grounded[i])
            records.append(r)
    m = meta()
    m["metrics"] = specs_json([LexicalScorer(), HallucinationScorer()])
    return write_run(path, records, m)


def test_run_json_keeps_each_spec_with_its_scorer():
    entries = specs_json([HallucinationScorer()])
    assert entries[0] == {
        "scorer": "HallucinationScorer",
        "name": "halluc",
        "higher_is_better": False,
        "description": "share of invented facts",
        "label": "hallucination rate",
        "fmt": "{:.3f}",
        "judged": False,
        "binary": False,
        "quality": True,
        "task_averaged": False,
        "verdict": None,
    }
    cat = catalog_of({"metrics": entries})
    assert cat.higher_is_better("halluc") is False and cat.higher_is_better("halluc@all") is False
    assert cat.label("halluc") == "hallucination rate" and cat.fmt("halluc") == "{:.3f}"
    assert "halluc" not in BUILTIN and BUILTIN.higher_is_better("halluc") is None


def test_a_new_scorer_reaches_the_report(tmp_path, capsys):
    run = _run(tmp_path / "r", 0.2, [1.0, None, 0.0])
    assert main(["report", str(run)]) == 0
    md = (run / "report.md").read_text()
    assert "hallucination rate ↓" in md and "grounded (judge) ↑" in md
    line = next(l for l in md.splitlines() if l.startswith("| hallucination rate ↓"))
    assert "0.210 [" in line  # its own format (3 decimals): mean of 0.20, 0.21, 0.22
    assert "hallucination rate ↓" in (run / "report.html").read_text()
    ci = pd.read_csv(run / "summary_ci.csv")
    assert {"halluc", "grounded_judge"} <= set(ci["metric"])
    assert "halluc" in pd.read_csv(run / "summary.csv").columns  # a quality metric joins the headline table
    # The judge table is found by the spec's `judged`, not by a scorer's class name: not_run is kept apart.
    jt = judge_table(load_run(run))
    row = jt[(jt["metric"] == "grounded_judge") & (jt["mode"] == "summary")].iloc[0]
    assert (row["judged"], row["not_run"], row["accuracy"]) == (2, 1, 0.5)
    board = scoreboard(load_run(run))
    assert board[("summary", "grounded_judge:not_run")] == 1.0


def test_a_new_scorer_reaches_the_plots_under_its_label(tmp_path, monkeypatch):
    """Its quality metric is drawn in the quality-vs-tokens and bar plots, labelled as its spec says."""
    from reports import plots

    texts: dict[str, set[str]] = {}
    real_save = plots.save

    def capture(fig, out_base):
        ax = fig.axes[0]
        found = {t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()}
        legend = ax.get_legend()
        found |= {t.get_text() for t in legend.get_texts()} if legend else set()
        texts[Path(out_base).name] = found
        return real_save(fig, out_base)

    monkeypatch.setattr(plots, "save", capture)
    run = _run(tmp_path / "r", 0.2, [1.0, None, 0.0])
    assert main(["report", str(run)]) == 0
    assert "hallucination rate" in texts["metrics"] and "halluc" not in texts["metrics"]
    assert "hallucination rate" in texts["quality_vs_tokens"]
    assert "hallucination rate" in texts["win_loss_tie"]
    assert "EM" in texts["metrics"]  # the built-in bars stay


def test_a_new_scorer_reaches_the_per_type_tables_and_gate(tmp_path):
    types = ("multi-session", "multi-session", "temporal-reasoning")
    run = _run(tmp_path / "r", 0.2, [1.0, None, 0.0], qtypes=types)
    assert main(["report", str(run)]) == 0
    bt = pd.read_csv(run / "by_type.csv")
    row = bt[(bt["metric"] == "halluc") & (bt["mode"] == "summary") & (bt["question_type"] == "temporal-reasoning")]
    assert row["mean"].round(3).tolist() == [0.22]  # the third case only
    board = scoreboard(load_run(run))
    assert board[("summary", "halluc@type:multi-session")] == pytest.approx(0.205)
    baseline = tmp_path / "baseline.yaml"
    check = {"mode": "summary", "metric": "halluc", "question_type": "temporal-reasoning", "baseline": 0.1, "abs": 0.0}
    baseline.write_text(yaml.safe_dump({"version": 1, "checks": [check]}))
    assert [o.status for o in run_gate(baseline, run).outcomes] == ["FAIL"]  # 0.22 > 0.1, lower is better


def test_a_new_scorer_reaches_compare_in_its_direction(tmp_path):
    a = _run(tmp_path / "a", 0.5, [1.0, 1.0, 1.0])
    b = _run(tmp_path / "b", 0.1, [0.0, 1.0, 1.0])
    (p,) = compare_runs(load_runs([a, b]))
    row = p.stats[(p.stats["metric"] == "halluc") & (p.stats["group"] == "summary")].iloc[0]
    assert row["higher_is_better"] is False or row["higher_is_better"] == False  # noqa: E712 (numpy bool)
    assert (row["wins"], row["losses"]) == (3, 0)  # B invents less: a win, by the spec's direction
    judged = p.stats[(p.stats["metric"] == "grounded_judge") & (p.stats["group"] == "summary")].iloc[0]
    assert judged["mcnemar_b"] == 1  # binary per its spec: McNemar's test
    from reports.compare import pair_markdown

    assert "| summary | hallucination rate ↓ | 3 | 0.510 | 0.110 | -0.400 [" in pair_markdown(p)


def test_a_new_scorer_reaches_the_gate_in_its_direction(tmp_path):
    run = _run(tmp_path / "r", 0.3, [1.0, 1.0, 1.0])
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text(
        yaml.safe_dump({"version": 1, "checks": [{"mode": "summary", "metric": "halluc", "baseline": 0.2, "abs": 0.0}]})
    )
    res = run_gate(baseline, run)  # 0.31 > 0.2: worse for a lower-is-better metric
    assert [o.status for o in res.outcomes] == ["FAIL"] and "↓" in res.text()
    baseline.write_text(
        yaml.safe_dump({"version": 1, "checks": [{"mode": "summary", "metric": "halluc", "baseline": 0.5, "abs": 0.0}]})
    )
    assert [o.status for o in run_gate(baseline, run).outcomes] == ["better"]  # lower is better: an improvement


def test_a_run_json_without_specs_reports_with_the_builtin_scorers(tmp_path):
    """Run directories written before run.json kept the specs: the built-in scorers' specs stand in."""
    run = write_run(tmp_path / "old", [rec("q1", "summary", em=1.0, lme=1.0)], meta())
    assert "metrics" not in json.loads((run / "run.json").read_text())
    frame = load_run(run)
    assert frame.metrics is BUILTIN
    assert list(judge_table(frame)["metric"]) == ["lme_acc", "lme_acc_strict"]


def test_a_run_with_builtin_specs_reports_like_one_without(tmp_path):
    """The specs a new run writes to run.json (the built-in scorers') give the same CSVs as the fallback."""
    from harness.scoring.judges import LongMemEvalJudge, TrpcJudge
    from tests.support.report_fixtures import standard_run

    old = standard_run(tmp_path / "old")
    new = standard_run(tmp_path / "new")
    m = json.loads((new / "run.json").read_text())
    m["metrics"] = specs_json([LexicalScorer(), TrpcJudge(model=None), LongMemEvalJudge(model=None)])
    (new / "run.json").write_text(json.dumps(m))
    for run in (old, new):
        assert main(["report", str(run)]) == 0
    for name in ("summary.csv", "summary_ci.csv", "cases.csv"):
        assert (old / name).read_bytes() == (new / name).read_bytes(), name
    assert (old / "report.md").read_text().replace("old", "X") == (new / "report.md").read_text().replace("new", "X")


def test_frame_operations_copy_no_catalog(tmp_path):
    """pandas deep-copies `df.attrs` on every operation (copying the catalog there took 10-18 % of a report's CPU
    time): the catalog travels beside the frame (`RunFrame`), the frame's attrs stay empty, and a deep copy of the
    read-only catalog is the catalog itself."""
    import copy

    frame = load_run(write_run(tmp_path, [rec("q1", "long_context")], meta()))
    assert isinstance(frame.metrics, type(BUILTIN)) and frame.df.attrs == {}
    derived = frame.df[frame.df["status"] == "ok"].copy(deep=True).assign(x=1)
    assert derived.attrs == {}
    assert copy.deepcopy(frame.metrics) is frame.metrics
