"""An independent value of ε(δ) for the Poisson-subsampled Gaussian composed T times: a test-time reference.

    python benchmarks/ref_poisson_fourier.py Q SIGMA STEPS DELTA [--check] [--at EPS ...]

Written apart from dplens (numpy and scipy only, no dplens import) and apart from any discretisation of the privacy
loss: δ(ε) is read off the composed loss's moment generating function by Fourier inversion along a shifted line, as
an option price is (Carr & Madan, "Option valuation using the fast Fourier transform", J. Comput. Finance 2(4), 1999,
eq. 6). For the pair (P, Q) and L = log(P/Q) of one step under Q,

    δ_T(ε) = E_{Q^T}[(e^{L_1+…+L_T} − e^ε)_+] = (e^{−αε} / π) ∫_0^∞ Re[e^{−iuε} M(α+1+iu)^T / ((α+iu)(α+1+iu))] du,

for every α > 0, with M(s) = E_Q[(P/Q)^s]. Add/remove adjacency with P = (1−q)·N(0, σ²) + q·N(1, σ²) and
Q = N(0, σ²) (Mironov, Talwar, Zhang 2019, Section 3): the direction (P, Q) uses M(s); the reverse (Q, P) uses
E_P[(Q/P)^s] = M(1 − s). ε(δ) is the worse direction's.

M(s) − 1 = E_Q[(1 + q·r)^s − 1 − s·q·r] with r = e^{(2x−1)/(2σ²)} − 1 (E_Q[r] = 0), written as
E2(s·ℓ) + s·L2(q·r) with ℓ = log1p(q·r), E2(z) = e^z − 1 − z and L2(y) = log1p(y) − y, each by its series where its
argument is small, so T·log M(s) keeps its digits at T = 2·10⁶; the x-integral is a trapezoid rule (the integrand is
entire and Gaussian-decaying: the rule converges geometrically) and so is the u-integral (its aliasing is
e^{−α·2π/du}/δ relative). α is each δ's saddle point. ``--check`` repeats the computation with both steps halved and
prints the change: an ESTIMATE of ε, not a bound (no proven error bound), but one whose numerical error is measured.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.optimize import brentq, minimize_scalar

_SMALL = 1e-2  # below it the series of E2 and L2 (10 terms: error < 1e-20 relative)


def _e2(z: np.ndarray, log_weight: np.ndarray) -> np.ndarray:
    """w·(e^z − 1 − z) for w = e^{log_weight}: by its series where |z| < _SMALL (the direct form loses 2·eps/|z|
    relative there), else with e^z·w taken as one exponential (e^z alone overflows where w is tiny)."""
    weight = np.exp(log_weight)
    with np.errstate(over="ignore"):
        out = np.exp(z + log_weight) - weight * (1.0 + z)
    small = np.abs(z) < _SMALL
    if np.any(small):
        zs = z[small]
        series = np.zeros_like(zs)
        for k in range(11, 1, -1):  # Horner on Σ_{k=2}^{11} z^k / k!
            series = (series + 1.0 / math.factorial(k)) * zs
        out[small] = series * zs * np.broadcast_to(weight, z.shape)[small]
    return out


def _l2(y: np.ndarray) -> np.ndarray:
    """log1p(y) − y for real y > −1, by its series where |y| < _SMALL."""
    out = np.log1p(y) - y
    small = np.abs(y) < _SMALL
    ys = y[small]
    series = np.zeros_like(ys)
    for k in range(12, 1, -1):  # Σ_{k=2}^{12} (−1)^{k+1} y^k / k
        series = (series + (-1.0) ** (k + 1) / k) * ys
    out[small] = series * ys
    return out


class PoissonGaussian:
    """M(s) − 1 for the Poisson-subsampled Gaussian, on an x-grid fixed by the largest Re s it serves."""

    def __init__(self, q: float, sigma: float, *, refine: float = 1.0) -> None:
        self.q, self.sigma, self.refine = q, sigma, refine

    def _grid(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gauss–Legendre panels (16 points) on [−16σ, top]: (log weights, q·r, ℓ) at the nodes. A panel is as wide
        as the integrand's local rate allows (at most σ/2): e^{i u ℓ(x)} turns at u·ℓ'(x), and ℓ' grows from
        ≈ q·e^{(2x−1)/(2σ²)}/σ² in the bulk to 1/σ² in the tail, so a uniform grid would pay the tail's rate
        everywhere."""
        sigma, q = self.sigma, self.q
        # (1 + q r)^{Re s} φ(x) peaks near x = Re s
        top = max(float(np.max(s.real)), 2.0) + 16.0 * sigma
        turn = max(float(np.max(np.abs(s.imag))), 1.0)
        grow = max(float(np.max(np.abs(s.real))), 1.0)

        def slope(x: float) -> float:  # ℓ'(x), increasing in x
            a = (2.0 * x - 1.0) / (2.0 * sigma**2)
            return 1.0 / sigma**2 / (1.0 + (1.0 - q) / q * math.exp(-a)) if a < 700 else 1.0 / sigma**2

        edges = [-16.0 * sigma]
        while edges[-1] < top:
            ahead = edges[-1] + 0.5 * sigma
            rate = (turn + grow) * slope(ahead) + (abs(ahead) + sigma) / sigma**2
            edges.append(edges[-1] + min(0.5 * sigma, 6.0 / rate) / self.refine)
        edges = np.array(edges)
        nodes, weights = np.polynomial.legendre.leggauss(16)
        half = 0.5 * np.diff(edges)
        x = ((edges[:-1] + half)[:, None] + half[:, None] * nodes[None, :]).ravel()
        w = (half[:, None] * weights[None, :]).ravel()
        log_weight = -0.5 * (x / sigma) ** 2 + np.log(w / (sigma * math.sqrt(2.0 * math.pi)))
        qr = q * np.expm1((2.0 * x - 1.0) / (2.0 * sigma**2))
        return log_weight, qr, np.log1p(qr)

    def m_minus_one(self, s: np.ndarray) -> np.ndarray:
        s = np.atleast_1d(np.asarray(s, dtype=complex))
        log_weight, qr, loss = self._grid(s)
        l2 = _l2(qr) * np.exp(log_weight)
        out = np.empty(s.shape, dtype=complex)
        for start in range(0, s.size, 64):  # 64 × the x-grid at a time: bounded memory
            chunk = s[start : start + 64, None]
            out[start : start + 64] = np.sum(_e2(chunk * loss, log_weight) + chunk * l2, axis=1)
        return out


def _log_m(law: PoissonGaussian, s: np.ndarray, reverse: bool) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log1p(law.m_minus_one(1.0 - s if reverse else s))


def _exponents(law: PoissonGaussian, steps: int, epsilon: float, alphas: np.ndarray, reverse: bool) -> np.ndarray:
    """log of e^{−αε}·M(α+1)^T/(α(α+1)): the integrand's size at u = 0 (+inf where M(α+1)^T overflows)."""
    with np.errstate(invalid="ignore", over="ignore"):
        values = -alphas * epsilon + steps * _log_m(law, alphas + 1.0, reverse).real - np.log(alphas * (alphas + 1.0))
    return np.where(np.isfinite(values), values, np.inf)


def saddle(law: PoissonGaussian, steps: int, epsilon: float, *, reverse: bool) -> float:
    """The α that minimises the integrand's size: a scan first (beyond the orders where M(α+1)^T overflows the
    exponent is +inf, which a bounded search cannot step over), then a bounded search between the scan's
    neighbours."""
    scan = np.geomspace(1e-3, 60.0, 49)
    best = int(np.argmin(_exponents(law, steps, epsilon, scan, reverse)))
    lo, hi = scan[max(best - 1, 0)], scan[min(best + 1, scan.size - 1)]

    def exponent(alpha: float) -> float:
        return float(_exponents(law, steps, epsilon, np.array([alpha]), reverse)[0])

    return float(minimize_scalar(exponent, bounds=(lo, hi), method="bounded", options={"xatol": 1e-5}).x)


def chernoff(law: PoissonGaussian, steps: int, epsilon: float, *, reverse: bool) -> float:
    """An upper bound on δ_T(ε): (e^L − e^ε)_+ ≤ e^{(α+1)L − αε}·α^α/(α+1)^{α+1} for every α > 0 (the RDP-to-DP
    conversion of Canonne, Kamath, Steinke 2020, Proposition 12), at the saddle's α. A bound, not an estimate (up
    to the quadrature of M, whose error is measured by ``--check``)."""
    alpha = saddle(law, steps, epsilon, reverse=reverse)
    log_bound = (
        -alpha * epsilon
        + steps * float(_log_m(law, np.array([alpha + 1.0]), reverse)[0].real)
        + alpha * math.log(alpha)
        - (alpha + 1.0) * math.log(alpha + 1.0)
    )
    return math.exp(log_bound)


def delta(
    law: PoissonGaussian,
    steps: int,
    epsilon: float | np.ndarray,
    *,
    reverse: bool,
    refine: float = 1.0,
    alpha: float | None = None,
    verbose: bool = False,
) -> float | np.ndarray:
    """δ_T(ε) of one direction by the shifted Fourier inversion, at the saddle point α of the first ε unless ``alpha``
    is given; several ε share one α (valid for any α > 0) and so one evaluation of M along the line."""
    epsilons = np.atleast_1d(np.asarray(epsilon, dtype=float))
    if alpha is None:
        alpha = saddle(law, steps, float(epsilons[0]), reverse=reverse)
    # the rule's step du aliases c(k) = e^{αk}·δ_T(k) with period 2π/du: c(ε − P) ≤ e^{α(ε−P)} on the left, and on
    # the right δ_T(ε + P) falls by less than e^{−αP} while the loss's heavy right tail (the sampled steps) lasts
    du = 2.0 * math.pi / (80.0 + (math.log(1e30) + 30.0) / alpha) / refine
    # |M(α+1+iu)|^T need not fall fast in u: the steps where the record was not sampled add a narrow continuous
    # part whose width sets the range, so the range grows until a whole block is below 1e-18 of the largest term
    blocks, grid, peak, u_next = [], [], -math.inf, 0.0
    while True:
        u = u_next + du * np.arange(512)
        u_next = float(u[-1] + du)
        s = alpha + 1.0 + 1j * u
        with np.errstate(invalid="ignore"):  # steps · log M = −inf + 0j where M(s) = 0 in floating point
            log_terms = steps * _log_m(law, s, reverse) - np.log((alpha + 1j * u) * (alpha + 1.0 + 1j * u))
        log_terms[~np.isfinite(log_terms)] = -np.inf  # M(s) = 0 in floating point: a vanishing term
        blocks.append(log_terms)
        grid.append(u)
        block_peak = float(np.max(log_terms.real))
        peak = max(peak, block_peak)
        if block_peak < peak - math.log(1e18) or u_next > 1e6:
            break
    if verbose:
        print(f"  eps={epsilons[0]:.6f} alpha={alpha:.4f} du={du:.4g} u_top={u_next:.4g}")
    base, u = np.exp(np.concatenate(blocks) - peak), np.concatenate(grid)
    out = np.empty(epsilons.shape)
    for i, eps in enumerate(epsilons):
        terms = (base * np.exp(-1j * u * eps)).real
        integral = (np.sum(terms) - 0.5 * terms[0]) * du  # trapezoid on [0, ∞): the integrand is even in u
        out[i] = math.exp(-alpha * eps + peak) * integral / math.pi
    return float(out[0]) if np.ndim(epsilon) == 0 else out


def epsilon(q: float, sigma: float, steps: int, target: float, *, refine: float = 1.0) -> dict:
    """ε(δ) of each direction (root of log δ_T(ε) = log δ) and the worse one."""
    law = PoissonGaussian(q, sigma, refine=refine)
    found = {}
    for name, reverse in (("remove", False), ("add", True)):

        def gap(eps: float, reverse=reverse) -> float:
            value = delta(law, steps, eps, reverse=reverse, refine=refine)
            return math.log(max(value, 1e-300)) - math.log(target)

        lo, hi = 1e-4, 1.0
        while gap(hi) > 0:
            lo, hi = hi, 2.0 * hi
        found[name] = brentq(gap, lo, hi, xtol=1e-9, rtol=1e-12) if gap(lo) > 0 else 0.0
    found["epsilon"] = max(found["remove"], found["add"])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("q", type=float)
    parser.add_argument("sigma", type=float)
    parser.add_argument("steps", type=int)
    parser.add_argument("delta", type=float)
    parser.add_argument("--check", action="store_true", help="repeat with the x- and u-steps halved")
    parser.add_argument(
        "--at",
        type=float,
        nargs="+",
        metavar="EPS",
        help="instead of solving for ε, δ_T of the remove direction at these ε (one α, one inversion) and the add "
        "direction's Chernoff bound at the smallest",
    )
    args = parser.parse_args()
    if args.at:
        at = np.array(sorted(args.at))
        for refine in (1.0, 2.0) if args.check else (1.0,):
            law = PoissonGaussian(args.q, args.sigma, refine=refine)
            alpha = saddle(law, args.steps, float(np.median(at)), reverse=False)
            values = delta(law, args.steps, at, reverse=False, refine=refine, alpha=alpha)
            shown = ", ".join(f"δ_remove({e:.6f}) = {v:.10e}" for e, v in zip(at, values, strict=True))
            print(f"steps ×{1 / refine:g}: {shown}")
        print(f"add direction: δ_add({at[0]:.6f}) ≤ {chernoff(law, args.steps, float(at[0]), reverse=True):.3e}")
        return
    start = time.perf_counter()
    result = epsilon(args.q, args.sigma, args.steps, args.delta)
    print(
        f"q={args.q} sigma={args.sigma} T={args.steps} delta={args.delta}: epsilon {result['epsilon']:.9f} "
        f"(remove {result['remove']:.9f}, add {result['add']:.9f}) in {time.perf_counter() - start:.1f} s"
    )
    if args.check:
        fine = epsilon(args.q, args.sigma, args.steps, args.delta, refine=2.0)
        print(f"steps halved: epsilon {fine['epsilon']:.9f} (change {fine['epsilon'] - result['epsilon']:.2e})")


if __name__ == "__main__":
    main()
