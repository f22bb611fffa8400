"""The ingest checkpoint probed with generated damage (harness/memory/checkpoint.py).

What the checkpoint promises a resumed run, for any file a killed or tampered-with run can leave:
- a file cut anywhere (the process killed mid-write, or the disk filling up) loads without an error, and says
  exactly what its complete lines say: every unit opened and not marked done is open, and it counts as ingested
  only when its `ingested` line is complete;
- any other damage (bytes flipped, lines spliced or repeated from another file) is either read as lines this
  harness could have written, or stopped with one `CheckpointError` naming the file and a line, never another
  exception, and never a unit treated as ingested that no complete `ingested` line names.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from harness.memory.checkpoint import CheckpointError, IngestCheckpoint

PROVIDER, MODE, SETTINGS = "svc", "memory", "s" * 16


def _open(path: Path) -> IngestCheckpoint:
    return IngestCheckpoint(path, provider=PROVIDER, mode=MODE, settings=SETTINGS)


def _write_history(path: Path, rng: random.Random) -> list[tuple[str, str, str]]:
    """A random history of several units through the real writer; returns its events (event, key, unit) in order.
    The file is kept (at least one unit stays open), as a killed run leaves it."""
    ck = _open(path)
    events: list[tuple[str, str, str]] = []
    units = [(f"q{i}", f"q{i}.run{rng.randint(0, 9)}") for i in range(rng.randint(2, 6))]
    stage = {u: 0 for _, u in units}
    keep_open = units[0][1]
    for _ in range(rng.randint(3, 15)):
        key, unit = rng.choice(units)
        if stage[unit] == 0:
            ck.started(key, unit, scope=f"scope-{unit}")
            events.append(("started", key, unit))
        elif stage[unit] == 1:
            ck.ingested(key, unit, f"scope-{unit}", {"sessions": rng.randint(1, 9), "note": "ü\u2028"})
            events.append(("ingested", key, unit))
        elif stage[unit] == 2 and unit != keep_open:
            ck.done(key, unit)
            events.append(("done", key, unit))
        else:
            continue
        stage[unit] += 1
    if stage[keep_open] == 0:
        ck.started(units[0][0], keep_open, scope=None)
        events.append(("started", units[0][0], keep_open))
    assert path.exists()
    return events


def _state(ck: IngestCheckpoint) -> dict[str, bool]:
    """unit -> ingested, for every unit the loaded checkpoint holds open."""
    return {u.unit: u.ingested for u in ck._stale.values()}


def _expected(lines: list[bytes]) -> dict[str, bool]:
    state: dict[str, bool] = {}
    for raw in lines:
        d = json.loads(raw)
        if d["event"] == "done":
            state.pop(d["unit"], None)
        else:
            state[d["unit"]] = d["event"] == "ingested"
    return state


@pytest.mark.parametrize("seed", range(60))
def test_a_checkpoint_cut_anywhere_loads_and_says_what_its_complete_lines_say(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "memory-ingest.memory.jsonl"
    _write_history(path, rng)
    data = path.read_bytes()
    cut = rng.randint(0, len(data))
    path.write_bytes(data[:cut])
    complete = [line for line in data[:cut].split(b"\n")[:-1] if line.strip()]
    assert _state(_open(path)) == _expected(complete)
    # The torn tail is gone from the file: a later append starts on a line of its own.
    assert path.read_bytes() in (b"", b"\n".join(complete) + b"\n")


def _damage(data: bytes, rng: random.Random, other: bytes) -> bytes:
    lines = data.split(b"\n")
    kind = rng.choice(("flip", "flip", "delete", "splice", "repeat", "swap"))
    if kind == "flip":
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if kind == "delete":
        i = rng.randrange(len(data))
        return data[:i] + data[i + rng.randint(1, 20) :]
    if kind == "splice":  # a line of another run's checkpoint (other units, maybe another provider)
        foreign = [line for line in other.split(b"\n") if line]
        lines.insert(rng.randrange(len(lines)), rng.choice(foreign))
    elif kind == "repeat":
        i = rng.randrange(len(lines))
        lines.insert(i, lines[rng.randrange(len(lines))])
    else:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


@pytest.mark.parametrize("seed", range(150))
def test_damage_is_one_named_error_or_a_state_its_complete_ingested_lines_support(tmp_path: Path, seed: int) -> None:
    rng = random.Random(1000 + seed)
    path = tmp_path / "memory-ingest.memory.jsonl"
    _write_history(path, rng)
    other_path = tmp_path / "other.jsonl"
    _write_history(other_path, random.Random(seed))
    other = other_path.read_bytes()
    if rng.random() < 0.5:
        other = other.replace(b'"provider": "svc"', b'"provider": "another"')
    path.write_bytes(_damage(path.read_bytes(), rng, other))
    damaged = path.read_bytes()
    try:
        ck = _open(path)
    except CheckpointError as e:  # the one error a damaged checkpoint may give
        assert str(e).startswith(f"{path}:")
        assert "Tear down its units on the service" in str(e)
        return
    # Read as valid: every unit it calls ingested has a complete, parseable `ingested` line in the file as read.
    ingested_lines = set()
    for raw in damaged.split(b"\n"):
        try:
            d = json.loads(raw)
        except ValueError:
            continue
        if isinstance(d, dict) and d.get("event") == "ingested":
            ingested_lines.add(d.get("unit"))
    for unit, ingested in _state(ck).items():
        assert not ingested or unit in ingested_lines, (unit, damaged)
