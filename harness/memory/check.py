"""`lme-harness provider-check TARGET`: does a memory provider keep the contract (docs/memory-systems.md)?

TARGET is a service's base URL (checked through the HTTP client) or a Python provider class, `module.path:Class`
(built with `--kwargs JSON`), so a contestant written in Python is checked as a service is. Runs on two fresh units
with planted facts, then names every check that failed, and every check it did not run (SKIP, with the reason):

- capabilities: well formed (name, version, the required calls, concurrency >= 1);
- shapes: every call answers the contract's JSON (HttpProvider decodes and names a bad field);
- finds_own: a fact planted in a unit is retrieved for that unit;
- top_k: never more items than asked;
- score_order: items that carry scores come best first (scores never increase down the list);
- isolation: nothing planted in unit A (its canary, its sessions) comes back for unit B, whether B's query names A's
  canary or not; a failure names which unit's content came back for which, and the items;
- as_of: nothing from a session dated after `as_of` comes back, and no item's provenance date is after it;
- unknown_unit: retrieve for a unit never set up is an error, not an answer;
- stored: when the provider lists `stored`, a unit's listing holds its own planted fact and never the other unit's;
- teardown: after teardown and a fresh setup, the unit's old facts are gone;
- answer: when the provider lists `answer`, it returns a string;
- attach: when the provider lists `attach`, it says true for a unit set up, ingested and ready (which still retrieves
  its fact after), and false for a unit never set up and for one torn down.

A check never depends on the service's ranking beyond "a distinctive word finds its turn among three".
"""

from __future__ import annotations

import importlib
import math
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.memory.provider import (
    MemoryItem,
    MemoryProvider,
    MemorySession,
    MemoryTurn,
    ProviderError,
    Retrieval,
    parse_iso,
    with_provider_defaults,
)

EARLY, LATE, AS_OF = "2023-05-01T10:00:00Z", "2023-06-01T10:00:00Z", "2023-05-15T00:00:00Z"
AFTER_ALL = "2023-07-01T00:00:00Z"
PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
# A Python provider named on the command line: an importable module path, a colon, a class name. Anything else that
# is not a URL is refused without being printed (it may be a URL mistyped with its credentials).
PYTHON_TARGET = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
URL_SCHEMES = ("http", "https")


@dataclass(frozen=True)
class Skip:
    """What a check returns when it did not run its calls (the provider does not list them): reported as SKIP."""

    why: str


@dataclass
class CheckReport:
    provider: str = "?"
    results: list[tuple[str, str, str | None]] = field(default_factory=list)  # (check, PASS|FAIL|SKIP, why)

    @property
    def passed(self) -> list[str]:
        return [name for name, status, _ in self.results if status == PASS]

    @property
    def failed(self) -> list[tuple[str, str]]:
        return [(name, why or "") for name, status, why in self.results if status == FAIL]

    @property
    def skipped(self) -> list[tuple[str, str]]:
        return [(name, why or "") for name, status, why in self.results if status == SKIP]

    @property
    def ok(self) -> bool:
        return not self.failed

    def text(self) -> str:
        lines = [f"provider-check: {self.provider}"]
        lines += [f"  {status} {name}" + (f": {why}" if why else "") for name, status, why in self.results]
        if self.failed:
            verdict = f"{len(self.failed)} check(s) failed: " + ", ".join(n for n, _ in self.failed)
        else:
            verdict = "conforms"
        if self.skipped:
            verdict += f" ({len(self.skipped)} not run: " + ", ".join(n for n, _ in self.skipped) + ")"
        return "\n".join([*lines, verdict])


CHECKS = (
    "capabilities",
    "setup_ingest",
    "finds_own",
    "top_k",
    "score_order",
    "isolation",
    "as_of",
    "unknown_unit",
    "stored",
    "teardown",
    "answer",
    "attach",
)


@dataclass(frozen=True)
class _Unit:
    """A unit of the check and what was planted in it: its canary word and its session ids."""

    label: str  # "A" | "B"
    unit: str
    canary: str
    sessions: tuple[MemorySession, ...]

    @property
    def session_ids(self) -> frozenset[str]:
        return frozenset(s.session_id for s in self.sessions)

    def owns(self, item: MemoryItem, query: str) -> bool:
        """Whether `item` is this unit's content: its provenance names one of the unit's sessions, or its text holds
        the unit's canary once the query (which may name the canary, and which a service may echo) is taken out."""
        p = item.provenance
        if p is not None and p.session_id in self.session_ids:
            return True
        return self.canary in item.text.replace(query, "")

    def name(self) -> str:
        return f"unit {self.label} ({self.unit!r})"


def _sessions(tag: str, label: str, canary: str, future: str) -> tuple[MemorySession, ...]:
    return (
        MemorySession(
            f"check-{tag}-{label.lower()}-1",
            EARLY,
            (
                MemoryTurn("user", f"My new kitten is called {canary}."),
                MemoryTurn("assistant", "What a lovely name for a kitten!"),
                MemoryTurn("user", "I also started learning the cello this spring."),
            ),
        ),
        MemorySession(
            f"check-{tag}-{label.lower()}-2", LATE, (MemoryTurn("user", f"I moved to a new flat on {future} street."),)
        ),
    )


def _holds(r: Retrieval, word: str, query: str) -> bool:
    """Whether an item holds `word` other than inside the query echoed back (a service may return the query)."""
    return any(word in i.text.replace(query, "") for i in r.items)


def _describe(item: MemoryItem, index: int, total: int) -> str:
    p = item.provenance
    where = f"session {p.session_id!r}, " if p is not None and p.session_id else ""
    text = item.text if len(item.text) <= 80 else item.text[:77] + "..."
    return f"item {index + 1} of {total} ({where}text {text!r})"


def _score_problems(items: tuple[MemoryItem, ...]) -> list[str]:
    """Why the scored items of one retrieval are not best first (scores never increase down the list)."""
    scored = [(n, i.score) for n, i in enumerate(items) if i.score is not None]
    bad = [f"item {n + 1}'s score {s!r} is not a finite number" for n, s in scored if not math.isfinite(s)]
    finite = [(n, s) for n, s in scored if math.isfinite(s)]
    bad += [
        f"item {n2 + 1} scores {s2!r}, above item {n1 + 1}'s {s1!r}"
        for (n1, s1), (n2, s2) in zip(finite, finite[1:])
        if s2 > s1
    ]
    return bad


def check_provider(provider: MemoryProvider, *, ready_timeout_s: float = 120.0, poll_s: float = 0.5) -> CheckReport:
    provider = with_provider_defaults(provider)  # the optional members it leaves out: their declared defaults
    rep = CheckReport()
    tag = uuid.uuid4().hex[:8]
    future = f"Vexmoor{tag}"
    a = _Unit("A", f"check-{tag}-a", f"Zorblax{tag}", _sessions(tag, "A", f"Zorblax{tag}", future))
    b = _Unit("B", f"check-{tag}-b", f"Quintrel{tag}", _sessions(tag, "B", f"Quintrel{tag}", future))
    unknown = f"check-{tag}-never-set-up"
    retrievals: list[tuple[str, Retrieval]] = []  # every retrieval seen: score order is checked over all of them

    def retrieve(unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        got = provider.retrieve(unit, query, top_k, as_of)
        retrievals.append((query, got))
        return got

    def run(name: str, fn: Callable[[], str | Skip | None]) -> bool:
        """One check: `fn` returns why it failed (None = passed, a Skip = not run); a provider error fails it."""
        try:
            why = fn()
        except ProviderError as e:
            why = str(e)
        except Exception as e:  # a check must report, never crash the list
            why = f"{type(e).__name__}: {e}"
        if isinstance(why, Skip):
            rep.results.append((name, SKIP, why.why))
        else:
            rep.results.append((name, PASS if why is None else FAIL, why))
        return why is None

    def skip_rest(why: str) -> CheckReport:
        done = {name for name, _, _ in rep.results}
        rep.results += [(name, SKIP, why) for name in CHECKS if name not in done]
        return rep

    def listed(call: str) -> bool:
        return provider.capabilities().supports(call)

    def caps() -> str | None:
        c = provider.capabilities()
        rep.provider = f"{c.name} {c.version}"
        problems = c.problems()
        return "; ".join(problems) if problems else None

    if not run("capabilities", caps):
        return skip_rest("not run: capabilities failed, nothing else can be trusted")

    def ingest_both() -> str | None:
        for u in (a, b):
            provider.setup(u.unit)
            done = provider.ingest(u.unit, u.sessions)
            t0 = time.monotonic()
            while not done.ready and not provider.ready(u.unit):
                if time.monotonic() - t0 > ready_timeout_s:
                    return f"unit {u.unit!r} not ready after {ready_timeout_s} s"
                time.sleep(poll_s)
        return None

    if not run("setup_ingest", ingest_both):
        return skip_rest("not run: setup_ingest failed")

    def finds_own() -> str | None:
        query = f"What is my kitten called? {a.canary}"
        got = retrieve(a.unit, query, 3, AFTER_ALL)
        return None if _holds(got, a.canary, query) else f"the planted fact {a.canary!r} was not retrieved for its unit"

    def top_k() -> str | None:
        n = len(retrieve(a.unit, "kitten cello flat street", 1, AFTER_ALL).items)
        return None if n <= 1 else f"asked top_k=1, got {n} items"

    def score_order() -> str | Skip | None:
        for u in (a, b):
            retrieve(u.unit, "kitten cello lovely name spring", 10, AFTER_ALL)
        why = [f"retrieve {query!r}: {problem}" for query, got in retrievals for problem in _score_problems(got.items)]
        if why:
            return (
                "items are not best first: "
                + "; ".join(why[:3])
                + (f" (and {len(why) - 3} more)" if len(why) > 3 else "")
            )
        if not any(i.score is not None for _, got in retrievals for i in got.items):
            return Skip("no item carried a score (score: null), so there was no order to check")
        return None

    def isolation() -> str | None:
        why = []
        for asked, owner in ((b, a), (a, b)):
            seen = []  # (query, the items of `owner` it returned for `asked`)
            for how, query in (
                (f"asked with {owner.label}'s canary", f"What is my kitten called? {owner.canary}"),
                ("asked without it", "What is my kitten called?"),
            ):
                got = retrieve(asked.unit, query, 10, AFTER_ALL)
                leaked = [_describe(i, n, len(got.items)) for n, i in enumerate(got.items) if owner.owns(i, query)]
                if leaked:
                    seen.append(f"{how}: " + ", ".join(leaked))
            if seen:
                why.append(f"{owner.name()}'s content came back for {asked.name()} (" + "; ".join(seen) + ")")
        return "; ".join(why) or None

    def as_of() -> str | None:
        query = f"Where did I move? {future} street flat"
        got = retrieve(a.unit, query, 10, AS_OF)
        why = []
        if _holds(got, future, query):
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
            got = retrieve(unknown, "kitten", 3, AFTER_ALL)
        except ProviderError:
            return None
        return f"retrieve for a unit never set up answered {len(got.items)} item(s) instead of an error"

    def stored() -> str | Skip | None:
        listing = provider.stored  # a Python provider offers it by having it (default None)
        if listing is None:
            return Skip("the provider has no 'stored' call")
        why = []
        for u, other in ((a, b), (b, a)):
            items = listing(u.unit)
            if items is None:  # the HTTP client: the service does not list it
                return Skip("'stored' is not listed in capabilities.calls")
            if not any(u.owns(i, "") for i in items):
                why.append(f"the listing of {u.name()} does not hold its planted fact {u.canary!r}")
            if leaked := [_describe(i, n, len(items)) for n, i in enumerate(items) if other.owns(i, "")]:
                why.append(f"{other.name()}'s content is listed for {u.name()}: " + "; ".join(leaked))
        return "; ".join(why) or None

    def teardown() -> str | None:
        provider.teardown(a.unit)
        provider.setup(a.unit)
        try:
            query = f"What is my kitten called? {a.canary}"
            left = [i for i in retrieve(a.unit, query, 10, AFTER_ALL).items if a.owns(i, query)]
        finally:
            provider.teardown(a.unit)
        return f"{a.name()}'s planted fact still retrieved after teardown and a fresh setup" if left else None

    def answer() -> str | Skip | None:
        if not listed("answer"):
            return Skip("'answer' is not listed in capabilities.calls")
        got = provider.answer(b.unit, "What is my kitten called?", AFTER_ALL)
        return None if isinstance(got.answer, str) else f"answer is {type(got.answer).__name__}, not a string"

    def attach() -> str | Skip | None:
        if not listed("attach"):
            return Skip("'attach' is not listed in capabilities.calls")  # optional: a service without it is never asked
        why = []
        if provider.attach(b.unit) is not True:
            why.append(f"attach of {b.unit!r} (set up, ingested, ready) did not answer true")
        elif not _holds(
            retrieve(b.unit, query := f"What is my kitten called? {b.canary}", 3, AFTER_ALL), b.canary, query
        ):
            why.append(f"after attach, the planted fact {b.canary!r} was not retrieved for its unit")
        if provider.attach(unknown) is not False:
            why.append(f"attach of {unknown!r} (never set up) did not answer false")
        if provider.attach(a.unit) is not False:
            why.append(f"attach of {a.unit!r} (torn down) did not answer false")
        return "; ".join(why) or None

    checks: dict[str, Callable[[], str | Skip | None]] = {
        "finds_own": finds_own,
        "top_k": top_k,
        "score_order": score_order,
        "isolation": isolation,
        "as_of": as_of,
        "unknown_unit": unknown_unit,
        "stored": stored,
        "teardown": teardown,
        "answer": answer,
        "attach": attach,
    }
    assert tuple(checks) == CHECKS[2:]
    for name, fn in checks.items():
        run(name, fn)
    try:
        provider.teardown(b.unit)
    except ProviderError as e:
        rep.results.append(("teardown", FAIL, str(e)))
    return rep


class TargetError(ValueError):
    """A provider-check target refused before any call. The message never holds a URL's userinfo, query or
    fragment, the value of `--api-key-env`, or a target that is neither a URL nor a Python class."""


def _url_provider(url: str, timeout_s: float, api_key_env: str | None) -> tuple[MemoryProvider, str]:
    from harness import secrets
    from harness.memory.http import HttpProvider

    if found := secrets.url_credentials(url):
        raise TargetError(
            f"the URL carries {', '.join(found)}; refused, and not printed: give the base URL alone (scheme, host, "
            "port, path) and a bearer token through --api-key-env VAR"
        )
    shown = secrets.describe_endpoint(url)
    if shown == "<unparsable URL>" or url.split("://", 1)[0].lower() not in URL_SCHEMES:
        raise TargetError(f"{shown}: not an http(s) URL")
    return HttpProvider(url, timeout_s=timeout_s, api_key_env=api_key_env), shown


def _python_provider(target: str, kwargs: Mapping[str, Any]) -> MemoryProvider:
    from harness import secrets

    try:
        secrets.check_config(dict(kwargs))  # the rules every config obeys: a key only through the environment
    except secrets.SecretConfigError as e:
        raise TargetError(f"--kwargs: {e}") from None
    module, _, name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except ImportError as e:
        raise TargetError(f"{target}: cannot import module {module!r} ({e})") from None
    except AttributeError:
        raise TargetError(f"{target}: module {module!r} has no {name!r}") from None
    try:
        provider = cls(**kwargs)
    except Exception as e:  # a constructor's own error, named with the target
        raise TargetError(f"{target}: could not be built with the given --kwargs: {type(e).__name__}: {e}") from None
    # the required calls; the optional members it leaves out get their defaults (`with_provider_defaults`)
    missing = [m for m in ("capabilities", "setup", "ingest", "retrieve", "teardown") if not hasattr(provider, m)]
    if missing:
        raise TargetError(f"{target}: not a memory provider (no {', '.join(missing)} method)")
    return with_provider_defaults(provider)


def provider_of(
    target: str,
    *,
    kwargs: Mapping[str, Any] | None = None,
    timeout_s: float = 60.0,
    api_key_env: str | None = None,
) -> tuple[MemoryProvider, str]:
    """The provider `target` names and how it may be printed: a base URL (the HTTP client; a bearer token from the
    variable `api_key_env` names) or a Python class `module.path:Class` built with `kwargs`. TargetError, naming
    no secret, for anything else: a URL with userinfo, a query or a fragment (harness/secrets.py's rule for every
    endpoint), a variable name that is not one, a target that is neither form."""
    from harness import secrets

    if api_key_env is not None:
        if problem := secrets.env_field_problem("--api-key-env", api_key_env):
            raise TargetError(problem)
        if not os.environ.get(api_key_env):  # not named back: a key given in the name's place would be echoed
            raise TargetError(
                "--api-key-env=***: the environment variable it names is not set (the name is not printed: it may "
                "be the key itself); export the token in a variable and give its name"
            )
    if "://" in target:
        if kwargs:
            raise TargetError("--kwargs is for a Python provider (module.path:Class); a service takes none")
        return _url_provider(target, timeout_s, api_key_env)
    if not PYTHON_TARGET.match(target):
        raise TargetError(
            "TARGET (not printed) is neither a URL (http://host:port/path) nor a Python provider class "
            "(module.path:ClassName)"
        )
    if api_key_env is not None:
        raise TargetError("--api-key-env is for a URL; a Python provider reads its key as its own --kwargs say")
    return _python_provider(target, kwargs or {}), target


def check_url(url: str, *, timeout_s: float = 60.0, api_key_env: str | None = None) -> CheckReport:
    provider, _ = provider_of(url, timeout_s=timeout_s, api_key_env=api_key_env)
    return check_provider(provider)
