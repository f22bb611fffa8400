"""A run's configuration as one typed, frozen object, built once from the composed Hydra config.

`RunConfig.build(cfg)` runs right after composition (in the run skeleton, so an invalid config leaves the failure
note like any failure before the run starts; the plan builds it before loading data): it validates every declared
setting once (runners/setting_rules.py), builds each settings object once, and from then on the pipeline receives it
instead of the raw config. What it holds:

- typed settings for what the pipeline itself reads (`run`, `client`, `generation`, `wire`, `bounds`, `cache`,
  `store`), each read once, with the defaults of configs/config.yaml (harness/settings.py);
- each component's own node (`dataset`, `modes`, `summarizer`, ...): Hydra's strategy selection, given as is to
  `instantiate` when that component is built;
- `composed`, the config as given, only for what records it as given: the fingerprint (computed once, here) and
  the provenance in run.json.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from harness.bounds import RecordBounds
from harness.settings import ClientSettings, GenerationSettings, RunSettings, judge_model
from runners.fingerprint import earlier_fingerprints, fingerprint
from runners.setting_rules import RunConfigError, validate_settings
from runners.wire import WireShape

STORE_KINDS = ("sqlite", "postgres")


@dataclass(frozen=True)
class CacheSettings:
    """`cache:`: the response cache (configs/config.yaml); not result-bearing."""

    enabled: bool
    path: str | None

    @classmethod
    def from_config(cls, node: Any) -> CacheSettings:
        node = node if node is not None else {}
        path = node.get("path")
        return cls(enabled=bool(node.get("enabled")), path=None if path is None else str(path))


@dataclass(frozen=True)
class StoreSettings:
    """`store:`: where shared state lives (runners/store_backend.py; docs/cluster.md). Absent: SQLite files."""

    kind: str = "sqlite"
    dsn: str = ""
    password_env: str | None = None  # None: harness/stores/postgres.py's PASSWORD_ENV
    fts: bool = False

    @classmethod
    def from_config(cls, node: Any) -> StoreSettings:
        node = node if node is not None else {}
        kind = str(node.get("kind") or "sqlite")
        if kind not in STORE_KINDS:
            raise RunConfigError(
                f"store.kind={kind!r} is not one of {list(STORE_KINDS)} (store=sqlite or store=postgres)"
            )
        env = node.get("password_env")
        return cls(kind, str(node.get("dsn") or ""), str(env) if env else None, bool(node.get("fts")))


@dataclass(frozen=True)
class RunConfig:
    """One run's settings, validated and typed (`build`); passed down instead of the raw config."""

    composed: DictConfig  # the config as given: the fingerprint and run.json's provenance record it
    run: RunSettings
    client: ClientSettings
    generation: GenerationSettings
    wire: WireShape
    bounds: RecordBounds
    cache: CacheSettings
    store: StoreSettings
    # each component's own node, given to Hydra's `instantiate` (None: that group is not selected)
    dataset: Any
    model: Any
    judge: Any  # the judge group: the scorer's `_target_`, params, votes, and `endpoint` when it has its own
    judge_model: Any  # the model config the judge calls (harness.settings.judge_model)
    judge_has_own_model: bool
    modes: Any
    scorers: Any
    summarizer: Any
    prompt: Any
    retrieval: Any

    @classmethod
    def build(cls, cfg: DictConfig) -> RunConfig:
        """The run's settings from the composed config: RunConfigError naming every invalid setting first."""
        validate_settings(cfg)
        # each node as Hydra composed it: its interpolations still resolve against the whole config
        spec, own = judge_model(cfg)
        return cls(
            composed=cfg,
            run=RunSettings.from_config(cfg.get("run")),
            client=ClientSettings.from_config(cfg.get("client")),
            generation=GenerationSettings.from_config(cfg.get("generation")),
            wire=WireShape.from_config(cfg.get("wire")),
            bounds=RecordBounds.from_config(cfg),
            cache=CacheSettings.from_config(cfg.get("cache")),
            store=StoreSettings.from_config(cfg.get("store")),
            dataset=cfg.get("dataset"),
            model=cfg.get("model"),
            judge=cfg.get("judge"),
            judge_model=spec,
            judge_has_own_model=own,
            modes=cfg.get("mode"),
            scorers=cfg.get("scorers"),
            summarizer=cfg.get("summarizer"),
            prompt=cfg.get("prompt"),
            retrieval=cfg.get("retrieval"),
        )

    @functools.cached_property
    def fingerprint(self) -> str:
        """The run's identity (runners/fingerprint.py), computed once: the directory check, the session store,
        run.json."""
        return fingerprint(self.composed)

    @functools.cached_property
    def earlier_fingerprints(self) -> tuple[str, ...]:
        """The identities older releases computed (their run directories still resume)."""
        return earlier_fingerprints(self.composed)

    @property
    def judged(self) -> bool:
        """Whether a judge scores the answers (a judge group with a `_target_`; judge=none has none)."""
        return bool(self.judge is not None and self.judge.get("_target_"))
