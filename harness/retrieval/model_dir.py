"""Where a local embedding model lives: a directory, or an installed package shipping it under `<package>/model`.

Its own module so that the embedders and the distiller (which builds the embedded default) share it without
importing each other."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def resolve_model_dir(model: str) -> Path:
    """A directory path, or an installed package that ships its model under `<package>/model`."""
    p = Path(model)
    if p.is_dir():
        return p
    spec = importlib.util.find_spec(model.replace("-", "_"))
    if spec and spec.submodule_search_locations:
        cand = Path(list(spec.submodule_search_locations)[0]) / "model"
        if cand.is_dir():
            return cand
    raise FileNotFoundError(f"embedding model {model!r}: neither a directory nor an installed model package")
