"""Float reachability is exact: every genuine draw is reachable, and an output is unreachable only where an
independent brute force proves it (issue 40).

The references: the test as it was before issue 40 (``old_reachable``, dplens's ``floats.reachable`` at 074fbbc:
all 256 ziggurat layers × 5 candidate integers per output, a layer whose candidates did not bracket the output
counted as "inconclusive, so reachable"; the log models' 5 candidates on numpy's log, then a search with the C
library's), which the new test may only make stricter, and only where ``brute_ziggurat`` / ``brute_log`` (a plain
bisection per layer / over the whole index range, no estimate) prove it.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.auditing import floats
from dplens.auditing.floats import SamplerModel, reachable

_TWO53 = float(2**53)
ZIGGURATS = (SamplerModel.NUMPY_NORMAL, SamplerModel.NUMPY_EXPONENTIAL)
LOG_MODELS = (SamplerModel.NUMPY_LAPLACE, SamplerModel.INVERSE_CDF_LAPLACE, SamplerModel.PYTHON_EXPOVARIATE)


# --------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------


def _approximate_outputs(model: SamplerModel, parameter: float, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The same outputs with numpy's vectorised log (equal to the exact ones except in rare last bits)."""
    u = k * (1.0 / 9007199254740992.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        match model:
            case SamplerModel.NUMPY_LAPLACE:
                upper = q - parameter * np.log(2.0 - u - u)
                lower = q + parameter * np.log(u + u)
                return np.where(u >= 0.5, upper, lower)
            case SamplerModel.INVERSE_CDF_LAPLACE:
                v = u - 0.5
                return q + -parameter * np.copysign(1.0, v) * np.log(1.0 - 2.0 * np.abs(v))
            case SamplerModel.PYTHON_EXPOVARIATE:
                return q + -np.log(1.0 - u) / parameter
    raise ValueError(f"model {model!r} is not a log-based sampler")


def _old_log_model_reachable(model: SamplerModel, parameter: float, y: np.ndarray, q: np.ndarray) -> np.ndarray:
    k0 = floats._approximate_index(model, parameter, y, q)
    found = np.zeros(y.shape, dtype=bool)
    for offset in (-2.0, -1.0, 0.0, 1.0, 2.0):  # fast path: numpy's log around the approximate inverse
        k = np.clip(k0 + offset, 1.0 if model is not SamplerModel.PYTHON_EXPOVARIATE else 0.0, _TWO53 - 1.0)
        found |= _approximate_outputs(model, parameter, q, k) == y
    branches = floats._log_branches(model)
    for i in np.flatnonzero(~found & np.isfinite(y)):
        yi, qi = float(y[i]), float(q[i])
        upper = yi >= qi
        branch = next((b for b in branches if b.upper == upper), None)
        if branch is not None:
            found[i] = floats._search(model, parameter, qi, yi, branch, int(k0[i]))
    return found


_BLOCK = 512


def _old_ziggurat_reachable(model: SamplerModel, parameter: float, y: np.ndarray, q: np.ndarray) -> np.ndarray:
    table = floats.ziggurat_widths(model)
    widths = table.to_array()
    limit = float(2**table.mantissa_bits - 1)
    out = np.zeros(y.shape, dtype=bool)
    for start in range(0, y.size, _BLOCK):
        yb, qb = y[start : start + _BLOCK], q[start : start + _BLOCK]
        noise = yb - qb
        positive = noise >= 0
        magnitude = np.abs(noise)
        # Beyond the modelled layers (the tail) or one-sided samplers on the wrong side: unknown / impossible.
        tail = magnitude / parameter >= table.tail_start * (1 - 1e-12)
        m0 = np.round(magnitude[:, None] / (parameter * widths[None, :]))
        hit = np.zeros(yb.shape, dtype=bool)
        low = np.full((*yb.shape, 256), np.inf)
        high = np.full((*yb.shape, 256), -np.inf)
        for offset in (-2.0, -1.0, 0.0, 1.0, 2.0):
            m = np.clip(m0 + offset, 0.0, limit)
            step = parameter * (m * widths[None, :])
            value = np.where(positive[:, None], qb[:, None] + step, qb[:, None] - step)
            hit |= (value == yb[:, None]).any(axis=1)
            low = np.minimum(low, value)
            high = np.maximum(high, value)
        # A layer whose five candidates do not bracket y is inconclusive: call it reachable (power, not validity).
        bracketed = (low <= yb[:, None]) & (high >= yb[:, None])
        inconclusive = ~bracketed.all(axis=1) & ~hit
        if model is SamplerModel.NUMPY_EXPONENTIAL:
            wrong_side = ~positive & (noise != 0)
            out[start : start + _BLOCK] = (hit | tail | inconclusive) & ~wrong_side
        else:
            out[start : start + _BLOCK] = hit | tail | inconclusive
    return out


def old_reachable(outputs, query, model: SamplerModel, scale: float) -> np.ndarray:
    """``floats.reachable`` before issue 40 (each distinct (output, query) decided once)."""
    y = np.asarray(outputs, dtype=float)
    q = np.broadcast_to(np.asarray(query, dtype=float), y.shape)
    flat_y, flat_q = y.reshape(-1), np.ascontiguousarray(q).reshape(-1)
    result = np.ones(flat_y.shape, dtype=bool)
    finite = np.isfinite(flat_y) & np.isfinite(flat_q)
    if finite.any():
        pairs = np.stack([flat_y[finite], flat_q[finite]], axis=1)
        unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
        uy, uq = unique[:, 0].copy(), unique[:, 1].copy()
        if model in (SamplerModel.NUMPY_NORMAL, SamplerModel.NUMPY_EXPONENTIAL):
            verdict = _old_ziggurat_reachable(model, float(scale), uy, uq)
        else:
            verdict = _old_log_model_reachable(model, float(scale), uy, uq)
        result[finite] = verdict[inverse.reshape(-1)]
    return result.reshape(y.shape)


def brute_ziggurat(model: SamplerModel, scale: float, y: float, q: float) -> bool:
    """Whether ``y`` is q + scale·x for a ziggurat draw x, by bisection over m in every layer (no estimate): a
    reference independent of the fast test's arithmetic (the tail, |x| ≥ r·(1 − 2⁻³⁰), counts as reachable)."""
    table = floats.ziggurat_widths(model)
    limit = 2**table.mantissa_bits - 1
    y, q = float(y), float(q)
    if y == q:
        return True
    if y < q:
        if model is SamplerModel.NUMPY_EXPONENTIAL:
            return False
        y, q = -y, -q
    if q + scale * (table.tail_start * (1.0 - 2.0**-30)) <= y:
        return True
    for width in table.widths:
        low, high = -1, limit + 1  # the first m with q + scale·fl(m·w) ≥ y lies in (low, high]
        while high - low > 1:
            middle = (low + high) // 2
            if q + scale * (middle * width) >= y:
                high = middle
            else:
                low = middle
        if high <= limit and q + scale * (high * width) == y:
            return True
    return False


def brute_log(model: SamplerModel, scale: float, y: float, q: float) -> bool:
    """Whether ``y`` is an output of a log model, by bisection over the whole index range with the C library's
    log (no estimate; the outputs are non-decreasing in the index)."""
    low = 0 if model is SamplerModel.PYTHON_EXPOVARIATE else 1
    lo, hi = low - 1, 2**53  # the first k with out(k) ≥ y lies in (lo, hi]
    while hi - lo > 1:
        middle = (lo + hi) // 2
        if floats._exact_output(model, scale, q, middle) >= y:
            hi = middle
        else:
            lo = middle
    return hi < 2**53 and floats._exact_output(model, scale, q, hi) == y


# --------------------------------------------------------------------------------------------
# Every genuine draw is reachable
# --------------------------------------------------------------------------------------------

CASES = [
    (3.0, 1.0),
    (0.0, 0.37),
    (10.0, 4.844805262160108),  # a count under the Gaussian mechanism at (1, 1e-5)
    (1234.5, 2.5),
    (-7.25, 1e-3),
    (1e15, 1.0),  # the query's grid is coarser than the noise's
    (0.0, 1e-310),  # subnormal outputs
    (0.0, 5e-320),  # subnormal outputs of few bits
    (-3.0, 1e250),  # huge noise
]


def parameter(model: SamplerModel, scale: float) -> float:
    """The model's parameter for a noise of this scale (``random.expovariate`` takes a rate)."""
    return min(1.0 / scale, 1e300) if model is SamplerModel.PYTHON_EXPOVARIATE else scale


def genuine(model: SamplerModel, q: float, scale: float, n: int, seed: int) -> np.ndarray:
    """n draws of ``q + noise`` from the sampler the model describes (with the model's parameter), as a target
    would compute them."""
    rng = np.random.default_rng(seed)
    match model:
        case SamplerModel.NUMPY_NORMAL:
            return rng.normal(q, scale, size=n)
        case SamplerModel.NUMPY_EXPONENTIAL:
            return q + rng.exponential(scale, size=n)
        case SamplerModel.NUMPY_LAPLACE:
            return q + rng.laplace(0.0, scale, size=n)
    source = random.Random(seed)
    if model is SamplerModel.PYTHON_EXPOVARIATE:
        return np.array([q + source.expovariate(scale) for _ in range(n)])
    out = []
    for _ in range(n):
        u = source.random() - 0.5
        out.append(q + -scale * math.copysign(1.0, u) * math.log(1.0 - 2.0 * abs(u)))
    return np.array(out)


@pytest.mark.parametrize("model", list(SamplerModel))
@pytest.mark.parametrize(("q", "scale"), CASES)
def test_every_genuine_draw_is_reachable(model, q, scale):
    scale = parameter(model, scale)
    draws = genuine(model, q, scale, 20_000 if model in ZIGGURATS else 4_000, seed=40)
    finite = np.isfinite(draws)
    assert finite.mean() > 0.99
    assert reachable(draws[finite], q, model, scale).all()


def test_draws_of_standard_normal_and_of_a_zero_location_are_reachable():
    rng = np.random.default_rng(7)
    assert reachable(rng.standard_normal(20_000), 0.0, SamplerModel.NUMPY_NORMAL, 1.0).all()
    assert reachable(2.5 + rng.normal(0.0, 0.7, 20_000), 2.5, SamplerModel.NUMPY_NORMAL, 0.7).all()
    assert reachable(rng.standard_exponential(20_000), 0.0, SamplerModel.NUMPY_EXPONENTIAL, 1.0).all()


@pytest.mark.parametrize("model", ZIGGURATS)
def test_every_layer_and_edge_of_the_ziggurat_is_reachable(model):
    """x = m·w_i for every layer i and the extreme mantissas (0, 1, 2, half, limit − 1, limit) and random ones —
    the wedge's and the base strip's largest values included — from several queries and scales, both signs."""
    table = floats.ziggurat_widths(model)
    limit = 2**table.mantissa_bits - 1
    rng = np.random.default_rng(1)
    mantissas = [0, 1, 2, 3, limit // 2, limit - 1, limit, *rng.integers(0, limit, size=8).tolist()]
    x = np.array([float(m) * w for w in table.widths for m in mantissas])
    signs = (1.0, -1.0) if model is SamplerModel.NUMPY_NORMAL else (1.0,)
    for q, scale in CASES:
        for sign in signs:
            y = q + scale * (sign * x)
            finite = np.isfinite(y)
            assert reachable(y[finite], q, model, scale).all(), (q, scale, sign)


@settings(max_examples=25, deadline=None)
@given(
    q=st.floats(-1e6, 1e6, allow_nan=False),
    log_scale=st.floats(-12.0, 12.0),
    seed=st.integers(0, 2**32 - 1),
    model=st.sampled_from((*ZIGGURATS, SamplerModel.NUMPY_LAPLACE)),
)
def test_genuine_draws_are_reachable_for_any_query_and_scale(q, log_scale, seed, model):
    scale = 10.0**log_scale
    draws = genuine(model, q, scale, 2_000, seed)
    assert reachable(draws, q, model, scale).all()


# --------------------------------------------------------------------------------------------
# Unreachable only where proven: against the old test and the brute force
# --------------------------------------------------------------------------------------------

PAIRS = [(10.0, 9.0, 4.844805262160108), (0.0, 1.0, 4.844805262160108), (3.0, 2.0, 0.37), (1234.5, 1233.5, 2.5)]


@pytest.mark.parametrize("model", ZIGGURATS)
@pytest.mark.parametrize(("q", "neighbour", "scale"), PAIRS)
def test_ziggurat_is_only_stricter_than_the_old_test_and_only_where_proven(model, q, neighbour, scale):
    rng = np.random.default_rng(3)
    outputs = np.concatenate([genuine(model, q, scale, 1_500, 1), genuine(model, neighbour, scale, 1_500, 2)])
    for query in (q, neighbour):
        new = reachable(outputs, query, model, scale)
        old = old_reachable(outputs, query, model, scale)
        assert not (new & ~old).any()  # never looser
        stricter = np.flatnonzero(old & ~new)
        for i in rng.permutation(stricter)[:12]:
            assert not brute_ziggurat(model, scale, outputs[i], query), outputs[i]
        for i in rng.choice(outputs.size, 12, replace=False):
            assert brute_ziggurat(model, scale, outputs[i], query) == new[i], outputs[i]


def test_the_old_ziggurat_test_missed_most_impossible_gaussian_outputs():
    """Counts 10 vs 9 under the Gaussian mechanism at (1, 1e-5): a few percent of the outputs on D are impossible
    from D′'s query (q′ + σ·x skips them whatever x is); the old test called every one of them reachable."""
    scale = 4.844805262160108
    outputs = genuine(SamplerModel.NUMPY_NORMAL, 10.0, scale, 20_000, 5)
    new = reachable(outputs, 9.0, SamplerModel.NUMPY_NORMAL, scale)
    old = old_reachable(outputs, 9.0, SamplerModel.NUMPY_NORMAL, scale)
    assert 0.01 < 1.0 - new.mean() < 0.06
    assert old.mean() > 0.999


@pytest.mark.parametrize("model", LOG_MODELS)
@pytest.mark.parametrize(("q", "neighbour", "scale"), [(10.0, 9.0, 1.0), (0.0, 1.0, 1.0), (1.0, 0.0, 10.0)])
def test_log_models_agree_with_the_old_test_and_brute_force(model, q, neighbour, scale):
    rng = np.random.default_rng(4)
    outputs = np.concatenate([genuine(model, q, scale, 800, 1), genuine(model, neighbour, scale, 800, 2)])
    for query in (q, neighbour):
        new = reachable(outputs, query, model, scale)
        assert np.array_equal(new, old_reachable(outputs, query, model, scale))
        for i in rng.choice(outputs.size, 15, replace=False):
            assert brute_log(model, scale, outputs[i], query) == new[i], outputs[i]


@pytest.mark.parametrize("model", LOG_MODELS)
def test_certificates_with_the_c_librarys_log_give_the_same_verdicts(model, monkeypatch):
    outputs = np.concatenate([genuine(model, 3.0, 1.0, 1_000, 1), genuine(model, 2.0, 1.0, 1_000, 2)])
    expected = [reachable(outputs, query, model, 1.0) for query in (3.0, 2.0)]
    monkeypatch.setattr(floats, "_numpy_log_is_libm", lambda: False)
    for query, verdict in zip((3.0, 2.0), expected, strict=True):
        assert np.array_equal(reachable(outputs, query, model, 1.0), verdict)


@pytest.mark.parametrize("model", LOG_MODELS)
def test_a_numpy_log_unlike_the_c_librarys_makes_no_draw_unreachable(model, monkeypatch):
    """A numpy log one ulp off everywhere: the certificates (the C library's log) keep every "unreachable" sound
    (an output numpy's log hits counts as reachable uncertified: power, never validity).

    The truth is :func:`brute_log` (the C library's log, which the samplers call), not ``old_reachable``: the old
    test's fast path accepts a hit on numpy's vectorised log, so where that log is not the C library's (numpy's
    AVX-512F log differs in the last bit, e.g. log(0x1.18f309d633ed0p-3)) it calls reachable outputs that no
    draw gives — such as 1.0135554848989923 from q = 3 here, which only numpy's log reaches."""
    outputs = np.concatenate([genuine(model, 3.0, 1.0, 1_000, 1), genuine(model, 2.0, 1.0, 1_000, 2)])
    exact = [np.array([brute_log(model, 1.0, y, query) for y in outputs.tolist()]) for query in (3.0, 2.0)]
    original = floats._outputs

    def skewed(model, parameter, q, k, log=np.log):
        if log is np.log:
            log = lambda z: np.nextafter(np.log(z), np.inf)  # noqa: E731
        return original(model, parameter, q, k, log=log)

    monkeypatch.setattr(floats, "_outputs", skewed)
    monkeypatch.setattr(floats, "_numpy_log_is_libm", lambda: False)
    for query, truth in zip((3.0, 2.0), exact, strict=True):
        verdict = reachable(outputs, query, model, 1.0)
        assert not (truth & ~verdict).any()  # no reachable output called unreachable
        assert (~verdict).sum() >= 0.3 * (~truth).sum() > 0  # impossible outputs are still proven so


@pytest.mark.parametrize("model", LOG_MODELS)
def test_where_numpy_log_is_the_c_librarys_the_verdicts_are_exact(model, monkeypatch):
    """The path taken where the self-test passes (brackets on numpy's log, uncertified), run on any machine by
    routing numpy's log to the C library's: every verdict equals the brute force's."""
    outputs = np.concatenate([genuine(model, 3.0, 1.0, 1_000, 1), genuine(model, 2.0, 1.0, 1_000, 2)])
    original = floats._outputs

    def libm(model, parameter, q, k, log=np.log):
        return original(model, parameter, q, k, log=floats._libm_log)

    monkeypatch.setattr(floats, "_outputs", libm)
    monkeypatch.setattr(floats, "_numpy_log_is_libm", lambda: True)
    for query in (3.0, 2.0):
        truth = np.array([brute_log(model, 1.0, y, query) for y in outputs.tolist()])
        assert 0 < truth.sum() < truth.size
        assert np.array_equal(reachable(outputs, query, model, 1.0), truth)


def test_numpy_log_self_test_is_consistent():
    z = np.random.default_rng(9).random(2_000) + 1e-300
    if floats._numpy_log_is_libm():
        assert np.array_equal(np.log(z), np.array([math.log(v) for v in z.tolist()]))
    assert np.array_equal(floats._libm_log(z), np.array([math.log(v) for v in z.tolist()]))


# --------------------------------------------------------------------------------------------
# The pieces of the ziggurat test
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ZIGGURATS)
def test_first_layer_table_is_exact(model):
    layers = floats._layers(model)
    reach = layers.reach[:-1]
    a = np.concatenate(
        [
            reach,
            np.nextafter(reach, np.inf),
            np.nextafter(reach, -np.inf),
            np.random.default_rng(2).uniform(0.0, reach[-1] * 1.1, 20_000),
            [0.0, 5e-324, 1e-300, 1e300, np.inf],
        ]
    )
    assert np.array_equal(layers.first_layer(a), np.searchsorted(reach, a, side="left"))


@pytest.mark.parametrize("model", ZIGGURATS)
def test_first_multiple_is_the_first_integer_at_or_above_the_bound(model):
    """fl(m*·w) for m* the first m with fl(m·w) ≥ a, against a bisection over m, for every layer that reaches a."""
    layers = floats._layers(model)
    rng = np.random.default_rng(6)
    a = np.concatenate([rng.uniform(0.0, 4.0, 60), 10.0 ** rng.uniform(-320, 0, 40), layers.reach[:-1][::16]])
    for value in a.tolist():
        eligible = np.flatnonzero(layers.reach[:-1] >= value)
        got = floats._first_multiple(np.full(eligible.size, value), layers.widths[eligible], layers.spread)
        for width, result in zip(layers.widths[eligible].tolist(), got.tolist(), strict=True):
            low, high = -1, int(layers.limit)  # the first m with fl(m·w) ≥ value lies in (low, high]
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (low, middle) if middle * width >= value else (middle, high)
            assert result == high * width, (value, width)


def test_magnitude_interval_ends_are_exact():
    """The interval of doubles a with fl(q + fl(σ·a)) = y: the windowed search against a plain bisection."""
    rng = np.random.default_rng(8)
    for q, scale in [(9.0, 4.84), (0.0, 1.0), (1e15, 1.0), (-3.0, 0.37), (1e-300, 1e-310), (5.0, 1e-3)]:
        a = np.abs(rng.normal(0.0, 1.0, 4_000))
        y = q + scale * a  # outputs q + σ·a, then shifted by a few ulps (some of them impossible)
        y = np.nextafter(y, np.where(rng.random(y.size) < 0.5, np.inf, -np.inf))
        keep = (y > q) & (q + scale * 3.6 > y)
        y, qq = y[keep], np.full(keep.sum(), q)
        low, high = floats._magnitudes(y, qq, scale, 3.6)
        assert np.array_equal(low, floats._bisect(y, qq, scale, 3.6, upper=False))
        assert np.array_equal(high, floats._bisect(y, qq, scale, 3.6, upper=True))


# --------------------------------------------------------------------------------------------
# At scale (slow)
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("model", ZIGGURATS)
def test_a_million_genuine_draws_are_reachable_tails_included(model):
    for q, scale in [(10.0, 4.844805262160108), (0.0, 1.0), (0.0, 1e-310), (1234.5, 2.5), (-3.0, 1e250)]:
        draws = genuine(model, q, scale, 1_000_000, seed=11)
        noise = np.abs(draws - q) / scale
        table = floats.ziggurat_widths(model)
        if q == 0.0 and scale == 1.0:
            assert (noise >= table.tail_start).sum() > 100  # the tail and the base strip's edge are exercised
        assert reachable(draws, q, model, scale).all()


@pytest.mark.slow
@pytest.mark.parametrize("model", ZIGGURATS)
def test_stricter_than_the_old_test_only_where_proven_at_scale(model):
    rng = np.random.default_rng(12)
    scale = 4.844805262160108
    for q, neighbour in [(10.0, 9.0), (1.0, 0.0)]:
        outputs = genuine(model, q, scale, 100_000, 13)
        new = reachable(outputs, neighbour, model, scale)
        old = old_reachable(outputs, neighbour, model, scale)
        assert not (new & ~old).any()
        stricter = np.flatnonzero(old & ~new)
        assert stricter.size > 0
        for i in rng.permutation(stricter)[:100]:
            assert not brute_ziggurat(model, scale, outputs[i], neighbour), outputs[i]
