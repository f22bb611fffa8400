"""Paired comparison of runs (or of two modes of one run) over the same cases.

Cases are paired by `question_id` (and `mode` between runs); only pairs scored in both are used. Per metric:
paired-bootstrap CI of the mean delta B − A, win/tie/loss counts, and McNemar's exact test for binary metrics
(EM, judge accuracy). Deltas are B − A; "win" means B is better in the metric's own direction.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.records import RECORDS_FILE
from harness.run_meta import RunMeta
from reports.aggregate import modes, read_run
from reports.config_keys import flatten
from reports.cost import PriceTable
from reports.metrics import BUILTIN, MetricCatalog, catalog_of
from reports.provider_config import unnamed
from reports.results_file import Results
from reports.run_frame import RunFrame
from reports.stats import DEFAULT_N_BOOT, DEFAULT_SEED, mcnemar, paired_bootstrap_ci, win_loss_tie

COST_SIDE = (
    "final_prompt_tokens",
    "prompt_tokens_total",
    "total_tokens",  # every LLM token of the question: answer + ingest + retrieve (reports/phases.py)
    "ingest_tokens",
    "summary_tokens",
    "n_search",
    "n_load",
    "query_ms",
    "query_ms_reference",
    "cost_total",
)


def compare_keys(metrics: MetricCatalog = BUILTIN) -> tuple[str, ...]:
    """What a comparison shows by default: every quality metric of the runs first, then what it costs."""
    return (*metrics.quality_keys, *COST_SIDE)


COMPARE_KEYS: tuple[str, ...] = compare_keys()  # the built-in scorers' (runs with other scorers: compare_keys)
# Config keys that never explain a difference in results.
_NOISE_KEYS = ("run.name", "run.progress", "run.concurrency", "client.concurrency", "cache.")
_LOOPBACK = ("http://127.0.0.1", "http://localhost")


class CompareError(ValueError):
    pass


@dataclass
class Run:
    path: Path
    label: str
    frame: RunFrame
    meta: RunMeta = field(default_factory=lambda: RunMeta.from_json({}))
    records: list[dict[str, Any]] = field(default_factory=list)  # as read (the source of the frame)
    results: Results | None = None  # its results.json (reports/run_results.py load_results), when read

    @property
    def df(self) -> pd.DataFrame:
        return self.frame.df


def expand_run_dirs(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """Run directories from arguments: a run dir itself, or a sweep dir (e.g. `runs/x/multirun`) whose
    subdirectories hold runs. Returns (run dirs, notes about skipped paths)."""
    runs: list[Path] = []
    notes: list[str] = []
    for raw in paths:
        p = Path(raw)
        if (p / RECORDS_FILE).exists():
            runs.append(p)
        elif p.is_dir():
            subs = sorted(d for d in p.iterdir() if (d / RECORDS_FILE).exists())
            if not subs:  # a named directory that holds no run is a mistake, not something to drop quietly
                raise CompareError(f"{p}: not a run directory (no records.jsonl in it or its subdirectories)")
            runs.extend(subs)
        elif p.exists():
            notes.append(f"{p}: not a run directory; skipped")  # e.g. multirun.yaml from a shell glob
        else:
            raise FileNotFoundError(f"{p}: no such run directory")
    seen: set[Path] = set()
    unique = []
    for r in runs:  # the first of each resolved path, in order
        if r.resolve() not in seen:
            seen.add(r.resolve())
            unique.append(r)
    return unique, notes


def config_diff(a: RunMeta | Mapping[str, Any], b: RunMeta | Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, value in A, value in B) for every result-relevant config entry that differs."""
    fa, fb = flatten(RunMeta.of(a).config or {}), flatten(RunMeta.of(b).config or {})
    keys = sorted(set(fa) | set(fb))

    def noise(k: str) -> bool:
        if any(k == n or k.startswith(n) for n in _NOISE_KEYS):
            return True
        # a local server's port changes every run
        return k.endswith("base_url") and all(str(v).startswith(_LOOPBACK) for v in (fa.get(k), fb.get(k)))

    return [(k, fa.get(k), fb.get(k)) for k in keys if fa.get(k) != fb.get(k) and not noise(k)]


def _short(v: Any, n: int) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return text if len(text) <= n else text[: n - 1] + "…"


def fewest_keys(
    keys: Sequence[str], flat: Sequence[Mapping[str, Any]], *, order: Callable[[str], Any] | None = None
) -> list[str]:
    """The fewest of `keys` (shallowest first, or in `order`) that tell the runs apart: a provider's name repeated
    under the contestant (`mode.memory.provider.name`) adds nothing to `memory.name`. All of them when none suffice."""

    def distinct(ks: Sequence[str]) -> int:
        return len({tuple(f.get(k) for k in ks) for f in flat})

    chosen: list[str] = []
    for k in sorted(keys, key=order or (lambda k: (k.count("."), k))):
        if distinct([*chosen, k]) > distinct(chosen):
            chosen.append(k)
        if distinct(chosen) == len(flat):
            return chosen
    return list(keys)


def naming_keys(metas: Sequence[RunMeta | Mapping[str, Any]], flat: Sequence[Mapping[str, Any]]) -> list[str]:
    """The config entries that differ between the runs (`metas`, `flat` their configs as dotted keys) and may name
    them: never a secret, an endpoint or a provider's setting declared not to change results (provider_config
    `unnamed`). Read by the run labels here and by the ranked table's qualifiers (reports/standings.py)."""
    keys: list[str] = []
    for m in metas[1:]:
        keys += [k for k, _, _ in config_diff(metas[0], m) if k not in keys]
    return [k for k in keys if not unnamed(k, [f.get(k) for f in flat])]


def _labels(paths: Sequence[Path], metas: Sequence[RunMeta]) -> list[str]:
    """Name runs by the config entries that tell them apart (e.g. `prompt.name=state_recovery`), else by directory
    (a Hydra sweep names its run directories after every override, which is long). Where a service is served, its
    key variable and a provider's timeout or concurrency never name a run: they say nothing of its results."""
    flat = [flatten(m.config or {}) for m in metas]
    keys = naming_keys(metas, flat)
    # the `name`s that tell the runs apart (prompt.name says it all for a prompt variant), else the fewest entries
    # that do, a `name` first, then the shallowest
    named = [k for k in keys if k.split(".")[-1] == "name"]
    for chosen in (fewest_keys(named, flat), fewest_keys(keys, flat, order=_names_first)):
        labels = [",".join(_entry(k, f) for k in chosen) for f in flat]
        if chosen and len(set(labels)) == len(labels):
            return labels
    names = [p.name for p in paths]
    if len(set(names)) == len(names):
        return names
    return [f"{p.parent.name}/{p.name}" for p in paths]


def _names_first(key: str) -> tuple[bool, int, str]:
    """A `name` entry before any other, then the shallowest."""
    return key.split(".")[-1] != "name", key.count("."), key


def _entry(key: str, flat: Mapping[str, Any]) -> str:
    """`key=value`; a config with no `name` beside its `_target_` (e.g. configs/memory/full_context.yaml, whose
    fingerprint a new key would change) is named by the target's class: `memory._target_=FullContextProvider`."""
    target = key[: -len("name")] + "_target_"
    if key.split(".")[-1] == "name" and flat.get(key) is None and isinstance(flat.get(target), str):
        return f"{target}={flat[target].rsplit('.', 1)[-1]}"
    return f"{key}={_short(flat.get(key), 40)}"


def load_runs(paths: Sequence[Path], *, prices: PriceTable | None = None) -> list[Run]:
    runs = [read_run(p, prices=prices) for p in paths]
    metas = [r.meta for r in runs]
    return [Run(p, label, r.frame, r.meta, r.records) for p, label, r in zip(paths, _labels(paths, metas), runs)]


def paired_frame(a: pd.DataFrame, b: pd.DataFrame, *, on: Sequence[str] = ("question_id", "mode")) -> pd.DataFrame:
    """Inner join of two record frames on `on`, scored cases only; columns suffixed _a / _b."""
    ka = a[a["status"] == "ok"].copy()
    kb = b[b["status"] == "ok"].copy()
    for k in ka, kb:
        k["mode"] = k["mode"].astype(str)
    return ka.merge(kb, on=list(on), suffixes=("_a", "_b"), how="inner")


def paired_stats(
    pairs: pd.DataFrame,
    keys: Sequence[str] | None = None,
    *,
    group: str | None = "mode",
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    metrics: MetricCatalog = BUILTIN,
) -> pd.DataFrame:
    """One row per (group, metric): n, mean A, mean B, delta with CI, win/tie/loss and McNemar for binary metrics."""
    keys = compare_keys(metrics) if keys is None else keys
    rows = []
    groups = [(None, pairs)] if group is None else [(g, p) for g, p in pairs.groupby(group, sort=False)]
    for g, part in groups:
        for k in keys:
            ca, cb = f"{k}_a", f"{k}_b"
            if ca not in part or cb not in part:
                continue
            xa, xb = part[ca].to_numpy(dtype=float), part[cb].to_numpy(dtype=float)
            keep = ~(pd.isna(xa) | pd.isna(xb))
            if not keep.any():
                continue
            hib = metrics.higher_is_better(k)
            est = paired_bootstrap_ci(xa, xb, n_boot=n_boot, seed=seed)
            wlt = win_loss_tie(xa, xb, higher_is_better=True if hib is None else hib)
            row: dict[str, Any] = {
                "group": g,
                "metric": k,
                "n": est.n,
                "mean_a": float(xa[keep].mean()),
                "mean_b": float(xb[keep].mean()),
                "delta": est.mean,
                "lo": est.lo,
                "hi": est.hi,
                "wins": wlt.wins,
                "ties": wlt.ties,
                "losses": wlt.losses,
                "higher_is_better": hib,
                "mcnemar_b": None,
                "mcnemar_c": None,
                "p_value": None,
                "agreement": None,
                "kappa": None,
            }
            if k in metrics.binary_keys:
                m = mcnemar(xa, xb)
                row.update(mcnemar_b=m.b, mcnemar_c=m.c, p_value=m.p_value, agreement=m.agreement, kappa=m.kappa)
            rows.append(row)
    return pd.DataFrame(rows)


def compare_modes(
    frame: RunFrame, mode_a: str, mode_b: str, keys: Sequence[str] | None = None, **kw: Any
) -> pd.DataFrame:
    """Two modes of one run, paired by question_id (e.g. the reference's ondemand vs summary win/loss)."""
    df = frame.df
    a = df[df["mode"].astype(str) == mode_a].drop(columns=["mode"])
    b = df[df["mode"].astype(str) == mode_b].drop(columns=["mode"])
    a, b = a.assign(mode=f"{mode_b} vs {mode_a}"), b.assign(mode=f"{mode_b} vs {mode_a}")
    kw.setdefault("metrics", frame.metrics)
    return paired_stats(paired_frame(a, b), keys, **kw)


def _fmt(v: Any, key: str, metrics: MetricCatalog = BUILTIN) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return metrics.fmt(key).format(v)


def _fmt_delta(r: Mapping[str, Any], metrics: MetricCatalog = BUILTIN) -> str:
    signed = metrics.fmt(r["metric"]).replace("{:", "{:+")
    return f"{signed.format(r['delta'])} [{signed.format(r['lo'])}, {signed.format(r['hi'])}]"


def _sig(r: Mapping[str, Any]) -> str:
    """Marks a delta whose CI excludes 0, in the direction of better (▲) or worse (▼)."""
    if r["lo"] > 0 or r["hi"] < 0:
        better = (r["lo"] > 0) == (r["higher_is_better"] is not False)
        return " ▲" if better else " ▼"
    return ""


def mcnemar_cell(r: Mapping[str, Any]) -> str:
    if r.get("p_value") is None or (isinstance(r.get("p_value"), float) and math.isnan(r["p_value"])):
        return ""
    cell = f"{int(r['mcnemar_b'])}/{int(r['mcnemar_c'])}, p={r['p_value']:.3g}"
    agreement, kappa = r.get("agreement"), r.get("kappa")
    if agreement is not None and not math.isnan(agreement):
        cell += f"; agree {agreement:.0%}, κ=" + (
            "n/a" if kappa is None or math.isnan(kappa) else f"{round(kappa, 2) + 0.0:.2f}"
        )
    return cell


def markdown_paired(stats: pd.DataFrame, *, label_a: str, label_b: str, metrics: MetricCatalog = BUILTIN) -> str:
    head = [
        "mode",
        "metric",
        "n",
        label_a,
        label_b,
        "Δ (B − A) [95 % CI]",
        "win/tie/loss",
        "McNemar b/c, p; agreement, κ",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in stats.to_dict("records"):
        label = metrics.label(r["metric"])
        arrow = {True: " ↑", False: " ↓"}.get(r["higher_is_better"], "")
        lines.append(
            "| "
            + " | ".join(
                [
                    str(r["group"]),
                    f"{label}{arrow}",
                    str(r["n"]),
                    _fmt(r["mean_a"], r["metric"], metrics),
                    _fmt(r["mean_b"], r["metric"], metrics),
                    _fmt_delta(r, metrics) + _sig(r),
                    f"{r['wins']}/{r['ties']}/{r['losses']}",
                    mcnemar_cell(r),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


@dataclass
class PairResult:
    a: Run
    b: Run
    stats: pd.DataFrame
    diff: list[tuple[str, Any, Any]]
    warnings: list[str]
    by_type: pd.DataFrame | None = None  # paired stats per "mode / question_type"; None unless several types
    metrics: MetricCatalog = BUILTIN  # both runs' metric specs


def compare_runs(
    runs: Sequence[Run], keys: Sequence[str] | None = None, *, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED
) -> list[PairResult]:
    """The first run is the baseline A; every other run is compared with it as B."""
    if len(runs) < 2:
        raise CompareError(f"compare needs at least two runs, got {len(runs)}")
    base = runs[0]
    metrics = catalog_of(*(r.meta for r in runs))
    keys = compare_keys(metrics) if keys is None else keys
    out = []
    for other in runs[1:]:
        warnings = []
        da, db = base.meta.dataset_sha256, other.meta.dataset_sha256
        if da and db and da != db:
            warnings.append(
                f"different datasets (sha256 {da[:12]}… vs {db[:12]}…): cases are paired by question_id only"
            )
        pairs = paired_frame(base.df, other.df)
        if pairs.empty:
            raise CompareError(f"{base.path} and {other.path}: no scored case × mode in common")
        stats = paired_stats(pairs, keys, n_boot=n_boot, seed=seed, metrics=metrics)
        # mode order as in the runs
        order = {m: i for i, m in enumerate(modes(base.df))}
        stats = stats.sort_values("group", key=lambda s: s.map(lambda m: order.get(m, 99)), kind="stable")  # noqa: B023
        only_a = len(base.df[base.df["status"] == "ok"]) - len(pairs)
        only_b = len(other.df[other.df["status"] == "ok"]) - len(pairs)
        if only_a or only_b:
            warnings.append(f"unpaired scored cases left out: {only_a} only in A, {only_b} only in B")
        out.append(
            PairResult(
                base,
                other,
                stats.reset_index(drop=True),
                config_diff(base.meta, other.meta),
                warnings,
                _by_type(pairs, keys, n_boot=n_boot, seed=seed, metrics=metrics),
                metrics,
            )
        )
    return out


def _by_type(pairs: pd.DataFrame, keys: Sequence[str], **kw: Any) -> pd.DataFrame | None:
    """The same paired statistics within each (mode, question type), when the runs hold several types."""
    if "question_type_a" not in pairs or pairs["question_type_a"].nunique(dropna=True) < 2:
        return None
    grouped = pairs.assign(mode_type=pairs["mode"].astype(str) + " / " + pairs["question_type_a"].astype(str))
    grouped = grouped.sort_values(["mode_type"], kind="stable")
    return paired_stats(grouped, keys, group="mode_type", **kw).reset_index(drop=True)


def pair_markdown(p: PairResult) -> str:
    lines = [f"## B = `{p.b.label}` vs A = `{p.a.label}`", "", f"- A: `{p.a.path}`", f"- B: `{p.b.path}`"]
    if p.diff:
        lines.append(
            "- config differences: "
            + "; ".join(
                f"`{k}`: {_short(json.dumps(va, default=str), 80)} → {_short(json.dumps(vb, default=str), 80)}"
                for k, va, vb in p.diff[:12]
            )
        )
    else:
        lines.append("- config differences: none recorded")
    lines += [f"- note: {w}" for w in p.warnings]
    lines += ["", markdown_paired(p.stats, label_a="A", label_b="B", metrics=p.metrics), ""]
    if p.by_type is not None and not p.by_type.empty:
        lines += [
            "### Per question type (mode / type)",
            "",
            markdown_paired(p.by_type, label_a="A", label_b="B", metrics=p.metrics),
            "",
        ]
    return "\n".join(lines)


COMPARE_NOTE = (
    "Paired by question_id and mode over cases scored in both runs. Δ = B − A with a paired-bootstrap 95 % CI "
    "(resampling cases; 2000 resamples, seed 0); ▲/▼: the CI excludes 0 and B is better/worse. win/tie/loss "
    "counts cases where B is better/equal/worse in the metric's direction (↑ higher is better, ↓ lower). "
    "McNemar: b = A right & B wrong, c = A wrong & B right, exact two-sided p; agreement = share of cases where A and B agree, κ = Cohen's kappa (agreement beyond chance: how interchangeable two judges are). Judge metrics pair only cases "
    "judged in both (not_run is left out, never counted as wrong)."
)


def dumps_json(pairs: Sequence[PairResult]) -> str:
    return json.dumps(
        [
            {
                "a": str(p.a.path),
                "b": str(p.b.path),
                "config_diff": p.diff,
                "warnings": p.warnings,
                "rows": p.stats.to_dict("records"),
                **({"rows_by_type": p.by_type.to_dict("records")} if p.by_type is not None else {}),
            }
            for p in pairs
        ],
        indent=1,
        default=str,
    )
