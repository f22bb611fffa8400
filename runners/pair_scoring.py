"""Scoring an answered (case, mode) pair, and scoring again the pairs whose scoring failed.

A scorer that returns `ScoreResult.error` (the judge endpoint failed after retries, timed out, answered with an
HTTP error) makes the record "scoring_failed": the answer, calls, usage and the other scorers' values are kept,
`scoring_error` says why, and the pair counts as failed (exit 3, failure table) without being scored as 0.
The next `run` (or `rescore`) scores it again with no answer-model call.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.records import SCHEMA_VERSION, STATUS_OK, STATUS_SCORING_FAILED, Record, RecordWriter
from harness.scoring.base import ScoreInput, details_key

log = logging.getLogger(__name__)


def score_all(scorers: Sequence[Any], item: ScoreInput) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(metrics, details by scorer class, scoring errors as "Scorer: why") of one answer."""
    metrics: dict[str, Any] = {}
    details: dict[str, Any] = {}
    errors: list[str] = []
    for s in scorers:
        res = s.score(item)
        metrics.update(res.values)
        if res.details:
            details[details_key(s)] = res.details
        if getattr(res, "error", None):
            errors.append(f"{details_key(s)}: {res.error}")
    return metrics, details, errors


def item_of(rec: Record) -> ScoreInput:
    """The scorer input of an answered record."""
    return ScoreInput(
        rec.question_id,
        rec.question_type or "",
        rec.question or "",
        str(rec.reference or ""),
        rec.prediction or "",
        rec.mode or "",
    )


def apply_scores(rec: Record, scorers: Sequence[Any], item: ScoreInput | None = None) -> Record:
    """Score `rec`'s answer into it (metrics, metric_details, status, scoring_error) and return it."""
    metrics, details, errors = score_all(scorers, item or item_of(rec))
    rec.metrics, rec.metric_details = metrics, details
    rec.scoring_error = None
    rec.status = STATUS_OK
    if errors:
        rec.status = STATUS_SCORING_FAILED
        rec.scoring_error = "; ".join(errors)
        log.warning(
            "%s / %s: scoring failed, the answer is kept and only scoring is redone by the next run: %s",
            rec.question_id,
            rec.mode,
            rec.scoring_error,
        )
    return rec


def rescore_pending(records: Sequence[Record], scorers: Sequence[Any], writer: RecordWriter, concurrency: int) -> int:
    """Score again the answered records whose scoring failed; append the new records. Returns how many failed again."""

    def one(rec: Record) -> Record:
        return apply_scores(dataclasses.replace(rec, schema_version=SCHEMA_VERSION), scorers)

    failed = 0
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for new in pool.map(one, records):
            writer.append(new)
            failed += new.status != STATUS_OK
    return failed
