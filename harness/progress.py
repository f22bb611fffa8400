"""Console progress for long steps: one line rewritten in place on a terminal, plain periodic lines elsewhere
(CI logs), at least every NON_TTY_INTERVAL_S.

`Ticker` writes the lines; `step` shows a one-time step's elapsed time while it blocks (model load, embedder
distillation). The run's pairs line is runners/progress_line.py. A command turns the console progress on or off once
(`configure`, from `run.progress`); the clock, interval and stream are injectable so tests are not timed.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

TTY_INTERVAL_S = 1.0
NON_TTY_INTERVAL_S = 8.0  # under the 10 s promised, with a caller's polling on top

Clock = Callable[[], float]
_ENABLED = {"on": True}


def configure(enabled: bool) -> None:
    """Whether `console()` tickers write (`run.progress`)."""
    _ENABLED["on"] = bool(enabled)


def console() -> Ticker:
    """A ticker on stderr, enabled per `configure`."""
    return Ticker(enabled=_ENABLED["on"])


def duration(seconds: float | None) -> str:
    """`1h02m`, `3m05s`, `42s`; `?` when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class Ticker:
    """Writes status lines to `stream`: on a terminal, one line rewritten in place at most every `interval_s`
    (default TTY_INTERVAL_S); otherwise one plain line every `interval_s` (default NON_TTY_INTERVAL_S)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        enabled: bool = True,
        tty: bool | None = None,
        interval_s: float | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty()) if callable(isatty) else False
        self.tty = tty
        self.interval_s = interval_s if interval_s is not None else (TTY_INTERVAL_S if tty else NON_TTY_INTERVAL_S)
        self.clock = clock
        self._last: float | None = None
        self._open = False  # a rewritten line is on screen and needs its newline
        self._lock = threading.Lock()

    def due(self) -> bool:
        return self.enabled and (self._last is None or self.clock() - self._last >= self.interval_s)

    def tick(self, render: Callable[[], str], *, force: bool = False) -> bool:
        """Writes `render()` when the interval has passed (or `force`); returns whether it wrote."""
        if not self.enabled or not (force or self.due()):
            return False
        line = render()
        with self._lock:
            self._last = self.clock()
            if self.tty:
                self.stream.write("\r\x1b[2K" + line)
                self._open = True
            else:
                self.stream.write(line + "\n")
            self.stream.flush()
        return True

    def close(self) -> None:
        with self._lock:
            if self._open:
                self.stream.write("\n")
                self.stream.flush()
                self._open = False


@contextlib.contextmanager
def step(label: str, ticker: Ticker, *, poll_s: float = 0.25) -> Iterator[None]:
    """A one-time step (model load, embedder distillation): its elapsed time on the console while it runs,
    from a background thread (the step itself blocks), then how long it took."""
    if not ticker.enabled:
        yield
        return
    t0 = ticker.clock()
    done = threading.Event()

    def render() -> str:
        return f"{label}: {duration(ticker.clock() - t0)} elapsed"

    def loop() -> None:
        while not done.wait(poll_s):
            ticker.tick(render)

    ticker.tick(render, force=True)
    thread = threading.Thread(target=loop, name="progress-step", daemon=True)
    thread.start()
    outcome = "done in"
    try:
        yield
    except Exception:
        outcome = "failed after"
        raise
    except BaseException:  # Ctrl-C during the step
        outcome = "stopped after"
        raise
    finally:
        done.set()
        thread.join()
        ticker.tick(lambda: f"{label}: {outcome} {duration(ticker.clock() - t0)}", force=True)
        ticker.close()
