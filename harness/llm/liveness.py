"""Liveness of the process behind an endpoint (the embedded llama.cpp server).

An endpoint may expose `liveness: Callable[[], ServerDied | None]`: None while its server runs, else the
exception that says how it died. A client that loses its connection asks it before retrying, so a dead
server stops the run at once instead of every remaining call retrying a dead port with back-off.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

CPU_HINT = (
    "a crash like this in llama.cpp usually means its runtime was built for another CPU (e.g. AVX-512 "
    "kernels on a CPU without them): see docs/models.md and rebuild the portable llama.cpp runtime for "
    "this machine"
)

Liveness = Callable[[], "ServerDied | None"]


def describe_exit(returncode: int) -> str:
    """`killed by signal SIGSEGV (11)` for a negative Popen returncode, else `exited with code N`."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by signal {name} ({-returncode})"
    return f"exited with code {returncode}"


class ServerDied(RuntimeError):
    """The model server behind an endpoint exited while the harness still needed it.

    Not an `LLMError`: code that tolerates a failed model call (a judge scoring 0) must not swallow it, and the
    run loop turns it into a stop (exit 4, records kept, the same command resumes) instead of failed records.
    """

    def __init__(
        self, model: str, returncode: int, log_path: Path | str, log_tail: str = "", hint: str = CPU_HINT
    ) -> None:
        self.model, self.returncode, self.log_path = model, returncode, Path(log_path)
        self.exit = describe_exit(returncode)
        msg = f"the embedded model server for {model!r} {self.exit}; server log: {self.log_path}"
        if returncode < 0 and returncode in (-signal.SIGSEGV, -signal.SIGILL, -signal.SIGBUS, -signal.SIGFPE):
            msg += f". {hint[0].upper()}{hint[1:]}"
        if log_tail.strip():
            msg += f"\n--- last lines of {self.log_path.name} ---\n{log_tail.rstrip()}"
        super().__init__(msg)


def wait_dead(liveness: Liveness, grace_s: float, poll_s: float = 0.05) -> ServerDied | None:
    """`liveness()`, asked again for up to `grace_s`: a process whose sockets the kernel just closed (the
    client sees a reset) may not be reaped yet."""
    end = time.monotonic() + grace_s
    while True:
        died = liveness()
        if died is not None or time.monotonic() >= end:
            return died
        time.sleep(poll_s)


class ServerWatch:
    """Watches endpoints' livenesses during a run: a daemon thread polls them every `period_s`, and workers
    `report()` the `ServerDied` they caught or `check()` synchronously. `died` is the first death seen;
    `on_death(died)` is called once, when it is first seen (e.g. to stop scheduling work)."""

    def __init__(
        self,
        livenesses: Iterable[Liveness],
        *,
        on_death: Callable[[ServerDied], None] | None = None,
        period_s: float = 0.5,
    ) -> None:
        self.livenesses = list(livenesses)
        self.on_death = on_death
        self.period_s = period_s
        self.died: ServerDied | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def report(self, died: ServerDied) -> None:
        with self._lock:
            if self.died is not None:
                return
            self.died = died
        if self.on_death is not None:
            self.on_death(died)

    def check(self) -> ServerDied | None:
        """The death seen so far, else ask every liveness now."""
        if self.died is None:
            for liveness in self.livenesses:
                died = liveness()
                if died is not None:
                    self.report(died)
                    break
        return self.died

    def __enter__(self) -> ServerWatch:
        if self.livenesses:
            self._thread = threading.Thread(target=self._loop, name="server-watch", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._done.wait(self.period_s):
            if self.check() is not None:
                return
