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
Logarithms are evaluated with :func:`math.log` (the C library's ``log``, which numpy's samplers call);
numpy's vectorised ``np.log`` differs from it in the last bit for a fraction of inputs, so it is only used to
find candidates quickly, and every "unreachable" verdict is confirmed with exact evaluations.

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


def _log_model_reachable(model: SamplerModel, parameter: float, y: np.ndarray, q: np.ndarray) -> np.ndarray:
    k0 = _approximate_index(model, parameter, y, q)
    found = np.zeros(y.shape, dtype=bool)
    for offset in (-2.0, -1.0, 0.0, 1.0, 2.0):  # fast path: numpy's log around the approximate inverse
        k = np.clip(k0 + offset, 1.0 if model is not SamplerModel.PYTHON_EXPOVARIATE else 0.0, _TWO53 - 1.0)
        found |= _approximate_outputs(model, parameter, q, k) == y
    branches = _log_branches(model)
    for i in np.flatnonzero(~found & np.isfinite(y)):
        yi, qi = float(y[i]), float(q[i])
        upper = yi >= qi
        branch = next((b for b in branches if b.upper == upper), None)
        if branch is not None:
            found[i] = _search(model, parameter, qi, yi, branch, int(k0[i]))
    return found


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


@functools.lru_cache(maxsize=4)
def ziggurat_widths(model: SamplerModel, draws: int = 40_000, seed: int = 20_260_101) -> ZigguratWidths:
    """Read the ziggurat layer widths off the installed numpy.

    Draws standard normal / exponential variates one at a time while replaying the bit generator's raw words:
    a draw accepted on its first word (or on the wedge test, which reads one more word and returns the same
    x) satisfies |x| = m·w_i exactly for the layer i and mantissa m in that word, which pins w_i down to one
    double (checked on every such draw). Raises ``ValueError`` if a layer stays unpinned.
    """
    if model not in (SamplerModel.NUMPY_NORMAL, SamplerModel.NUMPY_EXPONENTIAL):
        raise ValueError(f"model must be NUMPY_NORMAL or NUMPY_EXPONENTIAL; got {model!r}")
    bits = np.random.PCG64(seed)
    generator = np.random.Generator(bits)
    replay = np.random.PCG64()
    draw = generator.standard_normal if model is SamplerModel.NUMPY_NORMAL else generator.standard_exponential
    samples: dict[int, list[tuple[int, float]]] = {}
    for _ in range(draws):
        before = bits.state
        x = abs(float(draw()))
        after = bits.state["state"]["state"]
        replay.state = before
        raw = int(replay.random_raw())
        layer, mantissa = _layer_and_mantissa(raw, model)
        if replay.state["state"]["state"] != after:
            replay.random_raw()  # the wedge test reads one more word and returns the same x
            if replay.state["state"]["state"] != after or layer == 0:
                continue
        if mantissa > 0:
            samples.setdefault(layer, []).append((mantissa, x))
    widths = []
    for layer in range(256):
        points = samples.get(layer, [])
        if not points:
            raise ValueError(f"ziggurat layer {layer} of {model.value} was not observed; raise draws")
        mantissa, x = max(points)
        candidate = x / mantissa
        for _ in range(4):
            candidate = math.nextafter(candidate, -math.inf)
        found = []
        for _ in range(9):
            if all(m * candidate == v for m, v in points):
                found.append(candidate)
            candidate = math.nextafter(candidate, math.inf)
        if len(found) != 1:
            raise ValueError(f"ziggurat layer {layer} of {model.value} is ambiguous ({len(found)} widths fit)")
        widths.append(found[0])
    mantissa_bits = 52 if model is SamplerModel.NUMPY_NORMAL else 53
    tail = max(w * float(2**mantissa_bits) for w in widths[1:])
    return ZigguratWidths(widths=tuple(widths), mantissa_bits=mantissa_bits, tail_start=tail)


_BLOCK = 512  # outputs per block in the ziggurat check (block × 256 layers × 5 candidates doubles in memory)


def _ziggurat_reachable(model: SamplerModel, parameter: float, y: np.ndarray, q: np.ndarray) -> np.ndarray:
    table = ziggurat_widths(model)
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
    flat_y, flat_q = y.reshape(-1), np.ascontiguousarray(q).reshape(-1)
    result = np.ones(flat_y.shape, dtype=bool)
    finite = np.isfinite(flat_y) & np.isfinite(flat_q)
    if finite.any():
        # Decide each distinct (output, query) once: grid-valued outputs repeat a lot.
        pairs = np.stack([flat_y[finite], flat_q[finite]], axis=1)
        unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
        uy, uq = unique[:, 0].copy(), unique[:, 1].copy()
        if model in (SamplerModel.NUMPY_NORMAL, SamplerModel.NUMPY_EXPONENTIAL):
            verdict = _ziggurat_reachable(model, parameter, uy, uq)
        else:
            verdict = _log_model_reachable(model, parameter, uy, uq)
        result[finite] = verdict[inverse.reshape(-1)]
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
