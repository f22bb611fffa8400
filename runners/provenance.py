"""What produced a run: dataset hash, code version, packages, model, and the config with secrets redacted."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness import secrets
from harness.settings import judge_model

REPO = Path(__file__).resolve().parents[1]
PACKAGES = (
    "openai",
    "hydra-core",
    "pandas",
    "rouge-score",
    "sacrebleu",
    "bm25s",
    "tiktoken",
    "llama-cpp-python",
    "datasets",
    "numpy",
    "scipy",
    "matplotlib",
)
MODEL_KEYS = ("name", "kind", "model", "file", "sha256", "base_url", "n_ctx")


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except Exception:
        return None


def redacted_config(cfg: DictConfig) -> dict[str, Any]:
    c = OmegaConf.to_container(cfg, resolve=True)
    return secrets.mask_config(c, secrets.REGISTRY.values + tuple(secrets.config_secrets(cfg)))


def git_state() -> dict[str, Any]:
    """The code's commit and whether the tree had uncommitted changes (None each when git cannot tell)."""
    status = _git("status", "--porcelain")
    return {"sha": _git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None}


def provenance(cfg: DictConfig, data: dict[str, Any]) -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for p in PACKAGES:
        try:
            versions[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            versions[p] = None
    config = redacted_config(cfg)
    judge_spec, own_judge = judge_model(config)
    return {
        "dataset": data,
        "git": git_state(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": versions,
        "model": {k: v for k, v in config["model"].items() if k in MODEL_KEYS},
        # The judge's own model when configured, else null: the answer model judges (harness.settings.judge_model).
        "judge_model": {k: v for k, v in (judge_spec if own_judge else {}).items() if k in MODEL_KEYS} or None,
        "config": config,
    }


# The CPU features that decide how fast (and whether) the embedded llama.cpp build runs: the portable build
# targets x86-64-v3 (AVX2, FMA, F16C); AVX-512 and AMX are what a native build would use.
CPU_FLAG_PREFIXES = ("avx2", "fma", "f16c", "avx512", "amx", "avx_vnni")


def host_info(cpuinfo: str | None = None) -> dict[str, Any]:
    """The machine a run ran on: CPU model, the flags that matter to the embedded build, cores (logical CPUs of
    the machine, and those this process may use). run.json adds the embedded model's measured speed."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:  # the first processor's entry
            fields[key.strip()] = value.strip()
    flags = sorted(f for f in fields.get("flags", "").split() if f.startswith(CPU_FLAG_PREFIXES))
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    return {
        "cpu_model": fields.get("model name") or platform.processor() or None,
        "cpu_id": f"family {fields['cpu family']} model {fields['model']}" if "cpu family" in fields else None,
        "cpu_flags": flags,
        "cores": os.cpu_count(),
        "cores_usable": usable,
    }


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def invocations(
    prior: Mapping[str, Any] | None, git: Mapping[str, Any], started: str, pairs_run: int
) -> list[dict[str, Any]]:
    """run.json's `invocations`: one entry per command that ran pairs in this directory (the code at its start,
    when it started, how many (case, mode) pairs it ran or re-scored), so a directory resumed under other code
    says so. An earlier run.json without the list counts as one invocation of unknown start and size."""
    return history_of(prior) + [{"git": dict(git), "started": started, "pairs_run": pairs_run}]


def history_of(meta: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """A run.json's invocations (one of unknown start and size for a run.json written before the list)."""
    meta = meta or {}
    # an invocation stopped before its first record wrote nothing: it is no part of the history
    history = [dict(e) for e in meta.get("invocations") or [] if e.get("pairs_run") != 0]
    if not history and meta.get("git"):
        history = [{"git": meta["git"], "started": None, "pairs_run": None}]
    return history
