"""One writer per run directory (flock on RUN_DIR/run.lock), and at most one scored record per (case, mode)."""

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter

import pytest

from commands.cli import main
from harness.records import RecordWriter, load_records
from harness.runlock import RunDirLocked, run_dir_lock
from harness.testing.fake_openai import FakeOpenAIServer, Reply
from harness.testing.faults import FakeModel, request_kind
from tests.support.paths import REPO
from tests.support.tagged_run import MODES, N_CASES, answer, args, dataset

HOLD = (
    "import sys, time\nfrom harness.runlock import run_dir_lock\nwith run_dir_lock(sys.argv[1]):\n"
    "    print('locked', flush=True)\n    time.sleep(120)\n"
)


def _spawn(argv, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, *argv], cwd=REPO, env=env, **kw)


def test_second_holder_is_refused_naming_the_directory_and_the_pid(tmp_path):
    with run_dir_lock(tmp_path / "run"):
        with pytest.raises(
            RunDirLocked, match=rf"{tmp_path / 'run'}: another lme-harness process \(pid {os.getpid()}\)"
        ):
            with run_dir_lock(tmp_path / "run"):
                pass
    assert not (tmp_path / "run" / "run.lock").exists()  # removed on release: a run leaves no lock file behind
    with run_dir_lock(tmp_path / "run"):  # released on exit
        pass


@pytest.mark.process
def test_a_lock_left_by_a_killed_process_does_not_block(tmp_path, capsys):
    run_dir = tmp_path / "run"
    holder = _spawn(["-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True)
    data = dataset(tmp_path)
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        argv = args(tmp_path, srv.base_url, data, "run") + ["judge=none"]
        try:
            assert holder.stdout.readline().strip() == "locked"
            assert main(argv) == 2
            assert f"{run_dir}: another lme-harness process (pid {holder.pid})" in capsys.readouterr().err
            assert (
                not srv.requests and not (run_dir / "records.jsonl").exists() and not (run_dir / "FAILED.txt").exists()
            )
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        assert (run_dir / "run.lock").exists()  # the stale file stays; the kernel dropped the lock with its holder
        assert main(argv) == 0
    assert len(load_records(run_dir / "records.jsonl")) == N_CASES * len(MODES)


@pytest.mark.process
def test_two_runs_on_one_directory_one_refuses_and_every_pair_is_run_and_recorded_once(tmp_path, capsys):
    data = dataset(tmp_path)
    model = FakeModel(answer=answer)

    def slow(req):  # keeps the first run busy long enough for the second to collide with it
        r = model(req)
        return Reply(r.status, r.body, r.headers, delay_s=0.5)

    with FakeOpenAIServer(slow) as srv:
        argv = args(tmp_path, srv.base_url, data, "run") + ["judge=none"]
        first = _spawn(["-m", "commands.cli", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            # a hang guard, not a bound: on a loaded 2-core host a subprocess run took 119 s to its first records
            deadline = time.monotonic() + 450
            while not srv.requests and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert srv.requests, (
                f"the first run made no request: {first.stderr.read().decode() if first.poll() is not None else 'timeout'}"
            )
            assert main(argv) == 2  # refused
            assert f"{tmp_path / 'run'}: another lme-harness process (pid {first.pid})" in capsys.readouterr().err
            assert first.wait(timeout=300) == 0
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
    # every model call of one run, once: long_context and summary answer once per case, summary_ondemand searches
    # then answers, one shared summary per case
    assert Counter(request_kind(r) for r in srv.requests) == {
        "answer": 2 * N_CASES,
        "tool_answer": 2 * N_CASES,
        "summary": N_CASES,
    }
    lines = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines() if x.strip()]
    assert sorted(Counter((r["question_id"], r["mode"]) for r in lines).values()) == [1] * N_CASES * len(MODES)


def test_the_writer_refuses_a_second_scored_record_even_from_another_writer(tmp_path):
    path = tmp_path / "records.jsonl"
    a, b = RecordWriter(path), RecordWriter(path)  # two processes' writers, both opened before any record
    assert a.append({"question_id": "q1", "mode": "m", "status": "failed"})
    assert a.append({"question_id": "q1", "mode": "m", "status": "ok", "prediction": "first"})
    with pytest.warns(UserWarning, match="q1 / m already has a scored record"):
        assert b.append({"question_id": "q1", "mode": "m", "status": "ok", "prediction": "second"}) is False
    with pytest.warns(UserWarning):
        assert a.append({"question_id": "q1", "mode": "m", "status": "failed"}) is False  # would shadow the result
    assert b.append({"question_id": "q2", "mode": "m", "status": "ok"})
    assert len(path.read_text().splitlines()) == 3
    assert {r["question_id"]: r.get("prediction") for r in load_records(path)} == {"q1": "first", "q2": None}


def test_legacy_duplicates_are_read_deterministically_and_reported(tmp_path):
    path = tmp_path / "records.jsonl"
    rows = [
        {"question_id": "q1", "mode": "m", "status": "ok", "prediction": "first"},
        {"question_id": "q1", "mode": "m", "status": "ok", "prediction": "second"},
        {"question_id": "q1", "mode": "m", "status": "failed"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (rec,) = load_records(path)
    assert rec["prediction"] == "first"
    assert any("2 duplicate record(s)" in str(w.message) for w in caught)
