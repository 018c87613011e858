"""Exact samplers for the discrete Laplace and discrete Gaussian distributions, in integer arithmetic.

Canonne, Kamath, Steinke, "The discrete Gaussian for differential privacy" (NeurIPS 2020, arXiv 2004.00010),
§5: Algorithm 1 (Bernoulli(exp(−γ)) for rational γ from Bernoulli(n/d) coins), Algorithm 2 (discrete Laplace
with scale t/s, here s = 1) and Algorithm 3 (discrete Gaussian by rejection from a discrete Laplace with
t = ⌊σ⌋ + 1). Every coin is ``rng.integers(0, m) < n`` — an exact rational probability — so no floating-point
number enters the output distribution (the leak of Mironov 2012 cannot happen). The loops are vectorised over
the batch (each pending draw runs its own rejection loop). Where an intermediate integer could exceed 64 bits
(a discrete Gaussian with σ above ~2¹³), a scalar Python-integer path is used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dplens.mechanisms.base import check_count, check_rng

__all__ = ["bernoulli_exp", "discrete_gaussian", "discrete_laplace"]

_INT64_SAFE = 1 << 62


def _bernoulli_exp_fraction(n: np.ndarray, d: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−n/d)) for 0 ≤ n ≤ d (CKS 2020 Algorithm 1, first part): K ← 1; while Bernoulli(n/(dK)):
    K ← K + 1; return K odd."""
    out = np.zeros(n.shape, dtype=bool)
    active = np.arange(n.size)
    k = np.ones(n.size, dtype=np.int64)
    while active.size:
        coin = rng.integers(0, d[active] * k[active]) < n[active]
        done = active[~coin]
        out[done] = (k[done] % 2) == 1
        active = active[coin]
        k[active] += 1
    return out


def bernoulli_exp(n: Any, d: Any, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(exp(−n/d)) coins for integer arrays n ≥ 0, d ≥ 1 (CKS 2020 Algorithm 1).

    Example:
        >>> import numpy as np
        >>> coins = bernoulli_exp(np.full(100_000, 1), np.full(100_000, 1), np.random.default_rng(0))
        >>> bool(abs(coins.mean() - np.exp(-1)) < 0.01)
        True
    """
    n = np.asarray(n, dtype=np.int64).reshape(-1)
    d = np.broadcast_to(np.asarray(d, dtype=np.int64), n.shape).copy()
    if np.any(n < 0) or np.any(d < 1):
        raise ValueError("bernoulli_exp needs n >= 0 and d >= 1")
    whole, rest = np.divmod(n, d)
    out = np.ones(n.shape, dtype=bool)
    # exp(−γ) = exp(−1)^⌊γ⌋ · exp(−(γ − ⌊γ⌋)): ⌊γ⌋ Bernoulli(exp(−1)) coins, stopping at the first failure.
    pending = np.flatnonzero(whole > 0)
    round_ = 0
    while pending.size:
        ones = np.ones(pending.size, dtype=np.int64)
        ok = _bernoulli_exp_fraction(ones, ones, rng)
        out[pending[~ok]] = False
        round_ += 1
        pending = pending[ok & (whole[pending] > round_)]
    alive = np.flatnonzero(out)
    if alive.size:
        out[alive] = _bernoulli_exp_fraction(rest[alive], d[alive], rng)
    return out


def discrete_laplace(t: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` exact draws of the discrete Laplace distribution P(z) ∝ exp(−|z|/t) on the integers
    (CKS 2020 Algorithm 2 with s = 1; t a positive integer).

    Example:
        >>> import numpy as np
        >>> z = discrete_laplace(3, 200_000, np.random.default_rng(1))
        >>> bool(abs((z == 0).mean() - np.tanh(1 / 6)) < 0.005)  # P(0) = (1 − e^{−1/t}) / (1 + e^{−1/t})
        True
    """
    if isinstance(t, bool) or not isinstance(t, int | np.integer) or t < 1:
        raise ValueError(f"t must be an integer >= 1; got {t!r}")
    size, rng = check_count(size, name="size"), check_rng(rng)
    out = np.zeros(size, dtype=np.int64)
    pending = np.arange(size)
    t = int(t)
    while pending.size:
        m = pending.size
        u = rng.integers(0, t, size=m)
        keep = bernoulli_exp(u, np.full(m, t), rng)
        # V: the number of successes before the first failure of Bernoulli(exp(−1)) coins.
        v = np.zeros(m, dtype=np.int64)
        running = np.flatnonzero(keep)
        while running.size:
            ones = np.ones(running.size, dtype=np.int64)
            success = bernoulli_exp(ones, ones, rng)
            v[running[success]] += 1
            running = running[success]
        x = u + t * v
        negative = rng.integers(0, 2, size=m) == 1
        accept = keep & ~(negative & (x == 0))
        out[pending[accept]] = np.where(negative[accept], -x[accept], x[accept])
        pending = pending[~accept]
    return out


def _uniform_below(bound: int, rng: np.random.Generator) -> int:
    """A uniform integer in [0, bound) for any Python integer bound (rejection on random bytes)."""
    if bound < _INT64_SAFE:
        return int(rng.integers(0, bound))
    bits = bound.bit_length()
    while True:
        value = int.from_bytes(rng.bytes((bits + 7) // 8), "little") >> (8 * ((bits + 7) // 8) - bits)
        if value < bound:
            return value


def _fraction_scalar(n: int, d: int, rng: np.random.Generator) -> bool:
    """Bernoulli(exp(−n/d)) for 0 ≤ n ≤ d in Python integers (CKS 2020 Algorithm 1, first part)."""
    k = 1
    while _uniform_below(d * k, rng) < n:
        k += 1
    return k % 2 == 1


def _bernoulli_exp_scalar(n: int, d: int, rng: np.random.Generator) -> bool:
    whole, rest = divmod(n, d)
    for _ in range(whole):
        if not _fraction_scalar(1, 1, rng):
            return False
    return _fraction_scalar(rest, d, rng)


def discrete_gaussian(sigma_squared: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` exact draws of the discrete Gaussian P(z) ∝ exp(−z²/(2σ²)) on the integers, σ² a positive
    integer (CKS 2020 Algorithm 3: t = ⌊σ⌋ + 1, Y ~ discrete Laplace(t), accept with probability
    exp(−(|Y| − σ²/t)²/(2σ²)) = exp(−(|Y|·t − σ²)²/(2σ²t²)), exact in integers).

    Example:
        >>> import numpy as np
        >>> z = discrete_gaussian(4, 200_000, np.random.default_rng(2))
        >>> bool(abs(z.var() - 4.0) < 0.1)
        True
    """
    if isinstance(sigma_squared, bool) or not isinstance(sigma_squared, int | np.integer) or sigma_squared < 1:
        raise ValueError(f"sigma_squared must be an integer >= 1; got {sigma_squared!r}")
    size, rng = check_count(size, name="size"), check_rng(rng)
    s2 = int(sigma_squared)
    t = int(np.floor(np.sqrt(s2))) + 1
    while (t - 1) * (t - 1) > s2:  # exact ⌊σ⌋ + 1 for large integers
        t -= 1
    while t * t <= s2:
        t += 1
    d = 2 * s2 * t * t
    out = np.zeros(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        y = discrete_laplace(t, pending.size, rng)
        m = np.abs(y) * t - s2
        if d * 64 < _INT64_SAFE and np.all(np.abs(m) < 3_000_000_000):
            accept = bernoulli_exp(m * m, np.full(m.size, d), rng)
        else:  # intermediate integers beyond 64 bits: exact Python integers
            accept = np.array([_bernoulli_exp_scalar(int(v) * int(v), d, rng) for v in m], dtype=bool)
        out[pending[accept]] = y[accept]
        pending = pending[~accept]
    return out
