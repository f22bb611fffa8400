"""The whole dataset schema is checked once at load time: every problem names the file, the record
(index and question_id) and the field; all problems are collected, the first ones reported."""

import glob
import json

import pytest

from harness.data.longmemeval import MAX_REPORTED_PROBLEMS, DataError, parse_cases, read_json_bytes
from tests.support.dataset_rows import make_row

SHARED = sorted(glob.glob("/work/shared/data/longmemeval/*.json.gz"))


def _load(rows):
    return parse_cases(json.dumps(rows).encode(), "d.json")


def _turns(**extra):
    return [[{"role": "user", "content": "hi", **extra}, {"role": "assistant", "content": "hello"}]]


@pytest.mark.parametrize(
    "patch,field",
    [
        ({"haystack_session_ids": "s0"}, "field 'haystack_session_ids' has type str"),
        ({"haystack_session_ids": [0]}, "field 'haystack_session_ids[0]' has type int"),
        ({"answer_session_ids": 7}, "field 'answer_session_ids' has type int"),
        ({"answer_session_ids": [None]}, "field 'answer_session_ids[0]' has type null"),
        ({"haystack_dates": {"a": 1}}, "field 'haystack_dates' has type dict"),
        ({"haystack_dates": [20230501]}, "field 'haystack_dates[0]' has type int"),
        ({"question_date": 20230530}, "field 'question_date' has type int"),
        ({"haystack_sessions": _turns(has_answer="yes")}, "field 'haystack_sessions[0][0].has_answer' has type str"),
        ({"haystack_sessions": [[{"role": 1, "content": "x"}]]}, "field 'haystack_sessions[0][0]' needs string"),
        ({"haystack_sessions": [[{"role": "user", "content": ["x"]}]]}, "field 'haystack_sessions[0][0]' needs string"),
        ({"question_id": ""}, "field 'question_id' is empty"),
        ({"haystack_dates": ["d1", "d2"]}, "field 'haystack_dates' has 2 entries for 1 haystack_sessions"),
    ],
)
def test_wrong_types_in_optional_fields_name_record_and_field(patch, field):
    row = {**make_row(qid="q9"), **patch}
    with pytest.raises(DataError) as e:
        _load([make_row(qid="q0"), row])
    assert "d.json[1]" in str(e.value) and field in str(e.value)
    if patch != {"question_id": ""}:
        assert "question_id=q9" in str(e.value)


def test_duplicate_question_ids_are_refused():
    with pytest.raises(DataError, match=r"d.json\[2\] \(question_id=q1\): duplicate question_id \(first at \[0\]\)"):
        _load([make_row(qid="q1"), make_row(qid="q2"), make_row(qid="q1")])


def test_all_problems_are_collected_and_the_first_ones_reported():
    rows = [{**make_row(qid=f"q{i}"), "question_date": i} for i in range(MAX_REPORTED_PROBLEMS + 5)]
    rows.append(make_row(qid="q0"))  # a duplicate after the type errors is found too
    with pytest.raises(DataError) as e:
        _load(rows)
    msg = str(e.value)
    assert msg.startswith(f"d.json: {MAX_REPORTED_PROBLEMS + 5} schema problems:")
    assert msg.count("field 'question_date'") == MAX_REPORTED_PROBLEMS and "... and 5 more" in msg
    assert "\n" not in msg  # one error line


def test_valid_optional_fields_may_be_null_or_absent():
    row = {**make_row(), "question_date": None, "answer_session_ids": None, "haystack_dates": None}
    del row["haystack_session_ids"]
    case = _load([row])[0]
    assert case.session_ids == ("s0",) and case.session_dates == ("",) and case.question_date == ""


@pytest.mark.real_data
@pytest.mark.skipif(not SHARED, reason="shared LongMemEval files not present")
@pytest.mark.parametrize("path", SHARED)
def test_the_shared_files_load(path):
    from pathlib import Path

    cases = parse_cases(read_json_bytes(Path(path)), path)
    assert cases and len({c.question_id for c in cases}) == len(cases)
