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
writes it (run.lock). Its snapshot (.hydra/config.yaml) is the source's configuration with the new judge and
scorers, and run.json names the source's fingerprint (`rescore.source_fingerprint`): what produced its answers,
which `merge` compares (two rescored shards of one run merge; rescores of different runs never do).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.records import (
    RECORDS_FILE,
    SCHEMA_VERSION,
    STATUS_OK,
    STATUS_SCORING_FAILED,
    Record,
    RecordError,
    done_keys,
    read_records,
)
from harness.run_meta import RUN_META_FILE, ModelRef, RescoreInfo, RunMeta, RunMetaError, read_run_meta, write_run_meta
from harness.scoring.base import specs_json
from runners.components import build_scorers
from runners.fingerprint import check_fingerprint, fingerprint, read_fingerprint
from runners.lifecycle import RunStopped, RunSummary
from runners.pair_scoring import apply_scores
from runners.provenance import MODEL_KEYS, git_state, redacted_config, utc_now
from runners.run_config import RunConfig
from runners.skeleton import Clients, RunSkeleton, run_skeleton
from runners.snapshot import read_snapshot

log = logging.getLogger(__name__)


def rescore_record(rec: Record, scorers, source: str) -> Record:
    out = dataclasses.replace(rec, rescored_from=source, schema_version=SCHEMA_VERSION)
    if not rec.answered:
        return out  # no answer to score: stays failed, with the source's reason
    return apply_scores(out, scorers)


def source_fingerprint(src_dir: Path) -> str | None:
    """The identity of what produced the source's records (its fingerprint.json, else its run.json's)."""
    return read_fingerprint(src_dir) or _source_meta(src_dir).fingerprint


def source_configuration(src_dir: Path) -> DictConfig:
    """The configuration that produced the source's answers: its snapshot (.hydra/config.yaml), else the config
    its run.json records (a run directory of an older release, a merged one), else an empty one. RecordError
    naming the file when the snapshot is unreadable."""
    try:
        cfg = read_snapshot(src_dir)
    except ValueError as e:
        raise RecordError(f"{e}; rescore carries its source's configuration") from None
    return cfg if cfg is not None else OmegaConf.create(dict(_source_meta(src_dir).config or {}))


def scored_configuration(source: DictConfig, config: RunConfig) -> DictConfig:
    """The configuration of a rescore's records, its snapshot: the source's (what produced the answers: model,
    dataset, shard, modes, prompt...) with this rescore's judge and scorers (resolved, secrets masked). A judge
    without an endpoint of its own calls the rescore's `model`: it is written as the judge's endpoint, so the
    snapshot never names the source's answer model as the judge. `merge` compares these (commands/merge.py)."""
    scoring = redacted_config(config.composed)
    judge = scoring.get("judge")
    if isinstance(judge, dict) and config.judged and not config.judge_has_own_model:
        judge["endpoint"] = scoring.get("model")
    out = copy.deepcopy(source)  # unresolved, as the source's snapshot holds it
    out.judge = judge
    out.scorers = scoring.get("scorers")
    return out


def scoring_fingerprint(config: RunConfig, src_dir: Path) -> str:
    """The identity of a rescore: which answers (the source run's fingerprint) and how they are scored (the
    judge and scorers, endpoint URLs and non-result settings left out as in a run's fingerprint)."""
    source_fp = source_fingerprint(src_dir)
    node = {
        "rescore_of": source_fp or str(src_dir.resolve()),
        "judge": OmegaConf.to_container(config.judge, resolve=True),
        "scorers": OmegaConf.to_container(config.scorers, resolve=True) if config.scorers is not None else None,
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
    with run_skeleton(out_dir) as skeleton:
        # the one place the composed config becomes the rescore's settings (validated once, as a run's)
        n_todo, stats = _rescore(skeleton.configure(cfg), skeleton, src_dir, source)
    final = read_records(out_dir / RECORDS_FILE)
    failed = sum(r.status != STATUS_OK for r in final)
    return RunSummary(
        out_dir,
        len(final),
        failed,
        len(source) - n_todo,
        stats,
        sum(r.status == STATUS_SCORING_FAILED for r in final),
    )


def _rescore(
    config: RunConfig, skeleton: RunSkeleton, src_dir: Path, source: list[Record]
) -> tuple[int, dict[str, Any]]:
    """(pairs to score this run, the judge client's totals)."""
    out_dir = skeleton.run_dir
    # One scoring per directory: records of another judge (or of a run) are never resumed as this one's.
    fp = scoring_fingerprint(config, src_dir)
    check_fingerprint(out_dir, fp)
    snapshot = scored_configuration(source_configuration(src_dir), config)
    done = done_keys(out_dir / RECORDS_FILE)
    todo = [r for r in source if r.key not in done]
    judge_spec = config.judge_model if config.judged else None
    clients = Clients()
    if todo and judge_spec is not None:
        skeleton.open_cache()
        clients = skeleton.open_clients(answer=False)
    scorers = build_scorers(config, clients.judge) if todo else []
    code = RescoreInfo(git=git_state(), started=utc_now())  # the scoring code, before the first score
    skeleton.start(fp, snapshot=snapshot, rescore_of=str(src_dir))
    writer = skeleton.record_writer()
    t0 = time.perf_counter()
    watch = skeleton.server_watch(clients)

    def one(r: Record) -> Record | None:
        return None if watch.died is not None else rescore_record(r, scorers, str(src_dir))

    written = 0
    with watch, ThreadPoolExecutor(max_workers=config.run.concurrency) as pool:
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
    stats = clients.stats()
    _write_meta(config.composed, src_dir, out_dir, judge_spec, stats, time.perf_counter() - t0, scorers, code)
    return len(todo), stats


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
