"""Phase checkpoints of a memory contestant: a run killed between a unit's ingest and its answer, then resumed.

What a resumed run redoes, and what it must not: finished cases (retrieval, answer, verdict in their record) make
no call at all (tests/system/test_crash_resume.py holds that for every mode); the killed case's ingest is redone, but the
LLM calls it had already paid for are served (the run's summary store, else the response cache) and recorded as
cached in the provider's usage, so the record still says what the ingest cost and that it was not spent again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.records import load_records
from harness.testing.faults import FakeModel, request_kind
from tests.support.fake_run import endpoint_args, is_reader_request, killed_at_first_reader

pytestmark = pytest.mark.process  # tests/README.md: every test here starts a process


def _args(tmp_path: Path, base_url: str) -> list[str]:
    return [
        "run",
        f"hydra.run.dir={tmp_path / 'run'}",
        "mode=memory",
        "memory=summary",
        *endpoint_args(base_url, tmp_path),
        "run.concurrency=1",
        "dataset.limit=2",
    ]


def test_a_run_killed_between_ingest_and_answer_resumes_without_paying_for_the_ingest_again(tmp_path) -> None:
    from commands.cli import main

    with killed_at_first_reader(FakeModel(), lambda url: _args(tmp_path, url)) as srv:
        first = list(srv.requests)
        records = tmp_path / "run" / "records.jsonl"
        assert not records.exists() or not load_records(records)  # killed before the first answer was recorded
        assert [request_kind(q) for q in first].count("summary") == 1  # the first unit's ingest, paid once

        n0 = len(srv.requests)
        assert main(_args(tmp_path, srv.base_url)) == 0
        rerun = list(srv.requests)[n0:]

    # the resumed run: one summary generation (the second unit's), two answers; the first unit's ingest is served
    assert [request_kind(q) for q in rerun].count("summary") == 1
    assert sum(is_reader_request(q) for q in rerun) == 2
    recs = sorted(load_records(tmp_path / "run" / "records.jsonl"), key=lambda r: r["question_id"])
    assert [r["status"] for r in recs] == ["ok", "ok"]
    usages = [r["ingest"]["trace"][0]["usage"] for r in recs]
    assert all(u["llm_calls"] == 1 and u["input_tokens"] > 0 for u in usages)  # what each ingest cost, recorded
    assert sorted(u["cached_llm_calls"] for u in usages) == [0, 1]  # and which one was served, not spent again
