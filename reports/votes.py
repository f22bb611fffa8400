"""What a report says about a voted judge (harness/scoring/votes.py): its settings and how often its votes agreed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from harness.run_meta import RunMeta
from reports.sections import Note, Section, Table, num, text

AGREEMENT = "judge_agreement"


def judge_config(meta: RunMeta | Mapping[str, Any] | None) -> Mapping[str, Any]:
    return RunMeta.of(meta).config_at("judge") or {}


def judge_label(meta: RunMeta | Mapping[str, Any] | None) -> str:
    """`LongMemEvalJudge`, or `VotedJudge (LongMemEvalJudge, 3 votes, confirm_failures)` for a voted judge."""
    cfg = judge_config(meta)
    target = str(cfg.get("_target_") or "")
    if not target:
        return "none"
    name = target.rsplit(".", 1)[-1]
    if "votes" not in cfg:
        return name
    inner = cfg.get("judge")
    extra = ", confirm_failures" if cfg.get("confirm_failures") else ""
    if isinstance(inner, Mapping):  # judge=*_votes3
        return f"{name} ({str(inner.get('_target_', '')).rsplit('.', 1)[-1]}, {cfg['votes']} votes{extra})"
    return f"VotedJudge ({name}, {cfg['votes']} votes{extra})"  # judge=<plain> +judge.votes=k


def votes_rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Per mode: cases whose votes gave an agreement, its mean, and the share of unanimous cases."""
    if df.empty or AGREEMENT not in df.columns:
        return []
    ok = df[df["status"] == "ok"]
    rows = []
    for mode, part in ok.groupby("mode", observed=True, sort=True):
        vals = part[AGREEMENT].dropna()
        if vals.empty:
            continue
        rows.append(
            {
                "mode": str(mode),
                "voted": int(vals.size),
                "agreement": float(vals.mean()),
                "unanimous": float((vals >= 1.0).mean()),
            }
        )
    return rows


def votes_section(df: pd.DataFrame, meta: RunMeta | Mapping[str, Any] | None) -> Section | None:
    """The report's "Judge votes" section (None for a run without votes)."""
    rows = votes_rows(df)
    if not rows:
        return None
    cfg = judge_config(meta)
    note = (
        f"Each answer judged {cfg.get('votes', '?')} times; the metrics above are the majority verdict (a score: "
        "the mean over votes). `agreement`: mean share of a case's votes agreeing with its majority; `unanimous`: "
        "share of cases where every vote agreed; `voted`: cases with two or more verdicts."
    )
    if cfg.get("confirm_failures"):
        note += " confirm_failures: extra votes only after an 'incorrect' first verdict (biased towards correct)."
    cells = [
        [text(r["mode"]), num(r["voted"]), num(r["agreement"], "{:.4f}"), num(r["unanimous"], "{:.4f}")] for r in rows
    ]
    table = Table(["mode", "voted", "agreement", "unanimous"], cells, "judge-votes")
    return Section("votes", "Judge votes", [Note(note), table])


def vote_lines(details: Mapping[str, Any]) -> list[str]:
    """A voted judge's votes for the per-case drill-down: "1: correct (yes)", one per vote cast."""
    votes = details.get("votes")
    if not isinstance(votes, list):
        return []
    return [
        f"{i}: {v.get('verdict')} ({str(v.get('raw') or '').strip()[:80]})"
        for i, v in enumerate(votes, 1)
        if isinstance(v, Mapping)
    ]
