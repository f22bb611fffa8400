"""The moderate and minor probes of issue 20: each bad input is one clear error naming the culprit (exit 2, no
traceback), before any record is written where the input is known at start; nothing is silently accepted."""

from __future__ import annotations

import math

import pytest
import yaml

from commands.cli import main
from harness.llm.client import LLMClient
from harness.testing.fake_openai import FakeOpenAIServer, Reply, completion, scripted
from harness.testing.faults import FakeModel
from reports.render import build_report
from tests.support.bad_start import left_behind, one_error_line, run
from tests.support.dataset_rows import make_row
from tests.support.fake_run import endpoint_args
from tests.support.report_fixtures import meta, rec, standard_run, write_run

LME_DATE = "2023/05/20 (Sat) 02:21"


def dated_row(qid: str, *, question_date: str = LME_DATE, session_date: str = LME_DATE) -> dict:
    row = make_row(qid=qid)
    row.update(question_date=question_date, haystack_dates=[session_date])
    return row


@pytest.mark.e2e
@pytest.mark.parametrize(
    "override,bad,culprit",
    [
        (
            "+wire.question_template='On {question_date}: {question}'",
            {"question_date": ""},
            "question_id=q2: field 'question_date' is empty, but wire.question_template shows it",
        ),
        ("wire.session_header='[{date}]'", {"session_date": "yesterday"}, "question_id=q2: field 'haystack_dates[0]'"),
        ("wire.timestamps=session", {"session_date": "2023-05-20"}, "question_id=q2: field 'haystack_dates[0]'"),
    ],
)
def test_dates_a_run_needs_are_checked_at_load_before_any_record(
    tmp_path, write_dataset, capsys, override, bad, culprit
):
    path = write_dataset([dated_row("q1"), dated_row("q2", **bad)], "d.json")
    with FakeOpenAIServer(FakeModel()) as srv:
        code = run(
            tmp_path,
            f"dataset.path={path}",
            "dataset.sha256=null",
            "mode=[long_context]",
            override,
            base_url=srv.base_url,
        )
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and culprit in line and str(path) in line
    assert not [r for r in srv.requests if r.get("messages")]
    assert left_behind(tmp_path) == {"FAILED.txt"}


@pytest.mark.e2e
def test_an_empty_haystack_is_refused_at_load(tmp_path, write_dataset, capsys):
    row = make_row(qid="q2")
    row.update(haystack_sessions=[], haystack_session_ids=[], haystack_dates=[], answer_session_ids=[])
    path = write_dataset([make_row(qid="q1"), row], "d.json")
    with FakeOpenAIServer(FakeModel()) as srv:
        code = run(tmp_path, f"dataset.path={path}", "dataset.sha256=null", base_url=srv.base_url)
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and "question_id=q2" in line and "haystack_sessions' has no turns" in line
    assert left_behind(tmp_path) == {"FAILED.txt"}


@pytest.mark.parametrize(
    "kind,message",
    [
        ("directory", "not a file"),
        ("digits", "unsupported JSON"),
        ("deep", "nested too deeply"),
    ],
)
def test_data_info_on_unusable_input_is_one_error(tmp_path, capsys, kind, message):
    path = tmp_path / "d.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "digits":
        path.write_text('[{"question_id": "q1", "answer": ' + "9" * 5000 + "}]")
    else:
        path.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["data", "info", str(path)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert message in line and str(path) in line


@pytest.mark.parametrize(
    "content,message",
    [
        ("checks:\n  - {mode: summary, metric: em, baseline: " + "9" * 400 + ", abs: 0.0}\n", "is not a finite number"),
        ("checks:\n  - {mode: summary, metric: em, baseline: " + "9" * 5000 + ", abs: 0.0}\n", "unsupported YAML"),
        (
            "policy: [a]\nchecks:\n  - {mode: summary, metric: em, baseline: 0.5, abs: 0.0}\n",
            "policy ['a'] is not one of",
        ),
    ],
)
def test_gate_baselines_with_unusable_values_are_one_error(tmp_path, capsys, content, message):
    run_dir = standard_run(tmp_path / "run")
    base = tmp_path / "base.yaml"
    base.write_text(content)
    assert main(["gate", str(run_dir), "--baseline", str(base)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert message in line and str(base) in line


@pytest.mark.e2e
@pytest.mark.parametrize(
    "override,culprit",
    [
        ("+client.preflight_timeout_s=-1", "client.preflight_timeout_s must be a number > 0, got -1"),
        ("run.reference_latency=sometimes", "run.reference_latency must be auto, true or false, got 'sometimes'"),
        ("run.progress=maybe", "run.progress must be true or false, got 'maybe'"),
        ("+client.preflight=maybe", "client.preflight must be true or false, got 'maybe'"),
        ("cache.enabled=maybe", "cache.enabled must be true or false, got 'maybe'"),
    ],
)
def test_bad_settings_are_one_error_before_anything_runs(tmp_path, capsys, override, culprit):
    with FakeOpenAIServer(FakeModel()) as srv:
        assert run(tmp_path, override, base_url=srv.base_url) == 2
        assert not srv.requests
    assert culprit in one_error_line(capsys.readouterr().err)
    assert left_behind(tmp_path) == {"FAILED.txt"}


@pytest.mark.e2e
def test_a_sweep_with_a_bad_setting_is_one_clear_error_per_job(tmp_path, capsys):
    code = main(
        [
            "run",
            "-m",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            *endpoint_args("http://127.0.0.1:9/v1", tmp_path),
            "retrieval=bm25",
            "judge=none",
            "run.reference_latency=sometimes",
            "generation.max_tokens=5,6",
        ]
    )
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("lme-harness: error:")]
    assert code == 2 and "Traceback" not in err and len(lines) == 2
    assert all("run.reference_latency must be auto, true or false" in line for line in lines)


@pytest.mark.parametrize("value", ["nan", "inf", "soon"])
def test_an_unusable_retry_after_falls_back_to_backoff_and_is_retried(value):
    replies = [
        Reply(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": value}),
        completion("ok"),
    ]
    with FakeOpenAIServer(scripted(replies)) as srv:
        c = LLMClient(base_url=srv.base_url, model="m", backoff_base_s=0.01, backoff_max_s=0.02)
        assert c.chat([{"role": "user", "content": "hi"}]).content == "ok"
    assert len(srv.requests) == 2 and c.stats.retries == 1


def test_model_names_and_error_bodies_are_text_in_report_md(tmp_path):
    hostile = meta(model="<script>alert(1)</script>")
    hostile["model"]["name"] = "<img src=x onerror=alert(1)>"
    hostile["judge_model"] = {"name": "j`<b>x</b>`", "model": "[judge](http://evil.example/j)"}
    error = "LLMError: 500 ![pixel](http://evil.example/p.png) see [here](http://evil.example/x)"
    run_dir = write_run(tmp_path / "run", [rec("q1", "summary", status="failed", error=error)], hostile)
    md = (build_report(run_dir)["markdown"]).read_text()
    for raw in ("<script>", "<img", "<b>", "](http://evil.example", "![pixel]"):
        assert raw not in md
    assert "&lt;script&gt;" in md and "[here]\\(http" in md and "!\\[pixel]\\(http" in md


def test_export_onto_an_existing_file_is_refused_and_the_file_kept(tmp_path, capsys):
    run_dir = standard_run(tmp_path / "run")
    target = tmp_path / "answers.jsonl"
    target.write_text("mine\n")
    assert main(["export", str(run_dir), "--out", str(target)]) == 2
    assert str(target) in one_error_line(capsys.readouterr().err)
    assert target.read_text() == "mine\n"


@pytest.mark.e2e
def test_a_cache_path_under_a_file_is_one_error_before_any_record(tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    with FakeOpenAIServer(FakeModel()) as srv:
        assert run(tmp_path, f"cache.path={blocker / 'responses.sqlite'}", base_url=srv.base_url) == 2
        assert not srv.requests
    line = one_error_line(capsys.readouterr().err)
    assert str(blocker / "responses.sqlite") in line and "cache.path" in line
    assert left_behind(tmp_path) == {"FAILED.txt"}


def test_a_records_line_that_is_a_json_array_is_one_error(tmp_path, capsys):
    run_dir = write_run(tmp_path / "run", [rec("q1", "summary"), rec("q2", "summary")])
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    (run_dir / "records.jsonl").write_text("\n".join([lines[0], "[1, 2]", lines[1]]) + "\n")
    assert main(["report", str(run_dir)]) == 2
    assert "records.jsonl:2: corrupt record (a JSON list, not an object)" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("price", [-1.0, math.nan, math.inf, "1e999999"])
def test_unusable_prices_are_one_error(tmp_path, capsys, price):
    run_dir = standard_run(tmp_path / "run")
    table = tmp_path / "prices.yaml"
    table.write_text(yaml.safe_dump({"date": "2026-01-01", "models": {"gpt-4o-mini": {"input": price, "output": 0.6}}}))
    assert main(["report", str(run_dir), "--pricing", str(table)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert str(table) in line and "'gpt-4o-mini'" in line and ">= 0" in line


def test_compare_with_a_directory_that_holds_no_run_is_one_error(tmp_path, capsys):
    run_dir = standard_run(tmp_path / "run")
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    assert main(["compare", str(run_dir), str(empty), "--out", str(tmp_path / "cmp")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert str(empty) in line and "not a run directory" in line
    assert not (tmp_path / "cmp").exists()
