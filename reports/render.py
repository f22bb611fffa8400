"""Build the report of a run directory (Markdown, HTML, CSV, PNG/SVG plots, results.json) from its records alone.

The figures are computed once (reports/run_results.py), written as results.json, and the report's sections
(reports/report_sections.py) read them from the typed `Results`; report.md and report.html are the same list of
sections rendered twice (reports/sections.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from reports import by_type, plots
from reports import html as H
from reports import sections as S
from reports.aggregate import headline, modes, read_run
from reports.compare import compare_keys, compare_modes
from reports.cost import PriceTable, load_price_table
from reports.metrics import BUILTIN, MetricCatalog
from reports.report_sections import ReportContext, report_sections
from reports.results_file import Results, write_results
from reports.run_results import RunFigures, figures_of, results_of, source_of
from reports.safe import write_csv
from reports.sections import Figure, Section
from reports.stats import WinLossTie

BAR_KEYS = ("em", "llm_score", "llm_score_strict", "lme_acc", "lme_acc_strict", "rouge_l", "f1", "bleu1")
# The reference compares summary_ondemand with summary per case (63 wins / 3 losses / 4 ties on ROUGE-L).
WLT_PAIR = ("summary", "summary_ondemand")


def bar_keys(metrics: MetricCatalog, present: Sequence[str]) -> list[str]:
    """The metrics of the bar plot: BAR_KEYS, then a run's own scorers' quality metrics (those no built-in
    scorer declares), each only when the run has it."""
    extra = [k for k in metrics.quality_keys if k not in BUILTIN]
    return [k for k in (*BAR_KEYS, *extra) if k in present]


def build_report(run_dir: Path, *, prices: PriceTable | str | Path | None = None) -> dict[str, Path]:
    run_dir = Path(run_dir)
    table = prices if isinstance(prices, PriceTable) else load_price_table(prices)
    run = read_run(run_dir, prices=table)
    fig = figures_of(run, table)
    results = results_of(fig, source_of(run_dir, run.meta, table))
    frame, df, metrics = run.frame, run.frame.df, run.frame.metrics
    lead = fig.lead
    head = headline(frame, lead) if lead else pd.DataFrame()
    ms = modes(df)
    pair = WLT_PAIR if all(m in ms for m in WLT_PAIR) else ((ms[0], ms[1]) if len(ms) >= 2 else None)
    wlt = (
        compare_modes(frame, pair[0], pair[1], [k for k in compare_keys(metrics) if k in df.columns])
        if pair
        else pd.DataFrame()
    )

    out: dict[str, Path] = {
        "markdown": run_dir / "report.md",
        "html": run_dir / "report.html",
        "csv": run_dir / "summary.csv",
        "ci_csv": run_dir / "summary_ci.csv",
        "cases_csv": run_dir / "cases.csv",
        "plot": run_dir / "quality_vs_tokens.png",
    }
    write_csv(fig.summary, out["csv"])
    write_csv(fig.ci, out["ci_csv"], index=False)
    write_csv(df, out["cases_csv"], index=False)
    figs: dict[str, list[Path]] = {
        "quality_vs_tokens": plots.quality_vs_tokens(fig.ci, run_dir / "quality_vs_tokens", metrics=metrics),
        "metrics": plots.metric_bars(fig.ci, bar_keys(metrics, fig.quality), run_dir / "metrics", metrics=metrics),
        "latency": plots.latency(df, run_dir / "latency", metrics=metrics),
    }
    if pair and not wlt.empty:
        counts = {
            r["metric"]: WinLossTie(r["wins"], r["losses"], r["ties"])
            for r in wlt.to_dict("records")
            if r["metric"] in metrics.quality_keys
        }
        if counts:
            figs["win_loss_tie"] = plots.win_loss_tie(
                counts, run_dir / "win_loss_tie", a=pair[0], b=pair[1], metrics=metrics
            )
    for name, paths in figs.items():
        out[f"plot_{name}"] = paths[0]
        out[f"plot_{name}_svg"] = paths[1]

    ctx = ReportContext(
        run_dir=run_dir,
        results=results,
        df=df,
        meta=run.meta,
        records=run.records,
        summary=fig.summary,
        quality=fig.quality,
        other=fig.other,
        table=table,
        metrics=metrics,
        head=head,
        pair=pair,
        wlt=wlt,
        figs=figs,
        by_type_plot=_by_type(fig, run_dir, out),  # none for a single-type run: its files stay as they were
        memory=_memory(fig, results, run_dir, out),  # none without memory contestants
        unpriced_models=frame.unpriced_models,
    )
    found = report_sections(ctx)
    out["markdown"].write_text(S.markdown(found))
    out["html"].write_text(H.page(f"lme-harness report: {run_dir.name}", S.html_body(found)))
    out["results"] = write_results(results, run_dir)
    return out


def _by_type(fig: RunFigures, run_dir: Path, out: dict[str, Path]) -> Path | None:
    """by_type.csv and its plot, only when the run holds several question types; the plot's path."""
    if fig.types.empty:
        return None
    out["by_type_csv"] = run_dir / "by_type.csv"
    write_csv(fig.types, out["by_type_csv"], index=False)
    paths = by_type.plot(fig.types, run_dir / "by_type", metrics=fig.run.frame.metrics)
    out["plot_by_type"], out["plot_by_type_svg"] = paths[0], paths[1]
    return paths[0]


def _memory(fig: RunFigures, results: Results, run_dir: Path, out: dict[str, Path]) -> Section | None:
    """The memory-systems section (reports/memory_systems.py), led by every contestant of the run ranked
    (reports/standings.py, from results.json's figures) with the frontier plot (frontier.png/svg); None for runs
    without memory contestants."""
    from reports import memory_systems as memory
    from reports import standings as C

    frame, lead = fig.run.frame, results.headline_metric
    tables = memory.memory_tables(fig.run.records, lead, memory.costs_of(frame.df))
    if not tables:
        return None
    found = C.name_contestants(C.contestants_from_results(results, lead), [fig.run.meta], [run_dir])
    hib = frame.metrics.higher_is_better(lead) is not False if lead else True
    on = C.frontier(found, higher_is_better=hib)
    label = frame.metrics.label(lead) if lead else "quality"
    paths = plots.frontier(found, run_dir / "frontier", quality_label=label, on=on)
    out["plot_frontier"], out["plot_frontier_svg"] = paths[0], paths[1]
    return memory.section([C.table(found, lead, frame.metrics), *tables], Figure(paths[0], "frontier", paths[1]))
