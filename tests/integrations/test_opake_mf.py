"""Reading opake-dpftrl 0.16 accounting processes (dplens.integrations.opake_mf).

opake imports on Python 3.13 only here, so these tests build objects with opake's class names and fields (its
``opake.api.accounting.dpftrl`` dataclasses: ``CyclicPoisson(inner, sample_rate, n_steps, truncated_batch_size,
dataset_size)``, ``BMinSep(inner, n_steps, p0)``, ``BallsInBins(inner, num_bins, n_steps)``, ``MfGaussian(
noise_multiplier, strategy, n_steps, min_sep, max_participations)``; strategies with ``coefficients(n_steps=…,
min_sep=…, max_participations=…)``). Each reading must give the number dplens gives for the same training named
directly; benchmarks/bench_opake_mf.py runs the reader on opake's own objects in a 3.13 environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from dplens.accountant import matrix_factorization as mf
from dplens.accountant.mf_accounting import bandmf_epsilon, mf_epsilon
from dplens.integrations.opake_mf import opake_epsilon

DELTA = 1e-5


@dataclass(frozen=True)
class BandMfStrategy:
    bands: int
    raw: tuple[float, ...] = ()
    asked: list = field(default_factory=list, compare=False)

    def coefficients(self, *, n_steps, min_sep=1, max_participations=None):
        self.asked.append((n_steps, min_sep, max_participations))
        return np.asarray(self.raw, dtype=float)  # opake's are torch tensors: only .tolist() is used


@dataclass(frozen=True)
class BltStrategy(BandMfStrategy):
    pass


@dataclass(frozen=True)
class BisrStrategy(BandMfStrategy):
    normalized: bool = True


@dataclass(frozen=True)
class IdentityStrategy:
    pass


@dataclass(frozen=True)
class MfGaussian:
    noise_multiplier: float
    strategy: object
    n_steps: int | None = None
    min_sep: int = 1
    max_participations: int | None = None


@dataclass(frozen=True)
class CyclicPoisson:
    inner: MfGaussian
    sample_rate: float
    n_steps: int
    truncated_batch_size: int | None = None
    dataset_size: int | None = None


@dataclass(frozen=True)
class BMinSep:
    inner: MfGaussian
    n_steps: int
    p0: float


@dataclass(frozen=True)
class BallsInBins:
    inner: MfGaussian
    num_bins: int
    n_steps: int


COEFS = (2.0, 1.2, 0.7, 0.4)  # opake's C is not normalised: the release C·g + σz has sensitivity ‖c‖
NORM = float(np.linalg.norm(COEFS))


def test_cyclic_poisson_reads_as_bandmf_with_the_normalised_coefficients():
    process = CyclicPoisson(MfGaussian(1.1, BandMfStrategy(4, COEFS)), sample_rate=0.05, n_steps=400)
    got = opake_epsilon(process, delta=DELTA)
    direct = bandmf_epsilon(
        iterations=400,
        sampling_prob=0.05,
        noise_multiplier=1.1 / NORM,
        delta=DELTA,
        strategy=np.asarray(COEFS) / np.linalg.norm(COEFS),
    )
    assert got.epsilon == direct.epsilon and got.bound == direct.bound == "certified"
    assert got.rounds == 100
    identity = opake_epsilon(CyclicPoisson(MfGaussian(1.1, IdentityStrategy()), 0.05, 400), delta=DELTA)
    dp_sgd = bandmf_epsilon(iterations=400, sampling_prob=0.05, noise_multiplier=1.1, delta=DELTA, strategy=[1.0])
    assert identity.rounds == 400 and identity.epsilon == dp_sgd.epsilon  # b = 1: Poisson DP-SGD, every step a round


def test_b_min_sep_reads_its_rate_and_separation():
    strategy = BandMfStrategy(4, COEFS)
    process = BMinSep(MfGaussian(1.0, strategy), n_steps=200, p0=0.05)
    got = opake_epsilon(process, delta=1e-3, monte_carlo=20_000, seed=3)
    assert strategy.asked[-1] == (200, 4, 50)  # the schema opake's own accountant asks the strategy for
    c = mf.toeplitz_strategy(COEFS, 200, normalize=True)
    direct = mf_epsilon(
        mechanism="bandmf",
        sampling="b-min-sep",
        min_separation=4,
        strategy=c,
        dataset_size=20_000,
        batch_size=1000,
        epochs=10,
        noise_multiplier=1.0 / NORM,
        delta=1e-3,
        monte_carlo=20_000,
        seed=3,
    )
    assert got.epsilon == direct.epsilon and got.bound == "upper"
    assert got.epsilon_monte_carlo == direct.epsilon_monte_carlo < got.epsilon
    assert "rate 0.0588235" in got.monte_carlo["dominating_pair"]  # p = 1/(N/B − b + 1) = 1/17


def test_balls_in_bins_reads_as_fixed_bins():
    raw = tuple(np.linspace(1.0, 0.2, 64) ** 2)  # a BLT-like full Toeplitz column
    process = BallsInBins(MfGaussian(1.5, BltStrategy(0, raw)), num_bins=16, n_steps=64)
    got = opake_epsilon(process, delta=1e-3)
    c = mf.toeplitz_strategy(raw, 64, normalize=True)
    direct = mf_epsilon(
        mechanism="matrix",
        sampling="fixed-bins",
        strategy=c,
        dataset_size=160,
        batch_size=10,
        epochs=4,
        noise_multiplier=1.5 / np.linalg.norm(raw),
        delta=1e-3,
    )
    assert got.epsilon == pytest.approx(direct.epsilon, rel=1e-12) and got.sampling == "fixed-bins"
    assert process.inner.strategy.asked[-1] == (64, 16, 4)


def test_a_bare_mf_gaussian_is_the_unamplified_min_sep_bound():
    process = MfGaussian(2.0, BandMfStrategy(4, COEFS), n_steps=100, min_sep=10, max_participations=10)
    got = opake_epsilon(process, delta=DELTA)
    sens = mf.minsep_sensitivity(mf.toeplitz_strategy(COEFS, 100, normalize=True), min_separation=10).value
    assert got.sensitivity == pytest.approx(sens, rel=1e-12) and got.sampling == "min-sep"
    assert got.noise_multiplier == pytest.approx(2.0 / NORM, rel=1e-15)
    # opake's own bare accounting: μ = sensitivity(C)/σ for the raw C, the same μ
    assert got.sensitivity / got.noise_multiplier == pytest.approx(sens * NORM / 2.0, rel=1e-12)


@pytest.mark.parametrize(
    ("process", "words"),
    [
        (CyclicPoisson(MfGaussian(1.0, BisrStrategy(4, COEFS)), 0.1, 40), "normalized=True"),
        (BallsInBins(MfGaussian(1.0, object()), 4, 40), "strategy must be one of"),
        (CyclicPoisson(MfGaussian(1.0, BandMfStrategy(2, COEFS)), 0.1, 40), "beyond its 2 bands"),
        (BMinSep(MfGaussian(1.0, BandMfStrategy(4, COEFS)), 40, 0.1234567891), "not B/N"),
        (MfGaussian(1.0, BandMfStrategy(4, COEFS)), "no n_steps"),
        (object(), "process must be an opake-dpftrl 0.16 object with 'n_steps'"),
    ],
)
def test_what_it_cannot_read_is_refused_in_one_line(process, words):
    with pytest.raises(ValueError, match=words) as caught:
        opake_epsilon(process, delta=DELTA)
    assert "\n" not in str(caught.value)


def test_an_unnormalised_bisr_is_read():
    strategy = BisrStrategy(4, COEFS, normalized=False)
    got = opake_epsilon(CyclicPoisson(MfGaussian(1.0, BandMfStrategy(4, COEFS)), 0.1, 40), delta=DELTA)
    also = opake_epsilon(BallsInBins(MfGaussian(1.0, strategy), 4, 40), delta=DELTA)
    assert got.epsilon > 0 and also.epsilon > 0 and also.sampling == "fixed-bins"
