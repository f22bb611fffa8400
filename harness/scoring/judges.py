"""LLM judges.

`TrpcJudge` reproduces the tRPC benchmark's LLMScore (spec §6; trpc-group/trpc-agent-go-benchmark
@ 1edee87, summary/trpc-agent-go-impl/qmsum_metrics.go + longmemeval.go `evaluateLMEMetrics`):

    llm_score = 1.0                       if the containment match holds (judge not called)
              = confidence if correct     otherwise, from one judge call
              = 0.0                       if the verdict is "incorrect"

The reference parser has a lenient fallback that reads "incorrect" as correct, so beside it we
report `llm_score_strict`: same prompt and call, but a reply without a usable JSON verdict gives
None ("not computed") instead of a guess.

A judge call that fails (transport error or HTTP error after the client's retries, timeout) is not
a verdict: the reference would count it as 0, we return no values and `ScoreResult.error`, so the
pair is recorded as "scoring_failed" and scored again by the next run (its answer kept).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.golang import JsonPairs, go_lower, go_trim_space, json_loads_deep
from harness.llm.types import ChatModel
from harness.prompts.judges import LME_ABSTENTION_PROMPT, LME_JUDGE_PROMPTS, TRPC_JUDGE_PROMPT
from harness.scoring.base import MetricSpec, ScoreInput, ScoreResult, require_text
from harness.scoring.lexical import contains_match
from harness.settings import group_default

FALLBACK_REASON = "failed to parse JSON response"  # the reference's wording


def render_trpc_judge_prompt(query: str, reference: str, prediction: str) -> str:
    return TRPC_JUDGE_PROMPT % (query, reference, prediction)


@dataclass(frozen=True)
class JudgeVerdict:
    """A parsed judge reply. `fields` lists the struct fields the JSON actually set."""

    correct: bool
    confidence: float
    reason: str
    parse_mode: str  # "json" | "fallback"
    fields: frozenset[str] = frozenset()
    error: str | None = None  # why JSON decoding failed (fallback only)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON literal {name}")  # Go's encoding/json has no NaN/Infinity


def _fold(key: str) -> str:
    # encoding/json matches struct fields case-insensitively (simple Unicode folding).
    key = key.replace("\u017f", "s").replace("\u212a", "k")
    return key.lower() if key.isascii() else key


def decode_go_judge_struct(text: str) -> tuple[dict[str, Any], frozenset[str]]:
    """Decode `text` as Go's json.Unmarshal into {Correct bool; Confidence float64; Reason string}.

    Returns (values, fields set). Raises ValueError wherever Go would return an error; the
    reference then discards every decoded field, so partial decoding is never exposed.
    """
    out: dict[str, Any] = {"correct": False, "confidence": 0.0, "reason": ""}
    try:
        try:
            obj = json.loads(text, parse_constant=_reject_constant, parse_int=float, object_pairs_hook=JsonPairs)
        except RecursionError:
            # Nested deeper than Python's recursion limit: Go decodes up to 10,000 levels, so do we.
            obj = json_loads_deep(text)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"invalid JSON: {e}") from None
    if obj is None:  # `null` into a struct is a no-op in Go, not an error
        return out, frozenset()
    if not isinstance(obj, JsonPairs):
        raise ValueError(f"JSON {type(obj).__name__} where an object was expected")
    seen: set[str] = set()
    errors: list[str] = []
    for key, value in obj:
        name = _fold(key)
        if name not in out or value is None:  # unknown keys are ignored; null leaves the zero value
            continue
        if name == "correct":
            ok = isinstance(value, bool)
        elif name == "reason":
            ok = isinstance(value, str)
        else:
            # Numbers arrive as floats (parse_int=float keeps "-0" negative, as in Go); Go rejects
            # literals beyond the float64 range, which Python turns into inf.
            ok = isinstance(value, float) and not math.isinf(value)
        if not ok:
            errors.append(f"field {key!r}: cannot use {value!r}")
            continue
        out[name] = value
        seen.add(name)
    if errors:
        raise ValueError("; ".join(errors))
    return out, frozenset(seen)


def parse_trpc_judge_reply(content: str) -> JudgeVerdict:
    """Reference `parseQMSumJudgeResponse`, including its lenient fallback and confidence clamp."""
    content = go_trim_space(content or "")
    start, end = content.find("{"), content.rfind("}")
    if start >= 0 and end > start:
        content = content[start : end + 1]
    try:
        values, fields = decode_go_judge_struct(content)
        correct, confidence, reason = values["correct"], values["confidence"], values["reason"]
        mode, error = "json", None
    except ValueError as e:
        lower = go_lower(content)
        # Reference behaviour, kept on purpose: "incorrect" contains "correct".
        correct = "true" in lower or "correct" in lower
        confidence, reason, mode, fields, error = 0.5, FALLBACK_REASON, "fallback", frozenset(), str(e)
    if confidence < 0:
        confidence = -confidence
    if confidence > 1:
        confidence = 1.0
    return JudgeVerdict(correct, confidence, reason, mode, fields, error)


def strict_score(verdict: JudgeVerdict) -> tuple[float | None, str | None]:
    """(llm_score_strict, why it is None). Only an explicit JSON verdict counts."""
    if verdict.parse_mode != "json":
        return None, f"unparsable judge reply ({verdict.error})"
    if "correct" not in verdict.fields:
        return None, "judge JSON has no boolean 'correct'"
    if not verdict.correct:
        return 0.0, None
    if "confidence" not in verdict.fields:
        return None, "judge JSON says correct but gives no numeric 'confidence'"
    return verdict.confidence, None


def per_mode_salt(sample_per_mode: bool, item: ScoreInput) -> dict[str, Any]:
    """The judge call's cache salt: with `sample_per_mode`, each mode's answer gets its own judge sample (the
    reference calls the judge once per mode), so one (question, reference, prediction) triple answered alike by
    two modes is judged twice instead of sharing one cached verdict. The salt is never sent."""
    return {"cache_salt": f"judge-mode:{item.mode}"} if sample_per_mode else {}


def _sample_per_mode(value: bool | None) -> bool:
    """The `judge.sample_per_mode` setting (configs/judge/*.yaml): null means false, so configs written before
    the setting existed keep their meaning and their run directories' fingerprints."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValueError(f"judge.sample_per_mode must be true or false, got {value!r}")
    return value


def _plain(value: Any) -> Any:
    """Turn Hydra/OmegaConf containers into plain dicts/lists, so the SDK can serialise them."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(v) for v in value]
    return value


class TrpcJudge:
    """The tRPC benchmark's LLMScore judge (see module docstring).

    `params` are extra generation parameters for the judge call (e.g. temperature); the
    reference sets none, so the default is none. `sample_per_mode`: see `per_mode_salt`.
    """

    metrics: tuple[MetricSpec, ...] = (
        MetricSpec(
            "llm_score",
            True,
            "tRPC LLMScore: 1 on containment match, else judge confidence if correct (lenient parse)",
            "LLMScore",
        ),
        MetricSpec(
            "llm_score_strict",
            True,
            "LLMScore from an explicit JSON verdict only; None when the reply is unusable",
            "LLMScore strict",
            judged=True,
        ),
    )
    # The binary verdicts behind the scores, read from the details by reports (not stored as metrics).
    derived_metrics: tuple[MetricSpec, ...] = (
        MetricSpec(
            "llm_acc",
            True,
            "tRPC judge verdict (lenient parse): 1 correct or exact match, 0 incorrect",
            "judge acc (trpc, lenient)",
            judged=True,
            binary=True,
            quality=False,
            verdict="verdict",
        ),
        MetricSpec(
            "llm_acc_strict",
            True,
            "tRPC judge verdict from an explicit JSON verdict only",
            "judge acc (trpc, strict)",
            judged=True,
            binary=True,
            verdict="verdict_strict",
        ),
    )

    def __init__(
        self, model: ChatModel, params: Mapping[str, Any] | None = None, sample_per_mode: bool | None = None
    ) -> None:
        self.model = model
        self.params: dict[str, Any] = _plain(params or {})
        self.sample_per_mode = _sample_per_mode(sample_per_mode)
        clash = {"messages", "tools", "purpose"} & self.params.keys()
        if clash:
            raise ValueError(f"TrpcJudge: params may not set {sorted(clash)}; they are fixed by the judge")

    def score(self, item: ScoreInput) -> ScoreResult:
        require_text(item, "TrpcJudge")
        details: dict[str, Any] = {
            "em": False,
            "judge_called": False,
            "raw": None,
            "parse_mode": "not_run",
            "verdict": "not_run",
            "verdict_strict": "not_run",
            "confidence": None,
            "reason": None,
            "strict_reason": None,
            "parse_error": None,
            "skipped": None,
            "usage": None,
            "error": None,
        }
        if contains_match(item.prediction, item.reference):
            details.update(em=True, skipped="exact_match")
            return ScoreResult({"llm_score": 1.0, "llm_score_strict": 1.0}, details)

        prompt = render_trpc_judge_prompt(item.question, item.reference, item.prediction)
        details["judge_called"] = True
        try:
            result = self.model.chat(
                [{"role": "user", "content": prompt}],
                purpose="judge",
                **self.params,
                **per_mode_salt(self.sample_per_mode, item),
            )
        except Exception as e:  # LLMError or anything else: never a score (the reference's 0), never a crash
            details["error"] = f"{type(e).__name__}: {e}"
            details["strict_reason"] = "judge call failed"
            return ScoreResult(
                {"llm_score": None, "llm_score_strict": None}, details, error=f"judge call failed: {details['error']}"
            )

        raw = result.content or ""
        verdict = parse_trpc_judge_reply(raw)
        strict, why = strict_score(verdict)
        details.update(
            raw=raw,
            usage=result.to_record(),
            parse_mode=verdict.parse_mode,
            verdict="correct" if verdict.correct else "incorrect",
            verdict_strict="not_run" if strict is None else ("correct" if verdict.correct else "incorrect"),
            confidence=verdict.confidence,
            reason=verdict.reason,
            strict_reason=why,
            parse_error=verdict.error,
        )
        llm_score = verdict.confidence if verdict.correct else 0.0
        return ScoreResult({"llm_score": llm_score, "llm_score_strict": strict}, details)


# --- The official LongMemEval QA judge ------------------------------------------------------------------
# Prompts: harness/prompts/judges.py. The official call: one user message, temperature 0, max_tokens 10
# (evaluate_qa.py); those parameters are configs/judge/longmemeval.yaml's `params`, read when none are given.


def lme_prompt_kind(question_id: str, question_type: str) -> str:
    """Which official template applies: abstention is routed by `_abs` in the id, as upstream does."""
    return "abstention" if "_abs" in question_id else question_type


def render_lme_judge_prompt(question_id: str, question_type: str, question: str, answer: str, response: str) -> str:
    kind = lme_prompt_kind(question_id, question_type)
    template = LME_ABSTENTION_PROMPT if kind == "abstention" else LME_JUDGE_PROMPTS.get(kind)
    if template is None:
        raise KeyError(f"no official LongMemEval judge prompt for question_type {question_type!r} ({question_id})")
    return template.format(question, answer, response)


def parse_lme_official(reply: str) -> bool:
    """Upstream label: `'yes' in reply.strip().lower()` (so "eyes" or "no, not yes" count as yes)."""
    return "yes" in (reply or "").strip().lower()


_WORD_RE = re.compile(r"[a-z]+")


def parse_lme_strict(reply: str) -> tuple[bool | None, str | None]:
    """(label, why None): the reply's first word must be "yes" or "no"; anything else is unparsable."""
    words = _WORD_RE.findall((reply or "").lower())
    if not words:
        return None, "empty judge reply"
    if words[0] in ("yes", "no"):
        return words[0] == "yes", None
    return None, f"judge reply does not start with yes/no: {reply.strip()[:80]!r}"


class LongMemEvalJudge:
    """The official LongMemEval QA judge (reference spec §8): per-type yes/no prompts, abstention by `_abs`.

    `lme_acc` uses the upstream parse (parity); `lme_acc_strict` accepts only a reply that starts with yes/no.
    A question type without an official prompt, or (strict only) an unparsable reply gives None — verdict
    `not_run` with the reason in the details — never a silent 0 or 1. A failed call also gives None, and
    `ScoreResult.error`: the pair's scoring failed and is redone by the next run.
    """

    metrics: tuple[MetricSpec, ...] = (
        MetricSpec(
            "lme_acc",
            True,
            "Official LongMemEval judge: 1 if 'yes' in the reply (upstream parse)",
            "LongMemEval acc",
            judged=True,
            binary=True,
            task_averaged=True,
        ),
        MetricSpec(
            "lme_acc_strict",
            True,
            "Official LongMemEval judge prompt; the reply must start with yes/no",
            "LongMemEval acc (strict parse)",
            judged=True,
            binary=True,
            task_averaged=True,
        ),
    )

    def __init__(
        self, model: ChatModel, params: Mapping[str, Any] | None = None, sample_per_mode: bool | None = None
    ) -> None:
        self.model = model
        if params is None:
            params = group_default("judge", "longmemeval", "params")
        self.params: dict[str, Any] = _plain(params)
        self.sample_per_mode = _sample_per_mode(sample_per_mode)
        clash = {"messages", "tools", "purpose"} & self.params.keys()
        if clash:
            raise ValueError(f"LongMemEvalJudge: params may not set {sorted(clash)}; they are fixed by the judge")

    def score(self, item: ScoreInput) -> ScoreResult:
        require_text(item, "LongMemEvalJudge")
        kind = lme_prompt_kind(item.question_id, item.question_type)
        details: dict[str, Any] = {
            "prompt_kind": kind,
            "judge_called": False,
            "raw": None,
            "verdict": "not_run",
            "verdict_strict": "not_run",
            "reason": None,
            "strict_reason": None,
            "usage": None,
            "error": None,
        }
        none: dict[str, float | None] = {"lme_acc": None, "lme_acc_strict": None}
        try:
            prompt = render_lme_judge_prompt(
                item.question_id, item.question_type, item.question, item.reference, item.prediction
            )
        except KeyError as e:
            details.update(reason=str(e.args[0]), strict_reason=str(e.args[0]))
            return ScoreResult(none, details)
        details["judge_called"] = True
        try:
            result = self.model.chat(
                [{"role": "user", "content": prompt}],
                purpose="judge",
                **self.params,
                **per_mode_salt(self.sample_per_mode, item),
            )
        except Exception as e:  # a failed judge call is a failure of scoring, never a score
            details.update(
                error=f"{type(e).__name__}: {e}", reason="judge call failed", strict_reason="judge call failed"
            )
            return ScoreResult(none, details, error=f"judge call failed: {details['error']}")
        raw = result.content or ""
        label = parse_lme_official(raw)
        strict, why = parse_lme_strict(raw)
        details.update(
            raw=raw,
            usage=result.to_record(),
            verdict="correct" if label else "incorrect",
            verdict_strict="not_run" if strict is None else ("correct" if strict else "incorrect"),
            strict_reason=why,
        )
        return ScoreResult(
            {"lme_acc": 1.0 if label else 0.0, "lme_acc_strict": None if strict is None else float(strict)}, details
        )
