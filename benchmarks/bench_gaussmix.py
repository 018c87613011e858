"""Benchmark: GaussMix ε and γ calibration, RDP route (Lemma 1 + Prop. 1) vs the exact chi-square profile.

Run: ``python benchmarks/bench_gaussmix.py`` (prints a Markdown table; about 15 s on one core).
"""

from __future__ import annotations

import math
import time

from dplens.research.gaussmix import accounting as gm

RDP, EXACT = gm.AccountingRoute.RDP, gm.AccountingRoute.EXACT


def _timed(function, repeat: int) -> tuple[float, float]:
    value = function()
    start = time.perf_counter()
    for _ in range(repeat):
        function()
    return value, (time.perf_counter() - start) / repeat


def main() -> None:
    print("| task | k | γ or target ε | δ | RDP value | RDP time | exact value | exact time | exact/RDP |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k, gamma, delta in [
        (150, 12.41, 1e-8),
        (150, 1154.6, 1e-8),
        (150, 1e7, 1e-8),
        (1, 10.0, 1e-5),
        (1000, 300.0, 1e-6),
    ]:
        event = gm.GaussMix(k=k, gamma=gamma)
        r, tr = _timed(lambda event=event, delta=delta: gm.gaussmix_epsilon(event, delta, route=RDP), 20)
        e, te = _timed(lambda event=event, delta=delta: gm.gaussmix_epsilon(event, delta, route=EXACT), 20)
        print(
            f"| ε (one release) | {k} | γ={gamma:g} | {delta:g} | {r:.6g} | {tr * 1e3:.2f} ms | {e:.6g} | "
            f"{te * 1e3:.2f} ms | {e / r:.4f} |"
        )
    for k, eps, delta in [(150, 1.0, 1e-8), (150, 0.1, 1e-8), (1, 1.0, 1e-5)]:
        r, tr = _timed(lambda k=k, eps=eps, delta=delta: gm.calibrate_gamma(eps, delta, k=k, route=RDP), 2)
        e, te = _timed(lambda k=k, eps=eps, delta=delta: gm.calibrate_gamma(eps, delta, k=k, route=EXACT), 2)
        print(
            f"| γ calibration (Lemma 1) | {k} | ε={eps:g} | {delta:g} | {r:.6g} | {tr * 1e3:.0f} ms | {e:.6g} | "
            f"{te * 1e3:.0f} ms | {e / r:.4f} |"
        )
    for k, eps, delta in [(150, 1.0, 1e-8), (1000, 0.5, 1e-6)]:
        r, tr = _timed(
            lambda k=k, eps=eps, delta=delta: gm.calibrate_gamma_linear_mixing(eps, delta, k=k, route=RDP), 2
        )
        e, te = _timed(
            lambda k=k, eps=eps, delta=delta: gm.calibrate_gamma_linear_mixing(eps, delta, k=k, route=EXACT), 2
        )
        print(
            f"| γ calibration (Alg. 2, Thm 1) | {k} | ε={eps:g} | {delta:g} | {r:.6g} | {tr * 1e3:.0f} ms | "
            f"{e:.6g} | {te * 1e3:.0f} ms | {e / r:.4f} |"
        )
    # Required noise: σ² + λ̄_min = γ C_X², so the ratio is also the noise-variance ratio.
    print()
    print(f"(sqrt of the last ratio = noise std ratio: {math.sqrt(e / r):.4f})")


if __name__ == "__main__":
    main()
