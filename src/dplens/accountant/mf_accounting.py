"""ε of a matrix-factorisation (correlated-noise) training under the sampler it used, every number labelled.

The mechanisms and their sensitivities are in :mod:`dplens.accountant.matrix_factorization`; this module turns a
training — strategy, sampler, N, B, epochs, σ (the noise multiplier of the strategy scaled to largest column norm 1,
jax_privacy's convention) — into (ε, δ), its kind and its lower end:

- ``cyclic-poisson`` (the examples split into b groups, group t mod b active at step t, each of its examples in the
  batch with probability q = B·b/N; jax_privacy's ``CyclicPoissonSampling``): for a strategy with at most b bands,
  an example's participations fall in columns b apart, which have disjoint supports, so the run is the composition
  of ⌈T/b⌉ Poisson-subsampled Gaussians with sensitivities ‖C_{:, j + kb}‖ ≤ 1 (Choquette-Choo, Ganesh, McKenna,
  McMahan, Rush, Thakurta, Xu, "(Amplified) Banded Matrix Factorization", NeurIPS 2023, arXiv 2306.08153, Thm 4;
  jax_privacy's ``amplified_bandmf_event`` is DP-SGD with ⌈T/b⌉ rounds). dplens composes the group's own column
  norms: when one group's norms dominate every other group's (banded Toeplitz: group 0), its pair is attained
  (an example with the same unit gradient at each of its steps, the others zero: the output blocks are independent),
  so the PLD bracket is ``certified``; otherwise the elementwise envelope is an ``upper`` bound and a group's own
  composition a lower bound. With ``max_batch_size``, each round is a truncated subsampled Gaussian (Ganesh 2025,
  arXiv 2508.15089; jax_privacy's ``truncated_amplified_bandmf_event``): ``upper``, with the Poisson pair at the rate
  an example is surely kept as lower bound.
- ``poisson`` (i.i.d. at every step): amplification for a general strategy needs MMCC (Choquette-Choo, Ganesh,
  Steinke, Thakurta, ICLR 2024), which dplens does not implement: refused, except for a diagonal strategy (1 band),
  which is DP-SGD. DP-SGD's ε for T steps is *not* valid for a banded strategy.
- ``cyclic`` (the same order every epoch), ``min-sep`` (the worst pattern of at most k participations b apart):
  no randomness to amplify; the run is exactly μ-GDP with μ = sensitivity/σ (the Gaussian mechanism on C G; Dong,
  Roth, Su 2022 Cor. 2.13): ``certified`` where the sensitivity is exact, ``upper`` otherwise.
- ``fixed-bins``, ``shuffle-once`` (a random but fixed step per epoch), ``shuffle``, ``balls-and-bins`` (one step per
  epoch, anywhere), ``b-min-sep`` (random participations b apart): the same μ-GDP bound with the schema's worst-case
  sensitivity, which ignores the sampler's randomness — a valid ``upper`` bound, possibly far above the truth; a
  certified amplified bound there is research (Monte Carlo: Choquette-Choo et al. 2024, arXiv 2410.06266; Dong &
  Ganesh 2026), except for fixed bins on a non-negative strategy with few bands: the Rényi bound of
  :mod:`dplens.accountant.mf_renyi` (remove direction exact at integer orders by a dynamic programme over offsets,
  as Schuchardt & Kalinin 2026 for random allocation; add direction by AM–GM), used where it is below the others
  (an ``upper`` bound: no lower end is known). For fixed bins and balls-and-bins the post-processing bound below
  (DP-SGD under the same sampler at σ/‖C‖₂) is a third valid bound; the smallest valid one is reported.

As an event (:class:`MfTraining`: specs, the ledger, the report), a fixed-bins training the Rényi bound applies to
has an amplified RDP curve — at each integer order the larger of the two directions' bounds, D_α ≤ D_⌈α⌉ between the
orders, never above the unamplified μ-GDP curve — so it composes with other events; its privacy profile (the exact
route, which the ledger's BEST route takes when smaller) converts each direction separately, so a lone training is
charged :func:`mf_epsilon`'s Rényi bound. Its PLD route is the unamplified μ-GDP (a valid upper bound: the PLD engine
composes it as a Gaussian). The post-processing bound is :func:`mf_epsilon`'s only.

Neighbouring relation: add/remove (default for the Poisson-type samplers) and zero-out give the sensitivities above;
replace-one (allowed for the unamplified schemas) doubles them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dplens.accountant import events as ev
from dplens.accountant import matrix_factorization as mf

if TYPE_CHECKING:
    from dplens.accountant.mf_renyi import FixedBinsRdp

__all__ = ["MECHANISMS", "SAMPLINGS", "MfPrivacy", "fixed_bins_epsilon", "mf_epsilon", "mf_noise_multiplier"]

MECHANISMS = ("bandmf", "blt", "bsr", "nu-ftrl", "matrix")
SAMPLINGS = (
    "cyclic-poisson",
    "poisson",
    "b-min-sep",
    "fixed-bins",
    "balls-and-bins",
    "cyclic",
    "min-sep",
    "shuffle",
    "shuffle-once",
)
_EPOCH_SAMPLERS = ("fixed-bins", "balls-and-bins", "cyclic", "shuffle", "shuffle-once")
_DETERMINISTIC = ("cyclic", "min-sep")
_POISSON_TYPE = ("cyclic-poisson", "poisson", "fixed-bins", "balls-and-bins")
ADD_REMOVE = ev.NeighboringRelation.ADD_OR_REMOVE_ONE
ZERO_OUT = ev.NeighboringRelation.REPLACE_SPECIAL
REPLACE_ONE = ev.NeighboringRelation.REPLACE_ONE
#: Distinct per-round sensitivities composed one by one; more are rounded up (upper) or down (lower) into this many.
_MAX_LEVELS = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class MfPrivacy:
    """The privacy of a matrix-factorisation training: ``epsilon`` is always a valid upper bound; ``bound`` is
    ``certified`` when ``epsilon_lower`` closes a certified bracket, ``upper`` otherwise (``lower_bound`` says what
    ``epsilon_lower`` is: the bracket's lower end, a lower-bound construction, or None when none is known)."""

    epsilon: float
    delta: float
    bound: str
    epsilon_lower: float | None
    lower_bound: str | None
    mechanism: str
    sampling: str
    bands: int | None
    sensitivity: float
    sensitivity_exact: bool
    sensitivity_method: str
    noise_multiplier: float
    steps: int
    participations: int
    amplified: bool
    neighboring: str
    dataset_size: int | None
    batch_size: int | None
    epochs: float | None
    details: str
    rounds: int | None = None
    sampling_rate: float | None = None
    strategy: dict[str, Any] | None = None
    target_epsilon: float | None = None
    notes: tuple[str, ...] = field(default=())
    epsilon_monte_carlo: float | None = None
    monte_carlo: dict[str, Any] | None = None
    renyi: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "bound": self.bound,
            "epsilon_lower": self.epsilon_lower,
            "lower_bound": self.lower_bound,
            "mechanism": self.mechanism,
            "sampling": self.sampling,
            "bands": self.bands,
            "sensitivity": self.sensitivity,
            "sensitivity_exact": self.sensitivity_exact,
            "sensitivity_method": self.sensitivity_method,
            "noise_multiplier": self.noise_multiplier,
            "noise_multiplier_convention": "relative to the strategy scaled to largest column norm 1",
            "steps": self.steps,
            "participations": self.participations,
            "amplified": self.amplified,
            "neighboring": self.neighboring,
            "dataset_size": self.dataset_size,
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            "details": self.details,
            "rounds": self.rounds,
            "sampling_rate": self.sampling_rate,
            "strategy": self.strategy,
            "notes": list(self.notes),
            "is_estimate": False,
        }
        if self.target_epsilon is not None:
            out["target_epsilon"] = self.target_epsilon
        if self.renyi is not None:  # the fixed-bins Rényi bound, per direction (reported when it is the smallest)
            out["renyi"] = self.renyi
        if self.monte_carlo is not None:  # an estimate under the verification rule, never the guarantee
            out["epsilon_monte_carlo"] = self.epsilon_monte_carlo
            out["monte_carlo"] = self.monte_carlo
        return out


# --------------------------------------------------------------------------------------------
# The run: validated description
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    mechanism: str
    sampling: str
    strategy: mf.Strategy | None  # None: BandMF with unknown banded Toeplitz coefficients (largest column norm 1)
    bands: int | None
    steps: int
    period: int | None
    dataset_size: int
    batch_size: int
    epochs: float
    relation: ev.NeighboringRelation
    min_separation: int | None
    max_participations: int | None
    max_batch_size: int | None


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value.strip().lower().replace("_", "-") not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}; got {value!r}")
    return value.strip().lower().replace("_", "-")


def _relation(sampling: str, neighboring: Any) -> ev.NeighboringRelation:
    default = ADD_REMOVE if sampling in _POISSON_TYPE else ZERO_OUT
    if neighboring is None:
        return default
    if isinstance(neighboring, str):
        try:
            neighboring = ev.NeighboringRelation(neighboring.strip().lower().replace("-", "_"))
        except ValueError:
            allowed = [r.value for r in ev.NeighboringRelation]
            raise ValueError(f"neighboring must be one of {allowed}; got {neighboring!r}") from None
    if not isinstance(neighboring, ev.NeighboringRelation):
        raise ValueError(f"neighboring must be a NeighboringRelation; got {neighboring!r}")
    if neighboring is REPLACE_ONE and sampling in ("cyclic-poisson", "poisson"):
        raise ValueError(
            f"neighboring='replace_one' is not defined for sampling={sampling!r}: use add_remove or zero_out"
        )
    return neighboring


def _steps(sampling: str, n: int, b: int, epochs: float) -> tuple[int, int | None]:
    from dplens.accountant.dp_sgd import dp_sgd_steps

    steps = dp_sgd_steps(dataset_size=n, batch_size=b, epochs=epochs)  # validates N, B, E
    if sampling in _EPOCH_SAMPLERS:
        period = -(-n // b)
        return math.ceil(epochs * period - 1e-9), period
    return steps, None


def _strategy(mechanism: str, steps: int, bands: int | None, strategy: Any, params: dict) -> mf.Strategy | None:
    """The strategy of ``mechanism`` for ``steps`` steps (None: BandMF without its coefficients)."""
    import numpy as np

    if strategy is not None and mechanism not in ("bandmf", "matrix"):
        raise ValueError(
            f"strategy (a file) applies to mechanism 'bandmf' or 'matrix' only; got mechanism={mechanism!r}"
        )
    if isinstance(strategy, mf.Strategy):
        if strategy.steps != steps:
            raise ValueError(f"strategy must have T = {steps} steps of the run; got {strategy.steps}")
        return strategy
    if mechanism == "nu-ftrl":
        if params.get("nu") is None:
            raise ValueError("mechanism 'nu-ftrl' needs nu (--nu)")
        return mf.nu_ftrl_strategy(params["nu"], steps)
    if mechanism == "blt":
        if params.get("buf_decay") is None or params.get("output_scale") is None:
            raise ValueError("mechanism 'blt' needs buf_decay and output_scale (--blt-decay, --blt-scale)")
        return mf.blt_strategy(params["buf_decay"], params["output_scale"], steps)
    if mechanism == "bsr":
        if bands is None:
            raise ValueError("mechanism 'bsr' needs bands (--bands)")
        return mf.bsr_strategy(bands, steps)
    if strategy is None:
        if mechanism == "matrix":
            raise ValueError("mechanism 'matrix' needs a strategy (--strategy FILE.npy, a T x T matrix)")
        if bands is None:
            raise ValueError("mechanism 'bandmf' needs bands (--bands) or its strategy (--strategy FILE.npy)")
        return None
    array = np.asarray(strategy, dtype=float) if not isinstance(strategy, np.ndarray) else strategy
    if array.ndim == 1:
        built = mf.toeplitz_strategy(array, steps, name=mechanism)
    else:
        built = mf.dense_strategy(array, steps=steps, name=mechanism)
    if mechanism == "bandmf" and bands is not None and built.bands > bands:
        raise ValueError(f"bands={bands} does not match the strategy, which has {built.bands} bands")
    return built


def _run(**kw: Any) -> _Run:
    mechanism = _choice("mechanism", kw["mechanism"], MECHANISMS)
    sampling = _choice("sampling", kw["sampling"], SAMPLINGS)
    n, b, epochs = kw["dataset_size"], kw["batch_size"], kw["epochs"]
    steps, period = _steps(sampling, n, b, epochs)
    bands = kw.get("bands")
    if bands is not None:
        bands = mf._check_int("bands", bands)
        if bands > steps:
            raise ValueError(f"bands={bands} exceeds the number of steps T={steps}")
    if bands is None and sampling == "cyclic-poisson" and mechanism in ("nu-ftrl", "blt"):
        raise ValueError(
            f"sampling 'cyclic-poisson' needs bands (--bands: the number of groups b); got none for {mechanism}"
        )
    params = {key: kw.get(key) for key in ("nu", "buf_decay", "output_scale")}
    strategy = _strategy(mechanism, steps, bands, kw.get("strategy"), params)
    sep, most = kw.get("min_separation"), kw.get("max_participations")
    if sampling in ("min-sep", "b-min-sep"):
        if sep is None:
            raise ValueError(f"sampling={sampling!r} needs min_separation (--min-separation)")
        mf._check_int("min_separation", sep)
    elif sep is not None:
        raise ValueError(f"min_separation applies to sampling 'min-sep' or 'b-min-sep' only; got sampling={sampling!r}")
    if most is not None:
        if sampling not in ("min-sep", "b-min-sep"):
            raise ValueError(f"max_participations applies to 'min-sep' or 'b-min-sep' only; got sampling={sampling!r}")
        mf._check_int("max_participations", most)
    cap = kw.get("max_batch_size")
    if cap is not None and sampling != "cyclic-poisson":
        raise ValueError(f"max_batch_size applies to sampling 'cyclic-poisson' only; got sampling={sampling!r}")
    return _Run(
        mechanism=mechanism,
        sampling=sampling,
        strategy=strategy,
        bands=bands if bands is not None else (strategy.bands if strategy is not None else None),
        steps=steps,
        period=period,
        dataset_size=n,
        batch_size=b,
        epochs=float(epochs),
        relation=_relation(sampling, kw.get("neighboring")),
        min_separation=sep,
        max_participations=most,
        max_batch_size=cap,
    )


# --------------------------------------------------------------------------------------------
# Cyclic Poisson: the composition of the worst group's subsampled Gaussians
# --------------------------------------------------------------------------------------------


def _group_norms(run: _Run, bands: int):
    """Each group's participating column norms, sorted decreasingly, as the columns of an R × b array (zeros pad)."""
    import numpy as np

    rounds = -(-run.steps // bands)
    if run.strategy is None:  # banded Toeplitz, norm 1, coefficients unknown: full columns norm 1, the last unknown
        norms = np.ones(run.steps)
        tail = run.steps % bands
        unknown = tail != 0
    else:
        norms, unknown = run.strategy.column_norms(), False
    padded = np.zeros(rounds * bands)
    padded[: run.steps] = norms
    table = -np.sort(-padded.reshape(rounds, bands), axis=0)
    if unknown:  # the partial last round of groups 0 … tail − 1: norm in (0, 1], unknown
        table[-1, :tail] = np.nan
    return table


def _levels(values, *, up: bool) -> list[tuple[float, int]]:
    """(sensitivity, count) pairs of the positive ``values``; more than _MAX_LEVELS distinct ones are rounded up
    (``up``) or down into _MAX_LEVELS quantile buckets — an upper (lower) bound by monotonicity in the sensitivity."""
    import numpy as np

    v = np.sort(values[values > 0])[::-1]
    unique, counts = np.unique(v, return_counts=True)
    if unique.size > _MAX_LEVELS:
        edges = np.array_split(np.arange(unique.size), _MAX_LEVELS)
        return [(float(unique[idx[-1]] if up else unique[idx[0]]), int(counts[idx].sum())) for idx in edges if idx.size]
    return [(float(u), int(c)) for u, c in zip(unique, counts, strict=True)]


def _round_event(q: float, sigma: float, s: float, cap: int | None, group_size: int) -> ev.Event:
    if cap is None:
        return ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma / s))
    return ev.TruncatedSubsampledGaussian(
        dataset_size=group_size, sampling_rate=q, truncated_batch_size=cap, noise_multiplier=sigma / s
    )


def _cyclic_poisson(run: _Run, sigma: float, delta: float, tolerance: float) -> dict[str, Any]:
    """The certified bracket (or upper bound and lower-bound construction) of the cyclic-Poisson ledgers."""
    from dplens.accountant import pld, pld_engine

    upper, lower = _cyclic_ledgers(run, sigma)
    result = pld.pld_epsilon(upper, delta, neighboring=ADD_REMOVE, tolerance=tolerance)
    certified = lower is None and result.epsilon_lower is not None
    if certified:
        low, kind = result.epsilon_lower, "certified"
    elif lower:
        low = pld_engine.epsilon_bracket(lower, delta, neighboring=ADD_REMOVE, tolerance=tolerance).lower
        kind = "lower bound"
    else:
        low, kind = None, None
    q = run.batch_size * run.bands / run.dataset_size
    rounds = sum(count for _, count in upper)
    levels = [(round(sigma / _round_sigma(e), 9), c) for e, c in upper]
    details = (
        f"BandMF amplification (Choquette-Choo et al. 2023 Thm 4): {rounds} rounds of a Poisson-subsampled Gaussian "
        f"at q = {q:.6g}, per-round sensitivities {levels}"
    )
    return dict(
        epsilon=result.epsilon,
        lower=min(low, result.epsilon) if low is not None else None,
        kind=kind,
        certified=certified,
        sensitivity=max(s for s, _ in levels),
        rounds=rounds,
        q=q,
        details=details,
        participations=rounds,
    )


def _round_sigma(event: ev.Event) -> float:
    inner = getattr(event, "event", event)
    return float(inner.noise_multiplier)


# --------------------------------------------------------------------------------------------
# Unamplified schemas: exact μ-GDP of the Gaussian mechanism on C G
# --------------------------------------------------------------------------------------------


def _schema_sensitivity(run: _Run) -> mf.Sensitivity:
    if run.strategy is None:
        raise ValueError(
            f"sampling={run.sampling!r} needs the strategy's coefficients for its sensitivity (--strategy FILE.npy: "
            "the b coefficients of the banded Toeplitz strategy, or the T x T matrix)"
        )
    if run.sampling in ("min-sep", "b-min-sep"):
        return mf.minsep_sensitivity(
            run.strategy, min_separation=run.min_separation, max_participations=run.max_participations
        )
    if run.sampling in ("cyclic", "fixed-bins", "shuffle-once"):
        return mf.fixed_epoch_sensitivity(run.strategy, period=run.period)
    return mf.epoch_block_sensitivity(run.strategy, period=run.period)


def _unamplified(run: _Run, sigma: float, delta: float) -> dict[str, Any]:
    from dplens.accountant import conversions

    sens = _schema_sensitivity(run)
    factor = 2.0 if run.relation is REPLACE_ONE else 1.0
    value = factor * sens.value
    mu = value * (1 + mf.SENSITIVITY_MARGIN) / sigma
    epsilon = conversions.gdp_epsilon(mu, delta)
    processed = _post_processing_bound(run, sigma, delta)
    if processed is not None and processed[0] < epsilon:
        return _post_processed(run, sens, value, processed)
    certified = run.sampling in _DETERMINISTIC and sens.exact
    lower = conversions.gdp_epsilon(value * (1 - mf.SENSITIVITY_MARGIN) / sigma, delta) if certified else None
    what = "exact" if certified else "an upper bound (the sampler's randomness is not used)"
    details = (
        f"the Gaussian mechanism on C G: mu = sensitivity/sigma = {mu:.6g}-GDP (Dong, Roth, Su 2022 Cor. 2.13), "
        f"{what}; sensitivity {sens.method}"
    )
    return dict(
        epsilon=epsilon,
        lower=min(lower, epsilon) if lower is not None else None,
        kind="certified" if certified else None,
        certified=certified,
        sensitivity=value,
        sensitivity_exact=sens.exact,
        sensitivity_method=sens.method,
        rounds=None,
        q=None,
        details=details,
        participations=sens.participations,
    )


def _post_processing_bound(run: _Run, sigma: float, delta: float) -> tuple[float, float, Any] | None:
    """(ε, ‖C‖₂ bound, the DP-SGD result) of the post-processing bound, for the samplers dplens's DP-SGD accounts
    with amplification (fixed bins, balls-and-bins); None elsewhere.

    [D] The run is a post-processing of DP-SGD under the same sampler at noise σ' = σ/‖C‖₂: from W = X + σ'Z'
    (released step by step), Y = C W + Z'' with Z'' ~ N(0, σ²I − σ'²CCᵀ) drawn up front (PSD as σ'‖C‖₂ ≤ σ) has
    Y = CX + N, N ~ N(0, σ²I) independent across steps and of the past, which is the MF output law; C lower-triangular
    lets step t's gradient be chosen from Y_{<t}, a function of W_{<t} and Z''. So ε_MF ≤ ε_DP-SGD(σ')."""
    if run.sampling not in ("fixed-bins", "balls-and-bins") or run.strategy is None:
        return None
    from dplens.accountant import pld
    from dplens.accountant.dp_sgd import dp_sgd_epsilon

    norm = mf.operator_norm_bound(run.strategy)
    try:
        result = dp_sgd_epsilon(
            dataset_size=run.dataset_size,
            batch_size=run.batch_size,
            epochs=run.epochs,
            noise_multiplier=sigma / norm,
            delta=delta,
            method="pld",
            sampling=run.sampling,
            neighboring=run.relation,
        )
    except (OverflowError, pld.PldOutOfRangeError):  # out of the allocation PLD's range (tiny σ): the GDP bound stands
        return None
    return result.epsilon, norm, result


def _post_processed(run: _Run, sens: mf.Sensitivity, value: float, processed: tuple) -> dict[str, Any]:
    epsilon, norm, result = processed
    details = (
        f"post-processing of DP-SGD under {run.sampling} sampling at sigma/||C||_2 (||C||_2 <= {norm:.6g}): "
        f"{result.details}; below the unamplified mu-GDP bound (sensitivity {sens.method})"
    )
    return dict(
        epsilon=epsilon,
        lower=None,
        kind=None,
        certified=False,
        sensitivity=value,
        sensitivity_exact=sens.exact,
        sensitivity_method=sens.method,
        rounds=None,
        q=None,
        details=details,
        participations=sens.participations,
        post_processed=True,
    )


def _refuse_iid(run: _Run) -> None:
    bands = run.strategy.bands if run.strategy is not None else run.bands
    if bands != 1:
        raise ValueError(
            f"sampling='poisson' (i.i.d. at every step) on a strategy with {bands} bands needs MMCC (Choquette-Choo, "
            "Ganesh, Steinke, Thakurta, ICLR 2024), which dplens does not implement, and DP-SGD's epsilon is not "
            "valid for it: use cyclic-poisson (BandMF's sampler) or an unamplified schema (min-sep)"
        )


def _account(run: _Run, sigma: float, delta: float, tolerance: float) -> dict[str, Any]:
    if run.sampling == "poisson":
        _refuse_iid(run)
        run = _replace_bands(run, 1)
    if run.sampling in ("cyclic-poisson", "poisson"):
        out = _cyclic_poisson(run, sigma, delta, tolerance)
        # the largest column norm is 1 by the convention every strategy is validated (or scaled) to
        out.update(sensitivity_exact=True, sensitivity_method="largest participating column norm (1 by convention)")
        return out
    if run.sampling == "fixed-bins":
        return _fixed_bins(run, sigma, delta)
    return _unamplified(run, sigma, delta)


def _fixed_bins(run: _Run, sigma: float, delta: float) -> dict[str, Any]:
    """The smallest of the unamplified, post-processing and Rényi bounds (:mod:`mf_renyi`: C ≥ 0, add/remove or
    zero-out, whose pair is the example present at a uniform offset against absent); all three are valid."""
    from dplens.accountant.mf_renyi import fixed_bins_renyi

    out = _unamplified(run, sigma, delta)
    if run.relation is REPLACE_ONE:
        return out
    renyi = fixed_bins_renyi(run.strategy, period=run.period, noise_multiplier=sigma, delta=delta)
    if renyi is None:
        return out
    if renyi.epsilon >= out["epsilon"]:
        return dict(out, renyi=renyi.to_dict())
    details = (
        f"Renyi DP of the fixed-bins pair (remove direction exact at integer orders 2..{renyi.max_order} by a dynamic "
        f"programme over the {run.period} offsets, add direction by AM-GM; Canonne-Kamath-Steinke 2020 Prop. 12): "
        f"epsilon_remove = {renyi.epsilon_remove:.6g} (order {renyi.order_remove}), epsilon_add = "
        f"{renyi.epsilon_add:.6g} (order {renyi.order_add}); below the other valid bounds ({out['epsilon']:.6g})"
    )
    return dict(
        out,
        epsilon=renyi.epsilon,
        lower=None,
        kind=None,
        certified=False,
        details=details,
        post_processed=False,
        renyi=renyi.to_dict(),
        renyi_used=True,
    )


def _replace_bands(run: _Run, bands: int) -> _Run:
    import dataclasses

    return dataclasses.replace(run, bands=bands)


def _check_sigma(sigma: Any) -> float:
    if isinstance(sigma, bool) or not isinstance(sigma, int | float) or not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"noise_multiplier must be a finite number > 0; got {sigma!r}")
    return float(sigma)


def _privacy(run: _Run, sigma: float, delta: float, out: dict[str, Any], **extra: Any) -> MfPrivacy:
    notes = []
    if not out["certified"]:
        if out.get("renyi_used"):
            notes.append(
                "amplified by a Renyi bound of the fixed-bins pair (the example at a uniform offset against absent, "
                "the pair of Choquette-Choo et al. 2024, arXiv 2410.06266, for C >= 0, as the Monte Carlo estimate): "
                "a valid upper bound for that pair in both directions, not tight (no lower end is known)"
            )
        elif out.get("post_processed"):
            notes.append(
                f"amplified through DP-SGD's bound under {run.sampling} at sigma/||C||_2 (the run is its "
                "post-processing): a valid upper bound, not tight; a certified amplified bound for a matrix mechanism "
                "under this sampler is research"
            )
        elif run.sampling in ("fixed-bins", "balls-and-bins", "shuffle", "shuffle-once", "b-min-sep"):
            notes.append(
                f"unamplified: {run.sampling} sampling amplifies privacy, but a certified amplified bound for a "
                "matrix mechanism under it is research (Monte Carlo estimates exist); this epsilon is a valid upper "
                "bound only"
            )
        elif run.max_batch_size is not None:
            notes.append("truncated Poisson: each round's PLD (Ganesh 2025) is an upper bound, not attained")
        elif run.strategy is None and run.sampling == "cyclic-poisson" and run.steps % run.bands:
            notes.append("without --strategy the last partial round's column norm is unknown: upper bound")
    return MfPrivacy(
        epsilon=out["epsilon"],
        delta=delta,
        bound="certified" if out["certified"] else "upper",
        epsilon_lower=out["lower"],
        lower_bound=out["kind"],
        mechanism=run.mechanism,
        sampling=run.sampling,
        bands=run.bands,
        sensitivity=out["sensitivity"],
        sensitivity_exact=out["sensitivity_exact"],
        sensitivity_method=out["sensitivity_method"],
        noise_multiplier=sigma,
        steps=run.steps,
        participations=out["participations"],
        amplified=run.sampling in ("cyclic-poisson", "poisson")
        or bool(out.get("post_processed") or out.get("renyi_used")),
        neighboring=run.relation.value,
        dataset_size=run.dataset_size,
        batch_size=run.batch_size,
        epochs=run.epochs,
        details=out["details"],
        rounds=out["rounds"],
        sampling_rate=out["q"],
        strategy=run.strategy.to_dict() if run.strategy is not None else None,
        notes=tuple(notes),
        renyi=out.get("renyi"),
        **extra,
    )


def mf_epsilon(
    *,
    mechanism: str,
    sampling: str,
    dataset_size: int,
    batch_size: int,
    epochs: float,
    noise_multiplier: float,
    delta: float,
    bands: int | None = None,
    strategy: Any = None,
    nu: float | None = None,
    buf_decay: Any = None,
    output_scale: Any = None,
    min_separation: int | None = None,
    max_participations: int | None = None,
    max_batch_size: int | None = None,
    neighboring: Any = None,
    tolerance: float = 1e-3,
    monte_carlo: int | None = None,
    seed: int | None = None,
) -> MfPrivacy:
    """ε at ``delta`` of a matrix-factorisation training under ``sampling`` (see the module docstring), an upper
    bound, labelled ``certified`` where its bracket closes.

    Example (BandMF, 8 bands, cyclic Poisson, 10 epochs of 256 out of 60 000 at σ = 1: 2344 steps, 293 rounds):
        >>> run = mf_epsilon(mechanism="bandmf", sampling="cyclic-poisson", bands=8, dataset_size=60000,
        ...                  batch_size=256, epochs=10, noise_multiplier=1.0, delta=1e-6)
        >>> run.steps, run.rounds, run.bound, run.epsilon_lower <= run.epsilon
        (2344, 293, 'certified', True)
    """
    from dplens.accountant import conversions

    delta = conversions.check_delta(delta)
    sigma = _check_sigma(noise_multiplier)
    run = _run(
        mechanism=mechanism,
        sampling=sampling,
        dataset_size=dataset_size,
        batch_size=batch_size,
        epochs=epochs,
        bands=bands,
        strategy=strategy,
        nu=nu,
        buf_decay=buf_decay,
        output_scale=output_scale,
        min_separation=min_separation,
        max_participations=max_participations,
        max_batch_size=max_batch_size,
        neighboring=neighboring,
    )
    extra = _monte_carlo(run, sigma, delta, monte_carlo, seed) if monte_carlo is not None else {}
    return _privacy(run, sigma, delta, _account(run, sigma, delta, tolerance), **extra)


def fixed_bins_epsilon(
    strategy: mf.Strategy,
    *,
    period: int,
    noise_multiplier: float,
    delta: float,
    mechanism: str = "bandmf",
    monte_carlo: int | None = None,
    seed: int | None = None,
) -> MfPrivacy:
    """:func:`mf_epsilon` under fixed bins for a reader that knows the cycle (``period`` steps) and the strategy's T
    but not N and B (jax_privacy's ``BallsInBinsSampling``, opake's ``balls_in_bins``): fixed bins depend on t and T
    only, so the run is stated as N = t examples in batches of one (the output's ``dataset_size``/``batch_size``)."""
    period = mf._check_int("period", period)
    return mf_epsilon(
        mechanism=mechanism,
        sampling="fixed-bins",
        strategy=strategy,
        dataset_size=period,
        batch_size=1,
        epochs=strategy.steps / period,
        noise_multiplier=noise_multiplier,
        delta=delta,
        monte_carlo=monte_carlo,
        seed=seed,
    )


def _monte_carlo(run: _Run, sigma: float, delta: float, samples: int, seed: int | None) -> dict[str, Any]:
    """The verified Monte Carlo estimate beside the bound (fixed bins, b-min-sep; :mod:`mf_monte_carlo`)."""
    from dplens.accountant import mf_monte_carlo as mc

    if run.sampling not in ("fixed-bins", "b-min-sep"):
        raise ValueError(
            f"monte_carlo applies to sampling 'fixed-bins' or 'b-min-sep' only; got sampling={run.sampling!r}"
        )
    if run.relation is REPLACE_ONE:
        raise ValueError("monte_carlo is not offered under neighboring='replace_one' (its pair is add/remove)")
    if run.strategy is None:
        raise ValueError("monte_carlo needs the strategy's coefficients (--strategy FILE.npy)")
    if run.sampling == "fixed-bins":
        estimate = mc.fixed_bins_monte_carlo(
            run.strategy, period=run.period, noise_multiplier=sigma, delta=delta, samples=samples, seed=seed
        )
    else:
        if run.max_participations is not None:
            raise ValueError(
                "monte_carlo models b-min-sep sampling without a cap on participations (jax_privacy's "
                f"BMinSepSampling); got max_participations={run.max_participations}"
            )
        rate = mc.b_min_sep_rate(
            dataset_size=run.dataset_size, batch_size=run.batch_size, min_separation=run.min_separation
        )
        estimate = mc.b_min_sep_monte_carlo(
            run.strategy,
            min_separation=run.min_separation,
            sampling_rate=rate,
            noise_multiplier=sigma,
            delta=delta,
            samples=samples,
            seed=seed,
        )
    return {"epsilon_monte_carlo": estimate.epsilon, "monte_carlo": estimate.to_dict()}


def mf_noise_multiplier(*, target_epsilon: float, delta: float, tolerance: float = 1e-3, **kwargs: Any) -> MfPrivacy:
    """The smallest σ (to a relative 1e-4) whose training's ε (the upper bound of :func:`mf_epsilon`) is ≤
    ``target_epsilon``: a bisection in log σ that keeps a safe end (the returned σ was accounted, never overshoots);
    in closed form for the unamplified schemas (σ = sensitivity/μ*(ε, δ), rounded up and checked)."""
    from dplens.accountant import conversions, pld

    target = conversions.check_epsilon(target_epsilon, name="target_epsilon")
    if target == 0:
        raise ValueError(f"target_epsilon must be > 0; got {target_epsilon!r}")
    delta = conversions.check_delta(delta)
    run = _run(**kwargs)

    def epsilon_of(sigma: float) -> float:
        try:
            return _account(run, sigma, delta, tolerance)["epsilon"]
        except pld.PldOutOfRangeError:
            return math.inf

    if run.sampling not in ("cyclic-poisson", "poisson"):
        probe = _account(run, 1.0, delta, tolerance)
        sigma = probe["sensitivity"] * (1 + mf.SENSITIVITY_MARGIN) / conversions.gdp_mu(target, delta) * (1 + 1e-9)
        while epsilon_of(sigma) > target:  # pragma: no cover - the margin suffices
            sigma *= 1 + 1e-9
        if run.sampling in ("fixed-bins", "balls-and-bins") and run.strategy is not None:
            # the reported ε is the smaller of the μ-GDP and the post-processing bounds (both decrease in σ): the
            # closed form is a safe end, the bisection finds the smallest σ on the reported number
            sigma = _bisect(epsilon_of, target, high=sigma)
    else:
        sigma = _bisect(epsilon_of, target)
    out = _account(run, sigma, delta, tolerance)
    if out["epsilon"] > target:  # pragma: no cover - a last line of defence
        raise AssertionError(f"calibration overshot: epsilon={out['epsilon']!r} > target={target!r}")
    return _privacy(run, sigma, delta, out, target_epsilon=target)


def _bisect(epsilon_of, target: float, low: float = 0.05, high: float = 1000.0) -> float:
    if epsilon_of(high) > target:
        raise ValueError(
            f"target_epsilon={target!r} is unreachable for noise_multiplier <= {high!r}: epsilon there is "
            f"{epsilon_of(high)!r}"
        )
    if epsilon_of(low) <= target:
        return low
    while high / low > 1 + 1e-4:
        mid = math.sqrt(low * high)
        if epsilon_of(mid) <= target:
            high = mid
        else:
            low = mid
    return high


# --------------------------------------------------------------------------------------------
# The event: an MF training as the accountant, specs, the ledger and the report see it
# --------------------------------------------------------------------------------------------


def _tuple(value: Any, name: str) -> tuple[float, ...] | None:
    if value is None:
        return None
    try:
        return tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a list of numbers; got {value!r}") from None


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class MfTraining(ev.Event):
    """A matrix-factorisation training under its sampler (see the module docstring), as an event of the core.

    ``coefficients`` (optional) is the first column of a Toeplitz strategy of largest column norm 1 (BandMF's b
    coefficients, or any Toeplitz C); dense strategies go through :func:`mf_epsilon`. Unamplified schemas are exactly
    μ-GDP as accounted (:meth:`gdp_mu`); cyclic Poisson is its ledger of subsampled Gaussians (:meth:`standard_event`),
    with :meth:`lower_bound_events` where that ledger's pair is not attained.

    Example:
        >>> from dplens.accountant.compose import Accountant
        >>> run = MfTraining(mechanism="bandmf", bands=8, sampling="cyclic-poisson", dataset_size=60000,
        ...                  batch_size=256, epochs=10, noise_multiplier=1.0)
        >>> result = Accountant().compose(run).epsilon_result(1e-6, method="pld")
        >>> round(result.epsilon, 3), result.epsilon_lower <= result.epsilon
        (4.403, True)
    """

    mechanism: str
    sampling: str
    dataset_size: int
    batch_size: int
    epochs: float
    noise_multiplier: float
    bands: int | None = None
    coefficients: tuple[float, ...] | None = None
    nu: float | None = None
    buf_decay: tuple[float, ...] | None = None
    output_scale: tuple[float, ...] | None = None
    min_separation: int | None = None
    max_participations: int | None = None
    max_batch_size: int | None = None
    neighboring: ev.NeighboringRelation | None = None

    def __post_init__(self) -> None:
        for name in ("coefficients", "buf_decay", "output_scale"):
            object.__setattr__(self, name, _tuple(getattr(self, name), name))
        object.__setattr__(self, "noise_multiplier", _check_sigma(self.noise_multiplier))
        run = self.run()  # validates every parameter
        object.__setattr__(self, "mechanism", run.mechanism)
        object.__setattr__(self, "sampling", run.sampling)
        object.__setattr__(self, "neighboring", run.relation)
        if run.sampling == "poisson":
            _refuse_iid(run)

    def run(self) -> _Run:
        return _run_cached(self)

    def _cyclic(self) -> bool:
        return self.sampling in ("cyclic-poisson", "poisson")

    def gdp_mu(self) -> float | None:
        """μ of the unamplified schemas (exact μ-GDP of the Gaussian mechanism as accounted); None under sampling."""
        if self._cyclic():
            return None
        run = self.run()
        factor = 2.0 if run.relation is REPLACE_ONE else 1.0
        return factor * _schema_sensitivity(run).value * (1 + mf.SENSITIVITY_MARGIN) / self.noise_multiplier

    def _ledgers(self):
        run = self.run()
        if run.sampling == "poisson":
            run = _replace_bands(run, 1)
        return _cyclic_ledgers(run, self.noise_multiplier)

    def standard_event(self) -> ev.Event | None:
        """Cyclic Poisson: the composition of the worst group's (envelope's) rounds; None otherwise (μ-GDP)."""
        if not self._cyclic():
            return None
        return _as_event(self._ledgers()[0])

    def fixed_bins_rdp(self) -> FixedBinsRdp | None:
        """Fixed bins on a non-negative strategy (add/remove or zero-out; few enough bands for order 2 within
        :data:`~dplens.accountant.mf_renyi.STATE_BUDGET`): the per-order Rényi bounds of the fixed-bins pair in each
        direction (:class:`~dplens.accountant.mf_renyi.FixedBinsRdp`, remove orders within
        :data:`~dplens.accountant.mf_renyi.CURVE_BUDGET`), computed once per event and cached; None elsewhere (the
        unamplified μ-GDP curve stands). The RDP curve and the profile's δ(ε) are made of them; the profile's ε(δ) is
        :func:`mf_epsilon`'s Rényi bound itself (on the full order budget)."""
        return _fixed_bins_bounds(self)[0] if _amplified_fixed_bins(self) else None

    def lower_bound_events(self) -> tuple[ev.Event, ...] | None:
        """None where the accounted pair is attained; else the attained constructions (possibly none: ())."""
        run = self.run()
        if not self._cyclic():
            exact = run.sampling in _DETERMINISTIC and _schema_sensitivity(run).exact
            return None if exact else ()
        _, lower = self._ledgers()
        return None if lower is None else ((_as_event(lower),) if lower else ())


def _as_event(entries: list[tuple[ev.Event, int]]) -> ev.Event:
    parts = tuple(e if c == 1 else ev.SelfComposed(event=e, count=c) for e, c in entries)
    return parts[0] if len(parts) == 1 else ev.Composed(events=parts)


def _cyclic_ledgers(run: _Run, sigma: float):
    """(upper ledger, lower): lower None when the upper pair is attained, else the lower ledger ([] when none)."""

    bands = run.bands
    if run.strategy is not None and run.strategy.bands > bands:
        raise ValueError(
            f"bands={bands} does not match the strategy, which has {run.strategy.bands} bands: cyclic-poisson "
            "amplification needs a strategy with at most --bands bands"
        )
    q = run.batch_size * bands / run.dataset_size
    if q > 1:
        raise ValueError(
            f"bands={bands} exceeds the number of groups the data allows: sampling probability B*b/N = "
            f"{run.batch_size}*{bands}/{run.dataset_size} = {q:.6g} > 1"
        )
    group_size = -(-run.dataset_size // bands)
    return _ledgers_from(_group_norms(run, bands), q, sigma, run.max_batch_size, group_size)


def _ledgers_from(table, q: float, sigma: float, cap: int | None, group_size: int):
    """The cyclic-Poisson ledgers of a table of group norms (see :func:`_cyclic_ledgers`)."""
    import numpy as np

    bands = table.shape[1]
    envelope = np.nan_to_num(table, nan=1.0).max(axis=1)
    attained = any(np.all(np.abs(table[:, j] - envelope) <= 1e-12 * envelope.max()) for j in range(bands))
    levels = _levels(envelope, up=True)
    upper = [(_round_event(q, sigma, s, cap, group_size), c) for s, c in levels]
    if attained and len(levels) == len(np.unique(envelope[envelope > 0])) and cap is None:
        return upper, None
    known = np.nan_to_num(table, nan=0.0)
    group = int(np.argmax((known * known).sum(axis=0)))
    q_low = q
    if cap is not None:
        from scipy.special import bdtr

        q_low = q * float(bdtr(cap - 1, group_size - 1, q))
    low_levels = _levels(known[:, group], up=False) if q_low > 0 else []
    lower = [
        (ev.PoissonSampled(sampling_rate=q_low, event=ev.Gaussian(noise_multiplier=sigma / s)), c)
        for s, c in low_levels
    ]
    return upper, lower


@functools.lru_cache(maxsize=128)
def _run_cached(event: MfTraining) -> _Run:
    return _run(
        mechanism=event.mechanism,
        sampling=event.sampling,
        dataset_size=event.dataset_size,
        batch_size=event.batch_size,
        epochs=event.epochs,
        bands=event.bands,
        strategy=None if event.coefficients is None else list(event.coefficients),
        nu=event.nu,
        buf_decay=event.buf_decay,
        output_scale=event.output_scale,
        min_separation=event.min_separation,
        max_participations=event.max_participations,
        max_batch_size=event.max_batch_size,
        neighboring=event.neighboring,
    )


@functools.lru_cache(maxsize=128)
def _amplified_fixed_bins(event: MfTraining) -> bool:
    """Whether the fixed-bins Rényi bound applies to ``event`` (cheap: the dynamic programme is not run)."""
    from dplens.accountant import mf_renyi

    if event.sampling != "fixed-bins":
        return False
    run = event.run()
    if run.relation is REPLACE_ONE or run.strategy is None:  # replace-one: not the pair the bound is for
        return False
    return mf_renyi.renyi_applies(run.strategy, period=run.period)


@functools.lru_cache(maxsize=32)
def _fixed_bins_bounds(event: MfTraining):
    """(the per-order Rényi bounds, the unamplified μ) of a fixed-bins event the bound applies to; cached, since the
    ledger and the routes re-read the curve (the programme costs up to about a second)."""
    from dplens.accountant import mf_renyi

    run = event.run()
    strategy, period, sigma = run.strategy, run.period, event.noise_multiplier
    # the curve's own budget (cheap, re-read at many σ by calibration); the full one only where that fits no order
    bounds = mf_renyi.fixed_bins_rdp(strategy, period=period, noise_multiplier=sigma) or mf_renyi.fixed_bins_rdp(
        strategy, period=period, noise_multiplier=sigma, budget=mf_renyi.STATE_BUDGET
    )
    return bounds, event.gdp_mu()


def _fixed_bins_curve(alpha, *, event: MfTraining):
    """The amplified RDP curve of a fixed-bins event at ``alpha``: at each integer order the larger of the two
    directions' bounds (an RDP bound of the relation needs both), never above the unamplified μ²α/2
    (:func:`~dplens.accountant.mf_renyi.staircase_rdp`). Evaluated lazily: composing the event costs nothing."""
    from dplens.accountant import mf_renyi

    bounds, mu = _fixed_bins_bounds(event)
    return mf_renyi.staircase_rdp(alpha, values=bounds.both, mu=mu)


def _fixed_bins_deltas(epsilons, *, event: MfTraining, direction: str):
    """δ(ε) of one direction: the smaller of the exact unamplified μ-GDP δ and the Rényi bound's (CKS 2020 Prop. 12
    at the best integer order), rounded up."""
    import numpy as np

    from dplens.accountant import conversions

    bounds, mu = _fixed_bins_bounds(event)
    eps = np.asarray(epsilons, dtype=float)
    renyi = np.exp(np.minimum(bounds.log_delta(eps.ravel(), direction), 0.0)) * (1 + 1e-12)
    gdp = np.asarray(conversions.gdp_delta(mu, eps.ravel()), dtype=float)
    return np.minimum(np.minimum(gdp, renyi), 1.0).reshape(eps.shape)


def _fixed_bins_epsilon(delta: float, *, event: MfTraining) -> float:
    """ε(δ): the smaller of the unamplified μ-GDP ε and :func:`~dplens.accountant.mf_renyi.fixed_bins_renyi`'s (the
    larger of the two directions' ε, each at its own best order, on the full order budget: :func:`mf_epsilon`'s
    number); every one an upper bound."""
    from dplens.accountant import conversions

    delta = conversions.check_delta(delta, allow_zero=True)
    unamplified = conversions.gdp_epsilon(_fixed_bins_bounds(event)[1], delta)
    if delta == 0:
        return unamplified
    renyi = _fixed_bins_renyi_at(event, delta)
    return unamplified if renyi is None else min(unamplified, renyi.epsilon)


@functools.lru_cache(maxsize=64)
def _fixed_bins_renyi_at(event: MfTraining, delta: float):
    from dplens.accountant.mf_renyi import fixed_bins_renyi

    run = event.run()
    return fixed_bins_renyi(run.strategy, period=run.period, noise_multiplier=event.noise_multiplier, delta=delta)


def _fixed_bins_trade_off(alpha, *, event: MfTraining):
    """The pointwise max of two valid lower bounds on the trade-off curve: G_μ (unamplified) and the envelope of the
    amplified profile (Dong, Roth, Su 2022 Prop. 2.12); the true curve lies above both."""
    import numpy as np

    from dplens.accountant import conversions

    _, mu = _fixed_bins_bounds(event)

    def deltas(eps):
        return np.maximum(
            _fixed_bins_deltas(eps, event=event, direction="remove"),
            _fixed_bins_deltas(eps, event=event, direction="add"),
        )

    return np.maximum(conversions.gaussian_trade_off(mu, alpha), conversions.profile_to_trade_off(deltas, alpha))


def _register_interpreters() -> None:
    from dplens.accountant import pld, rdp
    from dplens.accountant.curves import Gdp, PrivacyProfile, RdpCurve

    @rdp.rdp_curve.register(MfTraining)
    def _(event: MfTraining) -> RdpCurve:
        mu = event.gdp_mu()
        if mu is not None and _amplified_fixed_bins(event):
            return RdpCurve.from_function(
                functools.partial(_fixed_bins_curve, event=event),
                description=f"{event.mechanism} under fixed-bins sampling, amplified: the Renyi bound of the "
                "fixed-bins pair (max of both directions at each integer order, D_alpha <= D_ceil(alpha) between "
                f"them), at most the unamplified {mu:.6g}-GDP",
            )
        if mu is not None:
            unamplified = Gdp(mu=mu).rdp_curve()
            return RdpCurve.from_function(
                unamplified.terms[0][1], description=f"{event.mechanism} under {event.sampling}: {_gdp_kind(event)}"
            )
        return rdp.rdp_curve(event.standard_event())

    @pld.privacy_profile.register(MfTraining)
    def _(event: MfTraining) -> PrivacyProfile:
        mu = event.gdp_mu()
        if mu is not None and _amplified_fixed_bins(event):
            return PrivacyProfile(
                remove=functools.partial(_fixed_bins_deltas, event=event, direction="remove"),
                add=functools.partial(_fixed_bins_deltas, event=event, direction="add"),
                epsilon_for_delta=functools.partial(_fixed_bins_epsilon, event=event),
                description=f"{event.mechanism} under fixed-bins sampling, amplified: the Renyi bound of the "
                "fixed-bins pair per direction (remove exact at integer orders, add by AM-GM; Canonne-Kamath-Steinke "
                f"2020 Prop. 12), at most the unamplified {mu:.6g}-GDP: an upper bound, not exact",
                trade_off_function=functools.partial(_fixed_bins_trade_off, event=event),
            )
        profile = pld.privacy_profile(ev.Gaussian(noise_multiplier=1 / mu) if mu else event.standard_event())
        what = f"{_gdp_kind(event)}: {profile.description}" if mu else profile.description
        return PrivacyProfile(
            remove=profile.remove,
            add=profile.add,
            epsilon_for_delta=profile.epsilon_for_delta,
            description=f"{event.mechanism} under {event.sampling} sampling: {what}",
            discretisation=profile.discretisation,
            trade_off_function=profile.trade_off_function,
        )


def _gdp_kind(event: MfTraining) -> str:
    """What the μ-GDP bound of an unamplified schema is: exact, or an upper bound that ignores the sampler."""
    if event.lower_bound_events() is None:
        return "exact mu-GDP (no sampling to amplify)"
    if event.sampling in _DETERMINISTIC:
        return "mu-GDP with an upper bound on the sensitivity: an upper bound"
    return "unamplified mu-GDP (the sampler's randomness is not used): an upper bound"


_register_interpreters()


def bandmf_epsilon(
    *,
    iterations: int,
    sampling_prob: float,
    noise_multiplier: float,
    delta: float,
    strategy: Any = None,
    num_bands: int | None = None,
    column_normalize: bool = False,
    truncated_batch_size: int | None = None,
    num_examples: int | None = None,
    tolerance: float = 1e-3,
) -> MfPrivacy:
    """ε of BandMF under cyclic Poisson in jax_privacy's own terms (``BandMFExecutionPlanConfig``): ``iterations``,
    the Toeplitz ``strategy`` coefficients (b = their number; divided by their norm, the largest column norm, as
    jax_privacy's plan does), the per-group ``sampling_prob``, σ relative to that norm, optionally
    ``column_normalize`` (every column scaled to norm 1: the last partial rounds too, so the pair is attained) and
    truncation (``truncated_batch_size``; the largest group, ⌈num_examples / b⌉, where jax_privacy's event takes
    ``num_examples // b``).

    Example (jax_privacy's docstring configuration, 4 bands, 1000 iterations at q = 0.4, σ = 3):
        >>> r = bandmf_epsilon(iterations=1000, sampling_prob=0.4, noise_multiplier=3.0, delta=1e-5,
        ...                    strategy=[1.0, 0.5, 0.2, 0.1])
        >>> r.rounds, r.bound
        (250, 'certified')
    """
    import numpy as np

    from dplens.accountant import conversions, pld, pld_engine

    delta = conversions.check_delta(delta)
    sigma = _check_sigma(noise_multiplier)
    steps, bands, built, group_size = _bandmf_inputs(
        iterations, sampling_prob, strategy, num_bands, truncated_batch_size, num_examples
    )
    cap = truncated_batch_size
    run = _Run(
        mechanism="bandmf",
        sampling="cyclic-poisson",
        strategy=None if column_normalize else built,
        bands=bands,
        steps=steps,
        period=None,
        dataset_size=num_examples or 0,
        batch_size=0,
        epochs=0.0,
        relation=ADD_REMOVE,
        min_separation=None,
        max_participations=None,
        max_batch_size=cap,
    )
    table = _group_norms(run, bands)
    if column_normalize:
        table = np.where(np.isnan(table), 1.0, table)
    upper, lower = _ledgers_from(table, float(sampling_prob), sigma, cap, group_size)
    result = pld.pld_epsilon(upper, delta, neighboring=ADD_REMOVE, tolerance=tolerance)
    certified = lower is None and result.epsilon_lower is not None
    if certified:
        low, kind = result.epsilon_lower, "certified"
    elif lower:
        low, kind = (
            pld_engine.epsilon_bracket(lower, delta, neighboring=ADD_REMOVE, tolerance=tolerance).lower,
            "lower bound",
        )
    else:
        low, kind = None, None
    rounds = sum(count for _, count in upper)
    return MfPrivacy(
        epsilon=result.epsilon,
        delta=delta,
        bound="certified" if certified else "upper",
        epsilon_lower=None if low is None else min(low, result.epsilon),
        lower_bound=kind,
        mechanism="bandmf",
        sampling="cyclic-poisson",
        bands=bands,
        sensitivity=max(sigma / _round_sigma(e) for e, _ in upper),
        sensitivity_exact=True,
        sensitivity_method="largest participating column norm (1 by convention)",
        noise_multiplier=sigma,
        steps=steps,
        participations=rounds,
        amplified=True,
        neighboring=ADD_REMOVE.value,
        dataset_size=num_examples,
        batch_size=None,
        epochs=None,
        details=f"BandMF amplification (Choquette-Choo et al. 2023 Thm 4), jax_privacy's parameters: {rounds} rounds "
        f"at sampling_prob = {sampling_prob:g}",
        rounds=rounds,
        sampling_rate=float(sampling_prob),
        strategy=None if built is None else built.to_dict(),
    )


def _bandmf_inputs(iterations, sampling_prob, strategy, num_bands, cap, num_examples):
    """(T, b, the strategy scaled to norm 1 or None, the largest group's size) of :func:`bandmf_epsilon`, validated."""
    import numpy as np

    steps = mf._check_int("iterations", iterations)
    if isinstance(sampling_prob, bool) or not isinstance(sampling_prob, int | float) or not 0 < sampling_prob <= 1:
        raise ValueError(f"sampling_prob must be a number in (0, 1]; got {sampling_prob!r}")
    if strategy is None:
        if num_bands is None:
            raise ValueError("bandmf_epsilon needs strategy (the Toeplitz coefficients) or num_bands")
        bands, built = mf._check_int("num_bands", num_bands), None
    else:
        built = mf.toeplitz_strategy(strategy, steps, name="bandmf", normalize=True)
        bands = len(np.asarray(strategy, dtype=float).ravel())
        if num_bands is not None and num_bands != bands:
            raise ValueError(f"num_bands={num_bands} does not match the strategy's {bands} coefficients")
    if bands > steps:
        raise ValueError(f"the strategy's {bands} bands exceed iterations={steps}")
    if cap is not None and num_examples is None:
        raise ValueError("truncated_batch_size needs num_examples (jax_privacy's groups of num_examples // bands)")
    group_size = max(1, -(-(num_examples or bands) // bands))  # the largest group (jax_privacy takes the floor)
    return steps, bands, built, group_size
