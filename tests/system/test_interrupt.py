"""Ctrl-C and SIGTERM stop a run in order (issue 21 item 4, issue 20 probe 13): real signals to a real
`lme-harness run` process, against a fake endpoint whose calls then hang (an openai call in flight cannot be
interrupted). The first signal: a message at once, no new pair, the queued ones cancelled, the embedded server
stopped, run.json and a partial report written, exit EXIT_INTERRUPTED; nothing is recorded as an outcome it did
not have, and the same command resumes. A second signal exits at once (130). A multirun sweep stops too.

The embedded server is a stand-in process (an OpenAI-compatible fake that ignores SIGTERM, worse than llama.cpp's
uvicorn, which waits for the requests in flight) started through the real `LlamaServer` by a driver that calls
`commands.cli.main`; the plain endpoint runs `python -m commands.cli` itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from commands.cli import EXIT_INTERRUPTED, main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer, Reply
from harness.testing.faults import FakeModel
from tests.support.paths import REPO
from tests.support.tagged_run import MODES, N_CASES, answer, attribute
from tests.support.tagged_run import args as endpoint_args
from tests.support.tagged_run import dataset as tagged_dataset
from tests.system.test_server_death import run_args as embedded_args
from tests.system.test_server_death import weights  # noqa: F401  (a fixture)

pytestmark = pytest.mark.process  # tests/README.md: every test here starts a process

HANG_S = 600.0  # a hung call: far longer than any stop may take
TOTAL = N_CASES * len(MODES)

STAND_IN = textwrap.dedent("""
    import os, pathlib, signal, sys, time
    from harness.testing.fake_openai import FakeOpenAIServer, Reply
    from harness.testing.faults import FakeModel
    port, flag = int(sys.argv[1]), pathlib.Path(sys.argv[2])
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    model = FakeModel()

    def responder(req):
        if flag.exists():  # the test asked for hung calls
            (flag.parent / "hanging").touch()
            time.sleep(600)
        r = model(req)
        return Reply(r.status, r.body, r.headers, 0.05)

    (flag.parent / "server.pid").write_text(str(os.getpid()))
    with FakeOpenAIServer(responder, port=port, record=False):
        while True:
            time.sleep(60)
""")

DRIVER = textwrap.dedent("""
    import sys
    from harness.llm import local_server

    script, flag = sys.argv[1], sys.argv[2]

    class StandIn(local_server.LlamaServer):
        def __init__(self, spec, **kw):
            super().__init__(spec, command=lambda port: [sys.executable, script, str(port), flag], **kw)

    local_server.LlamaServer = StandIn
    from commands.cli import main

    sys.argv = [sys.argv[0], *sys.argv[3:]]
    sys.exit(main())  # as the `lme-harness` entry point calls it
""")


def _with(args: list[str], **overrides: str) -> list[str]:
    keys = {f"{k.replace('__', '.')}=" for k in overrides}
    return [a for a in args if not any(a.startswith(k) for k in keys)] + [
        f"{k.replace('__', '.')}={v}" for k, v in overrides.items()
    ]


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _wait(cond, proc: subprocess.Popen, err: Path, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert proc.poll() is None, f"the run ended first (exit {proc.returncode}): {err.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting; stderr: {err.read_text()[-3000:]}"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) is not running
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _spawn(cmd: list[str], tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    err = tmp_path / "stderr.txt"
    with open(err, "wb") as f:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.DEVNULL,
            stderr=f,
            start_new_session=True,  # the test's own terminal signals stay away
        )
    return proc, err


def _hanging_responder():
    """A fake model whose calls hang (HANG_S) once `hang["on"]` is set: a call in flight that never comes back."""
    model = FakeModel(answer=answer)
    hang = {"on": False}

    def responder(req):
        r = model(req)
        return Reply(r.status, r.body, r.headers, HANG_S if hang["on"] else 0.05)

    return responder, hang


def _check_interrupted_run_dir(run_dir: Path) -> list[dict]:
    recs = load_records(run_dir / "records.jsonl")
    assert recs and all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]  # no stop-made outcome
    assert len(recs) < TOTAL
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["state"] == "interrupted"
    assert meta["invocations"][-1]["pairs_run"] == len(recs)
    assert (run_dir / "report.md").exists() and (run_dir / "report.html").exists()  # the partial report
    assert not (run_dir / "FAILED.txt").exists()  # an interrupt is not a failure
    return recs


@contextlib.contextmanager
def _endpoint_run_until_a_call_hangs(tmp_path: Path):
    """`lme-harness run` (a process) on a fake endpoint, once two pairs are recorded and the next call hangs:
    (process, its stderr file, the run directory, the server, the run's arguments, the hang switch). The process
    is killed if it still runs at the end."""
    data = tagged_dataset(tmp_path)
    responder, hang = _hanging_responder()
    run_dir = tmp_path / "run"
    with FakeOpenAIServer(responder) as srv:
        args = _with(endpoint_args(tmp_path, srv.base_url, data, "run"), run__concurrency="2")
        proc, err = _spawn([sys.executable, "-m", "commands.cli", *args], tmp_path)
        try:
            _wait(lambda: _lines(run_dir / "records.jsonl") >= 2, proc, err)
            hang["on"] = True
            n = len(srv.requests)
            _wait(lambda: len(srv.requests) > n, proc, err)  # a call is in flight, and will not come back
            yield proc, err, run_dir, srv, args, hang
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)


def test_sigint_stops_in_order_abandons_the_hung_calls_and_the_same_command_resumes(tmp_path):
    with _endpoint_run_until_a_call_hangs(tmp_path) as (proc, err, run_dir, srv, args, hang):
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        proc.wait(60)
        stopped_s = time.monotonic() - t0
        assert proc.returncode == EXIT_INTERRUPTED, err.read_text()[-3000:]
        assert stopped_s < HANG_S / 10  # the hung call was abandoned, not waited for
        text = err.read_text()
        assert "SIGINT: stopping" in text and "the same command resumes" in text
        assert "run interrupted" in text and "Traceback" not in text
        finished = {(r["question_id"], r["mode"]) for r in _check_interrupted_run_dir(run_dir)}

        hang["on"] = False
        n0 = len(srv.requests)
        assert main(args) == 0  # the same command resumes and completes
        rerun = [attribute(q) for q in srv.requests[n0:]]
    assert rerun and not [r for r in rerun if r in finished], "a pair recorded before the stop was run again"
    recs = load_records(run_dir / "records.jsonl")
    assert sorted((r["question_id"], r["mode"]) for r in recs) == sorted(
        (f"q{i}", m) for i in range(N_CASES) for m in MODES
    )
    assert json.loads((run_dir / "run.json").read_text())["state"] == "finished"


def _embedded(tmp_path: Path, model_files: dict[str, str]) -> tuple[list[str], Path]:
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    (tmp_path / "driver.py").write_text(DRIVER)
    flag = tmp_path / "hang"
    args = embedded_args(tmp_path, model_files)
    return [sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "stand_in.py"), str(flag), *args], flag


def _start_embedded_until_a_call_hangs(tmp_path: Path, model_files: dict[str, str]):
    """A run on the stand-in embedded server, once one pair is recorded and the next call hangs in the server:
    (process, its stderr file, the run directory, the server's pid)."""
    cmd, flag = _embedded(tmp_path, model_files)
    run_dir = tmp_path / "run"
    proc, err = _spawn(cmd, tmp_path)
    try:
        _wait(lambda: _lines(run_dir / "records.jsonl") >= 1, proc, err)
        flag.touch()
        _wait(lambda: (tmp_path / "hanging").exists(), proc, err)
    except BaseException:
        proc.kill()
        proc.wait(30)
        raise
    return proc, err, run_dir, int((tmp_path / "server.pid").read_text())


def test_sigterm_stops_the_embedded_server_that_ignores_it_and_leaves_no_process(tmp_path, weights):  # noqa: F811
    proc, err, run_dir, server = _start_embedded_until_a_call_hangs(tmp_path, weights)
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == EXIT_INTERRUPTED, err.read_text()[-3000:]
    assert "SIGTERM: stopping" in err.read_text()
    assert not _alive(server), "the embedded server outlived the run"
    _check_interrupted_run_dir(run_dir)


def test_a_second_sigint_exits_at_once_and_kills_the_embedded_server(tmp_path, weights):  # noqa: F811
    proc, err, run_dir, server = _start_embedded_until_a_call_hangs(tmp_path, weights)
    try:
        proc.send_signal(signal.SIGINT)  # the stop waits 1 s for the server (which ignores SIGTERM) ...
        # ... once the first is handled (a fixed sleep could let both land before the handler ran: one delivery) ...
        _wait(lambda: "SIGINT: stopping" in err.read_text(), proc, err, timeout_s=60)
        proc.send_signal(signal.SIGINT)  # ... a second Ctrl-C does not wait
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 128 + signal.SIGINT, err.read_text()[-3000:]
    assert "SIGINT again: exiting now" in err.read_text()
    assert not _alive(server), "the embedded server outlived the run"
    recs = load_records(run_dir / "records.jsonl")
    assert recs and all(r["status"] == "ok" for r in recs)


def test_sigint_stops_a_multirun_sweep(tmp_path):
    data = tagged_dataset(tmp_path)
    responder, hang = _hanging_responder()
    sweep = tmp_path / "sweep"
    with FakeOpenAIServer(responder) as srv:
        args = [a for a in endpoint_args(tmp_path, srv.base_url, data, "run") if not a.startswith("hydra.run.dir=")]
        cmd = [sys.executable, "-m", "commands.cli", "run", "-m", *args[1:]]
        cmd += [f"hydra.sweep.dir={sweep}", "prompt=trpc_default,state_recovery"]
        proc, err = _spawn(cmd, tmp_path)
        try:
            _wait(lambda: any(_lines(p) >= 2 for p in sweep.glob("*/records.jsonl")), proc, err)
            hang["on"] = True
            n = len(srv.requests)
            _wait(lambda: len(srv.requests) > n, proc, err)
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
    assert proc.returncode == EXIT_INTERRUPTED, err.read_text()[-3000:]
    assert "the sweep stopped" in err.read_text()
    jobs = [p for p in sweep.iterdir() if p.is_dir()]
    assert len(jobs) == 1, f"a later job of the sweep started: {jobs}"  # the second prompt never ran
    _check_interrupted_run_dir(jobs[0])


def test_sigint_while_the_model_loads_exits_at_once_with_nothing_recorded(tmp_path, weights):  # noqa: F811
    cmd, _flag = _embedded(tmp_path, weights)
    # a server that never gets ready (a long model load)
    (tmp_path / "stand_in.py").write_text(
        "import os, pathlib, sys, time\n"
        "(pathlib.Path(sys.argv[2]).parent / 'server.pid').write_text(str(os.getpid()))\n"
        "time.sleep(600)\n"
    )
    run_dir = tmp_path / "run"
    proc, err = _spawn(cmd, tmp_path)
    try:
        _wait(lambda: (tmp_path / "server.pid").exists(), proc, err)
        server = int((tmp_path / "server.pid").read_text())
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    text = err.read_text()
    assert proc.returncode == EXIT_INTERRUPTED, text[-3000:]
    assert "SIGINT: stopping" in text and "stopped before the first (case, mode) pair" in text
    assert "Traceback" not in text
    assert not _alive(server), "the embedded server outlived the run"
    assert not (run_dir / "records.jsonl").exists() and not (run_dir / "FAILED.txt").exists()


def test_a_second_sigint_right_after_the_first_still_leaves_run_json_interrupted(tmp_path):
    """`timeout` sends its signals 30 ms apart: the second exits at once (130), before the orderly stop has
    rewritten run.json, which must not be left saying "running" (issue 38 item 6)."""
    with _endpoint_run_until_a_call_hangs(tmp_path) as (proc, err, run_dir, _srv, _args, _hang):
        # a call hangs: the orderly stop waits its grace before it writes run.json
        assert json.loads((run_dir / "run.json").read_text())["state"] == "running"
        proc.send_signal(signal.SIGINT)
        # the second once the first was handled (two signals before the handler runs are one delivery)
        deadline = time.monotonic() + 60
        while "SIGINT: stopping" not in err.read_text() and time.monotonic() < deadline:
            time.sleep(0.005)
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    assert proc.returncode == 128 + signal.SIGINT, err.read_text()[-3000:]
    assert "SIGINT again: exiting now" in err.read_text()
    assert json.loads((run_dir / "run.json").read_text())["state"] == "interrupted"
    recs = load_records(run_dir / "records.jsonl")
    assert recs and all(r["status"] == "ok" for r in recs)
