"""Per question type aggregates (LongMemEval has six types plus abstention questions).

Everything here is empty when a run holds a single question type, so single-type reports, CSVs and
scoreboards stay exactly as they were. The headline LongMemEval figure is the task-averaged accuracy:
the mean over question types of each type's accuracy (upstream print_qa_metrics.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from reports.metrics import BUILTIN, MetricCatalog
from reports.run_frame import RunFrame
from reports.sections import Block, Figure, Figures, Note, Section, Sub, Table, num, shown, text
from reports.stats import DEFAULT_N_BOOT, DEFAULT_SEED, bootstrap_ci

# Metrics worth a per-type breakdown: accuracies and the lexical scores; judge metrics first.
TYPE_KEYS = ("lme_acc", "lme_acc_strict", "llm_acc", "llm_score", "em", "f1", "rouge_l")
ABSTENTION = "abstention"  # the pseudo-type of `_abs` questions (they also count in their own type)
TYPE_TAG = "@type:"  # scoreboard / gate metric suffix: "lme_acc@type:temporal-reasoning"


def type_keys(metrics: MetricCatalog = BUILTIN) -> tuple[str, ...]:
    """TYPE_KEYS, then the quality metrics of a run's own scorers (those no built-in scorer declares)."""
    return TYPE_KEYS + tuple(k for k in metrics.quality_keys if k not in BUILTIN and k not in TYPE_KEYS)


def multi_type(df: pd.DataFrame) -> bool:
    return not df.empty and "question_type" in df.columns and df["question_type"].nunique(dropna=True) > 1


def type_key(metric: str, question_type: str) -> str:
    return f"{metric}{TYPE_TAG}{question_type}"


def type_table(
    frame: RunFrame,
    keys: Sequence[str] | None = None,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Long frame (mode, metric, question_type, mean, lo, hi, n) over scored cases, with a bootstrap CI per
    type, the `abstention` pseudo-type, and per (mode, metric) the rows `overall` (all cases) and `task_avg`
    (mean of the type means; no CI). Empty unless more than one question type is present.
    `keys`: by default `type_keys` of the run's catalog (`frame.metrics`)."""
    cols = ["mode", "metric", "question_type", "mean", "lo", "hi", "n"]
    df = frame.df
    if not multi_type(df):
        return pd.DataFrame(columns=cols)
    ok = df[df["status"] == "ok"]
    if keys is None:
        keys = type_keys(frame.metrics)
    keys = [k for k in keys if k in ok.columns and ok[k].notna().any()]
    types = sorted(ok["question_type"].dropna().unique())
    rows = []
    for mode in [m for m in df["mode"].cat.categories if (ok["mode"] == m).any()]:
        part = ok[ok["mode"] == mode]
        for k in keys:
            means = []
            for t in types + [ABSTENTION]:
                sel = part[part["is_abstention"]] if t == ABSTENTION else part[part["question_type"] == t]
                vals = sel[k].to_numpy(dtype=float)
                if t == ABSTENTION and not vals.size:
                    continue
                est = bootstrap_ci(vals, n_boot=n_boot, seed=seed)
                rows.append(
                    {
                        "mode": mode,
                        "metric": k,
                        "question_type": t,
                        "mean": est.mean,
                        "lo": est.lo,
                        "hi": est.hi,
                        "n": est.n,
                    }
                )
                if t != ABSTENTION and est.n:
                    means.append(est.mean)
            est = bootstrap_ci(part[k].to_numpy(dtype=float), n_boot=n_boot, seed=seed)
            rows.append(
                {
                    "mode": mode,
                    "metric": k,
                    "question_type": "overall",
                    "mean": est.mean,
                    "lo": est.lo,
                    "hi": est.hi,
                    "n": est.n,
                }
            )
            rows.append(
                {
                    "mode": mode,
                    "metric": k,
                    "question_type": "task_avg",
                    "mean": float(np.mean(means)) if means else math.nan,
                    "lo": math.nan,
                    "hi": math.nan,
                    "n": len(means),
                }
            )
    return pd.DataFrame(rows, columns=cols)


def type_scoreboard(frame: RunFrame) -> dict[tuple[str, str], float]:
    """`{(mode, "metric@type:T"): mean}` for the gate and compare; empty for a single-type run."""
    t = type_table(frame, n_boot=1)
    return {
        (r["mode"], type_key(r["metric"], r["question_type"])): float(r["mean"])
        for r in t.to_dict("records")
        if r["question_type"] not in ("overall", "task_avg") and not math.isnan(r["mean"])
    }


def section(table: pd.DataFrame, plot_png: Path | None) -> Section | None:
    """The report's per-question-type section (`table`: `type_table`'s long frame): a table per metric, a row per
    question type (then abstention, overall, task-averaged), a column per mode, and the plot; None for one type."""
    if table.empty:
        return None
    blocks: list[Block] = [
        Note(
            "Mean [95% bootstrap CI] (n) over scored cases. `abstention`: the `_abs` questions (also counted in "
            "their own type); `task_avg`: mean of the type means, LongMemEval's headline figure."
        )
    ]
    for metric, part in table.groupby("metric", sort=False):
        modes = list(dict.fromkeys(part["mode"]))
        rows = []
        for qt in dict.fromkeys(part["question_type"]):
            cells = [text(qt)]
            for m in modes:
                r = part[(part["mode"] == m) & (part["question_type"] == qt)]
                if r.empty or math.isnan(r["mean"].iloc[0]):
                    cells.append(num(None))
                    continue
                r = r.iloc[0]
                ci = "" if math.isnan(r["lo"]) else f" [{r['lo']:.3f}, {r['hi']:.3f}]"
                cells.append(shown(f"{r['mean']:.3f}{ci} ({int(r['n'])})", r["mean"]))
            rows.append(cells)
        blocks += [Sub(str(metric)), Table(["question type", *modes], rows, f"by-type-{metric}")]
    if plot_png is not None:
        blocks.append(Figures([Figure(plot_png, "per question type")]))
    return Section("by_type", "Per question type", blocks)


def plot(table: pd.DataFrame, out_base: Path, *, metrics: MetricCatalog = BUILTIN) -> list[Path]:
    """Grouped bars: the headline metric per question type and mode, with CI whiskers (labelled by `metrics`)."""
    if table.empty:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reports.plots import save

    metric = next(k for k in TYPE_KEYS if (table["metric"] == k).any())
    part = table[(table["metric"] == metric) & (table["question_type"] != "overall")]
    types = list(dict.fromkeys(part["question_type"]))
    modes = list(dict.fromkeys(part["mode"]))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(types) * max(1, len(modes)) / 2), 4))
    width = 0.8 / max(1, len(modes))
    for i, m in enumerate(modes):
        rows = [part[(part["mode"] == m) & (part["question_type"] == t)] for t in types]
        means = [float(r["mean"].iloc[0]) if len(r) else math.nan for r in rows]
        err = [
            [
                max(0.0, mu - float(r["lo"].iloc[0])) if len(r) and not math.isnan(r["lo"].iloc[0]) else 0.0
                for mu, r in zip(means, rows)
            ],
            [
                max(0.0, float(r["hi"].iloc[0]) - mu) if len(r) and not math.isnan(r["hi"].iloc[0]) else 0.0
                for mu, r in zip(means, rows)
            ],
        ]
        ax.bar(np.arange(len(types)) + i * width, means, width, yerr=err, capsize=2, label=m)
    ax.set_xticks(np.arange(len(types)) + width * (len(modes) - 1) / 2)
    ax.set_xticklabels(types, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(metrics.label(metric))
    ax.set_title(f"{metrics.label(metric)} per question type")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, out_base)
