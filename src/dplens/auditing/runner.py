"""Seeded, chunked execution of audit trials: in-process, a local process pool, or a Dask cluster.

Trials are split into a fixed plan of chunks that depends only on the number of trials and the chunk size —
never on the backend or the number of workers. Chunk i draws from its own ``SeedSequence(seed,
spawn_key=(1, i))`` (``numpy.random.SeedSequence`` spawning), and returns integer counts, so the merged result
is bit-identical whatever the backend, the worker count or the completion order.

Faults (a run of 10⁹ trials takes hours and gets interrupted):

- **Checkpoint.** An optional append-only file: a header line binding it to the audit (the caller's fingerprint,
  the seed, the plan, the dplens and numpy versions) and one JSON line per finished chunk, flushed and fsynced.
  A killed run loses at most the chunks in flight; a torn last line (a kill during the write) is ignored on
  resume; a checkpoint of another audit is refused before anything is written. A resumed run recomputes only
  the missing chunks and never counts a chunk twice, so it returns exactly what an uninterrupted run returns.
- **Signals.** While chunks run (in the main thread), a first SIGINT or SIGTERM stops taking new chunks, lets
  the running ones finish into the checkpoint and raises :class:`Interrupted`; a second one stops at once.
- **Orphans.** Pool workers die with their parent whatever kills it (``kill -9`` included): a parent-death
  signal on Linux (``prctl(PR_SET_PDEATHSIG)``) and, everywhere, a watchdog thread that exits when the worker's
  parent process changes. Workers ignore SIGINT and SIGTERM: the parent decides what they mean.
- **Progress.** A tqdm bar (trials, trials/s, ETA) and progress events for :func:`observe` (``--log-json``).

Start method of the local pool (:func:`choose_start_method`, recorded in every result's ``backend``): fork where it
is safe and faster; forkserver (or spawn) once a GPU build of torch, JAX or TensorFlow is loaded, whose threads do
not survive a fork — e.g. an Opacus audit run after a training in the same process on a machine with a GPU.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import hashlib
import json
import math
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
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
    "Interrupted",
    "choose_start_method",
    "chunk_seed",
    "fingerprint",
    "observe",
    "pilot_seed",
    "run_chunks",
]

CHECKPOINT_FORMAT = "dplens-audit-checkpoint"
CHECKPOINT_VERSION = 3  # 3: append-only JSON lines (a header, then one line per finished chunk); 2: one document

#: Seconds to wait for a Dask scheduler: a wrong or dead address must fail fast rather than hang.
DASK_CONNECT_TIMEOUT = 5.0

#: How often a pool worker checks that its parent is alive (the portable half of "die with the parent").
WATCHDOG_INTERVAL = 0.25

#: Most trials per side an audit may ask for (10¹⁵: a year on two cores), and most local worker processes.
MAX_TRIALS = 10**15
MAX_WORKERS = 1024

#: A chunk task: (chunk index, number of trials in it, its SeedSequence) → an integer count array.
ChunkTask = Callable[[int, int, np.random.SeedSequence], np.ndarray]


class Backend(enum.Enum):
    """Where the chunks run."""

    IN_PROCESS = "in-process"
    PROCESS_POOL = "process-pool"
    DASK = "dask"


class Interrupted(KeyboardInterrupt):
    """:func:`run_chunks` was stopped by SIGINT or SIGTERM; every finished chunk is in the checkpoint (if any).

    A ``KeyboardInterrupt``, so code that does not know it still stops; the CLI turns it into one line saying how
    to resume and exit status 128 + the signal number (130 for SIGINT, 143 for SIGTERM).
    """

    def __init__(
        self, signum: int, *, chunks_done: int, chunks: int, checkpoint: Path | None, immediate: bool = False
    ) -> None:
        super().__init__(signum)
        self.signum = int(signum)
        self.chunks_done = chunks_done
        self.chunks = chunks
        self.checkpoint = checkpoint
        self.immediate = immediate

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        return f"interrupted by {self.signal_name} after {self.chunks_done} of {self.chunks} chunks"


class _StopNow(KeyboardInterrupt):
    """A second signal: stop at once (raised from the signal handler, turned into :class:`Interrupted`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    return int(value)


def check_seed(seed: Any) -> int:
    """``seed`` as an int (a root seed of an audit: an integer >= 0, not a bool), else ``ValueError``."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0; got {seed!r}")
    return int(seed)


def check_trials(trials: Any) -> int:
    """``trials`` as an int in [1, :data:`MAX_TRIALS`] (a game checks it before its pilot), else ``ValueError``."""
    trials = _positive_int("trials", trials)
    if trials > MAX_TRIALS:
        raise ValueError(f"trials = {trials} is out of the supported range [1, {MAX_TRIALS:.0e}]")
    return trials


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """``trials`` split into chunks of ``chunk_size`` (the last one may be smaller)."""

    trials: int
    chunk_size: int

    def __post_init__(self) -> None:
        check_trials(self.trials)
        _positive_int("chunk_size", self.chunk_size)

    @property
    def chunks(self) -> int:
        return math.ceil(self.trials / self.chunk_size)

    def size(self, index: int) -> int:
        return min(self.chunk_size, self.trials - index * self.chunk_size)


def chunk_seed(seed: int, index: int) -> np.random.SeedSequence:
    """The seed of chunk ``index`` (spawn key (1, index)): the same for every backend and worker count."""
    return np.random.SeedSequence(seed, spawn_key=(1, index))


def side_rng(seed: np.random.SeedSequence, side: int) -> np.random.Generator:
    """The generator of one side (0: D, 1: D′) of a chunk or pilot seeded by ``seed`` (its spawn key plus ``side``)."""
    return np.random.default_rng(np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, side)))


def pilot_seed(seed: int) -> np.random.SeedSequence:
    """An independent stream (spawn key (0,)) for draws that choose the audit's design before the data."""
    return np.random.SeedSequence(seed, spawn_key=(0,))


def fingerprint(description: Mapping[str, Any]) -> str:
    """A stable hash of everything that determines an audit's counts (a checkpoint must match it)."""
    text = json.dumps(description, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# Progress events
# --------------------------------------------------------------------------------------------

_OBSERVERS: contextvars.ContextVar[tuple[Callable[[dict[str, Any]], None], ...]] = contextvars.ContextVar(
    "dplens_runner_observers", default=()
)


@contextlib.contextmanager
def observe(callback: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """Send the progress events of every :func:`run_chunks` inside the block to ``callback``.

    Events are dicts with an ``"event"`` key: ``start`` (the plan, the chunks resumed from a checkpoint),
    ``chunk`` (after each finished chunk: chunks and trials done, trials per second, ETA in seconds),
    ``interrupted`` (the signal) and ``finished``; each carries ``time`` (Unix seconds). The CLI's ``--log-json``
    writes them as JSON lines.

    >>> events = []
    >>> with observe(events.append):
    ...     _ = run_chunks(lambda i, n, s: np.array([n]), ChunkPlan(10, 5), seed=0)
    >>> [e["event"] for e in events]
    ['start', 'chunk', 'chunk', 'finished']
    """
    token = _OBSERVERS.set((*_OBSERVERS.get(), callback))
    try:
        yield
    finally:
        _OBSERVERS.reset(token)


def _emit(event: dict[str, Any]) -> None:
    observers = _OBSERVERS.get()
    if observers:
        event = {"event": event.pop("event"), "time": round(time.time(), 3), **event}
        for callback in observers:
            callback(dict(event))


# --------------------------------------------------------------------------------------------
# Checkpoints: a header line, then one line per finished chunk
# --------------------------------------------------------------------------------------------


def _checkpoint_header(key: str, plan: ChunkPlan, seed: int, about: Mapping[str, Any] | None) -> dict[str, Any]:
    from dplens._version import __version__

    return {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "fingerprint": key,
        "seed": seed,
        "trials": plan.trials,
        "chunk_size": plan.chunk_size,
        "chunks": plan.chunks,
        "dplens": __version__,
        "numpy": np.__version__,
        "audit": json.loads(json.dumps(dict(about or {}), sort_keys=True, default=repr)),
    }


def _check_header(path: Path, data: Any, expected: dict[str, Any]) -> None:
    name = repr(str(path))
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint {name} is not a dplens audit checkpoint")
    if data.get("version") != CHECKPOINT_VERSION:
        raise ValueError(
            f"checkpoint {name} has unsupported version {data.get('version')!r} (this dplens writes version "
            f"{CHECKPOINT_VERSION}); use a new checkpoint file"
        )
    if data.get("fingerprint") != expected["fingerprint"]:
        raise ValueError(
            f"checkpoint {name} belongs to a different audit (mechanism, trials, seed, grid or strategy "
            "differ); use a new checkpoint file"
        )
    # The key is the caller's; the plan and the seed are the runner's own: chunk i of another plan holds other
    # trials, and of another seed other draws, so mixing them in would give a result no single run produces.
    stored = (data.get("seed"), data.get("trials"), data.get("chunk_size"))
    wanted = (expected["seed"], expected["trials"], expected["chunk_size"])
    if stored != wanted:
        raise ValueError(
            f"checkpoint {name} was written for seed, trials, chunk_size = {stored!r}, not {wanted!r}; "
            "use a new checkpoint file"
        )
    # Another version of dplens or numpy may draw other samples from the same seeds (numpy keeps its bit streams
    # stable, not every distribution): counts of two versions mixed would be no single run's counts.
    versions = (data.get("dplens"), data.get("numpy"))
    if versions != (expected["dplens"], expected["numpy"]):
        raise ValueError(
            f"checkpoint {name} was written by dplens {versions[0]} with numpy {versions[1]}, this is dplens "
            f"{expected['dplens']} with numpy {expected['numpy']}; use a new checkpoint file"
        )


def _chunk_record(path: Path, line: bytes, chunks: int) -> tuple[int, np.ndarray]:
    bad = f"checkpoint {str(path)!r} is corrupt"
    record = json.loads(line)  # JSONDecodeError / UnicodeDecodeError: the caller decides (torn tail or corrupt)
    if not isinstance(record, dict) or set(record) != {"chunk", "counts"}:
        raise ValueError(f"{bad}: a line is not a chunk record")
    index, value = record["chunk"], record["counts"]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < chunks:
        raise ValueError(f"{bad}: chunk index {index!r} is not in the plan's 0..{chunks - 1}")
    try:
        counts = np.asarray(value)
    except (TypeError, ValueError):
        raise ValueError(f"{bad}: chunk {index} does not hold a count array") from None
    if counts.dtype.kind not in "iu" or counts.size == 0 or np.any(counts < 0):
        raise ValueError(f"{bad}: chunk {index} does not hold non-negative integer counts")
    return index, counts.astype(np.int64)


def _read_checkpoint(path: Path, expected: dict[str, Any]) -> tuple[dict[int, np.ndarray], int, int | None]:
    """The chunks stored in ``path``, the byte length of its newline-terminated part, and the chunk of a complete
    last record whose newline is missing (None if there is none). A torn last line is left out."""
    name = repr(str(path))
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ValueError(f"checkpoint {name} cannot be read: {err.strerror or err}") from None
    lines = raw.split(b"\n")  # the last item is the unterminated tail: b"" after a complete last line
    if len(lines) < 2:
        raise ValueError(f"checkpoint {name} is not a dplens audit checkpoint (no header line)")
    try:
        header = json.loads(lines[0])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError(f"checkpoint {name} is not a dplens audit checkpoint (unreadable header)") from None
    _check_header(path, header, expected)
    chunks, intact, unterminated = {}, len(lines[0]) + 1, None
    body = [(line, True) for line in lines[1:-1]] + ([(lines[-1], False)] if lines[-1] else [])
    for number, (line, terminated) in enumerate(body, start=2):
        try:
            index, counts = _chunk_record(path, line, expected["chunks"])
        except (json.JSONDecodeError, UnicodeDecodeError):
            if not terminated:  # torn by a kill during the last write: that chunk simply runs again
                break
            raise ValueError(f"checkpoint {name} is corrupt: line {number} is not JSON") from None
        if index in chunks and not np.array_equal(chunks[index], counts):
            raise ValueError(f"checkpoint {name} is corrupt: chunk {index} is stored twice with different counts")
        chunks[index] = counts
        if terminated:
            intact += len(line) + 1
        else:
            unterminated = index
    shapes = sorted({c.shape for c in chunks.values()})
    if len(shapes) > 1:
        raise ValueError(f"checkpoint {name} is corrupt: its chunks have different shapes {shapes}")
    return chunks, intact, unterminated


def _fsync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform / file system can open a directory
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class _CheckpointWriter:
    """Appends one fsynced line per finished chunk; holds an exclusive lock so two runs never share a file."""

    def __init__(self, path: Path, handle: Any) -> None:
        self.path = path
        self._handle = handle

    @classmethod
    def open(cls, path: Path, header: dict[str, Any]) -> tuple[_CheckpointWriter, dict[int, np.ndarray]]:
        """Resume from ``path`` (validated first: nothing is written to another audit's file) or create it."""
        name = repr(str(path))
        if path.is_dir():
            raise ValueError(f"checkpoint {name} is a directory, not a file")
        if not path.parent.is_dir():
            raise ValueError(f"checkpoint {name}: directory {str(path.parent)!r} does not exist")
        done: dict[int, np.ndarray] = {}
        unterminated = None
        try:
            if path.exists():
                done, intact, unterminated = _read_checkpoint(path, header)
                handle = open(path, "r+b")  # noqa: SIM115 - kept open for the run
            else:
                cls._create(path, header)
                handle, intact = open(path, "r+b"), path.stat().st_size  # noqa: SIM115
        except OSError as err:
            raise ValueError(f"checkpoint {name} cannot be written: {err.strerror or err}") from None
        try:
            cls._lock(handle, path)
            handle.truncate(intact)  # drops a torn last line; complete records stay byte for byte
            handle.seek(intact)
            writer = cls(path, handle)
            if unterminated is not None:  # a whole record whose newline was lost: write it again, terminated
                writer.append(unterminated, done[unterminated])
        except OSError as err:
            handle.close()
            raise ValueError(f"checkpoint {name} cannot be written: {err.strerror or err}") from None
        except BaseException:
            handle.close()
            raise
        return writer, done

    @staticmethod
    def _create(path: Path, header: dict[str, Any]) -> None:
        # Write the header to a temporary file and rename it: the checkpoint exists only with a complete header.
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            with open(temporary, "wb") as handle:
                handle.write(json.dumps(header, sort_keys=True).encode() + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
        _fsync_directory(path.parent)

    @staticmethod
    def _lock(handle: Any, path: Path) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ValueError(f"checkpoint {str(path)!r} is in use by another running audit") from None

    def append(self, index: int, counts: np.ndarray) -> None:
        line = json.dumps({"chunk": int(index), "counts": counts.tolist()}, separators=(",", ":")).encode() + b"\n"
        self._handle.write(line)
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()


# --------------------------------------------------------------------------------------------
# Signals
# --------------------------------------------------------------------------------------------


class _SignalGuard:
    """SIGINT / SIGTERM while chunks run: the first asks to stop taking chunks, the second stops at once.

    Installed only in the main thread and only over the default handlers (or dplens's own, see the CLI): a
    handler the application installed is left alone.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, notice: Callable[[int], None] | None = None) -> None:
        self.signum: int | None = None
        self._notice = notice
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def __enter__(self) -> _SignalGuard:
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in self.SIGNALS:
            current = signal.getsignal(sig)
            if current in (signal.default_int_handler, signal.SIG_DFL) or getattr(current, "dplens_stop", False):
                self._previous[sig] = current
                signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:
            raise _StopNow(signum)
        self.signum = signum
        if self._notice is not None:
            self._notice(signum)

    def __exit__(self, *exc: Any) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------


def _run_in_process(
    task: ChunkTask, plan: ChunkPlan, todo: list[int], seed: int, stop: _SignalGuard
) -> Iterator[tuple[int, np.ndarray]]:
    for index in todo:
        if stop.requested:
            return
        yield index, task(index, plan.size(index), chunk_seed(seed, index))


START_METHOD_VARIABLE = "DPLENS_START_METHOD"


def _fork_hazard() -> str | None:
    """Why forking this process is unsafe (threads a forked child cannot inherit), or None.

    - torch built for a GPU (CUDA, ROCm) or with CUDA initialised: its autograd engine starts one thread per visible
      device at the first backward pass, and a forked child then fails ("Unable to handle autograd's threading in
      combination with fork-based multiprocessing"); CUDA itself cannot be used after fork. A CPU-only build starts
      no such threads (CI, and every test here without a GPU).
    - JAX / jaxlib or TensorFlow loaded: their runtimes start thread pools at import; a forked child can deadlock.

    Only loaded modules are inspected (nothing is imported here).
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        version = getattr(torch, "version", None)
        gpu = getattr(version, "cuda", None) or getattr(version, "hip", None)
        cuda = getattr(torch, "cuda", None)
        with contextlib.suppress(Exception):
            if cuda is not None and cuda.is_initialized():
                return "CUDA is initialised in torch (CUDA cannot be used in a forked child)"
        if gpu:
            return f"torch built for GPUs ({gpu}) is loaded: its autograd device threads do not survive fork"
    for name, what in (("jax", "JAX"), ("jaxlib", "JAX"), ("tensorflow", "TensorFlow")):
        if name in sys.modules:
            return f"{what} is loaded: its runtime threads do not survive fork"
    return None


def choose_start_method() -> tuple[str, str]:
    """The start method of the local process pool, and why (recorded in the result's ``backend``).

    fork where it is safe: the workers share the parent's imported modules (numpy, scipy) and start in milliseconds,
    which is what makes a 2-worker pool pay off on runs of a few seconds, and they inherit the task (a lambda score
    needs no pickling). Where it is not (:func:`_fork_hazard`: a GPU build of torch, JAX, TensorFlow), forkserver
    (Linux; each worker forked from a fresh single-threaded server) or spawn: the task is pickled and the workers
    import what it needs. ``DPLENS_START_METHOD`` (fork, forkserver, spawn) overrides the choice. macOS and Windows
    use their default (spawn). The counts are the same bits whatever the method: each chunk draws from its own seed.
    """
    methods = multiprocessing.get_all_start_methods()
    forced = os.environ.get(START_METHOD_VARIABLE, "").strip()
    if forced:
        if forced not in methods:
            raise ValueError(f"{START_METHOD_VARIABLE} must be one of {methods} on this platform; got {forced!r}")
        return forced, f"set by {START_METHOD_VARIABLE}"
    if "fork" not in methods or sys.platform == "darwin":
        return multiprocessing.get_context().get_start_method(), "the platform's default"
    hazard = _fork_hazard()
    if hazard is None:
        return "fork", "no GPU runtime or threaded framework is loaded"
    return ("forkserver" if "forkserver" in methods else "spawn"), hazard


def _pool_context() -> multiprocessing.context.BaseContext:
    method, _ = choose_start_method()
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(["dplens.auditing.runner"])  # numpy once in the server, not in every worker
    return context


_INHERITED_TASK: ChunkTask | None = None
_PR_SET_PDEATHSIG = 1
_ARM_PDEATHSIG = True  # False leaves only the portable watchdog (the tests check the macOS path on Linux with it)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists (another user's, or not signalable from here)
        return True
    return True


def _die_with_parent(parent: int, *, via_server: bool = False) -> None:
    """Make this worker exit when ``parent`` (the auditing process) does, however it dies.

    Linux: the kernel sends SIGKILL when the worker's parent thread exits (``prctl(PR_SET_PDEATHSIG)``), at once.
    Everywhere (macOS too): a daemon thread checks every :data:`WATCHDOG_INTERVAL` seconds that ``os.getppid()`` has
    not changed (it does when the parent dies and the worker is re-parented) and that ``parent`` is alive, and exits
    the process otherwise. Under forkserver (``via_server``) the worker's parent is the fork server, which exits when
    the auditing process does; the liveness check of ``parent`` covers the auditing process itself.
    """
    if _ARM_PDEATHSIG and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    first = os.getppid()
    if (not via_server and first != parent) or not _alive(parent):  # the parent died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(WATCHDOG_INTERVAL)
            if os.getppid() != first or not _alive(parent):
                os._exit(1)

    threading.Thread(target=watch, name="dplens-parent-watchdog", daemon=True).start()


def _worker_init(parent: int, task: ChunkTask | None, method: str = "fork", path: list[str] | None = None) -> None:
    # The parent decides what a Ctrl-C (sent to the whole foreground process group) or a SIGTERM means.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if path is not None:  # a fork server keeps the import path it started with: use the auditing process's own
        sys.path[:] = path
    _die_with_parent(parent, via_server=method == "forkserver")
    global _INHERITED_TASK
    _INHERITED_TASK = task


def _run_inherited(index: int, trials: int, seed: np.random.SeedSequence) -> np.ndarray:
    assert _INHERITED_TASK is not None
    return _INHERITED_TASK(index, trials, seed)


def pickling_error(value: Any) -> str | None:
    """Why ``value`` cannot be sent to a worker process that is not forked ("TypeName: message"), or None."""
    try:
        pickle.dumps(value)
    except Exception as err:  # PicklingError, AttributeError ("Can't pickle local object"), TypeError
        return f"{type(err).__name__}: {err}"
    return None


def _check_picklable(task: ChunkTask) -> None:
    why = pickling_error(task)
    if why is not None:
        raise ValueError(
            f"workers > 1: the audit's code cannot be sent to worker processes on this platform ({why}); define "
            "score and target functions at module level (not as a lambda or closure), or use workers=1"
        )


def _stop_pool(pool: futures.ProcessPoolExecutor, *, kill: bool) -> None:
    if not kill:
        pool.shutdown(wait=True)
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:  # chunks in flight are abandoned: the workers ignore SIGTERM, so SIGKILL them
        with contextlib.suppress(Exception):
            process.kill()
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(5)


def _run_pool(
    task: ChunkTask, plan: ChunkPlan, todo: list[int], seed: int, workers: int, stop: _SignalGuard
) -> Iterator[tuple[int, np.ndarray]]:
    context = _pool_context()
    method = context.get_start_method()
    # Under fork the workers inherit the task (nothing is pickled: a lambda score works); elsewhere it is pickled,
    # so say clearly what cannot be, before any worker starts.
    inherited = method == "fork"
    if not inherited:
        _check_picklable(task)
    pool = futures.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_worker_init,
        initargs=(os.getpid(), task if inherited else None, method, None if inherited else list(sys.path)),
    )
    function = _run_inherited if inherited else task
    waiting = iter(todo)
    running: dict[futures.Future, int] = {}

    def top_up() -> None:
        # One chunk per worker and no queue: a stop request leaves only the running chunks to wait for (a chunk in
        # the pool's call queue counts as running and could not be cancelled).
        while not stop.requested and len(running) < workers:
            index = next(waiting, None)
            if index is None:
                return
            running[pool.submit(function, index, plan.size(index), chunk_seed(seed, index))] = index

    finished = False
    try:
        top_up()
        while running:
            done, _ = futures.wait(running, return_when=futures.FIRST_COMPLETED)
            results = [(running.pop(future), future) for future in sorted(done, key=running.__getitem__)]
            top_up()  # before the results are recorded, so no worker idles while the checkpoint is written
            for index, future in results:
                yield index, future.result()
        finished = True
    finally:
        _stop_pool(pool, kill=not finished)


def _run_dask(
    task: ChunkTask, plan: ChunkPlan, todo: list[int], seed: int, scheduler: Any, stop: _SignalGuard
) -> Iterator[tuple[int, np.ndarray]]:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise ValueError("scheduler needs the [distributed] extra: pip install 'dplens[distributed]'") from None
    import gc

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
    pending: dict[Any, int] = {}
    try:
        # Keys unique to this run: the scheduler (and a shared Client) return the existing result for a key it
        # already holds, so keys built from the seed alone would hand one audit another audit's counts.
        run = uuid.uuid4().hex
        pending = {
            client.submit(task, i, plan.size(i), chunk_seed(seed, i), pure=False, key=f"dplens-chunk-{run}-{i}"): i
            for i in todo
        }
        # A worker lost mid-chunk is the scheduler's business: it reruns the chunk elsewhere from the same seed.
        for future in as_completed(list(pending)):
            index = pending.pop(future)
            yield index, future.result()
            if stop.requested:
                break
        if stop.requested:  # keep what already finished, drop the rest
            for future, index in list(pending.items()):
                if future.status == "finished":
                    del pending[future]
                    yield index, future.result()
    finally:
        if pending:
            with contextlib.suppress(Exception):
                client.cancel(list(pending))
        if own:
            client.close()


def _stop_notice(progress: bool, running: Callable[[], str]) -> Callable[[int], None]:
    def notice(signum: int) -> None:
        if progress:
            name = signal.Signals(signum).name
            print(
                f"\ndplens: {name}: finishing {running()}, then stopping (send it again to stop at once)",
                file=sys.stderr,
                flush=True,
            )

    return notice


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
    about: Mapping[str, Any] | None = None,
) -> dict[int, np.ndarray]:
    """Run every chunk of ``plan`` and return {chunk index: counts}.

    Args:
        task: a chunk task. For the pool it must be picklable where workers are spawned rather than forked (macOS,
            Windows); for Dask, picklable by cloudpickle.
        plan: the chunk plan.
        seed: the root seed (chunk i uses :func:`chunk_seed`).
        workers: > 1 runs a local process pool with that many workers.
        scheduler: a Dask scheduler address (``tcp://host:port``) or a ``distributed.Client``; wins over workers.
        checkpoint: an append-only file of the chunks done so far; resumed from when it exists (its key, plan, seed
            and the dplens/numpy versions must match, else ``ValueError`` and the file is left untouched).
        key: the audit's :func:`fingerprint`, stored in and checked against the checkpoint.
        progress: show a tqdm progress bar on stderr (trials, trials/s, ETA).
        description: the progress bar's label and the events' ``description``.
        about: a JSON-ready description of the audit stored in the checkpoint's header, for people reading it.

    Raises:
        Interrupted: SIGINT or SIGTERM arrived (see the module docstring); the checkpoint holds every finished chunk.

    >>> done = run_chunks(lambda i, n, s: np.array([i, n]), ChunkPlan(10, 4), seed=0)
    >>> [done[i].tolist() for i in sorted(done)]
    [[0, 4], [1, 4], [2, 2]]
    """
    workers = _positive_int("workers", workers)
    if workers > MAX_WORKERS:
        raise ValueError(f"workers = {workers} is out of the supported range [1, {MAX_WORKERS}]")
    seed = check_seed(seed)
    path = Path(checkpoint) if checkpoint is not None else None
    writer, done = None, {}
    if path is not None:
        writer, done = _CheckpointWriter.open(path, _checkpoint_header(key, plan, seed, about))
    try:
        return _run(task, plan, seed, workers, scheduler, path, writer, done, progress, description)
    finally:
        if writer is not None:
            writer.close()


class _Progress:
    """The progress bar and the progress events of a run: one ``chunk`` event per finished chunk, with its rate."""

    def __init__(self, plan: ChunkPlan, *, resumed_trials: int, progress: bool, description: str) -> None:
        from tqdm import tqdm

        self.plan, self.resumed_trials = plan, resumed_trials
        self.bar = tqdm(
            total=plan.trials,
            initial=resumed_trials,
            desc=description,
            unit=" trials",
            unit_scale=True,
            disable=not progress,
            file=sys.stderr,
            leave=False,
            smoothing=0.1,
        )
        self.start, self.counted = time.monotonic(), 0

    def chunk(self, index: int, chunks_done: int) -> None:
        plan = self.plan
        self.counted += plan.size(index)
        self.bar.set_postfix_str(f"chunk {chunks_done}/{plan.chunks}", refresh=False)
        self.bar.update(plan.size(index))
        elapsed = time.monotonic() - self.start
        rate = self.counted / elapsed if elapsed > 0 else None
        remaining = plan.trials - self.resumed_trials - self.counted
        _emit(
            {
                "event": "chunk",
                "index": index,
                "chunks_done": chunks_done,
                "chunks": plan.chunks,
                "trials_done": self.resumed_trials + self.counted,
                "trials": plan.trials,
                "elapsed_seconds": round(elapsed, 3),
                "trials_per_second": round(rate, 1) if rate else None,
                "eta_seconds": round(remaining / rate, 1) if rate else None,
            }
        )

    def finished(self) -> None:
        elapsed = time.monotonic() - self.start
        _emit(
            {
                "event": "finished",
                "chunks": self.plan.chunks,
                "trials": self.plan.trials,
                "elapsed_seconds": round(elapsed, 3),
                "trials_per_second": round(self.counted / elapsed, 1) if self.counted and elapsed > 0 else None,
            }
        )


def _stream(task: ChunkTask, plan: ChunkPlan, todo: list[int], seed: int, *, scheduler: Any, parallel: int, guard):
    """The finished chunks as (index, counts), from the backend the run asks for."""
    if scheduler is not None:
        return _run_dask(task, plan, todo, seed, scheduler, guard)
    if parallel > 1:
        return _run_pool(task, plan, todo, seed, parallel, guard)
    return _run_in_process(task, plan, todo, seed, guard)


def _run(
    task: ChunkTask,
    plan: ChunkPlan,
    seed: int,
    workers: int,
    scheduler: Any,
    path: Path | None,
    writer: _CheckpointWriter | None,
    done: dict[int, np.ndarray],
    progress: bool,
    description: str,
) -> dict[int, np.ndarray]:
    loaded_shape = next(iter(done.values())).shape if done else None
    todo = [i for i in range(plan.chunks) if i not in done]
    resumed_trials = sum(plan.size(i) for i in done)
    parallel = workers if scheduler is None and workers > 1 and len(todo) > 1 else 1
    guard = _SignalGuard(_stop_notice(progress, lambda: "the running chunks" if parallel > 1 else "this chunk"))
    shown = _Progress(plan, resumed_trials=resumed_trials, progress=progress, description=description)
    _emit(
        {
            "event": "start",
            "description": description,
            "trials": plan.trials,
            "chunks": plan.chunks,
            "chunk_size": plan.chunk_size,
            "resumed_chunks": len(done),
            "resumed_trials": resumed_trials,
            "backend": backend_name(workers=workers, scheduler=scheduler),
            "seed": seed,
            "checkpoint": str(path) if path is not None else None,
        }
    )
    stream: Iterator[tuple[int, np.ndarray]] | None = None
    try:
        with guard:
            stream = _stream(task, plan, todo, seed, scheduler=scheduler, parallel=parallel, guard=guard)
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
                if writer is not None:
                    writer.append(index, counts)
                shown.chunk(index, len(done))
    except _StopNow as stop:
        raise _interrupted(stop.signum, plan, done, path, immediate=True) from None
    finally:
        if stream is not None:
            stream.close()  # a pool stopped early kills its workers here
        shown.bar.close()
    if len(done) < plan.chunks:
        assert guard.signum is not None  # the streams end early only when asked to stop
        raise _interrupted(guard.signum, plan, done, path, immediate=False)
    shown.finished()
    return done


def _interrupted(
    signum: int, plan: ChunkPlan, done: Mapping[int, np.ndarray], path: Path | None, *, immediate: bool
) -> Interrupted:
    _emit(
        {
            "event": "interrupted",
            "signal": signal.Signals(signum).name,
            "chunks_done": len(done),
            "chunks": plan.chunks,
            "trials_done": sum(plan.size(i) for i in done),
            "trials": plan.trials,
            "checkpoint": str(path) if path is not None else None,
        }
    )
    return Interrupted(signum, chunks_done=len(done), chunks=plan.chunks, checkpoint=path, immediate=immediate)


def backend_name(*, workers: int, scheduler: Any) -> str:
    """A description of the backend for results and reports (a process pool names its start method and why:
    :func:`choose_start_method`)."""
    if scheduler is not None:
        return f"{Backend.DASK.value} ({scheduler if isinstance(scheduler, str) else 'client'})"
    if workers > 1:
        method, why = choose_start_method()
        return f"{Backend.PROCESS_POOL.value} ({workers} workers, start method {method}: {why})"
    return Backend.IN_PROCESS.value
