"""`lme-harness merge OUT RUN_DIR...`: the records of one run split into shards (dataset.shard=I/N), as one run.

Refused, with one error naming the culprit directory, when: a directory has no records; the configurations
differ beyond dataset.shard (results of different settings are never mixed); the shards are not all N parts
of one split; or a (case, mode) appears in two directories. OUT then holds records.jsonl and a run.json
(the first shard's, with `merged_from`), and `lme-harness report OUT` works on it as on any run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from harness.data.longmemeval import parse_shard
from harness.records import RECORDS_FILE, RecordError, load_records, record_key
from harness.storage import write_text_atomic
from runners.provenance import history_of


def _identity(run_dir: Path) -> tuple[str, str | None]:
    """(fingerprint without dataset.shard, the shard) of a run directory, from Hydra's saved config."""
    from runners.replay import fingerprint

    path = run_dir / ".hydra" / "config.yaml"
    if not path.exists():
        raise RecordError(f"{path}: missing; merge needs the run directories `lme-harness run` wrote")
    cfg = OmegaConf.load(path)
    shard = OmegaConf.select(cfg, "dataset.shard")
    if shard is not None:
        cfg.dataset.shard = None
    return fingerprint(cfg), None if shard is None else str(shard)


def merge_runs(out: Path, run_dirs: Sequence[Path]) -> Path:
    """Write OUT/records.jsonl and OUT/run.json from the shards' run directories; OUT's records path."""
    out = Path(out)
    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise RecordError("merge: no run directory given")
    if any(out.resolve() == d.resolve() for d in dirs):
        raise RecordError(f"{out}: the output is one of the inputs; merge into a new directory")
    ids = [_identity(d) for d in dirs]
    for d, (fp, _) in zip(dirs, ids):
        if fp != ids[0][0]:
            raise RecordError(
                f"{d}: its configuration differs from {dirs[0]}'s beyond dataset.shard; "
                f"merge only the shards of one run"
            )
    shards = [s for _, s in ids]
    if any(s is not None for s in shards):
        parsed = []
        for d, s in zip(dirs, shards):
            if s is None:
                raise RecordError(f"{d}: not a shard (no dataset.shard) while others are")
            parsed.append(parse_shard(s))
        n = parsed[0][1]
        if any(c != n for _, c in parsed):
            raise RecordError(
                f"{dirs[[c for _, c in parsed].index(next(c for _, c in parsed if c != n))]}: "
                f"a shard of another split than {dirs[0]} (x/{n})"
            )
        missing = sorted(set(range(n)) - {i for i, _ in parsed})
        if missing:
            raise RecordError(
                f"merge: shards {[f'{i}/{n}' for i in missing]} are missing; every shard's run "
                f"directory is needed for the whole run"
            )
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
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / RECORDS_FILE, "".join(line + "\n" for line in lines))
    metas = [json.loads((d / "run.json").read_text()) if (d / "run.json").exists() else {} for d in dirs]
    meta: dict[str, Any] = dict(metas[0])
    # every shard's invocations, so shards run at different commits say so in the report
    history = [{**e, "run_dir": str(d)} for d, m in zip(dirs, metas) for e in history_of(m)]
    if history:
        meta["invocations"] = history
    meta.update({"merged_from": [str(d) for d in dirs], "shards": shards})
    write_text_atomic(out / "run.json", json.dumps(meta, indent=2, default=str))
    return out / RECORDS_FILE
