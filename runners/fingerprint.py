"""A run's configuration identity: which settings bear on results, and the directory check built on it.

A run directory may be resumed only by the configuration that wrote it (`fingerprint.json`). Settings that do
not change results (concurrency, timeouts, the cache, where a model is served) are left out of the identity.
"""

from __future__ import annotations

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


def fingerprint(cfg: DictConfig, *, legacy: bool = False) -> str:
    """Identity of the result-bearing configuration. Null settings are left out, so a release that adds an
    optional key (defaulting to null) does not orphan the run directories of the previous one. Endpoint URLs
    are not result-bearing (a restarted server on a new port is the same model; the model name is kept).
    Secrets are masked through `harness.secrets` (the one secret-key test).
    `legacy`: the identity before that change (URLs in, every `*api_key*` key masked, api_key_env included),
    still accepted so that older run directories resume; it is an identity, not a secret test."""
    c = _drop_nulls(OmegaConf.to_container(cfg, resolve=True))
    _key_env_as_key(c)
    for dotted in NON_RESULT_KEYS + (() if legacy else ENDPOINT_KEYS):
        node = c
        *parents, last = dotted.split(".")
        for p in parents:
            node = node.get(p, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(last, None)
    if legacy:
        _legacy_identity_mask(c)
    else:
        secrets.mask_config(c)
    return hashlib.sha256(json.dumps(c, sort_keys=True, default=str).encode()).hexdigest()[:16]


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


def check_fingerprint(run_dir: Path, fp: str, legacy: str | None = None) -> None:
    """Refuse a directory holding records of another configuration (read-only: nothing is written here)."""
    old = read_fingerprint(run_dir)
    if old is not None:
        if old not in (fp, legacy) and (Path(run_dir) / RECORDS_FILE).exists():
            raise RunConfigError(
                f"{run_dir}: holds records of a different configuration (fingerprint {old} != {fp}); "
                f"use another run.name or hydra.run.dir=... so results are never mixed"
            )
