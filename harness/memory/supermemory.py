"""supermemory (hosted; PyPI `supermemory` 5.x, its v5 namespace API) as a memory provider.

Mapping (harness/memory/hosted.py has the shared rules: key from the env, errors, one scope per unit):

- unit → one supermemory *namespace* (`scope(unit)`); teardown deletes the namespace with its documents and
  memories. setup has nothing to create: a namespace exists from its first document.
- ingest → one document per session (`add`): the session as a dated transcript (`hosted.transcript`), its own id
  (the session id, unique within the unit), the session's date as the document's `date`, and metadata
  `session_id`, `session_date` (ISO) and `session_ts` (epoch seconds, for the as-of filter). supermemory processes
  documents asynchronously, so ingest returns `ready=False` and `ready` polls each document until both its
  processing `status` and its memory generation (`dreamingStatus`) are done; a document that ends `failed` fails
  the unit (a failed case, never a wrong answer).
- retrieve → `search` in the namespace with `limit=top_k`, `searchMode` (hybrid by default: learned memories and
  source chunks) and the filter `session_ts <= as_of`, so the service never returns what was said after the
  question; nothing is dropped here (the harness's leakage audit counts what the service returns). Each result is an
  item: its memory or chunk text, its `similarity` as the score, and the session id and date from its metadata.
- usage: supermemory reports no token counts or cost per call; ingest and retrieval usage stay zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.memory.hosted import HostedProvider, epoch_seconds, iso_of, transcript
from harness.memory.provider import Ingest, MemoryItem, MemorySession, Provenance, Retrieval

SEARCH_MODES = ("hybrid", "memories", "chunks")


class SupermemoryProvider(HostedProvider):
    NAME = "supermemory"
    DISTRIBUTION = "supermemory"
    ASYNC_INGEST = True

    def __init__(self, api_key_env: str = "SUPERMEMORY_API_KEY", search_mode: str = "hybrid", **kwargs: Any) -> None:
        super().__init__(api_key_env, **kwargs)
        if search_mode not in SEARCH_MODES:
            raise ValueError(f"supermemory: search_mode must be one of {SEARCH_MODES}, got {search_mode!r}")
        self.search_mode = search_mode
        self._documents: dict[str, list[str]] = {}  # unit → its documents not yet seen done, polled by `ready`

    def _client_for(self, key: str) -> Any:
        from supermemory import Supermemory

        return Supermemory(api_key=key, base_url=self.base_url, timeout=self.timeout_s, httpx_client=self._http_client)

    def _setup(self, sdk: Any, unit: str) -> None:
        self._documents[unit] = []

    def _ingest(self, sdk: Any, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        ids = self._documents.setdefault(unit, [])
        for s in sessions:
            ref = sdk.add(
                self.scope(unit),
                content=transcript(s),
                id=s.session_id,
                date=s.date,
                metadata={"session_id": s.session_id, "session_date": s.date, "session_ts": epoch_seconds(s.date)},
            )
            ids.append(ref.id)
        return Ingest(ready=False)

    def _ready(self, sdk: Any, unit: str) -> bool:
        pending = self._documents.get(unit, [])
        while pending:  # a document seen done is not asked about again
            system = sdk.documents.get(self.scope(unit), pending[0]).system
            if system.status == "failed":
                raise RuntimeError(f"document {pending[0]!r} failed processing")
            if system.status != "done" or system.dreaming_status != "done":
                return False
            pending.pop(0)
        return True

    def _retrieve(self, sdk: Any, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        found = sdk.search(
            self.scope(unit),
            query=query,
            limit=top_k,
            search_mode=self.search_mode,
            filter={"field": "session_ts", "operator": "lte", "value": epoch_seconds(as_of)},
        )
        items = []
        for r in found.results:
            meta = r.metadata or {}
            session = meta.get("session_id")
            items.append(
                MemoryItem(
                    text=r.memory if r.memory is not None else (r.chunk or ""),
                    score=r.similarity,
                    provenance=Provenance(
                        session_id=session if isinstance(session, str) else None,
                        date=iso_of(meta.get("session_date")),
                    ),
                )
            )
        return Retrieval(tuple(items))

    def _teardown(self, sdk: Any, unit: str) -> None:
        self._documents.pop(unit, None)
        sdk.namespaces.delete(self.scope(unit))
