"""The pytest plugin (dplens.testing): a real 3-test suite run through pytest, the suite-wide α, determinism, and
that installing dplens changes nothing in another project's pytest run."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dplens.testing.significance import SPENDING_FRACTION, SignificanceLedger, derive_seed

MECHANISMS = """
import math
import numpy as np
from dplens.auditing.targets import batched


@batched
def geometric_count(data, rng, size):
    p = 1.0 - math.exp(-1.0)
    return int(np.sum(data)) + rng.geometric(p, size) - rng.geometric(p, size)


def textbook_laplace(data, rng):
    return float(np.sum(data)) + rng.laplace(0.0, 1.0)
"""

SUITE = """
import pytest
from mechanisms import geometric_count, textbook_laplace
from dplens.testing import assert_dp

PAIR = ([1, 1, 0, 1], [1, 1, 0])


@pytest.mark.dplens
def test_correct():
    assert_dp(geometric_count, PAIR, epsilon=1.0)


@pytest.mark.dplens
def test_half_epsilon():
    assert_dp(geometric_count, PAIR, epsilon=0.5)


def test_float_laplace(dp_assertions):
    dp_assertions.assert_dp(textbook_laplace, PAIR, epsilon=1.0)
"""


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DPLENS_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _pytest(directory: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *arguments],
        cwd=directory,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=_environment(),
        timeout=300,
    )


@pytest.fixture(scope="module")
def three_test_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("suite")
    (directory / "mechanisms.py").write_text(MECHANISMS)
    (directory / "test_mechanisms.py").write_text(SUITE)
    return directory, _pytest(directory, "-rA", "--dplens-trials", "20000", "--dplens-seed", "7")


def test_a_three_test_suite_passes_and_fails_with_the_evidence(three_test_run):
    _, run = three_test_run
    out = run.stdout
    assert run.returncode == 1, out
    assert re.search(r"PASSED test_mechanisms.py::test_correct", out)
    assert re.search(r"FAILED test_mechanisms.py::test_half_epsilon", out)
    assert re.search(r"FAILED test_mechanisms.py::test_float_laplace", out)
    # The header line after collection: the run seed and how α is shared (2 marked + 1 fixture = 3 collected).
    assert "dplens: run seed 7 (--dplens-seed 7 reproduces), alpha 0.01 for the whole run (3 collected" in out
    # The evidence: the bound and the claim, the score and counts, the cause, the commands that reproduce it.
    half = out.split("test_half_epsilon ___")[1].split("___ test_float_laplace")[0]
    assert "is not (0.5, 0)-DP" in half and "valid lower bound at confidence 1 − 0.003" in half
    assert "cause: the OUTPUT DISTRIBUTION itself" in half and "counts at the threshold" in half
    assert "python: dplens.audit(mechanisms:geometric_count" in half and "trials=20000" in half
    assert "pytest: pytest 'test_mechanisms.py::test_half_epsilon' --dplens-seed 7 --dplens-trials 20000" in half
    bound = float(re.search(r"evidence: ε ≥ ([0-9.]+)", half).group(1))
    assert 0.5 < bound <= 1.0  # a valid lower bound on the true ε = 1
    floats = out.split("test_float_laplace ___")[1]
    assert "cause: a FLOATING-POINT LEAK, not the mechanism's design" in floats
    assert "unreachable from the neighbour's query value under numpy-laplace" in floats
    assert "3 DP assertions, 2 violations; alpha handed out 0.009 of 0.01" in out


def test_the_run_is_deterministic(three_test_run):
    directory, first = three_test_run
    second = _pytest(directory, "-rA", "--dplens-trials", "20000", "--dplens-seed", "7")

    def bounds(text: str) -> list[str]:
        return re.findall(r"evidence: ε ≥ ([0-9.]+)", text)

    assert bounds(first.stdout) == bounds(second.stdout) and len(bounds(first.stdout)) == 2
    other = _pytest(directory, "-rA", "--dplens-trials", "20000", "--dplens-seed", "8")
    assert bounds(other.stdout) != bounds(first.stdout)


def test_installing_dplens_changes_nothing_in_another_projects_run(tmp_path):
    (tmp_path / "test_plain.py").write_text(
        textwrap.dedent(
            """
            import sys

            def test_no_numpy_at_collection():
                assert "numpy" not in sys.modules
                heavy = ("dplens.testing.assertions", "dplens.auditing")
                assert not any(name.startswith(heavy) for name in sys.modules)

            def test_something():
                assert 1 + 1 == 2
            """
        )
    )
    with_plugin = _pytest(tmp_path, "-v")
    without = _pytest(tmp_path, "-v", "-p", "no:dplens")
    assert with_plugin.returncode == 0, with_plugin.stdout
    assert "dplens" in _pytest(tmp_path, "--trace-config", "-q").stdout  # the plugin was loaded in that run

    def normalised(text: str) -> str:
        text = re.sub(r"in [0-9.]+s", "in Xs", text)
        return re.sub(r"plugins: .*", "plugins: …", text)

    assert normalised(with_plugin.stdout) == normalised(without.stdout)
    assert with_plugin.stderr == without.stderr == ""


def test_the_plugin_module_is_light():
    code = (
        "import sys, dplens.testing.plugin, dplens.testing; "
        "heavy = [m for m in ('numpy', 'scipy', 'dp_accounting', 'dplens.auditing', 'dplens.accountant') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert out.stdout.strip() == "[]", out.stderr


def test_bad_options_are_one_line_usage_errors(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    run = _pytest(tmp_path, "--dplens-alpha", "0.7")
    assert run.returncode == 4
    assert "--dplens-alpha must be in (0, 0.5); got 0.7" in run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    run = _pytest(tmp_path, "--dplens-seed", "abc")
    assert run.returncode == 4 and "--dplens-seed must be an integer >= 0 or 'random'; got 'abc'" in run.stderr


# ---- the ledger ------------------------------------------------------------------------------------------------


@given(collected=st.integers(0, 50), extra=st.integers(0, 500), alpha=st.floats(1e-4, 0.2))
def test_shares_never_exceed_alpha(collected, extra, alpha):
    ledger = SignificanceLedger(alpha=alpha)
    ledger.set_collected(collected)
    for _ in range(collected):
        ledger.known_share()
    for _ in range(extra):
        ledger.spend()
    assert ledger.total_handed_out() <= alpha * (1 + 1e-12)
    if collected:
        assert ledger.shares[0][1] == pytest.approx(alpha * (1 - SPENDING_FRACTION) / collected)


@given(workers=st.integers(1, 8), calls=st.lists(st.integers(0, 200), min_size=8, max_size=8))
def test_xdist_workers_spend_disjoint_parts(workers, calls):
    # Each worker spends its own indices j ≡ w + 1 (mod W): together at most α_spent, whatever each one runs.
    total = 0.0
    for worker in range(workers):
        ledger = SignificanceLedger(alpha=0.01, worker=worker, workers=workers)
        for _ in range(calls[worker]):
            ledger.spend()
        total += ledger.total_handed_out()
    assert total <= 0.01 * (1 + 1e-12)
    assert math.isclose(SignificanceLedger(alpha=0.01).spend(), 0.01 * 6 / math.pi**2)


def test_ledger_bad_input():
    with pytest.raises(ValueError, match=r"alpha must be a number in \(0, 0\.5\); got 0\.6"):
        SignificanceLedger(alpha=0.6)
    ledger = SignificanceLedger()
    ledger.spend()
    with pytest.raises(ValueError, match="before any assertion runs"):
        ledger.set_collected(3)


def test_seeds_depend_on_the_run_seed_the_test_and_the_index():
    seeds = {derive_seed(r, n, i) for r in (0, 1) for n in ("a::t", "b::t") for i in (0, 1)}
    assert len(seeds) == 8 and all(0 <= s < 2**63 for s in seeds)
    assert derive_seed(3, "a::t", 0) == derive_seed(3, "a::t", 0)
