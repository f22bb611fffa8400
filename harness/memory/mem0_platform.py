"""mem0's hosted platform (`mem0.MemoryClient`, PyPI `mem0ai`) as a memory provider (harness/memory/hosted.py).

What maps to what (mem0ai 2.2.1, its v3 API):

- **scope**: `scope(unit)` is the mem0 `user_id`.
- **setup**: lists the scope (`get_all`, one item); if an earlier run left memories under it, `delete_all` and wait
  until the listing is empty. mem0 queues deletes, so a delete sent and not waited for could land after this unit's
  adds and wipe them: setup waits, and does nothing remote but that one listing when the scope is empty.
- **ingest**: one `add` per session (in date order): its turns as messages, metadata `{session_id, session_date,
  session_ts}`, and `timestamp` = the session's epoch seconds (mem0 backdates the memories' `created_at` to it).
  The platform processes every add in the background (the SDK has no synchronous option since v3): each answers
  `{"event_id", "status": "PENDING"}`, so ingest says not ready and `ready` polls `GET /v1/event/{event_id}/`
  (through the SDK's own HTTP client: the SDK has no method for it) until every event has SUCCEEDED.
- **retrieve**: `search` with `top_k`, `filters` = the scope AND `created_at <= as_of` (the platform's metadata
  filters accept no `lte`, its `created_at` does), and `reference_date` = as_of (the date the search reasons from).
  Nothing is dropped client-side: the leakage audit sees what the service returns.
- **teardown**: `delete_all(user_id=scope)` (queued by mem0; not waited for: the next setup of the scope checks).
- **usage**: the platform reports no tokens or cost: `Usage()` stays zero.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from harness.memory.hosted import HostedProvider, epoch_seconds, iso_of
from harness.memory.mem0_provider import mem0_quietly
from harness.memory.provider import Ingest, MemoryItem, MemorySession, Provenance, Retrieval

NAME = "mem0_platform"
POLL_S = 1.0  # between two looks at a queued delete (setup)
DONE, FAILED = "SUCCEEDED", "FAILED"  # an event's terminal statuses (GET /v1/event/{id}/)


def _memory_client_class() -> Any:
    """mem0's `MemoryClient`, imported under the OSS adapter's rule (`mem0_quietly`: telemetry off, MEM0_DIR private)."""
    mem0_quietly(NAME)
    from mem0.client.main import MemoryClient

    return MemoryClient


def _items(found: Any) -> tuple[MemoryItem, ...]:
    """Search results as contract items; the date is the session's (metadata), else the backdated `created_at`."""
    items = []
    for r in (found or {}).get("results", []):
        meta = r.get("metadata") or {}
        date = meta.get("session_date") or iso_of(r.get("created_at"))
        items.append(MemoryItem(r["memory"], r.get("score"), Provenance(session_id=meta.get("session_id"), date=date)))
    return tuple(items)


class Mem0PlatformProvider(HostedProvider):
    """mem0's hosted platform behind the provider contract (one instance serves every unit of a run)."""

    NAME: ClassVar[str] = NAME
    DISTRIBUTION: ClassVar[str] = "mem0ai"
    ASYNC_INGEST: ClassVar[bool] = True
    ATTACH: ClassVar[bool] = True  # the unit's memories, under its user_id, are still on the platform

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: dict[str, list[str]] = {}  # unit -> its add events not yet SUCCEEDED
        self._pending_lock = threading.Lock()

    def _client_for(self, key: str) -> Any:
        memory_client = _memory_client_class()
        # The SDK's own client would wait 300 s a call; ours waits timeout_s (the SDK sets base URL and headers).
        http = self._http_client if self._http_client is not None else httpx.Client(timeout=self.timeout_s)
        return memory_client(api_key=key, host=self.base_url, client=http)

    def _stored(self, sdk: Any, unit: str) -> int:
        found = sdk.get_all(filters={"user_id": self.scope(unit)}, page=1, page_size=1)
        return int(found.get("count", len(found.get("results", []))))

    def _attach(self, sdk: Any, unit: str) -> bool:
        """A resumed run's unit: its add events all succeeded before the harness checkpointed it, so memories under
        its user_id mean it is there (none: deleted, or never extracted; it is then ingested again)."""
        with self._pending_lock:
            self._pending.pop(unit, None)
        return self._stored(sdk, unit) > 0

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not done within timeout_s={self.timeout_s:g}")
            time.sleep(POLL_S)

    def _setup(self, sdk: Any, unit: str) -> None:
        with self._pending_lock:
            self._pending.pop(unit, None)
        if self._stored(sdk, unit):  # an earlier run's memories under this scope
            sdk.delete_all(user_id=self.scope(unit))
            self._wait(lambda: not self._stored(sdk, unit), f"deleting the memories left under {self.scope(unit)!r}")

    def _ingest(self, sdk: Any, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        events = []
        for s in sessions:  # the base hands them over in date order
            ts = epoch_seconds(s.date)
            answer = sdk.add(
                [{"role": t.role, "content": t.content} for t in s.turns],
                user_id=self.scope(unit),
                metadata={"session_id": s.session_id, "session_date": s.date, "session_ts": ts},
                timestamp=ts,
            )
            if answer.get("status") == FAILED:
                raise RuntimeError(f"add of session {s.session_id!r} failed: {answer}")
            if answer.get("event_id") and answer.get("status") != DONE:
                events.append(str(answer["event_id"]))
        with self._pending_lock:
            self._pending[unit] = events
        return Ingest(ready=not events)

    def _ready(self, sdk: Any, unit: str) -> bool:
        with self._pending_lock:
            pending = list(self._pending.get(unit, ()))
        left = []
        for event_id in pending:
            response = sdk.client.get(f"/v1/event/{quote(event_id, safe='')}/")
            response.raise_for_status()
            event = response.json()
            if event.get("status") == FAILED:
                raise RuntimeError(f"mem0 event {event_id} FAILED: {event.get('error')}")
            if event.get("status") != DONE:
                left.append(event_id)
        with self._pending_lock:
            self._pending[unit] = left
        return not left

    def _retrieve(self, sdk: Any, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        filters = {"AND": [{"user_id": self.scope(unit)}, {"created_at": {"lte": as_of}}]}
        found = sdk.search(query, filters=filters, top_k=top_k, reference_date=epoch_seconds(as_of))
        return Retrieval(_items(found))  # no Usage: the platform reports none

    def _teardown(self, sdk: Any, unit: str) -> None:
        with self._pending_lock:
            self._pending.pop(unit, None)
        sdk.delete_all(user_id=self.scope(unit))
