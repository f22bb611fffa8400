"""harness/secrets.py: which names and URL parts are secrets, which overrides are refused, and the log/stream masks."""

import io
import logging

import pytest

from harness import secrets


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "model.api_key",
        "judge.endpoint.api_key",
        "apikey",
        "API_KEY",
        "token",
        "auth_token",
        "access_token",
        "secret",
        "client_secret",
        "password",
        "db_password",
        "authorization",
        "x-api-key",
        "secret_key",
        "private_key",
        "credentials",
    ],
)
def test_secret_names(key):
    assert secrets.is_secret_name(key)


@pytest.mark.parametrize(
    "key",
    [
        "api_key_env",
        "retrieval.embedder.api_key_env",
        "max_tokens",
        "token_ratio",
        "max_embed_tokens",
        "base_url",
        "model",
        "tokenizer",
        "keyword_require_all",
    ],
)
def test_not_secret_names(key):
    assert not secrets.is_secret_name(key)


def test_api_key_env_names_a_secret_env_var(monkeypatch):
    from omegaconf import OmegaConf

    monkeypatch.setenv("MY_EMBED_KEY", "sk-embed-123456")
    cfg = OmegaConf.create({"retrieval": {"embedder": {"api_key_env": "MY_EMBED_KEY"}}, "x": "${oc.env:MY_EMBED_KEY}"})
    assert "sk-embed-123456" in secrets.config_secrets(cfg)
    masked = secrets.mask_config(OmegaConf.to_container(cfg, resolve=True), secrets.config_secrets(cfg))
    assert masked == {"retrieval": {"embedder": {"api_key_env": "MY_EMBED_KEY"}}, "x": "***"}


def test_url_secrets_and_redaction():
    url = "http://user:s3cr3t-pass@host:8000/v1?api_key=KEY123456&model=m&token=TOK987654"
    assert {"user", "s3cr3t-pass", "KEY123456", "TOK987654"} <= set(secrets.url_secrets(url))
    assert secrets.redact_url(url) == "http://host:8000/v1"
    assert secrets.scrub_urls(f"failed at {url}.") == "failed at http://host:8000/v1."


@pytest.mark.parametrize(
    "url",
    [
        "http://u:sk-CANARY@h:8/v1?subscription-key=sk-CANARY",
        "http://h:8/v1?X-Amz-Signature=sk-CANARY&a=b#frag",
        "http://h:8/v1?sk-CANARY%2F1234",
        "http://sk-CANARY%40x:y@h:8/v1",
        "HTTP://H:8/v1;p?q=sk-CANARY",
    ],
)
def test_describe_endpoint_keeps_scheme_host_port_path_only(url):
    """Issue 20 probes 4-6: no userinfo, query string or fragment, whatever the names or encoding."""
    described = secrets.describe_endpoint(url)
    assert "CANARY" not in described and described.lower().startswith("http://h:8/v1")


@pytest.mark.parametrize(
    "arg",
    [
        "model.api_key=sk-CANARYVAL",
        "model.api_key='${oc.decode:\"sk-x\"}'",
        "+judge.endpoint.api_key=${oc.env:K,'sk-default-literal'}",
        "+foo.password=hunter22",
        "model.base_url=http://h/v1?key=${oc.decode:'sk'}",
        "model.base_url=${oc.decode:x}",
        # issue 20: chains through other nodes, nested dicts, any query name, DSN forms, env_set, sweeps
        "model.api_key=${model.foo}",
        "judge.endpoint.api_key=${model.api_key}",
        "+model.extra={api_key:sk-CANARYVAL}",
        "+judge.endpoint={base_url:'http://h/v1',api_key:sk-CANARYVAL}",
        "model.base_url='http://h/v1?subscription-key=sk-CANARYVAL'",
        "model.base_url='http://h/v1?X-Amz-Signature=sk-CANARYVAL'",
        "model.base_url='http://h/v1?sk-CANARYVAL%2F1234'",
        "model.base_url=http://user:sk-CANARYVAL@h/v1",
        "model.base_url=http://127.0.0.1/v1,http://user:sk-CANARYVAL@h/v1",
        "store.dsn='host=h dbname=db password = sk-CANARYVAL'",
        "store.dsn=postgresql://u@h/db?password=sk-CANARYVAL",
        "store.dsn=postgresql://u:sk-CANARYVAL@h/db",
        "hydra.job.env_set.LME_HARNESS_API_KEY=sk-CANARYVAL",
        "hydra.job.env_set.OPENAI_API_KEY=sk-CANARYVAL",
        "model.api_key_env=sk-CANARYVAL-not-a-name",
        "+notes.x=${oc.decode:'\"http:\\x2F\\x2Fu:sk-CANARYVAL@h\"'},b",
    ],
)
def test_refused_overrides(arg):
    bad = secrets.check_overrides([arg])
    assert bad and "sk-" not in " ".join(bad) and "CANARYVAL" not in " ".join(bad)


@pytest.mark.parametrize(
    "arg",
    [
        "model.api_key=${oc.env:K}",
        "model.api_key='${oc.env:K,null}'",
        "model.api_key=null",
        "+e.api_key_env=MYKEY",
        "model.api_key_env=MY_KEY",
        "model.base_url=http://127.0.0.1:8000/v1",
        "generation.max_tokens=3",
        "store.dsn=postgresql://lme@db-host:5432/lme",
        "store.dsn='host=h dbname=db user=lme'",
        "hydra.job.env_set.OMP_NUM_THREADS=2",
    ],
)
def test_allowed_overrides(arg):
    assert secrets.check_overrides([arg]) == []


def test_log_filter_masks_messages_arguments_and_tracebacks():
    canary = "sk-log-canary-0123456789"
    secrets.register([canary])
    stream = io.StringIO()
    logger = logging.getLogger("test_secrets_unit")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    secrets.install_log_filter(logger)
    try:
        logger.error("key %s at http://u:pw-123456@h/v1", canary)
        try:
            raise RuntimeError(f"echo {canary}")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert canary not in text and "pw-123456" not in text and text.count("***") >= 2
    assert "key *** at http://h/v1" in text  # the URL as describe_endpoint writes it


def test_redacting_stream():
    canary = "sk-stream-canary-987654321"
    secrets.register([canary])
    inner = io.StringIO()
    secrets.RedactingStream(inner).write(f"printed {canary}\n")
    assert inner.getvalue() == "printed ***\n"


def test_closing_a_redacting_stream_leaves_the_real_stream_open():
    """A logging handler that closes its stream at shutdown (absl's) must not close the real stdout/stderr."""
    inner = io.StringIO()
    stream = secrets.RedactingStream(inner)
    stream.close()
    assert not inner.closed and not stream.closed
    stream.write("still writable\n")
    assert inner.getvalue() == "still writable\n"


def test_run_json_and_fingerprint_keep_an_env_var_name(monkeypatch):
    """Issue 13: an env var NAME (api_key_env: OPENAI_API_KEY) is not a secret: run.json's config keeps it and the
    fingerprint tells two such configs apart; the key itself is masked. One test (secrets.is_secret_name) decides."""
    from omegaconf import OmegaConf

    from runners.fingerprint import fingerprint
    from runners.provenance import redacted_config

    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abcdef123456")
    cfg = OmegaConf.create({"retrieval": {"embedder": {"api_key_env": "OPENAI_API_KEY", "api_key": "sk-lit-987654"}}})
    assert redacted_config(cfg)["retrieval"]["embedder"] == {"api_key_env": "OPENAI_API_KEY", "api_key": "***"}
    other = OmegaConf.create({"retrieval": {"embedder": {"api_key_env": "OTHER_KEY", "api_key": "sk-lit-987654"}}})
    assert fingerprint(cfg) != fingerprint(other)
    assert fingerprint(cfg, version=1) == fingerprint(other, version=1)  # the old identity masked the name


@pytest.mark.parametrize(
    "argv, culprit",
    [
        # issue 38 item 2: the variable a secret field reads, whatever its name, is never set through Hydra
        (["model.api_key_env=MYVAR", "+hydra.job.env_set.MYVAR=sk-CANARYVAL"], "hydra.job.env_set.MYVAR"),
        (["+hydra.job.env_set={MYVAR:sk-CANARYVAL}", "model.api_key_env=MYVAR"], "hydra.job.env_set.MYVAR"),
        (["judge.endpoint.api_key_env=A,B", "+hydra.job.env_set.B=sk-CANARYVAL"], "hydra.job.env_set.B"),
        (["model.api_key=${oc.env:WHO}", "+hydra.job.env_set.WHO=sk-CANARYVAL"], "hydra.job.env_set.WHO"),
        (["store.password_env=PGP", "hydra.job.env_copy=[HOME,PGP]"], "hydra.job.env_copy"),
        (["memory.api_key_env=V", "+hydra.launcher.ray.init.runtime_env.env_vars.V=sk-CANARYVAL"], "hydra.launcher"),
        (["model.api_key_env=V", "+hydra.launcher.setup=['export V=sk-CANARYVAL']"], "hydra.launcher.setup"),
        (["model.base_url=${oc.env:URLV}", "+hydra.job.env_set.URLV=http://u:sk-CANARYVAL@h/v1"], "env_set.URLV"),
        # ... nor read into what Hydra writes in clear (directory names, multirun.yaml)
        (["hydra.run.dir=runs/${oc.env:OPENAI_API_KEY}"], "hydra.run.dir"),
        (["retrieval.embedder.api_key_env=E", "hydra.sweep.subdir=${oc.env:E}"], "hydra.sweep.subdir"),
        (["hydra.run.dir=runs/${model.api_key}"], "hydra.run.dir"),
        (["+notes.a=${oc.env:LME_HARNESS_API_KEY}", "hydra.sweep.dir=s/${notes.a}"], "hydra.sweep.dir"),
        (["hydra.run.dir=runs/${oc.env:${notes.name}}"], "hydra.run.dir"),
    ],
)
def test_hydra_settings_never_define_or_read_a_secret_fields_variable(argv, culprit):
    bad = secrets.check_overrides(argv)
    assert bad and culprit in " ".join(bad) and "CANARYVAL" not in " ".join(bad)


@pytest.mark.parametrize(
    "argv",
    [
        ["model.api_key_env=MYVAR", "+hydra.job.env_set.OMP_NUM_THREADS=2"],
        ["model.api_key_env=MYVAR", "hydra.job.env_copy=[HOME]"],
        ["hydra.run.dir=runs/${oc.env:HOME}/x", "hydra.sweep.subdir=${hydra.job.num}"],
        ["hydra.launcher.ray.init.address=127.0.0.1:6379"],
    ],
)
def test_hydra_settings_that_touch_no_secret_variable_are_allowed(argv):
    assert secrets.check_overrides(argv) == []


def test_the_composed_config_refuses_hydra_settings_defining_a_variable_its_secret_fields_read():
    """What an experiment file sets (env_set under `hydra:`, a field naming the variable) is seen on the composed
    config; the message names the key, never the value."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(
        {
            "memory": {"api_key_env": "PROVIDER_CFG"},
            "hydra": {"job": {"env_set": {"PROVIDER_CFG": "sk-CANARYVAL", "OMP_NUM_THREADS": "1"}}},
        }
    )
    with pytest.raises(secrets.SecretConfigError) as e:
        secrets.check_config(cfg)
    assert "hydra.job.env_set.PROVIDER_CFG" in str(e.value) and "OMP" not in str(e.value)
    assert "CANARYVAL" not in str(e.value)
    # a sweep's other job reads it: refused in this job's config too
    other = OmegaConf.create({"hydra": {"job": {"env_set": {"X_CFG": "sk-CANARYVAL"}}}})
    secrets.check_config(other)
    with pytest.raises(secrets.SecretConfigError):
        secrets.check_config(other, {"X_CFG"})
