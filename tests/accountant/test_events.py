"""Events: validation, serialisation, dp-accounting interoperability."""

import dp_accounting as dpa
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.accountant import events as ev
from dplens.accountant import rdp
from dplens.accountant.compose import Accountant

STEP = ev.PoissonSampled(sampling_rate=0.01, event=ev.Gaussian(noise_multiplier=1.1))
EVENTS = [
    ev.NoOp(),
    ev.NonPrivate(),
    ev.Gaussian(noise_multiplier=2.0),
    ev.Laplace(noise_multiplier=0.5),
    ev.RandomizedResponse(epsilon=1.0, num_values=4),
    STEP,
    ev.SampledWithoutReplacement(
        sample_size=10,
        dataset_size=100,
        event=ev.Gaussian(noise_multiplier=1.0, neighboring=ev.NeighboringRelation.REPLACE_ONE),
    ),
    ev.SelfComposed(event=STEP, count=100),
    ev.Composed(events=(STEP, ev.Gaussian(noise_multiplier=3.0))),
]


@pytest.mark.parametrize("event", EVENTS)
def test_dict_round_trip(event):
    assert ev.event_from_dict(ev.event_to_dict(event)) == event


@pytest.mark.parametrize("event", EVENTS)
def test_dp_accounting_round_trip(event):
    converted = ev.to_dp_accounting(event)
    assert isinstance(converted, dpa.DpEvent)
    back = ev.from_dp_accounting(converted, neighboring=getattr(event, "neighboring", ev.ADD_REMOVE))
    if isinstance(event, ev.RandomizedResponse):
        assert back.epsilon == pytest.approx(event.epsilon, rel=1e-12)
        assert back.num_values == event.num_values
    else:
        assert ev.event_to_dict(back) == ev.event_to_dict(event)


def test_events_are_frozen_and_keyword_only():
    with pytest.raises(TypeError):
        ev.Gaussian(1.0)  # positional arguments are refused
    with pytest.raises(AttributeError):
        ev.Gaussian(noise_multiplier=1.0).noise_multiplier = 2.0  # type: ignore[misc]


def test_every_event_states_its_neighbouring_relation():
    for event in EVENTS:
        relation = getattr(event, "neighboring", None) or getattr(getattr(event, "event", None), "neighboring", None)
        if isinstance(event, ev.Composed):
            relation = event.events[0].neighboring
        assert isinstance(relation, ev.NeighboringRelation)


@pytest.mark.parametrize(
    ("factory", "name"),
    [
        (lambda: ev.Gaussian(noise_multiplier=0.0), "noise_multiplier"),
        (lambda: ev.Gaussian(noise_multiplier=float("nan")), "noise_multiplier"),
        (lambda: ev.Laplace(noise_multiplier=-1.0), "noise_multiplier"),
        (lambda: ev.RandomizedResponse(epsilon=1.0, num_values=1), "num_values"),
        (lambda: ev.PoissonSampled(sampling_rate=-0.1, event=ev.NoOp()), "sampling_rate"),
        (lambda: ev.PoissonSampled(sampling_rate=1.5, event=ev.NoOp()), "sampling_rate"),
        (lambda: ev.SampledWithoutReplacement(sample_size=5, dataset_size=2, event=ev.NoOp()), "sample_size"),
        (lambda: ev.SelfComposed(event=ev.NoOp(), count=-1), "count"),
        (lambda: ev.Composed(events=(1,)), "events"),
    ],
)
def test_bad_parameters_name_the_argument(factory, name):
    with pytest.raises(ValueError, match=name):
        factory()


def test_unsupported_dp_accounting_event_is_refused():
    with pytest.raises(ValueError, match="not supported"):
        ev.from_dp_accounting(dpa.UnsupportedDpEvent())


_bad_positive = st.one_of(
    st.floats(max_value=0.0, allow_nan=False), st.just(float("nan")), st.just(float("inf")), st.just(-float("inf"))
)


@settings(max_examples=60, deadline=None)
@given(sigma=_bad_positive)
def test_invalid_noise_multiplier_property(sigma):
    with pytest.raises(ValueError, match="noise_multiplier"):
        ev.Gaussian(noise_multiplier=sigma)
    with pytest.raises(ValueError, match="noise_multiplier"):
        rdp.gaussian_rdp(np.array([2.0]), noise_multiplier=sigma)


@settings(max_examples=60, deadline=None)
@given(
    q=st.one_of(
        st.floats(max_value=0.0, exclude_max=True), st.floats(min_value=1.0, exclude_min=True), st.just(float("nan"))
    )
)
def test_invalid_sampling_rate_property(q):
    with pytest.raises(ValueError, match="sampling_rate"):
        ev.PoissonSampled(sampling_rate=q, event=ev.Gaussian(noise_multiplier=1.0))


@settings(max_examples=60, deadline=None)
@given(delta=st.one_of(st.floats(max_value=0.0, exclude_max=True), st.floats(min_value=1.0), st.just(float("nan"))))
def test_invalid_delta_property(delta):
    acc = Accountant().compose(ev.Gaussian(noise_multiplier=1.0))
    with pytest.raises(ValueError, match="delta"):
        acc.epsilon(delta)


@settings(max_examples=60, deadline=None)
@given(alpha=st.one_of(st.floats(max_value=1.0), st.just(float("nan"))))
def test_invalid_alpha_property(alpha):
    with pytest.raises(ValueError, match="alpha"):
        rdp.rdp_curve(ev.Gaussian(noise_multiplier=1.0))(np.array([alpha]))


@settings(max_examples=60, deadline=None)
@given(count=st.integers(max_value=-1))
def test_invalid_count_property(count):
    with pytest.raises(ValueError, match="count"):
        Accountant().compose(ev.Gaussian(noise_multiplier=1.0), count)
    with pytest.raises(ValueError, match="count"):
        ev.SelfComposed(event=ev.Gaussian(noise_multiplier=1.0), count=count)
