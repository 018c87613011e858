"""Read a jax_privacy 2.0 BandMF training configuration into dplens's accounting (no JAX is imported here).

``jax_privacy.experimental.execution_plan.BandMFExecutionPlanConfig`` describes BandMF under cyclic Poisson sampling:
``iterations``, the Toeplitz ``strategy`` coefficients (b = their number), the per-group ``sampling_prob``, the
``noise_multiplier`` (relative to the strategy's largest column norm), ``truncated_batch_size`` / ``num_examples``,
``column_normalize`` and its accountant's neighbouring relation. :func:`bandmf_config_epsilon` reads those fields and
returns :func:`dplens.accountant.mf_accounting.bandmf_epsilon`'s labelled answer; what dplens cannot account (a
replace-one relation, a config whose σ is left to jax_privacy's calibration without being given) is refused in one
line.

:func:`batch_selection_mf_epsilon` reads a jax_privacy 2.0 batch-selection strategy (``CyclicPoissonSampling``,
``BallsInBinsSampling``, ``BMinSepSampling``) with the Toeplitz coefficients of the noise the training used: the
sampler's own parameters, never a DP-SGD stand-in.
"""

from __future__ import annotations

from typing import Any

__all__ = ["bandmf_config_epsilon", "batch_selection_mf_epsilon"]

_FIELDS = ("iterations", "strategy", "sampling_prob", "truncated_batch_size", "num_examples", "column_normalize")


def bandmf_config_epsilon(
    config: Any, *, delta: float | None = None, noise_multiplier: float | None = None, tolerance: float = 1e-3
):
    """ε of the training a ``BandMFExecutionPlanConfig`` describes, at ``delta`` (default: the config's).

    ``noise_multiplier`` overrides the config's (give the plan's calibrated value when the config was set by
    (ε, δ) only: ``config.plan`` would import JAX and calibrate with jax_privacy's accountant).
    """
    from dplens.accountant.mf_accounting import bandmf_epsilon

    try:
        fields = {name: getattr(config, name) for name in _FIELDS}
        relation = getattr(getattr(config, "accountant", None), "neighboring_relation", None)
        given_sigma, given_delta = config.noise_multiplier, config.delta
    except AttributeError as err:
        raise ValueError(
            f"config must be a jax_privacy BandMFExecutionPlanConfig; got {type(config).__name__} ({err})"
        ) from None
    if relation is not None and getattr(relation, "name", str(relation)) == "REPLACE_ONE":
        raise ValueError(
            "config's accountant uses REPLACE_ONE, which BandMF's cyclic-Poisson accounting does not cover"
        )
    sigma = noise_multiplier if noise_multiplier is not None else given_sigma
    if sigma is None:
        raise ValueError(
            "config.noise_multiplier is None (jax_privacy calibrates it from epsilon/delta): pass noise_multiplier= "
            "the plan's value"
        )
    delta = delta if delta is not None else given_delta
    if delta is None:
        raise ValueError("delta is needed: the config gives none")
    import numpy as np

    return bandmf_epsilon(
        iterations=int(fields["iterations"]),
        sampling_prob=float(fields["sampling_prob"]),
        noise_multiplier=float(sigma),
        delta=float(delta),
        strategy=np.asarray(fields["strategy"], dtype=float),
        column_normalize=bool(fields["column_normalize"]),
        truncated_batch_size=fields["truncated_batch_size"],
        num_examples=fields["num_examples"],
        tolerance=tolerance,
    )


def batch_selection_mf_epsilon(
    batch_selection: Any,
    *,
    strategy: Any,
    noise_multiplier: float,
    delta: float,
    dataset_size: int | None = None,
    monte_carlo: int | None = None,
    seed: int | None = None,
):
    """ε of a matrix-factorisation training whose examples a jax_privacy 2.0 ``batch_selection`` strategy chose, for
    the lower-triangular Toeplitz ``strategy`` coefficients (scaled to norm 1: σ is relative to them, jax_privacy's
    convention):

    - ``CyclicPoissonSampling(sampling_prob=q, iterations=T, cycle_length=b, truncated_batch_size)``: cyclic Poisson
      over b groups (:func:`~dplens.accountant.mf_accounting.bandmf_epsilon`; the coefficients at most b bands;
      truncation needs ``dataset_size``);
    - ``BallsInBinsSampling(iterations=T, cycle_length=t)``: fixed bins in cycles of t steps (dplens's
      ``fixed-bins``);
    - ``BMinSepSampling(sampling_prob=p, iterations=T, min_sep=b, warm_start)``: the valid unamplified bound for
      participations b apart, and with ``monte_carlo`` the verified estimate at p (warm start, no truncation: the
      process dplens samples).

    ``monte_carlo``: samples per direction of the estimate beside the bound (balls-in-bins and b-min-sep)."""
    from dplens.accountant import matrix_factorization as mf
    from dplens.accountant.mf_accounting import bandmf_epsilon, fixed_bins_epsilon

    kind = type(batch_selection).__name__
    try:
        steps = int(batch_selection.iterations)
    except AttributeError:
        raise ValueError(f"batch_selection must be a jax_privacy batch-selection strategy; got {kind}") from None
    if kind == "CyclicPoissonSampling":
        if monte_carlo is not None:
            raise ValueError("monte_carlo does not apply to CyclicPoissonSampling: its bound is certified")
        groups = int(batch_selection.cycle_length)
        built = mf.toeplitz_strategy(strategy, steps, normalize=False)
        if built.bands > groups:
            raise ValueError(
                f"the strategy has {built.bands} bands, more than the cycle_length={groups} groups of "
                "CyclicPoissonSampling: participations' columns would share rows"
            )
        return bandmf_epsilon(
            iterations=steps,
            sampling_prob=float(batch_selection.sampling_prob),
            noise_multiplier=noise_multiplier,
            delta=delta,
            strategy=list(built.coefficients) + [0.0] * (groups - built.bands),
            truncated_batch_size=batch_selection.truncated_batch_size,
            num_examples=dataset_size,
        )
    built = mf.toeplitz_strategy(strategy, steps, normalize=False)
    if kind == "BallsInBinsSampling":
        return fixed_bins_epsilon(
            built,
            period=int(batch_selection.cycle_length),
            noise_multiplier=noise_multiplier,
            delta=delta,
            monte_carlo=monte_carlo,
            seed=seed,
        )
    if kind == "BMinSepSampling":
        return _b_min_sep(batch_selection, built, steps, noise_multiplier, delta, monte_carlo, seed)
    raise ValueError(
        f"batch_selection must be CyclicPoissonSampling, BallsInBinsSampling or BMinSepSampling; got {kind}"
    )


def _b_min_sep(batch_selection: Any, built: Any, steps: int, sigma: float, delta: float, samples, seed):
    """(:func:`batch_selection_mf_epsilon`) the unamplified min-sep bound, the estimate at jax_privacy's own p."""
    import dataclasses

    from dplens.accountant import mf_monte_carlo as mc
    from dplens.accountant.mf_accounting import mf_epsilon

    separation = int(batch_selection.min_sep)
    result = mf_epsilon(
        mechanism="bandmf",
        sampling="b-min-sep",
        min_separation=separation,
        strategy=built,
        dataset_size=steps,  # the bound depends on T, b and C only (p does not enter it)
        batch_size=1,
        epochs=1,
        noise_multiplier=sigma,
        delta=delta,
    )
    if samples is None:
        return result
    if not getattr(batch_selection, "warm_start", True) or batch_selection.truncated_batch_size is not None:
        raise ValueError(
            "monte_carlo models BMinSepSampling with warm_start=True and no truncated_batch_size (the process "
            "dplens samples); the unamplified bound holds without it"
        )
    estimate = mc.b_min_sep_monte_carlo(
        built,
        min_separation=separation,
        sampling_rate=float(batch_selection.sampling_prob),
        noise_multiplier=sigma,
        delta=delta,
        samples=samples,
        seed=seed,
    )
    return dataclasses.replace(result, epsilon_monte_carlo=estimate.epsilon, monte_carlo=estimate.to_dict())
