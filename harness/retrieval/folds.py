"""Two folds of a question set for fitting on one and reporting the other (issue 24).

Within each question type the questions are ordered by sha256(question_id) and dealt alternately to fold A and
fold B, so the split is deterministic, the folds are disjoint, and each type is split as evenly as it can be
(the counts differ by at most one). The split depends only on the ids and types given, never on their order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

FOLDS = ("A", "B")


def _key(question_id: str) -> str:
    return hashlib.sha256(question_id.encode("utf-8")).hexdigest()


def assign_folds(questions: Iterable[tuple[str, str]]) -> dict[str, str]:
    """question_id → "A" or "B" for (question_id, question_type) pairs; a repeated id is one ValueError."""
    by_type: dict[str, list[str]] = {}
    seen: set[str] = set()
    for qid, qtype in questions:
        if qid in seen:
            raise ValueError(f"assign_folds: question_id {qid!r} appears twice")
        seen.add(qid)
        by_type.setdefault(qtype, []).append(qid)
    out: dict[str, str] = {}
    for qtype in sorted(by_type):
        for i, qid in enumerate(sorted(by_type[qtype], key=lambda q: (_key(q), q))):
            out[qid] = FOLDS[i % 2]
    return out


def select_fold(cases: list, fold: str) -> list:
    """The cases (objects with question_id and question_type) in `fold` ("A" or "B"), in their given order."""
    name = str(fold).upper()
    if name not in FOLDS:
        raise ValueError(f"fold must be one of {FOLDS}, got {fold!r}")
    folds = assign_folds((c.question_id, c.question_type) for c in cases)
    return [c for c in cases if folds[c.question_id] == name]
