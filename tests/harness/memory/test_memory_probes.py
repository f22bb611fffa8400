"""Generated-input probes of the memory contract (harness/memory/provider.py, http.py): seeded random units,
sessions, dates and as_of. For both built-in providers, in the Python form and over HTTP:

- isolation: each unit's turns carry a canary word of their own; retrieve for a unit never returns an item holding
  another unit's canary, even when the query names every canary;
- as_of: no item is dated after as_of, neither by provenance nor by the session its text came from;
- the HTTP form (reference server + HttpProvider) answers exactly what the Python form answers, and every
  generated body (unicode, empty turns and sessions, odd but valid dates) round-trips the JSON codec unchanged.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta, timezone

import pytest

from harness.memory.builtin import FullContextProvider, IndexProvider
from harness.memory.http import HttpProvider, MemoryServer, items_json, items_of, sessions_json, sessions_of
from harness.memory.provider import MemoryProvider, MemorySession, MemoryTurn, parse_iso

SEEDS = range(12)
WORDS = ["cat", "flat", "cello", "Zürich", "東京", "שלום", "🐈", "naïve", "e\u0301", "tab\there", "", "new\nline"]
ODD_TEXT = ["", " ", "\u0000", "\u2028", "👩‍👩‍👧", "\\", '"quoted"', "ｆｕｌｌ", "\ufeffbom", "a" * 300]


def _date(rng: random.Random) -> str:
    """A valid contract date in one of its spellings: Z, an offset, fractional seconds, a leap day, an old year."""
    base = datetime(rng.choice([1999, 2020, 2023, 2024, 2031]), 1, 1, tzinfo=UTC)
    d = base + timedelta(seconds=rng.randrange(0, 366 * 86400))
    if rng.random() < 0.1:
        d = datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC)
    style = rng.randrange(4)
    if style == 0:
        return d.strftime("%Y-%m-%dT%H:%M:%SZ")
    if style == 1:
        off = timezone(timedelta(minutes=rng.choice([-720, -90, 330, 345, 840])))
        return d.astimezone(off).isoformat()
    if style == 2:
        return d.replace(microsecond=rng.randrange(1, 10**6)).isoformat().replace("+00:00", "Z")
    return d.strftime("%Y-%m-%dT%H:%M:%S")  # no offset: UTC by the contract


def _text(rng: random.Random, canary: str | None) -> str:
    parts = [rng.choice(WORDS + ODD_TEXT) for _ in range(rng.randrange(0, 5))]
    if canary is not None:
        parts.insert(rng.randrange(len(parts) + 1), canary)
    return " ".join(parts)


def world(seed: int) -> tuple[dict[str, tuple[MemorySession, ...]], dict[str, str], list[str]]:
    """(unit -> sessions, unit -> its canary, as_of values to ask with)."""
    rng = random.Random(seed)
    units: dict[str, tuple[MemorySession, ...]] = {}
    canaries: dict[str, str] = {}
    names = ["u", "unit/with/slash", "ünï ✓", "", "0", "a" * 100, "e\u0301"]
    for k in range(rng.randrange(2, 5)):
        unit = f"{rng.choice(names)}#{k}"
        canary = f"canary{k}q{rng.randrange(16**6):06x}"
        sessions = []
        for s in range(rng.randrange(1, 5)):
            turns = tuple(
                MemoryTurn(rng.choice(["user", "assistant"]), _text(rng, canary if rng.random() < 0.7 else None))
                for _ in range(rng.randrange(0, 4))
            )
            sessions.append(MemorySession(rng.choice([f"s{s}", f"sess {s} ✓", f"{s}"]), _date(rng), turns))
        units[unit], canaries[unit] = tuple(sessions), canary
    all_dates = [s.date for ss in units.values() for s in ss]
    # on a session's date, one second before it (the boundary either side), anywhere, after and before all
    edges = [parse_iso(d) for d in rng.sample(all_dates, min(3, len(all_dates)))]
    as_ofs = [e.strftime("%Y-%m-%dT%H:%M:%SZ") for e in edges]
    as_ofs += [(e - timedelta(seconds=1)).isoformat() for e in edges]
    as_ofs += [_date(rng), "2100-01-01T00:00:00Z", "1900-01-01T00:00:00Z"]
    return units, canaries, as_ofs


def _answers(p: MemoryProvider, units, canaries, as_ofs, seed: int) -> list:
    rng = random.Random(seed + 1000)
    out = []
    for unit, sessions in units.items():
        p.setup(unit)
        assert p.ingest(unit, sessions).ready
    every = " ".join(canaries.values())
    for unit in units:
        for as_of in as_ofs:
            for query in (every, canaries[unit], rng.choice(WORDS + ODD_TEXT)):
                top_k = rng.choice([1, 3, 50])
                out.append(((unit, query, top_k, as_of), p.retrieve(unit, query, top_k, as_of)))
    return out


def _check_isolation_and_as_of(answers, units, canaries) -> None:
    dated = {u: {s.session_id: s.date for s in ss} for u, ss in units.items()}
    for (unit, _query, top_k, as_of), got in answers:
        assert len(got.items) <= top_k
        cutoff = parse_iso(as_of)
        for item in got.items:
            for other, canary in canaries.items():
                assert other == unit or canary not in item.text, f"{other!r}'s canary came back for {unit!r}"
            prov = item.provenance
            assert prov is not None and prov.date is not None, "a built-in item names its session and date"
            assert parse_iso(prov.date) <= cutoff, f"an item dated {prov.date} came back with as_of={as_of}"
            # the session the item came from, by the unit's own sessions: dated at or before as_of too
            assert parse_iso(dated[unit][prov.session_id]) <= cutoff


@pytest.mark.parametrize("make", [IndexProvider, FullContextProvider], ids=["bm25", "full_context"])
@pytest.mark.parametrize("seed", SEEDS)
def test_built_ins_keep_units_apart_and_nothing_after_as_of(make, seed) -> None:
    units, canaries, as_ofs = world(seed)
    answers = _answers(make(), units, canaries, as_ofs, seed)
    assert any(got.items for _, got in answers), "a probe that retrieves nothing proves nothing"
    _check_isolation_and_as_of(answers, units, canaries)


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_bodies_round_trip_the_json_codec(seed) -> None:
    units, _, _ = world(seed)
    for sessions in units.values():
        wire = json.loads(json.dumps(sessions_json(sessions)))
        assert sessions_of(wire) == sessions
    answers = _answers(IndexProvider(), units, *world(seed)[1:], seed)
    for _, got in answers:
        assert items_of(json.loads(json.dumps(items_json(got.items)))) == got.items


@pytest.mark.parametrize("make", [IndexProvider, FullContextProvider], ids=["bm25", "full_context"])
def test_the_http_form_answers_what_the_python_form_answers(make) -> None:
    with MemoryServer(make()) as srv:
        remote = HttpProvider(srv.base_url, timeout_s=30)
        assert remote.capabilities() == make().capabilities()
        for seed in SEEDS:
            units, canaries, as_ofs = world(seed)
            direct = _answers(make(), units, canaries, as_ofs, seed)
            over_http = _answers(remote, units, canaries, as_ofs, seed)
            assert over_http == direct
            for unit in units:
                remote.teardown(unit)
