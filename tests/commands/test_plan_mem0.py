"""`lme-harness plan` with mem0 (the `memory` extra), which extracts memories with the run's own model while
ingesting: its extraction calls are planned as the run sends them (part `memory_ingest`), the reader at the context
cap, and nothing is sent anywhere. After a real run, a plan of the same cases finds every extraction request in the
response cache: the planned requests are the run's, byte for byte (the cache key)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from commands.cli import main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel

if importlib.util.find_spec("mem0") is None:
    if os.environ.get("LME_REQUIRE_MEM0") == "1":  # CI: a missing extra fails, never a silent skip
        raise ImportError("LME_REQUIRE_MEM0=1 but mem0ai is not installed (pip install -e '.[memory]')")
    pytest.skip("mem0ai not installed (pip install -e '.[memory]')", allow_module_level=True)

pytestmark = [pytest.mark.e2e, pytest.mark.mem0]
CAP = 4000  # configs/mode/memory.yaml context_tokens


def _responder() -> Any:
    """The fake endpoint's model: mem0's extraction calls answered in mem0's format, the rest as any run's."""
    return FakeModel()


def _args(tmp_path: Path, base_url: str, run_dir: Path) -> list[str]:
    return [
        f"hydra.run.dir={run_dir}",
        "mode=memory",
        "memory=mem0",
        "memory.embedder={_target_:harness.retrieval.embedders.HashingEmbedder,dim:64}",
        "memory.turns_per_add=100",  # one extraction call per session
        "dataset=oracle",
        "dataset.limit=2",
        "model=endpoint",
        f"model.base_url={base_url}",
        "model.model=fake-model",
        f"cache.path={tmp_path / 'responses.sqlite'}",
        "run.progress=false",
        "run.concurrency=1",
    ]


def test_a_plan_of_mem0_plans_its_extraction_calls_and_sends_nothing(tmp_path: Path) -> None:
    with FakeOpenAIServer(_responder()) as srv:
        assert main(["plan", *_args(tmp_path, srv.base_url, tmp_path / "planned")]) == 0
        assert srv.requests == []  # a plan sends nothing
        assert main(["run", *_args(tmp_path, srv.base_url, tmp_path / "run")]) == 0
        extractions = sum("## New Messages" in json.dumps(r.get("messages")) for r in srv.requests)
        n0 = len(srv.requests)
        assert main(["plan", *_args(tmp_path, srv.base_url, tmp_path / "after")]) == 0
        assert len(srv.requests) == n0

    sessions = sum(r["ingest"]["trace"][0]["sessions"] for r in load_records(tmp_path / "run" / "records.jsonl"))
    assert extractions == sessions >= 2
    before = json.loads((tmp_path / "planned" / "plan.json").read_text())
    row = before["per_mode"]["memory"]
    assert row["calls"]["memory_ingest"] == sessions  # the calls a run makes, planned before it
    assert row["calls"]["answer"] == row["calls"]["judge"] == 2
    # a unit's first extraction prompt is known (a miss); later ones and the readers' are not
    assert row["cache"] == {"hit": 0, "miss": 2, "unknown": sessions - 2 + 4}
    assert row["prompt_tokens"] > 2 * CAP  # the two readers, planned at the context cap
    assert "mem0" in before["estimates"]["memory_ingest"]
    # after the run, every extraction request is in the cache: the plan's requests are the run's own
    after = json.loads((tmp_path / "after" / "plan.json").read_text())["per_mode"]["memory"]
    assert after["calls"]["memory_ingest"] == sessions
    assert after["cache"]["hit"] == sessions and after["cache"]["miss"] == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generated_plans_of_mem0_match_what_the_run_sends(tmp_path: Path, seed: int) -> None:
    """A probe over generated run shapes (turns per `add`, how many cases, which seeded stratified cases): the plan
    counts exactly the extraction calls the run then sends, knows each unit's first prompt (a miss), and after the
    run finds every extraction request in the cache."""
    import random

    rng = random.Random(seed)
    shape = [
        f"memory.turns_per_add={rng.choice([1, 2, 3, 5, 8])}",
        f"dataset.limit={rng.randint(1, 3)}",
        f"dataset.sample_seed={rng.randint(0, 10_000)}",
    ]
    with FakeOpenAIServer(_responder()) as srv:
        assert main(["plan", *_args(tmp_path, srv.base_url, tmp_path / "planned"), *shape]) == 0
        assert main(["run", *_args(tmp_path, srv.base_url, tmp_path / "run"), *shape]) == 0
        sent = sum("## New Messages" in json.dumps(r.get("messages")) for r in srv.requests)
        assert main(["plan", *_args(tmp_path, srv.base_url, tmp_path / "after"), *shape]) == 0

    units = len(load_records(tmp_path / "run" / "records.jsonl"))
    before = json.loads((tmp_path / "planned" / "plan.json").read_text())["per_mode"]["memory"]
    after = json.loads((tmp_path / "after" / "plan.json").read_text())["per_mode"]["memory"]
    assert before["calls"]["memory_ingest"] == after["calls"]["memory_ingest"] == sent >= units, shape
    assert before["cache"]["miss"] == units and before["cache"]["hit"] == 0, shape
    assert after["cache"]["hit"] == sent and after["cache"]["miss"] == 0, shape
