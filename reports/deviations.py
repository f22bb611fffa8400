"""Settings of a run that depart from the reference protocol, as one line each for the report header."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FORCED_FIRST_TOOL = "deviation: first tool call forced (tool_choice={choice} on the first turn); reference: auto"


def protocol_deviations(meta: Mapping[str, Any] | None) -> list[str]:
    """Lines such as the forced first search of summary_ondemand (local model configs set it), read from the
    resolved config in run.json; empty when the run follows the reference protocol."""
    modes = ((meta or {}).get("config") or {}).get("mode") or {}
    choice = (modes.get("summary_ondemand") or {}).get("first_tool_choice")
    if choice in (None, "", "auto"):
        return []
    return [FORCED_FIRST_TOOL.format(choice=choice)]
