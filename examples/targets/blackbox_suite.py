"""The black-box DP-tester benchmark: the mechanisms of the DP-Sniper and StatDP evaluations as batched targets.

The mechanisms that Bichsel, Steffen, Bogunovic, Vechev (DP-Sniper, IEEE S&P 2021; eth-sri/dp-sniper) and Ding,
Wang, Wang, Zhang, Kifer (StatDP, "Detecting Violations of Differential Privacy", CCS 2018; cmla-psu/statdp)
evaluate, written from the papers' definitions with the published parameters (ε = 0.1 unless a paper says
otherwise), each as a batched target ``f(data, rng, size)`` that dplens imports by path
(``blackbox_suite:NAME`` from this directory), e.g.::

    python -c "import json, blackbox_suite as b; json.dump(b.BY_NAME['SVT4'].pair(), open('/tmp/svt4.json', 'w'))"
    dplens audit --target blackbox_suite:svt4 --pair /tmp/svt4.json --claim-epsilon 0.1 --trials 1000000

Inputs are lists of query answers (sensitivity 1 in every coordinate: neighbours differ by at most 1 in each
coordinate; the histograms and the scalar mechanisms differ in one coordinate). Outputs have a leading axis
``size``. Sentinels follow the DP-Sniper encodings: the sparse-vector flags are 1 (above), 0 (below), −1 (aborted);
SVT3 answers with the noisy value when above, −1000.0 (below) or −2000.0 (aborted); NumericalSVT answers with a
fresh noisy value when above, 0.0 when below, −1000.0 when aborted.

:data:`SUITE` holds one frozen :class:`SuiteMechanism` per row of the published evaluation (22 rows: the 20
mechanisms of DP-Sniper's default experiment, its floating-point experiment on the same numpy Laplace, and its
snapping-Laplace experiment): the input pair of the best published lower bound, the claim, whether the mechanism
meets it, its true ε with the source of that statement, and the best published bound with its source. The
published bounds are the ``eps_lcb`` values of the repositories' result files
(``eval_sp2021/reference-results/*_data.log`` of eth-sri/dp-sniper: DD-Search with logistic regression or an MLP,
confidence 0.9, 2·10⁸ samples per side for the final estimate; and the StatDP runs of the same repository,
verified on fresh samples), the largest over the tools.

Nothing here is imported by dplens itself; ``benchmarks/bench_blackbox.py`` and ``tests/auditing/
test_blackbox_suite.py`` use it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

EPSILON = 0.1

SVT_TRUE, SVT_FALSE, SVT_ABORTED = 1, 0, -1
SVT3_FALSE, SVT3_ABORTED = -1000.0, -2000.0
NUMERICAL_SVT_ABORTED = -1000.0


def batched(function):
    """Mark ``function(data, rng, size)`` batched (the attribute dplens reads; no dplens import needed here)."""
    function.dplens_batched = True
    return function


def _vector(data: Any) -> np.ndarray:
    x = np.asarray(data, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"data must be a non-empty list of query answers; got {data!r}")
    return x


def _scalar(data: Any) -> float:
    x = np.asarray(data, dtype=float).reshape(-1)
    if x.size != 1:
        raise ValueError(f"data must hold exactly one query answer; got {data!r}")
    return float(x[0])


def _not_before_cutoff(above: np.ndarray, cutoff: int) -> np.ndarray:
    """True where a query comes after the ``cutoff``-th positive answer (the sparse vector has stopped)."""
    before = np.cumsum(above, axis=1) - above
    return before >= cutoff


# --------------------------------------------------------------------------------------------
# Scalar Laplace and its floating-point-safe variant
# --------------------------------------------------------------------------------------------


@batched
def laplace(data, rng, size):
    """The Laplace mechanism on one query (sensitivity 1): q + Lap(1/ε), numpy's floating-point sampler.

    Dwork, McSherry, Nissim, Smith (TCC 2006): ε-DP over the reals; in doubles it is not ε-DP for any ε
    (Mironov, CCS 2012, §3: outputs reachable from q but not from q + 1).
    """
    return _scalar(data) + rng.laplace(0.0, 1.0 / EPSILON, size=size)


SNAPPING_BOUND = 100.0
SNAPPING_SCALE = (1.0 + SNAPPING_BOUND * 2.0**-49) / EPSILON


def _snapping_lambda(scale: float) -> float:
    value = 2.0**-20
    while value < scale:
        value *= 2.0
    return value


SNAPPING_LAMBDA = _snapping_lambda(SNAPPING_SCALE)  # the smallest power of two ≥ the scale (16 at ε = 0.1)


@batched
def snapping_laplace(data, rng, size):
    """Mironov's snapping mechanism (CCS 2012, §5.2, Theorem 1) with B = 100, as in DP-Sniper's float experiment.

    clamp_B(round_Λ(clamp_B(q) + S·λ·ln U)), with S a fair sign, U uniform on (0, 1], λ = (1 + B·2⁻⁴⁹)/ε and Λ the
    smallest power of two ≥ λ; Theorem 1 gives (1 + B·2⁻⁴⁹)/λ = ε. (Theorem 1 assumes U drawn from all doubles of
    (0, 1] with exact rounding of ln; numpy's uniform has a 2⁻⁵³ grid, the same approximation DP-Sniper runs.)
    """
    q = min(SNAPPING_BOUND, max(-SNAPPING_BOUND, _scalar(data)))
    sign = np.where(rng.random(size) < 0.5, -1.0, 1.0)
    u = 1.0 - rng.random(size)  # (0, 1]
    noisy = q + sign * SNAPPING_SCALE * np.log(u)
    snapped = np.round(noisy / SNAPPING_LAMBDA) * SNAPPING_LAMBDA
    return np.clip(snapped, -SNAPPING_BOUND, SNAPPING_BOUND)


# --------------------------------------------------------------------------------------------
# Truncated geometric (Balcer–Vadhan GeoSample)
# --------------------------------------------------------------------------------------------

GEOMETRIC_N = 5
GEOMETRIC_K = math.ceil(math.log(2.0 / EPSILON))  # 3, as in the evaluated implementation (natural logarithm)
GEOMETRIC_EPSILON = math.log1p(2.0**-GEOMETRIC_K)  # ln(1 + 2⁻ᵏ) = ln(9/8) ≈ 0.1178 (Theorem 4.7)


def geometric_cdf_numerators(count: int, *, n: int = GEOMETRIC_N, k: int = GEOMETRIC_K) -> tuple[list[int], int]:
    """Exact integer CDF of GeoSample (Balcer, Vadhan, "Differential Privacy on Finite Computers", ITCS 2018,
    Algorithm 4.8): F(z)/d for z = 0…n, with d = (2^(k+1) + 1)(2^k + 1)^(n−1).

    This is the truncated two-sided geometric mechanism with α = 2^k / (2^k + 1) (tails folded onto 0 and n):
    P(z) ∝ α^|z − c| inside, P(Z ≤ z) = α^(c−z)/(1 + α) below c, so it is ln(1 + 2⁻ᵏ)-DP (Theorem 4.7).
    """
    if not (isinstance(count, int | np.integer) and 0 <= count <= n):
        raise ValueError(f"count must be an integer in [0, {n}]; got {count!r}")
    c, two_k = int(count), 2**k
    d = (2 * two_k + 1) * (two_k + 1) ** (n - 1)
    f = []
    for z in range(n + 1):
        if z < c:
            f.append(two_k ** (c - z) * (two_k + 1) ** (n - (c - z)))
        elif z < n:
            f.append(d - two_k ** (z - c + 1) * (two_k + 1) ** (n - 1 - (z - c)))
        else:
            f.append(d)
    return f, d


@batched
def truncated_geometric(data, rng, size):
    """GeoSample(ε = 0.1, n = 5) on a count c ∈ {0, …, 5}: U uniform on {1, …, d}, output min{z : F(z) ≥ U}.

    Exact integer arithmetic (no floating point): the output is an integer in {0, …, n}.
    """
    value = _scalar(data)
    if value != round(value):
        raise ValueError(f"data must be an integer count; got {data!r}")
    f, d = geometric_cdf_numerators(int(value))
    u = rng.integers(1, d, size=size, endpoint=True)
    return np.searchsorted(np.asarray(f, dtype=np.int64), u, side="left").astype(np.int64)


# --------------------------------------------------------------------------------------------
# Noisy histograms and report-noisy-max (Ding et al. 2018, Algorithms 5–10)
# --------------------------------------------------------------------------------------------


@batched
def noisy_hist1(data, rng, size):
    """NoisyHist1 (Ding et al. 2018, Alg. 9): every bin + Lap(1/ε); ε-DP over the reals (one bin changes by 1)."""
    x = _vector(data)
    return x + rng.laplace(0.0, 1.0 / EPSILON, size=(size, x.size))


@batched
def noisy_hist2(data, rng, size):
    """NoisyHist2 (Ding et al. 2018, Alg. 10): every bin + Lap(ε), the scale inverted: (1/ε)-DP, not ε-DP."""
    x = _vector(data)
    return x + rng.laplace(0.0, EPSILON, size=(size, x.size))


@batched
def report_noisy_max1(data, rng, size):
    """ReportNoisyMax1 (Ding et al. 2018, Alg. 5): argmax of q + Lap(2/ε): ε-DP (Dwork, Roth 2014, Claim 3.9)."""
    x = _vector(data)
    return np.argmax(x + rng.laplace(0.0, 2.0 / EPSILON, size=(size, x.size)), axis=1).astype(np.int64)


@batched
def report_noisy_max2(data, rng, size):
    """ReportNoisyMax2 (Ding et al. 2018, Alg. 6): argmax of q + Exp(2/ε): ε-DP (the exponential mechanism;
    McKenna, Sheldon 2020, permute-and-flip)."""
    x = _vector(data)
    return np.argmax(x + rng.exponential(2.0 / EPSILON, size=(size, x.size)), axis=1).astype(np.int64)


@batched
def report_noisy_max3(data, rng, size):
    """ReportNoisyMax3 (Ding et al. 2018, Alg. 7): the noisy maximum value of q + Lap(2/ε), not its index.

    Not ε-DP: over the reals it is a post-processing of five Lap(2/ε) answers, so (5ε/2)-DP for five queries, and
    the left tail of the maximum attains it; in doubles the float leak adds more.
    """
    x = _vector(data)
    return np.max(x + rng.laplace(0.0, 2.0 / EPSILON, size=(size, x.size)), axis=1)


@batched
def report_noisy_max4(data, rng, size):
    """ReportNoisyMax4 (Ding et al. 2018, Alg. 8): the noisy maximum value of q + Exp(2/ε).

    Not DP for any ε: the output is ≥ max(q), so shifting every query up by 1 makes [max q, max q + 1) impossible.
    """
    x = _vector(data)
    return np.max(x + rng.exponential(2.0 / EPSILON, size=(size, x.size)), axis=1)


# --------------------------------------------------------------------------------------------
# Sparse vector technique (Lyu, Su, Li, PVLDB 2017, Algorithms 1–6), NumericalSVT, PrefixSum
# --------------------------------------------------------------------------------------------

SVT_CUTOFF = 1  # c, the number of positive answers before the sparse vector stops (DP-Sniper's evaluation)
SVT1_THRESHOLD = 0.5
SVT_THRESHOLD = 1.0


def _svt_flags(above: np.ndarray, cutoff: int | None) -> np.ndarray:
    flags = above.astype(np.int64)
    if cutoff is not None:
        flags[_not_before_cutoff(above, cutoff)] = SVT_ABORTED
    return flags


def svt1_core(x, rng, size, *, epsilon=EPSILON, c=SVT_CUTOFF, threshold=SVT1_THRESHOLD):
    """Lyu et al. 2017, Alg. 1: ε₁ = ε/2, ρ = Lap(1/ε₁), νᵢ = Lap(2c/ε₂); ⊤ when qᵢ + νᵢ ≥ T + ρ; stop after c ⊤."""
    e1 = epsilon / 2.0
    rho = rng.laplace(0.0, 1.0 / e1, size=(size, 1))
    nu = rng.laplace(0.0, 2.0 * c / (epsilon - e1), size=(size, x.size))
    return _svt_flags(x + nu >= threshold + rho, c)


@batched
def svt1(data, rng, size):
    """SVT1 (Lyu, Su, Li 2017, Alg. 1; c = 1, T = 0.5): ε-DP (their Theorem 2)."""
    return svt1_core(_vector(data), rng, size)


def svt2_core(x, rng, size, *, epsilon=EPSILON, c=SVT_CUTOFF, threshold=SVT_THRESHOLD):
    """Lyu et al. 2017, Alg. 2: ρ = Lap(c/ε₁) redrawn after every ⊤, νᵢ = Lap(2c/ε₂), stop after c ⊤ (ε₁ = ε/2)."""
    e1 = epsilon / 2.0
    rho = rng.laplace(0.0, c / e1, size=size)
    nu = rng.laplace(0.0, 2.0 * c / (epsilon - e1), size=(size, x.size))
    out = np.empty((size, x.size), dtype=np.int64)
    count = np.zeros(size, dtype=np.int64)
    for i in range(x.size):
        above = x[i] + nu[:, i] >= threshold + rho
        out[:, i] = np.where(count >= c, SVT_ABORTED, above)
        count += above & (count < c)
        fresh = rng.laplace(0.0, c / e1, size=size)
        rho = np.where(above, fresh, rho)
    return out


@batched
def svt2(data, rng, size):
    """SVT2 (Lyu, Su, Li 2017, Alg. 2; c = 1, T = 1): ε-DP (their Theorem 3)."""
    return svt2_core(_vector(data), rng, size)


def svt3_core(x, rng, size, *, epsilon=EPSILON, c=SVT_CUTOFF, threshold=SVT_THRESHOLD):
    """Lyu et al. 2017, Alg. 3: as Alg. 1 with νᵢ = Lap(c/ε₂) but answering the noisy value qᵢ + νᵢ when above."""
    e1 = epsilon / 2.0
    rho = rng.laplace(0.0, 1.0 / e1, size=(size, 1))
    noisy = x + rng.laplace(0.0, c / (epsilon - e1), size=(size, x.size))
    above = noisy >= threshold + rho
    out = np.where(above, noisy, SVT3_FALSE)
    out[_not_before_cutoff(above, c)] = SVT3_ABORTED
    return out


@batched
def svt3(data, rng, size):
    """SVT3 (Lyu, Su, Li 2017, Alg. 3; c = 1, T = 1): not ε-DP for any finite ε (their §4: the noisy answer
    reveals the threshold noise)."""
    return svt3_core(_vector(data), rng, size)


def svt4_core(x, rng, size, *, epsilon=EPSILON, c=SVT_CUTOFF, threshold=SVT_THRESHOLD):
    """Lyu et al. 2017, Alg. 4: ε₁ = ε/4, ρ = Lap(1/ε₁), νᵢ = Lap(1/ε₂) (no factor c), stop after c ⊤."""
    e1 = epsilon / 4.0
    rho = rng.laplace(0.0, 1.0 / e1, size=(size, 1))
    nu = rng.laplace(0.0, 1.0 / (epsilon - e1), size=(size, x.size))
    return _svt_flags(x + nu >= threshold + rho, c)


@batched
def svt4(data, rng, size):
    """SVT4 (Lyu, Su, Li 2017, Alg. 4; c = 1, T = 1): ((1 + 6c)/4)·ε-DP, i.e. 0.175 at c = 1 (their §4)."""
    return svt4_core(_vector(data), rng, size)


@batched
def svt5(data, rng, size):
    """SVT5 (Lyu, Su, Li 2017, Alg. 5; T = 1): ρ = Lap(1/ε₁), ε₁ = ε/2, no query noise, no cutoff: ⊤ when
    qᵢ ≥ T + ρ. Not DP for any ε (some flag patterns are impossible on the neighbour)."""
    x = _vector(data)
    rho = rng.laplace(0.0, 2.0 / EPSILON, size=(size, 1))
    return (x >= SVT_THRESHOLD + rho).astype(np.int64)


@batched
def svt6(data, rng, size):
    """SVT6 (Lyu, Su, Li 2017, Alg. 6; T = 1): ρ = Lap(1/ε₁), νᵢ = Lap(1/ε₂), ε₁ = ε₂ = ε/2, no cutoff.

    Not ε-DP: the loss grows with the number of queries; on ten queries it is at most 10·ε₂ = 0.5 (shift every νᵢ
    by the query's change, ρ fixed).
    """
    x = _vector(data)
    rho = rng.laplace(0.0, 2.0 / EPSILON, size=(size, 1))
    nu = rng.laplace(0.0, 2.0 / EPSILON, size=(size, x.size))
    return (x + nu >= SVT_THRESHOLD + rho).astype(np.int64)


SVT34_CUTOFF = 2  # DP-Sniper's SVT34Parallel and StatDP's configuration (N = 2)
NUMERICAL_SVT_CUTOFF = 2


@batched
def svt34_parallel(data, rng, size):
    """SVT3 and SVT4 (c = 2, T = 1) run on the same queries, outputs side by side (10 values, then 10 flags).

    DP-Sniper's SVT34Parallel, claimed 0.1-DP; not DP for any ε (the SVT3 half is not).
    """
    x = _vector(data)
    left = svt3_core(x, rng, size, c=SVT34_CUTOFF)
    right = svt4_core(x, rng, size, c=SVT34_CUTOFF)
    return np.concatenate([left, right.astype(float)], axis=1)


@batched
def numerical_svt(data, rng, size):
    """NumericalSVT (Wang, Ding, Wang, Kifer, Zhang, "Proving differential privacy with shadow execution", PLDI
    2019; c = 2, T = 1): ρ₁ = Lap(3/ε), ρ₂ᵢ = Lap(6c/ε), ρ₃ᵢ = Lap(3c/ε); when qᵢ + ρ₂ᵢ ≥ T + ρ₁ answer
    qᵢ + ρ₃ᵢ, else 0; stop after c answers (−1000). ε-DP over the reals (ε/3 each for ρ₁, the comparisons and the
    answers); not in doubles, since its answers come from numpy's float Laplace (Mironov 2012)."""
    x = _vector(data)
    c = NUMERICAL_SVT_CUTOFF
    rho1 = rng.laplace(0.0, 3.0 / EPSILON, size=(size, 1))
    rho2 = rng.laplace(0.0, 6.0 * c / EPSILON, size=(size, x.size))
    rho3 = rng.laplace(0.0, 3.0 * c / EPSILON, size=(size, x.size))
    above = x + rho2 >= SVT_THRESHOLD + rho1
    out = np.where(above, x + rho3, 0.0)
    out[_not_before_cutoff(above, c)] = NUMERICAL_SVT_ABORTED
    return out


@batched
def prefix_sum(data, rng, size):
    """PrefixSum (Wang et al., PLDI 2019): the running sums of q + Lap(1/ε). ε-DP when one query changes; when
    every query changes by 1 (the suite's relation) it is (n·ε)-DP, 1.0 on ten queries."""
    x = _vector(data)
    return np.cumsum(x + rng.laplace(0.0, 1.0 / EPSILON, size=(size, x.size)), axis=1)


# --------------------------------------------------------------------------------------------
# RAPPOR (Erlingsson, Pihur, Korolova, CCS 2014)
# --------------------------------------------------------------------------------------------

RAPPOR_BITS = 20
RAPPOR_HASHES = 4
RAPPOR_F, RAPPOR_P, RAPPOR_Q = 0.75, 0.45, 0.55
ONE_TIME_RAPPOR_F = 0.95


def murmur3_32(key: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit (Appleby's public-domain algorithm), as a signed 32-bit integer (mmh3.hash's
    convention, the Bloom-filter hash of DP-Sniper's RAPPOR)."""
    mask = 0xFFFFFFFF
    c1, c2 = 0xCC9E2D51, 0x1B873593

    def rotl(v: int, r: int) -> int:
        return ((v << r) | (v >> (32 - r))) & mask

    h = seed & mask
    blocks = len(key) // 4
    for i in range(blocks):
        k = int.from_bytes(key[4 * i : 4 * i + 4], "little")
        k = rotl((k * c1) & mask, 15) * c2 & mask
        h = (rotl(h ^ k, 13) * 5 + 0xE6546B64) & mask
    tail = key[4 * blocks :]
    if tail:
        k = int.from_bytes(tail, "little")
        k = rotl((k * c1) & mask, 15) * c2 & mask
        h ^= k
    h ^= len(key)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def bloom_filter(value: Any, *, bits: int = RAPPOR_BITS, hashes: int = RAPPOR_HASHES) -> np.ndarray:
    """The RAPPOR Bloom filter of a value: bit ``murmur3_32(str(value), seed=i) mod bits`` set for i < hashes."""
    out = np.zeros(bits, dtype=np.int8)
    for i in range(hashes):
        out[murmur3_32(str(value).encode(), i) % bits] = 1
    return out


def _rappor_value(data: Any) -> int:
    value = _scalar(data)
    if value != round(value):
        raise ValueError(f"data must be one integer value; got {data!r}")
    return int(value)


def permanent_response(bloom: np.ndarray, rng, size, f: float) -> np.ndarray:
    """RAPPOR step 2: each bit is 1 w.p. f/2, 0 w.p. f/2, else the Bloom bit."""
    u = rng.random((size, bloom.size))
    return np.where(u < f / 2, 1, np.where(u < f, 0, bloom)).astype(np.int8)


def rappor_bit_probability(bloom_bit: int, *, f: float = RAPPOR_F, p: float = RAPPOR_P, q: float = RAPPOR_Q):
    """P(reported bit = 1 | Bloom bit): q* = ½f(p + q) + (1 − f)q, p* = ½f(p + q) + (1 − f)p (EPK 2014, §3)."""
    return 0.5 * f * (p + q) + (1.0 - f) * (q if bloom_bit else p)


@batched
def rappor(data, rng, size):
    """RAPPOR (Erlingsson, Pihur, Korolova 2014, steps 1–3): Bloom filter (20 bits, 4 hashes), permanent
    randomized response (f = 0.75), instantaneous randomized response (p = 0.45, q = 0.55); one report.

    One report is ε₁-DP with ε₁ = h·ln(q*(1 − p*)/(p*(1 − q*))) = 0.4001 (their §3.2); a pair whose filters
    differ in m bits has ε = m·ln(q*/p*).
    """
    prr = permanent_response(bloom_filter(_rappor_value(data)), rng, size, RAPPOR_F)
    u = rng.random(prr.shape)
    return (u < np.where(prr == 1, RAPPOR_Q, RAPPOR_P)).astype(np.int8)


@batched
def one_time_rappor(data, rng, size):
    """One-time RAPPOR (EPK 2014, steps 1–2): the permanent randomized response only, f = 0.95.

    ε = 2h·ln((1 − f/2)/(f/2)) = 0.8007 (their §3.2, ε∞); a pair whose filters differ in m bits has
    m·ln((1 − f/2)/(f/2))."""
    return permanent_response(bloom_filter(_rappor_value(data)), rng, size, ONE_TIME_RAPPOR_F)


RAPPOR_BIT_EPSILON = math.log(rappor_bit_probability(1) / rappor_bit_probability(0))
ONE_TIME_RAPPOR_BIT_EPSILON = math.log((1 - ONE_TIME_RAPPOR_F / 2) / (ONE_TIME_RAPPOR_F / 2))


def bloom_difference(a: Any, b: Any) -> int:
    """How many Bloom-filter bits differ between two values."""
    return int(np.sum(bloom_filter(a) != bloom_filter(b)))


# --------------------------------------------------------------------------------------------
# Parallel composition
# --------------------------------------------------------------------------------------------

PARALLEL_COPIES = 20
PARALLEL_EPSILON = 0.005


@batched
def laplace_parallel(data, rng, size):
    """Twenty Laplace mechanisms at ε = 0.005 on the same query (DP-Sniper's LaplaceParallel): 0.1-DP over the
    reals by composition; numpy's float Laplace, so not DP in doubles."""
    return _scalar(data) + rng.laplace(0.0, 1.0 / PARALLEL_EPSILON, size=(size, PARALLEL_COPIES))


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------

DPSNIPER_LOGS = "eth-sri/dp-sniper eval_sp2021/reference-results"


@dataclass(frozen=True)
class SuiteMechanism:
    """One row of the benchmark: the mechanism, its best published pair, the claim and the truth.

    ``true_epsilon`` is an upper bound on the mechanism's ε under the suite's relation (``math.inf`` when it is
    not DP for any ε, in the reals or in doubles), with ``true_epsilon_source``; ``private`` says whether it
    meets ``claim_epsilon``. ``published_bound`` is the best published valid lower bound (the tool's confidence is
    in ``published_source``).
    """

    name: str
    target: str
    data: tuple[Any, ...]
    neighbour: tuple[Any, ...]
    claim_epsilon: float
    private: bool
    true_epsilon: float
    true_epsilon_source: str
    published_bound: float
    published_source: str
    output_kind: str
    float_leak: bool = False  # numpy's float Laplace reaches the output: float reachability should see it
    pair_epsilon: float | None = None  # the exact ε of the audited pair, where a closed form gives it

    def reachable(self) -> bool:
        """Whether a valid bound can reach the published one: False when the published bound exceeds the exact ε of
        the pair (a 0.9-confidence bound may overshoot the truth: DP-Sniper's RAPPOR 0.3008 > 0.3001)."""
        return self.pair_epsilon is None or self.published_bound <= self.pair_epsilon

    def pair(self) -> dict[str, Any]:
        """The pair file of this row (``{"data": …, "neighbour": …}``)."""
        return {
            "data": list(self.data),
            "neighbour": list(self.neighbour),
            "description": f"{self.name}: best published pair ({self.published_source})",
        }

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["data"], out["neighbour"] = list(self.data), list(self.neighbour)
        return out


def _row(name, function, data, neighbour, claim, private, true_eps, true_src, bound, source, kind, *, leak=False):
    return SuiteMechanism(
        name=name,
        target=f"blackbox_suite:{function.__name__}",
        data=tuple(data),
        neighbour=tuple(neighbour),
        claim_epsilon=claim,
        private=private,
        true_epsilon=true_eps,
        true_epsilon_source=true_src,
        published_bound=bound,
        published_source=source,
        output_kind=kind,
        float_leak=leak,
    )


_ONES10 = (1,) * 10
_HALF10 = (1,) * 5 + (0,) * 5
_FLIP10 = (0,) * 5 + (1,) * 5
_UPDOWN10 = (2,) * 5 + (0,) * 5
_FLOAT = "numpy's float Laplace: not DP in doubles (Mironov 2012, §3)"
_SNIPER_MLP = f"DP-Sniper DD-Search MLP (dd_search_mlp_data.log, {DPSNIPER_LOGS}; conf. 0.9)"
_SNIPER_REG = f"DP-Sniper DD-Search logistic (dd_search_reg_data.log, {DPSNIPER_LOGS}; conf. 0.9)"
_STATDP1 = f"StatDP, verified (statdp_1_data.log, {DPSNIPER_LOGS})"
_STATDP2 = f"StatDP, verified (statdp_2_data.log, {DPSNIPER_LOGS})"

SUITE: tuple[SuiteMechanism, ...] = (
    _row("Laplace", laplace, [1.0], [0.0], 0.1, False, math.inf, _FLOAT, 0.09981, _STATDP1, "real", leak=True),
    _row(
        "LaplaceFloat",
        laplace,
        [1.0],
        [0.0],
        0.1,
        False,
        math.inf,
        _FLOAT,
        0.25208,
        f"DP-Sniper floating-point experiment, bit-pattern MLP (floating_point_data.log, {DPSNIPER_LOGS})",
        "real",
        leak=True,
    ),
    _row(
        "SnappingLaplace",
        snapping_laplace,
        [0.0],
        [1.0],
        0.1,
        True,
        0.1,
        "Mironov 2012, Theorem 1 (λ = (1 + B·2⁻⁴⁹)/ε, B = 100)",
        0.09788,
        f"DP-Sniper snapping experiment (floating_fixed_data.log, {DPSNIPER_LOGS})",
        "real (multiples of Λ = 16)",
    ),
    _row(
        "TruncatedGeometric",
        truncated_geometric,
        [1],
        [0],
        GEOMETRIC_EPSILON,
        True,
        GEOMETRIC_EPSILON,
        "Balcer, Vadhan 2018, Theorem 4.7: ln(1 + 2⁻ᵏ), k = ⌈ln(2/ε)⌉ = 3 as evaluated",
        0.11685,
        _STATDP2,
        "integer",
    ),
    _row(
        "NoisyHist1",
        noisy_hist1,
        [1] * 5,
        [2, 1, 1, 1, 1],
        0.1,
        False,
        math.inf,
        _FLOAT,
        0.09944,
        _STATDP2,
        "real vector",
        leak=True,
    ),
    _row(
        "NoisyHist2",
        noisy_hist2,
        [1] * 5,
        [2, 1, 1, 1, 1],
        0.1,
        False,
        10.0,
        "Lap(ε) per bin: (1/ε)-DP over the reals (Ding et al. 2018, Alg. 10); float leak on top",
        10.00217,
        _STATDP2,
        "real vector",
        leak=True,
    ),
    _row(
        "ReportNoisyMax1",
        report_noisy_max1,
        [1] * 5,
        [0, 2, 2, 2, 2],
        0.1,
        True,
        0.1,
        "Dwork, Roth 2014, Claim 3.9 (Laplace 2/ε)",
        0.09250,
        _SNIPER_MLP,
        "index",
    ),
    _row(
        "ReportNoisyMax2",
        report_noisy_max2,
        [1] * 5,
        [2, 0, 0, 0, 0],
        0.1,
        True,
        0.1,
        "McKenna, Sheldon 2020 (exponential noise 2/ε = permute-and-flip)",
        0.09967,
        _STATDP2,
        "index",
    ),
    _row(
        "ReportNoisyMax3",
        report_noisy_max3,
        [1] * 5,
        [2] * 5,
        0.1,
        False,
        math.inf,
        "5ε/2 = 0.25 over the reals (five Lap(2/ε) answers); numpy's float Laplace: not DP in doubles",
        0.24881,
        _SNIPER_MLP,
        "real",
        leak=True,
    ),
    _row(
        "ReportNoisyMax4",
        report_noisy_max4,
        [1] * 5,
        [2] * 5,
        0.1,
        False,
        math.inf,
        "output ≥ max(q): [1, 2) impossible on the neighbour (Ding et al. 2018, §6)",
        0.35344,
        _SNIPER_MLP,
        "real",
    ),
    _row(
        "SVT1",
        svt1,
        _FLIP10,
        (1,) * 5 + (0,) * 5,
        0.1,
        True,
        0.1,
        "Lyu, Su, Li 2017, Theorem 2",
        0.08580,
        _SNIPER_REG,
        "flags",
    ),
    _row(
        "SVT2",
        svt2,
        _FLIP10,
        (1,) * 5 + (0,) * 5,
        0.1,
        True,
        0.1,
        "Lyu, Su, Li 2017, Theorem 3",
        0.08593,
        _SNIPER_REG,
        "flags",
    ),
    _row(
        "SVT3",
        svt3,
        _FLIP10,
        (1,) * 5 + (0,) * 5,
        0.1,
        False,
        math.inf,
        "Lyu, Su, Li 2017, §4 (Alg. 3 not DP)",
        0.18217,
        _SNIPER_MLP,
        "reals with sentinels",
        leak=True,
    ),
    _row(
        "SVT4",
        svt4,
        _ONES10,
        _UPDOWN10,
        0.1,
        False,
        0.175,
        "Lyu, Su, Li 2017, §4: ((1 + 6c)/4)·ε, c = 1",
        0.17191,
        _STATDP2,
        "flags",
    ),
    _row(
        "SVT5",
        svt5,
        _ONES10,
        _UPDOWN10,
        0.1,
        False,
        math.inf,
        "Lyu, Su, Li 2017, §4 (Alg. 5 not DP)",
        14.31431,
        f"{_STATDP1} (run at ε = 0.05; DP-Sniper MLP at ε = 0.1: 1.761)",
        "flags",
    ),
    _row(
        "SVT6",
        svt6,
        _HALF10,
        _FLIP10,
        0.1,
        False,
        0.5,
        "Lyu, Su, Li 2017, §4 (Alg. 6 not ε-DP); ≤ 10·ε/2 on ten queries",
        0.32204,
        _STATDP1,
        "flags",
    ),
    _row(
        "NumericalSVT",
        numerical_svt,
        _HALF10,
        _FLIP10,
        0.1,
        False,
        math.inf,
        "0.1-DP over the reals (Wang, Ding, Wang, Kifer, Zhang 2019, c = 2); its answers qᵢ + ρ₃ᵢ are " + _FLOAT,
        0.03450,
        _SNIPER_MLP,
        "reals with sentinels",
        leak=True,
    ),
    _row(
        "PrefixSum",
        prefix_sum,
        _ONES10,
        (0,) * 10,
        0.1,
        False,
        1.0,
        "Lap(1/ε) on ten queries that all change by 1: 10·ε (post-processing)",
        0.57743,
        _SNIPER_MLP,
        "real vector",
        leak=True,
    ),
    _row(
        "Rappor",
        rappor,
        [1],
        [0],
        0.4001,
        True,
        0.4001,
        "Erlingsson, Pihur, Korolova 2014, §3.2: ε₁ = h·ln(q*(1 − p*)/(p*(1 − q*)))",
        0.30080,
        _SNIPER_MLP,
        "bits",
    ),
    _row(
        "OneTimeRappor",
        one_time_rappor,
        [0],
        [1],
        0.8007,
        True,
        0.8007,
        "Erlingsson, Pihur, Korolova 2014, §3.2: ε∞ = 2h·ln((1 − f/2)/(f/2))",
        0.59990,
        _SNIPER_MLP,
        "bits",
    ),
    _row(
        "LaplaceParallel",
        laplace_parallel,
        [1.0],
        [0.0],
        0.1,
        False,
        math.inf,
        _FLOAT,
        0.03495,
        _SNIPER_REG,
        "real vector",
        leak=True,
    ),
    _row(
        "SVT34Parallel",
        svt34_parallel,
        _ONES10,
        _UPDOWN10,
        0.1,
        False,
        math.inf,
        "contains SVT3 (Lyu, Su, Li 2017, §4), c = 2",
        0.26162,
        _SNIPER_MLP,
        "reals with sentinels and flags",
        leak=True,
    ),
)


def _with_pair_epsilon(row: SuiteMechanism) -> SuiteMechanism:
    """Rows whose pair has a closed-form ε: RAPPOR (m differing Bloom bits × the per-bit ε) and GeoSample (both
    directions attain ln(1 + 2⁻ᵏ) on a neighbouring count pair)."""
    if row.name == "Rappor":
        value = bloom_difference(row.data[0], row.neighbour[0]) * RAPPOR_BIT_EPSILON
    elif row.name == "OneTimeRappor":
        value = bloom_difference(row.data[0], row.neighbour[0]) * ONE_TIME_RAPPOR_BIT_EPSILON
    elif row.name == "TruncatedGeometric":
        value = GEOMETRIC_EPSILON
    else:
        return row
    return replace(row, pair_epsilon=value)


SUITE = tuple(_with_pair_epsilon(row) for row in SUITE)
BY_NAME: dict[str, SuiteMechanism] = {row.name: row for row in SUITE}
