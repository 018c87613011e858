"""Privacy filters: stopping rules that stay valid when each release is chosen after seeing the earlier outputs.

A filter fixes a budget *before* the first release and admits a release only if an additive quantity of all the
releases admitted so far, this one included, stays within the budget. Composition theorems for parameters fixed in
advance (PLD of the whole composition, RDP at the order chosen after the fact, advanced composition) are not valid
when the parameters themselves are chosen adaptively (Rogers, Roth, Ullman, Vadhan 2016, arXiv 1605.08294, §3 give
the counterexamples); these are:

- :class:`ZcdpFilter` — Σ ρᵢ ≤ ρ gives ρ-zCDP. Feldman & Zrnic 2021 (NeurIPS; arXiv 2008.11193), Theorem 3.1 (the
  Rényi filter: adaptively chosen (α, ρᵢ(α))-RDP mechanisms with Σ ρᵢ(α) ≤ B almost surely compose to (α, B)-RDP),
  applied at every order α > 1 at once with B(α) = ρα: the stopping rule bounds the sum at every order
  simultaneously, so no union bound is needed.
- :class:`GdpFilter` — Σ μᵢ² ≤ μ² gives μ-GDP for μᵢ-GDP mechanisms chosen adaptively. Smith & Thakurta 2022,
  "Fully Adaptive Composition for Gaussian Differential Privacy" (arXiv 2210.17520), main theorem.
- :class:`RenyiFilter` — an (ε, δ) budget from RDP at k orders α₁ < … < α_k fixed when the budget is created
  (Feldman & Zrnic 2021, Theorem 3.1, at each order; Lécuyer 2021, "Practical Privacy Filters and Odometers with Rényi
  Differential Privacy", arXiv 2103.01379, for the conversion with a union bound over the orders). A release is
  admitted iff *some* order j keeps Σ ρᵢ(α_j) ≤ B_j, where B_j is the largest RDP value that converts to ε at
  δ/k (Canonne, Kamath, Steinke 2020, Prop. 12). Why it is valid (the argument of Lécuyer 2021, written out): let G_j
  be the outputs on which order j stayed within its budget to the end and no earlier order did (disjoint; they cover
  every output since an admitted release keeps at least one order in budget and the sums only grow). On G_j the
  interaction is identical to the one that also stops before order j would be exceeded, which is (α_j, B_j)-RDP by
  Feldman & Zrnic, hence (ε, δ/k)-DP; summing over j gives P[Y ∈ S] ≤ e^ε P′[Y ∈ S] + δ for every event S. Order
  j's sum is *not* bounded on its own (the release may be admitted through another order), which is why δ is split:
  a rule valid at one order is not valid at the order that happens to be best after the fact.

A refused release is a no-op chosen from the past (the decision depends only on earlier outputs and the proposed
release), so a filter may refuse one release and admit a smaller one later. Releases charged concurrently by
several analysts are composed in the order their charges commit; every valid filter stays valid under such
concurrent composition (Haney, Shoemate, Tian, Vadhan, Vyrros, Xu, Zhang, CCS 2023, arXiv 2309.05901).

Every per-release quantity here is an upper bound (rounded up); the filters compare sums exactly (the ledger sums
them as exact integers, :func:`exact_sum`), so a sum recomputed from the stored releases in any order agrees bit for
bit with the running one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dplens.accountant import conversions
from dplens.accountant import events as ev

__all__ = [
    "DEFAULT_FILTER_ORDERS",
    "GdpFilter",
    "RenyiFilter",
    "ZcdpFilter",
    "exact",
    "exact_sum",
    "from_exact",
    "gdp_mu_squared",
    "rdp_at_orders",
    "rdp_grid_epsilon",
    "zcdp_rho",
]

#: The Rényi orders an adaptive (ε, δ) budget uses unless told otherwise: integers (some RDP curves are exact only at
#: integer orders), from 2 (large budgets) to 64 (small budgets, δ ≤ 1e-10).
DEFAULT_FILTER_ORDERS: tuple[float, ...] = (2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 24.0, 32.0, 64.0)

# Every float is an integer multiple of 2^-1074, so sums of floats scaled by 2^1074 are exact Python integers.
_SCALE_BITS = 1074


def exact(value: float) -> int | None:
    """``value`` × 2^1074 as an exact integer (None for +∞, which no finite budget admits).

    Example:
        >>> exact(0.5) == 2**1073, exact(float("inf")) is None
        (True, True)
    """
    if math.isinf(value) and value > 0:
        return None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"a filter quantity must be a number >= 0 or +inf; got {value!r}")
    numerator, denominator = float(value).as_integer_ratio()
    return numerator * ((1 << _SCALE_BITS) // denominator)


def from_exact(total: int | None) -> float:
    """The float at or above an exact sum (rounded up, so a guarantee computed from it stays an upper bound).

    Example:
        >>> from_exact(exact(0.1) + exact(0.2)) >= 0.1 + 0.2 - 1e-17
        True
    """
    if total is None:
        return math.inf
    value = total / (1 << _SCALE_BITS)  # correctly rounded (int / int is true division, rounded to nearest)
    if exact(value) < total:
        value = math.nextafter(value, math.inf)
    return value


def exact_sum(values: Sequence[int | None]) -> int | None:
    """Σ of exact integers, None (∞) if any term is ∞.

    Example:
        >>> exact_sum([exact(1.0), exact(2.0)]) == exact(3.0), exact_sum([exact(1.0), None])
        (True, None)
    """
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total


# --------------------------------------------------------------------------------------------
# Per-release quantities
# --------------------------------------------------------------------------------------------


def rdp_at_orders(entries: Sequence[tuple[ev.Event, int]], orders: Sequence[float]) -> list[float]:
    """Σ count·ε_RDP(α) of ``entries`` at each of ``orders`` (rounded up), from the accountant's RDP curves.

    Raises :class:`~dplens.accountant.rdp.UnsupportedEventError` for an event without an RDP curve, and for a
    non-integer order on a curve exact only at integers.

    Example:
        >>> from dplens import Gaussian
        >>> rdp_at_orders([(Gaussian(noise_multiplier=2.0), 4)], [2.0, 8.0])  # 4 × α/8, rounded up
        [1.000000000001, 4.000000000004]
    """
    import numpy as np

    from dplens.accountant import rdp

    alphas = np.asarray(orders, dtype=float)
    total = np.zeros_like(alphas)
    for event, count in entries:
        curve = rdp.rdp_curve(event)
        if curve.integer_only and np.any(alphas != np.round(alphas)):
            raise rdp.UnsupportedEventError(f"the RDP curve of {event!r} is exact only at integer orders")
        total = total + count * np.asarray(curve(alphas), dtype=float) if count else total
    return [conversions.round_up(max(float(v), 0.0)) if math.isfinite(v) else math.inf for v in total]


def rdp_grid_epsilon(sums: Sequence[float], orders: Sequence[float], delta: float) -> tuple[float, float]:
    """The smallest ε over ``orders`` that RDP values ``sums`` convert to at ``delta`` (Canonne, Kamath, Steinke
    2020, Prop. 12), rounded up, and its order. Every order gives a valid upper bound, so any subset of orders does.

    Example:
        >>> eps, order = rdp_grid_epsilon([1.0, 4.0], [2.0, 8.0], 1e-5)
        >>> round(eps, 4), order
        (5.2141, 8.0)
    """
    import numpy as np

    values = conversions.rdp_to_epsilon_optimal(np.asarray(sums, dtype=float), np.asarray(orders, dtype=float), delta)
    best = int(np.argmin(values))
    return conversions.round_up(max(float(values[best]), 0.0)), float(orders[best])


def zcdp_rho(event: ev.Event) -> float | None:
    """ρ with ``event`` ρ-zCDP in closed form, or None when none is known (subsampled mechanisms, (ε, δ) events).

    Gaussian: 1/(2σ²) (Bun & Steinke 2016, arXiv 1605.02065, Prop. 1.6); pure ε-DP (Laplace, randomized response,
    events declaring ``pure_dp_epsilon``): ε²/2 (ibid., Prop. 1.4); μ-GDP events (tree aggregation, events
    declaring ``gdp_mu``): μ²/2; ``ZcdpMechanism`` with ξ = 0: its ρ; compositions add (ibid., Lemma 1.7).

    Example:
        >>> from dplens import Gaussian, Laplace, SelfComposed
        >>> zcdp_rho(SelfComposed(event=Gaussian(noise_multiplier=2.0), count=4))
        0.5
        >>> zcdp_rho(Laplace(noise_multiplier=2.0))  # pure 0.5-DP
        0.125
    """
    match event:
        case ev.NoOp():
            return 0.0
        case ev.NonPrivate():
            return None
        case ev.Gaussian():
            return 0.5 / event.noise_multiplier**2
        case ev.Laplace():
            return 0.5 / event.noise_multiplier**2
        case ev.RandomizedResponse():
            return 0.5 * event.epsilon**2
        case ev.ZcdpMechanism():
            return event.rho if event.xi == 0 else None
        case ev.SingleEpochTreeAggregation():
            return 0.5 * event.gdp_mu() ** 2
        case ev.SelfComposed():
            inner = zcdp_rho(event.event)
            return None if inner is None else event.count * inner
        case ev.Composed():
            parts = [zcdp_rho(e) for e in event.events]
            return None if any(p is None for p in parts) else math.fsum(parts)
    declared_mu = getattr(event, "gdp_mu", None)
    if callable(declared_mu) and (mu := declared_mu()) is not None:
        return 0.5 * float(mu) ** 2
    declared_pure = getattr(event, "pure_dp_epsilon", None)
    if callable(declared_pure):
        return 0.5 * float(declared_pure()) ** 2
    return None


def gdp_mu_squared(event: ev.Event) -> float | None:
    """μ² with ``event`` μ-GDP exactly (Gaussians and their compositions, events declaring ``gdp_mu``), or None.

    Example:
        >>> from dplens import Gaussian
        >>> gdp_mu_squared(Gaussian(noise_multiplier=2.0))
        0.25
    """
    from dplens.accountant import pld

    mu = pld.gaussian_mu(event)
    return None if mu is None else float(mu) ** 2


def _entries_sum(entries: Sequence[tuple[ev.Event, int]], quantity, name: str) -> float:
    total = []
    for event, count in entries:
        value = quantity(event)
        if value is None:
            from dplens.accountant.rdp import UnsupportedEventError

            raise UnsupportedEventError(f"{name} has no closed form for event {event!r}")
        total.append(count * value)
    return conversions.round_up(math.fsum(total))


# --------------------------------------------------------------------------------------------
# Filters
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ZcdpFilter:
    """The zCDP filter: admit while Σ ρᵢ ≤ ``rho`` (Feldman & Zrnic 2021, Theorem 3.1, at every order at once).

    The admitted releases are ``rho``-zCDP under full adaptivity; (ε, δ) follows by the optimal RDP conversion
    (Canonne, Kamath, Steinke 2020, Prop. 12, α optimised continuously).

    Example:
        >>> from dplens import Gaussian
        >>> f = ZcdpFilter(rho=1.0)
        >>> q = f.quantity([(Gaussian(noise_multiplier=1.0), 1)])  # ρ = 1/2 (rounded up)
        >>> f.admits(q), round(f.epsilon(q, 1e-5), 4)
        (True, 4.7284)
    """

    rho: float

    def __post_init__(self) -> None:
        conversions.check_epsilon(self.rho, name="rho")

    def quantity(self, entries: Sequence[tuple[ev.Event, int]]) -> float:
        """Σ count·ρ of ``entries`` (rounded up); UnsupportedEventError without a closed-form ρ."""
        return _entries_sum(entries, zcdp_rho, "zCDP rho")

    def admits(self, total: float) -> bool:
        return total <= self.rho

    @staticmethod
    def epsilon(total: float, delta: float) -> float:
        """ε at ``delta`` of ``total``-zCDP (an upper bound)."""
        from dplens.accountant.curves import Zcdp

        return 0.0 if total == 0 else Zcdp(rho=total).epsilon(delta)


@dataclass(frozen=True, slots=True, kw_only=True)
class GdpFilter:
    """The GDP filter: admit while Σ μᵢ² ≤ ``mu``² (Smith & Thakurta 2022, arXiv 2210.17520, main theorem).

    Only for μ-GDP releases (Gaussian mechanisms); the admitted releases are ``mu``-GDP under full adaptivity, and
    (ε, δ) follows exactly (Dong, Roth, Su 2022, Cor. 2.13).

    Example:
        >>> from dplens import Gaussian
        >>> f = GdpFilter(mu=1.5)
        >>> q = f.quantity([(Gaussian(noise_multiplier=2.0), 4)])  # 4 × (1/2)² (rounded up)
        >>> f.admits(q), round(f.epsilon(q, 1e-5), 4)
        (True, 4.3772)
    """

    mu: float

    def __post_init__(self) -> None:
        conversions.check_epsilon(self.mu, name="mu")

    def quantity(self, entries: Sequence[tuple[ev.Event, int]]) -> float:
        """Σ count·μ² of ``entries`` (rounded up); UnsupportedEventError for a release that is not μ-GDP."""
        return _entries_sum(entries, gdp_mu_squared, "Gaussian DP mu")

    def admits(self, total: float) -> bool:
        return total <= self.mu**2

    @staticmethod
    def epsilon(total: float, delta: float) -> float:
        """ε at ``delta`` of √total-GDP (exact, rounded up)."""
        return 0.0 if total == 0 else conversions.gdp_epsilon(math.sqrt(total), delta)


@dataclass(frozen=True, slots=True, kw_only=True)
class RenyiFilter:
    """The Rényi filter for an (ε, δ) budget on orders fixed in advance, with a union bound over the orders.

    ``order_budgets[j]`` = B_j is the largest RDP value at ``orders[j]`` that converts to at most ``epsilon`` at
    δ/k (Canonne, Kamath, Steinke 2020, Prop. 12), k = the number of orders; orders whose B_j would be ≤ 0 are
    dropped when the filter is built (:meth:`build`), which raises the others. A release set is admitted iff some
    order keeps its sum within B_j; see the module docstring for why this is valid under full adaptivity (Feldman &
    Zrnic 2021, Theorem 3.1; Lécuyer 2021).

    Example:
        >>> from dplens import Gaussian
        >>> f = RenyiFilter.build(epsilon=1.0, delta=1e-6)
        >>> q = f.quantity([(Gaussian(noise_multiplier=10.0), 1)])
        >>> f.admits(q), f.epsilon(q) <= 1.0
        (True, True)
    """

    epsilon_budget: float
    delta: float
    orders: tuple[float, ...]
    order_budgets: tuple[float, ...]

    @classmethod
    def build(cls, *, epsilon: float, delta: float, orders: Sequence[float] = DEFAULT_FILTER_ORDERS) -> RenyiFilter:
        """The filter for target (``epsilon``, ``delta``) on ``orders`` (each > 1), B_j verified to convert to
        at most ``epsilon``."""
        epsilon = conversions.check_epsilon(epsilon)
        delta = conversions.check_delta(delta)
        chosen = sorted({float(a) for a in orders})
        if not chosen or any(not (a > 1 and math.isfinite(a)) for a in chosen):
            raise ValueError(f"orders must be finite numbers > 1; got {list(orders)!r}")
        while True:
            k = len(chosen)
            budgets = [cls._order_budget(epsilon, delta / k, a) for a in chosen]
            kept = [(a, b) for a, b in zip(chosen, budgets, strict=True) if b > 0]
            if not kept:
                raise ValueError(
                    f"no Rényi order among {list(orders)!r} can hold epsilon={epsilon!r} at delta={delta!r}"
                )
            if len(kept) == k:
                return cls(
                    epsilon_budget=epsilon,
                    delta=delta,
                    orders=tuple(a for a, _ in kept),
                    order_budgets=tuple(b for _, b in kept),
                )
            chosen = [a for a, _ in kept]

    @staticmethod
    def _order_budget(epsilon: float, delta: float, alpha: float) -> float:
        import numpy as np

        budget = epsilon - math.log1p(-1.0 / alpha) + (math.log(delta) + math.log(alpha)) / (alpha - 1.0)
        if budget <= 0:
            return budget
        # Step down until the conversion (as the filter evaluates it, rounded up) is within the target.
        while budget > 0:
            value = conversions.round_up(
                float(conversions.rdp_to_epsilon_optimal(np.array([budget]), np.array([alpha]), delta)[0])
            )
            if value <= epsilon:
                return budget
            budget = math.nextafter(budget, -math.inf) - budget * 1e-15
        return budget

    @property
    def order_delta(self) -> float:
        """δ/k: each order's share of δ."""
        return self.delta / len(self.orders)

    def quantity(self, entries: Sequence[tuple[ev.Event, int]]) -> list[float]:
        """RDP of ``entries`` at the filter's orders (rounded up); UnsupportedEventError without an RDP curve."""
        return rdp_at_orders(entries, self.orders)

    def admits_exact(self, sums: Sequence[int | None]) -> bool:
        """Whether exact sums (:func:`exact`) keep some order within its budget."""
        return any(s is not None and s <= exact(b) for s, b in zip(sums, self.order_budgets, strict=True))

    def admits(self, sums: Sequence[float]) -> bool:
        return self.admits_exact([exact(s) for s in sums])

    def epsilon(self, sums: Sequence[float]) -> float:
        """The smallest ε the filter state converts to at δ/k over its orders (an upper bound once admitted)."""
        return rdp_grid_epsilon(sums, self.orders, self.order_delta)[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon_budget,
            "delta": self.delta,
            "orders": list(self.orders),
            "order_budgets": list(self.order_budgets),
        }
