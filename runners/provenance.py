"""What produced a run: dataset hash, code version, packages, model, and the config with secrets redacted."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness import secrets
from harness.run_meta import GitState, Host, Invocation, ModelRef, RunMeta
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
MODEL_KEYS = ("name", "kind", "model", "file", "sha256", "base_url", "n_ctx", "runtime")


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


def git_state() -> GitState:
    """The code's commit and whether the tree had uncommitted changes (None each when git cannot tell)."""
    status = _git("status", "--porcelain")
    return GitState(sha=_git("rev-parse", "HEAD"), dirty=bool(status) if status is not None else None)


def provenance(cfg: DictConfig, data: dict[str, Any]) -> RunMeta:
    versions: dict[str, str | None] = {}
    for p in PACKAGES:
        try:
            versions[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            versions[p] = None
    config = redacted_config(cfg)
    # The judge's own model when configured, else null: the answer model judges (harness.settings.judge_model).
    judge_spec, own_judge = judge_model(config)
    judge = {k: v for k, v in (judge_spec if own_judge else {}).items() if k in MODEL_KEYS}
    return RunMeta(
        dataset=data,
        git=git_state(),
        python=sys.version.split()[0],
        platform=platform.platform(),
        packages=versions,
        model=ModelRef.from_json({k: v for k, v in config["model"].items() if k in MODEL_KEYS}),
        judge_model=ModelRef.from_json(judge) if judge else None,
        config=config,
    )


# The CPU features that decide how fast (and whether) the embedded llama.cpp build runs: the portable build
# targets x86-64-v3 (AVX2, FMA, F16C); AVX-512 and AMX are what a native build would use.
CPU_FLAG_PREFIXES = ("avx2", "fma", "f16c", "avx512", "amx", "avx_vnni")


def host_info(cpuinfo: str | None = None) -> Host:
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
    return Host(
        cpu_model=fields.get("model name") or platform.processor() or None,
        cpu_id=f"family {fields['cpu family']} model {fields['model']}" if "cpu family" in fields else None,
        cpu_flags=flags,
        cores=os.cpu_count(),
        cores_usable=usable,
    )


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def invocations(prior: RunMeta, git: GitState, started: str, pairs_run: int) -> list[Invocation]:
    """run.json's `invocations`: one entry per command that ran pairs in this directory (the code at its start,
    when it started, how many (case, mode) pairs it ran or re-scored), so a directory resumed under other code
    says so. An earlier run.json without the list counts as one invocation of unknown start and size."""
    return prior.history() + [Invocation(git=git.copy(), started=started, pairs_run=pairs_run)]
