"""The pilot: how many draws choose the audit's design, how they are drawn, and what kind of outputs they are.

Every score is chosen on an independent pilot, drawn on its own seed streams and never counted: ``pilot_fraction``
of the counted trials per side (:data:`PILOT_FRACTION` for real-valued outputs, :data:`DISCRETE_PILOT_FRACTION`
for discrete ones), at least :data:`DEFAULT_PILOT_TRIALS` (:func:`pilot_sizes`). Half of it fits the scores (at
most :data:`MAX_FIT_TRIALS` draws per side), the rest is streamed through them to predict every threshold's bound.
The pilot's draws use spawn keys (0, 21 + part, side) of the audit's seed (:func:`draw_pilot`), so they are
independent of the counted trials (spawn keys (1, chunk)): whatever the pilot chooses, the counted bound stays
valid (Jagielski, Ullman, Oprea, NeurIPS 2020).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dplens.auditing.blackbox.base import OutputKind
from dplens.auditing.blackbox.base import numeric as _numeric
from dplens.auditing.stages.setting import check_int
from dplens.auditing.targets import Target, TargetPair

__all__ = [
    "DEFAULT_PILOT_TRIALS",
    "DISCRETE_PILOT_FRACTION",
    "MAX_FIT_TRIALS",
    "MAX_SELECTION_TRIALS",
    "PILOT_FRACTION",
    "classify",
    "draw_pilot",
    "joined",
    "pilot_sizes",
]

DEFAULT_PILOT_TRIALS = 4_000
PILOT_FRACTION = 0.1  # pilot draws per side = 10 % of the counted trials (at least DEFAULT_PILOT_TRIALS)
# Discrete outputs (integers, flags, bit vectors, categories) get a pilot as large as the counted run: their scores
# are tables whose order is only as good as the pilot's counts (SVT1's outputs differ in ratio by hundredths), and
# their pilot costs little (the fitting half is small rows, the selection half streamed counts).
DISCRETE_PILOT_FRACTION = 1.0
MAX_FIT_TRIALS = 200_000  # the fitting half is held in memory: at most this many draws per side
MAX_SELECTION_TRIALS = 5_000_000  # the selection half is streamed (counts only)


def pilot_sizes(trials: int, *, pilot_fraction: float = PILOT_FRACTION, pilot_trials: int | None = None):
    """(pilot, fit, selection) draws per side: the pilot is ``pilot_fraction`` of ``trials`` (at least
    :data:`DEFAULT_PILOT_TRIALS`, at most :data:`MAX_FIT_TRIALS` + :data:`MAX_SELECTION_TRIALS`) unless
    ``pilot_trials`` is given; half of it fits the scores (at most :data:`MAX_FIT_TRIALS`, held in memory) and the
    rest, streamed, selects the operating point.

    Example:
        >>> pilot_sizes(1_000_000)
        (100000, 50000, 50000)
    """
    trials = check_int("trials", trials, 1)
    fraction = pilot_fraction
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction <= 1:
        raise ValueError(f"pilot_fraction must be in (0, 1]; got {pilot_fraction!r}")
    if pilot_trials is None:
        pilot = max(DEFAULT_PILOT_TRIALS, math.ceil(float(fraction) * trials))
        pilot = min(pilot, MAX_FIT_TRIALS + MAX_SELECTION_TRIALS)
    else:
        pilot = check_int("pilot_trials", pilot_trials, 20)
    fit = min(pilot // 2, MAX_FIT_TRIALS)
    return pilot, fit, pilot - fit


def draw_pilot(target: Target, pair: TargetPair, seed: int, n: int, part: int) -> tuple[Any, Any]:
    """``n`` pilot draws on each input, from the audit seed's streams (0, 21 + ``part``, side).

    Example:
        >>> import numpy as np
        >>> from dplens.auditing.targets import as_target
        >>> first, second = draw_pilot(as_target(lambda d, rng: d + rng.random()), TargetPair(data=1, neighbour=0),
        ...                            seed=0, n=3, part=0)
        >>> len(first), all(1 <= v < 2 for v in first)
        (3, True)
    """
    out = []
    for side, data in enumerate((pair.data, pair.neighbour)):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, 21 + part, side)))
        label = "D" if side == 0 else "D'"
        out.append(target.draw(data, n, rng, where=f"pilot on input {label}"))
    return out[0], out[1]


def joined(first: Any, second: Any) -> Any:
    """Two batches of one side's outputs as one (arrays joined along the draws, anything else as lists).

    Example:
        >>> joined([1, 2], [3])
        [1, 2, 3]
    """
    if isinstance(first, np.ndarray) and isinstance(second, np.ndarray) and first.shape[1:] == second.shape[1:]:
        return np.concatenate([first, second])
    return [*first, *second]


def classify(outputs: Any) -> tuple[str, int]:
    """(kind, dimension) of a batch of outputs. Boolean vectors count as integer vectors; an object array of
    numbers with ``None`` (an abort marker) is numeric with NaN for ``None``; anything else is categorical.

    Example:
        >>> classify([1.5, 2.0]), classify([[1, 0, 1], [0, 0, 1]]), classify(["a", "b"])
        (('real', 1), ('vector', 3), ('categorical', 0))
    """
    try:
        array = np.asarray(outputs)
    except (ValueError, TypeError):
        return OutputKind.CATEGORICAL, 0
    if array.dtype.kind == "O" and array.ndim >= 1 and len(array):
        try:
            array = _numeric(outputs, OutputKind.REAL, 1, array.size).reshape(array.shape)
        except ValueError:
            return OutputKind.CATEGORICAL, 0
    if array.dtype.kind not in "iufb" or array.ndim == 0 or (array.dtype.kind == "b" and array.ndim == 1):
        return OutputKind.CATEGORICAL, 0  # scalar booleans: two categories
    if array.ndim == 1 or (array.ndim == 2 and array.shape[1] == 1):
        return (OutputKind.INTEGER if array.dtype.kind in "iub" else OutputKind.REAL), 1
    if array.ndim == 2:
        return OutputKind.VECTOR, int(array.shape[1])
    return OutputKind.VECTOR, int(np.prod(array.shape[1:]))
