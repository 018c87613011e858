"""Canary games on DP-SGD: audit a training run with canaries, in many runs or in one.

The strongest adversary of Nasr, Song, Thakurta, Papernot, Carlini ("Adversary instantiation", S&P 2021) and of
Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski, Carlini, Terzis ("Tight auditing of differentially private machine
learning", USENIX Security 2023) inserts a **Dirac gradient canary** — a record whose clipped gradient is C·e_j, of
norm C on a coordinate j no other record touches — and observes **every intermediate update**. The canary
coordinate of the update at step t is then, after removing the known scale −η/B (learning rate η, the fixed
expected batch size B),

    x_t = C·b_t + N(0, σ²C²),   b_t ~ Bernoulli(q) if the canary is in, 0 if out,

exactly the Poisson-subsampled Gaussian whose add/remove privacy curve the accountant bounds (Mironov, Talwar,
Zhang 2019; Zhu, Dong, Wang 2022 Theorem 11): the white-box game is tight, and its exact per-step likelihood
ratio Σ_t log((1 − q) + q·exp((x_t/C − ½)/σ²)) is the Neyman–Pearson optimal score. Since it needs only the
canary's coordinate, the many-run game is vectorised across trainings (:class:`DiracCanaryGame`, microseconds per
training); a test checks that it has the distribution of the canary coordinate of the real numpy loop of
:mod:`dplens.mechanisms.dpsgd`, which the one-run game and the input-canary games run.

Input canaries are real records the training sees like any other: mislabelled records or out-of-distribution ones
(ml_privacy_meter's "mislabelled" canaries; Jagielski, Ullman, Oprea 2020 poison the input the same way), scored by
the final model's loss, or by the dot product of the canary's clipped gradient with every update (white-box).

Two designs, one per function:

- :func:`multi_run_canary_audit` — the distinguishing game: N trainings with the canary in and N without; the
  scores go through :func:`dplens.auditing.games.audit` (a threshold grid fixed from independent pilot trainings,
  weighted Bonferroni, Clopper–Pearson; parallel and checkpointed by :func:`dplens.auditing.runner.run_chunks`).
- :func:`one_run_canary_audit` — one training with m canaries, each included independently with probability ½
  before the run (Steinke, Nasr, Jagielski, NeurIPS 2023), analysed by :func:`dplens.auditing.scores.audit_scores`.

A user's training runs the same games through :class:`UserTraining`: ``train(data, rng)`` (data in, a numpy
``Generator`` for all its randomness, any output back) and ``score(output, canaries)`` (one score per canary,
higher ⇒ "in"); both may be ``"module:name"`` strings, imported where they run (workers, Dask). When user code
raises, the error names the function, the training and the seed that reproduces it.

Validity: the inclusion bits and the canaries are drawn from their own seed streams before the run; scores are
fixed functions of the observation (no choice on the counted trainings); the rest is the validity of the games.

>>> game = DiracCanaryGame(noise_multiplier=1.0, sampling_rate=0.01, steps=1000)
>>> game.sample(True, 3, np.random.default_rng(0)).shape
(3, 1000)
"""

from __future__ import annotations

import enum
import importlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special, stats

from dplens.accountant import events as ev
from dplens.auditing import games
from dplens.auditing import scores as sc
from dplens.auditing.bounds import check_option as _option
from dplens.auditing.host import host_value
from dplens.auditing.runner import check_seed
from dplens.mechanisms.additive import SubsampledGaussianMechanism
from dplens.mechanisms.base import NeighbouringPair, check_count, check_rng
from dplens.mechanisms.dpsgd import LearningRateSchedule, LossModel, link_residual, noisy_sgd

__all__ = [
    "CanaryKind",
    "CanaryScore",
    "DiracCanaryGame",
    "DpSgdTraining",
    "InputCanary",
    "Observation",
    "TrainingGamePlan",
    "UserCodeError",
    "UserTraining",
    "multi_run_canary_audit",
    "one_run_canary_audit",
    "one_run_game_audit",
    "training_game_audit",
    "training_game_plan",
]

NASR_2023 = "Nasr, Hayes, Steinke, Balle, Tramer, Jagielski, Carlini, Terzis 2023 (USENIX Security; arXiv:2302.07956)"
_LOG_UNDERFLOW = 745.0  # exp(−745) underflows: binomial terms below max − 745 cannot change a log-sum-exp
_LLR_BLOCK = 1024


# --------------------------------------------------------------------------------------------
# Options (types, not strings)
# --------------------------------------------------------------------------------------------


class CanaryKind(enum.Enum):
    """GRADIENT: a Dirac gradient canary (white-box); INPUT: a record the training sees like any other."""

    GRADIENT = "gradient"
    INPUT = "input"


class InputCanary(enum.Enum):
    """Which records serve as input canaries: mislabelled in-distribution records, or out-of-distribution ones."""

    MISLABELLED = "mislabelled"
    OUT_OF_DISTRIBUTION = "out_of_distribution"


class Observation(enum.Enum):
    """What the auditor sees: the final model only, or every intermediate update (white-box)."""

    FINAL = "final"
    ALL_STEPS = "all_steps"


class CanaryScore(enum.Enum):
    """LIKELIHOOD_RATIO: the exact log-likelihood ratio (gradient canaries); DOT_PRODUCT: the canary's (clipped)
    gradient against the model's movement; LOSS: minus the final model's loss on the canary (input canaries)."""

    LIKELIHOOD_RATIO = "likelihood_ratio"
    DOT_PRODUCT = "dot_product"
    LOSS = "loss"


_DEFAULT_SCORE = {
    (CanaryKind.GRADIENT, Observation.ALL_STEPS): CanaryScore.LIKELIHOOD_RATIO,
    (CanaryKind.GRADIENT, Observation.FINAL): CanaryScore.DOT_PRODUCT,
    (CanaryKind.INPUT, Observation.FINAL): CanaryScore.LOSS,
    (CanaryKind.INPUT, Observation.ALL_STEPS): CanaryScore.DOT_PRODUCT,
}
_ALLOWED_SCORES = {
    (CanaryKind.GRADIENT, Observation.ALL_STEPS): (CanaryScore.LIKELIHOOD_RATIO, CanaryScore.DOT_PRODUCT),
    (CanaryKind.GRADIENT, Observation.FINAL): (CanaryScore.DOT_PRODUCT, CanaryScore.LIKELIHOOD_RATIO),
    (CanaryKind.INPUT, Observation.FINAL): (CanaryScore.LOSS,),
    (CanaryKind.INPUT, Observation.ALL_STEPS): (CanaryScore.DOT_PRODUCT,),
}


def _resolve_score(canary: CanaryKind, observe: Observation, score: Any) -> CanaryScore:
    if score is None:
        return _DEFAULT_SCORE[(canary, observe)]
    score = _option(score, CanaryScore, "score")
    allowed = _ALLOWED_SCORES[(canary, observe)]
    if score not in allowed:
        raise ValueError(
            f"score {score.value!r} does not apply to {canary.value} canaries observed at {observe.value}; "
            f"allowed: {[s.value for s in allowed]}"
        )
    return score


# --------------------------------------------------------------------------------------------
# Numbers shared by both games
# --------------------------------------------------------------------------------------------


def _positive(name: str, value: Any) -> float:
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    if not ok or not (math.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)


def _rate(value: Any) -> float:
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    if not ok or not 0 < float(value) <= 1:
        raise ValueError(f"sampling_rate must be in (0, 1]; got {value!r}")
    return float(value)


def _step_llr(x: np.ndarray, sigma: float, q: float) -> np.ndarray:
    """log((1 − q) + q·exp((x − ½)/σ²)) per step, x in units of C (one step of the subsampled Gaussian)."""
    z = (x - 0.5) / sigma**2
    if q == 1.0:
        return z
    return np.logaddexp(math.log1p(-q), math.log(q) + z)


def _final_llr(total: np.ndarray, sigma: float, q: float, steps: int) -> np.ndarray:
    """The exact log-likelihood ratio of the final canary coordinate s = B + N(0, σ²T), B ~ Binom(T, q) against 0.

    log Σ_k P[B = k]·exp((k s − k²/2)/(σ²T)); binomial terms more than 745 below the largest (which cannot change
    the sum in double precision) are dropped. Increasing in s (a mixture of non-negative shifts), so the plain sum
    (:attr:`CanaryScore.DOT_PRODUCT`) orders the trainings the same way.
    """
    k = np.arange(steps + 1, dtype=float)
    log_pmf = stats.binom.logpmf(k, steps, q)
    keep = log_pmf > np.max(log_pmf) - _LOG_UNDERFLOW
    k, log_pmf = k[keep], log_pmf[keep]
    variance = sigma**2 * steps
    s = np.asarray(total, dtype=float).reshape(-1)
    out = np.empty(s.size)
    for start in range(0, s.size, _LLR_BLOCK):
        block = s[start : start + _LLR_BLOCK, None]
        out[start : start + _LLR_BLOCK] = special.logsumexp(log_pmf + (k * block - 0.5 * k * k) / variance, axis=1)
    return out


def _step_event(noise_multiplier: float, sampling_rate: float, steps: int) -> ev.Event:
    step = ev.PoissonSampled(sampling_rate=sampling_rate, event=ev.Gaussian(noise_multiplier=noise_multiplier))
    return step if steps == 1 else ev.SelfComposed(event=step, count=steps)


# --------------------------------------------------------------------------------------------
# The vectorised white-box game
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DiracCanaryGame:
    """The white-box Dirac-canary game on DP-SGD, vectorised across trainings (Nasr et al. 2021, 2023).

    A "training" is the canary coordinate of every update of a DP-SGD run, in units of C after the known scale is
    removed: x_t = b_t + N(0, σ²), b_t ~ Bernoulli(q) when the canary is in (``data=True``), 0 when out — the
    distribution of that coordinate in the real loop (Poisson sampling, clipping to C, noise σC on the sum). With
    ``observe=FINAL`` a training is the final coordinate's sum Σ_t x_t = Binom(T, q) + N(0, σ²T) (in). The
    :meth:`log_likelihood_ratio` is exact for both, so :func:`dplens.auditing.games.audit` runs the optimal test.
    """

    noise_multiplier: float
    sampling_rate: float
    steps: int
    observe: Observation = Observation.ALL_STEPS

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _positive("noise_multiplier", self.noise_multiplier))
        object.__setattr__(self, "sampling_rate", _rate(self.sampling_rate))
        object.__setattr__(self, "steps", check_count(self.steps, name="steps"))
        object.__setattr__(self, "observe", _option(self.observe, Observation, "observe"))

    @property
    def event(self) -> ev.Event:
        """The DP-SGD run's privacy event (add/remove), what the accountant's ε is computed from."""
        return _step_event(self.noise_multiplier, self.sampling_rate, self.steps)

    def _steps_mechanism(self) -> SubsampledGaussianMechanism:
        return SubsampledGaussianMechanism(
            noise_multiplier=self.noise_multiplier, sampling_rate=self.sampling_rate, steps=self.steps
        )

    @staticmethod
    def _present(data: Any, name: str) -> bool:
        if not isinstance(data, bool | np.bool_):
            raise ValueError(f"{name} must be True (canary in) or False (canary out); got {data!r}")
        return bool(data)

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """n trainings' observations: shape (n, steps) for ALL_STEPS, (n, 1) for FINAL."""
        present, n, rng = self._present(data, "data"), check_count(n), check_rng(rng)
        if self.observe is Observation.ALL_STEPS:
            return self._steps_mechanism().sample(1.0 if present else 0.0, n, rng)
        total = self.noise_multiplier * math.sqrt(self.steps) * rng.standard_normal(n)
        if present:
            total += rng.binomial(self.steps, self.sampling_rate, n)
        return total[:, None]

    def release(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        return self.sample(data, 1, rng)[0]

    def log_likelihood_ratio(self, outputs: Any, data: Any, neighbour: Any) -> np.ndarray:
        """log p_data(o) − log p_neighbour(o), exact (see the class docstring)."""
        a, b = self._present(data, "data"), self._present(neighbour, "neighbour")
        if a == b:
            return np.zeros(np.asarray(outputs).shape[0])
        if self.observe is Observation.ALL_STEPS:
            return self._steps_mechanism().log_likelihood_ratio(outputs, float(a), float(b))
        llr = _final_llr(np.asarray(outputs, dtype=float)[:, 0], self.noise_multiplier, self.sampling_rate, self.steps)
        return llr if a else -llr

    def worst_case_pair(self) -> NeighbouringPair:
        seen = "every update's canary coordinate" if self.observe is Observation.ALL_STEPS else "the final model"
        return NeighbouringPair(
            data=True,
            neighbour=False,
            description=(
                f"a Dirac gradient canary (norm C on its own coordinate) in the data set vs not (add/remove); "
                f"white-box: the auditor sees {seen} of {self.steps} steps"
            ),
        )

    def output_size(self) -> int:
        return self.steps if self.observe is Observation.ALL_STEPS else 1

    def __repr__(self) -> str:
        seen = "all steps" if self.observe is Observation.ALL_STEPS else "final model"
        return (
            f"DP-SGD white-box Dirac canary game (noise multiplier {self.noise_multiplier:g}, sampling rate "
            f"{self.sampling_rate:g}, {self.steps} steps; observed: {seen}; vectorised over trainings)"
        )


# --------------------------------------------------------------------------------------------
# The numpy DP-SGD training with canaries
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _CanaryGradients:
    """Per-example gradients for noisy_sgd: ∇ℓ on the first ``base_dim`` columns; a row with a non-zero marker
    column j ≥ base_dim is a Dirac canary whose gradient is C·e_j (its base columns are zero)."""

    base_dim: int
    model: LossModel
    clip_norm: float

    def __call__(self, theta: np.ndarray, xb: np.ndarray, yb: np.ndarray) -> np.ndarray:
        d0 = self.base_dim
        grads = np.empty_like(xb)
        base = xb[:, :d0]
        grads[:, :d0] = link_residual(theta[:d0], base, yb, self.model)[:, None] * base
        grads[:, d0:] = self.clip_norm * xb[:, d0:]
        return grads


def _clip(grads: np.ndarray, clip_norm: float) -> np.ndarray:
    norms = np.linalg.norm(grads, axis=1)
    return grads * np.minimum(1.0, clip_norm / np.maximum(norms, 1e-300))[:, None]


def _record_loss(theta: np.ndarray, x: np.ndarray, y: np.ndarray, model: LossModel) -> np.ndarray:
    z = x @ theta
    if model is LossModel.LINEAR:
        return 0.5 * (z - y) ** 2
    return np.logaddexp(0.0, z) - y * z


@dataclass(frozen=True, slots=True, kw_only=True)
class DpSgdTraining:
    """The project's numpy DP-SGD (:func:`dplens.mechanisms.dpsgd.noisy_sgd`) on a synthetic data set, for canary
    games: Poisson sampling with rate q, per-example gradients clipped to C, Gaussian noise σ·C on the sum, divided
    by the *fixed* expected batch size B = q·``dataset_size`` (never the realised batch, nor the realised data set
    size, which would make the scale itself depend on who is in), constant learning rate, no momentum, no
    projection. Its privacy event is the add/remove Poisson-subsampled Gaussian composed ``steps`` times.

    The base data set (``dataset_size`` records of ``model_dim`` features, a logistic or linear model) is fixed by
    ``data_seed``. Gradient canaries add one marker column each (the Dirac coordinate); input canaries are ordinary
    records. Called as ``train(data, rng)`` it returns the per-step updates, shape (steps, d) — the interface of a
    user's training function (:class:`UserTraining`).
    """

    noise_multiplier: float
    sampling_rate: float
    steps: int
    clip_norm: float = 1.0
    learning_rate: float = 0.5
    dataset_size: int = 1000
    model_dim: int = 10
    model: LossModel = LossModel.LOGISTIC
    data_seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _positive("noise_multiplier", self.noise_multiplier))
        object.__setattr__(self, "sampling_rate", _rate(self.sampling_rate))
        object.__setattr__(self, "steps", check_count(self.steps, name="steps"))
        object.__setattr__(self, "clip_norm", _positive("clip_norm", self.clip_norm))
        object.__setattr__(self, "learning_rate", _positive("learning_rate", self.learning_rate))
        object.__setattr__(self, "dataset_size", check_count(self.dataset_size, name="dataset_size"))
        object.__setattr__(self, "model_dim", check_count(self.model_dim, name="model_dim"))
        if not isinstance(self.model, LossModel):
            raise ValueError(f"model must be a LossModel; got {self.model!r}")
        if isinstance(self.data_seed, bool) or not isinstance(self.data_seed, int) or self.data_seed < 0:
            raise ValueError(f"data_seed must be an integer >= 0; got {self.data_seed!r}")

    @classmethod
    def from_spec_table(cls, table: dict[str, Any]) -> DpSgdTraining:
        """The training of a spec's ``dp_sgd_training`` mechanism table (already validated by the spec parser)."""
        keys = ("noise_multiplier", "sampling_rate", "steps", "clip_norm", "learning_rate", "dataset_size", "model_dim")
        return cls(**{k: table[k] for k in keys if k in table})

    @property
    def event(self) -> ev.Event:
        return _step_event(self.noise_multiplier, self.sampling_rate, self.steps)

    @property
    def expected_batch_size(self) -> float:
        return self.sampling_rate * self.dataset_size

    def _unscale(self) -> float:
        """Multiply a canary coordinate's step −Δθ_j by this to get x_t = b_t + N(0, σ²) in units of C."""
        return self.expected_batch_size / (self.learning_rate * self.clip_norm)

    def _generator(self) -> tuple[np.random.Generator, np.ndarray]:
        rng = np.random.default_rng(np.random.SeedSequence(self.data_seed, spawn_key=(7,)))
        theta_star = rng.standard_normal(self.model_dim)
        theta_star *= 4.0 / np.linalg.norm(theta_star)
        return rng, theta_star

    def _records(self, n: int, rng: np.random.Generator, theta_star: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal((n, self.model_dim)) / math.sqrt(self.model_dim)
        x /= np.maximum(np.linalg.norm(x, axis=1), 1.0)[:, None]  # ‖x‖ ≤ 1
        z = x @ theta_star
        if self.model is LossModel.LOGISTIC:
            y = (rng.random(n) < special.expit(z)).astype(float)
        else:
            y = z + 0.1 * rng.standard_normal(n)
        return x, y

    def base_data(self) -> tuple[np.ndarray, np.ndarray]:
        """The fixed data set the canaries are added to: (features (n, d), labels (n,))."""
        rng, theta_star = self._generator()
        return self._records(self.dataset_size, rng, theta_star)

    def input_canaries(self, m: int, kind: InputCanary, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """m input canaries: in-distribution records with the wrong label, or unit-norm records in random directions
        (out of distribution: the base records have norm ≈ 1/2 on average) with label 1."""
        _, theta_star = self._generator()
        if kind is InputCanary.MISLABELLED:
            x, _ = self._records(m, rng, theta_star)
            z = x @ theta_star
            y = (z <= 0).astype(float) if self.model is LossModel.LOGISTIC else -z - np.sign(z)
            return x, y
        x = rng.standard_normal((m, self.model_dim))
        x /= np.linalg.norm(x, axis=1)[:, None]
        return x, np.ones(m)

    def dirac_canaries(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """m Dirac gradient canaries: zero base features and one marker column each (canary i on coordinate
        ``model_dim + i``)."""
        x = np.zeros((m, self.model_dim + m))
        x[np.arange(m), self.model_dim + np.arange(m)] = 1.0
        return x, np.zeros(m)

    def run(
        self,
        features: np.ndarray,
        labels: np.ndarray,
        rng: np.random.Generator,
        observer: Callable[[int, np.ndarray, np.ndarray], None] | None = None,
    ) -> np.ndarray:
        """θ_T of DP-SGD on (features, labels) from θ_0 = 0; ``observer(t, θ_{t−1}, θ_t)`` sees every step.

        Each step is one call of :func:`dplens.mechanisms.dpsgd.noisy_sgd` (constant learning rate and no momentum,
        so T calls of one step consume the generator exactly as one call of T steps would).
        """
        x, y = np.asarray(features, dtype=float), np.asarray(labels, dtype=float)
        gradients = _CanaryGradients(self.model_dim, self.model, self.clip_norm)
        theta = np.zeros(x.shape[1])
        for t in range(self.steps):
            new, _, _ = noisy_sgd(
                x,
                y,
                model=self.model,
                noise_multiplier=self.noise_multiplier,
                sampling_rate=self.sampling_rate,
                steps=1,
                clip_norm=self.clip_norm,
                learning_rate=self.learning_rate,
                rng=rng,
                private_weight=1.0,
                schedule=LearningRateSchedule.CONSTANT,
                momentum=0.0,
                radius=None,
                theta0=theta,
                expected_batch_size=self.expected_batch_size,
                per_example_gradients=gradients,
            )
            if observer is not None:
                observer(t, theta, new)
            theta = new
        return theta

    def __call__(self, data: tuple[np.ndarray, np.ndarray], rng: np.random.Generator) -> np.ndarray:
        """``train(data, rng)``: the per-step updates θ_t − θ_{t−1}, shape (steps, d)."""
        x, y = data
        updates = np.empty((self.steps, np.shape(x)[1]))

        def record(t: int, before: np.ndarray, after: np.ndarray) -> None:
            updates[t] = after - before

        self.run(x, y, check_rng(rng), record)
        return updates

    def describe(self) -> str:
        return (
            f"numpy DP-SGD ({self.model.value} model, {self.dataset_size} records of {self.model_dim} features; "
            f"noise multiplier {self.noise_multiplier:g}, sampling rate {self.sampling_rate:g}, {self.steps} steps, "
            f"clip norm {self.clip_norm:g}, learning rate {self.learning_rate:g})"
        )


class _Scorer:
    """Scores of canaries from one DP-SGD run: an observer of the steps and a final read-out."""

    def __init__(self, training: DpSgdTraining, canary: CanaryKind, observe: Observation, score: CanaryScore, records):
        self.training, self.canary, self.observe, self.score = training, canary, observe, score
        self.x, self.y = records
        m = self.x.shape[0]
        self.columns = training.model_dim + np.arange(m) if canary is CanaryKind.GRADIENT else None
        self.total = np.zeros(m)

    def observer(self) -> Callable[[int, np.ndarray, np.ndarray], None] | None:
        if self.observe is Observation.FINAL:
            return None
        t = self.training
        unscale, sigma, q = t._unscale(), t.noise_multiplier, t.sampling_rate
        if self.canary is CanaryKind.GRADIENT:
            columns = self.columns
            llr = self.score is CanaryScore.LIKELIHOOD_RATIO

            def white_box(step: int, before: np.ndarray, after: np.ndarray) -> None:
                x = (before[columns] - after[columns]) * unscale  # = b_t + N(0, σ²), in units of C
                self.total += _step_llr(x, sigma, q) if llr else x

            return white_box
        d0, model, clip, features, labels = t.model_dim, t.model, t.clip_norm, self.x, self.y

        def dot(step: int, before: np.ndarray, after: np.ndarray) -> None:
            grads = _clip(link_residual(before[:d0], features, labels, model)[:, None] * features, clip)
            self.total += grads @ (before[:d0] - after[:d0]) * (t.expected_batch_size / t.learning_rate)

        return dot

    def scores(self, theta: np.ndarray) -> np.ndarray:
        if self.observe is Observation.ALL_STEPS:
            return self.total.copy()
        t = self.training
        if self.canary is CanaryKind.GRADIENT:
            total = -theta[self.columns] * t._unscale()  # Σ_t x_t
            if self.score is CanaryScore.LIKELIHOOD_RATIO:
                return _final_llr(total, t.noise_multiplier, t.sampling_rate, t.steps)
            return total
        return -_record_loss(theta[: t.model_dim], self.x, self.y, t.model)


# --------------------------------------------------------------------------------------------
# User training functions
# --------------------------------------------------------------------------------------------


class UserCodeError(ValueError):
    """User code (a training or score function) raised: the message names the function and the training."""


def _import(target: str, role: str) -> Callable[..., Any]:
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{role} must be a callable or 'module:name'; got {target!r}")
    try:
        value = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"{role}: cannot import {target!r}: {err}") from None
    if not callable(value):
        raise ValueError(f"{role}: {target!r} is not callable")
    return value


def _function(value: Any, role: str) -> Callable[..., Any]:
    if isinstance(value, str):
        return _import(value, role)
    if not callable(value):
        raise ValueError(f"{role} must be a callable or 'module:name'; got {value!r}")
    return value


def _name(value: Any) -> str:
    if isinstance(value, str):
        return value
    return f"{getattr(value, '__module__', '?')}:{getattr(value, '__qualname__', type(value).__name__)}"


def _call(function: Callable[..., Any], role: str, name: str, where: str, *args: Any) -> Any:
    try:
        return function(*args)
    except Exception as err:  # user code: any failure, reported in its own words with where it happened
        raise UserCodeError(f"the {role} function {name!r} raised {type(err).__name__}: {err} ({where})") from err


def _rows(records: Any, index: Any) -> Any:
    if isinstance(records, tuple):
        return tuple(np.asarray(part)[index] for part in records)
    if isinstance(records, list):
        return [records[i] for i in np.arange(len(records))[index]]
    return np.asarray(records)[index]


def _count(records: Any) -> int:
    if isinstance(records, tuple):
        return len(records[0])
    return len(records)


def _concatenate(base: Any, extra: Any) -> Any:
    """The records of ``base`` followed by those of ``extra`` (arrays, lists or tuples of arrays by rows)."""
    if isinstance(base, tuple):
        return tuple(np.concatenate([np.asarray(a), np.asarray(b)]) for a, b in zip(base, extra, strict=True))
    if isinstance(base, list):
        return [*base, *extra]
    return np.concatenate([np.asarray(base), np.asarray(extra)])


@dataclass(frozen=True, slots=True, kw_only=True)
class UserTraining:
    """A user's training run for the canary games.

    Args:
        train: ``train(data, rng) -> output``: trains on ``data`` with all randomness from the numpy ``Generator``
            ``rng`` and returns what the auditor observes (the final parameters, per-step updates, anything ``score``
            reads). A callable, or ``"module:name"`` (imported where it runs: needed for workers and Dask).
        data: the base records: an array (records are rows), a list, or a tuple of arrays sharing the first axis
            (e.g. ``(features, labels)``). Canaries are appended after them; the training must not depend on order.
        canaries: canary records in the same structure (the multi-run game uses the first).
        score: ``score(output, canaries) -> one number per canary``, higher ⇒ "in" (e.g. minus the loss).
    """

    train: Callable[..., Any] | str
    data: Any
    canaries: Any
    score: Callable[..., Any] | str

    def __post_init__(self) -> None:
        _function(self.train, "train")
        _function(self.score, "score")
        for name in ("data", "canaries"):
            value = getattr(self, name)
            if isinstance(value, tuple) and (not value or len({len(p) for p in value}) != 1):
                lengths = [len(p) for p in value]
                raise ValueError(f"{name}: a tuple of arrays must share its first axis; got lengths {lengths}")
            if _count(value) < 1 and name == "canaries":
                raise ValueError("canaries must hold at least one record")

    def describe(self) -> str:
        return f"user training {_name(self.train)!r} scored by {_name(self.score)!r}"

    def _scores(self, output: Any, canaries: Any, count: int, where: str) -> np.ndarray:
        raw = _call(_function(self.score, "score"), "score", _name(self.score), where, output, canaries)
        try:
            values = np.asarray(host_value(raw), dtype=float).reshape(-1)  # torch / JAX / CuPy scores too
        except (TypeError, ValueError):
            raise UserCodeError(
                f"the score function {_name(self.score)!r} must return {count} numbers; got {type(raw).__name__} "
                f"({where})"
            ) from None
        if values.size != count or not np.all(np.isfinite(values)):
            raise UserCodeError(
                f"the score function {_name(self.score)!r} must return {count} finite numbers; got {values.size} "
                f"values{'' if np.all(np.isfinite(values)) else ' with NaN or inf'} ({where})"
            )
        return values


# --------------------------------------------------------------------------------------------
# The many-run game on real trainings
# --------------------------------------------------------------------------------------------


def _identity(outputs: Any) -> np.ndarray:
    """The black-box score of a training game: its outputs are already the canary's scores."""
    return np.asarray(outputs, dtype=float).reshape(-1)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingGame:
    """One canary in or out of real trainings, as a mechanism for :func:`dplens.auditing.games.audit`.

    ``sample(True, n, rng)`` runs n trainings with the canary and returns its n scores (``False``: without it).
    Each training draws its own seed from ``rng``; a failing one is reported with that seed.
    """

    training: DpSgdTraining | UserTraining
    canary: CanaryKind
    observe: Observation
    score: CanaryScore
    input_canary: InputCanary = InputCanary.MISLABELLED
    canary_seed: int = 0

    @property
    def event(self) -> ev.Event:
        if isinstance(self.training, DpSgdTraining):
            return self.training.event
        raise ValueError("a user training has no privacy event: give the claimed epsilon")

    def _canary(self) -> Any:
        training = self.training
        if isinstance(training, UserTraining):
            return _rows(training.canaries, slice(0, 1))
        if self.canary is CanaryKind.GRADIENT:
            return training.dirac_canaries(1)
        rng = np.random.default_rng(np.random.SeedSequence(self.canary_seed, spawn_key=(8,)))
        return training.input_canaries(1, self.input_canary, rng)

    def sample(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        present = DiracCanaryGame._present(data, "data")
        n, rng = check_count(n), check_rng(rng)
        canary = self._canary()
        out = np.empty(n)
        training = self.training
        if isinstance(training, UserTraining):
            train = _function(training.train, "train")
            base = training.data
            records = _concatenate(base, canary) if present else base
        else:
            x, y = training.base_data()
            if self.canary is CanaryKind.GRADIENT:
                x = np.concatenate([x, np.zeros((x.shape[0], 1))], axis=1)
            records = (np.concatenate([x, canary[0]]), np.concatenate([y, canary[1]])) if present else (x, y)
        side = "with the canary in" if present else "with the canary out"
        for j in range(n):
            seed = int(rng.integers(0, 2**63 - 1))
            child = np.random.default_rng(seed)
            if isinstance(training, UserTraining):
                where = (
                    f"training {j + 1} of a batch of {n} {side}; rerun train(data, numpy.random.default_rng({seed})) "
                    "to reproduce"
                )
                output = _call(train, "train", _name(training.train), where, records, child)
                out[j] = training._scores(output, canary, 1, where)[0]
            else:
                scorer = _Scorer(training, self.canary, self.observe, self.score, canary)
                theta = training.run(records[0], records[1], child, scorer.observer())
                out[j] = scorer.scores(theta)[0]
        return out

    def release(self, data: Any, rng: np.random.Generator) -> np.ndarray:
        return self.sample(data, 1, rng)

    def worst_case_pair(self) -> NeighbouringPair:
        return NeighbouringPair(data=True, neighbour=False, description=f"{self._what()} in the data set vs not")

    def output_size(self) -> int:
        return 1

    def _what(self) -> str:
        if self.canary is CanaryKind.GRADIENT:
            return "a Dirac gradient canary"
        if isinstance(self.training, UserTraining):
            return "the first canary record"
        return f"one {self.input_canary.value.replace('_', '-')} input canary"

    def __repr__(self) -> str:
        if isinstance(self.training, UserTraining):  # what is observed and how it is scored is the user's code
            return f"{self.training.describe()}; {self._what()}"
        return (
            f"{self.training.describe()}; {self._what()}; observed: {self.observe.value.replace('_', ' ')}; "
            f"score: {self.score.value.replace('_', ' ')}"
        )


# --------------------------------------------------------------------------------------------
# The games
# --------------------------------------------------------------------------------------------


def _claim(training: Any, claim: Any, delta: float, claim_source: str | None) -> tuple[float, str]:
    if claim is not None:
        return sc._check_claim(claim), claim_source or "given"
    event = getattr(training, "event", None)
    if isinstance(training, UserTraining) or event is None:
        raise ValueError("claim: a user training function has no accountant; give the claimed epsilon")
    from dplens.accountant.compose import Accountant

    if delta == 0:
        raise ValueError("delta must be > 0 to take the claim from the accountant (DP-SGD is not pure DP)")
    result = Accountant().compose(event).epsilon_result(delta)
    return result.epsilon, f"accountant ({result.method.value}: {result.details})"


def _check_training(training: Any) -> DpSgdTraining | UserTraining:
    if not isinstance(training, DpSgdTraining | UserTraining):
        raise ValueError(f"training must be a DpSgdTraining or a UserTraining; got {training!r}")
    return training


def _check_delta(delta: Any) -> float:
    if isinstance(delta, bool):
        raise ValueError(f"delta must be in [0, 1); got {delta!r}")
    return sc.conversions.check_delta(delta, allow_zero=True)


def _one_run_user(
    training: UserTraining, m: int, inclusion: np.random.SeedSequence, training_stream: np.random.SeedSequence
) -> tuple[np.ndarray, np.ndarray, str]:
    """The user's one-run training: which canaries were included, their scores, and the game's description."""
    included = np.random.default_rng(inclusion).random(m) < 0.5
    data = _concatenate(training.data, _rows(training.canaries, included))
    entropy = int(np.random.default_rng(training_stream).integers(0, 2**63 - 1))
    where = (
        f"the one-run training with {int(included.sum())} of {m} canaries included; rerun "
        f"train(data, numpy.random.default_rng({entropy})) to reproduce"
    )
    train = _function(training.train, "train")
    output = _call(train, "train", _name(training.train), where, data, np.random.default_rng(entropy))
    values = training._scores(output, training.canaries, m, where)
    return included, values, f"{training.describe()}; {m} canary records, each included with probability 1/2"


def one_run_canary_audit(
    training: DpSgdTraining | UserTraining,
    *,
    canaries: int = 1000,
    canary: CanaryKind | str = CanaryKind.GRADIENT,
    observe: Observation | str = Observation.ALL_STEPS,
    score: CanaryScore | str | None = None,
    input_canary: InputCanary | str = InputCanary.MISLABELLED,
    claim: float | None = None,
    delta: float = 1e-5,
    confidence: float = 0.95,
    seed: int = 0,
    vectorised: bool = False,
    rule: Any = None,
    correction: Any = None,
    claim_source: str | None = None,
) -> sc.OneRunAuditResult:
    """One training run with m canaries, each included independently with probability ½ before the run.

    Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023: the canaries' scores give
    a valid lower bound on ε with no second training (:func:`dplens.auditing.scores.audit_scores` with
    ``one_run=True``; symmetric guesses at 32 a-priori cut-offs by default). White-box gradient canaries observed at
    every step and scored by the exact likelihood ratio are the strongest setting of Nasr et al. 2023; their
    coordinates are independent, so each canary is an independent copy of the white-box game.

    Args:
        training: :class:`DpSgdTraining` (the numpy DP-SGD; claim default: the accountant's ε) or
            :class:`UserTraining` (``claim`` required; ``canaries`` is then the number of its canary records).
        canaries: m (for :class:`DpSgdTraining`).
        canary, observe, score, input_canary: the game (:class:`CanaryKind`, :class:`Observation`,
            :class:`CanaryScore`, :class:`InputCanary`; their values are accepted too).
        claim: the claimed ε (default: the accountant's ε of the DP-SGD run at ``delta``).
        delta: δ of the (ε, δ) statement under test.
        confidence: 1 − α.
        seed: root seed (inclusion bits, canaries and training each get their own stream).
        vectorised: for gradient canaries on :class:`DpSgdTraining`, draw each canary's coordinate directly
            (:class:`DiracCanaryGame`, the same distribution) instead of running the numpy loop.
        rule, correction: passed to the one-run analysis (:mod:`dplens.auditing.one_run`).
        claim_source: where the claim comes from (recorded).

    Returns:
        A :class:`~dplens.auditing.scores.OneRunAuditResult` whose ``game`` describes the run.
    """
    start = time.perf_counter()
    training = _check_training(training)
    canary = _option(canary, CanaryKind, "canary")
    observe = _option(observe, Observation, "observe")
    input_canary = _option(input_canary, InputCanary, "input_canary")
    check_seed(seed)
    delta = _check_delta(delta)
    if isinstance(training, DpSgdTraining):  # every option is checked before the accountant runs
        m = check_count(canaries, name="canaries")
        score_option = _resolve_score(canary, observe, score)
    claimed, source = _claim(training, claim, delta, claim_source)
    inclusion, canary_stream, training_stream = np.random.SeedSequence(int(seed)).spawn(3)
    if isinstance(training, UserTraining):
        m, score_option = _count(training.canaries), None
        included, values, description = _one_run_user(training, m, inclusion, training_stream)
    else:
        included = np.random.default_rng(inclusion).random(m) < 0.5
        streams = (canary_stream, training_stream)
        game_options = (canary, observe, score_option, input_canary)
        values = _one_run_dp_sgd(training, m, included, game_options, streams, vectorised)
        what = "Dirac gradient" if canary is CanaryKind.GRADIENT else input_canary.value.replace("_", "-") + " input"
        how = "vectorised canary coordinates" if vectorised and canary is CanaryKind.GRADIENT else "one numpy run"
        description = (
            f"{training.describe()}; {m} {what} canaries, each included with probability 1/2; observed: "
            f"{observe.value.replace('_', ' ')}; score: {score_option.value.replace('_', ' ')} ({how})"
        )
    game = {
        "game": "one_run",
        "description": description,
        "canary": canary.value,
        "observe": observe.value,
        "score": None if score_option is None else score_option.value,
        "training": training.describe(),
        "seed": int(seed),
        "reference": NASR_2023,
    }
    if isinstance(training, DpSgdTraining):
        game |= {k: getattr(training, k) for k in ("noise_multiplier", "sampling_rate", "steps")}
    options = dict(claim=claimed, delta=delta, confidence=confidence, rule=rule, correction=correction)
    return one_run_game_audit(values, included, game, start=start, seed=int(seed), claim_source=source, **options)


def one_run_game_audit(
    values: Any, included: Any, game: dict[str, Any], *, start: float, **options: Any
) -> sc.OneRunAuditResult:
    """The one-run game's audit of its canaries' scores (:func:`~dplens.auditing.scores.audit_scores` with
    ``one_run=True``; ``options``: claim, delta, confidence, rule, correction, seed, claim_source), the game
    described in the result and its time counted from ``start`` (the numpy, user and Opacus one-run games)."""
    result = sc.audit_scores(values, included, one_run=True, **options)
    return sc.with_game(result, game, elapsed_seconds=time.perf_counter() - start)


def _one_run_dp_sgd(
    training: DpSgdTraining,
    m: int,
    included: np.ndarray,
    game_options: tuple[CanaryKind, Observation, CanaryScore, InputCanary],
    streams: tuple[np.random.SeedSequence, np.random.SeedSequence],
    vectorised: bool,
) -> np.ndarray:
    """The m canaries' scores of one DP-SGD run (the numpy loop, or the vectorised canary coordinates)."""
    canary, observe, score, input_canary = game_options
    canary_stream, training_stream = streams
    rng = np.random.default_rng(training_stream)
    if canary is CanaryKind.GRADIENT and vectorised:
        game = DiracCanaryGame(
            noise_multiplier=training.noise_multiplier,
            sampling_rate=training.sampling_rate,
            steps=training.steps,
            observe=observe,
        )
        values = np.empty(m)
        for flag in (True, False):
            chosen = np.flatnonzero(included == flag)
            if chosen.size:
                outputs = game.sample(flag, chosen.size, rng)
                if score is CanaryScore.LIKELIHOOD_RATIO:
                    values[chosen] = game.log_likelihood_ratio(outputs, True, False)
                else:
                    values[chosen] = outputs.sum(axis=1)
        return values
    x, y = training.base_data()
    if canary is CanaryKind.GRADIENT:
        records = training.dirac_canaries(m)
        x = np.concatenate([x, np.zeros((x.shape[0], m))], axis=1)
    else:
        records = training.input_canaries(m, input_canary, np.random.default_rng(canary_stream))
    features = np.concatenate([x, records[0][included]])
    labels = np.concatenate([y, records[1][included]])
    scorer = _Scorer(training, canary, observe, score, records)
    theta = training.run(features, labels, rng, scorer.observer())
    return scorer.scores(theta)


def _vectorised_game(training: DpSgdTraining, observe: Observation, score_option: CanaryScore) -> tuple[Any, Any]:
    """The Dirac gradient canary's game on a DP-SGD run (its coordinate drawn directly) and its score."""
    mechanism = DiracCanaryGame(
        noise_multiplier=training.noise_multiplier,
        sampling_rate=training.sampling_rate,
        steps=training.steps,
        observe=observe,
    )
    game_score = (
        games.ExactLikelihoodRatio()
        if score_option is CanaryScore.LIKELIHOOD_RATIO
        else games.BlackBoxScore(_sum_of_steps, name="dot product with the canary direction (sum over steps)")
    )
    return mechanism, game_score


def multi_run_canary_audit(
    training: DpSgdTraining | UserTraining,
    *,
    trials: int,
    canary: CanaryKind | str = CanaryKind.GRADIENT,
    observe: Observation | str = Observation.ALL_STEPS,
    score: CanaryScore | str | None = None,
    input_canary: InputCanary | str = InputCanary.MISLABELLED,
    claim: float | None = None,
    delta: float = 1e-5,
    confidence: float = 0.95,
    seed: int = 0,
    vectorised: bool = True,
    workers: int = 1,
    scheduler: Any = None,
    checkpoint: Any = None,
    progress: bool = False,
    pilot_trials: int | None = None,
    chunk_size: int | None = None,
    claim_source: str | None = None,
) -> games.AuditResult:
    """The distinguishing game on trainings: ``trials`` runs with one canary in and ``trials`` without it.

    Jagielski, Ullman, Oprea 2020 and Nasr et al. 2021/2023: each training's canary score is counted on a threshold
    grid fixed from independent pilot trainings, with weighted Bonferroni and one-sided Clopper–Pearson
    (:func:`dplens.auditing.games.audit`, run in chunks by :func:`dplens.auditing.runner.run_chunks`: a process pool,
    a Dask cluster, a resumable checkpoint; the result depends only on ``seed``). The result's ``trajectory`` is the
    bound against the number of trainings.

    Gradient canaries on :class:`DpSgdTraining` are vectorised by default (:class:`DiracCanaryGame`, the exact
    likelihood ratio, microseconds per training); ``vectorised=False`` runs the numpy loop for every training, as
    input canaries and :class:`UserTraining` always do (their pilot and chunks: :func:`training_game_plan`).

    Args:
        training: :class:`DpSgdTraining` or :class:`UserTraining` (``claim`` required).
        trials: trainings per side that are counted.
        canary, observe, score, input_canary: the game (see :func:`one_run_canary_audit`).
        claim: the claimed ε (default: the accountant's ε of the DP-SGD run at ``delta``).
        delta: δ of the (ε, δ) statement under test.
        confidence, seed, workers, scheduler, checkpoint, progress, pilot_trials, chunk_size: as
            :func:`dplens.auditing.games.audit`.
        vectorised: see above.
        claim_source: where the claim comes from (recorded).

    Returns:
        An :class:`~dplens.auditing.games.AuditResult`.
    """
    training = _check_training(training)
    canary = _option(canary, CanaryKind, "canary")
    observe = _option(observe, Observation, "observe")
    input_canary = _option(input_canary, InputCanary, "input_canary")
    trials = check_count(trials, name="trials")
    delta = _check_delta(delta)
    if isinstance(training, DpSgdTraining):
        _resolve_score(canary, observe, score)  # checked before the accountant runs
    claimed, source = _claim(training, claim, delta, claim_source)
    execution = dict(confidence=confidence, seed=seed, workers=workers, scheduler=scheduler, checkpoint=checkpoint)
    if isinstance(training, DpSgdTraining) and canary is CanaryKind.GRADIENT and vectorised:
        if chunk_size is None:  # 16 chunks: a bound-against-trainings curve, checkpoints; batches cap the memory
            chunk_size = min(trials, max(256, math.ceil(trials / 16)))
        mechanism, game_score = _vectorised_game(training, observe, _resolve_score(canary, observe, score))
        return games.audit(
            mechanism,
            trials=trials,
            delta=delta,
            claimed_epsilon=claimed,
            score=game_score,
            progress=progress,
            pilot_trials=pilot_trials,
            chunk_size=chunk_size,
            claim_source=source,
            **execution,
        )
    score_option = None if isinstance(training, UserTraining) else _resolve_score(canary, observe, score)
    mechanism = TrainingGame(
        training=training,
        canary=canary if isinstance(training, DpSgdTraining) else CanaryKind.INPUT,
        observe=observe,
        score=score_option or CanaryScore.DOT_PRODUCT,
        input_canary=input_canary,
        canary_seed=int(seed),
    )
    name = "the user's score" if isinstance(training, UserTraining) else f"{score_option.value.replace('_', ' ')}"
    return training_game_audit(
        mechanism,
        score=games.BlackBoxScore(_identity, name=f"canary score per training: {name}"),
        trials=trials,
        delta=delta,
        claimed_epsilon=claimed,
        claim_source=source,
        plan=training_game_plan(trials, pilot_trials=pilot_trials, chunk_size=chunk_size),
        progress=progress,
        **execution,
    )


# --------------------------------------------------------------------------------------------
# Games whose every trial is a training: one pilot and chunk rule (numpy, a user's, Opacus)
# --------------------------------------------------------------------------------------------

#: Pilot trainings per side: a quarter of the counted trials, between these two numbers of trainings
#: (:func:`training_game_plan`)...
TRAINING_PILOT_RANGE = (8, 100)
#: ... and at least this fraction of them beyond (1000 trials: 100 pilot trainings per side).
TRAINING_PILOT_FRACTION = 10
#: Chunks of a training game (its checkpoints, progress and the bound-against-trainings trajectory).
TRAINING_GAME_CHUNKS = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingGamePlan:
    """The pilot and chunks of a distinguishing game whose every trial is a training.

    Args:
        pilot_trials: pilot trainings per side (never counted; they place the threshold grid).
        chunk_size: counted trainings per side per chunk.
    """

    pilot_trials: int
    chunk_size: int

    def to_dict(self) -> dict[str, int]:
        return {"pilot_trials": self.pilot_trials, "chunk_size": self.chunk_size}


def training_game_plan(
    trials: int, *, pilot_trials: int | None = None, chunk_size: int | None = None
) -> TrainingGamePlan:
    """The defaults of every multi-run canary game that trains a model per trial (decided here once).

    The pilot is min(N, max(8, min(100, ⌊N/4⌋), ⌊N/10⌋)) trainings per side: a quarter of the N counted trainings,
    at least 8 and at most 100, a tenth of them beyond 1000, never more than N. The pilot only places the grid (it
    is independent of the counted trainings, so the bound is valid whatever its size), and every pilot training
    costs as much as a counted one: its share of the work is capped at a quarter for the few trainings of an Opacus
    or user training game, and at a tenth for long runs, where 100 trainings per side already span the scores. The
    counted trainings run in :data:`TRAINING_GAME_CHUNKS` chunks (⌈N/16⌉ each): a killed run loses at most a
    sixteenth of its trainings, and the trajectory has 16 points. Given values are kept.
    """
    if pilot_trials is None:
        low, high = TRAINING_PILOT_RANGE
        pilot_trials = min(trials, max(low, min(high, trials // 4), trials // TRAINING_PILOT_FRACTION))
    if chunk_size is None:
        chunk_size = max(1, math.ceil(trials / TRAINING_GAME_CHUNKS))
    return TrainingGamePlan(pilot_trials=pilot_trials, chunk_size=chunk_size)


def training_game_audit(
    game: Any,
    *,
    score: games.BlackBoxScore,
    trials: int,
    delta: float,
    claimed_epsilon: float,
    claim_source: str,
    plan: TrainingGamePlan,
    **execution: Any,
) -> games.AuditResult:
    """:func:`dplens.auditing.games.audit` on a training game (``execution``: confidence, seed, workers, scheduler,
    checkpoint, progress), with the pilot and chunks of ``plan`` (:func:`training_game_plan`)."""
    return games.audit(
        game,
        trials=trials,
        delta=delta,
        claimed_epsilon=claimed_epsilon,
        score=score,
        pilot_trials=plan.pilot_trials,
        chunk_size=plan.chunk_size,
        claim_source=claim_source,
        **execution,
    )


def _sum_of_steps(outputs: Any) -> np.ndarray:
    """Σ_t x_t: the canary direction's dot product with the model's total movement (in units of C)."""
    return np.asarray(outputs, dtype=float).sum(axis=1)
