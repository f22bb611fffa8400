"""One default per setting (harness/settings.py): configs/config.yaml's value reaches every way of building a
client or a run, and a mode's config key is its name."""

import pytest
import yaml
from omegaconf import OmegaConf

from harness.llm.client import LLMClient
from harness.llm.endpoint import Endpoint, make_client
from harness.llm.models import ModelSpec
from harness.settings import ClientSettings, GenerationSettings, RunSettings
from runners.modes import SummaryMode, modes_from_config
from runners.setting_rules import RunConfigError
from tests.support.bad_start import one_error_line, run
from tests.support.paths import REPO

CONFIG = yaml.safe_load((REPO / "configs" / "config.yaml").read_text())
URL = "http://127.0.0.1:9/v1"


def _endpoint() -> Endpoint:
    spec = ModelSpec.from_config({"name": "e", "kind": "remote", "model": "m", "base_url": URL})
    return Endpoint(spec, URL, None, cache_namespace=URL)


@pytest.mark.parametrize("key", ["timeout_s", "max_retries", "max_tokens_param"])
def test_client_defaults_are_the_yaml_ones_however_the_client_is_built(key):
    want = CONFIG["client"][key]
    built = [
        LLMClient(base_url=URL, model="m"),
        make_client(_endpoint(), {}, None),
        make_client(_endpoint(), None, None),
    ]
    assert [getattr(c, key) for c in built] == [want] * 3
    assert getattr(ClientSettings.default(), key) == want


def test_a_configured_client_value_wins_and_keywords_override_settings():
    assert make_client(_endpoint(), {"timeout_s": 7}, None).timeout_s == 7
    s = ClientSettings.from_config({"timeout_s": 9, "max_retries": 1})
    c = LLMClient(base_url=URL, model="m", settings=s, max_retries=0)
    assert (c.timeout_s, c.max_retries, c.settings.concurrency) == (9, 0, CONFIG["client"]["concurrency"])


def test_run_and_generation_settings_come_from_config():
    r = RunSettings.from_config({})
    assert (r.max_consecutive_failures, r.reference_latency) == (
        CONFIG["run"]["max_consecutive_failures"],
        CONFIG["run"]["reference_latency"],
    )
    assert RunSettings.from_config({"max_consecutive_failures": None}).max_consecutive_failures == 0
    g = GenerationSettings.from_config(OmegaConf.create({"temperature": 0, "top_p": None, "max_tokens": 384}))
    assert g.as_params() == {"temperature": 0, "max_tokens": 384}  # null is not sent


def test_a_modes_config_key_is_its_name():
    cfg = OmegaConf.create(
        {
            "summary": {"_target_": "runners.modes.SummaryMode"},
            "summary_user": {"_target_": "runners.modes.SummaryMode", "injection": "user"},
        }
    )
    modes = modes_from_config(cfg)
    assert [m.name for m in modes] == ["summary", "summary_user"]
    assert all(isinstance(m, SummaryMode) for m in modes) and modes[1].injection == "user"


def test_a_mode_name_other_than_its_key_is_one_error_naming_the_key():
    cfg = OmegaConf.create({"short": {"_target_": "runners.modes.SummaryMode", "name": "summary"}})
    with pytest.raises(RunConfigError, match=r"mode\.short\.name='summary'"):
        modes_from_config(cfg)


@pytest.mark.e2e
def test_the_cli_reports_a_mismatched_mode_name_once(tmp_path, capsys):
    code = run(tmp_path, "mode=summary", "+mode.summary.name=other")
    assert code == 2
    assert "mode.summary.name='other'" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "client,culprit",
    [
        ({"timeout_s": "abc"}, "client.timeout_s must be float, got 'abc'"),
        ({"max_retries": 1.5}, "client.max_retries must be int, got 1.5"),
        ({"concurrency": True}, "client.concurrency must be int, got True"),
        ({"preflight": "no"}, "client.preflight must be bool, got 'no'"),
    ],
)
def test_client_settings_built_outside_a_run_still_name_the_bad_key(client, culprit):
    with pytest.raises(RunConfigError) as info:
        make_client(_endpoint(), client, None)
    assert str(info.value) == culprit


def test_a_valid_boolean_setting_is_accepted():
    assert ClientSettings.from_config({"preflight": False}).preflight is False


def test_the_served_window_has_one_fallback():
    spec = ModelSpec.from_config({"name": "e", "kind": "remote", "model": "m", "base_url": URL})
    assert spec.window == 8192
    assert (
        ModelSpec.from_config(
            {"name": "e", "kind": "remote", "model": "m", "base_url": URL, "context_window": 1000}
        ).window
        == 1000
    )


def test_a_mode_default_is_read_from_its_yaml_not_restated(tmp_path, monkeypatch):
    import harness.settings as settings
    from runners.modes import LongContextMode, SummaryOnDemandMode

    (tmp_path / "mode").mkdir()
    (tmp_path / "mode" / "long_context.yaml").write_text("long_context:\n  max_events: 7\n")
    (tmp_path / "mode" / "summary_ondemand.yaml").write_text(
        "summary_ondemand:\n  injection: user\n  max_tool_iterations: 2\n"
    )
    monkeypatch.setattr(settings, "CONFIG_FILE", tmp_path / "config.yaml")
    settings._group_option.cache_clear()
    try:
        assert LongContextMode().max_events == 7
        m = SummaryOnDemandMode()
        assert (m.injection, m.max_tool_iterations) == ("user", 2)
    finally:
        settings._group_option.cache_clear()
