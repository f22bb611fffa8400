"""Bootstrap CIs, paired bootstrap, exact McNemar and win/loss/tie on known inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reports.stats import bootstrap_ci, mcnemar, mcnemar_exact, paired_bootstrap_ci, win_loss_tie


def test_bootstrap_is_deterministic_and_brackets_the_mean():
    x = np.random.default_rng(1).normal(0.6, 0.2, size=70)
    a, b = bootstrap_ci(x), bootstrap_ci(x)
    assert a == b  # same seed, same interval
    assert a.lo < a.mean < a.hi and a.n == 70
    assert a.mean == pytest.approx(float(x.mean()))
    # the percentile interval of a mean is close to the normal one for n = 70
    se = x.std(ddof=1) / math.sqrt(len(x))
    assert a.lo == pytest.approx(x.mean() - 1.96 * se, abs=0.02) and a.hi == pytest.approx(
        x.mean() + 1.96 * se, abs=0.02
    )
    assert bootstrap_ci(x, seed=7) != a  # the seed is what makes it reproducible
    narrow = bootstrap_ci(x, level=0.5)
    assert a.lo < narrow.lo < narrow.hi < a.hi


def test_bootstrap_known_small_inputs():
    est = bootstrap_ci([1, 0, 1, 1])
    assert est.mean == 0.75 and 0.0 <= est.lo <= est.hi <= 1.0
    const = bootstrap_ci([0.5, 0.5, 0.5])
    assert (const.mean, const.lo, const.hi) == (0.5, 0.5, 0.5)
    one = bootstrap_ci([3.0])
    assert (one.mean, one.lo, one.hi, one.n) == (3.0, 3.0, 3.0, 1)


def test_bootstrap_drops_nan_and_handles_empty():
    est = bootstrap_ci([1.0, float("nan"), 0.0])
    assert est.n == 2 and est.mean == 0.5
    empty = bootstrap_ci([float("nan")])
    assert empty.n == 0 and math.isnan(empty.mean) and empty.fmt() == "n/a"
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci([1.0], level=1.5)


def test_paired_bootstrap_on_known_deltas():
    a = np.array([0.1, 0.5, 0.9, 0.3])
    est = paired_bootstrap_ci(a, a + 0.25)
    assert est.mean == pytest.approx(0.25) and est.lo == pytest.approx(0.25) and est.hi == pytest.approx(0.25)
    # pairs with a missing side are dropped, not zero-filled
    est = paired_bootstrap_ci([1.0, float("nan"), 0.0], [1.0, 1.0, 1.0])
    assert est.n == 2 and est.mean == 0.5
    with pytest.raises(ValueError, match="length"):
        paired_bootstrap_ci([1.0], [1.0, 2.0])


def test_paired_bootstrap_is_narrower_than_unpaired_for_correlated_sides():
    rng = np.random.default_rng(3)
    base = rng.uniform(0, 1, 60)
    b = base + 0.05 + rng.normal(0, 0.01, 60)
    paired = paired_bootstrap_ci(base, b)
    assert paired.lo > 0  # the shift is detected because cases are paired
    unpaired_width = bootstrap_ci(b).hi - bootstrap_ci(b).lo
    assert paired.hi - paired.lo < unpaired_width / 5


@pytest.mark.parametrize(
    "b, c, p",
    [
        (10, 2, 2 * (1 + 12 + 66) / 4096),  # 0.0386
        (0, 6, 2 / 64),
        (5, 5, 1.0),
        (0, 0, 1.0),
        (3, 4, 1.0),
        (1, 0, 1.0),
    ],
)
def test_mcnemar_exact_known_values(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)
    assert mcnemar_exact(c, b) == pytest.approx(p, rel=1e-12)


def test_mcnemar_matches_scipy_binomtest():
    stats = pytest.importorskip("scipy.stats")
    for b, c in [(10, 2), (7, 20), (0, 13), (40, 55), (300, 260)]:
        assert mcnemar_exact(b, c) == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-9)


def test_mcnemar_counts_discordant_pairs():
    a = [1, 1, 1, 0, 0, 0, 1, float("nan")]
    b = [1, 0, 0, 1, 0, 0, 0, 1]
    m = mcnemar(a, b)
    assert (m.b, m.c, m.n) == (3, 1, 7)
    assert m.p_value == pytest.approx(mcnemar_exact(3, 1))
    with pytest.raises(ValueError, match="0/1"):
        mcnemar([0.5], [1.0])
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_win_loss_tie_respects_direction():
    a, b = [0.1, 0.5, 0.5, float("nan")], [0.2, 0.5, 0.4, 1.0]
    w = win_loss_tie(a, b)
    assert (w.wins, w.ties, w.losses, w.n) == (1, 1, 1, 3)
    tokens_a, tokens_b = [1000, 500, 300], [800, 600, 300]
    w = win_loss_tie(tokens_a, tokens_b, higher_is_better=False)
    assert (w.wins, w.ties, w.losses) == (1, 1, 1)  # fewer tokens is a win


def test_mcnemar_reports_agreement_and_cohens_kappa():
    from reports.stats import mcnemar

    m = mcnemar([1, 1, 0, 0], [1, 0, 0, 0])
    assert (m.b, m.c, m.n) == (1, 0, 4) and m.agreement == 0.75 and abs(m.kappa - 0.5) < 1e-12
    same = mcnemar([1, 0, 1, 0], [1, 0, 1, 0])
    assert same.agreement == 1.0 and same.kappa == 1.0
    constant = mcnemar([1, 1], [1, 1])  # chance agreement is total: kappa undefined, not 0 or 1
    assert constant.agreement == 1.0 and math.isnan(constant.kappa)
