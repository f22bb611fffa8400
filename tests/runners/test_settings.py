"""Every numeric setting is validated once, before anything runs; each error names its key."""

import pytest
import yaml

from runners.setting_rules import SETTINGS, RunConfigError, check, validate_settings
from tests.support.bad_start import left_behind, one_error_line, run
from tests.support.paths import REPO

CONFIGS = REPO / "configs"
# configs/search/ is composed into retrieval.config (each retrieval preset's defaults list)
PLACED = {"search": "retrieval.config"}


@pytest.mark.e2e
@pytest.mark.parametrize(
    "override,culprit",
    [
        ("dataset.limit=abc", "dataset.limit must be an integer >= 0, got 'abc'"),
        ("dataset.limit=-2", "dataset.limit must be an integer >= 0, got -2"),
        ("dataset.sample_seed=1.5", "dataset.sample_seed must be an integer, got 1.5"),
        ("generation.max_tokens=0", "generation.max_tokens must be an integer >= 1, got 0"),
        ("generation.max_tokens=-5", "generation.max_tokens must be an integer >= 1, got -5"),
        ("summarizer.max_tokens=-1", "summarizer.max_tokens must be an integer >= 1, got -1"),
        ("client.timeout_s=0", "client.timeout_s must be a number > 0, got 0"),
        ("generation.temperature=3", "generation.temperature must be a number >= 0 and <= 2, got 3"),
        ("summarizer.temperature=-0.1", "summarizer.temperature must be a number >= 0 and <= 2, got -0.1"),
        ("generation.seed=abc", "generation.seed must be an integer, got 'abc'"),
        ("mode.long_context.max_events=0", "mode.long_context.max_events must be an integer >= 1, got 0"),
        ("summarizer.max_event_chars=true", "summarizer.max_event_chars must be an integer >= 1, got True"),
        ("client.timeout_s=nan", "client.timeout_s must be a number > 0, got nan"),
    ],
)
def test_bad_numeric_settings_name_their_key_before_anything_runs(tmp_path, capsys, override, culprit):
    assert run(tmp_path, override) == 2
    assert culprit in one_error_line(capsys.readouterr().err)
    assert left_behind(tmp_path) == {"FAILED.txt"}


@pytest.mark.e2e
def test_every_problem_is_reported_at_once(tmp_path, capsys):
    assert run(tmp_path, "dataset.limit=abc", "generation.max_tokens=0") == 2
    line = one_error_line(capsys.readouterr().err)
    assert "dataset.limit" in line and "generation.max_tokens" in line


def _numeric_leaves(node, prefix=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _numeric_leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield prefix


def test_every_numeric_setting_in_configs_has_a_rule():
    ruled = {r.key for r in SETTINGS}
    missing = set()
    for path in CONFIGS.rglob("*.yaml"):
        group = PLACED.get(path.parent.relative_to(CONFIGS).as_posix(), path.parent.relative_to(CONFIGS).as_posix())
        text = path.read_text()
        data = yaml.safe_load(text) or {}
        if "# @package _global_" in text:  # an experiment: its keys are global ones
            group = "."
        for leaf in _numeric_leaves(data):
            key = leaf if group == "." else f"{group}.{leaf}"
            if group == "mode":
                key = f"mode.{leaf}"
            if key.startswith(("hydra.", "model.size", "model.sources", "pricing.")):
                continue  # Hydra's own, the model file's metadata (checked against the download), prices (reports/cost.py)
            if key not in ruled:
                missing.add(f"{key} ({path.relative_to(CONFIGS)})")
    assert not missing


def test_valid_values_pass_and_nulls_use_defaults():
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(
        {
            "run": {"concurrency": 2},
            "client": {"concurrency": 4, "max_retries": 0, "timeout_s": 0.5},
            "generation": {"temperature": 0, "max_tokens": None},
            "dataset": {"limit": 0},
        }
    )
    validate_settings(cfg)
    cfg.client.timeout_s = None
    with pytest.raises(RunConfigError, match="client.timeout_s is required"):
        validate_settings(cfg)


def test_check_accepts_integral_floats_and_refuses_bools():
    rule = next(r for r in SETTINGS if r.key == "dataset.limit")
    assert check(rule, 3.0) is None and check(rule, True) is not None and check(rule, "3") is not None
