"""Lines for the report header: settings of a run that depart from the reference protocol, and records written
by code of more than one commit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.run_meta import GitState, RunMeta

FORCED_FIRST_TOOL = "deviation: first tool call forced (tool_choice={choice} on the first turn); reference: auto"


def protocol_deviations(meta: RunMeta | Mapping[str, Any] | None) -> list[str]:
    """Lines such as the forced first search of summary_ondemand (local model configs set it), read from the
    resolved config in run.json; empty when the run follows the reference protocol."""
    choice = RunMeta.of(meta).config_at("mode", "summary_ondemand", "first_tool_choice")
    if choice in (None, "", "auto"):
        return []
    return [FORCED_FIRST_TOOL.format(choice=choice)]


def mixed_code_note(meta: RunMeta | Mapping[str, Any]) -> str | None:
    """One line when the records of a run directory come from invocations at different commits."""
    history = RunMeta.of(meta).invocations or []
    gits = [e.git or GitState() for e in history]
    n_commits = len({str(g.sha) for g in gits})
    if n_commits < 2:
        return None
    parts = ", ".join(
        f"{str(g.sha)[:10]}{' (dirty)' if g.dirty else ''} ({e.pairs_run if e.pairs_run is not None else '?'} pairs)"
        for e, g in zip(history, gits)
    )
    dirty = " (some dirty)" if any(g.dirty for g in gits) else ""
    return f"records written by {len(history)} invocations at {n_commits} commits{dirty}: {parts}"


def header_notes(meta: RunMeta | Mapping[str, Any] | None) -> list[str]:
    """Every line the report header stresses: a partial merge, protocol deviations, then a mixed-code note."""
    meta = RunMeta.of(meta)
    note = mixed_code_note(meta)
    return partial_merge_note(meta) + protocol_deviations(meta) + ([f"provenance: {note}"] if note else [])


def partial_merge_note(meta: RunMeta | Mapping[str, Any] | None) -> list[str]:
    """`merge --allow-partial` of shards that did not finish: the run is not the whole selection."""
    missing = RunMeta.of(meta).merge_missing or []
    if not missing:
        return []
    shown = ", ".join(f"{q} / {m}" for q, m in missing[:5]) + (", ..." if len(missing) > 5 else "")
    return [f"PARTIAL merge: {len(missing)} (case, mode) pair(s) of the run have no record ({shown})"]
