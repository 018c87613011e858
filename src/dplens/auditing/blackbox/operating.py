"""The operating point: where the audit spends its significance, chosen on an independent pilot.

Every (score, threshold, direction) is a hypothesis of one weighted Bonferroni procedure over *all* scores:
hypothesis h gets significance α·w_h with Σ_h w_h = 1 (each tested by the exact conditional bound of
:mod:`.poisson`), so the largest bound over every score, threshold and direction is a valid (1 − α) lower bound
(Jagielski, Ullman, Oprea, NeurIPS 2020; Holm 1979 for weighted Bonferroni with data-independent weights). The
weights come from the selection half of the pilot, never from the counted draws:

- each hypothesis's bound at the final trial count is *predicted* by projecting the pilot's rates to N draws,
  minus one standard deviation of the pilot's own log-ratio estimate (the best of many noisy predictions is
  biased upwards);
- a hypothesis is a candidate only if its numerator event was seen at least ``floor`` times in the pilot (the
  analogue of DP-Sniper's probability floor c, Bichsel et al., S&P 2021, §5.2: never rely on a probability the
  pilot cannot estimate); its denominator may be zero (events impossible on one side, float reachability);
- ``focus`` of the weight goes to the best predicted hypothesis over all scores; the rest is split evenly over the
  scores, half on each score's own best and half spread over its thresholds (so a pilot that is wrong costs power,
  never validity).

Thresholds that cannot win thus get almost no α, instead of an even split over scores and grids.
"""

from __future__ import annotations

import numpy as np

from dplens.auditing import bounds as bd
from dplens.auditing.blackbox import poisson

__all__ = ["Allocation", "allocate", "predicted_bounds"]

FOCUS = 0.8
FLOOR = 20
# Standard deviations of the pilot estimate subtracted from each prediction. One, not two: with pilots as large as
# the counted run, two pushed the choice to large events of smaller ratio (SVT6 at 10⁷, the exact likelihood ratio
# as score: 0.316 with two, 0.366 with one, against 0.375 expected of an oracle); over five seeds at 10⁶ one was as
# good or better on SVT1, SVT4, SVT6 and report-noisy-max 4.
SD_PENALTY = 1.0


def predicted_bounds(
    pilot: bd.RateCounts,
    *,
    trials: int,
    delta: float,
    significance: float,
    floor: int = FLOOR,
    penalty: float = SD_PENALTY,
) -> np.ndarray:
    """Per (direction, threshold), the bound the counted run would give if its rates equalled the pilot's, minus
    ``penalty`` standard deviations of the pilot's log-ratio estimate: 2K values, the K forward tests then the K
    reverse ones (−∞ where the numerator event has fewer than ``floor`` pilot draws)."""
    size = pilot.thresholds.size
    if size == 0 or pilot.n_positives == 0 or pilot.n_negatives == 0:
        return np.full(2 * size, -np.inf)
    fn, fp = pilot.false_negatives(), pilot.false_positives()
    tp, tn = pilot.n_positives - fn, pilot.n_negatives - fp
    scale_d, scale_n = trials / pilot.n_positives, trials / pilot.n_negatives
    projected = bd.RateCounts(
        thresholds=pilot.thresholds,
        positives=np.round(pilot.positives * scale_d).astype(np.int64),
        negatives=np.round(pilot.negatives * scale_n).astype(np.int64),
    )
    levels = np.full(size, significance)
    forward, reverse = poisson.conditional_bounds(projected, delta=delta, levels=levels, lam=float(trials))
    # SD_PENALTY standard deviations of the pilot's own log-ratio estimate are subtracted: the best of many noisy
    # predictions is biased upwards (winner's curse), most for rare events and for scores with many thresholds.
    forward = forward - penalty * np.sqrt(1.0 / (tp + 1.0) + 1.0 / (fp + 1.0))
    reverse = reverse - penalty * np.sqrt(1.0 / (tn + 1.0) + 1.0 / (fn + 1.0))
    forward = np.where(tp >= floor, forward, -np.inf)  # forward: S = {score ≥ t}, numerator P[M(D) ∈ S]
    reverse = np.where(tn >= floor, reverse, -np.inf)  # reverse: the complement, numerator P[M(D′) ∉ S]
    return np.concatenate([forward, reverse])


class Allocation:
    """Per score: its share of α and its normalised weights over 2K hypotheses (K forward thresholds, then the K
    reverse ones), plus the pilot's best prediction."""

    def __init__(self, shares: list[float], weights: list[np.ndarray], predicted: list[float], focus_score: int):
        self.shares = shares
        self.weights = weights
        self.predicted = predicted
        self.focus_score = focus_score


def allocate(
    pilots: list[bd.RateCounts],
    *,
    trials: int,
    delta: float,
    significance: float,
    focus: float = FOCUS,
    floor: int = FLOOR,
) -> Allocation:
    """Weights over every (score, threshold) from the selection pilot's counts of each score."""
    count = len(pilots)
    predictions = [
        predicted_bounds(p, trials=trials, delta=delta, significance=significance * focus, floor=floor) for p in pilots
    ]
    raw = [np.zeros(2 * p.thresholds.size) for p in pilots]
    best_per = [float(np.max(pr)) if pr.size else -np.inf for pr in predictions]
    finite = [b for b in best_per if np.isfinite(b)]
    focus_score = -1
    rest = 1.0
    if finite:
        focus_score = int(np.argmax(best_per))
        raw[focus_score][int(np.argmax(predictions[focus_score]))] += focus
        rest = 1.0 - focus
    for b, pr in enumerate(predictions):
        size = pr.size
        share = rest / count
        if np.isfinite(best_per[b]):
            raw[b][int(np.argmax(pr))] += share / 2
            raw[b] += share / 2 / size
        else:
            raw[b] += share / size
    shares = [float(r.sum()) for r in raw]
    weights = [r / s for r, s in zip(raw, shares, strict=True)]
    return Allocation(shares, weights, [b if np.isfinite(b) else None for b in best_per], focus_score)
