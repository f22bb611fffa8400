"""The model-facing recall tools `session_search` and `session_load` over one case's session.

Behaviour follows the reference (trpc-agent-go @ 9b4e406, internal/session/tool/recall; spec §5.2):
parameter normalisation, scopes, query variants and broadening, top-2 ±2 windows, response shapes and
error texts. `SearchConfig` selects between the reference's actual behaviour (`tail_filter=True`: hybrid
hits outside the runner's last ≤20 loaded events are dropped, then a lexical substring scan) and the
intended design (hybrid over every hidden event). `call` never raises: every problem with the model's
arguments becomes either a recorded adjustment or an error tool message.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from harness.retrieval import budget, floor, render
from harness.retrieval import reference as ref
from harness.retrieval import text as tx
from harness.retrieval.args import ArgumentError, Coercer, parse_arguments
from harness.retrieval.config import MODES, SearchConfig, preset, recall_cue, speaker_weights
from harness.retrieval.index import CaseIndex, event_text
from harness.retrieval.keyword import analyze
from harness.retrieval.render import rfc3339
from harness.session.boundary import SummaryBoundary
from harness.session.events import Session
from harness.session.tokens import o200k_counter

SCOPES = ("current_hidden", "current_session", "other_sessions", "all_sessions")
DEFAULT_TOP_K = 5
MAX_TOP_K = 10
MAX_WINDOW_SPAN = 4
SCAN_MAX_EVENTS = 10000  # the reference reloads at most this many events for the lexical scan
ERROR_PREFIX = "Error: callable tool execution failed: "  # what the reference's flow put before tool errors


@dataclass(frozen=True)
class ToolOutcome:
    """One tool call's result: `content` is the tool message text given to the model."""

    content: str
    ok: bool
    error: str | None
    trace: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Hit:
    session: Session
    index: CaseIndex
    doc: int  # document index in `index`
    score: float
    source: str  # dense | keyword | hybrid | scan

    @property
    def rank_key(self) -> tuple[float, float]:
        """Best first; ties newer first (the reference's order)."""
        return -self.score, -self.index.docs[self.doc].timestamp


def _best(hits, k: int) -> list[_Hit]:
    return sorted(hits, key=lambda h: h.rank_key)[:k]


def normalize_window(before: int, after: int) -> tuple[int, int]:
    """Negatives → 0; both 0 → 1/1; shrink to a span of 4 (after first while after ≥ before)."""
    # Capping at the span first gives the same result as the loop alone, without 2**70 iterations.
    before, after = min(max(before, 0), MAX_WINDOW_SPAN), min(max(after, 0), MAX_WINDOW_SPAN)
    if before == 0 and after == 0:
        before, after = 1, 1
    while before + after > MAX_WINDOW_SPAN:
        if after >= before and after > 0:
            after -= 1
        elif before > 0:
            before -= 1
        else:
            break
    return before, after


class SessionTools:
    """session_search / session_load bound to one session (one case × mode) and its index.

    `others` are further (session, index) pairs the `other_sessions`/`all_sessions` scopes may search;
    any whose app or user differs from `session`'s is ignored, so a search never crosses users.
    """

    def __init__(
        self,
        session: Session,
        index: CaseIndex,
        *,
        boundary: SummaryBoundary | None,
        config: SearchConfig | None = None,
        others: Sequence[tuple[Session, CaseIndex]] = (),
    ) -> None:
        self.session = session
        self.index = index
        self.boundary = boundary
        self.config = config or SearchConfig()
        self.others = [
            (s, i) for s, i in others if s.user_id == session.user_id and s.app == session.app and s.id != session.id
        ]
        self._recalls: dict[str, bool] = {}  # the recall trigger's decision per query (`_recall`)

    # --- public API ---------------------------------------------------------------------------------
    def specs(self) -> list[dict[str, Any]]:
        """OpenAI tool schemas in the reference's wire order (sorted by name: load, then search)."""
        exact = self.config.wire_exact_schema
        return [
            ref.load_spec(wire_exact=exact),
            ref.search_spec(wire_exact=exact, keyword_mode=self.config.allow_keyword_mode and not exact),
        ]

    def call(self, name: str, arguments: str | dict | None) -> ToolOutcome:
        """Run one tool call; never raises (errors become an error tool message)."""
        started = time.perf_counter()
        raw = arguments.decode("utf-8", "replace") if isinstance(arguments, (bytes, bytearray)) else arguments
        trace: dict[str, Any] = {"tool": name, "raw_arguments": raw}
        try:
            if name == ref.SEARCH_TOOL:
                outcome = self._search(arguments, trace)
            elif name == ref.LOAD_TOOL:
                outcome = self._load(arguments, trace)
            else:
                msg = f"tool not found: {name!r} (available: {ref.SEARCH_TOOL}, {ref.LOAD_TOOL})"
                outcome = ToolOutcome("Error: " + msg, False, msg, trace)
        except Exception as e:  # a bug here must not end the case; the record keeps the cause
            msg = f"{name}: internal error: {type(e).__name__}: {e}"
            outcome = ToolOutcome(ERROR_PREFIX + msg, False, msg, trace)
        outcome.trace["latency_ms"] = round((time.perf_counter() - started) * 1000, 3)
        return outcome

    # --- session_search -----------------------------------------------------------------------------
    def _search(self, arguments: Any, trace: dict[str, Any]) -> ToolOutcome:
        try:
            args = parse_arguments(arguments)
        except ArgumentError as e:
            msg = f"session search tool: {e}"
            return ToolOutcome(ERROR_PREFIX + msg, False, msg, trace)
        c = Coercer(args)
        query = c.string("query").strip()
        raw_scope = c.string("scope")
        scope = raw_scope.strip().lower()
        if scope not in SCOPES:
            if raw_scope:
                c.notes.append(f"scope={raw_scope!r} is unknown; used 'current_hidden'")
            scope = "current_hidden"
        top_k = c.integer("top_k", 0)
        if top_k <= 0:
            if "top_k" in args and args["top_k"] not in (0, None):
                c.notes.append(f"top_k={args['top_k']!r} is not positive; used {DEFAULT_TOP_K}")
            top_k = DEFAULT_TOP_K
        elif top_k > MAX_TOP_K:
            c.notes.append(f"top_k={top_k} is above the cap; used {MAX_TOP_K}")
            top_k = MAX_TOP_K
        min_score = c.clamp("min_score", c.number("min_score", 0.0), 0.0, 1.0)
        mode = self._mode(c.string("search_mode"), c)
        trace["arguments"] = {
            "query": query,
            "scope": scope,
            "top_k": top_k,
            "min_score": min_score,
            "search_mode": mode,
        }
        trace["adjustments"] = c.notes
        if not query:
            body = {"query": "", "scope": "current_hidden", "results": [], "count": 0}
            trace["hits"] = []
            return ToolOutcome(ref.go_json(body), True, None, trace)

        hits = self._run_scope(scope, query, top_k, min_score, mode, trace)
        if self.config.response_style == "compact":
            results = self._render_compact(hits, query)
            hits = hits[: len(results)]
        else:
            results = [self._render_hit(rank, h, scope) for rank, h in enumerate(hits)]
        if self.config.budget_tokens is not None:
            hits, results = self._within_budget(hits, results, query, scope, top_k, min_score, trace)
        trace["hits"] = [
            {"event_id": h.index.docs[h.doc].event_id, "session_id": h.session.id, "score": h.score, "source": h.source}
            for h in hits
        ]
        body = {"query": query, "scope": scope, "results": results, "count": len(results)}
        return ToolOutcome(ref.go_json(body), True, None, trace)

    def _recall(self, query: str) -> bool:
        """Whether the query recalls the assistant's words (`recall_cue`; once per query)."""
        if query not in self._recalls:
            self._recalls[query] = recall_cue(query)
        return self._recalls[query]

    def _recall_prior(self, query: str) -> bool:
        """Whether the ranking treats the query as recall (speaker prior to the assistant, no reply credit)."""
        cfg = self.config
        return cfg.recall_cues and cfg.assistant_weight != 1.0 and self._recall(query)

    def _speaker_weights(self, query: str) -> tuple[float, float]:
        cfg = self.config
        return speaker_weights(query, cfg.assistant_weight, cfg.speaker_prior, recall=self._recall_prior(query))

    def _mode(self, raw: str, c: Coercer) -> str:
        mode = raw.strip().lower() or self.config.default_mode
        if mode == "keyword" and not self.config.allow_keyword_mode:
            mode = "hybrid"  # the reference maps anything but "dense" to hybrid
        if mode not in MODES:
            c.notes.append(f"search_mode={raw!r} is unknown; used {self.config.default_mode!r}")
            mode = self.config.default_mode
        return mode

    def _run_scope(self, scope: str, query: str, k: int, min_score: float, mode: str, trace) -> list[_Hit]:
        if scope == "current_session":
            mask = np.ones(len(self.index), dtype=bool)
            hits = self._search_with_fallback(self.session, self.index, mask, query, k, min_score, mode, trace)
            if not hits and self.config.lexical_fallback:
                hits = self._scan(query, k, boundary=None, trace=trace)
            return hits
        if scope == "other_sessions":
            return self._search_others(query, k, min_score, mode, trace)
        current = self._current_hidden(query, k, min_score, mode, trace)
        if scope == "current_hidden":
            return current
        merged = current + self._search_others(query, k, min_score, mode, trace)
        merged.sort(key=lambda h: h.rank_key)
        out, seen = [], set()
        for h in merged:
            key = (h.session.id, h.index.docs[h.doc].event_id)
            if key not in seen:
                seen.add(key)
                out.append(h)
        return out[:k]

    @cached_property
    def _hidden(self) -> np.ndarray:
        """The `current_hidden` scope of this session's index: fixed for the tools' life, computed once."""
        if self.boundary is None:  # callers check first: nothing is hidden without a boundary
            raise RuntimeError("no summary boundary: the current_hidden scope is empty")
        return self._hidden_mask(self.boundary)

    def _hidden_mask(self, boundary: SummaryBoundary) -> np.ndarray:
        """Documents at or before the summary boundary (by event position when the id is known)."""
        idx = self.index
        mask = idx.timestamps <= boundary.cutoff_at + 1e-9
        last = boundary.last_event_id
        pos = self._position(last) if last else None
        if pos is not None:
            mask &= np.fromiter((d.position <= pos for d in idx.docs), dtype=bool, count=len(idx))
        return mask

    def _position(self, event_id: str) -> int | None:
        for i, e in enumerate(self.session.events):
            if e.id == event_id:
                return i
        return None

    def _current_hidden(self, query: str, k: int, min_score: float, mode: str, trace) -> list[_Hit]:
        b = self.boundary
        if b is None or not b.cutoff_at:
            trace["path"] = "no_boundary"
            return []  # nothing is hidden without a summary boundary (reference behaviour)
        hits = self._search_with_fallback(self.session, self.index, self._hidden, query, k, min_score, mode, trace)
        if self.config.tail_filter:
            before = len(hits)
            hits = self._tail_filter(hits, b)
            trace["tail_filter"] = {"kept": len(hits), "dropped": before - len(hits)}
        if not hits and self.config.lexical_fallback:
            hits = self._scan(query, k, boundary=b, trace=trace)
        return hits

    def _tail_filter(self, hits: list[_Hit], b: SummaryBoundary) -> list[_Hit]:
        """filterCurrentHiddenResults over the runner's loaded session: its last ≤N events."""
        tail = self.session.events[-self.config.visible_events :]
        start = 0
        while start < len(tail) and tail[start].role != "user":
            start += 1  # GetSession drops leading non-user events
        tail = tail[start:]
        ids: set[str] = set()
        found = False
        for e in tail:
            ids.add(e.id)
            if e.id == b.last_event_id:
                found = True
                break
        if found:
            return [h for h in hits if h.index.docs[h.doc].event_id in ids]
        return [h for h in hits if h.index.docs[h.doc].timestamp <= b.cutoff_at + 1e-9]

    def _search_once(self, session: Session, index: CaseIndex, mask, query: str, k: int, min_score: float, mode: str):
        cfg = self.config
        if not index.has_dense:
            mode = "keyword"  # no embedder: every mode is keyword search
        if self._score_level(mode):
            scores, cos = index.score_vector(query, mode, alpha=cfg.alpha)
            uw, aw = self._speaker_weights(query)
            recall = self._recall_prior(query)
            return self._score_ranking(index, scores, cos, mask, k, min_score, uw, aw, recall=recall), mode
        if mode == "keyword":
            return index.keyword_search(query, mask, k, require_all=cfg.keyword_require_all), "keyword"
        if mode == "dense":
            return index.dense_search(query, mask, k, min_score=min_score), "dense"
        return (
            index.hybrid_search(
                query,
                mask,
                k,
                min_score=min_score,
                candidate_ratio=cfg.candidate_ratio,
                rrf_k=cfg.rrf_k,
                require_all=cfg.keyword_require_all,
            ),
            "hybrid",
        )

    def _score_ranking(
        self, index: CaseIndex, scores, cos, mask, k: int, min_score: float, uw: float, aw: float, recall: bool = False
    ):
        """The score-level ranking: speaker prior, turn-pair credit, `neutral_ranking`. A recall query (`recall`)
        never gets the reply→question credit nor the neutral treatment, whatever its weights."""
        cfg = self.config
        neutral = uw == aw and not recall and cfg.neutral_ranking != "propagate"
        if neutral and cfg.neutral_ranking.startswith("interleave"):
            return self._interleaved(index, scores, mask, k, min_score, cos)
        if uw != 1.0 or aw != 1.0 or cfg.propagate or neutral:
            propagate = cfg.propagate if uw >= aw and not recall else 0.0
            back = 0.0
            if neutral:  # "pair": a question and its reply each credited with the other's full score
                propagate, back = (1.0, 1.0) if cfg.neutral_ranking == "pair" else (0.0, 0.0)
            scores = index.apply_priors(
                scores, user_weight=uw, assistant_weight=aw, propagate=propagate, propagate_back=back
            )
        return index.ranked(scores, mask, k, min_dense=min_score, cos=cos)

    def _interleaved(self, index: CaseIndex, scores, mask, k: int, min_score: float, cos) -> list[tuple[int, float]]:
        """Speaker-neutral query: the user ranking (reply→question credit) and the assistant ranking (own score)
        alternate, `neutral_ranking`'s speaker first. The score is the merged rank's 1/(rank + 1), so every later
        step (variant merge, `_best`) keeps the alternation; messages of other roles (tool results) follow."""
        cfg = self.config
        user = index.apply_priors(scores, user_weight=1.0, assistant_weight=1.0, propagate=cfg.propagate)
        roles = index.roles
        first = "assistant" if cfg.neutral_ranking == "interleave_assistant" else "user"
        lists = {
            role: index.ranked(vec, mask & (roles == role), k, min_dense=min_score, cos=cos)
            for role, vec in (("user", user), ("assistant", scores))
        }
        second = "user" if first == "assistant" else "assistant"
        merged = [h for pair in itertools.zip_longest(lists[first], lists[second]) for h in pair if h is not None]
        rest = index.ranked(scores, mask & (roles != "user") & (roles != "assistant"), k, min_dense=min_score, cos=cos)
        return [(doc, 1.0 / (rank + 1)) for rank, (doc, _) in enumerate((merged + rest)[:k])]

    def _score_level(self, mode: str) -> bool:
        """Whether ranking uses whole score vectors (fusion/priors) rather than the reference top-k lists."""
        cfg = self.config
        priors = cfg.assistant_weight != 1.0 or cfg.propagate != 0.0 or cfg.neutral_ranking != "propagate"
        return (mode == "hybrid" and cfg.fusion == "score") or (priors and not cfg.keyword_require_all)

    def _search_with_fallback(self, session, index, mask, query, k, min_score, mode, trace) -> list[_Hit]:
        """Primary query, then variants while too few hits (reference searchWithFallback)."""
        variants = tx.query_variants(query)
        merged: dict[int, _Hit] = {}
        ran: list[str] = trace.setdefault("variants", [])
        primary_had = False
        for i, variant in enumerate(variants):
            ranked, source = self._search_once(session, index, mask, variant, k, min_score, mode)
            ran.append(variant)
            for doc, score in ranked:
                if doc not in merged or score > merged[doc].score:
                    merged[doc] = _Hit(session, index, doc, score, source)
            if i == 0:
                primary_had = bool(ranked)
                if not tx.should_broaden(variant, len(ranked), k):
                    break
                continue
            if not primary_had and merged:
                break
            if len(merged) >= k:
                break
        trace.setdefault("path", "search")
        return _best(merged.values(), k)

    def _scan(self, query: str, k: int, *, boundary: SummaryBoundary | None, trace) -> list[_Hit]:
        """Lexical substring scan over the session's (hidden) messages, variant by variant."""
        trace["path"] = "lexical_scan"
        events = self.session.events[:SCAN_MAX_EVENTS]
        hidden: set[str] | None = None
        if boundary is not None and boundary.last_event_id:
            ids: set[str] = set()
            for e in events:
                ids.add(e.id)
                if e.id == boundary.last_event_id:
                    hidden = ids
                    break
        candidates = []
        for _pos, e in enumerate(events):
            if hidden is not None:
                if e.id not in hidden:
                    continue
            elif boundary is not None and boundary.cutoff_at and e.timestamp > boundary.cutoff_at + 1e-9:
                continue
            text = event_text(e)
            if text is not None:
                candidates.append((e, text))
        merged: dict[str, _Hit] = {}
        for variant in tx.query_variants(query):
            primary = tx.normalize_ws(variant).lower()
            keywords = tx.keyword_tokens(variant) or tx.tokens(primary)
            if not keywords:
                continue
            scored = [(tx.lexical_score(primary, keywords, text), e) for e, text in candidates]
            scored = [(s, e) for s, e in scored if s > 0]
            scored.sort(key=lambda se: (-se[0], -se[1].timestamp))
            for score, e in scored[:k]:
                doc = self.index.by_id.get(e.id)
                if doc is None:
                    continue
                if e.id not in merged or score > merged[e.id].score:
                    merged[e.id] = _Hit(self.session, self.index, doc, score, "scan")
            if len(merged) >= k:
                break
        return _best(merged.values(), k)

    def _search_others(self, query, k, min_score, mode, trace) -> list[_Hit]:
        hits: list[_Hit] = []
        for session, index in self.others:
            mask = np.ones(len(index), dtype=bool)
            hits += self._search_with_fallback(session, index, mask, query, k, min_score, mode, {})
        return _best(hits, k)

    # --- rendering ------------------------------------------------------------------------------------
    def _render_hit(self, rank: int, hit: _Hit, scope: str) -> dict[str, Any]:
        cfg = self.config
        win = render.window(hit.index, hit.doc, cfg.window, cfg.window) if rank < cfg.expand_top else None
        if hit.session.id == self.session.id:
            hit_scope = "current_session" if scope == "current_session" else "current_hidden"
        else:
            hit_scope = "other_sessions"
        return render.reference_hit(
            hit.index,
            hit.doc,
            hit.score,
            scope=hit_scope,
            session_id=hit.session.id,
            win=win,
            snippet_chars=cfg.snippet_chars,
        )

    def _render_compact(self, hits: list[_Hit], query: str) -> list[dict[str, Any]]:
        terms = set(analyze(query, self.index.keyword.stopwords))
        rows = [(h.index, h.doc, h.score, None if h.session.id == self.session.id else h.session.id) for h in hits]
        cfg = self.config
        budget, hit, top = cfg.budget_chars, cfg.hit_chars, cfg.top_hit_chars
        if cfg.recall_chars is not None and self._recall(query):
            budget, hit = max(budget, cfg.recall_chars), max(hit, cfg.recall_chars)
        top_hits = cfg.top_hits
        if cfg.neutral_top_hits is not None:
            uw, aw = self._speaker_weights(query)
            top_hits = cfg.neutral_top_hits if uw == aw and not self._recall_prior(query) else top_hits
        return render.compact_hits(
            rows, terms, budget_chars=budget, hit_chars=hit, top_hit_chars=top, top_hits=top_hits
        )

    # --- the response budget ---------------------------------------------------------------------------
    def _within_budget(
        self,
        hits: list[_Hit],
        results: list[dict[str, Any]],
        query: str,
        scope: str,
        top_k: int,
        min_score: float,
        trace,
    ) -> tuple[list[_Hit], list[dict[str, Any]]]:
        """`budget_tokens`: a compact preset with a `budget_fill` answers with everything the fill preset's response
        holds at this budget and its own hits in what is left (harness/retrieval/floor.py); any other, its results cut
        to the budget (harness/retrieval/budget.py). Returns the hits of the kept entries (each once, in order) and the
        kept entries."""
        cfg = self.config
        assert cfg.budget_tokens is not None
        if cfg.response_style == "compact" and cfg.budget_fill is not None:
            return self._over_floor(hits, results, query, scope, top_k, min_score, trace)
        shorten = None
        if cfg.response_style == "compact":
            terms = set(analyze(query, self.index.keyword.stopwords))

            def shorten(entry: dict[str, Any]) -> dict[str, Any] | None:
                """A hit too long for what is left: an excerpt as long as the reference's snippet (the way bm25 shows
                its later hits), so the hits after it keep their chance."""
                text = entry.get("snippet")
                if not text or len(text) <= cfg.snippet_chars:
                    return None
                return {**entry, "snippet": tx.excerpt(text, terms, cfg.snippet_chars)}

        fitted = budget.fit(
            lambda rs: {"query": query, "scope": scope, "results": rs, "count": len(rs)},
            results,
            cfg.budget_tokens,
            o200k_counter().count,
            shorten,
        )
        trace["budget"] = {
            "tokens": cfg.budget_tokens,
            "entries_left_out": fitted.entries_left_out,
            "messages_left_out": fitted.messages_left_out,
        }
        kept: dict[tuple[str, int], _Hit] = {}
        for p in fitted.positions:
            h = hits[p]
            kept.setdefault((h.session.id, h.doc), h)
        return list(kept.values()), fitted.results

    @cached_property
    def _fill_tools(self) -> SessionTools:
        """The `budget_fill` preset's tools over this session and index, at this preset's budget."""
        assert self.config.budget_fill is not None
        fill = dataclasses.replace(preset(self.config.budget_fill), budget_tokens=self.config.budget_tokens)
        return SessionTools(self.session, self.index, boundary=self.boundary, config=fill, others=self.others)

    def _over_floor(
        self,
        hits: list[_Hit],
        results: list[dict[str, Any]],
        query: str,
        scope: str,
        top_k: int,
        min_score: float,
        trace,
    ) -> tuple[list[_Hit], list[dict[str, Any]]]:
        """The fill preset's response to the same call at this budget (R), made the floor: each of its hits an entry,
        every turn whose text R holds shown whole in it; this preset's own entries in what is left
        (floor.compose). Checked against R (floor.holds); where the floor does not fit or the check fails, R itself
        goes out."""
        cfg = self.config
        tools = self._fill_tools
        arguments = {"query": query, "scope": scope, "top_k": top_k, "min_score": min_score}
        theirs = tools.call(ref.SEARCH_TOOL, {**arguments, "search_mode": tools.config.default_mode})
        if not theirs.ok:
            raise RuntimeError(f"budget_fill={cfg.budget_fill!r}: {theirs.error}")
        their_results = json.loads(theirs.content)["results"]
        found = {}
        for h in theirs.trace["hits"]:
            target = self._session_by_id(h["session_id"])
            assert target is not None  # the fill searched these sessions
            s, index = target
            found[(s.id, h["event_id"])] = _Hit(s, index, index.by_id[h["event_id"]], h["score"], h["source"])
        their_keys = [(r["session_id"], r["event_id"]) for r in their_results]
        searched = [(self.session, self.index)] + (self.others if scope in ("other_sessions", "all_sessions") else [])
        terms = set(analyze(query, self.index.keyword.stopwords))
        floor_hits = self._floor(their_results, their_keys, searched, terms)
        own = []
        for h, r in zip(hits, results):
            d = h.index.docs[h.doc]
            whole = {(h.session.id, d.event_id)} if r.get("snippet") == d.text else set()
            text = r.get("snippet") or ""
            short = (
                r | {"snippet": tx.excerpt(text, terms, cfg.snippet_chars)} if len(text) > cfg.snippet_chars else None
            )
            own.append(floor.Own((h.session.id, d.event_id), r, frozenset(whole), short))
        composed = floor.compose(
            lambda rs: {"query": query, "scope": scope, "results": rs, "count": len(rs)},
            own,
            floor_hits,
            cfg.budget_tokens or 0,
            o200k_counter().count,
        )
        turns = [e.content.strip() for s, _ in searched for e in s.events]
        if composed is None:
            why: str | None = "the floor does not fit"
        else:
            why = floor.holds(composed.results, composed.keys, their_results, their_keys, turns)
        their_cut = theirs.trace.get("budget") or {}
        trace["budget"] = {
            "tokens": cfg.budget_tokens,
            "entries_left_out": their_cut.get("entries_left_out", 0),
            "messages_left_out": their_cut.get("messages_left_out", 0),
            "fill_response_instead": why,
        }
        if composed is None or why is not None:  # the fill's own response: at or above it by being it
            trace["budget"] |= {
                "fill": len(their_results),
                "entries_left_out": trace["budget"]["entries_left_out"] + len(own),
            }
            return [found[k] for k in dict.fromkeys(their_keys)], their_results
        trace["budget"] |= {
            "fill": composed.floor_entries,
            "entries_left_out": trace["budget"]["entries_left_out"] + composed.own_left_out,
        }
        by_key = {(h.session.id, h.index.docs[h.doc].event_id): h for h in hits} | found
        return [by_key[k] for k in dict.fromkeys(composed.keys)], composed.results

    def _floor(
        self,
        their_results: list[dict[str, Any]],
        their_keys: list[tuple[str, str]],
        searched: list[tuple[Session, CaseIndex]],
        terms: set[str],
    ) -> list[floor.FloorHit]:
        """The fill's response as floor entries: each hit (whole where that response shows it whole, else an excerpt
        as long as the reference's snippet); every other turn its windows show whole, as a context message of that
        entry; and any other turn of the searched sessions whose text it holds (a turn repeated word for word, "Rh8"
        inside a move list) whose text the floor does not hold already, with the first entry that holds it."""
        cfg = self.config
        pieces = [
            [r.get("snippet", "")] + [m.get("content", "") for m in r.get("context") or ()] for r in their_results
        ]
        blob = floor.shown_text(their_results)
        whole = {
            (s.id, d.event_id): (i, index)
            for s, index in searched
            for i, d in enumerate(index.docs)
            if d.text and d.text in blob
        }
        hit_keys = set(their_keys)
        attached: dict[int, list[tuple[tuple[str, str], int, CaseIndex]]] = {}
        for n, r in enumerate(their_results):  # the turns its windows show, where it shows them
            for m in r.get("context") or ():
                key = (r["session_id"], m["event_id"])
                if key in whole and key not in hit_keys and all(key != k for k, _, _ in attached.get(n, [])):
                    attached.setdefault(n, []).append((key, *whole[key]))
        done = {k for ks in attached.values() for k, _, _ in ks} | hit_keys
        held = "\n".join(index.docs[i].text for k, (i, index) in whole.items() if k in done)
        rest = [(k, i, index) for k, (i, index) in whole.items() if k not in done]
        for key, i, index in sorted(rest, key=lambda a: -len(a[2].docs[a[1]].text)):
            text = index.docs[i].text
            if text in held:  # a turn of the same text, or a text inside one, is already there
                continue
            at = next((n for n, p in enumerate(pieces) if any(text in x for x in p)), 0)
            attached.setdefault(at, []).append((key, i, index))
            held += "\n" + text
        out = []
        for n, (r, key) in enumerate(zip(their_results, their_keys)):
            s, index = self._session_by_id(key[0]) or (self.session, self.index)
            d = index.docs[index.by_id[key[1]]]
            shown = key in whole
            context = tuple(
                floor.Message(k, {"event_id": ix.docs[i].event_id, "role": ix.docs[i].role, "content": ix.docs[i].text})
                for k, i, ix in sorted(attached.get(n, []), key=lambda a: a[1])
            )
            out.append(
                floor.FloorHit(
                    key,
                    {"event_id": d.event_id, "role": d.role, "score": round(float(r["score"]), 4)},
                    None if s.id == self.session.id else s.id,
                    d.text if shown else None,
                    None if shown else tx.excerpt(d.text, terms, cfg.snippet_chars),
                    context,
                )
            )
        return out

    # --- session_load ---------------------------------------------------------------------------------
    def _load(self, arguments: Any, trace: dict[str, Any]) -> ToolOutcome:
        def fail(msg: str) -> ToolOutcome:
            msg = "session load tool: " + msg
            return ToolOutcome(ERROR_PREFIX + msg, False, msg, trace)

        try:
            args = parse_arguments(arguments)
        except ArgumentError as e:
            return fail(str(e))
        c = Coercer(args)
        session_id = c.string("session_id").strip() or self.session.id
        event_id = c.string("event_id").strip()
        before, after = c.integer("before", 0), c.integer("after", 0)
        nb, na = normalize_window(before, after)
        if (nb, na) != (before, after) and (before or after):
            c.notes.append(f"window before={before}, after={after} normalised to {nb}/{na}")
        trace["arguments"] = {"session_id": session_id, "event_id": event_id, "before": nb, "after": na}
        trace["adjustments"] = c.notes
        if not event_id:
            return fail("event_id is required")
        target = self._session_by_id(session_id)
        if target is None:
            return fail(f"anchor event not found: {event_id}")
        session, index = target
        doc = index.by_id.get(event_id)
        window = render.window(index, doc, nb, na) if doc is not None else None
        if window is None:
            return fail(f"anchor event not found: {event_id}")
        messages = [render.message(index, i) for i in window]
        trace["messages"] = [m["event_id"] for m in messages]
        body = {
            "session_id": session.id,
            "event_id": event_id,
            "before": nb,
            "after": na,
            "note": ref.LOAD_NOTE,
            "messages": messages,
            "count": len(messages),
        }
        return ToolOutcome(ref.go_json(body), True, None, trace)

    def _session_by_id(self, session_id: str) -> tuple[Session, CaseIndex] | None:
        if session_id == self.session.id:
            return self.session, self.index
        for s, i in self.others:
            if s.id == session_id:
                return s, i
        return None


__all__ = ["SessionTools", "ToolOutcome", "SearchConfig", "preset", "speaker_weights", "normalize_window", "rfc3339"]
