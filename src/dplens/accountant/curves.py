"""Privacy curves as values: RDP curves, zCDP / tCDP, GDP, privacy profiles δ(ε), trade-off curves f(α).

Curves are immutable. An :class:`RdpCurve` is a weighted sum of picklable functions of α, so
composition (``+``) and self-composition (``*``) are exact and cheap, and the curve can be evaluated
at any real α > 1. Conversion to (ε, δ) optimises α continuously (GaussMix needs α in the millions),
never only on a fixed grid.
"""

from __future__ import annotations

import enum
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dplens.accountant import conversions

__all__ = [
    "Gdp",
    "PrivacyProfile",
    "RdpConvergenceWarning",
    "RdpConversion",
    "RdpCurve",
    "Tcdp",
    "TradeOff",
    "Zcdp",
    "check_alpha",
]


class RdpConvergenceWarning(RuntimeWarning):
    """An RDP order could not be evaluated (e.g. a series did not converge); it was excluded (→ +∞)."""


class RdpConversion(enum.Enum):
    """Which theorem turns an RDP curve into (ε, δ).

    Example:
        >>> RdpConversion("classic"), RdpConversion.OPTIMAL.value
        (<RdpConversion.CLASSIC: 'classic'>, 'optimal')
    """

    #: Canonne–Kamath–Steinke 2020 Prop. 12 = Balle et al. 2020 Thm 21 (+ the TV shortcut). Default.
    OPTIMAL = "optimal"
    #: Mironov 2017 Prop. 3: ε = r(α) + log(1/δ)/(α − 1). Only for reproducing legacy numbers.
    CLASSIC = "classic"


def check_alpha(alpha: float | np.ndarray) -> np.ndarray:
    """Validate Rényi orders: real, not NaN, > 1. Returns a float array."""
    arr = np.asarray(alpha, dtype=float)
    if np.any(np.isnan(arr)) or np.any(arr <= 1):
        raise ValueError(f"alpha must be > 1 (and not NaN); got {alpha!r}")
    return arr


# The continuous search over α: a log grid on α − 1, extended by decades while the minimum sits at
# the upper edge (GaussMix needs α in the millions), then zoomed in with vectorised rounds.
_GRID_LOW = 1e-3  # smallest α − 1 ever tried
_GRID_FIRST_LOW = 1e-2  # the first grid; extended towards _GRID_LOW only if the minimum sits at its lower edge
_GRID_FIRST_UPPER = 256.0
_GRID_CEILING = 1e10
_GRID_POINTS = 36
_ZOOM_POINTS = 16
_ZOOM_ROUNDS = 16
_NARROW_POINTS = 5
_GRID_INTEGER_ORDERS = 64  # integer orders 2..64 are always tried (see RdpCurve._minimise)
_ZOOM_RELATIVE_GAIN = 1e-9  # stop zooming once a round improves ε by less than this (relative)


@dataclass(frozen=True, slots=True)
class RdpCurve:
    """An RDP curve ε_RDP(α) for α ∈ (1, alpha_max); +∞ at α ≥ alpha_max.

    The curve is Σᵢ wᵢ·fᵢ(α) over ``terms`` = ((w₁, f₁), …). Each fᵢ maps a float array of orders to
    a float array (vectorised, +∞ allowed) and should be picklable (module-level function or
    ``functools.partial``). Adding curves composes the mechanisms (Mironov 2017, Proposition 1);
    multiplying by a count is self-composition.

    Args:
        terms: the weighted functions.
        alpha_max: exclusive upper end of the domain (ω for tCDP; γ for GaussMix).
        integer_only: True when the fᵢ are exact only at integer α (then only integer orders are
            used in conversions).
        description: human-readable provenance.

    Example (the Gaussian with σ = 1: ε_RDP(α) = α/2):
        >>> import numpy as np
        >>> from dplens import Accountant, Gaussian
        >>> curve = Accountant().compose(Gaussian(noise_multiplier=1.0)).rdp_curve()
        >>> curve(np.array([2.0, 8.0])).tolist()
        [1.0, 4.0]
        >>> round(curve.epsilon(1e-5), 4), round(curve.epsilon(1e-5, conversion=RdpConversion.CLASSIC), 4)
        (4.7284, 5.2985)
    """

    terms: tuple[tuple[float, Callable[[np.ndarray], np.ndarray]], ...]
    alpha_max: float = math.inf
    integer_only: bool = False
    description: str = ""

    @classmethod
    def from_function(
        cls,
        function: Callable[[np.ndarray], np.ndarray],
        *,
        alpha_max: float = math.inf,
        integer_only: bool = False,
        description: str = "",
    ) -> RdpCurve:
        """A curve from one vectorised function of α."""
        if not alpha_max > 1:
            raise ValueError(f"alpha_max must be > 1; got {alpha_max!r}")
        return cls(((1.0, function),), alpha_max, integer_only, description)

    @classmethod
    def zero(cls) -> RdpCurve:
        """The RDP curve of a mechanism that reveals nothing."""
        return cls((), math.inf, False, "no-op")

    @classmethod
    def infinite(cls, description: str = "non-private") -> RdpCurve:
        """The RDP curve of a non-private mechanism (ε = ∞ everywhere)."""
        return cls(((1.0, _infinite),), math.inf, False, description)

    def __call__(self, alpha: float | np.ndarray) -> np.ndarray:
        alpha_arr = check_alpha(alpha)
        flat = np.atleast_1d(alpha_arr).ravel()
        total = np.zeros_like(flat)
        # α = ∞ is inside an unbounded domain: the max-divergence, finite for pure-DP mechanisms.
        inside = (flat < self.alpha_max) | (np.isinf(flat) & math.isinf(self.alpha_max))
        if inside.any():
            orders = flat[inside]
            acc = np.zeros_like(orders)
            for weight, function in self.terms:
                if weight == 0:
                    continue
                acc = acc + weight * np.asarray(function(orders), dtype=float)
            total[inside] = acc
        total[~inside] = np.inf
        total = np.where(np.isnan(total), np.inf, total)
        return total.reshape(np.shape(alpha_arr)) if np.ndim(alpha_arr) else total.reshape(())

    def __add__(self, other: RdpCurve) -> RdpCurve:
        if not isinstance(other, RdpCurve):
            return NotImplemented
        description = " + ".join(d for d in (self.description, other.description) if d)
        return RdpCurve(
            self.terms + other.terms,
            min(self.alpha_max, other.alpha_max),
            self.integer_only or other.integer_only,
            description,
        )

    def __mul__(self, count: float) -> RdpCurve:
        count = conversions.check_nonnegative(count, name="count")
        if count == 0:
            return RdpCurve.zero()
        terms = tuple((weight * count, function) for weight, function in self.terms)
        description = f"{count:g} × ({self.description})" if self.description else ""
        return RdpCurve(terms, self.alpha_max, self.integer_only, description)

    __rmul__ = __mul__

    # ---- conversions -----------------------------------------------------------------------

    def _minimise(self, objective: Callable[[np.ndarray], np.ndarray]) -> tuple[float, float]:
        """Minimise a vectorised objective of α over the curve's domain: (value, α).

        Any α gives a valid bound, so the search only has to be good, not globally exact: a log grid
        on α − 1 (extended while the minimum is at its upper edge), then vectorised zoom rounds
        around the best point. Integer-only curves are searched over integers.
        """
        upper_cap = self.alpha_max * (1 - 1e-12) if math.isfinite(self.alpha_max) else _GRID_CEILING
        if upper_cap <= 1 + _GRID_LOW and not self.integer_only:
            return math.inf, math.nan

        def evaluate(alphas: np.ndarray) -> np.ndarray:
            # A zoom towards α → 1 (steep curves: tiny noise) can round 1 + e^t to 1, which is no order: skip it.
            alphas = np.asarray(alphas, dtype=float)
            orders = alphas > 1.0
            values = np.full(alphas.shape, np.inf)
            if orders.any():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RdpConvergenceWarning)
                    values[orders] = np.asarray(objective(alphas[orders]), dtype=float)
            return np.where(np.isnan(values), np.inf, values)

        if self.integer_only:
            return self._minimise_integer(evaluate, upper_cap)
        upper = min(_GRID_FIRST_UPPER, upper_cap)
        lower = min(_GRID_FIRST_LOW, (upper - 1.0) / 10)
        t = np.linspace(math.log(lower), math.log(upper - 1.0), _GRID_POINTS)
        # Small integer orders ride along in the first call: curves built from exact integer-order values (sampling
        # without replacement interpolates between integers) have kinks there, and a local minimum at an integer
        # can hide from a smooth zoom that starts elsewhere.
        integers = np.arange(2.0, math.floor(min(_GRID_INTEGER_ORDERS, upper_cap)) + 1.0)
        first = evaluate(np.concatenate([1.0 + np.exp(t), integers]))
        values, integer_values = first[: t.size], first[t.size :]
        while int(np.argmin(values)) == t.size - 1 and upper < upper_cap and np.isfinite(values[-1]):
            new_upper = min(upper * 1e3, upper_cap)
            t_new = np.linspace(math.log(upper - 1.0), math.log(new_upper - 1.0), _GRID_POINTS // 2 + 1)[1:]
            t = np.concatenate([t, t_new])
            values = np.concatenate([values, evaluate(1.0 + np.exp(t_new))])
            upper = new_upper
        if int(np.argmin(values)) == 0 and lower > _GRID_LOW:
            t_new = np.linspace(math.log(_GRID_LOW), math.log(lower), _GRID_POINTS // 4 + 1)[:-1]
            t = np.concatenate([t_new, t])
            values = np.concatenate([evaluate(1.0 + np.exp(t_new)), values])
        # Bracket the best point between its neighbours among every order evaluated (grid and integers): curves
        # built from exact integer-order values (sampling without replacement interpolates between integer orders)
        # have kinks there, and a smooth minimum next to an integer must not be searched from half an order.
        all_t = np.concatenate([t, np.log(integers - 1.0)])
        all_values = np.concatenate([values, integer_values])
        order = np.argsort(all_t, kind="stable")
        all_t, all_values = all_t[order], all_values[order]
        best = int(np.argmin(all_values))
        best_value, best_t = float(all_values[best]), float(all_t[best])
        lo_t = all_t[max(best - 1, 0)]
        hi_t = all_t[min(best + 1, all_t.size - 1)]
        if not math.isfinite(best_value):
            return math.inf, math.nan
        centre, half_width = 0.5 * (lo_t + hi_t), 0.5 * (hi_t - lo_t)
        standard_half_width, narrow = half_width, False
        for _ in range(_ZOOM_ROUNDS):
            # A parabola-centred round needs only a few points: the vertex is already close to the minimum,
            # and each call of the objective costs far more in fixed overhead than per point.
            points = _NARROW_POINTS if narrow else _ZOOM_POINTS
            probe = np.linspace(centre - half_width, centre + half_width, points + 2)[1:-1]
            probe_values = evaluate(1.0 + np.exp(probe))
            i = int(np.argmin(probe_values))
            gain = best_value - float(probe_values[i])
            step = 2 * half_width / (points + 1)
            if gain > 0:
                best_value, best_t = float(probe_values[i]), float(probe[i])
            interior = 0 < i < probe.size - 1
            # Near a bracketed smooth minimum the gain shrinks geometrically; stop once it is below float noise. A
            # small gain alone is not enough (a parabola vertex placed off a flat minimum gains little per round,
            # e.g. 4e-6 short in log δ for q = 0.48, σ = 3.99, 4532 steps): the parabola through the best probe and
            # its neighbours must also predict no larger improvement.
            predicted = gain
            if interior and np.all(np.isfinite(probe_values[i - 1 : i + 2])):
                y0, y1, y2 = probe_values[i - 1 : i + 2]
                curvature = y0 - 2 * y1 + y2
                predicted = max(gain, (y0 - y2) ** 2 / (8 * curvature) if curvature > 0 else math.inf)
            if step < 1e-12 or (interior and gain > 0 and predicted < _ZOOM_RELATIVE_GAIN * abs(best_value)):
                break
            if gain > 0 and not interior:
                # The best probe is at the window's edge: the minimum lies beyond it, so move the window (and widen
                # it, so a far minimum is reached in a few rounds).
                centre, half_width, narrow = best_t, 2 * max(half_width, standard_half_width), False
                continue
            if gain <= 0:
                # No improvement: the minimum is within ±step of the best point (or, after a narrowed round,
                # within the last standard bracket): zoom around it in the standard way.
                centre = best_t
                half_width = standard_half_width if narrow else step
                standard_half_width, narrow = half_width, False
                continue
            # Centre the next round on the vertex of the parabola through the three points around the best
            # one (a smooth minimum is locally quadratic) with a narrower bracket. Any α is a valid bound,
            # so a poor vertex only costs a round, never soundness.
            centre, half_width, narrow = best_t, step, False
            if 0 < i < probe.size - 1 and np.all(np.isfinite(probe_values[i - 1 : i + 2])):
                y0, y1, y2 = probe_values[i - 1 : i + 2]
                curvature = y0 - 2 * y1 + y2
                if curvature > 0:
                    centre = probe[i] + 0.5 * step * (y0 - y2) / curvature
                    half_width, narrow = step / 4, True
            standard_half_width = step
        return best_value, 1.0 + math.exp(best_t)

    def _minimise_integer(self, evaluate: Callable[[np.ndarray], np.ndarray], upper_cap: float) -> tuple[float, float]:
        top = int(min(upper_cap, 2.0**40))
        grid = np.unique(np.concatenate([np.arange(2, min(top, 256) + 1), 2.0 ** np.arange(9, 41)]))
        grid = grid[(grid >= 2) & (grid <= top)].astype(float)
        if grid.size == 0:
            return math.inf, math.nan
        values = evaluate(grid)
        best = int(np.argmin(values))
        lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
        while hi - lo > 2:
            probe = np.unique(np.round(np.linspace(lo, hi, 34)))
            probe_values = evaluate(probe)
            i = int(np.argmin(probe_values))
            lo, hi = probe[max(i - 1, 0)], probe[min(i + 1, probe.size - 1)]
            if probe_values[i] < values[best]:
                values[best] = probe_values[i]
                grid[best] = probe[i]
        return float(values[best]), float(grid[best])

    def epsilon_and_order(
        self, delta: float, *, conversion: RdpConversion = RdpConversion.OPTIMAL
    ) -> tuple[float, float]:
        """Smallest ε over α (continuous search) such that the curve implies (ε, δ)-DP, and its α.

        Any α gives a valid bound, so the search can only tighten a valid result. The returned ε is
        rounded up. α is nan when ε = 0 comes from the TV shortcut (see
        :func:`conversions.rdp_tv_shortcut`). At δ = 0 the answer is r(∞) (α = ∞), finite for pure DP.
        """
        delta = conversions.check_delta(delta, allow_zero=True)
        if not isinstance(conversion, RdpConversion):
            raise ValueError(f"conversion must be an RdpConversion; got {conversion!r}")
        if not self.terms:
            return 0.0, math.nan
        if delta == 0:
            # (ε, 0)-DP holds iff the max-divergence D_∞ ≤ ε in both directions (Mironov 2017, §3: RDP of order ∞ is
            # ε-DP); the curve bounds both directions, so ε = r(∞), finite only for pure-DP mechanisms.
            return conversions.round_up(max(float(self(math.inf)), 0.0)), math.inf
        to_eps = (
            conversions.rdp_to_epsilon_optimal
            if conversion is RdpConversion.OPTIMAL
            else conversions.rdp_to_epsilon_classic
        )
        rdp_seen: list[np.ndarray] = []

        def objective(a: np.ndarray) -> np.ndarray:
            values = self(a)
            rdp_seen.append(values)
            return to_eps(values, a, delta)

        value, alpha = self._minimise(objective)
        # KL ≤ r(α) for every α, so the smallest RDP value seen bounds KL: the TV shortcut (ε = 0) is valid.
        if (
            conversion is RdpConversion.OPTIMAL
            and rdp_seen
            and conversions.rdp_tv_shortcut(np.concatenate(rdp_seen), delta)
        ):
            return 0.0, math.nan
        return conversions.round_up(max(value, 0.0)), alpha

    def epsilon(self, delta: float, *, conversion: RdpConversion = RdpConversion.OPTIMAL) -> float:
        """ε such that the curve implies (ε, δ)-DP; an upper bound (see :meth:`epsilon_and_order`)."""
        return self.epsilon_and_order(delta, conversion=conversion)[0]

    def delta_and_order(self, epsilon: float) -> tuple[float, float]:
        """Smallest δ over α such that the curve implies (ε, δ)-DP (CKS 2020 Prop. 12 + the KL bound)."""
        epsilon = conversions.check_epsilon(epsilon)
        if not self.terms:
            return 0.0, math.nan
        if float(self(math.inf)) <= epsilon:  # max-divergence ≤ ε: (ε, 0)-DP (pure DP)
            return 0.0, math.inf
        rdp_seen: list[np.ndarray] = []

        def objective(a: np.ndarray) -> np.ndarray:
            values = self(a)
            rdp_seen.append(values)
            return conversions.rdp_to_log_delta_optimal(values, a, epsilon)

        log_delta, alpha = self._minimise(objective)
        # Bretagnolle–Huber: δ ≤ TV ≤ √(1 − e^{−KL}), and KL ≤ r(α) for every α > 1.
        seen = np.concatenate(rdp_seen) if rdp_seen else np.array([np.inf])
        smallest = float(np.min(seen))
        if math.isfinite(smallest):
            log_tv = 0.5 * math.log(-math.expm1(-max(smallest, 1e-300)))
            if log_tv < log_delta:
                log_delta, alpha = log_tv, math.nan
        if not math.isfinite(log_delta) and log_delta > 0:
            return 1.0, alpha
        return min(conversions.round_up(math.exp(min(log_delta, 0.0))), 1.0), alpha

    def delta(self, epsilon: float) -> float:
        """δ such that the curve implies (ε, δ)-DP; an upper bound on the optimal δ at that ε."""
        return self.delta_and_order(epsilon)[0]


def _infinite(alpha: np.ndarray) -> np.ndarray:
    return np.full_like(np.asarray(alpha, dtype=float), np.inf)


def _linear(alpha: np.ndarray, *, slope: float, intercept: float) -> np.ndarray:
    alpha = np.asarray(alpha, dtype=float)
    if slope == 0:
        return np.full_like(alpha, intercept)
    return intercept + slope * alpha


# --------------------------------------------------------------------------------------------
# zCDP, tCDP, GDP
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Zcdp:
    """(ξ, ρ)-zCDP: D_α ≤ ξ + ρα for all α > 1 (Bun & Steinke 2016, Definition 1.1).

    Example:
        >>> round(Zcdp(rho=0.5).epsilon(1e-5), 4)
        4.7284
    """

    rho: float
    xi: float = 0.0

    def __post_init__(self) -> None:
        conversions.check_nonnegative(self.rho, name="rho")
        if not (math.isfinite(self.xi) and self.xi >= 0):
            raise ValueError(f"xi must be a finite number >= 0; got {self.xi!r}")

    def rdp_curve(self) -> RdpCurve:
        return RdpCurve.from_function(
            _partial_linear(self.rho, self.xi), description=f"zCDP(rho={self.rho:g}, xi={self.xi:g})"
        )

    def epsilon(self, delta: float) -> float:
        """The optimal RDP route (CKS 2020 Prop. 12 on ξ + ρα, α optimised continuously)."""
        return self.rdp_curve().epsilon(delta)

    def epsilon_bun_steinke(self, delta: float) -> float:
        """Bun & Steinke 2016 Proposition 1.3 (for ξ = 0; ξ is added)."""
        return conversions.round_up(self.xi + conversions.zcdp_to_epsilon_bun_steinke(self.rho, delta))

    def __add__(self, other: Zcdp) -> Zcdp:
        """Composition adds ρ and ξ (Bun & Steinke 2016, Lemma 1.7)."""
        return Zcdp(rho=self.rho + other.rho, xi=self.xi + other.xi)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tcdp:
    """(ρ, ω)-tCDP: D_α ≤ ρα for α ∈ (1, ω) (Bun, Dwork, Rothblum, Steinke 2018, Definition 1).

    Example:
        >>> round(Tcdp(rho=0.1, omega=10).epsilon(1e-5), 4)
        1.918
    """

    rho: float
    omega: float

    def __post_init__(self) -> None:
        conversions.check_nonnegative(self.rho, name="rho")
        if not self.omega > 1:
            raise ValueError(f"omega must be > 1; got {self.omega!r}")

    def rdp_curve(self) -> RdpCurve:
        return RdpCurve.from_function(
            _partial_linear(self.rho, 0.0),
            alpha_max=self.omega,
            description=f"tCDP(rho={self.rho:g}, omega={self.omega:g})",
        )

    def epsilon(self, delta: float) -> float:
        """CKS 2020 Prop. 12 on ρα restricted to α < ω (tighter than the BDRS lemma)."""
        delta = conversions.check_delta(delta)
        # The boundary α → ω is allowed as a limit (the bound holds for every α < ω, and ε(α) is
        # continuous), so also try α = ω(1 − 1e-15).
        curve = self.rdp_curve()
        eps = curve.epsilon(delta)
        edge = self.omega * (1 - 1e-15)
        if edge > 1:
            eps_edge = float(
                conversions.rdp_to_epsilon_optimal(np.array([self.rho * edge]), np.array([edge]), delta)[0]
            )
            eps = min(eps, conversions.round_up(max(eps_edge, 0.0)))
        return eps

    def epsilon_bdrs(self, delta: float) -> float:
        """Bun, Dwork, Rothblum, Steinke 2018 Lemma 6."""
        return conversions.tcdp_to_epsilon_bdrs(self.rho, self.omega, delta)

    def __add__(self, other: Tcdp) -> Tcdp:
        """Composition: (ρ₁ + ρ₂, min(ω₁, ω₂)) (BDRS 2018, Lemma 3)."""
        return Tcdp(rho=self.rho + other.rho, omega=min(self.omega, other.omega))


def _partial_linear(rho: float, xi: float) -> Callable[[np.ndarray], np.ndarray]:
    import functools

    return functools.partial(_linear, slope=rho, intercept=xi)


@dataclass(frozen=True, slots=True, kw_only=True)
class Gdp:
    """μ-Gaussian DP: trade-off curve G_μ (Dong, Roth, Su 2022, Definition 2.7).

    Example:
        >>> round(float(Gdp(mu=1.0).epsilon(1e-5)), 4), round(float(Gdp(mu=1.0).delta(0.0)), 6)
        (4.3772, 0.382925)
    """

    mu: float

    def __post_init__(self) -> None:
        conversions._check_mu(self.mu)

    def delta(self, epsilon: float | np.ndarray) -> float | np.ndarray:
        """Exact δ(ε) (DRS 2022 Corollary 2.13)."""
        return conversions.gdp_delta(self.mu, epsilon)

    def epsilon(self, delta: float) -> float:
        """Exact ε(δ), rounded up."""
        return conversions.gdp_epsilon(self.mu, delta)

    def trade_off(self) -> TradeOff:
        import functools

        return TradeOff(functools.partial(conversions.gaussian_trade_off, self.mu), description=f"G_{self.mu:g}")

    def profile(self) -> PrivacyProfile:
        import functools

        return PrivacyProfile(
            remove=functools.partial(conversions.gdp_delta, self.mu),
            epsilon_for_delta=functools.partial(conversions.gdp_epsilon, self.mu),
            description=f"{self.mu:g}-GDP",
            trade_off_function=functools.partial(conversions.gaussian_trade_off, self.mu),
        )

    def rdp_curve(self) -> RdpCurve:
        """μ-GDP ⇒ (μ²/2)-zCDP, i.e. RDP α μ²/2 (the Gaussian mechanism's curve)."""
        return RdpCurve.from_function(_partial_linear(self.mu**2 / 2, 0.0), description=f"{self.mu:g}-GDP")

    def __add__(self, other: Gdp) -> Gdp:
        """G_μ₁ ⊗ G_μ₂ = G_√(μ₁² + μ₂²) (DRS 2022 Corollary 3.3)."""
        return Gdp(mu=math.hypot(self.mu, other.mu))


# --------------------------------------------------------------------------------------------
# Privacy profiles and trade-off curves
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivacyProfile:
    """A privacy profile ε ↦ δ(ε) (hockey-stick divergence), tracked per direction.

    ``remove`` is δ for the pair (M(D), M(D′)) with D′ = D minus a record; ``add`` the reverse
    pair. ``add=None`` means the profile is symmetric. The guarantee is the worse (larger) δ.
    ``epsilon_for_delta`` optionally gives a direct ε(δ) (it must be an upper bound).
    ``trade_off_function`` optionally gives the exact f-DP curve of the same guarantee (a closed form, or the
    exact curve of a discrete PLD: :mod:`dplens.accountant.tradeoff`); it must be a lower bound on the true curve.

    Example:
        >>> profile = Gdp(mu=1.0).profile()
        >>> round(profile.epsilon(1e-5), 4), round(float(profile.delta(1.0)), 6)
        (4.3772, 0.126937)
    """

    remove: Callable[[np.ndarray], np.ndarray]
    add: Callable[[np.ndarray], np.ndarray] | None = None
    epsilon_for_delta: Callable[[float], float] | None = None
    description: str = ""
    discretisation: str = ""
    trade_off_function: Callable[[np.ndarray], np.ndarray] | None = None

    def delta_by_direction(self, epsilon: float) -> dict[str, float]:
        """δ(ε) in each direction."""
        epsilon = conversions.check_epsilon(epsilon)
        out = {"remove": float(np.asarray(self.remove(np.array([epsilon])), dtype=float).ravel()[0])}
        if self.add is not None:
            out["add"] = float(np.asarray(self.add(np.array([epsilon])), dtype=float).ravel()[0])
        return out

    def delta(self, epsilon: float) -> float:
        """δ(ε) = max over directions (the guarantee for the neighbouring relation), ≤ 1."""
        return min(max(self.delta_by_direction(epsilon).values()), 1.0)

    def deltas(self, epsilons: np.ndarray) -> np.ndarray:
        """Vectorised δ(ε) (max over directions)."""
        eps = np.asarray(epsilons, dtype=float)
        out = np.asarray(self.remove(eps), dtype=float)
        if self.add is not None:
            out = np.maximum(out, np.asarray(self.add(eps), dtype=float))
        return np.minimum(out, 1.0)

    def epsilon(self, delta: float) -> float:
        """Smallest ε with δ(ε) ≤ delta, as an upper bound.

        δ = 0: ``epsilon_for_delta(0)`` where it accepts 0, else (no ``epsilon_for_delta``) the smallest ε where
        ``remove``/``add`` return exactly 0, which profiles without ``epsilon_for_delta`` must only do where δ is 0.
        """
        delta = conversions.check_delta(delta, allow_zero=True)
        if self.epsilon_for_delta is not None:
            try:
                return self.epsilon_for_delta(delta)
            except ValueError:
                if delta > 0:
                    raise
                # δ = 0 is outside this profile's own ε(δ): its δ(ε) may underflow to 0 at a finite ε (a Gaussian's
                # does near ε = 39), which is no evidence of pure DP, so claim nothing.
                return math.inf
        return conversions.solve_epsilon_for_delta(self.delta, delta)

    def trade_off(self, *, epsilons: np.ndarray | None = None) -> TradeOff:
        """The f-DP curve implied by this profile (DRS 2022 Prop. 2.12).

        Exact where the profile carries one (``trade_off_function``: closed forms, discrete PLDs); otherwise the
        envelope over an ε grid (including ε = 700, so f(0) = 1 − δ(∞) up to e^{−700}), a pointwise lower bound.
        """
        import functools

        if self.trade_off_function is not None and epsilons is None:
            return TradeOff(self.trade_off_function, description=f"exact trade-off of {self.description}")
        return TradeOff(
            functools.partial(_profile_trade_off, self.deltas, epsilons),
            description=f"trade-off of {self.description}",
        )

    def __add__(self, other: PrivacyProfile) -> PrivacyProfile:
        raise TypeError(
            "privacy profiles do not compose by addition; compose the events with the Accountant "
            "(PLD) or compose their RDP curves"
        )


def _profile_trade_off(deltas: Callable, epsilons: np.ndarray | None, alpha: np.ndarray) -> np.ndarray:
    return conversions.profile_to_trade_off(deltas, alpha, epsilons=epsilons)


@dataclass(frozen=True, slots=True)
class TradeOff:
    """An f-DP trade-off curve α ↦ β (Dong, Roth, Su 2022, Definition 2.1): β = f(α) on [0, 1].

    Example (G₁, the curve of 1-GDP):
        >>> curve = Gdp(mu=1.0).profile().trade_off()
        >>> [round(float(b), 4) for b in curve([0.0, 0.05, 1.0])]
        [1.0, 0.7405, 0.0]
    """

    function: Callable[[np.ndarray], np.ndarray]
    description: str = field(default="")

    def __call__(self, alpha: float | np.ndarray) -> float | np.ndarray:
        arr = np.asarray(alpha, dtype=float)
        if np.any(np.isnan(arr)) or np.any(arr < 0) or np.any(arr > 1):
            raise ValueError(f"alpha (type-I error) must be in [0, 1]; got {alpha!r}")
        out = np.asarray(self.function(np.atleast_1d(arr)), dtype=float).reshape(np.shape(arr))
        return float(out) if np.ndim(out) == 0 else out

    def delta(self, epsilon: float | np.ndarray) -> np.ndarray:
        """δ(ε) of the profile this curve implies (DRS 2022 Prop. 2.12), an upper bound."""
        return conversions.trade_off_to_delta(self.function, epsilon)

    def profile(self) -> PrivacyProfile:
        """The privacy profile implied by this curve (symmetric in the sense of DRS Prop. 2.12)."""
        import functools

        return PrivacyProfile(
            remove=functools.partial(conversions.trade_off_to_delta, self.function),
            description=f"profile of {self.description}",
        )

    def lower_envelope_points(self, alphas: Sequence[float]) -> np.ndarray:
        """β values at the given α (a convenience for plots)."""
        return np.asarray(self(np.asarray(alphas, dtype=float)))
