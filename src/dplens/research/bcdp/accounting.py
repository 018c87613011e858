"""Bayesian Coordinate Differential Privacy (BCDP, seed 002): Proposition 4, Theorem 2 and exact BCDP.

Aliakbarpour, Fallah, Chaudhuri, Courtade, Jordan, "Enhancing Feature-Specific Data Protection via Bayesian
Coordinate Differential Privacy" (seed ``002_3f0980ffdd6d6591.txt``); implementation notes, errata and reference
values in ``research/bcdp.md`` (cited below as "note §…").

Vocabulary (note §0):

- **LDP** (Def. 1): ε-local DP of the whole record.
- **Coordinate DP** (Def. 3, the paper's "CDP", *not* concentrated DP): a vector c ≥ 0 such that changing only
  coordinate i changes every output probability by at most e^{cᵢ}.
- **BCDP** (Def. 4): a vector δ ≥ 0 of *pure* log-odds bounds, one per coordinate, for the pair (prior π,
  mechanism): P{M(x) ∈ R | xᵢ ∈ Sᵢ} ≤ e^{δᵢ} P{M(x) ∈ R | xᵢ ∈ S′ᵢ}, the other coordinates averaged over the
  prior's conditional law. BCDP's δ is **not** the δ of approximate DP.

BCDP does **not** compose (Example 2: δ₁ goes from 0 to ∞ with two copies), but LDP and coordinate DP do (ε's
and c's add). So this module never adds δ vectors: a :class:`CoordinateBudget` holds the pair (ε_LDP, c), budgets
compose with :meth:`CoordinateBudget.compose`, and the BCDP vector is produced only at the end, by Proposition 4
(:meth:`CoordinateBudget.bcdp`, :func:`bcdp_from_coordinate_dp`). This is how the paper's own Theorem 3 argues
(L831: "we divide c by two, rather than dividing δ by two").

The core :class:`~dplens.accountant.compose.Accountant` sees a BCDP release only through its LDP guarantee: the
event :class:`CoordinateDpRelease` is an ε-LDP release (ε-DP under replace-one of the user's record), which the
Accountant composes by basic composition (:meth:`~dplens.accountant.compose.Accountant.pure_epsilon`, through
the ``pure_dp_epsilon()`` hook) and by its RDP / exact routes via the binary randomized-response pair that
dominates every ε-DP pair (Kairouz, Oh, Viswanath 2015, Thm. 2.2). The per-coordinate BCDP δ is not an RDP
quantity; it comes from :func:`coordinate_budget` (a ledger's events → (ε, c)) followed by Proposition 4.

Exact BCDP (:func:`exact_bcdp`) enumerates a small discrete prior and an explicit channel matrix; it is used to
check that Proposition 4 is an upper bound and to reproduce Examples 1 and 2 (note §5.2).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.accountant import conversions
from dplens.accountant import events as ev
from dplens.accountant.plugin_tables import spec_count
from dplens.research.corrdp.accounting import JointDistribution

__all__ = [
    "SPEC_TYPES",
    "BcdpGuarantee",
    "BudgetAllocation",
    "CoordinateBudget",
    "CoordinateDpRelease",
    "ExactBcdp",
    "JointDistribution",
    "bcdp_from_coordinate_dp",
    "compose_channels",
    "coordinate_budget",
    "correlated_mixture_prior",
    "exact_analysis",
    "exact_bcdp",
    "exact_coordinate_dp",
    "exact_ldp",
    "heuristic_zeta",
    "mechanism1_randomized_response_channel",
    "per_coordinate_randomized_response_channel",
    "prior_tv_bounds",
    "theorem2_allocation",
]

#: Tolerance of the comparison c_d ≤ δ̃ᵢ in Theorem 2 (note §6.6: at q = 1, ζ = 1, log(exp(0.3)) > 0.3 in floats).
ALLOCATION_TOLERANCE = 1e-12

# --------------------------------------------------------------------------------------------
# Validation helpers


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name} must be a number; got {value!r}")
    x = float(value)
    if math.isnan(x):
        raise ValueError(f"{name} must not be NaN; got {value!r}")
    return x


def _positive(name: str, value: Any, *, allow_zero: bool = False, allow_inf: bool = False) -> float:
    x = _number(name, value)
    ok = (x >= 0 if allow_zero else x > 0) and (allow_inf or math.isfinite(x))
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        kind = "a number" if allow_inf else "a finite number"
        raise ValueError(f"{name} must be {kind} {bound}; got {value!r}")
    return x


def _unit(name: str, value: Any, *, open_low: bool = False) -> float:
    x = _number(name, value)
    if not ((x > 0 if open_low else x >= 0) and x <= 1):
        raise ValueError(f"{name} must be in {'(0, 1]' if open_low else '[0, 1]'}; got {value!r}")
    return x


def _vector(
    name: str, value: Any, *, allow_inf: bool = False, allow_zero: bool = True, length: int | None = None
) -> np.ndarray:
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a vector of numbers; got {value!r}") from None
    if arr.ndim == 0 and length is not None:
        arr = np.full(length, float(arr))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty vector; got {value!r}")
    if length is not None and arr.size != length:
        raise ValueError(f"{name} must have length {length}; got {value!r}")
    bad = np.isnan(arr) | (arr < 0 if allow_zero else arr <= 0)
    if not allow_inf:
        bad |= ~np.isfinite(arr)
    if np.any(bad):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must hold {'' if allow_inf else 'finite '}numbers {bound}; got {value!r}")
    return arr


def _round_up_array(values: np.ndarray) -> np.ndarray:
    """:func:`conversions.round_up` elementwise (a relative 1e-12 up; ∞ stays ∞)."""
    return np.array([conversions.round_up(float(v)) for v in np.asarray(values, dtype=float).ravel()]).reshape(
        np.shape(values)
    )


def _log1p_q_expm1(q: np.ndarray, s: np.ndarray) -> np.ndarray:
    """log(1 + q(e^s − 1)) for q ∈ [0, 1], s ≥ 0 (∞ allowed), without overflow."""
    q, s = np.broadcast_arrays(np.asarray(q, dtype=float), np.asarray(s, dtype=float))
    out = np.empty(q.shape)
    small = s < 30.0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        out[small] = np.log1p(q[small] * np.expm1(s[small]))
        big = ~small
        # log((1 − q) + q e^s) = logaddexp(log(1 − q), log q + s); q = 0 gives 0, q = 1 gives s.
        out[big] = np.logaddexp(np.log1p(-q[big]), np.log(q[big]) + s[big])
        out[big & (q == 0)] = 0.0
    return out


# --------------------------------------------------------------------------------------------
# Proposition 4: coordinate DP + TV bound ⇒ BCDP


def bcdp_from_coordinate_dp(
    coordinate_dp: Sequence[float] | np.ndarray,
    tv_bounds: float | Sequence[float] | np.ndarray,
    *,
    ldp_epsilon: float | None = None,
) -> np.ndarray:
    """Per-coordinate BCDP δ from a coordinate-DP vector c and prior TV bounds qᵢ (Proposition 4, corrected).

    Proposition 4 (L226–235, proof A.4 L570–622): if M is c-coordinate-DP and the prior satisfies
    TV(π_{x₋ᵢ | xᵢ ∈ Sᵢ}, π_{x₋ᵢ | xᵢ ∈ S′ᵢ}) ≤ qᵢ for all positive-mass Sᵢ, S′ᵢ (eq. 13), then

    1. M is (Σ_{j=1}^{d} c_j)-LDP and δ-BCDP with δᵢ = cᵢ + log(1 + qᵢ e^{Σ_{j≠i} c_j} − qᵢ);
    2. if M is also ε-LDP, it is δ′-BCDP with δ′ᵢ = min{cᵢ + log(1 + qᵢ e^ε − qᵢ), ε}.

    **Erratum** (note §7): part 1 is printed with the LDP level Σ_{i=1}^{n} cᵢ (n is the number of users); the
    sum runs over the d coordinates, Σ_{i=1}^{d} cᵢ. Both parts hold, so this function returns their minimum,
    δᵢ = min{cᵢ + log(1 + qᵢ(e^{min(ε, Σ_{j≠i} c_j)} − 1)), ε} (note §2, [D]); without ``ldp_epsilon`` it is
    part 1. The result is rounded up (relative 1e-12) so that it remains an upper bound.

    Sanity values (note §2, tight for per-coordinate randomized response): q = 0 gives δ = c; q = 1 gives
    δᵢ = Σ_j c_j.

    Args:
        coordinate_dp: c ∈ ℝ^d_{≥0} (finite).
        tv_bounds: qᵢ ∈ [0, 1], a scalar (the same for every coordinate) or one per coordinate. A coordinate
            without a correlation bound takes qᵢ = 1 (always valid).
        ldp_epsilon: an ε-LDP level of M, if known (part 2); ∞ is allowed and means "unknown".

    Returns:
        δ ∈ ℝ^d_{≥0} (rounded up).

    Raises:
        ValueError: on negative / non-finite c, q outside [0, 1] or of the wrong length, ε < 0.
    """
    c = _vector("coordinate_dp", coordinate_dp)
    q = _vector("tv_bounds", tv_bounds, length=c.size)
    if np.any(q > 1):
        raise ValueError(f"tv_bounds must lie in [0, 1]; got {tv_bounds!r}")
    others = c.sum() - c
    if ldp_epsilon is not None:
        eps = _positive("ldp_epsilon", ldp_epsilon, allow_zero=True, allow_inf=True)
        others = np.minimum(others, eps)
    delta = c + _log1p_q_expm1(q, others)
    if ldp_epsilon is not None:
        delta = np.minimum(delta, eps)
    return _round_up_array(delta)


@dataclass(frozen=True, slots=True, kw_only=True)
class BcdpGuarantee:
    """A δ-BCDP guarantee (Def. 4) with the (ε_LDP, c) it was derived from and the TV bounds it assumes.

    ``delta`` is an upper bound on the per-coordinate BCDP of any prior whose TV bounds (eq. 13) are at most
    ``tv_bounds``; ``ldp_epsilon`` is the overall LDP level (an upper bound). Never add two guarantees' δ
    vectors: compose the budgets instead (Example 2).
    """

    delta: tuple[float, ...]
    ldp_epsilon: float
    coordinate_dp: tuple[float, ...]
    tv_bounds: tuple[float, ...]

    def satisfies(self, target: Sequence[float], *, epsilon: float | None = None) -> bool:
        """Whether δᵢ ≤ targetᵢ for every i (and ε_LDP ≤ ``epsilon`` if given), up to a relative 1e-9."""
        t = _vector("target", target, allow_inf=True, length=len(self.delta))
        ok = bool(np.all(np.asarray(self.delta) <= t * (1 + 1e-9) + 1e-15))
        if epsilon is not None:
            ok = ok and self.ldp_epsilon <= _positive("epsilon", epsilon, allow_inf=True) * (1 + 1e-9) + 1e-15
        return ok

    def to_dict(self) -> dict[str, Any]:
        return {
            "delta": list(self.delta),
            "ldp_epsilon": self.ldp_epsilon,
            "coordinate_dp": list(self.coordinate_dp),
            "tv_bounds": list(self.tv_bounds),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinateBudget:
    """The composable part of a BCDP analysis: an LDP level ε and a coordinate-DP vector c (Defs. 1, 3).

    Both compose additively under (adaptive) basic composition, unlike BCDP (Example 2, note §3), so a sequence
    of releases is accounted by adding budgets (:meth:`compose`, :meth:`repeat`) and converted to BCDP once, at
    the end (:meth:`bcdp`, Proposition 4). A c-coordinate-DP mechanism is also (Σc)-LDP (Prop. 4(1),
    corrected sum over d), so the effective LDP level is min(ε, Σc).

    Args:
        coordinate_dp: c ∈ ℝ^d_{≥0}.
        ldp_epsilon: the LDP level; None (default) takes Σc. ∞ is allowed (no LDP guarantee beyond Σc).
    """

    coordinate_dp: tuple[float, ...]
    ldp_epsilon: float | None = None

    def __post_init__(self) -> None:
        c = _vector("coordinate_dp", self.coordinate_dp)
        total = float(c.sum())
        eps = total if self.ldp_epsilon is None else _positive("ldp_epsilon", self.ldp_epsilon, allow_zero=True,
                                                                allow_inf=True)  # fmt: skip
        object.__setattr__(self, "coordinate_dp", tuple(float(v) for v in c))
        object.__setattr__(self, "ldp_epsilon", float(min(eps, total)))

    @property
    def dimension(self) -> int:
        """d, the number of coordinates."""
        return len(self.coordinate_dp)

    def compose(self, other: CoordinateBudget) -> CoordinateBudget:
        """Basic composition: ε's add and c's add componentwise (valid for adaptive composition)."""
        if not isinstance(other, CoordinateBudget):
            raise ValueError(f"other must be a CoordinateBudget; got {other!r}")
        if other.dimension != self.dimension:
            raise ValueError(f"other must have dimension {self.dimension}; got {other.dimension}")
        c = tuple(a + b for a, b in zip(self.coordinate_dp, other.coordinate_dp, strict=True))
        return CoordinateBudget(coordinate_dp=c, ldp_epsilon=self.ldp_epsilon + other.ldp_epsilon)

    def __add__(self, other: CoordinateBudget) -> CoordinateBudget:
        return self.compose(other)

    def repeat(self, count: int) -> CoordinateBudget:
        """``count``-fold basic composition."""
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
            raise ValueError(f"count must be an integer >= 1; got {count!r}")
        return CoordinateBudget(
            coordinate_dp=tuple(count * v for v in self.coordinate_dp), ldp_epsilon=count * self.ldp_epsilon
        )

    def bcdp(self, tv_bounds: float | Sequence[float] | np.ndarray) -> BcdpGuarantee:
        """The BCDP vector of the composed budget for priors with TV bounds ``tv_bounds`` (Proposition 4)."""
        c = np.asarray(self.coordinate_dp)
        q = _vector("tv_bounds", tv_bounds, length=c.size)
        delta = bcdp_from_coordinate_dp(c, q, ldp_epsilon=self.ldp_epsilon)
        return BcdpGuarantee(
            delta=tuple(float(v) for v in delta),
            ldp_epsilon=conversions.round_up(self.ldp_epsilon),
            coordinate_dp=self.coordinate_dp,
            tv_bounds=tuple(float(v) for v in q),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"coordinate_dp": list(self.coordinate_dp), "ldp_epsilon": self.ldp_epsilon}


# --------------------------------------------------------------------------------------------
# The accountant-level event: an ε-LDP release that is also c-coordinate-DP


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinateDpRelease(ev.Event):
    """One user's local release that is c-coordinate-DP (Def. 3) and ε-LDP (Def. 1), e.g. Mechanism 1.

    The core Accountant accounts only for its **LDP** guarantee: ε = min(``ldp_epsilon``, Σc) under replace-one
    of the user's record (an ε-LDP report is ε-DP in the central model, where each user's report reads only
    their own record). Basic composition uses :meth:`pure_dp_epsilon`; the RDP and exact routes use the binary
    randomized-response pair at ε, which dominates every ε-DP pair (Kairouz, Oh, Viswanath 2015, Thm. 2.2), so
    they are upper bounds. The per-coordinate **BCDP** δ is *not* an accountant curve: get it with
    :func:`coordinate_budget` on the ledger and :meth:`CoordinateBudget.bcdp` (Proposition 4).

    Args:
        coordinate_dp: c ∈ ℝ^d_{≥0}, not all zero.
        ldp_epsilon: the LDP level if tighter than Σc (Mechanism 1: c_d); None takes Σc.
    """

    coordinate_dp: tuple[float, ...]
    ldp_epsilon: float | None = None
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.REPLACE_ONE

    def __post_init__(self) -> None:
        c = _vector("coordinate_dp", self.coordinate_dp)
        if not np.any(c > 0):
            raise ValueError(f"coordinate_dp must have a positive entry; got {self.coordinate_dp!r}")
        object.__setattr__(self, "coordinate_dp", tuple(float(v) for v in c))
        if self.ldp_epsilon is not None:
            object.__setattr__(self, "ldp_epsilon", _positive("ldp_epsilon", self.ldp_epsilon))
        if self.neighboring is not ev.NeighboringRelation.REPLACE_ONE:
            raise ValueError(f"neighboring must be REPLACE_ONE (LDP replaces the record); got {self.neighboring!r}")

    def budget(self) -> CoordinateBudget:
        """The (ε_LDP, c) pair of one run."""
        return CoordinateBudget(coordinate_dp=self.coordinate_dp, ldp_epsilon=self.ldp_epsilon)

    def pure_dp_epsilon(self) -> float:
        """ε of the ε-LDP guarantee: min(ldp_epsilon, Σc) (Prop. 4(1), corrected sum over d)."""
        return self.budget().ldp_epsilon  # type: ignore[return-value]


def _dominating_rr(event: CoordinateDpRelease) -> ev.RandomizedResponse:
    return ev.RandomizedResponse(epsilon=event.pure_dp_epsilon(), num_values=2)


def coordinate_dp_release_rdp_curve(event: CoordinateDpRelease):
    """RDP of an ε-LDP release: that of binary randomized response at ε (the dominating ε-DP pair)."""
    from dplens.accountant import rdp

    curve = rdp.rdp_curve(_dominating_rr(event))
    return curve


def coordinate_dp_release_profile(event: CoordinateDpRelease):
    """Privacy profile of an ε-LDP release: binary randomized response at ε (an upper bound, KOV 2015 Thm 2.2)."""
    from dplens.accountant import pld
    from dplens.accountant.curves import PrivacyProfile

    rr = pld.privacy_profile(_dominating_rr(event))
    return PrivacyProfile(
        remove=rr.remove,
        add=rr.add,
        epsilon_for_delta=rr.epsilon_for_delta,
        description=f"CoordinateDpRelease: {event.pure_dp_epsilon():g}-LDP, dominated by binary randomized response",
    )


def coordinate_budget(source: Any) -> CoordinateBudget:
    """The composed (ε_LDP, c) of a ledger of :class:`CoordinateDpRelease` events (basic composition).

    Args:
        source: a :class:`CoordinateDpRelease`, a ``SelfComposed`` / ``Composed`` of them, a
            :class:`CoordinateBudget`, or an :class:`~dplens.accountant.compose.Accountant` whose ledger holds
            only such events.

    Returns:
        The total budget; convert it with :meth:`CoordinateBudget.bcdp`.

    Raises:
        ValueError: on an event without a coordinate-DP guarantee, dimensions that differ, or an empty ledger.
    """
    if isinstance(source, CoordinateBudget):
        return source
    if isinstance(source, CoordinateDpRelease):
        return source.budget()
    if isinstance(source, ev.SelfComposed):
        return coordinate_budget(source.event).repeat(source.count)
    if isinstance(source, ev.Composed):
        parts = [coordinate_budget(e) for e in source.events]
        return functools.reduce(CoordinateBudget.compose, parts)
    ledger = getattr(source, "ledger", None)
    if ledger is not None and not isinstance(source, ev.Event):
        if not ledger:
            raise ValueError(f"source ledger is empty; got {source!r}")
        parts = [coordinate_budget(e).repeat(n) for e, n in ledger if n > 0]
        return functools.reduce(CoordinateBudget.compose, parts)
    raise ValueError(f"source has no coordinate-DP guarantee (expected CoordinateDpRelease events); got {source!r}")


# --------------------------------------------------------------------------------------------
# Theorem 2: allocation of c from the targets (δ, ε) and the correlation bound q


def heuristic_zeta(q: float) -> float:
    """The experiments' choice ζ = (1 + q)/2 (App. B.3, L694); gives c = δ̃₁·1 (min-δ LDP) at q = 1."""
    return 0.5 * (1.0 + _unit("q", q))


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetAllocation:
    """The coordinate-DP vector of Mechanism 1 chosen by Theorem 2 (eq. 16).

    ``order[k]`` is the original index of the coordinate processed k-th (δ sorted non-decreasing, stable);
    ``c_sorted`` is c in that processing order (non-decreasing, as Mechanism 1 requires) and ``coordinate_dp``
    the same values in the original coordinate order. ``ldp_epsilon`` = c_d.
    """

    delta: tuple[float, ...]
    epsilon: float
    q: float
    zeta: float
    order: tuple[int, ...]
    c_sorted: tuple[float, ...]

    @property
    def coordinate_dp(self) -> tuple[float, ...]:
        """c in the original coordinate order."""
        out = [0.0] * len(self.order)
        for pos, idx in enumerate(self.order):
            out[idx] = self.c_sorted[pos]
        return tuple(out)

    @property
    def ldp_epsilon(self) -> float:
        """c_d, the LDP level of Mechanism 1 (c_d ≤ δ̃_d ≤ ε)."""
        return self.c_sorted[-1]

    def budget(self) -> CoordinateBudget:
        """(c_d, c) in the original coordinate order."""
        return CoordinateBudget(coordinate_dp=self.coordinate_dp, ldp_epsilon=self.ldp_epsilon)

    def tv_bounds(self) -> tuple[float, ...]:
        """The TV bounds Theorem 2 assumes, original order: q, except 1 for the coordinate processed last.

        Assumption 1 exempts the last coordinate (L261); qᵢ = 1 is always a valid bound.
        """
        out = [self.q] * len(self.order)
        out[self.order[-1]] = 1.0
        return tuple(out)

    def guarantee(self) -> BcdpGuarantee:
        """The BCDP guarantee of Mechanism 1 with this c, re-derived with Proposition 4 (≤ δ̃ up to rounding)."""
        return self.budget().bcdp(self.tv_bounds())

    def to_dict(self) -> dict[str, Any]:
        return {
            "delta": list(self.delta),
            "epsilon": self.epsilon,
            "q": self.q,
            "zeta": self.zeta,
            "order": list(self.order),
            "c_sorted": list(self.c_sorted),
            "coordinate_dp": list(self.coordinate_dp),
            "ldp_epsilon": self.ldp_epsilon,
        }


def theorem2_allocation(
    delta: Sequence[float] | np.ndarray,
    *,
    epsilon: float,
    q: float,
    zeta: float | None = None,
    tolerance: float = ALLOCATION_TOLERANCE,
) -> BudgetAllocation:
    """The coordinate-DP budget c of Mechanism 1 for targets δ-BCDP and ε-LDP (Theorem 2, eq. 16, L273–279).

    With δ sorted non-decreasing, δ̃ᵢ = min(δᵢ, ε) and ζ ∈ (0, 1]:

        c_d = min{ log((e^{ζ δ̃₁} + q − 1)/q), δ̃_d }      (stable form log1p(expm1(ζ δ̃₁)/q); q = 0 → +∞)
        cᵢ  = c_d                                if c_d ≤ δ̃ᵢ
        cᵢ  = δ̃ᵢ − log(1 + q e^{c_d} − q)         otherwise                         (i < d)

    Mechanism 1 with this c is c-coordinate-DP and c_d-LDP, hence δ-BCDP by Prop. 3 (coordinates with
    c_d ≤ δ̃ᵢ) and Prop. 4(2) with ε := c_d (the others), under Assumption 1 (TV ≤ q for every coordinate but the
    last processed one).

    Numerics (note §6.6): the comparison c_d ≤ δ̃ᵢ is made with ``tolerance`` (relative): if c_d exceeds some δ̃ᵢ
    by float error only (q = 1, ζ = 1: log(exp(0.3)) > 0.3), c_d is lowered to that δ̃ᵢ, which keeps every
    constraint (lowering c_d only raises the cᵢ of the "otherwise" branch, which still meets its target exactly),
    instead of producing c₁ = −0.0. Every cᵢ is clamped at 0. δ may be given in any order; it is sorted
    (stably) and :attr:`BudgetAllocation.order` records the permutation (note §6.5).

    Args:
        delta: BCDP targets δᵢ > 0 (∞ allowed: no coordinate-level requirement).
        epsilon: the overall LDP target ε > 0.
        q: the TV bound of Assumption 1, in [0, 1].
        zeta: ζ ∈ (0, 1]; None takes the experiments' heuristic (1 + q)/2 (:func:`heuristic_zeta`). ζ = 1 with
            q < 1 gives c₁ = 0 (coordinate 1 gets no information; note §7).
        tolerance: relative tolerance of the comparison c_d ≤ δ̃ᵢ.

    Returns:
        The allocation (c, order, and its re-derived guarantee via :meth:`BudgetAllocation.guarantee`).

    Raises:
        ValueError: on δᵢ ≤ 0, ε ≤ 0, q ∉ [0, 1], ζ ∉ (0, 1], a negative tolerance.
    """
    d_in = _vector("delta", delta, allow_inf=True, allow_zero=False)
    eps = _positive("epsilon", epsilon)
    q = _unit("q", q)
    zeta = heuristic_zeta(q) if zeta is None else _unit("zeta", zeta, open_low=True)
    tol = _positive("tolerance", tolerance, allow_zero=True)
    order = np.argsort(d_in, kind="stable")
    dt = np.minimum(d_in[order], eps)
    first = math.inf if q == 0 else math.log1p(math.expm1(zeta * dt[0]) / q)
    c_d = min(first, float(dt[-1]))
    # c_d "equal" to some δ̃ᵢ up to float error: snap it down to the smallest such δ̃ᵢ (sound, see docstring).
    near = (c_d > dt) & (c_d <= dt * (1 + tol))
    if np.any(near):
        c_d = float(dt[near].min())
    penalty = _log1p_q_expm1(np.array(q), np.array(c_d)).item()
    c = np.where(c_d <= dt, c_d, dt - penalty)
    c[-1] = c_d
    c = np.maximum(c, 0.0)
    return BudgetAllocation(
        delta=tuple(float(v) for v in d_in),
        epsilon=eps,
        q=q,
        zeta=zeta,
        order=tuple(int(i) for i in order),
        c_sorted=tuple(float(v) for v in c),
    )


# --------------------------------------------------------------------------------------------
# Exact BCDP, coordinate DP, LDP and TV bounds for small discrete priors and explicit channels


def _check_channel(channel: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A channel μ_x(y) as an array (*input_shape, num_outputs), rows summing to 1."""
    try:
        arr = np.array(channel, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"channel must be a numeric array; got {channel!r}") from None
    if arr.ndim < 2:
        raise ValueError(f"channel must have input axes and one output axis; got shape {arr.shape!r}")
    if shape is not None and arr.shape[:-1] != shape:
        raise ValueError(f"channel must have shape {shape!r} + (num_outputs,); got {arr.shape!r}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"channel must hold finite probabilities >= 0; got {channel!r}")
    sums = arr.sum(axis=-1)
    if np.any(np.abs(sums - 1.0) > 1e-9):
        raise ValueError(f"channel rows must sum to 1; got row sums in [{sums.min()!r}, {sums.max()!r}]")
    return arr


def _max_log_ratio(p: np.ndarray) -> float:
    """max over rows a, b and columns y of log p[a, y] − log p[b, y]; ∞ if p[a, y] > 0 = p[b, y]."""
    positive = p > 0
    # a column that is positive in one row and zero in another makes the ratio infinite
    if np.any(positive.any(axis=0) & ~positive.all(axis=0)):
        return math.inf
    cols = positive.all(axis=0)
    if not np.any(cols):
        return 0.0
    logp = np.log(p[:, cols])
    return float(max(0.0, (logp.max(axis=0) - logp.min(axis=0)).max()))


def exact_bcdp(prior: JointDistribution, channel: Any) -> np.ndarray:
    """Exact BCDP δ (Def. 4) of a discrete prior and an explicit channel, by enumeration (note §5.2(a)).

    δᵢ = max over values s, s′ of xᵢ with positive prior mass and outputs y of log[P(y | xᵢ = s)/P(y | xᵢ = s′)],
    P(y | xᵢ = s) = Σ_{x: xᵢ = s} π(x) μ_x(y) / π(xᵢ = s) (eq. 9). Singletons suffice for both R and Sᵢ: a ratio
    of sums is at most the largest ratio, and set conditionals are mixtures of singleton ones. The value is ∞ if
    some y has positive mass under one value and zero mass under another. Zeros are exact (sums of non-negative
    products), so no threshold is used.

    Args:
        prior: π on 𝒳 = 𝒳₁ × … × 𝒳_d (a :class:`JointDistribution`, one axis per coordinate).
        channel: μ_x(y) with shape ``prior.table.shape + (num_outputs,)``.

    Returns:
        δ ∈ [0, ∞]^d (not rounded: exact up to float error in the logarithms).
    """
    if not isinstance(prior, JointDistribution):
        raise ValueError(f"prior must be a JointDistribution; got {prior!r}")
    mu = _check_channel(channel, prior.table.shape)
    joint = prior.table[..., None] * mu
    d = prior.num_features
    out = np.empty(d)
    for i in range(d):
        others = tuple(a for a in range(d) if a != i)
        table = joint.sum(axis=others) if others else joint  # (k_i, num_outputs)
        mass = prior.table.sum(axis=others) if others else prior.table
        keep = mass > 0
        out[i] = _max_log_ratio(table[keep] / mass[keep, None])
    return out


def exact_coordinate_dp(channel: Any) -> np.ndarray:
    """Exact coordinate-DP vector (Def. 3): cᵢ = max over x, x′ differing only in xᵢ of the log-ratio of μ.

    Taken over the whole input space (Def. 3 quantifies over all x, not only the prior's support).
    """
    mu = _check_channel(channel)
    d = mu.ndim - 1
    out = np.empty(d)
    for i in range(d):
        moved = np.moveaxis(mu, i, 0)
        rows = moved.reshape(moved.shape[0], -1, moved.shape[-1])  # (k_i, rest, outputs)
        out[i] = max(_max_log_ratio(rows[:, r, :]) for r in range(rows.shape[1]))
    return out


def exact_ldp(channel: Any) -> float:
    """Exact LDP level (Def. 1) of an explicit channel: max over all inputs x, x′ and outputs of the log-ratio."""
    mu = _check_channel(channel)
    return _max_log_ratio(mu.reshape(-1, mu.shape[-1]))


def prior_tv_bounds(prior: JointDistribution) -> np.ndarray:
    """qᵢ = max over values s, s′ of xᵢ (positive mass) of TV(π_{x₋ᵢ|xᵢ=s}, π_{x₋ᵢ|xᵢ=s′}) (eq. 13).

    For discrete coordinates the sup over positive-mass sets in eq. (13) is attained at singletons (set
    conditionals are mixtures of point conditionals and TV is jointly convex; note §2 [D]).
    """
    if not isinstance(prior, JointDistribution):
        raise ValueError(f"prior must be a JointDistribution; got {prior!r}")
    d = prior.num_features
    out = np.zeros(d)
    for i in range(d):
        moved = np.moveaxis(prior.table, i, 0).reshape(prior.table.shape[i], -1)
        mass = moved.sum(axis=1)
        cond = moved[mass > 0] / mass[mass > 0, None]
        if cond.shape[0] > 1:
            diffs = 0.5 * np.abs(cond[:, None, :] - cond[None, :, :]).sum(axis=-1)
            out[i] = min(1.0, float(diffs.max()))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ExactBcdp:
    """Exact privacy quantities of (prior, channel): BCDP δ, coordinate DP c, LDP ε, prior TV bounds q."""

    delta: tuple[float, ...]
    coordinate_dp: tuple[float, ...]
    ldp_epsilon: float
    tv_bounds: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "delta": list(self.delta),
            "coordinate_dp": list(self.coordinate_dp),
            "ldp_epsilon": self.ldp_epsilon,
            "tv_bounds": list(self.tv_bounds),
        }


def exact_analysis(prior: JointDistribution, channel: Any) -> ExactBcdp:
    """:func:`exact_bcdp`, :func:`exact_coordinate_dp`, :func:`exact_ldp` and :func:`prior_tv_bounds` together."""
    return ExactBcdp(
        delta=tuple(float(v) for v in exact_bcdp(prior, channel)),
        coordinate_dp=tuple(float(v) for v in exact_coordinate_dp(channel)),
        ldp_epsilon=exact_ldp(channel),
        tv_bounds=tuple(float(v) for v in prior_tv_bounds(prior)),
    )


def compose_channels(*channels: Any) -> np.ndarray:
    """Independent runs of several channels on the same input: outputs are tuples (flattened, C order)."""
    if not channels:
        raise ValueError("channels must hold at least one channel; got none")
    mats = [_check_channel(ch) for ch in channels]
    shape = mats[0].shape[:-1]
    if any(m.shape[:-1] != shape for m in mats):
        raise ValueError(f"channels must share the input shape {shape!r}; got {[m.shape for m in mats]!r}")
    out = mats[0]
    for m in mats[1:]:
        out = (out[..., :, None] * m[..., None, :]).reshape(*shape, -1)
    return out


def correlated_mixture_prior(dimension: int, q: float) -> JointDistribution:
    """The experiments' prior on {0, 1}^d (eqs. 57–59): all coordinates equal to Z ~ Bern(½) w.p. q, else i.i.d.

    TV(π_{x₋ᵢ|xᵢ=1}, π_{x₋ᵢ|xᵢ=0}) = q for every i (note §5.1).
    """
    if isinstance(dimension, bool) or not isinstance(dimension, int | np.integer) or dimension < 1:
        raise ValueError(f"dimension must be an integer >= 1; got {dimension!r}")
    q = _unit("q", q)
    table = np.full((2,) * int(dimension), (1 - q) * 0.5**dimension)
    table[(0,) * dimension] += 0.5 * q
    table[(1,) * dimension] += 0.5 * q
    return JointDistribution(table)


def _randomized_response(num_values: int, epsilon: float) -> np.ndarray:
    """k-ary randomized response matrix: the true value w.p. e^ε/(e^ε + k − 1)."""
    if epsilon == 0:
        return np.full((num_values, num_values), 1.0 / num_values)
    # divide through by e^ε to stay finite for large ε
    other = 1.0 / (1.0 + (num_values - 1) * math.exp(-epsilon)) * math.exp(-epsilon)
    keep = 1.0 / (1.0 + (num_values - 1) * math.exp(-epsilon))
    mat = np.full((num_values, num_values), other)
    np.fill_diagonal(mat, keep)
    return mat


def _num_values(num_values: int | Sequence[int], d: int) -> tuple[int, ...]:
    vals = (num_values,) * d if isinstance(num_values, int | np.integer) else tuple(num_values)
    if len(vals) != d or any(isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 2 for k in vals):
        raise ValueError(f"num_values must be {d} integers >= 2; got {num_values!r}")
    return tuple(int(k) for k in vals)


def per_coordinate_randomized_response_channel(
    coordinate_dp: Sequence[float] | np.ndarray, *, num_values: int | Sequence[int] = 2
) -> np.ndarray:
    """Independent kᵢ-ary randomized response on each coordinate with budget cᵢ (note §5.2(b)).

    Exactly c-coordinate-DP and (Σc)-LDP, so Proposition 4(1) with q = 0 or q = 1 is tight for it on the
    correlated-mixture prior.

    Returns:
        The channel, shape (k₁, …, k_d, k₁·…·k_d).
    """
    c = _vector("coordinate_dp", coordinate_dp)
    ks = _num_values(num_values, c.size)
    mats = [_randomized_response(k, float(ci)) for k, ci in zip(ks, c, strict=True)]
    # Kronecker product over coordinates: inputs and outputs both in C order
    out = functools.reduce(np.kron, mats)
    return out.reshape(*ks, -1)


def mechanism1_randomized_response_channel(
    c_sorted: Sequence[float] | np.ndarray, *, num_values: int | Sequence[int] = 2
) -> np.ndarray:
    """Mechanism 1's query structure with k-ary randomized response as the black-box M_LDP (note §5.2(c)).

    Query k (k = 1 … d) releases the block x_{k:d} through randomized response over all its values with budget
    c_k − c_{k−1} (queries with a zero increment are skipped). The privacy proof of Theorem 2 (L743–759) is
    black-box in M_LDP, so this channel is c-coordinate-DP and c_d-LDP exactly and allows an exact BCDP check of
    the Theorem-2 allocation.

    Args:
        c_sorted: non-decreasing c (processing order = coordinate order).
        num_values: values per coordinate.

    Returns:
        The channel over the joint output of all queries, shape (k₁, …, k_d, num_outputs).
    """
    c = _vector("c_sorted", c_sorted)
    if np.any(np.diff(c) < 0):
        raise ValueError(f"c_sorted must be non-decreasing; got {c_sorted!r}")
    ks = _num_values(num_values, c.size)
    d = c.size
    increments = np.diff(np.concatenate([[0.0], c]))
    parts = []
    for k in range(d):
        if increments[k] <= 0:
            continue
        block = math.prod(ks[k:])
        rr = _randomized_response(block, float(increments[k]))
        # input x ↦ row of its block x_{k:d} (C-order flat index of the trailing coordinates)
        idx = np.array([np.ravel_multi_index(x[k:], ks[k:]) for x in itertools.product(*map(range, ks))])
        parts.append(rr[idx].reshape(*ks, block))
    if not parts:
        raise ValueError(f"c_sorted must have a positive entry; got {c_sorted!r}")
    return compose_channels(*parts)


# --------------------------------------------------------------------------------------------
# Spec types and interpreter registration


def _check_spec_keys(table: dict, allowed: set[str], required: set[str]) -> None:
    extra = set(table) - allowed - {"type"}
    if extra:
        raise ValueError(f"unknown key(s) {sorted(extra)!r}; allowed: {sorted(allowed)!r}")
    missing = required - set(table)
    if missing:
        raise ValueError(f"{sorted(missing)[0]} is required; got table keys {sorted(table)!r}")


def _spec_vector(table: dict, key: str) -> tuple[float, ...]:
    value = table[key]
    if (
        not isinstance(value, list)
        or not value
        or any(isinstance(v, bool) or not isinstance(v, int | float) for v in value)
    ):
        raise ValueError(f"{key} must be a non-empty list of numbers; got {value!r}")
    return tuple(float(v) for v in value)


def _spec_float(table: dict, key: str) -> float:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number; got {value!r}")
    return float(value)


def _build_bcdp_mean(table: dict) -> ev.Event:
    """``bcdp_mean``: Mechanism 1 with the Theorem-2 budget: ``delta`` (list), ``epsilon``, ``q``; optional
    ``zeta`` (default (1+q)/2), ``count``. The Accountant sees its c_d-LDP guarantee only."""
    _check_spec_keys(table, {"delta", "epsilon", "q", "zeta", "count"}, {"delta", "epsilon", "q"})
    zeta = _spec_float(table, "zeta") if "zeta" in table else None
    alloc = theorem2_allocation(
        _spec_vector(table, "delta"), epsilon=_spec_float(table, "epsilon"), q=_spec_float(table, "q"), zeta=zeta
    )
    event = CoordinateDpRelease(coordinate_dp=alloc.coordinate_dp, ldp_epsilon=alloc.ldp_epsilon)
    return spec_count(table, event)


def _build_coordinate_dp(table: dict) -> ev.Event:
    """``coordinate_dp_release``: ``coordinate_dp`` (list c); optional ``ldp_epsilon`` (default Σc), ``count``."""
    _check_spec_keys(table, {"coordinate_dp", "ldp_epsilon", "count"}, {"coordinate_dp"})
    eps = _spec_float(table, "ldp_epsilon") if "ldp_epsilon" in table else None
    event = CoordinateDpRelease(coordinate_dp=_spec_vector(table, "coordinate_dp"), ldp_epsilon=eps)
    return spec_count(table, event)


SPEC_TYPES = {"bcdp_mean": _build_bcdp_mean, "coordinate_dp_release": _build_coordinate_dp}


def _register_interpreters() -> None:
    from dplens.accountant import pld, rdp

    rdp.rdp_curve.register(CoordinateDpRelease)(coordinate_dp_release_rdp_curve)
    pld.privacy_profile.register(CoordinateDpRelease)(coordinate_dp_release_profile)


_register_interpreters()
