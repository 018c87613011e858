"""CorrDP (seed 000): correlation distances, correlated sensitivity and the eq. (3) noise weights.

Wang, Zhang, Cummings, "Integrating Feature Correlation in Differential Privacy with Applications in DP-ERM"
(extended abstract, seed ``000_3f0893f2d921ee12.txt``); implementation notes and errata in
``research/corrdp-and-dp-ftrl.md`` Part A (cited below as "note §A…").

Definitions implemented here:

- Definition 2.2 (CorrDP), **corrected** (erratum, note §A1): the printed exponent ``e^{\\overline{d(D,D′)}}``
  lost its ε; we read it as ``P[A(D) ∈ R] ≤ exp(ε / d(D, D′)) P[A(D′) ∈ R] + δ`` with ε/0 := +∞ (no constraint).
  The map d ↦ ε/d is :func:`pair_epsilon`.
- Definition 2.4: the data set distance d(D, D′) = max over conditioning subsets I of
  TV(P_{X^S | X^I = e^I}, P_{X^S | X^I = e′^I}) (:func:`dataset_distance`). The printed index set is [m+1]; index
  m+1 is the label, fixed under Assumption 3.1, so only feature subsets I ⊆ [m] are enumerated (note §A1 [U]).
- Definition 2.7: TV(j) (:func:`feature_tv`) and the correlated sensitivity Δ_C f (:func:`correlated_sensitivity`).
- Theorem 2.9: the CorrDP Laplace scale Δ_C f/ε and its accuracy bound (:func:`laplace_accuracy_bound`).
- Eq. (3): the per-coordinate noise weights of CorrDP-SGD (:func:`noise_weights`) and variances
  (:func:`noise_variances`). **Eq. (3) is an asymptotic calibration with universal constants dropped** (c₁, c₂ of
  the moments accountant, C₁, C₂ of Assumption 3.4; note §A3, §A7.4): it is a *paper formula*, not an audited
  privacy bound, and nothing in this module converts it into a reported ε.
- Definition 3.10: the upper-confidence inflation of a plug-in TV estimate (:func:`paper_tv_inflation`), and a
  concrete estimator from discrete samples with an explicit concentration inequality
  (:func:`estimate_feature_tvs`).

Caveat (note §0.4, §A3, test C6): TV(j) conditions on feature j alone while d(D, D′) maximises over conditioning
sets, so TV(j) can understate d (noisy XOR: TV(j) = 0 but d = 0.8). :func:`feature_tvs` warns with
:class:`CorrelationWarning` when that happens and :class:`TvConvention.CONSERVATIVE` offers the max over I ∋ j.
"""

from __future__ import annotations

import enum
import itertools
import math
import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dplens.accountant import conversions
from dplens.accountant import events as ev

__all__ = [
    "SPEC_TYPES",
    "CorrDpLaplace",
    "CorrelationWarning",
    "DistanceResult",
    "JointDistribution",
    "NeighbourConvention",
    "TvConvention",
    "TvEstimate",
    "base_noise_variance",
    "conditional_tv",
    "conservative_feature_tv",
    "corrdp_laplace_rdp_curve",
    "correlated_sensitivity",
    "dataset_distance",
    "estimate_feature_tvs",
    "feature_tv",
    "feature_tvs",
    "laplace_accuracy_bound",
    "laplace_accuracy_coverage",
    "laplace_scale",
    "lower_bound_term",
    "noise_variances",
    "noise_weights",
    "noise_weights_from_distribution",
    "pair_epsilon",
    "paper_tv_inflation",
    "tv_distance",
    "utility_proxy",
]

_MAX_SUBSET_FEATURES = 16
_TV_TOL = 1e-9


class CorrelationWarning(UserWarning):
    """Per-feature TV(j) (Def. 2.7) understates the joint distance d(D, D′) of Def. 2.4 (note §A6 test C6)."""


class TvConvention(enum.Enum):
    """Which per-feature correlation to use for insensitive feature j.

    PAPER: TV(j) of Definition 2.7 (conditioning on feature j alone), as in eq. (3) and Δ_C f.
    CONSERVATIVE: TV*(j) = max of d(e, e′) over record pairs differing only in feature j, i.e. the max over all
    conditioning sets I ∋ j of Def. 2.4 (note §A6 C6, §A7.2 [D]); always ≥ TV(j).
    """

    PAPER = "paper"
    CONSERVATIVE = "conservative"


class NeighbourConvention(enum.Enum):
    """Which ℓ1-sensitivity Δf caps Δ_C f in Definition 2.7 for a coordinate-separable f (note §A1, test C2).

    STANDARD: standard neighbours (all features may change): Δf = Σ_k Δf_k.
    CORRDP: CorrDP neighbours (Def. 2.1: only sensitive features, or one insensitive feature):
    Δf = max{Σ_{j∈S} Δf_j, max_{j∈U} Δf_j}.
    """

    STANDARD = "standard"
    CORRDP = "corrdp"


# --------------------------------------------------------------------------------------------
# Validation helpers


def _check_positive(name: str, value: Any, *, allow_zero: bool = False, allow_inf: bool = False) -> float:
    try:
        ok = not isinstance(value, bool) and isinstance(float(value), float)
        x = float(value)
    except (TypeError, ValueError):
        ok, x = False, math.nan
    if ok and not math.isnan(x):
        ok = (x >= 0 if allow_zero else x > 0) and (allow_inf or math.isfinite(x))
    else:
        ok = False
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}; got {value!r}")
    return x


def _check_unit(name: str, value: Any, *, open_low: bool = True) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1]; got {value!r}") from None
    low_ok = x > 0 if open_low else x >= 0
    if isinstance(value, bool) or not (low_ok and x <= 1):
        interval = "(0, 1]" if open_low else "[0, 1]"
        raise ValueError(f"{name} must be in {interval}; got {value!r}")
    return x


def _check_int(name: str, value: Any, *, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
    return int(value)


# --------------------------------------------------------------------------------------------
# Discrete joint distributions and TV distances


def tv_distance(p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray) -> float:
    """Total variation distance ½ Σ|p − q| between two pmfs on the same finite set (Def. 2.4).

    Args:
        p: probability vector (non-negative, sums to 1).
        q: probability vector of the same shape.

    Returns:
        TV(p, q) ∈ [0, 1].

    Raises:
        ValueError: if the inputs are not pmfs of the same shape.
    """
    pa = _check_pmf("p", p)
    qa = _check_pmf("q", q)
    if pa.shape != qa.shape:
        raise ValueError(f"q must have the shape of p {pa.shape!r}; got {qa.shape!r}")
    return float(min(1.0, 0.5 * np.abs(pa - qa).sum()))


def _check_pmf(name: str, p: Any) -> np.ndarray:
    try:
        arr = np.asarray(p, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of probabilities; got {p!r}") from None
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 0) or abs(arr.sum() - 1.0) > 1e-9:
        raise ValueError(f"{name} must be non-negative and sum to 1; got {p!r}")
    return arr


@dataclass(frozen=True, slots=True, eq=False)
class JointDistribution:
    """A discrete joint distribution of m features, as a probability table.

    ``table[v_1, …, v_m]`` = P(X^(1) = v_1, …, X^(m) = v_m); feature j takes the integer codes
    0 … table.shape[j] − 1. Features are addressed by index or by name.

    Args:
        table: non-negative array with one axis per feature, summing to 1 (within 1e-9; renormalised).
        names: one distinct name per feature (default ``x0, x1, …``).

    Raises:
        ValueError: on a negative / non-finite entry, a total other than 1, or bad names.
    """

    table: np.ndarray
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        try:
            arr = np.array(self.table, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"table must be a numeric array; got {self.table!r}") from None
        if arr.ndim < 1 or arr.size == 0:
            raise ValueError(f"table must have at least one feature axis; got shape {arr.shape!r}")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ValueError(f"table must be non-negative and finite; got {self.table!r}")
        total = float(arr.sum())
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"table must sum to 1; got sum {total!r}")
        arr = arr / total
        arr.setflags(write=False)
        names = tuple(self.names) if self.names else tuple(f"x{j}" for j in range(arr.ndim))
        if len(names) != arr.ndim or len(set(names)) != len(names) or not all(isinstance(s, str) for s in names):
            raise ValueError(f"names must be {arr.ndim} distinct strings; got {self.names!r}")
        object.__setattr__(self, "table", arr)
        object.__setattr__(self, "names", names)

    @property
    def num_features(self) -> int:
        """m, the number of features."""
        return self.table.ndim

    @classmethod
    def from_data(
        cls,
        samples: Any,
        *,
        names: Sequence[str] = (),
        num_values: Sequence[int] | None = None,
    ) -> JointDistribution:
        """Empirical joint distribution (an **estimate**) of integer-coded samples.

        Args:
            samples: array (n, m) of non-negative integer codes.
            names: feature names.
            num_values: number of values of each feature (default: max code + 1 per column).

        Returns:
            The empirical distribution (counts / n).

        Raises:
            ValueError: on non-integer / negative codes, an empty sample, or codes ≥ num_values.
        """
        arr = np.asarray(samples)
        if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
            raise ValueError(f"samples must be a non-empty 2-D array (n, m); got shape {arr.shape!r}")
        if not np.issubdtype(arr.dtype, np.integer):
            if not np.issubdtype(arr.dtype, np.floating) or not np.all(arr == np.round(arr)):
                raise ValueError(f"samples must hold integer codes; got dtype {arr.dtype!r}")
            arr = arr.astype(np.int64)
        if np.any(arr < 0):
            raise ValueError(f"samples must hold non-negative codes; got min {int(arr.min())!r}")
        if num_values is None:
            shape = tuple(int(c) + 1 for c in arr.max(axis=0))
        else:
            shape = tuple(_check_int("num_values", k) for k in num_values)
            if len(shape) != arr.shape[1] or np.any(arr.max(axis=0) >= np.asarray(shape)):
                raise ValueError(f"num_values must cover every column's codes; got {num_values!r}")
        if math.prod(shape) > 10**7:
            raise ValueError(f"num_values give a table of more than 1e7 cells; got shape {shape!r}")
        flat = np.ravel_multi_index(tuple(arr.T), shape)
        counts = np.bincount(flat, minlength=math.prod(shape)).reshape(shape)
        return cls(counts / arr.shape[0], names=tuple(names))

    def index(self, feature: int | str) -> int:
        """The axis of ``feature`` (an index or a name)."""
        if isinstance(feature, str):
            if feature not in self.names:
                raise ValueError(f"feature must be one of {self.names!r}; got {feature!r}")
            return self.names.index(feature)
        if (
            isinstance(feature, bool)
            or not isinstance(feature, int | np.integer)
            or not 0 <= feature < self.num_features
        ):
            raise ValueError(f"feature must be an index in [0, {self.num_features}) or a name; got {feature!r}")
        return int(feature)

    def indices(self, features: Collection[int | str], *, name: str = "sensitive") -> tuple[int, ...]:
        """Sorted distinct axes of ``features``."""
        if isinstance(features, str | int):
            features = [features]
        out = tuple(sorted({self.index(f) for f in features}))
        if not out:
            raise ValueError(f"{name} must name at least one feature; got {features!r}")
        return out

    def marginal(self, features: Collection[int | str]) -> np.ndarray:
        """Marginal table over ``features`` (axes in increasing index order)."""
        keep = self.indices(features, name="features")
        drop = tuple(a for a in range(self.num_features) if a not in keep)
        return self.table.sum(axis=drop) if drop else self.table

    def conditional(self, sensitive: Collection[int | str], given: Mapping[int | str, int]) -> np.ndarray:
        """Flattened pmf of the joint sensitive block X^S given X^I = values (Def. 2.4 P_{X^S | e^I}).

        Args:
            sensitive: the sensitive features S.
            given: {feature: code} to condition on (may include sensitive features: a point mass results).

        Returns:
            The conditional pmf of X^S over the product of its value sets (C-order).

        Raises:
            ValueError: if the conditioning event has probability 0 or a code is out of range.
        """
        s_idx = self.indices(sensitive)
        slicer: list[Any] = [slice(None)] * self.num_features
        for feat, code in given.items():
            a = self.index(feat)
            if isinstance(code, bool) or not isinstance(code, int | np.integer) or not 0 <= code < self.table.shape[a]:
                raise ValueError(
                    f"value of feature {self.names[a]!r} must be a code in [0, {self.table.shape[a]}); got {code!r}"
                )
            # keep the axis (length 1) so axis numbering is unchanged
            slicer[a] = slice(int(code), int(code) + 1)
        sub = self.table[tuple(slicer)]
        # re-embed conditioned sensitive axes at full length (a point mass on the given code), so conditionals
        # on different sensitive codes live on the same support and can be compared
        pad = [(0, 0)] * self.num_features
        for a in s_idx:
            if isinstance(slicer[a], slice) and slicer[a] != slice(None):
                pad[a] = (slicer[a].start, self.table.shape[a] - slicer[a].stop)
        sub = np.pad(sub, pad)
        drop = tuple(a for a in range(self.num_features) if a not in s_idx)
        joint = (sub.sum(axis=drop) if drop else sub).ravel()
        mass = float(joint.sum())
        if mass <= 0:
            raise ValueError(f"given must have positive probability; got {dict(given)!r}")
        return joint / mass


def conditional_tv(
    dist: JointDistribution,
    sensitive: Collection[int | str],
    given: Mapping[int | str, int],
    other: Mapping[int | str, int],
) -> float:
    """TV(P_{X^S | X^I = given}, P_{X^S | X^I = other}) between two conditional laws of the sensitive block (Def. 2.4).

    Args:
        dist: the joint distribution.
        sensitive: the sensitive features S.
        given: {feature: code} of the first conditioning event (positive probability).
        other: {feature: code} of the second conditioning event (positive probability).

    Returns:
        The TV distance ∈ [0, 1].
    """
    p = dist.conditional(sensitive, given)
    q = dist.conditional(sensitive, other)
    return float(min(1.0, 0.5 * np.abs(p - q).sum()))


@dataclass(frozen=True, slots=True)
class DistanceResult:
    """d(D, D′) of Definition 2.4 with the maximising conditioning set (feature names)."""

    distance: float
    argmax_subset: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"distance": self.distance, "argmax_subset": list(self.argmax_subset)}


def _record(dist: JointDistribution, record: Any, name: str) -> tuple[int, ...]:
    arr = np.asarray(record)
    if arr.shape != (dist.num_features,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be {dist.num_features} integer codes; got {record!r}")
    if np.any(arr < 0) or np.any(arr >= np.asarray(dist.table.shape)):
        raise ValueError(f"{name} has a code out of range for table shape {dist.table.shape!r}; got {record!r}")
    if dist.table[tuple(arr)] <= 0:
        raise ValueError(f"{name} must have positive probability under the distribution; got {record!r}")
    return tuple(int(v) for v in arr)


def dataset_distance(
    dist: JointDistribution,
    sensitive: Collection[int | str],
    record: Sequence[int],
    other: Sequence[int],
) -> DistanceResult:
    """d(D, D′) of Definition 2.4 for data sets differing in one record e (in D) versus e′ (in D′).

    d = max over I ⊆ [m] of TV(P_{X^S | X^I = e^I}, P_{X^S | X^I = e′^I}), by brute force over all 2^m subsets
    (m ≤ 16). The label index m+1 of the printed [m+1] is fixed under Assumption 3.1 and omitted (note §A1).
    Subsets containing a sensitive index on which e and e′ differ give TV = 1, so d = 1 for a sensitive change
    (Def. 2.3 axiom 2).

    Args:
        dist: the joint distribution of the features.
        sensitive: the sensitive features S.
        record: e, integer codes of positive probability.
        other: e′, integer codes of positive probability.

    Returns:
        The distance and the maximising subset.

    Raises:
        ValueError: on records of zero probability / wrong length, or m > 16.
    """
    s_idx = dist.indices(sensitive)
    m = dist.num_features
    if m > _MAX_SUBSET_FEATURES:
        raise ValueError(f"dist must have at most {_MAX_SUBSET_FEATURES} features for brute force; got {m!r}")
    e = _record(dist, record, "record")
    e2 = _record(dist, other, "other")
    diff = [j for j in range(m) if e[j] != e2[j]]
    if any(j in s_idx for j in diff):
        return DistanceResult(1.0, tuple(dist.names[j] for j in diff if j in s_idx)[:1])
    best, best_subset = 0.0, ()
    if not diff:
        return DistanceResult(0.0, ())
    # Only subsets containing at least one differing index can give TV > 0.
    for r in range(1, m + 1):
        for subset in itertools.combinations(range(m), r):
            if not any(j in subset for j in diff):
                continue
            p = dist.conditional(s_idx, {j: e[j] for j in subset})
            q = dist.conditional(s_idx, {j: e2[j] for j in subset})
            tv = float(min(1.0, 0.5 * np.abs(p - q).sum()))
            if tv > best + _TV_TOL:
                best, best_subset = tv, subset
    return DistanceResult(best, tuple(dist.names[j] for j in best_subset))


def feature_tv(dist: JointDistribution, sensitive: Collection[int | str], feature: int | str) -> float:
    """TV(j) of Definition 2.7: max over value pairs x1, x2 of feature j of TV(P_{X^S|x1^(j)}, P_{X^S|x2^(j)}).

    Only values of positive probability are compared. The law is that of the **joint** block X^S, not of each
    sensitive feature separately (note §A6 C7). For a sensitive j the result is 1 if j takes ≥ 2 values.

    Args:
        dist: the joint distribution.
        sensitive: the sensitive features S.
        feature: j.

    Returns:
        TV(j) ∈ [0, 1].
    """
    s_idx = dist.indices(sensitive)
    j = dist.index(feature)
    axes = tuple(sorted(set(s_idx) | {j}))
    marg = dist.marginal(axes)  # axes in increasing order
    pos = axes.index(j)
    marg = np.moveaxis(marg, pos, 0).reshape(dist.table.shape[j], -1)
    mass = marg.sum(axis=1)
    cond = marg[mass > 0] / mass[mass > 0, None]
    if cond.shape[0] < 2:
        return 0.0
    pair = 0.5 * np.abs(cond[:, None, :] - cond[None, :, :]).sum(axis=-1)
    return float(min(1.0, pair.max()))


def conservative_feature_tv(dist: JointDistribution, sensitive: Collection[int | str], feature: int | str) -> float:
    r"""TV*(j): the max over conditioning sets I ∋ j of Def. 2.4's TV, for records differing only in feature j.

    Conservative per-feature distance of note §A6 C6 / §A7.2 [D]. Contexts on I \ {j} are taken over all
    positive-probability values, so TV*(j) ≥ max d(e, e′) over positive-probability pairs differing only in j
    (equality when the table has full support), and TV*(j) ≥ TV(j) (I = {j}).

    Args:
        dist: the joint distribution (m ≤ 16).
        sensitive: the sensitive features S.
        feature: an insensitive feature j.

    Returns:
        TV*(j) ∈ [0, 1].
    """
    s_idx = dist.indices(sensitive)
    j = dist.index(feature)
    if j in s_idx:
        return 1.0 if dist.table.shape[j] > 1 else 0.0
    m = dist.num_features
    if m > _MAX_SUBSET_FEATURES:
        raise ValueError(f"dist must have at most {_MAX_SUBSET_FEATURES} features for brute force; got {m!r}")
    others = [a for a in range(m) if a != j]
    best = 0.0
    # For each I ∋ j: TV between conditionals given (X^{I\j} = c, X^j = v1) and (c, v2), max over c, v1, v2.
    for r in range(0, m):
        for rest in itertools.combinations(others, r):
            axes = tuple(sorted(set(s_idx) | set(rest) | {j}))
            marg = dist.marginal(axes)
            cond_axes = tuple(sorted(set(rest) | {j}))
            # reorder to (conditioning axes…, sensitive axes not in conditioning…)
            s_only = tuple(a for a in s_idx if a not in cond_axes)
            order = [axes.index(a) for a in cond_axes] + [axes.index(a) for a in s_only]
            t = np.transpose(marg, order)
            kj = dist.table.shape[j]
            ctx_shape = tuple(dist.table.shape[a] for a in cond_axes if a != j)
            jpos = cond_axes.index(j)
            t = np.moveaxis(t, jpos, len(cond_axes) - 1)  # j last among conditioning axes
            t = t.reshape((math.prod(ctx_shape), kj, -1))
            # for sensitive axes inside the conditioning set the law of X^S is a point mass on that code;
            # the TV between two such conditionals with the same context is the TV of the remaining block.
            mass = t.sum(axis=-1)
            with np.errstate(invalid="ignore", divide="ignore"):
                cond = np.where(mass[..., None] > 0, t / np.where(mass > 0, mass, 1.0)[..., None], np.nan)
            diff = 0.5 * np.abs(cond[:, :, None, :] - cond[:, None, :, :]).sum(axis=-1)
            diff = np.where(np.isnan(diff), -np.inf, diff)
            best = max(best, float(diff.max()))
    return float(min(1.0, max(best, 0.0)))


def feature_tvs(
    dist: JointDistribution,
    sensitive: Collection[int | str],
    *,
    convention: TvConvention = TvConvention.PAPER,
    check_joint: bool = True,
) -> dict[str, float]:
    """TV(j) (Def. 2.7) or TV*(j) for every insensitive feature, keyed by name.

    With ``check_joint`` (and m ≤ 16) TV*(j) is also computed and a :class:`CorrelationWarning` is issued for
    every j with TV*(j) > TV(j): the paper's per-feature TV then understates d(D, D′) of Def. 2.4, and the
    privacy claims of Thm 2.9 / 3.5 need d(D, D′) ≤ TV(j), which fails (note §A3, test C6, noisy XOR).

    Args:
        dist: the joint distribution.
        sensitive: the sensitive features S.
        convention: PAPER (TV(j)) or CONSERVATIVE (TV*(j)).
        check_joint: compare TV(j) with TV*(j) and warn.

    Returns:
        {name of j: correlation} for j ∈ U.
    """
    if not isinstance(convention, TvConvention):
        raise ValueError(f"convention must be a TvConvention; got {convention!r}")
    s_idx = dist.indices(sensitive)
    out: dict[str, float] = {}
    small = dist.num_features <= _MAX_SUBSET_FEATURES
    for j in range(dist.num_features):
        if j in s_idx:
            continue
        tv = feature_tv(dist, s_idx, j)
        tv_star = None
        if convention is TvConvention.CONSERVATIVE or (check_joint and small):
            tv_star = conservative_feature_tv(dist, s_idx, j)
        if check_joint and tv_star is not None and tv_star > tv + 1e-9:
            warnings.warn(
                f"feature {dist.names[j]!r}: TV(j) = {tv:.6g} (Def. 2.7) understates the joint distance "
                f"max over I ∋ j = {tv_star:.6g} (Def. 2.4); the paper's noise calibration then does not "
                "cover all neighbours (note §A6 C6). Use TvConvention.CONSERVATIVE.",
                CorrelationWarning,
                stacklevel=2,
            )
        out[dist.names[j]] = tv_star if convention is TvConvention.CONSERVATIVE else tv
    return out


# --------------------------------------------------------------------------------------------
# Correlated sensitivity and the CorrDP Laplace mechanism (Def. 2.7, 2.8, Thm 2.9)


def pair_epsilon(epsilon: float, distance: float) -> float:
    """Privacy-loss budget ε/d(D, D′) of a neighbouring pair under CorrDP (Def. 2.2, corrected reading).

    Erratum (note §A1): the printed exponent lost its ε; ε/d is the only reading consistent with CorrDP being a
    relaxation of DP and with Remark 2.6. ε/0 := +∞ (no constraint).

    Args:
        epsilon: the CorrDP ε ≥ 0.
        distance: d(D, D′) ∈ [0, 1].

    Returns:
        ε/d (``math.inf`` for d = 0).
    """
    eps = conversions.check_epsilon(epsilon)
    d = _check_unit("distance", distance, open_low=False)
    return math.inf if d == 0 else eps / d


def _tv_vector(
    tv: Mapping[int, float] | Sequence[float] | np.ndarray, m: int, sensitive: tuple[int, ...]
) -> np.ndarray:
    vec = np.ones(m)
    if isinstance(tv, Mapping):
        items = tv.items()
    else:
        arr = np.asarray(tv, dtype=float)
        if arr.shape != (m,):
            raise ValueError(f"tv must be a mapping or a length-{m} vector; got {tv!r}")
        items = ((j, arr[j]) for j in range(m) if j not in sensitive)
    for j, value in items:
        if isinstance(j, bool) or not isinstance(j, int | np.integer) or not 0 <= j < m:
            raise ValueError(f"tv keys must be coordinate indices in [0, {m}); got {j!r}")
        if j in sensitive:
            continue
        try:
            v = float(value)
        except (TypeError, ValueError):
            v = math.nan
        if not 0 <= v <= 1:
            raise ValueError(f"tv[{j}] must be in [0, 1]; got {value!r}")
        vec[j] = v
    missing = [j for j in range(m) if j not in sensitive and (isinstance(tv, Mapping) and j not in tv)]
    if missing:
        raise ValueError(f"tv must give a value for every insensitive coordinate; missing {missing!r}")
    return vec


def _sensitive_indices(sensitive: Collection[int], m: int) -> tuple[int, ...]:
    try:
        out = tuple(sorted({int(j) for j in sensitive}))
    except (TypeError, ValueError):
        raise ValueError(f"sensitive must be a collection of indices; got {sensitive!r}") from None
    if any(isinstance(j, bool) for j in sensitive) or any(not 0 <= j < m for j in out):
        raise ValueError(f"sensitive must hold indices in [0, {m}); got {sensitive!r}")
    return out


def correlated_sensitivity(
    coordinate_sensitivities: Sequence[float] | np.ndarray,
    sensitive: Collection[int],
    tv: Mapping[int, float] | Sequence[float] | np.ndarray,
    *,
    l1_sensitivity: float | None = None,
    convention: NeighbourConvention = NeighbourConvention.STANDARD,
) -> float:
    """Correlated sensitivity Δ_C f = min{Σ_{j∈S} Δf_j + Σ_{j∈U} Δf_j TV(j), Δf} (Definition 2.7).

    For a coordinate-separable f (Def. 2.8). Δf defaults to the ``convention``'s ℓ1-sensitivity (note §A1,
    test C2: STANDARD gives Δf = Σ_k Δf_k, CORRDP gives max{Σ_S Δf_j, max_U Δf_j}).

    Args:
        coordinate_sensitivities: Δf_k ≥ 0 for k = 0 … K−1.
        sensitive: indices of the sensitive coordinates S.
        tv: TV(j) ∈ [0, 1] for every insensitive j (mapping or length-K vector).
        l1_sensitivity: Δf (overrides ``convention``).
        convention: which Δf to use when ``l1_sensitivity`` is None.

    Returns:
        Δ_C f.
    """
    sens = np.asarray(coordinate_sensitivities, dtype=float)
    if sens.ndim != 1 or sens.size == 0 or not np.all(np.isfinite(sens)) or np.any(sens < 0):
        raise ValueError(
            "coordinate_sensitivities must be a non-empty vector of finite values >= 0; "
            f"got {coordinate_sensitivities!r}"
        )
    k = sens.size
    s_idx = _sensitive_indices(sensitive, k)
    tvv = _tv_vector(tv, k, s_idx)
    mask = np.zeros(k, dtype=bool)
    mask[list(s_idx)] = True
    weighted = float(sens[mask].sum() + (sens[~mask] * tvv[~mask]).sum())
    if l1_sensitivity is None:
        if not isinstance(convention, NeighbourConvention):
            raise ValueError(f"convention must be a NeighbourConvention; got {convention!r}")
        if convention is NeighbourConvention.STANDARD:
            l1 = float(sens.sum())
        else:
            l1 = max(float(sens[mask].sum()), float(sens[~mask].max()) if (~mask).any() else 0.0)
    else:
        l1 = _check_positive("l1_sensitivity", l1_sensitivity, allow_zero=True)
    return min(weighted, l1)


def laplace_scale(correlated_sensitivity: float, epsilon: float) -> float:
    """Noise scale b = Δ_C f / ε of the CorrDP Laplace mechanism (Definition 2.8), i.i.d. over coordinates."""
    dc = _check_positive("correlated_sensitivity", correlated_sensitivity)
    eps = _check_positive("epsilon", epsilon)
    return dc / eps


def laplace_accuracy_bound(correlated_sensitivity: float, epsilon: float, *, dimension: int, beta: float) -> float:
    """Theorem 2.9: P[‖f(D) − M̃_L(D)‖_∞ ≤ Δ_C f log(K/β)/ε] ≥ 1 − β.

    Args:
        correlated_sensitivity: Δ_C f > 0.
        epsilon: ε > 0.
        dimension: K ≥ 1.
        beta: β ∈ (0, 1].

    Returns:
        The ℓ∞ error bound Δ_C f log(K/β)/ε.
    """
    k = _check_int("dimension", dimension)
    b = _check_unit("beta", beta)
    return laplace_scale(correlated_sensitivity, epsilon) * math.log(k / b)


def laplace_accuracy_coverage(*, dimension: int, beta: float) -> float:
    """Exact probability that the Theorem 2.9 bound holds: (1 − β/K)^K ≥ 1 − β (i.i.d. Laplace tails)."""
    k = _check_int("dimension", dimension)
    b = _check_unit("beta", beta)
    return float(math.exp(k * math.log1p(-b / k))) if b < k else 0.0


# --------------------------------------------------------------------------------------------
# CorrDP-SGD: eq. (3)


def base_noise_variance(*, epsilon: float, delta: float, lipschitz: float, steps: int, n: int) -> float:
    """σ_0² = (ln(1/δ) + 1) L² T / (n² ε²) of eq. (3) (sensitive coordinates).

    A paper formula with the moments-accountant constant c₂ set to 1 and ε ≤ c₁ unspecified (note §A3, §A7.4):
    **not** an audited (ε, δ) calibration.

    Args:
        epsilon: ε > 0.
        delta: δ ∈ (0, 1).
        lipschitz: L > 0 (Assumption 3.2).
        steps: T ≥ 1.
        n: data set size (not the batch size).

    Returns:
        σ_0².
    """
    eps = _check_positive("epsilon", epsilon)
    dlt = conversions.check_delta(delta)
    lip = _check_positive("lipschitz", lipschitz)
    t = _check_int("steps", steps)
    nn = _check_int("n", n)
    return (math.log(1.0 / dlt) + 1.0) * lip**2 * t / (nn**2 * eps**2)


def noise_weights(
    m: int,
    sensitive: Collection[int],
    tv: Mapping[int, float] | Sequence[float] | np.ndarray,
) -> np.ndarray:
    """Per-coordinate variance weights of eq. (3): 1 on S, max{TV(i), (m_s/m)²} on U, capped at 1.

    The cap w ≤ 1 is the safeguard of note §A2 (CorrDP never needs more noise than DP); the result lies in
    [(m_s/m)², 1]. Eq. (3) drops universal constants; these weights are a paper formula, not an audited bound.

    Args:
        m: number of coordinates.
        sensitive: sensitive coordinates S (m_s = |S| ≥ 1).
        tv: TV(i) ≥ 0 for each i ∈ U (inflated estimates above 1 are clipped to 1).

    Returns:
        w ∈ [(m_s/m)², 1]^m.
    """
    mm = _check_int("m", m)
    s_idx = _sensitive_indices(sensitive, mm)
    if not s_idx:
        raise ValueError(f"sensitive must contain at least one coordinate; got {sensitive!r}")
    if isinstance(tv, Mapping):
        tv = {
            j: min(1.0, float(v)) if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 else v
            for j, v in tv.items()
        }
    else:
        arr = np.asarray(tv, dtype=float)
        tv = np.where(arr > 1, 1.0, arr)
    tvv = _tv_vector(tv, mm, s_idx)
    floor = (len(s_idx) / mm) ** 2
    w = np.minimum(1.0, np.maximum(tvv, floor))
    w[list(s_idx)] = 1.0
    return w


def noise_weights_from_distribution(
    dist: JointDistribution,
    sensitive: Collection[int | str],
    *,
    convention: TvConvention = TvConvention.PAPER,
) -> np.ndarray:
    """Eq. (3) weights with TV(j) (PAPER) or TV*(j) (CONSERVATIVE) computed from a joint distribution.

    Warns with :class:`CorrelationWarning` (via :func:`feature_tvs`) when TV(j) understates d(D, D′).

    Args:
        dist: the joint distribution of the features (coordinate i of the gradient ↔ feature i).
        sensitive: the sensitive features S.
        convention: which per-feature correlation enters eq. (3).

    Returns:
        w ∈ [(m_s/m)², 1]^m.
    """
    s_idx = dist.indices(sensitive)
    tvs = feature_tvs(dist, s_idx, convention=convention)
    by_index = {dist.index(name): value for name, value in tvs.items()}
    return noise_weights(dist.num_features, s_idx, by_index)


def noise_variances(
    *,
    epsilon: float,
    delta: float,
    lipschitz: float,
    steps: int,
    n: int,
    weights: Sequence[float] | np.ndarray,
) -> np.ndarray:
    """σ_i² = σ_0² w_i of eq. (3) (paper formula, universal constants dropped; note §A3)."""
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size == 0 or not np.all((w > 0) & (w <= 1)):
        raise ValueError(f"weights must be a non-empty vector in (0, 1]; got {weights!r}")
    return base_noise_variance(epsilon=epsilon, delta=delta, lipschitz=lipschitz, steps=steps, n=n) * w


def utility_proxy(tv: Sequence[float] | np.ndarray, *, num_sensitive: int) -> float:
    """m_s + max{Σ_{i∈U} TV(i), m_s/4}: Theorem 3.6's dimension term with the erratum min → max (note §A3)."""
    ms = _check_int("num_sensitive", num_sensitive)
    arr = np.asarray(tv, dtype=float)
    if arr.ndim != 1 or np.any(~((arr >= 0) & (arr <= 1))):
        raise ValueError(f"tv must be a vector in [0, 1]; got {tv!r}")
    return ms + max(float(arr.sum()), ms / 4)


def lower_bound_term(tv: Sequence[float] | np.ndarray) -> float:
    """max_k k (TV^(k))² over the descending TVs (Theorem 3.7); ≤ Σ TV(i)."""
    arr = np.asarray(tv, dtype=float)
    if arr.ndim != 1 or arr.size == 0 or np.any(~((arr >= 0) & (arr <= 1))):
        raise ValueError(f"tv must be a non-empty vector in [0, 1]; got {tv!r}")
    s = np.sort(arr)[::-1]
    return float(np.max(np.arange(1, s.size + 1) * s**2))


# --------------------------------------------------------------------------------------------
# Unknown correlation: Definition 3.10 and a concrete plug-in estimator


def paper_tv_inflation(*, c2: float, gamma: float, num_insensitive: int, delta: float, n: int) -> float:
    """Inflation 2 c₂ √(ln(m_u/δ)) / n^γ of Definition 3.10.

    Assumption 3.8 (|TV̂ − TV| ≤ c₂ √(log(1/β))/n^γ w.p. ≥ 1 − β) with β = δ/m_u and a union bound over the m_u
    insensitive features (note §A5 [D]); the user supplies c₂ and γ. The resulting guarantee is (ε, 2δ)-CorrDP
    (Thm 3.11) and only under i.i.d. data: distribution-dependent, outside worst-case audits.

    Args:
        c2: c₂ > 0.
        gamma: γ ∈ (0, 1/2].
        num_insensitive: m_u ≥ 1.
        delta: δ ∈ (0, 1).
        n: data set size.

    Returns:
        The additive inflation.
    """
    c = _check_positive("c2", c2)
    g = _check_positive("gamma", gamma)
    if g > 0.5:
        raise ValueError(f"gamma must be in (0, 1/2]; got {gamma!r}")
    mu = _check_int("num_insensitive", num_insensitive)
    dlt = conversions.check_delta(delta)
    nn = _check_int("n", n)
    return 2.0 * c * math.sqrt(math.log(mu / dlt)) / nn**g


@dataclass(frozen=True, slots=True)
class TvEstimate:
    """Plug-in TV(j) **estimates** with an upper confidence bound (distribution-dependent, i.i.d. data).

    ``upper[j]`` ≥ TV(j) simultaneously for all j with probability ≥ 1 − ``beta`` over the sample.
    """

    names: tuple[str, ...]
    estimate: tuple[float, ...]
    inflation: tuple[float, ...]
    upper: tuple[float, ...]
    beta: float
    n: int
    method: str = field(default="plug-in + McDiarmid UCB")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "estimate",
            "names": list(self.names),
            "tv_estimate": list(self.estimate),
            "inflation": list(self.inflation),
            "tv_upper_confidence": list(self.upper),
            "beta": self.beta,
            "n": self.n,
            "method": self.method,
        }


def estimate_feature_tvs(
    samples: Any,
    sensitive: Collection[int],
    *,
    beta: float,
    names: Sequence[str] = (),
    num_values: Sequence[int] | None = None,
) -> TvEstimate:
    """Plug-in TV̂(j) from i.i.d. discrete samples with a simultaneous upper confidence bound (Def. 3.10 role).

    Concentration inequality used (ours; the paper defers its estimator to the full version). Let p_x be the
    law of X^S given X^(j) = x (k_S cells) and p̂_x its empirical version from the n_x samples with X^(j) = x.
    Conditionally on n_x those samples are i.i.d. from p_x, and TV(p̂_x, p_x) has bounded differences 1/n_x, so
    by McDiarmid's inequality and E TV(p̂_x, p_x) ≤ ½ Σ_c √(p_x(c)/n_x) ≤ ½ √(k_S/n_x) (Jensen + Cauchy–Schwarz),

        P[TV(p̂_x, p_x) ≥ ½ √(k_S/n_x) + √(ln(1/β′)/(2 n_x))] ≤ β′.

    By the triangle inequality |TV(p̂_x, p̂_y) − TV(p_x, p_y)| ≤ TV(p̂_x, p_x) + TV(p̂_y, p_y), so
    |TV̂(j) − TV(j)| ≤ 2 max_x r_x with r_x the radius above. A union bound over all (j, x) cells with
    β′ = β / Σ_j k_j makes the bound hold for all j simultaneously with probability ≥ 1 − β. Values x never
    observed are ignored by the plug-in (the estimate is then of TV over the observed support) and the upper
    bound is set to 1 whenever some value of j has n_x = 0 while the others do not cover TV(j) (conservative).
    Upper bounds are clipped to 1. Use β = δ/m_u to mirror Def. 3.10 (then the guarantee is (ε, 2δ)).

    Args:
        samples: (n, m) integer codes, rows i.i.d.
        sensitive: sensitive feature indices S.
        beta: failure probability β ∈ (0, 1).
        names: feature names.
        num_values: values per feature (default: from the data).

    Returns:
        A :class:`TvEstimate` for the insensitive features.
    """
    b = conversions.check_delta(beta, name="beta")
    arr = np.asarray(samples)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 2:
        raise ValueError(f"samples must be a 2-D array (n, m) with m >= 2; got shape {arr.shape!r}")
    m = arr.shape[1]
    all_names = tuple(names) if names else tuple(f"x{j}" for j in range(m))
    if len(all_names) != m:
        raise ValueError(f"names must give {m} names; got {names!r}")
    shape = tuple(num_values) if num_values is not None else None
    s_idx = _sensitive_indices(sensitive, m)
    if not s_idx:
        raise ValueError(f"sensitive must name at least one feature; got {sensitive!r}")
    u_idx = [j for j in range(m) if j not in s_idx]
    if not u_idx:
        raise ValueError(f"sensitive must leave at least one insensitive feature; got {sensitive!r}")
    n = arr.shape[0]
    est, infl, upper = [], [], []
    pairs = []
    for j in u_idx:
        cols = [*s_idx, j]  # only the (X^S, X^(j)) marginal is needed: no full joint table
        sub_nv = None if shape is None else [shape[a] for a in cols]
        pairs.append(JointDistribution.from_data(arr[:, cols], num_values=sub_nv))
    k_s = math.prod(pairs[0].table.shape[:-1])
    cells = sum(p.table.shape[-1] for p in pairs)
    log_term = math.log(cells / b)
    for j, dist in zip(u_idx, pairs, strict=True):
        counts = np.bincount(np.asarray(arr[:, j], dtype=np.int64), minlength=dist.table.shape[-1])
        tv_hat = feature_tv(dist, range(len(s_idx)), len(s_idx))
        seen = counts[counts > 0]
        radius = 0.5 * np.sqrt(k_s / seen) + np.sqrt(log_term / (2.0 * seen))
        inflation = float(2.0 * radius.max()) if seen.size >= 2 else 1.0
        ub = min(1.0, tv_hat + inflation)
        if np.any(counts == 0):
            ub = 1.0
        est.append(tv_hat)
        infl.append(inflation)
        upper.append(ub)
    return TvEstimate(
        names=tuple(all_names[j] for j in u_idx),
        estimate=tuple(est),
        inflation=tuple(infl),
        upper=tuple(upper),
        beta=b,
        n=n,
    )


# --------------------------------------------------------------------------------------------
# Accountant-level event: the CorrDP Laplace mechanism (Theorem 2.9: pure ε-CorrDP)


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class CorrDpLaplace(ev.Event):
    """The CorrDP Laplace mechanism of Definition 2.8 at scale Δ_C f/ε: (ε, 0)-CorrDP (Theorem 2.9).

    The ε is the CorrDP ε: a neighbouring pair at distance d(D, D′) enjoys the bound ε/d (corrected Def. 2.2,
    note §A1). For a sensitive change (d = 1) the privacy loss is ≤ ε·Σ_S Δf_j/Δ_C f ≤ ε. For a change of an
    insensitive feature j the loss ≤ ε Δf_j/Δ_C f is ≤ ε/d(D, D′) **only if d(D, D′) ≤ TV(j)** (note §A3), which
    the extended abstract does not state; check it with :func:`feature_tvs` (it warns otherwise).
    Composition is per pair (note §A3 [D]), so the core accountant may compose these events like pure-ε
    Laplace steps.
    """

    epsilon: float
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.REPLACE_ONE

    def __post_init__(self) -> None:
        _check_positive("epsilon", self.epsilon)
        if not isinstance(self.neighboring, ev.NeighboringRelation):
            raise ValueError(f"neighboring must be a NeighboringRelation; got {self.neighboring!r}")

    def pure_dp_epsilon(self) -> float:
        """The pure (CorrDP) ε of one run, for basic composition in :meth:`Accountant.pure_epsilon`."""
        return self.epsilon


def corrdp_laplace_rdp_curve(event: CorrDpLaplace):
    """RDP of the CorrDP Laplace mechanism for pairs with budget ε (d = 1): the Laplace RDP at ε₀ = ε.

    The privacy loss between product Laplace laws with shifts s_k (in units of the scale) has RDP
    Σ_k g(s_k) with g the one-dimensional Laplace RDP (Mironov 2017 Prop. 6); g is convex in the shift with
    g(0) = 0, hence superadditive, so the K-dimensional worst case with Σ s_k ≤ ε is the one-dimensional shift ε
    (checked numerically in the tests).
    """
    from dplens.accountant import rdp

    return rdp.rdp_curve(ev.Laplace(noise_multiplier=1.0 / event.epsilon))


def _build_corrdp_laplace(table: dict) -> ev.Event:
    """``corrdp_laplace``: ``epsilon`` (CorrDP ε of Thm 2.9); optional ``count``."""
    extra = set(table) - {"type", "epsilon", "count"}
    if extra:
        raise ValueError(f"unknown key(s) {sorted(extra)!r}; allowed: ['count', 'epsilon']")
    if "epsilon" not in table:
        raise ValueError(f"epsilon is required; got table keys {sorted(table)!r}")
    value = table["epsilon"]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"epsilon must be a number; got {value!r}")
    event: ev.Event = CorrDpLaplace(epsilon=float(value))
    if "count" in table:
        count = table["count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be an integer >= 1; got {count!r}")
        if count > 1:
            event = ev.SelfComposed(event=event, count=count)
    return event


SPEC_TYPES = {"corrdp_laplace": _build_corrdp_laplace}


def _register_interpreters() -> None:
    """Register on the core RDP interpreter when it exists (lazily safe)."""
    try:
        from dplens.accountant import rdp
    except ImportError:  # pragma: no cover - core not present
        return
    if hasattr(rdp, "rdp_curve"):
        rdp.rdp_curve.register(CorrDpLaplace)(corrdp_laplace_rdp_curve)


_register_interpreters()
