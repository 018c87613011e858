"""ν-DP-FTRL and matrix-factorisation accounting (seed 001): coefficients, sensitivity γ_T, exact μ-GDP.

Choquette-Choo, Dvijotham, Pillutla, Ganesh, Steinke, Thakurta, "Correlated Noise Provably Beats Independent Noise
for Differentially Private Learning" (ICLR 2024, arXiv 2310.06771; seed ``001_6e3291576b7ab1ed.txt``, a summary
page only). Implementation notes in ``research/corrdp-and-dp-ftrl.md`` Part B, cited below as "note §B…".

The mechanism (note §B2): θ_{t+1} = θ_t − η (g_t + Σ_{τ≤t} β_τ w_{t−τ}) with w_t ~ N(0, σ² G² I) i.i.d. and g_t the
sum of clipped gradients (clip norm G). Stacking the T steps, the noisy gradients are G_mat + B W with B the
lower-triangular Toeplitz *noising* matrix B_{t,τ} = β_{t−τ}; since G_mat + B W = B (C G_mat + W) with the *strategy*
C = B⁻¹, the whole run is one Gaussian mechanism on the linear query C G_mat followed by post-processing. Hence:

- the ℓ2-sensitivity is G times the largest column norm of **C = B⁻¹** (not of B; note §B6.1), which for a single
  participation and Toeplitz C is γ_T = ‖(c_0, …, c_{T−1})‖₂ (Theorem 1.1, note §B3.1);
- the run is **exactly μ-GDP with μ = sensitivity / σ** (the Gaussian mechanism; Dong, Roth, Su 2022 Thm 2.7), so
  ε(δ) is the exact GDP curve, not the looser zCDP conversion. Theorem 1.1's ρ-zCDP statement is the same fact
  with ρ = μ²/2 (note §B3.2; the Bun–Steinke conversion overstates ε by 20–40 %, note §B3.4, F4).

ν-DP-FTRL coefficients (note §B2, [X]-corroborated, the paper's formula is not in the seed):
β^ν_t = (−1)^t binom(1/2, t) (1 − ν)^t, the coefficients of (1 − (1 − ν) z)^{1/2}, and the inverse (strategy)
coefficients c^ν_k = binom(2k, k) 4^{−k} (1 − ν)^k of (1 − (1 − ν) z)^{−1/2}. ν = 1 is DP-SGD (B = I, γ ≡ 1), ν = 0
the square-root factorisation of Fichtenberger, Henzinger, Upadhyay 2023 (γ_T² ~ ln T/π, not anytime). For ν > 0,
γ_∞² = ₂F₁(½, ½; 1; (1 − ν)²) = (2/π) K(m = (1 − ν)²), K the complete elliptic integral of the first kind with
*parameter* m (note §B3.3; ``scipy.special.ellipk`` takes the parameter).

Adjacency (note §B3.5, §B6.5) is explicit on every public entry point: zero-out (``REPLACE_SPECIAL``, the paper's
Appendix A.2, default) and add/remove give G·γ; **replace-one doubles it** (2G·γ, i.e. ρ × 4).

Several participations (note §B3.6, §B6.6): if a record takes part in at most k steps, any two at least b apart, and C
is Toeplitz with non-negative, non-increasing coefficients, the sensitivity is ‖Σ_{j<k} C_{:, jb}‖₂ (Kalinin & Lampert
2024, Theorem 2, as cited by jax_privacy's ``minsep_sensitivity_squared``; the argument is repeated in
:func:`minsep_sensitivity`). Reusing the single-participation γ_T there under-noises by up to √k.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import linalg, signal, special

from dplens.accountant import conversions
from dplens.accountant import events as ev
from dplens.accountant.curves import Gdp, PrivacyProfile, RdpCurve

__all__ = [
    "SPEC_TYPES",
    "DpFtrl",
    "FactorKind",
    "FtrlAccounting",
    "LogCoefficients",
    "adjacency_factor",
    "dp_ftrl_accounting",
    "dp_ftrl_privacy_profile",
    "dp_ftrl_rdp_curve",
    "gamma_infinity",
    "inverse_toeplitz_coefficients",
    "log_noising_coefficients",
    "log_strategy_coefficients",
    "matrix_sensitivity",
    "minsep_sensitivity",
    "noise_multiplier_for_epsilon",
    "noising_coefficients",
    "nu_ftrl_gamma",
    "nu_ftrl_gamma_curve",
    "nu_ftrl_sensitivity",
    "participation_schedule",
    "strategy_coefficients",
    "toeplitz_sensitivity",
]

#: Coefficients are generated in chunks of this many terms, so γ_T for any T needs bounded memory.
_CHUNK = 1 << 20
#: ν = 0: terms summed exactly; beyond, a rigorous digamma upper bound on the tail (see _sum_strategy_squares).
_EXACT_TERMS = 1 << 22
#: Relative margin added to every sensitivity used in a guarantee. The log-space recursion and the sums are
#: accurate to ~1e-12 relative (measured against mpmath in the tests); this keeps μ on the pessimistic side.
_SENSITIVITY_MARGIN = 1e-10
#: Largest T for the dense general-matrix route (it forms B⁻¹: O(T²) memory, O(T³) time).
_MAX_DENSE_STEPS = 8192


class FactorKind(enum.Enum):
    """Which factor of a matrix-factorisation mechanism the user supplies.

    NOISING: the paper's B (noise correlation, z = B w); the sensitivity uses the columns of B⁻¹.
    STRATEGY: C = B⁻¹ (jax_privacy's "strategy"/encoder); the sensitivity uses the columns of C directly.
    """

    NOISING = "noising"
    STRATEGY = "strategy"


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _check_nu(nu: Any) -> float:
    ok = isinstance(nu, int | float | np.floating) and not isinstance(nu, bool) and 0 <= nu <= 1
    if not ok:
        raise ValueError(f"nu must be a number in [0, 1]; got {nu!r}")
    return float(nu)


def _check_int(name: str, value: Any, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _check_steps(steps: Any, *, allow_inf: bool = False) -> int | float:
    if allow_inf and isinstance(steps, float) and math.isinf(steps) and steps > 0:
        return math.inf
    return _check_int("steps", steps)


def _check_relation(neighboring: Any) -> ev.NeighboringRelation:
    if not isinstance(neighboring, ev.NeighboringRelation):
        raise ValueError(f"neighboring must be a NeighboringRelation; got {neighboring!r}")
    return neighboring


def adjacency_factor(neighboring: ev.NeighboringRelation) -> int:
    """Sensitivity multiplier of the neighbouring relation for a sum of clipped gradients (note §B3.5).

    Zero-out (``REPLACE_SPECIAL``, the paper's Appendix A.2) and add/remove change each participating step's sum by
    one clipped gradient (norm ≤ G): factor 1. Replace-one swaps one clipped gradient for another: ‖g − g′‖ ≤ 2G,
    factor 2 (so ρ = μ²/2 grows 4×).
    """
    relation = _check_relation(neighboring)
    return 2 if relation is ev.NeighboringRelation.REPLACE_ONE else 1


# --------------------------------------------------------------------------------------------
# Coefficients (log space)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogCoefficients:
    """Signed coefficients in log space: value_k = sign_k · exp(log_abs_k) (log_abs = −∞ for exact zeros)."""

    log_abs: np.ndarray
    sign: np.ndarray

    def values(self) -> np.ndarray:
        """The coefficients as floats (tiny ones underflow to 0, which is harmless for sums of squares)."""
        return self.sign * np.exp(self.log_abs)

    def to_dict(self) -> dict[str, list[float]]:
        return {"log_abs": self.log_abs.tolist(), "sign": self.sign.tolist()}


def _log_binomial_part(start: int, stop: int, previous: float) -> np.ndarray:
    """log(binom(2k, k)/4^k) for k in [start, stop), given its value at start − 1 (the recursion
    c_k = c_{k−1}(2k − 1)/(2k), summed in log space: accurate to ~1e-12 relative for k ≤ 1e7)."""
    k = np.arange(max(start, 1), stop, dtype=float)
    steps = np.cumsum(np.log1p(-0.5 / k))
    if start == 0:
        return np.concatenate([[0.0], steps])
    return previous + steps


def _iter_log_strategy(nu: float, steps: int | float, chunk: int = _CHUNK) -> Iterator[np.ndarray]:
    """log c^ν_k for k = 0 … steps − 1 in chunks (steps may be inf: the iterator is then endless)."""
    log_damping = math.log1p(-nu) if nu < 1 else -math.inf
    start, previous = 0, 0.0
    while start < steps:
        stop = int(min(start + chunk, steps))
        log_binom = _log_binomial_part(start, stop, previous)
        previous = float(log_binom[-1])
        k = np.arange(start, stop, dtype=float)
        if nu < 1:
            yield log_binom + k * log_damping
        else:  # ν = 1: c = e₀ (DP-SGD); avoid 0·(−∞)
            yield np.where(k == 0, 0.0, -np.inf)
        start = stop


def log_strategy_coefficients(nu: float, steps: int) -> np.ndarray:
    """log c^ν_k, k = 0 … steps − 1: the Toeplitz coefficients of C = B⁻¹, generating function (1 − (1 − ν)z)^{−1/2}.

    c^ν_k = binom(2k, k)/4^k · (1 − ν)^k (note §B2 [D,V]); all positive and non-increasing (the min-separation
    formula needs that). ν = 0: 1, 1/2, 3/8, 5/16, 35/128, … (note F1). Computed by the stable recursion in log space
    (note §B6.9), −∞ for the exact zeros at ν = 1.
    """
    nu = _check_nu(nu)
    steps = _check_int("steps", steps)
    return np.concatenate(list(_iter_log_strategy(nu, steps)))


def strategy_coefficients(nu: float, steps: int) -> np.ndarray:
    """c^ν_k = binom(2k, k)/4^k (1 − ν)^k for k < steps (see :func:`log_strategy_coefficients`)."""
    return np.exp(log_strategy_coefficients(nu, steps))


def log_noising_coefficients(nu: float, steps: int) -> LogCoefficients:
    """β^ν_t = (−1)^t binom(1/2, t) (1 − ν)^t, t < steps, in log space (note §B2; the paper's ν-DP-FTRL noise).

    Generating function (1 − (1 − ν)z)^{1/2}. From the two recursions β_t = β_{t−1}(t − 3/2)/t·(1 − ν) and
    c_t = c_{t−1}(t − 1/2)/t·(1 − ν), β_t = −c_t/(2t − 1) for t ≥ 1: every term after β_0 = 1 is negative
    (anti-correlated noise). ν = 0: 1, −1/2, −1/8, −1/16, −5/128, … (note F1, = jax_privacy's
    ``optimal_max_error_noising_coefs``).
    """
    log_c = log_strategy_coefficients(nu, steps)
    t = np.arange(steps, dtype=float)
    log_abs = log_c - np.log(np.maximum(2 * t - 1, 1.0))
    sign = np.where(t == 0, 1.0, -1.0)
    sign = np.where(np.isneginf(log_abs), 0.0, sign)
    return LogCoefficients(log_abs=log_abs, sign=sign)


def noising_coefficients(nu: float, steps: int) -> np.ndarray:
    """β^ν_t as floats (see :func:`log_noising_coefficients`)."""
    return log_noising_coefficients(nu, steps).values()


def inverse_toeplitz_coefficients(
    coefficients: Sequence[float] | np.ndarray, *, steps: int | None = None
) -> np.ndarray:
    """Coefficients of the inverse of a lower-triangular Toeplitz matrix (power-series reciprocal), ``steps`` terms.

    The inverse of the Toeplitz matrix with first column a is Toeplitz with first column the first ``steps``
    coefficients of 1/a(z): the recursion x_k = −(Σ_{j=1}^{k} a_j x_{k−j})/a_0, evaluated as the impulse response of
    the IIR filter 1/a(z) (``scipy.signal.lfilter``, O(steps · len(a))). Use it for truncated or banded β, whose
    inverse — and hence γ — differs from the untruncated one (note §B6.4, F6).
    """
    a = np.asarray(coefficients, dtype=float)
    if a.ndim != 1 or a.size == 0 or not np.all(np.isfinite(a)) or a[0] == 0:
        raise ValueError(f"coefficients must be a finite 1-D array with a nonzero first entry; got {coefficients!r}")
    n = a.size if steps is None else _check_int("steps", steps)
    impulse = np.zeros(n)
    impulse[0] = 1.0
    out = signal.lfilter([1.0], np.trim_zeros(a, "b"), impulse)
    if not np.all(np.isfinite(out)):
        raise ValueError(f"the inverse of coefficients overflows within {n} steps; got {coefficients!r}")
    return out


# --------------------------------------------------------------------------------------------
# Sensitivity
# --------------------------------------------------------------------------------------------


def gamma_infinity(nu: float) -> float:
    """γ_∞ = √((2/π) K(m = (1 − ν)²)) for ν > 0 (note §B3.3 [D,V]); +∞ for ν = 0 (γ_T² ~ ln T/π).

    Σ_k c_k² = Σ_k binom(2k, k)² 16^{−k} x^k at x = (1 − ν)² is ₂F₁(½, ½; 1; x) = (2/π) K(x) (DLMF 15.4.27 with the
    parameter convention of ``scipy.special.ellipk``). Bounded, so σ can be fixed without knowing T ("anytime").
    """
    nu = _check_nu(nu)
    if nu == 0:
        return math.inf
    return math.sqrt(2.0 / math.pi * float(special.ellipk((1.0 - nu) ** 2)))


def _sum_strategy_squares(nu: float, steps: int | float) -> float:
    """Σ_{k<steps} (c^ν_k)², chunked; for ν > 0 the sum stops once a rigorous tail bound is negligible.

    For k ≥ K, c_k ≤ c_K (1 − ν)^{k−K} (the binomial factor is non-increasing), so Σ_{k≥K} c_k² ≤ c_K²/(1 − (1 − ν)²);
    that bound is *added* when the sum stops early, so the result stays an upper bound on Σ_{k<steps} c_k².
    """
    if nu == 1:
        return 1.0
    if nu == 0 and steps > _EXACT_TERMS:
        # Watson's inequality Γ(k + 1)/Γ(k + ½) > √(k + ¼) gives c_k² < 1/(π(k + ¼)), so the tail beyond K is at most
        # Σ_{K ≤ k < T} 1/(π(k + ¼)) = (ψ(T + ¼) − ψ(K + ¼))/π: an upper bound, within (1/π − ¼)/(πK) ≈ 5e-9 of the
        # exact tail (the matching lower bound c_k² ≥ 1/(π(k + 1/π))). O(K) work for any T.
        head = _sum_strategy_squares(0.0, _EXACT_TERMS)
        tail = (float(special.digamma(steps + 0.25)) - float(special.digamma(_EXACT_TERMS + 0.25))) / math.pi
        return head + tail
    total = 0.0
    ratio = (1.0 - nu) ** 2
    one_minus_ratio = nu * (2.0 - nu)  # 1 − (1 − ν)², without cancellation
    for log_c in _iter_log_strategy(nu, steps):
        squares = np.exp(2.0 * log_c)
        total += float(np.sum(squares))
        if one_minus_ratio > 0 and log_c.size:
            tail_bound = math.exp(2.0 * float(log_c[-1])) * ratio / one_minus_ratio
            if tail_bound <= 1e-18 * total:
                return total + tail_bound
    if math.isinf(steps):  # pragma: no cover - ν = 0 with T = ∞ is rejected before
        return math.inf
    return total


@functools.lru_cache(maxsize=256)
def _nu_gamma_cached(nu: float, steps: int | float) -> float:
    if math.isinf(steps):
        return gamma_infinity(nu)
    return math.sqrt(_sum_strategy_squares(nu, steps))


def nu_ftrl_gamma(nu: float, steps: int | float) -> float:
    """γ_T(B) of ν-DP-FTRL (single participation, per unit clip norm): Theorem 1.1 of the paper.

    γ_T(B) = max_{t<T} ‖(B⁻¹)_{:,t}‖₂. Column t of the Toeplitz C = B⁻¹ holds c_0 … c_{T−1−t}, a prefix, so the
    maximum is column 0: γ_T² = Σ_{k=0}^{T−1} c_k² (note §B3.1; T terms from k = 0, note §B6.2). ``steps = math.inf``
    (ν > 0) gives the elliptic closed form :func:`gamma_infinity`. O(min(T, 40/ν)) time (ν > 0: the sum stops with a
    rigorous tail bound once converged), O(min(T, 2²⁰)) memory; T = 10⁶ in about 0.1 s. For ν = 0 and T > 2²², the
    tail is bounded above in closed form (digamma; relative excess < 1e-9), so any T is O(1)-ish. Reference values:
    note F2 (e.g. ν = 0, T = 1000 → 1.806932).
    """
    nu = _check_nu(nu)
    steps = _check_steps(steps, allow_inf=True)
    if nu == 0 and math.isinf(steps):
        raise ValueError(f"steps must be finite for nu = 0 (gamma_T grows like sqrt(ln T / pi)); got {steps!r}")
    return _nu_gamma_cached(nu, steps)


def nu_ftrl_gamma_curve(nu: float, steps: Sequence[int] | np.ndarray) -> np.ndarray:
    """γ_T for every T in ``steps`` at once (one cumulative sum up to max T; ``inf`` entries → γ_∞, ν > 0)."""
    nu = _check_nu(nu)
    grid = np.asarray(steps, dtype=float)
    if grid.ndim != 1 or grid.size == 0 or np.any(np.isnan(grid)) or np.any(grid < 1):
        raise ValueError(f"steps must be a non-empty 1-D sequence of values >= 1; got {steps!r}")
    finite = np.isfinite(grid)
    if np.any(grid[finite] != np.floor(grid[finite])):
        raise ValueError(f"steps must be integers (or inf); got {steps!r}")
    if nu == 0 and not np.all(finite):
        raise ValueError(f"steps must be finite for nu = 0; got {steps!r}")
    out = np.empty_like(grid)
    if np.any(finite):
        top = int(grid[finite].max())
        cumulative = np.cumsum(np.exp(2.0 * log_strategy_coefficients(nu, top)))
        out[finite] = np.sqrt(cumulative[grid[finite].astype(np.int64) - 1])
    if not np.all(finite):
        out[~finite] = gamma_infinity(nu)
    return out


def toeplitz_sensitivity(strategy: Sequence[float] | np.ndarray) -> float:
    """Max column norm of the lower-triangular Toeplitz C with first column ``strategy`` (any signs): ‖strategy‖₂.

    Every column of C is a prefix of the first one, so the first column has the largest norm.
    """
    c = np.asarray(strategy, dtype=float)
    if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)):
        raise ValueError(f"strategy must be a non-empty finite 1-D array; got {strategy!r}")
    return float(np.linalg.norm(c))


def participation_schedule(
    steps: int, *, epochs: int | None = None, min_separation: int | None = None
) -> tuple[int, int]:
    """(k, b): the maximum number of participations of one record and their minimum separation.

    - neither given: one participation (k = 1; b is irrelevant and returned as ``steps``);
    - ``min_separation`` b only: k = ⌈T/b⌉ (b-min-separation, Kalinin & Lampert 2024);
    - ``epochs`` k only: b = 1, i.e. **no separation assumed** (sound for any data order, e.g. reshuffled epochs);
      pass ``min_separation = steps // epochs`` for a fixed cyclic order;
    - both: k = min(epochs, ⌈T/b⌉).
    """
    steps = _check_int("steps", steps)
    if epochs is not None:
        epochs = _check_int("epochs", epochs)
        if epochs > steps:
            raise ValueError(f"epochs must be <= steps (one participation per step at most); got epochs={epochs!r}")
    if min_separation is not None:
        min_separation = _check_int("min_separation", min_separation)
    if epochs is None and min_separation is None:
        return 1, steps
    b = 1 if min_separation is None else min_separation
    most = -(-steps // b)
    k = most if epochs is None else min(epochs, most)
    return k, b


def minsep_sensitivity(
    strategy: Sequence[float] | np.ndarray, *, min_separation: int, participations: int | None = None
) -> float:
    """Sensitivity of a Toeplitz strategy when a record takes part ≤ k times, any two ≥ b steps apart.

    sens = ‖Σ_{j<k} C_{:, j b}‖₂ for C lower-triangular Toeplitz with first column c, c non-negative and
    non-increasing (Kalinin & Lampert 2024, Theorem 2; note §B3.6 [X]). Why: with per-participation gradient
    differences u_j (‖u_j‖ ≤ 1) at steps p_0 < … < p_{k−1}, ‖Σ_j C_{:,p_j} u_jᵀ‖_F² ≤ Σ_{i,j} (CᵀC)_{p_i p_j} because
    CᵀC ≥ 0 entrywise, with equality for equal u_j. (CᵀC)_{p q} = Σ_{s ≤ T−1−max(p,q)} c_s c_{s+|p−q|} decreases in
    max(p, q) and in |p − q|; since p_j ≥ j b and |p_i − p_j| ≥ |i − j| b, every entry is at most the one of the
    pattern 0, b, 2b, …, which is therefore the worst case (and more participations never decrease the sum).

    ``participations`` defaults to ⌈T/b⌉ (the most that fit); T = len(strategy). O(T): the columns j b are summed
    by a cumulative sum over a (T/b) × b reshape.

    Raises:
        ValueError: the coefficients are negative or increasing somewhere (the theorem does not apply: e.g. the
            inverse of a truncated β, note §B6.4).
    """
    c = np.asarray(strategy, dtype=float)
    if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)):
        raise ValueError(f"strategy must be a non-empty finite 1-D array; got {strategy!r}")
    steps = c.size
    b = _check_int("min_separation", min_separation)
    most = -(-steps // b)
    k = most if participations is None else min(_check_int("participations", participations), most)
    scale = max(float(c[0]), 1e-300)
    if np.any(c < 0) or np.any(np.diff(c) > 1e-14 * scale):
        raise ValueError(
            "strategy must be non-negative and non-increasing for the min-separation formula "
            f"(Kalinin & Lampert 2024 Thm 2); got min={c.min()!r}, max increase={float(np.diff(c).max(initial=0)):.3g}"
        )
    return _minsep_norm(c, b, k)


def _minsep_norm(c: np.ndarray, b: int, k: int) -> float:
    steps = c.size
    if k == 1:
        return float(np.linalg.norm(c))
    rows = -(-steps // b)
    padded = np.zeros(rows * b)
    padded[:steps] = c
    cumulative = np.cumsum(padded.reshape(rows, b), axis=0)  # row r: Σ_{j≤r} c[(r−j)b + s]
    if k < rows:
        cumulative[k:] -= cumulative[:-k].copy()  # keep only the k most recent participations
    return float(np.linalg.norm(cumulative.ravel()[:steps]))


@functools.lru_cache(maxsize=256)
def _nu_minsep_cached(nu: float, steps: int, k: int, b: int) -> float:
    return _minsep_norm(strategy_coefficients(nu, steps), b, k)


def nu_ftrl_sensitivity(
    nu: float,
    steps: int | float,
    *,
    epochs: int | None = None,
    min_separation: int | None = None,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.REPLACE_SPECIAL,
) -> float:
    """ℓ2-sensitivity of a ν-DP-FTRL run per unit clip norm: adjacency factor × (γ_T or the min-sep norm).

    Single participation: γ_T (:func:`nu_ftrl_gamma`, ``steps = math.inf`` allowed for ν > 0). Several
    (``epochs`` / ``min_separation``, see :func:`participation_schedule`): :func:`minsep_sensitivity` on c^ν, which
    is non-negative and non-increasing (note F5: ν = 0, T = 1000, b = 100, k = 10 → 9.154043). Replace-one doubles
    it (:func:`adjacency_factor`).
    """
    nu = _check_nu(nu)
    factor = adjacency_factor(neighboring)
    if epochs is None and min_separation is None:
        return factor * nu_ftrl_gamma(nu, steps)
    steps = _check_int("steps", steps)
    k, b = participation_schedule(steps, epochs=epochs, min_separation=min_separation)
    if k == 1:
        return factor * nu_ftrl_gamma(nu, steps)
    return factor * _nu_minsep_cached(nu, steps, k, b)


def matrix_sensitivity(
    matrix: Sequence[Sequence[float]] | np.ndarray,
    *,
    kind: FactorKind = FactorKind.NOISING,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.REPLACE_SPECIAL,
) -> float:
    """Single-participation sensitivity of a general matrix-factorisation mechanism (per unit clip norm).

    max_t ‖(B⁻¹)_{:,t}‖₂ for a user-supplied lower-triangular noising matrix B (Theorem 1.1; Denisov et al. 2022),
    or max_t ‖C_{:,t}‖₂ for a strategy C (``kind=FactorKind.STRATEGY``), times :func:`adjacency_factor`. B⁻¹ is
    obtained by a triangular solve (``scipy.linalg.solve_triangular``; O(T³), T ≤ 8192). Several participations for a
    general (non-Toeplitz) factor need a maximum over participation patterns and sign patterns (note §B3.6): not
    offered here; use :func:`minsep_sensitivity` for Toeplitz factors.

    Raises:
        ValueError: not square, not lower-triangular, a zero on the diagonal of B, non-finite, or too large.
    """
    if not isinstance(kind, FactorKind):
        raise ValueError(f"kind must be a FactorKind; got {kind!r}")
    factor = adjacency_factor(neighboring)
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0:
        raise ValueError(f"matrix must be a non-empty square 2-D array; got shape {m.shape!r}")
    if m.shape[0] > _MAX_DENSE_STEPS:
        raise ValueError(
            f"matrix must be at most {_MAX_DENSE_STEPS} x {_MAX_DENSE_STEPS} for the dense route; got {m.shape!r} "
            "(use the Toeplitz functions for large T)"
        )
    if not np.all(np.isfinite(m)):
        raise ValueError("matrix must be finite; got non-finite entries")
    if np.any(np.triu(m, 1) != 0):
        raise ValueError("matrix must be lower-triangular; got nonzero entries above the diagonal")
    if kind is FactorKind.NOISING:
        if np.any(np.diag(m) == 0):
            raise ValueError("matrix must have a nonzero diagonal (B must be invertible); got a zero on the diagonal")
        m = linalg.solve_triangular(m, np.eye(m.shape[0]), lower=True)
    return factor * float(np.max(np.linalg.norm(m, axis=0)))


# --------------------------------------------------------------------------------------------
# The event and its interpretation (exact μ-GDP)
# --------------------------------------------------------------------------------------------


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class DpFtrl(ev.Event):
    """One ν-DP-FTRL training run of ``steps`` steps (Algorithm DP-MF with clipping; Theorem 1.1 of seed 001).

    ``noise_multiplier`` is σ, the std of w_t per unit clip norm G (w_t ~ N(0, σ² G² I) added to the *sum* of clipped
    gradients through B, note §B6.8). ``nu`` ∈ [0, 1] (ν = 1 is DP-SGD without amplification). ``epochs`` /
    ``min_separation`` describe multiple participations (:func:`participation_schedule`). ``neighboring`` is the
    adjacency: zero-out (``REPLACE_SPECIAL``, default, the paper's) or add/remove give sensitivity γ; ``REPLACE_ONE``
    doubles it. The run is exactly μ-GDP with μ = sensitivity/σ (:meth:`gdp_mu`).
    """

    nu: float
    noise_multiplier: float
    steps: int
    epochs: int | None = None
    min_separation: int | None = None
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.REPLACE_SPECIAL

    def __post_init__(self) -> None:
        object.__setattr__(self, "nu", _check_nu(self.nu))
        sigma = self.noise_multiplier
        if isinstance(sigma, bool) or not isinstance(sigma, int | float) or not (math.isfinite(sigma) and sigma > 0):
            raise ValueError(f"noise_multiplier must be a finite number > 0; got {sigma!r}")
        object.__setattr__(self, "noise_multiplier", float(sigma))
        participation_schedule(self.steps, epochs=self.epochs, min_separation=self.min_separation)  # validates
        _check_relation(self.neighboring)

    @property
    def participations(self) -> int:
        """k: the most steps one record takes part in."""
        return participation_schedule(self.steps, epochs=self.epochs, min_separation=self.min_separation)[0]

    def sensitivity(self) -> float:
        """ℓ2-sensitivity per unit clip norm (:func:`nu_ftrl_sensitivity`), unrounded."""
        return nu_ftrl_sensitivity(
            self.nu,
            self.steps,
            epochs=self.epochs,
            min_separation=self.min_separation,
            neighboring=self.neighboring,
        )

    def gdp_mu(self) -> float:
        """μ = sensitivity/σ, rounded up by a relative 1e-10 (pessimistic): the run is exactly μ-GDP."""
        return self.sensitivity() / self.noise_multiplier * (1.0 + _SENSITIVITY_MARGIN)

    def to_dp_accounting(self):
        """dp-accounting's equivalent: a ``GaussianDpEvent`` with σ relative to the zero-out/add-remove sensitivity.

        dp-accounting itself doubles the Gaussian sensitivity under REPLACE_ONE, so the adjacency factor is left out
        here; under every relation its PLD is that of μ-GDP with μ = :meth:`gdp_mu`.
        """
        import dp_accounting as dpa

        base = self.gdp_mu() / adjacency_factor(self.neighboring)
        return dpa.GaussianDpEvent(noise_multiplier=1.0 / base)


def dp_ftrl_gdp(event: DpFtrl) -> Gdp:
    """The exact μ-GDP guarantee of a ν-DP-FTRL run (Gaussian mechanism on C G_mat; Dong, Roth, Su 2022)."""
    if not isinstance(event, DpFtrl):
        raise ValueError(f"event must be a DpFtrl; got {event!r}")
    return Gdp(mu=event.gdp_mu())


def dp_ftrl_privacy_profile(event: DpFtrl) -> PrivacyProfile:
    """Exact privacy profile: δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (DRS 2022 Cor. 2.13), ε(δ) by
    :func:`conversions.gdp_epsilon`."""
    mu = dp_ftrl_gdp(event).mu
    return PrivacyProfile(
        remove=functools.partial(conversions.gdp_delta, mu),
        epsilon_for_delta=functools.partial(conversions.gdp_epsilon, mu),
        description=f"nu-DP-FTRL (nu={event.nu:g}, T={event.steps}, k={event.participations}, "
        f"{event.neighboring.value}) = {mu:.6g}-GDP, exact",
    )


def dp_ftrl_rdp_curve(event: DpFtrl) -> RdpCurve:
    """RDP α μ²/2 of μ-GDP: exact for a Gaussian mechanism (Mironov 2017 Prop. 7), so it composes under RDP."""
    return dp_ftrl_gdp(event).rdp_curve()


@dataclass(frozen=True, slots=True, kw_only=True)
class FtrlAccounting:
    """The accounting of one ν-DP-FTRL run at δ: sensitivity, μ, ρ and ε by the exact and the zCDP routes."""

    nu: float
    steps: int
    participations: int
    min_separation: int | None
    neighboring: ev.NeighboringRelation
    noise_multiplier: float
    sensitivity: float
    mu: float
    delta: float
    epsilon: float
    epsilon_zcdp_bun_steinke: float

    @property
    def rho(self) -> float:
        """ρ of Theorem 1.1's ρ-zCDP statement: μ²/2."""
        return self.mu**2 / 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "nu": self.nu,
            "steps": self.steps,
            "participations": self.participations,
            "min_separation": self.min_separation,
            "neighboring": self.neighboring.value,
            "noise_multiplier": self.noise_multiplier,
            "sensitivity": self.sensitivity,
            "mu": self.mu,
            "rho": self.rho,
            "delta": self.delta,
            "epsilon": self.epsilon,
            "epsilon_method": "exact mu-GDP (Dong, Roth, Su 2022 Cor. 2.13)",
            "epsilon_zcdp_bun_steinke": self.epsilon_zcdp_bun_steinke,
            "is_estimate": False,
        }


def dp_ftrl_accounting(event: DpFtrl, delta: float) -> FtrlAccounting:
    """ε at ``delta`` of a ν-DP-FTRL run, exact (GDP), next to Theorem 1.1's zCDP route (Bun–Steinke Prop. 1.3)."""
    gdp = dp_ftrl_gdp(event)
    delta = conversions.check_delta(delta)
    return FtrlAccounting(
        nu=event.nu,
        steps=event.steps,
        participations=event.participations,
        min_separation=event.min_separation,
        neighboring=event.neighboring,
        noise_multiplier=event.noise_multiplier,
        sensitivity=event.sensitivity(),
        mu=gdp.mu,
        delta=delta,
        epsilon=gdp.epsilon(delta),
        epsilon_zcdp_bun_steinke=conversions.zcdp_to_epsilon_bun_steinke(gdp.mu**2 / 2, delta),
    )


def noise_multiplier_for_epsilon(
    target_epsilon: float,
    delta: float,
    *,
    nu: float,
    steps: int,
    epochs: int | None = None,
    min_separation: int | None = None,
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.REPLACE_SPECIAL,
) -> float:
    """The smallest σ (up to a relative 1e-9) whose run is (target_epsilon, delta)-DP, in closed form.

    σ = sensitivity / μ*(ε, δ), with μ* the largest μ such that μ-GDP implies (ε, δ)-DP
    (:func:`conversions.gdp_mu`, rounded down). σ is then rounded up and checked, so the result never overshoots.
    """
    epsilon = conversions.check_epsilon(target_epsilon, name="target_epsilon")
    if epsilon == 0:
        raise ValueError(f"target_epsilon must be > 0; got {target_epsilon!r}")
    delta = conversions.check_delta(delta)
    event = DpFtrl(
        nu=nu,
        noise_multiplier=1.0,
        steps=steps,
        epochs=epochs,
        min_separation=min_separation,
        neighboring=neighboring,
    )
    sigma = event.gdp_mu() / conversions.gdp_mu(epsilon, delta) * (1 + 1e-9)
    while conversions.gdp_epsilon(event.gdp_mu() / sigma, delta) > epsilon:  # pragma: no cover - margin suffices
        sigma *= 1 + 1e-9
    return sigma


# --------------------------------------------------------------------------------------------
# Spec builder and registration
# --------------------------------------------------------------------------------------------

_SPEC_KEYS = {"nu", "noise_multiplier", "steps", "epochs", "min_separation", "neighboring", "count"}


#: Most steps a spec may give (the accounting's cost grows with them; 10⁷ take about a second).
MAX_SPEC_STEPS = 10**7


def _spec_value(table: dict, key: str, *, integer: bool = False) -> Any:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number; got {value!r} (mechanism type 'dp_ftrl')")
    if integer:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{key} must be an integer; got {value!r} (mechanism type 'dp_ftrl')")
        value = int(value)
    return value


def _build_dp_ftrl(table: dict) -> tuple[ev.Event, int]:
    """``dp_ftrl``: ``nu``, ``noise_multiplier``, ``steps``; optional ``epochs``, ``min_separation``,
    ``neighboring`` (``zero_out`` default, ``add_remove``, ``replace_one``) and ``count`` (repeated runs)."""
    extra = set(table) - _SPEC_KEYS - {"type"}
    if extra:
        raise ValueError(
            f"unknown parameter(s) {sorted(extra)} for mechanism type 'dp_ftrl'; allowed: {sorted(_SPEC_KEYS)}"
        )
    for key in ("nu", "noise_multiplier", "steps"):
        if key not in table:
            raise ValueError(f"mechanism type 'dp_ftrl' requires parameter {key!r}")
    steps = _spec_value(table, "steps", integer=True)
    if steps > MAX_SPEC_STEPS:  # the accounting walks the schedule step by step: ~1 s per 10⁷ steps
        raise ValueError(
            f"steps = {steps!r} is out of the supported range [1, {MAX_SPEC_STEPS:.0e}] (mechanism type 'dp_ftrl')"
        )
    relation_text = table.get("neighboring", ev.NeighboringRelation.REPLACE_SPECIAL.value)
    try:
        relation = ev.NeighboringRelation(relation_text)
    except ValueError:
        allowed = [r.value for r in ev.NeighboringRelation]
        raise ValueError(f"neighboring must be one of {allowed}; got {relation_text!r}") from None
    event = DpFtrl(
        nu=_spec_value(table, "nu"),
        noise_multiplier=_spec_value(table, "noise_multiplier"),
        steps=_spec_value(table, "steps", integer=True),
        epochs=_spec_value(table, "epochs", integer=True) if "epochs" in table else None,
        min_separation=_spec_value(table, "min_separation", integer=True) if "min_separation" in table else None,
        neighboring=relation,
    )
    count = _spec_value(table, "count", integer=True) if "count" in table else 1
    if count < 1:
        raise ValueError(f"count must be an integer >= 1; got {count!r} (mechanism type 'dp_ftrl')")
    return event, count


SPEC_TYPES = {"dp_ftrl": _build_dp_ftrl}


def _register_interpreters() -> None:
    """Register the exact GDP profile and the Gaussian RDP curve on the core interpreters."""
    from dplens.accountant import pld, rdp

    rdp.rdp_curve.register(DpFtrl)(dp_ftrl_rdp_curve)
    pld.privacy_profile.register(DpFtrl)(dp_ftrl_privacy_profile)


_register_interpreters()
