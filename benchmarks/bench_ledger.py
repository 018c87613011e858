"""The budget ledger (issue 29): charge latency, status time, and how many releases each mode admits.

    python benchmarks/bench_ledger.py [--releases 10000] [--status-releases 100000] [--timed 200] [--json FILE]

(a) Charge with 10⁴ releases already in an SQLite ledger (target: ≤ 50 ms at p95): the releases are drawn from 100
    configurations (Gaussian tables, Laplace counts, DP-SGD runs: Poisson-subsampled Gaussians), then ``--timed``
    more charges are timed one by one through ``Ledger.charge`` (a transaction each, fsync'd). Side by side in the same
    run: recomputing the period's ε from scratch from the stored releases (what a ledger without its incremental
    caches would do per charge; identical events merged, the tightest route), and diffprivlib's
    ``BudgetAccountant.spend`` with the same number of (ε, δ) entries (in memory, one process, no durability).
(b) ``status`` of 10⁵ releases drawn from 100 configurations (target: ≤ 2 s), for three mixes of configurations; cold
    (no cached tightest-route result) and warm. The 10⁵ rows are made by charging the 100 configurations once each
    through ``Ledger.charge`` and copying those rows (a benchmark fixture); ``Ledger.verify`` then checks that the
    copied ledger satisfies every invariant.
(c) How many identical releases fit under each mode for three standard budgets (the price of ``adaptive``).
(d) ``--parts pld``: the accountant's PLD engine on a status's ledger (100 configurations × 1000 runs, δ = 10⁻⁶), side
    by side with dp-accounting's ``PLDAccountant`` at its default grid (1e-4) on the same events: interleaved fresh
    processes (``--repeat`` each; imports and building the ledger not timed), medians. dplens reports its certified
    bracket (default tolerance 1e-3) and the tightest route (BEST: RDP and PLD, what ``status`` computes);
    dp-accounting its pessimistic ε (an upper bound, no lower end).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import warnings
from importlib import metadata
from pathlib import Path

import dplens
from dplens.accountant import conversions
from dplens.ledger import Ledger, Mode

DELTA = 1e-6


def configurations(mix: str, seed: int = 0) -> list:
    """100 release configurations of a mix: 'tables' (Gaussian), 'tables+training' (Gaussian + DP-SGD runs),
    'tables+counts' (Gaussian + Laplace), 'all' (the three)."""
    rng = random.Random(seed)
    out = []
    for i in range(100):
        kind = {"tables": 0, "tables+training": i % 2 * 2, "tables+counts": i % 2, "all": i % 3}[mix]
        if kind == 0:
            out.append(dplens.Gaussian(noise_multiplier=round(rng.uniform(300, 600), 3)))
        elif kind == 1:
            out.append(dplens.Laplace(noise_multiplier=round(rng.uniform(3000, 6000), 3)))
        else:
            step = dplens.PoissonSampled(
                sampling_rate=rng.choice([1e-4, 2e-4, 5e-4]),
                event=dplens.Gaussian(noise_multiplier=round(rng.uniform(3.0, 6.0), 3)),
            )
            out.append(dplens.SelfComposed(event=step, count=rng.choice([10, 20, 50])))
    return out


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


# ---- (a) charge latency ---------------------------------------------------------------------------------------------


def bench_charge(directory: Path, releases: int, timed: int, mix: str) -> dict:
    configs = configurations(mix, seed=1)
    rng = random.Random(2)
    path = directory / "charge.db"
    with Ledger.open(path, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=10.0, delta=DELTA)
        start = time.perf_counter()
        for i in range(releases):
            assert ledger.charge(rng.choice(configs), release=f"pre-{i}", charged_by="bench").accepted
        populate = time.perf_counter() - start
        latencies = []
        for i in range(timed):
            event = rng.choice(configs)
            t0 = time.perf_counter()
            result = ledger.charge(event, release=f"timed-{i}", charged_by="bench")
            latencies.append(time.perf_counter() - t0)
            assert result.accepted
        methods = sorted({result.budgets[0].spent_method.split(" (")[0]})
        # From scratch: read every stored release, merge identical events, the tightest route (as status does).
        scratch = []
        for _ in range(3):
            t0 = time.perf_counter()
            acc = ledger.accountant("default")
            epsilon = acc.epsilon(DELTA)
            scratch.append(time.perf_counter() - t0)
        # Refusals. A release that alone exceeds the budget (ε ≈ 12.5 > 10 by its exact route): a certified lower
        # bound refuses it at once. A release that fits alone (ε ≈ 9.9) but not with the period: the tightest route
        # of the whole period decides, with the PLD engine's cost.
        t0 = time.perf_counter()
        refused = ledger.charge(dplens.Gaussian(noise_multiplier=0.45), release="too-big", charged_by="bench")
        refusal = time.perf_counter() - t0
        assert not refused.accepted
        t0 = time.perf_counter()
        tight = ledger.charge(dplens.Gaussian(noise_multiplier=0.565), release="last-straw", charged_by="bench")
        refusal_tightest = time.perf_counter() - t0
        status = ledger.status().budgets[0]
    diffprivlib = bench_diffprivlib(releases, timed)
    return {
        "mix": mix,
        "releases_before": releases,
        "timed_charges": timed,
        "populate_seconds": populate,
        "charge_p50_ms": 1e3 * statistics.median(latencies),
        "charge_p95_ms": 1e3 * _percentile(latencies, 0.95),
        "charge_max_ms": 1e3 * max(latencies),
        "charge_methods": methods,
        "refusal_lower_bound_ms": 1e3 * refusal,
        "refusal_lower_bound_method": refused.budgets[0].spent_method,
        "near_limit_charge_ms": 1e3 * refusal_tightest,
        "near_limit_charge": f"accepted={tight.accepted}, {tight.budgets[0].spent_method}, "
        f"epsilon={tight.budgets[0].spent_epsilon:.6g}",
        "scratch_median_ms": 1e3 * statistics.median(scratch),
        "scratch_epsilon": epsilon,
        "spent_epsilon": status.spent_epsilon,
        "ratio_scratch_over_p50": statistics.median(scratch) / statistics.median(latencies),
        **diffprivlib,
    }


def bench_diffprivlib(releases: int, timed: int) -> dict:
    try:
        from diffprivlib import BudgetAccountant
    except ImportError:
        return {"diffprivlib": "not installed (pip install '.[thirdparty]')"}
    accountant = BudgetAccountant(epsilon=10.0, delta=DELTA, slack=DELTA / 2)
    for _ in range(releases):
        accountant.spend(5e-4, 0.0)
    latencies = []
    for _ in range(timed):
        t0 = time.perf_counter()
        accountant.spend(5e-4, 0.0)
        latencies.append(time.perf_counter() - t0)
    return {
        "diffprivlib_version": metadata.version("diffprivlib"),
        "diffprivlib_spend_p50_ms": 1e3 * statistics.median(latencies),
        "diffprivlib_spend_p95_ms": 1e3 * _percentile(latencies, 0.95),
    }


# ---- (b) status --------------------------------------------------------------------------------


def _copy_rows(ledger: Ledger, total: int) -> None:
    """Copy the charged rows until the period holds ``total`` releases (benchmark fixture; verify() checks it)."""
    from dplens.ledger.rules import rule_of
    from dplens.ledger.storage.base import decode_sums, encode_sums

    store = ledger._store
    with store.write() as db:
        rows = db.execute(
            "SELECT name, period, time_utc, charged_by, source, entries, entries_sha256, quantity, epsilon_alone "
            "FROM dplens_releases WHERE budget = 'default' ORDER BY seq"
        )
        record = db.read_budget("default")
        rule = rule_of(record.mode, record.target, record.rule)
        sums = rule.zero()
        seq = 0
        batch = []
        for i in range(total):
            row = rows[i % len(rows)]
            seq += 1
            sums = rule.add(sums, decode_sums(json.loads(row[7])))
            if i < len(rows):
                continue
            batch.append(("default", f"{row[0]}-copy-{i}", seq, *row[1:]))
        db._conn.executemany(
            "INSERT INTO dplens_releases (budget, name, seq, period, time_utc, charged_by, source, entries, "
            "entries_sha256, quantity, epsilon_alone) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            batch,
        )
        db.execute("UPDATE dplens_budgets SET releases_total = ? WHERE name = 'default'", (seq,))
        db.execute(
            "UPDATE dplens_periods SET releases = ?, sums = ?, spent_cache = NULL WHERE budget = 'default'",
            (total, json.dumps(encode_sums(sums))),
        )


def bench_status(directory: Path, releases: int, mix: str, verify: bool) -> dict:
    path = directory / f"status-{mix}.db"
    with Ledger.open(path, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=1000.0, delta=DELTA)
        for i, event in enumerate(configurations(mix, seed=3)):
            assert ledger.charge(event, release=f"config-{i}", charged_by=f"team-{i % 7}").accepted
        _copy_rows(ledger, releases)
    with Ledger.open(path) as ledger:
        t0 = time.perf_counter()
        status = ledger.status()
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = ledger.status()
        warm = time.perf_counter() - t0
        t0 = time.perf_counter()
        text = json.dumps(again.to_dict())
        dump = time.perf_counter() - t0
        verified = ledger.verify() if verify else None
    budget = status.budgets[0]
    assert len(budget.releases) == releases and again.budgets[0].spent_epsilon == budget.spent_epsilon
    return {
        "mix": mix,
        "releases": releases,
        "status_cold_s": cold,
        "status_warm_s": warm,
        "json_dump_s": dump,
        "json_mb": len(text) / 2**20,
        "spent_epsilon": budget.spent_epsilon,
        "spent_method": budget.periods[0].spent_method,
        "verified": None if verified is None else verified.ok,
    }


# ---- (d) the PLD engine on a status's ledger, against dp-accounting -------------------------------------------------

_PLD_OURS = """
import json, sys, time
sys.path.insert(0, {benchmarks!r})
import dplens
from bench_ledger import configurations
acc = dplens.Accountant()
for event in configurations({mix!r}, seed=3):
    acc.compose(event, 1000)
t0 = time.perf_counter()
result = acc.epsilon_result({delta!r}, method=dplens.Method.{method})
print(json.dumps([time.perf_counter() - t0, result.epsilon, result.epsilon_lower]))
"""

_PLD_THEIRS = """
import json, sys, time
sys.path.insert(0, {benchmarks!r})
from dp_accounting.pld import pld_privacy_accountant
from dplens.accountant import events as ev
from bench_ledger import configurations
events = [ev.to_dp_accounting(event) for event in configurations({mix!r}, seed=3)]
t0 = time.perf_counter()
acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
for event in events:
    acc.compose(event, 1000)
epsilon = acc.get_epsilon({delta!r})
print(json.dumps([time.perf_counter() - t0, epsilon]))
"""


def bench_pld(mixes: list[str], repeat: int) -> list[dict]:
    import subprocess

    here = str(Path(__file__).resolve().parent)
    rows = []
    for mix in mixes:
        runs: dict[str, list] = {"theirs": [], "PLD": [], "BEST": []}
        for _ in range(repeat):  # interleaved: a change of load hits every side alike
            for side in runs:
                code = _PLD_THEIRS if side == "theirs" else _PLD_OURS
                script = code.format(benchmarks=here, mix=mix, delta=DELTA, method=side)
                done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
                runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
        ours, theirs = runs["PLD"], runs["theirs"]
        pld_s = statistics.median(run[0] for run in ours)
        theirs_s = statistics.median(run[0] for run in theirs)
        rows.append(
            {
                "mix": mix,
                "dplens_pld_s": pld_s,
                "dplens_best_s": statistics.median(run[0] for run in runs["BEST"]),
                "dplens_pld_times": [run[0] for run in ours],
                "dplens_best_times": [run[0] for run in runs["BEST"]],
                "dplens_epsilon": ours[0][1],
                "dplens_epsilon_lower": ours[0][2],
                "dp_accounting_s": theirs_s,
                "dp_accounting_times": [run[0] for run in theirs],
                "dp_accounting_epsilon": theirs[0][1],
                "ratio_dp_accounting_over_dplens_pld": theirs_s / pld_s,
            }
        )
    return rows


# ---- (c) capacity per mode --------------------------------------------------------------------------------


def _fill(directory: Path, name: str, event, **budget) -> int:
    with Ledger.open(directory / f"cap-{name}.db", create=True) as ledger:
        ledger.create_budget(unit="one person", **budget)
        n = 0
        while ledger.charge(event, release=f"r{n}").accepted:
            n += 1
    return n


def bench_capacity(directory: Path) -> list[dict]:
    from dplens.accountant.curves import Zcdp

    rows = []
    release = dplens.Gaussian(noise_multiplier=20.0)
    for epsilon, delta in ((1.0, 1e-6), (3.0, 1e-6), (8.0, 1e-5)):
        rho = _largest_rho(epsilon, delta, Zcdp)
        mu = conversions.gdp_mu(epsilon, delta)
        tag = f"{epsilon:g}-{delta:g}"
        rows.append(
            {
                "epsilon": epsilon,
                "delta": delta,
                "release": "Gaussian, noise multiplier 20",
                "planned": _fill(directory, f"p{tag}", release, epsilon=epsilon, delta=delta),
                "adaptive_renyi": _fill(
                    directory, f"a{tag}", release, epsilon=epsilon, delta=delta, mode=Mode.ADAPTIVE
                ),
                "adaptive_gdp": _fill(directory, f"g{tag}", release, mu=mu, delta=delta, mode=Mode.ADAPTIVE),
                "adaptive_zcdp": _fill(directory, f"z{tag}", release, rho=rho, delta=delta, mode=Mode.ADAPTIVE),
                "mu": mu,
                "rho": rho,
                "diffprivlib": _diffprivlib_capacity(epsilon, delta, release),
            }
        )
    return rows


def _largest_rho(epsilon: float, delta: float, zcdp) -> float:
    low, high = 0.0, epsilon
    for _ in range(100):
        mid = (low + high) / 2
        if zcdp(rho=mid).epsilon(delta) <= epsilon:
            low = mid
        else:
            high = mid
    return low


def _diffprivlib_capacity(epsilon: float, delta: float, release) -> int | str:
    """diffprivlib's BudgetAccountant with each Gaussian as its own (ε, δ/2 per 1000): the δ split is a choice a
    user must make (diffprivlib composes (ε, δ) pairs, not curves): half the budget's δ as slack for advanced
    composition, the other half spread over at most 1000 releases."""
    try:
        from diffprivlib import BudgetAccountant
        from diffprivlib.utils import BudgetError
    except ImportError:
        return "not installed"
    per_delta = delta / 2 / 1000
    per_epsilon = dplens.Accountant().compose(release).epsilon(per_delta)
    accountant = BudgetAccountant(epsilon=epsilon, delta=delta, slack=delta / 2)
    n = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while n < 1000:
            try:
                accountant.spend(per_epsilon, per_delta)
            except BudgetError:
                break
            n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=10_000)
    parser.add_argument("--status-releases", type=int, default=100_000)
    parser.add_argument("--timed", type=int, default=200)
    parser.add_argument("--mixes", default="tables,tables+training,tables+counts,all", help="status: mixes")
    parser.add_argument("--charge-mix", default="tables+training", help="the charge benchmark's mix")
    parser.add_argument("--no-verify", action="store_true", help="skip Ledger.verify of the status ledgers")
    parser.add_argument("--parts", default="charge,status,capacity", help="which parts to run (also: pld)")
    parser.add_argument("--pld-mixes", default="tables+training,tables+counts,all", help="pld: mixes")
    parser.add_argument("--repeat", type=int, default=3, help="pld: runs per side")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    results: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}",
        "command": "python benchmarks/bench_ledger.py " + " ".join(sys.argv[1:] if argv is None else argv),
    }
    with tempfile.TemporaryDirectory(prefix="dplens-bench-ledger-") as tmp:
        directory = Path(tmp)
        parts = args.parts.split(",")
        if "charge" in parts:
            results["charge"] = bench_charge(directory, args.releases, args.timed, args.charge_mix)
            print(json.dumps(results["charge"], indent=1), flush=True)
        if "status" in parts:
            results["status"] = []
            for mix in args.mixes.split(","):
                row = bench_status(directory, args.status_releases, mix, verify=not args.no_verify)
                results["status"].append(row)
                print(json.dumps(row), flush=True)
        if "pld" in parts:
            results["pld"] = bench_pld(args.pld_mixes.split(","), args.repeat)
            for row in results["pld"]:
                print(json.dumps(row), flush=True)
        if "capacity" in parts:
            results["capacity"] = bench_capacity(directory)
            print(json.dumps(results["capacity"], indent=1), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
