"""Which store a run uses (`store=sqlite`, the default, or `store=postgres`): docs/cluster.md.

Kept apart from runners/replay.py so the call sites stay one line each. With PostgreSQL the database is
checked (reachable, `vector` extension, tables) when the run opens its cache, before any case runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runners.run_config import STORE_KINDS, CacheSettings, StoreSettings
from runners.setting_rules import RunConfigError

KINDS = STORE_KINDS
_DATABASES: dict[str, Any] = {}  # one PgDatabase per DSN in this process (its connections are per thread)


def database(store: StoreSettings) -> Any:
    """The checked PgDatabase of `store` (StorageError naming the DSN, without password, when unusable)."""
    from harness.stores.postgres import PASSWORD_ENV, PgDatabase

    try:
        import pgvector.psycopg  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as e:
        raise RunConfigError(f"store=postgres needs psycopg and pgvector ({e}): pip install -e '.[cluster]'") from e
    dsn = store.dsn
    db = _DATABASES.get(dsn)
    if db is None:
        db = PgDatabase(dsn, password_env=store.password_env or PASSWORD_ENV)
        db.check()
        _DATABASES[dsn] = db
    return db


def open_pg_cache(store: StoreSettings, cache: CacheSettings) -> Any:
    """With store=postgres: the checked database's response cache (None when cache.enabled=false)."""
    from harness.stores.pg_cache import PgResponseCache

    db = database(store)
    return PgResponseCache(db) if cache.enabled else None


def session_store(store: StoreSettings, run_dir: Path, scope: str) -> Any:
    """The run's session/summary store: run_dir/session_store.sqlite, or PostgreSQL rows under `scope`."""
    if store.kind == "postgres":
        from harness.stores.pg_session import PgSessionStore

        return PgSessionStore(database(store), scope)
    from harness.session.store import SQLiteStore

    return SQLiteStore(run_dir / "session_store.sqlite")


def retrieval_overrides(store: StoreSettings, retrieval: Any) -> dict[str, Any]:
    """Keyword arguments for instantiate(retrieval): with PostgreSQL, its index store instead of the file."""
    if store.kind != "postgres" or "store" not in retrieval:
        return {}
    from harness.stores.pg_index import PgIndexStore

    return {"store": PgIndexStore(database(store), fts=store.fts)}


def release() -> None:
    """Close every database connection of this process (tests; a process that ends closes them anyway)."""
    for db in _DATABASES.values():
        db.close()
    _DATABASES.clear()
