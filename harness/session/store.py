"""Persistence of sessions, events and summaries, and a content-keyed summary cache.

`SQLiteStore` (embedded, WAL) lets an interrupted run resume without regenerating summaries;
`InMemoryStore` has the same API for tests. `CachedSummaries` puts the cache in front of a
Summarizer: the key is the summary *input* (event contents, previous summary, prompt, model and
generation settings), not event ids, so two modes seeding the same case share one generation
(`share_across_modes=True`); with False the mode name joins the key and each mode regenerates,
as the reference run did.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from harness.llm.types import ChatResult, Usage
from harness.secrets import redact_stored
from harness.session.boundary import Summary, SummaryBoundary
from harness.session.events import Event, Session, ToolCall
from harness.session.summary import BOUNDARY_VERSION, Summarizer, SummaryOutcome, pick_summary
from harness.storage import StorageError, open_sqlite

SessionKey = tuple[str, str, str]  # (app, user_id, session_id)


def session_key(session: Session) -> SessionKey:
    return (session.app, session.user_id, session.id)


# --- (de)serialization ---------------------------------------------------------------------------
def event_to_dict(e: Event) -> dict[str, Any]:
    d = dataclasses.asdict(e)
    d["tool_calls"] = [dataclasses.asdict(tc) for tc in e.tool_calls]
    return d


def event_from_dict(d: dict[str, Any]) -> Event:
    return Event(**{**d, "tool_calls": tuple(ToolCall(**tc) for tc in d.get("tool_calls", ()))})


def summary_to_dict(s: Summary) -> dict[str, Any]:
    return {
        "text": s.text,
        "updated_at": s.updated_at,
        "topics": list(s.topics),
        "boundary": dataclasses.asdict(s.boundary),
    }


def summary_from_dict(d: dict[str, Any]) -> Summary:
    return Summary(d["text"], SummaryBoundary(**d["boundary"]), d["updated_at"], tuple(d.get("topics", ())))


def chat_result_from_record(d: dict[str, Any], *, cached: bool = True) -> ChatResult:
    return ChatResult(
        content=d["content"],
        tool_calls=tuple(d.get("tool_calls", ())),
        usage=Usage(**d["usage"]),
        latency_s=d["latency_s"],
        model=d["model"],
        finish_reason=d.get("finish_reason"),
        cached=cached,
        purpose=d.get("purpose", "summary"),
    )


# --- Stores ----------------------------------------------------------------------------------------
class Store(Protocol):
    def save_session(self, session: Session) -> None: ...
    def load_session(self, app: str, user_id: str, session_id: str) -> Session | None: ...
    def delete_session(self, app: str, user_id: str, session_id: str) -> None: ...
    def put_summary(self, key: SessionKey, summary: Summary) -> None: ...
    def summaries(self, key: SessionKey) -> dict[str, Summary]: ...
    def get_summary(self, key: SessionKey, filter_key: str = "") -> Summary | None: ...
    def cache_get(self, cache_key: str) -> dict[str, Any] | None: ...
    def cache_put(self, cache_key: str, value: dict[str, Any]) -> None: ...


class InMemoryStore:
    """Dict-backed store with the same API as SQLiteStore (copies in and out, like a real store)."""

    def __init__(self) -> None:
        self._events: dict[SessionKey, list[Event]] = {}
        self._summaries: dict[SessionKey, dict[str, Summary]] = {}
        self._cache: dict[str, str] = {}
        self._lock = threading.Lock()

    def save_session(self, session: Session) -> None:
        with self._lock:
            self._events[session_key(session)] = list(session.events)

    def load_session(self, app: str, user_id: str, session_id: str) -> Session | None:
        with self._lock:
            events = self._events.get((app, user_id, session_id))
        return None if events is None else Session(session_id, user_id, app, list(events))

    def delete_session(self, app: str, user_id: str, session_id: str) -> None:
        with self._lock:
            self._events.pop((app, user_id, session_id), None)
            self._summaries.pop((app, user_id, session_id), None)

    def put_summary(self, key: SessionKey, summary: Summary) -> None:
        with self._lock:
            self._summaries.setdefault(key, {})[summary.boundary.filter_key] = summary

    def summaries(self, key: SessionKey) -> dict[str, Summary]:
        with self._lock:
            return dict(self._summaries.get(key, {}))

    def get_summary(self, key: SessionKey, filter_key: str = "") -> Summary | None:
        return pick_summary(self.summaries(key), filter_key)

    def cache_get(self, cache_key: str) -> dict[str, Any] | None:
        with self._lock:
            raw = self._cache.get(cache_key)
        return None if raw is None else json.loads(raw)

    def cache_put(self, cache_key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._cache[cache_key] = json.dumps(value)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
  app TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
  idx INTEGER NOT NULL, event_id TEXT NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (app, user_id, session_id, idx));
CREATE TABLE IF NOT EXISTS sessions (
  app TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL, updated_at REAL NOT NULL,
  PRIMARY KEY (app, user_id, session_id));
CREATE TABLE IF NOT EXISTS summaries (
  app TEXT NOT NULL, user_id TEXT NOT NULL, session_id TEXT NOT NULL, filter_key TEXT NOT NULL,
  body TEXT NOT NULL, PRIMARY KEY (app, user_id, session_id, filter_key));
CREATE TABLE IF NOT EXISTS summary_cache (
  cache_key TEXT PRIMARY KEY, body TEXT NOT NULL, created_at REAL NOT NULL);
"""


_COLUMNS = {
    "events": ("app", "user_id", "session_id", "idx", "event_id", "body"),
    "sessions": ("app", "user_id", "session_id", "updated_at"),
    "summaries": ("app", "user_id", "session_id", "filter_key", "body"),
    "summary_cache": ("cache_key", "body", "created_at"),
}


class SQLiteStore:
    """Embedded SQLite store in WAL mode (readers do not block the writer). Thread-safe: one
    connection guarded by a lock, which is ample for the few writes a run makes per case."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = open_sqlite(
            self.path,
            "session store",
            _SCHEMA,
            _COLUMNS,
            "it holds this run's sessions and summaries: they are generated again",
        )
        self._db.execute("PRAGMA synchronous=NORMAL")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _loads(self, raw: str, what: str) -> Any:
        try:
            return json.loads(raw)
        except json.JSONDecodeError as e:
            raise StorageError(
                f"{self.path}: a stored {what} is not valid JSON ({e}); move the session store aside "
                f"or delete it (its summaries are generated again), then run the same command again"
            ) from e

    def save_session(self, session: Session) -> None:
        """Write the session's events (appended ones are added; stored ones are immutable)."""
        k = session_key(session)
        # Registered secrets are masked in everything written (events, summaries, cache): a reply may echo a key.
        rows = [(*k, e.index, e.id, json.dumps(redact_stored(event_to_dict(e)))) for e in session.events]
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO sessions VALUES (?,?,?,?)", (*k, time.time()))
            self._db.executemany("INSERT OR IGNORE INTO events VALUES (?,?,?,?,?,?)", rows)

    def load_session(self, app: str, user_id: str, session_id: str) -> Session | None:
        k = (app, user_id, session_id)
        with self._lock:
            found = self._db.execute("SELECT 1 FROM sessions WHERE app=? AND user_id=? AND session_id=?", k).fetchone()
            rows = self._db.execute(
                "SELECT body FROM events WHERE app=? AND user_id=? AND session_id=? ORDER BY idx", k
            ).fetchall()
        if found is None:
            return None
        return Session(session_id, user_id, app, [event_from_dict(self._loads(r[0], "event")) for r in rows])

    def delete_session(self, app: str, user_id: str, session_id: str) -> None:
        k = (app, user_id, session_id)
        with self._lock, self._db:
            for table in ("events", "sessions", "summaries"):
                self._db.execute(f"DELETE FROM {table} WHERE app=? AND user_id=? AND session_id=?", k)

    def put_summary(self, key: SessionKey, summary: Summary) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO summaries VALUES (?,?,?,?,?)",
                (*key, summary.boundary.filter_key, json.dumps(redact_stored(summary_to_dict(summary)))),
            )

    def summaries(self, key: SessionKey) -> dict[str, Summary]:
        with self._lock:
            rows = self._db.execute(
                "SELECT filter_key, body FROM summaries WHERE app=? AND user_id=? AND session_id=?", key
            ).fetchall()
        return {fk: summary_from_dict(self._loads(body, "summary")) for fk, body in rows}

    def get_summary(self, key: SessionKey, filter_key: str = "") -> Summary | None:
        return pick_summary(self.summaries(key), filter_key)

    def cache_get(self, cache_key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT body FROM summary_cache WHERE cache_key=?", (cache_key,)).fetchone()
        return None if row is None else self._loads(row[0], "summary cache entry")

    def cache_put(self, cache_key: str, value: dict[str, Any]) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO summary_cache VALUES (?,?,?)",
                (cache_key, json.dumps(redact_stored(value)), time.time()),
            )


# --- Content-keyed summary cache -------------------------------------------------------------------
def _event_content(e: Event) -> list[Any]:
    # Ids and timestamps are left out on purpose: each mode seeds its own ids for the same turns.
    return [e.role, e.author, e.content, [[t.name, t.arguments] for t in e.tool_calls], e.tool_name]


def summary_cache_key(
    summarizer: Summarizer, events: Sequence[Event], previous: Summary | None, filter_key: str = "", scope: str = ""
) -> str:
    """Hash of everything that determines a summary: input events, previous text, prompt, model, settings."""
    payload = {
        "model": getattr(summarizer.model, "model", type(summarizer.model).__name__),
        "prompt": summarizer.prompt.fingerprint(),
        "params": summarizer.params,
        "window": [summarizer.context_window, summarizer.reserve() if summarizer.context_window else None],
        "agent": summarizer.agent_name,
        "formatters": [
            getattr(f, "__qualname__", repr(f))
            for f in (summarizer.tool_call_formatter, summarizer.tool_result_formatter)
        ],
        "hooks": [
            getattr(h, "__qualname__", repr(h)) if h else None for h in (summarizer.pre_hook, summarizer.post_hook)
        ],
        "previous": previous.text if previous else None,
        "filter_key": filter_key,
        "events": [_event_content(e) for e in events],
        "scope": scope,
    }
    if summarizer.oversized(events):  # only then: keys of summaries of ordinary events stay as they were
        payload["max_event_chars"] = summarizer.max_event_chars
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class CachedSummaries:
    """A Summarizer behind the content-keyed cache of a store, and the summary table of that store.

    `summarize(session, mode=...)` returns (outcome, hit). A hit rebuilds the boundary on the
    *current* session's events (same contents, maybe other ids) and replays the original calls'
    usage with `cached=True`, so records still show what the generation cost.
    """

    def __init__(self, summarizer: Summarizer, store: Store, *, share_across_modes: bool = True) -> None:
        self.summarizer = summarizer
        self.store = store
        self.share_across_modes = share_across_modes

    def summarize(
        self,
        session: Session,
        previous: Summary | None = None,
        *,
        mode: str = "",
        force: bool = True,
        filter_key: str = "",
    ) -> tuple[SummaryOutcome, bool]:
        s = self.summarizer
        events = s.input_events(s.delta(session, previous, filter_key), previous is not None)
        scope = "" if self.share_across_modes else mode
        key = summary_cache_key(s, events, previous, filter_key, scope)
        start = time.perf_counter()
        if events and not force and not s.triggered(events):
            return SummaryOutcome(None, [], time.perf_counter() - start, 0, "triggers not met"), False
        hit = self.store.cache_get(key) if events else None
        if hit is not None:
            last = events[hit["covered"] - 1]
            summary = Summary(
                hit["text"], SummaryBoundary(BOUNDARY_VERSION, filter_key, last.timestamp, last.id), last.timestamp
            )
            calls = [chat_result_from_record(c) for c in hit["calls"]]
            outcome = SummaryOutcome(
                summary,
                calls,
                time.perf_counter() - start,
                hit["chunks"],
                None,
                hit["covered"],
                hit.get("forked", False),
                cached=True,
                generation_s=hit["duration_s"],
                truncated_events=s.oversized(events),
            )
            self.store.put_summary(session_key(session), summary)
            return outcome, True
        outcome = s.summarize(session, previous, force=force, filter_key=filter_key)
        if outcome.summary is not None:
            self.store.cache_put(
                key,
                {
                    "text": outcome.summary.text,
                    "covered": outcome.input_events,
                    "chunks": outcome.chunks,
                    "duration_s": outcome.duration_s,
                    "forked": outcome.forked,
                    "calls": [c.to_record() for c in outcome.calls],
                },
            )
            self.store.put_summary(session_key(session), outcome.summary)
        return outcome, False
