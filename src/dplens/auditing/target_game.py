"""The distinguishing game on a user's target: black-box scores, float reachability, a valid lower bound on ε.

A target (:mod:`dplens.auditing.targets`) is run N times on each of D and D′. Its outputs are scored by several
*scores*, each chosen before the counted trials on an independent pilot (its own seed stream, never counted):

- :class:`FrequencyRatio` — categorical outputs: the pilot's log frequency ratio per category (the likelihood
  ratio of a discrete mechanism; unseen categories share one bin);
- :class:`HistogramRatio` — numeric scalars: the pilot's log ratio per histogram bin (one bin per integer for
  integer outputs with a small range, else bins at pooled pilot quantiles);
- :class:`JointFrequency` — discrete vectors with a small observed support (sparse-vector flag patterns, short bit
  vectors): the frequency ratio of whole outputs, unseen outputs pooled (:mod:`dplens.auditing.blackbox.frequency`);
- :class:`LogisticRatio` / :class:`BoostedTrees` — real vectors, reals with sentinels, long bit vectors: ridge
  logistic regression and scikit-learn's gradient-boosted trees on sentinel-aware features
  (:mod:`dplens.auditing.blackbox.learned`, :mod:`dplens.auditing.blackbox.features`; DP-Sniper's learned attack,
  Bichsel et al., S&P 2021);
- :class:`UserScore` — a user function of the outputs (``--score MODULE:NAME``);
- :class:`Reachability` — floating-point reachability from the noise-free query values under a named sampler
  model (:mod:`dplens.auditing.floats`): an output unreachable from q′ but reachable from q points to D. Only on
  non-integral float outputs most of which are reachable from their own query value (never on integers or flags).

:func:`audit_target` runs the audit as a pipeline of stages, one module each in :mod:`dplens.auditing.stages`,
each handing the next a small frozen value; their order is one table, :data:`STAGES`, which it iterates: the
checks before the pilot (pair search, probe, reproducibility: :mod:`~dplens.auditing.stages.checks`) → the memory
plan (:mod:`~dplens.auditing.stages.memory`) → profile the outputs on the fitting pilot
(:mod:`~dplens.auditing.stages.profile`) → choose and fit the candidate scores
(:mod:`~dplens.auditing.stages.candidates`) → pick the operating point on the selection pilot
(:mod:`~dplens.auditing.stages.operating_point`) → run the counted trials (:mod:`~dplens.auditing.stages.counting`)
→ build the result (:mod:`~dplens.auditing.stages.result`). Which scores run is decided on the pilot
(:func:`default_scores`, :class:`OutputProfile`). The pilot grows with the budget: ``pilot_fraction`` of the
counted trials per side (10 % for real-valued outputs, 100 % for discrete ones, whose table scores are only as
good as the pilot's counts), at least 4 000 (:func:`pilot_sizes`); half fits the scores (at most 200 000 draws per
side in memory), the rest is streamed through them to predict every threshold's bound
(:mod:`dplens.auditing.blackbox.operating`). Every score is a binner (:mod:`dplens.auditing.blackbox.base`): the
counted trials are binned (memory does not grow with N), and every (score, threshold, direction) is one hypothesis
of a single weighted Bonferroni procedure whose weights the pilot fixes (most of α on the best predicted test;
Jagielski, Ullman, Oprea 2020 for fixed-threshold validity). Each hypothesis is tested with the exact conditional
bound on the probability ratio, the trial counts of both sides being Poisson-drawn
(:mod:`dplens.auditing.blackbox.poisson`), so the largest bound is a valid (1 − α) lower bound on the ε of the
audited pair. Every score's result is reported, with the float evidence in words ("k of N outputs unreachable from
the neighbour").

Reproducibility: every chunk draws from a ``numpy.random.Generator`` derived from the root seed
(:func:`dplens.auditing.runner.chunk_seed`); a small batch is drawn twice from the same seeds, and the result says
whether the outputs agreed (``reproducible``). A target that draws from numpy's global RNG, Python's ``random`` or
its own generator (OpenDP) is not reproducible: the bound is still valid (its trials are independent runs), but
the audit cannot be replayed from its seed.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from dplens.auditing.blackbox.base import OutputKind
from dplens.auditing.blackbox.coordinates import CoordinateScore
from dplens.auditing.blackbox.frequency import JointFrequency
from dplens.auditing.blackbox.learned import BoostedTrees, LogisticRatio
from dplens.auditing.blackbox.reachability import Reachability
from dplens.auditing.blackbox.tables import FrequencyRatio, HistogramRatio
from dplens.auditing.blackbox.user import UserScore, load_score
from dplens.auditing.stages.candidates import Candidates, Score, choose_candidates, default_scores, user_scores_of
from dplens.auditing.stages.checks import SEARCH_FRACTION, Checked, check_target
from dplens.auditing.stages.counting import Counted, count_trials
from dplens.auditing.stages.memory import MemoryBudget, MemoryPlan, plan_audit
from dplens.auditing.stages.operating_point import OperatingPoint, pick_operating_point
from dplens.auditing.stages.pilot import (
    DISCRETE_PILOT_FRACTION,
    MAX_FIT_TRIALS,
    MAX_SELECTION_TRIALS,
    PILOT_FRACTION,
    pilot_sizes,
)
from dplens.auditing.stages.profile import OutputProfile, Profiled, profile_outputs
from dplens.auditing.stages.result import TargetAuditResult, build_result
from dplens.auditing.stages.setting import AuditSetting
from dplens.auditing.stages.strength import search_strength
from dplens.auditing.stages.wide import profile_wide
from dplens.auditing.targets import as_pair, as_target, load_target

__all__ = [
    "DISCRETE_PILOT_FRACTION",
    "MAX_FIT_TRIALS",
    "MAX_SELECTION_TRIALS",
    "PILOT_FRACTION",
    "SEARCH_FRACTION",
    "STAGES",
    "BoostedTrees",
    "CoordinateScore",
    "FrequencyRatio",
    "HistogramRatio",
    "JointFrequency",
    "LogisticRatio",
    "OutputKind",
    "OutputProfile",
    "Reachability",
    "Score",
    "TargetAuditResult",
    "UserScore",
    "audit_target",
    "default_scores",
    "load_score",
    "pilot_sizes",
    "search_strength",
]


def audit_target(
    target: Any,
    pair: Any,
    *,
    claim_epsilon: float,
    claim_delta: float = 0.0,
    trials: int,
    seed: int = 0,
    workers: int = 1,
    confidence: float = 0.95,
    scores: tuple[Score, ...] | Score | str | None = None,
    pilot_trials: int | None = None,
    pilot_fraction: float | None = None,
    chunk_size: int | None = None,
    progress: bool = False,
    search_budget: int = 24,
    search_trials: int | None = None,
    float_checks: bool = True,
    memory_budget: int | str | None = None,
) -> TargetAuditResult:
    """Audit a user's target on a neighbouring pair and bound its ε from below (see the module docstring).

    Args:
        target: a callable ``f(data, rng)``, a :func:`~dplens.auditing.targets.batched` callable, an adapter
            (:func:`~dplens.auditing.targets.randomise`, :func:`~dplens.auditing.targets.opendp`), an object with
            ``release(data, rng)``, or ``"module:name"``.
        pair: a :class:`~dplens.auditing.targets.TargetPair`, a pair file path, a dict, or (data, neighbour). A
            pair with a ``relation`` and no neighbour is searched first (:mod:`dplens.auditing.pairs`).
        claim_epsilon, claim_delta: the (ε, δ) claim under test.
        trials: counted trials per side.
        seed: root seed (chunks, pilot and checks draw from their own streams of it).
        workers: > 1 runs a local process pool (the target must be importable by path).
        confidence: 1 − α of the bound.
        scores: the scores to try (default :func:`default_scores`); a ``"module:name"`` string is a
            :class:`UserScore`, tried alongside the default ones.
        pilot_trials: pilot draws per side (default: ``pilot_fraction`` of ``trials``, at least 4 000, at most
            5.2·10⁶), drawn on their own seed stream and never counted: a fitting half (held in memory, at most
            200 000 draws per side; the rest moves to the selection half) fits the scores, and a streamed
            selection half predicts each threshold's bound and places the significance
            (:mod:`dplens.auditing.blackbox.operating`).
        pilot_fraction: the pilot's size as a fraction of ``trials`` (default: 0.1 for real-valued outputs, i.e.
            a 10⁷-trial audit fits on 2·10⁵ and selects on 8·10⁵ draws per side; 1.0 for discrete ones —
            integers, flags, bit vectors, categories — whose table scores need the counts and whose pilot is
            cheap), so the scores learn from the budget.
        search_budget, search_trials: a pair search's candidates and draws. ``add_remove``/``replace_one``:
            ``search_trials`` draws per side per candidate (default 2 000). ``query_vector``: at most 12
            candidates (10 standard patterns, 2 random) and ``search_trials`` draws per side in all (default 25 %
            of ``trials``, at least 4 000), spent by successive halving
            (:func:`~dplens.auditing.pairs.search_query_vector`).
        float_checks: False leaves the float reachability checks out of the default scores (what the scores
            alone find on a target whose floats leak; the bound stays valid, only weaker).
        memory_budget: the most memory the audit may hold beyond the interpreter, in bytes or as ``"2G"``
            (default: a quarter of the memory available when it starts; :mod:`dplens.auditing.stages.memory`).
            Outputs of more than 128 coordinates are reduced as they arrive (:mod:`dplens.auditing.stages.wide`);
            a score family that does not fit is skipped with a note, and an audit where nothing fits stops before
            its pilot with a one-line ``ValueError`` giving the numbers.

    Returns:
        A frozen :class:`TargetAuditResult`.

    Example:
        >>> import numpy as np
        >>> def noisy_count(data, rng):
        ...     return float(np.sum(data)) + rng.laplace(0.0, 1.0)
        >>> result = audit_target(noisy_count, ([1, 1, 1], [1, 1]), claim_epsilon=1.0, trials=5000, seed=1)
        >>> result.verdict.value  # the textbook float Laplace: some outputs are impossible from the neighbour
        'VIOLATION'
    """
    start = time.perf_counter()
    setting = AuditSetting.checked(
        claim_epsilon=claim_epsilon,
        claim_delta=claim_delta,
        trials=trials,
        seed=seed,
        workers=workers,
        confidence=confidence,
        float_checks=float_checks,
        pilot_trials=pilot_trials,
        pilot_fraction=pilot_fraction,
        chunk_size=chunk_size,
        progress=progress,
        search_budget=search_budget,
        search_trials=search_trials,
    )
    target = load_target(target) if isinstance(target, str) else as_target(target)
    if setting.workers > 1 and target.path is None:
        raise ValueError(
            f"workers={workers} needs a target that worker processes can import by path ('module:name'); "
            f"{target.name} is a lambda, a closure or defined in __main__: pass 'module:name' or use workers=1"
        )
    run = _Run(target=target, pair=pair, setting=setting, budget=MemoryBudget.resolve(memory_budget), scores=scores)
    for _name, stage in STAGES:
        run = stage(run)
    return build_result(
        setting=setting,
        target=target.describe(),
        checked=run.checked,
        profiled=run.profiled,
        notes=run.candidates.notes,
        point=run.point,
        counted=run.counted,
        start=start,
        memory=run.plan.to_dict(),
    )


# --------------------------------------------------------------------------------------------
# The stages, in the order audit_target runs them (docs/guides/blackbox-internals.md)
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """What the stages have handed on so far: each stage reads it and returns it with its own value added."""

    target: Any
    pair: Any
    setting: AuditSetting
    budget: MemoryBudget
    scores: Any
    user_scores: tuple[UserScore, ...] = ()
    checked: Checked | None = None
    plan: MemoryPlan | None = None
    profiled: Profiled | None = None
    fit: tuple[Any, Any] | None = None
    candidates: Candidates | None = None
    point: OperatingPoint | None = None
    counted: Counted | None = None


def _check(run: _Run) -> _Run:
    """0. The checks before the pilot (pair search, probe, reproducibility)."""
    checked = check_target(run.target, as_pair(run.pair), run.setting, strength=search_strength)
    return dataclasses.replace(run, checked=checked, user_scores=user_scores_of(run.scores))


def _plan(run: _Run) -> _Run:
    """The memory plan (batch size, held or reduced outputs), from the checks' sizing draws, which it lets go."""
    plan = plan_audit(
        run.target, run.checked.pair, run.setting, run.budget, sample=run.checked.sample,
        user_score=bool(run.user_scores),
    )  # fmt: skip
    return dataclasses.replace(run, plan=plan, checked=dataclasses.replace(run.checked, sample=None))


def _profile(run: _Run) -> _Run:
    """1. Profile the outputs on the fitting half of the pilot (wide outputs reduced as they arrive)."""
    if run.plan.reduced:
        profiled, fit = profile_wide(run.target, run.checked, run.setting, run.plan, user_scores=run.user_scores)
    else:
        profiled, fit = profile_outputs(run.target, run.checked, run.setting, run.plan)
    return dataclasses.replace(run, profiled=profiled, fit=fit)


def _candidates(run: _Run) -> _Run:
    """2. Choose and fit the candidate scores; the fitting draws are let go (the scores are frozen)."""
    candidates = choose_candidates(run.scores, run.profiled, run.fit, run.setting, run.plan)
    return dataclasses.replace(run, candidates=candidates, fit=None)


def _operating_point(run: _Run) -> _Run:
    """3. Pick the operating point on the selection half of the pilot."""
    point = pick_operating_point(run.target, run.profiled, run.candidates, run.setting, batch=run.plan.batch_rows)
    return dataclasses.replace(run, point=point)


def _count(run: _Run) -> _Run:
    """4. Run the counted trials (5, the result, is :func:`build_result`)."""
    counted = count_trials(
        run.target, run.profiled.pair, run.point.binners, run.setting, batch=run.plan.batch_rows,
        reduction=run.profiled.reduction,
    )  # fmt: skip
    return dataclasses.replace(run, counted=counted)


#: The stages :func:`audit_target` runs, in order; the result is then built from what they handed on.
STAGES: tuple[tuple[str, Callable[[_Run], _Run]], ...] = (
    ("checks before the pilot", _check),
    ("memory plan", _plan),
    ("profile the outputs", _profile),
    ("choose the candidate scores", _candidates),
    ("pick the operating point", _operating_point),
    ("run the counted trials", _count),
)
