"""Batch samplers of DP-SGD as events: what a training's sampler does to the ε of its Gaussian steps.

Poisson sampling is :class:`~dplens.accountant.events.PoissonSampled` (and, truncated,
:class:`~dplens.accountant.events.TruncatedSubsampledGaussian`); fixed-size subsets drawn afresh each step are
:class:`~dplens.accountant.events.SampledWithoutReplacement`. This module adds the samplers whose batches are *not*
independent from step to step:

- :class:`RandomAllocation` — balls-and-bins: every epoch each record is placed in ``selected`` of the ``steps``
  steps, uniformly and independently of the other records (Chua et al., "Balls-and-Bins Sampling for DP-SGD",
  AISTATS 2025; accounted by Feldman & Shenfeld, arXiv 2502.08202 and 2602.17284: a certified bracket for one step
  per epoch, :mod:`dplens.accountant.allocation`).
- :class:`FixedBins` — jax_privacy's ``BallsInBinsSampling``: the bins are drawn *once* and every cycle runs them in
  the same order, so the whole training is one allocation of 1 of ``steps`` with noise σ/√cycles (about 8× the ε of a
  fresh allocation per epoch at σ = 1, t = 100, 10 cycles).
- :class:`ShuffledBatches` — a permutation cut into batches of a fixed size, reshuffled every epoch or once. The only
  general upper bound known is without amplification (each record in exactly one batch per epoch: μ-GDP with
  μ = Δ·√E/σ); the lower bounds are those of Chua, Ghazi, Kamath, Kumar, Manurangsi, Sinha, Zhang ("How Private are
  DP-SGD Implementations?", ICML 2024; "Scalable DP-SGD: Shuffling vs. Poisson Subsampling", NeurIPS 2024): the truth
  lies in between and dplens reports both ends.
- :class:`CyclicBatches` — the same batches in the same order every epoch: no amplification, exactly μ-GDP.

Fixed-size batches leave add/remove ill-defined (adding a record changes the batches): shuffled and cyclic batches
are stated under zero-out (``REPLACE_SPECIAL``: a record replaced by one contributing a zero gradient; sensitivity
C, as jax_privacy compares samplers) or substitution (``REPLACE_ONE``: sensitivity 2C). Balls-and-bins keeps
add/remove (zero-out gives the same dominating pair).

**Bounds and brackets.** An event whose accounted pair is attained by some pair of data sets is *tight*: dplens's
PLD engine brackets its exact ε, and the lower end of the bracket bounds the mechanism's ε from below. An event that
is not (shuffled batches; an allocation of k > 1 steps, accounted through a decomposition) declares
``lower_bound_events()``: events whose pairs are attained by the mechanism, each one a valid lower-bound
construction; the PLD route then reports the largest of their certified lower ends as ``epsilon_lower``, never the
lower end of the upper bound's own bracket (:func:`dplens.accountant.pld.pld_epsilon`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from dplens.accountant import events as ev
from dplens.accountant import pld, pld_engine, rdp
from dplens.accountant.curves import Gdp, PrivacyProfile, RdpCurve
from dplens.accountant.rdp import UnsupportedEventError

__all__ = [
    "CyclicBatches",
    "FixedBins",
    "FixedSizeUserStep",
    "RandomAllocation",
    "ShuffleMaxStatistic",
    "ShuffledBatches",
    "ZeroedInFixedSizeBatch",
]

ZERO_OUT = ev.NeighboringRelation.REPLACE_SPECIAL
REPLACE_ONE = ev.NeighboringRelation.REPLACE_ONE
_FIXED_SIZE_RELATIONS = (ZERO_OUT, REPLACE_ONE)
_ALLOCATION_RELATIONS = (ev.ADD_REMOVE, ZERO_OUT)


def _check_relation(name: str, relation: ev.NeighboringRelation, allowed: tuple[ev.NeighboringRelation, ...]):
    if relation not in allowed:
        names = " or ".join(repr(r.value) for r in allowed)
        shown = relation.value if isinstance(relation, ev.NeighboringRelation) else relation
        raise ValueError(f"{name} is accounted under neighboring={names}; got neighboring={shown!r}")


def _sensitivity(relation: ev.NeighboringRelation) -> float:
    """Δ per unit clipping norm of one record's whole contribution to one batch: 1 under zero-out, 2 substituted."""
    return 2.0 if relation is REPLACE_ONE else 1.0


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class RandomAllocation(ev.Event):
    """One epoch of balls-and-bins: each record takes part in ``selected`` of the ``steps`` Gaussian steps, chosen
    uniformly at random and independently of the other records (with probability ``inclusion`` at all; 1 for every
    record every epoch). Compose it ``epochs`` times for a fresh allocation each epoch.

    For one step per epoch the dominating pair is attained and dplens brackets its ε (Feldman & Shenfeld, arXiv
    2502.08202, Section 3; :mod:`dplens.accountant.allocation`). For ``selected`` = k > 1 the allocation is a
    uniform random partition of the steps into k groups of ⌊t/k⌋ or ⌈t/k⌉ followed by one step per group (the
    k-subset so drawn is uniform by symmetry), so revealing the partition — a composition of k allocations of one
    step — gives an upper bound (Feldman & Shenfeld, ibid., the decomposition used by pld-accounting); its lower end
    bounds that decomposition, not the truth, so the lower bound is the sum statistic instead (Σ of the t noisy
    sums: N(k, tσ²) against N(0, tσ²), a post-processing).

    ``noise_multiplier`` is σ per unit clipping norm. Neighbouring: add/remove or zero-out (the same pair).

    Example (σ = 1, 100 steps per epoch; Poisson sampling at q = 1/100 gives 0.7181):
        >>> from dplens.accountant.compose import Accountant
        >>> result = Accountant().compose(RandomAllocation(noise_multiplier=1.0, steps=100)).epsilon_result(1e-5)
        >>> 0.6085 <= result.epsilon_lower <= result.epsilon <= 0.6357   # within pld-accounting 2.0's bracket
        True
    """

    noise_multiplier: float
    steps: int
    selected: int = 1
    inclusion: float = 1.0
    neighboring: ev.NeighboringRelation = ev.ADD_REMOVE

    def __post_init__(self) -> None:
        ev._positive("noise_multiplier", self.noise_multiplier)
        ev._count("steps", self.steps, minimum=1)
        ev._count("selected", self.selected, minimum=1)
        if self.selected > self.steps:
            raise ValueError(
                f"selected must be <= steps (a record takes part in at most every step of an epoch); got "
                f"selected={self.selected!r}, steps={self.steps!r}"
            )
        ev._probability("inclusion", self.inclusion)
        if self.inclusion < 1 and 1 < self.selected < self.steps:
            raise ValueError(f"inclusion < 1 is supported for selected=1 only; got selected={self.selected!r}")
        _check_relation("a random allocation", self.neighboring, _ALLOCATION_RELATIONS)

    @property
    def sampler(self) -> str:
        return "balls-and-bins"

    def _every_step(self) -> bool:
        return self.selected == self.steps

    def standard_event(self) -> ev.Event | None:
        """What the PLD engine composes instead, where that is not the allocation itself: a record in every step of
        the epoch is k Gaussian steps (with probability ``inclusion``: a Poisson-sampled one); k > 1 of t steps is
        bounded by the decomposition (:meth:`decomposition`; an upper bound only, see :meth:`lower_bound_events`)."""
        if self._every_step():
            gaussian = ev.Gaussian(noise_multiplier=self.noise_multiplier / math.sqrt(self.steps))
            if self.inclusion == 1.0:
                return gaussian
            return ev.PoissonSampled(sampling_rate=self.inclusion, event=gaussian)
        if self.selected > 1:
            parts = [
                part if count == 1 else ev.SelfComposed(event=part, count=count) for part, count in self.decomposition()
            ]
            return parts[0] if len(parts) == 1 else ev.Composed(events=tuple(parts))
        return None

    def decomposition(self) -> tuple[tuple[RandomAllocation, int], ...]:
        """k > 1: (allocation of 1 of ⌊t/k⌋, count), (1 of ⌈t/k⌉, count) whose composition bounds this one."""
        low = self.steps // self.selected
        extra = self.steps - low * self.selected  # groups of ⌈t/k⌉ = low + 1
        parts = []
        for size, count in ((low, self.selected - extra), (low + 1, extra)):
            if count > 0:
                parts.append((RandomAllocation(noise_multiplier=self.noise_multiplier, steps=size), count))
        return tuple(parts)

    def lower_bound_events(self) -> tuple[ev.Event, ...] | None:
        """None for one step per epoch (tight: the bracket's own lower end is valid); else the sum statistic."""
        if self.selected == 1 or self._every_step():
            return None
        return (ev.Gaussian(noise_multiplier=self.noise_multiplier * math.sqrt(self.steps) / self.selected),)


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class FixedBins(ev.Event):
    """Balls-and-bins with the bins drawn once: each record sits in one of ``steps`` bins for the whole training and
    every one of the ``cycles`` cycles runs the bins in the same order (jax_privacy's ``BallsInBinsSampling``).

    A record's E steps are then fixed once its bin is: summing its bin's E noisy outputs is sufficient, so the run is
    one random allocation of 1 of ``steps`` with noise multiplier σ/√E — a single allocation for the whole training,
    *not* a fresh one per epoch (:class:`RandomAllocation` composed E times).

    Example (σ = 1, t = 100, 10 cycles: pld-accounting 2.0 gives [13.24, 13.27]; fresh allocations 1.66–1.74):
        >>> from dplens.accountant.compose import Accountant
        >>> result = Accountant().compose(FixedBins(noise_multiplier=1.0, steps=100, cycles=10)).epsilon_result(1e-5)
        >>> 13.2 < result.epsilon_lower <= result.epsilon < 13.3
        True
    """

    noise_multiplier: float
    steps: int
    cycles: int
    neighboring: ev.NeighboringRelation = ev.ADD_REMOVE

    def __post_init__(self) -> None:
        ev._positive("noise_multiplier", self.noise_multiplier)
        ev._count("steps", self.steps, minimum=1)
        ev._count("cycles", self.cycles, minimum=1)
        _check_relation("fixed bins", self.neighboring, _ALLOCATION_RELATIONS)

    @property
    def sampler(self) -> str:
        return "fixed-bins"

    def standard_event(self) -> ev.Event:
        return RandomAllocation(
            noise_multiplier=self.noise_multiplier / math.sqrt(self.cycles),
            steps=self.steps,
            neighboring=self.neighboring,
        )


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class ShuffledBatches(ev.Event):
    """DP-SGD on shuffled fixed-size batches: ``epochs`` passes over ``dataset_size`` records in batches of
    ``batch_size`` (the last batch smaller, or dropped with ``drop_last``), the order drawn afresh every epoch
    (``reshuffle``) or once for the whole training.

    Upper bound (valid for any data): every record is in at most one batch per epoch, so the run is μ-GDP with
    μ = Δ·√E/σ (Δ = 1 under zero-out, 2 under substitution) — no amplification; no general theorem gives more.
    Lower bounds (attained by pairs of data sets, hence valid; the larger is reported): records other than the
    differing one with one common gradient make only the differing record's batch index matter, uniform over the
    batches — a random allocation of 1 of t (Chua et al. ICML 2024, the pair with the others at 0; under substitution
    the replacement equals the others, so the shift is 2: σ/2); and the others at −1 with the record at +1 against
    ⊥ (zero-out), where the record's batch and ⊥'s both stand out, observed through the largest batch sum
    (:class:`ShuffleMaxStatistic`, Chua et al. NeurIPS 2024). Shuffled once, a record's batch is the same in every
    epoch: the E outputs of each batch position add up, a single allocation with σ/√E.

    Example (σ = 1, 60 000 records in batches of 600, 1 epoch, zero-out):
        >>> from dplens.accountant.compose import Accountant
        >>> run = ShuffledBatches(noise_multiplier=1.0, dataset_size=60000, batch_size=600, epochs=1)
        >>> result = Accountant().compose(run).epsilon_result(1e-5)
        >>> round(result.epsilon, 4), 0.6 < result.epsilon_lower < result.epsilon   # upper: 1-GDP
        (4.3772, True)
    """

    noise_multiplier: float
    dataset_size: int
    batch_size: int
    epochs: int
    reshuffle: bool = True
    drop_last: bool = False
    neighboring: ev.NeighboringRelation = ZERO_OUT

    def __post_init__(self) -> None:
        ev._positive("noise_multiplier", self.noise_multiplier)
        ev._count("dataset_size", self.dataset_size, minimum=1)
        ev._count("batch_size", self.batch_size, minimum=1)
        ev._count("epochs", self.epochs, minimum=1)
        if self.batch_size > self.dataset_size:
            raise ValueError(
                f"batch_size must be <= dataset_size; got batch_size={self.batch_size!r}, "
                f"dataset_size={self.dataset_size!r}"
            )
        for name in ("reshuffle", "drop_last"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool; got {getattr(self, name)!r}")
        _check_relation("shuffled fixed-size batches", self.neighboring, _FIXED_SIZE_RELATIONS)

    @property
    def sampler(self) -> str:
        return "shuffle" if self.reshuffle else "shuffle-once"

    def steps_per_epoch(self) -> int:
        n, b = self.dataset_size, self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def gdp_mu(self) -> float:
        """The no-amplification upper bound: μ = Δ·√E/σ."""
        return _sensitivity(self.neighboring) * math.sqrt(self.epochs) / self.noise_multiplier

    def _observed_batches(self) -> tuple[int, float]:
        """(m, ρ): the full batches a lower-bound adversary looks at and the probability that the differing record
        is in one of them (a smaller last batch is left out: ignoring an output is a post-processing)."""
        full = self.dataset_size // self.batch_size
        return full, full * self.batch_size / self.dataset_size

    def lower_bound_events(self) -> tuple[ev.Event, ...]:
        """The attained pairs above (largest certified lower end wins); () when one batch is all there is."""
        m, rho = self._observed_batches()
        shift = _sensitivity(self.neighboring)
        sigma = self.noise_multiplier / shift
        epochs = self.epochs
        if not self.reshuffle:
            sigma, epochs = sigma / math.sqrt(self.epochs), 1
        if m < 2:  # one batch: the record's batch is known, its output a Gaussian (with probability ρ)
            step = ev.Gaussian(noise_multiplier=sigma)
            single = step if rho == 1.0 else ev.PoissonSampled(sampling_rate=rho, event=step)
            return (single if epochs == 1 else ev.SelfComposed(event=single, count=epochs),)
        alternatives: list[ev.Event] = [RandomAllocation(noise_multiplier=sigma, steps=m, inclusion=rho)]
        if self.neighboring is ZERO_OUT:
            alternatives.append(ShuffleMaxStatistic(noise_multiplier=sigma, batches=m, inclusion=rho))
        if epochs == 1:
            return tuple(alternatives)
        return tuple(ev.SelfComposed(event=a, count=epochs) for a in alternatives)


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class CyclicBatches(ev.Event):
    """The same fixed-size batches in the same order every epoch (a deterministic or sequential loader): a record is
    in exactly one step per epoch, always the same one, so ``epochs`` epochs are exactly μ-GDP with μ = Δ·√E/σ
    (Δ = 1 under zero-out, 2 under substitution): no amplification, and the bound is attained.

    Example:
        >>> from dplens.accountant.compose import Accountant
        >>> round(Accountant().compose(CyclicBatches(noise_multiplier=2.0, epochs=4)).epsilon(1e-5), 4)  # 1-GDP
        4.3772
    """

    noise_multiplier: float
    epochs: int
    neighboring: ev.NeighboringRelation = ZERO_OUT

    def __post_init__(self) -> None:
        ev._positive("noise_multiplier", self.noise_multiplier)
        ev._count("epochs", self.epochs, minimum=1)
        _check_relation("cyclic batches", self.neighboring, _FIXED_SIZE_RELATIONS)

    @property
    def sampler(self) -> str:
        return "cyclic"

    def gdp_mu(self) -> float:
        return _sensitivity(self.neighboring) * math.sqrt(self.epochs) / self.noise_multiplier


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class ShuffleMaxStatistic(ev.Event):
    """A lower-bound construction for one epoch of shuffled batches under zero-out (Chua et al., NeurIPS 2024): the
    differing record's gradient is +1, every other record's −1 and ⊥'s 0, so (per batch, centred at −B) the batch
    holding the record is shifted by 2 under D and by 1 under D′, at the same uniform position among the ``batches``
    observed ones (with probability ``inclusion``). The adversary keeps the largest batch output:

        P(max ≤ x) = (1 − ρ)Φ(x/σ)^m + ρΦ((x − 2)/σ)Φ(x/σ)^{m−1},  Q(max ≤ x) = the same with x − 1,

    a post-processing, so the exact ε of this one-dimensional pair is a lower bound on the shuffled training's ε. Its
    PLD is that of the pair binned on a fine grid of x (a further post-processing): both ends of its bracket are
    lower bounds; only the lower end is used.
    """

    noise_multiplier: float
    batches: int
    inclusion: float = 1.0
    neighboring: ev.NeighboringRelation = ZERO_OUT

    def __post_init__(self) -> None:
        ev._positive("noise_multiplier", self.noise_multiplier)
        ev._count("batches", self.batches, minimum=1)
        ev._probability("inclusion", self.inclusion)
        _check_relation("the shuffle max statistic", self.neighboring, _ALLOCATION_RELATIONS)


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class ZeroedInFixedSizeBatch(ev.Event):
    """A lower-bound construction for a fixed-size subset step (B of N records afresh each step) under zero-out: the
    differing record's gradient is +C, every other record's −C and the null record's 0. A batch without the record
    holds B others (−B·C); one with it (probability γ = B/N) holds B − 1 others and the record, so, centred at −B·C,
    it is shifted by 2C under D and by C under D′ (the null record displaces another too):

        P = (1 − γ)N(0, σ²) + γN(2, σ²),  Q = (1 − γ)N(0, σ²) + γN(1, σ²)  (clip units),

    an attained pair, both directions (:func:`~dplens.accountant.pld_engine.two_mixture_losses`). Its ε is far above
    the Poisson pair at γ (the others at 0), which a zeroed record under fixed-size batches does not obey.
    """

    noise_multiplier: float
    sampling_rate: float
    neighboring: ev.NeighboringRelation = ZERO_OUT

    def __post_init__(self) -> None:
        ev._positive("noise_multiplier", self.noise_multiplier)
        ev._probability("sampling_rate", self.sampling_rate)
        _check_relation("a zeroed record in a fixed-size batch", self.neighboring, (ZERO_OUT,))


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class FixedSizeUserStep(ev.Event):
    """One fixed-size step (B of N examples afresh) for a user with at most K examples, substitution (zero-out is a
    substitution by null examples): a pair that dominates it for every order, used as the user-level upper bound.

    ``rate`` = γ = P(J ≥ 1), J ~ Hypergeometric(N, K, B) the user's examples in the batch; ``labels`` the counts j ≥ 1
    kept and ``weights`` λⱼ = P(J = j)/γ over them (the tail beyond is the caller's δ, :func:`user_level`). The pair:
    a public label j ~ λ, then the symmetrised Poisson remove pair at γ of a Gaussian at distance 2j (noise σ, clip
    units; :func:`~dplens.accountant.pld_engine.symmetrised_subsampled_gaussian` at σ/(2j)). Why it dominates (needs
    N − K ≥ B):

    1. Couple the batches: a uniform order t₁ … t_K of the user's examples, a uniform B-subset of the others in a
       uniform order u₁ … u_B, and J independent; the batch is {t₁ … t_J} ∪ {u_{J+1} … u_B} (given J, uniform parts).
       Given the orders, the outputs are Σⱼ P(J = j)·N(c + vⱼ, σ²) and Σⱼ P(J = j)·N(c + v′ⱼ, σ²) with v₀ = v′₀ = 0,
       vⱼ = Σ_{i ≤ j}(g_{tᵢ} − h_{uᵢ}), v′ⱼ the same with the replacements: |vⱼ|, |v′ⱼ|, |vⱼ − v′ⱼ| ≤ 2j. H_{e^ε} is
       jointly convex, so these pairs suffice.
    2. For ε ≥ 0, advanced joint convexity (Balle, Barthe, Gaboardi 2018, Theorem 2) on the common component N(c):
       H = γ·H_{e^{ε′}}(P₊ ‖ (1 − β)N(c) + βQ₊), e^{ε′} = 1 + (e^ε − 1)/γ; convexity in the second argument, then
       joint convexity over j (weights λ on both sides), bound it by γ·Σⱼ λⱼ·δ_{N(2j)‖N(0)}(ε′) — which is this
       pair's profile at ε (per label, the same identity with N(c) = N(0) = Q). The relation is symmetric, so both
       orders obey it; for ε < 0 the pair's symmetry gives the rest, as for one example
       (:class:`~dplens.accountant.events.SampledWithoutReplacement`, argued in ``pld_engine``).

    Against the mixture Σⱼ P(J = j)·N(2j) vs N(0) (Ganesh 2024, not a per-step dominating pair: ``user_level``) it
    reveals j: the cost is small where γ is small (J ≥ 2 rarely).
    """

    noise_multiplier: float
    rate: float
    labels: tuple[int, ...]
    weights: tuple[float, ...]
    neighboring: ev.NeighboringRelation = REPLACE_ONE

    def __post_init__(self) -> None:
        ev._positive("noise_multiplier", self.noise_multiplier)
        if not (0.0 < self.rate < 1.0):
            raise ValueError(f"rate must be in (0, 1); got {self.rate!r}")
        if not self.labels or len(self.labels) != len(self.weights) or min(self.labels) < 1:
            raise ValueError(f"labels must be counts >= 1, one weight each; got {self.labels!r}, {self.weights!r}")
        if not math.isclose(math.fsum(self.weights), 1.0, rel_tol=1e-9) or min(self.weights) < 0:
            raise ValueError(f"weights must be a distribution; got {self.weights!r}")


# --------------------------------------------------------------------------------------------
# Interpreters
# --------------------------------------------------------------------------------------------


@pld_engine.loss_distribution.register
def _(event: RandomAllocation, grid: pld_engine.LossGrid) -> pld_engine.EventPld:
    """One step per epoch out of t ≥ 2 (the other cases compose their :meth:`RandomAllocation.standard_event`)."""
    if grid.neighboring not in _ALLOCATION_RELATIONS:
        raise UnsupportedEventError(f"a random allocation is accounted under add/remove or zero-out; got {event!r}")
    if event.standard_event() is not None:
        raise UnsupportedEventError(f"compose the standard event of {event!r}")  # the ledger's leaves do
    from dplens.accountant import allocation

    return allocation.allocation_pld(event.noise_multiplier, event.steps, event.inclusion, grid)


@pld_engine.loss_distribution.register
def _(event: FixedSizeUserStep, grid: pld_engine.LossGrid) -> pld_engine.EventPld:
    if grid.neighboring not in _FIXED_SIZE_RELATIONS:
        raise UnsupportedEventError(
            f"a fixed-size user step is accounted under substitution or zero-out; got {event!r}"
        )
    parts = [
        (w, pld_engine.symmetrised_subsampled_gaussian(event.rate, event.noise_multiplier / (2 * j)))
        for j, w in zip(event.labels, event.weights, strict=True)
    ]
    return pld_engine.EventPld(remove=pld_engine.discretise(pld_engine.label_mixture(parts), grid))


@pld_engine.loss_distribution.register
def _(event: ZeroedInFixedSizeBatch, grid: pld_engine.LossGrid) -> pld_engine.EventPld:
    if grid.neighboring is not ZERO_OUT:
        raise UnsupportedEventError(f"a zeroed record in a fixed-size batch is accounted under zero-out; got {event!r}")
    if event.sampling_rate == 0.0:
        return pld_engine.EventPld(
            remove=pld_engine.discretise(pld_engine.PrivacyLoss(masses=None, atoms=((0.0, 1.0, 1.0),)), grid)
        )
    if event.sampling_rate == 1.0:  # every batch holds the record: N(2, σ²) against N(1, σ²)
        return pld_engine.gaussian_pld(1.0 / event.noise_multiplier, grid)
    remove, add = pld_engine.two_mixture_losses(event.sampling_rate, event.noise_multiplier, 2.0, 1.0)
    return pld_engine.EventPld(remove=pld_engine.discretise(remove, grid), add=pld_engine.discretise(add, grid))


@pld_engine.loss_distribution.register
def _(event: ShuffleMaxStatistic, grid: pld_engine.LossGrid) -> pld_engine.EventPld:
    losses, p, q = _max_statistic_pair(event.noise_multiplier, event.batches, event.inclusion)
    remove = pld_engine.discretise(pld_engine.PrivacyLoss(masses=None, atoms=np.column_stack([losses, p, q])), grid)
    add = pld_engine.discretise(pld_engine.PrivacyLoss(masses=None, atoms=np.column_stack([-losses, q, p])), grid)
    return pld_engine.EventPld(remove=remove, add=add)


def max_statistic_cdf(
    x: np.ndarray, *, sigma: float, batches: int, inclusion: float, shift: float
) -> tuple[np.ndarray, np.ndarray]:
    """(P(max ≤ x), P(max > x)) of :class:`ShuffleMaxStatistic`'s largest batch output when the record's batch is
    shifted by ``shift`` (2 under D, 1 under D′): (1 − ρ)Φ(x/σ)^m + ρ·Φ((x − shift)/σ)·Φ(x/σ)^{m−1}, each accurate
    where it is small (the two laws' logs summed, the survival functions by expm1, then mixed)."""
    from scipy.special import log_ndtr

    x = np.asarray(x, dtype=float)
    log_base = log_ndtr(x / sigma)
    with_record = log_ndtr((x - shift) / sigma) + (batches - 1) * log_base
    cdf, sf = np.exp(with_record), -np.expm1(with_record)
    if inclusion < 1.0:
        without = batches * log_base
        cdf = inclusion * cdf + (1.0 - inclusion) * np.exp(without)
        sf = inclusion * sf + (1.0 - inclusion) * -np.expm1(without)
    return cdf, sf


@functools.lru_cache(maxsize=64)
def _max_statistic_pair(sigma: float, batches: int, inclusion: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The binned pair of :class:`ShuffleMaxStatistic`: (log P/Q, P, Q) per bin of x, bins of σ/200 over the range
    holding all but 10⁻²⁰ of both laws; the two tails are bins too (all of it is a post-processing)."""
    z_tail = 9.6  # Φ(−9.6) ≈ 4·10⁻²²
    low = -z_tail * sigma
    high = 2.0 + sigma * (z_tail + math.sqrt(2.0 * math.log(batches)))
    edges = np.arange(low, high + sigma / 200.0, sigma / 200.0)

    def masses(shift: float) -> np.ndarray:
        cdf, sf = max_statistic_cdf(edges, sigma=sigma, batches=batches, inclusion=inclusion, shift=shift)
        # Differences of the CDF below the median and of the survival function above it (small masses keep their
        # relative precision, so their log-ratios stay right in both tails); the tails beyond the grid are bins too.
        cells = np.where(cdf[:-1] < 0.5, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])
        return np.maximum(np.concatenate([[cdf[0]], cells, [sf[-1]]]), 0.0)

    p, q = masses(2.0), masses(1.0)
    # Bins whose masses are near the bottom of the double range carry no precision in their ratio: left out (the
    # pair keeps the rest: dropping mass only lowers δ, so it remains a lower bound).
    keep = (p > 1e-280) & (q > 1e-280)
    return np.log(p[keep]) - np.log(q[keep]), p[keep], q[keep]


@pld.privacy_profile.register
def _(event: ShuffledBatches) -> PrivacyProfile:
    gdp = Gdp(mu=event.gdp_mu()).profile()
    return PrivacyProfile(
        remove=gdp.remove,
        epsilon_for_delta=gdp.epsilon_for_delta,
        description=f"shuffled batches without amplification ({event.neighboring.value}): {event.gdp_mu():.6g}-GDP, "
        "an upper bound",
    )


@rdp.rdp_curve.register
def _(event: ShuffledBatches) -> RdpCurve:
    return Gdp(mu=event.gdp_mu()).rdp_curve()


@rdp.rdp_curve.register
def _(event: CyclicBatches) -> RdpCurve:
    return Gdp(mu=event.gdp_mu()).rdp_curve()


def allocation_revealed(event: RandomAllocation) -> ev.Event:
    """The run with the record's steps revealed: k Gaussian steps of σ, i.e. one of σ/√k (with probability ρ: a
    Poisson-sampled one). The allocation is a post-processing of it (draw the other steps' noise and place the outputs
    at the revealed positions; Feldman & Shenfeld, arXiv 2502.08202, Section 3), so its ε bounds the allocation's from
    above at every δ — no amplification, but finite where the allocation PLD is out of range."""
    gaussian = ev.Gaussian(noise_multiplier=event.noise_multiplier / math.sqrt(event.selected))
    if event.inclusion == 1.0:
        return gaussian
    return ev.PoissonSampled(sampling_rate=event.inclusion, event=gaussian)


@rdp.rdp_curve.register
def _(event: RandomAllocation) -> RdpCurve:
    """An upper bound only: the RDP curve of the allocation revealed (:func:`allocation_revealed`)."""
    return rdp.rdp_curve(allocation_revealed(event))


@rdp.rdp_curve.register
def _(event: FixedBins) -> RdpCurve:
    """An upper bound only: the one allocation of the whole training revealed (σ/√cycles per cycle's sum)."""
    return rdp.rdp_curve(allocation_revealed(event.standard_event()))
