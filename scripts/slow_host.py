#!/usr/bin/env python3
"""Run a command as if on a slower CPU: every process it starts gets a share of each short period, then is stopped.

    python3 scripts/slow_host.py --cpu-factor 2.5 --model-factor 5.3 -- scripts/fresh_machine.sh ci bench

Why: issue 21 asks for `.ci/run` and `make bench` timed on the slowest host of our kind (a first-generation Zen,
whose 1.5B prefill is 14.4 tokens/s), which no session here can get. This emulates one on a faster host, to
measure rather than compute (docs/reliability.md, "The slow host, emulated").

How: in every period (default 0.2 s) each process in the command's tree runs for period / factor and is held
with SIGSTOP for the rest, so CPU work takes `factor` times as long while sleeps, disk and network waits do not
(as on a slower CPU). The embedded model's server processes (`harness.llm.local_server`,
`harness.llm.xllama_server`) get their own, larger `--model-factor`: the slow host's vector units are half as
wide, so llama.cpp slows more than Python does. This process is the tree's child subreaper, so daemons that
detach (PostgreSQL, Ray) stay in the tree and are throttled too; it reaps them. On exit, and on any signal it
ends with, every process still in the tree is continued, so nothing is left stopped. The exit status is the
command's. Standard library only: it runs before any venv exists.

Limits: it slows a process's CPU work, not its memory bandwidth or caches; a process started inside a period
runs free until the next one (at most one period); the scan of /proc costs a few percent of one core.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
MODEL_SERVER_MARKERS = (b"harness.llm.local_server", b"harness.llm.xllama_server")


def _stat(pid: str) -> tuple[bytes, int] | None:
    """(state, parent pid) of a process, None when it is gone. The name field may hold spaces and parentheses."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0], int(fields[1])


def tree(root: int) -> list[int]:
    """Every live, non-zombie descendant of `root`."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = _stat(name)
        if st is None or st[0] in (b"Z", b"X"):
            continue
        children.setdefault(st[1], []).append(int(name))
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def is_model_server(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return False
    return any(marker in cmdline for marker in MODEL_SERVER_MARKERS)


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-factor", type=float, required=True, help="how many times slower every process runs")
    parser.add_argument(
        "--model-factor", type=float, default=None, help="the same for the model server (default: --cpu-factor)"
    )
    parser.add_argument("--period", type=float, default=0.2, help="seconds per run/stop cycle")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    model_factor = args.cpu_factor if args.model_factor is None else args.model_factor
    if not command:
        parser.error("no command given (put it after --)")
    for name, value in (("--cpu-factor", args.cpu_factor), ("--model-factor", model_factor)):
        if value < 1:
            parser.error(f"{name} must be at least 1, got {value}")
    if not 0.01 <= args.period <= 5:
        parser.error(f"--period must be within 0.01..5 seconds, got {args.period}")

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("slow_host: cannot become the child subreaper; detached daemons run at full speed", file=sys.stderr)

    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            print(f"slow_host: cannot run {command[0]!r}: {exc}", file=sys.stderr)
            os._exit(127)

    me = os.getpid()
    status: int | None = None
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        _signal_all(tree(me), signal.SIGCONT)  # a stopped process would hold the signal until its next period
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)

    def reap() -> None:
        nonlocal status
        while True:
            try:
                done, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if done == 0:
                return
            if done == pid:
                status = os.waitstatus_to_exitcode(raw)

    run_model = args.period / model_factor
    run_other = args.period / args.cpu_factor
    first, second = sorted((run_model, run_other))
    try:
        while status is None:
            procs = tree(me)
            model = [p for p in procs if is_model_server(p)]
            other = [p for p in procs if p not in set(model)]
            _signal_all(procs, signal.SIGCONT)
            time.sleep(first)
            _signal_all(model if run_model <= run_other else other, signal.SIGSTOP)
            time.sleep(second - first)
            _signal_all(other if run_model <= run_other else model, signal.SIGSTOP)
            time.sleep(args.period - second)
            reap()
    finally:
        _signal_all(tree(me), signal.SIGCONT)
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
