"""Issue 21 item 7: the report leads with which mode wins and at what cost (reports/aggregate.headline).

The headline metric is chosen from the run's metric specs (a judge's quality metric, else a lexical one), and
every figure of the headline is checked against numbers worked out by hand from the records.
"""

from __future__ import annotations

import re

import pytest

from harness.scoring.base import MetricSpec, ScoreInput, ScoreResult, specs_json
from harness.scoring.lexical import LexicalScorer
from reports.aggregate import headline, headline_metric, load_run
from reports.render import build_report
from tests.support.report_fixtures import call, meta, rec, standard_run, write_run

TRPC = {"llm_score": 0.5, "llm_score_strict": 0.5, "details": {"verdict": "correct", "verdict_strict": "correct"}}


class GroundedJudge:
    """A judge known only from run.json (no module of reports/ names it)."""

    metrics = (MetricSpec("grounded", True, "a judge's verdict", "grounded (judge)", judged=True, binary=True),)

    def score(self, item: ScoreInput) -> ScoreResult:
        return ScoreResult({"grounded": 1.0})


def test_the_headline_metric_comes_from_the_specs(tmp_path):
    assert headline_metric(load_run(standard_run(tmp_path / "lme"))) == "lme_acc"  # the LongMemEval judge's
    lexical = [rec(q, m, em=1.0, rouge_l=0.5) for q in ("q1", "q2") for m in ("long_context", "summary")]
    assert headline_metric(load_run(write_run(tmp_path / "lex", lexical))) == "rouge_l"  # the reference's first
    trpc = [rec(q, m, trpc=TRPC) for q in ("q1", "q2") for m in ("long_context", "summary")]
    assert headline_metric(load_run(write_run(tmp_path / "trpc", trpc))) == "llm_score"
    # a judge declared only in run.json wins over the lexical metrics
    grounded = [rec(q, m, rouge_l=0.5) for q in ("q1", "q2") for m in ("long_context", "summary")]
    for r in grounded:
        r["metrics"]["grounded"] = 1.0
    m = meta()
    m["metrics"] = specs_json([LexicalScorer(), GroundedJudge()])
    assert headline_metric(load_run(write_run(tmp_path / "grounded", grounded, m))) == "grounded"
    # a judge that never produced a value is passed over
    for r in grounded:
        r["metrics"]["grounded"] = None
    assert headline_metric(load_run(write_run(tmp_path / "unjudged", grounded, m))) == "rouge_l"


def test_headline_figures_against_long_context(tmp_path):
    head = headline(load_run(standard_run(tmp_path / "r")), "lme_acc").set_index("mode")
    od = head.loc["summary_ondemand"]
    assert (od["n"], od["mean"], od["pairs"]) == (4, 0.75, 4)
    assert od["delta"] == pytest.approx(-0.25) and od["delta_lo"] < 0 <= od["delta_hi"]
    # prompt tokens of every answer call: 500 + (400 + 600) per case, against long_context's 1000..8000
    assert od["prompt_tokens"] == 1500 and od["prompt_share"] == pytest.approx(6000 / 15000)
    assert od["latency_share"] == pytest.approx(sum(500 + i for i in range(4)) / sum(900 + i for i in range(4)))
    lc = head.loc["long_context"]
    assert (lc["delta"], lc["prompt_share"], lc["latency_share"]) == (0.0, 1.0, 1.0)


def test_differences_and_shares_are_paired_over_the_cases_both_modes_scored(tmp_path):
    recs = [
        rec("q1", "long_context", lme=1.0, tokens=1000, query_ms=1000),
        rec("q2", "long_context", status="failed"),
        rec("q1", "summary", lme=0.0, tokens=100, query_ms=100),
        rec("q2", "summary", lme=1.0, tokens=900, query_ms=900),
    ]
    s = headline(load_run(write_run(tmp_path / "r", recs)), "lme_acc").set_index("mode").loc["summary"]
    assert (s["n"], s["mean"]) == (2, 0.5)  # its own mean: every case it scored
    assert (s["pairs"], s["delta"], s["prompt_share"], s["latency_share"]) == (1, -1.0, 0.1, 0.1)  # q1 only


def test_the_report_leads_with_the_headline(tmp_path):
    out = build_report(standard_run(tmp_path / "r"))
    md, page = out["markdown"].read_text(), out["html"].read_text()
    assert md.index("## Headline") < md.index("## Reference table")
    sentence = (
        "long_context leads on LongMemEval acc: 1.0000 [1.0000, 1.0000] over 4 cases. The best other mode, "
        "summary_ondemand, scores Δ -0.2500 [-0.7500, +0.0000] over 4 paired cases (the interval includes 0"
    )
    assert sentence in md and sentence in page
    # tokens incl. ingest: answer 510 + 1,010, ingest the (shared) summary's 300 + 40; long_context's 3,760 a case
    row = "| summary_ondemand | 0.7500 [0.2500, 1.0000] (n=4) | -0.2500 [-0.7500, +0.0000] | 1,860 (49 %) |"
    assert row + " 1,520 / 340 / 0 | 502 (56 %) |" in md
    # in the page: the verdict, the headline table and the plot come before the provenance and every other table
    first_other_table = min(page.index(f'id="{t}"') for t in ("reference", "metrics-ci", "cost", "cases"))
    for anchor in ('id="verdict"', 'id="headline-table"', 'id="headline-plot"'):
        assert page.index(anchor) < page.index('id="run"') < first_other_table, anchor
    assert len(re.findall(r'<img class="plot"', page)) == 4  # the quality plot moved up, not copied


def test_a_run_without_long_context_has_a_headline_without_a_baseline(tmp_path):
    recs = [rec(q, m, lme=float(m == "summary"), rouge_l=0.3) for q in ("q1", "q2") for m in ("summary", "other")]
    out = build_report(write_run(tmp_path / "r", recs))
    md = out["markdown"].read_text()
    assert "summary leads on LongMemEval acc: 1.0000 [1.0000, 1.0000] over 2 cases. No long_context in this run" in md
    table = md[md.index("## Headline") : md.index("## Reference table")]
    assert (
        "| mode | LongMemEval acc ↑ [95 % CI] | tokens/case incl. ingest | answer / ingest / retrieve | latency ms/case |"
        in table
    )
    assert "Δ" not in table.replace("Δ:", "")  # no difference column; the note may define Δ
    assert 'id="headline-table"' in out["html"].read_text()


def test_a_run_where_every_pair_failed_still_has_a_headline(tmp_path):
    recs = [rec(q, "summary", status="failed", error="down") for q in ("q1", "q2")]
    md = build_report(write_run(tmp_path / "r", recs))["markdown"].read_text()
    assert "No mode has a quality score in this run" in md


def test_ties_name_every_leader(tmp_path):
    recs = [rec(q, m, lme=1.0, calls=[call(10)]) for q in ("q1", "q2") for m in ("long_context", "summary")]
    md = build_report(write_run(tmp_path / "r", recs))["markdown"].read_text()
    assert "long_context and summary lead on LongMemEval acc" in md
