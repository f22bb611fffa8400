"""Value types shared by every scorer.

A scorer declares its metrics up front (`MetricSpec`: name, direction, label, format, kind) so that
aggregation, reports, compare and the regression gate know which way is worse, what to call a column and how
to print it, without knowing the scorer. This declaration is the only one: a run keeps it in run.json
(`metrics`), and reports/metrics.py builds every table's columns from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class MetricSpec:
    name: str
    higher_is_better: bool
    description: str
    label: str = ""  # column header in reports ("" → the name)
    fmt: str = "{:.4f}"  # how a value is printed
    judged: bool = False  # a judge's verdict: None means "not run", reported with the judged count and over all cases
    binary: bool = False  # 0/1 per case: paired comparisons add McNemar's test
    quality: bool = True  # an answer-quality figure (listed first), not a cost, token or latency figure
    task_averaged: bool = False  # also reported as the mean of per-type means and on abstention questions
    # Derived at report time from the scorer's details: 1 when details[verdict] == "correct" (or the judge was
    # skipped on an exact match), 0 when "incorrect", else None. Only in a scorer's `derived_metrics`.
    verdict: str | None = None

    @property
    def title(self) -> str:
        return self.label or self.name


@dataclass
class ScoreInput:
    """One (question, reference, prediction) triple to score. `prediction` is the trimmed final answer."""

    question_id: str
    question_type: str
    question: str
    reference: str
    prediction: str
    mode: str = ""  # the mode that answered: a judge sampled per mode (`judge.sample_per_mode`) keys its call by it


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
    metrics: tuple[MetricSpec, ...]  # exactly the keys of ScoreResult.values
    # (optional) derived_metrics: tuple[MetricSpec, ...], each with `verdict` set: computed from the details

    def score(self, item: ScoreInput) -> ScoreResult: ...


def declared_specs(scorer: Any) -> tuple[MetricSpec, ...]:
    """A scorer's (or scorer class's) metrics, then its report-time derived metrics."""
    return tuple(scorer.metrics) + tuple(getattr(scorer, "derived_metrics", ()))


def details_key(scorer: Any) -> str:
    """The key of a scorer's details (and of its errors) in a record: its class name, as records always had it,
    or the `details_name` a wrapper declares (a voted judge keeps its inner judge's key, so reports find it)."""
    if isinstance(scorer, type):
        return scorer.__name__
    return getattr(scorer, "details_name", None) or type(scorer).__name__


def specs_json(scorers: Iterable[Any]) -> list[dict[str, Any]]:
    """run.json's `metrics`: every spec of a run's scorers, each with its scorer's details key (`scorer`)."""
    return [{"scorer": details_key(s), **dataclasses.asdict(spec)} for s in scorers for spec in declared_specs(s)]


def require_text(item: ScoreInput, scorer: str) -> None:
    """Fail loudly, naming the case, when a prediction or reference is not a string."""
    for name in ("prediction", "reference"):
        value = getattr(item, name)
        if not isinstance(value, str):
            raise TypeError(f"{scorer}: {name} of {item.question_id!r} must be str, got {type(value).__name__}")
