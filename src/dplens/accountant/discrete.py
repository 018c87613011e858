"""Discrete Laplace and discrete Gaussian events, with their RDP curves and exact privacy profiles.

- :class:`DiscreteLaplace` — integer noise with P(z) ∝ exp(−a|z|) (a = ``noise_parameter``) added to an
  integer query of sensitivity Δ; exactly dp-accounting's ``DiscreteLaplaceDpEvent(noise_parameter,
  sensitivity)``. It is pure (aΔ)-DP (Ghosh, Roughgarden, Sundararajan 2009; the two-sided geometric mechanism).
- :class:`DiscreteGaussian` — integer noise with P(z) ∝ exp(−z²/(2σ²)) per coordinate; with integer ℓ2
  sensitivity Δ it is (Δ²/(2σ²))-zCDP (Canonne, Kamath, Steinke, NeurIPS 2020, arXiv 2004.00010, Theorem 14 for
  the product over coordinates; Proposition 5 for one), and in one dimension its exact (ε, δ) profile is a sum
  over the integers (CKS 2020 Theorem 7):

      δ(ε) = P[Y > εσ²/Δ − Δ/2] − e^ε · P[Y > εσ²/Δ + Δ/2],   Y ~ N_Z(0, σ²).

The interpreters are registered on the core's ``rdp.rdp_curve`` and ``pld.privacy_profile`` (singledispatch).
The RDP of the discrete Laplace is exact (a closed form over three regions of the integers, below); the discrete
Gaussian's RDP is the zCDP bound αΔ²/(2σ²) (an upper bound; the exact divergence is slightly smaller).
dplens's secure ``release()`` of the Laplace and Gaussian mechanisms (:mod:`dplens.mechanisms.additive`) is
accounted with these events.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from dplens.accountant import events as ev
from dplens.accountant import pld, pld_engine, rdp
from dplens.accountant.curves import PrivacyProfile, RdpCurve, check_alpha

__all__ = [
    "DiscreteGaussian",
    "DiscreteLaplace",
    "discrete_gaussian_delta",
    "discrete_laplace_delta",
    "discrete_laplace_rdp",
]

#: Largest number of integers summed for a discrete Gaussian profile (the support is cut at ±(40σ + Δ)).
MAX_SUPPORT = 20_000_000


def _check_sensitivity(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"sensitivity must be an integer >= 1; got {value!r}")
    return int(value)


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class DiscreteLaplace(ev.Event):
    """Integer noise P(z) ∝ exp(−a|z|), a = ``noise_parameter``, on an integer query of ℓ1-sensitivity Δ.

    Pure (aΔ)-DP; identical to dp-accounting's ``DiscreteLaplaceDpEvent(noise_parameter, sensitivity)``.

    Example:
        >>> DiscreteLaplace(noise_parameter=0.5, sensitivity=2).pure_dp_epsilon()
        1.0
    """

    noise_parameter: float
    sensitivity: int = 1
    neighboring: ev.NeighboringRelation = ev.ADD_REMOVE

    def __post_init__(self) -> None:
        ev._positive("noise_parameter", self.noise_parameter)
        _check_sensitivity(self.sensitivity)

    def pure_dp_epsilon(self) -> float:
        """ε of (ε, 0)-DP: a·Δ (the privacy loss is bounded by aΔ and attains it)."""
        return float(self.noise_parameter) * int(self.sensitivity)


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class DiscreteGaussian(ev.Event):
    """Integer noise P(z) ∝ exp(−z²/(2σ²)) per coordinate on an integer query of ℓ2-sensitivity Δ (``dimension``
    coordinates): (Δ²/(2σ²))-zCDP (CKS 2020 Theorem 14); the exact profile is known for one dimension.

    Example:
        >>> DiscreteGaussian(sigma=2.0).zcdp_rho()
        0.125
    """

    sigma: float
    sensitivity: int = 1
    dimension: int = 1
    neighboring: ev.NeighboringRelation = ev.ADD_REMOVE

    def __post_init__(self) -> None:
        ev._positive("sigma", self.sigma)
        _check_sensitivity(self.sensitivity)
        if isinstance(self.dimension, bool) or not isinstance(self.dimension, int) or self.dimension < 1:
            raise ValueError(f"dimension must be an integer >= 1; got {self.dimension!r}")

    def zcdp_rho(self) -> float:
        """ρ of ρ-zCDP: Δ²/(2σ²) (CKS 2020 Theorem 14)."""
        return int(self.sensitivity) ** 2 / (2.0 * float(self.sigma) ** 2)


# --------------------------------------------------------------------------------------------
# Discrete Laplace
# --------------------------------------------------------------------------------------------


def discrete_laplace_rdp(alpha: np.ndarray, *, noise_parameter: float, sensitivity: int = 1) -> np.ndarray:
    """The exact Rényi divergence D_α(P ‖ Q) of P = DLap(a) and Q = its shift by Δ (symmetric in P, Q).

    With p(z) = c·e^{−a|z|}, c = (1 − r)/(1 + r), r = e^{−a}, the sum Σ p^α q^{1−α} splits over z ≤ 0 (each
    term e^{a(α−1)Δ}·p(z)/c·c…), 0 < z < Δ and z ≥ Δ into geometric series:

        Σ = c/(1 − r) · [e^{a(α−1)Δ} + e^{−aαΔ}] + c·e^{a(α−1)Δ} · Σ_{z=1}^{Δ−1} e^{−a(2α−1)z},

    and D_α = log Σ / (α − 1), evaluated in log space (→ aΔ as α → ∞).
    """
    a = rdp._check_positive("noise_parameter", noise_parameter)
    delta = _check_sensitivity(sensitivity)
    alphas = check_alpha(alpha)
    flat = np.atleast_1d(alphas).astype(float).ravel()
    log_c = math.log(-math.expm1(-a)) - math.log1p(math.exp(-a))
    log_tail = -math.log(-math.expm1(-a))  # log 1/(1 − r)
    terms = [a * (flat - 1) * delta + log_tail, -a * flat * delta + log_tail]
    if delta > 1:
        decay = a * (2 * flat - 1)  # s = e^{−decay}; Σ_{z=1}^{Δ−1} s^z = s(1 − s^{Δ−1})/(1 − s)
        middle = -decay + np.log(-np.expm1(-decay * (delta - 1))) - np.log(-np.expm1(-decay))
        terms.append(a * (flat - 1) * delta + middle)
    total = np.logaddexp.reduce(np.stack(terms), axis=0) + log_c
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(flat > 1, total / (flat - 1), np.nan)
    # Guard rounding: the divergence never exceeds the pure-DP bound aΔ nor goes below zero.
    value = np.clip(value, 0.0, a * delta)
    return value.reshape(np.shape(alphas)) if np.ndim(alphas) else value


def discrete_laplace_delta(epsilons: np.ndarray, *, noise_parameter: float, sensitivity: int = 1) -> np.ndarray:
    """δ(ε) = Σ_z (p(z) − e^ε q(z))₊ for DLap(a) against its shift by Δ (exact; symmetric).

    The loss is aΔ for z ≤ 0 (mass 1/(1 + r)), a(Δ − 2z) for 0 < z < Δ, −aΔ beyond: δ(ε) =
    (1 − e^{ε−aΔ})₊/(1 + r) + Σ_{z=1}^{Δ−1} c·(r^z − e^ε r^{Δ−z})₊.
    """
    a = float(noise_parameter)
    delta = _check_sensitivity(sensitivity)
    eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
    r = math.exp(-a)
    c = -math.expm1(-a) / (1.0 + r)
    out = np.where(eps < a * delta, -np.expm1(np.minimum(eps - a * delta, 0.0)) / (1.0 + r), 0.0)
    if delta > 1:
        z = np.arange(1, delta)
        for i, e in enumerate(eps):
            # c·r^z·(1 − e^{ε − a(Δ − 2z)})₊ = c·r^z·(−expm1(ε − a(Δ − 2z)))₊
            gap = e - a * (delta - 2 * z)
            positive = gap < 0
            out[i] += float(np.sum(c * np.exp(-a * z[positive]) * -np.expm1(gap[positive])))
    return np.minimum(out, 1.0)


@rdp.rdp_curve.register
def _(event: DiscreteLaplace) -> RdpCurve:
    return RdpCurve.from_function(
        functools.partial(discrete_laplace_rdp, noise_parameter=event.noise_parameter, sensitivity=event.sensitivity),
        description=f"DiscreteLaplace(noise_parameter={event.noise_parameter:g}, sensitivity={event.sensitivity})",
    )


@pld.privacy_profile.register
def _(event: DiscreteLaplace) -> PrivacyProfile:
    return PrivacyProfile(
        remove=functools.partial(
            discrete_laplace_delta, noise_parameter=event.noise_parameter, sensitivity=event.sensitivity
        ),
        description=(
            f"DiscreteLaplace(noise_parameter={event.noise_parameter:g}, sensitivity={event.sensitivity}) exact"
        ),
    )


# --------------------------------------------------------------------------------------------
# Discrete Gaussian
# --------------------------------------------------------------------------------------------


def _zcdp_rdp(alpha: np.ndarray, *, rho: float) -> np.ndarray:
    return check_alpha(alpha) * rho


@functools.lru_cache(maxsize=32)
def _log_tails(sigma: float, sensitivity: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(support z, log P[Y ≥ z] for each z, log normaliser) of N_Z(0, σ²) on [−K, K], K = ⌈40σ⌉ + Δ."""
    half = math.ceil(40.0 * sigma) + sensitivity + 2
    if 2 * half + 1 > MAX_SUPPORT:
        raise rdp.UnsupportedEventError(
            f"the exact discrete Gaussian profile sums {2 * half + 1} integers (sigma={sigma:g}); use the RDP route"
        )
    z = np.arange(-half, half + 1, dtype=float)
    log_mass = -(z * z) / (2.0 * sigma * sigma)
    log_norm = float(np.logaddexp.reduce(log_mass))
    log_upper = np.logaddexp.accumulate(log_mass[::-1])[::-1] - log_norm  # log P[Y ≥ z]
    return z, log_upper, log_norm


def discrete_gaussian_delta(epsilons: np.ndarray, *, sigma: float, sensitivity: int = 1) -> np.ndarray:
    """δ(ε) of the one-dimensional discrete Gaussian mechanism (CKS 2020 Theorem 7), in log space:
    P[Y > εσ²/Δ − Δ/2] − e^ε·P[Y > εσ²/Δ + Δ/2] over the integers Y ~ N_Z(0, σ²)."""
    sigma = float(sigma)
    delta = _check_sensitivity(sensitivity)
    z, log_upper, _ = _log_tails(sigma, delta)
    eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
    low = z[0]

    def log_strictly_above(x: np.ndarray) -> np.ndarray:
        first = np.floor(x) + 1.0  # smallest integer > x
        index = np.clip(first - low, 0, z.size - 1).astype(np.int64)
        value = log_upper[index]
        return np.where(first > z[-1], -np.inf, np.where(first < low, 0.0, value))

    centre = eps * sigma * sigma / delta
    first = log_strictly_above(centre - delta / 2.0)
    second = log_strictly_above(centre + delta / 2.0) + eps
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(first > second, np.exp(first) * -np.expm1(np.minimum(second - first, 0.0)), 0.0)
    return np.clip(np.nan_to_num(value, nan=0.0), 0.0, 1.0)


@rdp.rdp_curve.register
def _(event: DiscreteGaussian) -> RdpCurve:
    return RdpCurve.from_function(
        functools.partial(_zcdp_rdp, rho=event.zcdp_rho()),
        description=(
            f"DiscreteGaussian(sigma={event.sigma:g}, sensitivity={event.sensitivity}, dimension={event.dimension}) "
            "zCDP bound"
        ),
    )


@pld.privacy_profile.register
def _(event: DiscreteGaussian) -> PrivacyProfile:
    if event.dimension != 1:
        raise rdp.UnsupportedEventError(
            f"the exact discrete Gaussian profile is one-dimensional; got dimension={event.dimension} (use RDP)"
        )
    _log_tails(float(event.sigma), int(event.sensitivity))  # refuse an oversized support before any state changes
    return PrivacyProfile(
        remove=functools.partial(discrete_gaussian_delta, sigma=event.sigma, sensitivity=event.sensitivity),
        description=f"DiscreteGaussian(sigma={event.sigma:g}, sensitivity={event.sensitivity}) exact (CKS Thm 7)",
    )


@pld_engine.loss_distribution.register
def _(event: DiscreteGaussian, grid: pld_engine.LossGrid) -> pld_engine.EventPld:
    """The PLD of the one-dimensional discrete Gaussian for dplens's PLD engine (certified bracket).

    P = N_Z(0, σ²), Q = N_Z(Δ, σ²): the privacy loss is linear in the output, L(z) = (Δ² − 2Δz)/(2σ²), so the PLD
    is a point mass at L(z) with P-mass N_Z(z; 0, σ²) for every integer z (CKS 2020, Theorem 7's sum); the reverse
    pair is its mirror image z ↦ Δ − z, so the pair is symmetric. The support is cut at |z| ≤ M with
    M = ⌈σ·z_t⌉ + 1, Φ(−z_t) ≤ the grid's tail mass: the P-mass below −M (losses above the grid, at most
    σ√(2π)Φ(−M/σ) over the normaliser) is an atom at +∞; above Δ + M the loss is negative and adds nothing to δ(ε)
    for ε ≥ 0.
    """
    if event.dimension != 1:
        raise rdp.UnsupportedEventError(
            f"the PLD engine models the one-dimensional discrete Gaussian; got dimension={event.dimension} (use RDP)"
        )
    sigma, shift = float(event.sigma), int(event.sensitivity)
    reach = math.ceil(sigma * pld_engine.normal_quantile_bound(grid.tail_mass)) + 1
    if 2 * reach + shift + 1 > MAX_SUPPORT:
        raise rdp.UnsupportedEventError(
            f"the discrete Gaussian PLD would need {2 * reach + shift + 1} atoms (sigma={sigma:g}); use the RDP route"
        )
    z = np.arange(-reach, shift + reach + 1, dtype=float)
    weights = np.exp(-(z * z) / (2.0 * sigma * sigma))
    normaliser = float(weights.sum())
    p_mass = weights / normaliser
    losses = (shift * shift - 2.0 * shift * z) / (2.0 * sigma * sigma)
    low_tail = sigma * math.sqrt(2.0 * math.pi) * 0.5 * math.erfc(reach / sigma / math.sqrt(2.0)) / normaliser
    atoms = np.column_stack([losses, p_mass, p_mass * np.exp(-losses)])
    atoms = np.vstack([atoms, [math.inf, low_tail, 0.0]])
    return pld_engine.EventPld(remove=pld_engine.discretise(pld_engine.PrivacyLoss(masses=None, atoms=atoms), grid))
