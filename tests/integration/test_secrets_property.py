"""A secret may enter a run through any interpolation, URL, config key or env var, and leaves through none.

Property: a canary key pushed through each entry, a real small benchmark against the loopback fake endpoint
(one request kind fails with an error body that echoes the Authorization header and the request path), then
every file the run wrote, every file and directory name, and all captured output are searched for the canary.
"""

import logging
import secrets as stdlib_secrets
from pathlib import Path

import pytest

from commands.cli import main
from harness.testing.fake_openai import FakeOpenAIServer, Reply
from harness.testing.faults import FakeModel, request_kind
from tests.support.fake_run import endpoint_args

ENV_KEY = "LME_TEST_CANARY_KEY"


def _entries():
    """name -> (env to set, overrides(base_url, canary), expected exit codes)."""
    env = {ENV_KEY: "canary"}
    return {
        "env interpolation on model.api_key": (env, lambda u, c: ["model.api_key=${oc.env:" + ENV_KEY + "}"], (3,)),
        "LME_HARNESS_API_KEY": ({"LME_HARNESS_API_KEY": "canary"}, lambda u, c: [], (3,)),
        "model.api_key_env names the key's variable": (env, lambda u, c: [f"model.api_key_env={ENV_KEY}"], (3,)),
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
        # issue 20: a URL carries no credential at all (userinfo, any query, a fragment): refused before writing
        "base_url userinfo (refused)": (
            {},
            lambda u, c: [f"model.base_url={u.replace('://', f'://user:{c}@')}"],
            (2,),
        ),
        "base_url query api_key (refused)": ({}, lambda u, c: [f"model.base_url='{u}?api_key={c}'"], (2,)),
        "base_url query token (refused)": ({}, lambda u, c: [f"model.base_url='{u}?token={c}'"], (2,)),
        "judge base_url query key (refused)": (
            {},
            lambda u, c: [
                "judge=longmemeval",
                "+model@judge.endpoint=endpoint",
                f"judge.endpoint.base_url='{u}?key={c}'",
                "judge.endpoint.model=fake-judge",
            ],
            (2,),
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
                *endpoint_args(srv.base_url, tmp_path),
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


@pytest.mark.parametrize(
    "entry", ["LME_HARNESS_API_KEY", "OPENAI_API_KEY, also under an innocent key", "env interpolation on model.api_key"]
)
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
                *endpoint_args(srv.base_url, tmp_path),
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
        "model.api_key_env names the key's variable",
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
                *endpoint_args(srv.base_url, tmp_path),
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


# ---------------------------------------------------------------- issue 20: generated secrets, every entry point
# A seeded generator (no hypothesis in the project's env): each seed draws a secret (with characters that change
# under encodings), an entry point, random key names, parameter names and encodings. Entry points that carry the
# secret outside the environment must be refused with nothing written; the environment ones (api_key_env, the
# harness's env vars) run against a loopback endpoint that echoes the credentials and path in its errors. Every
# byte written (file contents, file and directory names) and printed is then searched for the secret in raw,
# percent-encoded, form-encoded, base64, JSON- and HTML-escaped forms.

import base64  # noqa: E402
import html  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import string  # noqa: E402
from urllib.parse import quote, quote_plus  # noqa: E402

from commands.cli import main as cli_main  # noqa: E402

pytestmark = pytest.mark.e2e


def _secret(rng: random.Random) -> str:
    tail = "".join(rng.choice(string.ascii_letters + string.digits + "-_.~+/=%") for _ in range(rng.randint(12, 28)))
    return f"sk-CANARY{rng.choice(['', '%2F', '/', '+'])}{tail}"


def _name(rng: random.Random) -> str:
    return rng.choice(string.ascii_lowercase) + "".join(
        rng.choice(string.ascii_lowercase + string.digits + "_") for _ in range(rng.randint(2, 9))
    )


def _encodings(s: str) -> set[str]:
    forms = {
        s,
        quote(s, safe=""),
        quote_plus(s),
        base64.b64encode(s.encode()).decode().rstrip("="),
        base64.urlsafe_b64encode(s.encode()).decode().rstrip("="),
        json.dumps(s)[1:-1],
        html.escape(s),
    }
    return {f for f in forms if f}


def _url_forms(rng: random.Random, url: str, s: str) -> str:
    enc = rng.choice([lambda v: v, lambda v: quote(v, safe=""), quote_plus])(s)
    param = rng.choice(["key", "sig", "code", _name(rng), "X-Amz-Signature", "subscription-key", "api-version"])
    return rng.choice(
        [
            f"{url}?{param}={enc}",
            f"{url}?a=1&{param}={enc}",
            url.replace("://", f"://{_name(rng)}:{enc}@"),
            url.replace("://", f"://{enc}@"),
            f"{url}#{enc}",
            f"{url}?{enc}",
        ]
    )


def _refused_entries(rng: random.Random, s: str, url: str) -> list[list[str]]:
    """Override lists that carry `s` outside the environment (each must be refused)."""
    a, b, c = _name(rng), _name(rng), _name(rng)
    field = rng.choice(["api_key", "token", "password", "secret", "auth_token", "client_secret"])
    return [
        [f"model.api_key={s}"],
        [f"+model.{a}={s}", "model.api_key=${model." + a + "}"],  # probe 1
        [
            f"+notes.{a}={s}",
            f"+notes.{b}=${{notes.{a}}}",
            f"+notes.{c}=${{notes.{b}}}",
            f"model.api_key=${{notes.{c}}}",
        ],
        [f"+model.{a}={{{field}:'{s}'}}"],  # probe 2, any secret name
        [f"+model.{a}={{{b}:{{{field}:'{s}'}}}}"],  # nested deeper
        ["+notes." + a + "=${oc.decode:'\"" + s + "\"'}", "model.api_key=${notes." + a + "}"],  # probe 3
        [f"model.base_url='{_url_forms(rng, url, s)}'"],  # probes 4, 5, any parameter name and encoding
        [
            "judge=longmemeval",
            "+model@judge.endpoint=endpoint",
            "judge.endpoint.model=j",
            f"judge.endpoint.base_url='{_url_forms(rng, url, s)}'",
        ],
        ["judge=longmemeval", f"+judge.endpoint={{name:j,kind:remote,model:j,base_url:'{url}',{field}:'{s}'}}"],
        [
            "store=postgres",
            rng.choice(
                [
                    f"store.dsn='host=127.0.0.1 dbname=db password = {s}'",
                    f"store.dsn='host=127.0.0.1 password=\\'{s}\\' dbname=db'",
                    f"store.dsn='postgresql://u@127.0.0.1/db?password={quote(s, safe='')}'",
                    f"store.dsn='postgresql://u:{quote(s, safe='')}@127.0.0.1/db'",
                ]
            ),
        ],  # probe 7
        ["-m", f"model.base_url={url},'{_url_forms(rng, url, s)}'"],  # probe 8: a sweep
        [f"hydra.job.env_set.{rng.choice(['LME_HARNESS_API_KEY', 'OPENAI_API_KEY', 'MY_TOKEN'])}={s}"],
    ]


def _grep(tmp_path, forms: set[str], *texts: str) -> list[str]:
    found = []
    for p in tmp_path.rglob("*"):
        data = p.read_bytes() if p.is_file() else b""
        found += [f"{p}: {f!r}" for f in forms if f in str(p.relative_to(tmp_path)) or f.encode() in data]
    found += [f"output: {f!r}" for f in forms for t in texts if f in t]
    return found


def _leaky_endpoint():
    return _leaky(FakeModel())


@pytest.mark.parametrize("seed", range(24))
def test_generated_secrets_through_every_refused_entry_leave_no_trace(seed, tmp_path, monkeypatch, capfd):
    rng = random.Random(seed)
    s = _secret(rng)
    for name in ("LME_HARNESS_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(_leaky_endpoint()) as srv:
        entries = _refused_entries(rng, s, srv.base_url)
        overrides = entries[seed % len(entries)]
        cmd = rng.choice(["run", "rescore"]) if "-m" not in overrides else "run"
        head = ["rescore", str(tmp_path / "nowhere")] if cmd == "rescore" else ["run"]
        if cmd == "rescore":
            (tmp_path / "nowhere").mkdir()
        code = cli_main(
            [
                *head,
                *endpoint_args(srv.base_url, tmp_path),
                "retrieval=bm25",
                "dataset.limit=1",
                *overrides,
            ]
        )
        assert not srv.requests
    out = capfd.readouterr()
    assert code == 2, (overrides, out.err[-1500:])
    assert _grep(tmp_path, _encodings(s), out.out, out.err) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == (["nowhere"] if cmd == "rescore" else [])


@pytest.mark.parametrize("seed", range(6))
def test_generated_secrets_from_the_environment_leave_no_trace_in_runs_sweeps_rescores_and_merges(
    seed, tmp_path, monkeypatch, capfd, caplog
):
    """The key's one way in (an env var, named by a `*api_key_env` field or read by the harness) is used against a
    careless endpoint that echoes it in errors; runs, a sweep, a rescore with a judge endpoint and a merge of
    shards write and print it nowhere, in no encoding."""
    rng = random.Random(1000 + seed)
    s = _secret(rng)
    var = "LME_T_" + _name(rng).upper()
    for name in ("LME_HARNESS_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(var, s)
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG)
    key_in = rng.choice([[f"model.api_key_env={var}"], ["model.api_key=${oc.env:" + var + "}"]])
    with FakeOpenAIServer(_leaky_endpoint()) as srv:
        common = [
            *endpoint_args(srv.base_url, tmp_path),
            "retrieval=bm25",
            "client.max_retries=0",
            "mode=[long_context,summary_ondemand]",
            *key_in,
        ]
        kind = ["run", "sweep", "rescore", "merge", "run", "rescore"][seed]
        if kind == "sweep":  # with Hydra settings that touch no key's variable: multirun.yaml is searched too
            hydra_ok = rng.choice([["+hydra.job.env_set.OMP_NUM_THREADS=1"], ["hydra.job.env_copy=[HOME]"]])
            argv = ["run", "-m", *common, "dataset.limit=1", "generation.max_tokens=64,65", *hydra_ok]
            assert cli_main(argv) in (0, 3)
            assert list(tmp_path.rglob("multirun.yaml"))
        elif kind == "merge":
            for i in range(2):
                assert cli_main(["run", *common, "dataset.limit=2", f"dataset.shard={i}/2", f"hydra.run.dir=s{i}"]) in (
                    0,
                    3,
                )
            cli_main(["merge", "merged", "s0", "s1"])
        else:
            assert cli_main(["run", *common, "dataset.limit=2", "hydra.run.dir=src"]) in (0, 3)
            if kind == "rescore":
                judge_key = rng.choice([[f"judge.endpoint.api_key_env={var}"], []])
                cli_main(
                    [
                        "rescore",
                        "src",
                        "run.progress=false",
                        "judge=longmemeval",
                        "+model@judge.endpoint=endpoint",
                        f"judge.endpoint.base_url={srv.base_url}",
                        "judge.endpoint.model=fake-judge",
                        *judge_key,
                    ]
                )
        assert any(s in str(r.get("_auth")) for r in srv.requests)  # the key was really in use
    out = capfd.readouterr()
    assert list(tmp_path.rglob("records.jsonl"))
    assert _grep(tmp_path, _encodings(s), out.out, out.err, caplog.text) == []


# ---------------------------------------------------------------- issue 38: Hydra's own settings (hydra.*)
# A key's variable may have any name: the one a secret field reads (model.api_key_env=VAR, a judge endpoint's, an
# embedder's, store.password_env, a memory provider's, `api_key: ${oc.env:VAR}`). No Hydra setting may define it
# for the job (hydra.job.env_set, hydra.job.env_copy, a launcher's environment), on the command line or in an
# experiment file, in a run or a sweep, nor read it into a directory name (hydra.run.dir, hydra.sweep.dir/subdir):
# each is refused before anything is written (no multirun.yaml, no run directory), and the key is nowhere.


def _innocent_var(rng: random.Random) -> str:
    """An env variable's name that no name test would take for a key's."""
    return "LME_T_" + rng.choice(["CFG", "MODE", "X", "PATHS", "WHO"]) + str(rng.randint(0, 99))


def _reading_field(rng: random.Random, var: str) -> list[str]:
    """Overrides making a secret field read `var`."""
    return rng.choice(
        [
            [f"model.api_key_env={var}"],
            ["model.api_key=${oc.env:" + var + "}"],
            [
                "judge=longmemeval",
                "+model@judge.endpoint=endpoint",
                "judge.endpoint.model=j",
                f"judge.endpoint.api_key_env={var}",
            ],
            ["retrieval=trpc_parity_openai", f"retrieval.embedder.api_key_env={var}"],
            ["store=postgres", "store.dsn=postgresql://u@127.0.0.1/db", f"store.password_env={var}"],
            ["memory=http", "memory.url=http://127.0.0.1:9/v1", f"memory.api_key_env={var}"],
        ]
    )


def _hydra_entries(rng: random.Random, s: str, var: str, conf: Path) -> list[tuple[list[str], dict[str, str]]]:
    """(overrides, env) that define or read a secret field's variable through Hydra (each must be refused)."""
    field = _reading_field(rng, var)
    q = json.dumps(s)  # a quoted Hydra string: any character of the secret survives the parser
    (conf / "experiment").mkdir(parents=True, exist_ok=True)
    (conf / "experiment" / "keyed.yaml").write_text(
        f"# @package _global_\nhydra:\n  job:\n    env_set:\n      {var}: {q}\n"
    )
    (conf / "experiment" / "plain.yaml").write_text("# @package _global_\nnotes:\n  y: 1\n")
    searchpath = f"hydra.searchpath=[file://{conf}]"
    env = {var: s}
    return [
        ([*field, f"+hydra.job.env_set.{var}={q}"], {}),
        ([*field, f"+hydra.job.env_set={{{var}:{q}}}"], {}),
        ([*field, searchpath, "+experiment=keyed"], {}),  # an experiment file
        ([*field, searchpath, "+experiment=plain,keyed"], {}),  # one job of a sweep (-m below)
        ([*field, f"hydra.job.env_copy=[{var}]"], env),
        ([*field, f"+hydra.launcher.ray.init.runtime_env.env_vars.{var}={q}"], {}),
        ([*field, f"+hydra.launcher.setup=['export {var}={s}']"], {}),
        ([*field, "hydra.run.dir='runs/${oc.env:" + var + "}'"], env),
        ([*field, "+notes.a='${oc.env:" + var + "}'", "hydra.run.dir='runs/${notes.a}'"], env),
        ([*field, "hydra.sweep.dir='sweeps/${oc.env:" + var + "}'"], env),
        ([*field, "hydra.sweep.subdir='${oc.env:" + var + "}'"], env),
        (["model.api_key=${oc.env:" + var + "}", "hydra.run.dir='runs/${model.api_key}'"], env),
    ]


@pytest.mark.parametrize("seed", range(24))
def test_generated_secrets_defined_or_read_through_hydra_settings_are_refused_and_leave_no_trace(
    seed, tmp_path, monkeypatch, capfd
):
    rng = random.Random(2000 + seed)
    s = _secret(rng)
    var = _innocent_var(rng)
    for name in ("LME_HARNESS_API_KEY", "OPENAI_API_KEY", var):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    entries = _hydra_entries(rng, s, var, tmp_path / "conf")
    overrides, env = entries[seed % len(entries)]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    sweep = rng.random() < 0.5 or any("," in o and "experiment" in o for o in overrides)
    with FakeOpenAIServer(_leaky_endpoint()) as srv:
        common = [
            *endpoint_args(srv.base_url, work),
            "retrieval=bm25",
            "dataset.limit=1",
        ]
        head = ["run", "-m", "prompt=trpc_default,fact_keeper"] if sweep else ["run"]
        code = cli_main([*head, *common, *overrides])
        assert not srv.requests
    out = capfd.readouterr()
    assert code == 2, (overrides, out.err[-1500:])
    assert out.err.count("lme-harness: error:") == 1
    assert _grep(work, _encodings(s), out.out, out.err) == []
    assert sorted(p.name for p in work.iterdir()) == []  # no run directory, no multirun.yaml
