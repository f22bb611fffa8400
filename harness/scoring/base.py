"""Value types shared by every scorer.

A scorer declares its metrics up front (name + direction) so that aggregation, reports and
the regression gate know which way is worse without knowing the scorer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class MetricSpec:
    name: str
    higher_is_better: bool
    description: str


@dataclass
class ScoreInput:
    """One (question, reference, prediction) triple to score. `prediction` is the trimmed final answer."""

    question_id: str
    question_type: str
    question: str
    reference: str
    prediction: str


@dataclass
class ScoreResult:
    """Metric values keyed by `MetricSpec.name`.

    None means "not computed" (e.g. the judge did not run or its reply was unusable); it must
    never be replaced by 0, which would be a real score.
    """

    values: dict[str, float | None]
    details: dict[str, Any] = field(default_factory=dict)
    # Set when scoring itself failed (e.g. the judge endpoint errored or timed out after retries): the values
    # are None and the pair's scoring must be redone. A judge that answered unusably is not an error.
    error: str | None = None


@runtime_checkable
class Scorer(Protocol):
    metrics: tuple[MetricSpec, ...]

    def score(self, item: ScoreInput) -> ScoreResult: ...


def require_text(item: ScoreInput, scorer: str) -> None:
    """Fail loudly, naming the case, when a prediction or reference is not a string."""
    for name in ("prediction", "reference"):
        value = getattr(item, name)
        if not isinstance(value, str):
            raise TypeError(f"{scorer}: {name} of {item.question_id!r} must be str, got {type(value).__name__}")
