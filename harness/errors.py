"""The error raised when a run's files are unusable: a bad record line, or a file that could not be written.

Its own module, below both harness/records.py (which raises it for record lines) and harness/storage.py
(whose `StorageError` for failed writes is one), so that neither has to import the other to reach it.
"""

from __future__ import annotations


class RecordError(ValueError):
    """One message naming the file (and the line or key) at fault, and what to do."""
