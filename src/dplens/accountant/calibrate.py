"""Calibration of any scalar parameter to a target (ε, δ), never overshooting the target.

Brent's method (scipy ``brentq``) finds the crossing ε(x) = target; the answer is then moved to the
safe side and *checked*: the returned value always satisfies ε(value) ≤ target under the accounting
route used (the same guarantee as dp-accounting's ``calibrate_dp_mechanism``, which users of Opacus
asked for in opacus#566). Integer parameters (steps) are solved by bisection on integers.

PLD calibration is multi-resolution: the RDP answer (cheap) brackets the PLD answer from the safe side,
and Brent then runs on a pessimistic PLD with a coarser grid (``value_discretization_interval``,
proportional to the target ε). A pessimistic PLD at any interval is an upper bound, so the guarantee is unchanged; the
coarser grid only costs a little tightness (≈0.1 % in σ for MNIST DP-SGD, see benchmarks/RESULTS.md).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dplens.accountant import conversions
from dplens.accountant.compose import Accountant, Method

__all__ = ["CalibrationResult", "Direction", "calibrate", "calibrate_dp_sgd_noise"]

_EPS_CAP = 1e6  # ε values above this are treated as "far too large" so Brent sees finite numbers


class Direction(enum.Enum):
    """How ε moves when the parameter grows."""

    INCREASING = "increasing"  # e.g. steps, sampling rate
    DECREASING = "decreasing"  # e.g. noise multiplier


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationResult:
    """A calibrated parameter value with the ε it achieves (≤ target) under ``method``."""

    param: str
    value: float
    epsilon: float
    delta: float
    target_epsilon: float
    method: Method
    evaluations: int
    details: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "param": self.param,
            "value": self.value,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "target_epsilon": self.target_epsilon,
            "method": self.method.value,
            "evaluations": self.evaluations,
            "details": self.details,
        }

    def __repr__(self) -> str:
        return (
            f"CalibrationResult({self.param}={self.value:.8g}: epsilon={self.epsilon:.6g} <= "
            f"{self.target_epsilon:g} at delta={self.delta:g}, method={self.method.value})"
        )

    def _repr_html_(self) -> str:
        from dplens._display import html_table

        rows = [
            (self.param, self.value),
            ("ε (upper bound, ≤ target)", self.epsilon),
            ("target ε", self.target_epsilon),
            ("δ", self.delta),
            ("route", self.method.value),
            ("details", self.details),
        ]
        return html_table(f"Calibrated {self.param}", rows)


class _Counter:
    """ε(x) with a call counter and a cache (Brent revisits points)."""

    def __init__(self, epsilon_of: Callable[[float], float]) -> None:
        self._epsilon_of = epsilon_of
        self._cache: dict[float, float] = {}
        self.calls = 0

    def __call__(self, x: float) -> float:
        if x not in self._cache:
            self.calls += 1
            value = float(self._epsilon_of(x))
            self._cache[x] = value if not math.isnan(value) else math.inf
        return self._cache[x]


def _solve(
    epsilon_of: _Counter,
    *,
    target: float,
    safe: float,
    unsafe: float,
    integer: bool,
    xtol: float,
) -> float:
    """The value closest to ``unsafe`` within [safe, unsafe] whose ε ≤ target (ε(safe) ≤ target given)."""
    if epsilon_of(unsafe) <= target:
        return unsafe
    if integer:
        lo, hi = int(safe), int(unsafe)  # invariant: ε(lo) ≤ target < ε(hi)
        while abs(hi - lo) > 1:
            mid = (lo + hi) // 2
            if epsilon_of(float(mid)) <= target:
                lo = mid
            else:
                hi = mid
        return float(lo)

    def gap(x: float) -> float:
        return min(epsilon_of(x), _EPS_CAP) - target

    from scipy import optimize

    root = optimize.brentq(gap, min(safe, unsafe), max(safe, unsafe), xtol=xtol, rtol=1e-12, maxiter=500)
    if gap(root) <= 0:
        return root
    toward_safe = math.copysign(xtol, safe - unsafe)
    candidate = root + toward_safe
    if (candidate - safe) * (candidate - unsafe) <= 0 and gap(candidate) <= 0:
        return candidate
    # Fall back to bisection that keeps the safe endpoint safe.
    lo, hi = safe, root
    for _ in range(200):
        if abs(hi - lo) <= xtol:
            break
        mid = 0.5 * (lo + hi)
        if gap(mid) <= 0:
            lo = mid
        else:
            hi = mid
    return lo


def calibrate(
    make_accountant: Callable[[float], Accountant],
    *,
    target_epsilon: float,
    target_delta: float,
    lower: float,
    upper: float,
    method: Method = Method.RDP,
    direction: Direction | None = None,
    integer: bool = False,
    param: str = "param",
    xtol: float | None = None,
    value_discretization_interval: float | None = None,
) -> CalibrationResult:
    """Calibrate a scalar parameter so that ε(value) ≤ target_epsilon at target_delta, as tight as possible.

    Args:
        make_accountant: builds a fresh Accountant for a parameter value.
        target_epsilon: the ε not to exceed (> 0).
        target_delta: δ of the guarantee, in (0, 1).
        lower, upper: the search bracket.
        method: the accounting route (RDP, PLD, EXACT or BEST).
        direction: how ε moves with the parameter; None detects it from the bracket ends (RDP).
        integer: the parameter is an integer (e.g. steps).
        param: the parameter's name (for messages and the result).
        xtol: absolute tolerance on the parameter (default 1e-6 relative to the bracket top; 1 for integers).
        value_discretization_interval: PLD grid interval used during PLD calibration (default: proportional
            to the target, see :func:`_auto_interval`).

    Returns:
        A :class:`CalibrationResult` whose ``epsilon`` (recomputed at ``value``) is ≤ ``target_epsilon``.

    Raises:
        ValueError: invalid arguments, or the target is unreachable in the bracket.
    """
    target = conversions.check_epsilon(target_epsilon, name="target_epsilon")
    if target == 0:
        raise ValueError(f"target_epsilon must be > 0; got {target_epsilon!r}")
    delta = conversions.check_delta(target_delta, name="target_delta")
    if not isinstance(method, Method):
        raise ValueError(f"method must be a Method; got {method!r}")
    for name, value in (("lower", lower), ("upper", upper)):
        if not (isinstance(value, int | float) and math.isfinite(value)):
            raise ValueError(f"{name} must be a finite number; got {value!r}")
    if not lower < upper:
        raise ValueError(f"lower must be < upper; got lower={lower!r}, upper={upper!r}")
    if integer:
        lower, upper = float(math.ceil(lower)), float(math.floor(upper))
    # The default tolerance is relative to the smaller end of the bracket, so wide brackets (γ up to 1e15) still
    # resolve the answer to ~1e-10 relative (Brent's rtol below does the rest).
    tol = xtol if xtol is not None else (1.0 if integer else max(min(abs(lower), abs(upper)), 1e-12) * 1e-10)

    def route_epsilon(x: float, route: Method, interval: float | None = None) -> float:
        acc = make_accountant(int(x) if integer else x)
        if interval is not None and route is Method.PLD:
            acc = _with_interval(acc, interval)
        return acc.epsilon(delta, method=route)

    rdp_eps = _Counter(lambda x: route_epsilon(x, Method.RDP))
    if direction is None:
        direction = Direction.DECREASING if rdp_eps(lower) >= rdp_eps(upper) else Direction.INCREASING
    if not isinstance(direction, Direction):
        raise ValueError(f"direction must be a Direction; got {direction!r}")
    safe, unsafe = (upper, lower) if direction is Direction.DECREASING else (lower, upper)

    if method is Method.PLD:
        interval = value_discretization_interval or _auto_interval(target)
        final = _Counter(lambda x: route_epsilon(x, Method.PLD, interval))
        details = f"PLD (pessimistic connect-the-dots, value_discretization_interval={interval:g})"
        if rdp_eps(safe) <= target:
            safe, unsafe = _pld_bracket_from_rdp(
                rdp_eps, final, target=target, safe=safe, unsafe=unsafe, integer=integer, xtol=tol
            )
    else:
        final = rdp_eps if method is Method.RDP else _Counter(lambda x: route_epsilon(x, method))
        details = method.value

    if final(safe) > target:
        raise ValueError(
            f"target_epsilon={target!r} is unreachable for {param} in [{lower!r}, {upper!r}]: "
            f"epsilon at {param}={safe!r} is {final(safe)!r} (method={method.value})"
        )
    if method is Method.PLD and final(safe) >= target * (1 - 1e-4):
        value = safe  # already within 1e-4 of the target: further PLD evaluations would not pay
    else:
        value = _solve(final, target=target, safe=safe, unsafe=unsafe, integer=integer, xtol=tol)
    epsilon = final(value)
    if epsilon > target:  # pragma: no cover - _solve guarantees this; kept as a last line of defence
        raise AssertionError(f"calibration overshot: epsilon={epsilon!r} > target={target!r}")
    return CalibrationResult(
        param=param,
        value=int(value) if integer else value,
        epsilon=epsilon,
        delta=delta,
        target_epsilon=target,
        method=method,
        evaluations=rdp_eps.calls + (final.calls if final is not rdp_eps else 0),
        details=details,
    )


def _auto_interval(target: float) -> float:
    """PLD grid for calibration: the connect-the-dots excess in ε is ≈ c·interval with c ≈ 5–20 for DP-SGD, so
    an interval proportional to the target keeps the relative excess near 0.1 % (measured in RESULTS.md)."""
    return min(max(2.5e-4 * target, 1e-4), 2e-3)


def _pld_bracket_from_rdp(
    rdp_eps: _Counter, pld_eps: _Counter, *, target: float, safe: float, unsafe: float, integer: bool, xtol: float
) -> tuple[float, float]:
    """A tight bracket for the PLD answer, using the cheap RDP curve as a surrogate.

    The ratio PLD ε / RDP ε barely changes near the answer, so solving RDP ε(x) = target / ratio lands within
    ~1e-4 of the PLD answer after two or three PLD evaluations. Every PLD value is computed, not assumed: the
    returned ``safe`` end satisfies PLD ε ≤ target.
    """
    best_safe, best_unsafe = safe, unsafe
    # The RDP solves only steer the search, so a looser tolerance is enough.
    xtol = max(xtol, 1e-5 * min(abs(safe), abs(unsafe)) if not integer else xtol)
    x = _solve(rdp_eps, target=target, safe=safe, unsafe=unsafe, integer=integer, xtol=xtol)
    for _ in range(4):
        eps = pld_eps(x)
        closer_to_unsafe = abs(x - unsafe) < abs(best_safe - unsafe)
        if eps <= target and closer_to_unsafe:
            best_safe = x
        elif eps > target and abs(x - best_safe) < abs(best_unsafe - best_safe):
            best_unsafe = x
        if pld_eps(best_safe) >= target * (1 - 1e-4):
            break
        goal = target * rdp_eps(x) / eps * (1 - 1e-5) if eps > 0 else target
        if rdp_eps(safe) > goal:
            break
        x_next = _solve(rdp_eps, target=goal, safe=safe, unsafe=unsafe, integer=integer, xtol=xtol)
        if x_next == x:
            break
        x = x_next
    if pld_eps(best_safe) > target:
        return safe, unsafe
    if best_unsafe == unsafe:
        best_unsafe = _step_towards_unsafe(pld_eps, target, safe=best_safe, unsafe=unsafe, integer=integer)
    return best_safe, best_unsafe


def _step_towards_unsafe(epsilon_of: _Counter, target: float, *, safe: float, unsafe: float, integer: bool) -> float:
    """From a safe point, step geometrically towards ``unsafe`` until ε > target (a tight bracket)."""
    point = safe
    for fraction in (0.03, 0.08, 0.2, 0.5, 1.0):
        point = safe + (unsafe - safe) * fraction if fraction < 1 else unsafe
        if integer:
            point = float(round(point))
        if epsilon_of(point) > target:
            return point
    return unsafe


def _with_interval(accountant: Accountant, interval: float) -> Accountant:
    """A copy of ``accountant`` with another PLD grid interval."""
    copy = Accountant(neighboring=accountant.neighboring, value_discretization_interval=interval)
    for event, count in accountant.ledger:
        copy.compose(event, count)
    return copy


def calibrate_dp_sgd_noise(
    *,
    sampling_rate: float,
    steps: int,
    target_epsilon: float,
    target_delta: float,
    method: Method = Method.PLD,
    lower: float = 0.1,
    upper: float = 100.0,
) -> CalibrationResult:
    """The smallest noise multiplier of Poisson-subsampled DP-SGD meeting (ε, δ) (add/remove adjacency)."""
    from dplens.accountant import events as ev

    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1; got {steps!r}")
    ev.PoissonSampled(sampling_rate=sampling_rate, event=ev.Gaussian(noise_multiplier=1.0))  # validates q

    def make(sigma: float) -> Accountant:
        event = ev.PoissonSampled(sampling_rate=sampling_rate, event=ev.Gaussian(noise_multiplier=sigma))
        return Accountant().compose(event, steps)

    return calibrate(
        make,
        target_epsilon=target_epsilon,
        target_delta=target_delta,
        lower=lower,
        upper=upper,
        method=method,
        direction=Direction.DECREASING,
        param="noise_multiplier",
        xtol=1e-6,
    )
