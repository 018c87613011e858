"""Canary audits of real Opacus trainings (dplens.integrations.opacus_audit).

Fast tests train tiny models for tens of steps; the planted bugs that need many trainings and the 10-seed
acceptance measurement of the digits example are marked slow.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# One line naming the extra when it is absent (a failure under CI=true: root conftest.py).
torch = pytest.importorskip("torch", reason='needs the [torch] extra: pip install "dplens[torch]"')
pytest.importorskip("opacus", reason='needs the [torch] extra: pip install "dplens[torch]"')
stats = pytest.importorskip("scipy.stats")

from dplens.auditing import canaries as cn  # noqa: E402
from dplens.auditing import runner  # noqa: E402
from dplens.auditing.canaries import DiracCanaryGame  # noqa: E402
from dplens.auditing.games import AuditResult  # noqa: E402
from dplens.auditing.scores import OneRunAuditResult  # noqa: E402
from dplens.integrations import opacus_audit as oa  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LR = 0.5


# --------------------------------------------------------------------------------------------
# A tiny training (top-level functions: picklable for worker processes)
# --------------------------------------------------------------------------------------------


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def linear4() -> torch.nn.Module:
    return torch.nn.Linear(8, 4)


def tiny_data(n: int = 200, scale: float = 1.0, classes: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 8))
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5) if classes == 3 else rng.integers(0, classes, n)
    return (scale * x).astype(np.float32), y


def training(**changes) -> oa.OpacusTraining:
    options = dict(
        model=mlp, data=tiny_data(), noise_multiplier=1.0, max_grad_norm=1.0, batch_size=20, steps=40, learning_rate=LR
    )
    return oa.OpacusTraining(**{**options, **changes})


# --------------------------------------------------------------------------------------------
# Planted training bugs, written as a user would write them around make_private
# --------------------------------------------------------------------------------------------


def noise_forgets_clip_norm(model, optimizer, loader):
    """Bug 1: the noise's standard deviation is σ instead of σ·C (the noise multiplier divided by C)."""
    optimizer.noise_multiplier = optimizer.noise_multiplier / optimizer.max_grad_norm


def _sum_unclipped(self):
    for p in self.params:
        p.summed_grad = self._get_flat_grad_sample(p).sum(dim=0)


def skip_clipping(model, optimizer, loader):
    """Bug 2: per-sample clipping skipped (the per-sample gradients are summed as they are)."""
    optimizer.clip_and_accumulate = _sum_unclipped.__get__(optimizer)


def private_without_last_bias(model):
    """Bug 3, part 1: the private optimiser gets every parameter but the last layer's bias."""
    return torch.optim.SGD([p for name, p in model.named_parameters() if name != "bias"], lr=LR)


def plain_step_for_last_bias(model, optimizer, loader):
    """Bug 3, part 2: the last layer's bias is updated by a plain optimiser outside the private one."""
    bias = next(p for name, p in model.named_parameters() if name.endswith("bias"))
    plain = torch.optim.SGD([bias], lr=LR)

    def step():
        plain.step()
        plain.zero_grad()
        bias.grad_sample = None  # Opacus refuses accumulated per-sample gradients on the next backward pass

    return step


# --------------------------------------------------------------------------------------------
# The white-box observation is the subsampled Gaussian
# --------------------------------------------------------------------------------------------


def test_gradient_canary_scores_have_the_distribution_of_the_exact_game():
    """One Opacus run: the canaries' per-step likelihood-ratio scores (in and out) have the distribution of the
    vectorised Dirac game with the training's σ, q, T (two-sample KS), so the observation is the Poisson-subsampled
    Gaussian the accountant bounds."""
    t = training(steps=60)
    included = np.arange(400) % 2 == 0
    run = oa.run_training(t, seed=3, gradient_canaries=400, included=included)
    game = DiracCanaryGame(noise_multiplier=1.0, sampling_rate=t.sampling_rate, steps=60)
    rng = np.random.default_rng(0)
    for flag in (True, False):
        reference = game.log_likelihood_ratio(game.sample(flag, 4000, rng), True, False)
        assert stats.ks_2samp(run.gradient_llr[included == flag], reference).pvalue > 1e-3
    assert run.expected_batch_size == 20  # int(200 / 10): Opacus's divisor


def test_training_is_reproducible_and_sampling_rate_fixed():
    t = training(steps=10)
    a = oa.run_training(t, seed=5, gradient_canaries=8, included=np.ones(8, bool))
    b = oa.run_training(t, seed=5, gradient_canaries=8, included=np.ones(8, bool))
    assert np.array_equal(a.gradient_llr, b.gradient_llr)
    for p, r in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(p, r)
    assert t.batches == 10 and t.sampling_rate == 0.1
    extra = t.input_canaries(37, oa.InputCanary.MISLABELLED, np.random.default_rng(0))
    assert np.all(extra[1] != tiny_data()[1][np.random.default_rng(0).integers(0, 200, 37)])  # labels changed
    assert oa.run_training(t, seed=5, extra=extra).expected_batch_size == int(237 / 10)  # q stays 1/10


def test_a_torch_dataset_trains_exactly_as_the_same_arrays():
    x, y = tiny_data()
    arrays = training(steps=15)
    dataset = training(steps=15, data=torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)))
    assert dataset.data_digest() == "torch.utils.data.dataset.TensorDataset[200]"
    for options in (dict(canaries=40), dict(canaries=40, canary="input")):
        a = oa.one_run_opacus_audit(arrays, seed=4, **options)
        b = oa.one_run_opacus_audit(dataset, seed=4, **options)
        assert a.epsilon_lower_bound == b.epsilon_lower_bound and a.histogram == b.histogram


# --------------------------------------------------------------------------------------------
# One run: correct training, planted bugs 1 and 2
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm", [1.0, 10.0])
def test_one_run_white_box_on_a_correct_training_is_not_a_violation(norm):
    t = training()
    result = oa.one_run_opacus_audit(t, canaries=300, gradient_norm=norm, seed=1)
    assert isinstance(result, OneRunAuditResult)
    accounting = result.game["accounting"]
    assert accounting["epsilon"] == result.epsilon_claimed and accounting["sampling_rate"] == 0.1
    assert result.verdict.value != "VIOLATION"
    assert 0 < result.epsilon_lower_bound <= result.epsilon_claimed  # the canaries are seen, within the claim
    assert OneRunAuditResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_planted_bug_noise_forgets_the_clip_norm_is_caught_white_box():
    """C = 10 and noise std σ instead of σC: the white-box gradient canaries see a noise multiplier of σ/10."""
    t = training(noise_multiplier=2.0, max_grad_norm=10.0, customise=noise_forgets_clip_norm)
    result = oa.one_run_opacus_audit(t, canaries=300, seed=2)
    assert result.verdict.value == "VIOLATION"
    assert result.epsilon_lower_bound > result.epsilon_claimed
    correct = oa.one_run_opacus_audit(training(noise_multiplier=2.0, max_grad_norm=10.0), canaries=300, seed=2)
    assert correct.verdict.value != "VIOLATION"


def test_planted_bug_clipping_skipped_is_caught_by_over_norm_canaries():
    """Clipping skipped: a gradient canary of norm 10·C (which a correct training clips to C) passes whole."""
    t = training(noise_multiplier=2.0, customise=skip_clipping)
    result = oa.one_run_opacus_audit(t, canaries=300, gradient_norm=10.0, seed=3)
    assert result.verdict.value == "VIOLATION"
    assert result.epsilon_lower_bound > result.epsilon_claimed


def test_one_run_black_box_input_canaries_and_report(tmp_path, capsys):
    t = training(steps=20)
    result = oa.one_run_opacus_audit(t, canaries=100, canary="input", input_canary="out_of_distribution")
    assert result.game["canary"] == "input" and result.game["score"] == "loss"
    assert result.verdict.value != "VIOLATION"
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result.to_dict()))
    from dplens import cli

    assert cli.main(["report", "--audit", str(path), "-o", str(tmp_path / "out")]) == 0
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Opacus DP-SGD training" in html and "accountant" in html
    assert "verdict:" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------
# Many runs: workers, checkpoints, scores
# --------------------------------------------------------------------------------------------


def _strip(result: AuditResult) -> dict:
    return {k: v for k, v in result.to_dict().items() if k not in ("elapsed_seconds", "backend")}


def test_multi_run_is_bit_identical_on_one_and_two_workers_and_resumes(tmp_path):
    t = training(steps=10)
    common = dict(trials=16, pilot_trials=8, chunk_size=4, seed=7, claim=1.0)
    one = oa.multi_run_opacus_audit(t, **common)
    two = oa.multi_run_opacus_audit(t, **common, workers=2, checkpoint=tmp_path / "ckpt.jsonl")
    assert _strip(one) == _strip(two)
    assert one.trials == 16 and "Opacus DP-SGD training" in one.mechanism
    assert one.claim_source.startswith("given (the training's accountant: epsilon ")
    (tmp_path / "multi.json").write_text(json.dumps(one.to_dict()))
    from dplens import cli

    assert cli.main(["report", "--audit", str(tmp_path / "multi.json"), "-o", str(tmp_path / "report")]) == 0
    assert "accountant: epsilon " in (tmp_path / "report" / "report.html").read_text()
    # a run killed after two chunks (the checkpoint's header and first two chunk lines survive) resumes to the same
    lines = (tmp_path / "ckpt.jsonl").read_text().splitlines()
    assert len(lines) == 1 + 4
    (tmp_path / "killed.jsonl").write_text("\n".join(lines[:3]) + "\n")
    calls = []
    with runner.observe(calls.append):
        resumed = oa.multi_run_opacus_audit(t, **common, checkpoint=tmp_path / "killed.jsonl")
    assert _strip(resumed) == _strip(one)
    assert len((tmp_path / "killed.jsonl").read_text().splitlines()) == 5


def test_multi_run_takes_its_pilot_and_chunks_from_the_plan_the_numpy_game_shares(monkeypatch):
    """issue 39: the Opacus and numpy training games decide their defaults in one function
    (:func:`dplens.auditing.canaries.training_game_plan`); no training runs (games.audit is replaced)."""
    seen = []
    assert oa.games is cn.games  # both call the one games.audit
    monkeypatch.setattr(oa.games, "audit", lambda game, **options: seen.append((type(game).__name__, options)))
    numpy_training = cn.DpSgdTraining(noise_multiplier=1.0, sampling_rate=0.1, steps=3)
    for trials in (16, 64, 256, 1000, 20_000):
        oa.multi_run_opacus_audit(training(steps=2), trials=trials, claim=1.0)
        cn.multi_run_canary_audit(numpy_training, trials=trials, claim=1.0, canary="input")
        plans = [(game, options["pilot_trials"], options["chunk_size"]) for game, options in seen[-2:]]
        plan = cn.training_game_plan(trials)
        assert plans == [(name, plan.pilot_trials, plan.chunk_size) for name in ("OpacusCanaryGame", "TrainingGame")]
    monkeypatch.setattr(
        cn, "training_game_plan", lambda trials, **given: cn.TrainingGamePlan(pilot_trials=7, chunk_size=5)
    )
    oa.multi_run_opacus_audit(training(steps=2), trials=40, claim=1.0)
    assert (seen[-1][0], seen[-1][1]["pilot_trials"], seen[-1][1]["chunk_size"]) == ("OpacusCanaryGame", 7, 5)


@pytest.mark.parametrize("score", ["loss", "gradient_alignment", "reference_likelihood_ratio"])
def test_multi_run_input_canary_scores(score):
    t = training(steps=10)
    result = oa.multi_run_opacus_audit(
        t, trials=8, pilot_trials=4, canary="input", score=score, reference_trainings=3, seed=1, claim=2.0
    )
    assert result.score.endswith(score.replace("_", " "))
    assert result.verdict.value != "VIOLATION"
    if score == "reference_likelihood_ratio":
        assert "reference fit" in result.mechanism


@pytest.mark.slow
def test_planted_bug_last_bias_outside_the_private_optimiser_is_caught_by_a_canary_class():
    """The last layer's bias updated by a plain SGD: a canary of a class no record has, with input 0 (the model
    maps it to its bias), moves that bias without noise; the multi-run game on its loss shows it. The same audit of
    the correct training (bias private) is not a violation."""
    data = tiny_data(scale=0.05, classes=3)
    base = dict(model=linear4, data=data, noise_multiplier=3.0, max_grad_norm=1.0, batch_size=20, steps=100)
    base["learning_rate"] = LR
    canary = (np.zeros((1, 8), np.float32), np.array([3]))
    common = dict(trials=100, pilot_trials=25, canary="input", canary_records=canary, seed=0)
    buggy = oa.OpacusTraining(**base, optimizer=private_without_last_bias, customise=plain_step_for_last_bias)
    result = oa.multi_run_opacus_audit(buggy, **common)
    assert result.verdict.value == "VIOLATION", result.epsilon_lower_bound
    correct = oa.multi_run_opacus_audit(oa.OpacusTraining(**base), **common)
    assert correct.verdict.value != "VIOLATION"


# --------------------------------------------------------------------------------------------
# The worked example's acceptance (digits, ε = 8)
# --------------------------------------------------------------------------------------------


def _example():
    spec = importlib.util.spec_from_file_location("opacus_digits_example", ROOT / "examples" / "opacus_digits.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_digits_white_box_acceptance_over_ten_seeds():
    """At the accountant's ε (8): never a violation and a lower bound ≥ 0.2·ε; against a claim 20× lower: VIOLATION
    in at least 8 of 10 seeds."""
    example = _example()
    pytest.importorskip("sklearn")
    t = example.digits_training()
    epsilon = t.accounting(1e-5)["epsilon"]
    assert epsilon <= 8.0
    violations = 0
    for seed in range(10):
        at_claim = oa.one_run_opacus_audit(t, canaries=1000, seed=seed)
        assert at_claim.verdict.value != "VIOLATION"
        assert at_claim.epsilon_lower_bound >= 0.2 * epsilon
        lower = oa.one_run_opacus_audit(t, canaries=1000, seed=seed, claim=epsilon / 20)
        violations += lower.verdict.value == "VIOLATION"
    assert violations >= 8


# --------------------------------------------------------------------------------------------
# Bad input and the missing extra
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: training(noise_multiplier=0.0), "noise_multiplier must be"),
        (lambda: training(batch_size=0), "batch_size must be an integer >= 1; got 0"),
        (lambda: training(data=(np.zeros((3, 2)), np.zeros(4, int))), "data: features"),
        (lambda: training(make_private={"noise_multiplier": 2.0}), "make_private"),
        (lambda: training(model="nowhere"), "model must be a callable or 'module:name'"),
        (lambda: oa.one_run_opacus_audit(training(), canary="input", score="likelihood_ratio"), "does not apply"),
        (lambda: oa.one_run_opacus_audit(training(), gradient_norm=0.5), "gradient_norm must be >= 1"),
        (lambda: oa.one_run_opacus_audit(training(), canaries=0), "canaries"),
        (lambda: oa.one_run_opacus_audit(training(), canary="sideways"), "canary must be one of"),
        (lambda: oa.one_run_opacus_audit(training(), delta=0.0), "delta must be > 0"),
        (lambda: oa.one_run_opacus_audit("training"), "training must be an OpacusTraining"),
        (lambda: oa.multi_run_opacus_audit(training(), trials=4, score="reference_likelihood_ratio"), "does not apply"),
        (
            lambda: oa.multi_run_opacus_audit(training(), trials=4, canary="input", canary_records=(np.zeros((1, 3)),)),
            "canary_records",
        ),
        (
            lambda: oa.one_run_opacus_audit(training(optimizer=adam), canaries=4),
            "white-box gradient canaries need torch.optim.SGD",
        ),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def adam(model):
    return torch.optim.Adam(model.parameters(), lr=0.01)


def test_without_the_extra_one_line_names_it():
    code = (
        "import sys; sys.modules['opacus'] = None\n"
        "import dplens.integrations.opacus_audit as oa\n"
        "try:\n    oa.require_torch()\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == 'Opacus audits need torch and opacus: pip install "dplens[torch]"'


def test_import_dplens_loads_no_torch():
    code = "import sys, dplens, dplens.integrations; print('torch' in sys.modules, 'opacus' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False False"


KILLABLE = """
import json, sys
import numpy as np
import torch
from dplens.integrations import opacus_audit as oa


def model():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 8)).astype(np.float32)
    t = oa.OpacusTraining(
        model=model, data=(x, (x[:, 0] > 0).astype(np.int64)), noise_multiplier=1.0, max_grad_norm=1.0,
        batch_size=20, steps=40,
    )
    checkpoint = sys.argv[1] if len(sys.argv) > 1 else None
    result = oa.multi_run_opacus_audit(t, trials=48, pilot_trials=8, chunk_size=4, seed=3, claim=1.0,
                                       checkpoint=checkpoint)
    print(json.dumps({k: v for k, v in result.to_dict().items() if k not in ("elapsed_seconds", "backend")}))
"""


@pytest.mark.slow
def test_multi_run_killed_by_sigkill_resumes_from_its_checkpoint(tmp_path):
    """A multi-run Opacus audit killed with SIGKILL part-way resumes from its checkpoint (only the missing chunks
    run) and gives exactly the result of an uninterrupted run."""
    import os
    import signal
    import time

    script = tmp_path / "killable.py"
    script.write_text(KILLABLE)
    path = tmp_path / "ckpt.jsonl"
    process = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if path.exists() and len(path.read_text().splitlines()) >= 3:  # a header and two finished chunks
                break
            time.sleep(0.05)
        assert process.poll() is None, process.communicate()
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    survived = len(path.read_text().splitlines()) - 1
    assert 2 <= survived < 12
    resumed = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True, check=True)
    fresh = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert json.loads(resumed.stdout) == json.loads(fresh.stdout)
    assert len(path.read_text().splitlines()) == 1 + 12


# --------------------------------------------------------------------------------------------
# The device (issue 37): OpacusTraining(device=...) trains and scores there; workers after a GPU training
# --------------------------------------------------------------------------------------------


def _result_bits(result) -> dict:
    return {k: v for k, v in result.to_dict().items() if k not in ("elapsed_seconds", "backend")}


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), "cpu:0"], ids=["str", "torch.device", "indexed"])
def test_device_cpu_trains_and_scores_there_with_the_same_bits(device):
    base = training(steps=10)
    moved = training(steps=10, device=device)
    assert moved.device == str(device)
    for canary in ("gradient", "input"):
        one = oa.one_run_opacus_audit(base, canaries=64, canary=canary, seed=2, claim=1.0)
        two = oa.one_run_opacus_audit(moved, canaries=64, canary=canary, seed=2, claim=1.0)
        assert _result_bits(one)["analysis"] == _result_bits(two)["analysis"]
        assert one.histogram == two.histogram and one.auc_estimate == two.auc_estimate
    assert ("on cpu:0" in moved.describe()) is (str(device) == "cpu:0")


def test_data_moves_to_the_device_once_per_process():
    t = training(steps=4)
    oa.run_training(t, seed=1)
    first = oa._ON_DEVICE[t]["cpu"]
    oa.run_training(t, seed=2, extra=(t.data[0][:3], t.data[1][:3]))
    assert oa._ON_DEVICE[t]["cpu"][0] is first[0] and oa._ON_DEVICE[t]["cpu"][1] is first[1]


@pytest.mark.parametrize(
    ("device", "message"),
    [("gpu!", r"device must be a torch device such as 'cpu'.*got 'gpu!'"), (3, r"device must be .*got 3")],
)
def test_bad_device_is_one_line(device, message):
    with pytest.raises(ValueError, match=message):
        training(device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_a_gpu_is_one_line():
    t = training(steps=4, device="cuda")  # documented and accepted; refused with one line where no GPU is seen
    assert "on cuda" in t.describe()
    with pytest.raises(ValueError, match=r"device 'cuda': torch sees no CUDA device here \(torch "):
        oa.one_run_opacus_audit(t, canaries=16, seed=0, claim=1.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (runs where one is present)")
@pytest.mark.parametrize("canary", ["gradient", "input"])
def test_cuda_training_audit(canary):
    t = training(steps=20, device="cuda")
    result = oa.one_run_opacus_audit(t, canaries=200, canary=canary, seed=0)
    assert result.verdict.value != "VIOLATION" and 0 <= result.epsilon_lower_bound < result.epsilon_claimed
    run = oa.run_training(t, seed=0)
    assert all(p.device.type == "cuda" for p in run.model.parameters())


def test_multi_run_with_two_workers_after_a_gpu_build_is_loaded_gives_the_one_worker_bits(monkeypatch):
    # No GPU here: a CUDA build of torch is what makes the runner leave fork (autograd device threads). With
    # torch.version.cuda set, the pool starts by forkserver for real, workers import the training's model by its
    # module, and the counts are the one-worker bits.
    helpers = ROOT / "tests" / "helpers"
    monkeypatch.syspath_prepend(str(helpers))
    import start_method_tasks

    t = training(steps=10, model=start_method_tasks.model)
    common = dict(trials=8, pilot_trials=4, chunk_size=2, seed=5, claim=1.0)
    one = oa.multi_run_opacus_audit(t, **common)
    oa.run_training(t, seed=0)  # a training in this process first: the case of the issue
    monkeypatch.delenv(runner.START_METHOD_VARIABLE, raising=False)
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    assert runner.choose_start_method()[0] == "forkserver"
    two = oa.multi_run_opacus_audit(t, **common, workers=2)
    assert "start method forkserver: torch built for GPUs (12.4)" in two.backend
    assert _result_bits(two) == _result_bits(one)


def test_the_gpu_benchmark_runs_small_on_the_cpu():
    # benchmarks/bench_gpu_audit.py at CI size: a CIFAR-10-shaped conv net, 1000 canaries, one run, white-box and
    # black-box; the bounds are valid numbers below the accountant's ε, and the report names the machine.
    script = ROOT / "benchmarks" / "bench_gpu_audit.py"
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, str(script), "--small", "--device", "cpu", "--json"],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["size"]["canaries"] == 1000 and [a["canary"] for a in report["audits"]] == ["gradient", "input"]
    for audit in report["audits"]:
        assert 0 <= audit["epsilon_lower_bound"] < audit["accountant_epsilon"] and audit["seconds"] > 0
    assert "no GPU" in report["machine"] or "CUDA" in report["machine"]


# --------------------------------------------------------------------------------------------
# The loader that ran: canaries ride a shuffled or sequential DataLoader (issue 36)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sampling", ["shuffle", "cyclic"])
def test_canaries_ride_the_loader_and_are_scored_by_its_likelihood_ratio(sampling):
    run_of = training(sampling=sampling, noise_multiplier=0.05, steps=22)  # 2 epochs of 11 batches (200 + 20 slots)
    included = np.arange(20) % 2 == 0
    run = oa.run_training(run_of, seed=3, gradient_canaries=20, included=included)
    # Nearly noiseless: every included canary was batched (once per epoch) and every left-out one read as a null
    # record, so the scores separate the two groups completely.
    assert run.gradient_llr[included].min() > 100 > -100 > run.gradient_llr[~included].max()
    event = run_of.run_event(20)
    assert (event.sampling, event.neighboring.value, event.steps) == (sampling, "zero_out", 22)


def test_a_shuffled_training_is_claimed_and_audited_under_its_sampler():
    shuffled = training(sampling="shuffle", steps=20)
    result = oa.one_run_opacus_audit(shuffled, canaries=100, delta=1e-5, seed=0)
    accounting = result.game["accounting"]
    assert accounting["sampling"] == "shuffle" and accounting["neighboring"] == "zero_out"
    assert result.epsilon_claimed == pytest.approx(accounting["epsilon"])
    assert accounting["epsilon_lower"] <= accounting["epsilon"]
    inputs = oa.one_run_opacus_audit(shuffled, canaries=40, canary="input", delta=1e-5, seed=0)
    assert inputs.game["accounting"]["sampling"] == "shuffle"


def test_the_opposite_game_separates_the_canary_from_a_null_record():
    game = oa.OpacusCanaryGame(
        training=training(sampling="shuffle", noise_multiplier=0.3, steps=11),
        canary=oa.CanaryKind.GRADIENT,
        score=oa.OpacusScore.LIKELIHOOD_RATIO,
        opposite=True,
    )
    present = [game.base_score(True, seed) for seed in range(6)]
    absent = [game.base_score(False, seed) for seed in range(6)]
    assert min(present) > max(absent)  # the canary's batch reads 2 against 1 for the null record, σ = 0.3
    assert "zero-out, shuffle loader" in game.worst_case_pair().description


def test_loader_sampling_options_are_checked_in_one_line():
    with pytest.raises(ValueError, match="sampling must be one of"):
        training(sampling="weighted")
    with pytest.raises(ValueError, match="others='opposite' is a gradient canary's game on a shuffled loader"):
        oa.multi_run_opacus_audit(training(), trials=2, others="opposite")
    with pytest.raises(ValueError, match="others must be"):
        oa.multi_run_opacus_audit(training(sampling="shuffle"), trials=2, others="mirror")
    dataset = torch.utils.data.TensorDataset(torch.randn(40, 8), torch.randint(0, 3, (40,)))
    with pytest.raises(ValueError, match="need \\(features, labels\\) arrays"):
        oa.run_training(training(data=dataset, sampling="shuffle"), seed=0, gradient_canaries=2, included=[True, False])
