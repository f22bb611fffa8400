"""Statistics for aggregates and paired comparisons: percentile bootstrap CIs, exact McNemar, win/loss/tie.

Everything is deterministic: every resampling draws from `numpy.random.default_rng(seed)`, so the same
records always give the same intervals (reports and gates are reproducible byte for byte).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

DEFAULT_N_BOOT = 2000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A mean with its percentile-bootstrap interval over `n` values (NaN when n == 0)."""

    mean: float
    lo: float
    hi: float
    n: int

    def fmt(self, spec: str = "{:.3f}") -> str:
        if self.n == 0 or math.isnan(self.mean):
            return "n/a"
        return f"{spec.format(self.mean)} [{spec.format(self.lo)}, {spec.format(self.hi)}]"


def _clean(values: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    return x[~np.isnan(x)]


def _percentile_interval(x: np.ndarray, n_boot: int, seed: int, level: float) -> tuple[float, float]:
    if np.all(x == x[0]):  # one value, or all equal: every resample has the same mean
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    means = x[idx].mean(axis=1)
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [a, 1.0 - a])
    return float(lo), float(hi)


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
) -> Estimate:
    """Mean of `values` (NaN dropped: "not computed" is not a score) with a percentile-bootstrap CI."""
    if not 0 < level < 1:
        raise ValueError(f"bootstrap_ci: level must be in (0, 1), got {level}")
    x = _clean(values)
    if x.size == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    lo, hi = _percentile_interval(x, n_boot, seed, level)
    return Estimate(float(x.mean()), lo, hi, int(x.size))


def paired_bootstrap_ci(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
) -> Estimate:
    """Mean paired delta `b - a` with a bootstrap CI that resamples pairs (cases), not the two sides apart.

    Pairs where either side is NaN are dropped.
    """
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.shape != xb.shape:
        raise ValueError(f"paired_bootstrap_ci: sides differ in length ({xa.size} vs {xb.size})")
    keep = ~(np.isnan(xa) | np.isnan(xb))
    return bootstrap_ci(xb[keep] - xa[keep], n_boot=n_boot, seed=seed, level=level)


@dataclass(frozen=True)
class McNemar:
    """Discordant pairs of two binary outcomes on the same cases and the exact two-sided p-value.

    `b`: A correct, B wrong. `c`: A wrong, B correct. `n`: pairs compared (both sides judged).
    `agreement` and Cohen's `kappa` say how far two judges (or runs) agree beyond chance; kappa is NaN when
    chance agreement is total (both sides constant and equal).
    """

    b: int
    c: int
    n: int
    p_value: float
    agreement: float = float("nan")
    kappa: float = float("nan")


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: 2·P(X ≤ min(b, c)), X ~ Binomial(b + c, 1/2), capped at 1."""
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact: counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    # Exact rational arithmetic: no underflow for large n, and b == c gives exactly 1.
    tail = Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


def mcnemar(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> McNemar:
    """McNemar's exact test on paired binary outcomes (1/0; NaN pairs dropped)."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    keep = ~(np.isnan(xa) | np.isnan(xb))
    xa, xb = xa[keep], xb[keep]
    bad = set(np.unique(np.concatenate([xa, xb]))) - {0.0, 1.0}
    if bad:
        raise ValueError(f"mcnemar: outcomes must be 0/1, got {sorted(bad)[:3]}")
    nb = int(((xa == 1) & (xb == 0)).sum())
    nc = int(((xa == 0) & (xb == 1)).sum())
    n = int(xa.size)
    agreement = kappa = float("nan")
    if n:
        agreement = (n - nb - nc) / n
        pa, pb = float(xa.mean()), float(xb.mean())
        chance = pa * pb + (1 - pa) * (1 - pb)
        kappa = (agreement - chance) / (1 - chance) if chance < 1 else float("nan")
    return McNemar(nb, nc, n, mcnemar_exact(nb, nc), agreement, kappa)


@dataclass(frozen=True)
class WinLossTie:
    """Per-case outcome of B against A: win = B higher (for a higher-is-better metric)."""

    wins: int
    losses: int
    ties: int

    @property
    def n(self) -> int:
        return self.wins + self.losses + self.ties


def win_loss_tie(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    higher_is_better: bool = True,
    tol: float = 1e-12,
) -> WinLossTie:
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    keep = ~(np.isnan(xa) | np.isnan(xb))
    d = xb[keep] - xa[keep]
    if not higher_is_better:
        d = -d
    return WinLossTie(int((d > tol).sum()), int((d < -tol).sum()), int((np.abs(d) <= tol).sum()))
