"""A one-run canary audit of a CIFAR-10-sized Opacus training on the device people train on (issue 37).

    PYTHONPATH=$PWD/src python benchmarks/bench_gpu_audit.py [--device cuda] [--write benchmarks/RESULTS.md]
    PYTHONPATH=$PWD/src python benchmarks/bench_gpu_audit.py --small          # CPU, seconds: what CI runs
    PYTHONPATH=$PWD/src python benchmarks/bench_gpu_audit.py --device cpu --steps 20   # full size, few steps

A convolutional network on CIFAR-10-shaped data (3×32×32 inputs, 10 classes; synthetic, class-dependent patterns
under noise, so no download is needed and the model does learn) is trained once with Opacus
(:class:`dplens.integrations.opacus_audit.OpacusTraining` with ``device=``) and audited in one run with 1000
canaries, each included with probability ½ (Steinke, Nasr, Jagielski 2023):

- white-box: Dirac gradient canaries observed at every step, scored by the exact likelihood ratio (Nasr et al. 2023);
- black-box: 1000 mislabelled input canaries, scored by minus the final model's loss.

It reports, per audit, the seconds of the training (and of a plain training without canaries, for the overhead),
the valid one-run lower bound (``audit-scores --one-run``'s combined analysis) against the accountant's ε for the
same σ, q and steps (the theory), the Gaussian-family estimate, and the machine it ran on. ``--small`` shrinks the
data, the steps and the network so that it runs in seconds on a CPU (the canaries stay 1000).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
CANARIES = 1000
FULL = {"records": 50_000, "batch_size": 256, "steps": 1000, "noise_multiplier": 1.0, "width": 32, "lr": 2.0}
SMALL = {"records": 512, "batch_size": 64, "steps": 8, "noise_multiplier": 1.0, "width": 8, "lr": 2.0}
WIDTH = {"value": 32}  # the network's width, set by main() before any training (workers are not used here)


def cifar_net():
    """The tempered-sigmoid CIFAR-10 network of Papernot et al. 2021 (as in Opacus's CIFAR-10 example), of the
    width ``WIDTH``: two strided convolutions with max pooling, two linear layers (no batch norm: per-sample
    gradients need none)."""
    import torch
    from torch import nn

    w = WIDTH["value"]
    return nn.Sequential(
        nn.Conv2d(3, w // 2, 8, stride=2, padding=3),
        nn.Tanh(),
        nn.MaxPool2d(2, 1),
        nn.Conv2d(w // 2, w, 4, stride=2),
        nn.Tanh(),
        nn.MaxPool2d(2, 1),
        nn.Flatten(),
        nn.Linear(w * 25, 32),  # 32 → 16 → 15 → 6 → 5 per side
        nn.Tanh(),
        nn.Linear(32, 10),
    ).to(torch.float32)


def cifar_like(records: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10-shaped records: a fixed random 3×32×32 pattern per class, scaled, under unit Gaussian noise."""
    rng = np.random.default_rng(seed)
    patterns = rng.standard_normal((10, 3, 32, 32)).astype(np.float32)
    labels = rng.integers(0, 10, records)
    x = 0.5 * patterns[labels] + rng.standard_normal((records, 3, 32, 32)).astype(np.float32)
    return x.astype(np.float32), labels.astype(np.int64)


def device_name(device: str) -> str:
    import torch

    version = f"torch {torch.__version__}"
    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(torch.device(device))} ({version}, CUDA {torch.version.cuda})"
    return f"{platform.machine()} CPU, {torch.get_num_threads()} torch threads, no GPU ({version})"


def run(size: dict, device: str, seed: int) -> dict:
    from dplens.integrations import opacus_audit as oa

    WIDTH["value"] = size["width"]
    training = oa.OpacusTraining(
        model=cifar_net,
        data=cifar_like(size["records"]),
        noise_multiplier=size["noise_multiplier"],
        max_grad_norm=1.0,
        batch_size=size["batch_size"],
        steps=size["steps"],
        learning_rate=size["lr"],
        device=device,
    )
    oa.run_training(dataclasses.replace(training, steps=1), seed=seed)  # warm-up: imports, kernels, data moved
    start = time.perf_counter()
    oa.run_training(training, seed=seed)
    plain = time.perf_counter() - start
    out = {"device": device, "machine": device_name(device), "plain_training_seconds": plain, "audits": []}
    for canary in ("gradient", "input"):
        start = time.perf_counter()
        result = oa.one_run_opacus_audit(training, canaries=CANARIES, canary=canary, seed=seed)
        seconds = time.perf_counter() - start
        out["audits"].append(
            {
                "canary": canary,
                "observed": "every step (white-box)" if canary == "gradient" else "final model (black-box)",
                "seconds": seconds,
                "epsilon_lower_bound": result.epsilon_lower_bound,
                "components": [(c["analysis"], c["epsilon_lower_bound"]) for c in result.analysis.components],
                "gaussian_estimate": result.fdp_epsilon_estimate,
                "accountant_epsilon": result.epsilon_claimed,
                "verdict": result.verdict.value,
                "auc": result.auc_estimate,
            }
        )
    out["size"] = dict(size, canaries=CANARIES, sampling_rate=training.sampling_rate)
    return out


def render(report: dict, command: str) -> str:
    size = report["size"]
    head = (
        f"### One-run canary audit of a CIFAR-10-sized Opacus training (issue 37) ({time.strftime('%Y-%m-%d')}, "
        f"{report['machine']})\n\nCommand: `{command}`\n\n"
        f"{size['records']} CIFAR-10-shaped records (synthetic), tempered-sigmoid conv net of width {size['width']}, "
        f"σ = {size['noise_multiplier']:g}, q = {size['sampling_rate']:.4g} (expected batch {size['batch_size']}), "
        f"{size['steps']} steps, {size['canaries']} canaries each in with probability ½, δ = 1e-5, on "
        f"`{report['device']}`. A plain training (no canaries) took {report['plain_training_seconds']:.1f} s.\n\n"
        "| canaries | observed | seconds (training + scoring) | ε lower bound (valid) | Steinke / f-DP (ε, δ) "
        "parts | Gaussian estimate | accountant ε (theory) | verdict |\n|---|---|---|---|---|---|---|---|\n"
    )
    rows = "".join(
        f"| {a['canary']} | {a['observed']} | {a['seconds']:.1f} | {a['epsilon_lower_bound']:.3f} | "
        + " / ".join(f"{value:.3f}" for _, value in a["components"])
        + f" | {a['gaussian_estimate']:.3f} | {a['accountant_epsilon']:.3f} | {a['verdict']} |\n"
        for a in report["audits"]
    )
    return head + rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="a CPU-sized run (seconds), as CI runs it")
    parser.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    parser.add_argument("--steps", type=int, default=None, help="override the number of steps (e.g. to time a CPU)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--write", type=Path, help="write the section into this RESULTS.md")
    args = parser.parse_args()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    size = dict(SMALL if args.small else FULL)
    if args.steps is not None:
        size["steps"] = args.steps
    report = run(size, device, args.seed)
    command = "PYTHONPATH=$PWD/src python benchmarks/bench_gpu_audit.py " + " ".join(sys.argv[1:])
    text = render(report, command.strip())
    print(json.dumps(report) if args.json else text)
    if args.write:
        from results_md import write_section

        write_section(args.write, "bench_gpu_audit", text)


if __name__ == "__main__":
    main()
