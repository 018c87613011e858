"""bcdp.md §5.3 Fig. 4 Monte Carlo medians (issue 5), in the default suite.

The note's Fig. 3 medians are checked by the slow test in test_bcdp.py (300 trials per q) and q = 0 in the fast
one; its Fig. 4 medians (30 trials each, "loose ranges") were only listed in reports/bcdp/README.md. Here a few of
them are re-run with 30 seeded trials: clipped Mechanism 1 (ζ = (1 + q)/2) and the min-δ LDP baseline, users drawn
from the q-prior (eqs. 57–59), each median within 20 % of the note's (the ±20 % the reproduction reports) and
the ordering the paper claims.
"""

from __future__ import annotations

import numpy as np
import pytest

from dplens.research.bcdp import accounting as acc
from dplens.research.bcdp import mechanism as m

N_USERS, Q, TRIALS = 5000, 0.1, 30


def _prior_signs(d: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.choice([-1.0, 1.0], size=(N_USERS, d))
    tied = rng.random(N_USERS) < Q
    x[tied] = rng.choice([-1.0, 1.0], size=(int(tied.sum()), 1))
    return x


def _medians(delta: tuple[float, ...], epsilon: float, seed: int) -> tuple[float, float]:
    mech = m.BcdpMeanMechanism.from_allocation(acc.theorem2_allocation(delta, epsilon=epsilon, q=Q))
    base = m.BcdpMeanMechanism.ldp_baseline(epsilon=min(delta), dimension=len(delta))
    errors = []
    for t in range(TRIALS):
        rng = np.random.default_rng([seed, t])
        x = _prior_signs(len(delta), rng)
        truth = x.mean(axis=0)
        errors.append(
            (
                float(((mech.estimate_mean(x, rng) - truth) ** 2).sum()),
                float(((base.estimate_mean(x, rng) - truth) ** 2).sum()),
            )
        )
    med = np.median(np.array(errors), axis=0)
    return float(med[0]), float(med[1])


@pytest.mark.parametrize(("f", "note_mech", "note_base"), [(0.1, 9.34, 30.0), (0.2, 13.0, 29.2)])
def test_fig4b_medians(f, note_mech, note_base):
    """d = 50, δ = 0.2 on a fraction f of the coordinates and ε = 2 elsewhere."""
    d = 50
    k = round(f * d)
    mech, base = _medians((0.2,) * k + (2.0,) * (d - k), 2.0, seed=int(100 * f))
    assert mech == pytest.approx(note_mech, rel=0.2)
    assert base == pytest.approx(note_base, rel=0.2)
    assert mech < base  # "degrades gracefully" below the flat baseline


def test_fig4a_median_at_d_50():
    """n = 5000, f = 0.2, δ = 0.8 on the first d·f coordinates and ε = 8 elsewhere (note: 4.66 vs 4.93)."""
    d = 50
    k = round(0.2 * d)
    mech, base = _medians((0.8,) * k + (8.0,) * (d - k), 8.0, seed=4050)
    assert mech == pytest.approx(4.66, rel=0.2)
    assert base == pytest.approx(4.93, rel=0.2)
