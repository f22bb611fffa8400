"""A failing judge endpoint is a failure of the pair's *scoring*: visible, counted (exit 3), never scored as 0,
and the next run (or rescore) asks the judge again for exactly those pairs, never the answer model."""

import json
from collections import Counter

import pytest

from commands.cli import main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer, Reply, completion
from harness.testing.faults import FakeModel, request_kind
from tests.support.report_fixtures import rec, write_run
from tests.support.tagged_run import MODES, N_CASES, answer, args, dataset

pytestmark = pytest.mark.e2e


class JudgeSwitch:
    """FakeModel, whose judge requests get HTTP 500 while `down` (the /models preflight still passes)."""

    def __init__(self) -> None:
        self.model = FakeModel(answer=answer)
        self.down = True

    def __call__(self, req):
        if self.down and request_kind(req) == "judge":
            return Reply(status=500, body={"error": {"message": "judge backend unavailable"}})
        return self.model(req)


def kinds(requests) -> Counter:
    return Counter(request_kind(r) for r in requests)


def test_run_with_a_failing_judge_exits_3_keeps_answers_then_only_scoring_is_redone(tmp_path, capsys):
    data = dataset(tmp_path)
    fake = JudgeSwitch()
    n_pairs = N_CASES * len(MODES)
    with FakeOpenAIServer(fake) as srv:
        argv = args(tmp_path, srv.base_url, data, "run") + ["client.max_retries=0", "run.max_consecutive_failures=0"]
        assert main(argv) == 3
        out = capsys.readouterr()
        run_dir = tmp_path / "run"
        recs = {(r["question_id"], r["mode"]): r for r in load_records(run_dir / "records.jsonl")}
        assert len(recs) == n_pairs
        for r in recs.values():
            assert r["status"] == "scoring_failed" and "judge call failed" in r["scoring_error"]
            assert r["prediction"].startswith("answer for") and r["calls"] and r["usage"]["answer_calls"] >= 1
            assert r["metrics"]["llm_score"] is None and r["metrics"]["llm_score_strict"] is None  # never 0.0
            assert "em" in r["metrics"]  # the lexical scorers' values are kept
        assert f"scoring failed for {n_pairs} answered pair(s)" in out.err
        assert "scoring failed, the answer is kept" in out.err + out.out  # one console line per pair
        report = (run_dir / "report.md").read_text()
        rows = [ln for ln in report.splitlines() if "| scoring_failed |" in ln and "judge call failed" in ln]
        assert rows, report  # identical errors are grouped: every pair is listed in its group's row, counted
        assert sum(int(ln.split("|")[1]) for ln in rows) == n_pairs
        assert all(any(f"{q} / {m}" in ln for ln in rows) for q, m in recs)
        summary = {row["mode"]: row for row in _csv(run_dir / "summary.csv")}
        assert all(float(summary[m]["failed"]) == N_CASES for m in MODES)
        assert all(summary[m].get("llm_score", "") in ("", "nan") for m in MODES)  # not a mean of fake zeros
        first = kinds(srv.requests)
        before = {k: (r["prediction"], r["calls"], r["usage"]) for k, r in recs.items()}

        fake.down = False
        n = len(srv.requests)
        assert main(argv) == 0
        again = kinds(srv.requests[n:])
        assert again == Counter({"judge": n_pairs})  # exactly the failed pairs, no answer/summary/embedding call
        recs = {(r["question_id"], r["mode"]): r for r in load_records(run_dir / "records.jsonl")}
        for k, r in recs.items():
            assert r["status"] == "ok" and "scoring_error" not in r
            assert r["metrics"]["llm_score"] == 0.0 and r["metrics"]["llm_score_strict"] == 0.0  # the judge's verdict
            assert (r["prediction"], r["calls"], r["usage"]) == before[k]
        assert first["judge"] == n_pairs  # sanity: the first run asked the judge once per pair too

        # and a third run is a no-op
        n = len(srv.requests)
        assert main(argv) == 0 and len(srv.requests) == n


def _csv(path):
    import csv

    with open(path) as f:
        return list(csv.DictReader(f))


def judge_yes_no(req):
    prompt = req["messages"][-1]["content"]
    return completion(
        "yes" if "Model Response: You went to Paris" in prompt else "no",
        prompt_tokens=120,
        completion_tokens=1,
        model="fake-judge",
    )


def test_rescore_with_a_failing_judge_exits_3_then_rescores_only_those_pairs(tmp_path, capsys):
    src = write_run(
        tmp_path / "src",
        [rec("q1", "summary", prediction="You went to Paris."), rec("q2", "summary", prediction="Rome, I think.")],
    )
    out = tmp_path / "rescored"
    state = {"down": True}

    def responder(req):
        if state["down"]:
            return Reply(status=503, body={"error": {"message": "judge overloaded"}})
        return judge_yes_no(req)

    argv = [
        "rescore",
        str(src),
        f"hydra.run.dir={out}",
        "model=endpoint",
        "model.model=fake-judge",
        "judge=longmemeval",
        "run.progress=false",
        f"cache.path={tmp_path / 'cache.sqlite'}",
        "client.max_retries=0",
    ]
    with FakeOpenAIServer(responder) as srv:
        argv.append(f"model.base_url={srv.base_url}")
        assert main(argv) == 3
        err = capsys.readouterr().err
        assert "scoring failed for 2 answered pair(s)" in err
        recs = load_records(out / "records.jsonl")
        assert {r["status"] for r in recs} == {"scoring_failed"}
        assert all(r["metrics"]["lme_acc"] is None and "503" in r["scoring_error"] for r in recs)
        assert "| scoring_failed |" in (out / "report.md").read_text()
        n = len(srv.requests)
        state["down"] = False
        assert main(argv) == 0
        assert len(srv.requests) == n + 2 and all(request_kind(r) == "judge" for r in srv.requests[n:])
        new = {r["question_id"]: r for r in load_records(out / "records.jsonl")}
        assert new["q1"]["metrics"]["lme_acc"] == 1.0 and new["q2"]["metrics"]["lme_acc"] == 0.0
        assert all(r["status"] == "ok" and r["prediction"] and r["calls"] for r in new.values())
        n = len(srv.requests)
        assert main(argv) == 0 and len(srv.requests) == n  # done: nothing asked again


def test_rescore_scores_a_source_pair_whose_judge_failed(tmp_path):
    """A run's scoring_failed record has an answer: rescore judges it (it is not copied as failed)."""
    r = rec("q1", "summary", prediction="You went to Paris.")
    r.update(status="scoring_failed", scoring_error="TrpcJudge: judge call failed: LLMError: 500")
    src = write_run(tmp_path / "src", [r])
    out = tmp_path / "rescored"
    with FakeOpenAIServer(judge_yes_no) as srv:
        assert (
            main(
                [
                    "rescore",
                    str(src),
                    f"hydra.run.dir={out}",
                    "model=endpoint",
                    f"model.base_url={srv.base_url}",
                    "model.model=fake-judge",
                    "judge=longmemeval",
                    "run.progress=false",
                    f"cache.path={tmp_path / 'cache.sqlite'}",
                ]
            )
            == 0
        )
        assert len(srv.requests) == 1
    (new,) = load_records(out / "records.jsonl")
    assert new["status"] == "ok" and new["metrics"]["lme_acc"] == 1.0 and "scoring_error" not in new
    assert json.loads((out / "run.json").read_text())["rescore"]["source"] == str(src)
