"""``check_dp_sgd``: does the DP-SGD step that ran implement the mechanism that was accounted?

It runs, on the subject's own step: the named implementation checks (:mod:`~dplens.auditing.training.checks`), the
assumption-free audit and the model-based bound (:mod:`~dplens.auditing.training.audit`), with α split (Bonferroni)
equally over all of them, so a correct implementation is flagged by any of them with probability ≤ α. Overall:
VIOLATION if any check, the audit or the model-based bound says so; PASS only if all pass; else INCONCLUSIVE.

**Stated assumptions** (off by default: sound by default). ``assume_finite_gradients=True`` states that every
per-sample gradient of the training is finite, so the ``non_finite_rows`` check (jax_privacy's ``nan_safe``: a NaN
row must not make the update non-finite) tests a leak the training never releases — Opacus 1.6's clipping is not
nan_safe, so without the assumption every Opacus run is a VIOLATION. The check still runs and keeps its own verdict
and finding; it is marked ``excluded_from_overall`` with the reason, whatever its verdict, and the overall verdict is
computed from the other checks, the audit and the model-based bound. The Bonferroni split is unchanged: the excluded
check keeps its share, so every other test runs at the same level with or without the assumption (the same seed gives
the same findings; only what is counted differs). The assumption is the user's, not checked by dplens, and is stated
in the result (``stated_assumptions``), its JSON and the report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dplens.auditing.training import audit as audit_mod
from dplens.auditing.training import checks as checks_mod
from dplens.auditing.training.batches import BatchSource
from dplens.auditing.training.declared import Declaration, steps_of
from dplens.auditing.training.framework_free import StepSubject, import_function

__all__ = [
    "FINITE_GRADIENTS",
    "DpSgdCheckResult",
    "StatedAssumption",
    "check_dp_sgd",
    "default_trials",
    "exclude_assumed",
    "overall_verdict",
    "stated_assumptions",
]

OBSERVE = ("every", "final")
_NOTES_FRAMEWORK_FREE = (
    "gradient accumulation is not checked: the framework-free contract sees one logical batch per step call"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StatedAssumption:
    """An assumption the user states about the training and dplens does not check: the checks it ``excludes`` still
    run and are reported, but are not counted in the overall verdict."""

    option: str  # the keyword (and, with dashes, the CLI option) that states it
    statement: str
    excludes: tuple[str, ...]

    @property
    def reason(self) -> str:
        """Why an excluded check is not counted, as its ``exclusion_reason`` says."""
        return f"the user states {self.statement} ({self.option}=True)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "option": self.option,
            "statement": self.statement,
            "excludes": list(self.excludes),
            "checked_by_dplens": False,
        }


FINITE_GRADIENTS = StatedAssumption(
    option="assume_finite_gradients",
    statement="every per-sample gradient is finite",
    excludes=("non_finite_rows",),
)


def stated_assumptions(*, assume_finite_gradients: Any) -> tuple[StatedAssumption, ...]:
    """The assumptions the options state (``ValueError`` naming the option for a non-bool)."""
    if not isinstance(assume_finite_gradients, bool):
        raise ValueError(
            f"check_dp_sgd: assume_finite_gradients must be True or False; got {assume_finite_gradients!r}"
        )
    return (FINITE_GRADIENTS,) if assume_finite_gradients else ()


def exclude_assumed(found: list[checks_mod.Check], assumptions: tuple[StatedAssumption, ...]) -> list[checks_mod.Check]:
    """``found`` with every check an assumption excludes marked ``excluded_from_overall`` (its verdict, finding and
    significance unchanged: it ran, it is reported, it is not counted)."""
    reasons = {name: a.reason for a in assumptions for name in a.excludes}
    return [
        replace(c, excluded_from_overall=True, exclusion_reason=reasons[c.name]) if c.name in reasons else c
        for c in found
    ]


def overall_verdict(found: list[checks_mod.Check] | tuple[checks_mod.Check, ...], *others: str) -> str:
    """VIOLATION if any counted check or any of ``others`` (the audit's, the model-based bound's verdict) says so;
    PASS only if all of them pass; else INCONCLUSIVE. Checks marked ``excluded_from_overall`` are not counted."""
    verdicts = [c.verdict for c in found if not c.excluded_from_overall] + list(others)
    if "VIOLATION" in verdicts:
        return "VIOLATION"
    return "PASS" if all(v == "PASS" for v in verdicts) else "INCONCLUSIVE"


def default_trials(steps: int) -> int:
    """Trainings per side when none are given: about 2·10⁵ step calls per side, within [200, 10⁴]."""
    return int(min(10000, max(200, round(2e5 / steps, -2))))


@dataclass(frozen=True, slots=True, kw_only=True)
class DpSgdCheckResult:
    """The checks, the audit and the model-based bound of one DP-SGD implementation, and the overall verdict."""

    verdict: str
    checks: tuple[checks_mod.Check, ...]
    audit: audit_mod.AuditResult
    model_based: audit_mod.ModelBasedBound
    declared: Declaration
    claimed_epsilon: float
    claimed_epsilon_lower: float | None
    subject: str
    sampler_function: str | None
    alpha: float
    trials: int
    seed: int
    seconds: float
    trials_default: bool = False
    notes: tuple[str, ...] = field(default=())
    subject_kind: str = "framework-free"
    stated_assumptions: tuple[StatedAssumption, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "checks": [c.to_dict() for c in self.checks],
            "audit": self.audit.to_dict(),
            "model_based": self.model_based.to_dict(),
            "declared": self.declared.to_dict(),
            "claimed_epsilon": self.claimed_epsilon,
            "claimed_epsilon_lower": self.claimed_epsilon_lower,
            "subject": self.subject,
            "subject_kind": self.subject_kind,
            "sampler_function": self.sampler_function,
            "alpha": self.alpha,
            "alpha_split": len(self.checks) + 2,
            "alpha_each": self.alpha / (len(self.checks) + 2),
            "trials_per_side": self.trials,
            "trials_default": self.trials_default,
            "seed": self.seed,
            "seconds": self.seconds,
            "notes": list(self.notes),
            "stated_assumptions": [a.to_dict() for a in self.stated_assumptions],
        }

    def summary(self) -> str:
        """The text the command line prints: one line per check, then the audit and the model-based bound."""
        default = f" (the default for {self.declared.steps} steps)" if self.trials_default else ""
        stated = len(self.stated_assumptions)
        under = f" under {stated} stated assumption{'s' * (stated > 1)}" if stated else ""
        lines = [
            f"check-dp-sgd: {self.verdict}{under}  ({self.subject}; declared sampler {self.declared.sampler!r}, "
            f"claimed epsilon = {self.claimed_epsilon:.4g} at delta = {self.declared.delta:g}; {self.trials} "
            f"trainings per side{default}; alpha = {self.alpha:g}, Bonferroni over {len(self.checks) + 2})"
        ]
        lines.extend(
            f"  assumption stated by the user (not checked): {a.statement} ({a.option}); not counted in the verdict: "
            + ", ".join(a.excludes)
            for a in self.stated_assumptions
        )
        for c in self.checks:
            mark = f" [not counted: {c.exclusion_reason}]" if c.excluded_from_overall else ""
            lines.append(f"  {c.verdict:<12} {c.name}: {c.finding}{mark}")
        a, m = self.audit, self.model_based
        lines.append(
            f"  {a.verdict:<12} audit (assumption-free): epsilon >= {a.epsilon_lower_bound:.4g} against the "
            f"claimed {a.claimed_epsilon:.4g} ({a.statistic}; ceiling {a.ceiling:.3g})"
        )
        lines.append(
            f"  {m.verdict:<12} model-based bound: epsilon >= {m.epsilon_lower_bound:.4g} against the claimed "
            f"{m.claimed_epsilon:.4g} (noise multiplier <= {m.noise_multiplier_upper:.4g}"
            + (f", q >= {m.sampling_rate_lower:.4g}" if m.sampling_rate_lower is not None else "")
            + "; valid only under its assumption)"
        )
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def _options(alpha: Any, observe: Any, workers: Any, trials: Any, seed: Any) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise ValueError(f"check_dp_sgd: alpha must be in (0, 1); got {alpha!r}")
    if observe not in OBSERVE:
        raise ValueError(f"check_dp_sgd: observe must be one of {list(OBSERVE)}; got {observe!r}")
    for name, value, low in (("workers", workers, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"check_dp_sgd: {name} must be an integer >= {low}; got {value!r}")
    if trials is not None and (isinstance(trials, bool) or not isinstance(trials, int) or trials < 20):
        raise ValueError(f"check_dp_sgd: trials must be an integer >= 20; got {trials!r}")


def _sampler(function: Any, decl: Declaration) -> BatchSource:
    if function is None:
        return BatchSource(decl.sampler, decl.dataset_size, decl.batch_size, decl.steps)
    name = function if isinstance(function, str) else getattr(function, "__qualname__", repr(function))
    if isinstance(function, str):
        function = import_function(function, "sampler_function")
    elif not callable(function):
        raise ValueError(f"check_dp_sgd: sampler_function must be a callable or 'module:function'; got {function!r}")
    return BatchSource(decl.sampler, decl.dataset_size, decl.batch_size, decl.steps, function, name)


def _check_sendable(step: StepSubject, source: BatchSource, workers: int, scheduler: Any) -> None:
    """Name the user function a process pool cannot receive, before any training runs.

    With workers > 1 the local pool pickles the task unless it forks (``runner.choose_start_method``: forkserver or
    spawn once JAX, a GPU torch or TensorFlow is loaded); the runner's own message cannot say which function failed.
    """
    from dplens.auditing import runner

    if workers <= 1 or scheduler is not None or runner.choose_start_method()[0] == "fork":
        return
    # a framework subject (Opacus, jax_privacy) is sent whole by its own adapter; a framework-free step is user code
    parts = [("step function", step.name, step.step)] if step.kind == "framework-free" else []
    if source.is_user:
        parts.append(("sampler function", source.name, source.function))
    for role, name, function in parts:
        why = runner.pickling_error(function)
        if why is not None:
            raise ValueError(
                f"check_dp_sgd: the {role} {name!r} cannot be sent to worker processes (workers={workers}; {why}); "
                "define it at module level (not as a lambda or closure), or use workers=1"
            )


def check_dp_sgd(
    subject: Any,
    *,
    noise_multiplier: float,
    max_grad_norm: float,
    batch_size: int,
    dataset_size: int,
    delta: float,
    steps: int | None = None,
    epochs: float | None = None,
    sampler: str = "poisson",
    sampler_function: Any = None,
    normalise: str = "expected",
    trials: int | None = None,
    seed: int = 0,
    alpha: float = 0.05,
    observe: str = "every",
    neighboring: str | None = None,
    workers: int = 1,
    scheduler: Any = None,
    progress: bool = False,
    assume_finite_gradients: bool = False,
) -> DpSgdCheckResult:
    """Check a DP-SGD step against the declared mechanism: named checks, an assumption-free audit, a model-based bound.

    ``subject``: a framework-free step ``step(per_sample_gradients, rng) -> update`` (NumPy (b, d) → (d,), ``rng`` a
    ``numpy.random.Generator``) or ``"module:function"``. ``sampler`` is the declared sampler (what the accountant's
    ε assumes; the names of ``dplens dp-sgd --sampling``); ``sampler_function(dataset_size, rng)``, when given, is the
    code that forms the batches (an iterable of 1-D index arrays) — without it dplens forms them by the declared
    sampler and checks the step alone. Exactly one of ``steps`` and ``epochs``. ``trials``: trainings per side
    (default :func:`default_trials`). ``assume_finite_gradients=True`` states that every per-sample gradient is finite:
    ``non_finite_rows`` still runs and is reported but is not counted in the overall verdict (see the module's
    docstring; off by default).

    Example:
        >>> from dplens.auditing.training.framework_free import reference_step
        >>> result = check_dp_sgd(reference_step(1.0, 1.0, 50), noise_multiplier=1.0, max_grad_norm=1.0,
        ...                       batch_size=50, dataset_size=5000, steps=20, delta=1e-5, trials=200)
        >>> sorted(result.to_dict())[:4], result.audit.epsilon_lower_bound <= result.claimed_epsilon
        (['alpha', 'alpha_each', 'alpha_split', 'audit'], True)
    """
    started = time.perf_counter()
    total = steps_of(steps=steps, epochs=epochs, dataset_size=dataset_size, batch_size=batch_size)
    decl = Declaration(
        noise_multiplier=noise_multiplier,
        max_grad_norm=max_grad_norm,
        batch_size=batch_size,
        dataset_size=dataset_size,
        steps=total,
        delta=delta,
        sampler=sampler,
        normalise=normalise,
        neighboring=neighboring,
    )
    _options(alpha, observe, workers, trials, seed)
    assumptions = stated_assumptions(assume_finite_gradients=assume_finite_gradients)
    step = subject if isinstance(subject, StepSubject) else StepSubject(subject)
    source = _sampler(sampler_function, decl)
    _check_sendable(step, source, workers, scheduler)
    chosen = trials is None
    trials = default_trials(total) if chosen else trials
    run = dict(trials=trials, seed=seed, workers=workers, scheduler=scheduler, progress=progress)
    result = _check(
        step, source, decl, alpha=float(alpha), observe=observe, started=started, assumptions=assumptions, **run
    )
    return replace(result, trials_default=chosen)


def _check(
    step,
    source,
    decl: Declaration,
    *,
    alpha: float,
    observe: str,
    started: float,
    assumptions: tuple[StatedAssumption, ...],
    **run: Any,
):
    """Probes, trainings, checks, audit and model-based bound, α split equally over them (excluded checks too)."""
    trials, seed = run["trials"], run["seed"]
    root = np.random.SeedSequence(seed, spawn_key=(46,))
    probe_seed, sampling_seed, gaussian_seed = root.spawn(3)
    probes = checks_mod.run_probes(step, decl, probe_seed)
    tests = 6 + int(probes.accounting is not None) + int(source.is_user) + 2
    share = alpha / tests
    runs = audit_mod.run_trainings(step, source, decl, pilot=max(100, trials // 5), **run)
    prints = runs.counted[:, :, 4:6]
    found = checks_mod.step_checks(probes, decl, share, np.random.default_rng(gaussian_seed), prints)
    if source.is_user:
        found.append(checks_mod.sampling_check(source, decl, share, sampling_seed))
    claimed = decl.claimed()
    bound = audit_mod.audit_bound(runs, decl, claimed=claimed.epsilon, significance=share, observe=observe)
    model = audit_mod.model_based_bound(runs, decl, claimed=claimed.epsilon, significance=share)
    notes = [_NOTES_FRAMEWORK_FREE] if probes.accounting is None else _accumulation_notes(step)
    if not source.is_user:
        notes.append(
            f"sampling law not checked: the batches were formed by dplens by the declared {decl.sampler!r} "
            "sampler (give sampler_function to check the loader that runs)"
        )
    found = exclude_assumed(found, assumptions)
    return DpSgdCheckResult(
        verdict=overall_verdict(found, bound.verdict, model.verdict),
        checks=tuple(found),
        audit=bound,
        model_based=model,
        declared=decl,
        claimed_epsilon=claimed.epsilon,
        claimed_epsilon_lower=claimed.epsilon_lower,
        subject=step.name,
        sampler_function=source.name,
        alpha=alpha,
        trials=trials,
        seed=seed,
        seconds=time.perf_counter() - started,
        notes=tuple(notes),
        subject_kind=step.kind,
        stated_assumptions=assumptions,
    )


def _accumulation_notes(step: StepSubject) -> list[str]:
    if step.physical_batch_size is None:
        return [
            f"gradient accumulation not exercised: the {step.kind} subject ran one physical batch per logical batch "
            "(give max_physical_batch_size to split them as the training does); the noised steps and the rate "
            "given to the accountant were checked"
        ]
    return []
