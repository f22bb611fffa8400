"""Corrupt stores and full disks end in one error naming the file and what to do; nothing recorded is lost."""

import errno
import json
import warnings

import pytest

import harness.records as records_mod
import harness.storage as storage_mod
from harness.llm.cache import ResponseCache
from harness.records import RecordWriter, load_records
from harness.session.store import SQLiteStore
from harness.storage import StorageError, write_text_atomic
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from tests.support.bad_start import one_error_line, run

GARBAGE = b"this is not a database\n" * 50


@pytest.mark.e2e
@pytest.mark.parametrize("which", ["cache", "store", "index"])
def test_a_corrupt_cache_or_store_is_one_error_before_any_case_runs(tmp_path, capsys, which):
    path = {
        "cache": tmp_path / "cache.sqlite",
        "store": tmp_path / "run" / "session_store.sqlite",
        "index": tmp_path / "index" / "retrieval_index.sqlite",
    }[which]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(GARBAGE)
    with FakeOpenAIServer(FakeModel()) as srv:
        code = run(
            tmp_path,
            "dataset.limit=1",
            "mode=[summary_ondemand]",
            f"retrieval.store={tmp_path / 'index' / 'retrieval_index.sqlite'}",
            base_url=srv.base_url,
        )
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and str(path) in line and "Move it aside or delete it" in line
    assert not srv.requests  # no case ran: no pair "failed" with zero calls
    assert path.read_bytes() == GARBAGE  # user data is never deleted or rebuilt
    assert not (tmp_path / "run" / "records.jsonl").exists()


def _damage_pages(path, offset=200_000):
    data = bytearray(path.read_bytes())
    data[offset : offset + 4096] = b"\xab" * 4096
    path.write_bytes(bytes(data))
    return bytes(data)


def test_damage_inside_a_cache_file_is_found_when_it_is_opened(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    for i in range(3000):
        cache.put(str(i), {"content": "x" * 500})
    cache.close()
    damaged = _damage_pages(path)
    with pytest.raises(
        StorageError,
        match=r"c\.sqlite: the response cache is not a usable SQLite database "
        r"\(integrity check failed",
    ):
        ResponseCache(path)
    assert path.read_bytes() == damaged


def test_a_store_with_a_foreign_schema_is_refused(tmp_path):
    import sqlite3

    path = tmp_path / "s.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE summaries (x TEXT)")
    with pytest.raises(StorageError, match=r"session store is not a usable .*\(table summaries has columns"):
        SQLiteStore(path)


def test_an_index_store_with_a_foreign_schema_or_damaged_pages_is_refused(tmp_path):
    import sqlite3

    from harness.retrieval.store import IndexStore

    path = tmp_path / "i.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE tokens (x TEXT)")
    before = path.read_bytes()
    with pytest.raises(
        StorageError, match=r"i\.sqlite: the retrieval index store is not a usable .*\(table tokens has columns"
    ):
        IndexStore(path)
    assert path.read_bytes() == before
    good = tmp_path / "g.sqlite"
    store = IndexStore(good)
    for i in range(300):
        store.load_or_build(f"k{i}", _docs(i), None)
    store.close()
    damaged = _damage_pages(good, offset=100_000)
    with pytest.raises(StorageError, match=r"g\.sqlite: the retrieval index store is not a usable SQLite database"):
        IndexStore(good)
    assert good.read_bytes() == damaged


def _docs(i):
    from harness.retrieval.index import Doc

    return [Doc(f"e{j}", j, "user", f"case {i} sentence {j} " * 50, float(j), True) for j in range(5)]


def test_a_corrupt_cache_entry_names_the_file(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache._db.execute("INSERT INTO responses VALUES ('k', '{not json')")
    with pytest.raises(StorageError, match=r"c\.sqlite: response cache entry k"):
        cache.get("k")


def _disk_fills_after(monkeypatch, n_ok: int):
    """The n_ok first record writes succeed; the next one writes half its bytes, then the disk is full."""
    calls = {"n": 0}
    real = records_mod._write

    def write(fd, data):
        calls["n"] += 1
        if calls["n"] <= n_ok:
            return real(fd, data)
        if calls["n"] == n_ok + 1:
            return real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(records_mod, "_write", write)


@pytest.mark.e2e
def test_a_full_disk_names_the_records_file_and_keeps_what_was_written(tmp_path, capsys, monkeypatch):
    _disk_fills_after(monkeypatch, 1)
    with FakeOpenAIServer(FakeModel()) as srv:
        code = run(tmp_path, "dataset.limit=3", "mode=[long_context]", base_url=srv.base_url)
    line = one_error_line(capsys.readouterr().err)
    records = tmp_path / "run" / "records.jsonl"
    assert code == 2 and f"{records}: could not be written (No space left on device)" in line
    assert "every record written before is kept" in line
    assert len(srv.requests) == 2  # the third case was not started after the failed write
    raw = records.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1  # the half-written line was cut back
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no torn line to skip
        assert len(load_records(records)) == 1
    assert "No space left on device" in (tmp_path / "run" / "FAILED.txt").read_text()


def test_every_append_after_a_failed_one_raises_the_same_error(tmp_path, monkeypatch):
    writer = RecordWriter(tmp_path / "r.jsonl")
    writer.append({"question_id": "q0", "mode": "m", "status": "ok"})
    _disk_fills_after(monkeypatch, 0)
    with pytest.raises(StorageError, match="No space left"):
        writer.append({"question_id": "q1", "mode": "m", "status": "ok", "big": "x" * 10_000})
    monkeypatch.setattr(records_mod, "_write", lambda fd, data: pytest.fail("wrote after a failure"))
    with pytest.raises(StorageError, match="No space left"):
        writer.append({"question_id": "q2", "mode": "m", "status": "ok"})
    assert [r["question_id"] for r in load_records(tmp_path / "r.jsonl")] == ["q0"]


def test_a_failed_note_or_json_write_leaves_no_empty_or_torn_file(tmp_path, monkeypatch):
    target = tmp_path / "FAILED.txt"

    class FullFile:
        def __init__(self, *a, **k):
            self.f = open(*a, **k)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            self.f.write(text[:3])
            self.f.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(storage_mod, "open", FullFile, raising=False)
    with pytest.raises(StorageError, match=f"{target}: could not be written"):
        write_text_atomic(target, "the run could not start")
    assert list(tmp_path.iterdir()) == []


def test_a_torn_last_record_line_is_skipped_with_a_warning_and_cut_on_reopen(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"question_id": "q0", "mode": "m"}) + "\n" + '{"question_id": "q1", "mo')
    with pytest.warns(UserWarning, match="torn last line"):
        assert len(load_records(path)) == 1
    with pytest.warns(UserWarning, match="discarding a torn last line"):
        RecordWriter(path)
    assert path.read_text().count("\n") == 1 and path.read_text().endswith("\n")


def test_a_corrupt_session_store_entry_names_the_file(tmp_path):
    store = SQLiteStore(tmp_path / "s.sqlite")
    store._db.execute("INSERT INTO summary_cache VALUES ('k', '{torn', 0)")
    with pytest.raises(StorageError, match=r"s\.sqlite: a stored summary cache entry is not valid JSON"):
        store.cache_get("k")
