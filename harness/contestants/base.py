"""The contestant interface: what a context-management strategy or memory system gives the benchmark.

A contestant answers one case in two steps, driven by the pipeline (runners/replay.py, commands/plan.py):

1. `ingest(history, kit)`: it receives the case's sessions (`CaseHistory`: the events with their dates and
   session ids) and builds whatever memory it keeps (a summary, a search index, the events themselves, a
   remote store's handle). `CaseHistory` has no question field: the question cannot reach ingest.
2. `answer(memory, question, kit)`: it answers the question (with its date) from that memory alone.

Ingest and answer each report their own model calls and trace (`Ingested`, `Answer`) and the pipeline times
each step apart, so ingest cost and time are never mixed into answer cost and time. Isolation: the memory is a value the pipeline hands back only for the case
that built it; a contestant instance is shared by every case and must keep no per-case state of its own.

`Toolkit` is what the run lends every contestant (the answer model and its generation settings, the window,
a token counter, the summary engine, the retrieval tools): a contestant uses what it needs; the pipeline
never looks inside.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from harness.data.longmemeval import Case, Turn
from harness.hook_defaults import with_defaults
from harness.llm.types import ChatModel, ChatResult, Message
from harness.records import Record
from harness.session.events import Session


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...
    def count_messages(self, messages: Sequence[Message]) -> int: ...


@dataclass(frozen=True)
class DatedSession:
    """One haystack session as the dataset gives it: its id, its date string and its turns."""

    session_id: str
    date: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class CaseHistory:
    """What ingest receives. Deliberately no question, question date or answer: only the history.

    `unit_id` keys the memory of this case (one unit per question; it names, it does not describe).
    `session` is the history as the events the harness replays (the wire's ids and timestamps, session
    headers when configured); `sessions` the same turns grouped by dataset session with their dates."""

    unit_id: str
    session: Session
    sessions: tuple[DatedSession, ...]

    @classmethod
    def of(cls, case: Case, session: Session) -> CaseHistory:
        """The history of `case`, its events being `session` (runners/wire.py builds them)."""
        dated = zip(case.session_ids, case.session_dates, case.sessions, strict=True)
        return cls(case.question_id, session, tuple(DatedSession(i, d, t) for i, d, t in dated))


@dataclass(frozen=True)
class Question:
    """What answer receives besides the memory: the question and its date."""

    unit_id: str
    text: str  # as the dataset states it
    date: str  # the question's date (LongMemEval `question_date`)
    message: str  # the user message as sent (`wire.question_template` applied; else `text`)

    @classmethod
    def of(cls, case: Case, message: str) -> Question:
        return cls(case.question_id, case.question, case.question_date, message)


def _never() -> bool:
    return False


@dataclass
class Toolkit:
    """What the run lends every contestant; built once per run (runners/components.py, commands/plan.py)."""

    model: ChatModel  # the answer model (the same client, cache and accounting for every contestant)
    generation: dict[str, Any]
    context_window: int
    token_counter: TokenCounter
    token_ratio: float = 1.0  # model tokens per o200k token (safety factor for fitting a local model's window)
    summaries: Any = None  # runners.summaries.SummaryProvider: get(unit_id, session, contestant) -> ProvidedSummary
    retrieval: Any = None  # tools(session, boundary=...) -> SessionTools over a session's events
    # True once the run is stopping (Ctrl-C, SIGTERM: runners/interrupt.py): a call failing now fails because of the
    # stop (its server halted, its cache closed), and what outlives the process is kept for the resumed run.
    stopping: Callable[[], bool] = _never

    def resume(self, prior: Iterable[Record]) -> None:
        """An interrupted run's records: summaries they recorded keep their attribution (generated / reused)."""
        if self.summaries is None:
            return
        for r in prior:
            if r.summary and r.summary.get("reused") is False:
                self.summaries.adopt(r.question_id, r.summary.get("generated_for") or r.mode)

    def forget(self, unit_id: str) -> None:
        """The case is done: drop the run-level bookkeeping kept for it (never a memory: those are values)."""
        if self.summaries is not None:
            self.summaries.forget(unit_id)


@dataclass
class Ingested:
    """What ingest built and what it cost. `memory` is opaque to the pipeline: it is only handed back to the
    same contestant's `answer` for the same case."""

    memory: Any
    calls: list[ChatResult] = field(default_factory=list)  # model calls made while ingesting
    trace: list[dict[str, Any]] = field(default_factory=list)  # what ingest did, for the record
    summary: dict[str, Any] | None = None  # the record's `summary` when the contestant built one


@dataclass
class Answer:
    """The answer and what answering cost (never ingest's cost)."""

    prediction: str
    calls: list[ChatResult]
    query_latency_s: float
    tool_trace: list[dict[str, Any]] = field(default_factory=list)
    truncation: dict[str, Any] | None = None
    error: str | None = None
    final_messages: int = 0
    tool_results: list[tuple[str, str]] = field(default_factory=list)  # (tool name, content) as sent back


class Contestant(Protocol):
    """Selected by the Hydra `mode:` group: `mode.<name>: {_target_: ...}`; `name` is the config key.

    Required: `name`, `ingest`, `answer`. The lifecycle hooks after them are optional, each with the default that
    `ContestantBase` holds: subclass it, or write the class without it (no base class needed) and the pipeline gives
    it the default of each hook it leaves out when it loads it (`with_hook_defaults`). The pipeline calls every hook
    directly (runners/replay.py, runners/components.py, commands/plan.py)."""

    name: str

    def ingest(self, history: CaseHistory, kit: Toolkit) -> Ingested: ...

    def answer(self, memory: Any, question: Question, kit: Toolkit) -> Answer: ...

    @property
    def uses_retrieval(self) -> bool:
        """Whether it may search with `Toolkit.retrieval`. When no contestant of a run does, the run builds its
        retriever's embedder only if something uses it after all. Default True (built before the first case)."""
        ...

    def bind_run_dir(self, run_dir: Path) -> None:
        """The run's directory, before the first case of a run (not of a plan): where a contestant keeps what
        must outlive the process (a memory contestant's ingest checkpoint). Default: nothing."""
        ...

    def bind_cases(self, cases: Sequence[Case]) -> None:
        """Every case of the run (or plan), before the first: a memory contestant tells what a provider hands back
        from another case's history from its own. Default: nothing."""
        ...

    def preflight(self) -> None:
        """Once before its first case of a run with cases left to do: what would fail every case (a service's key
        variable unset) raises one RunConfigError naming it, before any request. Default: nothing to check."""
        ...


# The optional members of `Contestant`, each with its default in `ContestantBase`.
CONTESTANT_HOOKS = ("uses_retrieval", "bind_run_dir", "bind_cases", "preflight")


class ContestantBase:
    """The defaults of `Contestant`'s lifecycle hooks (documented there); subclass it to have them."""

    @property
    def uses_retrieval(self) -> bool:
        return True

    def bind_run_dir(self, run_dir: Path) -> None:
        return None

    def bind_cases(self, cases: Sequence[Case]) -> None:
        return None

    def preflight(self) -> None:
        return None


def check_before_first_case(contestants: Iterable[Contestant]) -> None:
    """Each contestant's `preflight`, once, before the run's first case (those with cases left to do): what would
    fail every case stops the run with one error before any request."""
    for c in contestants:
        c.preflight()


def with_hook_defaults(contestant: Any) -> Contestant:
    """`contestant` itself when it defines every lifecycle hook (a `ContestantBase` does); else `contestant` with
    the default of each hook it leaves out (harness/hook_defaults.py)."""
    return with_defaults(contestant, ContestantBase, CONTESTANT_HOOKS)


@runtime_checkable
class WholeHistory(Protocol):
    """A contestant that sends a case's whole history in its answer prompt and cuts the oldest part when it does
    not fit the window (long_context, lme_official). `window_needed` is the window this case's prompt needs uncut
    (the prompt, the reply's max_tokens and the contestant's reserve, counted as `answer` counts them), so a run
    can say before its first call that the configured window will cut it (runners/window_check.py)."""

    name: str

    def window_needed(self, history: CaseHistory, question: Question, kit: Toolkit) -> int: ...


def reply_room(kit: Toolkit, reserve_tokens: int) -> int:
    """The part of the window a whole-history prompt leaves free: the reply's max_tokens and a reserve."""
    return int(kit.generation.get("max_tokens") or 0) + reserve_tokens


def answer_budget(kit: Toolkit, reserve_tokens: int) -> int:
    """The prompt tokens a whole-history prompt may take: the window less `reply_room`."""
    return kit.context_window - reply_room(kit, reserve_tokens)


def window_counter(kit: Toolkit) -> TokenCounter:
    """The kit's token counter, scaled by the model's `token_ratio` (a tokenizer that yields more than o200k)."""
    from harness.session.tokens import ScaledCounter

    return kit.token_counter if kit.token_ratio == 1 else ScaledCounter(kit.token_counter, kit.token_ratio)


def query_latency(calls: Sequence[ChatResult], harness_s: float) -> float:
    """Latency of a stage: model time (as originally measured, also when replayed from cache) plus harness time."""
    return sum(c.latency_s for c in calls) + harness_s


class Stopwatch:
    """Separates the harness's own time from time spent waiting on the model."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.model_wall = 0.0

    def model(self, fn: Callable[[], ChatResult]) -> ChatResult:
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.model_wall += time.perf_counter() - t0

    def harness_s(self) -> float:
        return max(0.0, time.perf_counter() - self.start - self.model_wall)


def question_message(question: Question) -> Message:
    return {"role": "user", "content": question.message}
