"""The top-level functions of the public API: :func:`calibrate` and :func:`audit`.

They accept what a user has at hand (a spec file, a parsed :class:`~dplens.spec.Spec`, a function building an
accountant or an event, a mechanism object, a callable target) and dispatch to the layer that does the work. Heavy
modules are imported inside the functions, so ``import dplens`` stays cheap.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["PARAMETER_DEFAULTS", "audit", "calibrate", "calibrate_spec"]

#: Spec parameter → (default bracket, how ε moves as it grows (a ``Direction`` value), integer?).
PARAMETER_DEFAULTS: dict[str, tuple[tuple[float, float], str, bool]] = {
    "noise_multiplier": ((0.05, 500.0), "decreasing", False),
    "scale": ((1e-3, 1e4), "decreasing", False),
    "sigma": ((1e-3, 1e6), "decreasing", False),
    "gamma": ((2.5 + 1e-9, 1e15), "decreasing", False),
    "steps": ((1, 1e8), "increasing", True),
    "count": ((1, 1e8), "increasing", True),
    "sampling_rate": ((1e-9, 1.0), "increasing", False),
    "epsilon": ((1e-6, 50.0), "increasing", False),
}


def _first_valid(make: Callable[[float], Any], lower: float, upper: float) -> float:
    """The default bracket's lower end, moved up to the smallest value the spec's types accept.

    The default brackets span every type, and some types refuse their low end (GaussMix needs γ = (σ² + λ̄_min)/C_X²
    above 1): a refused value can never be an answer, so bisect (in log space) for the first accepted one.
    """

    def accepted(value: float) -> bool:
        try:
            make(value)
        except ValueError:
            return False
        return True

    if accepted(lower) or not accepted(upper) or lower <= 0:
        return lower
    refused, valid = lower, upper
    for _ in range(100):
        middle = math.sqrt(refused * valid)
        if not refused < middle < valid:
            break
        refused, valid = (refused, middle) if accepted(middle) else (middle, valid)
    return valid


def _as_spec(subject: Any) -> Any:
    from dplens.spec import Spec, load_spec

    if isinstance(subject, Spec):
        return subject
    if isinstance(subject, str | Path):
        return load_spec(subject)
    return None


def calibrate_spec(
    spec: Any,
    *,
    param: str,
    target_epsilon: float,
    delta: float,
    method: Any = None,
    bracket: tuple[float, float] | None = None,
    tolerance: float | None = None,
) -> Any:
    """Calibrate parameter ``param`` of every mechanism of ``spec`` that takes it (``dplens calibrate``).

    The default bracket and direction of ε come from :data:`PARAMETER_DEFAULTS`; an unknown parameter needs
    ``bracket``. ``tolerance`` is the PLD engine's relative bracket width (default 1e-3). Returns a
    :class:`~dplens.accountant.calibrate.CalibrationResult` whose ε is ≤ the target.

    With the PLD route the search is bracketed by RDP first, so a default bracket of [0.05, 500] costs a few
    RDP evaluations, not PLD ones (the PLD engine runs only next to the answer).
    """
    from dplens.accountant.calibrate import Direction
    from dplens.accountant.calibrate import calibrate as solve
    from dplens.accountant.compose import Method

    method = Method.PLD if method is None else method
    if isinstance(method, str):
        method = Method(method)
    if method is Method.BEST:
        method = Method.PLD  # the tightest standard route; BEST would re-run every route at every step
    known = PARAMETER_DEFAULTS.get(param)
    if bracket is not None:
        lower, upper = bracket
    elif known is not None:
        lower, upper = known[0]
    else:
        raise ValueError(f"param {param!r} has no default bracket; pass a bracket (--bracket LOW HIGH)")
    direction = Direction(known[1]) if known else None
    integer = known[2] if known else False

    def make(value: float) -> Any:
        return spec.with_param(param, int(value) if integer else float(value)).accountant()

    if bracket is None and not integer:
        lower = _first_valid(make, lower, upper)
    spec.with_param(param, int(lower) if integer else lower)  # a bad name or value fails here, before the search
    return solve(
        make,
        target_epsilon=target_epsilon,
        target_delta=delta,
        lower=lower,
        upper=upper,
        method=method,
        direction=direction,
        integer=integer,
        param=param,
        tolerance=tolerance,
    )


def calibrate(
    subject: Any,
    *,
    target_epsilon: float,
    delta: float,
    param: str | None = None,
    lower: float | None = None,
    upper: float | None = None,
    method: Any = None,
    integer: bool = False,
    tolerance: float | None = None,
) -> Any:
    """The parameter value that meets (``target_epsilon``, ``delta``) as tightly as possible, never overshooting.

    Args:
        subject: a spec (a path, or a parsed :class:`~dplens.spec.Spec`: ``param`` names the parameter), or a
            function of the parameter value returning an :class:`~dplens.accountant.compose.Accountant` or an event
            (then ``lower`` and ``upper`` bracket the search).
        target_epsilon: the ε not to exceed.
        delta: δ of the guarantee.
        param: the spec parameter to calibrate (with a spec), or the name recorded in the result.
        lower, upper: the search bracket (optional with a spec parameter that has a default).
        method: the accounting route (a :class:`~dplens.accountant.compose.Method` or its value; default PLD).
        integer: the parameter is an integer (with a function).
        tolerance: the PLD engine's relative bracket width at the answer (default 1e-3).

    Returns:
        A :class:`~dplens.accountant.calibrate.CalibrationResult`; its ``epsilon`` (recomputed at ``value``) is
        ≤ ``target_epsilon``.

    Example:
        >>> import dplens
        >>> def dp_sgd(sigma):
        ...     step = dplens.PoissonSampled(sampling_rate=0.01, event=dplens.Gaussian(noise_multiplier=sigma))
        ...     return dplens.SelfComposed(event=step, count=1000)
        >>> result = dplens.calibrate(dp_sgd, target_epsilon=2.0, delta=1e-5, lower=0.5, upper=5.0, method="rdp")
        >>> result.epsilon <= 2.0
        True
        >>> round(result.value, 3)
        1.022
    """
    spec = _as_spec(subject)
    if spec is not None:
        if not isinstance(param, str):
            raise ValueError(f"param must name a spec parameter; got {param!r}")
        bracket = None if lower is None and upper is None else (lower, upper)
        if bracket is not None and None in bracket:
            raise ValueError(f"lower and upper go together; got lower={lower!r}, upper={upper!r}")
        return calibrate_spec(
            spec,
            param=param,
            target_epsilon=target_epsilon,
            delta=delta,
            method=method,
            bracket=bracket,
            tolerance=tolerance,
        )
    if not callable(subject):
        raise ValueError(f"subject must be a spec, a spec path or a function of the parameter; got {subject!r}")
    if lower is None or upper is None:
        raise ValueError(f"calibrating a function needs lower and upper; got lower={lower!r}, upper={upper!r}")
    from dplens.accountant import events as ev
    from dplens.accountant.calibrate import calibrate as solve
    from dplens.accountant.compose import Accountant, Method

    method = Method.PLD if method is None else method
    if isinstance(method, str):
        method = Method(method)

    def make(value: float) -> Accountant:
        built = subject(int(value) if integer else value)
        if isinstance(built, ev.Event):
            return Accountant().compose(built)
        if isinstance(built, Accountant):
            return built
        raise ValueError(f"the calibrated function must return an Accountant or an Event; got {built!r}")

    return solve(
        make,
        target_epsilon=target_epsilon,
        target_delta=delta,
        lower=lower,
        upper=upper,
        method=method,
        integer=integer,
        param=param or "param",
        tolerance=tolerance,
    )


def audit(
    subject: Any,
    pair: Any = None,
    *,
    trials: int,
    claim: tuple[float, float] | None = None,
    delta: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    workers: int = 1,
    scheduler: Any = None,
    checkpoint: str | Path | None = None,
    progress: bool = False,
    **options: Any,
) -> Any:
    """Run an audit from Python and return its result (a valid lower bound on ε, a verdict against the claim).

    Args:
        subject: what to audit: a spec (a path or a parsed :class:`~dplens.spec.Spec`; the claim is its
            ``[claim]``, else the accountant's ε), or a mechanism object (``sample`` and ``worst_case_pair``; the
            claim is ``claim``, else the accountant's ε of ``mechanism.event``).
        pair: the neighbouring pair (D, D′) for a mechanism (default: its documented worst case).
        trials: trials per side.
        claim: (ε, δ) under test.
        delta: δ of the statement under test when ``claim`` is not given.
        confidence: 1 − α of the bound.
        seed: root seed; the result depends only on it.
        workers, scheduler, checkpoint, progress: execution (a process pool, a Dask scheduler, a resumable
            checkpoint, a progress bar).
        options: passed to the game (e.g. ``score``, ``strategy``).

    Returns:
        An :class:`~dplens.auditing.games.AuditResult`.

    Example:
        >>> import dplens
        >>> from dplens.mechanisms.additive import LaplaceMechanism
        >>> result = dplens.audit(LaplaceMechanism(scale=1.0), trials=20_000, claim=(1.0, 0.0), seed=1)
        >>> result.verdict.value, result.epsilon_lower_bound <= 1.0
        ('CONSISTENT', True)
    """
    execution = {
        "confidence": confidence,
        "seed": seed,
        "workers": workers,
        "scheduler": scheduler,
        "checkpoint": checkpoint,
        "progress": progress,
    }
    spec = _as_spec(subject)
    if spec is not None:
        if pair is not None or options:
            raise ValueError("a spec audit takes no pair or game options: the spec's mechanism fixes them")
        if claim is not None:
            from dataclasses import replace

            from dplens.spec import Claim

            spec = replace(spec, claim=Claim(epsilon=float(claim[0]), delta=float(claim[1])))
        from dplens.auditing.games import audit_spec

        return audit_spec(spec, trials=trials, delta=delta, **execution)
    if hasattr(subject, "sample") and hasattr(subject, "worst_case_pair"):
        from dplens.auditing.games import audit as run_game

        if claim is not None:
            claimed, claim_delta, source = float(claim[0]), float(claim[1]), "given"
        else:
            from dplens.accountant.compose import Accountant

            claim_delta = 1e-5 if delta is None else delta
            claimed = Accountant().compose(subject.event).epsilon(claim_delta) if claim_delta > 0 else math.inf
            source = "accountant"
        return run_game(
            subject,
            trials=trials,
            delta=claim_delta,
            claimed_epsilon=claimed,
            pair=pair,
            claim_source=source,
            **execution,
            **options,
        )
    if callable(subject):
        raise ValueError(
            "auditing a Python callable target needs dplens.auditing.targets (not available in this version)"
        )
    raise ValueError(f"subject must be a spec, a spec path, a mechanism or a callable target; got {subject!r}")
