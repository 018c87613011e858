"""Reproduction of seed 004 (GaussMix): Figure 1 with the exact profile added, and a DP-OLS utility study.

``dplens reproduce gaussmix`` → :func:`run`. Outputs (PNG, CSV, JSON, README.md) go to ``out_dir``.

- Figure 1 (Lev et al. 2025, arXiv 2505.24603): required λ̄_min + σ² (= γ for C_X = 1) against ε_DP,
  k = 150, δ = 1e-8, for Lemma 1 + Proposition 1 (the paper), the Sheffet 2019 bound as quoted, and
  our exact chi-square profile; panel (b) the ratio of Sheffet's ε to ours. Compared with
  ``research/gaussmix.md`` §7 D and I.
- DP-OLS: LinearMixing (Algorithm 2; RDP route and exact route) against AdaSSP (Wang 2018, paper
  Algorithm 3) and the Gaussian sufficient-statistics perturbation, over ε ∈ logspace(−1.2, 1.5, 6)
  (the public code's grid), test MSE mean ± 95 % CI over seeds. Data: matplotlib's bundled
  ``Stocks.csv`` (monthly prices; S&P 500 log return regressed on five stocks' log returns — real
  data, no download) and a clearly-labelled synthetic Gaussian set.
"""

from __future__ import annotations

import csv
import json
import math
import pathlib
import time

import numpy as np

from dplens.accountant import conversions
from dplens.research.gaussmix import accounting as gm
from dplens.research.gaussmix import mechanism as mech

__all__ = ["run"]

K_FIG1 = 150
DELTA_FIG1 = 1e-8
# research/gaussmix.md §7 D (eps_Prop1 column) and §7 I (exact eps), for the write-up's comparison.
NOTES_FIG1_PROP1 = {
    0: 116.4615014, 3: 5.490015958, 6: 0.6493756881, 10: 0.04248711649, 14: 0.002751406437,
    18: 0.0001708779177, 22: 9.786901047e-6, 24: 2.204555717e-6,
}  # fmt: skip
NOTES_EXACT = {3: 5.1053686, 4: 2.4385341, 6: 0.59980601, 8: 0.15229142, 10: 0.038816631}


def _figure1(out_dir: pathlib.Path) -> tuple[list[pathlib.Path], dict]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gammas = (10 ** np.linspace(np.log10(4 / 3), 3.5, 25)) ** 2
    rows = []
    for i, gamma in enumerate(gammas):
        event = gm.GaussMix(k=K_FIG1, gamma=float(gamma))
        eps_rdp, alpha = gm.gaussmix_rdp_curve(event).epsilon_and_order(DELTA_FIG1)
        eps_exact = gm.gaussmix_epsilon(event, DELTA_FIG1, route=gm.AccountingRoute.EXACT)
        sheffet = gm.sheffet2019_epsilon(k=K_FIG1, gamma=float(gamma), delta=DELTA_FIG1)
        rows.append(
            {
                "index": i,
                "gamma": float(gamma),
                "eps_prop1": eps_rdp,
                "alpha_star": alpha,
                "eps_exact": eps_exact,
                "eps_sheffet2019": sheffet,
                "ratio_sheffet_over_prop1": sheffet / eps_rdp,
                "ratio_sheffet_over_exact": sheffet / eps_exact,
            }
        )
    csv_path = out_dir / "figure1.csv"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    g = np.array([r["gamma"] for r in rows])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    ax = axes[0]
    ax.loglog([r["eps_prop1"] for r in rows], g, "o-", label="GaussMix: Lemma 1 + Prop. 1 (paper)")
    ax.loglog([r["eps_exact"] for r in rows], g, "s-", label="GaussMix: exact chi-square profile (ours)")
    ax.loglog([r["eps_sheffet2019"] for r in rows], g, "^--", label="Sheffet 2019 (as quoted)")
    ax.set_xlabel(r"$\varepsilon_{DP}$")
    ax.set_ylabel(r"required $\bar\lambda_{\min} + \sigma^2$  ($C_X = 1$)")
    ax.set_title(f"(a) k = {K_FIG1}, δ = {DELTA_FIG1:g}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax = axes[1]
    ax.semilogx(g, [r["ratio_sheffet_over_prop1"] for r in rows], "o-", label="Sheffet / Prop. 1")
    ax.semilogx(g, [r["ratio_sheffet_over_exact"] for r in rows], "s-", label="Sheffet / exact")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel(r"$\bar\lambda_{\min} + \sigma^2$")
    ax.set_ylabel("ratio of ε")
    ax.set_title("(b) improvement over Sheffet 2019")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    png = out_dir / "figure1.png"
    fig.savefig(png, dpi=120)
    plt.close(fig)

    rel_prop1 = max(abs(rows[i]["eps_prop1"] / v - 1) for i, v in NOTES_FIG1_PROP1.items())
    rel_exact = max(abs(rows[i]["eps_exact"] / v - 1) for i, v in NOTES_EXACT.items())
    savings = [1 - r["eps_exact"] / r["eps_prop1"] for r in rows]
    summary = {
        "max_rel_diff_prop1_vs_notes": rel_prop1,
        "max_rel_diff_exact_vs_notes": rel_exact,
        "exact_saving_min": min(savings),
        "exact_saving_max": max(savings),
        "first_gamma_beating_sheffet": float(next(r["gamma"] for r in rows if r["ratio_sheffet_over_prop1"] > 1)),
        "ratio_at_largest_gamma": rows[-1]["ratio_sheffet_over_prop1"],
        "ratio_exact_at_largest_gamma": rows[-1]["ratio_sheffet_over_exact"],
    }
    return [csv_path, png], summary


# ---------------------------------------------------------------------------------------------
# DP-OLS utility
# ---------------------------------------------------------------------------------------------


def _stocks_data() -> tuple[np.ndarray, np.ndarray, str]:
    import matplotlib.cbook as cbook

    path = cbook.get_sample_data("Stocks.csv", asfileobj=False)
    with open(path, newline="") as fh:
        lines = [line for line in fh if not line.startswith("#")]
    reader = list(csv.reader(lines))
    header, body = reader[0], reader[1:]
    features = ["IBM", "AAPL", "MSFT", "XRX", "ADBE"]
    target = "^GSPC"
    cols = [header.index(c) for c in [*features, target]]
    prices = np.array([[float(r[c]) for c in cols] for r in body if all(r[c] != "" for c in cols)])
    returns = np.diff(np.log(prices), axis=0)
    return returns[:, :-1], returns[:, -1], "matplotlib sample_data/Stocks.csv: monthly log returns"


def _synthetic_data(rng: np.random.Generator, n: int = 8192, d: int = 10) -> tuple[np.ndarray, np.ndarray, str]:
    x = rng.standard_normal((n, d))
    theta = rng.standard_normal(d)
    theta /= np.linalg.norm(theta)
    y = x @ theta + 0.1 * rng.uniform(-1, 1, n)
    return x, y, f"SYNTHETIC: x ~ N(0, I_{d}), y = x·θ0 + 0.1·U(−1, 1), n = {n}"


def _split_normalise(x: np.ndarray, y: np.ndarray, rng: np.random.Generator):
    """80/20 split; rows scaled so max ‖x_i‖ = 1 and max |y_i| = 1 on train (paper App. J.1)."""
    perm = rng.permutation(x.shape[0])
    cut = int(0.8 * x.shape[0])
    tr, te = perm[:cut], perm[cut:]
    sx = np.linalg.norm(x[tr], axis=1).max()
    sy = np.abs(y[tr]).max()
    return x[tr] / sx, y[tr] / sy, x[te] / sx, y[te] / sy


def _adassp(x, y, eps, delta, rng, rho=0.05):
    """AdaSSP (Wang 2018; seed 004 App. H.1 Algorithm 3) with C_X = C_Y = 1 (without the repo's parse bug)."""
    d = x.shape[1]
    log_term = math.log(6 / delta)
    scale = math.sqrt(log_term) / (eps / 3)
    lam_min = max(float(np.linalg.eigvalsh(x.T @ x)[0]), 0.0)
    lam_tilde = max(lam_min + scale * rng.standard_normal() - log_term / (eps / 3), 0.0)
    lam = max(0.0, math.sqrt(d * log_term * math.log(2 * d * d / rho)) / (eps / 3) - lam_tilde)
    upper = rng.standard_normal((d, d))
    sym = np.triu(upper) + np.triu(upper, 1).T
    xtx = x.T @ x + scale * sym
    xty = x.T @ y + scale * rng.standard_normal(d)
    return np.linalg.lstsq(xtx + lam * np.eye(d), xty, rcond=None)[0]


def _ssp(x, y, eps, delta, rng):
    """Gaussian sufficient-statistics perturbation: (XᵀX, Xᵀy) + N(0, s²), one Gaussian mechanism.

    Zero-out sensitivity of the pair is √(C_X⁴ + C_X² C_Y²) = √2 (C_X = C_Y = 1); the noise multiplier
    comes from the exact analytic Gaussian mechanism (gdp_mu).
    """
    d = x.shape[1]
    s = math.sqrt(2.0) / conversions.gdp_mu(eps, delta)
    upper = rng.standard_normal((d, d))
    sym = np.triu(upper) + np.triu(upper, 1).T
    return np.linalg.lstsq(x.T @ x + s * sym, x.T @ y + s * rng.standard_normal(d), rcond=None)[0]


def _utility(out_dir: pathlib.Path, quick: bool) -> tuple[list[pathlib.Path], dict]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epsilons = np.logspace(-1.2, 1.5, 4 if quick else 6)
    trials = 8 if quick else 60
    split_rng = np.random.default_rng(50)
    datasets = [_stocks_data(), _synthetic_data(np.random.default_rng(51), n=4096 if quick else 8192)]
    results: dict = {}
    paths: list[pathlib.Path] = []
    fig, axes = plt.subplots(1, len(datasets), figsize=(11, 4.2))
    for ax, (x_all, y_all, label) in zip(axes, datasets, strict=True):
        x, y, x_te, y_te = _split_normalise(x_all, y_all, split_rng)
        n, d = x.shape
        delta = 1.0 / n**2
        k = max(int(2.5 * d), 57)
        ols = np.linalg.lstsq(x, y, rcond=None)[0]

        def mse(theta, x_te=x_te, y_te=y_te):
            return float(np.mean((x_te @ theta - y_te) ** 2))

        methods = {
            "LinearMixing (RDP, paper)": [],
            "LinearMixing (exact route)": [],
            "AdaSSP": [],
            "Gaussian SSP": [],
        }
        gammas = {"rdp": [], "exact": []}
        for eps in epsilons:
            lm_rdp = mech.LinearMixing(epsilon=float(eps), delta=delta, k=k, x_bound=1.0, y_bound=1.0)
            lm_exact = mech.LinearMixing(
                epsilon=float(eps), delta=delta, k=k, x_bound=1.0, y_bound=1.0, route=gm.AccountingRoute.EXACT
            )
            gammas["rdp"].append(lm_rdp.gamma)
            gammas["exact"].append(lm_exact.gamma)
            rng = np.random.default_rng([52, int(eps * 1e6)])
            per = {name: [] for name in methods}
            for _ in range(trials):
                per["LinearMixing (RDP, paper)"].append(mse(lm_rdp.release((x, y), rng)))
                per["LinearMixing (exact route)"].append(mse(lm_exact.release((x, y), rng)))
                per["AdaSSP"].append(mse(_adassp(x, y, float(eps), delta, rng)))
                per["Gaussian SSP"].append(mse(_ssp(x, y, float(eps), delta, rng)))
            for name, values in per.items():
                v = np.array(values)
                methods[name].append(
                    {
                        "epsilon": float(eps),
                        "mean": float(v.mean()),
                        "ci95": float(1.96 * v.std(ddof=1) / math.sqrt(v.size)),
                        "median": float(np.median(v)),
                    }
                )
        for name, stats_ in methods.items():
            means = np.array([s["mean"] for s in stats_])
            ci = np.array([s["ci95"] for s in stats_])
            ax.errorbar(epsilons, means, yerr=ci, marker="o", capsize=3, label=name)
        ax.axhline(mse(ols), color="k", ls="--", lw=1, label="non-private OLS")
        ax.axhline(mse(np.zeros(d)), color="grey", ls=":", lw=1, label="θ = 0")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_ylabel("test MSE (normalised units)")
        ax.set_title(f"{label.split(':')[0]} (n={n}, d={d}, k={k}, δ=1/n²)", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        results[label] = {
            "n_train": n,
            "d": d,
            "k": k,
            "delta": delta,
            "trials": trials,
            "ols_mse": mse(ols),
            "zero_mse": mse(np.zeros(d)),
            "gamma_rdp": gammas["rdp"],
            "gamma_exact": gammas["exact"],
            "methods": methods,
        }
    fig.tight_layout()
    png = out_dir / "dp_ols.png"
    fig.savefig(png, dpi=120)
    plt.close(fig)
    js = out_dir / "dp_ols.json"
    js.write_text(json.dumps(results, indent=2))
    paths += [png, js]
    return paths, results


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def _readme(out_dir: pathlib.Path, fig1: dict, ols: dict, seconds: float, quick: bool) -> pathlib.Path:
    lines = [
        "# Seed 004 — The Gaussian Mixing Mechanism (GaussMix): reproduction",
        "",
        f"Generated by `dplens reproduce gaussmix`{' (quick mode)' if quick else ''} in {seconds:.0f} s.",
        "Paper: Lev et al., arXiv 2505.24603. Notes: `research/gaussmix.md`.",
        "",
        "## Figure 1 (`figure1.png`, `figure1.csv`)",
        "",
        "k = 150, δ = 1e-8, γ = σ² for σ ∈ logspace(log10(4/3), 3.5, 25) (C_X = 1, λ̄_min = 0).",
        "",
        f"- Lemma 1 + Proposition 1 with α optimised continuously matches the notes' table §7 D "
        f"(recomputed from the paper's formulas; the paper prints no numbers) to a maximum relative "
        f"difference of {fig1['max_rel_diff_prop1_vs_notes']:.1e} (the notes print 10 digits).",
        f"- The paper's qualitative claim holds: GaussMix beats Sheffet 2019 (as the paper quotes it) "
        f"from γ ≈ {fig1['first_gamma_beating_sheffet']:.3g} on; at γ < 2.5 (first grid point) Sheffet's "
        f"bound is smaller. The ratio grows to {fig1['ratio_at_largest_gamma']:.2f} at γ = 1e7 "
        f"(notes: 8.79016).",
        f"- **Added (not in the paper):** the exact chi-square privacy profile gives "
        f"{100 * fig1['exact_saving_min']:.1f}–{100 * fig1['exact_saving_max']:.1f} % smaller ε than "
        f"Lemma 1 + Prop. 1 on this grid (ratio to Sheffet {fig1['ratio_exact_at_largest_gamma']:.2f} at "
        f"γ = 1e7); it agrees with the notes' §7 I to {fig1['max_rel_diff_exact_vs_notes']:.1e} "
        f"(8 printed digits).",
        "- Not reproduced: the notebook's α grid (we optimise continuously; the notes show the two agree to",
        "  9–10 digits).",
        "",
        "## DP-OLS utility (`dp_ols.png`, `dp_ols.json`)",
        "",
        "LinearMixing = Algorithm 2 (γ calibrated by Theorem 1 with η = γ/√k, the paper's units; the public",
        "code's η = 2γ/√k and its under-noised λ_min release are not reproduced, see notes §6).",
        "AdaSSP = paper Algorithm 3 (Wang 2018) without the repo's parse bug; Gaussian SSP = (XᵀX, Xᵀy)",
        "perturbed by one analytic Gaussian mechanism. k = max(2.5 d, 57), δ = 1/n², 80/20 split, rows",
        "normalised to max norm 1 on the training set, ε ∈ logspace(−1.2, 1.5, n) as in the public code.",
        "Error bars: 95 % CI of the mean test MSE over the trials (the mechanisms' randomness; one split).",
        "",
    ]
    for label, res in ols.items():
        lines += [
            f"### {label}",
            "",
            f"n_train = {res['n_train']}, d = {res['d']}, k = {res['k']}, trials = {res['trials']}; "
            f"OLS test MSE {_fmt(res['ols_mse'])}, θ = 0 test MSE {_fmt(res['zero_mse'])}.",
            "",
            "| ε | γ (RDP) | γ (exact) | " + " | ".join(res["methods"]) + " |",
            "|---|---|---|" + "---|" * len(res["methods"]),
        ]
        for i, row in enumerate(next(iter(res["methods"].values()))):
            cells = [f"{_fmt(m[i]['mean'])} ± {_fmt(m[i]['ci95'])}" for m in res["methods"].values()]
            lines.append(
                f"| {row['epsilon']:.3g} | {res['gamma_rdp'][i]:.4g} | {res['gamma_exact'][i]:.4g} | "
                + " | ".join(cells)
                + " |"
            )
        lines.append("")
    lines += [
        "## What matched and what did not",
        "",
        "- Matched: Figure 1's curves and ratios (exactly, against the notes' mpmath recomputation);",
        "  Theorem 1 / Algorithm 2 calibration values (tested in `tests/accountant/test_gaussmix.py`).",
        "- The paper's real data sets (Tecator, Communities & Crime, Boston, Wine, Bike) are not shipped by",
        "  any installed package and nothing is downloaded, so the utility study uses matplotlib's bundled",
        "  monthly stock prices (a small, real regression: n ≈ 310 training rows, d = 5) and a clearly",
        "  labelled synthetic Gaussian set. The paper's figures are therefore not reproduced number for",
        "  number; compare the ordering of the methods, not the values.",
        "- The paper (Fig. 2/4) reports LinearMixing beating AdaSSP. Observed here (lowest mean test MSE",
        "  per ε, from the tables above):",
    ]
    for label, res in ols.items():
        winners = []
        names = list(res["methods"])
        for i, row in enumerate(res["methods"][names[0]]):
            best = min(names, key=lambda name, i=i: res["methods"][name][i]["mean"])
            winners.append(f"ε={row['epsilon']:.3g}: {best}")
        lines.append(f"  - {label.split(':')[0]}: " + "; ".join(winners) + ".")
    lines += [
        "  Where LinearMixing loses, a plausible cause is the small sketch (k = 57 for d ≤ 10: the",
        "  sketching error of Theorem 3 scales like 1/√k, and the paper's own runs use k = 2.5 d with",
        "  d = 512); this was not investigated further. The exact route calibrates a smaller γ (less",
        "  noise) at every ε, but with few trials its MSE gain is within the error bars.",
    ]
    lines += [
        "",
        "## Errata and choices applied (research/gaussmix.md §3, §5, §6)",
        "",
        "- Algorithm 1 line 2: noise std √γ·C (the paper prints γ·C); line 5: γ − λ̃/C² (the paper prints",
        "  γ − λ̃, which mixes normalised and raw units).",
        "- Algorithm 2: η = γ/√k as in the paper (the public code effectively uses 2γ/√k and releases",
        "  λ_min with std √(σ_matrix/√k), under-noised relative to its own accounting).",
        "- Theorem 1's Gaussian term √(2 log(3.75/δ))/η is only proven for values ≤ 1 (Dwork–Roth A.1);",
        "  dplens uses max(that, exact analytic Gaussian ε), identical to the paper whenever it is valid.",
        "- Proposition 1 is optimised continuously over α ∈ (1, γ) (α* ≈ 0.26–0.45 γ, in the millions",
        "  for γ = 1e7), never on a capped integer grid.",
        "- The exact profile uses removal leverage t = 1/γ (Lemma 1's bound) and addition leverage",
        "  s = 1/γ; δ(ε) is monotone in the leverage (checked numerically in the tests).",
    ]
    path = out_dir / "README.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def run(out_dir: pathlib.Path, *, quick: bool = False) -> list[pathlib.Path]:
    """Regenerate the seed-004 reproduction into ``out_dir`` (figures, CSV/JSON, README.md).

    Args:
        out_dir: output directory (created if missing).
        quick: fewer ε values and trials (for smoke tests).

    Returns:
        The written files.
    """
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    fig1_paths, fig1 = _figure1(out_dir)
    ols_paths, ols = _utility(out_dir, quick)
    readme = _readme(out_dir, fig1, ols, time.perf_counter() - start, quick)
    return [*fig1_paths, *ols_paths, readme]
