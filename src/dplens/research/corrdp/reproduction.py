"""Reproduction of seed 000 (CorrDP): CorrDP-SGD against DP-SGD on a data set with known feature correlation.

``dplens reproduce corrdp`` → :func:`run`. Outputs (PNG, CSV, JSON, README.md) go to ``out_dir``.

The seed is a 4-page extended abstract without experiments (note ``research/corrdp-and-dp-ftrl.md`` §A), so what
can be reproduced is (i) the note's reference values C1–C8, recomputed by the library, and (ii) the paper's
qualitative utility claim (Theorem 3.6 versus the DP-ERM rate): with few sensitive features and weakly correlated
insensitive ones, CorrDP-SGD (eq. (3) weights) has lower excess empirical risk than DP-SGD at equal (ε, δ), by a
factor governed by √(Σ_i w_i / m). Also run: CorrDP-SGD with the TV estimated in-sample plus an upper-confidence
inflation (Def. 3.10 role; distribution-dependent, (ε, 2δ)).
"""

from __future__ import annotations

import csv
import json
import math
import pathlib
import time
import warnings

import numpy as np

from dplens.research.corrdp import accounting as acc
from dplens.research.corrdp import mechanism as mc

__all__ = ["run"]

MODEL = mc.LossModel.LOGISTIC
RADIUS = 5.0
DELTA = 1e-5
BATCH = 50
M_SENSITIVE = 2
PROXIES = (0.5, 0.3)


def _reference_values() -> list[dict]:
    """The note's §A6 reference values recomputed by dplens (C1–C8)."""
    rows = []

    def add(name: str, got: float, expected: float) -> None:
        rows.append({"test": name, "dplens": got, "note": expected, "match": abs(got - expected) <= 1e-6})

    t = np.zeros((2, 3))
    for k in (1, 2):
        t[1, k], t[0, k] = 0.5 * k / 3, 0.5 * (1 - k / 3)
    ex = acc.JointDistribution(t)
    add("C1 d((1,2),(1,1)) Example 2.5", acc.dataset_distance(ex, [0], [1, 2], [1, 1]).distance, 1 / 3)
    add("C2 Delta_C f", acc.correlated_sensitivity([1, 1, 1], [0], {1: 1 / 3, 2: 0.0}), 4 / 3)
    add("C2 accuracy bound K=3 beta=0.1", acc.laplace_accuracy_bound(4 / 3, 1, dimension=3, beta=0.1), 4.534930)
    add("C2 coverage K=3 beta=0.1", acc.laplace_accuracy_coverage(dimension=3, beta=0.1), 0.903296)
    add("C2 accuracy bound K=10", acc.laplace_accuracy_bound(1.5, 0.5, dimension=10, beta=0.05), 15.894952)
    add("C3 sigma_0^2 eps=1 delta=1e-5 T=n^2", acc.base_noise_variance(
        epsilon=1, delta=1e-5, lipschitz=1, steps=10**6, n=1000), 12.512925)  # fmt: skip
    add("C3 sigma_0^2 eps=0.5 delta=1e-6", acc.base_noise_variance(
        epsilon=0.5, delta=1e-6, lipschitz=1, steps=10**6, n=1000), 59.262042)  # fmt: skip
    tv4 = dict(zip(range(2, 10), [0.5, 0.3, 0.1, 0.05, 0.02, 0.0, 1.0, 0.2], strict=True))
    add("C4 sum of weights", float(acc.noise_weights(10, [0, 1], tv4).sum()), 4.23)
    add("C4 utility proxy (min->max erratum)", acc.utility_proxy(list(tv4.values()), num_sensitive=2), 4.17)
    add("C5 inflation (1,10,1e-5,1e4,1/2)", acc.paper_tv_inflation(
        c2=1, gamma=0.5, num_insensitive=10, delta=1e-5, n=10**4), 0.0743384)  # fmt: skip
    xor = np.zeros((2, 2, 2))
    for a in range(2):
        for b in range(2):
            xor[a ^ b, a, b] += 0.225
            xor[1 - (a ^ b), a, b] += 0.025
    xd = acc.JointDistribution(xor)
    add("C6 noisy XOR TV(2)", acc.feature_tv(xd, [0], 1), 0.0)
    add("C6 noisy XOR d", acc.dataset_distance(xd, [0], [0, 0, 0], [0, 1, 0]).distance, 0.8)
    j7 = np.zeros((2, 2, 2))
    j7[0, 0, 0] = j7[1, 1, 0] = j7[0, 1, 1] = j7[1, 0, 1] = 0.25
    add("C7 joint TV(3)", acc.feature_tv(acc.JointDistribution(j7), [0, 1], 2), 1.0)
    add("C8 max_k k TV_(k)^2", acc.lower_bound_term(list(tv4.values())), 1.0)
    return rows


def _one(seed: int, *, m: int, epsilon: float, n: int, steps: int) -> dict:
    rng = np.random.default_rng(seed)
    data = mc.make_correlated_data(
        n=n, num_features=m, num_sensitive=M_SENSITIVE, proxy_strength=PROXIES, model=MODEL, rng=rng
    )
    w_true = acc.noise_weights(m, data.sensitive, data.tv)
    est = acc.estimate_feature_tvs(data.codes, data.sensitive, beta=DELTA / (m - M_SENSITIVE), num_values=(2,) * m)
    w_est = acc.noise_weights(m, data.sensitive, dict(zip(range(M_SENSITIVE, m), est.upper, strict=True)))
    theta_hat = mc.minimise_loss(data.features, data.labels, model=MODEL, radius=RADIUS)
    f_hat = mc.empirical_loss(theta_hat, data.features, data.labels, model=MODEL)
    kw = dict(model=MODEL, epsilon=epsilon, delta=DELTA, steps=steps, batch_size=BATCH, radius=RADIUS)
    out = {"seed": seed, "m": m, "epsilon": epsilon, "sum_w_true": float(w_true.sum()), "sum_w_est": float(w_est.sum())}
    for name, weights in (("dp_sgd", np.ones(m)), ("corrdp_sgd", w_true), ("corrdp_sgd_estimated_tv", w_est)):
        res = mc.corrdp_sgd(data.features, data.labels, weights=weights, rng=np.random.default_rng(10_000 + seed), **kw)
        out[name] = mc.empirical_loss(res.theta, data.features, data.labels, model=MODEL) - f_hat
    return out


def _summ(rows: list[dict], key: str, method: str, values: list) -> tuple[np.ndarray, np.ndarray]:
    mean, half = [], []
    for v in values:
        x = np.array([r[method] for r in rows if r[key] == v])
        mean.append(x.mean())
        half.append(1.96 * x.std(ddof=1) / math.sqrt(x.size) if x.size > 1 else 0.0)
    return np.array(mean), np.array(half)


def run(out_dir: pathlib.Path, *, quick: bool = False) -> list[pathlib.Path]:
    """Write the CorrDP reproduction (figure, CSV, JSON, README.md) into ``out_dir``; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    start = time.time()
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = range(3) if quick else range(8)
    n = 600 if quick else 800
    steps = n
    eps_grid = [0.25, 0.5, 1.0, 2.0, 4.0]
    m_grid = [10, 20, 40, 80]
    methods = ("dp_sgd", "corrdp_sgd", "corrdp_sgd_estimated_tv")
    labels = {
        "dp_sgd": "DP-SGD",
        "corrdp_sgd": "CorrDP-SGD (known TV)",
        "corrdp_sgd_estimated_tv": "CorrDP-SGD (TV UCB)",
    }

    with warnings.catch_warnings():
        warnings.simplefilter("error", acc.CorrelationWarning)
        rows_eps = [_one(s, m=20, epsilon=e, n=n, steps=steps) for e in eps_grid for s in seeds]
        rows_m = [_one(s, m=m, epsilon=1.0, n=n, steps=steps) for m in m_grid for s in seeds]

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for meth in methods:
        mean, half = _summ(rows_eps, "epsilon", meth, eps_grid)
        axes[0].errorbar(eps_grid, mean, yerr=half, marker="o", capsize=3, label=labels[meth])
        mean, half = _summ(rows_m, "m", meth, m_grid)
        axes[1].errorbar(m_grid, mean, yerr=half, marker="o", capsize=3, label=labels[meth])
    axes[0].set(xscale="log", yscale="log", xlabel="ε (δ = 1e-5)", ylabel="excess empirical risk R(θ)",
                title=f"m = 20, m_s = 2, n = {n}, T = n")  # fmt: skip
    axes[1].set(xscale="log", yscale="log", xlabel="m (m_s = 2)", ylabel="excess empirical risk R(θ)",
                title="ε = 1")  # fmt: skip
    for ax, ticks in ((axes[0], eps_grid), (axes[1], m_grid)):
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, which="both")
    fig.suptitle("CorrDP-SGD vs DP-SGD, logistic regression, two proxies TV = 0.5, 0.3 (mean ± 95% CI)")
    fig.tight_layout()
    fig_path = out_dir / "corrdp_sgd_vs_dp_sgd.png"
    fig.savefig(fig_path, dpi=120)
    plt.close(fig)

    csv_path = out_dir / "runs.csv"
    all_rows = [dict(r, sweep="epsilon") for r in rows_eps] + [dict(r, sweep="m") for r in rows_m]
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(all_rows[0]))
        writer.writeheader()
        writer.writerows(all_rows)

    refs = _reference_values()
    summary_eps = {
        meth: dict(zip(map(str, eps_grid), _summ(rows_eps, "epsilon", meth, eps_grid)[0].tolist(), strict=True))
        for meth in methods
    }
    summary_m = {
        meth: dict(zip(map(str, m_grid), _summ(rows_m, "m", meth, m_grid)[0].tolist(), strict=True)) for meth in methods
    }
    ratio_eps = {e: summary_eps["corrdp_sgd"][str(e)] / summary_eps["dp_sgd"][str(e)] for e in eps_grid}
    ratio_m = {m: summary_m["corrdp_sgd"][str(m)] / summary_m["dp_sgd"][str(m)] for m in m_grid}
    sum_w = {m: float(np.mean([r["sum_w_true"] for r in rows_m if r["m"] == m])) for m in m_grid}
    sum_w_est = {m: float(np.mean([r["sum_w_est"] for r in rows_m if r["m"] == m])) for m in m_grid}
    predicted = {m: math.sqrt(sum_w[m] / m) for m in m_grid}
    wins_eps = sum(r["corrdp_sgd"] < r["dp_sgd"] for r in rows_eps)
    summary = {
        "quick": quick,
        "n": n,
        "steps": steps,
        "seeds": len(seeds),
        "reference_values": refs,
        "mean_excess_risk_by_epsilon": summary_eps,
        "mean_excess_risk_by_m": summary_m,
        "corrdp_over_dp_ratio_by_epsilon": {str(k): v for k, v in ratio_eps.items()},
        "corrdp_over_dp_ratio_by_m": {str(k): v for k, v in ratio_m.items()},
        "predicted_ratio_sqrt_sum_w_over_m": {str(k): v for k, v in predicted.items()},
        "sum_weights_true": {str(k): v for k, v in sum_w.items()},
        "sum_weights_estimated_ucb": {str(k): v for k, v in sum_w_est.items()},
        "corrdp_wins": f"{wins_eps}/{len(rows_eps)}",
        "runtime_s": round(time.time() - start, 1),
    }
    json_path = out_dir / "summary.json"
    json_path.write_text(json.dumps(summary, indent=2), encoding="utf-8")

    ref_lines = "\n".join(
        f"| {r['test']} | {r['dplens']:.7g} | {r['note']:.7g} | {'yes' if r['match'] else 'NO'} |" for r in refs
    )
    m_lines = "\n".join(
        f"| {m} | {sum_w[m]:.2f} | {sum_w_est[m]:.2f} | {summary_m['dp_sgd'][str(m)]:.4g} | "
        f"{summary_m['corrdp_sgd'][str(m)]:.4g} | {summary_m['corrdp_sgd_estimated_tv'][str(m)]:.4g} | "
        f"{ratio_m[m]:.3f} | {predicted[m]:.3f} |"
        for m in m_grid
    )
    e_lines = "\n".join(
        f"| {e} | {summary_eps['dp_sgd'][str(e)]:.4g} | {summary_eps['corrdp_sgd'][str(e)]:.4g} | "
        f"{summary_eps['corrdp_sgd_estimated_tv'][str(e)]:.4g} | {ratio_eps[e]:.3f} |"
        for e in eps_grid
    )
    n_ref_ok = sum(r["match"] for r in refs)
    wins_m = sum(r["corrdp_sgd"] < r["dp_sgd"] for r in rows_m)
    gain = summary_eps["dp_sgd"]["1.0"] - summary_eps["corrdp_sgd"]["1.0"]
    keep = (summary_eps["dp_sgd"]["1.0"] - summary_eps["corrdp_sgd_estimated_tv"]["1.0"]) / gain if gain > 0 else 0.0
    ratio_m_txt = ", ".join(f"{ratio_m[m]:.2f}" for m in m_grid)
    pred_m_txt = ", ".join(f"{predicted[m]:.2f}" for m in m_grid)
    readme = f"""# CorrDP (seed 000): CorrDP-SGD vs DP-SGD with known feature correlation

Wang, Zhang, Cummings, *Integrating Feature Correlation in Differential Privacy with Applications in DP-ERM*
(extended abstract; notes and errata in `research/corrdp-and-dp-ftrl.md` Part A). Regenerate with
`dplens reproduce corrdp`{" (this run: --quick)" if quick else ""}. Runtime {summary["runtime_s"]} s.

The seed has **no experiments**: there is no table or figure to match numerically. We reproduce (1) the note's
reference values and (2) the paper's qualitative utility claim (Theorem 3.6 vs the DP-ERM rate Õ(√m/(nε))).

## 1. Reference values (note §A6), recomputed by dplens

| test | dplens | note | match (1e-6) |
|---|---|---|---|
{ref_lines}

## 2. Utility: CorrDP-SGD vs DP-SGD

Data (`make_correlated_data`): n = {n} records, m binary features encoded ±1/√m (‖x‖ = 1, Assumption 3.3),
m_s = 2 sensitive features; insensitive feature 3 copies sensitive feature 1 with probability 0.5 and feature 4
copies feature 2 with probability 0.3, all other insensitive features are independent, so TV(3) = 0.5,
TV(4) = 0.3, TV(j) = 0 otherwise **exactly** (the tests check on the exact joint table that the conservative
max over conditioning sets equals TV(j), so no `CorrelationWarning` applies). Logistic labels from a random θ*
with ‖θ*‖ = 4. Algorithm 1 with step sizes
α_t = D/√((L² + Σσ_i²)t), D = {RADIUS}, L = 1, batch {BATCH}, T = n steps, last iterate, noise from eq. (3)
(weights 1 for DP-SGD, max{{TV(i), (m_s/m)²}} for CorrDP-SGD, and the weights from our plug-in TV estimate plus a
McDiarmid upper-confidence bound at β = δ/m_u for the "TV UCB" variant). Excess empirical risk R(θ) = F(θ) − F(θ̂),
θ̂ by projected full-batch gradient descent; {len(seeds)} seeds; the same noise seed for all methods.

![figure](corrdp_sgd_vs_dp_sgd.png)

By ε (m = 20): mean excess risk

| ε | DP-SGD | CorrDP-SGD | CorrDP-SGD (TV UCB) | ratio CorrDP/DP |
|---|---|---|---|---|
{e_lines}

By m (ε = 1): Σw (true / UCB), mean excess risk, and the ratio against √(Σ_i w_i/m) — the ratio of the total
noise standard deviations, which is what Theorem 3.6's bound scales with (√(m_s + max{{Σ_U TV, m_s/4}}) vs √m).

| m | Σw true | Σw UCB | DP-SGD | CorrDP-SGD | CorrDP (UCB) | ratio | √(Σw/m) |
|---|---|---|---|---|---|---|---|
{m_lines}

## What matched the paper

- Every reference value of the note (C1–C8) is reproduced to 1e-6 ({n_ref_ok}/{len(refs)} in table 1).
- The direction of the utility claim: CorrDP-SGD has lower excess empirical risk than DP-SGD at the same (ε, δ)
  in {wins_eps}/{len(rows_eps)} paired runs of the ε sweep and {wins_m}/{len(rows_m)} of the m sweep; mean ratio
  CorrDP/DP at ε = 1, m = 20: {ratio_eps[1.0]:.3f} (Σw = {sum_w[20]:.2f} of m = 20).
- The in-sample TV estimate with an upper-confidence inflation keeps {keep:.0%} of the gain at ε = 1, m = 20
  (fraction of the DP-SGD → CorrDP-SGD risk reduction retained); its inflation (our McDiarmid bound at
  β = δ/m_u) is large at n = {n}, so its weights are far above the true ones (Σw {sum_w_est[20]:.1f} vs
  {sum_w[20]:.2f}), as expected from Def. 3.10's inflation term at small n.

## What did not match / could not be checked

- The measured risk ratio does not follow √(Σw/m) (m sweep: measured {ratio_m_txt}; predicted {pred_m_txt}).
  Theorem 3.6 is an upper bound up to log factors; the excess risk also contains optimisation error (the same
  for both methods); at large ε noise is no longer dominant (ratio → 1); and at large m DP-SGD's risk saturates
  because the iterate is noise-dominated inside the ‖θ‖ ≤ D ball while the ±1/√m encoding shrinks each
  coordinate's signal, so the √(m/m_s) gain is not visible as a clean rate here. Only the ordering is asserted.
- T = n instead of the Θ(n²) steps of Theorem 3.6 (n² ≈ 10⁶ steps per run is too slow here); σ_0² ∝ T, so this
  only changes the scale of the noise, identically for both methods.
- **Eq. (3) drops universal constants** (moments-accountant c₂, the ε ≤ c₁ range, C₁, C₂ of Assumption 3.4): the
  (ε, δ) in these plots is the paper's formula, **not an audited guarantee** (note §A3, §A7.4). dplens never reports
  an ε for CorrDP-SGD.
- Errata applied (note §0, §A1, §A3): Definition 2.2 read as exp(ε/d(D, D′)) (the printed exponent lost its ε);
  Theorem 3.6's "min" read as "max"; Def. 2.4's "two entries" read as one entry e vs e′; the label index m+1 of
  Def. 2.4 is not enumerated (labels are fixed by Assumption 3.1).
- The paper's privacy theorems need d(D, D′) ≤ TV(j) for a change in feature j, which it does not state; the
  noisy-XOR distribution (C6) has TV(j) = 0 but d = 0.8. dplens warns (`CorrelationWarning`) and offers the
  conservative TV*(j). Our synthetic data was built so that TV*(j) = TV(j); with two proxies of the same
  sensitive feature this would fail.
- The estimated-TV variant is distribution-dependent ((ε, 2δ) under i.i.d. data, Theorem 3.11) and our
  estimator and its concentration bound are ours (the paper's are "in the full version").
"""
    readme_path = out_dir / "README.md"
    readme_path.write_text(readme, encoding="utf-8")
    return [fig_path, csv_path, json_path, readme_path]
