"""store=postgres against a real PostgreSQL + pgvector server (the `pg_server` fixture, tests/conftest.py).

Records equal the SQLite run's; two processes sharing one database make each model call once; a wrong DSN
or a database without `vector` is one error before any case; a restart mid-run fails the pairs in flight
with a clear error and the same command resumes.
"""

import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import psycopg
import pytest

from commands.cli import main
from harness.records import load_records
from harness.retrieval.index import build_docs
from harness.session.events import Event
from harness.storage import StorageError
from harness.stores.pg_index import PgIndexStore
from harness.stores.postgres import PgDatabase, safe_dsn
from harness.testing.fake_openai import FakeOpenAIServer, Reply
from harness.testing.faults import FakeModel
from runners import store_backend as stores
from tests.support.paths import REPO
from tests.support.tagged_run import MODES, N_CASES, answer, args, dataset, stable_records

pytestmark = pytest.mark.postgres


@pytest.fixture
def db_dsn(pg_server, request):
    """A fresh database (with `vector`) per test: tests never see each other's rows."""
    name = "t_" + "".join(ch if ch.isalnum() else "_" for ch in request.node.name.lower())[:50]
    yield pg_server.create_database(name)
    stores.release()


def pg_args(tmp_path, base_url, data, name, dsn):
    return args(tmp_path, base_url, data, name) + [
        "judge=none",
        "store=postgres",
        f"store.dsn={dsn}",
        "cache.enabled=true",
    ]


def test_postgres_run_records_equal_the_sqlite_run_and_a_rerun_makes_no_call(tmp_path, db_dsn):
    data = dataset(tmp_path)
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        assert main(args(tmp_path, srv.base_url, data, "sqlite") + ["judge=none"]) == 0
        n_sqlite = len(srv.requests)
        assert main(pg_args(tmp_path, srv.base_url, data, "pg", db_dsn)) == 0
        assert len(srv.requests) == 2 * n_sqlite
        assert main(pg_args(tmp_path, srv.base_url, data, "pg2", db_dsn)) == 0  # another run dir: all from the db
        assert len(srv.requests) == 2 * n_sqlite
    assert stable_records(tmp_path / "pg") == stable_records(tmp_path / "sqlite")
    assert stable_records(tmp_path / "pg2") == stable_records(tmp_path / "sqlite")
    assert not (tmp_path / "pg" / "session_store.sqlite").exists()  # sessions went to the database
    with psycopg.connect(db_dsn) as c:
        assert c.execute("SELECT COUNT(DISTINCT scope) FROM lme_summaries").fetchone()[0] == 1
        assert c.execute("SELECT COUNT(*) FROM lme_summaries").fetchone()[0] >= N_CASES
        assert c.execute("SELECT COUNT(*) FROM lme_summary_cache").fetchone()[0] >= N_CASES


def test_two_processes_sharing_one_database_make_each_model_call_once(tmp_path, db_dsn):
    data = dataset(tmp_path)
    model = FakeModel(answer=answer)

    def slow(req):  # both processes are mid-run at once, asking for the same requests
        r = model(req)
        return Reply(r.status, r.body, r.headers, delay_s=0.2)

    with FakeOpenAIServer(FakeModel(answer=answer)) as ref:
        assert main(args(tmp_path, ref.base_url, data, "serial") + ["judge=none"]) == 0
        serial = Counter(json.dumps(r, sort_keys=True) for r in ref.requests)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with FakeOpenAIServer(slow) as srv:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "commands.cli",
                    *pg_args(tmp_path, srv.base_url, data, f"p{i}", db_dsn),
                    "run.concurrency=2",
                ],
                cwd=REPO,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for i in range(2)
        ]
        errs = [p.communicate(timeout=300)[1].decode() for p in procs]
        assert [p.returncode for p in procs] == [0, 0], errs
        made = Counter(json.dumps(r, sort_keys=True) for r in srv.requests)
    assert made == serial  # every distinct request exactly once across both processes, none missing
    assert stable_records(tmp_path / "p0") == stable_records(tmp_path / "p1") == stable_records(tmp_path / "serial")
    with psycopg.connect(db_dsn) as c:  # one summary per (case session, filter) and one cache entry per input
        assert c.execute("SELECT COUNT(*) FROM lme_summaries").fetchone()[0] == N_CASES
        assert c.execute("SELECT COUNT(*) FROM lme_summary_cache").fetchone()[0] == N_CASES


def test_session_store_round_trips_and_concurrent_writes_never_duplicate_rows(db_dsn):
    from concurrent.futures import ThreadPoolExecutor

    from harness.session.boundary import Summary, SummaryBoundary
    from harness.session.events import Session
    from harness.stores.pg_session import PgSessionStore

    db = PgDatabase(db_dsn)
    db.check()
    events = [
        Event(id=f"e{i}", index=i, role="user", author="user", content=f"turn {i}", timestamp=float(i))
        for i in range(5)
    ]
    session = Session("s1", "u1", "app", events)
    a, b = PgSessionStore(db, "fpA"), PgSessionStore(db, "fpB")
    with ThreadPoolExecutor(4) as pool:  # four writers of the same session at once
        list(pool.map(lambda _: a.save_session(session), range(4)))
    assert a.load_session("app", "u1", "s1").events == events
    assert b.load_session("app", "u1", "s1") is None  # another configuration never reads these rows
    summary = Summary("sum", SummaryBoundary(1, "", 4.0, "e4"), 4.0)
    a.put_summary(("app", "u1", "s1"), summary)
    a.put_summary(("app", "u1", "s1"), summary)
    assert a.get_summary(("app", "u1", "s1")) == summary and b.get_summary(("app", "u1", "s1")) is None
    a.cache_put("k", {"text": "x"})
    assert b.cache_get("k") == {"text": "x"}  # the content-keyed cache is shared by every configuration
    with db.conn() as c:
        assert c.execute("SELECT COUNT(*) FROM lme_events").fetchone()[0] == 5
    a.delete_session("app", "u1", "s1")
    assert a.load_session("app", "u1", "s1") is None
    db.close()


def test_wrong_dsn_is_one_error_before_any_case_naming_the_dsn_without_password(
    tmp_path, pg_server, capsys, monkeypatch
):
    data = dataset(tmp_path)
    monkeypatch.setenv("LME_PG_PASSWORD", "hunter2-secret-pw")
    bad = f"postgresql://lme@127.0.0.1:{pg_server.port}/no_such_db"
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        code = main(pg_args(tmp_path, srv.base_url, data, "bad", bad))
        assert not srv.requests
    err = capsys.readouterr().err
    assert code == 2
    # The DSN is named as scheme, host, port and path only (secrets.describe_endpoint): no userinfo
    assert f"PostgreSQL postgresql://127.0.0.1:{pg_server.port}/no_such_db: cannot connect" in err
    assert "no_such_db" in err and "hunter2-secret-pw" not in err
    assert not (tmp_path / "bad" / "records.jsonl").exists()
    stores.release()


def test_database_without_the_vector_extension_is_one_error_before_any_case(tmp_path, pg_server, capsys):
    dsn = pg_server.create_database("novector", vector=False)
    data = dataset(tmp_path)
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        assert main(pg_args(tmp_path, srv.base_url, data, "nov", dsn)) == 2
        assert not srv.requests
    err = capsys.readouterr().err
    assert f"PostgreSQL postgresql://127.0.0.1:{pg_server.port}/novector: the database has no `vector` extension" in err
    assert "CREATE EXTENSION vector" in err
    assert not (tmp_path / "nov" / "records.jsonl").exists()
    stores.release()


def test_database_restarted_mid_run_fails_the_pairs_in_flight_and_the_same_command_resumes(tmp_path, pg_server, db_dsn):
    data = dataset(tmp_path)
    model = FakeModel(answer=answer)
    seen = {"n": 0}

    def responder(req):
        seen["n"] += 1
        if seen["n"] == 4:  # the database goes away while a pair waits for its model reply
            pg_server.stop("immediate")
        return model(req)

    with FakeOpenAIServer(responder) as srv:
        argv = pg_args(tmp_path, srv.base_url, data, "restart", db_dsn)
        try:
            assert main(argv + ["run.max_consecutive_failures=0"]) == 3
            recs = load_records(tmp_path / "restart" / "records.jsonl")
            failed = [r for r in recs if r["status"] == "failed"]
            assert failed and all(
                "StorageError: PostgreSQL postgresql://" in r["error"]
                and "unreachable" in r["error"]
                and "run the same command again" in r["error"]
                for r in failed
            )
        finally:  # the session's server, for the other tests too
            if seen["n"] >= 4:
                pg_server.start()
        assert main(argv) == 0
    final = stable_records(tmp_path / "restart")
    assert len(final) == N_CASES * len(MODES) and all(r["status"] == "ok" for r in final.values())


def test_index_store_vectors_round_trip_exactly_and_fts_runs_plainto_tsquery(db_dsn):
    db = PgDatabase(db_dsn)
    db.check()
    events = [
        Event(id=f"e{i}", index=i, role="user", author="user", content=t, timestamp=float(i))
        for i, t in enumerate(["The cats were running home.", "A dog sleeps.", "My cat runs fast, cats run."])
    ]
    docs = build_docs(events)

    class Emb:
        identity = "test-emb"

        def embed(self, texts):
            return np.random.default_rng(len(texts)).standard_normal((len(texts), 8)).astype(np.float32)

    store = PgIndexStore(db, fts=True)
    built = store.load_or_build("k1", docs, Emb(), "snowball")
    loaded = PgIndexStore(db, fts=True).load_or_build("k1", docs, Emb(), "snowball")
    assert np.array_equal(built.vectors, loaded.vectors) and built.vectors.dtype == np.float32
    hits = loaded.keyword_search("running cat", np.ones(3, bool), 5, require_all=True)
    assert [i for i, _ in hits] == [2, 0]  # stems match ('run', 'cat'); doc 1 lacks them; ts_rank orders
    with db.conn() as c:
        ranks = dict(
            c.execute(
                "SELECT pos, ts_rank(to_tsvector('english', content), plainto_tsquery('english', "
                "'running cat')) FROM lme_index_docs WHERE key='k1'"
            ).fetchall()
        )
    assert [s for _, s in hits] == pytest.approx([ranks[2], ranks[0]])
    db.close()


def test_safe_dsn_names_allowlisted_parts_only_and_a_password_is_refused_in_every_form():
    """Issue 20 probe 7: libpq's parser decides (spaces around `=`, `?password=` in a URL, quoted values)."""
    assert safe_dsn("postgresql://u:pw@h:5/d?sslmode=require") == "postgresql://h:5/d"
    assert safe_dsn("host=h password=pw dbname=d") == "host=h dbname=d"
    with pytest.raises(StorageError, match="store=postgres needs store.dsn"):
        PgDatabase("")
    for dsn in (
        "postgresql://u:pw-inline@h:5/d",
        "postgresql://u@h/db?password=pw-inline",
        "host=h dbname=db password = pw-inline",
        "host=h password='pw inline' dbname=d",
    ):
        with pytest.raises(StorageError, match=r"store.dsn=\*\*\*: carries a password; .*LME_PG_PASSWORD") as e:
            PgDatabase(dsn)
        assert "inline" not in str(e.value)


def test_store_selection_reaches_the_index_store_and_rejects_unknown_kinds(db_dsn):
    from runners.run_config import CacheSettings, StoreSettings
    from runners.setting_rules import RunConfigError

    store = StoreSettings.from_config({"kind": "postgres", "dsn": db_dsn, "fts": True})
    assert stores.retrieval_overrides(store, {"store": None})["store"].fts is True
    # cache.enabled=false: no cache, but the database was checked
    assert stores.open_pg_cache(store, CacheSettings(enabled=False, path=None)) is None
    assert stores.retrieval_overrides(StoreSettings(), {"store": "x.sqlite"}) == {}  # SQLite default
    with pytest.raises(RunConfigError, match=r"store.kind='mysql' is not one of"):
        StoreSettings.from_config({"kind": "mysql"})


def test_store_postgres_without_the_driver_is_one_error_naming_the_extra(monkeypatch):
    from runners.run_config import StoreSettings
    from runners.setting_rules import RunConfigError

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    with pytest.raises(RunConfigError, match=r"store=postgres needs psycopg and pgvector .*\[cluster\]"):
        stores.database(StoreSettings(kind="postgres", dsn="postgresql://u@h/d"))
