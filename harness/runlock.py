"""One writer per run directory: an exclusive `fcntl.flock` on RUN_DIR/run.lock.

Two `lme-harness run` (or `rescore`) processes on the same directory would each make every model call and
append a record for every pair. The second one now refuses at once, naming the directory and the holder's
pid. The kernel releases a flock when its holder dies (even by SIGKILL), so a stale lock file never blocks.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator

from harness.records import RecordError

LOCK_FILE = "run.lock"


class RunDirLocked(RecordError):
    """Another live process is writing this run directory."""


@contextlib.contextmanager
def run_dir_lock(run_dir: str | Path) -> Iterator[Path]:
    """Hold RUN_DIR/run.lock for the duration of the block; raise RunDirLocked if another process holds it."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise RunDirLocked(f"{run_dir}: another lme-harness process (pid {holder}) is writing this run "
                               f"directory; wait for it to finish or use another run directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the flock
