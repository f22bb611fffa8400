"""Generated-input probes of the live gate's policy (reports/gate.py LIVE_POLICY through `evaluate`): for every
metric and mode it names, random baselines and moves. A move in the good direction or within the allowance
(`max(abs, rel * |baseline|)`, the mode's own entry first) never fails; beyond it, it always fails and says so;
a missing value fails; an exact entry fails on any move; a min/max entry bounds the value whatever the baseline."""

import random

import pytest

from reports.gate import EPS, LIVE_POLICY, Check, evaluate, policy_for
from reports.metrics import BUILTIN

MODES = ("long_context", "summary", "summary_ondemand", "memory")
# (mode, metric) for every metric the policy names, under each mode (a mode-specific entry where it has one)
PAIRS = sorted(
    (mode, metric)
    for mode, metric in {(mode, key.split("/", 1)[-1]) for key in LIVE_POLICY for mode in MODES}
    if policy_for(LIVE_POLICY, mode, metric) is not None
)


def _check(mode: str, metric: str, baseline: float) -> Check:
    tol = policy_for(LIVE_POLICY, mode, metric)
    assert tol is not None
    bounds = {k: tol[k] for k in ("min", "max") if k in tol}
    if bounds:
        return Check(mode=mode, metric=metric, **bounds)
    return Check(mode=mode, metric=metric, baseline=baseline, **tol)


def _direction(metric: str) -> bool:
    hib = BUILTIN.higher_is_better(metric)
    assert hib is not None, f"LIVE_POLICY names {metric!r}, which no built-in metric declares"
    return hib


@pytest.mark.parametrize("seed", range(4))
def test_moves_within_the_allowance_pass_and_beyond_it_fail(seed):
    rng = random.Random(seed)
    for mode, metric in PAIRS:
        tol = policy_for(LIVE_POLICY, mode, metric)
        if "min" in tol or "max" in tol:
            continue
        hib = _direction(metric)
        base = rng.choice([0.0, 1.0, rng.uniform(0, 1), rng.uniform(1, 1e5)])
        check = _check(mode, metric, base)
        if tol.get("exact"):  # a figure of the input alone: any move, either way, fails
            assert evaluate(check, base).status == "pass"
            moved = base + rng.choice([-1, 1]) * rng.uniform(1e-3, 1e3)
            assert evaluate(check, moved).failed, (mode, metric, base, moved)
            continue
        allow = max(tol.get("abs", 0.0), tol.get("rel", 0.0) * abs(base))
        bad = -1.0 if hib else 1.0
        assert evaluate(check, base).status == "pass", (mode, metric, base)
        better = base - bad * rng.uniform(1e-3, 1e3)
        assert evaluate(check, better).status == "better", (mode, metric, base, better)
        within = base + bad * allow * rng.uniform(0, 0.999)
        assert not evaluate(check, within).failed, (mode, metric, base, within, allow)
        beyond = base + bad * (allow * rng.uniform(1.001, 10) + 2 * EPS + 1e-4)  # past the float tolerance too
        out = evaluate(check, beyond)
        assert out.failed and "beyond the allowed" in out.reason, (mode, metric, base, beyond, allow, out)
        missing = evaluate(check, None)
        assert missing.failed and missing.reason == "metric missing in the run"


@pytest.mark.parametrize("seed", range(4))
def test_min_and_max_entries_bound_the_value_whatever_the_baseline(seed):
    rng = random.Random(50 + seed)
    for mode, metric in PAIRS:
        tol = policy_for(LIVE_POLICY, mode, metric)
        if "max" in tol:
            check = _check(mode, metric, rng.uniform(0, 100))
            assert not evaluate(check, tol["max"] - rng.uniform(0, 5)).failed
            assert evaluate(check, tol["max"] + rng.uniform(0.01, 5)).failed
        if "min" in tol:
            check = _check(mode, metric, rng.uniform(0, 100))
            assert not evaluate(check, tol["min"] + rng.uniform(0, 5)).failed
            assert evaluate(check, tol["min"] - rng.uniform(0.01, 5)).failed


def test_a_mode_s_own_entry_is_the_one_applied_and_only_to_that_mode():
    for key, tol in LIVE_POLICY.items():
        if "/" not in key:
            continue
        mode, metric = key.split("/", 1)
        assert policy_for(LIVE_POLICY, mode, metric) == tol
        for other in (m for m in MODES if m != mode and f"{m}/{metric}" not in LIVE_POLICY):
            assert policy_for(LIVE_POLICY, other, metric) == LIVE_POLICY.get(metric)
