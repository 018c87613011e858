"""The Opacus subject of ``check_dp_sgd``: crafted per-sample gradients through the user's own ``make_private``.

A gradient-injection module — a bias-free ``Linear(1, d)`` layer fed the constant input 1, with the linear loss
⟨output, g_i⟩ per record and ``loss_reduction="mean"`` — makes each record's per-sample gradient exactly the crafted
vector g_i. The user's ``make_private(module, optimizer, data_loader)`` (typically a
``PrivacyEngine().make_private(...)`` call with the user's own options: ``grad_sample_mode``, clipping, noise,
``poisson_sampling``) wraps it, so Opacus's own per-sample clipping, noise and normalisation are what run; the
update is the parameter's ``.grad`` after ``DPOptimizer.step()`` (the privatised gradient, before the plain SGD
update with learning rate 1 and no momentum that the injection optimizer applies). Opacus draws its noise from
torch's global generator (dplens re-seeds it before each training) or from its own secure generator.

Gradient accumulation, ``BatchMemoryManager`` and ghost clipping are not exercised by this adapter (it calls
``step()`` once per logical batch with the whole batch).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

__all__ = ["loader_sampler", "opacus_step"]


class _OpacusStep:
    """``step(per_sample_gradients, rng) -> update`` running Opacus's DPOptimizer (one wrapped module per width d)."""

    def __init__(self, make_private: Any, dataset_size: int, batch_size: int) -> None:
        if not callable(make_private):
            raise ValueError(f"opacus_step: make_private must be callable; got {make_private!r}")
        self.make_private, self.dataset_size, self.batch_size = make_private, int(dataset_size), int(batch_size)
        self._by_width: dict[int, tuple[Any, Any]] = {}
        self.__qualname__ = f"opacus_step({getattr(make_private, '__qualname__', 'make_private')})"

    def _wrapped(self, width: int) -> tuple[Any, Any]:
        if width not in self._by_width:
            import torch

            module = torch.nn.Linear(1, width, bias=False)
            torch.nn.init.zeros_(module.weight)
            optimizer = torch.optim.SGD(module.parameters(), lr=1.0)
            data = torch.utils.data.TensorDataset(torch.ones(self.dataset_size, 1))
            loader = torch.utils.data.DataLoader(data, batch_size=self.batch_size)
            wrapped = self.make_private(module, optimizer, loader)
            if not isinstance(wrapped, tuple) or len(wrapped) < 2:
                raise ValueError(
                    "opacus_step: make_private must return (module, optimizer, data_loader) as "
                    f"PrivacyEngine.make_private does; got {type(wrapped).__name__}"
                )
            self._by_width[width] = (wrapped[0], wrapped[1])
        return self._by_width[width]

    def __call__(self, grads: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        import torch

        module, optimizer = self._wrapped(grads.shape[1])
        if grads.shape[0] == 0:  # an empty Poisson batch: one zero record (it contributes nothing)
            grads = np.zeros((1, grads.shape[1]))
        targets = torch.as_tensor(grads, dtype=torch.float32)
        optimizer.zero_grad(set_to_none=True)
        outputs = module(torch.ones(grads.shape[0], 1))
        loss = (outputs * targets).sum(dim=1).mean()
        with warnings.catch_warnings():  # the injection module's input needs no gradient: Opacus's hooks say so
            warnings.simplefilter("ignore", UserWarning)
            loss.backward()
            optimizer.step()
        parameter = next(iter(module.parameters()))
        return parameter.grad.detach().reshape(-1).double().numpy().copy()


def opacus_step(make_private: Any, *, dataset_size: int, batch_size: int) -> _OpacusStep:
    """The step of a ``make_private`` for :func:`dplens.check_dp_sgd`: crafted gradients through Opacus's DPOptimizer.

    ``make_private(module, optimizer, data_loader) -> (module, optimizer, data_loader)`` is called once per gradient
    width with a gradient-injection module, an SGD optimizer and a loader of ``dataset_size`` records in batches of
    ``batch_size`` (what the accountant's expected batch size is computed from).

    Example:
        >>> from opacus import PrivacyEngine  # doctest: +SKIP
        >>> def make_private(module, optimizer, loader):  # doctest: +SKIP
        ...     return PrivacyEngine().make_private(module=module, optimizer=optimizer, data_loader=loader,
        ...                                         noise_multiplier=1.0, max_grad_norm=1.0)
        >>> step = opacus_step(make_private, dataset_size=5000, batch_size=50)  # doctest: +SKIP
    """
    return _OpacusStep(make_private, dataset_size, batch_size)


def loader_sampler(make_loader: Any) -> Any:
    """A ``sampler(dataset_size, rng)`` for :func:`dplens.check_dp_sgd` that reads the batches of a real torch loader.

    ``make_loader(dataset)`` builds the loader the training uses over a dataset whose records are their own indices
    (for instance ``lambda d: DPDataLoader.from_data_loader(DataLoader(d, batch_size=B))``, Opacus's Poisson
    loader, or ``lambda d: DataLoader(d, batch_size=B, shuffle=True)`` under ``poisson_sampling=False``); the loader
    is iterated epoch after epoch, its randomness from torch's global generator (dplens re-seeds it per training).
    """
    if not callable(make_loader):
        raise ValueError(f"loader_sampler: make_loader must be callable; got {make_loader!r}")

    def sampler(dataset_size: int, rng: np.random.Generator):
        import torch

        loader = make_loader(torch.utils.data.TensorDataset(torch.arange(dataset_size)))
        while True:
            for batch in loader:
                indices = batch[0] if isinstance(batch, list | tuple) else batch
                yield indices.reshape(-1).numpy()

    sampler.__qualname__ = f"loader_sampler({getattr(make_loader, '__qualname__', 'make_loader')})"
    return sampler
