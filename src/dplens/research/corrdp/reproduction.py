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

import json
import math
import pathlib
import time
import warnings

import numpy as np

from dplens.research import _reproduction_common as common
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
    """The mean of ``method``'s excess risk at each ``key`` value and its 95 % confidence half-width."""
    stats = [common.mean_ci95([r[method] for r in rows if r[key] == v]) for v in values]
    return np.array([mean for mean, _ in stats]), np.array([half for _, half in stats])


EPS_GRID = [0.25, 0.5, 1.0, 2.0, 4.0]
M_GRID = [10, 20, 40, 80]
METHODS = ("dp_sgd", "corrdp_sgd", "corrdp_sgd_estimated_tv")


def _sweeps(seeds: range, n: int, steps: int) -> tuple[list[dict], list[dict]]:
    """The ε sweep (m = 20) and the m sweep (ε = 1), every run per seed; a ``CorrelationWarning`` is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", acc.CorrelationWarning)
        rows_eps = [_one(s, m=20, epsilon=e, n=n, steps=steps) for e in EPS_GRID for s in seeds]
        rows_m = [_one(s, m=m, epsilon=1.0, n=n, steps=steps) for m in M_GRID for s in seeds]
    return rows_eps, rows_m


def _plot(out_dir: pathlib.Path, rows_eps: list[dict], rows_m: list[dict], n: int) -> pathlib.Path:
    """``corrdp_sgd_vs_dp_sgd.png``: mean excess risk ± 95 % CI against ε and against m."""
    import matplotlib.ticker

    labels = {
        "dp_sgd": "DP-SGD",
        "corrdp_sgd": "CorrDP-SGD (known TV)",
        "corrdp_sgd_estimated_tv": "CorrDP-SGD (TV UCB)",
    }
    fig, axes = common.pyplot().subplots(1, 2, figsize=(11, 4.2))
    for meth in METHODS:
        mean, half = _summ(rows_eps, "epsilon", meth, EPS_GRID)
        axes[0].errorbar(EPS_GRID, mean, yerr=half, marker="o", capsize=3, label=labels[meth])
        mean, half = _summ(rows_m, "m", meth, M_GRID)
        axes[1].errorbar(M_GRID, mean, yerr=half, marker="o", capsize=3, label=labels[meth])
    axes[0].set(xscale="log", yscale="log", xlabel="ε (δ = 1e-5)", ylabel="excess empirical risk R(θ)",
                title=f"m = 20, m_s = 2, n = {n}, T = n")  # fmt: skip
    axes[1].set(xscale="log", yscale="log", xlabel="m (m_s = 2)", ylabel="excess empirical risk R(θ)",
                title="ε = 1")  # fmt: skip
    for ax, ticks in ((axes[0], EPS_GRID), (axes[1], M_GRID)):
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, which="both")
    fig.suptitle("CorrDP-SGD vs DP-SGD, logistic regression, two proxies TV = 0.5, 0.3 (mean ± 95% CI)")
    fig.tight_layout()
    return common.save_figure(fig, out_dir / "corrdp_sgd_vs_dp_sgd.png", dpi=120)


def _statistics(rows_eps: list[dict], rows_m: list[dict]) -> dict[str, dict]:
    """Mean excess risks by ε and by m, the CorrDP/DP ratios, Σw (true and UCB) and the predicted √(Σw/m)."""
    by_eps = {
        meth: dict(zip(map(str, EPS_GRID), _summ(rows_eps, "epsilon", meth, EPS_GRID)[0].tolist(), strict=True))
        for meth in METHODS
    }
    by_m = {
        meth: dict(zip(map(str, M_GRID), _summ(rows_m, "m", meth, M_GRID)[0].tolist(), strict=True)) for meth in METHODS
    }
    sum_w = {m: float(np.mean([r["sum_w_true"] for r in rows_m if r["m"] == m])) for m in M_GRID}
    return {
        "by_eps": by_eps,
        "by_m": by_m,
        "ratio_eps": {e: by_eps["corrdp_sgd"][str(e)] / by_eps["dp_sgd"][str(e)] for e in EPS_GRID},
        "ratio_m": {m: by_m["corrdp_sgd"][str(m)] / by_m["dp_sgd"][str(m)] for m in M_GRID},
        "sum_w": sum_w,
        "sum_w_est": {m: float(np.mean([r["sum_w_est"] for r in rows_m if r["m"] == m])) for m in M_GRID},
        "predicted": {m: math.sqrt(sum_w[m] / m) for m in M_GRID},
    }


def run(out_dir: pathlib.Path, *, quick: bool = False) -> list[pathlib.Path]:
    """Write the CorrDP reproduction (figure, CSV, JSON, README.md) into ``out_dir``; returns the paths."""
    start = time.time()
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = range(3) if quick else range(8)
    n = 600 if quick else 800
    steps = n
    rows_eps, rows_m = _sweeps(seeds, n, steps)
    fig_path = _plot(out_dir, rows_eps, rows_m, n)
    all_rows = [dict(r, sweep="epsilon") for r in rows_eps] + [dict(r, sweep="m") for r in rows_m]
    csv_path = common.write_csv(out_dir / "runs.csv", all_rows)
    refs = _reference_values()
    stats = _statistics(rows_eps, rows_m)
    wins_eps = sum(r["corrdp_sgd"] < r["dp_sgd"] for r in rows_eps)
    summary = {
        "quick": quick,
        "n": n,
        "steps": steps,
        "seeds": len(seeds),
        "reference_values": refs,
        "mean_excess_risk_by_epsilon": stats["by_eps"],
        "mean_excess_risk_by_m": stats["by_m"],
        "corrdp_over_dp_ratio_by_epsilon": {str(k): v for k, v in stats["ratio_eps"].items()},
        "corrdp_over_dp_ratio_by_m": {str(k): v for k, v in stats["ratio_m"].items()},
        "predicted_ratio_sqrt_sum_w_over_m": {str(k): v for k, v in stats["predicted"].items()},
        "sum_weights_true": {str(k): v for k, v in stats["sum_w"].items()},
        "sum_weights_estimated_ucb": {str(k): v for k, v in stats["sum_w_est"].items()},
        "corrdp_wins": f"{wins_eps}/{len(rows_eps)}",
        "runtime_s": round(time.time() - start, 1),
    }
    json_path = common.write_atomic(out_dir / "summary.json", json.dumps(summary, indent=2))
    readme_path = common.write_atomic(out_dir / "README.md", _readme(summary, stats, rows_eps, rows_m))
    return [fig_path, csv_path, json_path, readme_path]


def _readme(summary: dict, stats: dict[str, dict], rows_eps: list[dict], rows_m: list[dict]) -> str:
    """README.md from ``templates/README.md.j2``."""
    by_eps = stats["by_eps"]
    gain = by_eps["dp_sgd"]["1.0"] - by_eps["corrdp_sgd"]["1.0"]
    keep = (by_eps["dp_sgd"]["1.0"] - by_eps["corrdp_sgd_estimated_tv"]["1.0"]) / gain if gain > 0 else 0.0
    return common.render_readme(
        "dplens.research.corrdp",
        summary=summary,
        refs=summary["reference_values"],
        n_ref_ok=sum(r["match"] for r in summary["reference_values"]),
        radius=RADIUS,
        batch=BATCH,
        eps_grid=EPS_GRID,
        m_grid=M_GRID,
        **stats,
        wins_eps=sum(r["corrdp_sgd"] < r["dp_sgd"] for r in rows_eps),
        wins_m=sum(r["corrdp_sgd"] < r["dp_sgd"] for r in rows_m),
        n_eps_runs=len(rows_eps),
        n_m_runs=len(rows_m),
        keep=keep,
        ratio_m_txt=", ".join(f"{stats['ratio_m'][m]:.2f}" for m in M_GRID),
        pred_m_txt=", ".join(f"{stats['predicted'][m]:.2f}" for m in M_GRID),
    )
