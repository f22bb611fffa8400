"""Every contestant of one run or of several (`lme-harness compare`) in one table, ranked by the headline quality metric.

A contestant is named as a reader knows it: a memory provider by its own name (`mem0`, `bm25`, `my-service`: what its
`capabilities` said), any other contestant by its mode (`long_context`, `summary`). A memory provider run at settings
of its own other than its shipped config file's always carries them (`mem0 (turns_per_add=12)`: the result-bearing
ones, reports/provider_config.py). Only names that would still read alike get a qualifier, the fewest config entries
that tell their runs apart (`mem0 (memory.top_k=20)`; a provider's `_target_` by the file it was selected by,
`full_context (memory=http)`, else by its class, `memory._target_=HttpProvider`), else the mode's key within one
run, else the run's place in the command line: deterministic, never a whole config diff, and no entry twice.

Per contestant, means per question over its scored cases: the headline metric (95 % bootstrap CI), USD and LLM tokens
by phase, answer + ingest + retrieve (reports/phases.py: ingest counted, the judge apart), and the median ingest and
answer times. `variant` marks a memory contestant not run at the fair defaults (its trace's `variant`: changed
`top_k` / `context_tokens`, or `native_answer`). `frontier` marks the Pareto set on quality against tokens per
question: a contestant is off it when another is at least as good on both and better on one. A remote service that
reported no usage at all (neither tokens nor `cost_usd`) cannot be on it by being cheap: its cost counts as unknown.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.settings import group_default
from reports import html as H
from reports.compare import Run, fewest_keys, naming_keys
from reports.config_keys import flatten
from reports.cost import PHASES
from reports.memory_systems import Table, cell_text
from reports.metrics import MetricCatalog
from reports.phases import provider_ingest, provider_query
from reports.provider_config import GROUP, provider_config, target_option
from reports.results_file import Results
from reports.run_frame import RunFrame
from reports.safe import md_cell
from reports.stats import DEFAULT_N_BOOT, DEFAULT_SEED, bootstrap_ci

LEGEND_WIDTH = 48  # characters per line of a legend entry: a longer name wraps onto more lines


@dataclass(frozen=True)
class Contestant:
    """One contestant of one run: means per question over its scored cases."""

    name: str  # as shown: `base`, qualified only when another contestant would read alike
    base: str  # a memory provider's own name, else the mode
    run: int  # its run's place among those shown (0 for a single run)
    mode: str  # the records' mode (the contestant's config key)
    variant: str  # "" at the fair defaults or for a contestant without them; else what differs
    n: int  # scored cases
    quality: float | None  # the headline metric's mean (None: no value)
    lo: float | None
    hi: float | None
    tokens: Mapping[str, float]  # mean LLM tokens per question by phase (PHASES)
    usd: Mapping[str, float | None]  # mean USD per question by phase; None: unpriced or not reported
    ingest_ms: float | None  # median over questions
    answer_ms: float | None  # median over questions (the query latency)
    latency_ms: float | None  # median over questions of ingest + answer
    spend_reported: bool = True  # False: a remote service that reported neither tokens nor cost
    failed: int = 0  # its cases not scored (a provider's failures among them): never counted in the means above
    provider: str | None = None  # the memory provider it drove (its traces' name); None for any other contestant
    # its provider's result-bearing settings changed from its shipped config file (`turns_per_add=12`), set when it is
    # named (`name_contestants`); "" for none, or for any other contestant
    config: str = ""

    @property
    def own_name(self) -> str:
        """Its base name with its provider's own changed settings: `mem0 (turns_per_add=12)`, `mem0` at its file's."""
        return f"{self.base} ({self.config})" if self.config else self.base

    @property
    def total_tokens(self) -> float:
        return float(sum(self.tokens.values()))

    @property
    def total_usd(self) -> float | None:
        vals = list(self.usd.values())
        return None if any(v is None for v in vals) else float(sum(v for v in vals if v is not None))

    @property
    def legend(self) -> str:
        """Its name in a plot's legend, with its variant mark; wrapped, never cut, when long."""
        text = f"{self.name} [{self.variant}]" if self.variant else self.name
        return textwrap.fill(text, LEGEND_WIDTH, break_long_words=True, break_on_hyphens=False)

    @property
    def frontier_cost(self) -> float:
        """What the frontier ranks cost by: tokens per question; unknown (inf) when the spend was not reported."""
        return self.total_tokens if self.spend_reported else math.inf


def _column(part: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column of the frame (NaN where unknown, and all NaN when the frame has none)."""
    if name not in part:
        return pd.Series(math.nan, index=part.index, dtype=float)
    return pd.to_numeric(part[name], errors="coerce")


def _median(values: pd.Series) -> float | None:
    xs = values.dropna()
    return float(np.median(xs)) if len(xs) else None


def _usd(part: pd.DataFrame, column: str) -> float | None:
    """The mean cost, only when every case's is known (an unpriced case makes it unknown, never smaller)."""
    vals = _column(part, column)
    return None if vals.isna().any() or vals.empty else float(vals.mean())


def _reported(usage: Mapping[str, Any] | None) -> bool:
    u = usage or {}
    return u.get("cost_usd") is not None or any(
        int(u.get(k) or 0) for k in ("input_tokens", "output_tokens", "embedding_tokens", "llm_calls")
    )


def _variant(recs: Sequence[Mapping[str, Any]]) -> str:
    """A memory contestant's variant as its traces say, with what a `settings` variant changed."""
    traces = [t for r in recs if (t := provider_ingest(r)) is not None]
    kind = str(traces[0].get("variant") or "") if traces else ""
    if kind in ("", "fair"):
        return ""
    if kind != "settings":
        return kind
    first = recs[0]
    used = {  # the fair settings (configs/mode/memory.yaml) as this contestant ran them
        "top_k": (provider_query(first) or {}).get("top_k"),
        "context_tokens": (first.get("truncation") or {}).get("context_tokens_cap"),
    }
    changed = [f"{k}={v}" for k, v in used.items() if v is not None and v != group_default("mode", "memory", k)]
    return f"settings ({', '.join(changed)})" if changed else "settings"


def contestants_of(
    frame: RunFrame,
    records: Sequence[Mapping[str, Any]],
    lead: str | None,
    *,
    run: int = 0,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
) -> list[Contestant]:
    """The contestants of one run (its records frame and records), unnamed beyond their base names."""
    df = frame.df
    if df.empty:
        return []
    ok = df[df["status"] == "ok"]
    by_mode: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        if r.get("status") == "ok":
            by_mode.setdefault(str(r.get("mode")), []).append(r)
    out = []
    for mode in [str(m) for m in df["mode"].cat.categories]:
        part = ok[ok["mode"].astype(str) == mode]
        recs = by_mode.get(mode, [])
        if part.empty:
            continue
        ing = next((t for r in recs if (t := provider_ingest(r)) is not None), None)
        values = part[lead].to_numpy(dtype=float) if lead and lead in part else np.array([])
        est = bootstrap_ci(values, n_boot=n_boot, seed=seed)
        usages = [t.get("usage") for r in recs for t in (provider_ingest(r), provider_query(r)) if t is not None]
        ingest_ms, query_ms = _column(part, "ingest_ms"), _column(part, "query_ms")
        out.append(
            Contestant(
                name=str(ing["provider"]) if ing else mode,
                base=str(ing["provider"]) if ing else mode,
                run=run,
                mode=mode,
                variant=_variant(recs),
                n=len(part),
                quality=None if est.n == 0 else est.mean,
                lo=None if est.n == 0 else est.lo,
                hi=None if est.n == 0 else est.hi,
                tokens={p: float(_column(part, f"{p}_tokens").fillna(0).mean()) for p in PHASES},
                usd={p: _usd(part, f"cost_{p}") for p in PHASES},
                ingest_ms=_median(ingest_ms),
                answer_ms=_median(query_ms),
                latency_ms=_median(ingest_ms.fillna(0) + query_ms),
                spend_reported=not (ing and ing.get("remote")) or any(_reported(u) for u in usages),
                failed=int(((df["mode"].astype(str) == mode) & (df["status"] != "ok")).sum()),
                provider=str(ing["provider"]) if ing else None,
            )
        )
    return out


def contestants_from_results(results: Results, lead: str | None, *, run: int = 0) -> list[Contestant]:
    """The contestants of one run as its results.json holds them (`contestants_of`'s figures, read back): `lead`'s
    mean and CI, tokens and USD by phase, the medians, the provider; unnamed beyond their base names."""
    out = []
    for c in results.contestants:
        if not c.ok:
            continue
        m = c.metrics.get(lead) if lead else None
        scored = m is not None and m.n > 0
        prov, lat, cost = c.provider, c.latency, c.cost
        out.append(
            Contestant(
                name=prov.name if prov else c.mode,
                base=prov.name if prov else c.mode,
                run=run,
                mode=c.mode,
                variant=prov.variant if prov else "",
                n=c.ok,
                quality=m.mean if scored and m else None,
                lo=m.lo if scored and m else None,
                hi=m.hi if scored and m else None,
                tokens={p: float(getattr(cost, f"{p}_tokens") or 0.0) if cost else 0.0 for p in PHASES},
                usd={p: getattr(cost, f"cost_{p}") if cost else None for p in PHASES},
                ingest_ms=lat.ingest_ms_p50 if lat else None,
                answer_ms=lat.answer_ms_p50 if lat else None,
                latency_ms=lat.total_ms_p50 if lat else None,
                spend_reported=prov.spend_reported if prov else True,
                failed=c.failed,
                provider=prov.name if prov else None,
            )
        )
    return out


# --- names ----------------------------------------------------------------------------------------------------


def _short_keys(keys: Sequence[str]) -> dict[str, str]:
    """Each config key by its shortest dotted tail of at least two parts that no other of `keys` ends with."""
    out = {}
    for k in keys:
        parts = k.split(".")
        for n in range(min(2, len(parts)), len(parts) + 1):
            tail = ".".join(parts[-n:])
            if all(o == k or not (o == tail or o.endswith("." + tail)) for o in keys):
                break
        out[k] = tail
    return out


def _value(key: str, v: Any) -> str:
    """A config value as a qualifier shows it: a `_target_` by its class name, anything longer than 24 characters cut."""
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    if key.endswith("_target_") and isinstance(v, str):
        text = v.rsplit(".", 1)[-1]
    return text if len(text) <= 24 else text[:23] + "…"


def _at(items: Sequence[Any], i: int) -> Any:
    return items[i] if i < len(items) else None


def _entry(key: str, short: str, flat: Mapping[str, Any], config: Mapping[str, Any] | None, run_dir: Any) -> str:
    """One qualifier entry, `short=value`; a provider's `_target_` by the shipped file it was selected by
    (`memory=http`), else by its class (`memory._target_=HttpProvider`)."""
    if key.endswith("._target_") and (option := target_option(config, key.removesuffix("._target_"), run_dir)):
        return f"{GROUP}={option}"
    return f"{short}={_value(key, flat.get(key))}"


def _run_qualifiers(runs: Sequence[int], metas: Sequence[Any], paths: Sequence[Path]) -> dict[int, str]:
    """The fewest config entries that tell `runs` apart, each `key=value` (short key, short value; never a secret, an
    endpoint or a provider's setting declared not to change results: reports/provider_config.py `unnamed`); else
    their directory names; else their places on the command line. Deterministic: sorted keys, argument order."""
    configs = [getattr(_at(metas, i), "config", None) or {} for i in runs]
    flat = [flatten(c) for c in configs]
    keys = naming_keys([metas[i] for i in runs], flat)
    if keys:
        chosen = fewest_keys(keys, flat)
        short = _short_keys(chosen)
        labels = [
            ", ".join(_entry(k, short[k], f, c, _at(paths, i)) for k in chosen) for i, f, c in zip(runs, flat, configs)
        ]
        if len(set(labels)) == len(labels):
            return dict(zip(runs, labels))
    names = [paths[i].name for i in runs]
    if len(set(names)) == len(names) and all(len(n) <= 40 for n in names):
        return dict(zip(runs, names))
    return {i: f"run {i + 1}" for i in runs}


def _provider_qualifier(c: Contestant, metas: Sequence[Any], paths: Sequence[Path]) -> str:
    """A memory contestant's own settings changed from its shipped config file, as a qualifier (`turns_per_add=12`;
    reports/provider_config.py); "" when none, when it drives no provider, or when its run's config is not given."""
    meta = _at(metas, c.run)
    if c.provider is None or meta is None:
        return ""
    found = provider_config(getattr(meta, "config", None), c.mode, _at(paths, c.run))
    return ", ".join(f"{k}={_value(k, v)}" for k, v in found.changed) if found else ""


def name_contestants(
    found: Sequence[Contestant], metas: Sequence[Any] = (), paths: Sequence[Path] = ()
) -> list[Contestant]:
    """`found` with every name distinct: a memory contestant carries its provider's own changed settings
    (`own_name`: its base name, qualified by them); a name met once stays as it is; names met more than once get
    the fewest qualifiers that tell them apart (their runs' config entries, then the mode within a run), after
    those settings, in the same parentheses. `metas` and `paths`: each run's run.json and directory, by its place."""
    found = [replace(c, config=_provider_qualifier(c, metas, paths)) for c in found]
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(found):
        groups.setdefault(c.own_name, []).append(i)
    names = [c.own_name for c in found]
    for idx in groups.values():
        if len(idx) < 2:
            continue
        runs = list(dict.fromkeys(found[i].run for i in idx))
        by_run = _run_qualifiers(runs, metas, paths) if len(runs) > 1 else {}
        per_run = {r: sum(found[i].run == r for i in idx) for r in runs}
        for i in idx:
            c = found[i]
            parts = [c.config] if c.config else []
            if by_run:
                parts.append(by_run[c.run])
            if per_run[c.run] > 1:  # two contestants of one run with the same provider: their config keys differ
                parts.append(c.mode)
            names[i] = f"{c.base} ({', '.join(parts)})"
    alike = {n for n in names if names.count(n) > 1}  # left only by a qualifier cut short: numbered in order
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        if n in alike:
            seen[n] = seen.get(n, 0) + 1
            names[i] = f"{n} #{seen[n]}"
    return [replace(c, name=n) for c, n in zip(found, names)]


def of_runs(runs: Sequence[Run], lead: str | None) -> list[Contestant]:
    """Every contestant of every run (reports.compare.Run), named: from each run's results (results.json) when it
    carries them, else computed from its records."""
    found = [
        c
        for i, r in enumerate(runs)
        for c in (
            contestants_from_results(r.results, lead, run=i)
            if r.results is not None
            else contestants_of(r.frame, r.records, lead, run=i)
        )
    ]
    return name_contestants(found, [r.meta for r in runs], [Path(r.path) for r in runs])


def run_labels(runs: Sequence[Run], contestants: Sequence[Contestant]) -> list[str] | None:
    """Each run labelled by its contestants when the runs pit different contestants against each other: their own
    names with their providers' own changed settings (`mem0`, `mem0 (turns_per_add=12)`, `long_context, summary`),
    or for runs of one contestant each its name as the table shows it (`mem0 (memory.top_k=20)` beside
    `mem0 (memory.top_k=10)`). None when every run holds the same contestants (a sweep: what differs is the config,
    and the config-entry labels say it) or the names cannot tell the runs apart."""
    mine = [[c for c in contestants if c.run == i] for i in range(len(runs))]
    bases = [", ".join(c.base for c in cs) for cs in mine]
    if len(set(bases)) < 2 or not all(bases):
        return None
    if len(set(bases)) == len(bases):
        return [", ".join(c.own_name for c in cs) for cs in mine]
    names = [cs[0].name if len(cs) == 1 else "" for cs in mine]
    return names if all(names) and len(set(names)) == len(names) else None


# --- ranking and the frontier -----------------------------------------------------------------------------------


def _better(a: float, b: float, hib: bool) -> bool:
    return a > b if hib else a < b


def frontier(contestants: Sequence[Contestant], *, higher_is_better: bool = True) -> set[str]:
    """Names of the contestants no other dominates on quality and tokens per question (Pareto): dominated means
    another is at least as good on both and strictly better on one. Contestants without a quality are off it."""
    scored = [c for c in contestants if c.quality is not None]
    out = set()
    for c in scored:
        assert c.quality is not None
        dominated = False
        for o in scored:
            assert o.quality is not None
            if o is c:
                continue
            q_ok = o.quality == c.quality or _better(o.quality, c.quality, higher_is_better)
            cost_ok = o.frontier_cost <= c.frontier_cost
            strictly = _better(o.quality, c.quality, higher_is_better) or o.frontier_cost < c.frontier_cost
            if q_ok and cost_ok and strictly:
                dominated = True
                break
        if not dominated:
            out.add(c.name)
    return out


def ranked(contestants: Sequence[Contestant], *, higher_is_better: bool = True) -> list[tuple[int | None, Contestant]]:
    """(rank, contestant), best first by quality; equal qualities share a rank (1, 2, 2, 4), and among them the
    fewest tokens per question come first, then the name. No quality: no rank, last."""
    sign = -1.0 if higher_is_better else 1.0

    def key(c: Contestant) -> tuple[int, float, float, str]:
        q = c.quality
        return (q is None, 0.0 if q is None else sign * round(q, 12), c.total_tokens, c.name)

    order = sorted(contestants, key=key)
    out: list[tuple[int | None, Contestant]] = []
    for pos, c in enumerate(order, start=1):
        if c.quality is None:
            out.append((None, c))
        elif out and out[-1][1].quality is not None and round(out[-1][1].quality or 0, 12) == round(c.quality, 12):
            out.append((out[-1][0], c))
        else:
            out.append((pos, c))
    return out


def _num(v: float | None, fmt: str) -> str | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


def table(contestants: Sequence[Contestant], lead: str | None, metrics: MetricCatalog) -> Table:
    """The ranked table (reports/memory_systems.py renders it as Markdown and HTML)."""
    hib = metrics.higher_is_better(lead) is not False if lead else True
    on = frontier(contestants, higher_is_better=hib)
    label = metrics.label(lead) if lead else "quality"
    fmt = metrics.fmt(lead) if lead else "{:.3f}"
    t = Table(
        "Contestants: quality, cost and latency",
        f"Every contestant, ranked by `{lead}` (mean [95 % bootstrap CI]; equal means share a rank). Per question "
        "(means): USD and LLM tokens (prompt + completion) of answer + ingest + retrieve, the split beside (the judge "
        "apart; ingest: a summary's generation, a memory provider's ingest such as mem0's extraction calls priced as "
        "the run's model, an index's embeddings; retrieve: a provider's query-time call and query vectors); n/a: "
        "unpriced, or a service that reports no cost. `cases`: scored (failed ones, e.g. a provider's errors, are "
        "counted apart and left out of every mean). p50 ingest and answer time over questions. `variant`: not run "
        "at the fair defaults. `frontier`: no other contestant is at least as good on quality with no more tokens "
        "per question and better on one (a service that reported no usage at all is not on it by being cheap).",
        [
            "rank",
            "contestant",
            "variant",
            "cases",
            f"{label} [95 % CI]",
            "$ / question",
            "$ answer / ingest / retrieve",
            "tokens / question",
            "tokens answer / ingest / retrieve",
            "p50 ingest ms",
            "p50 answer ms",
            "frontier",
        ],
    )
    for rank, c in ranked(contestants, higher_is_better=hib):
        quality = None
        if c.quality is not None:
            quality = f"{fmt.format(c.quality)} [{fmt.format(c.lo)}, {fmt.format(c.hi)}]"
        usd = _num(c.total_usd, "{:.6f}") or ("n/a (not reported)" if not c.spend_reported else None)
        t.rows.append(
            [
                rank,
                c.name,
                c.variant,
                f"{c.n} ({c.failed} failed)" if c.failed else c.n,
                quality,
                usd,
                " / ".join(_num(c.usd[p], "{:.6f}") or "n/a" for p in PHASES),
                f"{c.total_tokens:,.0f}" + ("" if c.spend_reported else " (usage not reported)"),
                " / ".join(f"{c.tokens[p]:,.0f}" for p in PHASES),
                _num(c.ingest_ms, "{:,.0f}"),
                _num(c.answer_ms, "{:,.0f}"),
                "yes" if c.name in on else "",
            ]
        )
    return t


def markdown(t: Table) -> list[str]:
    """The ranked table as a Markdown section (`lme-harness compare`'s first)."""
    return [f"## {t.title}", "", t.intro, "", _md(t)]


def _md(t: Table) -> str:
    lines = ["| " + " | ".join(md_cell(h) for h in t.headers) + " |", "|" + "---|" * len(t.headers)]
    lines += ["| " + " | ".join(md_cell(cell_text(v)) for v in r) + " |" for r in t.rows]
    return "\n".join(lines)


def html(t: Table, plot: Path | None) -> list[str]:
    """The ranked table and the frontier plot as an HTML section (`lme-harness compare`'s first)."""
    out = [
        f'<h2 id="contestants-section">{H.esc(t.title)}</h2>',
        f'<p class="muted">{H.esc(t.intro.replace("`", ""))}</p>',
        H.table(t.headers, [[_html_cell(v) for v in r] for r in t.rows], table_id="contestants"),
    ]
    if plot is not None:
        out.append(H.image(plot, "frontier", element_id="frontier-plot"))
    return out


def _html_cell(v: Any) -> str:
    """A cell shown as in Markdown; a number sorts by its value."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and not (isinstance(v, float) and math.isnan(v)):
        return H.num_cell(cell_text(v), v)
    return H.cell(cell_text(v))
