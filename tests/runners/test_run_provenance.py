"""run.json names the code that wrote the records: the git state is taken before the first case (a long run's
tree may change under it), and a directory resumed under other code lists every invocation and says so in the
report header."""

from __future__ import annotations

import json

import pytest

from commands.cli import main
from harness.run_meta import GitState, RunMeta
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from runners import provenance
from tests.support.bad_start import run


class _Tree:
    """Stands in for `git`: the sha the working tree is at, moved by the test (or by a case mid-run)."""

    def __init__(self, sha: str):
        self.sha = sha

    def __call__(self, *args: str) -> str | None:
        return self.sha if args[0] == "rev-parse" else ""  # `status --porcelain`: clean


def _run(tmp_path, base_url) -> int:
    return run(
        tmp_path,
        "mode=[long_context]",
        "dataset.limit=2",
        "run.concurrency=1",
        "client.max_retries=0",
        base_url=base_url,
    )


@pytest.mark.e2e
def test_run_json_names_the_code_at_the_start_and_every_invocation(tmp_path, monkeypatch):
    tree = _Tree("a" * 40)
    monkeypatch.setattr(provenance, "_git", tree)
    model = FakeModel()
    answers: list[str] = []

    def answering_moves_the_tree(req):
        answers.append(tree.sha)
        tree.sha = "b" * 40  # a commit lands while the run is answering
        if len(answers) == 2:
            raise RuntimeError("the second case fails in the first invocation")  # -> HTTP 500, a failed pair
        return model(req)

    with FakeOpenAIServer(answering_moves_the_tree) as srv:
        assert _run(tmp_path, srv.base_url) != 0  # one failed pair, kept for the next invocation
        meta = json.loads((tmp_path / "run" / "run.json").read_text())
        assert meta["git"]["sha"] == "a" * 40  # the code that answered, not the tree at the end
        assert [e["git"]["sha"] for e in meta["invocations"]] == ["a" * 40]
        assert meta["invocations"][0]["pairs_run"] == 2 and meta["invocations"][0]["started"]
        report = (tmp_path / "run" / "report.md").read_text()
        assert "invocations at" not in report  # one commit: no note

        tree.sha = "c" * 40
        assert _run(tmp_path, srv.base_url) == 0  # resumes: the failed pair again, under other code
        meta = json.loads((tmp_path / "run" / "run.json").read_text())
        assert [(e["git"]["sha"][0], e["pairs_run"]) for e in meta["invocations"]] == [("a", 2), ("c", 1)]
        report = (tmp_path / "run" / "report.md").read_text()
        assert "records written by 2 invocations at 2 commits: aaaaaaaaaa (2 pairs), cccccccccc (1 pairs)" in report
        assert "records written by 2 invocations" in (tmp_path / "run" / "report.html").read_text()

        tree.sha = "d" * 40
        assert _run(tmp_path, srv.base_url) == 0  # nothing left to run
        meta = json.loads((tmp_path / "run" / "run.json").read_text())
        assert meta["git"]["sha"] == "c" * 40  # still the code of the last invocation that ran pairs
        assert len(meta["invocations"]) == 2


def test_a_run_json_from_before_the_history_counts_as_one_invocation():
    prior = RunMeta.from_json({"git": {"sha": "e" * 40, "dirty": False}})
    now = GitState(sha="f" * 40, dirty=True)
    history = [e.to_json() for e in provenance.invocations(prior, now, "2026-12-01T00:00:00+00:00", 3)]
    assert history == [
        {"git": {"sha": "e" * 40, "dirty": False}, "started": None, "pairs_run": None},
        {"git": {"sha": "f" * 40, "dirty": True}, "started": "2026-12-01T00:00:00+00:00", "pairs_run": 3},
    ]


@pytest.mark.e2e
def test_shards_run_at_different_commits_say_so_once_merged(tmp_path, monkeypatch, capsys):
    from tests.support.tagged_run import answer, args, dataset

    data = dataset(tmp_path)
    tree = _Tree("1" * 40)
    monkeypatch.setattr(provenance, "_git", tree)
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        base = lambda name: args(tmp_path, srv.base_url, data, name) + ["judge=none"]  # noqa: E731
        assert main(base("s0") + ["dataset.shard=0/2"]) == 0
        tree.sha = "2" * 40
        assert main(base("s1") + ["dataset.shard=1/2"]) == 0
    assert main(["merge", str(tmp_path / "merged"), str(tmp_path / "s0"), str(tmp_path / "s1")]) == 0
    meta = json.loads((tmp_path / "merged" / "run.json").read_text())
    assert [(e["git"]["sha"][0], e["run_dir"]) for e in meta["invocations"]] == [
        ("1", str(tmp_path / "s0")),
        ("2", str(tmp_path / "s1")),
    ]
    assert "records written by 2 invocations at 2 commits" in (tmp_path / "merged" / "report.md").read_text()


@pytest.mark.e2e
def test_a_rescore_names_the_code_that_scored_beside_the_code_that_answered(tmp_path, monkeypatch):
    from tests.integration.test_judge_failures import judge_yes_no
    from tests.support.report_fixtures import meta, rec, write_run

    m = meta()
    m["git"] = {"sha": "9" * 40, "dirty": False}  # the answering run's code
    src = write_run(tmp_path / "src", [rec("q1", "summary", prediction="You went to Paris.")], m)
    tree = _Tree("8" * 40)
    monkeypatch.setattr(provenance, "_git", tree)
    model_calls = []

    def judge_moves_the_tree(req):
        model_calls.append(1)
        tree.sha = "7" * 40  # a commit lands while the rescore is judging
        return judge_yes_no(req)

    with FakeOpenAIServer(judge_moves_the_tree) as srv:
        argv = ["rescore", str(src), f"hydra.run.dir={tmp_path / 'out'}", "model=endpoint", "model.model=fake-judge"]
        argv += [f"model.base_url={srv.base_url}", "judge=longmemeval", "run.progress=false"]
        assert main([*argv, f"cache.path={tmp_path / 'cache.sqlite'}"]) == 0
    assert model_calls
    out_meta = json.loads((tmp_path / "out" / "run.json").read_text())
    assert out_meta["git"]["sha"] == "9" * 40  # the answers' code stays the run's git
    assert out_meta["rescore"]["git"]["sha"] == "8" * 40 and out_meta["rescore"]["started"]
    assert f"rescored at git: `{'8' * 40}`" in (tmp_path / "out" / "report.md").read_text()
