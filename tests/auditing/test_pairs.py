"""Pair search, and the top-level dplens.audit on targets."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import dplens
from dplens.auditing.pairs import estimated_divergence, search_pair
from dplens.auditing.targets import TargetPair, as_target

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "targets"


def _clipped_sum(data, rng):
    """A sum clipped to [0, 3] with noise for sensitivity 1: the worst neighbour adds or removes a 3."""
    return float(np.sum(np.clip(data, 0, 3))) + rng.laplace(0.0, 1.0)


def test_search_prefers_the_neighbour_that_leaks_most():
    pair = TargetPair(data=[0.0, 0.0, 3.0, 1.0], relation="add_remove")
    found = search_pair(as_target(_clipped_sum), pair, seed=0, budget=16, trials=3_000)
    assert len(found.tried) == 16 and {t["phase"] for t in found.tried} == {"random", "local"}
    best = max(found.tried, key=lambda t: t["estimate"])
    assert found.pair.description.endswith(best["change"])
    shift = abs(np.sum(np.clip(found.pair.data, 0, 3)) - np.sum(np.clip(found.pair.neighbour, 0, 3)))
    assert shift >= 2.0  # it found a neighbour that moves the clipped sum by (nearly) the full 3


def test_replace_one_keeps_the_size():
    pair = TargetPair(data=[1.0, 2.0], relation="replace_one")
    found = search_pair(as_target(_clipped_sum), pair, seed=1, budget=4, trials=500)
    assert len(found.pair.neighbour) == 2


def test_estimated_divergence_is_zero_for_equal_samples_and_grows_with_the_shift():
    rng = np.random.default_rng(0)
    same = estimated_divergence(rng.laplace(size=5000), rng.laplace(size=5000))
    shifted = estimated_divergence(rng.laplace(size=5000), 3 + rng.laplace(size=5000))
    assert same < 0.5 < 2.0 < shifted
    assert estimated_divergence(["a"] * 50 + ["b"] * 50, ["a"] * 90 + ["b"] * 10) > 1.0


def test_search_refuses_bad_input():
    with pytest.raises(ValueError, match="relation 'add_remove' or 'replace_one'"):
        search_pair(as_target(_clipped_sum), TargetPair(data=[1.0], relation="swap"), seed=0)
    with pytest.raises(ValueError, match="a data set of records"):
        search_pair(as_target(_clipped_sum), TargetPair(data=3.0, relation="add_remove"), seed=0)


def test_dplens_audit_takes_paths_callables_and_requires_a_claim(monkeypatch):
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    try:
        result = dplens.audit("mechanisms:geometric", "pair.json", claim=(1.0, 0.0), trials=2_000, seed=0)
        assert result.verdict.value == "CONSISTENT" and result.target["path"] == "mechanisms:geometric"
        with pytest.raises(ValueError, match=r"needs claim=\(epsilon, delta\)"):
            dplens.audit("mechanisms:geometric", "pair.json", trials=100)
        with pytest.raises(ValueError, match="needs a pair"):
            dplens.audit(_clipped_sum, claim=(1.0, 0.0), trials=100)
        from dplens.mechanisms.additive import LaplaceMechanism

        release = dplens.audit(
            as_target(LaplaceMechanism(scale=1.0)), (1.0, 0.0), claim=(1.0, 0.0), trials=5_000, seed=0
        )
        assert release.verdict.value == "CONSISTENT" and release.target["kind"] == "release"
    finally:
        sys.modules.pop("mechanisms", None)
