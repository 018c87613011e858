"""How tight the model-based bound can be (issue 46): the Opacus digits run at ε = 8 from n canary observations.

    python benchmarks/model_based_ceiling.py

A canary's coordinate at a step is x = I + σZ (I ~ Bernoulli(q), units of C). A lower confidence bound on q is at
best q − z·sd; sd is √((q(1 − q) + σ²)/n) for the mean of x (the harness's estimator) and 1/√(n·I(q)) for any
estimator (Cramér–Rao, I the Fisher information of the two-Gaussian mixture). ε is the accountant's certified lower
end at (σ, q⁻), σ taken as known (optimistic). Printed for one training of 1000 canaries and for the harness's design,
at the α split of check_dp_sgd (0.05 over 10 tests, half to q) and unsplit.
"""

from __future__ import annotations

import math

from scipy import integrate, stats

from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant

SIGMA, Q, STEPS, DELTA = 0.534194, 64 / 1792, 28, 1e-5


def epsilon_lower(q: float) -> float:
    step = ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=SIGMA))
    return Accountant().compose(step, count=STEPS).epsilon_result(DELTA, method="pld").epsilon_lower


def main() -> None:
    def density(x: float, mean: float) -> float:
        return stats.norm.pdf(x, mean, SIGMA)

    fisher = integrate.quad(
        lambda x: (density(x, 1) - density(x, 0)) ** 2 / ((1 - Q) * density(x, 0) + Q * density(x, 1)),
        -10,
        11,
        limit=200,
    )[0]
    mean_information = 1 / (Q * (1 - Q) + SIGMA**2)
    print(f"claimed (certified lower end at the declared q): {epsilon_lower(Q):.3f}")
    print(f"information per observation: mean {mean_information:.3f}, Cramér–Rao {fisher:.3f}")
    print("| observations | significance | mean of x | any estimator |")
    for n in (28_000, 56_000, 112_000):
        for significance in (0.0025, 0.05):
            z = stats.norm.isf(significance)
            cells = [epsilon_lower(Q - z / math.sqrt(n * info)) for info in (mean_information, fisher)]
            print(f"| {n} | {significance} | {cells[0]:.3f} | {cells[1]:.3f} |")


if __name__ == "__main__":
    main()
