"""Aggregates derived from per-case records only (pandas); no model is ever called here.

One row per record (`records_frame`), then per mode: means with bootstrap CIs (`summarize_ci`), judge
accuracies that keep `not_run` apart (`judge_table`), prompt savings against `long_context` (`savings`),
tool use (`tool_stats`), cost (`cost_table`) and a flat scoreboard `{(mode, metric): value}` for the gate.

Every summary takes a `RunFrame`: the frame together with the metric catalog it was built with, so no summary can
fall back to the built-in catalog for a run whose own scorers declared others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.records import RECORDS_FILE, STATUS_OK, Record, RecordError, load_records
from harness.run_meta import RunMeta, read_run_meta
from reports.cost import PHASES, Endpoints, PriceTable, load_price_table, record_costs
from reports.metrics import BUILTIN, COST_KEYS, MetricCatalog, catalog_of
from reports.phases import ingest_ms, judge_calls, phase_tokens, summary_calls
from reports.run_frame import RunFrame
from reports.stats import DEFAULT_N_BOOT, DEFAULT_SEED, bootstrap_ci, paired_bootstrap_ci

MODE_ORDER = ("long_context", "summary", "summary_ondemand")
BASELINE_MODE = "long_context"


def higher_is_better(metric: str, metrics: MetricCatalog = BUILTIN) -> bool | None:
    """Direction of any metric the scoreboard can hold; None when unknown."""
    return metrics.higher_is_better(metric)


def _verdict(details: Mapping[str, Any] | None, key: str) -> float | None:
    """A binary judge verdict from the record details (a spec's `verdict`): an EM short-circuit counts as correct."""
    if not details:
        return None
    if details.get("skipped") == "exact_match":
        return 1.0
    v = details.get(key)
    return 1.0 if v == "correct" else 0.0 if v == "incorrect" else None


def _tokens(calls: Sequence[Mapping[str, Any]]) -> int:
    """Prompt + completion tokens of call records."""
    return sum(
        (c.get("usage") or {}).get("prompt_tokens", 0) + (c.get("usage") or {}).get("completion_tokens", 0)
        for c in calls
    )


def records_frame(
    records: Sequence[dict[str, Any]],
    *,
    meta: RunMeta | Mapping[str, Any] | None = None,
    prices: PriceTable | None = None,
) -> RunFrame:
    """One row per record. Cost columns are filled when a price table is given (else left out). The columns'
    catalog (`RunFrame.metrics`) is `meta`'s: the run's scorer specs (run.json `metrics`), else the built-in ones."""
    meta = RunMeta.of(meta)
    metrics = catalog_of(meta)
    typed = [r if isinstance(r, Record) else Record.from_json(r) for r in records]
    by_key = {r.key: r for r in typed}
    endpoints = Endpoints.from_run_meta(meta)
    rows = []
    unpriced: set[str] = set()
    for rec in typed:
        ok = rec.status == STATUS_OK
        usage = rec.usage or {}
        details = rec.metric_details or {}
        summary = rec.summary or {}
        latency = rec.latency or {}
        row: dict[str, Any] = {
            "question_id": rec.question_id,
            "question_type": rec.question_type,
            "is_abstention": bool(rec.is_abstention),
            "mode": rec.mode,
            "status": rec.status,
            "error": rec.scoring_error or rec.error,  # a scoring failure is what the failure table must say
            **{k: (np.nan if v is None else v) for k, v in (rec.metrics or {}).items()},
            "final_prompt_tokens": usage.get("final_prompt_tokens"),
            "prompt_tokens_total": usage.get("prompt_tokens_total"),
            "completion_tokens_total": usage.get("completion_tokens_total"),
            # tokens of the summary this record used, also when another mode generated it (shared summaries)
            "summary_tokens": _tokens(summary_calls(rec, by_key)) if ok else None,
            "judge_tokens": _tokens(judge_calls(rec)) if ok else None,
            "answer_calls": usage.get("answer_calls"),
            "query_ms": latency.get("query_ms"),
            "query_ms_reference": latency.get("query_ms_reference"),
            "wall_ms": latency.get("wall_ms"),
            "n_search": rec.n_search,
            "n_load": rec.n_load,
            "tool_errors": sum(not t.get("ok", True) for t in rec.tool_calls or []) if ok else None,
            "truncated": float(bool((rec.truncation or {}).get("truncated"))) if ok else None,
            "summary_chars": summary.get("chars") if summary else None,
            "summary_bytes": summary.get("bytes") if summary else None,
        }
        if ok:  # what the contestant spent on the question, by phase (reports/phases.py): every cost view shows all
            spent = phase_tokens(rec, by_key)
            row.update(
                answer_tokens=spent.answer,
                ingest_tokens=spent.ingest,
                retrieve_tokens=spent.retrieve,
                total_tokens=spent.total,
                ingest_ms=ingest_ms(rec),
            )
        for source, spec in metrics.derived:  # e.g. llm_acc from the tRPC judge's verdict
            if details.get(source) is not None and ok:
                row[spec.name] = _verdict(details[source], spec.verdict or "")
        if prices is not None and ok:
            costs, missing = record_costs(rec, by_key, prices, endpoints)
            row.update(costs)
            unpriced |= missing
        rows.append(row)
    df = pd.DataFrame(rows)
    if not df.empty:
        df["mode"] = pd.Categorical(df["mode"], categories=sorted(set(df["mode"]), key=_mode_rank), ordered=True)
        for c in df.columns:
            if c in metrics:
                df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    return RunFrame(df, metrics, tuple(sorted(unpriced)))


def _mode_rank(m: str) -> tuple[int, str]:
    return (MODE_ORDER.index(m) if m in MODE_ORDER else len(MODE_ORDER), m)


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"]


def modes(df: pd.DataFrame) -> list[str]:
    return [str(m) for m in df["mode"].cat.categories] if not df.empty else []


def summarize(frame: RunFrame) -> pd.DataFrame:
    """Per mode: the mean of every column over successfully scored cases, plus counts of failures."""
    df = frame.df
    if df.empty:
        return pd.DataFrame()
    ok = _ok(df)
    cols = [k for k in frame.metrics.headline_keys if k in df.columns]
    means = ok.groupby("mode", observed=True)[cols].mean(numeric_only=True)
    counts = df.groupby("mode", observed=True).agg(
        cases=("question_id", "nunique"),
        ok=("status", lambda s: int((s == "ok").sum())),
        failed=("status", lambda s: int((s != "ok").sum())),
    )
    return counts.join(means)


def summarize_ci(
    frame: RunFrame, keys: Sequence[str] | None = None, *, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED
) -> pd.DataFrame:
    """Long frame (mode, metric, mean, lo, hi, n, not_run, mean_all) over scored cases.

    `n` counts cases with a value; `not_run` the scored cases without one (judge not run / unparsable);
    `mean_all` treats those as 0 (the full-denominator "strict" accuracy). NaN never becomes 0 in `mean`.
    """
    df, metrics = frame.df, frame.metrics
    ok = _ok(df)
    keys = [k for k in (keys or metrics.columns) if k in df.columns]
    rows = []
    for mode in modes(df):
        part = ok[ok["mode"] == mode]
        for k in keys:
            vals = part[k].to_numpy(dtype=float)
            if vals.size and np.isnan(vals).all() and k not in metrics.judged_keys:
                continue
            est = bootstrap_ci(vals, n_boot=n_boot, seed=seed)
            not_run = int(np.isnan(vals).sum())
            mean_all = float(np.nan_to_num(vals, nan=0.0).mean()) if vals.size else math.nan
            rows.append(
                {
                    "mode": mode,
                    "metric": k,
                    "mean": est.mean,
                    "lo": est.lo,
                    "hi": est.hi,
                    "n": est.n,
                    "not_run": not_run,
                    "mean_all": mean_all,
                }
            )
    return pd.DataFrame(rows, columns=["mode", "metric", "mean", "lo", "hi", "n", "not_run", "mean_all"])


def judge_table(
    frame: RunFrame, *, ci: pd.DataFrame | None = None, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED
) -> pd.DataFrame:
    """Per mode and judge metric: accuracy over judged cases (CI), `not_run`, accuracy over all cases, and for the
    LongMemEval judge the task-averaged and abstention accuracy as upstream's print_qa_metrics.py reports them.

    The accuracy columns are `summarize_ci`'s rows for the judge metrics: pass `ci` when it is already computed."""
    df = frame.df
    ok = _ok(df)
    keys = [k for k in frame.metrics.judged_keys if k in df.columns]
    if ci is None or not set(keys) <= set(ci["metric"]):
        ci = summarize_ci(frame, keys, n_boot=n_boot, seed=seed)
    base = ci[ci["metric"].isin(keys) & (ci["n"] + ci["not_run"] > 0)]
    rows = []
    for k in keys:
        for r in base[base["metric"] == k].to_dict("records"):
            part = ok[ok["mode"] == r["mode"]]
            row = {
                "metric": k,
                "mode": r["mode"],
                "accuracy": r["mean"],
                "lo": r["lo"],
                "hi": r["hi"],
                "judged": r["n"],
                "not_run": r["not_run"],
                "accuracy_all": r["mean_all"],
            }
            by_type = part.groupby("question_type", observed=True)[k].mean()
            row["task_avg"] = float(by_type.mean()) if len(by_type.dropna()) else math.nan
            abst = part[part["question_id"].str.contains("_abs", regex=False)][k].dropna()
            row["abstention"] = float(abst.mean()) if len(abst) else math.nan
            row["abstention_n"] = int(len(abst))
            rows.append(row)
    return pd.DataFrame(rows)


def savings(
    frame: RunFrame, key: str = "final_prompt_tokens", *, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED
) -> pd.DataFrame:
    """Prompt savings of each mode against `long_context`, over the cases scored in both.

    `savings_pct`: the reference's figure, the mean of per-case `100·(long − mode)/long` (with CI);
    `savings_ratio_pct`: `100·(1 − mean(mode)/mean(long))`, the ratio of means.
    """
    df = frame.df
    ok = _ok(df)
    if BASELINE_MODE not in modes(df):
        return pd.DataFrame()
    base = ok[ok["mode"] == BASELINE_MODE].set_index("question_id")[key]
    rows = []
    for mode in modes(df):
        if mode == BASELINE_MODE:
            continue
        other = ok[ok["mode"] == mode].set_index("question_id")[key]
        pair = pd.concat([base.rename("long"), other.rename("mode")], axis=1, join="inner").dropna()
        pair = pair[pair["long"] > 0]
        if pair.empty:
            continue
        pct = 100.0 * (pair["long"] - pair["mode"]) / pair["long"]
        est = bootstrap_ci(pct.to_numpy(), n_boot=n_boot, seed=seed)
        rows.append(
            {
                "mode": mode,
                "pairs": len(pair),
                "long_mean": pair["long"].mean(),
                "mode_mean": pair["mode"].mean(),
                "savings_pct": est.mean,
                "lo": est.lo,
                "hi": est.hi,
                "savings_ratio_pct": 100.0 * (1.0 - pair["mode"].mean() / pair["long"].mean()),
            }
        )
    return pd.DataFrame(rows)


def headline_metric(frame: RunFrame) -> str | None:
    """The quality figure a report leads with, chosen from the run's metric specs (run.json `metrics`), by no name:
    the first quality metric of a judge (a scorer that declares a judged metric) with a value, else the first
    quality metric with a value in the reference table's order (a lexical one). None when the run has neither."""
    metrics = frame.metrics
    ok = _ok(frame.df)
    present = [k for k in metrics.quality_keys if k in ok.columns and ok[k].notna().any()]
    judges = {metrics.source.get(k) for k in metrics.judged_keys}
    by_judge = [k for k in present if metrics.source.get(k) in judges]
    if by_judge:
        return by_judge[0]
    return next((k for k in metrics.headline_keys if k in present), present[0] if present else None)


HEADLINE_COLUMNS = ["mode", "n", "mean", "lo", "hi", "delta", "delta_lo", "delta_hi", "pairs"]
HEADLINE_COLUMNS += ["tokens", "tokens_share", *(f"{p}_tokens" for p in PHASES)]
HEADLINE_COLUMNS += ["prompt_tokens", "prompt_share", "latency_ms", "latency_share"]


def headline(
    frame: RunFrame,
    metric: str,
    *,
    tokens: str = "prompt_tokens_total",
    latency: str = "query_ms",
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Per mode, what the report's first screen says: `metric`'s mean with its 95 % CI over scored cases; against
    `long_context`, over the cases scored in both, the paired difference (mode − long_context, CI resampling
    cases) and the tokens and latency as a share of long_context's (ratio of means); and the mode's own means:
    `tokens`, every LLM token of the question (answer + ingest + retrieve, `total_tokens`) with its split by phase,
    `prompt_tokens` (`tokens`: the answer calls' prompt tokens by default) and latency. Without long_context in the
    run the comparison columns are NaN."""
    df = frame.df
    ok = _ok(df)
    spent = ["total_tokens", *(f"{p}_tokens" for p in PHASES)]
    ok = ok.assign(**{c: pd.to_numeric(ok[c], errors="coerce") for c in (tokens, latency, *spent) if c in ok})
    base = ok[ok["mode"] == BASELINE_MODE].set_index("question_id") if BASELINE_MODE in modes(df) else None
    rows = []
    for mode in modes(df):
        part = ok[ok["mode"] == mode]
        if part.empty:
            continue
        est = bootstrap_ci(part[metric].to_numpy(dtype=float), n_boot=n_boot, seed=seed)
        row: dict[str, Any] = {
            "mode": mode,
            "n": est.n,
            "mean": est.mean,
            "lo": est.lo,
            "hi": est.hi,
            "prompt_tokens": float(part[tokens].mean()),
            "latency_ms": float(part[latency].mean()),
        }
        row.update({("tokens" if c == "total_tokens" else c): _mean(part, c) for c in spent})
        if base is not None and not base.empty:
            both = base.merge(part.set_index("question_id"), left_index=True, right_index=True, suffixes=("_base", ""))
            d = paired_bootstrap_ci(
                both[f"{metric}_base"].to_numpy(dtype=float),
                both[metric].to_numpy(dtype=float),
                n_boot=n_boot,
                seed=seed,
            )
            row.update(delta=d.mean, delta_lo=d.lo, delta_hi=d.hi, pairs=d.n)
            row["prompt_share"] = _share(both[tokens], both[f"{tokens}_base"])
            row["latency_share"] = _share(both[latency], both[f"{latency}_base"])
            if "total_tokens" in both:
                row["tokens_share"] = _share(both["total_tokens"], both["total_tokens_base"])
        rows.append(row)
    return pd.DataFrame(rows, columns=HEADLINE_COLUMNS)


def _mean(part: pd.DataFrame, column: str) -> float:
    return float(part[column].mean()) if column in part else math.nan


def _share(mode: pd.Series, base: pd.Series) -> float:
    """sum(mode) / sum(base) over the cases where both are known (a ratio of means); NaN when undefined."""
    keep = mode.notna() & base.notna()
    total = float(base[keep].sum())
    return float(mode[keep].sum()) / total if keep.any() and total > 0 else math.nan


def tool_stats(frame: RunFrame) -> pd.DataFrame:
    """Per mode: cases with ≥ 1 search / load, totals and means per case, tool errors."""
    df = frame.df
    ok = _ok(df)
    rows = []
    for mode in modes(df):
        p = ok[ok["mode"] == mode]
        if p.empty:
            continue
        s, l = p["n_search"].fillna(0), p["n_load"].fillna(0)
        rows.append(
            {
                "mode": mode,
                "cases": len(p),
                "cases_with_search": int((s >= 1).sum()),
                "cases_with_load": int((l >= 1).sum()),
                "search_total": int(s.sum()),
                "load_total": int(l.sum()),
                "search_mean": float(s.mean()),
                "load_mean": float(l.mean()),
                "tool_errors": int(p["tool_errors"].fillna(0).sum()) if "tool_errors" in p else 0,
                "answer_calls_mean": float(p["answer_calls"].mean()) if "answer_calls" in p else math.nan,
            }
        )
    return pd.DataFrame(rows)


def cost_table(frame: RunFrame) -> pd.DataFrame:
    """Per mode: tokens and cost per case by phase (answer, ingest, retrieve; the judge apart) and the run total;
    the final call's prompt tokens (the reference's figure) shown beside, apart."""
    df = frame.df
    if "cost_total" not in df.columns:
        return pd.DataFrame()
    ok = _ok(df)
    rows = []
    for mode in modes(df):
        p = ok[ok["mode"] == mode]
        if p.empty:
            continue
        row: dict[str, Any] = {
            "mode": mode,
            "cases": len(p),
            "final_prompt_tokens": float(p["final_prompt_tokens"].mean()),
            "prompt_tokens_total": float(p["prompt_tokens_total"].mean()),
            "summary_tokens": float(p["summary_tokens"].mean()),
            "judge_tokens": float(p["judge_tokens"].mean()),
            **{k: _mean(p, k) for k in ("total_tokens", *(f"{ph}_tokens" for ph in PHASES))},
        }
        for k in COST_KEYS:
            vals = p[k]
            # any unpriced case makes the mode's figure unknown, not smaller
            row[k] = math.nan if vals.isna().any() else float(vals.mean())
        row["cost_total_sum"] = math.nan if p["cost_total"].isna().any() else float(p["cost_total"].sum())
        rows.append(row)
    return pd.DataFrame(rows)


def scoreboard(frame: RunFrame) -> dict[tuple[str, str], float]:
    """Flat `{(mode, metric): value}` of every aggregate the gate can check (no CIs: the gate uses point values)."""
    out: dict[tuple[str, str], float] = {}
    df, metrics = frame.df, frame.metrics
    if df.empty:
        return out
    ok = _ok(df)
    for mode in modes(df):
        p = ok[ok["mode"] == mode]
        allp = df[df["mode"] == mode]
        out[(mode, "ok")] = float(len(p))
        out[(mode, "failed")] = float((allp["status"] != "ok").sum())
        for k in metrics.columns:
            if k in p.columns and p[k].notna().any():
                out[(mode, k)] = float(p[k].mean())
        for k in metrics.judged_keys:
            if k in p.columns and len(p):
                out[(mode, f"{k}@all")] = float(p[k].fillna(0.0).mean())
                out[(mode, f"{k}:not_run")] = float(p[k].isna().sum())
    for r in judge_table(frame, n_boot=1).to_dict("records"):
        if r["metric"] in metrics.task_averaged_keys:
            out[(r["mode"], f"{r['metric']}_task_avg")] = r["task_avg"]
            if r["abstention_n"]:
                out[(r["mode"], f"{r['metric']}_abstention")] = r["abstention"]
    for r in savings(frame, n_boot=1).to_dict("records"):
        out[(r["mode"], "savings_pct")] = r["savings_pct"]
        out[(r["mode"], "savings_ratio_pct")] = r["savings_ratio_pct"]
    for r in tool_stats(frame).to_dict("records"):
        out[(r["mode"], "search_case_share")] = r["cases_with_search"] / r["cases"]
        out[(r["mode"], "load_case_share")] = r["cases_with_load"] / r["cases"]
        out[(r["mode"], "n_search_total")] = float(r["search_total"])
        out[(r["mode"], "n_load_total")] = float(r["load_total"])
    for r in cost_table(frame).to_dict("records"):
        out[(r["mode"], "cost_total_sum")] = r["cost_total_sum"]
    from reports.by_type import type_scoreboard  # per question type ("lme_acc@type:multi-session"); {} for one type

    out.update(type_scoreboard(frame))
    return {k: v for k, v in out.items() if v is not None and not (isinstance(v, float) and math.isnan(v))}


def load_meta(run_dir: Path) -> RunMeta:
    """The run's run.json (empty when it has none)."""
    return read_run_meta(run_dir)


@dataclass
class RunData:
    """A run directory read once: its records frame (with its catalog), the records themselves and run.json."""

    frame: RunFrame
    records: list[dict[str, Any]]
    meta: RunMeta

    @property
    def df(self) -> pd.DataFrame:
        return self.frame.df


def read_run(run_dir: Path, *, prices: PriceTable | str | Path | None = None, with_cost: bool = True) -> RunData:
    """Records and run.json of a run directory, and the records frame priced with `prices` (a table or a path;
    default table if None)."""
    path = Path(run_dir) / RECORDS_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: no records in this run directory")
    records = load_records(path)
    if not records:
        raise RecordError(f"{path}: holds no records")
    table = None
    if with_cost:
        table = prices if isinstance(prices, PriceTable) else load_price_table(prices)
    meta = load_meta(run_dir)
    return RunData(records_frame(records, meta=meta, prices=table), records, meta)


def load_run(run_dir: Path, *, prices: PriceTable | str | Path | None = None, with_cost: bool = True) -> RunFrame:
    """The records frame of a run directory with its catalog (see `read_run`)."""
    return read_run(run_dir, prices=prices, with_cost=with_cost).frame
