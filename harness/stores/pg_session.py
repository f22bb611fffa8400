"""The session/summary store in PostgreSQL: the API of harness.session.store.SQLiteStore.

Rows are namespaced by `scope` (the run's configuration fingerprint): runs of one configuration on
several machines share sessions and summaries, while another configuration (other event ids, prompt)
never reads them. The content-keyed summary cache is global, as its key is the whole summary input.
Writes are INSERT ... ON CONFLICT, so two processes writing the same session never duplicate a row.
"""

from __future__ import annotations

import json
import time
from typing import Any

from harness.secrets import redact_stored
from harness.session.boundary import Summary
from harness.session.events import Session
from harness.session.store import (
    SessionKey,
    event_from_dict,
    event_to_dict,
    session_key,
    summary_from_dict,
    summary_to_dict,
)
from harness.session.summary import pick_summary
from harness.storage import StorageError
from harness.stores.postgres import PgDatabase


class PgSessionStore:
    def __init__(self, db: PgDatabase, scope: str) -> None:
        self.db = db
        self.scope = scope

    def _loads(self, raw: str, what: str) -> Any:
        try:
            return json.loads(raw)
        except json.JSONDecodeError as e:
            raise StorageError(
                f"PostgreSQL {self.db.label}: a stored {what} (scope {self.scope}) is not valid JSON ({e})"
            ) from e

    def save_session(self, session: Session) -> None:
        k = (self.scope, *session_key(session))
        rows = [(*k, e.index, e.id, json.dumps(redact_stored(event_to_dict(e)))) for e in session.events]

        def write(c: Any) -> None:
            with c.transaction():
                c.execute(
                    "INSERT INTO lme_sessions VALUES (%s,%s,%s,%s,%s) ON CONFLICT (scope, app, user_id, "
                    "session_id) DO UPDATE SET updated_at = EXCLUDED.updated_at",
                    (*k, time.time()),
                )
                with c.cursor() as cur:
                    cur.executemany("INSERT INTO lme_events VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING", rows)

        self.db.run(write, "saving a session")

    def load_session(self, app: str, user_id: str, session_id: str) -> Session | None:
        k = (self.scope, app, user_id, session_id)
        where = "scope=%s AND app=%s AND user_id=%s AND session_id=%s"

        def read(c: Any) -> tuple[Any, list[Any]]:
            found = c.execute(f"SELECT 1 FROM lme_sessions WHERE {where}", k).fetchone()
            return found, c.execute(f"SELECT body FROM lme_events WHERE {where} ORDER BY idx", k).fetchall()

        found, rows = self.db.run(read, "loading a session")
        if found is None:
            return None
        return Session(session_id, user_id, app, [event_from_dict(self._loads(r[0], "event")) for r in rows])

    def delete_session(self, app: str, user_id: str, session_id: str) -> None:
        k = (self.scope, app, user_id, session_id)

        def delete(c: Any) -> None:
            with c.transaction():
                for table in ("lme_events", "lme_sessions", "lme_summaries"):
                    c.execute(f"DELETE FROM {table} WHERE scope=%s AND app=%s AND user_id=%s AND session_id=%s", k)

        self.db.run(delete, "deleting a session")

    def put_summary(self, key: SessionKey, summary: Summary) -> None:
        body = json.dumps(redact_stored(summary_to_dict(summary)))
        self.db.run(
            lambda c: c.execute(
                "INSERT INTO lme_summaries VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (scope, app, user_id, session_id, "
                "filter_key) DO UPDATE SET body = EXCLUDED.body",
                (self.scope, *key, summary.boundary.filter_key, body),
            ),
            "storing a summary",
        )

    def summaries(self, key: SessionKey) -> dict[str, Summary]:
        rows = self.db.run(
            lambda c: c.execute(
                "SELECT filter_key, body FROM lme_summaries WHERE scope=%s AND app=%s AND user_id=%s AND session_id=%s",
                (self.scope, *key),
            ).fetchall(),
            "reading summaries",
        )
        return {fk: summary_from_dict(self._loads(body, "summary")) for fk, body in rows}

    def get_summary(self, key: SessionKey, filter_key: str = "") -> Summary | None:
        return pick_summary(self.summaries(key), filter_key)

    def cache_get(self, cache_key: str) -> dict[str, Any] | None:
        row = self.db.run(
            lambda c: c.execute("SELECT body FROM lme_summary_cache WHERE cache_key=%s", (cache_key,)).fetchone(),
            "reading the summary cache",
        )
        return None if row is None else self._loads(row[0], "summary cache entry")

    def cache_put(self, cache_key: str, value: dict[str, Any]) -> None:
        self.db.run(
            lambda c: c.execute(
                "INSERT INTO lme_summary_cache VALUES (%s,%s,%s) ON CONFLICT (cache_key) DO NOTHING",
                (cache_key, json.dumps(redact_stored(value)), time.time()),
            ),
            "writing the summary cache",
        )

    def close(self) -> None:
        pass  # the connections belong to the shared PgDatabase
