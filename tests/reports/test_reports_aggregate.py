"""Aggregates from records: CIs, judges' not_run, savings (both definitions), tool use, cost, scoreboard."""

from __future__ import annotations

import math

import pytest

from reports.aggregate import (
    cost_table,
    higher_is_better,
    judge_table,
    load_run,
    records_frame,
    savings,
    scoreboard,
    summarize_ci,
    tool_stats,
)
from reports.cost import Price, PriceTable, PricingError, load_price_table
from tests.support.report_fixtures import call, meta, rec, standard_run, summary_block, write_run


def row(df, mode, **kw):
    sub = df[df["mode"] == mode]
    for k, v in kw.items():
        sub = sub[sub[k] == v]
    return sub.iloc[0]


def test_means_with_bootstrap_ci_per_mode(tmp_path):
    run = load_run(standard_run(tmp_path / "r"))
    ci = summarize_ci(run, ["em", "final_prompt_tokens"])
    r = row(ci, "summary_ondemand", metric="em")
    assert r["mean"] == 0.75 and r["n"] == 4 and 0 <= r["lo"] <= 0.75 <= r["hi"] <= 1
    assert row(ci, "long_context", metric="final_prompt_tokens")["mean"] == 3750
    assert summarize_ci(run, ["em"]).equals(summarize_ci(run, ["em"]))  # deterministic


def test_judge_not_run_is_kept_apart_from_wrong(tmp_path):
    recs = [
        rec("q1", "summary", lme=1.0),
        rec("q2", "summary", lme=0.0),
        rec("q3", "summary", lme=None, lme_verdict="not_run"),
        rec("q4", "summary", lme=1.0, lme_strict=None),
    ]
    run = load_run(write_run(tmp_path / "r", recs))
    jt = judge_table(run)
    parity, strict = row(jt, "summary", metric="lme_acc"), row(jt, "summary", metric="lme_acc_strict")
    assert (parity["judged"], parity["not_run"]) == (3, 1)
    assert parity["accuracy"] == pytest.approx(2 / 3)  # without not_run
    assert parity["accuracy_all"] == pytest.approx(2 / 4)  # full denominator: not_run counted as wrong
    assert (strict["judged"], strict["not_run"], strict["accuracy"], strict["accuracy_all"]) == (2, 2, 0.5, 0.25)
    ci = summarize_ci(run, ["lme_acc"])
    assert ci.iloc[0]["not_run"] == 1 and ci.iloc[0]["mean"] == pytest.approx(2 / 3)
    board = scoreboard(run)
    assert board[("summary", "lme_acc")] == pytest.approx(2 / 3)
    assert board[("summary", "lme_acc@all")] == 0.5 and board[("summary", "lme_acc:not_run")] == 1


def test_longmemeval_task_averaged_and_abstention_accuracy(tmp_path):
    recs = [
        rec("a1", "summary", lme=1.0, qtype="temporal-reasoning"),
        rec("a2", "summary", lme=1.0, qtype="temporal-reasoning"),
        rec("a3", "summary", lme=0.0, qtype="temporal-reasoning"),
        rec("b1", "summary", lme=0.0, qtype="knowledge-update"),
        rec("b2_abs", "summary", lme=1.0, qtype="knowledge-update"),
    ]
    jt = judge_table(load_run(write_run(tmp_path / "r", recs)))
    r = row(jt, "summary", metric="lme_acc")
    assert r["accuracy"] == pytest.approx(3 / 5)  # overall
    assert r["task_avg"] == pytest.approx((2 / 3 + 1 / 2) / 2)  # mean of per-type means
    assert (r["abstention"], r["abstention_n"]) == (1.0, 1)


def test_trpc_binary_accuracy_handles_the_incorrect_trap(tmp_path):
    em_skip = {
        "llm_score": 1.0,
        "llm_score_strict": 1.0,
        "details": {"skipped": "exact_match", "verdict": "not_run", "verdict_strict": "not_run", "usage": None},
    }
    trap = {
        "llm_score": 0.5,
        "llm_score_strict": None,  # "The predicted answer is incorrect." → lenient fallback
        "details": {
            "skipped": None,
            "verdict": "correct",
            "verdict_strict": "not_run",
            "parse_mode": "fallback",
            "usage": call(100, 5, purpose="judge"),
        },
    }
    wrong = {
        "llm_score": 0.0,
        "llm_score_strict": 0.0,
        "details": {
            "skipped": None,
            "verdict": "incorrect",
            "verdict_strict": "incorrect",
            "usage": call(100, 5, purpose="judge"),
        },
    }
    recs = [rec("q1", "summary", trpc=em_skip), rec("q2", "summary", trpc=trap), rec("q3", "summary", trpc=wrong)]
    run = load_run(write_run(tmp_path / "r", recs))
    df = run.df
    assert list(df["llm_acc"]) == [1.0, 1.0, 0.0]
    assert df["llm_acc_strict"].tolist()[0] == 1.0 and math.isnan(df["llm_acc_strict"].tolist()[1])
    jt = judge_table(run)
    assert row(jt, "summary", metric="llm_acc_strict")["not_run"] == 1
    assert row(jt, "summary", metric="llm_score_strict")["accuracy"] == pytest.approx(0.5)


def test_prompt_savings_mean_of_percentages_and_ratio_of_means(tmp_path):
    sv = savings(load_run(standard_run(tmp_path / "r")))
    s = row(sv, "summary")
    assert s["savings_pct"] == pytest.approx((60 + 80 + 90 + 95) / 4)  # reference: mean of per-case %
    assert s["savings_ratio_pct"] == pytest.approx(100 * (1 - 400 / 3750))
    o = row(sv, "summary_ondemand")  # final call: 1000 tokens each
    assert o["savings_pct"] == pytest.approx((0 + 50 + 75 + 87.5) / 4)
    assert o["savings_ratio_pct"] == pytest.approx(100 * (1 - 1000 / 3750))
    assert o["lo"] <= o["savings_pct"] <= o["hi"] and s["pairs"] == 4


def test_savings_pair_only_cases_scored_in_both(tmp_path):
    recs = [
        rec("q1", "long_context", tokens=1000),
        rec("q1", "summary", tokens=100),
        rec("q2", "long_context", status="failed"),
        rec("q2", "summary", tokens=900),
    ]
    s = savings(load_run(write_run(tmp_path / "r", recs))).iloc[0]
    assert s["pairs"] == 1 and s["savings_pct"] == pytest.approx(90.0)


def test_tool_stats(tmp_path):
    recs = [
        rec(
            "q1",
            "summary_ondemand",
            n_search=2,
            n_load=1,
            tool_calls=[
                {"name": "session_search", "ok": True},
                {"name": "session_search", "ok": False},
                {"name": "session_load", "ok": True},
            ],
        ),
        rec("q2", "summary_ondemand", n_search=1),
        rec("q3", "summary_ondemand"),
    ]
    t = tool_stats(load_run(write_run(tmp_path / "r", recs))).iloc[0]
    assert (t["cases_with_search"], t["cases_with_load"], t["search_total"], t["load_total"]) == (2, 1, 3, 1)
    assert t["search_mean"] == pytest.approx(1.0) and t["load_mean"] == pytest.approx(1 / 3) and t["tool_errors"] == 1


def test_cost_counts_every_call_and_charges_shared_summaries(tmp_path):
    run = load_run(standard_run(tmp_path / "r"))
    ct = cost_table(run)
    per_m = 1e-6
    judge = (200 * 0.15 + 1 * 0.60) * per_m
    summ = (300 * 0.15 + 40 * 0.60) * per_m
    lc = row(ct, "long_context")
    assert lc["cost_answer"] == pytest.approx((3750 * 0.15 + 10 * 0.60) * per_m)
    assert lc["cost_summary"] == 0 and lc["cost_judge"] == pytest.approx(judge)
    s = row(ct, "summary")
    assert s["cost_summary"] == pytest.approx(summ)
    o = row(ct, "summary_ondemand")
    assert o["cost_summary"] == pytest.approx(summ)  # reused summary: charged here too
    assert o["cost_answer"] == pytest.approx((500 * 0.15 + 6 + 1000 * 0.15 + 6) * per_m)
    assert o["cost_total"] == pytest.approx(o["cost_answer"] + summ + judge)
    assert o["cost_total_sum"] == pytest.approx(4 * o["cost_total"])
    # the reference's token figure stays the final call's prompt tokens, apart from the cost
    assert o["final_prompt_tokens"] == 1000 and o["prompt_tokens_total"] == 1500
    assert row(run.df, "summary_ondemand", question_id="q1")["summary_tokens"] == 340


def test_cached_input_tokens_use_the_cached_price(tmp_path):
    recs = [rec("q1", "long_context", calls=[call(1000, 10, cached_tokens=800)])]
    c = cost_table(load_run(write_run(tmp_path / "r", recs))).iloc[0]
    assert c["cost_answer"] == pytest.approx((200 * 0.15 + 800 * 0.075 + 10 * 0.60) / 1e6)


def test_local_models_are_free_and_unknown_models_are_unpriced_not_zero(tmp_path):
    local = load_run(standard_run(tmp_path / "local", kind="local", model="smollm2-135m-instruct"))
    assert (cost_table(local)["cost_total"] == 0).all()
    recs = [rec("q1", "long_context", calls=[call(1000, model="mystery-model")])]
    run = load_run(write_run(tmp_path / "r", recs, meta(model="mystery-model")))
    assert math.isnan(cost_table(run).iloc[0]["cost_total"])
    assert run.unpriced_models == ("mystery-model",)
    # a separately configured remote judge is priced even when the answer model is local
    recs = [rec("q1", "summary", lme=1.0, judge_model="gpt-4o-2024-08-06")]
    run = load_run(
        write_run(tmp_path / "j", recs, meta(kind="local", model="x", judge={"kind": "remote", "model": "gpt-4o"}))
    )
    c = cost_table(run).iloc[0]
    assert c["cost_answer"] == 0 and c["cost_judge"] == pytest.approx((200 * 2.5 + 1 * 10.0) / 1e6)


def test_price_table_lookup_and_validation(tmp_path):
    table = load_price_table()
    assert table.date and table.lookup("gpt-4o-mini-2024-07-18") == table.lookup("gpt-4o-mini")
    assert table.lookup("gpt-4o-2024-08-06").input == 2.5  # longest prefix: gpt-4o, not gpt-4o-mini
    assert table.lookup("llama") is None
    bad = tmp_path / "p.yaml"
    bad.write_text("models: {}\n")
    with pytest.raises(PricingError, match="date"):
        load_price_table(bad)
    bad.write_text("date: 2026-01-01\nmodels: {m: {output: 1}}\n")
    with pytest.raises(PricingError, match="'m'"):
        load_price_table(bad)
    custom = PriceTable("2026-01-01", "USD", "", {"fake-model": Price(1.0, 2.0)})
    run = load_run(
        write_run(tmp_path / "c", [rec("q1", "summary", calls=[call(1000, 500, model="fake-model")])]), prices=custom
    )
    assert cost_table(run).iloc[0]["cost_total"] == pytest.approx((1000 * 1 + 500 * 2) / 1e6)


def test_failed_records_are_counted_not_scored(tmp_path):
    recs = [rec("q1", "summary", em=1.0), rec("q2", "summary", status="failed")]
    run = load_run(write_run(tmp_path / "r", recs))
    board = scoreboard(run)
    assert board[("summary", "failed")] == 1 and board[("summary", "ok")] == 1 and board[("summary", "em")] == 1.0


def test_directions_for_the_gate():
    assert higher_is_better("em") is True and higher_is_better("lme_acc@all") is True
    assert higher_is_better("final_prompt_tokens") is False and higher_is_better("cost_total") is False
    assert higher_is_better("query_ms") is False and higher_is_better("failed") is False
    assert higher_is_better("lme_acc:not_run") is False and higher_is_better("lme_acc_task_avg") is True
    assert higher_is_better("savings_pct") is True and higher_is_better("nonsense") is None


def test_records_frame_without_prices_has_no_cost_columns():
    df = records_frame([rec("q1", "summary", summary=summary_block())]).df
    assert "cost_total" not in df.columns and df.iloc[0]["summary_tokens"] == 340
