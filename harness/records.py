"""Per-case records: the source of truth of a run (JSONL, append-only, one line per finished case × mode).

Aggregates, tables and plots are derived from these files and can be rebuilt without a model.
A torn last line (a crash mid-write) is detected and skipped on read; nothing else is ever dropped.

Statuses: "ok" (answered and scored: final), "scoring_failed" (answered, a scorer such as the judge failed:
the answer, calls and usage are kept and only scoring is redone), "failed" (no answer: the pair is run again).
A (case, mode) has at most one "ok" record: the writer refuses any record after it, by construction.

The record (`Record`, one JSON object a line, keys sorted) — the one place its schema is declared:

  schema             int    the schema version (SCHEMA_VERSION); `Record.schema_version`
  question_id, mode  str    the pair's key; question_type (str), is_abstention (bool), question (str),
                            reference (the dataset's answer, as given) describe the case
  status             str    "ok" | "scoring_failed" | "failed" (above)
  error              str?   why the pair failed; on an "ok" record a model-level problem that was scored anyway
  prediction         str?   the trimmed final answer (None when failed)
  metrics            {name: float | None}  the scorers' values (keys: their MetricSpec names); None = not computed
  usage              {final_prompt_tokens, prompt_tokens_total, completion_tokens_total, cached_tokens_total,
                      summary_prompt_tokens, summary_completion_tokens, answer_calls, cache_hits, embedding_tokens?}
  latency            {query_ms, wall_ms, query_ms_reference?, ...}; a failed record has wall_ms only
  answered records only (status ok / scoring_failed; absent on a failed one):
  metric_details     {scorer class name: details}     calls        [answer call records: content, usage, ...]
  tool_calls         [tool trace]   n_search, n_load int   truncation {truncated, ...}   summary {text, calls, ...}
  final_messages     int (messages in the final request)
  written when set:  scoring_error (str: why scoring failed), rescored_from (source run dir), embedding_calls,
                     reference_latency_calls, truncated / truncated_fields (harness/bounds.py cut a field),
                     ingest {calls, prompt_tokens, completion_tokens, embedding_tokens, model_ms, wall_ms, trace?}:
                     the contestant's ingest step, apart from answering (`usage`/`latency` stay the pair's
                     figures as before: summary tokens in `usage.summary_*`, every embedding in embedding_tokens)
  any other key is kept as is (`Record.extra`) and written back unchanged.

Earlier versions: every file since the first release carries "schema": 1; records of releases before
"model-level errors are scored" hold status "error" (answered, but not final under today's rules): they load as
"failed" with their error kept, which is how today's code already treated them (counted failed, run again).
A line without "schema" is read as version 1. `migrate` is the one place such rules live.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness import secrets
from harness.errors import RecordError
from harness.storage import write_failed

SCHEMA_VERSION = 1
RECORDS_FILE = "records.jsonl"
STATUS_OK = "ok"
STATUS_SCORING_FAILED = "scoring_failed"
STATUS_FAILED = "failed"


LEGACY_STATUS_ERROR = "error"  # releases before "model-level errors are scored"


def migrate(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A record line of any earlier version in today's shape (see the module docstring); a copy."""
    d = dict(raw)
    d.setdefault("schema", SCHEMA_VERSION)
    if d.get("status") == LEGACY_STATUS_ERROR:
        d["status"] = STATUS_FAILED
    if "is_abstention" not in d and isinstance(d.get("question_id"), str):
        d["is_abstention"] = "_abs" in d["question_id"]  # LongMemEval marks abstention questions in the id
    return d


_ALWAYS = (
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
)
_ANSWERED = ("metric_details", "calls", "tool_calls", "n_search", "n_load", "truncation", "summary", "final_messages")
_WHEN_SET = (
    "scoring_error",
    "rescored_from",
    "embedding_calls",
    "reference_latency_calls",
    "truncated",
    "truncated_fields",
    "ingest",
)


@dataclass
class Record:
    """One finished (case, mode): the source of truth of a run (fields: the module docstring)."""

    question_id: str
    mode: str
    status: str = STATUS_FAILED
    question_type: str | None = None
    is_abstention: bool = False
    question: str | None = None
    reference: Any = None
    error: str | None = None
    prediction: str | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    latency: dict[str, Any] = field(default_factory=dict)
    metric_details: dict[str, Any] | None = None
    calls: list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    n_search: int | None = None
    n_load: int | None = None
    truncation: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    final_messages: int | None = None
    scoring_error: str | None = None
    rescored_from: str | None = None
    embedding_calls: list[dict[str, Any]] | None = None
    reference_latency_calls: list[dict[str, Any]] | None = None
    truncated: bool | None = None
    truncated_fields: dict[str, int] | None = None
    ingest: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not know, kept as written
    schema_version: int = SCHEMA_VERSION

    @property
    def key(self) -> tuple[str, str]:
        return self.question_id, self.mode

    @property
    def answered(self) -> bool:
        """The record holds the answer model's output (scored or waiting to be scored again)."""
        return self.status in (STATUS_OK, STATUS_SCORING_FAILED)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Record:
        """A record line of any version (migrated); one RecordError naming the key when it has no pair key."""
        d = migrate(raw)
        missing = [k for k in ("question_id", "mode") if not isinstance(d.get(k), str)]
        if missing:
            raise RecordError(f"record without {' and '.join(missing)}: {str(dict(raw))[:200]}")
        known = {f.name for f in fields(cls)} - {"extra", "schema_version"}
        return cls(
            **{k: v for k, v in d.items() if k in known},
            extra={k: v for k, v in d.items() if k not in known and k != "schema"},
            schema_version=int(d["schema"]),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object written (the same keys as records always had: answer fields only when answered)."""
        out: dict[str, Any] = {"schema": self.schema_version}
        out.update({k: getattr(self, k) for k in _ALWAYS})
        if self.answered:
            out.update({k: getattr(self, k) for k in _ANSWERED})
        out.update({k: getattr(self, k) for k in _WHEN_SET if getattr(self, k) is not None})
        out.update(self.extra)
        return out


def record_key(rec: Record | Mapping[str, Any]) -> tuple[str, str]:
    return rec.key if isinstance(rec, Record) else (rec["question_id"], rec["mode"])


def has_answer(rec: Record | Mapping[str, Any]) -> bool:
    """The record holds the answer model's output (scored or waiting to be scored again)."""
    if isinstance(rec, Record):
        return rec.answered
    return rec.get("status") in (STATUS_OK, STATUS_SCORING_FAILED)


class RecordWriter:
    """Appends one JSON line per record and fsyncs it, so a finished case survives a crash.

    A record for a (case, mode) that already has an "ok" record in the file is refused (append returns False,
    with a warning): the first scored result stands. The check also sees lines other processes appended,
    because each append rereads the file's new tail under an exclusive flock before writing.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.error: RecordError | None = None  # set by a failed write: the run must stop, not lose records
        _truncate_torn_tail(self.path)
        self._done: set[tuple[str, str]] = set()
        self._offset = 0  # bytes of the file already folded into _done

    def _catch_up(self, fd: int) -> None:
        """Fold complete lines past `_offset` into `_done` (lines other writers appended meanwhile)."""
        size = os.fstat(fd).st_size
        tail = os.pread(fd, size - self._offset, self._offset) if size > self._offset else b""
        end = tail.rfind(b"\n") + 1
        for raw in tail[:end].split(b"\n"):
            try:
                rec = json.loads(raw) if raw.strip() else None
            except json.JSONDecodeError:
                continue  # load_records reports corruption; the writer only needs the keys it can read
            if isinstance(rec, dict) and rec.get("status") == STATUS_OK and {"question_id", "mode"} <= rec.keys():
                self._done.add(record_key(rec))
        self._offset += end

    def append(self, rec: Record | dict[str, Any]) -> bool:
        """Returns once the line is on disk (True), or False when the pair already has an "ok" record.
        The thread lock keeps lines whole; the flock orders writers of other processes; the fsync runs outside
        the thread lock so that concurrent cases do not queue behind each other's disk flushes.

        A failed write (a full disk) is cut back to the previous line end, so the file never holds a torn
        line, and raises StorageError naming the file; every later append raises it again at once."""
        doc: dict[str, Any] = rec.to_json() if isinstance(rec, Record) else {"schema": SCHEMA_VERSION, **rec}
        doc = secrets.redact_obj(doc)  # an endpoint may echo a key into an error or an answer
        data = (json.dumps(doc, ensure_ascii=False, sort_keys=True) + "\n").encode()
        key = record_key(doc)
        with self._lock:
            if self.error is not None:
                raise self.error
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            except OSError as e:
                raise self._failed(e) from e
            end = None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd closes
                self._catch_up(fd)
                if key in self._done:
                    os.close(fd)
                    warnings.warn(
                        f"{self.path}: {key[0]} / {key[1]} already has a scored record; "
                        f"this {doc.get('status')!r} record was not written (the first result stands)"
                    )
                    return False
                end = os.lseek(fd, 0, os.SEEK_END)
                view = memoryview(data)  # unbuffered: nothing is left in a buffer to be flushed (and torn) later
                while view:
                    view = view[_write(fd, view) :]
            except OSError as e:
                if end is not None:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, end)  # back to the previous line end: no torn line for the next load
                os.close(fd)
                raise self._failed(e) from e
            self._offset = end + len(data)
            if doc.get("status") == STATUS_OK:
                self._done.add(key)
        try:
            os.fsync(fd)
        except OSError as e:
            with self._lock:
                raise self._failed(e) from e
        finally:
            os.close(fd)
        return True

    def _failed(self, e: OSError) -> RecordError:
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
            rec = json.loads(raw)
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:  # torn last line: the case will simply be run again
                warnings.warn(f"{p}: skipping a torn last line")
                continue
            raise RecordError(f"{p}:{i + 1}: corrupt record ({e})") from e
        except (ValueError, RecursionError) as e:  # valid JSON Python will not parse (4300+ digits, deep nesting)
            raise RecordError(f"{p}:{i + 1}: corrupt record ({type(e).__name__}: {str(e)[:200]})") from None
        if not isinstance(rec, dict):
            raise RecordError(f"{p}:{i + 1}: corrupt record (a JSON {type(rec).__name__}, not an object)")
        yield rec


def done_keys(path: str | Path) -> set[tuple[str, str]]:
    """The (question_id, mode) pairs whose record is scored ("ok"): what a resumed run or rescore skips.
    A "scoring_failed" pair is not done: its scoring is redone (its answer is kept)."""
    return {record_key(r) for r in load_records(path) if r.get("status") == STATUS_OK}


def read_records(path: str | Path) -> list[Record]:
    """`load_records`, typed (each line migrated to today's schema)."""
    return [Record.from_json(r) for r in load_records(path)]


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """One record per (case, mode), as JSON objects migrated to today's schema (`read_records`: typed): the newest,
    except that the first "ok" record is final.

    The writer never appends after an "ok" record; a file written before that rule (e.g. by two runs on one
    directory at once) may hold more, and those later lines are ignored, with one warning that counts them.
    """
    by_key: dict[tuple[str, str], dict[str, Any]] = {}
    ignored = 0
    for rec in map(migrate, iter_records(path)):
        if not isinstance(rec.get("question_id"), str) or not isinstance(rec.get("mode"), str):
            raise RecordError(f"{path}: a record without question_id or mode: {str(rec)[:200]}")
        key = record_key(rec)
        if by_key.get(key, {}).get("status") == STATUS_OK:
            ignored += 1
            continue
        by_key[key] = rec
    if ignored:
        warnings.warn(
            f"{path}: {ignored} duplicate record(s) of already scored (case, mode) pairs ignored "
            f"(the first scored record of each pair is kept)"
        )
    return list(by_key.values())
