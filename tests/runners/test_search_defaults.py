"""session_search settings declared once: each default in configs/search/default.yaml, each preset listing only
what it sets otherwise, every setting overridable under every preset, and a run's identity that does not care
whether a default is restated (while run directories of the releases that restated them still resume)."""

import dataclasses
import json

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.config_files import CONFIG_DIR
from harness.retrieval import text as tx
from harness.retrieval.config import SearchConfig, preset, preset_node
from runners.fingerprint import check_fingerprint, fingerprint
from runners.run_config import RunConfig
from runners.rundir import register_resolvers
from runners.setting_rules import RunConfigError

PRESETS = sorted(p.stem for p in (CONFIG_DIR / "retrieval").glob("*.yaml"))
BASE = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "search" / "default.yaml"))


def _compose(*overrides: str):
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def test_every_default_is_the_yaml_s_and_every_yaml_key_a_declared_setting():
    fields = {f.name for f in dataclasses.fields(SearchConfig)}
    assert set(BASE) - {"_target_"} == fields
    built = SearchConfig()
    assert {k: getattr(built, k) for k in fields} == {k: v for k, v in BASE.items() if k != "_target_"}
    assert built.snippet_chars == tx.MAX_SNIPPET  # the reference's cap, as the wire code uses it


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_lists_only_what_it_sets_otherwise(name):
    node = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "retrieval" / f"{name}.yaml"))["config"]
    restated = {k: v for k, v in node.items() if k != "name" and k in BASE and BASE[k] == v}
    assert not restated, f"configs/retrieval/{name}.yaml restates defaults: {restated}"
    assert "_target_" not in node  # from the defaults file


@pytest.mark.parametrize("name", PRESETS)
def test_any_setting_is_overridden_without_plus_under_any_preset(name):
    cfg = _compose(f"retrieval={name}", "retrieval.config.rrf_k=31", "retrieval.config.alpha=0.25")
    built = SearchConfig(**{k: v for k, v in cfg.retrieval.config.items() if k != "_target_"})
    assert (built.rrf_k, built.alpha, built.name) == (31, 0.25, name)
    assert built == preset(name, rrf_k=31, alpha=0.25)  # code reads the same declarations


def test_restating_a_default_is_the_same_run_and_changing_it_is_not():
    plain = fingerprint(_compose("retrieval=default"))
    assert fingerprint(_compose("retrieval=default", "retrieval.config.rrf_k=60")) == plain
    assert fingerprint(_compose("retrieval=default", "retrieval.config.window=2")) == plain
    assert fingerprint(_compose("retrieval=default", "retrieval.config.rrf_k=61")) != plain
    assert fingerprint(_compose("retrieval=default", "retrieval.config.fusion=rrf")) != plain  # default.yaml: score


# What the release before configs/search/default.yaml computed (identity versions 2 and 1, runners/fingerprint.py),
# each preset's file then restating some defaults: those run directories must still resume.
EARLIER = {
    (): ("2830a3d297da2423", "2830a3d297da2423"),
    ("retrieval=bm25",): ("235ea7b787199836", "235ea7b787199836"),
    ("retrieval=hybrid",): ("06c85a82d04dadb6", "06c85a82d04dadb6"),
    ("retrieval=speaker_neutral",): ("0df2bb771762922d", "0df2bb771762922d"),
    ("retrieval=trpc_parity",): ("f8fec983cf1b9b85", "f8fec983cf1b9b85"),
    ("retrieval=trpc_parity_openai",): ("91730cb64f67250b", "4d3274bfe68ab33b"),
    ("+experiment=quickstart",): ("36224166b40bd00f", "36224166b40bd00f"),
    ("memory=rag",): ("1fadf0f9f5b24895", "1fadf0f9f5b24895"),
    ("retrieval=hybrid", "retrieval.config.rrf_k=30"): ("243b146eb326fca6", "243b146eb326fca6"),
}


@pytest.mark.parametrize("overrides", list(EARLIER), ids=lambda o: " ".join(o) or "(defaults)")
def test_run_directories_of_the_earlier_identities_resume(overrides, tmp_path):
    config = RunConfig.build(_compose(*overrides))
    earlier = EARLIER[overrides]
    assert set(earlier) <= set(config.earlier_fingerprints)
    assert config.fingerprint not in config.earlier_fingerprints
    (tmp_path / "records.jsonl").write_text("")
    for old in earlier:
        (tmp_path / "fingerprint.json").write_text(json.dumps({"fingerprint": old}))
        check_fingerprint(tmp_path, config.fingerprint, config.earlier_fingerprints)
    (tmp_path / "fingerprint.json").write_text(json.dumps({"fingerprint": "0" * 16}))
    with pytest.raises(RunConfigError, match="different configuration"):
        check_fingerprint(tmp_path, config.fingerprint, config.earlier_fingerprints)


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_read_in_code_is_the_node_hydra_composes(name):
    composed = OmegaConf.to_container(_compose(f"retrieval={name}").retrieval, resolve=False)
    assert OmegaConf.to_container(preset_node(name), resolve=False) == composed


def test_an_unknown_preset_is_one_error_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown retrieval preset 'nope'; known: \['bm25'"):
        preset_node("nope")
