"""How strong a candidate pair is: the bound an audit of it is predicted to reach, for ranking a pair search.

A ``query_vector`` pair search (:func:`dplens.auditing.pairs.search_query_vector`) draws every candidate neighbour
from common random numbers and ranks them by :func:`search_strength`: the default scores fitted on one half of the
draws (the boosted trees left out: too slow for a dozen candidates), each threshold's bound at the audit's trials
predicted on the other half (:func:`dplens.auditing.blackbox.operating.predicted_bounds`). An *estimate*, reported as
one; the final audit runs on fresh trials of the chosen pair only, so its bound stays valid.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dplens.auditing.blackbox import operating
from dplens.auditing.blackbox.base import OutputKind
from dplens.auditing.blackbox.learned import BoostedTrees
from dplens.auditing.blackbox.tables import FrequencyRatio
from dplens.auditing.stages.candidates import default_scores, fit_candidates
from dplens.auditing.stages.pilot import classify
from dplens.auditing.stages.profile import profile_of
from dplens.auditing.targets import TargetPair

__all__ = ["search_strength"]


def search_strength(first: Any, second: Any, audit_trials: int) -> float:
    """An *estimate* of the bound an audit of ``audit_trials`` per side would reach on this pair: a quick score
    (frequency table, histogram or logistic regression) fitted on the draws, the best threshold's bound predicted
    from them (:func:`dplens.auditing.blackbox.operating.predicted_bounds`). For ranking pair candidates only.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> strong = search_strength(rng.laplace(1.0, 1.0, 4000), rng.laplace(0.0, 1.0, 4000), 100_000)
        >>> weak = search_strength(rng.laplace(0.1, 1.0, 4000), rng.laplace(0.0, 1.0, 4000), 100_000)
        >>> strong > weak
        True
    """
    n = min(len(first), len(second))
    if n < 40:
        return 0.0
    # Fitted on one half, predicted on the other: an in-sample prediction is biased upwards, and the more so the
    # more outputs a table has and the fewer draws it saw, which favours the candidates a search has drawn least
    # (SVT6's 1024 flag patterns: 1.41 on 12 500 draws, 0.42 on 54 000). The two halves are coupled draws
    # (common random numbers), so the honest prediction is also a precise one.
    half = n // 2
    fit, rest = (first[:half], second[:half]), (first[half:n], second[half:n])
    kind, dimension = classify(fit[0])
    if (kind, dimension) != classify(fit[1]):
        kind, dimension = OutputKind.CATEGORICAL, 0
    profile = profile_of(fit, kind, dimension)
    scores = [s for s in default_scores(kind, None, TargetPair(data=0, neighbour=0), profile=profile)]
    scores = [s for s in scores if not isinstance(s, BoostedTrees)] or [FrequencyRatio()]
    binners, _ = fit_candidates(tuple(scores), fit, kind, dimension, None, TargetPair(data=0, neighbour=0))
    best = -math.inf
    for binner in binners:
        if binner.ranks < 2:
            continue
        raw = np.stack([np.bincount(binner.raw_bins(side, n - half), minlength=binner.raw_size) for side in rest])
        # No winner's-curse penalty: the search draws both samples from one noise stream (common random numbers,
        # :func:`~dplens.auditing.pairs.search_query_vector`), so the estimate's error is far below the
        # independent-sample deviation the penalty assumes; and a negative prediction still ranks.
        predicted = operating.predicted_bounds(
            binner.rate_counts(raw), trials=audit_trials, delta=0.0, significance=0.05, penalty=0.0
        )
        if predicted.size and np.isfinite(predicted).any():
            best = max(best, float(np.max(predicted[np.isfinite(predicted)])))
    return best if math.isfinite(best) else -1e9
