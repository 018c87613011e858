"""The Opacus subject of ``check_dp_sgd``: crafted per-sample gradients through the user's own ``make_private``.

A gradient-injection module — a bias-free ``Linear(1, d)`` layer fed the constant input 1, with the linear loss
⟨output, g_i⟩ per record, reduced as the optimizer's ``loss_reduction`` says (mean or sum) — makes each record's
per-sample gradient exactly the crafted vector g_i. The user's ``make_private(module, optimizer, data_loader)``
(typically a ``PrivacyEngine().make_private(...)`` call with the user's own options: ``grad_sample_mode``, clipping,
noise, ``poisson_sampling``) wraps it, so Opacus's own per-sample clipping, noise and normalisation are what run.

The update of a logical batch is the change of the injection layer's weight over it (reset to zero before each
logical batch; plain SGD at learning rate 1, no momentum, and the linear loss's gradient does not depend on the
weight): the privatised gradient, before any optimizer post-processing. With ``max_physical_batch_size`` the
logical batch is split by Opacus's own ``BatchSplittingSampler`` (what ``BatchMemoryManager`` runs): a forward,
backward, ``step()`` and ``zero_grad()`` per physical batch, the optimizer told which steps to skip — so the update
holds whatever noise the optimizer added at any physical step. With ``grad_sample_mode="ghost"`` make_private
returns the loss wrapper too (pass ``criterion=injection_criterion()`` to make_private): its two backward passes
clip, as in a ghost-clipping training.

What the optimizer told its accountant is recorded per logical batch (:class:`Accounting`): the noised steps
(calls of the optimizer's step hook, which ``DPOptimizer.pre_step`` makes once per step that adds noise) and the
sampling rate ``PrivacyEngine.make_private`` gives its accountant per step, 1/len(the loader make_private returned)
× ``accumulated_iterations`` (opacus/privacy_engine.py, ``make_private``; ``IAccountant.get_optimizer_hook_fn``).

Opacus draws its noise from torch's global generator (dplens re-seeds it before each training) or from its own
secure generator. In a dplens worker process torch runs on one intra-op thread (the step's tensors are small; the
workers are the parallelism).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.training.framework_free import StepSubject

__all__ = ["Accounting", "OpacusSubject", "injection_criterion", "loader_sampler", "opacus_step"]


@dataclass(frozen=True, slots=True)
class Accounting:
    """What one logical batch told Opacus's accountant: noised steps, physical batches, the rate per noised step."""

    noised_steps: int
    physical_batches: int
    rates: tuple[float, ...]

    @property
    def rate(self) -> float:
        """The sampling rate the accountant was given for this logical batch (the sum over its noised steps)."""
        return float(sum(self.rates))


_INJECTION_LOSS: list[Any] = []


def _injection_class() -> Any:
    """The linear loss's class, defined once (torch is imported only when an Opacus subject runs)."""
    if not _INJECTION_LOSS:
        import torch

        class InjectionLoss(torch.nn.Module):
            """⟨output_i, g_i⟩ per record; ``reduction`` mean, sum or none (ghost clipping's wrapper sets none)."""

            def __init__(self) -> None:
                super().__init__()
                self.reduction = "mean"

            def forward(self, outputs: Any, targets: Any) -> Any:
                per_sample = (outputs * targets).sum(dim=1)
                if self.reduction == "none":
                    return per_sample
                return per_sample.sum() if self.reduction == "sum" else per_sample.mean()

        _INJECTION_LOSS.append(InjectionLoss)
    return _INJECTION_LOSS[0]


def injection_criterion() -> Any:
    """The linear loss ⟨output_i, g_i⟩ per record as a torch module with a ``reduction``: the criterion to pass to
    ``make_private(criterion=...)`` under ``grad_sample_mode="ghost"`` (its loss wrapper calls it per sample and
    runs the two backward passes that clip)."""
    return _injection_class()()


class _Wrapped:
    """One wrapped injection module: module, optimizer, loss wrapper (ghost), weight, loader length, hook record."""

    def __init__(self, wrapped: tuple, width: int) -> None:
        self.module, self.optimizer = wrapped[0], wrapped[1]
        self.criterion = wrapped[2] if len(wrapped) == 4 else None  # ghost clipping: (module, optim, loss, loader)
        if self.criterion is not None and not isinstance(self.criterion.criterion, _injection_class()):
            raise ValueError(
                "opacus_step: under ghost clipping make_private must be given criterion=injection_criterion() "
                f"(the gradient-injection loss); its loss wrapper holds {type(self.criterion.criterion).__name__}"
            )
        self.loader_length = len(wrapped[-1])
        self.weight = next(iter(self.module.parameters()))
        if tuple(self.weight.shape) != (width, 1):
            raise ValueError(
                f"opacus_step: make_private must wrap the module it is given; its first parameter has shape "
                f"{tuple(self.weight.shape)}, not ({width}, 1)"
            )
        self.sum = self.optimizer.loss_reduction == "sum"
        self.noised: list[int] = []
        original = self.optimizer.step_hook

        def record(optim: Any) -> None:  # DPOptimizer.pre_step calls its step hook once per step that adds noise
            self.noised.append(int(optim.accumulated_iterations))
            if original is not None:
                original(optim)

        self.optimizer.attach_step_hook(record)
        self.ones: dict[int, Any] = {}


class _OpacusStep:
    """``step(per_sample_gradients, rng) -> update`` running Opacus's DPOptimizer (one wrapped module per width d)."""

    def __init__(self, make_private: Any, dataset_size: int, batch_size: int, physical: int | None) -> None:
        if not callable(make_private):
            raise ValueError(f"opacus_step: make_private must be callable; got {make_private!r}")
        if physical is not None and (isinstance(physical, bool) or not isinstance(physical, int) or physical < 1):
            raise ValueError(f"opacus_step: max_physical_batch_size must be an integer >= 1; got {physical!r}")
        self.make_private, self.dataset_size, self.batch_size = make_private, int(dataset_size), int(batch_size)
        self.physical = physical
        self._by_width: dict[int, _Wrapped] = {}
        self._home = os.getpid()
        self._threads_set = False
        self.last: Accounting | None = None
        self.__qualname__ = f"opacus_step({getattr(make_private, '__qualname__', 'make_private')})"

    def __getstate__(self) -> dict[str, Any]:  # a worker started by spawn or forkserver wraps its own modules
        return {**self.__dict__, "_by_width": {}, "_threads_set": False, "_home": None}

    def _wrapped(self, width: int) -> _Wrapped:
        if width not in self._by_width:
            import torch

            module = torch.nn.Linear(1, width, bias=False)
            torch.nn.init.zeros_(module.weight)
            optimizer = torch.optim.SGD(module.parameters(), lr=1.0)
            data = torch.utils.data.TensorDataset(torch.ones(self.dataset_size, 1))
            loader = torch.utils.data.DataLoader(data, batch_size=self.batch_size)
            wrapped = self.make_private(module, optimizer, loader)
            if not isinstance(wrapped, tuple) or len(wrapped) not in (3, 4):
                raise ValueError(
                    "opacus_step: make_private must return (module, optimizer, data_loader) as "
                    "PrivacyEngine.make_private does (or (module, optimizer, criterion, data_loader) under ghost "
                    f"clipping); got {type(wrapped).__name__}"
                )
            self._by_width[width] = _Wrapped(wrapped, width)
        return self._by_width[width]

    def _physical(self, w: _Wrapped, b: int) -> list[Any]:
        """The physical batches of a logical batch of ``b`` rows: Opacus's BatchSplittingSampler (it also tells the
        optimizer which steps to skip), or the whole batch."""
        if self.physical is None:
            return [slice(0, b)]
        from opacus.utils.batch_memory_manager import BatchSplittingSampler

        return list(
            BatchSplittingSampler(sampler=[list(range(b))], max_batch_size=self.physical, optimizer=w.optimizer)
        )

    def __call__(self, grads: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        import torch

        if os.getpid() != self._home:
            if not self._threads_set:  # one intra-op thread in a dplens worker process
                torch.set_num_threads(1)
                self._threads_set = True
            return self._step(grads)
        # In the caller's process (the probe calls, workers=1), one thread for the call only: a multi-threaded
        # BLAS call there (d ≳ 1000) starts libgomp's thread pool, and a worker forked after it hangs at its first
        # parallel region (GNU OpenMP does not survive fork). The caller's setting is restored.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return self._step(grads)
        finally:
            torch.set_num_threads(threads)

    def _step(self, grads: np.ndarray) -> np.ndarray:
        import torch

        w = self._wrapped(grads.shape[1])
        if grads.shape[0] == 0:  # an empty Poisson batch: one zero record (it contributes nothing)
            grads = np.zeros((1, grads.shape[1]))
        targets = torch.from_numpy(grads.astype(np.float32))
        with torch.no_grad():
            w.weight.zero_()
        w.noised.clear()
        chunks = self._physical(w, grads.shape[0])
        for chunk in chunks:
            part = targets[chunk]
            size = int(part.shape[0])
            if size not in w.ones:  # the input requires a gradient, so the module's full backward hooks fire as usual
                w.ones[size] = torch.ones(size, 1, requires_grad=True)
            outputs = w.module(w.ones[size])
            if w.criterion is not None:  # ghost clipping: its loss wrapper's two backward passes
                w.criterion(outputs, part).backward()
            else:  # the gradient at the outputs of the loss sum_i <output_i, g_i> (/ size for the mean)
                outputs.backward(part if w.sum else part / size)
            w.optimizer.step()
            w.optimizer.zero_grad(set_to_none=True)
        rate = 1.0 / w.loader_length
        self.last = Accounting(len(w.noised), len(chunks), tuple(rate * k for k in w.noised))
        return -w.weight.detach().reshape(-1).double().numpy()


class OpacusSubject(StepSubject):
    """The Opacus step behind the harness's interface, with what its optimizer told the accountant per call."""

    kind = "opacus"

    def __init__(self, step: _OpacusStep) -> None:
        super().__init__(step)
        self.physical_batch_size = step.physical

    def accounting(self) -> Accounting | None:
        return self.step.last


def opacus_step(
    make_private: Any, *, dataset_size: int, batch_size: int, max_physical_batch_size: int | None = None
) -> OpacusSubject:
    """The step of a ``make_private`` for :func:`dplens.check_dp_sgd`: crafted gradients through Opacus's DPOptimizer.

    ``make_private(module, optimizer, data_loader) -> (module, optimizer, data_loader)`` is called once per gradient
    width with a gradient-injection module, an SGD optimizer and a loader of ``dataset_size`` records in batches of
    ``batch_size`` (what the accountant's expected batch size is computed from). ``max_physical_batch_size``: split
    each logical batch as ``BatchMemoryManager(max_physical_batch_size=...)`` does (gradient accumulation). The
    result is callable as ``step(per_sample_gradients, rng)``.

    Example:
        >>> from opacus import PrivacyEngine  # doctest: +SKIP
        >>> def make_private(module, optimizer, loader):  # doctest: +SKIP
        ...     return PrivacyEngine().make_private(module=module, optimizer=optimizer, data_loader=loader,
        ...                                         noise_multiplier=1.0, max_grad_norm=1.0)
        >>> step = opacus_step(make_private, dataset_size=5000, batch_size=50)  # doctest: +SKIP
    """
    return OpacusSubject(_OpacusStep(make_private, dataset_size, batch_size, max_physical_batch_size))


def loader_sampler(make_loader: Any) -> Any:
    """A ``sampler(dataset_size, rng)`` for :func:`dplens.check_dp_sgd` that reads the batches of a real torch loader.

    ``make_loader(dataset)`` builds the loader the training uses over a dataset whose records are their own indices
    (for instance ``lambda d: DPDataLoader.from_data_loader(DataLoader(d, batch_size=B))``, Opacus's Poisson
    loader, or ``lambda d: DataLoader(d, batch_size=B, shuffle=True)`` under ``poisson_sampling=False``); the loader
    is iterated epoch after epoch, its randomness from torch's global generator (dplens re-seeds it per training).
    The dataset's record i is the 1-tuple (tensor(i),); it fetches a whole batch in one call (``__getitems__``, which
    torch's fetcher uses), so a batch costs what the loader's sampler and collate cost, not one fetch per record.
    """
    if not callable(make_loader):
        raise ValueError(f"loader_sampler: make_loader must be callable; got {make_loader!r}")

    def sampler(dataset_size: int, rng: np.random.Generator):
        loader = make_loader(_index_dataset(dataset_size))
        while True:
            for batch in loader:
                indices = batch[0] if isinstance(batch, list | tuple) else batch
                yield indices.reshape(-1).numpy()

    sampler.__qualname__ = f"loader_sampler({getattr(make_loader, '__qualname__', 'make_loader')})"
    return sampler


def _index_dataset(n: int) -> Any:
    """The records 0..n−1 as a map-style dataset of 1-tuples (what a ``TensorDataset(torch.arange(n))`` holds),
    fetched a batch at a time."""
    import torch

    class IndexDataset(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return n

        def __getitem__(self, i: int) -> tuple:
            if not 0 <= int(i) < n:
                raise IndexError(i)
            return (torch.tensor(int(i)),)

        def __getitems__(self, indices: list) -> list:  # torch's fetcher: one call per batch
            return [(int(i),) for i in indices]

    return IndexDataset()
