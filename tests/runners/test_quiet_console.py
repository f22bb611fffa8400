"""A failed (case, mode) is one line on the console; its traceback goes to RUN_DIR/cli.log. The report lists
identical errors once, with a count and the (question_id, mode) pairs."""

from __future__ import annotations

import json
import logging

import pandas as pd
import pytest

from commands.cli import EXIT_FAILED_CASES, main
from harness.testing.fake_openai import FakeOpenAIServer, Reply, completion
from reports.failures import group_failures
from reports.render import build_report
from runners.console import quiet_console
from tests.support.dataset_rows import make_row
from tests.support.report_fixtures import rec, write_run


@pytest.mark.e2e
def test_a_failed_case_is_one_console_line_and_its_traceback_lands_in_cli_log(tmp_path, capsys):
    def responder(req):
        if "expert evaluator" in json.dumps(req["messages"]):
            return completion('{"correct": false, "confidence": 0.9, "reason": "different"}')
        return Reply(status=400, body={"error": {"message": "context length exceeded\n" + "x" * 2000}})

    data = tmp_path / "data.json"
    data.write_text(json.dumps([make_row(qid="q1"), make_row(qid="q2")]))
    with FakeOpenAIServer(responder) as srv:
        code = main(
            [
                "run",
                f"dataset.path={data}",
                "dataset.sha256=null",
                f"hydra.run.dir={tmp_path / 'run'}",
                "model=endpoint",
                f"model.base_url={srv.base_url}",
                "model.model=fake-model",
                "cache.enabled=false",
                "run.progress=false",
                "dataset.limit=2",
                "mode=[long_context]",
                "run.max_consecutive_failures=0",
                "retrieval=bm25",
                "judge=none",
            ]
        )
    assert code == EXIT_FAILED_CASES
    out = capsys.readouterr()
    console = out.out + out.err
    assert "Traceback" not in console
    lines = [ln for ln in console.splitlines() if " / long_context failed: LLMError: " in ln]
    assert len(lines) == 2, console[-3000:]
    assert all("context length exceeded" in ln and len(ln) < 600 for ln in lines)
    assert all(f"traceback: {tmp_path / 'run' / 'cli.log'}" in ln for ln in lines)
    log = (tmp_path / "run" / "cli.log").read_text()
    assert log.count(" / long_context failed: LLMError: ") == 2
    assert log.count("Traceback (most recent call last)") >= 2 and 'File "' in log
    assert "x" * 2000 in log  # the whole message, untruncated, is in the file


def test_quiet_console_adds_the_run_log_when_none_is_configured_and_restores_the_console(tmp_path, capsys):
    logger = logging.getLogger("test_quiet_console.isolated")
    logger.propagate = False
    console = logging.StreamHandler()  # stderr, as captured now
    logger.addHandler(console)
    try:
        with quiet_console(tmp_path, logger) as path:
            try:
                raise ValueError("bad\nvalue")
            except ValueError:
                logger.exception("q1 / summary failed")
        logger.error("after")
    finally:
        logger.removeHandler(console)
    err = capsys.readouterr().err
    assert "Traceback" not in err.split("after")[0]
    assert err.splitlines()[0] == f"q1 / summary failed (traceback: {path})"
    assert err.splitlines()[1] == "after"
    assert path == (tmp_path / "cli.log").resolve()
    text = path.read_text()
    assert "Traceback (most recent call last)" in text and "ValueError: bad" in text
    assert not any(isinstance(h, logging.FileHandler) for h in logger.handlers)


def test_the_report_has_one_row_per_distinct_error(tmp_path):
    dead = "LLMError: http://127.0.0.1:1/v1 model=m: APIConnectionError: Connection error."
    records = [rec(f"q{i}", "summary", status="failed", error=dead) for i in range(9)]
    records += [rec("q9", "summary", status="failed", error="KeyError: 'x'"), rec("q0", "long_context")]
    run_dir = write_run(tmp_path / "run", records)
    md = (build_report(run_dir)["markdown"]).read_text()
    section = md.split("## Failed or errored cases")[1]
    assert section.count(dead) == 1
    assert "10 (case, mode) pairs, 2 distinct errors" in section
    row = next(ln for ln in section.splitlines() if dead in ln)
    assert row.startswith("| 9 | failed |") and "q0 / summary" in row and "q8 / summary" in row
    assert any(ln.startswith("| 1 | failed | KeyError: 'x' | q9 / summary |") for ln in section.splitlines())
    html = (run_dir / "report.html").read_text()
    table = html.split('id="failures"')[1].split("</table>")[0]
    assert table.count("APIConnectionError") == 1 and table.count("<tr>") == 3  # header + 2 groups


def test_group_failures_orders_by_count_and_keeps_ok_rows_with_an_error():
    df = pd.DataFrame(
        [
            {"question_id": "q1", "mode": "a", "status": "failed", "error": "E: one"},
            {"question_id": "q2", "mode": "a", "status": "ok", "error": "empty answer  from the model"},
            {"question_id": "q3", "mode": "b", "status": "ok", "error": "empty answer from\nthe model"},
            {"question_id": "q4", "mode": "b", "status": "ok", "error": None},
        ]
    )
    groups = group_failures(df)
    assert [(g.count, g.status, g.error) for g in groups] == [
        (2, "ok", "empty answer from the model"),
        (1, "failed", "E: one"),
    ]
    assert groups[0].pairs == [("q2", "a"), ("q3", "b")]
    many = group_failures(
        pd.DataFrame([{"question_id": f"q{i:02d}", "mode": "a", "status": "failed", "error": "E"} for i in range(20)])
    )
    assert many[0].pairs_text(limit=3) == "q00 / a, q01 / a, q02 / a, … and 17 more"


def test_bm25s_debug_lines_stay_off_the_console():
    """bm25s sets its logger to DEBUG on import; its "Building index from tokens" line broke the progress line."""
    import logging

    import harness.retrieval.keyword  # noqa: F401  (imports bm25s)

    assert logging.getLogger("bm25s").getEffectiveLevel() >= logging.WARNING
