"""A run directory's life cycle: what a run that could not start (or stopped) leaves, and what a run returns.

Before the first case nothing but FAILED.txt is written; a started run writes fingerprint.json, records.jsonl
and run.json; one process at a time holds it (harness.runlock).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import secrets
from harness.storage import StorageError, write_text_atomic

log = logging.getLogger(__name__)

FAILURE_NOTE = "FAILED.txt"  # the only file a run that could not start leaves (besides Hydra's .hydra/)


@dataclass
class RunSummary:
    run_dir: Path
    n_records: int
    n_failed: int
    n_skipped: int
    stats: dict[str, Any]
    n_scoring_failed: int = 0  # answered pairs whose scoring failed (also in n_failed); scored again next run


class RunStopped(RuntimeError):
    """The circuit breaker stopped a run: too many (case, mode) runs failed in a row."""


def write_failure(run_dir: Path, e: BaseException, started: bool) -> None:
    """FAILED.txt saying why the run could not start or stopped (secrets masked)."""
    what = "the run stopped" if started else "the run could not start; nothing else was written"
    try:  # best effort (the disk may be full): never an empty or torn note
        write_text_atomic(Path(run_dir) / FAILURE_NOTE, secrets.redact(f"{what}:\n{type(e).__name__}: {e}\n"))
    except StorageError as note_error:
        log.warning("%s", note_error)


def clear_failure(run_dir: Path) -> None:
    """A run that starts removes the note of an earlier one that could not."""
    (Path(run_dir) / FAILURE_NOTE).unlink(missing_ok=True)
