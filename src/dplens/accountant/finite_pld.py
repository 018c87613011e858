"""Finite privacy-loss distributions, composed exactly (no discretisation).

Mechanisms whose dominating pair has finitely many outcomes (randomized response, a generic (ε, δ)-DP mechanism,
and their compositions) have a finite privacy-loss distribution (PLD): losses Lᵢ with probabilities pᵢ under the
first distribution, plus a mass p∞ at +∞. Composition convolves PLDs (Dwork & Rothblum 2016; Koskela et al. 2020),
and for finite ones the convolution is an exact finite sum: the support grows at most multiplicatively, and
losses that agree to 1e-12 (relative) are merged onto the largest of them, which can only raise every δ(ε).

The hockey-stick profile is exact: δ(ε) = p∞ + Σ_{L > ε} p·(1 − e^{ε−L}), and so is ε(δ), solved on the interval
between consecutive losses where δ(ε) = A − e^ε B. The f-DP curve is the exact piecewise-linear curve of
:mod:`dplens.accountant.tradeoff`.

:func:`finite_pld` interprets an event (``functools.singledispatch``; modules register their events);
:func:`exact_profile` is the EXACT route's fallback for compositions (called by
:func:`dplens.accountant.pld.privacy_profile`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from dplens.accountant import conversions
from dplens.accountant import events as ev
from dplens.accountant.curves import PrivacyProfile
from dplens.accountant.rdp import UnsupportedEventError

__all__ = [
    "MAX_SUPPORT",
    "FiniteLossDistribution",
    "FinitePld",
    "exact_profile",
    "finite_pld",
    "randomized_response_directions",
]

#: Largest support composed exactly; beyond it the exact route declines (the PLD route discretises instead).
MAX_SUPPORT = 200_000
_MERGE_RELATIVE = 1e-12


def _merge(losses: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort, drop zero mass, and merge losses equal to 1e-12 (relative) onto the largest of each group."""
    keep = probs > 0
    losses, probs = losses[keep], probs[keep]
    order = np.argsort(losses, kind="stable")
    losses, probs = losses[order], probs[order]
    if losses.size <= 1:
        return losses, probs
    gap = np.diff(losses) > _MERGE_RELATIVE * np.maximum(1.0, np.abs(losses[1:]))
    group = np.concatenate([[0], np.cumsum(gap)])
    merged_probs = np.bincount(group, weights=probs)
    last = np.concatenate([np.flatnonzero(gap), [losses.size - 1]])  # the largest loss of each group
    return losses[last], merged_probs


def _union_mass(first: float, second: float) -> float:
    """1 − (1 − a)(1 − b), the mass at +∞ of a composition, exactly and rounded up to a double.

    In floating point 1 − (1 − a)(1 − b) loses everything below 1e-16 (a = 0, b = 2.59e-5 gave b + 1.5e-17, so an
    (ε, δ) ledger composed exactly to δ reported ε = ∞ at that δ); rational arithmetic keeps a + b − ab exact.
    """
    from fractions import Fraction

    exact = Fraction(first) + Fraction(second) - Fraction(first) * Fraction(second)
    value = float(exact)
    if Fraction(value) < exact:  # never below: the mass at +∞ counts in full in δ
        value = math.nextafter(value, math.inf)
    return value


@dataclass(frozen=True, slots=True)
class FiniteLossDistribution:
    """One direction's PLD: ``losses`` (ascending) with ``probs``, and ``infinity_mass`` at +∞."""

    losses: np.ndarray
    probs: np.ndarray
    infinity_mass: float = 0.0

    @classmethod
    def of(cls, losses, probs, infinity_mass: float = 0.0) -> FiniteLossDistribution:
        merged = _merge(np.asarray(losses, dtype=float), np.asarray(probs, dtype=float))
        return cls(merged[0], merged[1], float(min(max(infinity_mass, 0.0), 1.0)))

    @classmethod
    def identity(cls) -> FiniteLossDistribution:
        return cls(np.array([0.0]), np.array([1.0]), 0.0)

    @property
    def size(self) -> int:
        return int(self.losses.size)

    def compose(self, other: FiniteLossDistribution) -> FiniteLossDistribution:
        """The PLD of the product pair: losses add, finite masses multiply, +∞ if either is +∞.

        Example (two runs of binary randomized response with ε = log 3: losses ±2 log 3 and 0):
            >>> rr = FiniteLossDistribution.of([math.log(3), -math.log(3)], [0.75, 0.25])
            >>> twice = rr.compose(rr)
            >>> twice.losses.round(4).tolist(), twice.probs.round(4).tolist()
            ([-2.1972, 0.0, 2.1972], [0.0625, 0.375, 0.5625])
        """
        if self.size * other.size > 16 * MAX_SUPPORT:
            raise UnsupportedEventError(
                f"exact composition would need {self.size * other.size} support points (limit {16 * MAX_SUPPORT})"
            )
        losses = (self.losses[:, None] + other.losses[None, :]).ravel()
        probs = (self.probs[:, None] * other.probs[None, :]).ravel()
        infinity = _union_mass(self.infinity_mass, other.infinity_mass)
        out = FiniteLossDistribution.of(losses, probs, infinity)
        if out.size > MAX_SUPPORT:
            raise UnsupportedEventError(f"exact composition has {out.size} support points (limit {MAX_SUPPORT})")
        return out

    def self_compose(self, count: int) -> FiniteLossDistribution:
        """``count``-fold composition by repeated squaring."""
        result, base, remaining = FiniteLossDistribution.identity(), self, int(count)
        while remaining:
            if remaining & 1:
                result = result.compose(base)
            remaining >>= 1
            if remaining:
                base = base.compose(base)
        return result

    def _suffix(self) -> tuple[np.ndarray, np.ndarray]:
        # A_j = Σ_{i ≥ j} pᵢ and B_j = Σ_{i ≥ j} pᵢ e^{−Lᵢ} (with a trailing 0).
        a = np.concatenate([np.cumsum(self.probs[::-1])[::-1], [0.0]])
        with np.errstate(over="ignore"):
            b = np.concatenate([np.cumsum((self.probs * np.exp(-self.losses))[::-1])[::-1], [0.0]])
        return a, b

    def delta(self, epsilons: np.ndarray) -> np.ndarray:
        """δ(ε) = p∞ + Σ_{L > ε} p(1 − e^{ε−L}), with 4 ulps of the summed mass added (an upper bound)."""
        eps = np.asarray(epsilons, dtype=float)
        a, b = self._suffix()
        j = np.searchsorted(self.losses, eps, side="right")  # first loss > ε
        with np.errstate(over="ignore", invalid="ignore"):
            value = a[j] - np.exp(eps) * b[j]
        value = np.where(np.isnan(value), 0.0, value)
        margin = 4 * np.finfo(float).eps * a[j]
        return np.clip(self.infinity_mass + np.maximum(value, 0.0) + margin, 0.0, 1.0)

    def epsilon(self, delta: float) -> float:
        """The smallest ε ≥ 0 with δ(ε) ≤ delta, exactly (interval by interval), rounded up."""
        if self.infinity_mass > delta:
            return math.inf
        at_losses = self.delta(self.losses)
        if float(self.delta(np.array([0.0]))[0]) <= delta:
            return 0.0
        # δ is non-increasing: the answer lies in (L_{j−1}, L_j] for the first loss L_j with δ(L_j) ≤ delta.
        j = int(np.searchsorted(-at_losses, -delta, side="left"))
        a, b = self._suffix()
        target = delta - self.infinity_mass
        if b[j] <= 0:
            return conversions.round_up(float(self.losses[j - 1])) if j > 0 else 0.0
        value = math.log(max(a[j] - target, 1e-300) / b[j])
        lower = self.losses[j - 1] if j > 0 else 0.0
        eps = min(max(value, lower, 0.0), float(self.losses[min(j, self.size - 1)]))
        step = max(abs(eps) * 1e-12, 1e-15)
        while float(self.delta(np.array([eps]))[0]) > delta:  # the 4-ulp margin may need a nudge
            eps += step
            step *= 2
        return conversions.round_up(eps)

    def rdp(self, alpha: np.ndarray) -> np.ndarray:
        """D_α = log Σ p·e^{(α−1)L} / (α − 1) (∞ with mass at +∞); D_∞ = max L."""
        alpha = np.asarray(alpha, dtype=float)
        if self.infinity_mass > 0:
            return np.full(alpha.shape, np.inf)
        finite = np.where(np.isinf(alpha), 2.0, alpha)
        from dplens.accountant._numerics import logsumexp

        logs = np.log(self.probs)[None, :] + (finite.ravel()[:, None] - 1.0) * self.losses[None, :]
        value = (logsumexp(logs, axis=1) / (finite.ravel() - 1.0)).reshape(alpha.shape)
        return np.where(np.isinf(alpha), float(np.max(self.losses)), np.maximum(value, 0.0))

    def as_direction(self) -> tuple[np.ndarray, np.ndarray, float]:
        return self.losses, self.probs, self.infinity_mass


@dataclass(frozen=True, slots=True)
class FinitePld:
    """A finite PLD in both directions (``add`` None: symmetric, the same as ``remove``)."""

    remove: FiniteLossDistribution
    add: FiniteLossDistribution | None = None

    @classmethod
    def identity(cls) -> FinitePld:
        return cls(FiniteLossDistribution.identity())

    def directions(self) -> list[FiniteLossDistribution]:
        return [self.remove] if self.add is None else [self.remove, self.add]

    def compose(self, other: FinitePld) -> FinitePld:
        remove = self.remove.compose(other.remove)
        if self.add is None and other.add is None:
            return FinitePld(remove)
        return FinitePld(remove, (self.add or self.remove).compose(other.add or other.remove))

    def self_compose(self, count: int) -> FinitePld:
        remove = self.remove.self_compose(count)
        return FinitePld(remove, None if self.add is None else self.add.self_compose(count))

    def delta(self, epsilon: float) -> float:
        return max(float(d.delta(np.array([epsilon]))[0]) for d in self.directions())

    def epsilon(self, delta: float) -> float:
        return max(d.epsilon(delta) for d in self.directions())

    def profile(self, description: str = "finite PLD") -> PrivacyProfile:
        """The exact :class:`PrivacyProfile`, with ε(δ) and the trade-off curve exact too."""
        from dplens.accountant import tradeoff

        return PrivacyProfile(
            remove=self.remove.delta,
            add=self.add.delta if self.add is not None else None,
            epsilon_for_delta=self.epsilon,
            description=f"{description} (exact finite PLD)",
            trade_off_function=tradeoff.LazyDiscreteTradeOff([d.as_direction() for d in self.directions()]),
        )

    def rdp(self, alpha: np.ndarray) -> np.ndarray:
        """The RDP curve: the larger of the directions' D_α (the add direction's pair is the reverse one)."""
        return np.maximum.reduce([d.rdp(alpha) for d in self.directions()])

    def to_dp_accounting(self, value_discretization_interval: float):
        """A pessimistic dp-accounting ``PrivacyLossDistribution``: every loss rounded up to the grid."""
        from dp_accounting.pld import privacy_loss_distribution as dpa_pld

        def rounded(d: FiniteLossDistribution) -> dict[int, float]:
            out: dict[int, float] = {}
            for loss, prob in zip(
                np.ceil(d.losses / value_discretization_interval - 1e-9).astype(int).tolist(),
                d.probs.tolist(),
                strict=True,
            ):
                out[loss] = out.get(loss, 0.0) + prob
            return out

        if self.add is None:
            return dpa_pld.PrivacyLossDistribution.create_from_rounded_probability(
                rounded(self.remove), self.remove.infinity_mass, value_discretization_interval
            )
        return dpa_pld.PrivacyLossDistribution.create_from_rounded_probability(
            rounded(self.remove),
            self.remove.infinity_mass,
            value_discretization_interval,
            rounded_probability_mass_function_add=rounded(self.add),
            infinity_mass_add=self.add.infinity_mass,
            symmetric=False,
        )


# --------------------------------------------------------------------------------------------
# Interpreter: event → FinitePld
# --------------------------------------------------------------------------------------------


@functools.singledispatch
def finite_pld(event: ev.Event) -> FinitePld:
    """The exact finite PLD of an event; :class:`UnsupportedEventError` where it has none (or it is too large)."""
    raise UnsupportedEventError(f"no finite privacy-loss distribution is known for event {event!r}")


def randomized_response_directions(
    epsilon: float, num_values: int, neighboring: ev.NeighboringRelation
) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """The exact privacy-loss distributions of k-ary randomized response, one per direction.

    Each is (losses, probabilities under the first distribution, mass at +∞). Replace-one: the pair
    P = (p_hi, p_lo, …), Q = (p_lo, p_hi, …) is symmetric: losses ±ε and 0. Zero-out: P against the uniform
    response U of the special record, both orders (the two differ). Add/remove is not defined for this mechanism.
    """
    if neighboring is ev.NeighboringRelation.ADD_OR_REMOVE_ONE:
        raise UnsupportedEventError(
            "randomized response is analysed under replace-one or zero-out adjacency; got neighboring=add_remove"
        )
    k = num_values
    p_lo = 1.0 / (math.exp(epsilon) + k - 1)
    p_hi = math.exp(epsilon) * p_lo
    if neighboring is ev.NeighboringRelation.REPLACE_ONE:
        losses = np.array([epsilon, -epsilon, 0.0])
        return [(losses, np.array([p_hi, p_lo, (k - 2) * p_lo]), 0.0)]
    up, down = math.log(k * p_hi), math.log(k * p_lo)
    return [
        (np.array([up, down]), np.array([p_hi, (k - 1) * p_lo]), 0.0),
        (np.array([-up, -down]), np.array([1.0 / k, (k - 1) / k]), 0.0),
    ]


@finite_pld.register
def _(event: ev.NoOp) -> FinitePld:
    return FinitePld.identity()


@finite_pld.register
def _(event: ev.NonPrivate) -> FinitePld:
    return FinitePld(FiniteLossDistribution(np.array([0.0]), np.array([0.0]), 1.0))


@finite_pld.register
def _(event: ev.RandomizedResponse) -> FinitePld:
    directions = randomized_response_directions(event.epsilon, event.num_values, event.neighboring)
    parts = [FiniteLossDistribution.of(*direction) for direction in directions]
    return FinitePld(parts[0], parts[1] if len(parts) > 1 else None)


@finite_pld.register
def _(event: ev.SelfComposed) -> FinitePld:
    closed_form = getattr(event.event, "finite_pld_self_composed", None)  # e.g. ApproxDp: KOV's binomial PLD
    if callable(closed_form):
        return closed_form(event.count)
    return finite_pld(event.event).self_compose(event.count)


@finite_pld.register
def _(event: ev.Composed) -> FinitePld:
    total = FinitePld.identity()
    for inner in event.events:
        total = total.compose(finite_pld(inner))
    return total


def exact_profile(event: ev.Event) -> PrivacyProfile | None:
    """The exact profile of ``event`` from its finite PLD, or None where it has none."""
    try:
        return finite_pld(event).profile(description=type(event).__name__)
    except UnsupportedEventError:
        return None
