"""``dplens.check_dp_sgd`` on an ``OpacusTraining`` (issue 46): the training declares the mechanism (σ, C, N, Opacus's
Poisson rate 1/L or its loader's batches, the sampler, T), its own ``make_private`` is the step, its own loader the
sampler; options that contradict it are refused in one line, before any work."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason='needs the [torch] extra: pip install "dplens[torch]"')
pytest.importorskip("opacus", reason='needs the [torch] extra: pip install "dplens[torch]"')

import dplens  # noqa: E402
from dplens._api import _opacus_subject  # noqa: E402
from dplens.integrations.opacus_audit import OpacusTraining  # noqa: E402

N, B, STEPS = 1000, 100, 3
X = np.random.default_rng(0).normal(size=(N, 4)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int64)


def model():
    return torch.nn.Linear(4, 2)


def _training(**changes):
    options = dict(model=model, data=(X, Y), noise_multiplier=1.0, max_grad_norm=1.0, batch_size=B, steps=STEPS)
    return OpacusTraining(**(options | changes))


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("noise_multiplier", 0.5, "noise_multiplier=0.5 contradicts the OpacusTraining's 1.0"),
        ("max_grad_norm", 2.0, "max_grad_norm=2.0 contradicts the OpacusTraining's 1.0"),
        ("batch_size", 50, "batch_size=50 contradicts the OpacusTraining's 100"),
        ("dataset_size", 999, "dataset_size=999 contradicts the OpacusTraining's 1000"),
        ("sampler", "shuffle", "sampler='shuffle' contradicts the OpacusTraining's 'poisson'"),
        ("steps", 30, "steps=30 contradicts the OpacusTraining's 3"),
        ("epochs", 1.0, "epochs is set by the OpacusTraining"),
        ("sampler_function", "m:f", "sampler_function is set by the OpacusTraining"),
    ],
)
def test_options_that_contradict_the_training_are_refused_in_one_line(option, value, words):
    with pytest.raises(ValueError, match=r"^check_dp_sgd: ") as err:
        dplens.check_dp_sgd(_training(), delta=1e-5, trials=100, **{option: value})
    assert words in str(err.value) and "\n" not in str(err.value)


def test_options_equal_to_the_training_are_accepted_and_the_training_declares_the_rest():
    _, options = _opacus_subject(_training(), {"delta": 1e-5, "noise_multiplier": 1.0, "batch_size": B})
    assert {k: options[k] for k in ("noise_multiplier", "max_grad_norm", "batch_size", "dataset_size", "steps")} == {
        "noise_multiplier": 1.0,
        "max_grad_norm": 1.0,
        "batch_size": B,
        "dataset_size": N,
        "steps": STEPS,
    }
    assert options["sampler"] == "poisson" and callable(options["sampler_function"])
    _, shuffled = _opacus_subject(_training(sampling="shuffle", batch_size=300), {"delta": 1e-5})
    assert shuffled["sampler"] == "shuffle" and shuffled["batch_size"] == 300


def test_a_poisson_rate_that_is_no_whole_batch_over_n_is_refused():
    with pytest.raises(ValueError, match=r"Poisson rate 1/3 is B/N for no whole batch size B with N = 1000"):
        dplens.check_dp_sgd(_training(batch_size=300), delta=1e-5)


def test_the_step_is_the_trainings_own_make_private_and_the_sampler_its_loader():
    step, options = _opacus_subject(_training(noise_multiplier=1e-9), {"delta": 1e-5})
    grads = np.zeros((B, 3))
    grads[0, 0], grads[1, 1] = 10.0, 0.5  # clipped to C = 1, below the clip
    np.testing.assert_allclose(step(grads, np.random.default_rng(0)), [1.0 / B, 0.5 / B, 0.0], atol=1e-6)
    batches = options["sampler_function"](N, np.random.default_rng(0))
    sizes = [len(next(batches)) for _ in range(20)]
    assert len(set(sizes)) > 1 and abs(np.mean(sizes) - B) < 15  # Opacus's Poisson loader: variable batches


@pytest.mark.slow
def test_check_dp_sgd_end_to_end_on_an_opacus_training():
    result = dplens.check_dp_sgd(_training(), delta=1e-5, trials=100, seed=0, assume_finite_gradients=True)
    found = {c.name: c for c in result.checks}
    assert found["sampling_law"].verdict == "PASS" and found["noise_std"].verdict == "PASS", result.summary()
    # Opacus's clipping is not nan_safe: the check says so, and under the stated assumption it is not counted
    assert found["non_finite_rows"].verdict == "VIOLATION" and found["non_finite_rows"].excluded_from_overall
    assert result.verdict != "VIOLATION", result.summary()  # a correct Opacus control
    assert [a.option for a in result.stated_assumptions] == ["assume_finite_gradients"]
    assert result.declared.sampler == "poisson" and result.declared.batch_size == B
