"""A run directory's snapshot always describes its records (issue 38 item 5).

Seeded sequences of commands on one directory (runs of two configurations, a shard, rescores by two judges, a
merge, a run whose endpoint is down) are checked against a model of which are accepted: a refused command leaves
every file of a directory holding a run as it was (its log excepted: it records each attempt) and no failure
note; after an accepted one, `.hydra/config.yaml` is the configuration of the records there (a run's and a merge's
fingerprint recomputed from it equals fingerprint.json's; a rescore's is its source's with the rescore's judge).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from commands.cli import main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from runners.fingerprint import fingerprint
from tests.support.tagged_run import answer, args, dataset

pytestmark = pytest.mark.e2e

VOLATILE = {"cli.log", "run.lock"}  # the log gets every attempt's lines; the lock file goes with its holder
JUDGES = {"trpc": "TrpcJudge", "longmemeval": "LongMemEvalJudge"}


def run_args(tmp: Path, url: str, data: Path, run_dir: Path, x: int, shard: str | None) -> list[str]:
    out = [a for a in args(tmp, url, data, "unused") if not a.startswith("hydra.run.dir=")]
    out += [f"hydra.run.dir={run_dir}", "judge=none", "mode=[long_context]", f"+notes.x={x}"]
    return out + ([f"dataset.shard={shard}"] if shard else [])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Finished shards of the run x=1 (for merges) and the unsharded run x=1 (the rescores' source)."""
    tmp = tmp_path_factory.mktemp("inputs")
    data = dataset(tmp)
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        for name, shard in (("p0", "0/2"), ("p1", "1/2"), ("src", None)):
            assert main(run_args(tmp, srv.base_url, data, tmp / name, 1, shard)) == 0
    return tmp, data


def files(run_dir: Path) -> dict[str, bytes]:
    if not run_dir.exists():
        return {}
    return {
        str(p.relative_to(run_dir)): p.read_bytes()
        for p in run_dir.rglob("*")
        if p.is_file() and p.name not in VOLATILE
    }


def holds_run(run_dir: Path) -> bool:
    return (run_dir / "records.jsonl").exists()


def check_snapshot_describes_records(run_dir: Path, owner: tuple) -> None:
    assert (run_dir / ".hydra" / "config.yaml").is_file(), "records without a snapshot"
    snap = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    assert not (run_dir / "FAILED.txt").exists(), "a failure note beside finished records"
    recorded = json.loads((run_dir / "fingerprint.json").read_text())
    if owner[0] == "rescore":
        assert recorded["rescore_of"].endswith("src")
        assert str(snap.judge._target_).endswith(JUDGES[owner[1]])
        assert snap.notes.x == 1 and snap.dataset.shard is None  # the source's answers
        assert {r["rescored_from"] for r in load_records(run_dir / "records.jsonl")} == {recorded["rescore_of"]}
    else:
        assert fingerprint(snap) == recorded["fingerprint"]
        if owner[0] == "run":
            assert snap.notes.x == owner[1] and snap.dataset.get("shard") == owner[2]
        else:  # a merge: the unsharded configuration of its shards
            assert snap.notes.x == 1 and snap.dataset.get("shard") is None


def _step(rng: random.Random) -> tuple:
    kind = rng.choice(["run", "run", "rescore", "merge", "down"])
    if kind == "run":
        return ("run", rng.choice([1, 2]), rng.choice([None, None, "0/2"]))
    if kind == "rescore":
        return ("rescore", rng.choice(sorted(JUDGES)))
    if kind == "down":
        return ("down", rng.choice([1, 2]))
    return ("merge",)


def _accepted(step: tuple, owner: tuple | None, run_dir: Path) -> bool:
    """The model: which commands the directory accepts."""
    if step[0] == "merge":
        return not run_dir.exists() or not any(run_dir.iterdir())
    if step[0] == "down":  # the endpoint is checked before the run starts, if the run has a pair to run
        return owner is not None and _accepted(("run", step[1], None), owner, run_dir)
    if owner is None:
        return True
    if step[0] == "run":
        merged_same = owner[0] == "merge" and step[1:] == (1, None)
        return owner == step or merged_same
    return owner == step  # a rescore resumes its own scoring only


@pytest.mark.parametrize("seed", range(4))
def test_generated_command_sequences_never_leave_a_snapshot_that_misdescribes_the_records(seed, inputs, tmp_path):
    rng = random.Random(seed)
    tmp, data = inputs
    run_dir = tmp_path / "d"
    owner: tuple | None = None
    steps = [_step(rng) for _ in range(6)]
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        for step in steps:
            before = files(run_dir)
            expect = _accepted(step, owner, run_dir)
            if step[0] == "run":
                code = main(run_args(tmp_path, srv.base_url, data, run_dir, step[1], step[2]))
            elif step[0] == "down":
                code = main(run_args(tmp_path, "http://127.0.0.1:9/v1", data, run_dir, step[1], None))
            elif step[0] == "rescore":
                code = main(
                    [
                        "rescore",
                        str(tmp / "src"),
                        f"hydra.run.dir={run_dir}",
                        "model=endpoint",
                        f"model.base_url={srv.base_url}",
                        "model.model=fake-judge",
                        f"judge={step[1]}",
                        "run.progress=false",
                        "cache.enabled=false",
                    ]
                )
            else:
                code = main(["merge", str(run_dir), str(tmp / "p0"), str(tmp / "p1")])
            assert code == (0 if expect else 2), (steps, step)
            if expect and owner is None:
                owner = step
            elif not expect and holds_run(run_dir):
                assert files(run_dir) == before, f"refused {step} changed {run_dir}"
            if holds_run(run_dir):
                assert owner is not None
                check_snapshot_describes_records(run_dir, owner)
