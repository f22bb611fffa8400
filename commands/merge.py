"""`lme-harness merge OUT RUN_DIR...`: the records of one run split into shards (dataset.shard=I/N), as one run.

Refused, with one error naming the culprit directory, when: OUT already holds anything (a merge never replaces
a run's records); a directory has no records, or its `.hydra/config.yaml` or `run.json` cannot be read; the
configurations differ beyond dataset.shard (results of different settings are never mixed; the error names the
keys; a rescore directory's configuration is its source's with its scoring, commands/rescore.py); the shards are not
all N parts of one split; a (case, mode) appears in two directories; or a (case, mode) of the run's selection
(the dataset and modes of the shards' configuration) has no record in any shard: the error names the missing
pairs. `--allow-partial` writes such a merge anyway; run.json then lists the missing pairs (`merge_missing`) and
the report's header says the run is partial, so an incomplete merge is never read as the whole run.
OUT then holds records.jsonl, a run.json (the first shard's, with `merged_from`), the fingerprint of the
unsharded configuration and its snapshot (.hydra/config.yaml), so `lme-harness run` resumes OUT only with that configuration; `lme-harness report
OUT` works on it as on any run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.data.longmemeval import DataError, parse_shard
from harness.records import RECORDS_FILE, RecordError, load_records, record_key
from harness.run_meta import Invocation, RunMeta, RunMetaError, read_run_meta, write_run_meta
from harness.storage import write_text_atomic
from runners.fingerprint import differences, fingerprint, identity, write_fingerprint
from runners.snapshot import CONFIG_FILE, SNAPSHOT_DIR, read_snapshot, write_snapshot

MAX_LISTED_MISSING = 10  # the error names the first pairs and counts the rest


def _config(run_dir: Path) -> DictConfig:
    path = run_dir / SNAPSHOT_DIR / CONFIG_FILE
    try:
        cfg = read_snapshot(run_dir)
    except ValueError as e:
        raise RecordError(f"{e}; merge needs the shard's saved config") from None
    if cfg is None:
        raise RecordError(f"{path}: missing; merge needs the run directories `lme-harness run` wrote")
    return cfg


@dataclass
class _Shard:
    """A run directory as merge compares it: the identity of its configuration without dataset.shard (for a
    rescore: its source's configuration with its scoring, commands/rescore.py), its shard, that configuration."""

    fingerprint: str
    identity: dict[str, Any]
    shard: str | None
    config: DictConfig


def _identity(run_dir: Path) -> _Shard:
    """`run_dir` as merge compares it, from its snapshot (.hydra/config.yaml, runners/snapshot.py)."""
    cfg = _config(run_dir)
    shard = OmegaConf.select(cfg, "dataset.shard", default=None)
    if shard is not None:
        cfg.dataset.shard = None
    try:
        ident, fp = identity(OmegaConf.to_container(cfg, resolve=True)), fingerprint(cfg)
    except Exception as e:  # an interpolation that no longer resolves, a damaged value
        raise RecordError(
            f"{run_dir / SNAPSHOT_DIR / CONFIG_FILE}: cannot be read as a run's configuration ({e})"
        ) from None
    return _Shard(fp, ident, None if shard is None else str(shard), cfg)


def _run_meta(run_dir: Path) -> RunMeta:
    try:
        return read_run_meta(run_dir)
    except RunMetaError as e:
        raise RecordError(f"{e}; merge copies the shards' provenance from it") from None


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise RecordError(f"{out}: exists and is not a directory; merge into a new directory")
    if out.is_dir() and any(out.iterdir()):
        raise RecordError(f"{out}: already holds files (a run's records would be replaced); merge into a new directory")


def selection(cfg: DictConfig) -> set[tuple[str, str]]:
    """Every (question_id, mode) the unsharded configuration `cfg` runs (its dataset is loaded and checked)."""
    from hydra.utils import instantiate

    modes = [str(k) for k in (cfg.get("mode") or {})]
    try:
        cases, _ = instantiate(cfg.dataset, _convert_="all").load()
    except DataError as e:
        raise RecordError(
            f"merge checks that every (case, mode) of the run has a record, from its dataset: {e}"
        ) from None
    return {(c.question_id, m) for c in cases for m in modes}


def _listed(items: Sequence[str]) -> str:
    """The first MAX_LISTED_MISSING of `items`, and how many more."""
    more = f" and {len(items) - MAX_LISTED_MISSING} more" if len(items) > MAX_LISTED_MISSING else ""
    return ", ".join(items[:MAX_LISTED_MISSING]) + more


def _missing_message(missing: list[tuple[str, str]]) -> str:
    shown = _listed([f"({q}, {m})" for q, m in missing])
    return f"{len(missing)} (case, mode) pair(s) of the run have no record in any shard: {shown}"


def merge_runs(out: Path, run_dirs: Sequence[Path], *, allow_partial: bool = False) -> Path:
    """Write OUT/records.jsonl, OUT/run.json and OUT/fingerprint.json from the shards' run directories;
    OUT's records path. Everything is checked before OUT is created."""
    out = Path(out)
    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise RecordError("merge: no run directory given")
    if any(out.resolve() == d.resolve() for d in dirs):
        raise RecordError(f"{out}: the output is one of the inputs; merge into a new directory")
    _check_out(out)
    ids = [_identity(d) for d in dirs]
    for d, shard in zip(dirs, ids):
        if shard.fingerprint != ids[0].fingerprint:
            named = _listed(differences(ids[0].identity, shard.identity)) or "its identity"
            raise RecordError(
                f"{d}: its configuration differs from {dirs[0]}'s beyond dataset.shard ({named}); "
                f"merge only the shards of one run"
            )
    shards = [s.shard for s in ids]
    if any(s is not None for s in shards):
        parsed = []
        for d, s in zip(dirs, shards):
            if s is None:
                raise RecordError(f"{d}: not a shard (no dataset.shard) while others are")
            try:
                parsed.append(parse_shard(s))
            except DataError as e:
                raise RecordError(f"{d}: {e}") from None
        n = parsed[0][1]
        if any(c != n for _, c in parsed):
            raise RecordError(
                f"{dirs[[c for _, c in parsed].index(next(c for _, c in parsed if c != n))]}: "
                f"a shard of another split than {dirs[0]} (x/{n})"
            )
        missing_shards = sorted(set(range(n)) - {i for i, _ in parsed})
        if missing_shards:
            raise RecordError(
                f"merge: shards {[f'{i}/{n}' for i in missing_shards]} are missing; every shard's run "
                f"directory is needed for the whole run"
            )
    metas = [_run_meta(d) for d in dirs]
    seen: dict[tuple[str, str], Path] = {}
    lines: list[str] = []
    for d in dirs:
        path = d / RECORDS_FILE
        if not path.exists():
            raise RecordError(f"{path}: no records (has this shard run?)")
        for r in load_records(path):
            k = record_key(r)
            if k in seen:
                raise RecordError(f"{path}: ({k[0]}, {k[1]}) is also in {seen[k]}; shards must be disjoint")
            seen[k] = d
            lines.append(json.dumps(r, ensure_ascii=False))
    missing = sorted(selection(ids[0].config) - set(seen))
    if missing and not allow_partial:
        raise RecordError(
            f"merge: {_missing_message(missing)}; run the shards that stopped again with the same command "
            f"(they resume), or pass --allow-partial to merge what there is (the report then says it is partial)"
        )
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / RECORDS_FILE, "".join(line + "\n" for line in lines))
    meta = metas[0].copy()
    # every shard's invocations, so shards run at different commits say so in the report
    history: list[Invocation] = []
    for d, m in zip(dirs, metas):
        for inv in m.history():
            inv.run_dir = str(d)
            history.append(inv)
    if history:
        meta.invocations = history
    meta.merged_from = [str(d) for d in dirs]
    meta.shards = shards
    meta.fingerprint = ids[0].fingerprint
    meta.drop("merge_missing")
    if missing:
        meta.merge_missing = [list(k) for k in missing]
    write_run_meta(out, meta)
    # the unsharded configuration's identity: a run of another configuration is refused here (runners/fingerprint.py)
    write_fingerprint(out, ids[0].fingerprint, merged_from=[str(d) for d in dirs])
    write_snapshot(out, ids[0].config)  # the unsharded configuration: OUT can be rescored and merged in turn
    return out / RECORDS_FILE
