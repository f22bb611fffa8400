"""The response budget (`SearchConfig.budget_tokens`): a `session_search` response cut to a number of o200k tokens.

The cut of a reference preset's response, and of a compact preset's without `budget_fill` (with one, the response is
built by harness/retrieval/floor.py over the fill's response, cut here): the results are taken in order, each whole
while the whole response still fits; one that does not fit goes out shortened where the preset says how (`shorten`:
the compact presets excerpt a long text to the reference's 280-character snippet), keeps the `context` messages that
fit, and is otherwise left out; the later, shorter ones still get their chance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.golang import go_json

Entry = dict[str, Any]


@dataclass(frozen=True)
class Fitted:
    """The results kept (a `context` possibly shortened), the position in the input of each, and what was left out
    (whole entries, and context messages of kept entries)."""

    results: list[Entry]
    positions: list[int]
    entries_left_out: int
    messages_left_out: int


def _size(value: Any, count: Callable[[str], int]) -> int:
    return count(go_json(value))


def fit(
    body: Callable[[list[Entry]], dict[str, Any]],
    results: list[Entry],
    budget: int,
    count: Callable[[str], int],
    shorten: Callable[[Entry], Entry | None] | None = None,
) -> Fitted:
    """`results` kept in order while `body(kept)` (the whole response) stays within `budget` tokens (`count`); an
    entry whose own text does not fit is kept as `shorten` gives it (None: it cannot be shortened) when that fits.

    Each entry and context message is sized alone (its JSON and the comma before it); the sum is then checked on the
    whole response and, while it is over (token merges across the joins), the last kept message or entry goes.
    """
    left = budget - _size(body([]), count)
    kept: list[Entry] = []
    positions: list[int] = []
    entries_out = messages_out = 0
    for pos, entry in enumerate(results):
        context = entry.get("context") or []
        bare = {k: v for k, v in entry.items() if k != "context"}
        cost = _size(bare, count) + 1
        if cost > left and shorten is not None and (short := shorten(bare)) is not None:
            bare, cost = short, _size(short, count) + 1
        if cost > left:
            entries_out += 1
            continue
        left -= cost
        if context:
            left -= _size({"context": []}, count)  # the key and its brackets
            shown = []
            for message in context:
                c = _size(message, count) + 1
                if c <= left:
                    shown.append(message)
                    left -= c
                else:
                    messages_out += 1
            # the entry's own key order (a whole entry goes out byte for byte as the preset wrote it)
            bare = {k: (shown if k == "context" else bare.get(k)) for k in entry if k != "context" or shown}
        kept.append(bare)
        positions.append(pos)
    while kept and _size(body(kept), count) > budget:
        i = len(kept) - 1
        if kept[i].get("context"):
            kept[i]["context"] = kept[i]["context"][:-1]
            if not kept[i]["context"]:
                del kept[i]["context"]
            messages_out += 1
        else:
            del kept[i], positions[i]
            entries_out += 1
    return Fitted(kept, positions, entries_out, messages_out)
