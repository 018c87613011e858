"""An independent estimate of ε for random allocation (1 of t steps per epoch, E epochs): a test-time reference.

    python benchmarks/ref_allocation_linear.py SIGMA STEPS EPOCHS DELTA [--spacing H] [--top Y]

Written apart from dplens (numpy and scipy only, no dplens import): the Q-law of S = Σ Y_j (t i.i.d. log-normal
ratios of log-sd 1/σ, mean 1; Feldman & Shenfeld, arXiv 2502.08202, Section 3) on a linear grid of spacing H, the
mass of each cell [(k − ½)H, (k + ½)H) split between the grid points around its mean, keeping it (no bound: an
ESTIMATE, O(H²)), the mass above Y put
at the grid's last point (Y: by default 10⁻¹³ of the tilted coordinate's law above it); its t-fold convolution by one
FFT (no clipping, so round-off stays unbiased). One epoch's loss is log(S/t), under P with masses (s/t)·Q(s)
(remove), and −log(S/t) under Q (add); the E-fold composition is one more FFT on a loss grid of interval 1e-4
(losses rounded to the nearest point), and ε(δ) is the worse direction's.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.special import ndtr


def _cells(edges: np.ndarray, s: float, shift: float) -> np.ndarray:
    """Masses of the cells between ``edges`` of log-normal Y (mean 1, log-sd s), or with ``shift`` = s its partial
    means E[Y; cell] (Y·ν is the log-normal of log-mean +s²/2)."""
    with np.errstate(divide="ignore"):
        z = (np.log(edges) + 0.5 * s * s) / s - shift
    cdf, sf = ndtr(z), ndtr(-z)
    return np.where(cdf[:-1] < 0.5, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])


def sum_law(sigma: float, steps: int, spacing: float, top: float) -> tuple[np.ndarray, np.ndarray]:
    """(values, Q-masses) of S on the grid kH: each cell's mass moved to the two grid points around its mean, in the
    proportions that keep the mean (midpoints alone shifted S by t times their bias: 2 % of ε at σ = 0.55)."""
    s = 1.0 / sigma
    points = math.ceil(top / spacing)
    edges = np.concatenate([[0.0], (np.arange(points) + 0.5) * spacing])
    q, m1 = _cells(edges, s, 0.0), _cells(edges, s, s)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(q > 0, m1 / q, 0.0) / spacing  # in grid units
    below = np.clip(np.floor(mean), 0, points - 1).astype(np.int64)
    up = np.clip(mean - below, 0.0, 1.0)
    law1 = np.bincount(below, weights=q * (1 - up), minlength=points + 1)
    law1 += np.bincount(below + 1, weights=q * up, minlength=points + 1)
    law1[-1] += ndtr(-(math.log(edges[-1]) + 0.5 * s * s) / s)  # the mass above, at the last point
    spread = math.sqrt(math.expm1(s * s))
    size = 1 << math.ceil(math.log2(points + steps + 40 * spread * math.sqrt(steps) / spacing + steps / spacing))
    spectrum = np.fft.rfft(law1, n=size)
    law = np.fft.irfft(spectrum**steps, n=size)
    return np.arange(size) * spacing, law


def _on_loss_grid(losses: np.ndarray, mass: np.ndarray, interval: float) -> tuple[int, np.ndarray]:
    keep = (mass != 0) & np.isfinite(losses)
    index = np.rint(losses[keep] / interval).astype(np.int64)
    start = int(index.min())
    return start, np.bincount(index - start, weights=mass[keep])


def _compose(start: int, pmf: np.ndarray, count: int) -> tuple[int, np.ndarray]:
    size = 1 << (math.ceil(math.log2(count * pmf.size)))
    return count * start, np.fft.irfft(np.fft.rfft(pmf, n=size) ** count, n=size)


def _epsilon(start: int, pmf: np.ndarray, interval: float, delta: float) -> float:
    losses = (start + np.arange(pmf.size)) * interval

    def hockey(eps: float) -> float:
        above = losses > eps
        return float(np.sum(pmf[above] * -np.expm1(eps - losses[above])))

    low, high = 0.0, 1.0
    while hockey(high) > delta:
        high *= 2.0
    if hockey(0.0) <= delta:
        return 0.0
    for _ in range(60):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if hockey(middle) > delta else (low, middle)
    return high


def reference_epsilon(sigma: float, steps: int, epochs: int, delta: float, spacing: float, top: float) -> float:
    values, q = sum_law(sigma, steps, spacing, top)
    ratio = values / steps
    interval = 1e-4
    with np.errstate(divide="ignore"):
        log_ratio = np.log(ratio)
    out = []
    for losses, mass in ((log_ratio, ratio * q), (-log_ratio, q)):
        start, pmf = _on_loss_grid(losses, mass, interval)
        big = np.flatnonzero(np.abs(pmf) > 1e-30)
        start, pmf = start + int(big[0]), pmf[big[0] : big[-1] + 1]
        out.append(_epsilon(*_compose(start, pmf, epochs), interval, delta))
    return max(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sigma", type=float)
    parser.add_argument("steps", type=int)
    parser.add_argument("epochs", type=int)
    parser.add_argument("delta", type=float)
    parser.add_argument("--spacing", type=float, default=0.05)
    parser.add_argument("--top", type=float, default=None, help="the grid's top (default: 10⁻¹³ of P above it)")
    args = parser.parse_args()
    s = 1.0 / args.sigma
    top = args.top or math.exp(0.5 * s * s + 7.35 * s)  # Φ(−7.35) ≈ 10⁻¹³ of the tilted coordinate above it
    start = time.perf_counter()
    eps = reference_epsilon(args.sigma, args.steps, args.epochs, args.delta, args.spacing, top)
    print(
        f"reference (linear grid, an ESTIMATE): sigma={args.sigma} t={args.steps} E={args.epochs} delta={args.delta}"
        f" spacing={args.spacing} top={top:.4g}: epsilon ~ {eps:.6g} ({time.perf_counter() - start:.1f} s)"
    )


if __name__ == "__main__":
    main()
