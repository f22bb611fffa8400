"""mem0 (the `memory` extra) in a real `lme-harness run mode=memory memory=mem0`, killed between its first unit's
ingest and that unit's answer (SIGKILL when the first reader request arrives), then resumed with the same command.

mem0's store is kept in the run directory (`memory-store.<contestant>/`, harness/memory/mem0_provider.py
`keep_units_in`), so the resumed run attaches to the unit the killed run ingested: it sends no extraction request
for it (the response cache is off, so a re-ingest would show on the wire), and the record carries the original
ingest's trace with `resumed: true`. The finished run leaves no ingest checkpoint.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from harness.records import load_records
from harness.testing.fake_openai import is_mem0_extraction as _is_extraction
from harness.testing.faults import FakeModel
from tests.support.fake_run import is_reader_request, killed_at_first_reader

if importlib.util.find_spec("mem0") is None:
    if os.environ.get("LME_REQUIRE_MEM0") == "1":  # CI: a missing extra fails, never a silent skip
        raise ImportError("LME_REQUIRE_MEM0=1 but mem0ai is not installed (pip install -e '.[memory]')")
    pytest.skip("mem0ai not installed (pip install -e '.[memory]')", allow_module_level=True)

pytestmark = [pytest.mark.process, pytest.mark.mem0]


def _args(tmp_path: Path, base_url: str) -> list[str]:
    return [
        "run",
        f"hydra.run.dir={tmp_path / 'run'}",
        "mode=memory",
        "memory=mem0",
        "memory.embedder={_target_:harness.retrieval.embedders.HashingEmbedder,dim:64}",
        "memory.turns_per_add=100",  # one extraction call per session
        "memory.threshold=0",
        "dataset=oracle",
        "dataset.limit=2",
        "model=endpoint",
        f"model.base_url={base_url}",
        "model.model=fake-model",
        "cache.enabled=false",
        "run.progress=false",
        "run.concurrency=1",
    ]


def test_a_killed_mem0_run_resumes_by_attaching_to_the_unit_it_had_ingested(tmp_path: Path) -> None:
    from commands.cli import main

    with killed_at_first_reader(FakeModel(), lambda url: _args(tmp_path, url)) as srv:
        killed = list(srv.requests)
        run = tmp_path / "run"
        assert not (run / "records.jsonl").exists() or not load_records(run / "records.jsonl")
        assert (run / "memory-store.memory" / "units.json").exists()
        first_unit = sum(map(_is_extraction, killed))
        assert first_unit >= 1

        n0 = len(srv.requests)
        assert main(_args(tmp_path, srv.base_url)) == 0
        rerun = list(srv.requests)[n0:]

    recs = sorted(load_records(run / "records.jsonl"), key=lambda r: r["question_id"])
    assert [r["status"] for r in recs] == ["ok", "ok"]
    traces = [r["ingest"]["trace"][0] for r in recs]
    attached = [t for t in traces if t.get("resumed")]
    assert len(attached) == 1 and attached[0]["resume"]["attached"] is True
    # the attached unit's record says what its ingest cost (the killed run's calls), not spent again
    assert attached[0]["usage"]["llm_calls"] == first_unit
    (fresh,) = [t for t in traces if not t.get("resumed")]
    # on the wire, the resumed run extracted the second unit's sessions only
    assert sum(map(_is_extraction, rerun)) == fresh["usage"]["llm_calls"] == fresh["sessions"]
    assert sum(map(is_reader_request, rerun)) == 2
    assert not list(run.glob("memory-ingest.*.jsonl"))  # every unit torn down: no checkpoint left
    assert json.loads((run / "memory-store.memory" / "units.json").read_text()) == {}
