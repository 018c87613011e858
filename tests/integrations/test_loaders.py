"""The sampler a training ran, read off its loader: Opacus trainings never get the Poisson ε when they shuffle."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from dplens.accountant.dp_sgd import dp_sgd_epsilon

torch = pytest.importorskip("torch", reason='needs the [torch] extra: pip install "dplens[torch]"')
opacus = pytest.importorskip("opacus", reason='needs the [torch] extra: pip install "dplens[torch]"')

from dplens.integrations import loaders  # noqa: E402
from dplens.integrations import opacus_accountant as oa  # noqa: E402

N, B = 600, 60
SRC = Path(__file__).resolve().parents[2] / "src"


def _data():
    generator = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(N, 3, generator=generator), torch.randint(0, 2, (N,)))


def _train(poisson_sampling: bool, epochs: int = 2, **loader_options):
    """A small Opacus training with dplens as its accountant; returns the privacy engine."""
    oa.register()
    model = torch.nn.Linear(3, 2)
    engine = opacus.PrivacyEngine(accountant="dplens")
    loader = torch.utils.data.DataLoader(_data(), batch_size=B, **loader_options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus's own notes on secure RNG and hooks
        model, optimizer, loader = engine.make_private(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            data_loader=loader,
            noise_multiplier=1.0,
            max_grad_norm=1.0,
            poisson_sampling=poisson_sampling,
        )
        for _ in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
    return engine


def test_a_shuffled_opacus_training_gets_the_shuffle_interval_not_the_poisson_epsilon():
    engine = _train(False, shuffle=True)
    shuffled = dp_sgd_epsilon(
        dataset_size=N, batch_size=B, epochs=2, noise_multiplier=1.0, delta=1e-5, sampling="shuffle"
    )
    poisson = dp_sgd_epsilon(dataset_size=N, batch_size=B, epochs=2, noise_multiplier=1.0, delta=1e-5)
    assert engine.accountant.sampler.sampling == "shuffle"
    assert engine.get_epsilon(1e-5) == pytest.approx(shuffled.epsilon, rel=1e-9)
    assert engine.get_epsilon(1e-5) > 1.5 * poisson.epsilon
    bracket = engine.accountant.get_epsilon_bracket(1e-5)
    assert bracket.epsilon_lower == pytest.approx(shuffled.epsilon_lower, rel=1e-6)
    ledger = oa.from_opacus(engine.accountant)  # the ledger, the budget charge and the report carry the sampler
    ((run, _),) = ledger.ledger
    assert run.sampling == "shuffle" and run.steps == 20


def test_a_sequential_loader_is_cyclic_and_poisson_stays_poisson():
    assert _train(False, shuffle=False).accountant.sampler.sampling == "cyclic"
    engine = _train(True)
    assert engine.accountant.sampler.sampling == "poisson"
    assert engine.get_epsilon(1e-5) == pytest.approx(oa.from_opacus(engine.accountant.history).epsilon(1e-5))


def test_samplers_without_a_finite_bound_are_refused_in_one_line():
    data = _data()
    weighted = torch.utils.data.WeightedRandomSampler(torch.ones(N), num_samples=N, replacement=True)
    with pytest.raises(ValueError, match="WeightedRandomSampler with replacement: a record may be drawn several"):
        loaders.sampler_of(torch.utils.data.DataLoader(data, batch_size=B, sampler=weighted))
    replaced = torch.utils.data.RandomSampler(data, replacement=True)
    with pytest.raises(ValueError, match="draws with replacement"):
        loaders.sampler_of(torch.utils.data.DataLoader(data, batch_size=B, sampler=replaced))
    padded = torch.utils.data.DistributedSampler(data, num_replicas=7, rank=0, shuffle=True, drop_last=False)
    with pytest.raises(ValueError, match="pads 600 records to 602 for 7 replicas"):
        loaders.sampler_of(torch.utils.data.DataLoader(data, batch_size=B, sampler=padded))
    sharded = torch.utils.data.DistributedSampler(data, num_replicas=4, rank=1, shuffle=True, drop_last=True)
    found = loaders.sampler_of(torch.utils.data.DataLoader(data, batch_size=15, sampler=sharded))
    assert (found.sampling, found.batch_size, found.dataset_size) == ("shuffle", 60, N)


def test_opacus_poisson_loader_over_a_weighted_one_is_accounted_and_warned_about():
    data = _data()
    weighted = torch.utils.data.DataLoader(
        data, batch_size=B, sampler=torch.utils.data.WeightedRandomSampler(torch.ones(N), N)
    )
    replaced = opacus.data_loader.DPDataLoader.from_data_loader(weighted)
    accountant = oa.OpacusAccountant()
    with pytest.warns(UserWarning, match="Opacus issue 813"):
        detected = accountant.attach(replaced, poisson_sampling=True, original=weighted)
    assert detected.sampling == "poisson" and detected.batch_size == B


def test_the_detected_sampler_survives_a_checkpoint():
    engine = _train(False, epochs=1, shuffle=True)
    state = engine.accountant.state_dict()
    fresh = oa.OpacusAccountant()
    fresh.load_state_dict(state)
    assert fresh.sampler == engine.accountant.sampler
    assert fresh.get_epsilon(1e-5) == engine.get_epsilon(1e-5)
    with pytest.raises(ValueError, match="state_dict\\['sampler'\\]"):
        fresh.load_state_dict({**state, "sampler": {"sampling": "shuffle"}})
    assert fresh.sampler == engine.accountant.sampler  # a refusal changes nothing


def test_make_private_with_epsilon_calibrates_for_the_sampler_that_runs():
    oa.register()
    for make in (
        lambda engine, **kw: engine.make_private_with_epsilon(**kw),  # Opacus's own, with dplens as accountant
        lambda engine, **kw: oa.make_private_with_epsilon(engine, **kw),  # dplens's
    ):
        model = torch.nn.Linear(3, 2)
        engine = opacus.PrivacyEngine(accountant="dplens")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, optimizer, _ = make(
                engine,
                module=model,
                optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                data_loader=torch.utils.data.DataLoader(_data(), batch_size=B, shuffle=True),
                target_epsilon=8.0,
                target_delta=1e-5,
                epochs=3,
                max_grad_norm=1.0,
                poisson_sampling=False,
            )
        run = dp_sgd_epsilon(
            dataset_size=N,
            batch_size=B,
            epochs=3,
            noise_multiplier=optimizer.noise_multiplier,
            delta=1e-5,
            sampling="shuffle",
        )
        assert run.epsilon <= 8.0


_JAX_PRIVACY_PROBE = textwrap.dedent(
    """
    import json, sys
    from jax_privacy import batch_selection
    from dplens.integrations import loaders

    N = int(sys.argv[1])
    out = {}
    bins = loaders.sampler_of(batch_selection.BallsInBinsSampling(iterations=1000, cycle_length=100), dataset_size=N)
    out["bins"] = [bins.sampling, bins.steps_per_epoch]
    poisson = loaders.sampler_of(
        batch_selection.CyclicPoissonSampling(sampling_prob=0.1, iterations=100), dataset_size=N
    )
    out["poisson"] = [poisson.sampling, poisson.batch_size]
    fixed = loaders.sampler_of(batch_selection.FixedBatchSampling(batch_size=60, iterations=10), dataset_size=N)
    out["fixed"] = fixed.sampling
    try:
        loaders.sampler_of(
            batch_selection.CyclicPoissonSampling(sampling_prob=0.1, iterations=100, cycle_length=4), dataset_size=N
        )
    except ValueError as error:
        out["refused"] = str(error)
    run = bins.run(noise_multiplier=1.0, steps=1000)  # 10 cycles of 100 bins: one allocation with sigma/sqrt(10)
    out["run"] = [run.sampling, run.steps]
    print(json.dumps(out))
    """
)


def test_jax_privacy_strategies_map_to_samplers():
    """In a child process: JAX loaded into the test process would make every later process pool forkserver, whose
    workers cannot import tasks defined in test modules (pytest's importlib import mode)."""
    if importlib.util.find_spec("jax_privacy") is None:
        pytest.skip('needs the [jax] extra: pip install "dplens[jax]"')
    env = {"PYTHONPATH": str(SRC), "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", _JAX_PRIVACY_PROBE, str(N)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["bins"] == ["fixed-bins", 100]
    assert out["poisson"] == ["poisson", 60]
    assert out["fixed"] == "fixed-size"
    assert "cycle_length=4" in out.get("refused", "")
    assert out["run"] == ["fixed-bins", 1000]
