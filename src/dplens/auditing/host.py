"""Outputs and scores brought to host memory as NumPy values, whatever array type the user's code returns.

A target (or a score) written for a GPU returns torch tensors on a CUDA device — often requiring grad — or JAX or
CuPy arrays. NumPy cannot read those directly (``np.asarray`` of a CUDA tensor raises, one of a tensor that requires
grad raises, and an object array of tensors makes every output a distinct opaque object: the audit then sees
nothing). :func:`to_host` converts a batch once:

- torch tensors: ``detach()``, dense, conjugation resolved, one ``.cpu()`` per batch (per-draw tensors of one shape,
  dtype and device are stacked on their device first: one transfer, one synchronisation), then ``.numpy()``;
- JAX arrays (``jax.device_get`` through ``np.asarray``; per-draw arrays stacked with ``jax.numpy.stack`` first);
- CuPy arrays (``.get()``; per-draw arrays stacked with ``cupy.stack`` first);
- anything with ``__cuda_array_interface__`` (read through CuPy or torch), ``__dlpack__`` (``np.from_dlpack``,
  else torch's), ``__array__`` (``np.asarray``), or tensor-like methods (``detach()``, ``cpu()``, ``numpy()``).

Dtypes stay what they were (a float32 output stays float32, so a float32 leak is still found): NumPy has no
bfloat16 or float8, so those are read from their bits (ml_dtypes, which JAX brings, or the bit layout itself) and
widened to float32, which holds every such value exactly. Tuples, lists and dicts of arrays are converted element
by element. An array-like object that cannot be read (a GPU array with neither CuPy nor torch installed, a JAX
tracer) is a one-line ``ValueError`` saying why; so is a batch of objects that compare by identity (every output
would be distinct, and the audit could never see a difference between the inputs).

torch, JAX and CuPy are never imported here unless the outputs are theirs (the modules are found in
``sys.modules``).
"""

from __future__ import annotations

import itertools
import operator
import sys
from typing import Any

import numpy as np

__all__ = ["host_array", "host_value", "to_host"]

_PLAIN = (str, bytes, int, float, complex, bool, type(None), np.ndarray, np.generic)
_HINTS = ("__array__", "__dlpack__", "__cuda_array_interface__", "__array_interface__")
_ADVICE = "return numbers, numpy arrays, torch / JAX / CuPy arrays or strings"


class _UnreadableError(ValueError):
    """An array-like output dplens could not bring to host memory."""


def _framework(value: Any) -> str:
    return type(value).__module__.partition(".")[0]


def _name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def _widen(array: np.ndarray) -> np.ndarray:
    """ml_dtypes floats (bfloat16, float8_*) as float32: an exact widening NumPy's kernels can work on."""
    foreign = array.dtype.kind == "V" and array.dtype.names is None
    if foreign and getattr(array.dtype.type, "__module__", "").startswith("ml_dtypes"):
        return array.astype(np.float32)
    return array


def _bfloat16_bits(bits: np.ndarray) -> np.ndarray:
    """bfloat16 values from their 16-bit patterns, as float32 (the pattern is a float32's upper half: exact)."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _torch_numpy(tensor: Any) -> np.ndarray:
    torch = sys.modules["torch"]
    t = tensor.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if t.is_quantized:
        t = t.dequantize()
    t = t.cpu()
    if t.dtype == torch.bfloat16:
        return _bfloat16_bits(t.contiguous().view(torch.int16).numpy().view(np.uint16))
    try:
        return t.numpy()
    except TypeError:  # float8, complex32, ...: no NumPy dtype; every such value is exact in float32 / complex64
        return (t.to(torch.complex64) if t.is_complex() else t.to(torch.float32)).numpy()


def _via_cuda_interface(value: Any) -> np.ndarray:
    if "cupy" in sys.modules or _importable("cupy"):
        import cupy

        return cupy.asarray(value).get()
    if "torch" in sys.modules or _importable("torch"):
        import torch

        if torch.cuda.is_available():
            return _torch_numpy(torch.as_tensor(value, device="cuda"))
    raise _UnreadableError("it is GPU memory (__cuda_array_interface__); neither CuPy nor CUDA torch can read it")


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


_TENSOR_METHODS = ("detach", "cpu")
_MAX_DEPTH = 4


def _from_dlpack(value: Any, reasons: list[str]) -> np.ndarray | None:
    try:
        return np.from_dlpack(value)
    except (BufferError, TypeError, ValueError, RuntimeError, AttributeError) as err:
        reasons.append(f"DLPack: {err}")
    if "torch" in sys.modules:  # torch reads DLPack capsules of GPU memory too
        try:
            return _torch_numpy(sys.modules["torch"].from_dlpack(value))
        except Exception as err:  # any failure: try the next protocol
            reasons.append(f"torch.from_dlpack: {err}")
    return None


def _by_protocol(value: Any, depth: int) -> np.ndarray | None:
    """The value through the array protocols or tensor-like methods; None when it offers none of them."""
    reasons: list[str] = []
    if hasattr(value, "__cuda_array_interface__"):
        return _via_cuda_interface(value)
    if hasattr(value, "__dlpack__"):
        found = _from_dlpack(value, reasons)
        if found is not None:
            return found
    if hasattr(value, "__array__") or hasattr(value, "__array_interface__"):
        try:
            return np.asarray(value)
        except (TypeError, ValueError, RuntimeError) as err:  # e.g. torch's "can't convert cuda:0 ... to numpy"
            reasons.append(f"__array__: {err}")
    tensor_like = any(callable(getattr(value, m, None)) for m in _TENSOR_METHODS)
    if not tensor_like and not reasons and not any(hasattr(value, hint) for hint in _HINTS):
        return None  # not an array: a category, a record, ...
    moved = value
    for method in _TENSOR_METHODS:  # a CUDA tensor of another framework (or a stand-in): detach, then host memory
        function = getattr(moved, method, None)
        if callable(function):
            try:
                moved = function()
            except Exception as err:
                reasons.append(f"{method}(): {err}")
                break
    if moved is not value and depth < _MAX_DEPTH:
        return np.asarray(host_value(moved, _depth=depth + 1))
    function = getattr(value, "numpy", None)
    if callable(function):
        try:
            return np.asarray(function())
        except Exception as err:
            reasons.append(f"numpy(): {err}")
    detail = str(reasons[-1]).splitlines()[0] if reasons else "it offers no way to read it"
    raise _UnreadableError(detail)


def host_value(value: Any, *, _depth: int = 0) -> Any:
    """One output in host memory (see the module docstring); values that are not arrays come back unchanged."""
    if isinstance(value, _PLAIN):
        return _widen(value) if isinstance(value, np.ndarray) else value
    framework = _framework(value)
    try:
        if framework == "torch" and isinstance(value, sys.modules["torch"].Tensor):
            return _torch_numpy(value)
        if framework in ("jax", "jaxlib"):
            return _widen(np.asarray(value))
        if framework == "cupy":
            return value.get()
        if isinstance(value, tuple | list):
            if all(isinstance(v, _PLAIN) and not isinstance(v, np.ndarray) for v in value):
                return value  # numbers and strings: nothing to bring over (and no copy)
            converted = [host_value(v, _depth=_depth) for v in value]
            return tuple(converted) if isinstance(value, tuple) else converted
        if isinstance(value, dict):
            return {k: host_value(v, _depth=_depth) for k, v in value.items()}
        converted = _by_protocol(value, _depth)
    except ValueError as err:
        if _depth or str(err).startswith("an output of type"):
            raise
        raise ValueError(f"an output of type {_name(value)} cannot be read as numbers: {err}; {_ADVICE}") from None
    except Exception as err:  # the framework's own error, in one line
        detail = f"{type(err).__name__}: {err}".splitlines()[0]
        raise ValueError(f"an output of type {_name(value)} cannot be read as numbers ({detail}); {_ADVICE}") from None
    return value if converted is None else _widen(converted)


def _stacked(batch: list[Any]) -> np.ndarray | None:
    """Per-draw arrays of one framework, shape, dtype and device stacked there and moved once; None otherwise."""
    first = batch[0]
    framework = _framework(first)
    kind = type(first)
    if framework not in ("torch", "jax", "jaxlib", "cupy") or any(type(v) is not kind for v in batch):
        return None
    shape, dtype = getattr(first, "shape", None), getattr(first, "dtype", None)
    if any(getattr(v, "shape", None) != shape or getattr(v, "dtype", None) != dtype for v in batch):
        return None
    if framework == "torch":
        torch = sys.modules["torch"]
        if not isinstance(first, torch.Tensor) or any(v.device != first.device for v in batch):
            return None
        return _torch_numpy(torch.stack([v.detach() for v in batch]))
    if framework == "cupy":
        return sys.modules["cupy"].stack(batch).get()
    jnp = sys.modules.get("jax.numpy")
    return None if jnp is None else _widen(np.asarray(jnp.stack(batch)))


def _check_identity(batch: list[Any]) -> None:
    """Refuse a batch of distinct objects that compare by identity: every output would be unique."""
    opaque = [v for v in batch if type(v).__eq__ is object.__eq__ and type(v).__hash__ is object.__hash__]
    opaque = [v for v in opaque if v is not None and not isinstance(v, type)]
    if len(opaque) >= 2 and len({id(v) for v in opaque}) == len(opaque):
        raise ValueError(
            f"the target's outputs of type {_name(opaque[0])} compare by identity: every output would be distinct "
            f"and the audit could see no difference between the inputs; {_ADVICE} (or give the type __eq__ and "
            "__hash__ over its values)"
        )


def to_host(batch: Any) -> Any:
    """A batch of outputs (a sequence of draws, or one array whose leading axis is the draws) in host memory.

    Returns a NumPy array when the batch is one array (or per-draw arrays that could be stacked), else a list of
    host values. Raises a one-line ``ValueError`` for outputs it cannot read (see the module docstring).
    """
    if isinstance(batch, np.ndarray):
        if batch.dtype.kind != "O" or batch.ndim != 1:
            return _widen(batch)
        batch = list(batch)  # an object array of draws: its elements may be tensors, or objects compared by identity
    if not isinstance(batch, list | tuple):
        return host_value(batch)
    batch = list(batch)
    if not batch:
        return batch
    kinds = set(map(type, batch))  # at C speed: the common batches (numbers, strings, lists of numbers) stop here
    if all(issubclass(k, _PLAIN) for k in kinds):
        if not any(issubclass(k, np.ndarray) for k in kinds):
            return batch
        arrays = [v for v in batch if isinstance(v, np.ndarray)] if len(kinds) > 1 else batch
        if all(d.kind != "V" for d in set(map(operator.attrgetter("dtype"), arrays))):
            return batch  # NumPy dtypes throughout: nothing to widen
        return [_widen(v) if isinstance(v, np.ndarray) else v for v in batch]
    if kinds <= {list, tuple}:
        inner = set(map(type, itertools.chain.from_iterable(batch)))
        if all(issubclass(k, _PLAIN) and not issubclass(k, np.ndarray) for k in inner):
            return batch
    try:
        stacked = _stacked(batch)
    except Exception:  # stacking is an optimisation: fall back to one draw at a time
        stacked = None
    if stacked is not None:
        return stacked
    out = [host_value(v) for v in batch]
    _check_identity(out)
    return out


def host_array(values: Any, *, name: str) -> np.ndarray:
    """``values`` (scores, labels: any array type) as a NumPy array in host memory, else a ``ValueError`` naming
    ``name``."""
    try:
        converted = to_host(values) if isinstance(values, list | tuple) else host_value(values)
        return np.asarray(converted)
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None
