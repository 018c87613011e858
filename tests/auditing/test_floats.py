"""Float reachability: exact inversion of the standard samplers (no own-side misses) and true impossibilities."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from dplens.auditing import floats
from dplens.auditing.floats import ProbeGenerator, ProbeUnsupportedError, SamplerModel, probe, reachable


def _draws(model: SamplerModel, q: float, scale: float, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    match model:
        case SamplerModel.NUMPY_LAPLACE:
            return q + rng.laplace(0.0, scale, size=n)
        case SamplerModel.NUMPY_NORMAL:
            return rng.normal(q, scale, size=n)
        case SamplerModel.NUMPY_EXPONENTIAL:
            return q + rng.exponential(scale, size=n)
    source = random.Random(seed)
    if model is SamplerModel.PYTHON_EXPOVARIATE:
        return np.array([q + source.expovariate(scale) for _ in range(n)])
    out = []
    for _ in range(n):
        u = source.random() - 0.5
        out.append(q + -scale * math.copysign(1.0, u) * math.log(1.0 - 2.0 * abs(u)))
    return np.array(out)


@pytest.mark.parametrize("model", list(SamplerModel))
@pytest.mark.parametrize(("q", "scale"), [(3.0, 1.0), (0.0, 0.37), (1234.5, 2.5), (-7.25, 1e-3)])
def test_every_correct_draw_is_reachable_from_its_own_query(model, q, scale):
    draws = _draws(model, q, scale, 4000, seed=11)
    assert reachable(draws, q, model, scale).all()


def test_unreachable_verdicts_are_certain_by_brute_force():
    """Every output declared unreachable from q' has no uniform index within ±3000 of the inverse reproducing it."""
    draws = _draws(SamplerModel.NUMPY_LAPLACE, 3.0, 1.0, 2000, seed=3)
    verdict = reachable(draws, 2.0, SamplerModel.NUMPY_LAPLACE, 1.0)
    assert 0.3 < 1 - verdict.mean() < 0.6  # Mironov's leak: a large share is impossible from the neighbour
    for y in draws[~verdict][:40]:
        k0 = int(floats._approximate_index(SamplerModel.NUMPY_LAPLACE, 1.0, np.array([y]), np.array([2.0]))[0])
        for k in range(max(1, k0 - 3000), k0 + 3000):
            assert floats._exact_output(SamplerModel.NUMPY_LAPLACE, 1.0, 2.0, k) != y


def test_exact_output_reproduces_numpy_laplace_bit_for_bit():
    bits = np.random.PCG64(5)
    replay = np.random.PCG64()
    generator = np.random.Generator(bits)
    for _ in range(2000):
        replay.state = bits.state
        k = int(replay.random_raw()) >> 11
        value = 2.5 + generator.laplace(0.0, 0.7)
        if k:
            assert floats._exact_output(SamplerModel.NUMPY_LAPLACE, 0.7, 2.5, k) == value


@pytest.mark.parametrize("model", [SamplerModel.NUMPY_NORMAL, SamplerModel.NUMPY_EXPONENTIAL])
def test_ziggurat_widths_are_pinned_and_reproduce_draws(model):
    table = floats.ziggurat_widths(model)
    assert len(table.widths) == 256 and len(set(table.widths)) == 256
    expected_tail = 3.6541528853610088 if model is SamplerModel.NUMPY_NORMAL else 7.69711747013104972
    assert table.tail_start == pytest.approx(expected_tail, rel=1e-12)  # Marsaglia & Tsang's r


def test_ziggurat_widths_are_numpys_constants():
    """The widths read off the installed numpy are the doubles of numpy's ziggurat_constants.h (wi_double,
    we_double), and the tail starts at its ziggurat_nor_r / ziggurat_exp_r exactly."""
    normal = floats.ziggurat_widths(SamplerModel.NUMPY_NORMAL)
    assert normal.widths[0] == 8.68362706080130616677e-16 and normal.widths[1] == 4.77933017572773682428e-17
    assert normal.widths[255] == 8.11384933765648418565e-16 and normal.tail_start == 3.6541528853610087963519472518
    exponential = floats.ziggurat_widths(SamplerModel.NUMPY_EXPONENTIAL)
    assert exponential.widths[0] == 9.655740063209182975e-16 and exponential.widths[1] == 7.089014243955414331e-18
    assert exponential.widths[255] == 8.545517038584027421e-16
    assert exponential.tail_start == 7.6971174701310497140446280481


def test_exponential_cannot_go_below_its_query():
    assert not reachable(np.array([2.999]), 3.0, SamplerModel.NUMPY_EXPONENTIAL, 1.0)[0]
    assert not reachable(np.array([2.999]), 3.0, SamplerModel.PYTHON_EXPOVARIATE, 1.0)[0]


def test_non_finite_outputs_count_as_reachable_and_bad_input_is_refused():
    assert reachable(np.array([np.nan, np.inf]), 0.0, SamplerModel.NUMPY_LAPLACE, 1.0).all()
    with pytest.raises(ValueError, match="model must be a SamplerModel"):
        reachable([1.0], 0.0, "numpy-laplace", 1.0)
    with pytest.raises(ValueError, match="scale must be a finite number > 0; got -1"):
        reachable([1.0], 0.0, SamplerModel.NUMPY_LAPLACE, -1)


def test_probe_returns_locations_and_records_samplers():
    def target(data, rng):
        return float(sum(data)) + rng.laplace(0.0, 0.5) + rng.normal(1.0, 2.0, size=2).sum()

    result = probe(target, [1, 2], [1])
    assert result.available
    assert float(result.query_data) == 5.0 and float(result.query_neighbour) == 3.0
    assert dict(result.samplers) == {SamplerModel.NUMPY_LAPLACE: 0.5, SamplerModel.NUMPY_NORMAL: 2.0}


def test_probe_keeps_every_scale_of_a_sampler_as_a_candidate():
    # A sparse vector draws its threshold, comparison and answer noise from one family at three scales.
    def target(data, rng):
        threshold = rng.laplace(0.0, 30.0)
        above = data[0] + rng.laplace(0.0, 120.0) >= 1.0 + threshold
        return data[0] + rng.laplace(0.0, 60.0) if above else 0.0

    result = probe(target, [1.0], [0.0])
    assert result.available
    assert result.samplers == ((SamplerModel.NUMPY_LAPLACE, 30.0), (SamplerModel.NUMPY_LAPLACE, 120.0),
                               (SamplerModel.NUMPY_LAPLACE, 60.0))  # fmt: skip
    assert "each scale is a candidate" in result.note


def test_probe_refuses_draws_without_a_noise_free_value():
    rng = ProbeGenerator()
    with pytest.raises(ProbeUnsupportedError):
        rng.random()
    result = probe(lambda data, rng: data + rng.integers(0, 3), 1, 0)
    assert not result.available and "integers" in result.note
    result = probe(lambda data, rng: data + np.random.laplace(), 1.0, 0.0)
    assert not result.available and "drew no noise" in result.note
