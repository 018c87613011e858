"""dplens's own privacy-loss-distribution (PLD) engine: certified ε brackets, on numpy alone.

Every event's privacy-loss distribution (PLD) is discretised twice on one grid of interval Δ:

- **pessimistically** (the upper end): each bucket [a, b] of privacy-loss values is *split* between its two end
  points so that both its P-mass and its Q-mass are kept. The split pair post-processes to the true one (merge the
  two points back), so its hockey-stick curve lies above the true one; it equals the true curve at every bucket
  end and is linear in e^ε in between, i.e. it is the connect-the-dots PLD of Doroshenko, Ghazi, Kamath, Kumar and
  Manurangsi (PETS 2022, arXiv 2207.04380, Section 3, Theorem 3.3). Mass beyond the top of the grid is an atom at
  +∞ (counted in δ in full); mass below the bottom moves up to it.
- **optimistically** (the lower end): consecutive cells of privacy-loss values are *merged* into buckets, and each
  bucket becomes one atom. Merging is a post-processing, so by the data-processing inequality for the hockey-stick
  divergence the merged pair's curve lies below the true one (the "optimistic privacy buckets" of Meiser and
  Mohammadi, CCS 2018). The atoms must sit on the grid, and moving one down to the grid point below it (valid:
  δ(ε) = E[(1 − e^{ε − L})₊] is non-decreasing in L) would cost up to Δ per step — linear in Δ, hopeless over
  thousands of steps. So the buckets are *inscribed*: in the plane (u, Ψ(u)), Ψ(u) = the P-mass below the
  Q-quantile u, the true pair is a convex curve and a PLD with atoms on grid points a convex polygon with slopes
  e^{kΔ}; the polygon's pair is dominated by the true one when the polygon lies on or above Ψ (then every
  hockey-stick divergence is smaller), which it does when its vertices do. A sweep over the cells closes each
  bucket before its vertex would fall below Ψ, keeping every atom exactly on a grid point
  (:func:`_sweep`); only the last bucket and the mass beyond the grid are moved down.

Dominance is kept by composition (compose the post-processings), so the composed pessimistic PLD gives an upper
bound on δ(ε) — hence on ε(δ) — and the composed optimistic one a lower bound: a certified bracket around the exact
ε of the events' dominating pairs. Both errors are O(Δ²) per step in variance (a split or a merge moves no mass on
average in e^{−L}), not O(Δ) in mean, so a grid of 2·10⁻⁴ brackets MNIST DP-SGD (14 063 steps) within 10⁻³.

Composition is done in the Fourier domain on the composed window only (Koskela, Jälkö, Honkela, AISTATS 2020,
arXiv 2006.07134, Section 4): each distinct event is transformed once, raised to its count by repeated squaring, the
spectra are multiplied and one inverse transform gives the composed PMF. The window is sized by Chernoff bounds on
the exact moment-generating functions of the discretised PLDs; the mass the circular convolution wraps into the
window is bounded the same way and paid for (added to the upper δ, subtracted from the lower δ), and so is a
floating-point bound on the transforms (componentwise FFT error c·u·log₂N·‖a‖₁, Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., Section 24.1, amplified by each factor's power). Every use of a composed PMF weighs
it with weights in [0, 1] non-decreasing in the loss, so the bound is on the error's tail sums, a sum over
frequencies weighted by 1/(N·sin(πk/N)) (:func:`_compose_kind`); where it matters (low frequencies of factors
run 10⁴ times and more) the powers are recomputed accurately there (:func:`_accurate_spectrum`).

Events run many times are composed on a grid of their own first (:func:`_refinement_levels`): each split or merge
costs O(Δ²) in variance, so n runs of an event cost n of them, and an event whose loss fits in a few intervals (a
subsampled step with q = 10⁻⁴) costs up to O(Δ) each. Such an event's runs are composed on a grid 2^j times finer
(its own window is narrow), then moved onto the shared grid once: split (pessimistic, :func:`_coarse_pessimistic`)
or merged by the same inscribed sweep (optimistic, :func:`_coarse_optimistic`), with the floating-point and window
errors of that composition carried along (:attr:`GridPmf.error`). A ledger of many distinct such events (a budget
ledger's releases) then needs a shared grid 10–100 times coarser for the same bracket.

Add/remove adjacency is asymmetric for subsampled mechanisms: the remove direction (P = M(D), Q = M(D′), D′ = D
minus a record) and the add direction (the reverse pair) are composed separately and the worse one is reported,
as in dp-accounting.

Extension point: :func:`loss_distribution` (``functools.singledispatch``) maps an event and a :class:`LossGrid` to
its discretised PLDs (:class:`EventPld`); :func:`discretise` does the work for any :class:`PrivacyLoss` (the CDFs
of the privacy loss under P and Q, plus atoms), so a new event type registers a few lines::

    @loss_distribution.register
    def _(event: MyEvent, grid: LossGrid) -> EventPld:
        return EventPld(remove=discretise(PrivacyLoss(masses=..., truncation=..., atoms=...), grid))

Plug-in events can also join without a discretisation of their own, by declaring what they are: ``gdp_mu()`` (exactly
μ-GDP: composed as a Gaussian) or ``standard_event()`` (an equivalent standard ledger, e.g. feature-DP SGD). An event
the engine does not model raises :class:`~dplens.accountant.rdp.UnsupportedEventError`; the PLD route then falls
back to dp-accounting's engine (:mod:`dplens.accountant.pld`).
"""

from __future__ import annotations

import contextvars
import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from dplens.accountant import conversions
from dplens.accountant import events as ev
from dplens.accountant.rdp import UnsupportedEventError

__all__ = [
    "Bracket",
    "ComposedPld",
    "EventPld",
    "GridPmf",
    "LossGrid",
    "LossPmfs",
    "PrivacyLoss",
    "WindowTooLargeError",
    "compose",
    "delta_bracket",
    "discretise",
    "epsilon_bracket",
    "loss_distribution",
    "normal_tails",
    "supports",
]

_SMALLEST_SUBNORMAL = 2.0**-1074  # the spacing of doubles below 2⁻¹⁰²²
_UNIT_ROUNDOFF = 2.0**-53
_SQRT_HALF = math.sqrt(0.5)
_erfc = np.frompyfunc(math.erfc, 1, 1)

#: Continuous mass truncated at each end of one event's PLD (per direction): beyond the top it is an atom at +∞.
DEFAULT_TAIL_MASS = 1e-22
#: Finite mass allowed outside the composed window at each end (bounded by Chernoff and paid for in δ).
DEFAULT_WINDOW_TAIL = 1e-18
#: Floating-point error bound (in δ) below which a composition spends no effort on tightening it (see
#: :func:`_compose_kind`); the bound is paid for in δ whatever it is.
DEFAULT_PRECISION = 1e-9
#: The floating-point error (in δ) that one run of the event being discretised may carry: its share of the
#: composition's ``precision``, set by :func:`compose` around each :func:`loss_distribution` call (None outside one).
_EVENT_PRECISION: contextvars.ContextVar[float | None] = contextvars.ContextVar("event_precision", default=None)
#: Coarse buckets span this many grid intervals where the PLD carries little mass (see :func:`discretise`).
COARSE_SPAN = 16
#: Mass at each end of an event's PLD discretised on coarse cells: a cell's error grows with mass × width².
DEFAULT_FINE_MASS = 2.5e-5
#: Largest composed window (grid points) the engine builds: 2²³ points is 64 MB per array.
MAX_WINDOW = 2**23
#: Largest |privacy loss| (nats) the engine's grids may reach: e^loss times a mass must stay a finite double (beyond
#: it exponentials overflow and mass would silently drop out of δ; such ledgers have ε in the hundreds anyway).
MAX_LOSS = 600.0


def _check_loss_range(low: float, high: float, what: str) -> None:
    if not (math.isfinite(low) and math.isfinite(high)) or max(abs(low), abs(high)) > MAX_LOSS:
        raise WindowTooLargeError(
            f"{what} has privacy losses up to {max(abs(low), abs(high)):.4g} nats, beyond the engine's floating-point "
            f"range (|loss| <= {MAX_LOSS:g})"
        )


class WindowTooLargeError(ValueError):
    """A grid would need more than ``MAX_WINDOW`` points (the callers say what to change: the engine knows no flags)."""


def normal_tails(z: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """(Φ(z), Φ(−z)) elementwise, Φ the standard normal CDF; the smaller of the two to full relative precision.

    Φ(−|z|) = ½ erfc(|z|/√2) (``math.erfc``, accurate to a few ulps), the other one is 1 minus it.

    Example:
        >>> lower, upper = normal_tails(np.array([-1.0, 0.0, 8.0]))
        >>> [round(float(v), 6) for v in lower], float(upper[2]) < 1e-15
        ([0.158655, 0.5, 1.0], True)
    """
    z = np.asarray(z, dtype=float)
    small = 0.5 * _erfc(np.abs(z) * _SQRT_HALF).astype(float)
    negative = z < 0
    return np.where(negative, small, 1.0 - small), np.where(negative, 1.0 - small, small)


def normal_quantile_bound(tail: float) -> float:
    """A z with Φ(−z) ≤ ``tail``: z = √(2 log(1/(tail·√(2π)))), since Φ(−z) ≤ φ(z)/z ≤ φ(z) for z ≥ 1."""
    return max(1.0, math.sqrt(2.0 * math.log(1.0 / (tail * math.sqrt(2.0 * math.pi)))))


# --------------------------------------------------------------------------------------------
# Descriptions: the grid, a privacy loss, discretised PMFs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LossGrid:
    """Where PLDs are discretised: grid points k·``interval``; the ledger's neighbouring relation.

    ``tail_mass`` is the continuous mass each event may leave outside its grid at each end (per direction);
    ``fine_mass`` the mass at each end discretised on coarse cells (``COARSE_SPAN`` intervals) instead of fine ones.
    ``refining``: the grid is one round of the adaptive refinement (:func:`epsilon_bracket` without an interval), so an
    event whose own discretisation is costly may make it as coarse as the round's interval warrants (a bracket that
    then misses the tolerance sends the refinement to a finer interval); a fixed interval asked for gets the finest.
    """

    interval: float
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE
    tail_mass: float = DEFAULT_TAIL_MASS
    fine_mass: float = DEFAULT_FINE_MASS
    refining: bool = False

    def __post_init__(self) -> None:
        if not (isinstance(self.interval, int | float) and math.isfinite(self.interval) and self.interval > 0):
            raise ValueError(f"interval must be a finite number > 0; got {self.interval!r}")
        if not (0 < self.tail_mass < 1e-6):
            raise ValueError(f"tail_mass must be in (0, 1e-6); got {self.tail_mass!r}")


Masses = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivacyLoss:
    """One direction of a dominating pair (P, Q) as its privacy loss L = log(dP/dQ)(X), X ~ P.

    Args:
        masses: for sorted loss values l, the *continuous* part's (P(L ≤ l), P(L > l), Q(L ≤ l), Q(L > l)),
            each accurate where it is small (None: no continuous part).
        truncation: (lo, hi) with continuous P-mass ≤ the grid's ``tail_mass`` below lo and above hi; a function of
            that tail mass.
        atoms: point masses (loss, P-mass, Q-mass), a sequence of triples or an (n, 3) array; loss may be +∞
            (P-mass where Q has none).
        alignment: a loss value the grid should pass through (None: the grid is k·Δ). A bounded end of the loss —
            log(1 − q) for a subsampled mechanism's remove direction — must be on the grid, or the inscribed merge
            (:func:`_sweep`) cannot resolve mass between it and the next grid point: with log(1 − q) ∈ (−Δ, 0), every
            polygon with grid slopes e^{kΔ} lying above Ψ is the trivial one (all slopes ≥ Ψ'(0) = 1 − q > e^{−Δ}),
            and the optimistic PMF of one step collapses to an atom at 0 (found at q = 10⁻⁶, Δ = 2·10⁻⁶: the lower
            end of every bracket was 0). The event's grid is then c + kΔ (its PMFs carry the offset c, and
            compositions add offsets exactly).
    """

    masses: Masses | None
    truncation: Callable[[float], tuple[float, float]] | None = None
    atoms: tuple[tuple[float, float, float], ...] | np.ndarray = ()
    alignment: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GridPmf:
    """Point masses ``pmf[i]`` at losses (``start`` + i)·Δ + ``offset``, plus ``infinity_mass`` at +∞.

    ``error`` bounds |Σᵢ wᵢ(``pmf`` − exact)ᵢ| for any weights wᵢ ∈ [0, 1], where exact is the PMF the values stand
    for (nonzero for an event's runs composed on a finer grid in floating point, see :func:`compose`).
    """

    start: int
    pmf: np.ndarray
    infinity_mass: float = 0.0
    offset: float = 0.0
    error: float = 0.0

    def losses(self, interval: float) -> np.ndarray:
        return (self.start + np.arange(self.pmf.size)) * interval + self.offset


@dataclass(frozen=True, slots=True, kw_only=True)
class LossPmfs:
    """One direction of an event on a grid: its pessimistic (upper) and optimistic (lower) PMFs."""

    pessimistic: GridPmf
    optimistic: GridPmf


@dataclass(frozen=True, slots=True, kw_only=True)
class EventPld:
    """An event's discretised PLDs: the remove direction, and the add direction (None: the same, a symmetric pair)."""

    remove: LossPmfs
    add: LossPmfs | None = None


# --------------------------------------------------------------------------------------------
# Discretisation
# --------------------------------------------------------------------------------------------


def _cell_masses(cdf: np.ndarray, sf: np.ndarray) -> np.ndarray:
    """Masses between consecutive points: CDF differences in the lower half, survival differences in the upper
    half, so small masses keep their relative precision in both tails."""
    return np.maximum(np.where(cdf[:-1] < sf[:-1], cdf[1:] - cdf[:-1], sf[:-1] - sf[1:]), 0.0)


def _split(a: np.ndarray, b: np.ndarray, mass_p: np.ndarray, mass_q: np.ndarray, delta: float) -> np.ndarray:
    """The P-mass a bucket [a, b] (grid indices) sends to b when split between its ends keeping its Q-mass.

    A loss l ∈ [a, b] goes to b with probability t(l) = (1 − e^{a − l})/(1 − e^{a − b}), which keeps E[e^{−L}];
    integrated over the bucket, ∫ t dP = (P(B) − e^{a}Q(B))/(1 − e^{a − b}).
    """
    up = (mass_p - np.exp(a * delta) * mass_q) / -np.expm1(-(b - a) * delta)
    return np.clip(up, 0.0, mass_p)


def _merged_index(mass_p: float, mass_q: float, lowest: float, delta: float) -> int:
    """The grid point at or below the merge log(P/Q) of a tail (known to lie at or above ``lowest``)."""
    if mass_q <= 0:
        return math.floor(lowest / delta)
    return math.floor(max(math.log(mass_p) - math.log(mass_q), lowest) / delta)


def _settle(out_k: list[int], out_p: list[float], out_q: list[float], slack: float, delta: float, *, downward: bool):
    """Settle the slack a sweep leaves at its far end, in place (lists in sweep order: the far end is last).

    The polygon must end at (1, 1) with every vertex on or above Ψ. Bottom-up, the slack is taken off the top
    bucket's P-mass; top-down, it is added to the bottom bucket's P-mass. Either way only the vertices after that
    bucket move, and only by the slack they have. If the changed edge breaks convexity it is merged with its
    neighbours until it does not: the merged edge is the chord between two vertices on or above Ψ, so it stays above
    Ψ (Ψ is convex). An edge that no longer has a grid slope is moved down to the grid point below its atom.
    """
    if not out_k or slack <= 0.0:
        return
    out_p[-1] += slack if downward else -slack
    out_p[-1] = max(out_p[-1], 0.0)
    while len(out_k) > 1:
        previous = out_p[-2] / out_q[-2]
        slope = out_p[-1] / out_q[-1] if out_q[-1] > 0 else math.inf
        if (slope <= previous) if downward else (slope >= previous):
            break
        merged_p, merged_q = out_p.pop(), out_q.pop()  # popped first: the edge before it is the last one now
        out_p[-1] += merged_p
        out_q[-1] += merged_q
        out_k.pop()
    if out_p[-1] > 0 and out_q[-1] > 0:
        out_k[-1] = min(out_k[-1], math.floor(math.log(out_p[-1] / out_q[-1]) / delta))


def _sweep(
    bounds: list[float],
    cell_p: list[float],
    cell_q: list[float],
    targets: list[float],
    delta: float,
    *,
    downward: bool = False,
) -> tuple[list[int], list[float], list[float], float]:
    """Merge consecutive cells, from the bottom up, into buckets whose atoms sit *on* grid points.

    In the plane (u, Ψ(u)), Ψ(u) = the P-mass below the Q-quantile u, the true pair is a convex curve from (0, 0) to
    (1, 1) and a PLD with atoms at grid points is a convex polygon with edge slopes e^{kΔ}. The polygon's pair is
    dominated by the true one (each of its hockey-stick divergences is smaller) when the polygon lies on or above Ψ,
    and since Ψ is convex it is enough that its vertices do. Each bucket is given the grid point kΔ just above its
    start and an edge of slope e^{kΔ} over its Q-mass; the *slack* s = polygon − Ψ at the bucket's end grows with
    the cells below kΔ and shrinks with those above, and a bucket is closed before a cell would make s negative. So
    every vertex has s ≥ 0, and buckets of fine cells stay about Δ wide (their merged atom log(P(B)/Q(B)) is within
    O(Δ²) of kΔ: only the loss of spread of a merge remains, no rounding).

    ``bounds[i]`` is cell i's lower end in units of Δ/2 (−∞ allowed), ``targets[i]`` the first even (grid-point)
    bound strictly above it. Returns the buckets' (grid index, P-mass e^{kΔ}Q(B), Q(B)) bottom-up, and the slack
    left at the top.

    ``downward=True`` sweeps from the top down, for a PLD whose mass piles up at a bounded top (the add direction of
    a subsampled mechanism): each bucket gets the grid point just below its start; the slack
    s(c) = P(L ≥ c) − P_polygon(L ≥ c) grows with the cells above the target and shrinks with those below.
    ``bounds[i]`` is then cell i's upper end (∞ allowed), ``targets[i]`` the last even bound strictly below it; cells
    are given bottom-up and swept top-down, and the buckets are returned top-down with the slack left at the bottom.
    """
    out_k: list[int] = []
    out_p: list[float] = []
    out_q: list[float] = []
    slack = 0.0
    target = targets[-1] if downward else targets[0]
    scale = math.exp(target * 0.5 * delta)
    q_acc = 0.0
    cells = zip(bounds, cell_p, cell_q, targets, strict=True)
    for edge, dp, dq, following in reversed(list(cells)) if downward else cells:
        gain = dp - scale * dq if downward else scale * dq - dp
        if (edge <= target if downward else edge >= target) and slack + gain < 0.0:
            # Close the bucket before this cell would make the slack negative (an empty bucket is just retargeted):
            # the cell then lies beyond the new target, where it can only add slack.
            if q_acc > 0.0:
                out_k.append(int(target) // 2)
                out_p.append(scale * q_acc)
                out_q.append(q_acc)
            q_acc = 0.0
            target = following
            scale = math.exp(target * 0.5 * delta)
            gain = dp - scale * dq if downward else scale * dq - dp
        slack += gain
        q_acc += dq
    if q_acc > 0.0:
        out_k.append(int(target) // 2)
        out_p.append(scale * q_acc)
        out_q.append(q_acc)
    return out_k, out_p, out_q, slack


def _optimistic_continuous(
    halves: np.ndarray,
    cell_p: np.ndarray,
    cell_q: np.ndarray,
    below: tuple[float, float],
    above: tuple[float, float],
    delta: float,
    *,
    downward: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The optimistic PMF of a continuous part from its cells (grid indices, P-masses).

    ``halves`` are the cells' ends in units of Δ/2 (fine cells where the mass is, coarse cells in the tails),
    ``below`` / ``above`` the (P, Q) masses beyond them. The cells and the outer mass at the sweep's start are swept
    (:func:`_sweep`, or top-down when the PLD piles up at a bounded top); the outer mass at the far end is
    merged into one atom and moved down to the grid point below it. The slack the sweep leaves at its far end must go
    so that the polygon still ends at (1, 1) with every vertex on or above Ψ: bottom-up it is taken off the top
    bucket's P-mass (lowering it below its grid point, so it moves down to the next: little mass there); top-down it
    is added to the bottom bucket's P-mass (raising it by less than its distance to the next bucket, so it stays at
    its grid point). Either way only the vertices after that bucket move, and only by the slack they have.
    """
    bounds = halves.astype(float)
    if downward:
        tops = np.append(bounds[1:], math.inf)
        p = np.append(cell_p, above[0]).tolist()
        q = np.append(cell_q, above[1]).tolist()
        even = bounds[(bounds % 2) == 0]  # targets: the last even bound strictly below each cell's top
        targets = even[np.maximum(np.searchsorted(even, tops, side="left") - 1, 0)]
        out_k, out_p, out_q, slack = _sweep(tops.tolist(), p, q, targets.tolist(), delta, downward=True)
        _settle(out_k, out_p, out_q, slack, delta, downward=True)
        # The mass below the grid merged into one atom (below the grid's first point), moved down to the grid.
        bottom = int(halves[0]) // 2
        if below[0] > 0 and below[1] > 0:
            bottom = min(bottom, math.floor((math.log(below[0]) - math.log(below[1])) / delta))
        return np.array([*out_k, bottom], dtype=np.int64), np.array([*out_p, below[0]])
    lows = np.insert(bounds[:-1], 0, -math.inf)
    p = np.insert(cell_p, 0, below[0]).tolist()
    q = np.insert(cell_q, 0, below[1]).tolist()
    even = bounds[(bounds % 2) == 0]  # targets: the first even bound strictly above each cell's bottom
    targets = even[np.minimum(np.searchsorted(even, lows, side="right"), even.size - 1)]
    out_k, out_p, out_q, slack = _sweep(lows.tolist(), p, q, targets.tolist(), delta)
    _settle(out_k, out_p, out_q, slack, delta, downward=False)
    top_k = _merged_index(above[0], above[1], halves[-1] * 0.5 * delta, delta)
    return np.array([*out_k, top_k], dtype=np.int64), np.array([*out_p, above[0]])


def discretise(loss: PrivacyLoss, grid: LossGrid) -> LossPmfs:
    """The pessimistic (split) and optimistic (inscribed merge) PMFs of one direction of a privacy loss on ``grid``.

    The continuous part is evaluated at every half grid point of the *region* that holds all but ``grid.fine_mass``
    of its P-mass at each end, and every ``COARSE_SPAN`` grid points in the tails outside it.

    - Pessimistic: each grid interval of the region (and each coarse interval of the tails) is split between its
      ends (:func:`_split`); the mass below the grid moves up to its first point, the mass above it is an atom at +∞.
    - Optimistic: the cells (half intervals in the region, coarse intervals outside) are merged into buckets whose
      atoms sit on grid points (:func:`_optimistic_continuous`); nothing is rounded but the sweep's last bucket and
      the mass beyond the grid at the far end.

    Point masses (``loss.atoms``) are split between their grid neighbours (pessimistic) and moved down to the grid
    point below (optimistic; exact when the atom is on the grid, see :func:`epsilon_bracket`'s alignment).

    Example:
        >>> from dplens.accountant import events as ev
        >>> pmfs = loss_distribution(ev.Laplace(noise_multiplier=1.0), LossGrid(interval=0.25)).remove
        >>> round(float(pmfs.pessimistic.pmf.sum()), 12), round(float(pmfs.optimistic.pmf.sum()), 12)
        (1.0, 1.0)
    """
    delta = grid.interval
    shift = _grid_offset(loss.alignment, delta)
    up_index: list[np.ndarray] = []
    up_mass: list[np.ndarray] = []
    low_index: list[np.ndarray] = []
    low_mass: list[np.ndarray] = []
    infinity = 0.0
    if loss.masses is not None:
        lo, hi = loss.truncation(grid.tail_mass)
        _check_loss_range(lo, hi, "one event")
        lo, hi = lo - shift, hi - shift
        k_lo = math.floor(lo / delta)
        k_hi = max(math.ceil(hi / delta), k_lo + 1)
        if k_hi - k_lo > MAX_WINDOW:
            raise WindowTooLargeError(
                f"the PLD grid would need {k_hi - k_lo} points for one event at interval={delta:g} (limit {MAX_WINDOW})"
            )
        coarse = np.append(np.arange(k_lo, k_hi, COARSE_SPAN, dtype=np.int64), k_hi)
        masses = _shifted_masses(loss.masses, shift)
        cdf_p, sf_p, cdf_q, sf_q = masses(coarse * delta)
        start = int(np.flatnonzero(cdf_p <= grid.fine_mass)[-1]) if cdf_p[0] <= grid.fine_mass else 0
        stops = np.flatnonzero(sf_p <= grid.fine_mass)
        stop = max(int(stops[0]) if stops.size else coarse.size - 1, min(start + 1, coarse.size - 1))
        k_a, k_b = int(coarse[start]), int(coarse[stop])
        region = np.arange(2 * k_a, 2 * k_b + 1)
        c_p, s_p, c_q, s_q = masses(region * (delta / 2.0))
        # Cells: coarse below the region, half intervals in it, coarse above it (ends in units of Δ/2).
        halves = np.concatenate([2 * coarse[:start], region, 2 * coarse[stop + 1 :]])
        cdf_p = np.concatenate([cdf_p[:start], c_p, cdf_p[stop + 1 :]])
        sf_p = np.concatenate([sf_p[:start], s_p, sf_p[stop + 1 :]])
        cdf_q = np.concatenate([cdf_q[:start], c_q, cdf_q[stop + 1 :]])
        sf_q = np.concatenate([sf_q[:start], s_q, sf_q[stop + 1 :]])
        cell_p, cell_q = _cell_masses(cdf_p, sf_p), _cell_masses(cdf_q, sf_q)
        # Pessimistic: split per grid interval (pairs of half cells in the region) and per coarse interval.
        even = np.flatnonzero(halves % 2 == 0)
        sums_p = np.add.reduceat(cell_p, even[:-1])
        sums_q = np.add.reduceat(cell_q, even[:-1])
        a, b = halves[even[:-1]] // 2, halves[even[1:]] // 2
        up = _split(a, b, sums_p, sums_q, delta)
        up_index += [a, b, coarse[:1]]
        up_mass += [sums_p - up, up, cdf_p[:1]]  # the mass below the grid moves up to its first point
        infinity += float(sf_p[-1])  # the mass above the grid counts as an infinite loss
        downward = sf_p[-1] == 0.0 and cdf_p[0] > 0.0
        k, p = _optimistic_continuous(
            halves,
            cell_p,
            cell_q,
            (float(cdf_p[0]), float(cdf_q[0])),
            (float(sf_p[-1]), float(sf_q[-1])),
            delta,
            downward=downward,
        )
        low_index.append(k)
        low_mass.append(p)
    atoms = np.asarray(loss.atoms, dtype=float).reshape(-1, 3)
    values, p_masses = atoms[:, 0], atoms[:, 1]
    infinite = (p_masses > 0) & np.isinf(values)
    exact_infinity = float(p_masses[infinite].sum())  # exact on both sides
    infinity += exact_infinity
    finite = (p_masses > 0) & ~np.isinf(values)
    if finite.any():
        values, p_masses = values[finite] - shift, p_masses[finite]
        k = np.floor(values / delta).astype(np.int64)
        # Split each atom between its grid neighbours, keeping its Q-mass p·e^{−value} (t = 0 on the grid).
        on_grid = k * delta == values
        t = np.where(on_grid, 0.0, -np.expm1(np.where(on_grid, 0.0, k * delta - values)) / -math.expm1(-delta))
        up_index += [k, k + 1]
        up_mass += [p_masses * (1 - t), p_masses * t]
        low_index.append(k)  # moved down to the grid (exact when the atom is on it)
        low_mass.append(p_masses)
    pessimistic = _to_grid_pmf(np.concatenate(up_index), np.concatenate(up_mass), infinity, offset=shift)
    optimistic = _to_grid_pmf(np.concatenate(low_index), np.concatenate(low_mass), exact_infinity, offset=shift)
    return LossPmfs(pessimistic=pessimistic, optimistic=optimistic)


def _grid_offset(alignment: float | None, interval: float) -> float:
    """c ∈ (−Δ/2, Δ/2] with ``alignment`` ∈ c + Δℤ (0 without one)."""
    if alignment is None or not math.isfinite(alignment):
        return 0.0
    return alignment - round(alignment / interval) * interval


def _shifted_masses(masses: Masses, shift: float) -> Masses:
    """The masses of the privacy loss L − c as a pair (P, e^{c}·Q): its likelihood ratio at l is e^{l} again, so the
    split and the inscribed merge run unchanged on the grid kΔ, which is c + kΔ for L (an identity for c = 0)."""
    if shift == 0.0:
        return masses
    scale = math.exp(shift)

    def shifted(losses: np.ndarray):
        cdf_p, sf_p, cdf_q, sf_q = masses(losses + shift)
        return cdf_p, sf_p, cdf_q * scale, sf_q * scale

    return shifted


def _to_grid_pmf(index: np.ndarray, mass: np.ndarray, infinity_mass: float, *, offset: float = 0.0) -> GridPmf:
    if index.size == 0:
        return GridPmf(start=0, pmf=np.zeros(1), infinity_mass=infinity_mass, offset=offset)
    index = np.asarray(index, dtype=np.int64)
    start = int(index.min())
    pmf = np.bincount(index - start, weights=mass)
    nonzero = np.flatnonzero(pmf > 0)
    if nonzero.size == 0:
        return GridPmf(start=0, pmf=np.zeros(1), infinity_mass=infinity_mass, offset=offset)
    return GridPmf(
        start=start + int(nonzero[0]),
        pmf=pmf[nonzero[0] : nonzero[-1] + 1],
        infinity_mass=min(infinity_mass, 1.0),
        offset=offset,
    )


# --------------------------------------------------------------------------------------------
# The standard events
# --------------------------------------------------------------------------------------------


@functools.singledispatch
def loss_distribution(event: ev.Event, grid: LossGrid) -> EventPld:
    """The discretised PLDs of ``event`` on ``grid`` (the extension point: register new event types here).

    Raises:
        UnsupportedEventError: the engine does not model this event (under ``grid.neighboring``).
    """
    raise UnsupportedEventError(f"dplens's PLD engine does not model event {event!r}")


def _gaussian_loss(mu: float) -> PrivacyLoss:
    """L ~ N(μ²/2, μ²) under P and N(−μ²/2, μ²) under Q (the Gaussian mechanism with μ = Δ/σ; DRS 2022 §2.4)."""
    half = mu * mu / 2.0

    def masses(losses: np.ndarray):
        cdf_p, sf_p = normal_tails((losses - half) / mu)
        cdf_q, sf_q = normal_tails((losses + half) / mu)
        return cdf_p, sf_p, cdf_q, sf_q

    def truncation(tail: float) -> tuple[float, float]:
        z = normal_quantile_bound(tail)
        return half - z * mu, half + z * mu

    return PrivacyLoss(masses=masses, truncation=truncation)


def gaussian_pld(mu: float, grid: LossGrid) -> EventPld:
    """μ-GDP (a Gaussian mechanism, or any composition of them: μ² adds up), symmetric."""
    return EventPld(remove=discretise(_gaussian_loss(mu), grid))


@loss_distribution.register
def _(event: ev.Gaussian, grid: LossGrid) -> EventPld:
    # The noise multiplier is relative to the sensitivity under the stated relation, so every relation gives μ = 1/σ.
    return gaussian_pld(1.0 / event.noise_multiplier, grid)


def _laplace_loss(epsilon0: float) -> PrivacyLoss:
    """Lap(0, b) vs Lap(1, b), ε₀ = 1/b: atoms at ε₀ (P ½, Q ½e^{−ε₀}) and −ε₀ (P ½e^{−ε₀}, Q ½); in between
    P(L ≤ l) = ½e^{−ε₀}(e^{(l + ε₀)/2} − 1) and Q(L ≤ l) = ½(1 − e^{−(l + ε₀)/2}) on the continuous part."""
    e0 = epsilon0
    decay = math.exp(-e0)

    def masses(losses: np.ndarray):
        lo = np.clip(losses, -e0, e0)
        cdf_p = 0.5 * decay * np.expm1((lo + e0) / 2.0)
        sf_p = -0.5 * np.expm1((lo - e0) / 2.0)
        cdf_q = -0.5 * np.expm1(-(lo + e0) / 2.0)
        sf_q = 0.5 * decay * np.expm1((e0 - lo) / 2.0)
        return cdf_p, sf_p, cdf_q, sf_q

    return PrivacyLoss(
        masses=masses,
        truncation=lambda tail: (-e0, e0),
        atoms=((e0, 0.5, 0.5 * decay), (-e0, 0.5 * decay, 0.5)),
    )


_LAPLACE_RELATIONS = (ev.NeighboringRelation.ADD_OR_REMOVE_ONE, ev.NeighboringRelation.REPLACE_SPECIAL)


@loss_distribution.register
def _(event: ev.Laplace, grid: LossGrid) -> EventPld:
    """Laplace mechanism, symmetric (the pair reflected about ½ is the reverse pair)."""
    if grid.neighboring not in _LAPLACE_RELATIONS:
        raise UnsupportedEventError(f"the PLD engine models Laplace under add/remove or zero-out; got {event!r}")
    return EventPld(remove=discretise(_laplace_loss(1.0 / event.noise_multiplier), grid))


@loss_distribution.register
def _(event: ev.RandomizedResponse, grid: LossGrid) -> EventPld:
    """k-ary randomized response under replace-one: P = (p_hi, p_lo, …), Q = (p_lo, p_hi, p_lo, …), symmetric."""
    if grid.neighboring is not ev.NeighboringRelation.REPLACE_ONE:
        raise UnsupportedEventError(f"the PLD engine models randomized response under replace-one; got {event!r}")
    eps, k = event.epsilon, event.num_values
    log_p_lo = -float(np.logaddexp(eps, math.log(k - 1)))
    p_lo, p_hi = math.exp(log_p_lo), math.exp(eps + log_p_lo)
    atoms = [(eps, p_hi, p_lo), (-eps, p_lo, p_hi)]
    if k > 2:
        atoms.append((0.0, (k - 2) * p_lo, (k - 2) * p_lo))
    return EventPld(remove=discretise(PrivacyLoss(masses=None, atoms=tuple(atoms)), grid))


def _subsampled_gaussian_losses(q: float, sigma: float) -> tuple[PrivacyLoss, PrivacyLoss]:
    """Both directions of the Poisson-subsampled Gaussian (Mironov, Talwar, Zhang 2019, arXiv 1908.10530, §3.3;
    Zhu, Dong, Wang 2022, arXiv 2106.08567, Theorem 11: the pair below dominates add/remove neighbours).

    remove: P = (1 − q)N(0, σ²) + qN(1, σ²), Q = N(0, σ²); add: the reverse pair. With y(x) = (2x − 1)/(2σ²),
    L_remove = log(1 − q + q e^{y(x)}) (x ~ P) is increasing in x and L_add = −log(1 − q + q e^{y(x)}) (x ~ N(0, σ²))
    decreasing; both invert with x(l) = σ² log1p(expm1(l)/q) + ½ on l > log(1 − q).
    """
    log_1mq = math.log1p(-q)
    var = sigma * sigma

    def x_of(loss: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return var * np.log1p(np.expm1(loss) / q) + 0.5

    def remove_masses(losses: np.ndarray):
        inside = losses > log_1mq
        x = np.where(inside, x_of(np.where(inside, losses, 0.0)), -np.inf)
        below_0, above_0 = normal_tails(x / sigma)
        below_1, above_1 = normal_tails((x - 1.0) / sigma)
        cdf_p = (1 - q) * below_0 + q * below_1
        sf_p = (1 - q) * above_0 + q * above_1
        return cdf_p, sf_p, below_0, above_0

    def add_masses(losses: np.ndarray):
        inside = -losses > log_1mq
        x = np.where(inside, x_of(np.where(inside, -losses, 0.0)), -np.inf)  # L_add ≤ l  ⟺  sample ≥ x(−l)
        below_0, above_0 = normal_tails(x / sigma)
        below_1, above_1 = normal_tails((x - 1.0) / sigma)
        cdf_q = (1 - q) * above_0 + q * above_1
        sf_q = (1 - q) * below_0 + q * below_1
        return above_0, below_0, cdf_q, sf_q

    def loss_at(x: float) -> float:
        return float(np.logaddexp(log_1mq, math.log(q) + (2 * x - 1) / (2 * var)))

    def remove_truncation(tail: float) -> tuple[float, float]:
        # Above x = 1 + zσ both mixture components have tail ≤ Φ(−z); below, L ≥ log(1 − q) always.
        return log_1mq, loss_at(1.0 + normal_quantile_bound(tail) * sigma)

    def add_truncation(tail: float) -> tuple[float, float]:
        return -loss_at(normal_quantile_bound(tail) * sigma), -log_1mq

    return (
        PrivacyLoss(masses=remove_masses, truncation=remove_truncation, alignment=log_1mq),
        PrivacyLoss(masses=add_masses, truncation=add_truncation, alignment=-log_1mq),
    )


def two_mixture_losses(rate: float, sigma: float, high: float, low: float) -> tuple[PrivacyLoss, PrivacyLoss]:
    """Both directions of P = (1 − γ)N(0, σ²) + γN(high, σ²) against Q = (1 − γ)N(0, σ²) + γN(low, σ²), 0 < low < high
    (γ = ``rate``): the remove direction (X ~ P) and the reverse pair.

    The loss ℓ(x) = log(dP/dQ)(x) falls, then rises. ℓ′(x)·σ² = high·s_high(x) − low·s_low(x), s_m the posterior
    weight of N(m, σ²); it vanishes where (high − low)·γ/(1 − γ) = low·e^{−a(x)} − high·e^{−b(x)} (a, b the two
    components' exponents (2mx − m²)/(2σ²)), whose right side falls from +∞ to a negative minimum at x = (high + low)/2
    and then rises to 0⁻, so ℓ′ has one root x*. Hence {ℓ ≤ l} is [x₁(l), x₂(l)] for ℓ(x*) < l < 0 (ℓ → 0⁻ as
    x → −∞) and (−∞, x₂(l)] for l ≥ 0; both ends by bisection on their branch.
    """
    log_rate, log_rest = math.log(rate), math.log1p(-rate)
    var = sigma * sigma

    def loss(x):
        up = np.logaddexp(log_rest, log_rate + (2 * high * x - high * high) / (2 * var))
        down = np.logaddexp(log_rest, log_rate + (2 * low * x - low * low) / (2 * var))
        return up - down

    def slope_sign(x: float) -> float:
        def weight(m: float) -> float:
            return 1.0 / (1.0 + math.exp(min(700.0, log_rest - log_rate - (2 * m * x - m * m) / (2 * var))))

        return high * weight(high) - low * weight(low)

    far_left = -60.0 * sigma - high  # every component's mass below it is below 1e-780: zero in doubles
    left, right = far_left, (high + low) / 2  # the slope is negative at far_left, positive at (high + low)/2
    for _ in range(90):
        middle = (left + right) / 2
        left, right = (middle, right) if slope_sign(middle) < 0 else (left, middle)
    x_star = right
    floor = float(loss(np.array(x_star)))

    def solve(level: np.ndarray, lo: float, hi: float, *, increasing: bool) -> np.ndarray:
        lo_x, hi_x = np.full(level.shape, lo), np.full(level.shape, hi)
        for _ in range(90):
            middle = (lo_x + hi_x) / 2
            above = loss(middle) > level
            to_hi = above if increasing else ~above
            hi_x, lo_x = np.where(to_hi, middle, hi_x), np.where(to_hi, lo_x, middle)
        return (lo_x + hi_x) / 2

    def interval(levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inside = levels > floor
        level = np.where(inside, levels, floor)
        # For x > 0, ℓ(x) ≥ log(γ/2) + (high − low)(2x − high − low)/(2σ²): past ``reach`` ℓ exceeds every level.
        top = float(np.max(np.maximum(level, 0.0))) if level.size else 0.0
        reach = high + 10 * sigma + var * (top + math.log(2 / rate) + 1) / (high - low)
        x2 = solve(level, x_star, reach, increasing=True)
        x1 = np.where(level < 0, solve(np.minimum(level, 0.0), far_left, x_star, increasing=False), -np.inf)
        return np.where(inside, x1, x_star), np.where(inside, x2, x_star)

    def mixture(x: np.ndarray, centre: float) -> tuple[np.ndarray, np.ndarray]:
        below_0, above_0 = normal_tails(x / sigma)
        below_c, above_c = normal_tails((x - centre) / sigma)
        return (1 - rate) * below_0 + rate * below_c, (1 - rate) * above_0 + rate * above_c

    def remove_masses(losses: np.ndarray):
        x1, x2 = interval(np.asarray(losses, dtype=float))
        (cdf_p1, _), (cdf_p2, sf_p2) = mixture(x1, high), mixture(x2, high)
        (cdf_q1, _), (cdf_q2, sf_q2) = mixture(x1, low), mixture(x2, low)
        # P(L ≤ l) = P(x₁ ≤ X ≤ x₂); P(L > l) = P(X < x₁) + P(X > x₂)
        return np.maximum(cdf_p2 - cdf_p1, 0.0), cdf_p1 + sf_p2, np.maximum(cdf_q2 - cdf_q1, 0.0), cdf_q1 + sf_q2

    def add_masses(losses: np.ndarray):
        cdf_p, sf_p, cdf_q, sf_q = remove_masses(-np.asarray(losses, dtype=float))  # L_add ≤ l ⟺ ℓ ≥ −l
        return sf_q, cdf_q, sf_p, cdf_p

    def remove_truncation(tail: float) -> tuple[float, float]:
        # Above x = high + zσ every component has tail ≤ Φ(−z); below, ℓ ≥ ℓ(x*).
        return floor, float(loss(np.array(high + normal_quantile_bound(tail) * sigma)))

    def add_truncation(tail: float) -> tuple[float, float]:
        low_end, high_end = remove_truncation(tail)
        return -high_end, -low_end

    return (
        PrivacyLoss(masses=remove_masses, truncation=remove_truncation, alignment=floor),
        PrivacyLoss(masses=add_masses, truncation=add_truncation, alignment=-floor),
    )


def _mixture_losses(sigma: float, shifts: np.ndarray, probs: np.ndarray) -> tuple[PrivacyLoss, PrivacyLoss]:
    """Both directions of a mixture of Gaussians against one Gaussian (dp-accounting's ``MixtureOfGaussiansDpEvent``;
    Choquette-Choo et al. 2023, arXiv 2310.15526, §4): P = Σᵢ pᵢ N(cᵢ, σ²), Q = N(0, σ²) (remove) and the reverse
    pair (add), for shifts cᵢ ≥ 0. The Poisson-subsampled Gaussian is the case c = (0, 1), p = (1 − q, q).

    L_remove(x) = g(x) = log Σᵢ pᵢ exp((2cᵢx − cᵢ²)/(2σ²)) is convex and increasing, bounded below by
    log Σ_{cᵢ = 0} pᵢ; L_add = −g(x), x ~ N(0, σ²). g has no closed-form inverse for more than one positive shift: it
    is inverted by Newton's method from the right, which for a convex increasing function never crosses the root
    and stops when the step is at the floating-point resolution of x.
    """
    var = sigma * sigma
    log_p = np.log(probs)
    positive = shifts > 0
    zero_mass = float(probs[~positive].sum())
    floor = math.log(zero_mass) if zero_mass > 0 else -math.inf  # inf of g, reached as x → −∞

    def g_and_slope(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        exponents = log_p + (2.0 * shifts * x[:, None] - shifts * shifts) / (2.0 * var)
        top = exponents.max(axis=1, keepdims=True)
        weights = np.exp(exponents - top)
        total = weights.sum(axis=1)
        return top[:, 0] + np.log(total), (weights * shifts).sum(axis=1) / (total * var)

    def x_of(losses: np.ndarray) -> np.ndarray:
        """The x with g(x) = l (−∞ where l ≤ inf g)."""
        losses = np.asarray(losses, dtype=float)
        x = np.full(losses.shape, -np.inf)
        inside = losses > floor
        l_in = losses[inside]
        if l_in.size == 0:
            return x
        # g(x) ≥ log pⱼ + (2cⱼx − cⱼ²)/(2σ²) for each positive shift, so the root lies left of each such line's root.
        starts = var * (l_in[:, None] - log_p[positive]) / shifts[positive] + shifts[positive] / 2.0
        current = starts.min(axis=1)
        active = np.ones(current.shape, dtype=bool)
        for _ in range(400):
            value, slope = g_and_slope(current[active])
            with np.errstate(divide="ignore", invalid="ignore"):
                step = (value - l_in[active]) / slope
            step = np.where(np.isfinite(step), step, 0.0)
            updated = current[active] - step
            converged = np.abs(step) <= 4.0 * np.finfo(float).eps * np.maximum(1.0, np.abs(updated))
            current[active] = updated
            active[np.flatnonzero(active)[converged]] = False
            if not active.any():
                break
        x[inside] = current
        return x

    def component_tails(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(P(X ≤ x), P(X > x)) for the mixture and (Q(X ≤ x), Q(X > x)) for N(0, σ²), each accurate where small."""
        below, above = normal_tails((x[:, None] - shifts) / sigma)
        below_q, above_q = normal_tails(x / sigma)
        return below @ probs, above @ probs, below_q, above_q

    def remove_masses(losses: np.ndarray):
        return component_tails(x_of(losses))  # L_remove ≤ l ⟺ x ≤ x(l)

    def add_masses(losses: np.ndarray):
        below_p, above_p, below_q, above_q = component_tails(x_of(-np.asarray(losses, dtype=float)))
        return above_q, below_q, above_p, below_p  # L_add ≤ l ⟺ x ≥ x(−l); P = N(0, σ²), Q = the mixture

    def loss_at(x: float) -> float:
        return float(g_and_slope(np.array([x]))[0][0])

    def remove_truncation(tail: float) -> tuple[float, float]:
        # Outside [min c − zσ, max c + zσ] every component, hence the mixture, has tail ≤ Φ(−z).
        z = normal_quantile_bound(tail)
        return loss_at(float(shifts.min()) - z * sigma), loss_at(float(shifts.max()) + z * sigma)

    def add_truncation(tail: float) -> tuple[float, float]:
        z = normal_quantile_bound(tail)
        return -loss_at(z * sigma), -loss_at(-z * sigma)

    return (
        PrivacyLoss(masses=remove_masses, truncation=remove_truncation, alignment=floor),
        PrivacyLoss(masses=add_masses, truncation=add_truncation, alignment=-floor),
    )


@loss_distribution.register
def _(event: ev.MixtureOfGaussians, grid: LossGrid) -> EventPld:
    """A mixture of Gaussians against a Gaussian under add/remove: both directions (:func:`_mixture_losses`)."""
    if grid.neighboring is not ev.NeighboringRelation.ADD_OR_REMOVE_ONE:
        raise UnsupportedEventError(f"the PLD engine models mixtures of Gaussians under add/remove; got {event!r}")
    shifts = np.array(event.sensitivities, dtype=float)
    probs = np.array(event.sampling_probs, dtype=float)
    keep = probs > 0
    shifts, probs = shifts[keep], probs[keep] / probs[keep].sum()
    if np.all(shifts <= 0):
        shifts = -shifts  # N(0, σ²) is symmetric: reflect x
    if np.any(shifts < 0):
        raise UnsupportedEventError(f"the PLD engine models mixtures whose shifts share a sign; got {event!r}")
    if not np.any(shifts > 0):
        return EventPld(remove=discretise(PrivacyLoss(masses=None, atoms=((0.0, 1.0, 1.0),)), grid))
    remove, add = _mixture_losses(event.standard_deviation, shifts, probs)
    return EventPld(remove=discretise(remove, grid), add=discretise(add, grid))


def effective_noise_multiplier(event: ev.Event) -> float | None:
    """σ_eff of a nest of Composed/SelfComposed Gaussians, (Σ σᵢ⁻²)^{−1/2} (∞ for none), or None."""
    match event:
        case ev.Gaussian():
            return event.noise_multiplier
        case ev.NoOp():
            return math.inf
        case ev.SelfComposed():
            inner = effective_noise_multiplier(event.event)
            if inner is None:
                return None
            return math.inf if event.count == 0 or math.isinf(inner) else inner / math.sqrt(event.count)
        case ev.Composed():
            inner = [effective_noise_multiplier(e) for e in event.events]
            if any(s is None for s in inner):
                return None
            precision = sum(0.0 if math.isinf(s) else s**-2 for s in inner)
            return math.inf if precision == 0 else precision**-0.5
    return None


@loss_distribution.register
def _(event: ev.PoissonSampled, grid: LossGrid) -> EventPld:
    """Poisson-subsampled Gaussian (or nest of Gaussians) under add/remove — or zero-out, whose null record adds
    nothing to a batch, so the pair is the same — both directions."""
    if grid.neighboring not in (ev.NeighboringRelation.ADD_OR_REMOVE_ONE, ev.NeighboringRelation.REPLACE_SPECIAL):
        raise UnsupportedEventError(
            f"the PLD engine models Poisson sampling under add/remove or zero-out; got {event!r}"
        )
    sigma = effective_noise_multiplier(event.event)
    if sigma is None:
        raise UnsupportedEventError(f"the PLD engine models Poisson sampling of Gaussians only; got {event!r}")
    if math.isinf(sigma):
        return EventPld(remove=discretise(PrivacyLoss(masses=None, atoms=((0.0, 1.0, 1.0),)), grid))
    if event.sampling_rate == 1.0:
        return gaussian_pld(1.0 / sigma, grid)
    remove, add = _subsampled_gaussian_losses(event.sampling_rate, sigma)
    return EventPld(remove=discretise(remove, grid), add=discretise(add, grid))


def _symmetrised_losses(remove: PrivacyLoss) -> PrivacyLoss:
    """The symmetric pair (P_S, Q_S) whose profile equals ``remove``'s at every ε ≥ 0.

    With ω the law of the remove pair's loss L under P and ω′ under Q: P_S keeps ω on L > 0, puts ω′'s mass of L ∈ dm
    at −m, and an atom at 0 of 1 − P(L > 0) − Q(L > 0); Q_S is its mirror (Q_S-mass at ℓ = P_S-mass at −ℓ), so
    dP_S/dQ_S = e^ℓ, and (Q_S, P_S) has the same loss law as (P_S, Q_S). δ_S(ε) = E[(1 − e^{ε − L})₊] reads only
    L > ε, so it equals the remove pair's for ε ≥ 0. The atom is ≥ 0 for the subsampled Gaussian's remove pair: L > 0
    ⟺ x > ½ (σ′ units), and Q(x > ½) = Φ̄ ≤ (1 − q)Φ + qΦ̄ = P(x ≤ ½) since Φ ≥ ½.
    """
    assert remove.masses is not None and remove.truncation is not None and not len(remove.atoms)
    zero = np.zeros(1)
    _, p_pos, _, q_pos = (float(part[0]) for part in remove.masses(zero))
    atom = max(0.0, 1.0 - p_pos - q_pos)
    total = p_pos + q_pos  # the continuous mass of each side

    def masses(losses: np.ndarray):
        positive = losses >= 0
        _, p_above, _, q_above = remove.masses(np.abs(losses))  # P(L > |l|), Q(L > |l|) of the remove pair
        # l ≥ 0: P_S(L > l) = P(L > l), Q_S(L > l) = Q(L > l); l < 0: P_S(L ≤ l) = Q(L > −l), Q_S(L ≤ l) = P(L > −l).
        sf_p = np.where(positive, p_above, total - q_above)
        cdf_p = np.where(positive, total - p_above, q_above)
        sf_q = np.where(positive, q_above, total - p_above)
        cdf_q = np.where(positive, total - q_above, p_above)
        return cdf_p, sf_p, cdf_q, sf_q

    def truncation(tail: float) -> tuple[float, float]:
        high = max(0.0, remove.truncation(tail)[1])  # below −high: Q(L > high) ≤ P(L > high) ≤ tail (Q = e^{−L}P)
        return -high, high

    return PrivacyLoss(masses=masses, truncation=truncation, atoms=((0.0, atom, atom),) if atom > 0 else ())


@loss_distribution.register
def _(event: ev.SampledWithoutReplacement, grid: LossGrid) -> EventPld:
    """A fixed-size subset of B of the N records each step (sampling without replacement), replace-one adjacency:
    the symmetrised remove pair of the Poisson-subsampled Gaussian at γ = B/N (:func:`_symmetrised_losses`).

    The inner Gaussian's σ′ is relative to the base mechanism's replace-one sensitivity (σ/2 for DP-SGD: a replaced
    record moves the sum by up to 2C), as for the RDP route (Wang, Balle, Kasiviswanathan 2019). Why the pair
    dominates every step, for every α = e^ε ≥ 0 (so the composition of the runs is dominated by its composition:
    Zhu, Dong, Wang 2022, arXiv 2106.08567, Theorem 10):

    1. Couple the batches of D and D′ (x ↦ x′): a uniform (B − 1)-subset R of the other records, one more other
       record r ∉ R, and x in the batch with probability γ independently (the batch is R ∪ {x}, else R ∪ {r}). Given
       (R, r) the two outputs are (1 − γ)A + γB and (1 − γ)A + γB′ with A, B, B′ Gaussians of σ′ whose centres are
       at most 1 (σ′ units) apart pairwise; H_{e^ε} is jointly convex, so it suffices to bound such a triple.
    2. For ε ≥ 0, advanced joint convexity (Balle, Barthe, Gaboardi 2018, arXiv 1807.01647, Theorem 2) is the
       pointwise identity H_{e^ε}((1 − γ)A + γB ‖ (1 − γ)A + γB′) = γ·H_{e^{ε′}}(B ‖ (1 − β)A + βB′),
       e^{ε′} = 1 + (e^ε − 1)/γ, β = e^{ε − ε′}; convexity in the second argument and the Gaussian curve's
       monotonicity in the distance bound it by γ·δ_{N(1, σ′²)‖N(0, σ′²)}(ε′), which the remove pair
       ((1 − γ)N(0, σ′²) + γN(1, σ′²), N(0, σ′²)) attains (A = B′). The relation is symmetric, so this bounds
       both orders of (D, D′).
    3. For α = e^ε < 1, H_α(M(D) ‖ M(D′)) = 1 − α + α·H_{1/α}(M(D′) ‖ M(D)) ≤ 1 − α + α·δ_S(−ε) = H_α(P_S ‖ Q_S), by
       step 2 and the symmetry of (P_S, Q_S).

    Zero-out (a record replaced by a zero-gradient one) is a replacement, so the pair bounds it too. The remove pair
    itself is attained (the record at +C, its replacement and every other record at −C), so its composition is the
    lower end of the bracket (:mod:`dplens.accountant.dp_sgd`); only the pair's negative losses differ.
    """
    replacements = (ev.NeighboringRelation.REPLACE_ONE, ev.NeighboringRelation.REPLACE_SPECIAL)
    if event.neighboring is not ev.NeighboringRelation.REPLACE_ONE or grid.neighboring not in replacements:
        raise UnsupportedEventError(
            f"the PLD engine models sampling without replacement under replace-one adjacency (or zero-out, a "
            f"replacement by the null record); got {event!r} in a {grid.neighboring.value} ledger"
        )
    sigma = effective_noise_multiplier(event.event)
    if sigma is None:
        raise UnsupportedEventError(
            f"the PLD engine models sampling without replacement of Gaussians only; got {event!r}"
        )
    if math.isinf(sigma):
        return EventPld(remove=discretise(PrivacyLoss(masses=None, atoms=((0.0, 1.0, 1.0),)), grid))
    if event.sampling_rate == 1.0:
        return gaussian_pld(1.0 / sigma, grid)
    return EventPld(remove=discretise(symmetrised_subsampled_gaussian(event.sampling_rate, sigma), grid))


def symmetrised_subsampled_gaussian(rate: float, sigma: float) -> PrivacyLoss:
    """The symmetrised remove pair of the Poisson-subsampled Gaussian at ``rate`` (:func:`_symmetrised_losses`)."""
    return _symmetrised_losses(_subsampled_gaussian_losses(rate, sigma)[0])


def label_mixture(parts: list[tuple[float, PrivacyLoss]]) -> PrivacyLoss:
    """The pair that draws a public label i with probability wᵢ and then runs pair i: its privacy loss is pair i's
    (the label has the same law on both sides), so its masses are the weighted sums and its atoms the weighted atoms.
    ``parts``: (wᵢ, loss of pair i), Σwᵢ = 1, each with a continuous part and a truncation."""
    weights = [w for w, _ in parts]

    def masses(losses: np.ndarray):
        total = [np.zeros(np.shape(losses)) for _ in range(4)]
        for w, part in parts:
            for column, value in zip(total, part.masses(losses), strict=True):
                column += w * value
        return tuple(total)

    def truncation(tail: float) -> tuple[float, float]:
        ends = [part.truncation(tail) for _, part in parts]
        return min(lo for lo, _ in ends), max(hi for _, hi in ends)

    atoms: dict[float, list[float]] = {}
    for w, part in parts:
        for loss, p, q in np.asarray(part.atoms, dtype=float).reshape(-1, 3):
            found = atoms.setdefault(float(loss), [0.0, 0.0])
            found[0] += w * p
            found[1] += w * q
    assert math.isclose(math.fsum(weights), 1.0, rel_tol=1e-12)
    return PrivacyLoss(
        masses=masses, truncation=truncation, atoms=tuple((loss, p, q) for loss, (p, q) in sorted(atoms.items()))
    )


#: Truncated Poisson is modelled by the engine when a step truncates a batch holding the record with at most this
#: probability (that step's loss is then counted as infinite); above it dp-accounting's mixture answers.
MAX_TRUNCATION = 1e-18


@loss_distribution.register
def _(event: ev.TruncatedSubsampledGaussian, grid: LossGrid) -> EventPld:
    """Truncated Poisson sampling (dp-accounting's ``TruncatedSubsampledGaussianDpEvent``, arXiv 2508.15089): its
    pair is a mixture, the index revealed, of the Poisson-subsampled Gaussian at q (no truncation) and, with the
    probability p that the other records alone fill the batch, a sensitivity-2C step. The engine bounds the latter by
    a perfectly distinguishing pair (an atom at +∞: any pair is a post-processing of it), which costs p per step in δ:
    it models the event only where p ≤ ``MAX_TRUNCATION`` (a batch cap a few standard deviations above its mean), so
    the bracket is the Poisson one; elsewhere dp-accounting's mixture answers (the fallback)."""
    from scipy.special import bdtrc

    if grid.neighboring is not ev.NeighboringRelation.ADD_OR_REMOVE_ONE:
        raise UnsupportedEventError(f"the PLD engine models truncated Poisson under add/remove; got {event!r}")
    q, n, cap = event.sampling_rate, event.dataset_size, event.truncated_batch_size
    if q == 0 or cap == 0:
        return EventPld(remove=discretise(PrivacyLoss(masses=None, atoms=((0.0, 1.0, 1.0),)), grid))
    truncation = float(bdtrc(cap - 1, n - 1, q)) if cap - 1 < n - 1 else 0.0
    if truncation > MAX_TRUNCATION:
        raise UnsupportedEventError(f"truncation probability {truncation:.3g} per step: dp-accounting's mixture")
    pld = loss_distribution(
        ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=event.noise_multiplier)), grid
    )
    if truncation == 0:
        return pld

    def capped(pmfs: LossPmfs) -> LossPmfs:
        def one(pmf: GridPmf) -> GridPmf:
            mass = (1.0 - truncation) * pmf.infinity_mass + truncation
            return GridPmf(start=pmf.start, pmf=pmf.pmf * (1.0 - truncation), infinity_mass=mass, offset=pmf.offset)

        return LossPmfs(pessimistic=one(pmfs.pessimistic), optimistic=one(pmfs.optimistic))

    return EventPld(remove=capped(pld.remove), add=capped(pld.add) if pld.add is not None else None)


# --------------------------------------------------------------------------------------------
# The ledger: leaves and counts
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Leaves:
    gaussian_mu2: float = 0.0
    non_private: bool = False
    counts: dict = field(default_factory=dict)  # event → count (events are frozen, hashable dataclasses)
    order: list = field(default_factory=list)

    def add(self, event: ev.Event, count: int) -> None:
        if count == 0:
            return
        match event:
            case ev.NoOp():
                return
            case ev.PoissonSampled() if event.sampling_rate == 0:  # nothing is ever sampled: no privacy loss
                return
            case ev.NonPrivate():
                self.non_private = True
                return
            case ev.Gaussian():
                self.gaussian_mu2 += count / event.noise_multiplier**2
                return
            case ev.SelfComposed():
                self.add(event.event, count * event.count)
                return
            case ev.Composed():
                for inner in event.events:
                    self.add(inner, count)
                return
            case ev.PoissonSampled() if event.sampling_rate == 1.0:
                sigma = effective_noise_multiplier(event.event)
                if sigma is not None:
                    if not math.isinf(sigma):
                        self.gaussian_mu2 += count / sigma**2
                    return
        # Plug-in events that are exactly μ-GDP declare μ (e.g. DP-FTRL): they compose as Gaussians (μ² adds up);
        # events equivalent to a standard ledger declare it (e.g. feature-DP SGD: the DP-SGD run with its curve).
        declared = getattr(event, "gdp_mu", None)
        mu = declared() if callable(declared) else None  # None: not μ-GDP after all (e.g. a group of a Laplace)
        if mu is not None:
            self.gaussian_mu2 += count * float(mu) ** 2
            return
        standard = getattr(event, "standard_event", None)
        equivalent = standard() if callable(standard) else None  # None: the event is its own leaf after all
        if equivalent is not None:
            self.add(equivalent, count)
            return
        try:
            key = event if hash(event) is not None else None
        except TypeError:  # an event with unhashable fields: keep it as its own leaf
            key = None
        if key is not None and key in self.counts:
            self.counts[key] += count
        else:
            self.order.append(event)
            if key is not None:
                self.counts[key] = count
            else:
                self.counts[id(event)] = count

    def items(self) -> Iterable[tuple[ev.Event, int]]:
        for event in self.order:
            try:
                yield event, self.counts[event]
            except TypeError:
                yield event, self.counts[id(event)]


def _leaves(entries: Iterable[tuple[ev.Event, int]]) -> _Leaves:
    leaves = _Leaves()
    for event, count in entries:
        leaves.add(event, count)
    return leaves


def supports(entries: Iterable[tuple[ev.Event, int]] | ev.Event, *, neighboring: ev.NeighboringRelation) -> bool:
    """Whether the engine models every event of a ledger (a dry run on a coarse grid)."""
    if isinstance(entries, ev.Event):
        entries = [(entries, 1)]
    try:
        leaves = _leaves(entries)
    except (TypeError, ValueError):
        return False
    grid = LossGrid(interval=0.5, neighboring=neighboring)
    for event, _ in leaves.items():
        try:
            loss_distribution(event, grid)
        except UnsupportedEventError:
            return False
    return True


# --------------------------------------------------------------------------------------------
# Composition in the Fourier domain
# --------------------------------------------------------------------------------------------


def _fast_length(n: int) -> int:
    """The smallest m·2^k ≥ n with m ∈ {1, 3, 5, 9, 15} (sizes the FFT handles fastest)."""
    best = 1 << max(n - 1, 1).bit_length()
    for m in (3, 5, 9, 15):
        k = max(0, math.ceil(math.log2(max(n / m, 1))))
        while m << k < n:
            k += 1
        best = min(best, m << k)
    return max(best, 2)


def _power(spectrum: np.ndarray, count: int) -> np.ndarray:
    """spectrum**count by repeated squaring (relative error ≈ count·u, like exp(count·log))."""
    result = None
    base = spectrum
    while count:
        if count & 1:
            result = base.copy() if result is None else np.multiply(result, base, out=result)
        count >>= 1
        if count:  # in place but for the first square (``spectrum`` is the caller's)
            base = base * base if base is spectrum else np.multiply(base, base, out=base)
    return result


def _log_mgf(pmf: GridPmf, interval: float, lambdas: np.ndarray, block: int = 1) -> np.ndarray:
    """log E[e^{λL}; L finite] of a grid PMF, for each λ; with ``block`` > 1 an upper bound from the masses of blocks of
    that many grid points, each put at its block's top (λ > 0) or bottom (λ < 0): cheaper on long PMFs, and still a
    valid Chernoff bound (only the windows grow, by about block·interval)."""
    if block > 1 and pmf.pmf.size > 4 * block:
        return _blocked_log_mgf(pmf, interval, lambdas, block)
    nonzero = np.flatnonzero(pmf.pmf > 0)
    if nonzero.size == 0:
        return np.full(lambdas.shape, -np.inf)
    if block == GEOMETRIC_BLOCKS and nonzero.size > 4 * _GEOMETRIC_REGION:
        return _geometric_log_mgf(pmf, nonzero, interval, lambdas)
    losses = (pmf.start + nonzero) * interval + pmf.offset
    exponent = np.log(pmf.pmf[nonzero])[None, :] + lambdas[:, None] * losses[None, :]
    top = exponent.max(axis=1)
    return top + np.log(np.exp(exponent - top[:, None]).sum(axis=1))


#: ``block`` for :func:`_log_mgf`: blocks of 1 point over the PMF's first ``_GEOMETRIC_REGION`` positions, of r points
#: over the r-th region of that many after it (so a position i moves by at most i/_GEOMETRIC_REGION).
GEOMETRIC_BLOCKS = 0
_GEOMETRIC_REGION = 1024


def _geometric_log_mgf(pmf: GridPmf, nonzero: np.ndarray, interval: float, lambdas: np.ndarray) -> np.ndarray:
    """An upper bound on the log-MGF (each block's mass at its highest atom for λ > 0, its lowest for λ < 0) with
    blocks growing along the PMF: for long PMFs from 0 with a heavy, light tail (one coordinate of a random allocation:
    5·10⁵ atoms, the same bound from ~8·10³ blocks). A position moves by at most 1/1024 of itself, so a sum of t
    draws' window grows by at most ~0.1 % of its top."""
    region = nonzero // _GEOMETRIC_REGION
    ids = region * _GEOMETRIC_REGION + (nonzero - region * _GEOMETRIC_REGION) // np.maximum(region, 1)
    firsts = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1]]))
    masses = np.add.reduceat(pmf.pmf[nonzero], firsts)
    lows = nonzero[firsts]
    highs = nonzero[np.append(firsts[1:], nonzero.size) - 1]
    ends = np.where(lambdas[:, None] > 0, highs[None, :], lows[None, :])
    exponent = np.log(masses)[None, :] + lambdas[:, None] * ((pmf.start + ends) * interval + pmf.offset)
    top = exponent.max(axis=1)
    return top + np.log(np.exp(exponent - top[:, None]).sum(axis=1))


def _blocked_log_mgf(pmf: GridPmf, interval: float, lambdas: np.ndarray, block: int) -> np.ndarray:
    masses = np.pad(pmf.pmf, (0, -pmf.pmf.size % block)).reshape(-1, block).sum(axis=1)
    nonzero = np.flatnonzero(masses > 0)
    if nonzero.size == 0:
        return np.full(lambdas.shape, -np.inf)
    bottoms = (pmf.start + nonzero * block) * interval + pmf.offset
    tops = bottoms + (block - 1) * interval
    ends = np.where(lambdas[:, None] > 0, tops[None, :], bottoms[None, :])
    exponent = np.log(masses[nonzero])[None, :] + lambdas[:, None] * ends
    top = exponent.max(axis=1)
    return top + np.log(np.exp(exponent - top[:, None]).sum(axis=1))


def _moments(pmf: GridPmf, interval: float) -> tuple[float, float, float]:
    # Explicit sums, not ``@``: a multithreaded BLAS dot product stalls for milliseconds on a busy machine.
    mass = float(pmf.pmf.sum())
    if mass <= 0:
        return 0.0, 0.0, 0.0
    losses = pmf.losses(interval)
    mean = float(np.sum(pmf.pmf * losses)) / mass
    var = float(np.sum(pmf.pmf * (losses - mean) ** 2)) / mass
    return mass, mean, var


@dataclass(frozen=True, slots=True, kw_only=True)
class ComposedPmf:
    """The composed PMF of one direction and kind: masses ``pmf[j]`` at losses (start + j)·Δ + offset.

    ``infinity_mass`` = P(some step has infinite loss); ``above`` bounds the finite mass above the window;
    ``outside`` bounds all finite mass outside it (the circular convolution wrapped it in); ``round_off`` bounds the
    floating-point error of Σⱼ pⱼwⱼ for any weights wⱼ ∈ [0, 1].
    """

    start: int
    interval: float
    offset: float
    pmf: np.ndarray
    infinity_mass: float
    above: float
    outside: float
    round_off: float
    _suffix: list = field(default_factory=list, repr=False)

    def _sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Losses s ≥ 0 with suffix sums A[k] = Σ_{j≥k} pⱼ and B[k] = Σ_{j≥k} pⱼe^{−sⱼ} (A[n] = B[n] = 0)."""
        if not self._suffix:
            first = self._first_nonnegative()
            s = (self.start + np.arange(first, self.pmf.size)) * self.interval + self.offset
            p = self.pmf[first:]
            a = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
            b = np.concatenate([np.cumsum((p * np.exp(-s))[::-1])[::-1], [0.0]])
            self._suffix.extend([s, a, b])
        return self._suffix[0], self._suffix[1], self._suffix[2]

    def release(self) -> None:
        """Drop the cached suffix sums (three window-sized arrays; recomputed on the next query)."""
        self._suffix.clear()

    def _first_nonnegative(self) -> int:
        """The first j with loss (start + j)·Δ + offset ≥ 0 (pmf.size if none), by bisection on the same floating-point
        expression as the losses' array (non-decreasing in j): the array itself is never built."""
        low, high = 0, self.pmf.size
        while low < high:
            mid = (low + high) // 2
            if (self.start + mid) * self.interval + self.offset < 0.0:
                low = mid + 1
            else:
                high = mid
        return low

    def _negative_sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """For ε < 0: every loss, suffix sums A and B′[k] = Σ_{j≥k} pⱼe^{r − sⱼ} relative to r = max(first loss, −600)
        (so that neither factor of e^{ε − r}·B′ overflows)."""
        if len(self._suffix) < 4:
            self._sums()
            losses = (self.start + np.arange(self.pmf.size)) * self.interval + self.offset
            reference = max(float(losses[0]), -600.0) if losses.size else 0.0
            p = self.pmf
            with np.errstate(under="ignore"):
                weights = p * np.exp(np.minimum(reference - losses, 0.0))
            a = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
            b = np.concatenate([np.cumsum(weights[::-1])[::-1], [0.0]])
            self._suffix.extend([losses, a, b, reference])
        return self._suffix[3], self._suffix[4], self._suffix[5], self._suffix[6]

    def hockey_stick(self, epsilons: np.ndarray) -> np.ndarray:
        """Σ_{s > ε} p(s)(1 − e^{ε − s}) (finite part only; no error terms)."""
        eps = np.asarray(epsilons, dtype=float)
        s, a, b = self._sums()
        index = np.searchsorted(s, eps, side="right")
        with np.errstate(over="ignore", invalid="ignore"):
            value = a[index] - np.exp(eps) * b[index]
        if np.any(eps < 0):
            # Below 0 the losses under the window's first ones count too (sums relative to the first loss).
            all_s, all_a, all_b, reference = self._negative_sums()
            below = eps < 0
            index = np.searchsorted(all_s, eps[below], side="right")
            with np.errstate(over="ignore", invalid="ignore"):
                value = np.array(value, dtype=float, copy=True)
                value[below] = all_a[index] - np.exp(eps[below] - reference) * all_b[index]
        return np.maximum(np.where(np.isfinite(value), value, 0.0), 0.0)

    def epsilon_for(self, level: float) -> float:
        """The smallest ε ≥ 0 with hockey_stick(ε) ≤ level (∞ if level < 0 … no ε reaches it)."""
        if level < 0:
            return math.inf
        s, a, b = self._sums()
        if s.size == 0 or self.hockey_stick(np.array([0.0]))[0] <= level:
            return 0.0
        # The curve is non-increasing: the first point at or below the level ends the interval holding the answer.
        crossing = _first_at_or_below(s, a, b, level)
        k = crossing  # answer in [s_{k−1}, s_k] (s_{−1} = 0), where the j ≥ k terms count
        with np.errstate(divide="ignore", invalid="ignore"):
            value = math.log((a[k] - level) / b[k]) if b[k] > 0 and a[k] > level else (s[k] if k < s.size else 0.0)
        low = s[k - 1] if k > 0 else 0.0
        high = s[k] if k < s.size else math.inf
        return float(min(max(value, low), high))


_CHUNK = 1 << 18


def _first_at_or_below(s: np.ndarray, a: np.ndarray, b: np.ndarray, level: float) -> int:
    """The first i with a[i + 1] − e^{sᵢ}·b[i + 1] ≤ ``level`` (the hockey stick at sᵢ, only j > i counting), as a
    search on the whole non-increasing array would find it, computed in chunks (no window-sized temporaries)."""
    for lo in range(0, s.size, _CHUNK):
        hi = min(lo + _CHUNK, s.size)
        at_points = a[lo + 1 : hi + 1] - np.exp(s[lo:hi]) * b[lo + 1 : hi + 1]
        found = int(np.searchsorted(-at_points, -level, side="left"))
        if found < at_points.size:
            return lo + found
    return s.size


#: At most this many frequencies of a composition are recomputed accurately (:func:`_accurate_spectrum`).
_MAX_ACCURATE_FREQUENCIES = 2048
_F32_ULP = 2.0**-23


def _pairwise_sum(terms: np.ndarray) -> tuple[np.ndarray, int]:
    """Row sums by a balanced binary tree (error ≤ depth·u·Σ|terms|), and the tree's depth."""
    width = terms.shape[1]
    depth = max(0, math.ceil(math.log2(width))) if width else 0
    padded = np.zeros((terms.shape[0], 1 << depth), dtype=terms.dtype)
    padded[:, :width] = terms
    while padded.shape[1] > 1:
        half = padded.shape[1] // 2
        padded = padded[:, :half] + padded[:, half:]
    return padded[:, 0], depth


def _accurate_exponent(
    values: np.ndarray, count: int, size: int, ks: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """count·log Fₖ at the frequencies ``ks`` of a PMF ``values`` (position i ↦ phase e^{−2πiki/N}) as (real part,
    imaginary part, bound on its error), computed so that it stays accurate where |Fₖ| ≈ 1 whatever the count.

    With c the PMF's mean position (an integer) and φᵢ = 2π·(k(i − c) mod N)/N reduced to (−π, π] (exact integer
    arithmetic), Fₖ = e^{−2πikc/N}·(1 + z), z = (Σaᵢ − 1) − Σᵢ aᵢ(1 − e^{−iφᵢ}) and 1 − e^{−iφ} = 2sin²(φ/2) + i·sin φ:
    every term is computed to a few ulps of aᵢ|φᵢ| (small at low frequencies, not of aᵢ), Σaᵢ − 1 is correctly rounded
    (``math.fsum``), log(1 + z) = ½·log1p(2x + x² + y²) + i·atan2(y, 1 + x), and the phase of e^{−2πikc·count/N} is
    reduced exactly. Error bounds follow each step (u the unit roundoff; first-order terms with generous constants).
    """
    u = _UNIT_ROUNDOFF
    nonzero = np.flatnonzero(values > 0)
    a = values[nonzero]
    total = float(np.sum(a))
    centre = round(float(np.sum(a * nonzero)) / total) if total > 0 else 0
    relative = (nonzero - centre).astype(np.int64)
    mass_minus_one = math.fsum([*a.tolist(), -1.0])
    ks = ks.astype(np.int64)
    step = 2.0 * math.pi / size
    tail_re, tail_im, tail_error, core = _far_terms(values, nonzero, centre, count, size, ks)
    a, relative = a[core], relative[core]
    g_re = np.empty(ks.size)
    g_im = np.empty(ks.size)
    spread = np.empty(ks.size)  # Σ aᵢ|φᵢ|
    depth = 0
    chunk = max(1, (1 << 20) // max(1, a.size))
    for lo in range(0, ks.size, chunk):
        part = ks[lo : lo + chunk]
        turns = (part[:, None] * relative[None, :]) % size
        turns = np.where(turns > size // 2, turns - size, turns)
        phi = turns * step
        half = np.sin(0.5 * phi)
        re, depth = _pairwise_sum(2.0 * half * half * a)
        im, _ = _pairwise_sum(np.sin(phi) * a)
        g_re[lo : lo + chunk], g_im[lo : lo + chunk] = re, im
        spread[lo : lo + chunk] = np.sum(np.abs(phi) * a, axis=1) * (1.0 + 2.0 * a.size * u)
    # |δ(Σ aᵢ(1 − e^{−iφᵢ}))|: φ to 3u relative, sin/products to a few ulps (16u·aᵢ|φᵢ| per term), tree sum; the far
    # terms (one transform) and the rounding of adding them.
    g_error = u * (16.0 + 1.5 * (depth + 1)) * spread
    if not core.all():
        g_re, g_im = g_re + tail_re, g_im + tail_im
        g_error = g_error + tail_error + 2.0 * u * (np.abs(g_re) + np.abs(g_im))
    x = mass_minus_one - g_re
    y = -g_im
    z_abs = np.hypot(x, y)
    z_error = g_error + u * abs(mass_minus_one) + 2.0 * u * z_abs
    square = 2.0 * x + x * x + y * y  # |1 + z|² − 1
    one_plus = np.sqrt(np.maximum(1.0 + square, 0.0))  # |1 + z|
    with np.errstate(divide="ignore", invalid="ignore"):  # |1 + z| = 0: log −∞, and an infinite error bound below
        log_re = 0.5 * np.log1p(np.maximum(square, -1.0))
    log_im = np.arctan2(y, 1.0 + x)
    log_abs = np.hypot(log_re, log_im)
    # log(1 + z) from the computed z: 4u·(2|x| + x² + y²) in the log1p argument (over |1 + z|²), ulps of the result,
    # u·|y|/|1 + z| from rounding 1 + x in atan2; from z's own error: |δz|/(|1 + z| − |δz|) (d log(1 + z) = dz/(1 + z)).
    guard = np.maximum(one_plus - 2.0 * z_error, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_error = np.where(
            guard > 0,
            z_error / guard
            + 2.0 * u * (2.0 * np.abs(x) + x * x + y * y) / (guard * guard)
            + 3.0 * u * log_abs
            + u * np.abs(y) / guard,
            np.inf,
        )
    turns = ((ks * (centre % size)) % size) * (count % size) % size
    turns = np.where(turns > size // 2, turns - size, turns)
    shift = turns * step
    exponent_re = count * log_re
    exponent_im = count * log_im - shift
    exponent_error = count * log_error + 2.0 * u * count * log_abs + 3.0 * u * np.abs(shift) + u * np.abs(exponent_im)
    return exponent_re, exponent_im, exponent_error


#: PMFs longer than this many atoms have their far atoms' terms in :func:`_accurate_exponent` from one transform.
_NEAR_ATOMS = 4096
#: ... those beyond the radius around the mean outside which at most this mass over the count lies.
_FAR_MASS = 1e-3


def _far_terms(
    values: np.ndarray, nonzero: np.ndarray, centre: int, count: int, size: int, ks: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Σ aᵢ(1 − e^{−iφᵢ}) over the atoms far from the mean position ``centre`` (real part, imaginary part, a bound
    on its error), and a mask of the near atoms (``nonzero``'s entries) left to :func:`_accurate_exponent`.

    A long PMF of small mass far out (a heavy-tailed law: one coordinate of a random allocation at σ = 0.7 has 5·10⁵
    atoms, 99.9 % of its mass on a few hundred) made the term-by-term sums cost frequencies × atoms (29 of 34 s).
    The far atoms' sum is m − W_k·e^{2πikc/N}, W = their transform (folded modulo N): its error is at most
    c·u·log₂N·m (Higham 2002, §24.1; the constant the compositions use), plus the fold, the rotation and the
    subtraction (a few u·m), so its error is ~10⁻¹⁴·m, not ~10⁻¹⁴·m·|φ|: small when m ≤ 10⁻³/count."""
    u = _UNIT_ROUNDOFF
    everything = np.ones(nonzero.size, dtype=bool)
    zeros = np.zeros(ks.size)
    if nonzero.size <= _NEAR_ATOMS:
        return zeros, zeros, zeros, everything
    a = values[nonzero]
    distance = np.abs(nonzero - centre)
    order = np.argsort(distance, kind="stable")
    beyond = np.cumsum(a[order][::-1])[::-1]  # mass at this rank of distance and beyond
    keep = int(np.searchsorted(-beyond, -_FAR_MASS / max(count, 1), side="right"))
    keep = max(keep, _NEAR_ATOMS)
    if keep >= nonzero.size:
        return zeros, zeros, zeros, everything
    radius = int(distance[order[keep - 1]])
    near = distance <= radius
    positions = nonzero[~near]
    mass = math.fsum(values[positions].tolist())
    folds = -(-values.size // size)
    # Folded modulo the window: each position's atoms added in increasing order, as a fold of the whole PMF would.
    far = np.bincount(positions % size, weights=values[positions], minlength=size)
    transformed = np.fft.rfft(far, n=size)[ks]
    turns = (ks * (centre % size)) % size
    rotation = np.exp(1j * (turns * (2.0 * math.pi / size)))
    w = transformed * rotation
    # The transform, the fold, the rotation (its angle to (3π + 2)u, exp to 2u) and the product, then m − ·.
    transform_error = 8.0 * u * (math.log2(size) + 2.0) + (folds + 20.0) * u
    error = np.full(ks.size, 2.0 * transform_error * mass)
    return mass - w.real, -w.imag, error, near


def _accurate_spectrum(factors: list[tuple[GridPmf, int]], size: int, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Π Fₖ^count over the factors at the frequencies ``ks``, as exp(Σ count·log Fₖ) (:func:`_accurate_exponent`),
    and a bound on each value's error: the exponents' errors, the rounding of their sum (m·u·Σ|terms|) and of
    exp, cos and sin (4u), through |e^{X} − e^{X̃}| ≤ |e^{X̃}|·expm1(|X − X̃|); plus an absolute 8·2⁻¹⁰⁷⁴ for values in
    the subnormal range, where exp and the products round to a grid of 2⁻¹⁰⁷⁴ and relative bounds fail (found at 50×
    the property test's examples: |F|¹⁰⁰⁰ ≈ 8e-319 off by 3e-324 against a relative bound of 0)."""
    u = _UNIT_ROUNDOFF
    total_re = np.zeros(ks.size)
    total_im = np.zeros(ks.size)
    error = np.zeros(ks.size)
    magnitude = np.zeros(ks.size)
    for factor, count in factors:
        re, im, err = _accurate_exponent(factor.pmf, count, size, ks)
        total_re += re
        total_im += im
        error += err
        magnitude += np.abs(re) + np.abs(im)
    error += u * len(factors) * magnitude + 4.0 * u
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        modulus = np.exp(total_re)
        value = modulus * (np.cos(total_im) + 1j * np.sin(total_im))
        bound = modulus * (np.expm1(error) + 4.0 * u) * (1.0 + 5.0 * u) + 8.0 * _SMALLEST_SUBNORMAL
    return value, np.where(np.isfinite(bound), bound, np.inf)


def _spectrum_weights(size: int) -> tuple[np.ndarray, np.ndarray]:
    """For a half spectrum of ``size`` points: each entry's count in the full spectrum (conjugate symmetry: 2, but 1 at
    0 and at N/2), and its weight in a tail sum of the window (see :func:`_compose_kind`): 1 at 0, 1/(N·sin(πk/N))
    beyond."""
    weights = np.full(size // 2 + 1, 2.0)
    weights[0] = 1.0
    if size % 2 == 0:
        weights[-1] = 1.0
    tail_weights = np.empty(size // 2 + 1)
    tail_weights[0] = 1.0
    tail_weights[1:] = 1.0 / (size * np.sin(np.pi * np.arange(1, size // 2 + 1) / size))
    weights.flags.writeable = False
    tail_weights.flags.writeable = False
    return weights, tail_weights


def _chernoff_window(
    factors: list[tuple[GridPmf, int]], interval: float, window_tail: float, mgf_block: int
) -> tuple[float, float, int, np.ndarray, np.ndarray, float, float]:
    """The composition's mass at +∞, offset and start, the Chernoff orders λ tried with their log-MGFs, and the
    losses below ``bottom`` / above ``top`` that hold at most ``window_tail`` of the mass each."""
    log_keep = 0.0  # log P(no step has an infinite loss)
    mean = var = 0.0
    for pmf, count in factors:
        if pmf.infinity_mass >= 1.0:
            log_keep = -math.inf
        else:
            log_keep += count * math.log1p(-pmf.infinity_mass)
        _, m, v = _moments(pmf, interval)
        mean += count * m
        var += count * v
    infinity_mass = -math.expm1(log_keep)
    offset = sum(count * pmf.offset for pmf, count in factors)
    base = sum(count * pmf.start for pmf, count in factors)
    # Chernoff: P(S ≥ s) ≤ exp(K(λ) − λs), λ > 0, and P(S ≤ s) ≤ exp(K(λ) − λs), λ < 0, with K the log-MGF of the
    # composed finite part (a sum of the factors' log-MGFs). Any λ is valid; try a few around the Gaussian optimum.
    z = math.sqrt(2.0 * math.log(1.0 / window_tail))
    # The Gaussian optimum z/√var is far too large for heavy-tailed steps (a subsampled mechanism's rare large
    # losses), so the candidates reach 2⁻⁹ of it.
    # A (nearly) degenerate PMF has var ≈ 0: the candidates then also span fixed orders 2⁻¹ … 2¹⁰. The best
    # candidate on each side is then refined twice (halving the step in log λ).
    scale = z / math.sqrt(var) if var > 0 else 1.0 / interval
    low, high = math.log2(min(scale / 512.0, 0.5)), math.log2(max(scale * 4.0, 1024.0))
    step = (high - low) / (max(8, min(24, math.ceil((high - low) / 1.5))) - 1)
    grid_log = np.arange(low, high + step / 2, step)
    lambdas = np.concatenate([2.0**grid_log, -(2.0**grid_log)])

    def chernoff(lams: np.ndarray) -> np.ndarray:
        total = np.zeros(lams.size)
        for pmf, count in factors:
            total += count * _log_mgf(pmf, interval, lams, mgf_block)
        return total

    log_mgf = chernoff(lambdas)
    log_tail = math.log(window_tail)
    for _ in range(2):
        step /= 2
        extra = []
        for sign in (1.0, -1.0):
            side = np.flatnonzero(np.sign(lambdas) == sign)
            with np.errstate(invalid="ignore"):
                edge = (log_mgf[side] - log_tail) / lambdas[side]
            best = side[int(np.nanargmin(edge) if sign > 0 else np.nanargmax(edge))]
            centre = math.log2(abs(lambdas[best]))
            extra += [sign * 2.0 ** (centre - step), sign * 2.0 ** (centre + step)]
        extra_arr = np.array(extra)
        lambdas = np.concatenate([lambdas, extra_arr])
        log_mgf = np.concatenate([log_mgf, chernoff(extra_arr)])
    positive = lambdas > 0
    with np.errstate(invalid="ignore"):
        top = float(np.nanmin((log_mgf[positive] - log_tail) / lambdas[positive]))
        bottom = float(np.nanmax((log_mgf[~positive] - log_tail) / lambdas[~positive]))
    if not (math.isfinite(top) and math.isfinite(bottom)):  # degenerate (e.g. all mass at one point)
        top, bottom = mean + 1.0, mean - 1.0
    return infinity_mass, offset, base, lambdas, log_mgf, bottom, top


def _folded(values: np.ndarray, size: int) -> np.ndarray:
    """``values`` folded modulo ``size`` (position i added onto i mod size), the segments added in order as a sum over
    the rows of the zero-padded array would, without building that array (its copy was a window-sized peak)."""
    out = values[:size].copy()
    for lo in range(size, values.size, size):
        segment = values[lo : lo + size]
        out[: segment.size] += segment
    return out


def _spectrum_and_error(
    factors: list[tuple[GridPmf, int]], size: int, transform_error: float
) -> tuple[np.ndarray, np.ndarray]:
    """The composed spectrum (product of the factors' transforms, each to its power) and a componentwise bound on
    its error (see :func:`_compose_kind`)."""
    half = size // 2 + 1
    spectrum = None
    log_bound = np.zeros(half)
    log_size = np.zeros(half)
    rho = np.full(half, 5.0 * _UNIT_ROUNDOFF * sum(count for _, count in factors))
    for factor, count in factors:
        values = factor.pmf
        mass = float(values.sum())
        folds = -(-values.size // size)
        if folds > 1:  # fold: the circular convolution only sees positions modulo the window
            values = _folded(values, size)
        transformed = np.fft.rfft(values, n=size)
        entry_error = max((transform_error + folds * _UNIT_ROUNDOFF) * mass, 1e-300)
        powered = _power(transformed, count)
        spectrum = powered if spectrum is None else np.multiply(spectrum, powered, out=spectrum)
        del powered
        reach = np.abs(transformed)
        reach += entry_error
        del transformed
        logs = np.log(np.maximum((reach * (1.0 + 2.0 * _F32_ULP)).astype(np.float32), np.float32(1e-37)))
        log_bound += count * logs.astype(float)
        log_size += count * np.abs(logs.astype(float))
        rho += (count * entry_error) / reach
    slack = 4.0 * _F32_ULP * (log_size + sum(count for _, count in factors)) + 4.0 * _F32_ULP
    with np.errstate(over="ignore", under="ignore"):
        error = np.exp(log_bound + slack + rho) * (rho + 2.5 * _UNIT_ROUNDOFF * len(factors))
    error = np.where(np.isfinite(error), error, np.inf)
    return spectrum, error


def _compose_kind(
    factors: list[tuple[GridPmf, int]],
    interval: float,
    window_tail: float,
    precision: float = DEFAULT_PRECISION,
    *,
    mgf_block: int = 1,
) -> ComposedPmf:
    """Compose one direction and kind (pessimistic or optimistic) of all factors on one window.

    ``mgf_block`` > 1 sizes the window from blocked bounds on the factors' moment-generating functions
    (:func:`_log_mgf`): for long factors, where the exact ones cost more than the transforms."""
    infinity_mass, offset, base, lambdas, log_mgf, bottom, top = _chernoff_window(
        factors, interval, window_tail, mgf_block
    )
    _check_loss_range(bottom, top, "the composition")
    j_lo = math.floor((bottom - offset) / interval) - 1
    j_hi = math.ceil((top - offset) / interval) + 1
    size = _fast_length(j_hi - j_lo + 1)
    if size > MAX_WINDOW:
        raise WindowTooLargeError(
            f"the composed PLD needs a window of {j_hi - j_lo + 1} points at interval={interval:g} (limit {MAX_WINDOW})"
        )
    j_hi = j_lo + size - 1
    # The bounds at the window actually used (it may have grown): mass strictly above / below it.
    s_above = (j_hi + 1) * interval + offset
    s_below = (j_lo - 1) * interval + offset
    positive = lambdas > 0
    above = float(np.exp(np.min(log_mgf[positive] - lambdas[positive] * s_above)))
    below = float(np.exp(np.min(log_mgf[~positive] - lambdas[~positive] * s_below)))
    log2n = math.log2(size)
    # Componentwise error of a computed transform: ≤ c·u·log₂N·‖a‖₁ per entry (Higham 2002, §24.1); of the inverse:
    # ≤ c·u·log₂N·‖F‖₁/N per entry, or c·u·log₂N·‖p‖₂ in norm.
    transform_error = 8.0 * _UNIT_ROUNDOFF * (log2n + 2.0)
    weights, tail_weights = _spectrum_weights(size)
    # The spectrum, and a bound on its error. Each factor's transform F̂ has componentwise error E ≤ c·u·log₂N·‖a‖₁
    # (Higham 2002, §24.1), so with R = |F̂| + E ≥ |F|: |F̂ⁿ − Fⁿ| ≤ n·E·R^{n−1}, and repeated squaring rounds F̂ⁿ by
    # at most 2√5·n·u relative (Brent, Percival and Zimmermann 2007: √5·u per complex product), so the computed power
    # is within Rⁿ·ρ of the exact one, ρ = n·E/R + 5n·u. Over the product of the factors (each multiplication
    # rounding by √5·u): |S̃ − S| ≤ B·e^{Σρ}·(Σρ + 2.5·m·u), B = Π Rⁿ (accumulated as Σ n·log R in single precision,
    # each rounding covered by a few single-precision ulps). Where |F| ≈ 1 this is ~n·E: ~10⁻¹⁰ for 10⁴ runs.
    spectrum, error = _spectrum_and_error(factors, size, transform_error)
    # Where the bound weighs more than half of ``precision`` in the tail sums (see below), recompute the frequencies
    # weighing most accurately (:func:`_accurate_spectrum`), until the rest weigh at most a quarter of it.
    weighted = weights * tail_weights * error
    if float(np.sum(weighted)) > 0.5 * precision:
        candidates = np.flatnonzero(weighted > 0.125 * precision / weighted.size)
        order = candidates[np.argsort(weighted[candidates])[::-1]]
        rest = np.cumsum(weighted[order][::-1])[::-1]  # what the candidates from each position on weigh
        chosen = order[: min(int(np.searchsorted(-rest, -0.125 * precision)), _MAX_ACCURATE_FREQUENCIES)]
        if chosen.size:
            accurate, accurate_error = _accurate_spectrum(factors, size, chosen)
            better = accurate_error < error[chosen]
            spectrum[chosen[better]] = accurate[better]
            error[chosen[better]] = accurate_error[better]
    # The sums the bounds below need from the spectrum, taken before it is freed (a window of 4·10⁶ points holds
    # ~30 MB per array: issue 47's long trainings).
    magnitude_sum = float(np.sum(weights * np.abs(spectrum)))
    error_sum = float(np.sum(weights * tail_weights * error))
    error_squares = float(np.sum(weights * error**2))
    del error
    circular = np.fft.irfft(spectrum, n=size)
    del spectrum
    pmf = np.roll(circular, (base - j_lo) % size)
    del circular
    # The computed output's norm, taken before clipping (the inverse transform's error is relative to it), and the
    # mass that clipping its negative entries to 0 adds (an exact PMF has none: each clipped entry moves towards it).
    raw_norm = float(np.sqrt(np.sum(pmf * pmf)))
    clipped_mass = -float(np.sum(pmf, where=pmf < 0.0))
    np.maximum(pmf, 0.0, out=pmf)
    # Every use of the composed PMF is a sum Σⱼ wⱼpⱼ with weights wⱼ ∈ [0, 1] non-decreasing in the loss: the hockey
    # stick (1 − e^{ε − s})₊ at any ε ∈ ℝ, convolved with other PMFs, or split between grid neighbours. The error
    # δp = δp_S + δp_I has two parts, bounded separately (triangle inequality), each by the smaller of two bounds:
    # - δp_S, the exact inverse transform of the spectrum's error δF. By Abel summation |Σ wⱼ δpⱼ| ≤ maxⱼ |Tⱼ|,
    #   Tⱼ = Σ_{i ≥ j} δpᵢ the tail sums of the error over the window, and Tⱼ = (1/N) Σₖ δFₖ Σ_{i=j}^{N−1} ω^{ik} with
    #   |Σ_{i=j}^{N−1} ω^{ik}| ≤ N at k = 0 and ≤ 1/sin(πk/N) beyond: so |Tⱼ| ≤ Σₖ |δFₖ|·tail_weightₖ. Or (any
    #   weights) ‖δp_S‖₁ ≤ √N·‖δp_S‖₂ = ‖δF‖₂ (Parseval).
    # - δp_I, the inverse transform's own rounding: componentwise ≤ c·u·log₂N·‖F‖₁/N, so c·u·log₂N·‖F‖₁ in the tail
    #   sums; or in norm ‖δp_I‖₂ ≤ c·u·log₂N·‖p‖₂ (Higham 2002, §24.1; ‖p‖₂ of the exact output, at most the computed
    #   one's over 1 − c·u·log₂N), so √N·c·u·log₂N·‖p‖₂ in ℓ₁.
    # The first part is the floor of the spectrum's error and the second the floor of the output's: taking each
    # part's own better bound (not one route for both) cut the round-off of a 10⁴-fold allocation law from 2.0·10⁻¹²
    # to 3.7·10⁻¹³ (issue 47: balls-and-bins at δ = 10⁻⁹). Clipping changes a sum by at most the clipped mass, in
    # the upward direction only; the ℓ₁ route needs no such term (each clipped entry's error only shrinks).
    output_norm_bound = transform_error * math.sqrt(size) * raw_norm / (1.0 - transform_error)
    spectrum_part = min(error_sum, math.sqrt(error_squares))
    inverse_part = min(transform_error * magnitude_sum, output_norm_bound)
    l1_bound = math.sqrt(error_squares) + output_norm_bound
    round_off = min(spectrum_part + inverse_part + clipped_mass, l1_bound)
    # Errors the factors carry (an event composed on a finer grid): telescoping over the factors, each one's error
    # meets weights w ⋆ (the others), non-decreasing and in [0, Π of the others' masses] (computed ones may exceed 1).
    carried = sum(count * factor.error for factor, count in factors)
    if carried > 0:
        carried *= math.prod(max(1.0, float(factor.pmf.sum()) + factor.error) ** count for factor, count in factors)
    return ComposedPmf(
        start=j_lo,
        interval=interval,
        offset=offset,
        pmf=pmf,
        infinity_mass=infinity_mass,
        above=above,
        outside=above + below,
        round_off=round_off + carried,
    )


# --------------------------------------------------------------------------------------------
# Events run many times: composed on a finer grid of their own, moved onto the shared grid once
# --------------------------------------------------------------------------------------------

#: At most 2^this finer than the shared grid for an event's own composition (see :func:`_refinement_levels`).
MAX_REFINEMENT = 10
#: An event's own composition is merged into cells of Δ/this before the inscribed sweep moves it onto the grid.
_SUB_CELLS = 8
#: Only events whose composition is at most 1/this as wide as the ledger's are refined (see
#: :func:`_refinement_levels`).
_OWN_SHARE = 10.0
#: The cost of a point of an event's own window (two transforms and the power) in points of the shared window.
_OWN_COST = 0.5
#: ... and only if its own grid comes out at least 2^this times finer.
_MIN_LEVEL = 4
#: Largest number of grid intervals one run of an event may span when its spread is probed.
_MAX_PROBE_POINTS = 2**20


def _trimmed(composed: ComposedPmf, budget: float, *, pessimistic: bool) -> tuple[np.ndarray, np.ndarray, float]:
    """The atoms (losses, P-masses) of an event's composition without its far tails, and the mass sent to +∞.

    At most ``budget`` of mass is taken off each end (a composition's window reaches tails of ~10⁻¹⁸, and its
    floating-point noise, ~10⁻¹⁷ per point, spreads over all of it). Pessimistic: the bottom tail moves up onto the
    first atom kept and the top tail goes to +∞ (both only raise every hockey stick). Optimistic: the top tail moves
    down onto the last atom kept and the bottom tail is dropped (both only lower them).
    """
    values = composed.pmf
    nonzero = np.flatnonzero(values > 0)
    masses = values[nonzero]
    if masses.size == 0:
        return np.zeros(0), masses, 0.0
    from_bottom = np.cumsum(masses)
    from_top = np.cumsum(masses[::-1])[::-1]
    first = min(int(np.searchsorted(from_bottom, budget, side="right")), masses.size - 1)
    last = max(int(np.flatnonzero(from_top > budget)[-1]) if from_top[0] > budget else 0, first)
    bottom = float(from_bottom[first - 1]) if first > 0 else 0.0
    top = float(from_top[last + 1]) if last + 1 < masses.size else 0.0
    kept = masses[first : last + 1].copy()
    to_infinity = 0.0
    if pessimistic:
        kept[0] += bottom
        to_infinity = top
    else:
        kept[-1] += top
    losses = (composed.start + nonzero[first : last + 1]) * composed.interval + composed.offset
    return losses, kept, to_infinity


def _coarse_pessimistic(composed: ComposedPmf, interval: float, budget: float) -> GridPmf:
    """An event's composition on the grid of ``interval``: its tails trimmed (:func:`_trimmed`), each atom split
    between its two grid neighbours keeping its Q-mass (as one event's atoms in :func:`discretise`). The split pair
    post-processes to the unsplit one, so it dominates it at every ε (Doroshenko et al. 2022, Theorem 3.3); the
    composition's own error terms (finite mass above its window, floating point) are carried in ``error`` and paid
    for in the upper δ of the ledger."""
    losses, masses, to_infinity = _trimmed(composed, budget, pessimistic=True)
    k = np.floor(losses / interval).astype(np.int64)
    below = k * interval
    t = np.clip(-np.expm1(np.minimum(below - losses, 0.0)) / -math.expm1(-interval), 0.0, 1.0)
    pmf = _to_grid_pmf(np.concatenate([k, k + 1]), np.concatenate([masses * (1 - t), masses * t]), 0.0)
    return GridPmf(
        start=pmf.start,
        pmf=pmf.pmf,
        infinity_mass=min(composed.infinity_mass + to_infinity, 1.0),
        error=composed.above + composed.round_off,
    )


def _coarse_optimistic(composed: ComposedPmf, interval: float, budget: float) -> GridPmf:
    """An event's composition on the grid of ``interval``, dominated by it: its tails trimmed (:func:`_trimmed`),
    its atoms are merged into cells of
    Δ/``_SUB_CELLS`` where it holds all but ``DEFAULT_FINE_MASS`` at each end and of ``COARSE_SPAN``·Δ beyond (a
    post-processing), then the cells into buckets whose atoms sit on grid points by the inscribed sweep of
    :func:`discretise` (:func:`_sweep`: the polygon of the buckets lies on or above Ψ, the curve of the
    composition, so every hockey-stick divergence, at every ε ∈ ℝ, is smaller; Meiser and Mohammadi, CCS 2018).

    The composition's masses stand for a measure pair (P-masses p, Q-masses p·e^{−l}); the argument needs no more:
    for any other factor X, H_ε(A ⊗ X) = E_{X}[H_{ε − L_X}(A)], so a smaller H_t(A) at every t stays smaller after
    composition. The composition's error terms (mass outside its window, floating point) are carried in ``error``.
    """
    losses, p, _ = _trimmed(composed, budget, pessimistic=False)
    if p.size == 0:
        return GridPmf(start=0, pmf=np.zeros(1), infinity_mass=min(composed.infinity_mass, 1.0))
    q = p * np.exp(-losses)
    # Cells: runs of consecutive atoms with one key (fine keys in the bulk, coarse ones in the tails).
    fine = np.floor(losses * (_SUB_CELLS / interval))
    coarse = np.floor(losses / (COARSE_SPAN * interval)) * (COARSE_SPAN * _SUB_CELLS)
    below = np.cumsum(p)
    bulk = (below > DEFAULT_FINE_MASS) & (below[-1] - below + p > DEFAULT_FINE_MASS)
    cells = np.where(bulk, fine, coarse)
    first = np.flatnonzero(np.diff(cells, prepend=cells[:1] - 1))
    cell_p, cell_q = np.add.reduceat(p, first), np.add.reduceat(q, first)
    keep = (cell_p > 0) & (cell_q > 0)
    cell_p, cell_q = cell_p[keep], cell_q[keep]
    # Each cell's target: the first grid point kΔ with e^{kΔ}·Q ≥ P (its merged atom log(P/Q) lies at or below it),
    # so a bucket opened at that point only gains slack from the cell. Its lower end is put just below it (odd half
    # intervals): a bucket whose point is below the cell's target checks the slack, one at or above it need not.
    k = np.ceil((np.log(cell_p) - np.log(cell_q)) / interval)
    k += np.exp(k * interval) * cell_q < cell_p
    targets = 2.0 * k
    out_k, out_p, out_q, slack = _sweep(
        (targets - 1.0).tolist(), cell_p.tolist(), cell_q.tolist(), targets.tolist(), interval
    )
    _settle(out_k, out_p, out_q, slack, interval, downward=False)
    pmf = _to_grid_pmf(np.array(out_k, dtype=np.int64), np.array(out_p), 0.0)
    return GridPmf(
        start=pmf.start,
        pmf=pmf.pmf,
        infinity_mass=min(composed.infinity_mass, 1.0),
        error=composed.outside + composed.round_off,
    )


def _pure_atom(event: ev.Event) -> float | None:
    """The loss of a pure-DP event's atom (Laplace ±ε₀, randomized response ±ε), or None."""
    match event:
        case ev.Laplace():
            return 1.0 / event.noise_multiplier
        case ev.RandomizedResponse():
            return event.epsilon
    return None


#: λ at which an event's log-MGF is probed to size windows (both signs; see :func:`_refinement_levels`).
_PROBE_LAMBDAS = np.concatenate([2.0 ** np.arange(-7.0, 14.0, 1.5), -(2.0 ** np.arange(-7.0, 14.0, 1.5))])
#: Tail mass at which probed windows are sized (only sizes grids: no bound uses it).
_PROBE_TAIL = 1e-15
#: Probe summaries of events already seen: (event, relation) → (log-MGF at ``_PROBE_LAMBDAS``, standard deviation).
_PROBES: dict = {}
_MAX_PROBES = 4096


def _summary(pld: EventPld, interval: float) -> tuple[np.ndarray, float, bool]:
    """(log E[e^{λL}] at ``_PROBE_LAMBDAS``, the standard deviation of L) of one run from its pessimistic PMFs (the
    larger of its two directions), and whether the grid resolves it (a standard deviation of at least half an
    interval: the split then at most doubles the variance)."""
    pmfs = [d.pessimistic for d in (pld.remove, pld.add) if d is not None]
    spread = max(math.sqrt(_moments(pmf, interval)[2]) for pmf in pmfs)
    log_mgf = np.max([_log_mgf(pmf, interval, _PROBE_LAMBDAS) for pmf in pmfs], axis=0)
    return log_mgf, spread, spread >= 0.5 * interval


def _probed(event: ev.Event, pld: EventPld, grid: LossGrid) -> tuple[np.ndarray, float]:
    """The probe summary of one run of ``event`` (:func:`_summary`) from its PMFs on the grid of ``FIRST_INTERVAL``
    (``pld`` when ``grid`` is that one: the first grid of an adaptive run), or on a grid 8, 64, … times finer when that
    does not resolve it (cheap: the event is then narrow; at most ``_MAX_PROBE_POINTS`` intervals). Remembered per
    event; it depends on the event only, so a ledger's grids do not depend on what was accounted before."""
    try:
        key = (event, grid.neighboring)
        known = _PROBES.get(key)
    except TypeError:  # an unhashable plug-in event
        key = known = None
    if known is not None:
        return known
    interval = FIRST_INTERVAL
    if grid.interval != interval:
        pld = loss_distribution(event, LossGrid(interval=interval, neighboring=grid.neighboring))
    log_mgf, spread, resolved = _summary(pld, interval)
    for _ in range(4):
        size = max(d.pessimistic.pmf.size for d in (pld.remove, pld.add) if d is not None)
        if resolved or size * 8 > _MAX_PROBE_POINTS:
            break
        interval /= 8.0
        try:
            pld = loss_distribution(event, LossGrid(interval=interval, neighboring=grid.neighboring))
        except WindowTooLargeError:
            break
        log_mgf, spread, resolved = _summary(pld, interval)
    log_mgf.flags.writeable = False
    if key is not None:
        if len(_PROBES) >= _MAX_PROBES:
            _PROBES.clear()
        _PROBES[key] = (log_mgf, spread)
    return log_mgf, spread


def _probed_width(log_mgf: np.ndarray) -> float:
    """top − bottom of the window holding all but ``_PROBE_TAIL`` at each end, by Chernoff at ``_PROBE_LAMBDAS``."""
    positive = _PROBE_LAMBDAS > 0
    with np.errstate(invalid="ignore"):
        edges = (log_mgf - math.log(_PROBE_TAIL)) / _PROBE_LAMBDAS
    width = float(np.nanmin(edges[positive]) - np.nanmax(edges[~positive]))
    return width if math.isfinite(width) and width > 0 else math.inf


def _refinement_levels(
    items: list[tuple[ev.Event, int]], plds: list[EventPld], gaussian_mu2: float, grid: LossGrid
) -> list[int]:
    """How much finer than the shared grid each event's runs are composed (0: on the shared grid itself).

    On a grid of interval Δ every run of an event adds its discretisation error: a split or a merge adds up to Δ²/4
    to the variance of the loss, and more (a merge moves mass down by up to Δ) when the loss of one run fits in a
    few intervals (a subsampled step with q = 10⁻⁴ has losses of ~10⁻⁴ nats). n runs of it on a grid 2^j times finer,
    composed there and moved onto the shared grid once, add about n·Δ²/4^j + Δ² instead of n·Δ². The price is the
    event's own window: W·2^j/Δ points for a composition of width W (its tails included: a subsampled mechanism's
    rare large losses make W far wider than its standard deviation), each costing α ≈ ``_OWN_COST`` points of the
    shared window (two transforms and the power), against W_ledger/Δ points of the shared one. Minimising the cost
    Σ α·W·2^j/Δ + m·W_ledger/Δ at a fixed total error Σ n·Δ²/4^j + m·Δ² (Lagrange) gives
    2^j = (n·W_ledger/(α·W))^{1/3}, independent of Δ, so the bracket width keeps shrinking like Δ² as the shared grid
    is refined. A refined event's own grid also resolves one run (Δ/2^j ≤ sd/2, sd its standard deviation), else its
    merges lose mass moved down by up to a whole interval at every run.

    Refining has overheads the estimate leaves out (discretising on a finer grid, moving the composition onto the
    shared one), so an event is refined only when its composition is at most 1/``_OWN_SHARE`` as wide as the
    ledger's and its grid comes out at least 2^``_MIN_LEVEL`` times finer: events as wide as the ledger (a
    heterogeneous DP-SGD schedule) and single mechanisms stay on the shared grid, as before. Widths are Chernoff
    estimates from each event's probed log-MGF (:func:`_probed`, from ``plds``: the events' PMFs on the shared
    grid); events run once are not probed (they stay on the shared grid; leaving them out only narrows W_ledger).
    """
    levels = [0] * len(items)
    repeated = [i for i, (_, count) in enumerate(items) if count >= 2]
    if not repeated or (len(items) == 1 and gaussian_mu2 == 0):  # one mechanism is the whole ledger: nothing to gain
        return levels
    probes = {i: _probed(items[i][0], plds[i], grid) for i in repeated}
    ledger = _PROBE_LAMBDAS * gaussian_mu2 / 2.0 * (1.0 + _PROBE_LAMBDAS)  # N(μ²/2, μ²): λμ²/2 + λ²μ²/2
    for i, (log_mgf, _) in probes.items():
        ledger = ledger + items[i][1] * log_mgf
    ledger_width = _probed_width(ledger)
    for i, (log_mgf, spread) in probes.items():
        count = items[i][1]
        width = _probed_width(count * log_mgf)
        if not (math.isfinite(width) and width * _OWN_SHARE <= ledger_width and spread > 0):
            continue
        optimal = round(math.log2(count * ledger_width / (_OWN_COST * width)) / 3.0)
        resolved = math.ceil(math.log2(2.0 * grid.interval / spread))
        level = min(max(optimal, resolved), MAX_REFINEMENT)
        levels[i] = level if level >= _MIN_LEVEL else 0
    return levels


def _own_interval(event: ev.Event, interval: float, level: int) -> float:
    """Δ/2^level, or for a pure-DP event its atom ε₀/2^m ≤ Δ/2^level (its atoms then sit on its own grid)."""
    fine = interval / 2.0**level
    atom = _pure_atom(event)
    if atom is None:
        return fine
    return atom / 2.0 ** max(0, math.ceil(math.log2(atom / fine)))


def _moved_onto(pmfs: LossPmfs, count: int, own: float, interval: float, window_tail: float, precision: float):
    """``count`` runs of one direction composed on its own grid of interval ``own``, moved onto ``interval``."""
    upper = _compose_kind([(pmfs.pessimistic, count)], own, window_tail, precision)
    lower = _compose_kind([(pmfs.optimistic, count)], own, window_tail, precision)
    return LossPmfs(
        pessimistic=_coarse_pessimistic(upper, interval, 0.25 * precision),
        optimistic=_coarse_optimistic(lower, interval, 0.25 * precision),
    )


def _composed_on_own_grid(
    event: ev.Event, count: int, level: int, grid: LossGrid, window_tail: float, precision: float
) -> tuple[EventPld, int]:
    """``count`` runs of ``event`` composed on a grid of their own (:func:`_own_interval`), then moved onto ``grid``
    (pessimistic: :func:`_coarse_pessimistic`, optimistic: :func:`_coarse_optimistic`), as (its PLD, 1); (the event's
    PLD, count) directly on ``grid`` if even its coarsest own grid would be too large."""
    while level > 0:
        own = LossGrid(
            interval=_own_interval(event, grid.interval, level),
            neighboring=grid.neighboring,
            tail_mass=grid.tail_mass,
            fine_mass=grid.fine_mass,
            refining=grid.refining,
        )
        try:
            pld = _event_loss_distribution(event, own, 0.5 * precision / max(count, 1))
            args = (count, own.interval, grid.interval, window_tail, precision)
            remove = _moved_onto(pld.remove, *args)
            add = _moved_onto(pld.add, *args) if pld.add is not None else None
            return EventPld(remove=remove, add=add), 1
        except WindowTooLargeError:
            level //= 2
    return _event_loss_distribution(event, grid, 0.5 * precision / max(count, 1)), count


@dataclass(frozen=True, slots=True, kw_only=True)
class ComposedDirection:
    """One direction of a composed ledger: the upper (pessimistic) and lower (optimistic) composed PMFs.

    The lower one is composed on first use (``compose_lower``): a bracket needs a direction's lower end only where it
    can raise the ledger's (:meth:`ComposedPld.epsilon_bracket`), and a profile never does (issue 47: the add
    direction of a subsampled Gaussian is far below the remove one, and its optimistic composition was a quarter of
    the work)."""

    upper: ComposedPmf
    compose_lower: list = field(repr=False)  # [a callable giving the lower ComposedPmf], then [that ComposedPmf]

    @property
    def lower(self) -> ComposedPmf:
        if callable(self.compose_lower[0]):
            self.compose_lower[0] = self.compose_lower[0]()
        return self.compose_lower[0]

    def delta_upper(self, epsilons: np.ndarray) -> np.ndarray:
        u = self.upper
        return np.minimum(u.infinity_mass + u.hockey_stick(epsilons) + u.above + u.round_off, 1.0)

    def delta_lower(self, epsilons: np.ndarray) -> np.ndarray:
        low = self.lower
        return np.maximum(low.infinity_mass + low.hockey_stick(epsilons) - low.outside - low.round_off, 0.0)

    def epsilon_upper(self, delta: float) -> float:
        u = self.upper
        return u.epsilon_for(delta - u.infinity_mass - u.above - u.round_off)

    def epsilon_lower(self, delta: float) -> float:
        low = self.lower
        if low.infinity_mass > delta:
            return math.inf
        return low.epsilon_for(delta - low.infinity_mass + low.outside + low.round_off)


@dataclass(frozen=True, slots=True, kw_only=True)
class ComposedPld:
    """A composed ledger on one grid: the remove direction and (for asymmetric ledgers) the add direction."""

    interval: float
    remove: ComposedDirection | None  # None: the ledger is empty or non-private
    add: ComposedDirection | None = None
    non_private: bool = False
    refined_events: int = 0  # events composed on a grid of their own first (see compose)

    def directions(self) -> dict[str, ComposedDirection]:
        out = {}
        if self.remove is not None:
            out["remove"] = self.remove
        if self.add is not None:
            out["add"] = self.add
        return out

    def epsilon_bracket(self, delta: float) -> tuple[float, float]:
        """(lower, upper): the exact ε(δ) of the dominating pairs lies in between (worse direction)."""
        if self.non_private:
            return math.inf, math.inf
        if self.remove is None:
            return 0.0, 0.0
        directions = list(self.directions().values())
        highs = [direction.epsilon_upper(delta) for direction in directions]
        high = max(highs)
        high = conversions.round_up(high) if high > 0 else 0.0
        low = _largest_lower(directions, highs, lambda direction: direction.epsilon_lower(delta))
        low = 0.0 if low <= 0 else (low * (1 - 1e-12) if math.isfinite(low) else low)
        return min(low, high), high

    def delta_bracket(self, epsilon: float) -> tuple[float, float]:
        """(lower, upper) on δ(ε), worse direction."""
        if self.non_private:
            return 1.0, 1.0
        if self.remove is None:
            return 0.0, 0.0
        eps = np.array([epsilon])
        directions = list(self.directions().values())
        highs = [float(d.delta_upper(eps)[0]) for d in directions]
        high = max(highs)
        low = _largest_lower(directions, highs, lambda d: float(d.delta_lower(eps)[0]))
        high = min(conversions.round_up(high), 1.0)
        return min(low * (1 - 1e-12), high), high


def _largest_lower(directions: list[ComposedDirection], highs: list[float], lower: Callable) -> float:
    """max over the directions of ``lower(direction)``, skipping (not composing the lower PMF of) a direction whose
    upper end ``highs[i]`` is at most the largest lower end found so far: its own lower end lies below its upper one,
    so it cannot raise the maximum. Directions are taken by decreasing upper end. The suffix sums of each PMF are
    released once used (a bracket is measured once; they would triple the memory of a long composition)."""
    for direction in directions:
        direction.upper.release()
    best = -math.inf
    for i in sorted(range(len(directions)), key=lambda i: -highs[i]):
        if best > -math.inf and highs[i] <= best:
            continue
        best = max(best, lower(directions[i]))
        directions[i].lower.release()
    return best


def event_precision() -> float | None:
    """The floating-point error (in δ) that one run of the event whose PLD is being built may carry without costing
    the composition's bracket anything visible: its share of :func:`compose`'s ``precision`` divided by its runs;
    None outside a composition. Interpreters with a costly law of their own (the random allocation) spend effort on
    round-off only below it; whatever error they leave is carried in :attr:`GridPmf.error` and paid for in δ."""
    return _EVENT_PRECISION.get()


def _event_loss_distribution(event: ev.Event, grid: LossGrid, precision: float) -> EventPld:
    token = _EVENT_PRECISION.set(precision)
    try:
        return loss_distribution(event, grid)
    finally:
        _EVENT_PRECISION.reset(token)


def compose(
    entries: Iterable[tuple[ev.Event, int]] | ev.Event,
    grid: LossGrid,
    *,
    window_tail: float = DEFAULT_WINDOW_TAIL,
    precision: float = DEFAULT_PRECISION,
) -> ComposedPld:
    """Compose a ledger's PLDs on ``grid`` (both kinds, both directions where they differ).

    Events run many times whose composition is narrow next to the ledger's are composed on a grid of their own first
    and moved onto ``grid`` once (:func:`_refinement_levels`; ``refined_events`` counts them). ``window_tail`` is
    the finite mass each composition may leave outside its window, ``precision`` the floating-point error (in δ)
    below which no effort is spent tightening the bound; both are paid for in δ, and shared by the compositions.

    Raises:
        UnsupportedEventError: an event is not modelled by the engine (nothing is built).

    Example:
        >>> from dplens.accountant import events as ev
        >>> step = ev.PoissonSampled(sampling_rate=0.01, event=ev.Gaussian(noise_multiplier=1.0))
        >>> low, high = compose([(step, 1000)], LossGrid(interval=1e-3)).epsilon_bracket(1e-5)
        >>> low <= 1.8282 <= high, high - low < 0.03
        (True, True)
    """
    if isinstance(entries, ev.Event):
        entries = [(entries, 1)]
    leaves = _leaves(entries)
    if leaves.non_private:
        return ComposedPld(interval=grid.interval, remove=None, non_private=True)
    plds: list[tuple[EventPld, int]] = []
    items = list(leaves.items())
    # Each event's share of the precision: a quarter of it (the composition halves it where it refines) per run.
    on_grid = [_event_loss_distribution(event, grid, 0.25 * precision / max(count, 1)) for event, count in items]
    levels = _refinement_levels(items, on_grid, leaves.gaussian_mu2, grid)
    # The window tail and the precision: half for the ledger's composition, half shared by the events' own.
    refined = sum(level > 0 for level in levels)
    if refined:
        window_tail /= 2
        precision /= 2
    for (event, count), level, pld in zip(items, levels, on_grid, strict=True):
        if level > 0:
            plds.append(_composed_on_own_grid(event, count, level, grid, window_tail / refined, precision / refined))
        else:
            plds.append((pld, count))
    if leaves.gaussian_mu2 > 0:
        plds.append((gaussian_pld(math.sqrt(leaves.gaussian_mu2), grid), 1))
    if not plds:
        return ComposedPld(interval=grid.interval, remove=None)
    asymmetric = any(pld.add is not None for pld, _ in plds)

    def direction(name: str) -> ComposedDirection:
        chosen = [(getattr(pld, name) or pld.remove, count) for pld, count in plds]
        optimistic = [(c.optimistic, n) for c, n in chosen]
        return ComposedDirection(
            upper=_compose_kind([(c.pessimistic, n) for c, n in chosen], grid.interval, window_tail, precision),
            compose_lower=[functools.partial(_compose_kind, optimistic, grid.interval, window_tail, precision)],
        )

    return ComposedPld(
        interval=grid.interval,
        remove=direction("remove"),
        add=direction("add") if asymmetric else None,
        refined_events=refined,
    )


# --------------------------------------------------------------------------------------------
# Adaptive grids: refine until the bracket is within a relative tolerance
# --------------------------------------------------------------------------------------------

#: The first grid of an adaptive run; the bracket width then predicts the interval needed (width ∝ Δ²).
FIRST_INTERVAL = 2e-3
#: Adaptive runs stop refining here (the bracket is returned with ``tolerance_met=False``).
SMALLEST_INTERVAL = 1e-9
_MAX_ROUNDS = 8
#: A round that leaves the bracket wider than this fraction of the last one ends the refinement (see :func:`_refine`).
_STALLED = 0.75


@dataclass(frozen=True, slots=True, kw_only=True)
class Bracket:
    """A certified bracket ``lower ≤ exact ≤ upper`` from the engine, with the grid that produced it."""

    lower: float
    upper: float
    interval: float
    tolerance: float | None
    tolerance_met: bool
    pld: ComposedPld = field(repr=False)
    note: str | None = None  # why an adaptive run stopped before its tolerance (None when it met it)

    @property
    def relative_width(self) -> float:
        if self.upper == 0 or self.upper == self.lower:
            return 0.0
        if math.isinf(self.upper):
            return math.inf
        return (self.upper - self.lower) / self.upper


def _atom_interval(entries: list[tuple[ev.Event, int]], interval: float) -> float:
    """Δ aligned to the first pure-DP atom of the ledger (Laplace ±ε₀, randomized response ±ε): ε₀/2^m ≤ Δ, so
    the atoms sit exactly on the grid (dividing by a power of two is exact in binary floating point)."""
    for event, _ in _leaves(entries).items():
        atom = _pure_atom(event)
        if atom is None:
            continue
        if atom >= interval:
            return atom / 2.0 ** math.ceil(math.log2(atom / interval))
        return interval
    return interval


def _within(low: float, high: float, tolerance: float) -> bool:
    """(high − low) ≤ tolerance·high; near zero, relative to 1e-6 instead (a relative width means nothing there)."""
    return high == low or (high - low) <= tolerance * max(high, 1e-6)


def _refine(
    entries: list[tuple[ev.Event, int]],
    *,
    neighboring: ev.NeighboringRelation,
    tolerance: float | None,
    interval: float | None,
    measure: Callable[[ComposedPld], tuple[float, float]],
    window_tail: float,
    precision: Callable[[float | None], float],
) -> Bracket:
    """``precision(upper)``: the floating-point error worth no effort, given the last round's upper end (None before
    the first round)."""
    if interval is not None:
        grid_interval = interval
        pld = compose(
            entries,
            LossGrid(interval=grid_interval, neighboring=neighboring),
            window_tail=window_tail,
            precision=precision(None),
        )
        low, high = measure(pld)
        met = tolerance is None or _within(low, high, tolerance)
        return Bracket(lower=low, upper=high, interval=grid_interval, tolerance=tolerance, tolerance_met=met, pld=pld)
    if tolerance is None or not (0 < tolerance < 1):
        raise ValueError(f"tolerance must be in (0, 1); got {tolerance!r}")
    resolving = _resolving_interval(entries)
    current = _atom_interval(entries, min(FIRST_INTERVAL, resolving))
    best, failed, reason = None, 0.0, "the refinement ran out of rounds"
    refining = True  # events may coarsen their own discretisation with the interval (LossGrid.refining)
    retried = False  # this round is the rerun of a stalled interval with the finest discretisations
    for _ in range(_MAX_ROUNDS):
        try:
            pld = compose(
                entries,
                LossGrid(interval=current, neighboring=neighboring, refining=refining),
                window_tail=window_tail,
                precision=precision(None if best is None else best.upper),
            )
            low, high = measure(pld)  # a direction's lower PMF is composed here, where it is needed
        except WindowTooLargeError:
            failed = max(failed, current)
            if best is not None:
                reason = f"a finer grid (interval {current:.3g}) would exceed the engine's window"
                break
            if current >= 0.5:
                raise
            current = _atom_interval(entries, current * 8.0)  # a very wide ledger: start coarser
            continue
        previous = best
        best = Bracket(lower=low, upper=high, interval=current, tolerance=tolerance, tolerance_met=False, pld=pld)
        if math.isinf(high) and refining:
            # An infinite upper end on coarsened discretisations may be theirs, not the ledger's (a random allocation
            # of 200 steps at σ = 0.7, δ = 10⁻⁹: the former log-S laws' error terms above δ): once more with the finest.
            refining, retried = False, True
            continue
        if math.isinf(high) or _within(low, high, tolerance):
            return Bracket(lower=low, upper=high, interval=current, tolerance=tolerance, tolerance_met=True, pld=pld)
        if retried and previous is not None and previous.upper - previous.lower < high - low:
            best = previous  # the finest discretisations did not help here: the narrower certified bracket stands
            break
        retried = False
        following = _next_interval(current, best, previous, tolerance, refined=pld.refined_events > 0)
        reason = _stop_reason(current, following, failed, resolving, best)
        if reason is not None and refining:
            # An event's coarsened discretisation may be what stalled the bracket (σ = 0.8, 500 steps of a random
            # allocation: 0.255 % at a sixteenth of its points): the same interval once more with the finest ones.
            refining, retried = False, True
            continue
        if reason is not None:
            break
        current = _atom_interval(entries, max(following, SMALLEST_INTERVAL))
    return Bracket(
        lower=best.lower,
        upper=best.upper,
        interval=best.interval,
        tolerance=tolerance,
        tolerance_met=False,
        pld=best.pld,
        note=reason,
    )


def _stop_reason(current: float, following: float | None, failed: float, resolving: float, best: Bracket):
    """Why an adaptive run stops before its tolerance (None: it goes on to ``following``)."""
    if current <= SMALLEST_INTERVAL:
        return f"the grid reached the smallest interval ({SMALLEST_INTERVAL:g})"
    if following is None:
        return "a finer grid no longer narrowed the bracket"
    if following <= failed:
        return f"a finer grid (interval {following:.3g}) would exceed the engine's window"
    if not _resolved(best) and resolving <= failed:
        # One run is resolved only on a grid of about q/2, which is known to be too large: stop now.
        return (
            f"the lower end is unresolved: a subsampled step needs a grid of interval about {resolving:.3g} "
            "(half its sampling rate), beyond the engine's window"
        )
    return None


def _resolved(bracket: Bracket) -> bool:
    """Whether a bracket's lower end has left 0: before that its width is its upper end and says nothing of Δ."""
    return bracket.lower > 0 and math.isfinite(bracket.upper)


def _next_interval(
    current: float, best: Bracket, previous: Bracket | None, tolerance: float, *, refined: bool
) -> float | None:
    """The next grid of an adaptive run, or None when a finer one would no longer narrow the bracket.

    While the lower end is still 0 the grid does not yet resolve one run of some event (the optimistic merge lumps
    its losses together at every run) and the width predicts nothing: the grid is refined fourfold. Once it is
    resolved the width shrinks like Δ² (split and merge change each step's variance by O(Δ²)); aim at 85 % of the
    goal. With events on grids of their own it shrinks more slowly (an own grid aligned to a pure-DP atom is up to
    twice finer than Δ/2^j, and a coarse shared grid makes an event's own grid finer to resolve it): like Δ^1.5. A
    resolved round that leaves the bracket wider than ``_STALLED`` of the last resolved one ends the run (an event's
    own discretisation dominates it).
    """
    width = best.upper - best.lower
    if not _resolved(best):
        return current * 0.25
    if previous is not None and _resolved(previous) and width > _STALLED * (previous.upper - previous.lower):
        return None
    goal = tolerance * best.upper * 0.85
    power = 1.5 if refined else 2.0
    factor = (goal / width) ** (1.0 / power) if width > 0 else 0.5
    return current * min(max(factor, 0.1), 0.7)


def _resolving_interval(entries: list[tuple[ev.Event, int]]) -> float:
    """An interval that resolves one run of each repeated subsampled event: half its smallest sampling rate q.

    A subsampled step's losses (remove direction) start at log(1 − q) ≈ −q and most of its mass lies within a few q
    of it; on a grid coarser than q no dominated PMF with atoms on the grid resolves that mass (see
    :attr:`PrivacyLoss.alignment`), so the lower end of a long composition collapses to 0. Measured on the Poisson
    regime of issue 47 (q ≥ 5·10⁻⁶, σ ≥ 0.45, T ≤ 2·10⁶): q/2 brackets within 0.05–0.4 %, q within 8 %, 2q at 0.
    ∞ when no repeated event needs it.
    """
    finest = math.inf
    for event, count in _leaves(entries).items():
        if count < 2:
            continue
        rate = _subsampling_rate(event)
        if rate is not None and 0 < rate < 1:
            finest = min(finest, 0.5 * rate)
    return finest


def _subsampling_rate(event: ev.Event) -> float | None:
    """The probability that a run of ``event`` touches the record (None: not a subsampled mechanism)."""
    match event:
        case ev.PoissonSampled() | ev.TruncatedSubsampledGaussian():
            return event.sampling_rate
        case ev.MixtureOfGaussians():
            probs = [p for p, c in zip(event.sampling_probs, event.sensitivities, strict=True) if c != 0]
            return float(sum(probs)) if probs else None
    return None


def epsilon_bracket(
    entries: Iterable[tuple[ev.Event, int]] | ev.Event,
    delta: float,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    tolerance: float | None = 1e-3,
    interval: float | None = None,
) -> Bracket:
    """A certified bracket on ε(δ) of a ledger: refine the grid until (upper − lower) ≤ tolerance·upper.

    With ``interval`` the grid is fixed (one pass; ``tolerance_met`` says whether the width is within tolerance).

    Example:
        >>> from dplens.accountant import events as ev
        >>> step = ev.PoissonSampled(sampling_rate=256 / 60000, event=ev.Gaussian(noise_multiplier=1.1))
        >>> bracket = epsilon_bracket([(step, 14063)], 1e-5)
        >>> bracket.lower <= 2.3817 <= bracket.upper, bracket.upper - bracket.lower <= 1e-3 * bracket.upper
        (True, True)
    """
    delta = conversions.check_delta(delta)
    entries = [(entries, 1)] if isinstance(entries, ev.Event) else list(entries)
    return _refine(
        entries,
        neighboring=neighboring,
        tolerance=tolerance,
        interval=interval,
        measure=lambda pld: pld.epsilon_bracket(delta),
        window_tail=min(1e-11, delta * 1e-6),
        precision=lambda upper: delta * tolerance / 4.0 if tolerance else delta * 1e-4,
    )


def delta_bracket(
    entries: Iterable[tuple[ev.Event, int]] | ev.Event,
    epsilon: float,
    *,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE,
    tolerance: float | None = 1e-3,
    interval: float | None = None,
) -> Bracket:
    """A certified bracket on δ(ε) of a ledger (relative width ≤ tolerance, or the fixed ``interval``)."""
    epsilon = conversions.check_epsilon(epsilon)
    entries = [(entries, 1)] if isinstance(entries, ev.Event) else list(entries)
    return _refine(
        entries,
        neighboring=neighboring,
        tolerance=tolerance,
        interval=interval,
        measure=lambda pld: pld.delta_bracket(epsilon),
        window_tail=DEFAULT_WINDOW_TAIL,
        precision=lambda upper: DEFAULT_PRECISION if upper is None else max(upper * (tolerance or 1e-3) / 4.0, 1e-300),
    )
