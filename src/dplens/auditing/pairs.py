"""Pair search: find a neighbouring data set that makes a target leak most, on a budget.

Given one data set D (a sequence of records) and a neighbouring relation (add/remove one record, or replace one),
candidate neighbours D′ are scored by an *estimated* divergence of M(D) and M(D′) from a few thousand draws per
side: random candidates first, then a local search around the best one (DP-Auditorium's dataset finders pair a
property tester with random or guided search over neighbouring pairs: Kong et al., "DP-Auditorium", IEEE S&P
2024, §4). The estimates only choose the pair; they come from their own seed stream (spawn key (2, …)), and the
final audit (:func:`dplens.auditing.target_game.audit_target`) runs on fresh trials for the chosen pair only, so
its bound stays valid. Every pair tried is reported with its estimate (labelled an estimate: it is not a bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dplens.auditing.targets import Target, TargetPair, _short

__all__ = ["PairSearchResult", "estimated_divergence", "search_pair"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PairSearchResult:
    """The chosen pair and every candidate tried (``estimate`` is a plug-in ε estimate, not a bound)."""

    pair: TargetPair
    tried: tuple[dict[str, Any], ...]


def _records(data: Any) -> list[Any]:
    if isinstance(data, np.ndarray):
        if data.ndim == 0:
            raise ValueError("pair search needs a data set of records (a list or an array); got a scalar")
        return list(data)
    if isinstance(data, list | tuple):
        return list(data)
    raise ValueError(f"pair search needs a data set of records (a list or an array); got {type(data).__name__}")


def _rebuild(template: Any, records: list[Any]) -> Any:
    if isinstance(template, np.ndarray):
        return np.asarray(records, dtype=template.dtype).reshape((len(records), *template.shape[1:]))
    return type(template)(records) if isinstance(template, tuple) else records


def estimated_divergence(first: Any, second: Any, *, bins: int = 32, min_count: int = 20) -> float:
    """A plug-in ε estimate from two samples of outputs: the largest |log frequency ratio| over histogram bins
    (numbers; vectors by their coordinate sum) or categories with at least ``min_count`` draws on the larger side.
    Biased upwards and without confidence: for choosing a pair only."""
    try:
        a = np.asarray(first, dtype=float)
        b = np.asarray(second, dtype=float)
        if a.ndim > 1:
            a, b = a.reshape(len(a), -1).sum(axis=1), b.reshape(len(b), -1).sum(axis=1)
        pooled = np.concatenate([a, b])
        edges = np.unique(np.quantile(pooled, np.linspace(0, 1, bins + 1)[1:-1]))
        ca = np.bincount(np.searchsorted(edges, a, side="right"), minlength=edges.size + 1)
        cb = np.bincount(np.searchsorted(edges, b, side="right"), minlength=edges.size + 1)
    except (TypeError, ValueError):
        keys = sorted({repr(o) for o in first} | {repr(o) for o in second})
        index = {k: i for i, k in enumerate(keys)}
        ca = np.bincount([index[repr(o)] for o in first], minlength=len(keys))
        cb = np.bincount([index[repr(o)] for o in second], minlength=len(keys))
    na, nb = ca.sum(), cb.sum()
    ratio = np.abs(np.log((ca + 1) / (na + 1)) - np.log((cb + 1) / (nb + 1)))
    enough = np.maximum(ca, cb) >= min_count
    return float(ratio[enough].max()) if enough.any() else 0.0


def _candidate_values(records: list[Any]) -> tuple[float, float]:
    try:
        values = np.asarray(records, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError("pair search with add/replace needs numeric records") from None
    low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
    spread = max(high - low, 1.0)
    return low - spread, high + spread


def search_pair(
    target: Target, pair: TargetPair, *, seed: int, budget: int = 24, trials: int = 2_000
) -> PairSearchResult:
    """Search neighbours of ``pair.data`` under ``pair.relation`` (``add_remove`` or ``replace_one``) on a budget of
    ``budget`` candidates with ``trials`` draws per side each; half random, half local search around the best."""
    if pair.relation not in ("add_remove", "replace_one"):
        raise ValueError(f"pair search needs relation 'add_remove' or 'replace_one'; got {pair.relation!r}")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"search budget must be an integer >= 1; got {budget!r}")
    records = _records(pair.data)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2,)))
    low, high = _candidate_values(records) if records else (-1.0, 1.0)
    base_rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2, 0, 0)))
    base = target.draw(pair.data, trials, base_rng, where="pair search on D")

    tried: list[dict[str, Any]] = []
    seen: set[str] = set()

    def evaluate(change: tuple[str, int, float | None], phase: str) -> float | None:
        action, index, value = change
        new = list(records)
        if action == "remove":
            if not new:
                return None
            removed = new.pop(index)
            text = f"remove record {index} ({_short(removed, 40)})"
        elif action == "add":
            new.append(value)
            text = f"add a record {value:.6g}"
        else:
            if not new:
                return None
            text = f"replace record {index} ({_short(new[index], 40)}) by {value:.6g}"
            new[index] = value
        if text in seen:
            return None
        seen.add(text)
        neighbour = _rebuild(pair.data, new)
        side_rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2, len(tried) + 1, 1)))
        outputs = target.draw(neighbour, trials, side_rng, where=f"pair search, candidate {len(tried) + 1}")
        estimate = estimated_divergence(base, outputs)
        tried.append(
            {
                "change": text,
                "neighbour": _short(neighbour),
                "estimate": estimate,
                "is_estimate": True,
                "phase": phase,
                "_neighbour": neighbour,
                "_change": change,
            }
        )
        return estimate

    def random_change() -> tuple[str, int, float | None]:
        index = int(rng.integers(0, max(len(records), 1)))
        value = float(rng.choice([low, high])) if rng.random() < 0.3 else float(rng.uniform(low, high))
        if pair.relation == "replace_one":
            return ("replace", index, value)
        return ("remove", index, None) if rng.random() < 0.5 and records else ("add", 0, value)

    random_budget = max(1, budget // 2)
    attempts = 0
    while len(tried) < random_budget and attempts < 20 * budget:
        attempts += 1
        evaluate(random_change(), "random")
    step = (high - low) / 4
    while len(tried) < budget and attempts < 40 * budget:
        attempts += 1
        best = max(tried, key=lambda t: t["estimate"])
        action, index, value = best["_change"]
        if action == "remove":
            change = ("remove", int(rng.integers(0, len(records))), None)
        else:
            change = (action, index, float(value + rng.choice([-1.0, 1.0]) * step))
            step = max(step / 2, (high - low) * 1e-3)
        evaluate(change, "local")
    if not tried:
        raise ValueError("pair search found no candidate neighbour")
    best = max(tried, key=lambda t: t["estimate"])
    chosen = TargetPair(
        data=pair.data,
        neighbour=best["_neighbour"],
        query=None,
        description=f"searched ({pair.relation}, {len(tried)} candidates): {best['change']}",
        relation=pair.relation,
        noise=pair.noise,
        source=pair.source,
    )
    public = tuple({k: v for k, v in t.items() if not k.startswith("_")} for t in tried)
    for entry in public:
        entry["estimate"] = entry["estimate"] if math.isfinite(entry["estimate"]) else None
    return PairSearchResult(pair=chosen, tried=public)
