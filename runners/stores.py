"""Which store a run uses (`store=sqlite`, the default, or `store=postgres`): docs/cluster.md.

Kept apart from runners/replay.py so the call sites stay one line each. With PostgreSQL the database is
checked (reachable, `vector` extension, tables) when the run opens its cache, before any case runs.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from runners.settings import RunConfigError

KINDS = ("sqlite", "postgres")
_DATABASES: dict[str, Any] = {}  # one PgDatabase per DSN in this process (its connections are per thread)


def store_kind(cfg: DictConfig) -> str:
    kind = str((cfg.get("store") or {}).get("kind") or "sqlite")
    if kind not in KINDS:
        raise RunConfigError(f"store.kind={kind!r} is not one of {list(KINDS)} (store=sqlite or store=postgres)")
    return kind


def database(cfg: DictConfig) -> Any:
    """The checked PgDatabase of `cfg.store` (StorageError naming the DSN, without password, when unusable)."""
    from harness.stores.postgres import PASSWORD_ENV, PgDatabase

    try:
        import pgvector.psycopg  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as e:
        raise RunConfigError(f"store=postgres needs psycopg and pgvector ({e}): pip install -e '.[cluster]'") from e
    dsn = str(cfg.store.get("dsn") or "")
    db = _DATABASES.get(dsn)
    if db is None:
        db = PgDatabase(dsn, password_env=str(cfg.store.get("password_env") or PASSWORD_ENV))
        db.check()
        _DATABASES[dsn] = db
    return db


def open_pg_cache(cfg: DictConfig, stack: contextlib.ExitStack) -> Any:
    """With store=postgres: the checked database's response cache (None when cache.enabled=false)."""
    from harness.stores.pg_cache import PgResponseCache

    db = database(cfg)
    return PgResponseCache(db) if cfg.cache.enabled else None


def session_store(cfg: DictConfig, run_dir: Path, scope: str) -> Any:
    """The run's session/summary store: run_dir/session_store.sqlite, or PostgreSQL rows under `scope`."""
    if store_kind(cfg) == "postgres":
        from harness.stores.pg_session import PgSessionStore

        return PgSessionStore(database(cfg), scope)
    from harness.session.store import SQLiteStore

    return SQLiteStore(run_dir / "session_store.sqlite")


def retrieval_overrides(cfg: DictConfig) -> dict[str, Any]:
    """Keyword arguments for instantiate(cfg.retrieval): with PostgreSQL, its index store instead of the file."""
    if store_kind(cfg) != "postgres" or "store" not in cfg.retrieval:
        return {}
    from harness.stores.pg_index import PgIndexStore

    return {"store": PgIndexStore(database(cfg), fts=bool(cfg.store.get("fts")))}


def release() -> None:
    """Close every database connection of this process (tests; a process that ends closes them anyway)."""
    for db in _DATABASES.values():
        db.close()
    _DATABASES.clear()
