"""Additive-noise mechanisms: Gaussian, Laplace, randomized response, Poisson-subsampled Gaussian (DP-SGD).

Each is a runnable :class:`~dplens.mechanisms.base.Mechanism` on a query whose value the caller passes in
*units of its sensitivity* (the accountant's noise multiplier is σ / Δ, so the worst case is a pair of query
values one unit apart), with the exact log-likelihood ratio for the optimal (Neyman–Pearson) audit and a
documented worst-case neighbouring pair. ``sample`` draws n outputs in one vectorised call.

``release`` — the output a user deploys — is *secure*: the Laplace and Gaussian mechanisms snap the query to a
power-of-two grid Λ ≤ 2⁻¹⁰ × the noise scale (exactly, in integers of Λ; clamped to ±2³⁰ units, or less where the
grid is fine) and add exact discrete Laplace / discrete Gaussian noise in units of Λ (Canonne, Kamath, Steinke 2020;
:mod:`dplens.mechanisms.exact`), so no floating-point sampler decides which doubles can come out (the flaw of the
textbook ``f(D) + rng.laplace(0, b)``, Mironov 2012). ``release_event(dimension)`` is the accountant's event of
that release (:mod:`dplens.accountant.discrete`) and covers the discretisation: its ε is at most the continuous
mechanism's. The textbook float path remains only behind ``release(..., insecure_float=True)``, a documented
demonstration of the flaw; ``sample`` stays the fast vectorised float sampler used to audit the mathematics.

Also here: :class:`NoLeakage`, a mechanism whose output does not depend on the data (true ε = 0) — the null
case of the audit validity suite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from dplens.accountant import events as ev
from dplens.mechanisms.base import NeighbouringPair, check_count, check_rng

__all__ = [
    "CLAMP_UNITS",
    "GRID_BITS",
    "GaussianMechanism",
    "LaplaceMechanism",
    "NoLeakage",
    "RandomizedResponseMechanism",
    "SubsampledGaussianMechanism",
    "release_grid",
]


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)


def _relation(value: Any) -> ev.NeighboringRelation:
    if not isinstance(value, ev.NeighboringRelation):
        raise ValueError(f"neighboring must be a NeighboringRelation; got {value!r}")
    return value


def _query(data: Any, name: str = "data") -> np.ndarray:
    try:
        arr = np.asarray(data, dtype=float)
    except (TypeError, ValueError):
        arr = np.full(2, np.nan)  # not numeric: reported below, naming the argument
    if arr.ndim > 1 or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be a finite scalar or vector query value; got {data!r}")
    return arr


def _pair(data: Any, neighbour: Any) -> tuple[np.ndarray, np.ndarray]:
    a, b = _query(data), _query(neighbour, "neighbour")
    if a.shape != b.shape:  # never broadcast one against the other: that silently changes the pair
        raise ValueError(f"neighbour must have the shape of data {a.shape}; got {neighbour!r}")
    return a, b


#: The release grid is Λ = 2^(⌊log2 scale⌋ − GRID_BITS) (at most 1): ≥ 2^GRID_BITS grid steps per noise scale.
GRID_BITS = 10
#: Queries are clamped to ±CLAMP_UNITS sensitivity units (and to ±2^50·Λ) so grid integers stay exact in doubles.
CLAMP_UNITS = float(2**30)


def release_grid(scale: float) -> float:
    """The power-of-two grid Λ of a secure release with noise scale ``scale`` (in sensitivity units): Λ ≤ 1, so
    a query that moves by one unit moves by exactly 1/Λ grid steps."""
    return min(1.0, 2.0 ** (math.floor(math.log2(scale)) - GRID_BITS))


def _snap(query: np.ndarray, grid: float) -> np.ndarray:
    """round-half-up(q/Λ) in integers, exactly (q/Λ is exact: Λ is a power of two), after clamping.

    With r(x) = ⌊x + ½⌋, |r(x) − r(y)| ≤ ⌈|x − y|⌉, so queries one unit apart give grid integers at most 1/Λ
    apart (the accounted sensitivity); an ℓ1 or ℓ2 distance over d coordinates grows by at most d − 1 or √d.
    """
    limit = min(CLAMP_UNITS, 2.0**50 * grid)
    x = np.clip(query, -limit, limit) / grid
    whole = np.floor(x)
    return (whole + (x - whole >= 0.5)).astype(np.int64)


def _grid_outputs(integers: np.ndarray, grid: float, query: np.ndarray) -> np.ndarray:
    out = integers.astype(float) * grid  # exact: |integers| < 2^53 and Λ a power of two
    return out.reshape(-1) if query.ndim == 0 else out.reshape((-1, *query.shape))


def _outputs(outputs: Any, query: np.ndarray) -> np.ndarray:
    out = np.asarray(outputs, dtype=float)
    if query.ndim == 0:
        return out.reshape(-1)
    if out.ndim == 1:
        out = out[None, :]
    if out.ndim != 2 or out.shape[1] != query.size:
        raise ValueError(f"outputs must have shape (n, {query.size}); got {np.shape(outputs)!r}")
    return out


def _release_one(mechanism: Any, data: Any, rng: np.random.Generator, insecure_float: bool) -> Any:
    """One output of a grid mechanism: its first secure release, or (``insecure_float``) its first float sample."""
    if insecure_float:
        return mechanism.sample(data, 1, check_rng(rng))[0]
    out = mechanism.release_batch(data, 1, rng)
    return float(out[0]) if out.ndim == 1 else out[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class GaussianMechanism:
    """f(D) + N(0, σ²I) with σ = ``noise_multiplier`` (query values in units of the ℓ2-sensitivity).

    The worst case (Balle & Wang 2018) is any pair of query values at distance 1; the privacy loss is then
    N(μ²/2, μ²) with μ = 1/σ, i.e. the mechanism is exactly μ-GDP (Dong, Roth, Su 2022, Theorem 2.7).
    """

    noise_multiplier: float
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _positive("noise_multiplier", self.noise_multiplier))
        _relation(self.neighboring)

    @property
    def event(self) -> ev.Gaussian:
        return ev.Gaussian(noise_multiplier=self.noise_multiplier, neighboring=self.neighboring)

    def release(self, data: Any, rng: np.random.Generator, *, insecure_float: bool = False) -> Any:
        """One secure output: the query snapped to the grid Λ (:func:`release_grid`) plus exact discrete Gaussian
        noise N_Z(0, ⌈σ/Λ⌉²) in units of Λ (CKS 2020 Algorithm 3), accounted by :meth:`release_event`.

        ``insecure_float=True`` returns the textbook ``f(D) + σ·N(0, 1)`` in doubles instead — a demonstration of
        the floating-point flaw (Mironov 2012; Jin et al., S&P 2022), never for deployment.

        Example:
            >>> import numpy as np
            >>> mechanism = GaussianMechanism(noise_multiplier=1.0)
            >>> value = mechanism.release(3.0, np.random.default_rng(0))
            >>> (value / release_grid(1.0)).is_integer()  # a multiple of the grid
            True
        """
        return _release_one(self, data, rng, insecure_float)

    def release_batch(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` independent secure releases at once (the same distribution as ``n`` calls of :meth:`release`;
        shape (n,) or (n, d)) — what an audit of the release runs."""
        from dplens.mechanisms.exact import discrete_gaussian

        query, n, rng = _query(data), check_count(n), check_rng(rng)
        grid = release_grid(self.noise_multiplier)
        sigma = math.ceil(self.noise_multiplier / grid)
        noise = discrete_gaussian(sigma * sigma, n * max(query.size, 1), rng).reshape(n, -1)
        return _grid_outputs(_snap(query, grid).reshape(1, -1) + noise, grid, query)

    def release_event(self, dimension: int = 1) -> ev.Event:
        """The accountant's event of :meth:`release` on a ``dimension``-coordinate query: a discrete Gaussian with
        σ = ⌈σ₀/Λ⌉ and integer ℓ2-sensitivity 1/Λ (plus ⌈√d⌉ for d > 1; see :func:`_snap`) — its ρ is at most the
        continuous mechanism's 1/(2σ₀²)."""
        from dplens.accountant.discrete import DiscreteGaussian

        check_count(dimension, name="dimension")
        grid = release_grid(self.noise_multiplier)
        steps = round(1.0 / grid)
        sensitivity = steps if dimension == 1 else steps + math.ceil(math.sqrt(dimension))
        return DiscreteGaussian(
            sigma=float(math.ceil(self.noise_multiplier / grid)),
            sensitivity=sensitivity,
            dimension=dimension,
            neighboring=self.neighboring,
        )

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """n outputs: shape (n,) for a scalar query, (n, d) for a vector one (fast float sampler, for audits of
        the mathematics; :meth:`release` is the secure output)."""
        query, n, rng = _query(data), check_count(n), check_rng(rng)
        noise = rng.standard_normal((n, *query.shape))
        noise *= self.noise_multiplier
        noise += query
        return noise

    def log_likelihood_ratio(self, outputs: Any, data: Any, neighbour: Any) -> np.ndarray:
        """log p_D(o) − log p_D′(o) = ⟨o − (a + b)/2, a − b⟩ / σ² for query values a = f(D), b = f(D′)."""
        a, b = _pair(data, neighbour)
        out = _outputs(outputs, a)
        diff = a - b
        centred = out - (a + b) / 2
        dot = centred * diff if a.ndim == 0 else centred @ diff
        return dot / self.noise_multiplier**2

    def worst_case_pair(self) -> NeighbouringPair:
        return NeighbouringPair(
            data=1.0,
            neighbour=0.0,
            description=f"query value 1 vs 0 (one sensitivity unit apart; {self.neighboring.value})",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LaplaceMechanism:
    """f(D) + Lap(b) per coordinate with b = ``scale`` (query values in units of the ℓ1-sensitivity): (1/b)-DP.

    Worst case (Dwork et al. 2006): query values 1 vs 0; the loss is exactly 1/b for every output ≥ 1.
    """

    scale: float
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _positive("scale", self.scale))
        _relation(self.neighboring)

    @property
    def event(self) -> ev.Laplace:
        return ev.Laplace(noise_multiplier=self.scale, neighboring=self.neighboring)

    def release(self, data: Any, rng: np.random.Generator, *, insecure_float: bool = False) -> Any:
        """One secure output: the query snapped to the grid Λ (:func:`release_grid`) plus exact discrete Laplace
        noise P(z) ∝ exp(−|z|/t), t = ⌈b/Λ⌉, in units of Λ (CKS 2020 Algorithm 2), accounted by
        :meth:`release_event`.

        ``insecure_float=True`` returns the textbook ``f(D) + rng.laplace(0, b)`` in doubles — the mechanism
        Mironov (2012) showed is not ε-DP (``dplens audit --target`` finds it) — kept only as a demonstration.

        Example:
            >>> import numpy as np
            >>> mechanism = LaplaceMechanism(scale=1.0)
            >>> value = mechanism.release(3.0, np.random.default_rng(0))
            >>> (value / release_grid(1.0)).is_integer()
            True
            >>> round(mechanism.release_event().pure_dp_epsilon(), 12)  # 1/b: the grid costs nothing (a rounded up)
            1.0
        """
        return _release_one(self, data, rng, insecure_float)

    def release_batch(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` independent secure releases at once (the same distribution as ``n`` calls of :meth:`release`;
        shape (n,) or (n, d)) — what an audit of the release runs."""
        from dplens.mechanisms.exact import discrete_laplace

        query, n, rng = _query(data), check_count(n), check_rng(rng)
        grid = release_grid(self.scale)
        noise = discrete_laplace(math.ceil(self.scale / grid), n * max(query.size, 1), rng).reshape(n, -1)
        return _grid_outputs(_snap(query, grid).reshape(1, -1) + noise, grid, query)

    def release_event(self, dimension: int = 1) -> ev.Event:
        """The accountant's event of :meth:`release` on a ``dimension``-coordinate query: a discrete Laplace with
        a = 1/⌈b/Λ⌉ (rounded up) and integer ℓ1-sensitivity 1/Λ + d − 1 (see :func:`_snap`); for d = 1 its
        ε = (1/Λ)/⌈b/Λ⌉ is at most the continuous mechanism's 1/b."""
        from dplens.accountant.discrete import DiscreteLaplace

        check_count(dimension, name="dimension")
        grid = release_grid(self.scale)
        parameter = math.nextafter(1.0 / math.ceil(self.scale / grid), math.inf)  # never below the true 1/t
        return DiscreteLaplace(
            noise_parameter=parameter,
            sensitivity=round(1.0 / grid) + dimension - 1,
            neighboring=self.neighboring,
        )

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """n float outputs (fast, for audits of the mathematics; :meth:`release` is the secure output)."""
        query, n, rng = _query(data), check_count(n), check_rng(rng)
        return query + rng.laplace(0.0, self.scale, size=(n, *query.shape))

    def log_likelihood_ratio(self, outputs: Any, data: Any, neighbour: Any) -> np.ndarray:
        """(|o − b| − |o − a|)/scale, summed over coordinates.

        Evaluated on o clipped to [min(a, b), max(a, b)] per coordinate — the same function in exact arithmetic —
        so the atoms ±|a − b|/scale come out bit-identical whichever side drew o. Unclipped, |o| − |o − 1| rounds
        to just below −1 for some outputs of one side only, and a threshold at the atom then "detects" that
        rounding (a floating-point artefact of the score, not the mechanism's ε; Mironov 2012).
        """
        a, b = _pair(data, neighbour)
        out = np.clip(_outputs(outputs, a), np.minimum(a, b), np.maximum(a, b))
        loss = (np.abs(out - b) - np.abs(out - a)) / self.scale
        return loss if a.ndim == 0 else loss.sum(axis=1)

    def worst_case_pair(self) -> NeighbouringPair:
        return NeighbouringPair(
            data=1.0, neighbour=0.0, description=f"query value 1 vs 0 (one sensitivity unit; {self.neighboring.value})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RandomizedResponseMechanism:
    """k-ary randomized response: the true value w.p. e^ε/(e^ε + k − 1), else a uniform other value (ε-DP).

    Data is the record's value in {0, …, k − 1}; neighbours differ in that value (replace-one). The loss between
    values a ≠ b is ε at output a, −ε at output b and 0 elsewhere (Kairouz, Oh, Viswanath 2016).
    """

    epsilon: float
    num_values: int = 2
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.REPLACE_ONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _positive("epsilon", self.epsilon))
        if isinstance(self.num_values, bool) or not isinstance(self.num_values, int) or self.num_values < 2:
            raise ValueError(f"num_values must be an integer >= 2; got {self.num_values!r}")
        _relation(self.neighboring)

    @property
    def event(self) -> ev.RandomizedResponse:
        return ev.RandomizedResponse(epsilon=self.epsilon, num_values=self.num_values, neighboring=self.neighboring)

    def _value(self, data: Any, name: str) -> int:
        if isinstance(data, bool) or not isinstance(data, int | np.integer) or not 0 <= data < self.num_values:
            raise ValueError(f"{name} must be an integer in [0, {self.num_values}); got {data!r}")
        return int(data)

    def release(self, data: Any, rng: np.random.Generator) -> int:
        return int(self.sample(data, 1, rng)[0])

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        value, n, rng = self._value(data, "data"), check_count(n), check_rng(rng)
        k = self.num_values
        keep = rng.random(n) < special.expit(self.epsilon - math.log(k - 1))  # e^ε/(e^ε + k − 1)
        other = rng.integers(0, k - 1, size=n)
        other = other + (other >= value)  # uniform over the k − 1 other values
        return np.where(keep, value, other)

    def log_likelihood_ratio(self, outputs: Any, data: Any, neighbour: Any) -> np.ndarray:
        a, b = self._value(data, "data"), self._value(neighbour, "neighbour")
        out = np.asarray(outputs).reshape(-1)
        if a == b:
            return np.zeros(out.shape)
        return self.epsilon * ((out == a).astype(float) - (out == b))

    def worst_case_pair(self) -> NeighbouringPair:
        return NeighbouringPair(data=1, neighbour=0, description="the record's value 1 vs 0 (replace-one)")


@dataclass(frozen=True, slots=True, kw_only=True)
class SubsampledGaussianMechanism:
    """``steps`` releases of a Poisson-subsampled Gaussian sum: the DP-SGD worst case (add/remove).

    Each step includes the target record independently with probability q and releases the sum of the sampled
    records' contributions plus N(0, σ²). Data is the target's per-step contribution c ∈ [0, 1] (1 = a record
    whose clipped gradient points the same way at every step; 0 = the record is absent, D′). With c = 1 the
    pair (N(0, σ²) vs (1 − q)N(0, σ²) + qN(1, σ²))^⊗T is the tight worst case of Mironov, Talwar, Zhang 2019
    and of the PLD accountants (Zhu, Dong, Wang 2022, Theorem 11), so the exact LLR audits the accountant's ε.
    Outputs have shape (n, steps).
    """

    noise_multiplier: float
    sampling_rate: float
    steps: int = 1
    neighboring: ev.NeighboringRelation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _positive("noise_multiplier", self.noise_multiplier))
        q = self.sampling_rate
        if isinstance(q, bool) or not isinstance(q, int | float) or not 0 < q <= 1:
            raise ValueError(f"sampling_rate must be in (0, 1]; got {q!r}")
        object.__setattr__(self, "sampling_rate", float(q))
        check_count(self.steps, name="steps")
        _relation(self.neighboring)

    @property
    def event(self) -> ev.Event:
        step = ev.PoissonSampled(
            sampling_rate=self.sampling_rate,
            event=ev.Gaussian(noise_multiplier=self.noise_multiplier, neighboring=self.neighboring),
            neighboring=self.neighboring,
        )
        return step if self.steps == 1 else ev.SelfComposed(event=step, count=self.steps)

    def _contribution(self, data: Any, name: str) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float) or not 0 <= data <= 1:
            raise ValueError(f"{name} must be the target's contribution in [0, 1]; got {data!r}")
        return float(data)

    def release(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        return self.sample(data, 1, rng)[0]

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        c, n, rng = self._contribution(data, "data"), check_count(n), check_rng(rng)
        out = rng.standard_normal((n, self.steps))
        out *= self.noise_multiplier
        if c > 0:
            out += c * (rng.random((n, self.steps)) < self.sampling_rate)
        return out

    def _log_density_ratio_to_absent(self, out: np.ndarray, c: float) -> np.ndarray:
        """Σ_t log((1 − q) + q·exp((c·x_t − c²/2)/σ²)): log p_c(o) − log p_0(o), stable in log space."""
        if c == 0:
            return np.zeros(out.shape[0])
        z = (c * out - 0.5 * c * c) / self.noise_multiplier**2
        q = self.sampling_rate
        if q == 1.0:
            return z.sum(axis=1)
        return np.logaddexp(math.log1p(-q), math.log(q) + z).sum(axis=1)

    def log_likelihood_ratio(self, outputs: Any, data: Any, neighbour: Any) -> np.ndarray:
        a, b = self._contribution(data, "data"), self._contribution(neighbour, "neighbour")
        out = np.asarray(outputs, dtype=float)
        if out.ndim == 1:
            out = out[None, :] if out.size == self.steps else out[:, None]
        if out.ndim != 2 or out.shape[1] != self.steps:
            raise ValueError(f"outputs must have shape (n, {self.steps}); got {np.shape(outputs)!r}")
        if b == 0:
            return self._log_density_ratio_to_absent(out, a)
        if a == 0:
            return -self._log_density_ratio_to_absent(out, b)
        return self._log_density_ratio_to_absent(out, a) - self._log_density_ratio_to_absent(out, b)

    def worst_case_pair(self) -> NeighbouringPair:
        return NeighbouringPair(
            data=1.0,
            neighbour=0.0,
            description=(
                f"target record present with a unit clipped gradient at each of {self.steps} steps vs absent "
                "(add/remove; sampled with probability q per step)"
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class NoLeakage:
    """A mechanism whose output ignores the data: N(0, 1) draws of shape (n,). Its true ε is 0 (null case)."""

    @property
    def event(self) -> ev.NoOp:
        return ev.NoOp()

    def release(self, data: Any, rng: np.random.Generator) -> float:
        return float(self.sample(data, 1, rng)[0])

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        return check_rng(rng).standard_normal(check_count(n))

    def worst_case_pair(self) -> NeighbouringPair:
        return NeighbouringPair(data=1.0, neighbour=0.0, description="any pair: the output does not read the data")
