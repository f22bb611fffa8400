"""A compact preset's response at a budget: everything `budget_fill`'s response (bm25's) holds at that budget, then the
preset's own hits in what is left (issue 40; docs/retrieval.md "The response budget").

Why it is never below bm25 at a budget B, for any gold turns: bm25's response at B (R) is taken as it is; every turn
whose text is in R's texts is shown whole in the floor (the hit's own snippet, or a context message), and every hit of
R is a hit of the floor. The floor is never cut: it is sized first and the preset's own entries get what is left. The
hits are ordered so that the first `first` hits hold R's first `first`: the preset's own entries lead only while they
leave that room, then the floor in R's order, then the rest of the preset's own. So a gold turn whole in R is whole
here (evidence within B), a gold hit of R is a hit here (evidence hit), and one among R's first k hits is among the
first k here for every k ≥ `first` (@k). `holds` checks exactly this against R before the response goes out; the
caller sends R itself where it does not hold (a token count is not additive over JSON pieces), which ties.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.golang import go_json

Entry = dict[str, Any]
Key = tuple[str, str]  # (session id, event id): one turn
FIRST = 5  # @5 is the ranking measure at a budget (commands/retrieval_budgets.py); the claim holds for every k ≥ it


@dataclass(frozen=True)
class Message:
    """A turn shown whole as a context message of a floor entry."""

    key: Key
    message: Entry


@dataclass(frozen=True)
class FloorHit:
    """One hit of the fill's response: its fields before the text, its whole text where the fill's response shows it
    whole (else `excerpt` stands for it), and the other turns that response shows whole, attached here."""

    key: Key
    fields: Entry  # event_id, role, score
    session_id: str | None  # another session's hit names its session
    text: str | None
    excerpt: str | None
    context: tuple[Message, ...] = ()

    def render(self, shown: set[Key]) -> Entry:
        """The entry, without the turns an own entry already shows whole (`shown`)."""
        out = dict(self.fields)
        snippet = None if self.key in shown else (self.text if self.text is not None else self.excerpt)
        if snippet:
            out["snippet"] = snippet
        if self.session_id is not None:
            out["session_id"] = self.session_id
        context = [m.message for m in self.context if m.key not in shown]
        if context:
            out["context"] = context
        return out

    def turns(self) -> set[Key]:
        """The turns this entry shows whole when nothing is left out of it."""
        return {m.key for m in self.context} | ({self.key} if self.text is not None else set())


@dataclass(frozen=True)
class Own:
    """One entry of the preset's own response: the turns it shows whole and its shortened form (None: none)."""

    key: Key
    entry: Entry
    whole: frozenset[Key]
    short: Entry | None


@dataclass(frozen=True)
class Composed:
    results: list[Entry]
    keys: list[Key]  # the hit of each result
    floor_entries: int
    own_left_out: int


def compose(
    body: Callable[[list[Entry]], dict[str, Any]],
    own: Sequence[Own],
    floor: Sequence[FloorHit],
    budget: int,
    count: Callable[[str], int],
    first: int = FIRST,
) -> Composed | None:
    """The floor whole, then each own entry in its order as it is, else shortened, where what is left holds it (a turn
    it shows whole leaves the floor, so an entry that agrees with the fill costs little); None where the floor alone
    does not fit `budget` tokens (`count`). Each entry is sized alone (its JSON and the comma before it); the whole
    response is then counted and, while it is over, the last kept own entry goes."""

    def size(entry: Entry) -> int:
        return count(go_json(entry)) + 1

    shown: set[Key] = set()
    floor_sizes = [size(f.render(shown)) for f in floor]
    left = budget - count(go_json(body([]))) - sum(floor_sizes)
    if left < 0:
        return None
    kept: dict[int, tuple[Entry, frozenset[Key]]] = {}
    for i, o in enumerate(own):
        for entry, whole in ((o.entry, o.whole), (o.short, frozenset[Key]())):
            if entry is None:
                continue
            new = whole - shown
            changed = {j: size(f.render(shown | new)) for j, f in enumerate(floor) if f.turns() & new}
            cost = size(entry) - sum(floor_sizes[j] - s for j, s in changed.items())
            if cost <= left:
                left -= cost
                kept[i] = (entry, whole)
                shown |= new
                floor_sizes = [changed.get(j, s) for j, s in enumerate(floor_sizes)]
                break
    while True:
        results, keys, n_floor = _assemble(own, kept, floor, first)
        if count(go_json(body(results))) <= budget:
            return Composed(results, keys, n_floor, len(own) - len(kept))
        if not kept:
            return None
        del kept[max(kept)]


def _assemble(
    own: Sequence[Own], kept: dict[int, tuple[Entry, frozenset[Key]]], floor: Sequence[FloorHit], first: int
) -> tuple[list[Entry], list[Key], int]:
    """The kept own entries that leave room in the first `first` hits for the floor's first `first`, then the floor in
    its order (an entry whose hit leads and that adds nothing left out), then the rest of the own entries."""
    shown = {k for _, whole in kept.values() for k in whole}
    leading = list(dict.fromkeys(f.key for f in floor))[:first]
    room = first - len(leading)
    order = sorted(kept)
    lead: list[int] = []
    for i in order:
        if own[i].key not in leading:
            if room == 0:
                break
            room -= 1
        lead.append(i)
    lead_keys = {own[i].key for i in lead}
    results = [kept[i][0] for i in lead]
    keys = [own[i].key for i in lead]
    n_floor = 0
    for f in floor:
        entry = f.render(shown)
        if f.key in lead_keys and "snippet" not in entry and "context" not in entry:
            continue
        results.append(entry)
        keys.append(f.key)
        n_floor += 1
    rest = order[len(lead) :]
    results += [kept[i][0] for i in rest]
    keys += [own[i].key for i in rest]
    return results, keys, n_floor


def shown_text(results: Iterable[Entry]) -> str:
    """The texts of a response's results as the retrieval evaluation reads them: each snippet, then its context
    messages, joined by newlines (a turn is whole in the response when its text is in this)."""
    texts: list[str] = []
    for r in results:
        texts.append(r.get("snippet", ""))
        texts += [m.get("content", "") for m in r.get("context") or ()]
    return "\n".join(t for t in texts if t)


def holds(
    mine: Sequence[Entry],
    my_hits: Sequence[Key],
    theirs: Sequence[Entry],
    their_hits: Sequence[Key],
    turns: Iterable[str],
    first: int = FIRST,
) -> str | None:
    """Why `mine` is not at or above `theirs` for some gold turns, or None: every turn text of `turns` in their texts
    is in mine, and their first k hits are among my first k for every k ≥ `first` (so every hit of theirs is mine)."""
    blob_mine, blob_theirs = shown_text(mine), shown_text(theirs)
    for t in turns:
        if t and t in blob_theirs and t not in blob_mine:
            return f"a turn whole in the fill's response is not whole here: {t[:60]!r}"
    a, b = list(dict.fromkeys(my_hits)), list(dict.fromkeys(their_hits))
    for k in range(first, max(len(a), len(b), first) + 1):
        if not set(b[:k]) <= set(a[:k]):
            return f"a hit among the fill's first {k} is not among the first {k} here"
    return None
