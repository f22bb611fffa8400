"""Ctrl-C and SIGTERM during a run: the first stops it in order, a second exits at once.

The first SIGINT (or SIGTERM) says at once that the run is stopping and sets `STOP`. While pairs run, the main
thread sees it within a fraction of a second (runners/replay.py): no new pair starts, the queued ones are
cancelled, the embedded server is stopped (which fails the calls in flight: an openai call in a worker thread
cannot be interrupted), workers get a short grace period, and run.json and a partial report are written from the
records kept; the exit status is EXIT_INTERRUPTED and the same command resumes. Before the pairs start (model
pull and load, embedder build), nothing watches `STOP`, so the signal also raises KeyboardInterrupt there.
A second signal kills the embedded servers, sets run.json's state to "interrupted" (`last_words`) and exits with
128 + the signal number, waiting for nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunInterrupted(RuntimeError):
    """A run stopped by SIGINT/SIGTERM after its pairs started: records kept, the same command resumes."""


class SweepInterrupted(BaseException):
    """Raised after an interrupted job of a multirun (-m) sweep, through Hydra's launcher (which catches every
    Exception per job and would start the next one)."""


class StopRequest:
    """The process-wide stop flag the signal handler sets (signal handlers are process-wide too)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal_name: str | None = None
        self.count = 0
        self.watched = False  # True while a loop polls `event`: the handler then does not raise
        self.final: list[Callable[[], None]] = []  # run by a second signal before it exits (`last_words`)

    def is_set(self) -> bool:
        return self.event.is_set()

    def request(self, name: str) -> None:
        self.signal_name = name
        self.event.set()

    def reset(self) -> None:
        self.event.clear()
        self.signal_name = None
        self.count = 0
        self.watched = False

    @contextlib.contextmanager
    def last_words(self, fn: Callable[[], None]) -> Iterator[None]:
        """While active, a second signal runs `fn` (quick, no lock: it runs in the signal handler) before it exits
        at once: what the orderly stop would have written, reduced to what must not be left wrong (run.json's
        state)."""
        self.final.append(fn)
        try:
            yield
        finally:
            with contextlib.suppress(ValueError):
                self.final.remove(fn)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """While active, a signal only sets the flag: the caller polls it and stops in order."""
        self.watched = True
        try:
            yield
        finally:
            self.watched = False


STOP = StopRequest()

STOPPING = (
    "lme-harness: {name}: stopping; no new (case, mode) pair starts, queued ones are cancelled, the records kept "
    "so far, run.json and a partial report are written within seconds; the same command resumes. "
    "Press Ctrl-C again to exit at once.\n"
)


def _say(text: str) -> None:
    # os.write, not print: a handler may run while the main thread is inside a print (reentrant buffered write)
    with contextlib.suppress(OSError):
        os.write(2, text.encode())


def _kill_servers_now() -> None:
    from harness.llm import local_server

    local_server.kill_all_now()


def _handler(signum: int, _frame: object) -> None:
    name = signal.Signals(signum).name
    STOP.count += 1
    if STOP.count > 1:
        _say(f"lme-harness: {name} again: exiting now (records kept; the same command resumes)\n")
        _kill_servers_now()
        for fn in list(STOP.final):
            with contextlib.suppress(Exception):  # best effort: nothing may hold the exit
                fn()
        os._exit(128 + signum)
    STOP.request(name)
    _say(STOPPING.format(name=name))
    if not STOP.watched:
        raise KeyboardInterrupt(name)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """Installs the handler for SIGINT and SIGTERM (main thread only; elsewhere a no-op) and restores the
    previous handlers on exit. `STOP` is reset on entry: one command, one stop."""
    STOP.reset()
    if threading.current_thread() is not threading.main_thread():
        yield STOP
        return
    saved = {s: signal.signal(s, _handler) for s in SIGNALS}
    try:
        yield STOP
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
