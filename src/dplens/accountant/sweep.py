"""ε over a grid of configurations (σ, q, T, …): one accountant per configuration, vectorised where it can be.

A sweep takes a spec and a few of its parameters with lists of values, and accounts every configuration of their
Cartesian product (``dplens sweep``). The RDP route is array arithmetic: every *distinct* event of the sweep (a
(σ, q) pair of a subsampled Gaussian, say) has its RDP curve evaluated once on a common set of orders — the number
of steps only scales it —, the curves of each configuration's ledger are summed as arrays (composition adds RDP,
Mironov 2017, Proposition 1), converted to (ε, δ) for all configurations at once (Canonne, Kamath, Steinke 2020,
Proposition 12), and each configuration's order is then refined around its grid optimum (two rounds of three
orders, evaluated in one call per distinct event). Any order gives a valid bound, so every ε is an upper bound; the
continuous search finds the same optimum as one-by-one accounting (:meth:`Accountant.epsilon`) to ~1e-9 relative.
Configurations whose grid optimum sits at the edge of the common orders are accounted one by one.

The PLD (and exact, best) routes account each configuration with the :class:`~dplens.accountant.compose.Accountant`
(the PLD engine gives each one its certified ``epsilon_lower``).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dplens.accountant import conversions, rdp
from dplens.accountant import events as ev
from dplens.accountant.compose import Accountant, Method
from dplens.accountant.curves import RdpConvergenceWarning
from dplens.accountant.routes import as_method

__all__ = ["SweepResult", "parameter_values", "sweep"]

#: Spec parameters that take integers (grid values are rounded to the nearest one).
INTEGER_PARAMETERS = frozenset({"steps", "count", "num_values", "k"})

# The common orders, in two parts. Every event gets the orders from 2 up: a log grid on α − 1 from 1 to 63, every
# integer to 64, every eighth to 256 (and α = 1.001, whose small RDP value decides the TV shortcut); ledgers whose
# best order is α = 2 also get the orders below 2 (near α = 1 each fractional order costs a long series). A ledger
# whose best order is the first or the last of all these is accounted one by one (that search extends its grid).
_HIGH_ORDERS = np.unique(
    np.concatenate([[1.001], 1.0 + np.geomspace(1.0, 63.0, 16), np.arange(2.0, 65.0), np.arange(72.0, 257.0, 8.0)])
)
_LOW_ORDERS = 1.0 + np.geomspace(1e-3, 1.0, 16)[1:-1]
_ORDERS = np.unique(np.concatenate([_LOW_ORDERS, _HIGH_ORDERS]))
_REFINE_ROUNDS = 3
_PROBES_PER_SIDE = 2
_VERTEX_ROUNDS = 2


def parameter_values(low: float, high: float, count: int, *, log: bool = False) -> list[float]:
    """``count`` values from ``low`` to ``high`` (evenly spaced, or geometrically with ``log``), as in LO:HI:N.

    Example:
        >>> parameter_values(0.5, 2.0, 4)
        [0.5, 1.0, 1.5, 2.0]
    """
    for name, value in (("low", low), ("high", high)):
        if not (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)):
            raise ValueError(f"{name} must be a finite number; got {value!r}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be an integer >= 1; got {count!r}")
    if high < low:
        raise ValueError(f"low must be <= high; got low={low!r}, high={high!r}")
    if count == 1:
        return [float(low)]
    if log:
        if low <= 0:
            raise ValueError(f"a log-spaced range needs low > 0; got low={low!r}")
        return [float(v) for v in np.geomspace(low, high, count)]
    return [float(v) for v in np.linspace(low, high, count)]


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepResult:
    """ε for every configuration of a sweep (rows in the order of the Cartesian product of ``grid``).

    ``epsilon`` is an upper bound for every row; ``epsilon_lower`` (PLD) a certified lower bound, else None.

    Example:
        >>> import dplens
        >>> spec = dplens.parse_spec({"mechanism": [{"type": "gaussian", "noise_multiplier": 1.0}]})
        >>> result = dplens.sweep(spec, params={"noise_multiplier": [1.0, 2.0]}, delta=1e-5)
        >>> result.configurations, [round(e, 4) for e in result.epsilon]
        (((1.0,), (2.0,)), [4.7284, 2.1657])
    """

    params: tuple[str, ...]
    grid: tuple[tuple[float, ...], ...]
    configurations: tuple[tuple[float, ...], ...]
    epsilon: tuple[float, ...]
    delta: float
    method: Method
    details: str
    epsilon_lower: tuple[float | None, ...] | None = None

    def rows(self) -> list[dict[str, Any]]:
        """One dict per configuration: the parameters, ε (and ε_lower), δ and the route."""
        out = []
        for i, values in enumerate(self.configurations):
            row: dict[str, Any] = dict(zip(self.params, values, strict=True))
            row["epsilon"] = self.epsilon[i]
            if self.epsilon_lower is not None:
                row["epsilon_lower"] = self.epsilon_lower[i]
            row["delta"] = self.delta
            row["method"] = self.method.value
            out.append(row)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": list(self.params),
            "grid": {name: list(values) for name, values in zip(self.params, self.grid, strict=True)},
            "delta": self.delta,
            "method": self.method.value,
            "details": self.details,
            "rows": self.rows(),
        }

    def to_csv(self) -> str:
        """The rows as CSV text (header: the parameters, epsilon[, epsilon_lower], delta, method)."""
        buffer = io.StringIO()
        fields = [*self.params, "epsilon", *(["epsilon_lower"] if self.epsilon_lower is not None else []), "delta"]
        writer = csv.DictWriter(buffer, fieldnames=[*fields, "method"], lineterminator="\n")
        writer.writeheader()
        for row in self.rows():
            writer.writerow({key: (repr(value) if isinstance(value, float) else value) for key, value in row.items()})
        return buffer.getvalue()

    def write(self, path: str | Path) -> Path:
        """Write the rows to ``path``: JSON for a ``.json`` name, CSV otherwise (written whole, then renamed)."""
        path = Path(path)
        text = json.dumps(self.to_dict()) if path.suffix.lower() == ".json" else self.to_csv()
        partial = path.with_name(path.name + ".partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
        return path


def _progress(total: int, enabled: bool, description: str):
    """A tqdm progress bar on stderr (imported only when shown), or a no-op."""
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=description, file=sys.stderr, leave=False)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _as_spec(spec: Any) -> Any:
    """A parsed spec as it is: a path is read at the front door (:func:`dplens.sweep`), never here, since the
    accountant sits below :mod:`dplens.spec` (which imports it)."""
    if hasattr(spec, "with_param") and hasattr(spec, "entries"):
        return spec
    raise ValueError(f"spec must be a Spec (dplens.sweep also reads a spec path); got {spec!r}")


def sweep(
    spec: Any,
    *,
    params: Mapping[str, Sequence[float]],
    delta: float,
    method: Method | str = Method.RDP,
    tolerance: float | None = None,
    progress: bool = False,
) -> SweepResult:
    """ε at ``delta`` for every configuration of the grid ``params`` (name → values) of a spec's parameters.

    Args:
        spec: a parsed :class:`~dplens.spec.Spec` (:func:`dplens.sweep` also takes a spec path); each configuration
            sets every mechanism that takes a parameter to its value (as ``dplens calibrate`` does).
        params: parameter name → values; the configurations are the Cartesian product, in this order.
        delta: δ of the (ε, δ) statements.
        method: ``rdp`` (vectorised), ``pld`` (one PLD per configuration, with ``epsilon_lower``), ``exact``, ``best``.
        tolerance: the PLD engine's relative bracket width (default 1e-3).
        progress: show a progress bar on stderr.

    Returns:
        A :class:`SweepResult` (``to_csv()``, ``to_dict()``, ``write(path)``).

    Example:
        >>> import dplens
        >>> spec = dplens.parse_spec({"mechanism": [{"type": "poisson_subsampled_gaussian",
        ...     "noise_multiplier": 1.0, "sampling_rate": 0.01, "steps": 1000}]})
        >>> result = dplens.sweep(spec, params={"noise_multiplier": [0.8, 1.0, 1.2]}, delta=1e-5)
        >>> [round(e, 3) for e in result.epsilon]
        [3.695, 2.101, 1.448]
    """
    spec = _as_spec(spec)
    delta = conversions.check_delta(delta)
    method = as_method(method)
    if not isinstance(params, Mapping) or not params:
        raise ValueError(f"params must map at least one parameter name to values; got {params!r}")
    names = tuple(params)
    grid = tuple(_grid_values(name, params[name]) for name in names)
    configurations = tuple(itertools.product(*grid))
    bar = _progress(len(configurations), progress, "sweep")
    try:
        ledgers, relations = _ledgers(spec, names, configurations, bar)
        if method is Method.RDP:
            bar.close()
            bar = _progress(len(ledgers), progress, "rdp")
            epsilons = _rdp_epsilons(ledgers, relations, delta, bar)
            lowers = None
            details = "RDP, Canonne-Kamath-Steinke 2020 Prop. 12, alpha optimised continuously (vectorised sweep)"
        else:
            epsilons, lowers, details = _one_by_one(ledgers, relations, delta, method, tolerance, bar)
    finally:
        bar.close()
    return SweepResult(
        params=names,
        grid=grid,
        configurations=configurations,
        epsilon=tuple(epsilons),
        delta=delta,
        method=method,
        details=details,
        epsilon_lower=lowers,
    )


def _grid_values(name: str, values: Iterable[float]) -> tuple[float | int, ...]:
    if not isinstance(name, str):
        raise ValueError(f"parameter names must be strings; got {name!r}")
    try:
        out = [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"values of {name!r} must be numbers; got {values!r}") from None
    if not out:
        raise ValueError(f"parameter {name!r} needs at least one value")
    if name in INTEGER_PARAMETERS:
        return tuple(round(v) for v in out)
    return tuple(out)


def _ledgers(
    spec: Any, names: tuple[str, ...], configurations: tuple[tuple[float, ...], ...], bar: Any
) -> tuple[list[tuple[tuple[ev.Event, int], ...]], list[Any]]:
    """Each configuration's ledger, parsing each prefix of the assignment once (the spec is re-validated)."""
    cache: dict[tuple[float, ...], Any] = {(): spec}

    def build(prefix: tuple[float, ...]) -> Any:
        if prefix not in cache:
            name = names[len(prefix) - 1]
            value = prefix[-1]
            cache[prefix] = build(prefix[:-1]).with_param(name, value)
        return cache[prefix]

    ledgers, relations = [], []
    for configuration in configurations:
        configured = build(tuple(configuration))
        ledgers.append(tuple(configured.entries))
        relations.append(configured.neighboring)
        bar.update()
    return ledgers, relations


def _one_by_one(
    ledgers: list, relations: list, delta: float, method: Method, tolerance: float | None, bar: Any
) -> tuple[list[float], tuple[float | None, ...] | None, str]:
    epsilons, lowers, details = [], [], ""
    options = {} if tolerance is None else {"tolerance": tolerance}
    for ledger, relation in zip(ledgers, relations, strict=True):
        accountant = Accountant(neighboring=relation, **options)
        for event, count in ledger:
            accountant.compose(event, count)
        result = accountant.epsilon_result(delta, method=method)
        epsilons.append(result.epsilon)
        lowers.append(result.epsilon_lower)
        details = result.details
        bar.update()
    return epsilons, (tuple(lowers) if any(v is not None for v in lowers) else None), details


# --------------------------------------------------------------------------------------------
# The vectorised RDP route
# --------------------------------------------------------------------------------------------


def _composition_matrix(ledgers: list) -> tuple[list[list[tuple[int, int]]], list, np.ndarray]:
    """Per ledger its (distinct event index, count) pairs, the RDP curve of each distinct event, and the composition
    matrix: counts[i, e] = how many times ledger i runs distinct event e."""
    distinct: dict[ev.Event, int] = {}
    rows: list[list[tuple[int, int]]] = []
    for ledger in ledgers:
        row = []
        for event, count in ledger:
            if count == 0:
                continue
            index = distinct.setdefault(event, len(distinct))
            row.append((index, count))
        rows.append(row)
    # UnsupportedEventError (a ValueError) for events RDP cannot interpret
    curves = [rdp.rdp_curve(event) for event in distinct]
    counts = np.zeros((len(ledgers), len(distinct)))
    for i, row in enumerate(rows):
        for index, count in row:
            counts[i, index] += count
    return rows, curves, counts


def _vertex_rounds(
    evaluate: Any,
    delta: float,
    low: tuple[np.ndarray, np.ndarray],
    middle: tuple[np.ndarray, np.ndarray],
    high: tuple[np.ndarray, np.ndarray],
    smallest_rdp: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The vertex of the parabola through each ledger's best order and its neighbours (in t = log(α − 1)), twice;
    returns the best ε and the smallest RDP value seen."""
    (lo_t, lo_eps), (best_t, best_eps), (hi_t, hi_eps) = low, middle, high
    for _ in range(_VERTEX_ROUNDS):
        a, b = best_t - lo_t, best_t - hi_t
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            e_hi, e_lo = best_eps - hi_eps, best_eps - lo_eps
            vertex = best_t - 0.5 * (a * a * e_hi - b * b * e_lo) / (a * e_hi - b * e_lo)
        ok = np.isfinite(vertex) & (vertex > lo_t) & (vertex < hi_t) & (vertex != best_t)
        wider_right = hi_t - best_t > best_t - lo_t
        vertex = np.where(ok, vertex, 0.5 * (best_t + np.where(wider_right, hi_t, lo_t)))
        vertex_alpha = (1.0 + np.exp(vertex))[:, None]
        vertex_values = evaluate(vertex_alpha)
        smallest_rdp = np.minimum(smallest_rdp, vertex_values[:, 0])
        vertex_eps = conversions.rdp_to_epsilon_optimal(vertex_values, vertex_alpha, delta)[:, 0]
        better, left = vertex_eps < best_eps, vertex < best_t
        # The new bracket: the best of the four points and its neighbours.
        lo_t, lo_eps, hi_t, hi_eps = (
            np.where(better, np.where(left, lo_t, best_t), np.where(left, vertex, lo_t)),
            np.where(better, np.where(left, lo_eps, best_eps), np.where(left, vertex_eps, lo_eps)),
            np.where(better, np.where(left, best_t, hi_t), np.where(left, hi_t, vertex)),
            np.where(better, np.where(left, best_eps, hi_eps), np.where(left, hi_eps, vertex_eps)),
        )
        best_t, best_eps = np.where(better, vertex, best_t), np.where(better, vertex_eps, best_eps)
    return best_eps, smallest_rdp


def _final_epsilons(
    ledgers: list,
    relations: list,
    rows: list,
    delta: float,
    best: np.ndarray,
    best_eps: np.ndarray,
    smallest_rdp: np.ndarray,
) -> list[float]:
    """Each ledger's reported ε: the vectorised optimum rounded up, or the one-by-one search where the optimum lies
    outside the common orders."""
    n = len(ledgers)
    out = []
    for i in range(n):
        edge = best[i] == 0 or best[i] == _ORDERS.size - 1
        if edge or not np.isfinite(best_eps[i]):
            # The optimum is outside the common orders (or nothing converged): the one-by-one search extends itself.
            accountant = Accountant(neighboring=relations[i])
            for event, count in ledgers[i]:
                accountant.compose(event, count)
            out.append(accountant.epsilon(delta, method=Method.RDP))
            continue
        if not rows[i]:
            out.append(0.0)
            continue
        # KL ≤ RDP(α) for every α: the TV shortcut (ε = 0) holds when δ² ≥ 1 − e^{−min RDP} (as one by one).
        if conversions.rdp_tv_shortcut(np.array([smallest_rdp[i]]), delta):
            out.append(0.0)
            continue
        out.append(conversions.round_up(max(float(best_eps[i]), 0.0)))
    return out


def _rdp_epsilons(ledgers: list, relations: list, delta: float, bar: Any) -> list[float]:
    """ε of every ledger by RDP with α optimised per ledger, all ledgers at once (see the module docstring)."""
    import warnings

    rows, curves, counts = _composition_matrix(ledgers)
    n = len(ledgers)

    def evaluate(orders_per_ledger: np.ndarray) -> np.ndarray:
        """RDP of every ledger at its own orders (n × k): one call per distinct event, on the orders it needs."""
        k = orders_per_ledger.shape[1]
        total = np.zeros((n, k))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RdpConvergenceWarning)
            for e, curve in enumerate(curves):
                users = np.flatnonzero(counts[:, e])
                if users.size == 0:
                    continue
                wanted = orders_per_ledger[users].ravel()
                unique, inverse = np.unique(wanted, return_inverse=True)
                values = np.asarray(curve(unique), dtype=float)[inverse].reshape(users.size, k)
                total[users] += counts[users, e][:, None] * values
        return np.where(np.isnan(total), np.inf, total)

    # The common orders, one call per distinct event (the orders below 2 only for ledgers that need them).
    high = np.searchsorted(_ORDERS, _HIGH_ORDERS)
    base = np.full((n, _ORDERS.size), np.inf)
    base[:, high] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RdpConvergenceWarning)
        for e, curve in enumerate(curves):
            values = np.asarray(curve(_HIGH_ORDERS), dtype=float)
            users = np.flatnonzero(counts[:, e])
            base[np.ix_(users, high)] += counts[users, e][:, None] * values[None, :]
            bar.update()
        base = np.where(np.isnan(base), np.inf, base)
        eps_grid = conversions.rdp_to_epsilon_optimal(base, _ORDERS[None, :], delta)
        two = int(np.searchsorted(_ORDERS, 2.0))
        needy = np.argmin(eps_grid, axis=1) == two
        if needy.any():
            low = np.searchsorted(_ORDERS, _LOW_ORDERS)
            base[np.ix_(np.flatnonzero(needy), low)] = 0.0
            for e, curve in enumerate(curves):
                users = np.flatnonzero(needy & (counts[:, e] > 0))
                if users.size:
                    values = np.asarray(curve(_LOW_ORDERS), dtype=float)
                    base[np.ix_(users, low)] += counts[users, e][:, None] * values[None, :]
            base = np.where(np.isnan(base), np.inf, base)
            eps_grid = conversions.rdp_to_epsilon_optimal(base, _ORDERS[None, :], delta)
    best = np.argmin(eps_grid, axis=1)
    best_eps = eps_grid[np.arange(n), best]
    smallest_rdp = np.min(base, axis=1)
    # Refine around each ledger's best order in t = log(α − 1), bracketed between its neighbours among the orders
    # evaluated (the objective has V-shaped kinks where the fractional RDP is capped by the next integer order, so no
    # smoothness is assumed): each round evaluates points on each side of the best and keeps its new neighbours; then
    # the vertex of the parabola through the best point and its neighbours, twice (smooth minima converge fast; at a
    # kink the vertex is just one more order). Every evaluated order gives a valid ε; the minimum is reported.
    t = np.log(_ORDERS - 1.0)
    rows_index = np.arange(n)
    lo_i, hi_i = np.maximum(best - 1, 0), np.minimum(best + 1, t.size - 1)
    lo_t, hi_t, best_t = t[lo_i], t[hi_i], t[best]
    lo_eps, hi_eps = eps_grid[rows_index, lo_i], eps_grid[rows_index, hi_i]
    fractions = np.arange(1, _PROBES_PER_SIDE + 1) / (_PROBES_PER_SIDE + 1)
    for _ in range(_REFINE_ROUNDS):
        probe_t = np.concatenate(
            [
                lo_t[:, None] + (best_t - lo_t)[:, None] * fractions[None, :],
                best_t[:, None] + (hi_t - best_t)[:, None] * fractions[None, :],
            ],
            axis=1,
        )
        probe_alpha = 1.0 + np.exp(probe_t)
        values = evaluate(probe_alpha)
        smallest_rdp = np.minimum(smallest_rdp, values.min(axis=1))
        probe_eps = conversions.rdp_to_epsilon_optimal(values, probe_alpha, delta)
        points_t = np.concatenate([lo_t[:, None], probe_t, hi_t[:, None], best_t[:, None]], axis=1)
        points_eps = np.concatenate([lo_eps[:, None], probe_eps, hi_eps[:, None], best_eps[:, None]], axis=1)
        order = np.argsort(points_t, axis=1, kind="stable")
        points_t = np.take_along_axis(points_t, order, axis=1)
        points_eps = np.take_along_axis(points_eps, order, axis=1)
        pick = np.argmin(points_eps, axis=1)
        best_eps, best_t = points_eps[rows_index, pick], points_t[rows_index, pick]
        lo_i, hi_i = np.maximum(pick - 1, 0), np.minimum(pick + 1, points_t.shape[1] - 1)
        lo_t, hi_t = points_t[rows_index, lo_i], points_t[rows_index, hi_i]
        lo_eps, hi_eps = points_eps[rows_index, lo_i], points_eps[rows_index, hi_i]
    best_eps, smallest_rdp = _vertex_rounds(
        evaluate, delta, (lo_t, lo_eps), (best_t, best_eps), (hi_t, hi_eps), smallest_rdp
    )
    return _final_epsilons(ledgers, relations, rows, delta, best, best_eps, smallest_rdp)


def parse_parameter(text: str) -> tuple[str, list[float]]:
    """``NAME=LO:HI:N`` (or ``NAME=LO:HI:N:log``, or ``NAME=V1,V2,…``) → (name, values), for the command line.

    Example:
        >>> parse_parameter("noise_multiplier=0.5:2:4")
        ('noise_multiplier', [0.5, 1.0, 1.5, 2.0])
    """
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"--param must look like NAME=LO:HI:N; got {text!r}")
    if ":" not in spec:
        try:
            items = spec.split(",")
            if not all(v.strip() for v in items):
                raise ValueError(f"--param {text!r}: an empty value in the list {spec!r}")
            return name, [float(v) for v in items]
        except ValueError:
            raise ValueError(f"--param values must be numbers; got {text!r}") from None
    parts = spec.split(":")
    if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3].strip() not in ("log", "lin")):
        raise ValueError(f"--param must look like NAME=LO:HI:N (optionally :log); got {text!r}")
    try:
        low, high = float(parts[0]), float(parts[1])
        count = int(parts[2])
    except ValueError:
        raise ValueError(f"--param must look like NAME=LO:HI:N with numbers and an integer N; got {text!r}") from None
    return name, parameter_values(low, high, count, log=len(parts) == 4 and parts[3].strip() == "log")
