"""Bad inputs end in one clear error naming the culprit, a non-zero exit, and a clean run directory.

"Clean": a run that cannot start leaves nothing but a failure note (FAILED.txt) beside what Hydra itself
writes before the task starts (.hydra/ and its job log).
"""

import gzip
import json

import pytest

from commands.cli import main
from harness.testing.fake_openai import FakeOpenAIServer, Reply
from harness.testing.faults import FakeModel
from tests.support.bad_start import free_port, left_behind, one_error_line, run
from tests.support.dataset_rows import make_row

pytestmark = pytest.mark.e2e


def data_file(tmp_path, write_dataset, kind: str):
    good = json.dumps([make_row()]).encode()
    if kind == "truncated_gzip":
        return write_dataset(None, "d.json.gz", raw=gzip.compress(good)[:40])
    if kind == "corrupt_json":
        return write_dataset(None, "d.json", raw=good[:-7])
    if kind == "not_a_list":
        return write_dataset(None, "d.json", raw=b'{"question_id": "q1"}')
    if kind == "missing_field":
        row = make_row()
        del row["question"]
        return write_dataset([row], "d.json")
    if kind == "wrong_type":
        return write_dataset([make_row(sessions=[["not a turn"]])], "d.json")
    if kind == "bad_role":
        return write_dataset([make_row(sessions=[[{"role": "robot", "content": "beep"}]])], "d.json")
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind,message",
    [
        ("truncated_gzip", "corrupt gzip data"),
        ("corrupt_json", "invalid JSON"),
        ("not_a_list", "expected a JSON array"),
        ("missing_field", "missing field 'question'"),
        ("wrong_type", "haystack_sessions[0][0]"),
        ("bad_role", "'robot'"),
    ],
)
def test_bad_data_files(tmp_path, write_dataset, capsys, kind, message):
    path = data_file(tmp_path, write_dataset, kind)
    with FakeOpenAIServer(FakeModel()) as srv:
        code = run(tmp_path, f"dataset.path={path}", "dataset.sha256=null", base_url=srv.base_url)
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and message in line and str(path) in line
    assert not srv.requests
    assert left_behind(tmp_path) == {"FAILED.txt"}
    assert message in (tmp_path / "run" / "FAILED.txt").read_text()


def test_dataset_checksum_mismatch(tmp_path, write_dataset, capsys):
    path = write_dataset([make_row()], "d.json")
    code = run(tmp_path, f"dataset.path={path}", "dataset.sha256=" + "0" * 64)
    assert code == 2 and "sha256 mismatch" in one_error_line(capsys.readouterr().err)
    assert left_behind(tmp_path) == {"FAILED.txt"}


@pytest.mark.parametrize(
    "override,culprit",
    [
        ("mode=[long_context,bogus]", "mode/bogus"),
        ("model=bogus", "model/bogus"),
        ("judge=bogus", "judge/bogus"),
        ("prompt=bogus", "prompt/bogus"),
        ("dataset=bogus", "dataset/bogus"),
        ("retrieval=bogus", "retrieval/bogus"),
        ("run.bogus=1", "bogus"),
    ],
)
def test_unknown_config_values_are_refused_before_anything_is_written(tmp_path, capsys, override, culprit):
    code = main(["run", f"hydra.run.dir={tmp_path / 'run'}", override])
    err = capsys.readouterr().err
    assert code != 0 and culprit in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "override,culprit",
    [
        ("run.concurrency=0", "run.concurrency must be an integer >= 1, got 0"),
        ("client.concurrency=abc", "client.concurrency must be an integer >= 1, got 'abc'"),
        ("client.timeout_s=-1", "client.timeout_s must be a number"),
        ("client.max_retries=1.5", "client.max_retries must be an integer"),
        ("mode=[]", "no mode selected"),
    ],
)
def test_bad_run_settings_name_their_key(tmp_path, capsys, override, culprit):
    assert run(tmp_path, override) == 2
    assert culprit in one_error_line(capsys.readouterr().err)
    assert left_behind(tmp_path) == {"FAILED.txt"}


def test_unreachable_endpoint_is_one_error_not_a_failed_record_per_case(tmp_path, capsys):
    url = f"http://127.0.0.1:{free_port()}/v1"
    assert run(tmp_path, "client.timeout_s=2", base_url=url) == 2
    line = one_error_line(capsys.readouterr().err)
    assert url in line and "unreachable" in line
    assert left_behind(tmp_path) == {"FAILED.txt"}
    assert "unreachable" in (tmp_path / "run" / "FAILED.txt").read_text()


def test_a_failed_start_does_not_block_the_next_one(tmp_path, capsys):
    assert run(tmp_path, "dataset.limit=1", "mode=[long_context]", base_url=f"http://127.0.0.1:{free_port()}/v1") == 2
    with FakeOpenAIServer(FakeModel()) as srv:
        assert run(tmp_path, "dataset.limit=1", "mode=[long_context]", base_url=srv.base_url) == 0
    assert not (tmp_path / "run" / "FAILED.txt").exists()
    assert (tmp_path / "run" / "records.jsonl").exists()


def test_hosted_endpoint_without_an_api_key(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = main(
        [
            "run",
            f"hydra.run.dir={tmp_path / 'run'}",
            "model=openai",
            "run.progress=false",
            "judge=none",
            "retrieval=bm25",
            f"cache.path={tmp_path / 'cache.sqlite'}",
        ]
    )
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and "OPENAI_API_KEY" in line and "'openai'" in line
    assert left_behind(tmp_path) == {"FAILED.txt"}


def test_a_rejected_api_key_is_one_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LME_HARNESS_API_KEY", "sk-wrong-key-0000")
    unauthorized = Reply(status=401, body={"error": {"message": "Incorrect API key provided: sk-wrong-key-0000"}})
    with FakeOpenAIServer(lambda req: unauthorized, on_get=lambda path: unauthorized) as srv:
        assert run(tmp_path, base_url=srv.base_url) == 2
    err = capsys.readouterr().err
    assert "rejected the API key" in one_error_line(err) and "sk-wrong-key-0000" not in err
    assert left_behind(tmp_path) == {"FAILED.txt"}


def test_an_api_key_on_the_command_line_is_refused(tmp_path, capsys):
    assert run(tmp_path, "model.api_key=sk-literal-secret-123") == 2
    err = capsys.readouterr().err
    assert "model.api_key=***" in one_error_line(err) and "sk-literal-secret-123" not in err
    assert not (tmp_path / "run").exists()


def test_an_endpoint_without_a_models_route_still_runs(tmp_path):
    with FakeOpenAIServer(FakeModel(), on_get=lambda path: Reply(status=404, body={"error": {"message": "no"}})) as srv:
        assert run(tmp_path, "dataset.limit=1", "mode=[long_context]", base_url=srv.base_url) == 0


def test_corrupt_records_in_the_middle_are_an_error_not_a_silent_drop(tmp_path, capsys):
    with FakeOpenAIServer(FakeModel()) as srv:
        assert run(tmp_path, "dataset.limit=2", "mode=[long_context]", base_url=srv.base_url) == 0
        records = tmp_path / "run" / "records.jsonl"
        lines = records.read_text().splitlines()
        records.write_text("\n".join([lines[0][:20], *lines[1:]]) + "\n")
        before = len(srv.requests)
        assert run(tmp_path, "dataset.limit=2", "mode=[long_context]", base_url=srv.base_url) == 2
        assert len(srv.requests) == before
    assert "records.jsonl:1: corrupt record" in one_error_line(capsys.readouterr().err)
