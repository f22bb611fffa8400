"""The reference's query latency, next to ours.

The reference (trpc-agent-go-benchmark @ 1edee87, `query_duration_ms`) times `runner.Run` until its event
channel drains. Its summary modes use the pgvector session service with synchronous indexing
(framework @ 9b4e406, session/pgvector), so every event the runner appends during the query is embedded
before the run goes on: the question, each tool result (indexed as "<tool>: <content>") and the final
answer; assistant tool-call events are not indexed. long_context uses the in-memory service: nothing is
embedded. This harness appends nothing during a query, so `query_ms` leaves that time out; here the same
texts are embedded one request per event, as the reference did, with the run's retrieval embedder.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from harness.llm.client import embedding_call_log

PGVECTOR_MODES = ("summary", "summary_ondemand")


def reference_latency_setting(value: Any) -> str:
    """`run.reference_latency`: auto (measure with a local embedder only: a default run sends no request it
    did not send before), true (always, also through a remote embedder: a few short requests per case), false."""
    v = {True: "true", False: "false"}.get(value, str(value).lower()) if value is not None else "false"
    if v not in ("auto", "true", "false"):
        raise ValueError(f"run.reference_latency: {value!r} is not one of auto, true, false")
    return v


def should_measure(setting: str, embedder: Any) -> bool:
    if setting == "auto":
        return getattr(embedder, "client", None) is None  # OpenAIEmbedder talks to an endpoint through .client
    return setting == "true"


def appended_event_texts(
    mode: str, question: str, tool_results: Sequence[tuple[str, str]], prediction: str
) -> list[str]:
    """The texts the reference's session service embedded while this query ran."""
    if mode not in PGVECTOR_MODES:
        return []
    texts = [question, *(f"{name}: {content}" for name, content in tool_results)]
    if prediction:
        texts.append(prediction)
    return texts


def embed_appended(embedder: Any, texts: Sequence[str]) -> tuple[float | None, list[dict[str, Any]]]:
    """(milliseconds, embedding call records) to embed `texts` one request each; (None, []) without an
    embedder. Remote calls count their measured latency (kept when replayed from the cache), local ones
    their wall time."""
    if not texts:
        return 0.0, []
    if embedder is None:
        return None, []
    with embedding_call_log() as calls:
        t0 = time.perf_counter()
        for t in texts:
            embedder.embed([t])
        wall_s = time.perf_counter() - t0
    ms = sum(float(c.get("latency_s", 0.0)) for c in calls) * 1000 if calls else wall_s * 1000
    return round(ms, 1), list(calls)


def latency_fields(query_ms: float, mode: str, embed_ms: float | None, n_events: int) -> dict[str, Any]:
    """`query_ms_reference` (= the published table's definition) and its parts, for a record's `latency`."""
    if mode not in PGVECTOR_MODES:
        return {"query_ms_reference": query_ms, "append_embed_ms": 0.0, "append_embedded_events": 0}
    return {
        "query_ms_reference": None if embed_ms is None else round(query_ms + embed_ms, 1),
        "append_embed_ms": embed_ms,
        "append_embedded_events": n_events,
    }
