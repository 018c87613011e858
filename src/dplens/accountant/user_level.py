"""The privacy unit of a DP-SGD number: one example, or one user with at most K examples.

A model's published ε is usually the ε of one *example*. When users contribute many examples (a user's messages, a
patient's visits) the unit that must be protected is the user, and two trainings are accounted (Charles et al.,
"Learning with User-Level Differential Privacy Under Fixed Compute Budgets", SaTML 2025, arXiv 2407.07737; Chua et
al., "Mind the Privacy Unit!", COLM 2024):

- **Example-level sampling (ELS)**: the batches are drawn over examples as usual, each user contributes at most K
  examples, and the ε is that of the group of the user's K examples. Under Poisson sampling at q = B/N each of them is
  in a step's batch independently, so the number of the user's examples in the batch is Binomial(K, q); with every
  example clipped to C, the worst case has the K gradients aligned, and the pair of one step is N(0, σ²) against
  Σₖ Binomial(K, q)(k)·N(k, σ²) (Ganesh, "Tight group-level DP guarantees for DP-SGD with sampling via mixture of
  Gaussians", arXiv 2401.10294, 2024; jax_privacy 2.0's ``DpsgdTrainingUserLevelAccountant`` composes the same
  ``MixtureOfGaussiansDpEvent`` on dp-accounting's PLD, ``accounting/analysis.py``). It is
  a :class:`~dplens.accountant.events.MixtureOfGaussians`, which dplens's PLD engine brackets. The same pair is
  attained (K equal gradients of norm C), so the bracket's lower end is certified. Removing the user's examples and
  zeroing them out give the same pair (a zeroed example adds nothing to a batch).
- **User-level sampling (ULS)**: users are sampled (q = B/U, a batch of B users, ⌈E·U/B⌉ steps) and each user's
  examples are clipped *together* to C: the ordinary DP-SGD event with users as the records, under any sampler.

Large K: components k with P(Binomial(K, q) > k) below a per-step η are truncated. The true step's mixture is
P = (1 − η)P_tr + ηP_tail, with P_tr the normalised truncated mixture; (P, Q) is a post-processing of
(P_tr, Q) ⊗ (B_P, B_Q), B_P = (1 − η, η), B_Q = (1, 0) (on the second outcome, draw from P_tail), and B is
dominated by the (0, η) pair (Kairouz, Oh, Viswanath 2015, Thm 2.1) in both directions. T steps compose to
(P_tr, Q)^T ⊗ (0, 1 − (1 − η)^T): the ledger below adds an :class:`~dplens.accountant.approx_dp.ApproxDp` of
ε = 0 and δ = 1 − (1 − η)^T ≤ :data:`TRUNCATION_DELTA` (certified, whatever K). η is bounded by the Chernoff–
Hoeffding bound P(X ≥ m) ≤ exp(−K·KL(m/K ‖ q)) (Hoeffding 1963, Thm 1), not by a floating-point tail.

Other samplers under ELS: shuffled batches, cyclic batches, balls-and-bins and fixed bins place each example in at
most one step per epoch; a user's K examples then add at most K·C to the sum of all the epoch's steps together
(Σₜ nₜ² ≤ (Σₜ nₜ)² = K²), so the run is at most K·√P/σ-GDP for P participations — the unamplified K-example bound
(exact composition of Gaussian mechanisms; no amplification is claimed). Its lower end is the example-level lower
end (a user with one example is a user with at most K). Under substitution (``replace_one``) a replaced example moves
its step's sum by up to 2C: the bound is then 2K·√P/σ-GDP.

Fixed-size subsets (B of the N examples drawn afresh each step) and truncated Poisson may put a user's examples in
every step. Their upper bound is **group privacy** of the example-level run — for fixed-size subsets with N − K ≥ B
the smaller of it and the label pair of :class:`~dplens.accountant.samplers.FixedSizeUserStep` (the user's count in
each batch revealed, a per-step dominating pair; :func:`fixed_size_user_ledger`): under zero-out, substitution or
add/remove, a user's K examples are a path of K single-example neighbours, so Mironov's RDP group bound (2017, Prop. 2)
and the (ε, δ) group lemma on the privacy profile (:class:`~dplens.accountant.group.GroupPrivacy`) hold — valid, not
tight. For fixed-size batches the example-level run is taken under substitution (Wang, Balle, Kasiviswanathan 2019)
even for zero-out: a zeroed example is a replaced one, and the Poisson pair at q is not a valid bound for one zeroed
example under fixed-size batches (:meth:`UserLevelRun.group_base` has the counterexample; the example-level run of
:mod:`dplens.accountant.dp_sgd` is accounted the same way).
Fixed-size batches also get a lower end from an attained pair: the user's K examples with one clipped gradient
g (‖g‖ = C) and every other example's gradient 0 (zero-out: the user's examples zeroed) or −g (substitution: replaced
by −g); the batch holds X ~ Hypergeometric(N, K, B) of them, independently across steps, so the pair of the run is
exactly N(0, σ²) vs Σₖ Hyp(k)·N(k·s, σ²) composed T times, s = 1 (zero-out) or 2 (substitution).
Under substitution (s = 2) that mixture is what Ganesh (2024, arXiv 2401.10294) computes for fixed-size batches and
jax_privacy 1.x's ``DpsgdTrainingUserLevelAccountant`` composed; dplens reports it as the lower end, labelled with that
citation, and does not take it as the upper bound: it is **not a per-step dominating pair** for K ≥ 2. With the others'
gradients at 0 and the user's at +C in D, −C in D′, a step's outputs are Σₖ Hyp(k)·N(k, σ²) against
Σₖ Hyp(k)·N(−k, σ²) (clip units), whose total variation Σₖ Hyp(k)·(2Φ(k/σ) − 1) is the joint-convexity bound, strictly
above the mixture's against one Gaussian (K = 2, N = 20, B = 6, σ = 1: 0.3771 against 0.3689; the test of this module,
in mpmath). Composed over 5 and 20 steps the mixture stayed above that configuration in the cases tried, so its
composed numbers may still hold, but not by the per-step argument, and not here. Truncated Poisson has no RDP
curve here: a user with K ≥ 2 is refused (one line naming Poisson and user-level sampling).

Relations for a user: under Poisson, removing and zeroing out the user's examples give the same pair (a zeroed
example adds nothing to a batch); under fixed-size batches zero-out and substitution differ (substitution doubles
every shift), and add/remove is not defined (the batch size is fixed); the once-per-epoch samplers are accounted under
their own relation (substitution doubling μ, as above).
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass
from typing import Any

from dplens.accountant import events as ev
from dplens.accountant.dp_sgd import DpSgdRun, Sampler, as_sampler

__all__ = [
    "MAX_ACCOUNTED_COUNTS",
    "TRUNCATION_DELTA",
    "PrivacyUnit",
    "UserEpsilons",
    "UserLevelRun",
    "accounted_counts",
    "binomial_tail_bound",
    "els_step",
    "fixed_size_step",
    "fixed_size_user_ledger",
    "parse_histogram",
    "user_epsilons",
    "user_level_epsilon",
    "user_level_noise_multiplier",
]

#: The δ a run's truncated Binomial tail may add, over all its steps (an ApproxDp(0, δ) in the ledger).
TRUNCATION_DELTA = 1e-15

#: Samplers that put each example in at most one step per epoch (the unamplified K-example bound applies).
_ONCE_PER_EPOCH = (Sampler.SHUFFLE, Sampler.SHUFFLE_ONCE, Sampler.CYCLIC, Sampler.BALLS_AND_BINS, Sampler.FIXED_BINS)

#: Samplers whose user-level upper bound is group privacy of the example-level run (an example may be in every step).
_GROUP_BOUND = (Sampler.FIXED_SIZE, Sampler.TRUNCATED_POISSON)


class PrivacyUnit(enum.Enum):
    """Whose privacy an ε protects (the values are the command line's ``--privacy-unit`` names)."""

    EXAMPLE = "example"
    USER = "user"


def as_privacy_unit(unit: PrivacyUnit | str) -> PrivacyUnit:
    """``unit`` as a :class:`PrivacyUnit`; a ``ValueError`` naming the argument otherwise."""
    if isinstance(unit, PrivacyUnit):
        return unit
    if isinstance(unit, str):
        try:
            return PrivacyUnit(unit.strip().lower())
        except ValueError:
            pass
    raise ValueError(f"privacy_unit must be one of {[u.value for u in PrivacyUnit]}; got {unit!r}")


def _binary_kl(a: float, p: float) -> float:
    """KL(Bernoulli(a) ‖ Bernoulli(p)) for p < a ≤ 1."""
    out = a * math.log(a / p)
    if a < 1.0:
        out += (1.0 - a) * math.log((1.0 - a) / (1.0 - p))
    return out


def binomial_tail_bound(trials: int, p: float, k: int) -> float:
    """An upper bound on P(X > k), X ~ Binomial(trials, p): exp(−n·KL((k+1)/n ‖ p)) when (k+1)/n > p (Chernoff;
    Hoeffding 1963, Thm 1), else 1; 0 for k ≥ n. Also bounds the hypergeometric tail of the same mean (ibid., Thm 4).

    Example:
        >>> binomial_tail_bound(10, 0.5, 10), binomial_tail_bound(10, 0.5, 9) >= 0.5**10
        (0.0, True)
    """
    if k >= trials:
        return 0.0
    a = (k + 1) / trials
    if a <= p:
        return 1.0
    return min(1.0, math.exp(-trials * _binary_kl(a, p)) * (1.0 + 1e-9))


def _binomial_pmf(trials: int, p: float, k: int) -> float:
    """C(n, k)·p^k·(1 − p)^(n − k) in log space (no scipy.stats: its import costs a second)."""
    log_comb = math.lgamma(trials + 1) - math.lgamma(k + 1) - math.lgamma(trials - k + 1)
    return math.exp(log_comb + k * math.log(p) + (trials - k) * math.log1p(-p))


def _hypergeometric_pmf(population: int, marked: int, draws: int, k: int) -> float:
    """P(X = k), X ~ Hypergeometric(population N, marked K, draws B): C(K, k)·C(N − K, B − k)/C(N, B), in log space."""

    def log_comb(n: int, r: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)

    if k < max(0, draws + marked - population) or k > min(marked, draws):
        return 0.0
    return math.exp(log_comb(marked, k) + log_comb(population - marked, draws - k) - log_comb(population, draws))


def _truncated_mixture(sigma: float, top: int, mean: float, pmf, tail_bound, tail: float) -> tuple[ev.Event, float]:
    """N(0, σ²) vs Σ_{k ≤ k_max} w(k)·N(k, σ²) (w = ``pmf`` normalised over k ≤ k_max ≤ ``top``), and η ≥ the mass
    beyond k_max: the first k ≥ ⌈mean⌉ whose ``tail_bound(k)`` ≥ P(X > k) is ≤ ``tail`` (η = 0: nothing cut)."""
    k_max, eta = top, 0.0
    k = max(1, math.ceil(mean))
    while k < top:
        bound = tail_bound(k)
        if bound <= tail:
            k_max, eta = k, bound
            break
        k = k + 1 if k < 64 else int(k * 1.05) + 1
    if k_max < top:
        eta = max(eta, 5e-324)  # a bound that underflowed still stands for a positive tail
    pmf_values = [pmf(i) for i in range(k_max + 1)]
    keep = [(float(i), w) for i, w in enumerate(pmf_values) if w > 0]
    eta += (len(pmf_values) - len(keep)) * 1e-300  # components whose mass underflowed (each < 1e-300) go to the tail
    total = math.fsum(w for _, w in keep)
    step = ev.MixtureOfGaussians(
        standard_deviation=sigma,
        sensitivities=tuple(i for i, _ in keep),
        sampling_probs=tuple(w / total for _, w in keep),
    )
    return step, eta


@functools.lru_cache(maxsize=512)
def els_step(noise_multiplier: float, max_examples: int, sampling_rate: float, tail: float) -> tuple[ev.Event, float]:
    """One step of a user with ``max_examples`` K examples under Poisson sampling at q: the mixture N(0, σ²) vs
    Σₖ Binomial(K, q)(k)·N(k, σ²) over k ≤ k_max (normalised), and η ≥ P(Binomial(K, q) > k_max) ≤ ``tail``
    (0 when nothing is truncated). K = 1 is the Poisson-subsampled Gaussian itself."""
    sigma, big_k, q = float(noise_multiplier), int(max_examples), float(sampling_rate)
    if big_k == 1 or q == 1.0:
        shift = float(big_k) if q == 1.0 else 1.0
        if q == 1.0:
            return ev.Gaussian(noise_multiplier=sigma / shift), 0.0
        return ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma)), 0.0
    return _truncated_mixture(
        sigma,
        big_k,
        big_k * q,
        functools.partial(_binomial_pmf, big_k, q),
        functools.partial(binomial_tail_bound, big_k, q),
        tail,
    )


@functools.lru_cache(maxsize=512)
def fixed_size_step(
    noise_multiplier: float, max_examples: int, dataset_size: int, batch_size: int, tail: float
) -> tuple[ev.Event, float]:
    """The attained pair of one fixed-size step (a subset of B of the N examples, uniformly) for a user whose K
    examples all have the same clipped gradient, against the run without them (zeroed out): N(0, σ²) vs
    Σₖ Hypergeometric(N, K, B)(k)·N(k, σ²), truncated like :func:`els_step`. The count X of the user's examples in
    the batch is Hypergeometric(N, K, B) = Hypergeometric(N, B, K): K draws without replacement from N with B marked,
    so P(X > k) ≤ the Chernoff bound of Binomial(K, B/N) (Hoeffding 1963, Thm 4). Replacing the examples
    instead (substitution, the others at −g) doubles the shifts (pass σ/2): Ganesh's (arXiv 2401.10294) mixture
    for fixed-size batches."""
    sigma, big_k, n, b = float(noise_multiplier), int(max_examples), int(dataset_size), int(batch_size)
    top = min(big_k, b)
    q = b / n
    if q == 1.0:
        return ev.Gaussian(noise_multiplier=sigma / big_k), 0.0
    return _truncated_mixture(
        sigma,
        top,
        big_k * q,
        functools.partial(_hypergeometric_pmf, n, big_k, b),
        lambda k: binomial_tail_bound(big_k, q, k) if k < top else 0.0,
        tail,
    )


def _check_int(name: str, value: Any, *, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class UserLevelRun(ev.Event):
    """A DP-SGD training accounted for one **user** (at most ``max_examples_per_user`` K examples each).

    ``user_sampling=False`` (ELS): the batches are drawn over the ``dataset_size`` N examples by ``sampling`` (batch
    size B examples), K is required. ``user_sampling=True`` (ULS): the batches are drawn over ``users`` U users (batch
    size B users, each user's examples clipped together), ⌈E·U/B⌉ steps; K is optional (it only checks N ≤ K·U).

    Example (σ = 1.5, q = 0.005, T = 5000, δ = 1e-6: the tight K = 2 analysis; dp-accounting's mixture PLD gives 2.46):
        >>> from dplens.accountant.compose import Accountant
        >>> run = UserLevelRun(noise_multiplier=1.5, dataset_size=200000, batch_size=1000, epochs=25,
        ...                    max_examples_per_user=2)
        >>> run.steps, round(Accountant().compose(run).epsilon(1e-6, method="pld"), 2)
        (5000, 2.47)
    """

    noise_multiplier: float
    dataset_size: int
    batch_size: int
    epochs: float
    sampling: str = Sampler.POISSON.value
    max_examples_per_user: int | None = None
    user_sampling: bool = False
    users: int | None = None
    neighboring: ev.NeighboringRelation | None = None
    max_batch_size: int | None = None
    drop_last: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "sampling", as_sampler(self.sampling).value)
        _check_int("dataset_size", self.dataset_size)
        _check_int("batch_size", self.batch_size)
        k, users = self.max_examples_per_user, self.users
        if k is not None:
            _check_int("max_examples_per_user", k)
        if users is not None:
            _check_int("users", users)
            if users > self.dataset_size:
                raise ValueError(f"users must be <= dataset_size={self.dataset_size!r}; got users={users!r}")
            if k is not None and self.dataset_size > k * users:
                raise ValueError(
                    f"dataset_size={self.dataset_size!r} exceeds max_examples_per_user * users = {k!r} * {users!r}"
                )
        if not isinstance(self.user_sampling, bool):
            raise ValueError(f"user_sampling must be True or False; got {self.user_sampling!r}")
        if self.user_sampling:
            if users is None:
                raise ValueError("user_sampling needs users (the number of users U the batches are drawn from)")
            if self.batch_size > users:
                raise ValueError(f"batch_size must be <= users={users!r} under user sampling; got {self.batch_size!r}")
        elif k is None:
            raise ValueError(
                "privacy_unit='user' needs max_examples_per_user (example-level sampling) or user_sampling with users"
            )
        run = self.record_run()  # validates the run's own parameters
        object.__setattr__(self, "neighboring", run.neighboring)
        if self.uses_group_privacy:
            self._check_group_bound()

    @property
    def uses_group_privacy(self) -> bool:
        """ELS with K ≥ 2 under a sampler that may put an example in every step (fixed-size, truncated Poisson): the
        upper bound is group privacy of the example-level run."""
        return not self._as_record and self.sampler in _GROUP_BOUND

    def group_base(self) -> DpSgdRun:
        """The example-level run whose group privacy bounds the user's: the run itself, except fixed-size batches under
        zero-out, accounted as substitution (a zeroed example is a replaced one). The Poisson pair at q (dplens's
        example-level zero-out pair for fixed-size batches before 2026-12-02) is not a valid bound: N = 2, B = 1,
        gradients +1 (the record) and −1 (the other) give (1 − q)N(0) + qN(2) against (1 − q)N(0) + qN(1), whose
        hockey-stick divergence exceeds the Poisson pair's (at σ = 1, ε = 1: 0.0587 against 0.0289)."""
        run = self.record_run()
        if self.sampler is Sampler.FIXED_SIZE and run.neighboring is ev.NeighboringRelation.REPLACE_SPECIAL:
            import dataclasses

            return dataclasses.replace(run, neighboring=ev.NeighboringRelation.REPLACE_ONE)
        return run

    def _check_group_bound(self) -> None:
        """Refuse (one line, naming the alternatives) where no group-privacy route accounts the example-level run."""
        from dplens.accountant import rdp

        try:
            rdp.rdp_curve(self.group_base().standard_event())
        except rdp.UnsupportedEventError:
            raise ValueError(
                f"no user-level bound for sampling={self.sampling!r} with max_examples_per_user="
                f"{self.max_examples_per_user!r}: its example-level run has no RDP curve for group privacy; use "
                "user_sampling (users sampled, per-user clipping) or sampling='poisson'"
            ) from None

    @property
    def sampler(self) -> Sampler:
        return Sampler(self.sampling)

    @property
    def _as_record(self) -> bool:
        """The user is one record of :meth:`record_run`: users sampled, or at most one example each (K = 1 is the
        example-level event itself, under every sampler)."""
        return self.user_sampling or self.max_examples_per_user == 1

    def record_run(self) -> DpSgdRun:
        """The run whose records are sampled: over examples (ELS) or over users (ULS)."""
        return DpSgdRun(
            noise_multiplier=self.noise_multiplier,
            dataset_size=self.users if self.user_sampling else self.dataset_size,
            batch_size=self.batch_size,
            epochs=self.epochs,
            sampling=self.sampling,
            neighboring=self.neighboring,
            max_batch_size=self.max_batch_size,
            drop_last=self.drop_last,
        )

    @property
    def steps(self) -> int:
        return self.record_run().steps

    @property
    def sampling_rate(self) -> float:
        return self.batch_size / (self.users if self.user_sampling else self.dataset_size)

    def _mixture(self) -> tuple[ev.Event, float]:
        """(ELS Poisson) one step's truncated mixture and the truncation's δ over the run, 1 − (1 − η)^T."""
        steps = self.steps
        step, eta = els_step(
            float(self.noise_multiplier), int(self.max_examples_per_user), self.sampling_rate, TRUNCATION_DELTA / steps
        )
        return step, (-math.expm1(steps * math.log1p(-eta)) if eta > 0 else 0.0)

    def lower_pair(self) -> tuple[ev.Event, float] | None:
        """(fixed-size, K ≥ 2) one step's attained pair — the user's K examples with one clipped gradient of norm C,
        every other example's gradient −C·(the same direction) under substitution (the shifts double: σ/2) or 0
        under zero-out — and its truncation's δ over the run (:func:`fixed_size_step`); None for other runs."""
        if not self.uses_group_privacy or self.sampler is not Sampler.FIXED_SIZE:
            return None
        sigma = float(self.noise_multiplier) / (2.0 if self.neighboring is ev.NeighboringRelation.REPLACE_ONE else 1.0)
        steps = self.steps
        step, eta = fixed_size_step(
            sigma, int(self.max_examples_per_user), self.dataset_size, self.batch_size, TRUNCATION_DELTA / steps
        )
        return step, (-math.expm1(steps * math.log1p(-eta)) if eta > 0 else 0.0)

    def unamplified_mu(self) -> float | None:
        """K·√P/σ for the samplers that place an example at most once per epoch (ELS), twice that under substitution
        (a replaced example moves its step's sum by up to 2C), else None."""
        if self._as_record or self.sampler not in _ONCE_PER_EPOCH:
            return None
        per_epoch = self.record_run().plan().steps_per_epoch or 1
        participations = math.ceil(self.steps / per_epoch)
        shift = 2.0 if self.neighboring is ev.NeighboringRelation.REPLACE_ONE else 1.0
        return shift * self.max_examples_per_user * math.sqrt(participations) / float(self.noise_multiplier)

    def standard_event(self) -> ev.Event:
        """The ledger whose ε bounds the user's from above."""
        if self._as_record:
            return self.record_run().standard_event()
        if self.uses_group_privacy:
            from dplens.accountant.group import GroupPrivacy

            return GroupPrivacy(event=self.group_base().standard_event(), group_size=self.max_examples_per_user)
        mu = self.unamplified_mu()
        if mu is not None:
            return ev.Gaussian(noise_multiplier=1.0 / mu, neighboring=self.neighboring)
        step, truncation = self._mixture()
        composed = ev.SelfComposed(event=step, count=self.steps)
        if truncation == 0:
            return composed
        from dplens.accountant.approx_dp import ApproxDp

        return ev.Composed(events=(composed, ApproxDp(epsilon=0.0, delta=truncation)))

    def gdp_mu(self) -> float | None:
        """μ where the user-level bound is exactly μ-GDP (the unamplified samplers), else None."""
        if self._as_record:
            return self.record_run().gdp_mu()
        return self.unamplified_mu()

    def truncation_delta(self) -> float:
        """The δ the truncated Binomial tail adds (0: nothing truncated, or not a mixture)."""
        if self._as_record or self.sampler is not Sampler.POISSON:
            return 0.0
        return self._mixture()[1]

    def lower_bound_events(self) -> tuple[ev.Event, ...] | None:
        """None where the ledger's pair is attained (ELS Poisson without truncation); the one-example run's ledger
        for the unamplified samplers (a valid lower bound); () where the lower end needs the truncation's δ shift
        (computed by :func:`user_level_epsilon`)."""
        if self._as_record:
            return self.record_run().lower_bound_events()
        if self.unamplified_mu() is not None:
            run = self.record_run()
            declared = run.lower_bound_events()
            return (run.standard_event(),) if declared is None else declared
        if self.uses_group_privacy:
            return ()  # computed by :func:`user_level_epsilon` (see :meth:`lower_pair`)
        return None if self.truncation_delta() == 0 else ()


@dataclass(frozen=True, slots=True)
class _ElsRdp:
    """min(T·mixture RDP, group RDP) at α ≤ :data:`_MIXTURE_ALPHA_MAX`, the group RDP above (picklable values)."""

    mixture: Any
    group: Any
    steps: int

    def __call__(self, alpha):
        import numpy as np

        alpha = np.asarray(alpha, dtype=float)
        out = np.asarray(self.group(alpha), dtype=float).copy()
        small = alpha <= _MIXTURE_ALPHA_MAX
        if np.any(small):
            out[small] = np.minimum(out[small], self.steps * np.asarray(self.mixture(alpha[small]), dtype=float))
        return out


#: Largest order at which the mixture's RDP quadrature is evaluated (it grows costly with α; the group bound is used
#: above, a valid upper bound at every α).
_MIXTURE_ALPHA_MAX = 256.0


def _register_interpreters() -> None:
    from dplens.accountant import pld, rdp
    from dplens.accountant.curves import RdpCurve

    @rdp.rdp_curve.register(UserLevelRun)
    def _(event: UserLevelRun) -> RdpCurve:
        """RDP: the full mixture's curve (no truncation; its quadrature up to α = 256) and Mironov's group bound
        (2017, Prop. 2) on the subsampled run, the smaller at each α (both valid); the group bound alone where the
        Binomial tail was truncated (its δ has no Rényi divergence)."""
        if event._as_record or event.unamplified_mu() is not None or event.uses_group_privacy:
            return rdp.rdp_curve(event.standard_event())
        from dplens.accountant.group import GroupPrivacy

        group = rdp.rdp_curve(
            GroupPrivacy(event=event.record_run().standard_event(), group_size=event.max_examples_per_user)
        )
        step, truncation = event._mixture()
        if truncation != 0:
            return group
        function = _ElsRdp(mixture=rdp.rdp_curve(step), group=group, steps=event.steps)
        return RdpCurve.from_function(function, description=f"user-level mixture, K = {event.max_examples_per_user}")

    @pld.privacy_profile.register(UserLevelRun)
    def _(event: UserLevelRun):
        return pld.privacy_profile(event.standard_event())


_register_interpreters()


# --------------------------------------------------------------------------------------------
# The DP-SGD entry points for a user
# --------------------------------------------------------------------------------------------


def _user_run(noise_multiplier: float, shape: dict[str, Any], unit: dict[str, Any]) -> UserLevelRun:
    return UserLevelRun(
        noise_multiplier=noise_multiplier,
        dataset_size=shape["dataset_size"],
        batch_size=shape["batch_size"],
        epochs=shape["epochs"],
        sampling=as_sampler(shape.get("sampling", Sampler.POISSON)).value,
        max_examples_per_user=unit.get("max_examples_per_user"),
        user_sampling=bool(unit.get("user_sampling", False)),
        users=unit.get("users"),
        neighboring=shape.get("neighboring"),
        max_batch_size=shape.get("max_batch_size"),
        drop_last=shape.get("drop_last", False),
    )


def _shifted_lower(run: UserLevelRun, delta: float, upper: float, pair=None) -> float | None:
    """A certified lower end for a truncated mixture: δ_true(ε) ≥ δ_tr(ε) − e^ε·η_T in both directions (P^T ≥
    (1 − η)^T·P_tr^T and P^T ≤ P_tr^T + η_T), so the lower end of P_tr^T's bracket at δ + e^{ε_up}·η_T bounds the
    true ε(δ) from below (capped at ε_up); None when that shift is not small against δ. ``pair``: (step, η_T) of an
    attained pair (default: the run's own mixture)."""
    from dplens.accountant import pld_engine

    step, truncation = run._mixture() if pair is None else pair
    if not math.isfinite(upper) or upper > 600:
        return None
    shifted = delta + math.exp(upper) * truncation
    if shifted >= min(1.0, 1.01 * delta):
        return None
    bracket = pld_engine.epsilon_bracket([(step, run.steps)], shifted, neighboring=ev.ADD_REMOVE)
    return min(bracket.lower, upper)


def _pair_upper(run: UserLevelRun, pair: tuple[ev.Event, float], delta: float) -> float:
    """An upper bound on the attained pair's own ε (its truncated mixture composed, the tail's δ added): the cap E of
    :func:`_shifted_lower` (min(ε_l, E) bounds the pair's ε, hence the user's, from below for any E)."""
    from dplens.accountant.approx_dp import ApproxDp
    from dplens.accountant.compose import Accountant

    step, truncation = pair
    ledger = Accountant().compose(step, count=run.steps)
    if truncation > 0:
        ledger.compose(ApproxDp(epsilon=0.0, delta=truncation))
    from dplens.accountant.rdp import UnsupportedEventError

    try:
        return ledger.epsilon(delta, method="pld")
    except (UnsupportedEventError, ValueError, ArithmeticError):
        return math.inf


@dataclass(frozen=True, slots=True)
class _Unbracketed:
    """An upper bound without a lower end (what :func:`dplens.accountant.dp_sgd._lower_end` reads)."""

    epsilon: float
    epsilon_lower: None = None


def _lower_of(run: UserLevelRun, delta: float, result: Any) -> tuple[float | None, str | None]:
    if run.lower_bound_events() is None:
        return (
            (None, None) if result.epsilon_lower is None else (min(result.epsilon_lower, result.epsilon), "certified")
        )
    from dplens.accountant.dp_sgd import _lower_end

    if run.uses_group_privacy:  # an attained pair's lower end (a construction), and the one-example run's
        # A user with one example is a user with at most K: the example-level lower end bounds the user's too (under
        # zero-out with fixed-size batches it is the larger one: the others at −C, not at 0).
        single = _lower_end(run.record_run(), delta, _Unbracketed(epsilon=result.epsilon))
        pair = run.lower_pair()
        lower = (
            None
            if pair is None
            else _shifted_lower(run, delta, min(result.epsilon, _pair_upper(run, pair, delta)), pair)
        )
        found = [value for value in (lower, single) if value is not None]
        lower = max(found) if found else None
        return lower, (None if lower is None else "lower bound")
    if run.unamplified_mu() is None and not run._as_record:
        lower = _shifted_lower(run, delta, result.epsilon)
        return lower, (None if lower is None else "certified")
    lower = _lower_end(run, delta, result)
    return lower, (None if lower is None else "lower bound")


def _group_note(run: UserLevelRun, lower: float | None, upper: float, *, label_pair: bool = False) -> str | None:
    """(group privacy, or the fixed-size label pair) why the bracket is wide and what gives a tight user-level
    number."""
    if not run.uses_group_privacy:
        return None
    width = "" if lower is None or not math.isfinite(upper) else f" ({upper / max(lower, 1e-300):.3g}x its lower end)"
    kind = (
        "the label pair of fixed-size user steps (the user's count in each batch revealed)"
        if label_pair
        else ("group privacy")
    )
    return (
        f"the upper bound is {kind}{width}, valid but loose; for a tight user-level epsilon use "
        "sampling='poisson' (Ganesh 2024's mixture, certified) or user_sampling"
    )


def _group_details(run: UserLevelRun) -> str:
    k, relation = run.max_examples_per_user, run.neighboring.value
    base = run.group_base().neighboring.value
    text = (
        f"user with at most {k} examples, {run.sampling} sampling ({relation}): upper bound = group privacy of the "
        f"example-level run under {base} (the user's {k} examples are a path of {k} single-example neighbours; "
        "Mironov 2017 Prop. 2 on RDP, the group lemma on the privacy profile), valid but not tight"
    )
    if run.sampler is Sampler.FIXED_SIZE and relation == "replace_one":
        text += (
            f"; lower end: the attained pair of {k} aligned examples replaced, a Hypergeometric(N, {k}, B) mixture "
            "with "
            "doubled shifts — the value Ganesh 2024 (arXiv 2401.10294) proves tight for fixed-size batches "
            "(jax_privacy's user-level accountant), not used as the upper bound here"
        )
    elif run.sampler is Sampler.FIXED_SIZE:
        text += (
            f"; zero-out accounted as substitution (the Poisson pair is not valid for a zeroed example under "
            f"fixed-size batches); lower end: the attained pair of {k} aligned examples zeroed, a "
            f"Hypergeometric(N, {k}, B) mixture"
        )
    else:
        text += "; lower end: the one-example run's (a user with one example is a user with at most K)"
    return text


def _details(run: UserLevelRun) -> str:
    if run.max_examples_per_user == 1 and not run.user_sampling:
        return "user with at most 1 example: the example-level event itself"
    if run.user_sampling:
        return (
            f"user-level sampling: {run.batch_size} of {run.users} users per step (q = {run.sampling_rate:.6g}), each "
            "user's examples clipped together: the DP-SGD event over users"
        )
    k = run.max_examples_per_user
    if run.unamplified_mu() is not None:
        return (
            f"user with at most {k} examples, {run.sampling} sampling: unamplified K-example bound, "
            f"{run.unamplified_mu():.6g}-GDP (each example in at most one step per epoch); lower end: one example"
        )
    if run.uses_group_privacy:
        return _group_details(run)
    text = (
        f"user with at most {k} examples, Poisson sampling at q = {run.sampling_rate:.6g}: mixture of Gaussians with "
        f"Binomial({k}, q) weights (Ganesh 2024, aligned worst case)"
    )
    truncation = run.truncation_delta()
    if truncation:
        text += f"; Binomial tail truncated, its mass {truncation:.3g} charged as delta (included)"
    return text


def fixed_size_user_ledger(run: UserLevelRun) -> ev.Event | None:
    """(fixed-size batches, K ≥ 2, N − K ≥ B) the user's upper-bound ledger: T runs of the label pair of
    :class:`~dplens.accountant.samplers.FixedSizeUserStep` (J's law cut at k_max like :func:`fixed_size_step`) and the
    cut's δ over the run as an ApproxDp(0, δ): conditioned on J ≤ k_max at every step (probability 1 − δ, the same
    under D and D′) the run is the cut one. None where it does not apply (the coupling needs B others)."""
    from dplens.accountant.approx_dp import ApproxDp
    from dplens.accountant.samplers import FixedSizeUserStep

    k, n, b = int(run.max_examples_per_user or 1), run.dataset_size, run.batch_size
    if run._as_record or run.sampler is not Sampler.FIXED_SIZE or k < 2 or n - k < b:
        return None
    steps = run.steps
    mixture, eta = fixed_size_step(1.0, k, n, b, TRUNCATION_DELTA / steps)
    if not isinstance(mixture, ev.MixtureOfGaussians) or mixture.sensitivities[0] != 0:
        return None
    nothing = mixture.sampling_probs[0]
    rate = 1.0 - nothing
    if not 0.0 < rate < 1.0:
        return None
    labels = tuple(int(j) for j in mixture.sensitivities[1:])
    weights = tuple(w / rate for w in mixture.sampling_probs[1:])
    total = math.fsum(weights)
    step = FixedSizeUserStep(
        noise_multiplier=float(run.noise_multiplier),
        rate=rate,
        labels=labels,
        weights=tuple(w / total for w in weights),
    )
    composed = ev.SelfComposed(event=step, count=steps)
    if eta == 0:
        return composed
    cut = -math.expm1(steps * math.log1p(-eta))
    return ev.Composed(
        events=(composed, ApproxDp(epsilon=0.0, delta=cut, neighboring=ev.NeighboringRelation.REPLACE_ONE))
    )


def _fixed_size_user_bound(run: UserLevelRun, delta: float, method: Any, result: Any) -> tuple[Any, bool]:
    """(``result``, False), or (the label pair's PLD answer, True) where it is smaller (both bound the user's ε)."""
    import dataclasses

    from dplens.accountant.compose import Accountant
    from dplens.accountant.routes import Method

    ledger = fixed_size_user_ledger(run)
    if ledger is None or method not in (Method.BEST, Method.PLD):
        return result, False
    try:
        found = (
            Accountant(neighboring=ev.NeighboringRelation.REPLACE_ONE)
            .compose(ledger)
            .epsilon_result(delta, method=Method.PLD, lower=False)
        )
    except (ValueError, OverflowError):  # out of the engine's range: group privacy stands
        return result, False
    if not found.epsilon < result.epsilon:
        return result, False
    details = (
        f"the label pair of fixed-size user steps (samplers.FixedSizeUserStep, a per-step dominating pair) by PLD: "
        f"{found.details} (group privacy gave {result.epsilon:.6g})"
    )
    return dataclasses.replace(result, epsilon=found.epsilon, method=found.method, details=details), True


def user_level_epsilon(
    *,
    dataset_size: int,
    batch_size: int,
    epochs: float,
    noise_multiplier: float,
    delta: float,
    method: Any = "best",
    sampling: Sampler | str = Sampler.POISSON,
    privacy_unit: PrivacyUnit | str = PrivacyUnit.USER,
    max_examples_per_user: int | None = None,
    user_sampling: bool = False,
    users: int | None = None,
    neighboring: Any = None,
    max_batch_size: int | None = None,
    drop_last: bool = False,
):
    """ε of a DP-SGD run for one user (an upper bound), with its lower end: :class:`UserLevelRun` accounted.

    Example (σ = 1.5, q = 0.005, T = 5000, δ = 1e-6; K = 1 is the example-level number):
        >>> r = user_level_epsilon(dataset_size=200000, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6,
        ...                        max_examples_per_user=8, method="pld")
        >>> round(r.epsilon, 2), r.privacy_unit, r.lower_bound, r.epsilon_lower <= r.epsilon
        (12.13, 'user', 'certified', True)
    """
    from dplens.accountant.compose import Accountant
    from dplens.accountant.dp_sgd import DpSgdPrivacy
    from dplens.accountant.routes import as_method

    if as_privacy_unit(privacy_unit) is not PrivacyUnit.USER:
        raise ValueError(f"user_level_epsilon accounts privacy_unit='user'; got {privacy_unit!r}")
    shape = dict(
        dataset_size=dataset_size,
        batch_size=batch_size,
        epochs=epochs,
        sampling=sampling,
        neighboring=neighboring,
        max_batch_size=max_batch_size,
        drop_last=drop_last,
    )
    unit = dict(max_examples_per_user=max_examples_per_user, user_sampling=user_sampling, users=users)
    run = _user_run(noise_multiplier, shape, unit)
    record = run.record_run()
    details = _details(run)
    if run.sampler is Sampler.POISSON and not user_sampling and record.neighboring is not ev.ADD_REMOVE:
        # Zeroing the user's examples out adds nothing to a batch: the same pair as removing them, accounted so (the
        # PLD engine models the mixture under add/remove).
        run = _user_run(noise_multiplier, dict(shape, neighboring=ev.ADD_REMOVE), unit)
        details += "; zero-out has the same dominating pair as add/remove"
    result = Accountant().compose(run).epsilon_result(delta, method=as_method(method))
    result, label_pair = _fixed_size_user_bound(run, delta, as_method(method), result)
    if label_pair:
        details = details.replace(
            "upper bound = group privacy", "upper bound = the label pair of fixed-size user steps (below group privacy)"
        )
    lower, kind = _lower_of(run, result.delta, result)
    return DpSgdPrivacy(
        epsilon=result.epsilon,
        delta=result.delta,
        noise_multiplier=float(noise_multiplier),
        dataset_size=dataset_size,
        batch_size=batch_size,
        epochs=record.epochs,
        steps=run.steps,
        sampling_rate=run.sampling_rate,
        method=result.method.value,
        details=f"{details}; {result.details}",
        neighboring=record.neighboring.value,
        sampling=run.sampling,
        epsilon_lower=lower,
        lower_bound=kind,
        steps_per_epoch=record.plan().steps_per_epoch,
        privacy_unit=PrivacyUnit.USER.value,
        max_examples_per_user=max_examples_per_user,
        user_sampling=bool(user_sampling),
        users=users,
        truncation_delta=run.truncation_delta() or None,
        bracket_note=_group_note(run, lower, result.epsilon, label_pair=label_pair),
    )


def user_level_noise_multiplier(
    *,
    dataset_size: int,
    batch_size: int,
    epochs: float,
    target_epsilon: float | None,
    delta: float,
    method: Any = "pld",
    sampling: Sampler | str = Sampler.POISSON,
    privacy_unit: PrivacyUnit | str = PrivacyUnit.USER,
    max_examples_per_user: int | None = None,
    user_sampling: bool = False,
    users: int | None = None,
    neighboring: Any = None,
    max_batch_size: int | None = None,
    drop_last: bool = False,
):
    """The smallest noise multiplier whose run meets (target ε, δ) **for one user**; its ε is ≤ the target.

    The safe-end root finder of :func:`dplens.accountant.calibrate.calibrate` on the user-level upper bound (ELS),
    or the DP-SGD calibration over users (ULS). The reported ε is the smaller of the calibration's and the re-accounted
    upper bound (both valid), so it never exceeds the target.

    Example:
        >>> r = user_level_noise_multiplier(dataset_size=200000, batch_size=1000, epochs=25, target_epsilon=8.0,
        ...                                 delta=1e-6, max_examples_per_user=4)
        >>> r.epsilon <= 8.0, r.privacy_unit == "user", r.noise_multiplier > 1.0
        (True, True, True)
    """
    import dataclasses

    from dplens.accountant.compose import Method
    from dplens.accountant.routes import as_method

    if as_privacy_unit(privacy_unit) is not PrivacyUnit.USER:
        raise ValueError(f"user_level_noise_multiplier calibrates privacy_unit='user'; got {privacy_unit!r}")
    if target_epsilon is None:
        raise ValueError("target_epsilon is required for a user-level calibration")
    method = as_method(method)
    if method is Method.BEST:
        method = Method.PLD
    shape = dict(
        dataset_size=dataset_size,
        batch_size=batch_size,
        epochs=epochs,
        sampling=sampling,
        neighboring=neighboring,
        max_batch_size=max_batch_size,
        drop_last=drop_last,
    )
    unit = dict(max_examples_per_user=max_examples_per_user, user_sampling=user_sampling, users=users)
    probe = _user_run(1.0, shape, unit)  # validates everything but the target
    if probe.uses_group_privacy and method is Method.PLD:
        method = Method.RDP  # group privacy of a fixed-size run: its substitution ledger has RDP only
    common = dict(privacy_unit=PrivacyUnit.USER, **unit, **shape)
    if user_sampling:
        from dplens.accountant.dp_sgd import dp_sgd_noise_multiplier

        by_users = dict(shape, dataset_size=users)
        found = dp_sgd_noise_multiplier(**by_users, target_epsilon=target_epsilon, delta=delta, method=method)
        value, calibrated = found.noise_multiplier, found.epsilon
    else:
        solved = shape
        if probe.sampler is Sampler.POISSON and probe.neighboring is not ev.ADD_REMOVE:
            solved = dict(shape, neighboring=ev.ADD_REMOVE)  # the same pair (see user_level_epsilon)
        value, calibrated = _solve_sigma(
            lambda sigma: _user_run(sigma, solved, unit), probe, target_epsilon, delta, method
        )
    out = user_level_epsilon(noise_multiplier=value, delta=delta, method=method, **common)
    if calibrated < out.epsilon:  # both are valid upper bounds at ``value``: report the smaller
        out = dataclasses.replace(
            out, epsilon=calibrated, epsilon_lower=min(out.epsilon_lower or 0.0, calibrated) or None
        )
    if out.epsilon > target_epsilon:  # pragma: no cover - the solver keeps a safe end; a last line of defence
        raise AssertionError(f"calibration overshot: epsilon={out.epsilon!r} > target={target_epsilon!r}")
    return dataclasses.replace(out, target_epsilon=float(target_epsilon))


def _solve_sigma(run, probe: UserLevelRun, target: float, delta: float, method: Any) -> tuple[float, float]:
    """σ with ε(σ) ≤ target, the smallest to 1e-4 relative: the safe-end root finder
    (:func:`dplens.accountant.calibrate._local_solve`) on the user-level upper bound, started at the example-level
    Poisson answer scaled by √K (the mixture's ε grows about linearly in K at fixed σ)."""
    from dplens.accountant import conversions, pld
    from dplens.accountant.calibrate import _Counter, _local_solve, calibrate_dp_sgd_noise
    from dplens.accountant.compose import Accountant

    target = conversions.check_epsilon(target, name="target_epsilon")
    if target == 0:
        raise ValueError(f"target_epsilon must be > 0; got {target!r}")
    delta = conversions.check_delta(delta, name="delta")
    k = probe.max_examples_per_user
    low, high = 0.05, 1000.0 * k

    def epsilon_of(sigma: float) -> float:
        try:
            return Accountant().compose(run(sigma)).epsilon(delta, method=method)
        except pld.PldOutOfRangeError:
            return math.inf  # beyond the engine's range: counted as unsafe, never returned

    counter = _Counter(epsilon_of)
    if counter(high) > target:
        raise ValueError(
            f"target_epsilon={target!r} is unreachable for noise_multiplier in [{low!r}, {high!r}] for a user with "
            f"{k} examples: epsilon at noise_multiplier={high!r} is {counter(high)!r}"
        )
    start = calibrate_dp_sgd_noise(
        sampling_rate=probe.sampling_rate, steps=probe.steps, target_epsilon=target, target_delta=delta, method="rdp"
    )
    near = min(float(start.value) * math.sqrt(k), high)
    value = _local_solve(counter, goal=target, near=near, safe=high, unsafe=low, integer=False, xtol=1e-4 * near)
    return value, counter(value)


# --------------------------------------------------------------------------------------------
# Heterogeneous users: a histogram of examples per user
# --------------------------------------------------------------------------------------------

#: Distinct counts accounted one by one up to this many; beyond it, a geometric grid of counts is accounted and every
#: other count is bracketed by its neighbours on the grid (ε is monotone in K).
MAX_ACCOUNTED_COUNTS = 24


@dataclass(frozen=True, slots=True, kw_only=True)
class UserEpsilons:
    """Per-user ε of a training whose users hold different numbers of examples (example-level sampling).

    ``worst_case`` is the user-level guarantee of the run (K = the largest count, or the cap ``max_examples_per_user``
    if larger; ε is monotone in K), ``rows`` the (examples, users, epsilon, epsilon_lower) of each count present: a
    user with k examples has at most the ε of a user with at most k examples. ``accounted_at[i]`` is the count whose
    run gave row i's ``epsilon`` (row i's own count, or the next accounted count above it: a valid upper bound, as a
    user with k examples is a user with at most k′ ≥ k); its ``epsilon_lower`` is then the lower end of the accounted
    count below (a user with k examples can hold k″ ≤ k aligned ones and k − k″ of zero gradient). ``users`` and
    ``examples`` are the histogram's totals, ``dataset_size`` the N the sampling rate q = B/N is taken over.
    """

    worst_case: Any
    rows: tuple[tuple[int, int, float, float | None], ...]
    users: int
    dataset_size: int
    examples: int = 0
    accounted_at: tuple[int, ...] = ()
    seconds: float | None = None

    def quantile(self, level: float) -> float:
        """The smallest ε such that a fraction ≥ ``level`` of the users have a per-user ε at most it."""
        if not (isinstance(level, int | float) and not isinstance(level, bool) and 0 < level <= 1):
            raise ValueError(f"level must be in (0, 1]; got {level!r}")
        seen = 0
        for _, users, epsilon, _ in sorted(self.rows, key=lambda row: row[2]):
            seen += users
            if seen >= level * self.users:
                return epsilon
        return self.worst_case.epsilon

    def to_dict(self) -> dict[str, Any]:
        accounted = self.accounted_at or tuple(k for k, *_ in self.rows)
        per_count = [
            {"examples": k, "users": n, "epsilon": e, "epsilon_lower": lo, "accounted_at": at}
            for (k, n, e, lo), at in zip(self.rows, accounted, strict=True)
        ]
        return {
            "privacy_unit": PrivacyUnit.USER.value,
            "epsilon": self.worst_case.epsilon,
            "epsilon_lower": self.worst_case.epsilon_lower,
            "lower_bound": self.worst_case.lower_bound,
            "delta": self.worst_case.delta,
            "users": self.users,
            "examples": self.examples or self.dataset_size,
            "dataset_size": self.dataset_size,
            "max_examples_per_user": self.worst_case.max_examples_per_user,
            "user_sampling": False,
            "median_user_epsilon": self.quantile(0.5),
            "user_epsilon_quantiles": {str(p): self.quantile(p) for p in (0.5, 0.9, 0.99)},
            "per_count": per_count,
            "worst_case": self.worst_case.to_dict(),
        }


def _check_histogram(histogram: Any) -> dict[int, int]:
    """{examples per user: users}, checked (integers; counts ≥ 1, users ≥ 0, at least one user); zero rows dropped."""
    if not isinstance(histogram, dict) or not histogram:
        raise ValueError(f"histogram must be a non-empty mapping {{examples per user: users}}; got {histogram!r}")
    for k, n in histogram.items():
        _check_int("histogram key (examples per user)", k)
        _check_int(f"histogram[{k!r}] (users with {k!r} examples)", n, minimum=0)
    out = {k: n for k, n in sorted(histogram.items()) if n > 0}
    if not out:
        raise ValueError(f"histogram has no user (every count of users is 0); got {histogram!r}")
    return out


def accounted_counts(counts: list[int], limit: int = MAX_ACCOUNTED_COUNTS) -> list[int]:
    """The counts accounted exactly: all of them when at most ``limit``, else the smallest, the largest and a
    geometric grid of counts present in between (at most ``limit``).

    Example:
        >>> accounted_counts([1, 2, 3]), len(accounted_counts(list(range(1, 1001)))) <= MAX_ACCOUNTED_COUNTS
        ([1, 2, 3], True)
    """
    counts = sorted(set(counts))
    if len(counts) <= limit:
        return counts
    low, high = counts[0], counts[-1]
    ratio = (high / low) ** (1.0 / (limit - 2))
    chosen = {low, high}
    target = float(low)
    for k in counts:  # the first count at or above each grid point
        if k >= target:
            chosen.add(k)
            target = max(target * ratio, k + 1.0)
    return sorted(chosen)  # at most limit: the grid has limit − 1 points below high


def _bracket_rows(hist: dict[int, int], results: dict[int, Any]) -> tuple[tuple, tuple[int, ...]]:
    """Every count's (examples, users, ε, ε_lower) from the accounted counts: its own, or the next one above (upper)
    and the one below (lower)."""
    import bisect

    grid = sorted(results)
    rows, at = [], []
    for k, n in hist.items():
        i = bisect.bisect_left(grid, k)
        above = grid[i]
        below = grid[i] if above == k else (grid[i - 1] if i > 0 else None)
        lower = None if below is None else results[below].epsilon_lower
        rows.append((k, n, results[above].epsilon, lower))
        at.append(above)
    return tuple(rows), tuple(at)


def user_epsilons(
    histogram: dict[int, int],
    *,
    batch_size: int,
    epochs: float,
    noise_multiplier: float,
    delta: float,
    method: Any = "best",
    sampling: Sampler | str = Sampler.POISSON,
    dataset_size: int | None = None,
    max_examples_per_user: int | None = None,
    neighboring: Any = None,
    max_batch_size: int | None = None,
    max_accounted: int = MAX_ACCOUNTED_COUNTS,
) -> UserEpsilons:
    """Per-user ε from a histogram {examples per user: number of users} under example-level sampling over the
    ``dataset_size`` N examples (default: the histogram's Σ k·nₖ; q = B/N): the worst case (K = the largest count, or
    the cap ``max_examples_per_user``) and every count's ε — one composition per distinct count (at most
    ``max_accounted``, default :data:`MAX_ACCOUNTED_COUNTS`, the rest bracketed by :func:`accounted_counts`' grid),
    each a
    :func:`user_level_epsilon` (Ganesh 2024's mixture under Poisson, its Binomial tail truncated with a certified δ).

    Example:
        >>> out = user_epsilons({1: 150000, 5: 10000}, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6)
        >>> out.users, out.dataset_size, out.rows[0][2] < out.worst_case.epsilon == out.rows[-1][2]
        (160000, 200000, True)
    """
    import dataclasses
    import time

    started = time.perf_counter()
    hist = _check_histogram(histogram)
    examples = sum(k * n for k, n in hist.items())
    users = sum(hist.values())
    n_total = examples if dataset_size is None else dataset_size
    _check_int("dataset_size", n_total)
    if examples > n_total:
        raise ValueError(f"histogram holds {examples} examples, more than dataset_size={n_total!r}")
    worst_k = max(hist)
    if max_examples_per_user is not None:
        _check_int("max_examples_per_user", max_examples_per_user)
        if max_examples_per_user < worst_k:
            raise ValueError(
                f"histogram has users with {worst_k} examples, more than "
                f"max_examples_per_user={max_examples_per_user!r}"
            )
        worst_k = max_examples_per_user
    common = dict(
        dataset_size=n_total,
        batch_size=batch_size,
        epochs=epochs,
        noise_multiplier=noise_multiplier,
        delta=delta,
        method=method,
        sampling=sampling,
        neighboring=neighboring,
        max_batch_size=max_batch_size,
    )
    _check_int("max_accounted", max_accounted, minimum=3)
    grid = accounted_counts(list(hist), max_accounted)
    results = {k: user_level_epsilon(max_examples_per_user=k, **common) for k in sorted({*grid, worst_k})}
    rows, at = _bracket_rows(hist, results)
    worst = dataclasses.replace(results[worst_k], users=users)
    return UserEpsilons(
        worst_case=worst,
        rows=rows,
        users=users,
        dataset_size=n_total,
        examples=examples,
        accounted_at=at,
        seconds=time.perf_counter() - started,
    )


def parse_histogram(text: str, *, name: str = "histogram") -> dict[int, int]:
    """A histogram of examples per user from a file's text: a JSON object {"examples": users, ...} or list of
    [examples, users] pairs, or CSV lines ``examples,users`` (an optional header line, ``#`` comments). Every value
    must be a non-negative integer written as one (no 2.0, no booleans); a count may appear once.

    Example:
        >>> parse_histogram('examples,users\\n1,150000\\n5,10000\\n'), parse_histogram('{"1": 3, "2": 1}')
        ({1: 150000, 5: 10000}, {1: 3, 2: 1})
    """
    import json

    stripped = text.strip()
    if not stripped:
        raise ValueError(f"{name} is empty")
    pairs: list[tuple[Any, Any]]
    if stripped[0] in "{[":
        try:
            document = json.loads(stripped)
        except json.JSONDecodeError as err:
            raise ValueError(f"{name} is not valid JSON: {err.msg} (line {err.lineno})") from None
        if isinstance(document, dict):
            pairs = list(document.items())
        elif isinstance(document, list) and all(isinstance(p, list) and len(p) == 2 for p in document):
            pairs = [tuple(p) for p in document]
        else:
            raise ValueError(f"{name} must be a JSON object {{examples: users}} or a list of [examples, users] pairs")
    else:
        pairs = _csv_pairs(stripped, name)
    out: dict[int, int] = {}
    for raw_k, raw_n in pairs:
        k = _integer(raw_k, f"{name}: examples per user")
        n = _integer(raw_n, f"{name}: users with {k} examples")
        if k < 1 or n < 0:
            raise ValueError(f"{name}: examples per user must be >= 1 and users >= 0; got {raw_k!r}: {raw_n!r}")
        if k in out:
            raise ValueError(f"{name}: the count {k} appears twice")
        out[k] = n
    if not out:
        raise ValueError(f"{name} has no row")
    return out


def _csv_pairs(text: str, name: str) -> list[tuple[str, str]]:
    lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    rows = [tuple(cell.strip() for cell in line.split(",")) for line in lines]
    for i, row in enumerate(rows):
        if len(row) != 2:
            raise ValueError(f"{name}: line {i + 1} must be 'examples,users'; got {lines[i]!r}")
    if rows and not rows[0][0].lstrip("+-").isdigit():  # a header
        rows = rows[1:]
    return rows


def _integer(value: Any, what: str) -> int:
    """An integer from a JSON number or a JSON/CSV string of digits; ``ValueError`` naming ``what`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("+-").isdigit():
            return int(text)
    raise ValueError(f"{what} must be an integer; got {value!r}")
