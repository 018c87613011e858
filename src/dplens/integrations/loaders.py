"""Which batch sampler did the training run? Read off PyTorch / Opacus data loaders and jax_privacy strategies.

The ε of a DP-SGD training depends on how its batches were drawn (:class:`dplens.accountant.dp_sgd.Sampler`), and the
loader that ran is where that is decided — often not where the accounting assumes it is: Opacus's
``make_private(poisson_sampling=False)`` keeps the user's ``DataLoader(shuffle=True)`` while its accountants account
Poisson sampling at q = 1/len(loader); with ``poisson_sampling=True`` over a weighted loader it replaces the sampler by
its own Poisson one, so the accounting matches what runs but the user's weights and batch size are dropped (Opacus
issue 813). :func:`sampler_of` reads the loader (or a jax_privacy batch-selection strategy) and returns what dplens can
account, warns where the loader is not what its user may think, and refuses, in one line, what no bound covers:

- Opacus ``DPDataLoader`` (a ``UniformWithReplacementSampler``): Poisson sampling at its ``sample_rate``;
- ``RandomSampler`` without replacement (``shuffle=True``): shuffled fixed-size batches, a new permutation each
  epoch; ``SequentialSampler`` (``shuffle=False``): the same batches every epoch (cyclic);
- ``RandomSampler(replacement=True)`` and ``WeightedRandomSampler(replacement=True)``: a record may be drawn several
  times in one epoch — no finite bound without a cap on the repetitions: refused;
- ``WeightedRandomSampler(replacement=False)``: each record at most once per epoch but not uniformly: refused (the
  lower-bound constructions and amplification need uniform batches; no-amplification would be the honest bound);
- ``DistributedSampler``: shards one permutation per epoch; with ``drop_last=False`` it pads the data set to a
  multiple of the replicas by repeating records, so those are used twice per epoch: refused unless nothing is padded;
- jax_privacy's ``CyclicPoissonSampling`` (cycle length 1: Poisson, truncated or not), ``BallsInBinsSampling``
  (fixed bins), ``FixedBatchSampling`` (fixed-size subsets per step, without replacement).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LoaderSampler", "sampler_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoaderSampler:
    """What a loader does, in the accountant's terms.

    ``sampling`` is a :class:`~dplens.accountant.dp_sgd.Sampler` name; ``dataset_size`` N and ``batch_size`` B (the
    expected batch size for Poisson); ``steps_per_epoch`` the batches one pass yields (``len(loader)``);
    ``drop_last`` whether a smaller last batch is dropped; ``found`` says what was read, ``warnings`` what the user
    should know.
    """

    sampling: str
    dataset_size: int
    batch_size: int
    steps_per_epoch: int
    drop_last: bool = False
    max_batch_size: int | None = None
    found: str = ""
    warnings: tuple[str, ...] = field(default=())

    def run(self, *, noise_multiplier: float, steps: int) -> Any:
        """The :class:`~dplens.accountant.dp_sgd.DpSgdRun` of ``steps`` steps of this loader at σ."""
        from dplens.accountant.dp_sgd import DpSgdRun, Sampler

        if Sampler(self.sampling) in (Sampler.POISSON, Sampler.TRUNCATED_POISSON, Sampler.FIXED_SIZE):
            epochs = steps * self.batch_size / self.dataset_size
        else:
            epochs = steps / self.steps_per_epoch
        return DpSgdRun(
            noise_multiplier=noise_multiplier,
            dataset_size=self.dataset_size,
            batch_size=self.batch_size,
            epochs=epochs,
            sampling=self.sampling,
            max_batch_size=self.max_batch_size,
            drop_last=self.drop_last,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "sampling": self.sampling,
            "dataset_size": self.dataset_size,
            "batch_size": self.batch_size,
            "steps_per_epoch": self.steps_per_epoch,
            "drop_last": self.drop_last,
            "max_batch_size": self.max_batch_size,
            "found": self.found,
            "warnings": list(self.warnings),
        }


def _type_name(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _is(obj: Any, module: str, name: str) -> bool:
    """``obj`` is an instance of ``module.name`` (by the class hierarchy; the module need not be imported)."""
    return any(cls.__name__ == name and cls.__module__.startswith(module) for cls in type(obj).__mro__)


def sampler_of(
    source: Any,
    *,
    dataset_size: int | None = None,
    poisson_sampling: bool | None = None,
    original: Any = None,
) -> LoaderSampler:
    """The sampler a training's loader runs (see the module for what is recognised, warned about and refused).

    Args:
        source: a ``torch.utils.data.DataLoader`` (Opacus's ``DPDataLoader`` included) or a jax_privacy
            ``BatchSelectionStrategy``.
        dataset_size: N, needed for a jax_privacy strategy (a loader knows its data set).
        poisson_sampling: what ``make_private`` was told, when known (True: Opacus replaced the loader by its own).
        original: the user's loader before Opacus replaced it, when known (for the weighted-sampler warning).

    Raises:
        ValueError: one line naming what was found and what dplens can certify, for samplers no bound covers.
    """
    if _is(source, "jax_privacy", "BatchSelectionStrategy") or _is(source, "jax_privacy", "UserSelectionStrategy"):
        return _jax_privacy(source, dataset_size)
    if not _is(source, "torch.utils.data", "DataLoader"):
        raise ValueError(
            "source must be a torch DataLoader (Opacus's DPDataLoader included) or a jax_privacy batch-selection "
            f"strategy; got {_type_name(source)}"
        )
    return _torch_loader(source, poisson_sampling=poisson_sampling, original=original)


def _torch_loader(loader: Any, *, poisson_sampling: bool | None, original: Any) -> LoaderSampler:
    n = len(loader.dataset)
    batches = len(loader)
    batch_sampler = getattr(loader, "batch_sampler", None)
    if _is(batch_sampler, "opacus", "UniformWithReplacementSampler") or _is(loader, "opacus", "DPDataLoader"):
        rate = float(getattr(batch_sampler, "sample_rate", 1.0 / batches))
        notes = _replaced_loader_notes(original) if original is not None else ()
        return _poisson(rate, n, batches, f"Opacus DPDataLoader (Poisson sampling, q = {rate:.6g})", warnings=notes)
    if poisson_sampling:
        raise ValueError(
            f"poisson_sampling=True but the loader is {_type_name(loader)} with batch sampler "
            f"{_type_name(batch_sampler)}, not Opacus's DPDataLoader: dplens cannot tell what ran"
        )
    if _is(batch_sampler, "opacus", "DistributedUniformWithReplacementSampler"):
        rate = float(batch_sampler.sample_rate)
        return _poisson(rate, n, batches, f"Opacus distributed Poisson sampler (q = {rate:.6g})")
    if not _is(batch_sampler, "torch.utils.data", "BatchSampler"):
        raise ValueError(
            f"the loader's batch sampler is {_type_name(batch_sampler)}: dplens recognises Opacus's Poisson samplers "
            "and torch's BatchSampler over a random, sequential or distributed sampler; account the training with an "
            "explicit sampling= instead"
        )
    return _batches(loader, batch_sampler, n, batches)


def _poisson(rate: float, n: int, batches: int, found: str, *, warnings: tuple[str, ...] = ()) -> LoaderSampler:
    """An Opacus Poisson sampler at rate q over n records: its expected batch size ``round(q n)``, at least 1."""
    return LoaderSampler(
        sampling="poisson",
        dataset_size=n,
        batch_size=max(1, round(rate * n)),
        steps_per_epoch=batches,
        found=found,
        warnings=warnings,
    )


def _replaced_loader_notes(original: Any) -> tuple[str, ...]:
    """Opacus's DPDataLoader.from_data_loader keeps only the data set and len(loader) of the user's loader."""
    sampler = getattr(original, "sampler", None)
    if _is(sampler, "torch.utils.data", "WeightedRandomSampler") or _is(sampler, "torch.utils.data", "Subset"):
        return (
            f"Opacus replaced the loader's {type(sampler).__name__} by its own Poisson sampler at q = 1/len(loader): "
            "the accounting matches what ran, but the sampler's weights and batch size were not used (Opacus issue "
            "813)",
        )
    return ()


def _batches(loader: Any, batch_sampler: Any, n: int, batches: int) -> LoaderSampler:
    sampler = batch_sampler.sampler
    b = int(batch_sampler.batch_size)
    drop_last = bool(batch_sampler.drop_last)
    shape = dict(dataset_size=n, batch_size=b, steps_per_epoch=batches, drop_last=drop_last)
    if _is(sampler, "torch.utils.data", "WeightedRandomSampler"):
        how = "with" if sampler.replacement else "without"
        raise ValueError(
            f"the loader draws batches with a WeightedRandomSampler {how} replacement: "
            + (
                "a record may be drawn several times in one epoch, so no finite epsilon bounds the training"
                if sampler.replacement
                else "records are not drawn uniformly, so only a bound without amplification would hold"
            )
            + "; dplens certifies Poisson, shuffled, cyclic and balls-and-bins sampling"
        )
    if _is(sampler, "torch.utils.data", "RandomSampler"):
        if sampler.replacement:
            raise ValueError(
                "the loader's RandomSampler draws with replacement: a record may be used several times per epoch, so "
                "no finite epsilon bounds the training; use shuffle=True without replacement or Poisson sampling"
            )
        if sampler.num_samples != n:
            raise ValueError(
                f"the loader's RandomSampler draws {sampler.num_samples} of {n} records per epoch: dplens accounts "
                "whole permutations (shuffle=True) only"
            )
        return LoaderSampler(sampling="shuffle", found="DataLoader(shuffle=True): RandomSampler", **shape)
    if _is(sampler, "torch.utils.data", "SequentialSampler"):
        return LoaderSampler(sampling="cyclic", found="DataLoader(shuffle=False): SequentialSampler", **shape)
    if _is(sampler, "torch.utils.data", "DistributedSampler"):
        return _distributed(sampler, shape)
    raise ValueError(
        f"the loader's sampler is {_type_name(sampler)}: dplens recognises RandomSampler, SequentialSampler, "
        "DistributedSampler and Opacus's Poisson samplers; account the training with an explicit sampling= instead"
    )


def _distributed(sampler: Any, shape: dict) -> LoaderSampler:
    n, replicas = shape["dataset_size"], int(sampler.num_replicas)
    if not sampler.drop_last and n % replicas:
        padded = replicas * math.ceil(n / replicas) - n
        raise ValueError(
            f"DistributedSampler(drop_last=False) pads {n} records to {n + padded} for {replicas} replicas by "
            f"repeating {padded}: those are used twice per epoch, which no shuffled-batch bound covers; use "
            "drop_last=True (each record then at most once per epoch)"
        )
    kind = "shuffle" if sampler.shuffle else "cyclic"
    # Each replica's batch is a slice of one permutation; the steps sum the replicas' batches, so the run is
    # shuffled (or cyclic) batches of replicas·B over the whole data set.
    total = dict(shape, batch_size=shape["batch_size"] * replicas)
    notes = ()
    if sampler.drop_last and n % replicas:
        notes = (f"DistributedSampler(drop_last=True) leaves {n % replicas} records out of every epoch",)
    return LoaderSampler(
        sampling=kind,
        found=f"DistributedSampler over {replicas} replicas (shuffle={sampler.shuffle})",
        warnings=notes,
        **total,
    )


def _jax_privacy(strategy: Any, dataset_size: int | None) -> LoaderSampler:
    if isinstance(dataset_size, bool) or not isinstance(dataset_size, int) or dataset_size < 1:
        raise ValueError(f"dataset_size (N) is needed for a jax_privacy strategy; got {dataset_size!r}")
    n = dataset_size
    name = type(strategy).__name__
    if name == "CyclicPoissonSampling":
        if strategy.cycle_length != 1:
            raise ValueError(
                f"CyclicPoissonSampling(cycle_length={strategy.cycle_length}): each record is eligible in one round of "
                "each cycle; account it as poisson_subsampled_gaussian over its ceil(iterations / cycle_length) "
                "rounds under zero-out"
            )
        q = float(strategy.sampling_prob)
        b = max(1, round(q * n))
        truncated = strategy.truncated_batch_size
        return LoaderSampler(
            sampling="truncated-poisson" if truncated is not None else "poisson",
            dataset_size=n,
            batch_size=b,
            steps_per_epoch=max(1, round(1 / q)),
            max_batch_size=None if truncated is None else max(int(truncated), b),
            found=f"jax_privacy {name}(sampling_prob={q:g})",
        )
    if name == "BallsInBinsSampling":
        t = int(strategy.cycle_length)
        return LoaderSampler(
            sampling="fixed-bins",
            dataset_size=n,
            batch_size=max(1, math.ceil(n / t)),
            steps_per_epoch=t,
            found=f"jax_privacy {name}(cycle_length={t}): the bins are drawn once and cycled",
        )
    if name == "FixedBatchSampling":
        if strategy.replace:
            raise ValueError(
                "FixedBatchSampling(replace=True) samples with replacement within a batch: account it with the "
                "sampled_with_replacement_gaussian spec type"
            )
        return LoaderSampler(
            sampling="fixed-size",
            dataset_size=n,
            batch_size=int(strategy.batch_size),
            steps_per_epoch=max(1, round(n / strategy.batch_size)),
            found=f"jax_privacy {name}(batch_size={strategy.batch_size})",
        )
    raise ValueError(
        f"jax_privacy's {name} is not one dplens accounts (Poisson, balls-in-bins, fixed-size batches are)"
    )


def warn(detected: LoaderSampler) -> None:
    """Issue the detection's warnings (a ``UserWarning`` each)."""
    for message in detected.warnings:
        warnings.warn(message, UserWarning, stacklevel=3)
