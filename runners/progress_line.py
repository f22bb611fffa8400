"""The run's progress line: (case, mode) pairs done / in flight / queued, calls and tokens done (the client
layer's accounting, harness/llm/client.py `CallStats.snapshot`), the requests in flight and the oldest one's age
(a long prefill otherwise looks like a hang), the tokens/s the endpoint computed over the last WINDOW_S, the
elapsed time and an ETA. Written through harness/progress.py's `Ticker` (a rewritten line on a terminal, plain
periodic lines elsewhere).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from harness.progress import duration

WINDOW_S = 60.0  # throughput: tokens computed over the last minute


class PairProgress:
    """Counts of a run's (case, mode) pairs and the call totals of its clients, rendered as one line."""

    def __init__(
        self,
        total: int,
        stats: Sequence[Any],
        *,
        clock: Callable[[], float] = time.monotonic,
        window_s: float = WINDOW_S,
    ) -> None:
        self.total = total
        self.stats = list(stats)  # CallStats of each client (answer, separate judge): `snapshot()`
        self.clock = clock
        self.window_s = window_s
        self.start = clock()
        self.done = 0
        self.in_flight = 0
        self._samples: deque[tuple[float, int]] = deque([(self.start, 0)])
        self._lock = threading.Lock()

    def started(self) -> None:
        with self._lock:
            self.in_flight += 1

    def finished(self, recorded: bool = True) -> None:
        with self._lock:
            self.in_flight -= 1
            self.done += recorded

    def totals(self) -> dict[str, Any]:
        snaps = [s.snapshot() for s in self.stats]
        ages = [x["oldest_in_flight_s"] for x in snaps if x["oldest_in_flight_s"] is not None]
        return {
            "calls": sum(x["calls"] for x in snaps),
            "prompt_tokens": sum(x["prompt_tokens"] for x in snaps),
            "completion_tokens": sum(x["completion_tokens"] for x in snaps),
            "network_tokens": sum(x["network_tokens"] for x in snaps),
            "requests_in_flight": sum(x["in_flight"] for x in snaps),
            "oldest_request_s": max(ages, default=None),
        }

    def fields(self) -> dict[str, Any]:
        now = self.clock()
        t = self.totals()
        with self._lock:
            done, in_flight = self.done, self.in_flight
            self._samples.append((now, t["network_tokens"]))
            while len(self._samples) > 2 and now - self._samples[1][0] >= self.window_s:
                self._samples.popleft()
            t0, n0 = self._samples[0]
        elapsed = now - self.start
        rate = (t["network_tokens"] - n0) / (now - t0) if now > t0 else 0.0
        eta = elapsed / done * (self.total - done) if done else None
        return {
            **t,
            "done": done,
            "in_flight": in_flight,
            "queued": max(0, self.total - done - in_flight),
            "total": self.total,
            "tokens_per_s": rate,
            "elapsed_s": elapsed,
            "eta_s": eta,
        }

    def line(self) -> str:
        f = self.fields()
        req = f"{f['requests_in_flight']} request(s) in flight"
        if f["oldest_request_s"] is not None:
            req += f", oldest {duration(f['oldest_request_s'])}"
        eta = duration(f["eta_s"]) if f["eta_s"] is not None else "after the first pair"
        return (
            f"pairs {f['done']}/{f['total']} done, {f['in_flight']} in flight, {f['queued']} queued | "
            f"calls {f['calls']}, tokens {f['prompt_tokens'] + f['completion_tokens']:,} "
            f"({f['prompt_tokens']:,} prompt + {f['completion_tokens']:,} completion) | {req} | "
            f"{f['tokens_per_s']:.1f} tokens/s | elapsed {duration(f['elapsed_s'])}, ETA {eta}"
        )
