"""Floating-point reachability: which doubles a standard sampler can output around a given query value.

A mechanism that adds floating-point noise, ``q + rng.laplace(0, b)``, does not output every double: its outputs
are the images of the sampler's finite set of uniform draws under a chain of rounded operations, and that set
depends on q. An output that the sampler cannot produce from the neighbour's query value q′ identifies the input
with certainty (Mironov, CCS 2012, "On significance of the least significant bits for differential privacy",
§3: the textbook Laplace mechanism in doubles is not ε-DP for any ε). This module decides reachability *exactly*
for named sampler models (:class:`SamplerModel`), following the operations each sampler performs:

- ``NUMPY_LAPLACE`` — ``numpy.random.Generator.laplace(loc, b)``: U = k·2⁻⁵³ (k ≥ 1; U = 0 is redrawn); for
  U ≥ ½ the draw is loc − b·log((2 − U) − U), otherwise loc + b·log(U + U) (numpy's ``distributions.c``).
- ``NUMPY_NORMAL`` — ``Generator.normal(loc, σ)``: loc + σ·x with the ziggurat's x = ±m·w_i (m < 2⁵², 256
  layers i); the tail beyond the ziggurat's base r ≈ 3.65 is not modelled (reported reachable: no power lost
  there can make a bound invalid).
- ``NUMPY_EXPONENTIAL`` — ``Generator.exponential(b)``: b·x with the exponential ziggurat's x = m·w_i (m < 2⁵³);
  the tail beyond r ≈ 7.7 is not modelled.
- ``PYTHON_EXPOVARIATE`` — ``random.expovariate(λ)``: −log(1 − U)/λ with ``random.random()``'s U = k·2⁻⁵³.
- ``INVERSE_CDF_LAPLACE`` — the textbook inverse-CDF Laplace on a 53-bit uniform (``random.random()`` or
  ``Generator.random()``): u = U − ½, noise = ((−b)·copysign(1, u))·log(1 − 2|u|).

Each output is modelled as y = q + noise in double arithmetic (``q + rng.laplace(0, b)`` and
``rng.laplace(q, b)`` give the same double). The ziggurat layer widths w_i are read off the installed numpy
itself (:func:`ziggurat_widths`: draws whose raw 64-bit word is known), so the model follows the numpy in use.

Every verdict costs a constant number of array operations per output (issue 40). The ziggurat models are decided
exactly with products and sums only: the doubles |x| that give y form one interval, found exactly; a layer gives
one of them iff the first integer m whose product m·w_i reaches the interval's low end — computed directly, one
of two or three candidates — stays below its high end (the comment opening the ziggurat section has the proof);
layers are tried from the narrowest that reaches |x| (about one per output). The log models step from an
approximate inverse to the index whose output crosses y. Their logarithms are the C library's ``log`` (which
numpy's and Python's samplers call): numpy's vectorised ``np.log`` stands for it where it reproduces
:func:`math.log` bit for bit on a self-test of 65 536 arguments (:func:`_numpy_log_is_libm`: numpy calls the C
library's log wherever it has no SIMD float64 log, and a SIMD one fails the test); elsewhere every "unreachable"
verdict is certified with :func:`math.log`, and an output hit through numpy's log counts as reachable. Either
way an output is called unreachable only where that is proven (assuming, as the search always did, that the C
library's log is non-decreasing).

The verdicts are used as a *score* in the audit (:mod:`dplens.auditing.target_game`): an output unreachable from
q′ but reachable from q points to D. Whatever the model, the score is a fixed function of the output chosen
before the counted trials, so the ε lower bound stays valid even where a model does not match the target — a
mismatch only costs power.

The noise-free query values come from a probe (:class:`ProbeGenerator`): dplens hands the target a generator
whose ``laplace``/``normal``/``exponential`` draws return the distribution's location (zero noise), and records
which samplers were called with which scale. Targets that draw from another source state their query values.
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "ProbeGenerator",
    "ProbeResult",
    "ProbeUnsupportedError",
    "SamplerModel",
    "probe",
    "reachable",
    "ziggurat_widths",
]

_TWO53 = float(2**53)
_TWO52_INT = 2**52
_TWO53_INT = 2**53


class SamplerModel(enum.Enum):
    """A named floating-point sampler whose exact output set dplens can test (see the module docstring)."""

    NUMPY_LAPLACE = "numpy-laplace"
    NUMPY_NORMAL = "numpy-normal"
    NUMPY_EXPONENTIAL = "numpy-exponential"
    PYTHON_EXPOVARIATE = "python-expovariate"
    INVERSE_CDF_LAPLACE = "inverse-cdf-laplace"

    @property
    def parameter_name(self) -> str:
        """What the model's parameter means: a scale, or ``random.expovariate``'s rate λ."""
        return "lambd" if self is SamplerModel.PYTHON_EXPOVARIATE else "scale"


def _check_parameter(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"scale must be a finite number > 0; got {value!r}")
    return float(value)


# --------------------------------------------------------------------------------------------
# Models with a logarithm: exact search over the 53-bit uniform grid
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Branch:
    """k ↦ y, non-decreasing over k ∈ [low, high], covering outputs on one side of q."""

    low: int
    high: int
    upper: bool  # True: outputs ≥ q; False: outputs < q


def _log_branches(model: SamplerModel) -> tuple[_Branch, ...]:
    match model:
        case SamplerModel.NUMPY_LAPLACE | SamplerModel.INVERSE_CDF_LAPLACE:
            return (_Branch(1, _TWO52_INT - 1, False), _Branch(_TWO52_INT, _TWO53_INT - 1, True))
        case SamplerModel.PYTHON_EXPOVARIATE:
            return (_Branch(0, _TWO53_INT - 1, True),)
    raise ValueError(f"model {model!r} is not a log-based sampler")


def _exact_output(model: SamplerModel, parameter: float, q: float, k: int) -> float:
    """The double the target outputs for uniform index k, computed with the sampler's own operations."""
    u = k * (1.0 / 9007199254740992.0)
    match model:
        case SamplerModel.NUMPY_LAPLACE:
            if u >= 0.5:
                return q - parameter * math.log(2.0 - u - u)
            return q + parameter * math.log(u + u)
        case SamplerModel.INVERSE_CDF_LAPLACE:
            v = u - 0.5
            return q + -parameter * math.copysign(1.0, v) * math.log(1.0 - 2.0 * abs(v))
        case SamplerModel.PYTHON_EXPOVARIATE:
            return q + -math.log(1.0 - u) / parameter
    raise ValueError(f"model {model!r} is not a log-based sampler")


def _approximate_index(model: SamplerModel, parameter: float, y: np.ndarray, q: np.ndarray) -> np.ndarray:
    """An approximate inverse k(y) (float), later refined by exact search."""
    noise = y - q
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        match model:
            case SamplerModel.NUMPY_LAPLACE | SamplerModel.INVERSE_CDF_LAPLACE:
                magnitude = np.exp(-np.abs(noise) / parameter) / 2.0  # U (lower) or 1 − U (upper)
                u = np.where(noise >= 0, 1.0 - magnitude, magnitude)
            case SamplerModel.PYTHON_EXPOVARIATE:
                u = -np.expm1(-np.maximum(noise, 0.0) * parameter)
            case _:
                raise ValueError(f"model {model!r} is not a log-based sampler")
    k = np.nan_to_num(u * _TWO53, nan=0.0, posinf=_TWO53, neginf=0.0)
    return np.clip(np.round(k), 0.0, _TWO53 - 1.0)


def _search(model: SamplerModel, parameter: float, q: float, y: float, branch: _Branch, start: int) -> bool:
    """Whether some k in the branch gives exactly y (the branch is non-decreasing in k): gallop, then bisect."""

    def value(k: int) -> float:
        return _exact_output(model, parameter, q, k)

    k = min(max(start, branch.low), branch.high)
    current = value(k)
    if current == y:
        return True
    step = 1
    if current < y:
        below = k
        while True:
            probe_k = min(below + step, branch.high)
            v = value(probe_k)
            if v == y:
                return True
            if v > y:
                above = probe_k
                break
            if probe_k == branch.high:
                return False
            below, step = probe_k, step * 2
    else:
        above = k
        while True:
            probe_k = max(above - step, branch.low)
            v = value(probe_k)
            if v == y:
                return True
            if v < y:
                below = probe_k
                break
            if probe_k == branch.low:
                return False
            above, step = probe_k, step * 2
    while above - below > 1:  # invariant: value(below) < y < value(above)
        middle = (below + above) // 2
        v = value(middle)
        if v == y:
            return True
        if v < y:
            below = middle
        else:
            above = middle
    return False


def _outputs(model: SamplerModel, parameter: float, q: np.ndarray, k: np.ndarray, log: Any = np.log) -> np.ndarray:
    """The sampler's outputs for uniform indices k, with the sampler's own operations and the given ``log``
    (numpy's, or :func:`_libm_log`: the C library's, which the samplers call)."""
    u = k * (1.0 / 9007199254740992.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        match model:
            case SamplerModel.NUMPY_LAPLACE:  # q − b·log(2 − U − U) for U ≥ ½, else q + b·log(U + U)
                upper = u >= 0.5
                return q + np.where(upper, -parameter, parameter) * log(np.where(upper, 2.0 - u - u, u + u))
            case SamplerModel.INVERSE_CDF_LAPLACE:
                v = u - 0.5
                return q + -parameter * np.copysign(1.0, v) * log(1.0 - 2.0 * np.abs(v))
            case SamplerModel.PYTHON_EXPOVARIATE:
                return q + -log(1.0 - u) / parameter
    raise ValueError(f"model {model!r} is not a log-based sampler")


def _libm_log(z: np.ndarray) -> np.ndarray:
    """The C library's log (:func:`math.log`) of every element: the samplers' own, one Python call each."""
    with np.errstate(divide="ignore"):
        values = [math.log(v) if v > 0.0 else -math.inf for v in z.tolist()]
    return np.array(values, dtype=np.float64).reshape(z.shape)


@functools.lru_cache(maxsize=1)
def _numpy_log_is_libm() -> bool:
    """Whether numpy's vectorised log reproduces the C library's bit for bit on 65 536 arguments of the kinds the
    samplers pass it (k·2⁻⁵³ for uniform and log-uniform k, and their complements).

    Numpy calls the C library's log element by element wherever it has no SIMD implementation of the float64
    log (it has one for AVX-512F); a separate implementation differs from the C library's in the last bit on a
    large share of arguments and fails this test. Where it passes, numpy's log stands for the C library's in
    the log models' certificates; elsewhere they call :func:`math.log` (exact, slower).
    """
    rng = np.random.default_rng(20_261_128)
    uniform = rng.integers(1, 2**53, size=1 << 14).astype(np.float64)
    spread = np.floor(np.exp2(rng.uniform(0.0, 53.0, size=1 << 14)))
    u = np.concatenate([uniform, spread]) * (1.0 / 9007199254740992.0)
    z = np.concatenate([u, 1.0 - u])
    return bool(np.array_equal(np.log(z), _libm_log(z)))


_LOG_BLOCK = 16_384  # outputs per block of the log models' test
_LOG_STEPS = 3  # steps from the approximate inverse before an output falls back to the exact search


def _walk(model: SamplerModel, parameter: float, y: np.ndarray, q: np.ndarray, k: np.ndarray):
    """Step from the approximate inverse k (within the model's range) towards y, one index at a time, on numpy's
    log: per output, whether some index gave y, and where the outputs crossed y without giving it — the indices
    (a, a + 1) with out(a) < y < out(a + 1), or a range end beyond which y lies (a = b) — as (a, b); NaN where
    neither happened within _LOG_STEPS steps."""
    low = 0.0 if model is SamplerModel.PYTHON_EXPOVARIATE else 1.0
    value = _outputs(model, parameter, q, k)
    hit = value == y
    step = np.where(value < y, 1.0, -1.0)
    bracket = np.full((2, y.size), np.nan)
    rows = np.flatnonzero(~hit)
    current = k[rows]
    for _ in range(_LOG_STEPS):
        if rows.size == 0:
            break
        target, direction = y[rows], step[rows]
        following = np.clip(current + direction, low, _TWO53 - 1.0)
        value = _outputs(model, parameter, q[rows], following)
        stuck = following == current  # a range end: y lies beyond every output
        equal = (value == target) & ~stuck
        crossed = ((value < target) != (direction > 0)) & ~equal & ~stuck
        hit[rows[equal]] = True
        ends = stuck | crossed
        bracket[0, rows[ends]] = np.minimum(current, following)[ends]
        bracket[1, rows[ends]] = np.maximum(current, following)[ends]
        keep = ~(equal | ends)
        rows, current = rows[keep], following[keep]
    return hit, bracket


def _certified(model: SamplerModel, parameter: float, y: np.ndarray, q: np.ndarray, bracket: np.ndarray):
    """For brackets found on numpy's log, recomputed with the C library's: (unreachable, reachable) per output;
    neither where the C library's outputs do not bracket y."""
    a, b = bracket
    value_a = _outputs(model, parameter, q, a, log=_libm_log)
    value_b = _outputs(model, parameter, q, b, log=_libm_log)
    end = a == b  # a range end: y lies below its lowest output (a = the lowest index) or above its highest
    below_all = end & (a == (0.0 if model is SamplerModel.PYTHON_EXPOVARIATE else 1.0)) & (value_a > y)
    above_all = end & (a == _TWO53 - 1.0) & (value_a < y)
    inside = ~end & (value_a < y) & (y < value_b)
    return below_all | above_all | inside, (value_a == y) | (value_b == y)


def _log_block(model: SamplerModel, parameter: float, y: np.ndarray, q: np.ndarray) -> np.ndarray:
    start = _approximate_index(model, parameter, y, q)
    start = np.maximum(start, 0.0 if model is SamplerModel.PYTHON_EXPOVARIATE else 1.0)
    out, bracket = _walk(model, parameter, y, q, start)
    rows = np.flatnonzero(~out & ~np.isnan(bracket[0]))  # bracketed: unreachable where numpy's log is libm's
    unsettled = np.flatnonzero(~out & np.isnan(bracket[0]))
    if rows.size and not _numpy_log_is_libm():
        unreachable, reachable_ = _certified(model, parameter, y[rows], q[rows], bracket[:, rows])
        out[rows[reachable_]] = True
        unsettled = np.union1d(unsettled, rows[~unreachable & ~reachable_])
    if unsettled.size:
        out[unsettled] = _search_each(model, parameter, y[unsettled], q[unsettled], start[unsettled])
    return out


def _search_each(model: SamplerModel, parameter: float, y: np.ndarray, q: np.ndarray, start: np.ndarray):
    """The exact search (:func:`_search`, the C library's log) for each output, each distinct one once."""
    branches = _log_branches(model)
    decided: dict[tuple[float, float], bool] = {}
    out = np.zeros(y.shape, dtype=bool)
    for i, (yi, qi, ki) in enumerate(zip(y.tolist(), q.tolist(), start.tolist(), strict=True)):
        if (yi, qi) not in decided:
            branch = next((b for b in branches if b.upper == (yi >= qi)), None)
            decided[yi, qi] = branch is not None and _search(model, parameter, qi, yi, branch, int(ki))
        out[i] = decided[yi, qi]
    return out


def _log_model_reachable(model: SamplerModel, parameter: float, y: np.ndarray, q: np.ndarray) -> np.ndarray:
    out = np.empty(y.shape, dtype=bool)
    for start in range(0, y.size, _LOG_BLOCK):
        stop = start + _LOG_BLOCK
        out[start:stop] = _log_block(model, parameter, y[start:stop], q[start:stop])
    return out


# --------------------------------------------------------------------------------------------
# Ziggurat models (numpy's normal and exponential): products and sums only, exact in numpy
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZigguratWidths:
    """The layer widths w_i of one of numpy's ziggurats (x = m·w_i for layer i) and where its tail begins."""

    widths: tuple[float, ...]
    mantissa_bits: int  # m < 2^mantissa_bits
    tail_start: float  # outputs at or beyond this |x| may come from the unmodelled tail

    def to_array(self) -> np.ndarray:
        return np.asarray(self.widths, dtype=float)


def _layer_and_mantissa(raw: int, model: SamplerModel) -> tuple[int, int]:
    if model is SamplerModel.NUMPY_NORMAL:  # r = e3n52sb8: layer in the low byte, then a sign bit, then 52 bits
        return raw & 0xFF, (raw >> 9) & ((1 << 52) - 1)
    shifted = raw >> 3  # exponential: 3 bits dropped, layer in the next byte, 53 bits above it
    return shifted & 0xFF, shifted >> 8


def _observations(model: SamplerModel, seed: int):
    """(layer, mantissa, |x|) of draws accepted on their first word (or on the wedge test, which reads one more
    word and returns the same x): for them |x| = fl(m·w_i) exactly."""
    bits = np.random.PCG64(seed)
    generator = np.random.Generator(bits)
    replay = np.random.PCG64()
    draw = generator.standard_normal if model is SamplerModel.NUMPY_NORMAL else generator.standard_exponential
    while True:
        before = bits.state
        x = abs(float(draw()))
        after = bits.state["state"]["state"]
        replay.state = before
        layer, mantissa = _layer_and_mantissa(int(replay.random_raw()), model)
        if replay.state["state"]["state"] != after:
            replay.random_raw()  # the wedge test reads one more word and returns the same x
            if replay.state["state"]["state"] != after or layer == 0:
                yield None  # rejected: x comes from later words (or the tail)
                continue
        yield (layer, mantissa, x) if mantissa > 0 else None


def _pin(points: list[tuple[int, float]]) -> float | None:
    """The one double w with fl(m·w) = x for every observed (m, x) (it lies within a few ulps of x/m for the
    largest m), or None where several fit or none was observed."""
    if not points:
        return None
    mantissa, x = max(points)
    candidate = x / mantissa
    for _ in range(4):
        candidate = math.nextafter(candidate, -math.inf)
    found = []
    for _ in range(9):
        if all(m * candidate == v for m, v in points):
            found.append(candidate)
        candidate = math.nextafter(candidate, math.inf)
    return found[0] if len(found) == 1 else None


@functools.lru_cache(maxsize=4)
def ziggurat_widths(model: SamplerModel, draws: int = 65_536, seed: int = 20_260_101) -> ZigguratWidths:
    """Read the ziggurat layer widths off the installed numpy.

    Draws standard normal / exponential variates one at a time while replaying the bit generator's raw words:
    a draw accepted on its first word (or on the wedge test) satisfies |x| = m·w_i exactly for the layer i and
    mantissa m in that word, which pins w_i down to one double (the only one that fits every such draw). Draws
    go on, in rounds of 4 096, until every layer is pinned (about 8 000 draws), at most ``draws``; raises
    ``ValueError`` if a layer is still unpinned then.
    """
    if model not in (SamplerModel.NUMPY_NORMAL, SamplerModel.NUMPY_EXPONENTIAL):
        raise ValueError(f"model must be NUMPY_NORMAL or NUMPY_EXPONENTIAL; got {model!r}")
    samples: dict[int, list[tuple[int, float]]] = {layer: [] for layer in range(256)}
    widths: dict[int, float] = {}
    for count, observed in enumerate(_observations(model, seed), start=1):
        if observed is not None:
            samples[observed[0]].append(observed[1:])
        if count % 4096 == 0 or count == draws:
            for layer in set(range(256)) - set(widths):
                width = _pin(samples[layer])
                if width is not None:
                    widths[layer] = width
            if len(widths) == 256 or count >= draws:
                break
    missing = sorted(set(range(256)) - set(widths))
    if missing:
        raise ValueError(f"ziggurat layer {missing[0]} of {model.value} is not pinned after {draws} draws")
    mantissa_bits = 52 if model is SamplerModel.NUMPY_NORMAL else 53
    ordered = tuple(widths[layer] for layer in range(256))
    tail = max(width * float(2**mantissa_bits) for width in ordered[1:])
    return ZigguratWidths(widths=ordered, mantissa_bits=mantissa_bits, tail_start=tail)


# The test below decides every output exactly with a constant number of array operations per output, plus a few
# per ziggurat layer it tries: one layer for most outputs, more for the few whose |x| is tiny next to the layers'
# grids (each layer then holds the interval below with a small chance). With the query q, the scale σ and y ≠ q,
# orient both so that y > q (the sampler's sign bit is free; the exponential has none, so y < q is impossible
# there) and write G(a) = fl(q + fl(σ·a)): non-decreasing in the double a = |x|. Then:
#
# 1. The magnitudes that give y are the doubles of one interval [a_lo, a_hi] (G is monotone): each end is found
#    exactly by evaluating G on five consecutive doubles around an estimate (from the midpoints between y and
#    its neighbours) and checking that G crosses y inside them; where it does not, by bisection on the bits.
#    An empty interval (G jumps over y: the rounded product σ·a skips doubles) is unreachable whatever the layer.
# 2. Layer i gives a iff some m ≤ limit has fl(m·w_i) ∈ [a_lo, a_hi]. As fl(m·w) is non-decreasing in m, that
#    is iff the first m with fl(m·w) ≥ a_lo — call it m* — has fl(m*·w) ≤ a_hi. For a layer whose reach
#    fl(limit·w) is ≥ a_lo, t = a_lo/w < 2^b (b = 52 or 53: the mantissa's bits), so t̂ = fl(t) is within
#    2^(b−54) of t; and fl(m·w) ≥ a_lo as soon as m·w ≥ a_lo, while fl(m·w) < a_lo when m·w < a_lo·(1 − 2⁻⁵⁴)
#    (half the gap below a_lo). So m* ∈ [t − 2^(b−54), ⌈t⌉], an interval holding at most two integers (b = 52)
#    or three (b = 53) from c = ⌈t̂ − 2^(b−53)⌉ on: m* is the first of them with fl(m·w) ≥ a_lo.
# 3. Layers are tried from the narrowest that reaches a_lo outwards (a narrow layer's grid is the finest, so it
#    is the likeliest to hit), one at a time for _SCAN layers, then _GROUP at a time, until one hits or none is
#    left (unreachable).
#
# Before that, one guess settles most outputs: the layer and the integer that the rounded inverse a₀ = (y − q)/σ
# points to, checked by recomputing G exactly (a hit is a certificate; a miss decides nothing).

_BLOCK = 16_384  # outputs per block of the ziggurat test (its temporaries stay in cache)
_SCAN = 12  # layers tried one at a time before an output is tested against the remaining ones at once
_SCAN_ROWS = 256  # outputs per block of that all-layers test, which takes _GROUP layers at a time
_GROUP = 64
_WINDOW = 2  # doubles on each side of the estimate of an interval's end
_SIGN = np.int64(-(2**63))


@dataclass(frozen=True, slots=True)
class _Layers:
    """A ziggurat's layers in order of reach, and a table giving the first layer that reaches a magnitude."""

    widths: np.ndarray  # w_i in order of reach
    reach: np.ndarray  # fl(limit·w_i), increasing, then +inf (no layer)
    limit: float  # the largest mantissa m
    spread: float  # m* is among ⌈t̂ − spread⌉ + 0, 1 (, 2): ½ for 52-bit mantissas, 1 for 53-bit ones
    tail: float  # a magnitude at or beyond this may come from the unmodelled tail
    cells: float  # cells per unit of magnitude in `first`
    first: np.ndarray  # cell k → the first layer whose reach is ≥ (k − 1)/cells
    guess_width: np.ndarray  # cell k → the width of the first layer whose reach is ≥ (k + 1)/cells (the guess's)

    def first_layer(self, a: np.ndarray) -> np.ndarray:
        """The first layer (in order of reach) whose reach is ≥ a; ``len(widths)`` where none is.

        Cells are a quarter of the smallest gap between two reaches wide, so [(k − 1)/cells, a) holds at most one
        reach: the table's layer, or the next one.
        """
        k = np.minimum(np.fmax(a, 0.0), self.reach[-2] + 1.0) * self.cells
        j = self.first[np.minimum(k.astype(np.int64), self.first.size - 1)]
        return j + (self.reach[j] < a)


@functools.lru_cache(maxsize=4)
def _layers(model: SamplerModel) -> _Layers:
    table = ziggurat_widths(model)
    widths = table.to_array()
    limit = float(2**table.mantissa_bits - 1)
    reach = limit * widths
    order = np.argsort(reach, kind="stable")
    widths, reach = widths[order], reach[order]
    cells = 4.0 / float(np.diff(reach).min())
    bounds = (np.arange(math.ceil((reach[-1] + 1.0) * cells) + 2) - 1.0) / cells
    guess = np.minimum(np.searchsorted(reach, bounds + 2.0 / cells, side="left"), widths.size - 1)
    return _Layers(
        widths=widths,
        reach=np.append(reach, np.inf),
        limit=limit,
        spread=0.5 if table.mantissa_bits == 52 else 1.0,
        tail=table.tail_start * (1.0 - 2.0**-30),
        cells=cells,
        first=np.searchsorted(reach, bounds, side="left"),
        guess_width=widths[guess],
    )


def _first_multiple(low: np.ndarray, width: np.ndarray, spread: float) -> np.ndarray:
    """fl(m*·w) for the first m with fl(m·w) ≥ low (step 2 above: valid for layers whose reach is ≥ low)."""
    c = low / width
    c -= spread
    np.ceil(c, out=c)
    out = c * width
    for _ in range(2 if spread == 1.0 else 1):  # the next candidates, where the previous one falls short
        short = out < low
        c += 1.0
        np.copyto(out, c * width, where=short)
    return out


def _neighbour(y: np.ndarray, step: int) -> np.ndarray:
    """The double ``step`` places above (below, for a negative step) each y, through an order-preserving key."""
    bits = y.view(np.int64)
    key = np.where(bits < 0, _SIGN - bits, bits) + step
    return np.where(key < 0, _SIGN - key, key).view(np.float64)


def _crossing(y: np.ndarray, q: np.ndarray, sigma: float, estimate: np.ndarray, upper: bool):
    """An end of the interval of doubles a ≥ 0 with G(a) = y (upper: the last a with G(a) ≤ y; else the first
    with G(a) ≥ y), searched among the 2·_WINDOW + 1 doubles around ``estimate``; and whether it lies there."""
    start = estimate.view(np.int64) - _WINDOW
    count = np.zeros(y.shape, dtype=np.int64)
    for k in range(2 * _WINDOW + 1):
        g = q + sigma * np.maximum(start + k, 0).view(np.float64)
        count += (g <= y) if upper else (g >= y)
    size = 2 * _WINDOW + 1
    found = (count >= 1) & (count < size)  # G crosses y inside the window (not at its first or last double)
    bits = start + (count - 1 if upper else size - count)
    return np.maximum(bits, 0).view(np.float64), found


def _bisect(y: np.ndarray, q: np.ndarray, sigma: float, top: float, upper: bool) -> np.ndarray:
    """The same end by bisection on the bits of a ∈ [0, top] (G(0) = q < y and G(top) > y)."""
    low = np.zeros(y.shape, dtype=np.int64)
    high = np.full(y.shape, np.float64(top).view(np.int64))
    while True:
        active = high - low > 1
        if not active.any():
            break
        middle = low + (high - low) // 2
        g = q + sigma * middle.view(np.float64)
        below = (g <= y) if upper else (g < y)
        low = np.where(active & below, middle, low)
        high = np.where(active & ~below, middle, high)
    return (low if upper else high).view(np.float64)


def _magnitudes(y: np.ndarray, q: np.ndarray, sigma: float, top: float) -> tuple[np.ndarray, np.ndarray]:
    """[a_lo, a_hi]: the doubles a with fl(q + fl(σ·a)) = y (y > q; G(top) > y), exactly; empty if a_lo > a_hi."""
    d = y - q
    half = 0.5 / sigma
    low = np.fmin(np.fmax((d + (_neighbour(y, -1) - q)) * half, 0.0), top)
    high = np.fmin(np.fmax((d + (_neighbour(y, 1) - q)) * half, 0.0), top)
    a_lo, found_lo = _crossing(y, q, sigma, low, upper=False)
    a_hi, found_hi = _crossing(y, q, sigma, high, upper=True)
    missed = np.flatnonzero(~(found_lo & found_hi))
    if missed.size:
        a_lo[missed] = _bisect(y[missed], q[missed], sigma, top, upper=False)
        a_hi[missed] = _bisect(y[missed], q[missed], sigma, top, upper=True)
    return a_lo, a_hi


def _any_layer(layers: _Layers, a_lo: np.ndarray, a_hi: np.ndarray) -> np.ndarray:
    """Whether some layer gives a magnitude in [a_lo, a_hi] (0 < a_lo ≤ a_hi), layer by layer from the first
    that reaches a_lo, then for the outputs still undecided against _GROUP layers at once, narrowest first."""
    hit = np.zeros(a_lo.shape, dtype=bool)
    layer = layers.first_layer(a_lo)
    rows = np.flatnonzero(layer < layers.widths.size)
    for _ in range(_SCAN):
        if rows.size == 0:
            return hit
        low, high, j = a_lo[rows], a_hi[rows], layer[rows]
        ok = _first_multiple(low, layers.widths[j], layers.spread) <= high
        hit[rows[ok]] = True
        layer[rows] += 1
        rows = rows[~ok & (j + 1 < layers.widths.size)]
    for start in range(0, rows.size, _SCAN_ROWS):
        block = rows[start : start + _SCAN_ROWS]
        for first in range(0, layers.widths.size, _GROUP):
            layer_reach = layers.reach[None, first : first + _GROUP]
            if block.size == 0 or layer_reach[0, -1] < a_lo[block].min():
                continue
            low, high = a_lo[block, None], a_hi[block, None]
            ok = _first_multiple(low, layers.widths[None, first : first + _GROUP], layers.spread) <= high
            ok &= layer_reach >= low
            found = ok.any(axis=1)
            hit[block[found]] = True
            block = block[~found]
    return hit


def _ziggurat_block(layers: _Layers, one_sided: bool, sigma: float, y: np.ndarray, q: np.ndarray) -> np.ndarray:
    d = y - q  # its sign is exact: the difference of two distinct doubles never rounds to zero
    # The tail (|x| ≥ r) is not modelled: an output it may give is reachable. Past the tail's start, G jumps y.
    g = q + np.copysign(sigma * layers.tail, d)
    open_ = ((d > 0) & (g > y)) | ((d < 0) & (g < y))
    if one_sided:
        open_ &= d > 0
    # One guess: the integer nearest a₀/w in a layer reaching a₀ = |y − q|/σ (checked exactly: a hit is certain).
    a0 = np.abs(d) / sigma
    width = layers.guess_width[np.minimum(a0 * layers.cells, layers.guess_width.size - 1.0).astype(np.int64)]
    guess = q + np.copysign(sigma * (np.minimum(np.rint(a0 / width), layers.limit) * width), d) == y
    out = ~open_ | guess
    if one_sided:
        out &= d >= 0
    rest = np.flatnonzero(open_ & ~guess)
    if rest.size:
        sign = np.sign(d[rest])
        yy, qq = y[rest] * sign, q[rest] * sign  # oriented: yy > qq, the noise is +σ·a
        a_lo, a_hi = _magnitudes(yy, qq, sigma, layers.tail)
        nonempty = np.flatnonzero(a_lo <= a_hi)
        decided = np.zeros(rest.size, dtype=bool)
        decided[nonempty] = _any_layer(layers, a_lo[nonempty], a_hi[nonempty])
        out[rest] = decided
    return out


def _ziggurat_reachable(model: SamplerModel, parameter: float, y: np.ndarray, q: np.ndarray) -> np.ndarray:
    layers = _layers(model)
    one_sided = model is SamplerModel.NUMPY_EXPONENTIAL
    out = np.empty(y.shape, dtype=bool)
    for start in range(0, y.size, _BLOCK):
        stop = start + _BLOCK
        out[start:stop] = _ziggurat_block(layers, one_sided, parameter, y[start:stop], q[start:stop])
    return out


# --------------------------------------------------------------------------------------------
# The public check
# --------------------------------------------------------------------------------------------


def reachable(outputs: Any, query: Any, model: SamplerModel, scale: float) -> np.ndarray:
    """Whether each output double can be produced as ``query + noise`` by the sampler ``model``.

    Args:
        outputs: float outputs (any shape).
        query: the noise-free query value(s), broadcast against ``outputs``.
        model: the sampler (a :class:`SamplerModel`).
        scale: the sampler's scale (``PYTHON_EXPOVARIATE``: its rate λ).

    Returns:
        A boolean array of ``outputs``' shape. ``False`` is certain (no uniform draw reproduces the output bit
        for bit); ``True`` includes the outputs the model cannot decide (a ziggurat's tail, non-finite values).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> draws = 3.0 + rng.laplace(0.0, 1.0, size=1000)
        >>> bool(reachable(draws, 3.0, SamplerModel.NUMPY_LAPLACE, 1.0).all())  # every draw from its own query
        True
        >>> bool(reachable(draws, 2.0, SamplerModel.NUMPY_LAPLACE, 1.0).all())  # some are impossible from 2.0
        False
    """
    if not isinstance(model, SamplerModel):
        raise ValueError(f"model must be a SamplerModel; got {model!r}")
    parameter = _check_parameter(scale)
    y = np.asarray(outputs, dtype=float)
    q = np.broadcast_to(np.asarray(query, dtype=float), y.shape)
    flat_y, flat_q = y.reshape(-1), q.reshape(-1)
    ziggurat = model in (SamplerModel.NUMPY_NORMAL, SamplerModel.NUMPY_EXPONENTIAL)
    test = _ziggurat_reachable if ziggurat else _log_model_reachable
    finite = np.isfinite(flat_y) & np.isfinite(flat_q)
    if finite.all():
        result = test(model, parameter, flat_y, flat_q)
    else:  # non-finite outputs (or queries) are not modelled: reachable
        result = np.ones(flat_y.shape, dtype=bool)
        rows = np.flatnonzero(finite)
        if rows.size:
            result[rows] = test(model, parameter, flat_y[rows], flat_q[rows])
    return result.reshape(y.shape)


# --------------------------------------------------------------------------------------------
# The probe: a generator whose draws are the distributions' locations
# --------------------------------------------------------------------------------------------


class ProbeUnsupportedError(RuntimeError):
    """The target asked the probe for something that has no noise-free value (e.g. ``random()``)."""


_PROBED = {
    "laplace": SamplerModel.NUMPY_LAPLACE,
    "normal": SamplerModel.NUMPY_NORMAL,
    "standard_normal": SamplerModel.NUMPY_NORMAL,
    "exponential": SamplerModel.NUMPY_EXPONENTIAL,
    "standard_exponential": SamplerModel.NUMPY_EXPONENTIAL,
}
_ALLOWED = {"__class__", "__dict__", "calls", "_record", "_zero", *_PROBED}


class ProbeGenerator(np.random.Generator):
    """A ``numpy.random.Generator`` whose noise draws are zero: ``laplace(loc, b)`` and ``normal(loc, σ)``
    return ``loc``, ``exponential(b)`` returns 0; each call is recorded (sampler, scale). Anything else
    (``random``, ``integers``, the bit generator, …) raises :class:`ProbeUnsupportedError`, since it has no
    noise-free value.

    Example:
        >>> rng = ProbeGenerator()
        >>> 3.0 + rng.laplace(0.0, 2.0)
        3.0
        >>> rng.calls
        [('laplace', 2.0)]
    """

    def __init__(self) -> None:
        super().__init__(np.random.PCG64(0))
        self.calls: list[tuple[str, float]] = []

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("__") or name in _ALLOWED:
            return super().__getattribute__(name)
        raise ProbeUnsupportedError(f"Generator.{name}")

    def _record(self, name: str, scale: Any) -> None:
        scales = np.unique(np.asarray(scale, dtype=float))
        self.calls.append((name, float(scales[0]) if scales.size == 1 else math.nan))

    @staticmethod
    def _zero(loc: Any, size: Any) -> Any:
        if size is None and np.ndim(loc) == 0:
            return float(loc)
        shape = np.broadcast_shapes(np.shape(loc), () if size is None else tuple(np.atleast_1d(size)))
        return np.broadcast_to(np.asarray(loc, dtype=float), shape).copy()

    def laplace(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        self._record("laplace", scale)
        return self._zero(loc, size)

    def normal(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        self._record("normal", scale)
        return self._zero(loc, size)

    def standard_normal(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        self._record("standard_normal", 1.0)
        return self._zero(0.0, size)

    def exponential(self, scale: Any = 1.0, size: Any = None) -> Any:
        self._record("exponential", scale)
        return self._zero(0.0, size)

    def standard_exponential(self, size: Any = None, dtype: Any = np.float64, method: str = "zig", out: Any = None):
        self._record("standard_exponential", 1.0)
        return self._zero(0.0, size)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeResult:
    """What a probe run learned: the noise-free outputs and the samplers the target called (with their scale)."""

    available: bool
    query_data: Any = None
    query_neighbour: Any = None
    samplers: tuple[tuple[SamplerModel, float], ...] = ()
    note: str = ""
    calls: tuple[tuple[str, float], ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            return np.asarray(value, dtype=float).tolist() if value is not None else None

        return {
            "available": self.available,
            "query_data": plain(self.query_data),
            "query_neighbour": plain(self.query_neighbour),
            "samplers": [{"sampler": m.value, "scale": s} for m, s in self.samplers],
            "calls": [list(c) for c in self.calls],
            "note": self.note,
        }


def _numeric(value: Any) -> np.ndarray | None:
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    return array if np.all(np.isfinite(array)) else None


def probe(run: Any, data: Any, neighbour: Any) -> ProbeResult:
    """Run ``run(data, rng)`` with a :class:`ProbeGenerator` on both inputs and read off the query values.

    Usable when the target draws only from the probed samplers and returns numbers (a family called with several
    scales gives one candidate per scale); otherwise ``available`` is False and ``note`` says why (the float
    checks then need stated query values).
    """
    outputs, calls = [], []
    for value in (data, neighbour):
        rng = ProbeGenerator()
        try:
            output = run(value, rng)
        except ProbeUnsupportedError as err:
            return ProbeResult(available=False, note=f"the target draws from {err} (no noise-free value)")
        except Exception as err:  # the target's own failure on a zero-noise draw: no probe, no float check
            return ProbeResult(available=False, note=f"the target failed under the probe: {type(err).__name__}: {err}")
        numeric = _numeric(output)
        if numeric is None:
            return ProbeResult(available=False, note="the target's outputs are not finite numbers")
        outputs.append(numeric)
        calls.extend(rng.calls)
    if not calls:
        return ProbeResult(available=False, note="the target drew no noise from the generator dplens handed it")
    if outputs[0].shape != outputs[1].shape:
        return ProbeResult(available=False, note="the two inputs give outputs of different shapes")
    # Every (sampler, scale) the target called is a candidate model of its outputs: a sparse vector draws its
    # threshold, comparison and answer noise from one family at different scales, and only the pilot can tell
    # which of them (if any) its real outputs are drawn with (target_game's own-side reachability).
    samplers: tuple[tuple[SamplerModel, float], ...] = ()
    for name, scale in calls:
        entry = (_PROBED[name], scale)
        if math.isfinite(scale) and scale > 0 and entry not in samplers:
            samplers = (*samplers, entry)
    note = "query values from the probe (zero-noise draws)"
    if len({model for model, _ in samplers}) < len(samplers):
        note += "; a sampler called with several scales: each scale is a candidate model"
    if any(not (math.isfinite(scale) and scale > 0) for _, scale in calls):
        note += "; draws with per-element scales are not modelled"
    return ProbeResult(
        available=bool(samplers),
        query_data=outputs[0],
        query_neighbour=outputs[1],
        samplers=samplers,
        note=note,
        calls=tuple(calls),
    )
