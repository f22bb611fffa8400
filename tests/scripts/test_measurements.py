"""Measurements are data (docs/measurements/*.measurement.json) and the docs' tables are generated from them
(scripts/measurements.py): a table edited by hand or left behind by its data, a record without the command, host,
date, commit or model speed behind its numbers, and a file in docs/measurements/ that no record accounts for all
fail here."""

from __future__ import annotations

import csv
import json
import random
import shutil
from pathlib import Path

import pytest

from scripts import measurements as ms

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_tables_and_index_are_what_the_records_generate():
    problems = ms.problems()
    assert not problems, "\n".join(problems) + "\nregenerate: python -m scripts.measurements write"


def test_the_docs_this_change_converted_show_generated_tables():
    """The main job's cost, PERFORMANCE.md and the retrieval docs cite their numbers through records, not prose."""
    blocks = {
        doc.relative_to(REPO).as_posix(): {m.group("ref") for m in ms.BLOCK.finditer(doc.read_text())}
        for doc in ms.doc_files()
    }
    assert {"main_job/summary", "main_job_tokens/calls"} <= blocks["docs/quickstart.md"]
    assert {"performance/targets", "performance/overhead", "performance/concurrency"} <= blocks["docs/PERFORMANCE.md"]
    assert "retrieval_budgets_floor_proxy_foldB/budgets" in blocks["docs/retrieval.md"]
    assert "retrieval_not_adopted/mechanisms" in blocks["docs/design/retrieval.md"]


# --------------------------------------------------------------------------------------------- a repository in tmp


def _run(rid: str = "r1", **over: object) -> dict[str, object]:
    run: dict[str, object] = {
        "id": rid,
        "commands": ["lme-harness run +experiment=quickstart"],
        "host": {"cpu": "AMD EPYC, cpu family 25 model 17 (Zen 4)", "cores": 2},
        "date": "2026-12-04",
        "commit": "c650dab",
        "model": {"name": "qwen25_coder_15b", "prefill_tokens_s": 65.3, "generation_tokens_s": 24.2},
        "values": {"wall_s": 122},
    }
    run.update(over)
    return run


def _repo(
    tmp_path: Path, record: dict[str, object], doc: str = "<!-- measurement job/t -->\n<!-- /measurement -->\n"
) -> Path:
    (tmp_path / "docs" / "measurements").mkdir(parents=True)
    (tmp_path / "README.md").write_text("# x\n")
    (tmp_path / "docs" / "page.md").write_text(f"# Page\n\n{doc}")
    (tmp_path / "docs" / "measurements" / "job.measurement.json").write_text(json.dumps(record))
    return tmp_path


def _record(**tables: object) -> dict[str, object]:
    table = {"columns": [{"title": "wall", "f": "{:,d} s"}], "rows": [[122]], "run": "r1"}
    return {"title": "t", "runs": [_run()], "tables": tables or {"t": table}}


def test_write_fills_the_block_with_the_table_and_how_it_was_measured(tmp_path):
    root = _repo(tmp_path, _record())
    assert ms.problems(root) and ms.write(root)
    page = (root / "docs" / "page.md").read_text()
    assert "| wall |\n|---|\n| 122 s |" in page
    assert "`lme-harness run +experiment=quickstart` at c650dab on AMD EPYC, cpu family 25 model 17 (Zen 4)" in page
    assert "qwen25_coder_15b at 65.3 prefill / 24.2 generation tokens/s" in page
    assert "[job.measurement.json](measurements/job.measurement.json)" in page
    assert ms.problems(root) == [] and ms.write(root) == []  # idempotent


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"commands": []}, "'commands' missing"),
        ({"commands": ["  "]}, "'commands' missing"),
        ({"host": {"cores": 2}}, "'host.cpu' missing"),
        ({"host": "a laptop"}, "'host.cpu' missing"),
        ({"date": "yesterday"}, "'date'"),
        ({"commit": "HEAD"}, "'commit'"),
        ({"model": {"name": "qwen25_coder_15b"}}, "'model' needs"),
        ({"model": {"name": "qwen25_coder_15b", "prefill_tokens_s": 0, "generation_tokens_s": 3}}, "'model' needs"),
        ({"model": {"name": "x", "prefill_tokens_s": [9, 3], "generation_tokens_s": 3}}, "'model' needs"),
    ],
)
def test_a_record_without_what_produced_its_numbers_is_named(tmp_path, change, named):
    root = _repo(tmp_path, {"title": "t", "runs": [_run(**change)], "tables": {}})
    found = ms.problems(root)
    assert any("job.measurement.json runs[0] (r1)" in p and named in p for p in found), found
    with pytest.raises(ms.MeasurementError, match="job.measurement.json"):
        ms.write(root)


def test_model_null_or_not_recorded_says_so(tmp_path):
    old = _run(model={"name": "qwen25_coder_15b", "not_recorded": "the run predates run.json's speeds"})
    table = {"columns": [{"title": "x"}], "rows": [[1]], "run": "r1"}
    root = _repo(tmp_path, {"title": "t", "runs": [old, _run("r2", model=None)], "tables": {"t": table}})
    ms.write(root)
    assert ms.problems(root) == []
    assert "qwen25_coder_15b (tokens/s not recorded: the run predates" in (root / "docs" / "page.md").read_text()
    missing = dict(_run("r3"))
    del missing["model"]
    root2 = _repo(tmp_path / "b", {"title": "t", "runs": [missing], "tables": {}}, doc="")
    assert any("'model' missing" in p for p in ms.problems(root2))


def test_a_table_edited_by_hand_or_left_behind_by_its_data_is_stale(tmp_path):
    root = _repo(tmp_path, _record())
    ms.write(root)
    page = root / "docs" / "page.md"
    page.write_text(page.read_text().replace("| 122 s |", "| 99 s |"))
    assert any("docs/page.md is out of date" in p for p in ms.problems(root))
    ms.write(root)
    rec = root / "docs" / "measurements" / "job.measurement.json"
    data = json.loads(rec.read_text())
    data["tables"]["t"]["rows"] = [[123]]
    rec.write_text(json.dumps(data))
    assert any("docs/page.md is out of date" in p for p in ms.problems(root))


def test_a_file_no_record_lists_and_a_listed_file_that_is_missing_are_named(tmp_path):
    root = _repo(tmp_path, _record())
    ms.write(root)
    (root / "docs" / "measurements" / "orphan.csv").write_text("a\n1\n")
    assert any("orphan.csv: no record lists it" in p for p in ms.problems(root))
    data = _record()
    data["files"] = ["gone.csv"]
    (root / "docs" / "measurements" / "job.measurement.json").write_text(json.dumps(data))
    assert any("'gone.csv' is listed but not in" in p for p in ms.problems(root))


def test_a_block_naming_no_record_table_is_one_error_naming_the_doc(tmp_path):
    root = _repo(tmp_path, _record(), doc="<!-- measurement job/nope -->\n<!-- /measurement -->\n")
    assert any("page.md" in p and "job/nope" in p for p in ms.problems(root))


@pytest.mark.parametrize(
    "marker",
    [
        "<!-- measurement: job -->",
        "<!-- measurement job -->",
        "<!-- measurement  job/t -->",
        "<!-- measurement job/t-->",
    ],
)
def test_a_marker_the_generator_would_skip_is_named(tmp_path, marker):
    """A table under another marker syntax would stay hand-kept and unchecked: check names the doc and line."""
    root = _repo(tmp_path, _record(), doc=f"intro\n{marker}\n| x |\n|---|\n| 1 |\n<!-- /measurement -->\n")
    assert any(p.startswith("docs/page.md:4:") and "is not a measurement block" in p for p in ms.problems(root))
    good = _repo(tmp_path / "b", _record(), doc="<!-- measurement job/t -->\n<!-- /measurement -->\n")
    ms.write(good)
    assert ms.problems(good) == []


def test_a_table_row_must_name_its_run(tmp_path):
    root = _repo(tmp_path, _record(t={"columns": [{"title": "x"}], "rows": [[1]], "run": "elsewhere"}))
    assert any("run 'elsewhere' is not in 'runs'" in p for p in ms.problems(root))
    root2 = _repo(tmp_path / "b", _record(t={"columns": [{"title": "x"}], "rows": [[1]]}))
    assert any("'run' missing" in p for p in ms.problems(root2))


# ------------------------------------------------------------------------------------------------- the renderers


@pytest.mark.parametrize(
    ("template", "value", "text"),
    [
        ("{:.3fZ}", 0.944, ".944"),
        ("{:.3fZ}", 1.0, "1.000"),
        ("{:+.3fM}", -0.056, "\u22120.056"),
        ("{:+.3f}", 0.0, "+0.000"),
        ("{:,d}", 1269, "1,269"),
        ("{:02d}", 5, "05"),
        ("**{:.3f}** / {:,.0f}", [0.5, 3276.4], "**0.500** / 3,276"),
        ("{}", None, "-"),
    ],
)
def test_cell_formats(template, value, text):
    assert ms.fmt(template, value) == text


def test_one_row_per_run_and_ranges_per_group_follow_the_runs(tmp_path):
    rng = random.Random(11)
    runs = [
        _run(f"r{i}", host={"cpu": rng.choice(["A", "B"]), "cores": 2}, values={"wall_s": rng.randint(90, 700)})
        for i in range(30)
    ]
    table = {
        "per_run": True,
        "group_by": ["host.cpu"],
        "columns": [
            {"title": "cpu", "key": "host.cpu"},
            {"title": "runs", "agg": "count", "f": "{:d}"},
            {"title": "wall", "key": "values.wall_s", "agg": "range", "f": "{:d}"},
        ],
    }
    rec = ms.Record("job", tmp_path / "job.measurement.json", {"title": "t", "runs": runs, "tables": {"t": table}})
    rows = {line.split(" | ")[0].strip("| "): line for line in ms.render_table(rec, table).splitlines()[2:]}
    for cpu in ("A", "B"):
        walls = [r["values"]["wall_s"] for r in runs if r["host"]["cpu"] == cpu]  # type: ignore[index]
        want = str(min(walls)) if min(walls) == max(walls) else f"{min(walls)}-{max(walls)}"
        assert rows[cpu] == f"| {cpu} | {len(walls)} | {want} |"


def test_a_budget_table_is_computed_from_the_results_file_and_marks_each_figure_below(tmp_path):
    """Seeded budget CSVs (as retrieval-eval writes them): every cell is the CSV's figures, in bold exactly where the
    subject is below the reference, and the summary rows are the case-weighted means."""
    rng = random.Random(3)
    types, budgets, metrics = ["t1", "t2", "t3"], [500, 1000], ["evidence", "hit", "turn_recall_any@5"]
    for trial in range(20):
        path = tmp_path / f"b{trial}.csv"
        rows = []
        cases = {t: rng.randint(1, 30) for t in types}
        for preset in ("default", "bm25"):
            for t in types:
                for b in budgets:
                    rows.append(
                        {"preset": preset, "question_type": t, "budget_tokens": b, "cases": cases[t]}
                        | {m: rng.choice([0.0, 0.5, 1 / 3, 0.875, 1.0]) for m in metrics}
                        | {"complete": rng.random(), "tokens_mean": rng.uniform(100, 4000)}
                    )
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        titles, out = ms.view_budgets(path, "default", "bm25", budgets, types, metrics)
        assert titles == ["type", "500", "1,000"]
        at = {(r["preset"], r["question_type"], r["budget_tokens"]): r for r in rows}
        for line, t in zip(out, types, strict=False):
            assert line[0] == f"{t} ({cases[t]})"
            for cell, b in zip(line[1:], budgets, strict=True):
                mine, theirs = cell.split(" vs ")
                for part, ref, m in zip(mine.split(" / "), theirs.split(" / "), metrics, strict=True):
                    s, r = at[("default", t, b)][m], at[("bm25", t, b)][m]
                    assert part == (f"**{ms.fmt('{:.3fZ}', s)}**" if s < r else ms.fmt("{:.3fZ}", s))
                    assert ref == ms.fmt("{:.3fZ}", r)
        total = sum(cases.values())
        mean = sum(at[("default", t, 500)]["tokens_mean"] * cases[t] for t in types) / total
        assert out[len(types)][1].split(" vs ")[0] == f"{mean:,.0f}"


def test_a_kept_report_table_is_read_back_as_written(tmp_path):
    """The retrieval-eval report kept in docs/measurements/: the generated fold-B table shows its figures."""
    src = REPO / "docs" / "measurements" / "retrieval_eval_proxy_foldB.md"
    path = tmp_path / "report.md"
    shutil.copy(src, path)
    titles, out = ms.view_eval_by_type(path, ["default", "bm25"], ["multi-session"])
    assert titles == ["type", "default", "bm25"]
    assert out[0] == [
        "multi-session (29)",
        "0.621 / 0.931 / 0.897 / **0.897** / 440",
        "0.379 / 0.862 / 0.724 / **0.034** / 3,851",
    ]
    path.write_text(
        path.read_text().replace("| multi-session | default | 29 | 0.621 |", "| multi-session | default | 29 | 0.655 |")
    )
    assert ms.view_eval_by_type(path, ["default", "bm25"], ["multi-session"])[1][0][1].startswith("0.655 /")
