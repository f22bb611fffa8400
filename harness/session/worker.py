"""Asynchronous summary execution: a bounded queue served by worker threads.

Synchronous execution needs nothing here: call `Summarizer.summarize` before the next model call.

Queue-full behaviour (deliberately different from the reference, which then summarizes
synchronously in the caller): `enqueue` never blocks. A job for a (session, filter key) that is
already waiting is *coalesced*: the waiting job takes the newer session snapshot and no slot is
used. Otherwise, when all `queue_size` slots are taken, the job is *dropped* (status "dropped",
counted in `stats["dropped"]`). Nothing is lost by dropping: events are never removed, and the
next summary of that session covers everything after its boundary, the dropped delta included.

Job timeout: Python cannot kill a thread, so a job over `job_timeout_s` is marked "timeout", its
late result is discarded (never stored, so it cannot overwrite a newer summary) and the worker
moves on; the abandoned call finishes in the background.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.session.boundary import Summary
from harness.session.events import Session
from harness.session.summary import Summarizer, SummaryOutcome

log = logging.getLogger(__name__)

JOB_STATUSES = ("queued", "coalesced", "running", "done", "skipped", "failed", "timeout", "dropped")


@dataclass
class SummaryJob:
    session: Session
    previous: Summary | None
    filter_key: str = ""
    force: bool = False
    status: str = "queued"
    outcome: SummaryOutcome | None = None
    error: BaseException | None = None
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def key(self) -> tuple[str, str, str, str]:
        s = self.session
        return (s.app, s.user_id, s.id, self.filter_key)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job finished (any final status); False on timeout."""
        return self._done.wait(timeout)

    def _finish(self, status: str) -> None:
        self.status = status
        self._done.set()


def _snapshot(session: Session) -> Session:
    """A copy of the session's event list, so appends after enqueue do not race the job."""
    return Session(session.id, session.user_id, session.app, list(session.events))


class SummaryWorker:
    """Runs summary jobs in the background.

    `on_done(job)` is called from a worker thread for every finished job (done/skipped/failed/
    timeout); a typical callback stores `job.outcome.summary`. Use as a context manager or call
    `close()`.
    """

    def __init__(
        self,
        summarizer: Summarizer,
        *,
        queue_size: int = 16,
        workers: int = 1,
        job_timeout_s: float | None = 45.0,
        on_done: Callable[[SummaryJob], None] | None = None,
    ) -> None:
        if queue_size < 1 or workers < 1:
            raise ValueError(f"queue_size and workers must be >= 1, got {queue_size}, {workers}")
        self.summarizer = summarizer
        self.job_timeout_s = job_timeout_s
        self.on_done = on_done
        self._queue: queue.Queue[SummaryJob | None] = queue.Queue(maxsize=queue_size)
        self._waiting: dict[tuple[str, str, str, str], SummaryJob] = {}
        self._lock = threading.Lock()
        self._pool = cf.ThreadPoolExecutor(max_workers=workers * 2, thread_name_prefix="summary-call")
        self._threads = [
            threading.Thread(target=self._serve, name=f"summary-worker-{i}", daemon=True) for i in range(workers)
        ]
        self.stats = {s: 0 for s in JOB_STATUSES if s not in ("queued", "running")}
        self.stats["enqueued"] = 0
        self._closed = False
        for t in self._threads:
            t.start()

    def enqueue(
        self, session: Session, previous: Summary | None = None, *, filter_key: str = "", force: bool = False
    ) -> SummaryJob:
        """Queue a summary of `session`; never blocks. Returns the job (status queued, coalesced or dropped)."""
        job = SummaryJob(_snapshot(session), previous, filter_key, force)
        with self._lock:
            if self._closed:
                raise RuntimeError("SummaryWorker is closed")
            waiting = self._waiting.get(job.key)
            if waiting is not None:
                waiting.session, waiting.previous = job.session, previous
                waiting.force = waiting.force or force
                self.stats["coalesced"] += 1
                job.status = "coalesced"
                return waiting
            try:
                self._queue.put_nowait(job)
            except queue.Full:
                self.stats["dropped"] += 1
                log.warning("summary queue full (%d): dropped job for session %r", self._queue.maxsize, session.id)
                job._finish("dropped")
                return job
            self._waiting[job.key] = job
            self.stats["enqueued"] += 1
            return job

    def _serve(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                with self._lock:
                    self._waiting.pop(job.key, None)
                    job.status = "running"
                self._run(job)
            finally:
                self._queue.task_done()

    def _run(self, job: SummaryJob) -> None:
        future = self._pool.submit(
            self.summarizer.summarize, job.session, job.previous, force=job.force, filter_key=job.filter_key
        )
        try:
            job.outcome = future.result(timeout=self.job_timeout_s)
            status = "done" if job.outcome.summary is not None else "skipped"
        except cf.TimeoutError:
            status = "timeout"
            log.warning("summary job for session %r timed out after %ss", job.session.id, self.job_timeout_s)
        except Exception as exc:  # recorded on the job; the worker keeps serving
            job.error = exc
            status = "failed"
            log.warning("summary job for session %r failed: %s", job.session.id, exc)
        with self._lock:
            self.stats[status] += 1
        job.status = status
        if self.on_done is not None:
            try:
                self.on_done(job)
            except Exception:  # a callback bug must not kill the worker
                log.exception("summary on_done callback failed for session %r", job.session.id)
        job._finish(status)

    def drain(self) -> None:
        """Block until every queued job has finished."""
        self._queue.join()

    def close(self, wait: bool = True) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for _ in self._threads:
            self._queue.put(None)  # may wait for a slot: close is the caller's explicit choice to block
        if wait:
            for t in self._threads:
                t.join()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> SummaryWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
