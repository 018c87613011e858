"""Canary audits of real Opacus trainings: the user's model, data and optimiser, trained by Opacus's own engine.

The user gives what they would give Opacus — a model factory, a data set (``(features, labels)`` arrays or a torch
``Dataset``), the optimiser settings and the arguments of ``PrivacyEngine.make_private`` — as an
:class:`OpacusTraining`. The adapter inserts canaries and trains through ``PrivacyEngine.make_private`` (Poisson
sampling by Opacus's ``DPDataLoader``, its per-sample clipping and Gaussian noise in its ``DPOptimizer``), so what is
audited is what the user runs, including any change the user makes around it (:attr:`OpacusTraining.customise`).

Two designs, the games of :mod:`dplens.auditing.canaries` on the real training:

- :func:`one_run_opacus_audit` — one training with m canaries, each included independently with probability ½
  before the run (Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023), analysed by
  :func:`dplens.auditing.scores.audit_scores` (``one_run=True``):

  * white-box **Dirac gradient canaries** (Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski, Carlini, Terzis, USENIX
    Security 2023): canary j is a per-sample gradient of norm C on its own coordinate j of a **canary block** — an
    extra ``Linear(1, m)`` weight that the forward pass never uses, so no record of the data touches it. At every
    step each included canary is sampled with the training's rate q (Poisson, like a record) and its row is
    appended to Opacus's per-sample gradients (``p.grad_sample``: C·e_j on the block, zeros on the model) of the
    sampled batch, before ``DPOptimizer.step`` clips, sums and adds noise. The block is its own SGD parameter group
    (learning rate 1, no momentum, no weight decay), so its update is exactly minus the privatised gradient, and it
    is reset to zero after each step (invisible to the model: the forward pass never reads it). The canary
    coordinate of the update, times −B/C (B: Opacus's ``expected_batch_size`` under ``loss_reduction="mean"``), is
    x_t = b_t·(clip factor) + N(0, σ²), b_t ~ Bernoulli(q) if the canary is in, 0 if out — the Poisson-subsampled
    Gaussian the accountant bounds — and the score is its exact log-likelihood ratio Σ_t log((1 − q) + q·exp((x_t −
    ½)/σ²)) with the training's *stated* σ and q. (Opacus's clip factor min(1, C/(‖g‖ + 10⁻⁶)) scales a norm-C
    canary by 1 − 10⁻⁶/C: negligible.) A larger ``gradient_norm`` (a multiple of C) gives a canary a correct training
    clips back to C — one that catches skipped clipping.
  * black-box **input canaries** (:class:`~dplens.auditing.canaries.InputCanary`): mislabelled copies of data
    records or out-of-distribution inputs, appended to the data set and sampled like any record, scored by minus the
    final model's loss (or the gradient alignment, white-box final model).

- :func:`multi_run_opacus_audit` — the distinguishing game: N trainings with one canary in and N without, each
  training's score counted on a threshold grid fixed from independent pilot trainings
  (:func:`dplens.auditing.games.audit`; run in chunks by :func:`dplens.auditing.runner.run_chunks`: process pool,
  Dask, checkpoints). Every training seeds torch (model initialisation, Opacus's sampler and noise generators) from
  the seed its chunk draws, and runs with one torch thread and deterministic algorithms, so the result is a function
  of ``seed`` alone: bit-identical on 1 or 2 workers, and a killed run resumes from its checkpoint.

Scores (:class:`OpacusScore`): the exact likelihood ratio (gradient canaries), minus the loss (input canaries,
black-box), the gradient alignment ⟨clip_C ∇ℓ(θ_0; canary), θ_0 − θ_T⟩ (input canaries, white-box final model;
Nasr et al. 2021's "gradient" adversary), and a likelihood ratio against reference runs (LiRA, Carlini, Chien, Nasr,
Song, Terzis, Tramèr, S&P 2022: Gaussians fitted to minus the loss of independent reference trainings with the
canary in and out, fixed before any counted training).

Every result is an existing result type (:class:`~dplens.auditing.scores.OneRunAuditResult`,
:class:`~dplens.auditing.games.AuditResult`), so ``dplens report --audit RESULT.json`` renders it; the claim defaults
to dplens's accountant ε for the training's σ, q and steps (add/remove Poisson-subsampled Gaussian), recorded beside
the result (``claim_source``; a one-run result's ``game["accounting"]``).

Validity: inclusion bits, canaries and training seeds come from separate seed streams fixed before the run; the
scores are fixed functions of the observation (reference fits use their own trainings, never counted ones).

torch and opacus are imported inside the functions that train: without them, a one-line ``ImportError`` names the
extra (``pip install "dplens[torch]"``).
"""

from __future__ import annotations

import contextlib
import enum
import math
import re
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dplens.auditing import canaries as cn
from dplens.auditing import games
from dplens.auditing import scores as sc
from dplens.auditing.canaries import (
    NASR_2023,
    CanaryKind,
    InputCanary,
    _check_delta,
    _function,
    _name,
    _option,
    _positive,
    _step_event,
    _step_llr,
)
from dplens.auditing.host import host_array, host_value
from dplens.auditing.runner import check_seed
from dplens.mechanisms.base import NeighbouringPair, check_count, check_rng

__all__ = [
    "OpacusCanaryGame",
    "OpacusScore",
    "OpacusTraining",
    "TrainingRun",
    "check_device_available",
    "multi_run_opacus_audit",
    "one_run_opacus_audit",
    "require_torch",
]

EXTRA_MESSAGE = 'Opacus audits need torch and opacus: pip install "dplens[torch]"'
STEINKE_2023 = "Steinke, Nasr, Jagielski 2023 (NeurIPS; arXiv:2305.08846)"
CARLINI_2022 = "Carlini, Chien, Nasr, Song, Terzis, Tramer 2022 (IEEE S&P; LiRA)"
_RESERVED = ("module", "optimizer", "data_loader", "noise_multiplier", "max_grad_norm", "poisson_sampling")
#: The loaders a training can run (:attr:`OpacusTraining.sampling`).
_SAMPLINGS = ("poisson", "shuffle", "cyclic")


def require_torch() -> tuple[Any, Any]:
    """(torch, opacus), or a one-line ``ImportError`` naming the extra."""
    try:
        import opacus
        import torch
    except ImportError:
        raise ImportError(EXTRA_MESSAGE) from None
    return torch, opacus


def check_device_available(device: str) -> None:
    """A one-line ``ValueError`` when torch cannot run on ``device`` here (no CUDA device, a CPU-only build, ...)."""
    torch, _ = require_torch()
    try:
        where = torch.device(device)
    except (RuntimeError, ValueError) as err:
        raise ValueError(f"device {device!r} is not a torch device: {str(err).splitlines()[0]}") from None
    build = f"torch {torch.__version__}, CUDA build {torch.version.cuda}"
    if where.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"device {device!r}: torch sees no CUDA device here ({build})")
        if where.index is not None and where.index >= count:
            raise ValueError(f"device {device!r}: torch sees {count} CUDA device(s) here ({build})")
    elif where.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device!r}: the MPS backend is not available here ({build})")
    elif where.type not in ("cpu", "cuda", "mps") and not hasattr(torch, where.type):
        raise ValueError(f"device {device!r}: torch has no {where.type} backend here ({build})")


class OpacusScore(enum.Enum):
    """How a canary is scored (higher ⇒ "in").

    LIKELIHOOD_RATIO: gradient canaries, every step observed, the exact per-step log-likelihood ratio.
    LOSS: input canaries, minus the final model's loss on the canary (black-box).
    GRADIENT_ALIGNMENT: input canaries, ⟨clip_C ∇ℓ(θ_0; canary), θ_0 − θ_T⟩ (white-box, final model).
    REFERENCE_LIKELIHOOD_RATIO: input canaries, multi-run only: log N(s; in-fit) − log N(s; out-fit) of s = minus the
    loss, the Gaussians fitted on independent reference trainings (LiRA).
    """

    LIKELIHOOD_RATIO = "likelihood_ratio"
    LOSS = "loss"
    GRADIENT_ALIGNMENT = "gradient_alignment"
    REFERENCE_LIKELIHOOD_RATIO = "reference_likelihood_ratio"


# --------------------------------------------------------------------------------------------
# The training
# --------------------------------------------------------------------------------------------


def _check_data(data: Any) -> Any:
    if isinstance(data, tuple):
        if len(data) != 2:
            raise ValueError(f"data must be (features, labels) or a torch Dataset; got a tuple of {len(data)} items")
        x, y = host_array(data[0], name="data: features"), host_array(data[1], name="data: labels")
        if x.ndim < 2 or y.ndim != 1 or x.shape[0] != y.shape[0] or x.shape[0] < 1:
            raise ValueError(
                f"data: features must be (n, ...) and labels (n,) with n >= 1; got shapes {x.shape} and {y.shape}"
            )
        if not (np.issubdtype(x.dtype, np.number) and np.all(np.isfinite(x))):
            raise ValueError("data: features must be finite numbers")
        if not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"data: labels must be integers (class indices); got dtype {y.dtype}")
        return (np.ascontiguousarray(x, dtype=np.float32), np.ascontiguousarray(y, dtype=np.int64))
    if hasattr(data, "__getitem__") and hasattr(data, "__len__"):
        if len(data) < 1:
            raise ValueError("data: the data set is empty")
        return data
    raise ValueError(f"data must be (features, labels) arrays or a torch Dataset; got {type(data).__name__}")


_DEVICE = re.compile(r"^[a-z][a-z0-9_]*(:\d+)?$")


def _check_device(device: Any) -> str:
    """``device`` as torch spells it (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``): a string or a
    ``torch.device`` (read without importing torch)."""
    if type(device).__module__ == "torch" and type(device).__name__ == "device":
        device = str(device)
    if not isinstance(device, str) or not _DEVICE.match(device):
        raise ValueError(f"device must be a torch device such as 'cpu', 'cuda' or 'cuda:1'; got {device!r}")
    return device


def _check_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


@dataclass(frozen=True, kw_only=True, eq=False)
class OpacusTraining:
    """One Opacus DP-SGD training, as the user would run it.

    Args:
        model: ``model() -> torch.nn.Module`` (a factory: every training builds a fresh model after seeding torch),
            or ``"module:name"`` (imported where it runs: needed for workers and Dask).
        data: ``(features, labels)`` arrays (labels: class indices) or a torch ``Dataset`` of ``(x, y)`` pairs.
        noise_multiplier: σ, Opacus's ``noise_multiplier`` (noise std σ·C on the sum of clipped gradients).
        max_grad_norm: C, Opacus's ``max_grad_norm`` (flat clipping).
        batch_size: the expected batch size: the data loader has L = max(1, round(n/batch_size)) batches, and
            Opacus's Poisson sampling rate is q = 1/L for every training (with or without canaries).
        steps: optimiser steps (the loader is re-iterated as needed; Opacus's epoch is L steps).
        learning_rate: of the default optimiser ``torch.optim.SGD(model.parameters(), lr=learning_rate)``.
        optimizer: ``optimizer(model) -> torch.optim.Optimizer`` over (some of) the model's parameters, or
            ``"module:name"``; default plain SGD at ``learning_rate``. White-box gradient canaries need SGD.
        loss: ``loss(outputs, targets) -> mean loss``; default cross-entropy (``torch.nn.functional.cross_entropy``).
        make_private: further keyword arguments of ``PrivacyEngine.make_private`` (``clipping``,
            ``grad_sample_mode``, ``loss_reduction``, ...; not those set above, and ``poisson_sampling`` is always
            True).
        customise: ``customise(model, optimizer, data_loader)`` — the user's own code around ``make_private``, run
            once after it on the objects it returned; it may return a function called after every optimiser step.
            What it does is part of what is audited (the planted bugs of the tests are written this way).
        sampling: the loader the training runs — ``"poisson"`` (default: Opacus's ``DPDataLoader``, q = 1/L),
            ``"shuffle"`` (``DataLoader(shuffle=True)``: a new permutation each epoch cut into batches of
            ``batch_size``) or ``"cyclic"`` (``shuffle=False``), both with ``make_private(poisson_sampling=False)``.
            The canaries of an audit then ride that loader: each canary is a record slot of the data set, batched by
            the loader like any record, and a canary left out is a null record in its slot (zero-out adjacency, the
            relation fixed-size batches are accounted under); the claim is dplens's ε for that sampler.
        device: where the training runs and the canaries are scored — ``"cpu"`` (default), ``"cuda"``,
            ``"cuda:1"``, ``"mps"`` or a ``torch.device``. The model is built on the CPU after seeding torch (the same
            initial weights on every device) and moved once; ``(features, labels)`` data are moved to the device once
            per process and batches are gathered there (a torch ``Dataset`` stays where it is: each batch is moved);
            Opacus's noise is drawn by a generator on the device. GPU kernels are not bit-reproducible, so a GPU
            audit does not repeat its bits from its seed — its bound is valid all the same: every training is an
            independent trial (one-run: the inclusion bits are fixed before it), whatever the kernels do.
    """

    model: Callable[[], Any] | str
    data: Any
    noise_multiplier: float
    max_grad_norm: float
    batch_size: int
    steps: int
    learning_rate: float = 0.1
    optimizer: Callable[[Any], Any] | str | None = None
    loss: Callable[[Any, Any], Any] | str | None = None
    make_private: Mapping[str, Any] = field(default_factory=dict)
    customise: Callable[..., Any] | str | None = None
    device: Any = "cpu"
    sampling: str = "poisson"

    def __post_init__(self) -> None:
        _function(self.model, "model")
        object.__setattr__(self, "device", _check_device(self.device))
        if self.sampling not in _SAMPLINGS:
            raise ValueError(f"sampling must be one of {list(_SAMPLINGS)}; got {self.sampling!r}")
        for role in ("optimizer", "loss", "customise"):
            if getattr(self, role) is not None:
                _function(getattr(self, role), role)
        object.__setattr__(self, "data", _check_data(self.data))
        object.__setattr__(self, "noise_multiplier", _positive("noise_multiplier", self.noise_multiplier))
        object.__setattr__(self, "max_grad_norm", _positive("max_grad_norm", self.max_grad_norm))
        object.__setattr__(self, "learning_rate", _positive("learning_rate", self.learning_rate))
        object.__setattr__(self, "batch_size", _check_int("batch_size", self.batch_size))
        object.__setattr__(self, "steps", check_count(self.steps, name="steps"))
        if not isinstance(self.make_private, Mapping):
            raise ValueError(f"make_private must be a mapping of keyword arguments; got {self.make_private!r}")
        reserved = sorted(set(self.make_private) & set(_RESERVED))
        if reserved:
            raise ValueError(f"make_private: {reserved} are set by the training itself; got {dict(self.make_private)}")
        object.__setattr__(self, "make_private", dict(self.make_private))

    # ---- numbers

    @property
    def dataset_size(self) -> int:
        return len(self.data[0]) if isinstance(self.data, tuple) else len(self.data)

    @property
    def poisson(self) -> bool:
        return self.sampling == "poisson"

    def loader_batches(self, records: int) -> int:
        """Batches per epoch over ``records`` records: Poisson L = max(1, round(n/B)) (Opacus's q = 1/L); a shuffled
        or sequential loader ⌈n/B⌉ (the last batch smaller)."""
        if self.poisson:
            return max(1, round(records / self.batch_size))
        return -(-records // self.batch_size)

    @property
    def batches(self) -> int:
        """L: batches per epoch of the loader given to Opacus (Poisson: its sampling rate is 1/L)."""
        return self.loader_batches(self.dataset_size)

    @property
    def sampling_rate(self) -> float:
        return 1.0 / self.batches

    def run_event(self, slots: int = 0) -> Any:
        """The training's privacy event with ``slots`` canary slots in its data set (shuffled or sequential
        loaders): Poisson sampling is the add/remove Poisson-subsampled Gaussian (σ, q) composed ``steps`` times;
        the others a :class:`~dplens.accountant.dp_sgd.DpSgdRun` of their sampler (zero-out)."""
        if self.poisson:
            return _step_event(self.noise_multiplier, self.sampling_rate, self.steps)
        from dplens.accountant.dp_sgd import DpSgdRun

        records = self.dataset_size + slots
        return DpSgdRun(
            noise_multiplier=self.noise_multiplier,
            dataset_size=records,
            batch_size=self.batch_size,
            epochs=self.steps / self.loader_batches(records),
            sampling=self.sampling,
        )

    @property
    def event(self) -> Any:
        """The training's privacy event (see :meth:`run_event`)."""
        return self.run_event()

    def accounting(self, delta: float, *, slots: int = 0) -> dict[str, Any]:
        """dplens's ε (an upper bound) for the training's σ, sampler and steps at ``delta``, with its method (and,
        for a sampler whose accounted pair is not attained, the best known lower bound beside it)."""
        from dplens.accountant.compose import Accountant

        event = self.run_event(slots)
        result = Accountant().compose(event).epsilon_result(delta)
        return {
            "epsilon": result.epsilon,
            "epsilon_lower": result.epsilon_lower,
            "delta": delta,
            "method": result.method.value,
            "details": result.details,
            "noise_multiplier": self.noise_multiplier,
            "sampling": self.sampling,
            "neighboring": "add_remove" if self.poisson else event.neighboring.value,
            "sampling_rate": self.sampling_rate,
            "steps": self.steps,
            "is_upper_bound": True,
        }

    def describe(self) -> str:
        extra = ", ".join(f"{k}={v!r}" for k, v in sorted(self.make_private.items()))
        return (
            f"Opacus DP-SGD training of {_name(self.model)} ({self.dataset_size} records; noise multiplier "
            f"{self.noise_multiplier:g}, clip norm {self.max_grad_norm:g}, sampling rate 1/{self.batches} "
            f"(expected batch {self.dataset_size / self.batches:.4g}), {self.steps} steps, optimiser "
            f"{_name(self.optimizer) if self.optimizer is not None else f'SGD(lr={self.learning_rate:g})'}"
            f"{', customised by ' + _name(self.customise) if self.customise is not None else ''}"
            f"{', make_private(' + extra + ')' if extra else ''}"
            f"{'' if self.poisson else ', ' + self.sampling + ' loader (poisson_sampling=False)'}"
            f"{', on ' + self.device if self.device != 'cpu' else ''})"
        )

    def data_digest(self) -> str:
        """What identifies the data in checkpoint fingerprints: a SHA-256 of the arrays, or the Dataset's type and
        length (a torch Dataset is not hashed)."""
        if isinstance(self.data, tuple):
            return f"sha256:{_digest(self.data[0])}/{_digest(self.data[1])}"
        return f"{type(self.data).__module__}.{type(self.data).__qualname__}[{len(self.data)}]"

    def __repr__(self) -> str:  # stable across processes (checkpoint fingerprints): no addresses
        return f"OpacusTraining({self.describe()}; data {self.data_digest()})"

    # ---- records

    def _examples(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(self.data, tuple):
            return self.data[0][index], self.data[1][index]
        xs, ys = [], []
        for i in index:
            x, y = self.data[int(i)]
            xs.append(np.asarray(host_value(x), dtype=np.float32))
            ys.append(int(np.asarray(host_value(y))))
        return np.stack(xs), np.asarray(ys, dtype=np.int64)

    def _num_classes(self) -> int:
        if isinstance(self.data, tuple):
            return int(self.data[1].max()) + 1
        return int(max(int(np.asarray(host_value(self.data[i][1]))) for i in range(len(self.data)))) + 1

    def input_canaries(self, m: int, kind: InputCanary, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """m input canaries: copies of random data records with a different random label (MISLABELLED), or Gaussian
        inputs with the data's mean squared norm and random labels (OUT_OF_DISTRIBUTION)."""
        classes = self._num_classes()
        if classes < 2:
            raise ValueError("data: input canaries need labels of at least two classes")
        index = rng.integers(0, self.dataset_size, m)
        x, y = self._examples(index)
        if kind is InputCanary.MISLABELLED:
            return x.copy(), (y + rng.integers(1, classes, m)) % classes
        rms = float(np.sqrt(np.mean(np.sum(x.reshape(m, -1).astype(float) ** 2, axis=1))))
        noise = rng.standard_normal(x.shape)
        noise *= rms / np.sqrt(max(1, noise[0].size))
        return noise.astype(np.float32), rng.integers(0, classes, m).astype(np.int64)


@dataclass(frozen=True, slots=True)
class TrainingRun:
    """What one training gives the scores: the final model, the initial parameters, and the white-box canary
    log-likelihood ratios (gradient canaries; None otherwise)."""

    model: Any
    initial: Any
    gradient_llr: np.ndarray | None
    expected_batch_size: float


def _digest(values: np.ndarray) -> str:
    import hashlib

    array = np.ascontiguousarray(values)
    return hashlib.sha256(str(array.dtype).encode() + str(array.shape).encode() + array.tobytes()).hexdigest()[:12]


@contextlib.contextmanager
def _deterministic_torch(torch: Any) -> Iterator[None]:
    """One torch thread and deterministic algorithms while a training runs (restored after): the same numbers in
    the main process and in any worker."""
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True, warn_only=True)  # an op without a deterministic kernel warns
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.set_num_threads(threads)


def _fixed_length_sampler(torch: Any, n: int, length: int) -> Any:
    """A batch sampler of exactly ``length`` batches over ``n`` records: Opacus sets q = 1/len(loader)."""

    class _Batches(torch.utils.data.Sampler):
        def __init__(self) -> None:
            self.bounds = np.linspace(0, n, length + 1).round().astype(int)

        def __len__(self) -> int:
            return length

        def __iter__(self) -> Iterator[list[int]]:
            for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True):
                yield list(range(a, b))

    return _Batches()


# (features, labels) of each training on each device, moved there once per process (a training is hashed by identity)
_ON_DEVICE: weakref.WeakKeyDictionary[OpacusTraining, dict[str, tuple[Any, Any]]] = weakref.WeakKeyDictionary()


def _device_tensors(torch: Any, training: OpacusTraining) -> tuple[Any, Any]:
    cached = _ON_DEVICE.setdefault(training, {})
    if training.device not in cached:
        x, y = training.data
        cached[training.device] = (torch.from_numpy(x).to(training.device), torch.from_numpy(y).to(training.device))
    return cached[training.device]


class _Rows:
    """Rows of (features, labels) tensors; a batch is gathered in one indexing operation (``__getitems__``) on the
    tensors' device, rather than one per record as ``TensorDataset`` and the default collate do."""

    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = x, y
        self.last: list[int] = []  # the indices of the last batch gathered (the canary slots it holds)

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        return self.x[index], self.y[index]

    def __getitems__(self, indices: list[int]) -> list[tuple[Any, Any]]:
        import torch

        self.last = list(indices)
        index = torch.as_tensor(indices, dtype=torch.long, device=self.x.device)
        return [(self.x[index], self.y[index])]


def _one_batch(batch: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """The collate function of :class:`_Rows`: its ``__getitems__`` returns the whole batch as one item."""
    return batch[0]


def _dataset(torch: Any, training: OpacusTraining, extra: tuple[np.ndarray, np.ndarray] | None) -> tuple[Any, Any]:
    """The data set of one training (``extra`` records appended) and its collate function (None: the default)."""
    data = training.data
    if isinstance(data, tuple):
        x, y = _device_tensors(torch, training)
        if extra is not None and len(extra[0]):
            device = training.device
            x = torch.cat([x, torch.from_numpy(extra[0]).to(device)])
            y = torch.cat([y, torch.from_numpy(extra[1]).to(device)])
        return _Rows(x, y), _one_batch
    if extra is None or not len(extra[0]):
        return data, None
    more = torch.utils.data.TensorDataset(torch.from_numpy(extra[0]), torch.from_numpy(extra[1]))
    return torch.utils.data.ConcatDataset([data, more]), None


def _is_plain_sgd(torch: Any, optimizer: Any) -> bool:
    return type(optimizer) is torch.optim.SGD


def _build_model(torch: Any, training: OpacusTraining, m: int, device: Any) -> tuple[Any, Any, Any, list, Any]:
    """(net, model, canary block, initial parameters, optimizer): the user's model built on the CPU right after
    ``torch.manual_seed`` (the same weights on every device), wrapped with an ``m``-row canary block the forward pass
    never uses when ``m`` > 0, moved to ``device`` once, and its optimiser (the block in its own plain-SGD group)."""
    net = _function(training.model, "model")()
    if not isinstance(net, torch.nn.Module):
        raise ValueError(f"model: the factory must return a torch.nn.Module; got {type(net).__name__}")
    model, block = net, None
    if m:
        model = torch.nn.Module()
        model.net = net
        model.canary_block = torch.nn.Linear(1, m, bias=False)  # never used by the forward pass
        with torch.no_grad():
            model.canary_block.weight.zero_()
        block = model.canary_block.weight
        model.forward = net.__call__  # through the module's hooks: a model that is one layer gets its per-sample grads
    model.to(device)
    initial = [p.detach().clone() for p in net.parameters()]
    if training.optimizer is None:
        optimizer = torch.optim.SGD(net.parameters(), lr=training.learning_rate)
    else:
        optimizer = _function(training.optimizer, "optimizer")(net)
    if m:
        if not _is_plain_sgd(torch, optimizer):
            raise ValueError(
                f"optimizer: white-box gradient canaries need torch.optim.SGD (the canary block's update must be "
                f"the privatised gradient); got {type(optimizer).__name__}"
            )
        optimizer.add_param_group(
            {"params": [block], "lr": 1.0, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0}
        )
    return net, model, block, initial, optimizer


def _make_private(
    torch: Any, opacus: Any, training: OpacusTraining, model: Any, optimizer: Any, dataset: Any, seeds: tuple[int, int]
) -> tuple[Any, Any, Any]:
    """Opacus's ``make_private`` on the training's loader: Poisson sampling on a loader of exactly L batches (so
    q = 1/L), or the user's shuffled or sequential ``DataLoader`` of batches of B with ``poisson_sampling=False``;
    the sampler seeded on the CPU, the noise drawn by a generator on the training's device."""
    loader_seed, noise_seed = seeds
    dataset, collate = dataset
    generator = torch.Generator().manual_seed(loader_seed)
    if training.poisson:
        loader = torch.utils.data.DataLoader(
            dataset,
            batch_sampler=_fixed_length_sampler(torch, len(dataset), training.batches),
            generator=generator,
            collate_fn=collate,
        )
    else:
        shuffle = training.sampling == "shuffle"
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=training.batch_size, shuffle=shuffle, generator=generator, collate_fn=collate
        )
    engine = opacus.PrivacyEngine(accountant="rdp")
    return engine.make_private(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        noise_multiplier=training.noise_multiplier,
        max_grad_norm=training.max_grad_norm,
        poisson_sampling=training.poisson,
        noise_generator=torch.Generator(device=torch.device(training.device)).manual_seed(noise_seed),
        **training.make_private,
    )


@dataclass(frozen=True, slots=True)
class _Canaries:
    """The white-box gradient canaries of one training: the block, the included ones, their sampler, their norm."""

    block: Any
    chosen: np.ndarray
    rng: np.random.Generator
    norm: float


@dataclass(frozen=True, slots=True)
class _Slots:
    """Canaries that ride the training's own loader (shuffled or sequential): record slots from index ``start`` of
    the data set. A gradient slot's per-sample gradient is replaced by norm·C·e_j on the canary block (included) or
    by zeros (a null record: zero-out); an input slot holds its canary record, zeroed when it is left out."""

    start: int
    included: np.ndarray
    block: Any = None  # None: input canaries
    norm: float = 1.0
    opposite: bool = False  # every other record's gradient −norm·C on the canary coordinate (one gradient canary)


def _train(
    torch: Any,
    training: OpacusTraining,
    private: tuple[Any, Any, Any],
    canaries: _Canaries | None,
    slots: _Slots | None = None,
):
    """The steps of one private training; the canaries' summed log-likelihood ratios (None without)."""
    private_model, private_optimizer, private_loader = private
    after_step = None
    if training.customise is not None:
        after_step = _function(training.customise, "customise")(private_model, private_optimizer, private_loader)
    loss_fn = torch.nn.functional.cross_entropy if training.loss is None else _function(training.loss, "loss")
    q, sigma, clip = training.sampling_rate, training.noise_multiplier, training.max_grad_norm
    device = torch.device(training.device)
    block = canaries.block if canaries is not None else (slots.block if slots is not None else None)
    llr = None if block is None else np.zeros(block.shape[0])
    step = 0
    opposite = slots is not None and slots.opposite
    while step < training.steps:
        epoch = _EpochScore(len(private_loader), sigma) if slots is not None and slots.block is not None else None
        if opposite:
            epoch = _OppositeScore(len(private_loader), sigma)
        for x, y in private_loader:
            if step >= training.steps:
                break
            private_optimizer.zero_grad()
            x, y = x.to(device), y.to(device)  # no-ops for the data moved once; a torch Dataset's batch moves here
            loss_fn(private_model(x), y).backward()
            in_batch = None
            if canaries is not None:
                sampled = canaries.chosen[canaries.rng.random(canaries.chosen.size) < q]
                _insert_canaries(torch, private_optimizer, canaries.block, sampled, canaries.norm * clip)
            if slots is not None:
                in_batch = _overwrite_slots(torch, private_optimizer, slots, private_loader.dataset.last, clip)
            private_optimizer.step()
            if block is not None:
                scale = private_optimizer.expected_batch_size if private_optimizer.loss_reduction == "mean" else 1
                with torch.no_grad():  # the canary coordinate x_t in units of C, then the block back to zero
                    observed = -block.detach()[:, 0].cpu().double().numpy() * (scale / clip)
                    block.zero_()
                if epoch is None:
                    llr += _step_llr(observed, sigma, q)
                elif opposite:
                    epoch.add(float(observed[0]), len(private_loader.dataset.last))
                elif training.sampling == "cyclic":  # a sequential loader: each slot's step is known
                    llr[in_batch] += (observed[in_batch] - 0.5) / sigma**2
                else:
                    epoch.add(observed)
            if after_step is not None:
                after_step()
            step += 1
        if epoch is not None and (opposite or training.sampling == "shuffle"):
            llr += epoch.log_ratio()
    return llr


def _opposite_rows(torch: Any, optimizer: Any, slots: _Slots, positions: np.ndarray, clip: float) -> None:
    """The rows of the batch's other records: −norm·C on the canary coordinate, zeros on the model."""
    at = torch.from_numpy(positions)
    for p in optimizer.params:
        current = _rows_cleared(torch, p, at)
        if p is slots.block:
            current[at.to(current.device), 0, 0] = -slots.norm * clip
        p.grad_sample = current


def _rows_cleared(torch: Any, p: Any, at: Any) -> Any:
    """A copy of the parameter's per-sample gradients (Opacus may hold them as a list) with the rows ``at`` zeroed."""
    current = p.grad_sample
    if isinstance(current, list):
        current = torch.cat(current, dim=0)
    current = current.clone()
    current[at.to(current.device)] = 0
    return current


class _OppositeScore:
    """The exact log-likelihood ratio, over a shuffled loader's epochs, of the canary in (+C) against a null record
    (0) when every other record's gradient is −C on its coordinate (Chua et al., ICML 2024): centred by the batch's
    size, the step holding the slot reads 2 (in) or 1 (out) and the others 0, at a uniform step of the epoch, so per
    epoch the ratio is Σ_s e^{(2y_s − 2)/σ²} / Σ_s e^{(y_s − ½)/σ²} (with the weight 1 − s/t of a partial epoch
    where the slot may not be)."""

    def __init__(self, steps_per_epoch: int, sigma: float) -> None:
        self.t, self.sigma, self.steps = steps_per_epoch, sigma, 0
        self.numerator = self.denominator = None

    def add(self, observed: float, rows: int) -> None:
        y = observed + rows
        top, bottom = (2.0 * y - 2.0) / self.sigma**2, (y - 0.5) / self.sigma**2
        self.numerator = top if self.numerator is None else np.logaddexp(self.numerator, top)
        self.denominator = bottom if self.denominator is None else np.logaddexp(self.denominator, bottom)
        self.steps += 1

    def log_ratio(self) -> float:
        if self.numerator is None:
            return 0.0
        if self.steps >= self.t:
            return float(self.numerator - self.denominator)
        rest = math.log1p(-self.steps / self.t) + math.log(self.t)
        return float(np.logaddexp(rest, self.numerator) - np.logaddexp(rest, self.denominator))


class _EpochScore:
    """The log-likelihood ratio of a slot over one epoch of a shuffled loader: it sits in one of the epoch's t steps,
    uniformly (and, in a partial last epoch of s < t steps, in none of them with probability 1 − s/t), so the ratio
    is log((1 − s/t) + (1/t)·Σ_steps exp((x_t − ½)/σ²)) — the random-allocation pair's (Feldman & Shenfeld 2025)."""

    def __init__(self, steps_per_epoch: int, sigma: float) -> None:
        self.t, self.sigma, self.steps, self.total = steps_per_epoch, sigma, 0, None

    def add(self, observed: np.ndarray) -> None:
        terms = (observed - 0.5) / self.sigma**2
        self.total = terms if self.total is None else np.logaddexp(self.total, terms)
        self.steps += 1

    def log_ratio(self) -> np.ndarray | float:
        if self.total is None:
            return 0.0
        inside = self.total - math.log(self.t)
        if self.steps >= self.t:
            return inside
        return np.logaddexp(math.log1p(-self.steps / self.t), inside)


def _overwrite_slots(torch: Any, optimizer: Any, slots: _Slots, indices: list[int], clip: float) -> np.ndarray:
    """The canary slots of this batch get their per-sample gradients (see :class:`_Slots`); returns their canary
    indices."""
    index = np.asarray(indices, dtype=np.int64)
    positions = np.flatnonzero(index >= slots.start)
    ids = index[positions] - slots.start
    rows = index.size
    for p in optimizer.params:  # a parameter no record's gradient touched (the canary block) gets zero rows
        if p.grad_sample is None:
            p.grad_sample = torch.zeros((rows, *p.shape), dtype=p.dtype, device=p.device)
    if slots.opposite:  # Chua et al.'s construction: the other records' gradients are −C on the coordinate
        _opposite_rows(torch, optimizer, slots, np.flatnonzero(index < slots.start), clip)
    if positions.size == 0:
        return ids
    if slots.block is None:  # input canaries: the left-out ones are null records (zero gradient)
        positions, ids = positions[~slots.included[ids]], ids[~slots.included[ids]]
        if positions.size == 0:
            return index[np.flatnonzero(index >= slots.start)] - slots.start
    at = torch.from_numpy(positions)
    for p in optimizer.params:
        current = _rows_cleared(torch, p, at)
        if p is slots.block:
            on = ids[slots.included[ids]]
            where = torch.from_numpy(positions[slots.included[ids]]).to(p.device)
            current[where, torch.from_numpy(on).to(p.device), 0] = slots.norm * clip
        p.grad_sample = current
    return index[np.flatnonzero(index >= slots.start)] - slots.start


def run_training(
    training: OpacusTraining,
    *,
    seed: int,
    extra: tuple[np.ndarray, np.ndarray] | None = None,
    gradient_canaries: int = 0,
    included: np.ndarray | None = None,
    gradient_norm: float = 1.0,
    slot_records: tuple[np.ndarray, np.ndarray] | None = None,
    opposite: bool = False,
) -> TrainingRun:
    """One Opacus training with ``extra`` input records appended to the data and, if ``gradient_canaries`` > 0,
    that many Dirac gradient canaries (those with ``included`` True are inserted), all randomness from ``seed``, on
    the training's ``device``.

    On a shuffled or sequential loader the canaries ride it (:class:`_Slots`): the m gradient canaries, or the m
    input canaries ``slot_records``, are record slots of the data set, and those with ``included`` False are null
    records (zero-out); ``extra`` is then not used.

    Randomness: ``SeedSequence(seed)`` spawns the streams of the model's initialisation (``torch.manual_seed``),
    Opacus's Poisson sampler (the loader's ``torch.Generator``), Opacus's noise (``noise_generator``, on the device)
    and the gradient canaries' Poisson sampling (numpy), so equal seeds give equal trainings on the CPU (GPU kernels
    need not repeat their bits).
    """
    torch, opacus = require_torch()
    check_device_available(training.device)
    init_seed, loader_seed, noise_seed, canary_seed = (
        int(s.generate_state(1, np.uint64)[0] >> np.uint64(1)) for s in np.random.SeedSequence(seed).spawn(4)
    )
    m = int(gradient_canaries)
    with _deterministic_torch(torch), warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"(opacus|torch)(\.|$)")  # secure RNG off, empty batches, ...
        warnings.filterwarnings("ignore", message="Full backward hook is firing")  # inputs need no gradient
        torch.manual_seed(init_seed)
        net, model, block, initial, optimizer = _build_model(torch, training, m, torch.device(training.device))
        canaries = slots = None
        if training.poisson:
            dataset = _dataset(torch, training, extra)
            if m:
                chosen = np.flatnonzero(np.asarray(included, dtype=bool))
                canaries = _Canaries(block, chosen, np.random.default_rng(canary_seed), gradient_norm)
        else:
            dataset, slots = _slot_dataset(torch, training, m, block, included, gradient_norm, slot_records)
            if opposite:
                if m != 1 or training.sampling != "shuffle":
                    raise ValueError("others='opposite' needs one gradient canary on a shuffled loader")
                slots = _Slots(
                    start=slots.start, included=slots.included, block=block, norm=gradient_norm, opposite=True
                )
        private = _make_private(torch, opacus, training, model, optimizer, dataset, (loader_seed, noise_seed))
        llr = _train(torch, training, private, canaries, slots)
        private_model, private_optimizer, _ = private
        expected = float(private_optimizer.expected_batch_size)
        cleanup = getattr(private_model, "cleanup", None)
        if callable(cleanup):  # Opacus's hooks off: the scores' forward and backward passes are plain torch
            cleanup()
    return TrainingRun(model=net, initial=initial, gradient_llr=llr, expected_batch_size=expected)


def _slot_dataset(
    torch: Any,
    training: OpacusTraining,
    m: int,
    block: Any,
    included: np.ndarray | None,
    norm: float,
    records: tuple[np.ndarray, np.ndarray] | None,
) -> tuple[tuple[Any, Any], _Slots | None]:
    """The data set of a training on its own loader with its canary slots appended (gradient canaries: copies of
    the first record, whose gradients are replaced; input canaries: their records), and the slots."""
    if not m and records is None:
        return _dataset(torch, training, None), None
    if not isinstance(training.data, tuple):
        raise ValueError(
            "data: canaries that ride a shuffled or sequential loader need (features, labels) arrays (the loader's "
            "batches are read by index)"
        )
    if records is None:
        first = training._examples(np.zeros(m, dtype=np.int64))
        records = (np.ascontiguousarray(first[0]), np.ascontiguousarray(first[1]))
    count = len(records[0])
    chosen = np.ones(count, dtype=bool) if included is None else np.asarray(included, dtype=bool)
    slots = _Slots(start=training.dataset_size, included=chosen, block=block if m else None, norm=norm)
    return _dataset(torch, training, records), slots


def _insert_canaries(torch: Any, optimizer: Any, block: Any, sampled: np.ndarray, norm: float) -> None:
    """Append one per-sample gradient row per sampled canary: norm·e_j on the canary block, zeros elsewhere."""
    rows = 0
    for p in optimizer.params:
        if p is not block and isinstance(p.grad_sample, torch.Tensor):
            rows = p.grad_sample.shape[0]
            break
    k = int(sampled.size)
    for p in optimizer.params:
        current = p.grad_sample
        if isinstance(current, list):
            current = torch.cat(current, dim=0)
        if current is None:
            current = torch.zeros((rows, *p.shape), dtype=p.dtype, device=p.device)
        if k:
            extra = torch.zeros((k, *p.shape), dtype=p.dtype, device=p.device)
            if p is block:
                rows_k = torch.arange(k, device=p.device)
                extra[rows_k, torch.from_numpy(sampled).to(p.device), 0] = norm
            current = torch.cat([current, extra], dim=0)
        p.grad_sample = current


# --------------------------------------------------------------------------------------------
# Scores
# --------------------------------------------------------------------------------------------


def _losses(torch: Any, training: OpacusTraining, model: Any, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each record's loss under ``model``, computed on the training's device (one transfer in, one out)."""
    device = training.device
    with torch.no_grad():
        model.eval()
        out = model(torch.from_numpy(x).to(device))
        targets = torch.from_numpy(y).to(device)
        if training.loss is None:
            values = torch.nn.functional.cross_entropy(out, targets, reduction="none")
        else:
            loss = _function(training.loss, "loss")
            values = torch.stack([loss(out[i : i + 1], targets[i : i + 1]) for i in range(len(y))])
        model.train()
    return values.cpu().double().numpy().reshape(-1)


def _alignments(torch: Any, training: OpacusTraining, run: TrainingRun, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """⟨clip_C ∇ℓ(θ_0; canary), θ_0 − θ_T⟩ per canary (the gradient at the initial parameters)."""
    model = run.model
    params = [p for p in model.parameters()]
    final = [p.detach().clone() for p in params]
    movement = torch.cat([(a - b).reshape(-1) for a, b in zip(run.initial, final, strict=True)]).cpu().double()
    loss = torch.nn.functional.cross_entropy if training.loss is None else _function(training.loss, "loss")
    out = np.empty(len(y))
    inputs, targets = torch.from_numpy(x).to(training.device), torch.from_numpy(y).to(training.device)
    with torch.no_grad():
        for p, a in zip(params, run.initial, strict=True):
            p.copy_(a)
    try:
        for i in range(len(y)):
            model.zero_grad()
            loss(model(inputs[i : i + 1]), targets[i : i + 1]).backward()
            grad = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
            grad = grad * min(1.0, training.max_grad_norm / max(float(grad.norm()), 1e-12))
            out[i] = float(grad.cpu().double() @ movement)
    finally:
        with torch.no_grad():
            for p, b in zip(params, final, strict=True):
                p.copy_(b)
        model.zero_grad()
    return out


def _input_scores(training: OpacusTraining, run: TrainingRun, records: tuple, score: OpacusScore) -> np.ndarray:
    torch, _ = require_torch()
    with _deterministic_torch(torch):
        if score is OpacusScore.GRADIENT_ALIGNMENT:
            return _alignments(torch, training, run, *records)
        return -_losses(torch, training, run.model, *records)


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------


def _check_training(training: Any) -> OpacusTraining:
    if not isinstance(training, OpacusTraining):
        raise ValueError(f"training must be an OpacusTraining; got {training!r}")
    return training


def _resolve_score(canary: CanaryKind, score: Any, *, multi_run: bool) -> OpacusScore:
    if score is None:
        return OpacusScore.LIKELIHOOD_RATIO if canary is CanaryKind.GRADIENT else OpacusScore.LOSS
    score = _option(score, OpacusScore, "score")
    if canary is CanaryKind.GRADIENT:
        allowed = (OpacusScore.LIKELIHOOD_RATIO,)
    elif multi_run:
        allowed = (OpacusScore.LOSS, OpacusScore.GRADIENT_ALIGNMENT, OpacusScore.REFERENCE_LIKELIHOOD_RATIO)
    else:
        allowed = (OpacusScore.LOSS, OpacusScore.GRADIENT_ALIGNMENT)
    if score not in allowed:
        raise ValueError(
            f"score {score.value!r} does not apply to {canary.value} canaries"
            f"{' in the multi-run game' if multi_run else ' in one run'}; allowed: {[s.value for s in allowed]}"
        )
    return score


def _claim(
    training: OpacusTraining, claim: Any, delta: float, *, slots: int = 0
) -> tuple[float, str, dict[str, Any] | None]:
    """The claimed ε and where it comes from; the training's accounting when δ > 0 (recorded beside the result;
    ``slots``: the canary slots its data set holds on a shuffled or sequential loader)."""
    accounting = training.accounting(delta, slots=slots) if delta > 0 else None
    if claim is not None:
        claimed = sc._check_claim(claim)
        if accounting is None:
            return claimed, "given", None
        return claimed, f"given (the training's accountant: epsilon {accounting['epsilon']:.6g})", accounting
    if accounting is None:
        raise ValueError("delta must be > 0 to take the claim from the accountant (DP-SGD is not pure DP)")
    rate = f"sampling rate {training.sampling_rate:.6g}" if training.poisson else f"{training.sampling} sampling"
    source = (
        f"accountant ({accounting['method']}: {accounting['details']}; noise multiplier "
        f"{training.noise_multiplier:g}, {rate}, {training.steps} steps)"
    )
    return accounting["epsilon"], source, accounting


def _check_norm(value: Any) -> float:
    value = _positive("gradient_norm", value)
    if value < 1.0:
        raise ValueError(f"gradient_norm must be >= 1 (a multiple of the clip norm C); got {value!r}")
    return value


# --------------------------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------------------------


def _one_run_scores(
    training: OpacusTraining,
    canary: CanaryKind,
    input_canary: InputCanary,
    score: OpacusScore,
    norm: float,
    given: tuple[Any, Any] | None,
    included: np.ndarray,
    training_seed: int,
    canary_stream: np.random.SeedSequence,
) -> tuple[np.ndarray, str]:
    """The one training of a one-run audit and the canaries' scores from it, with the canaries in words."""
    m = included.size
    if canary is CanaryKind.GRADIENT:
        run = run_training(training, seed=training_seed, gradient_canaries=m, included=included, gradient_norm=norm)
        return run.gradient_llr, f"Dirac gradient canaries (norm {norm:g}·C on a canary block the data never touches)"
    records = given or training.input_canaries(m, input_canary, np.random.default_rng(canary_stream))
    if training.poisson:
        run = run_training(training, seed=training_seed, extra=(records[0][included], records[1][included]))
    else:  # the canaries ride the loader: slots, a left-out one a null record
        run = run_training(training, seed=training_seed, slot_records=records, included=included)
    what = "given input canaries" if given else f"{input_canary.value.replace('_', '-')} input canaries"
    return _input_scores(training, run, records, score), what


def one_run_opacus_audit(
    training: OpacusTraining,
    *,
    canaries: int = 1000,
    canary: CanaryKind | str = CanaryKind.GRADIENT,
    input_canary: InputCanary | str = InputCanary.MISLABELLED,
    score: OpacusScore | str | None = None,
    gradient_norm: float = 1.0,
    canary_records: tuple[Any, Any] | None = None,
    claim: float | None = None,
    delta: float = 1e-5,
    confidence: float = 0.95,
    seed: int = 0,
    rule: Any = None,
    correction: Any = None,
) -> sc.OneRunAuditResult:
    """One Opacus training with m canaries, each included independently with probability ½ before the run.

    Steinke, Nasr, Jagielski, NeurIPS 2023 (Theorem 3.1: the canaries' guesses give a valid lower bound on ε from a
    single training), with the white-box Dirac gradient canaries of Nasr et al. 2023 (Section 4, every update
    observed; scored by the exact per-step likelihood ratio) or black-box input canaries (minus the final loss).

    Args:
        training: the :class:`OpacusTraining`.
        canaries: m.
        canary: :class:`~dplens.auditing.canaries.CanaryKind` (GRADIENT: white-box; INPUT: records).
        input_canary: MISLABELLED or OUT_OF_DISTRIBUTION (input canaries).
        score: :class:`OpacusScore` (default: LIKELIHOOD_RATIO for gradient canaries, LOSS for input canaries).
        gradient_norm: a gradient canary's norm as a multiple of C (≥ 1; a correct training clips it to C).
        canary_records: the m input canaries as ``(features, labels)`` (default: drawn from the data).
        claim: the claimed ε (default: dplens's accountant ε of the training at ``delta``).
        delta: δ of the (ε, δ) statement under test.
        confidence: 1 − α.
        seed: root seed (inclusion bits, canaries and training each get their own stream).
        rule, correction: passed to the one-run analysis (:mod:`dplens.auditing.one_run`).

    Returns:
        A :class:`~dplens.auditing.scores.OneRunAuditResult`; ``game`` describes the training and the canaries and
        holds the training's ``accounting`` (dplens's ε for its σ, q and steps).
    """
    start = time.perf_counter()
    training = _check_training(training)
    m = check_count(canaries, name="canaries")
    canary = _option(canary, CanaryKind, "canary")
    input_canary = _option(input_canary, InputCanary, "input_canary")
    score = _resolve_score(canary, score, multi_run=False)
    norm = _check_norm(gradient_norm)
    seed = check_seed(seed)
    delta = _check_delta(delta)
    given = _check_records(canary_records, training, m)
    if given is not None and canary is CanaryKind.GRADIENT:
        raise ValueError("canary_records are input canaries: use canary='input'")
    claimed, source, accounting = _claim(training, claim, delta, slots=0 if training.poisson else m)
    require_torch()
    check_device_available(training.device)
    inclusion, canary_stream, training_stream = np.random.SeedSequence(seed).spawn(3)
    included = np.random.default_rng(inclusion).random(m) < 0.5
    training_seed = int(np.random.default_rng(training_stream).integers(0, 2**63 - 1))
    values, what = _one_run_scores(
        training, canary, input_canary, score, norm, given, included, training_seed, canary_stream
    )
    observed = "every step (white-box)" if canary is CanaryKind.GRADIENT else "the final model"
    game = {
        "game": "one_run",
        "framework": "opacus",
        "description": (
            f"{training.describe()}; {m} {what}, each included with probability 1/2; observed: {observed}; score: "
            f"{score.value.replace('_', ' ')}; training seed {training_seed}"
        ),
        "canary": canary.value,
        "score": score.value,
        "training": training.describe(),
        "seed": seed,
        "training_seed": training_seed,
        "reference": f"{STEINKE_2023}; {NASR_2023}",
        "noise_multiplier": training.noise_multiplier,
        "sampling_rate": training.sampling_rate,
        "steps": training.steps,
    }
    if canary is CanaryKind.GRADIENT:
        game["gradient_norm"] = norm
    else:
        game["input_canary"] = input_canary.value
    if accounting is not None:
        game["accounting"] = accounting
    options = dict(claim=claimed, delta=delta, confidence=confidence, rule=rule, correction=correction)
    return cn.one_run_game_audit(values, included, game, start=start, seed=seed, claim_source=source, **options)


# --------------------------------------------------------------------------------------------
# Many runs
# --------------------------------------------------------------------------------------------


def _gaussian_log_ratio(s: np.ndarray, fit: tuple[float, float, float, float]) -> np.ndarray:
    mu_in, sd_in, mu_out, sd_out = fit
    return -0.5 * ((s - mu_in) / sd_in) ** 2 - math.log(sd_in) + 0.5 * ((s - mu_out) / sd_out) ** 2 + math.log(sd_out)


@dataclass(frozen=True, kw_only=True, eq=False)
class OpacusCanaryGame:
    """One canary in or out of Opacus trainings, as a mechanism for :func:`dplens.auditing.games.audit`.

    ``sample(True, n, rng)`` runs n trainings with the canary and returns its n scores (``False``: without it); each
    training's seed is drawn from ``rng`` (the runner's chunk stream), so the scores are a function of the audit's
    seed whatever the worker.
    """

    training: OpacusTraining
    canary: CanaryKind
    score: OpacusScore
    input_canary: InputCanary = InputCanary.MISLABELLED
    gradient_norm: float = 1.0
    canary_seed: int = 0
    record: tuple[np.ndarray, np.ndarray] | None = None
    reference_fit: tuple[float, float, float, float] | None = None
    opposite: bool = False

    @property
    def event(self) -> Any:
        return self.training.run_event(0 if self.training.poisson else 1)

    def canary_record(self) -> tuple[np.ndarray, np.ndarray]:
        """The input canary: ``record`` if given, else one drawn from ``SeedSequence(canary_seed, spawn_key=(8,))``."""
        if self.record is not None:
            return self.record
        rng = np.random.default_rng(np.random.SeedSequence(self.canary_seed, spawn_key=(8,)))
        return self.training.input_canaries(1, self.input_canary, rng)

    def base_score(self, present: bool, seed: int) -> float:
        """The canary's score in one training (before any reference fit)."""
        if self.canary is CanaryKind.GRADIENT:
            run = run_training(
                self.training,
                seed=seed,
                gradient_canaries=1,
                included=np.array([present]),
                gradient_norm=self.gradient_norm,
                opposite=self.opposite,
            )
            return float(run.gradient_llr[0])
        record = self.canary_record()
        if self.training.poisson:
            run = run_training(self.training, seed=seed, extra=record if present else None)
        else:  # the canary rides the loader: a null record in its slot when it is out
            run = run_training(self.training, seed=seed, slot_records=record, included=np.array([present]))
        which = OpacusScore.GRADIENT_ALIGNMENT if self.score is OpacusScore.GRADIENT_ALIGNMENT else OpacusScore.LOSS
        return float(_input_scores(self.training, run, record, which)[0])

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        if not isinstance(data, bool | np.bool_):
            raise ValueError(f"data must be True (canary in) or False (canary out); got {data!r}")
        n, rng = check_count(n), check_rng(rng)
        out = np.empty(n)
        for j in range(n):
            out[j] = self.base_score(bool(data), int(rng.integers(0, 2**63 - 1)))
        if self.score is OpacusScore.REFERENCE_LIKELIHOOD_RATIO:
            if self.reference_fit is None:
                raise ValueError(
                    "score reference_likelihood_ratio needs reference_fit (fitted by multi_run_opacus_audit)"
                )
            out = _gaussian_log_ratio(out, self.reference_fit)
        return out

    def release(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        return self.sample(data, 1, rng)

    def output_size(self) -> int:
        return 1

    def worst_case_pair(self) -> NeighbouringPair:
        what = (
            f"a Dirac gradient canary (norm {self.gradient_norm:g}·C, its own coordinate)"
            if self.canary is CanaryKind.GRADIENT
            else f"one {self.input_canary.value.replace('_', '-')} input canary"
        )
        if self.training.poisson:
            description = f"{what} in the data set vs not (add/remove)"
        else:
            loader = self.training.sampling
            description = f"{what} in its slot of the data set vs a null record there (zero-out, {loader} loader)"
        return NeighbouringPair(data=True, neighbour=False, description=description)

    def __repr__(self) -> str:
        fit = ""
        if self.reference_fit is not None:
            fit = " (reference fit in: N({:.6g}, {:.6g}²), out: N({:.6g}, {:.6g}²))".format(*self.reference_fit)
        if self.canary is CanaryKind.GRADIENT:
            what = "Dirac gradient canary" + (" (every other record's gradient opposite)" if self.opposite else "")
        elif self.record is not None:
            what = f"given input canary (label {int(self.record[1][0])}, input sha256 {_digest(self.record[0])})"
        else:
            what = f"{self.input_canary.value.replace('_', '-')} input canary"
        return (
            f"{self.training.describe()}; one {what} canary; score: {self.score.value.replace('_', ' ')}{fit}; "
            f"canary seed {self.canary_seed}; data {self.training.data_digest()}"
        )


def _check_records(records: Any, training: OpacusTraining, m: int | None) -> tuple[np.ndarray, np.ndarray] | None:
    """User-given input canaries ``(features, labels)``: shaped like the data's records (``m`` of them if given)."""
    if records is None:
        return None
    if not isinstance(records, tuple) or len(records) != 2:
        raise ValueError(f"canary_records must be (features, labels) arrays; got {type(records).__name__}")
    x, y = np.asarray(records[0], dtype=np.float32), np.asarray(records[1])
    shape = training._examples(np.arange(1))[0].shape[1:]
    if x.shape[1:] != shape or y.shape != (x.shape[0],) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(
            f"canary_records: features must be (m, {', '.join(map(str, shape))}) and labels (m,) integers; got shapes "
            f"{x.shape} and {y.shape}"
        )
    if m is not None and x.shape[0] != m:
        raise ValueError(f"canary_records must hold {m} records; got {x.shape[0]}")
    if not np.all(np.isfinite(x)):
        raise ValueError("canary_records: features must be finite")
    return np.ascontiguousarray(x), np.ascontiguousarray(y, dtype=np.int64)


def _fit_reference(game: OpacusCanaryGame, trainings: int, seed: int) -> tuple[float, float, float, float]:
    """Gaussians of the base score (minus the loss) over independent reference trainings in and out (LiRA); their
    seeds come from ``SeedSequence(seed, spawn_key=(9,))``, a stream no counted or pilot training uses."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(9,)))
    fit = []
    for present in (True, False):
        values = np.array([game.base_score(present, int(rng.integers(0, 2**63 - 1))) for _ in range(trainings)])
        fit += [float(values.mean()), max(float(values.std(ddof=1)), 1e-12)]
    return (fit[0], fit[1], fit[2], fit[3])


def multi_run_opacus_audit(
    training: OpacusTraining,
    *,
    trials: int,
    canary: CanaryKind | str = CanaryKind.GRADIENT,
    input_canary: InputCanary | str = InputCanary.MISLABELLED,
    score: OpacusScore | str | None = None,
    gradient_norm: float = 1.0,
    reference_trainings: int = 16,
    canary_records: tuple[Any, Any] | None = None,
    claim: float | None = None,
    delta: float = 1e-5,
    confidence: float = 0.95,
    seed: int = 0,
    workers: int = 1,
    scheduler: Any = None,
    checkpoint: Any = None,
    progress: bool = False,
    pilot_trials: int | None = None,
    chunk_size: int | None = None,
    others: str = "data",
) -> games.AuditResult:
    """The distinguishing game on Opacus trainings: ``trials`` runs with one canary in and ``trials`` without it.

    Jagielski, Ullman, Oprea 2020 and Nasr et al. 2021/2023: each training's canary score is counted on a threshold
    grid fixed from independent pilot trainings, weighted Bonferroni and one-sided Clopper–Pearson
    (:func:`dplens.auditing.games.audit`, in chunks by :func:`dplens.auditing.runner.run_chunks`: a process pool, a
    Dask cluster, a resumable checkpoint; the result depends only on ``seed``).

    Args:
        training: the :class:`OpacusTraining` (its model, loss, optimizer and customise must be importable by
            workers: top-level functions or ``"module:name"``).
        trials: trainings per side that are counted.
        canary, input_canary, score, gradient_norm: the game (see :func:`one_run_opacus_audit`);
            ``score=REFERENCE_LIKELIHOOD_RATIO`` first runs ``reference_trainings`` trainings per side (never
            counted) to fit the Gaussians of LiRA.
        canary_records: the input canary as ``(features (1, ...), labels (1,))`` (default: drawn from the data,
            ``input_canary``). A canary of a class no record has, with an input the model maps to its biases (zeros
            for a linear first layer), is the input analogue of the Dirac coordinate: it is what catches a bias
            updated outside the private optimiser.
        claim: the claimed ε (default: dplens's accountant ε of the training at ``delta``).
        delta: δ of the (ε, δ) statement under test.
        confidence, seed, workers, scheduler, checkpoint, progress, pilot_trials, chunk_size: as
            :func:`dplens.auditing.games.audit`; their defaults, those of every training game:
            :func:`dplens.auditing.canaries.training_game_plan`.
        others: ``"data"`` (the records' own gradients) or ``"opposite"`` — a gradient canary on a shuffled loader
            with every other record's per-sample gradient replaced by −C on the canary's coordinate (zeros on the
            model), the construction of Chua et al. (ICML 2024) under which shuffled batches leak far more than
            Poisson sampling: the canary's batch then stands out from the others both with it and with the null
            record in its slot. A white-box test of the sampler and noise as Opacus runs them (the model does not
            train).

    Returns:
        An :class:`~dplens.auditing.games.AuditResult` (its ``mechanism`` describes the training and its
        ``claim_source`` the accounting).
    """
    training = _check_training(training)
    trials = check_count(trials, name="trials")
    canary = _option(canary, CanaryKind, "canary")
    input_canary = _option(input_canary, InputCanary, "input_canary")
    score = _resolve_score(canary, score, multi_run=True)
    norm = _check_norm(gradient_norm)
    reference_trainings = _check_int("reference_trainings", reference_trainings, 2)
    seed = check_seed(seed)
    delta = _check_delta(delta)
    record = _check_records(canary_records, training, 1)
    if record is not None and canary is CanaryKind.GRADIENT:
        raise ValueError("canary_records are input canaries: use canary='input'")
    claimed, source, _ = _claim(training, claim, delta, slots=0 if training.poisson else 1)
    require_torch()
    check_device_available(training.device)
    if others not in ("data", "opposite"):
        raise ValueError(f"others must be 'data' or 'opposite'; got {others!r}")
    opposite = others == "opposite"
    if opposite and (canary is not CanaryKind.GRADIENT or training.sampling != "shuffle"):
        raise ValueError("others='opposite' is a gradient canary's game on a shuffled loader (sampling='shuffle')")
    options = dict(
        training=training, canary=canary, score=score, input_canary=input_canary, gradient_norm=norm, opposite=opposite
    )
    game = OpacusCanaryGame(**options, canary_seed=seed, record=record)
    if score is OpacusScore.REFERENCE_LIKELIHOOD_RATIO:
        fit = _fit_reference(game, reference_trainings, seed)
        game = OpacusCanaryGame(**options, canary_seed=seed, record=record, reference_fit=fit)
    return cn.training_game_audit(
        game,
        score=games.BlackBoxScore(_identity, name=f"canary score per training: {score.value.replace('_', ' ')}"),
        trials=trials,
        delta=delta,
        claimed_epsilon=claimed,
        claim_source=source,
        plan=cn.training_game_plan(trials, pilot_trials=pilot_trials, chunk_size=chunk_size),
        confidence=confidence,
        seed=seed,
        workers=workers,
        scheduler=scheduler,
        checkpoint=checkpoint,
        progress=progress,
    )


def _identity(outputs: Any) -> np.ndarray:
    """The black-box score of the game: its outputs are already the canary's scores."""
    return np.asarray(outputs, dtype=float).reshape(-1)
