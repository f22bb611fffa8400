"""Plots from aggregates (matplotlib, headless). Every figure is written as PNG and SVG.

SVGs are written without a date and with a fixed hash salt, so the same records give the same files.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "lme-harness"
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

from reports.metrics import BUILTIN, MetricCatalog  # noqa: E402
from reports.stats import WinLossTie  # noqa: E402

# The built-in metrics drawn against prompt size; a run's own scorers add their quality metrics after these.
QUALITY = ("em", "llm_score", "lme_acc", "rouge_l")
MARKERS = ("o", "s", "D", "^", "v", "P", "X")


def quality_markers(metrics: MetricCatalog = BUILTIN) -> list[str]:
    """The metrics `quality_vs_tokens` draws: QUALITY, then every quality metric that no built-in scorer
    declares (a scorer known only from the run's run.json), in the catalog's order."""
    return list(QUALITY) + [k for k in metrics.quality_keys if k not in BUILTIN]


def save(fig, out_base: Path, *, rect: tuple[float, float, float, float] | None = None) -> list[Path]:
    """Write `out_base`.png and .svg; returns both paths. `rect`: the part of the figure the axes are laid out in
    (figure coordinates), leaving the rest to a figure legend."""
    out_base = Path(out_base)
    fig.tight_layout(rect=rect)
    # tight_layout leaves a placeholder layout engine behind, and with any engine set, savefig draws the whole
    # figure once more before each format (a third of the plotting time of a report); the layout is already done.
    fig.set_layout_engine(None)
    png, svg = out_base.with_suffix(".png"), out_base.with_suffix(".svg")
    fig.savefig(png, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)
    return [png, svg]


def ci_rows(ci: pd.DataFrame) -> dict[tuple[str, str], dict]:
    """`summarize_ci`'s long frame as {(mode, metric): its first row}: one pass, where filtering the frame per
    (mode, metric) cell cost a tenth of a report."""
    rows: dict[tuple[str, str], dict] = {}
    for r in ci.to_dict("records") if not ci.empty else []:
        rows.setdefault((r["mode"], r["metric"]), r)
    return rows


def _ci(rows: dict[tuple[str, str], dict], mode: str, key: str) -> tuple[float, float, float] | None:
    r = rows.get((mode, key))
    if r is None or pd.isna(r["mean"]):
        return None
    return float(r["mean"]), float(r["lo"]), float(r["hi"])


def quality_vs_tokens(
    ci: pd.DataFrame,
    out_base: Path,
    *,
    x_key: str = "final_prompt_tokens",
    metrics: MetricCatalog = BUILTIN,
) -> list[Path]:
    """Quality per mode against the final call's prompt tokens (log x), both with 95 % bootstrap CIs.

    The published figure of the reference study; `ci` is `aggregate.summarize_ci`'s long frame; labels come
    from `metrics` (the run's catalog).
    """
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=120)
    modes = list(dict.fromkeys(ci["mode"])) if not ci.empty else []
    colors = {m: f"C{i}" for i, m in enumerate(modes)}
    rows = ci_rows(ci)
    handles: dict[str, Line2D] = {}
    xs: list[float] = []
    for j, key in enumerate(quality_markers(metrics)):
        label = metrics.label(key)
        for mode in modes:
            x, y = _ci(rows, mode, x_key), _ci(rows, mode, key)
            if x is None or y is None or x[0] <= 0:
                continue
            marker = MARKERS[j % len(MARKERS)]
            ax.errorbar(
                x[0],
                y[0],
                xerr=[[x[0] - x[1]], [x[2] - x[0]]],
                yerr=[[y[0] - y[1]], [y[2] - y[0]]],
                fmt=marker,
                color=colors[mode],
                ms=7,
                capsize=3,
                lw=1,
                alpha=0.9,
            )
            xs.append(x[0])
            handles.setdefault(label, Line2D([], [], ls="", marker=marker, color="#555", label=label))
            handles.setdefault(mode, Line2D([], [], ls="-", lw=6, color=colors[mode], label=mode))
        ax.set_xscale("log")
    if xs:  # keep a sane range when every mode sits at the same x
        ax.set_xlim(min(xs) / 2, max(xs) * 2)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("prompt tokens of the final call (log scale)")
    ax.set_ylabel("score (mean, 95 % bootstrap CI)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("Quality vs prompt size per mode")
    ax.grid(True, which="both", alpha=0.3)
    if handles:  # colour = mode, marker = metric
        ax.legend(
            handles=list(handles.values()), loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False
        )
    return save(fig, out_base)


def metric_bars(
    ci: pd.DataFrame,
    keys: Sequence[str],
    out_base: Path,
    *,
    title: str = "Metrics per mode",
    metrics: MetricCatalog = BUILTIN,
) -> list[Path]:
    """Grouped bars: one group per metric, one bar per mode, 95 % CI whiskers."""
    keys = [k for k in keys if k in set(ci["metric"])] if not ci.empty else []
    modes = list(dict.fromkeys(ci["mode"])) if not ci.empty else []
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(keys) + 2), 4.2), dpi=120)
    width = 0.8 / max(1, len(modes))
    rows = ci_rows(ci)
    for i, mode in enumerate(modes):
        vals = [_ci(rows, mode, k) or (np.nan, np.nan, np.nan) for k in keys]
        means = np.array([v[0] for v in vals])
        err = np.array([[max(0.0, v[0] - v[1]) for v in vals], [max(0.0, v[2] - v[0]) for v in vals]])
        xs = np.arange(len(keys)) + (i - (len(modes) - 1) / 2) * width
        ax.bar(xs, np.nan_to_num(means), width, yerr=np.nan_to_num(err), capsize=3, label=mode, color=f"C{i}")
    ax.set_xticks(np.arange(len(keys)), [metrics.label(k) for k in keys], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("mean (95 % bootstrap CI)")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    if modes:
        ax.legend(fontsize=8)
    return save(fig, out_base)


def win_loss_tie(
    counts: dict[str, WinLossTie], out_base: Path, *, a: str, b: str, metrics: MetricCatalog = BUILTIN
) -> list[Path]:
    """Per metric: share of cases where `b` beats, ties or loses to `a` (stacked horizontal bars)."""
    keys = list(counts)
    fig, ax = plt.subplots(figsize=(7, 0.45 * max(3, len(keys)) + 1.2), dpi=120)
    y = np.arange(len(keys))
    left = np.zeros(len(keys))
    for attr, color, name in (
        ("wins", "#2a9d8f", f"{b} better"),
        ("ties", "#bbbbbb", "tie"),
        ("losses", "#e76f51", f"{a} better"),
    ):
        vals = np.array([getattr(counts[k], attr) for k in keys], dtype=float)
        ax.barh(y, vals, left=left, color=color, label=name)
        for yi, (lv, v) in enumerate(zip(left, vals)):
            if v:
                ax.text(lv + v / 2, yi, str(int(v)), ha="center", va="center", fontsize=7)
        left += vals
    ax.set_yticks(y, [metrics.label(k) for k in keys], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("cases")
    ax.set_title(f"Per-case win / tie / loss: {b} vs {a}")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)
    return save(fig, out_base)


def latency(df: pd.DataFrame, out_base: Path, *, key: str = "query_ms", metrics: MetricCatalog = BUILTIN) -> list[Path]:
    """Distribution of the query latency per mode (box plot with the cases overlaid, log y)."""
    ok = df[df["status"] == "ok"] if not df.empty else df
    modes = [str(m) for m in ok["mode"].cat.categories] if not ok.empty else []
    data = [ok[ok["mode"] == m][key].dropna().to_numpy() for m in modes]
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=120)
    if modes and any(len(d) for d in data):
        ax.boxplot([d if len(d) else [np.nan] for d in data], showfliers=False)
        ax.set_xticks(range(1, len(modes) + 1), modes)
        rng = np.random.default_rng(0)  # jitter only: fixed seed keeps the figure reproducible
        for i, d in enumerate(data, start=1):
            ax.scatter(i + rng.uniform(-0.12, 0.12, len(d)), d, s=10, alpha=0.6, color=f"C{i - 1}")
        if all(len(d) == 0 or (d > 0).all() for d in data):
            ax.set_yscale("log")
    ax.set_ylabel(f"{metrics.label(key)} (per case)")
    ax.set_title("Latency distribution per mode")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    return save(fig, out_base)


def paired_deltas(table: pd.DataFrame, out_base: Path, *, title: str) -> list[Path]:
    """Forest plot of paired deltas (B − A) with bootstrap CIs; `table` has label, delta, lo, hi."""
    fig, ax = plt.subplots(figsize=(7, 0.35 * max(4, len(table)) + 1.2), dpi=120)
    y = np.arange(len(table))
    d = table["delta"].to_numpy(dtype=float)
    err = np.array([d - table["lo"].to_numpy(dtype=float), table["hi"].to_numpy(dtype=float) - d])
    ax.errorbar(d, y, xerr=np.nan_to_num(np.abs(err)), fmt="o", color="C0", capsize=3)
    ax.axvline(0, color="#888", lw=1)
    ax.set_yticks(y, list(table["label"]), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("paired delta, B − A (95 % bootstrap CI)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    return save(fig, out_base)


def frontier(points: Sequence, out_base: Path, *, quality_label: str, on: Collection[str] = ()) -> list[Path]:
    """Quality against tokens per question including ingest (left, log x) and against the median ingest + answer
    time (right, log x), one colour and marker per contestant (hollow: a variant); the frontier (`on`, names)
    joined by a dashed line. `points`: reports.standings.Contestant. The legend, one entry per contestant named in
    full, lies below both plots in as many columns as fit the figure's width; the plots are laid out above it."""
    shown = [p for p in points if p.quality is not None]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.5), dpi=120, sharey=True)
    handles = []
    for i, p in enumerate(shown):
        style = {"color": f"C{i % 10}", "marker": MARKERS[(i // 10) % len(MARKERS)], "s": 60}
        if p.variant:
            style.update(facecolors="none", edgecolors=style.pop("color"), linewidths=1.5)
        handles.append(left.scatter(max(p.total_tokens, 1.0), p.quality, label=p.legend, **style))
        if p.latency_ms is not None:
            right.scatter(max(p.latency_ms, 1.0), p.quality, **style)
    line = sorted((p for p in shown if p.name in on and math.isfinite(p.frontier_cost)), key=lambda p: p.total_tokens)
    if len(line) > 1:
        left.plot([max(p.total_tokens, 1.0) for p in line], [p.quality for p in line], ls="--", color="#555", lw=1)
    for ax, xlabel in (
        (left, "tokens / question incl. ingest (log)"),
        (right, "p50 ingest + answer ms / question (log)"),
    ):
        ax.set_xscale("log")
        lo, hi = ax.get_xlim()
        # 1-2-5 ticks within a decade or two; over a wider range one a decade, so the labels never run together
        subs = (1.0, 2.0, 5.0) if math.log10(max(hi / max(lo, 1e-9), 1.0)) <= 2 else (1.0,)
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
        if hi / max(lo, 1e-9) < 3:  # a narrow range holds at most one such tick, and matplotlib then packs its own
            ax.xaxis.set_major_locator(MaxNLocator(nbins=3))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(xlabel)
        ax.grid(True, which="both", alpha=0.3)
    left.set_ylabel(f"{quality_label} (mean)")
    left.set_ylim(-0.05, 1.05)
    fig.suptitle("Quality vs cost vs latency per contestant (dashed: the frontier)")
    rect = None
    if handles:
        legend = _legend_below(fig, handles)
        height = legend.get_window_extent(_renderer(fig)).height / fig.bbox.height
        rect = (0.0, min(0.9, height + 0.02), 1.0, 1.0)
    return save(fig, out_base, rect=rect)


def _renderer(fig) -> Any:
    """The figure's renderer (Agg, this module's backend), to measure text before the figure is saved."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas
    return (canvas if isinstance(canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)).get_renderer()


def _legend_below(fig, handles: Sequence) -> Any:
    """A figure legend at the bottom in the most columns (up to 4) whose width fits the figure; the figure grows
    by the legend's height, so the plots keep theirs."""
    renderer = _renderer(fig)
    legend = None
    for ncol in range(min(4, len(handles)), 0, -1):
        if legend is not None:
            legend.remove()
        legend = fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
        if legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
            break
    assert legend is not None
    extra = legend.get_window_extent(renderer).height / fig.dpi
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + extra + 0.2)
    return legend
