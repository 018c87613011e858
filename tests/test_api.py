"""The public API: lazy exports, no name clashes, and a cold start that loads only what a command uses."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import dplens

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _loaded_after(code: str) -> set[str]:
    """The heavy modules loaded by ``code`` in a fresh interpreter."""
    probe = (
        code
        + "\nimport sys\nprint()\nprint(' '.join(m for m in ('numpy', 'scipy', 'matplotlib', 'mpmath', 'dp_accounting',"
    )
    probe += " 'jinja2', 'dask') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(out.stdout.splitlines()[-1].split()) if out.stdout.strip() else set()


def test_import_dplens_loads_no_numpy():
    assert _loaded_after("import dplens") == set()


def test_the_issue_names_import_from_the_top_level():
    loaded = _loaded_after(
        "from dplens import Accountant, NeighboringRelation, from_dp_accounting, calibrate, audit, load_spec"
    )
    assert "numpy" in loaded  # the names resolve (Accountant needs numpy) ...
    assert not loaded & {"scipy", "matplotlib", "dp_accounting"}  # ... and load nothing they do not use


def test_help_and_argument_errors_load_no_numpy():
    for argv in (["--help"], ["account"], ["account", "x.toml", "--delta", "2"], ["nonsense"]):
        code = f"from dplens.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
        assert _loaded_after(code) == set(), argv


def test_rdp_route_of_standard_events_needs_no_scipy():
    code = (
        "from dplens.cli import main\n"
        f"main(['account', {str(EXAMPLES / 'dp_sgd_mnist.toml')!r}, '--delta', '1e-5', '--method', 'rdp'])"
    )
    assert _loaded_after(code) == {"numpy"}


def test_every_export_resolves_and_is_listed():
    assert set(dplens.__all__) == {"__version__", *dplens._EXPORTS} and len(set(dplens.__all__)) == len(dplens.__all__)
    for name in dplens.__all__:
        assert getattr(dplens, name) is not None
    assert set(dir(dplens)) >= set(dplens.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        dplens.nonexistent  # noqa: B018


def test_no_export_shares_its_name_with_a_subpackage_or_module():
    """Importing dplens.<sub> rebinds the attribute to the module, so an export must not share a submodule's name."""
    submodules = {info.name for info in pkgutil.iter_modules(dplens.__path__)}
    assert not submodules & set(dplens.__all__)
    importlib.import_module("dplens.auditing.games")
    assert callable(dplens.audit) and not isinstance(dplens.audit, type(dplens))


def test_cli_choices_match_the_library_enums():
    from dplens import cli
    from dplens.accountant.compose import Method
    from dplens.accountant.curves import RdpConversion

    assert set(cli.METHODS) == {m.value for m in Method}
    assert set(cli.CONVERSIONS) == {c.value for c in RdpConversion}


def test_calibrate_accepts_a_spec_path_and_a_function():
    result = dplens.calibrate(
        EXAMPLES / "dp_sgd_mnist.toml", param="noise_multiplier", target_epsilon=3.0, delta=1e-5, method="rdp"
    )
    assert result.param == "noise_multiplier" and result.epsilon <= 3.0
    spec = dplens.load_spec(EXAMPLES / "dp_sgd_mnist.toml").with_param("noise_multiplier", result.value)
    assert spec.accountant().epsilon(1e-5, method=dplens.Method.RDP) <= 3.0
    with pytest.raises(ValueError, match="lower and upper"):
        dplens.calibrate(lambda s: dplens.Gaussian(noise_multiplier=s), target_epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="param must name"):
        dplens.calibrate(EXAMPLES / "dp_sgd_mnist.toml", target_epsilon=1.0, delta=1e-5)


def test_best_calibration_keeps_the_route_that_spends_the_least():
    """BEST calibrates on every route that supports the ledger and keeps the least noise (or the most steps): the
    Gaussian's exact profile beats PLD and RDP, so BEST is exactly the exact route's σ; for steps, the largest count."""

    def gaussian(s):
        return dplens.Gaussian(noise_multiplier=s)

    options = dict(target_epsilon=1.0, delta=1e-5, lower=0.5, upper=20.0)
    each = {m: dplens.calibrate(gaussian, **options, method=m).value for m in ("pld", "exact", "rdp")}
    best = dplens.calibrate(gaussian, **options, method="best")
    assert best.value == min(each.values()) == each["exact"] and best.method is dplens.Method.EXACT
    assert best.epsilon <= 1.0 and all(f"{m}: " in best.details for m in each)
    spec = dplens.calibrate(EXAMPLES / "gaussian_claim.toml", param="noise_multiplier", method="best", **options)
    assert spec.value == best.value  # the spec path no longer maps BEST to PLD

    def steps(n):
        return dplens.SelfComposed(event=dplens.Gaussian(noise_multiplier=20.0), count=n)

    counts = dict(target_epsilon=1.0, delta=1e-5, lower=1, upper=400, integer=True)
    each = {m: dplens.calibrate(steps, **counts, method=m).value for m in ("pld", "exact", "rdp")}
    most = dplens.calibrate(steps, **counts, method="best")
    assert most.value == max(each.values()) and most.epsilon <= 1.0, (each, most)


def test_audit_accepts_a_spec_path_with_a_claim_override():
    result = dplens.audit(EXAMPLES / "gaussian_claim.toml", trials=20_000, claim=(50.0, 1e-5), seed=3)
    assert result.epsilon_claimed == 50.0 and result.verdict.value in {"CONSISTENT", "INCONCLUSIVE"}
    with pytest.raises(ValueError, match="subject must be"):
        dplens.audit(42, trials=10)


def test_results_display_in_a_notebook(tmp_path):
    acc = dplens.Accountant().compose(dplens.Gaussian(noise_multiplier=1.0))
    eps = acc.epsilon_result(1e-5)
    assert repr(eps).startswith("EpsilonResult(epsilon=4.37718 [upper bound], delta=1e-05")
    assert "<table>" in eps._repr_html_() and "an upper bound" in eps._repr_html_()
    cal = dplens.calibrate(
        lambda s: dplens.Gaussian(noise_multiplier=s), target_epsilon=1.0, delta=1e-5, lower=1, upper=10, method="rdp"
    )
    assert repr(cal).startswith("CalibrationResult(param=") and "<= 1 at delta=1e-05" in repr(cal)
    assert "Calibrated param" in cal._repr_html_()
    from dplens.mechanisms.additive import LaplaceMechanism

    audit = dplens.audit(LaplaceMechanism(scale=1.0), trials=5_000, claim=(1.0, 0.0), seed=2)
    assert repr(audit).startswith(f"AuditResult({audit.verdict.value}: epsilon >= ")
    assert "valid 95% lower bound" in repr(audit) and "ESTIMATE" in audit._repr_html_()
    files = dplens.generate_report(
        EXAMPLES / "gaussian_claim.toml", tmp_path, title="<b>x</b>", audit_mode=dplens.AuditMode.OFF
    )
    assert repr(files.report).startswith("Report('<b>x</b>': NOT_AUDITED; epsilon <= 4.37718")
    assert "&lt;b&gt;x&lt;/b&gt;" in files.report._repr_html_() and "<b>x</b>" not in files.report._repr_html_()


# --------------------------------------------------------------------------------------------
# One front door for spec audits (issue 39): `dplens audit SPEC` and `dplens.audit(SPEC)` run the same game
# --------------------------------------------------------------------------------------------

_CLI_ONLY_KEYS = ("elapsed_seconds", "backend", "spec_sha256", "audit_game")


def _cli_audit(capsys, spec: Path, trials: int | None) -> tuple[int, dict | None, str]:
    from dplens import cli

    argv = ["audit", str(spec), "--json", "--quiet", "--seed", "0"] + (
        [] if trials is None else ["--trials", str(trials)]
    )
    capsys.readouterr()
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err.strip()


def _comparable(payload: dict) -> dict:
    payload = {k: v for k, v in payload.items() if k not in _CLI_ONLY_KEYS}
    if "replace_one_epsilon_lower_bound" in payload:  # the CLI's JSON leads with the feature-DP bound (its verdict's)
        payload["epsilon_lower_bound"] = payload.pop("replace_one_epsilon_lower_bound")
    return payload


@pytest.mark.parametrize("spec", sorted(EXAMPLES.glob("*.toml")), ids=lambda path: path.stem)
def test_the_cli_and_python_audit_every_example_spec_alike(capsys, spec):
    """Before, `dplens.audit(spec)` ignored the spec's [audit] table: examples/dp_sgd_training.toml at 20 000 trials,
    seed 0, gave 0.883 from Python (the distinguishing game) and 0.530 from the CLI (the spec's one-run game) at
    074fbbc; now both run the one-run game: 0.818 (issue 37's combined analysis)."""
    trials = None if spec.stem == "dp_sgd_training" else 300  # its [audit] game is one run: no trials
    code, payload, err = _cli_audit(capsys, spec, trials)
    if code == 2:
        message = err.removeprefix("dplens: error: ")
        with pytest.raises(ValueError) as raised:
            dplens.audit(spec, trials=trials, seed=0)
        assert str(raised.value) == message
        return
    result = dplens.audit(spec, trials=trials, seed=0)
    assert code in (0, 1) and payload is not None
    assert _comparable(payload) == _comparable(result.to_dict())


def test_python_spec_audits_choose_the_game_like_the_cli():
    from dplens.mechanisms.additive import GaussianMechanism

    one_run = dplens.audit(EXAMPLES / "dp_sgd_training.toml", seed=0)  # the [audit] game: one run, no trials needed
    assert type(one_run).__name__ == "OneRunAuditResult" and one_run.canaries == 1000
    with pytest.raises(ValueError, match=r"trials \(--trials\) is required for the distinguish game"):
        dplens.audit(EXAMPLES / "dp_sgd_training.toml", game="distinguish")
    with pytest.raises(ValueError, match="trials is required to audit"):
        dplens.audit(GaussianMechanism(noise_multiplier=1.0))
    with pytest.raises(ValueError, match="game applies to a spec audit"):
        dplens.audit(GaussianMechanism(noise_multiplier=1.0), trials=10, game="one-run")
