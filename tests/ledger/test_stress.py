"""Never overspent, nothing lost: concurrent chargers against one ledger, some killed with SIGKILL mid-run.

Every charger process charges identical Gaussian releases against one planned budget that admits about half of
them. Afterwards the ledger must open, pass its integrity check, and: the spent ε recomputed from the stored
releases (by an independent ``Accountant`` of every stored release) never exceeds the budget; every charge that
reported success is stored exactly once; no refused charge is stored; and — the budget is full — exactly as many
releases are stored as fit (no capacity lost to a crash or a race). The default suite runs it on both backends with
6 processes × 100 charges, a budget for about 300 of them and two chargers killed with SIGKILL at random moments
(each victim after 1 to 25 of its own outcomes, so mid-run, with 2 × 6 concurrent writers racing for the last
places), and a run without kills in which every one of the 4 × 30 attempted charges must report its outcome; the
``slow`` suite runs the kills at the size of the ledger's issue, 8 processes × 250 charges for about 1000 places
(about 30 s per backend on a 2-core machine). Every test here runs in the serial phase (root conftest.py): the
chargers race each other, not the rest of the suite.
"""

from __future__ import annotations

import math
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import dplens
from dplens.accountant import conversions
from dplens.ledger import Ledger

pytestmark = pytest.mark.serial("concurrent charger processes killed with SIGKILL")

CHARGER = Path(__file__).with_name("charger.py")
EPSILON, DELTA = 1.0, 1e-6


def _sigma_for(admitted: int) -> float:
    """The noise multiplier with which about ``admitted`` identical Gaussian releases fill (EPSILON, DELTA)."""
    return math.sqrt(admitted) / conversions.gdp_mu(EPSILON, DELTA)


def _capacity(sigma: float) -> int:
    """How many releases of σ fit: the largest n with ε(n Gaussians) ≤ EPSILON (exact, as the ledger's tightest
    route computes it)."""
    n = 0
    while dplens.Accountant().compose(dplens.Gaussian(noise_multiplier=sigma), n + 1).epsilon(DELTA) <= EPSILON:
        n += 1
    return n


class _Charger:
    def __init__(self, location: str, worker: int, count: int, sigma: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(CHARGER), location, str(worker), str(count), repr(sigma)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # its own session: unaffected by the test runner's terminal and signals
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.strip())

    def outcomes(self, kind: str) -> set[str]:
        return {line.split(" ", 1)[1] for line in list(self.lines) if line.startswith(kind + " ")}


def run_stress(location: str, *, workers: int, per_worker: int, admitted: int, kills: int, seed: int) -> dict:
    sigma = _sigma_for(admitted)
    with Ledger.open(location, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=EPSILON, delta=DELTA)
    rng = random.Random(seed)
    chargers = [_Charger(location, w, per_worker, sigma) for w in range(workers)]
    killed: list[int] = []
    if kills:
        # Kill random chargers at random moments while they are charging: each victim after a random number of its
        # own outcomes (all victims watched at once, so none finishes before its turn).
        deadline = time.monotonic() + 300
        targets = {victim: rng.randint(1, max(2, per_worker // 4)) for victim in rng.sample(range(workers), kills)}
        while targets:
            for victim, target in list(targets.items()):
                charger = chargers[victim]
                assert charger.process.poll() is None, f"charger {victim} ended before its kill"
                if len(charger.outcomes("ACCEPTED") | charger.outcomes("REFUSED")) >= target:
                    time.sleep(rng.random() * 0.02)  # inside the next charge's transaction, or between two
                    charger.process.send_signal(signal.SIGKILL)
                    killed.append(victim)
                    del targets[victim]
            assert time.monotonic() < deadline, "chargers made no progress"
            time.sleep(0.002)
    for index, charger in enumerate(chargers):
        code = charger.process.wait(timeout=900)
        charger.reader.join(timeout=60)
        if index in killed:
            assert code == -signal.SIGKILL
        else:
            assert code == 0, charger.process.stderr.read()
    accepted = set().union(*(c.outcomes("ACCEPTED") for c in chargers))
    refused = set().union(*(c.outcomes("REFUSED") for c in chargers))
    with Ledger.open(location) as ledger:
        verified = ledger.verify()
        stored = [name for name, _ in ledger.release_events("default")]
        independent = dplens.Accountant()
        for _, entries in ledger.release_events("default"):
            for event, count in entries:
                independent.compose(event, count)
    return {
        "sigma": sigma,
        "verified": verified,
        "stored": stored,
        "accepted": accepted,
        "refused": refused,
        "killed": killed,
        "spent": independent.epsilon(DELTA),
        "capacity": _capacity(sigma),
        "attempted": {f"w{w}-{i}" for w in range(workers) for i in range(per_worker)},
    }


def _check(outcome: dict, *, full: bool) -> None:
    verified = outcome["verified"]
    assert verified.integrity == "ok" or verified.integrity.startswith("ok (amcheck: ")
    assert verified.problems == ()
    stored = outcome["stored"]
    assert len(stored) == len(set(stored)), "a release is stored twice"
    assert outcome["accepted"] <= set(stored), "a charge reported as accepted is not stored"
    assert not (outcome["refused"] & set(stored)), "a refused charge is stored"
    assert set(stored) <= outcome["attempted"]
    assert outcome["spent"] <= EPSILON, f"overspent: {outcome['spent']} > {EPSILON}"
    if full:  # the budget filled up: exactly its capacity is stored
        assert len(stored) == outcome["capacity"]
        assert outcome["refused"], "nothing was refused, so the test did not reach the budget"


def test_concurrent_chargers_never_overspend_sqlite(tmp_path):
    outcome = run_stress(str(tmp_path / "ledger.db"), workers=4, per_worker=30, admitted=50, kills=0, seed=1)
    _check(outcome, full=True)
    assert outcome["accepted"] | outcome["refused"] == outcome["attempted"]


def test_kill_9_of_chargers_loses_nothing_sqlite(tmp_path):
    outcome = run_stress(str(tmp_path / "ledger.db"), workers=6, per_worker=100, admitted=300, kills=2, seed=2)
    _check(outcome, full=True)
    assert len(outcome["killed"]) == 2


@pytest.mark.slow
def test_kill_9_of_chargers_loses_nothing_sqlite_at_full_size(tmp_path):
    outcome = run_stress(str(tmp_path / "ledger.db"), workers=8, per_worker=250, admitted=1000, kills=2, seed=2)
    _check(outcome, full=True)
    assert len(outcome["killed"]) == 2


def test_concurrent_chargers_never_overspend_postgresql(postgres_server):
    outcome = run_stress(postgres_server(), workers=4, per_worker=30, admitted=50, kills=0, seed=3)
    _check(outcome, full=True)
    assert outcome["verified"].integrity.startswith("ok (amcheck: ")  # PostgreSQL's own index checks ran
    assert outcome["accepted"] | outcome["refused"] == outcome["attempted"]


def test_kill_9_of_chargers_loses_nothing_postgresql(postgres_server):
    outcome = run_stress(postgres_server(), workers=6, per_worker=100, admitted=300, kills=2, seed=4)
    _check(outcome, full=True)
    assert outcome["verified"].integrity.startswith("ok (amcheck: ")
    assert len(outcome["killed"]) == 2


@pytest.mark.slow
def test_kill_9_of_chargers_loses_nothing_postgresql_at_full_size(postgres_server):
    outcome = run_stress(postgres_server(), workers=8, per_worker=250, admitted=1000, kills=2, seed=4)
    _check(outcome, full=True)
    assert outcome["verified"].integrity.startswith("ok (amcheck: ")
