"""A run's figures, computed once from its records, and its results file (`results.json`) read or rebuilt.

The records are the source of truth; results.json is derived from them and rebuildable without a model. `figures_of`
computes every table the report shows and `results_of` turns them into the typed `Results` (the report writes it);
`load_results` is how `gate` and `compare` get a run's figures: the file when it still matches what it was computed
from (`ResultsSource`: the records, the figure-bearing parts of run.json, the price table), else the figures rebuilt
from the records, with one line saying why.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.records import RECORDS_FILE
from harness.run_meta import RunMeta
from reports import by_type
from reports.aggregate import (
    RunData,
    cost_table,
    headline_metric,
    judge_table,
    load_meta,
    read_run,
    savings,
    summarize,
    summarize_ci,
    tool_stats,
)
from reports.cost import Endpoints, PriceTable, load_price_table
from reports.memory_systems import memory_scoreboard
from reports.results_file import (
    RESULTS_FILE,
    ContestantResult,
    CostResult,
    JudgeResult,
    LatencyResult,
    MemoryResult,
    MetricResult,
    NewerResultsError,
    ProviderResult,
    Results,
    ResultsError,
    ResultsSource,
    SavingsResult,
    ToolResult,
    TypeResult,
    read_results,
    write_results,
)
from reports.standings import Contestant, contestants_of


@dataclass
class RunFigures:
    """Every aggregate of one run the report shows and results.json holds, computed once."""

    run: RunData
    table: PriceTable
    summary: pd.DataFrame  # per mode (summary.csv)
    ci: pd.DataFrame  # per mode and metric with CIs (summary_ci.csv): the metrics present in the run
    quality: list[str]  # the quality metrics present, then the other metrics present
    other: list[str]
    lead: str | None  # the headline metric
    judges: pd.DataFrame
    sav: pd.DataFrame  # prompt savings against long_context
    tools: pd.DataFrame
    costs: pd.DataFrame
    types: pd.DataFrame  # per question type (by_type.csv); empty for a single-type run
    contestants: list[Contestant]  # reports/standings.py, unnamed: a memory provider's name, variant, medians
    memory: dict[tuple[str, str], float]  # reports/memory_systems.py memory_scoreboard
    judged_ci: pd.DataFrame  # judge metrics the run has a column for but no verdict in (not in `ci`): their not_run


def _present(df: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    return [k for k in keys if k in df.columns and df[k].notna().any()]


def figures_of(run: RunData, table: PriceTable) -> RunFigures:
    frame = run.frame
    df, metrics = frame.df, frame.metrics
    quality = _present(df, metrics.quality_keys)
    other = _present(df, [k for k in metrics.columns if k not in metrics.quality_keys])
    ci = summarize_ci(frame, quality + other)
    unjudged = [k for k in metrics.judged_keys if k in df.columns and k not in quality + other]
    lead = headline_metric(frame)
    return RunFigures(
        run=run,
        table=table,
        summary=summarize(frame),
        ci=ci,
        quality=quality,
        other=other,
        lead=lead,
        judges=judge_table(frame, ci=ci),
        sav=savings(frame),
        tools=tool_stats(frame),
        costs=cost_table(frame),
        types=by_type.type_table(frame),
        contestants=contestants_of(frame, run.records, lead),
        memory=memory_scoreboard(run.records, lead),
        judged_ci=summarize_ci(frame, unjudged) if unjudged else pd.DataFrame(columns=ci.columns),
    )


# --- what the figures were computed from ----------------------------------------------------------------------


def _sha256(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def source_of(run_dir: Path, meta: RunMeta, table: PriceTable) -> ResultsSource:
    """The records file's digest, and digests of what else a figure depends on: run.json's metric specs (directions,
    derived verdicts) and the endpoints calls are priced by, and the price table's prices (not its path)."""
    records = hashlib.sha256((Path(run_dir) / RECORDS_FILE).read_bytes()).hexdigest()
    run = {"metrics": meta.metrics, "endpoints": dataclasses.asdict(Endpoints.from_run_meta(meta))}
    prices = {
        "date": table.date,
        "currency": table.currency,
        "models": {k: dataclasses.asdict(v) for k, v in sorted(table.models.items())},
    }
    name = Path(table.path).name if table.path else "table"
    return ResultsSource(records, _sha256(run), _sha256(prices), f"{name} dated {table.date}")


# --- figures -> Results ---------------------------------------------------------------------------------------


def _num(v: Any) -> float | None:
    """A figure as JSON holds it: NaN (undefined) is null."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _int(v: Any) -> int | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)


def _by_mode(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    return {str(r["mode"]): r for r in frame.to_dict("records")} if not frame.empty else {}


def _metric(r: Mapping[str, Any]) -> MetricResult:
    return MetricResult(
        _num(r["mean"]), _num(r["lo"]), _num(r["hi"]), int(r["n"]), int(r["not_run"]), _num(r["mean_all"])
    )


def _memory(board: Mapping[tuple[str, str], float], mode: str, lead: str | None) -> MemoryResult | None:
    mine = {metric: v for (m, metric), v in board.items() if m == mode}
    if not mine:
        return None
    return MemoryResult(
        provider_failures=int(mine.get("memory_provider_failures", 0)),
        turn_recall=_num(mine.get("memory_turn_recall")),
        session_recall=_num(mine.get("memory_session_recall")),
        leaked_items=_int(mine.get("memory_leaked_items")),
        cross_unit_items=_int(mine.get("memory_cross_unit_items")),
        ingest_tokens=_num(mine.get("memory_ingest_tokens")),
        ingest_usd=_num(mine.get("memory_ingest_usd")),
        headline_with_provider_failures=_num(mine.get(f"{lead}@with_provider_failures")) if lead else None,
    )


def _fields(kind: type, row: Mapping[str, Any]) -> dict[str, Any]:
    """`row`'s values for the fields of a result dataclass: ints as ints, figures as floats or null."""
    out = {}
    for f in dataclasses.fields(kind):
        v = row[f.name]
        out[f.name] = int(v) if f.type == "int" else _num(v)
    return out


def results_of(fig: RunFigures, source: ResultsSource) -> Results:
    """The typed results of the report's own tables (`figures_of`)."""
    ci = pd.concat([fig.ci, fig.judged_ci], ignore_index=True) if not fig.judged_ci.empty else fig.ci
    costs, savings_rows, tools = _by_mode(fig.costs), _by_mode(fig.sav), _by_mode(fig.tools)
    found = {c.mode: c for c in fig.contestants}
    contestants = []
    for mode, counts in fig.summary.iterrows():
        mode = str(mode)
        by_type_rows: dict[str, list[TypeResult]] = {}
        if not fig.types.empty:
            for r in fig.types[fig.types["mode"] == mode].to_dict("records"):
                by_type_rows.setdefault(r["metric"], []).append(
                    TypeResult(str(r["question_type"]), _num(r["mean"]), _num(r["lo"]), _num(r["hi"]), int(r["n"]))
                )
        judges = (
            {
                str(r["metric"]): JudgeResult(_num(r["task_avg"]), _num(r["abstention"]), int(r["abstention_n"]))
                for r in fig.judges.to_dict("records")
                if str(r["mode"]) == mode
            }
            if not fig.judges.empty
            else {}
        )
        c = found.get(mode)
        contestants.append(
            ContestantResult(
                mode=mode,
                cases=int(counts["cases"]),
                ok=int(counts["ok"]),
                failed=int(counts["failed"]),
                metrics={r["metric"]: _metric(r) for r in ci[ci["mode"] == mode].to_dict("records")},
                cost=CostResult(**_fields(CostResult, costs[mode])) if mode in costs else None,
                by_type=by_type_rows,
                judges=judges,
                savings=SavingsResult(**_fields(SavingsResult, savings_rows[mode])) if mode in savings_rows else None,
                tools=ToolResult(**_fields(ToolResult, tools[mode])) if mode in tools else None,
                latency=LatencyResult(_num(c.ingest_ms), _num(c.answer_ms), _num(c.latency_ms)) if c else None,
                provider=ProviderResult(c.provider, c.variant, c.spend_reported) if c and c.provider else None,
                memory=_memory(fig.memory, mode, fig.lead),
            )
        )
    df = fig.run.frame.df
    return Results(
        headline_metric=fig.lead,
        unpriced_models=list(fig.run.frame.unpriced_models),
        contestants=contestants,
        source=source,
        questions=int(df["question_id"].nunique()) if not df.empty else 0,
    )


# --- read, or rebuild -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedResults:
    """A run's results and, when they did not come from its results.json as written, the one line saying why."""

    results: Results
    notice: str | None = None


def _stale(old: ResultsSource, new: ResultsSource) -> str | None:
    """What changed since the file was written (None: nothing it depends on)."""
    if old.records_sha256 != new.records_sha256:
        return f"{RECORDS_FILE} changed since it was written"
    if old.run_sha256 != new.run_sha256:
        return "run.json's metric specs or endpoints changed since it was written"
    return None


def load_results(
    run_dir: str | Path, *, prices: PriceTable | str | Path | None = None, run: RunData | None = None
) -> LoadedResults:
    """The run's results: its results.json when that matches the records, run.json and the price table; else rebuilt
    from the records (no model call), written back when it was missing, of schema version 1, corrupt or stale, and
    kept in memory only when it differs by the price table alone (the file stays as the report priced it). `run`:
    the run directory as the caller already read it with the same prices (`read_run`), so a rebuild does not read
    it again."""
    run_dir = Path(run_dir)
    table = prices if isinstance(prices, PriceTable) else load_price_table(prices)
    path = run_dir / RESULTS_FILE
    meta = load_meta(run_dir)
    if not (run_dir / RECORDS_FILE).exists():
        raise FileNotFoundError(f"{run_dir / RECORDS_FILE}: no records in this run directory")
    source = source_of(run_dir, meta, table)
    why, write = None, True
    if not path.exists():
        why = "none in this run directory (a run from before it existed)"
    else:
        try:
            old = read_results(run_dir)
        except NewerResultsError:
            raise  # written by a newer harness: not ours to overwrite
        except ResultsError as e:
            why = f"unreadable ({str(e).removeprefix(str(path) + ': ')})"
        else:
            if old.source is None:
                why = f"schema version {old.schema_version} records no source to check it against"
            elif (stale := _stale(old.source, source)) is not None:
                why = stale
            elif old.source.prices_sha256 != source.prices_sha256:
                why, write = f"priced with {old.source.price_table}, not {source.price_table}", False
            else:
                return LoadedResults(old)
    results = results_of(figures_of(run or read_run(run_dir, prices=table), table), source)
    if write:
        write_results(results, run_dir)
    done = "rebuilt from the records" if write else f"figures computed from the records with {source.price_table}"
    return LoadedResults(results, f"{path}: {why}: {done}")


__all__ = [
    "LoadedResults",
    "RunFigures",
    "figures_of",
    "load_results",
    "results_of",
    "source_of",
]
