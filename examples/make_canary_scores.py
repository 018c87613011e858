"""Writes examples/canary_scores.csv: the example input of ``dplens audit-scores``.

Scores of one canary over 1200 DP-SGD trainings (600 with the canary, 600 without): the canary direction's dot
product with the final model (in units of the clip norm) of the white-box Dirac-canary game on DP-SGD with noise
multiplier 1, sampling rate 0.05 and 100 steps (dplens.auditing.canaries.DiracCanaryGame, observe = final).

    python examples/make_canary_scores.py
"""

from pathlib import Path

import numpy as np

from dplens.auditing.canaries import DiracCanaryGame, Observation

game = DiracCanaryGame(noise_multiplier=1.0, sampling_rate=0.05, steps=100, observe=Observation.FINAL)
rng = np.random.default_rng(2026)
scores_in = game.sample(True, 600, rng)[:, 0]
scores_out = game.sample(False, 600, rng)[:, 0]
lines = ["score,member"]
lines += [f"{s:.5f},1" for s in scores_in]
lines += [f"{s:.5f},0" for s in scores_out]
Path(__file__).with_name("canary_scores.csv").write_text("\n".join(lines) + "\n")
