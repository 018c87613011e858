"""Random allocation ("balls and bins") of a Gaussian mechanism: certified privacy-loss distributions.

One epoch of t steps in which a record takes part in exactly one step chosen uniformly at random (independently of
the other records), or, with ``inclusion`` ρ < 1, in none with probability 1 − ρ. Feldman and Shenfeld ("Privacy
amplification by random allocation", arXiv 2502.08202, 2025, Section 3; and the near-exact PLD of arXiv 2602.17284)
show that for adaptively chosen Gaussian steps of noise multiplier σ the dominating pair is the non-adaptive one
(remove direction; the add direction is the reverse pair):

    P = (1 − ρ)·N(0, σ²I_t) + (ρ/t)·Σ_j N(e_j, σ²I_t),   Q = N(0, σ²I_t),

and it is attained (a record whose clipped gradient always points along one direction, the others contributing
nothing), so its exact ε is both an upper and a lower bound on the ε of the mechanism. The likelihood ratio is a
function of one statistic:

    R(S) = dP/dQ = 1 − ρ + ρ·S/t,   S = Σ_j Y_j,   Y_j = exp(x_j/σ² − 1/(2σ²)),

with the Y_j i.i.d. log-normal under Q (log-mean −s²/2, log-sd s = 1/σ, mean 1), so both hockey sticks are
expectations under Q: δ_remove(ε) = E_Q[(R(S) − e^ε)₊] and δ_add(ε) = E_Q[(1 − e^ε·R(S))₊].

The law of S is a t-fold convolution, computed on a uniform grid of spacing h in the Fourier domain by dplens's PLD
engine (:func:`dplens.accountant.pld_engine._compose_kind`: Chernoff windows, the wrapped mass and a floating-point
bound, all paid for). Two discretisations of one coordinate's pair (ν*, ν) = (the tilted law y·ν(dy), ν) make the
bracket certified, both with an error of order h² (not h):

- **Upper end (split).** Each cell [kh, (k+1)h] of the ratio y sends its mass to its two ends, to (k+1)h with
  probability (y − kh)/h. The split pair keeps both masses of every cell and its ratio at each atom is exactly the
  atom's value, so the true per-coordinate pair is a post-processing of it (Blackwell: a ratio inside [a, b] is a
  mixture of the ratios a and b; the same argument as the connect-the-dots PLD of Doroshenko et al., PETS 2022,
  Theorem 3.3, in the ratio y instead of the loss). The mixture-over-positions structure of (P, Q) is kept
  coordinate by coordinate (the post-processing is applied to every coordinate), so the split pair dominates
  (P, Q), and its likelihood ratio is exactly R(S̃) with S̃ on the grid. Ratios above the top y_top of the grid
  split onto a geometric ladder y_top·r^k above it (the same argument), up to where E[(Y − b)₊] ≤ 10⁻²⁰ (at an
  infinite loss): draws with one coordinate on the ladder are counted at finite losses, the others' sum bounded from
  above (two or more there: an infinite loss, by a union bound).
- **Lower end (merge).** Cells [(k − ½)h, (k + ½)h) are merged into atoms at their conditional means m_k (a
  post-processing of the true pair, so the merged pair is dominated). Its ratio is R(S_M), S_M = G + D with G on the
  grid and D = Σ_j (m_{k_j} − k_j·h) a sum of t i.i.d. small deviations, bounded around its exact mean by
  Bernstein's inequality (rare cells with large deviations — near y = 0, where the density is steep — are counted
  with a binomial tail instead), except on an event of probability η that is subtracted from δ. Above the grid the
  ladder's cells are merged at their means, and a draw with one coordinate there counted with the others' sum
  bounded from below (the composition of all t coordinates, less a bound on two of them); the rest is left out.

Both hockey sticks are non-decreasing in R(s) (remove) or non-increasing (add), so replacing S_M by a bound on the
right side gives a lower bound on each.

Where one coordinate's tail is too heavy for a uniform grid (σ ≲ 0.7 at few steps per epoch), the same two
constructions — split and merge, both keeping means — are made on a geometric grid y_k = e^{kΔz}, coordinate by
coordinate and again at every pairwise sum of a binary powering, the convex order being kept by sums (the section
"Heavy tails" below). A record placed in k > 1 steps per epoch is handled by :mod:`dplens.accountant.samplers`
(decomposition into 1-of-⌊t/k⌋ allocations: an upper bound only).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from dplens.accountant import pld_engine as engine
from dplens.accountant._numerics import binomial_tail_bound, log_ndtr, ndtr

__all__ = ["AllocationLaws", "allocation_laws", "allocation_pld", "coarse_grids"]

#: The ratio grid's top at most where E[(Y − y_top)₊] is this (above it the ladder, see ``LADDER_RATIO``).
TOP_MASS = 1e-13
#: ... or up to this much where the grid would otherwise exceed its points (σ ≲ 0.67, many steps, if the ladder's
#: lower top does not already fit): the heavy-tailed path is far looser there (at σ = 0.6, t = 10⁴, 10 epochs,
#: δ = 10⁻⁶ its bracket was [0.447, 0.99993] when it rounded log S at every sum; of order Δz² now, its Δz must still
#: resolve a per-epoch loss spread of ~0.03 at 10⁴ steps).
TOP_MASS_MAX = 1e-9
#: Above the grid's top the ratio is split (upper end) or merged (lower end) on a geometric ladder of this ratio, up to
#: where E[(Y − b)₊] ≤ ``LADDER_TAIL`` (the rest at an infinite loss): a coordinate above the grid keeps a finite loss
#: (σ = 0.55, t = 10⁴, 10 epochs: the grid's top mass, 3·10⁻⁹ at an infinite loss, exceeded δ = 10⁻⁹).
LADDER_RATIO = 1.02
LADDER_TAIL = 1e-20
#: From ``MANY_STEPS`` steps per epoch the grid's top is at most this many times the sum's mean + 40 deviations.
LADDER_TOP = 2.0
#: ... and at least where E[(Y − top)₊] ≤ this (at t = 2 and σ = 0.75 the grid's spacing then is 0.004, not 0.11: the
#: add direction's losses near S = 0 resolved, its upper end 5.44 instead of 14.2).
LADDER_GRID_MASS = 1e-6
#: Probability budget of the lower end's deviation bound (Bernstein and binomial tails), per epoch.
DEVIATION_FAILURE = 1e-14
#: Q-mass each composition may leave outside its window (the P-mass there is bounded through √ of it).
WINDOW_TAIL = 1e-28
#: Grid points of one coordinate's law and of the composed window (the accuracy/speed trade-off: the bracket is
#: O(h²) at the upper end and O(h/t) at the lower end).
TARGET_POINTS = 2**18
MAX_POINTS = 2**22
#: Beyond this many points of the ratio grid (a heavy tail: σ ≲ 0.7) the law of S is computed on a geometric grid
#: instead (the heavy-tailed path, below).
LINEAR_POINTS = 2**19
#: ... and beyond this many from ``MANY_STEPS`` steps per epoch on (where the heavy-tailed path, then rounding log S
#: at every pairwise sum, gave [0.194, 0.572] around 0.358 at σ = 0.7, t = 10⁴, 10 epochs; on the ratio grid of 2²⁰
#: points it is [0.3563, 0.3581], issue 47).
LINEAR_POINTS_MANY = 2**20
MANY_STEPS = 1000
#: ... where the ratio grid is also finer, up to a 28th of one coordinate's standard deviation (not a 20th: at σ = 0.7,
#: t = 10⁴, 10 epochs, δ = 10⁻⁶ the bracket narrows from 0.502 % to 0.314 %, its lower end moving).
SPREAD_CELLS_MANY = 28
_UNIT_ROUNDOFF = 2.0**-53
_SQRT_HALF = math.sqrt(0.5)
#: Floating-point error (a bound on Σ wᵢ·δqᵢ) below which the compositions spend no effort on tightening it: the
#: share of the ledger's composition per run (:func:`dplens.accountant.pld_engine.event_precision`), rounded down to a
#: power of ten within these two (one cache entry per decade), the finest outside a composition. The finest is what
#: δ = 10⁻⁹ needs (σ = 0.55, t = 10⁴, 10 epochs: issue 47); the coarsest, where δ allows it, halves the laws' cost.
FINEST_PRECISION = 1e-13
COARSEST_PRECISION = 1e-10


def _precision() -> float:
    """The laws' precision for the composition asking for them (see :data:`FINEST_PRECISION`)."""
    share = engine.event_precision()
    if share is None or not share > FINEST_PRECISION:
        return FINEST_PRECISION
    share = min(share, COARSEST_PRECISION)
    decade = 10.0 ** math.floor(math.log10(share))
    return decade if decade <= share else decade / 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class _Law:
    """One direction of one discretisation on its window: atoms at losses ``losses[i]`` with masses ``mass[i]`` under
    the direction's first distribution (P for remove, Q for add), the mass at +∞, and a bound, in δ, on the
    floating-point and window errors of the masses (for weights in [0, 1])."""

    losses: np.ndarray
    mass: np.ndarray
    infinity: float
    error: float


@dataclass(frozen=True, slots=True, kw_only=True)
class _Side:
    """One discretisation (the split upper end or the merged lower end): its remove and add directions."""

    remove: _Law
    add: _Law


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocationLaws:
    """The upper (split) and lower (merge) laws of R(S) for one epoch, on a grid of spacing ``spacing``."""

    sigma: float
    steps: int
    inclusion: float
    spacing: float
    top: float
    upper: _Side
    lower: _Side


def _lognormal_masses(edges: np.ndarray, s: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Q-masses and partial means E[Y; cell] of the cells between consecutive ``edges`` (edges[0] = 0), and the
    Q-mass and partial mean above the last edge, for Y log-normal with log-sd ``s`` and mean 1.

    Q(Y ≤ y) = Φ((log y + s²/2)/s) and E[Y; Y ≤ y] = Φ((log y − s²/2)/s); differences are taken between CDFs below
    the median and survival functions above it, so small cells keep their relative precision in both tails.
    """
    with np.errstate(divide="ignore"):
        log_edges = np.log(edges)
    z = (log_edges + 0.5 * s * s) / s
    z1 = z - s

    def cells(zz: np.ndarray) -> tuple[np.ndarray, float]:
        cdf, sf = ndtr(zz), ndtr(-zz)
        lower = cdf[:-1] < 0.5
        mass = np.where(lower, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])
        return np.maximum(mass, 0.0), float(sf[-1])

    q, q_top = cells(z)
    m1, m1_top = cells(z1)
    return q, m1, q_top, m1_top


def _excess(y: float, s: float) -> float:
    """E[(Y − y)₊] for Y log-normal of log-sd ``s`` and mean 1: Black–Scholes, Φ(d₁) − y·Φ(d₂)."""
    d1 = (-math.log(y) + 0.5 * s * s) / s
    return 0.5 * math.erfc(-d1 * _SQRT_HALF) - y * 0.5 * math.erfc(-(d1 - s) * _SQRT_HALF)


def _top_of_grid(s: float, budget: float) -> float:
    """The smallest y_top (to 1 %) with E[(Y − y_top)₊] ≤ budget."""

    def excess(y: float) -> float:
        return _excess(y, s)

    high = 2.0
    while excess(high) > budget:
        high *= 2.0
    low = high / 2.0
    while high / low > 1.01:
        middle = math.sqrt(low * high)
        low, high = (middle, high) if excess(middle) > budget else (low, middle)
    return high


def _composed(
    factors: list[tuple[np.ndarray, int]], spacing: float, scale: float, precision: float
) -> engine.ComposedPmf:
    """The law of a sum of independent draws (each factor a grid PMF of values k·``spacing``, drawn ``count`` times)
    on its Chernoff window, in units of ``scale`` (so the engine's values stay within its floating-point range)."""
    grid_factors = [(engine.GridPmf(start=0, pmf=pmf), count) for pmf, count in factors if count > 0]
    return engine._compose_kind(
        grid_factors, spacing / scale, WINDOW_TAIL, precision=precision, mgf_block=_mgf_block(factors, spacing)
    )


def _mgf_block(factors: list[tuple[np.ndarray, int]], spacing: float) -> int:
    """Blocks of grid points for the window's Chernoff bounds (:func:`dplens.accountant.pld_engine._log_mgf`): each
    block's mass is put at its end, which moves every draw by up to a block, so t draws widen the window by up to
    t·block·h. Kept to a tenth of the sum's own spread (√t standard deviations of one draw; found at t = 10⁸, where
    blocks of 256 points asked for a window of 2.6·10¹⁰ points), and at most 256 (cheap for long factors)."""
    count = sum(c for _, c in factors)
    pmf = max(factors, key=lambda item: item[1])[0]
    values = np.arange(pmf.size, dtype=float)
    mass = float(pmf.sum())
    mean = float(np.sum(pmf * values)) / mass
    sd = math.sqrt(max(float(np.sum(pmf * (values - mean) ** 2)) / mass, 0.0))  # in grid points
    block = int(min(256, max(1, 0.1 * sd / math.sqrt(max(count, 1)))))
    # Blocks of one point: blocks growing along the grid instead (a bound from ~10⁴ blocks, not 10⁵–10⁶ points).
    return engine.GEOMETRIC_BLOCKS if block == 1 else block


def _values(composed: engine.ComposedPmf, spacing: float) -> np.ndarray:
    return (composed.start + np.arange(composed.pmf.size)) * spacing


def _ratio(values: np.ndarray, inclusion: float, steps: int) -> np.ndarray:
    """R = 1 − ρ + ρ·S/t, never below 0."""
    return np.maximum(1.0 - inclusion + inclusion * values / steps, 0.0)


def _log(values: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(values)


def _binomial_quantile(steps: int, probability: float, failure: float) -> int:
    """The smallest n with a bound on P(Binomial(steps, probability) > n) at most ``failure`` (the bound is within a
    relative 10⁻⁵ of the tail: :func:`dplens.accountant._numerics.binomial_tail_bound`; a larger n only widens the
    deviation interval)."""
    if probability <= 0:
        return 0
    # Bisection on n (the tail is non-increasing in n): ~2·log₂(steps) evaluations instead of steps + 1 (10⁸ steps
    # per epoch took minutes and gigabytes as an array).
    if binomial_tail_bound(0, steps, probability) <= failure:
        return 0
    low, high = 0, steps  # tail(low) > failure, and n = steps always has an empty tail
    while high - low > 1:
        middle = (low + high) // 2
        if binomial_tail_bound(middle, steps, probability) <= failure:
            high = middle
        else:
            low = middle
    return high


def _deviation_interval(q: np.ndarray, dev: np.ndarray, steps: int, failure: float) -> tuple[float, float]:
    """An interval [lo, hi] holding D = Σ of ``steps`` i.i.d. draws of ``dev`` (law ``q``) except with probability
    ``failure``: Bernstein's inequality for the draws from the regular cells (|dev − c| ≤ b around the mean c), the
    number of draws from the other cells bounded by a binomial tail, each contributing at most its extreme deviation.
    The split between the regular and the other cells (b) is chosen to make the interval narrowest."""
    live = q > 0
    weights = q[live] / float(q[live].sum())
    dev = dev[live]
    centre = float(np.sum(weights * dev))
    order = np.argsort(np.abs(dev - centre), kind="stable")
    spread, w, d = np.abs(dev - centre)[order], weights[order], dev[order]
    cum_w, cum_wd, cum_wd2 = np.cumsum(w), np.cumsum(w * d), np.cumsum(w * d * d)
    # Extremes of the cells outside the first i (suffix minima and maxima in the sorted order).
    suffix_min = np.minimum.accumulate(d[::-1])[::-1]
    suffix_max = np.maximum.accumulate(d[::-1])[::-1]
    log_term = math.log(6.0 / failure)
    best: tuple[float, float] | None = None
    for b in spread[-1] * 2.0 ** -np.arange(0, 40, 1.5):
        i = int(np.searchsorted(spread, b, side="right"))  # cells [0, i) are regular
        if i == 0:
            break
        p_regular = float(cum_w[i - 1])
        mu = float(cum_wd[i - 1]) / p_regular
        var = max(float(cum_wd2[i - 1]) / p_regular - mu * mu, 0.0)
        worst = _binomial_quantile(steps, max(0.0, 1.0 - p_regular), failure / 3.0) if i < d.size else 0
        low_irregular = float(suffix_min[i]) if i < d.size else mu
        high_irregular = float(suffix_max[i]) if i < d.size else mu
        reach = b + abs(mu - centre)
        linear = reach * log_term / 3.0
        low_slope, high_slope = mu - min(low_irregular, mu), max(high_irregular, mu) - mu
        counts = _extreme_counts(worst, steps, linear, 2.0 * var * log_term, (low_slope, high_slope))
        regular = steps - counts
        u = linear + np.sqrt(linear * linear + 2.0 * regular * var * log_term)
        lo = float(np.min(regular * mu - u + counts * min(low_irregular, mu)))
        hi = float(np.max(regular * mu + u + counts * max(high_irregular, mu)))
        if best is None or hi - lo < best[1] - best[0]:
            best = (lo, hi)
    assert best is not None
    return best


def _extreme_counts(worst: int, steps: int, linear: float, k: float, slopes: tuple[float, float]) -> np.ndarray:
    """The numbers c ∈ [0, ``worst``] of irregular draws at which the deviation interval's ends can be extreme.

    The low end is (t − c)μ − u(c) + c·a and the high end (t − c)μ + u(c) + c·b with u(c) = L + √(L² + K(t − c)):
    convex and concave in c, so over the integers each is extreme at an end of the range or next to the real
    stationary point, where √(L² + K(t − c)) = K/(2s) for the slope s = μ − a or b − μ. (All c from 0 to ``worst``
    were tried before: arrays of 10⁶ entries per trial at 10⁸ steps per epoch.)"""
    candidates = {0, worst}
    for slope in slopes:
        if slope > 0 and k > 0:
            root = steps - ((k / (2.0 * slope)) ** 2 - linear * linear) / k
            if math.isfinite(root):
                candidates |= {min(max(math.floor(root), 0), worst), min(max(math.ceil(root), 0), worst)}
    return np.array(sorted(candidates), dtype=float)


def _ladder_cells(start: float, s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tail above the ratio grid: edges b_k = start·r^k (k = 0 … K, r = ``LADDER_RATIO``, up to
    E[(Y − b_K)₊] ≤ ``LADDER_TAIL``) and the Q-masses and partial means E[Y; cell] of the cells [b_k, b_{k+1}) and,
    last, [b_K, ∞)."""
    high = _top_of_grid(s, LADDER_TAIL)
    count = max(1, math.ceil(math.log(max(high / start, LADDER_RATIO)) / math.log(LADDER_RATIO)))
    edges = start * LADDER_RATIO ** np.arange(count + 1)
    q, m1, q_top, m1_top = _lognormal_masses(np.concatenate([[0.0], edges]), s)
    return edges, np.append(q[1:], q_top), np.append(m1[1:], m1_top)


def _split_cells(left: np.ndarray, right: np.ndarray, q: np.ndarray, m1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Q-masses the split sends to the left and right ends of cells [left, right] (the cell's mean kept)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        position = np.where(q > 0, (m1 / np.maximum(q, 1e-300) - left) / (right - left), 0.0)
    position = np.clip(position, 0.0, 1.0)
    return q * (1.0 - position), q * position


#: Quantile levels of the bins a composed law is rounded up onto for the ladder's events (see :func:`_binned_up`).
_BIN_LEVELS = np.unique(np.concatenate([np.arange(1, 512) / 512, 1.0 - 2.0 ** -np.arange(10, 40, 0.5)]))


def _binned_up(pmf: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A law stochastically above the normalised law of ``pmf`` at ``values`` (increasing): its mass in bins by
    quantile, each bin's at its largest value. Returns (values, weights summing to 1)."""
    total = float(pmf.sum())
    before = (np.cumsum(pmf) - pmf) / total
    index = np.searchsorted(_BIN_LEVELS, before, side="right")
    weights = np.bincount(index, weights=pmf, minlength=_BIN_LEVELS.size + 1) / total
    last = np.searchsorted(index, np.arange(_BIN_LEVELS.size + 1), side="right") - 1
    keep = (weights > 0) & (last >= 0)
    return values[last[keep]], weights[keep]


def _ladder_atoms(
    ladder: np.ndarray, masses: np.ndarray, others: tuple[np.ndarray, np.ndarray], inclusion: float, steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Remove losses log R(b + g) and masses m·w of one coordinate at a ladder value b (mass m) while the sum of the
    others is g (weight w): every pair."""
    values, weights = others
    losses = _log(_ratio(np.add.outer(ladder, values).ravel(), inclusion, steps))
    return losses, np.outer(masses, weights).ravel()


#: log(1/η) of the others' lower deviation bound beside a ladder coordinate in the add direction (η = e^{-69} ≈ 10⁻³⁰:
#: the failure's mass, at an infinite loss, is t·ν·η).
_LADDER_TAIL_LOG = 69.0


def _upper_side(
    sigma: float, steps: int, inclusion: float, spacing: float, top_index: int, scale: float, precision: float
) -> _Side:
    """The split discretisation (a dominating pair): its ratio is R(S̃) exactly, S̃ on the grid or one coordinate on
    the ladder above it.

    Remove: P = (1 − ρ)·Q + ρ·(the law with one tilted coordinate), losses log R. Add: Q, losses −log R. Every error
    only adds to δ: round-off, and all mass outside the windows (the wrapped mass inside them only adds to δ too).

    The grid is o + kh after a first cell [0, o] (o ≪ h: Q(Y < o) = Φ(−10)), whose atom at 0 is rounded up to o in
    the remove direction and down to o − h in the add direction (each loss then only moves the pessimistic way): a
    sum S̃ = 0 — an infinite loss in the add direction, with probability Q(first cell)^t — was the grid's first cell
    [0, h] split onto 0 (0.1–1 % at t = 2 and σ ≈ 0.75: ε = ∞).

    Above the grid's top c the ratio is split onto the ladder b_k = c·r^k (the same post-processing argument, cell by
    cell), so a coordinate there has a finite loss. The compositions hold the draws with every coordinate on the grid
    (sub-probabilities). With exactly one coordinate on the ladder at b (remove direction), the others' sum is rounded
    up onto a law stochastically above it (:func:`_binned_up` of the tilted composition: Σ of fewer draws is below),
    and its mass over-counted (no condition on the others); two or more on the ladder (a union bound) or a coordinate
    above the ladder count as an infinite loss. In the add direction (loss decreasing in S̃) any draw with a coordinate
    on the ladder has S̃ ≥ c: its loss is at most −log R(c).
    """
    s = 1.0 / sigma
    offset = min(0.5 * spacing, math.exp(-0.5 * s * s - 10.0 * s))
    grid = offset + np.arange(top_index + 1) * spacing
    edges = np.concatenate([[0.0], grid])
    q, m1, _, _ = _lognormal_masses(edges, s)
    left, right = _split_cells(edges[:-1], edges[1:], q, m1)
    atoms = np.zeros(top_index + 2)  # at 0, then at the grid
    atoms[:-1] += left
    atoms[1:] += right
    ladder, lq, lm1 = _ladder_cells(grid[-1], s)
    l_left, l_right = _split_cells(ladder[:-1], ladder[1:], lq[:-1], lm1[:-1])
    atoms[-1] += l_left[0]  # the first ladder cell's left end is the grid's top
    q_ladder = l_right.copy()  # Q-masses at b_1 … b_K
    q_ladder[:-1] += l_left[1:]
    q_ladder[-1] += lq[-1]  # [b_K, ∞): Q-mass at b_K, P-mass E[(Y − b_K)₊] at +∞
    beyond = max(lm1[-1] - ladder[-1] * lq[-1], 0.0) + 4.0 * _UNIT_ROUNDOFF * float(lm1.sum())
    values_l, p_ladder = ladder[1:], q_ladder * ladder[1:]
    up = atoms[1:].copy()
    up[0] += atoms[0]
    per_p = atoms[1:] * grid  # the split pair's ratio at each atom is the atom's value: the tilted law
    p_law = _composed([(per_p, 1), (up, steps - 1)], spacing, scale, precision)
    q_law = _composed([(atoms, steps)], spacing, scale, precision)  # the atom at 0 as o − h
    p_values = _values(p_law, spacing) + steps * offset
    q_values = _values(q_law, spacing) + steps * (offset - spacing)
    if steps > 2:  # the tilted composition: one coordinate more than the others' sum (a negligible excess)
        others = (*_binned_up(p_law.pmf, p_values), (p_law.round_off + p_law.outside) / float(p_law.pmf.sum()))
        plain_other = tilted_other = others[:2]
    else:  # one other coordinate: plain (the tilted one on the ladder) or tilted (a plain one there)
        others = (np.zeros(0), np.zeros(0), 0.0)
        plain_other, tilted_other = _binned_up(up, grid), _binned_up(per_p, grid)
    nu, nu_star = float(q_ladder.sum()), float(p_ladder.sum())
    remove = _Parts([_log(_ratio(p_values, inclusion, steps))], [inclusion * p_law.pmf])
    remove.add(*_ladder_atoms(values_l, inclusion * p_ladder, plain_other, inclusion, steps))
    remove.add(*_ladder_atoms(values_l, inclusion * (steps - 1) * q_ladder, tilted_other, inclusion, steps))
    error = inclusion * (p_law.round_off + p_law.outside + (nu_star + (steps - 1) * nu) * others[2])
    infinity = inclusion * (beyond + nu_star * (steps - 1) * nu + 0.5 * (steps - 1) * (steps - 2) * nu * nu)
    if inclusion < 1.0:
        plain = _composed([(up, steps)], spacing, scale, precision)
        remove.add(
            _log(_ratio(_values(plain, spacing) + steps * offset, inclusion, steps)), (1 - inclusion) * plain.pmf
        )
        remove.add(*_ladder_atoms(values_l, (1.0 - inclusion) * steps * q_ladder, plain_other, inclusion, steps))
        error += (1.0 - inclusion) * (plain.round_off + plain.outside + steps * nu * others[2])
        infinity += (1.0 - inclusion) * 0.5 * steps * (steps - 1) * nu * nu
    # Add direction, a draw with a coordinate on the ladder: S̃ ≥ c + the others' sum, and that sum of t − 1
    # independent non-negative split coordinates is below its mean by x with probability ≤ exp(−x²/(2(t − 1)E[Y²]))
    # (Maurer, "A bound on the deviation probability for sums of non-negative random variables", 2003, Theorem 1):
    # S̃ ≥ c + x_lo but on that event (at an infinite loss). At 10⁸ steps, c ≈ 1930 alone put 3·10⁻⁸ of mass at the
    # loss log(t/c) ≈ 10.9, a window the engine could not refine.
    first = float(np.dot(atoms[1:], grid) + np.dot(q_ladder, values_l))
    second = float(np.dot(atoms[1:], grid * grid) + np.dot(q_ladder, values_l * values_l))
    others_low = max(
        0.0, (steps - 1) * first * (1.0 - 1e-12) - math.sqrt(2.0 * (steps - 1) * second * _LADDER_TAIL_LOG)
    )
    ladder_floor = grid[-1:] + others_low
    return _Side(
        remove=remove.law(infinity=min(infinity, 1.0), error=error),
        add=_Law(
            losses=np.append(-_log(_ratio(q_values, inclusion, steps)), -_log(_ratio(ladder_floor, inclusion, steps))),
            mass=np.append(q_law.pmf, min(1.0, steps * nu)),
            infinity=min(1.0, steps * nu) * math.exp(-_LADDER_TAIL_LOG) if others_low > 0 else 0.0,
            error=2.0 * q_law.round_off + q_law.outside,
        ),
    )


@dataclass(slots=True)
class _Parts:
    """The atoms of a law gathered piece by piece (losses, masses)."""

    losses: list[np.ndarray]
    mass: list[np.ndarray]

    def add(self, losses: np.ndarray, mass: np.ndarray) -> None:
        self.losses.append(losses)
        self.mass.append(mass)

    def law(self, *, infinity: float, error: float) -> _Law:
        return _Law(losses=np.concatenate(self.losses), mass=np.concatenate(self.mass), infinity=infinity, error=error)


def _binned_down(pmf: np.ndarray, values: np.ndarray, drop: float) -> tuple[np.ndarray, np.ndarray]:
    """A sub-probability law below the one of ``pmf`` at ``values`` (increasing): its mass in bins by quantile, each
    bin's at its smallest value, and ``drop`` taken from the lowest bins."""
    total = float(pmf.sum())
    before = (np.cumsum(pmf) - pmf) / total
    index = np.searchsorted(_BIN_LEVELS, before, side="right")
    weights = np.bincount(index, weights=pmf, minlength=_BIN_LEVELS.size + 1)
    first = np.searchsorted(index, np.arange(_BIN_LEVELS.size + 1), side="left")
    keep = (weights > 0) & (first < values.size)
    low, weights = values[first[keep]], weights[keep]
    cumulative = np.cumsum(weights)
    kept = cumulative - np.minimum(cumulative, drop)
    return low, np.diff(np.concatenate([[0.0], kept]))


def _lower_side(
    sigma: float, steps: int, inclusion: float, spacing: float, top_index: int, scale: float, precision: float
) -> _Side:
    """The merge discretisation (a dominated pair), its deviations from the grid bounded (see the module).

    Every error only subtracts from δ: round-off, the mass the circular convolutions wrapped into their windows, and
    the failure probability of the deviation bounds (the mass outside the windows is simply left out). Above the
    grid's last cell the ratio is merged on the ladder's cells (:func:`_ladder_cells`) at their means; the
    compositions hold the draws with every coordinate in the grid's cells (sub-probabilities); in the remove direction
    exactly one coordinate in a ladder cell is counted with the others' sum bounded from below (:func:`_binned_down`),
    the rest left out.
    """
    s = 1.0 / sigma
    # The grid is o + kh, cell k ≥ 1 is [o + (k − ½)h, o + (k + ½)h) and cell 0 is [0, o + h/2) with o chosen so that
    # its mean is exactly o: no cell then deviates by more than O(h²) from its grid point (cell 0 otherwise would,
    # by up to h/2, where the density rises steeply from 0).
    offset = _first_cell_offset(s, spacing)
    edges = np.concatenate([[0.0], offset + (np.arange(top_index + 1) + 0.5) * spacing])
    q, m1, _, _ = _lognormal_masses(edges, s)
    grid = offset + np.arange(top_index + 1) * spacing
    with np.errstate(divide="ignore", invalid="ignore"):
        means = np.where(q > 0, m1 / np.maximum(q, 1e-300), grid)
    dev = means - grid
    failure = DEVIATION_FAILURE / 3.0
    d_lo_all, d_hi = _deviation_interval(q, dev, steps, failure)
    d_lo_rest, _ = _deviation_interval(q, dev, steps - 1, failure)
    d_lo_tilted = d_lo_rest + float(dev[q > 0].min())
    ladder, lq, lm1 = _ladder_cells(edges[-1], s)
    with np.errstate(divide="ignore", invalid="ignore"):
        l_means = np.where(lq > 0, lm1 / np.maximum(lq, 1e-300), ladder)
    l_means = np.maximum(l_means * (1.0 - 1e-9), ladder)  # a cell's mean is at least its left end
    body_star = float(m1.sum())
    q_law = _composed([(q, steps)], spacing, scale, precision)
    p_law = _composed([(m1, 1), (q, steps - 1)], spacing, scale, precision)
    q_values = _values(q_law, spacing) + steps * offset
    p_values = _values(p_law, spacing) + steps * offset
    # The others' sum beside one coordinate on the ladder: t − 1 coordinates in the grid, all plain (the ladder's is
    # the tilted one) or one of them tilted — stochastically larger than a plain one (its ratio y to the plain law
    # rises, and the merge is monotone), and of sub-probability mass body* ≤ 1, counted in ``ladder_mass`` — so the
    # law of t − 1 plain merged coordinates bounds both from below: their grid sum plus the deviation bound for t − 1
    # draws (failure ``failure``). (Σ_t less a bound on two coordinates, used before, lowered the others' sum by
    # 2·(Y's 1 − 2.5·10⁻⁴ quantile): ~71 at σ = 0.8, where at t = 10 the ladder decides δ: the lower end 3.940 against
    # pld-accounting's 4.009.)
    if steps > 2:
        rest_law = _composed([(q, steps - 1)], spacing, scale, precision)
        rest_values = _values(rest_law, spacing) + (steps - 1) * offset
        drop = failure + rest_law.round_off + rest_law.outside
        sums = _binned_down(rest_law.pmf, rest_values + d_lo_rest, drop)
    else:  # the other coordinate: plain, or tilted (stochastically larger: its ratio to the plain law rises)
        sums = _binned_down(q, means, 0.0)
    remove = _Parts([_log(_ratio(p_values + d_lo_tilted, inclusion, steps))], [inclusion * p_law.pmf])
    ladder_mass = inclusion * (lm1 + (steps - 1) * body_star * lq)
    remove.add(*_ladder_atoms(l_means, ladder_mass, sums, inclusion, steps))
    error = inclusion * (p_law.round_off + p_law.outside) + failure
    if inclusion < 1.0:
        remove.add(_log(_ratio(q_values + d_lo_all, inclusion, steps)), (1.0 - inclusion) * q_law.pmf)
        remove.add(*_ladder_atoms(l_means, (1.0 - inclusion) * steps * lq, sums, inclusion, steps))
        error += (1.0 - inclusion) * (q_law.round_off + q_law.outside) + failure
    return _Side(
        remove=remove.law(infinity=0.0, error=error),
        add=_Law(
            losses=-_log(_ratio(q_values + d_hi, inclusion, steps)),
            mass=q_law.pmf,
            infinity=0.0,
            error=2.0 * q_law.round_off + q_law.outside + failure,
        ),
    )


def _first_cell_offset(s: float, spacing: float) -> float:
    """o ∈ [0, h/2] with E[Y | Y < o + h/2] = o (log-normal Y of log-sd ``s``, mean 1), i.e. c = o + h/2 solving
    c − E[Y | Y < c] = h/2 (the left side rises from 0 to ∞); 0 if the first cell's mass underflows."""

    def gap(c: float) -> float:
        log_c = math.log(c)
        ratio = math.exp(float(log_ndtr((log_c - 0.5 * s * s) / s) - log_ndtr((log_c + 0.5 * s * s) / s)))
        return c - ratio - 0.5 * spacing

    low, high = 0.5 * spacing, 0.5 * spacing
    if not math.isfinite(gap(low)) or gap(low) >= 0:
        return 0.0
    while gap(high) < 0:
        high *= 2.0
    # Bisection on the rising gap (gap(low) < 0 ≤ gap(high)), to the tolerance a root finder would be given: scipy's
    # optimize module costs a quarter of a second to import, as much as a one-epoch allocation's laws.
    while high - low > 1e-15 * high:
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        low, high = (middle, high) if gap(middle) < 0 else (low, middle)
    return 0.5 * (low + high) - 0.5 * spacing


def _grid_spacing(sigma: float, steps: int, top: float, fineness: float = 1.0) -> float:
    """h: the window spans about y_top + t·(a few standard deviations) points of the grid; TARGET_POINTS of them.

    Also finer than a twentieth of one coordinate's standard deviation, so that the O(h²) discretisation errors stay
    far below the bracket's tolerance. (``fineness`` < 1: coarser, see :func:`coarse_grids`.)"""
    spread = math.sqrt(math.expm1(1.0 / sigma**2))
    width = top + 20.0 * spread * math.sqrt(steps) + 2.0
    spacing = min(width / (fineness * TARGET_POINTS), spread / (20.0 * fineness))
    return max(spacing, width / MAX_POINTS)


#: Fineness of the grids :func:`allocation_laws` builds in this context (1: the default; see :func:`coarse_grids`).
_FINENESS: contextvars.ContextVar[float] = contextvars.ContextVar("allocation_fineness", default=1.0)
#: ... inside :func:`coarse_grids`: half as many points per standard deviation, half the points in all.
COARSE_FINENESS = 0.5


@contextlib.contextmanager
def coarse_grids() -> Iterator[None]:
    """Within this context :func:`allocation_laws` builds grids twice coarser (a valid bracket, wider, 2–4× faster):
    a calibration locates its σ on them before the final grid (the reported ε is always the default grid's)."""
    token = _FINENESS.set(COARSE_FINENESS)
    try:
        yield
    finally:
        _FINENESS.reset(token)


#: Below ``MANY_STEPS`` steps per epoch the laws' grid follows the refinement's loss grid (``LossGrid.refining``; a
#: fixed interval gets the finest laws): at loss interval Δ it has
#: min(1, ``LAW_REFERENCE_INTERVAL``/Δ) of its points (at least ``LAW_SMALLEST_SHARE``), so the refinement's first,
#: coarse rounds (Δ = 2·10⁻³ …) use coarse laws and each finer round finer ones; a bracket is certified on any grid, and
#: one that misses the tolerance sends the refinement to a finer Δ, so finer laws. (The laws' O(h²) error then falls
#: with the loss grid's O(Δ): at σ = 1, t = 100 the laws cost 0.1 s instead of 0.65 s, the bracket 0.099 % wide
#: instead of 0.080 %, within the 0.1 % tolerance.) From ``MANY_STEPS`` on the grids stay as tuned for issue 47.
LAW_REFERENCE_INTERVAL = 1.25e-4
LAW_SMALLEST_SHARE = 1.0 / 16.0


def _law_share(steps: int, interval: float | None) -> float:
    if interval is None or steps >= MANY_STEPS or not interval > 0:
        return 1.0
    # A power of two (rounded down): the refinement's neighbouring rounds share one cached pair of laws.
    share = 2.0 ** math.floor(math.log2(LAW_REFERENCE_INTERVAL / interval))
    return min(1.0, max(LAW_SMALLEST_SHARE, share))


def allocation_laws(
    sigma: float, steps: int, inclusion: float = 1.0, *, loss_interval: float | None = None
) -> AllocationLaws:
    """Both discretised laws of one epoch's likelihood ratio (cached: an adaptive PLD run re-reads them on every
    grid it tries).

    ``loss_interval``: the interval of the refinement round the laws are for (see :data:`LAW_REFERENCE_INTERVAL`; None:
    the finest laws).

    Example (σ = 1, t = 100; both laws keep all but ~10⁻¹³ of the mass, the rest counted in their error terms):
        >>> laws = allocation_laws(1.0, 100)
        >>> [round(float(law.mass.sum()), 9) for law in (laws.upper.add, laws.lower.add)]
        [1.0, 1.0]
    """
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be a finite number > 0; got {sigma!r}")
    if steps < 2:
        raise ValueError(f"steps must be >= 2 for a random allocation; got {steps!r}")
    s = 1.0 / sigma
    reach = 0.5 * s * s + 10.0 * s  # log of the ratio 10 standard deviations up one coordinate's log-normal law
    if reach > engine.MAX_LOSS:
        # Refused before any arithmetic (the log-normal tails overflow doubles there: warnings, then an error).
        raise OverflowError(
            f"a random allocation at noise_multiplier={sigma!r} has privacy losses up to about {reach:.4g} nats, "
            f"beyond the PLD engine's floating-point range (|loss| <= {engine.MAX_LOSS:g})"
        )
    fineness = _FINENESS.get() * _law_share(int(steps), loss_interval)
    many = steps >= MANY_STEPS
    if (
        loss_interval is None
        and not many
        and _ratio_grid(sigma, steps, fineness, many=False) is None
        and _ratio_grid(sigma, steps, fineness, many=True) is not None
    ):
        # The finest laws asked for (a fixed interval, or the refinement's last try) where the heavy-tailed path would
        # answer: the ratio grid with the many-steps treatment, where it fits, is tighter where many epochs compose
        # (σ = 0.7, 999 steps, 10 epochs, δ = 10⁻⁶: 0.079 % against the geometric grid's 0.13 % at Δz = 5·10⁻³), at
        # 1-3 s.
        many = True
    return _laws(float(sigma), int(steps), float(inclusion), fineness, _precision(), many=many)


def _ratio_grid(sigma: float, steps: int, fineness: float, *, many: bool) -> tuple[float, int] | None:
    """The ratio grid's (spacing, index of its top), or None where the tail is too heavy for it (the geometric grid).

    ``many``: the many-steps treatment (``MANY_STEPS`` on; below it only where :func:`allocation_laws` asks)."""
    s = 1.0 / sigma
    top = _top_of_grid(s, TOP_MASS)
    # The ladder above the grid keeps the tail's losses finite: the grid need only hold the sum's bulk (a finer grid,
    # a narrower window and less round-off for the same points), and at few steps enough of the tail that two
    # coordinates on the ladder (an infinite loss) stay negligible.
    # (Where the geometric grid answers few steps — a heavy tail — it still does: a ratio grid is coarse near S = 0.)
    limit = int((LINEAR_POINTS_MANY if many else LINEAR_POINTS) * fineness)
    finest = math.sqrt(math.expm1(s * s)) / (20.0 * fineness)
    spacing = _grid_spacing(sigma, steps, top, fineness)
    if many or not (top / spacing > limit or spacing > finest):
        bulk = LADDER_TOP * (steps + 40.0 * math.sqrt(steps * math.expm1(s * s)))
        top = min(top, max(bulk, _top_of_grid(s, LADDER_GRID_MASS)))
        spacing = _grid_spacing(sigma, steps, top, fineness)
    if many:
        # The lower end's deviation bound grows like h·√t (its O(h/t)·t share of S): finer where the grid allows.
        spread = math.sqrt(math.expm1(s * s))
        spacing = min(spacing, max(spread / (SPREAD_CELLS_MANY * fineness), top / (limit - 2)))
    heavy = top / spacing > limit or spacing > finest
    if heavy and many and _excess((limit - 2) * finest, s) <= TOP_MASS_MAX:
        # A heavier tail (σ ≲ 0.67) and many steps (where the geometric grid would need a fine Δz): the grid stops
        # at its limit, more of the tail on the ladder.
        spacing = finest
        top = (limit - 2) * spacing
    top_index = max(2, math.ceil(top / spacing))
    if top_index > limit or spacing > finest:
        return None
    return spacing, top_index


@functools.lru_cache(maxsize=3)  # 10⁴ steps at σ ≈ 0.6: ~150 MB each (a calibration visits ~10 σ: 2.6 GB at 32)
def _laws(
    sigma: float, steps: int, inclusion: float, fineness: float, precision: float, *, many: bool
) -> AllocationLaws:
    grid = _ratio_grid(sigma, steps, fineness, many=many)
    if grid is None:
        # A heavy tail (small σ): the ratio grid would need too many points; a geometric grid instead.
        dz = _heavy_interval(fineness)
        upper, lower = _heavy_laws(sigma, steps, inclusion, dz)
        return AllocationLaws(
            sigma=sigma, steps=steps, inclusion=inclusion, spacing=dz, top=math.inf, upper=upper, lower=lower
        )
    spacing, top_index = grid
    top = top_index * spacing
    scale = max(1.0, (top + 2.0 * steps) / 50.0)  # the engine works on values S/scale (its range is ±600)
    return AllocationLaws(
        sigma=sigma,
        steps=steps,
        inclusion=inclusion,
        spacing=spacing,
        top=top,
        upper=_upper_side(sigma, steps, inclusion, spacing, top_index, scale, precision),
        lower=_lower_side(sigma, steps, inclusion, spacing, top_index, scale, precision),
    )


def _finite(law: _Law) -> tuple[np.ndarray, np.ndarray, float]:
    """A law's finite atoms with mass (losses, masses) and its mass at +∞ (R = 0 in the add direction joins it)."""
    finite = np.isfinite(law.losses) & (law.mass > 0)
    infinity = law.infinity + float(law.mass[(law.losses == math.inf) & (law.mass > 0)].sum())
    return law.losses[finite], law.mass[finite], infinity


def _split_onto(law: _Law, interval: float) -> engine.GridPmf:
    """Pessimistic: each atom split between its grid neighbours keeping its Q-mass p·e^{−loss} (Doroshenko et al. 2022,
    Theorem 3.3), as :func:`dplens.accountant.pld_engine.discretise` does for atoms; the law's error carried."""
    losses, mass, infinity = _finite(law)
    k = np.floor(losses / interval)
    with np.errstate(invalid="ignore"):
        up = np.where(k * interval == losses, 0.0, -np.expm1(k * interval - losses) / -math.expm1(-interval))
    up = np.clip(up, 0.0, 1.0)
    index = np.concatenate([k, k + 1]).astype(np.int64)
    pmf = engine._to_grid_pmf(index, np.concatenate([mass * (1.0 - up), mass * up]), infinity)
    return replace(pmf, error=law.error)


def _floor_onto(law: _Law, interval: float) -> engine.GridPmf:
    """Optimistic: each atom moved down to the grid point below it (δ(ε) = E[(1 − e^{ε − L})₊] only decreases)."""
    losses, mass, infinity = _finite(law)
    pmf = engine._to_grid_pmf(np.floor(losses / interval).astype(np.int64), mass, infinity)
    return replace(pmf, error=law.error)


def allocation_pld(sigma: float, steps: int, inclusion: float, grid: engine.LossGrid) -> engine.EventPld:
    """One epoch's discretised PLDs on ``grid``: both directions, pessimistic from the split law, optimistic from the
    merged one (see the module)."""
    loss_interval = grid.interval if grid.refining else None
    laws = allocation_laws(float(sigma), int(steps), float(inclusion), loss_interval=loss_interval)
    interval = grid.interval
    return engine.EventPld(
        remove=engine.LossPmfs(
            pessimistic=_split_onto(laws.upper.remove, interval), optimistic=_floor_onto(laws.lower.remove, interval)
        ),
        add=engine.LossPmfs(
            pessimistic=_split_onto(laws.upper.add, interval), optimistic=_floor_onto(laws.lower.add, interval)
        ),
    )


# --------------------------------------------------------------------------------------------
# Heavy tails: the law of S on a geometric grid, split and merged in convex order
# --------------------------------------------------------------------------------------------
#
# Both hockey sticks are expectations under Q of convex functions of R(S) — (R − e^ε)₊ (remove) and (1 − e^ε·R)₊
# (add) — and R is affine in S. So a law S' that dominates S in the convex order (E φ(S') ≥ E φ(S) for every convex φ)
# gives an upper bound on both directions at once, and one dominated by it a lower bound; with E[S'] = E[S] the pair
# (R(S')·Q', Q') is a valid pair. The convex order is kept by sums of independent terms (Shaked & Shanthikumar,
# "Stochastic Orders", Springer 2007, Section 3.A), so it can be applied coordinate by coordinate and again at every
# pairwise sum of a binary powering:
#
# - upper end (split): a value in [y_k, y_{k+1}] is sent to the two ends keeping its mean (a mean-preserving spread,
#   the connect-the-dots argument of Doroshenko et al., PETS 2022, Theorem 3.3, in S instead of the loss);
# - lower end (merge): the values sent to one point are replaced by one atom at their mean (a conditional expectation,
#   so dominated: Jensen), the atom kept where it is (a moment per point).
#
# Both keep the mean, so the error is of order Δz² where rounding log S to the grid (every pairwise sum the same way)
# was of order Δz per sum: at σ = 0.5, t = 100, δ = 10⁻⁵ the bracket [5.3937, 5.3987] from 1.1 s of laws became
# [5.3957, 5.3968] from 0.09 s. On y_k = e^{kΔz}, a pair of atoms y_i ≥ y_j (gap d = i − j) sums to
# y_i·(1 + e^{−dΔz}) ∈ [y_{i+f}, y_{i+f+1}], f = ⌊log(1 + e^{−dΔz})/Δz⌋: gap by gap where f ≥ 1, and beyond (f = 0)
# by prefix sums, whose partial sums there are the sums wanted (nothing subtracted, so each to a few ulps of itself).
# Coordinates outside [low, high] (10 standard deviations of log Y) make an event F^c of Q-mass ≤ t·q_out: counted at
# an infinite loss at the upper end (its P-mass bounded), left out at the lower end (a restriction to F keeps both
# orders). Floating-point errors are bounded point by point and paid for in δ.

#: Spacing Δz of the heavy-tailed case's geometric grid at its finest (a fixed interval, or the refinement's finest
#: rounds); the refinement's first rounds take it up to ``HEAVY_COARSEST`` (fineness f: Δz/√f, its error being O(Δz²)
#: against the loss grid's O(Δ)). At σ = 0.5, t = 100, δ = 10⁻⁶ the bracket is 0.015 % wide at 2·10⁻² (laws: 0.09 s;
#: 0.34 s at 10⁻², the cost growing as Δz⁻²).
HEAVY_INTERVAL = 1e-2
HEAVY_COARSEST = 2e-2
#: Mass lost below the doubles' range (products under 2⁻¹⁰²², atoms under 10⁻³⁰⁰ trimmed at the low end) is at most
#: this in all, at either loss (≤ 4·groups·points·2⁻¹⁰²² per sum, times at most t uses of a law in the powering).
_UNDERFLOW = 1e-250


@dataclass(frozen=True, slots=True, kw_only=True)
class _GeometricLaw:
    """A discrete sub-probability law of S on the points y_k = e^{kΔz}, k = ``start`` + index: masses m_k and, for a
    merged law, moments r_k = E[S; atom k]/y_k (the atom sits at y_k·r_k/m_k); each with a bound, point by point, on
    its floating-point error."""

    start: int
    mass: np.ndarray
    mass_error: np.ndarray
    moment: np.ndarray | None = None
    moment_error: np.ndarray | None = None


#: Nodes of the Gauss–Legendre rule that integrates one coordinate's density over a cell (each cell's mass to a few
#: ulps of itself, where CDF differences are good to a few ulps of the CDF: 10⁻¹³ of a cell in the bulk).
_NODES = 6


@functools.lru_cache(maxsize=1)
def _gauss_legendre() -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the ``_NODES``-point Gauss–Legendre rule on [0, 1]: Newton's method on P_n from
    cos(π(i − ¼)/(n + ½)), weights 2/((1 − x²)·P_n'(x)²) (Abramowitz & Stegun 25.4.29)."""
    n = _NODES
    x = np.cos(np.pi * (np.arange(1, n + 1) - 0.25) / (n + 0.5))
    for _ in range(50):
        p_prev, p = np.ones_like(x), x.copy()
        for k in range(2, n + 1):
            p_prev, p = p, ((2 * k - 1) * x * p - (k - 1) * p_prev) / k
        derivative = n * (x * p - p_prev) / (x * x - 1.0)
        step = p / derivative
        x = x - step
        if float(np.max(np.abs(step))) < 1e-17:
            break
    p_prev, p = np.ones_like(x), x.copy()
    for k in range(2, n + 1):
        p_prev, p = p, ((2 * k - 1) * x * p - (k - 1) * p_prev) / k
    derivative = n * (x * p - p_prev) / (x * x - 1.0)
    weights = 2.0 / ((1.0 - x * x) * derivative * derivative)
    order = np.argsort(x)
    return 0.5 * (1.0 + x[order]), 0.5 * weights[order]


def _quadrature_error(h: float, z: np.ndarray, s: float) -> np.ndarray:
    """A bound on the n-point Gauss–Legendre rule's relative error on a cell of width h where a normal density of sd s
    has standardised values up to ``z``: h^{2n}·(n!)⁴/((2n + 1)·((2n)!)³)·max|f^{(2n)}|/min f (Abramowitz & Stegun
    25.4.30), with f^{(m)} = (−1/s)^m·He_m·f and |He_m(z)| = |E(z + iG)^m| ≤ (|z| + √m)^m (Minkowski), and
    max f/min f ≤ e^{h(|z| + 1)/s} over the cell."""
    n = _NODES
    constant = math.factorial(n) ** 4 / ((2 * n + 1) * math.factorial(2 * n) ** 3)
    return constant * (h * (z + math.sqrt(2 * n)) / s) ** (2 * n) * np.exp(h * (z + 1.0) / s)


def _coordinate(s: float, dz: float) -> tuple[_GeometricLaw, _GeometricLaw, float, float]:
    """One coordinate's law under Q restricted to log Y ∈ [low, high] (10 standard deviations; the cells
    [kΔz, (k+1)Δz) within it), merged (each cell at its conditional mean: m_k and r_k = E[Y; cell]/y_k) and split (a
    cell's mass to y_k and y_{k+1}, the share (E[Y; cell]/y_k − m_k)/(e^{Δz} − 1) up: it keeps the mean); with the
    Q-mass and the P-mass (the tilted law's, N(+s²/2, s²)) outside.

    Each cell's integrals by Gauss–Legendre: m_k = ∫φ_Q, r_k = ∫e^{x − kΔz}φ_Q and the share sent up
    ∫expm1(x − kΔz)φ_Q/expm1(Δz) (no difference of nearby numbers), each to a relative error (rounding, the
    quadrature) bounded per cell."""
    u = _UNIT_ROUNDOFF
    mean = -0.5 * s * s
    reach = 0.5 * s * s + 10.0 * s
    k_lo, k_hi = math.floor(-reach / dz), math.ceil(reach / dz)
    cell = np.arange(k_lo, k_hi) * dz
    nodes, weights = _gauss_legendre()
    offsets = dz * nodes
    z = (cell[:, None] + offsets[None, :] - mean) / s
    weighted = np.exp(-0.5 * z * z) * (dz * weights / (s * math.sqrt(2.0 * math.pi)))
    mass = weighted.sum(axis=1)
    moment = weighted @ np.exp(offsets)
    up = (weighted @ np.expm1(offsets)) / math.expm1(dz)
    # Rounding: z to (|x| + |mean| + s)/s·4 ulps, so exp(−z²/2) to |z| times that, plus z²/2 and a few ulps; the sums
    # of six terms. The quadrature: the larger of the plain and the tilted density's bound (the moment's integrand).
    z_max = np.maximum(np.abs(z[:, 0]), np.abs(z[:, -1]))
    tilted_max = np.maximum(np.abs(z[:, 0] - s), np.abs(z[:, -1] - s))
    spread = (np.abs(cell) + dz + abs(mean) + s) / s
    relative = (16.0 + z_max * z_max + 8.0 * z_max * spread) * u
    relative += _quadrature_error(dz, np.maximum(z_max, tilted_max), s)
    merged = _GeometricLaw(
        start=k_lo,
        mass=mass,
        mass_error=relative * mass,
        moment=moment,
        moment_error=(relative + 8.0 * u) * moment,
    )
    up = np.minimum(up, mass)
    split_mass = np.zeros(mass.size + 1)
    split_error = np.zeros(mass.size + 1)
    split_mass[:-1] += mass - up
    split_mass[1:] += up
    # The share sent up: its own relative error (the moment's, expm1's and the division's), and the subtraction's.
    # The share's integrand φ·expm1(x − kΔz)/expm1(Δz) is O(Δz) where its derivatives are not: its own quadrature bound
    # (the Leibniz terms of expm1's derivatives add 1 = s/s to (|z| + √(2n))/s) relative to its ~Δz/2 of the cell.
    up_relative = relative + _quadrature_error(dz, np.maximum(z_max, tilted_max) + s, s) * 2.0 / dz
    up_error = (up_relative + 8.0 * u) * up
    split_error[:-1] += relative * mass + up_error + u * mass
    split_error[1:] += up_error
    split = _GeometricLaw(start=k_lo, mass=split_mass, mass_error=split_error + 2.0 * u * split_mass)
    # Outside the grid: Φ tails (erfc to a few ulps, its argument's rounding amplified by |z| + 1 at most), rounded up.
    z_low, z_high = (k_lo * dz - mean) / s, (k_hi * dz - mean) / s
    margin = 1.0 + 1e-10
    q_out = float(ndtr(z_low) + ndtr(-z_high)) * margin
    p_out = float(ndtr(z_low - s) + ndtr(-(z_high - s))) * margin
    return merged, split, q_out, p_out


def _blocked_cumsum(values: np.ndarray, block: int) -> np.ndarray:
    """Cumulative sums, blockwise: sequential within blocks of ``block`` values, the blocks' totals (pairwise sums)
    added sequentially: each sum's relative error is ≤ (block + number of blocks + log₂ block)·u instead of n·u."""
    n = values.size
    padded = np.pad(values, (0, -n % block)).reshape(-1, block)
    within = np.cumsum(padded, axis=1)
    before = np.concatenate([[0.0], np.cumsum(padded.sum(axis=1))[:-1]])
    return (within + before[:, None]).ravel()[:n]


@functools.lru_cache(maxsize=8)
def _pair_table(dz: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The gaps d = 0 … D − 1 at which a pair's sum y_i·(1 + e^{−dΔz}) lies at least one point above its larger term:
    f(d) = ⌊g(d)/Δz⌋ ≥ 1, g(d) = log(1 + e^{−dΔz}); the share θ(d) = (e^{g(d) − fΔz} − 1)/(e^{Δz} − 1) ∈ [0, 1] of the
    pair's mass that the split sends to the upper point (it keeps the mean); and a slack per gap: 10⁻¹² where g(d) is
    within 10⁻¹³ of a multiple of Δz, so that the computed f may be off by one — the sum is then taken as moved onto
    the point, by that relative amount at most, which moves either hockey stick by at most that share of the pair's
    mass (both are 1-Lipschitz in R, relative to their mass). Beyond D, f = 0 and θ(d) = e^{−dΔz}/(e^{Δz} − 1) (the
    last value is the far gaps' slack)."""
    near = math.ceil(-math.log(math.expm1(dz)) / dz) + 2
    d = np.arange(near + 1)
    g = np.log1p(np.exp(-d * dz))
    f = np.floor(g / dz).astype(np.int64)
    size = int(np.flatnonzero(f == 0)[0])
    rest = g - f * dz
    ambiguous = (rest < 1e-13) | (rest > dz - 1e-13)
    slack = np.where(ambiguous, 1e-12, 0.0)
    theta = np.clip(np.expm1(rest[:size]) / math.expm1(dz), 0.0, 1.0)
    far_slack = 1e-12 if bool(ambiguous[size:].any()) else 0.0
    return f[:size], theta, slack[:size], far_slack


def _rows(values: np.ndarray, offset: int, width: int, d_lo: int, d_hi: int) -> np.ndarray:
    """V[r, p] = values[p + offset − (d_lo + r)] (0 outside) for r < d_hi − d_lo, p < ``width``: a strided view."""
    pad = width + d_hi + abs(offset) + 1
    padded = np.concatenate([np.zeros(pad), values, np.zeros(pad)])
    view = np.lib.stride_tricks.sliding_window_view(padded, width)
    return view[pad + offset - d_hi + 1 : pad + offset - d_lo + 1][::-1]


@dataclass(slots=True)
class _Sums:
    """The pairwise sums accumulated onto one output grid (points ``lo`` + index): masses, moments (merged laws) and
    their error bounds; ``terms`` bounds the number of terms added into any one point."""

    lo: int
    mass: np.ndarray
    mass_error: np.ndarray
    moment: np.ndarray | None
    moment_error: np.ndarray | None
    terms: int = 0

    def add(self, at: slice, mass: np.ndarray, error: np.ndarray | None, moment=None, moment_error=None) -> None:
        self.mass[at] += mass
        if error is not None:
            self.mass_error[at] += error
        if moment is not None:
            self.moment[at] += moment
            self.moment_error[at] += moment_error


def _geometric_sum(a: _GeometricLaw, b: _GeometricLaw, dz: float) -> _GeometricLaw:
    """The law of the sum of independent S_a and S_b, split (both laws split) or merged (both merged) onto the grid.

    A pair of atoms i ≥ j (gap d = i − j) lands in [y_{i+f(d)}, y_{i+f(d)+1}] (:func:`_pair_table`): the near gaps
    (f ≥ 1) gap by gap (:func:`_add_near_gaps`), the far ones (f = 0) by prefix sums (:func:`_add_far_gaps`). A merged
    atom at or above y_{k+1} then joins the next point, so every atom stays within its cell. Error bounds: the inputs'
    errors carried by the same (positive) operation, and each step's rounding; a split pair's carried error is put on
    its upper point (the larger R)."""
    u = _UNIT_ROUNDOFF
    merged = a.moment is not None
    shifts = _pair_table(dz)[0]
    lo = min(a.start, b.start)
    size = max(a.start + a.mass.size, b.start + b.mass.size) - lo + int(shifts[0]) + 2
    zeros = [np.zeros(size) for _ in range(4 if merged else 2)]
    out = _Sums(lo, zeros[0], zeros[1], *(zeros[2:] if merged else (None, None)))
    square = a is b  # the pairs (i, j) and (j, i) alike: one ordering, the gaps d ≥ 1 twice
    for first, second, tie in [(a, a, True)] if square else [(a, b, True), (b, a, False)]:
        _add_near_gaps(out, first, second, dz, tie=tie, square=square)
        _add_far_gaps(out, first, second, dz, square=square)
    # Each point is a sum of at most ``terms`` non-negative terms (and the doubling): that many ulps of it.
    out.mass_error += (out.terms + 2) * u * out.mass
    if merged:
        out.moment_error += (out.terms + 2) * u * out.moment
        _realign(out, dz)
    return _trimmed(out)


def _add_near_gaps(out: _Sums, first: _GeometricLaw, second: _GeometricLaw, dz: float, *, tie: bool, square: bool):
    """The pairs at gaps d < D (f(d) ≥ 1), first's atom the larger: every gap on its own, the runs of one f summed
    over their gaps before first's factors are applied (the gap 0 of a square on its own: the others count twice).
    Split: each pair's mass to the two points by θ(d); merged: to y_{i+f} with its moment
    e^{−fΔz}·(r_i·m_j + m_i·r_j·e^{−dΔz})."""
    u = _UNIT_ROUNDOFF
    merged = first.moment is not None
    shifts, theta, slack, _ = _pair_table(dz)
    longest = int(np.max(np.diff(np.flatnonzero(np.diff(np.concatenate([[-1], shifts, [-2]])) != 0))))
    n1, n2 = first.mass.size, second.mass.size
    offset = first.start - second.start  # second's index of the pair (first's index p, gap d): p + offset − d
    base = first.start - out.lo  # the output position of first's index 0 at f = 0
    m1, e1 = first.mass, first.mass_error
    d_lo, d_hi = max(0 if tie else 1, offset - n2 + 1), min(shifts.size, offset + n1)
    rows = max(1, (1 << 19) // n1)
    for c0 in range(d_lo, d_hi, rows):
        c1 = min(d_hi, c0 + rows)
        f_chunk = shifts[c0:c1]
        cuts = np.diff(f_chunk) != 0
        if square and c0 == 0 and c1 > 1:
            cuts[0] = True
        runs = np.concatenate([[0], np.flatnonzero(cuts) + 1])
        weight = np.where(np.arange(c0, c1)[runs] >= 1, 2.0, 1.0)[:, None] if square else 1.0
        rounding = (8.0 + longest) * u + np.maximum.reduceat(slack[c0:c1], runs)[:, None]  # products, θ, e^{−dΔz}

        window = (offset, n1, c0, c1, runs, weight)
        sum_mass, sum_error = _run_sums(second.mass, window), _run_sums(second.mass_error, window)
        pair = m1 * sum_mass
        carried = e1 * (sum_mass + sum_error) + m1 * sum_error + rounding * pair
        if merged:
            fall = np.exp(-np.arange(c0, c1) * dz)[:, None]
            sum_moment = _run_sums(second.moment, window, fall)
            sum_moment_error = _run_sums(second.moment_error, window, fall)
            scale = np.exp(-f_chunk[runs] * dz)[:, None]
            pair_moment = scale * (first.moment * sum_mass + m1 * sum_moment)
            moment_carried = (
                scale
                * (
                    first.moment_error * (sum_mass + sum_error)
                    + first.moment * sum_error
                    + e1 * (sum_moment + sum_moment_error)
                    + m1 * sum_moment_error
                )
                + (rounding + 3.0 * u) * pair_moment
            )
            parts = [(0, pair, carried, pair_moment, moment_carried)]
        else:
            up = np.minimum(m1 * _run_sums(second.mass, window, theta[c0:c1, None]), pair)
            # Both parts' errors on the upper point (the larger R): the inputs' errors split between the parts as the
            # pairs do (θ and 1 − θ), the roundings of the share up counted for it and again for the part below.
            parts = [(0, pair - up, None, None, None), (1, up, carried + (2.0 * rounding + u) * pair, None, None)]
        for r, f in enumerate(f_chunk[runs].tolist()):
            for lift, part, part_error, part_moment, part_moment_error in parts:
                at = slice(base + f + lift, base + f + lift + n1)
                out.add(
                    at,
                    part[r],
                    None if part_error is None else part_error[r],
                    None if part_moment is None else part_moment[r],
                    None if part_moment_error is None else part_moment_error[r],
                )
        out.terms += 2 * runs.size


def _run_sums(values: np.ndarray, window: tuple, factor: np.ndarray | None = None) -> np.ndarray:
    """Σ over each run of gaps of values[p + offset − d] (times ``factor`` per gap), times the run's weight."""
    offset, width, d_lo, d_hi, runs, weight = window
    rows = _rows(values, offset, width, d_lo, d_hi)
    return np.add.reduceat(rows if factor is None else rows * factor, runs, axis=0) * weight


def _add_far_gaps(out: _Sums, first: _GeometricLaw, second: _GeometricLaw, dz: float, *, square: bool) -> None:
    """The pairs at gaps d ≥ D (f = 0), first's atom the larger: all of second's atoms j ≤ i − D, by prefix sums of
    second's masses and of its moments (split: its masses) weighted by e^{jΔz} — partial sums that are the sums wanted,
    so each is accurate to a few ulps of itself. Split: the share e^{−dΔz}/(e^{Δz} − 1) of each pair goes up."""
    u = _UNIT_ROUNDOFF
    merged = first.moment is not None
    shifts, _, _, far_slack = _pair_table(dz)
    near = shifts.size
    n1, n2 = first.mass.size, second.mass.size
    offset = first.start - second.start
    base = first.start - out.lo
    m1, e1 = first.mass, first.mass_error
    q_hi = np.clip(np.arange(n1) + offset - near + 1, 0, n2)
    if not q_hi.any():
        return
    weight = 2.0 if square else 1.0
    rise = np.exp(np.arange(n2) * dz)  # to (q·Δz + 2) ulps
    fall = np.exp(-(np.arange(n1) + offset) * dz)  # y_{second.start}/y_i, to (|·|Δz + 2) ulps
    fall_error = (np.abs(np.arange(n1) + offset) * dz + 3.0) * u
    spread = second.moment if merged else second.mass
    spread_error = second.moment_error if merged else second.mass_error
    w_mass, w_mass_rel = _prefix_at(second.mass, q_hi)
    w_mass_error, _ = _prefix_at(second.mass_error, q_hi)
    w_spread, w_spread_rel = _prefix_at(spread * rise, q_hi)
    w_spread_error, _ = _prefix_at(spread_error * rise + (np.arange(n2) * dz + 3.0) * u * spread * rise, q_hi)
    w_spread, w_spread_error = w_spread * fall, w_spread_error * fall * (1.0 + 4.0 * u)
    w_spread_error += (w_spread_rel + fall_error) * w_spread
    w_mass_error = w_mass_error * (1.0 + 4.0 * u) + w_mass_rel * w_mass
    total = m1 * w_mass
    total_error = e1 * (w_mass + w_mass_error) + m1 * w_mass_error + (u + far_slack) * total
    at = slice(base, base + n1)
    if merged:
        far_moment = first.moment * w_mass + m1 * w_spread
        far_moment_error = first.moment_error * (w_mass + w_mass_error) + first.moment * w_mass_error
        far_moment_error += e1 * (w_spread + w_spread_error) + m1 * w_spread_error + (3.0 * u + far_slack) * far_moment
        out.add(at, weight * total, weight * total_error, weight * far_moment, weight * far_moment_error)
    else:
        up = np.minimum(m1 * w_spread / math.expm1(dz), total)
        up_error = (e1 * (w_spread + w_spread_error) + m1 * w_spread_error) / math.expm1(dz) + 3.0 * u * up
        out.add(at, weight * (total - up), None)
        out.add(slice(base + 1, base + 1 + n1), weight * up, weight * (total_error + 2.0 * up_error + u * total))
    out.terms += 2


def _realign(out: _Sums, dz: float) -> None:
    """A merged atom at or above y_{k+1} joins the next point (its moment over y_{k+1}: e^{−Δz} of it); all points are
    moved at once, so an atom moves by one point at most."""
    u = _UNIT_ROUNDOFF
    assert out.moment is not None and out.moment_error is not None
    moved = np.flatnonzero((out.moment >= out.mass * math.exp(dz)) & (out.mass > 0))
    if not moved.size:
        return
    carried = [out.mass[moved], out.mass_error[moved], out.moment[moved] * math.exp(-dz)]
    carried.append(out.moment_error[moved] * math.exp(-dz) + 3.0 * u * carried[2])
    for values, part in zip((out.mass, out.mass_error, out.moment, out.moment_error), carried, strict=True):
        values[moved] = 0.0
        values[moved + 1] += part
    out.mass_error += u * out.mass
    out.moment_error += u * out.moment


def _trimmed(out: _Sums) -> _GeometricLaw:
    """The accumulated law without the zeros at both ends and the atoms under 10⁻³⁰⁰ at the low end (see
    ``_UNDERFLOW``)."""
    keep = np.flatnonzero(out.mass > 0)
    if keep.size == 0:
        raise ArithmeticError("the law of S lost all its mass (a bug: please report it)")
    first_kept = int(np.argmax(out.mass >= 1e-300)) if out.mass.max() >= 1e-300 else int(keep[0])
    window = slice(min(first_kept, int(keep[-1])), int(keep[-1]) + 1)
    return _GeometricLaw(
        start=out.lo + window.start,
        mass=out.mass[window],
        mass_error=out.mass_error[window],
        moment=None if out.moment is None else out.moment[window],
        moment_error=None if out.moment_error is None else out.moment_error[window],
    )


def _prefix_at(values: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, float]:
    """Σ values[:e] for each e of ``ends`` (non-negative values, blockwise cumulative sums: see
    :func:`_blocked_cumsum`) and the relative error bound of each."""
    block = max(16, math.isqrt(values.size))
    relative = (block + values.size / block + math.log2(block) + 2) * _UNIT_ROUNDOFF
    prefix = np.concatenate([[0.0], _blocked_cumsum(values, block)])
    return prefix[ends], relative


def _geometric_power(law: _GeometricLaw, count: int, dz: float) -> _GeometricLaw:
    """The law of the sum of ``count`` independent copies (binary powering)."""
    result = None
    base = law
    while count:
        if count & 1:
            result = base if result is None else _geometric_sum(result, base, dz)
        count >>= 1
        if count:
            base = _geometric_sum(base, base, dz)
    assert result is not None
    return result


def _heavy_interval(fineness: float) -> float:
    """Δz for the laws' ``fineness`` (1: ``HEAVY_INTERVAL``; coarser rounds up to ``HEAVY_COARSEST``)."""
    return min(HEAVY_COARSEST, HEAVY_INTERVAL / math.sqrt(max(fineness, 1e-6)))


@functools.lru_cache(maxsize=4)  # the refinement's rounds share one per Δz
def _heavy_laws(sigma: float, steps: int, inclusion: float, dz: float) -> tuple[_Side, _Side]:
    """(upper, lower) sides of the heavy-tailed case from the split and the merged law of S = Σ Y_j under Q (see the
    section's note): losses ±log R(S), P-masses R(S)·Q-masses; the event F^c of a coordinate outside the grid at an
    infinite loss in the upper end, with P-mass ≤ (1 − ρ)·t·q_out + ρ·(p_out + (t − 1)·q_out)."""
    u = _UNIT_ROUNDOFF
    s, t, rho = 1.0 / sigma, steps, inclusion
    coordinate, coordinate_split, q_out, p_out = _coordinate(s, dz)
    split = _geometric_power(coordinate_split, t, dz)
    merged = _geometric_power(coordinate, t, dz)
    # Upper end: atoms exactly at y_k; the P-mass of a mass error e is at most R·e (the remove hockey stick is
    # Lipschitz in the Q-mass with constant R), the Q-mass's own in the add direction.
    y = np.exp((split.start + np.arange(split.mass.size)) * dz)
    ratio = (1.0 - rho) + rho * y / t
    p_mass = ratio * split.mass
    outside_p = min(1.0, ((1.0 - rho) * t * q_out + rho * (p_out + (t - 1) * q_out)) * (1.0 + 4.0 * t * u) + _UNDERFLOW)
    outside_q = min(1.0, t * q_out * (1.0 + 4.0 * t * u) + _UNDERFLOW)
    upper = _Side(
        remove=_Law(
            losses=np.log(ratio),
            mass=p_mass,
            infinity=outside_p,
            error=float(np.sum(ratio * split.mass_error + (np.abs(np.log(y)) + 6.0) * u * p_mass)),
        ),
        add=_Law(losses=-np.log(ratio), mass=split.mass, infinity=outside_q, error=float(np.sum(split.mass_error))),
    )
    # Lower end: atoms at y_k·r_k/m_k, P-mass A = (1 − ρ)·m + ρ·y·r/t; a relative error in m or A moves the hockey
    # stick (A − e^ε·m)₊ by at most ΔA + (A/m)·Δm where it is positive (e^ε < A/m there), and (m − e^ε·A)₊ likewise.
    assert merged.moment is not None and merged.moment_error is not None
    m, dm = merged.mass, merged.mass_error
    y = np.exp((merged.start + np.arange(m.size)) * dz)
    a_mass = (1.0 - rho) * m + rho * y * merged.moment / t
    da = (1.0 - rho) * dm + rho * y * merged.moment_error / t + (np.abs(np.log(y)) + 6.0) * u * a_mass
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = np.log(a_mass / m)
        remove_error = np.where(m > dm, da + (a_mass + da) / (m - dm) * dm, a_mass)
        add_error = np.where(a_mass > da, dm + (m + dm) / (a_mass - da) * da, m)
    lower = _Side(
        remove=_Law(losses=loss, mass=a_mass, infinity=0.0, error=float(np.sum(remove_error)) + _UNDERFLOW),
        add=_Law(losses=-loss, mass=m, infinity=0.0, error=float(np.sum(add_error)) + _UNDERFLOW),
    )
    return upper, lower
