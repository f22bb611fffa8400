"""The whole benchmark through the CLI against a scripted OpenAI-compatible server on loopback."""

import csv
import json

import pytest

from commands.cli import main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer, Reply, completion
from tests.support.fake_run import fake_endpoint_args
from tests.support.rerun import CACHED_RERUN_VOLATILE, without_keys

MODES = ("long_context", "summary", "summary_ondemand")


def responder(req):
    """Answers like a cooperative model: summaries, one search then an answer, judge verdicts."""
    msgs = req["messages"]
    text = json.dumps(msgs)
    if "expert evaluator" in text:
        return completion('{"correct": false, "confidence": 0.9, "reason": "different"}')
    if (
        "Analyze the following conversation" in msgs[-1]["content"]
        if isinstance(msgs[-1].get("content"), str)
        else False
    ):
        return completion("The user talked about their life.", prompt_tokens=300, completion_tokens=20)
    if req.get("tools") and not any(m["role"] == "tool" for m in msgs):
        return completion(
            None,
            [
                {
                    "id": "call_1",
                    "name": "session_search",
                    "arguments": {"query": msgs[-1]["content"], "scope": "current_hidden"},
                }
            ],
        )
    return completion("I am not sure.", prompt_tokens=500)


def run(tmp_path, *overrides, base_url):
    args = [
        "run",
        f"hydra.run.dir={tmp_path / 'run'}",
        *fake_endpoint_args(base_url, tmp_path),
        *overrides,
    ]
    return main(args)


@pytest.mark.e2e
@pytest.mark.figures
def test_run_writes_records_report_and_plot_then_resumes_without_model_calls(tmp_path, capsys):
    with FakeOpenAIServer(responder) as srv:
        assert run(tmp_path, base_url=srv.base_url) == 0
        n_calls = len(srv.requests)
        run_dir = tmp_path / "run"
        recs = load_records(run_dir / "records.jsonl")
        assert sorted((r["question_id"], r["mode"]) for r in recs) == sorted(
            (q, m) for q in {r["question_id"] for r in recs} for m in MODES
        )
        assert len(recs) == 6 and all(r["status"] == "ok" for r in recs)
        for name in (
            "report.md",
            "summary.csv",
            "cases.csv",
            "quality_vs_tokens.png",
            "run.json",
            ".hydra/config.yaml",
        ):
            assert (run_dir / name).exists(), name
        ond = [r for r in recs if r["mode"] == "summary_ondemand"]
        assert all(r["n_search"] == 1 and r["tool_calls"][0]["name"] == "session_search" for r in ond)
        assert all(r["tool_calls"][0]["trace"] for r in ond)
        summ = [r for r in recs if r["mode"] == "summary"]
        assert all(r["summary"]["text"] == "The user talked about their life." for r in summ)
        # one summary generation per case, shared by the two summary modes
        assert sum("Analyze the following conversation" in json.dumps(q["messages"]) for q in srv.requests) == 2
        lc = [r for r in recs if r["mode"] == "long_context"]
        assert all(r["usage"]["final_prompt_tokens"] == 500 for r in lc)
        assert all(r["metrics"]["llm_score"] == 0.0 and "em" in r["metrics"] for r in recs)
        before = (run_dir / "records.jsonl").read_bytes()
        # run.json keeps the scorers' metric declarations (reports derive their columns from them)
        specs = {m["name"]: m for m in json.loads((run_dir / "run.json").read_text())["metrics"]}
        assert specs["em"]["scorer"] == "LexicalScorer" and specs["llm_acc"]["verdict"] == "verdict"
        assert specs["llm_score"]["higher_is_better"] is True and specs["llm_score"]["label"] == "LLMScore"

        # same command again: resumes, no model call, identical records
        assert run(tmp_path, base_url=srv.base_url) == 0
        assert len(srv.requests) == n_calls
        assert (run_dir / "records.jsonl").read_bytes() == before
        assert {m["name"]: m for m in json.loads((run_dir / "run.json").read_text())["metrics"]} == specs

    # report rebuilds with no endpoint at all
    (run_dir / "report.md").unlink()
    assert main(["report", str(run_dir)]) == 0
    assert "summary_ondemand" in (run_dir / "report.md").read_text()


@pytest.mark.e2e
def test_fresh_run_dir_is_served_from_the_response_cache(tmp_path):
    with FakeOpenAIServer(responder) as srv:
        assert run(tmp_path, base_url=srv.base_url) == 0
        n = len(srv.requests)
        assert run(tmp_path, f"hydra.run.dir={tmp_path / 'again'}", base_url=srv.base_url) == 0
        assert len(srv.requests) == n
    a = sorted(
        map(_stable, load_records(tmp_path / "run" / "records.jsonl")), key=lambda r: (r["question_id"], r["mode"])
    )
    b = sorted(
        map(_stable, load_records(tmp_path / "again" / "records.jsonl")), key=lambda r: (r["question_id"], r["mode"])
    )
    assert a == b


def _stable(obj):
    """A record without what legitimately differs on a cached re-run: wall times and cache flags."""
    return without_keys(obj, CACHED_RERUN_VOLATILE)


@pytest.mark.e2e
def test_failed_calls_are_recorded_with_reason_and_retried_next_run(tmp_path):
    state = {"fail": True}

    def flaky(req):
        if state["fail"] and "expert evaluator" not in json.dumps(req["messages"]):
            return Reply(status=400, body={"error": {"message": "context length exceeded"}})
        return responder(req)

    with FakeOpenAIServer(flaky) as srv:
        assert run(tmp_path, "mode=[long_context]", base_url=srv.base_url) == 3
        recs = load_records(tmp_path / "run" / "records.jsonl")
        assert len(recs) == 2 and all(r["status"] == "failed" and "context length" in r["error"] for r in recs)
        assert "Failed or errored cases" in (tmp_path / "run" / "report.md").read_text()
        state["fail"] = False
        assert run(tmp_path, "mode=[long_context]", base_url=srv.base_url) == 0
        recs = load_records(tmp_path / "run" / "records.jsonl")
        assert len(recs) == 2 and all(r["status"] == "ok" for r in recs)


@pytest.mark.e2e
def test_a_run_dir_refuses_records_of_another_config(tmp_path, capsys):
    with FakeOpenAIServer(responder) as srv:
        assert run(tmp_path, "mode=[long_context]", base_url=srv.base_url) == 0
        assert run(tmp_path, "mode=[long_context]", "generation.max_tokens=10", base_url=srv.base_url) == 2
    assert "different configuration" in capsys.readouterr().err


@pytest.mark.e2e
def test_bad_dataset_path_is_one_clear_error(tmp_path, capsys):
    code = main(
        [
            "run",
            f"hydra.run.dir={tmp_path / 'run'}",
            f"dataset.path={tmp_path / 'missing.json'}",
            "model=endpoint",
            "model.base_url=http://127.0.0.1:9/v1",
            "model.model=x",
            "run.progress=false",
        ]
    )
    assert code == 2
    assert "missing.json: dataset file not found" in capsys.readouterr().err


@pytest.mark.e2e
def test_embedding_endpoint_calls_land_in_records_and_are_priced(tmp_path, monkeypatch):
    """retrieval=trpc_parity_openai: the index and query embeddings go to the endpoint through the client
    layer; each record lists the calls its mode made, and the report prices them."""
    monkeypatch.setenv("LME_HARNESS_CACHE_DIR", str(tmp_path / "lme-cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    def answer(req):
        if req["_path"].endswith("/embeddings"):
            data = [
                {"object": "embedding", "index": i, "embedding": [1.0, float(len(t) % 7), 0.5]}
                for i, t in enumerate(req["input"])
            ]
            return Reply(
                body={
                    "object": "list",
                    "data": data,
                    "model": "text-embedding-3-small",
                    "usage": {"prompt_tokens": 10 * len(data), "total_tokens": 10 * len(data)},
                }
            )
        return responder(req)

    with FakeOpenAIServer(answer) as srv:
        monkeypatch.setenv("OPENAI_EMBEDDING_BASE_URL", srv.base_url)
        assert (
            run(
                tmp_path,
                "retrieval=trpc_parity_openai",
                "mode=[summary_ondemand]",
                "judge=none",
                "run.concurrency=1",
                base_url=srv.base_url,
            )
            == 0
        )
        embed_requests = [r for r in srv.requests if r["_path"].endswith("/embeddings")]
    recs = load_records(tmp_path / "run" / "records.jsonl")
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs)
    logged = [c for r in recs for c in r["embedding_calls"]]
    assert len(logged) == len(embed_requests) >= 4  # per case: the index, then the query (+ variants)
    for r in recs:
        assert r["usage"]["embedding_tokens"] == sum(c["usage"]["prompt_tokens"] for c in r["embedding_calls"]) > 0
    with open(tmp_path / "run" / "cases.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    cost = sum(float(r["cost_embedding"]) for r in rows)  # text-embedding-3-small: $0.02 per 1M tokens
    assert cost == pytest.approx(sum(c["usage"]["prompt_tokens"] for c in logged) * 0.02 / 1e6)
    assert "embedding $/case" in (tmp_path / "run" / "report.md").read_text()
    retrieval = json.loads((tmp_path / "run" / "run.json").read_text())["retrieval"]
    assert retrieval["preset"] == "trpc_parity_openai" and retrieval["embedder"].startswith(
        "openai:text-embedding-3-small"
    )


def test_fingerprint_ignores_null_settings_and_what_does_not_change_results():
    from omegaconf import OmegaConf

    from runners.replay import fingerprint

    base = OmegaConf.create(
        {"dataset": {"name": "s", "limit": 3}, "run": {"concurrency": 1}, "generation": {"seed": 0}}
    )
    same = OmegaConf.merge(base, {"dataset": {"sample_seed": None}, "run": {"concurrency": 8}})
    assert fingerprint(same) == fingerprint(base)  # a new optional key (null) and the concurrency change nothing
    assert fingerprint(OmegaConf.merge(base, {"dataset": {"sample_seed": 1}})) != fingerprint(base)
    assert fingerprint(OmegaConf.merge(base, {"generation": {"seed": 1}})) != fingerprint(base)
