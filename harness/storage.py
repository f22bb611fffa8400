"""Files a run keeps (records, stores, caches): failures become one error naming the file and what to do.

A corrupt SQLite file is refused when it is opened, before any case runs (never deleted or rebuilt behind
the user's back); a failed write (e.g. a full disk) names the path that could not be written.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.errors import RecordError


class StorageError(RecordError):
    """A file of the run cannot be read or written; the message names it and the remedy."""


def read_json_object(path: Path, error: type[Exception]) -> dict[str, Any]:
    """The JSON object a file holds; `error` naming the file when it cannot be read or holds something else."""
    try:
        raw = json.loads(path.read_bytes())
    except (OSError, ValueError) as e:
        raise error(f"{path}: corrupt ({e})") from None
    if not isinstance(raw, dict):
        raise error(f"{path}: corrupt (a JSON {type(raw).__name__}, not an object)")
    return raw


def write_failed(path: str | Path, e: OSError, kept: str = "") -> StorageError:
    why = e.strerror or str(e)
    return StorageError(
        f"{path}: could not be written ({why}){'; ' + kept if kept else ''}; "
        f"free some space (or fix the permissions) and run the same command again"
    )


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write via a temporary file and a rename: a failed write leaves the old file (or none), never a torn one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise write_failed(path, e) from e


def open_sqlite(
    path: str | Path, what: str, schema: str, tables: Mapping[str, Sequence[str]], remedy: str
) -> sqlite3.Connection:
    """A WAL connection to `path` with `schema` applied, after checking the file is an intact SQLite
    database whose `tables` have the expected columns. StorageError (naming the file, `what` it is and
    `remedy`) otherwise; the file is left as it was."""
    path = Path(path)
    db: sqlite3.Connection | None = None
    try:
        db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        # quick_check reads every page (O(file size), ~0.1 s per 100 MB): damage deep inside the file would
        # otherwise surface as a failed record per case, each with a generic sqlite message.
        problems = [r[0] for r in db.execute("PRAGMA quick_check(5)").fetchall()]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError("integrity check failed: " + "; ".join(problems))
        for table, columns in tables.items():  # before WAL and the schema: a refused file stays byte-identical
            found = [r[1] for r in db.execute(f"PRAGMA table_info({table})").fetchall()]
            if found and found[: len(columns)] != list(columns):
                raise sqlite3.DatabaseError(f"table {table} has columns {found}, expected {list(columns)}")
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(schema)
        return db
    except sqlite3.DatabaseError as e:
        if db is not None:
            db.close()
        raise StorageError(
            f"{path}: the {what} is not a usable SQLite database ({' '.join(str(e).split())}); nothing was changed. "
            f"Move it aside or delete it ({remedy}), then run the same command again"
        ) from e
