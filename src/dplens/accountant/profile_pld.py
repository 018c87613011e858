"""A pessimistic PLD from a privacy profile, so mechanisms known by their profile compose on the PLD route.

If a mechanism is (ε, δ(ε))-DP for every ε ≥ 0 in both orders, it is f-DP for the symmetric trade-off curve f
whose profile is δ (Dong, Roth, Su 2022, Prop. 2.12), and compositions of f-DP mechanisms are ⊗f-DP computed with
*any* pair realising f (DRS22 Theorem 3.2). The hockey-stick curve of that pair at negative ε follows from symmetry,
δ(−ε) = 1 − e^{−ε} + e^{−ε}δ(ε), and the connect-the-dots construction (Doroshenko, Ghazi, Kamath, Kumar,
Manurangsi 2022, arXiv 2207.04380, Algorithm 1; dp-accounting's ``create_pmf_pessimistic_connect_dots``) turns the
values on a grid into a discrete PLD whose hockey-stick curve lies above the pair's everywhere. Composing these
PLDs is then a valid (pessimistic) composition of the mechanisms.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["symmetric_profile_pld"]


def symmetric_profile_pld(
    delta_of_epsilon: Callable[[np.ndarray], np.ndarray],
    *,
    epsilon_max: float,
    value_discretization_interval: float,
):
    """A pessimistic dp-accounting ``PrivacyLossDistribution`` of a symmetric profile δ(ε) (ε ≥ 0).

    ``epsilon_max``: δ(ε) at and beyond it is the mass at +∞ (0 for pure-DP profiles); the grid spans
    [−epsilon_max, epsilon_max] in steps of ``value_discretization_interval``.
    """
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as dpa_pld

    if not (math.isfinite(epsilon_max) and epsilon_max > 0):
        raise ValueError(f"epsilon_max must be a finite number > 0; got {epsilon_max!r}")
    top = math.ceil(epsilon_max / value_discretization_interval)
    steps = np.arange(-top, top + 1)
    eps = steps * value_discretization_interval
    positive = np.asarray(delta_of_epsilon(np.abs(eps)), dtype=float)
    # δ(−ε) = 1 − e^{−ε} + e^{−ε} δ(ε) for the symmetric pair (ε ≥ 0 here stands for |ε|).
    negative = -np.expm1(-np.abs(eps)) + np.exp(-np.abs(eps)) * positive
    deltas = np.where(eps < 0, negative, positive)
    deltas = np.minimum.accumulate(np.clip(deltas, 0.0, 1.0))
    pmf = pld_pmf.create_pmf_pessimistic_connect_dots(value_discretization_interval, steps, deltas)
    return dpa_pld.PrivacyLossDistribution(pmf)
