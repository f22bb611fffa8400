"""Index persistence: one SQLite file holds each case's analysed tokens and dense vectors.

Rows are keyed by the session's content hash (and, for vectors, the embedder's identity), so an index
is built once per case and reused across modes, presets and runs; a changed event or embedder is a
different key, never a stale hit.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.retrieval.index import CaseIndex, Doc
from harness.retrieval.keyword import analyze
from harness.secrets import REGISTRY
from harness.storage import open_sqlite

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (key TEXT PRIMARY KEY, n INTEGER, tokens TEXT, created REAL);
CREATE TABLE IF NOT EXISTS vectors (
    key TEXT, embedder TEXT, n INTEGER, dim INTEGER, data BLOB, seconds REAL, created REAL,
    PRIMARY KEY (key, embedder));
"""
_COLUMNS = {
    "tokens": ("key", "n", "tokens", "created"),
    "vectors": ("key", "embedder", "n", "dim", "data", "seconds", "created"),
}


def embed_docs(docs: Sequence[Doc], embedder: Any) -> np.ndarray | None:
    """One row per document; only indexed documents are embedded (the others are never ranked, and under
    `max_embed_tokens` they are exactly the texts too long to embed). None when nothing is indexed."""
    rows = [i for i, d in enumerate(docs) if d.indexed]
    if not rows:
        return None
    vecs = np.asarray(embedder.embed([docs[i].text for i in rows]), dtype=np.float32)
    if len(rows) == len(docs):
        return vecs
    out = np.zeros((len(docs), vecs.shape[1]), dtype=np.float32)
    out[rows] = vecs
    return out


def build_index(docs: Sequence[Doc], embedder: Any | None, stopwords: str = "lucene") -> CaseIndex:
    """Build an index in memory (no store)."""
    vectors = embed_docs(docs, embedder) if embedder is not None else None
    return CaseIndex(docs, vectors=vectors, embedder=embedder, stopwords=stopwords)


def embedder_identity(embedder: Any) -> str:
    return str(getattr(embedder, "identity", None) or getattr(embedder, "name", type(embedder).__name__))


class IndexStore:
    """SQLite cache of per-case tokens and vectors. Safe to share between threads of one process."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # Checked at open like the response cache: damage is one error before any case, never a failed case each.
        self._db = open_sqlite(
            self.path,
            "retrieval index store",
            _SCHEMA,
            _COLUMNS,
            "it only holds indexes built from the sessions: they are built again; or point retrieval.store elsewhere",
        )
        self.stats = {"token_hits": 0, "token_builds": 0, "vector_hits": 0, "vector_builds": 0}

    def load_or_build(
        self, key: str, docs: Sequence[Doc], embedder: Any | None, stopwords: str = "lucene"
    ) -> CaseIndex:
        tokens = self._tokens(f"{key}|sw={stopwords}", docs, stopwords)
        vectors = self._vectors(key, docs, embedder) if embedder is not None else None
        return CaseIndex(docs, doc_tokens=tokens, vectors=vectors, embedder=embedder, stopwords=stopwords)

    def _tokens(self, key: str, docs: Sequence[Doc], stopwords: str) -> list[list[str]]:
        with self._lock:
            row = self._db.execute("SELECT n, tokens FROM tokens WHERE key=?", (key,)).fetchone()
        if row and row[0] == len(docs):
            self.stats["token_hits"] += 1
            return json.loads(row[1])
        # Analysed from the masked text: stored tokens must not spell out a key a reply echoed (pieces included).
        tokens = [analyze(REGISTRY.redact(d.text), stopwords) for d in docs]
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO tokens VALUES (?,?,?,?)", (key, len(docs), json.dumps(tokens), time.time())
            )
        self.stats["token_builds"] += 1
        return tokens

    def has_vectors(self, key: str, n_docs: int, embedder: Any) -> bool:
        """Whether `load_or_build` would load these vectors rather than embed (read-only)."""
        with self._lock:
            row = self._db.execute(
                "SELECT n FROM vectors WHERE key=? AND embedder=?", (key, embedder_identity(embedder))
            ).fetchone()
        return bool(row) and row[0] == n_docs

    def _vectors(self, key: str, docs: Sequence[Doc], embedder: Any) -> np.ndarray | None:
        ident = embedder_identity(embedder)
        with self._lock:
            row = self._db.execute(
                "SELECT n, dim, data FROM vectors WHERE key=? AND embedder=?", (key, ident)
            ).fetchone()
        if row and row[0] == len(docs):
            self.stats["vector_hits"] += 1
            return np.frombuffer(row[2], dtype=np.float32).reshape(row[0], row[1]).copy()
        t0 = time.perf_counter()
        vecs = embed_docs(docs, embedder)
        seconds = time.perf_counter() - t0
        if vecs is None:  # nothing to embed: a keyword-only index, nothing worth storing
            return None
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO vectors VALUES (?,?,?,?,?,?,?)",
                (
                    key,
                    ident,
                    vecs.shape[0],
                    vecs.shape[1] if vecs.ndim == 2 else 0,
                    vecs.tobytes(),
                    seconds,
                    time.time(),
                ),
            )
        self.stats["vector_builds"] += 1
        return vecs

    def close(self) -> None:
        with self._lock:
            self._db.close()
