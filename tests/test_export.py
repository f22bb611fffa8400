"""`lme-harness export`: answers as LongMemEval hypothesis files, failed pairs named, never written empty."""
import json

from runners.cli import main
from tests.report_fixtures import rec, write_run


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_export_writes_one_upstream_hypothesis_file_per_mode(tmp_path, capsys):
    run = write_run(tmp_path / "run", [
        rec("q2", "summary", prediction="Tokyo"), rec("q1", "summary", prediction="Paris, in May"),
        rec("q1", "long_context", prediction=""),  # an empty answer is an answer (scored as such in the run)
        rec("q2", "long_context", status="failed", error="LLMError: 503"),
    ])
    assert main(["export", str(run)]) == 3  # something is missing: same exit status as a run with failed pairs
    out, err = capsys.readouterr()
    assert lines(run / "export" / "summary.jsonl") == [
        {"question_id": "q1", "hypothesis": "Paris, in May"}, {"question_id": "q2", "hypothesis": "Tokyo"}]
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

    run = write_run(tmp_path / "run", [rec("q1", "summary", em=1.0, prediction="Paris"),
                                       rec("q2", "summary", status="failed", error="LLMError: 503")])
    assert main(["export", str(run), "--dataset"]) == 3
    ds = datasets.load_from_disk(str(run / "export" / "cases"))
    rows = {r["question_id"]: r for r in ds}
    assert rows["q1"]["em"] == 1.0 and rows["q1"]["prediction"] == "Paris" and rows["q1"]["question"] == "Where did I go?"
    assert rows["q2"]["status"] == "failed" and rows["q2"]["prediction"] is None  # failed pairs stay visible
    assert len(pd.read_parquet(run / "export" / "cases.parquet")) == 2
