"""Reproduction of seed 001 (ν-DP-FTRL): sensitivity γ_T, the quadratic oracle, and DP-FTRL vs DP-SGD at equal ε.

``dplens reproduce dp-ftrl`` → :func:`run`. Outputs (PNG, CSV, JSON, README.md) go to ``out_dir``.

The seed is a summary page (note ``research/corrdp-and-dp-ftrl.md`` §B1): no tables, no numbers from the paper body.
What can be reproduced is (i) the note's reference values F1–F8 recomputed by dplens, (ii) γ_T against T for several
ν with the elliptic closed form as T → ∞, (iii) the stationary variance of noisy gradient descent on a 1-D quadratic
(η²γ_∞² for the matched ν = ηλ) by simulation, (iv) the paper's headline claim — correlated noise beats independent
noise at equal privacy — on a linear-regression task, and (v) the asymptotic suboptimality F_∞ against dimension,
effective dimension and learning rate (the setting of the paper's Fig. 2) from the exact LTI formula.
"""

from __future__ import annotations

import json
import math
import pathlib
import time
from pathlib import Path
from typing import Any

import numpy as np

from dplens.accountant import calibrate as cal
from dplens.accountant import events as ev
from dplens.research import _reproduction_common as common
from dplens.research.dp_ftrl import accounting as mx
from dplens.research.dp_ftrl import mechanism as mf

__all__ = ["run"]

DELTA = 1e-5
NUS_GAMMA = (0.0, 0.001, 0.01, 0.05, 0.1, 0.5, 1.0)
EPOCH_NUS = (0.0, 0.01, 0.05, 0.5, 1.0)


# --------------------------------------------------------------------------------------------
# (i) reference values


def _reference_values() -> list[dict]:
    rows = []

    def add(name: str, got: float, expected: float, tol: float = 1e-6) -> None:
        rows.append({"test": name, "dplens": got, "note": expected, "match": abs(got - expected) <= tol})

    beta, c = mx.noising_coefficients(0.0, 8), mx.strategy_coefficients(0.0, 8)
    add("F1 beta_7 (nu=0) = -33/2048", beta[7], -33 / 2048, 1e-15)
    add("F1 c_7 (nu=0) = 429/2048", c[7], 429 / 2048, 1e-15)
    add("F1 max abs(beta * c - e0)", float(np.abs(np.convolve(beta, c)[:8] - np.eye(8)[0]).max()), 0.0, 1e-15)
    table = {
        0.0: (1.338411, 1.591022, 1.806932, 1.999503, None),
        0.01: (1.319312, 1.456483, 1.461807, 1.461807, 1.461807),
        0.05: (1.255926, 1.284076, 1.284076, 1.284076, 1.284076),
        0.1: (1.198618, 1.204924, 1.204924, 1.204924, 1.204924),
        0.5: (1.035945, 1.035945, 1.035945, 1.035945, 1.035945),
    }
    for nu, values in table.items():
        for steps, expected in zip((10, 100, 1000, 10000, math.inf), values, strict=True):
            if expected is not None:
                add(f"F2 gamma_T nu={nu:g} T={steps:g}", mx.nu_ftrl_gamma(nu, steps), expected)
    add("F2 gamma_3^2 (nu=0) = 89/64", mx.nu_ftrl_gamma(0.0, 3) ** 2, 89 / 64, 1e-15)
    add("F3 sigma T=100 nu=0 rho=0.1", mx.nu_ftrl_gamma(0.0, 100) / math.sqrt(0.2), 3.557634)
    for rho, exact, bun in ((0.5, 4.377178, 5.298526), (0.1, 1.760057, 2.245966), (0.01, 0.496975, 0.688614)):
        event = mx.DpFtrl(nu=0.0, noise_multiplier=mx.nu_ftrl_gamma(0.0, 1000) / math.sqrt(2 * rho), steps=1000)
        acc = mx.dp_ftrl_accounting(event, DELTA)
        add(f"F4 eps exact GDP rho={rho:g}", acc.epsilon, exact)
        add(f"F4 eps Bun-Steinke rho={rho:g}", acc.epsilon_zcdp_bun_steinke, bun)
    add(
        "F5 min-sep nu=0 (T=1000, b=100, k=10)",
        mx.nu_ftrl_sensitivity(0.0, 1000, epochs=10, min_separation=100),
        9.154043,
    )
    add("F5 min-sep nu=0.05", mx.nu_ftrl_sensitivity(0.05, 1000, epochs=10, min_separation=100), 4.062933)
    full = mx.noising_coefficients(0.0, 1000)
    for taps, expected in ((2, 1.154701), (5, 1.306364), (10, 1.397417), (50, 1.576300)):
        truncated = np.where(np.arange(1000) < taps, full, 0.0)
        add(
            f"F6 truncated beta {taps} taps",
            mx.toeplitz_sensitivity(mx.inverse_toeplitz_coefficients(truncated)),
            expected,
        )
    add(
        "F7 V_FTRL/sigma^2 (eta=0.1, nu=0.1)",
        mf.stationary_variance(nu=0.1, curvature=1, learning_rate=0.1),
        0.01451843,
        1e-8,
    )
    add("F7 V_SGD/sigma^2", mf.stationary_variance(nu=1.0, curvature=1, learning_rate=0.1), 0.05263158, 1e-8)
    add("F7 ratio eta(2-eta) gamma_inf^4", 0.1 * 1.9 * mx.gamma_infinity(0.1) ** 4, 0.400491)
    add("F8 nu=1 gamma_T (T=1e6)", mx.nu_ftrl_gamma(1.0, 10**6), 1.0, 0.0)
    return rows


# --------------------------------------------------------------------------------------------
# (ii) γ_T vs T, multi-epoch sensitivity


def _gamma_curves(quick: bool) -> tuple[np.ndarray, dict[float, np.ndarray], list[dict]]:
    top = 10**5 if quick else 10**6
    steps = np.unique(np.round(np.geomspace(1, top, 61)).astype(np.int64))
    curves = {nu: mx.nu_ftrl_gamma_curve(nu, steps) for nu in NUS_GAMMA}
    rows = [
        {"steps": int(t), **{f"gamma_nu={nu:g}": float(curves[nu][i]) for nu in NUS_GAMMA}} for i, t in enumerate(steps)
    ]
    rows.append({"steps": "inf", **{f"gamma_nu={nu:g}": mx.gamma_infinity(nu) for nu in NUS_GAMMA}})
    return steps, curves, rows


def _epoch_curves(nus: tuple[float, ...]) -> tuple[list[int], dict[float, list[float]]]:
    steps_per_epoch = 100
    epochs = [1, 2, 4, 8, 16, 32, 64]
    out = {
        nu: [
            mx.nu_ftrl_sensitivity(nu, k * steps_per_epoch, epochs=k if k > 1 else None, min_separation=steps_per_epoch)
            for k in epochs
        ]
        for nu in nus
    }
    return epochs, out


# --------------------------------------------------------------------------------------------
# (iii) 1-D quadratic: simulated stationary variance vs η²γ_∞²


def _quadratic(quick: bool) -> list[dict]:
    n = 200_000 if quick else 1_000_000
    burn = 5_000
    rows = []
    for eta, lam in ((0.1, 1.0), (0.02, 1.0), (0.05, 0.2), (0.5, 1.0)):
        for nu in (eta * lam, 1.0):
            theta = mf.simulate_quadratic(
                nu=nu, curvature=lam, learning_rate=eta, steps=burn + n, rng=np.random.default_rng(1000 + len(rows))
            )
            estimate = float(np.mean(theta[burn:] ** 2))
            expected = mf.stationary_variance(nu=nu, curvature=lam, learning_rate=eta)
            closed = eta**2 * mx.gamma_infinity(nu) ** 2 if nu < 1 else eta / (lam * (2 - eta * lam))
            se = mf.stationary_variance_standard_error(nu=nu, curvature=lam, learning_rate=eta, samples=n)
            rows.append(
                {
                    "eta": eta,
                    "lambda": lam,
                    "nu": nu,
                    "closed_form": closed,
                    "formula": "eta^2 gamma_inf^2" if nu < 1 else "eta/(lambda(2-eta lambda))",
                    "simulated": estimate,
                    "mc_standard_error": se,
                    "z_score": (estimate - closed) / se,
                    "integral_minus_closed_form": expected - closed,
                    "samples": n,
                }
            )
    return rows


# --------------------------------------------------------------------------------------------
# (iv) linear regression: DP-FTRL vs DP-SGD at equal ε


def _linear_regression(quick: bool) -> tuple[list[dict], dict]:
    n, dim, batch, epochs = 2000, 32, 20, 10
    per_epoch = n // batch
    steps = epochs * per_epoch
    eps_grid = [1.0, 4.0] if quick else [0.5, 1.0, 2.0, 4.0, 8.0]
    lr_grid = [0.02, 0.05, 0.2] if quick else [0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5]
    nus = (0.01, 0.05) if quick else (0.005, 0.01, 0.05, 0.2)
    tune_seeds = range(100, 102) if quick else range(100, 103)
    eval_seeds = range(3) if quick else range(10)
    data = mf.make_linear_regression(n, dim, rng=np.random.default_rng(7))
    setup = {
        "n": n,
        "dim": dim,
        "eigenvalues": "1/k",
        "label_noise": 0.1,
        "batch_size": batch,
        "epochs": epochs,
        "steps": steps,
        "clip_norm": 1.0,
        "delta": DELTA,
        "initial_excess_risk": mf.excess_risk(np.zeros(dim), data),
    }

    def one(method: str, nu: float, sigma: float, lr: float, seed: int) -> float:
        sampling = mf.Sampling.POISSON if method == "dp_sgd_poisson" else mf.Sampling.CYCLIC
        relation = ev.NeighboringRelation.ADD_OR_REMOVE_ONE if sampling is mf.Sampling.POISSON else None
        kwargs = {"neighboring": relation} if relation else {}
        result = mf.train_linear_regression(
            data,
            nu=nu,
            noise_multiplier=sigma,
            clip_norm=1.0,
            learning_rate=lr,
            batch_size=batch,
            epochs=epochs,
            rng=np.random.default_rng(seed),
            sampling=sampling,
            **kwargs,
        )
        return mf.excess_risk(result.theta, data)

    rows = []
    for eps in eps_grid:
        methods: list[tuple[str, float, float, str]] = []
        sigma_sgd = mx.noise_multiplier_for_epsilon(
            eps, DELTA, nu=1.0, steps=steps, epochs=epochs, min_separation=per_epoch
        )
        methods.append(("dp_sgd_cyclic", 1.0, sigma_sgd, "exact GDP"))
        for nu in nus:
            sigma = mx.noise_multiplier_for_epsilon(
                eps, DELTA, nu=nu, steps=steps, epochs=epochs, min_separation=per_epoch
            )
            methods.append((f"dp_ftrl_nu={nu:g}", nu, sigma, "exact GDP"))
        poisson = cal.calibrate_dp_sgd_noise(
            sampling_rate=batch / n, steps=steps, target_epsilon=eps, target_delta=DELTA, lower=0.3, upper=100.0
        )
        methods.append(("dp_sgd_poisson", 1.0, poisson.value, f"PLD (epsilon {poisson.epsilon:.4f})"))
        for name, nu, sigma, accounting in methods:
            tuned = {lr: float(np.mean([one(name, nu, sigma, lr, s) for s in tune_seeds])) for lr in lr_grid}
            best_lr = min(tuned, key=tuned.get)
            for seed in eval_seeds:
                rows.append(
                    {
                        "epsilon": eps,
                        "method": name,
                        "nu": nu,
                        "noise_multiplier": sigma,
                        "accounting": accounting,
                        "learning_rate": best_lr,
                        "seed": seed,
                        "excess_risk": one(name, nu, sigma, best_lr, seed),
                    }
                )
    setup |= {"epsilons": eps_grid, "learning_rates": lr_grid, "nus": nus, "tuning_seeds": list(tune_seeds)}
    setup["evaluation_seeds"] = list(eval_seeds)
    return rows, setup


def _summary(rows: list[dict]) -> dict[str, dict[float, tuple[float, float, float]]]:
    """method → ε → (mean, 95% CI half-width, learning rate)."""
    out: dict[str, dict[float, tuple[float, float, float]]] = {}
    for row in rows:
        out.setdefault(row["method"], {}).setdefault(row["epsilon"], [])
    for method, by_eps in out.items():
        for eps in by_eps:
            sel = [r for r in rows if r["method"] == method and r["epsilon"] == eps]
            x = np.array([r["excess_risk"] for r in sel])
            half = 1.96 * x.std(ddof=1) / math.sqrt(x.size) if x.size > 1 else 0.0
            by_eps[eps] = (float(x.mean()), float(half), sel[0]["learning_rate"])
    return out


# --------------------------------------------------------------------------------------------
# (v) F_∞ (the paper's Fig. 2 setting) from the exact LTI formula


def _f_infinity(eigenvalues: np.ndarray, eta: float, *, correlated: bool) -> float:
    """Asymptotic suboptimality ½ Σ_k λ_k Var_k at equal ρ = 1/2 (σ_SGD = 1, σ_FTRL = γ_∞(ν)), ν = η λ_min."""
    if not correlated:
        return 0.5 * float(np.sum(eigenvalues * eta / (eigenvalues * (2 - eta * eigenvalues))))
    nu = eta * float(eigenvalues.min())
    gamma = mx.gamma_infinity(nu)
    variances = [mf.stationary_variance(nu=nu, curvature=lam, learning_rate=eta) for lam in eigenvalues]
    return 0.5 * gamma**2 * float(np.sum(eigenvalues * np.array(variances)))


def _slope(x: list[float], y: list[float]) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _fig2(quick: bool) -> dict:
    eta = 0.02
    dims = [16, 32, 64, 128, 256] if quick else [16, 32, 64, 128, 256, 512, 1024]
    alphas = [0.4, 0.6, 0.8, 1.0] if quick else [0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    etas = [0.005, 0.01, 0.02, 0.05] if quick else [0.002, 0.005, 0.01, 0.02, 0.05, 0.1]
    out: dict = {"eta": eta, "dims": dims, "alphas": alphas, "etas": etas}
    for name, correlated in (("sgd", False), ("ftrl", True)):
        by_d = [_f_infinity(np.arange(1, d + 1) ** -1.0, eta, correlated=correlated) for d in dims]
        spectra = [np.arange(1, 129) ** -a for a in alphas]
        by_alpha = [_f_infinity(s, eta, correlated=correlated) for s in spectra]
        by_eta = [_f_infinity(np.arange(1, 129) ** -1.0, e, correlated=correlated) for e in etas]
        d_eff = [float(s.sum() / s.max()) for s in spectra]
        out[name] = {"by_dim": by_d, "by_alpha": by_alpha, "by_eta": by_eta, "d_eff": d_eff}
        out[name]["slope_dim"] = _slope(dims, by_d)
        out[name]["slope_d_eff"] = _slope(d_eff, by_alpha)
        out[name]["slope_eta"] = _slope(etas, by_eta)
    return out


# --------------------------------------------------------------------------------------------


def _timings() -> dict[str, Any]:
    """γ_T at T = 10⁶ (ν = 0, cache cleared) and the seconds it, the FFT noise and the streamed noise take."""
    t0 = time.perf_counter()
    mx._nu_gamma_cached.cache_clear()
    gamma_million = mx.nu_ftrl_gamma(0.0, 10**6)
    gamma_time = time.perf_counter() - t0
    t0 = time.perf_counter()
    mf.correlated_noise(0.05, 10**6, rng=np.random.default_rng(0))
    fft_time = time.perf_counter() - t0
    t0 = time.perf_counter()
    mf.CorrelatedNoiseStream(0.05, rng=np.random.default_rng(0)).next(10**6)
    stream_time = time.perf_counter() - t0
    return {
        "gamma_million": gamma_million,
        "timing_s": {"gamma_T_nu0_T1e6": gamma_time, "fft_noise_T1e6": fft_time, "stream_noise_T1e6": stream_time},
    }


def _plot_gamma(out_dir: pathlib.Path, steps: np.ndarray, curves: dict, epochs: list[int], epoch_curves: dict) -> Path:
    """Figure 1, ``gamma_t.png``: γ_T against T (with γ_∞ and the ν = 0 asymptote); sensitivity against epochs."""
    plt = common.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.3))
    colours = plt.cm.viridis(np.linspace(0, 0.9, len(NUS_GAMMA)))
    for colour, nu in zip(colours, NUS_GAMMA, strict=True):
        axes[0].plot(steps, curves[nu], color=colour, label=f"ν = {nu:g}")
        if 0 < nu < 1:
            axes[0].axhline(mx.gamma_infinity(nu), color=colour, ls=":", lw=0.8)
    asymptotic = np.sqrt((np.log(steps) + math.log(16) + np.euler_gamma) / math.pi)
    axes[0].plot(steps[steps >= 10], asymptotic[steps >= 10], "k--", lw=0.8, label="ν = 0: √((ln T + ln 16 + γ_E)/π)")
    axes[0].set(xscale="log", xlabel="steps T", ylabel="γ_T = max column norm of B⁻¹",
                title="Sensitivity γ_T (dotted: γ_∞ = √((2/π)K((1−ν)²)))")  # fmt: skip
    axes[0].legend(fontsize=7)
    axes[0].grid(alpha=0.3, which="both")
    for nu in EPOCH_NUS:
        values = np.array(epoch_curves[nu])
        axes[1].plot(epochs, values, marker="o", label=f"ν = {nu:g}" + (" (DP-SGD: √k)" if nu == 1 else ""))
    axes[1].set(xscale="log", yscale="log", xlabel="epochs k (100 steps each, b = 100)",
                ylabel="sensitivity (min-separation)", title="Several participations: ‖Σ_j C[:, jb]‖")  # fmt: skip
    axes[1].legend(fontsize=7)
    axes[1].grid(alpha=0.3, which="both")
    fig.tight_layout()
    return common.save_figure(fig, out_dir / "gamma_t.png", dpi=120)


def _plot_linear_regression(out_dir: pathlib.Path, summary: dict, lr_setup: dict) -> Path:
    """Figure 2, ``dp_ftrl_vs_dp_sgd.png``: linear regression, excess risk against ε for every method."""
    import matplotlib.ticker

    labels = {
        "dp_sgd_cyclic": "DP-SGD (same schedule, no amplification)",
        "dp_sgd_poisson": "DP-SGD (Poisson, amplified; PLD)",
    }
    fig, ax = common.pyplot().subplots(figsize=(6.5, 4.5))
    eps_grid = lr_setup["epsilons"]
    for method, by_eps in summary.items():
        mean = np.array([by_eps[e][0] for e in eps_grid])
        half = np.array([by_eps[e][1] for e in eps_grid])
        label = labels.get(method, method.replace("dp_ftrl_nu=", "ν-DP-FTRL, ν = "))
        style = "s-" if method.startswith("dp_sgd") else "o-"
        ax.errorbar(eps_grid, mean, yerr=half, fmt=style, capsize=3, label=label, ms=4)
    ax.set(xscale="log", yscale="log", xlabel="ε (δ = 1e-5)", ylabel="excess empirical risk F(θ_T) − F(θ̂)",
           title=f"Linear regression, d = {lr_setup['dim']}, λ_k = 1/k, T = {lr_setup['steps']}, equal ε")  # fmt: skip
    ax.set_xticks(eps_grid, [f"{e:g}" for e in eps_grid])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return common.save_figure(fig, out_dir / "dp_ftrl_vs_dp_sgd.png", dpi=120)


def _plot_f_infinity(out_dir: pathlib.Path, fig2: dict) -> Path:
    """Figure 3, ``f_infinity.png``: F_∞ (the paper's Fig. 2 setting) against d, d_eff and η, with the slopes."""
    import matplotlib.ticker

    fig, axes = common.pyplot().subplots(1, 3, figsize=(13, 4))
    panels = (
        ("dims", "by_dim", "slope_dim", "dimension d (α = 1, η = 0.02)"),
        ("d_eff", "by_alpha", "slope_d_eff", "effective dimension Σλ/λ_max (d = 128, α ∈ [0.4, 1])"),
        ("etas", "by_eta", "slope_eta", "learning rate η (d = 128, α = 1)"),
    )
    for ax, (x_key, y_key, slope_key, xlabel) in zip(axes, panels, strict=True):
        for name, marker, label in (("sgd", "s-", "Noisy-SGD"), ("ftrl", "o-", "ν-Noisy-FTRL (ν = ηλ_min)")):
            xs = fig2[name][x_key] if x_key == "d_eff" else fig2[x_key]
            ax.plot(xs, fig2[name][y_key], marker, ms=4, label=f"{label}, slope {fig2[name][slope_key]:.2f}")
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="F_∞ at equal ρ")
        ticks = fig2["ftrl"]["d_eff"] if x_key == "d_eff" else fig2[x_key]
        ax.set_xticks(ticks, [f"{t:.3g}" for t in ticks])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, which="both")
    fig.suptitle("Exact asymptotic suboptimality F_∞ = ½ Σ λ_k Var_k (the paper's Fig. 2 setting, no clipping)")
    fig.tight_layout()
    return common.save_figure(fig, out_dir / "f_infinity.png", dpi=120)


def _best_ftrl_ratios(summary: dict, eps_grid: list[float]) -> tuple[dict, dict]:
    """At each ε, the best ν-DP-FTRL's mean risk over DP-SGD's: same schedule, and Poisson-sampled."""
    best_ftrl = {e: min((v[e][0], m) for m, v in summary.items() if m.startswith("dp_ftrl")) for e in eps_grid}
    ratio_cyclic = {e: best_ftrl[e][0] / summary["dp_sgd_cyclic"][e][0] for e in eps_grid}
    ratio_poisson = {e: best_ftrl[e][0] / summary["dp_sgd_poisson"][e][0] for e in eps_grid}
    return ratio_cyclic, ratio_poisson


def run(out_dir: pathlib.Path, *, quick: bool = False) -> list[pathlib.Path]:
    """Write the ν-DP-FTRL reproduction (figures, CSV, JSON, README.md) into ``out_dir``; returns the paths."""
    start = time.time()
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    refs = _reference_values()
    steps, curves, gamma_rows = _gamma_curves(quick)
    epochs, epoch_curves = _epoch_curves(EPOCH_NUS)
    timings = _timings()
    quad_rows = _quadratic(quick)
    lr_rows, lr_setup = _linear_regression(quick)
    summary = _summary(lr_rows)
    fig2 = _fig2(quick)
    written = [_plot_gamma(out_dir, steps, curves, epochs, epoch_curves)]
    written.append(common.write_csv(out_dir / "gamma_t.csv", gamma_rows))
    epoch_rows = [
        {"epochs": k, **{f"nu={nu:g}": epoch_curves[nu][i] for nu in EPOCH_NUS}} for i, k in enumerate(epochs)
    ]
    written.append(common.write_csv(out_dir / "sensitivity_epochs.csv", epoch_rows))
    written.append(_plot_linear_regression(out_dir, summary, lr_setup))
    written.append(_plot_f_infinity(out_dir, fig2))
    written.append(common.write_csv(out_dir / "linear_regression_runs.csv", lr_rows))
    written.append(common.write_csv(out_dir / "quadratic_stationary_variance.csv", quad_rows))
    eps_grid = lr_setup["epsilons"]
    ratio_cyclic, ratio_poisson = _best_ftrl_ratios(summary, eps_grid)
    result = {
        "quick": quick,
        "runtime_s": round(time.time() - start, 1),
        "reference_values": refs,
        "timing_s": timings["timing_s"],
        "gamma_T_nu0_T1e6": timings["gamma_million"],
        "quadratic": quad_rows,
        "linear_regression_setup": lr_setup,
        "linear_regression_mean_excess_risk": {
            m: {str(e): {"mean": v[0], "ci95": v[1], "learning_rate": v[2]} for e, v in by.items()}
            for m, by in summary.items()
        },
        "best_ftrl_over_dp_sgd_cyclic": {str(e): r for e, r in ratio_cyclic.items()},
        "best_ftrl_over_dp_sgd_poisson": {str(e): r for e, r in ratio_poisson.items()},
        "fig2_f_infinity": fig2,
    }
    written.append(common.write_atomic(out_dir / "summary.json", json.dumps(result, indent=2, default=str)))
    written.append(common.write_atomic(out_dir / "README.md", _readme(result, summary, eps_grid, quick)))
    return written


def _readme(result: dict, summary: dict, eps_grid: list[float], quick: bool) -> str:
    """README.md from ``templates/README.md.j2``."""
    refs, quad, setup = result["reference_values"], result["quadratic"], result["linear_regression_setup"]
    ratio_cyc, ratio_poi = _best_ftrl_ratios(summary, eps_grid)
    return common.render_readme(
        "dplens.research.dp_ftrl",
        result=result,
        quick=quick,
        refs=refs,
        n_ok=sum(r["match"] for r in refs),
        quad=quad,
        max_z=max(abs(q["z_score"]) for q in quad),
        summary=summary,
        methods=list(summary),
        eps_grid=eps_grid,
        ratio_cyc=ratio_cyc,
        ratio_poi=ratio_poi,
        wins_cyclic=sum(ratio_cyc[e] < 1 for e in eps_grid),
        wins_poisson=sum(ratio_poi[e] < 1 for e in eps_grid),
        ratio_text=", ".join(f"{ratio_cyc[e]:.2f}" for e in eps_grid),
        nus_text=", ".join(f"{nu:g}" for nu in NUS_GAMMA),
        setup=setup,
        lr_nus=", ".join(f"{nu:g}" for nu in setup["nus"]),
        sgd=result["fig2_f_infinity"]["sgd"],
        ftrl=result["fig2_f_infinity"]["ftrl"],
        timing=result["timing_s"],
    )
