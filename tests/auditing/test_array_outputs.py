"""Targets whose outputs are torch tensors (any device, requiring grad or not), JAX or CuPy arrays, or anything with
the array protocols are audited on their values (issue 37): the same bits as NumPy outputs, VIOLATION where the
distribution leaks, one clear line for what cannot be read, never a silent bound of 0.

No GPU here: CUDA tensors are played by stand-ins that refuse NumPy conversion the way torch's CUDA tensors do
(``__array__`` raises TypeError "can't convert cuda:0 device type tensor to numpy", DLPack export to NumPy fails,
elementwise ``==`` whose truth value is ambiguous, identity hashing), with ``detach()``/``cpu()`` available. JAX
runs in a child process (JAX starts threads; forking tests later in the session must not inherit them)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dplens.auditing import host
from dplens.auditing import target_game as tg
from dplens.auditing.games import Verdict
from dplens.auditing.targets import TargetError, batched

torch = pytest.importorskip("torch", reason="torch outputs need torch")

SRC = Path(__file__).resolve().parents[2] / "src"
PAIR = ([1.0], [0.0])  # a sum of sensitivity 1: N(1, 1) against N(0, 1), true ε ≈ 4.4 at δ = 1e-5
TRIALS = 4_000


class FakeCpuTensor:
    """A CPU tensor of some framework: ``numpy()`` and ``__array__`` refuse while it requires grad (like torch)."""

    def __init__(self, values: np.ndarray, requires_grad: bool = False) -> None:
        self._values, self.requires_grad = np.asarray(values), requires_grad
        self.shape, self.dtype = self._values.shape, self._values.dtype

    def _refuse(self) -> None:
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")

    def __array__(self, dtype=None, copy=None):
        self._refuse()
        return self._values if dtype is None else self._values.astype(dtype)

    def numpy(self) -> np.ndarray:
        self._refuse()
        return self._values

    def detach(self) -> FakeCpuTensor:
        return FakeCpuTensor(self._values)

    def cpu(self) -> FakeCpuTensor:
        return self


class FakeCudaTensor:
    """A CUDA tensor as NumPy meets it: no ``__array__``, no DLPack export to the CPU, ambiguous truth values."""

    device = "cuda:0"

    def __init__(self, values: np.ndarray, requires_grad: bool = False) -> None:
        self._values, self.requires_grad = np.asarray(values), requires_grad
        self.shape, self.dtype, self.ndim = self._values.shape, self._values.dtype, self._values.ndim

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory "
            "first."
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)  # kDLCUDA

    def __dlpack__(self, *args, **kwargs):
        raise BufferError("Unsupported device in DLTensor.")

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, index) -> FakeCudaTensor:
        return FakeCudaTensor(self._values[index], self.requires_grad)

    def __eq__(self, other) -> FakeCudaTensor:  # elementwise, like a tensor
        return FakeCudaTensor(self._values == other)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        if self._values.size > 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._values)

    def detach(self) -> FakeCudaTensor:
        return FakeCudaTensor(self._values)

    def cpu(self) -> FakeCpuTensor:
        return FakeCpuTensor(self._values, self.requires_grad)


def _gaussian(data, rng, size):
    return float(np.sum(data)) + rng.standard_normal(size)


@batched
def numpy_gaussian(data, rng, size):
    return _gaussian(data, rng, size)


@batched
def cuda_gaussian(data, rng, size):
    return FakeCudaTensor(_gaussian(data, rng, size))


@batched
def cuda_gaussian_grad(data, rng, size):
    return FakeCudaTensor(_gaussian(data, rng, size), requires_grad=True)


@batched
def cuda_gaussian_vector(data, rng, size):
    return FakeCudaTensor(_gaussian(data, rng, (size, 16)))


def cuda_gaussian_per_draw(data, rng):
    return FakeCudaTensor(_gaussian(data, rng, 16))


@batched
def torch_gaussian_grad(data, rng, size):
    return torch.tensor(_gaussian(data, rng, size), requires_grad=True) * 1.0  # a non-leaf tensor with grad


def torch_gaussian_per_draw(data, rng):
    return torch.tensor(_gaussian(data, rng, 16), requires_grad=True)


def _audit(target, **kwargs):
    kwargs.setdefault("trials", TRIALS)
    return tg.audit_target(target, PAIR, claim_epsilon=1.0, claim_delta=1e-5, seed=3, **kwargs)


@pytest.fixture(scope="module")
def reference():
    return _audit(numpy_gaussian)


@pytest.mark.parametrize(
    "target",
    [cuda_gaussian, cuda_gaussian_grad, torch_gaussian_grad],
    ids=["cuda-stand-in", "cuda-stand-in-requires-grad", "torch-requires-grad"],
)
def test_array_outputs_are_audited_on_their_values_bit_for_bit(target, reference):
    result = _audit(target)
    assert result.verdict is Verdict.VIOLATION
    # The same values as the NumPy target from the same seeds: the same audit, bound for bound.
    assert result.epsilon_lower_bound == reference.epsilon_lower_bound
    assert result.to_dict()["output_profile"] == reference.to_dict()["output_profile"]


def test_vector_outputs_on_a_gpu_are_a_violation_not_an_error():
    # The issue: a 16-coordinate CUDA tensor raised "Boolean value of Tensor with more than one value is ambiguous".
    result = _audit(cuda_gaussian_per_draw, trials=2_000, pilot_trials=1_000)
    assert result.verdict is Verdict.VIOLATION and result.epsilon_lower_bound > 1.0
    assert result.to_dict()["output_profile"]["kind"] == "vector"


@pytest.mark.parametrize("target", [cuda_gaussian_vector, cuda_gaussian_per_draw, torch_gaussian_per_draw])
def test_vector_draws_come_back_as_one_array(target):
    from dplens.auditing.targets import as_target

    rng = np.random.default_rng(5)
    out = np.asarray(as_target(target).draw([1.0], 40, rng))  # an array, or a list of per-draw arrays
    assert out.shape == (40, 16) and out.dtype == np.float64
    if target is cuda_gaussian_vector:
        assert np.array_equal(out, _gaussian([1.0], np.random.default_rng(5), (40, 16)))


@pytest.mark.parametrize(
    ("dtype", "numpy_dtype"),
    [(torch.float32, np.float32), (torch.float16, np.float16), (torch.float64, np.float64)],
)
def test_dtypes_stay_intact(dtype, numpy_dtype):
    values = np.random.default_rng(0).standard_normal(1000)
    tensor = torch.tensor(values, dtype=dtype, requires_grad=True)
    out = host.to_host(tensor)
    assert out.dtype == numpy_dtype
    assert np.array_equal(out, values.astype(numpy_dtype))  # a float32 output stays float32: its leaks are visible


def test_bfloat16_is_read_from_its_bits():
    values = torch.randn(4096, dtype=torch.float32).to(torch.bfloat16)
    out = host.to_host(values)
    assert out.dtype == np.float32  # bfloat16 has no NumPy dtype; float32 holds every bfloat16 value exactly
    assert np.array_equal(out.view(np.uint32) & 0xFFFF, np.zeros(4096, dtype=np.uint32))
    assert torch.equal(torch.from_numpy(out).to(torch.bfloat16), values)
    signed = host.to_host(torch.tensor([-0.0, float("nan"), float("inf")], dtype=torch.bfloat16))
    assert np.signbit(signed[0]) and np.isnan(signed[1]) and np.isinf(signed[2])


def test_per_draw_torch_tensors_are_stacked_and_moved_once(monkeypatch):
    moves = []
    original = host._torch_numpy

    def counting(tensor):
        moves.append(tuple(tensor.shape))
        return original(tensor)

    monkeypatch.setattr(host, "_torch_numpy", counting)
    batch = [torch.full((3,), float(i), requires_grad=True) for i in range(50)]
    out = host.to_host(batch)
    assert out.shape == (50, 3) and moves == [(50, 3)]  # one transfer for the batch, not 50


def test_unreadable_outputs_are_one_clear_line():
    class Opaque:
        def __array__(self, dtype=None, copy=None):
            raise TypeError("device memory")

    @batched
    def opaque(data, rng, size):
        return [Opaque() for _ in range(size)]

    with pytest.raises(TargetError, match=r"cannot be read as numbers: __array__: device memory") as caught:
        _audit(opaque)
    assert "\n" not in str(caught.value)


def test_identity_compared_outputs_are_refused_not_silently_consistent():
    # Every output a new object compared by identity: each would be its own category and the audit would always
    # say CONSISTENT with a bound of 0. It is refused instead; a singleton sentinel stays a legitimate output.
    class Release:
        pass

    with pytest.raises(TargetError, match=r"compare by identity"):
        _audit(lambda data, rng: Release())
    sentinel = object()
    result = _audit(lambda data, rng: sentinel if rng.random() < 0.3 + 0.6 * float(np.sum(data)) else 0)
    assert result.verdict is Verdict.VIOLATION


def test_scores_in_any_array_type():
    from dplens.auditing.scores import audit_scores

    rng = np.random.default_rng(0)
    member = rng.random(2000) < 0.5
    scores = rng.normal(2.0 * member, 1.0)
    reference = audit_scores(scores, member, claim=1.0, delta=1e-5, one_run=True)
    for wrapped in (FakeCudaTensor(scores, requires_grad=True), torch.tensor(scores, requires_grad=True)):
        result = audit_scores(wrapped, torch.tensor(member), claim=1.0, delta=1e-5, one_run=True)
        assert result.epsilon_lower_bound == reference.epsilon_lower_bound


_JAX_PROBE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import jax, jax.numpy as jnp
    from dplens.auditing import target_game as tg
    from dplens.auditing.host import to_host
    from dplens.auditing.targets import batched

    @batched
    def jax_gaussian(data, rng, size):
        return jnp.asarray(float(np.sum(data)) + rng.standard_normal(size), dtype=jnp.float32)

    @batched
    def numpy_gaussian(data, rng, size):
        return (float(np.sum(data)) + rng.standard_normal(size)).astype(np.float32)

    def jax_per_draw(data, rng):
        return jnp.asarray(float(np.sum(data)) + rng.standard_normal(8))

    out = {}
    runs = (("jax", jax_gaussian, 4000), ("numpy", numpy_gaussian, 4000), ("per_draw", jax_per_draw, 500))
    for name, target, trials in runs:
        r = tg.audit_target(
            target, ([1.0], [0.0]), claim_epsilon=1.0, claim_delta=1e-5, trials=trials, seed=3, pilot_trials=500
        )
        out[name] = [r.verdict.value, r.epsilon_lower_bound]
    bf16 = to_host(jnp.asarray([1.5, -0.0, 3.25], dtype=jnp.bfloat16))
    out["bf16"] = [str(bf16.dtype), bf16.tolist(), bool(np.signbit(bf16[1]))]
    print(json.dumps(out))
    """
)


def test_jax_outputs_in_a_child_process():
    # find_spec, not importorskip: JAX loaded here would make later process pools forkserver (runner._fork_hazard)
    if importlib.util.find_spec("jax") is None:
        pytest.skip('needs the [jax] extra: pip install "dplens[jax]"')
    env = {"PYTHONPATH": str(SRC), "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", _JAX_PROBE], capture_output=True, text=True, timeout=600, check=False, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["jax"] == out["numpy"] and out["jax"][0] == "VIOLATION"  # float32 JAX = float32 NumPy, bit for bit
    assert out["per_draw"][0] == "VIOLATION"
    assert out["bf16"] == ["float32", [1.5, -0.0, 3.25], True]


def test_cuda_array_interface_without_a_reader_is_one_line(monkeypatch):
    class GpuBuffer:
        @property
        def __cuda_array_interface__(self):
            return {"shape": (3,), "typestr": "<f4", "data": (0, False), "version": 3}

    monkeypatch.setattr(host, "_importable", lambda name: False)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"GpuBuffer cannot be read as numbers: it is GPU memory"):
        host.to_host(GpuBuffer())


def _fake_cupy(monkeypatch):
    """A stand-in for CuPy: arrays refuse implicit NumPy conversion and come to the host by ``.get()``."""
    import types

    module = types.ModuleType("cupy")

    class ndarray:  # noqa: N801 - CuPy's name
        __module__ = "cupy._core.core"

        def __init__(self, values):
            self._values = np.asarray(values)
            self.shape, self.dtype = self._values.shape, self._values.dtype

        def __array__(self, dtype=None, copy=None):
            raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` instead.")

        def get(self):
            module.transfers += 1
            return self._values.copy()

    module.ndarray = ndarray
    module.transfers = 0
    module.stack = lambda arrays: ndarray(np.stack([a._values for a in arrays]))
    monkeypatch.setitem(sys.modules, "cupy", module)
    return module


def test_cupy_outputs_are_read_once_per_batch(monkeypatch, reference):
    cupy = _fake_cupy(monkeypatch)

    @batched
    def cupy_gaussian(data, rng, size):
        return cupy.ndarray(_gaussian(data, rng, size))

    result = _audit(cupy_gaussian)
    assert result.verdict is Verdict.VIOLATION and result.epsilon_lower_bound == reference.epsilon_lower_bound
    cupy.transfers = 0
    out = host.to_host([cupy.ndarray(np.full(4, float(i))) for i in range(30)])
    assert out.shape == (30, 4) and cupy.transfers == 1  # per-draw arrays stacked on the device, moved once
