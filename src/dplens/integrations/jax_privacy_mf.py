"""Read a jax_privacy 2.0 BandMF training configuration into dplens's accounting (no JAX is imported here).

``jax_privacy.experimental.execution_plan.BandMFExecutionPlanConfig`` describes BandMF under cyclic Poisson sampling:
``iterations``, the Toeplitz ``strategy`` coefficients (b = their number), the per-group ``sampling_prob``, the
``noise_multiplier`` (relative to the strategy's largest column norm), ``truncated_batch_size`` / ``num_examples``,
``column_normalize`` and its accountant's neighbouring relation. :func:`bandmf_config_epsilon` reads those fields and
returns :func:`dplens.accountant.mf_accounting.bandmf_epsilon`'s labelled answer; what dplens cannot account (a
replace-one relation, a config whose σ is left to jax_privacy's calibration without being given) is refused in one
line.
"""

from __future__ import annotations

from typing import Any

__all__ = ["bandmf_config_epsilon"]

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
