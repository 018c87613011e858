"""Feature differential privacy (FDP): accounting of feature-DP SGD and attribute-inference bounds.

Seed 003: Mahloujifar, Guo, Suh, Chaudhuri, "Machine Learning with Privacy for Protected Attributes" (IEEE S&P
2025); implementation notes ``research/feature-dp.md`` (cited below as "the note", pitfalls P1–P17).

A record x has a public feature Ψ(x); everything Ψ(x) does not determine is protected. The insertion/deletion
variant (Def 6) compares the real run M(S ∪ {x}) with a *simulator* sim(S, Ψ(x)), in both directions.

Contents:

- :class:`FeatureDpSgd` — the event of one run of Algorithm 1 (noisy SGD with public features). Theorem 5: the
  run is f-DP_i^Ψ with f = T(N(0,σ²)^{⊗T}, ((1 − p)N(0,σ²) + pN(τ,σ²))^{⊗T}), i.e. exactly the add/remove
  Poisson-subsampled Gaussian with noise multiplier z = σ/τ (σ the noise std on the *sum*, τ the clip norm of the
  private residual gradient; P1). It is accounted by the existing machinery: RDP through
  :func:`dplens.accountant.rdp.subsampled_gaussian_rdp` (Mironov, Talwar, Zhang 2019), PLD through dp-accounting
  (:meth:`FeatureDpSgd.to_dp_accounting`), and exactly (μ-GDP) when there is no amplification (p = 1).
- :func:`feature_dp_epsilon` — ε at δ by a chosen route, with both directions (real run vs simulator and back)
  reported; the worse one is the guarantee (Def 6 needs both inequalities; P4).
- :func:`schedule_from_epochs`, :func:`noise_multiplier_from_sum_std`, :func:`noise_multiplier_from_averaged_std` —
  the parameter conventions (P1, P9); :func:`gdp_clt_mu_estimate` — the central-limit μ, an estimate only.
- :func:`replacement_guarantee`, :func:`replacement_gdp_mu`, :func:`feature_dp_replacement_epsilon` — the
  replacement variant through Proposition 1 (a group-of-two cost; erratum P5).
- :func:`attribute_inference_bound_dp`, :func:`attribute_inference_bound_gdp`,
  :func:`attribute_inference_bound_profile`, :func:`baseline_success`, :func:`feature_dp_attribute_bound` —
  Theorem 4: adv ≤ 1 − f(Ball).

Composition with ordinary add/remove events (e.g. a DP-SGD phase) is sound: an f-DP mechanism is f-DP_i^Ψ for
every Ψ (Proposition 2) and FDP composes like f-DP (Theorem 3), so a ledger mixing them states a *feature-DP*
guarantee for the whole composition.
"""

from __future__ import annotations

import enum
import functools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import special

from dplens.accountant import conversions, pld, rdp
from dplens.accountant import events as ev
from dplens.accountant.compose import Method, _route_dict
from dplens.accountant.curves import PrivacyProfile, RdpConversion, RdpCurve
from dplens.accountant.rdp import UnsupportedEventError
from dplens.accountant.routes import as_method

__all__ = [
    "SPEC_TYPES",
    "AttributeMetric",
    "FeatureDpEpsilon",
    "FeatureDpSgd",
    "PublicBatch",
    "ReplacementEpsilon",
    "SharedBatchWarning",
    "StepConvention",
    "attribute_inference_bound_dp",
    "attribute_inference_bound_gdp",
    "attribute_inference_bound_profile",
    "attribute_inference_bounds_profile",
    "baseline_success",
    "feature_dp_attribute_bound",
    "feature_dp_epsilon",
    "feature_dp_privacy_profile",
    "feature_dp_rdp_curve",
    "feature_dp_replacement_epsilon",
    "gdp_clt_mu_estimate",
    "noise_multiplier_from_averaged_std",
    "noise_multiplier_from_sum_std",
    "replacement_gdp_mu",
    "replacement_guarantee",
    "schedule_from_epochs",
]


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------


class PublicBatch(enum.Enum):
    """How the public-loss batch of Algorithm 1 is drawn.

    INDEPENDENT: a second batch with randomness independent of the private Poisson batch (Algorithm 1, step 3);
    Poisson amplification applies (Theorem 5, Proposition 4).
    SHARED: the public gradient is computed on the private batch. Then the public part reveals the sampling coins
    (Proposition 3 / the paper's remark after Proposition 4), so no amplification is claimed: the run is accounted
    with sampling rate 1 (P2).
    """

    INDEPENDENT = "independent"
    SHARED = "shared"


class StepConvention(enum.Enum):
    """How (sampling rate, steps) follow from (dataset size N, batch size B, epochs E) (P9).

    EXPECTED_BATCH: q = B/N and T = ⌈E·N/B⌉ (the paper's stated parameters, the note's §5.4 convention).
    LOADER_LENGTH: Opacus' convention q = 1/⌈N/B⌉ and T = E·⌈N/B⌉.
    """

    EXPECTED_BATCH = "expected_batch"
    LOADER_LENGTH = "loader_length"


class SharedBatchWarning(UserWarning):
    """A feature-DP SGD run shares the public and private batches: it is accounted without amplification (p = 1)."""


def _check_positive(name: str, value: Any) -> float:
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    if not ok or not (math.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)


def _check_int(name: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _check_probability(name: str, value: Any, *, allow_zero: bool = False, allow_one: bool = True) -> float:
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    if ok:
        v = float(value)
        ok = (v >= 0 if allow_zero else v > 0) and (v <= 1 if allow_one else v < 1)
    if not ok:
        lo = "[0" if allow_zero else "(0"
        hi = "1]" if allow_one else "1)"
        raise ValueError(f"{name} must be in {lo}, {hi}; got {value!r}")
    return float(value)


def noise_multiplier_from_sum_std(*, noise_std_on_sum: float, residual_clip_norm: float) -> float:
    """z = σ/τ: the noise std added to the *sum* of clipped private-residual gradients over their clip norm (P1).

    Theorem 5 writes the per-step pair as N(0, σ²) vs (1 − p)N(0, σ²) + pN(τ, σ²); only σ/τ matters.
    """
    return _check_positive("noise_std_on_sum", noise_std_on_sum) / _check_positive(
        "residual_clip_norm", residual_clip_norm
    )


def noise_multiplier_from_averaged_std(
    *, noise_std_on_average: float, residual_clip_norm: float, expected_batch_size: float
) -> float:
    """z = σ_avg·m/τ for Algorithm 1's averaged notation g = (1/m)Σ∇ℓ_priv + N(0, σ_avg²) (P1).

    m must be the *expected* batch size p·|S|: dividing by the realised Poisson batch size is a different
    mechanism whose sensitivity analysis Theorem 5 does not cover.
    """
    return (
        _check_positive("noise_std_on_average", noise_std_on_average)
        * _check_positive("expected_batch_size", expected_batch_size)
        / _check_positive("residual_clip_norm", residual_clip_norm)
    )


def schedule_from_epochs(
    *,
    dataset_size: int,
    batch_size: int,
    epochs: int | float,
    convention: StepConvention = StepConvention.EXPECTED_BATCH,
) -> tuple[float, int]:
    """(sampling rate, steps) of a training run described by epochs, under an explicit convention (P9).

    Example: AFHQ (N = 14,630, B = 128, 100 epochs) gives (0.0087491, 11,430) under EXPECTED_BATCH and
    (1/115, 11,500) under LOADER_LENGTH (the note, §5.4 Case A).
    """
    n = _check_int("dataset_size", dataset_size, minimum=1)
    b = _check_int("batch_size", batch_size, minimum=1)
    if b > n:
        raise ValueError(f"batch_size must be <= dataset_size = {n}; got {batch_size!r}")
    _check_positive("epochs", epochs)
    if not isinstance(convention, StepConvention):
        raise ValueError(f"convention must be a StepConvention; got {convention!r}")
    # Exact rational arithmetic (the float epochs' exact value): no rounding can drop a step.
    exact = Fraction(epochs)
    if convention is StepConvention.EXPECTED_BATCH:
        return b / n, math.ceil(exact * n / b)
    batches = -(-n // b)
    return 1.0 / batches, math.ceil(exact * batches)


# --------------------------------------------------------------------------------------------
# The event
# --------------------------------------------------------------------------------------------


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureDpSgd(ev.Event):
    """One run of Algorithm 1 (noisy SGD with public features), seed 003 Theorem 5.

    Each of ``steps`` steps Poisson-samples the private batch with ``sampling_rate`` p, clips each record's
    private-residual gradient ∇ℓ(x) − ∇ℓ_pub(Ψ(x)) to τ, and adds N(0, σ²I) to the sum; ``noise_multiplier`` is
    z = σ/τ (P1). The public gradient comes from an independent batch and is neither clipped nor noised
    (Proposition 4). Theorem 5: the run is f-DP_i^Ψ with f = T(N(0,1)^{⊗T}, ((1 − p)N(0,1) + pN(1/z,1))^{⊗T}) —
    the add/remove Poisson-subsampled Gaussian. (Erratum P17: the proof writes the mixture as
    "(1 − p)N(0,σ²) + pN(0,σ²)"; the second component is N(L,σ²).)

    ``neighboring`` is the simulator-based insertion/deletion relation of Def 6 (stated as ADD_OR_REMOVE_ONE so
    that the run composes with ordinary add/remove events, Proposition 2); the replacement variant is obtained
    with :func:`feature_dp_replacement_epsilon` (Proposition 1). With ``public_batch=SHARED`` no amplification is
    claimed (sampling rate 1 in the accounting, P2) and a :class:`SharedBatchWarning` is issued when p < 1.
    """

    noise_multiplier: float
    sampling_rate: float
    steps: int
    public_batch: PublicBatch = PublicBatch.INDEPENDENT
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _check_positive("noise_multiplier", self.noise_multiplier))
        object.__setattr__(self, "sampling_rate", _check_probability("sampling_rate", self.sampling_rate))
        object.__setattr__(self, "steps", _check_int("steps", self.steps, minimum=0))
        batch = self.public_batch
        if not isinstance(batch, PublicBatch):
            try:
                batch = PublicBatch(batch)  # JSON round trip stores the value
            except ValueError:
                allowed = [b.value for b in PublicBatch]
                raise ValueError(f"public_batch must be one of {allowed}; got {self.public_batch!r}") from None
            object.__setattr__(self, "public_batch", batch)
        if self.neighboring is not ev.NeighboringRelation.ADD_OR_REMOVE_ONE:
            raise ValueError(
                "neighboring must be add_remove (Def 6, the simulator-based insertion/deletion relation); got "
                f"{getattr(self.neighboring, 'value', self.neighboring)!r}; for the replacement variant use "
                "feature_dp_replacement_epsilon (Proposition 1)"
            )
        if batch is PublicBatch.SHARED and self.sampling_rate < 1:
            warnings.warn(
                f"public_batch=shared reveals the sampling coins (seed 003 Prop. 3): sampling_rate="
                f"{self.sampling_rate!r} is accounted as 1 (no amplification)",
                SharedBatchWarning,
                stacklevel=3,
            )

    @property
    def effective_sampling_rate(self) -> float:
        """The rate the accounting uses: ``sampling_rate``, or 1 when the batches are shared (P2)."""
        return 1.0 if self.public_batch is PublicBatch.SHARED else self.sampling_rate

    def per_step_event(self) -> ev.PoissonSampled:
        """One step as the standard add/remove Poisson-subsampled Gaussian (Theorem 5's per-step pair)."""
        return ev.PoissonSampled(
            sampling_rate=self.effective_sampling_rate, event=ev.Gaussian(noise_multiplier=self.noise_multiplier)
        )

    def standard_event(self) -> ev.Event:
        """The whole run as the standard DP-SGD event with the same privacy curve (Theorem 5); NoOp for 0 steps."""
        if self.steps == 0:
            return ev.NoOp()
        return ev.SelfComposed(event=self.per_step_event(), count=self.steps)

    def to_dp_accounting(self):
        """dp-accounting's equivalent: ``SelfComposedDpEvent(PoissonSampledDpEvent(p, GaussianDpEvent(z)), T)``.

        Under ADD_OR_REMOVE_ONE its PLD tracks both directions (real run vs simulator, and back; P4).
        """
        return ev.to_dp_accounting(self.standard_event())


def feature_dp_rdp_curve(event: FeatureDpSgd) -> RdpCurve:
    """T × the RDP of the Poisson-subsampled Gaussian (MTZ 2019 Sec. 3.3), delegated to :mod:`~dplens.accountant.rdp`.

    Valid for FDP because the per-step pair of Theorem 5 dominates the real/simulator pair in every hockey-stick
    divergence, hence (Blackwell) in every Rényi divergence, and RDP composes adaptively. The remove direction
    dominates the add direction in RDP (MTZ 2019 Theorem 5), so one curve covers both.
    """
    if not isinstance(event, FeatureDpSgd):
        raise ValueError(f"event must be a FeatureDpSgd; got {event!r}")
    return rdp.rdp_curve(event.standard_event())


def feature_dp_privacy_profile(event: FeatureDpSgd) -> PrivacyProfile:
    """Exact profile when no amplification is claimed (effective rate 1): μ-GDP with μ = √T/z (DRS 2022 Cor. 3.3).

    Raises:
        UnsupportedEventError: for p < 1 (the subsampled Gaussian has no closed-form profile; use RDP or PLD).
    """
    if event.effective_sampling_rate < 1:
        raise UnsupportedEventError(
            f"no closed-form privacy profile for feature-DP SGD with sampling_rate={event.sampling_rate!r} < 1"
        )
    mu = math.sqrt(event.steps) / event.noise_multiplier
    return PrivacyProfile(
        remove=functools.partial(conversions.gdp_delta, mu),
        epsilon_for_delta=functools.partial(conversions.gdp_epsilon, mu),
        description=f"feature-DP SGD without amplification = {mu:.6g}-GDP, exact",
    )


# --------------------------------------------------------------------------------------------
# ε with both directions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureDpEpsilon:
    """ε at δ of a feature-DP SGD run, by one route, per direction.

    ``epsilon_remove`` bounds the real run against the simulator (the direction Theorem 4 uses),
    ``epsilon_add`` the simulator against the real run; ``epsilon`` = the worse of the two is the Def 6 guarantee.
    Every value is an upper bound (``is_estimate`` is False).
    """

    epsilon: float
    epsilon_remove: float
    epsilon_add: float
    delta: float
    method: Method
    details: str
    optimal_order: float | None = None
    discretisation: str | None = None
    is_estimate: bool = False

    def to_dict(self) -> dict[str, Any]:
        return _route_dict(self, epsilon=self.epsilon, epsilon_remove=self.epsilon_remove, epsilon_add=self.epsilon_add)


def _check_event(event: Any) -> FeatureDpSgd:
    if not isinstance(event, FeatureDpSgd):
        raise ValueError(f"event must be a FeatureDpSgd; got {event!r}")
    return event


def _pld_directions(event: FeatureDpSgd, value_discretization_interval: float):
    """(remove PMF, add PMF) of dp-accounting's pessimistic PLD of the run (add is None if symmetric).

    Reads dp-accounting's composed PLD as :func:`dplens.accountant.pld.pld_profile` does; should its internals change,
    both directions fall back to the PLD's own (worst-direction) answer, which is still an upper bound.
    """
    accountant = pld.pld_of(event, value_discretization_interval=value_discretization_interval)
    composed = accountant._pld
    remove = getattr(composed, "_pmf_remove", None)
    if remove is None:  # pragma: no cover - dp-accounting internals changed
        return composed, None
    add = None if getattr(composed, "_symmetric", True) else composed._pmf_add
    return remove, add


def feature_dp_epsilon(
    event: FeatureDpSgd,
    delta: float,
    *,
    method: Method = Method.PLD,
    conversion: RdpConversion = RdpConversion.OPTIMAL,
    value_discretization_interval: float = pld.DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> FeatureDpEpsilon:
    """ε of a feature-DP SGD run at δ, both directions reported (Theorem 5, Def 6).

    - RDP: the subsampled-Gaussian RDP curve × T, converted with ``conversion`` (OPTIMAL = Canonne–Kamath–Steinke
      2020 Prop. 12, the "improved" conversion that reproduces the paper's ε = 8 and 0.5; CLASSIC = Mironov 2017
      Prop. 3, which gives 8.84 and 0.595, P8), α optimised continuously. One RDP bound covers both directions.
    - PLD: dp-accounting's pessimistic connect-the-dots PLD; ε per direction from its remove / add PMFs.
    - EXACT: μ-GDP when the effective sampling rate is 1 (symmetric).
    - BEST: the smallest guarantee among the routes.

    Args:
        event: the run.
        delta: δ ∈ (0, 1).
        method: the route.
        conversion: RDP → (ε, δ) theorem (RDP route only).
        value_discretization_interval: PLD grid (≤ 1e-4 advised; a coarse grid is badly pessimistic at large T, P11).
    """
    event = _check_event(event)
    delta = conversions.check_delta(delta)
    method = as_method(method)
    if not isinstance(conversion, RdpConversion):
        raise ValueError(f"conversion must be an RdpConversion; got {conversion!r}")
    if method is Method.BEST:
        routes = [feature_dp_epsilon(event, delta, method=Method.RDP, conversion=conversion)]
        interval = value_discretization_interval
        routes.append(feature_dp_epsilon(event, delta, method=Method.PLD, value_discretization_interval=interval))
        if event.effective_sampling_rate == 1:
            routes.append(feature_dp_epsilon(event, delta, method=Method.EXACT))
        return min(routes, key=lambda r: r.epsilon)
    if method is Method.RDP:
        eps, order = feature_dp_rdp_curve(event).epsilon_and_order(delta, conversion=conversion)
        name = "Canonne-Kamath-Steinke 2020 Prop. 12" if conversion is RdpConversion.OPTIMAL else "Mironov 2017 Prop. 3"
        return FeatureDpEpsilon(
            epsilon=eps,
            epsilon_remove=eps,
            epsilon_add=eps,
            delta=delta,
            method=method,
            details=f"RDP of the Poisson-subsampled Gaussian (MTZ 2019), {name}; one bound for both directions",
            optimal_order=order,
        )
    if method is Method.PLD:
        remove, add = _pld_directions(event, value_discretization_interval)
        eps_remove = conversions.round_up(max(float(remove.get_epsilon_for_delta(delta)), 0.0))
        eps_add = eps_remove if add is None else conversions.round_up(max(float(add.get_epsilon_for_delta(delta)), 0.0))
        return FeatureDpEpsilon(
            epsilon=max(eps_remove, eps_add),
            epsilon_remove=eps_remove,
            epsilon_add=eps_add,
            delta=delta,
            method=method,
            details="pld (dp-accounting, connect-the-dots, pessimistic), remove = real run vs simulator",
            discretisation=f"value_discretization_interval={value_discretization_interval:g}",
        )
    profile = feature_dp_privacy_profile(event)  # EXACT; raises UnsupportedEventError for p < 1
    eps = profile.epsilon(delta)
    return FeatureDpEpsilon(
        epsilon=eps,
        epsilon_remove=eps,
        epsilon_add=eps,
        delta=delta,
        method=method,
        details=profile.description,
    )


def gdp_clt_mu_estimate(event: FeatureDpSgd) -> float:
    """An *estimate* (not a bound): the central-limit μ ≈ p·√(T(e^{1/z²} − 1)) of Bu, Dong, Long, Su 2020.

    Asymptotic in T → ∞ with p√T fixed (the note §4.4); it can under-state ε, so it is reported only labelled as an
    estimate, never as a guarantee. Exact (μ = √T/z) when the effective rate is 1.
    """
    event = _check_event(event)
    p, z = event.effective_sampling_rate, event.noise_multiplier
    if p == 1:
        return math.sqrt(event.steps) / z
    return p * math.sqrt(event.steps * math.expm1(1.0 / z**2))


# --------------------------------------------------------------------------------------------
# Replacement variant (Proposition 1)
# --------------------------------------------------------------------------------------------


def replacement_guarantee(*, epsilon: float, delta: float) -> tuple[float, float]:
    """(ε, δ)-DP_i^Ψ ⇒ (2ε, (1 + e^ε)δ)-DP_r^Ψ: Proposition 1 (proof for (ε, δ)).

    Erratum (P5): the statement's "f∘f" is the group-of-two form 1 − (1 − f)∘(1 − f) (chain the real run on
    S ∪ {x} through the simulator sim(S, u) to the run on S ∪ {x'}, Ψ(x) = Ψ(x') = u), not the literal composition.
    """
    eps = conversions.check_epsilon(epsilon)
    d = conversions.check_delta(delta, allow_zero=True)
    return conversions.round_up(2 * eps), min(conversions.round_up((1 + math.exp(eps)) * d), 1.0)


def replacement_gdp_mu(mu: float) -> float:
    """μ-GDP_i^Ψ ⇒ 2μ-GDP_r^Ψ (Proposition 1 read as group privacy, P5; G_μ chained twice is G_{2μ})."""
    return 2.0 * conversions._check_mu(mu)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplacementEpsilon:
    """The replacement-variant guarantee (ε, δ)-DP_r^Ψ obtained through Proposition 1.

    ``inner_epsilon``/``inner_delta`` is the insertion/deletion guarantee it was derived from (None for the GDP
    route, which doubles μ instead).
    """

    epsilon: float
    delta: float
    method: Method
    details: str
    inner_epsilon: float | None = None
    inner_delta: float | None = None
    is_estimate: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "method": self.method.value,
            "details": self.details,
            "inner_epsilon": self.inner_epsilon,
            "inner_delta": self.inner_delta,
            "is_estimate": self.is_estimate,
        }


def feature_dp_replacement_epsilon(
    event: FeatureDpSgd,
    delta: float,
    *,
    method: Method = Method.RDP,
    value_discretization_interval: float = pld.DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> ReplacementEpsilon:
    """ε of the replacement variant (Def 5) at δ through Proposition 1.

    With effective rate 1 the run is μ-GDP_i^Ψ, hence 2μ-GDP_r^Ψ (exact route). Otherwise it searches the inner δ′
    for the smallest 2ε(δ′) subject to (1 + e^{ε(δ′)})δ′ ≤ δ, with ε(δ′) from ``method`` (RDP or PLD); every
    feasible δ′ gives a valid guarantee and the returned one is checked to be feasible.
    """
    event = _check_event(event)
    delta = conversions.check_delta(delta)
    method = as_method(method)
    if method is Method.BEST:
        raise ValueError(f"method must be Method.RDP, Method.PLD or Method.EXACT; got {method!r}")
    if method is Method.EXACT:
        feature_dp_privacy_profile(event)  # raises for p < 1
        mu = replacement_gdp_mu(math.sqrt(event.steps) / event.noise_multiplier)
        return ReplacementEpsilon(
            epsilon=conversions.gdp_epsilon(mu, delta),
            delta=delta,
            method=method,
            details=f"Proposition 1 on mu-GDP: {mu:.6g}-GDP_r",
        )
    if method is Method.RDP:
        curve = feature_dp_rdp_curve(event)
        epsilon_of: Callable[[float], float] = curve.epsilon
    else:
        accountant = pld.pld_of(event, value_discretization_interval=value_discretization_interval)
        epsilon_of = lambda d: conversions.round_up(max(float(accountant.get_epsilon(d)), 0.0))  # noqa: E731

    def cost(log_inner: float) -> tuple[float, float]:
        inner = math.exp(log_inner)
        eps = epsilon_of(inner)
        return eps, (1.0 + math.exp(min(eps, 700.0))) * inner

    # (1 + e^ε)δ′ ≥ 2δ′, so δ′ ≤ δ/2. A grid over log δ′ (one point per unit) finds the feasible δ′ with the smallest
    # ε (a PLD returns ε = ∞ below its truncated tail mass, so the feasible set need not reach down to 0); bisection
    # then moves it towards the infeasible neighbour above (ε(δ′) decreases in δ′).
    logs = np.linspace(math.log(delta / 2), math.log(delta) - 40.0, 41)
    budget = delta * (1.0 - 1e-9)  # room for the pessimistic rounding of (1 + e^ε)δ′ in replacement_guarantee
    evaluated = [(log_inner, *cost(log_inner)) for log_inner in logs]
    feasible = [(eps, log_inner) for log_inner, eps, total in evaluated if total <= budget and math.isfinite(eps)]
    if not feasible:
        return ReplacementEpsilon(
            epsilon=math.inf, delta=delta, method=method, details="Proposition 1: no feasible inner delta found"
        )
    best_eps, lo = min(feasible)
    best = (best_eps, math.exp(lo))
    hi = lo + (logs[0] - logs[1])
    if hi <= logs[0] + 1e-12:
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            eps_mid, total_mid = cost(mid)
            if total_mid <= budget:
                lo = mid
                if eps_mid < best[0]:
                    best = (eps_mid, math.exp(mid))
            else:
                hi = mid
            if hi - lo < 1e-4:
                break
    inner_eps, inner_delta = best
    epsilon, delta_r = replacement_guarantee(epsilon=inner_eps, delta=inner_delta)
    if delta_r > delta:  # pragma: no cover - the search keeps (1 + e^ε)δ′ below δ with a margin
        raise RuntimeError("replacement search returned an infeasible inner delta")
    return ReplacementEpsilon(
        epsilon=epsilon,
        delta=delta,
        method=method,
        details=f"Proposition 1: (2 eps, (1 + e^eps) delta') from the {method.value} route",
        inner_epsilon=inner_eps,
        inner_delta=inner_delta,
    )


# --------------------------------------------------------------------------------------------
# Attribute inference (Theorem 4)
# --------------------------------------------------------------------------------------------


def _check_baseline(baseline: Any) -> float:
    return _check_probability("baseline", baseline, allow_zero=True)


def attribute_inference_bound_dp(*, epsilon: float, delta: float, baseline: float) -> float:
    """Theorem 4 for (ε, δ)-DP_i^Ψ: adv ≤ min{1, e^ε b + δ, 1 − e^{−ε}(1 − δ − b)}, b = Ball.

    The paper's linear f(x) = 1 − δ − e^ε x gives only e^ε b + δ. Def 6 requires both inequalities, which together
    give the full trade-off f_{ε,δ}(α) = max{0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)} (P7); 1 − f_{ε,δ}(b) is the
    minimum above. Rounded up.
    """
    eps = conversions.check_epsilon(epsilon)
    d = conversions.check_delta(delta, allow_zero=True)
    b = _check_baseline(baseline)
    linear = math.exp(eps) * b + d if eps < 700 else math.inf
    other = 1.0 - math.exp(-eps) * (1.0 - d - b)
    return min(1.0, conversions.round_up(min(linear, other)))


def attribute_inference_bound_gdp(*, mu: float, baseline: float) -> float:
    """Theorem 4 for μ-GDP_i^Ψ: adv ≤ 1 − G_μ(b) = Φ(Φ⁻¹(b) + μ) (the note §3.3). Rounded up."""
    m = conversions._check_mu(mu)
    b = _check_baseline(baseline)
    if b in (0.0, 1.0):
        return b
    return min(1.0, conversions.round_up(float(special.ndtr(special.ndtri(b) + m))))


# One dense grid, evaluated in a single call (a PLD profile costs ~0.5 s per call whatever the number of points):
# geometric tails to ±60 and a uniform 0.002 mesh on [−10, 30] where the optimum lies for any practical b.
_PROFILE_GRID = np.unique(
    np.concatenate(
        [-np.geomspace(60.0, 1e-6, 2000), [0.0], np.geomspace(1e-6, 60.0, 2000), np.arange(-10.0, 30.0, 0.002)]
    )
)


def attribute_inference_bound_profile(
    profile_or_remove_delta: PrivacyProfile | Callable[[np.ndarray], np.ndarray], *, baseline: float
) -> float:
    """Theorem 4 from a full privacy profile: adv ≤ 1 − f(b) = inf_{ε ∈ ℝ} [e^ε b + δ_remove(ε)].

    Only the remove direction (real run M(S ∪ {x}) against the simulator) enters Theorem 4, but at every real ε:
    negative ε matter for a one-sided curve (the note §3.3).

    - A :class:`PrivacyProfile` is read only at ε ≥ 0, where every profile is stated: at ε < 0 the identity
      δ_remove(ε) = 1 − e^ε + e^ε·δ_add(−ε) (complement the event in the hockey-stick supremum) is used, with the
      ``add`` direction (``remove`` for a symmetric profile).
    - A bare function ε ↦ δ_remove(ε) must be valid for negative ε too; it is evaluated directly.

    Every ε gives a valid bound, so the minimum over a dense grid (mesh 0.002 on [−10, 30]) is an upper bound on the
    infimum; δ is floored at 1 − e^ε (a hockey-stick divergence is never below it). Rounded up, capped at 1.
    """
    b = _check_baseline(baseline)
    return float(attribute_inference_bounds_profile(profile_or_remove_delta, baselines=[b])[0])


def attribute_inference_bounds_profile(
    profile_or_remove_delta: PrivacyProfile | Callable[[np.ndarray], np.ndarray], *, baselines: Sequence[float]
) -> np.ndarray:
    """:func:`attribute_inference_bound_profile` for several baselines at once (the profile is evaluated once)."""
    items = list(baselines) if isinstance(baselines, Sequence | np.ndarray) and not isinstance(baselines, str) else []
    bs = np.array([_check_probability("baselines", b, allow_zero=True) for b in items], dtype=float)
    if bs.size == 0:
        raise ValueError(f"baselines must hold at least one probability; got {baselines!r}")
    if isinstance(profile_or_remove_delta, PrivacyProfile):
        profile = profile_or_remove_delta
        other = profile.add if profile.add is not None else profile.remove

        def remove(eps: np.ndarray) -> np.ndarray:
            out = np.empty_like(eps)
            negative = eps < 0
            out[~negative] = np.asarray(profile.remove(eps[~negative]), dtype=float).reshape(-1)
            flipped = np.minimum(np.asarray(other(-eps[negative]), dtype=float).reshape(-1), 1.0)
            out[negative] = -np.expm1(eps[negative]) + np.exp(eps[negative]) * flipped
            return out

    elif callable(profile_or_remove_delta):
        remove = profile_or_remove_delta
    else:
        raise ValueError(
            "profile_or_remove_delta must be a PrivacyProfile or a function of epsilon; "
            f"got {profile_or_remove_delta!r}"
        )
    eps = _PROFILE_GRID
    deltas = np.minimum(np.asarray(remove(eps), dtype=float).reshape(eps.shape), 1.0)
    deltas = np.where(np.isnan(deltas), 1.0, deltas)
    deltas = np.maximum(deltas, -np.expm1(np.minimum(eps, 0.0)))
    values = np.min(np.exp(eps)[None, :] * bs[:, None] + deltas[None, :], axis=1)
    bounds = np.array([min(1.0, conversions.round_up(float(v))) for v in values])
    return np.where(bs == 1.0, 1.0, bounds)


class AttributeMetric(enum.Enum):
    """The metric d of Def 7 / Def 8 on attribute values.

    DISCRETE: d(a, a′) = 0 if a = a′ else 1 (categorical attributes; success means an exact guess for ρ < 1).
    ABSOLUTE: d(a, a′) = |a − a′| on scalar attributes.
    EUCLIDEAN: ‖a − a′‖₂ on vector attributes.
    """

    DISCRETE = "discrete"
    ABSOLUTE = "absolute"
    EUCLIDEAN = "euclidean"


def _rounding_error_of_sum(a: np.ndarray, b: float, total: np.ndarray) -> np.ndarray:
    """e with a + b = total + e exactly, for total = fl(a + b) (TwoSum: Knuth, TAOCP vol. 2 §4.2.2, Theorem B)."""
    with np.errstate(over="ignore", invalid="ignore"):
        b_virtual = total - a
        return (a - (total - b_virtual)) + (b - b_virtual)


def _within_distance(centres: np.ndarray, points: np.ndarray, radius: float, *, times: int = 1) -> np.ndarray:
    """Matrix [i, j]: ‖centres[i] − points[j]‖₂ ≤ times·radius in real arithmetic (rows are float vectors).

    A floating-point norm errs by a few ulps either way, so it can put a point whose distance is exactly within the
    radius outside it (and Ball below the supremum). The float norm (scaled: no overflow or underflow in the squares)
    decides the pairs clearly on one side (further than a relative 1e-9 from the radius); the rest are decided in
    rational arithmetic.
    """
    diff = centres[:, None, :] - points[None, :, :]
    reach = times * radius  # may overflow to inf: then every pair is decided exactly
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scale = np.max(np.abs(diff), axis=2)
        unit = diff / np.where(scale > 0, scale, 1.0)[..., None]
        dist = scale * np.sqrt(np.sum(unit * unit, axis=2))
        borderline = ~np.isfinite(dist) | (np.abs(dist - reach) <= 1e-9 * np.maximum(dist, reach) + 1e-300)
    within = (dist <= reach) & ~borderline
    exact_reach = times * Fraction(radius)
    for i, j in zip(*np.nonzero(borderline), strict=True):
        squared = sum(
            (Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in zip(centres[i], points[j], strict=True)
        )
        within[i, j] = squared <= exact_reach**2
    return within


def baseline_success(
    prior: Sequence[float] | np.ndarray,
    *,
    values: Sequence[Any] | np.ndarray | None = None,
    metric: AttributeMetric = AttributeMetric.DISCRETE,
    radius: float = 0.0,
    outputs: Sequence[Any] | np.ndarray | None = None,
) -> float:
    """Ball(X, u, d, ρ) of Def 8: the best success of an attacker who does not see the output.

    Ball = sup_{x*} Pr_{x ∼ X|u}[d(x, x*) ≤ ρ]. The paper takes the supremum over supp(X), but Theorem 4's last step
    needs it over every point the attacker may output (the note §3.1, P13), so:

    - DISCRETE: max prior for ρ < 1 (any output outside the support scores 0), 1 for ρ ≥ 1.
    - ABSOLUTE: exact supremum over all real outputs — the largest prior mass in a closed interval of length 2ρ
      (an optimal interval can be slid until its left end is a support point).
    - EUCLIDEAN: with ``outputs`` (the attacker's finite output space), the exact maximum over them; without, the
      pessimistic max_i Pr[‖x − vᵢ‖ ≤ 2ρ] (every ball of radius ρ that hits the support lies inside a ball of
      radius 2ρ around a support point), an upper bound on the supremum over ℝᵈ.

    With ``outputs`` given, the supremum runs over those outputs only (for DISCRETE/ABSOLUTE too). Distances are
    compared with ρ in real arithmetic, not up to floating-point rounding (which could move a point into a ball or,
    for EUCLIDEAN, out of it and give a Ball below the supremum).

    Args:
        prior: probabilities of the attribute values given the public feature u (non-negative, sum 1).
        values: the attribute values (scalars or vectors); default 0..k−1 (only needed for ABSOLUTE/EUCLIDEAN).
        metric: the metric d.
        radius: the success threshold ρ ≥ 0.
        outputs: the attacker's output space, if restricted.
    """
    p = np.asarray(prior, dtype=float)
    if p.ndim != 1 or p.size == 0 or not np.all(np.isfinite(p)) or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
        raise ValueError(f"prior must be a non-empty vector of probabilities summing to 1; got {prior!r}")
    if not isinstance(metric, AttributeMetric):
        raise ValueError(f"metric must be an AttributeMetric; got {metric!r}")
    rho = float(radius) if isinstance(radius, int | float) and not isinstance(radius, bool) else math.nan
    if not (math.isfinite(rho) and rho >= 0):
        raise ValueError(f"radius must be a finite number >= 0; got {radius!r}")
    v = np.arange(p.size, dtype=float) if values is None else np.asarray(values, dtype=float)
    if v.shape[0] != p.size or not np.all(np.isfinite(v)):
        raise ValueError(f"values must hold {p.size} finite attribute values; got {values!r}")
    if metric is AttributeMetric.DISCRETE:
        if outputs is not None:
            out = np.asarray(outputs, dtype=float)
            masses = [float(p[np.all((v == o).reshape(p.size, -1), axis=1)].sum()) if rho < 1 else 1.0 for o in out]
            return min(1.0, conversions.round_up(max(masses, default=0.0)))
        return 1.0 if rho >= 1 else min(1.0, conversions.round_up(float(p.max())))
    if metric is AttributeMetric.ABSOLUTE:
        if v.ndim != 1:
            raise ValueError(f"values must be scalars for the absolute metric; got shape {v.shape!r}")
        if outputs is not None:
            out = np.asarray(outputs, dtype=float).ravel()
            mass = _within_distance(out[:, None], v[:, None], rho) @ p
            return min(1.0, conversions.round_up(float(mass.max(initial=0.0))))
        order = np.argsort(v)
        sv, sp = v[order], np.concatenate([[0.0], np.cumsum(p[order])])
        # The interval [sv[i], sv[i] + 2ρ] holds sv[j] iff sv[j] ≤ sv[i] + 2ρ in real arithmetic: a float strictly
        # below fl(sv[i] + 2ρ) always is, one equal to it unless the sum was rounded up onto it (error < 0).
        with np.errstate(over="ignore"):
            reach = sv + 2 * rho
        rounded_up = _rounding_error_of_sum(sv, 2 * rho, reach) < 0
        right = np.where(rounded_up, np.searchsorted(sv, reach, side="left"), np.searchsorted(sv, reach, side="right"))
        for i in np.flatnonzero(~np.isfinite(reach)):  # overflow: count in rational arithmetic
            end = Fraction(float(sv[i])) + 2 * Fraction(rho)
            right[i] = sum(1 for x in sv if Fraction(float(x)) <= end)
        return min(1.0, conversions.round_up(float(np.max(sp[right] - sp[:-1]))))
    vv = v.reshape(p.size, -1)
    if outputs is not None:
        out = np.asarray(outputs, dtype=float).reshape(-1, vv.shape[1])
        return min(1.0, conversions.round_up(float((_within_distance(out, vv, rho) @ p).max(initial=0.0))))
    return min(1.0, conversions.round_up(float((_within_distance(vv, vv, rho, times=2) @ p).max())))


def feature_dp_attribute_bound(
    event: FeatureDpSgd,
    *,
    baseline: float,
    value_discretization_interval: float = pld.DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> float:
    """Theorem 4 for a feature-DP SGD run: inf_ε e^ε b + δ_remove(ε) from the tightest available profile.

    Exact μ-GDP (Φ(Φ⁻¹(b) + μ)) when the effective rate is 1, else the remove direction of the pessimistic PLD.
    """
    event = _check_event(event)
    b = _check_baseline(baseline)
    if event.effective_sampling_rate == 1:
        return attribute_inference_bound_gdp(mu=math.sqrt(event.steps) / event.noise_multiplier, baseline=b)
    profile = pld.pld_profile(event, value_discretization_interval=value_discretization_interval)
    return attribute_inference_bound_profile(profile, baseline=b)


# --------------------------------------------------------------------------------------------
# Spec builder and registration
# --------------------------------------------------------------------------------------------

_SPEC_KEYS = frozenset({"noise_multiplier", "sampling_rate", "steps", "public_batch", "neighboring", "count"})


def _spec_number(table: dict, key: str, *, integer: bool = False) -> Any:
    if key not in table:
        raise ValueError(f"mechanism type 'feature_dp_sgd' requires parameter {key!r}")
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number; got {value!r} (mechanism type 'feature_dp_sgd')")
    if integer:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{key} must be an integer; got {value!r} (mechanism type 'feature_dp_sgd')")
        value = int(value)
    return value


def _build_feature_dp_sgd(table: dict) -> tuple[ev.Event, int]:
    """``feature_dp_sgd``: ``noise_multiplier`` (σ on the sum ÷ residual clip norm), ``sampling_rate``, ``steps``;
    optional ``public_batch`` (``independent`` default, ``shared`` → no amplification), ``neighboring``
    (``add_remove`` only) and ``count`` (repeated runs)."""
    extra = set(table) - _SPEC_KEYS - {"type"}
    if extra:
        raise ValueError(
            f"unknown parameter(s) {sorted(extra)} for mechanism type 'feature_dp_sgd'; allowed: {sorted(_SPEC_KEYS)}"
        )
    relation = table.get("neighboring", ev.NeighboringRelation.ADD_OR_REMOVE_ONE.value)
    if relation != ev.NeighboringRelation.ADD_OR_REMOVE_ONE.value:
        raise ValueError(
            f"neighboring must be 'add_remove' for feature_dp_sgd (Def 6); got {relation!r} "
            "(the replacement variant follows from Proposition 1)"
        )
    event = FeatureDpSgd(
        noise_multiplier=_spec_number(table, "noise_multiplier"),
        sampling_rate=_spec_number(table, "sampling_rate"),
        steps=_spec_number(table, "steps", integer=True),
        public_batch=table.get("public_batch", PublicBatch.INDEPENDENT.value),
    )
    count = _spec_number(table, "count", integer=True) if "count" in table else 1
    if count < 0:
        raise ValueError(f"count must be an integer >= 0; got {count!r} (mechanism type 'feature_dp_sgd')")
    return event, count


SPEC_TYPES = {"feature_dp_sgd": _build_feature_dp_sgd}


def _register_interpreters() -> None:
    """Register the RDP curve (delegating to the subsampled Gaussian) and the exact p = 1 profile."""
    rdp.rdp_curve.register(FeatureDpSgd)(feature_dp_rdp_curve)
    pld.privacy_profile.register(FeatureDpSgd)(feature_dp_privacy_profile)


_register_interpreters()
