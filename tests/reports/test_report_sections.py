"""report.md and report.html are one list of sections (reports/report_sections.py `SECTIONS`) rendered twice: every
section a run has appears in both files, under the same heading, in the same order, with content in both; and the
report's tables read their figures from the run's results (results.json), not from a second computation."""

from __future__ import annotations

import dataclasses
import html
import random
import re
from pathlib import Path

import pytest

from reports import render
from reports.render import build_report
from reports.results_file import Results
from reports.sections import Both, Section, section_html, section_markdown
from tests.support.report_fixtures import generated_run, rec, standard_run, write_run


def _sections(run: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Section], str, str]:
    """The sections build_report rendered for `run`, and the two files it wrote."""
    seen: list[list[Section]] = []
    real = render.report_sections
    monkeypatch.setattr(render, "report_sections", lambda c: seen.append(real(c)) or seen[-1])
    out = build_report(run)
    return seen[0], out["markdown"].read_text(), out["html"].read_text()


def one_sided(sections: list[Section]) -> list[str]:
    """Sections with content in one format and none in the other."""
    bad = []
    for s in sections:
        md = [line for line in section_markdown(s)[1:] if line.strip()]
        page = [part for part in section_html(s)[1:] if part.strip()]
        if bool(md) != bool(page) and s.key != "title":
            bad.append(f"{s.key}: {'Markdown' if md else 'HTML'} only")
    return bad


def _md_headings(md: str) -> list[str]:
    return [line.lstrip("#").strip() for line in md.splitlines() if re.match(r"#{1,2} ", line)]


def _html_headings(page: str) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", h)) for h in re.findall(r"<h[12][^>]*>(.*?)</h[12]>", page)]


def _runs(tmp_path: Path) -> dict[str, Path]:
    votes = [rec(q, m, em=1.0, lme=1.0) for q in ("q1", "q2") for m in ("long_context", "summary")]
    for r in votes:
        r["metrics"]["judge_agreement"] = 2 / 3
    failed = [rec("q1", "summary", em=1.0), rec("q2", "summary", status="failed", error="down")]
    return {
        "standard": standard_run(tmp_path / "standard"),
        "generated": generated_run(tmp_path / "generated", 5),  # several types, failures, a memory contestant
        "votes": write_run(tmp_path / "votes", votes),
        "failed": write_run(tmp_path / "failed", failed),
    }


@pytest.mark.figures
def test_every_section_is_in_both_files_under_its_heading_in_one_order(tmp_path, monkeypatch):
    seen_keys: set[str] = set()
    for name, run in _runs(tmp_path).items():
        found, md, page = _sections(run, monkeypatch)
        seen_keys |= {s.key for s in found}
        assert not one_sided(found), name
        headings = [s.heading for s in found]
        # the same headings, in the same order, in both files (the HTML's drill-down has one more, inside Cases)
        assert _md_headings(md) == headings, name
        assert [h for h in _html_headings(page) if h != "Per-case drill-down"] == headings, name
    # the fixtures reach every section the report knows
    assert seen_keys == {
        "title", "headline", "run", "reference", "quality_ci", "other_ci", "judges", "votes", "savings", "tools",
        "cost", "paired", "by_type", "memory", "plots", "failures", "cases",
    }  # fmt: skip


def test_a_section_in_one_format_only_is_caught():
    """The check above fails on a section built for one format only (so it can fail)."""
    fine = Section("x", "X", [Both(["a line", ""], ["<p>a line</p>"])])
    md_only = Section("y", "Y", [Both(["a line", ""], [])])
    html_only = Section("z", "Z", [Both([""], ["<p>only here</p>"])])
    assert one_sided([fine, md_only, html_only]) == ["y: Markdown only", "z: HTML only"]


@pytest.mark.figures
def test_the_report_shows_the_figures_of_its_results(tmp_path, monkeypatch):
    """A figure changed in the run's `Results` (what results.json holds) shows in both files: the sections read it."""
    real = render.results_of

    def tampered(*args, **kw) -> Results:
        results = real(*args, **kw)
        c = results.contestant("summary_ondemand")
        em = dataclasses.replace(c.metrics["em"], mean=0.123)
        cost = dataclasses.replace(c.cost, cost_total_sum=42.0)  # type: ignore[arg-type]
        tools = dataclasses.replace(c.tools, search_total=77)  # type: ignore[arg-type]
        changed = dataclasses.replace(c, metrics={**c.metrics, "em": em}, cost=cost, tools=tools)
        return dataclasses.replace(results, contestants=[changed if x is c else x for x in results.contestants])

    monkeypatch.setattr(render, "results_of", tampered)
    out = build_report(standard_run(tmp_path / "run"))
    md, page = out["markdown"].read_text(), out["html"].read_text()
    quality = md.split("## Quality with confidence intervals")[1].split("\n## ")[0]
    assert "| EM ↑ | 1.0000 [1.0000, 1.0000] | 0.0000 [0.0000, 0.0000] | 0.1230 [0.2500, 1.0000] |" in quality
    assert "| 42.0000 |" in md.split("## Cost")[1].split("\n## ")[0]
    assert "| summary_ondemand | 4 | 4 | 0 | 77 |" in md
    assert "0.1230 [0.2500, 1.0000]" in page and 'data-v="42.0">42.0000' in page


@pytest.mark.parametrize("seed", range(4))
def test_generated_runs_keep_both_files_in_step(tmp_path, monkeypatch, seed):
    """Seeded runs (types, failures, judges not run, memory contestants drawn): never a one-sided section."""
    rng = random.Random(seed)
    run = generated_run(tmp_path / "run", rng.randint(0, 10_000))
    found, md, page = _sections(run, monkeypatch)
    assert not one_sided(found)
    assert _md_headings(md) == [s.heading for s in found]
