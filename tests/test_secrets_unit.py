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
    assert set(secrets.url_secrets(url)) == {"user", "s3cr3t-pass", "KEY123456", "TOK987654"}
    assert secrets.redact_url(url) == "http://***@host:8000/v1?api_key=***&model=m&token=***"
    assert secrets.scrub_urls(f"failed at {url}.") == "failed at http://***@host:8000/v1?api_key=***&model=m&token=***."


@pytest.mark.parametrize(
    "arg",
    [
        "model.api_key=sk-literal",
        "model.api_key='${oc.decode:\"sk-x\"}'",
        "+judge.endpoint.api_key=${oc.env:K,'sk-default-literal'}",
        "+foo.password=hunter22",
        "model.base_url=http://h/v1?key=${oc.decode:'sk'}",
        "model.base_url=${oc.decode:x}",
    ],
)
def test_refused_overrides(arg):
    assert secrets.check_overrides([arg]) and "sk-" not in " ".join(secrets.check_overrides([arg]))


@pytest.mark.parametrize(
    "arg",
    [
        "model.api_key=${oc.env:K}",
        "model.api_key='${oc.env:K,null}'",
        "model.api_key=null",
        "judge.endpoint.api_key=${model.api_key}",
        "+e.api_key_env=MYKEY",
        "model.base_url=http://127.0.0.1:8000/v1",
        "generation.max_tokens=3",
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
    assert canary not in text and "pw-123456" not in text and text.count("***") >= 3


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
    assert fingerprint(cfg, legacy=True) == fingerprint(other, legacy=True)  # the old identity masked the name
