"""Calibration of any scalar parameter to a target (ε, δ), never overshooting the target.

A bracketing root finder (regula falsi with the Illinois modification, falling back to bisection: Dowell and
Jarratt 1971) finds the crossing ε(x) = target while keeping a *safe* end, one with ε ≤ target, at every step; the
answer is that safe end, so it always satisfies ε(value) ≤ target under the accounting route used (the same
guarantee as dp-accounting's ``calibrate_dp_mechanism``, which users of Opacus asked for in opacus#566). Integer
parameters (steps) are solved by bisection on integers. No scipy: the command line stays fast.

PLD calibration is multi-resolution: the RDP answer (cheap, array arithmetic) brackets the PLD answer, the ratio of
the two routes' ε (nearly constant near the answer) steers two or three PLD evaluations next to it, and the root
finder then runs on the PLD engine's upper bound on one fixed grid (the one the engine chose at the first PLD
evaluation for the requested tolerance). The value is finally re-accounted on the engine's adaptive grid: the
reported ε is the smaller of the two upper bounds (both valid) and ``epsilon_lower`` the engine's certified lower end.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dplens.accountant import conversions, pld
from dplens.accountant.compose import Accountant, Method
from dplens.accountant.routes import as_method

__all__ = [
    "CalibrationResult",
    "Direction",
    "RiskCalibrationResult",
    "RiskTarget",
    "calibrate",
    "calibrate_dp_sgd_noise",
    "calibrate_risk",
]

_EPS_CAP = 1e6  # ε values above this are treated as "far too large" so Brent sees finite numbers


class Direction(enum.Enum):
    """How ε moves when the parameter grows."""

    INCREASING = "increasing"  # e.g. steps, sampling rate
    DECREASING = "decreasing"  # e.g. noise multiplier


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationResult:
    """A calibrated parameter value with the ε it achieves (≤ target) under ``method``.

    Example:
        >>> import dplens
        >>> result = dplens.calibrate(lambda s: dplens.Gaussian(noise_multiplier=s), target_epsilon=1.0, delta=1e-5,
        ...                           lower=1.0, upper=10.0, method="exact")
        >>> round(result.value, 4), result.epsilon <= 1.0, result.method.value
        (3.7306, True, 'exact')
    """

    param: str
    value: float
    epsilon: float
    delta: float
    target_epsilon: float
    method: Method
    evaluations: int
    details: str = ""
    epsilon_lower: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "param": self.param,
            "value": self.value,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "target_epsilon": self.target_epsilon,
            "method": self.method.value,
            "evaluations": self.evaluations,
            "details": self.details,
        }
        if self.epsilon_lower is not None:
            out["epsilon_lower"] = self.epsilon_lower
        return out

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
    """The value closest to ``unsafe`` within [safe, unsafe] whose ε ≤ target (ε(safe) ≤ target given).

    Regula falsi with the Illinois modification (Dowell and Jarratt 1971): the end that stays put twice in a row has
    its function value halved, which restores superlinear convergence; a bisection step follows any step that did
    not halve the bracket (so at most twice the steps of bisection). Every evaluated point replaces the end of its own
    sign, so the safe end always has ε ≤ target and is returned.
    """
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

    # Over a positive bracket spanning decades (σ from 0.05 to 500), log ε is nearly linear in log x: interpolate
    # there. The sign of log ε − log target is that of ε − target, so the safe end stays safe.
    log_x = min(safe, unsafe) > 0 and max(safe, unsafe) >= 4 * min(safe, unsafe)
    to_u = math.log if log_x else float
    from_u = math.exp if log_x else float

    def gap(x: float) -> float:
        value = min(epsilon_of(x), _EPS_CAP)
        logged = (math.log(value) if value > 0 else -745.0) - math.log(target)
        # The side is decided on ε itself: a log can round an excess of one ulp away.
        if value > target:
            return max(logged, 1e-300)
        return min(logged, 0.0)

    a, fa = safe, gap(safe)  # fa ≤ 0
    b, fb = unsafe, gap(unsafe)  # fb > 0
    kept = 0  # +1: the safe end stayed put last time, −1: the unsafe end did
    width = abs(b - a)
    slow = 0
    for _ in range(200):
        if abs(b - a) <= xtol:
            break
        ua, ub = to_u(a), to_u(b)
        if slow >= 1 or not (fb > fa):
            x, slow = from_u(0.5 * (ua + ub)), 0
        else:
            x = from_u(ub - fb * (ub - ua) / (fb - fa))
        # Keep a strict interior point (a step onto an end would not shrink the bracket).
        margin = 0.25 * xtol
        low, high = min(a, b) + margin, max(a, b) - margin
        x = min(max(x, low), high) if low < high else 0.5 * (a + b)
        fx = gap(x)
        if fx <= 0:
            a, fa = x, fx
            if kept == 1:
                fb *= 0.5
            kept = 1
        else:
            b, fb = x, fx
            if kept == -1:
                fa *= 0.5
            kept = -1
        new_width = abs(b - a)
        slow = slow + 1 if new_width > 0.5 * width else 0
        width = new_width
    return a


def _local_solve(
    epsilon_of: _Counter, *, goal: float, near: float, safe: float, unsafe: float, integer: bool, xtol: float
) -> float:
    """:func:`_solve` for ε(x) = goal in a bracket grown geometrically around ``near`` (cheaper than the range)."""
    if epsilon_of(safe) > goal:
        return safe
    step = 0.01
    scale = max(abs(near), xtol, 1e-12)
    lo, hi = near, near
    for _ in range(40):
        # Steps of step·|near| towards each end (clipped to the ends): 1 %, 4 %, 16 %, …
        lo = near + math.copysign(min(step * scale, abs(safe - near)), safe - near)
        hi = near + math.copysign(min(step * scale, abs(unsafe - near)), unsafe - near)
        if integer:
            lo, hi = float(round(lo)), float(round(hi))
        if epsilon_of(lo) <= goal < epsilon_of(hi):
            return _solve(epsilon_of, target=goal, safe=lo, unsafe=hi, integer=integer, xtol=xtol)
        if lo == safe and hi == unsafe:
            break
        step *= 4
    return _solve(epsilon_of, target=goal, safe=safe, unsafe=unsafe, integer=integer, xtol=xtol)


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
    tolerance: float | None = None,
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
        xtol: absolute tolerance on the parameter (default 1e-10 relative to the bracket's smaller end, 1e-6
            relative on the PLD route; 1 for integers).
        value_discretization_interval: a fixed PLD grid for every PLD evaluation (default: the grid the PLD
            engine chooses for ``tolerance`` at the first evaluation next to the answer).
        tolerance: relative width of the PLD engine's certified bracket (default: the accountants' own).

    Returns:
        A :class:`CalibrationResult` whose ``epsilon`` (recomputed at ``value``) is ≤ ``target_epsilon``.

    Raises:
        ValueError: invalid arguments, or the target is unreachable in the bracket.
    """
    target = conversions.check_epsilon(target_epsilon, name="target_epsilon")
    if target == 0:
        raise ValueError(f"target_epsilon must be > 0; got {target_epsilon!r}")
    delta = conversions.check_delta(target_delta, name="target_delta")
    method = as_method(method)
    lower, upper, tol = _search_bracket(lower, upper, integer, xtol)

    def route_epsilon(x: float, route: Method, interval: float | None = None) -> float:
        acc = make_accountant(int(x) if integer else x)
        if route is Method.PLD and (interval is not None or tolerance is not None):
            acc = _with_grid(acc, interval, tolerance)
        try:
            return acc.epsilon(delta, method=route)
        except pld.PldOutOfRangeError:
            # Losses beyond the PLD engine's range (e.g. a tiny σ at the unsafe end of the bracket): the point counts
            # as unsafe, so the search never returns it and the answer stays on the safe side.
            return math.inf

    rdp_eps = _Counter(lambda x: route_epsilon(x, Method.RDP))
    if direction is None:
        direction = Direction.DECREASING if rdp_eps(lower) >= rdp_eps(upper) else Direction.INCREASING
    if not isinstance(direction, Direction):
        raise ValueError(f"direction must be a Direction; got {direction!r}")
    safe, unsafe = (upper, lower) if direction is Direction.DECREASING else (lower, upper)
    outer_safe = safe

    if method is Method.PLD:
        if xtol is None and not integer:
            tol = max(tol, 1e-6 * min(abs(lower), abs(upper)))
        final, details, safe, unsafe = _pld_search(
            make_accountant,
            route_epsilon,
            rdp_eps,
            target=target,
            delta=delta,
            safe=safe,
            unsafe=unsafe,
            integer=integer,
            tol=tol,
            tolerance=tolerance,
            interval=value_discretization_interval,
        )
    else:
        final = rdp_eps if method is Method.RDP else _Counter(lambda x: route_epsilon(x, method))
        details = method.value

    value, epsilon = _solve_on_route(
        final, method, target=target, safe=safe, unsafe=unsafe, integer=integer, tol=tol, where=(param, lower, upper)
    )
    epsilon_lower = None
    if method is Method.PLD:
        recheck = dict(target=target, delta=delta, safe=outer_safe, integer=integer, tolerance=tolerance, xtol=tol)
        value, epsilon, epsilon_lower = _recheck_on_adaptive_grid(make_accountant, value, **recheck)
        if epsilon_lower is not None:
            details += f"; certified bracket at the answer [{epsilon_lower:.6g}, {epsilon:.6g}]"
    return CalibrationResult(
        param=param,
        value=int(value) if integer else value,
        epsilon=epsilon,
        delta=delta,
        target_epsilon=target,
        method=method,
        evaluations=rdp_eps.calls + (final.calls if final is not rdp_eps else 0),
        details=details,
        epsilon_lower=epsilon_lower,
    )


def _search_bracket(lower: Any, upper: Any, integer: bool, xtol: float | None) -> tuple[float, float, float]:
    """The checked search bracket (integer ends for an integer parameter) and the search's absolute tolerance."""
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
    return lower, upper, tol


def _solve_on_route(
    final: Callable[[float], float],
    method: Method,
    *,
    target: float,
    safe: float,
    unsafe: float,
    integer: bool,
    tol: float,
    where: tuple[str, float, float],
) -> tuple[float, float]:
    """The value closest to the target on the route's ε function that never exceeds it, and its ε."""
    param, lower, upper = where
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
    return value, epsilon


def _pld_search(
    make_accountant: Callable[[float], Accountant],
    route_epsilon: Callable[..., float],
    rdp_eps: _Counter,
    *,
    target: float,
    delta: float,
    safe: float,
    unsafe: float,
    integer: bool,
    tol: float,
    tolerance: float | None,
    interval: float | None,
) -> tuple[_Counter, str, float, float]:
    """The PLD route's search set-up: its ε function on one grid, its description, and the bracket from RDP.

    The first PLD evaluation, next to the RDP answer, lets the engine choose its grid for the tolerance; the search
    then stays on that grid (each evaluation one pass of the engine).
    """
    start = safe
    if rdp_eps(safe) <= target:
        loose = max(tol, 1e-5 * min(abs(safe), abs(unsafe))) if not integer else tol
        start = _solve(rdp_eps, target=target, safe=safe, unsafe=unsafe, integer=integer, xtol=loose)
    if interval is None:
        first = make_accountant(int(start) if integer else start)
        interval = pld.pld_epsilon(
            list(first.ledger),
            delta,
            neighboring=first.neighboring,
            tolerance=first.tolerance if tolerance is None else tolerance,
        ).value_discretization_interval
    final = _Counter(lambda x: route_epsilon(x, Method.PLD, interval))
    details = f"PLD (value_discretization_interval={interval:g} during the search)"
    if rdp_eps(safe) <= target:
        safe, unsafe = _pld_bracket_from_rdp(
            rdp_eps, final, target=target, safe=safe, unsafe=unsafe, integer=integer, xtol=tol, start=start
        )
    return final, details, safe, unsafe


def _recheck_on_adaptive_grid(
    make_accountant: Callable[[float], Accountant],
    value: float,
    *,
    target: float,
    delta: float,
    safe: float,
    integer: bool,
    tolerance: float | None,
    xtol: float,
) -> tuple[float, float, float | None]:
    """Re-account the answer as a fresh accountant would (the engine's adaptive grid) and keep ε ≤ target there too.

    The search ran on one fixed grid; another grid gives another (equally valid) upper bound, which can exceed the
    target by a hair at the answer. Then the value moves towards the safe end in growing steps until the re-accounted
    ε is within the target. Returns (value, ε, ε_lower) of the adaptive re-check.
    """
    step = 1.0 if integer else max(xtol, 1e-6 * abs(value))
    for _ in range(60):
        accountant = _with_grid(make_accountant(int(value) if integer else value), None, tolerance)
        result = accountant.epsilon_result(delta, method=Method.PLD)
        if result.epsilon <= target:
            return value, result.epsilon, result.epsilon_lower
        if value == safe:
            break
        value = value + math.copysign(min(step, abs(safe - value)), safe - value)
        step *= 2.0
    raise ValueError(
        f"target_epsilon={target!r} is unreachable: the PLD re-check at {value!r} gives epsilon={result.epsilon!r}"
    )


def _pld_bracket_from_rdp(
    rdp_eps: _Counter,
    pld_eps: _Counter,
    *,
    target: float,
    safe: float,
    unsafe: float,
    integer: bool,
    xtol: float,
    start: float | None = None,
) -> tuple[float, float]:
    """A tight bracket for the PLD answer, using the cheap RDP curve as a surrogate.

    The ratio PLD ε / RDP ε barely changes near the answer, so solving RDP ε(x) = target / ratio lands within
    ~1e-4 of the PLD answer after two or three PLD evaluations. Every PLD value is computed, not assumed: the
    returned ``safe`` end satisfies PLD ε ≤ target.
    """
    best_safe, best_unsafe = safe, unsafe
    # The RDP solves only steer the search, so a looser tolerance is enough.
    xtol = max(xtol, 1e-5 * min(abs(safe), abs(unsafe)) if not integer else xtol)
    x = (
        start
        if start is not None
        else _solve(rdp_eps, target=target, safe=safe, unsafe=unsafe, integer=integer, xtol=xtol)
    )
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
        x_next = _local_solve(rdp_eps, goal=goal, near=x, safe=safe, unsafe=unsafe, integer=integer, xtol=xtol)
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


def _with_grid(accountant: Accountant, interval: float | None, tolerance: float | None) -> Accountant:
    """A copy of ``accountant`` with another PLD grid (None: adaptive) and bracket tolerance (None: its own)."""
    copy = Accountant(
        neighboring=accountant.neighboring,
        value_discretization_interval=interval,
        tolerance=accountant.tolerance if tolerance is None else tolerance,
    )
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


# --------------------------------------------------------------------------------------------
# Calibration to an attack-risk target (Kulynych et al., NeurIPS 2024)
# --------------------------------------------------------------------------------------------

#: The grid of the first, coarse search of a risk calibration (its bounds are pessimistic: the answer is safe on it).
_COARSE_INTERVAL = 2e-3


@dataclass(frozen=True, slots=True, kw_only=True)
class RiskTarget:
    """An attack-risk target: ``max_tpr`` at ``at_fpr`` (no attack's TPR at that FPR above it), or ``max_advantage``
    (no attack's TPR − FPR above it). Kulynych et al., "Attack-Aware Noise Calibration for Differential Privacy",
    NeurIPS 2024, §4.

    Example:
        >>> RiskTarget(max_tpr=0.05, at_fpr=0.01).describe()
        'TPR <= 0.05 at FPR 0.01'
        >>> RiskTarget(max_tpr=0.01, at_fpr=0.01)
        Traceback (most recent call last):
        ...
        ValueError: max_tpr=0.01 at at_fpr=0.01 is unreachable: an attack that guesses at random already has TPR = FPR
    """

    max_tpr: float | None = None
    at_fpr: float | None = None
    max_advantage: float | None = None

    def __post_init__(self) -> None:
        from dplens.accountant.risk import check_fpr

        if self.max_advantage is not None:
            if self.max_tpr is not None or self.at_fpr is not None:
                raise ValueError("give either max_advantage or max_tpr with at_fpr, not both")
            check_fpr(self.max_advantage, name="max_advantage")
            return
        if self.max_tpr is None or self.at_fpr is None:
            raise ValueError(
                f"a risk target needs max_tpr with at_fpr, or max_advantage; got max_tpr={self.max_tpr!r}, "
                f"at_fpr={self.at_fpr!r}"
            )
        check_fpr(self.max_tpr, name="max_tpr")
        check_fpr(self.at_fpr, name="at_fpr")
        if self.max_tpr <= self.at_fpr:
            raise ValueError(
                f"max_tpr={self.max_tpr!r} at at_fpr={self.at_fpr!r} is unreachable: an attack that guesses at random "
                "already has TPR = FPR"
            )

    @property
    def kind(self) -> str:
        return "advantage" if self.max_advantage is not None else "tpr"

    @property
    def value(self) -> float:
        return float(self.max_advantage if self.max_advantage is not None else self.max_tpr)

    @property
    def fprs(self) -> tuple[float, ...]:
        """The FPRs the calibration evaluates (the target's; the smallest default one for an advantage target)."""
        return (float(self.at_fpr),) if self.at_fpr is not None else (1e-3,)

    def measure(self, risk: Any) -> float:
        """The target's quantity in an :class:`~dplens.accountant.risk.AttackRisk` (its upper bound)."""
        return risk.advantage_upper if self.max_advantage is not None else risk.tpr(self.at_fpr)

    def describe(self) -> str:
        if self.max_advantage is not None:
            return f"advantage TPR - FPR <= {self.max_advantage:g}"
        return f"TPR <= {self.max_tpr:g} at FPR {self.at_fpr:g}"

    def to_dict(self) -> dict[str, Any]:
        if self.max_advantage is not None:
            return {"max_advantage": self.max_advantage}
        return {"max_tpr": self.max_tpr, "at_fpr": self.at_fpr}


@dataclass(frozen=True, slots=True, kw_only=True)
class RiskCalibrationResult:
    """A parameter calibrated to an attack-risk target, with the risk it achieves (every number an upper bound, the
    target's quantity ≤ the target) and the ε at δ the same value gives.

    ``risk`` is the :class:`~dplens.accountant.risk.AttackRisk` at ``value`` (the target's FPR and the report's card
    FPRs); ``warnings`` say what a target leaves open (an advantage target: the TPR at low FPR).

    Example (a Gaussian's σ for advantage ≤ 0.2: 2Φ(1/(2σ)) − 1 = 0.2, σ = 1.9736):
        >>> from dplens import Accountant, Gaussian
        >>> result = calibrate_risk(lambda s: Accountant().compose(Gaussian(noise_multiplier=s)),
        ...                         target=RiskTarget(max_advantage=0.2), lower=0.1, upper=100.0, method="exact")
        >>> round(result.value, 4), result.achieved <= 0.2, result.warnings[0][:40]
        (1.9736, True, '--max-advantage bounds TPR - FPR only: a')
    """

    param: str
    value: float
    target: RiskTarget
    achieved: float
    risk: Any
    epsilon: float | None
    delta: float | None
    method: Method
    evaluations: int
    details: str = ""
    epsilon_lower: float | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {
            "param": self.param,
            "value": self.value,
            "target": self.target.to_dict(),
            "achieved": self.achieved,
            "tpr_upper": self.risk.to_dict()["tpr_upper"],
            "advantage_upper": self.risk.advantage_upper,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "method": self.method.value,
            "evaluations": self.evaluations,
            "details": self.details,
            "warnings": list(self.warnings),
        }
        out |= {f"target_{k}": v for k, v in self.target.to_dict().items()}
        if self.epsilon_lower is not None:
            out["epsilon_lower"] = self.epsilon_lower
        return out

    def __repr__(self) -> str:
        eps = "" if self.epsilon is None else f"; epsilon={self.epsilon:.6g} at delta={self.delta:g}"
        return (
            f"RiskCalibrationResult({self.param}={self.value:.8g}: {self.target.describe()} holds, achieved "
            f"{self.achieved:.6g}{eps}, method={self.method.value})"
        )


def _risk_route(accountant: Accountant) -> Method:
    """The route a risk calibration searches on: dplens's PLD engine where it models the whole ledger, else its exact
    profile, else its RDP curve, else dp-accounting's PLD (upper bounds only, and slow: the last resort)."""
    from dplens.accountant import pld_engine
    from dplens.accountant.rdp import UnsupportedEventError

    if pld_engine.supports(list(accountant.ledger), neighboring=accountant.neighboring):
        return Method.PLD
    for route, probe in ((Method.EXACT, accountant.exact_profile), (Method.RDP, accountant.rdp_curve)):
        try:
            probe()
        except UnsupportedEventError:
            continue
        return route
    return Method.PLD  # the PLD route says why at the first evaluation if it does not apply either


def _risk_of(make_accountant: Callable[[float], Accountant], target: RiskTarget, method: Method, interval, tolerance):
    """x ↦ the target's quantity (an upper bound) on a fixed PLD grid (or the route), ∞ beyond the engine's range."""
    from dplens.accountant.risk import DEFAULT_RISK_TOLERANCE, attack_risk

    def measure(x: float) -> float:
        acc = make_accountant(x)
        if method is Method.PLD:
            acc = _with_grid(acc, interval, None)
        try:
            risk = attack_risk(acc, fprs=target.fprs, method=method, tolerance=tolerance or DEFAULT_RISK_TOLERANCE)
        except pld.PldOutOfRangeError:
            return math.inf
        return target.measure(risk)

    return measure


def _risk_direction(build: Callable[[float], Accountant], measure: _Counter, lower: float, upper: float) -> Direction:
    """How risk moves with the parameter: read off the cheap RDP ε at the bracket's ends (risk and ε move together),
    else off the risk itself."""
    from dplens.accountant.rdp import UnsupportedEventError

    try:
        low, high = (build(x).epsilon(1e-5, method=Method.RDP) for x in (lower, upper))
    except UnsupportedEventError:
        low, high = measure(lower), measure(upper)
    if low == high:
        low, high = measure(lower), measure(upper)
    if math.isinf(low) and math.isinf(high):
        raise ValueError(f"the risk target cannot be evaluated at either end of [{lower!r}, {upper!r}]")
    return Direction.DECREASING if low >= high else Direction.INCREASING


def _middle_out_bracket(
    measure: _Counter, goal: float, *, safe: float, unsafe: float, integer: bool
) -> tuple[float, float] | None:
    """A bracket (a safe point, an unsafe point) found from the middle of [safe, unsafe] (geometric where both ends are
    positive) in steps of a factor 4 (else halving the distance), without evaluating either far end unless needed: a
    nearly noiseless mechanism's PLD, and a very noisy discrete one's, are expensive to build. None when even
    ``safe`` fails the target."""
    geometric = min(safe, unsafe) > 0

    def toward(point: float, end: float) -> float:
        if geometric:
            step = point * 4.0 if end > point else point / 4.0
            nxt = min(step, end) if end > point else max(step, end)
        else:
            nxt = end if abs(end - point) < 1e-12 else point + 0.5 * (end - point)
        return float(round(nxt)) if integer else nxt

    start = math.sqrt(safe * unsafe) if geometric else 0.5 * (safe + unsafe)
    start = float(round(start)) if integer else start
    ok = measure(start) <= goal
    point, end = start, (unsafe if ok else safe)
    for _ in range(400):
        if point == end:
            return (point, unsafe) if ok else None
        nxt = toward(point, end)
        if nxt == point:
            return (point, unsafe) if ok else None
        if (measure(nxt) <= goal) != ok:
            return (point, nxt) if ok else (nxt, point)
        point = nxt
    return (point, unsafe) if ok else None


def _fine_search(
    measure: _Counter, target: float, *, answer: float, ends: tuple[float, float], integer: bool, xtol: float
) -> float:
    """The answer on a finer grid, searched next to the coarse one (``answer`` is safe there: coarse bounds are
    pessimistic, so the fine answer lies between it and the unsafe end). ``ends`` = (safe end, unsafe end)."""
    safe_end, unsafe_end = ends
    if measure(answer) > target:  # pragma: no cover - a finer pessimistic grid only lowers the bound
        return _solve(measure, target=target, safe=safe_end, unsafe=answer, integer=integer, xtol=xtol)
    sign = 1.0 if unsafe_end > safe_end else -1.0
    step = 1.0 if integer else max(abs(answer) * 1e-3, xtol)
    unsafe = answer
    for _ in range(40):
        unsafe = unsafe + sign * step
        unsafe = min(unsafe, unsafe_end) if sign > 0 else max(unsafe, unsafe_end)
        if integer:
            unsafe = float(round(unsafe))
        if measure(unsafe) > target:
            break
        if unsafe == unsafe_end:
            return unsafe
        step *= 4
    else:
        return unsafe
    return _solve(measure, target=target, safe=answer, unsafe=unsafe, integer=integer, xtol=xtol)


def calibrate_risk(
    make_accountant: Callable[[float], Accountant],
    *,
    target: RiskTarget,
    lower: float,
    upper: float,
    direction: Direction | None = None,
    integer: bool = False,
    param: str = "param",
    delta: float | None = None,
    method: Method | str = Method.PLD,
    tolerance: float | None = None,
    xtol: float | None = None,
) -> RiskCalibrationResult:
    """Calibrate a scalar parameter so that the attack risk meets ``target``, as tightly as possible, never over it.

    The search runs on the PLD engine's pessimistic bounds, first on a coarse grid (fast; its answer is safe on every
    finer grid), then next to that answer on the grid the engine chooses for ``tolerance``; the answer is re-checked
    as :func:`dplens.accountant.risk.attack_risk` computes it (adaptive grid) and moved towards the safe side until it
    holds there too. Any route can be named (``exact``, ``rdp``); each evaluation is then that route's bound.

    Args:
        make_accountant: builds a fresh Accountant for a parameter value (e.g. DP-SGD's steps with noise σ).
        target: a :class:`RiskTarget`.
        lower, upper: the search bracket.
        direction: how risk moves with the parameter (noise: DECREASING); None detects it from the bracket's ends.
        integer: the parameter is an integer (e.g. steps: the largest number meeting the target).
        param: the parameter's name (for messages and the result).
        delta: when given, the ε at this δ of the calibrated value is reported beside it (tightest route).
        method: the route of the risk bound (default PLD; BEST: PLD where it applies, else exact, else RDP).
        tolerance: the PLD engine's relative bracket width at the answer (default 1e-3).
        xtol: absolute tolerance on the parameter (default 1e-6 relative; 1 for integers).

    Returns:
        A :class:`RiskCalibrationResult` whose ``achieved`` (recomputed at ``value``) is ≤ the target.

    Raises:
        ValueError: invalid arguments, or a target that no value in the bracket meets (one line, naming it).

    Example (σ of one Gaussian for TPR ≤ 5 % at FPR 1 %: μ = 1/σ with Φ(Φ⁻¹(0.01) + μ) = 0.05, σ = 1.4674):
        >>> from dplens import Accountant, Gaussian
        >>> result = calibrate_risk(lambda s: Accountant().compose(Gaussian(noise_multiplier=s)),
        ...                         target=RiskTarget(max_tpr=0.05, at_fpr=0.01), lower=0.1, upper=100.0,
        ...                         param="noise_multiplier", delta=1e-5, method="exact")
        >>> round(result.value, 4), result.achieved <= 0.05, round(result.epsilon, 3)
        (1.4674, True, 2.823)
    """
    from dplens.accountant.risk import DEFAULT_FPRS, attack_risk

    if not isinstance(target, RiskTarget):
        raise ValueError(f"target must be a RiskTarget; got {target!r}")
    method = as_method(method)
    for name, value in (("lower", lower), ("upper", upper)):
        if isinstance(value, bool) or not (isinstance(value, int | float) and math.isfinite(value)):
            raise ValueError(f"{name} must be a finite number; got {value!r}")
    if not lower < upper:
        raise ValueError(f"lower must be < upper; got lower={lower!r}, upper={upper!r}")
    if method is Method.BEST:  # one route for the whole search: the tightest that applies (PLD, else exact, else RDP)
        middle = math.sqrt(lower * upper) if lower > 0 else 0.5 * (lower + upper)
        method = _risk_route(make_accountant(round(middle) if integer else middle))
    if delta is not None:
        delta = conversions.check_delta(delta, name="delta")
    if integer:
        lower, upper = float(math.ceil(lower)), float(math.floor(upper))
    tol = xtol if xtol is not None else (1.0 if integer else 1e-6 * max(min(abs(lower), abs(upper)), 1e-12))
    build = (lambda x: make_accountant(int(x))) if integer else make_accountant
    goal = target.value
    coarse = _Counter(_risk_of(build, target, method, _COARSE_INTERVAL, tolerance))
    if direction is None:
        direction = _risk_direction(build, coarse, lower, upper)
    safe, unsafe = (upper, lower) if direction is Direction.DECREASING else (lower, upper)
    bracket = _middle_out_bracket(coarse, goal, safe=safe, unsafe=unsafe, integer=integer)
    if bracket is None:  # even the safe end fails on the coarse grid: try it on the fine one before giving up
        final = _risk_of(build, target, method, None, tolerance)(safe)
        if final > goal:
            raise ValueError(
                f"the risk target {target.describe()} is unreachable for {param} in [{lower!r}, {upper!r}]: at "
                f"{param}={safe!r} the bound is {final:.6g} (method={method.value})"
            )
        value, fine = safe, None
    else:
        near_safe, near_unsafe = bracket
        # On the engine's PLD route the coarse grid only has to land next to the answer (the fine search finishes it).
        coarse_only = integer or method is not Method.PLD
        loose = tol if coarse_only else max(tol, 1e-4 * min(abs(near_safe), abs(near_unsafe)))
        answer = _solve(coarse, target=goal, safe=near_safe, unsafe=near_unsafe, integer=integer, xtol=loose)
        value, fine = _fine_value(build, target, method, tolerance, answer, (safe, unsafe), integer, tol)
    value, risk = _recheck_risk(build, target, method, tolerance, value, safe=safe, integer=integer, xtol=tol)
    full = attack_risk(build(value), fprs=tuple(dict.fromkeys((*target.fprs, *DEFAULT_FPRS))), method=method,
                       tolerance=tolerance or 1e-3)  # fmt: skip
    epsilon = epsilon_lower = None
    if delta is not None:
        result = build(value).epsilon_result(delta)
        epsilon, epsilon_lower = result.epsilon, result.epsilon_lower
    return RiskCalibrationResult(
        param=param,
        value=int(value) if integer else value,
        target=target,
        achieved=target.measure(risk),
        risk=full,
        epsilon=epsilon,
        delta=delta,
        method=method,
        evaluations=coarse.calls + (fine.calls if fine is not None else 0),
        details=f"{method.value}: {risk.details}",
        epsilon_lower=epsilon_lower,
        warnings=_risk_warnings(target, full),
    )


def _fine_value(build, target, method, tolerance, answer, ends, integer, tol) -> tuple[float, _Counter | None]:
    """The answer on the grid dplens's PLD engine chooses for ``tolerance`` next to the coarse ``answer`` (the other
    routes, and dp-accounting's PLD, keep the coarse answer: it is safe, and re-checked)."""
    from dplens.accountant.risk import DEFAULT_RISK_TOLERANCE, attack_risk

    if method is not Method.PLD:
        return answer, None
    first = attack_risk(build(answer), fprs=target.fprs, method=method, tolerance=tolerance or DEFAULT_RISK_TOLERANCE)
    interval = _interval_of(first.details) if "dplens engine" in first.details else None
    if interval is None or interval >= _COARSE_INTERVAL:
        return answer, None
    fine = _Counter(_risk_of(build, target, method, interval, tolerance))
    xtol = tol if integer else max(tol, 1e-6 * abs(answer))
    return _fine_search(fine, target.value, answer=answer, ends=ends, integer=integer, xtol=xtol), fine


def _interval_of(details: str) -> float | None:
    import re

    match = re.search(r"value_discretization_interval=([0-9.eE+-]+)", details)
    return float(match.group(1)) if match else None


def _recheck_risk(build, target, method, tolerance, value, *, safe, integer, xtol):
    """The risk as a fresh call computes it (adaptive grid), the value moved towards ``safe`` until it holds."""
    from dplens.accountant.risk import DEFAULT_RISK_TOLERANCE, attack_risk

    step = 1.0 if integer else max(xtol, 1e-6 * abs(value))
    for _ in range(60):
        risk = attack_risk(build(value), fprs=target.fprs, method=method, tolerance=tolerance or DEFAULT_RISK_TOLERANCE)
        if target.measure(risk) <= target.value:
            return value, risk
        if value == safe:
            break
        value = value + math.copysign(min(step, abs(safe - value)), safe - value)
        step *= 2.0
    raise ValueError(f"the risk target {target.describe()} is unreachable: the re-check at {value!r} does not meet it")


def _risk_warnings(target: RiskTarget, risk: Any) -> tuple[str, ...]:
    """What an advantage target leaves open: the TPR at the smallest FPR of the card (Kulynych et al. 2024, §4.2)."""
    if target.max_advantage is None:
        return ()
    fpr = min(risk.fprs)
    tpr = risk.tpr(fpr)
    return (
        f"--max-advantage bounds TPR - FPR only: at FPR {fpr:g} an attack may still reach TPR {tpr:.4g} "
        f"({tpr / fpr:.3g} times the FPR); calibrate with --max-tpr T --at-fpr {fpr:g} to bound it",
    )
