"""A run directory holds one configuration and one scoring (issue 20, probes 9-12): `merge` never writes onto an
existing run, a merged directory refuses a run of another configuration, `merge` names the (case, mode) pairs no
shard recorded, and `rescore` into a directory scored otherwise is refused."""

import json
import shutil

import pytest

from commands.cli import main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer, completion
from harness.testing.faults import FakeModel
from tests.support.bad_start import one_error_line
from tests.support.report_fixtures import rec, write_run
from tests.support.tagged_run import answer, args, dataset

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two finished shards of one run (and the serial run), on a fake endpoint."""
    tmp = tmp_path_factory.mktemp("shards")
    data = dataset(tmp)
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        for name, extra in (("s0", ["dataset.shard=0/2"]), ("s1", ["dataset.shard=1/2"]), ("serial", [])):
            assert main(cli(tmp, srv.base_url, data, name) + extra) == 0
    return tmp, data


def cli(tmp, base_url, data, name):
    return args(tmp, base_url, data, name) + ["judge=none", "mode=[long_context]"]


def copy_shards(shards, tmp_path):
    src, data = shards
    for name in ("s0", "s1", "serial"):
        shutil.copytree(src / name, tmp_path / name)
    return data


def test_merge_onto_an_existing_run_is_refused_and_leaves_it_as_it_was(shards, tmp_path, capsys):
    copy_shards(shards, tmp_path)
    before = {p.name: p.read_bytes() for p in (tmp_path / "serial").iterdir() if p.is_file()}
    code = main(["merge", str(tmp_path / "serial"), str(tmp_path / "s0"), str(tmp_path / "s1")])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and str(tmp_path / "serial") in line and "already holds files" in line
    assert {p.name: p.read_bytes() for p in (tmp_path / "serial").iterdir() if p.is_file()} == before


def test_a_merged_directory_refuses_a_run_of_another_configuration(shards, tmp_path, capsys):
    data = copy_shards(shards, tmp_path)
    assert main(["merge", str(tmp_path / "merged"), str(tmp_path / "s0"), str(tmp_path / "s1")]) == 0
    merged = tmp_path / "merged"
    fp = json.loads((merged / "fingerprint.json").read_text())["fingerprint"]
    assert fp == json.loads((tmp_path / "serial" / "fingerprint.json").read_text())["fingerprint"]
    records, meta = (merged / "records.jsonl").read_bytes(), (merged / "run.json").read_bytes()
    capsys.readouterr()
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        assert main(cli(tmp_path, srv.base_url, data, "merged") + ["generation.max_tokens=7"]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "different configuration" in line and str(merged) in line
        assert (merged / "records.jsonl").read_bytes() == records and (merged / "run.json").read_bytes() == meta
        assert not [r for r in srv.requests if r.get("messages")]
        assert main(cli(tmp_path, srv.base_url, data, "merged")) == 0  # the merged configuration resumes: all done
        assert not [r for r in srv.requests if r.get("messages")]
    assert (merged / "records.jsonl").read_bytes() == records


def test_merge_names_the_pairs_no_shard_recorded_and_a_partial_merge_says_so(shards, tmp_path, capsys):
    copy_shards(shards, tmp_path)
    path = tmp_path / "s1" / "records.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    dropped = json.loads(lines[-1])
    path.write_text("".join(lines[:-1]))  # the shard stopped before its last pair
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "m"), str(tmp_path / "s0"), str(tmp_path / "s1")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "1 (case, mode) pair(s)" in line and f"({dropped['question_id']}, {dropped['mode']})" in line
    assert "--allow-partial" in line and not (tmp_path / "m").exists()
    assert main(["merge", str(tmp_path / "m"), str(tmp_path / "s0"), str(tmp_path / "s1"), "--allow-partial"]) == 0
    assert json.loads((tmp_path / "m" / "run.json").read_text())["merge_missing"] == [
        [dropped["question_id"], dropped["mode"]]
    ]
    assert "PARTIAL merge: 1 (case, mode) pair(s)" in (tmp_path / "m" / "report.md").read_text()


@pytest.mark.parametrize("damaged", ["run.json", ".hydra/config.yaml"])
def test_merge_of_a_shard_with_a_corrupt_file_is_one_error(shards, tmp_path, capsys, damaged):
    copy_shards(shards, tmp_path)
    (tmp_path / "s1" / damaged).write_text('{"a": [1, 2' if damaged == "run.json" else "a: [1\nb: {")
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "m"), str(tmp_path / "s0"), str(tmp_path / "s1")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert str(tmp_path / "s1" / damaged) in line
    assert not (tmp_path / "m").exists()


def test_a_corrupt_fingerprint_is_one_error_and_nothing_is_written(shards, tmp_path, capsys):
    data = copy_shards(shards, tmp_path)
    (tmp_path / "serial" / "fingerprint.json").write_text("[1, 2")
    records = (tmp_path / "serial" / "records.jsonl").read_bytes()
    capsys.readouterr()
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        assert main(cli(tmp_path, srv.base_url, data, "serial")) == 2
    line = one_error_line(capsys.readouterr().err)
    assert str(tmp_path / "serial" / "fingerprint.json") in line and "corrupt" in line
    assert (tmp_path / "serial" / "records.jsonl").read_bytes() == records


def judge(req):
    prompt = req["messages"][-1]["content"]
    return completion("yes" if "Paris" in prompt else "no", model="fake-judge")


def rescore(src, out, base_url, *extra):
    return main(
        [
            "rescore",
            str(src),
            f"hydra.run.dir={out}",
            "model=endpoint",
            f"model.base_url={base_url}",
            "model.model=fake-judge",
            "run.progress=false",
            f"cache.path={out.parent / 'cache.sqlite'}",
            *extra,
        ]
    )


def test_rescore_into_a_directory_scored_by_another_judge_is_refused(tmp_path, capsys):
    src = write_run(tmp_path / "src", [rec("q1", "summary", prediction="You went to Paris.")])
    out = tmp_path / "out"
    with FakeOpenAIServer(judge) as srv:
        assert rescore(src, out, srv.base_url, "judge=trpc") == 0
        records = (out / "records.jsonl").read_bytes()
        n = len(srv.requests)
        capsys.readouterr()
        assert rescore(src, out, srv.base_url, "judge=longmemeval") == 2
        line = one_error_line(capsys.readouterr().err)
        assert str(out) in line and "different configuration" in line
        assert len(srv.requests) == n and (out / "records.jsonl").read_bytes() == records
        assert "LongMemEval" not in json.dumps(json.loads((out / "run.json").read_text())["config"]["judge"])
        assert rescore(src, out, srv.base_url, "judge=trpc") == 0  # the same scoring resumes
    assert len(load_records(out / "records.jsonl")) == 1


def test_rescore_into_a_run_directory_is_refused(shards, tmp_path, capsys):
    copy_shards(shards, tmp_path)
    src = write_run(tmp_path / "src", [rec("q1", "summary", prediction="You went to Paris.")])
    records = (tmp_path / "serial" / "records.jsonl").read_bytes()
    with FakeOpenAIServer(judge) as srv:
        assert rescore(src, tmp_path / "serial", srv.base_url, "judge=longmemeval") == 2
        assert not srv.requests
    assert "different configuration" in one_error_line(capsys.readouterr().err)
    assert (tmp_path / "serial" / "records.jsonl").read_bytes() == records


@pytest.mark.parametrize(
    "override,culprit",
    [
        ("run.concurrency=0", "run.concurrency must be an integer >= 1, got 0"),
        ("client.timeout_s=-5", "client.timeout_s must be a number > 0, got -5"),
        ("judge.params.max_tokens=-3", "judge.params.max_tokens must be an integer >= 1, got -3"),
    ],
)
def test_rescore_validates_settings_like_a_run(tmp_path, capsys, override, culprit):
    src = write_run(tmp_path / "src", [rec("q1", "summary", prediction="You went to Paris.")])
    with FakeOpenAIServer(judge) as srv:
        assert rescore(src, tmp_path / "out", srv.base_url, "judge=longmemeval", override) == 2
        assert not srv.requests
    assert culprit in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "out" / "records.jsonl").exists()


def test_a_run_into_a_rescore_directory_is_refused(shards, tmp_path, capsys):
    data = copy_shards(shards, tmp_path)
    src = write_run(tmp_path / "src", [rec("q1", "summary", prediction="You went to Paris.")])
    out = tmp_path / "out"
    with FakeOpenAIServer(judge) as srv:
        assert rescore(src, out, srv.base_url, "judge=longmemeval") == 0
    records = (out / "records.jsonl").read_bytes()
    capsys.readouterr()
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        assert main(cli(tmp_path, srv.base_url, data, "out")) == 2
        assert not [r for r in srv.requests if r.get("messages")]
    assert "different configuration" in one_error_line(capsys.readouterr().err)
    assert (out / "records.jsonl").read_bytes() == records


# ---------------------------------------------------------------- issue 38 item 4: rescored shards
# A rescore directory's snapshot is its source's configuration with its scoring (commands/rescore.py): merge
# compares what produced the answers, so rescores of different runs are refused and rescores of one run's shards
# merge whole.


def test_rescored_shards_of_different_runs_are_refused_naming_the_difference(tmp_path, capsys):
    data = dataset(tmp_path)
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        assert main(cli(tmp_path, srv.base_url, data, "a0") + ["dataset.shard=0/2"]) == 0
        other = ["dataset.shard=1/2", "model.model=other-model", "generation.temperature=0.9"]
        assert main(cli(tmp_path, srv.base_url, data, "b1") + other) == 0
    with FakeOpenAIServer(judge) as srv:
        for name in ("a0", "b1"):
            assert rescore(tmp_path / name, tmp_path / f"{name}-lme", srv.base_url, "judge=longmemeval") == 0
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "m"), str(tmp_path / "a0-lme"), str(tmp_path / "b1-lme")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert str(tmp_path / "b1-lme") in line and "model.model" in line and "generation.temperature" in line
    assert "other-model" not in line  # keys named, never values
    assert not (tmp_path / "m").exists()


def test_rescored_shards_of_one_run_merge_whole(shards, tmp_path, capsys):
    copy_shards(shards, tmp_path)
    with FakeOpenAIServer(judge) as srv:
        for name in ("s0", "s1"):
            assert rescore(tmp_path / name, tmp_path / f"{name}-lme", srv.base_url, "judge=longmemeval") == 0
    assert main(["merge", str(tmp_path / "m"), str(tmp_path / "s0-lme"), str(tmp_path / "s1-lme")]) == 0
    merged = tmp_path / "m"
    meta = json.loads((merged / "run.json").read_text())
    assert "merge_missing" not in meta and "PARTIAL" not in (merged / "report.md").read_text()
    serial = {(r["question_id"], r["mode"]) for r in load_records(tmp_path / "serial" / "records.jsonl")}
    assert {(r["question_id"], r["mode"]) for r in load_records(merged / "records.jsonl")} == serial
    assert all("lme_acc" in r["metrics"] for r in load_records(merged / "records.jsonl"))
    # a rescore of one shard merged with a shard it did not rescore: another scoring, refused by name
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "m2"), str(tmp_path / "s0-lme"), str(tmp_path / "s1")]) == 2
    assert "judge" in one_error_line(capsys.readouterr().err)
