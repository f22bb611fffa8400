"""VotedJudge (harness/scoring/votes.py): k judge calls per answer, the majority verdict, the judge's agreement."""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from commands.cli import main
from harness.llm.types import LLMError, Usage
from harness.records import load_records
from harness.scoring import ScoreInput
from harness.scoring.base import details_key, specs_json
from harness.scoring.judges import LongMemEvalJudge, TrpcJudge
from harness.scoring.votes import VotedJudge, VotesConfigError, majority
from harness.testing.fake_openai import FakeOpenAIServer, Reply, completion
from harness.testing.faults import FakeModel, request_kind
from reports.aggregate import load_run, scoreboard
from reports.cost import judge_calls
from reports.gate import run_gate
from tests.support.report_fixtures import rec, write_run
from tests.support.tagged_run import MODES, N_CASES, answer, args, dataset, stable_records


def model(*script: str | Exception) -> FakeModel:
    return FakeModel(script=script, usage=Usage(150, 1), model="fake-judge", finish_reason=None)


def item(prediction: str = "You went to Kyoto.") -> ScoreInput:
    return ScoreInput("q1", "single-session-user", "Where did I travel?", "Kyoto", prediction)


def lme(m: FakeModel, votes: int = 3, **kw: Any) -> VotedJudge:
    return VotedJudge(
        lambda model: LongMemEvalJudge(model, params={"temperature": 1.0, "max_tokens": 10}), m, votes, **kw
    )


# --- unit: majority, ties, not_run, agreement ---------------------------------------------------------------


def test_majority_verdict_and_agreement_with_distinct_salts_per_vote():
    m = model("yes", "no", "yes")
    res = lme(m).score(item())
    assert res.error is None
    assert res.values == {"lme_acc": 1.0, "lme_acc_strict": 1.0, "judge_agreement": pytest.approx(2 / 3)}
    d = res.details
    assert d["verdict"] == "correct" and d["verdict_strict"] == "correct" and d["raw"] == "yes"
    assert [v["verdict"] for v in d["votes"]] == ["correct", "incorrect", "correct"]
    assert [v["raw"] for v in d["votes"]] == ["yes", "no", "yes"]
    assert all(v["usage"]["usage"]["prompt_tokens"] == 150 for v in d["votes"])
    # vote 0 is the plain call; votes 1, 2 are salted apart (the salt separates cache entries, it is not sent)
    assert [c["params"].get("cache_salt") for c in m.calls] == [None, "judge-vote-1", "judge-vote-2"]
    assert len({json.dumps(c["messages"]) for c in m.calls}) == 1


def test_unanimous_votes_agree_fully():
    res = lme(model("no", "no", "no")).score(item())
    assert res.values == {"lme_acc": 0.0, "lme_acc_strict": 0.0, "judge_agreement": 1.0}
    assert res.details["vote_ties"] is None


def test_strict_tie_among_counted_votes_is_none_with_a_reason_never_0_or_1():
    # vote 1 is unparsable in the strict parse (not_run): it does not count; the other two split 1-1
    res = lme(model("yes", "Maybe yes", "no")).score(item())
    assert res.values["lme_acc"] == 1.0  # upstream parse: yes, yes, no
    assert res.values["lme_acc_strict"] is None
    d = res.details
    assert d["verdict_strict"] == "not_run"  # the derived strict verdict is not a silent 0/1 either
    assert "tied" in d["vote_ties"]["lme_acc_strict"] and "tied" in d["strict_reason"]
    assert res.values["judge_agreement"] == pytest.approx(2 / 3)


def test_not_run_votes_do_not_count_toward_the_majority():
    res = lme(model("Unsure.", "Unclear.", "no")).score(item())
    assert res.values["lme_acc_strict"] == 0.0  # the only counted strict vote
    assert res.details["verdict_strict"] == "incorrect"


def test_continuous_score_is_the_mean_over_votes_with_a_value():
    replies = [
        '{"correct": true, "confidence": 0.9, "reason": "a"}',
        '{"correct": true, "confidence": 0.6, "reason": "b"}',
        "not json at all",  # lenient: fallback verdict (no 'correct' substring → incorrect, 0); strict: None
    ]
    judge = VotedJudge(lambda model: TrpcJudge(model), model(*replies), 3)
    res = judge.score(item("I have no idea."))
    assert res.values["llm_score"] == pytest.approx((0.9 + 0.6 + 0.0) / 3)
    assert res.values["llm_score_strict"] == pytest.approx((0.9 + 0.6) / 2)
    assert res.details["verdict"] == "correct" and res.details["verdict_strict"] == "correct"
    assert [s.name for s in judge.metrics] == ["llm_score", "llm_score_strict", "judge_agreement"]
    assert judge.derived_metrics == TrpcJudge.derived_metrics


def test_no_judge_call_no_votes():
    m = model()
    res = VotedJudge(lambda model: TrpcJudge(model), m, 3).score(item("Kyoto"))  # exact match: judge skipped
    assert m.calls == [] and res.values == {"llm_score": 1.0, "llm_score_strict": 1.0, "judge_agreement": None}
    assert res.details["skipped"] == "exact_match" and res.details["votes"] == []


def test_majority_helper():
    assert majority([1.0, 0.0, 1.0]) == (1.0, 2, 3)
    assert majority([1.0, None, 0.0]) == (None, 1, 2)
    assert majority([None, None]) == (None, 0, 0)


# --- config, metrics, details key ---------------------------------------------------------------------------


@pytest.mark.parametrize("votes", [2, 0, -1, 4, "3", True])
def test_votes_must_be_odd(votes):
    with pytest.raises(VotesConfigError, match=r"judge\.votes must be an odd number"):
        lme(model(), votes=votes)


@pytest.mark.e2e
def test_even_votes_is_one_config_error_naming_judge_votes(tmp_path, capsys):
    # run: refused before any endpoint is opened (this one is unreachable)
    data = dataset(tmp_path)
    argv = [*args(tmp_path, "http://127.0.0.1:9/v1", data, "run"), "judge=longmemeval_votes3", "judge.votes=4"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "judge.votes must be an odd number" in err and "got 4" in err and "Traceback" not in err
    # rescore: refused when the judge is built, before any record is written
    src = write_run(tmp_path / "src", [rec("q1", "summary")])
    with FakeOpenAIServer(Judge(SCRIPT)) as srv:
        argv = [*_rescore_argv(tmp_path, src, srv.base_url), "judge=longmemeval_votes3", "judge.votes=2"]
        assert main(argv) == 2
        assert not [r for r in srv.requests if r.get("messages")]
    err = capsys.readouterr().err
    assert err.count("judge.votes must be an odd number") == 1 and "got 2" in err and "Traceback" not in err
    assert not (tmp_path / "rescored" / "records.jsonl").exists()


def test_wrapper_keeps_the_inner_judges_metric_names_and_details_key():
    judge = lme(model())
    assert details_key(judge) == "LongMemEvalJudge"
    assert [s.name for s in judge.metrics] == ["lme_acc", "lme_acc_strict", "judge_agreement"]
    (agreement,) = [s for s in judge.metrics if s.name == "judge_agreement"]
    assert agreement.higher_is_better and not agreement.quality
    assert {e["scorer"] for e in specs_json([judge])} == {"LongMemEvalJudge"}
    one = lme(model(), votes=1)
    assert specs_json([one]) == specs_json([LongMemEvalJudge(model())])  # votes=1: run.json unchanged


def test_votes_at_temperature_zero_warn_once(caplog):
    with caplog.at_level(logging.WARNING):
        VotedJudge(lambda model: LongMemEvalJudge(model), model(), 3)  # the official params: temperature 0
    assert [r.message for r in caplog.records if "temperature 0" in r.message] != []
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        lme(model(), votes=3)  # temperature 1
        lme(model(), votes=1)
        VotedJudge(lambda model: LongMemEvalJudge(model), model(), 1)
    assert not [r for r in caplog.records if "temperature" in r.message]


# --- confirm_failures and failed votes ------------------------------------------------------------------------


def test_confirm_failures_casts_extra_votes_only_after_incorrect():
    m = model("yes")
    res = lme(m, confirm_failures=True).score(item())
    assert len(m.calls) == 1 and res.values == {"lme_acc": 1.0, "lme_acc_strict": 1.0, "judge_agreement": None}
    assert len(res.details["votes"]) == 1
    m = model("no", "yes", "yes")
    res = lme(m, confirm_failures=True).score(item())
    assert len(m.calls) == 3 and res.values["lme_acc"] == 1.0  # the failure was not confirmed
    assert res.values["judge_agreement"] == pytest.approx(2 / 3)


def test_a_failed_vote_is_a_scoring_failure_with_no_values():
    m = model("yes", LLMError("judge endpoint: HTTP 500"))
    res = lme(m).score(item())
    assert res.error is not None and res.error.startswith("judge call failed") and "vote 2 of 3" in res.error
    assert res.values == {"lme_acc": None, "lme_acc_strict": None, "judge_agreement": None}
    assert len(m.calls) == 2  # no vote after the failed one
    assert [v["verdict"] for v in res.details["votes"]] == ["correct", "not_run"]
    assert "error" in res.details["votes"][1]


# --- end to end: rescore through the real client, cache, records, report, gate, cost ---------------------------


def _rescore_argv(tmp_path: Path, src: Path, base_url: str, out: str = "rescored") -> list[str]:
    return [
        "rescore",
        str(src),
        f"hydra.run.dir={tmp_path / out}",
        "model=endpoint",
        f"model.base_url={base_url}",
        "model.model=gpt-4o-mini-2024-07-18",
        "run.progress=false",
        f"cache.path={tmp_path / 'cache.sqlite'}",
        "client.max_retries=0",
    ]


class Judge:
    """Answers the n-th judge request of a prompt with script[n] (the salt is not sent: requests look the same)."""

    def __init__(self, script: dict[str, list[str]]) -> None:
        self.script = script
        self.seen: dict[str, int] = defaultdict(int)
        self.down_at: int | None = None  # fail the request with this overall index
        self.n = 0

    def __call__(self, req: dict[str, Any]) -> Reply:
        assert request_kind(req) == "judge"
        self.n += 1
        if self.down_at == self.n:
            return Reply(status=500, body={"error": {"message": "judge backend unavailable"}})
        prompt = req["messages"][-1]["content"]
        key = next(k for k in self.script if f"Model Response: {k}" in prompt)
        reply = self.script[key][self.seen[key] % len(self.script[key])]
        self.seen[key] += 1
        return completion(reply, prompt_tokens=200, completion_tokens=1, model="gpt-4o-mini-2024-07-18")


def _source(tmp_path: Path) -> Path:
    return write_run(
        tmp_path / "src",
        [
            rec("q1", "summary", prediction="You went to Paris."),
            rec("q2", "summary", prediction="Rome, I think."),
            rec("q3", "summary", prediction="Lyon."),
        ],
    )


SCRIPT = {"You went to Paris.": ["yes", "yes", "no"], "Rome, I think.": ["no"], "Lyon.": ["no", "yes", "yes"]}


@pytest.mark.e2e
def test_votes_1_is_byte_identical_to_the_plain_judge_and_shares_its_cache(tmp_path):
    src = _source(tmp_path)
    with FakeOpenAIServer(Judge(SCRIPT)) as srv:
        plain = [*_rescore_argv(tmp_path, src, srv.base_url, "plain"), "judge=longmemeval"]
        assert main(plain) == 0
        assert len(srv.requests) == 3
        one = [
            *_rescore_argv(tmp_path, src, srv.base_url, "one"),
            "judge=longmemeval_votes3",
            "judge.votes=1",
            "judge.judge.params.temperature=0",
        ]
        assert main(one) == 0
        assert len(srv.requests) == 3  # the same cache keys: every call answered by the plain run's cache entries
    a, b = (load_records(tmp_path / d / "records.jsonl") for d in ("plain", "one"))
    strip = ("rescored_at", "cached")  # when, and whether the reply came from the cache

    def stable(r: dict) -> str:
        return json.dumps(_without(r, strip), sort_keys=True)

    assert [stable(r) for r in a] == [stable(r) for r in b]
    meta = [json.loads((tmp_path / d / "run.json").read_text())["metrics"] for d in ("plain", "one")]
    assert meta[0] == meta[1]


def _without(obj: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(obj, dict):
        return {k: _without(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [_without(v, keys) for v in obj]
    return obj


@pytest.mark.e2e
def test_three_votes_end_to_end_cache_report_gate_and_cost(tmp_path):
    src = _source(tmp_path)
    with FakeOpenAIServer(Judge(SCRIPT)) as srv:
        argv = [*_rescore_argv(tmp_path, src, srv.base_url, "voted"), "judge=longmemeval_votes3"]
        assert main(argv) == 0
        assert len(srv.requests) == 9  # 3 votes x 3 pairs: each vote its own cache entry, none served by another
        again = [*_rescore_argv(tmp_path, src, srv.base_url, "again"), "judge=longmemeval_votes3"]
        assert main(again) == 0
        assert len(srv.requests) == 9  # a rerun makes no judge call: every vote is cached
        plain = [*_rescore_argv(tmp_path, src, srv.base_url, "plain"), "judge=longmemeval"]
        assert main(plain) == 0
        assert len(srv.requests) == 12  # the plain judge runs at temperature 0: its own cache entries
    recs = {r["question_id"]: r for r in load_records(tmp_path / "voted" / "records.jsonl")}
    assert recs["q1"]["metrics"]["lme_acc"] == 1.0 and recs["q1"]["metrics"]["judge_agreement"] == pytest.approx(2 / 3)
    assert recs["q2"]["metrics"]["lme_acc"] == 0.0 and recs["q2"]["metrics"]["judge_agreement"] == 1.0
    assert recs["q3"]["metrics"]["lme_acc"] == 1.0  # vote 0 said no; the majority says yes
    assert len(recs["q1"]["metric_details"]["LongMemEvalJudge"]["votes"]) == 3
    # the report shows the majority metric and the agreement
    report = (tmp_path / "voted" / "report.md").read_text()
    assert "| summary | 3 | 0.7778 | 0.3333 |" in report.split("## Judge votes")[1]  # agreement, unanimous
    assert "- judge: `VotedJudge (LongMemEvalJudge, 3 votes)`" in report
    assert "| lme_acc | summary | 0.6667" in report  # the majority metric, in the judges table as before
    html = (tmp_path / "voted" / "report.html").read_text()
    assert "judge agreement" in html
    assert "1: correct (yes)" in html and "3: incorrect (no)" in html  # q1's votes in its drill-down
    assert "## Judge votes" not in (tmp_path / "plain" / "report.md").read_text()
    voted = load_run(tmp_path / "voted")
    board = scoreboard(voted)
    df = voted.df
    assert board[("summary", "lme_acc")] == pytest.approx(2 / 3)
    assert board[("summary", "judge_agreement")] == pytest.approx((2 / 3 + 1 + 2 / 3) / 3)
    # judge tokens and cost count every vote: 3x the plain judge's
    plain_df = load_run(tmp_path / "plain").df
    assert len(judge_calls(recs["q1"])) == 3
    assert df["judge_tokens"].sum() == 3 * plain_df["judge_tokens"].sum() == 9 * 201
    assert df["cost_judge"].sum() == pytest.approx(3 * plain_df["cost_judge"].sum())
    assert plain_df["cost_judge"].sum() > 0
    # the gate checks judge_agreement like any metric (a floor here)
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text(
        "version: 1\nchecks:\n"
        "- {mode: summary, metric: judge_agreement, min: 0.9}\n"
        "- {mode: summary, metric: lme_acc, baseline: 0.666667, abs: 0.0}\n"
    )
    result = run_gate(baseline, tmp_path / "voted")
    assert not result.passed
    failed = [o for o in result.outcomes if o.failed]
    assert [o.check.metric for o in failed] == ["judge_agreement"]


@pytest.mark.e2e
def test_a_failed_vote_makes_the_pair_scoring_failed_and_a_rerun_rescores_it(tmp_path, capsys):
    src = write_run(tmp_path / "src", [rec("q1", "summary", prediction="You went to Paris.")])
    judge = Judge(SCRIPT)
    judge.down_at = 2  # the second vote's request fails
    with FakeOpenAIServer(judge) as srv:
        argv = [*_rescore_argv(tmp_path, src, srv.base_url, "voted"), "judge=longmemeval_votes3"]
        assert main(argv) == 3
        (r,) = load_records(tmp_path / "voted" / "records.jsonl")
        assert r["status"] == "scoring_failed" and "vote 2 of 3" in r["scoring_error"]
        assert r["metrics"]["lme_acc"] is None and r["metrics"]["judge_agreement"] is None
        assert r["prediction"] == "You went to Paris."  # the answer is kept
        n = len(srv.requests)
        assert main(argv) == 0
        assert len(srv.requests) == n + 2  # vote 0 from the cache; votes 1 and 2 asked
    new = load_records(tmp_path / "voted" / "records.jsonl")[-1]
    assert new["status"] == "ok" and new["metrics"]["lme_acc"] == 1.0
    assert len(new["metric_details"]["LongMemEvalJudge"]["votes"]) == 3


# --- end to end: a small fake benchmark run ----------------------------------------------------------------


def _judge_bodies(requests: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in requests if request_kind(r) == "judge")


@pytest.mark.e2e
def test_run_with_votes_1_writes_the_records_of_the_plain_judge(tmp_path):
    data = dataset(tmp_path)
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        assert main([*args(tmp_path, srv.base_url, data, "plain"), "judge=trpc"]) == 0
        plain_requests = list(srv.requests)
        one = [
            *args(tmp_path, srv.base_url, data, "one"),
            "judge=trpc_votes3",
            "judge.votes=1",
            "~judge.judge.params.temperature",  # the plain trpc judge sets none
        ]
        assert main(one) == 0
        one_requests = srv.requests[len(plain_requests) :]
    assert _judge_bodies(one_requests) == _judge_bodies(plain_requests)  # the same judge requests, no more
    assert stable_records(tmp_path / "one") == stable_records(tmp_path / "plain")
    meta = [json.loads((tmp_path / d / "run.json").read_text())["metrics"] for d in ("plain", "one")]
    assert meta[0] == meta[1]


@pytest.mark.e2e
def test_run_with_three_votes_asks_the_judge_three_times_per_judged_pair(tmp_path):
    data = dataset(tmp_path)
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        assert main([*args(tmp_path, srv.base_url, data, "voted"), "judge=trpc_votes3"]) == 0
        judged = [r for r in srv.requests if request_kind(r) == "judge"]
    recs = load_records(tmp_path / "voted" / "records.jsonl")
    assert len(recs) == N_CASES * len(MODES) and len(judged) == 3 * len(recs)
    assert all(r["status"] == "ok" for r in recs)
    for r in recs:  # the fake judge always says "incorrect": unanimous
        assert r["metrics"]["llm_score"] == 0.0 and r["metrics"]["judge_agreement"] == 1.0
        votes = r["metric_details"]["TrpcJudge"]["votes"]
        assert [v["verdict"] for v in votes] == ["incorrect"] * 3
    assert all(r["temperature"] == 1.0 for r in judged)


@pytest.mark.e2e
def test_plan_counts_every_vote_at_the_inner_judges_max_tokens(tmp_path):
    data = dataset(tmp_path)
    totals = {}
    for judge in ("longmemeval", "longmemeval_votes3"):
        argv = args(tmp_path, "http://127.0.0.1:9/v1", data, judge)[1:]  # plan sends nothing
        assert main(["plan", *argv, f"judge={judge}", "--out", str(tmp_path / f"{judge}.json")]) == 0
        totals[judge] = json.loads((tmp_path / f"{judge}.json").read_text())["total"]
    plain, voted = totals["longmemeval"], totals["longmemeval_votes3"]
    assert voted["calls"]["judge"] == 3 * plain["calls"]["judge"] == 3 * N_CASES * len(MODES)
    extra = voted["calls"]["judge"] - plain["calls"]["judge"]
    assert voted["completion_tokens_est"] - plain["completion_tokens_est"] == extra * 10  # judge.judge.params


@pytest.mark.e2e
def test_votes_on_any_judge_by_override_equal_the_votes_config(tmp_path, capsys):
    src = _source(tmp_path)
    with FakeOpenAIServer(Judge(SCRIPT)) as srv:
        assert main([*_rescore_argv(tmp_path, src, srv.base_url, "config"), "judge=longmemeval_votes3"]) == 0
        assert len(srv.requests) == 9
        override = [
            *_rescore_argv(tmp_path, src, srv.base_url, "override"),
            "judge=longmemeval",
            "+judge.votes=3",
            "judge.params.temperature=1.0",
        ]
        assert main(override) == 0
        assert len(srv.requests) == 9  # the same 9 requests and cache keys: all cached
        out = capsys.readouterr()
        assert "temperature 0 (or unset)" not in out.out + out.err
        argv = [*_rescore_argv(tmp_path, src, srv.base_url, "t0"), "judge=longmemeval", "+judge.votes=3"]
        assert main(argv) == 0
        out = capsys.readouterr()
        assert (out.out + out.err).count("judge.votes=3 at judge temperature 0 (or unset)") == 1  # one line
    a, b = (
        [_without(r, ("cached", "rescored_at")) for r in load_records(tmp_path / d / "records.jsonl")]
        for d in ("config", "override")
    )
    assert [(r["metrics"], r["metric_details"]) for r in a] == [(r["metrics"], r["metric_details"]) for r in b]
    assert "- judge: `VotedJudge (LongMemEvalJudge, 3 votes)`" in (tmp_path / "override" / "report.md").read_text()
