"""The run's results (`results.json`), typed and versioned — the one place its schema is declared.

`lme-harness report` (and so every run, which ends with it) writes it from the aggregates the report already
computes (`summarize`, `summarize_ci`, `cost_table`, `type_table`): nothing here computes a figure. Its fields:

  schema_version   int                      1 (a file of a later version is refused with one error naming it)
  headline_metric  str | None               the quality metric the report leads with
  unpriced_models  [str]                    models met without a price: their costs are null
  contestants      [ContestantResult]       one per mode, in the report's order:
    mode, cases, ok, failed                 (summary.csv)
    metrics        {metric: MetricResult}   mean, lo, hi (95 % bootstrap CI), n, not_run, mean_all (summary_ci.csv)
    cost           CostResult | None        per question: tokens by phase and USD (the report's cost table)
    by_type        {metric: [TypeResult]}   per question type, plus `abstention`, `overall`, `task_avg` (by_type.csv;
                                            empty for a single-type run)

A figure that is undefined (NaN in the CSVs) is null here. docs/reporting.md documents every field.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.storage import read_json_object, write_text_atomic

RESULTS_FILE = "results.json"
SCHEMA_VERSION = 1


class ResultsError(ValueError):
    """A results.json that cannot be read (its path named)."""


@dataclass(frozen=True)
class MetricResult:
    """One metric of one mode over its scored cases (a row of summary_ci.csv)."""

    mean: float | None
    lo: float | None  # 95 % percentile-bootstrap interval
    hi: float | None
    n: int  # cases with a value
    not_run: int  # scored cases without one (judge not run / unparsable)
    mean_all: float | None  # those counted as 0


@dataclass(frozen=True)
class TypeResult:
    """One metric of one mode over one question type (a row of by_type.csv)."""

    question_type: str  # a LongMemEval type, `abstention`, `overall` or `task_avg` (mean of the type means, no CI)
    mean: float | None
    lo: float | None
    hi: float | None
    n: int


@dataclass(frozen=True)
class CostResult:
    """What a mode spent per question (means over its scored cases), as the report's cost table shows it."""

    cases: int
    final_prompt_tokens: float | None  # the final answer call's prompt (the reference's figure)
    prompt_tokens_total: float | None  # every answer call's prompt
    summary_tokens: float | None
    judge_tokens: float | None  # the measurement's, not the contestant's
    total_tokens: float | None  # answer + ingest + retrieve
    answer_tokens: float | None
    ingest_tokens: float | None
    retrieve_tokens: float | None
    cost_answer: float | None  # USD per question; null when a model had no price
    cost_ingest: float | None
    cost_retrieve: float | None
    cost_contestant: float | None
    cost_judge: float | None
    cost_total: float | None
    cost_summary: float | None
    cost_embedding: float | None
    cost_total_sum: float | None  # USD over the mode's scored cases


@dataclass(frozen=True)
class ContestantResult:
    """Everything the run measured for one contestant (mode)."""

    mode: str
    cases: int
    ok: int
    failed: int
    metrics: dict[str, MetricResult]
    cost: CostResult | None
    by_type: dict[str, list[TypeResult]] = field(default_factory=dict)


@dataclass(frozen=True)
class Results:
    """The run's results file."""

    headline_metric: str | None
    unpriced_models: list[str]
    contestants: list[ContestantResult]
    schema_version: int = SCHEMA_VERSION

    def contestant(self, mode: str) -> ContestantResult:
        for c in self.contestants:
            if c.mode == mode:
                return c
        raise KeyError(f"results: no contestant {mode!r}")

    def to_json(self) -> str:
        doc = {"schema_version": self.schema_version, **dataclasses.asdict(self)}
        return json.dumps(doc, indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], where: str = RESULTS_FILE) -> Results:
        version = raw.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
            raise ResultsError(
                f"{where}: schema_version {version!r} is not one this harness reads (it reads 1..{SCHEMA_VERSION})"
            )
        try:
            return cls(
                headline_metric=raw["headline_metric"],
                unpriced_models=list(raw["unpriced_models"]),
                contestants=[_contestant(c) for c in raw["contestants"]],
                schema_version=version,
            )
        except (KeyError, TypeError, AttributeError) as e:  # a field missing, unknown or of another shape
            raise ResultsError(f"{where}: not a results file of schema version {version} ({e!r})") from e


def _contestant(raw: Mapping[str, Any]) -> ContestantResult:
    return ContestantResult(
        mode=raw["mode"],
        cases=raw["cases"],
        ok=raw["ok"],
        failed=raw["failed"],
        metrics={k: MetricResult(**v) for k, v in raw["metrics"].items()},
        cost=CostResult(**raw["cost"]) if raw["cost"] is not None else None,
        by_type={k: [TypeResult(**t) for t in v] for k, v in raw["by_type"].items()},
    )


def read_results(run_dir: Path) -> Results:
    path = Path(run_dir) / RESULTS_FILE
    return Results.from_json(read_json_object(path, ResultsError), str(path))


def write_results(results: Results, run_dir: Path) -> Path:
    path = Path(run_dir) / RESULTS_FILE
    write_text_atomic(path, results.to_json())
    return path


def _num(v: Any) -> float | None:
    """A figure as JSON holds it: NaN (undefined) is null."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def results_of(
    summary: pd.DataFrame,
    ci: pd.DataFrame,
    costs: pd.DataFrame,
    types: pd.DataFrame,
    *,
    headline_metric: str | None,
    unpriced_models: list[str],
) -> Results:
    """The results of the report's own tables: `summarize` (per mode), `summarize_ci`, `cost_table`, `type_table`."""
    cost_fields = [f.name for f in dataclasses.fields(CostResult)]
    cost_rows = {r["mode"]: r for r in costs.to_dict("records")} if not costs.empty else {}
    contestants = []
    for mode, counts in summary.iterrows():
        part = ci[ci["mode"] == mode]
        metrics = {
            r["metric"]: MetricResult(
                _num(r["mean"]), _num(r["lo"]), _num(r["hi"]), int(r["n"]), int(r["not_run"]), _num(r["mean_all"])
            )
            for r in part.to_dict("records")
        }
        by_type: dict[str, list[TypeResult]] = {}
        if not types.empty:
            for r in types[types["mode"] == mode].to_dict("records"):
                by_type.setdefault(r["metric"], []).append(
                    TypeResult(str(r["question_type"]), _num(r["mean"]), _num(r["lo"]), _num(r["hi"]), int(r["n"]))
                )
        row = cost_rows.get(mode)
        cost = (
            CostResult(**{k: int(row[k]) if k == "cases" else _num(row[k]) for k in cost_fields})  # type: ignore[arg-type]
            if row is not None
            else None
        )
        contestants.append(
            ContestantResult(
                mode=str(mode),
                cases=int(counts["cases"]),
                ok=int(counts["ok"]),
                failed=int(counts["failed"]),
                metrics=metrics,
                cost=cost,
                by_type=by_type,
            )
        )
    return Results(headline_metric, list(unpriced_models), contestants)
