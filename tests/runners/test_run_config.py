"""One typed settings object per run (runners/run_config.py, issue 22 item 1): built once from the composed config,
validated once, frozen, and what the pipeline receives instead of the raw config."""

import ast
import dataclasses

import pytest
from hydra import compose, initialize_config_dir

from harness.config_files import CONFIG_DIR
from runners import run_config
from runners.run_config import RunConfig, StoreSettings
from runners.setting_rules import RunConfigError
from tests.support.paths import REPO

ROOT = REPO

# The functions that take the composed config itself (a parameter named `cfg`), each because the config as
# composed (or as run.json recorded it) is genuinely its input: the command entries that build the run's settings
# from it, the builders of typed settings, and the writers that record or check the config as given.
TAKE_THE_COMPOSED_CONFIG = {
    # command entries (commands/cli.py and the commands it calls right after composition)
    "commands/cli.py": {"_main", "_run_task", "_retrieval_task", "task"},
    "runners/replay.py": {"run_benchmark"},
    "commands/rescore.py": {"rescore_run", "_write_meta"},  # _write_meta: run.json's config as given
    "commands/plan.py": {"plan_run"},
    "commands/retrieval_eval.py": {"run_retrieval_eval"},
    "commands/merge.py": {"selection"},  # the shards' run.json config
    # composition into typed settings (validated once)
    "runners/run_config.py": {"build"},
    "runners/skeleton.py": {"configure"},
    "runners/setting_rules.py": {"validate_settings"},
    "harness/settings.py": {"judge_model", "_plain", "_merged", "from_config"},
    "harness/bounds.py": {"from_config"},
    "harness/llm/models.py": {"from_config", "_to_plain"},
    "runners/wire.py": {"from_config"},
    # what records or checks the config as given
    "runners/fingerprint.py": {"fingerprint", "earlier_fingerprints"},
    "runners/provenance.py": {"redacted_config", "provenance"},
    "harness/secrets.py": {"_resolved_leaves", "config_secrets", "check_config"},
    "runners/rundir.py": {"refuse_secrets"},
}


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def _taking_cfg() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for pkg in ("harness", "runners", "commands", "reports"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for n in ast.walk(ast.parse(path.read_text())):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    args = n.args.posonlyargs + n.args.args + n.args.kwonlyargs
                    if "cfg" in [a.arg for a in args]:
                        out.setdefault(str(path.relative_to(ROOT)), set()).add(n.name)
    return out


def test_only_composition_entries_and_config_writers_take_the_raw_config():
    taking = _taking_cfg()
    extra = {f: sorted(names - TAKE_THE_COMPOSED_CONFIG.get(f, set())) for f, names in taking.items()}
    extra = {f: names for f, names in extra.items() if names}
    assert not extra, f"pipeline functions taking the raw config (pass the run's RunConfig instead): {extra}"
    # the count this step ends at (docs/architecture.md): 50 before it
    assert sum(len(v) for v in taking.values()) <= 31


def test_the_settings_are_built_once_typed_and_frozen():
    config = RunConfig.build(_compose("run.concurrency=2", "client.timeout_s=7"))
    assert config.run.concurrency == 2 and config.client.timeout_s == 7.0
    assert config.generation.params["max_tokens"] == 384  # configs/config.yaml's, read not restated
    assert config.wire.event_ids == "sequential" and config.store == StoreSettings()
    assert config.judge_model == config.model  # no judge endpoint: the answer model judges
    assert not config.judge_has_own_model and config.judged
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.run = config.run  # type: ignore[misc]


def test_the_fingerprint_is_computed_once(monkeypatch):
    config = RunConfig.build(_compose())
    calls = []
    real = run_config.fingerprint
    monkeypatch.setattr(run_config, "fingerprint", lambda cfg, **kw: calls.append(kw) or real(cfg, **kw))
    first = config.fingerprint
    assert config.fingerprint == first and calls == [{}]
    earlier = config.earlier_fingerprints
    assert config.earlier_fingerprints == earlier and len(earlier) == 2 and len(calls) == 1  # its own module's
    assert first == real(config.composed)  # the run's identity, as runners/fingerprint.py computes it


def test_a_bad_setting_is_one_error_naming_it_when_the_settings_are_built():
    with pytest.raises(RunConfigError, match=r"generation.max_tokens must be an integer >= 1, got -5"):
        RunConfig.build(_compose("generation.max_tokens=-5"))
    with pytest.raises(RunConfigError, match=r"store.kind='mysql' is not one of"):
        RunConfig.build(_compose("+store.kind=mysql"))
