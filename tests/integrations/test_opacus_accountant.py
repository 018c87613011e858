"""dplens as Opacus's accountant: a real Opacus training, agreement with Opacus's PRV and RDP accountants, state dicts,
histories through ``from_opacus``, heterogeneous histories, bad input, calibration, and the missing-extra message."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import pytest

import dplens
from dplens.integrations import opacus_accountant as oa

DELTA = 1e-5
EPS_ERROR = 1e-3  # Opacus PRV's accuracy in the acceptance test


def _have_opacus() -> bool:
    try:
        import opacus.accountants  # noqa: F401
    except ImportError:
        return False
    return True


# One line naming the extra when it is absent (a failure under CI=true: root conftest.py).
needs_opacus = pytest.mark.skipif(not _have_opacus(), reason='needs the [torch] extra: pip install "dplens[torch]"')


def _prv_bracket(history, *, eps_error=EPS_ERROR, delta=DELTA):
    """Opacus's PRV accountant on ``history``: (lower, estimate, upper); ``get_epsilon`` returns the upper."""
    from opacus.accountants import PRVAccountant

    prv = PRVAccountant()
    prv.history = list(history)
    upper = prv.get_epsilon(delta, eps_error=eps_error)
    lower, estimate, upper_again = prv._get_dprv(eps_error=eps_error, delta_error=delta / 1000).compute_epsilon(
        delta, delta / 1000, eps_error
    )
    assert math.isclose(upper, upper_again)
    return float(lower), float(estimate), float(upper)


def _opacus_rdp(history, delta=DELTA):
    from opacus.accountants import RDPAccountant

    rdp = RDPAccountant()
    rdp.history = list(history)
    return rdp.get_epsilon(delta)


def _assert_agrees_with_opacus(accountant, history):
    """The acceptance comparison at eps_error = 1e-3 (both brackets hold the same true ε)."""
    bracket = accountant.get_epsilon_bracket(DELTA, eps_error=EPS_ERROR)
    lower, upper = bracket.epsilon_lower, bracket.epsilon
    assert upper - lower <= EPS_ERROR  # dplens's certified bracket is as narrow as asked
    prv_lower, prv_estimate, prv_upper = _prv_bracket(history)
    assert lower - EPS_ERROR <= prv_estimate <= upper + EPS_ERROR  # PRV's estimate inside the widened bracket
    assert prv_lower <= lower and upper <= prv_upper  # dplens's bracket lies inside PRV's: consistent, and tighter
    assert prv_upper - upper <= 2 * EPS_ERROR  # PRV's answer is its estimate + ~1.1-1.6 eps_error
    assert accountant.get_epsilon(DELTA) <= _opacus_rdp(history)  # never looser than Opacus's RDP bound


# ---- a real Opacus training ---------------------------------------------------------------------------------


def _tiny_training(engine, *, noise_multipliers=(1.0, 1.3), n=240, batch_size=24, seed=0):
    """Two epochs of DP-SGD on a linear model through Opacus; σ changes at the second epoch (as a schedule does)."""
    import torch

    torch.manual_seed(seed)
    x = torch.randn(n, 5)
    y = (x[:, 0] + 0.3 * torch.randn(n) > 0).long()
    model = torch.nn.Linear(5, 2)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size)
    model, optimizer, loader = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
        data_loader=loader,
        noise_multiplier=noise_multipliers[0],
        max_grad_norm=1.0,
    )
    steps = 0
    for sigma in noise_multipliers:
        optimizer.noise_multiplier = sigma
        for xb, yb in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
            steps += 1
    return model, optimizer, loader, steps


@pytest.fixture(scope="module")
def trained():
    from opacus import PrivacyEngine

    oa.register()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Secure RNG turned off"
        engine = PrivacyEngine(accountant="dplens")
        model, optimizer, _, steps = _tiny_training(engine)
    return engine, model, optimizer, steps


@needs_opacus
def test_a_real_opacus_training_is_accounted_by_dplens(trained):
    from opacus.accountants import IAccountant

    engine, _, _, steps = trained
    accountant = engine.accountant
    assert isinstance(accountant, oa.OpacusAccountant) and isinstance(accountant, IAccountant)
    assert accountant.mechanism() == "dplens"
    # the optimizer hook recorded every step, merged per (σ, q): 10 batches per epoch at q = 1/10
    assert accountant.history == [(1.0, 0.1, 10), (1.3, 0.1, 10)] and len(accountant) == steps == 20
    assert engine.get_epsilon(DELTA) == accountant.get_epsilon(DELTA)
    _assert_agrees_with_opacus(accountant, accountant.history)


@needs_opacus
def test_assigning_the_engine_accountant_works_too():
    from opacus import PrivacyEngine

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        engine = PrivacyEngine(accountant="rdp")
        engine.accountant = oa.OpacusAccountant(tolerance=1e-4)
        _tiny_training(engine, noise_multipliers=(2.0,), n=60, batch_size=20)
    assert engine.accountant.history == [(2.0, 1 / 3, 3)]
    bracket = engine.accountant.get_epsilon_bracket(DELTA)
    assert bracket.epsilon - bracket.epsilon_lower <= 1e-4 * bracket.epsilon
    assert engine.get_epsilon(DELTA) == bracket.epsilon <= _opacus_rdp(engine.accountant.history)


@needs_opacus
def test_agreement_with_prv_on_a_realistic_history():
    """10 MNIST epochs (q = 256/60000, σ = 1.1) and a schedule changing σ and q."""
    for history in ([(1.1, 256 / 60000, 2343)], [(1.0, 0.1, 10), (1.5, 0.2, 5), (0.8, 0.05, 20)]):
        accountant = oa.OpacusAccountant()
        accountant.history = list(history)
        _assert_agrees_with_opacus(accountant, history)


# ---- state and histories ------------------------------------------------------------------------------------


@needs_opacus
def test_state_dict_round_trip_through_an_opacus_checkpoint(trained, tmp_path):
    import torch
    from opacus import PrivacyEngine

    engine, model, optimizer, _ = trained
    state = engine.accountant.state_dict()
    assert dict(state) == {"history": engine.accountant.history, "mechanism": "dplens"}
    engine.save_checkpoint(path=tmp_path / "ckpt.pt", module=model, optimizer=optimizer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        resumed = PrivacyEngine(accountant="dplens")
    fresh = torch.nn.Linear(5, 2)
    from opacus import GradSampleModule

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "optimizer_state_dict has 2 items but optimizer is not provided"
        resumed.load_checkpoint(path=tmp_path / "ckpt.pt", module=GradSampleModule(fresh))
    assert resumed.accountant.history == engine.accountant.history
    assert resumed.get_epsilon(DELTA) == engine.get_epsilon(DELTA)
    # Opacus's PRV/RDP state dicts keep the same history, so a training can switch to dplens from their checkpoint
    from opacus.accountants import PRVAccountant

    prv = PRVAccountant()
    prv.history = list(engine.accountant.history)
    switched = oa.OpacusAccountant()
    switched.load_state_dict(prv.state_dict())
    assert switched.history == prv.history


@needs_opacus
def test_history_round_trip_through_from_opacus(trained, tmp_path):
    from opacus.accountants import PRVAccountant, RDPAccountant

    engine, _, _, _ = trained
    history = engine.accountant.history
    ledger = dplens.from_opacus(engine.accountant)
    assert [(e.event.noise_multiplier, e.sampling_rate, c) for e, c in ledger.ledger] == history
    for source in (engine, engine.accountant.state_dict(), history):
        assert dplens.from_opacus(source).ledger == ledger.ledger
    for cls in (PRVAccountant, RDPAccountant):  # Opacus's own accountants stepped the same way
        theirs = cls()
        for sigma, rate, steps in history:
            for _ in range(steps):
                theirs.step(noise_multiplier=sigma, sample_rate=rate)
        assert theirs.history == history and dplens.from_opacus(theirs).ledger == ledger.ledger
    assert dplens.Accountant.from_json(ledger.to_json()).ledger == ledger.ledger
    assert ledger.epsilon(DELTA) == engine.accountant.get_epsilon(DELTA)
    files = dplens.generate_report(
        oa.opacus_spec(engine.accountant), tmp_path, title="tiny", audit_mode=dplens.AuditMode.OFF
    )
    assert math.isclose(files.report.to_dict()["accounting"]["epsilon"], ledger.epsilon(DELTA), rel_tol=1e-9)


# ---- heterogeneous histories ----------------------------------------------------------------------------------


@needs_opacus
def test_heterogeneous_histories_merge_like_opacus_and_compose():
    from opacus.accountants import RDPAccountant

    ours, theirs = oa.OpacusAccountant(), RDPAccountant()
    schedule = [(1.0, 0.1)] * 3 + [(1.2, 0.1)] * 2 + [(1.2, 0.2)] * 4 + [(1.0, 0.1)] * 1
    for sigma, rate in schedule:
        ours.step(noise_multiplier=sigma, sample_rate=rate)
        theirs.step(noise_multiplier=sigma, sample_rate=rate)
    assert ours.history == theirs.history == [(1.0, 0.1, 3), (1.2, 0.1, 2), (1.2, 0.2, 4), (1.0, 0.1, 1)]
    assert len(ours) == 10 and len(theirs) == 4  # steps (the documented meaning) vs Opacus's history entries
    import torch

    ours.step(noise_multiplier=torch.tensor(1.0), sample_rate=0.1)  # a scheduler may set σ as a 0-dim tensor
    assert ours.history[-1] == (1.0, 0.1, 2) and isinstance(ours.history[-1][0], float)
    ours.history[-1] = (1.0, 0.1, 1)
    # order does not matter and equal entries add: the ledger of (1.0, 0.1, 4) + (1.2, 0.1, 2) + (1.2, 0.2, 4)
    regrouped = oa.OpacusAccountant()
    regrouped.history = [(1.2, 0.2, 4), (1.0, 0.1, 4), (1.2, 0.1, 2)]
    assert math.isclose(ours.get_epsilon(DELTA), regrouped.get_epsilon(DELTA), rel_tol=2e-3)
    # more steps or a larger q never lower ε
    longer = oa.OpacusAccountant()
    longer.history = [*ours.history, (1.2, 0.2, 1)]
    assert longer.get_epsilon(DELTA) > ours.get_epsilon(DELTA)
    # σ = 0 releases an unprotected step: ε = ∞, honestly
    unprotected = oa.OpacusAccountant()
    unprotected.history = [*ours.history, (0.0, 0.1, 1)]
    assert unprotected.get_epsilon(DELTA) == math.inf


# ---- bad input --------------------------------------------------------------------------------------------------


@needs_opacus
def test_bad_input_raises_value_error_naming_the_argument():
    accountant = oa.OpacusAccountant()
    accountant.step(noise_multiplier=1.0, sample_rate=0.1)
    for kwargs, name in (
        ({"noise_multiplier": -1.0, "sample_rate": 0.1}, "noise_multiplier"),
        ({"noise_multiplier": math.nan, "sample_rate": 0.1}, "noise_multiplier"),
        ({"noise_multiplier": 1.0, "sample_rate": 1.5}, "sample_rate"),
        ({"noise_multiplier": 1.0, "sample_rate": "0.1"}, "sample_rate"),
    ):
        with pytest.raises(ValueError, match=name):
            accountant.step(**kwargs)
    assert accountant.history == [(1.0, 0.1, 1)]  # refusals change nothing
    with pytest.raises(ValueError, match="delta"):
        accountant.get_epsilon(0.0)
    with pytest.raises(ValueError, match="eps_error must be a finite number > 0; got -1"):
        accountant.get_epsilon(DELTA, eps_error=-1)
    with pytest.raises(ValueError, match=r"state_dict mechanism 'foo'"):
        accountant.load_state_dict({"history": [], "mechanism": "foo"})
    with pytest.raises(ValueError, match=r"state_dict\['history'\]\[0\] must be"):
        accountant.load_state_dict({"history": [(1.0, 0.1)], "mechanism": "rdp"})
    with pytest.raises(ValueError, match="state_dict has no key 'history'"):
        accountant.load_state_dict({"mechanism": "dplens"})
    assert accountant.history == [(1.0, 0.1, 1)]
    accountant.history = [(1.0, 0.1, -3)]  # Opacus's code assigns histories directly: checked when used
    with pytest.raises(ValueError, match=r"history\[0\] steps must be an integer >= 0; got -3"):
        accountant.get_epsilon(DELTA)
    with pytest.raises(ValueError, match="source must be"):
        dplens.from_opacus(42)
    with pytest.raises(ValueError, match=r"source\[1\] sample_rate must be a number in \[0, 1\]; got 2"):
        dplens.from_opacus([(1.0, 0.1, 3), (1.0, 2, 3)])
    with pytest.raises(ValueError, match="give exactly one of epochs and steps"):
        oa.calibrate_noise_multiplier(target_epsilon=1.0, target_delta=DELTA, sample_rate=0.1, epochs=1, steps=10)
    with pytest.raises(ValueError, match="sample_rate must be > 0"):
        oa.calibrate_noise_multiplier(target_epsilon=1.0, target_delta=DELTA, sample_rate=0, steps=10)


# ---- calibration ------------------------------------------------------------------------------------------------


@needs_opacus
def test_calibration_never_exceeds_the_target_checked_by_opacus_prv():
    for target, rate, steps in ((2.0, 0.1, 50), (8.0, 0.05, 100)):
        result = oa.calibrate_noise_multiplier(target_epsilon=target, target_delta=DELTA, sample_rate=rate, steps=steps)
        assert result.epsilon <= target and result.epsilon >= target * (1 - 1e-3)  # tight, never above
        prv_lower, prv_estimate, _ = _prv_bracket([(result.value, rate, steps)])
        assert prv_lower <= target and prv_estimate <= target + EPS_ERROR  # Opacus's own accountant agrees
    # with budget already spent, the total meets the target
    spent = [(1.0, 0.1, 20)]
    result = oa.calibrate_noise_multiplier(
        target_epsilon=5.0, target_delta=DELTA, sample_rate=0.1, steps=30, history=spent
    )
    assert dplens.from_opacus([*spent, (result.value, 0.1, 30)]).epsilon(DELTA) <= 5.0
    assert _prv_bracket([*spent, (result.value, 0.1, 30)])[0] <= 5.0


@needs_opacus
def test_make_private_with_epsilon_trains_within_the_target():
    import torch
    from opacus import PrivacyEngine
    from opacus.accountants.utils import get_noise_multiplier

    oa.register()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        engine = PrivacyEngine(accountant="dplens")
    torch.manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(120, 4), torch.randint(0, 2, (120,)))
    model = torch.nn.Linear(4, 2)
    model, optimizer, loader = oa.make_private_with_epsilon(
        engine,
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=torch.utils.data.DataLoader(data, batch_size=12),
        target_epsilon=3.0,
        target_delta=DELTA,
        epochs=3,
        max_grad_norm=1.0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: "Full backward hook is firing ..." (inputs need no grad)
        for _ in range(3):
            for xb, yb in loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
                optimizer.step()
    assert len(engine.accountant) == 30 and engine.accountant.history == [(optimizer.noise_multiplier, 0.1, 30)]
    assert engine.get_epsilon(DELTA) <= 3.0 and engine.accountant.calibration.value == optimizer.noise_multiplier
    assert _prv_bracket(engine.accountant.history)[0] <= 3.0
    # Opacus's own calibration runs with the registered accountant too, and stops short of the target
    sigma = get_noise_multiplier(target_epsilon=3.0, target_delta=DELTA, sample_rate=0.1, steps=30, accountant="dplens")
    assert optimizer.noise_multiplier <= sigma and dplens.from_opacus([(sigma, 0.1, 30)]).epsilon(DELTA) <= 3.0


# ---- without the extra, and the cold start ------------------------------------------------------------------------


def test_without_opacus_a_one_line_message_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "opacus", None)
    monkeypatch.setitem(sys.modules, "opacus.accountants", None)
    for call in (
        oa.OpacusAccountant,
        oa.register,
        lambda: oa.make_private_with_epsilon(
            None,
            module=None,
            optimizer=None,
            data_loader=[1],
            target_epsilon=1.0,
            target_delta=DELTA,
            epochs=1,
            max_grad_norm=1.0,
        ),
    ):
        with pytest.raises(ImportError) as caught:
            call()
        assert str(caught.value) == oa.MISSING_EXTRA and "\n" not in str(caught.value)
        assert 'pip install "dplens[torch]"' in str(caught.value)
    # histories need neither torch nor opacus
    assert dplens.from_opacus([(1.0, 0.1, 10)]).epsilon(DELTA) > 0


def test_import_dplens_and_from_opacus_load_no_torch():
    code = (
        "import sys, dplens\n"
        "assert 'torch' not in sys.modules and 'opacus' not in sys.modules\n"
        "dplens.from_opacus([(1.0, 0.1, 10)]).epsilon(1e-5)\n"
        "print('torch' in sys.modules, 'opacus' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "False"]
