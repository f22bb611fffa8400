"""Built-in memory providers through the contract (harness/memory/provider.py): plain RAG over the project's
retrieval index (BM25, or the default retriever's fused scores) and full context.

They are the baselines a memory system is compared with, and the providers the reference HTTP server serves.
Memory lives per unit in a dict under a lock: a unit's memory is only ever read for that unit.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.memory.provider import (
    REQUIRED_CALLS,
    Capabilities,
    Ingest,
    MemoryItem,
    MemorySession,
    Provenance,
    ProviderBase,
    ProviderError,
    Retrieval,
    parse_iso,
)
from harness.session.events import Event

VERSION = "1"


@dataclass(frozen=True)
class _Turn:
    session_id: str
    turn_index: int
    date: str
    role: str
    content: str

    def item(self, score: float | None) -> MemoryItem:
        return MemoryItem(
            f"[{self.date}] {self.role}: {self.content}", score, Provenance(self.session_id, self.turn_index, self.date)
        )


class _Units:
    """Per-unit state: set up, filled by ingest, read by retrieve, dropped by teardown."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self._units: dict[str, Any] = {}
        self._lock = threading.Lock()

    def setup(self, unit: str) -> None:
        with self._lock:
            self._units[unit] = None  # set up, nothing ingested yet

    def put(self, call: str, unit: str, value: Any) -> None:
        with self._lock:
            if unit not in self._units:
                raise ProviderError(self.provider, call, unit, "unknown unit (call setup first)")
            self._units[unit] = value

    def get(self, call: str, unit: str) -> Any:
        with self._lock:
            if unit not in self._units:
                raise ProviderError(self.provider, call, unit, "unknown unit (call setup first)")
            return self._units[unit]

    def drop(self, unit: str) -> None:
        with self._lock:
            self._units.pop(unit, None)

    def ingested(self, unit: str) -> bool:
        """Set up and ingested (what `attach` asks: a unit only set up is not attachable)."""
        with self._lock:
            return self._units.get(unit) is not None


def _turns(sessions: Sequence[MemorySession]) -> list[_Turn]:
    return [
        _Turn(s.session_id, i, s.date, t.role, t.content)
        for s in sorted(sessions, key=lambda s: parse_iso(s.date))
        for i, t in enumerate(s.turns)
    ]


class IndexProvider(ProviderBase):
    """Plain RAG: every turn is a document of the project's retrieval index (harness/retrieval); retrieve ranks
    the turns dated at or before `as_of` by the retriever's scores (BM25 without an embedder; BM25/max + cosine
    with the default retriever's), best first. No summary, no priors, no query rewriting."""

    def __init__(self, retriever: Any = None, name: str | None = None) -> None:
        from harness.retrieval.config import preset
        from harness.retrieval.retriever import Retriever

        self.retriever = retriever if retriever is not None else Retriever(preset("bm25"))
        self.name = name or self.retriever.name
        self._units = _Units(self.name)

    def capabilities(self) -> Capabilities:
        return Capabilities(self.name, VERSION, REQUIRED_CALLS | {"attach"}, concurrency=4)

    def setup(self, unit: str) -> None:
        self._units.setup(unit)

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        turns = _turns(sessions)
        events = [
            Event(id=f"e{n:05d}", index=n, role=t.role, content=t.content, timestamp=parse_iso(t.date).timestamp())
            for n, t in enumerate(turns)
        ]
        self._units.put("ingest", unit, (turns, self.retriever.index(events)))
        return Ingest()

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        state = self._units.get("retrieve", unit)
        if state is None:
            return Retrieval(())
        turns, index = state
        config = self.retriever.config  # without dense vectors every mode scores by keyword
        scores, _ = index.score_vector(query, config.default_mode, alpha=config.alpha)
        # as of the question: a turn dated after it does not exist yet
        cutoff = parse_iso(as_of).timestamp()
        mask = np.fromiter((parse_iso(turns[d.position].date).timestamp() <= cutoff for d in index.docs), bool)
        return Retrieval(tuple(turns[index.docs[i].position].item(s) for i, s in index.ranked(scores, mask, top_k)))

    def attach(self, unit: str) -> bool:
        return self._units.ingested(unit)

    def teardown(self, unit: str) -> None:
        self._units.drop(unit)


class FullContextProvider(ProviderBase):
    """Full context: retrieve returns the sessions dated at or before `as_of`, one item each, newest first (so a
    context cap drops the oldest), at most `top_k` of them like any provider: the no-retrieval baseline (whole
    for the oracle file's few sessions; the newest `top_k` of a long haystack)."""

    name = "full_context"

    def __init__(self) -> None:
        self._units = _Units(self.name)

    def capabilities(self) -> Capabilities:
        return Capabilities(self.name, VERSION, REQUIRED_CALLS | {"attach"}, concurrency=4)

    def setup(self, unit: str) -> None:
        self._units.setup(unit)

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        self._units.put("ingest", unit, sorted(sessions, key=lambda s: parse_iso(s.date)))
        return Ingest()

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        sessions: list[MemorySession] = self._units.get("retrieve", unit) or []
        cutoff = parse_iso(as_of)
        shown = [s for s in sessions if parse_iso(s.date) <= cutoff]
        items = tuple(
            MemoryItem(
                f"[Session {s.session_id}, {s.date}]\n" + "\n".join(f"{t.role}: {t.content}" for t in s.turns),
                None,
                Provenance(s.session_id, None, s.date),
            )
            for s in list(reversed(shown))[:top_k]
        )
        return Retrieval(items)

    def attach(self, unit: str) -> bool:
        return self._units.ingested(unit)

    def teardown(self, unit: str) -> None:
        self._units.drop(unit)
