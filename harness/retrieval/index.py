"""Per-case search index: the searchable documents of one session, keyword scores and dense vectors.

A document is one event's message text, as the reference indexed it (pgvector `extractEventText`):
user/assistant/tool messages with non-empty text, tool results prefixed "<tool>: ", assistant messages
that carry tool calls skipped. Search functions take a boolean mask over documents (the scope), so
no ranking ever sees an event outside the caller's scope.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from harness.retrieval.keyword import KeywordIndex, analyze
from harness.session.events import Event

SEARCHABLE_ROLES = ("user", "assistant", "tool")


def event_text(event: Event) -> str | None:
    """The indexed text of an event, or None when the reference would not index it."""
    if event.tool_calls or event.role not in SEARCHABLE_ROLES:
        return None
    text = event.content.strip()
    if not text:
        return None
    tool_name = (event.tool_name or "").strip()
    if event.role == "tool" and tool_name:
        text = f"{tool_name}: {text}"
    return text


@dataclass(frozen=True)
class Doc:
    event_id: str
    position: int  # index into Session.events
    role: str
    text: str
    timestamp: float
    indexed: bool  # False: kept out of search/windows/load (the reference's failed-embedding rows)


def content_hash(events: Sequence[Event]) -> str:
    """Identity of a session's searchable content (ids, roles, texts, times): the cache key."""
    h = hashlib.sha256()
    for e in events:
        h.update(json.dumps([e.id, e.role, e.content, e.timestamp, e.tool_name, bool(e.tool_calls)]).encode())
        h.update(b"\n")
    return h.hexdigest()


def build_docs(events: Sequence[Event], exclude: Callable[[str], bool] | None = None) -> list[Doc]:
    docs = []
    for pos, e in enumerate(events):
        text = event_text(e)
        if text is None:
            continue
        docs.append(Doc(e.id, pos, e.role, text, e.timestamp, indexed=not (exclude and exclude(text))))
    return docs


class CaseIndex:
    """Keyword + optional dense index over the documents of one session."""

    def __init__(
        self,
        docs: Sequence[Doc],
        *,
        doc_tokens: Sequence[Sequence[str]] | None = None,
        vectors: np.ndarray | None = None,
        embedder=None,
        stopwords: str = "lucene",
    ) -> None:
        self.docs = list(docs)
        self.by_id = {d.event_id: i for i, d in enumerate(self.docs)}
        toks = doc_tokens if doc_tokens is not None else [analyze(d.text, stopwords) for d in self.docs]
        self.doc_tokens = [list(t) for t in toks]
        # Unindexed documents get no tokens, so they can never match a keyword query.
        self.keyword = KeywordIndex(
            [t if d.indexed else [] for d, t in zip(self.docs, self.doc_tokens)], stopwords=stopwords
        )
        self.vectors = vectors
        self.embedder = embedder
        self.indexed = np.fromiter((d.indexed for d in self.docs), dtype=bool, count=len(self.docs))
        self.timestamps = np.fromiter((d.timestamp for d in self.docs), dtype=np.float64, count=len(self.docs))

    def __len__(self) -> int:
        return len(self.docs)

    @property
    def has_dense(self) -> bool:
        return self.vectors is not None and self.embedder is not None

    # --- ranking primitives; each returns [(doc index, score)] best first, ties newer first ---------
    def _top(self, scores: np.ndarray, ok: np.ndarray, k: int) -> list[tuple[int, float]]:
        idx = np.flatnonzero(ok)
        if idx.size == 0 or k <= 0:
            return []
        order = np.lexsort((-self.timestamps[idx], -scores[idx]))[:k]
        return [(int(idx[i]), float(scores[idx[i]])) for i in order]

    def keyword_search(self, query: str, mask: np.ndarray, k: int, *, require_all: bool = False):
        scores, terms = self.keyword.scores(query)
        ok = mask & self.indexed & (scores > 0)
        if require_all:
            ok &= self.keyword.match_all(query)
        return self._top(scores, ok, k)

    def dense_scores(self, query: str) -> np.ndarray:
        if not self.has_dense:
            raise RuntimeError("this index has no dense vectors (no embedder configured)")
        q = np.asarray(self.embedder.embed([query]), dtype=np.float32)[0]
        return self.vectors @ q

    def dense_search(self, query: str, mask: np.ndarray, k: int, *, min_score: float = 0.0):
        scores = self.dense_scores(query)
        ok = mask & self.indexed
        if min_score > 0:
            ok &= scores >= min_score
        return self._top(scores, ok, k)

    def hybrid_search(
        self,
        query: str,
        mask: np.ndarray,
        k: int,
        *,
        min_score: float = 0.0,
        candidate_ratio: int = 3,
        rrf_k: int = 60,
        require_all: bool = False,
    ) -> list[tuple[int, float]]:
        """Dense top k·ratio and keyword top k·ratio fused by reciprocal rank; ties newer first."""
        n_cand = k * candidate_ratio if candidate_ratio > 1 else k
        dense = self.dense_search(query, mask, n_cand, min_score=min_score)
        keyword = self.keyword_search(query, mask, n_cand, require_all=require_all)
        return rrf_fuse([dense, keyword], self.timestamps, k, rrf_k=rrf_k)

    # --- score-level ranking (the project default): every document gets one comparable score ---------
    def score_vector(self, query: str, mode: str, *, alpha: float = 1.0) -> tuple[np.ndarray, np.ndarray | None]:
        """(scores, dense cosine or None). keyword: BM25/max; dense: cosine; hybrid: BM25/max + alpha·max(cos, 0)."""
        kw = None
        if mode != "dense" or not self.has_dense:
            kw, _ = self.keyword.scores(query)
            top = float(kw.max()) if kw.size else 0.0
            kw = kw / top if top > 0 else kw
        if mode == "keyword" or not self.has_dense:
            assert kw is not None  # computed above: mode != "dense" or no dense index
            return kw, None
        cos = self.dense_scores(query)
        if mode == "dense":
            return cos.astype(np.float32), cos
        return kw + alpha * np.clip(cos, 0.0, None), cos

    def apply_priors(
        self,
        scores: np.ndarray,
        *,
        user_weight: float,
        assistant_weight: float,
        propagate: float,
        propagate_back: float = 0.0,
    ) -> np.ndarray:
        """Role weights, and credit between a user message and the assistant reply right after it.

        A reply that restates what the user said ("30 minutes a day is great!") is evidence that the user
        message before it is the relevant one; `propagate` adds that share of the reply's score to it.
        `propagate_back` is the mirror (`neutral_ranking: pair`): a question that shares the query's words points at
        its answer.
        """
        out = scores.astype(np.float64, copy=True)
        roles = self._roles
        nxt = self._next_reply
        has = nxt >= 0
        if propagate:
            out[has] += propagate * scores[nxt[has]]
        if propagate_back:
            out[nxt[has]] += propagate_back * scores[has]
        weights = np.where(roles == "user", user_weight, np.where(roles == "assistant", assistant_weight, 1.0))
        return out * weights

    @property
    def roles(self) -> np.ndarray:
        """Each document's role, as an array (for role masks)."""
        return self._roles

    @property
    def _roles(self) -> np.ndarray:
        if not hasattr(self, "_roles_cache"):
            self._roles_cache = np.array([d.role for d in self.docs])
        return self._roles_cache

    @property
    def _next_reply(self) -> np.ndarray:
        """For each user document, the index of the assistant document right after it (else -1)."""
        if not hasattr(self, "_next_cache"):
            nxt = np.full(len(self.docs), -1, dtype=np.int64)
            for i in range(len(self.docs) - 1):
                a, b = self.docs[i], self.docs[i + 1]
                if a.role == "user" and b.role == "assistant" and b.position == a.position + 1 and b.indexed:
                    nxt[i] = i + 1
            self._next_cache = nxt
        return self._next_cache

    def ranked(self, scores: np.ndarray, mask: np.ndarray, k: int, *, min_dense: float = 0.0, cos=None):
        ok = mask & self.indexed & (scores > 0)
        if min_dense > 0 and cos is not None:
            ok &= cos >= min_dense
        return self._top(scores, ok, k)


def rrf_fuse(
    rankings: Sequence[Sequence[tuple[int, float]]], timestamps: np.ndarray, k: int, *, rrf_k: int = 60
) -> list[tuple[int, float]]:
    """Σ 1/(rrf_k + rank + 1) over rankings (rank 0-based); ties → newer first; top k."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (i, _) in enumerate(ranking):
            fused[i] = fused.get(i, 0.0) + 1.0 / (rrf_k + rank + 1)
    order = sorted(fused.items(), key=lambda kv: (-kv[1], -timestamps[kv[0]]))
    return order[:k]
