"""A quiet console: one line per failure on the terminal, full tracebacks in RUN_DIR/cli.log.

Hydra's job logging sends every record to the console and to `<output_dir>/<job name>.log` (`cli.log` for
`lme-harness`); a failed (case, mode) logged with its traceback filled pages of the terminal. `quiet_console`
makes console handlers print each record as one truncated line and guarantees the file handler.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

LOG_FILE = "cli.log"
MAX_LINE = 300


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """`text` with its whitespace collapsed, cut to `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def log_failure(logger: logging.Logger, what: str, exc: BaseException) -> None:
    """One error record for a failure: `WHAT failed: ErrorClass: message`, with the traceback attached
    (the console shows the line only, see `quiet_console`)."""
    logger.error("%s failed: %s: %s", what, type(exc).__name__, exc, exc_info=exc)


class OneLineFormatter(logging.Formatter):
    """Formats with `inner`, minus exception text and stack, as a single truncated line."""

    def __init__(self, inner: logging.Formatter | None, log_file: Path) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()
        self.log_file = log_file

    def format(self, record: logging.LogRecord) -> str:
        bare = logging.makeLogRecord(record.__dict__)  # a copy: the file handler still gets the traceback
        bare.exc_info = bare.exc_text = bare.stack_info = None
        line = one_line(self.inner.format(bare))
        if record.exc_info or record.exc_text:
            line += f" (traceback: {self.log_file})"
        return line


def _is_console(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)


@contextlib.contextmanager
def quiet_console(run_dir: Path, logger: logging.Logger | None = None) -> Iterator[Path]:
    """While active: console handlers of `logger` (root) print one line per record, and a file handler writes
    everything with tracebacks to RUN_DIR/cli.log (Hydra's own, when it already writes there). Yields the path."""
    root = logger or logging.getLogger()
    path = (Path(run_dir) / LOG_FILE).resolve()
    saved = [(h, h.formatter) for h in root.handlers if _is_console(h)]
    added: logging.FileHandler | None = None
    if not any(isinstance(h, logging.FileHandler) and Path(h.baseFilename).resolve() == path for h in root.handlers):
        path.parent.mkdir(parents=True, exist_ok=True)
        added = logging.FileHandler(path)
        added.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
        root.addHandler(added)
    level = root.level
    if root.getEffectiveLevel() > logging.ERROR:
        root.setLevel(logging.ERROR)  # failures must reach the file at least
    for h, fmt in saved:
        h.setFormatter(OneLineFormatter(fmt, path))
    try:
        yield path
    finally:
        for h, fmt in saved:
            h.setFormatter(fmt)
        root.setLevel(level)
        if added is not None:
            root.removeHandler(added)
            added.close()
