"""Audits from scores: a valid ε lower bound from membership scores of canaries (or records) in and out.

A team that trained a model and scored its canaries (a loss, a likelihood ratio, a dot product; higher ⇒ "in")
gets its bound here, with no model in sight (the separation of jax_privacy's canary score auditor,
auditing-anchors §3.1 and §8). Two designs:

- **Two samples** (:func:`audit_scores`): the scores of trainings (or records) with the canary in, and of
  trainings without it. For a test "score ≥ t ⇒ in" with false-positive rate FPR and false-negative rate FNR,
  (ε, δ)-DP implies ε ≥ log((1 − δ − FNR)/FPR) and ε ≥ log((1 − δ − FPR)/FNR) (Kairouz, Oh, Viswanath 2015,
  Theorem 2.1); one-sided Clopper–Pearson upper bounds at α/2 on each rate make it a valid (1 − α) lower bound
  (Jagielski, Ullman, Oprea 2020). The threshold and the direction never see the counted data for free: the
  default :class:`SplitSelection` chooses them on a random part of the scores and bounds on the rest at α (a
  split, auditing-anchors §1.3); :class:`ThresholdGrid` takes thresholds fixed before the data and pays a
  Bonferroni correction α/(2K) over them (both rates, both directions). The maximum over thresholds at a
  per-threshold α — invalid — is never taken, and the two directions are separate statistics (no absolute value,
  the jax_privacy PR #270 bug).
- **One run** (``one_run=True``): m canaries each included independently with probability ½ *before* a single
  training run; the scores go to the one-run analyses of :mod:`dplens.auditing.one_run` (guesses at cut-offs fixed
  before the data, Bonferroni over them): Steinke, Nasr, Jagielski 2023 and the f-DP analysis of Mahloujifar, Melis,
  Chaudhuri 2025 against the (ε, δ)-DP trade-off curve, both valid, run at α/5 and 4α/5 and the larger reported
  (the split is what makes the larger of the two valid; :meth:`~dplens.auditing.one_run.Combined.default`).

Estimates, each labelled as one in every attribute, JSON key and line of text: the Gaussian-DP μ (Nasr et al. 2023;
Dong, Roth, Su 2022 Corollary 2.13 — a valid lower bound on μ, an ε only if the mechanism is GDP-shaped), the f-DP
one-run ε of Mahloujifar, Melis, Chaudhuri 2025 (GDP family), the empirical ROC, its area and the true-positive rate
at low false-positive rates (Carlini et al. 2022 insist on the latter).

Memory: the scores are copied once into sorted per-class arrays (the split is a random mask over sorted positions,
so its parts stay sorted), and every count is a ``searchsorted``: no array grows with the number of thresholds
times the number of scores.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> scores = np.concatenate([rng.normal(1.0, 1.0, 50_000), rng.normal(0.0, 1.0, 50_000)])
>>> member = np.arange(100_000) < 50_000
>>> result = audit_scores(scores, member, claim=4.377, delta=1e-5)
>>> result.verdict.value, 1.0 < result.epsilon_lower_bound < 4.377
('CONSISTENT', True)
"""

from __future__ import annotations

import csv
import html
import math
import time
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from dplens._numbers import finite_or_none as _finite
from dplens.accountant import conversions
from dplens.auditing import bounds as bd
from dplens.auditing import one_run as orun
from dplens.auditing.bounds import check_confidence as _check_confidence
from dplens.auditing.games import (
    DirectedBound,
    Verdict,
    bound_region,
    claim_fields,
    infinite_if_none,
    result_kwargs,
    verdict_for,
)
from dplens.auditing.host import host_array
from dplens.auditing.runner import check_seed

__all__ = [
    "OneRunAuditResult",
    "ScoresAuditResult",
    "SplitSelection",
    "ThresholdGrid",
    "ThresholdSelection",
    "audit_scores",
    "load_scores_file",
]

RESULT_FORMAT_VERSION = 1
DEFAULT_FPR_TARGETS = (1e-3, 1e-2)
FORWARD, REVERSE = bd.FORWARD, bd.REVERSE

_ESTIMATES_NOTE = (
    "every *_estimate is an estimate, not a bound: the GDP numbers hold only if the mechanism's trade-off curve is "
    "GDP-shaped; the ROC, its area and the TPR at a given FPR are empirical rates on all the scores"
)
_GDP_ASSUMPTION = bd.GDP_ASSUMPTION
_EXTREME_CANDIDATES = 2048  # scores at each end of each class that the split's selection part may pick
_QUANTILE_CANDIDATES = 1025  # plus this many quantiles of each class (the body of the distribution)
_MASK_BLOCK = 1 << 16  # the split's random mask is drawn in blocks (no float array of the scores' size)
_AUC_BLOCK = 1 << 16
_SELECTION_STRICTNESS = 0.1  # the selection part scores candidates at α/10 (see _select)
_SELECTION_MIN_ERRORS = 5
_ROC_POINTS = 200
_HISTOGRAM_BINS = 50
_TRAJECTORY_POINTS = 8
_MIN_TRAJECTORY_CANARIES = 64


# --------------------------------------------------------------------------------------------
# Threshold selection (options as types)
# --------------------------------------------------------------------------------------------


class ThresholdSelection:
    """How the two-sample audit chooses its threshold without letting the choice inflate the bound."""


@dataclass(frozen=True, slots=True)
class SplitSelection(bd.SeededSplit, ThresholdSelection):
    """Choose the threshold and direction on a random ``fraction`` of each class, bound on the rest at α.

    The part each score goes to is an independent Bernoulli(``fraction``) draw from ``seed`` (never a function of
    the scores or their order), so the counted part is independent of the choice: one hypothesis, no correction.
    """


@dataclass(frozen=True, slots=True)
class ThresholdGrid(ThresholdSelection):
    """Thresholds fixed before the scores were seen, with a Bonferroni correction α/(2K) over the K of them.

    Both rates and both test directions of every threshold are bounded simultaneously, so the best of them is a
    valid bound; one threshold costs nothing (the score's documented worst case, say).
    """

    thresholds: tuple[float, ...]

    def __post_init__(self) -> None:
        try:
            values = tuple(float(t) for t in self.thresholds)
        except (TypeError, ValueError):
            raise ValueError(f"thresholds must be a sequence of finite numbers; got {self.thresholds!r}") from None
        if not values or not all(math.isfinite(t) for t in values):
            raise ValueError(f"thresholds must be a non-empty sequence of finite numbers; got {self.thresholds!r}")
        object.__setattr__(self, "thresholds", tuple(sorted(set(values))))


# --------------------------------------------------------------------------------------------
# Validation and files
# --------------------------------------------------------------------------------------------


def _check_scores(scores: Any, member: Any) -> tuple[np.ndarray, np.ndarray]:
    scores, member = host_array(scores, name="scores"), host_array(member, name="member")  # torch/JAX/CuPy too
    s = orun.score_array(scores, name="scores", shown=lambda: type(scores).__name__)
    bad = ~np.isfinite(s)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise ValueError(f"scores must be finite numbers; got {s[index]!r} at index {index}")
    lab = orun.bool_labels(member, name="member", length=s.size, meaning="1 = in")
    n_in = int(np.count_nonzero(lab))
    if n_in == 0 or n_in == lab.size:
        empty = "members" if n_in == 0 else "non-members"
        raise ValueError(f"member: both classes need scores; got no {empty} among {lab.size} scores")
    return s, lab


def _check_claim(claim: Any) -> float:
    if isinstance(claim, bool) or not isinstance(claim, int | float | np.integer | np.floating):
        raise ValueError(f"claim must be a finite epsilon >= 0; got {claim!r}")
    value = float(claim)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"claim must be a finite epsilon >= 0; got {claim!r}")
    return value


_TRUE = frozenset({"1", "true", "yes", "in", "t", "y"})
_FALSE = frozenset({"0", "false", "no", "out", "f", "n"})


def _read_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    from array import array

    scores, member = array("d"), bytearray()
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"scores file {str(path)!r} is empty")
        names = [h.strip().lower() for h in header]
        missing = [c for c in ("score", "member") if c not in names]
        if missing:
            raise ValueError(f"scores file {str(path)!r} has no column {missing[0]!r} (columns: {header})")
        i_score, i_member = names.index("score"), names.index("member")
        for line, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            try:
                value = float(row[i_score])
                flag = row[i_member].strip().lower()
            except (IndexError, ValueError):
                raise ValueError(f"scores file {str(path)!r} line {line}: cannot read score and member") from None
            if flag in _TRUE:
                member.append(1)
            elif flag in _FALSE:
                member.append(0)
            else:
                raise ValueError(f"scores file {str(path)!r} line {line}: member must be 0/1 or true/false")
            scores.append(value)
    return np.frombuffer(scores, dtype=float) if scores else np.empty(0), np.frombuffer(bytes(member), dtype=bool)


def load_scores_file(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(scores, member) from an ``.npz`` with arrays ``score`` and ``member`` or a CSV with those columns.

    A missing array or column, arrays of different lengths, NaN or infinite scores, an empty class or an
    unreadable file raise ``ValueError`` naming the file (the CLI prints it as one line, exit status 2).
    """
    from dplens._files import check_input_file

    path = check_input_file(path, what="scores file")
    try:
        if path.suffix.lower() == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                missing = [name for name in ("score", "member") if name not in archive.files]
                if missing:
                    raise ValueError(
                        f"scores file {str(path)!r} has no array {missing[0]!r} (arrays: {sorted(archive.files)})"
                    )
                scores, member = archive["score"], archive["member"]
        else:
            scores, member = _read_csv(path)
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError, EOFError, csv.Error) as err:
        raise ValueError(f"scores file {str(path)!r} is not a readable .npz or CSV file: {err}") from None
    except ValueError as err:
        if str(err).startswith("scores file"):
            raise
        raise ValueError(f"scores file {str(path)!r} is not a readable .npz or CSV file: {err}") from None
    try:
        return _check_scores(scores, member)
    except ValueError as err:
        raise ValueError(f"scores file {str(path)!r}: {err}") from None


# --------------------------------------------------------------------------------------------
# Counts on sorted arrays
# --------------------------------------------------------------------------------------------


def _errors(sorted_in: np.ndarray, sorted_out: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FN, FP) of "score ≥ t ⇒ in": FN = #in below t, FP = #out at or above t."""
    fn = np.searchsorted(sorted_in, thresholds, side="left")
    fp = sorted_out.size - np.searchsorted(sorted_out, thresholds, side="left")
    return fn.astype(np.int64), fp.astype(np.int64)


def _bounds_at(
    fn: np.ndarray, fp: np.ndarray, n_in: int, n_out: int, per_rate: float, delta: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    fnr_u = bd.clopper_pearson_upper(fn, n_in, per_rate)
    fpr_u = bd.clopper_pearson_upper(fp, n_out, per_rate)
    forward, reverse = bd.epsilon_lower_bounds(fpr_u, fnr_u, delta)
    return forward, reverse, fpr_u, fnr_u


def _mu_bounds(fpr_u: np.ndarray, fnr_u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    forward, reverse = bd.gdp_mu_lower_bounds(fpr_u, fnr_u)
    return np.nan_to_num(forward, nan=-np.inf), np.nan_to_num(reverse, nan=-np.inf)


def _pick(forward: np.ndarray, reverse: np.ndarray) -> tuple[int, str, float]:
    f, r = int(np.argmax(forward)), int(np.argmax(reverse))
    return (f, FORWARD, float(forward[f])) if forward[f] >= reverse[r] else (r, REVERSE, float(reverse[r]))


def _split_mask(n: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """An i.i.d. Bernoulli(fraction) mask, drawn in blocks (applied to sorted positions: see the module notes)."""
    mask = np.empty(n, dtype=bool)
    for start in range(0, n, _MASK_BLOCK):
        stop = min(n, start + _MASK_BLOCK)
        mask[start:stop] = rng.random(stop - start) < fraction
    return mask


def _sorted_classes(s: np.ndarray, lab: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted copies of the member and non-member scores (sorted in place: one copy of the scores in all)."""
    sorted_in, sorted_out = s[lab], s[~lab]
    sorted_in.sort()
    sorted_out.sort()
    return sorted_in, sorted_out


def _split_sorted(values: np.ndarray, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    mask = _split_mask(values.size, fraction, rng)
    return values[mask], values[~mask]


def _candidates(sel_in: np.ndarray, sel_out: np.ndarray) -> np.ndarray:
    """Thresholds the selection part may choose: the extremes of each class and quantiles of its body."""
    parts = []
    for values in (sel_in, sel_out):
        k = _EXTREME_CANDIDATES
        parts += [values[:k], values[-k:]]
        index = np.unique(np.linspace(0, values.size - 1, _QUANTILE_CANDIDATES).round().astype(np.int64))
        parts.append(values[index])
    return np.unique(np.concatenate(parts))


def _select(fn: np.ndarray, fp: np.ndarray, n_in: int, n_out: int, alpha: float, delta: float) -> tuple[int, str]:
    """The threshold and direction the selection part prefers (its choice only; the bound comes from the rest).

    Each candidate is scored by the bound it gives on the selection part at a ten times stricter level, among those
    with at least :data:`_SELECTION_MIN_ERRORS` errors on the side the bound divides by: both guard against the
    winner's curse of a far-tail threshold that looks good on few counts and regresses on the held-out part. Tuned on
    simulations independent of the tests (10 seeds each: 10⁶ Gaussian scores per side, mean 3.16 → 3.30 of the
    true 4.38; Laplace ε = 1 at 10⁵, 0.92 → 0.95); any rule here leaves the bound valid.
    """
    forward, reverse, _, _ = _bounds_at(fn, fp, n_in, n_out, _SELECTION_STRICTNESS * alpha / 2, delta)
    guarded_forward = np.where(fp >= _SELECTION_MIN_ERRORS, forward, -np.inf)
    guarded_reverse = np.where(fn >= _SELECTION_MIN_ERRORS, reverse, -np.inf)
    if np.isfinite(guarded_forward).any() or np.isfinite(guarded_reverse).any():
        forward, reverse = guarded_forward, guarded_reverse
    index, direction, _ = _pick(forward, reverse)
    return index, direction


def _ceiling(n_in: int, n_out: int, per_rate: float, delta: float) -> float:
    """The bound with no errors at all: no audit of this design can certify more (auditing-anchors §5.4)."""
    forward, reverse, _, _ = _bounds_at(np.array([0]), np.array([0]), n_in, n_out, per_rate, delta)
    return max(float(forward[0]), float(reverse[0]), 0.0)


def _operating_point(
    threshold: float, direction: str, fn: int, fp: int, n_in: int, n_out: int, fpr_u: float, fnr_u: float, part: str
) -> dict[str, Any]:
    return {
        "threshold": float(threshold),
        "direction": direction,
        "rule": "score >= threshold => member",
        "counted_part": part,
        "false_negatives": int(fn),
        "false_positives": int(fp),
        "members": int(n_in),
        "non_members": int(n_out),
        "fnr": fn / n_in,
        "fpr": fp / n_out,
        "fnr_upper": float(fnr_u),
        "fpr_upper": float(fpr_u),
    }


# --------------------------------------------------------------------------------------------
# Descriptive statistics (estimates) on sorted arrays
# --------------------------------------------------------------------------------------------


def _auc(sorted_in: np.ndarray, sorted_out: np.ndarray) -> float:
    """P[in > out] + ½P[tie] (Mann–Whitney), in blocks."""
    total = 0.0
    for start in range(0, sorted_in.size, _AUC_BLOCK):
        block = sorted_in[start : start + _AUC_BLOCK]
        below = np.searchsorted(sorted_out, block, side="left")
        at_or_below = np.searchsorted(sorted_out, block, side="right")
        total += float(np.sum(below, dtype=float) + 0.5 * np.sum(at_or_below - below, dtype=float))
    return total / (sorted_in.size * sorted_out.size)


def _tpr_at_fpr(sorted_in: np.ndarray, sorted_out: np.ndarray, targets: tuple[float, ...]) -> tuple[dict, ...]:
    """The largest empirical TPR of a rule "score > v" with empirical FPR ≤ target (deterministic rules)."""
    n_in, n_out = sorted_in.size, sorted_out.size
    out = []
    for target in targets:
        allowed = math.floor(target * n_out + 1e-9)  # false positives allowed
        if allowed >= n_out:
            out.append({"fpr": target, "tpr_estimate": 1.0, "threshold": float(sorted_out[0]), "rule": "score >= t"})
            continue
        value = float(sorted_out[n_out - allowed - 1])  # the (allowed + 1)-th largest non-member score
        tpr = (n_in - int(np.searchsorted(sorted_in, value, side="right"))) / n_in
        fpr = (n_out - int(np.searchsorted(sorted_out, value, side="right"))) / n_out
        out.append(
            {"fpr": target, "tpr_estimate": tpr, "fpr_realised": fpr, "threshold": value, "rule": "score > threshold"}
        )
    return tuple(out)


def _roc(sorted_in: np.ndarray, sorted_out: np.ndarray) -> tuple[dict[str, float], ...]:
    """The empirical ROC at ≤ ~2·200 thresholds: log-spaced in FPR (for log axes) and uniform in TPR."""
    n_in, n_out = sorted_in.size, sorted_out.size
    ranks_out = np.unique(np.geomspace(1, n_out, _ROC_POINTS).round().astype(np.int64))
    ranks_in = np.unique(np.linspace(1, n_in, _ROC_POINTS).round().astype(np.int64))
    thresholds = np.unique(np.concatenate([sorted_out[n_out - ranks_out], sorted_in[n_in - ranks_in]]))
    fn, fp = _errors(sorted_in, sorted_out, thresholds)
    points = {(0.0, 0.0), (1.0, 1.0)}
    points.update(zip((fp / n_out).tolist(), (1.0 - fn / n_in).tolist(), strict=True))
    return tuple({"fpr": f, "tpr": t} for f, t in sorted(points))


def _histogram(sorted_in: np.ndarray, sorted_out: np.ndarray) -> dict[str, Any]:
    """Counts of each class on common bins spanning the 0.1 %–99.9 % quantiles; the tails in under/over."""

    def quantile(values: np.ndarray, p: float) -> float:
        return float(values[min(values.size - 1, int(p * (values.size - 1)))])

    low = min(quantile(sorted_in, 0.001), quantile(sorted_out, 0.001))
    high = max(quantile(sorted_in, 0.999), quantile(sorted_out, 0.999))
    if not high > low:
        low, high = low - 0.5, high + 0.5
    edges = np.linspace(low, high, _HISTOGRAM_BINS + 1)

    def counts(values: np.ndarray) -> tuple[list[int], int, int]:
        position = np.searchsorted(values, edges, side="left")
        inside = np.diff(position)
        inside[-1] += int(np.searchsorted(values, high, side="right") - position[-1])  # the last bin is closed
        return inside.tolist(), int(position[0]), int(values.size - np.searchsorted(values, high, side="right"))

    c_in, under_in, over_in = counts(sorted_in)
    c_out, under_out, over_out = counts(sorted_out)
    return {
        "edges": edges.tolist(),
        "members": c_in,
        "non_members": c_out,
        "members_below": under_in,
        "members_above": over_in,
        "non_members_below": under_out,
        "non_members_above": over_out,
    }


def _descriptive(sorted_in: np.ndarray, sorted_out: np.ndarray, targets: tuple[float, ...]) -> dict[str, Any]:
    return {
        "auc_estimate": _auc(sorted_in, sorted_out),
        "tpr_at_fpr_estimates": _tpr_at_fpr(sorted_in, sorted_out, targets),
        "roc_estimate": _roc(sorted_in, sorted_out),
        "histogram": _histogram(sorted_in, sorted_out),
    }


def _check_targets(fpr_targets: Any) -> tuple[float, ...]:
    try:
        values = tuple(float(f) for f in fpr_targets)
    except (TypeError, ValueError):
        raise ValueError(f"fpr_targets must be a sequence of rates in (0, 1); got {fpr_targets!r}") from None
    if not all(0 < f < 1 for f in values):
        raise ValueError(f"fpr_targets must be rates in (0, 1); got {fpr_targets!r}")
    return values


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


def _result_kwargs(
    cls: type, data: Any, what: str, convert: dict[str, Any], optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A score result's fields from its dict (:func:`~dplens.auditing.games.result_kwargs`; format version and
    elapsed time optional)."""
    optional = ("format_version", "elapsed_seconds", *optional)
    return result_kwargs(cls, data, what, convert, optional=optional, version=RESULT_FORMAT_VERSION)


def _html_table(title: str, rows: list[tuple[str, str]]) -> str:
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>{html.escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<table><caption>{html.escape(title)}</caption>{body}</table>"


def _fmt(value: float | None) -> str:
    if value is None:
        return "undefined"
    return "inf" if math.isinf(value) else f"{value:.6g}"


def _claim_rows(result: Any) -> list[tuple[str, str]]:
    """The bound, the claim and the verdict: the first rows of both score results' HTML tables."""
    return [
        ("epsilon lower bound", f"{result.epsilon_lower_bound:.6g} (valid {result.confidence:.0%} lower bound)"),
        ("claimed epsilon", f"{result.epsilon_claimed:.6g} [{result.claim_source}]"),
        ("delta", f"{result.delta:g}"),
        ("verdict", result.verdict.value),
    ]


def _claim_repr(result: Any) -> str:
    """The bound, the claim and the verdict, as both score results' reprs begin."""
    return (
        f"epsilon_lower_bound={result.epsilon_lower_bound:.6g} [valid {result.confidence:.0%} lower bound], "
        f"epsilon_claimed={result.epsilon_claimed:.6g}, delta={result.delta:g}, verdict={result.verdict.value}"
    )


def _empirical_estimates(result: Any) -> dict[str, Any]:
    """The empirical estimates (AUC, TPR at FPR, ROC, histogram), JSON-ready, as both score results write them."""
    return {
        "auc_estimate": result.auc_estimate,
        "tpr_at_fpr_estimates": [dict(p) for p in result.tpr_at_fpr_estimates],
        "roc_estimate": [dict(p) for p in result.roc_estimate],
        "histogram": dict(result.histogram),
    }


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ScoresAuditResult(DirectedBound):
    """A two-sample audit from scores: a valid lower bound on ε, labelled estimates, the verdict against the claim.

    ``epsilon_lower_bound`` is a valid (``confidence``) lower bound on the ε at ``delta`` of the pair "canary in"
    against "canary out" (a bound, never an estimate); every field ending in ``_estimate`` is an estimate.

    Example (members N(1, 1), non-members N(0, 1): the claim is the true ε at δ = 1e-5):
        >>> import numpy as np
        >>> rng = np.random.default_rng(1)
        >>> scores = np.concatenate([rng.normal(1, 1, 5000), rng.normal(0, 1, 5000)])
        >>> result = audit_scores(scores, np.arange(10_000) < 5000, claim=4.377, delta=1e-5)
        >>> result  # doctest: +ELLIPSIS
        ScoresAuditResult(epsilon_lower_bound=1.98727 [valid 95% lower bound], ..., verdict=CONSISTENT, ...)
        >>> ScoresAuditResult.from_dict(result.to_dict()) == result
        True
    """

    members: int
    non_members: int
    method: str
    threshold_selection: dict[str, Any]
    operating_point: dict[str, Any]
    ceiling: float
    gdp_mu_estimate: float
    gdp_epsilon_estimate: float
    gdp_operating_point: dict[str, Any]
    auc_estimate: float
    tpr_at_fpr_estimates: tuple[dict[str, Any], ...]
    roc_estimate: tuple[dict[str, float], ...]
    histogram: dict[str, Any]
    verdict: Verdict
    verdict_reason: str
    elapsed_seconds: float = 0.0
    format_version: int = RESULT_FORMAT_VERSION

    route = "two_sample"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (an undefined ε estimate is None); stable keys, read by :mod:`dplens.reports.training_audit`."""
        return {
            "format_version": self.format_version,
            "route": self.route,
            **self.bound_fields(),
            "members": self.members,
            "non_members": self.non_members,
            "trials": min(self.members, self.non_members),
            "method": self.method,
            "threshold_selection": dict(self.threshold_selection),
            "operating_point": dict(self.operating_point),
            "ceiling": self.ceiling,
            "gdp_mu_estimate": self.gdp_mu_estimate,
            "gdp_epsilon_estimate": _finite(self.gdp_epsilon_estimate),
            "gdp_operating_point": dict(self.gdp_operating_point),
            "gdp_assumption": _GDP_ASSUMPTION,
            **_empirical_estimates(self),
            "estimates_note": _ESTIMATES_NOTE,
            "verdict": self.verdict.value,
            "verdict_reason": self.verdict_reason,
            "elapsed_seconds": self.elapsed_seconds,
            "claim_region": bound_region(self.epsilon_claimed, self.delta),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScoresAuditResult:
        """Inverse of :meth:`to_dict` (a missing field raises ``ValueError`` naming it)."""
        convert = {
            "verdict": Verdict,
            "gdp_epsilon_estimate": infinite_if_none,
            "tpr_at_fpr_estimates": tuple,
            "roc_estimate": tuple,
        }
        kwargs = _result_kwargs(cls, data, "scores audit result", convert)
        return cls(**kwargs, elapsed_seconds=data.get("elapsed_seconds", 0.0))

    def summary(self) -> str:
        """The human-readable summary (the ``dplens audit-scores`` text output)."""
        level = f"{self.confidence:.0%}"
        point = self.operating_point
        lines = [
            f"epsilon >= {self.epsilon_lower_bound:.6g}  (valid {level} lower bound, delta = {self.delta:g}, "
            f"{self.members} member and {self.non_members} non-member scores, direction {self.bound_direction})",
            f"  claimed epsilon: {self.epsilon_claimed:.6g}  [{self.claim_source}]",
            f"  measurability ceiling: {self.ceiling:.6g}  (no audit of this design can certify more)",
            f"  threshold: {self.method}",
            f"  operating point ({point['counted_part']}): score >= {point['threshold']:.6g}, FP "
            f"{point['false_positives']} / {point['non_members']}, FN {point['false_negatives']} / {point['members']}",
            f"  ESTIMATE (gdp): mu ~ {self.gdp_mu_estimate:.6g}, epsilon ~ {_fmt(self.gdp_epsilon_estimate)}  "
            f"[{_GDP_ASSUMPTION}]",
            f"  ESTIMATE (empirical): AUC ~ {self.auc_estimate:.4g}; "
            + ", ".join(f"TPR at FPR {p['fpr']:g} ~ {p['tpr_estimate']:.4g}" for p in self.tpr_at_fpr_estimates),
            f"verdict: {self.verdict.value}. {self.verdict_reason}",
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"ScoresAuditResult({_claim_repr(self)}, members={self.members}, non_members={self.non_members}, "
            f"gdp_mu_estimate={self.gdp_mu_estimate:.4g} [estimate])"
        )

    def _repr_html_(self) -> str:
        return _html_table(
            "dplens audit from scores (two samples)",
            [
                *_claim_rows(self),
                ("members / non-members", f"{self.members} / {self.non_members}"),
                ("measurability ceiling", f"{self.ceiling:.6g}"),
                ("GDP mu (ESTIMATE)", f"{self.gdp_mu_estimate:.6g}"),
                ("GDP epsilon (ESTIMATE)", _fmt(self.gdp_epsilon_estimate)),
                ("AUC (ESTIMATE)", f"{self.auc_estimate:.4g}"),
                *(
                    (f"TPR at FPR {p['fpr']:g} (ESTIMATE)", f"{p['tpr_estimate']:.4g}")
                    for p in self.tpr_at_fpr_estimates
                ),
            ],
        )


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class OneRunAuditResult:
    """A one-run audit (Steinke, Nasr, Jagielski 2023) with its verdict against the claim.

    ``epsilon_lower_bound`` is the valid (``confidence``) lower bound of :attr:`analysis` (a
    :class:`~dplens.auditing.one_run.OneRunResult`); ``fdp_epsilon_estimate`` (Mahloujifar, Melis, Chaudhuri 2025,
    GDP family) and every other ``*_estimate`` are estimates. ``trajectory`` holds the bound of nested random subsets
    of the canaries (each point a separate audit at the same confidence: a curve for the report, not a
    simultaneous claim). ``game`` describes the training and canaries when the scores came from a canary game.

    Example (1000 canaries, each in with probability ½; a member's score is shifted by 2):
        >>> import numpy as np
        >>> rng = np.random.default_rng(1)
        >>> member = rng.random(1000) < 0.5
        >>> result = audit_scores(rng.normal(2.0 * member, 1.0), member, claim=4.377, delta=1e-5, one_run=True)
        >>> type(result).__name__, result.verdict.value, round(result.epsilon_lower_bound, 3)
        ('OneRunAuditResult', 'CONSISTENT', 2.875)
        >>> OneRunAuditResult.from_dict(result.to_dict()) == result
        True
    """

    epsilon_lower_bound: float
    epsilon_claimed: float
    delta: float
    confidence: float
    claim_source: str
    canaries: int
    included: int
    analysis: orun.OneRunResult
    ceiling: float
    fdp_epsilon_estimate: float
    auc_estimate: float
    tpr_at_fpr_estimates: tuple[dict[str, Any], ...]
    roc_estimate: tuple[dict[str, float], ...]
    histogram: dict[str, Any]
    trajectory: tuple[dict[str, float], ...]
    verdict: Verdict
    verdict_reason: str
    game: dict[str, Any] = field(default_factory=dict)
    elapsed_seconds: float = 0.0
    format_version: int = RESULT_FORMAT_VERSION

    route = "one_run"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; stable keys, read by :mod:`dplens.reports.training_audit`."""
        return {
            "format_version": self.format_version,
            "route": self.route,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "is_estimate": False,
            **claim_fields(self),
            "canaries": self.canaries,
            "included": self.included,
            "trials": self.canaries,
            "analysis": self.analysis.to_dict(),
            "ceiling": self.ceiling,
            "fdp_epsilon_estimate": _finite(self.fdp_epsilon_estimate),
            "fdp_assumption": orun.GDP_FAMILY_ASSUMPTION,
            **_empirical_estimates(self),
            "trajectory": [dict(p) for p in self.trajectory],
            "estimates_note": _ESTIMATES_NOTE,
            "verdict": self.verdict.value,
            "verdict_reason": self.verdict_reason,
            "game": dict(self.game),
            "elapsed_seconds": self.elapsed_seconds,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OneRunAuditResult:
        """Inverse of :meth:`to_dict` (a missing field raises ``ValueError`` naming it)."""
        convert = {
            "analysis": orun.OneRunResult.from_dict,
            "verdict": Verdict,
            "fdp_epsilon_estimate": infinite_if_none,
            "tpr_at_fpr_estimates": tuple,
            "roc_estimate": tuple,
            "trajectory": tuple,
        }
        kwargs = _result_kwargs(cls, data, "one-run audit result", convert, optional=("game",))
        return cls(**kwargs, game=dict(data.get("game", {})), elapsed_seconds=data.get("elapsed_seconds", 0.0))

    def summary(self) -> str:
        """The human-readable summary (the text output of ``dplens audit-scores --one-run`` and canary games)."""
        level = f"{self.confidence:.0%}"
        a = self.analysis
        lines = [
            f"epsilon >= {self.epsilon_lower_bound:.6g}  (valid {level} one-run lower bound, delta = {self.delta:g}, "
            f"{self.canaries} canaries, {self.included} included)",
            f"  claimed epsilon: {self.epsilon_claimed:.6g}  [{self.claim_source}]",
            f"  measurability ceiling: {self.ceiling:.6g}  (all guesses right at the largest cut-off)",
            f"  guesses: {a.guesses} ({a.in_guesses} 'in', {a.out_guesses} 'out'), {a.correct} correct; "
            f"{a.hypotheses} cut-offs fixed before the data, Bonferroni ({a.reference})",
        ]
        if a.components:
            parts = "; ".join(
                f"{c['analysis']} {c['epsilon_lower_bound']:.6g} at {c['share']:g} of alpha" for c in a.components
            )
            lines.append(f"  analyses (significance split between them, the largest reported): {parts}")
        if self.game:
            lines.append(f"  game: {self.game.get('description', '')}")
        lines += [
            f"  ESTIMATE (f-DP one run, GDP family): epsilon ~ {_fmt(self.fdp_epsilon_estimate)}  "
            f"[{orun.GDP_FAMILY_ASSUMPTION}]",
            f"  ESTIMATE (empirical): AUC ~ {self.auc_estimate:.4g}",
            f"verdict: {self.verdict.value}. {self.verdict_reason}",
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"OneRunAuditResult({_claim_repr(self)}, canaries={self.canaries}, guesses={self.analysis.guesses}, "
            f"correct={self.analysis.correct}, fdp_epsilon_estimate={_fmt(self.fdp_epsilon_estimate)} [estimate])"
        )

    def _repr_html_(self) -> str:
        a = self.analysis
        return _html_table(
            "dplens one-run audit",
            [
                *_claim_rows(self),
                ("canaries (included)", f"{self.canaries} ({self.included})"),
                ("guesses / correct", f"{a.guesses} / {a.correct}"),
                ("measurability ceiling", f"{self.ceiling:.6g}"),
                ("f-DP epsilon (ESTIMATE)", _fmt(self.fdp_epsilon_estimate)),
                ("AUC (ESTIMATE)", f"{self.auc_estimate:.4g}"),
            ],
        )


# --------------------------------------------------------------------------------------------
# The audits
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Chosen:
    """A two-sample audit's test: its ε bound and direction, the μ bound, their operating points, the ceiling, and
    how the threshold was chosen."""

    value: float
    direction: str
    mu: float
    point: dict[str, Any]
    mu_point: dict[str, Any]
    ceiling: float
    method: str
    selection: dict[str, Any]


def _split_bound(classes: list[np.ndarray], fraction: float, seed: int, alpha: float, delta: float) -> _Chosen:
    """One threshold and direction chosen on a random part of each class, bounded on the rest (``classes``: the
    sorted members and non-members, taken out of the list so that each full copy is dropped once split)."""
    rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(3,)))
    # Boolean indexing keeps the order, so all four parts are sorted; each full copy is dropped once split.
    sel_in, bnd_in = _split_sorted(classes.pop(0), fraction, rng)
    sel_out, bnd_out = _split_sorted(classes.pop(0), fraction, rng)
    if min(sel_in.size, bnd_in.size, sel_out.size, bnd_out.size) == 0:
        raise ValueError(
            "scores: the split left a part without members or non-members; give more scores of each class "
            f"(got {sel_in.size + bnd_in.size} members, {sel_out.size + bnd_out.size} non-members) or use "
            "ThresholdGrid"
        )
    thresholds = _candidates(sel_in, sel_out)
    fn, fp = _errors(sel_in, sel_out, thresholds)
    index, direction = _select(fn, fp, sel_in.size, sel_out.size, alpha, delta)
    _, _, fpr_u, fnr_u = _bounds_at(fn, fp, sel_in.size, sel_out.size, alpha / 2, delta)
    mu_forward, mu_reverse = _mu_bounds(fpr_u, fnr_u)
    mu_index, mu_direction, _ = _pick(mu_forward, mu_reverse)
    # The counted part: one threshold and direction for ε, one for μ, each at α (no selection on it).
    chosen = np.array([thresholds[index], thresholds[mu_index]])
    fn, fp = _errors(bnd_in, bnd_out, chosen)
    forward, reverse, fpr_u, fnr_u = _bounds_at(fn, fp, bnd_in.size, bnd_out.size, alpha / 2, delta)
    mu_forward, mu_reverse = _mu_bounds(fpr_u, fnr_u)
    n_in, n_out, part = bnd_in.size, bnd_out.size, f"held-out {1 - fraction:.0%} of each class"
    return _Chosen(
        value=forward[0] if direction == FORWARD else reverse[0],
        direction=direction,
        mu=mu_forward[1] if mu_direction == FORWARD else mu_reverse[1],
        point=_operating_point(chosen[0], direction, fn[0], fp[0], n_in, n_out, fpr_u[0], fnr_u[0], part),
        mu_point=_operating_point(chosen[1], mu_direction, fn[1], fp[1], n_in, n_out, fpr_u[1], fnr_u[1], part),
        ceiling=_ceiling(n_in, n_out, alpha / 2, delta),
        method=(
            f"Clopper-Pearson at one threshold and direction chosen on a random {fraction:.0%} of each class "
            f"(seed {seed}), bounded on the other {1 - fraction:.0%}; union bound over FPR and FNR"
        ),
        selection={"name": "split", "fraction": fraction, "seed": int(seed), "hypotheses": 1},
    )


def _grid_bound(sorted_in: np.ndarray, sorted_out: np.ndarray, grid: Any, alpha: float, delta: float) -> _Chosen:
    """Bonferroni over thresholds fixed before the data, both rates and both directions, on every score."""
    chosen = np.asarray(grid, dtype=float)
    per_rate = alpha / (2 * chosen.size)
    fn, fp = _errors(sorted_in, sorted_out, chosen)
    n_in, n_out = sorted_in.size, sorted_out.size
    forward, reverse, fpr_u, fnr_u = _bounds_at(fn, fp, n_in, n_out, per_rate, delta)
    index, direction, value = _pick(forward, reverse)
    mu_forward, mu_reverse = _mu_bounds(fpr_u, fnr_u)
    mu_index, mu_direction, mu = _pick(mu_forward, mu_reverse)
    part = "all scores"
    point, mu_point = (
        _operating_point(chosen[i], way, fn[i], fp[i], n_in, n_out, fpr_u[i], fnr_u[i], part)
        for i, way in ((index, direction), (mu_index, mu_direction))
    )
    return _Chosen(
        value=value,
        direction=direction,
        mu=mu,
        point=point,
        mu_point=mu_point,
        ceiling=_ceiling(n_in, n_out, per_rate, delta),
        method=(
            f"Clopper-Pearson, Bonferroni over {chosen.size} threshold(s) fixed before the data, both rates and "
            "both test directions"
        ),
        selection={"name": "grid", "thresholds": list(grid), "hypotheses": int(chosen.size)},
    )


def _two_sample(
    s: np.ndarray,
    lab: np.ndarray,
    *,
    claim: float,
    delta: float,
    confidence: float,
    selection: ThresholdSelection,
    targets: tuple[float, ...],
    claim_source: str,
    start: float,
) -> ScoresAuditResult:
    alpha = 1.0 - confidence
    classes = list(_sorted_classes(s, lab))
    described = _descriptive(classes[0], classes[1], targets)
    match selection:
        case SplitSelection(fraction=fraction, seed=seed):
            chosen = _split_bound(classes, fraction, seed, alpha, delta)
        case ThresholdGrid(thresholds=grid):
            chosen = _grid_bound(classes[0], classes[1], grid, alpha, delta)
        case _:
            raise ValueError(f"selection must be SplitSelection() or ThresholdGrid(...); got {selection!r}")
    value, direction, mu, ceiling = chosen.value, chosen.direction, chosen.mu, chosen.ceiling
    point, mu_point, method, selection_dict = chosen.point, chosen.mu_point, chosen.method, chosen.selection
    bound = max(float(value), 0.0)
    mu = max(float(mu), 0.0) if math.isfinite(mu) else 0.0
    if mu > 0 and delta > 0:
        gdp_epsilon = conversions.gdp_epsilon(mu, delta)
    else:
        gdp_epsilon = math.inf if mu > 0 else 0.0  # μ-GDP with μ > 0 is (ε, 0)-DP for no finite ε
    verdict, reason = verdict_for(bound, ceiling, claim, confidence)
    return ScoresAuditResult(
        epsilon_lower_bound=bound,
        bound_direction=direction,
        epsilon_claimed=claim,
        delta=delta,
        confidence=confidence,
        claim_source=claim_source,
        members=int(lab.sum()),
        non_members=int(lab.size - lab.sum()),
        method=method,
        threshold_selection=selection_dict,
        operating_point=point,
        ceiling=ceiling,
        gdp_mu_estimate=mu,
        gdp_epsilon_estimate=gdp_epsilon,
        gdp_operating_point=mu_point,
        verdict=verdict,
        verdict_reason=reason,
        elapsed_seconds=round(time.perf_counter() - start, 3),
        **described,
    )


def _one_run_ceiling(
    m: int,
    rule: orun.GuessRule,
    correction: orun.SearchCorrection,
    alpha: float,
    delta: float,
    analysis: orun.OneRunAnalysis,
) -> float:
    """The bound if every guess at the largest cut-off were right (no one-run audit of this design can do better)."""
    match correction:
        case orun.BonferroniCutoffs(cutoffs=cutoffs, size=size):
            cutoffs = orun.default_cutoffs(m, rule=rule, size=size) if cutoffs is None else cutoffs
            k, hypotheses = max(cutoffs), len(cutoffs)
        case _:
            k, hypotheses = orun._max_cutoff(m, rule), 1  # the heuristic: its own count is data-dependent
    r = 2 * k if isinstance(rule, orun.Symmetric) else k
    if isinstance(analysis, orun.Combined):
        parts = zip(analysis.analyses, analysis.shares, strict=True)
    else:
        parts = [(analysis, 1.0)]
    best = 0.0
    for part, share in parts:
        bound = (
            orun.fdp_one_run_epsilon_lower_bound
            if isinstance(part, orun.EpsilonDeltaFDP)
            else orun.one_run_epsilon_lower_bound
        )
        best = max(best, bound(canaries=m, guesses=r, correct=r, significance=alpha * share / hypotheses, delta=delta))
    return best


def _canary_trajectory(
    s: np.ndarray,
    lab: np.ndarray,
    full_bound: float,
    alpha: float,
    delta: float,
    rule: orun.GuessRule,
    correction: orun.SearchCorrection,
    analysis_option: orun.OneRunAnalysis,
    seed: int,
) -> list[dict[str, float]]:
    """ε against the canary count: nested random subsets (never chosen by score or label), each a separate audit;
    the full set's point is ``full_bound``."""
    m = s.size
    order = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(4,))).permutation(m)
    trajectory = []
    sizes = np.unique(np.geomspace(min(_MIN_TRAJECTORY_CANARIES, m), m, _TRAJECTORY_POINTS).round().astype(int))
    for size in sizes:
        subset = order[:size]
        sub_lab = lab[subset]
        if size == m:
            value = full_bound
        elif sub_lab.all() or not sub_lab.any() or (isinstance(rule, orun.Symmetric) and size < 2):
            continue
        else:
            sub_correction = correction
            if isinstance(correction, orun.BonferroniCutoffs) and correction.cutoffs is not None:
                sub_correction = orun.BonferroniCutoffs(size=len(correction.cutoffs))
            value = orun.one_run_audit(
                s[subset],
                sub_lab,
                significance=alpha,
                delta=delta,
                rule=rule,
                correction=sub_correction,
                analysis=analysis_option,
            ).epsilon_lower_bound
        trajectory.append({"canaries": int(size), "epsilon_lower_bound": float(value)})
    return trajectory


def _one_run(
    s: np.ndarray,
    lab: np.ndarray,
    *,
    claim: float,
    delta: float,
    confidence: float,
    rule: orun.GuessRule | None,
    correction: orun.SearchCorrection | None,
    analysis_option: orun.OneRunAnalysis | None,
    targets: tuple[float, ...],
    claim_source: str,
    seed: int,
    start: float,
    game: dict[str, Any] | None = None,
) -> OneRunAuditResult:
    alpha = 1.0 - confidence
    rule = orun.Symmetric() if rule is None else rule
    correction = orun.BonferroniCutoffs() if correction is None else correction
    analysis_option = orun.Combined.default() if analysis_option is None else analysis_option
    if isinstance(analysis_option, orun.GaussianFDP):
        raise ValueError(
            "analysis: GaussianFDP() is an estimate (fdp_epsilon_estimate reports it); the bound needs "
            "ApproximateDP(), EpsilonDeltaFDP() or Combined(...)"
        )
    m = s.size
    analysis = orun.one_run_audit(
        s, lab, significance=alpha, delta=delta, rule=rule, correction=correction, analysis=analysis_option
    )
    fdp = math.inf
    if delta > 0 and not isinstance(correction, orun.ParetoFrontierHeuristic):
        fdp = orun.one_run_audit(
            s, lab, significance=alpha, delta=delta, rule=rule, correction=correction, analysis=orun.GaussianFDP()
        ).epsilon_lower_bound
    trajectory = _canary_trajectory(
        s, lab, analysis.epsilon_lower_bound, alpha, delta, rule, correction, analysis_option, seed
    )
    sorted_in, sorted_out = _sorted_classes(s, lab)
    described = _descriptive(sorted_in, sorted_out, targets)
    ceiling = _one_run_ceiling(m, rule, correction, alpha, delta, analysis_option)
    bound = analysis.epsilon_lower_bound
    verdict, reason = verdict_for(bound, ceiling, claim, confidence)
    if analysis.heuristic:
        verdict, reason = Verdict.INCONCLUSIVE, f"{orun.PARETO_HEURISTIC_NOTE}: no verdict is drawn from it."
    return OneRunAuditResult(
        epsilon_lower_bound=bound,
        epsilon_claimed=claim,
        delta=delta,
        confidence=confidence,
        claim_source=claim_source,
        canaries=m,
        included=int(lab.sum()),
        analysis=analysis,
        ceiling=ceiling,
        fdp_epsilon_estimate=fdp,
        trajectory=tuple(trajectory),
        verdict=verdict,
        verdict_reason=reason,
        game=dict(game or {}),
        elapsed_seconds=round(time.perf_counter() - start, 3),
        **described,
    )


def audit_scores(
    scores: Any,
    member: Any,
    *,
    claim: float,
    delta: float,
    confidence: float = 0.95,
    one_run: bool = False,
    selection: ThresholdSelection | None = None,
    rule: orun.GuessRule | None = None,
    correction: orun.SearchCorrection | None = None,
    analysis: orun.OneRunAnalysis | None = None,
    fpr_targets: tuple[float, ...] = DEFAULT_FPR_TARGETS,
    seed: int = 0,
    claim_source: str = "given",
) -> ScoresAuditResult | OneRunAuditResult:
    """A valid lower bound on ε from membership scores, and a verdict against the claimed ε.

    Two samples (default): ``scores[member]`` are scores of the canary in (trainings that saw it), the rest of the
    canary out; the threshold is chosen by ``selection`` (default :class:`SplitSelection`; or an a-priori
    :class:`ThresholdGrid` with Bonferroni), the rates are bounded by one-sided Clopper–Pearson at α/2 each
    (Jagielski, Ullman, Oprea 2020; Kairouz, Oh, Viswanath 2015 Theorem 2.1).

    One run (``one_run=True``): each score belongs to one canary, ``member`` says whether it was included — each
    independently with probability ½ *before* the single run (Steinke, Nasr, Jagielski 2023; a balanced design
    with exactly half included is not covered); guesses follow ``rule`` (default
    :class:`~dplens.auditing.one_run.Symmetric`) at the cut-offs of ``correction`` (default 32 a-priori cut-offs,
    Bonferroni), analysed by ``analysis`` (default :meth:`~dplens.auditing.one_run.Combined.default`: Steinke et al.
    at α/5 and the f-DP analysis of Mahloujifar et al. against the (ε, δ)-DP curve at 4α/5, the larger bound
    reported — valid because α is split between them).

    The verdict: VIOLATION if the bound exceeds ``claim``; INCONCLUSIVE if no audit of this size could have shown
    one (the measurability ceiling does not exceed the claim); CONSISTENT otherwise.

    Args:
        scores: one score per trial (two samples) or per canary (one run); higher ⇒ "in" (negate a loss).
        member: booleans or 0/1, True = the canary was in.
        claim: the claimed ε.
        delta: δ of the (ε, δ) statement under test (0 for pure DP).
        confidence: 1 − α.
        one_run: the one-run design instead of two samples.
        selection: two samples: :class:`SplitSelection` (default) or :class:`ThresholdGrid`.
        rule, correction, analysis: one run: the guessing rule, the search correction and the analysis (bounds only;
            :mod:`dplens.auditing.one_run`).
        fpr_targets: FPRs at which the empirical TPR is reported (an estimate).
        seed: one run: the seed of the random nested subsets of the ε-against-canaries curve.
        claim_source: where the claim comes from (recorded).

    Returns:
        A :class:`ScoresAuditResult` (two samples) or a :class:`OneRunAuditResult` (one run).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)  # members N(1, 1), non-members N(0, 1): a 1-GDP mechanism
        >>> scores = np.concatenate([rng.normal(1, 1, 20_000), rng.normal(0, 1, 20_000)])
        >>> member = np.arange(40_000) < 20_000
        >>> result = audit_scores(scores, member, claim=0.5, delta=1e-5)
        >>> result.verdict.value, 0.5 < result.epsilon_lower_bound < 4.377  # the true ε at δ = 1e-5 is 4.377
        ('VIOLATION', True)
    """
    start = time.perf_counter()
    s, lab = _check_scores(scores, member)
    claimed = _check_claim(claim)
    if isinstance(delta, bool):
        raise ValueError(f"delta must be in [0, 1); got {delta!r}")
    delta = conversions.check_delta(delta, allow_zero=True)
    confidence = _check_confidence(confidence)
    targets = _check_targets(fpr_targets)
    if not isinstance(one_run, bool):
        raise ValueError(f"one_run must be True or False; got {one_run!r}")
    if one_run:
        if selection is not None:
            raise ValueError("selection applies to the two-sample audit; the one-run audit takes rule and correction")
        check_seed(seed)
        return _one_run(
            s,
            lab,
            claim=claimed,
            delta=delta,
            confidence=confidence,
            rule=rule,
            correction=correction,
            analysis_option=analysis,
            targets=targets,
            claim_source=claim_source,
            seed=int(seed),
            start=start,
        )
    if rule is not None or correction is not None or analysis is not None:
        raise ValueError(
            "rule, correction and analysis apply to the one-run audit (one_run=True); two samples take selection"
        )
    selection = SplitSelection() if selection is None else selection
    if isinstance(selection, bd.FixedThreshold):
        selection = ThresholdGrid((selection.threshold,))
    return _two_sample(
        s,
        lab,
        claim=claimed,
        delta=delta,
        confidence=confidence,
        selection=selection,
        targets=targets,
        claim_source=claim_source,
        start=start,
    )


def with_game(result: OneRunAuditResult, game: dict[str, Any], *, elapsed_seconds: float) -> OneRunAuditResult:
    """``result`` with the description of the canary game that produced its scores (used by the canary games)."""
    return replace(result, game=dict(game), elapsed_seconds=round(elapsed_seconds, 3))
