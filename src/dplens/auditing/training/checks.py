"""The named implementation checks of a DP-SGD step: each a statistical test with a one-line finding.

Each check gets its share α_i of the Bonferroni split of α (over all checks, the audit and the model-based bound), so
a correct implementation is flagged by any of them with probability ≤ α. Verdicts: **VIOLATION** — a departure the
accountant's ε does not cover (less noise, larger sensitivity, a higher or undeclared sampling law, non-fresh or
rank-deficient noise, actual-batch normalisation, non-finite leakage); **DEVIATION** — a conservative departure
(more noise, a smaller clip, a constant normaliser other than the declared one), reported, not a violation;
**PASS**; **INCONCLUSIVE** where the test lacks power.

The step checks run on *probe calls*: batches formed by dplens, in sizes b_lo < b_mid = B < b_hi, whose rows are
Dirac vectors on their own coordinates — A rows of norm C/2 (below the clip: they measure the normaliser), one H
row of norm 10·C (it must contribute C: per-sample clipping, not the batch's sum clipped as a whole), and
coordinates no row touches (the noise alone). Non-finite probes add a row holding NaN or +inf (jax_privacy's
``nan_safe`` semantics: the update stays finite and that row contributes at most C).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from dplens.auditing.training.declared import Declaration
from dplens.auditing.training.framework_free import reseed_globals

__all__ = ["Check", "Probes", "run_probes", "sampling_check", "step_checks"]

PASS, DEVIATION, VIOLATION, INCONCLUSIVE = "PASS", "DEVIATION", "VIOLATION", "INCONCLUSIVE"
_FREE = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One named check: its verdict, the measured and the declared value, and a one-line finding."""

    name: str
    verdict: str
    measured: float | None
    declared: float | None
    quantity: str
    finding: str
    significance: float
    details: dict[str, Any] = field(default_factory=dict)
    #: not counted in the overall verdict because the user stated an assumption that makes it moot (the check still
    #: ran and its verdict and finding are its own); ``exclusion_reason`` names the assumption
    excluded_from_overall: bool = False
    exclusion_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "verdict": self.verdict,
            "measured": _finite(self.measured),
            "declared": _finite(self.declared),
            "quantity": self.quantity,
            "finding": self.finding,
            "significance": self.significance,
            "details": {k: _finite(v) if isinstance(v, float) else v for k, v in self.details.items()},
            "excluded_from_overall": self.excluded_from_overall,
            "exclusion_reason": self.exclusion_reason,
        }


def _finite(value: Any) -> Any:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Probes:
    """What the probe calls returned: per batch size, the A rows' and the H row's outputs, and the free noise."""

    sizes: tuple[int, int, int]
    a_mean: dict[int, np.ndarray]  # per size: the mean of the call's A entries, one per call
    a_rows: dict[int, int]
    h: dict[int, np.ndarray]
    noise: np.ndarray  # (calls, free): coordinates no row touches
    sequence: np.ndarray  # the probe sequence of each call
    nonfinite: np.ndarray | None  # (calls, 4) outputs on the non-finite rows' coordinates, or None when it raised
    nonfinite_bad: int
    nonfinite_error: str | None
    accounting: tuple | None = None  # per probe call: what the step told its own accountant (framework adapters)
    physical: int | None = None  # the subject's physical batch size (gradient accumulation), if any


def probe_sizes(b: int) -> tuple[int, int, int]:
    mid = max(b, 4)
    return max(3, mid // 2), mid, 2 * mid


def _probe_batch(size: int, dim: int, clip: float) -> np.ndarray:
    grads = np.zeros((size, dim))
    a = size - 1
    grads[np.arange(a), np.arange(a)] = clip / 2  # A rows: norm C/2 on coordinates 0..a-1
    grads[a, dim - _FREE - 5] = 10 * clip  # the H row: norm 10 C
    return grads


def _calls(decl: Declaration) -> int:
    mid = probe_sizes(decl.batch_size)[1]
    return int(min(30000, max(3000, math.ceil(3e5 * decl.noise_multiplier**2 / mid))))


def run_probes(subject, decl: Declaration, seed: np.random.SeedSequence, calls: int | None = None) -> Probes:
    """Probe calls in sequences of up to 50 (one generator per sequence, the globals re-seeded before each)."""
    sizes = probe_sizes(decl.batch_size)
    dim = sizes[2] - 1 + 1 + 4 + _FREE
    calls = _calls(decl) if calls is None else calls
    length = min(50, decl.steps)
    batches = {b: _probe_batch(b, dim, decl.max_grad_norm) for b in sizes}
    a_mean = {b: [] for b in sizes}
    h = {b: [] for b in sizes}
    noise, sequence = np.empty((calls, _FREE)), np.empty(calls, dtype=np.int64)
    rng, records = None, []
    for i in range(calls):
        if i % length == 0:
            child = np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, i // length))
            globals_seed, step_seed = child.spawn(2)
            reseed_globals(globals_seed)
            rng = np.random.default_rng(step_seed)
        b = sizes[i % 3]
        u = subject(batches[b], rng, f"probe call {i}, batch of {b}")
        a_mean[b].append(u[: b - 1].mean())
        h[b].append(u[dim - _FREE - 5])
        noise[i], sequence[i] = u[dim - _FREE :], i // length
        records.append(subject.accounting())
    nonfinite, bad, error = _nonfinite_probes(subject, decl, seed, dim, min(300, calls))
    return Probes(
        sizes=sizes,
        a_mean={b: np.asarray(v) for b, v in a_mean.items()},
        a_rows={b: b - 1 for b in sizes},
        h={b: np.asarray(v) for b, v in h.items()},
        noise=noise,
        sequence=sequence,
        nonfinite=nonfinite,
        nonfinite_bad=bad,
        nonfinite_error=error,
        accounting=None if records[0] is None else tuple(records),
        physical=subject.physical_batch_size,
    )


def _nonfinite_probes(subject, decl: Declaration, seed: np.random.SeedSequence, dim: int, calls: int = 300):
    b = probe_sizes(decl.batch_size)[1]
    grads = _probe_batch(b, dim, decl.max_grad_norm)
    base = dim - _FREE - 4
    grads = np.vstack([grads[:-1], np.zeros((2, dim))])
    grads[-2, base], grads[-2, base + 1] = np.nan, decl.max_grad_norm / 2
    grads[-1, base + 2], grads[-1, base + 3] = np.inf, decl.max_grad_norm / 2
    rng = np.random.default_rng(np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, 10**6)))
    out, bad = np.empty((calls, 4)), 0
    for i in range(calls):
        try:
            u = subject(grads, rng, f"non-finite probe call {i}", finite_input=False)
        except ValueError as err:
            if "returned shape" in str(err) or "not a numeric array" in str(err):
                raise
            return None, 0, str(err).removeprefix("check_dp_sgd: ")
        bad += int(not np.all(np.isfinite(u)))
        out[i] = u[base : base + 4]
    return out, bad, None


def _z(alpha: float) -> float:
    return float(stats.norm.isf(alpha))


def _gain(p: Probes, b: int, s: float, clip: float) -> tuple[float, float]:
    """The gain 1/normaliser at size ``b`` (from the A rows of norm C/2) and its standard error."""
    values = p.a_mean[b]
    n = values.size * p.a_rows[b]
    return float(values.mean()) / (clip / 2), s / math.sqrt(n) / (clip / 2)


def _noise_std(p: Probes, decl: Declaration) -> tuple[float, float, float]:
    squares, n = float(np.sum(p.noise**2)), p.noise.size
    return math.sqrt(squares / n), squares, n


def _ratio_words(ratio: float, b: int) -> str:
    if b > 1 and abs(ratio / b - 1) < 0.1:
        return ": noise calibrated for the sum added to the mean (more noise than declared)"
    if b > 1 and abs(ratio * b - 1) < 0.1:
        return ": noise calibrated for the mean added to the sum (1/B of the declared noise)"
    return ""


def noise_std_check(p: Probes, decl: Declaration, alpha: float) -> Check:
    """The effective noise multiplier σ_eff = (noise std)·n̂/C against σ (χ² interval × normal interval, α/4 each
    side, so the σ_eff interval covers with probability ≥ 1 − α)."""
    sigma, clip, mid = decl.noise_multiplier, decl.max_grad_norm, p.sizes[1]
    s, squares, n = _noise_std(p, decl)
    declared_std = sigma * clip / decl.normaliser
    name, quantity = "noise_std", "effective noise multiplier (noise std x normaliser / C)"
    if s == 0.0:
        return Check(
            name=name,
            verdict=VIOLATION,
            measured=0.0,
            declared=sigma,
            quantity=quantity,
            significance=alpha,
            finding=f"no noise: the update is deterministic (declared noise std {declared_std:.4g})",
        )
    s_lo = math.sqrt(squares / stats.chi2.isf(alpha / 4, n))
    s_hi = math.sqrt(squares / stats.chi2.ppf(alpha / 4, n))
    gain, se = _gain(p, mid, s, clip)
    g_lo, g_hi = gain - _z(alpha / 4) * se, gain + _z(alpha / 4) * se
    measured = s / (gain * clip) if gain > 0 else math.inf
    lo = s_lo / (g_hi * clip) if g_hi > 0 else math.inf
    hi = s_hi / (g_lo * clip) if g_lo > 0 else math.inf
    head = (
        f"effective noise multiplier {measured:.4g} (interval [{lo:.4g}, {hi:.4g}]) against the declared {sigma:g};"
        f" noise std {s:.4g} per coordinate, declared sigma*C/{decl.normaliser:g} = {declared_std:.4g}"
    )
    if hi < sigma:
        verdict, finding = VIOLATION, f"less noise than accounted: {head}{_ratio_words(measured / sigma, mid)}"
    elif lo > sigma:
        verdict, finding = (
            DEVIATION,
            f"more noise than accounted (conservative): {head}{_ratio_words(measured / sigma, mid)}",
        )
    elif hi - lo > 0.1 * sigma:
        verdict, finding = INCONCLUSIVE, f"too few probe calls to tell within 5 %: {head}"
    else:
        verdict, finding = PASS, head
    return Check(
        name=name,
        verdict=verdict,
        measured=measured,
        declared=sigma,
        quantity=quantity,
        finding=finding,
        significance=alpha,
        details={"noise_std": s, "declared_noise_std": declared_std, "lower": lo, "upper": hi, "noise_draws": int(n)},
    )


def normalisation_check(p: Probes, decl: Declaration, alpha: float) -> Check:
    """The normaliser: constant across batch sizes (else the actual batch size: VIOLATION), and equal to the declared
    B or 1 (else a DEVIATION: sum against mean; privacy then rests on the noise_std check)."""
    s = _noise_std(p, decl)[0]
    lo_b, mid, hi_b = p.sizes
    g = {b: _gain(p, b, s, decl.max_grad_norm) for b in p.sizes}
    name, quantity = "normalisation", "normaliser at the expected batch size"
    measured = 1 / g[mid][0] if g[mid][0] > 0 else math.inf
    details = {f"normaliser_at_{b}": (1 / g[b][0] if g[b][0] > 0 else math.inf) for b in p.sizes}
    z_actual = (g[lo_b][0] - g[hi_b][0]) / math.hypot(g[lo_b][1], g[hi_b][1])
    if abs(z_actual) > _z(alpha / 4):
        finding = (
            f"the normaliser follows the batch: {details[f'normaliser_at_{lo_b}']:.4g} at b = {lo_b}, "
            f"{details[f'normaliser_at_{hi_b}']:.4g} at b = {hi_b} (declared {decl.normaliser:g} for every "
            "batch): division by the actual batch size, which the accountant does not cover"
        )
        return Check(
            name=name,
            verdict=VIOLATION,
            measured=measured,
            declared=decl.normaliser,
            quantity=quantity,
            finding=finding,
            significance=alpha,
            details=details,
        )
    z_declared = (g[mid][0] - 1 / decl.normaliser) / g[mid][1]
    words = f"the update is divided by {measured:.4g} (declared {decl.normaliser:g}, normalise={decl.normalise!r})"
    if abs(z_declared) > _z(alpha / 4):
        kind = "the noisy sum, not the mean" if abs(measured - 1) < 0.1 * max(1, measured) else "another constant"
        return Check(
            name=name,
            verdict=DEVIATION,
            measured=measured,
            declared=decl.normaliser,
            quantity=quantity,
            significance=alpha,
            details=details,
            finding=f"{words}: {kind}; a constant normaliser is post-processing, privacy rests on noise_std",
        )
    verdict = INCONCLUSIVE if g[mid][1] > 0.05 * abs(g[mid][0]) else PASS
    return Check(
        name=name,
        verdict=verdict,
        measured=measured,
        declared=decl.normaliser,
        quantity=quantity,
        finding=words + ", the same at every batch size",
        significance=alpha,
        details=details,
    )


def clipping_check(p: Probes, decl: Declaration, alpha: float) -> Check:
    """A record of norm 10·C contributes C (per-sample clipping): its output against twice an A row's (norm C/2)."""
    s = _noise_std(p, decl)[0]
    mid = p.sizes[1]
    h, a = p.h[mid], p.a_mean[mid]
    a_mean = float(a.mean())
    name, quantity = "clipping", "contribution of a record of norm 10 C, in units of C"
    measured = float(h.mean()) / (2 * a_mean) if a_mean > 0 else math.inf
    se = s * math.sqrt(1 / h.size + 4 / (a.size * p.a_rows[mid]))
    z = (float(h.mean()) - 2 * a_mean) / se
    head = f"a record of norm 10 C contributes {measured:.4g} C (declared: at most C, clipped per sample)"
    if z > _z(alpha / 2):
        verdict = VIOLATION
        head += ": not clipped per sample (no clipping, a larger clip, or the batch's sum clipped as a whole)"
    elif z < -_z(alpha / 2):
        verdict, head = DEVIATION, head + ": clipped below C (conservative)"
    else:
        verdict = INCONCLUSIVE if se / (2 * abs(a_mean) + 1e-300) > 0.1 else PASS
    return Check(
        name=name,
        verdict=verdict,
        measured=measured,
        declared=1.0,
        quantity=quantity,
        finding=head,
        significance=alpha,
        details={"z": z},
    )


def _orthonormal(top: np.ndarray, bottom: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    f = top.size
    basis = np.column_stack([top, bottom, rng.standard_normal((f, f - 2))])
    q, _ = np.linalg.qr(basis)
    return q


def gaussian_check(p: Probes, decl: Declaration, alpha: float, rng: np.random.Generator) -> Check:
    """Noise independent across coordinates and Gaussian: the most and least noisy directions of the first half of
    the probe calls, tested on the second half (F(n, n(f − 2)) against the other directions: exact under i.i.d.
    Gaussian noise), and a Kolmogorov–Smirnov test of the standardised noise (scale estimated per probe batch size, so
    noise whose scale follows the batch — added at every physical step — is not mistaken for non-Gaussian noise;
    estimated scale: conservative)."""
    z = p.noise
    name, quantity = "noise_gaussian_independent", "largest variance ratio of a direction to the others"
    half = z.shape[0] // 2
    first, second = z[:half], z[half:]
    _, vectors = np.linalg.eigh(first.T @ first)
    w = second @ _orthonormal(vectors[:, -1], vectors[:, 0], rng)
    rest = float(np.mean(w[:, 2:] ** 2))
    total = float(np.mean(second**2))
    if total == 0.0 or rest <= 1e-12 * total:
        return Check(
            name=name,
            verdict=VIOLATION,
            measured=math.inf,
            declared=1.0,
            quantity=quantity,
            significance=alpha,
            finding="the noise lies in one or two directions (rank-one noise: one draw "
            "broadcast over the vector); every other direction is noiseless",
        )
    n2 = w.shape[0]
    dof = n2 * (w.shape[1] - 2)
    top, bottom = float(np.mean(w[:, 0] ** 2)) / rest, float(np.mean(w[:, 1] ** 2)) / rest
    p_top, p_bottom = stats.f.sf(top, n2, dof), stats.f.cdf(bottom, n2, dof)
    group = np.arange(half, z.shape[0]) % 3  # the probe batch size of each call: its noise scale may differ by size
    sample = np.concatenate(
        [(w[group == g, 2:] / math.sqrt(max(float(np.mean(w[group == g, 2:] ** 2)), 1e-300))).ravel() for g in range(3)]
    )[:: max(1, (w.shape[0] * (w.shape[1] - 2)) // 100000)]
    ks = stats.kstest(sample, "norm")
    details = {"top_ratio": top, "bottom_ratio": bottom, "ks_statistic": float(ks.statistic), "ks_p": float(ks.pvalue)}
    if p_top < alpha / 3:
        finding = (
            f"one direction carries {top:.4g}x the noise variance of the others (correlated or rank-deficient "
            "noise; declared: i.i.d. N(0, sigma^2 C^2) per coordinate)"
        )
    elif p_bottom < alpha / 3:
        finding = f"one direction carries {bottom:.4g}x the noise variance of the others: nearly noiseless"
    elif ks.pvalue < alpha / 3:
        finding = f"the standardised noise is not Gaussian (Kolmogorov-Smirnov D = {ks.statistic:.4g})"
    else:
        return Check(
            name=name,
            verdict=PASS,
            measured=top,
            declared=1.0,
            quantity=quantity,
            significance=alpha,
            details=details,
            finding=f"noise i.i.d. Gaussian across coordinates (variance ratios {top:.4g}, "
            f"{bottom:.4g}; KS D = {ks.statistic:.3g})",
        )
    return Check(
        name=name,
        verdict=VIOLATION,
        measured=top,
        declared=1.0,
        quantity=quantity,
        finding=finding,
        significance=alpha,
        details=details,
    )


def _mean_cosine(first: np.ndarray, second: np.ndarray) -> tuple[float, float]:
    """The mean of the rows' dot products of unit vectors and its z statistic √(n f)·mean (0, 0 without pairs)."""
    if first.shape[0] == 0:
        return 0.0, 0.0
    mean = float(np.mean(np.sum(first * second, axis=1)))
    return mean, mean * math.sqrt(first.shape[0] * first.shape[1])


def fresh_check(p: Probes, decl: Declaration, alpha: float, prints: np.ndarray | None) -> Check:
    """Fresh noise at every step and training: no repeated noise vector among the probe calls, no positive correlation
    between consecutive calls (α/2) or between sequences at the same step (α/2), and no first-step noise (two untouched
    coordinates) of the audit's trainings repeated in another training (by chance: probability ~n²·2⁻⁴⁹ in float32).

    The correlations are the mean cosines u_i·u_j of the paired calls' noise directions u = z/‖z‖, each call
    standardised by its own norm: for independent isotropic noise of any per-call scale each cosine has mean 0 and
    variance 1/f (f free coordinates) and distinct pairs are uncorrelated, so √(n f)·mean is standard normal whatever
    the scales. One pooled scale would not be: noise whose scale follows the probe's batch size (added at every
    physical batch) paired at equal scales inflates the variance of the pooled statistic by E[s⁴]/E[s²]² (the
    defect 724f7f2 fixed in the Gaussianity check)."""
    z = p.noise
    name, quantity = "fresh_noise", "correlation of consecutive calls' noise"
    repeats = z.shape[0] - np.unique(z, axis=0).shape[0]
    u = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-300)
    same = p.sequence[1:] == p.sequence[:-1]
    lag, z_lag = _mean_cosine(u[1:][same], u[:-1][same])
    length = int(np.sum(p.sequence == 0))
    cross, z_cross = _mean_cosine(u[length:], u[:-length]) if length < z.shape[0] else (0.0, 0.0)
    train_repeats = 0
    if prints is not None and prints.size:
        pairs = prints.reshape(-1, 2)  # a pair of float32 values collides with probability ~2^-48, one ~2^-24
        train_repeats = int(pairs.shape[0] - np.unique(pairs, axis=0).shape[0])
    details = {
        "repeated_probe_noise": int(repeats),
        "lag_correlation": lag,
        "sequence_correlation": cross,
        "repeated_training_noise": train_repeats,
    }
    if repeats or train_repeats:
        finding = (
            f"noise repeats: {repeats} probe calls and {train_repeats} trainings' first-step noise "
            "repeat earlier ones (a generator re-seeded to the same state)"
        )
    elif z_lag > _z(alpha / 2):
        finding = f"consecutive calls' noise is correlated ({lag:.4g}): not fresh at every step"
    elif z_cross > _z(alpha / 2):
        finding = f"noise of separate probe sequences is correlated ({cross:.4g}): not fresh for every training"
    else:
        return Check(
            name=name,
            verdict=PASS,
            measured=lag,
            declared=0.0,
            quantity=quantity,
            significance=alpha,
            details=details,
            finding=f"fresh noise at every call (lag correlation {lag:.3g}, across sequences {cross:.3g}, no repeats)",
        )
    return Check(
        name=name,
        verdict=VIOLATION,
        measured=lag,
        declared=0.0,
        quantity=quantity,
        finding=finding,
        significance=alpha,
        details=details,
    )


#: What a non_finite_rows VIOLATION tells the user to do (one line): the leak is real, but a training whose per-sample
#: gradients are finite by construction never releases it, and may say so.
NONFINITE_REMEDY = (
    "guard the per-sample gradients (torch.nan_to_num, or skip non-finite rows) or, if they are finite by "
    "construction, state assume_finite_gradients=True (--assume-finite-gradients)"
)


def nonfinite_check(p: Probes, decl: Declaration, alpha: float) -> Check:
    """A NaN or +inf row must leave the update finite and contribute at most C (jax_privacy's ``nan_safe``): else
    the release reveals that a record's gradient was non-finite, which the accountant's ε does not cover."""
    name, quantity = "non_finite_rows", "non-finite updates with one NaN or inf row"
    if p.nonfinite is None:
        return Check(
            name=name,
            verdict=INCONCLUSIVE,
            measured=None,
            declared=0.0,
            quantity=quantity,
            significance=alpha,
            finding=f"not tested: {p.nonfinite_error} (a crash on a non-finite "
            "gradient is itself observable; nan_safe semantics expected)",
        )
    calls = p.nonfinite.shape[0]
    if p.nonfinite_bad:
        return Check(
            name=name,
            verdict=VIOLATION,
            measured=float(p.nonfinite_bad),
            declared=0.0,
            quantity=quantity,
            significance=alpha,
            finding=f"{p.nonfinite_bad} of {calls} updates non-finite when one row holds "
            f"NaN or inf: the release reveals that row; {NONFINITE_REMEDY}",
        )
    s = _noise_std(p, decl)[0]
    gain = _gain(p, p.sizes[1], s, decl.max_grad_norm)[0]
    unit = decl.max_grad_norm * gain
    means = p.nonfinite.mean(axis=0)
    z = (np.abs(means) - unit) / (s / math.sqrt(calls))
    worst = float(np.max(np.abs(means)) / unit) if unit > 0 else math.inf
    if np.any(z > _z(alpha / 8)):
        return Check(
            name=name,
            verdict=VIOLATION,
            measured=0.0,
            declared=0.0,
            quantity=quantity,
            significance=alpha,
            finding=f"a non-finite row contributes {worst:.4g} C on a coordinate (more than the clip C); "
            f"{NONFINITE_REMEDY}",
        )
    return Check(
        name=name,
        verdict=PASS,
        measured=0.0,
        declared=0.0,
        quantity=quantity,
        significance=alpha,
        finding=f"the update stays finite with a NaN or inf row; its contribution {worst:.3g} C at most",
    )


def _variance_growth(p: Probes, physical: np.ndarray) -> tuple[float, float, int, int]:
    """The noise variance of the update at the most physical batches against the fewest (F ratio, its p-value)."""
    low, high = int(physical.min()), int(physical.max())
    if low == high:
        return 1.0, 1.0, low, high
    a, b = p.noise[physical == high], p.noise[physical == low]
    ratio = float(np.mean(a**2) / max(float(np.mean(b**2)), 1e-300))
    return ratio, float(stats.f.sf(ratio, a.size, b.size)), low, high


def accumulation_check(p: Probes, decl: Declaration, alpha: float) -> Check:
    """Gradient accumulation and what the framework's accountant was told (jax_privacy issue 234 / PR 287: a rate at
    the physical batch size under-accounts): exactly one noised step per logical batch, and a rate given to the
    accountant per logical batch not below the logical batches' rate 1/⌈N/B⌉ (what Opacus's ``make_private`` derives
    from a loader of batches of B; B/N when B divides N) — exact counts from the adapter's record, no test — and the
    update's noise variance against the number of physical batches (F test at α: noise added at each physical step
    grows with it). Fewer rate or steps than ran: VIOLATION; noise at every physical step: DEVIATION (the logical
    update carries more noise and the accountant counts more steps: conservative)."""
    records = p.accounting
    noised = np.array([r.noised_steps for r in records])
    physical = np.array([r.physical_batches for r in records])
    rates = np.array([r.rate for r in records])
    q_ref = 1 / math.ceil(decl.dataset_size / decl.batch_size)
    split = (
        f"logical batches split into physical batches of at most {p.physical}"
        if p.physical
        else "no max_physical_batch_size: one physical batch per logical batch"
    )
    ratio, p_growth, k_lo, k_hi = _variance_growth(p, physical)
    details = {
        "noised_steps_mean": float(noised.mean()),
        "rate_given_min": float(rates.min()),
        "logical_rate": q_ref,
        "physical_batches_max": int(k_hi),
        "noise_variance_ratio": ratio,
    }
    common = dict(
        name="gradient_accumulation",
        measured=float(noised.mean()),
        declared=1.0,
        quantity="noised optimizer steps per logical batch",
        significance=alpha,
        details=details,
    )
    silent, low = int(np.sum(noised == 0)), int(np.sum(rates < q_ref * (1 - 1e-9)))
    if silent:
        return Check(
            verdict=VIOLATION,
            finding=f"{silent} of {noised.size} logical batches told the accountant nothing (no noised step "
            f"recorded; {split}): it counts fewer steps than the training took",
            **common,
        )
    if low:
        worst = float(rates.min())
        words = f" (the physical batch {p.physical} over B = {decl.batch_size})" if p.physical else ""
        return Check(
            verdict=VIOLATION,
            finding=f"the accountant was given q = {worst:.5g} per logical batch, below the logical batches' rate "
            f"{q_ref:.5g} ({worst / q_ref:.3g}x{words}): accounted at the physical batch size, its epsilon does not "
            f"cover the logical batches ({low} of {noised.size} probe batches; {split})",
            **common,
        )
    if noised.max() > 1 or p_growth < alpha:
        return Check(
            verdict=DEVIATION,
            finding=f"noise added at every physical step: {noised.mean():.3g} noised steps per logical batch (up to "
            f"{k_hi} physical batches; noise variance {ratio:.3g}x at {k_hi} physical batches against {k_lo}; "
            f"declared one per logical batch): more noise in the update and more steps accounted (conservative)",
            **common,
        )
    return Check(
        verdict=PASS,
        finding=f"one noised step per logical batch ({split}; up to {k_hi} physical batches per probe batch, noise "
        f"variance ratio {ratio:.3g}); the accountant was given q = {rates.min():.5g} per logical batch (logical "
        f"rate {q_ref:.5g})",
        **common,
    )


def step_checks(
    p: Probes, decl: Declaration, alpha: float, rng: np.random.Generator, prints: np.ndarray | None
) -> list[Check]:
    """The six step checks, each at ``alpha``, and the gradient-accumulation check where the subject records what it
    told its own accountant (a framework adapter)."""
    found = [
        noise_std_check(p, decl, alpha),
        gaussian_check(p, decl, alpha, rng),
        normalisation_check(p, decl, alpha),
        clipping_check(p, decl, alpha),
        fresh_check(p, decl, alpha, prints),
        nonfinite_check(p, decl, alpha),
    ]
    if p.accounting is not None:
        found.append(accumulation_check(p, decl, alpha))
    return found


def _sampler_runs(source, decl: Declaration, seed: np.random.SeedSequence) -> list[list[np.ndarray]]:
    runs = int(max(10, min(200, 2e7 // (decl.steps * decl.dataset_size), 2000 // decl.steps)))
    out = []
    for r, child in enumerate(seed.spawn(runs)):
        globals_seed, batch_seed = child.spawn(2)
        reseed_globals(globals_seed)
        out.append(list(source.batches(np.random.default_rng(batch_seed), f"sampling check run {r}")))
    return out


def _poisson_law(runs: list[list[np.ndarray]], decl: Declaration, alpha: float) -> tuple[str, str, float]:
    """Three tests at α/3 each: the inclusion rate (total inclusions ~ Bin(R·T·N, q)), the batch-size variance
    (Binomial(N, q) sizes) and the dispersion of each record's count per training (Binomial(T, q), independent)."""
    n, t, q = decl.dataset_size, decl.steps, decl.sampling_rate
    sizes = np.array([[b.size for b in batches] for batches in runs], dtype=float)
    cells = sizes.size * n
    rate = sizes.sum() / cells
    z_rate = (rate - q) / math.sqrt(q * (1 - q) / cells)
    v = n * q * (1 - q)
    mu4 = v * (1 + 3 * (n - 2) * q * (1 - q))
    z_var = (sizes.var(ddof=1) - v) / math.sqrt(max(mu4 - v**2, 1e-300) / sizes.size)
    counts = np.stack([np.bincount(np.concatenate(batches), minlength=n) for batches in runs]).astype(float)
    vt = t * q * (1 - q)
    statistic = float(np.sum((counts - t * q) ** 2) / vt)
    terms = counts.size
    z_disp = (statistic - terms) / math.sqrt(terms * (1 / vt + 2 - 6 / t))
    cut = _z(alpha / 6)
    dispersion = statistic / terms
    if z_rate > cut:
        return VIOLATION, f"inclusion rate {rate:.5g} above the declared q = {q:.5g}", rate / q
    if abs(z_var) > cut:
        return (
            VIOLATION,
            f"batch-size variance {sizes.var(ddof=1):.4g} against Binomial(N, q)'s {v:.4g}: not "
            f"Poisson sampling (fixed-size batches give 0)",
            dispersion,
        )
    if abs(z_disp) > cut:
        return (
            VIOLATION,
            f"per-record inclusion counts have {dispersion:.4g}x the Binomial(T, q) variance: not "
            "independent across steps (a shuffled or epoch loader gives about 0)",
            dispersion,
        )
    if z_rate < -cut:
        return DEVIATION, f"inclusion rate {rate:.5g} below the declared q = {q:.5g} (conservative)", dispersion
    return (
        PASS,
        (
            f"Poisson at rate {rate:.5g} (declared {q:.5g}); batch-size variance {sizes.var(ddof=1):.4g} "
            f"(Binomial: {v:.4g}); inclusion dispersion {dispersion:.4g}"
        ),
        dispersion,
    )


def _epoch_law(runs: list[list[np.ndarray]], decl: Declaration) -> tuple[str, str, float]:
    """Each record exactly once per epoch of ⌈N/B⌉ steps (shuffle, cyclic, balls-and-bins, ...), deterministic."""
    n, b = decl.dataset_size, decl.batch_size
    length = math.ceil(n / b)
    good = total = 0
    for batches in runs:
        for start in range(0, len(batches) - length + 1, length):
            window = np.concatenate(batches[start : start + length])
            total += 1
            good += int(window.size == n and np.array_equal(np.sort(window), np.arange(n)))
    if total == 0:
        return INCONCLUSIVE, f"no complete epoch of {length} steps in T = {decl.steps}", math.nan
    fixed = decl.sampler in ("shuffle", "shuffle-once", "cyclic")
    sizes_ok = not fixed or all(
        x.size == b for batches in runs for k, x in enumerate(batches) if k % length < length - 1
    )
    share = good / total
    if share < 1 or not sizes_ok:
        return (
            VIOLATION,
            f"{total - good} of {total} epochs do not hold each record exactly once"
            + ("" if sizes_ok else f"; batches not of size B = {b}"),
            share,
        )
    return PASS, f"each record exactly once in each of {total} epochs of {length} steps", share


def sampling_check(source, decl: Declaration, alpha: float, seed: np.random.SeedSequence) -> Check:
    """The sampler that ran against the declared one (needs ``sampler_function``)."""
    runs = _sampler_runs(source, decl, seed)
    duplicates = sum(int(np.unique(x).size != x.size) for batches in runs for x in batches)
    name = "sampling_law"
    if duplicates:
        return Check(
            name=name,
            verdict=VIOLATION,
            measured=float(duplicates),
            declared=0.0,
            quantity="batches with a repeated index",
            significance=alpha,
            finding=f"{duplicates} batches hold a record twice (the declared {decl.sampler!r} sampler never does)",
        )
    if decl.sampler == "poisson":
        verdict, finding, measured = _poisson_law(runs, decl, alpha)
        quantity = "per-record inclusion dispersion (1 for Poisson)"
    elif decl.sampler == "fixed-size":
        sizes = {x.size for batches in runs for x in batches}
        verdict = PASS if sizes == {decl.batch_size} else VIOLATION
        finding = f"batch sizes {sorted(sizes)[:5]} (declared exactly {decl.batch_size})"
        measured, quantity = float(max(sizes)), "largest batch"
    else:
        verdict, finding, measured = _epoch_law(runs, decl)
        quantity = "share of epochs holding each record once"
    return Check(
        name=name,
        verdict=verdict,
        measured=measured,
        declared=1.0 if decl.sampler != "fixed-size" else float(decl.batch_size),
        quantity=quantity,
        finding=f"{finding} ({len(runs)} sampler runs)",
        significance=alpha,
    )
