"""The composition rule of each budget: which theorem decides whether a release fits, and what is cached.

The ledger does no privacy maths of its own: every number comes from the accountant (``Accountant.epsilon_result``
for planned budgets, :mod:`dplens.accountant.filters` for the filters). A rule is fixed when its budget is created
and stored with it (the filter's orders and per-order budgets included), so a later dplens never re-derives it.

What each rule keeps per release (``quantity``) and per period (``sums``, the exact sum of the quantities):

- ``planned_tightest`` (planned, (ε, δ)): RDP at fixed orders, only as a *sound shortcut*: the RDP bound at the best
  of those orders is a valid upper bound on ε, so when it already fits the budget the release is accepted without
  running the tightest route; otherwise the tightest route of the whole period (``Accountant.epsilon_result``,
  BEST of PLD / RDP / exact over the stored events) decides, so a release is refused only on the tightest route.
- ``renyi_filter`` (adaptive, (ε, δ)): RDP at the filter's orders (:class:`~dplens.accountant.filters.RenyiFilter`).
- ``zcdp_filter`` (ρ budgets, either mode): ρ (:class:`~dplens.accountant.filters.ZcdpFilter`).
- ``gdp_filter`` (μ budgets, either mode, Gaussian releases only): μ² (:class:`~dplens.accountant.filters.GdpFilter`).

The sums are exact integers (:func:`dplens.accountant.filters.exact`), written in the same transaction as the
release, so they always equal the sum recomputed from the stored releases (``Ledger.verify`` checks it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dplens.accountant import events as ev
from dplens.accountant import filters
from dplens.ledger.model import Mode, Target

__all__ = ["FAST_PATH_MARGIN", "PLANNED_CACHE_ORDERS", "Rule", "make_rule", "rule_of"]

#: Orders of the planned mode's cached RDP sums (the shortcut; any order gives a valid bound).
PLANNED_CACHE_ORDERS: tuple[float, ...] = (*filters.DEFAULT_FILTER_ORDERS, 128.0, 256.0)
#: The shortcut accepts only below target × (1 − this), so the tightest route recomputed later from the stored events
#: (which may differ from the cached bound in the last bits) can never exceed the target.
FAST_PATH_MARGIN = 1e-9

_THEOREMS = {
    "planned_tightest": "the tightest valid route of the whole composition (BEST of PLD / RDP / exact); valid "
    "only for releases whose parameters were fixed in advance",
    "renyi_filter": "Rényi filter on orders fixed at creation (Feldman & Zrnic 2021, Thm 3.1) with a union bound "
    "over the orders (Lécuyer 2021): valid under full adaptivity",
    "zcdp_filter": "zCDP filter: sum of rho <= budget (Feldman & Zrnic 2021, Thm 3.1 at every order): valid under "
    "full adaptivity",
    "gdp_filter": "GDP filter: sum of mu^2 <= budget^2 (Smith & Thakurta 2022): valid under full adaptivity, "
    "Gaussian releases only",
}


def _encode(values: Sequence[int | None]) -> list[str]:
    return ["inf" if v is None else str(v) for v in values]


def _decode(values: Sequence[str]) -> list[int | None]:
    return [None if v == "inf" else int(v) for v in values]


@dataclass(frozen=True, slots=True)
class Rule:
    """A budget's rule, rebuilt from its stored dict (:func:`rule_of`): the per-release quantity it adds, its exact
    decision on a period's sums, and the readout as ε.

    Example:
        >>> import dplens
        >>> target = Target(epsilon=1.0, delta=1e-6, mu=0.5)
        >>> stored = make_rule(mode=Mode.ADAPTIVE, target=target, orders=None, tolerance=1e-3)
        >>> rule = rule_of(Mode.ADAPTIVE, target, stored)
        >>> q = rule.quantity([(dplens.Gaussian(noise_multiplier=4.0), 1)])  # μ² = 1/16
        >>> rule.kind, rule.filter_admits(q), rule.filter_admits(rule.add(q, rule.add(q, rule.add(q, q))))
        ('gdp_filter', True, False)
    """

    kind: str
    mode: Mode
    target: Target
    data: dict[str, Any]

    @property
    def theorem(self) -> str:
        return _THEOREMS[self.kind]

    @property
    def orders(self) -> tuple[float, ...]:
        return tuple(self.data.get("orders", ()))

    # ---- per-release quantity -------------------------------------------------------------

    def quantity(self, entries: Sequence[tuple[ev.Event, int]]) -> list[int | None]:
        """The release's additive quantity as exact integers (None: ∞); ValueError when the rule cannot take it."""
        from dplens.accountant.rdp import UnsupportedEventError

        try:
            match self.kind:
                case "planned_tightest":
                    try:
                        values = filters.rdp_at_orders(entries, self.orders)
                    except UnsupportedEventError:
                        return [None] * len(self.orders)  # no RDP curve: no shortcut, the tightest route decides
                case "renyi_filter":
                    values = filters.rdp_at_orders(entries, self.orders)
                case "zcdp_filter":
                    values = [filters.ZcdpFilter(rho=self.target.rho).quantity(entries)]
                case "gdp_filter":
                    values = [filters.GdpFilter(mu=self.target.mu).quantity(entries)]
                case _:
                    raise ValueError(f"unknown ledger rule {self.kind!r}")
        except UnsupportedEventError as err:
            raise ValueError(f"the budget's {self.kind.replace('_', ' ')} cannot take this release: {err}") from None
        return [filters.exact(v) for v in values]

    def zero(self) -> list[int | None]:
        return [0] * (1 if self.kind in ("zcdp_filter", "gdp_filter") else len(self.orders))

    @staticmethod
    def add(sums: Sequence[int | None], quantity: Sequence[int | None]) -> list[int | None]:
        return [None if a is None or b is None else a + b for a, b in zip(sums, quantity, strict=True)]

    # ---- decisions and readouts -----------------------------------------------------------

    def filter_admits(self, sums: Sequence[int | None]) -> bool:
        """Adaptive and ρ/μ rules: the filter's exact decision on the period's sums."""
        match self.kind:
            case "renyi_filter":
                return self._renyi().admits_exact(sums)
            case "zcdp_filter":
                return sums[0] is not None and sums[0] <= filters.exact(self.target.rho)
            case "gdp_filter":
                return sums[0] is not None and sums[0] <= filters.exact(self.target.mu**2)
        raise ValueError(f"rule {self.kind!r} is not a filter")

    def filter_epsilon(self, sums: Sequence[int | None]) -> float:
        """The filter state as ε at the budget's δ (an upper bound for the admitted releases)."""
        floats = [filters.from_exact(s) for s in sums]
        match self.kind:
            case "renyi_filter":
                return self._renyi().epsilon(floats)
            case "zcdp_filter":
                return filters.ZcdpFilter.epsilon(floats[0], self.target.delta)
            case "gdp_filter":
                return filters.GdpFilter.epsilon(floats[0], self.target.delta)
        raise ValueError(f"rule {self.kind!r} is not a filter")

    def filter_state(self, sums: Sequence[int | None]) -> dict[str, Any]:
        """The filter's quantities for status: used and budget per order (or ρ, or μ²)."""
        floats = [filters.from_exact(s) for s in sums]
        match self.kind:
            case "renyi_filter":
                return {
                    "quantity": "RDP at fixed orders (sum / budget per order)",
                    "orders": list(self.orders),
                    "used": [_json_float(v) for v in floats],
                    "budget": list(self.data["order_budgets"]),
                    "order_delta": self._renyi().order_delta,
                }
            case "zcdp_filter":
                return {"quantity": "rho", "used": _json_float(floats[0]), "budget": self.target.rho}
            case "gdp_filter":
                return {"quantity": "mu^2", "used": _json_float(floats[0]), "budget": self.target.mu**2}
        return {}

    def describe_decision(self, sums: Sequence[int | None], admitted: bool) -> str:
        """The filter's decision in words: the quantity it compares and the budget."""
        floats = [filters.from_exact(s) for s in sums]
        relation = "<=" if admitted else ">"
        match self.kind:
            case "zcdp_filter":
                return f"zCDP filter: sum of rho {floats[0]:.6g} {relation} {self.target.rho:.6g}"
            case "gdp_filter":
                return f"GDP filter: sum of mu^2 {floats[0]:.6g} {relation} {self.target.mu**2:.6g}"
            case "renyi_filter":
                if admitted:
                    return "Rényi filter: some order within its budget (state shown as epsilon at delta/k)"
                return "Rényi filter: every order over its budget (state shown as epsilon at delta/k)"
        return self.kind

    def shortcut_epsilon(self, sums: Sequence[int | None]) -> float:
        """Planned mode: the RDP bound at the best cached order (an upper bound on ε; ∞ without RDP)."""
        floats = [filters.from_exact(s) for s in sums]
        return filters.rdp_grid_epsilon(floats, self.orders, self.target.delta)[0]

    def alone_epsilon(self, quantity: Sequence[int | None]) -> float | None:
        """The ε of one release alone at the budget's δ from its quantity (None: needs the accountant)."""
        if self.kind in ("zcdp_filter", "gdp_filter", "renyi_filter"):
            if self.kind == "renyi_filter":
                floats = [filters.from_exact(s) for s in quantity]
                return filters.rdp_grid_epsilon(floats, self.orders, self.target.delta)[0]
            return self.filter_epsilon(quantity)
        value = self.shortcut_epsilon(quantity)
        return value if math.isfinite(value) else None

    def _renyi(self) -> filters.RenyiFilter:
        return filters.RenyiFilter(
            epsilon_budget=self.target.epsilon,
            delta=self.target.delta,
            orders=self.orders,
            order_budgets=tuple(self.data["order_budgets"]),
        )


def _json_float(value: float) -> float | str:
    return "Infinity" if math.isinf(value) else value


def make_rule(*, mode: Mode, target: Target, orders: Sequence[float] | None, tolerance: float) -> dict[str, Any]:
    """The stored rule of a new budget (fixed from then on): a ρ or μ target gets its filter; an (ε, δ) target the
    tightest route (planned) or the Rényi filter with its per-order budgets (adaptive).

    Example:
        >>> target = Target(epsilon=1.0, delta=1e-6)
        >>> make_rule(mode=Mode.ADAPTIVE, target=target, orders=[8, 16], tolerance=1e-3)["kind"]
        'renyi_filter'
    """
    if target.rho is not None:
        return {"kind": "zcdp_filter", "theorem": _THEOREMS["zcdp_filter"]}
    if target.mu is not None:
        return {"kind": "gdp_filter", "theorem": _THEOREMS["gdp_filter"]}
    if mode is Mode.PLANNED:
        return {
            "kind": "planned_tightest",
            "theorem": _THEOREMS["planned_tightest"],
            "orders": list(PLANNED_CACHE_ORDERS if orders is None else orders),
            "tolerance": tolerance,
        }
    built = filters.RenyiFilter.build(
        epsilon=target.epsilon, delta=target.delta, orders=filters.DEFAULT_FILTER_ORDERS if orders is None else orders
    )
    return {
        "kind": "renyi_filter",
        "theorem": _THEOREMS["renyi_filter"],
        "orders": list(built.orders),
        "order_budgets": list(built.order_budgets),
        "order_delta": built.order_delta,
    }


def rule_of(mode: Mode, target: Target, data: dict[str, Any]) -> Rule:
    """The :class:`Rule` of a stored budget; a rule of the other mode (or an unknown one) is refused.

    Example:
        >>> rule_of(Mode.ADAPTIVE, Target(epsilon=1.0, delta=1e-6, rho=0.1), {"kind": "zcdp_filter"}).theorem[:11]
        'zCDP filter'
    """
    kind = data.get("kind")
    if kind not in _THEOREMS:
        raise ValueError(f"unknown ledger rule {kind!r} (written by another dplens?)")
    if kind == "renyi_filter" and mode is not Mode.ADAPTIVE:
        raise ValueError("a Rényi filter rule belongs to an adaptive budget")
    if kind == "planned_tightest" and mode is not Mode.PLANNED:
        raise ValueError("the tightest-route rule is valid only for a planned budget")
    return Rule(kind=kind, mode=mode, target=target, data=data)


encode_sums = _encode
decode_sums = _decode
