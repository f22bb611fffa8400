"""Loading a dataset file holds at most two copies of its text at once (the 500-question `_s` file is ~250 MB).

json.loads(bytes) decodes into a second, str copy while the caller still holds the bytes, and the parsed
strings are a third: 3× the file at the peak. The loader decodes and drops the bytes before parsing."""
import gzip
import json
import tracemalloc

import pytest

from harness.data.longmemeval import LongMemEvalSource

N = 8_000_000  # characters of one turn: the file is ~N bytes and the parsed text ~N


def _rows() -> list[dict]:
    return [{"question_id": "q1", "question_type": "multi-session", "question": "Where?", "answer": "Paris",
             "question_date": "2023/05/30 (Tue) 10:00", "haystack_session_ids": ["s1"],
             "haystack_dates": ["2023/05/20 (Sat) 10:00"], "answer_session_ids": ["s1"],
             "haystack_sessions": [[{"role": "user", "content": "x" * N, "has_answer": True},
                                    {"role": "assistant", "content": "ok"}]]}]


@pytest.mark.parametrize("gz", [False, True], ids=["json", "json.gz"])
def test_load_peak_memory_is_at_most_about_two_copies_of_the_file(tmp_path, gz):
    text = json.dumps(_rows()).encode()
    path = tmp_path / ("d.json.gz" if gz else "d.json")
    path.write_bytes(gzip.compress(text, 1) if gz else text)
    src = LongMemEvalSource(path=str(path), question_types=None)
    tracemalloc.start()
    try:
        cases, prov = src.load()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(cases[0].sessions[0][0].content) == N and prov["n_selected"] == 1
    assert peak < 2.5 * len(text), f"peak {peak / len(text):.2f}× the file"
