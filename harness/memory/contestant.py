"""A memory provider as a contestant (harness/contestants/base.py), fair by default.

ingest = setup + ingest + wait for readiness; its provider-reported usage and time go to the record's `ingest`
(the pipeline times the step), apart from answering. answer = retrieve(top_k, as_of = the question's date) →
items dated after the question dropped and counted → context cut to `context_tokens` (the cut recorded) → the
SAME reader for every provider: the answer model (`kit.model`, same generation settings) with LongMemEval's own
answer prompt over the retrieved items. `native_answer: true` asks the provider's own answer call instead: a
labelled variant (`variant` in every trace), to be shown beside the fair run, never instead of it.

Isolation: the memory handed back to `answer` is only the unit id, and teardown runs when the case is done (after
answer, or when ingest fails). The question reaches the provider only through retrieve/answer.

Ids: no dataset id reaches the provider (LongMemEval's carry its gold labels: `answer_*` sessions are the
evidence). Unit and session ids are opaque, keyed per run (harness/memory/ids.py), and the provenance a provider
hands back is mapped to the dataset's ids before anything is measured (harness/memory/isolation.py). An item from
another case's history (by its provenance, or copied text) is a cross-unit leak: dropped before the reader, like an
item dated after the question, counted (`other_cases`), never credited. An item that echoes the question is never
credited either (`echoes`; harness/memory/gold.py).

Resume (a provider whose units outlive the process, in a run directory: a remote one, `remote = True`, or a Python
one that keeps its units on disk there, `keep_units_in`; harness/memory/checkpoint.py): each unit is written
to the run's ingest checkpoint before setup and again once ingested and ready, and marked done at teardown. A resumed
run finding a unit of its case still open attaches to it when the provider declares `attach` and says the unit is
there (no ingest sent; the record's ingest trace is the original's, with `resumed: true`), else tears the stale
unit down first and ingests again (`resume.reingested: true`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from harness.contestants.base import (
    Answer,
    CaseHistory,
    ContestantBase,
    Ingested,
    Question,
    Stopwatch,
    Toolkit,
    query_latency,
)
from harness.golang import go_trim_space
from harness.hook_defaults import unwrapped
from harness.memory.checkpoint import IngestCheckpoint, OpenUnit, checkpoint_path, settings_hash
from harness.memory.gold import ECHO, Gold, Label, echoes, from_other_case, recall_record
from harness.memory.ids import RunIds
from harness.memory.isolation import RunCases
from harness.memory.provider import (
    MemoryItem,
    MemoryProvider,
    MemorySession,
    MemoryTurn,
    Provenance,
    ProviderError,
    Usage,
    iso_date,
    parse_iso,
    with_provider_defaults,
)
from harness.prompts.answer import LME_OFFICIAL_TEMPLATE
from harness.settings import RunConfigError, group_default, yaml_field

log = logging.getLogger(__name__)
T = TypeVar("T")
ITEM_BLOCK = "\n### Memory {} ({}):\n{}\n"


def memory_sessions(history: CaseHistory, ids: RunIds) -> tuple[MemorySession, ...]:
    """The contract's view of a case's history: opaque session ids, ISO dates, roles and texts (no gold labels)."""
    return tuple(
        MemorySession(
            ids.session(history.unit_id, s.session_id),
            iso_date(s.date),
            tuple(MemoryTurn(t.role, t.content) for t in s.turns),
        )
        for s in history.sessions
    )


@dataclass(frozen=True)
class Cut:
    """What the context cap kept of the retrieved items (recorded as the answer's `truncation`)."""

    kept: tuple[str, ...]
    info: dict[str, Any]


def cut_to_cap(items: list[MemoryItem], cap: int, count) -> Cut:
    """Items in rank order, whole while they fit in `cap` tokens; the first that does not fit is cut to the tokens
    left (when any), the rest dropped."""
    kept: list[str] = []
    used = before = 0
    cut_item = False
    for it in items:
        n = count(it.text)
        before += n
        if used + n <= cap:
            kept.append(it.text)
            used += n
        elif not cut_item and cap - used > 0:
            text = it.text[: max(1, len(it.text) * (cap - used) // max(n, 1))]
            while text and count(text) > cap - used:
                text = text[: int(len(text) * 0.9)]
            if text:
                kept.append(text)
                used += count(text)
            cut_item = True
        else:
            cut_item = True
    info = {
        "truncated": before > used,
        "context_tokens_cap": cap,
        "retrieved_tokens": before,
        "kept_tokens": used,
        "retrieved_items": len(items),
        "kept_items": len(kept),
    }
    return Cut(tuple(kept), info)


@dataclass
class ProviderContestant(ContestantBase):
    """Selected by `mode=memory memory=<provider>` (configs/mode/memory.yaml, configs/memory/*.yaml). The provider's
    optional members it leaves out get their declared defaults (harness/memory/provider.py `ProviderBase`)."""

    provider: MemoryProvider
    name: str = "memory"
    top_k: int = yaml_field("mode", "memory", "top_k")
    context_tokens: int = yaml_field("mode", "memory", "context_tokens")
    native_answer: bool = False  # the provider's own answer call: a labelled variant
    ready_timeout_s: float = yaml_field("mode", "memory", "ready_timeout_s")
    ready_poll_s: float = 0.5
    _who: dict[str, Any] | None = field(default=None, init=False, repr=False)
    _slots: threading.BoundedSemaphore | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    # The run's cases and their opaque ids (keyed by the run directory's key once bound).
    _cases: RunCases | None = field(default=None, init=False, repr=False)
    _bound: bool = field(default=False, init=False, repr=False)
    # Each unit's gold labels (harness/memory/gold.py), kept here from ingest to answer to measure retrieval;
    # never sent to the provider or the reader.
    _gold: dict[str, Gold] = field(default_factory=dict, init=False, repr=False)
    # The run directory (`bind_run_dir`, by the pipeline) and the ingest checkpoint kept there for a remote provider.
    _run_dir: Path | None = field(default=None, init=False, repr=False)
    _checkpoint: IngestCheckpoint | None = field(default=None, init=False, repr=False)
    _keys: dict[str, str] = field(default_factory=dict, init=False, repr=False)  # unit -> its case's key
    _calls: frozenset[str] = field(default=frozenset(), init=False, repr=False)  # the provider's declared calls
    _kept_on_disk: bool = field(default=False, init=False, repr=False)  # the provider keeps its units in the run dir

    def _units_outlive_process(self) -> bool:
        """A remote service's units, or a Python provider's kept in the run directory: the ones a resumed run can
        attach to, or must tear down before ingesting again."""
        return self.provider.remote or self._kept_on_disk

    def bind_run_dir(self, run_dir: str | Path) -> None:
        """Where the ingest checkpoint lives, and a Python provider that can keep its units on disk (`keep_units_in`)
        keeps them (`memory-store.<contestant>/`). A checkpoint an earlier run left is read now, before the first
        case, so a damaged one stops the run with one error (CheckpointError) instead of failing every case."""
        self._run_dir = Path(run_dir)
        with self._lock:
            self._cases = None  # the ids are the run directory's from now on
        self._run_cases()  # the id key is read (or drawn) now: a damaged one stops the run before the first case
        if self.provider.keep_units_in is not None:
            self.provider.keep_units_in(self._run_dir / f"memory-store.{self.name}")
            self._kept_on_disk = True
        if self._units_outlive_process() and checkpoint_path(self._run_dir, self.name).exists():
            try:
                who = self._capabilities()
            except ProviderError as e:  # the service is down: the first case fails with it, and names it
                log.warning("%s", e)
                return
            self._open_checkpoint(who)

    def _run_cases(self) -> RunCases:
        """The run's cases and their ids, under the run directory's key once one is bound (else a key of this
        contestant's own)."""
        with self._lock:
            if self._cases is None:
                self._cases = RunCases(RunIds.of_run(self._run_dir, self.name))
            return self._cases

    def bind_cases(self, cases: Any) -> None:
        """Every case of the run (harness/data/longmemeval.py Case), before the first: what a provider hands back
        from another case's history is then known as such, whichever case it comes from (the pipeline calls it)."""
        self._run_cases().add_cases(cases)

    def __post_init__(self) -> None:
        if self.provider is None:
            raise ValueError(
                "mode=memory needs a provider: add memory=<name> (configs/memory/, docs/memory-systems.md)"
            )
        self.provider = with_provider_defaults(self.provider)

    def preflight(self) -> None:
        """Before the first case (the pipeline asks once): what would fail every unit, such as a service's key
        variable unset, is one RunConfigError naming it, before any request, instead of one failed case per question.
        The provider's `preflight()` raises ProviderError (default: nothing to check)."""
        try:
            self.provider.preflight()
        except ProviderError as e:
            raise RunConfigError(
                f"mode.{self.name}: memory provider {e.provider!r}: {e.detail}; nothing was sent"
            ) from None

    def _bind_model(self, kit: Toolkit) -> None:
        """A provider that runs an LLM of its own while ingesting (mem0's fact extraction) gets the run's answer
        model once, before its first unit: its calls then go through the run's client (cache, accounting), and no
        second model server is needed. Providers with neither `bind_toolkit` nor `bind_model` are left alone."""
        bind_kit = self.provider.bind_toolkit  # the summary engine's providers: the whole kit
        bind = self.provider.bind_model
        if bind is None and bind_kit is None:
            return
        with self._lock:
            if not self._bound:
                if bind_kit is not None:
                    bind_kit(kit)
                elif bind is not None:
                    bind(kit.model)
                self._bound = True

    @property
    def uses_retrieval(self) -> bool:
        """Whether it searches with the run's retriever (`kit.retrieval`): only through a provider that borrows the
        run's toolkit (the summary providers). Any other provider retrieves on its own, so the run does not build
        its retriever's embedder for it (runners/components.py)."""
        return self.provider.bind_toolkit is not None

    @property
    def variant(self) -> str:
        fair = (self.top_k, self.context_tokens) == (
            group_default("mode", "memory", "top_k"),
            group_default("mode", "memory", "context_tokens"),
        )
        return "native_answer" if self.native_answer else ("fair" if fair else "settings")

    def _capabilities(self) -> dict[str, Any]:
        """Asked once per run (then kept): who the provider is, and its concurrency limit as a semaphore."""
        with self._lock:
            if self._who is None:
                caps = self.provider.capabilities()
                if problems := caps.problems():
                    raise ProviderError(caps.name or "?", "capabilities", None, "; ".join(problems))
                if self.native_answer and not caps.supports("answer"):
                    raise ProviderError(caps.name, "capabilities", None, "native_answer is set but no 'answer' call")
                self._slots = threading.BoundedSemaphore(caps.concurrency)
                self._who = {"provider": caps.name, "version": caps.version, "variant": self.variant, **self._spend()}
                self._calls = caps.calls
            return self._who

    def _spend(self) -> dict[str, Any]:
        """How the provider's reported usage is priced by the reports (reports/cost.py `provider_cost`), as facts
        recorded in every trace: `llm: answer_model` when its LLM calls go through the run's answer model (mem0's
        extraction, the summary engine: `bind_model` / `bind_toolkit`), `remote: true` for a service outside this
        process, whose spend is known only from the `cost_usd` it reports."""
        out: dict[str, Any] = {}
        if self.provider.bind_model is not None or self.provider.bind_toolkit is not None:
            out["llm"] = "answer_model"
        if self.provider.remote:
            out["remote"] = True
        return out

    def _call(self, fn: Callable[[], T]) -> T:
        """One provider call, within the provider's own concurrency limit (calls in flight at once)."""
        assert self._slots is not None  # _capabilities() came first
        with self._slots:
            return fn()

    def _open_checkpoint(self, who: dict[str, Any]) -> IngestCheckpoint | None:
        """The ingest checkpoint, for a provider whose units outlive the process, in a run directory (None otherwise:
        an in-memory provider's units die with the process, so there is nothing to attach to or tear down)."""
        if self._run_dir is None or not self._units_outlive_process():
            return None
        with self._lock:
            if self._checkpoint is None:
                self._checkpoint = IngestCheckpoint(
                    checkpoint_path(self._run_dir, self.name),
                    provider=who["provider"],
                    mode=self.name,
                    settings=settings_hash(unwrapped(self.provider)),
                )
                if n := self._checkpoint.stale_count():
                    log.info("%s: %d memory unit(s) left on the service by an earlier run", self.name, n)
            return self._checkpoint

    def _scope(self, unit: str) -> str | None:
        scope = self.provider.scope(unit)
        return None if scope is None else str(scope)

    def _resume(self, key: str, stale: list[OpenUnit], history: CaseHistory) -> tuple[Ingested | None, dict[str, Any]]:
        """Units an earlier process left open for this case: attach to the newest ingested one when the provider can
        (the Ingested), tearing the others down; else tear them all down (None, and what the record says of it)."""
        ck = self._checkpoint
        assert ck is not None
        who = self._capabilities()
        calls = self._calls
        last = stale[-1]
        why = None
        if not last.ingested:
            why = "the earlier ingest never finished"
        elif last.settings != ck.settings:
            why = "the provider's settings changed since the earlier ingest"
        elif (last.trace or {}).get("ids") != "opaque":
            why = "the earlier ingest sent the dataset's own ids (an older harness)"
        elif "attach" not in calls:
            why = "the provider does not support attach"
        attached_ms = None
        if why is None:
            t0 = time.perf_counter()
            try:
                if not self._call(lambda: self.provider.attach(last.unit)):
                    why = "attach: the unit is no longer on the service"
            except ProviderError as e:
                why = f"attach failed: {e}"
            attached_ms = round((time.perf_counter() - t0) * 1000, 1)
        keep = last if why is None else None
        errors = [err for u in stale if u is not keep and (err := self._teardown(u.unit)) is not None]
        for u in stale:
            if u is not keep:
                ck.done(key, u.unit)
        if keep is None:
            log.info("%s / %s: re-ingesting (%s)", self.name, key, why)
            info: dict[str, Any] = {
                "reingested": True,
                "reason": why,
                "stale_units": len(stale),
                "stale_torn_down": len(stale) - len(errors),
            }
            if errors:
                info["teardown_errors"] = errors
            return None, info
        gold = Gold.of(history)
        with self._lock:
            self._gold[keep.unit] = gold
            self._keys[keep.unit] = key
        trace = {
            **(keep.trace or {}),
            **who,
            "resumed": True,  # usage and times above are the original ingest's, not spent again by this run
            "resume": {"attached": True, "unit_ingested_at": keep.at, "attach_ms": attached_ms},
        }
        if len(stale) > 1:
            trace["resume"]["stale_torn_down"] = len(stale) - 1 - len(errors)
        return Ingested(memory=keep.unit, trace=[trace]), {}

    def ingest(self, history: CaseHistory, kit: Toolkit) -> Ingested:
        who = self._capabilities()
        self._bind_model(kit)
        key = history.unit_id
        cases = self._run_cases()  # the case is known before an attached unit's provenance must be mapped
        cases.add(key, ((s.session_id, s.turns) for s in history.sessions))
        ck = self._open_checkpoint(who)
        resume: dict[str, Any] = {}
        if ck is not None and (stale := ck.take(key)):
            attached, resume = self._resume(key, stale, history)
            if attached is not None:
                return attached
        unit = cases.ids.unit(key)
        sessions = memory_sessions(history, cases.ids)
        scope = self._scope(unit) if ck is not None else None
        with self._lock:
            self._keys[unit] = key
        if ck is not None:
            ck.started(key, unit, scope)  # before setup: a unit killed mid-ingest is torn down by the resumed run
        t0 = time.perf_counter()
        try:
            self._call(lambda: self.provider.setup(unit))
        except BaseException:
            if ck is not None:  # a setup that failed half-way may have left a scope: forgotten too
                self._drop_failed(unit, kit)
            raise
        try:
            done = self._call(lambda: self.provider.ingest(unit, sessions))
            t_ingest = time.perf_counter() - t0
            polls = 0  # ready() calls made
            ready = done.ready
            while not ready:
                if time.perf_counter() - t0 > self.ready_timeout_s:
                    raise ProviderError(who["provider"], "ready", unit, f"not ready after {self.ready_timeout_s} s")
                polls += 1
                ready = self._call(lambda: self.provider.ready(unit))
                if not ready:
                    time.sleep(self.ready_poll_s)
        except BaseException:
            self._drop_failed(unit, kit)  # answer will not run: the unit is forgotten now
            raise
        trace = {
            **who,
            "call": "ingest",
            "unit": unit,  # the id the provider knows the case by (opaque, as its session ids: `ids`)
            "ids": "opaque",
            "sessions": len(history.sessions),
            # what the provider was given, in o200k tokens (ingest cost per million ingested tokens)
            "ingested_tokens": sum(kit.token_counter.count(t.content) for s in sessions for t in s.turns),
            "usage": asdict(done.usage),
            "ingest_ms": round(t_ingest * 1000, 1),
            "ready_wait_ms": round((time.perf_counter() - t0 - t_ingest) * 1000, 1),
            "ready_polls": polls,
        }
        gold = Gold.of(history)
        with self._lock:
            self._gold[unit] = gold
        if (stored := self._stored(unit, key, gold)) is not None:
            trace["stored"] = stored
        if ck is not None:
            ck.ingested(key, unit, scope, trace)
        if resume:
            trace = {**trace, "resumed": False, "resume": resume}
        return Ingested(memory=unit, trace=[trace])

    def _stored(self, unit: str, key: str, gold: Gold) -> dict[str, Any] | None:
        """For a provider that stores derived memories and can list them (`stored(unit)`, e.g. mem0's `get_all`):
        did any stored memory hold an evidence turn (session), by the gold mapping rule (harness/memory/gold.py)?
        A wrong answer whose evidence was never stored is then `not stored` rather than `not retrieved`."""
        listing = self.provider.stored
        if listing is None:
            return None
        try:
            items = self._call(lambda: listing(unit))
        except ProviderError as e:  # not knowing what was stored loses that measurement only, never the case
            log.warning("%s", e)
            return {"error": str(e)}
        if items is None:  # a service that does not list `stored` (the HTTP client asks its capabilities)
            return None
        labels = [self._resolve(gold, key, i, None)[0] for i in items]
        return {
            "items": len(items),
            "evidence_turn": any(gold.hits_turn(x) for x in labels) if gold.evidence_turns else None,
            "evidence_session": any(gold.hits_session(x) for x in labels) if gold.evidence_sessions else None,
        }

    def answer(self, memory: Any, question: Question, kit: Toolkit) -> Answer:
        try:
            self._run_cases().index()  # built once, before any case's timing (harness/memory/isolation.py)
            out = self._answer(memory, question, kit)
        except BaseException:
            self._drop_failed(memory, kit)
            raise
        if problem := self._teardown(memory):  # the case is done: the provider forgets the unit
            out.tool_trace[0]["teardown_error"] = problem  # kept with the answer, which is not lost for it
        return out

    def _drop_failed(self, unit: str, kit: Toolkit) -> None:
        """A unit whose case failed is torn down. While the run is stopping (Ctrl-C, SIGTERM) the failure is the
        stop's (a halted model server, a closed cache), so a unit that outlives the process stays open in the ingest
        checkpoint for the resumed run, as after kill -9: attached there when its ingest finished, else torn down
        there and ingested again. Nothing is sent to the service on the way out."""
        if self._checkpoint is None or not kit.stopping():
            self._teardown(unit)
            return
        with self._lock:
            self._gold.pop(unit, None)
            self._keys.pop(unit, None)
        log.info("%s: unit %s kept for the resumed run (the run is stopping)", self.name, unit)

    def _teardown(self, unit: str) -> str | None:
        """Teardown; its failure is logged and returned, never raised over the case's own outcome."""
        with self._lock:
            self._gold.pop(unit, None)
            key = self._keys.pop(unit, None)
        try:
            self._call(lambda: self.provider.teardown(unit))
        except ProviderError as e:
            log.warning("%s", e)
            return str(e)
        finally:
            if self._checkpoint is not None and key is not None:
                self._checkpoint.done(key, unit)  # the record says whether teardown failed; it is not retried
        return None

    def _resolve(self, gold: Gold, case: str, item: MemoryItem, query: str | None) -> tuple[Label, Provenance | None]:
        """An item's label and its provenance in the dataset's ids (None: it names no session of the run). An item
        from another case's history, by its provenance or by its text, is a cross-unit leak; one that echoes the
        question (`query`) holds no evidence (harness/memory/gold.py)."""
        cases = self._run_cases()
        p = item.provenance
        origin = cases.origin(p.session_id if p is not None else None)
        mapped = None
        if p is not None and (origin is not None or p.session_id is None):
            mapped = Provenance(origin.session_id if origin else None, p.turn_index, p.date)
        if origin is not None and origin.case != case:
            return from_other_case(origin.case), mapped
        if query is not None and echoes(item.text, query):
            return ECHO, mapped
        if (copied := cases.copied_from(item.text, case)) is not None:
            return from_other_case(copied), mapped
        unknown = Provenance(None, p.turn_index, p.date) if p is not None else None  # an id of no session of the run
        return gold.label(item.text, mapped or unknown, query), mapped

    def _answer(self, unit: str, question: Question, kit: Toolkit) -> Answer:
        who = self._capabilities()
        sw = Stopwatch()
        as_of = iso_date(question.date)
        with self._lock:
            gold = self._gold.get(unit) or Gold([])
        case = question.unit_id
        if self.native_answer:
            t0 = time.perf_counter()
            own = self._call(lambda: self.provider.answer(unit, question.text, as_of))
            used = [self._resolve(gold, case, i, question.text)[0] for i in own.items]
            trace = {
                "name": "memory_answer",
                **who,
                "usage": asdict(own.usage),
                "items": len(own.items),
                **_integrity_counts(used),
                "answer_ms": round((time.perf_counter() - t0) * 1000, 1),
                # what the provider says it used (its items are all it read); None when it does not say
                "gold": recall_record(gold, used, len(used), used) if used else None,
            }
            return Answer(
                prediction=go_trim_space(own.answer), calls=[], query_latency_s=sw.harness_s(), tool_trace=[trace]
            )
        t0 = time.perf_counter()
        got = self._call(lambda: self.provider.retrieve(unit, question.text, self.top_k, as_of))
        retrieve_ms = round((time.perf_counter() - t0) * 1000, 1)
        cutoff = parse_iso(as_of)
        resolved = {id(i): self._resolve(gold, case, i, question.text) for i in got.items}
        labels = {k: label for k, (label, _) in resolved.items()}
        late = [i for i in got.items if i.provenance and i.provenance.date and parse_iso(i.provenance.date) > cutoff]
        # leakage: dated after the question, or from another case's history: dropped, never shown to the reader
        dropped = {id(i) for i in late} | {k for k, label in labels.items() if label.by == "other_case"}
        shown = [i for i in got.items if id(i) not in dropped][: self.top_k]
        cut = cut_to_cap(shown, self.context_tokens, kit.token_counter.count)
        trace = {
            "name": "memory_retrieve",
            **who,
            "top_k": self.top_k,
            "returned": len(got.items),
            "after_as_of": len(late),
            **_integrity_counts(labels.values()),
            "items": [{**_item_record(i, resolved[id(i)][1]), "gold": labels[id(i)].record(gold)} for i in got.items],
            "usage": asdict(got.usage),
            "retrieve_ms": retrieve_ms,
            "gold": recall_record(
                gold,
                [labels[id(i)] for i in shown],
                self.top_k,
                _kept_labels(gold, shown, cut.kept, resolved, question.text),
            ),
        }
        blocks = "".join(ITEM_BLOCK.format(n + 1, _label(i), text) for n, (i, text) in enumerate(zip(shown, cut.kept)))
        prompt = LME_OFFICIAL_TEMPLATE.format(blocks, question.date, question.text)
        r = sw.model(lambda: kit.model.chat([{"role": "user", "content": prompt}], **kit.generation))
        return Answer(
            prediction=go_trim_space(r.content),
            calls=[r],
            query_latency_s=query_latency([r], sw.harness_s()),
            tool_trace=[trace],
            truncation=cut.info,
            final_messages=1,
        )


def _integrity_counts(labels: Any) -> dict[str, int]:
    """The retrieval's leak and echo counts for the record (reports/memory_systems.py's leakage audits)."""
    by = [x.by for x in labels]
    return {"other_cases": by.count("other_case"), "echoes": by.count("echo")}


def _kept_labels(
    gold: Gold,
    shown: list[MemoryItem],
    kept: tuple[str, ...],
    resolved: dict[int, tuple[Label, Provenance | None]],
    query: str,
) -> list[Label]:
    """The labels of what the reader was shown: whole items as labelled; an item cut by the cap by its kept text."""
    out = []
    for item, text in zip(shown, kept):
        label, p = resolved[id(item)]
        if text == item.text or label.by == "echo":
            out.append(label)
            continue
        # a cut item keeps its provenance's session, never its turn: the kept text must still hold the turn
        session_only = p and p.session_id and Provenance(p.session_id, None, p.date)
        out.append(gold.label(text, session_only or None, query))
    return out


def _label(item: MemoryItem) -> str:
    p = item.provenance
    if p is None:
        return "no provenance"
    return ", ".join(x for x in (p.date and f"date {p.date}", p.session_id and f"session {p.session_id}") if x) or "-"


def _item_record(item: MemoryItem, mapped: Provenance | None) -> dict[str, Any]:
    """An item's record: its size, score and provenance in the dataset's ids (an id that names no session of the
    run is kept as `unmapped_session_id`)."""
    out: dict[str, Any] = {"chars": len(item.text), "score": item.score}
    if item.provenance is not None:
        out.update({k: v for k, v in asdict(mapped or item.provenance).items() if v is not None})
        if mapped is None and item.provenance.session_id is not None:
            out["unmapped_session_id"] = out.pop("session_id")
    return out


__all__ = ["ProviderContestant", "Usage", "cut_to_cap", "memory_sessions"]
