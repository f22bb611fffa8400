"""SkipRecent: how many of the newest events to leave out of a summary (they stay raw).

A SkipRecent is `Callable[[Sequence[Event]], int]` over the delta events, returning the
number of tail events to exclude. Whatever it returns, `safe_skip` moves the cut so a tool
call and its results are never separated (the cut never lands on a tool result).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.session.events import Event
from harness.session.tokens import TokenCounter, o200k_counter

SkipRecent = Callable[[Sequence[Event]], int]


def safe_skip(events: Sequence[Event], skip: int) -> int:
    """Clamp `skip` to [0, len] and widen it until the cut does not land on a tool result."""
    n = len(events)
    skip = max(0, min(int(skip), n))
    if skip == 0:
        return 0
    cut = n - skip
    while cut > 0 and events[cut].role == "tool":
        cut -= 1  # pull the assistant tool-call message (and its results) into the raw tail
    return n - cut


def round_starts(events: Sequence[Event]) -> list[int]:
    """Indices where a round begins: each user message (a round is a user turn plus its replies)."""
    return [i for i, e in enumerate(events) if e.role == "user"]


def skip_last_events(n: int) -> SkipRecent:
    """Keep the last `n` events raw (widened by `safe_skip` when it would split a tool pair)."""
    if n < 0:
        raise ValueError(f"skip_last_events: n must be >= 0, got {n}")
    return lambda events: safe_skip(events, n)


def keep_recent_rounds(
    rounds: int, max_tokens: int | None = None, token_counter: TokenCounter | None = None
) -> SkipRecent:
    """Keep the last `rounds` complete rounds raw, as many as fit in `max_tokens` (all-or-nothing
    per round, newest first). A round starts at a user message, so tool pairs stay together."""
    if rounds < 0:
        raise ValueError(f"keep_recent_rounds: rounds must be >= 0, got {rounds}")

    def skip(events: Sequence[Event]) -> int:
        counter = token_counter or o200k_counter()
        starts = round_starts(events)
        cut = len(events)
        used = 0
        for start in reversed(starts[-rounds:] if rounds else []):
            if max_tokens is not None:
                cost = counter.count_messages([e.to_message() for e in events[start:cut]])
                if used + cost > max_tokens:
                    break
                used += cost
            cut = start
        return safe_skip(events, len(events) - cut)

    return skip
