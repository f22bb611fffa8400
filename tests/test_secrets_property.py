"""A secret may enter a run through any interpolation, URL, config key or env var, and leaves through none.

Property: a canary key pushed through each entry, a real small benchmark against the loopback fake endpoint
(one request kind fails with an error body that echoes the Authorization header and the request path), then
every file the run wrote, every file and directory name, and all captured output are searched for the canary.
"""

import logging
import secrets as stdlib_secrets

import pytest

from harness.testing.fake_openai import FakeOpenAIServer, Reply
from harness.testing.faults import FakeModel, request_kind
from runners.cli import main

ENV_KEY = "LME_TEST_CANARY_KEY"


def _entries():
    """name -> (env to set, overrides(base_url, canary), expected exit codes)."""
    env = {ENV_KEY: "canary"}
    return {
        "env interpolation on model.api_key": (env, lambda u, c: ["model.api_key=${oc.env:" + ENV_KEY + "}"], (3,)),
        "LME_HARNESS_API_KEY": ({"LME_HARNESS_API_KEY": "canary"}, lambda u, c: [], (3,)),
        "OPENAI_API_KEY, also under an innocent key": (
            {"OPENAI_API_KEY": "canary"},
            lambda u, c: ["model.api_key=${oc.env:OPENAI_API_KEY}", "+notes.comment=${oc.env:OPENAI_API_KEY}"],
            (3,),
        ),
        "env var named by an api_key_env key": (
            env,
            lambda u, c: [f"+notes.api_key_env={ENV_KEY}", "+notes.comment=${oc.env:" + ENV_KEY + "}"],
            (0, 3),
        ),
        "judge endpoint api_key": (
            env,
            lambda u, c: [
                "judge=longmemeval",
                "+model@judge.endpoint=endpoint",
                f"judge.endpoint.base_url={u}",
                "judge.endpoint.model=fake-judge",
                "judge.endpoint.api_key=${oc.env:" + ENV_KEY + "}",
            ],
            (3,),
        ),
        "secret-named custom key": (env, lambda u, c: ["+notes.db_password=${oc.env:" + ENV_KEY + "}"], (0, 3)),
        "base_url userinfo": ({}, lambda u, c: [f"model.base_url={u.replace('://', f'://user:{c}@')}"], (0, 3)),
        "base_url query api_key": ({}, lambda u, c: [f"model.base_url='{u}?api_key={c}'"], (0, 3, 4)),
        "base_url query token": ({}, lambda u, c: [f"model.base_url='{u}?token={c}'"], (0, 3, 4)),
        "judge base_url query key": (
            {},
            lambda u, c: [
                "judge=longmemeval",
                "+model@judge.endpoint=endpoint",
                f"judge.endpoint.base_url='{u}?key={c}'",
                "judge.endpoint.model=fake-judge",
            ],
            (0, 3, 4),
        ),
        "oc.decode literal (refused)": ({}, lambda u, c: ['model.api_key=${oc.decode:"' + c + '"}'], (2,)),
        "oc.decode inside a URL (refused)": (
            {},
            lambda u, c: ["model.base_url='" + u + '?key=${oc.decode:"' + c + "\"}'"],
            (2,),
        ),
    }


ENTRIES = _entries()


def _leaky(model: FakeModel):
    def respond(req):
        # A careless endpoint: echoes the credentials and the URL it was called with in its errors.
        if request_kind(req) in ("tool_answer", "judge"):
            return Reply(
                status=500, body={"error": {"message": f"upstream failed for {req['_auth']} at {req['_path']}"}}
            )
        return model(req)

    return respond


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_a_canary_secret_never_leaves_a_run(entry, tmp_path, monkeypatch, capfd, caplog):
    env, overrides, codes = ENTRIES[entry]
    canary = "sk-canary-" + stdlib_secrets.token_hex(12)
    for name in ("LME_HARNESS_API_KEY", "OPENAI_API_KEY", ENV_KEY):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, canary if value == "canary" else value)
    monkeypatch.chdir(tmp_path)  # the default run directory: runs/<run.name>/<overrides>
    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(_leaky(FakeModel())) as srv:
        code = main(
            [
                "run",
                "model=endpoint",
                f"model.base_url={srv.base_url}",
                "model.model=fake-model",
                f"cache.path={tmp_path / 'cache.sqlite'}",
                "run.progress=false",
                "retrieval=bm25",
                "client.max_retries=0",
                "dataset.limit=2",
                "mode=[long_context,summary_ondemand]",
                *overrides(srv.base_url, canary),
            ]
        )
    out = capfd.readouterr()
    assert code in codes, out.err[-2000:]
    if code != 2:  # the run really ran: records were written
        assert list(tmp_path.glob("runs/*/*/records.jsonl")) or list(tmp_path.glob("runs/*/records.jsonl"))
    leaks = [
        str(p.relative_to(tmp_path))
        for p in tmp_path.rglob("*")
        if canary in str(p) or (p.is_file() and canary.encode() in p.read_bytes())
    ]
    assert leaks == []
    assert canary not in out.out and canary not in out.err and canary not in caplog.text


@pytest.mark.parametrize("entry", ["base_url userinfo", "base_url query api_key", "env interpolation on model.api_key"])
def test_a_run_that_cannot_start_leaks_no_canary(entry, tmp_path, monkeypatch, capfd, caplog):
    """The endpoint rejects the key at preflight and echoes it: FAILED.txt, stderr and logs stay clean."""
    env, overrides, _ = ENTRIES[entry]
    canary = "sk-canary-" + stdlib_secrets.token_hex(12)
    for name in env:
        monkeypatch.setenv(name, canary)
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG)

    def reject(path):
        return Reply(status=401, body={"error": {"message": f"bad key {canary} at {path}"}})

    with FakeOpenAIServer(FakeModel(), on_get=reject) as srv:
        code = main(
            [
                "run",
                "model=endpoint",
                f"model.base_url={srv.base_url}",
                "model.model=fake-model",
                f"cache.path={tmp_path / 'cache.sqlite'}",
                "run.progress=false",
                "retrieval=bm25",
                "dataset.limit=1",
                *overrides(srv.base_url, canary),
            ]
        )
    out = capfd.readouterr()
    assert code == 2 and "rejected the API key" in out.err
    assert list(tmp_path.glob("runs/*/*/FAILED.txt"))
    leaks = [
        str(p.relative_to(tmp_path))
        for p in tmp_path.rglob("*")
        if canary in str(p) or (p.is_file() and canary.encode() in p.read_bytes())
    ]
    assert leaks == []
    assert canary not in out.out and canary not in out.err and canary not in caplog.text


def _echoing_success(model: FakeModel):
    """A careless endpoint that *succeeds*: every answer, tool answer and summary carries the credentials and the
    URL it was called with (so the canary reaches the response cache, the summary tables and the records)."""

    def respond(req):
        reply = model(req)
        if request_kind(req) in ("answer", "tool_answer", "summary") and isinstance(reply.body, dict):
            message = reply.body["choices"][0]["message"]
            message["content"] = f"{message.get('content') or ''} (served for {req['_auth']} at {req['_path']})"
        return reply

    return respond


@pytest.mark.parametrize(
    "entry",
    [
        "env interpolation on model.api_key",
        "OPENAI_API_KEY, also under an innocent key",
        "LME_HARNESS_API_KEY",
        "base_url query api_key",
    ],
)
def test_a_canary_echoed_in_successful_answers_and_summaries_is_stored_nowhere(
    entry, tmp_path, monkeypatch, capfd, caplog
):
    """The response cache (cache.path), session_store.sqlite (events, summaries, summary cache) and the retrieval
    index store hold masked text only."""
    env, overrides, _ = ENTRIES[entry]
    canary = "sk-canary-" + stdlib_secrets.token_hex(12)
    for name in ("LME_HARNESS_API_KEY", "OPENAI_API_KEY", ENV_KEY):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, canary if value == "canary" else value)
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(_echoing_success(FakeModel())) as srv:
        code = main(
            [
                "run",
                "model=endpoint",
                f"model.base_url={srv.base_url}",
                "model.model=fake-model",
                f"cache.path={tmp_path / 'cache.sqlite'}",
                "run.progress=false",
                "retrieval=bm25",
                "retrieval.store=ix.sqlite",
                "judge=none",
                "client.max_retries=0",
                "dataset.limit=2",
                "mode=[long_context,summary_ondemand]",
                *overrides(srv.base_url, canary),
            ]
        )
        echoed = sum(canary in str(r.get("_auth")) + str(r.get("_path")) for r in srv.requests)
    out = capfd.readouterr()
    assert code == 0, out.err[-2000:]
    assert echoed  # the endpoint really saw (and echoed) the canary in successful replies
    stores = [tmp_path / "cache.sqlite", *tmp_path.glob("runs/**/session_store.sqlite"), tmp_path / "ix.sqlite"]
    assert all(p.exists() for p in stores) and len(stores) == 3
    leaks = [
        str(p.relative_to(tmp_path))
        for p in tmp_path.rglob("*")
        if canary in str(p) or (p.is_file() and canary.encode() in p.read_bytes())
    ]
    assert leaks == []
    assert canary not in out.out and canary not in out.err and canary not in caplog.text
