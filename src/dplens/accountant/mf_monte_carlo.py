"""Monte Carlo ε of a matrix-factorisation training under fixed bins, under the verification rule (an estimate).

Fixed bins (jax_privacy's ``BallsInBinsSampling``): each example's step i ∈ [0, t) is drawn uniformly once and it takes
part in steps i, i + t, i + 2t, … < T. For a non-negative strategy C, the pair of Choquette-Choo, Ganesh, Haque,
Steinke, Thakurta ("Near-exact privacy amplification for matrix mechanisms", arXiv 2410.06266; jax_privacy's
``experimental/monte_carlo``, which requires C ≥ 0) is taken as dominating:

    P = (1/t) Σ_i N(C u_i, σ² I_T)   (the example present, at offset i)   and   Q = N(0, σ² I_T),

u_i the indicator of offset i's steps. Its privacy loss is L(y) = logsumexp_i((⟨y, m_i⟩ − ‖m_i‖²/2)/σ²) − log t with
m_i = C u_i; δ(ε) = E_P[(1 − e^{ε − L})₊] (remove) and E_Q[(1 − e^{ε + L})₊] (add). Both are estimated from ``samples``
draws each (vectorised, through the t-dimensional statistic Mᵀy: see :func:`fixed_bins_losses`).

The number reported is **verified, not certified**: with n samples per direction, the smallest ε whose empirical δ̂(ε)
is ≤ a base δ′ in both directions is released, and δ′ is chosen so that the whole randomised pipeline (verify an
ordered family of claims, release the best that passes) is (ε, δ)-DP: δ = min_τ τδ′ + e^{−n·KL(δ′ ‖ τδ′)}(1 − τδ′)
(Fact 4.2 of Chua, Ghazi, Harrison, Leeman, Kamath, Kumar, Manurangsi, Sinha, Zhang, arXiv 2412.16802, with the
"verify many ordered mechanisms" argument of App. A of Dong & Ganesh, arXiv 2602.09338, as jax_privacy's
``delta_calculation.get_overall_delta``). It rests on the dominating-pair assumption above, and its samples grow like
1/δ (about 7.5·10⁴ per direction at δ = 1e-3, 1.2·10⁸ at 1e-6): dplens labels it ``epsilon_monte_carlo``, beside
the valid upper bound (for C ≥ 0 with few bands the Rényi bound of the same pair, :mod:`dplens.accountant.mf_renyi`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dplens.accountant import matrix_factorization as mf

__all__ = ["MonteCarloEpsilon", "base_delta", "fixed_bins_losses", "fixed_bins_monte_carlo", "overall_delta"]

_CHUNK_CELLS = 4_000_000  # samples × t per chunk (32 MB of float64)


def _kl(a: float, b: float) -> float:
    from scipy.special import rel_entr

    return float(rel_entr(a, b) + rel_entr(1 - a, 1 - b))


def overall_delta(samples: int, base: float) -> float:
    """δ of the pipeline that verifies (ε, ``base``)-DP on ``samples`` privacy-loss samples: min over τ ∈ [1, 1/base]
    of τ·base + exp(−n·KL(base ‖ τ·base))(1 − τ·base) (Fact 4.2 of arXiv 2412.16802). Any τ gives a valid value;
    the optimiser's is used, so the result is valid whatever it finds."""
    from scipy.optimize import minimize_scalar

    if not (0 < base < 1) or samples < 1:
        raise ValueError(f"base must be in (0, 1) and samples >= 1; got base={base!r}, samples={samples!r}")

    def value(tau: float) -> float:
        return tau * base + math.exp(-samples * _kl(base, tau * base)) * (1 - tau * base)

    found = minimize_scalar(value, bounds=(1.0, 1.0 / base), method="bounded", options={"xatol": 1e-10})
    return min(1.0, value(float(found.x)), value(1.0 / base))


def base_delta(samples: int, delta: float) -> float:
    """The largest base δ′ (to a relative 1e-6) with :func:`overall_delta` (samples, δ′) ≤ ``delta``; ``ValueError``
    when none exists (too few samples: the message says how many would do)."""
    low, high = 0.0, delta
    if overall_delta(samples, delta * 1e-6) > delta:
        need = samples
        while overall_delta(need, delta / 2) > delta:
            need *= 2
        raise ValueError(
            f"monte_carlo samples={samples} are too few to verify delta={delta:g} (Fact 4.2 of arXiv 2412.16802): "
            f"use at least {need}"
        )
    low = delta * 1e-6
    while high - low > 1e-6 * delta:
        mid = (low + high) / 2
        if overall_delta(samples, mid) <= delta:
            low = mid
        else:
            high = mid
    return low


def _modes(strategy: mf.Strategy, period: int):
    """m_i = C u_i for the t offsets, as the columns of a T × t array."""
    import numpy as np

    steps = strategy.steps
    if strategy.is_toeplitz:
        u0 = np.zeros(steps)
        u0[::period] = 1.0
        first = np.convolve(np.asarray(strategy.coefficients), u0)[:steps]
        modes = np.zeros((steps, period))
        for i in range(period):
            modes[i:, i] = first[: steps - i]
        return modes
    c = strategy.dense()
    cycles = -(-steps // period)
    padded = np.zeros((steps, cycles * period))
    padded[:, :steps] = c
    return padded.reshape(steps, cycles, period).sum(axis=1)


def fixed_bins_losses(strategy: mf.Strategy, *, period: int, noise_multiplier: float, samples: int, rng: Any):
    """Privacy-loss samples of the pair above: (remove: L under P, add: −L under Q), each of ``samples`` draws.

    L depends on y only through w = Mᵀy ∈ ℝ^t (M = [m_0 … m_{t−1}]), which is Gaussian: N(G_{:, j}, σ² G) under
    P's component j and N(0, σ² G) under Q, with G = MᵀM. So w is drawn directly, as σ R z + G_{:, j} with R Rᵀ = G
    (a square root by eigendecomposition; G may be singular): t normals per sample instead of T, and exactly the same
    distribution of L."""
    import numpy as np

    if not strategy.nonnegative():
        raise ValueError(
            "strategy must be non-negative for the Monte Carlo estimate (its dominating pair, Choquette-Choo et al. "
            "2024, requires C >= 0); got a negative entry"
        )
    modes = _modes(strategy, period)
    gram = modes.T @ modes
    values, vectors = np.linalg.eigh(gram)
    root = vectors * np.sqrt(np.clip(values, 0.0, None))  # root @ root.T = gram
    half_norms = 0.5 * np.diag(gram)
    sigma2 = noise_multiplier**2
    chunk = max(1, _CHUNK_CELLS // period)
    out = {"remove": [], "add": []}
    log_t = math.log(period)
    for direction in ("remove", "add"):
        done = 0
        while done < samples:
            k = min(chunk, samples - done)
            w = (rng.standard_normal((k, period)) @ root.T) * noise_multiplier
            if direction == "remove":
                w += gram[rng.integers(0, period, size=k)]  # gram is symmetric: row j is column j
            x = (w - half_norms) / sigma2
            top = x.max(axis=1)
            loss = top + np.log(np.exp(x - top[:, None]).sum(axis=1)) - log_t  # logsumexp − log t
            out[direction].append(loss if direction == "remove" else -loss)
            done += k
    return np.concatenate(out["remove"]), np.concatenate(out["add"])


def _empirical_delta(losses, epsilon: float) -> float:
    import numpy as np

    return float(np.mean(-np.expm1(np.minimum(epsilon - losses, 0.0))))


def _smallest_epsilon(losses, base: float, high: float) -> float:
    """The smallest ε (to 1e-6 absolute) with δ̂(ε) ≤ base (δ̂ is non-increasing in ε)."""
    low = 0.0
    if _empirical_delta(losses, 0.0) <= base:
        return 0.0
    while _empirical_delta(losses, high) > base:
        high *= 2
    while high - low > 1e-6:
        mid = (low + high) / 2
        if _empirical_delta(losses, mid) <= base:
            high = mid
        else:
            low = mid
    return high


@dataclass(frozen=True, slots=True, kw_only=True)
class MonteCarloEpsilon:
    """A Monte Carlo ε under the verification rule (an estimate in dplens's terms: see the module docstring)."""

    epsilon: float
    epsilon_remove: float
    epsilon_add: float
    samples: int
    base_delta: float
    delta: float
    seed: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "epsilon_remove": self.epsilon_remove,
            "epsilon_add": self.epsilon_add,
            "samples_per_direction": self.samples,
            "base_delta": self.base_delta,
            "delta": self.delta,
            "seed": self.seed,
            "delta_accounting": "the verification rule: (epsilon, base_delta) verified on the samples in both "
            "directions; the pipeline is (epsilon, delta)-DP with delta = min_tau tau*base + exp(-n KL(base||tau "
            "base))(1 - tau*base) (Fact 4.2 of arXiv 2412.16802; App. A of arXiv 2602.09338)",
            "confidence": "none separate: the failure probability of the verification is inside delta",
            "dominating_pair": "aligned gradients under fixed bins (Choquette-Choo et al. 2024, arXiv 2410.06266; "
            "requires C >= 0)",
            "is_estimate": True,
        }


def fixed_bins_monte_carlo(
    strategy: mf.Strategy, *, period: int, noise_multiplier: float, delta: float, samples: int, seed: int | None = None
) -> MonteCarloEpsilon:
    """The verified Monte Carlo ε at ``delta`` of ``strategy`` under fixed bins of ``period`` steps."""
    import numpy as np

    samples = mf._check_int("samples", samples)
    base = base_delta(samples, delta)
    rng = np.random.default_rng(seed)
    remove, add = fixed_bins_losses(
        strategy, period=period, noise_multiplier=noise_multiplier, samples=samples, rng=rng
    )
    high = max(1.0, float(np.max(remove)), float(np.max(add)))
    eps_remove = _smallest_epsilon(remove, base, high)
    eps_add = _smallest_epsilon(add, base, high)
    return MonteCarloEpsilon(
        epsilon=max(eps_remove, eps_add),
        epsilon_remove=eps_remove,
        epsilon_add=eps_add,
        samples=samples,
        base_delta=base,
        delta=delta,
        seed=seed,
    )
