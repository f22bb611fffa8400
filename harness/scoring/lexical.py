"""Lexical answer-quality metrics.

Two families, kept apart on purpose:

* Reference metrics (`f1`, `rouge1`, `rouge2`, `rouge_l`, `bleu1`, `em`) reproduce the tRPC
  LongMemEval benchmark (trpc-group/trpc-agent-go-benchmark @ 1edee87,
  summary/trpc-agent-go-impl/qmsum_metrics.go and longmemeval.go `containsExactMatch`;
  spec: docs/reference/trpc-longmemeval-benchmark.md §6) so our numbers are comparable
  with the published table. Go string semantics are mirrored where Python differs:
  `strings.ToLower` is a per-rune simple mapping (no final-sigma rule, U+0130 -> "i") and
  `strings.TrimSpace` does not trim U+001C..U+001F. Remaining known gaps: Unicode table
  version (Python 3.11 = 14.0, Go >= 1.21 = 15.0) and possibly the last ulp of `exp` in the
  brevity penalty.
* Library metrics (`rouge_l_lib`, `sacrebleu_sentence`) are the standard implementations, named
  for what they are so nobody mistakes them for the reference numbers. Note that rouge-score's
  default tokenizer keeps only [a-z0-9], so non-ASCII answers score 0 there.

All functions take (prediction, reference), the argument order of the reference code.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import cache

from harness.golang import go_lower, go_trim_space
from harness.scoring.base import MetricSpec, ScoreInput, ScoreResult, require_text

# Literal stop token of DeepSeek models, stripped by the reference before tokenizing.
EOS_LITERAL = "<｜end▁of▁sentence｜>"

# [^\W_] is exactly Unicode categories L* and N* (verified over all code points for Python 3.11),
# i.e. the complement of the reference's `[^\p{L}\p{N}\s]` once whitespace splitting is applied.
_TOKEN_RE = re.compile(r"[^\W_]+")


def tokenize(text: str) -> list[str]:
    """Reference `normalizeAndTokenize`: drop the EOS literal, lowercase, keep runs of letters/digits."""
    # The reference replaces the literal with a space, so it also separates adjacent words.
    text = text.replace(EOS_LITERAL, " ")
    return _TOKEN_RE.findall(go_lower(text))


def _prf(matches: int, n_pred: int, n_ref: int) -> float:
    # Same operation order as the Go code, so results agree to the bit.
    precision = matches / n_pred
    recall = matches / n_ref
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def _clipped_matches(pred: Sequence[str | tuple[str, ...]], ref: Sequence[str | tuple[str, ...]]) -> int:
    ref_counts = Counter(ref)
    return sum(min(c, ref_counts[g]) for g, c in Counter(pred).items())


def token_f1(prediction: str, reference: str) -> float:
    """Multiset token-overlap F1; both empty -> 1, one empty -> 0."""
    pred, ref = tokenize(prediction), tokenize(reference)
    if not pred or not ref:
        return 1.0 if not pred and not ref else 0.0
    return _prf(_clipped_matches(pred, ref), len(pred), len(ref))


def rouge_n(prediction: str, reference: str, n: int) -> float:
    """F1 of clipped n-gram counts; if either side has < n tokens: 1 when both are empty, else 0."""
    if n < 1:
        raise ValueError(f"rouge_n: n must be >= 1, got {n}")
    pred, ref = tokenize(prediction), tokenize(reference)
    if len(pred) < n or len(ref) < n:
        return 1.0 if not pred and not ref else 0.0
    pred_grams = [tuple(pred[i : i + n]) for i in range(len(pred) - n + 1)]
    ref_grams = [tuple(ref[i : i + n]) for i in range(len(ref) - n + 1)]
    return _prf(_clipped_matches(pred_grams, ref_grams), len(pred_grams), len(ref_grams))


def rouge1(prediction: str, reference: str) -> float:
    return rouge_n(prediction, reference, 1)


def rouge2(prediction: str, reference: str) -> float:
    return rouge_n(prediction, reference, 2)


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        curr = [0] * (len(b) + 1)
        for j, y in enumerate(b, start=1):
            curr[j] = prev[j - 1] + 1 if x == y else max(curr[j - 1], prev[j])
        prev = curr
    return prev[-1]


def rouge_l(prediction: str, reference: str) -> float:
    """Token-LCS F1 (beta = 1); both empty -> 1, one empty -> 0."""
    pred, ref = tokenize(prediction), tokenize(reference)
    if not pred or not ref:
        return 1.0 if not pred and not ref else 0.0
    return _prf(lcs_length(pred, ref), len(pred), len(ref))


def bleu1(prediction: str, reference: str) -> float:
    """Clipped unigram precision x brevity penalty; empty prediction -> 1 if the reference is empty, else 0."""
    pred, ref = tokenize(prediction), tokenize(reference)
    if not pred:
        return 1.0 if not ref else 0.0
    precision = _clipped_matches(pred, ref) / len(pred)
    bp = 1.0 if len(pred) >= len(ref) else math.exp(1 - len(ref) / len(pred))
    return bp * precision


def contains_match(prediction: str, reference: str) -> bool:
    """Reference "exact match": the trimmed, lowercased reference is a substring of the prediction.

    No punctuation normalisation. An empty reference matches only an empty prediction.
    """
    pred = go_lower(go_trim_space(prediction))
    ref = go_lower(go_trim_space(reference))
    if not ref:
        return not pred
    return ref in pred


@cache
def _rouge_l_scorer():  # built once: constructing RougeScorer is not free
    from rouge_score import rouge_scorer

    # Default tokenizer, no stemmer: no NLTK data is needed, so this works offline.
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


@cache
def _sentence_bleu():
    from sacrebleu.metrics import BLEU

    # Same defaults as sacrebleu.sentence_bleu: 4-gram, 13a tokenizer, 'exp' smoothing, effective order.
    return BLEU(effective_order=True)


def rouge_l_lib(prediction: str, reference: str) -> float:
    """rouge-score `rougeL` F-measure (default tokenizer, no stemmer)."""
    return float(_rouge_l_scorer().score(reference, prediction)["rougeL"].fmeasure)


def sacrebleu_sentence(prediction: str, reference: str) -> float:
    """sacrebleu sentence BLEU (default settings), scaled to [0, 1]."""
    return float(_sentence_bleu().sentence_score(prediction, [reference]).score) / 100.0


class LexicalScorer:
    """Reference lexical metrics plus the library ROUGE-L/BLEU, for one answer at a time."""

    metrics: tuple[MetricSpec, ...] = (
        MetricSpec("f1", True, "Reference token F1 (multiset overlap, tRPC tokenizer)", "F1"),
        MetricSpec("rouge1", True, "Reference ROUGE-1 F1 (clipped unigrams, tRPC tokenizer)", "ROUGE-1"),
        MetricSpec("rouge2", True, "Reference ROUGE-2 F1 (clipped bigrams, tRPC tokenizer)", "ROUGE-2"),
        MetricSpec("rouge_l", True, "Reference ROUGE-L F1 (token LCS, beta=1, tRPC tokenizer)", "ROUGE-L"),
        MetricSpec("bleu1", True, "Reference BLEU-1 (clipped unigram precision x brevity penalty)", "BLEU"),
        MetricSpec(
            "em",
            True,
            "Reference containment match: lowercased reference is a substring of the answer",
            "EM",
            binary=True,
        ),
        MetricSpec(
            "rouge_l_lib", True, "rouge-score rougeL F-measure (default tokenizer, no stemmer)", "ROUGE-L (rouge-score)"
        ),
        MetricSpec(
            "sacrebleu_sentence", True, "sacrebleu sentence BLEU (4-gram, exp smoothing) / 100", "BLEU-4 (sacrebleu)"
        ),
    )

    def score(self, item: ScoreInput) -> ScoreResult:
        require_text(item, "LexicalScorer")
        p, r = item.prediction, item.reference
        values: dict[str, float | None] = {
            "f1": token_f1(p, r),
            "rouge1": rouge1(p, r),
            "rouge2": rouge2(p, r),
            "rouge_l": rouge_l(p, r),
            "bleu1": bleu1(p, r),
            "em": 1.0 if contains_match(p, r) else 0.0,
            "rouge_l_lib": rouge_l_lib(p, r),
            "sacrebleu_sentence": sacrebleu_sentence(p, r),
        }
        details = {"pred_tokens": len(tokenize(p)), "ref_tokens": len(tokenize(r))}
        return ScoreResult(values=values, details=details)
