"""`gate` and `compare` read a run's figures from its results.json (reports/run_results.py `load_results`), and rebuild
it from the records, saying so in one line, when it is missing, of schema version 1, unreadable or stale; the figures
they read are the ones they computed from the records before (`board_of` against `scoreboard`, over generated runs)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from commands.cli import main
from reports.aggregate import read_run, scoreboard
from reports.cost import PriceTable, load_price_table
from reports.gate import board_of
from reports.memory_systems import memory_scoreboard
from reports.metrics import catalog_of
from reports.render import build_report
from reports.results_file import RESULTS_FILE, read_results
from reports.run_results import figures_of, load_results, results_of, source_of
from tests.support.report_fixtures import as_version_1, generated_run, standard_run


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reported run (its results.json written by the report) and an exact gate baseline of it."""
    d = tmp_path_factory.mktemp("read")
    run = standard_run(d / "run")
    build_report(run)
    assert main(["gate", str(run), "--baseline", str(d / "base.yaml"), "--write-baseline", "--policy", "exact"]) == 0
    return run


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def _gate(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["gate", str(run), "--baseline", str(_base(run))])
    out = capsys.readouterr()
    return code, out.out, out.err


def _base(run: Path) -> Path:
    """The exact baseline beside the run (copied beside each copy)."""
    return run.parent / "base.yaml"


def _tamper(run: Path, mode: str, metric: str, mean: float) -> None:
    """Change one figure of results.json, leaving its source (so it still reads as fresh)."""
    doc = json.loads((run / RESULTS_FILE).read_text())
    (c,) = [c for c in doc["contestants"] if c["mode"] == mode]
    c["metrics"][metric]["mean"] = mean
    (run / RESULTS_FILE).write_text(json.dumps(doc))


def _out(text: str) -> str:
    """The gate's output without the run directory's path (copies differ there only)."""
    return "\n".join(line.split(" (baseline ")[0] for line in text.splitlines())


def test_the_gate_reads_its_figures_from_results_json(reported, tmp_path, capsys):
    code, out, err = _gate(reported, capsys)
    assert code == 0 and "gate PASSED" in out and err == ""  # a fresh file: read as it is, no note
    run = _copy(reported, tmp_path / "run")
    shutil.copy(_base(reported), _base(run))
    _tamper(run, "summary_ondemand", "em", 0.125)
    code, out, err = _gate(run, capsys)
    assert code == 1 and err == ""
    (line,) = [line for line in out.splitlines() if line.startswith("✗ FAIL")]
    assert "summary_ondemand" in line and " em " in line and "0.125" in line
    assert read_results(run).contestant("summary_ondemand").metrics["em"].mean == 0.125  # fresh: not rewritten


def test_compare_reads_its_ranked_table_from_results_json(reported, tmp_path, capsys):
    a, b = _copy(reported, tmp_path / "a"), _copy(reported, tmp_path / "b")
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp1")]) == 0
    first = capsys.readouterr()
    assert "0.7500 [0.2500, 1.0000]" in first.out and "note:" not in first.err
    _tamper(b, "summary_ondemand", "lme_acc", 0.0625)  # the headline metric the table ranks by
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp2")]) == 0
    ranked = (tmp_path / "cmp2" / "compare.md").read_text().split("## B = ")[0]
    assert "0.0625 [0.2500, 1.0000]" in ranked  # the tampered mean, beside the untouched interval
    assert capsys.readouterr().err.count("note:") == 0


def test_a_stale_file_is_rebuilt_from_the_records_not_trusted(reported, tmp_path, capsys):
    run = _copy(reported, tmp_path / "run")
    shutil.copy(_base(reported), _base(run))
    _tamper(run, "summary_ondemand", "em", 0.125)  # a figure no record supports ...
    records = run / "records.jsonl"
    lines = records.read_text().splitlines()
    first = json.loads(lines[0])
    first["metrics"]["em"] = 0.0  # ... and the records changed since: long_context's q1 now wrong
    records.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    code, out, err = _gate(run, capsys)
    assert (
        err.strip()
        == f"note: {run / RESULTS_FILE}: records.jsonl changed since it was written: rebuilt from the records"
    )
    assert code == 1
    fails = [line for line in out.splitlines() if line.startswith("✗ FAIL")]
    assert any("long_context" in line and " em " in line and "0.75" in line for line in fails), fails
    assert not any("0.125" in line for line in out.splitlines())  # the tampered figure was not read
    rebuilt = read_results(run)
    assert rebuilt.source == source_of(run, read_run(run).meta, _default_prices())
    assert rebuilt.contestant("summary_ondemand").metrics["em"].mean == 0.75
    code, _, err = _gate(run, capsys)
    assert code == 1 and err == ""  # written back: fresh now


def _default_prices() -> PriceTable:
    """The default price table, as the gate loads it."""
    return load_price_table()


@pytest.mark.parametrize("how", ["missing", "version 1", "corrupt"])
def test_a_run_without_a_current_file_gets_one_rebuilt_and_the_same_gate_output(reported, tmp_path, capsys, how):
    run = _copy(reported, tmp_path / "run")
    shutil.copy(_base(reported), _base(run))
    path = run / RESULTS_FILE
    written = path.read_bytes()
    if how == "missing":
        path.unlink()
    elif how == "version 1":
        path.write_text(json.dumps(as_version_1(json.loads(written))))
    else:
        path.write_text("{not json")
    _, want, _ = _gate(reported, capsys)
    code, out, err = _gate(run, capsys)
    assert code == 0 and _out(out) == _out(want)
    (note,) = err.splitlines()
    assert note.startswith(f"note: {path}: ") and note.endswith(": rebuilt from the records")
    assert {"missing": "none in this run directory", "version 1": "schema version 1", "corrupt": "unreadable"}[
        how
    ] in note
    assert path.read_bytes() == written  # rebuilt exactly as the report wrote it


def test_another_price_table_is_computed_with_and_the_file_left_as_the_report_priced_it(reported, tmp_path, capsys):
    run = _copy(reported, tmp_path / "run")
    written = (run / RESULTS_FILE).read_bytes()
    prices = tmp_path / "dear.yaml"
    prices.write_text('date: "2020-01-01"\nmodels:\n  gpt-4o-mini: {input: 1000, output: 1000}\n')
    loaded = load_results(run, prices=prices)
    assert loaded.notice == (
        f"{run / RESULTS_FILE}: priced with default.yaml dated {_default_prices().date}, not dear.yaml dated 2020-01-01: "
        "figures computed from the records with dear.yaml dated 2020-01-01"
    )
    cheap = read_results(run).contestant("long_context").cost
    dear = loaded.results.contestant("long_context").cost
    assert cheap and dear and dear.cost_total_sum > 100 * cheap.cost_total_sum  # type: ignore[operator]
    assert (run / RESULTS_FILE).read_bytes() == written


def test_a_file_of_a_later_schema_is_refused_naming_it(reported, tmp_path, capsys):
    run = _copy(reported, tmp_path / "run")
    shutil.copy(_base(reported), _base(run))
    doc = json.loads((run / RESULTS_FILE).read_text())
    doc["schema_version"] = 99
    (run / RESULTS_FILE).write_text(json.dumps(doc))
    code, out, err = _gate(run, capsys)
    assert code == 2 and "gate" not in out
    assert f"{run / RESULTS_FILE}: schema_version 99 is not one this harness reads" in err
    assert "`lme-harness report RUN_DIR` rebuilds it" in err
    assert json.loads((run / RESULTS_FILE).read_text())["schema_version"] == 99  # a newer harness's file, kept


# --- the figures read are the figures computed ------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_the_figures_the_gate_reads_are_the_ones_it_computed_from_the_records(tmp_path, seed):
    run_dir = generated_run(tmp_path / "run", seed)
    run = read_run(run_dir)
    table = _default_prices()
    results = results_of(figures_of(run, table), source_of(run_dir, run.meta, table))
    back = type(results).from_json(json.loads(results.to_json()))  # as the gate reads it: through the file
    from reports.aggregate import headline_metric

    want = {**scoreboard(run.frame), **memory_scoreboard(run.records, headline_metric(run.frame))}
    got = board_of(back, catalog_of(run.meta))
    assert set(got) == set(want)
    bad = {k: (got[k], want[k]) for k in want if not math.isclose(got[k], want[k], rel_tol=1e-12, abs_tol=1e-12)}
    assert not bad


def test_a_judge_that_never_gave_a_verdict_keeps_its_not_run_count(tmp_path):
    """Every judge call failed: the metric has no mean, so summary_ci.csv leaves it out, but the gate still reads
    `lme_acc:not_run` (and `@all`) from results.json, as it computed them from the records before."""
    from tests.support.report_fixtures import rec, write_run

    run_dir = write_run(
        tmp_path / "run", [rec(q, m, lme=None, lme_verdict="not_run") for q in ("q1", "q2") for m in ("a", "b")]
    )
    build_report(run_dir)
    board = board_of(read_results(run_dir), catalog_of(read_run(run_dir).meta))
    assert board[("a", "lme_acc:not_run")] == 2.0 and board[("a", "lme_acc@all")] == 0.0
    assert board == scoreboard(read_run(run_dir).frame)
    assert "lme_acc" not in (run_dir / "summary_ci.csv").read_text()
