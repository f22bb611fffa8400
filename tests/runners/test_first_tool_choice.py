"""Local model configs force summary_ondemand's first search (a labelled deviation); hosted models keep `auto`."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from commands.cli import CONFIG_DIR
from reports.deviations import protocol_deviations
from reports.render import build_report
from tests.support.report_fixtures import meta, standard_run

DEVIATION = "deviation: first tool call forced (tool_choice=required on the first turn); reference: auto"


def _mode(*overrides: str):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return instantiate(cfg.mode.summary_ondemand)


@pytest.mark.parametrize("model", [None, "qwen25_coder_15b", "qwen25_coder_05b", "smollm2_135m"])
def test_local_models_default_to_a_required_first_search(model):
    assert _mode(*([f"model={model}"] if model else [])).first_tool_choice == "required"


@pytest.mark.parametrize(
    "overrides", [["model=openai"], ["model=endpoint", "model.model=m", "model.base_url=http://x"]]
)
def test_hosted_models_keep_the_reference_auto(overrides):
    assert _mode(*overrides).first_tool_choice is None  # None: no tool_choice sent = the reference's auto


def test_the_reference_setting_is_one_override_away():
    assert _mode("mode.summary_ondemand.first_tool_choice=null").first_tool_choice is None


def _with_choice(choice):
    m = meta()
    m["config"]["mode"] = {"summary_ondemand": {"first_tool_choice": choice}}
    return m


def test_report_header_labels_the_deviation_only_when_it_applies(tmp_path):
    assert protocol_deviations(_with_choice("required")) == [DEVIATION]
    assert protocol_deviations(_with_choice(None)) == [] and protocol_deviations(meta()) == []
    reference = build_report(standard_run(tmp_path / "reference"))  # its config has no forced search
    assert DEVIATION not in reference["markdown"].read_text() and DEVIATION not in reference["html"].read_text()
    run = standard_run(tmp_path / "local")
    (run / "run.json").write_text(json.dumps(_with_choice("required")))
    out = build_report(run)
    md_head = out["markdown"].read_text().split("## Reference table")[0]
    html_head = out["html"].read_text().split("<h2>Reference table</h2>")[0]
    assert DEVIATION in md_head and DEVIATION in html_head
