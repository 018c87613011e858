"""Read an opake-dpftrl 0.16 accounting process into dplens's matrix-factorisation accounting (nothing of opake or
torch is imported here: the objects are read by their class names and fields).

opake's DP-FTRL accounting (``opake.dpftrl.accounting``) describes a training as an amplifier around
``mf_gaussian(noise_multiplier, strategy)`` whose C is *not* normalised: the release is C·g + σz, so one participation
moves it by at most ‖c‖, the norm of C's first column (opake's cyclic-Poisson and b-min-sep accountants divide σ by
``strategy.sensitivity(n_steps=T, min_sep=T, max_participations=1)``; its balls-in-bins accountant uses the Gram of the
raw C with the raw σ: the same thing). dplens's convention is jax_privacy's, C scaled to largest column norm 1 and σ
relative to it, so the reading divides the coefficients by ‖c‖ **and σ by ‖c‖** (the coefficients read with the
amplifier's own schema: opake retunes BLT for it). The amplifiers map to dplens's samplers:

- ``poisson(inner, sample_rate=q, n_steps=T)`` (``CyclicPoisson``, optionally truncated): ``cyclic-poisson`` over b
  = the strategy's bands (identity: b = 1) at per-group rate q, T steps — the certified bracket
  (:func:`~dplens.accountant.mf_accounting.bandmf_epsilon`);
- ``b_min_sep(inner, n_steps=T, p0=B/N)`` (``BMinSep``): ``b-min-sep`` with b = the strategy's bands and B/N = p0
  (dplens's p = 1/(N/B − b + 1) is opake's conversion) — the valid unamplified bound, and with ``monte_carlo`` the
  verified estimate;
- ``balls_in_bins(inner, num_bins=t, n_steps=T)`` (``BallsInBins``, opake's fixed partition): ``fixed-bins`` in
  cycles of t steps — the Rényi bound where it applies;
- a bare ``mf_gaussian(σ, s, n_steps=T, min_sep=b, max_participations=k)``: ``min-sep`` (every pattern of at most k
  participations b apart), unamplified.

Strategies read: ``BandMfStrategy``, ``BltStrategy``, ``BsrStrategy`` and ``IdentityStrategy`` (Toeplitz, from
``strategy.coefficients(n_steps=T, …)``), ``BisrStrategy`` and ``LambdaCgdStrategy`` only with ``normalized=False``
(normalised columns make C non-Toeplitz: refused in one line, as is anything else). The numbers are dplens's own,
labelled as for every matrix-factorisation run (``bound``, ``epsilon_monte_carlo``); opake says of its Monte Carlo
accountants not to rely on them for compliance.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

__all__ = ["opake_epsilon"]

_TOEPLITZ = ("BandMfStrategy", "BltStrategy", "BsrStrategy", "IdentityStrategy")
_NORMALISABLE = ("BisrStrategy", "LambdaCgdStrategy")


def _field(value: Any, name: str, what: str) -> Any:
    try:
        return getattr(value, name)
    except AttributeError:
        kind = type(value).__name__
        raise ValueError(f"{what} must be an opake-dpftrl 0.16 object with {name!r}; got {kind}") from None


def _bands(strategy: Any) -> int:
    """b of an opake strategy: its ``bands`` (BandMF), 1 for the identity."""
    return 1 if type(strategy).__name__ == "IdentityStrategy" else int(_field(strategy, "bands", "the strategy"))


def _strategy(inner: Any, steps: int, min_sep: int, max_participations: int | None):
    """(dplens Strategy with largest column norm 1, its coefficients as opake gives them, σ relative to it, the
    mechanism's name) of an opake ``MfGaussian``."""
    from dplens.accountant import matrix_factorization as mf

    if type(inner).__name__ != "MfGaussian":
        raise ValueError(f"process.inner must be opake's MfGaussian (mf_gaussian(...)); got {type(inner).__name__}")
    sigma = float(_field(inner, "noise_multiplier", "process.inner"))
    strategy = _field(inner, "strategy", "process.inner")
    kind = type(strategy).__name__
    if kind in _NORMALISABLE and getattr(strategy, "normalized", True):
        raise ValueError(
            f"process.inner.strategy is opake's {kind} with normalized=True: its normalised columns make C "
            "non-Toeplitz, which dplens does not read from opake (pass the matrix as a --strategy file)"
        )
    if kind not in _TOEPLITZ + _NORMALISABLE:
        raise ValueError(f"process.inner.strategy must be one of {list(_TOEPLITZ + _NORMALISABLE)}; got {kind}")
    if kind == "IdentityStrategy":
        coefficients = [1.0]
    else:
        coefficients = strategy.coefficients(n_steps=steps, min_sep=min_sep, max_participations=max_participations)
        coefficients = [float(c) for c in coefficients.tolist()]
    name = "bandmf" if kind in ("BandMfStrategy", "IdentityStrategy") else "matrix"
    built = mf.toeplitz_strategy(coefficients, steps, name=f"opake {kind}", normalize=True)
    sigma /= math.sqrt(math.fsum(c * c for c in coefficients[:steps]))  # σ relative to C/‖c‖ (module docstring)
    return built, coefficients, sigma, name


def _batch_of(p0: float) -> tuple[int, int]:
    """(N, B) with B/N = p0 exactly (as opake's float): its ratio of integers up to 10⁷, else ``ValueError``."""
    ratio = Fraction(p0).limit_denominator(10**7)
    if float(ratio) != p0 or ratio <= 0:
        raise ValueError(f"process.p0={p0!r} is not B/N for integers N <= 1e7: give dataset_size and batch_size")
    scale = max(1, math.ceil(1000 / ratio.numerator))  # B of a thousand or more, N/B unchanged
    return ratio.denominator * scale, ratio.numerator * scale


def opake_epsilon(process: Any, *, delta: float, monte_carlo: int | None = None, seed: int | None = None):
    """ε at ``delta`` of the training an opake-dpftrl accounting ``process`` describes, as dplens accounts it
    (:class:`~dplens.accountant.mf_accounting.MfPrivacy`; the module docstring gives the mapping). ``monte_carlo``:
    samples per direction of the verified estimate beside the bound (b-min-sep and balls-in-bins)."""
    from dplens.accountant.mf_accounting import bandmf_epsilon, fixed_bins_epsilon, mf_epsilon

    kind = type(process).__name__
    steps = _field(process, "n_steps", "process")
    if steps is None:
        raise ValueError(f"process ({kind}) has no n_steps: an mf_gaussian recipe needs its amplifier's or its own")
    steps = int(steps)
    if kind == "CyclicPoisson":
        if monte_carlo is not None:
            raise ValueError("monte_carlo does not apply to opake's poisson(...): its bound is certified")
        inner = _field(process, "inner", "process")
        bands = _bands(_field(inner, "strategy", "process.inner"))
        _, coefficients, sigma, _ = _strategy(inner, steps, 1, None)
        if any(coefficients[bands:]):
            raise ValueError(f"the strategy has nonzero coefficients beyond its {bands} bands: not BandMF")
        return bandmf_epsilon(
            iterations=steps,
            sampling_prob=float(process.sample_rate),
            noise_multiplier=sigma,
            delta=delta,
            strategy=(coefficients + [0.0] * bands)[:bands],
            truncated_batch_size=getattr(process, "truncated_batch_size", None),
            num_examples=getattr(process, "dataset_size", None),
        )
    if kind == "BMinSep":
        inner = _field(process, "inner", "process")
        bands = _bands(_field(inner, "strategy", "process.inner"))
        strategy, _, sigma, name = _strategy(inner, steps, bands, -(-steps // bands))
        n, b = _batch_of(float(process.p0))
        return mf_epsilon(
            mechanism=name,
            sampling="b-min-sep",
            min_separation=bands,
            strategy=strategy,
            dataset_size=n,
            batch_size=b,
            epochs=steps * b / n,
            noise_multiplier=sigma,
            delta=delta,
            monte_carlo=monte_carlo,
            seed=seed,
        )
    if kind == "BallsInBins":
        period = int(process.num_bins)
        strategy, _, sigma, name = _strategy(_field(process, "inner", "process"), steps, period, steps // period)
        return fixed_bins_epsilon(
            strategy,
            period=period,
            noise_multiplier=sigma,
            delta=delta,
            mechanism=name,
            monte_carlo=monte_carlo,
            seed=seed,
        )
    if kind == "MfGaussian":
        if monte_carlo is not None:
            raise ValueError("monte_carlo does not apply to a bare mf_gaussian(...): it is accounted unamplified")
        min_sep = int(_field(process, "min_sep", "process"))
        most = getattr(process, "max_participations", None)
        strategy, _, sigma, name = _strategy(process, steps, min_sep, most)
        return mf_epsilon(
            mechanism=name,
            sampling="min-sep",
            min_separation=min_sep,
            max_participations=None if most is None else int(most),
            strategy=strategy,
            dataset_size=1,
            batch_size=1,
            epochs=steps,
            noise_multiplier=sigma,
            delta=delta,
        )
    raise ValueError(
        f"process must be opake's poisson(...), b_min_sep(...), balls_in_bins(...) or mf_gaussian(...); got {kind}"
    )
