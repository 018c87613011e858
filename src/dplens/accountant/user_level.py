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
end (a user with one example is a user with at most K). Fixed-size subsets and truncated Poisson have no user-level
bound here: use user-level sampling, or Poisson.
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
    "TRUNCATION_DELTA",
    "PrivacyUnit",
    "UserEpsilons",
    "UserLevelRun",
    "binomial_tail_bound",
    "els_step",
    "user_epsilons",
    "user_level_epsilon",
    "user_level_noise_multiplier",
]

#: The δ a run's truncated Binomial tail may add, over all its steps (an ApproxDp(0, δ) in the ledger).
TRUNCATION_DELTA = 1e-15

#: Samplers that put each example in at most one step per epoch (the unamplified K-example bound applies).
_ONCE_PER_EPOCH = (Sampler.SHUFFLE, Sampler.SHUFFLE_ONCE, Sampler.CYCLIC, Sampler.BALLS_AND_BINS, Sampler.FIXED_BINS)


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
    k_max = big_k
    eta = 0.0
    mean = big_k * q
    k = max(1, math.ceil(mean))
    while k < big_k:
        bound = binomial_tail_bound(big_k, q, k)
        if bound <= tail:
            k_max, eta = k, bound
            break
        k = k + 1 if k < 64 else int(k * 1.05) + 1
    if k_max < big_k:
        eta = max(eta, 5e-324)  # a bound that underflowed still stands for a positive tail
    pmf = [_binomial_pmf(big_k, q, i) for i in range(k_max + 1)]
    keep = [(float(i), w) for i, w in enumerate(pmf) if w > 0]
    eta += (len(pmf) - len(keep)) * 1e-300  # components whose mass underflowed (each < 1e-300) go to the tail
    total = math.fsum(w for _, w in keep)
    step = ev.MixtureOfGaussians(
        standard_deviation=sigma,
        sensitivities=tuple(i for i, _ in keep),
        sampling_probs=tuple(w / total for _, w in keep),
    )
    return step, eta


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
        if not self._as_record and run.sampler not in (Sampler.POISSON, *_ONCE_PER_EPOCH):
            raise ValueError(
                f"no user-level bound for sampling={self.sampling!r} with example-level sampling: use user_sampling "
                "(users sampled, per-user clipping) or sampling='poisson'"
            )

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

    def unamplified_mu(self) -> float | None:
        """K·√P/σ for the samplers that place an example at most once per epoch (ELS), else None."""
        if self._as_record or self.sampler not in _ONCE_PER_EPOCH:
            return None
        per_epoch = self.record_run().plan().steps_per_epoch or 1
        participations = math.ceil(self.steps / per_epoch)
        return self.max_examples_per_user * math.sqrt(participations) / float(self.noise_multiplier)

    def standard_event(self) -> ev.Event:
        """The ledger whose ε bounds the user's from above."""
        if self._as_record:
            return self.record_run().standard_event()
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
        if event._as_record or event.unamplified_mu() is not None:
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


def _shifted_lower(run: UserLevelRun, delta: float, upper: float) -> float | None:
    """A certified lower end for a truncated mixture: δ_true(ε) ≥ δ_tr(ε) − e^ε·η_T in both directions (P^T ≥
    (1 − η)^T·P_tr^T and P^T ≤ P_tr^T + η_T), so the lower end of P_tr^T's bracket at δ + e^{ε_up}·η_T bounds the
    true ε(δ) from below (capped at ε_up); None when that shift is not small against δ."""
    from dplens.accountant import pld_engine

    step, truncation = run._mixture()
    if not math.isfinite(upper) or upper > 600:
        return None
    shifted = delta + math.exp(upper) * truncation
    if shifted >= min(1.0, 1.01 * delta):
        return None
    bracket = pld_engine.epsilon_bracket([(step, run.steps)], shifted, neighboring=ev.ADD_REMOVE)
    return min(bracket.lower, upper)


def _lower_of(run: UserLevelRun, delta: float, result: Any) -> tuple[float | None, str | None]:
    if run.lower_bound_events() is None:
        return (
            (None, None) if result.epsilon_lower is None else (min(result.epsilon_lower, result.epsilon), "certified")
        )
    if run.unamplified_mu() is None and not run._as_record:
        lower = _shifted_lower(run, delta, result.epsilon)
        return lower, (None if lower is None else "certified")
    from dplens.accountant.dp_sgd import _lower_end

    lower = _lower_end(run, delta, result)
    return lower, (None if lower is None else "lower bound")


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
    text = (
        f"user with at most {k} examples, Poisson sampling at q = {run.sampling_rate:.6g}: mixture of Gaussians with "
        f"Binomial({k}, q) weights (Ganesh 2024, aligned worst case)"
    )
    truncation = run.truncation_delta()
    if truncation:
        text += f"; Binomial tail truncated, its mass {truncation:.3g} charged as delta (included)"
    return text


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


@dataclass(frozen=True, slots=True, kw_only=True)
class UserEpsilons:
    """Per-user ε of a training whose users hold different numbers of examples.

    ``worst_case`` is the user-level guarantee of the run (the largest count K_max; ε is monotone in K), ``rows`` the
    (examples, users, epsilon, epsilon_lower) of each count: a user with k examples has the ε of a user with at most
    k. ``users`` and ``dataset_size`` are the histogram's totals.
    """

    worst_case: Any
    rows: tuple[tuple[int, int, float, float | None], ...]
    users: int
    dataset_size: int

    def quantile(self, level: float) -> float:
        """The smallest ε such that a fraction ≥ ``level`` of the users have a per-user ε at most it."""
        if not (isinstance(level, int | float) and 0 < level <= 1):
            raise ValueError(f"level must be in (0, 1]; got {level!r}")
        seen = 0
        for _, users, epsilon, _ in sorted(self.rows, key=lambda row: row[2]):
            seen += users
            if seen >= level * self.users:
                return epsilon
        return self.worst_case.epsilon

    def to_dict(self) -> dict[str, Any]:
        return {
            "privacy_unit": PrivacyUnit.USER.value,
            "epsilon": self.worst_case.epsilon,
            "epsilon_lower": self.worst_case.epsilon_lower,
            "delta": self.worst_case.delta,
            "users": self.users,
            "dataset_size": self.dataset_size,
            "max_examples_per_user": self.worst_case.max_examples_per_user,
            "median_user_epsilon": self.quantile(0.5),
            "per_count": [{"examples": k, "users": n, "epsilon": e, "epsilon_lower": lo} for k, n, e, lo in self.rows],
            "worst_case": self.worst_case.to_dict(),
        }


def user_epsilons(
    histogram: dict[int, int],
    *,
    batch_size: int,
    epochs: float,
    noise_multiplier: float,
    delta: float,
    method: Any = "pld",
    sampling: Sampler | str = Sampler.POISSON,
) -> UserEpsilons:
    """Per-user ε from a histogram {examples per user: number of users} (example-level sampling over all
    N = Σ k·nₖ examples, q = B/N): the worst case (K = the largest count) and every count's ε.

    Example:
        >>> out = user_epsilons({1: 150000, 5: 10000}, batch_size=1000, epochs=25, noise_multiplier=1.5, delta=1e-6)
        >>> out.users, out.dataset_size, out.rows[0][2] < out.worst_case.epsilon == out.rows[-1][2]
        (160000, 200000, True)
    """
    if not isinstance(histogram, dict) or not histogram:
        raise ValueError(f"histogram must be a non-empty mapping {{examples: users}}; got {histogram!r}")
    for k, n in histogram.items():
        _check_int("histogram key (examples per user)", k)
        _check_int(f"histogram[{k!r}] (users)", n)
    counts = sorted(histogram)
    n_total = sum(k * histogram[k] for k in counts)
    u_total = sum(histogram.values())
    common = dict(
        dataset_size=n_total,
        batch_size=batch_size,
        epochs=epochs,
        noise_multiplier=noise_multiplier,
        delta=delta,
        method=method,
        sampling=sampling,
    )
    results = {k: user_level_epsilon(max_examples_per_user=k, **common) for k in counts}
    rows = tuple((k, histogram[k], results[k].epsilon, results[k].epsilon_lower) for k in counts)
    import dataclasses

    worst = dataclasses.replace(results[counts[-1]], users=u_total)
    return UserEpsilons(worst_case=worst, rows=rows, users=u_total, dataset_size=n_total)
