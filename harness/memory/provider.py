"""The memory-provider contract: what a memory system gives the benchmark (docs/memory-systems.md).

A provider is driven per *unit* (one unit per LongMemEval question, so cases never share memory):

    capabilities()                          -> Capabilities       (once per run)
    setup(unit)                                                    (an empty memory for the unit)
    ingest(unit, sessions)                  -> Ingest             (the history; never the question)
    ready(unit)                             -> bool               (polled until true when ingest is asynchronous)
    retrieve(unit, query, top_k, as_of)     -> Retrieval          (items for the question, none dated after as_of)
    answer(unit, query, as_of)              -> ProviderAnswer     (optional: systems that answer themselves)
    attach(unit)                            -> bool               (optional: is the unit, ingested and ready,
                                                                   still there? A resumed run then skips ingest)
    stored(unit)                            -> tuple[MemoryItem]  (optional: every memory stored for the unit, to
                                                                   tell "not stored" from "not retrieved")
    teardown(unit)                                                 (forget the unit)

The same calls exist as HTTP/JSON routes (harness/memory/http.py); this module is the Python form. A Python
provider also has lifecycle hooks (`MemoryProvider` declares each, `ProviderBase` holds its default): `remote`,
`preflight()`, `keep_units_in(directory)` (the contestant calls it once, before the first unit, with a directory of
the run's; the provider then keeps its units there, so they outlive the process as a remote service's do, and should
offer `attach`, so a resumed run answers against an ingested unit instead of ingesting it again), `scope(unit)`,
`bind_model(model)` / `bind_toolkit(kit)`. Dates are ISO 8601 in UTC (`2023-05-20T02:21:00Z`), so they compare as
strings in any language. A Python provider offers `stored` by having the method (`ProviderBase.stored` is None); a
service over HTTP lists `stored` in its calls (the client then answers None when it does not: nothing to measure).
A provider that fails raises `ProviderError`; the harness records the failure against the unit and never scores it
as a wrong answer.

Stable: the mem0 adapter and the HTTP client are written against it; a change here is named in its commit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from harness.hook_defaults import with_defaults

CONTRACT_VERSION = "1"
# Calls every provider answers, and the optional ones a provider names in `Capabilities.calls`.
REQUIRED_CALLS = frozenset({"setup", "ingest", "retrieve", "teardown"})
OPTIONAL_CALLS = frozenset({"ready", "answer", "attach", "stored"})
ROLES = frozenset({"user", "assistant"})
LME_DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"  # the dataset's dates, e.g. "2023/05/20 (Sat) 02:21"


class ProviderError(RuntimeError):
    """A provider call failed; names the provider, the call and the unit."""

    def __init__(self, provider: str, call: str, unit: str | None, message: str) -> None:
        self.provider, self.call, self.unit, self.detail = provider, call, unit, message
        where = f" for unit {unit!r}" if unit else ""
        super().__init__(f"memory provider {provider!r}: {call}{where} failed: {message}")


@dataclass(frozen=True)
class Capabilities:
    """Who the provider is and what it supports. `concurrency`: units it accepts in flight at once."""

    name: str
    version: str
    calls: frozenset[str] = REQUIRED_CALLS
    concurrency: int = 1
    contract: str = CONTRACT_VERSION

    def supports(self, call: str) -> bool:
        return call in self.calls

    def problems(self) -> list[str]:
        """What is wrong with these capabilities (empty when well formed)."""
        out = []
        if not self.name:
            out.append("capabilities.name is empty")
        if missing := sorted(REQUIRED_CALLS - self.calls):
            out.append(f"capabilities.calls lacks the required {missing}")
        if unknown := sorted(self.calls - REQUIRED_CALLS - OPTIONAL_CALLS):
            out.append(f"capabilities.calls names unknown calls {unknown}")
        if self.concurrency < 1:
            out.append(f"capabilities.concurrency must be >= 1, got {self.concurrency}")
        return out


@dataclass(frozen=True)
class MemoryTurn:
    """One turn as ingest receives it: its role and text (never the dataset's gold `has_answer` label)."""

    role: str  # "user" | "assistant"
    content: str


@dataclass(frozen=True)
class MemorySession:
    """One haystack session: its id, its date (ISO 8601 UTC) and its turns in order."""

    session_id: str
    date: str
    turns: tuple[MemoryTurn, ...]


@dataclass(frozen=True)
class Usage:
    """What a call spent, as the provider reports it (all optional; zero = not reported)."""

    input_tokens: int = 0  # LLM prompt tokens
    output_tokens: int = 0  # LLM completion tokens
    embedding_tokens: int = 0
    llm_calls: int = 0
    cost_usd: float | None = None
    # of `llm_calls`, those served from a cache (a resumed run replaying what it had paid for): not spent again
    cached_llm_calls: int = 0
    # of `llm_calls`, replies the provider could not use and so stored nothing from (mem0: an extraction reply it
    # could not parse, which mem0 itself only logs): a loss that would otherwise look like "nothing to remember"
    unusable_replies: int = 0

    def __add__(self, other: Usage) -> Usage:
        cost = (
            None if self.cost_usd is None and other.cost_usd is None else (self.cost_usd or 0) + (other.cost_usd or 0)
        )
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.embedding_tokens + other.embedding_tokens,
            self.llm_calls + other.llm_calls,
            cost,
            self.cached_llm_calls + other.cached_llm_calls,
            self.unusable_replies + other.unusable_replies,
        )


@dataclass(frozen=True)
class Provenance:
    """Where an item came from, when the provider knows: the session id, the turn's index in it, its date."""

    session_id: str | None = None
    turn_index: int | None = None
    date: str | None = None  # ISO 8601 UTC


@dataclass(frozen=True)
class MemoryItem:
    """One retrieved item: text the reader sees, its score (higher = better) and provenance when known."""

    text: str
    score: float | None = None
    provenance: Provenance | None = None


@dataclass(frozen=True)
class Ingest:
    """Ingest's outcome: `ready` false means retrieval must wait until `ready(unit)` says true."""

    usage: Usage = field(default_factory=Usage)
    ready: bool = True


@dataclass(frozen=True)
class Retrieval:
    items: tuple[MemoryItem, ...]
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class ProviderAnswer:
    """A provider's own answer (optional call); `items` what it used, when it says."""

    answer: str
    usage: Usage = field(default_factory=Usage)
    items: tuple[MemoryItem, ...] = ()


@runtime_checkable
class MemoryProvider(Protocol):
    """The Python form of the contract. Calls may come from several threads (up to `concurrency` units).

    Required: `capabilities`, `setup`, `ingest`, `retrieve`, `teardown`. Every member after them is optional, with
    the default `ProviderBase` holds: subclass it, or write the class without it and the harness gives it the default
    of each member it leaves out where it takes the provider in (`with_provider_defaults`: the memory contestant,
    `provider-check`, the reference server), then reads and calls every member directly."""

    def capabilities(self) -> Capabilities: ...

    def setup(self, unit: str) -> None: ...

    def ingest(self, unit: str, sessions: Sequence[MemorySession]) -> Ingest: ...

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval: ...

    def teardown(self, unit: str) -> None: ...

    def ready(self, unit: str) -> bool:
        """Optional (`ready` in `Capabilities.calls`): whether an asynchronous ingest is done. Default True."""
        ...

    def answer(self, unit: str, query: str, as_of: str) -> ProviderAnswer:
        """Optional (`answer` in `Capabilities.calls`): the provider's own answer. Default: ProviderError."""
        ...

    def attach(self, unit: str) -> bool:
        """Optional (`attach` in `Capabilities.calls`): True when `unit`, set up and ingested by an earlier process
        (a run killed between ingest and answer), still exists on the service, complete and ready to retrieve;
        False when it is unknown, gone or incomplete. The harness then answers against it without ingesting again
        (docs/memory-contract.md, "Resume"). Raises ProviderError only when the service cannot be asked. Default
        False (a resumed run ingests the unit again)."""
        ...

    @property
    def stored(self) -> Callable[[str], tuple[MemoryItem, ...] | None] | None:
        """Optional: `stored(unit)`, every memory stored for the unit, to tell "not stored" from "not retrieved"
        (None from the call: not listed, as the HTTP client answers for a service without the route). Default
        None: the provider does not list what it stores."""
        ...

    @property
    def remote(self) -> bool:
        """True for a service outside this process: its units outlive a run (the ingest checkpoint, `attach`), and
        `lme-harness plan` sends it nothing. Default False."""
        ...

    def preflight(self) -> None:
        """Once, before the first case: what would fail every unit (a key variable unset) raises one ProviderError
        naming it, before any request. Default: nothing to check."""
        ...

    @property
    def keep_units_in(self) -> Callable[[Path], None] | None:
        """Optional: `keep_units_in(directory)`, called once before the first unit with a directory of the run's,
        where the provider then keeps its units (they outlive the process: the ingest checkpoint and `attach` then
        apply, as for a remote one). Default None: the units live in memory."""
        ...

    def scope(self, unit: str) -> str | None:
        """The service-side id of `unit` (a user, namespace or agent name), written to the ingest checkpoint.
        Default None."""
        ...

    @property
    def bind_model(self) -> Callable[[Any], None] | None:
        """Optional: `bind_model(model)`, the run's answer model (harness/llm ChatModel), given once before the first
        unit to a provider that runs an LLM of its own while ingesting (mem0's extraction): its calls then go through
        the run's client, and its usage is priced as the answer model's. Default None: nothing borrowed."""
        ...

    @property
    def bind_toolkit(self) -> Callable[[Any], None] | None:
        """Optional: `bind_toolkit(kit)`, the run's whole Toolkit (harness/contestants/base.py), given once before
        the first unit (the summary engine's providers, which also search with the run's retriever). Default None."""
        ...


# The optional members of `MemoryProvider`, each with its default in `ProviderBase`.
PROVIDER_OPTIONAL = (
    "ready",
    "answer",
    "attach",
    "stored",
    "remote",
    "preflight",
    "keep_units_in",
    "scope",
    "bind_model",
    "bind_toolkit",
)


class ProviderBase:
    """The defaults of `MemoryProvider`'s optional members (documented there): always ready, no native answer, no
    attach, no listing, in this process, nothing to check, units in memory, no scope, nothing borrowed from the run.
    Subclasses implement the required calls."""

    stored: Callable[[str], tuple[MemoryItem, ...] | None] | None = None
    remote: ClassVar[bool] = False
    keep_units_in: Callable[[Path], None] | None = None
    bind_model: Callable[[Any], None] | None = None
    bind_toolkit: Callable[[Any], None] | None = None

    def ready(self, unit: str) -> bool:
        return True

    def attach(self, unit: str) -> bool:
        return False  # not supported (not in `Capabilities.calls`): a resumed run ingests the unit again

    def answer(self, unit: str, query: str, as_of: str) -> ProviderAnswer:
        raise ProviderError(type(self).__name__, "answer", unit, "this provider does not answer (no 'answer' call)")

    def preflight(self) -> None:
        return None

    def scope(self, unit: str) -> str | None:
        return None


def with_provider_defaults(provider: Any) -> MemoryProvider:
    """`provider` itself when it defines every optional member (a `ProviderBase` does); else `provider` with the
    default of each member it leaves out (harness/hook_defaults.py)."""
    return with_defaults(provider, ProviderBase, PROVIDER_OPTIONAL)


def iso_date(lme_date: str) -> str:
    """The dataset's date ("2023/05/20 (Sat) 02:21", or a bare "2023/05/20") as the contract's ISO 8601 UTC
    ("2023-05-20T02:21:00Z"); ValueError naming the text otherwise."""
    for fmt in (LME_DATE_FORMAT, "%Y/%m/%d"):
        try:
            return datetime.strptime(lme_date.strip(), fmt).replace(tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            continue
    raise ValueError(f"not a LongMemEval date ({LME_DATE_FORMAT!r}): {lme_date!r}")


def parse_iso(date: str) -> datetime:
    """An ISO 8601 date of the contract (a trailing Z, or an offset; no offset = UTC)."""
    d = datetime.fromisoformat(date.replace("Z", "+00:00"))
    return d if d.tzinfo else d.replace(tzinfo=UTC)
