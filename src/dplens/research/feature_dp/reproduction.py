"""Reproduction of seed 003 (feature DP): the ε of the paper's experiments, Theorem 4 bounds, and a utility study.

``dplens reproduce feature-dp`` → :func:`run`. Outputs (CSV, JSON, PNG, README.md) go to ``out_dir``.

Mahloujifar, Guo, Suh, Chaudhuri, "Machine Learning with Privacy for Protected Attributes" (IEEE S&P 2025); note
``research/feature-dp.md`` §5. Part 1 recomputes the ε of the paper's experiments from their stated parameters
(Table I: AFHQ, LSUN-bedroom; Section 6.2: the Purchase100 setting the note reconstructs) by RDP with the optimal
(improved) conversion, RDP with the classic conversion, and PLD (both directions), against the note's §5.4 values.
Part 2 checks the qualitative claim of Section 6.2 on synthetic data: feature-DP SGD (Algorithm 1) has lower test
error than DP-SGD at equal ε when the public features carry signal.
"""

from __future__ import annotations

import json
import math
import pathlib
import time
from typing import Any

import numpy as np

from dplens.accountant import conversions, pld
from dplens.accountant.calibrate import Direction, calibrate
from dplens.accountant.compose import Accountant, Method
from dplens.accountant.curves import RdpConversion
from dplens.mechanisms import dpsgd as md
from dplens.research import _reproduction_common as common
from dplens.research.feature_dp import accounting as fa
from dplens.research.feature_dp import mechanism as fm

__all__ = ["run"]

#: Opacus' default RDP orders (how the note's §5.4 RDP values were computed).
OPACUS_ORDERS = np.array([1 + x / 10 for x in range(1, 100)] + list(range(12, 64)), dtype=float)


# --------------------------------------------------------------------------------------------
# Part 1: ε of the paper's experiments


def _grid_epsilon(event: fa.FeatureDpSgd, delta: float, conversion: RdpConversion) -> tuple[float, float]:
    """ε and α on Opacus' order grid (the note's convention), from our RDP curve."""
    values = fa.feature_dp_rdp_curve(event)(OPACUS_ORDERS)
    to_eps = (
        conversions.rdp_to_epsilon_optimal
        if conversion is RdpConversion.OPTIMAL
        else conversions.rdp_to_epsilon_classic
    )
    eps = to_eps(values, OPACUS_ORDERS, delta)
    i = int(np.argmin(eps))
    return conversions.round_up(float(eps[i])), float(OPACUS_ORDERS[i])


def _settings(quick: bool) -> list[dict[str, Any]]:
    """The experiments' stated parameters (Table I, Section 6.2) with the note's §5.4 reference values."""
    afhq_n, lsun_n = 14_630, 3_033_042
    rows: list[dict[str, Any]] = []
    for convention, label, note in (
        (fa.StepConvention.EXPECTED_BATCH, "q = B/N, T = ceil(E N/B)", {"rdp_grid": 7.9949, "rdp_classic": 8.8431}),
        (fa.StepConvention.LOADER_LENGTH, "Opacus: q = 1/ceil(N/B), T = E ceil(N/B)", {"rdp_grid": 7.9650}),
    ):
        q, steps = fa.schedule_from_epochs(dataset_size=afhq_n, batch_size=128, epochs=100, convention=convention)
        extra = {"pld": 7.3036, "pld_remove": 7.3036, "pld_add": 6.4048} if convention.value == "expected_batch" else {}
        rows.append({
            "setting": "AFHQ (Table I)", "convention": label, "dataset_size": afhq_n, "batch_size": 128,
            "epochs": 100, "noise_multiplier": 0.86, "sampling_rate": q, "steps": steps, "delta": 1 / (2 * afhq_n),
            "target_epsilon": 8.0, "interval": 1e-4, "note": note | extra,
        })  # fmt: skip
    for convention, label, note in (
        (
            fa.StepConvention.EXPECTED_BATCH,
            "q = B/N, T = ceil(E N/B)",
            {"rdp_grid": 0.4959, "rdp_classic": 0.5953, "pld": 0.4621, "pld_remove": 0.4621, "pld_add": 0.4617},
        ),
        (fa.StepConvention.LOADER_LENGTH, "Opacus: q = 1/ceil(N/B), T = E ceil(N/B)", {"rdp_grid": 0.4947}),
    ):
        q, steps = fa.schedule_from_epochs(dataset_size=lsun_n, batch_size=16_384, epochs=500, convention=convention)
        rows.append({
            "setting": "LSUN bedroom (Table I)", "convention": label, "dataset_size": lsun_n, "batch_size": 16_384,
            "epochs": 500, "noise_multiplier": 15.6, "sampling_rate": q, "steps": steps, "delta": 1 / (2 * lsun_n),
            "target_epsilon": 0.5, "interval": 1e-5, "note": note,
        })  # fmt: skip
    purchase = {1: (2.764, 2.242), 2: (3.336, 2.796), 5: (4.571, 3.977), 8: (5.532, 4.886), 10: (6.098, 5.418),
                15: (7.350, 6.593), 20: (8.448, 7.627), 30: (10.385, 9.449)}  # fmt: skip
    for epochs, (rdp_value, pld_value) in purchase.items():
        if quick and epochs not in (1, 10, 30):
            continue
        rows.append({
            "setting": "Purchase100-like (Sec. 6.2; delta assumed)", "convention": "q = 1/16, T = 16 E",
            "dataset_size": None, "batch_size": None, "epochs": epochs, "noise_multiplier": 1.0,
            "sampling_rate": 1 / 16, "steps": 16 * epochs, "delta": 1e-5, "target_epsilon": None, "interval": 1e-4,
            "note": {"rdp_grid": rdp_value, "pld": pld_value},
        })  # fmt: skip
    return rows


def _dp_accounting_grid_epsilon(event: fa.FeatureDpSgd, delta: float) -> float:
    """ε on Opacus' order grid by dp-accounting's own RDP accountant (improved conversion): how the note's RDP
    figures were made (feature-dp notes §5.4, "computed with dp-accounting 0.6.0")."""
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant(orders=[float(a) for a in OPACUS_ORDERS])
    accountant.compose(event.to_dp_accounting())
    return float(accountant.get_epsilon(delta))


#: How far below dp-accounting's fractional-order series dplens's exact fractional orders may take an RDP ε here:
#: the series overstates the RDP at fractional orders (AFHQ, α = 3.4: 3.99664e-4 against 3.99545e-4, the exact
#: value by mpmath at 40 digits, which dplens gives), so the note's RDP figures are slightly high (0.01–0.06 %).
RDP_SERIES_SLACK = 1e-3


def _epsilon_rows(settings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for s in settings:
        event = fa.FeatureDpSgd(
            noise_multiplier=s["noise_multiplier"], sampling_rate=s["sampling_rate"], steps=s["steps"]
        )
        delta = s["delta"]
        rdp = fa.feature_dp_epsilon(event, delta, method=Method.RDP)
        classic = fa.feature_dp_epsilon(event, delta, method=Method.RDP, conversion=RdpConversion.CLASSIC)
        grid, grid_order = _grid_epsilon(event, delta, RdpConversion.OPTIMAL)
        grid_classic, _ = _grid_epsilon(event, delta, RdpConversion.CLASSIC)
        p = fa.feature_dp_epsilon(event, delta, method=Method.PLD, value_discretization_interval=s["interval"])
        mu = fa.gdp_clt_mu_estimate(event)
        row = {
            "setting": s["setting"],
            "convention": s["convention"],
            "epochs": s["epochs"],
            "noise_multiplier": s["noise_multiplier"],
            "sampling_rate": s["sampling_rate"],
            "steps": s["steps"],
            "delta": delta,
            "target_epsilon": s["target_epsilon"],
            "eps_rdp_optimal": rdp.epsilon,
            "alpha_rdp_optimal": rdp.optimal_order,
            "eps_rdp_opacus_grid": grid,
            "alpha_opacus_grid": grid_order,
            "eps_rdp_classic": classic.epsilon,
            "eps_rdp_classic_opacus_grid": grid_classic,
            "eps_pld": p.epsilon,
            "eps_pld_remove": p.epsilon_remove,
            "eps_pld_add": p.epsilon_add,
            "pld_interval": s["interval"],
            "gdp_clt_mu_estimate": mu,
            "eps_gdp_clt_estimate": conversions.gdp_epsilon(mu, delta),
            "meets_target_rdp": None if s["target_epsilon"] is None else rdp.epsilon <= s["target_epsilon"],
            "meets_target_rdp_classic": None if s["target_epsilon"] is None else classic.epsilon <= s["target_epsilon"],
        }
        note = s["note"]
        checks = []
        # The note's RDP figures come from dp-accounting's fractional-order series: re-derive them with it (the
        # setting is right), then dplens's exact orders must be no looser and at most RDP_SERIES_SLACK tighter.
        series = _dp_accounting_grid_epsilon(event, delta)
        row["eps_rdp_grid_dp_accounting_series"] = series
        for key, ours, reference in (
            ("rdp_grid", grid, series),
            ("rdp_classic", grid_classic, None),
            ("pld", p.epsilon, None),
            ("pld_remove", p.epsilon_remove, None),
            ("pld_add", p.epsilon_add, None),
        ):
            if key in note:
                half_unit = 0.5 * 10.0 ** -len(f"{note[key]}".split(".")[1]) + 1e-12
                row[f"note_{key}"] = note[key]
                if key.startswith("rdp"):
                    bound = note[key] + half_unit if reference is None else reference
                    if reference is not None:
                        checks.append(abs(reference - note[key]) <= half_unit)
                    checks.append(bound * (1 - RDP_SERIES_SLACK) <= ours <= bound + 1e-9)
                else:
                    checks.append(abs(ours - note[key]) <= half_unit)
        row["matches_note"] = all(checks)
        out.append(row)
    return out


def _smallest_two_decimal_sigma(event: fa.FeatureDpSgd, delta: float, target: float, *, step: float) -> float:
    """The smallest σ on a grid of ``step`` with RDP ε ≤ target (checks the paper's choice of σ)."""
    result = calibrate(
        lambda s: Accountant().compose(
            fa.FeatureDpSgd(noise_multiplier=s, sampling_rate=event.sampling_rate, steps=event.steps)
        ),
        target_epsilon=target,
        target_delta=delta,
        lower=event.noise_multiplier / 4,
        upper=event.noise_multiplier * 4,
        method=Method.RDP,
        direction=Direction.DECREASING,
        param="noise_multiplier",
    )
    return math.ceil(result.value / step - 1e-9) * step


def _attribute_rows() -> list[dict[str, Any]]:
    """Theorem 4 bounds for the Table I runs (PLD remove direction), from (ε, δ) alone, and from the GDP-CLT."""
    runs = (
        ("AFHQ", fa.FeatureDpSgd(noise_multiplier=0.86, sampling_rate=128 / 14_630, steps=11_430), 1 / 29_260, 1e-4,
         {0.5: 0.936, 0.1: 0.604, 0.01: 0.223}),
        ("LSUN bedroom", fa.FeatureDpSgd(noise_multiplier=15.6, sampling_rate=16_384 / 3_033_042, steps=92_562),
         1 / 6_066_084, 1e-5, {0.5: 0.542, 0.1: 0.1198, 0.01: 0.0132}),
    )  # fmt: skip
    rows = []
    for name, event, delta, interval, note in runs:
        profile = pld.pld_profile(event, value_discretization_interval=interval)
        eps_rdp = fa.feature_dp_epsilon(event, delta, method=Method.RDP).epsilon
        mu = fa.gdp_clt_mu_estimate(event)
        bounds = fa.attribute_inference_bounds_profile(profile, baselines=list(note))
        for (b, expected), bound in zip(note.items(), bounds, strict=True):
            bound = float(bound)
            decimals = len(f"{expected}".split(".")[1])
            rows.append({
                "run": name, "baseline": b, "bound_pld_profile": bound, "pld_interval": interval, "note": expected,
                "matches_note": abs(bound - expected) <= 0.5 * 10.0**-decimals,
                "eps_rdp": eps_rdp, "bound_from_eps_delta_linear": min(1.0, math.exp(eps_rdp) * b + delta),
                "bound_from_eps_delta_tight": fa.attribute_inference_bound_dp(epsilon=eps_rdp, delta=delta, baseline=b),
                "bound_gdp_clt_estimate": fa.attribute_inference_bound_gdp(mu=mu, baseline=b),
            })  # fmt: skip
    return rows


# --------------------------------------------------------------------------------------------
# Part 2: utility on synthetic data

UTILITY = {
    "n_train": 1000,
    "n_test": 4000,
    "num_public": 30,
    "num_private": 30,
    "public_signal": 10.0,
    "private_signal": 10.0,
    "sampling_rate": 0.05,
    "steps": 200,
    "delta": 1e-5,
}
CLIP_GRID = (0.1, 0.3, 1.0, 3.0)
LR_GRID = (0.5, 2.0)


def _data(seed: int, model: md.LossModel) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    data = fm.make_feature_split_data(
        n=UTILITY["n_train"] + UTILITY["n_test"], num_public=UTILITY["num_public"],
        num_private=UTILITY["num_private"], model=model, rng=rng, public_signal=UTILITY["public_signal"],
        private_signal=UTILITY["private_signal"],
    )  # fmt: skip
    n = UTILITY["n_train"]
    return data.features[:n], data.labels[:n], data.features[n:], data.labels[n:], data.public


def _train(method: str, seed: int, model: md.LossModel, z: float, clip: float, lr: float) -> float:
    xtr, ytr, xte, yte, public = _data(seed, model)
    kw = dict(
        model=model, noise_multiplier=z, sampling_rate=UTILITY["sampling_rate"], steps=UTILITY["steps"],
        clip_norm=clip, learning_rate=lr, rng=np.random.default_rng(10_000 + seed),
    )  # fmt: skip
    if method == "dp_sgd":
        result = md.dp_sgd(xtr, ytr, **kw)
    else:
        result = fm.feature_dp_sgd(xtr, ytr, public=public, **kw)
    return md.test_error(result.theta, xte, yte, model=model)


def _baselines(seed: int, model: md.LossModel) -> dict[str, float]:
    xtr, ytr, xte, yte, public = _data(seed, model)
    full = md.minimise_loss(xtr, ytr, model=model, radius=100.0, iterations=500)
    public_only = md.minimise_loss(public.impute(xtr), ytr, model=model, radius=100.0, iterations=500)
    return {
        "non_private": md.test_error(full, xte, yte, model=model),
        "public_features_only": md.test_error(public_only, public.impute(xte), yte, model=model),
    }


def _calibrated_noise(epsilon: float) -> tuple[float, float]:
    """The smallest noise multiplier (PLD) whose run is (ε, δ)-feature-DP (and DP for DP-SGD), and its ε."""
    result = calibrate(
        lambda s: Accountant().compose(
            fa.FeatureDpSgd(noise_multiplier=s, sampling_rate=UTILITY["sampling_rate"], steps=UTILITY["steps"])
        ),
        target_epsilon=epsilon,
        target_delta=UTILITY["delta"],
        lower=0.3,
        upper=60.0,
        method=Method.PLD,
        direction=Direction.DECREASING,
        param="noise_multiplier",
    )
    return result.value, result.epsilon


def _utility(quick: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    eps_grid = (0.5, 2.0, 8.0) if quick else (0.5, 1.0, 2.0, 4.0, 8.0)
    tune_seeds = (0,) if quick else (0, 1)
    eval_seeds = range(100, 104) if quick else range(100, 112)
    rows: list[dict[str, Any]] = []
    chosen: dict[str, Any] = {}
    for model in (md.LossModel.LOGISTIC, md.LossModel.LINEAR):
        for epsilon in eps_grid:
            z, eps_achieved = _calibrated_noise(epsilon)
            for method in ("dp_sgd", "feature_dp_sgd"):
                # Hyperparameters tuned per method on separate seeds (not privacy-accounted, as in the paper; P14).
                scores = {
                    (c, lr): float(np.mean([_train(method, s, model, z, c, lr) for s in tune_seeds]))
                    for c in CLIP_GRID
                    for lr in LR_GRID
                }
                clip, lr = min(scores, key=scores.get)
                chosen[f"{model.value}/{epsilon:g}/{method}"] = {"clip_norm": clip, "learning_rate": lr}
                for seed in eval_seeds:
                    rows.append({
                        "model": model.value, "target_epsilon": epsilon, "epsilon_pld": eps_achieved,
                        "noise_multiplier": z, "method": method, "clip_norm": clip, "learning_rate": lr,
                        "seed": seed, "test_error": _train(method, seed, model, z, clip, lr),
                    })  # fmt: skip
        for seed in eval_seeds:
            for name, value in _baselines(seed, model).items():
                rows.append({
                    "model": model.value, "target_epsilon": None, "epsilon_pld": None, "noise_multiplier": None,
                    "method": name, "clip_norm": None, "learning_rate": None, "seed": seed, "test_error": value,
                })  # fmt: skip
    return rows, {"eps_grid": list(eps_grid), "hyperparameters": chosen, "eval_seeds": len(eval_seeds)}


# --------------------------------------------------------------------------------------------
# Driver

AFHQ_EVENT = fa.FeatureDpSgd(noise_multiplier=0.86, sampling_rate=128 / 14_630, steps=11_430)
LSUN_EVENT = fa.FeatureDpSgd(noise_multiplier=15.6, sampling_rate=16_384 / 3_033_042, steps=92_562)
MODELS = (("logistic", "test misclassification rate"), ("linear", "test mean squared error"))
PRIVATE_METHODS = (("dp_sgd", "DP-SGD", "o"), ("feature_dp_sgd", "feature-DP SGD (Alg. 1)", "s"))


def _table_i_checks() -> dict[str, Any]:
    """The smallest σ on the paper's grid meeting each Table I target, and the replacement variant's ε (RDP)."""
    sigma_afhq = _smallest_two_decimal_sigma(AFHQ_EVENT, 1 / 29_260, 8.0, step=0.01)
    sigma_lsun = _smallest_two_decimal_sigma(LSUN_EVENT, 1 / 6_066_084, 0.5, step=0.1)
    replacement = {
        name: fa.feature_dp_replacement_epsilon(event, delta, method=Method.RDP).to_dict()
        for name, event, delta in (("AFHQ", AFHQ_EVENT, 1 / 29_260), ("LSUN bedroom", LSUN_EVENT, 1 / 6_066_084))
    }
    return {
        "smallest_sigma_meeting_target_rdp": {
            "AFHQ (0.01 grid, eps <= 8)": sigma_afhq,
            "LSUN (0.1 grid, eps <= 0.5)": sigma_lsun,
        },
        "replacement_variant_rdp": replacement,
    }


def _utility_statistics(rows: list[dict[str, Any]], eps_grid: list[float]) -> tuple[dict, dict[str, Any]]:
    """Per model: each private method's (mean, 95 % half-width) test error at each ε, and the summary's means
    (the private methods by ε, then the baselines)."""
    stats: dict[str, dict] = {}
    means: dict[str, Any] = {}
    for model, _ in MODELS:
        stats[model], means[model] = {}, {}
        for method, _, _ in PRIVATE_METHODS:
            stats[model][method] = [
                common.mean_ci95(
                    [
                        r["test_error"]
                        for r in rows
                        if r["model"] == model and r["method"] == method and r["target_epsilon"] == e
                    ]
                )
                for e in eps_grid
            ]
            means[model][method] = {f"{e:g}": m for e, (m, _) in zip(eps_grid, stats[model][method], strict=True)}
        for baseline in ("non_private", "public_features_only"):
            values = [r["test_error"] for r in rows if r["model"] == model and r["method"] == baseline]
            means[model][baseline], _ = common.mean_ci95(values)
    return stats, means


def _plot_utility(out_dir: pathlib.Path, stats: dict, means: dict[str, Any], meta: dict[str, Any]) -> pathlib.Path:
    """``utility.png``: mean test error ± 95 % CI against ε, both methods and the two baselines, per model."""
    import matplotlib.ticker

    eps_grid = meta["eps_grid"]
    fig, axes = common.pyplot().subplots(1, 2, figsize=(11, 4.2))
    for ax, (model, ylabel) in zip(axes, MODELS, strict=True):
        for method, label, marker in PRIVATE_METHODS:
            mean, halves = zip(*stats[model][method], strict=True)
            ax.errorbar(eps_grid, mean, yerr=halves, marker=marker, capsize=3, label=label)
        for baseline, style in (("non_private", ":"), ("public_features_only", "--")):
            ax.axhline(means[model][baseline], color="grey", linestyle=style, label=baseline.replace("_", " "))
        ax.set(xscale="log", xlabel="ε (δ = 1e-5; same ε for both: Theorem 5)", ylabel=ylabel, title=f"{model} model")
        if model == "linear":
            ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(eps_grid, [f"{e:g}" for e in eps_grid])
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle(
        f"feature-DP SGD vs DP-SGD, synthetic data, {UTILITY['num_public']} public + {UTILITY['num_private']} private "
        f"features (mean ± 95% CI over {meta['eval_seeds']} seeds)"
    )
    fig.tight_layout()
    return common.save_figure(fig, out_dir / "utility.png", dpi=120)


def _paired_wins(rows: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Per model: in how many (ε, seed) pairs feature-DP SGD's test error is below DP-SGD's, and of how many."""
    wins = {}
    for model, _ in MODELS:
        pairs: dict[tuple, dict[str, float]] = {}
        for r in rows:
            if r["model"] == model and r["method"] in ("dp_sgd", "feature_dp_sgd"):
                pairs.setdefault((r["target_epsilon"], r["seed"]), {})[r["method"]] = r["test_error"]
        wins[model] = (sum(p["feature_dp_sgd"] < p["dp_sgd"] for p in pairs.values()), len(pairs))
    return wins


def run(out_dir: pathlib.Path, *, quick: bool = False) -> list[pathlib.Path]:
    """Write the feature-DP reproduction (tables, figure, README.md) into ``out_dir``; returns the paths."""
    start = time.time()
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    eps_rows = _epsilon_rows(_settings(quick))
    paths = [common.write_csv(out_dir / "epsilon_table.csv", eps_rows, lineterminator="\n")]
    table_i = _table_i_checks()
    attr_rows = _attribute_rows()
    paths.append(common.write_csv(out_dir / "attribute_inference_bounds.csv", attr_rows, lineterminator="\n"))
    utility_rows, utility_meta = _utility(quick)
    paths.append(common.write_csv(out_dir / "utility_runs.csv", utility_rows, lineterminator="\n"))
    stats, summary_utility = _utility_statistics(utility_rows, utility_meta["eps_grid"])
    paths.append(_plot_utility(out_dir, stats, summary_utility, utility_meta))
    wins = _paired_wins(utility_rows)
    summary = {
        "quick": quick,
        "runtime_s": round(time.time() - start, 1),
        "epsilon_table": eps_rows,
        **table_i,
        "attribute_inference_bounds": attr_rows,
        "utility": {
            "setting": UTILITY, "clip_grid": CLIP_GRID, "lr_grid": LR_GRID, **utility_meta,
            "mean_test_error": summary_utility, "feature_dp_wins": {k: f"{w}/{n}" for k, (w, n) in wins.items()},
        },
    }  # fmt: skip
    paths.append(common.write_atomic(out_dir / "summary.json", json.dumps(summary, indent=2, default=float)))
    paths.append(common.write_atomic(out_dir / "README.md", _readme(summary, eps_rows, attr_rows, wins, quick)))
    return paths


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _readme(summary: dict, eps_rows: list[dict], attr_rows: list[dict], wins: dict, quick: bool) -> str:
    """README.md from ``templates/README.md.j2``: the tables, and where feature-DP SGD wins or loses."""
    util = summary["utility"]
    keys = [f"{e:g}" for e in util["eps_grid"]]
    better, worse = {}, {}
    for model in ("logistic", "linear"):
        m = util["mean_test_error"][model]
        better[model] = ", ".join(k for k in keys if m["feature_dp_sgd"][k] < m["dp_sgd"][k]) or "none"
        worse[model] = [k for k in keys if m["feature_dp_sgd"][k] >= m["dp_sgd"][k]]
    return common.render_readme(
        "dplens.research.feature_dp",
        filters={"cell": _fmt},
        summary=summary,
        quick=quick,
        eps_rows=eps_rows,
        attr_rows=attr_rows,
        wins=wins,
        util=util,
        keys=keys,
        n_eps_ok=sum(r["matches_note"] for r in eps_rows),
        n_attr_ok=sum(r["matches_note"] for r in attr_rows),
        afhq=next(r for r in eps_rows if r["setting"].startswith("AFHQ")),
        lsun=next(r for r in eps_rows if r["setting"].startswith("LSUN")),
        sig=summary["smallest_sigma_meeting_target_rdp"],
        rep=summary["replacement_variant_rdp"],
        clip_grid=CLIP_GRID,
        lr_grid=LR_GRID,
        better=better,
        worse_listed="; ".join(f"{model} at ε = {', '.join(ks)}" for model, ks in worse.items() if ks),
    )
