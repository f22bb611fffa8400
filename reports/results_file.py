"""The run's results (`results.json`), typed and versioned — the one place its schema is declared.

`lme-harness report` (and so every run, which ends with it) writes it from the figures the report computes
(reports/run_results.py `figures_of`); `report`, `gate` and `compare` read their figures from it, and rebuild it from
the records when it is missing, of schema version 1, or stale (`source` no longer matches the records, run.json or the
price table). Nothing here computes a figure. Its fields:

  schema_version   int                      2 (1 is still read; a file of a later version is refused, naming it)
  source           ResultsSource            what the figures were computed from (sha256 of records.jsonl, of the
                                            run.json parts that figures depend on, of the price table's prices)
  headline_metric  str | None               the quality metric the report leads with
  unpriced_models  [str]                    models met without a price: their costs are null
  questions        int                      distinct questions among the records
  contestants      [ContestantResult]       one per mode, in the report's order:
    mode, cases, ok, failed                 (summary.csv)
    metrics        {metric: MetricResult}   mean, lo, hi (95 % bootstrap CI), n, not_run, mean_all (summary_ci.csv)
    cost           CostResult | None        per question: tokens by phase and USD (the report's cost table)
    by_type        {metric: [TypeResult]}   per question type, plus `abstention`, `overall`, `task_avg` (by_type.csv;
                                            empty for a single-type run)
    judges         {metric: JudgeResult}    a judge metric's task-averaged and abstention accuracy (the Judges table)
    savings        SavingsResult | None     prompt savings against long_context (the savings table)
    tools          ToolResult | None        searches and loads (the tool-use table)
    latency        LatencyResult | None     median ingest, answer and ingest + answer time per question
    provider       ProviderResult | None    a memory contestant's provider: its name, variant, whether it reported spend
    memory         MemoryResult | None      a memory contestant's measurements (recall, leaks, provider failures, ...)

A figure that is undefined (NaN in the CSVs) is null here. docs/reporting.md documents every field.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.storage import read_json_object, write_text_atomic

RESULTS_FILE = "results.json"
SCHEMA_VERSION = 2
REBUILD = "`lme-harness report RUN_DIR` rebuilds it from the records"


class ResultsError(ValueError):
    """A results.json that cannot be read (its path named)."""


class NewerResultsError(ResultsError):
    """A results.json of a later schema version than this harness reads: written by a newer harness, left alone."""


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
class JudgeResult:
    """A judge metric beyond its mean (which is in `metrics`): upstream's task-averaged and abstention accuracy."""

    task_avg: float | None  # mean over question types of each type's mean
    abstention: float | None  # over the `_abs` questions
    abstention_n: int


@dataclass(frozen=True)
class SavingsResult:
    """Prompt savings (final-call prompt tokens) against long_context over the cases scored in both."""

    pairs: int
    long_mean: float | None
    mode_mean: float | None
    savings_pct: float | None  # mean of per-case 100·(long − mode)/long (the reference's figure)
    lo: float | None
    hi: float | None
    savings_ratio_pct: float | None  # 100·(1 − mean(mode)/mean(long))


@dataclass(frozen=True)
class ToolResult:
    """Tool use over a mode's scored cases."""

    cases: int
    cases_with_search: int
    cases_with_load: int
    search_total: int
    load_total: int
    search_mean: float | None
    load_mean: float | None
    tool_errors: int
    answer_calls_mean: float | None


@dataclass(frozen=True)
class LatencyResult:
    """Medians over a mode's scored questions, in ms."""

    ingest_ms_p50: float | None
    answer_ms_p50: float | None
    total_ms_p50: float | None  # of ingest + answer per question


@dataclass(frozen=True)
class ProviderResult:
    """The memory provider a contestant drove, as its records' traces name it."""

    name: str
    variant: str  # "" at the fair defaults; else what differs (`settings (top_k=20)`, `native_answer`)
    spend_reported: bool  # False: a remote service that reported neither tokens nor cost


@dataclass(frozen=True)
class MemoryResult:
    """A memory contestant's measurements (reports/memory_systems.py `memory_scoreboard`); null: not measured."""

    provider_failures: int
    turn_recall: float | None  # recall_any at the largest k recorded, abstention left out
    session_recall: float | None
    leaked_items: int | None  # items dated after the question
    cross_unit_items: int | None  # items from another case's history
    ingest_tokens: float | None  # ingest LLM tokens per answered question
    ingest_usd: float | None  # only when every case reported its cost
    headline_with_provider_failures: float | None  # the headline metric with provider failures counted as wrong


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
    judges: dict[str, JudgeResult] = field(default_factory=dict)
    savings: SavingsResult | None = None
    tools: ToolResult | None = None
    latency: LatencyResult | None = None
    provider: ProviderResult | None = None
    memory: MemoryResult | None = None


@dataclass(frozen=True)
class ResultsSource:
    """What the figures were computed from, so a reader can tell a stale file (reports/run_results.py `source_of`)."""

    records_sha256: str  # records.jsonl as read
    run_sha256: (
        str  # the parts of run.json the figures depend on: the metric specs and the endpoints calls are priced by
    )
    prices_sha256: str  # the price table's date, currency and prices
    price_table: str  # its file name and date, for the reader


@dataclass(frozen=True)
class Results:
    """The run's results file."""

    headline_metric: str | None
    unpriced_models: list[str]
    contestants: list[ContestantResult]
    source: ResultsSource | None = None  # None only for a file of schema version 1
    questions: int | None = None  # None only for a file of schema version 1
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
            newer = isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION
            raise (NewerResultsError if newer else ResultsError)(
                f"{where}: schema_version {version!r} is not one this harness reads (it reads 1..{SCHEMA_VERSION}; "
                f"{REBUILD})"
            )
        since = _Since(raw, version)
        try:
            return cls(
                headline_metric=raw["headline_metric"],
                unpriced_models=list(raw["unpriced_models"]),
                contestants=[_contestant(c, version) for c in raw["contestants"]],
                source=since.get("source", 2, lambda v: ResultsSource(**v)),
                questions=since.get("questions", 2, int),
                schema_version=version,
            )
        except (KeyError, TypeError, AttributeError) as e:  # a field missing, unknown or of another shape
            raise ResultsError(f"{where}: not a results file of schema version {version} ({e!r})") from e


@dataclass(frozen=True)
class _Since:
    """Reads a field added in a later schema version: required from that version on, absent (None) before it."""

    raw: Mapping[str, Any]
    version: int

    def get(self, key: str, since: int, build: Callable[[Any], Any], default: Any = None) -> Any:
        if self.version < since:
            return default
        value = self.raw[key]
        return None if value is None else build(value)


def _contestant(raw: Mapping[str, Any], version: int) -> ContestantResult:
    since = _Since(raw, version)
    return ContestantResult(
        mode=raw["mode"],
        cases=raw["cases"],
        ok=raw["ok"],
        failed=raw["failed"],
        metrics={k: MetricResult(**v) for k, v in raw["metrics"].items()},
        cost=CostResult(**raw["cost"]) if raw["cost"] is not None else None,
        by_type={k: [TypeResult(**t) for t in v] for k, v in raw["by_type"].items()},
        judges=since.get("judges", 2, lambda v: {k: JudgeResult(**j) for k, j in v.items()}, {}),
        savings=since.get("savings", 2, lambda v: SavingsResult(**v)),
        tools=since.get("tools", 2, lambda v: ToolResult(**v)),
        latency=since.get("latency", 2, lambda v: LatencyResult(**v)),
        provider=since.get("provider", 2, lambda v: ProviderResult(**v)),
        memory=since.get("memory", 2, lambda v: MemoryResult(**v)),
    )


def read_results(run_dir: Path) -> Results:
    path = Path(run_dir) / RESULTS_FILE
    return Results.from_json(read_json_object(path, ResultsError), str(path))


def write_results(results: Results, run_dir: Path) -> Path:
    path = Path(run_dir) / RESULTS_FILE
    write_text_atomic(path, results.to_json())
    return path
