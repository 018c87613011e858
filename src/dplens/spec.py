"""TOML / JSON specs → events, validated with clear errors.

A spec is a list of ``[[mechanism]]`` tables composed in order, an optional ``[claim]`` (the guarantee
under test in an audit: ``epsilon``, ``delta``) and an optional top-level ``neighboring``. Each mechanism
table has a ``type`` and that type's parameters; ``count`` / ``steps`` repeat it. Unknown keys, missing
keys and bad values raise ``ValueError`` naming the key and echoing the value. An optional ``[deployment]`` table
says what only the deployment's author knows, for a DP Deployments Registry record and the report's NIST SP 800-226
section (:mod:`dplens.registry.deployment`; its values are checked against the registry's enumerations).

Plug-ins (:mod:`dplens.accountant.plugins`) add types: their accounting module exports
``SPEC_TYPES = {"name": builder}``, ``builder(table) -> Event`` (or ``(Event, count)``), imported on first use.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant
from dplens.registry.deployment import Deployment, parse_deployment

__all__ = [
    "SUPPORTED_RANGES",
    "AuditTable",
    "Claim",
    "Deployment",
    "Spec",
    "load_spec",
    "parse_spec",
    "spec_type",
    "spec_type_names",
    "spec_types",
]

#: Largest integer a spec may hold anywhere (counts, steps, sizes): beyond it float arithmetic is no longer exact.
MAX_INTEGER = 10**15
#: Largest spec file read (a spec is a small text file; this keeps a wrong path, e.g. a data file, from hanging).
MAX_SPEC_BYTES = 16 * 2**20

#: The supported range (inclusive) of each numeric spec parameter, for every mechanism type that has it (built-in
#: and plug-in). Inside it every accounting route either answers or says it cannot, within seconds; outside it some
#: route overflows (σ = 1e308), divides by zero (σ = 1e-320) or runs for hours (steps = 1e30), so a spec is refused
#: before any work with "out of supported range". Documented in the README.
SUPPORTED_RANGES: dict[str, tuple[float, float]] = {
    "noise_multiplier": (1e-6, 1e12),
    "scale": (1e-6, 1e12),
    "epsilon": (1e-9, 500.0),  # randomized response needs e^ε as a float; Laplace 1/ε within the scale's range
    "count": (0, MAX_INTEGER),
    "steps": (0, MAX_INTEGER),
    "epochs": (0, MAX_INTEGER),
    "num_values": (0, MAX_INTEGER),
    "min_separation": (0, MAX_INTEGER),
}


def _number(table: dict, key: str, *, type_name: str, integer: bool = False, default: Any = None) -> Any:
    if key not in table:
        if default is not None:
            return default
        raise ValueError(f"mechanism type {type_name!r} requires parameter {key!r}")
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number; got {value!r} (mechanism type {type_name!r})")
    if integer:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{key} must be an integer; got {value!r} (mechanism type {type_name!r})")
        value = int(value)
    elif not math.isfinite(value):
        raise ValueError(f"{key} must be finite; got {value!r} (mechanism type {type_name!r})")
    return value


def _check_numbers(table: dict, type_name: Any) -> None:
    """Every number in a mechanism table (nested lists included) is finite, integers are at most
    :data:`MAX_INTEGER` in size, and named parameters lie in :data:`SUPPORTED_RANGES` — before any builder runs."""
    pending: list[tuple[str, Any]] = list(table.items())
    while pending:  # iterative: a deeply nested value must not exhaust the stack here
        key, value = pending.pop()
        if isinstance(value, list | tuple):
            pending.extend((key, item) for item in value)
            continue
        if isinstance(value, dict):
            pending.extend((f"{key}.{name}", item) for name, item in value.items())
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        where = f"(mechanism type {type_name!r})"
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{key} must be finite; got {value!r} {where}")
        if isinstance(value, int) and abs(value) > MAX_INTEGER:
            raise ValueError(f"{key} = {value!r} is out of the supported range (|{key}| <= {MAX_INTEGER:.0e}) {where}")
        low, high = SUPPORTED_RANGES.get(key, (-math.inf, math.inf))
        if not low <= value <= high:
            if value <= 0 <= low:
                continue  # the builder's own "must be > 0" / ">= 0" names the problem better
            raise ValueError(f"{key} = {value!r} is out of the supported range [{low:g}, {high:g}] {where}")


def _relation(table: dict, default: ev.NeighboringRelation) -> ev.NeighboringRelation:
    value = table.get("neighboring", default.value)
    try:
        return ev.NeighboringRelation(value)
    except ValueError:
        allowed = [r.value for r in ev.NeighboringRelation]
        raise ValueError(f"neighboring must be one of {allowed}; got {value!r}") from None


def _repeat(event: ev.Event, count: int, key: str) -> tuple[ev.Event, int]:
    if count < 0:
        raise ValueError(f"{key} must be an integer >= 0; got {count!r}")
    return event, count


def _gaussian(table: dict) -> tuple[ev.Event, int]:
    relation = _relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE)
    event = ev.Gaussian(noise_multiplier=_number(table, "noise_multiplier", type_name="gaussian"), neighboring=relation)
    return _repeat(event, _number(table, "count", type_name="gaussian", integer=True, default=1), "count")


def _laplace(table: dict) -> tuple[ev.Event, int]:
    relation = _relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE)
    if ("scale" in table) == ("epsilon" in table):
        raise ValueError("mechanism type 'laplace' requires exactly one of 'scale' or 'epsilon'")
    if "scale" in table:
        scale = _number(table, "scale", type_name="laplace")
    else:
        eps = _number(table, "epsilon", type_name="laplace")
        if not eps > 0:
            raise ValueError(f"epsilon must be > 0; got {eps!r} (mechanism type 'laplace')")
        scale = 1.0 / eps
    event = ev.Laplace(noise_multiplier=scale, neighboring=relation)
    return _repeat(event, _number(table, "count", type_name="laplace", integer=True, default=1), "count")


def _randomized_response(table: dict) -> tuple[ev.Event, int]:
    relation = _relation(table, ev.NeighboringRelation.REPLACE_ONE)
    event = ev.RandomizedResponse(
        epsilon=_number(table, "epsilon", type_name="randomized_response"),
        num_values=_number(table, "num_values", type_name="randomized_response", integer=True, default=2),
        neighboring=relation,
    )
    return _repeat(event, _number(table, "count", type_name="randomized_response", integer=True, default=1), "count")


def _poisson_subsampled_gaussian(table: dict) -> tuple[ev.Event, int]:
    name = "poisson_subsampled_gaussian"
    relation = _relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE)
    if relation is ev.NeighboringRelation.REPLACE_ONE:
        raise ValueError(
            "neighboring must be 'add_remove' for poisson_subsampled_gaussian; got 'replace_one' "
            "(Poisson amplification is analysed under add/remove)"
        )
    inner = ev.Gaussian(noise_multiplier=_number(table, "noise_multiplier", type_name=name), neighboring=relation)
    event = ev.PoissonSampled(
        sampling_rate=_number(table, "sampling_rate", type_name=name), event=inner, neighboring=relation
    )
    steps_key = "steps" if "steps" in table or "count" not in table else "count"
    return _repeat(event, _number(table, steps_key, type_name=name, integer=True, default=1), steps_key)


def _dp_sgd_training(table: dict) -> tuple[ev.Event, int]:
    """A DP-SGD training run (the canary games' subject): accounted exactly as the Poisson-subsampled Gaussian
    composed ``steps`` times (add/remove); ``clip_norm``, ``learning_rate``, ``dataset_size`` and ``model_dim``
    describe the numpy training the canary games run and do not change the accounting."""
    name = "dp_sgd_training"
    relation = _relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE)
    if relation is not ev.NeighboringRelation.ADD_OR_REMOVE_ONE:
        raise ValueError(f"neighboring must be 'add_remove' for dp_sgd_training; got {relation.value!r}")
    for key in ("clip_norm", "learning_rate"):
        value = _number(table, key, type_name=name, default=1.0)
        if not value > 0:
            raise ValueError(f"{key} must be > 0; got {value!r} (mechanism type {name!r})")
    for key in ("dataset_size", "model_dim"):
        value = _number(table, key, type_name=name, integer=True, default=1)
        if value < 1:
            raise ValueError(f"{key} must be an integer >= 1; got {value!r} (mechanism type {name!r})")
    inner = ev.Gaussian(noise_multiplier=_number(table, "noise_multiplier", type_name=name), neighboring=relation)
    event = ev.PoissonSampled(
        sampling_rate=_number(table, "sampling_rate", type_name=name), event=inner, neighboring=relation
    )
    steps = _number(table, "steps", type_name=name, integer=True)
    if steps < 1:
        raise ValueError(f"steps must be an integer >= 1; got {steps!r} (mechanism type {name!r})")
    return event, steps


def _dp_sgd(table: dict) -> tuple[ev.Event, int]:
    """A DP-SGD training under its batch sampler (:class:`dplens.accountant.dp_sgd.DpSgdRun`): ``noise_multiplier``,
    ``dataset_size``, ``batch_size``, ``epochs``, ``sampling`` (default ``poisson``), optional ``neighboring`` (the
    sampler's default otherwise) and ``max_batch_size`` (truncated Poisson)."""
    from dplens.accountant.dp_sgd import DpSgdRun

    name = "dp_sgd"
    sampling = table.get("sampling", "poisson")
    if not isinstance(sampling, str):
        raise ValueError(f"sampling must be a string; got {sampling!r} (mechanism type {name!r})")
    neighboring = table.get("neighboring")
    cap = None if "max_batch_size" not in table else _number(table, "max_batch_size", type_name=name, integer=True)
    run = dict(
        noise_multiplier=_number(table, "noise_multiplier", type_name=name),
        dataset_size=_number(table, "dataset_size", type_name=name, integer=True),
        batch_size=_number(table, "batch_size", type_name=name, integer=True),
        epochs=_number(table, "epochs", type_name=name),
        sampling=sampling,
        neighboring=None if neighboring is None else _relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE),
        max_batch_size=cap,
    )
    unit = _dp_sgd_unit(table, name)
    return (DpSgdRun(**run) if unit is None else _user_level_run(run, unit)), 1


def _dp_sgd_unit(table: dict, name: str) -> dict | None:
    """The privacy unit of a ``dp_sgd`` table: None for ``privacy_unit = "example"`` (the default), else the user-level
    arguments (``max_examples_per_user``, ``user_sampling``, ``users``; issue 49)."""
    unit = table.get("privacy_unit", "example")
    user_keys = [k for k in ("max_examples_per_user", "user_sampling", "users") if k in table]
    if unit == "example":
        if user_keys:
            raise ValueError(f"{user_keys[0]} needs privacy_unit = 'user' (mechanism type {name!r})")
        return None
    if unit != "user":
        raise ValueError(f"privacy_unit must be 'example' or 'user'; got {unit!r} (mechanism type {name!r})")
    user_sampling = table.get("user_sampling", False)
    if not isinstance(user_sampling, bool):
        raise ValueError(f"user_sampling must be true or false; got {user_sampling!r} (mechanism type {name!r})")
    return dict(
        max_examples_per_user=None
        if "max_examples_per_user" not in table
        else _number(table, "max_examples_per_user", type_name=name, integer=True),
        users=None if "users" not in table else _number(table, "users", type_name=name, integer=True),
        user_sampling=user_sampling,
    )


def _user_level_run(run: dict, unit: dict) -> ev.Event:
    from dplens.accountant.user_level import UserLevelRun

    return UserLevelRun(**run, **unit)


def _matrix_factorization(table: dict) -> tuple[ev.Event, int]:
    """A matrix-factorisation (correlated-noise) training under its sampler
    (:class:`dplens.accountant.mf_accounting.MfTraining`): ``mechanism`` (bandmf, blt, bsr, nu-ftrl), ``sampling``,
    ``noise_multiplier`` (relative to the strategy scaled to largest column norm 1), ``dataset_size``, ``batch_size``,
    ``epochs``; as the strategy and sampler need: ``bands``, ``coefficients`` (a Toeplitz first column of norm 1),
    ``nu``, ``buf_decay`` / ``output_scale``, ``min_separation``, ``max_participations``, ``max_batch_size``,
    ``neighboring``."""
    from dplens.accountant.mf_accounting import MfTraining

    name = "matrix_factorization"
    for key in ("mechanism", "sampling"):
        if not isinstance(table.get(key), str):
            raise ValueError(f"{key} must be a string; got {table.get(key)!r} (mechanism type {name!r})")
    optional_int = {k: _number(table, k, type_name=name, integer=True) if k in table else None for k in _MF_INTS}
    lists = {k: table.get(k) for k in ("coefficients", "buf_decay", "output_scale")}
    event = MfTraining(
        mechanism=table["mechanism"],
        sampling=table["sampling"],
        noise_multiplier=_number(table, "noise_multiplier", type_name=name),
        dataset_size=_number(table, "dataset_size", type_name=name, integer=True),
        batch_size=_number(table, "batch_size", type_name=name, integer=True),
        epochs=_number(table, "epochs", type_name=name),
        nu=_number(table, "nu", type_name=name) if "nu" in table else None,
        neighboring=None if "neighboring" not in table else _relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE),
        **optional_int,
        **lists,
    )
    return event, 1


_MF_INTS = ("bands", "min_separation", "max_participations", "max_batch_size")


def _random_allocation(table: dict) -> tuple[ev.Event, int]:
    """Balls-and-bins epochs: each record in ``selected`` (default 1) of the ``steps`` steps of an epoch, a fresh
    allocation each of ``epochs`` epochs (:class:`dplens.accountant.samplers.RandomAllocation`)."""
    from dplens.accountant.samplers import RandomAllocation

    name = "random_allocation"
    event = RandomAllocation(
        noise_multiplier=_number(table, "noise_multiplier", type_name=name),
        steps=_number(table, "steps", type_name=name, integer=True),
        selected=_number(table, "selected", type_name=name, integer=True, default=1),
        neighboring=_relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE),
    )
    return _repeat(event, _number(table, "epochs", type_name=name, integer=True, default=1), "epochs")


# ---- every dp-accounting event type and the further mechanisms of issue 17 --------------------------------


def _numbers(table: dict, key: str, *, type_name: str) -> tuple[float, ...]:
    value = table.get(key)
    if value is None:
        raise ValueError(f"mechanism type {type_name!r} requires parameter {key!r}")
    if not isinstance(value, list) or not value:
        raise ValueError(f"{key} must be a non-empty list of numbers; got {value!r} (mechanism type {type_name!r})")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int | float) or not math.isfinite(item):
            raise ValueError(f"{key} must contain finite numbers; got {item!r} (mechanism type {type_name!r})")
    return tuple(float(v) for v in value)


def _counted(table: dict, event: ev.Event, type_name: str, *, steps: bool = False) -> tuple[ev.Event, int]:
    key = "steps" if steps and ("steps" in table or "count" not in table) else "count"
    return _repeat(event, _number(table, key, type_name=type_name, integer=True, default=1), key)


def _inner_mechanism(table: dict, type_name: str) -> ev.Event:
    """The nested ``mechanism`` table of a wrapper type (``repeat_and_select``, ``group_privacy``)."""
    inner = table.get("mechanism")
    if not isinstance(inner, dict) or "type" not in inner:
        raise ValueError(f"mechanism type {type_name!r} requires a nested 'mechanism' table with a 'type'")
    builder, allowed = spec_type(inner["type"])
    params = {k: v for k, v in inner.items() if k != "type"}
    if "neighboring" in table and "neighboring" not in params and (allowed is None or "neighboring" in allowed):
        params["neighboring"] = table["neighboring"]
    if allowed is not None and set(params) - allowed:
        raise ValueError(
            f"unknown parameter(s) {sorted(set(params) - allowed)} for mechanism type {inner['type']!r}; "
            f"allowed: {sorted(allowed)}"
        )
    event, count = builder(params)
    return event if count == 1 else ev.SelfComposed(event=event, count=count)


def _zcdp(table: dict) -> tuple[ev.Event, int]:
    relation = _relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE)
    event = ev.ZcdpMechanism(
        rho=_number(table, "rho", type_name="zcdp"),
        xi=_number(table, "xi", type_name="zcdp", default=0.0),
        neighboring=relation,
    )
    return _counted(table, event, "zcdp")


def _mixture_of_gaussians(table: dict) -> tuple[ev.Event, int]:
    name = "mixture_of_gaussians"
    event = ev.MixtureOfGaussians(
        standard_deviation=_number(table, "standard_deviation", type_name=name),
        sensitivities=_numbers(table, "sensitivities", type_name=name),
        sampling_probs=_numbers(table, "sampling_probs", type_name=name),
        neighboring=_relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE),
    )
    return _counted(table, event, name)


def _tree_aggregation(table: dict) -> tuple[ev.Event, int]:
    name = "single_epoch_tree_aggregation"
    counts = table.get("step_counts")
    if isinstance(counts, list):
        counts = tuple(int(c) if isinstance(c, int | float) and float(c).is_integer() else c for c in counts)
    elif counts is None:
        raise ValueError(f"mechanism type {name!r} requires parameter 'step_counts'")
    event = ev.SingleEpochTreeAggregation(
        noise_multiplier=_number(table, "noise_multiplier", type_name=name),
        step_counts=counts,
        neighboring=_relation(table, ev.NeighboringRelation.REPLACE_SPECIAL),
    )
    return _counted(table, event, name)


def _truncated_subsampled_gaussian(table: dict) -> tuple[ev.Event, int]:
    name = "truncated_subsampled_gaussian"
    event = ev.TruncatedSubsampledGaussian(
        dataset_size=_number(table, "dataset_size", type_name=name, integer=True),
        sampling_rate=_number(table, "sampling_rate", type_name=name),
        truncated_batch_size=_number(table, "truncated_batch_size", type_name=name, integer=True),
        noise_multiplier=_number(table, "noise_multiplier", type_name=name),
        neighboring=_relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE),
    )
    return _counted(table, event, name, steps=True)


def _fixed_size_gaussian(table: dict, name: str, sampled: type) -> tuple[ev.Event, int]:
    """A Gaussian step on a fixed-size batch (``sampled``: with or without replacement), replace-one by default."""
    relation = _relation(table, ev.NeighboringRelation.REPLACE_ONE)
    inner = ev.Gaussian(noise_multiplier=_number(table, "noise_multiplier", type_name=name), neighboring=relation)
    event = sampled(
        sample_size=_number(table, "sample_size", type_name=name, integer=True),
        dataset_size=_number(table, "dataset_size", type_name=name, integer=True),
        event=inner,
        neighboring=relation,
    )
    return _counted(table, event, name, steps=True)


def _sampled_without_replacement_gaussian(table: dict) -> tuple[ev.Event, int]:
    return _fixed_size_gaussian(table, "sampled_without_replacement_gaussian", ev.SampledWithoutReplacement)


def _sampled_with_replacement_gaussian(table: dict) -> tuple[ev.Event, int]:
    from dplens.accountant.with_replacement import SampledWithReplacement

    return _fixed_size_gaussian(table, "sampled_with_replacement_gaussian", SampledWithReplacement)


def _discrete_laplace(table: dict) -> tuple[ev.Event, int]:
    from dplens.accountant.discrete import DiscreteLaplace

    name = "discrete_laplace"
    event = DiscreteLaplace(
        noise_parameter=_number(table, "noise_parameter", type_name=name),
        sensitivity=_number(table, "sensitivity", type_name=name, integer=True, default=1),
        neighboring=_relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE),
    )
    return _counted(table, event, name)


def _discrete_gaussian(table: dict) -> tuple[ev.Event, int]:
    from dplens.accountant.discrete import DiscreteGaussian

    name = "discrete_gaussian"
    event = DiscreteGaussian(
        sigma=_number(table, "sigma", type_name=name),
        sensitivity=_number(table, "sensitivity", type_name=name, integer=True, default=1),
        dimension=_number(table, "dimension", type_name=name, integer=True, default=1),
        neighboring=_relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE),
    )
    return _counted(table, event, name)


def _approx_dp(table: dict) -> tuple[ev.Event, int]:
    from dplens.accountant.approx_dp import ApproxDp

    event = ApproxDp(
        epsilon=_number(table, "epsilon", type_name="approx_dp"),
        delta=_number(table, "delta", type_name="approx_dp", default=0.0),
        neighboring=_relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE),
    )
    return _counted(table, event, "approx_dp")


def _selection(type_name: str) -> Callable[[dict], tuple[ev.Event, int]]:
    def build(table: dict) -> tuple[ev.Event, int]:
        from dplens.accountant import selection

        relation = _relation(table, ev.NeighboringRelation.ADD_OR_REMOVE_ONE)
        eps = _number(table, "epsilon", type_name=type_name)
        if type_name == "exponential_mechanism":
            event = selection.ExponentialMechanism(epsilon=eps, neighboring=relation)
        elif type_name == "permute_and_flip":
            event = selection.PermuteAndFlip(epsilon=eps, neighboring=relation)
        else:
            event = selection.ReportNoisyMax(epsilon=eps, noise=table.get("noise", "gumbel"), neighboring=relation)
        return _counted(table, event, type_name)

    return build


_REPEAT_SHAPES = {"poisson": math.inf, "geometric": 1.0, "logarithmic": 0.0}


def _repeat_and_select(table: dict) -> tuple[ev.Event, int]:
    from dplens.accountant.selection import RepeatAndSelect

    name = "repeat_and_select"
    shape = table.get("shape", table.get("distribution"))
    if isinstance(shape, str):
        if shape not in _REPEAT_SHAPES:
            raise ValueError(f"shape must be a number > -1 or one of {sorted(_REPEAT_SHAPES)}; got {shape!r}")
        shape = _REPEAT_SHAPES[shape]
    elif shape is None:
        raise ValueError(f"mechanism type {name!r} requires parameter 'shape' (a number, or 'poisson' ...)")
    event = RepeatAndSelect(
        event=_inner_mechanism(table, name), mean=_number(table, "mean", type_name=name), shape=shape
    )
    return _counted(table, event, name)


def _adaptive_clipping(table: dict) -> tuple[ev.Event, int]:
    """Adaptive clipping (Andrew et al. 2021; :class:`dplens.accountant.adaptive_clipping.AdaptiveClipping`): the
    total ``noise_multiplier`` σ (σ_eff derived) or the ``gradient_noise`` itself, ``count_noise`` σ_b,
    ``sampling_rate``, ``steps``, optional ``count_sensitivity`` (0.5 centred, 1.0 a raw count)."""
    from dplens.accountant.adaptive_clipping import AdaptiveClipping, effective_noise_multiplier

    name = "adaptive_clipping"
    if ("noise_multiplier" in table) == ("gradient_noise" in table):
        raise ValueError(f"mechanism type {name!r} takes exactly one of 'noise_multiplier' (total) or 'gradient_noise'")
    count_noise = _number(table, "count_noise", type_name=name)
    if "noise_multiplier" in table:
        gradient = effective_noise_multiplier(_number(table, "noise_multiplier", type_name=name), count_noise)
    else:
        gradient = _number(table, "gradient_noise", type_name=name)
    event = AdaptiveClipping(
        gradient_noise=gradient,
        count_noise=count_noise,
        sampling_rate=_number(table, "sampling_rate", type_name=name),
        steps=_number(table, "steps", type_name=name, integer=True),
        count_sensitivity=float(table.get("count_sensitivity", 0.5)),
    )
    return event, 1


def _group_privacy(table: dict) -> tuple[ev.Event, int]:
    from dplens.accountant.group import GroupPrivacy

    name = "group_privacy"
    event = GroupPrivacy(
        event=_inner_mechanism(table, name), group_size=_number(table, "group_size", type_name=name, integer=True)
    )
    return _counted(table, event, name)


_BUILTIN: dict[str, tuple[Callable[[dict], tuple[ev.Event, int]], frozenset[str]]] = {
    "gaussian": (_gaussian, frozenset({"noise_multiplier", "count", "neighboring"})),
    "laplace": (_laplace, frozenset({"scale", "epsilon", "count", "neighboring"})),
    "randomized_response": (_randomized_response, frozenset({"epsilon", "num_values", "count", "neighboring"})),
    "poisson_subsampled_gaussian": (
        _poisson_subsampled_gaussian,
        frozenset({"noise_multiplier", "sampling_rate", "steps", "count", "neighboring"}),
    ),
    "dp_sgd_training": (
        _dp_sgd_training,
        frozenset(
            {
                "noise_multiplier",
                "sampling_rate",
                "steps",
                "clip_norm",
                "learning_rate",
                "dataset_size",
                "model_dim",
                "neighboring",
            }
        ),
    ),
    "dp_sgd": (
        _dp_sgd,
        frozenset(
            {
                "noise_multiplier",
                "dataset_size",
                "batch_size",
                "epochs",
                "sampling",
                "neighboring",
                "max_batch_size",
                "privacy_unit",
                "max_examples_per_user",
                "user_sampling",
                "users",
            }
        ),
    ),
    "matrix_factorization": (
        _matrix_factorization,
        frozenset(
            {
                "mechanism",
                "sampling",
                "noise_multiplier",
                "dataset_size",
                "batch_size",
                "epochs",
                "bands",
                "coefficients",
                "nu",
                "buf_decay",
                "output_scale",
                "min_separation",
                "max_participations",
                "max_batch_size",
                "neighboring",
            }
        ),
    ),
    "random_allocation": (
        _random_allocation,
        frozenset({"noise_multiplier", "steps", "selected", "epochs", "neighboring"}),
    ),
    "zcdp": (_zcdp, frozenset({"rho", "xi", "count", "neighboring"})),
    "mixture_of_gaussians": (
        _mixture_of_gaussians,
        frozenset({"standard_deviation", "sensitivities", "sampling_probs", "count", "neighboring"}),
    ),
    "single_epoch_tree_aggregation": (
        _tree_aggregation,
        frozenset({"noise_multiplier", "step_counts", "count", "neighboring"}),
    ),
    "truncated_subsampled_gaussian": (
        _truncated_subsampled_gaussian,
        frozenset(
            {
                "dataset_size",
                "sampling_rate",
                "truncated_batch_size",
                "noise_multiplier",
                "steps",
                "count",
                "neighboring",
            }
        ),
    ),
    "sampled_without_replacement_gaussian": (
        _sampled_without_replacement_gaussian,
        frozenset({"noise_multiplier", "sample_size", "dataset_size", "steps", "count", "neighboring"}),
    ),
    "sampled_with_replacement_gaussian": (
        _sampled_with_replacement_gaussian,
        frozenset({"noise_multiplier", "sample_size", "dataset_size", "steps", "count", "neighboring"}),
    ),
    "discrete_laplace": (_discrete_laplace, frozenset({"noise_parameter", "sensitivity", "count", "neighboring"})),
    "discrete_gaussian": (
        _discrete_gaussian,
        frozenset({"sigma", "sensitivity", "dimension", "count", "neighboring"}),
    ),
    "approx_dp": (_approx_dp, frozenset({"epsilon", "delta", "count", "neighboring"})),
    "exponential_mechanism": (_selection("exponential_mechanism"), frozenset({"epsilon", "count", "neighboring"})),
    "report_noisy_max": (_selection("report_noisy_max"), frozenset({"epsilon", "noise", "count", "neighboring"})),
    "permute_and_flip": (_selection("permute_and_flip"), frozenset({"epsilon", "count", "neighboring"})),
    "repeat_and_select": (
        _repeat_and_select,
        frozenset({"mechanism", "mean", "shape", "distribution", "count", "neighboring"}),
    ),
    "group_privacy": (_group_privacy, frozenset({"mechanism", "group_size", "count", "neighboring"})),
    "adaptive_clipping": (
        _adaptive_clipping,
        frozenset({"noise_multiplier", "gradient_noise", "count_noise", "sampling_rate", "steps", "count_sensitivity"}),
    ),
}


def spec_type_names() -> list[str]:
    """Every mechanism type a spec may name: the built-in ones and the plug-ins' (nothing is imported)."""
    from dplens.accountant import plugins

    return [*_BUILTIN, *(name for name in plugins.spec_type_names() if name not in _BUILTIN)]


def spec_type(type_name: str) -> tuple[Callable[[dict], tuple[ev.Event, int]], frozenset[str] | None]:
    """The builder and allowed keys (None: the builder checks them) of ``type_name``; a plug-in's module is
    imported only here, when a spec uses one of its types."""
    if isinstance(type_name, str) and type_name in _BUILTIN:
        return _BUILTIN[type_name]
    from dplens.accountant import plugins

    builder = plugins.spec_type_builder(type_name) if isinstance(type_name, str) else None
    if builder is None:
        raise ValueError(f"unknown mechanism type {type_name!r}; known types: {sorted(spec_type_names())}")
    return _wrap_extension(builder), None


def spec_types() -> dict[str, tuple[Callable[[dict], tuple[ev.Event, int]], frozenset[str] | None]]:
    """All mechanism types with their builders (imports every plug-in: use :func:`spec_type_names` to list)."""
    return {name: spec_type(name) for name in spec_type_names()}


def _wrap_extension(builder: Callable[[dict], Any]) -> Callable[[dict], tuple[ev.Event, int]]:
    def build(table: dict) -> tuple[ev.Event, int]:
        result = builder(table)
        if isinstance(result, tuple):
            return result
        return result, 1

    return build


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """The guarantee under test in an audit (e.g. a vendor's claim): the spec's ``[claim]`` table.

    Example:
        >>> spec = parse_spec({"mechanism": [{"type": "gaussian", "noise_multiplier": 1.0}],
        ...                    "claim": {"epsilon": 1.0, "delta": 1e-5}})
        >>> spec.claim
        Claim(epsilon=1.0, delta=1e-05)
    """

    epsilon: float
    delta: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return {"epsilon": self.epsilon, "delta": self.delta}


# The values of the [audit] table; the auditing layer turns them into its option types (the values of
# dplens.auditing.canaries' enums: a test checks that they agree).
AUDIT_GAMES = ("distinguish", "one_run", "attribute")
AUDIT_CANARIES = ("gradient", "input")
AUDIT_OBSERVATIONS = ("final", "all_steps")
AUDIT_SCORES = ("likelihood_ratio", "dot_product", "loss")
AUDIT_INPUT_CANARIES = ("mislabelled", "out_of_distribution")
_AUDIT_KEYS = frozenset({"game", "canaries", "canary", "observe", "score", "input_canary", "prior", "values"})


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditTable:
    """The spec's optional ``[audit]`` table: which audit game ``dplens audit SPEC`` runs and how.

    ``game``: ``distinguish`` (many runs, canary in or out), ``one_run`` (one training with ``canaries`` canaries
    included with probability ½ each) or ``attribute`` (attribute inference; ``prior`` over the attribute values and
    ``values``, the mechanism's data for each value). ``canary`` (``gradient`` or ``input``), ``observe``
    (``final`` or ``all_steps``), ``score`` and ``input_canary`` (``mislabelled`` or ``out_of_distribution``)
    configure the canary games of a ``dp_sgd_training`` mechanism.
    """

    game: str = "distinguish"
    canaries: int = 1000
    canary: str = "gradient"
    observe: str = "all_steps"
    score: str | None = None
    input_canary: str = "mislabelled"
    prior: tuple[float, ...] | None = None
    values: tuple[float, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "game": self.game,
            "canaries": self.canaries,
            "canary": self.canary,
            "observe": self.observe,
            "input_canary": self.input_canary,
        }
        if self.score is not None:
            out["score"] = self.score
        if self.prior is not None:
            out["prior"] = list(self.prior)
        if self.values is not None:
            out["values"] = list(self.values)
        return out


def _choice(raw: dict, key: str, allowed: tuple[str, ...], default: str | None) -> str | None:
    value = raw.get(key, default)
    if value is not None and value not in allowed:
        raise ValueError(f"[audit] {key} must be one of {list(allowed)}; got {value!r}")
    return value


def _audit_numbers(raw: dict, key: str) -> tuple[float, ...] | None:
    if key not in raw:
        return None
    value = raw[key]
    if not isinstance(value, list) or len(value) < 2:
        raise ValueError(f"[audit] {key} must be a list of at least 2 numbers; got {value!r}")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int | float) or not math.isfinite(item):
            raise ValueError(f"[audit] {key} must hold finite numbers; got {value!r}")
    return tuple(float(v) for v in value)


def _audit_table(raw: Any) -> AuditTable:
    if not isinstance(raw, dict):
        raise ValueError(f"[audit] must be a table; got {raw!r}")
    extra = set(raw) - _AUDIT_KEYS
    if extra:
        raise ValueError(f"unknown key(s) {sorted(extra)} in [audit]; allowed: {sorted(_AUDIT_KEYS)}")
    canaries = raw.get("canaries", 1000)
    if isinstance(canaries, bool) or not isinstance(canaries, int) or canaries < 2:
        raise ValueError(f"[audit] canaries must be an integer >= 2; got {canaries!r}")
    prior, values = _audit_numbers(raw, "prior"), _audit_numbers(raw, "values")
    if prior is not None and (any(p < 0 for p in prior) or abs(sum(prior) - 1.0) > 1e-9):
        raise ValueError(f"[audit] prior must be probabilities summing to 1; got {list(prior)!r}")
    if prior is not None and values is not None and len(prior) != len(values):
        raise ValueError(f"[audit] prior and values must have the same length; got {len(prior)} and {len(values)}")
    return AuditTable(
        game=_choice(raw, "game", AUDIT_GAMES, "distinguish"),
        canaries=canaries,
        canary=_choice(raw, "canary", AUDIT_CANARIES, "gradient"),
        observe=_choice(raw, "observe", AUDIT_OBSERVATIONS, "all_steps"),
        score=_choice(raw, "score", AUDIT_SCORES, None),
        input_canary=_choice(raw, "input_canary", AUDIT_INPUT_CANARIES, "mislabelled"),
        prior=prior,
        values=values,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Spec:
    """A parsed, validated spec: its mechanism tables, the events they build, the optional claim and audit table.

    Example:
        >>> spec = parse_spec({"mechanism": [{"type": "laplace", "epsilon": 0.5, "count": 2}]})
        >>> spec.entries
        ((Laplace(noise_multiplier=2.0, neighboring=<NeighboringRelation.ADD_OR_REMOVE_ONE: 'add_remove'>), 2),)
        >>> spec.accountant().pure_epsilon()  # 2 × 0.5, rounded up: every reported ε is an upper bound
        1.000000000001
        >>> round(spec.with_param("epsilon", 1.0).accountant().pure_epsilon(), 9)
        2.0
    """

    mechanisms: tuple[dict[str, Any], ...]
    claim: Claim | None = None
    neighboring: ev.NeighboringRelation | None = None
    sha256: str = ""
    source: str = ""
    entries: tuple[tuple[ev.Event, int], ...] = field(default=())
    audit: AuditTable | None = None
    deployment: Deployment | None = None

    def accountant(self, **options: Any) -> Accountant:
        """A fresh Accountant with every mechanism composed in order (``options``: Accountant keywords)."""
        acc = Accountant(neighboring=self.neighboring, **options)
        for event, count in self.entries:
            acc.compose(event, count)
        return acc

    def with_param(self, name: str, value: Any) -> Spec:
        """A copy with parameter ``name`` set to ``value`` in every mechanism that takes it."""
        tables = [dict(t) for t in self.mechanisms]
        hit = False
        for table in tables:
            _, allowed = spec_type(table["type"])
            if name in table or (allowed is not None and name in allowed):
                if name == "steps" and "count" in table and "steps" not in table:
                    table["count"] = value
                else:
                    table[name] = value
                hit = True
        if not hit:
            raise ValueError(f"param {name!r} is not a parameter of any mechanism in the spec")
        data = {"mechanism": tables}
        if self.claim is not None:
            data["claim"] = self.claim.to_dict()
        if self.neighboring is not None:
            data["neighboring"] = self.neighboring.value
        if self.audit is not None:
            data["audit"] = self.audit.to_dict()
        if self.deployment is not None:
            data["deployment"] = self.deployment.to_dict()
        return parse_spec(data, source=self.source)


def parse_spec(data: dict[str, Any], *, source: str = "<dict>") -> Spec:
    """Validate a spec document (already decoded from TOML/JSON); bad keys and values raise ``ValueError``.

    Example:
        >>> parse_spec({"mechanism": [{"type": "gaussian", "noise_multiplier": 2.0, "count": 4}]}).entries[0][1]
        4
        >>> parse_spec({"mechanism": [{"type": "gaussian", "sigma": 2.0}]})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: unknown parameter(s) ['sigma'] for mechanism type 'gaussian'; allowed: [...]
    """
    if not isinstance(data, dict):
        raise ValueError(f"spec must be a table/object; got {type(data).__name__}")
    unknown = set(data) - {"mechanism", "claim", "neighboring", "name", "description", "audit", "deployment"}
    if unknown:
        raise ValueError(f"unknown top-level key(s) {sorted(unknown)} in spec {source}")
    tables = data.get("mechanism")
    if isinstance(tables, dict):
        tables = [tables]
    if not isinstance(tables, list) or not tables:
        raise ValueError(f"spec {source} needs at least one [[mechanism]] table")
    neighboring = None
    if "neighboring" in data:
        neighboring = _relation(data, ev.NeighboringRelation.ADD_OR_REMOVE_ONE)
    entries = []
    for index, table in enumerate(tables):
        if not isinstance(table, dict) or "type" not in table:
            raise ValueError(f"mechanism #{index + 1} in spec {source} needs a 'type'")
        type_name = table["type"]
        builder, allowed = spec_type(type_name)
        params = {k: v for k, v in table.items() if k != "type"}
        _check_numbers(params, type_name)
        if neighboring is not None and "neighboring" not in params and (allowed is None or "neighboring" in allowed):
            params["neighboring"] = neighboring.value
        if allowed is not None:
            extra = set(params) - allowed
            if extra:
                raise ValueError(
                    f"unknown parameter(s) {sorted(extra)} for mechanism type {type_name!r}; allowed: {sorted(allowed)}"
                )
        entries.append(builder(params))
    claim = None
    if "claim" in data:
        raw = data["claim"]
        if not isinstance(raw, dict) or "epsilon" not in raw:
            raise ValueError("[claim] must be a table with 'epsilon' (and optionally 'delta')")
        extra = set(raw) - {"epsilon", "delta"}
        if extra:
            raise ValueError(f"unknown key(s) {sorted(extra)} in [claim]")
        eps, delta = raw["epsilon"], raw.get("delta", 0.0)
        if isinstance(eps, bool) or not isinstance(eps, int | float) or not (eps >= 0 and math.isfinite(eps)):
            raise ValueError(f"claim epsilon must be a finite number >= 0; got {eps!r}")
        if isinstance(delta, bool) or not isinstance(delta, int | float) or not (0 <= delta < 1):
            raise ValueError(f"claim delta must be in [0, 1); got {delta!r}")
        claim = Claim(epsilon=float(eps), delta=float(delta))
    audit = _audit_table(data["audit"]) if "audit" in data else None
    deployment = None
    if "deployment" in data:
        # the spec's top-level name and description are the record's unless the table gives its own
        defaults = {k: data[k] for k in ("name", "description") if isinstance(data.get(k), str) and data[k].strip()}
        deployment = parse_deployment(data["deployment"], defaults=defaults)
    canonical = json.dumps(data, sort_keys=True, default=str).encode()
    return Spec(
        mechanisms=tuple(copy.deepcopy(tables)),
        claim=claim,
        neighboring=neighboring,
        sha256=hashlib.sha256(canonical).hexdigest(),
        source=source,
        entries=tuple(entries),
        audit=audit,
        deployment=deployment,
    )


def load_spec(path: str | Path) -> Spec:
    """Read a TOML (``.toml``) or JSON (anything else) spec file and validate it.

    Every way of failing to read it (missing, a directory, not a regular file, too large, unreadable, not UTF-8,
    not TOML/JSON, nested too deeply) is a ``ValueError`` naming the file.

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "dp_sgd.toml"
        >>> _ = path.write_text('[[mechanism]]\\ntype = "poisson_subsampled_gaussian"\\n'
        ...                     'noise_multiplier = 1.1\\nsampling_rate = 0.004\\nsteps = 1000\\n')
        >>> spec = load_spec(path)
        >>> spec.source == str(path), len(spec.sha256)
        (True, 64)
    """
    from dplens._files import read_document

    path = Path(path)
    name = repr(str(path))
    data, raw = read_document(path, what="spec file", max_bytes=MAX_SPEC_BYTES)
    try:
        spec = parse_spec(data, source=str(path))
    except RecursionError:
        raise ValueError(f"spec file {name} is nested too deeply to be a spec") from None
    return Spec(
        mechanisms=spec.mechanisms,
        claim=spec.claim,
        neighboring=spec.neighboring,
        sha256=hashlib.sha256(raw).hexdigest(),
        source=str(path),
        entries=spec.entries,
        audit=spec.audit,
        deployment=spec.deployment,
    )
