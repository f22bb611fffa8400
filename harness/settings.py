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
Each setting is declared once (`Setting`: type, valid values, whether results depend on it), as `setting(...)`
metadata on its dataclass field here (or in the component's dataclass), or as one line in runners/setting_rules.py for
components that are not such dataclasses. Validation before a run (one error naming the bad key), the run
fingerprint's non-result keys and the run directory's name exclusions are computed from those declarations.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf

from harness.config_files import CONFIG_DIR

CONFIG_FILE = CONFIG_DIR / "config.yaml"


class RunConfigError(ValueError):
    """A configuration the run cannot start with; the message names the key."""


def _typed(key: str, value: Any, kind: type) -> Any:
    """`value` as `kind`, or one RunConfigError naming `key` (a program that skipped runners/setting_rules.py)."""
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


def group_options(group: str) -> tuple[str, ...]:
    """The options configs/<group>/ ships (its files' names, sorted)."""
    return tuple(sorted(p.stem for p in (CONFIG_FILE.parent / group).glob("*.yaml")))


def group_file(group: str, option: str) -> dict[str, Any]:
    """configs/<group>/<option>.yaml as written (interpolations such as `${retrieval.embedder}` unresolved); a copy."""
    return copy.deepcopy(_group_option(group, option))


def yaml_field(group: str, option: str, key: str) -> Any:
    """A dataclass field whose default is `group_default(group, option, key)` (read when an object is built),
    for a component the yaml configures and code also builds directly (tests, benchmarks)."""
    return field(default_factory=lambda: group_default(group, option, key))


TEMPERATURE_MAX = 2.0  # the OpenAI API's range; llama.cpp accepts it too


@dataclass(frozen=True)
class Setting:
    """One setting's declaration: its key, type, valid values and whether it changes results. Validation
    (runners/setting_rules.py), the run fingerprint's non-result keys (runners/fingerprint.py) and the run directory's
    name exclusions (runners/rundir.py) are all computed from these; the default is the YAML's (or, for a key the
    YAML does not list, the dataclass field's), never restated here."""

    key: str  # dotted path in the composed config
    kind: type | None  # int, float, bool, str; None: checked elsewhere (a special form)
    minimum: float | None = None
    maximum: float | None = None
    exclusive_min: bool = False  # "> minimum" instead of ">= minimum"
    required: bool = False  # False: null / absent is allowed (the component's default applies)
    choices: tuple[str, ...] | None = None
    results: bool = True  # False: the run's records do not depend on it (concurrency, timeouts, the cache)
    # Part of the run fingerprint / the directory name; None: as `results`. Set only where an earlier release
    # chose otherwise and existing run directories (their fingerprint, their name) must still be found.
    fingerprinted: bool | None = None
    named: bool | None = None

    @property
    def in_fingerprint(self) -> bool:
        return self.results if self.fingerprinted is None else self.fingerprinted

    @property
    def in_dirname(self) -> bool:
        return self.results if self.named is None else self.named

    def describe(self) -> str:
        if self.kind is bool:
            return "true or false"
        if self.choices is not None:
            return f"one of {', '.join(self.choices)}"
        if self.kind in (str, None):
            return "a string" if self.kind is str else "valid"
        kind = "an integer" if self.kind is int else "a number"
        bounds = []
        if self.minimum is not None:
            bounds.append(f"{'>' if self.exclusive_min else '>='} {self.minimum:g}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum:g}")
        return f"{kind} {' and '.join(bounds)}".strip()

    def problem(self, value: Any) -> str | None:
        """What is wrong with `value` for this setting (one phrase naming the key), or None when it is valid."""
        if value is None:
            return f"{self.key} is required" if self.required else None
        if self.kind is bool:
            ok = isinstance(value, bool)
        elif self.choices is not None:
            ok = value in self.choices
        elif self.kind in (int, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if ok and self.kind is int:
                ok = float(value).is_integer()
            if ok and self.minimum is not None:
                ok = value > self.minimum if self.exclusive_min else value >= self.minimum
            if ok and self.maximum is not None:
                ok = value <= self.maximum
        else:
            ok = True
        return None if ok else f"{self.key} must be {self.describe()}, got {value!r}"


def setting(**spec: Any) -> dict[str, Any]:
    """Field metadata declaring a dataclass field as a setting: `field(metadata=setting(minimum=1))`.
    The key is the section's prefix and the field's name, the kind the field's type (`declared`)."""
    return {"setting": spec}


def config_field(section: str, key: str, **spec: Any) -> Any:
    """A dataclass field declaring the setting `section.key` whose default is configs/config.yaml's (read when
    an object is built): the component built in code (tests, benchmarks) gets the run's default."""
    return field(default_factory=lambda: yaml_defaults(section)[key], metadata=setting(name=key, **spec))


def group_field(group: str, option: str, key: str, **spec: Any) -> Any:
    """A dataclass field declaring a setting whose default is `key` of configs/<group>/<option>.yaml (read when an
    object is built): the file Hydra composes is the one place the default is stated."""
    return field(default_factory=lambda: group_default(group, option, key), metadata=setting(**spec))


_ANNOTATION_KINDS: dict[str, type | None] = {"float": float, "int": int, "str": str, "bool": bool, "Any": None}


def _annotation(f: dataclasses.Field[Any]) -> str:
    """A field's annotation as written (`int | None`), whether a string (postponed) or a type."""
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))


def declared(cls: type, prefix: str) -> tuple[Setting, ...]:
    """The settings a dataclass declares through `setting(...)` metadata, keyed `prefix.<field>`."""
    out = []
    for f in dataclasses.fields(cls):
        if "setting" in f.metadata:
            kind = _ANNOTATION_KINDS[_annotation(f).removesuffix(" | None")]
            spec = dict(f.metadata["setting"])
            out.append(Setting(f"{prefix}.{spec.pop('name', f.name)}", kind, **spec))
    return tuple(out)


def check_fields(obj: Any, what: str) -> None:
    """ValueError naming the first declared field of the dataclass `obj` whose value is invalid (a component
    built in code, not through a validated config, gets the same ranges)."""
    fields = [f for f in dataclasses.fields(obj) if "setting" in f.metadata]
    for f, s in zip(fields, declared(type(obj), what), strict=True):
        if (p := s.problem(getattr(obj, f.name))) is not None:
            raise ValueError(p)


def judge_model(cfg: Mapping[str, Any]) -> tuple[Any, bool]:
    """The model config the judge calls, and whether it is its own: `judge.endpoint` when one is configured
    (e.g. `+model@judge.endpoint=openai`), else the answer model (`model`). The one statement of that rule."""
    judge = cfg.get("judge")
    own = judge.get("endpoint") if isinstance(judge, Mapping) else None
    return (own, True) if own else (cfg.get("model"), False)


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


def _annotated(key: str, value: Any, annotation: str) -> Any:
    """`value` as a field annotated `annotation` takes it: `X | None` keeps null, `Any` any value, `str` its text,
    int/float/bool checked (`_typed`)."""
    kind = _ANNOTATION_KINDS[annotation.removesuffix(" | None")]
    if kind is None or (value is None and annotation.endswith(" | None")):
        return value
    return str(value) if kind is str else _typed(key, value, kind)


@dataclass(frozen=True)
class ClientSettings:
    """`client:`: how every model call is made (harness/llm/client.py)."""

    # Defaults: configs/config.yaml (the first four) or the field. Not results: a run directory resumes under
    # other values; `named`/`fingerprinted`: as earlier releases named and identified runs (module doc).
    timeout_s: float = field(metadata=setting(minimum=0, exclusive_min=True, required=True, results=False, named=True))
    max_retries: int = field(metadata=setting(minimum=0, required=True, results=False, named=True))
    concurrency: int = field(metadata=setting(minimum=1, required=True, results=False))
    max_tokens_param: str = field(metadata=setting())
    backoff_base_s: float = field(default=1.0, metadata=setting(minimum=0, results=False, named=True))
    backoff_max_s: float = field(default=30.0, metadata=setting(minimum=0, results=False, named=True))
    # one reachability check per endpoint before a run
    preflight: bool = field(default=True, metadata=setting(results=False, named=True))
    # at most; never longer than timeout_s
    preflight_timeout_s: float = field(
        default=15.0,
        metadata=setting(minimum=0, exclusive_min=True, results=False, named=True, fingerprinted=True),
    )

    @classmethod
    def from_config(cls, cfg: Any = None) -> ClientSettings:
        v = {k: x for k, x in _known(cls, _merged("client", cfg)).items() if x is not None}
        kinds = {f.name: _FIELD_KINDS[str(f.type)] for f in dataclasses.fields(cls)}
        missing = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING and f.name not in v]
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

    name: str = field(metadata=setting(results=False))
    concurrency: int = field(metadata=setting(minimum=1, required=True, results=False))
    progress: bool = field(metadata=setting(results=False))
    share_summary: bool = field(metadata=setting())
    reference_latency: Any = field(metadata=setting())  # auto, true or false: runners/setting_rules.py checks it
    max_consecutive_failures: int | None = field(metadata=setting(minimum=0, results=False))
    max_reply_chars: int | None = field(metadata=setting(minimum=1))
    max_record_field_chars: int | None = field(metadata=setting(minimum=1))

    def __post_init__(self) -> None:
        if self.max_consecutive_failures is None:  # null: as 0, never stop
            object.__setattr__(self, "max_consecutive_failures", 0)

    @classmethod
    def from_config(cls, cfg: Any = None) -> RunSettings:
        """Every field from configs/config.yaml's `run:` overlaid with `cfg`, typed by its annotation: a new
        field is its own declaration and needs no line here (docs/architecture.md, "Adding a setting")."""
        v = _known(cls, _merged("run", cfg))
        return cls(
            **{
                f.name: _annotated(f"run.{f.name}", v[f.name], _annotation(f))
                for f in dataclasses.fields(cls)
                if f.name in v
            }
        )
