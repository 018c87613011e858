"""The composition rule of each budget: which theorem decides whether a release fits, and what is cached.

One class per rule behind one interface (:class:`Rule`), the way dp_accounting has one accountant per formalism: the
ledger (:mod:`dplens.ledger.core`) asks a budget's rule for a release's quantity, a decision, the spent ε of a
period, its history and its check, and never asks which rule it holds. The ledger does no privacy maths of its own:
every number comes from the accountant (``Accountant.epsilon_result`` for planned budgets,
:mod:`dplens.accountant.filters` for the filters). A rule is fixed when its budget is created and stored with it
(its ``kind`` string, the filter's orders and per-order budgets included), so a later dplens never re-derives it.

What each rule keeps per release (``quantity``) and per period (``sums``, the exact sum of the quantities):

- ``planned_tightest`` (:class:`PlannedTightest`; planned, (ε, δ)): RDP at fixed orders, only as a *sound shortcut*:
  the RDP bound at the best of those orders is a valid upper bound on ε, so when it already fits the budget the
  release is accepted without running the tightest route; otherwise the tightest route of the whole period
  (``Accountant.epsilon_result``, BEST of PLD / RDP / exact over the stored events) decides, so a release is refused
  only on the tightest route.
- ``renyi_filter`` (:class:`RenyiFilterRule`; adaptive, (ε, δ)): RDP at the filter's orders
  (:class:`~dplens.accountant.filters.RenyiFilter`).
- ``zcdp_filter`` (:class:`ZcdpFilterRule`; ρ budgets, either mode): ρ (:class:`~dplens.accountant.filters.ZcdpFilter`).
- ``gdp_filter`` (:class:`GdpFilterRule`; μ budgets, either mode, Gaussian releases only): μ²
  (:class:`~dplens.accountant.filters.GdpFilter`).

The sums are exact integers (:func:`dplens.accountant.filters.exact`), written in the same transaction as the
release, so they always equal the sum recomputed from the stored releases (``Ledger.verify`` checks it).

A planned rule reads the events of its period through a :class:`~dplens.ledger.tightest.PeriodRoute` (the tightest
route, its cache and the release's lower bound); a filter needs only the sums.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from dplens.accountant import events as ev
from dplens.accountant import filters
from dplens.ledger.model import Budget, Mode, Target

if TYPE_CHECKING:
    from dplens.ledger.storage import PeriodState
    from dplens.ledger.tightest import PeriodRoute

__all__ = [
    "FAST_PATH_MARGIN",
    "PLANNED_CACHE_ORDERS",
    "Decision",
    "GdpFilterRule",
    "PlannedTightest",
    "RenyiFilterRule",
    "Rule",
    "Spent",
    "ZcdpFilterRule",
    "budget_rule",
    "make_rule",
    "rule_of",
]

#: Orders of the planned mode's cached RDP sums (the shortcut; any order gives a valid bound).
PLANNED_CACHE_ORDERS: tuple[float, ...] = (*filters.DEFAULT_FILTER_ORDERS, 128.0, 256.0)
#: The shortcut accepts only below target × (1 − this), so the tightest route recomputed later from the stored events
#: (which may differ from the cached bound in the last bits) can never exceed the target.
FAST_PATH_MARGIN = 1e-9

Sums = list[int | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Spent:
    """A period's spent ε by its rule (an upper bound), the certified lower end where the route has one, how it was
    found, and a tightest-route result worth caching ((digest, result) or None)."""

    epsilon: float
    lower: float | None
    method: str
    cache: tuple[str, dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """A rule's decision on one release in one period (before and after are upper bounds; ``remaining`` a lower
    bound); ``cache``: the tightest-route result of the period with the release, stored with it if accepted."""

    accepted: bool
    spent_epsilon: float
    spent_epsilon_before: float
    spent_method: str
    remaining_epsilon: float
    filter: dict[str, Any] | None = None
    cache: tuple[str, dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    """A budget's rule, rebuilt from its stored dict (:func:`rule_of`): the per-release quantity it adds, its exact
    decision on a period's sums, and the readout as ε.

    The interface the ledger uses (each subclass, one per stored ``kind``, fills it in): :meth:`quantity`,
    :meth:`zero`, :meth:`add` (the exact sums kept per period), :meth:`alone_epsilon`, :meth:`precompute` (before the
    writer lock) and :meth:`decide` (under it), :meth:`spent` and :meth:`filter_state` (status), :meth:`history`
    (the report's figure), :meth:`over_budget` (verification) and :meth:`spent_risk` (status as attack risk). The
    base class is the filter's behaviour; the planned rule overrides what needs the period's events.

    Example:
        >>> import dplens
        >>> target = Target(epsilon=1.0, delta=1e-6, mu=0.5)
        >>> stored = make_rule(mode=Mode.ADAPTIVE, target=target, orders=None, tolerance=1e-3)
        >>> rule = rule_of(Mode.ADAPTIVE, target, stored)
        >>> q = rule.quantity([(dplens.Gaussian(noise_multiplier=4.0), 1)])  # μ² = 1/16
        >>> rule.kind, rule.filter_admits(q), rule.filter_admits(rule.add(q, rule.add(q, rule.add(q, q))))
        ('gdp_filter', True, False)
    """

    mode: Mode
    target: Target
    data: dict[str, Any]

    #: The rule's name as stored in the budget's ``rule`` dict (never changes: stored ledgers are read by it).
    kind: ClassVar[str] = ""
    theorem: ClassVar[str] = ""
    #: The mode a rule is restricted to (None: either).
    only_mode: ClassVar[Mode | None] = None

    @property
    def orders(self) -> tuple[float, ...]:
        return tuple(self.data.get("orders", ()))

    # ---- per-release quantity -------------------------------------------------------------

    def quantity(self, entries: Sequence[tuple[ev.Event, int]]) -> Sums:
        """The release's additive quantity as exact integers (None: ∞); ValueError when the rule cannot take it."""
        from dplens.accountant.rdp import UnsupportedEventError

        try:
            values = self._quantity(entries)
        except UnsupportedEventError as err:
            raise ValueError(f"the budget's {self.kind.replace('_', ' ')} cannot take this release: {err}") from None
        return [filters.exact(v) for v in values]

    def _quantity(self, entries: Sequence[tuple[ev.Event, int]]) -> list[float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def zero(self) -> Sums:
        return [0] * len(self.orders)

    @staticmethod
    def add(sums: Sequence[int | None], quantity: Sequence[int | None]) -> Sums:
        return [None if a is None or b is None else a + b for a, b in zip(sums, quantity, strict=True)]

    def alone_epsilon(self, quantity: Sequence[int | None]) -> float | None:
        """The ε of one release alone at the budget's δ from its quantity (None: needs the accountant)."""
        return self.filter_epsilon(quantity)

    # ---- the ledger's questions -----------------------------------------------------------

    def filter_admits(self, sums: Sequence[int | None]) -> bool:
        """The filter's exact decision on the period's sums."""
        raise ValueError(f"rule {self.kind!r} is not a filter")

    def filter_epsilon(self, sums: Sequence[int | None]) -> float:
        """The filter state as ε at the budget's δ (an upper bound for the admitted releases)."""
        raise ValueError(f"rule {self.kind!r} is not a filter")

    def filter_state(self, sums: Sequence[int | None]) -> dict[str, Any] | None:
        """The filter's quantities for status: used and budget per order (or ρ, or μ²); None for no filter."""
        return None

    def describe_decision(self, sums: Sequence[int | None], admitted: bool) -> str:
        """The filter's decision in words: the quantity it compares and the budget."""
        return self.kind

    def spent(self, state: PeriodState, route: PeriodRoute) -> Spent:
        """The spent ε of a period with releases (an upper bound)."""
        return Spent(
            epsilon=self.filter_epsilon(state.sums), lower=None, method=f"{self.kind} (filter state as epsilon)"
        )

    def decide(
        self, state: PeriodState | None, quantity: Sums, entries: Sequence[tuple[ev.Event, int]], route: PeriodRoute
    ) -> Decision:
        """Whether the release (``quantity``, ``entries``) fits the period (``state``: None before its first)."""
        sums = self.zero() if state is None else state.sums
        after = self.add(sums, quantity)
        accepted = self.filter_admits(after)
        spent_after = self.filter_epsilon(after)
        spent_before = self.filter_epsilon(sums)
        return Decision(
            accepted=accepted,
            spent_epsilon=spent_after,
            spent_epsilon_before=spent_before,
            spent_method=self.describe_decision(after, accepted),
            remaining_epsilon=max(self.target.epsilon - (spent_after if accepted else spent_before), 0.0),
            filter=self.filter_state(after if accepted else sums),
        )

    def precompute(
        self, state: PeriodState | None, quantity: Sums, entries: Sequence[tuple[ev.Event, int]], route: PeriodRoute
    ) -> tuple[str, Any] | None:
        """Work worth doing before the writer lock ((digest, result) of the tightest route), or None."""
        return None

    def history(self, rows: Iterable[tuple[str, Sums]], marks: set[int], route: PeriodRoute) -> list[float]:
        """The spent ε after the releases numbered in ``marks`` (from 1) of a period's releases ((events JSON,
        quantity) in charge order)."""
        out = []
        sums = self.zero()
        for index, (_, quantity) in enumerate(rows, start=1):
            sums = self.add(sums, quantity)
            if index in marks:
                out.append(self.filter_epsilon(sums))
        return out

    def over_budget(self, sums: Sums, route: PeriodRoute) -> str | None:
        """Verification: what is wrong with a period's spend recomputed from its releases, or None."""
        return None if self.filter_admits(sums) else "filter quantity exceeds the budget"

    def spent_risk(self, ledger: Any, budget: str, period: Any, fprs: Sequence[float]) -> tuple[Any, str]:
        """The attack risk of a period's spend (upper bounds) and where it comes from."""
        from dplens.accountant.risk import budget_risk

        spent = budget_risk(period.spent_epsilon, self.target.delta, fprs=fprs)
        return spent, f"the (epsilon, delta) the privacy filter certifies ({period.spent_method})"


@dataclass(frozen=True, slots=True)
class PlannedTightest(Rule):
    """Planned (ε, δ) budgets: the tightest valid route of the whole period decides, RDP at cached orders is only a
    shortcut that accepts what certainly fits."""

    kind: ClassVar[str] = "planned_tightest"
    theorem: ClassVar[str] = (
        "the tightest valid route of the whole composition (BEST of PLD / RDP / exact); valid "
        "only for releases whose parameters were fixed in advance"
    )
    only_mode: ClassVar[Mode | None] = Mode.PLANNED

    def quantity(self, entries: Sequence[tuple[ev.Event, int]]) -> Sums:
        from dplens.accountant.rdp import UnsupportedEventError

        try:
            values = filters.rdp_at_orders(entries, self.orders)
        except UnsupportedEventError:
            return [None] * len(self.orders)  # no RDP curve: no shortcut, the tightest route decides
        return [filters.exact(v) for v in values]

    def shortcut_epsilon(self, sums: Sequence[int | None]) -> float:
        """The RDP bound at the best cached order (an upper bound on ε; ∞ without RDP)."""
        floats = [filters.from_exact(s) for s in sums]
        return filters.rdp_grid_epsilon(floats, self.orders, self.target.delta)[0]

    def alone_epsilon(self, quantity: Sequence[int | None]) -> float | None:
        value = self.shortcut_epsilon(quantity)
        return value if math.isfinite(value) else None

    def _fits_cheaply(self, after: Sums) -> bool:
        return self.shortcut_epsilon(after) <= self.target.epsilon * (1 - FAST_PATH_MARGIN)

    def spent(self, state: PeriodState, route: PeriodRoute) -> Spent:
        digest = route.digest()
        cached = state.cached_result(digest)
        if cached is not None:
            return Spent(
                epsilon=float(cached["epsilon"]),
                lower=cached.get("epsilon_lower"),
                method=f"tightest route: {cached['method']}",
            )
        result = route.result()
        return Spent(
            epsilon=result.epsilon,
            lower=result.epsilon_lower,
            method=f"tightest route: {result.method.value}",
            cache=(digest, result.to_dict()),
        )

    def decide(
        self, state: PeriodState | None, quantity: Sums, entries: Sequence[tuple[ev.Event, int]], route: PeriodRoute
    ) -> Decision:
        sums = self.zero() if state is None else state.sums
        after = self.add(sums, quantity)
        target = self.target.epsilon
        shortcut = self.shortcut_epsilon(after)
        if shortcut <= target * (1 - FAST_PATH_MARGIN):
            return Decision(
                accepted=True,
                spent_epsilon=shortcut,
                spent_epsilon_before=self.shortcut_epsilon(sums) if state is not None and state.releases else 0.0,
                spent_method="rdp at cached orders (a valid upper bound; it already fits, so the tightest route was "
                "not needed)",
                remaining_epsilon=max(target - shortcut, 0.0),
            )
        before = self._before_cheaply(state, route)
        lower = route.release_lower_bound(entries)
        if lower > target:
            # The true ε of a composition is at least that of any part of it (its output is a function of the
            # composition's), so every valid upper bound — the tightest route's too — exceeds the budget: refuse
            # without running it.
            return Decision(
                accepted=False,
                spent_epsilon=lower,
                spent_epsilon_before=before,
                spent_method="a certified lower bound (the release alone, exact route): every route would refuse",
                remaining_epsilon=max(target - before, 0.0),
            )
        digest, result = route.with_release()
        accepted = result.epsilon <= target
        return Decision(
            accepted=accepted,
            spent_epsilon=result.epsilon,
            spent_epsilon_before=before,
            spent_method=f"tightest route: {result.method.value}",
            remaining_epsilon=max(target - (result.epsilon if accepted else before), 0.0),
            cache=(digest, result.to_dict()) if accepted else None,
        )

    def _before_cheaply(self, state: PeriodState | None, route: PeriodRoute) -> float:
        """The period's spent ε before this charge without running the tightest route: the cached tightest result
        when it covers exactly the stored events, else the cached RDP bound (an upper bound either way)."""
        if state is None or state.releases == 0:
            return 0.0
        if state.cache:
            cached = state.cached_result(route.digest())
            if cached is not None:
                return float(cached["epsilon"])
        return self.shortcut_epsilon(state.sums)

    def precompute(
        self, state: PeriodState | None, quantity: Sums, entries: Sequence[tuple[ev.Event, int]], route: PeriodRoute
    ) -> tuple[str, Any] | None:
        sums = self.zero() if state is None else state.sums
        if self._fits_cheaply(self.add(sums, quantity)):
            return None  # the cheap bound will accept it
        if route.release_lower_bound(entries) > self.target.epsilon:
            return None  # refused by its lower bound, no route needed
        return route.with_release()

    def history(self, rows: Iterable[tuple[str, Sums]], marks: set[int], route: PeriodRoute) -> list[float]:
        from dplens.ledger import tightest

        out = []
        merged: dict[str, list] = {}
        for index, (text, _) in enumerate(rows, start=1):
            tightest.merge_into(merged, tightest.decode(text))
            if index in marks:
                out.append(route.epsilon_of([(e, c) for e, c in merged.values()]))
        return out

    def over_budget(self, sums: Sums, route: PeriodRoute) -> str | None:
        spent = route.epsilon_of(route.entries())
        return f"spent {spent!r} > budget {self.target.epsilon!r}" if spent > self.target.epsilon else None

    def spent_risk(self, ledger: Any, budget: str, period: Any, fprs: Sequence[float]) -> tuple[Any, str]:
        from dplens.accountant.risk import attack_risk

        spent = attack_risk(ledger.accountant(budget, period.period), fprs=fprs)
        return spent, "the composition of the period's releases (tightest route)"


@dataclass(frozen=True, slots=True)
class RenyiFilterRule(Rule):
    """Adaptive (ε, δ) budgets: RDP summed at orders fixed at creation, each order with its own budget."""

    kind: ClassVar[str] = "renyi_filter"
    theorem: ClassVar[str] = (
        "Rényi filter on orders fixed at creation (Feldman & Zrnic 2021, Thm 3.1) with a union bound "
        "over the orders (Lécuyer 2021): valid under full adaptivity"
    )
    only_mode: ClassVar[Mode | None] = Mode.ADAPTIVE

    def _quantity(self, entries: Sequence[tuple[ev.Event, int]]) -> list[float]:
        return filters.rdp_at_orders(entries, self.orders)

    def _renyi(self) -> filters.RenyiFilter:
        return filters.RenyiFilter(
            epsilon_budget=self.target.epsilon,
            delta=self.target.delta,
            orders=self.orders,
            order_budgets=tuple(self.data["order_budgets"]),
        )

    def filter_admits(self, sums: Sequence[int | None]) -> bool:
        return self._renyi().admits_exact(sums)

    def filter_epsilon(self, sums: Sequence[int | None]) -> float:
        return self._renyi().epsilon([filters.from_exact(s) for s in sums])

    def filter_state(self, sums: Sequence[int | None]) -> dict[str, Any]:
        return {
            "quantity": "RDP at fixed orders (sum / budget per order)",
            "orders": list(self.orders),
            "used": [_json_float(filters.from_exact(s)) for s in sums],
            "budget": list(self.data["order_budgets"]),
            "order_delta": self._renyi().order_delta,
        }

    def describe_decision(self, sums: Sequence[int | None], admitted: bool) -> str:
        if admitted:
            return "Rényi filter: some order within its budget (state shown as epsilon at delta/k)"
        return "Rényi filter: every order over its budget (state shown as epsilon at delta/k)"

    def alone_epsilon(self, quantity: Sequence[int | None]) -> float | None:
        floats = [filters.from_exact(s) for s in quantity]
        return filters.rdp_grid_epsilon(floats, self.orders, self.target.delta)[0]


@dataclass(frozen=True, slots=True)
class _SumFilterRule(Rule):
    """A filter on one summed quantity (ρ, or μ²) against its budget."""

    #: The filter of :mod:`dplens.accountant.filters`, the quantity's name, the filter's name in words.
    _filter: ClassVar[Any] = None
    _quantity_name: ClassVar[str] = ""
    _filter_name: ClassVar[str] = ""

    def _budget(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _new_filter(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _quantity(self, entries: Sequence[tuple[ev.Event, int]]) -> list[float]:
        return [self._new_filter().quantity(entries)]

    def zero(self) -> Sums:
        return [0]

    def filter_admits(self, sums: Sequence[int | None]) -> bool:
        return sums[0] is not None and sums[0] <= filters.exact(self._budget())

    def filter_epsilon(self, sums: Sequence[int | None]) -> float:
        return self._filter.epsilon(filters.from_exact(sums[0]), self.target.delta)

    def filter_state(self, sums: Sequence[int | None]) -> dict[str, Any]:
        used = _json_float(filters.from_exact(sums[0]))
        return {"quantity": self._quantity_name, "used": used, "budget": self._budget()}

    def describe_decision(self, sums: Sequence[int | None], admitted: bool) -> str:
        relation = "<=" if admitted else ">"
        used = filters.from_exact(sums[0])
        return f"{self._filter_name}: sum of {self._quantity_name} {used:.6g} {relation} {self._budget():.6g}"


@dataclass(frozen=True, slots=True)
class ZcdpFilterRule(_SumFilterRule):
    """ρ budgets (either mode): the sum of the releases' ρ against the target ρ."""

    kind: ClassVar[str] = "zcdp_filter"
    theorem: ClassVar[str] = (
        "zCDP filter: sum of rho <= budget (Feldman & Zrnic 2021, Thm 3.1 at every order): valid under full adaptivity"
    )
    _filter: ClassVar[Any] = filters.ZcdpFilter
    _quantity_name: ClassVar[str] = "rho"
    _filter_name: ClassVar[str] = "zCDP filter"

    def _budget(self) -> float:
        return self.target.rho

    def _new_filter(self) -> filters.ZcdpFilter:
        return filters.ZcdpFilter(rho=self.target.rho)


@dataclass(frozen=True, slots=True)
class GdpFilterRule(_SumFilterRule):
    """μ budgets (either mode, Gaussian releases only): the sum of the releases' μ² against the target μ²."""

    kind: ClassVar[str] = "gdp_filter"
    theorem: ClassVar[str] = (
        "GDP filter: sum of mu^2 <= budget^2 (Smith & Thakurta 2022): valid under full adaptivity, "
        "Gaussian releases only"
    )
    _filter: ClassVar[Any] = filters.GdpFilter
    _quantity_name: ClassVar[str] = "mu^2"
    _filter_name: ClassVar[str] = "GDP filter"

    def _budget(self) -> float:
        return self.target.mu**2

    def _new_filter(self) -> filters.GdpFilter:
        return filters.GdpFilter(mu=self.target.mu)


#: Every rule by its stored ``kind`` (the factory of :func:`rule_of`).
RULES: dict[str, type[Rule]] = {
    cls.kind: cls for cls in (PlannedTightest, RenyiFilterRule, ZcdpFilterRule, GdpFilterRule)
}


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
        return {"kind": ZcdpFilterRule.kind, "theorem": ZcdpFilterRule.theorem}
    if target.mu is not None:
        return {"kind": GdpFilterRule.kind, "theorem": GdpFilterRule.theorem}
    if mode is Mode.PLANNED:
        return {
            "kind": PlannedTightest.kind,
            "theorem": PlannedTightest.theorem,
            "orders": list(PLANNED_CACHE_ORDERS if orders is None else orders),
            "tolerance": tolerance,
        }
    built = filters.RenyiFilter.build(
        epsilon=target.epsilon, delta=target.delta, orders=filters.DEFAULT_FILTER_ORDERS if orders is None else orders
    )
    return {
        "kind": RenyiFilterRule.kind,
        "theorem": RenyiFilterRule.theorem,
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
    if kind not in RULES:
        raise ValueError(f"unknown ledger rule {kind!r} (written by another dplens?)")
    cls = RULES[kind]
    if cls.only_mode is Mode.ADAPTIVE and mode is not Mode.ADAPTIVE:
        raise ValueError("a Rényi filter rule belongs to an adaptive budget")
    if cls.only_mode is Mode.PLANNED and mode is not Mode.PLANNED:
        raise ValueError("the tightest-route rule is valid only for a planned budget")
    return cls(mode, target, data)


def budget_rule(budget: Budget) -> Rule:
    """The :class:`Rule` of a stored budget (:func:`rule_of` of its mode, target and stored rule)."""
    return rule_of(budget.mode, budget.target, budget.rule)
