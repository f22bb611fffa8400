"""Scale: every LongMemEval `_s` question type × 3 modes against the zero-latency fake endpoint, dated protocol.

The release's `_s` file has 500 questions; only 285 are local (the 70 single-session-user and the 215 of the
development half; the hub is out of reach here). Two measurements, each a real `lme-harness run` child:
  real285   the 285 real questions: `dataset=s` (70) and `dataset=s_dev` (215), run one after the other
  synth500  a 500-question file built from those 285 (real haystacks; copies re-identified and marked so
            every request, summary and index is distinct), stratified like the release: per (type, abstention)
            the oracle file's counts (the oracle holds the same 500 questions); run through `dataset.path=`
Both with `+experiment=lme_dated` (session dates on events, dated question) and its per-type LongMemEval
judge on the fake model. Per dataset: cold (fresh run dir, empty response cache and index store), cached
(fresh run dir, warm cache), resume (the finished dir again), report (`lme-harness report`).

    python -m research.perf_all_types [--only s s_dev synth500] [--limit N] [--data FILE] [--out FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from harness.data.longmemeval import find_local, read_json_bytes
from research.perf_common import emit, fake_server, loadavg, machine, run_harness

S_FILES = ("longmemeval_s_single_session_user.json.gz", "longmemeval_s_dev.json.gz")
ORACLE = "longmemeval_oracle.json.gz"


def _load(filename: str) -> list[dict[str, Any]]:
    p = find_local(filename)
    if p is None:
        raise SystemExit(f"{filename} not found (set LME_DATA_DIR)")
    return json.loads(read_json_bytes(p))


def _stratum(row: dict[str, Any]) -> tuple[str, bool]:
    return row["question_type"], row["question_id"].endswith("_abs")


def _replica_id(qid: str, k: int) -> str:
    # `_abs` must stay the suffix: it is what makes a question an abstention question.
    return f"{qid[:-4]}-r{k}_abs" if qid.endswith("_abs") else f"{qid}-r{k}"


def build_synthetic(n_total: int, path: Path) -> dict[str, Any]:
    """Write `n_total` `_s` questions stratified like the release; returns the per-stratum counts."""
    target = Counter(_stratum(r) for r in _load(ORACLE))
    pools: dict[tuple[str, bool], list[dict[str, Any]]] = defaultdict(list)
    for f in S_FILES:
        for r in _load(f):
            pools[_stratum(r)].append(r)
    scale = n_total / sum(target.values())
    out: list[dict[str, Any]] = []
    counts = {}
    for key in sorted(target):
        pool = sorted(pools.get(key, []), key=lambda r: r["question_id"])
        if not pool:
            raise SystemExit(f"no local `_s` question of type {key[0]} (abstention={key[1]}) to copy")
        want = round(target[key] * scale)
        for i in range(want):
            r, k = pool[i % len(pool)], i // len(pool)
            if k:  # a copy: new id and a marker, so no request, summary or index repeats the original's
                r = json.loads(json.dumps(r))
                r["question_id"] = _replica_id(r["question_id"], k)
                first = r["haystack_sessions"][0][0]
                first["content"] = f"[replica {k}] " + first["content"]
            out.append(r)
        counts[f"{key[0]}{' (abs)' if key[1] else ''}"] = {"total": want, "real": min(want, len(pool))}
    # Non-ASCII kept raw, as in the release and the local files: decoded, such text costs up to 4 bytes a
    # character (the loader's peak), where \u escapes would make the file ASCII and the measurement kinder.
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as fh:
        json.dump(out, fh, ensure_ascii=False)
    return {"n": len(out), "strata": counts, "bytes_gz": path.stat().st_size}


def _args(base_url: str, run_dir: Path, cache: Path, dataset: list[str]) -> list[str]:
    return [
        "run",
        f"hydra.run.dir={run_dir}",
        "+experiment=lme_dated",
        *dataset,
        "model=endpoint",
        f"model.base_url={base_url}",
        "model.model=fake-model",
        "model.context_window=128000",
        "run.progress=false",
        f"cache.path={cache / 'responses.sqlite'}",
        f"retrieval.store={cache / 'retrieval_index.sqlite'}",
    ]


PHASES = ("cold", "cached", "resume", "report")


def measure(
    base_url: str, tmp: Path, name: str, dataset: list[str], phases: tuple[str, ...] = PHASES
) -> dict[str, Any]:
    """cold, cached, resume and report (of the last run dir) of one dataset; raises with the log tail on a failure."""
    cache = tmp / f"{name}-cache"
    cache.mkdir()
    rep: dict[str, Any] = {"dataset": dataset, "loadavg": loadavg()}
    last = "cold"
    for phase, run_dir in (("cold", "cold"), ("cached", "cached"), ("resume", "cached")):
        if phase in phases or phase == "cold":
            rep[phase] = run_harness(
                _args(base_url, tmp / f"{name}-{run_dir}", cache, dataset), log=tmp / f"{name}-{phase}.log"
            )
            last = run_dir
    rep["report"] = run_harness(["report", str(tmp / f"{name}-{last}")], log=tmp / f"{name}-report.log")
    phases = tuple(p for p in PHASES if p in rep)
    for phase in phases:
        if rep[phase]["code"] != 0:
            raise SystemExit(
                f"{name} {phase} failed ({rep[phase]['code']}):\n" + (tmp / f"{name}-{phase}.log").read_text()[-3000:]
            )
    recs = [json.loads(line) for line in open(tmp / f"{name}-cold" / "records.jsonl")]
    rep["records"] = len(recs)
    rep["status"] = dict(Counter(r.get("status") for r in recs))
    rep["question_types"] = dict(Counter(r.get("question_type") for r in recs))
    rep["judged"] = sum(1 for r in recs if (r.get("metrics") or {}).get("lme_acc") is not None)
    print(
        f"{name}: "
        + ", ".join(f"{p} {rep[p]['wall_s']} s / {rep[p]['max_rss_mib']} MiB" for p in phases)
        + f", load {rep['loadavg']}",
        flush=True,
    )
    return rep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--only",
        nargs="+",
        choices=("s", "s_dev", "synth500"),
        default=["s", "s_dev", "synth500"],
        help="which runs, in this order (real285 = s + s_dev)",
    )
    ap.add_argument("--n", type=int, default=500, help="questions in the synthetic file")
    ap.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES), help="cold and report always run")
    ap.add_argument("--limit", type=int, help="dataset.limit for every run (a quick check)")
    ap.add_argument("--data", help="write the synthetic file here (default: a temporary directory)")
    ap.add_argument("--out", help="also write the JSON result here")
    ap.add_argument(
        "--build-only", action="store_true", help="write the synthetic file (--data) and its counts, run nothing"
    )
    args = ap.parse_args()
    if args.build_only:
        print(json.dumps(build_synthetic(args.n, Path(args.data))))
        return

    lim = [f"dataset.limit={args.limit}", "dataset.sample_seed=0"] if args.limit else []
    result: dict[str, Any] = {"machine": machine(), "runs": {}}
    with fake_server(latency_s=0.0) as srv, tempfile.TemporaryDirectory(prefix="lme-types-") as tmp_dir:
        tmp = Path(tmp_dir)
        for name in args.only:
            if name != "synth500":
                result["runs"][name] = measure(
                    srv["base_url"], tmp, name, [f"dataset={name}", *lim], tuple(args.phases)
                )
                if args.out:  # each finished dataset is kept even if a later one is interrupted
                    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
                continue
            data = Path(args.data) if args.data else tmp / f"longmemeval_s_synth{args.n}.json.gz"
            # Built in a child process: a child's ru_maxrss starts at its parent's peak (Linux keeps the
            # high-water mark across fork/exec), so a parent that held the 500 questions would inflate every figure.
            built = subprocess.run(
                [sys.executable, __file__, "--build-only", "--n", str(args.n), "--data", str(data)],
                check=True,
                capture_output=True,
                text=True,
            )
            result["synthetic"] = json.loads(built.stdout)
            ds = [
                "dataset=s_dev",
                f"dataset.path={data}",
                "dataset.sha256=null",
                f"dataset.name=longmemeval_s_synth{args.n}",
                *lim,
            ]
            result["runs"]["synth500"] = measure(srv["base_url"], tmp, "synth500", ds, tuple(args.phases))
            if args.out:
                Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    result["loadavg_at_end"] = loadavg()
    emit(result, args.out)


if __name__ == "__main__":
    main()
