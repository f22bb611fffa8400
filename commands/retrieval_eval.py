"""`lme-harness retrieval-eval`: retrieval quality, latency and response cost, with no language model.

For each retriever preset, over the answerable cases of the configured dataset: turn-level
recall_any@k, recall_all@k, NDCG@k and session-level recall@k (k = 1, 3, 5, 10), query latency
percentiles, cold indexing time (and warm load time from the SQLite index store), and the size of one
default `session_search` response in o200k tokens with how often it carries an evidence turn.

Hydra overrides (the command uses configs/config.yaml):
    lme-harness retrieval-eval dataset=s
    lme-harness retrieval-eval dataset=s +retrieval_eval.presets=[bm25,default] +retrieval_eval.limit=10
    lme-harness retrieval-eval dataset=s +retrieval_eval.query_form=keywords   # model-style keyword queries
    lme-harness retrieval-eval dataset=s_dev +retrieval_eval.fold=B             # one fold (harness.retrieval.folds)
A preset is a file in configs/retrieval/; "current" means the run's own `retrieval` group.

Equal cost: every preset's response is also cut to the same per-case token budget, by default the `default`
preset's own response size for that case (`+retrieval_eval.budget=<preset>` or a number of tokens); the
"evidence at budget" column says how often the cut response still carries an evidence turn whole. The curve of
that rate against the budget, per question type, is written as retrieval_eval_budget_curve.{csv,png}.
At each response budget (`+retrieval_eval.budgets=[500,1000,2000,3000,4000]`, the default; `[]` for none) every
preset's response is built again with `retrieval.config.budget_tokens` at that budget and paired with the reference
there (commands/retrieval_budgets.py; retrieval_eval_budgets.csv).
Writes retrieval_eval.{json,md,png} and retrieval_eval_cases.jsonl to the run directory.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from commands import retrieval_budgets
from commands.retrieval_paired import below_against, below_lines, paired_against, paired_table
from harness import config_files
from harness.retrieval.evaluation import BY_TYPE_KEYS, KS, evaluate_case, summarize, summarize_by_type
from harness.retrieval.folds import FOLDS, select_fold

CONFIG_DIR = config_files.CONFIG_DIR / "retrieval"
DEFAULT_PRESETS = ("bm25", "trpc_parity", "hybrid", "default")
CURVE_BUDGETS = (100, 200, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 4000, 6000)
BUDGET_KEY = "evidence_at_budget"
TABLE_COLUMNS = (
    [f"turn_recall_any@{k}" for k in KS]
    + ["turn_recall_all@5", "turn_ndcg@5", "session_recall@1", "session_recall@5"]
    + [
        "query_ms_p50",
        "query_ms_p90",
        "index_s_mean",
        "index_s_max",
        "warm_load_s_mean",
        "response_tokens_mean",
        "response_tokens_max",
        "response_has_evidence",
        BUDGET_KEY,
        "response_hits_evidence",
    ]
)


def label_current(summary: dict[str, Any], config: Any) -> None:
    """ "current" (the run's retrieval node) names a preset by its `name` setting: what it changes from that preset,
    where that is a preset file (a name of the run's own is left as it is)."""
    from harness.retrieval.config import preset

    try:
        base = preset(config.name)
    except ValueError:
        return
    summary["changed_from"] = {"preset": config.name, "settings": changed_settings(config, base)}


def preset_config(name: str, current: Any) -> DictConfig:
    """The retrieval node of preset `name` (configs/retrieval/<name>.yaml), or `current` (the run's) for "current"."""
    if name == "current":
        if current is None:
            raise ValueError("retrieval preset 'current': the composed config has no retrieval node")
        return current
    from harness.retrieval.config import preset_node

    return preset_node(name)


def answerable(cases):
    """The cases retrieval can be scored on: not abstentions, with labelled evidence turns."""
    return [c for c in cases if not c.is_abstention and c.has_evidence_label]


def query_for(question: str, form: str) -> str:
    """The query a search runs with: the question itself, or its keyword form (what a model is told to
    write: "use specific entities/names/topics from the question")."""
    if form == "question":
        return question
    if form == "keywords":
        from harness.retrieval.text import keyword_tokens

        return " ".join(keyword_tokens(question)) or question
    raise ValueError(f"retrieval_eval.query_form must be 'question' or 'keywords', got {form!r}")


def evaluate_preset(
    name: str,
    rcfg: DictConfig,
    cases,
    events: dict[str, list],
    counter,
    store_dir: Path,
    query_form: str = "question",
    budgets: tuple[int, ...] = (),
) -> tuple[dict[str, Any], list[dict]]:
    """Cold pass (no store: indexing timed from scratch), then a warm pass loading from a fresh store.
    `events`: each case's events by question_id, built once for every preset. `budgets`: the model-like response is
    also built and measured at each of these `budget_tokens` (commands/retrieval_budgets.py)."""
    retriever = instantiate(OmegaConf.merge(rcfg, {"store": None}))
    configs = retrieval_budgets.budget_configs(retriever, budgets)
    results = [
        evaluate_case(
            retriever,
            c.question_id,
            events[c.question_id],
            query_for(c.question, query_form),
            counter=counter,
            budget_configs=configs,
        )
        for c in cases
    ]
    summary: dict[str, Any] = summarize(results)
    qtype = {c.question_id: c.question_type for c in cases}
    summary["by_type"] = summarize_by_type(results, qtype)
    # Store round trip: build into SQLite once, then time loading it with a new retriever (another run).
    store = str(store_dir / f"{name}.sqlite")
    warm_cfg = OmegaConf.merge(rcfg, {"store": store})
    builder = instantiate(warm_cfg)
    for c in cases:
        builder.index(events[c.question_id])
    loader = instantiate(warm_cfg)
    loads = []
    for c in cases:
        case_events = events[c.question_id]
        t0 = time.perf_counter()
        loader.index(case_events)
        loads.append(time.perf_counter() - t0)
    summary["warm_load_s_mean"] = sum(loads) / len(loads) if loads else float("nan")
    summary["embedder"] = getattr(retriever.embedder, "identity", None)
    summary["settings"] = changed_settings(retriever.config)
    if name == "current":
        label_current(summary, retriever.config)
    rows = [
        {
            "preset": name,
            "question_id": r.question_id,
            "question_type": qtype[r.question_id],
            "n_events": r.n_events,
            "index_s": r.index_s,
            "query_ms": r.query_ms,
            "path": r.path,
            "ranked": r.ranked,
            "response_tokens": r.response_tokens,
            "response_has_evidence": r.response_has_evidence,
            "response_hits_evidence": r.response_hits_evidence,
            "evidence_tokens": r.evidence_tokens,
            "at_budget": {str(b): m for b, m in r.at_budget.items()},
            **r.metrics,
        }
        for r in results
    ]
    return summary, rows


def changed_settings(config: Any, base: Any = None) -> dict[str, Any]:
    """The `SearchConfig` settings of `config` that differ from `base` (None: configs/search/default.yaml's
    defaults), so every evaluated preset, "current" included, is labelled by what it sets."""
    base = type(config)() if base is None else base
    return {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if getattr(config, f.name) != getattr(base, f.name)
    }


def presets_table(summaries: dict[str, dict[str, Any]]) -> str:
    """What each evaluated preset is: its settings other than the search defaults, and for "current" (the run's
    retrieval node) what it changes from the preset it names."""
    lines = ["| preset | settings other than configs/search/default.yaml |", "|---|---|"]
    for name, s in summaries.items():
        settings = s.get("settings") or {}
        cell = ", ".join(f"{k}={v}" for k, v in settings.items()) or "(none)"
        if name == "current" and "changed_from" in s:
            changed = ", ".join(f"{k}={v}" for k, v in s["changed_from"]["settings"].items()) or "nothing"
            cell = f"preset `{s['changed_from']['preset']}` with {changed}; in all: {cell}"
        lines.append(f"| {name} | {cell} |")
    return "\n".join(lines)


def markdown_table(summaries: dict[str, dict[str, Any]]) -> str:
    cols = [c for c in TABLE_COLUMNS if any(c in s for s in summaries.values())]
    lines = ["| preset | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, s in summaries.items():
        cells = []
        for c in cols:
            v = s.get(c)
            cells.append("" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def by_type_table(summaries: dict[str, dict[str, Any]]) -> str:
    """Per question type and preset: cases, recall_any@1/@5, evidence text in the response (native and cut to
    the budget), response tokens."""
    keys = (*BY_TYPE_KEYS[:3], BUDGET_KEY, *BY_TYPE_KEYS[3:])
    lines = [
        "| question type | preset | cases | " + " | ".join(keys) + " |",
        "|---" * (len(keys) + 3) + "|",
    ]
    types = sorted({t for s in summaries.values() for t in s.get("by_type", {})})
    for t in types:
        for name, s in summaries.items():
            row = s.get("by_type", {}).get(t)
            if row is None:
                continue
            cells = [
                f"{row[k]:.3f}"
                if k in row and not k.startswith("response_tokens")
                else (f"{row[k]:.0f}" if k in row else "")
                for k in keys
            ]
            lines.append(f"| {t} | {name} | {row['cases']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(summaries: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for i, (name, s) in enumerate(summaries.items()):
        axes[0].plot(KS, [s[f"turn_recall_any@{k}"] for k in KS], marker="o", label=name, color=f"C{i}")
    axes[0].set(
        xlabel="k", ylabel="turn recall_any@k", title="Evidence turn in the top k", xticks=list(KS), ylim=(0, 1.02)
    )
    axes[0].grid(alpha=0.3)
    axes[0].legend()
    for i, (name, s) in enumerate(summaries.items()):
        if "response_tokens_mean" in s:
            axes[1].scatter(s["response_tokens_mean"], s["response_has_evidence"], s=60, color=f"C{i}")
            axes[1].annotate(
                name, (s["response_tokens_mean"], s["response_has_evidence"]), textcoords="offset points", xytext=(5, 5)
            )
    axes[1].set(
        xscale="log",
        xlabel="mean o200k tokens of one session_search response",
        ylabel="responses containing an evidence turn",
        title="Token cost of evidence",
        ylim=(0, 1.02),
    )
    axes[1].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def check_budget(budget: Any, presets: list[str]) -> None:
    """The budget is a positive number of tokens or one of the evaluated presets (checked before any work)."""
    if budget is None:
        return
    if isinstance(budget, bool) or not isinstance(budget, (int, float, str)):
        raise ValueError(f"retrieval_eval.budget must be a preset name or a number of tokens, got {budget!r}")
    if isinstance(budget, (int, float)) and budget <= 0:
        raise ValueError(f"retrieval_eval.budget must be a positive number of tokens, got {budget!r}")
    if isinstance(budget, str) and budget not in presets:
        raise ValueError(f"retrieval_eval.budget={budget!r}: not one of the evaluated presets {presets}")


def case_budgets(rows: list[dict], budget: Any) -> dict[str, int] | None:
    """question_id → token budget: a preset's own response size per case, or one number for every case."""
    if budget is None:
        return None
    if isinstance(budget, str):
        return {r["question_id"]: int(r["response_tokens"]) for r in rows if r["preset"] == budget}
    return {r["question_id"]: int(budget) for r in rows}


def within(row: dict, budget: int) -> bool:
    """Whether the preset's response cut to `budget` tokens still holds an evidence turn whole."""
    return row.get("evidence_tokens") is not None and row["evidence_tokens"] <= budget


def paired_metrics(budgets: dict[str, int] | None) -> dict[str, Callable[[dict], float]]:
    """What the paired comparison compares, as each case row's 0/1 value: @5, evidence in the response and, where
    there is a budget, evidence at it."""
    metrics: dict[str, Callable[[dict], float]] = {
        "turn_recall_any@5": lambda r: float(r["turn_recall_any@5"]),
        "response_has_evidence": lambda r: float(bool(r["response_has_evidence"])),
    }
    if budgets is not None:
        metrics[BUDGET_KEY] = lambda r: float(within(r, budgets[r["question_id"]]))
    return metrics


def add_budget_figures(summaries: dict[str, dict[str, Any]], rows: list[dict], budgets: dict[str, int]) -> None:
    """Evidence at the per-case budget, overall and by type, into each preset's summary."""
    for name, s in summaries.items():
        mine = [r for r in rows if r["preset"] == name]
        s[BUDGET_KEY] = sum(within(r, budgets[r["question_id"]]) for r in mine) / len(mine)
        s["budget_tokens_mean"] = sum(budgets[r["question_id"]] for r in mine) / len(mine)
        for t, row in s.get("by_type", {}).items():
            of_type = [r for r in mine if r["question_type"] == t]
            row[BUDGET_KEY] = sum(within(r, budgets[r["question_id"]]) for r in of_type) / len(of_type)


def budget_curve(rows: list[dict], budgets: tuple[int, ...] = CURVE_BUDGETS) -> list[dict[str, Any]]:
    """Per preset, question type (and "all") and budget: the share of responses that, cut to the budget, carry
    an evidence turn whole."""
    out = []
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    types = sorted({r["question_type"] for r in rows})
    for name in presets:
        for t in [*types, "all"]:
            mine = [r for r in rows if r["preset"] == name and (t == "all" or r["question_type"] == t)]
            for b in budgets:
                out.append(
                    {
                        "preset": name,
                        "question_type": t,
                        "budget_tokens": b,
                        "cases": len(mine),
                        "evidence_rate": sum(within(r, b) for r in mine) / len(mine),
                    }
                )
    return out


def plot_budget_curve(curve: list[dict[str, Any]], summaries: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    types = list(dict.fromkeys(c["question_type"] for c in curve))
    ncol = min(3, len(types))
    nrow = -(-len(types) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.4 * nrow), squeeze=False)
    for ax, t in zip(axes.flat, types):
        for i, name in enumerate(summaries):
            pts = [c for c in curve if c["preset"] == name and c["question_type"] == t]
            ax.plot([c["budget_tokens"] for c in pts], [c["evidence_rate"] for c in pts], marker=".", color=f"C{i}")
            native = summaries[name]["by_type"].get(t) if t != "all" else summaries[name]
            if native and "response_tokens_mean" in native:
                ax.scatter(native["response_tokens_mean"], native["response_has_evidence"], color=f"C{i}", marker="x")
        ax.set(title=f"{t} (n={pts[0]['cases'] if pts else 0})", xscale="log", ylim=(0, 1.02))
        ax.set_xlabel("response cut to N o200k tokens")
        ax.set_ylabel("evidence turn whole in it")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(types) :]:
        ax.axis("off")
    handles = [plt.Line2D([], [], color=f"C{i}", marker=".", label=n) for i, n in enumerate(summaries)]
    fig.legend(handles=handles, loc="lower right", title="x: native response (mean)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_retrieval_eval(cfg: DictConfig, run_dir: Path | str | None = None) -> Path:
    """Evaluate every configured preset; returns the Markdown report's path."""
    from harness.session.tokens import o200k_counter

    opts = cfg.get("retrieval_eval") or {}
    presets = list(opts.get("presets") or DEFAULT_PRESETS)
    budget = opts.get("budget", "default" if "default" in presets else None)
    check_budget(budget, presets)
    against = opts.get("against", "bm25" if "bm25" in presets else None)
    if against is not None and against not in presets:
        raise ValueError(f"retrieval_eval.against={against!r}: not one of the evaluated presets {presets}")
    response_budgets = retrieval_budgets.check_budgets(opts.get("budgets", retrieval_budgets.DEFAULT_BUDGETS))
    fold = opts.get("fold")
    if fold is not None and str(fold).upper() not in FOLDS:
        raise ValueError(f"retrieval_eval.fold must be one of {FOLDS} (or null), got {fold!r}")
    run_dir = Path(run_dir or opts.get("out_dir") or "runs/retrieval_eval")
    run_dir.mkdir(parents=True, exist_ok=True)
    cases, provenance = instantiate(cfg.dataset).load()
    cases = answerable(cases)
    if fold is not None:
        cases = select_fold(cases, str(fold))
    if opts.get("limit"):
        cases = cases[: int(opts["limit"])]
    if not cases:
        raise ValueError(f"dataset {provenance.get('source')}: no answerable case (has_answer labels) to evaluate")
    counter = o200k_counter()
    query_form = str(opts.get("query_form") or "question")
    summaries: dict[str, dict[str, Any]] = {}
    rows: list[dict] = []
    events = {c.question_id: c.events() for c in cases}
    with tempfile.TemporaryDirectory(prefix="lme-retrieval-eval-") as tmp:
        for name in presets:
            s, r = evaluate_preset(
                name,
                preset_config(name, cfg.get("retrieval")),
                cases,
                events,
                counter,
                Path(tmp),
                query_form,
                response_budgets,
            )
            summaries[name] = s
            rows += r
    budgets = case_budgets(rows, budget)
    if budgets is not None:
        add_budget_figures(summaries, rows, budgets)
    paired = paired_against(rows, against, paired_metrics(budgets)) if against is not None else {}
    below = below_against(paired)
    curve = budget_curve(rows)
    at_budgets = retrieval_budgets.summaries(rows, response_budgets)
    paired_at = retrieval_budgets.paired(rows, response_budgets, against) if against is not None else {}
    retrieval_budgets.write_csv(at_budgets, run_dir / "retrieval_eval_budgets.csv")
    with (run_dir / "retrieval_eval_budget_curve.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["preset", "question_type", "budget_tokens", "cases", "evidence_rate"])
        w.writeheader()
        w.writerows(curve)
    plot_budget_curve(curve, summaries, run_dir / "retrieval_eval_budget_curve.png")
    (run_dir / "retrieval_eval_cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "retrieval_eval.json").write_text(
        json.dumps(
            {
                "dataset": provenance,
                "cases": len(cases),
                "fold": None if fold is None else str(fold).upper(),
                "query_form": query_form,
                "budget": budget,
                "against": against,
                "paired": paired,
                "below_against": below,
                "presets": summaries,
                "budgets": list(response_budgets),
                "at_budgets": {b: {"presets": at_budgets[b], **paired_at.get(b, {})} for b in at_budgets},
            },
            indent=1,
            default=str,
        )
    )
    plot(summaries, run_dir / "retrieval_eval.png")
    md = run_dir / "retrieval_eval.md"
    md.write_text(
        f"# Retrieval evaluation\n\nDataset: `{provenance.get('source')}` ({len(cases)} answerable cases; "
        f"query: the {'question' if query_form == 'question' else 'keywords of the question'}; "
        f"whole haystack behind the summary boundary"
        + (f"; fold {str(fold).upper()} only" if fold is not None else "")
        + (
            f"; {BUDGET_KEY}: each response cut to "
            + (
                f"the `{budget}` preset's response size (o200k tokens) for the same case"
                if isinstance(budget, str)
                else f"{budget} o200k tokens"
            )
            if budgets is not None
            else ""
        )
        + ").\n\n"
        + markdown_table(summaries)
        + "\n\n## Presets\n\n"
        + presets_table(summaries)
        + "\n\n## Per question type\n\n"
        + by_type_table(summaries)
        + (
            f"\n\n## Paired against `{against}`\n\nThe same questions: Δ = the preset's share minus `{against}`'s, a "
            f"percentile bootstrap interval over questions (2,000 resamples, seed 0), and the questions where only the "
            f"preset (won) or only `{against}` (lost) has it.\n\n"
            + below_lines(below, str(against))
            + "\n\n"
            + paired_table(paired, str(against))
            if paired
            else ""
        )
        + (retrieval_budgets.markdown(at_budgets, paired_at, against) if response_budgets else "")
        + "\n\n![recall and token cost](retrieval_eval.png)\n"
        + "\n![evidence against the response budget](retrieval_eval_budget_curve.png)"
        + " (numbers: retrieval_eval_budget_curve.csv)\n"
    )
    return md


def main(argv: list[str] | None = None) -> None:
    """`python -m commands.retrieval_eval [overrides]` (same as `lme-harness retrieval-eval`)."""
    import sys

    from hydra import compose, initialize_config_dir

    overrides = list(sys.argv[1:] if argv is None else argv)
    with initialize_config_dir(config_dir=str(CONFIG_DIR.parent), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    out = run_retrieval_eval(cfg)
    print(out.read_text())


if __name__ == "__main__":
    main()
