"""`lme-harness rescore`: a run's answers scored again by another judge, with no answer call, resumable."""

import json

import pytest

from commands.cli import main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer, completion
from tests.support.report_fixtures import rec, write_run

pytestmark = pytest.mark.e2e


def judge(req):
    """The official judge's yes/no: 'yes' when the response mentions Paris."""
    prompt = req["messages"][-1]["content"]
    return completion(
        "yes" if "Model Response: You went to Paris" in prompt else "no",
        prompt_tokens=120,
        completion_tokens=1,
        model="fake-judge",
    )


def source_run(tmp_path):
    return write_run(
        tmp_path / "src",
        [
            rec("q1", "summary", prediction="You went to Paris."),
            rec("q2", "summary", prediction="Rome, I think."),
            rec("q1", "long_context", prediction="You went to Paris, France."),
            rec("q2", "long_context", status="failed", error="LLMError: 503"),
        ],
    )


def rescore(src, out, base_url, *extra):
    return main(
        [
            "rescore",
            str(src),
            f"hydra.run.dir={out}",
            "model=endpoint",
            f"model.base_url={base_url}",
            "model.model=fake-judge",
            "judge=longmemeval",
            "run.progress=false",
            f"cache.path={out.parent / 'cache.sqlite'}",
            *extra,
        ]
    )


def test_rescore_judges_every_answer_once_keeps_the_rest_and_resumes(tmp_path):
    src = source_run(tmp_path)
    out = tmp_path / "rescored"
    with FakeOpenAIServer(judge) as srv:
        assert rescore(src, out, srv.base_url) == 3  # one source pair has no answer
        assert len(srv.requests) == 3  # the three answers, nothing else (no answer-model call)
        assert all("Is the model response correct?" in r["messages"][-1]["content"] for r in srv.requests)
        new = {(r["question_id"], r["mode"]): r for r in load_records(out / "records.jsonl")}
        old = {(r["question_id"], r["mode"]): r for r in load_records(src / "records.jsonl")}
        assert (
            new[("q1", "summary")]["metrics"]["lme_acc"] == 1.0 and new[("q2", "summary")]["metrics"]["lme_acc"] == 0.0
        )
        assert "em" in new[("q1", "summary")]["metrics"]  # the configured lexical scorers ran too
        for key in (("q1", "summary"), ("q1", "long_context")):
            assert new[key]["calls"] == old[key]["calls"] and new[key]["prediction"] == old[key]["prediction"]
            assert new[key]["rescored_from"] == str(src)
        assert new[("q2", "long_context")]["status"] == "failed" and "503" in new[("q2", "long_context")]["error"]
        meta = json.loads((out / "run.json").read_text())
        assert meta["judge_model"]["model"] == "fake-judge" and meta["rescore"]["source"] == str(src)
        assert meta["config"]["judge"]["_target_"].endswith("LongMemEvalJudge")
        assert {m["name"] for m in meta["metrics"]} >= {"em", "lme_acc", "lme_acc_strict"}  # the new scorers' specs
        assert (out / "report.md").exists()
        # the same command again: only the pair without an answer is retried (and stays failed), no judge call
        assert rescore(src, out, srv.base_url) == 3
        assert len(srv.requests) == 3


def test_rescore_defaults_to_a_directory_next_to_its_source(tmp_path):
    src = source_run(tmp_path)
    with FakeOpenAIServer(judge) as srv:
        assert (
            main(
                [
                    "rescore",
                    str(src),
                    "model=endpoint",
                    f"model.base_url={srv.base_url}",
                    "model.model=fake-judge",
                    "judge=longmemeval",
                    "run.progress=false",
                    f"cache.path={tmp_path / 'c.sqlite'}",
                ]
            )
            == 3
        )
    (out,) = [p for p in (src / "rescore").iterdir() if p.is_dir()]
    assert "judge=longmemeval" in out.name and (out / "records.jsonl").exists()


def test_rescore_without_source_records_or_source_is_a_clear_error(tmp_path, capsys):
    assert main(["rescore", str(tmp_path / "nothing"), f"hydra.run.dir={tmp_path / 'out'}", "judge=none"]) == 2
    assert "no records to rescore" in capsys.readouterr().err
    assert main(["rescore", "judge=none"]) == 2
    assert "usage: lme-harness rescore SRC_RUN_DIR" in capsys.readouterr().err
