"""A run's configuration identity: which settings bear on results, and the directory check built on it.

A run directory may be resumed only by the configuration that wrote it (`fingerprint.json`). Settings that do
not change results (concurrency, timeouts, the cache, where a model is served) are left out of the identity.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness import secrets
from harness.records import RECORDS_FILE
from harness.storage import write_text_atomic
from runners.setting_rules import ENDPOINT_KEYS, RunConfigError, non_result_keys

# Keys that do not change results (a run directory may be resumed when only these differ): from the declarations.
NON_RESULT_KEYS = non_result_keys()
FINGERPRINT_FILE = "fingerprint.json"


def _drop_nulls(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_nulls(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_nulls(v) for v in obj]
    return obj


# Identity versions, newest first. 4: every URL-valued setting is left out, whatever its key (`memory.url` too),
# besides the named endpoint keys. 3: a declared component's setting at its declared default is left out (a
# preset that restates a default, or one that does not, is the same configuration). 2: every value as given.
# 1 (`legacy`): as 2, with endpoint URLs in and every `*api_key*` key masked. A run directory written under an
# earlier version still resumes (`earlier_fingerprints`); it is an identity, not a secret test.
IDENTITY = 4
EARLIER_IDENTITIES = (3, 2, 1)


def _declared_defaults() -> dict[str, dict[str, Any]]:
    """`_target_` -> its dataclass's field defaults, for the components whose settings are declared with defaults
    (harness.settings)."""
    from harness.retrieval.config import SearchConfig

    return {f"{SearchConfig.__module__}.{SearchConfig.__qualname__}": _field_defaults(SearchConfig)}


def _rewrite_components(obj: Any, declared: dict[str, dict[str, Any]], rewrite: Any) -> Any:
    """`obj` with every node instantiating a declared component replaced by `rewrite(node, its defaults)`."""
    if isinstance(obj, list):
        return [_rewrite_components(v, declared, rewrite) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {k: _rewrite_components(v, declared, rewrite) for k, v in obj.items()}
    target = obj.get("_target_")
    defaults = declared.get(target) if isinstance(target, str) else None
    return out if defaults is None else rewrite(out, defaults)


def _field_defaults(cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def _same_value(default: Any, value: Any) -> bool:
    """Equal as the dataclass would hold it (1 and 1.0 are one float setting; True is not 1)."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool) and default == value
    return bool(default == value)


# The defaults each shipped retrieval preset (by its `name`, itself always stated) restated until identity
# version 3: the earlier identities hash them back in, so a run directory written then is found again.
_FORMER_TRPC = ("name", "default_mode", "visible_events", "lexical_fallback", "response_style", "wire_exact_schema")
_FORMER_PRESET_KEYS: dict[str, tuple[str, ...]] = {
    "bm25": ("name", "stopwords", "response_style", "wire_exact_schema"),
    "default": ("name", "stopwords", "default_mode", "alpha", "budget_chars", "hit_chars"),
    "hybrid": (
        "name",
        "stopwords",
        "default_mode",
        "fusion",
        "candidate_ratio",
        "rrf_k",
        "response_style",
        "wire_exact_schema",
    ),
    "speaker_neutral": ("name", "stopwords", "default_mode", "alpha", "budget_chars", "hit_chars", "recall_cues"),
    "trpc_parity": _FORMER_TRPC,
    "trpc_parity_openai": _FORMER_TRPC,
}


def _canonical_components(obj: Any, version: int) -> Any:
    """Each declared component's node without the settings at their default; before version 3, with the defaults
    its shipped preset restated then (a shipped preset's node as its file read)."""

    def rewrite(node: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in node.items() if not (k in defaults and _same_value(defaults[k], v))}
        if version < 3:
            for key in _FORMER_PRESET_KEYS.get(out.get("name", defaults["name"]), ()):
                out.setdefault(key, defaults[key])
        return out

    return _rewrite_components(obj, _declared_defaults(), rewrite)


def fingerprint(cfg: DictConfig, *, version: int = IDENTITY) -> str:
    """Identity of the result-bearing configuration (`identity`, hashed). Null settings are left out, so a
    release that adds an optional key (defaulting to null) does not orphan the run directories of the previous
    one; so are a declared component's settings at their default (version 3). Endpoint URLs are not
    result-bearing (a restarted server on a new port is the same model, or the same memory service; the model name
    is kept): since version 4 every URL-valued setting, recognised by its value (`harness.secrets.is_endpoint`).
    Secrets are masked through `harness.secrets` (the one secret-key test). `version`: an earlier identity (`IDENTITY`
    above), to find older run directories."""
    c = identity(OmegaConf.to_container(cfg, resolve=True), version=version)
    return hashlib.sha256(json.dumps(c, sort_keys=True, default=str).encode()).hexdigest()[:16]


def differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    """The dotted keys at which two identities (`identity`) differ, in key order: what to name when two
    configurations are not the same run (never their values: a value may be anything)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            out += differences(a.get(k), b.get(k), f"{prefix}.{k}" if prefix else str(k))
        return out
    return [] if a == b else [prefix or "(the whole configuration)"]


def identity(resolved: Any, *, version: int = IDENTITY) -> dict[str, Any]:
    """The result-bearing part of a resolved configuration (`OmegaConf.to_container(cfg, resolve=True)`) as
    `fingerprint` hashes it: a plain mapping, secrets masked."""
    if version not in (IDENTITY, *EARLIER_IDENTITIES):
        raise ValueError(f"fingerprint version {version!r}: known {IDENTITY, *EARLIER_IDENTITIES}")
    legacy = version == 1
    c = _drop_nulls(resolved)
    c = _canonical_components(c, version)
    _key_env_as_key(c)
    for dotted in NON_RESULT_KEYS + (() if legacy else ENDPOINT_KEYS):
        node = c
        *parents, last = dotted.split(".")
        for p in parents:
            node = node.get(p, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(last, None)
    if version >= 4:
        c = _without_endpoints(c)
    if legacy:
        _legacy_identity_mask(c)
    else:
        secrets.mask_config(c)
    return c


def _without_endpoints(obj: Any) -> Any:
    """`obj` without its URL-valued settings (where a model or service is served, not which one)."""
    if isinstance(obj, dict):
        return {k: _without_endpoints(v) for k, v in obj.items() if not secrets.is_endpoint(v)}
    if isinstance(obj, list):
        return [_without_endpoints(v) for v in obj]
    return obj


def _key_env_as_key(c: dict[str, Any]) -> None:
    """A model's `api_key_env: VAR` hashes as the `api_key` it replaced (masked when VAR is set, absent when not):
    the shipped model configs moved from `api_key: ${oc.env:VAR,null}` to it, and their runs keep resuming."""
    nodes = [c.get("model"), (c.get("judge") or {}).get("endpoint") if isinstance(c.get("judge"), dict) else None]
    for node in nodes:
        if isinstance(node, dict) and "api_key_env" in node:
            var = node.pop("api_key_env")
            if "api_key" not in node and os.environ.get(str(var)):
                node["api_key"] = "***"


def _legacy_identity_mask(obj: Any) -> None:
    """The masking older releases hashed (kept only to recompute their fingerprints)."""
    if isinstance(obj, dict):
        for k in list(obj):
            if "api_key" in k.lower() and obj[k]:
                obj[k] = "***"
            else:
                _legacy_identity_mask(obj[k])
    elif isinstance(obj, list):
        for v in obj:
            _legacy_identity_mask(v)


def read_fingerprint(run_dir: Path) -> str | None:
    """The fingerprint recorded in `run_dir` (None: none recorded); RunConfigError naming a corrupt file."""
    path = Path(run_dir) / FINGERPRINT_FILE
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError) as e:
        doc = e
    if not isinstance(doc, dict) or not isinstance(doc.get("fingerprint"), str):
        why = f"{type(doc).__name__}: {doc}" if isinstance(doc, Exception) else "no 'fingerprint' string in it"
        raise RunConfigError(
            f"{path}: corrupt ({why}); it names the configuration this directory's records were written with, "
            f"so nothing is written there until it is restored (run.json's 'fingerprint' holds the same value) "
            f"or another directory is used"
        )
    return doc["fingerprint"]


def write_fingerprint(run_dir: Path, fp: str, **extra: Any) -> None:
    write_text_atomic(Path(run_dir) / FINGERPRINT_FILE, json.dumps({"fingerprint": fp, **extra}))


def earlier_fingerprints(cfg: DictConfig) -> tuple[str, ...]:
    """The identities earlier releases computed for this configuration (their run directories still resume), other
    than its current one (a configuration with no URL-valued setting but the named endpoints has the same identity
    under versions 3 and 4)."""
    current = fingerprint(cfg)
    return tuple(fp for v in EARLIER_IDENTITIES if (fp := fingerprint(cfg, version=v)) != current)


def check_fingerprint(run_dir: Path, fp: str, earlier: tuple[str, ...] = ()) -> None:
    """Refuse a directory holding records of another configuration (read-only: nothing is written here).
    `earlier`: this configuration's identities under earlier versions, accepted as the same configuration."""
    old = read_fingerprint(run_dir)
    if old is not None:
        if old != fp and old not in earlier and (Path(run_dir) / RECORDS_FILE).exists():
            raise RunConfigError(
                f"{run_dir}: holds records of a different configuration (fingerprint {old} != {fp}); "
                f"use another run.name or hydra.run.dir=... so results are never mixed"
            )
