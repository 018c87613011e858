"""``dplens demo``: the main job end to end on a built-in DP-SGD example.

Calibrates the noise multiplier of a Poisson-subsampled DP-SGD run to a target (ε, δ), accounts the result
by every route, and writes the results to the output directory.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from dplens.accountant import events as ev
from dplens.accountant.calibrate import calibrate_dp_sgd_noise
from dplens.accountant.compose import Accountant, Method

#: The built-in example: an MNIST-sized DP-SGD run (60 000 examples, batch 600, 10 epochs).
DEMO_CONFIG: dict[str, Any] = {
    "dataset_size": 60_000,
    "expected_batch_size": 600,
    "epochs": 10,
    "target_epsilon": 2.0,
    "delta": 1e-5,
}


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_demo(out_dir: Path, *, progress: bool = True) -> int:
    """Run the demo, write ``out_dir/demo.json``, print a summary. Returns the exit status."""
    cfg = DEMO_CONFIG
    q = cfg["expected_batch_size"] / cfg["dataset_size"]
    steps = cfg["epochs"] * cfg["dataset_size"] // cfg["expected_batch_size"]

    def say(message: str) -> None:
        if progress:
            print(message, flush=True)

    start = time.perf_counter()
    say(
        f"[1/2] calibrating the noise multiplier for epsilon <= {cfg['target_epsilon']} at delta = {cfg['delta']:g} "
        f"(q = {q:g}, {steps} steps, PLD) ..."
    )
    calibration = calibrate_dp_sgd_noise(
        sampling_rate=q, steps=steps, target_epsilon=cfg["target_epsilon"], target_delta=cfg["delta"], method=Method.PLD
    )
    say(f"      noise_multiplier = {calibration.value:.6f}")
    say("[2/2] accounting the calibrated run by every route ...")
    event = ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=calibration.value))
    acc = Accountant().compose(event, steps)
    routes = acc.all_routes(cfg["delta"])
    result = {
        "config": cfg | {"sampling_rate": q, "steps": steps},
        "calibration": calibration.to_dict(),
        "accounting": [r.to_dict() for r in routes],
        "ledger": json.loads(acc.to_json()),
        "elapsed_seconds": round(time.perf_counter() - start, 3),
    }
    path = Path(out_dir) / "demo.json"
    _atomic_write_text(path, json.dumps(result, indent=2, sort_keys=True))
    for r in routes:
        say(f"      {r.method.value:>5}: epsilon = {r.epsilon:.4f}  [{r.details}]")
    print(f"dplens demo: wrote {path.resolve()}")
    return 0
