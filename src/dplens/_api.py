"""The top-level functions of the public API: :func:`calibrate`, :func:`audit` and :func:`generate_report`.

They accept what a user has at hand (a spec file, a parsed :class:`~dplens.spec.Spec`, a function building an
accountant or an event, a mechanism object, a callable target) and dispatch to the layer that does the work. Heavy
modules are imported inside the functions, so ``import dplens`` stays cheap.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "PARAMETER_DEFAULTS",
    "AuditMode",
    "attack_risk",
    "audit",
    "calibrate",
    "calibrate_spec",
    "default_delta",
    "generate_report",
    "report_summary",
]

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
    """The spec ``subject`` is or names, else None (the front door decides: :func:`dplens._inputs.spec_of`)."""
    from dplens._inputs import spec_of

    return spec_of(subject)


def _audit_target(
    subject: Any,
    pair: Any,
    *,
    trials: int,
    claim: tuple[float, float] | None,
    delta: float | None,
    execution: dict[str, Any],
    **options: Any,
) -> Any:
    """A target audit (:func:`dplens.auditing.target_game.audit_target`): user code needs a pair and a claim."""
    from dplens.auditing.target_game import audit_target

    if pair is None:
        raise ValueError("auditing a target needs a pair: (data, neighbour), a dict or a pair file")
    if claim is None:
        raise ValueError("auditing a target needs claim=(epsilon, delta): dplens cannot account for user code")
    if not isinstance(claim, tuple | list) or len(claim) != 2:
        raise ValueError(f"claim must be (epsilon, delta); got {claim!r}")
    if delta is not None and delta != claim[1]:
        raise ValueError(f"delta {delta!r} differs from the claim's delta {claim[1]!r}")
    for name in ("scheduler", "checkpoint"):
        if execution.get(name) is not None:
            raise ValueError(f"{name} is not supported for target audits (use workers)")
    if "score" in options:
        options["scores"] = options.pop("score")
    return audit_target(
        subject,
        pair,
        claim_epsilon=claim[0],
        claim_delta=claim[1],
        trials=trials,
        seed=execution["seed"],
        workers=execution["workers"],
        confidence=execution["confidence"],
        progress=execution["progress"],
        **options,
    )


def _risk_target(max_tpr: float | None, at_fpr: float | None, max_advantage: float | None) -> Any:
    """The attack-risk target the arguments name, or None (a target ε)."""
    if max_tpr is None and at_fpr is None and max_advantage is None:
        return None
    from dplens.accountant.calibrate import RiskTarget

    return RiskTarget(max_tpr=max_tpr, at_fpr=at_fpr, max_advantage=max_advantage)


def _check_target(risk: Any, target_epsilon: float | None, delta: float | None, risk_words: str) -> None:
    """One target: a risk target (``risk_words`` name it in the error), or ``target_epsilon`` with ``delta``."""
    if risk is not None and target_epsilon is not None:
        raise ValueError(f"give either target_epsilon or {risk_words}, not both")
    if risk is None and (target_epsilon is None or delta is None):
        raise ValueError(
            f"calibration needs target_epsilon with delta, or a risk target; got target_epsilon={target_epsilon!r}, "
            f"delta={delta!r}"
        )


def calibrate_spec(
    spec: Any,
    *,
    param: str,
    target_epsilon: float | None = None,
    delta: float | None = None,
    method: Any = None,
    bracket: tuple[float, float] | None = None,
    tolerance: float | None = None,
    max_tpr: float | None = None,
    at_fpr: float | None = None,
    max_advantage: float | None = None,
) -> Any:
    """Calibrate parameter ``param`` of every mechanism of ``spec`` that takes it (``dplens calibrate``).

    The target is an ε at ``delta`` (``target_epsilon``), or an attack risk: ``max_tpr`` at ``at_fpr`` (no attack's
    TPR at that FPR above it) or ``max_advantage`` (TPR − FPR); with a risk target ``delta`` is optional and names the
    δ of the ε reported beside the answer. The default bracket and direction come from :data:`PARAMETER_DEFAULTS`;
    an unknown parameter needs ``bracket``. ``tolerance`` is the PLD engine's relative bracket width (default 1e-3).
    Returns a :class:`~dplens.accountant.calibrate.CalibrationResult` whose ε is ≤ the target, or a
    :class:`~dplens.accountant.calibrate.RiskCalibrationResult` whose risk is ≤ the target.

    With the PLD route the search is bracketed by RDP first, so a default bracket of [0.05, 500] costs a few
    RDP evaluations, not PLD ones (the PLD engine runs only next to the answer).
    """
    risk = _risk_target(max_tpr, at_fpr, max_advantage)
    _check_target(risk, target_epsilon, delta, "a risk target (max_tpr with at_fpr, or max_advantage)")
    from dplens.accountant.calibrate import Direction
    from dplens.accountant.compose import Method
    from dplens.accountant.routes import as_method

    method = (Method.BEST if risk is not None else Method.PLD) if method is None else as_method(method)
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
    return _solve(
        make,
        risk=risk,
        target_epsilon=target_epsilon,
        delta=delta,
        bracket=(lower, upper),
        method=method,
        direction=direction,
        integer=integer,
        param=param,
        tolerance=tolerance,
    )


def _solve(
    make: Callable[[float], Any],
    *,
    risk: Any,
    target_epsilon: float | None,
    delta: float | None,
    bracket: tuple[float, float],
    method: Any,
    direction: Any,
    integer: bool,
    param: str,
    tolerance: float | None,
) -> Any:
    """The calibration of ``make`` over ``bracket``: to the attack-risk target ``risk``, else to ``target_epsilon``
    at ``delta`` (the arguments checked by the caller; ``direction`` None: found from the bracket's ends)."""
    from dplens.accountant.calibrate import calibrate, calibrate_risk

    lower, upper = bracket
    common = {
        "lower": lower,
        "upper": upper,
        "method": method,
        "direction": direction,
        "integer": integer,
        "param": param,
        "tolerance": tolerance,
    }
    if risk is not None:
        return calibrate_risk(make, target=risk, delta=delta, **common)
    from dplens.accountant.compose import Method

    if method is Method.BEST:
        return _best_route_calibration(make, target_epsilon=target_epsilon, delta=delta, common=common)
    return calibrate(make, target_epsilon=target_epsilon, target_delta=delta, **common)


def _best_route_calibration(
    make: Callable[[float], Any], *, target_epsilon: float, delta: float, common: dict[str, Any]
) -> Any:
    """BEST for an ε target: one calibration on each route that supports the ledger (PLD, the exact profile, RDP) and
    the value that spends the least (the smallest noise, or the most steps). Each result's ε is ≤ the target by its
    own route's upper bound, so the chosen one is valid; no single route is the tightest for every event (a
    fixed-bins matrix-factorisation training is amplified on its exact and RDP routes, unamplified on PLD, issue 48).
    Separate searches, not the minimum over routes at every step (which would run every route at every bisection).
    ``details`` names every route's value."""
    from dataclasses import replace

    from dplens.accountant.calibrate import Direction, calibrate
    from dplens.accountant.compose import Method
    from dplens.accountant.rdp import UnsupportedEventError

    results, errors = [], []
    for route in (Method.PLD, Method.EXACT, Method.RDP):
        options = {**common, "method": route}
        try:
            results.append(calibrate(make, target_epsilon=target_epsilon, target_delta=delta, **options))
        except UnsupportedEventError as err:
            errors.append((route, err, False))
        except ValueError as err:
            if "unreachable" not in str(err):
                raise
            errors.append((route, err, True))
    if not results:
        reachable = [err for _, err, unreachable in errors if unreachable]
        raise (reachable or [errors[0][1]])[0]
    direction = common["direction"]
    if direction is None and len(results) > 1:
        first = results[0].method
        low, high = (make(x).epsilon(delta, method=first) for x in (common["lower"], common["upper"]))
        direction = Direction.DECREASING if low >= high else Direction.INCREASING
    pick = min if direction is not Direction.INCREASING else max
    best = pick(results, key=lambda r: r.value)
    routes = "; ".join(f"{r.method.value}: {r.value:.8g}" for r in results)
    skipped = "; ".join(f"{route.value}: {'unreachable' if gone else 'unsupported'}" for route, _, gone in errors)
    note = f"best of the routes ({routes}{'; ' + skipped if skipped else ''})"
    return replace(best, details=f"{best.details}; {note}" if best.details else note)


def _accountant_of(function: Callable[[float], Any], integer: bool) -> Callable[[float], Any]:
    """The calibrated function as a map from the parameter value to an Accountant (an event is composed once)."""
    from dplens.accountant import events as ev
    from dplens.accountant.compose import Accountant

    def make(value: float) -> Accountant:
        built = function(int(value) if integer else value)
        if isinstance(built, ev.Event):
            return Accountant().compose(built)
        if isinstance(built, Accountant):
            return built
        raise ValueError(f"the calibrated function must return an Accountant or an Event; got {built!r}")

    return make


def calibrate(
    subject: Any,
    *,
    target_epsilon: float | None = None,
    delta: float | None = None,
    param: str | None = None,
    lower: float | None = None,
    upper: float | None = None,
    method: Any = None,
    integer: bool = False,
    tolerance: float | None = None,
    max_tpr: float | None = None,
    at_fpr: float | None = None,
    max_advantage: float | None = None,
) -> Any:
    """The parameter value that meets (``target_epsilon``, ``delta``), or an attack-risk target, as tightly as
    possible, never overshooting.

    Risk targets (Kulynych et al., NeurIPS 2024): ``max_tpr`` at ``at_fpr`` — no membership attack reaches a TPR
    above ``max_tpr`` at FPR ``at_fpr`` — or ``max_advantage`` — no attack's TPR − FPR exceeds it (which leaves the
    TPR at low FPR open: the result's ``warnings`` say how high). ``delta`` then names the δ of the ε reported beside
    the answer (optional). The result is a :class:`~dplens.accountant.calibrate.RiskCalibrationResult`.

    Args:
        subject: a spec (a path, or a parsed :class:`~dplens.spec.Spec`: ``param`` names the parameter), or a
            function of the parameter value returning an :class:`~dplens.accountant.compose.Accountant` or an event
            (then ``lower`` and ``upper`` bracket the search).
        target_epsilon: the ε not to exceed.
        delta: δ of the guarantee.
        param: the spec parameter to calibrate (with a spec), or the name recorded in the result.
        lower, upper: the search bracket (optional with a spec parameter that has a default).
        method: the accounting route (a :class:`~dplens.accountant.compose.Method` or its value; default PLD). BEST
            calibrates on each route that supports the ledger and keeps the value that spends the least.
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
        >>> risk = dplens.calibrate(dp_sgd, max_tpr=0.05, at_fpr=0.01, delta=1e-5, lower=0.5, upper=5.0)
        >>> risk.achieved <= 0.05, round(risk.value, 3)
        (True, 0.778)
    """
    risk = _risk_target(max_tpr, at_fpr, max_advantage)
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
            max_tpr=max_tpr,
            at_fpr=at_fpr,
            max_advantage=max_advantage,
        )
    if not callable(subject):
        raise ValueError(f"subject must be a spec, a spec path or a function of the parameter; got {subject!r}")
    if lower is None or upper is None:
        raise ValueError(f"calibrating a function needs lower and upper; got lower={lower!r}, upper={upper!r}")
    from dplens.accountant.compose import Method
    from dplens.accountant.routes import as_method

    method = (Method.BEST if risk is not None else Method.PLD) if method is None else as_method(method)
    make = _accountant_of(subject, integer)
    _check_target(risk, target_epsilon, delta, "a risk target")
    return _solve(
        make,
        risk=risk,
        target_epsilon=target_epsilon,
        delta=delta,
        bracket=(lower, upper),
        method=method,
        direction=None,
        integer=integer,
        param=param or "param",
        tolerance=tolerance,
    )


def audit(
    subject: Any,
    pair: Any = None,
    *,
    trials: int | None = None,
    claim: tuple[float, float] | None = None,
    delta: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    workers: int = 1,
    scheduler: Any = None,
    checkpoint: str | Path | None = None,
    progress: bool = False,
    game: str | None = None,
    **options: Any,
) -> Any:
    """Run an audit from Python and return its result (a valid lower bound on ε, a verdict against the claim).

    A spec is audited exactly as ``dplens audit SPEC`` audits it
    (:func:`dplens.auditing.spec_games.audit_spec_game`): the game is ``game``, else the spec's ``[audit]`` game, else
    the distinguishing game; a ``dp_sgd_training`` spec runs its canary game; ``trials`` may be left out where the
    game needs none (one run: the table's ``canaries``). The same spec, trials and seed give the same bits from the
    command line and from Python.

    Args:
        subject: what to audit: a spec (a path or a parsed :class:`~dplens.spec.Spec`; the claim is its
            ``[claim]``, else the accountant's ε), a mechanism object (``sample`` and ``worst_case_pair``; the
            claim is ``claim``, else the accountant's ε of ``mechanism.event``), or a *target*: the user's code —
            a callable ``f(data, rng)``, a batched callable, an object with ``release(data, rng)`` or
            ``randomise(value)``, an OpenDP measurement, or ``"module:name"``
            (:func:`dplens.auditing.target_game.audit_target`; ``claim`` is required, the result is a
            :class:`~dplens.auditing.target_game.TargetAuditResult`).
        pair: the neighbouring pair (D, D′) for a mechanism (default: its documented worst case); for a target,
            (data, neighbour), a dict like a pair file, or a pair file path.
        trials: trials per side (required but for a spec's one-run game).
        claim: (ε, δ) under test.
        delta: δ of the statement under test when ``claim`` is not given.
        confidence: 1 − α of the bound.
        seed: root seed; the result depends only on it.
        workers, scheduler, checkpoint, progress: execution (a process pool, a Dask scheduler, a resumable
            checkpoint, a progress bar).
        game: a spec's audit game, ``"distinguish"``, ``"one-run"`` or ``"attribute"`` (``--game``; default the
            spec's ``[audit]`` game, else ``"distinguish"``).
        options: passed to the game (e.g. ``score``, ``strategy``; for a target ``score`` — a score option, a
            tuple of them, or ``"module:name"`` — and ``pilot_trials``).

    Returns:
        An :class:`~dplens.auditing.games.AuditResult`.

    Example:
        >>> import dplens
        >>> from dplens.mechanisms.additive import LaplaceMechanism
        >>> result = dplens.audit(LaplaceMechanism(scale=1.0), trials=20_000, claim=(1.0, 0.0), seed=1)
        >>> result.verdict.value, result.epsilon_lower_bound <= 1.0
        ('CONSISTENT', True)
        >>> import numpy as np
        >>> def textbook_laplace(data, rng):  # user code: the float Laplace mechanism (Mironov 2012)
        ...     return float(np.sum(data)) + rng.laplace(0.0, 1.0)
        >>> result = dplens.audit(textbook_laplace, ([1, 1, 1], [1, 1]), claim=(1.0, 0.0), trials=5000, seed=1)
        >>> result.verdict.value, result.reproducible
        ('VIOLATION', True)
    """
    from dplens._inputs import SubjectKind, audit_subject

    execution = {
        "confidence": confidence,
        "seed": seed,
        "workers": workers,
        "scheduler": scheduler,
        "checkpoint": checkpoint,
        "progress": progress,
    }
    described = audit_subject(subject)
    if described.kind is SubjectKind.SPEC:
        return _audit_spec(
            described.value, pair, claim=claim, game=game, trials=trials, delta=delta, **execution, **options
        )
    if game is not None:
        raise ValueError(f"game applies to a spec audit; got game={game!r} for {subject!r}")
    if trials is None:
        raise ValueError(f"trials is required to audit {subject!r} (trials per side)")
    if described.kind is SubjectKind.MECHANISM:
        return _audit_mechanism(subject, pair, trials=trials, claim=claim, delta=delta, execution=execution, **options)
    return _audit_target(subject, pair, trials=trials, claim=claim, delta=delta, execution=execution, **options)


def _audit_spec(spec: Any, pair: Any, *, claim: Any, game: Any, trials: Any, delta: Any, **rest: Any) -> Any:
    """A spec's audit: its game (:func:`dplens.auditing.spec_games.audit_spec_game`), ``claim`` replacing its
    ``[claim]``; the same function ``dplens audit SPEC`` calls."""
    execution_names = ("confidence", "seed", "workers", "scheduler", "checkpoint", "progress")
    if pair is not None or any(name not in execution_names for name in rest):
        raise ValueError("a spec audit takes no pair or game options: the spec's mechanism fixes them")
    if claim is not None:
        from dataclasses import replace

        from dplens.spec import Claim

        spec = replace(spec, claim=Claim(epsilon=float(claim[0]), delta=float(claim[1])))
    from dplens.auditing.spec_games import audit_spec_game

    return audit_spec_game(spec, game=game, trials=trials, delta=delta, **rest)


def _audit_mechanism(
    mechanism: Any, pair: Any, *, trials: int, claim: Any, delta: Any, execution: dict[str, Any], **options: Any
) -> Any:
    """The distinguishing game on a mechanism object; the claim is ``claim``, else the accountant's ε of its event."""
    from dplens.auditing.games import audit as run_game

    if claim is not None:
        claimed, claim_delta, source = float(claim[0]), float(claim[1]), "given"
    else:
        from dplens.accountant.compose import Accountant

        claim_delta = 1e-5 if delta is None else delta
        claimed = Accountant().compose(mechanism.event).epsilon(claim_delta) if claim_delta > 0 else math.inf
        source = "accountant"
    return run_game(
        mechanism,
        trials=trials,
        delta=claim_delta,
        claimed_epsilon=claimed,
        pair=pair,
        claim_source=source,
        **execution,
        **options,
    )


def attack_risk(
    subject: Any,
    *,
    fprs: Sequence[float] | float | None = None,
    prior: float | None = None,
    method: Any = None,
    tolerance: float | None = None,
    curve: bool = False,
) -> Any:
    """Upper bounds on the attack risk of a spec, an :class:`~dplens.accountant.compose.Accountant` or an event
    (``dplens risk``): the largest TPR of any membership attack at each FPR, the largest advantage TPR − FPR, and with
    ``prior`` the largest success of a Bayesian attacker — each read off the pessimistic side of the trade-off curve,
    with the certified bracket and the route (:func:`dplens.accountant.risk.attack_risk`).

    Example (MNIST DP-SGD, σ = 1.1: no attack reaches a TPR above 4.03 % at FPR 1 %):
        >>> import dplens
        >>> step = dplens.PoissonSampled(sampling_rate=256 / 60000, event=dplens.Gaussian(noise_multiplier=1.1))
        >>> risk = dplens.attack_risk(dplens.SelfComposed(event=step, count=14063), fprs=(0.01, 0.1))
        >>> [round(t, 4) for t in risk.tpr_upper], round(risk.advantage_upper, 4), risk.method.value
        ([0.0402, 0.2396], 0.2245, 'pld')
    """
    from dplens.accountant import events as ev
    from dplens.accountant.compose import Accountant, Method
    from dplens.accountant.risk import DEFAULT_FPRS, DEFAULT_RISK_TOLERANCE
    from dplens.accountant.risk import attack_risk as compute
    from dplens.accountant.routes import as_method

    spec = _as_spec(subject)
    if spec is not None:
        accountant = spec.accountant()
    elif isinstance(subject, Accountant):
        accountant = subject
    elif isinstance(subject, ev.Event):
        accountant = Accountant().compose(subject)
    else:
        raise ValueError(f"subject must be a spec, a spec path, an Accountant or an Event; got {subject!r}")
    return compute(
        accountant,
        fprs=DEFAULT_FPRS if fprs is None else fprs,
        prior=prior,
        method=Method.BEST if method is None else as_method(method),
        tolerance=DEFAULT_RISK_TOLERANCE if tolerance is None else tolerance,
        curve=curve,
    )


class AuditMode(enum.Enum):
    """Whether :func:`generate_report` audits the spec.

    Example:
        >>> AuditMode("off") is AuditMode.OFF
        True
    """

    AUTO = "auto"  # audit when the audit layer can; otherwise say plainly why the report is not audited
    REQUIRED = "required"  # audit or fail (ValueError)
    OFF = "off"  # accounting only


def default_delta(spec: Any) -> float:
    """The report's δ when none is given: the claim's δ (0 for a pure-DP claim), else ``DEFAULT_DELTA``."""
    from dplens.reports.defaults import DEFAULT_DELTA

    return spec.claim.delta if spec.claim is not None else DEFAULT_DELTA


def generate_report(
    spec: Any,
    out_dir: str | Path,
    *,
    title: str | None = None,
    delta: float | None = None,
    audit_mode: AuditMode = AuditMode.AUTO,
    trials: int | None = None,
    confidence: float | None = None,
    seed: int = 0,
    workers: int = 1,
    privacy_unit: str | None = None,
    calibration: Mapping[str, Any] | None = None,
    claim_source: str | None = None,
    progress: Callable[[str], None] | None = None,
    command: Sequence[str] = (),
    ledger: str | Path | None = None,
    deployment: Mapping[str, Any] | None = None,
    implementation_evidence: Any = None,
) -> Any:
    """Account ``spec`` by every route, audit it (per ``audit_mode``), and write the report files into ``out_dir``.

    The flow is one way: the accountant's summary (:meth:`~dplens.accountant.compose.Accountant.summary`) and the
    audit's result go to :func:`dplens.reports.build.build_report`, which renders them.

    Args:
        spec: a spec path or a parsed :class:`~dplens.spec.Spec`.
        out_dir: the output directory (``report.json``, ``report.html``, ``privacy-statement.txt``, figures).
        title: the report's title (default: the spec file's stem).
        delta: δ of the statements (default: the claim's δ, else 1e-5).
        audit_mode: :class:`AuditMode` (default AUTO: audit when the audit layer can).
        trials, confidence, seed, workers: the audit's settings.
        privacy_unit: the unit of protection, in words (default: the ``[deployment]`` table's ``privacy_unit``,
            else one record).
        calibration: a ``CalibrationResult.to_dict()`` when a parameter was calibrated.
        claim_source: overrides the claim's source text.
        progress: a callback receiving one-line progress messages.
        command: the command line, recorded in the provenance.
        ledger: a budget ledger (file or ``postgresql://`` URL): the report adds its cumulative section (spent and
            remaining per budget and period, and a figure of spend over time).
        deployment: ``[deployment]`` keys over the spec's table (e.g. ``--deployment FILE``). With a table, the
            report is also written as a DP Deployments Registry record, ``registry-entry.yaml``
            (:mod:`dplens.registry.export`); a table without a tier-1 key is refused before any work.
        implementation_evidence: the ``dplens check-dp-sgd`` result of the DP-SGD step that ran (a
            ``DpSgdCheckResult``, its ``to_dict()``, or the path of the JSON ``dplens check-dp-sgd --json`` printed):
            the report adds its "implementation evidence" section (the checks, their verdicts, measured against
            declared values, the audit's bound and the model-based bound beside the claim) and the NIST section marks
            what it shows. It must declare the spec's DP-SGD training (noise multiplier, N, B, steps, sampler) at the
            claim's δ; a VIOLATION in it makes the report's verdict a VIOLATION. Checked before any work.

    Returns:
        :class:`dplens.reports.render.ReportFiles` (paths and the :class:`~dplens.reports.model.Report`; with a
        ``[deployment]`` table also ``registry_entry``, the record's path, and ``registry``, the record).

    Raises:
        ValueError: bad parameters; with ``AuditMode.REQUIRED`` also when the audit cannot run.

    Example:
        >>> import dplens, tempfile
        >>> spec = dplens.parse_spec({"mechanism": [{"type": "laplace", "epsilon": 1.0}], "claim": {"epsilon": 1.0}})
        >>> files = dplens.generate_report(spec, tempfile.mkdtemp(), title="Laplace", trials=20_000)
        >>> files.report.verdict.status.value, files.html.name, files.json.name
        ('CONSISTENT', 'report.html', 'report.json')
    """
    from dplens.reports.defaults import DEFAULT_CONFIDENCE, DEFAULT_PRIVACY_UNIT, DEFAULT_TRIALS

    loaded = _as_spec(spec)
    if loaded is None:
        raise ValueError(f"spec must be a spec path or a Spec; got {spec!r}")
    spec = loaded
    trials = DEFAULT_TRIALS if trials is None else trials
    confidence = DEFAULT_CONFIDENCE if confidence is None else confidence
    title = title or (Path(spec.source).stem if spec.source else "dplens report")
    _check_report_options(audit_mode, trials, confidence)
    delta = default_delta(spec) if delta is None else delta
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1); got {delta!r}")
    table = _deployment(spec, deployment)  # refused before any work when a record could not be written
    if privacy_unit is None:  # the unit the author declared for the registry, else dplens's default (a record)
        privacy_unit = (
            DEFAULT_PRIVACY_UNIT if table is None or table.privacy_unit is None else _unit(table.privacy_unit)
        )
    if not isinstance(privacy_unit, str) or not privacy_unit.strip():
        raise ValueError(f"privacy_unit must be a non-empty string; got {privacy_unit!r}")
    say = progress or (lambda _message: None)
    budget_ledger = None
    if ledger is not None:
        from dplens.ledger.report import ledger_section

        say("reading the budget ledger ...")
        budget_ledger = ledger_section(ledger)  # read first: a bad ledger fails before any audit runs
    evidence = _implementation_evidence(implementation_evidence, spec)  # read first: bad evidence fails before work
    audit, reason = _main_audit(spec, audit_mode, trials, delta, confidence, seed, workers, progress, say)
    additional = []
    if spec.audit is not None and audit_mode is not AuditMode.OFF:
        additional = _spec_game(spec, delta, trials, confidence, seed, workers, audit_mode, say)
    say("accounting every route and writing the report (figures, JSON, HTML, privacy statement) ...")
    summary = report_summary(spec, delta, calibration=calibration)
    from dplens.reports.build import build_report
    from dplens.reports.render import write_report

    report = build_report(
        spec=spec,
        accounting=summary,
        title=title,
        audit=audit,
        not_audited_reason=reason,
        privacy_unit=privacy_unit,
        claim_source=claim_source,
        seeds={"audit": seed} if audit is not None or additional else {},
        command=command,
        additional_audits=additional,
        budget_ledger=budget_ledger,
        deployment=None if table is None else table.to_dict(),
        **evidence,
    )
    entry = None
    if table is not None:
        from dplens.reports.registry_entry import export_entry

        entry = export_entry(report, deployment=table)  # built and validated before any file is written
    files = write_report(report, Path(out_dir))
    if entry is None:
        return files
    import dataclasses

    from dplens.reports.registry_entry import write_entry

    path = write_entry(entry, Path(out_dir) / "registry-entry.yaml")
    return dataclasses.replace(files, registry_entry=path, registry=entry)


def _implementation_evidence(value: Any, spec: Any) -> dict[str, Any]:
    """``build_report``'s keywords for the check-dp-sgd result ``value`` names (a result, its dict, or a JSON file),
    validated and matched against the spec's DP-SGD training (none for None); ``ValueError`` in one line otherwise."""
    import json

    from dplens.reports.implementation import validate_check_dict

    if value is None:
        return {}
    source = "dplens.check_dp_sgd result"
    if isinstance(value, str | Path):
        source = str(value)
        try:
            text = Path(value).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"implementation evidence file not found: {source!r}") from None
        except (OSError, UnicodeDecodeError) as err:
            raise ValueError(f"implementation evidence file {source!r} cannot be read: {err}") from None
        try:
            value = json.loads(text, parse_constant=lambda name: float("nan"))
        except json.JSONDecodeError as err:
            raise ValueError(f"implementation evidence file {source!r} is not valid JSON: {err}") from None
    elif hasattr(value, "to_dict"):
        value = value.to_dict()
    data = validate_check_dict(value, source=f"implementation evidence {source}")
    _match_training(data["declared"], spec, source)
    return {"implementation_evidence": data, "implementation_source": source}


#: Spec types a check-dp-sgd declaration can describe, and the sampler each one's accounting assumes (None: its own).
_CHECKABLE = {"dp_sgd": None, "dp_sgd_training": "poisson", "poisson_subsampled_gaussian": "poisson"}


def _training_of(table: Mapping[str, Any]) -> dict[str, Any]:
    """What a spec's DP-SGD table declares, in a check's terms (noise multiplier, sampler, steps, rate or N and B)."""
    from dplens.accountant.dp_sgd import as_sampler, dp_sgd_steps

    kind = table["type"]
    if kind == "dp_sgd":
        n, b = table["dataset_size"], table["batch_size"]
        return {
            "noise_multiplier": table["noise_multiplier"],
            "sampler": as_sampler(table.get("sampling", "poisson")).value,
            "dataset_size": n,
            "batch_size": b,
            "steps": dp_sgd_steps(dataset_size=n, batch_size=b, epochs=table["epochs"]),
        }
    return {
        "noise_multiplier": table["noise_multiplier"],
        "sampler": "poisson",
        "sampling_rate": table["sampling_rate"],
        "steps": table.get("steps", table.get("count", 1)),
    }


def _mismatch(declared: Mapping[str, Any], training: Mapping[str, Any]) -> str | None:
    rate = declared["batch_size"] / declared["dataset_size"]
    for key, value in training.items():
        mine = rate if key == "sampling_rate" else declared[key]
        same = (
            math.isclose(mine, value, rel_tol=1e-9) if key in ("sampling_rate", "noise_multiplier") else mine == value
        )
        if not same:
            return f"{key} {mine!r} (the spec's: {value!r})"
    return None


def _match_training(declared: Mapping[str, Any], spec: Any, source: str) -> None:
    """Refuse evidence that declares another training than the spec's: it would not be evidence for this one."""
    tables = [
        t for t in spec.mechanisms if t.get("type") in _CHECKABLE and t.get("privacy_unit", "example") == "example"
    ]
    if not tables:
        raise ValueError(
            f"implementation evidence {source}: the spec has no example-level DP-SGD mechanism "
            f"({', '.join(_CHECKABLE)}) that dplens check-dp-sgd declares"
        )
    problems = [_mismatch(declared, _training_of(t)) for t in tables]
    if all(problems):
        raise ValueError(
            f"implementation evidence {source}: it declares another training than the spec's "
            f"{tables[0]['type']} mechanism: {problems[0]}"
        )


def _check_report_options(audit_mode: Any, trials: Any, confidence: Any) -> None:
    if not isinstance(audit_mode, AuditMode):
        raise ValueError(f"audit_mode must be an AuditMode; got {audit_mode!r}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be an integer >= 1; got {trials!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, float | int) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")


def _main_audit(
    spec: Any,
    audit_mode: AuditMode,
    trials: int,
    delta: float,
    confidence: float,
    seed: int,
    workers: int,
    progress: Callable[[str], None] | None,
    say: Callable[[str], None],
) -> tuple[Any, str | None]:
    """The report's distinguishing-game audit of the spec, or None and the reason it was not audited."""
    from dplens.reports.format import fmt_lower, percent

    audit = None
    reason: str | None = None
    if audit_mode is AuditMode.OFF:
        reason = "the audit was switched off (--no-audit)"
    else:
        from dplens.auditing.games import audit_spec

        say(
            f"auditing: {trials} trials per side at delta = {delta:g}, confidence {percent(confidence)}, "
            f"seed {seed} ..."
        )
        try:
            audit = audit_spec(
                spec,
                trials=trials,
                delta=delta,
                confidence=confidence,
                seed=seed,
                workers=workers,
                progress=progress is not None,
            )
        except ValueError as err:
            if audit_mode is AuditMode.REQUIRED:
                raise
            reason = f"the audit layer cannot audit this spec: {str(err).splitlines()[0]}"
        if audit is not None:
            say(
                f"audit: epsilon >= {fmt_lower(audit.epsilon_lower_bound)} (lower bound, {percent(audit.confidence)}), "
                f"verdict {audit.verdict.value}, {audit.elapsed_seconds:.1f} s"
            )
        else:
            say(f"not audited: {reason}")
    return audit, reason


def _unit(label: str) -> str:
    """A registry unit label as the report's unit in words: "Person-level" → "one person", "User-day-level" →
    "one user-day", "Record-level (one admission)" → "one record (one admission)"; other labels as they are."""
    match = re.match(r"^\s*([A-Za-z][\w -]*?)-level\b(.*)$", label)
    return f"one {match.group(1).lower()}{match.group(2)}" if match else label


def _deployment(spec: Any, override: Mapping[str, Any] | None) -> Any:
    """The spec's ``[deployment]`` table with ``override`` on top, validated and complete for tier 1; None without
    either."""
    from dplens.registry.deployment import (
        merge_deployment_tables,
        parse_deployment,
        require_authors,
        require_tier_one,
    )
    from dplens.registry.fields import VariantName

    if spec.deployment is None and not override:
        return None
    recorded = None if spec.deployment is None else spec.deployment.to_dict()
    table = parse_deployment(merge_deployment_tables(recorded, override))
    require_tier_one(table)
    require_authors(table)
    if table.variant_name is VariantName.ZCDP:
        import json

        from dplens.registry.export import composed_rho

        if composed_rho(json.loads(spec.accountant().to_json())) is None:
            raise ValueError(
                "[deployment] variant_name 'Zero-concentrated DP' needs rho, which dplens derives only for "
                "compositions of Gaussian and zCDP mechanisms; registry-entry.yaml was not written"
            )
    return table


def _spec_game(
    spec: Any,
    delta: float,
    trials: int,
    confidence: float,
    seed: int,
    workers: int,
    audit_mode: AuditMode,
    say: Callable[[str], None],
) -> list[Any]:
    """The spec's ``[audit]`` game (one run, canary trainings, attribute inference) as an additional audit."""
    from dplens.auditing.spec_games import Game, audit_spec_game, resolve_game

    game = resolve_game(spec, None)
    say(f"running the spec's [audit] game ({game.value}) ...")
    try:
        result = audit_spec_game(
            spec,
            game=game,
            trials=None if game is Game.ONE_RUN else trials,  # one run: the table's canaries
            delta=delta,
            confidence=confidence,
            seed=seed,
            workers=workers,
        )
    except ValueError as err:
        if audit_mode is AuditMode.REQUIRED:
            raise
        say(f"the spec's [audit] game did not run: {str(err).splitlines()[0]}")
        return []
    say(f"[audit] game: verdict {result.verdict.value}")
    return [result]


def report_summary(spec: Any, delta: float, *, calibration: Mapping[str, Any] | None = None) -> Any:
    """The accountant's summary of ``spec`` at ``delta``, with what a report of it needs (the claim's δ and region)."""
    claim = None if spec.claim is None else (spec.claim.epsilon, spec.claim.delta)
    return spec.accountant().summary(
        delta,
        claim=claim,
        extra_deltas=() if claim is None else (claim[1],),
        calibration=calibration,
    )


def sweep(
    spec: Any,
    *,
    params: Mapping[str, Sequence[float]],
    delta: float,
    method: Any = "rdp",
    tolerance: float | None = None,
    progress: bool = False,
) -> Any:
    """ε at ``delta`` for every configuration of a grid of a spec's parameters (``dplens sweep``): ``spec`` is a
    parsed :class:`~dplens.spec.Spec` or a spec path, read here; the rest is
    :func:`dplens.accountant.sweep.sweep`'s (which takes only a parsed spec).

    Example:
        >>> import dplens
        >>> result = dplens.sweep("examples/dp_sgd_mnist.toml", params={"noise_multiplier": [1.0, 1.1]}, delta=1e-5)
        >>> len(result.epsilon), result.epsilon[0] > result.epsilon[1]
        (2, True)
    """
    from dplens.accountant.sweep import sweep as compute

    loaded = _as_spec(spec)
    if loaded is None:
        raise ValueError(f"spec must be a Spec or a spec path; got {spec!r}")
    return compute(loaded, params=params, delta=delta, method=method, tolerance=tolerance, progress=progress)


def check_dp_sgd(subject: Any, **options: Any) -> Any:
    """Does the DP-SGD step that ran implement the mechanism that was accounted? (``dplens check-dp-sgd``)

    ``subject`` is a framework-free step ``step(per_sample_gradients, rng) -> update``, ``"module:function"``, or an
    :class:`~dplens.integrations.opacus_audit.OpacusTraining` (its ``make_private`` — σ, C, ``make_private`` keywords,
    ``customise`` — is the step through the gradient-injection module, its loader the sampler, and it declares σ, C,
    N, B (Poisson: Opacus's rate 1/L as B = N/L), the sampler and T: options that contradict it are refused); the
    options are :func:`dplens.auditing.training.check.check_dp_sgd`'s (``noise_multiplier``, ``max_grad_norm``,
    ``batch_size``, ``dataset_size``, ``delta``, exactly one of ``steps`` and ``epochs``, ``sampler``,
    ``sampler_function``, ``normalise``, ``trials``, ``seed``, ``alpha``, ``observe``, ``neighboring``, ``workers``,
    ``assume_finite_gradients``: the user's statement that every per-sample gradient is finite, so ``non_finite_rows``
    runs and is reported but is not counted in the overall verdict; off by default). The result's ``to_dict()`` has
    ``verdict``, ``checks``, ``audit``, ``model_based`` and ``stated_assumptions``.

    Example:
        >>> import dplens
        >>> from dplens.auditing.training.framework_free import reference_step
        >>> result = dplens.check_dp_sgd(reference_step(1.0, 1.0, 50), noise_multiplier=1.0, max_grad_norm=1.0,
        ...                              batch_size=50, dataset_size=5000, steps=10, delta=1e-5, trials=100)
        >>> [c.name for c in result.checks][:3]
        ['noise_std', 'noise_gaussian_independent', 'normalisation']
    """
    import sys

    from dplens.auditing.training.check import check_dp_sgd as run

    opacus = sys.modules.get("dplens.integrations.opacus_audit")  # loaded wherever an OpacusTraining was built
    if opacus is not None and isinstance(subject, opacus.OpacusTraining):
        subject, options = _opacus_subject(subject, options)
    return run(subject, **options)


def _opacus_declaration(training: Any) -> dict[str, Any]:
    """What an ``OpacusTraining`` declares, in ``check_dp_sgd``'s terms: Poisson at Opacus's rate q = 1/L (B = N/L
    must be a whole number), or its shuffled or sequential loader in batches of its batch size."""
    n, batches = training.dataset_size, training.batches
    if training.poisson and n % batches:
        raise ValueError(
            f"check_dp_sgd: an OpacusTraining's Poisson rate 1/{batches} is B/N for no whole batch size B with "
            f"N = {n}; choose batch_size so that round(N / batch_size) divides N"
        )
    return {
        "noise_multiplier": training.noise_multiplier,
        "max_grad_norm": training.max_grad_norm,
        "batch_size": n // batches if training.poisson else training.batch_size,
        "dataset_size": n,
        "sampler": training.sampling,
        "steps": training.steps,
    }


def _opacus_subject(training: Any, options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The step and options of ``check_dp_sgd`` on an ``OpacusTraining``: its own ``make_private`` (σ, C, loader,
    ``make_private`` keywords, ``customise``) through the gradient-injection module, its own loader as the sampler;
    options that contradict it are refused in one line."""
    from dplens.integrations.opacus_step import loader_sampler, opacus_step

    declared = _opacus_declaration(training)
    for name in ("sampler_function", "epochs"):
        if options.get(name) is not None:
            raise ValueError(f"check_dp_sgd: {name} is set by the OpacusTraining; got {name}={options[name]!r}")
    for name, value in declared.items():
        given = options.get(name)
        if given is not None and given != value:
            raise ValueError(
                f"check_dp_sgd: {name}={given!r} contradicts the OpacusTraining's {value!r} ({training.describe()})"
            )
    b = declared["batch_size"]

    def make_private(module: Any, optimizer: Any, loader: Any) -> Any:
        import warnings

        import opacus

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wrapped = opacus.PrivacyEngine(accountant="rdp").make_private(
                module=module,
                optimizer=optimizer,
                data_loader=loader,
                noise_multiplier=training.noise_multiplier,
                max_grad_norm=training.max_grad_norm,
                poisson_sampling=training.poisson,
                **training.make_private,
            )
        if training.customise is not None:  # the user's own code around make_private is part of what is checked
            from dplens.auditing.canaries import _function

            _function(training.customise, "customise")(*wrapped[:3])
        return wrapped

    def make_loader(dataset: Any) -> Any:
        from opacus.data_loader import DPDataLoader
        from torch.utils.data import DataLoader

        if training.poisson:
            return DPDataLoader.from_data_loader(DataLoader(dataset, batch_size=b))
        return DataLoader(dataset, batch_size=b, shuffle=training.sampling == "shuffle")

    make_private.__qualname__ = f"OpacusTraining.make_private({training.describe()})"
    make_loader.__qualname__ = f"OpacusTraining.loader({training.sampling}, batch {b})"
    step = opacus_step(make_private, dataset_size=declared["dataset_size"], batch_size=b)
    return step, {**options, **declared, "sampler_function": loader_sampler(make_loader)}
