"""Generic (ε, δ)-DP events with optimal composition.

:class:`ApproxDp` stands for *any* mechanism known only to be (ε, δ)-DP (a vendor's claim, a component analysed
elsewhere). Kairouz, Oh, Viswanath 2015 (ICML; arXiv 1311.0776), Theorem 2.1 (also Murtagh & Vadhan 2016): every
(ε, δ)-DP mechanism's pair of output distributions is a post-processing of the four-point pair

    P = (δ, (1 − δ)e^ε/(1 + e^ε), (1 − δ)/(1 + e^ε), 0),   Q = (0, (1 − δ)/(1 + e^ε), (1 − δ)e^ε/(1 + e^ε), δ),

whose privacy-loss distribution is {+∞: δ, ε: (1 − δ)e^ε/(1 + e^ε), −ε: (1 − δ)/(1 + e^ε)}. Composing these
PLDs is therefore the *optimal* composition of (ε, δ) guarantees:

- homogeneous (k runs of (ε, δ)): the binomial PLD of KOV15 Theorem 3.3, exact: at ε_i = (k − 2i)ε it gives their
  δ_i = 1 − (1 − δ)^k(1 − Σ_{l<i} C(k,l)(e^{(k−l)ε} − e^{(k−2i+l)ε})/(1 + e^ε)^k), and everything between;
- heterogeneous: the exact finite convolution (:mod:`dplens.accountant.finite_pld`) while the support stays below
  200 000 points (optimal; computing it is #P-hard in general, Murtagh & Vadhan 2016), and the pessimistic PLD of
  dp-accounting's engine (``from_privacy_parameters``, losses rounded up to the grid) on the PLD route.

Routes: EXACT (the above), PLD, and RDP for δ = 0 (ε-DP is dominated by binary randomized response, so its RDP
curve is that of RR with the same ε; Rényi divergence obeys data processing). With δ > 0 the Rényi divergences are
infinite and the RDP route declines.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from dplens.accountant import events as ev
from dplens.accountant import finite_pld as fpld
from dplens.accountant import pld, rdp
from dplens.accountant._numerics import gammaln
from dplens.accountant.curves import RdpCurve
from dplens.accountant.rdp import UnsupportedEventError

__all__ = ["ApproxDp", "basic_composition", "kov_delta", "pure_dp_rdp"]


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class ApproxDp(ev.Event):
    """A mechanism known only to be (ε, δ)-DP under ``neighboring`` (both orders of every neighbouring pair).

    Example:
        >>> from dplens.accountant.compose import Accountant, Method
        >>> acc = Accountant().compose(ApproxDp(epsilon=0.1, delta=1e-6), count=100)
        >>> round(acc.epsilon(1e-3, method=Method.EXACT), 4)  # basic composition: (10, 1e-4)
        3.1453
    """

    epsilon: float
    delta: float = 0.0
    neighboring: ev.NeighboringRelation = ev.ADD_REMOVE

    def __post_init__(self) -> None:
        ev._positive("epsilon", self.epsilon, allow_zero=True)
        if not (isinstance(self.delta, int | float) and not isinstance(self.delta, bool) and 0 <= self.delta <= 1):
            raise ValueError(f"delta must be in [0, 1]; got {self.delta!r}")

    def pure_dp_epsilon(self) -> float:
        """ε when δ = 0, else ∞ (no pure guarantee)."""
        return self.epsilon if self.delta == 0 else math.inf

    def finite_pld_self_composed(self, count: int) -> fpld.FinitePld:
        """``count`` runs in closed form: the binomial PLD of KOV15 Theorem 3.3 (no repeated convolution)."""
        if count + 1 > fpld.MAX_SUPPORT:
            raise UnsupportedEventError(f"{count} runs exceed the exact support limit {fpld.MAX_SUPPORT}")
        ell = np.arange(count + 1, dtype=float)
        log_comb = gammaln(count + 1.0) - gammaln(ell + 1.0) - gammaln(count - ell + 1.0)
        log_probs = log_comb + (count - ell) * self.epsilon - count * float(np.logaddexp(0.0, self.epsilon))
        finite = (1.0 - self.delta) ** count
        return fpld.FinitePld(
            fpld.FiniteLossDistribution.of((count - 2 * ell) * self.epsilon, finite * np.exp(log_probs), 1.0 - finite)
        )

    def finite_pld(self) -> fpld.FinitePld:
        """The four-point dominating pair's PLD (KOV15 Theorem 2.1)."""
        e = self.epsilon
        high = 1.0 / (1.0 + math.exp(-e))  # e^ε/(1 + e^ε)
        return fpld.FinitePld(
            fpld.FiniteLossDistribution.of(
                np.array([e, -e]), (1.0 - self.delta) * np.array([high, 1.0 - high]), self.delta
            )
        )


def basic_composition(events: list[tuple[float, float, int]]) -> tuple[float, float]:
    """(Σ kᵢεᵢ, Σ kᵢδᵢ) for (εᵢ, δᵢ, kᵢ): basic composition (Dwork, Kenthapadi, McSherry, Mironov, Naor 2006)."""
    return math.fsum(k * e for e, _, k in events), min(math.fsum(k * d for _, d, k in events), 1.0)


def kov_delta(epsilon: float, delta: float, count: int, target_epsilon: float | np.ndarray) -> float | np.ndarray:
    """δ(ε′) of ``count`` runs of an (ε, δ)-DP mechanism, optimal (KOV15 Theorem 3.3, at every ε′, log space).

    δ(ε′) = 1 − (1 − δ)^k + (1 − δ)^k Σ_{l: (k−2l)ε > ε′} C(k,l)(e^{(k−l)ε} − e^{ε′+lε})/(1 + e^ε)^k.

    Example (k = 1 is the guarantee itself; KOV15's ε₀ = (k − 2)ε point for k = 2):
        >>> kov_delta(1.0, 0.0, 1, 1.0)
        0.0
        >>> round(kov_delta(0.5, 0.0, 2, 0.0), 6)  # δ(0) = TV = (e^{2ε} − 1)/(1 + e^ε)²
        0.244919
    """
    eps_target = np.atleast_1d(np.asarray(target_epsilon, dtype=float))
    k = int(count)
    if k == 0:
        return 0.0 if np.ndim(target_epsilon) == 0 else np.zeros_like(eps_target)
    ell = np.arange(k + 1, dtype=float)
    log_comb = gammaln(k + 1.0) - gammaln(ell + 1.0) - gammaln(k - ell + 1.0)
    log_norm = k * float(np.logaddexp(0.0, epsilon))
    loss = (k - 2 * ell) * epsilon
    out = np.empty_like(eps_target)
    for index, target in enumerate(eps_target.tolist()):
        above = loss > target
        if not above.any():
            out[index] = -math.expm1(k * math.log1p(-delta)) if delta < 1 else 1.0  # the mass at +∞
            continue
        # C(k,l) e^{(k−l)ε}(1 − e^{ε′ − (k−2l)ε}) / (1 + e^ε)^k, summed in log space.
        with np.errstate(divide="ignore"):
            log_terms = (
                log_comb[above] + (k - ell[above]) * epsilon + np.log(-np.expm1(target - loss[above])) - log_norm
            )
        top = float(np.max(log_terms))
        mass = math.exp(top) * float(np.sum(np.exp(log_terms - top)))
        finite = (1.0 - delta) ** k
        out[index] = min(-math.expm1(k * math.log1p(-delta)) + finite * mass if delta < 1 else 1.0, 1.0)
    return float(out[0]) if np.ndim(target_epsilon) == 0 else out


def pure_dp_rdp(alpha: np.ndarray, *, epsilon: float) -> np.ndarray:
    """The RDP curve of any ε-DP mechanism: that of binary randomized response with the same ε (its dominating
    pair, KOV15 Thm 2.1, and the data-processing inequality of Rényi divergence, van Erven & Harremoës 2014 Thm 9).
    It is below ε²α/2 and min(ε, 2ε²α) (Bun & Steinke 2016 Prop. 3.3) and equals ε at α = ∞."""
    if epsilon == 0:
        return np.zeros_like(np.asarray(alpha, dtype=float))
    return rdp.randomized_response_rdp(alpha, epsilon=epsilon, num_values=2)


# --------------------------------------------------------------------------------------------
# Interpreters
# --------------------------------------------------------------------------------------------


@rdp.rdp_curve.register
def _(event: ApproxDp) -> RdpCurve:
    if event.delta > 0:
        raise UnsupportedEventError(
            f"an (epsilon, delta)-DP guarantee with delta > 0 has infinite Renyi divergences; got delta={event.delta!r}"
        )
    if event.epsilon == 0:
        return RdpCurve.zero()
    return RdpCurve.from_function(
        functools.partial(pure_dp_rdp, epsilon=event.epsilon), description=f"{event.epsilon:g}-DP (via binary RR)"
    )


@fpld.finite_pld.register
def _(event: ApproxDp) -> fpld.FinitePld:
    return event.finite_pld()


@pld.privacy_profile.register
def _(event: ApproxDp):
    return event.finite_pld().profile(description=f"ApproxDp(epsilon={event.epsilon:g}, delta={event.delta:g})")


@pld.event_pld.register
def _(event: ApproxDp, *, neighboring: ev.NeighboringRelation, value_discretization_interval: float):
    """dp-accounting's pessimistic PLD of an (ε, δ) guarantee (the same four-point pair, losses rounded up)."""
    return event.finite_pld().to_dp_accounting(value_discretization_interval)


def _register_engine() -> None:
    """dplens's PLD engine models a δ-only guarantee, (0, δ)-DP: with probability δ the output reveals everything (an
    atom at +∞), otherwise nothing (loss 0) — KOV15 Thm 2.1's pair at ε = 0, both directions alike. It is what a
    certified truncation composes (e.g. the Binomial tail of a user-level mixture, :mod:`dplens.accountant.user_level`).
    (ε, δ) with ε > 0 stays on dp-accounting's pessimistic PLD, as before."""
    from dplens.accountant import pld_engine

    @pld_engine.loss_distribution.register(ApproxDp)
    def _(event: ApproxDp, grid) -> pld_engine.EventPld:
        if event.epsilon != 0:
            raise UnsupportedEventError(f"dplens's PLD engine models (0, delta) guarantees only; got {event!r}")
        atoms = ((math.inf, event.delta, 0.0), (0.0, 1.0 - event.delta, 1.0 - event.delta))
        return pld_engine.EventPld(remove=pld_engine.discretise(pld_engine.PrivacyLoss(masses=None, atoms=atoms), grid))


_register_engine()
