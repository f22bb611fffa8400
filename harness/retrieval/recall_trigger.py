"""A learned recall trigger (issue 24, part 1): does a query ask what the assistant said?

The `recall_cues` mechanism (harness/retrieval/config.py) flips the speaker prior to the assistant and, with
`recall_chars`, raises the response budget when a query recalls the assistant's words. `recall_trigger: cues`
decides that with the hand-written `recall_cue` pattern; `recall_trigger: learned` with the logistic regression
here, fitted on gold labels (a question is positive when one of its `has_answer` turns is an assistant turn) and
shipped as a small JSON artifact: weights, bias, the feature definition, the embedder it was fitted with and
which questions (a hash and a count, never their text) it was fitted on. Numpy only (no scikit-learn).

Features, neither of which needs the question type: the query's vector from the run's retrieval embedder (times
sqrt(dim), so each coordinate is of unit scale), optionally followed by a hashed bag of word uni/bigrams (0/1).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "lme-harness/recall-trigger/1"
ARTIFACT = Path(__file__).with_name("recall_trigger.json")  # the shipped one (`recall_trigger_file: null`)
BIAS_PENALTY = 1e-6
_WORD = re.compile(r"[a-z0-9']+")


class RecallTriggerError(ValueError):
    """An artifact that cannot be used: the message names the file."""


@dataclass(frozen=True)
class Features:
    """The feature definition: the query's embedding (`embedding`), then `ngram_buckets` hashed uni/bigrams."""

    embedding: bool = True
    ngram_buckets: int = 0  # 0: no n-gram features

    def size(self, dim: int) -> int:
        return (dim if self.embedding else 0) + self.ngram_buckets

    def matrix(self, queries: Sequence[str], embedder: Any) -> np.ndarray:
        parts = []
        if self.embedding:
            v = np.asarray(embedder.embed(list(queries)), dtype=np.float64)
            parts.append(v * np.sqrt(v.shape[1]))
        if self.ngram_buckets:
            parts.append(np.stack([ngram_vector(q, self.ngram_buckets) for q in queries]))
        return np.hstack(parts) if parts else np.zeros((len(queries), 0))

    def describe(self) -> dict[str, Any]:
        return {
            "embedding": self.embedding,
            "embedding_scale": "sqrt(dim)",
            "ngram_buckets": self.ngram_buckets,
            "ngrams": "lowercased [a-z0-9']+ words and adjacent pairs, crc32 % buckets, 0/1",
        }


def ngram_vector(query: str, buckets: int) -> np.ndarray:
    words = _WORD.findall(query.lower())
    out = np.zeros(buckets)
    for g in words + [f"{a} {b}" for a, b in zip(words, words[1:])]:
        out[zlib.crc32(g.encode()) % buckets] = 1.0
    return out


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float, iters: int = 100) -> tuple[np.ndarray, float]:
    """L2-penalised logistic regression by Newton's method with step halving: (weights, bias). Deterministic.

    The bias gets a negligible penalty (1e-6) so that every Newton system can be solved through the Woodbury
    identity in the n x n space: the questions are fewer than the features (a few hundred vs 256 to 1,280)."""
    n, d = x.shape
    a = np.hstack([np.asarray(x, dtype=np.float64), np.ones((n, 1))])
    penalty = np.full(d + 1, float(l2))
    penalty[-1] = BIAS_PENALTY
    inv = 1.0 / penalty
    yy = np.asarray(y, dtype=np.float64)
    w = np.zeros(d + 1)

    def objective(v: np.ndarray) -> float:
        z = a @ v
        return float(np.sum(np.logaddexp(0.0, z) - yy * z) + 0.5 * np.sum(penalty * v * v))

    current = objective(w)
    for _ in range(iters):
        p = _sigmoid(a @ w)
        grad = a.T @ (p - yy) + penalty * w
        b = a * np.sqrt(p * (1 - p))[:, None]
        bp = b * inv  # B P^-1; the Newton step H^-1 g = P^-1 g - (B P^-1)^T (I + B P^-1 B^T)^-1 B P^-1 g
        step = inv * grad - bp.T @ np.linalg.solve(np.eye(n) + bp @ b.T, bp @ grad)
        size = 1.0
        while size > 1e-6 and objective(w - size * step) > current:
            size /= 2
        w = w - size * step
        previous, current = current, objective(w)
        if previous - current < 1e-12 * max(1.0, abs(current)):
            break
    return w[:-1], float(w[-1])


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def log_loss(y: np.ndarray, p: np.ndarray) -> float:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def cv_probabilities(x: np.ndarray, y: np.ndarray, l2: float, parts: Sequence[int]) -> np.ndarray:
    """Each row's probability from the fit on the other parts (`parts[i]`: the part of row i): k-fold inside a
    training fold."""
    p = np.zeros(len(y))
    for k in sorted(set(parts)):
        test = np.asarray(parts) == k
        w, b = fit_logistic(x[~test], y[~test], l2)
        p[test] = _sigmoid(x[test] @ w + b)
    return p


def cv_loss(x: np.ndarray, y: np.ndarray, l2: float, parts: Sequence[int]) -> float:
    """Mean held-out log-loss of `cv_probabilities`."""
    return log_loss(y, cv_probabilities(x, y, l2, parts))


def balanced_accuracy(y: np.ndarray, fired: np.ndarray) -> float:
    """Mean of the true-positive and true-negative rates (a class that is absent counts 1)."""
    pos, neg = y == 1, y == 0
    tpr = float(np.mean(fired[pos])) if pos.any() else 1.0
    tnr = float(np.mean(~fired[neg])) if neg.any() else 1.0
    return (tpr + tnr) / 2


def cv_parts(ids: Sequence[str], k: int = 5) -> list[int]:
    """Each id's part for k-fold CV: ids ordered by sha256 and dealt round-robin (deterministic, order-free)."""
    order = sorted(range(len(ids)), key=lambda i: hashlib.sha256(ids[i].encode()).hexdigest())
    out = [0] * len(ids)
    for j, i in enumerate(order):
        out[i] = j % k
    return out


def ids_digest(ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


@dataclass(frozen=True)
class RecallTrigger:
    features: Features
    weights: np.ndarray
    bias: float
    embedder: str  # the identity of the embedder the weights were fitted with
    dim: int  # its vector size
    threshold: float = 0.5
    source: str = "<in memory>"  # the file it was read from (named in errors)

    def check(self, embedder: Any) -> None:
        """RecallTriggerError naming the file unless `embedder` is the one the weights were fitted with."""
        if embedder is None:
            raise RecallTriggerError(f"recall trigger {self.source}: needs an embedder (fitted with {self.embedder})")
        ident = getattr(embedder, "identity", None)
        if ident != self.embedder:
            raise RecallTriggerError(
                f"recall trigger {self.source}: fitted with embedder {self.embedder!r}, the run's is {ident!r}"
            )

    def probability(self, queries: Sequence[str], embedder: Any) -> np.ndarray:
        self.check(embedder)
        x = self.features.matrix(queries, embedder)
        if x.shape[1] != len(self.weights):
            raise RecallTriggerError(
                f"recall trigger {self.source}: {len(self.weights)} weights, the features have {x.shape[1]}"
            )
        return _sigmoid(x @ self.weights + self.bias)

    def fires(self, query: str, embedder: Any) -> bool:
        return bool(self.probability([query], embedder)[0] >= self.threshold)

    def to_json(self, provenance: dict[str, Any]) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "features": self.features.describe(),
            "embedder": {"identity": self.embedder, "dim": self.dim},
            "threshold": self.threshold,
            "bias": self.bias,
            "weights": [round(float(w), 8) for w in self.weights],
            "fitted_on": provenance,
        }

    def save(self, path: str | Path, provenance: dict[str, Any]) -> None:
        Path(path).write_text(json.dumps(self.to_json(provenance), indent=1) + "\n")


def fit(
    x: np.ndarray, y: np.ndarray, features: Features, l2: float, embedder: Any, threshold: float = 0.5
) -> RecallTrigger:
    w, b = fit_logistic(x, y, l2)
    dim = int(np.asarray(embedder.embed(["x"])).shape[1]) if features.embedding else 0
    return RecallTrigger(features, w, b, str(getattr(embedder, "identity", None)), dim, threshold)


def load(path: str | Path) -> RecallTrigger:
    """The artifact at `path`; anything missing, malformed or inconsistent is one RecallTriggerError naming it."""
    p = Path(path).expanduser()
    st = p.stat() if p.exists() else None
    return _load(str(p.resolve()), st.st_mtime_ns if st else 0, st.st_size if st else -1)


@lru_cache(maxsize=8)
def _load(path: str, _mtime: int, _size: int) -> RecallTrigger:
    def bad(why: str) -> RecallTriggerError:
        return RecallTriggerError(f"recall trigger {path}: {why}")

    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise bad("file not found (fit one with python -m research.retrieval_trigger_fit)") from None
    except (OSError, ValueError, RecursionError) as e:
        # ValueError: bad JSON or UTF-8, or an integer literal past Python's digit limit; RecursionError: JSON nested
        # deeper than the parser's stack, which no artifact of ours is
        raise bad(f"not readable JSON ({type(e).__name__}: {str(e)[:200]})") from None
    try:
        trigger = _parse(data, path)
    except _Malformed as e:
        raise bad(str(e)) from None
    return trigger


class _Malformed(Exception):
    """One field of the artifact that is missing or of the wrong type or range (the message names it)."""


def _get(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise _Malformed(f"{where or 'the file'} is {type(obj).__name__}, expected an object")
    if key not in obj:
        raise _Malformed(f"{where + '.' if where else ''}{key} is missing")
    return obj[key]


def _show(v: Any) -> str:
    """A short name for a JSON value in an error: a container by its kind and size (its repr may be huge or deep)."""
    if isinstance(v, list | dict):
        return f"{'a list' if isinstance(v, list) else 'an object'} of {len(v)}"
    return f"{v!r:.60}"


def _finite(v: Any, name: str) -> float:
    """A finite JSON number (a bool is not one, though Python counts it an int): no silent coercion."""
    try:
        ok = not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)
    except OverflowError:  # an integer literal beyond a float
        ok = False
    if not ok:
        raise _Malformed(f"{name} is {_show(v)}, expected a finite number")
    return float(v)


def _count(obj: Any, key: str, where: str) -> int:
    v = _get(obj, key, where)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _Malformed(f"{where}.{key} is {_show(v)}, expected a whole number >= 0")
    return v


def _parse(data: Any, path: str) -> RecallTrigger:
    """Every field checked for its JSON type and range, so a file either means exactly what it says or is refused."""
    fmt = _get(data, "format", "")
    if fmt != FORMAT:
        raise _Malformed(f"format {_show(fmt)}, expected {FORMAT!r}")
    f = _get(data, "features", "")
    embedding = _get(f, "embedding", "features")
    if not isinstance(embedding, bool):
        raise _Malformed(f"features.embedding is {_show(embedding)}, expected true or false")
    features = Features(embedding=embedding, ngram_buckets=_count(f, "ngram_buckets", "features"))
    identity = _get(_get(data, "embedder", ""), "identity", "embedder")
    if not isinstance(identity, str):
        raise _Malformed(f"embedder.identity is {_show(identity)}, expected a string")
    dim = _count(data["embedder"], "dim", "embedder")
    threshold = _finite(_get(data, "threshold", ""), "threshold")
    if not 0.0 <= threshold <= 1.0:
        raise _Malformed(f"threshold {threshold!r} is not a probability in [0, 1]")
    bias = _finite(_get(data, "bias", ""), "bias")
    raw = _get(data, "weights", "")
    if not isinstance(raw, list):
        raise _Malformed(f"weights is {type(raw).__name__}, expected a list of numbers")
    weights = np.array([_finite(w, f"weights[{i}]") for i, w in enumerate(raw)], dtype=np.float64)
    if len(weights) != features.size(dim):
        raise _Malformed(f"{len(weights)} weights do not fit the features ({features.size(dim)} expected)")
    return RecallTrigger(features, weights, bias, identity, dim, threshold, path)


def trigger_path(configured: str | None) -> Path:
    return ARTIFACT if configured is None else Path(configured).expanduser()


def check_embedder(trigger: RecallTrigger, embedder: Any) -> None:
    """Also the vector size: an embedder with the right identity but another dimension is the same error."""
    trigger.check(embedder)
    if trigger.features.embedding:
        got = int(np.asarray(embedder.embed(["x"])).shape[1])
        if got != trigger.dim:
            raise RecallTriggerError(
                f"recall trigger {trigger.source}: fitted on {trigger.dim}-dimensional vectors, "
                f"the embedder gives {got}"
            )
