"""The run's cases as a memory contestant knows them: whose session an id handed back by a provider names, and whose
history a returned text was copied from. A unit must only ever return its own case's memory; an item from another
case's history is a cross-unit leak, counted and never credited (harness/memory/contestant.py).

By id: every session id a provider sees is opaque (harness/memory/ids.py) and different in every case, so a
provenance id names exactly one (case, dataset session), or none of this run's.

By text (items without provenance, or whose provenance says otherwise): an item is copied from another case when it
shares with that case's history at least `MIN_RUNS` runs of `WINDOW` consecutive content words (lower-cased
letter/digit runs, the function words of harness/memory/gold.py left out) that the own case's history does not hold.
Common phrases are no evidence of a copy: a run found in more than `COMMON` distinct turns of the run ("glad I could
help, feel free to ask ...") is left out. To keep the index small on long haystacks, only the runs that start at an
anchor word are compared: a word whose CRC-32 is divisible by `ANCHOR_EVERY` (about one word in four, the same words
on both sides), so a copied span of a few dozen words is found whatever its offset; a span of fewer than about 20
content words may not be, and a paraphrase (a fact extracted from another case's turn) is not. On 500 oracle cases,
every turn checked as an item of its own case was never flagged, and of the turns checked as items of a case that
does not hold them, 99 % of those with 20 content words or more were found (`tests/harness/memory/test_memory_integrity.py`).

The index holds every distinct turn text of the run once, with the cases holding it: the pipeline hands the run's
cases over before the first (`bind_cases`; a case is also added when it is ingested), and it is built once, outside
any case's timing: for the 215 cases of `longmemeval_s_dev` (93,769 distinct turns, 2.4 M runs) it took 22 s and
30 MB on a 2-core Zen host (`RunCases(...).add_cases(cases); .index()`, measured with /usr/bin/time).
"""

from __future__ import annotations

import threading
import zlib
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.memory.gold import STOPWORDS
from harness.memory.ids import RunIds
from harness.scoring.lexical import tokenize

WINDOW = 8
ANCHOR_EVERY = 4
MIN_RUNS = 2  # copied runs needed to name a case: one shared run alone may be a coincidence
COMMON = 2  # a run found in more distinct turns of the run than this is a common phrase, not a copy


def content_words(text: str) -> list[str]:
    return [w for w in tokenize(text) if w not in STOPWORDS]


def _anchor(word: str) -> bool:
    return zlib.crc32(word.encode()) % ANCHOR_EVERY == 0


def windows(text: str) -> set[int]:
    """The hashes of the text's anchored runs of WINDOW content words (in-process hashes: never stored)."""
    w = content_words(text)
    return {hash(tuple(w[i : i + WINDOW])) for i in range(len(w) - WINDOW + 1) if _anchor(w[i])}


@dataclass(frozen=True)
class Origin:
    """Where a provenance id points: the case (question id) and the dataset's session id."""

    case: str
    session_id: str


class RunCases:
    """The cases of one contestant's run: their opaque session ids and a text index of their histories."""

    def __init__(self, ids: RunIds) -> None:
        self.ids = ids
        self._lock = threading.Lock()
        self._cases: dict[str, int] = {}  # case -> its number
        self._names: list[str] = []
        self._histories: list[Sequence[tuple[str, Sequence[Any]]]] = []  # per case: (session id, turns with .content)
        self._origin: dict[str, Origin] = {}  # opaque session id -> where it points
        # The text index: every distinct turn text of the run once, with the cases holding it, and its windows.
        self._indexed = 0  # cases [0, _indexed) are indexed
        self._turn_of: dict[int, int] = {}  # hash of a turn's text -> its number
        self._holders: list[set[int]] = []  # per turn number: the cases holding that text
        self._hashes = np.empty(0, np.int64)  # window hashes, sorted
        self._turns = np.empty(0, np.int32)  # the turn number of each

    def add(self, case: str, sessions: Iterable[tuple[str, Sequence[Any]]]) -> None:
        """A case of the run: its dataset sessions as (session id, turns), each turn with a `content`."""
        with self._lock:
            if case in self._cases:
                return
            history = tuple(sessions)
            self._cases[case] = len(self._names)
            self._names.append(case)
            self._histories.append(history)
            for sid, _ in history:
                self._origin[self.ids.session(case, sid)] = Origin(case, sid)

    def add_cases(self, cases: Iterable[Any]) -> None:
        """Dataset cases (harness/data/longmemeval.py Case)."""
        for c in cases:
            self.add(c.question_id, zip(c.session_ids, c.sessions, strict=True))

    def origin(self, opaque: str | None) -> Origin | None:
        """The (case, dataset session) an opaque session id names; None when it names none of this run's."""
        if opaque is None:
            return None
        with self._lock:
            return self._origin.get(opaque)

    def copied_from(self, text: str, own: str) -> str | None:
        """The other case `text` was copied from (see the module doc), or None. Runs that the own case's history
        holds, and common phrases (runs found in more than COMMON distinct turns of the run), are left out; the
        case holding the most of the remaining runs is named when they are at least MIN_RUNS."""
        mine = windows(text)
        if len(mine) < MIN_RUNS:
            return None
        with self._lock:
            if len(self._names) < 2:
                return None
            self._build()
            own_n = self._cases.get(own, -1)
            probe = np.fromiter(mine, np.int64, len(mine))
            lo = np.searchsorted(self._hashes, probe, "left")
            hi = np.searchsorted(self._hashes, probe, "right")
            votes: dict[int, int] = {}
            for a, b in zip(lo.tolist(), hi.tolist()):
                turns = set(self._turns[a:b].tolist())
                if not turns or len(turns) > COMMON:
                    continue
                holders = set().union(*(self._holders[t] for t in turns))
                if own_n in holders:
                    continue
                for n in holders:
                    votes[n] = votes.get(n, 0) + 1
            if not votes:
                return None
            best = max(sorted(votes), key=lambda n: votes[n])
            return self._names[best] if votes[best] >= MIN_RUNS else None

    def index(self) -> None:
        """Index the cases added since the last call (the first builds the whole run's index: seconds on a long
        haystack, so the contestant calls it outside any case's timing)."""
        with self._lock:
            self._build()

    def _build(self) -> None:
        if self._indexed == len(self._histories):
            return
        hashes, turns = array("q"), array("i")
        for n in range(self._indexed, len(self._histories)):
            for _, history_turns in self._histories[n]:
                for t in history_turns:
                    key = hash(t.content)
                    if (k := self._turn_of.get(key)) is None:
                        k = self._turn_of[key] = len(self._holders)
                        self._holders.append(set())
                        found = windows(t.content)
                        hashes.extend(found)
                        turns.extend([k] * len(found))
                    self._holders[k].add(n)
        h = np.concatenate([self._hashes, np.frombuffer(hashes, np.int64)])
        o = np.concatenate([self._turns, np.frombuffer(turns, np.int32)])
        order = np.argsort(h, kind="stable")
        self._hashes, self._turns = h[order], o[order]
        self._indexed = len(self._histories)


__all__ = ["ANCHOR_EVERY", "COMMON", "MIN_RUNS", "WINDOW", "Origin", "RunCases", "content_words", "windows"]
