"""Typed run metadata (harness/run_meta.py): run.json files written by the harness and older ones read back to the
same bytes, typed; a file of a later version or with a damaged key is refused with one error naming it."""

from __future__ import annotations

import json

import pytest

from harness.run_meta import (
    GitState,
    Host,
    Invocation,
    ModelRef,
    RescoreInfo,
    RunMeta,
    RunMetaError,
    read_run_meta,
)
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from tests.support.bad_start import run
from tests.support.paths import REPO

# run.json as releases before the invocation history, the host and the metric declarations wrote it
OLD_SHAPE = {
    "dataset": {"source": "oracle.json", "sha256": "ab" * 32},
    "git": {"sha": "e" * 40, "dirty": False},
    "python": "3.11.7",
    "platform": "Linux",
    "packages": {"openai": "1.0", "bm25s": None},
    "model": {"name": "endpoint", "model": "m"},
    "config": {"mode": {"long_context": {}}},
    "state": "finished",
    "fingerprint": "f" * 16,
    "records": "/tmp/x/records.jsonl",
    "llm_stats": {"calls": 3},
    "a_key_of_another_version": [1, 2],
}


@pytest.mark.e2e
def test_a_run_json_written_by_a_run_reads_back_typed_and_to_the_same_bytes(tmp_path):
    with FakeOpenAIServer(FakeModel()) as srv:
        assert run(tmp_path, "mode=[long_context]", "dataset.limit=2", "run.concurrency=1", base_url=srv.base_url) == 0
    text = (tmp_path / "run" / "run.json").read_text()
    meta = read_run_meta(tmp_path / "run")
    assert meta.dumps() == text
    assert meta.schema_version == 1 and not meta.extra and not meta.empty
    assert meta.state == "finished" and isinstance(meta.git, GitState) and isinstance(meta.host, Host)
    assert isinstance(meta.model, ModelRef) and meta.model.model == "fake-model"
    assert meta.judge_model is None and "judge_model" in json.loads(text)  # written as null: the answer model judges
    assert [type(e) for e in meta.history()] == [Invocation] and meta.history()[0].pairs_run == 2
    assert meta.metrics and {m["name"] for m in meta.metrics} >= {"em"}


def test_an_old_shaped_run_json_reads_as_version_1_unchanged():
    meta = RunMeta.from_json(OLD_SHAPE)
    assert meta.to_json() == OLD_SHAPE and list(meta.to_json()) == list(OLD_SHAPE)
    assert meta.schema_version == 1
    assert meta.host is None and meta.metrics is None and meta.invocations is None and meta.judge_model is None
    assert meta.extra == {"a_key_of_another_version": [1, 2]}
    # before the history, the run's git counts as one invocation of unknown start and size
    assert [e.to_json() for e in meta.history()] == [{"git": OLD_SHAPE["git"], "started": None, "pairs_run": None}]
    assert meta.dataset_sha256 == "ab" * 32 and meta.config_at("mode", "long_context") == {}
    assert meta.config_at("mode", "summary", "x") is None


def test_keys_assigned_later_follow_those_read_as_in_a_dict():
    meta = RunMeta.from_json(OLD_SHAPE)
    meta.judge_model = None  # assigned: written, even null
    meta.fingerprint = "g" * 16  # already held: stays in place
    meta.rescore = RescoreInfo(source="/src", source_fingerprint=None, elapsed_s=1.5, judge_stats={})
    meta.drop("llm_stats")
    expected = dict(OLD_SHAPE, fingerprint="g" * 16)
    del expected["llm_stats"]
    expected.update(
        judge_model=None,
        rescore={"source": "/src", "source_fingerprint": None, "elapsed_s": 1.5, "judge_stats": {}},
    )
    assert list(meta.to_json()) == list(expected) and meta.to_json() == expected


def test_a_new_run_meta_writes_its_fields_in_the_order_a_run_writes_them():
    meta = RunMeta(
        dataset={"sha256": "x"},
        git=GitState(sha=None, dirty=None),
        config={},
        host=Host(cpu_model=None, cores=2),
        state="running",
    )
    assert meta.to_json() == {
        "dataset": {"sha256": "x"},
        "git": {"sha": None, "dirty": None},
        "judge_model": None,
        "config": {},
        "host": {"cpu_model": None, "cpu_id": None, "cpu_flags": None, "cores": 2, "cores_usable": None},
        "state": "running",
    }
    assert list(meta.to_json()) == ["dataset", "git", "judge_model", "config", "host", "state"]
    assert RunMeta.from_json({}).empty and RunMeta.from_json({}).to_json() == {}


def test_a_later_version_or_a_damaged_key_is_one_error_naming_it(tmp_path):
    with pytest.raises(RunMetaError, match=r"run.json: schema_version 2 .*newer harness"):
        RunMeta.from_json({**OLD_SHAPE, "schema_version": 2})
    (tmp_path / "run.json").write_text(json.dumps({"host": "a string"}))
    with pytest.raises(RunMetaError, match=r"run.json 'host': a JSON str, not an object"):
        read_run_meta(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"invocations": [{"git": 3}]}))
    with pytest.raises(RunMetaError, match=r"'invocations'\[0\] 'git': a JSON int"):
        read_run_meta(tmp_path)
    (tmp_path / "run.json").write_text("[1]")
    with pytest.raises(RunMetaError, match=r"run.json: corrupt \(a JSON list"):
        read_run_meta(tmp_path)
    assert read_run_meta(tmp_path / "absent").empty


def test_no_module_but_run_meta_opens_run_json_by_name():
    """Readers and writers go through harness/run_meta.py: no other package module names the file (a path built
    with "run.json" is where string keys would be read again)."""
    import ast

    root = REPO
    named = []
    for package in ("harness", "runners", "commands", "reports"):
        for path in sorted((root / package).rglob("*.py")):
            if path == root / "harness" / "run_meta.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and node.value == "run.json":
                    named.append(f"{path.relative_to(root)}:{node.lineno}")
    assert named == []
