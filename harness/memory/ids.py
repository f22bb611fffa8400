"""Opaque ids: what a memory provider is told a unit or a session is called.

LongMemEval's own ids carry its gold labels: in every `_s` case the sessions whose id starts `answer` are the
evidence, and a unit named by its question id names the case. So no dataset id reaches a provider. Every unit and
session id it sees is a keyed hash (HMAC-SHA256, truncated to 64 bits) of the contestant, the case and the dataset id
under a key of the run's own, and the harness maps the ids a provider hands back (provenance) to the dataset's
before it measures anything (harness/memory/isolation.py). Turns have no id: a provider names one by its index in
its session.

The key is drawn once per run directory and kept there (`memory-ids.key`, readable by its owner only), so a resumed
run gives every session the id the killed run gave it, and an attached unit's provenance still maps back. Without a
run directory the key lives as long as the contestant. A unit id also hashes a tag drawn by each process, so a unit
that a resumed run ingests again gets a fresh id, as a unit did before ids were opaque.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path

from harness.errors import RecordError

KEY_FILE = "memory-ids.key"
_KEY_HEX = re.compile(r"[0-9a-f]{64}")


class IdKeyError(RecordError):
    """The run directory's id key cannot be read as one (names the file; the CLI prints it and exits 2)."""


def _read_or_create_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        text = path.read_text(errors="replace").strip()
        if not _KEY_HEX.fullmatch(text):
            raise IdKeyError(
                f"{path}: not this harness's id key (64 hex digits). It maps the opaque ids a memory provider saw "
                "back to the dataset's; without it the units of this run cannot be attached or measured. Restore it, "
                "or use a fresh run directory."
            ) from None
        return bytes.fromhex(text)
    key = secrets.token_bytes(32)
    try:
        os.write(fd, key.hex().encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


class RunIds:
    """The ids of one contestant's units and sessions in one run (see the module doc)."""

    def __init__(self, key: bytes, contestant: str, tag: str | None = None) -> None:
        self._key = key
        self._contestant = contestant
        self._tag = tag if tag is not None else secrets.token_hex(8)  # this process's: a re-ingest is a fresh unit

    @classmethod
    def of_run(cls, run_dir: str | Path | None, contestant: str) -> RunIds:
        """The ids under the run directory's key (created on first use), or under a key of this object's own."""
        if run_dir is None:
            return cls(secrets.token_bytes(32), contestant)
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        return cls(_read_or_create_key(Path(run_dir) / KEY_FILE), contestant)

    def _mac(self, *parts: str) -> str:
        msg = "\x1f".join((self._contestant, *parts)).encode()
        return hmac.new(self._key, msg, hashlib.sha256).hexdigest()[:16]

    def unit(self, case: str) -> str:
        """The unit of case `case` (its question id) in this process."""
        return "u" + self._mac("unit", case, self._tag)

    def session(self, case: str, session_id: str) -> str:
        """Session `session_id` of case `case`: the same in every process of the run, and different in every case
        (a session two cases share has one id in each, so whose copy came back is known)."""
        return "s" + self._mac("session", case, session_id)


__all__ = ["KEY_FILE", "IdKeyError", "RunIds"]
