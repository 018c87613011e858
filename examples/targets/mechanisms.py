"""Example targets for ``dplens audit --target``: mechanisms as a privacy engineer might ship them.

Run from this directory, e.g.::

    dplens audit --target mechanisms:textbook_laplace --pair pair.json --claim-epsilon 1 --trials 100000

Each function takes the data set and the ``numpy.random.Generator`` dplens hands it, and returns one output.
"""

import math
import random

import numpy as np

EPSILON = 1.0


def textbook_laplace(data, rng):
    """The textbook floating-point Laplace mechanism (a count, sensitivity 1): NOT epsilon-DP in doubles
    (Mironov 2012): some outputs can only come from one of two neighbouring inputs."""
    return float(np.sum(data)) + rng.laplace(0.0, 1.0 / EPSILON)


def geometric(data, rng):
    """The same integer count with exact two-sided geometric noise: epsilon-DP (Ghosh, Roughgarden, Sundararajan
    2009). The difference of two i.i.d. geometric variables is two-sided geometric, P(k) proportional to
    exp(-EPSILON |k|)."""
    p = -math.expm1(-EPSILON)
    return int(np.sum(data)) + int(rng.geometric(p)) - int(rng.geometric(p))


def sensitivity_slip(data, rng):
    """A sum of values in [0, 3] noised as if its sensitivity were 1 (the true sensitivity is 3)."""
    return float(np.sum(np.clip(data, 0, 3))) + rng.laplace(0.0, 1.0 / EPSILON)


def global_rng_laplace(data, rng):
    """Ignores the generator it is handed and draws from numpy's global RNG: not reproducible from a seed."""
    return float(np.sum(data)) + np.random.laplace(0.0, 1.0 / EPSILON)


def python_random_laplace(data, rng):
    """Textbook inverse-CDF Laplace on Python's random.random() (global state, not reproducible)."""
    u = random.random() - 0.5
    return float(np.sum(data)) + -(1.0 / EPSILON) * math.copysign(1.0, u) * math.log(1.0 - 2.0 * abs(u))


def noisy_sum_batched(data, rng, size):
    """A batched target: ``size`` outputs per call (vectorised), here the textbook float Laplace again."""
    return float(np.sum(data)) + rng.laplace(0.0, 1.0 / EPSILON, size=size)


noisy_sum_batched.dplens_batched = True


def randomized_response(data, rng):
    """Binary randomized response on the first record (epsilon = EPSILON): a categorical output."""
    truth = bool(data[0])
    keep = rng.random() < math.exp(EPSILON) / (1.0 + math.exp(EPSILON))
    return truth if keep else not truth


def distance_score(outputs):
    """A user score (``--score mechanisms:distance_score``): higher means closer to the larger count."""
    return np.asarray(outputs, dtype=float)
