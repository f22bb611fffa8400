"""What a mode instantiates from `configs/retrieval/*.yaml`: a search config, an embedder, an index store.

retriever = hydra.utils.instantiate(cfg.retrieval)
tools = retriever.tools(session, boundary=summary.boundary)   # SessionTools
tools.specs(); tools.call("session_search", '{"query": "..."}')
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from harness.retrieval.config import SearchConfig
from harness.retrieval.index import CaseIndex, build_docs, content_hash
from harness.retrieval.tools import SessionTools
from harness.session.boundary import SummaryBoundary
from harness.session.events import Event, Session

if TYPE_CHECKING:
    from harness.retrieval.store import IndexStore


class Retriever:
    """Builds (or loads) one index per session content and hands out `SessionTools` over it."""

    def __init__(
        self,
        config: SearchConfig | dict[str, Any] | None = None,
        embedder: Any | None = None,
        store: IndexStore | str | os.PathLike[str] | None = None,
        max_embed_tokens: int | None = None,
        memo_size: int = 16,
    ) -> None:
        self.config = config if isinstance(config, SearchConfig) else SearchConfig(**dict(config or {}))
        self.embedder = embedder
        if isinstance(store, (str, os.PathLike)):  # a path from the config: the store lives there
            from harness.retrieval.store import IndexStore

            store = IndexStore(store)
        self.store = store
        # Reference parity: events over text-embedding-3-small's 8192-token input limit were never
        # indexed (empty content_text): invisible to search, windows and session_load.
        self.max_embed_tokens = max_embed_tokens
        self._memo: OrderedDict[str, CaseIndex] = OrderedDict()  # recent indexes (modes of one case share)
        self._memo_size = memo_size
        self._lock = threading.Lock()
        self.stopwords = self.config.stopwords  # part of the index key: the keyword tokens depend on it
        cfg = self.config
        if cfg.budget_tokens is not None and cfg.response_style == "compact" and cfg.budget_fill is not None:
            from harness.retrieval.config import preset

            # the fill ranks over this retriever's index, whose keyword tokens depend on the stopword list
            if (fill := preset(cfg.budget_fill).stopwords) != self.stopwords:
                raise ValueError(
                    f"SearchConfig.budget_fill={cfg.budget_fill!r}: its stopwords ({fill}) differ from this preset's "
                    f"({self.stopwords}); the fill ranks over this retriever's index"
                )

    @property
    def name(self) -> str:
        return self.config.name

    def _exclude(self) -> Callable[[str], bool] | None:
        if not self.max_embed_tokens:
            return None
        from harness.retrieval.embedders import cl100k_count

        limit = self.max_embed_tokens
        return lambda text: len(text) > limit and cl100k_count(text) > limit

    def vector_key(self, events: Sequence[Event]) -> str:
        """The index store's key of these events' vectors (what the vectors depend on)."""
        return content_hash(events) + f"|emb={self.max_embed_tokens or 0}"

    def index(self, events: Sequence[Event]) -> CaseIndex:
        """The index of these events: from memory, else from the store, else built (and stored)."""
        base = self.vector_key(events)
        key = f"{base}|sw={self.stopwords}"
        with self._lock:  # cases may run in threads
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        docs = build_docs(events, self._exclude())
        if self.store is not None:
            idx = self.store.load_or_build(base, docs, self.embedder, self.stopwords)
        else:
            from harness.retrieval.store import build_index

            idx = build_index(docs, self.embedder, self.stopwords)
        with self._lock:
            self._memo[key] = idx
            while len(self._memo) > self._memo_size:
                self._memo.popitem(last=False)
        return idx

    def describe(self) -> dict[str, Any]:
        """What a record should say about the retriever (preset, embedder identity)."""
        return {
            "preset": self.config.name,
            # an embedder built on first use (LazyEmbedder) and never used ranked nothing: none is named
            "embedder": getattr(self.embedder, "identity", None) if getattr(self.embedder, "built", True) else None,
            "max_embed_tokens": self.max_embed_tokens,
            "stopwords": self.stopwords,
        }

    def tools(
        self,
        session: Session,
        *,
        boundary: SummaryBoundary | None,
        others: Sequence[Session] = (),
    ) -> SessionTools:
        return SessionTools(
            session,
            self.index(session.events),
            boundary=boundary,
            config=self.config,
            others=[(s, self.index(s.events)) for s in others],
        )
