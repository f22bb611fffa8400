"""results.json (reports/results_file.py): written by every run's report from the records alone, read back into the
typed `Results`, equal to the report's CSVs, refused when of a later schema version, rebuilt identically by
`lme-harness report` without a model."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
from pathlib import Path

import pandas as pd
import pytest

from reports.aggregate import cost_table, load_run
from reports.results_file import (
    RESULTS_FILE,
    SCHEMA_VERSION,
    ContestantResult,
    CostResult,
    JudgeResult,
    LatencyResult,
    MemoryResult,
    MetricResult,
    ProviderResult,
    Results,
    ResultsError,
    ResultsSource,
    SavingsResult,
    ToolResult,
    TypeResult,
    read_results,
)
from tests.support.fake_run import run_fake
from tests.support.paths import REPO


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("results")
    rc, _ = run_fake(tmp, [])
    assert rc == 0
    return tmp / "run"


def _same(a: float | None, b: float) -> bool:
    return (a is None and math.isnan(b)) or (a is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12))


@pytest.mark.e2e
def test_a_run_writes_results_that_read_back_to_the_same_bytes(run_dir):
    text = (run_dir / RESULTS_FILE).read_text()
    results = read_results(run_dir)
    assert results.schema_version == SCHEMA_VERSION == json.loads(text)["schema_version"]
    assert results.contestants and results.to_json() == text


@pytest.mark.e2e
def test_the_figures_are_the_reports_csvs(run_dir):
    results = read_results(run_dir)
    summary = pd.read_csv(run_dir / "summary.csv", index_col="mode")
    ci = pd.read_csv(run_dir / "summary_ci.csv")
    assert [c.mode for c in results.contestants] == list(summary.index)
    for c in results.contestants:
        row = summary.loc[c.mode]
        assert (c.cases, c.ok, c.failed) == (row["cases"], row["ok"], row["failed"])
        part = ci[ci["mode"] == c.mode]
        assert list(c.metrics) == list(part["metric"])
        for r in part.to_dict("records"):
            m = c.metrics[r["metric"]]
            assert (m.n, m.not_run) == (r["n"], r["not_run"])
            assert all(_same(getattr(m, k), r[k]) for k in ("mean", "lo", "hi", "mean_all")), (c.mode, r)
            if r["metric"] in summary.columns:  # summary.csv's mean of the same metric
                assert _same(m.mean, row[r["metric"]])


@pytest.mark.e2e
def test_the_costs_are_the_reports_cost_table_with_every_column(run_dir):
    results = read_results(run_dir)
    costs = cost_table(load_run(run_dir))
    assert {f.name for f in dataclasses.fields(CostResult)} == set(costs.columns) - {"mode"}
    for r in costs.to_dict("records"):
        cost = results.contestant(r["mode"]).cost
        assert cost is not None
        assert all(_same(getattr(cost, k), r[k]) for k in r if k != "mode"), r
        assert cost.total_tokens is not None and cost.answer_tokens is not None


def test_a_later_schema_version_is_refused_naming_the_file(tmp_path):
    doc = {"schema_version": SCHEMA_VERSION + 1, "headline_metric": None, "unpriced_models": [], "contestants": []}
    (tmp_path / RESULTS_FILE).write_text(json.dumps(doc))
    with pytest.raises(ResultsError, match=rf"{RESULTS_FILE}: schema_version {SCHEMA_VERSION + 1} is not"):
        read_results(tmp_path)


@pytest.mark.e2e
def test_report_rebuilds_the_file_identically_without_a_model(run_dir, tmp_path):
    from commands.cli import main

    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    (copy / RESULTS_FILE).unlink()
    assert main(["report", str(copy)]) == 0  # the fake endpoint is gone: a model call would fail
    assert (copy / RESULTS_FILE).read_bytes() == (run_dir / RESULTS_FILE).read_bytes()


def _maybe(rng: random.Random) -> float | None:
    return None if rng.random() < 0.2 else rng.uniform(-1e6, 1e6)


def _some(rng: random.Random, kind: type) -> object:
    """An instance of a result dataclass with drawn values (ints as ints, figures sometimes null), or None."""
    if rng.random() < 0.3:
        return None
    values = {}
    for f in dataclasses.fields(kind):
        if f.type == "int":
            values[f.name] = rng.randint(0, 9)
        elif f.type == "str":
            values[f.name] = rng.choice(["", "mem0", "settings (top_k=20)"])
        elif f.type == "bool":
            values[f.name] = rng.random() < 0.5
        else:
            values[f.name] = rng.randint(0, 9) if f.type == "int | None" else _maybe(rng)
    return kind(**values)


def _generated(rng: random.Random) -> Results:
    cost_fields = [f.name for f in dataclasses.fields(CostResult)]
    contestants = [
        ContestantResult(
            mode=f"mode{i}",
            cases=rng.randint(0, 500),
            ok=rng.randint(0, 500),
            failed=rng.randint(0, 5),
            metrics={
                f"m{j}": MetricResult(_maybe(rng), _maybe(rng), _maybe(rng), rng.randint(0, 9), rng.randint(0, 9), None)
                for j in range(rng.randint(0, 4))
            },
            cost=None
            if rng.random() < 0.3
            else CostResult(**{k: rng.randint(0, 9) if k == "cases" else _maybe(rng) for k in cost_fields}),  # type: ignore[arg-type]
            by_type={
                "lme_acc": [TypeResult(t, _maybe(rng), _maybe(rng), _maybe(rng), rng.randint(0, 9)) for t in "abc"]
            }
            if rng.random() < 0.5
            else {},
            judges={"lme_acc": JudgeResult(_maybe(rng), _maybe(rng), rng.randint(0, 9))} if rng.random() < 0.5 else {},
            savings=_some(rng, SavingsResult),  # type: ignore[arg-type]
            tools=_some(rng, ToolResult),  # type: ignore[arg-type]
            latency=_some(rng, LatencyResult),  # type: ignore[arg-type]
            provider=_some(rng, ProviderResult),  # type: ignore[arg-type]
            memory=_some(rng, MemoryResult),  # type: ignore[arg-type]
        )
        for i in range(rng.randint(1, 4))
    ]
    source = ResultsSource("a" * 64, "b" * 64, "c" * 64, "default.yaml dated 2026-06-20")
    return Results(
        rng.choice([None, "lme_acc"]), [f"model{rng.randint(0, 3)}"], contestants, source, rng.randint(0, 500)
    )


@pytest.mark.parametrize("seed", range(20))
def test_generated_results_round_trip(seed):
    results = _generated(random.Random(seed))
    assert Results.from_json(json.loads(results.to_json())) == results


@pytest.mark.parametrize("seed", range(12))
def test_a_file_missing_a_field_is_one_error_naming_it(tmp_path, seed):
    rng = random.Random(seed)
    doc = json.loads(_generated(rng).to_json())
    holders = [doc, *doc["contestants"]]
    holders += [doc["source"]]
    for c in doc["contestants"]:
        holders += [c[k] for k in ("cost", "savings", "tools", "latency", "provider", "memory") if c[k]]
        holders += list(c["metrics"].values()) + [t for rows in c["by_type"].values() for t in rows]
        holders += list(c["judges"].values())
    holder = rng.choice(holders)
    key = rng.choice([k for k in holder if k != "schema_version"])
    del holder[key]
    (tmp_path / RESULTS_FILE).write_text(json.dumps(doc))
    with pytest.raises(
        ResultsError, match=rf"{RESULTS_FILE}: not a results file of schema version {SCHEMA_VERSION} .*{key}"
    ):
        read_results(tmp_path)


@pytest.mark.parametrize("version", [0, "1", True, None, 1.5])
def test_a_version_that_is_not_one_is_refused(tmp_path, version):
    doc = json.loads(_generated(random.Random(0)).to_json())
    doc["schema_version"] = version
    (tmp_path / RESULTS_FILE).write_text(json.dumps(doc))
    with pytest.raises(ResultsError, match="schema_version .* is not one this harness reads"):
        read_results(tmp_path)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_per_type_figures_are_by_type_csv(tmp_path, seed):
    from reports.render import build_report
    from tests.support.report_fixtures import rec, write_run

    rng = random.Random(seed)
    types = ["multi-session", "temporal-reasoning", "knowledge-update"]
    records = [
        rec(
            f"q{i}{'_abs' if rng.random() < 0.2 else ''}",
            mode,
            em=float(rng.random() < 0.5),
            lme=rng.choice([0.0, 1.0, None]),
            tokens=rng.randint(100, 5000),
            qtype=rng.choice(types),
        )
        for i in range(rng.randint(4, 9))
        for mode in ("long_context", "summary")
    ]
    run_dir = write_run(tmp_path / "r", records)
    build_report(run_dir)
    results = read_results(run_dir)
    table = pd.read_csv(run_dir / "by_type.csv")
    seen = 0
    for c in results.contestants:
        for metric, rows in c.by_type.items():
            want = table[(table["mode"] == c.mode) & (table["metric"] == metric)]
            assert [t.question_type for t in rows] == list(want["question_type"])
            for t, r in zip(rows, want.to_dict("records")):
                assert t.n == r["n"] and all(_same(getattr(t, k), r[k]) for k in ("mean", "lo", "hi")), r
                seen += 1
    assert seen == len(table) > 0


def test_every_field_is_documented_for_users():
    docs = (REPO / "docs" / "reporting.md").read_text()
    section = docs.split("## The results file (`results.json`)", 1)[1].split("\n## ", 1)[0]
    kinds = (Results, ContestantResult, MetricResult, CostResult, TypeResult, ResultsSource, JudgeResult)
    kinds += (SavingsResult, ToolResult, LatencyResult, ProviderResult, MemoryResult)
    for kind in kinds:
        missing = [
            f.name for f in dataclasses.fields(kind) if f"`{f.name}`" not in section and f".{f.name}`" not in section
        ]
        assert not missing, f"{kind.__name__}: fields not in docs/reporting.md's results section: {missing}"


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", ""])
def test_a_corrupt_file_is_one_error_naming_it(tmp_path, text):
    (tmp_path / RESULTS_FILE).write_text(text)
    with pytest.raises(ResultsError, match=rf"{tmp_path / RESULTS_FILE}: corrupt"):
        read_results(tmp_path)


def test_a_file_of_schema_version_1_still_reads(tmp_path):
    """A file written before version 2: read as it is, the fields it cannot hold empty (load_results then rebuilds
    it, having no source to check it against: tests/reports/test_results_read.py)."""
    from tests.support.report_fixtures import as_version_1

    doc = as_version_1(json.loads(_generated(random.Random(5)).to_json()))
    (tmp_path / RESULTS_FILE).write_text(json.dumps(doc))
    old = read_results(tmp_path)
    assert old.schema_version == 1 and old.source is None and old.questions is None
    assert all(not c.judges and c.savings is c.tools is c.memory is None for c in old.contestants)
    assert [c.metrics for c in old.contestants] == [c.metrics for c in _generated(random.Random(5)).contestants]
