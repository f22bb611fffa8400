"""The report's sections (reports/sections.py), in the one order both report.md and report.html follow.

Each entry of `SECTIONS` builds one section from the `ReportContext` (None: the run has nothing for it), in neutral
blocks that render as Markdown and HTML alike. Figures that results.json holds (per-metric means and intervals, judges,
savings, tool use, cost, per question type, the contestants' table) are read from the run's `Results`; what it does
not hold (the headline's paired differences, per-case comparisons, failures, the memory tables, the drill-down) from
the records frame.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.run_meta import GitState, ModelRef, RunMeta
from reports import html as H
from reports.aggregate import BASELINE_MODE
from reports.by_type import section as by_type_section
from reports.compare import markdown_paired, mcnemar_cell
from reports.cost import PHASES, PriceTable
from reports.deviations import header_notes
from reports.failures import failures_section
from reports.memory_systems import integrity_flags
from reports.metrics import BUILTIN, MetricCatalog
from reports.results_file import ContestantResult, MetricResult, Results
from reports.safe import md_cell, md_code
from reports.sections import (
    Block,
    Both,
    Figure,
    Figures,
    Note,
    Section,
    Table,
    blocks_html,
    blocks_markdown,
    num,
    shown,
    text,
)
from reports.stats import DEFAULT_N_BOOT, DEFAULT_SEED
from reports.votes import judge_label, vote_lines, votes_section

CI_NOTE = f"95 % percentile-bootstrap CIs over cases ({DEFAULT_N_BOOT} resamples, seed {DEFAULT_SEED})."


@dataclass
class ReportContext:
    """Everything the report's sections are built from (`build_report` computes it once)."""

    run_dir: Path
    results: Results  # the run's figures, as results.json holds them
    df: pd.DataFrame  # the records frame
    meta: RunMeta
    records: list[dict[str, Any]]
    summary: pd.DataFrame  # per mode (summary.csv): the reference table
    quality: list[str]  # the quality metrics present, then the other metrics present
    other: list[str]
    table: PriceTable
    metrics: MetricCatalog
    head: pd.DataFrame  # the headline table
    pair: tuple[str, str] | None  # the two modes compared pair by pair
    wlt: pd.DataFrame  # their paired comparison (empty without a pair)
    figs: dict[str, list[Path]]  # plot name -> [png, svg]
    by_type_plot: Path | None = None  # by_type.png (several question types only)
    memory: Section | None = None  # the memory-systems section (runs with memory contestants only)
    unpriced_models: Sequence[str] = field(default_factory=tuple)

    @property
    def lead(self) -> str | None:
        return self.results.headline_metric


def _fmt(v: Any, fmt: str = "{:.4f}") -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


def _ci_text(m: MetricResult | None, fmt: str) -> str:
    if m is None or m.mean is None:
        return "n/a"
    return H.fmt_ci(m.mean, m.lo, m.hi, fmt)  # type: ignore[arg-type]


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


# --- the sections, in order ---------------------------------------------------------------------------------------


def title_section(c: ReportContext) -> Section:
    return Section("title", f"lme-harness report: {c.run_dir.name}", level=1)


def headline_section(c: ReportContext) -> Section:
    """The first screen: which mode wins and at what cost; in HTML the quality-vs-tokens plot stands beside it."""
    lead, head, metrics = c.lead, c.head, c.metrics
    verdict = headline_text(head, lead, metrics)
    flags = [Note(f, strong=True) for f in integrity_flags(c.records)]  # memory contestants' broken isolation
    deviates = bool(header_notes(c.meta))
    tail: list[Block] = []  # the table with its note, when a mode has a score
    if lead is not None and not head.empty:
        heads, rows = headline_rows(head, lead, metrics)
        cells = [[text(r[0][0]), *[shown(t, v) for t, v in r[1:]]] for r in rows]
        tail = [Table(heads, cells, table_id="headline-table"), Note(HEADLINE_NOTE)]
    png, svg = c.figs["quality_vs_tokens"]
    md = [verdict, "", *blocks_markdown(flags)]
    if deviates:
        md += ["**This run deviates from a plain run: see [Run](#run).**", ""]
    md += blocks_markdown([*tail, Figures([Figure(png, "quality_vs_tokens", svg)])])
    html = ['<section id="headline"><div>', f'<p class="verdict" id="verdict">{H.esc(verdict)}</p>']
    html += blocks_html(flags)
    if deviates:
        html.append(
            '<p class="deviation"><strong>This run deviates from a plain run: see <a href="#run">Run</a>.</strong></p>'
        )
    html += [*blocks_html(tail), "</div>"]
    html += [H.image(png, "quality vs prompt tokens per mode", element_id="headline-plot"), "</section>"]
    return Section("headline", "Headline", [Both(md, html)])


def run_section(c: ReportContext) -> Section:
    """Provenance: dataset, models, judge, git, host; the HTML adds the packages and the resolved config."""
    return Section("run", "Run", [Both([*_provenance_lines(c.meta), ""], [_provenance_html(c.meta)])], html_id="run")


def reference_section(c: ReportContext) -> Section:
    """The reference's table layout: one row per mode, means over scored cases (summary.csv)."""
    summary, metrics = c.summary, c.metrics
    cols = [metrics.columns[k] for k in metrics.headline_keys if k in summary.columns]
    rows = [
        [
            text(mode),
            num(row["cases"], "{:.0f}"),
            num(row["failed"], "{:.0f}"),
            *[num(row[s.name], s.fmt) for s in cols],
        ]
        for mode, row in ((str(m), r.to_dict()) for m, r in summary.iterrows())
    ]
    table = Table(["mode", "cases", "failed", *[metrics.arrow_label(s.name) for s in cols]], rows, "reference")
    note = (
        "Means over scored cases. Prompt tokens are those of the final answer call (the reference's figure); "
        "↑ higher is better, ↓ lower is better."
    )
    return Section("reference", "Reference table", [table, Note(note)])


def ci_table(results: Results, keys: Sequence[str], metrics: MetricCatalog, table_id: str) -> Table:
    """Rows = metrics, columns = modes, cells 'mean [lo, hi]' (with not_run noted), from results.json's metrics."""
    modes = [c for c in results.contestants if c.metrics]
    rows = []
    for k in keys:
        if not any(k in c.metrics for c in modes):
            continue
        cells = [text(metrics.arrow_label(k))]
        for c in modes:
            m = c.metrics.get(k)
            shown_text = _ci_text(m, metrics.fmt(k))
            if m is not None and m.not_run:
                shown_text += f" ({m.not_run} not_run)"
            cells.append(text(shown_text))
        rows.append(cells)
    return Table(["metric", *[c.mode for c in modes]], rows, table_id)


def quality_ci_section(c: ReportContext) -> Section:
    return Section(
        "quality_ci",
        "Quality with confidence intervals",
        [ci_table(c.results, c.quality, c.metrics, "metrics-ci"), Note(CI_NOTE)],
    )


def other_ci_section(c: ReportContext) -> Section | None:
    """Tokens, latency, tool use and cost with their intervals: a table in the page, a pointer in report.md."""
    if not c.other:
        return None
    pointer = "Every other metric (tokens, latency, tool use, cost per case) with its interval: `report.html` and `summary_ci.csv`."
    table = ci_table(c.results, c.other, c.metrics, "other-ci")
    return Section("other_ci", "Other metrics with confidence intervals", [Both([pointer, ""], blocks_html([table]))])


JUDGES_NOTE = (
    "`accuracy`: over the cases the judge scored; `not_run`: call failed, reply unusable or no prompt for "
    "the question type (never counted as 0 or 1 there); `accuracy, all cases`: not_run counted as wrong "
    "(the strict, full-denominator figure). LongMemEval: task-averaged and abstention (`_abs`) accuracy as "
    "upstream's print_qa_metrics.py reports them."
)


def judges_section(c: ReportContext) -> Section | None:
    rows = []
    for k in c.metrics.judged_keys:
        for r in c.results.contestants:
            j, m = r.judges.get(k), r.metrics.get(k)
            if j is None or m is None:
                continue
            rows.append(
                [
                    text(k),
                    text(r.mode),
                    shown(_ci_text(m, "{:.4f}"), m.mean),
                    num(m.n),
                    num(m.not_run),
                    num(m.mean_all, "{:.4f}"),
                    num(j.task_avg, "{:.4f}"),
                    shown(f"{_fmt(j.abstention)} ({j.abstention_n})", j.abstention),
                ]
            )
    if not rows:
        return None
    heads = [
        "judge metric",
        "mode",
        "accuracy [95 % CI]",
        "judged",
        "not_run",
        "accuracy, all cases",
        "task-averaged",
        "abstention (n)",
    ]
    return Section("judges", "Judges", [Note(JUDGES_NOTE), Table(heads, rows, "judges")])


def votes_of(c: ReportContext) -> Section | None:
    return votes_section(c.df, c.meta)


def _contestants(c: ReportContext, part: str) -> list[tuple[ContestantResult, Any]]:
    return [(r, getattr(r, part)) for r in c.results.contestants if getattr(r, part) is not None]


def savings_section(c: ReportContext) -> Section | None:
    found = _contestants(c, "savings")
    if not found:
        return None
    heads = [
        "mode",
        "pairs",
        "long_context tokens",
        "mode tokens",
        "savings % (mean of per-case %) [95 % CI]",
        "savings % (ratio of means)",
    ]
    rows = [
        [
            text(r.mode),
            num(s.pairs),
            num(s.long_mean, "{:,.0f}"),
            num(s.mode_mean, "{:,.0f}"),
            shown(H.fmt_ci(s.savings_pct, s.lo, s.hi, "{:.1f}"), s.savings_pct),
            num(s.savings_ratio_pct, "{:.1f}"),
        ]
        for r, s in found
    ]
    note = "The reference reports the mean of per-case percentages; the ratio of means weights long cases more."
    return Section("savings", "Prompt savings vs long_context", [Table(heads, rows, "savings"), Note(note)])


TOOL_COLUMNS: tuple[tuple[str, str, str | None], ...] = (
    ("cases", "cases", None),
    ("cases_with_search", "with ≥1 search", None),
    ("cases_with_load", "with ≥1 load", None),
    ("search_total", "searches", None),
    ("load_total", "loads", None),
    ("search_mean", "searches/case", "{:.2f}"),
    ("load_mean", "loads/case", "{:.2f}"),
    ("tool_errors", "tool errors", None),
    ("answer_calls_mean", "answer calls/case", "{:.2f}"),
)


def tools_section(c: ReportContext) -> Section | None:
    found = _contestants(c, "tools")
    if not found:
        return None
    rows = [[text(r.mode), *[num(getattr(t, k), f) for k, _, f in TOOL_COLUMNS]] for r, t in found]
    return Section("tools", "Tool use", [Table(["mode", *[h for _, h, _ in TOOL_COLUMNS]], rows, "tools")])


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


def cost_note(table: PriceTable, unpriced: Sequence[str]) -> str:
    note = (
        f"Prices: {md_code(Path(table.path).name if table.path else 'table')} dated {md_cell(table.date)} "
        f"({md_cell(table.currency)} per 1M "
        "tokens; input, cached input, output). The final-call prompt tokens are the reference's figure. Tokens "
        "(prompt + completion) and $ are shown by phase: answer (every answer round), ingest (summary generation, "
        "charged to each mode that uses the summary; the embedding calls of an index over the history; a memory "
        "provider's ingest, e.g. mem0's extraction calls, priced as the run's model) and retrieve (query vectors, a "
        "memory provider's retrieve); the judge apart; summary and embedding $ are shown apart too, as parts of those. "
        "A memory provider's own `cost_usd` is kept as reported; a "
        "remote service that reports none has an unknown cost (n/a). Local models cost 0; calls replayed from the "
        "response cache are priced as if live."
    )
    if unpriced:
        note += f"\nUnpriced (cost n/a, not 0): {', '.join(md_code(m) for m in unpriced)}."
    return note


def cost_section(c: ReportContext) -> Section | None:
    found = _contestants(c, "cost")
    if not found:
        return None
    rows = [[text(r.mode), *[num(getattr(cost, k), f) for k, _, f in COST_COLUMNS]] for r, cost in found]
    table = Table(["mode", *[h for _, h, _ in COST_COLUMNS]], rows, "cost")
    return Section("cost", "Cost", [table, Note(cost_note(c.table, c.unpriced_models))])


def paired_section(c: ReportContext) -> Section | None:
    if not c.pair or c.wlt.empty:
        return None
    a, b = c.pair
    md = [markdown_paired(c.wlt, label_a=a, label_b=b, metrics=c.metrics), ""]
    html = [paired_html(c.wlt, table_id="modes-paired", metrics=c.metrics)]
    note = Note("Δ = second − first, paired over question_id; win = the second mode is better.")
    return Section("paired", f"Per case: {b} vs {a}", [Both(md, html), note])


def types_frame(results: Results) -> pd.DataFrame:
    """results.json's per-question-type figures as by_type.csv's long table (empty for a single-type run)."""
    rows = [
        {
            "mode": c.mode,
            "metric": metric,
            "question_type": t.question_type,
            "mean": math.nan if t.mean is None else t.mean,
            "lo": math.nan if t.lo is None else t.lo,
            "hi": math.nan if t.hi is None else t.hi,
            "n": t.n,
        }
        for c in results.contestants
        for metric, ts in c.by_type.items()
        for t in ts
    ]
    return pd.DataFrame(rows, columns=["mode", "metric", "question_type", "mean", "lo", "hi", "n"])


def per_type_section(c: ReportContext) -> Section | None:
    return by_type_section(types_frame(c.results), c.by_type_plot)


def memory_section(c: ReportContext) -> Section | None:
    return c.memory


def plots_section(c: ReportContext) -> Section:
    """Every plot but the quality-vs-tokens one, which stands in the headline."""
    figs = [Figure(png, name, svg) for name, (png, svg) in c.figs.items() if name != "quality_vs_tokens"]
    return Section("plots", "Plots", [Figures(figs)])


def failures_of(c: ReportContext) -> Section | None:
    return failures_section(c.df)


def cases_section(c: ReportContext) -> Section:
    pointer = "Per-case details (question, reference, prediction, summary, tool trace): `report.html`."
    return Section("cases", "Cases", [Both([pointer, ""], _cases_html(c.df, c.records, c.metrics))])


# The report, in order: the first screen (which mode wins, at what cost), the run, then the tables, then each case.
SECTIONS: tuple[Callable[[ReportContext], Section | None], ...] = (
    title_section,
    headline_section,
    run_section,
    reference_section,
    quality_ci_section,
    other_ci_section,
    judges_section,
    votes_of,
    savings_section,
    tools_section,
    cost_section,
    paired_section,
    per_type_section,
    memory_section,
    plots_section,
    failures_of,
    cases_section,
)


def report_sections(c: ReportContext) -> list[Section]:
    """The sections this run has, in `SECTIONS`' order: what both report.md and report.html show."""
    return [s for build in SECTIONS if (s := build(c)) is not None]


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
