"""The memory plan of a target audit: what each stage holds, against a budget the user can set.

A target audit holds three things whose size depends on the outputs (everything else — counts, tables, fitted
scores — is small and fixed):

- **batches** of outputs in flight: the counted and the selection trials are drawn in batches and reduced to bin
  counts at once, so a batch is all they hold (one per worker process);
- **the fitting half of the pilot**: outputs of at most :data:`MAX_WHOLE_COORDINATES` coordinates are held whole
  while the scores are fitted (at most 200 000 draws per side, fewer when the budget says so);
- **per-coordinate statistics** of wider outputs: those are never held whole but reduced as they arrive
  (:mod:`.reduction`): the screening half of the pilot keeps sums per coordinate, and the scores are fitted on the
  chosen coordinates and a projection only.

:func:`plan_memory` sizes each against the budget (:class:`MemoryBudget`; default :data:`DEFAULT_SHARE` of the
memory available when the audit starts) from the size of one output, measured on the reproducibility check's
draws, before the pilot. The plan never changes what an audit computes while it fits the budget (batches follow a
fixed byte size, :data:`BATCH_BYTES`, or :data:`WIDE_BATCH_BYTES` for wide outputs, not the budget); when the budget
binds, a note says what it cut (smaller batches, a smaller fitting half), and when nothing can run within it,
:class:`MemoryBudgetError` says so before
any pilot is drawn, with the numbers and what to do.

The byte counts are estimates with pessimistic factors (a target's own temporaries are not visible to dplens);
``benchmarks/bench_target_memory.py`` measures peak resident memory against them.
"""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dplens.auditing.stages.chunks import batch_size
from dplens.auditing.stages.pilot import classify
from dplens.auditing.stages.setting import AuditSetting
from dplens.auditing.targets import Target, TargetPair

__all__ = [
    "BATCH_BYTES",
    "DEFAULT_SHARE",
    "MAX_WHOLE_COORDINATES",
    "MemoryBudget",
    "MemoryBudgetError",
    "MemoryPlan",
    "OutputSize",
    "available_memory",
    "format_bytes",
    "parse_memory_size",
    "plan_audit",
    "plan_memory",
]

DEFAULT_SHARE = 0.25  # of the memory available at the start of the audit
FALLBACK_BYTES = 2 * 2**30  # the default budget where the available memory cannot be read
MIN_BUDGET = 16 * 2**20  # a smaller budget is refused as a value error
BATCH_BYTES = 256 * 2**20  # a streamed batch's working memory (outputs, the target's temporaries, our copies)
# Wide outputs are reduced batch by batch: smaller batches keep their peak flat from the smallest audits on (a batch of
# held outputs is at most 16 384 draws of 128 coordinates, well under BATCH_BYTES, so theirs never change).
WIDE_BATCH_BYTES = 64 * 2**20
MAX_WHOLE_COORDINATES = 128  # wider outputs are reduced as they arrive (screened coordinates and a projection)
MIN_FIT_ROWS = 200  # the fewest fitting draws per side a score may be fitted on
# Pessimistic factors: a streamed output is held by the target (and its temporaries) and converted to float64, hashed
# and reduced by the scores; a held fitting draw is kept as returned, converted, pooled and hashed by the profile.
_STREAM_OUTPUT_COPIES = 2
_STREAM_NUMERIC_COPIES = 4
_FIT_NUMERIC_COPIES = 7
_SCREEN_ARRAYS = 16  # per-coordinate float64 arrays of the screening statistics (both sides and temporaries)
_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


class MemoryBudgetError(ValueError):
    """Nothing the audit could run fits the memory budget (the message has the numbers and what to do)."""


def format_bytes(value: float) -> str:
    """A byte count for people: ``"1.5 GiB"``.

    Example:
        >>> format_bytes(3 * 2**29), format_bytes(512)
        ('1.5 GiB', '512 B')
    """
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return f"{int(value)} B"


def parse_memory_size(value: Any) -> int:
    """Bytes from an int or a size such as ``"512M"``, ``"2G"``, ``"1.5GiB"`` (binary units: K = 1024).

    Example:
        >>> parse_memory_size("1.5G"), parse_memory_size("512MiB"), parse_memory_size(10**9)
        (1610612736, 536870912, 1000000000)
    """
    if isinstance(value, bool):
        raise ValueError(f"memory_budget must be a number of bytes or a size like '2G'; got {value!r}")
    if isinstance(value, int | np.integer):
        number = int(value)
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]?)(?:i?b)?\s*", str(value), re.IGNORECASE)
        if match is None:
            raise ValueError(f"memory_budget must be a number of bytes or a size like '2G'; got {value!r}")
        number = math.floor(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if number < MIN_BUDGET:
        raise ValueError(f"memory_budget must be at least {format_bytes(MIN_BUDGET)}; got {value!r}")
    return number


def _cgroup_room() -> int | None:
    """The memory left under this process's cgroup limit (v2 or v1), or None when there is none."""
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            limit_text = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit_text == "max" or int(limit_text) >= 2**60:
            return None
        return max(int(limit_text) - usage, 0)
    return None


def available_memory() -> int | None:
    """The memory this process may still use: the kernel's ``MemAvailable`` (Linux), within its cgroup's limit;
    ``None`` where it cannot be read.

    Example:
        >>> value = available_memory()
        >>> value is None or value > 0
        True
    """
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        available = None
    if available is None and hasattr(os, "sysconf"):
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            available = None
    room = _cgroup_room()
    if room is not None:
        available = room if available is None else min(available, room)
    return available


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    """The bytes a target audit may hold beyond the interpreter and its libraries, and where the number came from.

    Example:
        >>> MemoryBudget.resolve("1G").describe()
        '1 GiB (given)'
    """

    bytes: int
    source: str

    @classmethod
    def resolve(cls, value: Any = None) -> MemoryBudget:
        """The given budget (bytes or a size like ``"2G"``), else :data:`DEFAULT_SHARE` of the available memory."""
        if value is not None:
            return cls(parse_memory_size(value), "given")
        available = available_memory()
        if available is None:
            return cls(FALLBACK_BYTES, "default: the available memory could not be read")
        budget = max(int(DEFAULT_SHARE * available), MIN_BUDGET)
        return cls(budget, f"default: {DEFAULT_SHARE:.0%} of the {format_bytes(available)} available")

    def describe(self) -> str:
        """The budget and its source in words."""
        return f"{format_bytes(self.bytes)} ({self.source})"


def _row_bytes(sample: Any) -> int:
    """Bytes of one output as the target returns it (arrays by their buffers; Python objects by their size)."""
    n = max(len(sample), 1)
    if isinstance(sample, np.ndarray):
        return max(int(sample.nbytes // n), 1) if sample.dtype.kind != "O" else 64 * max(sample.size // n, 1)
    total = 0
    for output in sample:
        if isinstance(output, np.ndarray):
            total += output.nbytes + 112
        elif isinstance(output, list | tuple):
            total += sys.getsizeof(output) + 32 * len(output)
        else:
            total += sys.getsizeof(output)
    return max(total // n, 1)


@dataclass(frozen=True, slots=True)
class OutputSize:
    """The size of one output: its numeric coordinates and its bytes as returned (measured on a sample).

    Example:
        >>> import numpy as np
        >>> OutputSize.measure((np.zeros((8, 1000)), np.zeros((8, 1000))), dimension=1000).row_bytes
        8000
    """

    dimension: int
    row_bytes: int

    @classmethod
    def measure(cls, sample: tuple[Any, Any], *, dimension: int) -> OutputSize:
        """From a few outputs of each side (the larger side counts)."""
        return cls(dimension=max(int(dimension), 0), row_bytes=max(_row_bytes(side) for side in sample))

    @property
    def numeric_bytes(self) -> int:
        """Bytes of one output as float64 numbers."""
        return 8 * max(self.dimension, 1)

    @property
    def stream_bytes(self) -> int:
        """The working memory of one streamed output (see the module docstring)."""
        return _STREAM_OUTPUT_COPIES * self.row_bytes + _STREAM_NUMERIC_COPIES * self.numeric_bytes

    @property
    def fit_bytes(self) -> int:
        """The memory of one held fitting draw (one side) while the profile and the scores read it."""
        return self.row_bytes + _FIT_NUMERIC_COPIES * self.numeric_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPlan:
    """How the audit holds its outputs within the budget (:func:`plan_memory`).

    Example:
        >>> plan = plan_memory(MemoryBudget.resolve("1G"), OutputSize(dimension=10, row_bytes=80), kind="vector",
        ...                    default_batch=16_384, workers=1)
        >>> plan.batch_rows, plan.reduced, plan.max_fit_rows > 200_000
        (16384, False, True)
    """

    budget: MemoryBudget
    size: OutputSize
    batch_rows: int  # outputs per draw in every streamed stage
    reduced: bool  # wide outputs: reduced as they arrive (screened coordinates and a projection)
    max_fit_rows: int  # the most fitting draws per side the budget lets the audit hold whole
    screening: bool = True  # reduced outputs: the per-coordinate screening statistics fit the budget
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the result's ``memory``)."""
        return {
            "budget_bytes": self.budget.bytes,
            "budget_source": self.budget.source,
            "output_bytes": self.size.row_bytes,
            "coordinates": self.size.dimension,
            "batch_rows": self.batch_rows,
            "reduced": self.reduced,
            "screening": self.screening,
            "notes": list(self.notes),
        }

    def fits(self, extra: float, *, held_rows: int) -> bool:
        """Whether ``extra`` bytes fit beside what the audit already holds: ``held_rows`` fitting draws per side
        (whole outputs; reduced ones are small) and one batch per worker."""
        held = 0 if self.reduced else 2 * held_rows * self.size.fit_bytes
        return held + self.batch_rows * self.size.stream_bytes + extra <= self.budget.bytes


def _nothing_fits(size: OutputSize, budget: MemoryBudget, *, need: float, what: str, trials: int) -> None:
    raise MemoryBudgetError(
        f"no score fits the memory budget: the outputs have {size.dimension} coordinates "
        f"({format_bytes(size.row_bytes)} a draw, {trials} trials per side) and {what} needs {format_bytes(need)}, "
        f"over the budget of {budget.describe()}; raise it (memory_budget=, --memory-budget), audit fewer "
        "coordinates, or pass a score that reduces each output to one number (scores='module:name', --score)"
    )


def plan_memory(
    budget: MemoryBudget,
    size: OutputSize,
    *,
    kind: str,
    default_batch: int,
    workers: int,
    trials: int = 0,
    user_score: bool = False,
) -> MemoryPlan:
    """Size the batches, the fitting half and the reduction of wide outputs against ``budget`` (module docstring).
    Raises :class:`MemoryBudgetError` when not even one output per worker, or no score, fits."""
    notes: list[str] = []
    wide = kind == "vector" and size.dimension > MAX_WHOLE_COORDINATES
    batch_rows = max(1, min(default_batch, (WIDE_BATCH_BYTES if wide else BATCH_BYTES) // size.stream_bytes))
    streams = max(int(workers), 1)
    if streams * batch_rows * size.stream_bytes > budget.bytes // 2:
        batch_rows = int(budget.bytes // 2 // (streams * size.stream_bytes))
        if batch_rows < 1:
            _nothing_fits(size, budget, need=2 * streams * size.stream_bytes, what="one draw per worker", trials=trials)
        notes.append(f"the memory budget cut the batches to {batch_rows} draws")
    stream = streams * batch_rows * size.stream_bytes
    if wide:
        need = _SCREEN_ARRAYS * size.numeric_bytes + stream
        if need > budget.bytes and not user_score:
            _nothing_fits(size, budget, need=need, what="screening the coordinates", trials=trials)
        if need > budget.bytes:
            notes.append("the memory budget leaves no room to screen the coordinates: only the user scores run")
        return MemoryPlan(
            budget=budget, size=size, batch_rows=batch_rows, reduced=True, max_fit_rows=2**62,
            screening=need <= budget.bytes, notes=tuple(notes),
        )  # fmt: skip
    rows = int((budget.bytes - stream) // (2 * size.fit_bytes))
    if rows < MIN_FIT_ROWS:
        need = stream + 2 * MIN_FIT_ROWS * size.fit_bytes
        _nothing_fits(size, budget, need=need, what="fitting the scores", trials=trials)
    return MemoryPlan(
        budget=budget, size=size, batch_rows=batch_rows, reduced=False, max_fit_rows=rows, notes=tuple(notes)
    )


def _sample(target: Target, pair: TargetPair, sample: tuple[Any, Any] | None, seed: int) -> tuple[Any, Any]:
    """A few outputs of each side: ``sample`` when given, else one draw each (streams (0, 24, side))."""
    if sample is not None:
        return sample
    out = []
    for side, data in enumerate((pair.data, pair.neighbour)):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, 24, side)))
        out.append(target.draw(data, 1, rng, where="sizing the outputs"))
    return out[0], out[1]


def plan_audit(
    target: Target,
    pair: TargetPair,
    setting: AuditSetting,
    budget: MemoryBudget,
    *,
    sample: tuple[Any, Any] | None = None,
    user_score: bool = False,
) -> MemoryPlan:
    """The memory plan of this audit (:func:`plan_memory`), the outputs' size measured on a few draws of each side
    (``sample``: the reproducibility check's, when it drew them)."""
    sample = _sample(target, pair, sample, setting.seed)
    kind, dimension = classify(sample[0])
    if (kind, dimension) != classify(sample[1]):
        kind, dimension = "categorical", 0
    return plan_memory(
        budget,
        OutputSize.measure(sample, dimension=dimension),
        kind=kind,
        default_batch=batch_size(target),
        workers=setting.workers,
        trials=setting.trials,
        user_score=user_score,
    )
