"""Zep's hosted service (PyPI `zep-cloud` 4.x, API v4) as a memory provider, through its SDK.

Mapping (SDK 4.0.1; v4 addresses users, threads and graphs by server-assigned UUIDs):

- unit -> one Zep user, created with `user_id = scope(unit)`; its UUID (and graph UUID) kept per unit, looked up
  by `user_id` when unknown (a teardown after a restart). Teardown deletes the user: Zep's `UserDeleteResult` says
  its threads, messages and graph go with it (asynchronously).
- session -> one thread (v4 `thread.create` takes only the user: its UUID is mapped back to the session here) and
  `thread.add_messages` in batches of MESSAGES_PER_CALL, each turn with its session's date as `reference_time`
  (v4's name for the v3 message `created_at`: "used for temporal reasoning rather than ingestion time").
- ready: Zep extracts its graph asynchronously; each `add_messages` returns a task, polled with `task.get` until
  terminal (`succeeded`/`partial`; `failed` is a ProviderError). Without a task: the thread's episodes, all
  `processed` and at least as many as the messages sent.
- retrieve -> `graph.search_edges` (facts), `page_size = top_k`, first page only. As of: the service's own date
  filter `valid_at <= as_of OR valid_at is null`; nothing is dropped here (the harness audits what comes back).
- usage: Zep reports no tokens, so every call's Usage is zero (not "free": unreported).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.memory.hosted import HostedProvider, iso_of
from harness.memory.provider import Ingest, MemoryItem, MemorySession, Provenance, Retrieval, parse_iso

MESSAGES_PER_CALL = 30  # Zep's documented cap on messages per add_messages call
NAMES = {"user": "User", "assistant": "Assistant"}  # Zep asks for a sender name to help graph construction
DONE, FAILED = frozenset({"succeeded", "partial"}), "failed"


@dataclass
class _Unit:
    """What this adapter knows of one unit's Zep objects (service-assigned ids)."""

    user_uuid: str
    graph_uuid: str
    sessions: dict[str, tuple[str, str]] = field(default_factory=dict)  # thread uuid -> (session id, date)
    tasks: set[str] = field(default_factory=set)  # ingest tasks not yet seen terminal
    untracked: dict[str, int] = field(default_factory=dict)  # thread uuid -> messages sent, when no task came back
    episodes: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)  # uuid -> (thread, date)


class ZepProvider(HostedProvider):
    """Zep Cloud behind the provider contract. `reranker`: graph search's reranker (Zep's default `rrf`)."""

    NAME: ClassVar[str] = "zep"
    DISTRIBUTION: ClassVar[str] = "zep-cloud"
    ASYNC_INGEST: ClassVar[bool] = True

    def __init__(self, api_key_env: str, *, reranker: str = "rrf", **kwargs: Any) -> None:
        super().__init__(api_key_env, **kwargs)
        self.reranker = reranker
        self._units: dict[str, _Unit] = {}

    def _client_for(self, key: str) -> Any:
        from zep_cloud.client import Zep

        return Zep(api_key=key, base_url=self.base_url, timeout=self.timeout_s, httpx_client=self._http_client)

    def _unit(self, sdk: Any, unit: str) -> _Unit:
        """The unit's user: as created by setup, else looked up by its `user_id` (NotFoundError when none)."""
        known = self._units.get(unit)
        if known is None:
            user = sdk.user.lookup(user_id=self.scope(unit))
            known = self._units[unit] = _Unit(user.uuid_, user.graph_uuid or user.uuid_)
        return known

    def _setup(self, sdk: Any, unit: str) -> None:
        user = sdk.user.create(user_id=self.scope(unit))
        self._units[unit] = _Unit(user.uuid_, user.graph_uuid or user.uuid_)

    def _ingest(self, sdk: Any, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        from zep_cloud.types import AddMessage

        u = self._unit(sdk, unit)
        for s in sessions:  # already in date order (the base sorts them)
            thread = sdk.thread.create(user_uuid=u.user_uuid).uuid_
            u.sessions[thread] = (s.session_id, s.date)
            meta = {"session_id": s.session_id, "session_date": s.date}
            msgs = [
                AddMessage(role=t.role, name=NAMES.get(t.role), content=t.content, reference_time=s.date, metadata=meta)
                for t in s.turns
            ]
            for start in range(0, len(msgs), MESSAGES_PER_CALL):
                batch = msgs[start : start + MESSAGES_PER_CALL]
                task = sdk.thread.add_messages(thread, messages=batch).task
                if task is not None and task.uuid_:
                    u.tasks.add(task.uuid_)
                else:
                    u.untracked[thread] = u.untracked.get(thread, 0) + len(batch)
        return Ingest(ready=False)  # Usage(): Zep reports no tokens

    def _ready(self, sdk: Any, unit: str) -> bool:
        u = self._unit(sdk, unit)
        for uuid in sorted(u.tasks):
            task = sdk.task.get(uuid)
            if task.status == FAILED:
                why = task.error.message if task.error is not None else "no reason given"
                raise RuntimeError(f"graph extraction task {uuid} failed: {why}")
            if task.status in DONE:
                u.tasks.discard(uuid)
        for thread, sent in list(u.untracked.items()):
            episodes = list(sdk.thread.list_episodes(thread))
            if len(episodes) >= sent and all(e.processed for e in episodes):
                del u.untracked[thread]
        return not u.tasks and not u.untracked

    def _retrieve(self, sdk: Any, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        from zep_cloud.types import DateFilter, DateFilterGroup, DateFilters, EdgeSearchFilters

        u = self._unit(sdk, unit)
        # Facts Zep dates after the question are filtered by the service itself; undated facts stay (the
        # harness then dates them by their episodes' sessions, below, and audits them).
        dated = DateFilters(
            any_of=[
                DateFilterGroup(all_of=[DateFilter(field="valid_at", operator="lte", value=parse_iso(as_of))]),
                DateFilterGroup(all_of=[DateFilter(field="valid_at", operator="is_null")]),
            ]
        )
        page = sdk.graph.search_edges(
            u.graph_uuid,
            query=query,
            page_size=top_k,
            reranker=self.reranker,
            filters=EdgeSearchFilters(date_filters=dated),
        )
        items = [
            MemoryItem(text=e.fact or "", score=e.score, provenance=self._provenance(sdk, u, e))
            for e in (page.items or [])[:top_k]  # first page only: search ranks a limited set, top_k of it
        ]
        return Retrieval(tuple(items))

    def _provenance(self, sdk: Any, u: _Unit, edge: Any) -> Provenance:
        """A fact's session: the one all its episodes' threads map to (None when several or unknown). Its date:
        the earliest session it was said in, else Zep's `valid_at`. Never the edge's `created_at`: in v4 that is
        when Zep built the edge (the run's wall clock), which would date every fact after any question."""
        from zep_cloud.errors import NotFoundError

        threads, dates = set(), []
        for ep in edge.episode_uuids or []:
            if ep not in u.episodes:
                try:
                    e = sdk.graph.episode.get(u.graph_uuid, ep)
                    u.episodes[ep] = (e.thread_uuid, iso_of(e.reference_time))
                except NotFoundError:  # an episode gone (Zep may prune): the fact stays, its source unknown
                    u.episodes[ep] = (None, None)
            thread, date = u.episodes[ep]
            threads.add(u.sessions.get(thread or "", (None, None))[0])
            if date:
                dates.append(date)
        session = threads.pop() if len(threads) == 1 else None
        return Provenance(session_id=session, date=min(dates) if dates else iso_of(edge.valid_at))

    def _teardown(self, sdk: Any, unit: str) -> None:
        from zep_cloud.errors import NotFoundError

        try:
            u = self._unit(sdk, unit)
        except NotFoundError:  # no such user: nothing to forget
            return
        sdk.user.delete(u.user_uuid)  # its threads, messages and graph go with it (Zep: UserDeleteResult)
        self._units.pop(unit, None)
