"""One validation of every numeric setting, before anything runs: each problem names its key.

Hydra accepts `dataset.limit=abc` or `generation.max_tokens=-5` as given; without this check such a value
surfaces minutes later as a traceback deep in a component, or as a failed record per case.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.scoring.votes import VotesConfigError, check_votes
from harness.settings import RunConfigError
from runners.reference_latency import reference_latency_setting

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rule:
    key: str
    integer: bool
    minimum: float | None = None
    maximum: float | None = None
    exclusive_min: bool = False  # "> minimum" instead of ">= minimum"
    required: bool = False  # False: null / absent is allowed (the component's default applies)


def _int(key: str, minimum: float | None = None, maximum: float | None = None, required: bool = False) -> Rule:
    return Rule(key, True, minimum, maximum, required=required)


def _num(
    key: str,
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    exclusive_min: bool = False,
    required: bool = False,
) -> Rule:
    return Rule(key, False, minimum, maximum, exclusive_min, required)


TEMPERATURE_MAX = 2.0  # the OpenAI API's range; llama.cpp accepts it too

# Every numeric setting of configs/ (and the optional ones the components read), with its valid range.
RULES: tuple[Rule, ...] = (
    _int("run.concurrency", 1, required=True),
    _int("run.max_consecutive_failures", 0),
    _int("run.max_reply_chars", 1),
    _int("run.max_record_field_chars", 1),
    _int("client.concurrency", 1, required=True),
    _int("client.max_retries", 0, required=True),
    _num("client.timeout_s", 0, exclusive_min=True, required=True),
    _num("client.backoff_base_s", 0),
    _num("client.backoff_max_s", 0),
    _num("client.preflight_timeout_s", 0, exclusive_min=True),
    _num("generation.temperature", 0, TEMPERATURE_MAX),
    _num("generation.top_p", 0, 1, exclusive_min=True),
    _int("generation.max_tokens", 1),
    _int("generation.seed"),
    _int("summarizer.max_tokens", 1),
    _num("summarizer.temperature", 0, TEMPERATURE_MAX),
    _int("summarizer.output_reserve", 0),
    _int("summarizer.max_event_chars", 1),
    _int("dataset.limit", 0),
    _int("dataset.sample_seed"),
    _int("model.context_window", 1),
    _int("model.n_ctx", 1),
    _int("judge.params.max_tokens", 1),
    _num("judge.params.temperature", 0, TEMPERATURE_MAX),
    _int("judge.votes", 1),  # and odd: validate_settings
    _int("judge.judge.params.max_tokens", 1),  # a voted judge's inner judge (configs/judge/*_votes3.yaml)
    _num("judge.judge.params.temperature", 0, TEMPERATURE_MAX),
    _int("prompt.max_summary_words", 0),
    _int("mode.long_context.max_events", 1),
    _int("mode.summary_ondemand.max_tool_iterations", 1),
    _num("retrieval.config.alpha", 0),
    _num("retrieval.config.assistant_weight", 0),
    _num("retrieval.config.propagate", 0),
    _int("retrieval.config.candidate_ratio", 1),
    _num("retrieval.config.rrf_k", 0),
    _int("retrieval.config.visible_events", 1),
    _int("retrieval.config.expand_top", 0),
    _int("retrieval.config.window", 0),
    _int("retrieval.config.context_chars", 1),
    _int("retrieval.config.snippet_chars", 1),
    _int("retrieval.config.budget_chars", 1),
    _int("retrieval.config.hit_chars", 1),
    _int("retrieval.config.top_hit_chars", 80),
    _int("retrieval.config.top_hits", 0),
    _int("retrieval.config.recall_chars", 80),
    _int("retrieval.max_embed_tokens", 1),
    _int("retrieval.embedder.dimensions", 1),
)


# Every true/false setting: OmegaConf keeps `run.progress=maybe` as the string "maybe", which `bool()` reads as
# true; only a YAML boolean is accepted (null where the component has a default).
BOOLEAN_KEYS: tuple[str, ...] = (
    "run.progress",
    "run.share_summary",
    "client.preflight",
    "cache.enabled",
    "judge.confirm_failures",
    "judge.judge.confirm_failures",
    "retrieval.config.allow_keyword_mode",
    "retrieval.config.recall_cues",
    "retrieval.config.keyword_require_all",
    "retrieval.config.tail_filter",
    "retrieval.config.lexical_fallback",
    "retrieval.config.wire_exact_schema",
)


def _describe(rule: Rule) -> str:
    kind = "an integer" if rule.integer else "a number"
    bounds = []
    if rule.minimum is not None:
        bounds.append(f"{'>' if rule.exclusive_min else '>='} {rule.minimum:g}")
    if rule.maximum is not None:
        bounds.append(f"<= {rule.maximum:g}")
    return f"{kind} {' and '.join(bounds)}".strip()


def check(rule: Rule, value: Any) -> str | None:
    """The problem with `value` for `rule`, or None when it is valid."""
    if value is None:
        return f"{rule.key} is required" if rule.required else None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and rule.integer:
        ok = float(value).is_integer()
    if ok and rule.minimum is not None:
        ok = value > rule.minimum if rule.exclusive_min else value >= rule.minimum
    if ok and rule.maximum is not None:
        ok = value <= rule.maximum
    return None if ok else f"{rule.key} must be {_describe(rule)}, got {value!r}"


def validate_settings(cfg: DictConfig) -> None:
    """RunConfigError naming every numeric setting that is out of range or not a number."""
    problems = [p for rule in RULES if (p := check(rule, OmegaConf.select(cfg, rule.key, default=None)))]
    for key in BOOLEAN_KEYS:
        value = OmegaConf.select(cfg, key, default=None)
        if value is not None and not isinstance(value, bool):
            problems.append(f"{key} must be true or false, got {value!r}")
    latency = OmegaConf.select(cfg, "run.reference_latency", default=None)
    try:
        reference_latency_setting(latency)
    except ValueError:
        problems.append(f"run.reference_latency must be auto, true or false, got {latency!r}")
    votes = OmegaConf.select(cfg, "judge.votes", default=None)
    if votes is not None and not any(p.startswith("judge.votes ") for p in problems):  # an even count: no majority
        try:
            check_votes(votes)
        except VotesConfigError as e:
            problems.append(str(e))
    if problems:
        raise RunConfigError("; ".join(problems))
    if int(cfg.client.concurrency) < int(cfg.run.concurrency):
        log.warning(
            "run.concurrency=%s but client.concurrency=%s: at most %s model calls run at once "
            "(raise client.concurrency too)",
            cfg.run.concurrency,
            cfg.client.concurrency,
            cfg.client.concurrency,
        )
