"""Ctrl-C (SIGINT) during a memory run keeps what a service ingested, as a kill -9 does: the unit stays open in the
ingest checkpoint and the same command attaches to it, so a paid service never ingests a case twice; and what
fails on the way out (a call answered after the run closed its response cache) is the stop's, logged as such,
not at ERROR.

In process: the stop is requested (runners/interrupt.py `STOP`, what the signal handler sets) while the first
unit's ingest (or its reader call) is in flight, and that call is held until `lme-harness run` has returned
EXIT_INTERRUPTED, with its cache and record writer closed; the pair's thread then goes on, as an abandoned thread
does until the process exits."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from commands.cli import EXIT_INTERRUPTED, main
from harness.memory.checkpoint import checkpoint_path
from harness.memory.http import MemoryServer
from harness.memory.provider import Ingest, MemorySession
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from runners.interrupt import STOP
from tests.harness.memory.test_memory_ingest_checkpoint import KEY, KEY_ENV, Recording, _args
from tests.support.fake_run import is_reader_request

pytestmark = pytest.mark.e2e


class Held(Recording):
    """The recording service whose first ingest (when `hold_ingest`) requests the stop and is held until released."""

    def __init__(self, hold_ingest: bool) -> None:
        super().__init__(attachable=True)
        self.hold_ingest = hold_ingest
        self.release = threading.Event()

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        if self.hold_ingest and not [c for c, _ in self.calls if c == "ingest"]:
            STOP.request("SIGINT")
            self.release.wait(120)
        return super().ingest(unit, sessions)


class Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record.getMessage())


def _pairs_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("pairs-")]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("during", ["ingest", "answer"])
def test_ctrl_c_keeps_the_ingested_unit_and_the_same_command_attaches_to_it(tmp_path, monkeypatch, during) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    service = Held(hold_ingest=during == "ingest")
    model = FakeModel()

    def responder(req):
        if during == "answer" and is_reader_request(req) and not service.release.is_set():
            STOP.request("SIGINT")  # the reader call in flight when the stop comes, answered after the run closed
            service.release.wait(120)
        return model(req)

    run_dir = tmp_path / "run"
    errors = Errors()
    with MemoryServer(service) as mem, FakeOpenAIServer(responder) as srv:
        args = _args(tmp_path, srv.base_url, mem.base_url)
        assert main(args) == EXIT_INTERRUPTED
        logging.getLogger().addHandler(errors)  # the run's logging is set up now: what the abandoned pair logs
        try:
            service.release.set()
            deadline = time.monotonic() + 120
            while _pairs_threads() and time.monotonic() < deadline:  # the abandoned pair runs to its end
                time.sleep(0.05)
            assert not _pairs_threads()
        finally:
            logging.getLogger().removeHandler(errors)
        (unit,) = {u for c, u in service.calls if c == "ingest"}
        assert ("teardown", unit) not in service.calls  # the ingested unit is kept on the service ...
        lines = [json.loads(x) for x in checkpoint_path(run_dir, "memory").read_text().splitlines()]
        assert [x["event"] for x in lines] == ["started", "ingested"] and {x["unit"] for x in lines} == {unit}
        question = {x["unit"]: x["key"] for x in lines}  # units are opaque: the checkpoint names their case
        assert not errors.seen, errors.seen  # ... and nothing logged at ERROR on the way out (no closed database)
        assert not [line for line in (run_dir / "cli.log").read_text().splitlines() if "][ERROR]" in line]

        n0 = len(service.calls)
        assert main(args) == 0  # the same command resumes: the kept unit is attached, not ingested again
        resumed = service.calls[n0:]
    assert ("attach", unit) in resumed and ("ingest", unit) not in resumed and ("setup", unit) not in resumed
    recs = {r["question_id"]: r for r in load_records(Path(run_dir) / "records.jsonl")}
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs.values())
    question |= {r["ingest"]["trace"][0]["unit"]: q for q, r in recs.items()}
    sent = [(question[u], session) for u, session in service.ingested]
    assert len(sent) == len(set(sent)) and len({q for q, _ in sent}) == 2  # every session sent once, over both runs
    assert recs[question[unit]]["ingest"]["trace"][0]["resumed"] is True
    assert not checkpoint_path(run_dir, "memory").exists() and not service.live
