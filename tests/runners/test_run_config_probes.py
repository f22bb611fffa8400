"""Generated-input probes of the settings' validation (runners/setting_rules.py through `RunConfig.build`): for
every declared setting, values drawn at random on both sides of its declared range, type and choices. An
invalid one is one RunConfigError naming its key (several: every key, in one error); a valid one builds."""

import math
import random
from contextlib import contextmanager

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict

from harness.config_files import CONFIG_DIR
from harness.settings import Setting
from runners.run_config import RunConfig
from runners.rundir import register_resolvers
from runners.setting_rules import SETTINGS, RunConfigError

CHECKED = [s for s in SETTINGS if s.kind in (int, float, bool) or s.choices is not None]


@pytest.fixture(scope="module")
def base():
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config")
    composed = OmegaConf.to_yaml(cfg)
    yield cfg
    assert OmegaConf.to_yaml(cfg) == composed, "a probe left a value behind in the shared config"


def _invalid(s: Setting, rng: random.Random) -> list[object]:
    if s.choices is not None:
        return [rng.choice(s.choices) + "_x", "", 3]
    if s.kind is bool:
        return [rng.choice(["yes", "true", "1"]), rng.randint(0, 1), 0.5]
    low = s.minimum
    out: list[object] = [True, math.nan, math.inf if s.maximum is not None or low is None else -math.inf, "12"]
    if low is not None:
        out.append(low if s.exclusive_min else low - rng.choice([1, 7, 1000]) * (1 if s.kind is int else 0.37))
    if s.maximum is not None:
        out.append(s.maximum + rng.choice([1, 3.5, 1e6]))
    if s.kind is int:
        out.append((low or 0) + rng.randint(1, 50) + 0.5)
    return out


def _valid(s: Setting, rng: random.Random) -> list[object]:
    if s.choices is not None:
        return [rng.choice(s.choices)]
    if s.kind is bool:
        return [rng.choice([True, False])]
    low = s.minimum if s.minimum is not None else -5
    top = s.maximum if s.maximum is not None else low + 1000
    pick = rng.uniform(low, top) if s.kind is float else rng.randint(math.ceil(low), math.floor(top))
    out: list[object] = [pick] if not (s.exclusive_min and pick == low) else []
    if not s.exclusive_min:
        out.append(int(low) if s.kind is int else float(low))
    if s.kind is int:
        out.append(float(math.ceil(low) + rng.randint(1, 9)))  # an integral float is accepted
    return [v for v in out if s.maximum is None or v <= s.maximum]


@contextmanager
def _with(base, values: dict[str, object]):
    """`base` with `values` set, put back after: the top-level node each key is under is copied and restored (or
    removed where the key added it), as a copy of the whole composed config per probed value was most of this
    file's time. The `base` fixture checks that every probe left it as composed."""
    tops = {key.split(".")[0] for key in values}
    saved = {t: base[t].copy() if t in base else None for t in tops}
    try:
        for key, value in values.items():
            OmegaConf.update(base, key, value, force_add=True)
        yield base
    finally:
        with open_dict(base):
            for t, node in saved.items():
                if node is None:
                    base.pop(t, None)
                else:
                    base[t] = node


def _votes_ok(s: Setting, v: object) -> bool:
    return (
        s.key != "judge.votes"
        or (isinstance(v, int) and not isinstance(v, bool) and v % 2 == 1)
        or (isinstance(v, float) and v.is_integer() and int(v) % 2 == 1)
    )


@pytest.mark.parametrize("seed", range(3))
def test_every_invalid_value_is_one_error_naming_its_key(base, seed):
    rng = random.Random(seed)
    for s in CHECKED:
        for value in _invalid(s, rng):
            with _with(base, {s.key: value}) as cfg, pytest.raises(RunConfigError) as e:
                RunConfig.build(cfg)
            assert s.key in str(e.value), (s.key, value, str(e.value))


@pytest.mark.parametrize("seed", range(3))
def test_every_valid_value_builds(base, seed):
    rng = random.Random(100 + seed)
    for s in CHECKED:
        for value in _valid(s, rng):
            if not _votes_ok(s, value):  # an even vote count has no majority: its own rule (test_judge_votes.py)
                continue
            try:
                with _with(base, {s.key: value}) as cfg:
                    RunConfig.build(cfg)
            except RunConfigError as e:
                pytest.fail(f"{s.key}={value!r} is valid ({s.describe()}) but was refused: {e}")


@pytest.mark.parametrize("seed", range(5))
def test_several_invalid_values_are_all_named_in_one_error(base, seed):
    rng = random.Random(200 + seed)
    picked = rng.sample(CHECKED, 4)
    values = {s.key: rng.choice(_invalid(s, rng)) for s in picked}
    with _with(base, values) as cfg, pytest.raises(RunConfigError) as e:
        RunConfig.build(cfg)
    assert all(key in str(e.value) for key in values), (values, str(e.value))
