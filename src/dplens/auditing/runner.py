"""Seeded, chunked execution of audit trials: in-process, a local process pool, or a Dask cluster.

Trials are split into a fixed plan of chunks that depends only on the number of trials and the chunk size —
never on the backend or the number of workers. Chunk i draws from its own ``SeedSequence(seed,
spawn_key=(1, i))`` (``numpy.random.SeedSequence`` spawning), and returns integer counts, so the merged result
is bit-identical whatever the backend, the worker count or the completion order. After each chunk the counts
done so far are written atomically to an optional checkpoint, keyed by chunk index: a killed run resumed from
it recomputes only the missing chunks and never counts a chunk twice.
"""

from __future__ import annotations

import enum
import gc
import hashlib
import json
import math
import multiprocessing
import os
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Backend",
    "ChunkPlan",
    "chunk_seed",
    "fingerprint",
    "pilot_seed",
    "run_chunks",
]

CHECKPOINT_FORMAT = "dplens-audit-checkpoint"
CHECKPOINT_VERSION = 2  # 2: the plan and the root seed are stored and checked

#: Seconds to wait for a Dask scheduler: a wrong or dead address must fail fast rather than hang.
DASK_CONNECT_TIMEOUT = 5.0

#: A chunk task: (chunk index, number of trials in it, its SeedSequence) → an integer count array.
ChunkTask = Callable[[int, int, np.random.SeedSequence], np.ndarray]


class Backend(enum.Enum):
    """Where the chunks run."""

    IN_PROCESS = "in-process"
    PROCESS_POOL = "process-pool"
    DASK = "dask"


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    return int(value)


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """``trials`` split into chunks of ``chunk_size`` (the last one may be smaller)."""

    trials: int
    chunk_size: int

    def __post_init__(self) -> None:
        _positive_int("trials", self.trials)
        _positive_int("chunk_size", self.chunk_size)

    @property
    def chunks(self) -> int:
        return math.ceil(self.trials / self.chunk_size)

    def size(self, index: int) -> int:
        return min(self.chunk_size, self.trials - index * self.chunk_size)


def chunk_seed(seed: int, index: int) -> np.random.SeedSequence:
    """The seed of chunk ``index`` (spawn key (1, index)): the same for every backend and worker count."""
    return np.random.SeedSequence(seed, spawn_key=(1, index))


def pilot_seed(seed: int) -> np.random.SeedSequence:
    """An independent stream (spawn key (0,)) for draws that choose the audit's design before the data."""
    return np.random.SeedSequence(seed, spawn_key=(0,))


def fingerprint(description: Mapping[str, Any]) -> str:
    """A stable hash of everything that determines an audit's counts (a checkpoint must match it)."""
    text = json.dumps(description, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------


def _load_checkpoint(path: Path, expected: str, plan: ChunkPlan, seed: int) -> dict[int, np.ndarray]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"checkpoint {str(path)!r} is not a readable dplens checkpoint: {err}") from None
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint {str(path)!r} is not a dplens audit checkpoint")
    if data.get("version") != CHECKPOINT_VERSION:
        raise ValueError(f"checkpoint {str(path)!r} has unsupported version {data.get('version')!r}")
    if data.get("fingerprint") != expected:
        raise ValueError(
            f"checkpoint {str(path)!r} belongs to a different audit (mechanism, trials, seed, grid or strategy "
            "differ); use a new checkpoint file"
        )
    # The key is the caller's; the plan and the seed are the runner's own: chunk i of another plan holds other
    # trials, and of another seed other draws, so mixing them in would give a result no single run produces.
    stored = (data.get("seed"), data.get("trials"), data.get("chunk_size"))
    if stored != (seed, plan.trials, plan.chunk_size):
        raise ValueError(
            f"checkpoint {str(path)!r} was written for seed, trials, chunk_size = {stored!r}, not "
            f"{(seed, plan.trials, plan.chunk_size)!r}; use a new checkpoint file"
        )
    return _checkpoint_chunks(path, data.get("chunks", {}))


def _checkpoint_chunks(path: Path, chunks: Any) -> dict[int, np.ndarray]:
    """The stored chunks: non-negative integer count arrays of one shape under chunk-index keys."""
    bad = f"checkpoint {str(path)!r} is corrupt"
    if not isinstance(chunks, dict):
        raise ValueError(f"{bad}: 'chunks' must be an object; got {type(chunks).__name__}")
    out: dict[int, np.ndarray] = {}
    for name, value in chunks.items():
        try:
            index = int(name)
            counts = np.asarray(value)
        except (TypeError, ValueError):
            raise ValueError(f"{bad}: chunk {name!r} is not an index with a count array") from None
        if counts.dtype.kind not in "iu" or counts.size == 0 or np.any(counts < 0):
            raise ValueError(f"{bad}: chunk {name!r} does not hold non-negative integer counts")
        out[index] = counts.astype(np.int64)
    if len({c.shape for c in out.values()}) > 1:
        raise ValueError(f"{bad}: its chunks have different shapes {sorted({c.shape for c in out.values()})}")
    return out


def _write_checkpoint(path: Path, key: str, plan: ChunkPlan, seed: int, done: Mapping[int, np.ndarray]) -> None:
    document = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "fingerprint": key,
        "seed": seed,
        "trials": plan.trials,
        "chunk_size": plan.chunk_size,
        "chunks": {str(i): done[i].tolist() for i in sorted(done)},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------


def _run_in_process(task: ChunkTask, plan: ChunkPlan, todo: list[int], seed: int) -> Iterator[tuple[int, np.ndarray]]:
    for index in todo:
        yield index, task(index, plan.size(index), chunk_seed(seed, index))


def _pool_context() -> multiprocessing.context.BaseContext:
    # fork shares the parent's imported modules (numpy, scipy): a worker starts in milliseconds, which is what
    # makes a 2-worker pool pay off on runs of a few seconds. Elsewhere fall back to the platform default.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods and sys.platform != "darwin" else None)


def _run_pool(
    task: ChunkTask, plan: ChunkPlan, todo: list[int], seed: int, workers: int
) -> Iterator[tuple[int, np.ndarray]]:
    with futures.ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as pool:
        pending = {pool.submit(task, i, plan.size(i), chunk_seed(seed, i)): i for i in todo}
        try:
            for future in futures.as_completed(pending):
                yield pending[future], future.result()
        finally:
            for future in pending:
                future.cancel()


def _run_dask(
    task: ChunkTask, plan: ChunkPlan, todo: list[int], seed: int, scheduler: Any
) -> Iterator[tuple[int, np.ndarray]]:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise ValueError("scheduler needs the [distributed] extra: pip install 'dplens[distributed]'") from None
    own = not isinstance(scheduler, Client)
    client, failure = scheduler, None
    if own:
        try:
            client = Client(scheduler, timeout=DASK_CONNECT_TIMEOUT)
        except (OSError, ValueError, TypeError) as err:  # unreachable, malformed ('no port'), or not an address
            failure = str(err)
    if failure is not None:
        # A Client whose start failed is left half-built in a reference cycle (kept alive by the error's traceback
        # until here). Finalised later by the cyclic GC while another Client is starting, its close() waits for
        # distributed's global loop lock that the start holds: the process hangs for good. Finalise it now, while
        # no such lock is held (and raise without chaining the traceback that holds it).
        gc.collect()
        raise ValueError(f"scheduler: cannot connect to the Dask scheduler {scheduler!r}: {failure}")
    try:
        # Keys unique to this run: the scheduler (and a shared Client) return the existing result for a key it
        # already holds, so keys built from the seed alone would hand one audit another audit's counts.
        run = uuid.uuid4().hex
        pending = {
            client.submit(task, i, plan.size(i), chunk_seed(seed, i), pure=False, key=f"dplens-chunk-{run}-{i}"): i
            for i in todo
        }
        for future in as_completed(list(pending)):
            yield pending[future], future.result()
    finally:
        if own:
            client.close()


def run_chunks(
    task: ChunkTask,
    plan: ChunkPlan,
    *,
    seed: int,
    workers: int = 1,
    scheduler: Any = None,
    checkpoint: str | Path | None = None,
    key: str = "",
    progress: bool = False,
    description: str = "audit",
) -> dict[int, np.ndarray]:
    """Run every chunk of ``plan`` and return {chunk index: counts}.

    Args:
        task: a picklable chunk task (module-level callable or frozen dataclass) for the pool and Dask.
        plan: the chunk plan.
        seed: the root seed (chunk i uses :func:`chunk_seed`).
        workers: > 1 runs a local process pool with that many workers.
        scheduler: a Dask scheduler address (``tcp://host:port``) or a ``distributed.Client``; wins over workers.
        checkpoint: a file holding the chunks done so far; resumed from when it exists (its key, plan and seed
            must match).
        key: the audit's :func:`fingerprint`, stored in and checked against the checkpoint.
        progress: show a tqdm progress bar on stderr.
    """
    workers = _positive_int("workers", workers)
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0; got {seed!r}")
    path = Path(checkpoint) if checkpoint is not None else None
    done: dict[int, np.ndarray] = {}
    if path is not None and path.exists():
        done = {i: c for i, c in _load_checkpoint(path, key, plan, int(seed)).items() if 0 <= i < plan.chunks}
    loaded_shape = next(iter(done.values())).shape if done else None
    todo = [i for i in range(plan.chunks) if i not in done]
    if scheduler is not None:
        stream = _run_dask(task, plan, todo, int(seed), scheduler)
    elif workers > 1 and len(todo) > 1:
        stream = _run_pool(task, plan, todo, int(seed), workers)
    else:
        stream = _run_in_process(task, plan, todo, int(seed))
    from tqdm import tqdm

    bar = tqdm(
        total=plan.chunks,
        initial=len(done),
        desc=description,
        unit="chunk",
        disable=not progress,
        file=sys.stderr,
        leave=False,
    )
    try:
        for index, counts in stream:
            if index in done:  # cannot happen with the plan above; guards against a double count regardless
                continue
            counts = np.asarray(counts, dtype=np.int64)
            if loaded_shape is not None and counts.shape != loaded_shape:
                raise ValueError(
                    f"checkpoint {str(path)!r} holds counts of shape {loaded_shape}, but chunk {index} returned "
                    f"{counts.shape}: it was not written by this audit"
                )
            done[index] = counts
            if path is not None:
                _write_checkpoint(path, key, plan, int(seed), done)
            bar.update(1)
    finally:
        bar.close()
    return done


def backend_name(*, workers: int, scheduler: Any) -> str:
    """A description of the backend for results and reports."""
    if scheduler is not None:
        return f"{Backend.DASK.value} ({scheduler if isinstance(scheduler, str) else 'client'})"
    if workers > 1:
        return f"{Backend.PROCESS_POOL.value} ({workers} workers)"
    return Backend.IN_PROCESS.value
