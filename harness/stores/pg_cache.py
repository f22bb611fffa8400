"""The response cache in PostgreSQL: one table shared by every process, and in-flight dedupe.

`claim(key)` holds a session-level advisory lock on the key while the caller looks it up, calls the model
on a miss and stores the reply: a second process (or thread) asking for the same request waits, then
finds the stored reply, so each model call is made once across every process sharing the database.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

from harness.llm.cache import decode_entry
from harness.secrets import redact_stored
from harness.storage import StorageError
from harness.stores.postgres import PgDatabase


def _lock_id(key: str) -> int:
    return int(key[:15], 16)  # 60 bits of the sha256 key: a signed bigint, collisions only serialize


class PgResponseCache:
    """Same interface as harness.llm.cache.ResponseCache (get, put, len, close) plus `claim`."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self.path = db.label  # what messages name (the SQLite cache names its file)
        self._claims = threading.Lock()
        self._held: dict[str, threading.Lock] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        row = self.db.run(
            lambda c: c.execute("SELECT value FROM lme_responses WHERE key = %s", (key,)).fetchone(),
            "reading the response cache",
        )
        if row is None:
            return None
        return decode_entry(
            row[0], key, f"PostgreSQL {self.db.label}", f"DELETE FROM lme_responses WHERE key = '{key}', then run again"
        )

    def put(self, key: str, value: dict[str, Any]) -> None:
        blob = json.dumps(redact_stored(value))
        self.db.run(
            lambda c: c.execute(
                "INSERT INTO lme_responses (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (key, blob),
            ),
            "writing the response cache",
        )

    @contextlib.contextmanager
    def claim(self, key: str) -> Iterator[None]:
        """Exclusive right to answer `key` (threads of this process, then other processes)."""
        with self._claims:
            local = self._held.setdefault(key, threading.Lock())
        with local:  # advisory locks are per connection and re-entrant: threads first queue here
            self.db.run(lambda c: c.execute("SELECT pg_advisory_lock(%s)", (_lock_id(key),)), "claiming a request")
            try:
                yield
            finally:
                try:
                    self.db.run(
                        lambda c: c.execute("SELECT pg_advisory_unlock(%s)", (_lock_id(key),)), "releasing a request"
                    )
                except StorageError:
                    pass  # a lost connection released its locks already
                with self._claims:
                    self._held.pop(key, None)

    def __len__(self) -> int:
        return int(
            self.db.run(
                lambda c: c.execute("SELECT COUNT(*) FROM lme_responses").fetchone()[0], "counting the response cache"
            )
        )

    def close(self) -> None:
        self.db.close()
