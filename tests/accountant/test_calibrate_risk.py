"""Calibration to an attack-risk target (dplens.accountant.calibrate.calibrate_risk): closed forms, never over the
target, tight, integer steps, the advantage target's warning, ε beside the answer, bad input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import dplens
from dplens.accountant import events as ev
from dplens.accountant.calibrate import Direction, RiskTarget, calibrate_risk
from dplens.accountant.compose import Accountant
from dplens.accountant.risk import attack_risk


def gaussian(sigma: float) -> Accountant:
    return Accountant().compose(ev.Gaussian(noise_multiplier=sigma))


def dp_sgd(q: float, steps: int):
    return lambda sigma: Accountant().compose(
        ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=sigma)), steps
    )


@pytest.mark.parametrize(("tpr", "fpr"), [(0.05, 0.01), (0.3, 0.1), (0.002, 0.001)])
def test_gaussian_tpr_target_is_the_closed_form(tpr, fpr):
    # TPR = Φ(Φ⁻¹(FPR) + 1/σ)  ⇒  σ = 1 / (Φ⁻¹(TPR) − Φ⁻¹(FPR))
    expected = 1.0 / (stats.norm.ppf(tpr) - stats.norm.ppf(fpr))
    result = calibrate_risk(
        gaussian, target=RiskTarget(max_tpr=tpr, at_fpr=fpr), lower=0.01, upper=1e3, method="exact", delta=1e-5
    )
    assert result.value == pytest.approx(expected, rel=1e-5) and result.value >= expected * (1 - 1e-9)
    assert result.achieved <= tpr and result.risk.tpr(fpr) <= tpr
    assert result.epsilon == gaussian(result.value).epsilon(1e-5)


@pytest.mark.parametrize("advantage", [0.05, 0.3, 0.9])
def test_gaussian_advantage_target_is_the_closed_form(advantage):
    # advantage = 2Φ(μ/2) − 1  ⇒  σ = 1/μ = 1 / (2 Φ⁻¹((1 + V)/2))
    expected = 1.0 / (2 * stats.norm.ppf((1 + advantage) / 2))
    result = calibrate_risk(gaussian, target=RiskTarget(max_advantage=advantage), lower=0.01, upper=1e3, method="exact")
    assert result.value == pytest.approx(expected, rel=1e-5) and result.achieved <= advantage
    (warning,) = result.warnings
    assert "at FPR 0.001 an attack may still reach TPR" in warning and "--max-tpr" in warning


@settings(max_examples=4, deadline=None)
@given(q=st.floats(0.002, 0.2), steps=st.integers(10, 3000), tpr=st.floats(0.02, 0.5))
def test_pld_calibration_never_overshoots_and_is_tight(q, steps, tpr):
    make = dp_sgd(q, steps)
    target = RiskTarget(max_tpr=tpr, at_fpr=0.01)
    try:
        result = calibrate_risk(make, target=target, lower=0.2, upper=50.0, direction=Direction.DECREASING)
    except ValueError as err:  # a target beyond reach in [0.2, 50] must say so
        assert "unreachable" in str(err)
        assert attack_risk(make(50.0), fprs=(0.01,), method="pld").tpr_upper[0] > tpr
        return
    # the answer meets the target as a fresh call computes it ...
    assert attack_risk(make(result.value), fprs=(0.01,), method="pld").tpr_upper[0] <= tpr
    assert result.achieved <= tpr
    # ... and 0.1 % less noise certainly does not (its certified lower end is above the target), unless at the end
    if result.value > 0.2 * 1.001:
        assert attack_risk(make(result.value * 0.999), fprs=(0.01,), method="pld").tpr_lower[0] > tpr


def test_integer_steps_are_the_largest_that_meet_the_target():
    make = lambda steps: dp_sgd(0.01, int(steps))(1.0)  # noqa: E731
    result = calibrate_risk(make, target=RiskTarget(max_tpr=0.03, at_fpr=0.01), lower=1, upper=10**6, integer=True)
    assert isinstance(result.value, int)
    assert attack_risk(make(result.value), fprs=(0.01,), method="pld").tpr_upper[0] <= 0.03
    assert attack_risk(make(result.value + 1), fprs=(0.01,), method="pld").tpr_upper[0] > 0.03


def test_mnist_calibration_is_close_to_the_mnist_risk():
    # at σ = 1.1 the certified TPR at 1 % is ≤ 0.04022: calibrating to it gives σ ≤ 1.1, within 0.1 %
    result = calibrate_risk(
        dp_sgd(256 / 60000, 14063),
        target=RiskTarget(max_tpr=0.04022, at_fpr=0.01),
        lower=0.5,
        upper=5.0,
        delta=1e-5,
        param="noise_multiplier",
    )
    assert 1.1 * 0.999 <= result.value <= 1.1 * 1.0001
    assert result.epsilon == pytest.approx(2.3818, rel=2e-3)
    data = result.to_dict()
    assert data["param"] == "noise_multiplier" and data["target"] == {"max_tpr": 0.04022, "at_fpr": 0.01}
    assert set(data["tpr_upper"]) == {"0.01", "0.001", "0.1"} and data["epsilon"] == result.epsilon


def test_spec_and_function_front_doors():
    step = dplens.PoissonSampled(sampling_rate=0.02, event=dplens.Gaussian(noise_multiplier=1.0))
    spec = dplens.parse_spec(
        {"mechanism": [{"type": "poisson_subsampled_gaussian", "noise_multiplier": 1.0, "sampling_rate": 0.02,
                        "steps": 300}]}
    )  # fmt: skip
    from_spec = dplens.calibrate(spec, param="noise_multiplier", max_tpr=0.05, at_fpr=0.01, delta=1e-5)
    from_function = dplens.calibrate(
        lambda s: dplens.SelfComposed(event=dplens.PoissonSampled(sampling_rate=0.02, event=dplens.Gaussian(
            noise_multiplier=s)), count=300), max_tpr=0.05, at_fpr=0.01, lower=0.05, upper=500.0)  # fmt: skip
    assert from_spec.value == pytest.approx(from_function.value, rel=1e-5)
    assert step.event.noise_multiplier == 1.0 and from_spec.delta == 1e-5 and from_function.epsilon is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_tpr": 0.01, "at_fpr": 0.01}, "unreachable: an attack that guesses at random"),
        ({"max_tpr": 0.1}, "needs max_tpr with at_fpr"),
        ({"at_fpr": 0.1}, "needs max_tpr with at_fpr"),
        ({"max_tpr": 0.1, "at_fpr": 0.01, "max_advantage": 0.2}, "either max_advantage or max_tpr"),
        ({"max_tpr": 1.5, "at_fpr": 0.01}, "max_tpr must be a number in \\(0, 1\\)"),
        ({"max_tpr": 0.5, "at_fpr": 0.0}, "at_fpr must be a number in \\(0, 1\\)"),
        ({"max_advantage": 0.0}, "max_advantage must be a number in \\(0, 1\\)"),
    ],
)
def test_bad_targets_are_value_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RiskTarget(**kwargs)


def test_a_target_no_noise_in_the_bracket_meets_is_one_line():
    with pytest.raises(ValueError, match=r"unreachable for noise_multiplier in \[0.5, 2.0\]") as info:
        calibrate_risk(
            dp_sgd(0.1, 1000),
            target=RiskTarget(max_tpr=0.011, at_fpr=0.01),
            lower=0.5,
            upper=2.0,
            param="noise_multiplier",
        )
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="lower must be < upper"):
        calibrate_risk(gaussian, target=RiskTarget(max_advantage=0.1), lower=2.0, upper=1.0)
    with pytest.raises(ValueError, match="target must be a RiskTarget"):
        calibrate_risk(gaussian, target=0.1, lower=1.0, upper=2.0)
    assert math.isfinite(calibrate_risk(gaussian, target=RiskTarget(max_advantage=0.1), lower=1.0, upper=100.0).value)


# --------------------------------------------------------------------------------------------
# Every spec type
# --------------------------------------------------------------------------------------------


def _registry_cases() -> dict:
    """The spec tables of every spec type (tests/mechanisms/test_registry.py classifies each new type)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "mechanisms" / "test_registry.py"
    spec = importlib.util.spec_from_file_location("_registry_cases_calibrate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from dplens.spec import spec_types

    tables = {name: tables[0] for name, tables in module.RUNNABLE.items()}
    tables |= {name: table for name, (table, _) in module.NOT_RUNNABLE.items()}
    return {name: table for name, table in tables.items() if name in spec_types()}


_QUICK_TYPES = {"gaussian", "laplace", "randomized_response", "poisson_subsampled_gaussian", "zcdp", "approx_dp"}


@pytest.mark.parametrize(
    ("type_name", "table"),
    [
        pytest.param(name, table, marks=[] if name in _QUICK_TYPES else [pytest.mark.slow])
        for name, table in sorted(_registry_cases().items())
    ],
)
def test_every_spec_type_calibrates_to_a_risk_target(type_name, table):
    from dplens._api import PARAMETER_DEFAULTS, calibrate_spec

    table = {k: v for k, v in table.items() if k != "count"}
    param = next((k for k in PARAMETER_DEFAULTS if k in table and k not in ("steps", "count")), "count")
    spec = dplens.parse_spec(
        {"mechanism": [{"type": type_name, **table, **({"count": 1} if param == "count" else {})}]}
    )
    current = attack_risk(spec.accountant(), fprs=(0.01,)).tpr_upper[0]
    target = min(max(current * 1.5, 0.0105), (1 + current) / 2)  # reachable at the value the table holds
    value = 1 if param == "count" else table[param]
    bracket = (1, 64) if param == "count" else (value / 20, value * 20)
    if type_name in ("gaussmix", "modified_gaussmix"):  # γ must stay above the model's floor (γ > 2.5)
        bracket = (max(bracket[0], 3.0), bracket[1])
    result = calibrate_spec(spec, param=param, max_tpr=target, at_fpr=0.01, delta=1e-6, bracket=bracket)
    assert result.achieved <= target, type_name
    value = int(result.value) if param == "count" else result.value
    again = attack_risk(spec.with_param(param, value).accountant(), fprs=(0.01,), method=result.method)
    assert again.tpr_upper[0] <= target, type_name
