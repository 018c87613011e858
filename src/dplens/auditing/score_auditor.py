"""Every estimator of jax_privacy's ``CanaryScoreAuditor``, each result labelled a bound, an estimate or a heuristic.

jax_privacy 2.0's ``auditing.CanaryScoreAuditor`` (auditing-anchors §3.1, §8) computes privacy metrics from the
attack scores of held-in and held-out canaries. :class:`ScoreAuditor` offers the same estimators on the same
inputs — so a team moving between the two gets the numbers it knows — and says of each what it is:

- :meth:`~ScoreAuditor.epsilon_clopper_pearson` — the ε lower bound of a threshold test (Jagielski, Ullman, Oprea
  2020; Nasr et al. 2021): a **bound** with :class:`Explicit`, :class:`Split`, :class:`MultiSplit` or
  :class:`GridBonferroni`; a **heuristic** with :class:`ParetoBonferroni` (jax_privacy's default: Bonferroni over the
  vertices of the empirical ROC's concave frontier, a count taken from the same data);
- :meth:`~ScoreAuditor.epsilon_raw_counts` — ln((TPR − δ)/FPR) from raw counts: an **estimate**;
- :meth:`~ScoreAuditor.tpr_at_fpr` — the TPR at a given FPR (randomised thresholds): an **estimate**;
- :meth:`~ScoreAuditor.auroc` — the area under the ROC's concave frontier: an **estimate**;
- :meth:`~ScoreAuditor.max_accuracy` — an **estimate**; with ``significance``, the largest Clopper–Pearson upper bound
  over the frontier's thresholds: a **heuristic** upper bound (the thresholds come from the data);
- :meth:`~ScoreAuditor.epsilon_from_gdp` — the GDP ε of a μ lower bound (Nasr et al. 2023; Dong, Roth, Su 2022
  Corollary 2.13): an **estimate** (a GDP-shaped curve is assumed); both test directions under one Bonferroni
  budget, never ``abs()`` (jax_privacy 2.0 takes abs() of a one-sided statistic: ε ≈ 3.5 on null scores);
- :meth:`~ScoreAuditor.epsilon_one_run` — Steinke, Nasr, Jagielski 2023: a **bound** (a-priori cut-offs; a heuristic
  with :class:`~dplens.auditing.one_run.ParetoFrontierHeuristic`);
- :meth:`~ScoreAuditor.epsilon_one_run_fdp` — Mahloujifar, Melis, Chaudhuri 2025: against the (ε, δ)-DP curve a
  **bound**; against the Gaussian family (jax_privacy's choice) an **estimate** (it tests "M is μ-GDP").

:class:`BootstrapParams` turns the raw-count ε, the TPR at an FPR and the AUROC into bootstrap quantiles (BCa: bias
correction and, optionally, jackknife acceleration; Efron 1987): intervals *of the estimate*, never confidence bounds
on ε — every :class:`BootstrapInterval` says so. Randomness is always seeded (``seed=0`` by default: the same numbers
every run), where jax_privacy draws a fresh seed when none is given.

The two-sample estimators read the scores as trials with the canary in and out; the one-run ones read them as the
m = n_in + n_out canaries of one run, each included independently with probability ½ before it.

>>> import numpy as np
>>> auditor = ScoreAuditor(np.arange(100) + 9.5, np.arange(100))
>>> round(auditor.auroc().value, 3), auditor.auroc().kind
(0.595, 'estimate')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special

from dplens.accountant import conversions
from dplens.auditing import bounds as bd
from dplens.auditing import one_run as orun
from dplens.auditing.host import host_array
from dplens.auditing.runner import check_seed

__all__ = [
    "AuditNumber",
    "BootstrapInterval",
    "BootstrapParams",
    "Explicit",
    "GridBonferroni",
    "MultiSplit",
    "ParetoBonferroni",
    "ScoreAuditor",
    "Split",
    "ThresholdStrategy",
]

BOUND, ESTIMATE, HEURISTIC = "bound", "estimate", "heuristic"
JAGIELSKI_2020 = "Jagielski, Ullman, Oprea 2020 (NeurIPS; arXiv:2006.07709)"
NASR_2023 = "Nasr et al. 2023 (USENIX Security; arXiv:2302.07956)"
EFRON_1987 = "Efron 1987, Bootstrap confidence intervals (Statist. Sci. 2(3))"
MEINSHAUSEN_2009 = "Meinshausen, Meier, Buehlmann 2009 (JASA; arXiv:0811.2177)"
_PARETO_NOTE = (
    "Bonferroni over the vertices of the empirical ROC's concave frontier (jax_privacy's default): the count of "
    "hypotheses comes from the same scores, so the number is a heuristic, not a valid bound"
)
_BOOTSTRAP_NOTE = "bootstrap quantiles of an estimate, not a confidence bound on epsilon"


# --------------------------------------------------------------------------------------------
# Options (types, not strings)
# --------------------------------------------------------------------------------------------


class ThresholdStrategy:
    """How the two-sample Clopper–Pearson audit picks its threshold."""


@dataclass(frozen=True, slots=True)
class Explicit(ThresholdStrategy):
    """One threshold fixed before the scores were seen: no multiplicity cost (a bound)."""

    threshold: float

    def __post_init__(self) -> None:
        bd.check_threshold(self.threshold)


@dataclass(frozen=True, slots=True)
class GridBonferroni(ThresholdStrategy):
    """Thresholds fixed before the scores, Bonferroni over them (a bound)."""

    thresholds: tuple[float, ...]

    def __post_init__(self) -> None:
        try:
            values = tuple(sorted({float(t) for t in self.thresholds}))
        except (TypeError, ValueError):
            raise ValueError(f"thresholds must be a sequence of numbers; got {self.thresholds!r}") from None
        if not values or any(math.isnan(t) for t in values):
            raise ValueError(f"thresholds must be a non-empty sequence of numbers; got {self.thresholds!r}")
        object.__setattr__(self, "thresholds", values)


@dataclass(frozen=True, slots=True)
class ParetoBonferroni(ThresholdStrategy):
    """jax_privacy's ``Bonferroni()``: every vertex of the ROC's concave frontier at α/K (a heuristic: K comes from
    the data)."""


@dataclass(frozen=True, slots=True)
class Split(bd.SeededSplit, ThresholdStrategy):
    """Choose the threshold on a random ``fraction`` of each class, bound on the rest at α (a bound)."""


@dataclass(frozen=True, slots=True)
class MultiSplit(ThresholdStrategy):
    """The median of ``samples`` split bounds, each at α/2 (a bound: Meinshausen, Meier, Bühlmann 2009, Theorem 3.1
    — more than half the splits would have to exceed ε, each does with probability ≤ α/2, so by Markov ≤ α)."""

    samples: int = 100
    fraction: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 1:
            raise ValueError(f"samples must be an integer >= 1; got {self.samples!r}")
        bd.check_fraction(self.fraction)
        check_seed(self.seed)


@dataclass(frozen=True, slots=True)
class BootstrapParams:
    """Bootstrap quantiles of an estimate (BCa; Efron 1987): ``samples`` resamples of each class with replacement.

    ``acceleration`` needs ``bias_correction`` and costs one evaluation per score (jackknife).
    """

    samples: int = 1000
    quantiles: tuple[float, ...] = (0.025, 0.975)
    bias_correction: bool = True
    acceleration: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 2:
            raise ValueError(f"samples must be an integer >= 2; got {self.samples!r}")
        try:
            quantiles = tuple(float(q) for q in self.quantiles)
        except (TypeError, ValueError):
            raise ValueError(f"quantiles must be numbers in (0, 1); got {self.quantiles!r}") from None
        if not quantiles or not all(0 < q < 1 for q in quantiles):
            raise ValueError(f"quantiles must be a non-empty sequence of numbers in (0, 1); got {self.quantiles!r}")
        if self.acceleration and not self.bias_correction:
            raise ValueError("acceleration needs bias_correction=True (BCa)")
        check_seed(self.seed)
        object.__setattr__(self, "quantiles", quantiles)

    @classmethod
    def confidence_interval(cls, samples: int = 1000, confidence: float = 0.95, seed: int = 0) -> BootstrapParams:
        """The two-sided interval holding ``confidence`` of the bootstrap distribution (of the estimate)."""
        if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
        tail = (1.0 - confidence) / 2
        return cls(samples=samples, quantiles=(tail, 1.0 - tail), seed=seed)


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditNumber:
    """One number from scores and what it is: ``kind`` is ``"bound"`` (valid at ``significance``), ``"estimate"`` or
    ``"heuristic"`` (a bound's procedure whose multiplicity correction is data-dependent)."""

    name: str
    value: float
    kind: str
    quantity: str
    method: str
    reference: str
    significance: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __float__(self) -> float:
        return float(self.value)

    @property
    def is_bound(self) -> bool:
        return self.kind == BOUND

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "kind": self.kind,
            "is_estimate": self.kind != BOUND,
            "quantity": self.quantity,
            "method": self.method,
            "reference": self.reference,
            "significance": self.significance,
            **self.details,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class BootstrapInterval:
    """Bootstrap quantiles of an estimate (never a bound; ``note`` says so)."""

    estimate: AuditNumber
    quantiles: tuple[float, ...]
    values: tuple[float, ...]
    params: BootstrapParams
    note: str = _BOOTSTRAP_NOTE

    kind = ESTIMATE

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate.to_dict(),
            "kind": ESTIMATE,
            "is_estimate": True,
            "quantiles": list(self.quantiles),
            "values": list(self.values),
            "samples": self.params.samples,
            "bias_correction": self.params.bias_correction,
            "acceleration": self.params.acceleration,
            "seed": self.params.seed,
            "reference": EFRON_1987,
            "note": self.note,
        }


# --------------------------------------------------------------------------------------------
# Counts on the ROC's concave frontier
# --------------------------------------------------------------------------------------------


def _frontier(in_sorted: np.ndarray, out_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thresholds, FN, TN) at the vertices of the concave frontier of the (FN, TN) staircase of "score ≥ t ⇒ in",
    over the distinct scores and +∞ (the rules worth randomising between)."""
    thresholds = np.concatenate((np.union1d(in_sorted, out_sorted), [np.inf]))
    fn = np.searchsorted(in_sorted, thresholds, side="left").astype(np.int64)
    tn = np.searchsorted(out_sorted, thresholds, side="left").astype(np.int64)
    keep = orun._upper_hull(fn, tn)
    return thresholds[keep], fn[keep], tn[keep]


def _cp_epsilon(fn, fp, n_in: int, n_out: int, per_rate: float, delta: float, one_sided: bool):
    """Per threshold, the larger ε lower bound of the directions allowed, and which direction gave it."""
    fnr_u = bd.clopper_pearson_upper(fn, n_in, per_rate)
    fpr_u = bd.clopper_pearson_upper(fp, n_out, per_rate)
    forward, reverse = bd.epsilon_lower_bounds(fpr_u, fnr_u, delta)
    forward = np.nan_to_num(np.asarray(forward, dtype=float), nan=-np.inf)
    if one_sided:
        return forward, np.zeros(forward.shape, dtype=bool)
    reverse = np.nan_to_num(np.asarray(reverse, dtype=float), nan=-np.inf)
    use_reverse = reverse > forward
    return np.where(use_reverse, reverse, forward), use_reverse


def _interpolate_tpr(fpr: np.ndarray, tp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """The largest TPR at each FPR over rules randomising between two frontier thresholds (tp, fp increasing)."""
    n_pos, n_neg = tp[-1], fp[-1]
    target = np.asarray(fpr, dtype=float) * n_neg
    right = np.minimum(np.searchsorted(fp, target, side="right"), fp.size - 1)
    left = np.maximum(right - 1, 0)
    span = fp[right] - fp[left]
    weight = np.where(span > 0, (target - fp[left]) / np.where(span > 0, span, 1), 0.0)
    return (tp[left] + weight * (tp[right] - tp[left])) / n_pos


def _bca_quantiles(values: np.ndarray, full: float, params: BootstrapParams, jackknife: np.ndarray | None):
    """BCa-adjusted quantile levels (Efron 1987), or the plain levels without bias correction."""
    levels = np.asarray(params.quantiles)
    if not params.bias_correction:
        return levels
    # Laplace smoothing keeps the proportion inside (0, 1), where Φ⁻¹ is finite.
    z0 = special.ndtri((np.sum(values < full) + 1) / (values.size + 2))
    accel = 0.0
    if jackknife is not None:
        centred = jackknife.mean() - jackknife
        denominator = 6.0 * np.sum(centred**2) ** 1.5
        accel = 0.0 if denominator == 0 else float(np.sum(centred**3) / denominator)
    z = special.ndtri(levels)
    return special.ndtr(z0 + (z0 + z) / (1.0 - accel * (z0 + z)))


# --------------------------------------------------------------------------------------------
# The auditor
# --------------------------------------------------------------------------------------------


def _check_scores(values: Any, name: str) -> np.ndarray:
    array = host_array(values, name=name)
    return np.sort(orun.score_array(array, name=name, shown=lambda: type(values).__name__, allow_nan=False))


def _check_delta(delta: Any, *, positive: bool = False) -> float:
    if isinstance(delta, bool):
        raise ValueError(f"delta must be in [0, 1); got {delta!r}")
    return conversions.check_delta(delta, allow_zero=not positive)


class ScoreAuditor:
    """Privacy metrics from the scores of canaries held in and held out (higher score ⇒ "in"; negate a loss).

    Args:
        in_scores: scores of the canaries that were in (torch, JAX, CuPy arrays accepted).
        out_scores: scores of the canaries that were out.

    Every method returns an :class:`AuditNumber` (or a :class:`BootstrapInterval`) whose ``kind`` says whether it is a
    bound, an estimate or a heuristic (see the module docstring for which is which).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> auditor = ScoreAuditor(rng.normal(2.0, 1.0, 500), rng.normal(0.0, 1.0, 500))
        >>> bound = auditor.epsilon_one_run_fdp(0.05, 1e-5)  # one run's canaries: a valid bound
        >>> bound.kind, 0 < bound.value < 10.0  # the true ε of these scores at δ = 1e-5 is 10.0
        ('bound', True)
        >>> auditor.epsilon_one_run_fdp(0.05, 1e-5, gaussian=True).kind  # jax_privacy's Gaussian family
        'estimate'
    """

    def __init__(self, in_scores: Any, out_scores: Any) -> None:
        self._in = _check_scores(in_scores, "in_scores")
        self._out = _check_scores(out_scores, "out_scores")
        self._thresholds, self._fn, self._tn = _frontier(self._in, self._out)

    @property
    def n_in(self) -> int:
        return int(self._in.size)

    @property
    def n_out(self) -> int:
        return int(self._out.size)

    def _tp_fp(self) -> tuple[np.ndarray, np.ndarray]:
        """True and false positives at the frontier's thresholds, increasing (from +∞ down)."""
        return (self.n_in - self._fn)[::-1], (self.n_out - self._tn)[::-1]

    # ---- two samples: Clopper–Pearson with a threshold strategy

    def _cp_at(self, thresholds: np.ndarray, per_rate: float, delta: float, one_sided: bool) -> tuple[float, int, bool]:
        fn = np.searchsorted(self._in, thresholds, side="left")
        fp = self.n_out - np.searchsorted(self._out, thresholds, side="left")
        eps, reverse = _cp_epsilon(fn, fp, self.n_in, self.n_out, per_rate, delta, one_sided)
        best = int(np.argmax(eps))
        return max(float(eps[best]), 0.0), best, bool(reverse[best])

    def _split_once(self, fraction: float, rng: np.random.Generator, alpha: float, delta: float, one_sided: bool):
        parts = []
        for values in (self._in, self._out):
            mask = rng.random(values.size) < fraction
            parts.append((values[mask], values[~mask]))
        (sel_in, bnd_in), (sel_out, bnd_out) = parts
        if min(sel_in.size, bnd_in.size, sel_out.size, bnd_out.size) == 0:
            raise ValueError("scores: a split left a part without in or out scores; give more scores or Explicit(t)")
        chooser = ScoreAuditor.__new__(ScoreAuditor)
        chooser._in, chooser._out = sel_in, sel_out
        chooser._thresholds, chooser._fn, chooser._tn = _frontier(sel_in, sel_out)
        _, index, _ = chooser._cp_at(chooser._thresholds, alpha / 2, delta, one_sided)
        threshold = float(chooser._thresholds[index])
        counted = ScoreAuditor.__new__(ScoreAuditor)
        counted._in, counted._out = bnd_in, bnd_out
        value, _, reverse = counted._cp_at(np.array([threshold]), alpha / 2, delta, one_sided)
        return value, threshold, reverse

    def epsilon_clopper_pearson(
        self,
        significance: float,
        delta: float = 0.0,
        one_sided: bool = True,
        *,
        threshold_strategy: ThresholdStrategy | None = None,
    ) -> AuditNumber:
        """ε lower bound from a threshold test: one-sided Clopper–Pearson at α/2 on FNR and FPR (union bound), ε ≥
        ln((1 − δ − FNR⁺)/FPR⁺), and with ``one_sided=False`` also the reverse rule (Kairouz, Oh, Viswanath 2015
        Theorem 2.1; Jagielski, Ullman, Oprea 2020). ``threshold_strategy``: :class:`Split` (default),
        :class:`Explicit`, :class:`MultiSplit`, :class:`GridBonferroni` (bounds) or :class:`ParetoBonferroni`
        (jax_privacy's default, a heuristic)."""
        alpha = bd.check_significance(significance)
        delta = _check_delta(delta)
        strategy = Split() if threshold_strategy is None else threshold_strategy
        kind, details = BOUND, {"one_sided": bool(one_sided)}
        match strategy:
            case Explicit(threshold=t):
                value, _, reverse = self._cp_at(np.array([float(t)]), alpha / 2, delta, one_sided)
                how, details = f"threshold {t:g} fixed in advance", details | {"threshold": float(t)}
            case GridBonferroni(thresholds=grid):
                value, index, reverse = self._cp_at(np.array(grid), alpha / (2 * len(grid)), delta, one_sided)
                how = f"Bonferroni over {len(grid)} thresholds fixed in advance"
                details |= {"threshold": grid[index], "hypotheses": len(grid)}
            case ParetoBonferroni():
                k = self._thresholds.size
                value, index, reverse = self._cp_at(self._thresholds, alpha / (2 * k), delta, one_sided)
                kind, how = HEURISTIC, _PARETO_NOTE
                details |= {"threshold": float(self._thresholds[index]), "hypotheses": k}
            case Split(fraction=fraction, seed=seed):
                rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(5,)))
                value, threshold, reverse = self._split_once(fraction, rng, alpha, delta, one_sided)
                how = f"threshold chosen on a random {fraction:.0%} of each class (seed {seed}), bounded on the rest"
                details |= {"threshold": threshold}
            case MultiSplit(samples=samples, fraction=fraction, seed=seed):
                rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(6,)))
                values = [self._split_once(fraction, rng, alpha / 2, delta, one_sided)[0] for _ in range(samples)]
                value, reverse = float(np.median(values)), None
                how = f"median of {samples} split bounds at alpha/2 (Meinshausen et al. 2009)"
                details |= {"splits": samples}
            case _:
                raise ValueError(f"threshold_strategy must be one of the ThresholdStrategy types; got {strategy!r}")
        return AuditNumber(
            name="epsilon_clopper_pearson",
            value=value,
            kind=kind,
            quantity="epsilon lower bound" if kind == BOUND else "epsilon (heuristic bound)",
            method=f"Clopper-Pearson on FNR and FPR at alpha/2 each; {how}",
            reference=JAGIELSKI_2020,
            significance=alpha,
            details=details
            | {"direction": None if reverse is None else bd.REVERSE if reverse else bd.FORWARD}
            | {"delta": delta},
        )

    # ---- estimates from raw counts, and their bootstrap

    def _bootstrap(self, metric: Any, params: BootstrapParams) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(levels, values): BCa quantiles of ``metric(auditor)`` over ``params.samples`` resamples."""
        rng = np.random.default_rng(np.random.SeedSequence(params.seed, spawn_key=(7,)))
        values = np.empty(params.samples)
        for j in range(params.samples):
            resampled = ScoreAuditor(rng.choice(self._in, self.n_in), rng.choice(self._out, self.n_out))
            values[j] = metric(resampled)
        jackknife = None
        if params.acceleration:
            jackknife = np.array(
                [metric(ScoreAuditor(np.delete(self._in, i), self._out)) for i in range(self.n_in)]
                + [metric(ScoreAuditor(self._in, np.delete(self._out, i))) for i in range(self.n_out)]
            )
        levels = _bca_quantiles(values, float(metric(self)), params, jackknife)
        quantiles = np.quantile(values, levels, method="linear")
        return tuple(float(q) for q in levels), tuple(float(q) for q in quantiles)

    def _interval(self, number: AuditNumber, metric: Any, bootstrap: BootstrapParams | None):
        if bootstrap is None:
            return number
        levels, values = self._bootstrap(metric, bootstrap)
        return BootstrapInterval(estimate=number, quantiles=levels, values=values, params=bootstrap)

    @staticmethod
    def _raw_epsilon(tp: np.ndarray, fp: np.ndarray, min_count: int, delta: float) -> float:
        n_pos, n_neg = tp[-1], fp[-1]
        if min_count >= n_neg:
            return 0.0
        min_fpr = min_count / n_neg
        tpr_at = float(_interpolate_tpr(np.array([min_fpr]), tp, fp)[0])
        with np.errstate(divide="ignore"):
            if delta == 0:
                return float(np.log(tpr_at / min_fpr))
            initial = max(0.0, math.log(tpr_at - delta) - math.log(min_fpr)) if tpr_at > delta else 0.0
            tpr, fpr = tp / n_pos, fp / n_neg
            valid = (fp >= min_count) & (tpr > delta)
            eps = np.log(tpr[valid] - delta) - np.log(fpr[valid])
        return float(np.max(eps, initial=initial))

    def epsilon_raw_counts(
        self,
        min_count: int = 50,
        delta: float = 0.0,
        one_sided: bool = True,
        *,
        bootstrap: BootstrapParams | None = None,
    ) -> AuditNumber | BootstrapInterval:
        """ln((TPR − δ)/FPR) from raw counts at thresholds with at least ``min_count`` false positives (and the
        reverse rule with ``one_sided=False``): an ESTIMATE, no confidence attached (a bootstrap gives quantiles of
        the estimate)."""
        if isinstance(min_count, bool) or not isinstance(min_count, int | np.integer) or min_count < 1:
            raise ValueError(f"min_count must be an integer >= 1; got {min_count!r}")
        delta = _check_delta(delta)

        def metric(auditor: ScoreAuditor) -> float:
            tp, fp = auditor._tp_fp()
            eps = auditor._raw_epsilon(tp, fp, int(min_count), delta)
            if not one_sided:  # the reverse rule "score < t ⇒ in": true negatives play the true positives
                eps = max(eps, auditor._raw_epsilon(auditor._tn, auditor._fn, int(min_count), delta))
            return max(eps, 0.0)

        number = AuditNumber(
            name="epsilon_raw_counts",
            value=metric(self),
            kind=ESTIMATE,
            quantity="epsilon estimate (raw counts, not a bound)",
            method=f"ln((TPR - delta)/FPR) at thresholds with >= {min_count} false positives",
            reference=JAGIELSKI_2020,
            details={"min_count": int(min_count), "delta": delta, "one_sided": bool(one_sided)},
        )
        return self._interval(number, metric, bootstrap)

    def tpr_at_fpr(self, fpr: float, *, bootstrap: BootstrapParams | None = None) -> AuditNumber | BootstrapInterval:
        """The largest TPR at FPR ``fpr`` over rules randomising between two thresholds of the frontier: an
        ESTIMATE (Carlini et al. 2022 report it at low FPR). For several FPRs call it once per value."""
        if isinstance(fpr, bool) or not isinstance(fpr, int | float) or not 0 <= fpr <= 1:
            raise ValueError(f"fpr must be in [0, 1]; got {fpr!r}")

        def metric(auditor: ScoreAuditor) -> float:
            return float(_interpolate_tpr(np.array([float(fpr)]), *auditor._tp_fp())[0])

        number = AuditNumber(
            name="tpr_at_fpr",
            value=metric(self),
            kind=ESTIMATE,
            quantity=f"TPR at FPR {fpr:g}",
            method="randomised thresholds between the vertices of the ROC's concave frontier",
            reference="Carlini, Chien, Nasr, Song, Terzis, Tramer 2022 (IEEE S&P)",
            details={"fpr": float(fpr)},
        )
        return self._interval(number, metric, bootstrap)

    def auroc(self, *, bootstrap: BootstrapParams | None = None) -> AuditNumber | BootstrapInterval:
        """The area under the ROC's concave frontier (rules may randomise between two thresholds): an ESTIMATE."""

        def metric(auditor: ScoreAuditor) -> float:
            tnr, fnr = auditor._tn / auditor.n_out, auditor._fn / auditor.n_in
            return float(0.5 * np.dot(tnr[:-1] + tnr[1:], fnr[1:] - fnr[:-1]))

        number = AuditNumber(
            name="auroc",
            value=metric(self),
            kind=ESTIMATE,
            quantity="area under the ROC curve",
            method="trapezoids over the vertices of the ROC's concave frontier",
            reference="jax_privacy CanaryScoreAuditor.attack_auroc",
        )
        return self._interval(number, metric, bootstrap)

    def max_accuracy(self, *, prevalence: float | None = None, significance: float | None = None) -> AuditNumber:
        """The best accuracy of a threshold rule at ``prevalence`` (default: the share of in scores): an ESTIMATE;
        with ``significance``, the largest Clopper–Pearson upper bound (α/2 on each rate) over the frontier's
        thresholds — a HEURISTIC upper bound, the thresholds being the data's own."""
        if prevalence is None:
            prevalence = self.n_in / (self.n_in + self.n_out)
        elif isinstance(prevalence, bool) or not isinstance(prevalence, int | float) or not 0 <= prevalence <= 1:
            raise ValueError(f"prevalence must be in [0, 1]; got {prevalence!r}")
        tp = self.n_in - self._fn
        if significance is None:
            tpr, tnr, kind = tp / self.n_in, self._tn / self.n_out, ESTIMATE
        else:
            alpha = bd.check_significance(significance)
            tpr = bd.clopper_pearson_upper(tp, self.n_in, alpha / 2)
            tnr = bd.clopper_pearson_upper(self._tn, self.n_out, alpha / 2)
            kind = HEURISTIC
        return AuditNumber(
            name="max_accuracy" if significance is None else "max_accuracy_upper",
            value=float(np.max(tpr * prevalence + tnr * (1 - prevalence))),
            kind=kind,
            quantity="maximum accuracy" + (" (upper bound)" if significance is not None else ""),
            method="best threshold of the ROC's concave frontier",
            reference="jax_privacy CanaryScoreAuditor.max_accuracy",
            significance=None if significance is None else float(significance),
            details={"prevalence": float(prevalence)},
        )

    def epsilon_from_gdp(self, significance: float, delta: float) -> AuditNumber:
        """The ε of a lower bound on μ (Nasr et al. 2023; Dong, Roth, Su 2022 Corollary 2.13): an ESTIMATE, valid only
        if the mechanism's curve is GDP-shaped. μ ≥ Φ⁻¹(1 − FPR⁺) − Φ⁻¹(FNR⁺) and the reverse, every frontier
        threshold's rate bounds at α/(2K) (both directions read the same bounds); a negative μ is no evidence."""
        alpha = bd.check_significance(significance)
        delta = _check_delta(delta, positive=True)
        k = self._fn.size
        fnr_u = bd.clopper_pearson_upper(self._fn, self.n_in, alpha / (2 * k))
        fpr_u = bd.clopper_pearson_upper(self.n_out - self._tn, self.n_out, alpha / (2 * k))
        forward, reverse = bd.gdp_mu_lower_bounds(fpr_u, fnr_u)
        with np.errstate(invalid="ignore"):
            mu = float(np.nanmax(np.concatenate([forward, reverse, [0.0]])))
        mu = max(mu, 0.0) if math.isfinite(mu) else 0.0
        return AuditNumber(
            name="epsilon_from_gdp",
            value=conversions.gdp_epsilon(mu, delta) if mu > 0 else 0.0,
            kind=ESTIMATE,
            quantity="epsilon estimate (GDP-shaped mechanism assumed)",
            method=f"mu lower bound over {k} frontier thresholds and both directions, converted at delta {delta:g}",
            reference=f"{NASR_2023}; Dong, Roth, Su 2022 Corollary 2.13",
            significance=alpha,
            details={"mu_lower_bound": mu, "delta": delta, "assumption": bd.GDP_ASSUMPTION, "hypotheses": k},
        )

    # ---- one run

    def _one_run(self, significance, delta, rule, correction, analysis) -> orun.OneRunResult:
        scores = np.concatenate([self._in, self._out])
        labels = np.concatenate([np.ones(self.n_in, dtype=bool), np.zeros(self.n_out, dtype=bool)])
        return orun.one_run_audit(
            scores,
            labels,
            significance=significance,
            delta=delta,
            rule=orun.TopK() if rule is None else rule,
            correction=correction,
            analysis=analysis,
        )

    @staticmethod
    def _one_run_number(name: str, result: orun.OneRunResult) -> AuditNumber:
        kind = ESTIMATE if result.is_estimate else HEURISTIC if result.heuristic else BOUND
        return AuditNumber(
            name=name,
            value=result.epsilon_lower_bound,
            kind=kind,
            quantity="epsilon lower bound" if kind == BOUND else "epsilon " + kind,
            method=f"{result.analysis}; {result.rule} guesses, {result.correction} over {result.hypotheses}",
            reference=result.reference,
            significance=result.significance,
            details={"one_run": result.to_dict()},
        )

    def epsilon_one_run(
        self,
        significance: float,
        delta: float,
        *,
        rule: orun.GuessRule | None = None,
        correction: orun.SearchCorrection | None = None,
    ) -> AuditNumber:
        """Steinke, Nasr, Jagielski 2023 on the canaries of one run: a BOUND with the default a-priori cut-offs
        (:class:`~dplens.auditing.one_run.BonferroniCutoffs`, top-k guesses as jax_privacy), a HEURISTIC with
        :class:`~dplens.auditing.one_run.ParetoFrontierHeuristic` (jax_privacy's thresholds)."""
        delta = _check_delta(delta)
        result = self._one_run(significance, delta, rule, correction, orun.ApproximateDP())
        return self._one_run_number("epsilon_one_run", result)

    def epsilon_one_run_fdp(
        self,
        significance: float,
        delta: float,
        *,
        gaussian: bool = False,
        rule: orun.GuessRule | None = None,
        correction: orun.SearchCorrection | None = None,
    ) -> AuditNumber:
        """Mahloujifar, Melis, Chaudhuri 2025 on the canaries of one run. Against the (ε, δ)-DP curve (default) a
        BOUND; with ``gaussian=True`` against the Gaussian family as jax_privacy's ``epsilon_one_run_fdp`` — an
        ESTIMATE (it rejects "M is μ(ε, δ)-GDP", a stronger claim than (ε, δ)-DP; on pure ε = 1 randomized response
        it exceeds 1 in almost every seed)."""
        delta = _check_delta(delta, positive=gaussian)
        analysis = orun.GaussianFDP() if gaussian else orun.EpsilonDeltaFDP()
        result = self._one_run(significance, delta, rule, correction, analysis)
        return self._one_run_number("epsilon_one_run_fdp" + ("_gaussian" if gaussian else ""), result)

    # ---- everything at once

    def every_estimator(
        self, significance: float, delta: float, *, one_run: bool = False, fpr_targets: tuple[float, ...] = (1e-3, 1e-2)
    ) -> tuple[AuditNumber, ...]:
        """Every estimator at its defaults (the valid choice of thresholds, and jax_privacy's beside it where it
        differs), each labelled: ``dplens audit-scores --estimators``. One run: the canaries' one-run analyses;
        otherwise the two-sample ones. Estimators that need δ > 0 (GDP-shaped) are left out at δ = 0."""
        alpha = bd.check_significance(significance)
        delta = _check_delta(delta)
        out: list[AuditNumber] = []
        if one_run:
            pareto = orun.ParetoFrontierHeuristic()
            out += [self.epsilon_one_run(alpha, delta), self.epsilon_one_run(alpha, delta, correction=pareto)]
            out += [self.epsilon_one_run_fdp(alpha, delta), self.epsilon_one_run_fdp(alpha, delta, correction=pareto)]
            if delta > 0:
                out.append(self.epsilon_one_run_fdp(alpha, delta, gaussian=True))
                out.append(self.epsilon_one_run_fdp(alpha, delta, gaussian=True, correction=pareto))
        else:
            out += [
                self.epsilon_clopper_pearson(alpha, delta, one_sided=False),
                self.epsilon_clopper_pearson(alpha, delta, threshold_strategy=ParetoBonferroni()),
            ]
            if delta > 0:
                out.append(self.epsilon_from_gdp(alpha, delta))
        min_count = max(1, min(50, self.n_out // 20))
        out += [self.epsilon_raw_counts(min_count=min_count, delta=delta), self.auroc()]
        out += [self.tpr_at_fpr(f) for f in fpr_targets]
        out += [self.max_accuracy(), self.max_accuracy(significance=alpha)]
        return tuple(out)
