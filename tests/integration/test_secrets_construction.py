"""Issue 20, item 1: secrets safe by construction, and a run directory's name that is always one valid path.

Each probe of the issue that put a key in clear is refused with one error naming the culprit key (never the
value) before anything is written; the run directory's name comes from an allowlist and is capped.
"""

import json
import secrets as stdlib_secrets

import pytest

from commands.cli import main
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from tests.support.fake_run import endpoint_args


def _key() -> str:
    return "sk-CANARY" + stdlib_secrets.token_hex(12)


def base(url, tmp_path, *overrides):
    return [
        "run",
        *endpoint_args(url, tmp_path),
        "retrieval=bm25",
        "client.max_retries=0",
        "dataset.limit=1",
        "mode=[long_context]",
        "judge=none",
        *overrides,
    ]


def written(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def leaks(root, key: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if key in str(p) or (p.is_file() and key.encode() in p.read_bytes())]


def refused(tmp_path, monkeypatch, capfd, overrides, *, cmd=None, env=None) -> str:
    """Run with `overrides` ({K} and URL substituted): exit 2, nothing written, the key nowhere; stderr."""
    key = _key()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value.replace("{K}", key))
    with FakeOpenAIServer(FakeModel()) as srv:
        argv = [o.replace("{K}", key).replace("URL", srv.base_url) for o in overrides]
        code = main(cmd(argv) if cmd else base(srv.base_url, tmp_path, *argv))
        assert not srv.requests
    out = capfd.readouterr()
    assert code == 2, out.err[-2000:]
    assert written(work) == [] and leaks(tmp_path, key) == []
    assert key not in out.out + out.err and out.err.count("lme-harness: error:") == 1
    return out.err


@pytest.mark.e2e
@pytest.mark.parametrize(
    "overrides, culprit",
    [
        # probe 1: a key under an innocent key, read into the secret field by interpolation
        (["+model.foo={K}", "model.api_key=${model.foo}"], "model.api_key"),
        # probe 2: a key in a nested dict
        (["+model.extra={api_key:{K}}"], "model.extra.api_key"),
        # probe 3: oc.decode on a non-secret key, then a chain into the secret field
        (["+notes.x=${oc.decode:'\"{K}\"'}", "model.api_key=${notes.x}"], "model.api_key"),
        # probe 4: a key in the query string, any parameter name
        (["model.base_url='URL?subscription-key={K}'"], "model.base_url"),
        (["model.base_url='URL?X-Amz-Signature={K}'"], "model.base_url"),
        # probe 5: percent-encoded
        (["model.base_url='URL?k={K}%2F1234'"], "model.base_url"),
        # probe 7: a password in a DSN, with spaces around `=`, or as a URL parameter
        (["store=postgres", "store.dsn='host=127.0.0.1 dbname=db password = {K}'"], "store.dsn"),
        (["store=postgres", "store.dsn=postgresql://u@127.0.0.1/db?password={K}"], "store.dsn"),
        # minor: a judge endpoint dict carrying a key (its name was also printed in the too-long directory name)
        (
            ["judge=longmemeval", "+judge.endpoint={name:j,kind:remote,model:m,base_url:'URL',api_key:{K}}"],
            "judge.endpoint.api_key",
        ),
        # minor: a key set through Hydra's env_set
        (["hydra.job.env_set.LME_HARNESS_API_KEY={K}"], "hydra.job.env_set.LME_HARNESS_API_KEY"),
        # a literal key in a secret field
        (["model.api_key={K}"], "model.api_key"),
    ],
)
def test_a_key_outside_the_environment_is_refused_before_anything_is_written(
    overrides, culprit, tmp_path, monkeypatch, capfd
):
    assert culprit in refused(tmp_path, monkeypatch, capfd, overrides)


@pytest.mark.e2e
def test_probe8_a_sweep_with_a_key_in_a_url_is_refused_before_its_job_lines_and_multirun_yaml(
    tmp_path, monkeypatch, capfd
):
    err = refused(tmp_path, monkeypatch, capfd, ["-m", "model.base_url=URL,http://user:{K}@127.0.0.1:9/v1"])
    assert "model.base_url=***: userinfo" in err


@pytest.mark.e2e
def test_probe6_rescore_with_a_key_in_the_judge_url_is_refused(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(FakeModel()) as srv:
        assert main(base(srv.base_url, tmp_path, "hydra.run.dir=src")) == 0
    capfd.readouterr()

    def rescore(argv):
        return ["rescore", str(tmp_path / "src"), "run.progress=false", *argv]

    err = refused(
        tmp_path,
        monkeypatch,
        capfd,
        [
            "judge=longmemeval",
            "+model@judge.endpoint=endpoint",
            "judge.endpoint.model=fake-judge",
            "judge.endpoint.base_url='URL?key={K}'",
        ],
        cmd=rescore,
    )
    assert "judge.endpoint.base_url=***: a query string" in err


@pytest.mark.e2e
def test_the_composed_config_is_checked_a_key_in_a_config_file_or_the_env(tmp_path, monkeypatch, capfd):
    """What the command line cannot show (a config file, an env-resolved DSN) is checked on the composed config
    by the Hydra callback, before the run directory or `.hydra/` exists, even with hydra.run.dir given."""
    conf = tmp_path / "conf" / "model"
    conf.mkdir(parents=True)
    (conf / "leaky.yaml").write_text(
        "name: leaky\nkind: remote\nmodel: m\nbase_url: http://127.0.0.1:9/v1\napi_key: sk-CANARY-in-a-file-0123\n"
    )
    err = refused(
        tmp_path,
        monkeypatch,
        capfd,
        [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "model=leaky", "hydra.run.dir=out"],
        cmd=lambda argv: ["run", *argv],
    )
    assert "model.api_key" in err and "sk-CANARY-in-a-file" not in err


@pytest.mark.e2e
def test_issue38_a_key_set_through_env_set_for_the_variable_a_secret_field_reads_is_refused_in_a_sweep(
    tmp_path, monkeypatch, capfd
):
    """The README's own example name passes any name test: what matters is that model.api_key_env reads it."""
    err = refused(
        tmp_path,
        monkeypatch,
        capfd,
        ["-m", "model.api_key_env=MYVAR", "+hydra.job.env_set.MYVAR={K}", "prompt=trpc_default,fact_keeper"],
    )
    assert "hydra.job.env_set.MYVAR" in err


@pytest.mark.e2e
def test_issue38_a_sweep_whose_experiment_file_sets_another_jobs_key_is_refused_before_multirun_yaml(
    tmp_path, monkeypatch, capfd
):
    """Each job of a sweep is composed and checked before Hydra writes multirun.yaml: one experiment file names
    the variable (model.api_key_env), the other sets it through env_set."""
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "names.yaml").write_text("# @package _global_\nmodel:\n  api_key_env: MYVAR\n")
    (conf / "sets.yaml").write_text(
        '# @package _global_\nhydra:\n  job:\n    env_set:\n      MYVAR: "sk-CANARY-set-in-a-file-0123"\n'
    )
    err = refused(
        tmp_path,
        monkeypatch,
        capfd,
        [
            *endpoint_args("URL", tmp_path),
            "dataset.limit=1",
            f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
            "+experiment=names,sets",
        ],
        cmd=lambda argv: ["run", "-m", *argv],
    )
    assert "hydra.job.env_set.MYVAR" in err and "sk-CANARY" not in err


@pytest.mark.e2e
def test_a_dsn_with_a_password_from_the_environment_is_refused_before_anything_is_written(tmp_path, monkeypatch, capfd):
    err = refused(
        tmp_path,
        monkeypatch,
        capfd,
        ["store=postgres"],
        env={"LME_PG_DSN": "host=127.0.0.1 dbname=db password = {K}"},
    )
    assert "store.dsn=***: carries a password" in err


@pytest.mark.e2e
def test_a_key_in_the_judge_url_of_a_config_file_is_refused_for_a_rescore(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(FakeModel()) as srv:
        assert main(base(srv.base_url, tmp_path, "hydra.run.dir=src")) == 0
    capfd.readouterr()
    conf = tmp_path / "conf" / "model"
    conf.mkdir(parents=True)
    (conf / "judgekey.yaml").write_text(
        "name: j\nkind: remote\nmodel: m\nbase_url: http://127.0.0.1:9/v1?code=sk-CANARY-judge-file-0123\n"
    )
    err = refused(
        tmp_path,
        monkeypatch,
        capfd,
        [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "judge=longmemeval", "+model@judge.endpoint=judgekey"],
        cmd=lambda argv: ["rescore", str(tmp_path / "src"), "run.progress=false", *argv],
    )
    assert "judge.endpoint.base_url=***: a query string" in err and "sk-CANARY" not in err


@pytest.mark.e2e
def test_a_key_from_the_env_var_named_by_api_key_env_is_used_and_never_written(tmp_path, monkeypatch, capfd):
    key = _key()
    monkeypatch.setenv("MY_ENDPOINT_KEY", key)
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(FakeModel()) as srv:
        assert main(base(srv.base_url, tmp_path, "model.api_key_env=MY_ENDPOINT_KEY")) == 0
        assert srv.requests and all(r["_auth"] == f"Bearer {key}" for r in srv.requests)
    out = capfd.readouterr()
    assert leaks(tmp_path, key) == [] and key not in out.out + out.err
    [run_json] = tmp_path.glob("runs/*/*/run.json")
    assert json.loads(run_json.read_text())["config"]["model"]["api_key_env"] == "MY_ENDPOINT_KEY"


@pytest.mark.e2e
def test_twelve_ordinary_overrides_name_one_capped_directory(tmp_path, monkeypatch, capfd):
    """Minor probe: `OSError: File name too long` from a long name; now cut, with a hash of the whole."""
    monkeypatch.chdir(tmp_path)
    extra = [
        "generation.temperature=0.0",
        "generation.max_tokens=384",
        "generation.seed=0",
        "wire.event_ids=sequential",
        "wire.timestamps=ms",
        "run.share_summary=true",
        "run.reference_latency=auto",
        "client.timeout_s=600",
        "client.max_tokens_param=max_tokens",
        "prompt=trpc_default",
        "summarizer=default",
        "dataset=oracle",
    ]
    with FakeOpenAIServer(FakeModel()) as srv:
        assert main(base(srv.base_url, tmp_path, *extra)) == 0, capfd.readouterr().err[-2000:]
        [records] = tmp_path.glob("runs/quickstart/*/records.jsonl")
        name = records.parent.name
        assert (
            len(name.encode()) <= 255
            and "~" in name
            and name.startswith("client.max_retries=0,client.max_tokens_param")
        )
        assert main(base(srv.base_url, tmp_path, *extra)) == 0  # the same command resumes the same directory
    assert list(tmp_path.glob("runs/quickstart/*")) == [records.parent]


@pytest.mark.e2e
def test_a_long_run_name_is_one_clear_error(tmp_path, monkeypatch, capfd):
    err = refused(tmp_path, monkeypatch, capfd, ["run.name=" + "n" * 300])
    assert "run.name: 300 bytes" in err


@pytest.mark.e2e
def test_an_unlisted_override_names_the_directory_by_its_key_never_its_value(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    value = "innocent-looking-value-0123456789"
    with FakeOpenAIServer(FakeModel()) as srv:
        assert main(base(srv.base_url, tmp_path, f"+notes.comment={value}")) == 0
        assert main(base(srv.base_url, tmp_path)) == 0
    names = sorted(p.parent.name for p in tmp_path.glob("runs/quickstart/*/records.jsonl"))
    assert len(names) == 2 and all(value not in n for n in names)
    assert [n for n in names if "other=" in n] and [n for n in names if "other=" not in n]


def test_ordinary_overrides_keep_the_directory_name_hydra_gave_them():
    """Existing runs resume in their directory: for plain overrides of declared settings the name is Hydra's own."""
    from hydra._internal.config_loader_impl import get_overrides_dirname
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from runners.rundir import overrides_dirname

    task = ["dataset=s", "model=openai", "run.limit=null", "mode=[long_context,summary]", "generation.max_tokens=64"]
    exclude = ["run.name", "cache.path"]
    hydra_name = get_overrides_dirname(OverridesParser.create().parse_overrides(task), exclude, ",", "=")
    assert overrides_dirname(task, exclude) == hydra_name


def test_the_shipped_model_configs_moved_to_api_key_env_without_changing_a_run_fingerprint(monkeypatch):
    """`api_key_env: VAR` hashes as the `api_key: ${oc.env:VAR,null}` it replaced, key set or not."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    from commands.cli import CONFIG_DIR
    from runners.fingerprint import fingerprint
    from runners.rundir import register_resolvers

    register_resolvers()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        new = compose(config_name="config", overrides=["model=openai"])
    old = OmegaConf.create(OmegaConf.to_container(new, resolve=False))
    with open_dict(old):
        del old.model["api_key_env"]
        old.model.api_key = "${oc.env:OPENAI_API_KEY,null}"
    for value in (None, "sk-test-0123456789"):
        if value is None:
            monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        else:
            monkeypatch.setenv("OPENAI_API_KEY", value)
        assert fingerprint(new) == fingerprint(old)
        assert fingerprint(new, version=1) == fingerprint(old, version=1)


@pytest.mark.parametrize(
    "added",
    ["+model.organization=org-CANARY0123", "++model.organization=org-CANARY0123", "+judge.x={a:org-CANARY0123}"],
)
def test_a_key_added_under_a_named_section_names_the_directory_by_its_key_never_its_value(added):
    """Issue 38 item 6: `+model.organization=<value>` is no declared setting: `other=<hash of its key>`, as for
    `+notes.x`; a group added with `+` (`+experiment=...`, `+model@judge.endpoint=...`) still names it."""
    from runners.rundir import overrides_dirname

    name = overrides_dirname(["model=endpoint", added, "+experiment=trpc_repro", "+model@judge.endpoint=openai"], [])
    assert "CANARY" not in name and "organization" not in name and "other=" in name
    assert "+experiment=trpc_repro" in name and "+model@judge.endpoint=openai" in name
