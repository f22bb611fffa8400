"""A composed config as dotted keys (`memory.turns_per_add`), the form the reports compare runs' configs in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of `obj` under its dotted key; a non-mapping is one leaf."""
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: obj}
