"""The framework-free subject: ``step(per_sample_gradients, rng) -> update``, and the reference step.

The contract (issue 46): ``per_sample_gradients`` is a NumPy ``(b, d)`` array (one row per record of the batch),
``rng`` a ``numpy.random.Generator``; the update is the privatised gradient estimate of one logical batch, a ``(d,)``
array, before any optimizer post-processing (momentum, Adam, weight decay). This contract sees one logical batch per
call, so gradient accumulation cannot be checked through it (the Opacus and jax_privacy subjects can).

:class:`StepSubject` is the one interface the harness and the checks talk to; a framework adapter provides the same
``__call__`` and ``name``. A step that raises, returns the wrong shape, or returns a non-finite update on finite
input is bad input (``ValueError`` naming the function and the call).
"""

from __future__ import annotations

import importlib
import os
import random
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["StepSubject", "import_function", "reference_step", "reseed_globals"]


def import_function(target: str, role: str) -> Callable[..., Any]:
    """Import ``"module:function"`` (the current directory first, as ``dplens audit --target``)."""
    if not isinstance(target, str) or target.count(":") != 1 or not all(target.split(":")):
        raise ValueError(f"check_dp_sgd: {role} must be a callable or 'module:function'; got {target!r}")
    module_name, attribute = target.split(":")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        value: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and module_name.startswith(err.name):
            raise ValueError(
                f"check_dp_sgd: {role} module {module_name!r} not found (looked in {cwd} and on sys.path)"
            ) from None
        raise ValueError(f"check_dp_sgd: {role} module {module_name!r} failed to import: {err}") from None
    except Exception as err:  # the user's module failed while importing: its own words
        raise ValueError(
            f"check_dp_sgd: {role} module {module_name!r} failed to import: {type(err).__name__}: {err}"
        ) from None
    try:
        for part in attribute.split("."):
            value = getattr(value, part)
    except AttributeError:
        raise ValueError(f"check_dp_sgd: {role} module {module_name!r} has no attribute {attribute!r}") from None
    if not callable(value):
        raise ValueError(f"check_dp_sgd: {role} {target!r} is not callable")
    return value


def reseed_globals(seed: np.random.SeedSequence) -> None:
    """Re-seed numpy's and ``random``'s global generators (and torch's, when loaded) independently from ``seed``,
    before a training calls user code, so a step that draws from a global generator gets fresh noise per training
    and a shared global state is never mistaken for a re-seeded generator.

    Each generator gets 64 bits or more: with one 32-bit word each, two of 7·10⁴ trainings share a seed with
    probability ≈ 45 % (the birthday bound), and their identical first-step noise read as "a generator re-seeded to the
    same state" (the Opacus shuffle-gap run at 3·10⁴ per side)."""
    words = seed.generate_state(8, dtype=np.uint32)
    np.random.seed(words[:4])  # the legacy generator's init_by_array: 128 bits
    random.seed(int.from_bytes(words[4:6].tobytes(), "little"))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(int.from_bytes(words[6:8].tobytes(), "little"))


def reference_step(noise_multiplier: float, max_grad_norm: float, batch_size: int, normalise: str = "expected"):
    """A correct DP-SGD step (Abadi et al. 2016, Algorithm 1): clip each row to norm C, sum, add N(0, σ²C²) to each
    coordinate (rows holding NaN or inf count as zero: jax_privacy's ``nan_safe``), divide by the expected batch
    size B (``normalise="expected"``) or not (``"sum"``). Picklable."""
    return _ReferenceStep(
        float(noise_multiplier), float(max_grad_norm), float(batch_size) if normalise == "expected" else 1.0
    )


class _ReferenceStep:
    def __init__(self, sigma: float, clip: float, normaliser: float) -> None:
        self.sigma, self.clip, self.normaliser = sigma, clip, normaliser

    def __call__(self, grads: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        bad = ~np.all(np.isfinite(grads), axis=1)
        if bad.any():  # nan_safe (jax_privacy): a row holding NaN or inf contributes nothing
            grads = np.where(bad[:, None], 0.0, grads)
        norms = np.sqrt(np.einsum("ij,ij->i", grads, grads))
        factors = np.minimum(1.0, self.clip / np.maximum(norms, 1e-300))
        total = factors @ grads
        return (total + rng.normal(0.0, self.sigma * self.clip, size=grads.shape[1])) / self.normaliser


class StepSubject:
    """A step function behind the harness's interface: called on crafted gradients, its update checked."""

    kind = "framework-free"
    physical_batch_size: int | None = None

    def __init__(self, step: Any) -> None:
        if isinstance(step, str):
            self.name = step
            step = import_function(step, "step")
        elif callable(step):
            self.name = f"{getattr(step, '__module__', '?')}:{getattr(step, '__qualname__', type(step).__name__)}"
        else:
            raise ValueError(f"check_dp_sgd: subject must be a step function or 'module:function'; got {step!r}")
        self.step = step

    def accounting(self) -> Any:
        """What the step told its own accountant on the last call (a framework adapter's record), or None: the
        framework-free contract has no accountant of its own and sees one logical batch per call."""
        return None

    def __call__(
        self, grads: np.ndarray, rng: np.random.Generator, where: str = "a direct call", *, finite_input: bool = True
    ):
        """The update for ``grads`` ((b, d)), as a float64 (d,) array; bad input raises ``ValueError``."""
        try:
            update = self.step(grads, rng)
        except Exception as err:  # user code: any failure, in its own words, with the call it happened in
            raise ValueError(
                f"check_dp_sgd: the step function {self.name!r} raised {type(err).__name__}: {err} ({where})"
            ) from None
        try:
            array = np.asarray(update, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"check_dp_sgd: the step function {self.name!r} returned {type(update).__name__}, not a "
                f"numeric array ({where})"
            ) from None
        if array.shape != (grads.shape[1],):
            raise ValueError(
                f"check_dp_sgd: the step function {self.name!r} returned shape {array.shape} for a "
                f"{grads.shape} batch; expected ({grads.shape[1]},) ({where})"
            )
        if finite_input and not np.all(np.isfinite(array)):
            raise ValueError(
                f"check_dp_sgd: the step function {self.name!r} returned a non-finite update on finite input ({where})"
            )
        return array
