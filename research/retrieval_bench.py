"""Retrieval benchmark: quality table + plot for every preset, then indexing and query-latency timings.

    python -m research.retrieval_bench                       # all presets, the 64 answerable _s cases
    python -m research.retrieval_bench --presets bm25 default --limit 10 --out runs/retrieval_bench

Part 1 is `lme-harness retrieval-eval dataset=s` (commands/retrieval_eval.py). Part 2 times, per preset,
a cold index build of every case (median of `--repeats` for the largest case) and `--queries` searches per
case (the question plus its keyword form and two-word slices) after indexing; numbers are wall time on
this machine, single process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from harness.config_files import CONFIG_DIR

REPO = Path(__file__).resolve().parents[1]


def timing(presets: list[str], cases, repeats: int, n_queries: int) -> dict[str, dict[str, float]]:
    import numpy as np
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from commands.retrieval_eval import preset_config
    from harness.retrieval import text as tx
    from harness.retrieval.evaluation import hidden_session

    out: dict[str, dict[str, float]] = {}
    largest = max(cases, key=lambda c: c.n_turns)
    for name in presets:
        cfg = OmegaConf.merge(preset_config(name, OmegaConf.create({})), {"store": None})
        retriever = instantiate(cfg)
        builds, lat = [], []
        for c in cases:
            events = c.events()
            session, boundary = hidden_session(c.question_id, events)
            retriever._memo.clear()
            t0 = time.perf_counter()
            tools = retriever.tools(session, boundary=boundary)
            builds.append(time.perf_counter() - t0)
            kws = tx.keyword_tokens(c.question)
            queries = [c.question, " ".join(kws)] + [" ".join(kws[i : i + 2]) for i in range(0, len(kws), 2)]
            for q in [q for q in queries if q][:n_queries]:
                t1 = time.perf_counter()
                tools.call("session_search", {"query": q})
                lat.append((time.perf_counter() - t1) * 1000)
        big = []
        for _ in range(repeats):
            retriever._memo.clear()
            t0 = time.perf_counter()
            retriever.index(largest.events())
            big.append(time.perf_counter() - t0)
        out[name] = {
            "index_s_mean": statistics.mean(builds),
            "index_s_max": max(builds),
            f"index_s_largest_case_{largest.n_turns}_turns": statistics.median(big),
            "queries": len(lat),
            "search_ms_p50": float(np.percentile(lat, 50)),
            "search_ms_p90": float(np.percentile(lat, 90)),
            "search_ms_p99": float(np.percentile(lat, 99)),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    from hydra import compose, initialize_config_dir

    from commands.retrieval_eval import DEFAULT_PRESETS, run_retrieval_eval

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", nargs="+", default=list(DEFAULT_PRESETS))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", default=str(REPO / "runs" / "retrieval_bench"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--queries", type=int, default=4)
    ap.add_argument("--skip-quality", action="store_true")
    args = ap.parse_args(argv)

    overrides = ["dataset=s", f"+retrieval_eval.presets=[{','.join(args.presets)}]"]
    if args.limit:
        overrides.append(f"+retrieval_eval.limit={args.limit}")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    out = Path(args.out)
    if not args.skip_quality:
        md = run_retrieval_eval(cfg, out)
        print(md.read_text())
    from hydra.utils import instantiate

    from commands.retrieval_eval import answerable

    cases, _ = instantiate(cfg.dataset).load()
    cases = answerable(cases)[: args.limit or None]
    t = timing(args.presets, cases, args.repeats, args.queries)
    out.mkdir(parents=True, exist_ok=True)
    (out / "retrieval_timing.json").write_text(json.dumps(t, indent=1))
    cols = list(next(iter(t.values())))
    print("| preset | " + " | ".join(cols) + " |\n" + "|---" * (len(cols) + 1) + "|")
    for name, row in t.items():
        print(f"| {name} | " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row.values()) + " |")


if __name__ == "__main__":
    main()
