"""Fixed-size subsets drawn afresh each step (sampling without replacement, replace-one): the PLD route's bracket.

For each configuration (N, B, epochs, σ, δ; DP-SGD with clip C, so the replace-one sensitivity is 2C and the inner
event's σ′ = σ/2), three numbers on the same run: dplens's PLD bracket (the upper end the symmetrised Poisson pair at
γ = B/N, which dominates every step; the lower end the attained Poisson pair), dplens's RDP route (Wang, Balle,
Kasiviswanathan 2019, the only route before), and dp-accounting's RDP accountant on its
``SampledWithoutReplacementDpEvent`` (the peer; it has no PLD for this event). Whole calls, warm imports.

Usage: ``python benchmarks/bench_fixed_size_pld.py`` (prints a Markdown table).
"""

from __future__ import annotations

import math
import time

CONFIGURATIONS = [
    # (N, B, epochs, σ, δ)
    (60_000, 256, 10, 1.1, 1e-5),
    (10_000, 100, 5, 1.0, 1e-5),
    (50_000, 500, 20, 0.8, 1e-6),
    (1_000_000, 1_000, 3, 1.0, 1e-6),
    (1_000, 100, 3, 2.0, 1e-5),
]


def _timed(function):
    started = time.perf_counter()
    value = function()
    return value, time.perf_counter() - started


def main() -> None:
    import dp_accounting

    from dplens import Accountant
    from dplens.accountant import events as ev

    print(
        "| N, B, epochs, σ, δ (T) | PLD bracket [lower, upper] | width | time | RDP route (WBK19) | dp-accounting RDP |"
    )
    print("|---|---|---|---|---|---|")
    for n, b, epochs, sigma, delta in CONFIGURATIONS:
        steps = math.ceil(epochs * n / b)
        inner = ev.Gaussian(noise_multiplier=sigma / 2, neighboring=ev.NeighboringRelation.REPLACE_ONE)
        event = ev.SampledWithoutReplacement(sample_size=b, dataset_size=n, event=inner)
        accountant = Accountant().compose(event, count=steps)
        result, seconds = _timed(lambda a=accountant, d=delta: a.epsilon_result(d, method="pld"))
        renyi = accountant.epsilon(delta, method="rdp")
        peer = dp_accounting.rdp.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
        peer.compose(
            dp_accounting.dp_event.SampledWithoutReplacementDpEvent(n, b, dp_accounting.GaussianDpEvent(sigma / 2)),
            steps,
        )
        width = 100 * (result.epsilon - result.epsilon_lower) / result.epsilon
        print(
            f"| {n}, {b}, {epochs}, {sigma}, {delta:g} ({steps}) | [{result.epsilon_lower:.4f}, {result.epsilon:.4f}] "
            f"| {width:.1f} % | {seconds:.2f} s | {renyi:.4f} | {peer.get_epsilon(delta):.4f} |"
        )


if __name__ == "__main__":
    main()
