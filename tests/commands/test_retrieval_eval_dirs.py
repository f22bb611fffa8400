"""`lme-harness retrieval-eval` writes under runs/<run.name>/retrieval-eval/, never into the directory of a run
with the same overrides (which it did: its report files landed among the run's records)."""

from __future__ import annotations

from pathlib import Path

import pytest

from commands.cli import main
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from tests.integration.test_secrets_construction import base

pytestmark = pytest.mark.e2e

EVAL = "+retrieval_eval.presets=[bm25]"


def _overrides(url: str, tmp_path: Path) -> list[str]:
    """A small run's overrides (tests/integration/test_secrets_construction.py `base`, without its "run"), for both commands."""
    return [*base(url, tmp_path)[1:], EVAL]


def _snapshot(d: Path) -> dict[str, bytes]:
    """The run directory's files but its SQLite stores (their WAL is folded in when the run's connections close)."""
    return {
        str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file() and ".sqlite" not in p.name
    }


def test_a_retrieval_eval_with_a_runs_overrides_leaves_that_run_directory_alone(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(FakeModel()) as srv:
        same = _overrides(srv.base_url, tmp_path)
        assert main(["run", *same]) == 0, capfd.readouterr().err[-2000:]
        [records] = tmp_path.glob("runs/quickstart/*/records.jsonl")
        run_dir = records.parent
        before = _snapshot(run_dir)
        assert main(["retrieval-eval", *same]) == 0, capfd.readouterr().err[-2000:]
    [report] = tmp_path.glob("runs/quickstart/retrieval-eval/*/retrieval_eval.md")
    assert report.parent.name == run_dir.name  # the same name, in the evaluation's own folder
    assert _snapshot(run_dir) == before  # the run's records, snapshot and log untouched
    assert not list(run_dir.glob("retrieval_eval*"))


def test_an_explicit_directory_is_kept(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "mine"
    argv = _overrides("http://127.0.0.1:1/v1", tmp_path)
    assert main(["retrieval-eval", *argv, f"hydra.run.dir={out}"]) == 0, capfd.readouterr().err[-2000:]
    assert (out / "retrieval_eval.md").exists() and not (tmp_path / "runs").exists()
