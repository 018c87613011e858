"""The Opacus subject of check_dp_sgd (issue 46): crafted per-sample gradients through the user's make_private reach
Opacus's DPOptimizer exactly; its noise, normalisation and clipping pass the checks, an under-noised make_private is
a VIOLATION of noise_std, a missing clip is a VIOLATION of clipping, and a NaN row leaks (Opacus is not nan_safe): a
VIOLATION of the overall verdict unless the user states that the gradients are finite (assume_finite_gradients)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason='needs the [torch] extra: pip install "dplens[torch]"')
pytest.importorskip("opacus", reason='needs the [torch] extra: pip install "dplens[torch]"')

from opacus import PrivacyEngine  # noqa: E402

from dplens.auditing.training import checks  # noqa: E402
from dplens.auditing.training.check import exclude_assumed, overall_verdict, stated_assumptions  # noqa: E402
from dplens.auditing.training.declared import Declaration  # noqa: E402
from dplens.integrations.opacus_step import opacus_step  # noqa: E402

N, B = 400, 8
DECL = Declaration(noise_multiplier=1.0, max_grad_norm=1.0, batch_size=B, dataset_size=N, steps=50, delta=1e-5)


def _private(noise_multiplier: float, max_grad_norm: float):
    def make_private(module, optimizer, loader):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return PrivacyEngine().make_private(
                module=module,
                optimizer=optimizer,
                data_loader=loader,
                noise_multiplier=noise_multiplier,
                max_grad_norm=max_grad_norm,
            )

    return make_private


def _found(noise_multiplier: float, max_grad_norm: float = 1.0, calls: int = 600) -> dict[str, checks.Check]:
    step = opacus_step(_private(noise_multiplier, max_grad_norm), dataset_size=N, batch_size=B)
    probes = checks.run_probes(step, DECL, np.random.SeedSequence(0), calls=calls)
    return {c.name: c for c in checks.step_checks(probes, DECL, 0.05 / 8, np.random.default_rng(0), None)}


def test_the_injected_gradient_is_the_crafted_vector():
    step = opacus_step(_private(1e-9, 100.0), dataset_size=N, batch_size=B)  # no noise to speak of, no clipping
    grads = np.random.default_rng(1).normal(size=(B, 5))
    update = step(grads, np.random.default_rng(0))
    np.testing.assert_allclose(update, grads.sum(axis=0) / B, rtol=1e-5, atol=1e-6)


def test_opacus_passes_noise_normalisation_and_clipping_and_its_nan_rows_leak():
    found = _found(1.0)
    for name in ("noise_std", "noise_gaussian_independent", "normalisation", "clipping", "fresh_noise"):
        assert found[name].verdict in ("PASS", "INCONCLUSIVE"), found[name].finding
    leak = found["non_finite_rows"]
    assert leak.verdict == "VIOLATION"  # Opacus's clipping is not nan_safe
    assert "torch.nan_to_num" in leak.finding and "--assume-finite-gradients" in leak.finding  # the remedy
    # by default the leak makes the step checks' verdict a VIOLATION; with the stated assumption the others decide
    assert overall_verdict(list(found.values())) == "VIOLATION"
    assumed = exclude_assumed(list(found.values()), stated_assumptions(assume_finite_gradients=True))
    assert [c.name for c in assumed if c.excluded_from_overall] == ["non_finite_rows"]
    assert overall_verdict(assumed) in ("PASS", "INCONCLUSIVE")


def test_under_noised_make_private_is_a_noise_std_violation():
    found = _found(0.3, calls=300)
    assert found["noise_std"].verdict == "VIOLATION", found["noise_std"].finding


def test_a_clip_larger_than_declared_is_a_clipping_violation():
    found = _found(1.0, max_grad_norm=20.0, calls=300)
    assert found["clipping"].verdict == "VIOLATION", found["clipping"].finding


def test_opacus_poisson_loader_passes_the_sampling_law_and_a_shuffled_loader_declared_poisson_does_not():
    from opacus.data_loader import DPDataLoader
    from torch.utils.data import DataLoader

    from dplens.auditing.training.batches import BatchSource
    from dplens.integrations.opacus_step import loader_sampler

    decl = Declaration(noise_multiplier=1.0, max_grad_norm=1.0, batch_size=50, dataset_size=5000, steps=100, delta=1e-5)
    loaders = {
        "PASS": lambda d: DPDataLoader.from_data_loader(DataLoader(d, batch_size=50)),
        "VIOLATION": lambda d: DataLoader(d, batch_size=50, shuffle=True),
    }
    for verdict, make_loader in loaders.items():
        source = BatchSource("poisson", 5000, 50, 100, loader_sampler(make_loader), "loader")
        found = checks.sampling_check(source, decl, 0.05 / 9, np.random.SeedSequence(0))
        assert found.verdict == verdict, found.finding


# Gradient accumulation (h10): the logical batch split by Opacus's own BatchSplittingSampler (BatchMemoryManager), the
# noised steps and the rate Opacus's accountant is given recorded per logical batch, and the planted bugs named.


def _split_private(*, physical_loader: int | None = None, ignore_skips: bool = False, **options):
    def make_private(module, optimizer, loader):
        from torch.utils.data import DataLoader

        if physical_loader is not None:  # the accountant and the expected batch size at the physical batch
            loader = DataLoader(loader.dataset, batch_size=physical_loader)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wrapped = PrivacyEngine(accountant="rdp").make_private(
                module=module, optimizer=optimizer, data_loader=loader, **{"noise_multiplier": 1.0, **options}
            )
        if ignore_skips:  # the optimizer ignores BatchMemoryManager's signals: noise at every physical step
            wrapped[1].signal_skip_step = lambda do_skip=True: None
        return wrapped

    return make_private


def test_batch_memory_manager_splits_the_batch_noises_once_and_the_update_is_the_logical_one():
    step = opacus_step(
        _split_private(noise_multiplier=1e-9, max_grad_norm=100.0),
        dataset_size=N,
        batch_size=B,
        max_physical_batch_size=3,
    )
    grads = np.random.default_rng(1).normal(size=(B, 5))
    update = step(grads, np.random.default_rng(0))
    np.testing.assert_allclose(update, grads.sum(axis=0) / B, rtol=1e-5, atol=1e-6)  # all 3 physical batches
    record = step.accounting()
    assert (record.noised_steps, record.physical_batches) == (1, 3)
    assert record.rate == pytest.approx(B / N, rel=1e-12)  # 1/len(loader): Opacus's make_private rule


def test_accumulation_bugs_are_named_by_the_gradient_accumulation_check():
    correct = opacus_step(_split_private(max_grad_norm=1.0), dataset_size=N, batch_size=B, max_physical_batch_size=4)
    physical_rate = opacus_step(
        _split_private(max_grad_norm=1.0, physical_loader=4), dataset_size=N, batch_size=B, max_physical_batch_size=4
    )
    every_step = opacus_step(
        _split_private(max_grad_norm=1.0, ignore_skips=True), dataset_size=N, batch_size=B, max_physical_batch_size=4
    )
    verdicts = {}
    for label, step in (("correct", correct), ("physical rate", physical_rate), ("every step", every_step)):
        probes = checks.run_probes(step, DECL, np.random.SeedSequence(0), calls=150)
        verdicts[label] = checks.accumulation_check(probes, DECL, 0.05 / 9)
    assert verdicts["correct"].verdict == "PASS", verdicts["correct"].finding
    assert verdicts["physical rate"].verdict == "VIOLATION", verdicts["physical rate"].finding
    assert "physical batch size" in verdicts["physical rate"].finding
    assert verdicts["every step"].verdict == "DEVIATION", verdicts["every step"].finding
    assert "every physical step" in verdicts["every step"].finding


def test_ghost_clipping_clips_per_sample_in_its_loss_wrapper_and_needs_the_injection_criterion():
    from dplens.integrations.opacus_step import injection_criterion

    def ghost(criterion):
        def make_private(module, optimizer, loader):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return PrivacyEngine().make_private(
                    module=module,
                    optimizer=optimizer,
                    data_loader=loader,
                    noise_multiplier=0.0,
                    max_grad_norm=1.0,
                    grad_sample_mode="ghost",
                    **criterion,
                )

        return make_private

    grads = np.random.default_rng(1).normal(size=(B, 5)) * np.array([10.0, 0.1] * (B // 2))[:, None]
    norms = np.linalg.norm(grads, axis=1)
    clipped_mean = (np.minimum(1.0, 1.0 / (norms + 1e-6))[:, None] * grads).sum(axis=0) / B  # Opacus's clip factor
    for physical in (None, 3):
        step = opacus_step(
            ghost({"criterion": injection_criterion()}), dataset_size=N, batch_size=B, max_physical_batch_size=physical
        )
        np.testing.assert_allclose(step(grads, np.random.default_rng(0)), clipped_mean, rtol=1e-5, atol=1e-6)
        assert step.accounting().noised_steps == 1
    with pytest.raises(ValueError, match=r"criterion=injection_criterion\(\).*CrossEntropyLoss"):
        opacus_step(ghost({}), dataset_size=N, batch_size=B)(grads, np.random.default_rng(0))


def test_a_worker_forked_after_a_wide_call_in_the_caller_does_not_hang():
    """A wide call (64 × 2000) in the caller's process with two intra-op threads used to start libgomp's pool, and a
    worker forked after it hung at its first BLAS call (the throughput benchmark's workers=2 run). The caller's calls
    now run on one thread, and its setting is restored."""
    import os
    import time

    step = opacus_step(_private(1.0, 1.0), dataset_size=1792, batch_size=64)  # the digits run's sizes
    rng = np.random.default_rng(0)
    grads = np.zeros((64, 2000))
    grads[np.arange(64), rng.integers(0, 2000, 64)] = 1.0
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        step(grads, rng)
        assert torch.get_num_threads() == 2
        child = os.fork()
        if child == 0:  # pragma: no cover - the forked worker
            try:
                step(grads, rng)
            finally:
                os._exit(0)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done, status = os.waitpid(child, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(child, 9)
            os.waitpid(child, 0)
            pytest.fail("the forked worker hung in its first Opacus step call")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        torch.set_num_threads(threads)
