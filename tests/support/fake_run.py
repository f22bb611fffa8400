"""A benchmark run through Hydra on the loopback fake endpoint, as the contestant tests start one: two cases,
no progress line, the run directory at tmp_path/run and a config folder of the test's own on the search path."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.paths import REPO


def conf_dir(tmp_path: Path, group: str, files: dict[str, str]) -> Path:
    """tmp_path/conf with `files` (name -> YAML text) in the config group `group`; pass it to `run_fake`."""
    folder = tmp_path / "conf" / group
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return tmp_path / "conf"


def run_fake(tmp_path: Path, overrides: list[str], *, conf: Path | None = None) -> tuple[int, list[dict[str, Any]]]:
    """(exit code, the requests the fake endpoint received) of `lme-harness run` with `overrides`."""
    from commands.cli import main
    from harness.testing.fake_openai import FakeOpenAIServer
    from harness.testing.faults import FakeModel

    search = [f"hydra.searchpath=[file://{conf}]"] if conf is not None else []
    with FakeOpenAIServer(FakeModel()) as srv:
        rc = main(
            [
                "run",
                f"hydra.run.dir={tmp_path / 'run'}",
                *search,
                *overrides,
                *fake_endpoint_args(srv.base_url, tmp_path),
            ]
        )
        return rc, list(srv.requests)


def endpoint_args(base_url: str, tmp_path: Path) -> list[str]:
    """A run's overrides for the fake endpoint: fake-model at `base_url`, tmp_path/cache.sqlite, no progress line."""
    return [
        "model=endpoint",
        f"model.base_url={base_url}",
        "model.model=fake-model",
        f"cache.path={tmp_path / 'cache.sqlite'}",
        "run.progress=false",
    ]


def fake_endpoint_args(base_url: str, tmp_path: Path) -> list[str]:
    """`endpoint_args` and two cases: the overrides every `run_fake` run shares."""
    return [*endpoint_args(base_url, tmp_path), "dataset.limit=2"]


def is_reader_request(req: dict[str, Any]) -> bool:
    """Whether a request to the fake endpoint is a memory contestant's reader call (its retrieved history shown to
    the model), as opposed to an ingest-time call such as a summary: a test kills a run when the first one comes."""
    return "History Chats" in json.dumps(req.get("messages"))


@contextmanager
def killed_at_first_reader(
    respond: Callable[[dict[str, Any]], Any],
    args_of: Callable[[str], list[str]],
    *,
    env: Mapping[str, str] | None = None,
) -> Iterator[Any]:
    """A fake endpoint answering with `respond`, and `lme-harness <args_of(its base URL)>` in a subprocess, killed
    with SIGKILL when its first reader request arrives (the first unit ingested, its answer not yet given). Yields
    the endpoint once the run is dead, so the test can resume the same command against it."""
    from harness.testing.fake_openai import FakeOpenAIServer

    proc: dict[str, subprocess.Popen] = {}

    def responder(req: dict[str, Any]) -> Any:
        if is_reader_request(req) and "p" in proc:
            proc.pop("p").send_signal(signal.SIGKILL)
        return respond(req)

    with FakeOpenAIServer(responder) as srv:
        p = subprocess.Popen(
            [sys.executable, "-m", "commands.cli", *args_of(srv.base_url)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        proc["p"] = p
        assert p.wait(450) == -signal.SIGKILL
        yield srv
