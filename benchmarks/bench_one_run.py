"""One-run audits from scores: the rigorous analyses side by side, jax_privacy beside them, their validity (issue 37).

    PYTHONPATH=$PWD/src nice python benchmarks/bench_one_run.py [--seeds 3] [--validity-seeds 400]
        [--write benchmarks/RESULTS.md]

Part 1 — tightness, on one-run scores (each of m canaries in with probability ½, a member's score shifted by μ, N(0, 1)
noise; numpy seed s draws the inclusion bits then the noise) and on ε = 1 randomized-response canaries, δ = 1e-5,
significance 0.05, symmetric guesses at dplens's 32 a-priori cut-offs unless said otherwise:

- Steinke, Nasr, Jagielski 2023 alone at α (dplens's rigorous bound before issue 37);
- the f-DP audit of Mahloujifar, Melis, Chaudhuri 2025 against the (ε, δ)-DP curve, alone at α;
- the combination ``dplens audit-scores --one-run`` reports: both, α split 1:4, the larger bound;
- the f-DP (ε, δ) analysis with jax_privacy's thresholds (top-k guesses, Bonferroni over the ROC's Pareto frontier:
  the issue's reference numbers, a heuristic);
- the Gaussian-family f-DP number (an estimate) — dplens's (32 a-priori cut-offs) and jax_privacy 2.0's
  ``epsilon_one_run_fdp`` (Pareto thresholds), with dplens's Gaussian-family analysis on jax_privacy's thresholds
  beside it to show where the two differ; jax_privacy's Steinke et al. (``epsilon_one_run``).

jax_privacy runs in a child process (importing it starts JAX's threads); it is skipped with a note if absent.

Part 2 — validity: over ``--validity-seeds`` seeds of canary games with known true ε, how often each analysis reports
a bound above it, with a one-sided binomial test against Binom(N, α) (a p-value below 10⁻³ would be a failure), and
the Gaussian-family number on randomized response as the negative control that shows the test can fail.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
DELTA, ALPHA = 1e-5, 0.05
GAUSSIAN_SETTINGS = [(2.0, 1000), (3.0, 1000), (2.0, 5000), (1.0, 10_000), (2.0, 100_000)]
RR_SETTING = (1.0, 10_000)


def gaussian_scores(mu: float, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    member = rng.random(m) < 0.5
    return rng.normal(0.0, 1.0, m) + mu * member, member


def rr_scores(eps: float, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    member = rng.random(m) < 0.5
    return (member ^ (rng.random(m) < 1 / (1 + math.exp(eps)))).astype(float), member


def rr_true_epsilon(eps: float, delta: float) -> float:
    """ε(δ) of ε-randomized response: δ(ε') = (e^ε − e^ε')/(1 + e^ε) for ε' < ε."""
    return math.log(math.exp(eps) - delta * (1 + math.exp(eps)))


def dplens_row(scores: np.ndarray, member: np.ndarray, delta: float) -> dict[str, float]:
    from dplens.auditing import one_run as orun

    sym = orun.Symmetric()

    def run(**kwargs) -> float:
        return orun.one_run_audit(scores, member, significance=ALPHA, delta=delta, **kwargs).epsilon_lower_bound

    pareto = orun.ParetoFrontierHeuristic()
    return {
        "steinke": run(rule=sym, analysis=orun.ApproximateDP()),
        "fdp": run(rule=sym, analysis=orun.EpsilonDeltaFDP()),
        "combined": run(rule=sym, analysis=orun.Combined.default()),
        "fdp_pareto": run(correction=pareto, analysis=orun.EpsilonDeltaFDP()),
        "gaussian": run(rule=sym, analysis=orun.GaussianFDP()),
        "gaussian_pareto": run(correction=pareto, analysis=orun.GaussianFDP()),
    }


_JAX_PROBE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from jax_privacy.auditing import CanaryScoreAuditor
    sys.path.insert(0, sys.argv[1])
    from bench_one_run import gaussian_scores, rr_scores
    out = {}
    for key in json.loads(sys.argv[2]):
        kind, p, m, seed = key.split("/")
        make = gaussian_scores if kind == "gaussian" else rr_scores
        scores, member = make(float(p), int(m), int(seed))
        auditor = CanaryScoreAuditor(scores[member], scores[~member])
        out[key] = [auditor.epsilon_one_run(0.05, 1e-5), auditor.epsilon_one_run_fdp(0.05, 1e-5)]
    print(json.dumps(out))
    """
)


def jax_numbers(keys: list[str]) -> tuple[dict[str, list[float]], str]:
    import importlib.util

    if importlib.util.find_spec("jax_privacy") is None:
        return {}, "jax_privacy is not installed: its columns are empty"
    proc = subprocess.run(
        [sys.executable, "-c", _JAX_PROBE, str(Path(__file__).resolve().parent), json.dumps(keys)],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if proc.returncode != 0:
        return {}, f"jax_privacy failed: {proc.stderr.strip().splitlines()[-1]}"
    from importlib import metadata

    return json.loads(proc.stdout.strip().splitlines()[-1]), f"jax_privacy {metadata.version('jax_privacy')}"


def tightness(seeds: int) -> tuple[list[dict], str]:
    from dplens.accountant import conversions

    rows, keys = [], []
    for mu, m in GAUSSIAN_SETTINGS:
        for seed in range(seeds):
            start = time.perf_counter()
            row = dplens_row(*gaussian_scores(mu, m, seed), DELTA)
            label, true = f"Gaussian μ = {mu:g}, m = {m}", conversions.gdp_epsilon(mu, DELTA)
            seconds = time.perf_counter() - start
            rows.append({"key": f"gaussian/{mu:g}/{m}/{seed}", "label": label, "seed": seed, "true": true,
                         "seconds": seconds, **row})  # fmt: skip
            if m <= 10_000:
                keys.append(rows[-1]["key"])
    eps, m = RR_SETTING
    for seed in range(seeds):
        start = time.perf_counter()
        row = dplens_row(*rr_scores(eps, m, seed), DELTA)
        label, true = f"randomized response ε = {eps:g}, m = {m}", rr_true_epsilon(eps, DELTA)
        seconds = time.perf_counter() - start
        rows.append({"key": f"rr/{eps:g}/{m}/{seed}", "label": label, "seed": seed, "true": true, "seconds": seconds,
                     **row})  # fmt: skip
        keys.append(rows[-1]["key"])
    jax, note = jax_numbers(keys)
    for row in rows:
        row["jax_steinke"], row["jax_gaussian"] = jax.get(row["key"], (None, None))
    return rows, note


def _false_alarms(make, true_eps: float, delta: float, seeds: int, alpha: float, analyses: dict) -> dict[str, int]:
    from dplens.auditing import one_run as orun

    counts = dict.fromkeys(analyses, 0)
    for seed in np.random.SeedSequence(3700).spawn(seeds):
        scores, member = make(np.random.default_rng(seed))
        for name, analysis in analyses.items():
            bound = orun.one_run_audit(
                scores, member, significance=alpha, delta=delta, rule=orun.Symmetric(), analysis=analysis
            ).epsilon_lower_bound
            counts[name] += bound > true_eps
    return counts


def validity(seeds: int) -> list[dict]:
    from scipy import stats

    from dplens.accountant import conversions
    from dplens.auditing import one_run as orun

    bounds = {"combined": orun.Combined.default(), "steinke": orun.ApproximateDP(), "fdp": orun.EpsilonDeltaFDP()}
    games = [
        ("Gaussian μ = 2, m = 1000, δ = 1e-5", lambda rng: _gauss(rng, 2.0, 1000), conversions.gdp_epsilon(2.0, DELTA),
         DELTA, bounds),
        ("randomized response ε = 1, m = 2000, δ = 0", lambda rng: _rr(rng, 1.0, 2000), 1.0, 0.0, bounds),
        ("randomized response ε = 1, m = 10000, δ = 1e-5 (negative control: Gaussian family)",
         lambda rng: _rr(rng, 1.0, 10_000), rr_true_epsilon(1.0, DELTA), DELTA,
         {"combined": orun.Combined.default(), "gaussian (estimate)": orun.GaussianFDP()}),
    ]  # fmt: skip
    rows = []
    for label, make, true_eps, delta, analyses in games:
        for alpha in (0.05, 0.2):
            start = time.perf_counter()
            counts = _false_alarms(make, true_eps, delta, seeds, alpha, analyses)
            for name, count in counts.items():
                p = stats.binomtest(count, seeds, alpha, alternative="greater").pvalue
                rows.append({"game": label, "alpha": alpha, "analysis": name, "above": count, "seeds": seeds,
                             "p": p, "seconds": time.perf_counter() - start})  # fmt: skip
    return rows


def exact_sizes() -> list[dict]:
    """The exact probability that each bound exceeds ε when all r = 300 guesses are ε-randomized-response outputs
    (V ~ Binom(r, e^ε/(1 + e^ε)): the extremal case of both theorems), summed over V — the test's true size."""
    from scipy import special, stats

    from dplens.auditing import one_run as orun

    rows = []
    for eps in (0.5, 1.0, 2.0):
        r, q = 300, special.expit(eps)
        for name, bound in (
            ("steinke", orun.one_run_epsilon_lower_bound),
            ("fdp", orun.fdp_one_run_epsilon_lower_bound),
        ):
            size = sum(
                stats.binom.pmf(v, r, q)
                for v in range(r + 1)
                if bound(canaries=1000, guesses=r, correct=v, significance=ALPHA) > eps
            )
            rows.append({"epsilon": eps, "analysis": name, "size": float(size)})
    return rows


def _gauss(rng: np.random.Generator, mu: float, m: int) -> tuple[np.ndarray, np.ndarray]:
    member = rng.random(m) < 0.5
    return rng.normal(mu * member, 1.0), member


def _rr(rng: np.random.Generator, eps: float, m: int) -> tuple[np.ndarray, np.ndarray]:
    member = rng.random(m) < 0.5
    return (member ^ (rng.random(m) < 1 / (1 + math.exp(eps)))).astype(float), member


def _cell(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def render(rows: list[dict], note: str, checks: list[dict], exact: list[dict], command: str) -> str:
    from importlib import metadata

    head = (
        f"### One-run audits: the rigorous analyses, jax_privacy, validity (issue 37) ({time.strftime('%Y-%m-%d')}, "
        f"{platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}, "
        f"scipy {metadata.version('scipy')}; {note})\n\nCommand: `{command}`\n\n"
        "Significance 0.05, δ = 1e-5. Columns: Steinke et al. alone; f-DP against the (ε, δ) curve alone; **the "
        "combination `audit-scores --one-run` reports** (α split 1:4, the larger bound: valid); the f-DP (ε, δ) "
        "analysis with jax_privacy's Pareto-frontier Bonferroni (the issue's reference, a heuristic); the "
        "Gaussian-family number (an ESTIMATE) of dplens (32 a-priori cut-offs) and of dplens on jax_privacy's "
        "thresholds; jax_privacy 2.0's `epsilon_one_run_fdp` (Gaussian family) and `epsilon_one_run`. The first "
        "three use symmetric guesses at dplens's 32 a-priori cut-offs.\n\n"
        "| scores | seed | true ε | Steinke | f-DP (ε, δ) | **combined** | f-DP (ε, δ), jax thresholds | "
        "Gaussian est. | Gaussian est., jax thresholds | jax Gaussian | jax Steinke | s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r['label']} | {r['seed']} | {r['true']:.2f} | {r['steinke']:.2f} | {r['fdp']:.2f} | "
        f"**{r['combined']:.2f}** | {r['fdp_pareto']:.2f} | {r['gaussian']:.2f} | {r['gaussian_pareto']:.2f} | "
        f"{_cell(r['jax_gaussian'])} | {_cell(r['jax_steinke'])} | {r['seconds']:.1f} |\n"
        for r in rows
    )
    valid = (
        "\nValidity: bounds above the true ε over seeded canary games (symmetric guesses, 32 a-priori cut-offs); "
        "p = P[Binom(N, α) ≥ count] (a p-value below 10⁻³ would reject validity).\n\n"
        "| game | α | analysis | above the true ε | p |\n|---|---|---|---|---|\n"
        + "".join(
            f"| {c['game']} | {c['alpha']:g} | {c['analysis']} | {c['above']} / {c['seeds']} | "
            f"{'< 1e-300' if c['p'] < 1e-300 else format(c['p'], '.3g')} |\n"
            for c in checks
        )
    )
    sharp = (
        "\nThe sharp case, exactly: all r = 300 guesses ε-randomized-response outputs of m = 1000 canaries, "
        "P[bound > ε] summed over V ~ Binom(r, e^ε/(1 + e^ε)) at α = 0.05 (the tests check it is at most α and above "
        "α/5).\n\n| ε | Steinke et al. | f-DP (ε, δ) |\n|---|---|---|\n"
        + "".join(
            f"| {eps:g} | {sizes['steinke']:.4f} | {sizes['fdp']:.4f} |\n" for eps, sizes in _by_epsilon(exact).items()
        )
    )
    return head + body + valid + sharp


def _by_epsilon(rows: list[dict]) -> dict[float, dict[str, float]]:
    out: dict[float, dict[str, float]] = {}
    for row in rows:
        out.setdefault(row["epsilon"], {})[row["analysis"]] = row["size"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per tightness setting (default 3)")
    parser.add_argument("--validity-seeds", type=int, default=400, help="seeds per validity check (default 400)")
    parser.add_argument("--write", type=Path, help="write the section into this RESULTS.md")
    args = parser.parse_args()
    rows, note = tightness(args.seeds)
    checks = validity(args.validity_seeds)
    command = "PYTHONPATH=$PWD/src nice python benchmarks/bench_one_run.py " + " ".join(sys.argv[1:])
    text = render(rows, note, checks, exact_sizes(), command.strip())
    print(text)
    if args.write:
        from results_md import write_section

        write_section(args.write, "bench_one_run", text)


if __name__ == "__main__":
    main()
