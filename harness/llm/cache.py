"""Content-keyed response cache (SQLite): an identical request is answered without a model call."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from harness.secrets import redact_stored
from harness.storage import StorageError, open_sqlite


def request_key(namespace: str, model: str, messages: Any, tools: Any, params: dict[str, Any]) -> str:
    """sha256 over a canonical JSON of everything that determines the response."""
    blob = json.dumps(
        {"ns": namespace, "model": model, "messages": messages, "tools": tools or None, "params": params},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def decode_entry(raw: str, key: str, where: str, remedy: str) -> dict[str, Any]:
    """A stored reply, or one StorageError naming the store (`where`), the entry and the remedy."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise StorageError(f"{where}: response cache entry {key[:16]}... is not valid JSON ({e}); {remedy}") from e


class ResponseCache:
    """One table `responses(key, value)`; safe to share between threads and processes (WAL)."""

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a parent that is a file, no permission: before any case, naming cache.path
            raise StorageError(
                f"{self.path}: the response cache cannot be created here ({e.strerror or e}); set cache.path to a "
                f"file in a writable directory (or cache.enabled=false)"
            ) from None
        self._lock = threading.Lock()
        self._db = open_sqlite(
            self.path,
            "response cache",
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            {"responses": ("key", "value")},
            "it only holds cached model replies: they are requested again; or point cache.path elsewhere",
        )

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return decode_entry(
            row[0], key, str(self.path), "move the file aside or delete it, then run the same command again"
        )

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store `value` with registered secrets masked (an endpoint may echo a key in a successful reply)."""
        blob = json.dumps(redact_stored(value))
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", (key, blob))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class ReadOnlyCache:
    """A response cache that is consulted and never written: the plan's (`lme-harness plan` sends nothing, and
    the placeholders its stand-in model answers with must never be replayed as replies)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner  # a ResponseCache, or the PostgreSQL one (harness/stores/pg_cache.py)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        pass
