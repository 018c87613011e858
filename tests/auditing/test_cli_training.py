"""``dplens audit SPEC --game one-run|distinguish|attribute``, ``dplens audit-scores``, the ``dp_sgd_training`` spec
type and the ``[audit]`` table: the CLI contract keys, the attribute game on a feature-DP SGD spec, bad files and
flags (exit 2, one line, no traceback), result round trips of every audit result type."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dplens.accountant.compose import Method
from dplens.auditing import attribute as at
from dplens.auditing import one_run as orun
from dplens.auditing.games import AuditResult, audit
from dplens.cli import main
from dplens.mechanisms.additive import GaussianMechanism, RandomizedResponseMechanism
from dplens.spec import AuditTable, load_spec, parse_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONTRACT_KEYS = {"epsilon_lower_bound", "epsilon_claimed", "delta", "confidence", "trials", "verdict"}


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _small_training_spec(tmp_path: Path, audit_table: str = "") -> Path:
    path = tmp_path / "training.toml"
    path.write_text(
        '[[mechanism]]\ntype = "dp_sgd_training"\nnoise_multiplier = 1.0\nsampling_rate = 0.05\nsteps = 100\n'
        f"dataset_size = 200\nmodel_dim = 4\n{audit_table}"
    )
    return path


# --------------------------------------------------------------------------------------------
# The spec
# --------------------------------------------------------------------------------------------


def test_dp_sgd_training_is_accounted_as_the_subsampled_gaussian():
    training = load_spec(EXAMPLES / "dp_sgd_training.toml")
    same = parse_spec(
        {
            "mechanism": [
                {"type": "poisson_subsampled_gaussian", "noise_multiplier": 1.0, "sampling_rate": 0.01, "steps": 1000}
            ]
        }
    )
    assert training.entries == same.entries
    rdp = Method.RDP  # the entries are equal, so every route agrees; RDP is the cheap one to show it
    assert training.accountant().epsilon(1e-5, method=rdp) == same.accountant().epsilon(1e-5, method=rdp)
    assert training.audit == AuditTable(game="one_run", canaries=1000, canary="gradient", observe="all_steps")
    # with_param keeps the [audit] table (calibrate and sweep rebuild the spec).
    assert training.with_param("noise_multiplier", 2.0).audit == training.audit


def _training(**extra) -> dict:
    return {
        "mechanism": [{"type": "dp_sgd_training", "noise_multiplier": 1, "sampling_rate": 0.1, "steps": 3, **extra}]
    }


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"audit": {"game": "one_run", "canaris": 10}}, r"unknown key\(s\) \['canaris'\] in \[audit\]"),
        ({"audit": {"game": "membership"}}, "game must be one of"),
        ({"audit": {"observe": "some"}}, "observe must be one of"),
        ({"audit": {"canaries": 1}}, "canaries must be an integer >= 2"),
        ({"audit": {"prior": [0.5, 0.6]}}, "prior must be probabilities"),
        ({"audit": {"prior": [0.5, 0.5], "values": [0, 1, 2]}}, "same length"),
        ({"audit": "one_run"}, r"\[audit\] must be a table"),
        ({"mechanism": [{"type": "dp_sgd_training", "noise_multiplier": 1.0, "steps": 3}]}, "sampling_rate"),
        (_training(clip_norm=0), "clip_norm must be > 0"),
        (_training(batch=8), r"unknown parameter\(s\) \['batch'\]"),
        (_training(neighboring="replace_one"), "add_remove"),
    ],
)
def test_bad_specs(document, message):
    base = {"mechanism": [{"type": "gaussian", "noise_multiplier": 1.0}]}
    with pytest.raises(ValueError, match=message):
        parse_spec({**base, **document})


# --------------------------------------------------------------------------------------------
# dplens audit --game
# --------------------------------------------------------------------------------------------


def test_one_run_game_from_the_audit_table(capsys):
    code, out, _ = run(capsys, "audit", EXAMPLES / "dp_sgd_training.toml", "--json", "--quiet")
    assert code == 0
    payload = json.loads(out)
    assert set(payload) >= CONTRACT_KEYS
    assert payload["audit_game"] == "one_run" and payload["route"] == "one_run"
    assert payload["trials"] == payload["canaries"] == 1000
    assert payload["epsilon_claimed"] == pytest.approx(1.83, abs=0.005) and payload["verdict"] == "CONSISTENT"
    assert 0 < payload["epsilon_lower_bound"] < payload["epsilon_claimed"]
    assert payload["fdp_epsilon_estimate"] is not None and "estimate" in payload["fdp_assumption"]


def test_the_flag_overrides_the_table(tmp_path, capsys):
    spec = _small_training_spec(tmp_path, '[audit]\ngame = "one_run"\ncanaries = 200\n')
    code, out, _ = run(capsys, "audit", spec, "--game", "distinguish", "--trials", "3000", "--json", "--quiet")
    assert code == 0
    payload = json.loads(out)
    assert payload["audit_game"] == "distinguish" and payload["trials"] == 3000
    assert "Dirac" in payload["mechanism"] and payload["score"] == "exact log-likelihood ratio"
    code, out, _ = run(capsys, "audit", spec, "--game", "one-run", "--trials", "300", "--quiet")  # 300 canaries
    assert (
        code == 0
        and "300 canaries" in out
        and "ESTIMATE" in out
        and out.rstrip().splitlines()[-1].startswith("verdict:")
    )


def test_input_canary_game_from_the_table(tmp_path, capsys):
    table = '[audit]\ngame = "one_run"\ncanary = "input"\nobserve = "final"\ninput_canary = "out_of_distribution"\n'
    code, out, _ = run(capsys, "audit", _small_training_spec(tmp_path, table), "--json", "--quiet", "--trials", "200")
    assert code == 0
    payload = json.loads(out)
    assert payload["game"]["canary"] == "input" and payload["game"]["score"] == "loss"
    assert "out-of-distribution" in payload["game"]["description"]


def test_attribute_game_on_a_feature_dp_sgd_spec(tmp_path, capsys):
    spec = EXAMPLES / "feature_dp_attribute.toml"
    code, out, _ = run(capsys, "audit", spec, "--trials", "3000", "--json", "--quiet")
    assert code == 0
    payload = json.loads(out)
    assert set(payload) >= CONTRACT_KEYS and payload["audit_game"] == "attribute"
    assert payload["reading"] == "feature-dp" and payload["k"] == 2 and payload["prior"] == [0.5, 0.5]
    low, high = payload["confidence_interval"]
    assert low <= payload["success_rate"] <= high
    # The bound the verdict compares: the feature-DP one (Theorem 4 inverted), below the accountant's ε.
    assert payload["epsilon_lower_bound"] == payload["feature_dp_epsilon_lower_bound"]
    assert 0 < payload["epsilon_lower_bound"] < payload["epsilon_claimed"]
    assert payload["epsilon_claimed"] == pytest.approx(3.502, abs=0.01)  # `dplens account ... --delta 1e-5` (PLD)
    assert payload["success_lower_bound"] <= payload["theorem4_success_upper_bound"]
    assert payload["verdict"] == "CONSISTENT"
    # The text output, with a [claim] (no privacy profile to compute: fast).
    claimed = tmp_path / "claimed.toml"
    claimed.write_text(spec.read_text() + "\n[claim]\nepsilon = 3.5\ndelta = 1e-5\n")
    code, out, _ = run(capsys, "audit", claimed, "--game", "attribute", "--trials", "500", "--quiet")
    assert code == 0
    assert "success rate" in out and "interval" in out and "Theorem 4" in out and "epsilon >= " in out
    assert "spec [claim]" in out


def test_a_plain_spec_keeps_its_distinguishing_game(capsys):
    argv = ["audit", EXAMPLES / "gaussian_claim.toml", "--trials", "20000", "--json", "--quiet", "--seed", "3"]
    _, plain, _ = run(capsys, *argv)
    _, flagged, _ = run(capsys, *argv, "--game", "distinguish")
    drop = ("elapsed_seconds", "backend", "audit_game")
    assert {k: v for k, v in json.loads(plain).items() if k not in drop} == {
        k: v for k, v in json.loads(flagged).items() if k not in drop
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--game", "one-run", "--workers", "2"], "single training"),
        (["--game", "attribute"], "trials (--trials) is required for the attribute game"),
        (["--game", "distinguish"], "trials (--trials) is required for the distinguish game"),
        (["--game", "sideways"], "invalid choice"),
    ],
)
def test_bad_game_flags(capsys, argv, message):
    code, out, err = run(capsys, "audit", EXAMPLES / "dp_sgd_training.toml", *argv, "--quiet")
    assert code == 2 and out == ""
    assert err.startswith("dplens: error:") and message in err and len(err.strip().splitlines()) == 1


def test_one_run_needs_a_training_spec(capsys):
    code, _, err = run(capsys, "audit", EXAMPLES / "gaussian_claim.toml", "--game", "one-run", "--quiet")
    assert code == 2 and "dp_sgd_training" in err


# --------------------------------------------------------------------------------------------
# dplens audit-scores
# --------------------------------------------------------------------------------------------


def test_audit_scores_csv_example(capsys):
    argv = ["audit-scores", EXAMPLES / "canary_scores.csv", "--claim-epsilon", "2", "--delta", "1e-5"]
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0
    payload = json.loads(out)
    assert set(payload) >= CONTRACT_KEYS and payload["route"] == "two_sample"
    assert payload["members"] == payload["non_members"] == 600 and payload["verdict"] == "CONSISTENT"
    assert payload["is_estimate"] is False and "gdp_mu_estimate" in payload
    code, out, _ = run(capsys, *argv)
    assert out.startswith("epsilon >= ") and "ESTIMATE (gdp)" in out and "verdict: CONSISTENT" in out
    code, out, _ = run(capsys, *argv[:3], "0.05", "--delta", "1e-5")
    assert "verdict: VIOLATION" in out and code == 0  # a verdict is a result, not an error
    code, out, _ = run(capsys, *argv[:3], "0.05", "--delta", "1e-5", "--fail-on-violation")
    assert "verdict: VIOLATION" in out and code == 1  # for CI pipelines
    code, _, _ = run(capsys, *argv, "--fail-on-violation")
    assert code == 0  # CONSISTENT


def test_audit_scores_one_run_npz(tmp_path, capsys):
    rng = np.random.default_rng(1)
    member = rng.random(4000) < 0.5
    np.savez(tmp_path / "canaries.npz", score=member + rng.laplace(0, 0.5, 4000), member=member)
    code, out, _ = run(
        capsys, "audit-scores", tmp_path / "canaries.npz", "--claim-epsilon", "1", "--delta", "0", "--one-run", "--json"
    )
    assert code == 0
    payload = json.loads(out)
    assert payload["route"] == "one_run" and payload["canaries"] == 4000
    assert payload["verdict"] == "VIOLATION"  # Laplace(1/2) on each bit is 2-DP, and the audit sees more than 1


def test_audit_scores_one_run_combines_the_rigorous_analyses_and_lists_every_estimator(tmp_path, capsys):
    # The scores of issue 37 (μ = 2, m = 1000, numpy seed 0): the bound is the combined analysis, α split 1:4
    # between Steinke et al. and the f-DP audit against the (ε, δ) curve; the GDP-family number is an estimate.
    rng = np.random.default_rng(0)
    member = rng.random(1000) < 0.5
    np.savez(tmp_path / "issue.npz", score=rng.normal(0.0, 1.0, 1000) + 2.0 * member, member=member)
    argv = ["audit-scores", tmp_path / "issue.npz", "--claim-epsilon", "2", "--delta", "1e-5", "--one-run"]
    code, out, _ = run(capsys, *argv, "--json", "--estimators")
    assert code == 0  # a VIOLATION is a result, not an error
    payload = json.loads(out)
    analysis = payload["analysis"]
    parts = {c["analysis"]: c for c in analysis["components"]}
    assert set(parts) == {"approximate_dp", "epsilon_delta_fdp"}
    assert [parts["approximate_dp"]["share"], parts["epsilon_delta_fdp"]["share"]] == [0.2, 0.8]
    assert payload["epsilon_lower_bound"] == max(c["epsilon_lower_bound"] for c in parts.values())
    assert payload["epsilon_lower_bound"] > 3.0  # dplens's Steinke et al. bound alone was 3.00 on these scores
    assert payload["is_estimate"] is False and payload["fdp_epsilon_estimate"] > payload["epsilon_lower_bound"]
    kinds = {(e["name"], e["kind"]) for e in payload["estimators"]}
    assert ("epsilon_one_run_fdp", "bound") in kinds and ("epsilon_one_run_fdp_gaussian", "estimate") in kinds
    assert ("epsilon_one_run", "heuristic") in kinds and ("auroc", "estimate") in kinds
    assert all(e["is_estimate"] is (e["kind"] != "bound") for e in payload["estimators"])
    code, out, _ = run(capsys, *argv, "--estimators")
    assert code == 0 and "analyses (significance split between them" in out
    assert "ESTIMATE  epsilon_one_run_fdp_gaussian" in out


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    files = {}
    np.savez(tmp_path / "no_member.npz", score=np.ones(3))
    files["no array 'member'"] = tmp_path / "no_member.npz"
    np.savez(tmp_path / "lengths.npz", score=np.ones(3), member=np.array([True, False]))
    files["same length"] = tmp_path / "lengths.npz"
    np.savez(tmp_path / "nan.npz", score=np.array([0.1, np.nan, 0.3]), member=np.array([True, False, True]))
    files["finite"] = tmp_path / "nan.npz"
    np.savez(tmp_path / "one_class.npz", score=np.ones(3), member=np.zeros(3, dtype=bool))
    files["no members"] = tmp_path / "one_class.npz"
    (tmp_path / "garbage.npz").write_bytes(b"\x00\x01 not a zip")
    files["not a readable"] = tmp_path / "garbage.npz"
    (tmp_path / "garbage.csv").write_bytes(b"\xff\xfe\x00binary")
    files["not a readable"] = tmp_path / "garbage.csv"
    (tmp_path / "cols.csv").write_text("loss,member\n1,0\n")
    files["no column 'score'"] = tmp_path / "cols.csv"
    files["not found"] = tmp_path / "missing.csv"
    return files


def test_audit_scores_bad_files(tmp_path, capsys):
    for message, path in _bad_files(tmp_path).items():
        code, out, err = run(capsys, "audit-scores", path, "--claim-epsilon", "1", "--delta", "1e-5")
        assert code == 2 and out == "", message
        assert err.startswith("dplens: error: ") and message in err and len(err.strip().splitlines()) == 1, err


def test_audit_scores_bad_file_in_a_fresh_process_prints_no_traceback(tmp_path):
    np.savez(tmp_path / "nan.npz", score=np.array([0.1, np.nan]), member=np.array([True, False]))
    argv = ["audit-scores", str(tmp_path / "nan.npz"), "--claim-epsilon", "1", "--delta", "1e-5"]
    done = subprocess.run(
        [sys.executable, "-m", "dplens.cli", *argv], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["--claim-epsilon", "-1", "--delta", "1e-5"],
        ["--claim-epsilon", "1", "--delta", "1"],
        ["--claim-epsilon", "1"],
        ["--claim-epsilon", "1", "--delta", "1e-5", "--confidence", "0.2"],
    ],
)
def test_audit_scores_bad_flags(capsys, argv):
    code, _, err = run(capsys, "audit-scores", EXAMPLES / "canary_scores.csv", *argv)
    assert code == 2 and err.startswith("dplens: error:") and len(err.strip().splitlines()) == 1


def test_parsing_audit_scores_loads_no_numpy():
    code = "from dplens.cli import main\ntry:\n    main(['audit-scores', '--help'])\nexcept SystemExit:\n    pass\n"
    code += "import sys\nprint('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_audit_scores_is_a_top_level_name():
    import dplens

    assert dplens.audit_scores.__module__ == "dplens.auditing.scores"


# --------------------------------------------------------------------------------------------
# Every audit result type round-trips through JSON
# --------------------------------------------------------------------------------------------


def _round_trip(result):
    text = json.dumps(result.to_dict())
    back = type(result).from_dict(json.loads(text))
    assert back.to_dict() == json.loads(text)
    return back


def test_audit_result_round_trip():
    result = audit(GaussianMechanism(noise_multiplier=1.0), trials=5000, delta=1e-5, claimed_epsilon=4.0)
    assert _round_trip(result) == result
    assert isinstance(AuditResult.from_dict(result.to_dict()), AuditResult)


def test_attribute_audit_result_round_trip():
    result = at.audit(RandomizedResponseMechanism(epsilon=1.0, num_values=3), trials=500, claim=1.0, seed=1)
    assert _round_trip(result) == result
    perfect = at.audit(RandomizedResponseMechanism(epsilon=40.0), trials=50, claim=1.0, seed=1)
    assert _round_trip(perfect) == perfect  # infinite ε bounds survive as None ↔ inf
    with pytest.raises(ValueError, match="missing required field 'verdict'"):
        at.AttributeAuditResult.from_dict({k: v for k, v in result.to_dict().items() if k != "verdict"})
    assert not math.isnan(perfect.ceiling_epsilon)


def test_one_run_result_round_trip():
    rng = np.random.default_rng(2)
    member = rng.random(500) < 0.5
    result = orun.one_run_audit(member + rng.normal(0, 1, 500), member, delta=1e-5)
    assert _round_trip(result) == result
    with pytest.raises(ValueError, match="missing required field 'cutoff'"):
        orun.OneRunResult.from_dict({k: v for k, v in result.to_dict().items() if k != "cutoff"})
