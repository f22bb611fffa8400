"""Keyword (BM25) side of the index: bm25s over Snowball-English-stemmed, stopword-filtered tokens."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from functools import lru_cache

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

# bm25s sets its own logger to DEBUG on import, so every index build printed a line amid the progress line.
logging.getLogger("bm25s").setLevel(logging.WARNING)

_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s' default token pattern
# Two stopword lists. "lucene" (bm25s' English list, 33 words) keeps pronouns such as "my", which tie
# first-person questions to what the user said and measure better here; "snowball" is the list of
# PostgreSQL's to_tsvector('english'), the reference's full-text search.
STOPWORDS: dict[str, frozenset[str]] = {"lucene": frozenset(STOPWORDS_EN)}
STOPWORDS["snowball"] = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
    herself it its itself they them their theirs themselves what which who whom this that these those am is are
    was were be been being have has had having do does did doing a an the and but if or because as until while
    of at by for with about against between into through during before after above below to from up down in out
    on off over under again further then once here there when where why how all any both each few more most
    other some such no nor not only own same so than too very s t can will just don should now""".split()
)


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def analyze(text: str, stopwords: str = "lucene") -> list[str]:
    """Lowercase word tokens (≥2 chars), English stopwords removed, Snowball-stemmed."""
    stop = STOPWORDS[stopwords]
    words = [w for w in _TOKEN.findall(text.lower()) if w not in stop]
    return _stemmer().stemWords(words) if words else []


class KeywordIndex:
    """BM25 (Lucene variant) over pre-analysed documents; scores every document for a query.

    Scoring all documents (rather than asking bm25s for a top k) lets the caller apply scope masks
    before ranking, so a hidden/visible cut never leaves fewer hits than exist.
    """

    def __init__(
        self, doc_tokens: Sequence[Sequence[str]], *, k1: float = 1.5, b: float = 0.75, stopwords: str = "lucene"
    ) -> None:
        self.n = len(doc_tokens)
        self.stopwords = stopwords
        self._sets = [frozenset(t) for t in doc_tokens]
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        if self.n:
            # An empty document would break bm25s' vocabulary; give it a token no query can produce.
            corpus = [list(t) if t else ["\x00"] for t in doc_tokens]
            self._bm25.index(corpus, show_progress=False)
        self._vocab = set(self._bm25.vocab_dict) if self.n else set()

    def scores(self, query: str) -> tuple[np.ndarray, list[str]]:
        """(BM25 score per document, analysed query terms found in the vocabulary)."""
        terms = [t for t in dict.fromkeys(analyze(query, self.stopwords)) if t in self._vocab]
        if not terms or not self.n:
            return np.zeros(self.n, dtype=np.float32), terms
        return np.asarray(self._bm25.get_scores(terms), dtype=np.float32), terms

    def match_all(self, query: str) -> np.ndarray:
        """Documents containing every analysed query term (Postgres plainto_tsquery AND semantics)."""
        terms = set(analyze(query, self.stopwords))
        if not terms:
            return np.zeros(self.n, dtype=bool)
        return np.fromiter((terms <= s for s in self._sets), dtype=bool, count=self.n)
