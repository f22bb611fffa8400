"""The ingest checkpoint of a remote memory contestant (harness/memory/checkpoint.py): a real `lme-harness run` with
`mode=memory memory=http`, against a recording reference server, killed between the first unit's ingest and its
answer (SIGKILL when its reader request arrives), then resumed with the same command.

- a service that declares `attach`: every session reaches the service exactly once; the resumed run attaches to the
  unit the killed run left and the record says so (`resumed: true`, the original ingest's trace carried);
- a service that does not: the stale unit is torn down before the unit is ingested again (the service never holds
  it twice), and the record says it was re-ingested;
- either way no unit is left on the service and no checkpoint file is left in the finished run directory, and the
  checkpoint never holds the service's key.
Plus the checkpoint file's own rules: a torn last line is ignored (its unit re-ingested), any other bad line is one
error naming the file and line, and `provider-check` checks attach when the service declares it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from commands.cli import main
from harness.memory.builtin import FullContextProvider
from harness.memory.check import check_provider
from harness.memory.checkpoint import CheckpointError, IngestCheckpoint, checkpoint_path
from harness.memory.http import HttpProvider, MemoryServer
from harness.memory.provider import REQUIRED_CALLS, Capabilities, Ingest, MemorySession
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from tests.support.fake_run import fake_endpoint_args, killed_at_first_reader

KEY_ENV, KEY = "LME_TEST_MEMORY_SERVICE_KEY", "sk-memsvc-0123456789abcdef"


class Recording(FullContextProvider):
    """The reference full-context provider, recording every call; `attachable` says whether it declares attach."""

    def __init__(self, attachable: bool) -> None:
        super().__init__()
        self.attachable = attachable
        self.calls: list[tuple[str, str]] = []  # (call, unit)
        self.ingested: list[tuple[str, str]] = []  # (unit, session id) per session received
        self.live: set[str] = set()
        self._rec = threading.Lock()

    def _log(self, call: str, unit: str) -> None:
        with self._rec:
            self.calls.append((call, unit))

    def capabilities(self) -> Capabilities:
        calls = REQUIRED_CALLS | ({"attach"} if self.attachable else set())
        return Capabilities("recording", "1", frozenset(calls), concurrency=4)

    def setup(self, unit: str) -> None:
        self._log("setup", unit)
        self.live.add(unit)
        super().setup(unit)

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest:
        self._log("ingest", unit)
        with self._rec:
            self.ingested += [(unit, s.session_id) for s in sessions]
        return super().ingest(unit, sessions)

    def attach(self, unit: str) -> bool:
        self._log("attach", unit)
        return super().attach(unit)

    def teardown(self, unit: str) -> None:
        self._log("teardown", unit)
        self.live.discard(unit)
        super().teardown(unit)


def _args(tmp_path: Path, model_url: str, memory_url: str) -> list[str]:
    return [
        "run",
        f"hydra.run.dir={tmp_path / 'run'}",
        "mode=memory",
        "memory=http",
        f"memory.url={memory_url}",
        f"memory.api_key_env={KEY_ENV}",
        "run.concurrency=1",
        *fake_endpoint_args(model_url, tmp_path),
    ]


def _killed_then_resumed(
    tmp_path: Path, service: Recording, monkeypatch
) -> tuple[list[tuple[str, str]], list[dict], dict[str, str]]:
    """Run until the first unit is ingested and its reader request arrives, SIGKILL, check the checkpoint left,
    then resume in-process. The calls the service saw in the resumed run, the final records, and the question of
    every unit the service saw (units are opaque: the checkpoint and the records' ingest traces name them)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    run_dir = tmp_path / "run"
    with (
        MemoryServer(service) as mem,
        killed_at_first_reader(FakeModel(), lambda url: _args(tmp_path, url, mem.base_url), env={KEY_ENV: KEY}) as srv,
    ):
        assert not (run_dir / "records.jsonl").exists() or not load_records(run_dir / "records.jsonl")
        killed = list(service.calls)
        assert [c for c, _ in killed] == ["setup", "ingest"]  # one unit on the service, never torn down
        (stale,) = {u for _, u in killed}
        ck = checkpoint_path(run_dir, "memory")
        lines = [json.loads(x) for x in ck.read_text().splitlines()]
        assert [x["event"] for x in lines] == ["started", "ingested"]
        assert {x["unit"] for x in lines} == {stale} and lines[1]["provider"] == "recording"
        assert lines[1]["trace"]["sessions"] > 0 and "ingest_ms" in lines[1]["trace"]
        assert KEY not in ck.read_text() and KEY_ENV not in ck.read_text()  # neither the key nor where it lives
        question = {x["unit"]: x["key"] for x in lines}

        n0 = len(service.calls)
        assert main(_args(tmp_path, srv.base_url, mem.base_url)) == 0
        resumed = service.calls[n0:]
    assert not checkpoint_path(run_dir, "memory").exists()  # a finished run leaves no checkpoint
    assert not service.live  # and no unit on the service
    recs = sorted(load_records(run_dir / "records.jsonl"), key=lambda r: r["question_id"])
    assert [r["status"] for r in recs] == ["ok", "ok"]
    question |= {r["ingest"]["trace"][0]["unit"]: r["question_id"] for r in recs}
    assert question[stale] in {r["question_id"] for r in recs}
    assert set(question) == {u for _, u in service.calls}  # every unit the service saw is one of a case's
    return resumed, recs, question


@pytest.mark.process
def test_an_attachable_service_receives_each_session_once_across_a_kill_and_resume(tmp_path, monkeypatch) -> None:
    service = Recording(attachable=True)
    resumed, recs, question = _killed_then_resumed(tmp_path, service, monkeypatch)
    stale = service.calls[0][1]
    # every session of every question reached the service exactly once
    per_question = [(question[u], s) for u, s in service.ingested]
    assert len(per_question) == len(set(per_question))
    assert {q for q, _ in per_question} == {r["question_id"] for r in recs}
    # the resumed run attached to the killed run's unit: no setup or ingest for it, torn down once answered
    assert ("attach", stale) in resumed
    assert ("setup", stale) not in resumed and ("ingest", stale) not in resumed
    assert [c for c, u in resumed if u == stale] == ["attach", "teardown"]
    by_q = {r["question_id"]: r for r in recs}
    was = by_q[question[stale]]["ingest"]["trace"][0]
    assert was["resumed"] is True and was["resume"]["attached"] is True
    assert was["sessions"] > 0 and was["ingest_ms"] >= 0 and "usage" in was  # the original ingest's, carried
    (other,) = [r for q, r in by_q.items() if q != question[stale]]
    assert "resumed" not in other["ingest"]["trace"][0]  # a unit ingested in this run says nothing of resuming


@pytest.mark.process
def test_a_service_without_attach_has_the_stale_unit_torn_down_before_the_reingest(tmp_path, monkeypatch) -> None:
    service = Recording(attachable=False)
    resumed, recs, question = _killed_then_resumed(tmp_path, service, monkeypatch)
    stale = service.calls[0][1]
    assert all(c != "attach" for c, _ in service.calls)  # never asked: the service does not declare it
    q = question[stale]
    mine = [(c, u) for c, u in resumed if question[u] == q]
    # first the stale unit goes, then a fresh unit is set up, ingested, answered and torn down
    assert mine[0] == ("teardown", stale)
    assert [c for c, _ in mine[1:]] == ["setup", "ingest", "teardown"] and mine[1][1] != stale
    # ids are opaque, and the run's: the fresh unit is told the sessions by the ids the killed run used
    sessions = {u: [sid for v, sid in service.ingested if v == u] for u in (stale, mine[1][1])}
    assert sessions[stale] == sessions[mine[1][1]] and not any(sid.startswith("answer") for sid in sessions[stale])
    assert stale not in service.live
    rec = next(r for r in recs if r["question_id"] == q)
    trace = rec["ingest"]["trace"][0]
    assert trace["resumed"] is False and trace["resume"]["reingested"] is True
    assert trace["resume"]["stale_torn_down"] == 1 and "attach" in trace["resume"]["reason"]


# --- the checkpoint file's rules -------------------------------------------------------------------------------


def _ck(path: Path) -> IngestCheckpoint:
    return IngestCheckpoint(path, provider="recording", mode="memory", settings="s1")


def test_a_torn_last_line_is_ignored_with_a_warning_and_its_unit_stays_open_to_be_torn_down(tmp_path, caplog) -> None:
    path = tmp_path / "memory-ingest.memory.jsonl"
    ck = _ck(path)
    ck.started("q1", "q1.aaaa", None)
    with open(path, "a") as f:
        f.write('{"v": 1, "event": "ingested", "key": "q1", "unit": "q1.aa')  # killed mid-write
    with caplog.at_level(logging.WARNING):
        again = _ck(path)
    assert "torn last line" in caplog.text and str(path) in caplog.text
    (left,) = again.take("q1")
    assert left.unit == "q1.aaaa" and not left.ingested  # never attached: torn down and ingested again
    assert path.read_bytes().endswith(b"\n")  # cut back, so the next line is whole


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("not json at all", "not JSON"),
        ('{"v": 2, "event": "started"}', "checkpoint version 2"),
        ('{"v": 1, "event": "paused", "key": "q", "unit": "u", "at": "t"}', "unknown event 'paused'"),
        ('{"v": 1, "event": "started", "key": "q", "unit": "u", "at": "t"}', "field 'provider' missing"),
        (
            '{"v": 1, "event": "started", "key": "q", "unit": "u", "at": "t", "provider": "zep", "mode": "memory",'
            ' "settings": "s1", "scope": null}',
            "written for provider 'zep'",
        ),
    ],
)
def test_a_corrupt_or_foreign_line_is_one_error_naming_the_file_and_line(tmp_path, line: str, why: str) -> None:
    path = tmp_path / "memory-ingest.memory.jsonl"
    _ck(path).started("q0", "q0.aaaa", None)
    with open(path, "a") as f:
        f.write(line + "\n")
    with pytest.raises(CheckpointError) as e:
        _ck(path)
    assert f"{path}:2:" in str(e.value) and why in str(e.value)


@pytest.mark.e2e
def test_a_damaged_checkpoint_stops_the_run_before_any_case_with_one_error(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ck = checkpoint_path(run_dir, "memory")
    ck.write_text("garbage\n{}\n")
    service = Recording(attachable=True)
    with MemoryServer(service) as mem, FakeOpenAIServer(FakeModel()) as srv:
        assert main(_args(tmp_path, srv.base_url, mem.base_url)) == 2
    err = capsys.readouterr().err
    assert f"{ck}:1: not JSON" in err
    assert [c for c, _ in service.calls] == []  # nothing sent to the service


def test_the_checkpoint_masks_registered_secrets_and_is_removed_when_no_unit_is_open(tmp_path) -> None:
    from harness import secrets

    secrets.register(["sk-leaked-into-a-trace-123456"])
    path = tmp_path / "memory-ingest.memory.jsonl"
    ck = _ck(path)
    ck.started("q1", "q1.aaaa", "lme-q1.aaaa")
    ck.ingested("q1", "q1.aaaa", "lme-q1.aaaa", {"usage": {}, "note": "echo sk-leaked-into-a-trace-123456"})
    assert "sk-leaked-into-a-trace-123456" not in path.read_text()
    ck.done("q1", "q1.aaaa")
    assert not path.exists()


# --- provider-check ----------------------------------------------------------------------------------------------


class AttachesAnything(FullContextProvider):
    def attach(self, unit: str) -> bool:
        return True


def test_provider_check_checks_attach_when_the_service_declares_it() -> None:
    with MemoryServer(Recording(attachable=True)) as srv:
        rep = check_provider(HttpProvider(srv.base_url))
    assert rep.ok and "attach" in rep.passed
    with MemoryServer(AttachesAnything()) as srv:
        rep = check_provider(HttpProvider(srv.base_url))
    assert [n for n, _ in rep.failed] == ["attach"]
    assert "never set up" in rep.failed[0][1] and "torn down" in rep.failed[0][1]


def test_an_http_service_without_the_route_is_never_asked_to_attach() -> None:
    service = Recording(attachable=False)
    with MemoryServer(service) as srv:
        client = HttpProvider(srv.base_url)
        assert not client.capabilities().supports("attach")
        rep = check_provider(client)
    assert rep.ok and all(c != "attach" for c, _ in service.calls)
