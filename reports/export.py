"""A run's answers as LongMemEval hypothesis files, so anyone can re-judge them with upstream's own script.

Upstream (`src/evaluation/evaluate_qa.py METRIC_MODEL HYP_FILE REF_FILE`) reads JSON lines with
`question_id` and `hypothesis`; one file per mode is written here from the records (the source of truth).
A (case, mode) whose newest record failed has no answer: it is listed in `missing`, never written as an
empty hypothesis (that would be judged as a wrong answer instead of a missing one).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.records import RECORDS_FILE, RecordError, load_records


@dataclass
class HypothesisExport:
    files: dict[str, Path] = field(default_factory=dict)  # mode -> file
    counts: dict[str, int] = field(default_factory=dict)
    missing: list[tuple[str, str, str]] = field(default_factory=list)  # (question_id, mode, error)


def export_hypotheses(run_dir: str | Path, out_dir: str | Path | None = None) -> HypothesisExport:
    run_dir = Path(run_dir)
    path = run_dir / RECORDS_FILE
    if not path.exists():
        raise RecordError(f"{path}: no records to export")
    out = Path(out_dir) if out_dir else run_dir / "hypotheses"
    out.mkdir(parents=True, exist_ok=True)
    by_mode: dict[str, list[dict]] = {}
    result = HypothesisExport()
    for rec in sorted(load_records(path), key=lambda r: (r["mode"], r["question_id"])):
        if rec.get("status") != "ok":
            result.missing.append((rec["question_id"], rec["mode"], str(rec.get("error") or rec.get("status"))))
            continue
        by_mode.setdefault(rec["mode"], []).append({"question_id": rec["question_id"],
                                                    "hypothesis": rec.get("prediction") or ""})
    for mode, rows in by_mode.items():
        f = out / f"{mode}.jsonl"
        f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        result.files[mode], result.counts[mode] = f, len(rows)
    return result
