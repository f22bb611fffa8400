"""`lme-harness compare RUN_A RUN_B [...]`: paired comparison written as Markdown, HTML, JSON and plots."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from reports import html as H
from reports import memory_systems as memory
from reports import plots
from reports import standings as C
from reports.aggregate import RunData, headline_metric
from reports.compare import (
    COMPARE_NOTE,
    PairResult,
    Run,
    compare_runs,
    dumps_json,
    expand_run_dirs,
    load_runs,
    pair_markdown,
)
from reports.cost import load_price_table
from reports.metrics import catalog_of
from reports.report_sections import paired_html
from reports.run_results import load_results
from reports.stats import WinLossTie


def _plots(p: PairResult, out: Path, stem: str) -> list[Path]:
    q = p.stats[p.stats["metric"].isin(p.metrics.quality_keys)]
    if q.empty:
        return []
    t = q.assign(label=[f"{g} · {p.metrics.label(m)}" for g, m in zip(q["group"], q["metric"])])
    title = f"B = {p.b.label}  vs  A = {p.a.label}"
    paths = plots.paired_deltas(t, out / f"{stem}_deltas", title=title)
    counts = {
        lab: WinLossTie(int(w), int(l), int(ti)) for lab, w, l, ti in zip(t["label"], t["wins"], t["losses"], t["ties"])
    }
    paths += plots.win_loss_tie(counts, out / f"{stem}_win_loss_tie", a=p.a.label, b=p.b.label)
    return paths


def _html(
    pairs: Sequence[PairResult], figs: dict[int, list[Path]], extra: Sequence[str] = (), *, lead: Sequence[str] = ()
) -> str:
    body = ["<h1>lme-harness compare</h1>", *lead, f'<p class="muted">{H.esc(COMPARE_NOTE)}</p>']
    for i, p in enumerate(pairs):
        body.append(f"<h2>B = {H.esc(p.b.label)} vs A = {H.esc(p.a.label)}</h2>")
        body.append(
            H.kv(
                [("A", p.a.path), ("B", p.b.path)]
                + [(f"config {k}", f"{va!r} → {vb!r}") for k, va, vb in p.diff[:20]]
                + [("note", w) for w in p.warnings]
            )
        )
        body.append(paired_html(p.stats, table_id=f"paired-{i}", metrics=p.metrics))
        body += [H.image(f, f.stem) for f in figs.get(i, []) if f.suffix == ".png"]
    body += extra
    return H.page("lme-harness compare", "\n".join(body))


def _contestants(runs: Sequence[Run], out_dir: Path) -> tuple[list[Run], list[str], list[str], dict]:
    """Every contestant of every run, ranked in one table with the frontier plot (reports/standings.py): its
    Markdown and HTML, the runs relabelled by their contestants' names where those tell them apart, and the
    contestants' names by (run, mode) for the memory tables."""
    leads = [r.results.headline_metric if r.results is not None else headline_metric(r.frame) for r in runs]
    lead = leads[0]  # one ranking needs one metric: the first run's; a run without it has no quality here
    found = C.of_runs(runs, lead)
    if labels := C.run_labels(runs, found):
        runs = [replace(r, label=label) for r, label in zip(runs, labels)]
    metrics = catalog_of(*(r.meta for r in runs))
    t = C.table(found, lead, metrics)
    if len(set(leads)) > 1:
        t.intro += (
            f" The runs lead with different metrics ({', '.join(map(str, dict.fromkeys(leads)))}): ranked by `{lead}`."
        )
    plot = None
    if any(c.quality is not None for c in found):
        hib = metrics.higher_is_better(lead) is not False if lead else True
        paths = plots.frontier(
            found,
            out_dir / "frontier",
            quality_label=metrics.label(lead) if lead else "quality",
            on=C.frontier(found, higher_is_better=hib),
        )
        plot = paths[0]
    md = C.markdown(t) + [""]
    if plot is not None:
        md += [f"![frontier]({plot.name}) ([svg]({plot.with_suffix('.svg').name}))", ""]
    return list(runs), md, C.html(t, plot), {(c.run, c.mode): c.name for c in found}


def compare_main(run_args: Sequence[str], *, out: str | None = None, pricing: str | None = None) -> int:
    paths, notes = expand_run_dirs(run_args)
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    table = load_price_table(pricing)
    runs = load_runs(paths, prices=table)
    for i, r in enumerate(runs):  # each run's figures from its results.json (rebuilt from its records when stale)
        loaded = load_results(r.path, prices=table, run=RunData(r.frame, r.records, r.meta))  # read once
        if loaded.notice:
            print(f"note: {loaded.notice}", file=sys.stderr)
        runs[i] = replace(r, results=loaded.results)
    out_dir = Path(out) if out else paths[0].parent / "compare"
    out_dir.mkdir(parents=True, exist_ok=True)
    runs, ranked_md, ranked_html, names = _contestants(runs, out_dir)
    pairs = compare_runs(runs)
    figs = {i: _plots(p, out_dir, f"pair{i + 1}") for i, p in enumerate(pairs)}
    md = ["# lme-harness compare", "", *ranked_md, COMPARE_NOTE, ""]
    for i, p in enumerate(pairs):
        md.append(pair_markdown(p))
        md += [f"![{f.stem}]({f.name})" for f in figs[i] if f.suffix == ".png"] + [""]
    mem = memory.compare_tables(runs, names)  # the memory systems side by side; none without memory contestants
    text = "\n".join(md) + memory.markdown(mem)
    (out_dir / "compare.md").write_text(text)
    (out_dir / "compare.html").write_text(_html(pairs, figs, memory.html(mem), lead=ranked_html))
    (out_dir / "compare.json").write_text(dumps_json(pairs))
    print(text)
    print(f"written: {out_dir / 'compare.md'}, {out_dir / 'compare.html'}, {out_dir / 'compare.json'}")
    return 0
