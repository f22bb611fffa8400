"""Report and CSV hygiene, safe run directory names, and the run/rescore paths a user takes by default."""

import csv
import json

import pytest

from commands.cli import main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer, Reply
from harness.testing.faults import FakeModel, request_kind
from tests.support.dataset_rows import make_row
from tests.support.fake_run import endpoint_args

FORMULA_LEAD = ("=", "+", "-", "@", "\t", "\r")


def default_run(base_url, tmp_path, *overrides):
    """A run in its default directory (runs/<run.name>/<overrides>, relative to the cwd)."""
    return main(
        [
            "run",
            *endpoint_args(base_url, tmp_path),
            "retrieval=bm25",
            "client.max_retries=0",
            *overrides,
        ]
    )


def run_dirs(tmp_path):
    return [p.parent for p in tmp_path.glob("runs/**/records.jsonl") if "rescore" not in p.parts]


@pytest.mark.e2e
def test_report_md_shows_html_from_errors_and_ids_as_text(tmp_path, monkeypatch, write_dataset):
    monkeypatch.chdir(tmp_path)
    evil_id = "q<img src=x onerror=alert(1)>"
    data = write_dataset([make_row(qid=evil_id)], "evil.json")
    model = FakeModel()

    def html_errors(req):
        if request_kind(req) == "answer":
            return Reply(status=500, body={"error": {"message": "<script>alert('x')</script> | <b>down</b>"}})
        return model(req)

    with FakeOpenAIServer(html_errors) as srv:
        assert (
            default_run(
                srv.base_url,
                tmp_path,
                f"dataset.path={data}",
                "dataset.sha256=null",
                "mode=[long_context]",
                "judge=none",
            )
            == 3
        )
    [run] = run_dirs(tmp_path)
    md = (run / "report.md").read_text()
    assert "<script" not in md and "<img" not in md and "<b>" not in md
    assert "&lt;script&gt;" in md and "q&lt;img src=x onerror=alert(1)&gt;" in md  # shown, as text


@pytest.mark.e2e
def test_csv_cells_cannot_start_a_formula(tmp_path, monkeypatch, write_dataset):
    monkeypatch.chdir(tmp_path)
    rows = [
        make_row(qid='=HYPERLINK("http://x","y")', question="+1+1 where did I go?", answer="@SUM(A1)"),
        make_row(qid="-2+3", question="\tWhere?", answer="\rParis"),
    ]
    data = write_dataset(rows, "formulas.json")
    with FakeOpenAIServer(FakeModel(answer=lambda req: "=cmd|' /C calc'!A0")) as srv:
        assert (
            default_run(
                srv.base_url,
                tmp_path,
                f"dataset.path={data}",
                "dataset.sha256=null",
                "mode=[long_context]",
                "judge=none",
            )
            == 0
        )
    [run] = run_dirs(tmp_path)
    for name in ("cases.csv", "summary.csv", "summary_ci.csv"):
        with open(run / name, newline="") as f:
            cells = [c for row in csv.reader(f) for c in row]
        assert not [c for c in cells if c.startswith(FORMULA_LEAD)], name
    with open(run / "cases.csv", newline="") as f:
        cases = list(csv.DictReader(f))
    assert {c["question_id"] for c in cases} == {'\'=HYPERLINK("http://x","y")', "'-2+3"}


@pytest.mark.e2e
def test_run_name_cannot_leave_runs(tmp_path, monkeypatch, capsys):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    for name in ("../../x", "x/../../y", "..", "a\\b"):
        with FakeOpenAIServer(FakeModel()) as srv:
            assert default_run(srv.base_url, tmp_path, f"run.name={name}", "dataset.limit=1") == 2
        assert "run.name" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b"]  # nothing written anywhere


@pytest.mark.e2e
def test_run_name_from_a_config_file_is_checked_too(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    conf = tmp_path / "conf" / "run"
    conf.mkdir(parents=True)
    (conf / "evil.yaml").write_text("# @package _global_\nrun:\n  name: ../../escaped\n")
    with FakeOpenAIServer(FakeModel()) as srv:
        code = default_run(
            srv.base_url, tmp_path, f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "+run=evil", "dataset.limit=1"
        )
    assert code != 0 and "run.name" in capsys.readouterr().err
    assert not (tmp_path.parent / "escaped").exists() and not (tmp_path / "escaped").exists()


@pytest.mark.e2e
def test_a_path_valued_override_names_one_directory(tmp_path, monkeypatch, oracle_path):
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(FakeModel()) as srv:
        assert (
            default_run(
                srv.base_url,
                tmp_path,
                f"dataset.path={oracle_path}",
                "dataset.limit=1",
                "mode=[long_context]",
                "judge=none",
            )
            == 0
        )
    [run] = run_dirs(tmp_path)
    assert run.parent == tmp_path / "runs" / "quickstart"  # one directory, not one per path component
    assert "dataset.path=" + str(oracle_path).replace("/", "%2F") in run.name


@pytest.mark.e2e
def test_rescore_accepts_a_default_run_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(FakeModel()) as srv:
        assert default_run(srv.base_url, tmp_path, "dataset.limit=1", "mode=[long_context]", "judge=none") == 0
        [run] = run_dirs(tmp_path)
        assert "=" in run.name and "," in run.name
        assert main(["rescore", str(run.relative_to(tmp_path)), "judge=none", "run.progress=false"]) == 0
    [out] = [p.parent for p in (run / "rescore").glob("**/records.jsonl")]
    assert [r["rescored_from"] for r in load_records(out / "records.jsonl")] == [str(run.relative_to(tmp_path))]


@pytest.mark.e2e
def test_a_restarted_endpoint_on_a_new_port_resumes_its_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(FakeModel()) as first:
        assert default_run(first.base_url, tmp_path, "dataset.limit=1", "mode=[long_context]", "judge=none") == 0
    with FakeOpenAIServer(FakeModel()) as second:
        assert second.base_url != first.base_url
        assert default_run(second.base_url, tmp_path, "dataset.limit=1", "mode=[long_context]", "judge=none") == 0
    [run] = run_dirs(tmp_path)
    assert len(load_records(run / "records.jsonl")) == 1  # resumed: nothing ran again
    with FakeOpenAIServer(FakeModel()) as third:  # another model is another result: refused
        assert (
            default_run(
                third.base_url,
                tmp_path,
                "dataset.limit=1",
                "mode=[long_context]",
                "judge=none",
                "model.model=other-model",
                f"hydra.run.dir='{run}'",
            )
            == 2
        )


def test_a_run_directory_of_the_previous_release_still_resumes(tmp_path, monkeypatch):
    """Fingerprints written before endpoint URLs left the identity are accepted (nothing computed is lost)."""
    from hydra import compose, initialize_config_dir

    from commands.cli import CONFIG_DIR
    from runners.replay import RunConfigError, check_fingerprint, fingerprint
    from runners.rundir import register_resolvers

    register_resolvers()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(
            config_name="config", overrides=["model=endpoint", "model.base_url=http://127.0.0.1:1/v1", "model.model=m"]
        )
    (tmp_path / "records.jsonl").write_text("")
    (tmp_path / "fingerprint.json").write_text(json.dumps({"fingerprint": fingerprint(cfg, version=1)}))
    check_fingerprint(tmp_path, fingerprint(cfg), (fingerprint(cfg, version=1),))
    (tmp_path / "fingerprint.json").write_text(json.dumps({"fingerprint": "0" * 16}))
    try:
        check_fingerprint(tmp_path, fingerprint(cfg), (fingerprint(cfg, version=1),))
    except RunConfigError:
        pass
    else:
        raise AssertionError("a different configuration was accepted")
