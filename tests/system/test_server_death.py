"""The embedded model server dying: caught before the first case (a 1-token test completion), and mid-run a
stop within seconds (exit 4, records kept, the same command resumes) instead of every pair retrying a dead port.

The server is a stand-in process (an OpenAI-compatible fake) launched through `LlamaServer(command=...)`, the
same process lifecycle as llama.cpp's; the slow variant kills the real embedded model.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from commands.cli import EXIT_STOPPED, main
from harness.llm import local_server
from harness.llm.client import LLMClient
from harness.llm.liveness import ServerDied, describe_exit
from harness.llm.local_server import LlamaServer
from harness.llm.models import ModelSpec
from harness.records import load_records
from tests.support.dataset_rows import make_row

MODES = ("long_context", "summary", "summary_ondemand")
N_CASES = 4

# argv: PORT BEHAVIOUR. ok: FakeModel answers (0.15 s a reply); segv-on-chat: the first POST kills the process
# with SIGSEGV (a runtime that loads but cannot compute); http500: every POST answers 500.
STAND_IN = textwrap.dedent("""
    import os, signal, sys, time
    from harness.testing.fake_openai import FakeOpenAIServer, Reply
    from harness.testing.faults import FakeModel
    port, behaviour = int(sys.argv[1]), sys.argv[2]
    model = FakeModel()

    def responder(req):
        if behaviour == "segv-on-chat":
            print("ggml: computing the first token", flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        if behaviour == "http500":
            return Reply(500, {"error": {"message": "llama_decode failed"}})
        r = model(req)
        return Reply(r.status, r.body, r.headers, 0.15)

    print("stand-in server on", port, flush=True)
    with FakeOpenAIServer(responder, port=port, record=False):
        while True:
            time.sleep(60)
""")


@pytest.fixture
def weights(tmp_path, monkeypatch) -> dict[str, str]:
    """A tiny model file that verifies, and the overrides declaring it as a local model."""
    monkeypatch.setenv("LME_HARNESS_MODEL_DIR", str(tmp_path / "models"))
    data = b"stand-in weights"
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "standin.gguf").write_bytes(data)
    return {
        "name": "standin",
        "file": "standin.gguf",
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": str(len(data)),
    }


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """`use(behaviour)`: the embedded server becomes the stand-in process; `servers` lists those started."""
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    servers: list[LlamaServer] = []
    behaviour = {"now": "ok"}

    class StandIn(LlamaServer):
        def __init__(self, spec, **kw):
            super().__init__(
                spec, command=lambda port: [sys.executable, str(script), str(port), behaviour["now"]], **kw
            )
            servers.append(self)

    monkeypatch.setattr(local_server, "LlamaServer", StandIn)

    def use(b: str) -> list[LlamaServer]:
        behaviour["now"] = b
        return servers

    return use


def dataset(tmp_path: Path, n_cases: int = N_CASES) -> Path:
    rows = []
    for i in range(n_cases):
        sessions = [
            [
                {"role": "user", "content": f"In session {s} I bought item {s} for project {i}."},
                {"role": "assistant", "content": f"Noted, item {s}."},
            ]
            for s in range(3)
        ]
        rows.append(make_row(qid=f"q{i}", question="What did I buy in session 1?", answer="item 1", sessions=sessions))
    p = tmp_path / "data.json"
    p.write_text(json.dumps(rows))
    return p


def run_args(tmp_path: Path, weights: dict[str, str]) -> list[str]:
    return [
        "run",
        f"hydra.run.dir={tmp_path / 'run'}",
        "model=smollm2_135m",
        *[f"model.{k}={v}" for k, v in weights.items()],
        f"dataset.path={dataset(tmp_path)}",
        "dataset.sha256=null",
        "dataset.limit=null",
        "cache.enabled=false",
        "run.progress=false",
        "run.concurrency=1",
        "retrieval=bm25",
    ]


def sigsegv_after_records(
    records: Path, n: int, servers: list, *, timeout_s: float = 120, poll_s: float = 0.02
) -> tuple[threading.Thread, dict]:
    """Start a thread that SIGSEGVs the first server once `records` holds `n` lines. Returns (thread, killed):
    killed["before"] is the records file's bytes at the kill, killed["at"] its monotonic time."""
    killed: dict = {}

    def kill() -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if records.exists() and records.read_bytes().count(b"\n") >= n and servers and servers[0].pid:
                killed["before"] = records.read_bytes()
                killed["at"] = time.monotonic()
                killed["wall"] = time.time()
                os.kill(servers[0].pid, signal.SIGSEGV)
                return
            time.sleep(poll_s)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread, killed


def stop_took_s(run_dir: Path, killed: dict) -> float:
    """Seconds from the kill to the stop: FAILED.txt is written when the run stops, before the partial report
    (matplotlib, many seconds on a loaded CPU) that `main` builds before it returns, which is not the stop."""
    return (run_dir / "FAILED.txt").stat().st_mtime - float(killed["wall"])


@pytest.mark.process
def test_a_server_that_segfaults_on_its_first_completion_fails_the_run_before_any_case(
    tmp_path, weights, stand_in, capsys
):
    servers = stand_in("segv-on-chat")
    assert main(run_args(tmp_path, weights)) == 2
    err = capsys.readouterr().err
    run_dir = tmp_path / "run"
    assert err.count("lme-harness: error:") == 1
    assert "1-token test completion" in err and "SIGSEGV" in err and "docs/models.md" in err
    assert str(run_dir / "llama-server-standin.log") in err
    assert "ggml: computing the first token" in err  # the server log's last lines
    assert "SIGSEGV" in (run_dir / "FAILED.txt").read_text()
    assert not (run_dir / "records.jsonl").exists()
    assert len(servers) == 1 and servers[0].pid is None  # stopped


@pytest.mark.process
def test_a_server_that_errors_on_its_first_completion_fails_the_run_before_any_case(
    tmp_path, weights, stand_in, capsys
):
    stand_in("http500")
    assert main(run_args(tmp_path, weights)) == 2
    err = capsys.readouterr().err
    assert "1-token test completion answered HTTP 500" in err and "llama_decode failed" in err
    assert (tmp_path / "run" / "FAILED.txt").exists() and not (tmp_path / "run" / "records.jsonl").exists()


@pytest.mark.process
def test_server_killed_by_sigsegv_mid_run_stops_within_seconds_then_the_same_command_resumes(
    tmp_path, weights, stand_in, capsys
):
    servers = stand_in("ok")
    args = run_args(tmp_path, weights)
    records = tmp_path / "run" / "records.jsonl"
    killer, killed = sigsegv_after_records(records, 2, servers)
    code = main(args)
    killer.join(5)
    assert "at" in killed, "the run ended before two records were written"
    assert code == EXIT_STOPPED
    assert stop_took_s(tmp_path / "run", killed) < 5.0  # not after 4 retries with back-off per remaining pair
    err = capsys.readouterr().err
    assert "SIGSEGV" in err and str(tmp_path / "run" / "llama-server-standin.log") in err
    assert "standin" in err and "docs/models.md" in err and "run the same command again" in err
    after = records.read_bytes()
    assert after.startswith(killed["before"])  # every record written before the kill is kept
    recs = load_records(records)
    assert all(r["status"] == "ok" for r in recs)  # nothing recorded as a failure it did not have
    assert 2 <= len(recs) < N_CASES * len(MODES)
    assert "SIGSEGV" in (tmp_path / "run" / "FAILED.txt").read_text()

    # The same command with a healthy server: resumes, runs only what is missing, completes.
    assert main(args) == 0
    final = load_records(records)
    assert sorted((r["question_id"], r["mode"]) for r in final) == sorted(
        (f"q{i}", m) for i in range(N_CASES) for m in MODES
    )
    assert records.read_bytes().startswith(after)
    assert all(r["status"] == "ok" for r in final)


@pytest.mark.process
def test_a_dead_server_is_a_server_died_at_once_not_retried(tmp_path, weights, stand_in):
    spec = ModelSpec.from_config({"kind": "local", "model": "fake-model", **weights, "size": int(weights["size"])})
    log = tmp_path / "server.log"
    servers = stand_in("ok")
    srv = local_server.LlamaServer(spec, log_path=log).start()
    try:
        assert srv.exit_status() is None and srv.died() is None
        client = LLMClient(
            base_url=srv.base_url, model="fake-model", max_retries=4, backoff_base_s=5.0, liveness=srv.died
        )
        assert client.chat([{"role": "user", "content": "hi"}]).content
        os.kill(servers[0].pid, signal.SIGSEGV)
        t0 = time.monotonic()
        with pytest.raises(ServerDied) as info:
            client.chat([{"role": "user", "content": "hi again"}])
        assert time.monotonic() - t0 < 3.0 and client.stats.retries == 0
        assert srv.exit_status() == -signal.SIGSEGV
        died = info.value
        assert died.returncode == -signal.SIGSEGV and died.log_path == log
        assert "killed by signal SIGSEGV (11)" in str(died) and str(log) in str(died) and "docs/models.md" in str(died)
    finally:
        srv.stop()
    assert srv.exit_status() is None and srv.died() is None  # an orderly stop is not a death


def test_describe_exit():
    assert describe_exit(-signal.SIGSEGV) == "killed by signal SIGSEGV (11)"
    assert describe_exit(3) == "exited with code 3"


@pytest.mark.slow
def test_real_embedded_server_killed_by_sigsegv_mid_run_stops_then_resumes(tmp_path, monkeypatch, capsys):
    from harness.llm.models import load_spec

    spec = load_spec("smollm2_135m")
    if not spec.path.exists():
        pytest.fail(f"{spec.path} missing: run `lme-harness models pull smollm2_135m` first (make test does)")
    servers: list[LlamaServer] = []

    class Recorded(LlamaServer):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            servers.append(self)

    monkeypatch.setattr(local_server, "LlamaServer", Recorded)
    # Two tiny cases, one mode: short prompts keep it quick on a loaded CPU (the oracle's are ~3,500 tokens).
    args = [
        "run",
        "model=smollm2_135m",
        f"dataset.path={dataset(tmp_path, 2)}",
        "dataset.sha256=null",
        "dataset.limit=null",
        "mode=[long_context]",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"cache.path={tmp_path / 'cache.sqlite'}",
        "run.progress=false",
        "run.concurrency=1",
        "generation.max_tokens=8",
        "judge=none",
        "retrieval=bm25",
    ]
    records = tmp_path / "run" / "records.jsonl"
    _, killed = sigsegv_after_records(records, 1, servers, timeout_s=600, poll_s=0.05)
    assert main(args) == EXIT_STOPPED
    assert "at" in killed and stop_took_s(tmp_path / "run", killed) < 15.0
    err = capsys.readouterr().err
    assert "SIGSEGV" in err and "llama-server-smollm2_135m.log" in err
    kept = load_records(records)
    assert kept and all(r["status"] == "ok" for r in kept)
    assert main(args) == 0
    final = load_records(records)
    assert sorted(r["question_id"] for r in final) == ["q0", "q1"] and all(r["status"] == "ok" for r in final)
