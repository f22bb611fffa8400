"""Loading a dataset file does not hold the whole file as one decoded str (the 500-question `_s` file is ~250 MB).

json.loads(bytes) decodes the whole file first; one character above U+FFFF anywhere (an emoji in one turn: the
real files have them) makes that str 4 bytes a character, beside the bytes and the parsed rows: ~6× the file
at the peak. The loader parses element by element (harness/data/jsonarray.py)."""

import gzip
import json
import tracemalloc

import pytest

from harness.data.jsonarray import array_of_objects
from harness.data.longmemeval import LongMemEvalSource, find_local

N_Q, CHARS = 40, 200_000  # 40 questions of 200K characters: the file is ~8 MB


def _rows() -> list[dict]:
    return [
        {
            "question_id": f"q{i}",
            "question_type": "multi-session",
            "question": "Where?",
            "answer": "Paris",
            "question_date": "2023/05/30 (Tue) 10:00",
            "haystack_session_ids": ["s1"],
            "haystack_dates": ["2023/05/20 (Sat) 10:00"],
            "answer_session_ids": ["s1"],
            "haystack_sessions": [
                [
                    {"role": "user", "content": "x" * CHARS, "has_answer": True},
                    {"role": "assistant", "content": "ok \U0001f389" if i == 7 else "ok"},
                ]
            ],
        }
        for i in range(N_Q)
    ]


@pytest.mark.parametrize("gz", [False, True], ids=["json", "json.gz"])
def test_load_peak_memory_stays_near_the_file_plus_its_parsed_text(tmp_path, gz):
    text = json.dumps(_rows(), ensure_ascii=False).encode()
    path = tmp_path / ("d.json.gz" if gz else "d.json")
    path.write_bytes(gzip.compress(text, 1) if gz else text)
    src = LongMemEvalSource(path=str(path), question_types=None)
    tracemalloc.start()
    try:
        cases, prov = src.load()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    by_id = {c.question_id: c for c in cases}
    assert prov["n_selected"] == N_Q and by_id["q7"].sessions[0][1].content == "ok \U0001f389"
    # bytes (1×) + parsed text (1×) + one question in flight; whole-file decoding made it ~6×.
    assert peak < 2.5 * len(text), f"peak {peak / len(text):.2f}× the file"


@pytest.mark.parametrize(
    "doc",
    [
        b"[]",
        b' \n[ {"a": 1} ,\n{"b": [1, {"c": "]}\\" [{"}]} ]\n',
        b'[{"a": "\\u00e9\\ud83c\\udf89 \xc3\xa9"}]',
        b'[{"a": 1}, 2]',
        b'[{"a": 1}, "x"]',
        b'[{"a": 1} {"b": 2}]',
        b'[{"a": 1},, {"b": 2}]',
        b'[{"a": 1}] x',
        b'{"a": 1}',
        b"[[1]]",
        b'[{"a": 1}',
        b'[{"a": "unterminated}]',
        b'\xef\xbb\xbf[{"a": 1}]',
        b'[{"a": 1,}]',
    ],
)
def test_element_parsing_equals_json_loads_or_defers_to_it(doc):
    try:
        expected = json.loads(doc)
    except ValueError:
        expected = ValueError
    got = array_of_objects(doc)
    if got is not None:  # whenever it answers, it answers exactly what json.loads would
        assert got == expected
    else:  # anything it declines is parsed whole by the caller (with json's own error)
        assert (
            expected is ValueError
            or not (isinstance(expected, list) and all(isinstance(x, dict) for x in expected))
            or doc.startswith(b"\xef\xbb\xbf")
        )


@pytest.mark.real_data
def test_element_parsing_equals_json_loads_on_the_oracle_file():
    path = find_local("longmemeval_oracle.json.gz")
    if path is None:
        pytest.skip("longmemeval_oracle.json.gz not available")
    data = gzip.decompress(path.read_bytes())
    assert array_of_objects(data) == json.loads(data)
