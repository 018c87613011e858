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
(:func:`b_min_sep_losses`). The same verification rule releases its ε. The sampler draws T normals a sample, which
serve both directions: ℓ under Q is a window GEMM of the normals, under P the same plus the band of CᵀC on the
participations (a second GEMM on a 0/1 array), and the recursion runs in linear space on W_i = V_i/(1 − p)^{T−i}
(one multiply and one add a cell), chunk by chunk on one thread per CPU with buffers reused.
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
_B_MIN_SEP_CHUNK_CELLS = 2_000_000  # samples × T per b-min-sep chunk (a worker holds four such arrays, 64 MB)


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


def _band_blocks(band, rows: int = 16):
    """The block rows of the banded matrix A with A[i, i + m] = band[i, m] (steps × width): (t0, t1, A[t0:t1,
    t0:t1 + width − 1]) for every 16 steps."""
    import numpy as np

    steps, width = band.shape
    blocks = []
    for t0 in range(0, steps, rows):
        t1 = min(steps, t0 + rows)
        block = np.zeros((t1 - t0, t1 - t0 + width - 1))
        for r in range(t1 - t0):
            block[r, r : r + width] = band[t0 + r]
        blocks.append((t0, t1, block))
    return blocks


def _banded_product(blocks, padded, out) -> None:
    """``out`` = A·``padded`` for A given by :func:`_band_blocks` (``padded`` has the steps + width − 1 rows the band
    reads; ``out``'s rows may be strided), by GEMMs of 16 steps × 512 columns: BLAS speed for a handful of
    multiply-adds a cell, and each call below OpenBLAS's threading threshold (a worker thread's GEMM does not wake
    BLAS threads that would compete with the other workers)."""
    import numpy as np

    columns = padded.shape[1]
    for t0, t1, block in blocks:
        for c0 in range(0, columns, 512):
            c1 = min(columns, c0 + 512)
            np.matmul(block, padded[t0 : t0 + block.shape[1], c0:c1], out=out[t0:t1, c0:c1])


def _window_dots(y, coefficients):
    """⟨c, y_{i:i+b}⟩ for every step i and column of ``y`` (T × samples), the window cut at the last step."""
    import numpy as np

    steps, samples = y.shape
    padded = np.concatenate([y, np.zeros((coefficients.size - 1, samples))])
    dots = np.empty_like(y)
    _banded_product(_band_blocks(np.tile(coefficients, (steps, 1))), padded, dots)
    return dots


def _gram_band(coefficients, steps: int):
    """G[i, d + b − 1] = ⟨C e_i, C e_{i+d}⟩ for |d| < b (zero where i + d is outside [0, T)): the rows of C below T
    only, so the columns of the last steps are cut."""
    import numpy as np

    bands = coefficients.size
    band = np.zeros((steps, 2 * bands - 1))
    for d in range(bands):
        band[:, bands - 1 + d] = band[:, bands - 1 - d] = float(np.dot(coefficients[d:], coefficients[: bands - d]))
    for i in {*range(min(bands, steps)), *range(max(0, steps - 2 * bands), steps)}:  # the band's two ends
        for d in range(-(bands - 1), bands):
            j = i + d
            if not 0 <= j < steps:
                band[i, bands - 1 + d] = 0.0
            elif max(i, j) + bands > steps:
                rows = range(max(i, j), min(min(i, j) + bands, steps))
                band[i, bands - 1 + d] = math.fsum(coefficients[r - i] * coefficients[r - j] for r in rows)
    return band


def _truncated_norms(coefficients, steps: int):
    """‖C e_i‖² for every step i: ‖c‖², and the first T − i coefficients' over the last b steps."""
    import numpy as np

    norms = np.full(steps, float(np.sum(coefficients**2)))
    for i in range(max(0, steps - coefficients.size), steps):
        norms[i] = float(np.sum(coefficients[: steps - i] ** 2))
    return norms


def _b_min_sep_loss(dots, coefficients, separation: int, rate: float, noise_multiplier: float):
    """L(y) of the b-min-sep pair for each column, from its window dots (:func:`_window_dots`), by the backward
    recursion of the module docstring."""
    import numpy as np

    steps = dots.shape[0]
    log_a, _ = _linear_scale(separation, rate)
    exponent = (dots - 0.5 * _truncated_norms(coefficients, steps)[:, None]) / noise_multiplier**2 + log_a
    return _loss_from_exponents(np.ascontiguousarray(exponent), separation, rate)


def _linear_scale(separation: int, rate: float) -> tuple[float, bool]:
    """(log a, whether the linear-space recursion applies): W_i = V_i/(1 − p)^{T−i} obeys W_i = W_{i+1} + a·e^{ℓ_i}
    W_{i+b} with a = p/(1 − p)^b, one multiply and one add a cell. Log space instead where p > 0.9 (a value may fall
    by e^{ℓ} at every step) or (1 − p)^b is below 1e-87."""
    if rate >= 1.0:
        return 0.0, False
    log_stay = math.log1p(-rate)
    return math.log(rate) - separation * log_stay, rate <= 0.9 and -separation * log_stay < 200


def _loss_from_exponents(exponent, separation: int, rate: float):
    """L for each column from ℓ_i + log a (steps × columns, contiguous; overwritten): the recursion in linear space
    (:func:`_linear_scale`), every value bounded as it grows (log(1 + max a·e^{ℓ_i}) added a step) and the columns
    rescaled by their largest value before the bound passes e^600, the logarithms kept aside; in log space where the
    linear one does not apply or a·e^{ℓ} would pass e^300."""
    import numpy as np

    steps, columns = exponent.shape
    log_a, linear = _linear_scale(separation, rate)
    row_top = exponent.max(axis=1)
    if not linear or row_top.max() > 300:
        return _loss_in_log_space(exponent - log_a, separation, rate)
    log_stay = math.log1p(-rate)
    terms = np.exp(exponent, out=exponent)
    growth = np.log1p(np.exp(row_top)).tolist()
    if separation == 1:
        terms += 1.0  # W_i = W_{i+1}·(1 + a e^{ℓ_i})
    ahead = np.empty((separation, columns))  # W at i + 1 … i + b, circularly: row (i mod b)
    for j in range(separation):
        ahead[(steps + j) % separation] = math.exp(j * log_stay)  # W_{T+j} = (1 − p)^j (V = 1 past the end)
    scale = np.zeros(columns)
    bound = 0.0
    for i in range(steps - 1, -1, -1):
        if bound + growth[i] > 600:
            top = ahead.max(axis=0)
            ahead /= top
            scale += np.log(top)
            bound = 0.0
        bound += growth[i]
        row = ahead[i % separation]
        row *= terms[i]
        if separation > 1:
            row += ahead[(i + 1) % separation]
    # Rows 0 … b − 1 hold W_0 … W_{b−1}; V_m = (1 − p)^{T−m} W_m.
    log_v = np.log(ahead) + scale + ((steps - np.arange(separation)) * log_stay)[:, None]
    return _start_states(log_v, separation, rate)


def _loss_in_log_space(ell, separation: int, rate: float):
    """The recursion on log V (one logaddexp a cell): for p > 0.9 and extreme ℓ."""
    import numpy as np

    steps, columns = ell.shape
    log_stay = math.log1p(-rate) if rate < 1 else -math.inf
    ahead = np.zeros((separation, columns))  # log V at i + 1 … i + b, circularly: row (i mod b)
    for i in range(steps - 1, -1, -1):
        take = math.log(rate) + ell[i] + ahead[i % separation]
        ahead[i % separation] = np.logaddexp(log_stay + ahead[(i + 1) % separation], take)
    return _start_states(ahead, separation, rate)


def _start_states(log_v, separation: int, rate: float):
    """L = log((V_0 + p·Σ_{0<m<b} V_m)/(1 + (b − 1)p)): eligible at 0 (weight 1) or first eligible at m ∈ [1, b)
    (weight p each), from log V_0 … log V_{b−1} (one row each)."""
    import numpy as np

    log_v[1:] += math.log(rate)
    top = log_v.max(axis=0)
    return top + np.log(np.exp(log_v - top).sum(axis=0)) - math.log1p((separation - 1) * rate)


class _BMinSepChunks:
    """One worker's buffers and the strategy's constants, reused chunk after chunk (fresh 100 MB arrays a chunk
    would cost their page faults each time)."""

    def __init__(self, coefficients, *, steps: int, separation: int, rate: float, noise_multiplier: float, k: int):
        import numpy as np

        self.steps, self.separation, self.rate, self.k = steps, separation, rate, k
        self.pad = pad = coefficients.size - 1
        self.noise = np.zeros((steps + pad, k))  # the last b − 1 rows stay zero
        self.present = np.zeros((steps + 2 * pad, k))  # 1 at (step + b − 1, sample) of a participation, else 0
        self.exponents = np.empty((steps, 2, k))  # (step, [add: y under Q, remove: y under P], sample)
        self.window = _band_blocks(np.tile(coefficients / noise_multiplier, (steps, 1)))
        self.gram = _band_blocks(_gram_band(coefficients, steps) / noise_multiplier**2)
        log_a, _ = _linear_scale(separation, rate)
        self.offset = (log_a - 0.5 * _truncated_norms(coefficients, steps) / noise_multiplier**2)[:, None]

    def losses(self, seed: Any):
        """(remove, add) losses of self.k samples from the generator ``seed`` starts. With y = σz under Q and
        σz + Cx under P: ℓ_i + log a = ⟨c, z_{i:i+b}⟩/σ + log a − ‖C e_i‖²/2σ² under Q, plus (CᵀC x)_i/σ² under P
        (the band of CᵀC on the participations x: one GEMM of 2b − 1 bands instead of a second window)."""
        import numpy as np

        rng = np.random.Generator(np.random.SFC64(seed))
        steps, k = self.steps, self.k
        rng.standard_normal(out=self.noise[:steps])
        add, remove = self.exponents[:, 0], self.exponents[:, 1]
        _banded_product(self.window, self.noise, add)
        rows, cols = _participation_rows(steps, self.separation, self.rate, k, rng)
        cells = (cols + self.pad) * k + rows
        flat = self.present.reshape(-1)
        flat[cells] = 1.0
        _banded_product(self.gram, self.present, remove)
        flat[cells] = 0.0
        add += self.offset
        remove += add
        loss = _loss_from_exponents(self.exponents.reshape(steps, 2 * k), self.separation, self.rate)
        return loss[k:], -loss[:k]


def b_min_sep_losses(
    strategy: mf.Strategy,
    *,
    min_separation: int,
    sampling_rate: float,
    noise_multiplier: float,
    samples: int,
    rng: Any,
    workers: int | None = None,
):
    """Privacy-loss samples of the b-min-sep pair (module docstring): (remove: L under P, add: −L under Q), each of
    ``samples`` draws, in chunks of about 2·10⁶ cells on ``workers`` threads (default: the CPUs this process may
    use, at most 8; numpy releases the GIL in its loops). Each chunk draws from its own generator, seeded from
    ``rng`` in order, so the samples do not depend on the number of workers. Each chunk's noise serves both
    directions (y = σz under Q, σz + Cx under P): each direction's samples are still independent draws of its own
    law, which is all the verification rule uses (a claim is released only if it passes in each direction on that
    direction's samples)."""
    import os
    from concurrent.futures import ThreadPoolExecutor
    from threading import local

    import numpy as np

    coefficients = _check_banded(strategy, min_separation)
    steps = strategy.steps
    k = max(1, _B_MIN_SEP_CHUNK_CELLS // steps)
    sizes = [min(k, samples - start) for start in range(0, samples, k)]
    seeds = np.random.SeedSequence(rng.integers(2**63, size=4).tolist()).spawn(len(sizes))
    if workers is None:
        workers = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    buffers = local()
    shape = dict(steps=steps, separation=min_separation, rate=sampling_rate, noise_multiplier=noise_multiplier)

    def chunk(index: int):
        size = sizes[index]
        if size != k:  # the last, smaller chunk: its own buffers
            return _BMinSepChunks(coefficients, **shape, k=size).losses(seeds[index])
        if not hasattr(buffers, "chunks"):
            buffers.chunks = _BMinSepChunks(coefficients, **shape, k=k)
        return buffers.chunks.losses(seeds[index])

    with ThreadPoolExecutor(max(1, min(workers, len(sizes)))) as pool:
        parts = list(pool.map(chunk, range(len(sizes))))
    return np.concatenate([remove for remove, _ in parts]), np.concatenate([add for _, add in parts])


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
