"""Rendering of search hits and loaded windows into the reference's JSON shapes (or our compact one)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from harness.retrieval import text as tx
from harness.retrieval.index import CaseIndex


def rfc3339(ts: float) -> str:
    """Go's time.Time JSON form (RFC 3339, UTC, fractional seconds without trailing zeros)."""
    micros = round(ts * 1_000_000)
    dt = datetime.fromtimestamp(micros // 1_000_000, tz=UTC)
    frac = micros % 1_000_000
    base = dt.strftime("%Y-%m-%dT%H:%M:%S")
    return base + (f".{frac:06d}".rstrip("0") if frac else "") + "Z"


def _go_number(x: float) -> float | int:
    # Go prints integral floats without ".0"; Python's json would write "1.0".
    return int(x) if float(x).is_integer() and abs(x) < 1e15 else float(x)


def window(index: CaseIndex, doc: int, before: int, after: int) -> list[int] | None:
    """Indexed documents around `doc` (±before/after among indexed ones); None if `doc` isn't indexed.

    Like the reference's GetEventWindow: the anchor must have indexed text, neighbours skip rows
    without it, and the summary boundary does not limit the window.
    """
    if not index.docs[doc].indexed:
        return None
    prev = [i for i in range(doc - 1, -1, -1) if index.docs[i].indexed][:before]
    nxt = [i for i in range(doc + 1, len(index)) if index.docs[i].indexed][:after]
    return list(reversed(prev)) + [doc] + nxt


def message(index: CaseIndex, i: int) -> dict[str, Any]:
    d = index.docs[i]
    return {"event_id": d.event_id, "role": d.role, "created": rfc3339(d.timestamp), "content": d.text}


def reference_hit(
    index: CaseIndex,
    doc: int,
    score: float,
    *,
    scope: str,
    session_id: str,
    win: list[int] | None,
    snippet_chars: int = tx.MAX_SNIPPET,
) -> dict[str, Any]:
    """One `results` entry: window snippet + full-text context for expanded hits, else a compacted text."""
    d = index.docs[doc]
    if win:
        snippet = tx.window_snippet([(index.docs[i].role, index.docs[i].text, i == doc) for i in win])
    else:
        snippet = tx.compact(d.text, snippet_chars)
    out: dict[str, Any] = {
        "scope": scope,
        "session_id": session_id,
        "event_id": d.event_id,
        "created": rfc3339(d.timestamp),
        "role": d.role,
        "score": _go_number(score),
        "snippet": snippet or "<empty>",
    }
    if win:
        out["context"] = [message(index, i) for i in win]
    return out


def compact_hits(
    hits: list[tuple[CaseIndex, int, float, str | None]],
    terms: set[str],
    *,
    budget_chars: int,
    hit_chars: int,
    top_hit_chars: int | None = None,
    top_hits: int = 1,
) -> list[dict[str, Any]]:
    """Hit texts in rank order within `budget_chars`; long texts become query-focused excerpts.

    `hits` holds (index, doc, score, session id when not the current session). `top_hit_chars`: each of
    the first `top_hits` hits may be that long (whole when it fits, else excerpted to it); only its first
    `hit_chars` count against the budget, so the hits after it keep their share.
    """
    left = budget_chars
    out: list[dict[str, Any]] = []
    for rank, (index, doc, score, other_session) in enumerate(hits):
        if out and left < 80:
            break
        d = index.docs[doc]
        limit = min(hit_chars, max(left, 80))
        if rank < top_hits and top_hit_chars is not None:
            limit = max(limit, top_hit_chars)
        # A message that fits goes out verbatim (line breaks kept: lists and code stay readable and the text
        # matches the event's); a longer one becomes an excerpt with whitespace collapsed.
        text = d.text if len(d.text) <= limit else tx.excerpt(d.text, terms, limit)
        left -= min(len(text), hit_chars)
        entry: dict[str, Any] = {
            "event_id": d.event_id,
            "role": d.role,
            "score": round(float(score), 4),
            "snippet": text,
        }
        if other_session:
            entry["session_id"] = other_session
        out.append(entry)
    return out
