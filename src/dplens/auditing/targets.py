"""Targets: the user's own mechanism code, as dplens runs it in an audit.

A target is whatever a privacy engineer ships:

- a callable ``f(data, rng) -> output`` (a number, a vector, an array, a category — any hashable value), run
  once per trial with the ``numpy.random.Generator`` dplens hands it;
- a batched callable ``f(data, rng, size) -> outputs`` (leading axis ``size``), declared with :func:`batched`
  (a decorator) or an attribute ``dplens_batched = True``, run once per batch;
- an object with ``release(data, rng)`` (dplens's own mechanisms — run through their ``release_batch(data, n,
  rng)``, the same distribution vectorised — or the user's classes);
- a diffprivlib-style mechanism with ``randomise(value)`` (:func:`randomise`; seeded through its
  ``random_state``, so it is reproducible);
- an OpenDP measurement (:func:`opendp`; a callable on the data that draws from OpenDP's own generator, which
  cannot be seeded: such an audit is valid but not reproducible, and says so).

Targets are found by path: ``"module:name"`` imports ``module`` (the current directory first, as the CLI does)
and takes its attribute ``name``. Worker processes import the target themselves from that path — nothing is
pickled — so a lambda or a closure can run only in-process (``workers=1``); passing one with more workers is a
``ValueError`` that says so. User code that raises fails in its own words: :class:`TargetError` names the
function, the input, the trial and chunk, and the original message.

Pairs: :func:`load_pair` reads ``{"data": …, "neighbour": …}`` (JSON values, or paths to ``.npy`` / ``.csv``
files relative to the pair file), with optional ``"query"`` values (noise-free outputs for the float checks),
``"description"``, ``"noise"`` (``{"sampler": name, "scale": value}`` for targets the probe cannot see), or a
``"relation"`` instead of a neighbour (then dplens searches for the pair, :mod:`dplens.auditing.pairs`).
"""

from __future__ import annotations

import copy
import enum
import importlib
import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dplens.auditing.host import host_value, to_host

__all__ = [
    "Target",
    "TargetError",
    "TargetKind",
    "TargetPair",
    "as_target",
    "batched",
    "load_pair",
    "load_target",
    "opendp",
    "randomise",
]

BATCHED_ATTRIBUTE = "dplens_batched"


class TargetError(ValueError):
    """User code raised while dplens ran it (the message names the function, the trial and the cause)."""


class TargetKind(enum.Enum):
    """How dplens calls a target."""

    CALLABLE = "callable f(data, rng)"
    BATCHED = "batched f(data, rng, size)"
    RELEASE = "object.release(data, rng)"
    RANDOMISE = "diffprivlib-style object.randomise(value)"
    OPENDP = "OpenDP measurement(data)"


def batched(function: Callable[..., Any]) -> Callable[..., Any]:
    """Declare ``function(data, rng, size)`` batched: it returns ``size`` outputs (leading axis) per call.

    Example:
        >>> import numpy as np
        >>> @batched
        ... def noisy_sum(data, rng, size):
        ...     return float(np.sum(data)) + rng.laplace(0.0, 1.0, size=size)
        >>> as_target(noisy_sum).kind.name
        'BATCHED'
    """
    if not callable(function):
        raise ValueError(f"batched needs a callable f(data, rng, size); got {function!r}")
    try:
        setattr(function, BATCHED_ATTRIBUTE, True)
    except (AttributeError, TypeError):
        raise ValueError(f"cannot mark {function!r} as batched; define a function f(data, rng, size)") from None
    return function


def _callable_name(function: Any) -> str:
    module = getattr(function, "__module__", None)
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return f"{module}.{name}" if module else name


def _importable_path(function: Any) -> str | None:
    """``module:qualname`` when ``function`` can be re-imported by that path to the same object, else None."""
    module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", None)
    if not module or not name or module == "__main__" or "<" in name:
        return None
    try:
        found = _resolve(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    return f"{module}:{name}" if found is function else None


def _resolve(module: Any, name: str) -> Any:
    value = module
    for part in name.split("."):
        value = getattr(value, part)
    return value


@dataclass(frozen=True, slots=True, eq=False)
class Target:
    """A runnable target: the object, how to call it, and the import path workers use to load it themselves.

    Build one with :func:`as_target`, :func:`load_target`, :func:`randomise` or :func:`opendp`.
    """

    function: Any
    kind: TargetKind
    name: str
    path: str | None = None
    seedable: bool = True
    query: Callable[[Any], Any] | None = None  # RANDOMISE: data → the value passed to randomise (default: data)

    def __reduce__(self) -> tuple[Any, ...]:
        # Workers import the target by its path; nothing of the user's code is pickled.
        if self.path is None:
            raise ValueError(
                f"target {self.name} cannot be sent to worker processes: it has no import path (a lambda, a "
                "closure or a function defined in __main__); pass 'module:name' or run with workers=1"
            )
        return (load_target, (self.path,))

    def with_path(self, path: str) -> Target:
        return Target(
            function=self.function,
            kind=self.kind,
            name=self.name,
            path=path,
            seedable=self.seedable,
            query=self.query,
        )

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind.name.lower(), "call": self.kind.value, "path": self.path}

    # ---- running --------------------------------------------------------------------------

    def call_once(self, data: Any, rng: np.random.Generator) -> Any:
        """One output in host memory (the probe uses this; the target's errors propagate unchanged)."""
        match self.kind:
            case TargetKind.CALLABLE:
                out = self.function(data, rng)
            case TargetKind.BATCHED:
                return _first(to_host(self.function(data, rng, 1)))
            case TargetKind.RELEASE:
                out = self.function.release(data, rng)
            case TargetKind.RANDOMISE:
                out = _seeded_copy(self.function, rng).randomise(self._value(data))
            case TargetKind.OPENDP:
                out = self.function(data)
            case _:
                raise ValueError(f"unknown target kind {self.kind!r}")
        return host_value(out)

    def _value(self, data: Any) -> Any:
        return data if self.query is None else self.query(data)

    def draw(self, data: Any, n: int, rng: np.random.Generator, *, where: str = "") -> list[Any] | np.ndarray:
        """``n`` independent outputs on ``data``, in host memory (:func:`dplens.auditing.host.to_host`: torch, JAX
        and CuPy arrays on any device, once per batch); a failure raises :class:`TargetError` naming the trial."""
        out: list[Any] = []
        place = f" ({where})" if where else ""
        try:
            if self.kind is TargetKind.RELEASE and callable(getattr(self.function, "release_batch", None)):
                batch = self.function.release_batch(data, n, rng)  # n releases at once (dplens's own mechanisms)
            elif self.kind is TargetKind.BATCHED:
                batch = self.function(data, rng, n)
            else:
                call = self._single(data, rng)
                for _ in range(n):
                    out.append(call())
                batch = out
        except TargetError:
            raise
        except Exception as err:
            at = "batch" if self.kind is TargetKind.BATCHED else f"trial {len(out) + 1} of {n}"
            detail = f"{type(err).__name__}: {err}".splitlines()[0] if str(err) else type(err).__name__
            raise TargetError(f"target {self.name} failed at {at}{place}: {detail}") from err
        try:
            batch = to_host(batch)
        except ValueError as err:
            raise TargetError(f"target {self.name}{place}: {err}") from None
        if self.kind is TargetKind.BATCHED:
            length = len(batch) if isinstance(batch, list) or getattr(batch, "ndim", 0) > 0 else -1
            if length != n:
                raise TargetError(
                    f"target {self.name} failed at batch{place}: returned {length} outputs for size={n} (declare "
                    "batched only if it does)"
                )
        return batch

    def _single(self, data: Any, rng: np.random.Generator) -> Callable[[], Any]:
        """A zero-argument call producing one output (the mechanism copy and its input fixed once per batch)."""
        match self.kind:
            case TargetKind.CALLABLE:
                function = self.function
                return lambda: function(data, rng)
            case TargetKind.RELEASE:
                release = self.function.release
                return lambda: release(data, rng)
            case TargetKind.RANDOMISE:
                mechanism, value = _seeded_copy(self.function, rng), self._value(data)
                return lambda: mechanism.randomise(value)
            case TargetKind.OPENDP:
                measurement = self.function
                return lambda: measurement(data)
        raise ValueError(f"unknown target kind {self.kind!r}")


def _first(outputs: Any) -> Any:
    if isinstance(outputs, np.ndarray):
        return outputs[0]
    return next(iter(outputs))


def _seeded_copy(mechanism: Any, rng: np.random.Generator) -> Any:
    """A copy of a diffprivlib-style mechanism drawing from a RandomState seeded from ``rng`` (its ``_rng``)."""
    if not hasattr(mechanism, "_rng"):
        return mechanism
    clone = copy.copy(mechanism)
    clone._rng = np.random.RandomState(int(rng.integers(0, 2**32)))
    return clone


def _is_opendp(obj: Any) -> bool:
    return type(obj).__module__.startswith("opendp") and type(obj).__name__ == "Measurement"


def as_target(obj: Any, *, path: str | None = None, name: str | None = None) -> Target:
    """The :class:`Target` for ``obj`` (a Target, an OpenDP measurement, a ``randomise``/``release`` object, a
    batched or plain callable). A module-level function gets its import path automatically."""
    if isinstance(obj, Target):
        return obj if path is None or obj.path == path else obj.with_path(path)
    if _is_opendp(obj):
        return opendp(obj, path=path)
    if hasattr(obj, "randomise") and callable(obj.randomise):
        return randomise(obj, path=path)
    label = name or _callable_name(obj)
    if hasattr(obj, "release") and callable(obj.release):
        return Target(function=obj, kind=TargetKind.RELEASE, name=name or f"{type(obj).__name__}.release", path=path)
    if not callable(obj):
        raise ValueError(
            f"target must be a callable f(data, rng), a batched callable, an object with release(data, rng) or "
            f"randomise(value), or an OpenDP measurement; got {obj!r}"
        )
    kind = TargetKind.BATCHED if getattr(obj, BATCHED_ATTRIBUTE, False) else TargetKind.CALLABLE
    return Target(function=obj, kind=kind, name=label, path=path or _importable_path(obj))


def randomise(mechanism: Any, *, query: Callable[[Any], Any] | None = None, path: str | None = None) -> Target:
    """Adapter for diffprivlib-style mechanisms: each trial calls ``mechanism.randomise(query(data))``.

    ``query`` maps the data set to the value the mechanism randomises (default: the data itself, e.g. a count
    or a category). The mechanism is copied and seeded per batch through its ``random_state`` generator
    (diffprivlib's ``_rng``), so the audit is reproducible from its seed; an object without one runs unseeded.
    """
    if not (hasattr(mechanism, "randomise") and callable(mechanism.randomise)):
        raise ValueError(f"mechanism must have a randomise(value) method; got {mechanism!r}")
    if query is not None and not callable(query):
        raise ValueError(f"query must be a callable data -> value; got {query!r}")
    return Target(
        function=mechanism,
        kind=TargetKind.RANDOMISE,
        name=f"{type(mechanism).__module__}.{type(mechanism).__name__}.randomise",
        path=path,
        seedable=hasattr(mechanism, "_rng"),
        query=query,
    )


def opendp(measurement: Any, *, path: str | None = None) -> Target:
    """Adapter for an OpenDP measurement (``opendp>=0.16``, ``dp.enable_features("contrib")``): each trial calls
    ``measurement(data)``. OpenDP samples from its own generator, which dplens cannot seed: the audit is valid
    (each trial is an independent run) but ``reproducible`` is False."""
    if not callable(measurement):
        raise ValueError(f"measurement must be a callable OpenDP Measurement; got {measurement!r}")
    return Target(function=measurement, kind=TargetKind.OPENDP, name="opendp Measurement", path=path, seedable=False)


def load_target(path: str) -> Target:
    """Import ``"module:name"`` (the current directory first) and return its :class:`Target`.

    Raises ``ValueError`` (one line) when the form, the module or the attribute is wrong; an error raised while
    importing the user's module is reported in its own words.
    """
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise ValueError(f"target must be 'module:name'; got {path!r}")
    module_name, attribute = path.split(":")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and module_name.startswith(err.name):
            raise ValueError(f"target module {module_name!r} not found (looked in {cwd} and on sys.path)") from None
        raise ValueError(f"target module {module_name!r} failed to import: {err}") from None
    except Exception as err:
        raise ValueError(f"target module {module_name!r} failed to import: {type(err).__name__}: {err}") from None
    try:
        obj = _resolve(module, attribute)
    except AttributeError:
        raise ValueError(f"target module {module_name!r} has no attribute {attribute!r}") from None
    return as_target(obj, path=path, name=f"{module_name}.{attribute}" if not isinstance(obj, Target) else None)


# --------------------------------------------------------------------------------------------
# Pairs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetPair:
    """The neighbouring inputs of a target audit (D, D′), optional noise-free query values, and provenance.

    ``relation`` (``"add_remove"`` / ``"replace_one"`` / ``"query_vector"``: D is a vector of query answers of
    sensitivity 1, neighbours differ by at most 1 in every coordinate) without a neighbour asks for a pair search;
    ``noise`` = (sampler name, scale) states the sampler for the float checks when the probe cannot see it.
    """

    data: Any
    neighbour: Any = None
    query: tuple[Any, Any] | None = None
    description: str = ""
    relation: str | None = None
    noise: tuple[str, float] | None = None
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "description": self.description or "D vs D'",
            "data": _short(self.data),
            "neighbour": _short(self.neighbour),
            "query": None if self.query is None else [_plain(self.query[0]), _plain(self.query[1])],
            "relation": self.relation,
            "source": self.source,
        }


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _short(value: Any, limit: int = 200) -> str:
    text = repr(_plain(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


_PAIR_KEYS = {"data", "neighbour", "query", "description", "relation", "noise"}
_MAX_PAIR_BYTES = 256 * 2**20  # a pair file holds data inline; larger data sets go in .npy / .csv files beside it
RELATIONS = ("add_remove", "replace_one", "query_vector")


def _load_value(value: Any, base: Path, key: str, source: str) -> Any:
    if isinstance(value, str) and value.lower().endswith((".npy", ".csv")):
        from dplens._files import check_input_file

        file = check_input_file((base / value).resolve(), what=f"pair file {source!r}: {key!r} file")
        try:
            if value.lower().endswith(".npy"):
                return np.load(file, allow_pickle=False)
            array = np.loadtxt(file, delimiter=",", ndmin=1)
            return array
        except (OSError, ValueError) as err:
            raise ValueError(f"pair file {source!r}: {key!r} file {value!r} cannot be read: {err}") from None
    return value


def load_pair(path: str | Path) -> TargetPair:
    """Read a pair file (see the module docstring); every problem is a one-line ``ValueError``."""
    from dplens._files import read_input_bytes

    path = Path(path)
    source = str(path)
    raw = read_input_bytes(path, what="pair file", max_bytes=_MAX_PAIR_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"pair file {source!r} is not UTF-8 text") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"pair file {source!r} is not valid JSON: {err.msg} (line {err.lineno})") from None
    if not isinstance(document, dict):
        raise ValueError(f"pair file {source!r} must hold a JSON object with 'data' and 'neighbour'")
    unknown = sorted(set(document) - _PAIR_KEYS)
    if unknown:
        raise ValueError(f"pair file {source!r} has unknown key {unknown[0]!r}; expected {sorted(_PAIR_KEYS)}")
    if "data" not in document:
        raise ValueError(f"pair file {source!r} has no 'data'")
    relation = document.get("relation")
    if "neighbour" not in document and relation is None:
        raise ValueError(f"pair file {source!r} has no 'neighbour' (give one, or a 'relation' to search for a pair)")
    if relation is not None and relation not in RELATIONS:
        raise ValueError(f"pair file {source!r}: relation must be one of {list(RELATIONS)}; got {relation!r}")
    base = path.parent
    data = _load_value(document["data"], base, "data", source)
    neighbour = _load_value(document["neighbour"], base, "neighbour", source) if "neighbour" in document else None
    query = document.get("query")
    if query is not None:
        if isinstance(query, dict) and set(query) == {"data", "neighbour"}:
            query = (query["data"], query["neighbour"])
        elif isinstance(query, list) and len(query) == 2:
            query = (query[0], query[1])
        else:
            raise ValueError(f"pair file {source!r}: 'query' must be {{'data': q, 'neighbour': q'}} or [q, q']")
        for value in query:
            array = np.asarray(value, dtype=object)
            try:
                ok = np.all(np.isfinite(np.asarray(value, dtype=float)))
            except (TypeError, ValueError):
                ok = False
            if not ok or array.size == 0:
                raise ValueError(f"pair file {source!r}: query values must be finite numbers; got {value!r}")
    noise = document.get("noise")
    if noise is not None:
        from dplens.auditing.floats import SamplerModel

        names = [m.value for m in SamplerModel]
        if not isinstance(noise, dict) or noise.get("sampler") not in names or "scale" not in noise:
            raise ValueError(f"pair file {source!r}: 'noise' must be {{'sampler': one of {names}, 'scale': S}}")
        scale = noise["scale"]
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"pair file {source!r}: noise scale must be a finite number > 0; got {scale!r}")
        noise = (noise["sampler"], float(scale))
    description = document.get("description", "")
    if not isinstance(description, str):
        raise ValueError(f"pair file {source!r}: 'description' must be a string")
    return TargetPair(
        data=data,
        neighbour=neighbour,
        query=query,
        description=description,
        relation=relation,
        noise=noise,
        source=source,
    )


def as_pair(pair: Any) -> TargetPair:
    """A :class:`TargetPair` from a TargetPair, a pair file path, a dict like a pair file, or (data, neighbour)."""
    if isinstance(pair, TargetPair):
        return pair
    if isinstance(pair, str | Path):
        return load_pair(pair)
    if isinstance(pair, dict):
        if "data" not in pair or ("neighbour" not in pair and "relation" not in pair):
            raise ValueError(f"pair must have 'data' and 'neighbour' (or a 'relation'); got keys {sorted(pair)}")
        query = pair.get("query")
        if isinstance(query, dict):
            query = (query["data"], query["neighbour"])
        noise = pair.get("noise")
        if isinstance(noise, dict):
            noise = (noise["sampler"], float(noise["scale"]))
        return TargetPair(
            data=pair["data"],
            neighbour=pair.get("neighbour"),
            query=tuple(query) if isinstance(query, list | tuple) else query,
            description=pair.get("description", ""),
            relation=pair.get("relation"),
            noise=noise,
        )
    if isinstance(pair, tuple | list) and len(pair) == 2:
        return TargetPair(data=pair[0], neighbour=pair[1])
    raise ValueError(
        f"pair must be a pair file, a dict with 'data' and 'neighbour', or (data, neighbour); got {pair!r}"
    )
