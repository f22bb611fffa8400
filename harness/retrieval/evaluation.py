"""Retrieval-only evaluation against LongMemEval's `has_answer` turn labels (no language model).

For each answerable case the whole haystack is hidden behind one summary boundary (as in
summary_ondemand), the question is the query, and `session_search` runs through the real tool path.
Metrics follow LongMemEval's retrieval evaluation (src/retrieval/eval_utils.py): turn-level
recall_any@k, recall_all@k and NDCG@k (binary relevance), and session-level recall@k over the
distinct haystack sessions of the ranked turns.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.retrieval.floor import shown_text
from harness.retrieval.tools import SessionTools
from harness.session.boundary import SummaryBoundary
from harness.session.events import Event, Session

KS = (1, 3, 5, 10)


def recall_any(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    return float(any(r in relevant for r in ranked[:k]))


def recall_all(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    return float(relevant <= set(ranked[:k])) if relevant else 0.0


def ndcg(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, r in enumerate(ranked[:k]) if r in relevant)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / idcg if idcg else 0.0


def session_ranking(ranked_events: Sequence[str], session_of: dict[str, str | None]) -> list[str]:
    """Distinct sessions in order of their first ranked turn."""
    out: list[str] = []
    for eid in ranked_events:
        sid = session_of.get(eid)
        if sid is not None and sid not in out:
            out.append(sid)
    return out


def case_metrics(ranked: Sequence[str], events: Sequence[Event], ks: Iterable[int] = KS) -> dict[str, float]:
    relevant = {e.id for e in events if e.has_answer}
    session_of = {e.id: e.source_session for e in events}
    rel_sessions = {e.source_session for e in events if e.has_answer and e.source_session}
    sessions = session_ranking(ranked, session_of)
    m: dict[str, float] = {}
    for k in ks:
        m[f"turn_recall_any@{k}"] = recall_any(ranked, relevant, k)
        m[f"turn_recall_all@{k}"] = recall_all(ranked, relevant, k)
        m[f"turn_ndcg@{k}"] = ndcg(ranked, relevant, k)
        m[f"session_recall@{k}"] = recall_any(sessions, rel_sessions, k)
    return m


def hidden_session(
    case_id: str, events: Sequence[Event], mode: str = "summary_ondemand"
) -> tuple[Session, SummaryBoundary]:
    """The session and boundary summary_ondemand sees: every seeded event is behind the summary."""
    s = Session(id=f"{mode}-{case_id}", user_id=case_id, app="summary-lme-ondemand", events=list(events))
    last = events[-1]
    return s, SummaryBoundary(version=1, filter_key="", cutoff_at=last.timestamp, last_event_id=last.id)


@dataclass
class CaseResult:
    question_id: str
    n_events: int
    index_s: float
    query_ms: float
    ranked: list[str]
    metrics: dict[str, float]
    path: str = ""
    response_tokens: int | None = None
    response_has_evidence: bool | None = None  # full text of an evidence turn appears in the response
    response_hits_evidence: bool | None = None  # an evidence turn is among the returned hits
    evidence_tokens: int | None = None  # response prefix (tokens) that carries an evidence turn whole
    # budget (o200k tokens) -> the model-like response built at that `budget_tokens` (`at_budget`)
    at_budget: dict[int, dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def evidence_in_response(content: str, events: Sequence[Event]) -> tuple[bool, bool]:
    """(an evidence turn's full text is in the response, an evidence turn's id is a hit)."""
    try:
        body = json.loads(content)
    except json.JSONDecodeError:
        return False, False
    relevant = {e.id: e.content.strip() for e in events if e.has_answer}
    results = body.get("results", [])
    hit_ids = {r.get("event_id") for r in results}
    blob = shown_text(results)  # the text the budgeted compact response is built to hold (floor.holds)
    full = any(t and t in blob for t in relevant.values())
    return full, bool(hit_ids & set(relevant))


def evidence_tokens(content: str, events: Sequence[Event], counter) -> int | None:
    """Tokens of the shortest prefix of the response that holds an evidence turn's full text, or None.

    A response cut to a budget of B tokens carries the evidence exactly when this is ≤ B, so one number per
    case gives the budget-matched figure for every budget. The text is looked for as the response writes it
    (JSON-escaped), in snippets and windows alike.
    """
    from harness.golang import go_json

    best: int | None = None
    for e in events:
        text = e.content.strip() if e.has_answer else ""
        if not text:
            continue
        pos = content.find(go_json(text)[1:-1])
        if pos < 0:
            continue
        n = counter.count(content[: pos + len(go_json(text)) - 2])
        best = n if best is None else min(best, n)
    return best


def at_budget(tools, events: Sequence[Event], question: str, counter=None) -> dict[str, Any]:
    """The model-like response of `tools` (built with a `budget_tokens`): its tokens, an evidence turn whole in it
    (`evidence`), an evidence turn among its hits (`hit`: recall over every hit the budget holds) and among its first
    five hits (`turn_recall_any@5`), whether the budget held the whole response (`complete`: nothing left out), and
    whether a compact preset's fill response went out in place of its own composition (`fill_instead`:
    harness/retrieval/floor.py)."""
    out = tools.call("session_search", json.dumps({"query": question, "scope": "current_hidden"}))
    whole, hit = evidence_in_response(out.content, events)
    ranked = list(dict.fromkeys(h["event_id"] for h in out.trace.get("hits", [])))
    cut = out.trace.get("budget") or {}
    return {
        "tokens": counter.count(out.content) if counter is not None else None,
        "evidence": whole,
        "hit": hit,
        "turn_recall_any@5": recall_any(ranked, {e.id for e in events if e.has_answer}, 5),
        "complete": not cut.get("entries_left_out") and not cut.get("messages_left_out"),
        "fill_instead": bool(cut.get("fill_response_instead")),
    }


def evaluate_case(
    retriever,
    case_id: str,
    events: Sequence[Event],
    question: str,
    *,
    counter=None,
    top_k: int = 10,
    budget_configs: Mapping[int, Any] | None = None,
) -> CaseResult:
    """Index the case (timed), rank with top_k, and measure the default (model-like) response; with
    `budget_configs` (budget → the retriever's `SearchConfig` with that `budget_tokens`), that response at each."""
    session, boundary = hidden_session(case_id, events)
    t0 = time.perf_counter()
    tools = retriever.tools(session, boundary=boundary)
    index_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    out = tools.call("session_search", {"query": question, "top_k": top_k})
    query_ms = (time.perf_counter() - t1) * 1000
    ranked = [h["event_id"] for h in out.trace.get("hits", [])]
    res = CaseResult(
        case_id, len(events), index_s, query_ms, ranked, case_metrics(ranked, events), out.trace.get("path", "")
    )
    # The response a model gets for the question as it would call the tool (default top_k).
    default = tools.call("session_search", json.dumps({"query": question, "scope": "current_hidden"}))
    res.response_has_evidence, res.response_hits_evidence = evidence_in_response(default.content, events)
    if counter is not None:
        res.response_tokens = counter.count(default.content)
        res.evidence_tokens = evidence_tokens(default.content, events, counter)
    res.extra["default_query_ms"] = default.trace.get("latency_ms")
    for b, config in (budget_configs or {}).items():
        res.at_budget[b] = at_budget(
            SessionTools(session, tools.index, boundary=boundary, config=config), events, question, counter
        )
    return res


def summarize(results: Sequence[CaseResult]) -> dict[str, float]:
    keys = results[0].metrics.keys() if results else []
    out = {k: float(np.mean([r.metrics[k] for r in results])) for k in keys}
    q = np.array([r.query_ms for r in results])
    d = np.array([r.extra.get("default_query_ms") or np.nan for r in results], dtype=float)
    idx = np.array([r.index_s for r in results])
    out.update(
        {
            "cases": len(results),
            "query_ms_p50": float(np.percentile(q, 50)),
            "query_ms_p90": float(np.percentile(q, 90)),
            "query_ms_p99": float(np.percentile(q, 99)),
            "default_query_ms_p50": float(np.nanpercentile(d, 50)) if np.isfinite(d).any() else float("nan"),
            "index_s_mean": float(idx.mean()),
            "index_s_max": float(idx.max()),
        }
    )
    toks = [r.response_tokens for r in results if r.response_tokens is not None]
    if toks:
        out["response_tokens_mean"] = float(np.mean(toks))
        out["response_tokens_p90"] = float(np.percentile(toks, 90))
        out["response_tokens_max"] = float(np.max(toks))
    out["response_has_evidence"] = float(np.mean([bool(r.response_has_evidence) for r in results]))
    out["response_hits_evidence"] = float(np.mean([bool(r.response_hits_evidence) for r in results]))
    return out


BY_TYPE_KEYS = ("turn_recall_any@1", "turn_recall_any@5", "response_has_evidence", "response_tokens_mean")


def summarize_by_type(results: Sequence[CaseResult], type_of: dict[str, str]) -> dict[str, dict[str, float]]:
    """Per question type (sorted): cases and the BY_TYPE_KEYS figures of `summarize` over that type's cases.
    `type_of` maps question_id → question type; a result whose id it lacks is one KeyError naming the id."""
    groups: dict[str, list[CaseResult]] = {}
    for r in results:
        if r.question_id not in type_of:
            raise KeyError(f"summarize_by_type: no question type for question_id {r.question_id!r}")
        groups.setdefault(type_of[r.question_id], []).append(r)
    out: dict[str, dict[str, float]] = {}
    for qtype in sorted(groups):
        s = summarize(groups[qtype])
        out[qtype] = {"cases": s["cases"], **{k: s[k] for k in BY_TYPE_KEYS if k in s}}
    return out
