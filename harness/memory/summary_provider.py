"""The summary engine as memory providers, through the contract (harness/memory/provider.py).

- `summary`: ingest = the run's summary engine (harness/session, `Toolkit.summaries`) over the unit's turns, each
  session's first turn headed by its date; retrieve = the summary as one item, then the turns after its boundary
  (none when the engine covered them all), oldest first.
- `summary_tools`: the same summary, plus what the on-demand tools (harness/retrieval: `session_search` over the
  events the summary hides) return for a search *with the question as the query*. The summary_ondemand mode lets
  the model choose its searches in a loop; a retrieve-only contract cannot, so this provider models the tools as
  one search by the question (labelled so in docs/memory-systems.md): the summary + search baseline.

Both need the run's summary engine and retrieval: the contestant lends them (`bind_toolkit`) before the first
unit, so summary calls go through the run's client (response cache, accounting) and its summary store (content
keyed: the two providers, and a resumed run, get one generation per history; a served generation replays its
usage, marked `cached`). Not servable over HTTP without a run (no summary engine there).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
    Usage,
    parse_iso,
)
from harness.session.events import Event, Session

VERSION = "1"
SESSION_HEADER = "[Session date: {}]"  # as wire.session_header shows dates to the summary mode (+experiment=lme_dated)


@dataclass(frozen=True)
class _Unit:
    session: Session
    turns: tuple[tuple[str, int, str], ...]  # per event: (session id, turn index, date)
    summary: Any  # harness.session.boundary.Summary
    tools: Any  # SessionTools over the events the summary hides (summary_tools), else None


def unit_session(unit: str, sessions: Sequence[MemorySession]) -> tuple[Session, tuple[tuple[str, int, str], ...]]:
    """The unit's turns as engine events (sessions in date order, each session's first turn headed by its date) and
    each event's provenance."""
    events: list[Event] = []
    where: list[tuple[str, int, str]] = []
    for s in sorted(sessions, key=lambda s: parse_iso(s.date)):
        ts = parse_iso(s.date).timestamp()
        for i, t in enumerate(s.turns):
            text = f"{SESSION_HEADER.format(s.date)}\n{t.content}" if i == 0 else t.content
            n = len(events)
            events.append(Event(id=f"e{n:05d}", index=n, role=t.role, content=text, timestamp=ts + n * 1e-3))
            where.append((s.session_id, i, s.date))
    # the session id names the content (never the run), so the store's rows of a resumed run are the same ones
    digest = hashlib.sha256("\x1f".join(f"{e.role}\x1e{e.content}" for e in events).encode()).hexdigest()[:16]
    return Session(f"memory-{digest}", "memory", "lme-memory", events), tuple(where)


class SummaryProvider(ProviderBase):
    """`search: true` adds one `session_search` by the question over the hidden events (summary_tools)."""

    def __init__(self, name: str = "summary", search: bool = False) -> None:
        self.name, self.search = name, search
        self._engine: Any = None  # runners.summaries.SummaryProvider
        self._retrieval: Any = None  # harness.retrieval Retrieval: tools(session, boundary=...)
        self._units: dict[str, _Unit | None] = {}
        self._lock = threading.Lock()

    def bind_toolkit(self, kit: Any) -> None:
        """The run's summary engine and retrieval (harness/contestants/base.py Toolkit)."""
        self._engine, self._retrieval = kit.summaries, kit.retrieval

    def capabilities(self) -> Capabilities:
        return Capabilities(self.name, VERSION, REQUIRED_CALLS, concurrency=1)

    def setup(self, unit: str) -> None:
        with self._lock:
            self._units[unit] = None

    def _get(self, call: str, unit: str) -> _Unit | None:
        with self._lock:
            if unit not in self._units:
                raise ProviderError(self.name, call, unit, "unknown unit (call setup first)")
            return self._units[unit]

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        self._get("ingest", unit)
        if self._engine is None or (self.search and self._retrieval is None):
            raise ProviderError(self.name, "ingest", unit, "needs the run's summary engine (mode=memory binds it)")
        session, where = unit_session(unit, sessions)
        if not session.events:
            with self._lock:
                self._units[unit] = _Unit(session, where, None, None)
            return Ingest()
        try:
            got = self._engine.get(unit, session, f"memory:{self.name}")
        except Exception as e:  # the engine's failure is the provider's, recorded against the unit
            raise ProviderError(self.name, "ingest", unit, f"summary engine: {type(e).__name__}: {e}") from e
        tools = self._retrieval.tools(session, boundary=got.summary.boundary) if self.search else None
        with self._lock:
            self._units[unit] = _Unit(session, where, got.summary, tools)
        calls = got.outcome.calls  # a generation served by the store replays its calls' usage (cached=True)
        usage = Usage(
            input_tokens=sum(c.usage.prompt_tokens for c in calls),
            output_tokens=sum(c.usage.completion_tokens for c in calls),
            llm_calls=len(calls),
            cached_llm_calls=sum(c.cached for c in calls),
        )
        return Ingest(usage=usage)

    def _item(self, u: _Unit, position: int, score: float | None) -> MemoryItem:
        sid, turn, date = u.turns[position]
        e = u.session.events[position]
        return MemoryItem(f"[{date}] {e.role}: {e.content}", score, Provenance(sid, turn, date))

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        u = self._get("retrieve", unit)
        if u is None or top_k < 1:
            return Retrieval(())
        items: list[MemoryItem] = []
        after = range(len(u.session.events))
        if u.summary is not None:
            b = u.summary.boundary
            last = next(
                (i for i, e in enumerate(u.session.events) if e.id == b.last_event_id), len(u.session.events) - 1
            )
            # dated by the newest session it covers: a summary over sessions after the question is leakage
            items.append(MemoryItem(u.summary.text, None, Provenance(None, None, u.turns[last][2])))
            after = range(last + 1, len(u.session.events))
            if u.tools is not None and top_k > 1:
                out = u.tools.call("session_search", {"query": query, "top_k": top_k - 1})
                position = {e.id: i for i, e in enumerate(u.session.events)}
                for h in out.trace.get("hits") or []:
                    if (p := position.get(h.get("event_id"))) is not None:
                        items.append(self._item(u, p, h.get("score")))
        cutoff = parse_iso(as_of)
        items += [self._item(u, i, None) for i in after if parse_iso(u.turns[i][2]) <= cutoff]
        return Retrieval(tuple(items[:top_k]))

    def teardown(self, unit: str) -> None:
        with self._lock:
            self._units.pop(unit, None)
        if self._engine is not None:
            self._engine.forget(unit)
