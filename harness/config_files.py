"""Where the Hydra config tree (`configs/`) is: the one place that finds it.

Run from a checkout (or an editable install), it is the checkout's top-level `configs/`; installed from a
wheel, the same files ship as the `lme_configs` package (setup.py maps it to `configs/`), found through
importlib.resources. The checkout comes first so that a worktree never reads another tree's configs.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def _config_dir() -> Path:
    checkout = Path(__file__).resolve().parents[1] / "configs"
    if (checkout / "config.yaml").is_file():
        return checkout
    installed = Path(str(resources.files("lme_configs")))
    if not (installed / "config.yaml").is_file():  # a broken install: say so once, not as a Hydra error later
        raise FileNotFoundError(f"{installed}: no config.yaml (the lme_configs package is incomplete; reinstall)")
    return installed


CONFIG_DIR: Path = _config_dir()
