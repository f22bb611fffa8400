"""What `lme-harness plan` puts in place of a remote memory provider (a hosted service, one over HTTP): a plan
makes no call and sends nothing anywhere, so it must neither upload a case's history nor spend on the service.

Its retrieval is an upper bound for the reader: `top_k` items made of the case's turns, newest first, each long
enough that together they pass the context cap, which the contestant then cuts as it cuts any provider's items. The
reader's call is therefore planned at the cap; what the service itself spends (its own LLM and embedding calls) is
not planned, and the plan says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.memory.provider import (
    REQUIRED_CALLS,
    Capabilities,
    Ingest,
    MemoryItem,
    MemorySession,
    Provenance,
    ProviderBase,
    Retrieval,
)


def is_remote(provider: object) -> bool:
    """Whether `provider` reaches a service outside this process (declared by its class: `remote = True`)."""
    return bool(getattr(provider, "remote", False))


class PlannedProvider(ProviderBase):
    """Stands in for the remote provider `name` in a plan; sends nothing."""

    def __init__(self, name: str, cap_tokens: int) -> None:
        self.name = name
        self.cap_tokens = cap_tokens
        self._sessions: dict[str, tuple[MemorySession, ...]] = {}

    def capabilities(self) -> Capabilities:
        return Capabilities(self.name, "planned: no request sent", REQUIRED_CALLS)

    def setup(self, unit: str) -> None:
        self._sessions[unit] = ()

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        self._sessions[unit] = tuple(sessions)
        return Ingest()

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        # ~5 characters a token is generous for English text: top_k items of this size pass the cap together
        per_item = 5 * self.cap_tokens // max(top_k, 1) + 1
        items: list[MemoryItem] = []
        text, first = "", None
        for s in reversed(self._sessions.get(unit, ())):
            for i, t in reversed(list(enumerate(s.turns))):
                text, first = f"{t.role}: {t.content}\n{text}", first or Provenance(s.session_id, i, s.date)
                if len(text) >= per_item:
                    items.append(MemoryItem(text, None, first))
                    if len(items) == top_k:
                        return Retrieval(tuple(items))
                    text, first = "", None
        if text:
            items.append(MemoryItem(text, None, first))
        return Retrieval(tuple(items))

    def teardown(self, unit: str) -> None:
        self._sessions.pop(unit, None)
