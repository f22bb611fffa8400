"""CPU time of one `lme-harness report` (docs/reliability.md, the suite's wall time): most tests run the whole
benchmark in-process against a fake endpoint, and rebuilding the report is most of each such run.

    python -m scripts.report_cpu [--repeat 3]

Runs 2 cases x 3 modes on a loopback fake endpoint into a temporary folder, then times `report` on it `--repeat`
times. CPU time (process_time) is printed beside wall time because on a shared host only the CPU time compares.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from commands.cli import main as cli
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel


def _timed(argv: list[str]) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    code = cli(argv)
    if code != 0:
        raise SystemExit(f"{argv[0]} exited {code}")
    return time.process_time() - c0, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(FakeModel()) as srv:
        run_dir = Path(tmp) / "run"
        run = ["run", f"hydra.run.dir={run_dir}", "model=endpoint", f"model.base_url={srv.base_url}"]
        run += ["model.model=fake-model", f"cache.path={tmp}/cache.sqlite", "run.progress=false", "dataset.limit=2"]
        cpu, wall = _timed(run)
        print(f"run (first, with imports): cpu {cpu:.2f} s, wall {wall:.2f} s")
        for _ in range(args.repeat):
            cpu, wall = _timed(["report", str(run_dir)])
            print(f"report: cpu {cpu:.2f} s, wall {wall:.2f} s")


if __name__ == "__main__":
    main()
