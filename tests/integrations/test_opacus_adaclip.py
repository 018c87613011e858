"""Opacus 1.6's ``AdaClipDPOptimizer`` through ``from_opacus`` and dplens's Opacus accountant: a real adaptive-clipping
training, its parameters read into an :class:`AdaptiveClipping` event, its ε against the closed form of the composed
Gaussians, and Opacus's own (charged) ε below it, said in a warning."""

from __future__ import annotations

import warnings

import pytest

import dplens
from dplens.accountant import events as ev
from dplens.accountant.adaptive_clipping import AdaptiveClipping
from dplens.accountant.compose import Accountant
from dplens.integrations import opacus_accountant as oa

DELTA = 1e-5
SIGMA, SIGMA_U = 1.1, 1.0  # σ_u = 1 is allowed by Opacus (it requires σ < 2σ_u)
ADACLIP = dict(target_unclipped_quantile=0.5, clipbound_learning_rate=0.2, max_clipbound=10.0, min_clipbound=0.1)


def _have_opacus() -> bool:
    try:
        import opacus.optimizers  # noqa: F401
    except ImportError:
        return False
    return True


needs_opacus = pytest.mark.skipif(not _have_opacus(), reason='needs the [torch] extra: pip install "dplens[torch]"')


def _adaclip_training(accountant: str, *, n=160, batch_size=16, seed=0):
    """One epoch of adaptive-clipping DP-SGD (Opacus's clipping="adaptive") on a linear model."""
    import torch
    from opacus import PrivacyEngine

    torch.manual_seed(seed)
    x = torch.randn(n, 4)
    y = (x[:, 0] > 0).long()
    model = torch.nn.Linear(4, 2)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Secure RNG turned off"
        engine = PrivacyEngine(accountant=accountant)
        model, optimizer, loader = engine.make_private(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
            data_loader=loader,
            noise_multiplier=SIGMA,
            max_grad_norm=1.0,
            clipping="adaptive",
            unclipped_num_std=SIGMA_U,
            **ADACLIP,
        )
        for xb, yb in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    return engine, optimizer


def _closed_form(rate: float, steps: int, method: str = "rdp") -> float:
    """The two Gaussians on one Poisson batch are one Gaussian of multiplier (σ_eff⁻² + σ_u⁻²)^(−1/2), σ_eff⁻² =
    σ⁻² − (2σ_u)⁻²: (σ⁻² + ¾σ_u⁻²)^(−1/2)."""
    total = (SIGMA**-2 + 0.75 * SIGMA_U**-2) ** -0.5
    step = ev.PoissonSampled(sampling_rate=rate, event=ev.Gaussian(noise_multiplier=total))
    result = Accountant().compose(step, count=steps).epsilon_result(DELTA, method=method)
    return result if method == "pld" else result.epsilon


@needs_opacus
def test_from_opacus_reads_an_adaclip_optimizer_and_says_opacus_undercounts():
    from opacus.optimizers import AdaClipDPOptimizer

    engine, optimizer = _adaclip_training("rdp")
    assert isinstance(optimizer, AdaClipDPOptimizer)
    [(sigma, rate, steps)] = engine.accountant.history
    assert sigma == SIGMA and steps == 10
    with pytest.warns(oa.OpacusAdaClipWarning, match="BELOW the true one"):
        ledger = dplens.from_opacus(engine.accountant, optimizer=optimizer)
    [(event, count)] = ledger.ledger
    assert isinstance(event, AdaptiveClipping) and count == 1 and event.steps == steps
    assert event.count_sensitivity == 1.0 and event.count_noise == SIGMA_U and event.sampling_rate == rate
    assert event.gradient_noise == pytest.approx((SIGMA**-2 - 0.25 * SIGMA_U**-2) ** -0.5, rel=1e-12)
    assert {name: getattr(event, name) for name in ADACLIP} == ADACLIP
    assert ledger.epsilon(DELTA, method="rdp") == pytest.approx(_closed_form(rate, steps), rel=1e-9)
    assert engine.accountant.get_epsilon(DELTA) < ledger.epsilon(DELTA, method="rdp")  # Opacus charges σ alone
    plain = dplens.from_opacus(engine.accountant)  # without the optimizer: what Opacus charges
    assert plain.epsilon(DELTA) < ledger.epsilon(DELTA)


@needs_opacus
def test_dplens_as_the_opacus_accountant_records_adaptive_clipping():
    oa.register()
    engine, optimizer = _adaclip_training("dplens")
    accountant = engine.accountant
    assert isinstance(accountant, oa.OpacusAccountant)
    assert accountant.adaptive_clipping == oa.adaclip_settings(optimizer)
    assert accountant.adaptive_clipping.unclipped_num_std == SIGMA_U
    [(_, rate, steps)] = accountant.history
    upper = accountant.get_epsilon_bracket(DELTA)
    reference = _closed_form(rate, steps, "pld")  # the two certified brackets overlap: the same pair
    assert upper.epsilon_lower <= reference.epsilon and reference.epsilon_lower <= upper.epsilon
    assert upper.epsilon == pytest.approx(reference.epsilon, rel=2e-3)
    state = accountant.state_dict()
    again = oa.OpacusAccountant()
    again.load_state_dict(state)
    assert again.adaptive_clipping == accountant.adaptive_clipping
    assert again.get_epsilon(DELTA) == accountant.get_epsilon(DELTA)
    spec = oa.opacus_spec(accountant)
    assert spec.accountant().epsilon(DELTA, method="rdp") == pytest.approx(_closed_form(rate, steps), rel=1e-9)


def test_a_recorded_adaclip_history_without_opacus_objects():
    """A state dict with the adaptive-clipping entry is enough (no torch): bad entries are refused in one line."""
    settings = dict(unclipped_num_std=SIGMA_U, **ADACLIP)
    with pytest.raises(ValueError, match="adaptive_clipping"):
        oa._adaclip_from_dict({"unclipped_num_std": 1.0})
    parsed = oa._adaclip_from_dict(settings)
    assert parsed.to_dict() == settings
    ledger = oa._ledger([(SIGMA, 0.1, 10)], adaclip=parsed)
    assert ledger.epsilon(DELTA, method="rdp") == pytest.approx(_closed_form(0.1, 10), rel=1e-9)
    with pytest.raises(ValueError, match="min_clipbound must be < max_clipbound"):
        AdaptiveClipping(
            gradient_noise=1.0, count_noise=1.0, sampling_rate=0.1, steps=1, min_clipbound=2.0, max_clipbound=1.0
        )
