"""A run directory's configuration snapshot (`.hydra/`), written when a run is accepted, never before.

Hydra would write `.hydra/` itself at job start, before the harness has checked anything: a run refused because
its directory holds records of another configuration replaced the snapshot of the run that made them. So Hydra's
own writing is off (`hydra.output_subdir: null`, configs/config.yaml) and the harness writes the same files when
the run starts (`RunSkeleton.start`, after the directory's fingerprint check): `config.yaml`, the configuration
that produced the directory's records (for a rescore: its source's, with the new scoring; commands/rescore.py),
and, under Hydra, `hydra.yaml` and `overrides.yaml` of the command that wrote it. Secrets are masked as in every
file the harness writes (a token that stays valid YAML: `***` would read as an alias).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness import secrets
from harness.records import RECORDS_FILE
from harness.storage import write_text_atomic
from runners.fingerprint import FINGERPRINT_FILE

SNAPSHOT_DIR = ".hydra"
CONFIG_FILE = "config.yaml"
_HYDRA_FILES = ("hydra.yaml", "overrides.yaml")
_MASK = "REDACTED"


def holds_run(run_dir: Path) -> bool:
    """Whether `run_dir` holds a run's results (records, or the fingerprint of the configuration that wrote them):
    a command that is refused there, or fails before it starts, leaves it as it was."""
    return (Path(run_dir) / RECORDS_FILE).exists() or (Path(run_dir) / FINGERPRINT_FILE).exists()


def _hydra_node(run_dir: Path) -> DictConfig | None:
    """Hydra's own configuration of the job writing `run_dir` (None when no Hydra job writes it: merge, the API)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    node: Any = HydraConfig.instance().cfg  # typed as HydraConf; it is the job's config holding `hydra:`
    with contextlib.suppress(Exception):
        if (
            isinstance(node, DictConfig)
            and Path(str(node.hydra.runtime.output_dir)).resolve() == Path(run_dir).resolve()
        ):
            return node
    return None


def write_snapshot(run_dir: Path, config: Any) -> Path:
    """Write RUN_DIR/.hydra/: `config` (a DictConfig or a plain mapping) as config.yaml, and the Hydra job's
    hydra.yaml and overrides.yaml when a Hydra job writes `run_dir`. The directory's path."""
    out = Path(run_dir) / SNAPSHOT_DIR
    out.mkdir(parents=True, exist_ok=True)
    files = {CONFIG_FILE: OmegaConf.to_yaml(config if OmegaConf.is_config(config) else OmegaConf.create(config))}
    node = _hydra_node(run_dir)
    if node is not None:
        files["hydra.yaml"] = OmegaConf.to_yaml(node)
        files["overrides.yaml"] = OmegaConf.to_yaml(node.hydra.overrides.task)
    for name in _HYDRA_FILES:
        if name not in files:  # an earlier command's, which no longer describes what wrote the records
            (out / name).unlink(missing_ok=True)
    for name, text in files.items():
        write_text_atomic(out / name, secrets.mask_text(text, _MASK))
    return out


def read_snapshot(run_dir: Path) -> DictConfig | None:
    """RUN_DIR/.hydra/config.yaml (None when there is none); ValueError naming the file when it is unreadable."""
    path = Path(run_dir) / SNAPSHOT_DIR / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        cfg = OmegaConf.load(path)
    except Exception as e:  # yaml and OmegaConf raise many types for one damaged file
        raise ValueError(f"{path}: unreadable ({type(e).__name__}: {e})") from None
    if not isinstance(cfg, DictConfig):
        raise ValueError(f"{path}: not a mapping")
    return cfg
