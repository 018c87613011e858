"""One accounting summary of a ledger: every route's ε with provenance, and the curves a report shows.

The report layer receives this summary (through :meth:`AccountingSummary.to_dict`, the JSON contract) and renders
it; it computes no privacy quantity itself. Every ε here is an upper bound on the true ε of the ledger (each
route is pessimistic and rounds up); the trade-off samples are a pointwise *lower* bound on the exact trade-off
curve (the pessimistic side).

Routes: RDP (α optimised continuously, Canonne–Kamath–Steinke 2020 Prop. 12), PLD (pessimistic discretisation),
EXACT (a closed-form profile) and PURE (basic composition of pure-DP ε, Dwork, McSherry, Nissim, Smith 2006).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from dplens._numbers import AccountingSection, RouteSection, accounting_section, finite_or_none, json_number
from dplens.accountant import conversions, pld
from dplens.accountant import events as ev
from dplens.accountant.curves import PrivacyProfile, RdpConversion, RdpCurve, TradeOff
from dplens.accountant.rdp import UnsupportedEventError
from dplens.accountant.routes import Method


class LedgerAccounting(Protocol):
    """What a summary reads from a ledger: the interface :class:`dplens.accountant.compose.Accountant` implements.

    The summary layer sits above the composition layer and names it only through this protocol, so
    ``compose`` (which offers :meth:`~dplens.accountant.compose.Accountant.summary` as a shortcut) and ``summary``
    import each other in one direction only.
    """

    @property
    def ledger(self) -> tuple[tuple[ev.Event, int], ...]: ...

    @property
    def neighboring(self) -> ev.NeighboringRelation: ...

    def epsilon_result(self, delta: float, *, method: Method = ...) -> Any: ...

    def epsilon(self, delta: float) -> float: ...

    def pure_epsilon(self) -> float: ...

    def rdp_curve(self) -> RdpCurve: ...

    def pld_profile(self) -> PrivacyProfile: ...

    def exact_profile(self) -> PrivacyProfile: ...

    def trade_off(self) -> TradeOff: ...

    def to_json(self) -> str: ...


__all__ = ["DELTA_GRID", "AccountingSummary", "LedgerAccounting", "RouteEpsilon", "summarise"]

#: δ grid of the ε(δ) table (each ε on it is an upper bound).
DELTA_GRID = tuple(10.0**-k for k in range(12, 0, -1))

_TRADE_OFF_ALPHAS = (0.0, *np.geomspace(1e-6, 1e-2, 40).tolist(), *np.linspace(0.01, 1.0, 100).tolist())


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteEpsilon(RouteSection):
    """ε at δ by one route, an upper bound; ``epsilon_lower`` is a certified lower end where the route has one.

    The fields it shares with the report's route (``method``, ``epsilon``, ``delta``, ``details``, ``is_tightest``,
    ``optimal_order``, ``discretisation``) are :class:`dplens._numbers.RouteSection`'s.
    """

    epsilon_lower: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = self._route_dict(is_upper_bound=True)
        if self.epsilon_lower is not None:
            out["epsilon_lower"] = json_number(self.epsilon_lower)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountingSummary(AccountingSection[RouteEpsilon]):
    """Everything the accountant knows about a ledger at one δ, ready to render.

    The fields up to ``claim_region`` (and ``tightest``, ``epsilon``) are the report's accounting section's
    too (:class:`dplens._numbers.AccountingSection`).

    Args:
        delta: δ of the (ε, δ) statements (0: pure DP only).
        routes: one entry per applicable route, the tightest marked.
        unsupported: routes that do not apply, ``{"method", "reason"}``.
        pure_epsilon: ε of (ε, 0)-DP by basic composition (∞ without a pure-DP guarantee).
        mu: μ when the ledger is exactly μ-GDP (compositions of Gaussians), else None.
        epsilon_at: the tightest ε at further δ values asked for (e.g. a claim's δ), ``{"delta", "epsilon"}``.
        epsilon_of_delta: ``{"method", "delta", "epsilon"}`` rows on :data:`DELTA_GRID` (and ``delta``).
        rdp_curve: ``{"alpha", "rdp", "epsilon"}`` samples: the composed RDP curve and the ε it implies at ``delta``.
        trade_off: ``{"alpha", "beta"}`` samples of the f-DP trade-off curve (a pointwise lower bound).
        trade_off_source: how the trade-off curve was obtained.
        claim_region: ``{"alpha", "beta"}`` samples of the trade-off curve of the (ε, δ) statement under test
            (Dong, Roth, Su 2022 Prop. 2.5), for the figure of the region a claim excludes.
        claim: the (ε, δ) of ``claim_region``.
        neighbouring: the ledger's neighbouring relation (value).
        ledger: the ledger, as :meth:`Accountant.to_json` writes it.
        calibration: a ``CalibrationResult.to_dict()`` when a parameter was calibrated.
        attack_risk: ``AttackRisk.to_dict()`` (:func:`dplens.accountant.risk.attack_risk`) at the report card's FPRs
            with the curve sampled for the figure: upper bounds on any membership attack's TPR and advantage; None
            when no route reads a trade-off curve off the ledger.
    """

    claim: tuple[float, float] | None = None
    neighbouring: str = ev.NeighboringRelation.ADD_OR_REMOVE_ONE.value
    ledger: dict[str, Any] = field(default_factory=dict)
    calibration: dict[str, Any] | None = None
    attack_risk: dict[str, Any] | None = None

    def epsilon_for(self, delta: float) -> float:
        """The tightest upper bound at ``delta`` (the summary's δ, 0 for pure DP, or one asked for)."""
        if delta == self.delta:
            return self.epsilon
        if delta == 0:
            return self.pure_epsilon
        for row in self.epsilon_at:
            if row["delta"] == delta:
                return row["epsilon"]
        raise ValueError(f"delta {delta!r} was not summarised; pass it in extra_deltas")

    def to_dict(self) -> dict[str, Any]:
        """The report's ``accounting`` section (JSON-ready; ±∞ as strings)."""
        return accounting_section(
            self,
            claim=None if self.claim is None else {"epsilon": self.claim[0], "delta": self.claim[1]},
            neighbouring=self.neighbouring,
            ledger=self.ledger,
        )

    def __repr__(self) -> str:
        routes = ", ".join(f"{r.method}={r.epsilon:.6g}" for r in self.routes)
        return (
            f"AccountingSummary(delta={self.delta:g}, epsilon<={self.epsilon:.6g} [{self.tightest.method}]; {routes})"
        )

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{r.method}{' (tightest)' if r.is_tightest else ''}</td><td>{r.epsilon:.6g}</td>"
            f"<td>{r.details}</td></tr>"
            for r in self.routes
        )
        return (
            f"<table><caption>Accounting at δ = {self.delta:g} (every ε an upper bound)</caption>"
            f"<tr><th>route</th><th>ε</th><th>details</th></tr>{rows}</table>"
        )


_WRAPPERS = {"PoissonSampled": "Poisson-sampled", "SelfComposed": "repeated", "Composed": "composition of"}


def _event_words(repr_text: str) -> str:
    """'SelfComposed(event=PoissonSampled(…, event=Gaussian(…)), count=3)' → 'repeated Poisson-sampled Gaussian'."""
    names = re.findall(r"\b([A-Z][A-Za-z0-9]*)\(", repr_text)
    words = [_WRAPPERS.get(name, re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)) for name in names]
    return " ".join(words) or "event"


def plain_reason(err: Exception) -> str:
    """The first line of ``err`` for a reader: each event's Python repr (``Name(field=…, …)``, enum reprs inside)
    replaced by the plain names of the mechanisms it wraps, so a report shows no Python syntax.

    Example:
        >>> plain_reason(UnsupportedEventError(
        ...     "no exact privacy profile is known for event SelfComposed(event=PoissonSampled(sampling_rate=0.1, "
        ...     "event=Gaussian(noise_multiplier=1.0, neighboring=<NeighboringRelation.ADD_OR_REMOVE_ONE: 'add_remove'>"
        ...     ")), count=3)"))
        'no exact privacy profile is known for event "repeated Poisson-sampled Gaussian"'
    """
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    out: list[str] = []
    i = 0
    for match in re.finditer(r"\b[A-Z][A-Za-z0-9]*\(", text):
        if match.start() < i:
            continue
        depth, j = 0, match.end() - 1
        while j < len(text):  # the balanced end of this call-like repr
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            if depth == 0:
                break
            j += 1
        inner = text[match.start() : j + 1]
        if "=" not in inner:  # not a dataclass repr (e.g. prose in parentheses)
            continue
        out.append(text[i : match.start()])
        out.append(f'"{_event_words(inner)}"')
        i = j + 1
    out.append(text[i:])
    return re.sub(r"<[A-Za-z_.]+: '([^']*)'>", r"\1", "".join(out))


def _route_results(accountant: LedgerAccounting, delta: float) -> tuple[list[RouteEpsilon], list[dict[str, str]]]:
    routes: list[RouteEpsilon] = []
    unsupported: list[dict[str, str]] = []
    if delta > 0:
        for method in (Method.RDP, Method.PLD, Method.EXACT):
            try:
                result = accountant.epsilon_result(delta, method=method)
            except UnsupportedEventError as err:
                unsupported.append({"method": method.value, "reason": plain_reason(err)})
                continue
            routes.append(
                RouteEpsilon(
                    method=method.value,
                    epsilon=result.epsilon,
                    delta=delta,
                    details=result.details,
                    optimal_order=finite_or_none(result.optimal_order),
                    discretisation=result.discretisation,
                    epsilon_lower=getattr(result, "epsilon_lower", None),
                )
            )
    pure = accountant.pure_epsilon()
    if math.isfinite(pure) or not routes:
        routes.append(
            RouteEpsilon(
                method="pure",
                epsilon=pure,
                delta=delta,
                details=(
                    "pure DP by basic composition (Dwork, McSherry, Nissim, Smith 2006): the sum of the pure-DP "
                    "epsilons; valid at any delta"
                    if math.isfinite(pure)
                    else "no pure-DP guarantee: some mechanism (e.g. Gaussian) is not pure DP, so epsilon is "
                    "unbounded at delta = 0"
                ),
            )
        )
    else:
        unsupported.append({"method": "pure", "reason": "some mechanism in the ledger has no pure-DP guarantee"})
    best = min(range(len(routes)), key=lambda i: routes[i].epsilon)
    marked = [
        RouteEpsilon(
            method=r.method,
            epsilon=r.epsilon,
            delta=r.delta,
            details=r.details,
            is_tightest=i == best,
            optimal_order=r.optimal_order,
            discretisation=r.discretisation,
            epsilon_lower=r.epsilon_lower,
        )
        for i, r in enumerate(routes)
    ]
    return marked, unsupported


def _epsilon_of_delta(accountant: LedgerAccounting, methods: Sequence[str], delta: float) -> list[dict[str, Any]]:
    grid = sorted(set(DELTA_GRID) | ({delta} if delta > 0 else set()))
    rows: list[dict[str, Any]] = []
    solvers: dict[str, Callable[[float], float]] = {}
    if "rdp" in methods:
        curve = accountant.rdp_curve()
        solvers["rdp"] = lambda d: curve.epsilon(d, conversion=RdpConversion.OPTIMAL)
    if "pld" in methods:
        solvers["pld"] = accountant.pld_profile().epsilon  # one PLD, queried at every δ
    if "exact" in methods:
        solvers["exact"] = accountant.exact_profile().epsilon
    if "pure" in methods:
        pure = accountant.pure_epsilon()
        solvers["pure"] = lambda _d: pure
    for method, solve in solvers.items():
        for d in grid:
            rows.append({"method": method, "delta": d, "epsilon": float(solve(d))})
    return rows


def _rdp_samples(accountant: LedgerAccounting, routes: Sequence[RouteEpsilon], delta: float) -> list[dict[str, float]]:
    rdp_route = next((r for r in routes if r.method == "rdp"), None)
    if rdp_route is None:
        return []
    curve = accountant.rdp_curve()
    centre = rdp_route.optimal_order if rdp_route.optimal_order is not None else 8.0
    top = max(centre * 8.0, 64.0)
    if math.isfinite(curve.alpha_max):
        top = min(top, curve.alpha_max * (1 - 1e-9))
    alphas = 1.0 + np.geomspace(1e-2, top - 1.0, 80)
    if rdp_route.optimal_order is not None:
        alphas = np.append(alphas, rdp_route.optimal_order)
    if curve.integer_only:
        alphas = np.arange(2, max(int(top), 3) + 1, dtype=float)
        if alphas.size > 200:
            alphas = np.unique(np.round(np.geomspace(2, alphas[-1], 200)))
    alphas = np.unique(alphas)
    values = np.asarray(curve(alphas), dtype=float)
    implied = np.asarray(conversions.rdp_to_epsilon_optimal(values, alphas, delta), dtype=float)
    return [
        {"alpha": float(a), "rdp": float(v), "epsilon": float(e)}
        for a, v, e in zip(alphas, values, implied, strict=True)
    ]


def _trade_off_samples(accountant: LedgerAccounting) -> tuple[list[dict[str, float]], str]:
    alphas = np.unique(np.asarray(_TRADE_OFF_ALPHAS))
    try:
        curve = accountant.trade_off()
        source = curve.description + " (DRS 2022 Prop. 2.12 on an epsilon grid: a pointwise lower bound)"
        betas = np.asarray(curve(alphas), dtype=float)
    except UnsupportedEventError:
        try:
            rdp_curve = accountant.rdp_curve()
        except UnsupportedEventError:
            return [], "no trade-off curve: no route supports the whole ledger"
        epsilons = np.concatenate([[0.0], np.geomspace(1e-3, 50.0, 150)])
        deltas = np.array([rdp_curve.delta(float(e)) for e in epsilons])
        betas = conversions.profile_to_trade_off(lambda _e: deltas, alphas, epsilons=epsilons)
        source = "from the RDP curve's delta(epsilon) on 151 epsilons (DRS 2022 Prop. 2.12): a pointwise lower bound"
    betas = np.clip(betas, 0.0, 1.0)
    return [{"alpha": float(a), "beta": float(b)} for a, b in zip(alphas, betas, strict=True)], source


def _claim_region(epsilon: float, delta: float) -> list[dict[str, float]]:
    """Samples of f_{ε,δ}(α) = max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)) (DRS 2022 Prop. 2.5)."""
    if not math.isfinite(epsilon):
        return []
    alphas = np.concatenate([[0.0], np.geomspace(1e-7, 1.0, 400)])
    betas = np.asarray(conversions.dp_trade_off(epsilon, delta, alphas), dtype=float)
    return [{"alpha": float(a), "beta": float(b)} for a, b in zip(alphas, betas, strict=True)]


def _attack_risk(accountant: LedgerAccounting) -> dict[str, Any] | None:
    """The attack risk at the report card's FPRs with the curve for the figure (upper bounds), or None."""
    from dplens.accountant.risk import DEFAULT_FPRS, attack_risk

    if not accountant.ledger:
        return None
    try:
        return attack_risk(accountant, fprs=DEFAULT_FPRS, curve=True).to_dict()
    except UnsupportedEventError:
        return None


def composed_mu(accountant: LedgerAccounting) -> float | None:
    """μ of the ledger when it is exactly μ-GDP (a composition of Gaussians), else None."""
    if not accountant.ledger:
        return None
    parts = tuple(e if c == 1 else ev.SelfComposed(event=e, count=c) for e, c in accountant.ledger)
    return pld.gaussian_mu(parts[0] if len(parts) == 1 else ev.Composed(events=parts))


def summarise(
    accountant: LedgerAccounting,
    delta: float,
    *,
    claim: tuple[float, float] | None = None,
    extra_deltas: Sequence[float] = (),
    calibration: Mapping[str, Any] | None = None,
) -> AccountingSummary:
    """Every route at ``delta`` (the tightest marked), the ε(δ) table, the RDP and trade-off curves.

    Args:
        accountant: the ledger.
        delta: δ of the statements (0 leaves only the pure-DP route).
        claim: the (ε, δ) under test, for the claim-region samples (default: the tightest ε at ``delta``).
        extra_deltas: further δ values whose tightest ε the caller needs (e.g. a claim's δ).
        calibration: a ``CalibrationResult.to_dict()`` to carry along.
    """
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1); got {delta!r}")
    delta = float(delta)
    routes, unsupported = _route_results(accountant, delta)
    best = min(r.epsilon for r in routes)
    epsilon_at = []
    for extra in dict.fromkeys(float(d) for d in extra_deltas):
        if extra in (delta, 0.0):
            continue
        epsilon_at.append({"delta": extra, "epsilon": accountant.epsilon(conversions.check_delta(extra))})
    trade_off, trade_off_source = _trade_off_samples(accountant)
    region_claim = claim if claim is not None else ((best, delta) if math.isfinite(best) else None)
    return AccountingSummary(
        delta=delta,
        routes=tuple(routes),
        unsupported=tuple(unsupported),
        pure_epsilon=accountant.pure_epsilon(),
        mu=composed_mu(accountant),
        epsilon_at=tuple(epsilon_at),
        epsilon_of_delta=tuple(_epsilon_of_delta(accountant, [r.method for r in routes], delta)),
        rdp_curve=tuple(_rdp_samples(accountant, routes, delta)) if delta > 0 else (),
        trade_off=tuple(trade_off),
        trade_off_source=trade_off_source,
        claim_region=tuple(_claim_region(*region_claim)) if region_claim is not None else (),
        claim=None if region_claim is None else (float(region_claim[0]), float(region_claim[1])),
        neighbouring=accountant.neighboring.value,
        ledger=json.loads(accountant.to_json()),
        calibration=dict(calibration) if calibration is not None else None,
        attack_risk=_attack_risk(accountant),
    )
