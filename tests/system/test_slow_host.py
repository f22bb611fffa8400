"""scripts/slow_host.py, the slow-CPU emulator behind docs/reliability.md's emulated slow-host runs: it holds the
command's processes stopped for part of each period, keeps detached daemons in its tree, leaves nothing stopped,
and exits with the command's status."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from scripts import slow_host
from tests.support.paths import REPO

pytestmark = pytest.mark.process  # tests/README.md: every test here starts a process

SCRIPT = REPO / "scripts" / "slow_host.py"


def _state(pid: int) -> str | None:
    st = slow_host._stat(str(pid))
    return None if st is None else st[0].decode()


def _slow(*command: str, factor: str = "4") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), "--cpu-factor", factor, "--period", "0.1", "--", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_command_exit_status_is_returned() -> None:
    assert _slow("sh", "-c", "exit 3").wait(timeout=60) == 3
    assert _slow("sh", "-c", "kill -TERM $$").wait(timeout=60) == 128 + signal.SIGTERM
    proc = _slow("/nonexistent/command")
    assert proc.wait(timeout=60) == 127
    assert "cannot run '/nonexistent/command'" in proc.stderr.read()


def test_a_busy_process_is_held_stopped_and_a_detached_one_is_left_running() -> None:
    # The command starts a detached sleeper (its own session; once the command exits it is reparented to
    # slow_host, the subreaper) and a busy loop, prints both pids, and waits for the busy loop, killed below.
    script = (
        "import subprocess, sys\n"
        "sleeper = subprocess.Popen(['sleep', '120'], start_new_session=True)\n"
        "print(sleeper.pid, flush=True)\n"
        "busy = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
        "print(busy.pid, flush=True)\n"
        "busy.wait()\n"
    )
    proc = _slow(sys.executable, "-c", script)
    assert proc.stdout is not None
    sleeper, busy = int(proc.stdout.readline()), int(proc.stdout.readline())
    try:
        seen: set[str] = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not {"T", "R"} <= seen:
            state = _state(busy)
            if state:
                seen.add(state)
            time.sleep(0.003)
        assert {"T", "R"} <= seen, f"the busy loop was seen only in states {seen}"
        assert sleeper in slow_host.tree(proc.pid)
        os.kill(busy, signal.SIGKILL)
        assert proc.wait(timeout=60) == 0
        # slow_host continued every process of its tree on the way out: the detached sleeper is not left stopped.
        assert _state(sleeper) in {"S", "R"}
    finally:
        for pid in (busy, sleeper):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.kill()


def test_sigterm_reaches_the_command_even_while_it_is_held_stopped() -> None:
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
        "print('ready', flush=True)\n"
        "while True: pass\n"
    )
    proc = _slow(sys.executable, "-c", script)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 7


def test_model_servers_are_told_by_their_command_line() -> None:
    # Each child says "ready" once it runs: before its exec, /proc/<pid>/cmdline is still the parent's (CI saw that race).
    sleeper = "import time; print('ready', flush=True); time.sleep(60)"
    marker = subprocess.Popen(
        [sys.executable, "-c", sleeper, "harness.llm.xllama_server"], stdout=subprocess.PIPE, text=True
    )
    plain = subprocess.Popen([sys.executable, "-c", sleeper], stdout=subprocess.PIPE, text=True)
    try:
        for child in (marker, plain):
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert slow_host.is_model_server(marker.pid)
        assert not slow_host.is_model_server(plain.pid)
        assert not slow_host.is_model_server(2**22 + 12345)  # no such process
    finally:
        marker.kill()
        plain.kill()
        marker.communicate()
        plain.communicate()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--cpu-factor", "0.5", "--", "true"], "--cpu-factor must be at least 1"),
        (["--cpu-factor", "2", "--model-factor", "0", "--", "true"], "--model-factor must be at least 1"),
        (["--cpu-factor", "2", "--period", "0", "--", "true"], "--period must be within"),
        (["--cpu-factor", "2"], "no command given"),
    ],
)
def test_a_bad_argument_is_one_error_naming_it(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert message in done.stderr
