import json
import warnings

import pytest

from harness.records import RecordError, RecordWriter, load_records


def test_append_and_last_record_wins(tmp_path):
    w = RecordWriter(tmp_path / "r.jsonl")
    w.append({"question_id": "a", "mode": "m", "status": "failed"})
    w.append({"question_id": "a", "mode": "m", "status": "ok"})
    w.append({"question_id": "b", "mode": "m", "status": "ok"})
    recs = load_records(tmp_path / "r.jsonl")
    assert {(r["question_id"], r["status"]) for r in recs} == {("a", "ok"), ("b", "ok")}
    assert all(r["schema"] == 1 for r in recs)


def test_torn_last_line_is_discarded_and_appending_continues_cleanly(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"question_id": "a", "mode": "m"}) + "\n" + '{"question_id": "b", "mo')
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert [r["question_id"] for r in load_records(p)] == ["a"]
        RecordWriter(p).append({"question_id": "c", "mode": "m"})
    assert [r["question_id"] for r in load_records(p)] == ["a", "c"]
    assert p.read_text().count("\n") == 2


def test_corruption_in_the_middle_is_an_error_not_a_silent_drop(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text('{"question_id": "a", "mode": "m"}\nGARBAGE\n{"question_id": "b", "mode": "m"}\n')
    with pytest.raises(RecordError, match=r"r.jsonl:2"):
        load_records(p)
