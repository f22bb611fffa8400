"""Shared pieces of the performance studies (research/perf_*.py; results in docs/PERFORMANCE.md).

The fake model server runs in its own process (harness/testing/faults.py), so time and memory figures
are the harness's alone; every harness run is a real `lme-harness run` subprocess whose peak RSS is
read from the kernel (wait4).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def fake_server(*, latency_s: float = 0.0, usage: str = "chars4", mix: str | None = None) -> Iterator[dict[str, Any]]:
    """Start the fake model server; yields {"base_url", "stats"} (stats filled in after it stops)."""
    with tempfile.TemporaryDirectory(prefix="lme-fake-") as tmp:
        port_file, stats_file = Path(tmp) / "port", Path(tmp) / "stats.json"
        cmd = [
            sys.executable,
            "-m",
            "harness.testing.faults",
            "--port-file",
            str(port_file),
            "--stats-file",
            str(stats_file),
            "--latency-s",
            str(latency_s),
            "--usage",
            usage,
        ]
        if mix:
            cmd += ["--mix", mix]
        proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        info: dict[str, Any] = {"stats": None}
        try:
            deadline = time.monotonic() + 60
            while not port_file.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("fake server did not start")
                time.sleep(0.05)
            info["base_url"] = f"http://127.0.0.1:{port_file.read_text().strip()}/v1"
            yield info
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
            if stats_file.exists():
                info["stats"] = json.loads(stats_file.read_text())


def run_harness(args: Sequence[str], *, env: dict[str, str] | None = None, log: Path | None = None) -> dict[str, Any]:
    """`lme-harness ARGS` as a child process: exit code, wall seconds, peak RSS (MiB) of the harness process."""
    cmd = [sys.executable, "-m", "commands.cli", *args]
    out = open(log, "wb") if log else None
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdout=subprocess.DEVNULL if out is None else out,
        stderr=subprocess.STDOUT,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if out is not None:
        out.close()
    return {
        "code": proc.returncode,
        "wall_s": round(wall, 2),
        "max_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
    }


def s_data_args(base_url: str, run_dir: Path, cache_dir: Path, *extra: str) -> list[str]:
    """The `_s` benchmark against the fake endpoint, with gpt-4o-mini's context window (as in the published run)."""
    return [
        "run",
        f"hydra.run.dir={run_dir}",
        "dataset=s",
        "model=endpoint",
        f"model.base_url={base_url}",
        "model.model=fake-model",
        "model.context_window=128000",
        "run.progress=false",
        f"cache.path={cache_dir / 'responses.sqlite'}",
        *extra,
    ]


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_at_start": loadavg(),
    }


def median(xs: Sequence[float]) -> float:
    return round(statistics.median(xs), 2)


def emit(result: dict[str, Any], out: str | None) -> None:
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        Path(out).write_text(text + "\n")
