"""dplens as Opacus's privacy accountant: ε of a DP-SGD training with a certified bracket, and calibration.

Opacus (Yousefpour et al. 2021, arXiv 2109.12298) accounts a training as a history of ``(noise_multiplier,
sample_rate, steps)`` entries, each step a Poisson-subsampled Gaussian under add/remove adjacency (Abadi et al. 2016;
Mironov, Talwar, Zhang 2019). :class:`OpacusAccountant` keeps that same history (so Opacus's own code, which sets
``accountant.history`` directly, works) and answers from a dplens :class:`~dplens.accountant.compose.Accountant`
built from it: the smallest upper bound over dplens's routes (the PLD engine's pessimistic ε, certified by its
optimistic end ``epsilon_lower``; RDP with α optimised continuously, Canonne–Kamath–Steinke 2020 Prop. 12), so the
true ε of the history lies in [``epsilon_lower``, ``epsilon``]. Opacus's PRV accountant (Gopi, Lee, Wutschitz 2021)
returns its own upper bound, estimate + ``eps_error``.

- :class:`OpacusAccountant`: Opacus's ``IAccountant`` interface (registered as a virtual subclass, and under the
  mechanism name ``"dplens"`` in Opacus's registry, so ``PrivacyEngine(accountant="dplens")`` works once it is
  registered: :func:`register` or any instantiation does it).
- :func:`from_opacus`: an Opacus accountant, privacy engine, state dict or history → a dplens ledger;
  :func:`opacus_spec` → a spec, so :func:`dplens.generate_report` files a report of the training.
- :func:`calibrate_noise_multiplier` and :func:`make_private_with_epsilon`: σ for a target (ε, δ) by dplens's
  calibration (:func:`dplens.accountant.calibrate.calibrate`: the answer's ε is ≤ the target), counting the budget
  the engine's accountant has already spent (Opacus's ``make_private_with_epsilon`` ignores it with a warning).

Only the parts that touch Opacus import it (torch comes with it); without the ``[torch]`` extra they raise a
one-line ImportError naming it. :func:`from_opacus` on a history needs neither.

Example:
    >>> import dplens
    >>> ledger = dplens.from_opacus([(1.1, 256 / 60000, 2343)])  # Opacus's history: (σ, q, steps); 10 MNIST epochs
    >>> result = ledger.epsilon_result(1e-5)
    >>> round(result.epsilon, 2), result.epsilon_lower <= result.epsilon
    (0.92, True)
"""

from __future__ import annotations

import contextlib
import math
import numbers
import warnings
from collections.abc import Callable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MECHANISM",
    "MISSING_EXTRA",
    "AdaClipSettings",
    "OpacusAccountant",
    "OpacusAdaClipWarning",
    "adaclip_note",
    "adaclip_settings",
    "calibrate_noise_multiplier",
    "from_opacus",
    "make_private_with_epsilon",
    "opacus_spec",
    "register",
]

#: The mechanism name under which Opacus's registry knows this accountant.
MECHANISM = "dplens"

#: The one-line message when torch or opacus is missing.
MISSING_EXTRA = 'the Opacus integration needs torch and opacus: pip install "dplens[torch]"'

# Opacus's accountants keep histories in the same (σ, q, steps) format; a state dict of any of them loads here.
_COMPATIBLE_MECHANISMS = frozenset({MECHANISM, "rdp", "prv", "gdp"})

_CACHE_SIZE = 32


def _opacus_accountants() -> Any:
    """``opacus.accountants``, or the one-line ImportError naming the extra."""
    try:
        import opacus.accountants as accountants
    except ImportError:
        raise ImportError(MISSING_EXTRA) from None
    return accountants


def register() -> None:
    """Make ``OpacusAccountant`` an ``opacus.accountants.IAccountant`` and register it in Opacus's registry.

    Afterwards ``PrivacyEngine(accountant="dplens")`` and ``create_accountant("dplens")`` (which Opacus's
    ``get_noise_multiplier`` uses) build an :class:`OpacusAccountant`. Idempotent; a "dplens" entry that someone else
    registered is left alone.

    Example:
        >>> from dplens.integrations.opacus_accountant import register
        >>> register()  # needs pip install "dplens[torch]"
        >>> from opacus.accountants import create_accountant
        >>> create_accountant("dplens").mechanism()
        'dplens'
    """
    accountants = _opacus_accountants()
    if not issubclass(OpacusAccountant, accountants.IAccountant):
        accountants.IAccountant.register(OpacusAccountant)
    with contextlib.suppress(ValueError):  # already registered
        accountants.register_accountant(MECHANISM, OpacusAccountant)


# ---- histories ------------------------------------------------------------------------------------------------


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _scalar(value: Any) -> Any:
    """A one-element tensor (a scheduler may set ``optimizer.noise_multiplier`` to one) as a Python number."""
    if not _real(value) and hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def _check_noise_multiplier(value: Any, name: str = "noise_multiplier") -> float:
    if not (_real(value) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    return float(value)


def _check_sample_rate(value: Any, name: str = "sample_rate") -> float:
    if not (_real(value) and 0 <= value <= 1):
        raise ValueError(f"{name} must be a number in [0, 1]; got {value!r}")
    return float(value)


def _check_steps(value: Any, name: str = "steps") -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0; got {value!r}")
    return int(value)


def _check_history(history: Any, name: str = "history") -> list[tuple[float, float, int]]:
    """Validate an Opacus history: a list of (noise_multiplier, sample_rate, steps) entries."""
    if isinstance(history, str | bytes | Mapping) or not isinstance(history, Sequence):
        raise ValueError(f"{name} must be a list of (noise_multiplier, sample_rate, steps) entries; got {history!r}")
    out = []
    for i, entry in enumerate(history):
        if isinstance(entry, str | bytes) or not isinstance(entry, Sequence) or len(entry) != 3:
            raise ValueError(f"{name}[{i}] must be (noise_multiplier, sample_rate, steps); got {entry!r}")
        sigma, rate, steps = entry
        out.append(
            (
                _check_noise_multiplier(sigma, f"{name}[{i}] noise_multiplier"),
                _check_sample_rate(rate, f"{name}[{i}] sample_rate"),
                _check_steps(steps, f"{name}[{i}] steps"),
            )
        )
    return out


def _step_event(noise_multiplier: float, sample_rate: float) -> Any:
    """One DP-SGD step: the Poisson-subsampled Gaussian (add/remove).

    σ = 0 releases the batch's gradient without noise: accounted as :class:`~dplens.accountant.events.NonPrivate`
    (ε = ∞, a valid if pessimistic bound: subsampling alone gives no ε below ∞ at δ < q).
    """
    from dplens.accountant import events as ev

    if noise_multiplier == 0:
        return ev.NonPrivate()
    return ev.PoissonSampled(sampling_rate=sample_rate, event=ev.Gaussian(noise_multiplier=noise_multiplier))


def _ledger(
    history: Sequence[tuple[float, float, int]],
    *,
    tolerance: float | None = None,
    sampler: Any = None,
    adaclip: AdaClipSettings | None = None,
) -> Any:
    """The history as a ledger: Poisson steps, or (a detected non-Poisson sampler) one run of all the steps; with
    ``adaclip`` (an AdaClipDPOptimizer ran) each entry's steps release the gradient and the count together."""
    from dplens.accountant.compose import Accountant

    kwargs = {} if tolerance is None else {"tolerance": tolerance}
    if adaclip is not None:
        if sampler is not None and sampler.sampling != "poisson":
            raise ValueError(
                f"an AdaClipDPOptimizer training is accounted under Poisson sampling only (its count query is a "
                f"Poisson-subsampled Gaussian); the loader runs {sampler.sampling!r}: use poisson_sampling=True"
            )
        accountant = Accountant(**kwargs)
        for sigma, rate, steps in history:
            if steps > 0 and rate > 0:
                accountant.compose(_adaclip_steps(sigma, rate, steps, adaclip))
        return accountant
    if sampler is not None and sampler.sampling != "poisson":
        steps = sum(count for _, rate, count in history if count > 0 and rate > 0)
        if steps == 0:
            return Accountant(**kwargs)
        sigma = min(s for s, rate, count in history if count > 0 and rate > 0)
        if sigma == 0:
            return Accountant(**kwargs).compose(_step_event(0.0, 1.0))
        run = sampler.run(noise_multiplier=sigma, steps=steps)
        return Accountant(neighboring=run.neighboring, **kwargs).compose(run)
    accountant = Accountant(**kwargs)
    for sigma, rate, steps in history:
        if steps > 0 and rate > 0:
            accountant.compose(_step_event(sigma, rate), steps)
    return accountant


def _history_of(source: Any) -> list[tuple[float, float, int]]:
    """The history of an Opacus accountant, privacy engine, state dict, or the history itself."""
    if isinstance(source, Mapping):
        if "history" not in source:
            raise ValueError(f"source is a mapping without a 'history' key (not an accountant state dict): {source!r}")
        mechanism = source.get("mechanism", MECHANISM)
        if mechanism not in _COMPATIBLE_MECHANISMS:
            raise ValueError(f"source state dict has unknown mechanism {mechanism!r}")
        return _check_history(source["history"], "source['history']")
    if hasattr(source, "history"):
        return _check_history(source.history, "source.history")
    if hasattr(source, "accountant") and hasattr(source.accountant, "history"):  # a PrivacyEngine
        return _check_history(source.accountant.history, "source.accountant.history")
    if isinstance(source, Sequence) and not isinstance(source, str | bytes):
        return _check_history(source, "source")
    raise ValueError(
        "source must be an Opacus accountant, a PrivacyEngine, an accountant state dict or a history of "
        f"(noise_multiplier, sample_rate, steps) entries; got {source!r}"
    )


def from_opacus(
    source: Any,
    *,
    tolerance: float | None = None,
    data_loader: Any = None,
    poisson_sampling: bool | None = None,
    optimizer: Any = None,
) -> Any:
    """A dplens ledger of an Opacus training, under the sampler that ran.

    Args:
        source: an Opacus accountant (``RDPAccountant``, ``PRVAccountant``, ``GaussianAccountant``,
            :class:`OpacusAccountant`: anything with a ``history``), a ``PrivacyEngine``, an accountant
            ``state_dict()`` (as in Opacus checkpoints), or the history itself.
        tolerance: the PLD route's relative bracket width (default: the Accountant's, 1e-3).
        data_loader: the loader the training ran (what ``make_private`` returned); its sampler is detected
            (:func:`dplens.integrations.loaders.sampler_of`). Without it, an :class:`OpacusAccountant` source's
            detected sampler is used, else Poisson sampling — what Opacus's accountants assume.
        poisson_sampling: what ``make_private`` was told, when ``data_loader`` is given.
        optimizer: the optimizer the training ran (what ``make_private`` returned). An Opacus 1.6
            ``AdaClipDPOptimizer`` (``clipping="adaptive"``) also releases a noisy count each step: its steps are
            accounted as :class:`~dplens.accountant.adaptive_clipping.AdaptiveClipping` with its parameters, and an
            :class:`OpacusAdaClipWarning` says that Opacus's own ε for it is below the true one. Without it, an
            :class:`OpacusAccountant` source's recorded AdaClip settings are used.

    Returns:
        An :class:`~dplens.accountant.compose.Accountant` whose every ε is an upper bound. Under Poisson sampling each
        (σ, q, steps) entry is ``steps`` Poisson-subsampled Gaussians (add/remove); under another sampler the
        training is a :class:`~dplens.accountant.dp_sgd.DpSgdRun` of all the steps at the smallest σ of the history
        (a valid upper bound for a schedule), so its ledger names the sampler.

    Example:
        >>> import dplens
        >>> history = [(1.1, 256 / 60000, 1000), (0.9, 256 / 60000, 800)]  # σ lowered after 1000 steps
        >>> ledger = dplens.from_opacus({"history": history, "mechanism": "prv"})  # an Opacus state dict
        >>> [count for _, count in ledger.ledger]
        [1000, 800]
        >>> round(ledger.epsilon(1e-5), 2)
        1.03
    """
    history = _history_of(source)
    sampler = getattr(source, "sampler", None) if isinstance(source, OpacusAccountant) else None
    adaclip = getattr(source, "adaptive_clipping", None) if isinstance(source, OpacusAccountant) else None
    if data_loader is not None:
        from dplens.integrations.loaders import sampler_of

        sampler = sampler_of(data_loader, poisson_sampling=poisson_sampling)
    if optimizer is not None:
        adaclip = adaclip_settings(optimizer) or adaclip  # a recorded AdaClip run stays one
    if adaclip is not None:
        warnings.warn(OpacusAdaClipWarning(adaclip_note(history, adaclip)), stacklevel=2)
    return _ledger(history, tolerance=tolerance, sampler=sampler, adaclip=adaclip)


def opacus_spec(
    source: Any,
    *,
    name: str = "Opacus DP-SGD training",
    claim: tuple[float, float] | None = None,
    optimizer: Any = None,
) -> Any:
    """A dplens :class:`~dplens.spec.Spec` of an Opacus training, for :func:`dplens.generate_report`.

    One ``poisson_subsampled_gaussian`` mechanism per history entry (``source`` as in :func:`from_opacus`);
    ``claim`` = (ε, δ) is the guarantee the report states (e.g. the training's target), else the accountant's ε.
    An AdaClipDPOptimizer run (``optimizer``, or an :class:`OpacusAccountant` that recorded one) gives one
    ``adaptive_clipping`` mechanism per entry instead: the gradient and the raw count as Opacus noises them.

    Example:
        >>> import dplens
        >>> from dplens.integrations.opacus_accountant import opacus_spec
        >>> spec = opacus_spec([(1.1, 256 / 60000, 2343)], claim=(1.0, 1e-5))
        >>> spec.accountant().ledger == dplens.from_opacus([(1.1, 256 / 60000, 2343)]).ledger
        True
    """
    from dplens.spec import parse_spec

    adaclip = getattr(source, "adaptive_clipping", None) if isinstance(source, OpacusAccountant) else None
    if optimizer is not None:
        adaclip = adaclip_settings(optimizer) or adaclip
    mechanisms = []
    for i, (sigma, rate, steps) in enumerate(_history_of(source)):
        if sigma == 0:
            raise ValueError(f"source history[{i}] has noise_multiplier 0: a spec cannot state a step without noise")
        if steps > 0 and rate > 0:
            mechanisms.append(_spec_table(sigma, rate, steps, adaclip))
    if not mechanisms:
        raise ValueError(f"source has no step to account; got {source!r}")
    document: dict[str, Any] = {"name": name, "mechanism": mechanisms}
    if claim is not None:
        if not isinstance(claim, tuple | list) or len(claim) != 2:
            raise ValueError(f"claim must be (epsilon, delta); got {claim!r}")
        document["claim"] = {"epsilon": float(claim[0]), "delta": float(claim[1])}
    return parse_spec(document, source="<opacus history>")


def _spec_table(sigma: float, rate: float, steps: int, adaclip: AdaClipSettings | None) -> dict[str, Any]:
    if adaclip is None:
        return {"type": "poisson_subsampled_gaussian", "noise_multiplier": sigma, "sampling_rate": rate, "steps": steps}
    event = _adaclip_steps(sigma, rate, steps, adaclip)
    return {
        "type": "adaptive_clipping",
        "gradient_noise": event.gradient_noise,
        "count_noise": event.count_noise,
        "count_sensitivity": 1.0,
        "sampling_rate": rate,
        "steps": steps,
    }


# ---- adaptive clipping (Opacus's AdaClipDPOptimizer) ----------------------------------------------------------


class OpacusAdaClipWarning(UserWarning):
    """Opacus's own ε for an ``AdaClipDPOptimizer`` training is below the true one (dplens accounts the run)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdaClipSettings:
    """What an Opacus 1.6 ``AdaClipDPOptimizer`` releases besides the gradient: the raw count of unclipped records
    noised at ``unclipped_num_std`` σ_u, and the quantile estimator's settings (a post-processing of that count)."""

    unclipped_num_std: float
    target_unclipped_quantile: float
    clipbound_learning_rate: float
    max_clipbound: float
    min_clipbound: float

    def to_dict(self) -> dict[str, float]:
        return {f: getattr(self, f) for f in self.__slots__}


def adaclip_settings(optimizer: Any) -> AdaClipSettings | None:
    """The :class:`AdaClipSettings` of an Opacus ``AdaClipDPOptimizer``; None for another Opacus ``DPOptimizer``;
    a ``ValueError`` for anything else."""
    try:
        from opacus.optimizers import AdaClipDPOptimizer, DPOptimizer
    except ImportError:
        raise ImportError(MISSING_EXTRA) from None
    if not isinstance(optimizer, DPOptimizer):
        raise ValueError(f"optimizer must be an Opacus DPOptimizer (what make_private returns); got {optimizer!r}")
    if not isinstance(optimizer, AdaClipDPOptimizer):
        return None
    values = {
        name: float(_scalar(getattr(optimizer, name)))
        for name in (
            "unclipped_num_std",
            "target_unclipped_quantile",
            "clipbound_learning_rate",
            "max_clipbound",
            "min_clipbound",
        )
    }
    return AdaClipSettings(**values)


def _adaclip_steps(sigma: float, rate: float, steps: int, settings: AdaClipSettings) -> Any:
    """``steps`` AdaClip steps as Opacus 1.6 runs them (``opacus/optimizers/adaclipoptimizer.py``): the gradient
    noised at σ_eff = (σ⁻² − (2σ_u)⁻²)^(−1/2) (``add_noise``), the raw count Σᵢ bᵢ (sensitivity 1 under add/remove,
    ``clip_and_accumulate``) at σ_u — :class:`~dplens.accountant.adaptive_clipping.AdaptiveClipping` with
    ``count_sensitivity=1``."""
    from dplens.accountant import events as ev
    from dplens.accountant.adaptive_clipping import AdaptiveClipping, effective_noise_multiplier

    if sigma == 0:
        return ev.SelfComposed(event=ev.NonPrivate(), count=steps)
    return AdaptiveClipping(
        gradient_noise=effective_noise_multiplier(sigma, settings.unclipped_num_std),
        count_noise=settings.unclipped_num_std,
        sampling_rate=rate,
        steps=steps,
        count_sensitivity=1.0,
        target_unclipped_quantile=settings.target_unclipped_quantile,
        clipbound_learning_rate=settings.clipbound_learning_rate,
        max_clipbound=settings.max_clipbound,
        min_clipbound=settings.min_clipbound,
    )


def adaclip_note(history: Sequence[tuple[float, float, int]], settings: AdaClipSettings) -> str:
    """One sentence: what Opacus charges, what the optimizer releases, and that Opacus's own ε is below the true one."""
    sigma = min(s for s, _, _ in history) if history else 0.0
    sigma_u = settings.unclipped_num_std
    if sigma == 0:
        return "AdaClipDPOptimizer with noise_multiplier 0: no privacy (epsilon = inf)"
    sigma_eff = (sigma**-2 - 0.25 * sigma_u**-2) ** -0.5  # Opacus's add_noise
    total = (sigma_eff**-2 + sigma_u**-2) ** -0.5  # = (σ⁻² + ¾σ_u⁻²)^(−1/2) < σ
    return (
        f"Opacus's own epsilon for this AdaClipDPOptimizer training is BELOW the true one: its accountant charges "
        f"noise_multiplier {sigma:g} per step, but the optimizer noises the gradient at {sigma_eff:.6g} "
        f"and the raw unclipped count (sensitivity 1) at unclipped_num_std {sigma_u:g}, together worth "
        f"{total:.6g} < {sigma:g}; dplens accounts both releases as implemented (the count's division by the "
        "realised batch size is outside every Gaussian accounting)"
    )


# ---- the accountant -------------------------------------------------------------------------------------------


class OpacusAccountant:
    """dplens's accountant inside Opacus (its ``IAccountant`` interface), with a certified bracket on ε.

    ``history`` is Opacus's: a list of ``(noise_multiplier, sample_rate, steps)``, consecutive steps with equal
    (σ, q) merged. :meth:`get_epsilon` is the smallest upper bound over dplens's routes for the whole history
    (:meth:`~dplens.accountant.compose.Accountant.epsilon_result` with ``Method.BEST``);
    :meth:`get_epsilon_bracket` also returns the certified lower end. ``len()`` is the number of steps taken (the
    interface's documented meaning; Opacus's own accountants return the number of history entries).

    Args:
        tolerance: the PLD route's relative bracket width, (ε − ε_lower) ≤ tolerance·ε.
        method: the route (:class:`~dplens.accountant.compose.Method`; default BEST).

    Use it as ``PrivacyEngine(accountant="dplens")`` (after :func:`register`, which instantiating this class does),
    or assign ``privacy_engine.accountant = OpacusAccountant()`` before ``make_private``.

    Example:
        >>> from dplens import OpacusAccountant
        >>> accountant = OpacusAccountant()  # needs pip install "dplens[torch]"
        >>> for _ in range(2343):  # what Opacus's optimizer hook does at every step: 10 epochs of MNIST
        ...     accountant.step(noise_multiplier=1.1, sample_rate=256 / 60000)
        >>> accountant.history, len(accountant)
        ([(1.1, 0.004266666666666667, 2343)], 2343)
        >>> round(accountant.get_epsilon(1e-5), 2)
        0.92
        >>> bracket = accountant.get_epsilon_bracket(1e-5, eps_error=1e-3)
        >>> bracket.epsilon_lower <= 0.9188 <= bracket.epsilon and bracket.epsilon - bracket.epsilon_lower <= 1e-3
        True
    """

    def __init__(self, *, tolerance: float | None = None, method: Any = None) -> None:
        from dplens.accountant import pld
        from dplens.accountant.routes import Method, as_method

        register()  # the one-line ImportError without the extra
        self.history: list[tuple[float, float, int]] = []
        self._tolerance = pld.DEFAULT_TOLERANCE if tolerance is None else pld.check_tolerance(tolerance)
        self._method = Method.BEST if method is None else as_method(method)
        self._cache: dict[Any, Any] = {}
        #: The :class:`~dplens.accountant.calibrate.CalibrationResult` of :func:`make_private_with_epsilon`, if any.
        self.calibration: Any = None
        #: The sampler the training's loader runs (:class:`~dplens.integrations.loaders.LoaderSampler`), detected when
        #: Opacus's ``make_private`` attaches this accountant, or set by :meth:`attach`; None: Poisson sampling at
        #: each step's rate, what Opacus's accountant interface assumes.
        self.sampler: Any = None
        #: The :class:`AdaClipSettings` of the AdaClipDPOptimizer whose steps this accountant records (read by the
        #: step hook; the smallest unclipped_num_std seen), or None: its steps then release the count too.
        self.adaptive_clipping: AdaClipSettings | None = None

    @classmethod
    def mechanism(cls) -> str:
        """The name Opacus's registry and state dicts use: ``"dplens"``."""
        return MECHANISM

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one optimisation step (what Opacus's optimizer hook calls)."""
        sigma = _check_noise_multiplier(_scalar(noise_multiplier))
        rate = _check_sample_rate(_scalar(sample_rate))
        if self.history and self.history[-1][0] == sigma and self.history[-1][1] == rate:
            self.history[-1] = (sigma, rate, self.history[-1][2] + 1)
        else:
            self.history.append((sigma, rate, 1))

    def __len__(self) -> int:
        return sum(int(entry[2]) for entry in self.history)

    def __repr__(self) -> str:
        return f"OpacusAccountant(steps={len(self)}, entries={len(self.history)}, method={self._method.value})"

    def to_accountant(self) -> Any:
        """The history as a dplens :class:`~dplens.accountant.compose.Accountant` under the detected sampler (see
        :func:`from_opacus`)."""
        return _ledger(
            _check_history(self.history),
            tolerance=self._tolerance,
            sampler=self.sampler,
            adaclip=self.adaptive_clipping,
        )

    def get_epsilon_bracket(self, delta: float, *, eps_error: float | None = None, **kwargs: Any) -> Any:
        """ε at ``delta`` with its certified bracket: an :class:`~dplens.accountant.compose.EpsilonResult`.

        ``epsilon`` is an upper bound and ``epsilon_lower`` a lower bound on the true ε of the history. With
        ``eps_error`` (Opacus PRV's accuracy argument) the PLD bracket is refined until its width is ≤ eps_error.
        Other keyword arguments (Opacus forwards ``make_private``'s extra ones to every accountant) are ignored.
        """
        from dplens.accountant import conversions

        delta = conversions.check_delta(delta)
        if eps_error is not None and not (_real(eps_error) and math.isfinite(eps_error) and eps_error > 0):
            raise ValueError(f"eps_error must be a finite number > 0; got {eps_error!r}")
        history = _check_history(self.history)
        adaclip = self.adaptive_clipping
        key = (tuple(history), delta, eps_error, adaclip)
        if key in self._cache:
            return self._cache[key]
        sampler = self.sampler
        if sampler is None:  # Opacus's make_private_with_epsilon calibrating on a fresh accountant: its loader
            caller = _opacus_caller()
            if caller is not None and not caller["poisson_sampling"]:
                from dplens.integrations.loaders import sampler_of

                sampler = sampler_of(caller["data_loader"], poisson_sampling=False)
                key = (*key, sampler)
        ledger = _ledger(history, tolerance=self._tolerance, sampler=sampler, adaclip=adaclip)
        result = ledger.epsilon_result(delta, method=self._method)
        if (
            eps_error is not None
            and result.epsilon_lower is not None
            and math.isfinite(result.epsilon)
            and result.epsilon - result.epsilon_lower > eps_error
            and (sampler is None or sampler.sampling == "poisson")  # other samplers' lower ends are constructions
        ):
            tolerance = max(min(self._tolerance, 0.5 * eps_error / result.epsilon), 1e-9)
            ledger = _ledger(history, tolerance=tolerance, sampler=sampler, adaclip=adaclip)
            result = ledger.epsilon_result(delta, method=self._method)
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.clear()
        self._cache[key] = result
        return result

    def get_epsilon(self, delta: float, *, eps_error: float | None = None, **kwargs: Any) -> float:
        """An upper bound on ε spent so far at ``delta`` (see :meth:`get_epsilon_bracket`)."""
        return float(self.get_epsilon_bracket(delta, eps_error=eps_error, **kwargs).epsilon)

    def attach(self, data_loader: Any, *, poisson_sampling: bool | None = None, original: Any = None) -> Any:
        """Account the training as the sampler ``data_loader`` runs (detected: :func:`~dplens.integrations.loaders.
        sampler_of`; its warnings issued, a sampler no bound covers refused with a ValueError). Returns the detection.
        """
        from dplens.integrations import loaders

        detected = loaders.sampler_of(data_loader, poisson_sampling=poisson_sampling, original=original)
        loaders.warn(detected)
        self.sampler = detected
        self._cache.clear()
        return detected

    def get_optimizer_hook_fn(self, sample_rate: float) -> Callable[[Any], None]:
        """Opacus's own step hook (``IAccountant.get_optimizer_hook_fn``): one :meth:`step` per optimiser step.

        Opacus's ``PrivacyEngine.make_private`` calls this once the loader is prepared; the loader it kept and its
        ``poisson_sampling`` are read from that call (the accountant interface passes only q = 1/len(loader), which
        Opacus records whatever the loader does), so a training with ``poisson_sampling=False`` is accounted under
        the sampler it runs, never as Poisson sampling.
        """
        _opacus_accountants()  # the one-line ImportError without the extra
        caller = _opacus_caller()
        if caller is not None:
            self.attach(caller["data_loader"], poisson_sampling=caller["poisson_sampling"])

        def hook_fn(optim: Any) -> None:  # Opacus's IAccountant hook, reading an AdaClipDPOptimizer's settings too
            self._note_optimizer(optim)
            self.step(noise_multiplier=optim.noise_multiplier, sample_rate=sample_rate * optim.accumulated_iterations)

        return hook_fn

    def _note_optimizer(self, optim: Any) -> None:
        """Record an AdaClipDPOptimizer's settings (the smallest count noise seen: the pessimistic one)."""
        settings = adaclip_settings(optim)
        if settings is None:
            return
        known = self.adaptive_clipping
        if known is None or settings.unclipped_num_std < known.unclipped_num_std:
            self.adaptive_clipping = settings
            self._cache.clear()

    def state_dict(self, destination: Any = None) -> Any:
        """Opacus's format: ``{"history": [...], "mechanism": "dplens"}`` (an ``OrderedDict`` unless given one)."""
        if destination is None:
            from collections import OrderedDict

            destination = OrderedDict()
        destination["history"] = deepcopy(self.history)
        destination["mechanism"] = self.mechanism()
        if self.sampler is not None and self.sampler.sampling != "poisson":  # Poisson: Opacus's own format suffices
            destination["sampler"] = self.sampler.to_dict()
        if self.adaptive_clipping is not None:
            destination["adaptive_clipping"] = self.adaptive_clipping.to_dict()
        return destination

    def load_state_dict(self, state_dict: Any) -> None:
        """Load a state dict (validated first: a refusal changes nothing).

        Opacus's RDP, PRV and GDP accountants keep the same history, so their state dicts load too (the training
        then continues under dplens's accounting).
        """
        if not isinstance(state_dict, Mapping) or not state_dict:
            raise ValueError(f"state_dict must be a non-empty mapping; got {state_dict!r}")
        for key in ("history", "mechanism"):
            if key not in state_dict:
                raise ValueError(f"state_dict has no key {key!r}; got keys {sorted(state_dict)!r}")
        if state_dict["mechanism"] not in _COMPATIBLE_MECHANISMS:
            raise ValueError(
                f"state_dict mechanism {state_dict['mechanism']!r} is not one of {sorted(_COMPATIBLE_MECHANISMS)}"
            )
        history = _check_history(state_dict["history"], "state_dict['history']")
        sampler = _sampler_from_dict(state_dict.get("sampler"))
        adaclip = _adaclip_from_dict(state_dict.get("adaptive_clipping"))
        self.history, self.sampler, self.adaptive_clipping = history, sampler, adaclip
        self._cache.clear()


def _adaclip_from_dict(data: Any) -> AdaClipSettings | None:
    """The :class:`AdaClipSettings` of a state dict's ``adaptive_clipping`` entry (None: none)."""
    if data is None:
        return None
    names = set(AdaClipSettings.__slots__)
    if not isinstance(data, Mapping) or set(data) != names or not all(_real(data[n]) for n in names):
        raise ValueError(f"state_dict['adaptive_clipping'] must map {sorted(names)} to numbers; got {data!r}")
    if not data["unclipped_num_std"] > 0:
        raise ValueError(f"state_dict['adaptive_clipping'] unclipped_num_std must be > 0; got {data!r}")
    return AdaClipSettings(**{n: float(data[n]) for n in names})


def _sampler_from_dict(data: Any) -> Any:
    """A :class:`~dplens.integrations.loaders.LoaderSampler` from a state dict's ``sampler`` entry (None: none)."""
    if data is None:
        return None
    from dplens.accountant.dp_sgd import as_sampler
    from dplens.integrations.loaders import LoaderSampler

    if not isinstance(data, Mapping):
        raise ValueError(f"state_dict['sampler'] must be a mapping; got {data!r}")
    try:
        sampler = LoaderSampler(
            sampling=as_sampler(data["sampling"]).value,
            dataset_size=int(data["dataset_size"]),
            batch_size=int(data["batch_size"]),
            steps_per_epoch=int(data["steps_per_epoch"]),
            drop_last=bool(data.get("drop_last", False)),
            max_batch_size=data.get("max_batch_size"),
            found=str(data.get("found", "")),
            warnings=tuple(data.get("warnings", ())),
        )
    except (KeyError, TypeError) as err:
        raise ValueError(f"state_dict['sampler'] is not a sampler: {err}; got {data!r}") from None
    sampler.run(noise_multiplier=1.0, steps=1)  # validates the numbers
    return sampler


def _opacus_caller() -> dict[str, Any] | None:
    """The loader and ``poisson_sampling`` of the Opacus ``PrivacyEngine.make_private`` (or
    ``make_private_with_epsilon``, through ``get_noise_multiplier``) this call runs under; None for any other caller.
    Opacus hands its accountants only q = 1/len(loader), whatever the loader does, so the loader is read from the call
    that prepared it."""
    import sys

    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        module = frame.f_globals.get("__name__", "")
        if frame.f_code.co_name in ("make_private", "make_private_with_epsilon") and module.startswith("opacus"):
            names = frame.f_locals
            if "data_loader" in names and "poisson_sampling" in names:
                return {"data_loader": names["data_loader"], "poisson_sampling": bool(names["poisson_sampling"])}
            return None
        frame = frame.f_back
    return None


# ---- calibration ----------------------------------------------------------------------------------------------


def _steps_of(*, sample_rate: float, epochs: float | None, steps: int | None) -> int:
    if (epochs is None) == (steps is None):
        raise ValueError(f"give exactly one of epochs and steps; got epochs={epochs!r}, steps={steps!r}")
    if steps is not None:
        steps = _check_steps(steps)
        if steps < 1:
            raise ValueError(f"steps must be an integer >= 1; got {steps!r}")
        return steps
    if not (_real(epochs) and math.isfinite(epochs) and epochs > 0):
        raise ValueError(f"epochs must be a finite number > 0; got {epochs!r}")
    exact = epochs / sample_rate  # Opacus: int(epochs / sample_rate), which may round 20.9999… down to 20
    nearest = round(exact)
    return int(nearest) if abs(exact - nearest) <= 1e-9 * max(1.0, exact) else math.ceil(exact)


def calibrate_noise_multiplier(
    *,
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    epochs: float | None = None,
    steps: int | None = None,
    history: Any = (),
    method: Any = None,
) -> Any:
    """The smallest noise multiplier whose training meets (target ε, δ), by dplens's calibration; never above it.

    The training is ``steps`` (or ``epochs / sample_rate``, as Opacus's ``get_noise_multiplier`` counts them)
    Poisson-subsampled Gaussian steps, after ``history`` (the budget already spent: an Opacus accountant, state dict
    or history). The regula-falsi search of :func:`dplens.accountant.calibrate.calibrate` keeps a safe end, so the
    returned ε (recomputed at the answer) is ≤ ``target_epsilon``; Opacus's bisection stops within 0.01 of it.

    Returns:
        A :class:`~dplens.accountant.calibrate.CalibrationResult` (``value`` is σ).

    Example:
        >>> from dplens.integrations.opacus_accountant import calibrate_noise_multiplier
        >>> result = calibrate_noise_multiplier(target_epsilon=8.0, target_delta=1e-5, sample_rate=0.04, epochs=90,
        ...                                     method="rdp")
        >>> round(result.value, 3), result.epsilon <= 8.0  # Opacus's RDP bisection (its test): 1.416 too
        (1.416, True)
    """
    from dplens.accountant.calibrate import Direction, calibrate
    from dplens.accountant.compose import Method
    from dplens.accountant.routes import as_method

    rate = _check_sample_rate(sample_rate)
    if rate == 0:
        raise ValueError(f"sample_rate must be > 0 to calibrate; got {sample_rate!r}")
    count = _steps_of(sample_rate=rate, epochs=epochs, steps=steps)
    spent = _history_of(list(history) if isinstance(history, tuple) else history)
    method = Method.PLD if method is None else as_method(method)
    if method is Method.BEST:
        method = Method.PLD  # the tightest route for this mechanism

    def make(sigma: float) -> Any:
        return _ledger([*spent, (sigma, rate, count)])

    return calibrate(
        make,
        target_epsilon=target_epsilon,
        target_delta=target_delta,
        lower=0.05,
        upper=1000.0,
        method=method,
        direction=Direction.DECREASING,
        param="noise_multiplier",
        xtol=1e-6,
    )


def make_private_with_epsilon(
    privacy_engine: Any,
    *,
    module: Any,
    optimizer: Any,
    data_loader: Any,
    target_epsilon: float,
    target_delta: float,
    epochs: int,
    max_grad_norm: Any,
    method: Any = None,
    **make_private_options: Any,
) -> Any:
    """Opacus's ``PrivacyEngine.make_private_with_epsilon`` with σ from :func:`calibrate_noise_multiplier`.

    The steps are ``epochs × len(data_loader)`` at sample rate ``1 / len(data_loader)`` (what ``make_private``
    accounts), after the budget the engine's accountant has already spent, so the training's total ε is ≤ the
    target. Returns what ``privacy_engine.make_private`` returns; the calibration is ``optimizer.noise_multiplier``
    of the returned optimizer (and, with an :class:`OpacusAccountant`, ``privacy_engine.accountant.calibration``).
    Other keyword arguments go to ``make_private``.

    Example:
        >>> import torch
        >>> from opacus import PrivacyEngine
        >>> from dplens.integrations.opacus_accountant import make_private_with_epsilon
        >>> data = torch.utils.data.TensorDataset(torch.randn(64, 3), torch.randint(0, 2, (64,)))
        >>> model = torch.nn.Linear(3, 2)
        >>> from dplens.integrations.opacus_accountant import register
        >>> register()  # Opacus's registry now knows "dplens"
        >>> engine = PrivacyEngine(accountant="dplens")
        >>> model, optimizer, loader = make_private_with_epsilon(
        ...     engine, module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        ...     data_loader=torch.utils.data.DataLoader(data, batch_size=16), target_epsilon=2.0, target_delta=1e-5,
        ...     epochs=2, max_grad_norm=1.0)
        >>> engine.accountant.calibration.epsilon <= 2.0, round(optimizer.noise_multiplier, 2)
        (True, 1.88)
    """
    _opacus_accountants()
    batches = len(data_loader)
    if batches < 1:
        raise ValueError(f"data_loader must yield at least one batch; got len(data_loader)={batches!r}")
    if not (_real(epochs) and math.isfinite(epochs) and epochs > 0):
        raise ValueError(f"epochs must be a finite number > 0; got {epochs!r}")
    accountant = getattr(privacy_engine, "accountant", None)
    spent = _check_history(getattr(accountant, "history", []), "privacy_engine.accountant.history")
    poisson = make_private_options.get("poisson_sampling", True)
    if poisson:
        calibration = calibrate_noise_multiplier(
            target_epsilon=target_epsilon,
            target_delta=target_delta,
            sample_rate=1 / batches,
            steps=math.ceil(epochs * batches - 1e-9),
            history=spent,
            method=method,
        )
        sigma = calibration.value
    else:
        calibration = _sampler_calibration(data_loader, target_epsilon, target_delta, epochs, method, spent)
        sigma = calibration.noise_multiplier
    if isinstance(accountant, OpacusAccountant):
        accountant.calibration = calibration
    made = privacy_engine.make_private(
        module=module,
        optimizer=optimizer,
        data_loader=data_loader,
        noise_multiplier=sigma,
        max_grad_norm=max_grad_norm,
        **make_private_options,
    )
    if poisson and isinstance(accountant, OpacusAccountant):  # the user's loader is known: warn what Opacus dropped
        accountant.attach(made[-1], poisson_sampling=True, original=data_loader)
    return made


def _sampler_calibration(data_loader, target_epsilon, target_delta, epochs, method, spent):
    """The calibration of ``make_private_with_epsilon`` for ``poisson_sampling=False``: σ under the sampler the user's
    loader runs (:func:`dplens.accountant.dp_sgd.dp_sgd_noise_multiplier`), not Poisson sampling."""
    from dplens.accountant.dp_sgd import dp_sgd_noise_multiplier
    from dplens.integrations import loaders

    detected = loaders.sampler_of(data_loader, poisson_sampling=False)
    if any(steps > 0 and rate > 0 for _, rate, steps in spent):
        raise ValueError(
            "privacy_engine.accountant has already spent budget: calibrating on top of it is supported for Poisson "
            f"sampling only (the loader runs {detected.sampling} sampling)"
        )
    return dp_sgd_noise_multiplier(
        dataset_size=detected.dataset_size,
        batch_size=detected.batch_size,
        epochs=epochs,
        target_epsilon=target_epsilon,
        delta=target_delta,
        sampling=detected.sampling,
        drop_last=detected.drop_last,
        method="pld" if method is None else method,
    )
