"""Per-user clipping in Opacus (issue 49): users sampled, each user's examples clipped together."""

from __future__ import annotations

import numpy as np
import pytest

from dplens.integrations.opacus_users import UserPoissonBatches, per_user_optimizer


def test_user_batches_hold_every_example_of_the_drawn_users_and_draw_each_at_its_rate():
    users = [u for u in range(200) for _ in range(1 + u % 3)]  # 1-3 examples per user
    batches = list(UserPoissonBatches(users, sample_rate=0.1, steps=400, generator=1))
    assert len(batches) == 400
    drawn = np.zeros(200)
    for batch in batches:
        in_batch = {users[i] for i in batch}
        assert sorted(batch) == sorted(i for i, u in enumerate(users) if u in in_batch)  # a user is all or nothing
        for u in in_batch:
            drawn[u] += 1
    share = drawn.sum() / (200 * 400)
    assert abs(share - 0.1) <= 5 * np.sqrt(0.1 * 0.9 / (200 * 400))
    assert UserPoissonBatches(users, sample_rate=0.1, steps=1).expected_users_per_batch == pytest.approx(20.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(sample_rate=0.0, steps=3), "sample_rate must be a number in"),
        (dict(sample_rate=0.5, steps=0), "steps must be an integer >= 1"),
    ],
)
def test_user_batches_refuse_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        UserPoissonBatches([0, 1], **kwargs)


torch = pytest.importorskip("torch", reason='needs the [torch] extra: pip install "dplens[torch]"')
pytest.importorskip("opacus", reason='needs the [torch] extra: pip install "dplens[torch]"')


def _private(rows: np.ndarray, sigma: float = 0.0, clip: float = 1.0):
    """A bias-free linear model whose per-sample gradient is its input row (loss = mean of the outputs), made
    private by Opacus; returns (model, DPOptimizer, inputs)."""
    from opacus import PrivacyEngine

    torch.manual_seed(0)
    model = torch.nn.Linear(rows.shape[1], 1, bias=False)
    data = torch.utils.data.TensorDataset(torch.tensor(rows, dtype=torch.float32))
    loader = torch.utils.data.DataLoader(data, batch_size=len(rows))
    engine = PrivacyEngine(accountant="rdp")
    model, optimizer, _ = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
        data_loader=loader,
        noise_multiplier=sigma,
        max_grad_norm=clip,
        poisson_sampling=False,
    )
    return model, optimizer, torch.tensor(rows, dtype=torch.float32)


def _update(model, optimizer, inputs, users=None) -> np.ndarray:
    optimizer.zero_grad()
    model(inputs).mean().backward()
    if users is not None:
        optimizer.set_users(users)
    before = next(model.parameters()).detach().clone()
    optimizer.step()
    return (before - next(model.parameters()).detach()).numpy().ravel()  # lr 1: the privatised gradient


def test_one_example_per_user_is_opacus_per_sample_clipping():
    rows = np.array([[3.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, -2.0], [1.0, 1.0, 1.0]])
    model, optimizer, inputs = _private(rows)
    plain = _update(model, optimizer, inputs)
    model, optimizer, inputs = _private(rows)
    users = per_user_optimizer(optimizer, expected_users_per_batch=4)
    per_user = _update(model, users, inputs, users=[7, 3, 5, 1])
    np.testing.assert_allclose(per_user, plain, rtol=1e-6, atol=1e-7)


def test_a_users_examples_are_averaged_then_clipped_together():
    rows = np.array([[4.0, 0.0], [0.0, 4.0], [0.3, 0.4]])  # user 0: two rows; user 1: one row of norm 0.5
    model, optimizer, inputs = _private(rows, clip=1.0)
    mean_first = per_user_optimizer(optimizer, expected_users_per_batch=2.0)
    got = _update(model, mean_first, inputs, users=[0, 0, 1])
    average = np.array([2.0, 2.0])
    expected = (average / np.linalg.norm(average) + rows[2]) / 2.0  # each user's mean clipped to 1, then / E[users]
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    model, optimizer, inputs = _private(rows, clip=1.0)
    summed = per_user_optimizer(optimizer, expected_users_per_batch=2.0, reduction="sum")
    got = _update(model, summed, inputs, users=[0, 0, 1])
    total = np.array([4.0, 4.0])
    np.testing.assert_allclose(got, (total / np.linalg.norm(total) + rows[2]) / 2.0, rtol=1e-5)


def test_per_user_clipping_refuses_what_it_cannot_do():
    rows = np.ones((3, 2))
    model, optimizer, inputs = _private(rows)
    users = per_user_optimizer(optimizer, expected_users_per_batch=2.0)
    with pytest.raises(ValueError, match=r"call optimizer\.set_users"):
        _update(model, users, inputs)
    with pytest.raises(ValueError, match="was given 2 users for a batch of 3 examples"):
        _update(model, users, inputs, users=[0, 1])
    with pytest.raises(ValueError, match="1-D sequence of integer user labels"):
        users.set_users([0.5, 1.5, 2.5])
    with pytest.raises(ValueError, match="needs the plain DPOptimizer"):
        per_user_optimizer(torch.optim.SGD(model.parameters(), lr=1.0), expected_users_per_batch=1.0)
    with pytest.raises(ValueError, match="expected_users_per_batch must be a number > 0"):
        per_user_optimizer(optimizer, expected_users_per_batch=0)


def test_a_step_that_draws_no_user_is_a_noise_only_step():
    rows = np.ones((3, 2))
    model, optimizer, inputs = _private(rows, sigma=0.0)
    users = per_user_optimizer(optimizer, expected_users_per_batch=2.0)
    empty = inputs[:0]
    users.zero_grad()
    model(empty).sum().backward()
    users.set_users([])
    before = next(model.parameters()).detach().clone()
    users.step()  # σ = 0: nothing moves, and nothing fails on the empty batch
    assert torch.equal(next(model.parameters()).detach(), before)
