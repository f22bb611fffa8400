"""Every LongMemEval question type runs in every mode, with the benchmark's dates (offline, fake endpoint)."""

import gzip
import json
from pathlib import Path

import pytest

from commands.cli import main
from harness.data.longmemeval import QUESTION_TYPES, DataError, LongMemEvalSource, find_local, parse_cases
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from runners.wire import WireShape
from tests.support.fake_run import endpoint_args

ORACLE = find_local("longmemeval_oracle.json.gz")
pytestmark = pytest.mark.skipif(ORACLE is None, reason="longmemeval_oracle.json.gz not available")


def subset_rows() -> list[dict]:
    """The first question of each type, one abstention question, one multi-session one with 2+ sessions."""
    rows = json.loads(gzip.decompress(Path(ORACLE).read_bytes()))
    out, seen = [], set()
    for r in rows:
        if r["question_type"] not in seen and not r["question_id"].endswith("_abs"):
            seen.add(r["question_type"])
            out.append(r)
    out.append(next(r for r in rows if r["question_id"].endswith("_abs")))
    unsorted = next(r for r in rows if r["haystack_dates"] != sorted(r["haystack_dates"]) and r not in out)
    out.append(unsorted)
    return out


@pytest.fixture(scope="module")
def subset(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("data") / "subset.json"
    p.write_text(json.dumps(subset_rows()))
    return p


class Recorder(FakeModel):
    def __init__(self):
        super().__init__()
        self.requests: list[dict] = []

    def __call__(self, req):
        self.requests.append(req)
        return super().__call__(req)


def _run(tmp_path, subset, base_url, *extra):
    return main(
        [
            "run",
            f"hydra.run.dir={tmp_path / 'run'}",
            *endpoint_args(base_url, tmp_path),
            "retrieval=bm25",
            "+experiment=lme_official",
            f"dataset.path={subset}",
            "dataset.sha256=null",
            *extra,
        ]
    )


@pytest.fixture(scope="module")
def every_mode_run(tmp_path_factory, subset) -> tuple[Path, list[dict]]:
    """One run of the subset in every mode of +experiment=lme_official (the run dir and the requests the model
    saw), read by the tests below: a benchmark run with its report is most of a test's time, so it runs once."""
    tmp = tmp_path_factory.mktemp("every_mode")
    model = Recorder()
    with FakeOpenAIServer(model) as srv:
        assert _run(tmp, subset, srv.base_url) == 0
    return tmp / "run", model.requests


@pytest.mark.e2e
def test_every_type_runs_in_every_mode_with_dates_and_abstention_judged_as_abstention(every_mode_run):
    run_dir, requests = every_mode_run
    recs = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    cases = {r["question_id"]: r for r in subset_rows()}
    modes = {"lme_official", "long_context", "summary", "summary_ondemand"}
    assert {(r["question_id"], r["mode"]) for r in recs} == {(q, m) for q in cases for m in modes}
    assert {r["question_type"] for r in recs} == set(QUESTION_TYPES)
    assert all(r["status"] == "ok" for r in recs)
    judged = [r["metric_details"]["LongMemEvalJudge"] for r in recs if r["is_abstention"]]
    assert judged and all(d["prompt_kind"] == "abstention" for d in judged)
    # The answer prompts state the question's date; long_context shows each session's date.
    answers = [
        q
        for q in requests
        if q.get("messages")
        and q["messages"][-1]["role"] == "user"
        and "Question:" in (q["messages"][-1]["content"] or "")
        and "Answer yes or no" not in q["messages"][-1]["content"]
    ]
    for row in cases.values():
        mine = [q for q in answers if row["question"] in q["messages"][-1]["content"]]
        assert mine and all(f"Current Date: {row['question_date']}" in q["messages"][-1]["content"] for q in mine)
        joined = "\n".join(json.dumps(q["messages"]) for q in mine)
        for d in row["haystack_dates"]:
            assert d in joined
    # Search results carry the session's real date, not the synthetic 2023-11-14 of the default wire.
    tool_msgs = [m["content"] for q in requests for m in q.get("messages") or [] if m.get("role") == "tool"]
    assert tool_msgs and not any("2023-11-14" in t for t in tool_msgs)


@pytest.mark.real_data
def test_session_timestamps_follow_dates_and_stay_increasing():
    cases = parse_cases(json.dumps(subset_rows()).encode(), "subset")
    unsorted = cases[-1]
    assert list(unsorted.session_dates) != sorted(unsorted.session_dates)
    ev = unsorted.events(timestamps="session", session_header="[{date}]")
    ts = [e.timestamp for e in ev]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)
    first = [e for e in ev if e.content.startswith("[")]
    assert len(first) == len(unsorted.sessions)
    # The default (published protocol) events are unchanged: synthetic times, file order, no header.
    plain = unsorted.events()
    assert [e.content for e in plain] == [t.content for s in unsorted.sessions for t in s]
    assert plain[0].timestamp == 1_700_000_000.001


@pytest.mark.real_data
def test_a_dated_run_without_dates_names_the_question_and_field():
    row = dict(subset_rows()[0], haystack_dates=["yesterday"])
    case = parse_cases(json.dumps([row]).encode(), "x")[0]
    with pytest.raises(DataError, match=rf"question_id={row['question_id']}: field 'haystack_dates\[0\]'"):
        case.events(timestamps="session")
    with pytest.raises(ValueError, match="question_date"):
        WireShape(question_template="{question_date} {question}").question("q", "")


@pytest.mark.real_data
def test_an_unknown_question_type_is_one_clear_error(subset):
    src = LongMemEvalSource(path=str(subset), question_types=["multi-sesion"])
    with pytest.raises(DataError, match=r"\['multi-sesion'\] match no question"):
        src.load()


@pytest.mark.real_data
def test_all_types_configs_select_every_type():
    src = LongMemEvalSource(name="oracle_all", filename="longmemeval_oracle.json.gz", question_types=None)
    cases, prov = src.load()
    assert prov["n_selected"] == 500 and {c.question_type for c in cases} == set(QUESTION_TYPES)
    assert sum(c.is_abstention for c in cases) == 30


@pytest.mark.e2e
def test_per_type_report_scoreboard_and_gate(tmp_path, every_mode_run):
    from reports.aggregate import read_run, scoreboard
    from reports.by_type import type_table
    from reports.gate import run_gate
    from reports.render import build_report

    # the shared run of every mode (this test ran long_context and summary alone before): the figures checked
    # below are per mode and type, and the fake judge answers "no" to every answer whatever else ran
    run_dir = every_mode_run[0]
    out = build_report(run_dir)
    table = type_table(read_run(run_dir).frame)
    lc = table[(table["mode"] == "long_context") & (table["metric"] == "lme_acc")].set_index("question_type")
    assert set(QUESTION_TYPES) | {"abstention", "overall", "task_avg"} == set(lc.index)
    assert lc.loc["overall", "n"] == len(subset_rows()) and lc.loc["abstention", "n"] == 1
    # The fake judge says "no" to every answer, but "yes" to none: all 0; task_avg is the mean of type means.
    assert lc.loc["task_avg", "mean"] == pytest.approx(lc.loc[list(QUESTION_TYPES), "mean"].mean())
    assert out["by_type_csv"].exists() and out["plot_by_type"].exists()
    md = out["markdown"].read_text()
    assert "## Per question type" in md and "| temporal-reasoning |" in md and "| task_avg |" in md
    board = scoreboard(read_run(run_dir).frame)
    assert board[("summary", "lme_acc@type:multi-session")] == 0.0
    base = tmp_path / "gate.yaml"
    base.write_text(
        "checks:\n"
        "  - {mode: summary, metric: lme_acc, question_type: temporal-reasoning, baseline: 0.0, abs: 0.0}\n"
        "  - {mode: summary, metric: lme_acc, question_type: multi-session, min: 0.5}\n"
    )
    res = run_gate(base, run_dir)
    assert [o.failed for o in res.outcomes] == [False, True]
    assert "lme_acc@type:multi-session" in res.markdown()


def test_a_single_type_run_has_no_per_type_section(tmp_path):
    from reports.aggregate import read_run
    from reports.by_type import type_scoreboard, type_table
    from reports.render import build_report
    from tests.support.report_fixtures import standard_run

    run_dir = standard_run(tmp_path / "r")
    frame = read_run(run_dir).frame
    assert type_table(frame).empty and type_scoreboard(frame) == {}
    out = build_report(run_dir)
    assert "by_type_csv" not in out and not (run_dir / "by_type.csv").exists()
    assert "Per question type" not in out["markdown"].read_text()


def test_compare_pairs_per_question_type_only_when_several_types(tmp_path):
    from reports.compare import compare_runs, load_runs, pair_markdown
    from tests.support.report_fixtures import meta, rec, write_run

    def run(name, em):
        recs = [
            rec(f"q{i}", "summary", em=em[i], lme=em[i], qtype=t)
            for i, t in enumerate(["multi-session", "multi-session", "temporal-reasoning", "temporal-reasoning"])
        ]
        return write_run(tmp_path / name, recs, meta())

    a, b = run("a", [1, 1, 0, 0]), run("b", [1, 1, 1, 1])
    pair = compare_runs(load_runs([a, b]), n_boot=50)[0]
    rows = {(r["group"], r["metric"]): r for r in pair.by_type.to_dict("records")}
    assert rows[("summary / temporal-reasoning", "em")]["delta"] == 1.0
    assert rows[("summary / multi-session", "em")]["delta"] == 0.0
    assert "Per question type" in pair_markdown(pair)
    single = [write_run(tmp_path / n, [rec("q1", "summary", em=1.0)], meta()) for n in ("c", "d")]
    assert compare_runs(load_runs(single), n_boot=50)[0].by_type is None
