"""Exact f-DP trade-off curves: closed forms, and the exact curve of a discrete privacy-loss distribution.

A trade-off curve sampled from a finite ε grid (the envelope sup_ε f_{ε,δ(ε)}, Dong, Roth, Su 2022 Prop. 2.12) is
valid but misses both ends: with the grid ending at ε = 60, f(0) is 1 − δ(60) (0 for a Gaussian with σ = 0.05,
whose true f(0) is 1) and kinks between grid points are cut (randomized response lost 0.36 % of power). This module
gives the curves exactly:

- closed forms: G_μ for Gaussians (:func:`dplens.accountant.conversions.gaussian_trade_off`), Laplace
  (:func:`laplace_trade_off`), randomized response and every finite privacy-loss distribution
  (:func:`discrete_trade_off`);
- from a (pessimistic) PLD: the exact trade-off of the discrete distribution, which is a lower bound on the
  mechanism's true curve because the PLD dominates the mechanism.

For a discrete PLD the envelope over ε ≥ 0 is attained at the loss values (δ(ε) = A − e^ε B between consecutive
losses, and both parts of f_{ε,δ} are monotone in ε there), so the curve is piecewise linear with vertices
(α, β) = (1 − A, B) at each loss L ≥ 0 (A = P[loss ≥ L] incl. +∞, B = Σ_{loss ≥ L} p·e^{−loss}), their mirror
images (β, α) (f is symmetric), (1 − P[loss = ∞], 0) and (1, 0). With several directions (add and remove) the
guarantee is the largest convex curve below all of them: the lower convex hull of all vertices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "LazyDiscreteTradeOff",
    "PiecewiseLinearTradeOff",
    "discrete_trade_off",
    "dp_accounting_pmf_arrays",
    "laplace_trade_off",
    "trade_off_vertices",
]


def laplace_trade_off(epsilon0: float, alpha: float | np.ndarray) -> float | np.ndarray:
    """The trade-off curve T(Lap(0, b), Lap(Δ, b)) of the Laplace mechanism with ε₀ = Δ/b.

    Dong, Roth, Su 2022 (JRSS-B; arXiv 1905.02383), Appendix (the Laplace mechanism's trade-off function):
    f(α) = 1 − e^{ε₀}α for α < e^{−ε₀}/2; e^{−ε₀}/(4α) for e^{−ε₀}/2 ≤ α ≤ 1/2; e^{−ε₀}(1 − α) for α > 1/2.

    Example:
        >>> round(float(laplace_trade_off(1.0, 0.25)), 6)  # e^{-1}/(4·0.25)
        0.367879
    """
    if not (isinstance(epsilon0, int | float) and math.isfinite(epsilon0) and epsilon0 >= 0):
        raise ValueError(f"epsilon0 must be a finite number >= 0; got {epsilon0!r}")
    a = np.asarray(alpha, dtype=float)
    corner = 0.5 * math.exp(-epsilon0)
    with np.errstate(divide="ignore"):
        middle = math.exp(-epsilon0) / (4.0 * np.maximum(a, 1e-300))
    out = np.where(a < corner, 1.0 - math.exp(epsilon0) * a, np.where(a <= 0.5, middle, math.exp(-epsilon0) * (1 - a)))
    out = np.clip(out, 0.0, 1.0)
    return float(out) if np.ndim(out) == 0 else out


def _direction_vertices(losses: np.ndarray, probs: np.ndarray, infinity_mass: float) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (α, β) of one direction's curve on its flat side (losses ≥ 0), from (1 − p∞, 0) inwards."""
    losses = np.asarray(losses, dtype=float)
    probs = np.asarray(probs, dtype=float)
    keep = (probs > 0) & (losses >= 0)
    losses, probs = losses[keep], probs[keep]
    order = np.argsort(-losses, kind="stable")
    losses, probs = losses[order], probs[order]
    accepted = infinity_mass + np.cumsum(probs)  # P[loss ≥ L] (the test accepts the alternative there)
    beta = np.cumsum(probs * np.exp(-losses))  # Q-mass of the same outcomes
    alpha = np.concatenate([[1.0, 1.0 - infinity_mass], 1.0 - accepted])
    beta = np.concatenate([[0.0, 0.0], beta])
    return np.clip(alpha, 0.0, 1.0), np.clip(beta, 0.0, 1.0)


def _lower_hull(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower convex hull of points (vectorised: prune every non-convex point, repeat until none is left)."""
    order = np.lexsort((y, x))
    x, y = x[order], y[order]
    # Keep the lowest point at each x.
    first = np.concatenate([[True], np.diff(x) > 0])
    x, y = x[first], y[first]
    while x.size > 2:
        dx1, dy1 = x[1:-1] - x[:-2], y[1:-1] - y[:-2]
        dx2, dy2 = x[2:] - x[1:-1], y[2:] - y[1:-1]
        # An interior point whose turn (i−1, i, i+1) is not strictly convex lies on or above a segment between two
        # points of the set, so it is no vertex of the lower hull: all such points can go at once.
        bad = dx1 * dy2 - dy1 * dx2 <= 0
        if not bad.any():
            break
        keep = np.concatenate([[True], ~bad, [True]])
        x, y = x[keep], y[keep]
    return x, y


def trade_off_vertices(
    directions: Sequence[tuple[np.ndarray, np.ndarray, float]],
) -> tuple[np.ndarray, np.ndarray]:
    """Vertices of the exact symmetric trade-off curve implied by discrete PLDs (one per direction).

    Each direction is (losses, probabilities under the first distribution, mass at +∞). The result is the lower
    convex hull of every direction's vertices and their mirror images, from (0, 1 − p∞) to (1, 0).
    """
    xs, ys = [np.array([0.0, 1.0]), np.array([1.0, 0.0])]
    for losses, probs, infinity_mass in directions:
        a, b = _direction_vertices(losses, probs, float(infinity_mass))
        xs = np.concatenate([xs, a, b])
        ys = np.concatenate([ys, b, a])
    return _lower_hull(xs, ys)


@dataclass(frozen=True, slots=True)
class PiecewiseLinearTradeOff:
    """A trade-off curve given by its vertices (α ascending, β descending); evaluated by linear interpolation."""

    alphas: np.ndarray
    betas: np.ndarray

    def __call__(self, alpha: np.ndarray) -> np.ndarray:
        return np.clip(np.interp(np.asarray(alpha, dtype=float), self.alphas, self.betas), 0.0, 1.0)


def discrete_trade_off(directions: Sequence[tuple[np.ndarray, np.ndarray, float]]) -> PiecewiseLinearTradeOff:
    """The exact trade-off curve of discrete PLDs (see :func:`trade_off_vertices`), as a callable.

    Example (binary randomized response with ε = log 3: f = f_{ε,0}, so f(1/4) = 1/4):
        >>> f = discrete_trade_off([(np.array([math.log(3), -math.log(3)]), np.array([0.75, 0.25]), 0.0)])
        >>> round(float(f(0.25)), 12)
        0.25
    """
    alphas, betas = trade_off_vertices(directions)
    return PiecewiseLinearTradeOff(alphas, betas)


def dp_accounting_pmf_arrays(pmf) -> tuple[np.ndarray, np.ndarray, float]:
    """(losses, probabilities, mass at +∞) of a dp-accounting ``PLDPmf`` (dense or sparse)."""
    discretization = float(pmf._discretization)
    if hasattr(pmf, "_loss_probs"):
        items = sorted(pmf._loss_probs.items())
        losses = np.array([k for k, _ in items], dtype=float) * discretization
        probs = np.array([v for _, v in items], dtype=float)
    else:
        probs = np.asarray(pmf._probs, dtype=float)
        losses = (pmf._lower_loss + np.arange(probs.size)) * discretization
    return losses, probs, float(pmf._infinity_mass)


class LazyDiscreteTradeOff:
    """:func:`discrete_trade_off` computed on first use and kept (building the hull of a large PLD takes ~0.1 s)."""

    __slots__ = ("_curve", "_directions")

    def __init__(self, directions: Sequence[tuple[np.ndarray, np.ndarray, float]]) -> None:
        self._directions = tuple(directions)
        self._curve: PiecewiseLinearTradeOff | None = None

    def __call__(self, alpha: np.ndarray) -> np.ndarray:
        if self._curve is None:
            self._curve = discrete_trade_off(self._directions)
        return self._curve(alpha)
