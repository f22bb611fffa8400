"""Aggregates derived from per-case records only (pandas); no model is ever called here."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from harness.records import RECORDS_FILE, load_records

MODE_ORDER = ("long_context", "summary", "summary_ondemand")


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    higher_is_better: bool
    fmt: str = "{:.4f}"


# The published table's columns first (reference names), then ours.
COLUMNS: tuple[Column, ...] = (
    Column("rouge_l", "ROUGE-L", True),
    Column("f1", "F1", True),
    Column("bleu1", "BLEU", True),
    Column("llm_score", "LLMScore", True),
    Column("em", "EM", True),
    Column("final_prompt_tokens", "prompt tokens", False, "{:,.0f}"),
    Column("query_ms", "query latency ms", False, "{:,.0f}"),
    Column("llm_score_strict", "LLMScore strict", True),
    Column("rouge_l_lib", "ROUGE-L (rouge-score)", True),
    Column("sacrebleu_sentence", "BLEU-4 (sacrebleu)", True),
    Column("prompt_tokens_total", "prompt tokens, all calls", False, "{:,.0f}"),
    Column("summary_tokens", "summary gen tokens", False, "{:,.0f}"),
    Column("n_search", "searches/case", False, "{:.2f}"),
    Column("n_load", "loads/case", False, "{:.2f}"),
    Column("truncated", "truncated share", False, "{:.2f}"),
)


def records_frame(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for r in records:
        usage = r.get("usage") or {}
        row = {
            "question_id": r["question_id"],
            "mode": r["mode"],
            "status": r.get("status"),
            "error": r.get("error"),
            **(r.get("metrics") or {}),
            "final_prompt_tokens": usage.get("final_prompt_tokens"),
            "prompt_tokens_total": usage.get("prompt_tokens_total"),
            "summary_tokens": (usage.get("summary_prompt_tokens") or 0) + (usage.get("summary_completion_tokens") or 0)
            if r.get("status") == "ok" else None,
            "query_ms": (r.get("latency") or {}).get("query_ms"),
            "n_search": r.get("n_search"),
            "n_load": r.get("n_load"),
            "truncated": float(bool((r.get("truncation") or {}).get("truncated"))) if r.get("status") == "ok" else None,
        }
        rows.append(row)
    df = pd.DataFrame(rows)
    if not df.empty:
        df["mode"] = pd.Categorical(df["mode"], categories=sorted(set(df["mode"]), key=_mode_rank), ordered=True)
    return df


def _mode_rank(m: str) -> tuple[int, str]:
    return (MODE_ORDER.index(m) if m in MODE_ORDER else len(MODE_ORDER), m)


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per mode: the mean of every column over successfully scored cases, plus counts of failures."""
    if df.empty:
        return pd.DataFrame()
    ok = df[df["status"] == "ok"]
    cols = [c.key for c in COLUMNS if c.key in df.columns]
    means = ok.groupby("mode", observed=True)[cols].mean(numeric_only=True)
    counts = df.groupby("mode", observed=True).agg(cases=("question_id", "nunique"),
                                                   ok=("status", lambda s: int((s == "ok").sum())),
                                                   failed=("status", lambda s: int((s != "ok").sum())))
    return counts.join(means)


def load_run(run_dir: Path) -> pd.DataFrame:
    path = Path(run_dir) / RECORDS_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: no records in this run directory")
    return records_frame(load_records(path))
