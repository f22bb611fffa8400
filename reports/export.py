"""A run's answers as LongMemEval hypothesis files, so anyone can re-judge them with upstream's own script;
optionally the per-case table as a Hugging Face `datasets` dataset (and Parquet) to share or analyse.

Upstream (`src/evaluation/evaluate_qa.py METRIC_MODEL HYP_FILE REF_FILE`) reads JSON lines with
`question_id` and `hypothesis`; one file per mode is written here from the records (the source of truth).
A (case, mode) whose newest record failed has no answer: it is listed in `missing`, never written as an
empty hypothesis (that would be judged as a wrong answer instead of a missing one). A `scoring_failed` pair
has its answer (only the judge failed): it is exported.

What is written is bounded like a record (harness/bounds.py, the run's `run.max_reply_chars` and
`run.max_record_field_chars`): a longer text is cut with a note in the text, listed in `truncated`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.bounds import RecordBounds, cut_text
from harness.records import RECORDS_FILE, RecordError, read_records, record_key
from harness.run_meta import RunMetaError, read_run_meta


@dataclass
class HypothesisExport:
    files: dict[str, Path] = field(default_factory=dict)  # mode -> file
    counts: dict[str, int] = field(default_factory=dict)
    missing: list[tuple[str, str, str]] = field(default_factory=list)  # (question_id, mode, error)
    truncated: list[tuple[str, str, int]] = field(default_factory=list)  # (question_id, mode, original length)


def run_bounds(run_dir: Path) -> RecordBounds:
    """The bounds the run wrote its records with (run.json's config), else the defaults."""
    try:
        cfg = read_run_meta(run_dir).config or {}
    except (OSError, RunMetaError):
        cfg = {}
    return RecordBounds.from_config(cfg if isinstance(cfg, dict) else {})


def bounded_text(rec: dict, field_name: str, limit: int, setting: str) -> tuple[str, int | None]:
    """`rec[field_name]` within `limit`, and its original length when it was cut. A field the run already cut
    (`truncated_fields`) is kept as written: cutting it again would replace its note with a wrong count."""
    text = str(rec.get(field_name) or "")
    original = (rec.get("truncated_fields") or {}).get(field_name)
    if original is not None:
        return text, int(original)
    return cut_text(text, limit, setting), (len(text) if len(text) > limit else None)


def _out_dir(run_dir: Path, out_dir: str | Path | None) -> Path:
    """The export directory, created; one error when the path is taken by a file (never written over)."""
    out = Path(out_dir) if out_dir else run_dir / "export"
    taken = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    if taken is not None:
        raise RecordError(f"{taken}: exists and is not a directory; export --out names a directory to write into")
    out.mkdir(parents=True, exist_ok=True)
    return out


def export_hypotheses(run_dir: str | Path, out_dir: str | Path | None = None) -> HypothesisExport:
    run_dir = Path(run_dir)
    path = run_dir / RECORDS_FILE
    if not path.exists():
        raise RecordError(f"{path}: no records to export")
    out = _out_dir(run_dir, out_dir)
    by_mode: dict[str, list[dict]] = {}
    result = HypothesisExport()
    bounds = run_bounds(run_dir)
    for rec in sorted(read_records(path), key=lambda r: (r.mode, r.question_id)):
        if not rec.answered:
            result.missing.append((rec.question_id, rec.mode, str(rec.error or rec.status)))
            continue
        answer, original = bounded_text(rec.to_json(), "prediction", bounds.max_reply_chars, "run.max_reply_chars")
        if original is not None:
            result.truncated.append((rec.question_id, rec.mode, original))
        by_mode.setdefault(rec.mode, []).append({"question_id": rec.question_id, "hypothesis": answer})
    for mode, rows in by_mode.items():
        f = out / f"{mode}.jsonl"
        f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        result.files[mode], result.counts[mode] = f, len(rows)
    return result


def export_cases_dataset(run_dir: str | Path, out_dir: str | Path | None = None) -> dict[str, Path]:
    """The per-case table of the report (metrics, tokens, cost, latency per question × mode) with the question,
    reference and answer, as a `datasets.Dataset` saved to OUT/cases (`load_from_disk`, `push_to_hub`) and
    OUT/cases.parquet. Failed pairs are rows too (status, error; metrics empty)."""
    import datasets

    from reports.aggregate import read_run

    run_dir = Path(run_dir)
    out = _out_dir(run_dir, out_dir)
    run = read_run(run_dir)
    df = run.df
    texts = {record_key(r): r for r in run.records}
    bounds = run_bounds(run_dir)
    for field_name in ("question", "reference", "prediction"):
        limit, setting = (
            (bounds.max_reply_chars, "run.max_reply_chars")
            if field_name == "prediction"
            else (bounds.max_field_chars, "run.max_record_field_chars")
        )
        recs = [texts.get((q, str(m)), {}) for q, m in zip(df["question_id"], df["mode"])]
        df[field_name] = [
            bounded_text(r, field_name, limit, setting)[0] if isinstance(r.get(field_name), str) else r.get(field_name)
            for r in recs
        ]
    df["mode"] = df["mode"].astype(str)
    ds = datasets.Dataset.from_pandas(df, preserve_index=False)
    ds.save_to_disk(str(out / "cases"))
    ds.to_parquet(str(out / "cases.parquet"))
    return {"dataset": out / "cases", "parquet": out / "cases.parquet"}
