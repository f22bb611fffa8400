"""Runs that should not start: a small run against an endpoint (nothing listening by default), what it left in its
run directory beyond what Hydra writes first, and its one error line."""

from __future__ import annotations

import socket

from commands.cli import main
from tests.support.fake_run import endpoint_args

HYDRA_OWN = {".hydra", "cli.log"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tmp_path, *overrides, base_url="http://127.0.0.1:9/v1"):
    return main(
        [
            "run",
            f"hydra.run.dir={tmp_path / 'run'}",
            *endpoint_args(base_url, tmp_path),
            "retrieval=bm25",
            "judge=none",
            *overrides,
        ]
    )


def left_behind(tmp_path) -> set[str]:
    d = tmp_path / "run"
    return {p.name for p in d.iterdir()} - HYDRA_OWN if d.exists() else set()


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("lme-harness: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]
