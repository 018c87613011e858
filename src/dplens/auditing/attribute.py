"""The attribute-inference game: how well can an attacker guess a record's protected attribute from the output?

The game (Yeom, Giacomelli, Fredrikson, Jha, CSF 2018, attribute inference; Mahloujifar, Guo, Suh, Chaudhuri,
IEEE S&P 2025 — seed 003 — Def 7 with the discrete metric and ρ = 0): the rest of the data set is fixed and known to
the attacker; the target record's protected attribute A ∈ {0, …, k − 1} is drawn from a prior π; the mechanism runs
on the data set with that attribute; the attacker sees the output and guesses A. Success counts S out of n
independent trials give an exact one-sided Clopper–Pearson lower bound on the success probability
(:func:`dplens.auditing.bounds.clopper_pearson_lower`), which the bounds below turn into a valid lower bound on ε.

Adjacency. Every ε here refers to changing this one attribute of one record (feature-level / replace-one
adjacency): the data sets of the game differ only in the target's protected attribute. A record-level add/remove
claim is a different statement (auditing-anchors §6.2, §9 items 7 and 10).

Bounds on the success probability of *any* attacker against a mechanism that is (ε, δ)-DP for every pair of
attribute values (replace-one on the attribute). The k-ary bounds are derived in the project's auditing notes
(auditing-anchors §6.1) and here — they are not taken from a paper:

- Uniform prior: P(success) ≤ (e^ε + (k − 1)δ)/(e^ε + k − 1) (sum the DP constraint over the k decision regions);
  k-ary randomized response attains it at δ = 0 (Kairouz, Oh, Viswanath 2016); for δ > 0 the channel that keeps
  the value with probability equal to the bound (else a uniform other value) attains it, its hockey-stick
  divergence being exactly δ, so it is the exact maximum for every δ.
- Any prior, any δ (derived here; :func:`max_success_prior_bound`): with m = max π and k₊ values of positive prior,
  P(success) ≤ m(e^ε + (k₊ − 1)δ)/(m e^ε + 1 − m). At δ = 0 it is the posterior-odds bound
  e^ε m/(e^ε m + 1 − m) (posterior odds ≤ e^ε × prior odds); for a uniform prior it is the bound above. Proof: let
  Q_b(a) = P[guess = a | A = b] and p_a = Q_a(a). The guess is a post-processing of the output, so for a ≠ b,
  p_a ≤ e^ε Q_b(a) + δ. Multiply by π_b and sum over b ≠ a: (1 − π_a)p_a ≤ e^ε Σ_{b≠a} π_b Q_b(a) + δ(1 − π_a).
  Sum over a: Σ_a (1 − π_a)p_a ≤ e^ε(1 − S) + (k₊ − 1)δ with S = Σ_a π_a p_a the success. Since
  (1 − π_a)/π_a ≥ (1 − m)/m, the left side is ≥ (1 − m)S/m, and solving for S gives the bound. It is valid but
  loose for a non-uniform prior.
- The exact maximum for any prior (:func:`max_success`): the attacker's guess channel Q is itself (ε, δ)-DP on
  k points, and every (ε, δ)-DP channel on k points is a mechanism the identity attacker exploits, so the maximum
  success is the linear program max Σ_a π_a Q_a(a) over row-stochastic Q with hockey-stick divergences
  Σ_g (Q_a(g) − e^ε Q_b(g))₊ ≤ δ for all a ≠ b. Closed forms: uniform prior (above); k = 2,
  max{π_max + (1 − π_max)δ, (e^ε + δ)/(e^ε + 1)} (the vertices of the binary (ε, δ) trade-off region). Otherwise
  HiGHS solves it (k₊ ≤ 16; beyond, the prior bound above is used).

The game's ε lower bound inverts the exact maximum: ε_lb = inf{ε ≥ 0 : max_success(ε, δ, π) ≥ p_lb}; uniform prior,
δ = 0: ε_lb = ln(p_lb(k − 1)/(1 − p_lb)). It is clamped at 0 and is a bound (not an estimate): with probability
≥ 1 − α, p_lb ≤ the true success, so every ε < ε_lb is refuted.

Side by side, the feature-DP bound of seed 003 Theorem 4 (adv ≤ 1 − f(Ball), computed by the feature-DP plug-in,
which the audit reaches through :func:`dplens.accountant.plugins.attribute_inference_bounds`, never re-implemented
here) gives the maximum success the claimed (ε, δ),
μ-GDP or privacy profile allows against the baseline b = Ball = max π (the best guess without the output). It is
the bound for a feature-DP claim in the sense of seed 003 (Def 6: the real run against a simulator that knows only
the public features). It also holds for a replace-one claim (take the simulator to be the run with a fixed
attribute value), but is looser there (e.g. 0.816 against 0.731 at ε = 1, k = 2). The verdict therefore depends on
how the claim is read (:class:`ClaimReading`). Under REPLACE_ONE (the default) it uses the exact maximum above, so
VIOLATION ⟺ ε_lb > ε_claimed for an (ε, δ) claim. Under FEATURE_DP it uses Theorem 4, so
VIOLATION ⟺ the Theorem 4 inversion ``feature_dp_epsilon_lower_bound`` > ε_claimed.

Validity: the attacker is fixed before the counted draws (a :class:`Classifier` is trained on draws from its own
seed stream, never counted), each trial draws its own attribute and output, and the attacker guesses each output
from that output alone (outputs are passed in trial order, never grouped by attribute value). One bound is
computed at α = 1 − confidence, with no selection. Floating-point attacks on the mechanism's implementation
(Mironov 2012) are outside what sampling sees.
"""

from __future__ import annotations

import enum
import hashlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize, special

from dplens.accountant import conversions, plugins
from dplens.accountant.curves import PrivacyProfile
from dplens.auditing import bounds as bd
from dplens.auditing import runner
from dplens.auditing.attribute_bounds import (
    ADJACENCY,
    AttackCounts,
    AttributeBound,
    _check_confidence,
    _check_int,
    _check_prior,
    _finite,
    _support,
    bound_from_counts,
    epsilon_lower_bound,
    max_success,
    max_success_from_profile,
    max_success_prior_bound,
)
from dplens.auditing.games import (
    Verdict,
    batch_trials,
    check_result_dict,
    decide,
    default_chunk_size,
    infinite_if_none,
    result_kwargs,
)

__all__ = [
    "ADJACENCY",
    "AttributeAuditResult",
    "AttributeBound",
    "BayesOptimal",
    "CallableAttacker",
    "ClaimReading",
    "Classifier",
    "DpClaim",
    "GdpClaim",
    "ProfileClaim",
    "audit",
    "bound_from_counts",
    "epsilon_lower_bound",
    "max_success",
    "max_success_prior_bound",
]

RESULT_FORMAT_VERSION = 1

_MIN_BATCH_TRIALS = 1024
_MAX_CATEGORIES = 64


# --------------------------------------------------------------------------------------------
# Claims and how they are read (options as types)
# --------------------------------------------------------------------------------------------


class ClaimReading(enum.Enum):
    """Which guarantee the claim states, and hence which maximum success the verdict compares against.

    REPLACE_ONE: the claim holds between the mechanism's outputs for any two values of the attribute (the game's
    own adjacency); the verdict uses the exact maximum success (:func:`max_success`).
    FEATURE_DP: the claim is a feature-DP guarantee of seed 003 (Def 6, against a simulator); the verdict uses
    Theorem 4, adv ≤ 1 − f(Ball), which holds under either reading.
    """

    REPLACE_ONE = "replace-one"
    FEATURE_DP = "feature-dp"


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class DpClaim:
    """An (ε, δ)-DP claim (δ = 0: pure DP)."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _number("epsilon", self.epsilon))
        object.__setattr__(self, "delta", conversions.check_delta(self.delta, allow_zero=True))

    def describe(self) -> str:
        return f"(epsilon={self.epsilon:.4g}, delta={self.delta:.3g})-DP"


@dataclass(frozen=True, slots=True, kw_only=True)
class GdpClaim:
    """A μ-GDP claim (Dong, Roth, Su 2022)."""

    mu: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", _number("mu", self.mu))

    def describe(self) -> str:
        return f"{self.mu:.4g}-GDP"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileClaim:
    """A privacy-profile claim ε ↦ δ(ε) (:class:`~dplens.accountant.curves.PrivacyProfile`)."""

    profile: PrivacyProfile

    def __post_init__(self) -> None:
        if not isinstance(self.profile, PrivacyProfile):
            raise ValueError(f"profile must be a PrivacyProfile; got {self.profile!r}")

    def describe(self) -> str:
        return f"privacy profile {self.profile.description or ''}".strip()


Claim = DpClaim | GdpClaim | ProfileClaim


# --------------------------------------------------------------------------------------------
# Attackers (options as types) and the frozen guessers the chunks apply
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BayesOptimal:
    """The Bayes-optimal attacker: argmax_a log π_a + log p(o | a) (the most likely value a posteriori).

    The log-likelihoods come from ``log_likelihood(outputs, value)`` (log p(o | value) up to a term that does not
    depend on the value) when given, else from the mechanism's ``log_likelihood_ratio`` against a reference
    value's data set: log p(o | a) − log p(o | a_ref) = LLR(o; D_a, D_ref). ``log_likelihood`` must be picklable for
    pools and Dask.
    """

    log_likelihood: Callable[[Any, int], np.ndarray] | None = None
    name: str = "Bayes-optimal (maximum a posteriori from the mechanism's likelihoods)"


@dataclass(frozen=True, slots=True)
class Classifier:
    """A black-box attacker: multinomial logistic regression on the outputs, trained on ``training_trials`` draws
    per attribute value from its own seed stream (never counted), then frozen; it guesses argmax of the fitted
    log-odds plus log π (the classes are balanced in training, so this is the plug-in Bayes rule).

    Features: ``features(outputs) → (n, d)`` if given (picklable); otherwise a one-hot encoding for scalar integer
    outputs with at most 64 distinct training values, else the outputs and their squares.
    """

    training_trials: int = 5000
    ridge: float = 1e-4
    features: Callable[[Any], np.ndarray] | None = None
    name: str = "black-box: multinomial logistic regression, trained on held-out draws"


@dataclass(frozen=True, slots=True)
class CallableAttacker:
    """A user attacker: ``function(outputs) → guesses`` (one integer per output, in order; picklable).

    It must guess each output from that output alone: the batch is a vectorisation, not information.
    """

    function: Callable[[Any], np.ndarray]
    name: str = "user attacker"


Attacker = BayesOptimal | Classifier | CallableAttacker


def _rows(outputs: Any) -> int:
    first = outputs[0] if isinstance(outputs, tuple) else outputs
    return int(np.asarray(first).shape[0])


def _numeric_features(outputs: Any) -> np.ndarray:
    parts = outputs if isinstance(outputs, tuple) else (outputs,)
    n = _rows(outputs)
    flat = np.concatenate([np.asarray(p, dtype=float).reshape(n, -1) for p in parts], axis=1)
    return np.concatenate([flat, flat * flat], axis=1)


@dataclass(frozen=True, slots=True)
class _BayesGuess:
    log_prior: tuple[float, ...]
    reference: int
    log_likelihood: Callable[[Any, int], np.ndarray] | None = None

    def __call__(self, mechanism: Any, datasets: tuple, outputs: Any) -> np.ndarray:
        n = _rows(outputs)
        scores = np.full((n, len(self.log_prior)), -np.inf)
        for a, log_pi in enumerate(self.log_prior):
            if log_pi == -math.inf:
                continue
            if self.log_likelihood is not None:
                ll = self.log_likelihood(outputs, a)
            else:
                ll = mechanism.log_likelihood_ratio(outputs, datasets[a], datasets[self.reference])
            ll = np.asarray(ll, dtype=float).reshape(-1)
            if ll.shape != (n,) or np.isnan(ll).any():
                raise ValueError(f"the log-likelihood of value {a} must be {n} numbers (no NaN); got shape {ll.shape}")
            scores[:, a] = log_pi + ll
        return np.argmax(scores, axis=1)

    def key(self) -> str:
        return f"bayes:{self.log_prior!r}:{self.reference}:{self.log_likelihood!r}"


@dataclass(frozen=True, slots=True)
class _SoftmaxGuess:
    weights: np.ndarray  # (d + 1, c): intercept row first
    centre: np.ndarray
    scale: np.ndarray
    values: np.ndarray  # the attribute value of each class column
    log_prior: np.ndarray  # per class column
    categories: np.ndarray | None = None
    features: Callable[[Any], np.ndarray] | None = None

    def design(self, outputs: Any) -> np.ndarray:
        if self.features is not None:
            x = np.asarray(self.features(outputs), dtype=float).reshape(_rows(outputs), -1)
        elif self.categories is not None:
            x = (np.asarray(outputs).reshape(-1, 1) == self.categories[None, :]).astype(float)
        else:
            x = _numeric_features(outputs)
        return np.concatenate([np.ones((x.shape[0], 1)), (x - self.centre) / self.scale], axis=1)

    def __call__(self, mechanism: Any, datasets: tuple, outputs: Any) -> np.ndarray:
        logits = self.design(outputs) @ self.weights + self.log_prior
        return self.values[np.argmax(logits, axis=1)]

    def key(self) -> str:
        digest = hashlib.sha256()
        for array in (self.weights, self.centre, self.scale, self.values, self.log_prior):
            digest.update(np.ascontiguousarray(array, dtype=float).tobytes())
        if self.categories is not None:
            digest.update(np.ascontiguousarray(self.categories).tobytes())
        return f"softmax:{digest.hexdigest()}:{self.features!r}"


@dataclass(frozen=True, slots=True)
class _UserGuess:
    function: Callable[[Any], np.ndarray]

    def __call__(self, mechanism: Any, datasets: tuple, outputs: Any) -> np.ndarray:
        return self.function(outputs)

    def key(self) -> str:
        return f"user:{self.function!r}"


def _fit_softmax(x: np.ndarray, labels: np.ndarray, classes: int, ridge: float) -> tuple[np.ndarray, ...]:
    """Ridge multinomial logistic regression (L-BFGS on the mean cross-entropy; the intercept is not penalised)."""
    centre, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    z = np.concatenate([np.ones((x.shape[0], 1)), (x - centre) / scale], axis=1)
    y = np.zeros((x.shape[0], classes))
    y[np.arange(x.shape[0]), labels] = 1.0
    penalty = np.ones((z.shape[1], 1))
    penalty[0] = 0.0

    def loss(flat: np.ndarray) -> tuple[float, np.ndarray]:
        w = flat.reshape(z.shape[1], classes)
        logits = z @ w
        log_norm = special.logsumexp(logits, axis=1, keepdims=True)
        value = -np.mean(np.sum(y * (logits - log_norm), axis=1)) + 0.5 * ridge * np.sum(penalty * w * w)
        gradient = z.T @ (np.exp(logits - log_norm) - y) / x.shape[0] + ridge * penalty * w
        return float(value), gradient.ravel()

    start = np.zeros(z.shape[1] * classes)
    fit = optimize.minimize(loss, start, jac=True, method="L-BFGS-B", options={"maxiter": 1000, "gtol": 1e-8})
    return fit.x.reshape(z.shape[1], classes), centre, scale


def _train_classifier(
    attacker: Classifier, mechanism: Any, datasets: tuple, prior: np.ndarray, seed: int
) -> _SoftmaxGuess:
    n = _check_int("training_trials", attacker.training_trials, 10)
    ridge = attacker.ridge
    if isinstance(ridge, bool) or not isinstance(ridge, int | float) or not (math.isfinite(ridge) and ridge >= 0):
        raise ValueError(f"ridge must be a finite number >= 0; got {ridge!r}")
    if attacker.features is not None and not callable(attacker.features):
        raise ValueError(f"features must be callable; got {attacker.features!r}")
    values = np.flatnonzero(prior > 0)
    # Spawn key (0, 0): the pilot stream of the runner, independent of every counted chunk (spawn key (1, i)).
    streams = runner.pilot_seed(seed).spawn(1)[0].spawn(values.size)
    draws = [mechanism.sample(datasets[a], n, np.random.default_rng(s)) for a, s in zip(values, streams, strict=True)]
    labels = np.repeat(np.arange(values.size), n)
    categories = None
    if attacker.features is not None:
        x = np.concatenate([np.asarray(attacker.features(o), dtype=float).reshape(n, -1) for o in draws])
    else:
        first = draws[0]
        if not isinstance(first, tuple) and np.asarray(first).ndim == 1 and np.asarray(first).dtype.kind in "iub":
            seen = np.unique(np.concatenate([np.asarray(o) for o in draws]))
            if seen.size <= _MAX_CATEGORIES:
                categories = seen
        if categories is not None:
            x = np.concatenate([(np.asarray(o).reshape(-1, 1) == categories[None, :]).astype(float) for o in draws])
        else:
            x = np.concatenate([_numeric_features(o) for o in draws])
    weights, centre, scale = _fit_softmax(x, labels, values.size, float(ridge))
    return _SoftmaxGuess(
        weights=weights,
        centre=centre,
        scale=scale,
        values=values,
        log_prior=np.log(prior[values]),
        categories=categories,
        features=attacker.features,
    )


def _resolve_attacker(attacker: Any, mechanism: Any, datasets: tuple, prior: np.ndarray, seed: int) -> tuple[Any, str]:
    if attacker is None:
        attacker = BayesOptimal() if hasattr(mechanism, "log_likelihood_ratio") else Classifier()
    elif callable(attacker) and not isinstance(attacker, BayesOptimal | Classifier | CallableAttacker):
        attacker = CallableAttacker(attacker)
    with np.errstate(divide="ignore"):
        log_prior = tuple(float(v) for v in np.log(prior))
    match attacker:
        case BayesOptimal(log_likelihood=ll):
            if ll is None and not hasattr(mechanism, "log_likelihood_ratio"):
                raise ValueError(
                    f"attacker: BayesOptimal needs the mechanism's log_likelihood_ratio or a log_likelihood function; "
                    f"{type(mechanism).__name__} has neither (use Classifier for a black box)"
                )
            if ll is not None and not callable(ll):
                raise ValueError(f"attacker: log_likelihood must be callable; got {ll!r}")
            reference = int(np.flatnonzero(prior > 0)[0])
            return _BayesGuess(log_prior, reference, ll), attacker.name
        case Classifier():
            return _train_classifier(attacker, mechanism, datasets, prior, seed), attacker.name
        case CallableAttacker(function=function):
            if not callable(function):
                raise ValueError(f"attacker: the function must be callable; got {function!r}")
            return _UserGuess(function), attacker.name
    raise ValueError(f"attacker must be BayesOptimal, Classifier, CallableAttacker or a callable; got {attacker!r}")


# --------------------------------------------------------------------------------------------
# The chunk task
# --------------------------------------------------------------------------------------------


def _gather(pieces: list[Any], inverse: np.ndarray) -> Any:
    """Concatenate per-value outputs (in value order) and put them back in trial order."""
    if isinstance(pieces[0], tuple):
        return tuple(np.concatenate([np.asarray(p[i]) for p in pieces])[inverse] for i in range(len(pieces[0])))
    return np.concatenate([np.asarray(p) for p in pieces])[inverse]


def _guesses(raw: Any, n: int) -> np.ndarray:
    g = np.asarray(raw).reshape(-1)
    if g.shape != (n,):
        raise ValueError(f"the attacker must return one guess per output ({n}); got shape {np.shape(raw)}")
    if g.dtype.kind not in "iub":
        as_float = g.astype(float)
        if not np.all(np.isfinite(as_float)) or np.any(as_float != np.round(as_float)):
            raise ValueError("the attacker must return integer attribute values as guesses")
        g = as_float.astype(np.int64)
    return g.astype(np.int64)


@dataclass(frozen=True, slots=True)
class _AttributeTask:
    """Confusion counts of one chunk: [true value, guess] with a last column for guesses outside 0..k−1."""

    mechanism: Any
    datasets: tuple
    prior: tuple[float, ...]
    guesser: Any
    batch: int = _MIN_BATCH_TRIALS

    def __call__(self, index: int, trials: int, seed: np.random.SeedSequence) -> np.ndarray:
        k = len(self.prior)
        rng = np.random.default_rng(seed)
        prior = np.asarray(self.prior)
        confusion = np.zeros(k * (k + 1), dtype=np.int64)
        for start in range(0, trials, self.batch):
            m = min(self.batch, trials - start)
            values = rng.choice(k, size=m, p=prior)
            order = np.argsort(values, kind="stable")
            inverse = np.empty_like(order)
            inverse[order] = np.arange(m)
            present, sizes = np.unique(values, return_counts=True)
            pieces = [self.mechanism.sample(self.datasets[a], int(c), rng) for a, c in zip(present, sizes, strict=True)]
            outputs = _gather(pieces, inverse)
            guesses = _guesses(self.guesser(self.mechanism, self.datasets, outputs), m)
            column = np.where((guesses >= 0) & (guesses < k), guesses, k)
            confusion += np.bincount(values * (k + 1) + column, minlength=k * (k + 1))
        return confusion.reshape(k, k + 1)


# --------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AttributeAuditResult(AttackCounts):
    """The outcome of an attribute-inference audit (a bound, the baseline, Theorem 4 side by side, the verdict).

    ``epsilon_lower_bound`` is a valid (``confidence``) lower bound on ε in the game's adjacency (:data:`ADJACENCY`)
    at ``delta``; ``feature_dp_epsilon_lower_bound`` the same for a seed-003 feature-DP (ε, δ) claim (Theorem 4
    inverted). ``success_upper_bound`` is the largest success the claim allows under ``reading`` — the number the
    verdict compares ``success_lower_bound`` with; both readings' maxima are reported.
    """

    feature_dp_epsilon_lower_bound: float
    ceiling_success: float
    ceiling_epsilon: float
    epsilon_claimed: float
    delta: float
    claim: dict[str, Any]
    claim_source: str
    reading: ClaimReading
    success_upper_bound: float
    replace_one_success_upper_bound: float
    theorem4_success_upper_bound: float
    theorem4_baseline: float
    confidence: float
    k: int
    prior: tuple[float, ...]
    attacker: str
    mechanism: str
    verdict: Verdict
    verdict_reason: str
    adjacency: str
    seed: int
    chunks: int
    backend: str
    elapsed_seconds: float
    confusion: tuple[tuple[int, ...], ...] = field(default_factory=tuple)
    format_version: int = RESULT_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (no ±inf: undefined values are None)."""
        return {
            "format_version": self.format_version,
            "game": "attribute-inference",
            **self.attack_fields(),
            "feature_dp_epsilon_lower_bound": _finite(self.feature_dp_epsilon_lower_bound),
            "ceiling": {"success": self.ceiling_success, "epsilon": _finite(self.ceiling_epsilon)},
            "epsilon_claimed": _finite(self.epsilon_claimed),
            "delta": self.delta,
            "claim": dict(self.claim),
            "claim_source": self.claim_source,
            "reading": self.reading.value,
            "success_upper_bound": self.success_upper_bound,
            "replace_one_success_upper_bound": self.replace_one_success_upper_bound,
            "theorem4_success_upper_bound": self.theorem4_success_upper_bound,
            "theorem4_baseline": self.theorem4_baseline,
            "confidence": self.confidence,
            "k": self.k,
            "prior": list(self.prior),
            "attacker": self.attacker,
            "mechanism": self.mechanism,
            "verdict": self.verdict.value,
            "verdict_reason": self.verdict_reason,
            "adjacency": self.adjacency,
            "seed": self.seed,
            "chunks": self.chunks,
            "backend": self.backend,
            "elapsed_seconds": self.elapsed_seconds,
            "confusion": [list(row) for row in self.confusion],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttributeAuditResult:
        """Inverse of :meth:`to_dict` (None for an infinite ε comes back as inf; a missing field raises
        ``ValueError`` naming it)."""
        what = "attribute audit result"
        check_result_dict(data, what, RESULT_FORMAT_VERSION)
        ceiling = data.get("ceiling")
        if not isinstance(ceiling, dict) or "success" not in ceiling or "epsilon" not in ceiling:
            raise ValueError("attribute audit result is missing required field 'ceiling'")
        convert = {
            "epsilon_lower_bound": infinite_if_none,
            "feature_dp_epsilon_lower_bound": infinite_if_none,
            "epsilon_claimed": infinite_if_none,
            "confidence_interval": tuple,
            "prior": tuple,
            "reading": ClaimReading,
            "verdict": Verdict,
        }
        skip = ("ceiling_success", "ceiling_epsilon", "confusion", "format_version")
        kwargs = result_kwargs(cls, data, what, convert, optional=skip, version=RESULT_FORMAT_VERSION)
        return cls(
            **kwargs,
            ceiling_success=ceiling["success"],
            ceiling_epsilon=infinite_if_none(ceiling["epsilon"]),
            confusion=tuple(tuple(row) for row in data.get("confusion", ())),
        )


# --------------------------------------------------------------------------------------------
# What the claim allows
# --------------------------------------------------------------------------------------------


def _allowed(claim: Claim, prior: np.ndarray, baseline: float) -> tuple[float, float]:
    """(replace-one maximum success, Theorem 4 maximum success) the claim allows."""
    support = _support(prior)
    hook = plugins.attribute_inference_bounds()
    match claim:
        case DpClaim(epsilon=eps, delta=d):
            replace_one = max_success(epsilon=eps, delta=d, prior=prior)
            theorem4 = hook.attribute_inference_bound_dp(epsilon=eps, delta=d, baseline=baseline)
        case GdpClaim(mu=mu):
            replace_one = max_success_from_profile(lambda e: conversions.gdp_delta(mu, e), support)
            theorem4 = hook.attribute_inference_bound_gdp(mu=mu, baseline=baseline)
        case ProfileClaim(profile=profile):
            replace_one = max_success_from_profile(profile.deltas, support)
            theorem4 = hook.attribute_inference_bound_profile(profile, baseline=baseline)
        case _:  # pragma: no cover - _resolve_claim admits only these
            raise ValueError(f"claim must be a DpClaim, GdpClaim or ProfileClaim; got {claim!r}")
    return float(replace_one), float(theorem4)


def _claimed_epsilon(claim: Claim, delta: float) -> float:
    match claim:
        case DpClaim(epsilon=eps):
            return eps
        case GdpClaim(mu=mu):
            return conversions.gdp_epsilon(mu, delta) if mu > 0 else 0.0
        case ProfileClaim(profile=profile):
            return profile.epsilon(delta)
    raise ValueError(f"claim must be a DpClaim, GdpClaim or ProfileClaim; got {claim!r}")  # pragma: no cover


def _claim_dict(claim: Claim) -> dict[str, Any]:
    match claim:
        case DpClaim(epsilon=eps, delta=d):
            return {"type": "dp", "epsilon": eps, "delta": d}
        case GdpClaim(mu=mu):
            return {"type": "gdp", "mu": mu}
        case ProfileClaim(profile=profile):
            return {"type": "profile", "description": profile.description}
    raise ValueError(f"claim must be a DpClaim, GdpClaim or ProfileClaim; got {claim!r}")  # pragma: no cover


def _resolve_claim(claim: Any, delta: Any) -> tuple[Claim, float]:
    if isinstance(claim, bool):
        raise ValueError(f"claim must be an epsilon, DpClaim, GdpClaim or ProfileClaim; got {claim!r}")
    if isinstance(claim, int | float | np.integer | np.floating):
        claim = DpClaim(epsilon=_number("claim", claim), delta=0.0 if delta is None else delta)
    match claim:
        case DpClaim():
            if delta is not None and conversions.check_delta(delta, allow_zero=True) != claim.delta:
                raise ValueError(f"delta {delta!r} differs from the claim's delta {claim.delta!r}")
            return claim, claim.delta
        case GdpClaim() | ProfileClaim():
            return claim, conversions.check_delta(1e-5 if delta is None else delta)
    raise ValueError(f"claim must be an epsilon, DpClaim, GdpClaim or ProfileClaim; got {claim!r}")


def _feature_dp_epsilon(success_lower: float, *, delta: float, baseline: float) -> float:
    """inf{ε ≥ 0 : Theorem 4's (ε, δ) bound ≥ p_lb}: the ε lower bound for a seed-003 feature-DP claim.

    Bisection on the plug-in's ``attribute_inference_bound_dp`` (:func:`~dplens.accountant.plugins.
    attribute_inference_bounds`; non-decreasing in ε), returning the lower end of the final bracket (never above the
    exact infimum).
    """
    hook = plugins.attribute_inference_bounds()

    def allowed(eps: float) -> float:
        return hook.attribute_inference_bound_dp(epsilon=eps, delta=delta, baseline=baseline)

    if success_lower >= 1.0:
        return math.inf
    if allowed(0.0) >= success_lower:
        return 0.0
    low, high = 0.0, 1.0
    while allowed(high) < success_lower:
        low, high = high, 2.0 * high
        if high > 1e4:
            return low
    for _ in range(200):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if allowed(middle) >= success_lower:
            high = middle
        else:
            low = middle
    return low


def _verdict(
    *,
    lower: float,
    ceiling: float,
    allowed: float,
    claim: Claim,
    reading: ClaimReading,
    baseline: float,
    epsilon_lb: float,
    epsilon_claimed: float,
    trials: int,
    confidence: float,
) -> tuple[Verdict, str]:
    level = f"{confidence:.0%}"
    theory = "the exact replace-one maximum" if reading is ClaimReading.REPLACE_ONE else "seed 003 Theorem 4"
    allows = f"the {allowed:.4g} that the claim {claim.describe()} allows at baseline {baseline:.4g} ({theory})"
    return decide(
        lower,
        ceiling,
        allowed,
        violation=(
            f"With {level} confidence the attack succeeds with probability at least {lower:.4g}, above {allows}: "
            f"the claim is violated (epsilon lower bound {epsilon_lb:.4g} against the claimed {epsilon_claimed:.4g})."
        ),
        inconclusive=(
            f"With {trials} trials even a perfect attack could show a success of at most {ceiling:.4g}, which does "
            f"not exceed {allows}: a violation could not have been detected. Run more trials."
        ),
        consistent=(
            f"The attack found no evidence against the claim: its {level} success lower bound {lower:.4g} does not "
            f"exceed {allows} (this supports, but cannot prove, the claim)."
        ),
    )


# --------------------------------------------------------------------------------------------
# The game
# --------------------------------------------------------------------------------------------


def _resolve_values(mechanism: Any, prior: Any, k: Any, datasets: Any) -> tuple[np.ndarray, tuple]:
    """The prior and the data set of each attribute value; every source of k must agree."""
    own = getattr(mechanism, "num_values", None)
    own = own if isinstance(own, int) and not isinstance(own, bool) and own >= 2 else None
    k = None if k is None else _check_int("k", k, 2)
    p = None if prior is None else _check_prior(prior)
    if callable(datasets):
        size = k if k is not None else p.size if p is not None else own
        if size is None:
            raise ValueError("k: give k (or a prior) when datasets is a function of the attribute value")
        datasets = tuple(datasets(a) for a in range(size))
    elif datasets is not None:
        if isinstance(datasets, str | bytes) or not isinstance(datasets, Sequence | np.ndarray):
            raise ValueError(f"datasets must be a sequence (one data set per value) or a function; got {datasets!r}")
        datasets = tuple(datasets)
    sizes = {
        "k": k,
        "prior": None if p is None else p.size,
        "datasets": None if datasets is None else len(datasets),
        # Without data sets the values 0..k−1 are passed to the mechanism itself: they must be its values.
        "mechanism.num_values": own if datasets is None else None,
    }
    sizes = {name: value for name, value in sizes.items() if value is not None}
    if not sizes:
        raise ValueError("k: the number of attribute values is unknown; give k, prior or datasets")
    if len(set(sizes.values())) > 1:
        name = next(n for n in ("prior", "datasets", "k") if n in sizes)
        raise ValueError(f"{name}: the numbers of attribute values disagree: {sizes!r}")
    size = next(iter(sizes.values()))
    if size < 2:
        raise ValueError(f"datasets must hold at least 2 data sets; got {size}")
    return (np.full(size, 1.0 / size) if p is None else p), (tuple(range(size)) if datasets is None else datasets)


def _output_size(mechanism: Any, data: Any) -> int:
    sample = mechanism.sample(data, 1, np.random.default_rng(0))
    parts = sample if isinstance(sample, tuple) else (sample,)
    return max(sum(int(np.asarray(p).size) for p in parts), 1)


def _describe(mechanism: Any) -> str:
    text = repr(mechanism)
    return text if len(text) <= 300 else text[:297] + "..."


def _adjacency(mechanism: Any) -> str:
    relation = getattr(mechanism, "neighboring", None)
    value = getattr(relation, "value", None)
    if value is not None and value != "replace_one":
        return (
            f"{ADJACENCY}. The mechanism states its guarantee for '{value}' neighbours: changing one attribute is a "
            "replace-one change, which can legitimately cost up to twice an add/remove epsilon (group privacy)"
        )
    return ADJACENCY


def _count_confusion(
    mechanism: Any,
    datasets: Any,
    prior: np.ndarray,
    guesser: Any,
    attacker_name: str,
    *,
    trials: int,
    seed: int,
    chunk_size: int | None,
    execution: dict[str, Any],
) -> tuple[runner.ChunkPlan, np.ndarray]:
    """The counted trials in chunks (memory flat in the trials) and their confusion counts (true × guessed)."""
    support_value = int(np.flatnonzero(prior > 0)[0])
    output_size = _output_size(mechanism, datasets[support_value])
    batch = batch_trials(output_size)
    if chunk_size is None:
        chunk_size = default_chunk_size(trials, output_size)  # at most 1024 chunks: their confusion counts are kept
    plan = runner.ChunkPlan(trials, _check_int("chunk_size", chunk_size, 1))
    key = runner.fingerprint(
        {
            "game": "attribute-inference",
            "mechanism": repr(mechanism),
            "datasets": repr(datasets),
            "prior": prior.tolist(),
            "attacker": guesser.key(),
            "trials": trials,
            "chunk_size": plan.chunk_size,
            "batch": batch,
            "seed": seed,
        }
    )
    task = _AttributeTask(mechanism, datasets, tuple(float(p) for p in prior), guesser, batch)
    done = runner.run_chunks(
        task,
        plan,
        seed=seed,
        key=key,
        description="attribute audit",
        about={"game": "attribute-inference", "mechanism": _describe(mechanism), "attacker": attacker_name},
        **execution,
    )
    return plan, np.sum([done[i] for i in range(plan.chunks)], axis=0)


def _judged(
    stats: Any,
    claim: Any,
    *,
    prior: np.ndarray,
    delta: float,
    reading: ClaimReading,
    trials: int,
    confidence: float,
) -> dict[str, Any]:
    """The result's fields that compare the counts with the claim: the ceiling, the success rates the claim allows
    (replace-one and Theorem 4 readings), the Feature-DP ε bound and the verdict."""
    ceiling = float(bd.clopper_pearson_lower(trials, trials, 1.0 - confidence))
    ball = plugins.attribute_inference_bounds().baseline_success(prior)
    replace_one, theorem4 = _allowed(claim, prior, ball)
    allowed = replace_one if reading is ClaimReading.REPLACE_ONE else theorem4
    epsilon_claimed = _claimed_epsilon(claim, delta)
    feature_dp_epsilon = _feature_dp_epsilon(stats.success_lower_bound, delta=delta, baseline=ball)
    verdict, reason = _verdict(
        lower=stats.success_lower_bound,
        ceiling=ceiling,
        allowed=allowed,
        claim=claim,
        reading=reading,
        baseline=stats.baseline,
        epsilon_lb=stats.epsilon_lower_bound if reading is ClaimReading.REPLACE_ONE else feature_dp_epsilon,
        epsilon_claimed=epsilon_claimed,
        trials=trials,
        confidence=confidence,
    )
    return {
        "feature_dp_epsilon_lower_bound": feature_dp_epsilon,
        "ceiling_success": ceiling,
        "ceiling_epsilon": epsilon_lower_bound(ceiling, delta=delta, prior=prior),
        "epsilon_claimed": epsilon_claimed,
        "success_upper_bound": allowed,
        "replace_one_success_upper_bound": replace_one,
        "theorem4_success_upper_bound": theorem4,
        "theorem4_baseline": ball,
        "verdict": verdict,
        "verdict_reason": reason,
    }


def audit(
    mechanism: Any,
    *,
    trials: int,
    claim: float | DpClaim | GdpClaim | ProfileClaim,
    delta: float | None = None,
    prior: Sequence[float] | np.ndarray | None = None,
    k: int | None = None,
    datasets: Sequence[Any] | Callable[[int], Any] | None = None,
    attacker: BayesOptimal | Classifier | CallableAttacker | Callable[[Any], np.ndarray] | None = None,
    reading: ClaimReading = ClaimReading.REPLACE_ONE,
    confidence: float = 0.95,
    seed: int = 0,
    workers: int = 1,
    scheduler: Any = None,
    checkpoint: str | Path | None = None,
    progress: bool = False,
    chunk_size: int | None = None,
    claim_source: str = "given",
) -> AttributeAuditResult:
    """Run the attribute-inference game on ``mechanism`` and bound its ε from below (replace-one on the attribute).

    Each trial draws A ∼ π, one output of ``mechanism.sample(datasets[A], ·, rng)`` and the attacker's guess; the
    chunks run through :func:`dplens.auditing.runner.run_chunks` (chunk i seeded by ``SeedSequence(seed,
    spawn_key=(1, i))``), so the result is bit-identical in-process, in a pool or on Dask, and resumable from a
    checkpoint.

    Args:
        mechanism: anything with ``sample(data, n, rng)`` (the :class:`~dplens.mechanisms.base.Mechanism`
            protocol); ``log_likelihood_ratio`` enables :class:`BayesOptimal`.
        trials: n, the number of counted trials.
        claim: the guarantee under test: an ε (pure DP, or with ``delta``), :class:`DpClaim`, :class:`GdpClaim` or
            :class:`ProfileClaim`.
        delta: δ of the ε statements (the claim's δ for an (ε, δ) claim; default 1e-5 for GDP and profile claims,
            whose ε at this δ is reported as ``epsilon_claimed``).
        prior: π over the k attribute values (default uniform).
        k: the number of attribute values (default from ``prior``, ``datasets`` or ``mechanism.num_values``).
        datasets: the data set (the mechanism's ``data``) for each attribute value, or a function value → data set
            (evaluated once here); default the values 0..k−1 themselves (randomized response).
        attacker: default :class:`BayesOptimal` when the mechanism has a log-likelihood ratio, else
            :class:`Classifier`; a bare callable is a :class:`CallableAttacker`.
        reading: how the claim is read for the verdict (:class:`ClaimReading`).
        confidence: 1 − α of the one-sided bound (the two-sided interval is at the same level).
        seed: root seed; the result is a deterministic function of it, whatever ``workers``/``scheduler``.
        workers, scheduler, checkpoint, progress: execution (:func:`dplens.auditing.runner.run_chunks`).
        chunk_size: trials per chunk (default: at least 8 chunks).
        claim_source: where the claim comes from (recorded).

    Returns:
        A frozen :class:`AttributeAuditResult`.
    """
    start = time.perf_counter()
    trials = runner.check_trials(_check_int("trials", trials, 1))
    seed = _check_int("seed", seed, 0)
    confidence = _check_confidence(confidence)
    if not isinstance(reading, ClaimReading):
        raise ValueError(f"reading must be a ClaimReading; got {reading!r}")
    if not callable(getattr(mechanism, "sample", None)):
        raise ValueError(f"mechanism must implement sample(data, n, rng); got {mechanism!r}")
    claim, delta = _resolve_claim(claim, delta)
    prior, datasets = _resolve_values(mechanism, prior, k, datasets)
    guesser, attacker_name = _resolve_attacker(attacker, mechanism, datasets, prior, seed)

    execution = {"workers": workers, "scheduler": scheduler, "checkpoint": checkpoint, "progress": progress}
    plan, confusion = _count_confusion(
        mechanism, datasets, prior, guesser, attacker_name, trials=trials, seed=seed, chunk_size=chunk_size,
        execution=execution,
    )  # fmt: skip
    successes = int(np.trace(confusion[:, : prior.size]))

    stats = bound_from_counts(successes, trials, prior=prior, delta=delta, confidence=confidence)
    judged = _judged(stats, claim, prior=prior, delta=delta, reading=reading, trials=trials, confidence=confidence)
    return AttributeAuditResult(
        **stats.attack_counts(),
        delta=delta,
        claim=_claim_dict(claim),
        claim_source=claim_source,
        reading=reading,
        confidence=confidence,
        k=int(prior.size),
        prior=tuple(float(p) for p in prior),
        attacker=attacker_name,
        mechanism=_describe(mechanism),
        adjacency=_adjacency(mechanism),
        seed=seed,
        chunks=plan.chunks,
        backend=runner.backend_name(workers=workers, scheduler=scheduler),
        elapsed_seconds=round(time.perf_counter() - start, 3),
        confusion=tuple(tuple(int(c) for c in row) for row in confusion),
        **judged,
    )
