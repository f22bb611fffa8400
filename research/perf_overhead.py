"""Harness overhead on the 70 `_s` cases × 3 modes against a zero-latency fake endpoint, no judge.

Per repetition, each a real `lme-harness run` child process (the fake server is another process):
  cold      fresh run dir, empty response cache and retrieval index store  (target < 60 s; peak RSS < 2 GiB)
  cached    fresh run dir, warm response cache: every model call replayed  (target < 30 s)
  resume    the same command in the finished run dir: nothing to do
  report    `lme-harness report RUN_DIR` on the 210 records                (target < 10 s)
Figures are medians over --repeat repetitions.

    python -m research.perf_overhead [--repeat 3] [--limit N] [--out FILE]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

from research.perf_common import emit, fake_server, loadavg, machine, median, run_harness, s_data_args


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="fewer cases (a quick check)")
    ap.add_argument("--out", help="also write the JSON result here")
    ap.add_argument("--keep", help="keep the last run directory here (for perf_report / inspection)")
    args = ap.parse_args()

    result = {"machine": machine(), "repeat": args.repeat, "runs": []}
    extra = ["judge=none"] + ([f"dataset.limit={args.limit}"] if args.limit else [])
    with fake_server(latency_s=0.0) as srv:
        for i in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="lme-perf-") as tmp_dir:
                tmp = Path(tmp_dir)
                cache = tmp / "cache"
                cache.mkdir()
                common = [*extra, f"retrieval.store={cache / 'retrieval_index.sqlite'}"]
                rep: dict[str, Any] = {"loadavg": loadavg()}
                rep["cold"] = run_harness(
                    s_data_args(srv["base_url"], tmp / "cold", cache, *common), log=tmp / "cold.log"
                )
                rep["cached"] = run_harness(
                    s_data_args(srv["base_url"], tmp / "cached", cache, *common), log=tmp / "cached.log"
                )
                rep["resume"] = run_harness(
                    s_data_args(srv["base_url"], tmp / "cached", cache, *common), log=tmp / "resume.log"
                )
                rep["report"] = run_harness(["report", str(tmp / "cached")], log=tmp / "report.log")
                for name in ("cold", "cached", "resume", "report"):
                    if rep[name]["code"] != 0:
                        raise SystemExit(
                            f"{name} run failed ({rep[name]['code']}):\n" + (tmp / f"{name}.log").read_text()[-3000:]
                        )
                rep["records"] = sum(1 for _ in open(tmp / "cold" / "records.jsonl"))
                result["runs"].append(rep)
                print(
                    f"repetition {i + 1}: "
                    + ", ".join(f"{k} {rep[k]['wall_s']} s" for k in ("cold", "cached", "resume", "report"))
                    + f", cold peak RSS {rep['cold']['max_rss_mib']} MiB, load {rep['loadavg']}",
                    flush=True,
                )
                if args.keep and i == args.repeat - 1:
                    shutil.rmtree(args.keep, ignore_errors=True)
                    shutil.copytree(tmp / "cold", args.keep)
    runs = result["runs"]
    result["median"] = {
        "cold_wall_s": median([r["cold"]["wall_s"] for r in runs]),
        "cold_cpu_s": median([r["cold"]["cpu_s"] for r in runs]),
        "cold_peak_rss_mib": median([r["cold"]["max_rss_mib"] for r in runs]),
        "max_peak_rss_mib": max(r[k]["max_rss_mib"] for r in runs for k in ("cold", "cached")),
        "cached_wall_s": median([r["cached"]["wall_s"] for r in runs]),
        "resume_wall_s": median([r["resume"]["wall_s"] for r in runs]),
        "report_wall_s": median([r["report"]["wall_s"] for r in runs]),
        "records": runs[0]["records"],
    }
    m = result["median"]
    result["targets"] = {
        "cold < 60 s": m["cold_wall_s"] < 60,
        "cached < 30 s": m["cached_wall_s"] < 30,
        "report < 10 s": m["report_wall_s"] < 10,
        "peak RSS < 2 GiB": m["max_peak_rss_mib"] < 2048,
    }
    result["loadavg_at_end"] = loadavg()
    emit(result, args.out)


if __name__ == "__main__":
    main()
