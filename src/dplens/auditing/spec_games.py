"""Spec → audit game: what ``dplens audit SPEC --game distinguish|one-run|attribute`` runs.

The game comes from the command line, else from the spec's ``[audit]`` table, else it is the distinguishing game.
The claim under test comes from the spec's ``[claim]`` when there is one, else from the accountant (its tightest
valid ε at δ), as for :func:`dplens.auditing.games.audit_spec`.

- ``distinguish``: a ``dp_sgd_training`` spec runs the canary game of :func:`dplens.auditing.canaries.
  multi_run_canary_audit` (canary, observation and score from ``[audit]``); any other spec the distinguishing game
  on its mechanisms (:func:`dplens.auditing.games.audit_spec`).
- ``one_run``: one DP-SGD training with ``canaries`` canaries (``dp_sgd_training`` specs;
  :func:`dplens.auditing.canaries.one_run_canary_audit`).
- ``attribute``: the attribute-inference game of :mod:`dplens.auditing.attribute` on the spec's mechanism, with
  ``prior`` and ``values`` (the mechanism's data for each attribute value) from ``[audit]``. For ``feature_dp_sgd``
  the claim is read as feature DP and compared through seed 003 Theorem 4 (Mahloujifar, Guo, Suh, Chaudhuri,
  IEEE S&P 2025), the accountant's full privacy profile giving the feature-DP upper bound on the success.
"""

from __future__ import annotations

import enum
from typing import Any

from dplens.auditing.games import spec_claim

__all__ = ["GAMES", "Game", "attribute_summary", "audit_spec_game", "resolve_game", "spec_claim"]


class Game(enum.Enum):
    """The audit game of ``dplens audit``."""

    DISTINGUISH = "distinguish"
    ONE_RUN = "one_run"
    ATTRIBUTE = "attribute"


def resolve_game(spec: Any, game: Game | str | None) -> Game:
    """The game to run: ``game`` (``one-run`` and ``one_run`` both accepted), else the spec's ``[audit]`` game."""
    if isinstance(game, Game):
        return game
    if game is None:
        table = getattr(spec, "audit", None)
        return Game(table.game) if table is not None else Game.DISTINGUISH
    try:
        return Game(str(game).replace("-", "_"))
    except ValueError:
        raise ValueError(f"game must be one of ['distinguish', 'one-run', 'attribute']; got {game!r}") from None


def _training_table(spec: Any, game: Game) -> dict[str, Any] | None:
    tables = [t for t in spec.mechanisms if t.get("type") == "dp_sgd_training"]
    if not tables:
        return None
    if len(spec.mechanisms) != 1:
        raise ValueError(
            f"the {game.value} canary game audits one dp_sgd_training mechanism; the spec has "
            f"{len(spec.mechanisms)} mechanism tables"
        )
    return tables[0]


def audit_spec_game(
    spec: Any,
    *,
    game: Game | str | None = None,
    trials: int | None = None,
    delta: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    workers: int = 1,
    scheduler: Any = None,
    checkpoint: Any = None,
    progress: bool = False,
) -> Any:
    """Run the spec's audit game (see the module docstring) and return its result.

    Args:
        spec: a parsed :class:`~dplens.spec.Spec`.
        game: the game (default: the spec's ``[audit]`` game, else ``distinguish``).
        trials: trials per side (distinguish), trials (attribute), or the number of canaries (one run; default the
            table's ``canaries``).
        delta: δ of the (ε, δ) statement under test (default: the claim's, else 1e-5).
        confidence, seed, workers, scheduler, checkpoint, progress: execution, as for
            :func:`dplens.auditing.games.audit` (the one-run game is a single training: no pool, cluster or
            checkpoint).

    Returns:
        An :class:`~dplens.auditing.games.AuditResult`, :class:`~dplens.auditing.scores.OneRunAuditResult` or
        :class:`~dplens.auditing.attribute.AttributeAuditResult`.
    """
    from dplens.spec import AuditTable

    chosen = resolve_game(spec, game)
    table = spec.audit if spec.audit is not None else AuditTable()
    execution = dict(workers=workers, scheduler=scheduler, checkpoint=checkpoint, progress=progress)
    run_game = GAMES[chosen]
    return run_game(spec, table, trials=trials, delta=delta, confidence=confidence, seed=seed, **execution)


def _distinguish(
    spec: Any, table: Any, *, trials: int | None, delta: float | None, confidence: float, seed: int, **execution: Any
) -> Any:
    """The distinguishing game: a ``dp_sgd_training`` spec's multi-run canary game, else the game on the spec's
    mechanisms (:func:`dplens.auditing.games.audit_spec`)."""
    if trials is None:
        raise ValueError("trials (--trials) is required for the distinguish game (trials per side)")
    training_table = _training_table(spec, Game.DISTINGUISH)
    if training_table is None:
        from dplens.auditing.games import audit_spec

        return audit_spec(spec, trials=trials, delta=delta, confidence=confidence, seed=seed, **execution)
    from dplens.auditing import canaries as cn

    options = _canary_game_options(spec, table, delta=delta, confidence=confidence, seed=seed)
    return cn.multi_run_canary_audit(
        cn.DpSgdTraining.from_spec_table(training_table), trials=trials, **options, **execution
    )


def _one_run(
    spec: Any, table: Any, *, trials: int | None, delta: float | None, confidence: float, seed: int, **execution: Any
) -> Any:
    """The one-run game: one DP-SGD training with ``trials`` canaries (default the table's ``canaries``)."""
    training_table = _training_table(spec, Game.ONE_RUN)
    if training_table is None:
        raise ValueError("the one-run game needs a dp_sgd_training mechanism in the spec")
    if execution["workers"] != 1 or execution["scheduler"] is not None or execution["checkpoint"] is not None:
        raise ValueError("the one-run game is a single training: --workers, --scheduler and --checkpoint do not apply")
    from dplens.auditing import canaries as cn

    options = _canary_game_options(spec, table, delta=delta, confidence=confidence, seed=seed)
    return cn.one_run_canary_audit(
        cn.DpSgdTraining.from_spec_table(training_table),
        canaries=table.canaries if trials is None else trials,
        **options,
    )


def _canary_game_options(spec: Any, table: Any, *, delta: float | None, confidence: float, seed: int) -> dict:
    """The canary games' options from the spec's ``[audit]`` table and its claim (one-run and multi-run alike)."""
    claimed, delta, source = spec_claim(spec, delta)
    return dict(
        canary=table.canary,
        observe=table.observe,
        score=table.score,
        input_canary=table.input_canary,
        claim=claimed,
        delta=delta,
        confidence=confidence,
        seed=seed,
        claim_source=source,
    )


def _attribute(
    spec: Any, table: Any, *, trials: int | None, delta: float | None, confidence: float, seed: int, **execution: Any
) -> Any:
    """The attribute-inference game on the spec's one mechanism, ``prior`` and ``values`` from ``[audit]``."""
    if trials is None:
        raise ValueError("trials (--trials) is required for the attribute game")
    from dplens.auditing import attribute as at
    from dplens.mechanisms.registry import mechanism_from_spec

    if len(spec.entries) != 1:
        raise ValueError(f"the attribute game audits one mechanism; the spec has {len(spec.entries)} mechanism tables")
    mechanism = mechanism_from_spec(spec)
    feature_dp = spec.mechanisms[0].get("type") == "feature_dp_sgd"
    reading = at.ClaimReading.FEATURE_DP if feature_dp else at.ClaimReading.REPLACE_ONE
    if spec.claim is not None:
        claimed, delta, source = spec_claim(spec, delta)
        claim: Any = at.DpClaim(epsilon=claimed, delta=delta)
    else:
        delta = 1e-5 if delta is None else delta
        profile = spec.accountant().pld_profile()
        claim = at.ProfileClaim(profile=profile)
        source = f"accountant ({profile.description})"
    values = None if table.values is None else tuple(table.values)
    prior = None if table.prior is None else list(table.prior)
    if prior is None and values is None:
        values = (0.0, 1.0)  # the target's contribution absent vs present: the mechanism's worst case
    return at.audit(
        mechanism,
        trials=trials,
        claim=claim,
        delta=delta,
        prior=prior,
        datasets=values,
        reading=reading,
        confidence=confidence,
        seed=seed,
        claim_source=source,
        **execution,
    )


#: Each game of ``dplens audit SPEC``, by name: the one table :func:`audit_spec_game` reads.
GAMES = {Game.DISTINGUISH: _distinguish, Game.ONE_RUN: _one_run, Game.ATTRIBUTE: _attribute}


def attribute_summary(result: Any) -> str:
    """The text output of the attribute game: success, its interval, the ε lower bound and the claim's maximum."""
    level = f"{result.confidence:.0%}"
    low, high = result.confidence_interval
    feature = result.reading.value == "feature-dp"
    bound = result.feature_dp_epsilon_lower_bound if feature else result.epsilon_lower_bound
    which = "feature-DP reading, seed 003 Theorem 4 inverted" if feature else "replace-one reading"
    lines = [
        f"attribute inference: success rate {result.success_rate:.4g} ({result.successes} of {result.trials} trials), "
        f"{level} interval [{low:.4g}, {high:.4g}], baseline (best guess without the output) {result.baseline:.4g}",
        f"epsilon >= {bound:.6g}  (valid {level} lower bound, delta = {result.delta:g}; {which})",
        f"  claimed epsilon: {result.epsilon_claimed:.6g}  [{result.claim_source}]",
        f"  success the claim allows: {result.theorem4_success_upper_bound:.4g} (feature-DP upper bound, seed 003 "
        f"Theorem 4, baseline {result.theorem4_baseline:.4g}); {result.replace_one_success_upper_bound:.4g} "
        "(exact replace-one maximum)",
        f"  replace-one epsilon lower bound: {result.epsilon_lower_bound:.6g}; attacker: {result.attacker}",
        f"  adjacency: {result.adjacency}",
        f"verdict: {result.verdict.value}. {result.verdict_reason}",
    ]
    return "\n".join(lines)
