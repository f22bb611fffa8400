"""Client, generation and run settings as objects built from config (like dataset, model, mode and retrieval).

The rule, one default per setting:
- a setting listed in configs/config.yaml has its default there and nowhere else: these objects read it, and
  a `client.`/`run.` key the given config lacks takes the yaml's value (`yaml_defaults`), so a program that
  builds an `LLMClient` by hand gets the same defaults as `lme-harness run` (`generation:` is sent as the
  config gives it: a key removed with `~generation.seed` is not sent);
- likewise a key of a group's yaml (configs/mode/long_context.yaml `max_events`) is that component's default:
  the dataclass field reads it (`yaml_field`);
- a setting the yaml does not list (or lists as null, "the built-in default") has its default on the
  dataclass field here (or on `RecordBounds`), and the yaml does not restate it.
Ranges are checked once, before a run, by runners/settings.py (one error naming the bad key).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf

from harness.config_files import CONFIG_DIR

CONFIG_FILE = CONFIG_DIR / "config.yaml"


class RunConfigError(ValueError):
    """A configuration the run cannot start with; the message names the key."""


def _typed(key: str, value: Any, kind: type) -> Any:
    """`value` as `kind`, or one RunConfigError naming `key` (a program that skipped runners/settings.py)."""
    if (
        value is None
        or (kind in (int, float) and isinstance(value, bool))
        or (kind is bool and not isinstance(value, bool))
    ):
        raise RunConfigError(f"{key} must be {kind.__name__}, got {value!r}")
    if kind is int and isinstance(value, float) and not value.is_integer():
        raise RunConfigError(f"{key} must be int, got {value!r}")
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise RunConfigError(f"{key} must be {kind.__name__}, got {value!r}") from None


def _as_dict(data: Any, what: object) -> dict[str, Any]:
    """A plain mapping (OmegaConf's containers are typed as any container)."""
    if not isinstance(data, dict):
        raise RunConfigError(f"{what}: expected a mapping, got {type(data).__name__}")
    return {str(k): v for k, v in data.items()}


@functools.cache
def _yaml_section(section: str) -> dict[str, Any]:
    node = _as_dict(OmegaConf.to_container(OmegaConf.load(CONFIG_FILE), resolve=False), CONFIG_FILE).get(section)
    return _as_dict(node, f"{CONFIG_FILE}: {section}") if node is not None else {}


def yaml_defaults(section: str) -> dict[str, Any]:
    """The `section:` block of configs/config.yaml (a copy): the user-facing defaults."""
    return dict(_yaml_section(section))


@functools.cache
def _group_option(group: str, option: str) -> dict[str, Any]:
    path = CONFIG_FILE.parent / group / f"{option}.yaml"
    data = _as_dict(OmegaConf.to_container(OmegaConf.load(path), resolve=False), path)
    inner = data.get(option)  # a group whose options are packaged under their name (mode: {summary: {...}})
    return dict(inner) if isinstance(inner, dict) else dict(data)


def group_default(group: str, option: str, key: str) -> Any:
    """`key` of configs/<group>/<option>.yaml: the user-facing default of the component that file configures."""
    try:
        return _group_option(group, option)[key]
    except KeyError:
        raise KeyError(f"configs/{group}/{option}.yaml has no {key!r}") from None


def yaml_field(group: str, option: str, key: str) -> Any:
    """A dataclass field whose default is `group_default(group, option, key)` (read when an object is built),
    for a component the yaml configures and code also builds directly (tests, benchmarks)."""
    return field(default_factory=lambda: group_default(group, option, key))


def _plain(cfg: Any) -> dict[str, Any]:
    if cfg is None:
        return {}
    if OmegaConf.is_config(cfg):
        return _as_dict(OmegaConf.to_container(cfg, resolve=True) or {}, "settings")
    return dict(cfg)


def _merged(section: str, cfg: Any) -> dict[str, Any]:
    """The yaml's defaults for `section`, overlaid with the keys `cfg` sets (in the yaml's key order first)."""
    return {**yaml_defaults(section), **_plain(cfg)}


def _known(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in values.items() if k in names}


_FIELD_KINDS: dict[str, type] = {"float": float, "int": int, "str": str, "bool": bool}


@dataclass(frozen=True)
class ClientSettings:
    """`client:`: how every model call is made (harness/llm/client.py)."""

    timeout_s: float  # configs/config.yaml
    max_retries: int  # configs/config.yaml
    concurrency: int  # configs/config.yaml
    max_tokens_param: str  # configs/config.yaml
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    preflight: bool = True  # one reachability check per endpoint before a run
    preflight_timeout_s: float = 15.0  # at most; never longer than timeout_s

    @classmethod
    def from_config(cls, cfg: Any = None) -> ClientSettings:
        v = {k: x for k, x in _known(cls, _merged("client", cfg)).items() if x is not None}
        kinds = {f.name: _FIELD_KINDS[str(f.type)] for f in dataclasses.fields(cls)}
        missing = [k for k in ("timeout_s", "max_retries", "concurrency", "max_tokens_param") if k not in v]
        if missing:
            raise RunConfigError(f"client.{missing[0]} is required")
        return cls(**{k: _typed(f"client.{k}", x, kinds[k]) for k, x in v.items()})

    @classmethod
    def default(cls) -> ClientSettings:
        return cls.from_config(None)


@dataclass(frozen=True)
class GenerationSettings:
    """`generation:`: the sampling parameters of answer calls, sent as given (null: not sent)."""

    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Any) -> GenerationSettings:
        # Only what the config sets: a key the yaml lists but the experiment removed is not sent, as before.
        return cls({k: v for k, v in _plain(cfg).items() if v is not None})

    def as_params(self) -> dict[str, Any]:
        """Keyword arguments for `ChatModel.chat` (a fresh dict, in the config's key order)."""
        return dict(self.params)


@dataclass(frozen=True)
class RunSettings:
    """`run:`: how a run proceeds (runners/replay.py). Every value comes from configs/config.yaml."""

    name: str
    concurrency: int
    progress: bool
    share_summary: bool
    reference_latency: Any
    max_consecutive_failures: int
    max_reply_chars: int | None
    max_record_field_chars: int | None

    @classmethod
    def from_config(cls, cfg: Any = None) -> RunSettings:
        v = _known(cls, _merged("run", cfg))
        return cls(
            name=str(v["name"]),
            concurrency=_typed("run.concurrency", v["concurrency"], int),
            progress=_typed("run.progress", v["progress"], bool),
            share_summary=_typed("run.share_summary", v["share_summary"], bool),
            reference_latency=v["reference_latency"],
            max_consecutive_failures=_typed("run.max_consecutive_failures", v["max_consecutive_failures"] or 0, int),
            max_reply_chars=v["max_reply_chars"],
            max_record_field_chars=v["max_record_field_chars"],
        )
