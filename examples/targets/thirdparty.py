"""Third-party mechanisms as dplens targets (needs the [thirdparty] extra: diffprivlib, opendp).

    dplens audit --target thirdparty:diffprivlib_laplace --pair pair.json --claim-epsilon 1 --trials 100000
    dplens audit --target thirdparty:opendp_laplace --pair pair_float.json --claim-epsilon 1 --trials 20000

diffprivlib mechanisms go through dplens's ``randomise`` adapter (seeded through their ``random_state``);
OpenDP measurements through ``opendp`` (OpenDP samples from its own generator: the audit reports
``reproducible: false``).
"""

import numpy as np

from dplens.auditing.targets import opendp, randomise

EPSILON = 1.0
EXTRA = "these examples need the [thirdparty] extra: pip install 'dplens[thirdparty]'"


def _count(data):
    return float(np.sum(data))


def _diffprivlib():
    try:
        from diffprivlib import mechanisms
    except ImportError as err:
        raise ImportError(f"{EXTRA} ({err})") from None
    return mechanisms


# diffprivlib 0.6: Laplace, Gaussian (delta > 0), Geometric (integers), Binary (randomized response), Exponential.
diffprivlib_laplace = randomise(_diffprivlib().Laplace(epsilon=EPSILON, sensitivity=1), query=_count)
diffprivlib_gaussian = randomise(
    _diffprivlib().GaussianAnalytic(epsilon=EPSILON, delta=1e-5, sensitivity=1), query=_count
)
diffprivlib_geometric = randomise(
    _diffprivlib().Geometric(epsilon=EPSILON, sensitivity=1), query=lambda d: int(np.sum(d))
)
diffprivlib_binary = randomise(
    _diffprivlib().Binary(epsilon=EPSILON, value0="no", value1="yes"), query=lambda d: "yes" if d[0] else "no"
)


def _exponential_utility(data):
    """Utility of candidates a, b, c: the record moves candidate c's utility by at most 1 (sensitivity 1)."""
    return [1.0, 1.0, float(np.sum(data)) - 2.0]


class DiffprivlibExponential:
    """diffprivlib's exponential mechanism with a data-dependent utility: ``randomise(data)`` builds it on the
    utility of ``data`` and draws from this object's ``_rng`` (which dplens seeds)."""

    def __init__(self):
        self._rng = None

    def randomise(self, data):
        mechanism = _diffprivlib().Exponential(
            epsilon=EPSILON,
            sensitivity=1,
            utility=_exponential_utility(data),
            candidates=["a", "b", "c"],
            random_state=self._rng,
        )
        return mechanism.randomise()


diffprivlib_exponential = randomise(DiffprivlibExponential())


def _opendp():
    try:
        import opendp.prelude as dp
    except ImportError as err:
        raise ImportError(f"{EXTRA} ({err})") from None

    dp.enable_features("contrib")
    return dp


def _opendp_measurement(kind):
    dp = _opendp()
    if kind == "laplace":
        space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
        return dp.m.make_laplace(*space, scale=1.0 / EPSILON)
    if kind == "discrete_laplace":
        return dp.m.make_laplace(dp.atom_domain(T=int), dp.absolute_distance(T=int), scale=1.0 / EPSILON)
    if kind == "gaussian":
        space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
        return dp.m.make_gaussian(*space, scale=1.0)
    if kind == "discrete_gaussian":
        return dp.m.make_gaussian(dp.atom_domain(T=int), dp.absolute_distance(T=int), scale=1.0)
    return dp.m.make_randomized_response_bool(prob=float(np.exp(EPSILON) / (1 + np.exp(EPSILON))))


# OpenDP measurements take the query value itself here (the pair files hold it: pair_float.json, pair_int.json).
opendp_laplace = opendp(_opendp_measurement("laplace"))
opendp_discrete_laplace = opendp(_opendp_measurement("discrete_laplace"))
opendp_gaussian = opendp(_opendp_measurement("gaussian"))
opendp_discrete_gaussian = opendp(_opendp_measurement("discrete_gaussian"))
opendp_randomized_response = opendp(_opendp_measurement("randomized_response"))
