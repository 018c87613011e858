"""The ledger's Python API on both backends: exact storage, planned spend equal to the Accountant, adaptive filters
that never admit past their budget, periods, idempotent charges, refusals that write nothing, the versioned schema."""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dplens
from dplens.accountant import filters, rdp
from dplens.ledger import Ledger, Mode, Period
from dplens.ledger.rules import rule_of
from dplens.ledger.sources import release_entries

UTC = dt.UTC


def _count(location: str, table: str = "dplens_releases") -> int:
    with Ledger.open(location) as ledger, ledger._store.read() as db:
        return db.execute(f"SELECT COUNT(*) FROM {table}")[0][0]


# ---- storage: events stored exactly, from every kind of source --------------------------------------------------


def test_every_source_round_trips_exactly(location, tmp_path):
    step = dplens.PoissonSampled(sampling_rate=0.01, event=dplens.Gaussian(noise_multiplier=1.1))
    accountant = dplens.Accountant().compose(step, 200).compose(dplens.Laplace(noise_multiplier=50.0), 3)
    spec = tmp_path / "spec.toml"
    spec.write_text('[[mechanism]]\ntype = "gaussian"\nnoise_multiplier = 30.0\ncount = 2\n')
    ledger_json = tmp_path / "ledger.json"
    ledger_json.write_text(accountant.to_json())
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps({"format": "dplens-report", "mechanism": {"ledger": json.loads(accountant.to_json())}})
    )
    opacus_history = {"history": [(1.1, 0.004, 100)], "mechanism": "rdp"}
    sources = {
        "event": dplens.Gaussian(noise_multiplier=40.0),
        "accountant": accountant,
        "spec": str(spec),
        "ledger-json": str(ledger_json),
        "report": str(report),
        "opacus": opacus_history,
        "spec-object": dplens.load_spec(spec),
    }
    with Ledger.open(location, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=50.0, delta=1e-6)
        for name, source in sources.items():
            assert ledger.charge(source, release=name).accepted
        stored = dict(ledger.release_events("default"))
    for name, source in sources.items():
        expected, _ = release_entries(source)
        assert stored[name] == expected, name
    assert stored["accountant"] == accountant.ledger
    assert stored["report"] == stored["ledger-json"] == accountant.ledger
    assert stored["opacus"] == dplens.from_opacus(opacus_history).ledger


# ---- planned mode: the same ε as the Accountant --------------------------------------------------------------------

_EVENTS = st.one_of(
    st.builds(lambda s: dplens.Gaussian(noise_multiplier=s), st.floats(3.0, 40.0)),
    st.builds(lambda b: dplens.Laplace(noise_multiplier=b), st.floats(5.0, 60.0)),
    st.builds(
        lambda q, s: dplens.PoissonSampled(sampling_rate=q, event=dplens.Gaussian(noise_multiplier=s)),
        st.sampled_from([0.01, 0.02]),
        st.sampled_from([1.0, 2.0]),
    ),
)


def _grouped(releases):
    """The Accountant of a set of releases, identical events merged in order of first appearance (as the ledger)."""
    merged: dict = {}
    for entries in releases:
        for event, count in entries:
            merged[event] = merged.get(event, 0) + count
    acc = dplens.Accountant()
    for event, count in merged.items():
        acc.compose(event, count)
    return acc


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_EVENTS, st.integers(1, 30)), min_size=1, max_size=8), st.sampled_from([0.5, 2.0, 4.0]))
def test_planned_spend_equals_the_accountant_of_the_same_events(tmp_path_factory, sequence, epsilon):
    path = str(tmp_path_factory.mktemp("planned") / "ledger.db")
    delta = 1e-6
    accepted: list = []
    with Ledger.open(path, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=epsilon, delta=delta)
        for index, (event, count) in enumerate(sequence):
            entries = ((event, count),)
            result = ledger.charge(list(entries), release=f"r{index}")
            tightest = _grouped([*accepted, entries]).epsilon(delta)
            if result.accepted:
                accepted.append(entries)
                assert tightest <= epsilon  # accepted only if the tightest route holds
            else:
                assert tightest > epsilon  # refused only on the tightest route
        status = ledger.status().budgets[0]
        mine = ledger.accountant("default")
    reference = _grouped(accepted)
    assert mine.ledger == reference.ledger
    expected = reference.epsilon_result(delta)
    assert status.spent_epsilon == expected.epsilon  # same route, same tolerance: the same number
    assert status.periods[0].spent_epsilon_lower == expected.epsilon_lower if accepted else True
    # Not merged, composed release by release: the same true ε, so inside the same certified bracket.
    if accepted:
        plain = dplens.Accountant()
        for entries in accepted:
            for event, count in entries:
                plain.compose(event, count)
        other = plain.epsilon_result(delta)
        low = max(filter(None, [expected.epsilon_lower, other.epsilon_lower]), default=0.0)
        assert low <= min(expected.epsilon, other.epsilon) + 1e-12


def test_the_shortcut_never_decides_a_refusal(tmp_path):
    """Near the budget the cached RDP bound is too loose; the tightest route (exact, here) still admits."""
    path = str(tmp_path / "ledger.db")
    sigma = 20.0
    with Ledger.open(path, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        results = [ledger.charge(dplens.Gaussian(noise_multiplier=sigma), release=f"r{i}") for i in range(30)]
    methods = [r.budgets[0].spent_method for r in results if r.accepted]
    assert any(m.startswith("rdp at cached orders") for m in methods)
    assert any(m.startswith("tightest route") for m in methods)
    admitted = sum(r.accepted for r in results)
    exact = dplens.Accountant().compose(dplens.Gaussian(noise_multiplier=sigma), admitted)
    assert exact.epsilon(1e-6) <= 1.0 < exact.compose(dplens.Gaussian(noise_multiplier=sigma)).epsilon(1e-6)
    assert all(not r.accepted for r in results[admitted:])


def test_a_fixed_bins_mf_training_spends_its_amplified_renyi_bound(tmp_path):
    """Issue 48: a matrix-factorisation training under fixed bins (BSR, 3 bands, C ≥ 0) is charged its Rényi bound
    (both directions, as mf_epsilon reports it), not the unamplified μ-GDP one; a refusal is the tightest route's,
    never the profile's as a "certified lower bound" (an amplified bound is an upper bound only)."""
    from dplens.accountant import conversions
    from dplens.accountant.mf_accounting import MfTraining
    from dplens.accountant.mf_renyi import fixed_bins_renyi

    run = MfTraining(
        mechanism="bsr", bands=3, sampling="fixed-bins", dataset_size=100, batch_size=10, epochs=3, noise_multiplier=1.2
    )
    delta = 1e-3
    renyi = fixed_bins_renyi(run.run().strategy, period=10, noise_multiplier=1.2, delta=delta).epsilon
    assert renyi < 3.6 and conversions.gdp_epsilon(run.gdp_mu(), delta) > 4.9  # amplified 3.56, unamplified 4.97
    with Ledger.open(str(tmp_path / "ledger.db"), create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=4.0, delta=delta)
        ledger.create_budget(name="tight", unit="one person", epsilon=3.5, delta=delta)
        fits = ledger.charge(run, release="mf", budgets=["default"])
        over = ledger.charge(run, release="mf-tight", budgets=["tight"])
        spent = {b.budget.name: b.spent_epsilon for b in ledger.status().budgets}
    assert fits.accepted and renyi * (1 - 1e-12) <= fits.budgets[0].spent_epsilon < 4.0
    assert spent["default"] == pytest.approx(renyi, rel=1e-12) and spent["tight"] == 0.0
    assert not over.accepted and over.budgets[0].spent_method.startswith("tightest route")
    assert over.budgets[0].spent_epsilon == pytest.approx(renyi, rel=1e-12)


# ---- adaptive mode: a filter never admits past its budget ----------------------------------------------------------


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_EVENTS, st.integers(1, 20)), min_size=1, max_size=10))
def test_renyi_filter_never_admits_a_sequence_over_budget(tmp_path_factory, sequence):
    path = str(tmp_path_factory.mktemp("adaptive") / "ledger.db")
    with Ledger.open(path, create=True) as ledger:
        budget = ledger.create_budget(unit="one person", epsilon=2.0, delta=1e-6, mode=Mode.ADAPTIVE)
        orders = np.array(budget.rule["orders"])
        limits = budget.rule["order_budgets"]
        sums = np.zeros_like(orders)
        for index, (event, count) in enumerate(sequence):
            # the filter quantity, recomputed here from the accountant's curves
            candidate = sums + count * rdp.rdp_curve(event)(orders)
            result = ledger.charge([(event, count)], release=f"r{index}")
            within = candidate <= np.array(limits)
            if result.accepted:
                assert within.any()
                sums = candidate
            else:
                # refused: no order keeps its budget (up to the ledger's rounding up)
                assert not (candidate * (1 + 1e-9) <= np.array(limits)).any()
        status = ledger.status().budgets[0]
    assert status.spent_epsilon <= 2.0


def test_renyi_filter_budgets_convert_to_the_target_with_the_union_bound():
    import mpmath

    built = filters.RenyiFilter.build(epsilon=1.0, delta=1e-6)
    k = len(built.orders)
    assert k >= 3 and built.order_delta == 1e-6 / k
    for alpha, budget in zip(built.orders, built.order_budgets, strict=True):
        a, r = mpmath.mpf(alpha), mpmath.mpf(budget)
        # Canonne-Kamath-Steinke Prop. 12 at delta/k, in high precision
        eps = r + mpmath.log(1 - 1 / a) - (mpmath.log(mpmath.mpf(1e-6) / k) + mpmath.log(a)) / (a - 1)
        assert eps <= 1.0
        assert eps > 1.0 - 1e-9  # and the budget is not needlessly small
    # a single order would be tighter (no union bound): the filter pays log(k)/(alpha - 1)
    single = filters.RenyiFilter.build(epsilon=1.0, delta=1e-6, orders=[built.orders[-1]])
    assert single.order_budgets[0] > built.order_budgets[-1]


def test_zcdp_and_gdp_filters_sum_exactly(location):
    with Ledger.open(location, create=True) as ledger:
        ledger.create_budget(name="rho", unit="one person", rho=0.05, delta=1e-10, mode=Mode.ADAPTIVE)
        ledger.create_budget(name="mu", unit="one person", mu=0.5, delta=1e-10, mode=Mode.ADAPTIVE)
        counts = {}
        for name in ("rho", "mu"):  # ρ = 1/200 and μ² = 1/100 per Gaussian with σ = 10
            n = 0
            while ledger.charge(dplens.Gaussian(noise_multiplier=10.0), release=f"{name}{n}", budgets=[name]).accepted:
                n += 1
            counts[name] = n
    # ρ = 1/200 per release, budget 0.05: 10 fit exactly but each ρ is rounded up, so 9; likewise μ² 0.01 vs 0.25
    assert counts == {"rho": 9, "mu": 24}


def test_a_mode_never_uses_the_other_modes_rule():
    from dplens.ledger.model import Target

    target = Target(epsilon=1.0, delta=1e-6)
    with pytest.raises(ValueError, match="adaptive"):
        rule_of(Mode.PLANNED, target, {"kind": "renyi_filter", "orders": [2.0], "order_budgets": [0.1]})
    with pytest.raises(ValueError, match="planned"):
        rule_of(Mode.ADAPTIVE, target, {"kind": "planned_tightest", "orders": [2.0]})


def test_adaptive_budgets_refuse_releases_their_filter_cannot_take(location):
    truncated = dplens.TruncatedSubsampledGaussian(
        dataset_size=60000, sampling_rate=0.01, truncated_batch_size=700, noise_multiplier=1.0
    )  # PLD only: no RDP curve
    with Ledger.open(location, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=5.0, delta=1e-6, mode=Mode.ADAPTIVE)
        ledger.create_budget(name="gauss", unit="one person", mu=1.0, delta=1e-6, mode=Mode.ADAPTIVE)
        with pytest.raises(ValueError, match="renyi filter cannot take"):
            ledger.charge(truncated, release="t", budgets=["default"])
        with pytest.raises(ValueError, match=r"GDP filter|gdp filter"):
            ledger.charge(dplens.Laplace(noise_multiplier=10.0), release="l", budgets=["gauss"])
        ledger.create_budget(name="planned", unit="one person", epsilon=5.0, delta=1e-6)
        assert ledger.charge(truncated, release="t", budgets=["planned"]).accepted  # planned: the PLD route applies
    assert _count(location) == 1


# ---- periods, idempotency, refusals, relations --------------------------------------------------------------------


def test_periods_charge_the_period_of_the_release_time(location):
    event = dplens.Gaussian(noise_multiplier=2.0)  # one of these fills the budget
    with Ledger.open(location, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=2.5, delta=1e-6, period=Period.MONTH)
        november = dt.datetime(2026, 11, 30, 23, 59, tzinfo=UTC)
        december = dt.datetime(2026, 12, 1, 0, 1, tzinfo=UTC)
        assert ledger.charge(event, release="nov", time=november).accepted
        assert not ledger.charge(event, release="nov-2", time=november).accepted
        assert ledger.charge(event, release="dec", time=december).accepted
        status = ledger.status(time=december).budgets[0]
    assert [p.period for p in status.periods] == ["2026-11", "2026-12"]
    assert status.current_period == "2026-12" and [p.releases for p in status.periods] == [1, 1]


def test_a_retried_charge_is_stored_once_and_a_reused_name_is_refused(location):
    with Ledger.open(location, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=3.0, delta=1e-6)
        first = ledger.charge(dplens.Gaussian(noise_multiplier=10.0), release="daily")
        again = ledger.charge(dplens.Gaussian(noise_multiplier=10.0), release="daily")
        assert first.accepted and not first.duplicate and again.accepted and again.duplicate
        with pytest.raises(ValueError, match=r"already charged .* with other events"):
            ledger.charge(dplens.Gaussian(noise_multiplier=11.0), release="daily")
    assert _count(location) == 1


def test_a_refused_charge_writes_nothing(location):
    with Ledger.open(location, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        ledger.create_budget(name="roomy", unit="one person", epsilon=100.0, delta=1e-6)
        assert ledger.charge(dplens.Gaussian(noise_multiplier=20.0), release="small").accepted
        before = ledger.status().to_dict()
        refused = ledger.charge(dplens.Gaussian(noise_multiplier=1.0), release="big")  # fits "roomy" only
        assert not refused.accepted
        assert "would reach epsilon" in refused.reason and "remaining" in refused.reason
        after = ledger.status().to_dict()
    assert _count(location) == 2  # "small" in both budgets; nothing of "big" in either
    strip = lambda d: [{k: v for k, v in b.items() if k != "periods"} for b in d["budgets"]]  # noqa: E731
    assert strip(before) == strip(after)


def test_a_release_under_another_relation_is_refused(location):
    with Ledger.open(location, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=3.0, delta=1e-6)
        replace = dplens.Gaussian(noise_multiplier=10.0, neighboring=dplens.NeighboringRelation.REPLACE_ONE)
        with pytest.raises(ValueError, match="neighbouring relation 'replace_one' but budget 'default' under"):
            ledger.charge(replace, release="r")
    assert _count(location) == 0


def test_a_store_of_another_schema_version_is_refused(tmp_path):
    path = str(tmp_path / "ledger.db")
    with Ledger.open(path, create=True) as ledger, ledger._store.write() as db:
        db.execute("UPDATE dplens_ledger_meta SET value = '2' WHERE key = 'schema_version'")
    with pytest.raises(ValueError, match=r"schema version '2'.*reads schema version 1 only"):
        Ledger.open(path)


def test_status_of_an_empty_and_of_a_read_only_ledger(tmp_path):
    path = tmp_path / "ledger.db"
    with Ledger.open(path, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        ledger.charge(dplens.Gaussian(noise_multiplier=30.0), release="r")
    path.chmod(0o444)
    try:
        with pytest.raises(ValueError, match="read-only"):
            Ledger.open(path)
        with Ledger.open(path, read_only=True) as ledger:
            status = ledger.status()
        assert status.budgets[0].releases[0].name == "r" and math.isfinite(status.budgets[0].spent_epsilon)
    finally:
        path.chmod(0o644)


def test_the_cached_tightest_result_is_used_only_for_the_events_it_covers(location):
    laplace = dplens.Laplace(noise_multiplier=40.0)  # no exact route for a mix: the PLD route is the tightest
    with Ledger.open(location, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=3.0, delta=1e-6)
        for i in range(3):
            ledger.charge([(dplens.Gaussian(noise_multiplier=30.0), 1), (laplace, 1)], release=f"r{i}")
        first = ledger.status().budgets[0].spent_epsilon
        with ledger._store.read() as db:
            (cache,) = db.execute("SELECT spent_cache FROM dplens_periods")[0]
        assert cache is not None and json.loads(cache)["result"]["epsilon"] == first  # status stored it
        assert ledger.status().budgets[0].spent_epsilon == first  # and reuses it
        ledger.charge(laplace, release="more")  # the period changed: the cache no longer applies
        after = ledger.status().budgets[0].spent_epsilon
        assert after == ledger.accountant("default").epsilon(1e-6) > first


def test_a_route_computed_before_the_lock_is_used_only_for_an_unchanged_period(tmp_path, monkeypatch):
    """The tightest route runs before the writer lock; a charge committed in between makes the charge recompute
    inside the lock, so the decision is always about the events actually stored."""
    path = str(tmp_path / "ledger.db")
    step = dplens.Gaussian(noise_multiplier=20.0)  # 22 fit in (1, 1e-6)
    with Ledger.open(path, create=True) as ledger:
        ledger.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        for i in range(21):
            assert ledger.charge(step, release=f"r{i}").accepted
        original = Ledger._precompute
        precomputed = []

        def racing(self, *args):
            out = original(self, *args)
            precomputed.append([r.epsilon for plan in out for r in plan.known.values()])
            if len(precomputed) == 1:  # another process commits between the precomputation and the lock
                with Ledger.open(path) as other:
                    assert other.charge(step, release="sneaky").accepted
            return out

        monkeypatch.setattr(Ledger, "_precompute", racing)
        late = ledger.charge(step, release="r21")  # precomputed for 22 releases (fits), decided for 23: refused
        monkeypatch.undo()
        status = ledger.status().budgets[0]
        names = [r.name for r in status.releases]
    (stale,) = precomputed[0]
    assert stale <= 1.0  # the precomputed answer would have admitted it: it was not used, the period had changed
    assert not late.accepted and late.budgets[0].spent_epsilon > 1.0
    assert names[-1] == "sneaky" and len(names) == 22
    exact = dplens.Accountant().compose(step, len(names))
    assert status.spent_epsilon == pytest.approx(exact.epsilon(1e-6), rel=1e-9) and status.spent_epsilon <= 1.0
