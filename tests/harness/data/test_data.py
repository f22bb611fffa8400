import gzip
import json

import pytest

from harness.data.longmemeval import DataError, LongMemEvalSource, history_chars, info, parse_cases, select
from tests.support.dataset_rows import make_row


@pytest.mark.real_data
def test_info_of_the_shared_s_file_matches_its_readme(s_path):
    facts = info(s_path)
    assert facts["questions"] == 70
    assert facts["abstention"] == 6
    assert facts["question_types"] == {"single-session-user": 70}
    assert facts["sha256"] == "bfafb014e62e863d27afc8c36383f0bc8ba93e92f9ca52c32f99deaafdc84f1f"


def test_source_filters_sorts_limits_and_verifies(write_dataset):
    rows = [make_row("b2"), make_row("a1"), make_row("c3_abs"), make_row("z", qtype="multi-session")]
    p = write_dataset(rows)
    cases, prov = LongMemEvalSource(path=str(p), limit=2).load()
    assert [c.question_id for c in cases] == ["a1", "b2"]
    assert prov["n_total"] == 4 and prov["n_selected"] == 2
    all_ssu, _ = LongMemEvalSource(path=str(p)).load()
    assert [c.is_abstention for c in all_ssu] == [False, False, True]


def test_sha256_mismatch_names_the_file(write_dataset):
    p = write_dataset([make_row()])
    with pytest.raises(DataError, match="sha256 mismatch") as e:
        LongMemEvalSource(path=str(p), sha256="0" * 64).load()
    assert str(p) in str(e.value)


def test_numeric_answer_keeps_its_json_text():
    cases = parse_cases(b"[" + __import__("json").dumps(make_row(answer=3)).encode() + b"]", "x.json")
    assert cases[0].answer == "3"


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"\x1f\x8b\x08\x00garbage", "corrupt gzip"),
        # mtime=0: the bytes (and so the test ids) must not depend on the clock, or
        # pytest-xdist workers that collect a second apart disagree and abort the run
        (gzip.compress(b"[{not json", mtime=0), "invalid JSON"),
        (gzip.compress(b'{"a": 1}', mtime=0), "expected a JSON array"),
    ],
    ids=["corrupt-gzip", "invalid-json", "not-an-array"],
)
def test_bad_files_give_one_clear_error(write_dataset, raw, message):
    p = write_dataset(None, raw=raw)
    with pytest.raises(DataError, match=message) as e:
        LongMemEvalSource(path=str(p)).load()
    assert str(p) in str(e.value)


def test_missing_field_names_record_and_field(write_dataset):
    row = make_row("q7")
    del row["question"]
    with pytest.raises(DataError, match=r"\[0\] \(question_id=q7\): missing field 'question'"):
        LongMemEvalSource(path=str(write_dataset([row]))).load()


def test_bad_turn_is_named(write_dataset):
    row = make_row("q8", sessions=[[{"role": "robot", "content": "x"}]])
    with pytest.raises(DataError, match=r"haystack_sessions\[0\]\[0\]\.role"):
        LongMemEvalSource(path=str(write_dataset([row]))).load()


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match="not found"):
        LongMemEvalSource(path=str(tmp_path / "nope.json")).load()


def test_events_are_flattened_in_file_order_with_stable_ids():
    row = make_row(
        sessions=[
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
            [{"role": "user", "content": "c", "has_answer": True}],
        ]
    )
    case = parse_cases(__import__("json").dumps([row]).encode(), "x")[0]
    ev = case.events()
    assert [e.content for e in ev] == ["a", "b", "c"]
    assert [e.id for e in ev] == ["e0000", "e0001", "e0002"]
    assert [e.author for e in ev] == ["user", "lme-eval-agent", "user"]
    assert ev[2].has_answer and ev[2].source_session == "s1"
    assert all(a.timestamp < b.timestamp for a, b in zip(ev, ev[1:]))
    assert case.events() == ev  # deterministic


def test_select_rejects_negative_limit():
    with pytest.raises(DataError):
        select([], limit=-1)


def test_seeded_sample_is_reproducible_stratified_and_sorted():
    rows = [make_row(f"u{i:02d}") for i in range(12)] + [make_row(f"m{i:02d}", qtype="multi-session") for i in range(6)]
    cases = parse_cases(__import__("json").dumps(rows).encode(), "x.json")
    a = select(cases, None, limit=6, sample_seed=7)
    assert [c.question_id for c in a] == sorted(c.question_id for c in a)
    assert [c.question_id for c in a] == [c.question_id for c in select(cases, None, limit=6, sample_seed=7)]
    assert sum(c.question_type == "multi-session" for c in a) == 2  # 6 of 18 are multi-session: 2 of 6
    assert [c.question_id for c in a] != [c.question_id for c in select(cases, None, limit=6)]  # not the first 6
    assert {c.question_id for c in select(cases, None, limit=6, sample_seed=8)} != {c.question_id for c in a}
    assert len(select(cases, None, limit=50, sample_seed=7)) == 18


def test_shortest_keeps_the_n_shortest_histories_sorted_by_id():
    def row(qid: str, n_chars: int) -> dict:
        return make_row(qid, sessions=[[{"role": "user", "content": "x" * n_chars, "has_answer": True}]])

    rows = [row("a", 50), row("b", 10), row("c", 30), row("d", 10), row("e", 20)]
    cases = parse_cases(__import__("json").dumps(rows).encode(), "x.json")
    picked = select(cases, None, limit=3, shortest=True)
    assert [c.question_id for c in picked] == ["b", "d", "e"]  # 10, 10, 20 characters; the first 3 would be a, b, c
    assert [c.question_id for c in select(cases, None, limit=3)] == ["a", "b", "c"]
    assert [history_chars(c) for c in picked] == [10, 10, 20]
    with pytest.raises(DataError, match="shortest and dataset.sample_seed"):
        select(cases, None, limit=3, shortest=True, sample_seed=0)
    with pytest.raises(DataError, match="dataset.shortest must be"):
        select(cases, None, limit=3, shortest="yes")  # type: ignore[arg-type]


def test_per_type_keeps_k_of_every_type_first_shortest_or_seeded_and_the_history_cap_applies_first():
    def row(qid: str, qtype: str, n_chars: int) -> dict:
        return make_row(qid, qtype=qtype, sessions=[[{"role": "user", "content": "x" * n_chars, "has_answer": True}]])

    rows = [row(f"u{i:02d}", "single-session-user", 100 - i) for i in range(12)]
    rows += [row(f"m{i:02d}", "multi-session", 10 + i) for i in range(6)]
    rows += [row("p00", "single-session-preference", 500)]  # a type with one case: kept whole
    cases = parse_cases(json.dumps(rows).encode(), "x.json")
    ids = lambda picked: [c.question_id for c in picked]  # noqa: E731

    assert ids(select(cases, None, per_type=2)) == ["m00", "m01", "p00", "u00", "u01"]  # first by id, all types
    assert ids(select(cases, None, per_type=2, shortest=True)) == ["m00", "m01", "p00", "u10", "u11"]
    seeded = select(cases, None, per_type=2, sample_seed=3)
    assert ids(seeded) == sorted(ids(seeded)) and ids(seeded) == ids(select(cases, None, per_type=2, sample_seed=3))
    assert sorted(c.question_type for c in seeded).count("multi-session") == 2 and "p00" in ids(seeded)
    draws = {tuple(ids(select(cases, None, per_type=2, sample_seed=s))) for s in range(8)}
    assert len(draws) > 1  # the seed draws; the first two by id are not what it returns every time
    # one type's draw does not depend on the other types in the file
    only_users = select([c for c in cases if c.question_type == "single-session-user"], None, per_type=2, sample_seed=3)
    assert [c for c in ids(seeded) if c.startswith("u")] == ids(only_users)
    # the cap is applied before the choice: the 500-character preference case and the longer user cases drop out
    capped = select(cases, None, per_type=2, max_history_chars=95)
    assert ids(capped) == ["m00", "m01", "u05", "u06"] and all(history_chars(c) <= 95 for c in capped)
    assert ids(select(cases, None, limit=3, max_history_chars=12)) == ["m00", "m01", "m02"]
    with pytest.raises(DataError, match="per_type and dataset.limit"):
        select(cases, None, limit=3, per_type=1)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(DataError, match="dataset.per_type must be"):
            select(cases, None, per_type=bad)  # type: ignore[arg-type]
        with pytest.raises(DataError, match="dataset.max_history_chars must be"):
            select(cases, None, max_history_chars=bad)  # type: ignore[arg-type]
