"""`lme-harness provider-check URL`: does a memory service keep the contract (docs/memory-systems.md)?

Runs on two fresh units with planted facts, then names every check that failed:

- capabilities: well formed (name, version, the required calls, concurrency >= 1);
- shapes: every call answers the contract's JSON (HttpProvider decodes and names a bad field);
- finds_own: a fact planted in a unit is retrieved for that unit;
- top_k: never more items than asked;
- isolation: a canary planted in unit A never comes back for unit B, even when B's query names it;
- as_of: nothing from a session dated after `as_of` comes back, and no item's provenance date is after it;
- unknown_unit: retrieve for a unit never set up is an error, not an answer;
- teardown: after teardown and a fresh setup, the unit's old facts are gone;
- answer: when the provider lists `answer`, it returns a string;
- attach: when the provider lists `attach`, it says true for a unit set up, ingested and ready (which still retrieves
  its fact after), and false for a unit never set up and for one torn down.

A check never depends on the service's ranking beyond "a distinctive word finds its turn among three".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.memory.provider import (
    MemoryProvider,
    MemorySession,
    MemoryTurn,
    ProviderError,
    Retrieval,
    parse_iso,
)

EARLY, LATE, AS_OF = "2023-05-01T10:00:00Z", "2023-06-01T10:00:00Z", "2023-05-15T00:00:00Z"
AFTER_ALL = "2023-07-01T00:00:00Z"


@dataclass
class CheckReport:
    provider: str = "?"
    passed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (check, why)

    @property
    def ok(self) -> bool:
        return not self.failed

    def text(self) -> str:
        lines = [f"provider-check: {self.provider}"]
        lines += [f"  PASS {name}" for name in self.passed]
        lines += [f"  FAIL {name}: {why}" for name, why in self.failed]
        verdict = (
            "conforms" if self.ok else f"{len(self.failed)} check(s) failed: " + ", ".join(n for n, _ in self.failed)
        )
        return "\n".join([*lines, verdict])


def _sessions(canary: str, future: str) -> list[MemorySession]:
    return [
        MemorySession(
            "check-1",
            EARLY,
            (
                MemoryTurn("user", f"My new kitten is called {canary}."),
                MemoryTurn("assistant", "What a lovely name for a kitten!"),
                MemoryTurn("user", "I also started learning the cello this spring."),
            ),
        ),
        MemorySession("check-2", LATE, (MemoryTurn("user", f"I moved to a new flat on {future} street."),)),
    ]


def _texts(r: Retrieval) -> str:
    return "\n".join(i.text for i in r.items)


def check_provider(provider: MemoryProvider, *, ready_timeout_s: float = 120.0, poll_s: float = 0.5) -> CheckReport:
    rep = CheckReport()
    tag = uuid.uuid4().hex[:8]
    unit_a, unit_b, unknown = f"check-{tag}-a", f"check-{tag}-b", f"check-{tag}-never-set-up"
    canary_a, canary_b, future = f"Zorblax{tag}", f"Quintrel{tag}", f"Vexmoor{tag}"

    def run(name: str, fn: Callable[[], str | None]) -> bool:
        """One check: `fn` returns why it failed (None = passed); a provider error fails it too."""
        try:
            why = fn()
        except ProviderError as e:
            why = str(e)
        except Exception as e:  # a check must report, never crash the list
            why = f"{type(e).__name__}: {e}"
        if why is None:
            rep.passed.append(name)
        else:
            rep.failed.append((name, why))
        return why is None

    def caps() -> str | None:
        c = provider.capabilities()
        rep.provider = f"{c.name} {c.version}"
        problems = c.problems()
        return "; ".join(problems) if problems else None

    if not run("capabilities", caps):
        return rep  # nothing else can be trusted

    def ingest_both() -> str | None:
        for unit, canary in ((unit_a, canary_a), (unit_b, canary_b)):
            provider.setup(unit)
            done = provider.ingest(unit, _sessions(canary, future))
            t0 = time.monotonic()
            while not done.ready and not provider.ready(unit):
                if time.monotonic() - t0 > ready_timeout_s:
                    return f"unit {unit!r} not ready after {ready_timeout_s} s"
                time.sleep(poll_s)
        return None

    if not run("setup_ingest", ingest_both):
        return rep

    def finds_own() -> str | None:
        got = provider.retrieve(unit_a, f"What is my kitten called? {canary_a}", 3, AFTER_ALL)
        return None if canary_a in _texts(got) else f"the planted fact {canary_a!r} was not retrieved for its unit"

    def top_k() -> str | None:
        n = len(provider.retrieve(unit_a, "kitten cello flat street", 1, AFTER_ALL).items)
        return None if n <= 1 else f"asked top_k=1, got {n} items"

    def isolation() -> str | None:
        leaked = [
            (u, c)
            for u, c in ((unit_b, canary_a), (unit_a, canary_b))
            if c in _texts(provider.retrieve(u, f"What is my kitten called? {c}", 10, AFTER_ALL))
        ]
        return None if not leaked else "; ".join(f"{c!r} of another unit came back for {u!r}" for u, c in leaked)

    def as_of() -> str | None:
        got = provider.retrieve(unit_a, f"Where did I move? {future} street flat", 10, AS_OF)
        why = []
        if future in _texts(got):
            why.append(f"a session dated {LATE} came back with as_of={AS_OF}")
        late = [
            i.provenance.date
            for i in got.items
            if i.provenance and i.provenance.date and parse_iso(i.provenance.date) > parse_iso(AS_OF)
        ]
        if late:
            why.append(f"{len(late)} item(s) with provenance dated after as_of ({late[0]})")
        return "; ".join(why) or None

    def unknown_unit() -> str | None:
        try:
            got = provider.retrieve(unknown, "kitten", 3, AFTER_ALL)
        except ProviderError:
            return None
        return f"retrieve for a unit never set up answered {len(got.items)} item(s) instead of an error"

    def teardown() -> str | None:
        provider.teardown(unit_a)
        provider.setup(unit_a)
        try:
            left = canary_a in _texts(provider.retrieve(unit_a, f"What is my kitten called? {canary_a}", 10, AFTER_ALL))
        finally:
            provider.teardown(unit_a)
        return f"{canary_a!r} still retrieved after teardown and a fresh setup" if left else None

    def answer() -> str | None:
        if not provider.capabilities().supports("answer"):
            return None
        got = provider.answer(unit_b, "What is my kitten called?", AFTER_ALL)
        return None if isinstance(got.answer, str) else f"answer is {type(got.answer).__name__}, not a string"

    def attach() -> str | None:
        if not provider.capabilities().supports("attach"):
            return None  # optional: a service without it is never asked
        why = []
        if provider.attach(unit_b) is not True:
            why.append(f"attach of {unit_b!r} (set up, ingested, ready) did not answer true")
        elif canary_b not in _texts(provider.retrieve(unit_b, f"What is my kitten called? {canary_b}", 3, AFTER_ALL)):
            why.append(f"after attach, the planted fact {canary_b!r} was not retrieved for its unit")
        if provider.attach(unknown) is not False:
            why.append(f"attach of {unknown!r} (never set up) did not answer false")
        if provider.attach(unit_a) is not False:
            why.append(f"attach of {unit_a!r} (torn down) did not answer false")
        return "; ".join(why) or None

    for name, fn in (
        ("finds_own", finds_own),
        ("top_k", top_k),
        ("isolation", isolation),
        ("as_of", as_of),
        ("unknown_unit", unknown_unit),
        ("teardown", teardown),
        ("answer", answer),
        ("attach", attach),
    ):
        run(name, fn)
    try:
        provider.teardown(unit_b)
    except ProviderError as e:
        rep.failed.append(("teardown", str(e)))
    return rep


def check_url(url: str, *, timeout_s: float = 60.0, api_key_env: str | None = None) -> CheckReport:
    from harness.memory.http import HttpProvider

    return check_provider(HttpProvider(url, timeout_s=timeout_s, api_key_env=api_key_env))
