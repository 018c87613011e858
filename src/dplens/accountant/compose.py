"""The Accountant: a ledger of (event, count) entries, composed heterogeneously, with every route.

Routes (:class:`Method`):

- ``RDP``: add the RDP curves of all entries, convert with the optimal conversion, α continuous.
- ``PLD``: the PLD of the whole composition from dplens's engine, with a certified bracket (``epsilon_lower``,
  refined until within ``tolerance``), or dp-accounting's pessimistic PLD for events the engine does not model.
- ``EXACT``: a closed-form privacy profile of the whole composition (compositions of Gaussians → GDP;
  a single event with an exact profile registered in :func:`dplens.accountant.pld.privacy_profile`).
- ``BEST``: the smallest ε among the routes that support the ledger; every route is an upper bound, so
  their minimum is too.

The ledger is validated before it changes: :meth:`Accountant.compose` refuses an event that no route
supports, or whose neighbouring relation differs from the ledger's, and leaves the state untouched.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from dplens.accountant import conversions, pld, rdp
from dplens.accountant import events as ev
from dplens.accountant.curves import PrivacyProfile, RdpConversion, RdpCurve, TradeOff
from dplens.accountant.rdp import UnsupportedEventError
from dplens.accountant.routes import Method, as_method

__all__ = ["Accountant", "EpsilonResult", "Method"]

LEDGER_FORMAT_VERSION = 1


def _route_dict(result: Any, **leading: Any) -> dict[str, Any]:
    """The JSON of one route's ε: ``leading`` (the ε fields) first, then δ, method, details, ``is_estimate``, and the
    optimal order and the discretisation where known (:class:`EpsilonResult` and the plug-ins' per-route results)."""
    out: dict[str, Any] = {
        **leading,
        "delta": result.delta,
        "method": result.method.value,
        "details": result.details,
        "is_estimate": result.is_estimate,
    }
    if result.optimal_order is not None and math.isfinite(result.optimal_order):
        out["optimal_order"] = result.optimal_order
    if result.discretisation is not None:
        out["discretisation"] = result.discretisation
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class EpsilonResult:
    """One accounting answer: (ε, δ), the route that produced it and how.

    ``epsilon`` is an upper bound on the true ε of the ledger at ``delta`` (``is_estimate`` is False
    for every route here; it exists so reports can carry estimates from other sources labelled).
    ``epsilon_lower``, where known, is a certified *lower* bound on that true ε (the PLD engine's optimistic end):
    the true ε lies in [epsilon_lower, epsilon].

    Example:
        >>> from dplens import Accountant, Gaussian
        >>> Accountant().compose(Gaussian(noise_multiplier=1.0)).epsilon_result(1e-5)
        EpsilonResult(epsilon=4.37718 [upper bound], delta=1e-05, method=exact)
    """

    epsilon: float
    delta: float
    method: Method
    details: str
    optimal_order: float | None = None
    discretisation: str | None = None
    is_estimate: bool = False
    routes: tuple[EpsilonResult, ...] = field(default=())
    epsilon_lower: float | None = None
    bracket_note: str | None = None  # a bracket wider than 0.5 %: its width and the reason (issue 47)
    #: BEST only: the routes that refused the whole ledger, as (route, its reason in its own words).
    refusals: tuple[tuple[Method, str], ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        out = _route_dict(self, epsilon=self.epsilon)
        if self.epsilon_lower is not None:
            out["epsilon_lower"] = self.epsilon_lower
        if self.bracket_note is not None:
            out["bracket_note"] = self.bracket_note
        if self.routes:
            out["routes"] = [r.to_dict() for r in self.routes]
        return out

    def __repr__(self) -> str:
        kind = "estimate" if self.is_estimate else "upper bound"
        order = (
            f", alpha={self.optimal_order:.4g}"
            if self.optimal_order is not None and math.isfinite(self.optimal_order)
            else ""
        )
        head = f"EpsilonResult(epsilon={self.epsilon:.6g} [{kind}], delta={self.delta:g}"
        return f"{head}, method={self.method.value}{order})"

    def _repr_html_(self) -> str:
        from dplens._display import html_table

        rows = [("ε", self.epsilon), ("δ", self.delta), ("route", self.method.value), ("details", self.details)]
        rows += [(f"ε by {r.method.value}", r.epsilon) for r in self.routes]
        kind = "an estimate" if self.is_estimate else "an upper bound"
        return html_table(f"ε at δ = {self.delta:g} ({kind})", rows)


def _entry_relation(event: ev.Event) -> ev.NeighboringRelation | None:
    relation = getattr(event, "neighboring", None)
    if relation is not None:
        return relation
    if isinstance(event, ev.SelfComposed):
        return _entry_relation(event.event)
    if isinstance(event, ev.Composed):
        relations = {_entry_relation(e) for e in event.events} - {None}
        if len(relations) > 1:
            raise ValueError(f"events mixes neighbouring relations {sorted(r.value for r in relations)}")
        return relations.pop() if relations else None
    return None


def _pure_epsilon(event: ev.Event) -> float:
    match event:
        case ev.NoOp():
            return 0.0
        case ev.Laplace():
            return 1.0 / event.noise_multiplier
        case ev.RandomizedResponse():
            return float(rdp.rdp_curve(event)(math.inf))  # the max-divergence under its relation
        case ev.SelfComposed():
            return event.count * _pure_epsilon(event.event) if event.count else 0.0
        case ev.Composed():
            return sum(_pure_epsilon(e) for e in event.events)
    # Research events with a pure-DP guarantee declare it (e.g. CorrDpLaplace).
    declared = getattr(event, "pure_dp_epsilon", None)
    return float(declared()) if callable(declared) else math.inf


class Accountant:
    """A privacy ledger composed across heterogeneous mechanisms.

    Example:
        >>> from dplens import Gaussian, PoissonSampled
        >>> acc = Accountant().compose(PoissonSampled(sampling_rate=0.01, event=Gaussian(noise_multiplier=1.0)), 1000)
        >>> round(acc.epsilon(1e-5, method=Method.RDP), 4)
        2.1013
        >>> result = acc.epsilon_result(1e-5, method=Method.PLD)  # a certified bracket around the exact ε
        >>> result.epsilon_lower <= 1.82824 <= result.epsilon
        True
        >>> Accountant.from_json(acc.to_json()).ledger == acc.ledger  # checkpoint and resume a budget
        True

    Args:
        neighboring: the neighbouring relation of the whole ledger; None takes the first event's.
        value_discretization_interval: a fixed PLD grid interval; None (default) lets the PLD engine refine its
            grid until its bracket is within ``tolerance``.
        tolerance: the PLD route's relative bracket width, (ε − ε_lower) ≤ tolerance·ε.
    """

    def __init__(
        self,
        *,
        neighboring: ev.NeighboringRelation | None = None,
        value_discretization_interval: float | None = None,
        tolerance: float = pld.DEFAULT_TOLERANCE,
    ) -> None:
        if neighboring is not None and not isinstance(neighboring, ev.NeighboringRelation):
            raise ValueError(f"neighboring must be a NeighboringRelation; got {neighboring!r}")
        self._neighboring = neighboring
        self._interval = pld._check_interval(value_discretization_interval)
        self._tolerance = pld.check_tolerance(tolerance)
        self._ledger: list[tuple[ev.Event, int]] = []

    # ---- ledger ---------------------------------------------------------------------------

    @property
    def neighboring(self) -> ev.NeighboringRelation:
        return self._neighboring or ev.NeighboringRelation.ADD_OR_REMOVE_ONE

    @property
    def ledger(self) -> tuple[tuple[ev.Event, int], ...]:
        return tuple(self._ledger)

    @property
    def value_discretization_interval(self) -> float | None:
        """The fixed PLD grid interval, or None when the engine chooses it (see ``tolerance``)."""
        return self._interval

    @property
    def tolerance(self) -> float:
        """The PLD route's relative bracket width."""
        return self._tolerance

    def supported_methods(self, event: ev.Event) -> list[Method]:
        """The routes that can interpret ``event`` (dry run: no state changes)."""
        methods = []
        try:
            rdp.rdp_curve(event)
            methods.append(Method.RDP)
        except UnsupportedEventError:
            pass
        if pld.pld_supports(event, neighboring=_entry_relation(event) or self.neighboring):
            methods.append(Method.PLD)
        try:
            pld.privacy_profile(event)
            methods.append(Method.EXACT)
        except UnsupportedEventError:
            pass
        return methods

    def _any_route_supports(self, event: ev.Event) -> bool:
        """Whether some route interprets ``event``; the cheap routes first (the PLD check loads dp-accounting)."""
        try:
            rdp.rdp_curve(event)
            return True
        except UnsupportedEventError:
            pass
        try:
            pld.privacy_profile(event)
            return True
        except UnsupportedEventError:
            pass
        return pld.pld_supports(event, neighboring=_entry_relation(event) or self.neighboring)

    def compose(self, event: ev.Event, count: int = 1) -> Accountant:
        """Append ``count`` adaptive runs of ``event``; validated first, so a refusal changes nothing.

        Raises:
            ValueError: count invalid, neighbouring relation mismatch, or no route supports the event
                (:class:`UnsupportedEventError`, a ValueError).
        """
        if not isinstance(event, ev.Event):
            raise ValueError(f"event must be an Event; got {event!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"count must be an integer >= 0; got {count!r}")
        relation = _entry_relation(event)
        ledger_relation = self._neighboring or (_entry_relation(self._ledger[0][0]) if self._ledger else None)
        if relation is not None and ledger_relation is not None and relation is not ledger_relation:
            raise ValueError(
                f"event neighbouring relation {relation.value!r} differs from the ledger's {ledger_relation.value!r}; "
                "a composition must be stated under one relation"
            )
        if not self._any_route_supports(event):
            raise UnsupportedEventError(f"no accounting route supports event {event!r}")
        if self._neighboring is None and relation is not None:
            self._neighboring = relation
        if count > 0:
            self._ledger.append((event, count))
        return self

    # ---- routes ---------------------------------------------------------------------------

    def rdp_curve(self) -> RdpCurve:
        """The RDP curve of the ledger (sum of the entries' curves)."""
        total = RdpCurve.zero()
        for event, count in self._ledger:
            total = total + rdp.rdp_curve(event) * count
        return total

    def _composed_event(self) -> ev.Event:
        parts = tuple(
            event if count == 1 else ev.SelfComposed(event=event, count=count) for event, count in self._ledger
        )
        return parts[0] if len(parts) == 1 else ev.Composed(events=parts)

    def exact_profile(self) -> PrivacyProfile:
        """The closed-form profile of the whole ledger; :class:`UnsupportedEventError` where none is known."""
        if not self._ledger:
            raise UnsupportedEventError("the ledger is empty")
        return pld.privacy_profile(self._composed_event())

    def pld_profile(self) -> PrivacyProfile:
        """The pessimistic PLD profile of the ledger (both directions)."""
        return pld.pld_profile(self._ledger, neighboring=self.neighboring, value_discretization_interval=self._interval)

    def _route_epsilon(
        self, delta: float, method: Method, conversion: RdpConversion, *, lower: bool = True
    ) -> EpsilonResult:
        if method is Method.RDP:
            eps, order = self.rdp_curve().epsilon_and_order(delta, conversion=conversion)
            name = (
                "Canonne-Kamath-Steinke 2020 Prop. 12"
                if conversion is RdpConversion.OPTIMAL
                else "Mironov 2017 Prop. 3"
            )
            return EpsilonResult(
                epsilon=eps,
                delta=delta,
                method=method,
                details=f"RDP, {name}, alpha optimised continuously",
                optimal_order=order,
            )
        if method is Method.PLD:
            result = pld.pld_epsilon(
                self._ledger,
                delta,
                neighboring=self.neighboring,
                value_discretization_interval=self._interval,
                tolerance=self._tolerance,
                lower=lower,
            )
            return EpsilonResult(
                epsilon=result.epsilon,
                delta=delta,
                method=method,
                details=result.method,
                discretisation=result.discretisation(),
                epsilon_lower=result.epsilon_lower,
                bracket_note=result.bracket_note,
            )
        if method is Method.EXACT:
            profile = self.exact_profile()
            if delta == 0:
                # (ε, 0)-DP: the profile's own answer, or basic composition of the max-divergences (exact for
                # symmetric mechanisms, whose worst outputs have positive probability together).
                return EpsilonResult(
                    epsilon=min(self.pure_epsilon(), profile.epsilon(0.0)),
                    delta=0.0,
                    method=method,
                    details=f"exact pure epsilon: {profile.description}",
                )
            return EpsilonResult(
                epsilon=profile.epsilon(delta),
                delta=delta,
                method=method,
                details=f"exact privacy profile: {profile.description}",
                discretisation=profile.discretisation or None,
            )
        raise ValueError(f"method must be a Method; got {method!r}")

    def epsilon_result(
        self,
        delta: float,
        *,
        method: Method = Method.BEST,
        conversion: RdpConversion = RdpConversion.OPTIMAL,
        lower: bool = True,
    ) -> EpsilonResult:
        """ε at ``delta`` by ``method`` with its provenance (BEST: the minimum over supported routes).

        ``lower=False`` leaves out what only the lower end needs (a sampler's lower-bound constructions, which can cost
        more than the upper bound): ``epsilon_lower`` is then the bracket's where it is certified, else None.
        """
        delta = conversions.check_delta(delta, allow_zero=True)
        method = as_method(method)
        if not self._ledger:
            return EpsilonResult(epsilon=0.0, delta=delta, method=method, details="empty ledger")
        if method is not Method.BEST:
            return self._route_epsilon(delta, method, conversion, lower=lower)
        routes, refusals = self._routes(delta, lower=lower)
        if not routes:
            raise UnsupportedEventError("no single accounting route supports the whole ledger")
        best = min(routes, key=lambda r: r.epsilon)
        # Every route's lower end bounds the same true ε from below, so the largest one is the bracket's.
        lowers = [r.epsilon_lower for r in routes if r.epsilon_lower is not None]
        low = min(max(lowers), best.epsilon) if lowers else None
        reasons = [r.bracket_note.split(": ", 1)[-1] for r in routes if r.bracket_note]
        return EpsilonResult(
            epsilon=best.epsilon,
            delta=delta,
            method=best.method,
            details=best.details,
            optimal_order=best.optimal_order,
            discretisation=best.discretisation,
            routes=tuple(routes),
            epsilon_lower=low,
            bracket_note=pld.bracket_note(low, best.epsilon, reasons[0] if reasons else None),
            refusals=tuple(refusals),
        )

    def all_routes(self, delta: float, *, lower: bool = True) -> list[EpsilonResult]:
        """ε at ``delta`` by every route that supports the whole ledger."""
        return self._routes(delta, lower=lower)[0]

    def _routes(self, delta: float, *, lower: bool) -> tuple[list[EpsilonResult], list[tuple[Method, str]]]:
        """The routes' answers, and the refusals of those that do not support the ledger (with their reasons)."""
        out, refusals = [], []
        for method in (Method.RDP, Method.PLD, Method.EXACT):
            try:
                out.append(self._route_epsilon(delta, method, RdpConversion.OPTIMAL, lower=lower))
            except UnsupportedEventError as err:
                refusals.append((method, str(err)))
        return out, refusals

    def epsilon(
        self, delta: float, *, method: Method = Method.BEST, conversion: RdpConversion = RdpConversion.OPTIMAL
    ) -> float:
        """An upper bound on ε at ``delta`` (see :meth:`epsilon_result`)."""
        return self.epsilon_result(delta, method=method, conversion=conversion, lower=False).epsilon

    def delta(self, epsilon: float, *, method: Method = Method.BEST) -> float:
        """An upper bound on δ at ``epsilon`` (BEST: the minimum over supported routes)."""
        epsilon = conversions.check_epsilon(epsilon)
        method = as_method(method)
        if not self._ledger:
            return 0.0
        candidates = []
        for route in (Method.RDP, Method.PLD, Method.EXACT) if method is Method.BEST else (method,):
            try:
                if route is Method.RDP:
                    candidates.append(self.rdp_curve().delta(epsilon))
                elif route is Method.PLD:
                    candidates.append(
                        pld.pld_delta(
                            self._ledger,
                            epsilon,
                            neighboring=self.neighboring,
                            value_discretization_interval=self._interval,
                            tolerance=self._tolerance,
                        ).delta
                    )
                else:
                    candidates.append(min(conversions.round_up(self.exact_profile().delta(epsilon)), 1.0))
            except UnsupportedEventError:
                if method is not Method.BEST:
                    raise
        if not candidates:
            raise UnsupportedEventError("no single accounting route supports the whole ledger")
        return min(candidates)

    def pure_epsilon(self) -> float:
        """ε of (ε, 0)-DP for the ledger by basic composition (Dwork et al. 2006): Σ count·ε₀ over entries.

        Laplace has ε₀ = 1/b, randomized response its ε; anything without a pure-DP guarantee gives ∞.
        """
        return conversions.round_up(sum(count * _pure_epsilon(event) for event, count in self._ledger))

    def summary(
        self,
        delta: float,
        *,
        claim: tuple[float, float] | None = None,
        extra_deltas: tuple[float, ...] = (),
        calibration: dict[str, Any] | None = None,
    ):
        """One accounting summary at ``delta``: every route's ε with provenance and the curves a report shows.

        See :func:`dplens.accountant.summary.summarise` (``claim``: the (ε, δ) under test, for the claim-region
        samples; ``extra_deltas``: further δ values whose tightest ε is needed).

        Example:
            >>> from dplens import Accountant, Gaussian
            >>> summary = Accountant().compose(Gaussian(noise_multiplier=2.0), count=4).summary(1e-5)
            >>> round(summary.epsilon, 4), summary.mu  # four Gaussians with σ = 2: exactly 1-GDP
            (4.3772, 1.0)
        """
        from dplens.accountant.summary import summarise

        return summarise(self, delta, claim=claim, extra_deltas=extra_deltas, calibration=calibration)

    def trade_off(self) -> TradeOff:
        """The f-DP trade-off curve of the ledger from its tightest available profile (exact, else PLD)."""
        try:
            return self.exact_profile().trade_off()
        except UnsupportedEventError:
            return self.pld_profile().trade_off()

    def attack_risk(self, fprs=None, *, prior: float | None = None, method: Method = Method.BEST, **options):
        """Upper bounds on the attack risk of the ledger: TPR at each FPR, advantage, Bayesian success with ``prior``
        (:func:`dplens.accountant.risk.attack_risk`; ``fprs`` default 0.1 %, 1 %, 10 %).

        Example:
            >>> from dplens import Accountant, Gaussian
            >>> Accountant().compose(Gaussian(noise_multiplier=2.0), count=4).attack_risk((0.01,))
            AttackRisk(TPR@0.01<=0.09236, advantage<=0.3829 [upper bounds], method=exact)
        """
        from dplens.accountant.risk import DEFAULT_FPRS, attack_risk

        return attack_risk(self, fprs=DEFAULT_FPRS if fprs is None else fprs, prior=prior, method=method, **options)

    # ---- state ----------------------------------------------------------------------------

    def to_json(self) -> str:
        """Serialise the ledger so a training run can checkpoint and resume its budget."""
        return json.dumps(
            {
                "format": "dplens-ledger",
                "version": LEDGER_FORMAT_VERSION,
                "neighboring": self._neighboring.value if self._neighboring else None,
                "value_discretization_interval": self._interval,
                "tolerance": self._tolerance,
                "entries": [{"event": ev.event_to_dict(e), "count": c} for e, c in self._ledger],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> Accountant:
        """Inverse of :meth:`to_json` (validated: a bad document raises ValueError)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"ledger is not valid JSON: {err}") from None
        if not isinstance(data, dict) or data.get("format") != "dplens-ledger":
            raise ValueError("ledger JSON must have format 'dplens-ledger'")
        if data.get("version") != LEDGER_FORMAT_VERSION:
            raise ValueError(f"unsupported ledger version {data.get('version')!r}; expected {LEDGER_FORMAT_VERSION}")
        relation = data.get("neighboring")
        acc = cls(
            neighboring=ev.NeighboringRelation(relation) if relation else None,
            value_discretization_interval=data.get("value_discretization_interval"),
            tolerance=data.get("tolerance", pld.DEFAULT_TOLERANCE),
        )
        for entry in data.get("entries", []):
            acc.compose(ev.event_from_dict(entry["event"]), entry["count"])
        return acc
