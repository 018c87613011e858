"""A Rényi-DP upper bound for a matrix-factorisation training under fixed bins, both directions (few bands).

Fixed bins (jax_privacy's ``BallsInBinsSampling``): an example's offset i ∈ [0, t) is drawn uniformly once and it
takes part in steps i, i + t, i + 2t, … < T. For a non-negative strategy C the pair

    P = (1/t) Σ_i N(m_i, σ² I_T),   Q = N(0, σ² I_T),   m_i = C u_i  (u_i the indicator of offset i's steps)

is the one dplens's Monte Carlo estimate uses (:mod:`dplens.accountant.mf_monte_carlo`; Choquette-Choo, Ganesh,
Haque, Steinke, Thakurta, arXiv 2410.06266, whose analysis requires C ≥ 0). Its divergences are bounded here without
sampling; the bound is exactly as valid as that pair is dominating.

Remove direction, integer α ≥ 2, exact. [D] With G = MᵀM (G_ij = ⟨m_i, m_j⟩) and y ~ Q,
E_Q exp(⟨y, v⟩/σ²) = exp(‖v‖²/(2σ²)); for v = Σ_k m_{i_k} the normalisations Σ_k G_{i_k i_k}/(2σ²) cancel the diagonal
of ‖v‖²/(2σ²), so

    E_Q[(P/Q)^α] = t^{−α} Σ_{i_1..i_α} exp(Σ_{k<l} G_{i_k i_l}/σ²)
                 = α! t^{−α} Σ_{n ∈ ℕ^t, |n| = α} Π_i e^{G_ii n_i(n_i − 1)/(2σ²)} / n_i! · Π_{i<j} e^{G_ij n_i n_j/σ²}

(n_i: how many of the α indices equal i). For C ≥ 0, G_ij = 0 exactly when m_i and m_j have disjoint supports; for
b bands and t ≥ b that is so unless i and j are within b − 1 of each other *cyclically* (offset t − 1's step kt + t − 1
is next to offset 0's step (k + 1)t): G is circulant-banded. The sum is a dynamic programme over the offsets
0, …, t − 1 whose state is the counts of the offsets still coupled to a later one (the last b − 1 and, through the
wrap, the first b − 1: at most 2(b − 1) counts) and the running total; one pass gives every order 2 … α_max (the
totals). Schuchardt & Kalinin (arXiv 2601.21636, 2026) compute Rényi bounds for random allocation with a banded C by
such a programme; the one here reads the coupling from G itself, so it is exact for any C ≥ 0 and only its cost
depends on the bands (it grows like α_max^{2b − 1}: :data:`STATE_BUDGET` caps α_max).

Add direction, an upper bound. [D] By the AM–GM inequality P/Q = (1/t) Σ_i X_i ≥ (Π_i X_i)^{1/t}, with
X_i = exp((⟨y, m_i⟩ − G_ii/2)/σ²); for β = α − 1 > 0 the power x^{−β} is decreasing, so

    E_P[(Q/P)^α] = E_Q[(P/Q)^{−β}] ≤ E_Q exp(−(β/t) Σ_i (⟨y, m_i⟩ − G_ii/2)/σ²) = exp((β ḡ + β² ‖m̄‖²)/(2σ²)),

ḡ = (1/t) Σ_i G_ii, ‖m̄‖² = (1/t²) 1ᵀG1: D_α(Q‖P) ≤ (ḡ + (α − 1)‖m̄‖²)/(2σ²). Joint convexity of
(q, p) ↦ q^α p^{1−α} (α > 1; van Erven & Harremoës 2014, Thm 13) gives the other bound
D_α(Q‖P) ≤ log((1/t) Σ_i e^{(α−1)α G_ii/(2σ²)})/(α − 1) (the unamplified one); the smaller is used at each α.

Each direction's curve is converted to ε at δ by Canonne, Kamath, Steinke 2020 Prop. 12
(:func:`dplens.accountant.conversions.rdp_to_epsilon_optimal`), minimised over the integer orders computed; the
reported ε is the larger of the two. G is raised by a relative 1e-9 first (both bounds increase in every G_ij ≥ 0), so
float error in G or the sums stays on the pessimistic side.

As a curve (:func:`fixed_bins_rdp`, :func:`staircase_rdp`: what the accountant, the specs and the ledger charge for an
``MfTraining`` under fixed bins): the bounds at the integer orders 2 … α_max, extended to every real α > 1 by the
monotonicity of the Rényi divergence in its order (van Erven & Harremoës 2014, Thm 3: D_α ≤ D_⌈α⌉), and never above
the unamplified curve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dplens.accountant import matrix_factorization as mf

__all__ = [
    "CURVE_BUDGET",
    "STATE_BUDGET",
    "FixedBinsRdp",
    "FixedBinsRenyi",
    "add_rdp_bound",
    "fixed_bins_gram",
    "fixed_bins_rdp",
    "fixed_bins_renyi",
    "frontier_width",
    "max_order_within",
    "remove_log_moments",
    "renyi_applies",
    "staircase_rdp",
]

#: The most (state, count) rows the remove programme may expand to, summed over its t steps (about 1 s of numpy per
#: 10⁷); α_max is the largest order within it.
STATE_BUDGET = 10_000_000
#: The remove programme's budget for an event's curve (:func:`fixed_bins_rdp` as the accountant calls it): about 0.1 s
#: of numpy, since calibration and the ledger re-account one event at many σ; orders beyond its α_max fall back to the
#: unamplified curve (valid, looser only at small ε).
CURVE_BUDGET = 1_000_000
#: The most rows one step may hold (memory: about 100 bytes a row at its peak).
STEP_BUDGET = 3_000_000
#: The largest Rényi order computed (orders beyond it matter only at ε well below 1 for these samplers).
MAX_ORDER = 64
_G_MARGIN = 1e-9
#: The first α_max tried (doubled while the best remove order is the largest computed).
_FIRST_ORDER = 8


def fixed_bins_gram(strategy: mf.Strategy, *, period: int):
    """G = MᵀM (t × t) of the offsets' mean vectors m_i = C u_i, raised by a relative 1e-9 (see the docstring)."""
    from dplens.accountant.mf_monte_carlo import _modes

    modes = _modes(strategy, mf._check_int("period", period))
    gram = modes.T @ modes
    return gram * (1 + _G_MARGIN)


def _couplings(gram) -> list[int]:
    """For each offset i, the last offset j ≥ i with G_ij ≠ 0 (i itself when none)."""
    import numpy as np

    t = gram.shape[0]
    last = []
    for i in range(t):
        later = np.nonzero(gram[i, i + 1 :] != 0)[0]
        last.append(i + 1 + int(later.max()) if later.size else i)
    return last


def frontier_width(gram) -> int:
    """The most counts the remove programme's state holds while it adds one offset."""
    last = _couplings(gram)
    return max((sum(1 for j in range(i) if last[j] >= i) for i in range(gram.shape[0])), default=0)


def max_order_within(width: int, steps: int, budget: int = STATE_BUDGET, cap: int = MAX_ORDER) -> int:
    """The largest α_max ≤ ``cap`` whose rows (at most C(α_max + w + 2, w + 2) per step, w the frontier width) fit
    :data:`STEP_BUDGET` per step and ``budget`` over the ``steps`` (offsets) and whose state keys fit 62 bits; 1 when
    even α_max = 2 does not fit."""
    best = 1
    for order in range(2, cap + 1):
        rows = math.comb(order + width + 2, width + 2)
        if rows > STEP_BUDGET or rows * steps > budget or (width + 1) * math.log2(order + 1) > 62:
            break
        best = order
    return best


def _merge(key, logw):
    """Rows with equal keys summed in log space (sorted keys, logsumexp by segments): (unique keys, log sums)."""
    import numpy as np

    order = np.argsort(key)
    key, logw = key[order], logw[order]
    start = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    sizes = np.diff(np.concatenate((start, [key.size])))
    top = np.maximum.reduceat(logw, start)
    acc = np.add.reduceat(np.exp(logw - np.repeat(top, sizes)), start)
    return key[start], top + np.log(acc)


def _decode(key, radix: int, width: int):
    """(counts as a states × width array, totals) of keys made of ``width`` count digits then the total."""
    import numpy as np

    total = key % radix
    rest = key // radix
    counts = np.zeros((key.size, width), dtype=np.int64)
    for k in range(width - 1, -1, -1):
        counts[:, k] = rest % radix
        rest //= radix
    return counts, total


def remove_log_moments(gram, noise_multiplier: float, max_order: int):
    """log E_Q[(P/Q)^α] for α = 0 … ``max_order`` (an array; entries 0 and 1 are 0), exactly, by the dynamic
    programme of the module docstring on the Gram matrix ``gram`` (t × t, entries ≥ 0). A state is one int64 key
    (the frontier's counts and the total, base α_max + 1); a step expands each state by the new offset's count d and
    sums the rows whose keys agree once the offsets coupled to no later one are dropped."""
    import numpy as np

    gram = np.asarray(gram, dtype=float)
    t = gram.shape[0]
    if np.any(gram < 0):
        raise ValueError("gram must have entries >= 0 (the remove programme's pair needs C >= 0)")
    sigma2 = float(noise_multiplier) ** 2
    last = _couplings(gram)
    radix = max_order + 1
    log_fact = np.array([math.lgamma(k + 1) for k in range(radix)])
    frontier: list[int] = []
    counts = np.zeros((1, 0), dtype=np.int64)
    total = np.zeros(1, dtype=np.int64)
    logw = np.zeros(1)
    for i in range(t):
        reps = max_order - total + 1
        idx = np.repeat(np.arange(total.size), reps)
        d = np.arange(idx.size) - np.repeat(np.cumsum(reps) - reps, reps)
        link = counts @ gram[frontier, i] / sigma2 if frontier else np.zeros(total.size)
        logw = logw[idx] - log_fact[d] + d * (d - 1) * (gram[i, i] / (2 * sigma2)) + d * link[idx]
        code = np.zeros(total.size, dtype=np.int64)
        kept = [k for k, j in enumerate(frontier) if last[j] > i]
        for k in kept:
            code = code * radix + counts[:, k]
        key = code[idx]
        frontier = [frontier[k] for k in kept]
        if last[i] > i:
            key = key * radix + d
            frontier.append(i)
        key, logw = _merge(key * radix + total[idx] + d, logw)
        counts, total = _decode(key, radix, len(frontier))
    sums = np.full(radix, -np.inf)
    sums[total] = logw
    orders = np.arange(radix)
    out = log_fact + sums - orders * math.log(t)
    out[:2] = 0.0
    return out


def add_rdp_bound(gram, noise_multiplier: float, orders):
    """Upper bounds on D_α(Q‖P) at the ``orders`` (> 1): the smaller of the AM–GM and the joint-convexity bounds of
    the module docstring."""
    import numpy as np
    from scipy.special import logsumexp

    gram = np.asarray(gram, dtype=float)
    t = gram.shape[0]
    sigma2 = float(noise_multiplier) ** 2
    alpha = np.asarray(orders, dtype=float)
    diag = np.diag(gram)
    mean_sq = float(gram.sum()) / t**2
    am_gm = (diag.mean() + (alpha - 1) * mean_sq) / (2 * sigma2)
    convex = np.array([logsumexp((a - 1) * a * diag / (2 * sigma2)) - math.log(t) for a in alpha]) / (alpha - 1)
    return np.minimum(am_gm, convex)


def _remove_rdp(gram, noise_multiplier: float, max_order: int):
    """Upper bounds on D_α(P‖Q) at α = 2 … ``max_order`` (an array): the exact moments rounded up, divided by α − 1,
    raised by a relative 1e-12 (the division's float error)."""
    import numpy as np

    from dplens.accountant import conversions

    alphas = np.arange(2, max_order + 1)
    moments = np.array([conversions.round_up(v) for v in remove_log_moments(gram, noise_multiplier, max_order)[2:]])
    return moments / (alphas - 1) * (1 + 1e-12)


def _add_rdp(gram, noise_multiplier: float, orders):
    """Upper bounds on D_α(Q‖P) at ``orders`` (:func:`add_rdp_bound` raised by a relative 1e-12)."""
    return add_rdp_bound(gram, noise_multiplier, orders) * (1 + 1e-12)


def _gram_and_cap(strategy: mf.Strategy, period: int, budget: int):
    """(G, α_max) of the remove programme, or None where no Rényi bound is computed (a negative entry, or not even
    order 2 within ``budget``)."""
    if not strategy.nonnegative():
        return None
    gram = fixed_bins_gram(strategy, period=period)
    cap = max_order_within(frontier_width(gram), gram.shape[0], budget)
    return None if cap < 2 else (gram, cap)


@dataclass(frozen=True, slots=True, kw_only=True)
class FixedBinsRdp:
    """Per-order Rényi bounds of the fixed-bins pair (module docstring): ``remove[k]`` bounds D_{k+2}(P‖Q) (exact
    moments, rounded up) for the orders 2 … ``max_order``; ``add[k]`` bounds D_{k+2}(Q‖P) for the orders 2 …
    :data:`MAX_ORDER`. ``both`` is their maximum at the orders where both are known (an RDP bound of the add/remove
    relation, both directions)."""

    remove: tuple[float, ...]
    add: tuple[float, ...]

    @property
    def max_order(self) -> int:
        return 1 + len(self.remove)

    @property
    def both(self) -> tuple[float, ...]:
        return tuple(max(r, a) for r, a in zip(self.remove, self.add, strict=False))

    def log_delta(self, epsilons, direction: str):
        """log δ at each of ``epsilons`` (an array) of one direction: CKS 2020 Prop. 12 solved for δ, minimised over
        the orders held (not rounded: the caller rounds δ up)."""
        import numpy as np

        from dplens.accountant import conversions

        values = np.asarray(self.remove if direction == "remove" else self.add)[None, :]
        alphas = np.arange(2, values.size + 2)[None, :]
        eps = np.asarray(epsilons, dtype=float).reshape(-1, 1)
        return np.min(conversions.rdp_to_log_delta_optimal(values, alphas, eps), axis=1)


def fixed_bins_rdp(
    strategy: mf.Strategy, *, period: int, noise_multiplier: float, budget: int = CURVE_BUDGET
) -> FixedBinsRdp | None:
    """The per-order Rényi bounds of ``strategy`` under fixed bins of ``period`` steps, the remove direction at
    every integer order within ``budget`` (α_max of :func:`max_order_within`, at most :data:`MAX_ORDER`; the default
    budget costs about 0.1 s of numpy, :data:`STATE_BUDGET` about a second), the add direction at 2 …
    :data:`MAX_ORDER`; None where no bound is computed (a negative entry, or too many bands for order 2 within
    ``budget``)."""
    import numpy as np

    found = _gram_and_cap(strategy, period, budget)
    if found is None:
        return None
    gram, cap = found
    remove = _remove_rdp(gram, noise_multiplier, cap)
    add = _add_rdp(gram, noise_multiplier, np.arange(2, MAX_ORDER + 1))
    return FixedBinsRdp(remove=tuple(float(v) for v in remove), add=tuple(float(v) for v in add))


def renyi_applies(strategy: mf.Strategy, *, period: int, budget: int = STATE_BUDGET) -> bool:
    """Whether :func:`fixed_bins_rdp` (and :func:`fixed_bins_renyi`) give a bound for ``strategy`` under fixed bins
    of ``period`` steps (C ≥ 0 and order 2 within ``budget``): cheap, the programme is not run."""
    return _gram_and_cap(strategy, period, budget) is not None


def staircase_rdp(alpha, *, values: tuple[float, ...], mu: float):
    """An RDP curve valid at every real α > 1 from bounds ``values`` at the integer orders 2, 3, …: at α ≤ the
    largest order, min(μ²α/2, values[⌈α⌉ − 2]) (D_α ≤ D_⌈α⌉: the Rényi divergence is non-decreasing in its order,
    van Erven & Harremoës 2014, Thm 3); beyond it, μ²α/2 (the unamplified μ-GDP curve, valid at every order: the
    pointwise minimum of two valid bounds at one order is valid)."""
    import numpy as np

    alpha = np.asarray(alpha, dtype=float)
    unamplified = 0.5 * mu * mu * alpha
    table = np.asarray(values, dtype=float)
    top = table.size + 1
    inside = alpha <= top
    index = np.clip(np.ceil(np.where(inside, alpha, 2.0)) - 2, 0, table.size - 1).astype(int)
    return np.where(inside, np.minimum(unamplified, table[index]), unamplified)


@dataclass(frozen=True, slots=True, kw_only=True)
class FixedBinsRenyi:
    """The Rényi bound at δ: ``epsilon`` = max(``epsilon_remove``, ``epsilon_add``), each a valid upper bound for its
    direction under the pair of the module docstring, at the integer orders 2 … ``max_order``."""

    epsilon: float
    epsilon_remove: float
    epsilon_add: float
    order_remove: int
    order_add: int
    max_order: int
    delta: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "epsilon_remove": self.epsilon_remove,
            "epsilon_add": self.epsilon_add,
            "order_remove": self.order_remove,
            "order_add": self.order_add,
            "max_order": self.max_order,
            "delta": self.delta,
            "method": "Renyi DP of the fixed-bins pair (arXiv 2410.06266, C >= 0): remove direction exact at integer "
            "orders (dynamic programme over offsets, as arXiv 2601.21636), add direction by AM-GM / joint convexity; "
            "RDP to (epsilon, delta) by Canonne, Kamath, Steinke 2020 Prop. 12",
        }


def fixed_bins_renyi(
    strategy: mf.Strategy, *, period: int, noise_multiplier: float, delta: float, budget: int = STATE_BUDGET
) -> FixedBinsRenyi | None:
    """The Rényi upper bound of ``strategy`` under fixed bins of ``period`` steps at ``delta``; None when the
    strategy has a negative entry (the pair needs C ≥ 0) or when not even order 2 fits ``budget`` (many bands)."""
    import numpy as np

    from dplens.accountant import conversions

    found = _gram_and_cap(strategy, period, budget)
    if found is None:
        return None
    gram, cap = found
    order = min(cap, _FIRST_ORDER)
    while True:  # orders up to α_max, doubled while the best order is the largest computed (any set of orders is valid)
        alphas = np.arange(2, order + 1)
        eps_r = conversions.rdp_to_epsilon_optimal(_remove_rdp(gram, noise_multiplier, order), alphas, delta)
        best_r = int(np.argmin(eps_r))
        if best_r < alphas.size - 1 or order == cap:
            break
        order = min(cap, 2 * order)
    add_orders = np.arange(2, MAX_ORDER + 1)  # the add bound is closed-form: every order
    eps_a = conversions.rdp_to_epsilon_optimal(_add_rdp(gram, noise_multiplier, add_orders), add_orders, delta)
    best_a = int(np.argmin(eps_a))
    er = conversions.round_up(max(0.0, float(eps_r[best_r])))
    ea = conversions.round_up(max(0.0, float(eps_a[best_a])))
    return FixedBinsRenyi(
        epsilon=max(er, ea),
        epsilon_remove=er,
        epsilon_add=ea,
        order_remove=int(alphas[best_r]),
        order_add=int(add_orders[best_a]),
        max_order=order,
        delta=delta,
    )
