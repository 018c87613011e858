"""Stage 5 — build the result: each score's bound from the counted trials, the verdict, the evidence in words.

Every (score, threshold, direction) is one hypothesis of the weighted Bonferroni procedure whose weights the pilot
fixed (:mod:`.operating_point`); each is tested with the exact conditional bound on the probability ratio of the
Poissonised counts (:mod:`dplens.auditing.blackbox.poisson`), so the largest bound over every score is a valid
(1 − α) lower bound on the ε of the audited pair (Jagielski, Ullman, Oprea, NeurIPS 2020, for fixed-threshold
validity; Holm 1979 for weighted Bonferroni). The verdict compares it with the claim and with the ceiling, the
largest bound the trials could have certified (:func:`dplens.auditing.games.verdict_for`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing import bounds as bd
from dplens.auditing.blackbox import operating, poisson
from dplens.auditing.blackbox.reachability import ReachBinner, evidence
from dplens.auditing.games import Verdict, verdict_for
from dplens.auditing.stages.checks import Checked
from dplens.auditing.stages.counting import Counted
from dplens.auditing.stages.operating_point import OperatingPoint
from dplens.auditing.stages.profile import Profiled
from dplens.auditing.stages.setting import AuditSetting

__all__ = ["RESULT_FORMAT", "RESULT_FORMAT_VERSION", "TargetAuditResult", "build_result", "conditional_bound"]

RESULT_FORMAT = "dplens-target-audit"
RESULT_FORMAT_VERSION = 1


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetAuditResult:
    """The audit of a user's target: a valid lower bound on ε at ``delta``, every score tried, the float evidence,
    the verdict and whether the run can be replayed (``reproducible``).

    ``epsilon_lower_bound`` is a valid (``confidence``) lower bound on the ε of the audited pair (the largest of
    the per-score bounds, each at significance α/S); nothing here is an estimate unless labelled so.

    Example:
        >>> from dplens.auditing.target_game import audit_target
        >>> def geometric(data, rng):  # exact two-sided geometric noise on an integer count: ε = 1
        ...     return int(sum(data)) + int(rng.geometric(1 - 2.718281828459045**-1)) - int(
        ...         rng.geometric(1 - 2.718281828459045**-1))
        >>> result = audit_target(geometric, ([1, 1, 0], [1, 1]), claim_epsilon=1.0, trials=5_000, seed=0)
        >>> result.verdict.value, result.reproducible, result.epsilon_lower_bound <= 1.0
        ('CONSISTENT', True, True)
        >>> TargetAuditResult.from_dict(result.to_dict()) == result
        True
    """

    epsilon_lower_bound: float
    bound_direction: str
    best_score: str
    epsilon_claimed: float
    delta: float
    confidence: float
    trials: int
    target: dict[str, Any]
    pair: dict[str, Any]
    output_kind: str
    scores: tuple[dict[str, Any], ...]
    float_evidence: tuple[dict[str, Any], ...]
    probe: dict[str, Any]
    notes: tuple[str, ...]
    ceiling: float
    reproducible: bool
    reproducibility_note: str
    verdict: Verdict
    verdict_reason: str
    seed: int
    chunks: int
    backend: str
    pilot_trials: int
    elapsed_seconds: float
    pairs_tried: tuple[dict[str, Any], ...] = ()
    pilot_fraction: float = 0.0
    side_trials: tuple[int, int] = (0, 0)
    fit_trials: int = 0
    selection_trials: int = 0
    output_profile: dict[str, Any] = dataclasses.field(default_factory=dict)
    method: str = ""
    memory: dict[str, Any] = dataclasses.field(default_factory=dict)
    format_version: int = RESULT_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, stable keys (read by :mod:`dplens.reports.target_audit`)."""
        return {
            "format": RESULT_FORMAT,
            "format_version": self.format_version,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "is_estimate": False,
            "bound_direction": self.bound_direction,
            "best_score": self.best_score,
            "epsilon_claimed": self.epsilon_claimed,
            "delta": self.delta,
            "confidence": self.confidence,
            "trials": self.trials,
            "target": dict(self.target),
            "pair": dict(self.pair),
            "output_kind": self.output_kind,
            "scores": [dict(s) for s in self.scores],
            "float_evidence": [dict(e) for e in self.float_evidence],
            "probe": dict(self.probe),
            "notes": list(self.notes),
            "ceiling": _finite(self.ceiling),
            "reproducible": self.reproducible,
            "reproducibility_note": self.reproducibility_note,
            "verdict": self.verdict.value,
            "verdict_reason": self.verdict_reason,
            "seed": self.seed,
            "chunks": self.chunks,
            "backend": self.backend,
            "pilot_trials": self.pilot_trials,
            "elapsed_seconds": self.elapsed_seconds,
            "pairs_tried": [dict(p) for p in self.pairs_tried],
            "pilot_fraction": self.pilot_fraction,
            "side_trials": list(self.side_trials),
            "fit_trials": self.fit_trials,
            "selection_trials": self.selection_trials,
            "output_profile": dict(self.output_profile),
            "method": self.method,
            "memory": dict(self.memory),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TargetAuditResult:
        """Inverse of :meth:`to_dict` (a missing field raises ``ValueError`` naming it)."""
        if not isinstance(data, dict) or data.get("format") != RESULT_FORMAT:
            raise ValueError(f"not a dplens target audit result (format {RESULT_FORMAT!r})")
        if data.get("format_version") != RESULT_FORMAT_VERSION:
            raise ValueError(f"unsupported target audit format_version {data.get('format_version')!r}")
        optional = ("format_version", "pairs_tried", "method", "pilot_fraction", "fit_trials", "selection_trials")
        names = [n for n in cls.__dataclass_fields__ if n not in (*optional, "output_profile", "side_trials", "memory")]
        missing = [n for n in names if n not in data]
        if missing:
            raise ValueError(f"target audit result is missing required field {missing[0]!r}")
        kwargs = {n: data[n] for n in names}
        kwargs["verdict"] = Verdict(data["verdict"])
        kwargs["ceiling"] = math.inf if data["ceiling"] is None else data["ceiling"]
        for name in ("scores", "float_evidence", "notes"):
            kwargs[name] = tuple(data[name])
        return cls(
            **kwargs,
            pairs_tried=tuple(data.get("pairs_tried", ())),
            pilot_fraction=float(data.get("pilot_fraction", 0.0)),
            side_trials=tuple(data.get("side_trials", (0, 0))),
            fit_trials=int(data.get("fit_trials", 0)),
            selection_trials=int(data.get("selection_trials", 0)),
            output_profile=dict(data.get("output_profile", {})),
            method=data.get("method", ""),
            memory=dict(data.get("memory", {})),
        )

    def __repr__(self) -> str:
        return (
            f"TargetAuditResult(target={self.target.get('name')!r}, verdict={self.verdict.value}, "
            f"epsilon_lower_bound={self.epsilon_lower_bound:.4g} (valid {self.confidence:.0%} bound, "
            f"{self.best_score}), claimed={self.epsilon_claimed:g}, delta={self.delta:g}, trials={self.trials}, "
            f"scores={len(self.scores)}, reproducible={self.reproducible})"
        )


def conditional_bound(
    counts: bd.RateCounts, delta: float, share: float, allocation: operating.Allocation, b: int, trials: int
) -> tuple[bd.Bound, float]:
    """The best exact conditional bound over a score's thresholds and both directions (threshold j tested at
    significance ``share``·w_j), as a :class:`~dplens.auditing.bounds.Bound` (its rate bounds are the per-rate
    Clopper–Pearson bounds at the same level, for reading the operating point; the ε comes from the ratio)."""
    weights = allocation.weights[b]
    size = counts.thresholds.size
    levels = np.maximum(share * weights, 1e-300)  # a zero weight: "never tested" (its bound is useless, not invalid)
    forward, reverse = poisson.conditional_bounds(
        counts, delta=delta, levels=levels[:size], reverse_levels=levels[size:], lam=float(trials)
    )
    f, r = int(np.argmax(forward)), int(np.argmax(reverse))
    index, direction = (f, bd.FORWARD) if forward[f] >= reverse[r] else (r, bd.REVERSE)
    value = float(forward[f] if direction == bd.FORWARD else reverse[r])
    fn, fp = counts.false_negatives(), counts.false_positives()
    level = float(levels[index] if direction == bd.FORWARD else levels[size + index])
    fnr_u = float(bd.clopper_pearson_upper(int(fn[index]), counts.n_positives, level / 2))
    fpr_u = float(bd.clopper_pearson_upper(int(fp[index]), counts.n_negatives, level / 2))
    bound = bd.Bound(
        epsilon=max(value, 0.0),
        direction=direction,
        threshold=float(counts.thresholds[index]),
        false_positives=int(fp[index]),
        false_negatives=int(fn[index]),
        negatives=counts.n_negatives,
        positives=counts.n_positives,
        fpr_upper=fpr_u,
        fnr_upper=fnr_u,
        hypotheses=int(counts.thresholds.size),
        significance=share,
    )
    return bound, (math.exp(value) if math.isfinite(value) and value < 700 else (0.0 if value < 0 else math.inf))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Scored:
    """Every score's entry in the result, the float evidence, the best bound and its score, the ceiling."""

    entries: tuple[dict[str, Any], ...]
    evidence: tuple[dict[str, Any], ...]
    bound: bd.Bound
    best_score: str
    ceiling: float


def _scored(point: OperatingPoint, counted: Counted, setting: AuditSetting) -> _Scored:
    allocation = point.allocation
    offsets = np.concatenate([[0], np.cumsum([b.raw_size for b in point.binners])])
    results, found, best = [], [], None
    ceiling = 0.0
    for b, binner in enumerate(point.binners):
        raw = counted.raw[:, offsets[b] : offsets[b + 1]]
        counts = binner.rate_counts(raw)
        share = setting.significance * allocation.shares[b]
        bound, ratio_lower = conditional_bound(counts, setting.delta, share, allocation, b, setting.trials)
        score_ceiling = poisson.ceiling(setting.trials, share * float(np.max(allocation.weights[b])), setting.delta)
        ceiling = max(ceiling, score_ceiling)
        results.append(
            {
                "name": binner.name,
                "kind": binner.kind,
                "hypotheses": 2 * int(counts.thresholds.size),  # both directions of every threshold
                "significance": share,
                "epsilon_lower_bound": bound.epsilon,
                "direction": bound.direction,
                "operating_point": bound.operating_point(),
                "ceiling": score_ceiling,
                "ratio_lower_bound": ratio_lower,
                "pilot_predicted_bound": allocation.predicted[b],
                "pilot_predicted_bound_is_estimate": True,
                "focused": b == allocation.focus_score,
            }
        )
        if isinstance(binner, ReachBinner):
            found.append(evidence(binner, raw))
        if best is None or bound.epsilon > best[0].epsilon:
            best = (bound, binner.name)
    assert best is not None
    return _Scored(entries=tuple(results), evidence=tuple(found), bound=best[0], best_score=best[1], ceiling=ceiling)


def _method(profiled: Profiled, counted: Counted, *, trials: int, count: int) -> str:
    side_trials = counted.side_trials
    return (
        f"exact conditional bound on the probability ratio per (score, threshold) with Poissonised trial counts "
        f"(N_D, N_D' = {side_trials[0]}, {side_trials[1]} ~ Poisson({trials})), one weighted Bonferroni over "
        f"every score tried ({count}) and all their thresholds, both test directions; the weights fixed on an "
        f"independent pilot of {profiled.pilot} draws "
        f"per side ({profiled.fit_trials} fit the scores, {profiled.selection_trials} predict each threshold's "
        f"bound at N; {operating.FOCUS:.0%} of the significance on the best predicted test)"
    )


def _probe_dict(checked: Checked, profiled: Profiled) -> dict[str, Any]:
    probe_dict = profiled.probe.to_dict()
    if checked.stated_query:
        probe_dict["note"] += "; query values stated in the pair"
    elif profiled.pair.query is not None:
        probe_dict["note"] += "; query values: the inputs (the zero-noise output has sentinels)"
    return probe_dict


def build_result(
    *,
    setting: AuditSetting,
    target: dict[str, Any],
    checked: Checked,
    profiled: Profiled,
    notes: tuple[str, ...],
    point: OperatingPoint,
    counted: Counted,
    start: float,
    memory: dict[str, Any] | None = None,
) -> TargetAuditResult:
    """Stage 5 (see the module docstring): the frozen result of the audit (``target``: the target's description;
    ``start``: the audit's ``time.perf_counter()`` at its start)."""
    scored = _scored(point, counted, setting)
    bound = scored.bound
    verdict, reason = verdict_for(bound.epsilon, scored.ceiling, setting.claim_epsilon, setting.confidence)
    if verdict is Verdict.VIOLATION and scored.evidence and scored.best_score.startswith("float reachability"):
        reason += " " + next(e["sentence"] for e in scored.evidence if e["sampler"] in scored.best_score)
    if not checked.reproducible:
        notes = (*notes, checked.reproducibility_note)
    return TargetAuditResult(
        epsilon_lower_bound=bound.epsilon,
        bound_direction=bound.direction,
        best_score=scored.best_score,
        epsilon_claimed=setting.claim_epsilon,
        delta=setting.delta,
        confidence=setting.confidence,
        trials=setting.trials,
        target=target,
        pair=profiled.pair.summary(),
        output_kind=profiled.output_kind,
        scores=scored.entries,
        float_evidence=scored.evidence,
        probe=_probe_dict(checked, profiled),
        notes=tuple(notes),
        ceiling=scored.ceiling,
        reproducible=checked.reproducible,
        reproducibility_note=checked.reproducibility_note,
        verdict=verdict,
        verdict_reason=reason,
        seed=setting.seed,
        chunks=counted.chunks,
        backend=counted.backend,
        pilot_trials=profiled.pilot,
        elapsed_seconds=round(time.perf_counter() - start, 3),
        pairs_tried=checked.pairs_tried,
        pilot_fraction=profiled.fraction if setting.pilot_trials is None else profiled.pilot / setting.trials,
        side_trials=counted.side_trials,
        fit_trials=profiled.fit_trials,
        selection_trials=profiled.selection_trials,
        output_profile=profiled.profile.to_dict(),
        method=_method(profiled, counted, trials=setting.trials, count=len(point.binners)),
        memory=dict(memory or {}),
    )
