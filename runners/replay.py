"""Replay cases through modes: dataset → case → session → mode → LLM → record → scorers → JSONL.

Resumable: a (case, mode) that already has a successful record in the run directory is skipped,
so re-running the same command makes no model call. Failures are recorded with their reason,
never dropped, and retried on the next run; a pair whose scoring failed (the judge endpoint) keeps
its answer and is only scored again. One process at a time writes a run directory (run.lock).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm import tqdm

from harness import secrets
from harness.data.longmemeval import Case
from harness.llm.client import embedding_call_log
from harness.llm.endpoint import make_client, open_endpoint
from harness.llm.liveness import ServerDied, ServerWatch
from harness.records import (
    RECORDS_FILE,
    STATUS_FAILED,
    STATUS_OK,
    STATUS_SCORING_FAILED,
    Record,
    RecordWriter,
    read_records,
)
from harness.runlock import run_dir_lock
from harness.scoring.base import ScoreInput, specs_json
from harness.settings import RunSettings
from harness.storage import write_text_atomic
from runners.bounds import bound_record
from runners.components import (
    Components,
    SerializedEmbedder,
    build_components,
    build_modes,
    build_scorers,
    open_cache,
    preflight,
)
from runners.console import log_failure
from runners.fingerprint import FINGERPRINT_FILE, check_fingerprint, fingerprint
from runners.lifecycle import FAILURE_NOTE, RunStopped, RunSummary, clear_failure, write_failure
from runners.modes import CaseContext, Mode, ModeOutput
from runners.provenance import invocations, provenance, utc_now
from runners.reference_latency import appended_event_texts, embed_appended, latency_fields, should_measure
from runners.scoring import apply_scores, rescore_pending
from runners.settings import RunConfigError, validate_settings
from runners.wire import WireShape

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
    with run_dir_lock(run_dir):
        return _run_benchmark(cfg, Path(run_dir))


def _run_benchmark(cfg: DictConfig, run_dir: Path) -> RunSummary:
    started = False
    try:
        with contextlib.ExitStack() as stack:
            fp = fingerprint(cfg)
            check_fingerprint(run_dir, fp, fingerprint(cfg, legacy=True))
            validate_settings(cfg)
            dataset = instantiate(cfg.dataset, _convert_="all")
            cases, data_prov = dataset.load()
            WireShape.from_config(cfg.get("wire")).check_cases(cases, str(data_prov.get("source")))
            modes = build_modes(cfg)
            prior = [r for r in read_records(run_dir / RECORDS_FILE) if r.answered]
            done = {r.key for r in prior}
            todo = [(c, [m for m in modes if (c.question_id, m.name) not in done]) for c in cases]
            todo = [(c, ms) for c, ms in todo if ms]
            wanted = {(c.question_id, m.name) for c in cases for m in modes}
            # answered, but the judge failed: scored again, no answer-model call
            rescore = [r for r in prior if r.status == STATUS_SCORING_FAILED and r.key in wanted]
            n_skipped = len(cases) * len(modes) - sum(len(ms) for _, ms in todo) - len(rescore)
            cache = open_cache(cfg, stack)
            stats: dict[str, Any] = {}
            n_failed = 0
            t0 = time.time()
            client = judge_client = None
            components: Components | None = None
            if todo or rescore:
                ep = stack.enter_context(open_endpoint(cfg.model, log_dir=run_dir, progress=cfg.run.progress))
                client = make_client(ep, cfg.client, cache)
                judge_client = client
                if cfg.judge.get("endpoint"):  # a separately configured judge model (e.g. +model@judge.endpoint=openai)
                    jep = stack.enter_context(
                        open_endpoint(cfg.judge.endpoint, log_dir=run_dir, progress=cfg.run.progress)
                    )
                    judge_client = make_client(jep, cfg.client, cache)
                preflight(cfg, client, judge_client)
                components = build_components(cfg, client, judge_client, ep, run_dir)
                for r in prior:  # summaries recorded by an interrupted run keep their attribution
                    if r.summary and r.summary.get("reused") is False:
                        components.summaries.adopt(r.question_id, r.summary.get("generated_for") or r.mode)
            # What produced the records: taken before the first case, so a tree changed during a long run
            # (a commit, a checkout) is not what run.json names.
            prov, started_at = provenance(cfg, data_prov), utc_now()
            prior_meta = _prior_meta(run_dir)
            started = True
            clear_failure(run_dir)
            write_text_atomic(run_dir / FINGERPRINT_FILE, json.dumps({"fingerprint": fp}))
            writer = RecordWriter(run_dir / RECORDS_FILE)
            cases_s = 0.0
            if todo or rescore:
                t_cases = time.perf_counter()
                n_failed = _run_cases(cfg, todo, components, writer) if todo else 0
                n_failed += rescore_pending(rescore, components.scorers, writer, int(cfg.run.concurrency))
                cases_s = time.perf_counter() - t_cases
                stats = client.stats.as_dict()
                if judge_client is not client:
                    stats["judge"] = judge_client.stats.as_dict()
            pairs_run = sum(len(ms) for _, ms in todo) + len(rescore)
            if pairs_run:
                prov["invocations"] = invocations(prior_meta, prov["git"], started_at, pairs_run)
            elif prior_meta.get("git"):  # nothing ran: the code that wrote the records is still the earlier one
                prov["git"] = prior_meta["git"]
                if prior_meta.get("invocations"):
                    prov["invocations"] = prior_meta["invocations"]
            if components is not None:  # which embedder weights ranked the searches (model2vec:<sha256 prefix>)
                prov["retrieval"] = components.retrieval.describe()
            # the scorers' metric declarations: every report column's direction, label and format
            specs = specs_json(components.scorers) if components is not None else prior_meta.get("metrics")
            if specs:
                prov["metrics"] = specs
            prov.update(
                {
                    "fingerprint": fp,
                    "records": str(run_dir / RECORDS_FILE),
                    "elapsed_s": round(time.time() - t0, 2),
                    "cases_elapsed_s": round(cases_s, 2),
                    "skipped_already_done": n_skipped,
                    "llm_stats": stats,
                }
            )
            write_text_atomic(run_dir / "run.json", secrets.redact(json.dumps(prov, indent=2, default=str)))
    except Exception as e:
        write_failure(run_dir, e, started)
        raise
    final = read_records(run_dir / RECORDS_FILE)
    return RunSummary(
        run_dir, len(final), n_failed, n_skipped, stats, sum(r.status == STATUS_SCORING_FAILED for r in final)
    )


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


def _prior_meta(run_dir: Path) -> dict[str, Any]:
    """The run.json an earlier invocation wrote here ({} when none or unreadable: it is rewritten at the end).
    A resumed run with nothing left to do builds no scorer: its metric specs come from here."""
    try:
        meta = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _run_cases(cfg: DictConfig, todo: Sequence[tuple[Case, list[Mode]]], comp: Components, writer: RecordWriter) -> int:
    failed = 0
    total = sum(len(ms) for _, ms in todo)
    breaker = FailureBreaker(RunSettings.from_config(cfg.run).max_consecutive_failures)
    bar = tqdm(total=total, desc="cases x modes", unit="run", disable=not cfg.run.progress)
    # A dead model server stops the run (no new pair starts) instead of failing every remaining pair.
    watch = ServerWatch(comp.liveness, on_death=lambda _died: breaker.tripped.set())
    with watch, ThreadPoolExecutor(max_workers=int(cfg.run.concurrency)) as pool:
        futs = [pool.submit(_run_case, case, ms, comp, writer, bar, breaker, watch) for case, ms in todo]
        for f in as_completed(futs):
            failed += f.result()
    bar.close()
    if watch.died is not None:
        raise RunStopped(
            f"{watch.died}\nThe run stopped: {breaker.seen} (case, mode) runs were recorded this run, "
            f"{total - breaker.seen} were left for the next run; every record is kept in {writer.path}. "
            f"Fix the cause and run the same command again to resume."
        ) from watch.died
    if breaker.tripped.is_set():
        not_run = total - breaker.seen
        raise RunStopped(
            f"stopped after {breaker.streak} (case, mode) runs failed in a row (run.max_consecutive_failures="
            f"{breaker.limit}); last error: {breaker.last_error}. {failed} failed and {not_run} not started this run; "
            f"every record written so far is kept in {writer.path}. Fix the cause and run the same command again "
            f"to resume (run.max_consecutive_failures=0 turns this check off)."
        )
    return failed


def _run_case(
    case: Case,
    modes: Sequence[Mode],
    comp: Components,
    writer: RecordWriter,
    bar,
    breaker: FailureBreaker,
    watch: ServerWatch | None = None,
) -> int:
    wire = comp.wire
    session = wire.case_session(case)
    failed = 0
    retriever = comp.retrieval
    ctx = CaseContext(
        case=case,
        session=session,
        model=comp.client,
        generation=comp.generation,
        context_window=comp.window,
        token_counter=comp.counter,
        token_ratio=comp.token_ratio,
        summaries=comp.summaries,
        tools_factory=lambda sess, boundary: retriever.tools(sess, boundary=boundary),
        question_text=wire.question(case.question, case.question_date),
    )
    for mode in modes:
        if breaker.tripped.is_set() or writer.error is not None:
            break  # not started: left for the next run, never recorded as an outcome it did not have
        ctx.session = wire.session_for(session, mode.name)  # the same events; the id may name the mode
        t0 = time.perf_counter()
        with embedding_call_log() as embedding_calls:  # index builds and query vectors of this mode's run
            try:
                out = mode.run(ctx)
                wall_s = time.perf_counter() - t0  # the reference-latency embeddings below are not this mode's
                ref_latency, ref_calls = _reference_latency(case, mode.name, out, retriever, comp)
                rec = _record(case, mode.name, out, comp.scorers, wall_s)
                rec.latency.update(ref_latency)
                if ref_calls:  # real requests, kept apart from the mode's own embedding_calls (and its cost)
                    rec.reference_latency_calls = ref_calls
            except ServerDied as e:
                rec = None
                if watch is not None:
                    watch.report(e)
            except Exception as e:  # recorded, never dropped: the case is retried on the next run
                log_failure(log, f"{case.question_id} / {mode.name}", e)
                rec = _failed_record(case, mode.name, e, time.perf_counter() - t0)
        if rec is None or (watch is not None and watch.check() is not None):
            # The server died during this pair: its outcome (a failed call, a judge's "not run") is not its own.
            # Not recorded; the next run redoes it (its answered calls come from the response cache).
            break
        if embedding_calls:
            rec.embedding_calls = list(embedding_calls)
            rec.usage["embedding_tokens"] = sum(c["usage"]["prompt_tokens"] for c in embedding_calls)
        failed += rec.status != STATUS_OK
        writer.append(bound_record(rec.to_json(), comp.bounds))
        breaker.observe(rec)
        bar.update(1)
    comp.summaries.forget(case.question_id)
    return failed


def _reference_latency(
    case: Case, mode: str, out: ModeOutput, retriever, comp: Components
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """latency.query_ms_reference and its parts (runners/reference_latency.py), per run.reference_latency."""
    query_ms = round(out.query_latency_s * 1000, 1)
    texts = appended_event_texts(mode, case.question, out.tool_results, out.prediction)
    embed_ms, calls = None, []
    embedder = getattr(retriever, "embedder", None)
    if should_measure(comp.reference_latency, embedder):
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


def _record(case: Case, mode: str, out: ModeOutput, scorers, wall_s: float) -> Record:
    item = ScoreInput(case.question_id, case.question_type, case.question, case.answer, out.prediction, mode)
    answer_calls = [c.to_record() for c in out.calls]
    summary_calls = (out.summary or {}).get("calls", [])
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
            # wall_ms: this process's wall time for the mode, which a cached re-run shrinks.
            latency={"query_ms": round(out.query_latency_s * 1000, 1), "wall_ms": round(wall_s * 1000, 1)},
            truncation=out.truncation,
            summary=out.summary,
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
