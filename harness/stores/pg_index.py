"""The retrieval index store in PostgreSQL: the API of harness.retrieval.store.IndexStore.

Dense vectors live in a pgvector `vector` column (float4, so they load back bit-identical and rank exactly
as the embedded path); each document's text is kept with a generated `to_tsvector('english', ...)` column,
so that with `fts=True` keyword searches that require every term (trpc_parity) run the reference's own
query in PostgreSQL: `tsv @@ plainto_tsquery('english', q)` ranked by `ts_rank` (docs/retrieval.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.retrieval.index import CaseIndex, Doc
from harness.retrieval.keyword import analyze
from harness.retrieval.store import embed_docs, embedder_identity
from harness.secrets import REGISTRY
from harness.stores.postgres import PgDatabase

FTS_SQL = (
    "SELECT pos, ts_rank(tsv, q) FROM lme_index_docs, plainto_tsquery('english', %s) AS q WHERE key = %s AND tsv @@ q"
)


def _array(v: Any) -> np.ndarray:
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)


class PgCaseIndex(CaseIndex):
    """A CaseIndex whose all-terms keyword search is PostgreSQL full-text search (the reference's query)."""

    def __init__(self, docs: Sequence[Doc], *, db: PgDatabase, doc_key: str, **kw: Any) -> None:
        super().__init__(docs, **kw)
        self._db = db
        self._doc_key = doc_key

    def fts_scores(self, query: str) -> np.ndarray:
        """ts_rank per document (0 where the document does not match every query lexeme)."""
        rows = self._db.run(lambda c: c.execute(FTS_SQL, (query, self._doc_key)).fetchall(), "a keyword search")
        scores = np.zeros(len(self.docs), dtype=np.float64)
        for pos, rank in rows:
            scores[pos] = float(rank)
        return scores

    def keyword_search(self, query: str, mask: np.ndarray, k: int, *, require_all: bool = False):
        if not require_all:  # the reference only ever ran plainto_tsquery (every lexeme required)
            return super().keyword_search(query, mask, k, require_all=require_all)
        scores = self.fts_scores(query)
        return self._top(scores, mask & self.indexed & (scores > 0), k)


class PgIndexStore:
    """Per-case tokens, document texts and vectors in PostgreSQL, shared by every process."""

    def __init__(self, db: PgDatabase, *, fts: bool = False) -> None:
        self.db = db
        self.fts = fts
        self.path = db.label
        self.stats = {"token_hits": 0, "token_builds": 0, "vector_hits": 0, "vector_builds": 0}

    def load_or_build(
        self, key: str, docs: Sequence[Doc], embedder: Any | None, stopwords: str = "lucene"
    ) -> CaseIndex:
        tokens = self._tokens(f"{key}|sw={stopwords}", docs, stopwords)
        vectors = self._vectors(key, docs, embedder) if embedder is not None else None
        if not self.fts:
            return CaseIndex(docs, doc_tokens=tokens, vectors=vectors, embedder=embedder, stopwords=stopwords)
        self._docs(key, docs)
        return PgCaseIndex(
            docs, db=self.db, doc_key=key, doc_tokens=tokens, vectors=vectors, embedder=embedder, stopwords=stopwords
        )

    def _tokens(self, key: str, docs: Sequence[Doc], stopwords: str) -> list[list[str]]:
        row = self.db.run(
            lambda c: c.execute("SELECT n, tokens FROM lme_index_tokens WHERE key=%s", (key,)).fetchone(),
            "reading the index store",
        )
        if row and row[0] == len(docs):
            self.stats["token_hits"] += 1
            return json.loads(row[1])
        tokens = [analyze(REGISTRY.redact(d.text), stopwords) for d in docs]
        self.db.run(
            lambda c: c.execute(
                "INSERT INTO lme_index_tokens VALUES (%s,%s,%s,%s) ON CONFLICT (key) DO UPDATE SET n = EXCLUDED.n, "
                "tokens = EXCLUDED.tokens, created = EXCLUDED.created",
                (key, len(docs), json.dumps(tokens), time.time()),
            ),
            "writing the index store",
        )
        self.stats["token_builds"] += 1
        return tokens

    def _docs(self, key: str, docs: Sequence[Doc]) -> None:
        """The indexed documents' (masked) texts, once per key; the tsvector column is computed by the server."""

        def write(c: Any) -> None:
            n = c.execute("SELECT COUNT(*) FROM lme_index_docs WHERE key=%s", (key,)).fetchone()[0]
            want = [(key, len(docs), i, REGISTRY.redact(d.text)) for i, d in enumerate(docs) if d.indexed]
            if n == len(want):
                return
            with c.transaction():
                c.execute("DELETE FROM lme_index_docs WHERE key=%s", (key,))
                with c.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO lme_index_docs (key, n, pos, content) VALUES (%s,%s,%s,%s) ON CONFLICT DO NOTHING",
                        want,
                    )

        self.db.run(write, "writing the keyword index")

    def has_vectors(self, key: str, n_docs: int, embedder: Any) -> bool:
        row = self.db.run(
            lambda c: c.execute(
                "SELECT n FROM lme_index_vectors WHERE key=%s AND embedder=%s", (key, embedder_identity(embedder))
            ).fetchone(),
            "reading the index store",
        )
        return bool(row) and row[0] == n_docs

    def _vectors(self, key: str, docs: Sequence[Doc], embedder: Any) -> np.ndarray | None:
        ident = embedder_identity(embedder)

        def read(c: Any) -> np.ndarray | None:
            meta = c.execute(
                "SELECT n, dim FROM lme_index_vectors WHERE key=%s AND embedder=%s", (key, ident)
            ).fetchone()
            if not meta or meta[0] != len(docs):
                return None
            rows = c.execute(
                "SELECT embedding FROM lme_index_vector_rows WHERE key=%s AND embedder=%s ORDER BY pos", (key, ident)
            ).fetchall()
            if len(rows) != meta[0]:
                return None
            return np.stack([_array(r[0]) for r in rows]).reshape(meta[0], meta[1])

        found = self.db.run(read, "reading the index store")
        if found is not None:
            self.stats["vector_hits"] += 1
            return found
        t0 = time.perf_counter()
        vecs = embed_docs(docs, embedder)
        seconds = time.perf_counter() - t0
        if vecs is None:
            return None

        def write(c: Any) -> None:
            with c.transaction():
                c.execute("DELETE FROM lme_index_vector_rows WHERE key=%s AND embedder=%s", (key, ident))
                with c.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO lme_index_vector_rows VALUES (%s,%s,%s,%s) ON CONFLICT (key, embedder, pos) "
                        "DO UPDATE SET embedding = EXCLUDED.embedding",
                        [(key, ident, i, v) for i, v in enumerate(vecs)],
                    )
                c.execute(
                    "INSERT INTO lme_index_vectors VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (key, embedder) "
                    "DO UPDATE SET n = EXCLUDED.n, dim = EXCLUDED.dim, seconds = EXCLUDED.seconds, "
                    "created = EXCLUDED.created",
                    (key, ident, vecs.shape[0], vecs.shape[1], seconds, time.time()),
                )

        self.db.run(write, "writing the index store")
        self.stats["vector_builds"] += 1
        return vecs

    def close(self) -> None:
        pass  # the connections belong to the shared PgDatabase
