"""One validation of every numeric setting, before anything runs: each problem names its key.

Hydra accepts `dataset.limit=abc` or `generation.max_tokens=-5` as given; without this check such a value
surfaces minutes later as a traceback deep in a component, or as a failed record per case.
"""

from __future__ import annotations

import logging
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.memory.settings import PROVIDER_SETTINGS
from harness.retrieval.config import SearchConfig
from harness.scoring.votes import VotesConfigError, check_votes
from harness.settings import TEMPERATURE_MAX, ClientSettings, RunConfigError, RunSettings, Setting, declared
from runners.reference_latency import reference_latency_setting
from runners.wire import WireShape

# Where a model is served (not which model) and how its key is given: never part of a run's name; the URLs
# are also out of its fingerprint (runners/fingerprint.py), the keys masked there (harness/secrets.py).
ENDPOINT_KEYS = ("model.base_url", "judge.endpoint.base_url", "memory.base_url")
SECRET_KEYS = (
    "model.api_key",
    "judge.endpoint.api_key",
    "model.api_key_env",
    "judge.endpoint.api_key_env",
    "memory.api_key_env",
)

log = logging.getLogger(__name__)


# The settings whose component is not a dataclass declaring them (harness/settings.py `setting`): one line each.
# Defaults live in the YAML (or the component); here only the type, the valid values and whether results depend on it.
_TEMPERATURE: dict[str, Any] = {"minimum": 0, "maximum": TEMPERATURE_MAX}
UNDECLARED_COMPONENTS: tuple[Setting, ...] = (
    Setting("generation.temperature", float, **_TEMPERATURE),
    Setting("generation.top_p", float, 0, 1, exclusive_min=True),
    Setting("generation.max_tokens", int, 1),
    Setting("generation.seed", int),
    Setting("summarizer.max_tokens", int, 1),
    Setting("summarizer.temperature", float, **_TEMPERATURE),
    Setting("summarizer.output_reserve", int, 0),
    Setting("summarizer.max_event_chars", int, 1),
    Setting("dataset.limit", int, 0),
    Setting("dataset.sample_seed", int),
    Setting("dataset.shortest", bool),
    Setting("dataset.per_type", int, 1),
    Setting("dataset.max_history_chars", int, 1),
    Setting("model.context_window", int, 1),
    Setting("model.n_ctx", int, 1),
    Setting("judge.params.max_tokens", int, 1),
    Setting("judge.params.temperature", float, **_TEMPERATURE),
    Setting("judge.votes", int, 1),  # and odd: validate_settings
    Setting("judge.confirm_failures", bool),
    Setting("judge.sample_per_mode", bool),
    # a voted judge's inner judge (configs/judge/*_votes3.yaml)
    Setting("judge.judge.params.max_tokens", int, 1),
    Setting("judge.judge.params.temperature", float, **_TEMPERATURE),
    Setting("judge.judge.confirm_failures", bool),
    Setting("prompt.max_summary_words", int, 0),
    Setting("mode.long_context.max_events", int, 1),
    Setting("mode.summary_ondemand.max_tool_iterations", int, 1),
    Setting("mode.memory.top_k", int, 1),  # harness/memory/contestant.py
    Setting("mode.memory.context_tokens", int, 1),
    Setting("mode.memory.native_answer", bool),
    Setting("mode.memory.ready_timeout_s", float, 0, exclusive_min=True),
    *PROVIDER_SETTINGS,  # memory.*: harness/memory/settings.py
    Setting("retrieval.max_embed_tokens", int, 1),
    Setting("retrieval.embedder.dimensions", int, 1),
    Setting("cache.enabled", bool, results=False, named=True),
    Setting("cache.path", str, results=False),
    Setting("store.kind", str, results=False, named=True),
    Setting("store.dsn", str, results=False),
    Setting("store.password_env", str, results=False),
    Setting("store.fts", bool),
)

# Every declared setting: the one list validation, the fingerprint and the run directory's name are computed from.
SETTINGS: tuple[Setting, ...] = (
    declared(RunSettings, "run")
    + declared(ClientSettings, "client")
    + declared(WireShape, "wire")
    + declared(SearchConfig, "retrieval.config")
    + UNDECLARED_COMPONENTS
)


def declaration(key: str) -> Setting:
    """The declaration of `key` (KeyError naming it when none)."""
    for s in SETTINGS:
        if s.key == key:
            return s
    raise KeyError(f"no declared setting {key!r}")


def non_result_keys(settings: tuple[Setting, ...] = SETTINGS) -> tuple[str, ...]:
    """What the run fingerprint leaves out: each setting declared out of it, or its whole section when every
    setting of that section is (`cache`: a key a later release adds there stays out of the identity too)."""
    sections: dict[str, list[Setting]] = {}
    for s in settings:
        sections.setdefault(s.key.rsplit(".", 1)[0], []).append(s)
    out: list[str] = []
    for section, members in sections.items():
        if all(not s.in_fingerprint for s in members):
            out.append(section)
        else:
            out.extend(s.key for s in members if not s.in_fingerprint)
    return tuple(out)


def dirname_exclusions(settings: tuple[Setting, ...] = SETTINGS) -> tuple[str, ...]:
    """Overrides left out of the run directory's name (runners/rundir.py; Hydra's `exclude_keys`): the settings
    declared out of it, and where a model is served and its key (also refused by name in rundir._is_excluded)."""
    return tuple(s.key for s in settings if not s.in_dirname) + ENDPOINT_KEYS + SECRET_KEYS


def check(rule: Setting, value: Any) -> str | None:
    """The problem with `value` for `rule`, or None when it is valid."""
    return rule.problem(value)


def validate_settings(cfg: DictConfig) -> None:
    """RunConfigError naming every numeric setting that is out of range or not a number."""
    problems = [p for rule in SETTINGS if (p := rule.problem(OmegaConf.select(cfg, rule.key, default=None)))]
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
