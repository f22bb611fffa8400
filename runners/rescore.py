"""`lme-harness rescore SRC_RUN_DIR [HYDRA OVERRIDES]`: score a run's answers again, with no answer calls.

The answers are read from SRC's records (the source of truth); the configured scorers and judge score them
again, e.g. the official judge on a run that was scored by the reference's LLMScore:

    lme-harness rescore runs/repro/dataset=s,model=openai judge=longmemeval +model@judge.endpoint=openai \
        judge.endpoint.model=gpt-4o-2024-08-06

Each new record is the source record with `metrics` and `metric_details` replaced and `rescored_from` added;
calls, tool trace, summary, usage and latency are kept, so cost and token columns still describe the run that
produced the answers. A failed source pair has no answer: it is copied as failed (and listed in the report).
A pair whose judge call fails is recorded "scoring_failed" (exit 3) and scored again by the same command.
An embedded judge whose server dies stops the rescore instead (exit 4): no pair is recorded with the dead
server's failure, every record is kept, and the same command resumes.
The output directory (default SRC/rescore/<overrides>) resumes like a run: the same command scores only
what is missing, and `lme-harness compare SRC OUT` puts the two judges side by side. One process at a time
writes it (run.lock).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.llm.endpoint import make_client, open_endpoint
from harness.llm.liveness import ServerWatch
from harness.records import (
    RECORDS_FILE,
    SCHEMA_VERSION,
    STATUS_OK,
    STATUS_SCORING_FAILED,
    Record,
    RecordError,
    RecordWriter,
    done_keys,
    read_records,
)
from harness.run_meta import RUN_META_FILE, ModelRef, RescoreInfo, RunMeta, RunMetaError, read_run_meta, write_run_meta
from harness.runlock import run_dir_lock
from harness.scoring.base import specs_json
from harness.settings import ClientSettings, judge_model
from runners.components import build_scorers, open_cache, preflight
from runners.fingerprint import check_fingerprint, fingerprint, read_fingerprint, write_fingerprint
from runners.lifecycle import RunStopped, RunSummary, clear_failure, write_failure
from runners.provenance import MODEL_KEYS, git_state, redacted_config, utc_now
from runners.scoring import apply_scores
from runners.settings import validate_settings

log = logging.getLogger(__name__)


def rescore_record(rec: Record, scorers, source: str) -> Record:
    out = dataclasses.replace(rec, rescored_from=source, schema_version=SCHEMA_VERSION)
    if not rec.answered:
        return out  # no answer to score: stays failed, with the source's reason
    return apply_scores(out, scorers)


def scoring_fingerprint(cfg: DictConfig, src_dir: Path) -> str:
    """The identity of a rescore: which answers (the source run's fingerprint) and how they are scored (the
    judge and scorers, endpoint URLs and non-result settings left out as in a run's fingerprint)."""
    source_fp = read_fingerprint(src_dir) or _source_meta(src_dir).fingerprint
    node = {
        "rescore_of": source_fp or str(src_dir.resolve()),
        "judge": OmegaConf.to_container(cfg.judge, resolve=True),
        "scorers": OmegaConf.to_container(cfg.scorers, resolve=True) if cfg.get("scorers") is not None else None,
    }
    return fingerprint(OmegaConf.create(node))


def _source_meta(src_dir: Path) -> RunMeta:
    try:
        return read_run_meta(src_dir)
    except (OSError, RunMetaError):
        return RunMeta.from_json({})


def rescore_run(cfg: DictConfig, src_dir: Path, out_dir: Path) -> RunSummary:
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    if src_dir.resolve() == out_dir.resolve():
        raise RecordError(f"{out_dir}: rescore must write to another directory than its source")
    source = read_records(src_dir / RECORDS_FILE)
    if not source:
        raise RecordError(f"{src_dir / RECORDS_FILE}: no records to rescore")
    with run_dir_lock(out_dir):
        return _rescore_locked(cfg, src_dir, out_dir, source)


def _rescore_locked(cfg: DictConfig, src_dir: Path, out_dir: Path, source: list[Record]) -> RunSummary:
    started = False
    try:
        validate_settings(cfg)  # the same checks as a run: one error naming the key, before any call
        # One scoring per directory: records of another judge (or of a run) are never resumed as this one's.
        fp = scoring_fingerprint(cfg, src_dir)
        check_fingerprint(out_dir, fp)
        done = done_keys(out_dir / RECORDS_FILE)
        todo = [r for r in source if r.key not in done]
        stats: dict[str, Any] = {}
        judge_spec = judge_model(cfg)[0] if cfg.judge.get("_target_") else None
        with contextlib.ExitStack() as stack:
            judge_client = None
            if todo and judge_spec is not None:
                cache = open_cache(cfg, stack)
                ep = stack.enter_context(open_endpoint(judge_spec, log_dir=out_dir, progress=cfg.run.progress))
                client_settings = ClientSettings.from_config(cfg.client)
                judge_client = make_client(ep, client_settings, cache)
                preflight(client_settings, judge_client)
            scorers = build_scorers(cfg, judge_client) if todo else []
            code = RescoreInfo(git=git_state(), started=utc_now())  # the scoring code, before the first score
            started = True
            clear_failure(out_dir)
            write_fingerprint(out_dir, fp, rescore_of=str(src_dir))
            writer = RecordWriter(out_dir / RECORDS_FILE)
            t0 = time.perf_counter()
            liveness = getattr(judge_client, "liveness", None)
            watch = ServerWatch([liveness] if liveness else [])

            def one(r: Record) -> Record | None:
                return None if watch.died is not None else rescore_record(r, scorers, str(src_dir))

            written = 0
            with watch, ThreadPoolExecutor(max_workers=int(cfg.run.concurrency)) as pool:
                for new in pool.map(one, todo):
                    # A judge that lost its server scores "failed": not the pair's own outcome, so not recorded.
                    if new is None or watch.check() is not None:
                        continue  # the rest are skipped at once (`one` sees `watch.died`)
                    writer.append(new)
                    written += 1
            if watch.died is not None:
                raise RunStopped(
                    f"{watch.died}\nThe rescore stopped: {written} pair(s) were scored this run, {len(todo) - written} "
                    f"were left for the next one; every record is kept in {writer.path}. Fix the cause and run the "
                    f"same command again to resume."
                ) from watch.died
            if judge_client is not None:
                stats = judge_client.stats.as_dict()
            _write_meta(cfg, src_dir, out_dir, judge_spec, stats, time.perf_counter() - t0, scorers, code)
    except Exception as e:
        write_failure(out_dir, e, started)
        raise
    final = read_records(out_dir / RECORDS_FILE)
    failed = sum(r.status != STATUS_OK for r in final)
    return RunSummary(
        out_dir,
        len(final),
        failed,
        len(source) - len(todo),
        stats,
        sum(r.status == STATUS_SCORING_FAILED for r in final),
    )


def _write_meta(
    cfg: DictConfig,
    src_dir: Path,
    out_dir: Path,
    judge_spec,
    stats: dict[str, Any],
    elapsed: float,
    scorers: Sequence[Any] = (),
    code: RescoreInfo | None = None,
) -> None:
    """run.json: the source run's provenance (dataset, answer model, config), with the new scoring on top."""
    meta = read_run_meta(src_dir)
    if scorers:  # the new scorers' metric declarations (a resumed rescore with nothing to do keeps the last ones)
        meta.metrics = specs_json(scorers)
    elif (out_dir / RUN_META_FILE).exists():
        with contextlib.suppress(OSError, RunMetaError):
            meta.metrics = read_run_meta(out_dir).metrics or meta.metrics
    new_cfg = redacted_config(cfg)
    spec = OmegaConf.to_container(judge_spec, resolve=True) if judge_spec is not None else {}
    judge = {str(k): v for k, v in (spec if isinstance(spec, dict) else {}).items() if k in MODEL_KEYS}
    config = dict(meta.config or {})
    config.update({"judge": new_cfg.get("judge"), "scorers": new_cfg.get("scorers")})
    meta.judge_model = ModelRef.from_json(judge) if judge else None
    meta.config = config
    # git, started: the code that scored (the top-level git is the answering run's)
    rescore = code.copy() if code is not None else RescoreInfo()
    rescore.source = str(src_dir)
    rescore.source_fingerprint = meta.fingerprint
    rescore.elapsed_s = round(elapsed, 2)
    rescore.judge_stats = stats
    meta.rescore = rescore
    write_run_meta(out_dir, meta)
