"""Smoke test: the real embedded llama.cpp server with the smallest model, one oracle case, all three modes."""

import pytest

from commands.cli import main
from harness.llm.models import load_spec
from harness.records import load_records

pytestmark = pytest.mark.slow


def test_one_oracle_case_through_all_three_modes_on_the_embedded_model(tmp_path):
    spec = load_spec("smollm2_135m")
    if not spec.path.exists():
        pytest.fail(f"{spec.path} missing: run `lme-harness models pull smollm2_135m` first (make test does)")
    args = [
        "run",
        "model=smollm2_135m",
        "dataset.limit=1",
        "dataset.shortest=true",  # the shortest history (~1.3K tokens, not the first case's ~3.1K): any case will do
        f"hydra.run.dir={tmp_path / 'run'}",
        f"cache.path={tmp_path / 'cache.sqlite'}",
        "run.progress=false",
        "generation.max_tokens=48",
        # bounded generation keeps the smoke test short: the judge and the summary quality are tested elsewhere
        "judge=none",
        "summarizer.max_tokens=128",
    ]
    assert main(args) == 0
    recs = load_records(tmp_path / "run" / "records.jsonl")
    assert sorted(r["mode"] for r in recs) == ["long_context", "summary", "summary_ondemand"]
    assert all(r["status"] == "ok" for r in recs)
    assert all(r["usage"]["final_prompt_tokens"] > 0 for r in recs)
    assert (tmp_path / "run" / "llama-server-smollm2_135m.log").exists()
    assert (tmp_path / "run" / "report.md").exists()
    # The same command again: resumed from the records, no server needed, nothing changes.
    before = (tmp_path / "run" / "records.jsonl").read_bytes()
    assert main(args) == 0
    assert (tmp_path / "run" / "records.jsonl").read_bytes() == before
