"""`lme-harness retrieval-eval` at a list of response budgets (`+retrieval_eval.budgets`, issue 40).

Each preset's model-like response is built again with `retrieval.config.budget_tokens` set to each budget (the
preset's own way of filling it: docs/retrieval.md "The response budget"), and measured there: an evidence turn whole
in it, an evidence turn among its hits (every hit the budget holds: recall at the k that fits), among its first five
hits, and its tokens. Every preset is then paired with the reference (`bm25`) on the same questions at each budget
(commands/retrieval_paired.py), so "at or above `bm25` at every budget" is an empty list of cells below it.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from commands.retrieval_paired import below_against, below_lines, paired_against, paired_table

DEFAULT_BUDGETS = (500, 1000, 2000, 3000, 4000)
# What is measured at each budget: each case row's value (commands/retrieval_paired.py pairs them).
METRICS = ("evidence", "hit", "turn_recall_any@5")
LABELS = {"evidence": "evidence whole", "hit": "evidence hit", "turn_recall_any@5": "@5"}
Row = dict[str, Any]


def value(metric: str) -> Callable[[Row], float]:
    """A case row's 0/1 value of `metric` at one budget (what commands/retrieval_paired.py pairs)."""
    return lambda r: float(bool(r[metric]))


VALUES = {m: value(m) for m in METRICS}


def check_budgets(budgets: Any) -> tuple[int, ...]:
    """`retrieval_eval.budgets` as a tuple of token budgets (checked before any work): whole numbers at or above
    `SearchConfig.budget_tokens`' minimum, each once."""
    from harness.retrieval.config import SearchConfig

    if budgets is None:
        return ()
    if isinstance(budgets, (str, bytes)) or not hasattr(budgets, "__iter__"):
        raise ValueError(f"retrieval_eval.budgets must be a list of token budgets, got {budgets!r}")
    out = tuple(budgets)
    field = next(f for f in dataclasses.fields(SearchConfig) if f.name == "budget_tokens")
    minimum = field.metadata["setting"]["minimum"]
    for b in out:
        if isinstance(b, bool) or not isinstance(b, int) or b < minimum:
            raise ValueError(f"retrieval_eval.budgets: {b!r} is not a whole number of tokens ≥ {minimum}")
    if len(set(out)) != len(out):
        raise ValueError(f"retrieval_eval.budgets lists a budget twice: {list(out)}")
    return out


def budget_configs(retriever: Any, budgets: tuple[int, ...]) -> dict[int, Any]:
    """budget → the retriever's `SearchConfig` with that `budget_tokens`, each checked as a run would check it (a
    retriever built with it: a `budget_fill` that cannot rank over this index fails here, before any case)."""
    from harness.retrieval.retriever import Retriever

    out = {}
    for b in budgets:
        config = dataclasses.replace(retriever.config, budget_tokens=b)
        Retriever(config, embedder=retriever.embedder, max_embed_tokens=retriever.max_embed_tokens)
        out[b] = config
    return out


def budget_rows(rows: list[Row], budget: int) -> list[Row]:
    """Each case row's figures at `budget`, in the shape commands/retrieval_paired.py pairs."""
    return [
        {"preset": r["preset"], "question_id": r["question_id"], "question_type": r["question_type"], **m}
        for r in rows
        if (m := r["at_budget"].get(str(budget))) is not None
    ]


def summaries(rows: list[Row], budgets: tuple[int, ...]) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """budget → preset → question type (and "all") → cases, each metric's share, mean tokens, and the share of
    responses the budget held whole (`complete`)."""
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for b in budgets:
        at = budget_rows(rows, b)
        by_preset: dict[str, dict[str, dict[str, float]]] = {}
        for name in dict.fromkeys(r["preset"] for r in at):
            mine = [r for r in at if r["preset"] == name]
            cells = {}
            for t in [*sorted({r["question_type"] for r in mine}), "all"]:
                of = [r for r in mine if t == "all" or r["question_type"] == t]
                tokens = [r["tokens"] for r in of if r["tokens"] is not None]
                cells[t] = {
                    "cases": len(of),
                    **{m: sum(float(bool(r[m])) for r in of) / len(of) for m in METRICS},
                    "complete": sum(bool(r["complete"]) for r in of) / len(of),
                    "tokens_mean": sum(tokens) / len(tokens) if tokens else float("nan"),
                }
            by_preset[name] = cells
        out[str(b)] = by_preset
    return out


def paired(rows: list[Row], budgets: tuple[int, ...], against: str) -> dict[str, dict[str, Any]]:
    """budget → {"paired": every preset against `against` on the same questions, "below_against": the cells below}."""
    out = {}
    for b in budgets:
        p = paired_against(budget_rows(rows, b), against, VALUES)
        out[str(b)] = {"paired": p, "below_against": below_against(p)}
    return out


def write_csv(table: dict[str, dict[str, dict[str, dict[str, float]]]], path: Path) -> None:
    fields = ["preset", "question_type", "budget_tokens", "cases", *METRICS, "complete", "tokens_mean"]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for b, by_preset in table.items():
            for name, cells in by_preset.items():
                for t, c in cells.items():
                    w.writerow({"preset": name, "question_type": t, "budget_tokens": b, **c})


def markdown(table: dict[str, Any], pairs: dict[str, Any], against: str | None) -> str:
    """The report's section: per type and preset, evidence whole / evidence hit / @5 / mean tokens at each budget;
    then, at each budget, where each preset is below `against` and the paired table."""
    budgets = list(table)
    head = " | ".join(f"{int(b):,}" for b in budgets)
    lines = [
        "\n\n## At each response budget (`retrieval.config.budget_tokens`)\n",
        "Each preset's response built at each budget (its own way of filling it), the question as the query. Cells: "
        "evidence whole / evidence hit (an evidence turn among every hit the budget holds) / @5 (among its first five "
        "hits) / mean o200k tokens (numbers: retrieval_eval_budgets.csv).\n",
        f"| question type | preset | {head} |",
        "|---" * (len(budgets) + 2) + "|",
    ]
    first: dict[str, Any] = next(iter(table.values()), {})
    types = list(next(iter(first.values()), {}))
    for t in types:
        for name in first:
            cells = []
            for b in budgets:
                c = table[b][name][t]
                cells.append(" / ".join(f"{c[m]:.3f}" for m in METRICS) + f" / {c['tokens_mean']:,.0f}")
            lines.append(f"| {t} | {name} | " + " | ".join(cells) + " |")
    if against is not None and pairs:
        lines.append(f"\n### Paired against `{against}` at each budget\n")
        for b, p in pairs.items():
            lines += [
                f"**{int(b):,} tokens**\n",
                below_lines(p["below_against"], against),
                "",
                paired_table(p["paired"], against),
                "",
            ]
    return "\n".join(lines)
