"""`lme-harness compare RUN_A RUN_B [...]`: paired comparison written as Markdown, HTML, JSON and plots."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from reports import html as H
from reports import memory_systems as memory
from reports import plots
from reports.aggregate import headline_metric
from reports.compare import (
    COMPARE_NOTE,
    PairResult,
    compare_runs,
    dumps_json,
    expand_run_dirs,
    load_runs,
    pair_markdown,
)
from reports.cost import load_price_table
from reports.render import paired_html
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


def _html(pairs: Sequence[PairResult], figs: dict[int, list[Path]], extra: Sequence[str] = ()) -> str:
    body = ["<h1>lme-harness compare</h1>", f'<p class="muted">{H.esc(COMPARE_NOTE)}</p>']
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


def compare_main(run_args: Sequence[str], *, out: str | None = None, pricing: str | None = None) -> int:
    paths, notes = expand_run_dirs(run_args)
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    runs = load_runs(paths, prices=load_price_table(pricing))
    pairs = compare_runs(runs)
    out_dir = Path(out) if out else paths[0].parent / "compare"
    out_dir.mkdir(parents=True, exist_ok=True)
    figs = {i: _plots(p, out_dir, f"pair{i + 1}") for i, p in enumerate(pairs)}
    md = ["# lme-harness compare", "", COMPARE_NOTE, ""]
    for i, p in enumerate(pairs):
        md.append(pair_markdown(p))
        md += [f"![{f.stem}]({f.name})" for f in figs[i] if f.suffix == ".png"] + [""]
    mem = memory.compare_tables(runs)  # the memory systems side by side; none without memory contestants
    extra_html: list[str] = []
    if points := memory.compare_frontier(runs):  # every contestant of every run on one frontier plot
        lead = ", ".join(dict.fromkeys(str(headline_metric(r.frame)) for r in runs))
        paths = plots.frontier(points, out_dir / "frontier", quality_label=lead, pareto=memory.pareto(points))
        mem = [memory.frontier_table(points, lead), *mem]
        md += [f"![frontier]({paths[0].name}) ([svg]({paths[1].name}))", ""]
        extra_html.append(H.image(paths[0], "frontier"))
    text = "\n".join(md) + memory.markdown(mem)
    (out_dir / "compare.md").write_text(text)
    (out_dir / "compare.html").write_text(_html(pairs, figs, extra_html + memory.html(mem)))
    (out_dir / "compare.json").write_text(dumps_json(pairs))
    print(text)
    print(f"written: {out_dir / 'compare.md'}, {out_dir / 'compare.html'}, {out_dir / 'compare.json'}")
    return 0
