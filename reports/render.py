"""Build the report of a run directory (Markdown, HTML, CSV, PNG/SVG plots) from its records alone."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.run_meta import GitState, ModelRef, RunMeta
from reports import by_type, plots
from reports import html as H
from reports.aggregate import (
    BASELINE_MODE,
    cost_table,
    headline,
    headline_metric,
    judge_table,
    modes,
    read_run,
    savings,
    summarize,
    summarize_ci,
    tool_stats,
)
from reports.compare import compare_keys, compare_modes, markdown_paired, mcnemar_cell
from reports.cost import PHASES, PriceTable, load_price_table
from reports.deviations import header_notes
from reports.failures import failures_markdown, group_failures
from reports.memory_systems import integrity_flags
from reports.metrics import BUILTIN, MetricCatalog
from reports.results_file import results_of, write_results
from reports.run_frame import RunFrame
from reports.safe import md_cell, md_code, write_csv
from reports.stats import DEFAULT_N_BOOT, DEFAULT_SEED, WinLossTie
from reports.votes import judge_label, vote_lines, votes_markdown

BAR_KEYS = ("em", "llm_score", "llm_score_strict", "lme_acc", "lme_acc_strict", "rouge_l", "f1", "bleu1")
# The reference compares summary_ondemand with summary per case (63 wins / 3 losses / 4 ties on ROUGE-L).
WLT_PAIR = ("summary", "summary_ondemand")
CI_NOTE = f"95 % percentile-bootstrap CIs over cases ({DEFAULT_N_BOOT} resamples, seed {DEFAULT_SEED})."


def bar_keys(metrics: MetricCatalog, present: Sequence[str]) -> list[str]:
    """The metrics of the bar plot: BAR_KEYS, then a run's own scorers' quality metrics (those no built-in
    scorer declares), each only when the run has it."""
    extra = [k for k in metrics.quality_keys if k not in BUILTIN]
    return [k for k in (*BAR_KEYS, *extra) if k in present]


def _fmt(v: Any, fmt: str = "{:.4f}") -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


def _colfmt(key: str, metrics: MetricCatalog = BUILTIN) -> str:
    return metrics.fmt(key)


def markdown_table(summary: pd.DataFrame, metrics: MetricCatalog = BUILTIN) -> str:
    """The reference's table layout: one row per mode, means over scored cases."""
    cols = [metrics.columns[k] for k in metrics.headline_keys if k in summary.columns]
    head = ["mode", "cases", "failed", *[metrics.arrow_label(c.name) for c in cols]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for mode, row in summary.iterrows():
        cells = [md_cell(mode), str(int(row["cases"])), str(int(row["failed"]))]
        cells += [_fmt(row[c.name], c.fmt) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _md(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def ci_pivot(
    ci: pd.DataFrame, keys: Sequence[str], metrics: MetricCatalog = BUILTIN
) -> tuple[list[str], list[list[str]]]:
    """Rows = metrics, columns = modes, cells 'mean [lo, hi]' (with not_run noted)."""
    ms = list(dict.fromkeys(ci["mode"]))
    found, present = plots.ci_rows(ci), set(ci["metric"])
    rows = []
    for k in keys:
        if k not in present:
            continue
        cells = [metrics.arrow_label(k)]
        for m in ms:
            r0 = found.get((m, k))
            if r0 is None:
                cells.append("n/a")
                continue
            text = H.fmt_ci(r0["mean"], r0["lo"], r0["hi"], metrics.fmt(k))
            if r0["not_run"]:
                text += f" ({int(r0['not_run'])} not_run)"
            cells.append(text)
        rows.append(cells)
    return ["metric", *ms], rows


def _present(df: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    return [k for k in keys if k in df.columns and df[k].notna().any()]


@dataclass
class ReportContext:
    """Everything the Markdown and HTML reports are written from (`build_report` computes it once)."""

    run_dir: Path
    df: pd.DataFrame  # the records frame
    unpriced_models: Sequence[str]  # models met without a price (their cost is n/a)
    meta: RunMeta
    records: list[dict[str, Any]]
    summary: pd.DataFrame  # per mode (summary.csv)
    ci: pd.DataFrame  # per mode and metric, with confidence intervals (summary_ci.csv)
    quality: list[str]  # the quality metrics present, then the other metrics present
    other: list[str]
    judges: pd.DataFrame
    sav: pd.DataFrame  # token savings against long_context
    tools: pd.DataFrame
    costs: pd.DataFrame
    table: PriceTable
    pair: tuple[str, str] | None  # the two modes compared pair by pair
    wlt: pd.DataFrame  # their paired comparison (empty without a pair)
    figs: dict[str, list[Path]]  # plot name -> [png, svg]
    metrics: MetricCatalog
    lead: str | None  # the headline metric
    head: pd.DataFrame  # the headline table
    by_type_html: Sequence[str] = ()  # the per-question-type section (several types only)
    memory_html: Sequence[str] = ()  # the memory-systems section (runs with memory contestants only)


def build_report(run_dir: Path, *, prices: PriceTable | str | Path | None = None) -> dict[str, Path]:
    run_dir = Path(run_dir)
    table = prices if isinstance(prices, PriceTable) else load_price_table(prices)
    run = read_run(run_dir, prices=table)
    frame, meta, records = run.frame, run.meta, run.records
    df = frame.df
    summary = summarize(frame)
    metrics = frame.metrics  # the run's scorer specs: every column, direction, label and format
    quality = _present(df, metrics.quality_keys)
    other = _present(df, [k for k in metrics.columns if k not in metrics.quality_keys])
    ci = summarize_ci(frame, quality + other)
    lead = headline_metric(frame)
    head = headline(frame, lead) if lead else pd.DataFrame()
    judges, sav, tools, costs = judge_table(frame, ci=ci), savings(frame), tool_stats(frame), cost_table(frame)
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
    write_csv(summary, out["csv"])
    write_csv(ci, out["ci_csv"], index=False)
    write_csv(df, out["cases_csv"], index=False)
    figs: dict[str, list[Path]] = {
        "quality_vs_tokens": plots.quality_vs_tokens(ci, run_dir / "quality_vs_tokens", metrics=metrics),
        "metrics": plots.metric_bars(ci, bar_keys(metrics, quality), run_dir / "metrics", metrics=metrics),
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
        df=df,
        unpriced_models=frame.unpriced_models,
        meta=meta,
        records=records,
        summary=summary,
        ci=ci,
        quality=quality,
        other=other,
        judges=judges,
        sav=sav,
        tools=tools,
        costs=costs,
        table=table,
        pair=pair,
        wlt=wlt,
        figs=figs,
        metrics=metrics,
        lead=lead,
        head=head,
    )
    md = _markdown(ctx)
    types = by_type.type_table(frame)  # empty for a single-type run: its files stay exactly as before
    type_md, ctx.by_type_html = _by_type(types, frame, run_dir, out)
    memory_md, ctx.memory_html = _memory(frame, records, lead, run_dir, out)  # empty without memory contestants
    out["markdown"].write_text(md + type_md + memory_md)
    out["html"].write_text(_html(ctx))
    results = results_of(summary, ci, costs, types, headline_metric=lead, unpriced_models=list(frame.unpriced_models))
    out["results"] = write_results(results, run_dir)
    return out


def _by_type(table: pd.DataFrame, frame: RunFrame, run_dir: Path, out: dict[str, Path]) -> tuple[str, list[str]]:
    """Per question type (`table`: by_type.type_table): by_type.csv, a plot, a Markdown and an HTML section, only when
    the run holds several types."""
    if table.empty:
        return "", []
    out["by_type_csv"] = run_dir / "by_type.csv"
    write_csv(table, out["by_type_csv"], index=False)
    paths = by_type.plot(table, run_dir / "by_type", metrics=frame.metrics)
    out["plot_by_type"], out["plot_by_type_svg"] = paths[0], paths[1]
    return (
        "\n" + "\n".join(by_type.markdown(table) + ["![per question type](by_type.png)", ""]),
        by_type.html(table, paths[0]),
    )


def _memory(
    frame: RunFrame, records: Sequence[dict[str, Any]], lead: str | None, run_dir: Path, out: dict[str, Path]
) -> tuple[str, list[str]]:
    """The memory-systems section (reports/memory_systems.py), Markdown and HTML, led by every contestant of the run
    ranked (reports/standings.py) with the frontier plot (frontier.png/svg); empty for runs without memory
    contestants."""
    from reports import memory_systems as memory
    from reports import standings as C

    tables = memory.memory_tables(records, lead, memory.costs_of(frame.df))
    if not tables:
        return "", []
    found = C.name_contestants(C.contestants_of(frame, records, lead))
    hib = frame.metrics.higher_is_better(lead) is not False if lead else True
    on = C.frontier(found, higher_is_better=hib)
    label = frame.metrics.label(lead) if lead else "quality"
    paths = plots.frontier(found, run_dir / "frontier", quality_label=label, on=on)
    out["plot_frontier"], out["plot_frontier_svg"] = paths[0], paths[1]
    tables = [C.table(found, lead, frame.metrics), *tables]
    md = memory.markdown(tables).replace(
        "### Retrieval recall", f"![frontier]({paths[0].name}) ([svg]({paths[1].name}))\n\n### Retrieval recall", 1
    )
    html = memory.html(tables)
    return md, [*html[:4], H.image(paths[0], "frontier"), *html[4:]]


# --- The first screen: which mode wins, and at what cost ----------------------------------------------------

HEADLINE_NOTE = (
    "Quality: mean over scored cases [95 % bootstrap CI]. Δ: paired over the cases both modes scored "
    "(mode − long_context) [95 % CI]. Tokens: every LLM token a case cost its mode (prompt + completion), ingest "
    "included: the answer calls, ingest (a summary's generation, a memory provider's ingest such as mem0's "
    "extraction) and retrieve (a memory provider's query-time calls); the final call's prompt tokens alone are the "
    "plot's x and the reference table's figure. Latency: the reference's query latency. The % is the mode's share "
    "of long_context's over the same cases (ratio of means)."
)


def _pct(v: float) -> str:
    return "n/a" if v is None or math.isnan(v) else f"{100 * v:.0f} %"


def headline_text(head: pd.DataFrame, lead: str | None, metrics: MetricCatalog) -> str:
    """One sentence: which mode leads on the headline metric and what it costs against long_context."""
    if lead is None or head.empty or head["mean"].isna().all():
        return "No mode has a quality score in this run (see the failures below)."
    hib = metrics.higher_is_better(lead) is not False
    scored = head.dropna(subset=["mean"])
    best = scored["mean"].max() if hib else scored["mean"].min()
    leaders = scored[scored["mean"] == best]
    top = leaders.iloc[0]
    f, label = metrics.fmt(lead), metrics.label(lead)
    names = " and ".join(str(m) for m in leaders["mode"])
    text = (
        f"{names} {'lead' if len(leaders) > 1 else 'leads'} on {label}: "
        f"{H.fmt_ci(top['mean'], top['lo'], top['hi'], f)} over {int(top['n'])} cases."
    )
    if BASELINE_MODE not in set(head["mode"]):
        return text + f" No {BASELINE_MODE} in this run: no baseline for differences and shares."
    others = scored[scored["mode"] != BASELINE_MODE]
    if top["mode"] == BASELINE_MODE:
        if others.empty:
            return text
        hib_sign = 1 if hib else -1  # the best other mode; among equals the one with the fewest tokens
        alt = others.assign(_q=-hib_sign * others["mean"], _t=others["tokens_share"].fillna(math.inf))
        nxt = alt.sort_values(["_q", "_t"], kind="stable").iloc[0]
        return text + (
            f" The best other mode, {nxt['mode']}, scores Δ {_delta(nxt, f)}{_sig_text(nxt)}, at "
            f"{_pct(nxt['tokens_share'])} of its tokens (ingest included) and {_pct(nxt['latency_share'])} of its "
            "latency."
        )
    return text + (
        f" Against {BASELINE_MODE}: Δ {_delta(top, f)}{_sig_text(top)}, at {_pct(top['tokens_share'])} of its "
        f"tokens (ingest included) and {_pct(top['latency_share'])} of its latency."
    )


def _delta(r: Mapping[str, Any], fmt: str) -> str:
    return H.fmt_ci(r["delta"], r["delta_lo"], r["delta_hi"], fmt.replace("{:", "{:+"))


def _sig_text(r: Mapping[str, Any]) -> str:
    if r["delta_lo"] > 0 or r["delta_hi"] < 0:
        return f" over {int(r['pairs'])} paired cases (the interval excludes 0)"
    return f" over {int(r['pairs'])} paired cases (the interval includes 0: no difference shown at this size)"


def headline_rows(
    head: pd.DataFrame, lead: str, metrics: MetricCatalog
) -> tuple[list[str], list[list[tuple[str, Any]]]]:
    """The headline table, one row per mode: each cell its text and the value it sorts by."""
    f = metrics.fmt(lead)
    has_base = BASELINE_MODE in set(head["mode"])
    heads = ["mode", f"{metrics.arrow_label(lead)} [95 % CI]"]
    if has_base:
        heads.append(f"Δ vs {BASELINE_MODE} [95 % CI]")
    heads += ["tokens/case incl. ingest", "answer / ingest / retrieve", "latency ms/case"]
    rows = []
    for r in head.to_dict("records"):
        cells = [(str(r["mode"]), None), (f"{H.fmt_ci(r['mean'], r['lo'], r['hi'], f)} (n={r['n']})", r["mean"])]
        tokens, latency = _fmt(r["tokens"], "{:,.0f}"), _fmt(r["latency_ms"], "{:,.0f}")
        split = " / ".join(_fmt(r[f"{p}_tokens"], "{:,.0f}") for p in PHASES)
        if has_base:
            base = r["mode"] == BASELINE_MODE
            cells.append(("baseline" if base else _delta(r, f), r["delta"]))
            if not base:
                tokens += f" ({_pct(r['tokens_share'])})"
                latency += f" ({_pct(r['latency_share'])})"
        rows.append([*cells, (tokens, r["tokens"]), (split, r["ingest_tokens"]), (latency, r["latency_ms"])])
    return heads, rows


def _headline_md(head: pd.DataFrame, lead: str | None, metrics: MetricCatalog, flags: Sequence[str] = ()) -> list[str]:
    L = ["## Headline", "", headline_text(head, lead, metrics), ""]
    L += [line for f in flags for line in (f"**{md_cell(f)}**", "")]  # memory contestants' broken isolation
    if lead is not None and not head.empty:
        heads, rows = headline_rows(head, lead, metrics)
        L += [_md(heads, [[text for text, _ in r] for r in rows]), "", HEADLINE_NOTE, ""]
    return L


def _headline_html(
    head: pd.DataFrame,
    lead: str | None,
    metrics: MetricCatalog,
    plot: Path,
    has_notes: bool,
    flags: Sequence[str] = (),
) -> list[str]:
    left = [f'<p class="verdict" id="verdict">{H.esc(headline_text(head, lead, metrics))}</p>']
    left += [f'<p class="deviation"><strong>{H.esc(f)}</strong></p>' for f in flags]
    if has_notes:
        left.append(
            '<p class="deviation"><strong>This run deviates from a plain run: see <a href="#run">Run</a>.</strong></p>'
        )
    if lead is not None and not head.empty:
        heads, rows = headline_rows(head, lead, metrics)
        cells = [[H.cell(r[0][0]), *[H.num_cell(text, v) for text, v in r[1:]]] for r in rows]
        left += [
            H.table(heads, cells, table_id="headline-table"),
            f'<p class="muted">{H.esc(HEADLINE_NOTE)}</p>',
        ]
    return [
        '<section id="headline"><div>',
        *left,
        "</div>",
        H.image(plot, "quality vs prompt tokens per mode", element_id="headline-plot"),
        "</section>",
    ]


# --- Markdown -----------------------------------------------------------------------------------------------


def _provenance_lines(meta: RunMeta) -> list[str]:
    if meta.empty:
        return ["- provenance: no run.json in this directory"]
    d = meta.dataset or {}
    m = meta.model or ModelRef()
    g = meta.git or GitState()
    # Every value comes from a config, a dataset or an endpoint: escaped (md_cell), never raw Markdown or HTML.
    sha = f", sha256 {md_cell(str(m.sha256)[:12])}…" if m.sha256 else ""
    sha += f", runtime {md_cell(m.runtime)}" if m.runtime else ""
    lines = [
        f"- dataset: {md_cell(d.get('source'))} (sha256 {md_cell(str(d.get('sha256'))[:12])}…, "
        f"{md_cell(d.get('n_selected'))} of {md_cell(d.get('n_total'))} questions)",
        f"- model: {md_cell(m.name)} ({md_cell(m.model)}{sha})",
    ]
    if meta.judge_model is not None and not meta.judge_model.empty:
        j = meta.judge_model
        lines.append(f"- judge model: {md_cell(j.name)} ({md_cell(j.model)})")
    lines.append(f"- judge: {md_code(judge_label(meta))}")
    lines.append(f"- git: {md_code(g.sha)}{' (dirty)' if g.dirty else ''}")
    rg = meta.rescore.git if meta.rescore is not None else None
    if rg is not None and not rg.empty:
        lines.append(f"- rescored at git: {md_code(rg.sha)}{' (dirty)' if rg.dirty else ''} (the answers: git above)")
    lines += [f"- {k}: {md_cell(v)}" for k, v in run_lines(meta)]
    return lines + [f"- **{md_cell(line)}**" for line in header_notes(meta)]


def run_lines(meta: RunMeta | Mapping[str, Any]) -> list[tuple[str, str]]:
    """The header's host line (CPU, flags, cores, the embedded model's measured speed: why two runs' latencies
    differ) and, for a run that did not finish, its state."""
    meta = RunMeta.of(meta)
    out: list[tuple[str, str]] = []
    host = meta.host
    if host is not None and not host.empty:
        cpu = f"{host.cpu_model or 'unknown CPU'}" + (f" ({host.cpu_id})" if host.cpu_id else "")
        cores = f"{host.cores_usable or '?'} of {host.cores or '?'} cores"
        flags = " ".join(host.cpu_flags or []) or "none of avx2/fma/f16c/avx512/amx"
        speeds = [
            f"{name}: prefill {_tps(p.get('prefill_tokens_per_s'))}, generation {_tps(p.get('generation_tokens_per_s'))}"
            for name, p in (host.model_speed or {}).items()
        ]
        out.append(("host", f"{cpu}, {cores}, flags {flags}"))
        if speeds:
            out.append(("embedded model speed (llama.cpp timings of this run's calls)", "; ".join(speeds)))
    state = meta.state
    if state and state != "finished":
        out.append(("run state", f"{state} (run.json updated {meta.updated}): the records are partial"))
    return out


def _tps(v: Any) -> str:
    return f"{v} tokens/s" if v is not None else "not measured"


def _markdown(c: ReportContext) -> str:
    run_dir, df, meta, head, lead, metrics = c.run_dir, c.df, c.meta, c.head, c.lead, c.metrics
    summary, ci, quality, judges, sav = c.summary, c.ci, c.quality, c.judges, c.sav
    tools, costs, table, pair, wlt, figs = c.tools, c.costs, c.table, c.pair, c.wlt, c.figs
    L = [
        f"# lme-harness report: {md_cell(run_dir.name)}",
        "",
        *_provenance_lines(meta),
        "",
        *_headline_md(head, lead, metrics, integrity_flags(c.records)),
        "## Reference table",
        "",
        markdown_table(summary, metrics),
        "",
        "Means over scored cases. Prompt tokens are those of the final answer call (the reference's figure); "
        "↑ higher is better, ↓ lower is better.",
        "",
        "## Quality with confidence intervals",
        "",
        _md(*ci_pivot(ci, quality, metrics)),
        "",
        CI_NOTE,
        "",
    ]
    if not judges.empty:
        L += [
            "## Judges",
            "",
            "`accuracy`: over the cases the judge scored; `not_run`: call failed, reply unusable or no prompt for "
            "the question type (never counted as 0 or 1 there); `accuracy, all cases`: not_run counted as wrong "
            "(the strict, full-denominator figure). LongMemEval: task-averaged and abstention (`_abs`) accuracy as "
            "upstream's print_qa_metrics.py reports them.",
            "",
            _md(
                [
                    "judge metric",
                    "mode",
                    "accuracy [95 % CI]",
                    "judged",
                    "not_run",
                    "accuracy, all cases",
                    "task-averaged",
                    "abstention (n)",
                ],
                [
                    [
                        r["metric"],
                        r["mode"],
                        H.fmt_ci(r["accuracy"], r["lo"], r["hi"], "{:.4f}"),
                        r["judged"],
                        r["not_run"],
                        _fmt(r["accuracy_all"]),
                        _fmt(r["task_avg"]),
                        f"{_fmt(r['abstention'])} ({r['abstention_n']})",
                    ]
                    for r in judges.to_dict("records")
                ],
            ),
            "",
        ]
    L += votes_markdown(df, meta)
    if not sav.empty:
        L += [
            "## Prompt savings vs long_context",
            "",
            _md(
                [
                    "mode",
                    "pairs",
                    "long_context tokens",
                    "mode tokens",
                    "savings % (mean of per-case %) [95 % CI]",
                    "savings % (ratio of means)",
                ],
                [
                    [
                        r["mode"],
                        r["pairs"],
                        f"{r['long_mean']:,.0f}",
                        f"{r['mode_mean']:,.0f}",
                        H.fmt_ci(r["savings_pct"], r["lo"], r["hi"], "{:.1f}"),
                        f"{r['savings_ratio_pct']:.1f}",
                    ]
                    for r in sav.to_dict("records")
                ],
            ),
            "",
            "The reference reports the mean of per-case percentages; the ratio of means weights long cases more.",
            "",
        ]
    if not tools.empty:
        L += [
            "## Tool use",
            "",
            _md(
                [
                    "mode",
                    "cases",
                    "with ≥1 search",
                    "with ≥1 load",
                    "searches",
                    "loads",
                    "searches/case",
                    "loads/case",
                    "tool errors",
                    "answer calls/case",
                ],
                [
                    [
                        r["mode"],
                        r["cases"],
                        r["cases_with_search"],
                        r["cases_with_load"],
                        r["search_total"],
                        r["load_total"],
                        f"{r['search_mean']:.2f}",
                        f"{r['load_mean']:.2f}",
                        r["tool_errors"],
                        _fmt(r["answer_calls_mean"], "{:.2f}"),
                    ]
                    for r in tools.to_dict("records")
                ],
            ),
            "",
        ]
    L += _cost_md(costs, table, c.unpriced_models)
    if pair and not wlt.empty:
        L += [
            f"## Per case: {pair[1]} vs {pair[0]}",
            "",
            markdown_paired(wlt, label_a=pair[0], label_b=pair[1], metrics=metrics),
            "",
            "Δ = second − first, paired over question_id; win = the second mode is better.",
            "",
        ]
    L += ["## Plots", ""]
    L += [f"![{name}]({paths[0].name}) ([svg]({paths[1].name}))" for name, paths in figs.items()]
    L.append("")
    L += failures_markdown(group_failures(df))  # one row per distinct error, with its count and pairs
    L += ["Per-case details (question, reference, prediction, summary, tool trace): `report.html`.", ""]
    return "\n".join(L)


# The cost table's columns: (key, header, format); tokens and $ by phase, the judge apart (reports/phases.py).
COST_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("final_prompt_tokens", "final-call prompt tokens", "{:,.0f}"),
    ("total_tokens", "tokens/case incl. ingest", "{:,.0f}"),
    ("answer_tokens", "answer tokens", "{:,.0f}"),
    ("ingest_tokens", "ingest tokens", "{:,.0f}"),
    ("retrieve_tokens", "retrieve tokens", "{:,.0f}"),
    ("judge_tokens", "judge tokens", "{:,.0f}"),
    ("cost_answer", "answer $/case", "{:.6f}"),
    ("cost_ingest", "ingest $/case", "{:.6f}"),
    ("cost_retrieve", "retrieve $/case", "{:.6f}"),
    ("cost_judge", "judge $/case", "{:.6f}"),
    ("cost_total", "total $/case", "{:.6f}"),
    ("cost_total_sum", "total $", "{:.4f}"),
    ("cost_summary", "of which summary $/case", "{:.6f}"),  # the detail by source: in ingest
    ("cost_embedding", "of which embedding $/case", "{:.6f}"),  # in ingest (an index) and retrieve (queries)
)


def _cost_md(costs: pd.DataFrame, table: PriceTable, unpriced: Sequence[str]) -> list[str]:
    if costs.empty:
        return []
    L = [
        "## Cost",
        "",
        _md(
            ["mode", *(head for _, head, _ in COST_COLUMNS)],
            [[str(r["mode"]), *(_fmt(r.get(k), f) for k, _, f in COST_COLUMNS)] for r in costs.to_dict("records")],
        ),
        "",
        f"Prices: {md_code(Path(table.path).name if table.path else 'table')} dated {md_cell(table.date)} "
        f"({md_cell(table.currency)} per 1M "
        "tokens; input, cached input, output). The final-call prompt tokens are the reference's figure. Tokens "
        "(prompt + completion) and $ are shown by phase: answer (every answer round), ingest (summary generation, "
        "charged to each mode that uses the summary; the embedding calls of an index over the history; a memory "
        "provider's ingest, e.g. mem0's extraction calls, priced as the run's model) and retrieve (query vectors, a "
        "memory provider's retrieve); the judge apart; summary and embedding $ are shown apart too, as parts of those. "
        "A memory provider's own `cost_usd` is kept as reported; a "
        "remote service that reports none has an unknown cost (n/a). Local models cost 0; calls replayed from the "
        "response cache are priced as if live.",
    ]
    if unpriced:
        L.append(f"Unpriced (cost n/a, not 0): {', '.join(md_code(m) for m in unpriced)}.")
    L.append("")
    return L


# --- HTML ---------------------------------------------------------------------------------------------------


def _html(c: ReportContext) -> str:
    run_dir, df, meta, records, head, lead, metrics = c.run_dir, c.df, c.meta, c.records, c.head, c.lead, c.metrics
    summary, ci, quality, other, judges, sav = c.summary, c.ci, c.quality, c.other, c.judges, c.sav
    tools, costs, table, pair, wlt, figs, by_type_html = (
        c.tools,
        c.costs,
        c.table,
        c.pair,
        c.wlt,
        c.figs,
        c.by_type_html,
    )
    B: list[str] = [f"<h1>lme-harness report: {H.esc(run_dir.name)}</h1>"]
    # The first screen answers the question (which mode wins, at what cost) before the provenance and any wide table.
    B += _headline_html(
        head, lead, metrics, figs["quality_vs_tokens"][0], bool(header_notes(meta)), integrity_flags(records)
    )
    B += ['<h2 id="run">Run</h2>', _provenance_html(meta)]
    B += [
        "<h2>Reference table</h2>",
        H.frame_table(
            [{"mode": str(m), **row.to_dict()} for m, row in summary.iterrows()],
            [("mode", "mode", None), ("cases", "cases", "{:.0f}"), ("failed", "failed", "{:.0f}")]
            + [(k, metrics.arrow_label(k), metrics.fmt(k)) for k in metrics.headline_keys if k in summary],
            table_id="reference",
        ),
    ]
    heads, rows = ci_pivot(ci, quality + other, metrics)
    B += [
        "<h2>All metrics with confidence intervals</h2>",
        f'<p class="muted">{H.esc(CI_NOTE)}</p>',
        H.table(heads, [[f"<td>{H.esc(c)}</td>" for c in r] for r in rows], table_id="metrics-ci"),
    ]
    if not judges.empty:
        B += [
            "<h2>Judges</h2>",
            '<p class="muted">accuracy over judged cases; not_run = no verdict (never folded into '
            "0 or 1); accuracy (all cases) counts not_run as wrong.</p>",
            H.table(
                [
                    "judge metric",
                    "mode",
                    "accuracy [95 % CI]",
                    "judged",
                    "not_run",
                    "accuracy, all cases",
                    "task-averaged",
                    "abstention",
                    "abstention n",
                ],
                [
                    [
                        H.cell(r["metric"]),
                        H.cell(r["mode"]),
                        H.ci_cell(r["accuracy"], r["lo"], r["hi"], "{:.4f}"),
                        H.cell(r["judged"]),
                        H.cell(r["not_run"]),
                        H.cell(r["accuracy_all"]),
                        H.cell(r["task_avg"]),
                        H.cell(r["abstention"]),
                        H.cell(r["abstention_n"]),
                    ]
                    for r in judges.to_dict("records")
                ],
                table_id="judges",
            ),
        ]
    if not sav.empty:
        B += [
            "<h2>Prompt savings vs long_context</h2>",
            H.table(
                [
                    "mode",
                    "pairs",
                    "long_context tokens",
                    "mode tokens",
                    "savings % (mean of per-case %)",
                    "savings % (ratio of means)",
                ],
                [
                    [
                        H.cell(r["mode"]),
                        H.cell(r["pairs"]),
                        H.cell(r["long_mean"], "{:,.0f}"),
                        H.cell(r["mode_mean"], "{:,.0f}"),
                        H.ci_cell(r["savings_pct"], r["lo"], r["hi"], "{:.1f}"),
                        H.cell(r["savings_ratio_pct"], "{:.1f}"),
                    ]
                    for r in sav.to_dict("records")
                ],
                table_id="savings",
            ),
        ]
    if not tools.empty:
        B += [
            "<h2>Tool use</h2>",
            H.frame_table(
                tools.to_dict("records"),
                [
                    ("mode", "mode", None),
                    ("cases", "cases", None),
                    ("cases_with_search", "with ≥1 search", None),
                    ("cases_with_load", "with ≥1 load", None),
                    ("search_total", "searches", None),
                    ("load_total", "loads", None),
                    ("search_mean", "searches/case", "{:.2f}"),
                    ("load_mean", "loads/case", "{:.2f}"),
                    ("tool_errors", "tool errors", None),
                    ("answer_calls_mean", "answer calls/case", "{:.2f}"),
                ],
                table_id="tools",
            ),
        ]
    if not costs.empty:
        B += [
            "<h2>Cost</h2>",
            H.frame_table(
                costs.to_dict("records"),
                [("mode", "mode", None), *COST_COLUMNS],
                table_id="cost",
            ),
            f'<p class="muted">{H.esc(" ".join(_cost_md(costs, table, c.unpriced_models)[3:]).replace("`", ""))}</p>',
        ]
    if pair and not wlt.empty:
        B += [
            f"<h2>Per case: {H.esc(pair[1])} vs {H.esc(pair[0])}</h2>",
            paired_html(wlt, table_id="modes-paired", metrics=metrics),
        ]
    B += by_type_html
    B += c.memory_html
    B.append("<h2>Plots</h2>")
    B += [H.image(paths[0], name) for name, paths in figs.items() if name != "quality_vs_tokens"]  # it leads the page
    groups = group_failures(df)
    if groups:
        B += [
            "<h2>Failed or errored cases</h2>",
            H.table(
                ["count", "status", "error", "(question_id / mode)"],
                [[H.cell(g.count), H.cell(g.status), H.cell(g.error), H.cell(g.pairs_text())] for g in groups],
                table_id="failures",
            ),
        ]
    B += _cases_html(df, records, metrics)
    return H.page(f"lme-harness report: {run_dir.name}", "\n".join(B))


def paired_html(stats: pd.DataFrame, *, table_id: str, metrics: MetricCatalog = BUILTIN) -> str:
    rows = []
    for r in stats.to_dict("records"):
        k = r["metric"]
        f = metrics.fmt(k)
        label = metrics.label(k) + {True: " ↑", False: " ↓"}.get(r["higher_is_better"], "")
        rows.append(
            [
                H.cell(r["group"]),
                H.cell(label),
                H.cell(r["n"]),
                H.cell(r["mean_a"], f),
                H.cell(r["mean_b"], f),
                H.ci_cell(r["delta"], r["lo"], r["hi"], f.replace("{:", "{:+")),
                H.cell(r["wins"]),
                H.cell(r["ties"]),
                H.cell(r["losses"]),
                H.cell(mcnemar_cell(r)),
            ]
        )
    return H.table(
        [
            "mode",
            "metric",
            "n",
            "A",
            "B",
            "Δ (B − A) [95 % CI]",
            "wins",
            "ties",
            "losses",
            "McNemar b/c, p; agreement, κ",
        ],
        rows,
        table_id=table_id,
    )


def _provenance_html(meta: RunMeta) -> str:
    if meta.empty:
        return '<p class="muted">no run.json in this directory</p>'
    d, m, g = meta.dataset or {}, meta.model or ModelRef(), meta.git or GitState()
    pairs = [
        ("dataset", f"{d.get('source')} ({d.get('n_selected')} of {d.get('n_total')} questions)"),
        ("dataset sha256", d.get("sha256")),
        ("model", f"{m.name} · {m.model}"),
        ("model sha256", m.sha256 or "n/a (remote)"),
        ("judge model", (meta.judge_model.model if meta.judge_model else None) or "the answer model"),
        ("judge", judge_label(meta)),
        ("git", f"{g.sha}{' (dirty)' if g.dirty else ''}"),
        ("python / platform", f"{meta.python} · {meta.platform}"),
        *run_lines(meta),
        ("packages", ", ".join(f"{k} {v}" for k, v in (meta.packages or {}).items() if v)),
    ]
    deviations = "".join(f'<p class="deviation"><strong>{H.esc(line)}</strong></p>' for line in header_notes(meta))
    return (
        deviations
        + H.kv(pairs)
        + "<details><summary>resolved config (secrets redacted)</summary>"
        + H.pre(meta.config)
        + "</details>"
    )


CASE_COLUMNS = (
    "em",
    "llm_score",
    "llm_score_strict",
    "lme_acc",
    "rouge_l",
    "f1",
    "final_prompt_tokens",
    "query_ms",
    "n_search",
    "n_load",
    "cost_total",
)


def _cases_html(df: pd.DataFrame, records: Sequence[dict[str, Any]], metrics: MetricCatalog) -> list[str]:
    cols = [k for k in CASE_COLUMNS if k in df.columns]
    rows, attrs = [], []
    for r in df.sort_values(["question_id", "mode"]).to_dict("records"):
        search = f"{r['question_id']} {r['mode']} {r.get('question_type') or ''}".lower()
        attrs.append(f'data-case="1" data-search="{H.esc(search)}"')
        link = f'<td><a href="#case-{H.esc(r["question_id"])}">{H.esc(r["question_id"])}</a></td>'
        rows.append(
            [link, H.cell(str(r["mode"])), H.cell(r["status"])] + [H.cell(r.get(k), metrics.fmt(k)) for k in cols]
        )
    out = [
        "<h2>Cases</h2>",
        '<input id="case-filter" type="search" placeholder="filter by question id, mode, type, question text">',
        H.table(
            ["question_id", "mode", "status", *[metrics.label(k) for k in cols]],
            rows,
            table_id="cases",
            row_attrs=attrs,
        ),
        "<h2>Per-case drill-down</h2>",
    ]
    by_q: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        by_q.setdefault(rec["question_id"], []).append(rec)
    for qid in sorted(by_q):
        recs = sorted(by_q[qid], key=lambda r: r["mode"])
        first = recs[0]
        search = f"{qid} {first.get('question_type') or ''} {first.get('question') or ''}".lower()
        marks = " ".join(f"{r['mode']}: {_mark(r)}" for r in recs)
        out.append(
            f'<details id="case-{H.esc(qid)}" data-case="1" data-search="{H.esc(search)}"><summary>'
            f"<b>{H.esc(qid)}</b> · {H.esc(first.get('question_type'))} · {H.esc(first.get('question'))} "
            f'<span class="muted">({H.esc(marks)})</span></summary>'
        )
        out.append(
            H.kv(
                [
                    ("question", first.get("question")),
                    ("reference", first.get("reference")),
                    ("abstention", first.get("is_abstention")),
                ]
            )
        )
        for r in recs:
            out.append(_mode_block(r))
        out.append("</details>")
    return out


def _mark(rec: Mapping[str, Any]) -> str:
    if rec.get("status") != "ok":
        return "failed"
    em = (rec.get("metrics") or {}).get("em")
    return "EM" if em == 1.0 else "no EM"


def _mode_block(r: Mapping[str, Any]) -> str:
    parts = [f'<h3 class="mode">{H.esc(r["mode"])} <span class="muted">({H.esc(r.get("status"))})</span></h3>']
    if r.get("error"):
        parts.append(f'<p class="bad">error: {H.esc(r["error"])}</p>')
    parts.append("<b>prediction</b>" + H.pre(r.get("prediction") or ""))
    metrics = r.get("metrics") or {}
    if metrics:
        parts.append(H.table(list(metrics), [[H.cell(v) for v in metrics.values()]], sortable=False))
    u = r.get("usage") or {}
    if u:
        parts.append(H.kv([(k, v) for k, v in u.items()] + [("latency", json.dumps(r.get("latency")))]))
    for name, det in (r.get("metric_details") or {}).items():
        if isinstance(det, Mapping) and ("raw" in det or "verdict" in det):
            keep = {
                k: det.get(k)
                for k in (
                    "verdict",
                    "verdict_strict",
                    "prompt_kind",
                    "confidence",
                    "reason",
                    "strict_reason",
                    "error",
                    "skipped",
                    "raw",
                )
                if det.get(k) is not None
            }
            if vote_lines(det):  # a voted judge (harness/scoring/votes.py): each vote's verdict and reply
                keep.update(votes=vote_lines(det), vote_ties=det.get("vote_ties"))
            parts.append(
                f"<details><summary>judge: {H.esc(name)} → {H.esc(det.get('verdict'))}</summary>{H.pre(keep)}</details>"
            )
    summ = r.get("summary") or {}
    if summ:
        note = f"{summ.get('chars')} chars, generated for {summ.get('generated_for')}{', reused' if summ.get('reused') else ''}"
        parts.append(f"<details><summary>summary ({H.esc(note)})</summary>{H.pre(summ.get('text') or '')}</details>")
    trace = r.get("tool_calls") or []
    if trace:
        parts.append(f"<details><summary>tool trace ({len(trace)} calls)</summary>{H.pre(trace)}</details>")
    return "\n".join(parts)
