"""Accounting for the Gaussian mixing mechanism (GaussMix) and its modified version.

Seed 004: Lev, Srinivasan, Shenfeld, Ligett, Sekhari, Wilson, "The Gaussian Mixing Mechanism: Rényi
Differential Privacy via Gaussian Sketches" (arXiv 2505.24603), implementation notes
``research/gaussmix.md`` (cited below as "the notes").

GaussMix releases ``M(X) = S X + σ ξ`` with ``S ~ N(0, I_{k×n})`` secret. With a public row bound
C_X and a public lower bound λ̄_min ≤ λ_min(XᵀX), the normalised parameter is
``γ = (σ² + λ̄_min) / C_X²`` (Lemma 1). Contents:

- :func:`phi` — Lemma 1's RDP curve φ(α; k, γ), numerically sound for every α ∈ (1, γ) and every
  γ > 1 (series where γ is huge, log1p elsewhere, the α → 1 KL limit in :func:`kl_divergence`).
- :func:`gaussmix_rdp_curve`, :func:`gaussmix_tcdp` (Corollary 1), :func:`gaussmix_epsilon`
  (Proposition 1 with α optimised continuously), :func:`sheffet2019_epsilon` (the baseline as the
  paper quotes it), :func:`theorem1_epsilon` (eq. (2)), :func:`calibrate_gamma` and
  :func:`calibrate_gamma_linear_mixing` (Algorithm 2, line 1).
- :func:`per_instance_divergence` — the exact Rényi divergence for removing / adding one row, via
  the ridge leverage t = xᵀ(XᵀX + σ²I)⁻¹x (paper App. B, eq. (6)).
- **Beyond the paper:** :func:`gaussmix_privacy_profile` — the exact privacy profile δ(ε) and f-DP
  trade-off curve of the worst-case pair (notes §5 item 12), and calibration through it.

Neighbouring relation: the paper's is zero-out (one row replaced by 0). GaussMix's output depends on
X only through XᵀX, and zeroing a row or removing it leave XᵀX equal, so add/remove gives the same
output distributions and the same guarantee (notes §1.2). Events therefore default to add/remove
(so they compose with the other add/remove events) and accept zero-out; replace-one is rejected
(not covered by the paper).
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import optimize, stats

from dplens.accountant import conversions
from dplens.accountant import events as ev
from dplens.accountant.curves import PrivacyProfile, RdpConversion, RdpCurve, Tcdp, TradeOff
from dplens.accountant.plugin_tables import spec_count

__all__ = [
    "SPEC_TYPES",
    "AccountingRoute",
    "GaussMix",
    "GaussianTermRule",
    "ModifiedGaussMix",
    "PerInstanceDivergence",
    "Theorem1Epsilon",
    "calibrate_gamma",
    "calibrate_gamma_linear_mixing",
    "exact_delta_add",
    "exact_delta_remove",
    "exact_epsilon",
    "gamma_from_noise",
    "gaussmix_epsilon",
    "gaussmix_privacy_profile",
    "gaussmix_rdp_curve",
    "gaussmix_tcdp",
    "gaussmix_trade_off",
    "kl_divergence",
    "modified_gaussmix_privacy_profile",
    "per_instance_divergence",
    "phi",
    "phi_add",
    "sheffet2019_epsilon",
    "theorem1_epsilon",
]

#: Theorem 1 / Corollary 1 / Algorithm 2 need γ > 5/2.
GAMMA_MIN_THEOREM1 = 2.5


class AccountingRoute(enum.Enum):
    """Which analysis turns γ into (ε, δ)."""

    #: Lemma 1's RDP curve + Proposition 1 (Canonne–Kamath–Steinke 2020 Prop. 12): the paper's route.
    RDP = "rdp"
    #: The exact chi-square privacy profile of the worst-case pair (notes §5 item 12; not in the paper).
    EXACT = "exact"


class GaussianTermRule(enum.Enum):
    """How Theorem 1 accounts the private λ_min release (a Gaussian mechanism, noise multiplier η).

    The paper uses the classical ε = √(2 log(1.25/δ'))/η (Dwork & Roth 2014 Thm A.1), which is only
    proven for ε ≤ 1 (notes §5 item 10).
    """

    #: Default: max(classical formula, exact analytic Gaussian). Equals the paper's number whenever
    #: the classical formula is a valid bound, and is always a valid bound.
    CHECKED = "checked"
    #: The exact analytic Gaussian mechanism (Balle & Wang 2018 Thm 8), never worse.
    ANALYTIC = "analytic"
    #: The paper's formula as printed, even outside its proven range (reproductions only).
    PAPER = "paper"


# --------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be an integer >= 1; got {k!r}")
    return int(k)


def _check_gamma(gamma: Any, *, minimum: float = 1.0, name: str = "gamma") -> float:
    try:
        value = float(gamma)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > {minimum:g}; got {gamma!r}") from None
    if isinstance(gamma, bool) or not (math.isfinite(value) and value > minimum):
        raise ValueError(f"{name} must be a finite number > {minimum:g}; got {gamma!r}")
    return value


def _check_nonneg(name: str, value: Any, *, strict: bool = False) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        out = math.nan
    ok = not isinstance(value, bool) and math.isfinite(out) and (out > 0 if strict else out >= 0)
    if not ok:
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} 0; got {value!r}")
    return out


def _orders_and_k(alpha: Any, k: Any) -> tuple[np.ndarray, float]:
    """The checked orders α > 1 (an array) and sketch size k > 0 of the φ functions."""
    arr = np.asarray(alpha, dtype=float)
    if np.any(np.isnan(arr)) or np.any(arr <= 1):
        raise ValueError(f"alpha must be > 1 (and not NaN); got {alpha!r}")
    return arr, _check_nonneg("k", k, strict=True)


def gamma_from_noise(*, sigma: float, row_bound: float, lambda_min_bound: float = 0.0) -> float:
    """γ = (σ² + λ̄_min) / C_X² (seed 004, Lemma 1).

    Args:
        sigma: additive noise standard deviation σ ≥ 0 (data scale).
        row_bound: public bound C_X > 0 on every row norm.
        lambda_min_bound: public lower bound λ̄_min ≥ 0 on λ_min(XᵀX).

    Returns:
        γ (not checked against γ > 1; the events do that).

    Raises:
        ValueError: on a negative / non-finite argument or row_bound = 0.
    """
    sigma = _check_nonneg("sigma", sigma)
    row_bound = _check_nonneg("row_bound", row_bound, strict=True)
    lambda_min_bound = _check_nonneg("lambda_min_bound", lambda_min_bound)
    return (sigma * sigma + lambda_min_bound) / (row_bound * row_bound)


# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class GaussMix(ev.Event):
    """One release of GaussMix ``S X + σ ξ`` with sketch size ``k`` and normalised parameter ``gamma``.

    γ = (σ² + λ̄_min)/C_X² must exceed 1 (seed 004, Lemma 1). Add/remove or zero-out neighbours
    (identical output distributions, notes §1.2); replace-one raises ``ValueError``. Build from the
    raw parameters with :meth:`from_noise`.
    """

    k: int
    gamma: float
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", _check_k(self.k))
        object.__setattr__(self, "gamma", _check_gamma(self.gamma))
        if self.neighboring is ev.NeighboringRelation.REPLACE_ONE:
            raise ValueError(
                f"neighboring must be zero-out or add/remove (replace-one is not covered); got {self.neighboring!r}"
            )

    def self_composed(self, count: int) -> GaussMix:
        """``count`` runs on the same data: (S₁X, …, S_count X) is S X with k·count i.i.d. rows, i.e. exactly
        GaussMix(k·count, γ); the exact profile of the composition is that of the larger sketch."""
        return GaussMix(k=self.k * count, gamma=self.gamma, neighboring=self.neighboring)

    @classmethod
    def from_noise(cls, *, k: int, sigma: float, row_bound: float, lambda_min_bound: float = 0.0) -> GaussMix:
        """The event for noise σ, row bound C_X and scale bound λ̄_min (γ = (σ² + λ̄_min)/C_X²)."""
        gamma = gamma_from_noise(sigma=sigma, row_bound=row_bound, lambda_min_bound=lambda_min_bound)
        if not gamma > 1:
            raise ValueError(
                f"(sigma**2 + lambda_min_bound) / row_bound**2 must be > 1; got gamma={gamma!r} "
                f"(sigma={sigma!r}, row_bound={row_bound!r}, lambda_min_bound={lambda_min_bound!r})"
            )
        return cls(k=k, gamma=gamma)


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class ModifiedGaussMix(ev.Event):
    """Algorithm 1 (ModifiedGaussMix) of seed 004: λ_min released with noise multiplier ``eta``.

    Its guarantee is Theorem 1's (ε̃(η, γ, k, δ), δ), a basic composition of (ε, δ) pieces — not an
    RDP statement (notes §5 item 9). Requires γ > 5/2 and η > 0.
    """

    k: int
    gamma: float
    eta: float
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", _check_k(self.k))
        object.__setattr__(self, "gamma", _check_gamma(self.gamma, minimum=GAMMA_MIN_THEOREM1))
        object.__setattr__(self, "eta", _check_nonneg("eta", self.eta, strict=True))
        if self.neighboring is ev.NeighboringRelation.REPLACE_ONE:
            raise ValueError(
                f"neighboring must be zero-out or add/remove (replace-one is not covered); got {self.neighboring!r}"
            )


# --------------------------------------------------------------------------------------------
# φ(α; k, γ) — Lemma 1
# --------------------------------------------------------------------------------------------

_SERIES_TERMS = np.arange(2, 66, dtype=float)  # j = 2 … 65: (αu)^63 ≤ 0.5^63 ≈ 1e-19
_SERIES_LIMIT = 0.5


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """log(eˣ − 1) for x > 0, without overflow."""
    return x + np.log(-np.expm1(-x))


def _bracket_series(alpha: np.ndarray, u: np.ndarray, *, sign: float) -> np.ndarray:
    """[α log(1 ∓ u) − log(1 ∓ αu)] / (α − 1) by its power series (notes §2.2), for αu ≤ 1/2.

    α log(1 − u) − log(1 − αu) = Σ_{j≥2} (αʲ − α) uʲ / j, and (αʲ − α)/(α − 1) = α(αʲ⁻¹ − 1)/(α − 1),
    so there is no cancellation however small u is. ``sign = −1`` gives the add direction
    (u → −u, an alternating series).
    """
    a = alpha[:, None]
    j = _SERIES_TERMS[None, :]
    am1 = a - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.where(
            am1 > 0, _log_expm1((j - 1) * np.log1p(np.maximum(am1, 1e-300))) - np.log(am1), np.log(j - 1)
        )
        log_terms = np.log(a) + log_ratio + j * np.log(u[:, None]) - np.log(j)
    terms = np.exp(log_terms)
    if sign < 0:
        terms = terms * np.where(j % 2 == 0, 1.0, -1.0)
    # Sum smallest first for accuracy.
    return terms[:, ::-1].sum(axis=1)


def _phi_unchecked(alpha: np.ndarray, k: float, gamma: float) -> np.ndarray:
    alpha = np.asarray(alpha, dtype=float)
    flat = np.atleast_1d(alpha).ravel()
    out = np.full(flat.shape, np.inf)
    inside = flat < gamma
    u = 1.0 / gamma
    use_series = inside & (flat * u <= _SERIES_LIMIT)
    if use_series.any():
        a = flat[use_series]
        out[use_series] = 0.5 * k * _bracket_series(a, np.full(a.shape, u), sign=1.0)
    direct = inside & ~use_series
    if direct.any():
        a = flat[direct]
        # α log(1−u) − log(1−αu) = (α−1) log(1−u) + log1p((α−1)u/(1−αu)) exactly; 1 − αu = (γ − α)/γ.
        x = (a - 1.0) * u / ((gamma - a) / gamma)
        with np.errstate(divide="ignore", invalid="ignore"):
            second = np.where(a > 1.0, np.log1p(x) / (a - 1.0), u / (1.0 - u))
        out[direct] = 0.5 * k * (math.log1p(-u) + second)
    out = np.maximum(out, 0.0)
    return out.reshape(np.shape(alpha)) if np.ndim(alpha) else out.reshape(())


def phi(alpha: float | np.ndarray, k: int | float, gamma: float) -> np.ndarray:
    """φ(α; k, γ) = k/(2(α−1)) [α log(1 − 1/γ) − log(1 − α/γ)] (seed 004, Lemma 1); +∞ for α ≥ γ.

    GaussMix with γ > 1 is (α, φ(α; k, γ))-RDP for all α ∈ (1, γ). φ is k times the Rényi divergence
    D_α(N(0, 1) ‖ N(0, 1 − 1/γ)) (notes §1.4). Evaluated by the power series of notes §2.2 when
    α/γ ≤ 1/2 (φ(2; 1, 1e12) = 5.00000000001e-25 exactly to float precision) and otherwise by the
    exact rewrite k/2 [log1p(−u) + log1p((α−1)u/(1−αu))/(α−1)], u = 1/γ, which has no 0/0 at α → 1.

    Args:
        alpha: Rényi order(s) α > 1 (array or scalar).
        k: sketch size (k > 0; k need not be an integer here).
        gamma: γ > 1.

    Returns:
        φ as a float array (0-d for scalar input).

    Raises:
        ValueError: α ≤ 1 or NaN, k ≤ 0, γ ≤ 1.
    """
    arr, k = _orders_and_k(alpha, k)
    gamma = _check_gamma(gamma)
    return _phi_unchecked(arr, k, gamma)


def kl_divergence(k: int | float, gamma: float) -> float:
    """The α → 1 limit of φ: (k/2)(1/(γ−1) + log(1 − 1/γ)) (notes §2.2), computed without cancellation.

    Series form (k/2) Σ_{j≥2} (j−1) u^j / j, u = 1/γ, when u ≤ 1/2.

    Args:
        k: sketch size, > 0.
        gamma: γ > 1.

    Returns:
        KL(N(0,1)^k ‖ N(0, 1 − 1/γ)^k).

    Raises:
        ValueError: k ≤ 0 or γ ≤ 1.
    """
    k = _check_nonneg("k", k, strict=True)
    gamma = _check_gamma(gamma)
    u = 1.0 / gamma
    if u <= _SERIES_LIMIT:
        return float(0.5 * k * _bracket_series(np.array([1.0]), np.array([u]), sign=1.0)[0])
    return 0.5 * k * (1.0 / (gamma - 1.0) + math.log1p(-u))


def phi_add(alpha: float | np.ndarray, k: int | float, s: float) -> np.ndarray:
    """k/(2(α−1)) [α log(1+s) − log(1+αs)] = k D_α(N(0,1) ‖ N(0,1+s)): the add direction (App. B, eq. (6)).

    Finite for every α > 1. Series (alternating) for αs ≤ 1/2, exact log1p rewrite otherwise.

    Args:
        alpha: orders α > 1.
        k: sketch size > 0.
        s: the leverage t′ = xᵀ(X′ᵀX′ + σ²I)⁻¹x ≥ 0 of the added row.

    Returns:
        The divergence as a float array.

    Raises:
        ValueError: on α ≤ 1, k ≤ 0 or s < 0.
    """
    arr, k = _orders_and_k(alpha, k)
    s = _check_nonneg("s", s)
    flat = np.atleast_1d(arr).ravel()
    out = np.zeros(flat.shape)
    if s > 0:
        series = flat * s <= _SERIES_LIMIT
        if series.any():
            a = flat[series]
            out[series] = 0.5 * k * _bracket_series(a, np.full(a.shape, s), sign=-1.0)
        if (~series).any():
            a = flat[~series]
            # α log(1+s) − log(1+αs) = (α−1) log(1+s) − log1p((α−1)s/(1+s)) exactly.
            out[~series] = 0.5 * k * (math.log1p(s) - np.log1p((a - 1.0) * s / (1.0 + s)) / (a - 1.0))
    out = np.maximum(out, 0.0)
    return out.reshape(np.shape(arr)) if np.ndim(arr) else out.reshape(())


def _phi_for_curve(alpha: np.ndarray, *, k: float, gamma: float) -> np.ndarray:
    return _phi_unchecked(alpha, k, gamma)


def gaussmix_rdp_curve(event: GaussMix) -> RdpCurve:
    """Lemma 1 of seed 004 as an :class:`RdpCurve` on α ∈ (1, γ) (alpha_max = γ).

    Composes with other RDP curves by ``+``; ``.epsilon(δ)`` is Proposition 1 (CKS 2020 Prop. 12)
    optimised continuously in α (the optimum is ≈ 0.4γ, in the millions for large γ; notes §5 item 4).

    Args:
        event: a :class:`GaussMix` event.

    Returns:
        The :class:`RdpCurve` φ(·; k, γ).

    Raises:
        ValueError: if ``event`` is not a :class:`GaussMix`.
    """
    if not isinstance(event, GaussMix):
        raise ValueError(f"event must be a GaussMix; got {event!r}")
    return RdpCurve.from_function(
        functools.partial(_phi_for_curve, k=float(event.k), gamma=float(event.gamma)),
        alpha_max=float(event.gamma),
        description=f"GaussMix(k={event.k}, gamma={event.gamma:g}) [Lemma 1]",
    )


def gaussmix_tcdp(event: GaussMix) -> Tcdp:
    """Corollary 1 of seed 004: (k/(2γ²), 2γ/5)-tCDP for γ > 5/2.

    Args:
        event: a :class:`GaussMix` event with γ > 5/2.

    Returns:
        :class:`Tcdp` with ρ = k/(2γ²), ω = 2γ/5.

    Raises:
        ValueError: if γ ≤ 5/2 (the corollary does not apply).
    """
    if not isinstance(event, GaussMix):
        raise ValueError(f"event must be a GaussMix; got {event!r}")
    _check_gamma(event.gamma, minimum=GAMMA_MIN_THEOREM1)
    return Tcdp(rho=event.k / (2.0 * event.gamma**2), omega=2.0 * event.gamma / 5.0)


def gaussmix_epsilon(
    event: GaussMix,
    delta: float,
    *,
    route: AccountingRoute = AccountingRoute.RDP,
    conversion: RdpConversion = RdpConversion.OPTIMAL,
) -> float:
    """ε of one GaussMix release at δ (an upper bound).

    RDP route: Proposition 1 of seed 004 (= CKS 2020 Prop. 12; ``conversion=CLASSIC`` gives the
    Mironov 2017 conversion the repo notebook also plots). EXACT route: :func:`exact_epsilon`.

    Args:
        event: a :class:`GaussMix` event.
        delta: δ ∈ (0, 1).
        route: :class:`AccountingRoute`.
        conversion: RDP → DP theorem (RDP route only).

    Returns:
        ε, an upper bound.

    Raises:
        ValueError: on a bad event, δ ∉ (0, 1) or a non-enum option.
    """
    delta = conversions.check_delta(delta)
    if route is AccountingRoute.RDP:
        return gaussmix_rdp_curve(event).epsilon(delta, conversion=conversion)
    if route is AccountingRoute.EXACT:
        if not isinstance(event, GaussMix):
            raise ValueError(f"event must be a GaussMix; got {event!r}")
        return exact_epsilon(delta, k=event.k, gamma=event.gamma)
    raise ValueError(f"route must be an AccountingRoute; got {route!r}")


def sheffet2019_epsilon(*, k: int, gamma: float, delta: float) -> float:
    """The Sheffet 2019 (Theorem 2) baseline as quoted by seed 004 §4: 2√(2k log(4/δ))/γ + 2 log(4/δ)/γ.

    Not checked against Sheffet's original [notes §8, UNSURE]; used only as the comparison curve.

    Args:
        k: sketch size ≥ 1.
        gamma: γ > 1.
        delta: δ ∈ (0, 1).

    Returns:
        The quoted bound (rounded up).

    Raises:
        ValueError: on bad arguments.
    """
    k = _check_k(k)
    gamma = _check_gamma(gamma)
    delta = conversions.check_delta(delta)
    log_term = math.log(4.0 / delta)
    return conversions.round_up(2.0 * math.sqrt(2.0 * k * log_term) / gamma + 2.0 * log_term / gamma)


# --------------------------------------------------------------------------------------------
# Beyond the paper: the exact chi-square privacy profile
# --------------------------------------------------------------------------------------------


def _log_diff(log_a: np.ndarray, log_b: np.ndarray) -> np.ndarray:
    """log(eᵃ − eᵇ), −∞ where b ≥ a."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = log_a + np.log(-np.expm1(np.minimum(log_b - log_a, 0.0)))
    return np.where((log_b < log_a) & np.isfinite(log_a), out, -np.inf)


# Relative accuracy assumed for scipy's chi-square log-tails; the ε solver adds this fraction of the
# larger tail term to δ, so cancellation in SF(c) − e^ε SF(c′) can never make δ look smaller than it is.
_TAIL_REL_ERROR = 1e-12


def _log_delta_upper(log_a: np.ndarray, log_b: np.ndarray) -> np.ndarray:
    """log of an upper bound on eᵃ − eᵇ that covers a relative error _TAIL_REL_ERROR in both terms."""
    return np.logaddexp(_log_diff(log_a, log_b), np.maximum(log_a, log_b) + math.log(2 * _TAIL_REL_ERROR))


def _log_delta_remove(eps: np.ndarray, k: float, t: float, *, upper: bool = False) -> np.ndarray:
    # L = t/(2(1−t)) W + (k/2) log(1−t); L > ε ⇔ W > c. Under P: W ~ χ²_k; under Q: W ~ (1−t) χ²_k.
    c_over = (2.0 / t) * (eps - 0.5 * k * math.log1p(-t))  # c / (1 − t)
    c = (1.0 - t) * c_over
    combine = _log_delta_upper if upper else _log_diff
    return combine(stats.chi2.logsf(c, k), eps + stats.chi2.logsf(c_over, k))


def _log_delta_add(eps: np.ndarray, k: float, s: float, *, upper: bool = False) -> np.ndarray:
    # L = −s/(2(1+s)) W + (k/2) log(1+s); L > ε ⇔ W < c′. Under P: W ~ χ²_k; under Q: W ~ (1+s) χ²_k.
    c_over = (2.0 / s) * (0.5 * k * math.log1p(s) - eps)  # c′ / (1 + s)
    with np.errstate(divide="ignore", invalid="ignore"):
        positive = c_over > 0
        c_safe = np.where(positive, c_over, 1.0)
        combine = _log_delta_upper if upper else _log_diff
        out = combine(stats.chi2.logcdf((1.0 + s) * c_safe, k), eps + stats.chi2.logcdf(c_safe, k))
    return np.where(positive, out, -np.inf)


def _check_t(t: Any, name: str = "t") -> float:
    try:
        value = float(t)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(t, bool) or not (0 < value < 1):
        raise ValueError(f"{name} must be in (0, 1); got {t!r}")
    return value


def _epsilons_and_k(epsilon: Any, k: Any) -> tuple[np.ndarray, float]:
    """The checked ε grid (finite, ≥ 0) and chi-square degrees of freedom k > 0 of the exact δ functions."""
    eps = np.asarray(epsilon, dtype=float)
    if np.any(np.isnan(eps)) or np.any(eps < 0) or np.any(~np.isfinite(eps)):
        raise ValueError(f"epsilon must be finite and >= 0; got {epsilon!r}")
    return eps, _check_nonneg("k", k, strict=True)


def exact_delta_remove(epsilon: float | np.ndarray, *, k: int | float, t: float) -> np.ndarray:
    """Exact δ(ε) of k i.i.d. N(0, 1) against N(0, 1 − t) — removing a row of leverage t (notes §5 item 12).

    Derivation. After whitening by (XᵀX + σ²I)^{-1/2}, the rows of M(X) and M(X′) (row x zeroed)
    are k i.i.d. draws of N(0, 1) and N(0, 1 − t) along the direction of x and identical elsewhere
    (paper App. B). With W = Σ zᵢ² the privacy loss is L = log p/q = t/(2(1−t)) W + (k/2) log(1−t),
    W ~ χ²_k under P and W ~ (1−t) χ²_k under Q. So with c = (2(1−t)/t)(ε − (k/2) log(1−t)):

        δ(ε) = P[L > ε] − e^ε Q[L > ε] = SF_k(c) − e^ε SF_k(c/(1−t)),

    evaluated with chi-square log-tails (valid for tiny δ).

    Args:
        epsilon: ε ≥ 0 (array or scalar).
        k: the sketch size (chi-square degrees of freedom), > 0.
        t: leverage in (0, 1); the worst case under Lemma 1's assumptions is t = 1/γ.

    Returns:
        δ as a float array.

    Raises:
        ValueError: on bad arguments.
    """
    eps, k = _epsilons_and_k(epsilon, k)
    t = _check_t(t)
    return np.exp(_log_delta_remove(eps, k, t))


def exact_delta_add(epsilon: float | np.ndarray, *, k: int | float, s: float) -> np.ndarray:
    """Exact δ(ε) of k i.i.d. N(0, 1) against N(0, 1 + s) — adding a row of leverage s (notes §5 item 12).

    The loss is L = −s/(2(1+s)) W + (k/2) log(1+s), so with c′ = (2(1+s)/s)((k/2) log(1+s) − ε):
    δ(ε) = CDF_k(c′) − e^ε CDF_k(c′/(1+s)), and 0 when c′ ≤ 0.

    Args:
        epsilon: ε ≥ 0.
        k: degrees of freedom, > 0.
        s: leverage of the added row w.r.t. the smaller data set, > 0 (worst case 1/γ).

    Returns:
        δ as a float array.

    Raises:
        ValueError: on bad arguments.
    """
    eps, k = _epsilons_and_k(epsilon, k)
    s = _check_nonneg("s", s, strict=True)
    return np.exp(_log_delta_add(eps, k, s))


def _profile_delta(eps: np.ndarray, *, k: float, t: float, add: bool) -> np.ndarray:
    eps = np.asarray(eps, dtype=float)
    # The reported profile is an upper bound: it covers the float error of the tail difference.
    log_delta = _log_delta_add(eps, k, t, upper=True) if add else _log_delta_remove(eps, k, t, upper=True)
    return np.exp(log_delta)


def _exact_log_delta(eps: float, k: float, gamma: float) -> float:
    """log of an upper bound on max(δ_remove, δ_add) at t = s = 1/γ (see _TAIL_REL_ERROR)."""
    u = 1.0 / gamma
    e = np.array([float(eps)])
    return float(max(_log_delta_remove(e, k, u, upper=True)[0], _log_delta_add(e, k, u, upper=True)[0]))


def _exact_epsilon_unchecked(delta: float, k: float, gamma: float) -> float:
    log_target = math.log(delta)
    if _exact_log_delta(0.0, k, gamma) <= log_target:
        return 0.0
    hi = 1.0
    while _exact_log_delta(hi, k, gamma) > log_target:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    lo = hi / 2.0 if hi > 1.0 else 0.0
    # Root of the (non-increasing) log δ(ε) − log δ; a relative tolerance keeps tiny ε accurate.
    root = optimize.brentq(
        lambda e: max(_exact_log_delta(e, k, gamma), -1e300) - log_target, lo, hi, xtol=1e-300, rtol=1e-14
    )
    step = max(root * 1e-14, 1e-300)
    while _exact_log_delta(root, k, gamma) > log_target:  # pessimistic side
        root += step
        step *= 2.0
    return conversions.round_up(root)


def exact_epsilon(delta: float, *, k: int | float, gamma: float) -> float:
    """Smallest ε with max(δ_remove(ε), δ_add(ε)) ≤ δ for the worst case t = s = 1/γ (an upper bound).

    Beyond the paper (notes §5 item 12). Under Lemma 1's assumptions every neighbouring pair has
    removal leverage t ≤ 1/γ and addition leverage s ≤ 1/γ, and δ(ε) is non-decreasing in the
    leverage (checked numerically in the tests), so this is the exact (ε, δ) of the worst case. It
    is never larger than the Proposition 1 ε (any RDP conversion of the exact divergence is looser).

    Args:
        delta: δ ∈ (0, 1).
        k: sketch size, > 0.
        gamma: γ > 1.

    Returns:
        ε (rounded up; the profile is evaluated with a margin covering the float error of the tail
        difference).

    Raises:
        ValueError: δ ∉ (0, 1), k ≤ 0, γ ≤ 1.
    """
    delta = conversions.check_delta(delta)
    k = _check_nonneg("k", k, strict=True)
    gamma = _check_gamma(gamma)
    return _exact_epsilon_unchecked(delta, k, gamma)


def _exact_eps_for_delta(delta: float, *, k: float, gamma: float) -> float:
    return _exact_epsilon_unchecked(conversions.check_delta(delta), k, gamma)


def _trade_off_remove(alpha: np.ndarray, *, k: float, t: float) -> np.ndarray:
    # Test H0: P = N(0,1)^k vs H1: Q = N(0,1−t)^k; the NP test rejects H0 for small W.
    return stats.chi2.sf(stats.chi2.ppf(alpha, k) / (1.0 - t), k)


def _trade_off_remove_inverse(alpha: np.ndarray, *, k: float, t: float) -> np.ndarray:
    return stats.chi2.cdf((1.0 - t) * stats.chi2.isf(alpha, k), k)


def _trade_off_add(alpha: np.ndarray, *, k: float, s: float) -> np.ndarray:
    # H0: N(0,1)^k vs H1: N(0,1+s)^k; reject H0 for large W.
    return stats.chi2.cdf(stats.chi2.isf(alpha, k) / (1.0 + s), k)


def _trade_off_add_inverse(alpha: np.ndarray, *, k: float, s: float) -> np.ndarray:
    return stats.chi2.sf((1.0 + s) * stats.chi2.ppf(alpha, k), k)


def _trade_off_min(alpha: np.ndarray, *, k: float, u: float) -> np.ndarray:
    alpha = np.clip(np.asarray(alpha, dtype=float), 0.0, 1.0)
    curves = [
        _trade_off_remove(alpha, k=k, t=u),
        _trade_off_remove_inverse(alpha, k=k, t=u),
        _trade_off_add(alpha, k=k, s=u),
        _trade_off_add_inverse(alpha, k=k, s=u),
    ]
    return np.clip(np.minimum.reduce(curves), 0.0, 1.0)


def gaussmix_trade_off(event: GaussMix) -> TradeOff:
    """The exact f-DP trade-off curve of the worst-case pair (beyond the paper; notes §5 item 12).

    For P = N(0,1)^k, Q = N(0,1−t)^k the Neyman–Pearson test thresholds W = Σzᵢ², so
    T(P, Q)(α) = SF_k(F_k⁻¹(α)/(1−t)); for the add pair (1+s instead of 1−t)
    T(α) = F_k(SF_k⁻¹(α)/(1+s)). The curve returned is the pointwise minimum of both directions and
    their inverses (T(Q, P) = T(P, Q)⁻¹), with t = s = 1/γ: a valid f for the mechanism.

    Args:
        event: a :class:`GaussMix` event.

    Returns:
        A :class:`TradeOff`.

    Raises:
        ValueError: if ``event`` is not a :class:`GaussMix`.
    """
    if not isinstance(event, GaussMix):
        raise ValueError(f"event must be a GaussMix; got {event!r}")
    return TradeOff(
        functools.partial(_trade_off_min, k=float(event.k), u=1.0 / float(event.gamma)),
        description=f"exact trade-off of GaussMix(k={event.k}, gamma={event.gamma:g})",
    )


def gaussmix_privacy_profile(event: GaussMix) -> PrivacyProfile:
    """The exact privacy profile of GaussMix (beyond the paper; notes §5 item 12).

    ``remove`` = :func:`exact_delta_remove` with t = 1/γ, ``add`` = :func:`exact_delta_add` with
    s = 1/γ, ``epsilon_for_delta`` = :func:`exact_epsilon`. t = 1/γ is the largest removal leverage
    Lemma 1 allows (it is attained in the paper's tightness example); s = 1/γ is the largest
    addition leverage when the scale bound holds for the smaller data set, as in the proof of
    Lemma 1. δ(ε) is monotone in the leverage (tests), so the worst case is at the bound.

    Args:
        event: a :class:`GaussMix` event.

    Returns:
        A :class:`PrivacyProfile` (δ values are upper bounds).

    Raises:
        ValueError: if ``event`` is not a :class:`GaussMix`.
    """
    if not isinstance(event, GaussMix):
        raise ValueError(f"event must be a GaussMix; got {event!r}")
    k, u = float(event.k), 1.0 / float(event.gamma)
    return PrivacyProfile(
        remove=functools.partial(_profile_delta, k=k, t=u, add=False),
        add=functools.partial(_profile_delta, k=k, t=u, add=True),
        epsilon_for_delta=functools.partial(_exact_eps_for_delta, k=k, gamma=float(event.gamma)),
        description=f"exact chi-square profile of GaussMix(k={event.k}, gamma={event.gamma:g})",
        discretisation="none (closed form via chi-square tails)",
    )


# --------------------------------------------------------------------------------------------
# Theorem 1 and Algorithm 2 calibration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Theorem1Epsilon:
    """ε̃(η, γ, k, δ) of seed 004 Theorem 1, eq. (2), split into its two pieces.

    ``gaussian_term`` accounts the private λ_min release at δ/3, ``gaussmix_term`` the sketch release
    at δ/3 (Lemma 1 + Prop. 1 on the RDP route, the exact profile on the EXACT route); ``alpha`` is
    the optimising order (NaN on the exact route). ``epsilon`` is their sum (basic composition),
    an upper bound.
    """

    epsilon: float
    gaussian_term: float
    gaussmix_term: float
    alpha: float
    route: AccountingRoute
    gaussian_rule: GaussianTermRule

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["route"] = self.route.value
        out["gaussian_rule"] = self.gaussian_rule.value
        return out


def _gaussian_term(eta: float, delta: float, rule: GaussianTermRule) -> float:
    # δ/3 to the λ_min release; √(2 log(1.25/(δ/3)))/η = √(2 log(3.75/δ))/η (paper App. D).
    classical = math.sqrt(2.0 * math.log(3.75 / delta)) / eta
    if rule is GaussianTermRule.PAPER:
        return classical
    if rule not in (GaussianTermRule.CHECKED, GaussianTermRule.ANALYTIC):
        raise ValueError(f"gaussian_rule must be a GaussianTermRule; got {rule!r}")
    if rule is GaussianTermRule.CHECKED and classical <= 1.0:
        return classical  # within Dwork & Roth Thm A.1's proven range
    analytic = conversions.gdp_epsilon(1.0 / eta, delta / 3.0)
    return analytic if rule is GaussianTermRule.ANALYTIC else max(classical, analytic)


def _theorem1(
    eta: float, gamma: float, k: float, delta: float, route: AccountingRoute, rule: GaussianTermRule
) -> Theorem1Epsilon:
    g = _gaussian_term(eta, delta, rule)
    if route is AccountingRoute.RDP:
        curve = RdpCurve.from_function(
            functools.partial(_phi_for_curve, k=k, gamma=gamma), alpha_max=gamma, description="GaussMix"
        )
        m, alpha = curve.epsilon_and_order(delta / 3.0)
    elif route is AccountingRoute.EXACT:
        m, alpha = _exact_epsilon_unchecked(delta / 3.0, k, gamma), math.nan
    else:
        raise ValueError(f"route must be an AccountingRoute; got {route!r}")
    return Theorem1Epsilon(
        epsilon=conversions.round_up(g + m),
        gaussian_term=g,
        gaussmix_term=m,
        alpha=alpha,
        route=route,
        gaussian_rule=rule,
    )


def theorem1_epsilon(
    *,
    eta: float,
    gamma: float,
    k: int,
    delta: float,
    route: AccountingRoute = AccountingRoute.RDP,
    gaussian_rule: GaussianTermRule = GaussianTermRule.CHECKED,
) -> Theorem1Epsilon:
    """ε̃(η, γ, k, δ) of seed 004 Theorem 1, eq. (2): ModifiedGaussMix (Algorithm 1) is (ε̃, δ)-DP.

    ε̃ = √(2 log(3.75/δ))/η + min_{1<α<γ} {φ(α; k, γ) + [log(3/δ) + (α−1) log(1−1/α) − log α]/(α−1)}.

    The EXACT route replaces the second term by the exact ε at δ/3 (beyond the paper; smaller).
    The default ``gaussian_rule=CHECKED`` equals the paper's first term whenever it is ≤ 1 (its
    proven range, notes §5 item 10) and otherwise the larger of it and the exact Gaussian ε.

    Args:
        eta: noise multiplier of the λ_min release (the paper's Algorithm 2 uses γ/√k), > 0.
        gamma: γ > 5/2.
        k: sketch size ≥ 1.
        delta: δ ∈ (0, 1).
        route: :class:`AccountingRoute`.
        gaussian_rule: :class:`GaussianTermRule`.

    Returns:
        A :class:`Theorem1Epsilon`.

    Raises:
        ValueError: on bad arguments.
    """
    eta = _check_nonneg("eta", eta, strict=True)
    gamma = _check_gamma(gamma, minimum=GAMMA_MIN_THEOREM1)
    k = _check_k(k)
    delta = conversions.check_delta(delta)
    return _theorem1(eta, gamma, float(k), delta, route, gaussian_rule)


def _smallest_gamma(feasible, lower: float, start: float) -> float:
    """Smallest γ > lower with feasible(γ) for a monotone predicate (bisection in log(γ − lower))."""
    if feasible(math.nextafter(lower, math.inf)):
        return math.nextafter(lower, math.inf)
    hi = max(start, lower * 2.0)
    while not feasible(hi):
        hi = lower + 2.0 * (hi - lower)
        if hi > 1e300:
            raise ValueError("no gamma meets the target")
    lo_x, hi_x = math.log(max(1e-300, 1e-15 * lower)), math.log(hi - lower)
    while hi_x - lo_x > 1e-14:
        mid_x = 0.5 * (lo_x + hi_x)
        if feasible(lower + math.exp(mid_x)):
            hi_x = mid_x
        else:
            lo_x = mid_x
    gamma = lower + math.exp(hi_x)
    while not feasible(gamma):  # guard against rounding
        gamma = math.nextafter(gamma, math.inf)
    return gamma


def _calibration_target(epsilon: Any, delta: Any, k: Any) -> tuple[float, float, int]:
    """The checked target (ε > 0, δ) and sketch size k of the γ calibrations."""
    epsilon = conversions.check_epsilon(epsilon)
    if epsilon == 0:
        raise ValueError(f"epsilon must be > 0; got {epsilon!r}")
    return epsilon, conversions.check_delta(delta), _check_k(k)


def calibrate_gamma(
    epsilon: float,
    delta: float,
    *,
    k: int,
    route: AccountingRoute = AccountingRoute.RDP,
) -> float:
    """Smallest γ > 1 such that one GaussMix release is (ε, δ)-DP (Lemma 1 + Prop. 1, or exact).

    The returned γ never undershoots: ε(γ) ≤ target is checked at the returned value. Multiply by
    C_X² to get the required σ² + λ̄_min (Figure 1's y-axis).

    Args:
        epsilon: target ε > 0.
        delta: δ ∈ (0, 1).
        k: sketch size ≥ 1.
        route: :class:`AccountingRoute`.

    Returns:
        The smallest feasible γ (to ~1e-14 relative), on the feasible side.

    Raises:
        ValueError: on bad arguments.
    """
    epsilon, delta, k = _calibration_target(epsilon, delta, k)

    def feasible(gamma: float) -> bool:
        return gaussmix_epsilon(GaussMix(k=k, gamma=gamma), delta, route=route) <= epsilon

    if route not in (AccountingRoute.RDP, AccountingRoute.EXACT):
        raise ValueError(f"route must be an AccountingRoute; got {route!r}")
    return _smallest_gamma(feasible, 1.0, 10.0)


def calibrate_gamma_linear_mixing(
    epsilon: float,
    delta: float,
    *,
    k: int,
    route: AccountingRoute = AccountingRoute.RDP,
    eta_factor: float = 1.0,
    gaussian_rule: GaussianTermRule = GaussianTermRule.CHECKED,
) -> float:
    """Algorithm 2, line 1 of seed 004: the smallest γ > 5/2 with ε̃(η, γ, k, δ) ≤ ε, η = eta_factor·γ/√k.

    ``eta_factor=1`` is the paper; ``eta_factor=2`` reproduces the public code's units (C² = 2 folded
    into η; notes §6). ε̃ decreases in γ, so bisection finds the boundary; the returned γ is checked
    to satisfy the target. If γ → 5/2⁺ already satisfies it, the next float above 5/2 is returned.

    Args:
        epsilon: target ε > 0.
        delta: δ ∈ (0, 1).
        k: sketch size ≥ 1.
        route: :class:`AccountingRoute` for the GaussMix term.
        eta_factor: η = eta_factor · γ/√k.
        gaussian_rule: :class:`GaussianTermRule` for the λ_min term.

    Returns:
        The smallest feasible γ > 5/2, on the feasible side.

    Raises:
        ValueError: on bad arguments.
    """
    epsilon, delta, k = _calibration_target(epsilon, delta, k)
    eta_factor = _check_nonneg("eta_factor", eta_factor, strict=True)
    if route not in (AccountingRoute.RDP, AccountingRoute.EXACT):
        raise ValueError(f"route must be an AccountingRoute; got {route!r}")
    if not isinstance(gaussian_rule, GaussianTermRule):
        raise ValueError(f"gaussian_rule must be a GaussianTermRule; got {gaussian_rule!r}")
    sqrt_k = math.sqrt(k)

    def feasible(gamma: float) -> bool:
        return _theorem1(eta_factor * gamma / sqrt_k, gamma, float(k), delta, route, gaussian_rule).epsilon <= epsilon

    return _smallest_gamma(feasible, GAMMA_MIN_THEOREM1, 10.0)


def _theorem1_eps_for_delta(
    delta: float, *, eta: float, gamma: float, k: float, route: AccountingRoute, rule: GaussianTermRule
) -> float:
    return _theorem1(eta, gamma, k, conversions.check_delta(delta), route, rule).epsilon


_THEOREM1_GRID = np.linspace(math.log(1e-30), math.log(1.0 - 1e-9), 400)


@functools.lru_cache(maxsize=32)
def _theorem1_grid(eta: float, gamma: float, k: float, route: AccountingRoute, rule: GaussianTermRule) -> np.ndarray:
    """ε̃(δ) on the log-δ grid (non-increasing in δ), cached for vectorised δ(ε) queries."""
    return np.array([_theorem1(eta, gamma, k, math.exp(ld), route, rule).epsilon for ld in _THEOREM1_GRID])


def _theorem1_delta(
    epsilons: np.ndarray, *, eta: float, gamma: float, k: float, route: AccountingRoute, rule: GaussianTermRule
) -> np.ndarray:
    """δ(ε) implied by ε̃(δ): the smallest δ with ε̃(δ) ≤ ε, rounded up (an upper bound).

    Up to 4 values are solved by root finding on log δ; longer vectors (plots, trade-off curves) use
    the smallest δ of a cached 400-point log grid with ε̃(δ) ≤ ε, which is pessimistic by at most
    one grid step (δ ratio ≈ 1.19) and floors δ at 1e-30.
    """
    eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
    out = np.ones(eps.shape)
    if eps.size > 4:
        grid_eps = _theorem1_grid(eta, gamma, k, route, rule)
        ok = grid_eps[None, :] <= eps[:, None]
        first = np.argmax(ok, axis=1)
        found = ok.any(axis=1)
        out[found] = np.exp(_THEOREM1_GRID[first[found]]) * (1 + 1e-12)
        return np.minimum(out, 1.0)
    for i, e in enumerate(eps):

        def f(log_d: float, e: float = e) -> float:
            return _theorem1(eta, gamma, k, math.exp(log_d), route, rule).epsilon - e

        lo, hi = math.log(1e-300), math.log(1.0 - 1e-12)
        if f(hi) > 0:
            continue  # even δ → 1 is not enough
        if f(lo) <= 0:
            out[i] = 1e-300
            continue
        root = optimize.brentq(f, lo, hi, xtol=1e-12)
        while f(root) > 0:
            root += 1e-12
        out[i] = conversions.round_up(math.exp(root))
    return out


def modified_gaussmix_privacy_profile(
    event: ModifiedGaussMix,
    *,
    route: AccountingRoute = AccountingRoute.RDP,
    gaussian_rule: GaussianTermRule = GaussianTermRule.CHECKED,
) -> PrivacyProfile:
    """Theorem 1 of seed 004 as a privacy profile: (ε̃(δ), δ) for every δ, with δ(ε) by inversion.

    Not the exact profile of a single pair; a valid (ε, δ) curve. Compose it under basic
    composition only (it is not RDP).

    Args:
        event: a :class:`ModifiedGaussMix` event.
        route: :class:`AccountingRoute` for the GaussMix term.
        gaussian_rule: :class:`GaussianTermRule` for the λ_min term.

    Returns:
        A :class:`PrivacyProfile` with ``epsilon_for_delta`` = ε̃(δ).

    Raises:
        ValueError: if ``event`` is not a :class:`ModifiedGaussMix`.
    """
    if not isinstance(event, ModifiedGaussMix):
        raise ValueError(f"event must be a ModifiedGaussMix; got {event!r}")
    kwargs = {"eta": float(event.eta), "gamma": float(event.gamma), "k": float(event.k), "route": route}
    return PrivacyProfile(
        remove=functools.partial(_theorem1_delta, rule=gaussian_rule, **kwargs),
        epsilon_for_delta=functools.partial(_theorem1_eps_for_delta, rule=gaussian_rule, **kwargs),
        description=(
            f"Theorem 1 of seed 004 for ModifiedGaussMix(k={event.k}, gamma={event.gamma:g}, eta={event.eta:g}), "
            f"GaussMix term by the {route.value} route"
        ),
    )


# --------------------------------------------------------------------------------------------
# Exact per-instance divergence
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PerInstanceDivergence:
    """Exact Rényi divergences for zeroing each row (seed 004 App. B, eq. (6)).

    ``leverage[i]`` = tᵢ = xᵢᵀ(XᵀX + σ²I)⁻¹xᵢ. ``remove[i]`` = D_α(M(X) ‖ M(X₋ᵢ)) and ``add[i]`` =
    D_α(M(X₋ᵢ) ‖ M(X)) (leverage t′ = t/(1−t) w.r.t. the zeroed data set). Data-dependent: useful
    for audits, not itself a DP guarantee.
    """

    alpha: float
    k: int
    sigma: float
    leverage: np.ndarray
    remove: np.ndarray
    add: np.ndarray

    @property
    def maximum(self) -> float:
        """max over rows and both directions."""
        return float(max(self.remove.max(initial=0.0), self.add.max(initial=0.0)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "k": self.k,
            "sigma": self.sigma,
            "leverage": self.leverage.tolist(),
            "remove": self.remove.tolist(),
            "add": self.add.tolist(),
            "maximum": self.maximum,
        }


def ridge_leverage(data: np.ndarray, *, sigma: float) -> np.ndarray:
    """tᵢ = xᵢᵀ(XᵀX + σ²I)⁻¹xᵢ for every row (ridge leverage scores, ridge parameter σ²).

    Args:
        data: the n×d matrix X.
        sigma: σ ≥ 0.

    Returns:
        The n leverages.

    Raises:
        ValueError: data not a finite 2-D array, or σ² = 0 with a singular XᵀX.
    """
    x = np.asarray(data, dtype=float)
    if x.ndim != 2 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"data must be a finite non-empty 2-D array; got shape {np.shape(data)!r}")
    sigma = _check_nonneg("sigma", sigma)
    gram = x.T @ x + sigma * sigma * np.eye(x.shape[1])
    try:
        chol = np.linalg.cholesky(gram)
    except np.linalg.LinAlgError:
        raise ValueError(f"X^T X + sigma^2 I must be positive definite; got sigma={sigma!r}") from None
    half = np.linalg.solve(chol, x.T)
    return np.einsum("ij,ij->j", half, half)


def per_instance_divergence(data: np.ndarray, *, sigma: float, k: int, alpha: float) -> PerInstanceDivergence:
    """Exact D_α for zeroing each row of ``data``, both directions (seed 004 App. B eq. (6); notes §1.4).

    remove: k/(2(α−1)) [α log(1−t) − log(1−αt)] (+∞ for αt ≥ 1) = φ(α; k, 1/t);
    add:    k/(2(α−1)) [α log(1+t′) − log(1+αt′)], t′ = t/(1−t).

    Args:
        data: the n×d matrix X.
        sigma: GaussMix noise σ ≥ 0 (σ = 0 needs XᵀX invertible).
        k: sketch size.
        alpha: Rényi order > 1.

    Returns:
        A :class:`PerInstanceDivergence`.

    Raises:
        ValueError: on bad arguments.
    """
    k = _check_k(k)
    alpha_f = float(alpha)
    if not alpha_f > 1:
        raise ValueError(f"alpha must be > 1; got {alpha!r}")
    lev = ridge_leverage(data, sigma=sigma)
    remove = np.empty(lev.shape)
    add = np.empty(lev.shape)
    for i, t in enumerate(lev):
        if t <= 0:
            remove[i] = add[i] = 0.0
            continue
        t = min(float(t), 1.0 - 1e-16)
        remove[i] = float(_phi_unchecked(np.array(alpha_f), float(k), 1.0 / t)) if alpha_f * t < 1 else math.inf
        add[i] = float(phi_add(alpha_f, k, t / (1.0 - t)))
    return PerInstanceDivergence(alpha=alpha_f, k=k, sigma=float(sigma), leverage=lev, remove=remove, add=add)


# --------------------------------------------------------------------------------------------
# Spec builders and registration
# --------------------------------------------------------------------------------------------


def _spec_number(table: dict, key: str) -> Any:
    if key not in table:
        raise ValueError(f"{key} is required; got table keys {sorted(table)!r}")
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number; got {value!r}")
    return value


def _check_spec_keys(table: dict, allowed: set[str]) -> None:
    extra = set(table) - allowed - {"type"}
    if extra:
        raise ValueError(f"unknown key(s) {sorted(extra)!r}; allowed: {sorted(allowed)!r}")


def _build_gaussmix(table: dict) -> ev.Event:
    """``gaussmix``: ``k`` and either ``gamma`` or (``sigma``, ``row_bound``, ``lambda_min_bound``); ``count``."""
    _check_spec_keys(table, {"k", "gamma", "sigma", "row_bound", "lambda_min_bound", "count"})
    k = _spec_number(table, "k")
    if "gamma" in table:
        if any(key in table for key in ("sigma", "row_bound", "lambda_min_bound")):
            raise ValueError(f"give either gamma or (sigma, row_bound, lambda_min_bound); got {table!r}")
        event = GaussMix(k=k, gamma=_spec_number(table, "gamma"))
    else:
        event = GaussMix.from_noise(
            k=k,
            sigma=_spec_number(table, "sigma"),
            row_bound=_spec_number(table, "row_bound"),
            lambda_min_bound=table.get("lambda_min_bound", 0.0),
        )
    return spec_count(table, event)


def _build_modified_gaussmix(table: dict) -> ev.Event:
    """``modified_gaussmix``: ``k``, ``gamma``, ``eta``; optional ``count``."""
    _check_spec_keys(table, {"k", "gamma", "eta", "count"})
    event = ModifiedGaussMix(
        k=_spec_number(table, "k"), gamma=_spec_number(table, "gamma"), eta=_spec_number(table, "eta")
    )
    return spec_count(table, event)


SPEC_TYPES = {"gaussmix": _build_gaussmix, "modified_gaussmix": _build_modified_gaussmix}


def _register_interpreters() -> None:
    """Register on the core singledispatch interpreters when they exist (lazily safe)."""
    try:
        from dplens.accountant import rdp
    except ImportError:  # pragma: no cover - core not present
        rdp = None
    if rdp is not None and hasattr(rdp, "rdp_curve"):
        rdp.rdp_curve.register(GaussMix)(gaussmix_rdp_curve)
    try:
        from dplens.accountant import pld
    except ImportError:  # pragma: no cover
        pld = None
    if pld is not None and hasattr(pld, "privacy_profile"):
        pld.privacy_profile.register(GaussMix)(gaussmix_privacy_profile)
        # The accountant's route is the tighter valid one: Theorem 1 with the exact χ² GaussMix term at δ/3.
        pld.privacy_profile.register(ModifiedGaussMix)(
            functools.partial(modified_gaussmix_privacy_profile, route=AccountingRoute.EXACT)
        )


_register_interpreters()
