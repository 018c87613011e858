"""The seeded chunk runner: plans and seeds, bit-identical results across backends (in-process, process pool, a Dask
cluster on loopback), checkpoint and resume (including a real SIGKILL), progress output and bad input.

Tests that fork a process pool run before the module's Dask cluster starts (file order), so no pool is forked
from a process with the cluster's threads running.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from dplens.auditing import games, runner
from dplens.mechanisms.additive import GaussianMechanism

BINS = 8


@dataclass(frozen=True)
class DrawTask:
    """A chunk task whose counts identify the chunk: [index, trials, seed fingerprint, histogram of draws]."""

    log: list = field(default_factory=list, compare=False)
    fail_after: int | None = None  # raise once this many chunks have run (a crash part-way)

    def __call__(self, index: int, trials: int, seed: np.random.SeedSequence) -> np.ndarray:
        if self.fail_after is not None and len(self.log) >= self.fail_after:
            raise RuntimeError(f"simulated crash before chunk {index}")
        self.log.append(index)
        rng = np.random.default_rng(seed)
        stamp = int(seed.generate_state(1, np.uint32)[0])
        histogram = np.bincount(rng.integers(0, BINS, size=trials), minlength=BINS)
        return np.concatenate([[index, trials, stamp], histogram]).astype(np.int64)


@dataclass(frozen=True)
class RaiseOn:
    """Fails on one chunk with a ValueError (the error must reach the caller from any backend)."""

    index: int

    def __call__(self, index: int, trials: int, seed: np.random.SeedSequence) -> np.ndarray:
        if index == self.index:
            raise ValueError(f"chunk {index} failed on purpose")
        return np.array([index, trials], dtype=np.int64)


def check_plan_result(result: dict[int, np.ndarray], plan: runner.ChunkPlan) -> None:
    """Every chunk exactly once, with its own index and size, and the trials add up."""
    assert sorted(result) == list(range(plan.chunks))
    for i, counts in result.items():
        assert counts.dtype == np.int64
        assert counts[0] == i and counts[1] == plan.size(i) and counts[3:].sum() == plan.size(i)
    assert sum(int(c[1]) for c in result.values()) == plan.trials


def same(a: dict[int, np.ndarray], b: dict[int, np.ndarray]) -> bool:
    return sorted(a) == sorted(b) and all(a[i].dtype == b[i].dtype and np.array_equal(a[i], b[i]) for i in a)


def audit_dict(result: games.AuditResult) -> dict:
    out = result.to_dict()
    del out["backend"], out["elapsed_seconds"]
    return out


def read_checkpoint(path: Path) -> tuple[dict, dict[int, list]]:
    """The header and the chunk records of an append-only checkpoint, parsed independently of the runner (a torn
    last line, as a kill during a write leaves it, is skipped)."""
    lines = path.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    chunks = {}
    for line in lines[1:-1]:
        record = json.loads(line)
        chunks[record["chunk"]] = record["counts"]
    if lines[-1]:
        try:
            record = json.loads(lines[-1])
            chunks[record["chunk"]] = record["counts"]
        except json.JSONDecodeError:
            pass
    return header, chunks


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PLAN = runner.ChunkPlan(1003, 100)  # 11 chunks, the last of 3 trials
AUDIT = dict(trials=20_000, delta=1e-5, claimed_epsilon=5.0, seed=11, chunk_size=2_500)


# --------------------------------------------------------------------------------------------
# Plans and seeds
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trials", "chunk_size", "sizes"),
    [
        (10, 3, [3, 3, 3, 1]),
        (9, 3, [3, 3, 3]),
        (1, 5, [1]),
        (5, 5, [5]),
        (7, 1, [1] * 7),
        (1003, 100, [100] * 10 + [3]),
    ],
)
def test_chunk_plan_sizes(trials, chunk_size, sizes):
    plan = runner.ChunkPlan(trials, chunk_size)
    assert plan.chunks == len(sizes)
    assert [plan.size(i) for i in range(plan.chunks)] == sizes


def test_chunk_plan_sizes_add_up():
    for trials in range(1, 60):
        for chunk_size in range(1, 25):
            plan = runner.ChunkPlan(trials, chunk_size)
            sizes = [plan.size(i) for i in range(plan.chunks)]
            assert sum(sizes) == trials and min(sizes) >= 1 and max(sizes) <= chunk_size
            assert all(s == chunk_size for s in sizes[:-1])


@pytest.mark.parametrize("name", ["trials", "chunk_size"])
@pytest.mark.parametrize("bad", [0, -3, 2.0, True, "4", None])
def test_chunk_plan_bad_input(name, bad):
    kwargs = {"trials": 10, "chunk_size": 3, name: bad}
    with pytest.raises(ValueError, match=name):
        runner.ChunkPlan(**kwargs)


def test_chunk_seeds():
    # deterministic, one stream per (seed, index), the pilot stream apart from every chunk stream
    states = {(s, i): tuple(runner.chunk_seed(s, i).generate_state(4)) for s in (0, 1, 2**40) for i in range(50)}
    assert len(set(states.values())) == len(states)
    assert tuple(runner.chunk_seed(1, 7).generate_state(4)) == states[(1, 7)]
    assert runner.chunk_seed(5, 3).spawn_key == (1, 3) and runner.chunk_seed(5, 3).entropy == 5
    pilots = {tuple(runner.pilot_seed(s).generate_state(4)) for s in (0, 1, 2**40)}
    assert len(pilots) == 3 and not pilots & set(states.values())


def test_fingerprint():
    a = runner.fingerprint({"mechanism": "g", "trials": 10, "grid": (0.0, 0.1, 5)})
    assert a == runner.fingerprint({"grid": (0.0, 0.1, 5), "trials": 10, "mechanism": "g"})  # key order
    assert a != runner.fingerprint({"mechanism": "g", "trials": 11, "grid": (0.0, 0.1, 5)})
    assert len(a) == 64 and int(a, 16) >= 0


# --------------------------------------------------------------------------------------------
# In-process and process pool (before the Dask cluster starts)
# --------------------------------------------------------------------------------------------


def test_in_process_and_pool_are_bit_identical():
    reference = runner.run_chunks(DrawTask(), PLAN, seed=3)
    check_plan_result(reference, PLAN)
    # the chunk's counts are a function of its own seed only
    for i, counts in reference.items():
        assert counts[2] == runner.chunk_seed(3, i).generate_state(1, np.uint32)[0]
    for workers in (2, 3):
        assert same(runner.run_chunks(DrawTask(), PLAN, seed=3, workers=workers), reference)
    # a one-chunk plan with workers > 1 runs in-process and agrees too
    one = runner.ChunkPlan(50, 100)
    assert same(runner.run_chunks(DrawTask(), one, seed=3, workers=2), runner.run_chunks(DrawTask(), one, seed=3))
    # another seed gives other draws
    assert not same(runner.run_chunks(DrawTask(), PLAN, seed=4), reference)


def test_audit_in_process_and_pool_are_identical():
    mechanism = GaussianMechanism(noise_multiplier=1.0)
    serial = games.audit(mechanism, **AUDIT)
    pooled = games.audit(mechanism, **AUDIT, workers=2)
    assert serial.chunks == 8 and serial.trials == AUDIT["trials"]
    assert audit_dict(pooled) == audit_dict(serial)
    assert serial.backend == "in-process"
    fork = "start method fork: no GPU runtime or threaded framework is loaded"
    assert pooled.backend == f"process-pool (2 workers, {fork})"


def test_task_errors_propagate_from_the_pool(tmp_path):
    path = tmp_path / "ckpt.json"
    with pytest.raises(ValueError, match="chunk 4 failed on purpose"):
        runner.run_chunks(RaiseOn(4), runner.ChunkPlan(80, 10), seed=0, workers=2, checkpoint=path)
    # whatever finished before the error is kept, and the failed chunk is not
    done = read_checkpoint(path)[1] if path.exists() else {}
    assert 4 not in done


def test_resume_with_a_pool(tmp_path):
    path = tmp_path / "ckpt.json"
    with pytest.raises(RuntimeError, match="simulated crash"):
        runner.run_chunks(DrawTask(fail_after=4), PLAN, seed=5, checkpoint=path, key="k")
    resumed = runner.run_chunks(DrawTask(), PLAN, seed=5, workers=2, checkpoint=path, key="k")
    check_plan_result(resumed, PLAN)
    assert same(resumed, runner.run_chunks(DrawTask(), PLAN, seed=5))


# --------------------------------------------------------------------------------------------
# Checkpoint and resume
# --------------------------------------------------------------------------------------------


def test_crash_and_resume_recomputes_only_missing_chunks(tmp_path):
    path = tmp_path / "ckpt.json"
    crashed = DrawTask(fail_after=4)
    with pytest.raises(RuntimeError, match="simulated crash"):
        runner.run_chunks(crashed, PLAN, seed=9, checkpoint=path, key="audit-1")
    _, saved = read_checkpoint(path)
    assert sorted(saved) == crashed.log == [0, 1, 2, 3]

    resumed_task = DrawTask()
    resumed = runner.run_chunks(resumed_task, PLAN, seed=9, checkpoint=path, key="audit-1")
    assert resumed_task.log == list(range(4, PLAN.chunks))  # only the missing chunks ran, each once
    check_plan_result(resumed, PLAN)
    assert same(resumed, runner.run_chunks(DrawTask(), PLAN, seed=9))  # = an uninterrupted run
    # a finished checkpoint: nothing runs again, same result
    again = DrawTask()
    assert same(runner.run_chunks(again, PLAN, seed=9, checkpoint=path, key="audit-1"), resumed)
    assert again.log == []


KILLABLE = """
import sys, time
from dataclasses import dataclass
import numpy as np
from dplens.auditing import runner


@dataclass(frozen=True)
class SlowTask:
    delay: float = 0.0

    def __call__(self, index, trials, seed):
        time.sleep(self.delay)
        rng = np.random.default_rng(seed)
        return np.concatenate([[index, trials], np.bincount(rng.integers(0, 8, size=trials), minlength=8)])


PLAN = runner.ChunkPlan(120, 10)

if __name__ == "__main__":
    runner.run_chunks(SlowTask(delay=0.25), PLAN, seed=21, checkpoint=sys.argv[1], key="killed")
    print("finished")
"""


@pytest.mark.serial("kills its audit process with SIGKILL at a moment chosen by wall-clock time")
def test_sigkill_and_resume(tmp_path):
    script = tmp_path / "killable.py"
    script.write_text(textwrap.dedent(KILLABLE))
    path = tmp_path / "ckpt.json"
    process = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        chunks: dict = {}
        while time.monotonic() < deadline and process.poll() is None:
            if path.exists():
                chunks = read_checkpoint(path)[1]  # the header is created atomically; a torn tail is skipped
                if len(chunks) >= 2:
                    break
            time.sleep(0.02)
        assert process.poll() is None, process.communicate()
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL

    spec = importlib.util.spec_from_file_location("killable_for_test", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plan = module.PLAN
    survived = sorted(read_checkpoint(path)[1])
    assert 2 <= len(survived) < plan.chunks  # killed part-way
    assert survived == list(range(len(survived)))  # in-process order: a prefix

    log: list[int] = []

    def counted(index, trials, seed):
        log.append(index)
        return module.SlowTask()(index, trials, seed)

    resumed = runner.run_chunks(counted, plan, seed=21, checkpoint=path, key="killed")
    assert sorted(log) == [i for i in range(plan.chunks) if i not in survived] and len(set(log)) == len(log)
    fresh = runner.run_chunks(module.SlowTask(), plan, seed=21)
    assert same(resumed, fresh)
    assert sum(int(c[1]) for c in resumed.values()) == plan.trials  # no chunk counted twice


def test_checkpoint_of_another_audit_is_refused(tmp_path):
    path = tmp_path / "ckpt.json"
    runner.run_chunks(DrawTask(), PLAN, seed=1, checkpoint=path, key="audit-A")
    before = path.read_bytes()
    for kwargs, message in [
        (dict(plan=PLAN, seed=1, key="audit-B"), "different audit"),
        (dict(plan=PLAN, seed=2, key="audit-A"), "seed"),
        (dict(plan=runner.ChunkPlan(1003, 50), seed=1, key="audit-A"), "chunk_size"),
        (dict(plan=runner.ChunkPlan(1000, 100), seed=1, key="audit-A"), "trials"),
    ]:
        task = DrawTask()
        with pytest.raises(ValueError, match=message):
            runner.run_chunks(task, kwargs.pop("plan"), checkpoint=path, **kwargs)
        assert task.log == []  # refused before anything ran
    assert path.read_bytes() == before  # and the checkpoint is untouched


def test_audit_checkpoint_of_another_audit_is_refused(tmp_path):
    path = tmp_path / "audit.ckpt"
    games.audit(GaussianMechanism(noise_multiplier=1.0), **AUDIT, checkpoint=path)
    with pytest.raises(ValueError, match="checkpoint"):
        games.audit(GaussianMechanism(noise_multiplier=1.1), **AUDIT, checkpoint=path)


def header(**changes) -> dict:
    """A valid header for PLAN, seed 0, key "k", as this dplens writes it."""
    return runner._checkpoint_header("k", PLAN, 0, None) | changes


def record(index: int, counts: list) -> str:
    return json.dumps({"chunk": index, "counts": counts})


H = json.dumps(header())
ROW = [0, 100, 7, 12, 13, 12, 13, 12, 13, 12, 13]
CORRUPT = {
    "empty": "",
    "no-newline-at-all": H,
    "truncated-header": H[:40] + "\n",
    "not-json": "not json at all\n",
    "a-list": "[]\n",
    "old-single-document": json.dumps({**header(), "version": 2, "chunks": {}}),
    "other-format": json.dumps(header(format="something-else")) + "\n",
    "other-version": json.dumps(header(version=999)) + "\n",
    "other-dplens": json.dumps(header(dplens="0.0.1")) + "\n",
    "other-numpy": json.dumps(header(numpy="1.0.0")) + "\n",
    "garbage-line-in-the-middle": f"{H}\n{record(0, ROW)}\nxx\n{record(1, ROW)}\n",
    "record-not-a-chunk": f"{H}\n{json.dumps({'chunk': 0})}\n",
    "chunk-null": f"{H}\n{record(0, None)}\n",
    "index-not-int": f"{H}\n{record('zero', ROW)}\n",
    "index-outside-the-plan": f"{H}\n{record(11, ROW)}\n",
    "negative-counts": f"{H}\n{record(0, [-1] * 11)}\n",
    "fractional-counts": f"{H}\n{record(0, [0.5] * 11)}\n",
    "ragged-chunks": f"{H}\n{record(0, [1, 2])}\n{record(1, [1, 2, 3])}\n",
    "wrong-shape": f"{H}\n{record(0, [1, 2])}\n",
    "chunk-twice-differently": f"{H}\n{record(0, ROW)}\n{record(0, [*ROW[:-1], 14])}\n",
}


@pytest.mark.parametrize("name", list(CORRUPT))
def test_corrupt_checkpoint_is_a_value_error(tmp_path, name):
    path = tmp_path / "ckpt.json"
    path.write_text(CORRUPT[name])
    task = DrawTask()
    with pytest.raises(ValueError, match="checkpoint"):
        runner.run_chunks(task, PLAN, seed=0, checkpoint=path, key="k")
    assert path.read_text() == CORRUPT[name]  # nothing was written
    # refused before anything ran (a wrong count shape shows only when the first chunk returns its counts)
    assert task.log == ([1] if name == "wrong-shape" else [])


def test_checkpoint_bytes_directory_and_missing_directory(tmp_path):
    path = tmp_path / "ckpt.json"
    path.write_bytes(b"\xff\xfe\x00garbage\n")
    with pytest.raises(ValueError, match="checkpoint"):
        runner.run_chunks(DrawTask(), PLAN, seed=0, checkpoint=path, key="k")
    with pytest.raises(ValueError, match="is a directory"):
        runner.run_chunks(DrawTask(), PLAN, seed=0, checkpoint=tmp_path, key="k")
    task = DrawTask()
    with pytest.raises(ValueError, match="does not exist"):
        runner.run_chunks(task, PLAN, seed=0, checkpoint=tmp_path / "missing" / "ckpt.json", key="k")
    assert task.log == [] and not (tmp_path / "missing").exists()


def test_unwritable_checkpoint_is_refused_before_any_work(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        task = DrawTask()
        with pytest.raises(ValueError, match="cannot be written"):
            runner.run_chunks(task, PLAN, seed=0, checkpoint=locked / "ckpt.json", key="k")
        assert task.log == []
    finally:
        locked.chmod(0o700)


def test_checkpoint_is_append_only_and_fsynced(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "ckpt.json"
    path.parent.mkdir()
    synced: list[int] = []
    snapshots: list[bytes] = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(fd)
        if path.exists():
            snapshots.append(path.read_bytes())
        return real_fsync(fd)

    monkeypatch.setattr(runner.os, "fsync", spy)
    result = runner.run_chunks(DrawTask(), PLAN, seed=2, checkpoint=path, key="k", about={"mechanism": "draws"})
    monkeypatch.undo()
    # every finished chunk is one more line, fsynced before the next chunk is counted; earlier bytes never change
    chunk_snapshots = [s for s in snapshots if s.count(b"\n") > 1]
    assert len(chunk_snapshots) == PLAN.chunks
    for before, after in itertools.pairwise(chunk_snapshots):
        assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    assert os.listdir(path.parent) == ["ckpt.json"]  # no temporary files left behind
    head, chunks = read_checkpoint(path)
    assert {k: np.asarray(v) for k, v in chunks.items()}.keys() == result.keys()
    assert all(np.array_equal(chunks[i], result[i]) for i in result)
    assert head["seed"] == 2 and head["trials"] == PLAN.trials and head["chunk_size"] == PLAN.chunk_size
    assert head["chunks"] == PLAN.chunks and head["fingerprint"] == "k" and head["audit"] == {"mechanism": "draws"}
    assert head["dplens"] and head["numpy"] == np.__version__


@pytest.mark.parametrize("cut", [1, 9, -1, None])
def test_torn_last_line_is_ignored_on_resume(tmp_path, cut):
    path = tmp_path / "ckpt.json"
    with pytest.raises(RuntimeError):
        runner.run_chunks(DrawTask(fail_after=5), PLAN, seed=4, checkpoint=path, key="k")
    lines = path.read_bytes().split(b"\n")
    assert len(lines) == 1 + 5 + 1 and lines[-1] == b""
    # a kill during the write of chunk 4's line: only part of it reached the disk (cut None: all but the newline)
    path.write_bytes(b"\n".join(lines[:5]) + b"\n" + lines[5][:cut])
    task = DrawTask()
    resumed = runner.run_chunks(task, PLAN, seed=4, checkpoint=path, key="k")
    complete = cut is None  # the whole record without its newline is a finished chunk
    assert task.log == list(range(5 if complete else 4, PLAN.chunks))
    assert same(resumed, runner.run_chunks(DrawTask(), PLAN, seed=4))
    # the torn bytes are gone: the file parses line by line and holds each chunk once
    body = path.read_bytes().split(b"\n")
    assert body[-1] == b"" and len(body) == 1 + PLAN.chunks + 1
    assert sorted(json.loads(line)["chunk"] for line in body[1:-1]) == list(range(PLAN.chunks))


def test_failed_append_keeps_the_finished_chunks(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.json"
    real_append = runner._CheckpointWriter.append
    calls = []

    def disk_full_on_the_fourth(self, index, counts):
        calls.append(index)
        if len(calls) == 4:
            self._handle.write(b'{"chunk": 3, "cou')  # half a line, then the disk fills up
            self._handle.flush()
            raise OSError(28, "No space left on device")
        return real_append(self, index, counts)

    monkeypatch.setattr(runner._CheckpointWriter, "append", disk_full_on_the_fourth)
    with pytest.raises(OSError, match="No space"):
        runner.run_chunks(DrawTask(), PLAN, seed=4, checkpoint=path, key="k")
    monkeypatch.undo()
    assert sorted(read_checkpoint(path)[1]) == [0, 1, 2] and os.listdir(tmp_path) == ["ckpt.json"]
    task = DrawTask()
    resumed = runner.run_chunks(task, PLAN, seed=4, checkpoint=path, key="k")
    assert task.log == list(range(3, PLAN.chunks))
    assert same(resumed, runner.run_chunks(DrawTask(), PLAN, seed=4))


def test_checkpoint_in_use_is_refused(tmp_path):
    pytest.importorskip("fcntl")
    path = tmp_path / "ckpt.json"
    seen = []

    def nested(index, trials, seed):
        if not seen:  # while this run holds the file, a second run on it must be refused
            with pytest.raises(ValueError, match="in use"):
                runner.run_chunks(DrawTask(), PLAN, seed=0, checkpoint=path, key="k")
        seen.append(index)
        return DrawTask()(index, trials, seed)

    result = runner.run_chunks(nested, PLAN, seed=0, checkpoint=path, key="k")
    assert same(result, runner.run_chunks(DrawTask(), PLAN, seed=0))


def test_audit_resume_from_a_partial_checkpoint(tmp_path):
    path = tmp_path / "audit.ckpt"
    mechanism = GaussianMechanism(noise_multiplier=1.0)
    full = games.audit(mechanism, **AUDIT, checkpoint=path)
    lines = path.read_text().splitlines()
    assert len(lines) == 1 + full.chunks
    # keep chunks 0, 2 and 5 only: what a run killed at an arbitrary point of a pool might leave
    kept = [line for line in lines[1:] if json.loads(line)["chunk"] in (0, 2, 5)]
    path.write_text("\n".join([lines[0], *kept]) + "\n")
    resumed = games.audit(mechanism, **AUDIT, checkpoint=path)
    assert audit_dict(resumed) == audit_dict(full)
    assert len(read_checkpoint(path)[1]) == full.chunks


# --------------------------------------------------------------------------------------------
# Progress and bad input
# --------------------------------------------------------------------------------------------


def test_progress_bar_goes_to_stderr_only_when_asked(capsys):
    runner.run_chunks(DrawTask(), PLAN, seed=0, progress=False)
    quiet = capsys.readouterr()
    assert quiet.err == "" and quiet.out == ""
    runner.run_chunks(DrawTask(), PLAN, seed=0, progress=True, description="gaussian audit")
    loud = capsys.readouterr()
    assert "gaussian audit" in loud.err and loud.out == ""


def test_audit_progress(capsys):
    games.audit(GaussianMechanism(noise_multiplier=1.0), **AUDIT, progress=True)
    assert capsys.readouterr().err
    games.audit(GaussianMechanism(noise_multiplier=1.0), **AUDIT, progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_bad_workers(bad):
    with pytest.raises(ValueError, match="workers"):
        runner.run_chunks(DrawTask(), PLAN, seed=0, workers=bad)
    with pytest.raises(ValueError, match="workers"):
        games.audit(GaussianMechanism(noise_multiplier=1.0), trials=100, delta=1e-5, claimed_epsilon=1.0, workers=bad)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "0", None])
def test_bad_seed(bad):
    with pytest.raises(ValueError, match="seed"):
        runner.run_chunks(DrawTask(), PLAN, seed=bad)
    with pytest.raises(ValueError, match="seed"):
        games.audit(GaussianMechanism(noise_multiplier=1.0), trials=100, delta=1e-5, claimed_epsilon=1.0, seed=bad)


@pytest.mark.parametrize("bad", [0, -5, 2.5, True])
def test_bad_chunk_size(bad):
    with pytest.raises(ValueError, match="chunk_size"):
        games.audit(
            GaussianMechanism(noise_multiplier=1.0), trials=100, delta=1e-5, claimed_epsilon=1.0, chunk_size=bad
        )


def test_backend_names():
    assert runner.backend_name(workers=1, scheduler=None) == "in-process"
    assert runner.backend_name(workers=4, scheduler=None).startswith("process-pool (4 workers, start method fork: ")
    assert runner.backend_name(workers=4, scheduler="tcp://127.0.0.1:8786") == "dask (tcp://127.0.0.1:8786)"


# --------------------------------------------------------------------------------------------
# The start method (issue 37): fork where safe, forkserver once a GPU runtime or threaded framework is loaded
# --------------------------------------------------------------------------------------------


class _FakeCuda:
    def __init__(self, initialised: bool) -> None:
        self._initialised = initialised

    def is_initialized(self) -> bool:
        return self._initialised


def _fake_torch(cuda: str | None, initialised: bool = False):
    import types

    module = types.ModuleType("torch")
    module.version = types.SimpleNamespace(cuda=cuda, hip=None)
    module.cuda = _FakeCuda(initialised)
    return module


@pytest.mark.skipif(sys.platform != "linux", reason="the fork/forkserver choice is Linux's (macOS: spawn)")
@pytest.mark.parametrize(
    ("modules", "method", "why"),
    [
        ({}, "fork", "no GPU runtime"),
        ({"torch": _fake_torch(None)}, "fork", "no GPU runtime"),  # the CPU wheel (CI): fork is safe and faster
        ({"torch": _fake_torch("12.4")}, "forkserver", "torch built for GPUs (12.4)"),
        ({"torch": _fake_torch(None, initialised=True)}, "forkserver", "CUDA is initialised"),
        ({"jax": object()}, "forkserver", "JAX is loaded"),
        ({"tensorflow": object()}, "forkserver", "TensorFlow is loaded"),
    ],
    ids=["nothing", "torch-cpu", "torch-cuda-build", "cuda-initialised", "jax", "tensorflow"],
)
def test_start_method_choice(monkeypatch, modules, method, why):
    # No GPU here: the choice is tested on the loaded modules it reads (a CUDA build of torch is played by a module
    # whose torch.version.cuda is set), and the forkserver pool it picks is run for real below.
    monkeypatch.delenv(runner.START_METHOD_VARIABLE, raising=False)
    for name in ("torch", "jax", "jaxlib", "tensorflow"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    chosen, reason = runner.choose_start_method()
    assert chosen == method and why in reason
    assert runner._pool_context().get_start_method() == method
    assert f"start method {method}: {reason}" in runner.backend_name(workers=2, scheduler=None)


def test_start_method_override(monkeypatch):
    monkeypatch.setenv(runner.START_METHOD_VARIABLE, "spawn")
    assert runner.choose_start_method() == ("spawn", f"set by {runner.START_METHOD_VARIABLE}")
    monkeypatch.setenv(runner.START_METHOD_VARIABLE, "vfork")
    with pytest.raises(ValueError, match=r"DPLENS_START_METHOD must be one of .*got 'vfork'"):
        runner.choose_start_method()


HELPERS = Path(__file__).resolve().parents[1] / "helpers"


@pytest.mark.parametrize("method", ["forkserver", pytest.param("spawn", marks=pytest.mark.slow)])
def test_every_start_method_gives_the_same_bits_and_resumes(monkeypatch, tmp_path, method):
    import importlib
    import multiprocessing

    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"{method} is not available here")
    monkeypatch.syspath_prepend(str(HELPERS))  # workers that do not fork from here import the task by its module
    tasks = importlib.import_module("start_method_tasks")
    reference = runner.run_chunks(tasks.DrawTask(), PLAN, seed=3)
    monkeypatch.setenv(runner.START_METHOD_VARIABLE, method)
    assert same(runner.run_chunks(tasks.DrawTask(), PLAN, seed=3, workers=2), reference)
    path = tmp_path / "ckpt.jsonl"
    with pytest.raises(RuntimeError, match="simulated crash"):
        runner.run_chunks(tasks.DrawTask(fail_after=3), PLAN, seed=3, checkpoint=path, key="k")
    resumed = runner.run_chunks(tasks.DrawTask(), PLAN, seed=3, workers=2, checkpoint=path, key="k")
    assert same(resumed, reference)
    pooled = games.audit(GaussianMechanism(noise_multiplier=1.0), **AUDIT, workers=2)
    assert audit_dict(pooled) == audit_dict(games.audit(GaussianMechanism(noise_multiplier=1.0), **AUDIT))
    assert f"start method {method}" in pooled.backend


# --------------------------------------------------------------------------------------------
# Dask (one LocalCluster on loopback for the module)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scheduler():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        protocol="tcp://",
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",  # None still serves HTTP on 8787 (warns when taken); a free loopback port
    )
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def test_dask_is_bit_identical(scheduler):
    assert scheduler.startswith("tcp://127.0.0.1:")
    reference = runner.run_chunks(DrawTask(), PLAN, seed=3)
    on_dask = runner.run_chunks(DrawTask(), PLAN, seed=3, scheduler=scheduler)
    check_plan_result(on_dask, PLAN)
    assert same(on_dask, reference)
    # the scheduler wins over workers
    assert same(runner.run_chunks(DrawTask(), PLAN, seed=3, workers=2, scheduler=scheduler), reference)


def test_dask_client_reuse_does_not_mix_audits(scheduler):
    from distributed import Client

    # Two different tasks, the same seed, one Client: each run must get its own results (not the other's by key).
    with Client(scheduler, timeout=10) as client:
        first = runner.run_chunks(DrawTask(), PLAN, seed=0, scheduler=client)
        second = runner.run_chunks(RaiseOn(-1), PLAN, seed=0, scheduler=client)
        third = runner.run_chunks(DrawTask(), PLAN, seed=0, scheduler=client)
    assert same(first, runner.run_chunks(DrawTask(), PLAN, seed=0))
    assert all(np.array_equal(second[i], [i, PLAN.size(i)]) for i in range(PLAN.chunks))
    assert same(third, first)


def test_dask_audit_is_identical(scheduler):
    mechanism = GaussianMechanism(noise_multiplier=1.0)
    serial = games.audit(mechanism, **AUDIT)
    on_dask = games.audit(mechanism, **AUDIT, scheduler=scheduler)
    assert audit_dict(on_dask) == audit_dict(serial)
    assert on_dask.backend == f"dask ({scheduler})"


def test_dask_resume_and_errors(scheduler, tmp_path):
    path = tmp_path / "ckpt.json"
    with pytest.raises(RuntimeError, match="simulated crash"):
        runner.run_chunks(DrawTask(fail_after=5), PLAN, seed=6, checkpoint=path, key="k")
    resumed = runner.run_chunks(DrawTask(), PLAN, seed=6, scheduler=scheduler, checkpoint=path, key="k")
    assert same(resumed, runner.run_chunks(DrawTask(), PLAN, seed=6))
    with pytest.raises(ValueError, match="chunk 3 failed on purpose"):
        runner.run_chunks(RaiseOn(3), PLAN, seed=0, scheduler=scheduler)


@pytest.mark.serial("a wall-clock limit on a refused connection")
@pytest.mark.parametrize("address", ["bogus-address", "tcp://127.0.0.1", 42])
def test_malformed_scheduler_is_a_value_error(address):
    pytest.importorskip("distributed")
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"^scheduler"):
        runner.run_chunks(DrawTask(), PLAN, seed=0, scheduler=address)
    assert time.monotonic() - start < 5


@pytest.mark.serial("a wall-clock limit on a connection timeout")
def test_unreachable_scheduler_fails_fast(monkeypatch):
    pytest.importorskip("distributed")
    assert runner.DASK_CONNECT_TIMEOUT <= 10  # what the CLI waits at most on a dead address
    monkeypatch.setattr(runner, "DASK_CONNECT_TIMEOUT", 1.0)
    address = f"tcp://127.0.0.1:{closed_port()}"
    task = DrawTask()
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"^scheduler") as info:
        runner.run_chunks(task, PLAN, seed=0, scheduler=address)
    assert time.monotonic() - start < 8 and address in str(info.value)
    assert task.log == []


LOCK_PROBE = """
import gc, sys, threading
import numpy as np
from distributed.utils import LoopRunner
from dplens.auditing import runner

gc.disable()  # the failed Client must not be collected by chance before the probe
try:
    runner.run_chunks(lambda i, n, s: np.zeros(1, np.int64), runner.ChunkPlan(2, 1), seed=0, scheduler=sys.argv[1])
except ValueError:
    pass


def collect_while_a_client_starts():
    with LoopRunner._lock:  # what Client start holds; a collected half-built Client's close() waits for it
        gc.collect()


probe = threading.Thread(target=collect_while_a_client_starts, daemon=True)
probe.start()
probe.join(20)
print("hung" if probe.is_alive() else "ok")
"""


@pytest.mark.parametrize("address", ["bogus-address", "tcp://127.0.0.1"])
def test_failed_connect_leaves_nothing_to_hang_on(address, tmp_path):
    # distributed leaves a Client that failed to start in a reference cycle; finalised later by the GC while another
    # Client starts, it deadlocks on distributed's loop lock. The runner must finalise it before returning.
    distributed = pytest.importorskip("distributed")
    if not hasattr(distributed.utils.LoopRunner, "_lock"):
        pytest.skip("this distributed has no global LoopRunner lock")
    script = tmp_path / "probe.py"
    script.write_text(LOCK_PROBE)
    done = subprocess.run([sys.executable, str(script), address], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
