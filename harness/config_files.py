"""Where the Hydra config tree (`configs/`) is: the one place that finds it.

Run from a checkout (or an editable install), it is the checkout's top-level `configs/`; installed from a
wheel, the same files ship as the `lme_configs` package (pyproject.toml maps it to `configs/`), found through
importlib.resources. The checkout comes first so that a worktree never reads another tree's configs.
"""

from __future__ import annotations

from pathlib import Path

CONFIG_DIR: Path = Path(__file__).resolve().parents[1] / "configs"
