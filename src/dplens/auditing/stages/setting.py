"""What the user asked of a target audit, checked once: the claim, the trials, the seed, the confidence, the workers.

The orchestrator (:func:`dplens.auditing.target_game.audit_target`) validates its arguments here and passes one
frozen :class:`AuditSetting` down the stages; every bad value raises a ``ValueError`` naming the argument and
echoing it (the CLI prints that line and exits 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dplens.auditing import bounds as bd
from dplens.auditing.bounds import check_int

__all__ = ["AuditSetting", "check_int"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditSetting:
    """The checked arguments of a target audit (built by :meth:`checked`).

    Example:
        >>> setting = AuditSetting.checked(claim_epsilon=1, claim_delta=0.0, trials=1000, seed=0, workers=1,
        ...                                confidence=0.95, float_checks=True)
        >>> setting.significance, setting.claim_epsilon
        (0.050000000000000044, 1.0)
    """

    claim_epsilon: float
    delta: float
    trials: int
    seed: int
    workers: int
    confidence: float
    float_checks: bool
    pilot_trials: int | None = None
    pilot_fraction: float | None = None
    chunk_size: int | None = None
    progress: bool = False
    search_budget: int = 24
    search_trials: int | None = None

    @property
    def significance(self) -> float:
        """α = 1 − confidence, spent over every score's tests."""
        return 1.0 - float(self.confidence)

    @classmethod
    def checked(
        cls,
        *,
        claim_epsilon: Any,
        claim_delta: Any,
        trials: Any,
        seed: Any,
        workers: Any,
        confidence: Any,
        float_checks: Any,
        **options: Any,
    ) -> AuditSetting:
        """The setting, every argument checked (a ``ValueError`` naming the first bad one); ``options`` are the
        pilot, chunk, progress and pair-search options (checked where they are used)."""
        trials = check_int("trials", trials, 1)
        seed = check_int("seed", seed, 0)
        if not isinstance(float_checks, bool):
            raise ValueError(f"float_checks must be True or False; got {float_checks!r}")
        workers = check_int("workers", workers, 1)
        if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0.5 <= confidence < 1:
            raise ValueError(f"confidence must be in [0.5, 1); got {confidence!r}")
        if (
            isinstance(claim_epsilon, bool)
            or not isinstance(claim_epsilon, int | float)
            or not (claim_epsilon >= 0 and math.isfinite(claim_epsilon))
        ):
            raise ValueError(f"claim_epsilon must be a finite number >= 0; got {claim_epsilon!r}")
        delta = bd.conversions.check_delta(claim_delta, allow_zero=True)
        if options.get("chunk_size") is not None:
            check_int("chunk_size", options["chunk_size"], 1)
        return cls(
            claim_epsilon=float(claim_epsilon),
            delta=delta,
            trials=trials,
            seed=seed,
            workers=workers,
            confidence=float(confidence),
            float_checks=float_checks,
            **options,
        )
