"""The DP-SGD one-liners: ε of a training run under the batch sampler it used, and the noise multiplier for a target ε.

What Opacus (``get_noise_multiplier``, its accountants) and TF Privacy (``compute_dp_sgd_privacy``) users reach for,
stated in their terms: data set size N, (expected) batch size B, epochs E, noise multiplier σ (noise std ÷ clipping
norm), δ — and the **sampler**, because the ε depends on it (:class:`Sampler`): Poisson sampling (the conventional
analysis: Abadi et al. 2016; Mironov, Talwar, Zhang 2019) is not what a shuffled ``DataLoader`` does, and shuffled
fixed-size batches can have a far larger ε (Chua et al., ICML 2024 and NeurIPS 2024). The run has ⌈E·N/B⌉ steps, as
TF Privacy counts them (Opacus rounds down, int(E/q): one step fewer at most, never more private), and t = ⌈N/B⌉
steps per epoch for the samplers that work in epochs.

Every result carries ``epsilon`` — an upper bound on the true ε of the run under its sampler and neighbouring
relation — and ``epsilon_lower``: the certified lower end of the bracket where the accounted pair is attained
(Poisson, balls-and-bins, fixed bins, cyclic), or the best known lower bound where it is not (shuffled batches: Chua
et al.'s constructions; truncated Poisson: an attained pair of a smaller sampling rate; fixed-size subsets: the
attained pair below the symmetrised one that bounds them). The truth lies in [epsilon_lower, epsilon]. The
calibrated σ satisfies ε(σ) ≤ target.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant, EpsilonResult, Method
from dplens.accountant.routes import as_method

__all__ = [
    "DpSgdPrivacy",
    "DpSgdRun",
    "Sampler",
    "dp_sgd_epsilon",
    "dp_sgd_noise_multiplier",
    "dp_sgd_steps",
]

ADD_REMOVE = ev.NeighboringRelation.ADD_OR_REMOVE_ONE
ZERO_OUT = ev.NeighboringRelation.REPLACE_SPECIAL
REPLACE_ONE = ev.NeighboringRelation.REPLACE_ONE


class Sampler(enum.Enum):
    """How a training draws its batches (the values are the command line's ``--sampling`` names).

    Example:
        >>> Sampler("balls-and-bins"), Sampler.SHUFFLE.relations[0].value
        (<Sampler.BALLS_AND_BINS: 'balls-and-bins'>, 'zero_out')
    """

    POISSON = "poisson"  # each record in each step independently with probability q = B/N (Opacus's DPDataLoader)
    TRUNCATED_POISSON = "truncated-poisson"  # Poisson, batches cut to at most max_batch_size records
    BALLS_AND_BINS = "balls-and-bins"  # each epoch, each record in one of the t steps (a fresh random allocation)
    FIXED_BINS = "fixed-bins"  # one allocation for the whole training, cycled (jax_privacy's BallsInBinsSampling)
    SHUFFLE = "shuffle"  # a fresh permutation each epoch cut into batches of B (DataLoader(shuffle=True))
    SHUFFLE_ONCE = "shuffle-once"  # one permutation for the whole training
    FIXED_SIZE = "fixed-size"  # a subset of B records drawn afresh each step (jax_privacy's FixedBatchSampling)
    CYCLIC = "cyclic"  # the same batches in the same order every epoch (a sequential loader)

    @property
    def relations(self) -> tuple[ev.NeighboringRelation, ...]:
        """The neighbouring relations it is accounted under, the default first. Variable batch sizes keep
        add/remove; fixed ones leave it ill-defined (zero-out: a record replaced by one of zero gradient; or
        substitution, twice the sensitivity)."""
        if self in (Sampler.POISSON, Sampler.TRUNCATED_POISSON, Sampler.BALLS_AND_BINS, Sampler.FIXED_BINS):
            return (ADD_REMOVE, ZERO_OUT)
        return (ZERO_OUT, REPLACE_ONE)


def as_sampler(sampling: Sampler | str) -> Sampler:
    """``sampling`` as a :class:`Sampler` (from the enum or its name); a clear ``ValueError`` otherwise."""
    if isinstance(sampling, Sampler):
        return sampling
    if isinstance(sampling, str):
        try:
            return Sampler(sampling.strip().lower().replace("_", "-"))
        except ValueError:
            pass
    raise ValueError(f"sampling must be one of {[s.value for s in Sampler]}; got {sampling!r}")


def _as_relation(sampler: Sampler, neighboring: ev.NeighboringRelation | str | None) -> ev.NeighboringRelation:
    if neighboring is None:
        return sampler.relations[0]
    if isinstance(neighboring, str):
        try:
            neighboring = ev.NeighboringRelation(neighboring.strip().lower().replace("-", "_"))
        except ValueError:
            raise ValueError(
                f"neighboring must be one of {[r.value for r in ev.NeighboringRelation]}; got {neighboring!r}"
            ) from None
    if neighboring not in sampler.relations:
        raise ValueError(
            f"neighboring={neighboring.value!r} is not defined for sampling={sampler.value!r}: use one of "
            f"{[r.value for r in sampler.relations]}"
        )
    return neighboring


@dataclass(frozen=True, slots=True, kw_only=True)
class _Plan:
    """A DP-SGD run as the accountant sees it: the ledger whose ε bounds the run's from above (``entries``, under
    ``neighboring``) and how its lower end is obtained (``lower``: None when the ledger's pair is attained, so its PLD
    bracket's lower end is certified; else the ledgers of attained lower-bound pairs, the largest end wins)."""

    sampler: Sampler
    neighboring: ev.NeighboringRelation
    noise_multiplier: float
    steps: int
    steps_per_epoch: int | None
    entries: tuple[tuple[ev.Event, int], ...]
    lower: tuple[tuple[tuple[ev.Event, int], ...], ...] | None = None
    notes: tuple[str, ...] = field(default=())
    accounted_under: ev.NeighboringRelation | None = None  # the ledger's relation where it differs from neighboring

    @property
    def ledger_relation(self) -> ev.NeighboringRelation:
        """The relation the ledger is composed under (the Poisson pair stands for zero-out as for add/remove)."""
        return self.accounted_under or self.neighboring

    @property
    def lower_kind(self) -> str:
        """ "certified" (the bracket's lower end) or "lower bound" (the best known lower-bound construction)."""
        return "certified" if self.lower is None else "lower bound"


def _check_run(dataset_size: int, batch_size: int, epochs: float) -> None:
    for name, value in (("dataset_size", dataset_size), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    if batch_size > dataset_size:
        raise ValueError(
            f"batch_size must be <= dataset_size; got batch_size={batch_size!r}, dataset_size={dataset_size!r}"
        )
    if isinstance(epochs, bool) or not isinstance(epochs, int | float) or not (math.isfinite(epochs) and epochs > 0):
        raise ValueError(f"epochs must be a finite number > 0; got {epochs!r}")


def dp_sgd_steps(*, dataset_size: int, batch_size: int, epochs: float) -> int:
    """⌈epochs·N/B⌉ steps (TF Privacy's ``compute_dp_sgd_privacy`` convention).

    Example (the MNIST tutorial: 60 epochs of 256 out of 60 000):
        >>> dp_sgd_steps(dataset_size=60000, batch_size=256, epochs=60)
        14063
    """
    _check_run(dataset_size, batch_size, epochs)
    return math.ceil(epochs * dataset_size / batch_size - 1e-9)


def _gaussian(sigma: float, relation: ev.NeighboringRelation = ADD_REMOVE) -> ev.Gaussian:
    return ev.Gaussian(noise_multiplier=sigma, neighboring=relation)


def _poisson(q: float, sigma: float) -> ev.Event:
    return ev.PoissonSampled(sampling_rate=q, event=_gaussian(sigma))


def _allocation_epochs(sigma: float, steps_per_epoch: int, steps: int) -> tuple[tuple[ev.Event, int], ...]:
    """Balls-and-bins: the full epochs, and a partial one (its first m steps: the record is among them with probability
    m/t, at a uniform one of them — exactly an allocation of 1 of m with inclusion m/t)."""
    from dplens.accountant.samplers import RandomAllocation

    full, partial = divmod(steps, steps_per_epoch)
    entries: list[tuple[ev.Event, int]] = []
    if full:
        entries.append((RandomAllocation(noise_multiplier=sigma, steps=steps_per_epoch), full))
    if partial:
        entries.append(
            (RandomAllocation(noise_multiplier=sigma, steps=partial, inclusion=partial / steps_per_epoch), 1)
        )
    return tuple(entries)


def _planned(sampler: Sampler, relation: ev.NeighboringRelation, sigma: float, steps: int, **rest: Any) -> _Plan:
    """A plan of a run of ``steps`` steps at noise ``sigma`` under ``relation`` (``rest``: the other fields)."""
    return _Plan(sampler=sampler, neighboring=relation, noise_multiplier=sigma, steps=steps, **rest)


def _added(sampler: Sampler, relation: ev.NeighboringRelation, sigma: float, steps: int, **rest: Any) -> _Plan:
    """A plan whose ledger is composed under add/remove (its pair stands for the run's ``relation`` too)."""
    return _planned(sampler, relation, sigma, steps, accounted_under=ADD_REMOVE, **rest)


def _per_step(sampler: Sampler, relation: ev.NeighboringRelation, sigma: float, steps: int, event: ev.Event, **rest):
    """An :func:`_added` plan whose ledger is ``event`` once per step (no epochs)."""
    return _added(sampler, relation, sigma, steps, steps_per_epoch=None, entries=((event, steps),), **rest)


def _run_poisson(sampler, relation, sigma, n, b, steps, max_batch_size) -> _Plan:
    q = b / n
    if sampler is Sampler.POISSON:
        notes = ("zero-out has the same dominating pair as add/remove",) if relation is ZERO_OUT else ()
        return _per_step(sampler, relation, sigma, steps, _poisson(q, sigma), notes=notes)
    if max_batch_size is None:
        raise ValueError("sampling='truncated-poisson' needs max_batch_size (the largest batch the loader keeps)")
    if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or max_batch_size < b:
        raise ValueError(
            f"max_batch_size must be an integer >= batch_size={b!r} for truncated Poisson sampling; got "
            f"{max_batch_size!r}"
        )
    from scipy.special import bdtr

    # A record is surely kept when the others sampled number at most B_max − 1: its inclusion probability is at
    # least q·P(Binomial(N − 1, q) ≤ B_max − 1), and a Poisson-sampled Gaussian of that rate is a post-processing of
    # the truncated one (an attained lower-bound pair; the others contribute nothing).
    q_low = q * float(bdtr(max_batch_size - 1, n - 1, q))
    event = ev.TruncatedSubsampledGaussian(
        dataset_size=n, sampling_rate=q, truncated_batch_size=max_batch_size, noise_multiplier=sigma
    )
    lower = (((_poisson(q_low, sigma), steps),),) if q_low > 0 else ()
    return _per_step(sampler, relation, sigma, steps, event, lower=lower)


def _run_allocation(sampler, relation, sigma, n, b, steps) -> _Plan:
    from dplens.accountant.samplers import FixedBins, RandomAllocation

    t = -(-n // b)
    if sampler is Sampler.BALLS_AND_BINS:
        return _added(sampler, relation, sigma, steps, steps_per_epoch=t, entries=_allocation_epochs(sigma, t, steps))
    cycles, partial = divmod(steps, t)
    if not partial:
        entries = ((FixedBins(noise_multiplier=sigma, steps=t, cycles=cycles), 1),)
        return _added(sampler, relation, sigma, steps, steps_per_epoch=t, entries=entries)
    # A partial cycle: the run drops outputs of one more full cycle (an upper bound); leaving the partial cycle out is
    # a post-processing of the run (a lower bound) — or, within the first cycle, the partial allocation itself.
    upper = ((FixedBins(noise_multiplier=sigma, steps=t, cycles=cycles + 1), 1),)
    if cycles:
        lower: tuple = (((FixedBins(noise_multiplier=sigma, steps=t, cycles=cycles), 1),),)
    else:
        lower = (((RandomAllocation(noise_multiplier=sigma, steps=partial, inclusion=partial / t), 1),),)
    return _added(sampler, relation, sigma, steps, steps_per_epoch=t, entries=upper, lower=lower)


def _run_fixed_size(sampler, relation, sigma, n, b, steps) -> _Plan:
    q = b / n
    # Substitution (σ relative to the 2C sensitivity): the PLD route's symmetrised Poisson pair at q with σ/2, which
    # dominates every step (pld_engine), beside Wang, Balle, Kasiviswanathan (2019) on the RDP route; the record +1
    # replaced by −1 among others at −1 is the Poisson pair at q with σ/2 itself (attained).
    step = ev.SampledWithoutReplacement(sample_size=b, dataset_size=n, event=_gaussian(sigma / 2.0, REPLACE_ONE))
    if relation is ZERO_OUT:
        # A zeroed record is a substituted one (the same N), so the substitution bound holds. The Poisson pair at q is
        # NOT an upper bound here: a record in the batch displaces another from it (B − 1 others instead of B), so with
        # the others at −C the two sides are (1 − q)N(0) + qN(2C) against (1 − q)N(0) + qN(C) after a shift — at
        # N = 2, B = 1, σ = 1, ε = 1 its δ is 0.0587 against the Poisson pair's 0.0289 (tests/accountant/
        # test_dp_sgd_fixed_size.py). That pair (the others at −C) is attained, and so is the Poisson pair at q (the
        # others at 0): the larger of their certified lower ends is the bracket's.
        from dplens.accountant.samplers import ZeroedInFixedSizeBatch

        notes = (
            "under zero-out a fixed-size subset per step is accounted as a substitution (a record in the batch "
            "displaces another); the lower end is the attained pair of a zeroed record among others at -C",
        )
        zeroed = ZeroedInFixedSizeBatch(noise_multiplier=sigma, sampling_rate=q)
        lower = (((_poisson(q, sigma), steps),), ((zeroed, steps),))
        return _planned(
            sampler,
            relation,
            sigma,
            steps,
            steps_per_epoch=None,
            entries=((step, steps),),
            lower=lower,
            notes=notes,
            accounted_under=REPLACE_ONE,
        )
    return _planned(
        sampler,
        REPLACE_ONE,
        sigma,
        steps,
        steps_per_epoch=None,
        entries=((step, steps),),
        lower=((((_poisson(q, sigma / 2.0), steps),),)),
    )


def _run_batches(sampler, relation, sigma, n, b, steps, drop_last) -> _Plan:
    from dplens.accountant.samplers import CyclicBatches, RandomAllocation, ShuffledBatches, ShuffleMaxStatistic

    t = n // b if drop_last else -(-n // b)
    full, partial = divmod(steps, t)
    epochs_up = full + (1 if partial else 0)  # a record is in at most one batch of a partial epoch too
    if sampler is Sampler.CYCLIC:
        # The records of the first `partial` batches appear epochs_up times: exactly μ-GDP with that many.
        event = CyclicBatches(noise_multiplier=sigma, epochs=epochs_up, neighboring=relation)
        return _planned(sampler, relation, sigma, steps, steps_per_epoch=t, entries=((event, 1),))
    reshuffle = sampler is Sampler.SHUFFLE
    shape = dict(noise_multiplier=sigma, dataset_size=n, batch_size=b, reshuffle=reshuffle, drop_last=drop_last)
    upper = ShuffledBatches(epochs=epochs_up, neighboring=relation, **shape)
    if full:
        lower_run = ShuffledBatches(epochs=full, neighboring=relation, **shape)
        constructions = lower_run.lower_bound_events()
    else:  # less than an epoch: the record is in the first `partial` batches with probability partial·B/N
        sigma_low = sigma / (2.0 if relation is REPLACE_ONE else 1.0)
        rho = min(1.0, partial * b / n)
        constructions = (RandomAllocation(noise_multiplier=sigma_low, steps=partial, inclusion=rho),)
        if relation is ZERO_OUT and partial > 1:
            constructions += (ShuffleMaxStatistic(noise_multiplier=sigma_low, batches=partial, inclusion=rho),)
    return _planned(
        sampler,
        relation,
        sigma,
        steps,
        steps_per_epoch=t,
        entries=((upper, 1),),
        lower=tuple(((c, 1),) for c in constructions),
    )


def _plan(
    *,
    dataset_size: int,
    batch_size: int,
    epochs: float,
    noise_multiplier: float,
    sampling: Sampler | str = Sampler.POISSON,
    neighboring: ev.NeighboringRelation | str | None = None,
    max_batch_size: int | None = None,
    drop_last: bool = False,
) -> _Plan:
    """The ledger of a DP-SGD run under its sampler (see :class:`_Plan`); validated, nothing accounted yet.

    Samplers that work in epochs run t batches per epoch — ⌈N/B⌉, or ⌊N/B⌋ when the last smaller one is dropped —
    and ⌈E·t⌉ steps; the others ⌈E·N/B⌉ (TF Privacy's count)."""
    sampler = as_sampler(sampling)
    relation = _as_relation(sampler, neighboring)
    steps = dp_sgd_steps(dataset_size=dataset_size, batch_size=batch_size, epochs=epochs)
    if not isinstance(drop_last, bool):
        raise ValueError(f"drop_last must be a bool; got {drop_last!r}")
    if drop_last and sampler not in _FIXED_BATCHES:
        raise ValueError(
            f"drop_last applies to fixed-size batches (shuffle, cyclic) only; got sampling={sampler.value!r}"
        )
    if sampler in _EPOCHS:
        per_epoch = dataset_size // batch_size if drop_last else -(-dataset_size // batch_size)
        steps = math.ceil(epochs * per_epoch - 1e-9)
    sigma = noise_multiplier
    if isinstance(sigma, bool) or not isinstance(sigma, int | float) or not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"noise_multiplier must be a finite number > 0; got {noise_multiplier!r}")
    if max_batch_size is not None and sampler is not Sampler.TRUNCATED_POISSON:
        raise ValueError(f"max_batch_size applies to sampling='truncated-poisson' only; got sampling={sampler.value!r}")
    n, b, sigma = dataset_size, batch_size, float(sigma)
    if sampler in (Sampler.POISSON, Sampler.TRUNCATED_POISSON):
        return _run_poisson(sampler, relation, sigma, n, b, steps, max_batch_size)
    if sampler in (Sampler.BALLS_AND_BINS, Sampler.FIXED_BINS):
        return _run_allocation(sampler, relation, sigma, n, b, steps)
    if sampler is Sampler.FIXED_SIZE:
        return _run_fixed_size(sampler, relation, sigma, n, b, steps)
    return _run_batches(sampler, relation, sigma, n, b, steps, drop_last)


_EPOCHS = (Sampler.BALLS_AND_BINS, Sampler.FIXED_BINS, Sampler.SHUFFLE, Sampler.SHUFFLE_ONCE, Sampler.CYCLIC)
_FIXED_BATCHES = (Sampler.SHUFFLE, Sampler.SHUFFLE_ONCE, Sampler.CYCLIC)


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class DpSgdRun(ev.Event):
    """A whole DP-SGD training: ``epochs`` over ``dataset_size`` records in (expected) batches of ``batch_size``, noise
    multiplier σ per unit clipping norm, the batches drawn by ``sampling`` (a :class:`Sampler` name), under
    ``neighboring`` (None: the sampler's default — add/remove for variable batch sizes, zero-out for fixed ones).

    The event every DP-SGD number of dplens goes through (the command line's ``dp-sgd``, specs, the budget ledger, the
    Opacus accountant): it composes as the ledger whose ε bounds the run's from above (:meth:`standard_event`) and,
    where that ledger's pair is not attained by the run, declares the ledgers whose certified lower ends bound it from
    below (:meth:`lower_bound_events`), so ``epsilon_lower`` is never the lower end of an upper bound.

    Example (MNIST-sized: 60 epochs of 256 from 60 000 at σ = 1.1 on shuffled batches — without amplification, exactly
    √60/1.1-GDP as accounted, against 2.38 for Poisson sampling):
        >>> from dplens.accountant import conversions
        >>> from dplens.accountant.compose import Accountant
        >>> shuffled = DpSgdRun(noise_multiplier=1.1, dataset_size=60000, batch_size=256, epochs=60, sampling="shuffle")
        >>> epsilon = Accountant().compose(shuffled).epsilon(1e-5)
        >>> shuffled.neighboring.value, shuffled.steps, epsilon == conversions.gdp_epsilon(60**0.5 / 1.1, 1e-5)
        ('zero_out', 14100, True)
    """

    noise_multiplier: float
    dataset_size: int
    batch_size: int
    epochs: float
    sampling: str = Sampler.POISSON.value
    max_batch_size: int | None = None
    drop_last: bool = False
    neighboring: ev.NeighboringRelation | None = None

    def __post_init__(self) -> None:
        sampler = as_sampler(self.sampling)
        object.__setattr__(self, "sampling", sampler.value)
        object.__setattr__(self, "neighboring", _as_relation(sampler, self.neighboring))
        object.__setattr__(self, "epochs", float(self.epochs) if isinstance(self.epochs, int | float) else self.epochs)
        self.plan()  # validates every parameter

    @property
    def sampler(self) -> Sampler:
        return Sampler(self.sampling)

    def plan(self) -> _Plan:
        return _plan_cached(self)

    @property
    def steps(self) -> int:
        return self.plan().steps

    def standard_event(self) -> ev.Event:
        """The ledger whose ε bounds the run's from above (attained where :meth:`lower_bound_events` is None)."""
        return _as_event(self.plan().entries)

    def gdp_mu(self) -> float | None:
        """μ where the run's upper bound is exactly μ-GDP (shuffled and cyclic batches: no amplification), else None
        (so Gaussian-only budgets and filters can charge those runs)."""
        from dplens.accountant.pld import gaussian_mu

        return gaussian_mu(self.standard_event())

    def lower_bound_events(self) -> tuple[ev.Event, ...] | None:
        """None when :meth:`standard_event`'s pair is attained by the run; else one event per attained construction."""
        lower = self.plan().lower
        return None if lower is None else tuple(_as_event(ledger) for ledger in lower)

    def to_dp_accounting(self):
        """dp-accounting's equivalent, which exists for Poisson sampling only (dp-accounting knows no other sampler)."""
        if self.sampler is not Sampler.POISSON:
            raise ValueError(f"dp-accounting has no event for sampling={self.sampling!r}")
        return ev.to_dp_accounting(self.standard_event())


@functools.lru_cache(maxsize=256)
def _plan_cached(event: DpSgdRun) -> _Plan:
    return _plan(
        dataset_size=event.dataset_size,
        batch_size=event.batch_size,
        epochs=event.epochs,
        noise_multiplier=event.noise_multiplier,
        sampling=event.sampling,
        neighboring=event.neighboring,
        max_batch_size=event.max_batch_size,
        drop_last=event.drop_last,
    )


def _as_event(entries: tuple[tuple[ev.Event, int], ...]) -> ev.Event:
    parts = tuple(event if count == 1 else ev.SelfComposed(event=event, count=count) for event, count in entries)
    return parts[0] if len(parts) == 1 else ev.Composed(events=parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class DpSgdPrivacy:
    """The privacy of a DP-SGD run: (ε, δ) with everything it was computed from.

    ``epsilon`` is an upper bound on the true ε of the run under ``sampling`` and ``neighboring``; ``epsilon_lower``
    a lower bound on it (``lower_bound``: "certified", the lower end of a certified bracket, or "lower bound", the best
    known construction; None where none was computed).

    Example:
        >>> run = dp_sgd_epsilon(dataset_size=60000, batch_size=256, epochs=60, noise_multiplier=1.1, delta=1e-5,
        ...                      method="rdp")
        >>> run.steps, round(run.epsilon, 4), run.method, run.sampling
        (14063, 2.5966, 'rdp', 'poisson')
        >>> sorted(run.to_dict())[:4]  # RDP is 9 % above the PLD bracket's lower end: a note says so
        ['batch_size', 'bracket_note', 'dataset_size', 'delta']
    """

    epsilon: float
    delta: float
    noise_multiplier: float
    dataset_size: int
    batch_size: int
    epochs: float
    steps: int
    sampling_rate: float
    method: str
    details: str
    target_epsilon: float | None = None
    neighboring: str = ev.NeighboringRelation.ADD_OR_REMOVE_ONE.value
    sampling: str = "poisson"
    epsilon_lower: float | None = None
    lower_bound: str | None = None
    steps_per_epoch: int | None = None
    risk: dict[str, Any] | None = None  # a calibration to an attack-risk target: the target and what it achieves
    # Whose privacy ε protects (dplens.accountant.user_level): "example", or "user" with at most
    # max_examples_per_user examples (example-level sampling) or users sampled (user_sampling, over ``users``).
    privacy_unit: str = "example"
    max_examples_per_user: int | None = None
    user_sampling: bool = False
    users: int | None = None
    truncation_delta: float | None = None  # the δ a truncated Binomial tail adds (user-level, large K), included
    bracket_note: str | None = None  # [epsilon_lower, epsilon] wider than 0.5 %: its width and the reason

    def to_dict(self) -> dict[str, Any]:
        out = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "noise_multiplier": self.noise_multiplier,
            "dataset_size": self.dataset_size,
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            "steps": self.steps,
            "sampling_rate": self.sampling_rate,
            "method": self.method,
            "details": self.details,
            "neighboring": self.neighboring,
            "sampling": self.sampling,
            "epsilon_lower": self.epsilon_lower,
            "lower_bound": self.lower_bound,
        }
        if self.steps_per_epoch is not None:
            out["steps_per_epoch"] = self.steps_per_epoch
        if self.target_epsilon is not None:
            out["target_epsilon"] = self.target_epsilon
        if self.risk is not None:
            out["risk"] = self.risk
        out["privacy_unit"] = self.privacy_unit
        if self.privacy_unit != "example":
            out["max_examples_per_user"] = self.max_examples_per_user
            out["user_sampling"] = self.user_sampling
            out["users"] = self.users
            if self.truncation_delta:
                out["truncation_delta"] = self.truncation_delta
        if self.bracket_note is not None:
            out["bracket_note"] = self.bracket_note
        return out


def _lower_end(event: DpSgdRun, delta: float, result: Any) -> float | None:
    """The run's lower end: the PLD route's when it answered (certified, or from the lower-bound constructions), else
    computed here — the bracket of the attained pair, or the best lower-bound construction."""
    from dplens.accountant import pld, pld_engine

    if result.epsilon_lower is not None:
        return min(result.epsilon_lower, result.epsilon)
    ledgers = pld.lower_bound_ledgers([(event, 1)])
    if ledgers is None:
        ledgers = [[(event, 1)]]
    return pld._constructed_lower(
        ledgers,
        lambda ledger, relation: pld_engine.epsilon_bracket(ledger, delta, neighboring=relation),
        event.neighboring,
        result.epsilon,
    )


def _privacy(event: DpSgdRun, result: Any, **extra: Any) -> DpSgdPrivacy:
    from dplens.accountant.pld import bracket_note

    plan = event.plan()
    lower = _lower_end(event, result.delta, result)
    details = result.details
    if plan.notes:
        details += "; " + "; ".join(plan.notes)
    note = getattr(result, "bracket_note", None)
    reason = note.split(": ", 1)[-1] if note else None
    if reason is None and lower is not None and plan.lower is not None:
        reason = f"the lower end is the best known lower-bound construction for sampling={event.sampling!r}"
    method = getattr(result.method, "value", result.method)
    if reason is None and method != Method.PLD.value:
        reason = f"the upper end is the {method} route's, the lower end the PLD engine's certified one"
    extra.setdefault("bracket_note", bracket_note(lower, result.epsilon, reason))
    return DpSgdPrivacy(
        epsilon=result.epsilon,
        delta=result.delta,
        noise_multiplier=event.noise_multiplier,
        dataset_size=event.dataset_size,
        batch_size=event.batch_size,
        epochs=event.epochs,
        steps=plan.steps,
        sampling_rate=event.batch_size / event.dataset_size,
        method=result.method.value,
        details=details,
        neighboring=event.neighboring.value,
        sampling=event.sampling,
        epsilon_lower=lower,
        lower_bound=None if lower is None else plan.lower_kind,
        steps_per_epoch=plan.steps_per_epoch,
        **extra,
    )


def dp_sgd_epsilon(
    *,
    dataset_size: int,
    batch_size: int,
    epochs: float,
    noise_multiplier: float,
    delta: float,
    method: Method | str = Method.BEST,
    sampling: Sampler | str = Sampler.POISSON,
    neighboring: ev.NeighboringRelation | str | None = None,
    max_batch_size: int | None = None,
    drop_last: bool = False,
) -> DpSgdPrivacy:
    """ε of a DP-SGD run under its sampler (default Poisson at q = B/N, add/remove), an upper bound, with its lower end.

    The privacy unit is one example (``privacy_unit="example"`` in the result); for one user (at most K examples, or
    users sampled) see :func:`dplens.accountant.user_level.user_level_epsilon`.

    Example (MNIST: σ = 1.1, 60 epochs; the anchors' PLD value is 2.3818):
        >>> run = dp_sgd_epsilon(dataset_size=60000, batch_size=256, epochs=60, noise_multiplier=1.1, delta=1e-5,
        ...                      method="pld")
        >>> run.steps, round(run.epsilon, 3), run.epsilon_lower <= 2.3818 <= run.epsilon
        (14063, 2.382, True)
    """
    from dplens.accountant.rdp import UnsupportedEventError

    shape = dict(dataset_size=dataset_size, batch_size=batch_size, epochs=epochs, sampling=sampling)
    event = _run_event(noise_multiplier, shape, neighboring, max_batch_size, drop_last)
    try:
        result = Accountant().compose(event).epsilon_result(delta, method=as_method(method))
    except UnsupportedEventError as err:
        if event.sampler is not Sampler.BALLS_AND_BINS:
            raise
        return _fewer_steps_bound(event, delta, as_method(method), err)
    if math.isinf(result.epsilon) and event.sampler is Sampler.BALLS_AND_BINS:
        # The allocation PLD's error terms exceed δ (an infinite upper end is no answer for a finite σ).
        reason = ValueError("its upper end is infinite")
        return _fewer_steps_bound(event, delta, as_method(method), reason, known_lower=result.epsilon_lower)
    refused = not any(r.method is Method.PLD for r in result.routes or ())
    if event.sampler is Sampler.BALLS_AND_BINS and as_method(method) is Method.BEST and refused:
        # The PLD route refused (out of its range): the RDP route's allocation revealed answered; fewer steps per
        # epoch on the PLD route, or the revealed allocation's exact Gaussian ε, may be tighter.
        fallback = _fewer_steps_bound(event, delta, Method.PLD, ValueError("the PLD route refused it"))
        if fallback.epsilon <= result.epsilon:
            return fallback
    privacy = _privacy(event, result)
    if refused and as_method(method) is Method.BEST and privacy.epsilon_lower is None and privacy.epsilon > 0:
        return _without_a_lower_end(result, privacy)
    return privacy


def _without_a_lower_end(result: EpsilonResult, privacy: DpSgdPrivacy) -> DpSgdPrivacy:
    """The best route's upper end where the PLD route refused the run (privacy losses beyond its floating-point range,
    10⁷ steps at ε ≈ 50): the certified bracket is [0, upper], and the note says so and why, instead of a bare upper
    bound that reads like any other (issue 47: every bracket wider than the engine's states its width and reason)."""
    why = "the PLD route gave no lower end"
    for route, reason in result.refusals:
        if route is Method.PLD:  # the refusal, in the engine's words (its advice to use RDP is what was done)
            why = f"the PLD route refused it: {reason.split('; use ', 1)[0]}"
    note = (
        f"the bracket [0, {privacy.epsilon:.6g}] is 100% wide (relative): no certified lower end, {why}; the upper end "
        f"is the {privacy.method} route's"
    )
    return replace(privacy, epsilon_lower=0.0, lower_bound="certified", bracket_note=note)


def _fewer_steps_bound(
    event: DpSgdRun, delta: float, method: Method, err: Exception, *, known_lower: float | None = None
) -> DpSgdPrivacy:
    """Balls-and-bins beyond the allocation PLD's range (10⁸ steps per epoch at σ < 0.7): the upper end of the same
    run with t' = t/10^k steps per epoch, the first that is in range.

    A valid upper bound: the dominating pair of an allocation of one of t steps, (1 − ρ)Q + (ρ/t)·Σⱼ N(eⱼ, σ²I) against
    Q = N(0, σ²I) (Feldman & Shenfeld, arXiv 2502.08202, Section 3), is a post-processing of the pair for t' ≤ t
    steps at the same ρ: append t − t' fresh N(0, σ²) outputs and permute all t uniformly at random (the record's
    step is then uniform over t, the others' noise unchanged); epoch by epoch the whole run is. The lower end is the
    sum statistic of each epoch (Σ of its t noisy sums: N(ρ, tσ²) against N(0, tσ²), a post-processing; E epochs
    compose to √E·ρ/(σ√t)-GDP).
    """
    from dplens.accountant import conversions

    plan = event.plan()
    sigma, t = event.noise_multiplier, plan.steps_per_epoch or 2
    full, partial = divmod(plan.steps, t)
    coarser = t // 10
    while True:
        # t' = 1 is the allocation revealed: a Gaussian step per epoch (with probability ρ in a partial one).
        entries = (
            _fewer_steps_ledger(sigma, coarser, full, partial, t)
            if coarser >= 2
            else _revealed(sigma, full, partial, t)
        )
        try:
            result = (
                Accountant()
                .compose(_as_event(entries))
                .epsilon_result(delta, method=Method.PLD if coarser >= 2 else Method.BEST, lower=False)
            )
        except (ValueError, OverflowError):  # the PLD route out of range again (UnsupportedEventError is a ValueError)
            result = None
        if result is None or not math.isfinite(result.epsilon):
            if coarser < 2:
                break
            coarser //= 10
            continue
        coarser = max(coarser, 1)
        inclusion = 1.0 if full else partial / t
        mu = inclusion * math.sqrt(full + (1 if partial else 0)) / (sigma * math.sqrt(t))
        lower = min(max(conversions.gdp_epsilon(mu, delta), known_lower or 0.0), result.epsilon)
        source = f"that of {coarser} steps per epoch" if coarser >= 2 else "that of the allocation revealed"
        width = 100.0 * (result.epsilon - lower) / result.epsilon if result.epsilon > 0 else 0.0
        note = (
            f"the bracket [{lower:.6g}, {result.epsilon:.6g}] is {width:.3g}% wide (relative): the allocation PLD at "
            f"{t} steps per epoch is out of range ({err}); the upper end is {source} (a valid upper bound: epsilon "
            "does not decrease with fewer steps per epoch), the lower end the sum statistic of each epoch or the "
            "allocation's own certified one"
        )
        accounted = _AccountedAt(epsilon=result.epsilon, delta=delta, method=result.method, details=result.details)
        return replace(_privacy(event, accounted, bracket_note=note), epsilon_lower=lower, lower_bound="lower bound")
    raise ValueError(
        f"sampling='balls-and-bins' with {t} steps per epoch at noise_multiplier={sigma!r} is out of range for the "
        f"PLD engine ({err}); a larger batch_size (fewer steps per epoch) gives a valid upper bound for this run"
    ) from None


def _revealed(sigma: float, full: int, partial: int, t: int) -> tuple:
    """The run with each epoch's allocation revealed: one Gaussian step per full epoch, and a Poisson-sampled one at
    ρ = partial/t for a partial epoch (a valid upper bound: the allocation is a post-processing of it)."""
    entries: list = []
    if full:
        entries.append((_gaussian(sigma), full))
    if partial:
        entries.append((_poisson(partial / t, sigma), 1))
    return tuple(entries)


def _fewer_steps_ledger(sigma: float, steps: int, full: int, partial: int, t: int) -> tuple:
    """:func:`_allocation_epochs` with ``steps`` ≤ t steps per epoch at the same inclusion (see
    :func:`_fewer_steps_bound`)."""
    from dplens.accountant.samplers import RandomAllocation

    entries: list = []
    if full:
        entries.append((RandomAllocation(noise_multiplier=sigma, steps=steps), full))
    if partial:
        size = max(2, min(partial, steps))
        entries.append((RandomAllocation(noise_multiplier=sigma, steps=size, inclusion=partial / t), 1))
    return tuple(entries)


def _run_event(noise_multiplier: float, shape: dict, neighboring: Any, max_batch_size: Any, drop_last: Any) -> DpSgdRun:
    """The :class:`DpSgdRun` of the DP-SGD entry points' arguments (``shape``: N, B, E and the sampler)."""
    return DpSgdRun(
        noise_multiplier=noise_multiplier,
        dataset_size=shape["dataset_size"],
        batch_size=shape["batch_size"],
        epochs=shape["epochs"],
        sampling=as_sampler(shape["sampling"]).value,
        neighboring=neighboring,
        max_batch_size=max_batch_size,
        drop_last=drop_last,
    )


def dp_sgd_noise_multiplier(
    *,
    dataset_size: int,
    batch_size: int,
    epochs: float,
    target_epsilon: float | None = None,
    delta: float,
    method: Method | str = Method.PLD,
    sampling: Sampler | str = Sampler.POISSON,
    neighboring: ev.NeighboringRelation | str | None = None,
    max_batch_size: int | None = None,
    drop_last: bool = False,
    max_tpr: float | None = None,
    at_fpr: float | None = None,
    max_advantage: float | None = None,
) -> DpSgdPrivacy:
    """The smallest noise multiplier whose DP-SGD run (under its sampler) meets (target ε, δ) — or an attack-risk
    target: no membership attack's TPR above ``max_tpr`` at FPR ``at_fpr``, or no advantage above ``max_advantage``
    (Kulynych et al., NeurIPS 2024; :func:`dplens.accountant.calibrate.calibrate_risk`). Its ε (or risk) is ≤ the
    target.

    A bracketing root finder that keeps a safe end (:func:`dplens.accountant.calibrate.calibrate`) on the run's
    upper bound: whatever the sampler, the returned σ has ε(σ) ≤ target under the route used. A risk target's result
    carries ``risk`` (the target, what it achieves, the warnings) and the ε at δ beside it.

    Example (MNIST, ε = 3: dp-accounting's RDP calibration on its order grid gives 1.01412; α optimised
    continuously needs a little less noise):
        >>> run = dp_sgd_noise_multiplier(dataset_size=60000, batch_size=256, epochs=60, target_epsilon=3.0,
        ...                               delta=1e-5, method="rdp")
        >>> round(run.noise_multiplier, 3), run.epsilon <= 3.0
        (1.014, True)
    """
    from dplens.accountant.calibrate import calibrate_dp_sgd_noise

    shape = dict(dataset_size=dataset_size, batch_size=batch_size, epochs=epochs, sampling=sampling)

    def run(sigma: float) -> DpSgdRun:
        return _run_event(sigma, shape, neighboring, max_batch_size, drop_last)

    probe = run(1.0)  # validates everything but the targets
    risky = (max_tpr, at_fpr, max_advantage) != (None, None, None)
    if risky == (target_epsilon is not None):
        raise ValueError("give exactly one target: target_epsilon, or max_tpr with at_fpr, or max_advantage")
    if risky:
        return _calibrate_risk(run, delta, method, max_tpr=max_tpr, at_fpr=at_fpr, max_advantage=max_advantage)
    method = as_method(method)
    if method is Method.BEST:
        method = Method.PLD  # the tightest route for these mechanisms
    if probe.sampler is Sampler.POISSON:
        result = calibrate_dp_sgd_noise(
            sampling_rate=batch_size / dataset_size,
            steps=probe.steps,
            target_epsilon=target_epsilon,
            target_delta=delta,
            method=method,
            lower=0.05,
            upper=1000.0,
        )
        value = float(result.value)
        accounted = _AccountedAt(
            epsilon=result.epsilon,
            delta=result.delta,
            method=result.method,
            details=result.details,
            epsilon_lower=result.epsilon_lower,
        )
    else:
        value, accounted = _calibrate_sampler(run, probe, target_epsilon, delta, method)
    return _privacy(run(value), accounted, target_epsilon=float(target_epsilon))


def _calibrate_sampler(run: Callable[[float], DpSgdRun], probe: DpSgdRun, target: float, delta: float, method: Method):
    """σ for a non-Poisson sampler: a safe-end root finder (:func:`dplens.accountant.calibrate._local_solve`) on the
    run's upper bound, started at the Poisson answer (the samplers differ from it by a moderate factor)."""
    from dplens.accountant import conversions, pld
    from dplens.accountant.calibrate import _Counter, _local_solve, calibrate_dp_sgd_noise
    from dplens.accountant.rdp import UnsupportedEventError

    target = conversions.check_epsilon(target, name="target_epsilon")
    if target == 0:
        raise ValueError(f"target_epsilon must be > 0; got {target!r}")
    delta = conversions.check_delta(delta, name="delta")
    low, high = 0.05, 1000.0

    def epsilon_of(sigma: float) -> float:
        try:
            return Accountant().compose(run(sigma)).epsilon(delta, method=method)
        except pld.PldOutOfRangeError:
            return math.inf  # beyond the engine's range: counted as unsafe, never returned

    counter = _Counter(epsilon_of)
    if probe.sampler is Sampler.BALLS_AND_BINS and method is Method.PLD:
        high = _allocation_safe_end(counter, probe, target, delta, high)
    try:
        counter(high)
    except UnsupportedEventError as err:
        raise ValueError(f"method={method.value!r} cannot account sampling={probe.sampling!r}: {err}") from None
    if counter(high) > target:
        raise ValueError(
            f"target_epsilon={target!r} is unreachable for noise_multiplier in [{low!r}, {high!r}]: epsilon at "
            f"noise_multiplier={high!r} is {counter(high)!r} (sampling={probe.sampling})"
        )
    q = probe.batch_size / probe.dataset_size
    start = calibrate_dp_sgd_noise(
        sampling_rate=q, steps=probe.steps, target_epsilon=target, target_delta=delta, method=Method.RDP
    )
    near = float(start.value)
    if probe.sampler is Sampler.BALLS_AND_BINS:
        near = _poisson_start(q, probe.steps, target, delta, near)
        value = _coarse_first(counter, epsilon_of, target, near, safe=high, unsafe=low)
    else:
        value = _local_solve(counter, goal=target, near=near, safe=high, unsafe=low, integer=False, xtol=1e-4 * near)
    result = Accountant().compose(run(value)).epsilon_result(delta, method=method)
    if result.epsilon > target:  # pragma: no cover - the solver keeps a safe end; a last line of defence
        raise AssertionError(f"calibration overshot: epsilon={result.epsilon!r} > target={target!r}")
    return value, result


def _allocation_safe_end(counter: Any, probe: DpSgdRun, target: float, delta: float, high: float) -> float:
    """A safe end for a balls-and-bins search near its answer: twice Poisson's σ on a fixed grid (random allocation
    is never worse than Poisson, Feldman & Shenfeld arXiv 2602.17284), if ε there is within the target on the route
    used; else ``high``. (At σ = 1000 the PLD engine refined its grid to losses of 10⁻⁶: 2.2 GB for a safe end.)"""
    from dplens.accountant.calibrate import calibrate_dp_sgd_noise

    q = probe.batch_size / probe.dataset_size
    try:
        start = calibrate_dp_sgd_noise(
            sampling_rate=q, steps=probe.steps, target_epsilon=target, target_delta=delta, method=Method.RDP
        )
        candidate = 2.0 * _poisson_start(q, probe.steps, target, delta, float(start.value))
    except ValueError:  # Poisson's calibration does not answer: the wide search instead
        return high
    if candidate < high and counter(candidate) <= target:
        return candidate
    return high


def _poisson_start(q: float, steps: int, target: float, delta: float, fallback: float) -> float:
    """Where a balls-and-bins search starts: Poisson's σ on one fixed PLD grid (interval 5·10⁻⁴, milliseconds an
    evaluation; random allocation is never worse than Poisson, Feldman & Shenfeld arXiv 2602.17284, and close to it
    at many steps per epoch). RDP's σ was 38 % above the answer at 10⁴ steps per epoch, 10 epochs, σ ≈ 0.6: the
    search then visited 16 σ. Only a start: ``fallback`` where this grid does not answer."""
    from dplens.accountant import pld_engine
    from dplens.accountant.calibrate import _Counter, _solve

    def upper(sigma: float) -> float:
        event = _poisson(q, sigma)
        try:
            return pld_engine.epsilon_bracket([(event, steps)], delta, interval=5e-4).upper
        except ValueError:  # a window too large, losses out of range: unsafe
            return math.inf

    counter = _Counter(upper)
    if not counter(fallback) <= target:
        return fallback
    return _solve(counter, target=target, safe=fallback, unsafe=0.05, integer=False, xtol=1e-3 * fallback)


#: Balls-and-bins calibration: the default grids search below the coarse grids' σ within this relative gap first.
_COARSE_GAP = 2.5e-3


def _coarse_first(counter: Any, epsilon_of: Callable[[float], float], target: float, near: float, **ends: float):
    """σ with ε(σ) ≤ target on the default allocation grids, located on coarse ones first (each evaluation there
    2–4× cheaper; their bracket is valid, only wider): a balls-and-bins run at 10⁴ steps per epoch costs seconds per
    ε on the default grids, and a search from the RDP start visits ~10 σ. The coarse σ_c is (nearly always) safe on
    the default grids, whose σ lies a little below it (their upper end is tighter): the search continues in
    [σ_c·(1 − gap), σ_c], or from σ_c as before where an end is not on its side. Every returned σ was evaluated on the
    default grids with ε ≤ target (the solvers keep a safe end)."""
    from dplens.accountant import allocation
    from dplens.accountant.calibrate import _Counter, _local_solve, _solve

    safe, unsafe = ends["safe"], ends["unsafe"]
    with allocation.coarse_grids():
        coarse = _Counter(epsilon_of)
        found = _local_solve(coarse, goal=target, near=near, safe=safe, unsafe=unsafe, integer=False, xtol=5e-4 * near)
    xtol = 1e-4 * found
    below = found * (1.0 - _COARSE_GAP)
    if counter(found) <= target < counter(below):
        return _solve(counter, target=target, safe=found, unsafe=below, integer=False, xtol=xtol)
    start = below if counter(found) <= target else found
    return _local_solve(counter, goal=target, near=start, safe=safe, unsafe=unsafe, integer=False, xtol=xtol)


def _calibrate_risk(run: Callable[[float], DpSgdRun], delta: float, method: Any, **target: Any) -> DpSgdPrivacy:
    """σ for an attack-risk target under the run's sampler (the smallest meeting it: risk falls with σ)."""
    from dplens.accountant.calibrate import Direction, RiskTarget, calibrate_risk

    result = calibrate_risk(
        lambda sigma: Accountant().compose(run(sigma)),
        target=RiskTarget(**target),
        lower=0.05,
        upper=1000.0,
        direction=Direction.DECREASING,
        param="noise_multiplier",
        delta=delta,
        method=as_method(method),
    )
    accounted = Accountant().compose(run(float(result.value))).epsilon_result(delta, method=result.method)
    risk = {
        "target": result.target.describe(),
        "achieved": result.achieved,
        "warnings": list(result.warnings),
        "attack_risk": result.risk.to_dict(),
    }
    return _privacy(run(float(result.value)), accounted, risk=risk)


@dataclass(frozen=True, slots=True, kw_only=True)
class _AccountedAt:
    """The parts of an :class:`~dplens.accountant.compose.EpsilonResult` a calibration result provides."""

    epsilon: float
    delta: float
    method: Method
    details: str
    epsilon_lower: float | None = None
    bracket_note: str | None = None


# --------------------------------------------------------------------------------------------
# Interpreters: a run is its standard ledger (upper bound), named after its sampler
# --------------------------------------------------------------------------------------------


def _register_interpreters() -> None:
    from dplens.accountant import pld, rdp
    from dplens.accountant.curves import PrivacyProfile, RdpCurve

    @rdp.rdp_curve.register(DpSgdRun)
    def _(event: DpSgdRun) -> RdpCurve:
        return rdp.rdp_curve(event.standard_event())

    @pld.privacy_profile.register(DpSgdRun)
    def _(event: DpSgdRun) -> PrivacyProfile:
        profile = pld.privacy_profile(event.standard_event())
        return PrivacyProfile(
            remove=profile.remove,
            add=profile.add,
            epsilon_for_delta=profile.epsilon_for_delta,
            description=f"DP-SGD with {event.sampling} sampling ({event.neighboring.value}): {profile.description}",
            discretisation=profile.discretisation,
            trade_off_function=profile.trade_off_function,
        )


_register_interpreters()
