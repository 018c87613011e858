"""Faults of long audits, with real signals on real processes: kill -9 of the parent (no orphaned workers), SIGINT and
SIGTERM (checkpoint, exit 130 / 143, resume = the uninterrupted result), a second Ctrl-C, torn and mismatched
checkpoints through the CLI, --log-json progress events, unpicklable scores, and a Dask worker killed mid-audit.

The CLI runs in a subprocess through a small wrapper that slows every chunk down (``DPLENS_TEST_CHUNK_DELAY``), so a
signal lands mid-run on any machine; everything else is the real command. Tests that fork a pool run before the
module's Dask cluster starts (file order).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dplens.auditing import games, runner
from dplens.cli import main
from dplens.mechanisms.additive import GaussianMechanism, LaplaceMechanism

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and process groups"),
    pytest.mark.serial("signals, kill -9 and wall-clock limits on process pools of their own"),
]

SLOW_CLI = """
import os, sys, time
from dplens.auditing import games

DELAY = float(os.environ.get("DPLENS_TEST_CHUNK_DELAY", "0"))
PDEATHSIG = os.environ.get("DPLENS_TEST_PDEATHSIG", "1") == "1"
original = games._CountTask.__call__


def slow(self, index, trials, seed):
    time.sleep(DELAY)
    return original(self, index, trials, seed)


games._CountTask.__call__ = slow
from dplens.auditing import runner

runner._ARM_PDEATHSIG = PDEATHSIG
from dplens.cli import main

sys.exit(main(sys.argv[1:]))
"""

LAPLACE = '[[mechanism]]\ntype = "laplace"\nepsilon = 1.0\n'
TRIALS = 40_000  # 8 chunks of 5 000 trials per side


def _default_signal_dispositions() -> None:
    """SIGINT and SIGTERM as an interactive shell would hand them to a command.

    A shell that starts pytest as a background job (or CI without a terminal) makes it ignore SIGINT, and an ignored
    signal stays ignored across fork and exec. The runner rightly respects an inherited SIG_IGN, so these tests give
    themselves and their child processes the default dispositions: the suite behaves the same however it was started.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def default_signals_in_this_process():
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)  # what Python installs when SIGINT is not ignored
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@pytest.fixture
def cli(tmp_path):
    script = tmp_path / "slow_cli.py"
    script.write_text(SLOW_CLI)
    spec = tmp_path / "laplace.toml"
    spec.write_text(LAPLACE)

    def start(*argv: str, delay: float = 0.0, pdeathsig: bool = True) -> subprocess.Popen:
        env = os.environ | {"DPLENS_TEST_CHUNK_DELAY": str(delay), "DPLENS_TEST_PDEATHSIG": "1" if pdeathsig else "0"}
        return subprocess.Popen(
            [sys.executable, str(script), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,  # its own process group: a "Ctrl-C" reaches the parent and its workers only
            preexec_fn=_default_signal_dispositions,
        )

    start.spec = str(spec)
    return start


def audit_argv(spec: str, checkpoint: Path, *extra: str) -> list[str]:
    return [
        "audit",
        spec,
        "--trials",
        str(TRIALS),
        "--delta",
        "0",
        "--json",
        "--quiet",
        "--checkpoint",
        str(checkpoint),
    ]


def comparable(payload: dict) -> dict:
    return {k: v for k, v in payload.items() if k not in ("elapsed_seconds", "backend")}


def chunk_lines(path: Path) -> int:
    """Complete chunk records in a checkpoint (the header and a torn tail not counted)."""
    if not path.exists():
        return 0
    return max(path.read_bytes().count(b"\n") - 1, 0)


def children(pid: int) -> set[int]:
    tasks = Path(f"/proc/{pid}/task")
    if tasks.is_dir():
        found: set[int] = set()
        for task in tasks.iterdir():
            with contextlib.suppress(OSError):  # the thread ended meanwhile
                found |= {int(c) for c in (task / "children").read_text().split()}
        return found
    done = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return {int(line) for line in done.stdout.split()}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited; only its entry remains
        except (OSError, IndexError):
            return False
    return True


def wait_until(predicate, timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def finish(process: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"the command did not exit within {timeout} s: {err[-2000:]}")
    return process.returncode, out, err


def reference(capsys, spec: str) -> dict:
    """The uninterrupted result, in-process and without a checkpoint."""
    code = main(["audit", spec, "--trials", str(TRIALS), "--delta", "0", "--json", "--quiet"])
    out, _ = capsys.readouterr()
    assert code == 0
    return comparable(json.loads(out))


# --------------------------------------------------------------------------------------------
# In-process: the library's semantics (deterministic: the task signals its own process)
# --------------------------------------------------------------------------------------------


def draws(index, trials, seed):
    return np.bincount(np.random.default_rng(seed).integers(0, 4, size=trials), minlength=4)


PLAN = runner.ChunkPlan(800, 100)


def test_first_signal_finishes_the_chunk_then_raises(tmp_path):
    path = tmp_path / "ckpt"
    ran = []

    def task(index, trials, seed):
        ran.append(index)
        if index == 3:
            os.kill(os.getpid(), signal.SIGINT)  # lands during this chunk: it still completes and is saved
        return draws(index, trials, seed)

    with pytest.raises(runner.Interrupted) as info:
        runner.run_chunks(task, PLAN, seed=1, checkpoint=path, key="k")
    stop = info.value
    assert isinstance(stop, KeyboardInterrupt) and stop.signum == signal.SIGINT and stop.exit_status == 130
    assert ran == [0, 1, 2, 3] and stop.chunks_done == 4 and stop.chunks == 8 and not stop.immediate
    assert stop.checkpoint == path and chunk_lines(path) == 4
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    resumed = runner.run_chunks(draws, PLAN, seed=1, checkpoint=path, key="k")
    fresh = runner.run_chunks(draws, PLAN, seed=1)
    assert all(np.array_equal(resumed[i], fresh[i]) for i in range(PLAN.chunks))


def test_second_signal_stops_at_once(tmp_path):
    path = tmp_path / "ckpt"

    def task(index, trials, seed):
        if index == 2:
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)  # the second interrupts this very chunk
            time.sleep(5)
        return draws(index, trials, seed)

    start = time.monotonic()
    with pytest.raises(runner.Interrupted) as info:
        runner.run_chunks(task, PLAN, seed=1, checkpoint=path, key="k")
    assert time.monotonic() - start < 4
    assert info.value.signum == signal.SIGTERM and info.value.exit_status == 143 and info.value.immediate
    assert info.value.chunks_done == 2 and chunk_lines(path) == 2
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_handler_the_application_installed_is_left_alone():
    calls = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    try:

        def task(index, trials, seed):
            if index == 1:
                os.kill(os.getpid(), signal.SIGINT)
            return draws(index, trials, seed)

        done = runner.run_chunks(task, PLAN, seed=0)
        assert len(done) == PLAN.chunks and calls == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_progress_events():
    events: list[dict] = []
    with runner.observe(events.append):
        runner.run_chunks(draws, PLAN, seed=0, description="probe")
    names = [e["event"] for e in events]
    assert names == ["start"] + ["chunk"] * PLAN.chunks + ["finished"]
    start, *chunks, end = events
    assert start["trials"] == 800 and start["chunks"] == 8 and start["resumed_chunks"] == 0
    assert start["description"] == "probe" and start["backend"] == "in-process"
    assert [c["trials_done"] for c in chunks] == list(range(100, 900, 100))
    assert [c["chunks_done"] for c in chunks] == list(range(1, 9))
    assert all(c["trials_per_second"] > 0 and c["eta_seconds"] >= 0 for c in chunks)
    assert chunks[-1]["eta_seconds"] == 0 and end["trials"] == 800 and all(isinstance(e["time"], float) for e in events)
    events.clear()
    runner.run_chunks(draws, PLAN, seed=0)  # outside the block: nothing is sent
    assert events == []


def test_progress_bar_shows_rate_and_eta(capsys):
    def slow(index, trials, seed):
        time.sleep(0.15)  # tqdm redraws at most every 0.1 s
        return draws(index, trials, seed)

    runner.run_chunks(slow, runner.ChunkPlan(400, 100), seed=0, progress=True, description="gaussian audit")
    err = capsys.readouterr().err
    assert "gaussian audit" in err and " trials/s" in err and "<00:0" in err  # the rate, and elapsed<remaining
    assert "chunk 3/4" in err and "300/400" in err


def test_lambda_score_with_workers():
    # Forked workers inherit the task: a lambda score needs no pickling (it used to fail with a PicklingError).
    mechanism = GaussianMechanism(noise_multiplier=1.0)
    score = games.BlackBoxScore(function=lambda outputs: np.asarray(outputs).reshape(-1))
    options = dict(trials=20_000, delta=1e-5, claimed_epsilon=5.0, seed=3, score=score, chunk_size=2_500)
    if runner._pool_context().get_start_method() == "fork":
        serial, pooled = games.audit(mechanism, **options), games.audit(mechanism, **options, workers=2)
        assert pooled.epsilon_lower_bound == serial.epsilon_lower_bound and pooled.counts == serial.counts


def test_unpicklable_task_with_spawned_workers_is_a_clear_error(monkeypatch):
    import multiprocessing

    monkeypatch.setattr(runner, "_pool_context", lambda: multiprocessing.get_context("spawn"))
    with pytest.raises(ValueError, match=r"workers > 1.*module level"):
        runner.run_chunks(lambda i, n, s: np.zeros(1, np.int64), PLAN, seed=0, workers=2)


# --------------------------------------------------------------------------------------------
# Real signals on the command line
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pdeathsig", [True, False], ids=["pdeathsig", "watchdog-only"])
def test_kill_9_of_the_parent_kills_every_worker_within_5_s(cli, tmp_path, pdeathsig):
    # The case: a Laplace audit of 3e8 trials per side on 2 workers, the parent killed with SIGKILL.
    # "watchdog-only" disarms the Linux parent-death signal: the portable getppid() watchdog alone (as on macOS).
    checkpoint = tmp_path / "big.ckpt"
    argv = ["audit", cli.spec, "--trials", "300000000", "--workers", "2", "--quiet", "--checkpoint", str(checkpoint)]
    process = cli(*argv, pdeathsig=pdeathsig)
    try:
        assert wait_until(lambda: len(children(process.pid)) >= 2, 60), "the workers never started"
        workers = children(process.pid)
        assert all(alive(pid) for pid in workers)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        killed = time.monotonic()
        assert wait_until(lambda: not any(alive(pid) for pid in workers), 5.0), "workers outlived their parent"
        assert time.monotonic() - killed <= 5.0
    finally:
        for pid in children(process.pid) | set():
            os.kill(pid, signal.SIGKILL)
        if process.poll() is None:
            process.kill()
        process.communicate()
    assert process.returncode == -signal.SIGKILL


@pytest.mark.parametrize(
    ("workers", "signum", "status"),
    [("1", signal.SIGINT, 130), ("2", signal.SIGINT, 130), ("2", signal.SIGTERM, 143)],
)
def test_signal_saves_the_checkpoint_and_resume_gives_the_uninterrupted_result(
    cli, tmp_path, capsys, workers, signum, status
):
    checkpoint = tmp_path / "run.ckpt"
    events = tmp_path / "run.jsonl"
    argv = [*audit_argv(cli.spec, checkpoint), "--workers", workers, "--log-json", str(events)]
    process = cli(*argv, delay=0.4)
    assert wait_until(lambda: chunk_lines(checkpoint) >= 2 or process.poll() is not None, 60)
    pool = children(process.pid)
    os.killpg(process.pid, signum)  # as a terminal's Ctrl-C or a service manager's stop: the whole group
    code, out, err = finish(process)
    assert code == status, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    name = signal.Signals(signum).name
    assert lines[0].startswith(f"dplens: interrupted by {name} after ")
    assert lines[0].endswith(f"saved in {str(checkpoint)!r}; resume with: {shlex.join(['dplens', *argv])}")
    saved = chunk_lines(checkpoint)
    assert 2 <= saved < 8
    assert not any(alive(pid) for pid in pool)
    logged = [json.loads(line) for line in events.read_text().splitlines()]
    assert [e["event"] for e in logged[-2:]] == ["interrupted", "done"]
    assert logged[-2]["signal"] == name and logged[-2]["chunks_done"] == saved and logged[-1]["exit_status"] == status
    # resume (the same command, without the slow-down) and compare with an uninterrupted run
    log = tmp_path / "resume.jsonl"
    assert main([*argv, "--log-json", str(log)]) == 0
    resumed = comparable(json.loads(capsys.readouterr().out))
    start = next(json.loads(line) for line in log.read_text().splitlines() if json.loads(line)["event"] == "start")
    assert start["resumed_chunks"] == saved
    assert resumed == reference(capsys, cli.spec)


def test_second_ctrl_c_exits_at_once(cli, tmp_path):
    checkpoint = tmp_path / "run.ckpt"
    process = cli(*audit_argv(cli.spec, checkpoint), "--workers", "2", delay=20.0)
    assert wait_until(lambda: len(children(process.pid)) >= 2, 60), "the workers never started"
    time.sleep(0.5)  # both workers are inside their (20 s) first chunks
    pool = children(process.pid)
    os.killpg(process.pid, signal.SIGINT)
    time.sleep(0.3)
    sent = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)
    code, _, err = finish(process, timeout=15)
    assert time.monotonic() - sent < 5
    assert code == 130 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "after 0 of 8 chunks" in err
    assert wait_until(lambda: not any(alive(pid) for pid in pool), 5.0)


# --------------------------------------------------------------------------------------------
# Checkpoints on the command line
# --------------------------------------------------------------------------------------------


def test_torn_checkpoint_line_resumes(tmp_path, capsys):
    spec = tmp_path / "laplace.toml"
    spec.write_text(LAPLACE)
    checkpoint = tmp_path / "run.ckpt"
    argv = audit_argv(str(spec), checkpoint)
    assert main(argv) == 0
    full = comparable(json.loads(capsys.readouterr().out))
    data = checkpoint.read_bytes()
    lines = data.split(b"\n")
    checkpoint.write_bytes(b"\n".join(lines[:-3]) + b"\n" + lines[-2][:7])  # lose chunk 7, tear chunk 6's line
    assert main(argv) == 0
    assert comparable(json.loads(capsys.readouterr().out)) == full
    assert checkpoint.read_bytes().count(b"\n") == 1 + 8


def test_checkpoint_of_another_audit_exits_2_and_is_untouched(tmp_path, capsys):
    spec = tmp_path / "laplace.toml"
    spec.write_text(LAPLACE)
    other = tmp_path / "other.toml"
    other.write_text(LAPLACE.replace("1.0", "2.0"))
    checkpoint = tmp_path / "run.ckpt"
    assert main(audit_argv(str(spec), checkpoint)) == 0
    capsys.readouterr()
    before = checkpoint.read_bytes()
    for argv in (audit_argv(str(other), checkpoint), [*audit_argv(str(spec), checkpoint), "--seed", "5"]):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert err.startswith("dplens: error: checkpoint") and "use a new checkpoint file" in err
        assert checkpoint.read_bytes() == before


@pytest.mark.parametrize(
    ("where", "message"),
    [("missing/run.ckpt", "does not exist"), (".", "is a directory")],
)
def test_bad_checkpoint_path_exits_2_before_any_work(tmp_path, capsys, where, message):
    spec = tmp_path / "laplace.toml"
    spec.write_text(LAPLACE)
    code = main(audit_argv(str(spec), tmp_path / where))
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and message in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["laplace.toml"]


def test_log_json_events(tmp_path, capsys):
    spec = tmp_path / "laplace.toml"
    spec.write_text(LAPLACE)
    log = tmp_path / "events.jsonl"
    assert main([*audit_argv(str(spec), tmp_path / "c.ckpt"), "--log-json", str(log)]) == 0
    capsys.readouterr()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in events] == ["start"] + ["chunk"] * 8 + ["finished", "done"]
    assert events[0]["trials"] == TRIALS and events[-1]["exit_status"] == 0
    assert all({"trials_done", "trials_per_second", "eta_seconds"} <= set(e) for e in events[1:9])
    # refused input: exit 2, no log file left behind
    bad = tmp_path / "bad.toml"
    bad.write_text('[[mechanism]]\ntype = "laplace"\nepsilon = -1\n')
    log2 = tmp_path / "refused.jsonl"
    assert main(["audit", str(bad), "--trials", "100", "--log-json", str(log2)]) == 2
    assert not log2.exists()
    assert main(["audit", str(spec), "--trials", "100", "--log-json", str(tmp_path / "no" / "x.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Dask: a worker killed mid-audit; the scheduler reruns its chunk and the result is bit-identical
# --------------------------------------------------------------------------------------------


def test_dask_worker_killed_mid_audit(tmp_path):
    distributed = pytest.importorskip("distributed")
    journal = tmp_path / "journal"
    journal.mkdir()
    parent = os.getpid()
    options = dict(trials=16_000, delta=0.0, claimed_epsilon=1.0, seed=7, chunk_size=1_000)  # 16 chunks
    expected = games.audit(LaplaceMechanism(scale=1.0), **options)

    class Journaled(LaplaceMechanism):
        """The same draws, slowed down on the workers and journaled (defined here: cloudpickled by value)."""

        def sample(self, data, n, rng):
            import os as _os
            import time as _time
            import uuid as _uuid

            if _os.getpid() == parent:  # the pilot, in this process
                return super().sample(data, n, rng)
            mark = f"{_os.getpid()}-{_uuid.uuid4().hex}"
            (journal / f"start-{mark}").touch()
            _time.sleep(0.2)
            outputs = super().sample(data, n, rng)
            (journal / f"end-{mark}").touch()
            return outputs

    def calls() -> tuple[set[str], set[str]]:
        names = [p.name for p in journal.iterdir()]
        return (
            {n.removeprefix("start-") for n in names if n.startswith("start-")},
            {n.removeprefix("end-") for n in names if n.startswith("end-")},
        )

    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,  # real worker processes, restarted by their nannies
        protocol="tcp://",
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
        silence_logs=50,
    ) as cluster:
        result: dict = {}

        def run():
            try:
                result["audit"] = games.audit(Journaled(scale=1.0), **options, scheduler=cluster.scheduler_address)
            except BaseException as err:  # reported below
                result["error"] = err

        thread = threading.Thread(target=run)
        thread.start()

        def busy_worker():
            started, ended = calls()
            running = sorted(started - ended)
            return running[0] if len(ended) >= 4 and running else None

        assert wait_until(lambda: busy_worker() is not None or not thread.is_alive(), 90), result
        victim = busy_worker()
        assert victim is not None, result
        pid = int(victim.split("-")[0])
        os.kill(pid, signal.SIGKILL)  # in the middle of a chunk
        thread.join(120)
        assert not thread.is_alive()
    assert "error" not in result, result.get("error")
    started, ended = calls()
    assert victim in started and victim not in ended  # the killed worker never finished its chunk ...
    assert len(ended) >= 2 * 16  # ... yet every chunk's two sides were drawn to the end (that one elsewhere)
    got = result["audit"]
    assert got.counts == expected.counts and got.trials == expected.trials
    assert got.epsilon_lower_bound == expected.epsilon_lower_bound and got.backend.startswith("dask")


def test_checkpoint_header_describes_the_audit_and_report_logs_progress(tmp_path, capsys):
    spec = tmp_path / "laplace.toml"
    spec.write_text(LAPLACE)
    checkpoint = tmp_path / "run.ckpt"
    assert main(audit_argv(str(spec), checkpoint)) == 0
    capsys.readouterr()
    header = json.loads(checkpoint.read_text().splitlines()[0])
    assert header["audit"]["game"] == "distinguishing" and "Laplace" in header["audit"]["mechanism"]
    assert header["seed"] == 0 and header["trials"] == TRIALS and header["chunks"] == 8
    log = tmp_path / "report.jsonl"
    out = tmp_path / "report"
    assert main(["report", str(spec), "-o", str(out), "--trials", "20000", "--quiet", "--log-json", str(log)]) == 0
    capsys.readouterr()
    names = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert names[0] == "start" and "chunk" in names and names[-2:] == ["finished", "done"]
