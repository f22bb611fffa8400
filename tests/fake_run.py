"""A benchmark run through Hydra on the loopback fake endpoint, as the contestant tests start one: two cases,
no progress line, the run directory at tmp_path/run and a config folder of the test's own on the search path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


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


def fake_endpoint_args(base_url: str, tmp_path: Path) -> list[str]:
    """The overrides every fake-endpoint run shares: the answer model at `base_url`, a cache of the test's own,
    no progress line, two cases."""
    return [
        "model=endpoint",
        f"model.base_url={base_url}",
        "model.model=fake-model",
        f"cache.path={tmp_path / 'cache.sqlite'}",
        "run.progress=false",
        "dataset.limit=2",
    ]


def is_reader_request(req: dict[str, Any]) -> bool:
    """Whether a request to the fake endpoint is a memory contestant's reader call (its retrieved history shown to
    the model), as opposed to an ingest-time call such as a summary: a test kills a run when the first one comes."""
    return "History Chats" in json.dumps(req.get("messages"))
