"""Worked example: a small network on scikit-learn's digits, trained with Opacus at ε = 8 (δ = 1e-5), accounted by
dplens, audited in one run white-box (1000 Dirac gradient canaries) and black-box (1000 mislabelled input canaries),
and reported.

    python examples/opacus_digits.py -o digits-report [--seed 0] [--canaries 1000]

Needs the torch extra (``pip install "dplens[torch]"``) and scikit-learn (digits ship with it: no download). Writes
``DIR/accounting.json`` (dplens's ε for the training's σ, q and steps), ``DIR/white-box/`` and ``DIR/black-box/``
(``report.json``, ``report.html`` and figures: what ``dplens report --audit RESULT.json`` writes), the raw results
``DIR/white-box.json`` and ``DIR/black-box.json``, and ``DIR/summary.json``. About a minute on 2 CPU cores.

The noise multiplier is calibrated by dplens (the smallest σ whose PLD ε at δ = 1e-5 is at most 8 for q = 1/28 and
30 epochs), so the accountant's ε is the claim the audit tests.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

DELTA = 1e-5
TARGET_EPSILON = 8.0
BATCH_SIZE = 64
EPOCHS = 30
CLIP = 1.0
LEARNING_RATE = 1.0


def digits_model():
    """64 → 32 (tanh) → 10: a small network (2 410 parameters)."""
    import torch

    return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 10))


def digits_data() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1797 8×8 digits, pixels scaled to [0, 1]."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    return (digits.data / 16.0).astype(np.float32), digits.target.astype(np.int64)


def digits_training(noise_multiplier: float | None = None):
    """The Opacus training: q = 1/28 (expected batch 64), 30 epochs (840 steps), C = 1, SGD at learning rate 1."""
    from dplens.accountant.calibrate import calibrate_dp_sgd_noise
    from dplens.integrations.opacus_audit import OpacusTraining

    x, y = digits_data()
    batches = round(len(x) / BATCH_SIZE)
    steps = EPOCHS * batches
    if noise_multiplier is None:
        noise_multiplier = calibrate_dp_sgd_noise(
            sampling_rate=1 / batches, steps=steps, target_epsilon=TARGET_EPSILON, target_delta=DELTA
        ).value
    return OpacusTraining(
        model=digits_model,
        data=(x, y),
        noise_multiplier=noise_multiplier,
        max_grad_norm=CLIP,
        batch_size=BATCH_SIZE,
        steps=steps,
        learning_rate=LEARNING_RATE,
    )


def accuracy(training, seed: int) -> float:
    """Accuracy on the training set of one training without canaries (the model the user would ship)."""
    import torch

    from dplens.integrations.opacus_audit import run_training

    run = run_training(training, seed=seed)
    x, y = training.data
    with torch.no_grad():
        predicted = run.model(torch.from_numpy(x)).argmax(dim=1).numpy()
    return float(np.mean(predicted == y))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", required=True, help="output directory")
    parser.add_argument("--seed", type=int, default=0, help="audit seed (default 0)")
    parser.add_argument("--canaries", type=int, default=1000, help="canaries per audit (default 1000)")
    args = parser.parse_args(argv)

    from dplens.integrations.opacus_audit import one_run_opacus_audit, require_torch
    from dplens.reports.audit_page import write_audit_report

    try:
        require_torch()
    except ImportError as err:
        print(err, file=sys.stderr)
        return 2
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    training = digits_training()
    accounting = training.accounting(DELTA)
    print(f"training: {training.describe()}")
    print(f"accountant: epsilon <= {accounting['epsilon']:.4f} at delta = {DELTA:g} ({accounting['method']})")
    (out / "accounting.json").write_text(json.dumps(accounting, indent=2) + "\n")
    summary = {"accounting": accounting, "training": training.describe()}
    summary["train_accuracy"] = accuracy(training, args.seed)
    print(f"accuracy on the training set (no canaries): {summary['train_accuracy']:.3f}")
    audits = {
        "white-box": dict(canary="gradient"),
        "black-box": dict(canary="input", input_canary="mislabelled"),
    }
    for name, options in audits.items():
        result = one_run_opacus_audit(training, canaries=args.canaries, delta=DELTA, seed=args.seed, **options)
        data = result.to_dict()
        (out / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
        files = write_audit_report(data, out / name, title=f"Opacus digits, {name} one-run audit")
        summary[name] = {
            "epsilon_lower_bound": result.epsilon_lower_bound,
            "epsilon_claimed": result.epsilon_claimed,
            "ceiling": result.ceiling,
            "verdict": result.verdict.value,
            "report": str(files.html),
        }
        print(f"\n{name} one-run audit ({args.canaries} canaries):\n{result.summary()}")
    summary["elapsed_seconds"] = round(time.perf_counter() - start, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\nwrote {out.resolve()} in {summary['elapsed_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
