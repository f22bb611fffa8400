"""Build the report of a run directory (Markdown, CSV, PNG) from its records alone."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from reports.aggregate import COLUMNS, load_run, summarize
from reports.plots import quality_vs_tokens


def markdown_table(summary: pd.DataFrame) -> str:
    cols = [c for c in COLUMNS if c.key in summary.columns]
    head = ["mode", "cases", "failed", *[c.label + (" ↑" if c.higher_is_better else " ↓") for c in cols]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for mode, row in summary.iterrows():
        cells = [str(mode), str(int(row["cases"])), str(int(row["failed"]))]
        for c in cols:
            v = row[c.key]
            cells.append("n/a" if pd.isna(v) else c.fmt.format(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def build_report(run_dir: Path) -> dict[str, Path]:
    run_dir = Path(run_dir)
    df = load_run(run_dir)
    summary = summarize(df)
    out = {"markdown": run_dir / "report.md", "csv": run_dir / "summary.csv", "cases_csv": run_dir / "cases.csv",
           "plot": run_dir / "quality_vs_tokens.png"}
    summary.to_csv(out["csv"])
    df.to_csv(out["cases_csv"], index=False)
    quality_vs_tokens(summary, out["plot"])
    meta: dict[str, Any] = {}
    if (run_dir / "run.json").exists():
        meta = json.loads((run_dir / "run.json").read_text())
    failures = df[(df["status"] != "ok") | df["error"].notna()][["question_id", "mode", "status", "error"]]
    lines = [f"# lme-harness report: {run_dir.name}", ""]
    if meta:
        d = meta.get("dataset", {})
        lines += [f"- dataset: `{d.get('source')}` (sha256 `{str(d.get('sha256'))[:12]}…`, {d.get('n_selected')} of "
                  f"{d.get('n_total')} questions)",
                  f"- model: `{meta.get('model', {}).get('name')}` ({meta.get('model', {}).get('model')})",
                  f"- git: `{(meta.get('git') or {}).get('sha')}`{' (dirty)' if (meta.get('git') or {}).get('dirty') else ''}", ""]
    lines += [markdown_table(summary), "",
              "Prompt tokens are those of the final answer call (the reference's figure); "
              "↑ higher is better, ↓ lower is better.", "", f"![quality vs tokens]({out['plot'].name})", ""]
    if len(failures):
        lines += ["## Failed or errored cases", "",
                  "`failed`: not scored (retried on the next run); `ok` with an error: scored as the reference scores it.", "",
                  "| question_id | mode | status | error |", "|---|---|---|---|"]
        lines += [f"| {r.question_id} | {r.mode} | {r.status} | {' '.join(str(r.error).split()).replace('|', '/')[:200]} |"
                  for r in failures.itertuples()]
        lines.append("")
    out["markdown"].write_text("\n".join(lines))
    return out
