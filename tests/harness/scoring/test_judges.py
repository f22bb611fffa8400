"""TrpcJudge: reference LLMScore semantics and the strict variant, with a scripted model."""

from __future__ import annotations

from typing import Any

import pytest

from harness.llm.types import LLMError, Usage
from harness.scoring import ScoreInput, Scorer, TrpcJudge
from harness.scoring.judges import parse_trpc_judge_reply, render_trpc_judge_prompt
from harness.testing.faults import FakeModel


def judge_model(*script: str | Exception) -> FakeModel:
    """Returns the scripted replies in order; an Exception in the script is raised instead."""
    return FakeModel(script=script, usage=Usage(120, 30), latency_s=0.25, model="fake-judge", finish_reason="stop")


def item(prediction: str = "You went to Tokyo.", reference: str = "Kyoto") -> ScoreInput:
    return ScoreInput("q1", "single-session-user", "Where did I travel?", reference, prediction)


def judge_with(*script: str | Exception, **kw: Any) -> tuple[TrpcJudge, FakeModel]:
    model = judge_model(*script)
    return TrpcJudge(model, **kw), model


def test_is_a_scorer_with_two_metrics():
    judge, _ = judge_with()
    assert isinstance(judge, Scorer)
    assert [(m.name, m.higher_is_better) for m in judge.metrics] == [("llm_score", True), ("llm_score_strict", True)]


def test_exact_match_short_circuits_without_calling():
    judge, model = judge_with()
    res = judge.score(item(prediction="I think it was KYOTO, in spring.", reference="Kyoto"))
    assert res.values == {"llm_score": 1.0, "llm_score_strict": 1.0}
    assert model.calls == []
    assert res.details["judge_called"] is False and res.details["em"] is True
    assert res.details["parse_mode"] == "not_run" and res.details["usage"] is None


def test_request_is_the_reference_prompt_as_one_user_message():
    judge, model = judge_with('{"correct": true, "confidence": 0.9, "reason": "same"}')
    judge.score(item())
    (call,) = model.calls
    assert call["purpose"] == "judge" and call["tools"] is None
    assert call["params"] == {}  # the reference sets no temperature
    assert call["messages"] == [
        {"role": "user", "content": render_trpc_judge_prompt("Where did I travel?", "Kyoto", "You went to Tokyo.")}
    ]
    assert call["messages"][0]["content"] == (
        "You are an expert evaluator for query-based meeting summarization.\n\n"
        "Query: Where did I travel?\nReference Answer: Kyoto\nPredicted Answer: You went to Tokyo.\n\n"
        "Judge whether the predicted answer is faithful and semantically equivalent to the reference answer "
        "for the given query.\nRespond with a JSON object:\n"
        '{"correct": true/false, "confidence": 0.0-1.0, "reason": "brief explanation"}'
    )


def test_prompt_keeps_percent_signs_verbatim():
    assert "Predicted Answer: 50% off" in render_trpc_judge_prompt("q %s", "r %d", "50% off")


def test_params_are_forwarded_and_validated():
    judge, model = judge_with('{"correct": false}', params={"temperature": 0, "max_tokens": 64})
    judge.score(item())
    assert model.calls[0]["params"] == {"temperature": 0, "max_tokens": 64}
    with pytest.raises(ValueError, match="purpose"):
        TrpcJudge(judge_model(), params={"purpose": "x"})


def test_json_verdict_correct_uses_confidence():
    judge, _ = judge_with('Sure! {"correct": true, "confidence": 0.8, "reason": "same city"} hope it helps')
    res = judge.score(item())
    assert res.values == {"llm_score": 0.8, "llm_score_strict": 0.8}
    d = res.details
    assert d["judge_called"] and d["parse_mode"] == "json" and d["verdict"] == "correct"
    assert d["verdict_strict"] == "correct" and d["confidence"] == 0.8 and d["reason"] == "same city"
    assert d["raw"].startswith("Sure!")
    assert d["usage"]["usage"] == {"prompt_tokens": 120, "completion_tokens": 30, "cached_tokens": None}
    assert d["usage"]["purpose"] == "judge" and d["usage"]["model"] == "fake-judge"


def test_json_verdict_incorrect_scores_zero():
    judge, _ = judge_with('{"correct": false, "confidence": 0.95, "reason": "Tokyo is not Kyoto"}')
    res = judge.score(item())
    assert res.values == {"llm_score": 0.0, "llm_score_strict": 0.0}
    assert res.details["verdict"] == "incorrect" and res.details["confidence"] == 0.95


@pytest.mark.parametrize(
    "reply,expected",
    [
        ('{"correct": true, "confidence": -0.7}', 0.7),  # negative -> absolute value
        ('{"correct": true, "confidence": 3}', 1.0),  # > 1 -> 1
        ('{"correct": true, "confidence": -4.5}', 1.0),  # abs first, then clamp
        ('{"correct": true, "confidence": 1.0}', 1.0),
    ],
)
def test_confidence_clamp(reply, expected):
    judge, _ = judge_with(reply)
    res = judge.score(item())
    assert res.values["llm_score"] == expected and res.values["llm_score_strict"] == expected


def test_fallback_reads_incorrect_as_correct_but_strict_does_not():
    judge, _ = judge_with("The predicted answer is incorrect.")
    res = judge.score(item())
    assert res.values["llm_score"] == 0.5  # reference quirk: "incorrect" contains "correct"
    assert res.values["llm_score_strict"] is None
    d = res.details
    assert d["parse_mode"] == "fallback" and d["verdict"] == "correct" and d["confidence"] == 0.5
    assert d["reason"] == "failed to parse JSON response"
    assert d["verdict_strict"] == "not_run" and "unparsable" in d["strict_reason"]


@pytest.mark.parametrize(
    "reply,ref_score",
    [
        ("true", 0.5),  # no braces: whole text, not a JSON object -> fallback
        ("No, not correct.", 0.5),
        ("The answers differ.", 0.0),  # fallback, neither "true" nor "correct"
        ("", 0.0),
        ('{"correct": "true", "confidence": 0.9}', 0.5),  # wrong JSON type is a decode error in Go
        ('{"correct": true, "confidence": 0.9, "reason": "a"', 0.5),  # truncated JSON
    ],
)
def test_unparsable_replies(reply, ref_score):
    judge, _ = judge_with(reply)
    res = judge.score(item())
    assert res.values["llm_score"] == ref_score
    assert res.values["llm_score_strict"] is None
    assert res.details["parse_mode"] == "fallback" and res.details["verdict_strict"] == "not_run"
    assert res.details["raw"] == reply


def test_strict_needs_explicit_verdict():
    judge, _ = judge_with('{"confidence": 0.9}', '{"correct": true}')
    missing_verdict = judge.score(item())
    assert missing_verdict.values == {"llm_score": 0.0, "llm_score_strict": None}  # Go zero value: false
    missing_confidence = judge.score(item())
    assert missing_confidence.values == {"llm_score": 0.0, "llm_score_strict": None}  # Go zero value: 0


@pytest.mark.parametrize("error", [LLMError("endpoint http://x: 500 after 3 retries"), RuntimeError("boom")])
def test_judge_exception_never_crashes_and_is_a_scoring_failure_not_a_zero(error):
    judge, _ = judge_with(error)
    res = judge.score(item())
    assert res.values == {"llm_score": None, "llm_score_strict": None}  # the reference's 0 would be a fake score
    assert res.error is not None and "judge call failed" in res.error and type(error).__name__ in res.error
    d = res.details
    assert d["judge_called"] is True and d["parse_mode"] == "not_run" and d["verdict_strict"] == "not_run"
    assert type(error).__name__ in d["error"] and str(error) in d["error"]


def test_an_unparsable_reply_is_a_score_not_a_scoring_failure():
    judge, _ = judge_with("I cannot say")
    res = judge.score(item())
    assert res.error is None and res.values["llm_score_strict"] is None and res.details["verdict_strict"] == "not_run"


class TestParserGoParity:
    """Cases checked against the reference Go parser (parseQMSumJudgeResponse, go1.19)."""

    @pytest.mark.parametrize(
        "reply,correct,confidence,mode",
        [
            ('{"Correct": true, "CONFIDENCE": 0.6}', True, 0.6, "json"),  # case-insensitive keys
            ('{"correct": true, "correct": false, "confidence": 0.6}', False, 0.6, "json"),  # last key wins
            ('{"correct": true, "Correct": null, "confidence": 0.6}', True, 0.6, "json"),  # null is a no-op
            ('```json\n{"correct": true, "confidence": 0.95, "reason": "x"}\n```', True, 0.95, "json"),
            ('{"correct": true, "confidence": 0.7, "reason": 5}', True, 0.5, "fallback"),  # any type error
            ('{"correct": true, "confidence": NaN}', True, 0.5, "fallback"),
            ('{"correct": true, "confidence": 1e400}', True, 0.5, "fallback"),  # out of float64 range
            ('{"correct": true} {"x": 1}', True, 0.5, "fallback"),  # two objects: first { to last }
            ("null", False, 0.0, "json"),
            ("İNCORRECT", True, 0.5, "fallback"),
        ],
    )
    def test_cases(self, reply, correct, confidence, mode):
        v = parse_trpc_judge_reply(reply)
        assert (v.correct, v.confidence, v.parse_mode) == (correct, confidence, mode)


def test_hydra_instantiation_gives_plain_params():
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(
        {"_target_": "harness.scoring.judges.TrpcJudge", "params": {"temperature": 0, "extra_body": {"seed": [1, 2]}}}
    )
    model = judge_model('{"correct": true, "confidence": 0.5}')
    judge = instantiate(cfg, model=model)
    assert type(judge.params) is dict and judge.params == {"temperature": 0, "extra_body": {"seed": [1, 2]}}
    assert type(judge.params["extra_body"]["seed"]) is list
    assert judge.score(item()).values["llm_score"] == 0.5


def test_non_string_prediction_named():
    judge, _ = judge_with()
    with pytest.raises(TypeError, match="TrpcJudge: prediction of 'q1' must be str"):
        judge.score(ScoreInput("q1", "t", "?", "Kyoto", None))  # type: ignore[arg-type]
