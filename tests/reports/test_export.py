"""`lme-harness export`: answers as LongMemEval hypothesis files, failed pairs named, never written empty."""

import json

from commands.cli import main
from tests.support.report_fixtures import rec, write_run


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_export_writes_one_upstream_hypothesis_file_per_mode(tmp_path, capsys):
    run = write_run(
        tmp_path / "run",
        [
            rec("q2", "summary", prediction="Tokyo"),
            rec("q1", "summary", prediction="Paris, in May"),
            rec("q1", "long_context", prediction=""),  # an empty answer is an answer (scored as such in the run)
            rec("q2", "long_context", status="failed", error="LLMError: 503"),
        ],
    )
    assert main(["export", str(run)]) == 3  # something is missing: same exit status as a run with failed pairs
    out, err = capsys.readouterr()
    assert lines(run / "export" / "summary.jsonl") == [
        {"question_id": "q1", "hypothesis": "Paris, in May"},
        {"question_id": "q2", "hypothesis": "Tokyo"},
    ]
    assert lines(run / "export" / "long_context.jsonl") == [{"question_id": "q1", "hypothesis": ""}]
    assert "no answer for q2 / long_context (failed: LLMError: 503)" in err
    assert "summary: 2 hypotheses" in out and "evaluate_qa.py" in out


def test_a_retried_pair_exports_its_newest_answer(tmp_path):
    run = write_run(tmp_path / "run", [rec("q1", "summary", status="failed"), rec("q1", "summary", prediction="Paris")])
    assert main(["export", str(run), "--out", str(tmp_path / "hyp")]) == 0
    assert lines(tmp_path / "hyp" / "summary.jsonl") == [{"question_id": "q1", "hypothesis": "Paris"}]


def test_export_of_a_directory_without_records_is_one_clear_error(tmp_path, capsys):
    assert main(["export", str(tmp_path)]) == 2
    assert "no records to export" in capsys.readouterr().err


def test_export_dataset_writes_the_per_case_table_as_a_hf_dataset_and_parquet(tmp_path):
    import datasets
    import pandas as pd

    run = write_run(
        tmp_path / "run",
        [
            rec("q1", "summary", em=1.0, prediction="Paris"),
            rec("q2", "summary", status="failed", error="LLMError: 503"),
        ],
    )
    assert main(["export", str(run), "--dataset"]) == 3
    ds = datasets.load_from_disk(str(run / "export" / "cases"))
    rows = {r["question_id"]: r for r in ds}
    assert (
        rows["q1"]["em"] == 1.0 and rows["q1"]["prediction"] == "Paris" and rows["q1"]["question"] == "Where did I go?"
    )
    assert rows["q2"]["status"] == "failed" and rows["q2"]["prediction"] is None  # failed pairs stay visible
    assert len(pd.read_parquet(run / "export" / "cases.parquet")) == 2


def test_a_scoring_failed_pair_is_exported_with_its_answer(tmp_path, capsys):
    """The judge failed, the answer is kept: it is a hypothesis (upstream re-judges it), not a missing pair."""
    answered = rec("q1", "summary", prediction="Paris")
    answered.update(status="scoring_failed", scoring_error="LongMemEvalJudge: judge call failed")
    run = write_run(tmp_path / "run", [answered, rec("q2", "summary", prediction="Tokyo")])
    assert main(["export", str(run)]) == 0
    assert lines(run / "export" / "summary.jsonl") == [
        {"question_id": "q1", "hypothesis": "Paris"},
        {"question_id": "q2", "hypothesis": "Tokyo"},
    ]
    assert "no answer" not in capsys.readouterr().err


def test_export_output_is_bounded_like_records_with_a_visible_note(tmp_path, capsys):
    """A record written before bounds existed (or edited by hand) holds a 3 MB answer: the exported hypothesis and
    the per-case dataset's text fields are cut at the record bounds, say so in the text and on stderr."""
    import pandas as pd

    huge = "Paris " * 500_000  # 3 MB
    run = write_run(tmp_path / "run", [rec("q1", "summary", prediction=huge, question="Q" * 300_000)])
    assert main(["export", str(run), "--dataset"]) == 0
    err = capsys.readouterr().err
    (row,) = lines(run / "export" / "summary.jsonl")
    assert 50_000 < len(row["hypothesis"]) < 50_200 and huge.startswith(row["hypothesis"][:50_000])
    assert "more characters cut" in row["hypothesis"] and "run.max_reply_chars=50000" in row["hypothesis"]
    assert "q1 / summary" in err and "cut" in err
    assert (run / "export" / "summary.jsonl").stat().st_size < 100_000
    df = pd.read_parquet(run / "export" / "cases.parquet")
    assert len(df["prediction"][0]) < 50_200 and "run.max_reply_chars" in df["prediction"][0]
    assert len(df["question"][0]) < 200_200 and "run.max_record_field_chars=200000" in df["question"][0]
