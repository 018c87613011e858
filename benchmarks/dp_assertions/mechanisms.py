"""A sample suite of DP mechanisms for the DP-assertion experiment (benchmarks/bench_dp_assertions.py).

Ten correct mechanisms, each with a claim that is true for the pair its test audits (numpy, diffprivlib, OpenDP and
dplens's own secure sampler among them), and four planted bugs: a sensitivity slip, a claim of half the ε, the
textbook float Laplace, a forgotten clip. Discrete noise is the two-sided geometric (discrete Laplace) distribution:
P(k) ∝ exp(−ε|k|/Δ) is exactly ε-DP for a query of sensitivity Δ (Ghosh, Roughgarden, Sundararajan 2009).
"""

from __future__ import annotations

import math

import numpy as np

from dplens.auditing.targets import batched, opendp, randomise

EPSILON = 1.0
CLIP = 5  # the clipping bound of the summed values


def _geometric(rng, epsilon_per_unit, size):
    p = 1.0 - math.exp(-epsilon_per_unit)
    return rng.geometric(p, size) - rng.geometric(p, size)


# ---- ten correct mechanisms ----------------------------------------------------------------------------------------


@batched
def geometric_count(data, rng, size):
    """A count with two-sided geometric noise: ε = 1 (add/remove one record)."""
    return int(np.sum(data)) + _geometric(rng, EPSILON, size)


@batched
def randomized_response(bit, rng, size):
    """Binary randomized response: keep the bit with probability e^ε/(1 + e^ε): ε = 1 (replace the record)."""
    keep = rng.random(size) < math.exp(EPSILON) / (1 + math.exp(EPSILON))
    return np.where(keep, int(bit[0]), 1 - int(bit[0]))


@batched
def clipped_sum(data, rng, size):
    """A sum of values clipped to [0, 5] with geometric noise for sensitivity 5: ε = 1."""
    total = int(np.sum(np.clip(np.asarray(data), 0, CLIP)))
    return total + _geometric(rng, EPSILON / CLIP, size)


@batched
def histogram(data, rng, size):
    """Counts of the labels 0, 1, 2 with independent geometric noise per bin: ε = 1 (one record moves one bin)."""
    counts = np.bincount(np.asarray(data, dtype=int), minlength=3)[:3]
    return counts[None, :] + _geometric(rng, EPSILON, (size, 3))


@batched
def report_noisy_max(data, rng, size):
    """The exponential mechanism on the label counts (report-noisy-max with Gumbel noise of scale 2/ε): ε = 1."""
    counts = np.bincount(np.asarray(data, dtype=int), minlength=3)[:3].astype(float)
    noisy = counts[None, :] + rng.gumbel(0.0, 2.0 / EPSILON, (size, 3))
    return np.argmax(noisy, axis=1)


def _diffprivlib():
    from diffprivlib import mechanisms

    return mechanisms


diffprivlib_geometric = randomise(
    _diffprivlib().Geometric(epsilon=EPSILON, sensitivity=1), query=lambda data: int(np.sum(data))
)
diffprivlib_binary = randomise(
    _diffprivlib().Binary(epsilon=EPSILON, value0="no", value1="yes"), query=lambda bit: "yes" if bit[0] else "no"
)


def _opendp_count(then):
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return opendp((dp.vector_domain(dp.atom_domain(T=int)), dp.symmetric_distance()) >> dp.t.then_count() >> then(dp))


opendp_laplace_count = _opendp_count(lambda dp: dp.m.then_laplace(1.0 / EPSILON))  # discrete Laplace on integers
GAUSSIAN_SCALE = 2.0
opendp_gaussian_count = _opendp_count(lambda dp: dp.m.then_gaussian(GAUSSIAN_SCALE))  # discrete Gaussian


def gaussian_claim(delta: float = 1e-5) -> float:
    """The ε at δ of OpenDP's discrete Gaussian of scale 2 on a count (Canonne, Kamath, Steinke 2020), from dplens's
    accountant: an upper bound, so the claim is true."""
    from dplens import Accountant, DiscreteGaussian

    return Accountant().compose(DiscreteGaussian(sigma=GAUSSIAN_SCALE)).epsilon(delta)


def dplens_laplace():
    """dplens's own LaplaceMechanism: its release() is exact discrete Laplace noise on a power-of-two grid, accounted
    by a DiscreteLaplace event whose ε is at most the continuous 1/scale."""
    from dplens.mechanisms.additive import LaplaceMechanism

    return LaplaceMechanism(scale=1.0 / EPSILON)


# ---- four planted bugs -----------------------------------------------------------------------------------------------


@batched
def sensitivity_slip(ratings, rng, size):
    """A sum of ratings in [0, 2] with noise calibrated for sensitivity 1: removing a rating of 2 makes it 2ε-DP."""
    return int(np.sum(ratings)) + _geometric(rng, EPSILON, size)


# A claim of half the ε: geometric_count claimed at ε = 0.5 (the test states the wrong claim).


def textbook_float_laplace(data, rng):
    """The textbook Laplace mechanism in doubles (Mironov 2012): float(sum) + Laplace(1/ε)."""
    return float(np.sum(data)) + rng.laplace(0.0, 1.0 / EPSILON)


@batched
def forgotten_clip(data, rng, size):
    """clipped_sum without the clip: a record of 100 moves the sum 20× more than the noise covers."""
    return int(np.sum(data)) + _geometric(rng, EPSILON / CLIP, size)
