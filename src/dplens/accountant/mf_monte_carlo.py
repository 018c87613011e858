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

b-min-sep sampling (jax_privacy's ``BMinSepSampling``, Dong & Ganesh, arXiv 2602.09338): an example that took part sits
out the next b − 1 steps and otherwise takes part with probability p at each step, the process started in its
stationary state (jax_privacy's ``warm_start``); for a non-negative banded Toeplitz C with at most b bands its
participations' columns never share a row, so under the pair (the example's participations x drawn by the process,
P = N(Cx, σ²I) against Q = N(0, σ²I)) the likelihood ratio is a sum over participation patterns that a backward
recursion over the steps evaluates exactly (their Eq. 2): V_i = (1 − p)·V_{i+1} + p·e^{ℓ_i}·V_{i+b}, V_{≥T} = 1,
ℓ_i = (⟨c, y_{i:i+b}⟩ − ‖c_{:T−i}‖²/2)/σ², and L = log((V_0 + p·Σ_{m<b} V_m)/(1 + (b − 1)p)) over the start states
(:func:`b_min_sep_losses`). The same verification rule releases its ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dplens.accountant import matrix_factorization as mf

__all__ = [
    "MonteCarloEpsilon",
    "b_min_sep_losses",
    "b_min_sep_monte_carlo",
    "b_min_sep_rate",
    "base_delta",
    "fixed_bins_losses",
    "fixed_bins_monte_carlo",
    "overall_delta",
]

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
    dominating_pair: str = (
        "aligned gradients under fixed bins (Choquette-Choo et al. 2024, arXiv 2410.06266; requires C >= 0)"
    )

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
            "dominating_pair": self.dominating_pair,
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
    return _released(remove, add, samples=samples, base=base, delta=delta, seed=seed)


def _released(remove, add, *, samples: int, base: float, delta: float, seed: int | None, **extra) -> MonteCarloEpsilon:
    """The smallest ε verified at the base δ′ in both directions (the verification rule's release)."""
    import numpy as np

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
        **extra,
    )


# --------------------------------------------------------------------------------------------
# b-min-sep sampling
# --------------------------------------------------------------------------------------------


def b_min_sep_rate(*, dataset_size: int, batch_size: int, min_separation: int) -> float:
    """p of b-min-sep sampling with expected batch size B: an example takes part in 1/(b − 1 + 1/p) of the steps, so
    p = 1/(N/B − b + 1); ``ValueError`` where B > N/b (no p ≤ 1 gives it)."""
    ratio = dataset_size / batch_size
    if ratio < min_separation:
        raise ValueError(
            f"batch_size={batch_size} is too large for b-min-sep with min_separation={min_separation}: its expected "
            f"batch size is at most dataset_size/min_separation = {ratio / min_separation * batch_size:.6g}"
        )
    return 1.0 / (ratio - min_separation + 1.0)


def _check_banded(strategy: mf.Strategy, min_separation: int):
    """The strategy's coefficients, where the b-min-sep pair applies: Toeplitz, non-negative, at most b bands."""
    import numpy as np

    if not strategy.is_toeplitz:
        raise ValueError("the b-min-sep Monte Carlo needs a banded Toeplitz strategy (its coefficients); got a matrix")
    if not strategy.nonnegative():
        raise ValueError(
            "strategy must be non-negative for the Monte Carlo estimate (its dominating pair, Dong & Ganesh 2026, "
            "requires C >= 0); got a negative entry"
        )
    if strategy.bands > min_separation:
        raise ValueError(
            f"the b-min-sep Monte Carlo needs at most min_separation={min_separation} bands; the strategy has "
            f"{strategy.bands} (participations' columns would share rows)"
        )
    return np.asarray(strategy.coefficients, dtype=float)


def _participation_rows(steps: int, separation: int, rate: float, samples: int, rng: Any):
    """(sample, step) of every participation of ``samples`` independent b-min-sep processes over ``steps`` steps,
    each started in the stationary state: eligible at step 0 with probability 1/(1 + (b − 1)p), else last taken part
    k ∈ [1, b) steps before 0 (p/(1 + (b − 1)p) each), so first eligible at b − k."""
    import numpy as np

    weights = np.full(separation, rate)
    weights[0] = 1.0
    eligible = rng.choice(separation, p=weights / weights.sum(), size=samples)
    index = np.arange(samples)
    rows, cols = [], []
    while index.size:
        taken = eligible + rng.geometric(rate, size=index.size) - 1
        inside = taken < steps
        index, taken = index[inside], taken[inside]
        rows.append(index)
        cols.append(taken)
        eligible = taken + separation
    return np.concatenate(rows), np.concatenate(cols)


def _window_dots(y, coefficients):
    """⟨c, y_{i:i+b}⟩ for every step i and column of ``y`` (T × samples), the window cut at the last step; in blocks
    of 16 steps, so that the b passes run in cache."""
    import numpy as np

    steps, samples = y.shape
    bands = coefficients.size
    padded = np.concatenate([y, np.zeros((bands, samples))])
    dots = np.empty_like(y)
    scratch = np.empty((16, samples))
    for t0 in range(0, steps, 16):
        t1 = min(steps, t0 + 16)
        block, part = dots[t0:t1], scratch[: t1 - t0]
        np.multiply(padded[t0:t1], coefficients[0], out=block)
        for k in range(1, bands):
            np.multiply(padded[t0 + k : t1 + k], coefficients[k], out=part)
            block += part
    return dots


def _b_min_sep_loss(dots, coefficients, separation: int, rate: float, noise_multiplier: float):
    """L(y) of the b-min-sep pair for each column, from its window dots (:func:`_window_dots`), by the backward
    recursion of the module docstring. In linear space, each column rescaled by its largest value every 16 steps (and
    whenever a value passes 10²⁰⁰), its logarithm kept aside; at a rate above 0.9 (where a value may fall by e^{ℓ}
    at every step) in log space."""
    import numpy as np

    steps, samples = dots.shape
    bands = coefficients.size
    norms = np.full(steps, float(np.sum(coefficients**2)))
    for i in range(max(0, steps - bands), steps):
        norms[i] = float(np.sum(coefficients[: steps - i] ** 2))
    ell = (dots - 0.5 * norms[:, None]) / noise_multiplier**2
    stay = 1.0 - rate
    scale = np.zeros(samples)
    if rate > 0.9:
        log_stay = math.log(stay) if stay > 0 else -math.inf
        ahead = np.zeros((separation, samples))  # log V at i + 1 … i + b, circularly: row (i mod b)
        for i in range(steps - 1, -1, -1):
            take = math.log(rate) + ell[i] + ahead[i % separation]
            ahead[i % separation] = np.logaddexp(log_stay + ahead[(i + 1) % separation], take)
    else:
        np.exp(ell, out=ell)
        ahead = np.ones((separation, samples))  # V / e^scale at i + 1 … i + b, circularly
        for i in range(steps - 1, -1, -1):
            value = stay * ahead[(i + 1) % separation] + rate * ell[i] * ahead[i % separation]
            ahead[i % separation] = value
            if i % 16 == 0 or value.max() > 1e200:
                top = ahead.max(axis=0)
                ahead /= top
                scale += np.log(top)
        ahead = np.log(ahead)
    # Start states: eligible at 0 (weight 1) or first eligible at m ∈ [1, b) (weight p each).
    ahead[1:] += math.log(rate)
    top = ahead.max(axis=0)
    return scale + top + np.log(np.exp(ahead - top).sum(axis=0)) - math.log1p((separation - 1) * rate)


def b_min_sep_losses(
    strategy: mf.Strategy,
    *,
    min_separation: int,
    sampling_rate: float,
    noise_multiplier: float,
    samples: int,
    rng: Any,
):
    """Privacy-loss samples of the b-min-sep pair (module docstring): (remove: L under P, add: −L under Q), each of
    ``samples`` draws, in chunks of about 4·10⁶ cells. Each chunk's noise serves both directions (y = σz under Q,
    σz + Cx under P): each direction's samples are still independent draws of its own law, which is all the
    verification rule uses (a claim is released only if it passes in each direction on that direction's samples)."""
    import numpy as np

    coefficients = _check_banded(strategy, min_separation)
    steps = strategy.steps
    chunk = max(1, _CHUNK_CELLS // steps)
    remove, add = [], []
    done = 0
    while done < samples:
        k = min(chunk, samples - done)
        y = rng.standard_normal((steps, k))
        y *= noise_multiplier
        add.append(
            -_b_min_sep_loss(
                _window_dots(y, coefficients), coefficients, min_separation, sampling_rate, noise_multiplier
            )
        )
        rows, cols = _participation_rows(steps, min_separation, sampling_rate, k, rng)
        flat_y = y.reshape(-1)  # a view: (step, sample) at step·k + sample
        for band, value in enumerate(coefficients.tolist()):
            inside = cols + band < steps
            # No cell twice: a sample's participations are b ≥ bands apart, so (step, sample) pairs never repeat.
            flat_y[(cols[inside] + band) * k + rows[inside]] += value
        remove.append(
            _b_min_sep_loss(
                _window_dots(y, coefficients), coefficients, min_separation, sampling_rate, noise_multiplier
            )
        )
        done += k
    return np.concatenate(remove), np.concatenate(add)


def b_min_sep_monte_carlo(
    strategy: mf.Strategy,
    *,
    min_separation: int,
    sampling_rate: float,
    noise_multiplier: float,
    delta: float,
    samples: int,
    seed: int | None = None,
) -> MonteCarloEpsilon:
    """The verified Monte Carlo ε at ``delta`` of a banded ``strategy`` under b-min-sep sampling at rate p."""
    import numpy as np

    samples = mf._check_int("samples", samples)
    base = base_delta(samples, delta)
    rng = np.random.default_rng(seed)
    remove, add = b_min_sep_losses(
        strategy,
        min_separation=min_separation,
        sampling_rate=sampling_rate,
        noise_multiplier=noise_multiplier,
        samples=samples,
        rng=rng,
    )
    pair = (
        f"aligned gradients under b-min-sep sampling (separation {min_separation}, rate {sampling_rate:.6g}, "
        "stationary start; Dong & Ganesh 2026, arXiv 2602.09338; requires C >= 0 with at most b bands)"
    )
    return _released(remove, add, samples=samples, base=base, delta=delta, seed=seed, dominating_pair=pair)
