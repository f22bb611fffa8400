"""Plots from aggregates (matplotlib, headless)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

QUALITY = (("em", "EM"), ("llm_score", "LLMScore"), ("rouge_l", "ROUGE-L"))


def quality_vs_tokens(summary: pd.DataFrame, out: Path) -> Path:
    """Quality (EM, LLMScore, ROUGE-L) against the final call's prompt tokens, one point per mode (log x)."""
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    markers = {"em": "o", "llm_score": "s", "rouge_l": "^"}
    for key, label in QUALITY:
        if key not in summary.columns:
            continue
        for mode, row in summary.iterrows():
            x, y = row.get("final_prompt_tokens"), row.get(key)
            if pd.isna(x) or pd.isna(y) or x <= 0:
                continue
            ax.scatter(x, y, marker=markers[key], s=60, label=label if mode == summary.index[0] else None)
            ax.annotate(str(mode), (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("prompt tokens of the final call (log)")
    ax.set_ylabel("score")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Quality vs prompt size per mode")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out
