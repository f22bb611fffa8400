"""The ingest checkpoint of a memory contestant whose units outlive the process: which units a run has put on a
service (or in a store kept on disk) and not yet forgotten.

A remote provider (`remote = True`: the HTTP client, the hosted adapters) keeps a unit's memory outside this process,
and so does a Python provider that keeps its units in the run directory (`keep_units_in`: mem0's Qdrant and SQLite
on disk), so a run killed between a unit's ingest and its answer leaves that unit on the service. The checkpoint lets the
resumed run find it: answer against it (the provider's optional `attach` call says it is still there, ingested and
ready: ingest is not sent again), or tear it down before ingesting again (the service never holds the data twice).

One append-only JSONL file per contestant in the run directory, `memory-ingest.<contestant>.jsonl`, one line per
event, each fsynced:

    {"v": 1, "event": "started",  "key", "unit", "scope", "provider", "mode", "settings", "at"}   before setup
    {"v": 1, "event": "ingested", ... the same ..., "trace": {...}}                               ingest done, ready
    {"v": 1, "event": "done",     "key", "unit", "at"}                                            teardown ran

`key` is the case's unit id (the question), `unit` the provider-side unit (opaque: harness/memory/ids.py), `scope`
the service's id for it when the adapter has one (a hosted user, namespace or agent), `settings` a hash of the
provider's plain settings (never their values), `trace` the ingest's record entry (sessions, tokens, provider usage,
times) so a resumed record still says what the ingest cost. Only these declared fields are written, and every line
passes the secret registry's mask (harness/secrets.py). A unit is open from `started` until its `done`; the file is
removed when no unit is open, so a finished run leaves none.

Read once, before the run's first case when the file exists (else with the first unit). A torn last line (the process killed mid-write) is cut off with
a logged warning: the unit it described is then still open from its earlier line (`started`), so it is torn down and
ingested again, never attached half-written. Any other bad line (not JSON, another version, an unknown event, a
missing or mistyped field, another provider or contestant) stops the run with one error naming the file and line:
silently ignoring it could send a paid service the same data twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import secrets
from harness.errors import RecordError

log = logging.getLogger(__name__)

VERSION = 1
EVENTS = ("started", "ingested", "done")
FILE_PREFIX = "memory-ingest."


class CheckpointError(RecordError):
    """A checkpoint line that is not one this harness wrote for this contestant; names the file and line (the CLI
    prints it as one error line and exits 2, like a corrupt record)."""


def checkpoint_path(run_dir: str | Path, contestant: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", contestant) or "memory"
    return Path(run_dir) / f"{FILE_PREFIX}{safe}.jsonl"


def settings_hash(provider: Any) -> str:
    """A hash of the provider's plain public settings: the checkpoint holds this hash only, so no setting's value (a
    key never is one; see harness/secrets.py) reaches the file. Where the service is served (a URL-valued setting)
    is not one of them: a service restarted on another port still holds its units, and `attach` asks it."""
    plain: dict[str, Any] = {"class": f"{type(provider).__module__}.{type(provider).__qualname__}"}
    for k, v in sorted(vars(provider).items()):
        if k.startswith("_") or not isinstance(v, (str, int, float, bool, type(None))) or secrets.is_endpoint(v):
            continue
        plain[k] = secrets.describe_endpoint(v) if isinstance(v, str) and "://" in v else v
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class OpenUnit:
    """A unit an earlier process left on the service: `ingested` False when its ingest never finished."""

    key: str
    unit: str
    scope: str | None
    settings: str
    at: str
    ingested: bool
    trace: dict[str, Any] | None


class IngestCheckpoint:
    """The checkpoint of one contestant (see the module doc). Thread-safe; one run holds the directory (run lock)."""

    def __init__(self, path: str | Path, *, provider: str, mode: str, settings: str) -> None:
        self.path = Path(path)
        self.provider, self.mode, self.settings = provider, mode, settings
        self._lock = threading.Lock()
        self._stale: dict[str, OpenUnit] = {}  # unit -> left open by an earlier process, not yet dealt with
        self._live: set[str] = set()  # units this process opened (or attached) and has not marked done
        self._load()

    # --- reading ------------------------------------------------------------------------------------------------

    def _bad(self, n: int, why: str) -> CheckpointError:
        return CheckpointError(
            f"{self.path}:{n}: {why}. This file lists the memory units a killed run left on the service "
            f"{self.provider!r}; it is written only by this harness for contestant {self.mode!r}. Tear down its "
            f"units on the service and delete the file (or use a fresh run directory) to go on."
        )

    def _load(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):  # a torn last line: the writer was killed mid-line
            cut = data.rfind(b"\n") + 1
            log.warning(
                "%s: ignoring a torn last line (%d bytes) left by a killed run; its unit stays open from its earlier "
                "line and is torn down and ingested again",
                self.path,
                len(data) - cut,
            )
            with open(self.path, "rb+") as f:
                f.truncate(cut)
            data = data[:cut]
        for n, raw in enumerate(data.split(b"\n"), 1):
            if raw.strip():
                self._fold(n, self._parse(n, raw))

    def _parse(self, n: int, raw: bytes) -> dict[str, Any]:
        try:
            d = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise self._bad(n, f"not JSON ({type(e).__name__})") from None
        if not isinstance(d, dict):
            raise self._bad(n, f"a JSON {type(d).__name__}, not an object")
        if d.get("v") != VERSION:
            raise self._bad(n, f"checkpoint version {d.get('v')!r}, this harness reads {VERSION}")
        if d.get("event") not in EVENTS:
            raise self._bad(n, f"unknown event {d.get('event')!r} (known: {', '.join(EVENTS)})")
        fields: dict[str, Any] = {"key": str, "unit": str, "at": str}
        if d["event"] != "done":
            fields |= {"provider": str, "mode": str, "settings": str, "scope": (str, type(None))}
        if d["event"] == "ingested":
            fields["trace"] = dict
        for name, kind in fields.items():
            if not isinstance(d.get(name), kind) or (name in ("key", "unit") and not d[name]):
                raise self._bad(
                    n, f"{d['event']!r} line: field {name!r} missing or not {getattr(kind, '__name__', kind)}"
                )
        if d["event"] != "done" and (d["provider"], d["mode"]) != (self.provider, self.mode):
            raise self._bad(
                n,
                f"written for provider {d['provider']!r} / contestant {d['mode']!r}, not this run's "
                f"{self.provider!r} / {self.mode!r}",
            )
        return d

    def _fold(self, n: int, d: dict[str, Any]) -> None:
        unit = d["unit"]
        if d["event"] == "done":
            self._stale.pop(unit, None)
            return
        if d["event"] == "ingested" and unit not in self._stale:
            raise self._bad(n, f"unit {unit!r} ingested without a 'started' line before it")
        self._stale[unit] = OpenUnit(
            d["key"], unit, d["scope"], d["settings"], d["at"], d["event"] == "ingested", d.get("trace")
        )

    # --- the contestant's calls ------------------------------------------------------------------------------

    def take(self, key: str) -> list[OpenUnit]:
        """The units earlier processes left open for the case `key`, oldest first (the caller deals with each and
        marks it `done`); empty when none."""
        with self._lock:
            found = [u for u in self._stale.values() if u.key == key]
            for u in found:
                del self._stale[u.unit]
                self._live.add(u.unit)
            return found

    def stale_count(self) -> int:
        with self._lock:
            return len(self._stale)

    def started(self, key: str, unit: str, scope: str | None) -> None:
        self._append({"event": "started", **self._who(key, unit, scope)}, opens=unit)

    def ingested(self, key: str, unit: str, scope: str | None, trace: dict[str, Any]) -> None:
        self._append({"event": "ingested", **self._who(key, unit, scope), "trace": trace}, opens=unit)

    def done(self, key: str, unit: str) -> None:
        """The unit is torn down (its case answered, failed, or the stale unit forgotten): no longer open. The file
        goes when no unit is open."""
        with self._lock:
            if unit not in self._live:
                return
            self._live.discard(unit)
            if not self._live and not self._stale:
                self.path.unlink(missing_ok=True)  # nothing open: no residue (a crash before this leaves only `done`s)
                return
        self._append({"event": "done", "key": key, "unit": unit, "at": _now()})

    def _who(self, key: str, unit: str, scope: str | None) -> dict[str, Any]:
        return {
            "key": key,
            "unit": unit,
            "scope": scope,
            "provider": self.provider,
            "mode": self.mode,
            "settings": self.settings,
            "at": _now(),
        }

    def _append(self, doc: dict[str, Any], opens: str | None = None) -> None:
        line = json.dumps(secrets.redact_obj({"v": VERSION, **doc}), sort_keys=True, ensure_ascii=False) + "\n"
        with self._lock:
            if opens is not None:
                self._live.add(opens)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(line.encode())
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)


__all__ = ["CheckpointError", "IngestCheckpoint", "OpenUnit", "checkpoint_path", "settings_hash"]
