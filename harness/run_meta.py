"""Run metadata (`run.json`): what produced a run directory's records, typed — the one place its schema is declared.

`RunMeta` is what `run` writes before the first pair and rewrites as pairs are recorded, what `rescore` and
`merge` derive from their sources, and what the reports read. Its fields, in the order a run writes them:

  dataset        {source, sha256, ...}   the loader's provenance of the cases (as the loader gives it)
  git            GitState                the code at the start of the run: {sha, dirty}
  python, platform  str                  interpreter version, platform string
  packages       {package: version | None}
  model          ModelRef                the answer model: the config's {name, kind, model, file, sha256, base_url,
                                         n_ctx} keys that it sets; judge_model the judge's own (null: the answer
                                         model judges)
  config         {...}                   the resolved config, secrets masked
  host           Host                    {cpu_model, cpu_id, cpu_flags, cores, cores_usable, model_speed?}
  retrieval      {...}?                  the retriever's description (preset, embedder identity)
  metrics        [spec]?                 the scorers' metric declarations (harness/scoring/base.py `specs_json`)
  invocations    [Invocation]?           one per command that ran pairs here: {git, started, pairs_run, run_dir?}
  state, updated                         "running" | "finished" | "interrupted" | "stopped" | "failed"; UTC time
  fingerprint    str                     the configuration's identity (runners/fingerprint.py)
  records        str                     the records file
  elapsed_s, cases_elapsed_s, skipped_already_done, llm_stats
  merge only:    merged_from [dir], shards [str | None], merge_missing [[question_id, mode]]?
  rescore only:  rescore RescoreInfo     {source, source_fingerprint, elapsed_s, judge_stats, git?, started?}
  any other key is kept as is (`extra`) and written back unchanged.

A file reads back to the same bytes: each object remembers the keys it was read with, in their order, and a key
assigned later is appended, as a dict's would be (`run.json` is rewritten by `rescore` and `merge` from their
source's, and only the keys they set move). A key is written when it was read, assigned, or is set at
construction (`None` is omitted then, except for the fields a writer always states: `_ALWAYS`).

Versions: `SCHEMA_VERSION` is 1 and is not written (a file with no `schema_version` key is version 1: every
run.json written so far). Files of earlier releases lack keys (no `invocations`, `metrics` or `host`): they read
as version 1 with those fields None; `RunMeta.history` gives their single invocation. A file of a later version
is refused with one error naming it. `migrate` is the one place such rules live.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

from harness import secrets
from harness.storage import read_json_object, write_text_atomic

RUN_META_FILE = "run.json"
SCHEMA_VERSION = 1


class RunMetaError(ValueError):
    """A run.json that cannot be read as run metadata (its path or key named)."""


@dataclass
class _Doc:
    """A JSON object with typed fields that writes back the keys it holds, in their order (see the module)."""

    extra: dict[str, Any] = field(default_factory=dict, kw_only=True)  # keys this version does not know
    _keys: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    _ALWAYS: ClassVar[tuple[str, ...]] = ()  # written even when None by a newly built object

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("extra", "_keys"))

    @classmethod
    def _nested(cls) -> Mapping[str, tuple[type[_Doc], bool]]:
        """field -> (the object type it holds, whether a list of them), read from the fields' annotations."""
        return _nested_fields(cls)

    def __post_init__(self) -> None:
        self._keys = [k for k in self._names() if getattr(self, k) is not None or k in self._ALWAYS]

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        keys = self.__dict__.get("_keys")
        if keys is not None and name not in keys and name in self._names():
            keys.append(name)  # an assigned key is written, after those already held (as in a dict)

    @property
    def empty(self) -> bool:
        """The object holds no key (for a RunMeta: no run.json, or an empty one)."""
        return not self._keys and not self.extra

    def drop(self, name: str) -> None:
        """Remove a key (as `dict.pop`): the field is None and not written."""
        object.__setattr__(self, name, None)
        if name in self._keys:
            self._keys.remove(name)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], where: str = "run.json") -> Self:
        """The object `raw` holds; `where` names it in the error about a key that holds no object."""
        names, nested = set(cls._names()), cls._nested()
        kw: dict[str, Any] = {}
        for k, v in raw.items():
            if k not in names:
                continue
            kind, many = nested.get(k, (None, False))
            if v is None or kind is None:
                kw[k] = v
            elif not many:
                kw[k] = kind.from_json(_obj(v, f"{where} '{k}'"), f"{where} '{k}'")
            else:
                if not isinstance(v, list):
                    raise RunMetaError(f"{where} '{k}': a JSON {type(v).__name__}, not a list")
                at = [f"{where} '{k}'[{i}]" for i in range(len(v))]
                kw[k] = [kind.from_json(_obj(e, w), w) for e, w in zip(v, at)]
        obj = cls(**kw, extra={k: v for k, v in raw.items() if k not in names})
        object.__setattr__(obj, "_keys", list(raw))
        return obj

    def copy(self) -> Self:
        """A deep copy that writes the same keys."""
        return copy.deepcopy(self)

    def to_json(self) -> dict[str, Any]:
        """The JSON object: the keys held, in their order, then any extra key added since."""
        names = set(self._names())
        out: dict[str, Any] = {}
        for k in self._keys:
            if k in names:
                out[k] = _dump(getattr(self, k))
            elif k in self.extra:
                out[k] = self.extra[k]
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out


_NESTED_FIELDS: dict[type[_Doc], Mapping[str, tuple[type[_Doc], bool]]] = {}  # per class, computed once


def _nested_fields(cls: type[_Doc]) -> Mapping[str, tuple[type[_Doc], bool]]:
    """The fields of `cls` annotated `D | None` or `list[D] | None` for an object type D: the one statement of which
    keys hold objects is the field's type."""
    if cls in _NESTED_FIELDS:
        return _NESTED_FIELDS[cls]
    hints = typing.get_type_hints(cls)
    out: dict[str, tuple[type[_Doc], bool]] = {}
    for name in cls._names():
        hint = hints[name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        for a in args:
            if isinstance(a, type) and issubclass(a, _Doc):
                out[name] = (a, False)
            elif typing.get_origin(a) is list:
                (item,) = typing.get_args(a)
                if isinstance(item, type) and issubclass(item, _Doc):
                    out[name] = (item, True)
    _NESTED_FIELDS[cls] = out
    return out


def _obj(v: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise RunMetaError(f"{where}: a JSON {type(v).__name__}, not an object")
    return v


def _dump(v: Any) -> Any:
    if isinstance(v, _Doc):
        return v.to_json()
    if isinstance(v, list):
        return [_dump(e) for e in v]
    return v


@dataclass
class GitState(_Doc):
    """The code's commit and whether the tree had uncommitted changes (None each when git cannot tell)."""

    sha: str | None = None
    dirty: bool | None = None
    _ALWAYS = ("sha", "dirty")


@dataclass
class ModelRef(_Doc):
    """A model as run.json names it: the config keys of runners/provenance.py `MODEL_KEYS` that are set."""

    name: str | None = None
    kind: str | None = None
    model: str | None = None
    file: str | None = None
    sha256: str | None = None
    base_url: str | None = None
    n_ctx: int | None = None
    runtime: str | None = None  # set only where the config names one (model.runtime=xllamacpp: the main job)


@dataclass
class Host(_Doc):
    """The machine a run ran on (runners/provenance.py `host_info`), and the embedded model's measured speed."""

    cpu_model: str | None = None
    cpu_id: str | None = None
    cpu_flags: list[str] | None = None
    cores: int | None = None
    cores_usable: int | None = None
    model_speed: dict[str, Any] | None = None  # {endpoint name: llama.cpp's measured speed}
    _ALWAYS = ("cpu_model", "cpu_id", "cpu_flags", "cores", "cores_usable")


@dataclass
class Invocation(_Doc):
    """One command that ran pairs in a run directory: its code, start, and how many pairs it ran (None: unknown)."""

    git: GitState | None = None
    started: str | None = None
    pairs_run: int | None = None
    run_dir: str | None = None  # a merge's: the shard directory it ran in
    _ALWAYS = ("git", "started", "pairs_run")


@dataclass
class RescoreInfo(_Doc):
    """What a rescore adds: its source, the judge's calls, and the code that scored."""

    source: str | None = None
    source_fingerprint: str | None = None
    elapsed_s: float | None = None
    judge_stats: dict[str, Any] | None = None
    git: GitState | None = None
    started: str | None = None
    _ALWAYS = ("source", "source_fingerprint", "elapsed_s", "judge_stats")


@dataclass
class RunMeta(_Doc):
    """run.json (fields: the module docstring)."""

    dataset: dict[str, Any] | None = None
    git: GitState | None = None
    python: str | None = None
    platform: str | None = None
    packages: dict[str, str | None] | None = None
    model: ModelRef | None = None
    judge_model: ModelRef | None = None
    config: dict[str, Any] | None = None
    host: Host | None = None
    retrieval: dict[str, Any] | None = None
    metrics: list[dict[str, Any]] | None = None
    invocations: list[Invocation] | None = None
    state: str | None = None
    updated: str | None = None
    fingerprint: str | None = None
    records: str | None = None
    elapsed_s: float | None = None
    cases_elapsed_s: float | None = None
    skipped_already_done: int | None = None
    llm_stats: dict[str, Any] | None = None
    merged_from: list[str] | None = None
    shards: list[str | None] | None = None
    merge_missing: list[list[str]] | None = None
    rescore: RescoreInfo | None = None
    schema_version: int = field(default=SCHEMA_VERSION, kw_only=True)
    _ALWAYS = ("judge_model",)  # provenance states it: null when the answer model judges

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return tuple(n for n in super()._names() if n != "schema_version")

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], where: str = RUN_META_FILE) -> Self:
        d, version = migrate(raw, where)
        obj = super().from_json(d, where)
        object.__setattr__(obj, "schema_version", version)
        return obj

    @classmethod
    def of(cls, meta: RunMeta | Mapping[str, Any] | None) -> RunMeta:
        """`meta` typed: a RunMeta as is, a run.json's object read, None empty (report functions take any)."""
        if isinstance(meta, RunMeta):
            return meta
        return RunMeta.from_json(meta or {})

    @property
    def dataset_sha256(self) -> str | None:
        return (self.dataset or {}).get("sha256")

    def history(self) -> list[Invocation]:
        """The invocations that wrote records here (copies); a run.json written before the list counts as one
        invocation of unknown start and size. One stopped before its first record wrote nothing: left out."""
        history = [e.copy() for e in self.invocations or [] if e.pairs_run != 0]
        if not history and self.git is not None and not self.git.empty:
            history = [Invocation(git=self.git, started=None, pairs_run=None)]
        return history

    def config_at(self, *path: str) -> Any:
        """A value of the resolved config (None when a key on the way is missing)."""
        node: Any = self.config or {}
        for k in path:
            node = node.get(k) if isinstance(node, Mapping) else None
        return node

    def dumps(self) -> str:
        """run.json's text (as every writer has written it: indented by 2, non-JSON values as str)."""
        return json.dumps(self.to_json(), indent=2, default=str)


def migrate(raw: Mapping[str, Any], where: str = RUN_META_FILE) -> tuple[dict[str, Any], int]:
    """A run.json of any earlier version in today's shape, and its version (see the module docstring); a copy."""
    d = dict(raw)
    version = d.pop("schema_version", 1)
    if not isinstance(version, int) or version < 1 or version > SCHEMA_VERSION:
        raise RunMetaError(
            f"{where}: schema_version {version!r} is not one this harness reads (1..{SCHEMA_VERSION}); "
            f"a newer harness wrote it"
        )
    return d, version


def write_run_meta(run_dir: str | Path, meta: RunMeta) -> Path:
    """Write run.json atomically (a reader never sees half a file), any secret value masked."""
    path = Path(run_dir) / RUN_META_FILE
    write_text_atomic(path, secrets.redact(meta.dumps()))
    return path


def read_run_meta(run_dir: str | Path) -> RunMeta:
    """The run.json of a run directory (an empty RunMeta when there is none); RunMetaError naming the file when it
    is not a JSON object."""
    path = Path(run_dir) / RUN_META_FILE
    if not path.exists():
        return RunMeta.from_json({})
    return RunMeta.from_json(read_json_object(path, RunMetaError), str(path))
