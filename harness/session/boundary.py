"""The summary value types: a summary is a *view* over events, and its boundary says which ones."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SummaryBoundary:
    """What a summary covers: every event up to and including `last_event_id` (at `cutoff_at`)."""

    version: int
    filter_key: str
    cutoff_at: float  # timestamp of the last summarized event (seconds since the epoch)
    last_event_id: str | None


@dataclass(frozen=True)
class Summary:
    text: str
    boundary: SummaryBoundary
    updated_at: float
    topics: tuple[str, ...] = field(default_factory=tuple)


def covers(filter_key: str, child_key: str) -> bool:
    """Filter keys are hierarchical ("a/b" is under "a"); the empty key covers everything."""
    if filter_key == "" or filter_key == child_key:
        return True
    return child_key.startswith(filter_key.rstrip("/") + "/")
