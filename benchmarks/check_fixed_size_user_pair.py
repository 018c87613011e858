"""Is Ganesh 2024's substitution mixture a dominating pair for a fixed-size user with K = 2 examples? (a computation)

Per step (clip units): the mixture Σₖ Hyp(k)·N(2k, σ²) against N(0, σ²) (both orders), and the configuration of the
others' gradients at 0 with the user's two examples at +C in D and −C in D′: Σₖ Hyp(k)·N(k, σ²) against
Σₖ Hyp(k)·N(−k, σ²). δ(ε) of each on a fine grid of outputs, one step and composed (the privacy loss binned to 2·10⁻⁴,
composed by FFT). Prints where the configuration's δ exceeds the mixture's ("!"). These are estimates on a grid, not
certified values; the one-step total variation at N = 20, B = 6, σ = 1 is checked exactly in
tests/accountant/test_user_level.py.

Usage: ``python benchmarks/check_fixed_size_user_pair.py``
"""

from __future__ import annotations

import numpy as np
from scipy import signal, stats

WIDTH = 2e-4
EPSILONS = (0.0, 0.1, 0.3, 1.0, 2.0, 3.0)


def _loss_pmf(p_parts, q_parts, sigma):
    centres = [c for _, c in p_parts + q_parts]
    low, high = min(centres) - 14 * sigma, max(centres) + 14 * sigma
    edges = np.linspace(low, high, int((high - low) / (sigma / 2000)) + 1)

    def cells(parts):
        return sum(w * np.diff(stats.norm.cdf(edges, loc=c, scale=sigma)) for w, c in parts)

    p, q = cells(p_parts), cells(q_parts)
    keep = (p > 1e-300) & (q > 1e-300)
    index = np.round(np.log(p[keep] / q[keep]) / WIDTH).astype(int)
    start = int(index.min())
    return start, np.bincount(index - start, weights=p[keep])


def _deltas(start, pmf, steps):
    composed = pmf
    for _ in range(steps - 1):
        composed = np.maximum(signal.fftconvolve(composed, pmf), 0.0)
    losses = (steps * start + np.arange(composed.size)) * WIDTH
    return [float(np.sum(composed * np.maximum(0.0, 1.0 - np.exp(e - losses)))) for e in EPSILONS]


def main() -> None:
    for n, b, sigma, steps in [(20, 6, 1.0, 1), (20, 6, 1.0, 5), (20, 6, 1.0, 20), (100, 5, 1.0, 1), (100, 5, 2.0, 1)]:
        w = stats.hypergeom(n, 2, b).pmf([0, 1, 2])
        configuration = _deltas(*_loss_pmf([(w[k], k) for k in range(3)], [(w[k], -k) for k in range(3)], sigma), steps)
        mixture = [(w[k], 2 * k) for k in range(3)]
        forward = _deltas(*_loss_pmf(mixture, [(1.0, 0.0)], sigma), steps)
        backward = _deltas(*_loss_pmf([(1.0, 0.0)], mixture, sigma), steps)
        row = [
            f"ε={e}: {c:.5f} vs {max(f, r):.5f}{' !' if c > max(f, r) else ''}"
            for e, c, f, r in zip(EPSILONS, configuration, forward, backward, strict=True)
        ]
        print(f"N={n} B={b} σ={sigma} T={steps}:", "; ".join(row))


if __name__ == "__main__":
    main()
