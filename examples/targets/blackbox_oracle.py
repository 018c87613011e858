"""What a valid bound can reach on the black-box suite: exact output distributions and the oracle's expected bound.

For the suite mechanisms whose outputs are discrete (the sparse-vector flags of Lyu, Su, Li 2017, Alg. 1, 2, 4, 5
and 6, report-noisy-max's index, RAPPOR and one-time RAPPOR), the probability of every output on each input of the
audited pair is computed exactly (a one-dimensional integral over the threshold noise for the sparse vectors and
over the maximum for report-noisy-max, a product over the differing Bloom bits for RAPPOR). From them,
:func:`expected_bound` gives the bound an auditor could expect who knew both distributions in advance: the exact
conditional test of dplens (:mod:`dplens.auditing.blackbox.poisson`) on the best event — a superlevel set of the
likelihood ratio, randomised at its edge (Neyman–Pearson) — at its expected counts, with the whole significance on
that one event and no trials spent on finding it. A black-box tester pays for finding the event, so it can expect
less; a published bound above this value at the same trials and confidence is out of reach for any valid test of
this kind except by luck.

At DP-Sniper's setting (2·10⁸ samples per side, confidence 0.9, two Clopper–Pearson bounds at α/2 each,
:func:`expected_bound_two_sided`) the oracle reproduces the published bounds (SVT1: 0.0863 against DP-Sniper's
0.0858), which checks the distributions. Nothing here is imported by dplens itself.

Example::

    python blackbox_oracle.py --trials 1000000 10000000
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from itertools import pairwise, product

import blackbox_suite as suite
import numpy as np
from scipy import stats

_GRID_POINTS = 400_001
_GRID_WIDTH = 60.0  # in units of the threshold noise's scale: the tails beyond carry < e⁻⁶⁰


def _laplace_cdf(x: np.ndarray, scale: float) -> np.ndarray:
    return np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0.0) / scale), 1.0 - 0.5 * np.exp(-np.maximum(x, 0.0) / scale))


def _threshold_grid(scale: float, kinks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points and Laplace(scale) density of the threshold noise ρ, with the integrand's kinks on the grid."""
    half = _GRID_WIDTH * scale
    r = np.unique(np.concatenate([np.linspace(-half, half, _GRID_POINTS), np.asarray(kinks, dtype=float)]))
    return r, np.exp(-np.abs(r) / scale) / (2.0 * scale)


def first_above(x, threshold: float, rho_scale: float, nu_scale: float) -> dict[tuple[int, ...], float]:
    """Sparse vector with cutoff c = 1 (Lyu et al. Alg. 1, 2 and 4 at c = 1): the probability of each output —
    ⊤ at query k after k ⊥ and ⊥-aborted after it, or ⊥ throughout — given ρ ~ Lap(rho_scale), νᵢ ~ Lap(nu_scale),
    ⊤ when xᵢ + νᵢ ≥ T + ρ: P(k) = ∫ f_ρ(r) Πᵢ₍ᵢ₌₀..ₖ₋₁₎ F_ν(T + r − xᵢ) · (1 − F_ν(T + r − xₖ)) dr."""
    x = np.asarray(x, dtype=float)
    r, density = _threshold_grid(rho_scale, np.concatenate([[0.0], x - threshold]))
    below = _laplace_cdf(threshold + r[None, :] - x[:, None], nu_scale)
    out: dict[tuple[int, ...], float] = {}
    prefix = np.ones_like(r)
    for k in range(x.size):
        flags = (suite.SVT_FALSE,) * k + (suite.SVT_TRUE,) + (suite.SVT_ABORTED,) * (x.size - k - 1)
        out[flags] = float(np.trapezoid(density * prefix * (1.0 - below[k]), r))
        prefix = prefix * below[k]
    out[(suite.SVT_FALSE,) * x.size] = float(np.trapezoid(density * prefix, r))
    return out


def all_flags(x, threshold: float, rho_scale: float, nu_scale: float) -> dict[tuple[int, ...], float]:
    """Sparse vector without cutoff (Alg. 6): the probability of each of the 2ⁿ flag patterns."""
    x = np.asarray(x, dtype=float)
    r, density = _threshold_grid(rho_scale, np.concatenate([[0.0], x - threshold]))
    log_below = np.log(np.maximum(_laplace_cdf(threshold + r[None, :] - x[:, None], nu_scale), 1e-300))
    log_above = np.log(np.maximum(1.0 - np.exp(log_below), 1e-300))
    out = {}
    for flags in product((0, 1), repeat=x.size):
        chosen = np.where(np.asarray(flags)[:, None] == 1, log_above, log_below)
        out[flags] = float(np.trapezoid(density * np.exp(chosen.sum(axis=0)), r))
    return out


def noiseless_queries(x, threshold: float, rho_scale: float) -> dict[tuple[int, ...], float]:
    """Alg. 5 (no query noise, no cutoff): ⊤ exactly when xᵢ ≥ T + ρ, so the pattern is fixed by the interval of
    ρ between consecutive cuts xᵢ − T."""
    x = np.asarray(x, dtype=float)
    edges = np.concatenate([[-np.inf], np.unique(x - threshold), [np.inf]])
    cdf = lambda t: 0.0 if t == -np.inf else 1.0 if t == np.inf else float(_laplace_cdf(np.array(t), rho_scale))  # noqa: E731
    out: dict[tuple[int, ...], float] = {}
    for low, high in pairwise(edges):
        inside = high - 0.5 if np.isfinite(high) else low + 0.5
        flags = tuple(int(v) for v in (x >= threshold + inside))
        out[flags] = out.get(flags, 0.0) + cdf(high) - cdf(low)
    return out


def noisy_argmax(x, noise: str, scale: float) -> dict[int, float]:
    """Report-noisy-max's index (Ding et al. 2018, Alg. 5 and 6): P(k) = ∫ f(t − xₖ) Πⱼ≠ₖ F(t − xⱼ) dt for
    Laplace or exponential noise of ``scale`` (ties have probability 0)."""
    x = np.asarray(x, dtype=float)
    half = _GRID_WIDTH * scale
    kinks = x if noise == "laplace" else np.array([])
    t = np.unique(np.concatenate([np.linspace(x.min() - half, x.max() + half, _GRID_POINTS), kinks]))
    u = t[None, :] - x[:, None]
    if noise == "laplace":
        density, cdf = np.exp(-np.abs(u) / scale) / (2 * scale), _laplace_cdf(u, scale)
    else:
        density = np.where(u >= 0, np.exp(-np.maximum(u, 0.0) / scale) / scale, 0.0)
        cdf = np.where(u >= 0, -np.expm1(-np.maximum(u, 0.0) / scale), 0.0)
    out = {}
    for k in range(x.size):
        others = np.prod(np.delete(cdf, k, axis=0), axis=0)
        out[k] = float(np.trapezoid(density[k] * others, t))
    return out


def snapped_laplace(q: float) -> dict[float, float]:
    """Mironov's snapping mechanism over the reals (suite.snapping_laplace): clamp_B(round_Λ(q + Lap(λ))), the
    probability of each multiple of Λ inside [−B, B] and of ±B (doubles move these by about 2⁻⁴⁹ relative)."""
    scale, grid, bound = suite.SNAPPING_SCALE, suite.SNAPPING_LAMBDA, suite.SNAPPING_BOUND
    q = min(bound, max(-bound, float(q)))
    top = int(bound // grid)
    cdf = lambda t: float(_laplace_cdf(np.array(t - q), scale))  # noqa: E731
    out = {float(k * grid): cdf((k + 0.5) * grid) - cdf((k - 0.5) * grid) for k in range(-top, top + 1)}
    out[bound] = out.get(bound, 0.0) + 1.0 - cdf((top + 0.5) * grid)
    out[-bound] = out.get(-bound, 0.0) + cdf((-top - 0.5) * grid)
    return out


def bit_vector(bloom_data, bloom_neighbour, one_given_bloom: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Independent reported bits, P(bit = 1) = one_given_bloom[Bloom bit]: the PMFs of the bits where the two
    Bloom filters differ (the others have the same distribution on both inputs and cancel in every ratio)."""
    differ = np.flatnonzero(np.asarray(bloom_data) != np.asarray(bloom_neighbour))
    p_data, p_neighbour = [], []
    for bits in product((0, 1), repeat=differ.size):
        pd = pn = 1.0
        for bit, j in zip(bits, differ, strict=True):
            one_d, one_n = one_given_bloom[int(bloom_data[j])], one_given_bloom[int(bloom_neighbour[j])]
            pd *= one_d if bit else 1.0 - one_d
            pn *= one_n if bit else 1.0 - one_n
        p_data.append(pd)
        p_neighbour.append(pn)
    return np.array(p_data), np.array(p_neighbour)


def _aligned(first: dict, second: dict) -> tuple[list, np.ndarray, np.ndarray]:
    keys = sorted(set(first) | set(second))
    return keys, np.array([first.get(k, 0.0) for k in keys]), np.array([second.get(k, 0.0) for k in keys])


def _svt(function: Callable, threshold: float, *scales: float) -> Callable:
    def outcomes(row):
        return _aligned(function(row.data, threshold, *scales), function(row.neighbour, threshold, *scales))

    return outcomes


def _argmax(noise: str, scale: float) -> Callable:
    def outcomes(row):
        return _aligned(noisy_argmax(row.data, noise, scale), noisy_argmax(row.neighbour, noise, scale))

    return outcomes


def _rappor(one_given_bloom: tuple[float, float]) -> Callable:
    def outcomes(row):
        data = suite.bloom_filter(int(row.data[0]))
        neighbour = suite.bloom_filter(int(row.neighbour[0]))
        differ = np.flatnonzero(data != neighbour)
        p, q = bit_vector(data, neighbour, one_given_bloom)
        return [(tuple(int(j) for j in differ), bits) for bits in product((0, 1), repeat=differ.size)], p, q

    return outcomes


_E = suite.EPSILON
OUTCOMES: dict[str, Callable] = {
    # (Lyu et al. 2017) Alg. 1: ρ ~ Lap(2/ε), ν ~ Lap(4c/ε); Alg. 2 at c = 1: the same scales (ρ redrawn only
    # after the one ⊤); Alg. 4: ρ ~ Lap(4/ε), ν ~ Lap(4/(3ε)); Alg. 5: ρ ~ Lap(2/ε), no ν; Alg. 6: both Lap(2/ε).
    "SVT1": _svt(first_above, suite.SVT1_THRESHOLD, 2 / _E, 4 / _E),
    "SVT2": _svt(first_above, suite.SVT_THRESHOLD, 2 / _E, 4 / _E),
    "SVT4": _svt(first_above, suite.SVT_THRESHOLD, 4 / _E, 4 / (3 * _E)),
    "SVT5": _svt(noiseless_queries, suite.SVT_THRESHOLD, 2 / _E),
    "SVT6": _svt(all_flags, suite.SVT_THRESHOLD, 2 / _E, 2 / _E),
    "SnappingLaplace": lambda row: _aligned(snapped_laplace(row.data[0]), snapped_laplace(row.neighbour[0])),
    # Report-noisy-max's index: Laplace (Alg. 5) or exponential (Alg. 6) noise of scale 2/ε.
    "ReportNoisyMax1": _argmax("laplace", 2 / _E),
    "ReportNoisyMax2": _argmax("exponential", 2 / _E),
    "Rappor": _rappor((suite.rappor_bit_probability(0), suite.rappor_bit_probability(1))),
    "OneTimeRappor": _rappor((suite.ONE_TIME_RAPPOR_F / 2, 1 - suite.ONE_TIME_RAPPOR_F / 2)),
}
"""Per row: (outputs, P on D, P on D′). An output is a flag tuple (sparse vectors), an index (report-noisy-max)
or (differing Bloom bits, their reported values) (RAPPOR: the other bits cancel in every ratio)."""


def _drop_keys(outcomes: Callable) -> Callable:
    def distributions(row):
        return outcomes(row)[1:]

    return distributions


DISTRIBUTIONS: dict[str, Callable] = {name: _drop_keys(outcomes) for name, outcomes in OUTCOMES.items()}
"""Per row: (P on D, P on D′) over the outputs of :data:`OUTCOMES`."""


def _events(p: np.ndarray, q: np.ndarray, fractions: int = 40):
    """(P[D ∈ S], P[D′ ∈ S]) for the likelihood-ratio superlevel sets S of both directions, randomised at the edge."""
    for first, second in ((p, q), (q, p)):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(second > 0, first / np.maximum(second, 1e-300), np.inf)
        taken_first = taken_second = 0.0
        for j in np.argsort(-ratio, kind="stable"):
            if first[j] <= 0:
                break
            for share in np.linspace(1.0 / fractions, 1.0, fractions):
                yield taken_first + share * first[j], taken_second + share * second[j]
            taken_first += first[j]
            taken_second += second[j]


def expected_bound(p: np.ndarray, q: np.ndarray, trials: float, confidence: float = 0.95) -> tuple[float, float]:
    """The oracle's bound at ``trials`` per side: the best, over likelihood-ratio events, of the exact conditional
    bound log(π⁻/(1 − π⁻)) at the expected counts (π⁻ the one-sided Clopper–Pearson bound on p/(p + q), a Beta
    quantile, so fractional counts are fine). Returns (bound, P[D ∈ S] of the best event)."""
    alpha = 1.0 - confidence
    best, where = -math.inf, 0.0
    for in_first, in_second in _events(np.asarray(p), np.asarray(q)):
        a, b = trials * in_first, trials * in_second
        pi = stats.beta.ppf(alpha, a, b + 1.0)
        if 0 < pi < 1:
            value = math.log(pi) - math.log1p(-pi)
            if value > best:
                best, where = value, in_first
    return best, where


def expected_bound_two_sided(p: np.ndarray, q: np.ndarray, trials: float, confidence: float = 0.9) -> float:
    """The same oracle with DP-Sniper's interval: log(p⁻) − log(q⁺), Clopper–Pearson at (1 − confidence)/2 each."""
    alpha = (1.0 - confidence) / 2.0
    best = -math.inf
    for in_first, in_second in _events(np.asarray(p), np.asarray(q)):
        a, b = trials * in_first, trials * in_second
        low = stats.beta.ppf(alpha, a, trials - a + 1.0)
        high = stats.beta.ppf(1.0 - alpha, b + 1.0, trials - b) if b < trials else 1.0
        if low > 0:
            best = max(best, math.log(low) - math.log(high))
    return best


def exact_epsilon(p: np.ndarray, q: np.ndarray) -> float:
    """max over outputs of |log p − log q| (∞ when an output is impossible on one side)."""
    seen = (p > 0) | (q > 0)
    with np.errstate(divide="ignore"):
        return float(np.max(np.abs(np.log(p[seen]) - np.log(q[seen]))))


def oracle_table(trials: list[float], confidence: float = 0.95) -> dict[str, dict[str, float]]:
    """Per mechanism with exact distributions: the pair's exact ε and the oracle's bound at each trial count."""
    out = {}
    for name, distributions in DISTRIBUTIONS.items():
        p, q = distributions(suite.BY_NAME[name])
        row = {"exact_epsilon": exact_epsilon(p, q)}
        for n in trials:
            row[f"{n:g}"] = expected_bound(p, q, n, confidence)[0]
        out[name] = row
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=float, nargs="+", default=[1e6, 1e7], help="trials per side")
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence of the bound")
    args = parser.parse_args(argv)
    table = oracle_table(args.trials, args.confidence)
    columns = " | ".join(f"oracle at {n:g}" for n in args.trials)
    print(f"| mechanism | exact ε of the pair | {columns} | published |")
    print("|---|---|" + "---|" * len(args.trials) + "---|")
    for name, row in table.items():
        published = suite.BY_NAME[name].published_bound
        cells = " | ".join(f"{row[f'{n:g}']:.4g} ({row[f'{n:g}'] / published:.2f}×)" for n in args.trials)
        print(f"| {name} | {row['exact_epsilon']:.5g} | {cells} | {published:.4g} |")


if __name__ == "__main__":
    main()
