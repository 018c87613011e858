"""Hyperparameter tuning as an event: a study of a random number of training runs, only the best one released.

Papernot & Steinke, "Hyperparameter Tuning with Renyi Differential Privacy" (ICLR 2022, arXiv 2110.03620v2): if the
number of runs K is random — geometric, truncated negative binomial (TNB, shape η > −1; η = 0 logarithmic, η = 1
geometric) or Poisson — releasing the best run costs only a little more than one run (Theorems 2 and 6), whereas a
fixed number of runs composes. :class:`~dplens.accountant.selection.RepeatAndSelect` is that event (accounted on the
RDP route, as dp-accounting's ``RepeatAndSelectDpEvent``, and by the privacy-profile bound of
:mod:`~dplens.accountant.selection_profile`, derived here: the smaller is reported); this module names the
distributions the way a study states them and checks their parameters. Koskela, Redberg and Wang's profile analysis
(ICML 2024) is not implemented (its theorem was not at hand).

A fixed number of runs N with all N released (or the best of a fixed N) is *not* this event: it is N-fold
composition (``SelfComposed(run, N)``), which :func:`tuning_event` refuses to mislabel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dplens.accountant import events as ev
from dplens.accountant.selection import RepeatAndSelect

__all__ = ["TRIAL_DISTRIBUTIONS", "TuningEpsilon", "tuning_epsilon", "tuning_event"]

#: The distributions of the number of runs, and the TNB shape each stands for (None: given by ``shape``).
TRIAL_DISTRIBUTIONS = {"geometric": 1.0, "poisson": math.inf, "logarithmic": 0.0, "truncated-negative-binomial": None}


def tuning_event(run: ev.Event, *, distribution: str, mean: float, shape: float | None = None) -> RepeatAndSelect:
    """The study of ``mean`` runs on average (K drawn from ``distribution``) releasing the best run of ``run``.

    Example:
        >>> study = tuning_event(ev.Gaussian(noise_multiplier=5.0), distribution="geometric", mean=10)
        >>> study.shape, study.mean
        (1.0, 10.0)
    """
    if not isinstance(run, ev.Event):
        raise ValueError(f"run must be an Event; got {run!r}")
    if distribution not in TRIAL_DISTRIBUTIONS:
        raise ValueError(f"distribution must be one of {sorted(TRIAL_DISTRIBUTIONS)}; got {distribution!r}")
    if isinstance(mean, bool) or not isinstance(mean, int | float) or not (0 < mean < math.inf):
        raise ValueError(f"mean (the expected number of runs) must be a finite number > 0; got {mean!r}")
    if mean < 1:
        raise ValueError(f"mean (the expected number of runs) must be >= 1 (at least one run); got {mean!r}")
    fixed = TRIAL_DISTRIBUTIONS[distribution]
    if fixed is None:
        if isinstance(shape, bool) or not isinstance(shape, int | float) or not (shape > 0 and math.isfinite(shape)):
            raise ValueError(
                f"shape (eta of the truncated negative binomial) must be a finite number > 0 (0: use 'logarithmic', "
                f"1: 'geometric'); got {shape!r}"
            )
        fixed = float(shape)
    elif shape is not None:
        raise ValueError(
            f"shape applies to 'truncated-negative-binomial' only; got shape={shape!r} for {distribution!r}"
        )
    return RepeatAndSelect(event=run, mean=float(mean), shape=fixed)


@dataclass(frozen=True, slots=True, kw_only=True)
class TuningEpsilon:
    """A study's ε (an upper bound: the smaller of Papernot–Steinke on RDP and the profile bound of
    :mod:`~dplens.accountant.selection_profile`), each route's value, and one run's bound beside it (the study's
    is reported ≥ it)."""

    epsilon: float
    delta: float
    one_run_epsilon: float
    distribution: str
    mean: float
    shape: float
    method: str
    epsilon_rdp: float | None = None
    epsilon_profile: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "one_run_epsilon": self.one_run_epsilon,
            "tuning": {
                "distribution": self.distribution,
                "mean_runs": self.mean,
                "shape": _finite(self.shape),
                "routes": {"rdp": self.epsilon_rdp, "profile": self.epsilon_profile},
            },
            "method": self.method,
            "includes_tuning": True,
        }


def _finite(value: float) -> float | str:
    return value if math.isfinite(value) else "inf"


def tuning_epsilon(
    run: ev.Event, *, distribution: str, mean: float, delta: float, shape: float | None = None
) -> TuningEpsilon:
    """ε at δ of a tuning study of ``run`` (see :func:`tuning_event`), and one run's ε (dplens's tightest route).

    The study's ε is the smaller of two valid upper bounds: Papernot & Steinke's RDP bound (PS22 Theorems 2 and 6,
    converted by Canonne–Kamath–Steinke) and the privacy-profile bound of
    :mod:`~dplens.accountant.selection_profile` (derived here from the run's profile; tighter at larger per-run ε,
    looser in the high-privacy regime with many runs). It is reported at least one run's ε (the maximum of two upper
    bounds on the study is one too).

    Example (a DP-SGD run, 10 runs on average, geometric):
        >>> from dplens.accountant.dp_sgd import DpSgdRun
        >>> run = DpSgdRun(noise_multiplier=1.1, dataset_size=60000, batch_size=256, epochs=10)
        >>> out = tuning_epsilon(run, distribution="geometric", mean=10, delta=1e-5)
        >>> out.epsilon > out.one_run_epsilon, out.epsilon == min(out.epsilon_rdp, out.epsilon_profile)
        (True, True)
    """
    from dplens.accountant.compose import Accountant, Method
    from dplens.accountant.rdp import UnsupportedEventError

    study = tuning_event(run, distribution=distribution, mean=mean, shape=shape)
    one = Accountant().compose(run).epsilon(delta)
    accountant = Accountant().compose(study)
    by_rdp = accountant.epsilon(delta, method=Method.RDP)
    try:
        by_profile = accountant.epsilon(delta, method=Method.EXACT)
    except (UnsupportedEventError, OverflowError):  # no profile of the run: RDP stands
        by_profile = None
    if by_profile is not None and by_profile < by_rdp:
        total, method = by_profile, "privacy profile of the selection (dplens.accountant.selection_profile)"
    else:
        total, method = by_rdp, "rdp (Papernot & Steinke 2022)"
    return TuningEpsilon(
        epsilon=max(total, one),
        delta=float(delta),
        one_run_epsilon=one,
        distribution=distribution,
        mean=study.mean,
        shape=study.shape,
        method=method,
        epsilon_rdp=by_rdp,
        epsilon_profile=by_profile,
    )
