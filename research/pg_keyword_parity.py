"""store=postgres: PostgreSQL full-text search vs trpc_parity's Python emulation, and store latency vs SQLite.

    python -m research.pg_keyword_parity                    # the 70 LongMemEval_s single-session-user cases
    python -m research.pg_keyword_parity --limit 10 --dsn postgresql://lme@127.0.0.1:5432/lme

Starts a throwaway PostgreSQL + pgvector on 127.0.0.1 (harness/testing/pg_server.py) unless --dsn is given.
Part 1, agreement: per case, the trpc_parity keyword search (every query term required, snowball stemming)
of the question, its keyword form and two-word slices, top-k event ids from the emulation (BM25 in Python)
vs the reference's query in PostgreSQL (`tsv @@ plainto_tsquery('english', q)` ranked by ts_rank).
Part 2, latency: index build (cold: analyse + embed + write; warm: load) and keyword search, SQLite vs
PostgreSQL, single process, wall time on this machine. Prints JSON (and writes it with --out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from harness.config_files import CONFIG_DIR


def _queries(question: str) -> list[str]:
    from harness.retrieval import text as tx

    kws = tx.keyword_tokens(question)
    qs = [question, " ".join(kws)] + [" ".join(kws[i : i + 2]) for i in range(0, len(kws), 2)]
    return list(dict.fromkeys(q for q in qs if q.strip()))[:4]


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else 0.0


def run(dsn: str, limit: int | None, k: int) -> dict:
    import numpy as np
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from harness.data.longmemeval import LongMemEvalSource
    from harness.retrieval.index import build_docs, content_hash
    from harness.retrieval.store import IndexStore
    from harness.stores.pg_index import PgIndexStore
    from harness.stores.postgres import PgDatabase

    cases, _ = LongMemEvalSource(
        name="s",
        filename="longmemeval_s_single_session_user.json.gz",
        question_types=["single-session-user"],
        limit=limit,
    ).load()
    emb_cfg = OmegaConf.load(CONFIG_DIR / "retrieval/trpc_parity.yaml").embedder
    embedder = instantiate(emb_cfg)
    db = PgDatabase(dsn)
    db.check()
    with db.conn() as c:  # a cold start for the timings
        for t in ("lme_index_tokens", "lme_index_docs", "lme_index_vectors", "lme_index_vector_rows"):
            c.execute(f"DELETE FROM {t}")
    tmp = Path(tempfile.mkdtemp(prefix="pg-parity-"))
    sqlite_store, pg_store = IndexStore(tmp / "index.sqlite"), PgIndexStore(db, fts=True)
    build: dict[str, list[float]] = {"sqlite_cold_s": [], "pg_cold_s": [], "sqlite_warm_s": [], "pg_warm_s": []}
    search: dict[str, list[float]] = {"emulation_ms": [], "postgres_fts_ms": []}
    overlaps, identical_sets, identical_lists, one_side_empty, n_q = [], 0, 0, 0, 0
    differing: list[dict] = []
    for case in cases:
        events = case.events()
        docs = build_docs(events)
        key = content_hash(events) + "|emb=0"
        for name, store in (("sqlite", sqlite_store), ("pg", pg_store)):
            t0 = time.perf_counter()
            store.load_or_build(key, docs, embedder, "snowball")
            build[f"{name}_cold_s"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            idx = store.load_or_build(key, docs, embedder, "snowball")
            build[f"{name}_warm_s"].append(time.perf_counter() - t0)
            if name == "sqlite":
                emu = idx
            else:
                pg = idx
        mask = np.ones(len(docs), dtype=bool)
        for q in _queries(case.question):
            t0 = time.perf_counter()
            a = [docs[i].event_id for i, _ in emu.keyword_search(q, mask, k, require_all=True)]
            search["emulation_ms"].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            b = [docs[i].event_id for i, _ in pg.keyword_search(q, mask, k, require_all=True)]
            search["postgres_fts_ms"].append((time.perf_counter() - t0) * 1000)
            n_q += 1
            overlaps.append(1.0 if not a and not b else len(set(a) & set(b)) / max(len(a), len(b)))
            identical_sets += set(a) == set(b)
            identical_lists += a == b
            one_side_empty += bool(a) != bool(b)
            if set(a) != set(b) and len(differing) < 8:
                differing.append({"question_id": case.question_id, "query": q, "emulation": a, "postgres": b})
    return {
        "cases": len(cases),
        "queries": n_q,
        "k": k,
        "agreement": {
            "mean_overlap_at_k": round(statistics.mean(overlaps), 4),
            "identical_sets": round(identical_sets / n_q, 4),
            "identical_order": round(identical_lists / n_q, 4),
            "one_side_empty": round(one_side_empty / n_q, 4),
            "examples_differing": differing,
        },
        "index_build_s": {
            n: {"mean": round(statistics.mean(v), 4), "p90": round(_pct(v, 90), 4)} for n, v in build.items()
        },
        "keyword_search_ms": {
            n: {"p50": round(_pct(v, 50), 3), "p90": round(_pct(v, 90), 3)} for n, v in search.items()
        },
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn", default=None, help="an existing database with `vector` (default: start a throwaway one)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--k", type=int, default=10, help="top-k compared (the tool's cap, MAX_TOP_K, is 10)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.dsn:
        result = run(a.dsn, a.limit, a.k)
    else:
        from harness.testing.pg_server import LocalPostgres

        with LocalPostgres() as server:
            result = run(server.dsn(), a.limit, a.k)
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
