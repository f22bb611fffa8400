"""A pytest plugin that times report building in the test processes (docs/reliability.md, "The suite's wall time").

Wraps `reports.render.build_report` and `reports.plots.save`, counts calls and wall seconds, and writes one JSON
file per test process (each xdist worker) into $REPORT_TIMER_DIR (default /tmp/report-timer) at exit:

    PYTHONPATH=scripts:. .venv/bin/python -m pytest -q -m "not ray" -n 2 --dist loadfile -p pytest_report_timer
    cat /tmp/report-timer/*.json

Reports built by `lme-harness` subprocesses that a test starts are not counted. Tests not marked
`figures` save each figure through tests/conftest.py's placeholder stand-in, which replaces the timed `plots.save`
for the test: `plots.save` then counts only the figures really drawn, while `build_report` still counts every report.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import time
from pathlib import Path
from types import ModuleType
from typing import Any

TOTALS: dict[str, list[float]] = {}


def _timed(module: ModuleType, name: str, key: str) -> None:
    fn = getattr(module, name)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            calls, seconds = TOTALS.setdefault(key, [0, 0.0])
            TOTALS[key] = [calls + 1, seconds + time.perf_counter() - t0]

    setattr(module, name, wrapper)


def _write() -> None:
    out = Path(os.environ.get("REPORT_TIMER_DIR", "/tmp/report-timer"))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{os.getpid()}.json").write_text(json.dumps(TOTALS))


def pytest_configure(config: Any) -> None:
    import reports.plots as plots  # callers look both names up at call time
    import reports.render as render

    _timed(render, "build_report", "build_report")
    _timed(plots, "save", "plots.save")
    atexit.register(_write)
