"""What a contestant spent on one question, phase by phase, read from its record (no price table here: reports/cost.py
prices it).

A contestant's work on a question has three phases, and every cost view shows all three:

- **ingest**: building its memory of the history. A summary contestant's summary (the one it used, also when another
  contestant generated it: `summary_calls`), else the model calls the contestant made while ingesting (the record's
  `ingest` counts); a memory provider's ingest usage as it reported it (`ingest.trace[0].usage`: mem0's extraction
  calls, a service's own figures); the embedding calls made while ingesting (an index over the history).
- **retrieve**: the query-time work before the answer: a memory provider's retrieve usage (or its own answer's, in
  the `native_answer` variant) and the embedding calls made while answering (query vectors).
- **answer**: the answer model's calls (`calls`: every round of a tool loop).

The judge's calls are the measurement's, not the contestant's: `judge_calls`, priced apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.records import Record

RecordLike = Record | Mapping[str, Any]  # a typed record, or its JSON object
ByKey = Mapping[tuple[str, str], RecordLike]
PROVIDER_QUERY_CALLS = ("memory_retrieve", "memory_answer")  # the tool trace entries of a provider's query-time call


def typed_record(rec: RecordLike) -> Record:
    return rec if isinstance(rec, Record) else Record.from_json(rec)


def judge_calls(rec: RecordLike) -> list[dict[str, Any]]:
    """The judge calls of a record: every scorer detail that carries a ChatResult record as `usage`; a voted
    judge's (harness/scoring/votes.py) are its `votes`, every one a call (its top-level usage is one of them)."""
    out = []
    for det in (typed_record(rec).metric_details or {}).values():
        if not isinstance(det, Mapping):
            continue
        votes = det.get("votes")
        for call in votes if isinstance(votes, list) else [det]:
            u = call.get("usage") if isinstance(call, Mapping) else None
            if isinstance(u, Mapping) and "usage" in u:
                out.append(dict(u))
    return out


def summary_calls(rec: RecordLike, by_key: ByKey) -> list[dict[str, Any]]:
    """Calls that produced the summary this record used; a shared summary is looked up in the mode it was made for."""
    r = typed_record(rec)
    summ = r.summary or {}
    if not summ:
        return []
    made_for = summ.get("generated_for")
    if summ.get("reused") and made_for and made_for != r.mode:
        src = by_key.get((r.question_id, made_for))
        return list(((typed_record(src).summary or {}).get("calls") if src is not None else None) or [])
    return list(summ.get("calls") or [])


def embedding_calls(rec: RecordLike) -> list[dict[str, Any]]:
    """Embedding requests, when the retrieval layer records them (`embedding_calls`: [{model, usage}])."""
    return [dict(c) for c in (typed_record(rec).embedding_calls or [])]


def _tokens(call: Mapping[str, Any]) -> int:
    return int((call.get("usage") or {}).get("prompt_tokens") or 0)


def split_embedding_calls(rec: RecordLike) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(ingest's, the rest): the pipeline writes a pair's embedding calls in order, ingest's first, and counts
    ingest's tokens apart (`ingest.embedding_tokens`), so ingest's are the leading calls that make up that count."""
    calls = embedding_calls(rec)
    want = int((typed_record(rec).ingest or {}).get("embedding_tokens") or 0)
    n = got = 0
    while n < len(calls) and got < want:
        got += _tokens(calls[n])
        n += 1
    return calls[:n], calls[n:]


def provider_ingest(rec: RecordLike) -> Mapping[str, Any] | None:
    """A memory provider's ingest trace (`ingest.trace[0]`: provider, variant, usage, times), None for other contestants."""
    trace = (typed_record(rec).ingest or {}).get("trace") or []
    first = trace[0] if trace and isinstance(trace[0], Mapping) else None
    return first if first and first.get("call") == "ingest" and "provider" in first else None


def provider_query(rec: RecordLike) -> Mapping[str, Any] | None:
    """A memory provider's query-time trace (`memory_retrieve`, or `memory_answer` for the native_answer variant)."""
    found = [t for t in typed_record(rec).tool_calls or () if t.get("name") in PROVIDER_QUERY_CALLS]
    return found[0] if found else None


def llm_tokens(usage: Mapping[str, Any] | None) -> int:
    """A provider's reported LLM tokens (input + output)."""
    u = usage or {}
    return int(u.get("input_tokens") or 0) + int(u.get("output_tokens") or 0)


def _call_tokens(calls: list[dict[str, Any]]) -> int:
    return sum(int((c.get("usage") or {}).get("prompt_tokens") or 0) for c in calls) + sum(
        int((c.get("usage") or {}).get("completion_tokens") or 0) for c in calls
    )


@dataclass(frozen=True)
class PhaseTokens:
    """LLM tokens (prompt + completion) of one question, by phase. Embedding tokens are priced, not counted here."""

    answer: int
    ingest: int
    retrieve: int

    @property
    def total(self) -> int:
        return self.answer + self.ingest + self.retrieve


def phase_tokens(rec: RecordLike, by_key: ByKey) -> PhaseTokens:
    r = typed_record(rec)
    ingest = r.ingest or {}
    if r.summary:  # the summary it used (its `ingest` counts a reused one as 0: it cost this contestant nothing)
        own = _call_tokens(summary_calls(r, by_key))
    else:
        own = int(ingest.get("prompt_tokens") or 0) + int(ingest.get("completion_tokens") or 0)
    ing = provider_ingest(r)
    query = provider_query(r)
    return PhaseTokens(
        answer=_call_tokens(list(r.calls or [])),
        ingest=own + llm_tokens(ing.get("usage") if ing else None),
        retrieve=llm_tokens(query.get("usage") if query else None),
    )


def ingest_ms(rec: RecordLike) -> float:
    """The time ingest took: a provider's ingest call and its wait until ready; a summary's generation (model time,
    also when it was generated for another contestant); else the model time of the contestant's ingest calls."""
    r = typed_record(rec)
    ing = provider_ingest(r)
    if ing is not None:
        return _ms(ing.get("ingest_ms")) + _ms(ing.get("ready_wait_ms"))
    if r.summary:
        return _ms(r.summary.get("generation_ms"))
    return _ms((r.ingest or {}).get("model_ms"))


def _ms(v: Any) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if x != x else x
