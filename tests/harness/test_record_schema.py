"""Issue 13 item 2: the record is declared once (harness.records.Record, schema in the module docstring);
writers build it, readers use its attributes, and records.jsonl written by earlier versions still load."""

from __future__ import annotations

import json

import pytest

from harness.records import (
    SCHEMA_VERSION,
    STATUS_FAILED,
    Record,
    RecordError,
    RecordWriter,
    has_answer,
    load_records,
    read_records,
)
from tests.support.paths import FIXTURES
from tests.support.report_fixtures import rec, summary_block

LEGACY = FIXTURES / "records_legacy.jsonl"


def test_todays_records_round_trip_byte_for_byte(tmp_path):
    """The typed record writes exactly the JSON the dict writers wrote (so reports and resumes are unchanged)."""
    lines = [
        rec("q1", "summary", em=1.0, lme=1.0, summary=summary_block()),
        rec("q2", "long_context", status="failed"),
        {
            **rec("q3", "summary_ondemand", lme=None, lme_verdict="not_run"),
            "status": "scoring_failed",
            "scoring_error": "LongMemEvalJudge: judge call failed",
            "embedding_calls": [],
            "rescored_from": "/src",
        },
    ]
    w = RecordWriter(tmp_path / "a.jsonl")
    for r in lines:
        w.append(r)
    typed = RecordWriter(tmp_path / "b.jsonl")
    for r in read_records(tmp_path / "a.jsonl"):
        typed.append(r)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_a_failed_record_has_no_answer_fields():
    r = Record("q1", "summary", status=STATUS_FAILED, error="boom", latency={"wall_ms": 1.0})
    assert set(r.to_json()) == {
        "schema",
        "question_id",
        "question_type",
        "is_abstention",
        "mode",
        "question",
        "reference",
        "status",
        "error",
        "prediction",
        "metrics",
        "usage",
        "latency",
    }
    r.status = "ok"
    assert {"calls", "metric_details", "summary", "final_messages"} <= set(r.to_json())


def test_records_of_earlier_versions_load_migrated():
    (old, failed) = read_records(LEGACY)
    # status "error" (releases before model-level errors were scored): not a final answer under today's rules,
    # which is how today's code already treated it (counted failed, run again); its error and answer are kept.
    assert old.status == STATUS_FAILED and not old.answered and not has_answer(old)
    assert old.error == "tool-iteration limit reached" and old.prediction == "I think you went to Paris."
    assert old.schema_version == SCHEMA_VERSION and old.metrics["em"] == 1.0
    # no schema, no is_abstention: read as version 1, abstention from the id; an unknown key kept verbatim
    assert failed.schema_version == 1 and failed.is_abstention is True
    assert failed.extra == {"notes": "a key this version does not know"}
    assert failed.to_json()["notes"] == "a key this version does not know"
    assert [r["status"] for r in load_records(LEGACY)] == ["failed", "failed"]  # the JSON view is migrated too


def test_a_legacy_run_still_reports(tmp_path):
    from reports.aggregate import load_run

    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_bytes(LEGACY.read_bytes())
    df = load_run(run).df
    assert list(df["status"]) == ["failed", "failed"] and df["is_abstention"].tolist() == [False, True]


def test_a_record_without_its_key_is_one_error_naming_it(tmp_path):
    with pytest.raises(RecordError, match="record without question_id"):
        Record.from_json({"mode": "summary", "status": "ok"})
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"schema": 1, "question_id": "q1", "status": "ok"}) + "\n")
    with pytest.raises(RecordError, match=r"r\.jsonl: a record without question_id or mode"):
        read_records(p)
