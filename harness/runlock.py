"""One writer per run directory: an exclusive `fcntl.flock` on RUN_DIR/run.lock.

Two `lme-harness run` (or `rescore`) processes on the same directory would each make every model call and
append a record for every pair. The second one now refuses at once, naming the directory and the holder's
pid. The kernel releases a flock when its holder dies (even by SIGKILL), so a stale lock file never blocks.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from harness.records import RecordError

LOCK_FILE = "run.lock"


class RunDirLocked(RecordError):
    """Another live process is writing this run directory."""


@contextlib.contextmanager
def run_dir_lock(run_dir: str | Path) -> Iterator[Path]:
    """Hold RUN_DIR/run.lock for the duration of the block; raise RunDirLocked if another process holds it.

    The file is removed on release (a run that could not start leaves nothing but FAILED.txt); a killed holder
    leaves it behind, unlocked. Since the file can be unlinked under a waiter, a lock counts only if the path
    still names the inode that was locked.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_FILE
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunDirLocked(
                f"{run_dir}: another lme-harness process (pid {holder}) is writing this run "
                f"directory; wait for it to finish or use another run directory"
            ) from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the previous holder removed the file between our open and our flock: try again
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # while still holding the lock, so no one can have locked this inode meanwhile
        os.close(fd)  # closing the descriptor releases the flock
