"""DP assertions: a test fails when dplens's audit shows the target violates its claim (see :func:`assert_dp`)."""

from __future__ import annotations

import enum
import json
import math
import time
import warnings
from typing import Any

from dplens.testing import _run
from dplens.testing.significance import derive_seed

__all__ = ["DpAssertionError", "DpInconclusiveWarning", "Inconclusive", "PairSearch", "assert_dp", "choose_trials"]

#: Trials per side are never below this (a smaller audit cannot show anything) nor above MAX_TRIALS.
MIN_TRIALS = 500
MAX_TRIALS = 2_000_000
# The budget goes to the audit's target calls: the pilot (up to as many draws as the counted trials, for discrete
# outputs) and the counted trials, on both sides, plus the scores' own work: about 5 calls' worth per counted trial,
# and half the budget is kept for everything else (the probe, the float checks, fitting the scores).
_CALLS_PER_TRIAL = 5.0
_BUDGET_FOR_CALLS = 0.5
_SEARCH_CALLS = 3.0  # a pair search adds about this many calls per counted trial
_TIMING_SECONDS = 0.05
_SMALL_AUDIT = 4_000  # the audit's default minimum pilot per side
_CALIBRATE_ABOVE = 20_000  # call-based estimates above this (fast targets) are checked by a small timed audit
_CALIBRATION_TRIALS = 5_000
# Seconds of the audit's own work per counted trial (scoring, binning, float checks), by output kind.
_SCORING_SECONDS = {"integer": 0.6e-6, "real": 12e-6, "vector": 6e-6, "other": 6e-6}


class PairSearch(enum.Enum):
    """Search for the neighbour D′ of the data D under a relation (:mod:`dplens.auditing.pairs`) instead of stating
    it: ADD_REMOVE, REPLACE_ONE, or QUERY_VECTOR (D is a vector of query answers of sensitivity 1)."""

    ADD_REMOVE = "add_remove"
    REPLACE_ONE = "replace_one"
    QUERY_VECTOR = "query_vector"


class Inconclusive(enum.Enum):
    """What an INCONCLUSIVE audit (the budget could not have shown a violation of this claim) does to the test."""

    WARN = "warn"
    FAIL = "fail"
    PASS = "pass"


class DpAssertionError(AssertionError):
    """A DP assertion failed: the audit shows the target's ε exceeds its claim (``result`` holds the audit)."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class DpInconclusiveWarning(UserWarning):
    """The audit's budget could not have shown a violation of the claim: the assertion checked nothing."""


def _check_number(name: str, value: Any, *, low: float, high: float = math.inf, low_open: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low) and value <= high
    if not ok:
        bound = f"> {low}" if low_open else f">= {low}"
        raise ValueError(
            f"{name} must be a finite number {bound}"
            + (f" and <= {high}" if high < math.inf else "")
            + f"; got {value!r}"
        )
    return float(value)


def _round_down(trials: float) -> int:
    """The largest 1-2-5 number ≤ trials (so small changes in measured speed do not change the audit)."""
    if trials < 1:
        return 1
    power = 10 ** math.floor(math.log10(trials))
    for step in (5, 2, 1):
        if step * power <= trials:
            return step * power
    return power


def choose_trials(target: Any, data: Any, seconds: float, *, search: bool = False, seed: int = 0) -> int:
    """Trials per side that fit an audit of ``target`` in ``seconds``, from the target's measured speed on ``data``.

    The target is timed on batches of 64, 256, … outputs until one takes ≥ 50 ms; the audit costs about five target
    calls per counted trial (pilot and counted draws on both sides) plus its own work on each output (more for real
    numbers, which get the float checks, and for vectors), and half the budget is left for the rest. The answer is
    rounded down to 1, 2 or 5 × 10ᵏ and clamped to [500, 2 000 000]. :func:`assert_dp` then checks an estimate
    above 20 000 (a fast target, whose audit costs mostly the audit's own work) against a small timed audit.

    Example:
        >>> import numpy as np
        >>> from dplens.auditing.targets import batched
        >>> @batched
        ... def geometric(data, rng, size):
        ...     p = 1 - np.exp(-1.0)
        ...     return int(np.sum(data)) + rng.geometric(p, size) - rng.geometric(p, size)
        >>> choose_trials(geometric, [1, 1, 0], 2.0) >= 100_000  # millions of draws per second
        True
    """
    import numpy as np

    from dplens.auditing.targets import as_target

    runnable = as_target(target)
    rng = np.random.default_rng(seed)
    n, elapsed = 64, 0.0
    while True:
        start = time.perf_counter()
        runnable.draw(data, n, rng, where="timing")
        elapsed = time.perf_counter() - start
        if elapsed >= _TIMING_SECONDS or n >= 1 << 20:
            break
        n *= 4
    per_call = max(elapsed, 1e-9) / n
    calls = _CALLS_PER_TRIAL + (_SEARCH_CALLS if search else 0.0)
    per_trial = calls * per_call + _scoring_seconds(runnable.draw(data, 64, rng, where="timing"))
    trials = seconds * _BUDGET_FOR_CALLS / per_trial
    return int(min(max(_round_down(trials), MIN_TRIALS), MAX_TRIALS))


def _scoring_seconds(outputs: Any) -> float:
    """The audit's own work per counted trial (both sides, pilot included), by the kind of output: measured on this
    project's benchmark machine for integer scalars (table scores), real scalars (histogram, logistic and the float
    reachability check) and vectors (joint tables, logistic regression and boosted trees on features)."""
    import numpy as np

    try:
        array = np.asarray(outputs)
    except (TypeError, ValueError):
        return _SCORING_SECONDS["other"]
    if array.dtype.kind not in "iufb":
        return _SCORING_SECONDS["other"]
    if array.ndim <= 1 or (array.ndim == 2 and array.shape[1] == 1):
        return _SCORING_SECONDS["integer" if array.dtype.kind in "iub" else "real"]
    return _SCORING_SECONDS["vector"] * max(1.0, array[0].size / 3)


def _short(value: Any, limit: int = 120) -> str:
    try:
        text = json.dumps(value, default=lambda v: v.tolist() if hasattr(v, "tolist") else repr(v))
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _float_scores(result: Any) -> tuple[float | None, float | None]:
    """(best bound of the float reachability scores, best bound of the others) — None where a kind did not run."""
    floats = [s["epsilon_lower_bound"] for s in result.scores if str(s["name"]).startswith("float reachability")]
    others = [s["epsilon_lower_bound"] for s in result.scores if not str(s["name"]).startswith("float reachability")]
    return (max(floats) if floats else None), (max(others) if others else None)


def _noise_sentence(result: Any, claim: float) -> str | None:
    """What the probe saw: how far the pair moves the query and the noise scale, and the ε that alone implies."""
    probe = result.probe or {}
    if not probe.get("available") or probe.get("query_data") is None or probe.get("query_neighbour") is None:
        return None
    samplers = probe.get("samplers") or []
    try:
        shift = float(abs(float(probe["query_data"]) - float(probe["query_neighbour"])))
    except (TypeError, ValueError):
        return None  # vector queries: the scores speak for them
    if len(samplers) != 1 or "laplace" not in str(samplers[0].get("sampler")):
        return None
    scale = float(samplers[0]["scale"])
    implied = shift / scale
    covered = scale * claim
    if implied <= claim * (1 + 1e-9):
        return (
            f"the probe saw the query move by {shift:g} between D and D' with Laplace noise of scale {scale:g}: "
            f"that noise covers it (|Δ|/b = {implied:.4g} ≤ the claimed {claim:g})"
        )
    return (
        f"the probe saw the query move by {shift:g} between D and D' with Laplace noise of scale {scale:g}, which "
        f"covers a change of only b·ε = {covered:g}: the pair alone makes the release {implied:.4g}-DP "
        f"(a record outside the range the noise assumes — a forgotten clip — or a sensitivity slip)"
    )


def _cause(result: Any, claim: float) -> str:
    """Why the audit exceeds the claim: the float representation, or the output distribution (the design)."""
    float_bound, other_bound = _float_scores(result)
    noise = _noise_sentence(result, claim)
    if float_bound is not None and float_bound > claim and (other_bound is None or other_bound <= claim):
        evidence = next((e["sentence"] for e in result.float_evidence), "")
        design = (
            f"the scores that look only at output values give ε ≥ {other_bound:.4g}, within the claim"
            if other_bound is not None
            else "no value score ran"
        )
        return (
            f"a FLOATING-POINT LEAK, not the mechanism's design: {evidence} ({design}; Mironov 2012: noise added in "
            "doubles makes some outputs impossible from one input). Fix the implementation: a secure sampler "
            "(discrete noise, snapping), not the noise scale." + (f" ({noise})" if noise else "")
        )
    factor = (other_bound if other_bound is not None else result.epsilon_lower_bound) / claim if claim > 0 else math.inf
    text = (
        f"the OUTPUT DISTRIBUTION itself (the mechanism's design or its parameters): the scores that look only at "
        f"output values show ε ≥ {other_bound if other_bound is not None else result.epsilon_lower_bound:.4g}, "
        f"{factor:.3g}× the claim — the noise is too small for how much this pair moves the output (a sensitivity "
        "slip, an unclipped record) or the claim is lower than the noise supports"
    )
    if noise:
        text += f"; {noise}"
    if float_bound is not None and float_bound > claim:
        text += "; the floats leak as well (float reachability also exceeds the claim)"
    return text


def _reproduce(
    result: Any,
    target: Any,
    pair_argument: Any,
    *,
    trials: int,
    seed: int,
    confidence: float,
    node_id: str,
    run_seed: int,
    float_check: bool,
) -> str:
    from dplens.auditing.targets import as_target

    path = as_target(target).path
    name = path or getattr(target, "__qualname__", type(target).__name__)
    call = (
        f"dplens.audit({name}, {_short(pair_argument, 200)}, claim=({result.epsilon_claimed!r}, {result.delta!r}), "
        f"trials={trials}, confidence={confidence!r}, seed={seed}"
        + ("" if float_check else ", float_checks=False")
        + ")"
    )
    lines = [f"    python: {call}"]
    if node_id:
        lines.append(
            f"    pytest: pytest '{node_id}' --dplens-seed {run_seed} --dplens-trials {trials}  "
            "(alone, this test gets a larger share of α: it can only fail more easily)"
        )
    if path and isinstance(pair_argument, dict | list | tuple):
        pair_file = (
            pair_argument
            if isinstance(pair_argument, dict)
            else {"data": pair_argument[0], "neighbour": pair_argument[1]}
        )
        lines.append(
            f"    cli:    dplens audit --target {path} --pair PAIR.json --claim-epsilon {result.epsilon_claimed!r} "
            f"--claim-delta {result.delta!r} --trials {trials} --seed {seed} --confidence {confidence!r}  "
            f"(PAIR.json: {_short(pair_file, 160)})"
        )
    return "\n".join(lines)


def _message(
    result: Any,
    *,
    target: Any,
    pair_argument: Any,
    trials: int,
    seed: int,
    share: float,
    allocation: str,
    node_id: str,
    run_seed: int,
    float_check: bool,
) -> str:
    claim = result.epsilon_claimed
    bound = result.epsilon_lower_bound
    where = f" in {node_id}" if node_id else ""
    operating = next((s.get("operating_point") for s in result.scores if s["name"] == result.best_score), None)
    counts = ""
    if operating:
        counts = (
            f"; counts at the threshold: {operating.get('false_positives')} of {operating.get('negatives')} on D' and "
            f"{operating.get('positives', 0) - operating.get('false_negatives', 0)} of {operating.get('positives')} "
            "on D fall in the attack set"
        )
    side = f"N_D, N_D' = {result.side_trials[0]}, {result.side_trials[1]}" if any(result.side_trials) else ""
    return "\n".join(
        [
            f"DP assertion failed{where}: {result.target.get('name')} is not ({claim:g}, {result.delta:g})-DP on the "
            f"pair {result.pair.get('description', '')} {result.pair.get('data', '')} vs "
            f"{result.pair.get('neighbour', '')}.",
            f"  evidence: ε ≥ {bound:.4g}, a valid lower bound at confidence 1 − {share:.3g} (this assertion's share "
            f"of the run's α, {allocation}); claimed ε = {claim:g}, δ = {result.delta:g}",
            f"  best score: {result.best_score} ({result.bound_direction}){counts}",
            f"  cause: {_cause(result, claim)}",
            f"  audit: {result.trials} trials per side ({side}), pilot {result.pilot_trials}, seed {seed}, "
            f"{result.elapsed_seconds:.2f} s; reproducible from its seed: {result.reproducible}",
            "  reproduce:",
            _reproduce(
                result,
                target,
                pair_argument,
                trials=trials,
                seed=seed,
                confidence=1 - share,
                node_id=node_id,
                run_seed=run_seed,
                float_check=float_check,
            ),
        ]
    )


def _pair_and_data(pair: Any, relation: PairSearch | None) -> tuple[Any, Any]:
    """The pair as the audit takes it, and the data set D the trial budget is measured on."""
    if relation is not None:
        return {"data": pair, "relation": relation.value}, pair
    if isinstance(pair, tuple | list) and len(pair) == 2:
        return pair, pair[0]
    if isinstance(pair, dict) and "data" in pair:
        return pair, pair["data"]
    raise ValueError(f"pair must be (data, neighbour) or a dict with 'data'; got {_short(pair)}")


def _budgeted_trials(
    target: Any,
    pair_argument: Any,
    data: Any,
    relation: PairSearch | None,
    start: float,
    seconds: float,
    epsilon: float,
    delta: float,
    seed: int,
    float_check: bool,
) -> int:
    """The trials per side that fit the call's time budget: from the target's measured speed
    (:func:`choose_trials`), calibrated on the target where it is fast.

    A fast target's audit costs mostly the audit's own work on the outputs, which the target's timing does not see:
    where the estimate is at least 20 000 (and no pair is searched), a small audit of the same target and pair
    (5 000 trials per side, its pilot as large) is timed on this machine under its present load (its result is
    discarded: only its duration is used, so the real audit's validity is untouched). It gives a cost per trial that
    includes its fixed overheads (so it errs towards fewer trials); 70 % of what is left of the budget buys the
    trials, never more than the speed-based estimate allows.
    """
    # What this call has spent already (imports on a first call) comes out of its budget.
    left = max(seconds - (time.perf_counter() - start), 0.25 * seconds)
    chosen = choose_trials(target, data, left, search=relation is not None, seed=seed)
    if relation is not None or chosen < _CALIBRATE_ABOVE:
        return chosen
    import dplens

    tick = time.perf_counter()
    dplens.audit(
        target,
        pair_argument,
        trials=_CALIBRATION_TRIALS,
        claim=(epsilon, delta),
        confidence=0.5,
        seed=seed ^ 0x5EED,
        float_checks=float_check,
        pilot_trials=_CALIBRATION_TRIALS,
    )
    per_trial = (time.perf_counter() - tick) / _CALIBRATION_TRIALS
    left = seconds - (time.perf_counter() - start)
    trials = _round_down(max(left, 0.0) * 0.7 / per_trial)
    return int(min(max(trials, MIN_TRIALS), chosen, MAX_TRIALS))


def _checked_nothing(
    result: Any, policy: Inconclusive, *, node_id: str | None, trials: int, share: float, epsilon: float
) -> None:
    """An INCONCLUSIVE audit under ``on_inconclusive`` FAIL (raises) or WARN (warns, attributed to the test)."""
    text = (
        f"DP assertion{' in ' + node_id if node_id else ''} checked nothing: with {trials} trials per side and "
        f"α = {share:.3g} no audit could certify more than ε = {result.ceiling:.4g}, which does not exceed the "
        f"claimed {epsilon:g}; give it a larger budget (--dplens-budget, --dplens-mode thorough) or trials"
    )
    if policy is Inconclusive.FAIL:
        raise DpAssertionError(text, result)
    warnings.warn(text, DpInconclusiveWarning, stacklevel=3)


def _record(
    result: Any,
    node_id: str | None,
    share: float,
    allocation: Any,
    trials: int,
    seed: int,
    epsilon: float,
    seconds: float,
    budget: float | None,
) -> dict[str, Any]:
    """One assertion's line in the run's summary (the plugin's terminal report and JSON)."""
    return {
        "node_id": node_id,
        "alpha": share,
        "allocation": allocation,
        "trials": trials,
        "seed": seed,
        "verdict": result.verdict.value,
        "epsilon_lower_bound": result.epsilon_lower_bound,
        "epsilon_claimed": epsilon,
        "seconds": seconds,
        "budget": budget,
    }


def assert_dp(
    target: Any,
    pair: Any,
    epsilon: float,
    delta: float = 0.0,
    *,
    search: PairSearch | str | None = None,
    float_check: bool = True,
    budget: float | None = None,
    trials: int | None = None,
    on_inconclusive: Inconclusive | str = Inconclusive.WARN,
) -> Any:
    """Assert that ``target`` is (``epsilon``, ``delta``)-DP on ``pair``: fail with the evidence if dplens's audit
    shows otherwise.

    The audit (:func:`dplens.audit` on the target, :mod:`dplens.auditing.target_game`) bounds the target's ε on
    the pair from below at confidence 1 − αᵢ, αᵢ this assertion's share of the run's α (``--dplens-alpha``, default
    0.01; :mod:`dplens.testing.significance` states how the shares are chosen so that a run of correct mechanisms
    fails with probability ≤ α, whatever the number and order of assertions). The test fails when the bound exceeds
    ``epsilon``: a :class:`DpAssertionError` (an ``AssertionError``) naming the bound, the claim, the best score and
    its counts, the cause — a floating-point leak or the output distribution itself — and the commands that
    reproduce the audit. Otherwise it passes and returns the :class:`~dplens.auditing.target_game.TargetAuditResult`.

    Args:
        target: what :func:`dplens.audit` audits: ``f(data, rng)``, a :func:`~dplens.auditing.targets.batched`
            ``f(data, rng, size)``, an object with ``release`` or ``randomise`` (diffprivlib), an OpenDP
            measurement, or ``"module:name"``.
        pair: (D, D′), or a dict like a pair file; with ``search``, the data D alone.
        epsilon, delta: the claim.
        search: search the neighbour of D under this relation (:class:`PairSearch`) instead of stating it.
        float_check: include the floating-point reachability scores (default); False audits the values only.
        budget: seconds for this assertion (default: the run's, ``--dplens-budget`` or the mode's: 2 s quick,
            30 s thorough); the trials are chosen from the target's measured speed (:func:`choose_trials`).
        trials: trials per side, fixed (no timing: exactly reproducible; ``--dplens-trials`` sets it run-wide).
        on_inconclusive: when the budget could not have shown a violation: warn (default), fail or pass.

    Seeds: the audit's seed is derived from the run seed (``--dplens-seed``, default 0, printed after collection)
    and the test's node id (and the assertion's index in the test), so a run is deterministic and a failure
    reproduces from the printed commands.

    Example:
        >>> import numpy as np
        >>> from dplens.auditing.targets import batched
        >>> @batched
        ... def geometric_count(data, rng, size):  # exact two-sided geometric noise: ε = 1 for a count
        ...     p = 1 - np.exp(-1.0)
        ...     return int(np.sum(data)) + rng.geometric(p, size) - rng.geometric(p, size)
        >>> result = assert_dp(geometric_count, ([1, 1, 1], [1, 1]), epsilon=1.0, trials=20_000)
        >>> result.verdict.value
        'CONSISTENT'
        >>> try:
        ...     assert_dp(geometric_count, ([1, 1, 1], [1, 1]), epsilon=0.5, trials=20_000)  # claims half its ε
        ... except AssertionError as failure:
        ...     print(str(failure).splitlines()[3].split("(")[0].strip())
        cause: the OUTPUT DISTRIBUTION itself
    """
    start = time.perf_counter()
    import dplens
    import dplens.auditing.target_game
    from dplens.auditing.bounds import check_option
    from dplens.auditing.targets import as_target, load_target

    # A mechanism object with release() is audited as user code (a target), like every other target here.
    target = load_target(target) if isinstance(target, str) else as_target(target)
    epsilon = _check_number("epsilon", epsilon, low=0.0)
    delta = _check_number("delta", delta, low=0.0, high=1.0)
    if not isinstance(float_check, bool):
        raise ValueError(f"float_check must be True or False; got {float_check!r}")
    policy = check_option(on_inconclusive, Inconclusive, "on_inconclusive")
    relation = None if search is None else check_option(search, PairSearch, "search")
    context = _run.current()
    pair_argument, data = _pair_and_data(pair, relation)
    fixed = trials if trials is not None else context.trials
    if fixed is not None and (isinstance(fixed, bool) or not isinstance(fixed, int) or fixed < 1):
        raise ValueError(f"trials must be an integer >= 1; got {fixed!r}")
    seconds = _check_number("budget", budget, low=0.0, low_open=True) if budget is not None else context.seconds()

    node_id = context.node_id
    index = context.index
    context.index += 1
    seed = derive_seed(context.run_seed, node_id or target.name, index)  # outside pytest: the target's name
    share, allocation = context.next_share()
    chosen = fixed
    if fixed is None:
        chosen = _budgeted_trials(
            target, pair_argument, data, relation, start, seconds, epsilon, delta, seed, float_check
        )
    # The audit's pilot is at least 4 000 draws per side; below that many counted trials (a slow target on a small
    # budget) it is as large as the counted run, so the budget holds.
    options = {"pilot_trials": chosen} if chosen < _SMALL_AUDIT else {}
    result = dplens.audit(
        target,
        pair_argument,
        trials=chosen,
        claim=(epsilon, delta),
        confidence=1.0 - share,
        seed=seed,
        float_checks=float_check,
        **options,
    )
    elapsed = time.perf_counter() - start
    budget_used = seconds if fixed is None else None
    context.records.append(_record(result, node_id, share, allocation, chosen, seed, epsilon, elapsed, budget_used))
    verdict = result.verdict.value
    if verdict == "VIOLATION":
        message = _message(
            result,
            target=target,
            pair_argument=pair_argument,
            trials=chosen,
            seed=seed,
            share=share,
            allocation=allocation,
            node_id=node_id,
            run_seed=context.run_seed,
            float_check=float_check,
        )
        raise DpAssertionError(message, result)
    if verdict == "INCONCLUSIVE" and policy is not Inconclusive.PASS:
        _checked_nothing(result, policy, node_id=node_id, trials=chosen, share=share, epsilon=epsilon)
    return result
