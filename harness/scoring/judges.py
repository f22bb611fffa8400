"""LLM judges.

`TrpcJudge` reproduces the tRPC benchmark's LLMScore (spec §6; trpc-group/trpc-agent-go-benchmark
@ 1edee87, summary/trpc-agent-go-impl/qmsum_metrics.go + longmemeval.go `evaluateLMEMetrics`):

    llm_score = 1.0                       if the containment match holds (judge not called)
              = confidence if correct     otherwise, from one judge call
              = 0.0                       if the verdict is "incorrect" or the call fails

The reference parser has a lenient fallback that reads "incorrect" as correct, so beside it we
report `llm_score_strict`: same prompt and call, but a reply without a usable JSON verdict (or a
failed call) gives None ("not computed") instead of a guess.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.llm.types import ChatModel
from harness.scoring.base import MetricSpec, ScoreInput, ScoreResult, require_text
from harness.scoring.lexical import contains_match, go_lower, go_trim_space

# Verbatim from trpc-group/trpc-agent-go-benchmark (fork Flash-LHR/trpc-agent-go-benchmark),
# commit 1edee87bc8b4efa539329e6766fd0fcd4b03fd7b, summary/trpc-agent-go-impl/qmsum_metrics.go,
# const qmsumJudgePrompt (a Go raw string: no trailing newline). Filled with %-formatting
# (query, reference, prediction) exactly like fmt.Sprintf("%s").
TRPC_JUDGE_PROMPT = """You are an expert evaluator for query-based meeting summarization.

Query: %s
Reference Answer: %s
Predicted Answer: %s

Judge whether the predicted answer is faithful and semantically equivalent to the reference answer for the given query.
Respond with a JSON object:
{"correct": true/false, "confidence": 0.0-1.0, "reason": "brief explanation"}"""

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


class _Pairs(list):
    """A JSON object kept as ordered (key, value) pairs, distinguishable from a JSON array."""


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
        obj = json.loads(
            text, parse_constant=_reject_constant, parse_int=float, object_pairs_hook=_Pairs
        )
    except (ValueError, RecursionError) as e:
        raise ValueError(f"invalid JSON: {e}") from None
    if obj is None:  # `null` into a struct is a no-op in Go, not an error
        return out, frozenset()
    if not isinstance(obj, _Pairs):
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
    reference sets none, so the default is none.
    """

    metrics: tuple[MetricSpec, ...] = (
        MetricSpec("llm_score", True,
                   "tRPC LLMScore: 1 on containment match, else judge confidence if correct (lenient parse)"),
        MetricSpec("llm_score_strict", True,
                   "LLMScore from an explicit JSON verdict only; None when the reply is unusable or the call failed"),
    )

    def __init__(self, model: ChatModel, params: Mapping[str, Any] | None = None) -> None:
        self.model = model
        self.params: dict[str, Any] = _plain(params or {})
        clash = {"messages", "tools", "purpose"} & self.params.keys()
        if clash:
            raise ValueError(f"TrpcJudge: params may not set {sorted(clash)}; they are fixed by the judge")

    def score(self, item: ScoreInput) -> ScoreResult:
        require_text(item, "TrpcJudge")
        details: dict[str, Any] = {
            "em": False, "judge_called": False, "raw": None, "parse_mode": "not_run",
            "verdict": "not_run", "verdict_strict": "not_run", "confidence": None, "reason": None,
            "strict_reason": None, "parse_error": None, "skipped": None, "usage": None, "error": None,
        }
        if contains_match(item.prediction, item.reference):
            details.update(em=True, skipped="exact_match")
            return ScoreResult({"llm_score": 1.0, "llm_score_strict": 1.0}, details)

        prompt = render_trpc_judge_prompt(item.question, item.reference, item.prediction)
        details["judge_called"] = True
        try:
            result = self.model.chat([{"role": "user", "content": prompt}], purpose="judge", **self.params)
        except Exception as e:  # LLMError or anything else: score the case, never crash it
            details["error"] = f"{type(e).__name__}: {e}"
            details["strict_reason"] = "judge call failed"
            # The reference counts a failed judge call as 0; the strict variant says "not computed".
            return ScoreResult({"llm_score": 0.0, "llm_score_strict": None}, details)

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
