"""Letta (PyPI `letta-client`) as a retrieval-only memory provider: one agent per unit, its archival memory.

Mapping (harness/memory/hosted.py holds the shared part: key from the env, errors, scope):

- setup: `POST /v1/agents/` creates an agent named `scope(unit)`; its id is kept for the unit. The agent is never
  messaged: it exists only to own an archival-memory store, so its LLM handle (`agent_model`) is never called, while
  its embedding handle (`agent_embedding`) decides what search returns.
- ingest: one archival passage per turn (`POST /v1/agents/{id}/archival-memory`), text `[date] role: content`,
  `created_at` the session's date, tags carrying session id, turn index and date (a search result has no metadata,
  only its tags). Per turn, not per exchange: every item then has one exact turn index (the provenance the harness
  scores), as the harness's own turn-level retrievers have. Insertion is synchronous (the reply is the stored
  passages), so ingest is ready at once. Letta reports no token usage here: `Usage()` is zero, not "free".
- retrieve: `GET /v1/agents/{id}/archival-memory/search` with `top_k` and `end_datetime=as_of`: the service filters
  by date; nothing is dropped here, so the harness's leakage audit sees what the service returned. The search
  reports no score (`score=None`).
- teardown: `DELETE /v1/agents/{id}`; an agent this process did not create (a unit a killed run left) is found
  by its name first (`GET /v1/agents/?name=`).
- attach (a resumed run): the unit's agent, found by its name, still exists (its passages were inserted
  synchronously before the harness checkpointed the unit, so an existing agent is a complete one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.memory.hosted import HostedProvider, iso_of
from harness.memory.provider import Ingest, MemoryItem, MemorySession, Provenance, ProviderError, Retrieval, Usage

CLOUD_URL = "https://api.letta.com"  # the SDK's "cloud" environment; a self-hosted server is usually :8283
# Tag prefixes carrying provenance (a search result returns content, timestamp and tags only).
SESSION_TAG, TURN_TAG, DATE_TAG = "lme-session:", "lme-turn:", "lme-date:"


def passage_text(date: str, role: str, content: str) -> str:
    """What is stored and what the reader sees: the turn with its session's date and role."""
    return f"[{date}] {role}: {content}"


def provenance_of(tags: Sequence[str] | None, timestamp: Any = None) -> Provenance:
    """Provenance from a passage's tags; its date from the timestamp only when no date tag is there."""
    found = {p: t[len(p) :] for t in tags or () for p in (SESSION_TAG, TURN_TAG, DATE_TAG) if t.startswith(p)}
    turn = found.get(TURN_TAG)
    return Provenance(
        session_id=found.get(SESSION_TAG),
        turn_index=int(turn) if turn is not None and turn.isdigit() else None,
        date=found.get(DATE_TAG) or iso_of(timestamp),
    )


class LettaProvider(HostedProvider):
    """Letta behind the provider contract. `agent_model`/`agent_embedding`: the agent's handles (provider/model-name);
    `max_retries`: the SDK's own retries of a failed request (0: each failure surfaces at once)."""

    ATTACH = True

    NAME = "letta"
    DISTRIBUTION = "letta-client"

    def __init__(
        self,
        api_key_env: str = "LETTA_API_KEY",
        *,
        agent_model: str = "openai/gpt-4o-mini",
        agent_embedding: str = "openai/text-embedding-3-small",
        max_retries: int = 2,
        **kwargs: Any,
    ) -> None:
        super().__init__(api_key_env, **kwargs)
        if not agent_model or not agent_embedding:
            raise ValueError(f"letta: agent handles must be given, got {agent_model!r}, {agent_embedding!r}")
        if max_retries < 0:
            raise ValueError(f"letta: max_retries must be >= 0, got {max_retries!r}")
        self.agent_model, self.agent_embedding, self.max_retries = agent_model, agent_embedding, max_retries
        self._agents: dict[str, str] = {}  # unit -> its agent's id

    def _client_for(self, key: str) -> Any:
        from letta_client import Letta

        # base_url is always passed: with none the SDK would read LETTA_BASE_URL, a setting outside the config.
        return Letta(
            api_key=key,
            base_url=self.base_url or CLOUD_URL,
            timeout=self.timeout_s,
            max_retries=self.max_retries,
            http_client=self._http_client,
        )

    def _agent(self, call: str, unit: str) -> str:
        agent = self._agents.get(unit)
        if agent is None:
            raise ProviderError(self.NAME, call, unit, "unknown unit (call setup first)")
        return agent

    def _find(self, sdk: Any, unit: str) -> str | None:
        """The id of the agent named `scope(unit)` on the service (None when there is none)."""
        page = sdk.agents.list(name=self.scope(unit), limit=2)  # the first page only: a name is one agent
        found = [a for a in (page.items or []) if a.name == self.scope(unit)]
        if len(found) > 1:
            raise RuntimeError(f"{len(found)} agents are named {self.scope(unit)!r}; not attaching to either")
        return found[0].id if found else None

    def _attach(self, sdk: Any, unit: str) -> bool:
        agent = self._find(sdk, unit)
        if agent is not None:
            self._agents[unit] = agent
        return agent is not None

    def _setup(self, sdk: Any, unit: str) -> None:
        if unit in self._agents:  # a repeated setup starts empty: the earlier agent goes first
            self._teardown(sdk, unit)
        # timezone UTC: search results' `timestamp` is written in the agent's timezone.
        agent = sdk.agents.create(
            name=self.scope(unit), model=self.agent_model, embedding=self.agent_embedding, timezone="UTC"
        )
        self._agents[unit] = agent.id

    def _ingest(self, sdk: Any, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        agent = self._agent("ingest", unit)
        for s in sessions:  # in date order (the base sorts them)
            for i, turn in enumerate(s.turns):
                if not turn.content.strip():  # nothing to store (the service may refuse empty text)
                    continue
                sdk.agents.passages.create(
                    agent,
                    text=passage_text(s.date, turn.role, turn.content),
                    created_at=s.date,
                    tags=[f"{SESSION_TAG}{s.session_id}", f"{TURN_TAG}{i}", f"{DATE_TAG}{s.date}"],
                )
        return Ingest(usage=Usage())  # Letta reports no tokens for archival inserts

    def _retrieve(self, sdk: Any, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        agent = self._agent("retrieve", unit)
        found = sdk.agents.passages.search(agent, query=query, top_k=top_k, end_datetime=as_of)
        items = tuple(
            MemoryItem(text=r.content, score=None, provenance=provenance_of(r.tags, r.timestamp)) for r in found.results
        )
        return Retrieval(items)

    def _teardown(self, sdk: Any, unit: str) -> None:
        agent = self._agents.get(unit) or self._find(sdk, unit)  # a unit of an earlier process: by its name
        if agent is None:
            return
        sdk.agents.delete(agent)
        self._agents.pop(unit, None)  # only once deleted: a failed delete can be retried
