"""Throughput against a fake endpoint with 200 ms latency at run.concurrency 1, 4, 16, 32.

Cases are the oracle single-session-user rows, replicated with a marker so that every request, summary
and index is distinct (nothing is served from a cache; the response cache is off). Each level runs
N = max(16, 4 × concurrency) cases × 3 modes with the default judge, so every level fills its workers the
same number of times; client.concurrency is raised with run.concurrency. Throughput = records ÷ the time
the run spent on its cases (run.json `cases_elapsed_s`: from the first case started to the last record
written; start-up, model/index loading and the report are excluded, `elapsed_s` from opening the endpoint
is kept too). Target: throughput(c) ≥ 0.8 × c × throughput(1). Medians of --repeat runs.

    python -m research.perf_concurrency [--levels 1 4 16 32] [--repeat 3] [--latency-s 0.2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from harness.data.longmemeval import find_local, read_json_bytes
from research.perf_common import emit, fake_server, loadavg, machine, median, run_harness


def replicated_dataset(n: int, path: Path) -> None:
    src = find_local("longmemeval_oracle_single_session_user.json.gz")
    if src is None:
        raise SystemExit("longmemeval_oracle_single_session_user.json.gz not found (set LME_DATA_DIR)")
    rows = [r for r in json.loads(read_json_bytes(src)) if r["question_type"] == "single-session-user"]
    out = []
    for k in range(n):
        r = json.loads(json.dumps(rows[k % len(rows)]))
        r["question_id"] = f"{r['question_id']}-r{k:03d}"
        first = r["haystack_sessions"][0][0]
        first["content"] = f"[replica {k}] " + first["content"]
        out.append(r)
    path.write_text(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16, 32])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--latency-s", type=float, default=0.2)
    ap.add_argument("--out")
    args = ap.parse_args()

    result = {"machine": machine(), "latency_s": args.latency_s, "repeat": args.repeat, "levels": {}}
    with fake_server(latency_s=args.latency_s) as srv, tempfile.TemporaryDirectory(prefix="lme-conc-") as tmp_dir:
        tmp = Path(tmp_dir)
        for c in args.levels:
            n = max(16, 4 * c)
            data = tmp / f"data{n}.json"
            if not data.exists():
                replicated_dataset(n, data)
            reps = []
            for i in range(args.repeat):
                run_dir = tmp / f"c{c}-{i}"
                res = run_harness(
                    [
                        "run",
                        f"hydra.run.dir={run_dir}",
                        "model=endpoint",
                        f"model.base_url={srv['base_url']}",
                        "model.model=fake-model",
                        f"dataset.path={data}",
                        "dataset.sha256=null",
                        "dataset.limit=null",
                        "cache.enabled=false",
                        "run.progress=false",
                        f"retrieval.store={tmp / f'idx-{c}-{i}.sqlite'}",
                        f"run.concurrency={c}",
                        f"client.concurrency={c}",
                    ],
                    log=tmp / "log.txt",
                )
                if res["code"] != 0:
                    raise SystemExit(f"run failed ({res['code']}):\n" + (tmp / "log.txt").read_text()[-3000:])
                meta = json.loads((run_dir / "run.json").read_text())
                records = sum(1 for _ in open(run_dir / "records.jsonl"))
                calls = meta["llm_stats"]["network_calls"]
                secs = meta["cases_elapsed_s"]
                reps.append(
                    {
                        "cases_elapsed_s": secs,
                        "elapsed_s": meta["elapsed_s"],
                        "records": records,
                        "calls": calls,
                        "records_per_s": round(records / secs, 3),
                        "calls_per_s": round(calls / secs, 2),
                        "cpu_s": res["cpu_s"],
                        "loadavg": loadavg(),
                    }
                )
                print(
                    f"concurrency {c} #{i + 1}: {records} records, {calls} calls in {secs} s "
                    f"({reps[-1]['records_per_s']} records/s), load {reps[-1]['loadavg']}",
                    flush=True,
                )
            result["levels"][c] = {
                "cases": n,
                "runs": reps,
                "records_per_s": median([r["records_per_s"] for r in reps]),
                "calls_per_s": median([r["calls_per_s"] for r in reps]),
            }
    base = result["levels"][args.levels[0]]["records_per_s"] / args.levels[0]
    for c, lv in result["levels"].items():
        lv["speedup"] = round(lv["records_per_s"] / base, 2)
        lv["speedup_over_concurrency"] = round(lv["speedup"] / c, 3)
        lv["target_met"] = lv["speedup_over_concurrency"] >= 0.8
    result["loadavg_at_end"] = loadavg()
    emit(result, args.out)


if __name__ == "__main__":
    main()
