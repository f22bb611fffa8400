"""A PostgreSQL database shared by several processes or machines: connection, schema, clear errors.

The DSN never carries the password into logs or errors: it is read from an environment variable
(`password_env`, LME_PG_PASSWORD by default) and every message names the DSN with any password masked.
Connections are per thread (psycopg connections are not meant for concurrent use) and autocommit; a
connection that broke (server restarted) is dropped, the call fails with one clear StorageError, and the
next call reconnects, so the pairs in flight fail and the same command resumes the rest.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from harness import secrets
from harness.storage import StorageError

T = TypeVar("T")
PASSWORD_ENV = "LME_PG_PASSWORD"

# One statement per table; created under an advisory lock (concurrent CREATE TABLE IF NOT EXISTS can race).
SCHEMA = """
CREATE TABLE IF NOT EXISTS lme_responses (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS lme_sessions (
  scope text NOT NULL, app text NOT NULL, user_id text NOT NULL, session_id text NOT NULL,
  updated_at double precision NOT NULL, PRIMARY KEY (scope, app, user_id, session_id));
CREATE TABLE IF NOT EXISTS lme_events (
  scope text NOT NULL, app text NOT NULL, user_id text NOT NULL, session_id text NOT NULL,
  idx integer NOT NULL, event_id text NOT NULL, body text NOT NULL,
  PRIMARY KEY (scope, app, user_id, session_id, idx));
CREATE TABLE IF NOT EXISTS lme_summaries (
  scope text NOT NULL, app text NOT NULL, user_id text NOT NULL, session_id text NOT NULL,
  filter_key text NOT NULL, body text NOT NULL, PRIMARY KEY (scope, app, user_id, session_id, filter_key));
CREATE TABLE IF NOT EXISTS lme_summary_cache (cache_key text PRIMARY KEY, body text NOT NULL,
  created_at double precision NOT NULL);
CREATE TABLE IF NOT EXISTS lme_index_tokens (key text PRIMARY KEY, n integer NOT NULL, tokens text NOT NULL,
  created double precision NOT NULL);
CREATE TABLE IF NOT EXISTS lme_index_docs (key text NOT NULL, n integer NOT NULL, pos integer NOT NULL,
  content text NOT NULL, tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
  PRIMARY KEY (key, pos));
CREATE TABLE IF NOT EXISTS lme_index_vectors (key text NOT NULL, embedder text NOT NULL, n integer NOT NULL,
  dim integer NOT NULL, seconds double precision NOT NULL, created double precision NOT NULL,
  PRIMARY KEY (key, embedder));
CREATE TABLE IF NOT EXISTS lme_index_vector_rows (key text NOT NULL, embedder text NOT NULL, pos integer NOT NULL,
  embedding vector NOT NULL, PRIMARY KEY (key, embedder, pos));
"""
_SCHEMA_LOCK = 0x6C6D655F736368  # advisory lock id ("lme_sch"): one process creates the tables at a time


_LABEL_KEYS = ("host", "hostaddr", "port", "dbname", "user")  # what a message may say about a database


def safe_dsn(dsn: str) -> str:
    """`dsn` as messages name it: a URL as `describe_endpoint` writes it, a key=value DSN by the allowlisted keys
    libpq parses out of it (host, port, dbname, user); never a password or any other parameter."""
    if "://" in dsn:
        return secrets.describe_endpoint(dsn)
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(dsn)
    except Exception:
        return "<unparsable DSN>"
    return " ".join(f"{k}={params[k]}" for k in _LABEL_KEYS if params.get(k) not in (None, ""))


class PgDatabase:
    """Thread-local autocommit connections to one database; `run(fn)` turns driver errors into StorageError."""

    def __init__(self, dsn: str, *, password_env: str = PASSWORD_ENV, connect_timeout_s: float = 10.0) -> None:
        if not dsn:
            raise StorageError(
                "store=postgres needs store.dsn=postgresql://USER@HOST:PORT/DB "
                f"(the password from ${password_env}, never in the DSN)"
            )
        problem = secrets.dsn_problem("store.dsn", dsn)  # libpq's own parser: every form of password refused
        if problem:
            raise StorageError(problem)
        self.dsn = dsn
        self.label = safe_dsn(dsn)
        self.password_env = password_env
        self.connect_timeout_s = connect_timeout_s
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        import psycopg

        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": max(1, int(self.connect_timeout_s))}
        password = os.environ.get(self.password_env)
        if password:
            kwargs["password"] = password
        conn = psycopg.connect(self.dsn, **kwargs)
        try:
            from pgvector.psycopg import register_vector

            register_vector(conn)
        except psycopg.ProgrammingError:  # no `vector` type yet: check() reports it, with the remedy
            pass
        return conn

    def conn(self) -> Any:
        c = getattr(self._local, "conn", None)
        if c is None or c.closed:
            c = self._connect()
            self._local.conn = c
            with self._lock:
                self._all.append(c)
        return c

    def _drop(self) -> None:
        c = getattr(self._local, "conn", None)
        self._local.conn = None
        if c is not None:
            try:
                c.close()
            except Exception:
                pass

    def run(self, fn: Callable[[Any], T], what: str) -> T:
        """fn(connection); a failure is one StorageError naming the database and `what` was being done."""
        import psycopg

        try:
            return fn(self.conn())
        except psycopg.OperationalError as e:  # connection refused or lost (server restarted): reconnect next time
            self._drop()
            raise StorageError(
                f"PostgreSQL {self.label}: {what} failed, the database is unreachable "
                f"({_one_line(e)}); the pairs in flight are recorded as failed: "
                f"run the same command again once the server is back to resume"
            ) from e
        except psycopg.Error as e:
            if getattr(self._local, "conn", None) is not None and self._local.conn.broken:
                self._drop()
            raise StorageError(f"PostgreSQL {self.label}: {what} failed ({_one_line(e)})") from e

    def check(self) -> str:
        """Connect, require the `vector` extension, create the tables. One StorageError otherwise; the version."""
        import psycopg

        try:
            self.conn()
        except psycopg.Error as e:
            raise StorageError(
                f"PostgreSQL {self.label}: cannot connect ({_one_line(e)}); check store.dsn "
                f"(user, host, port, database name) and the password in ${self.password_env}; "
                f"nothing was run"
            ) from e

        def setup(c: Any) -> str:
            row = c.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
            if row is None:
                available = c.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
                hint = (
                    "run CREATE EXTENSION vector; in it as its owner or a superuser"
                    if available
                    else "the server has no pgvector installed (Debian: apt-get install postgresql-NN-pgvector; "
                    "docs/cluster.md), then CREATE EXTENSION vector; in the database"
                )
                raise StorageError(
                    f"PostgreSQL {self.label}: the database has no `vector` extension: {hint}; nothing was run"
                )
            with c.transaction():
                c.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for stmt in filter(str.strip, SCHEMA.split(";")):
                    c.execute(stmt)
            from pgvector.psycopg import register_vector

            register_vector(c)
            return str(row[0])

        return self.run(setup, "opening the store")

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for c in conns:
            try:
                c.close()
            except Exception:
                pass
        self._local = threading.local()


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__
