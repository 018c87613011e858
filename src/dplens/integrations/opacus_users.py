"""User-level DP-SGD in Opacus: users sampled, each user's examples clipped together (Opacus issue 366).

User-level sampling (ULS; Charles, Ganesh, McKenna, McMahan, Mitchell, Pillutla, Rush, "Learning with User-Level
Differential Privacy Under Fixed Compute Budgets", SaTML 2025, arXiv 2407.07737; Chua et al., "Mind the Privacy
Unit!", COLM 2024): each step samples *users* (Poisson, rate q = B/U over U users), a sampled user's examples enter the
batch together, and the clipped quantity is the user's gradient — the mean (or the sum) of its examples' gradients —
clipped to C, so that one user moves the noisy sum by at most C. The run is then DP-SGD over users: its ε is the
example-level event with users for examples (``dplens dp-sgd --privacy-unit user --user-sampling --users U``,
:mod:`dplens.accountant.user_level`).

Two pieces, both over Opacus's own machinery:

- :class:`UserPoissonBatches`, a ``batch_sampler`` for a ``torch.utils.data.DataLoader``: at each of ``steps`` steps
  every user is drawn with probability ``sample_rate``, and the batch is all the examples of the drawn users;
- :func:`per_user_optimizer`, from the ``DPOptimizer`` that ``PrivacyEngine.make_private`` returned: the same optimizer
  (noise σ·C, the original optimizer, the generator), whose clipping first sums (or averages) the per-sample gradients
  of each user of the batch — the user of each row given by ``optimizer.set_users(users)`` before ``step()`` — then
  clips per user, and whose mean divides by the expected number of users per batch.

Only Opacus's default per-sample clipping is supported (``clipping="flat"`` with hooks or functorch gradients, one
physical batch per logical one): ghost clipping clips inside its loss wrapper, before the optimizer sees the rows,
and per-layer clipping has no single per-user norm; both are refused with one line.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from typing import Any

from dplens.integrations.opacus_audit import require_torch

__all__ = ["UserPoissonBatches", "per_user_optimizer"]


class UserPoissonBatches:
    """Batches of user-level Poisson sampling, as a ``batch_sampler``: at each step each user independently with
    probability ``sample_rate``, the batch holding every example of the drawn users (possibly empty).

    ``users``: the user of each example (any hashable labels, one per example of the data set). ``generator``: a
    ``numpy.random.Generator`` or a seed (the batches are reproducible from it).

    Example:
        >>> batches = UserPoissonBatches(["a", "a", "b", "c"], sample_rate=0.5, steps=3, generator=0)
        >>> [sorted(batch) for batch in batches]
        [[2, 3], [0, 1], []]
    """

    def __init__(self, users: Sequence[Any], *, sample_rate: float, steps: int, generator: Any = None) -> None:
        import numpy as np

        if isinstance(sample_rate, bool) or not isinstance(sample_rate, int | float) or not 0 < sample_rate <= 1:
            raise ValueError(f"sample_rate must be a number in (0, 1]; got {sample_rate!r}")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be an integer >= 1; got {steps!r}")
        labels = list(users)
        if not labels:
            raise ValueError("users must name the user of each example; got an empty sequence")
        order: dict[Any, int] = {}
        codes = np.array([order.setdefault(label, len(order)) for label in labels], dtype=np.int64)
        by_user = np.argsort(codes, kind="stable")
        starts = np.searchsorted(codes[by_user], np.arange(len(order) + 1))
        self._examples = [by_user[starts[u] : starts[u + 1]] for u in range(len(order))]
        self.users = len(order)
        self.sample_rate = float(sample_rate)
        self.steps = steps
        self._rng = np.random.default_rng(generator)

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[list[int]]:
        import numpy as np

        for _ in range(self.steps):
            drawn = np.flatnonzero(self._rng.random(self.users) < self.sample_rate)
            yield np.concatenate([self._examples[u] for u in drawn]).tolist() if drawn.size else []

    @property
    def expected_users_per_batch(self) -> float:
        """q·U, the divisor of a ``mean`` reduction (:func:`per_user_optimizer`)."""
        return self.sample_rate * self.users


@functools.cache
def _per_user_class() -> type:
    torch, _ = require_torch()
    from opacus.optimizers import DPOptimizer
    from opacus.optimizers.optimizer import _mark_as_processed

    class PerUserDPOptimizer(DPOptimizer):
        """A ``DPOptimizer`` that clips each user's gradient (see :func:`per_user_optimizer`)."""

        user_reduction: str = "mean"
        _users: Any = None

        def set_users(self, users: Any) -> None:
            """The user of each row of the coming batch (a sequence or tensor of integer labels, one per example);
            consumed by the next ``step()``."""
            labels = torch.as_tensor(users)
            if labels.numel() == 0:  # a step that drew no user (as_tensor([]) is float)
                labels = labels.reshape(0).to(torch.int64)
            if labels.ndim != 1 or labels.dtype.is_floating_point or labels.dtype == torch.bool:
                raise ValueError(
                    f"per_user_optimizer: set_users needs a 1-D sequence of integer user labels; got shape "
                    f"{tuple(labels.shape)} of {labels.dtype}"
                )
            self._users = labels

        def clip_and_accumulate(self) -> None:
            rows = len(self.grad_samples[0])
            users = self._users
            self._users = None
            if users is None:
                raise ValueError(
                    "per_user_optimizer: call optimizer.set_users(users) with the user of each example of the batch "
                    "before step()"
                )
            if len(users) != rows:
                raise ValueError(
                    f"per_user_optimizer: set_users was given {len(users)} users for a batch of {rows} examples"
                )
            grads = [g.reshape(g.shape[0], math.prod(g.shape[1:])) for g in self.grad_samples]  # also 0 rows
            labels, inverse = torch.unique(users.to(grads[0].device), return_inverse=True)
            per_user = [torch.zeros(len(labels), g.shape[1], dtype=g.dtype, device=g.device) for g in grads]
            for total, g in zip(per_user, grads, strict=True):
                total.index_add_(0, inverse, g)
            if self.user_reduction == "mean" and rows:
                counts = torch.bincount(inverse, minlength=len(labels)).to(per_user[0].dtype)[:, None]
                per_user = [total / counts for total in per_user]
            if rows:
                norms = torch.stack([total.norm(2, dim=1) for total in per_user], dim=1).norm(2, dim=1)
                factor = (self.max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
            else:
                factor = torch.zeros((0,), device=grads[0].device)
            for p, total in zip(self.params, per_user, strict=True):
                grad = torch.einsum("u,u...", factor.to(total.dtype), total).reshape(p.shape).to(p.dtype)
                p.summed_grad = grad if p.summed_grad is None else p.summed_grad + grad
                _mark_as_processed(p.grad_sample)  # as Opacus's own clipping does

    return PerUserDPOptimizer


def per_user_optimizer(optimizer: Any, *, expected_users_per_batch: float, reduction: str = "mean") -> Any:
    """A per-user-clipping copy of the ``DPOptimizer`` ``optimizer`` (what ``PrivacyEngine.make_private`` returned):
    the same original optimizer, noise multiplier, clip norm, generator and loss reduction; each user's gradient —
    the ``reduction`` (``mean`` or ``sum``) of its examples' per-sample gradients — clipped to the clip norm; a mean
    loss divided by ``expected_users_per_batch`` (q·U: :attr:`UserPoissonBatches.expected_users_per_batch`). Before
    each ``step()`` the training loop calls ``set_users(users)`` with the user of each example of the batch.

    Accounting: the run is DP-SGD over users (``dplens dp-sgd --privacy-unit user --user-sampling --users U``).
    The copy carries no step hook: Opacus's own accountant (attached by ``make_private``) counts example-level steps
    at the example sampling rate, which is not this run's; account for it with dplens."""
    require_torch()
    from opacus.optimizers import DPOptimizer

    if not isinstance(optimizer, DPOptimizer) or type(optimizer) is not DPOptimizer:
        raise ValueError(
            "per_user_optimizer needs the plain DPOptimizer of make_private(..., clipping='flat') (per-sample "
            f"clipping in the optimizer); got {type(optimizer).__name__} (ghost and per-layer clipping have no "
            "per-user norm here)"
        )
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum'; got {reduction!r}")
    if (
        isinstance(expected_users_per_batch, bool)
        or not isinstance(expected_users_per_batch, int | float)
        or not (math.isfinite(expected_users_per_batch) and expected_users_per_batch > 0)
    ):
        raise ValueError(f"expected_users_per_batch must be a number > 0; got {expected_users_per_batch!r}")
    cls = _per_user_class()
    clipped = cls(
        optimizer.original_optimizer,
        noise_multiplier=optimizer.noise_multiplier,
        max_grad_norm=optimizer.max_grad_norm,
        expected_batch_size=float(expected_users_per_batch),
        loss_reduction=optimizer.loss_reduction,
        generator=optimizer.generator,
        secure_mode=optimizer.secure_mode,
    )
    clipped.user_reduction = reduction
    return clipped
