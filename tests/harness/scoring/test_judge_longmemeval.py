"""LongMemEvalJudge: official per-type prompts, `_abs` routing, upstream and strict parses, fail-closed not_run."""

from __future__ import annotations

from typing import Any

import pytest

from harness.llm.types import LLMError, Usage
from harness.prompts.judges import LME_ABSTENTION_PROMPT, LME_JUDGE_PROMPTS
from harness.scoring import ScoreInput, Scorer
from harness.scoring.judges import LongMemEvalJudge, parse_lme_official, parse_lme_strict
from harness.testing.faults import FakeModel


def judge_model(*script: str | Exception) -> FakeModel:
    return FakeModel(script=script, usage=Usage(150, 1), latency_s=0.1, model="fake-judge", finish_reason=None)


def item(qid: str = "q1", qtype: str = "single-session-user", prediction: str = "You went to Kyoto.") -> ScoreInput:
    return ScoreInput(qid, qtype, "Where did I travel?", "Kyoto", prediction)


def judge_with(*script: str | Exception, **kw: Any) -> tuple[LongMemEvalJudge, FakeModel]:
    model = judge_model(*script)
    return LongMemEvalJudge(model, **kw), model


def test_is_a_scorer_with_parity_and_strict_metrics():
    judge, _ = judge_with()
    assert isinstance(judge, Scorer)
    assert [(m.name, m.higher_is_better) for m in judge.metrics] == [("lme_acc", True), ("lme_acc_strict", True)]


def test_request_is_the_official_prompt_with_official_params():
    judge, model = judge_with("Yes")
    res = judge.score(item())
    (c,) = model.calls
    assert c["purpose"] == "judge" and c["tools"] is None
    assert c["params"] == {"temperature": 0, "max_tokens": 10}
    assert c["messages"] == [
        {
            "role": "user",
            "content": (
                "I will give you a question, a correct answer, and a response from a model. Please answer yes if the response "
                "contains the correct answer. Otherwise, answer no. If the response is equivalent to the correct answer or "
                "contains all the intermediate steps to get the correct answer, you should also answer yes. If the response "
                "only contains a subset of the information required by the answer, answer no. \n\nQuestion: Where did I "
                "travel?\n\nCorrect Answer: Kyoto\n\nModel Response: You went to Kyoto.\n\nIs the model response correct? "
                "Answer yes or no only."
            ),
        }
    ]
    assert res.values == {"lme_acc": 1.0, "lme_acc_strict": 1.0}
    assert res.details["verdict"] == "correct" and res.details["prompt_kind"] == "single-session-user"
    assert res.details["usage"]["usage"]["prompt_tokens"] == 150


@pytest.mark.parametrize(
    "qtype, marker",
    [
        ("temporal-reasoning", "do not penalize off-by-one errors"),
        ("knowledge-update", "as long as the updated answer is the required answer"),
        ("single-session-preference", "\n\nRubric: Kyoto\n\n"),
        ("multi-session", "contains all the intermediate steps"),
        ("single-session-assistant", "contains all the intermediate steps"),
    ],
)
def test_each_question_type_gets_its_template(qtype, marker):
    judge, model = judge_with("no")
    judge.score(item(qtype=qtype))
    content = model.calls[0]["messages"][0]["content"]
    assert marker in content
    assert content == LME_JUDGE_PROMPTS[qtype].format("Where did I travel?", "Kyoto", "You went to Kyoto.")


def test_abstention_is_routed_by_abs_in_the_question_id():
    judge, model = judge_with("yes", "yes")
    res = judge.score(item(qid="0862e8bf_abs"))
    assert model.calls[0]["messages"][0]["content"] == LME_ABSTENTION_PROMPT.format(
        "Where did I travel?", "Kyoto", "You went to Kyoto."
    )
    assert "correctly identifies the question as unanswerable" in model.calls[0]["messages"][0]["content"]
    assert "Explanation: Kyoto" in model.calls[0]["messages"][0]["content"]
    assert res.details["prompt_kind"] == "abstention"
    # without `_abs` the same question type gets the ordinary prompt
    judge.score(item(qid="0862e8bf"))
    assert "unanswerable" not in model.calls[1]["messages"][0]["content"]


@pytest.mark.parametrize(
    "reply, official, strict",
    [
        ("Yes", 1.0, 1.0),
        ("yes.", 1.0, 1.0),
        ("  **Yes**, it matches", 1.0, 1.0),
        ("No", 0.0, 0.0),
        ("no.", 0.0, 0.0),
        ("No, not yes.", 1.0, 0.0),  # upstream parse: 'yes' occurs, so parity says correct; strict says no
        ("The eyes have it", 1.0, None),  # 'yes' inside "eyes": parity 1, strict unparsable
        ("The response is correct.", 0.0, None),  # no yes/no: parity 0, strict not_run
        ("", 0.0, None),  # empty reply: upstream label False; strict not_run
    ],
)
def test_official_and_strict_parses(reply, official, strict):
    judge, _ = judge_with(reply)
    res = judge.score(item())
    assert res.values == {"lme_acc": official, "lme_acc_strict": strict}
    assert res.details["raw"] == reply
    assert res.details["verdict_strict"] == ("not_run" if strict is None else ("correct" if strict else "incorrect"))
    if strict is None:
        assert res.details["strict_reason"]


def test_parse_helpers():
    assert parse_lme_official("YES") and not parse_lme_official("No") and parse_lme_official("nope, yes")
    assert parse_lme_strict("Yes!") == (True, None)
    assert parse_lme_strict("no") == (False, None)
    assert parse_lme_strict("maybe")[0] is None


@pytest.mark.parametrize("error", [LLMError("endpoint down after 4 retries"), RuntimeError("socket closed")])
def test_failed_call_is_not_run_never_zero(error):
    judge, _ = judge_with(error)
    res = judge.score(item())
    assert res.values == {"lme_acc": None, "lme_acc_strict": None}
    assert res.details["verdict"] == "not_run" and res.details["reason"] == "judge call failed"
    assert type(error).__name__ in res.details["error"]
    assert res.error is not None and type(error).__name__ in res.error  # scoring failed: redone by the next run


def test_an_unparsable_reply_is_not_a_scoring_failure():
    judge, _ = judge_with("The response is correct.")
    res = judge.score(item())
    assert res.error is None and res.values["lme_acc_strict"] is None


def test_unknown_question_type_is_not_run_without_a_call():
    judge, model = judge_with()
    res = judge.score(item(qtype="open-domain"))
    assert model.calls == []
    assert res.values == {"lme_acc": None, "lme_acc_strict": None}
    assert "open-domain" in res.details["reason"] and res.details["judge_called"] is False


def test_params_can_be_overridden_but_not_the_fixed_fields():
    judge, model = judge_with("yes", params={"temperature": 0, "max_tokens": 10, "seed": 0})
    judge.score(item())
    assert model.calls[0]["params"] == {"temperature": 0, "max_tokens": 10, "seed": 0}
    with pytest.raises(ValueError, match="purpose"):
        LongMemEvalJudge(judge_model(), params={"purpose": "x"})


def test_hydra_config_instantiates_the_judge():
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from commands.cli import CONFIG_DIR

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["judge=longmemeval"])
    judge = instantiate(cfg.judge, model=judge_model("yes"))
    assert isinstance(judge, LongMemEvalJudge)
    assert judge.params == {"temperature": 0, "max_tokens": 10} and type(judge.params) is dict


@pytest.mark.e2e
def test_a_separate_judge_endpoint_gets_the_judge_calls(tmp_path):
    """`+model@judge.endpoint=...`: answers from one server, verdicts from another; provenance names both."""
    import json

    from commands.cli import main
    from harness.records import load_records
    from harness.testing.fake_openai import FakeOpenAIServer, completion

    def answers(req):
        return completion("You went to Paris.", prompt_tokens=50)

    def verdicts(req):
        return completion("yes", prompt_tokens=80, completion_tokens=1, model="judge-model")

    with FakeOpenAIServer(answers) as ans, FakeOpenAIServer(verdicts) as jud:
        code = main(
            [
                "run",
                f"hydra.run.dir={tmp_path / 'run'}",
                "model=endpoint",
                f"model.base_url={ans.base_url}",
                "model.model=answer-model",
                "judge=longmemeval",
                "+model@judge.endpoint=endpoint",
                f"judge.endpoint.base_url={jud.base_url}",
                "judge.endpoint.model=judge-model",
                "mode=[summary]",
                f"cache.path={tmp_path / 'cache.sqlite'}",
                "run.progress=false",
                "dataset=oracle",  # the routing under test is the same on a short history; `_s` would cost 20 s
                "dataset.limit=1",
            ]
        )
        assert code == 0
        assert all("Answer yes or no only" not in json.dumps(r["messages"]) for r in ans.requests)
        assert len(jud.requests) == 1 and jud.requests[0]["model"] == "judge-model"
        assert jud.requests[0]["temperature"] == 0 and jud.requests[0]["max_tokens"] == 10
    (rec,) = load_records(tmp_path / "run" / "records.jsonl")
    assert rec["metrics"]["lme_acc"] == 1.0
    assert rec["metric_details"]["LongMemEvalJudge"]["usage"]["model"] == "judge-model"
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["judge_model"]["model"] == "judge-model" and meta["model"]["model"] == "answer-model"
