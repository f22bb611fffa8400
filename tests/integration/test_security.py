"""Secrets stay out of everything a run writes; dataset text cannot inject into reports; tools stay in their case."""

import json
import logging
import secrets

import pytest

from commands.cli import main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer, Reply, completion
from harness.testing.faults import FakeModel, request_kind
from tests.support.dataset_rows import make_row
from tests.support.fake_run import endpoint_args

pytestmark = pytest.mark.e2e


def run(tmp_path, base_url, *overrides, name="run"):
    return main(
        [
            "run",
            f"hydra.run.dir={tmp_path / name}",
            *endpoint_args(base_url, tmp_path),
            "retrieval=bm25",
            "client.max_retries=1",
            "+client.backoff_base_s=0.01",
            *overrides,
        ]
    )


def files_containing(root, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_a_canary_api_key_never_reaches_disk_or_logs(tmp_path, monkeypatch, capsys, caplog):
    canary = "sk-canary-" + secrets.token_hex(12)
    monkeypatch.setenv("LME_HARNESS_API_KEY", canary)
    model = FakeModel()

    def leaky(req):
        # A careless endpoint that echoes the key in its errors, on one request kind persistently.
        if request_kind(req) == "tool_answer":
            return Reply(status=500, body={"error": {"message": f"upstream failed for {req['_auth']}"}})
        return model(req)

    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(leaky) as srv:
        code = run(tmp_path, srv.base_url, "dataset.limit=2")
    assert all(q["_auth"] == f"Bearer {canary}" for q in srv.requests)  # the key was really in use
    assert code == 3  # the echoing request failed its cases: their records hold the (masked) error
    failed = [r for r in load_records(tmp_path / "run" / "records.jsonl") if r["status"] == "failed"]
    assert failed and all("Bearer ***" in r["error"] for r in failed)
    out = capsys.readouterr()
    assert canary not in out.out and canary not in out.err and canary not in caplog.text
    assert files_containing(tmp_path, canary) == []  # run dir (.hydra, log, records, reports, run.json), caches
    assert "api_key" in (tmp_path / "run" / ".hydra" / "config.yaml").read_text()  # it was there, unresolved


def test_a_key_written_in_a_config_file_is_refused_before_the_snapshot(tmp_path, capsys):
    """Issue 20: a key enters only through the environment; one written in a config file is refused (naming the
    key, not its value) before Hydra creates the run directory or its `.hydra/` snapshot."""
    canary = "sk-canary-" + secrets.token_hex(12)
    extra = tmp_path / "conf" / "model"
    extra.mkdir(parents=True)
    with FakeOpenAIServer(FakeModel()) as srv:
        (extra / "leaky.yaml").write_text(
            f"name: leaky\nkind: remote\nmodel: fake-model\nbase_url: {srv.base_url}\napi_key: {canary}\n"
            "context_window: 32768\n"
        )
        code = main(
            [
                "run",
                f"hydra.run.dir={tmp_path / 'run'}",
                f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
                "model=leaky",
                f"cache.path={tmp_path / 'cache.sqlite'}",
                "run.progress=false",
                "retrieval=bm25",
                "dataset.limit=1",
                "mode=[long_context]",
                "judge=none",
            ]
        )
    out = capsys.readouterr()
    assert code == 2 and not srv.requests and "model.api_key=***" in out.err
    assert canary not in out.out + out.err
    assert not (tmp_path / "run").exists()


def test_dataset_and_model_text_is_escaped_in_the_html_report(tmp_path, write_dataset):
    payload = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    rows = [
        make_row(
            qid="q<1>",
            question=f"Where did I go? {payload}",
            answer=f"Paris {payload}",
            sessions=[
                [
                    {"role": "user", "content": f"I went to Paris. {payload}"},
                    {"role": "assistant", "content": f"Nice! {payload}"},
                ]
            ],
        )
    ]
    data = write_dataset(rows, "evil.json")
    model = FakeModel(answer=lambda req: f"Paris {payload}", summary_text=f"Went to Paris {payload}")
    with FakeOpenAIServer(model) as srv:
        assert run(tmp_path, srv.base_url, f"dataset.path={data}", "dataset.sha256=null") == 0
    page = (tmp_path / "run" / "report.html").read_text()
    assert page.count("<script") == 1  # the report's own, hash-pinned script only
    assert "<img src=x" not in page and 'alert("x")</script>' not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page  # shown, as text
    assert "Content-Security-Policy" in page


def test_tool_calls_cannot_reach_another_case(tmp_path, write_dataset):
    """Each case holds a secret; the model of one case searches and loads for the other's, every scope."""
    secrets_by_case = {"qa": "zebra-alpha-417", "qb": "walrus-bravo-932"}
    rows = [
        make_row(
            qid=q,
            question=f"What is my code word? (case {q})",
            sessions=[
                [
                    {"role": "user", "content": f"My code word is {word}."},
                    {"role": "assistant", "content": f"Got it: {word}."},
                ],
                [
                    {"role": "user", "content": "Tell me about whales."},
                    {"role": "assistant", "content": "Whales are large."},
                ],
            ],
        )
        for q, word in secrets_by_case.items()
    ]
    data = write_dataset(rows, "two.json")
    model = FakeModel()

    def prober(req):
        if request_kind(req) != "tool_answer" or any(m["role"] == "tool" for m in req["messages"]):
            return model(req)
        mine = "qa" if "(case qa)" in json.dumps(req["messages"]) else "qb"
        other = secrets_by_case["qb" if mine == "qa" else "qa"]
        calls = [
            {"id": f"s{i}", "name": "session_search", "arguments": {"query": other, "scope": scope}}
            for i, scope in enumerate(("current_hidden", "current_session", "other_sessions", "all_sessions"))
        ]
        calls += [
            {
                "id": f"l{i}",
                "name": "session_load",
                "arguments": {
                    "event_id": f"e000{i}",
                    "session_id": f"lme-{'qb' if mine == 'qa' else 'qa'}",
                    "before": 2,
                    "after": 2,
                },
            }
            for i in range(4)
        ]
        return completion(None, calls)

    with FakeOpenAIServer(prober) as srv:
        assert (
            run(
                tmp_path,
                srv.base_url,
                f"dataset.path={data}",
                "dataset.sha256=null",
                "run.concurrency=2",
                "mode=[summary_ondemand]",
                "judge=none",
            )
            == 0
        )
    seen = 0
    for q in srv.requests:
        tool_text = " ".join(m["content"] for m in q.get("messages", []) if m.get("role") == "tool")
        if not tool_text:
            continue
        seen += 1
        mine = "qa" if "(case qa)" in json.dumps(q["messages"]) else "qb"
        other = secrets_by_case["qb" if mine == "qa" else "qa"]
        assert other not in tool_text.replace(f'"query":"{other}"', "")  # echoed query aside, nothing leaks
    assert seen == 2
