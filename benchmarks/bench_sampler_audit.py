"""Audits of Opacus trainings on the loader they run: Poisson sampling against shuffled batches, on the digits example.

    python benchmarks/bench_sampler_audit.py [--sigmas 0.8,1.0,1.5] [--trials 400] [--canaries 1000] [--write]

For each noise multiplier σ: scikit-learn's digits (1797 records), batches of 64 (29 per epoch), 4 epochs, δ = 1e-5
(``--batch-size``, ``--epochs``): where the shuffle's lower bound at the δ a few hundred trainings can see is above
the Poisson ε at 1e-5.

- the accountant: the Poisson ε (what Opacus's accountants report whatever the loader does), and the shuffled
  loader's interval [Chua et al.'s lower bound, no amplification] (dplens's ``sampling="shuffle"``);
- one-run audits (Steinke et al. 2023) with 1000 Dirac gradient canaries, on the Poisson loader and on the shuffled
  one (the canaries are record slots the loader batches like any record; a left-out canary is a null record);
- a distinguishing game on the shuffled loader with one gradient canary and every other record's gradient opposite
  (Chua et al., ICML 2024: ``multi_run_opacus_audit(..., others="opposite")``), ``--trials`` trainings per side.

Where a valid audit lower bound exceeds the Poisson ε, the audit shows that the Poisson number is wrong for the
training that ran. ``--write`` replaces this script's section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))
DELTA = 1e-5


def _training(sigma: float, sampling: str, batch_size: int, epochs: int):
    from opacus_digits import CLIP, LEARNING_RATE, digits_data, digits_model

    from dplens.integrations.opacus_audit import OpacusTraining

    x, y = digits_data()
    steps = epochs * -(-(len(x) + 1) // batch_size)  # the data and the game's canary slot, in epochs
    return OpacusTraining(
        model=digits_model,
        data=(x, y),
        noise_multiplier=sigma,
        max_grad_norm=CLIP,
        batch_size=batch_size,
        steps=steps,
        learning_rate=LEARNING_RATE,
        sampling=sampling,
    )


def row(sigma: float, trials: int, canaries: int, batch_size: int, epochs: int) -> str:
    from dplens.accountant.dp_sgd import dp_sgd_epsilon
    from dplens.integrations.opacus_audit import multi_run_opacus_audit, one_run_opacus_audit

    shuffled = _training(sigma, "shuffle", batch_size, epochs)
    n, b = shuffled.dataset_size + 1, shuffled.batch_size
    poisson = dp_sgd_epsilon(dataset_size=n, batch_size=b, epochs=epochs, noise_multiplier=sigma, delta=DELTA)
    interval = dp_sgd_epsilon(
        dataset_size=n, batch_size=b, epochs=epochs, noise_multiplier=sigma, delta=DELTA, sampling="shuffle"
    )
    start = time.perf_counter()
    poisson_training = _training(sigma, "poisson", batch_size, epochs)
    one_poisson = one_run_opacus_audit(poisson_training, canaries=canaries, delta=DELTA, seed=0)
    one_shuffled = one_run_opacus_audit(shuffled, canaries=canaries, delta=DELTA, seed=0)
    one_run_time = time.perf_counter() - start
    start = time.perf_counter()
    game = multi_run_opacus_audit(shuffled, trials=trials, others="opposite", delta=DELTA, seed=0, workers=2)
    game_time = time.perf_counter() - start
    wrong = "yes" if game.epsilon_lower_bound > poisson.epsilon else "no"
    return (
        f"| {sigma:g} | {poisson.epsilon:.3f} | [{interval.epsilon_lower:.3f}, {interval.epsilon:.3f}] | "
        f"{one_poisson.epsilon_lower_bound:.3f} | {one_shuffled.epsilon_lower_bound:.3f} | "
        f"{game.epsilon_lower_bound:.3f} ({trials} per side) | {wrong} | {one_run_time:.0f} s + {game_time:.0f} s |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sigmas", default="1.0")
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--canaries", type=int, default=1000)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    sigmas = [float(s) for s in args.sigmas.split(",")]
    lines = [
        f"### Audits on the loader that ran ({time.strftime('%Y-%m-%d')}, {platform.machine()}, CPU)",
        "",
        f"Command: `python benchmarks/bench_sampler_audit.py --sigmas {args.sigmas} --trials {args.trials} "
        f"--canaries {args.canaries} --batch-size {args.batch_size} --epochs {args.epochs}` (digits, δ = 1e-5; "
        "audits at 95 % confidence)",
        "",
        "| σ | Poisson ε (accountant) | shuffled loader: [lower bound, upper] | one-run audit, Poisson loader | "
        "one-run audit, shuffled loader | game with opposite others, shuffled | audit > Poisson ε? | time |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for sigma in sigmas:
        lines.append(row(sigma, args.trials, args.canaries, args.batch_size, args.epochs))
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if args.write:
        sys.path.insert(0, str(HERE))
        from results_md import write_section

        write_section(HERE / "RESULTS.md", "bench_sampler_audit", text)


if __name__ == "__main__":
    main()
