"""Paired comparison of retrieval presets on the same questions (`lme-harness retrieval-eval`): each preset against
one of them (`+retrieval_eval.against`, `bm25` by default), per question type and over all, on the metrics
retrieval-eval names (`paired_metrics`: recall_any@5, evidence in the response and at the budget). The margins on one fold are often one or two questions, so the report
shows how many questions each side wins and a paired bootstrap interval (reports/stats.py, seeded: the same rows give
the same figures), instead of two rates side by side. `below_against` lists, per preset, the question types and
metrics where it is below the reference: issue 24's "at or above `bm25` on every type" is an empty list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reports.stats import paired_bootstrap_ci

Row = dict[str, Any]


def paired_against(
    rows: list[Row], against: str, metrics: dict[str, Callable[[Row], float]]
) -> dict[str, dict[str, dict[str, dict[str, float | int]]]]:
    """preset → question type (and "all") → metric → {delta (preset − `against`), lo, hi, wins, losses, n}, for each
    of `metrics` (name → a case row's 0/1 value)."""
    by = {(r["preset"], r["question_id"]): r for r in rows}
    presets = [p for p in dict.fromkeys(r["preset"] for r in rows) if p != against]
    qtype = {r["question_id"]: r["question_type"] for r in rows}
    out: dict[str, dict[str, dict[str, dict[str, float | int]]]] = {}
    for name in presets:
        out[name] = {}
        for t in [*sorted(set(qtype.values())), "all"]:
            qids = [q for q in qtype if (t == "all" or qtype[q] == t) and (name, q) in by and (against, q) in by]
            cells: dict[str, dict[str, float | int]] = {}
            for metric, value in metrics.items():
                mine = [value(by[(name, q)]) for q in qids]
                theirs = [value(by[(against, q)]) for q in qids]
                est = paired_bootstrap_ci(theirs, mine)
                cells[metric] = {
                    "delta": est.mean,
                    "lo": est.lo,
                    "hi": est.hi,
                    "wins": sum(m > o for m, o in zip(mine, theirs)),
                    "losses": sum(m < o for m, o in zip(mine, theirs)),
                    "n": len(qids),
                }
            out[name][t] = cells
    return out


def paired_table(paired: dict[str, Any], against: str) -> str:
    """One row per question type and preset: for each metric, Δ [95 % CI] and questions won / lost."""
    if not paired:
        return ""
    first = next(iter(paired.values()))
    metrics = list(next(iter(first.values())))
    head = " | ".join(f"Δ {m} [95 % CI] | won / lost" for m in metrics)
    lines = [f"| question type | preset | n | {head} |", "|---" * (3 + 2 * len(metrics)) + "|"]
    types = list(first)
    for t in types:
        for name, by_type in paired.items():
            cells = by_type[t]
            n = next(iter(cells.values()))["n"]
            row = " | ".join(
                f"{c['delta']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}] | {c['wins']} / {c['losses']}"
                for c in cells.values()
            )
            lines.append(f"| {t} | {name} vs {against} | {n} | {row} |")
    return "\n".join(lines)


def below_against(paired: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """preset → the (question type, metric) cells where its share is below the reference's on the same questions
    (per type; "all" is not a type), in the paired table's order."""
    return {
        name: [
            {"question_type": t, "metric": m, **c}
            for t, cells in by_type.items()
            if t != "all"
            for m, c in cells.items()
            if c["delta"] < -1e-12  # a tie is not below: the shares are equal
        ]
        for name, by_type in paired.items()
    }


def below_lines(below: dict[str, list[dict[str, Any]]], against: str) -> str:
    """One line per preset: where it is below `against`, or that it is at or above it everywhere."""
    lines = []
    for name, cells in below.items():
        if not cells:
            lines.append(f"- `{name}`: at or above `{against}` on every question type, for every metric")
            continue
        where = "; ".join(
            f"{c['question_type']} {c['metric']} ({c['delta']:+.3f}: {c['wins']} won / {c['losses']} lost of {c['n']})"
            for c in cells
        )
        lines.append(f"- `{name}`: below `{against}` on {where}")
    return "\n".join(lines)
