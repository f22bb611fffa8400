"""Per-case records: the source of truth of a run (JSONL, append-only, one line per finished case × mode).

Aggregates, tables and plots are derived from these files and can be rebuilt without a model.
A torn last line (a crash mid-write) is detected and skipped on read; nothing else is ever dropped.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any, Iterator

SCHEMA_VERSION = 1
RECORDS_FILE = "records.jsonl"


class RecordError(ValueError):
    pass


def record_key(rec: dict[str, Any]) -> tuple[str, str]:
    return rec["question_id"], rec["mode"]


class RecordWriter:
    """Appends one JSON line per record and fsyncs it, so a finished case survives a crash."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.error: RecordError | None = None  # set by a failed write: the run must stop, not lose records
        _truncate_torn_tail(self.path)

    def append(self, rec: dict[str, Any]) -> None:
        """Returns once the line is on disk. The lock keeps lines whole; the fsync runs outside it so that
        concurrent cases do not queue behind each other's disk flushes.

        A failed write (a full disk) is cut back to the previous line end, so the file never holds a torn
        line, and raises StorageError naming the file; every later append raises it again at once."""
        data = (json.dumps({"schema": SCHEMA_VERSION, **rec}, ensure_ascii=False, sort_keys=True) + "\n").encode()
        with self._lock:
            if self.error is not None:
                raise self.error
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            except OSError as e:
                raise self._failed(e) from e
            try:  # unbuffered: nothing is left in a buffer to be flushed (and torn) after a failure
                end = os.lseek(fd, 0, os.SEEK_END)
                view = memoryview(data)
                while view:
                    view = view[_write(fd, view):]
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, end)  # back to the previous line end: no torn line for the next load
                os.close(fd)
                raise self._failed(e) from e
        try:
            os.fsync(fd)
        except OSError as e:
            with self._lock:
                raise self._failed(e) from e
        finally:
            os.close(fd)

    def _failed(self, e: OSError) -> RecordError:
        from harness.storage import write_failed  # storage imports this module

        self.error = write_failed(self.path, e, "every record written before is kept")
        return self.error


_write = os.write  # the one call that writes record bytes (tests inject a full disk here)


def _truncate_torn_tail(path: Path) -> None:
    """Cut a partial last line (no trailing newline) left by a killed writer, before appending after it."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        data = path.read_bytes()
        cut = data.rfind(b"\n") + 1
        warnings.warn(f"{path}: discarding a torn last line ({len(data) - cut} bytes) left by an interrupted run")
        f.truncate(cut)


def iter_records(path: str | Path) -> Iterator[dict[str, Any]]:
    p = Path(path)
    if not p.exists():
        return
    lines = p.read_bytes().split(b"\n")
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            yield json.loads(raw)
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:  # torn last line: the case will simply be run again
                warnings.warn(f"{p}: skipping a torn last line")
                continue
            raise RecordError(f"{p}:{i + 1}: corrupt record ({e})") from e


def done_keys(path: str | Path) -> set[tuple[str, str]]:
    """The (question_id, mode) pairs whose newest record is scored: what a resumed run skips."""
    return {record_key(r) for r in load_records(path) if r.get("status") == "ok"}


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """All records; if a (case, mode) appears twice, the last one wins (it is the newest)."""
    by_key: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in iter_records(path):
        by_key[record_key(rec)] = rec
    return list(by_key.values())
