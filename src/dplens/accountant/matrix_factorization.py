"""Matrix-factorisation (correlated-noise) mechanisms: strategies, participation schemas and their sensitivities.

A matrix-factorisation mechanism (Denisov, McMahan, Rush, Smith, Thakurta 2022; Choquette-Choo et al., "Multi-epoch
matrix factorization mechanisms", ICML 2023, arXiv 2211.06530) releases B(C G + Z) for the T×d matrix G of summed
clipped gradients, a lower-triangular T×T *strategy* C (jax_privacy's "encoder"), its noising matrix B = A C⁻¹ and
Z ~ N(0, σ²)^{T×d}; everything after C G + Z is post-processing, so the run is one Gaussian mechanism on C G whose
ℓ2-sensitivity depends on which steps one example may take part in (the *participation schema*). As in jax_privacy,
σ is the noise multiplier of the strategy scaled to **largest column norm 1**: a user-supplied matrix must already be
(``ValueError`` saying the norm found otherwise); the parametric strategies below are scaled on construction, and
``norm`` records the factor divided out.

Strategies (all lower-triangular; Toeplitz ones by their first column, trailing zeros trimmed):

- BandMF: b-banded Toeplitz given by its b coefficients (Choquette-Choo, Ganesh, McKenna, McMahan, Rush, Thakurta,
  Xu, "(Amplified) Banded Matrix Factorization", NeurIPS 2023, arXiv 2306.08153);
- BLT: buffered linear Toeplitz, c_0 = 1, c_k = Σ_i ω_i θ_i^{k−1} (Dvijotham, McMahan, Pillutla, Steinke,
  Thakurta 2024, arXiv 2404.16706, §2; jax_privacy's ``BufferedToeplitz``);
- BSR: the first p coefficients binom(2k, k)/4^k of the square root of the prefix-sum matrix (Kalinin & Lampert,
  "Banded square root matrix factorization", NeurIPS 2024, arXiv 2405.13763);
- ν-DP-FTRL: c^ν_k = binom(2k, k) 4^{−k} (1 − ν)^k (seed 001; research/corrdp-and-dp-ftrl.md §B2);
- a general lower-triangular T×T matrix.

Sensitivities (per unit clip norm, zero-out or add/remove; replace-one doubles them), each returned with whether it
is exact (:class:`Sensitivity`):

- single participation: the largest column norm;
- b-min-separation, at most k participations: exact for Toeplitz C with non-negative, non-increasing coefficients
  (Kalinin & Lampert 2024, Theorem 2: participations at 0, b, 2b, …), and for any C whose columns b or more apart are
  orthogonal — a strategy with at most b bands (Choquette-Choo et al. 2023, the VecSens dynamic programme, Alg. 3, on
  the squared column norms; jax_privacy's ``get_sensitivity_banded``); otherwise the upper bound of Choquette-Choo
  et al. 2023, Alg. 4 on |CᵀC| (jax_privacy's ``get_min_sep_sensitivity_upper_bound``);
- fixed-epoch ((k, b)-participation: steps i, i + t, i + 2t, …): √(max_i Σ_{a,b} |X_ab|) over each offset's steps,
  X = CᵀC (Choquette-Choo et al. 2022, §2, with the absolute-value trick of 2023, eq. (5); jax_privacy's
  ``fixed_epoch_sensitivity``): exact where those entries of X are ≥ 0 (the gradients all aligned attain it), an upper
  bound otherwise;
- at most one participation per epoch (shuffling, balls-and-bins): the Alg. 4 argument restricted to one column per
  epoch block (an upper bound), or the min-separation-1 bound, whichever is smaller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Sensitivity",
    "Strategy",
    "banded_toeplitz_strategy",
    "blt_strategy",
    "bsr_strategy",
    "dense_strategy",
    "epoch_block_sensitivity",
    "fixed_epoch_sensitivity",
    "minsep_sensitivity",
    "nu_ftrl_strategy",
    "operator_norm_bound",
    "toeplitz_strategy",
]

#: Largest T for the routes that form CᵀC (O(T²) memory).
MAX_DENSE_STEPS = 4096
#: A strategy's largest column norm must be 1 within this relative tolerance (jax_privacy's convention).
NORM_TOLERANCE = 1e-6
#: Relative margin added to every sensitivity used in a guarantee (sums are accurate to ~1e-13 relative).
SENSITIVITY_MARGIN = 1e-10


def _check_int(name: str, value: Any, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        try:
            import numpy as np

            if isinstance(value, np.integer) and value >= minimum:
                return int(value)
        except ImportError:  # pragma: no cover
            pass
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Strategy:
    """A lower-triangular T×T strategy matrix C with largest column norm 1 (jax_privacy's convention).

    Exactly one of ``coefficients`` (the first column of a Toeplitz C, trailing zeros trimmed, length ≤ ``steps``)
    and ``matrix`` (a dense T×T array) is set. ``norm`` is the largest column norm divided out on construction (1 for
    a user-supplied matrix). ``name`` is the mechanism (``bandmf``, ``blt``, ``bsr``, ``nu-ftrl``, ``matrix``,
    ``toeplitz``) and ``parameters`` what it was built from (for the report).
    """

    name: str
    steps: int
    coefficients: Any = None
    matrix: Any = None
    norm: float = 1.0
    parameters: dict = field(default_factory=dict)

    @property
    def is_toeplitz(self) -> bool:
        return self.coefficients is not None

    @property
    def bands(self) -> int:
        """The number of nonzero diagonals (1 for a diagonal C, T for a full lower-triangular one)."""
        if self.is_toeplitz:
            return len(self.coefficients)
        import numpy as np

        rows, cols = np.nonzero(self.matrix)
        return int(np.max(rows - cols)) + 1 if rows.size else 1

    def column_norms(self):
        """‖C_{:, j}‖₂ for j < T (Toeplitz: column j holds c_0 … c_{min(p, T − j) − 1})."""
        import numpy as np

        if self.is_toeplitz:
            c = np.asarray(self.coefficients, dtype=float)
            prefix = np.sqrt(np.cumsum(c * c))
            lengths = np.minimum(c.size, self.steps - np.arange(self.steps))
            return prefix[lengths - 1]
        return np.linalg.norm(self.matrix, axis=0)

    def nonnegative(self) -> bool:
        import numpy as np

        return bool(np.all((self.coefficients if self.is_toeplitz else self.matrix) >= 0))

    def nonincreasing_toeplitz(self) -> bool:
        """Toeplitz with non-negative, non-increasing coefficients (Kalinin & Lampert 2024 Thm 2's condition)."""
        import numpy as np

        if not self.is_toeplitz:
            return False
        c = np.asarray(self.coefficients, dtype=float)
        return bool(np.all(c >= 0) and np.all(np.diff(c) <= 1e-14 * c[0]))

    def dense(self):
        """C as a dense T×T array (T ≤ :data:`MAX_DENSE_STEPS`)."""
        import numpy as np

        if not self.is_toeplitz:
            return self.matrix
        _check_dense(self.steps, "the dense strategy")
        from scipy.linalg import toeplitz

        column = np.zeros(self.steps)
        column[: len(self.coefficients)] = self.coefficients
        return np.tril(toeplitz(column))

    def gram(self):
        """X = CᵀC (T ≤ :data:`MAX_DENSE_STEPS`)."""
        c = self.dense()
        return c.T @ c

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "steps": self.steps,
            "bands": self.bands,
            "toeplitz": self.is_toeplitz,
            "norm_divided_out": self.norm,
            "parameters": dict(self.parameters),
        }


def _check_dense(steps: int, what: str) -> None:
    if steps > MAX_DENSE_STEPS:
        raise ValueError(
            f"steps must be <= {MAX_DENSE_STEPS} for {what} (it forms the T x T Gram matrix); got {steps!r}"
        )


def _finite_vector(name: str, values: Any):
    import numpy as np

    try:
        a = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a 1-D array of numbers; got {values!r}") from None
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array; got shape {a.shape!r}")
    if not np.all(np.isfinite(a)):
        raise ValueError(
            f"{name} must be finite; got {float(a[~np.isfinite(a)][0])!r} at index {int(np.argmin(np.isfinite(a)))}"
        )
    return a


def toeplitz_strategy(
    coefficients: Any, steps: int, *, name: str = "toeplitz", normalize: bool = False, parameters: dict | None = None
) -> Strategy:
    """The lower-triangular Toeplitz strategy with first column ``coefficients`` (zero-padded or cut to ``steps``).

    Its largest column norm is ‖c_{0:T}‖ (column 0 holds every coefficient). ``normalize=True`` divides it out;
    otherwise it must be 1 (within 1e-6 relative).
    """
    import numpy as np

    steps = _check_int("steps", steps)
    c = _finite_vector("coefficients", coefficients)[:steps]
    nonzero = np.flatnonzero(c)
    if nonzero.size == 0:
        raise ValueError("coefficients must not all be zero")
    if c[0] == 0:
        raise ValueError(f"coefficients[0] must be nonzero (the strategy must be invertible); got {c[:4].tolist()!r}")
    c = c[: nonzero[-1] + 1]
    norm = float(np.linalg.norm(c))
    if normalize:
        c = c / norm
    elif abs(norm - 1.0) > NORM_TOLERANCE:
        raise ValueError(
            f"strategy must have largest column norm 1 (jax_privacy's convention: divide C by it and the noise "
            f"multiplier is relative to the result); got largest column norm {norm:.12g}"
        )
    c.setflags(write=False)
    return Strategy(
        name=name, steps=steps, coefficients=c, norm=norm if normalize else 1.0, parameters=dict(parameters or {})
    )


def banded_toeplitz_strategy(coefficients: Any, steps: int, *, bands: int | None = None) -> Strategy:
    """BandMF's strategy: b-banded Toeplitz with the b given coefficients (Choquette-Choo et al. 2023), norm 1.

    ``bands`` (optional) must equal the number of coefficients (after trailing zeros: fewer are allowed, a
    p-banded matrix is b-banded for every b ≥ p).
    """
    strategy = toeplitz_strategy(coefficients, steps, name="bandmf")
    if bands is not None:
        bands = _check_int("bands", bands)
        if strategy.bands > bands:
            raise ValueError(f"bands={bands} does not match the strategy, which has {strategy.bands} bands")
    return strategy


def bsr_strategy(bands: int, steps: int) -> Strategy:
    """BSR (Kalinin & Lampert 2024): the first p = ``bands`` coefficients binom(2k, k)/4^k of (1 − z)^{−1/2}, scaled
    to norm 1. Non-negative and non-increasing, so the min-separation sensitivity is exact."""
    import numpy as np

    bands = _check_int("bands", bands)
    steps = _check_int("steps", steps)
    k = np.arange(1, min(bands, steps), dtype=float)
    c = np.concatenate([[1.0], np.exp(np.cumsum(np.log1p(-0.5 / k)))])
    return toeplitz_strategy(c, steps, name="bsr", normalize=True, parameters={"bands": bands})


def nu_ftrl_strategy(nu: float, steps: int) -> Strategy:
    """ν-DP-FTRL (seed 001): c^ν_k = binom(2k, k) 4^{−k} (1 − ν)^k, k < T, scaled to norm 1 (divided by γ_T).

    The recursion c_k = c_{k−1}(1 − 1/(2k))(1 − ν) in log space (research/corrdp-and-dp-ftrl.md §B6.9); ν = 1 is
    the identity (DP-SGD)."""
    import numpy as np

    if isinstance(nu, bool) or not isinstance(nu, int | float) or not (0 <= nu <= 1):
        raise ValueError(f"nu must be a number in [0, 1]; got {nu!r}")
    steps = _check_int("steps", steps)
    if nu == 1:
        c = np.ones(1)
    else:
        k = np.arange(1, steps, dtype=float)
        log_c = np.concatenate([[0.0], np.cumsum(np.log1p(-0.5 / k) + math.log1p(-nu))])
        c = np.exp(log_c)
    return toeplitz_strategy(c, steps, name="nu-ftrl", normalize=True, parameters={"nu": float(nu)})


def blt_strategy(buf_decay: Any, output_scale: Any, steps: int) -> Strategy:
    """BLT (Dvijotham et al. 2024 §2; jax_privacy's ``BufferedToeplitz``): c_0 = 1, c_k = Σ_i ω_i θ_i^{k−1} for
    buffer decays θ_i ∈ [0, 1] and output scales ω_i, scaled to norm 1 over T steps."""
    import numpy as np

    theta = _finite_vector("buf_decay", buf_decay)
    omega = _finite_vector("output_scale", output_scale)
    if theta.shape != omega.shape:
        raise ValueError(f"buf_decay and output_scale must have the same length; got {theta.size} and {omega.size}")
    if np.any(theta < 0) or np.any(theta > 1):
        raise ValueError(f"buf_decay must lie in [0, 1]; got {theta.tolist()!r}")
    steps = _check_int("steps", steps)
    k = np.arange(steps - 1, dtype=float)
    c = np.concatenate([[1.0], (omega[:, None] * theta[:, None] ** k[None, :]).sum(axis=0)])
    params = {"buf_decay": theta.tolist(), "output_scale": omega.tolist()}
    return toeplitz_strategy(c, steps, name="blt", normalize=True, parameters=params)


def dense_strategy(matrix: Any, *, steps: int | None = None, name: str = "matrix") -> Strategy:
    """A general strategy: a finite lower-triangular T×T matrix with largest column norm 1 (within 1e-6).

    Raises ``ValueError`` (one line) when it is not 2-D square, not T×T for the run's ``steps``, not finite, not
    lower-triangular, or its largest column norm is not 1 (saying the norm found).
    """
    import numpy as np

    try:
        m = np.array(matrix, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("strategy must be a 2-D array of numbers") from None
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0:
        raise ValueError(f"strategy must be a square T x T matrix; got shape {m.shape!r}")
    if steps is not None and m.shape[0] != steps:
        raise ValueError(f"strategy must be T x T with T = {steps} steps of the run; got shape {m.shape!r}")
    _check_dense(m.shape[0], "a dense strategy")
    bad = ~np.isfinite(m)
    if bad.any():
        i, j = (int(v[0]) for v in np.nonzero(bad))
        raise ValueError(f"strategy must be finite; got {float(m[i, j])!r} at ({i}, {j})")
    upper = np.triu(m, 1)
    if upper.any():
        i, j = (int(v[0]) for v in np.nonzero(upper))
        raise ValueError(f"strategy must be lower-triangular; got {float(m[i, j])!r} above the diagonal at ({i}, {j})")
    norm = float(np.linalg.norm(m, axis=0).max())
    if abs(norm - 1.0) > NORM_TOLERANCE:
        raise ValueError(
            f"strategy must have largest column norm 1 (jax_privacy's convention: divide C by it and the noise "
            f"multiplier is relative to the result); got largest column norm {norm:.12g}"
        )
    m.setflags(write=False)
    return Strategy(name=name, steps=m.shape[0], matrix=m)


# --------------------------------------------------------------------------------------------
# Sensitivities
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Sensitivity:
    """An ℓ2-sensitivity per unit clip norm (zero-out / add-remove) and whether it is exact or an upper bound."""

    value: float
    exact: bool
    method: str
    participations: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "exact": self.exact,
            "method": self.method,
            "participations": self.participations,
        }


def true_max_participations(steps: int, min_separation: int, max_participations: int | None) -> int:
    """k = min(max_participations, ⌈T/b⌉): the most participations b apart that fit in T steps."""
    most = -(-steps // min_separation)
    return most if max_participations is None else min(most, max_participations)


def _kalinin_lampert(c, steps: int, b: int, k: int) -> float:
    """‖Σ_{j<k} C_{:, jb}‖₂ for Toeplitz C (Kalinin & Lampert 2024 Thm 2): a difference of block cumsums, O(T)."""
    import numpy as np

    full = np.zeros(-(-steps // b) * b)
    full[: min(len(c), steps)] = c[:steps]
    cumulative = np.cumsum(full.reshape(-1, b), axis=0)
    if k < cumulative.shape[0]:
        cumulative[k:] -= cumulative[:-k].copy()
    v = cumulative.ravel()[:steps]
    return float(math.sqrt(float(v @ v)))


def _vecsens(x, b: int, k: int) -> float:
    """max Σ_{i∈P} x_i over index sets P of at most k indices pairwise ≥ b apart (Choquette-Choo et al. 2023
    Alg. 3, VecSens): F[i, k] = max(x_i + F[i + b, k − 1], F[i + 1, k]), one right-to-left cummax per k."""
    import numpy as np

    n = len(x)
    f = np.zeros(n + b)
    for _ in range(k):
        g = f.copy()
        g[:n] = x + f[b : b + n]
        f = np.maximum.accumulate(g[::-1])[::-1]
    return float(f[0])


def _orthogonal_beyond(strategy: Strategy, separation: int) -> bool:
    """Columns ≥ ``separation`` apart have disjoint supports: at most ``separation`` bands."""
    return strategy.bands <= separation


def minsep_sensitivity(
    strategy: Strategy, *, min_separation: int, max_participations: int | None = None
) -> Sensitivity:
    """Sensitivity under b-min-separation participation with at most k participations (see the module docstring):
    exact for non-negative non-increasing Toeplitz C and for C with at most b bands, else Alg. 4's upper bound."""
    import numpy as np

    b = _check_int("min_separation", min_separation)
    if max_participations is not None:
        _check_int("max_participations", max_participations)
    steps = strategy.steps
    k = true_max_participations(steps, b, max_participations)
    if k == 1:
        return Sensitivity(value=float(strategy.column_norms().max()), exact=True, method="single", participations=1)
    if _orthogonal_beyond(strategy, b):
        norms = strategy.column_norms()
        value = math.sqrt(_vecsens(norms * norms, b, k))
        return Sensitivity(value=value, exact=True, method="banded (bands <= separation, VecSens)", participations=k)
    if strategy.nonincreasing_toeplitz():
        value = _kalinin_lampert(np.asarray(strategy.coefficients), steps, b, k)
        return Sensitivity(value=value, exact=True, method="Kalinin-Lampert Thm 2", participations=k)
    if steps > MAX_DENSE_STEPS:
        raise ValueError(
            f"strategy must be non-negative and non-increasing Toeplitz, or have at most min_separation={b} bands, "
            f"for min-separation sensitivity at steps={steps} > {MAX_DENSE_STEPS} (the general bound forms C^T C)"
        )
    x = np.abs(strategy.gram())
    rows = np.array([_vecsens(row, b, k) for row in x])
    value = math.sqrt(_vecsens(rows, b, k))
    return Sensitivity(value=value, exact=False, method="upper bound (Alg. 4 on |C^T C|)", participations=k)


def _toeplitz_gram_entries(c, steps: int, period: int):
    """X_{i, i+dt} for Toeplitz C, offsets d = 0, 1, …: X_{i,j} (i ≤ j, d = j − i) = Σ_{m ≤ T−1−j} c_m c_{m+d},
    a prefix sum P_d[T − 1 − j]. Returns the list of P_d for d = 0, t, 2t, … (O(T²/t) memory)."""
    import numpy as np

    full = np.zeros(steps)
    full[: len(c)] = c[:steps]
    out = []
    for d in range(0, steps, period):
        out.append(np.cumsum(full[: steps - d] * full[d:]))
    return out


def fixed_epoch_sensitivity(strategy: Strategy, *, period: int) -> Sensitivity:
    """Sensitivity when an example takes part in steps i, i + t, i + 2t, … < T for one offset i < t (a fixed order
    every epoch; Choquette-Choo et al. 2022 §2, 2023 eq. (5)): √(max_i Σ_{a,b} |X_ab|); exact when those entries
    are ≥ 0 (attained by aligned gradients), an upper bound otherwise. O(T²/t) for Toeplitz C."""
    import numpy as np

    t = _check_int("period", period)
    steps = strategy.steps
    k = -(-steps // t)
    if k == 1:
        return Sensitivity(value=float(strategy.column_norms().max()), exact=True, method="single", participations=1)
    best, negative = 0.0, False
    if strategy.is_toeplitz:
        prefixes = _toeplitz_gram_entries(np.asarray(strategy.coefficients), steps, t)
        for i in range(min(t, steps)):
            idx = np.arange(i, steps, t)
            total = 0.0
            for m in range(idx.size):  # the pairs (idx[a], idx[a + m]), d = m t apart
                values = prefixes[m][steps - 1 - idx[m:]]
                negative |= bool((values < 0).any())
                total += float(np.abs(values).sum()) * (1 if m == 0 else 2)
            best = max(best, total)
    else:
        x = strategy.gram()
        for i in range(min(t, steps)):
            sub = x[np.ix_(np.arange(i, steps, t), np.arange(i, steps, t))]
            negative |= bool((sub < 0).any())
            best = max(best, float(np.abs(sub).sum()))
    method = "fixed-epoch" + (" (upper bound: |X| has negative entries)" if negative else "")
    return Sensitivity(value=math.sqrt(best), exact=not negative, method=method, participations=k)


def epoch_block_sensitivity(strategy: Strategy, *, period: int) -> Sensitivity:
    """An upper bound when an example takes part at most once in each epoch block [et, (e + 1)t) at any step
    (shuffling, balls-and-bins): Alg. 4 of Choquette-Choo et al. 2023 with "one index per block" in place of the
    min-separation constraint (v_r = Σ_blocks max_{c∈block} |X_rc|, then Σ_blocks max_{r∈block} v_r), or the
    min-separation-1 sensitivity with k = the number of epochs, whichever is smaller (both are valid)."""
    import numpy as np

    t = _check_int("period", period)
    steps = strategy.steps
    epochs = -(-steps // t)
    if epochs == 1:
        return Sensitivity(value=float(strategy.column_norms().max()), exact=True, method="single", participations=1)
    candidates = []
    if strategy.nonincreasing_toeplitz() or strategy.bands <= 1:
        candidates.append(minsep_sensitivity(strategy, min_separation=1, max_participations=epochs).value)
    if steps <= MAX_DENSE_STEPS:
        x = np.abs(strategy.gram())
        pad = epochs * t - steps
        xp = np.pad(x, ((0, pad), (0, pad)))
        v = xp.reshape(epochs * t, epochs, t).max(axis=2).sum(axis=1)
        candidates.append(math.sqrt(float(v.reshape(epochs, t).max(axis=1).sum())))
    if not candidates:
        raise ValueError(
            f"steps must be <= {MAX_DENSE_STEPS} for this strategy under one-participation-per-epoch sampling "
            f"(it is not non-negative non-increasing Toeplitz); got {steps!r}"
        )
    return Sensitivity(
        value=min(candidates), exact=False, method="upper bound (one participation per epoch)", participations=epochs
    )


def operator_norm_bound(strategy: Strategy) -> float:
    """An upper bound on the spectral norm ‖C‖₂: the Schur test √(‖C‖₁‖C‖_∞) (largest absolute column sum times largest
    absolute row sum; for Toeplitz C both are Σ_{k<T} |c_k|), or, for a dense C of T ≤ 2048, the computed largest
    singular value raised by a relative 1e-9 (LAPACK's is accurate to ~1e-15 relative), whichever is smaller."""
    import numpy as np

    if strategy.is_toeplitz:
        return float(np.abs(np.asarray(strategy.coefficients)[: strategy.steps]).sum()) * (1 + 1e-12)
    c = np.abs(strategy.matrix)
    schur = math.sqrt(float(c.sum(axis=0).max()) * float(c.sum(axis=1).max())) * (1 + 1e-12)
    if strategy.steps <= 2048:
        return min(schur, float(np.linalg.norm(strategy.matrix, 2)) * (1 + 1e-9))
    return schur
