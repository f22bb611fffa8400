"""Settings declared once (harness/settings.py `Setting`): validation, the run fingerprint's non-result keys and
the run directory's name exclusions are computed from the declarations, and adding a setting is the YAML plus one
declaration."""

import dataclasses

import pytest
import yaml
from omegaconf import OmegaConf

from harness.retrieval.config import SearchConfig
from harness.retrieval.embedders import OpenAIEmbedder
from harness.scoring.judges import LongMemEvalJudge
from harness.settings import ClientSettings, RunSettings, declared, judge_model, setting
from runners import fingerprint as fp_module
from runners import setting_rules as run_settings
from runners.components import embedder_with_client
from runners.setting_rules import SETTINGS, RunConfigError, dirname_exclusions, non_result_keys, validate_settings
from runners.wire import WireShape
from tests.support.paths import REPO

CONFIGS = REPO / "configs"
# configs/search/ is composed into retrieval.config (each retrieval preset's defaults list)
PLACED = {"search": "retrieval.config"}
CONFIG = yaml.safe_load((CONFIGS / "config.yaml").read_text())
URL = "http://127.0.0.1:9/v1"

# What earlier releases left out of a run's identity and of its directory name (runners/fingerprint.py's and
# configs/config.yaml's hand-written lists): a run directory they made must still resume under the same name.
EARLIER_NON_RESULT_KEYS = {
    "run.concurrency", "run.progress", "run.max_consecutive_failures", "client.concurrency", "client.timeout_s",
    "client.max_retries", "client.backoff_base_s", "client.backoff_max_s", "client.preflight", "run.name", "cache",
    "store.kind", "store.dsn", "store.password_env",
}  # fmt: skip
EARLIER_DIRNAME_EXCLUSIONS = {
    "run.name", "run.progress", "run.concurrency", "run.max_consecutive_failures", "client.concurrency", "cache.path",
    "model.base_url", "judge.endpoint.base_url", "model.api_key", "judge.endpoint.api_key", "model.api_key_env",
    "judge.endpoint.api_key_env", "store.dsn", "store.password_env",
}  # fmt: skip
# Added with the hosted memory adapters (harness/memory/hosted.py): no earlier run set them, so no earlier name or
# identity moves.
HOSTED_NON_RESULT_KEYS = {"memory.concurrency", "memory.scope_prefix", "memory.max_retries"}
HOSTED_DIRNAME_EXCLUSIONS = HOSTED_NON_RESULT_KEYS | {"memory.base_url", "memory.api_key_env"}


def test_the_derived_key_sets_are_those_earlier_run_directories_were_made_with():
    expected = EARLIER_NON_RESULT_KEYS | HOSTED_NON_RESULT_KEYS
    assert set(non_result_keys()) == set(fp_module.NON_RESULT_KEYS) == expected
    assert set(dirname_exclusions()) == EARLIER_DIRNAME_EXCLUSIONS | HOSTED_DIRNAME_EXCLUSIONS


def test_hydras_exclude_keys_are_the_declared_exclusions():
    listed = CONFIG["hydra"]["job"]["config"]["override_dirname"]["exclude_keys"]
    assert len(listed) == len(set(listed))
    assert set(listed) == set(dirname_exclusions())


def test_every_key_declared_once():
    keys = [s.key for s in SETTINGS]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("section", ["run", "client", "wire", "generation", "cache"])
def test_a_config_yaml_setting_is_declared_and_a_declared_one_has_its_default_in_the_yaml(section):
    declared_keys = {s.key.split(".", 1)[1] for s in SETTINGS if s.key.startswith(f"{section}.")}
    assert set(CONFIG[section]) - declared_keys == set()  # in the YAML, undeclared
    classes = {"run": RunSettings, "client": ClientSettings, "wire": WireShape}
    if section in classes:  # declared on a dataclass: the default is the YAML's unless the field states one
        with_field_default = {
            f.metadata["setting"].get("name", f.name)
            for f in dataclasses.fields(classes[section])
            if f.default is not dataclasses.MISSING
        }
        assert declared_keys - set(CONFIG[section]) - with_field_default == set()  # declared, default nowhere


def _leaves(node, prefix=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(node, (bool, int, float)):
        yield prefix


def test_every_number_and_boolean_in_configs_is_declared():
    declared_keys = {s.key for s in SETTINGS}
    missing = set()
    for path in CONFIGS.rglob("*.yaml"):
        text = path.read_text()
        folder = path.parent.relative_to(CONFIGS).as_posix()
        group = "." if "# @package _global_" in text else PLACED.get(folder, folder)
        for leaf in _leaves(yaml.safe_load(text) or {}):
            key = leaf if group == "." else f"{group}.{leaf}"
            if key.startswith(("hydra.", "model.size", "model.sources", "pricing.")) or "._" in key:
                continue  # Hydra's own (`_partial_`), the model file's metadata (checked against the download), prices
            if key not in declared_keys:
                missing.add(f"{key} ({path.relative_to(CONFIGS)})")
    assert not missing


def _valid():
    return OmegaConf.create({"run": {"concurrency": 1}, "client": {"concurrency": 1, "timeout_s": 1, "max_retries": 0}})


def test_adding_a_setting_is_one_declaration(monkeypatch):
    # A new `run.knob` (no effect on results, at least 2): its dataclass field is the whole declaration.
    extra = dataclasses.make_dataclass(
        "Extra", [("knob", int, dataclasses.field(default=3, metadata=setting(minimum=2, results=False)))]
    )
    added = SETTINGS + declared(extra, "run")
    monkeypatch.setattr(run_settings, "SETTINGS", added)
    cfg = _valid()
    cfg.run.knob = 1
    with pytest.raises(RunConfigError, match=r"^run.knob must be an integer >= 2, got 1$"):
        validate_settings(cfg)
    assert "run.knob" in non_result_keys(added) and "run.knob" not in non_result_keys()
    assert "run.knob" in dirname_exclusions(added) and "run.knob" not in dirname_exclusions()
    monkeypatch.setattr(fp_module, "NON_RESULT_KEYS", non_result_keys(added))
    base = {"run": {"concurrency": 1}, "model": {"name": "m"}}
    fps = {fp_module.fingerprint(OmegaConf.create({**base, "run": {"concurrency": 1, "knob": k}})) for k in (3, 9)}
    assert len(fps) == 1


def test_the_worked_example_a_run_field_is_read_with_no_other_line():
    # docs/architecture.md "Adding a setting": `run.heartbeat_s` is one field of RunSettings (and its YAML default);
    # from_config reads it with no line of its own (here the value a YAML default would give comes from `cfg`).
    plus = dataclasses.make_dataclass(
        "RunSettingsPlus",
        [("heartbeat_s", int, dataclasses.field(metadata=setting(minimum=1, results=False)))],
        bases=(RunSettings,),
        frozen=True,
    )
    built = plus.from_config({"heartbeat_s": 30})
    assert built.heartbeat_s == 30 and built.concurrency == CONFIG["run"]["concurrency"]
    with pytest.raises(RunConfigError, match=r"run.heartbeat_s must be int"):
        plus.from_config({"heartbeat_s": "soon"})
    assert declared(plus, "run")[-1] == run_settings.Setting("run.heartbeat_s", int, 1, results=False)


@pytest.mark.parametrize(("key", "bad", "good"), [("budget_chars", 79, 80), ("hit_chars", 1, 80), ("rrf_k", 0, 1)])
def test_a_retrieval_range_is_stated_once_and_checked_the_same_from_config_or_code(key, bad, good):
    cfg = _valid()
    OmegaConf.update(cfg, f"retrieval.config.{key}", bad)
    with pytest.raises(RunConfigError, match=rf"^retrieval.config.{key} must be an integer >= {good}, got {bad}$"):
        validate_settings(cfg)
    with pytest.raises(ValueError, match=rf"^SearchConfig.{key} must be an integer >= {good}, got {bad}$"):
        SearchConfig(**{key: bad})
    assert getattr(SearchConfig(**{key: good}), key) == good


def test_the_official_judge_params_are_its_yaml_ones():
    params = yaml.safe_load((CONFIGS / "judge" / "longmemeval.yaml").read_text())["params"]
    assert LongMemEvalJudge(model=None).params == params  # type: ignore[arg-type]


def test_the_judge_model_is_its_endpoint_else_the_answer_model():
    answer, own = {"name": "a"}, {"name": "j"}
    assert judge_model({"model": answer, "judge": {"endpoint": own}}) == (own, True)
    assert judge_model({"model": answer, "judge": {"_target_": "x"}}) == (answer, False)
    assert judge_model(OmegaConf.create({"model": answer, "judge": None})) == (answer, False)


def test_the_client_settings_reach_a_remote_embedder(tmp_path):
    assert OpenAIEmbedder(base_url=URL).client.timeout_s == CONFIG["client"]["timeout_s"]
    settings = ClientSettings.from_config({"timeout_s": 7, "max_retries": 1, "concurrency": 2})
    cfg = OmegaConf.create(
        {"retrieval": {"embedder": {"_target_": "harness.retrieval.embedders.OpenAIEmbedder", "base_url": URL}}}
    )
    client = embedder_with_client(cfg.retrieval, settings)["embedder"].client
    assert (client.timeout_s, client.max_retries, client.settings.concurrency) == (7, 1, 2)
    static = {"_target_": "harness.retrieval.embedders.HashingEmbedder"}
    assert embedder_with_client(OmegaConf.create({"embedder": static}), settings) == {}
