"""The run report: Markdown sections, PNG+SVG plots, a self-contained HTML page with everything escaped."""

from __future__ import annotations

import re

import pytest

from commands.cli import main
from reports.render import build_report
from tests.support.report_fixtures import rec, standard_run, write_run

PLOTS = ("quality_vs_tokens", "metrics", "latency", "win_loss_tie")


@pytest.mark.figures
def test_report_files_and_sections(tmp_path):
    run = standard_run(tmp_path / "run")
    out = build_report(run)
    for name in PLOTS:
        for ext in (".png", ".svg"):
            p = run / f"{name}{ext}"
            assert p.exists() and p.stat().st_size > 1000, p
    for key in ("markdown", "html", "csv", "ci_csv", "cases_csv"):
        assert out[key].exists()
    md = out["markdown"].read_text()
    for section in (
        "## Reference table",
        "## Quality with confidence intervals",
        "## Judges",
        "## Prompt savings vs long_context",
        "## Tool use",
        "## Cost",
        "## Per case: summary_ondemand vs summary",
    ):
        assert section in md, section
    assert "81.2 [" in md and "| 89.3 |" in md  # savings: mean of per-case % with CI, and ratio of means
    assert "dated " in md and "USD per 1M" in md
    assert re.search(r"\| summary_ondemand vs summary \| EM ↑ \| 4 \| 0\.0000 \| 0\.7500 \|", md)


@pytest.mark.figures
def test_report_is_deterministic(tmp_path):
    run = standard_run(tmp_path / "run")
    build_report(run)
    first = {n: (run / n).read_bytes() for n in ("report.md", "report.html", "summary_ci.csv", "metrics.svg")}
    build_report(run)
    assert first == {n: (run / n).read_bytes() for n in first}


def test_html_is_self_contained_and_escaped(tmp_path):
    hostile = '<img src=x onerror="alert(1)"> & "quotes" </pre><script>alert(2)</script>'
    recs = [
        rec(
            "q1",
            "summary",
            prediction=hostile,
            question=hostile,
            reference="<b>Paris</b>",
            em=1.0,
            tool_calls=[{"name": "session_search", "ok": True, "arguments": hostile, "trace": {"q": hostile}}],
        )
    ]
    run = write_run(tmp_path / "run", recs)
    html = build_report(run)["html"].read_text()
    assert "<script>alert" not in html and "<img src=x" not in html and "<b>Paris</b>" not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html and "&lt;b&gt;Paris&lt;/b&gt;" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # nothing loaded from the network
    assert html.count("<script>") == 1 and "Content-Security-Policy" in html
    assert all(
        src.startswith("data:image/png;base64,") for src in re.findall(r'<img class="plot"[^>]*src="([^"]+)"', html)
    )


def test_report_cli_accepts_a_price_table(tmp_path, capsys):
    run = standard_run(tmp_path / "run")
    prices = tmp_path / "prices.yaml"
    prices.write_text('date: "2020-01-01"\nmodels:\n  gpt-4o-mini: {input: 1000, output: 0}\n')
    assert main(["report", str(run), "--pricing", str(prices)]) == 0
    assert "dated 2020-01-01" in capsys.readouterr().out
    assert main(["report", str(run), "--pricing", str(tmp_path / "missing.yaml")]) == 2
