"""Exact privacy profiles: PLD accounting (dplens's engine, dp-accounting's as the fallback) and closed forms.

Two interpreters live here:

- the PLD route (:func:`pld_epsilon`, :func:`pld_delta`, :func:`pld_profile`, :func:`pld_supports`) runs dplens's
  own engine (:mod:`dplens.accountant.pld_engine`) on every event it models — Gaussian, Laplace, randomized
  response, Poisson-subsampled Gaussian and their compositions, plus any event registered on
  :func:`dplens.accountant.pld_engine.loss_distribution` — and returns a certified bracket: ``epsilon`` is an upper
  bound on the true ε, ``epsilon_lower`` a lower bound, refined until they are within a relative ``tolerance``.
  Ledgers with an event the engine does not model fall back to dp-accounting's PLD engine (connect-the-dots,
  pessimistic: Doroshenko et al. 2022, arXiv 2207.04380), upper bound only; :func:`pld_of` exposes that one.
- :func:`privacy_profile` (``functools.singledispatch``) returns the exact closed-form
  :class:`~dplens.accountant.curves.PrivacyProfile` of an event where one is known; research modules
  register their events on it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.accountant import conversions
from dplens.accountant import events as ev
from dplens.accountant.curves import Gdp, PrivacyProfile
from dplens.accountant.rdp import UnsupportedEventError

__all__ = [
    "DEFAULT_TOLERANCE",
    "DEFAULT_VALUE_DISCRETIZATION_INTERVAL",
    "MAX_PLD_COUNT",
    "MAX_PLD_EVENT_POINTS",
    "MAX_PLD_POINTS",
    "PldOutOfRangeError",
    "PldResult",
    "event_pld",
    "gaussian_mu",
    "pld_delta",
    "pld_epsilon",
    "pld_of",
    "pld_profile",
    "pld_supports",
    "privacy_profile",
]

#: Interval of the privacy-loss grid where one is fixed (profiles, the dp-accounting fallback). 1e-4 puts MNIST
#: DP-SGD within 1e-4 of the true ε (notes §5.8).
DEFAULT_VALUE_DISCRETIZATION_INTERVAL = 1e-4
#: The engine refines its grid until (ε − ε_lower) ≤ this × ε.
DEFAULT_TOLERANCE = 1e-3

#: Largest PLD the PLD route builds, in grid points of the composed distribution (2·10⁷: ≈ 5 s and 0.5 GB) and in
#: points of any one mechanism's distribution before composition, a subsampled one counted three times (4·10⁶: ≈ 10 s
#: on a 2-core machine; dp-accounting builds those point by point). Beyond them (ε of hundreds at the default
#: interval) the route reports "out of supported range" at once rather than run for minutes.
MAX_PLD_POINTS = 20_000_000
MAX_PLD_EVENT_POINTS = 4_000_000
_PLD_TAIL_MASS = 1e-15  # dp-accounting's default tail-mass truncation: the grid spans the loss up to this mass
_SUBSAMPLED_COST = 3.0  # a subsampled mechanism's PLD costs about three times a plain one per grid point
# dp-accounting self-composes a small ("sparse") PMF of s points n times by first computing s**n as an integer,
# and one of a single point by n pairwise compositions: beyond ~4·10⁶ bits in s**n, or 10⁶ runs of a one-point PMF,
# that alone takes seconds to hours (PSG q = 0.01, σ = 500: 10⁸ steps took 452 s). Nothing is repeated more than 10⁸
# times.
MAX_PLD_COUNT = 10**8
_PROBED_COUNT = 10**5  # below this many runs any self-composition is fast: not probed
_MAX_SPARSE_BITS = 4e6
_MAX_POINT_MASS_RUNS = 10**6


class PldOutOfRangeError(UnsupportedEventError):
    """A PLD too large to build in reasonable time and memory (the BEST route then uses the others)."""


def _out_of_range(err: Exception) -> PldOutOfRangeError:
    """The engine's too-large grid as a refusal the BEST route passes over (RDP and exact still answer)."""
    return PldOutOfRangeError(f"out of supported range for PLD accounting: {err}; use the RDP route (--method rdp)")


def _loss_span(event: ev.Event, count: int) -> float:
    """The RDP ε at δ = tail mass of ``count`` runs of ``event``: an upper bound on the privacy loss the PLD grid must
    span on either side (Canonne-Kamath-Steinke 2020 Prop. 12). ∞ where the arithmetic overflows."""
    from dplens.accountant import rdp

    try:
        return float((rdp.rdp_curve(event) * count).epsilon(_PLD_TAIL_MASS))
    except UnsupportedEventError:
        raise
    except (ValueError, OverflowError, ZeroDivisionError, FloatingPointError):
        return math.inf


def _flatten_dp_events(entries: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    """dp-accounting events with their total repeat counts, self-compositions and compositions unfolded (a research
    event converts to, e.g., ``SelfComposedDpEvent(PoissonSampledDpEvent(...), steps)``)."""
    import dp_accounting as dpa

    out, pending = [], list(entries)
    while pending:
        dp_event, count = pending.pop()
        if isinstance(dp_event, dpa.SelfComposedDpEvent):
            pending.append((dp_event.event, count * dp_event.count))
        elif isinstance(dp_event, dpa.ComposedDpEvent):
            pending.extend((inner, count) for inner in dp_event.events)
        else:
            out.append((dp_event, count))
    return out


def _check_self_composition(accountant_type: Any, relation: Any, dp_event: Any, count: int, interval: float) -> None:
    """Refuse ``count`` runs of an event that dp-accounting's self-composition would take minutes over (see
    :data:`MAX_PLD_COUNT`): probed on the event's one-run PMFs, built once more (only for counts above 10⁵)."""

    def refuse(reason: str) -> None:
        raise PldOutOfRangeError(
            f"out of supported range for PLD accounting: {count} runs of one mechanism ({reason}); use the RDP "
            "route (--method rdp)"
        )

    if count <= _PROBED_COUNT:
        return
    if count > MAX_PLD_COUNT:
        refuse(f"at most {MAX_PLD_COUNT:.0e}")
    probe = accountant_type(relation, value_discretization_interval=interval)
    probe.compose(dp_event, 1)
    composed = getattr(probe, "_pld", None)  # dp-accounting keeps the PLD here (as pld_profile reads it)
    for pmf in (getattr(composed, "_pmf_remove", None), getattr(composed, "_pmf_add", None)):
        if pmf is None or type(pmf).__name__ != "SparsePLDPmf":
            continue
        size = int(pmf.size)
        if size <= 1 and count > _MAX_POINT_MASS_RUNS:
            refuse(f"its loss is a single grid point: at most {_MAX_POINT_MASS_RUNS:.0e} runs")
        if size > 1 and count * math.log2(size) > _MAX_SPARSE_BITS:
            refuse(f"its loss spans only {size} grid points: at most {int(_MAX_SPARSE_BITS / math.log2(size))} runs")


def _check_pld_size(entries: list[tuple[ev.Event, int]], interval: float) -> None:
    """Refuse, before building anything, a PLD that would take minutes or gigabytes.

    The grid spans the privacy loss up to the tail mass truncated, on both sides: about 2·span/interval points, the
    span estimated from above by the RDP ε at that tail mass (cheap). Checked for the composition and for each
    mechanism before composition (the subsampled ones over their inner mechanism's span, which dp-accounting
    discretises first). Entries without an RDP curve are not estimated.
    """
    if any(isinstance(event, ev.NonPrivate) for event, count in entries if count):
        return

    def refuse(points: float, what: str, limit: int) -> None:
        shown = "more than 1e300" if not math.isfinite(points) else f"about {points:.2g}"
        raise PldOutOfRangeError(
            f"out of supported range for PLD accounting: {what} would need {shown} grid points at "
            f"value_discretization_interval={interval:g} (at most {limit:.0e}; epsilon in the hundreds or more); "
            "use the RDP route (--method rdp)"
        )

    try:
        total = 0.0
        for event, count in entries:
            if not count:
                continue
            inner, factor = event, 1.0
            while isinstance(inner, ev.PoissonSampled | ev.SampledWithoutReplacement):
                inner, factor = inner.event, _SUBSAMPLED_COST
            points = factor * 2.0 * _loss_span(inner, 1) / interval
            if not points <= MAX_PLD_EVENT_POINTS:
                refuse(points, f"the mechanism {type(inner).__name__}", MAX_PLD_EVENT_POINTS)
            total += _loss_span(event, count)
    except UnsupportedEventError as err:
        if isinstance(err, PldOutOfRangeError):
            raise
        return
    points = 2.0 * total / interval
    if not points <= MAX_PLD_POINTS:
        refuse(points, "the composition", MAX_PLD_POINTS)


def _dpa_relation(relation: ev.NeighboringRelation):
    import dp_accounting as dpa

    return {
        ev.NeighboringRelation.ADD_OR_REMOVE_ONE: dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
        ev.NeighboringRelation.REPLACE_ONE: dpa.NeighboringRelation.REPLACE_ONE,
        ev.NeighboringRelation.REPLACE_SPECIAL: dpa.NeighboringRelation.REPLACE_SPECIAL,
    }[relation]


def check_tolerance(tolerance: float) -> float:
    """Validate a relative bracket tolerance in (0, 1)."""
    ok = isinstance(tolerance, int | float) and not isinstance(tolerance, bool) and 0 < tolerance < 1
    if not ok:
        raise ValueError(f"tolerance must be a number in (0, 1); got {tolerance!r}")
    return float(tolerance)


def _check_interval(value_discretization_interval: float | None) -> float | None:
    if value_discretization_interval is None:
        return None
    try:
        interval = float(value_discretization_interval)
    except (TypeError, ValueError):
        raise ValueError(
            f"value_discretization_interval must be a number in (0, 1); got {value_discretization_interval!r}"
        ) from None
    if not (0 < interval < 1):
        raise ValueError(
            f"value_discretization_interval must be a number in (0, 1); got {value_discretization_interval!r}"
        )
    return interval


def pld_of(
    entries: list[tuple[ev.Event, int]] | ev.Event,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    value_discretization_interval: float | None = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
):
    """The pessimistic PLD of a composition from dp-accounting's engine (its ``PLDAccountant``).

    Raises:
        UnsupportedEventError: an event has no PLD in dp-accounting (checked before any work).
    """
    from dp_accounting.pld import pld_privacy_accountant

    interval = _check_interval(value_discretization_interval) or DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    if isinstance(entries, ev.Event):
        entries = [(entries, 1)]
    _check_pld_size(list(entries), interval)
    accountant = pld_privacy_accountant.PLDAccountant(
        _dpa_relation(neighboring), value_discretization_interval=interval
    )
    plan: list[tuple[object, int, bool]] = []  # (dp-accounting event or PLD, count, is a ready-made PLD)
    for event, count in entries:
        _plan_event(event, count, neighboring=neighboring, interval=interval, accountant=accountant, plan=plan)
    for dp_event, count in _flatten_dp_events([(item, count) for item, count, ready in plan if not ready]):
        _check_self_composition(type(accountant), _dpa_relation(neighboring), dp_event, count, interval)
    for item, count, ready in plan:
        if count == 0:
            continue
        if ready:
            accountant._pld = accountant._pld.compose(item.self_compose(count))
        else:
            accountant.compose(item, count)
    return accountant


@functools.singledispatch
def event_pld(event: ev.Event, *, neighboring: ev.NeighboringRelation, value_discretization_interval: float):
    """A dp-accounting ``PrivacyLossDistribution`` of one run of ``event`` built here, not by its PLDAccountant.

    This is the extension point of the dp-accounting fallback (events dplens's own engine,
    :mod:`dplens.accountant.pld_engine`, does not model).

    None (the default) lets dp-accounting's PLDAccountant interpret the event's dp-accounting counterpart. Modules
    register events whose PLD dp-accounting cannot build (or builds wrongly: its PLDAccountant composes a
    ``RandomizedResponseDpEvent`` once whatever the count, see the registration for :class:`~dplens.accountant.
    events.RandomizedResponse` below) and return a pessimistic PLD; :func:`pld_of` self-composes it ``count`` times.
    Raise :class:`UnsupportedEventError` to refuse.
    """
    return None


def _plan_event(event, count, *, neighboring, interval, accountant, plan) -> None:
    """Validate one ledger entry (recursively) and append what to compose; nothing is composed here."""
    if isinstance(event, ev.SelfComposed):
        _plan_event(
            event.event,
            count * event.count,
            neighboring=neighboring,
            interval=interval,
            accountant=accountant,
            plan=plan,
        )
        return
    if isinstance(event, ev.Composed) and event.events:
        for inner in event.events:
            _plan_event(inner, count, neighboring=neighboring, interval=interval, accountant=accountant, plan=plan)
        return
    standard = getattr(event, "standard_event", None)
    equivalent = standard() if callable(standard) else None
    if equivalent is not None:  # an event that stands for a standard ledger (a DP-SGD run under its sampler)
        _plan_event(equivalent, count, neighboring=neighboring, interval=interval, accountant=accountant, plan=plan)
        return
    ready = event_pld(event, neighboring=neighboring, value_discretization_interval=interval)
    if ready is not None:
        plan.append((ready, count, True))
        return
    mu = gaussian_mu(event) if not isinstance(event, ev.Gaussian) else None
    if mu is not None:  # an exactly μ-GDP event (e.g. tree aggregation) composes as a Gaussian of σ = 1/μ
        if mu > 0:
            gaussian = ev.Gaussian(noise_multiplier=1.0 / mu, neighboring=neighboring)
            plan.append((ev.to_dp_accounting(gaussian), count, False))
        return
    try:
        dp_event = ev.to_dp_accounting(event)
    except ValueError as err:
        raise UnsupportedEventError(f"PLD accounting does not support event {event!r}") from err
    if not accountant.supports(dp_event):
        raise UnsupportedEventError(
            f"PLD accounting does not support event {event!r} under neighboring={neighboring.value}"
        )
    plan.append((dp_event, count, False))


def pld_supports(event: ev.Event, *, neighboring: ev.NeighboringRelation) -> bool:
    """Whether the PLD route can interpret ``event``: dplens's engine models it, or the dp-accounting fallback can
    (a dry run: nothing is composed)."""
    from dplens.accountant import pld_engine

    if pld_engine.supports(event, neighboring=neighboring):
        return True
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant(_dpa_relation(neighboring))
    try:
        # A coarse grid: events whose PLD is built here (event_pld) build it cheaply for this dry run.
        _plan_event(event, 1, neighboring=neighboring, interval=0.5, accountant=accountant, plan=[])
    except UnsupportedEventError:
        return False
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class PldResult:
    """An (ε, δ) pair from PLD accounting, with its discretisation and, from dplens's engine, a certified bracket.

    ``epsilon`` (or ``delta``, for a δ query) is an upper bound on the true value; ``epsilon_lower`` /
    ``delta_lower`` a lower bound (None from the dp-accounting fallback, which has none).
    """

    epsilon: float
    delta: float
    value_discretization_interval: float
    neighboring: str
    method: str = "pld (dp-accounting, connect-the-dots, pessimistic)"  # _FALLBACK_METHOD
    epsilon_lower: float | None = None
    delta_lower: float | None = None
    tolerance: float | None = None
    tolerance_met: bool | None = None
    bracket_note: str | None = None  # a bracket wider than NOTE_WIDTH: its width and the reason

    def to_dict(self) -> dict:
        out = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "value_discretization_interval": self.value_discretization_interval,
            "neighboring": self.neighboring,
            "method": self.method,
        }
        for key in ("epsilon_lower", "delta_lower", "tolerance", "tolerance_met", "bracket_note"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @property
    def adaptive(self) -> bool:
        return self.tolerance is not None

    def discretisation(self) -> str:
        """The grid as "value_discretization_interval=…", with how it was chosen when the engine refined it."""
        text = f"value_discretization_interval={self.value_discretization_interval:g}"
        if self.tolerance is not None:
            met = "" if self.tolerance_met else ", NOT met"
            text += f" (adaptive: bracket within {self.tolerance:g}{met})"
        return text


_FALLBACK_METHOD = "pld (dp-accounting, connect-the-dots, pessimistic)"
_ENGINE_METHOD = "pld (dplens engine: pessimistic connect-the-dots / optimistic inscribed merge, certified bracket)"
_CONSTRUCTED_LOWER = "; lower end from attained lower-bound pairs (the accounted pair of a sampler is not attained)"
_CONSTRUCTED_REASON = (
    "the upper end bounds the sampler by a pair it does not attain; the lower end comes from attained lower-bound "
    "pairs, so the gap is partly the sampler's analysis, not the discretisation"
)
_FALLBACK_REASON = (
    "the upper end is dp-accounting's pessimistic PLD at value_discretization_interval={interval:g} (dplens's engine "
    "does not model this ledger); the lower end comes from attained lower-bound pairs"
)


def _leaf_entries(entries: list[tuple[ev.Event, int]]) -> list[tuple[ev.Event, int]]:
    out: list[tuple[ev.Event, int]] = []
    for event, count in entries:
        if isinstance(event, ev.SelfComposed):
            out += _leaf_entries([(event.event, count * event.count)])
        elif isinstance(event, ev.Composed):
            out += _leaf_entries([(inner, count) for inner in event.events])
        else:
            out.append((event, count))
    return out


def lower_bound_ledgers(entries: list[tuple[ev.Event, int]]) -> list[list[tuple[ev.Event, int]]] | None:
    """The ledgers whose certified lower ends bound a ledger's ε from below, where its own bracket's lower end does not.

    None: every event's accounted pair is attained, so the PLD bracket's lower end is valid as it is. Otherwise one
    ledger per alternative construction (events declaring ``lower_bound_events()``, e.g. shuffled batches, replaced by
    their i-th construction, the last one repeated), each a valid lower bound; [] when some event has none.
    """
    leaves = _leaf_entries(entries)
    choices = []
    for event, _ in leaves:
        declared = getattr(event, "lower_bound_events", None)
        choices.append(declared() if callable(declared) else None)
    if all(c is None for c in choices):
        return None
    if any(c is not None and len(c) == 0 for c in choices):
        return []
    width = max(len(c) for c in choices if c is not None)
    return [
        [
            (event if c is None else c[min(i, len(c) - 1)], count)
            for (event, count), c in zip(leaves, choices, strict=True)
        ]
        for i in range(width)
    ]


def _constructed_lower(
    ledgers: list[list[tuple[ev.Event, int]]], measure, neighboring: ev.NeighboringRelation, upper: float
) -> float | None:
    """The largest certified lower end over the lower-bound ledgers (``measure(ledger, relation)`` → bracket), at most
    ``upper``; None if none can be computed. The constructions are explicit pairs: a substitution ledger's are
    computed under zero-out (where dplens's allocation PLDs are defined)."""
    from dplens.accountant import pld_engine

    relation = (
        ev.NeighboringRelation.REPLACE_SPECIAL if neighboring is ev.NeighboringRelation.REPLACE_ONE else neighboring
    )
    best = None
    for ledger in ledgers:
        try:
            low = measure(ledger, relation).lower
        except (UnsupportedEventError, pld_engine.WindowTooLargeError, OverflowError, ValueError):
            continue
        best = low if best is None else max(best, low)
    return None if best is None else min(best, upper)


def _engine_lower(
    bracket: Any, entries: list[tuple[ev.Event, int]], measure, neighboring: ev.NeighboringRelation, lower: bool = True
) -> tuple[float | None, str]:
    """The certified lower end of an engine answer and its method label: the bracket's own lower end, or where the
    ledger's pair is not attained the constructions' (:func:`lower_bound_ledgers`; None with ``lower=False``)."""
    ledgers = lower_bound_ledgers(entries)
    if ledgers is None:
        return bracket.lower, _ENGINE_METHOD
    lower_end = _constructed_lower(ledgers, measure, neighboring, bracket.upper) if lower else None
    return lower_end, _ENGINE_METHOD + _CONSTRUCTED_LOWER


def _engine_fields(bracket: Any, neighboring: ev.NeighboringRelation, tolerance: float, interval: float | None):
    """The fields of a :class:`PldResult` answered by the engine, other than the quantity and its lower end."""
    return {
        "value_discretization_interval": bracket.interval,
        "neighboring": neighboring.value,
        "tolerance": tolerance if interval is None else None,
        "tolerance_met": bracket.tolerance_met if interval is None else None,
    }


def _engine_or_fallback(engine, entries: list[tuple[ev.Event, int]], neighboring: ev.NeighboringRelation, interval):
    """``(bracket, None, None)`` from ``engine()``, or where the engine does not model the ledger ``(None, interval,
    accountant)``: dp-accounting's PLD on the given interval (else the default). Losses in the thousands raise
    :class:`PldOutOfRangeError` (the exact or RDP route answers them)."""
    from dplens.accountant import pld_engine

    try:
        return engine(), None, None
    except (pld_engine.WindowTooLargeError, OverflowError) as err:
        raise _out_of_range(err) from None
    except UnsupportedEventError:
        fallback = interval or DEFAULT_VALUE_DISCRETIZATION_INTERVAL
        return None, fallback, pld_of(entries, neighboring=neighboring, value_discretization_interval=fallback)


def _entries(entries: list[tuple[ev.Event, int]] | ev.Event) -> list[tuple[ev.Event, int]]:
    return [(entries, 1)] if isinstance(entries, ev.Event) else list(entries)


def pld_epsilon(
    entries: list[tuple[ev.Event, int]] | ev.Event,
    delta: float,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    value_discretization_interval: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    lower: bool = True,
) -> PldResult:
    """ε(δ) of a composition by PLD (worse of add and remove directions), with a certified bracket.

    Where an event's accounted pair is not attained (a sampler's upper bound), ``epsilon_lower`` comes from its
    lower-bound constructions instead (:func:`lower_bound_ledgers`); ``lower=False`` skips them (it is then None).

    dplens's engine refines its grid until (ε − ε_lower) ≤ ``tolerance``·ε, or uses ``value_discretization_interval``
    when one is given; ledgers it does not model go to dp-accounting (upper bound only).

    Example:
        >>> from dplens.accountant import events as ev
        >>> step = ev.PoissonSampled(sampling_rate=0.01, event=ev.Gaussian(noise_multiplier=1.0))
        >>> result = pld_epsilon([(step, 1000)], 1e-5)
        >>> low, high = result.epsilon_lower, result.epsilon
        >>> low <= 1.82822 <= high, high - low <= 1e-3 * high
        (True, True)
    """
    from dplens.accountant import pld_engine

    delta = conversions.check_delta(delta, allow_zero=True)
    tolerance = check_tolerance(tolerance)
    interval = _check_interval(value_discretization_interval)
    entries = _entries(entries)

    def measure(ledger, relation):
        return pld_engine.epsilon_bracket(ledger, delta, neighboring=relation, tolerance=tolerance)

    def engine():
        if delta == 0:  # the engine brackets ε at δ > 0; pure DP (δ = 0) goes to the exact finite PLDs
            raise UnsupportedEventError("the PLD engine answers at delta > 0")
        return pld_engine.epsilon_bracket(
            entries, delta, neighboring=neighboring, tolerance=tolerance, interval=interval
        )

    bracket, fallback, accountant = _engine_or_fallback(engine, entries, neighboring, interval)
    if bracket is None:
        # Asked at δ lowered by the relative margin every reported ε is raised by: dp-accounting composes the masses
        # at +∞ as 1 − Π(1 − δᵢ) in floating point, which can land below the exact value (δ = 1e-6 + 3e-6 − 3e-12 for
        # (0.5, 1e-6), (0.25, 3e-6) gave ε = 1.75 where the exact δ at every ε exceeds it by 8e-23: ε = ∞).
        epsilon = conversions.round_up(max(float(accountant.get_epsilon(delta * (1 - 1e-12))), 0.0))
        lower_end, method = None, _FALLBACK_METHOD
        ledgers = lower_bound_ledgers(entries) if lower else None
        if ledgers:  # a sampler's attained lower-bound pairs may be in the engine's reach though the ledger is not
            lower_end = _constructed_lower(ledgers, measure, neighboring, epsilon)
            method += _CONSTRUCTED_LOWER
        return PldResult(
            epsilon=epsilon,
            delta=delta,
            value_discretization_interval=fallback,
            neighboring=neighboring.value,
            method=method,
            epsilon_lower=lower_end,
            bracket_note=bracket_note(lower_end, epsilon, _FALLBACK_REASON.format(interval=fallback)),
        )
    lower_end, method = _engine_lower(bracket, entries, measure, neighboring, lower)
    return PldResult(
        epsilon=bracket.upper,
        delta=delta,
        method=method,
        epsilon_lower=lower_end,
        bracket_note=bracket_note(
            lower_end, bracket.upper, bracket.note if method == _ENGINE_METHOD else _CONSTRUCTED_REASON
        ),
        **_engine_fields(bracket, neighboring, tolerance, interval),
    )


#: Brackets wider than this (relative) carry a note with their width and its reason (issue 47).
NOTE_WIDTH = 5e-3


def bracket_note(lower: float | None, upper: float, reason: str | None = None) -> str | None:
    """A note stating a bracket's relative width and why it is that wide, for brackets wider than ``NOTE_WIDTH``
    (None for narrower ones). ``reason``: the engine's (why its refinement stopped), or the caller's."""
    if lower is None or not math.isfinite(upper) or upper <= 0:
        return None
    width = (upper - lower) / upper
    if width <= NOTE_WIDTH:
        return None
    why = reason or "the accounting route stopped refining there"
    return f"the bracket [{lower:.6g}, {upper:.6g}] is {100 * width:.3g}% wide (relative): {why}"


def pld_delta(
    entries: list[tuple[ev.Event, int]] | ev.Event,
    epsilon: float,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    value_discretization_interval: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> PldResult:
    """δ(ε) of a composition by PLD (worse direction), with a certified bracket (``delta_lower``) from the engine."""
    from dplens.accountant import pld_engine

    epsilon = conversions.check_epsilon(epsilon)
    tolerance = check_tolerance(tolerance)
    interval = _check_interval(value_discretization_interval)
    entries = _entries(entries)
    bracket, fallback, accountant = _engine_or_fallback(
        lambda: pld_engine.delta_bracket(
            entries, epsilon, neighboring=neighboring, tolerance=tolerance, interval=interval
        ),
        entries,
        neighboring,
        interval,
    )
    if bracket is None:
        delta = min(conversions.round_up(max(float(accountant.get_delta(epsilon)), 0.0)), 1.0)
        return PldResult(
            epsilon=epsilon, delta=delta, value_discretization_interval=fallback, neighboring=neighboring.value
        )
    lower, method = _engine_lower(
        bracket,
        entries,
        lambda ledger, relation: pld_engine.delta_bracket(ledger, epsilon, neighboring=relation, tolerance=tolerance),
        neighboring,
    )
    return PldResult(
        epsilon=epsilon,
        delta=bracket.upper,
        method=method,
        delta_lower=lower,
        **_engine_fields(bracket, neighboring, tolerance, interval),
    )


def pld_profile(
    entries: list[tuple[ev.Event, int]] | ev.Event,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    value_discretization_interval: float | None = None,
) -> PrivacyProfile:
    """The pessimistic PLD as a :class:`PrivacyProfile`, both directions tracked.

    A profile answers queries at every ε, so its grid is fixed: ``value_discretization_interval``, else
    :data:`DEFAULT_VALUE_DISCRETIZATION_INTERVAL`. dplens's engine builds it where it models the ledger (its
    δ(ε) includes the engine's error terms, so every value is an upper bound); otherwise dp-accounting's.
    """
    from dplens.accountant import pld_engine

    interval = _check_interval(value_discretization_interval) or DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    entries = _entries(entries)
    while True:
        try:
            composed = pld_engine.compose(entries, pld_engine.LossGrid(interval=interval, neighboring=neighboring))
            break
        except OverflowError as err:
            raise _out_of_range(err) from None
        except UnsupportedEventError:
            return _dp_accounting_profile(entries, neighboring=neighboring, interval=interval)
        except pld_engine.WindowTooLargeError as err:
            if value_discretization_interval is not None:
                raise _out_of_range(err) from None
            interval *= 4.0  # a ledger too wide for the default grid: a coarser one is still an upper bound
    directions = composed.directions()
    if composed.non_private or not directions:
        level = 1.0 if composed.non_private else 0.0
        return PrivacyProfile(
            remove=functools.partial(_constant_delta, level=level),
            epsilon_for_delta=functools.partial(_constant_epsilon, level=level),
            description="PLD (non-private)" if composed.non_private else "PLD (empty ledger)",
            discretisation=f"value_discretization_interval={interval:g}",
            trade_off_function=_non_private_trade_off if composed.non_private else None,
        )

    def epsilon_for_delta(delta: float) -> float:
        return conversions.round_up(max(d.epsilon_upper(delta) for d in directions.values()))

    return PrivacyProfile(
        remove=_vectorised(directions["remove"].delta_upper),
        add=_vectorised(directions["add"].delta_upper) if "add" in directions else None,
        epsilon_for_delta=epsilon_for_delta,
        description="PLD (dplens engine, pessimistic connect-the-dots)",
        discretisation=f"value_discretization_interval={interval:g}",
        trade_off_function=_engine_trade_off(directions),
    )


def _engine_trade_off(directions: dict[str, Any]):
    """The exact trade-off curve of the engine's pessimistic PMFs (a lower bound on the mechanism's curve); the mass
    the engine bounds but does not place (above its window, floating-point error) counts as infinite loss."""
    from dplens.accountant import tradeoff

    arrays = []
    for direction in directions.values():
        upper = direction.upper
        losses = (upper.start + np.arange(upper.pmf.size)) * upper.interval + upper.offset
        arrays.append((losses, upper.pmf, min(1.0, upper.infinity_mass + upper.above + upper.round_off)))
    return tradeoff.LazyDiscreteTradeOff(arrays)


def _constant_delta(epsilons: np.ndarray, *, level: float) -> np.ndarray:
    return np.full(np.shape(np.atleast_1d(epsilons)), level)


def _constant_epsilon(delta: float, *, level: float) -> float:
    return math.inf if level >= 1.0 else 0.0


def _dp_accounting_profile(
    entries: list[tuple[ev.Event, int]], *, neighboring: ev.NeighboringRelation, interval: float
) -> PrivacyProfile:
    accountant = pld_of(entries, neighboring=neighboring, value_discretization_interval=interval)
    if getattr(accountant, "_contains_non_dp_event", False):  # a NonPrivate entry: δ = 1 at every ε
        return PrivacyProfile(
            remove=_non_private_delta,
            epsilon_for_delta=lambda delta: math.inf,
            description="PLD with a non-private event",
            trade_off_function=_non_private_trade_off,
        )
    pld = accountant._pld  # dp-accounting keeps the composed PLD here
    remove = getattr(pld, "_pmf_remove", None)
    add = None if getattr(pld, "_symmetric", True) else getattr(pld, "_pmf_add", None)
    if remove is None:  # pragma: no cover - dp-accounting internals changed: fall back to the public max
        remove_fn = _vectorised(pld.get_delta_for_epsilon)
        add_fn = None
    else:
        remove_fn = _vectorised(remove.get_delta_for_epsilon)
        add_fn = _vectorised(add.get_delta_for_epsilon) if add is not None else None

    def epsilon_for_delta(delta: float) -> float:
        return conversions.round_up(max(float(pld.get_epsilon_for_delta(delta)), 0.0))

    directions = [remove] + ([add] if add is not None else []) if remove is not None else []
    return PrivacyProfile(
        remove=remove_fn,
        add=add_fn,
        epsilon_for_delta=epsilon_for_delta,
        description="PLD (dp-accounting, connect-the-dots, pessimistic)",
        discretisation=f"value_discretization_interval={interval:g}",
        trade_off_function=_pmf_trade_off(directions) if directions else None,
    )


def _pmf_trade_off(pmfs):
    """The exact trade-off curve of the discrete PLD (a lower bound on the mechanism's: the PLD is pessimistic)."""
    from dplens.accountant import tradeoff

    return tradeoff.LazyDiscreteTradeOff([tradeoff.dp_accounting_pmf_arrays(pmf) for pmf in pmfs])


def _non_private_delta(epsilons: np.ndarray) -> np.ndarray:
    return np.ones_like(np.asarray(epsilons, dtype=float))


def _non_private_trade_off(alpha: np.ndarray) -> np.ndarray:
    return np.zeros_like(np.asarray(alpha, dtype=float))


def _vectorised(function):
    def wrapped(epsilons: np.ndarray) -> np.ndarray:
        eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
        order = np.argsort(eps)
        out = np.empty_like(eps)
        out[order] = np.asarray(function(eps[order]), dtype=float)
        return np.minimum(out, 1.0)

    return wrapped


# --------------------------------------------------------------------------------------------
# Closed-form profiles
# --------------------------------------------------------------------------------------------


def gaussian_mu(event: ev.Event) -> float | None:
    """μ of a (composition of) Gaussian or μ-GDP event(s), or None: μ = √(Σ countᵢ μᵢ²) (DRS 2022 Cor. 3.3)."""
    match event:
        case ev.Gaussian():
            return 1.0 / event.noise_multiplier
        case ev.NoOp():
            return 0.0
        case ev.SelfComposed():
            inner = gaussian_mu(event.event)
            return None if inner is None else inner * math.sqrt(event.count)
        case ev.Composed():
            parts = [gaussian_mu(e) for e in event.events]
            return None if any(p is None for p in parts) else math.sqrt(sum(p * p for p in parts))
    # Research events that are exactly μ-GDP declare μ (e.g. DpFtrl), so their compositions stay exact.
    declared = getattr(event, "gdp_mu", None)
    value = declared() if callable(declared) else None  # None: not μ-GDP (e.g. a group of a non-Gaussian event)
    return None if value is None else float(value)


@functools.singledispatch
def privacy_profile(event: ev.Event) -> PrivacyProfile:
    """The exact privacy profile of an event; :class:`UnsupportedEventError` where none is known."""
    mu = gaussian_mu(event)
    if mu is not None:
        return Gdp(mu=mu).profile()
    if isinstance(event, ev.SelfComposed) and event.count == 1:
        return privacy_profile(event.event)
    # An event whose self-composition is exactly another event of its family (e.g. GaussMix(k)×m = GaussMix(k·m)).
    if isinstance(event, ev.SelfComposed) and event.count > 1 and hasattr(event.event, "self_composed"):
        return privacy_profile(event.event.self_composed(event.count))
    from dplens.accountant import finite_pld  # compositions of finite PLDs (randomized response, (ε, δ) events)

    profile = finite_pld.exact_profile(event)
    if profile is not None:
        return profile
    raise UnsupportedEventError(f"no exact privacy profile is known for event {event!r}")


def _laplace_delta(epsilons: np.ndarray, *, epsilon0: float) -> np.ndarray:
    # Privacy loss of Lap(0, b) vs Lap(1, b) is ε0·clip(…) with an atom at ±ε0; its hockey stick is
    # δ(ε) = 1 − e^{(ε − ε0)/2} for ε < ε0 and 0 beyond (e.g. notes §5.1 row 22).
    eps = np.asarray(epsilons, dtype=float)
    return np.where(eps < epsilon0, -np.expm1((eps - epsilon0) / 2.0), 0.0)


@privacy_profile.register
def _(event: ev.Laplace) -> PrivacyProfile:
    """Laplace mechanism: δ(ε) = 1 − exp((ε − ε₀)/2) for ε < ε₀ = 1/b (symmetric); trade-off in closed form."""
    from dplens.accountant import tradeoff

    epsilon0 = 1.0 / event.noise_multiplier
    return PrivacyProfile(
        remove=functools.partial(_laplace_delta, epsilon0=epsilon0),
        description=f"Laplace(noise_multiplier={event.noise_multiplier:g}) exact",
        trade_off_function=functools.partial(tradeoff.laplace_trade_off, epsilon0),
    )


def _finite_delta(epsilons: np.ndarray, *, losses: np.ndarray, probs: np.ndarray) -> np.ndarray:
    # Hockey stick of a finite PLD: Σ p·(1 − e^{ε − L})₊.
    eps = np.asarray(epsilons, dtype=float)
    gap = np.maximum(-np.expm1(eps[..., None] - losses), 0.0)
    return np.sum(probs * gap, axis=-1)


@privacy_profile.register
def _(event: ev.RandomizedResponse) -> PrivacyProfile:
    """k-ary randomized response, exact under its relation (replace-one: δ(ε) = max(0, p_hi − e^ε p_lo); zero-out:
    both orders of P against the uniform response), with the exact trade-off curve of its finite PLD."""
    from dplens.accountant import tradeoff
    from dplens.accountant.finite_pld import randomized_response_directions

    directions = randomized_response_directions(event.epsilon, event.num_values, event.neighboring)
    functions = [functools.partial(_finite_delta, losses=losses, probs=probs) for losses, probs, _ in directions]
    return PrivacyProfile(
        remove=functions[0],
        add=functions[1] if len(functions) > 1 else None,
        description=f"RandomizedResponse(epsilon={event.epsilon:g}, k={event.num_values}, "
        f"{event.neighboring.value}) exact",
        trade_off_function=tradeoff.discrete_trade_off(directions),
    )


@event_pld.register
def _(event: ev.RandomizedResponse, *, neighboring: ev.NeighboringRelation, value_discretization_interval: float):
    """Randomized response's PLD, built here because dp-accounting 0.6's PLDAccountant composes a
    ``RandomizedResponseDpEvent`` once whatever the count (ε = 1.0987 for 3 runs of ε = log 3, not 3.2961)."""
    from dp_accounting.pld import privacy_loss_distribution as dpa_pld

    if neighboring is ev.NeighboringRelation.ADD_OR_REMOVE_ONE:
        raise UnsupportedEventError(
            "randomized response is analysed under replace-one or zero-out adjacency; got neighboring=add_remove"
        )
    k = event.num_values
    return dpa_pld.from_randomized_response(
        noise_parameter=k / (math.exp(event.epsilon) + k - 1),
        num_buckets=k,
        value_discretization_interval=value_discretization_interval,
        neighboring_relation=_dpa_relation(neighboring),
    )
