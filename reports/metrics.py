"""The metrics a report, a comparison and the gate know about: every column's direction, label and format.

Scorer metrics are declared once, on the scorer (`MetricSpec`, harness/scoring/base.py); a run keeps those
declarations in run.json (`metrics`, one entry per spec with the scorer's `details` key). The figures the
harness itself measures (tokens, latency, tools, cost) are declared once, below (`HARNESS_METRICS`), as are
the scoreboard-only aggregates (`AGGREGATES`). `MetricCatalog` joins them; `catalog_of(meta)` is a run's.

A run written before run.json kept the specs (or one whose scorers are all built in) gets the built-in
scorers' specs, so its reports are unchanged. A scorer the report code has never heard of (its specs in
run.json) gets its columns, direction, label and format with no edit here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.run_meta import RunMeta
from harness.scoring.base import MetricSpec, declared_specs

# Presentation order of the built-in columns: the reference's published table first (HEADLINE: summary.csv and
# the summary tables), then the rest. Names only: directions, labels and formats come from the specs. Columns
# not listed (a new scorer's) follow in declaration order, and join the headline table when they are quality.
ORDER = (
    "rouge_l",
    "f1",
    "bleu1",
    "llm_score",
    "em",
    "final_prompt_tokens",
    "query_ms",
    "query_ms_reference",
    "llm_score_strict",
    "rouge_l_lib",
    "sacrebleu_sentence",
    "prompt_tokens_total",
    "summary_tokens",
    "n_search",
    "n_load",
    "truncated",
    "rouge1",
    "rouge2",
    "llm_acc",
    "llm_acc_strict",
    "lme_acc",
    "lme_acc_strict",
    "completion_tokens_total",
    "judge_tokens",
    "answer_calls",
    "tool_errors",
    "wall_ms",
    "summary_chars",
    "summary_bytes",
    "total_tokens",
    "answer_tokens",
    "ingest_tokens",
    "retrieve_tokens",
    "ingest_ms",
    "cost_answer",
    "cost_ingest",
    "cost_retrieve",
    "cost_contestant",
    "cost_judge",
    "cost_total",
    "cost_summary",
    "cost_embedding",
)
HEADLINE = frozenset(ORDER[:16])
# Quality metrics are listed judge-first in the CI tables and plots.
QUALITY_ORDER = (
    "em",
    "llm_score",
    "llm_score_strict",
    "llm_acc_strict",
    "lme_acc",
    "lme_acc_strict",
    "rouge_l",
    "f1",
    "bleu1",
    "rouge1",
    "rouge2",
    "rouge_l_lib",
    "sacrebleu_sentence",
)


def _m(name: str, hib: bool, label: str, fmt: str, description: str) -> MetricSpec:
    return MetricSpec(name, hib, description, label, fmt, quality=False)


TOKENS, COUNT, MONEY = "{:,.0f}", "{:.2f}", "{:.6f}"
# What the harness measures per case (not a scorer's): the one declaration of these columns.
HARNESS_METRICS: tuple[MetricSpec, ...] = (
    _m(
        "final_prompt_tokens", False, "prompt tokens", TOKENS, "prompt tokens of the final answer call (reference §3.5)"
    ),
    _m("query_ms", False, "query latency ms", TOKENS, "the reference's query latency: model time plus harness time"),
    _m(
        "query_ms_reference",
        False,
        "query latency ms (reference def.)",
        TOKENS,
        "query latency with the reference's per-event embedding time (runners/reference_latency.py)",
    ),
    _m("prompt_tokens_total", False, "prompt tokens, all calls", TOKENS, "prompt tokens of every answer call"),
    _m("summary_tokens", False, "summary gen tokens", TOKENS, "tokens of the summary calls this case used"),
    _m("n_search", False, "searches/case", COUNT, "session_search tool calls"),
    _m("n_load", False, "loads/case", COUNT, "session_load tool calls"),
    _m("truncated", False, "truncated share", COUNT, "share of cases whose context was cut"),
    _m("completion_tokens_total", False, "completion tokens, all calls", TOKENS, "completion tokens of answer calls"),
    _m("judge_tokens", False, "judge tokens", TOKENS, "prompt + completion tokens of the judge calls"),
    _m("answer_calls", False, "answer calls/case", COUNT, "answer-model calls"),
    _m("tool_errors", False, "tool errors/case", COUNT, "tool calls that failed"),
    _m("wall_ms", False, "wall ms", TOKENS, "this process's wall time for the mode (a cached re-run shrinks it)"),
    _m("summary_chars", False, "summary chars", TOKENS, "characters of the summary"),
    _m("summary_bytes", False, "summary bytes (reference's chars)", TOKENS, "UTF-8 bytes of the summary"),
    # what a contestant spent on a question by phase (reports/phases.py): LLM tokens, prompt + completion
    _m("total_tokens", False, "tokens incl. ingest", TOKENS, "answer + ingest + retrieve LLM tokens of the question"),
    _m("answer_tokens", False, "answer tokens", TOKENS, "prompt + completion tokens of the answer calls"),
    _m("ingest_tokens", False, "ingest tokens", TOKENS, "a summary's generation, ingest calls, a provider's ingest"),
    _m("retrieve_tokens", False, "retrieve tokens", TOKENS, "a memory provider's reported query-time LLM tokens"),
    _m(
        "ingest_ms",
        False,
        "ingest ms",
        TOKENS,
        "ingest time: a provider's ingest and readiness, a summary's model time",
    ),
    _m("cost_answer", False, "cost: answer $/case", MONEY, "answer calls priced with the price table"),
    _m("cost_ingest", False, "cost: ingest $/case", MONEY, "summary, ingest embeddings, a provider's ingest"),
    _m("cost_retrieve", False, "cost: retrieve $/case", MONEY, "query embeddings, a provider's retrieve"),
    _m("cost_contestant", False, "cost: contestant $/case", MONEY, "answer + ingest + retrieve (the judge apart)"),
    _m("cost_judge", False, "cost: judge $/case", MONEY, "judge calls priced"),
    _m("cost_total", False, "cost $/case", MONEY, "every call priced: answer + ingest + retrieve + judge"),
    _m("cost_summary", False, "cost: summary $/case", MONEY, "summary calls priced (part of ingest)"),
    _m("cost_embedding", False, "cost: embedding $/case", MONEY, "embedding calls priced (ingest's and retrieve's)"),
)
COST_KEYS = tuple(m.name for m in HARNESS_METRICS if m.name.startswith("cost_"))
# Scoreboard-only aggregates (no per-case column), for the gate's direction.
AGGREGATES: tuple[MetricSpec, ...] = (
    _m("failed", False, "failed", TOKENS, "records not scored"),
    _m("ok", True, "scored", TOKENS, "records scored"),
    _m("savings_pct", True, "savings %", COUNT, "mean per-case prompt savings against long_context"),
    _m("savings_ratio_pct", True, "savings % (ratio of means)", COUNT, "1 - mean(mode)/mean(long_context)"),
    _m("cost_total_sum", False, "cost $ (run)", MONEY, "the run's total cost"),
    _m("search_case_share", True, "cases with a search", COUNT, "share of cases with >= 1 search"),
    _m("load_case_share", True, "cases with a load", COUNT, "share of cases with >= 1 load"),
    _m("n_search_total", False, "searches", TOKENS, "searches in the run"),
    _m("n_load_total", False, "loads", TOKENS, "loads in the run"),
    # memory contestants (reports/memory_systems.py memory_scoreboard)
    _m("memory_turn_recall", True, "memory: turn recall", COUNT, "gold evidence turn among the retrieved items"),
    _m("memory_session_recall", True, "memory: session recall", COUNT, "gold evidence session among the items"),
    _m("memory_leaked_items", False, "memory: items after the question", TOKENS, "items dated after the question"),
    _m(
        "memory_cross_unit_items",
        False,
        "memory: items from other cases",
        TOKENS,
        "items from another case's history (a unit not isolated)",
    ),
    _m("memory_provider_failures", False, "memory: provider failures", TOKENS, "cases the provider failed on"),
    _m("memory_ingest_tokens", False, "memory: ingest tokens/case", TOKENS, "LLM tokens spent ingesting"),
    _m("memory_ingest_usd", False, "memory: ingest $/case", MONEY, "ingest cost the provider reports"),
)


def _builtin_scorers() -> list[tuple[str, Sequence[MetricSpec]]]:
    from harness.scoring.judges import LongMemEvalJudge, TrpcJudge
    from harness.scoring.lexical import LexicalScorer

    return [(cls.__name__, declared_specs(cls)) for cls in (LexicalScorer, TrpcJudge, LongMemEvalJudge)]


class MetricCatalog:
    """The columns of one run (or several): scorer specs and harness metrics, in presentation order."""

    def __init__(self, scorer_specs: Iterable[tuple[str, MetricSpec]] = ()) -> None:
        found: dict[str, MetricSpec] = {}
        self.source: dict[str, str] = {}  # metric -> details key of the scorer that declared it
        for key, spec in [(k, s) for k, specs in _builtin_scorers() for s in specs] + list(scorer_specs):
            found[spec.name] = spec
            self.source[spec.name] = key
        for spec in HARNESS_METRICS:
            found.setdefault(spec.name, spec)
        rank = {k: i for i, k in enumerate(ORDER)}
        ordered = sorted(found.values(), key=lambda s: rank.get(s.name, len(ORDER)))  # stable: new ones in order
        self.columns: dict[str, MetricSpec] = {s.name: s for s in ordered}
        self.aggregates: dict[str, MetricSpec] = {s.name: s for s in AGGREGATES}
        qrank = {k: i for i, k in enumerate(QUALITY_ORDER)}
        self.quality_keys: tuple[str, ...] = tuple(
            sorted((s.name for s in ordered if s.quality), key=lambda k: qrank.get(k, len(QUALITY_ORDER)))
        )
        self.headline_keys: tuple[str, ...] = tuple(
            s.name for s in ordered if s.name in HEADLINE or (s.name not in rank and s.quality)
        )
        self.judged_keys = tuple(s.name for s in ordered if s.judged)
        self.binary_keys = frozenset(s.name for s in ordered if s.binary)
        self.task_averaged_keys = frozenset(s.name for s in ordered if s.task_averaged)
        self.derived = [(self.source[s.name], s) for s in ordered if s.verdict]

    def __deepcopy__(self, memo: dict[int, object]) -> MetricCatalog:
        # Read-only once built, and pandas deep-copies a frame's attrs (which hold the catalog) on every operation:
        # sharing it keeps a report's many frame operations from copying it thousands of times.
        return self

    def __contains__(self, key: str) -> bool:
        return key in self.columns

    def label(self, key: str) -> str:
        spec = self.columns.get(key)
        return spec.title if spec else key

    def fmt(self, key: str) -> str:
        spec = self.columns.get(key)
        return spec.fmt if spec else "{:.4f}"

    def arrow_label(self, key: str) -> str:
        """`label ↑` / `label ↓` (the bare key when unknown)."""
        hib = self.higher_is_better(key)
        return self.label(key) + ("" if hib is None else " ↑" if hib else " ↓")

    def higher_is_better(self, metric: str) -> bool | None:
        """Direction of any metric the scoreboard can hold ("lme_acc@all", "em@type:T", "lme_acc:not_run", ...);
        None when unknown."""
        if metric in self.aggregates:
            return self.aggregates[metric].higher_is_better
        base, _, _suffix = metric.partition("@")
        if base.endswith(":not_run"):
            return False
        for tail in ("_task_avg", "_abstention"):
            if base.endswith(tail):
                base = base[: -len(tail)]
        spec = self.columns.get(base)
        return None if spec is None else spec.higher_is_better


BUILTIN = MetricCatalog()


def catalog_of(*metas: RunMeta | Mapping[str, Any] | None) -> MetricCatalog:
    """The catalog of runs from their run.json: built-in scorers, then the specs each run declares."""
    entries = [e for m in metas for e in (RunMeta.of(m).metrics or [])]
    if not entries:
        return BUILTIN
    fields = {f.name for f in dataclasses.fields(MetricSpec)}
    return MetricCatalog(
        [(str(e.get("scorer", "")), MetricSpec(**{k: v for k, v in e.items() if k in fields})) for e in entries]
    )
