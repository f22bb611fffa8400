"""Replay cases through contestants: dataset → case → contestant (ingest the sessions, then answer the question)
→ LLM → record → scorers → JSONL.

Resumable: a (case, mode) that already has a successful record in the run directory is skipped,
so re-running the same command makes no model call. Failures are recorded with their reason,
never dropped, and retried on the next run; a pair whose scoring failed (the judge endpoint) keeps
its answer and is only scored again. One process at a time writes a run directory (run.lock).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from harness.bounds import bound_record
from harness.contestants.base import Answer, CaseHistory, Contestant, Ingested, Question, check_before_first_case
from harness.data.longmemeval import Case
from harness.llm.client import embedding_call_log
from harness.llm.liveness import ServerDied, ServerWatch
from harness.progress import Ticker
from harness.records import (
    RECORDS_FILE,
    STATUS_FAILED,
    STATUS_OK,
    STATUS_SCORING_FAILED,
    Record,
    RecordWriter,
    read_records,
)
from harness.run_meta import RunMeta, RunMetaError, read_run_meta, write_run_meta
from harness.scoring.base import ScoreInput, specs_json
from harness.settings import RunSettings
from harness.storage import StorageError
from runners.components import (
    Components,
    SerializedEmbedder,
    build_components,
    build_modes,
    build_scorers,
    check_packages,
    open_cache,
    preflight,
)
from runners.console import log_failure
from runners.fingerprint import check_fingerprint, fingerprint
from runners.interrupt import RunInterrupted, StopRequest
from runners.lifecycle import FAILURE_NOTE, RunStopped, RunSummary
from runners.pair_scoring import apply_scores, rescore_pending
from runners.progress_line import PairProgress
from runners.provenance import host_info, invocations, provenance, utc_now
from runners.reference_latency import appended_event_texts, embed_appended, latency_fields, should_measure
from runners.run_config import RunConfig
from runners.setting_rules import RunConfigError
from runners.skeleton import Clients, RunSkeleton, run_skeleton
from runners.window_check import window_check

log = logging.getLogger(__name__)

__all__ = [
    "FAILURE_NOTE",
    "Components",
    "FailureBreaker",
    "RunConfigError",
    "RunStopped",
    "RunSummary",
    "SerializedEmbedder",
    "build_modes",
    "build_scorers",
    "check_fingerprint",
    "fingerprint",
    "open_cache",
    "preflight",
    "run_benchmark",
]


def run_benchmark(cfg: DictConfig, run_dir: Path) -> RunSummary:
    """Run every (case, mode) not yet done in `run_dir`. Everything that can fail before the first case
    (config, data, endpoint reachability and key) is checked before anything is written to `run_dir`;
    such a failure leaves only FAILED.txt and is re-raised. Raises RunDirLocked (writing nothing) when
    another process is running on `run_dir`."""
    run_dir = Path(run_dir)
    with run_skeleton(run_dir) as skeleton:
        # the one place the composed config becomes the run's settings (validated once); passed down from here
        n_failed, n_skipped, stats = _run_benchmark(skeleton.configure(cfg), skeleton)
    final = read_records(run_dir / RECORDS_FILE)
    return RunSummary(
        run_dir, len(final), n_failed, n_skipped, stats, sum(r.status == STATUS_SCORING_FAILED for r in final)
    )


def _run_benchmark(config: RunConfig, skeleton: RunSkeleton) -> tuple[int, int, dict[str, Any]]:
    """(pairs failed, pairs skipped as already done, the clients' totals)."""
    run_dir = skeleton.run_dir
    modes = build_modes(config)
    check_packages(config, modes)  # what to install, before any work (the data, the model server)
    fp = config.fingerprint  # computed once: the directory check, the session store, run.json
    check_fingerprint(run_dir, fp, config.earlier_fingerprints)
    run_settings = config.run
    dataset = instantiate(config.dataset, _convert_="all")
    cases, data_prov = dataset.load()
    config.wire.check_cases(cases, str(data_prov.get("source")))
    for m in modes:  # a memory contestant keeps its ingest checkpoint here (harness/memory/checkpoint.py)
        m.bind_run_dir(run_dir)
        m.bind_cases(cases)  # and tells another case's memory from its own
    prior = [r for r in read_records(run_dir / RECORDS_FILE) if r.answered]
    done = {r.key for r in prior}
    todo = [(c, [m for m in modes if (c.question_id, m.name) not in done]) for c in cases]
    todo = [(c, ms) for c, ms in todo if ms]
    check_before_first_case({m.name: m for _, ms in todo for m in ms}.values())  # e.g. a memory service's key
    wanted = {(c.question_id, m.name) for c in cases for m in modes}
    # answered, but the judge failed: scored again, no answer-model call
    rescore = [r for r in prior if r.status == STATUS_SCORING_FAILED and r.key in wanted]
    n_skipped = len(cases) * len(modes) - sum(len(ms) for _, ms in todo) - len(rescore)
    skeleton.open_cache()
    stats: dict[str, Any] = {}
    n_failed = 0
    t0 = time.time()
    clients = Clients()
    components: Components | None = None
    if todo or rescore:
        clients = skeleton.open_clients()
        assert clients.answer is not None and clients.judge is not None and clients.answer_endpoint is not None
        components = build_components(
            config,
            clients.answer,
            clients.judge,
            clients.answer_endpoint,
            run_dir,
            contestants=modes,
            stopping=skeleton.stop.is_set,  # SIGINT/SIGTERM (runners/interrupt.py)
        )
        components.kit.resume(prior)  # what an interrupted run recorded keeps its attribution
        for line in window_check(  # before the first call: a window that cuts the prompts, and the setting to change
            todo,
            config.wire,
            components.kit,
            local=clients.answer_endpoint.spec.is_local,
            served=clients.answer_window_served,
        ):
            log.warning(line)
    # What produced the records: taken before the first case, so a tree changed during a long run
    # (a commit, a checkout) is not what run.json names.
    prov, started_at = provenance(config.composed, data_prov), utc_now()
    prov.host = host_info()
    prior_meta = _prior_meta(run_dir)
    pairs_planned = sum(len(ms) for _, ms in todo) + len(rescore)
    if components is not None:  # which embedder weights ranked the searches (model2vec:<sha256 prefix>)
        prov.retrieval = components.kit.retrieval.describe()
    # the scorers' metric declarations: every report column's direction, label and format
    specs = specs_json(components.scorers) if components is not None else prior_meta.metrics
    if specs:
        prov.metrics = specs
    speeds = clients.speeds
    writer = skeleton.record_writer()
    tally: dict[str, Any] = {"recorded": 0, "cases_s": 0.0}  # pairs recorded this invocation, pairs time

    def run_json(state: str) -> None:
        """run.json as the run stands: written before the first pair, rewritten as pairs are recorded
        and at the end (atomic), so an interrupted or killed run still says what produced its records."""
        meta = prov.copy()
        if components is not None:  # an embedder built on first use is named once it is built
            meta.retrieval = components.kit.retrieval.describe()
        pairs_run = pairs_planned if state == "finished" else tally["recorded"]
        if pairs_planned:
            assert prov.git is not None  # provenance() states it
            meta.invocations = invocations(prior_meta, prov.git, started_at, pairs_run)
        elif prior_meta.git and not prior_meta.git.empty:  # nothing ran: the records' code is the earlier one
            meta.git = prior_meta.git
            if prior_meta.invocations:
                meta.invocations = prior_meta.invocations
        if speeds and meta.host is not None:  # measured by llama.cpp in this invocation's calls
            meta.host.model_speed = {name: perf() for name, perf in speeds}  # (harness/llm/local_server.py)
        meta.state = state
        meta.updated = utc_now()
        meta.fingerprint = fp
        meta.records = str(run_dir / RECORDS_FILE)
        meta.elapsed_s = round(time.time() - t0, 2)
        meta.cases_elapsed_s = round(tally["cases_s"], 2)
        meta.skipped_already_done = n_skipped
        meta.llm_stats = clients.stats()
        write_run_meta(run_dir, meta)

    skeleton.start(fp)
    run_json("running")
    # a second Ctrl-C exits at once, before the orderly stop below writes run.json: the state says so anyway
    skeleton.stack.enter_context(skeleton.stop.last_words(lambda: _mark_interrupted(run_dir)))
    state = "failed"
    try:
        if todo or rescore:
            assert components is not None
            t_cases = time.perf_counter()
            watch = PairsWatch(
                stop=skeleton.stop,
                halt=clients.halts,
                stats=[c.stats for c in clients.distinct],
                refresh=lambda: run_json("running"),
                ticker=skeleton.ticker(),
                server_watch=lambda on_death: skeleton.server_watch(clients, on_death),
            )
            try:
                n_failed = _run_cases(run_settings, todo, components, writer, watch, tally) if todo else 0
                n_failed += rescore_pending(rescore, components.scorers, writer, run_settings.concurrency)
                tally["recorded"] += len(rescore)
            finally:
                tally["cases_s"] = time.perf_counter() - t_cases
            stats = clients.stats()
        state = "finished"
    except (RunInterrupted, KeyboardInterrupt):
        state = "interrupted"
        raise
    except RunStopped:
        state = "stopped"
        raise
    finally:
        try:
            run_json(state)
        except StorageError as e:  # never hide why the run ended behind a failed note
            log.warning("run.json not written: %s", e)
    return n_failed, n_skipped, stats


def _mark_interrupted(run_dir: Path) -> None:
    """run.json as it stands, its state "interrupted" if it still says "running" (nothing else computed: this
    runs in the signal handler of a second Ctrl-C, runners/interrupt.py)."""
    meta = read_run_meta(run_dir)
    if meta.state == "running":
        meta.state = "interrupted"
        meta.updated = utc_now()
        write_run_meta(run_dir, meta)


class FailureBreaker:
    """Stops scheduling (case, mode) runs after `limit` consecutive failures (0: never).

    A dead endpoint would otherwise turn every remaining pair into a failed record, each after its full
    retry back-off; stopping early keeps everything already recorded, and the same command resumes.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.streak = 0
        self.seen = 0  # records observed this run
        self.last_error: str | None = None
        self.tripped = threading.Event()
        self._lock = threading.Lock()

    def observe(self, rec: Record | Mapping[str, Any]) -> None:
        status, error = (rec.status, rec.error) if isinstance(rec, Record) else (rec["status"], rec.get("error"))
        with self._lock:
            self.seen += 1
            if status == STATUS_OK:
                self.streak = 0
                return
            self.streak += 1
            self.last_error = error
            if self.limit and self.streak >= self.limit:
                self.tripped.set()


def _prior_meta(run_dir: Path) -> RunMeta:
    """The run.json an earlier invocation wrote here (empty when none or unreadable: it is rewritten at the end).
    A resumed run with nothing left to do builds no scorer: its metric specs come from here."""
    try:
        return read_run_meta(run_dir)
    except (OSError, RunMetaError):
        return RunMeta.from_json({})


@dataclass
class PairsWatch:
    """What the main thread does while the pairs run: show progress, rewrite run.json every `refresh_s`, and on a
    stop request (SIGINT/SIGTERM, runners/interrupt.py) stop in order within seconds."""

    stop: StopRequest
    halt: Sequence[Callable[[], None]]  # stop the embedded servers: the calls in flight then fail at once
    stats: Sequence[Any]  # the clients' CallStats (progress line)
    refresh: Callable[[], None]  # rewrites run.json
    ticker: Ticker
    server_watch: Callable[[Callable[[ServerDied], None]], ServerWatch]  # over the run's servers, given on_death
    refresh_s: float = 10.0
    poll_s: float = 0.1
    grace_s: float = 1.5  # how long stopping waits for the pairs in flight (an openai call cannot be interrupted)
    clock: Callable[[], float] = time.monotonic


class _ClosableWriter:
    """The record writer, until `close()`: a worker abandoned in a call by a stopping run records nothing later
    (its pair is left for the resume; its finished calls are in the response cache)."""

    def __init__(self, writer: RecordWriter) -> None:
        self.writer = writer
        self.path = writer.path
        self.closed = False
        self._active = 0
        self._cond = threading.Condition()

    @property
    def error(self) -> Exception | None:
        return self.writer.error

    def append(self, rec: Record | dict[str, Any]) -> bool:
        with self._cond:
            if self.closed:
                return False
            self._active += 1
        try:
            return self.writer.append(rec)
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    def close(self, timeout_s: float = 5.0) -> None:
        with self._cond:
            self.closed = True
            self._cond.wait_for(lambda: self._active == 0, timeout=timeout_s)  # a line being written completes


def _run_cases(
    run: RunSettings,
    todo: Sequence[tuple[Case, list[Contestant]]],
    comp: Components,
    writer: RecordWriter,
    control: PairsWatch,
    tally: dict[str, Any],
) -> int:
    """Runs the pairs on run.concurrency daemon threads (a stopping run does not wait for a call in flight; a
    ThreadPoolExecutor is joined at interpreter exit) while the main thread watches (`PairsWatch`)."""
    total = sum(len(ms) for _, ms in todo)
    breaker = FailureBreaker(run.max_consecutive_failures or 0)  # never None (RunSettings)
    progress = PairProgress(total, control.stats, clock=control.clock)
    gate = _ClosableWriter(writer)
    queue = deque(todo)
    lock = threading.Lock()
    failed = [0]
    errors: list[BaseException] = []
    alive = [0]
    all_done = threading.Event()
    stop = control.stop
    # A dead model server stops the run (no new pair starts) instead of failing every remaining pair.
    watch = control.server_watch(lambda _died: breaker.tripped.set())

    def on_record() -> None:
        with lock:
            tally["recorded"] += 1

    def worker() -> None:
        try:
            while True:
                with lock:
                    if not queue or errors or stop.is_set() or breaker.tripped.is_set():
                        return
                    case, ms = queue.popleft()
                n = _run_case(case, ms, comp, gate, progress, breaker, watch, stop=stop.event, on_record=on_record)
                with lock:
                    failed[0] += n
        except BaseException as e:  # re-raised by the main thread (a full disk: StorageError)
            with lock:
                errors.append(e)
        finally:
            with lock:
                alive[0] -= 1
                if not alive[0]:
                    all_done.set()

    n_workers = max(1, min(run.concurrency, len(todo)))
    alive[0] = n_workers
    threads = [threading.Thread(target=worker, name=f"pairs-{i}", daemon=True) for i in range(n_workers)]
    last_refresh, last_recorded = control.clock(), tally["recorded"]
    with watch, stop.watching():
        for t in threads:
            t.start()
        while not all_done.wait(control.poll_s):
            if stop.is_set():
                break
            control.ticker.tick(progress.line)
            # run.json follows the records: after each new one, and every refresh_s (calls, tokens, model speed)
            if tally["recorded"] != last_recorded or control.clock() - last_refresh >= control.refresh_s:
                last_refresh, last_recorded = control.clock(), tally["recorded"]
                control.refresh()
        if stop.is_set():
            for halt in control.halt:  # the embedded servers: their calls in flight fail now, not in minutes
                halt()
            deadline = time.monotonic() + control.grace_s
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
            gate.close()
    control.ticker.tick(progress.line, force=True)
    control.ticker.close()
    if errors:
        raise errors[0]
    recorded = breaker.seen
    if stop.is_set():
        raise RunInterrupted(
            f"{stop.signal_name}: the run stopped; {recorded} (case, mode) runs were recorded this run, "
            f"{total - recorded} were left for the next run (none was recorded as failed by the stop); every record "
            f"is kept in {writer.path}. Run the same command again to resume."
        )
    if watch.died is not None:
        raise RunStopped(
            f"{watch.died}\nThe run stopped: {recorded} (case, mode) runs were recorded this run, "
            f"{total - recorded} were left for the next run; every record is kept in {writer.path}. "
            f"Fix the cause and run the same command again to resume."
        ) from watch.died
    if breaker.tripped.is_set():
        not_run = total - recorded
        raise RunStopped(
            f"stopped after {breaker.streak} (case, mode) runs failed in a row (run.max_consecutive_failures="
            f"{breaker.limit}); last error: {breaker.last_error}. {failed[0]} failed and {not_run} not started this "
            f"run; every record written so far is kept in {writer.path}. Fix the cause and run the same command "
            f"again to resume (run.max_consecutive_failures=0 turns this check off)."
        )
    return failed[0]


def _run_case(
    case: Case,
    contestants: Sequence[Contestant],
    comp: Components,
    writer: RecordWriter | _ClosableWriter,
    progress: PairProgress | None,
    breaker: FailureBreaker,
    watch: ServerWatch | None = None,
    *,
    stop: threading.Event | None = None,
    on_record: Callable[[], None] | None = None,
) -> int:
    wire = comp.wire
    session = wire.case_session(case)
    question = Question.of(case, wire.question(case.question, case.question_date))
    failed = 0
    stopping = stop.is_set if stop is not None else lambda: False
    for contestant in contestants:
        if breaker.tripped.is_set() or writer.error is not None or stopping():
            break  # not started: left for the next run, never recorded as an outcome it did not have
        # the same events; the session id may name the contestant (wire.session_id)
        history = CaseHistory.of(case, wire.session_for(session, contestant.name))
        if progress is not None:
            progress.started()
        rec = _run_mode(case, contestant, history, question, comp, watch, stopping)
        if rec is None or (watch is not None and watch.check() is not None) or (stopping() and rec.status != STATUS_OK):
            # The server died, or the run is stopping (its server halted), during this pair: its outcome (a failed
            # call, a judge's "not run") is not its own. Not recorded; the next run redoes it (its answered calls
            # come from the response cache).
            if progress is not None:
                progress.finished(recorded=False)
            break
        failed += rec.status != STATUS_OK
        written = writer.append(bound_record(rec.to_json(), comp.bounds))
        if progress is not None:
            progress.finished(recorded=written is not False)
        if written is False and stopping():
            break  # the stopping run closed the writer: this pair is left for the resume
        breaker.observe(rec)
        if on_record is not None:
            on_record()
    comp.kit.forget(case.question_id)
    return failed


def _run_mode(
    case: Case,
    contestant: Contestant,
    history: CaseHistory,
    question: Question,
    comp: Components,
    watch: ServerWatch | None,
    stopping: Callable[[], bool] = lambda: False,
) -> Record | None:
    """One (case, contestant): ingest the history, then answer the question from what ingest built. Its record
    (a failure in either step is a failed record), or None when the model server died meanwhile, or when the run
    is stopping (SIGINT/SIGTERM): an ingest that finishes then is not answered (what it built and outlives the
    process, a memory service's unit, is kept for the resumed run), and a failure then is the stop's, not the
    case's: not recorded, and logged as such, not as an error."""
    t0 = time.perf_counter()
    with embedding_call_log() as embedding_calls:  # index builds and query vectors of this pair
        try:
            with embedding_call_log() as ingest_embedding_calls:
                try:
                    ingested = contestant.ingest(history, comp.kit)
                finally:  # the pair's calls, also those of an ingest that failed
                    embedding_calls.extend(ingest_embedding_calls)
            ingest_s = time.perf_counter() - t0
            if stopping():
                log.info(
                    "%s / %s: ingested as the run stopped; answered by the resumed run",
                    case.question_id,
                    contestant.name,
                )
                return None
            out = contestant.answer(ingested.memory, question, comp.kit)
            wall_s = time.perf_counter() - t0  # the reference-latency embeddings below are not this pair's
            ref_latency, ref_calls = _reference_latency(case, contestant.name, out, comp.kit.retrieval, comp)
            rec = _record(case, contestant.name, ingested, out, comp.scorers, wall_s)
            rec.ingest = _ingest_record(ingested, ingest_s, ingest_embedding_calls)
            rec.latency.update(ref_latency)
            if ref_calls:  # real requests, kept apart from the pair's own embedding_calls (and its cost)
                rec.reference_latency_calls = ref_calls
        except ServerDied as e:
            if watch is not None:
                watch.report(e)
            return None
        except Exception as e:  # recorded, never dropped: the case is retried on the next run
            if stopping():  # a halted server, a closed cache: not recorded (see _run_case), so not an error either
                log.info(
                    "%s / %s: left for the resumed run by the stop (%s: %s)",
                    case.question_id,
                    contestant.name,
                    type(e).__name__,
                    e,
                )
                return None
            log_failure(log, f"{case.question_id} / {contestant.name}", e)
            rec = _failed_record(case, contestant.name, e, time.perf_counter() - t0)
    if embedding_calls:
        rec.embedding_calls = list(embedding_calls)
        rec.usage["embedding_tokens"] = sum(c["usage"]["prompt_tokens"] for c in embedding_calls)
    return rec


def _ingest_record(ingested: Ingested, wall_s: float, embedding_calls: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The record's `ingest`: what ingesting cost, apart from answering (whose figures are `usage`/`latency`).
    A summary another contestant generated (reused) cost this one nothing. Its calls are also in `summary`."""
    return {
        "calls": len(ingested.calls),
        "prompt_tokens": sum(c.usage.prompt_tokens for c in ingested.calls),
        "completion_tokens": sum(c.usage.completion_tokens for c in ingested.calls),
        "embedding_tokens": sum(c["usage"]["prompt_tokens"] for c in embedding_calls),
        "model_ms": round(sum((c.latency_s for c in ingested.calls), 0.0) * 1000, 1),  # as measured, from cache too
        "wall_ms": round(wall_s * 1000, 1),
        **({"trace": ingested.trace} if ingested.trace else {}),
    }


def _reference_latency(
    case: Case, mode: str, out: Answer, retriever, comp: Components
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """latency.query_ms_reference and its parts (runners/reference_latency.py), per run.reference_latency."""
    query_ms = round(out.query_latency_s * 1000, 1)
    texts = appended_event_texts(mode, case.question, out.tool_results, out.prediction)
    embed_ms: float | None = None
    calls: list[dict[str, Any]] = []
    embedder = getattr(retriever, "embedder", None)
    # no text (a mode the reference embeds nothing for): nothing to measure, and an embedder built on first use
    # (runners/components.py) is not built for it
    if texts and should_measure(comp.reference_latency, embedder):
        try:
            embed_ms, calls = embed_appended(embedder, texts)
        except Exception as e:  # a measurement only: the answer stands, the column says "not measured" and why
            log.warning("%s / %s: reference latency not measured: %s", case.question_id, mode, e)
            fields = latency_fields(query_ms, mode, None, len(texts))
            return {**fields, "reference_latency_error": f"{type(e).__name__}: {e}"}, []
    return latency_fields(query_ms, mode, embed_ms, len(texts)), calls


def _base_record(case: Case, mode: str) -> dict[str, Any]:
    return {
        "question_id": case.question_id,
        "question_type": case.question_type,
        "is_abstention": case.is_abstention,
        "mode": mode,
        "question": case.question,
        "reference": case.answer,
    }


def _record(case: Case, mode: str, ingested: Ingested, out: Answer, scorers, wall_s: float) -> Record:
    item = ScoreInput(case.question_id, case.question_type, case.question, case.answer, out.prediction, mode)
    answer_calls = [c.to_record() for c in out.calls]
    summary_calls = (ingested.summary or {}).get("calls", [])
    final = out.calls[-1] if out.calls else None
    error = out.error
    if error is None and not out.prediction:  # scored (as the reference would), but never silently
        error = f"empty answer from the model (finish_reason={final.finish_reason if final else None})"
    return apply_scores(
        Record(
            **_base_record(case, mode),
            # "ok" = scored. `error` may still note a model-level problem the reference also scores
            # (e.g. the tool-iteration limit, which leaves an empty answer); "failed" = not scored, retried next run.
            status=STATUS_OK,
            error=error,
            prediction=out.prediction,
            metrics={},  # filled by apply_scores, which may also set status "scoring_failed"
            metric_details={},
            usage={
                # The reference reports the prompt tokens of the final call only (§3.5); the sums are ours.
                "final_prompt_tokens": final.usage.prompt_tokens if final else 0,
                "prompt_tokens_total": sum(c.usage.prompt_tokens for c in out.calls),
                "completion_tokens_total": sum(c.usage.completion_tokens for c in out.calls),
                "cached_tokens_total": sum(c.usage.cached_tokens or 0 for c in out.calls),
                "summary_prompt_tokens": sum(c["usage"]["prompt_tokens"] for c in summary_calls),
                "summary_completion_tokens": sum(c["usage"]["completion_tokens"] for c in summary_calls),
                "answer_calls": len(out.calls),
                "cache_hits": sum(c.cached for c in out.calls),
            },
            calls=answer_calls,
            tool_calls=out.tool_trace,
            n_search=sum(t["name"] == "session_search" for t in out.tool_trace),
            n_load=sum(t["name"] == "session_load" for t in out.tool_trace),
            # query_ms: the reference's query latency (model time as measured, replayed from cache too, plus harness time);
            # wall_ms: this process's wall time for the pair (ingest + answer), which a cached re-run shrinks.
            latency={"query_ms": round(out.query_latency_s * 1000, 1), "wall_ms": round(wall_s * 1000, 1)},
            truncation=out.truncation,
            summary=ingested.summary,
            final_messages=out.final_messages,
        ),
        scorers,
        item,
    )


def _failed_record(case: Case, mode: str, e: BaseException, wall_s: float) -> Record:
    return Record(
        **_base_record(case, mode),
        status=STATUS_FAILED,
        error=f"{type(e).__name__}: {e}",
        prediction=None,
        metrics={},
        usage={},
        latency={"wall_ms": round(wall_s * 1000, 1)},
    )
