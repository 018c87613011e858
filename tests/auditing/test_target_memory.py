"""The memory of a target audit (issue 30): a budget the user sets, a plan from the output's size, peak memory
within it, and one line before the pilot when nothing fits."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dplens import cli
from dplens.auditing import target_game as tg
from dplens.auditing.stages import memory
from dplens.auditing.stages.memory import MemoryBudget, MemoryBudgetError, OutputSize, parse_memory_size, plan_memory
from dplens.auditing.targets import batched

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "targets"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2G", 2 * 2**30), ("512M", 512 * 2**20), ("1.5GiB", 3 * 2**29), ("64mb", 64 * 2**20), (10**8, 10**8)],
)
def test_memory_sizes_are_read_in_binary_units(text, expected):
    assert parse_memory_size(text) == expected


@pytest.mark.parametrize("bad", ["lots", "2X", "-1G", True, "1k", 1000])
def test_a_bad_memory_budget_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="memory_budget must be"):
        parse_memory_size(bad)


def test_the_default_budget_is_a_share_of_the_available_memory(monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 8 * 2**30)
    budget = MemoryBudget.resolve()
    assert budget.bytes == 2 * 2**30 and "25% of the 8 GiB available" in budget.source
    monkeypatch.setattr(memory, "available_memory", lambda: None)
    assert MemoryBudget.resolve().bytes == memory.FALLBACK_BYTES
    assert MemoryBudget.resolve("1G").describe() == "1 GiB (given)"


def test_small_outputs_keep_their_plan_and_wide_ones_are_reduced():
    budget = MemoryBudget(2**30, "given")
    small = plan_memory(budget, OutputSize(dimension=20, row_bytes=160), kind="vector", default_batch=16_384, workers=2)
    assert (small.batch_rows, small.reduced, small.notes) == (16_384, False, ())
    wide = plan_memory(budget, OutputSize(dimension=10**6, row_bytes=8 * 10**6), kind="vector", default_batch=16_384,
                       workers=2)  # fmt: skip
    assert wide.reduced and wide.screening and 1 <= wide.batch_rows < 16_384
    # a batch of wide outputs per worker stays within the batch bytes (and so within the budget)
    assert 2 * wide.batch_rows * wide.size.stream_bytes <= max(2 * memory.BATCH_BYTES, budget.bytes // 2)


def test_a_budget_that_cannot_hold_the_fitting_half_cuts_it_with_a_note():
    @batched
    def vector(data, rng, size):
        return float(data) + rng.normal(0.0, 1.0, size=(size, 100)).round(3)

    result = tg.audit_target(vector, (1, 0), claim_epsilon=1.0, trials=40_000, seed=0, memory_budget="40M")
    assert result.fit_trials < 4_000 and result.selection_trials == result.pilot_trials - result.fit_trials
    assert any("the memory budget cut the fitting half" in note for note in result.notes)
    assert result.memory["budget_bytes"] == 40 * 2**20 and result.memory["budget_source"] == "given"


def test_when_nothing_fits_the_audit_says_so_in_one_line_before_its_pilot():
    drawn = []

    @batched
    def wide(data, rng, size):
        drawn.append(size)
        return rng.normal(0.0, 1.0, size=(size, 200_000)).astype(np.float32)

    start = time.process_time()  # CPU time: a neighbour on the machine does not count against it
    with pytest.raises(MemoryBudgetError) as caught:
        tg.audit_target(wide, (1, 0), claim_epsilon=1.0, trials=2_000, seed=0, memory_budget="16M")
    assert time.process_time() - start < 10
    message = str(caught.value)
    assert "\n" not in message and "200000 coordinates" in message and "2000 trials per side" in message
    assert "16 MiB (given)" in message and "--memory-budget" in message and "--score" in message
    assert "fewer coordinates" in message and max(drawn) <= 8  # only the reproducibility check drew


def test_a_user_score_runs_where_the_coordinates_cannot_be_screened():
    @batched
    def wide(data, rng, size):
        return float(data) + rng.normal(0.0, 1.0, size=(size, 400_000)).astype(np.float32)

    def mean(outputs):
        return np.asarray(outputs, dtype=float).mean(axis=1)

    score = tg.UserScore(function=mean)
    result = tg.audit_target(
        wide, (1, 0), claim_epsilon=1.0, trials=500, pilot_trials=200, seed=0, memory_budget="55M", scores=score
    )
    assert [s["kind"] for s in result.scores] == ["user-score"] and result.verdict.value == "VIOLATION"
    assert any("only the user scores" in note for note in result.notes) and not result.memory["screening"]


_PEAK = r"""
import json, resource, sys
import numpy as np
from dplens.auditing.target_game import audit_target
from dplens.auditing.targets import batched

@batched
def wide(data, rng, size):
    return float(data) + rng.standard_normal((size, int(sys.argv[1])), dtype=np.float32)

audit_target(wide, (0, 0), claim_epsilon=1.0, trials=50, seed=0, pilot_trials=40)  # warm: libraries loaded
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
audit_target(wide, (1, 0), claim_epsilon=1.0, trials=int(sys.argv[2]), seed=0, memory_budget=sys.argv[3])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before": before * 1024, "after": after * 1024}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB is Linux's")
def test_peak_memory_of_a_wide_audit_stays_within_its_budget():
    out = subprocess.run(
        [sys.executable, "-c", _PEAK, "20000", "2000", "128M"], capture_output=True, text=True, timeout=600, check=True
    )
    peak = json.loads(out.stdout.strip().splitlines()[-1])
    # the raw outputs of the audit are 2 · 6 000 · 20 000 · 4 bytes = 0.96 GB, 7.5 times the budget (measured: the
    # audit adds about 28 MB); the audit adds at most its budget
    assert peak["after"] - peak["before"] <= 128 * 2**20


def test_the_cli_takes_a_memory_budget_and_refuses_a_bad_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    args = ["audit", "--target", "mechanisms:geometric", "--pair", "pair_int.json", "--claim-epsilon", "1"]
    assert cli.main([*args, "--trials", "2000", "--quiet", "--json", "--memory-budget", "64M"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["memory"]["budget_bytes"] == 64 * 2**20 and payload["verdict"] == "CONSISTENT"
    assert cli.main([*args, "--trials", "2000", "--memory-budget", "plenty"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "memory_budget must be a number of bytes" in err and "Traceback" not in err
    spec = str(EXAMPLES.parent / "gaussian_claim.toml")
    assert cli.main(["audit", spec, "--trials", "100", "--memory-budget", "1G"]) == 2
    assert "--memory-budget applies to --target audits" in capsys.readouterr().err


def test_running_out_of_memory_is_reported_as_such(monkeypatch, capsys):
    def exhausted(args):
        raise MemoryError("Unable to allocate 28.8 GiB for an array with shape (60000, 60000) and data type float64")

    monkeypatch.setattr(cli, "_cmd_demo", exhausted)
    assert cli.main(["demo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dplens: error: out of memory (Unable to allocate 28.8 GiB") and err.count("\n") == 1
    assert "out of the supported range" not in err
