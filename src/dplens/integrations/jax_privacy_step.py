"""The jax_privacy subject of ``check_dp_sgd``: crafted per-sample gradients through jax_privacy's own building blocks.

jax_privacy 2.0 leaves the composition of a DP-SGD step to the user: ``jax_privacy.clipped_grad`` (per-example
clipping and the sum, with its ``l2_clip_norm``, ``nan_safe``, ``rescale_to_unit_norm``, ``normalize_by`` and
``microbatch_size``), a privatizer of ``jax_privacy.noise_addition`` (an ``optax.GradientTransformation`` such as
``gaussian_privatizer(stddev=σ·C, prng_key=key)``) that adds the noise, then the user's normalisation. This subject
runs those blocks as the user configures them on a gradient-injection loss — the linear loss ⟨params, g_i⟩ per
example at params = 0, so each example's gradient is exactly the crafted g_i — and returns the normalised noisy sum:
the privatised gradient estimate, before any optimizer post-processing.

- **Padding.** A batch is padded to a multiple of ``pad_multiple`` rows with jax_privacy's
  ``batch_selection.pad_to_multiple_of`` and the padding rows are passed as ``is_padding_example`` (clipped_grad
  zeroes them), as a jax_privacy training does to compile its step for a few shapes only.
- **Gradient accumulation.** jax_privacy's own is ``clipped_grad(microbatch_size=k)``: the clipped sum accumulated
  over microbatches of k examples inside one compiled call, the noise added once after it. A logical batch too large
  for one call is split with ``batch_selection.split_and_pad_global_batch`` into physical batches of
  ``max_physical_batch_size`` (one ``clipped_grad`` call each), and the user's ``accumulate(clipped_sums, privatize)``
  decides how the sums meet the noise (default: summed, then noised once). The privatizer's calls are counted.
- **Noise state.** One privatizer per training, built by the user's ``privatizer(prng_key)`` with a key from the
  training's generator, its state carried from step to step (the privatizer's own key splitting makes the noise of
  each step fresh); a new training is a new generator.
- **Accounting.** What the user's jax_privacy accountant is told is read off its own code: the
  ``DpsgdTrainingAccountant`` (or the given accountant's class) is run on the user's ``DpParams`` with an accountant
  config that records the events it composes (``analysis.py``, ``DpsgdTrainingAccountant._compute_epsilon``: a
  ``PoissonSampledDpEvent`` at q = batch_size / (num_samples // cycle_length) per update). Each noised update is
  recorded at that rate (:class:`~dplens.integrations.opacus_step.Accounting`), so the ``gradient_accumulation`` check
  sees a rate at the physical batch size (jax_privacy issue 234 / PR 287).

JAX computes in float32 unless x64 is enabled; the update is returned as float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dplens.auditing.training.framework_free import StepSubject
from dplens.integrations.opacus_step import Accounting

__all__ = ["JaxPrivacySubject", "batch_selection_sampler", "jax_privacy_step", "told_rate"]

#: The one-line message when jax_privacy is missing.
MISSING_EXTRA = 'the jax_privacy subject needs jax and jax-privacy: pip install "dplens[jax]"'

#: clipped_grad keywords fixed by the gradient-injection loss (the user's are the clipping options).
_RESERVED = ("argnums", "has_aux", "batch_argnums", "keep_batch_dim", "return_values", "return_grad_norms")


def _require() -> Any:
    try:
        import jax_privacy
    except ImportError:
        raise ImportError(MISSING_EXTRA) from None
    return jax_privacy


def _injection_loss(params: Any, g: Any) -> Any:
    """⟨params, g⟩: its gradient in params is the example's crafted gradient g (a (1, d) slice with the batch axis)."""
    import jax.numpy as jnp

    return jnp.sum(params * g)


class _Recorder:
    """A dp_accounting-like accountant that keeps the events composed into it (its ε is never needed)."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, int]] = []

    def compose(self, event: Any, count: int = 1) -> _Recorder:
        self.events.append((event, int(count)))
        return self

    def get_epsilon(self, target_delta: float) -> float:
        return 0.0


def told_rate(dp_params: Any, accountant: Any = None) -> float:
    """The sampling rate per update that a jax_privacy training accountant composes for ``dp_params``: its own
    ``compute_epsilon`` run with a recording accountant config (the first event's ``sampling_probability``)."""
    jax_privacy = _require()
    accounting = jax_privacy.accounting
    if not isinstance(dp_params, accounting.DpParams):
        raise ValueError(f"jax_privacy_step: dp_params must be a jax_privacy.accounting.DpParams; got {dp_params!r}")
    kind = accounting.DpsgdTrainingAccountant if accountant is None else type(accountant)
    if not issubclass(kind, accounting.DpTrainingAccountant):
        raise ValueError(
            f"jax_privacy_step: accountant must be a jax_privacy.accounting.DpTrainingAccountant; got {accountant!r}"
        )
    recorder = _Recorder()

    class RecordingConfig(accounting.DpAccountantConfig):
        def create_accountant(self) -> Any:
            return recorder

    try:
        kind(dp_accountant_config=RecordingConfig()).compute_epsilon(1, dp_params)
    except ValueError as err:
        raise ValueError(f"jax_privacy_step: the accountant refuses dp_params: {err}") from None
    rates = [getattr(event, "sampling_probability", None) for event, _ in recorder.events]
    if not rates or rates[0] is None:
        raise ValueError(
            f"jax_privacy_step: {kind.__name__} composed no sampled event for dp_params ({recorder.events!r})"
        )
    return float(rates[0])


class _Compiled:
    """The compiled blocks for one gradient width d: clipped sum, privatizer update, normalisation."""

    def __init__(self, owner: _JaxPrivacyStep, width: int) -> None:
        import jax
        import jax.numpy as jnp

        self.params = jnp.zeros(width, dtype=jnp.float32)
        if owner.template is None:  # once per subject, on a small vector (its eager operations compile once)
            owner.template = _state_carried(owner, jnp.zeros(2, dtype=jnp.float32))
        self.clip = owner.clip
        self.noise = jax.jit(owner.template.update)
        self.normalise = None if owner.divide is not None else jax.jit(owner.normalise_fn)


def _state_carried(owner: _JaxPrivacyStep, params: Any) -> Any:
    """A privatizer whose update is compiled once for every training: refused unless its noise is carried in its
    state (two privatizers of different keys must update one state alike, as ``gaussian_privatizer``'s do)."""
    import jax

    first, second = (owner.new_privatizer(owner.key(np.random.default_rng(seed))) for seed in (0, 1))
    for made in (first, second):
        if not (callable(getattr(made, "init", None)) and callable(getattr(made, "update", None))):
            raise ValueError(
                f"jax_privacy_step: privatizer(prng_key) must return an optax.GradientTransformation; got {made!r}"
            )
    state = first.init(params)
    a, b = (jax.tree.leaves(made.update(params, state)[0]) for made in (first, second))
    if not all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b, strict=True)):
        raise ValueError(
            "jax_privacy_step: the privatizer's noise is not carried in its state (privatizers of two keys update "
            "one state differently, as a dense matrix-factorisation privatizer does); give a privatizer whose "
            "state holds its key, such as noise_addition.gaussian_privatizer"
        )
    return first


class _JaxPrivacyStep:
    """``step(per_sample_gradients, rng) -> update`` running jax_privacy's clipped_grad and privatizer."""

    def __init__(
        self,
        privatizer: Callable[[Any], Any],
        clipped_grad_options: Mapping[str, Any],
        normalise: Any,
        dp_params: Any,
        accountant: Any,
        physical: int | None,
        accumulate: Callable[..., Any] | None,
        pad_multiple: int,
    ) -> None:
        jax_privacy = _require()
        if not callable(privatizer):
            raise ValueError(
                f"jax_privacy_step: privatizer must be callable (prng_key -> privatizer); got {privatizer!r}"
            )
        options = _clipping_options(clipped_grad_options)
        for name, value in (("max_physical_batch_size", physical), ("pad_multiple", pad_multiple)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"jax_privacy_step: {name} must be an integer >= 1; got {value!r}")
        if accumulate is not None and not callable(accumulate):
            raise ValueError(f"jax_privacy_step: accumulate must be callable; got {accumulate!r}")
        self.divide, self.normalise_fn = _normaliser(normalise)
        self.microbatch = options.get("microbatch_size")
        self.physical, self.accumulate, self.options = physical, accumulate, options
        multiple = pad_multiple if physical is not None else math.lcm(pad_multiple, self.microbatch or 1)
        self.pad_multiple = multiple
        self.rate = told_rate(dp_params, accountant)
        self.new_privatizer = privatizer
        self.template: Any = None  # the privatizer whose update is compiled (its noise is carried in the state)
        self.clip = _compiled_clip(jax_privacy, options)
        self._by_width: dict[int, _Compiled] = {}
        self._rng: np.random.Generator | None = None
        self._state: Any = None
        self.last: Accounting | None = None
        shown = ", ".join(f"{k}={v!r}" for k, v in options.items())
        self.__qualname__ = f"jax_privacy_step({getattr(privatizer, '__qualname__', 'privatizer')}; {shown})"

    def __getstate__(self) -> dict[str, Any]:  # a worker compiles its own functions
        return {**self.__dict__, "clip": None, "template": None, "_by_width": {}, "_rng": None, "_state": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.clip = _compiled_clip(_require(), self.options)

    @staticmethod
    def key(rng: np.random.Generator) -> Any:
        """A fresh jax PRNG key with 64 bits from ``rng`` (32 bits would repeat across 10⁴ trainings by chance)."""
        import jax

        return jax.random.wrap_key_data(rng.integers(0, 2**32, size=2, dtype=np.uint32))

    def _compiled(self, width: int) -> _Compiled:
        if width not in self._by_width:
            self._by_width[width] = _Compiled(self, width)
        return self._by_width[width]

    def _blocks(self, b: int) -> list[np.ndarray]:
        """The row indices of each call of clipped_grad (−1: padding), by jax_privacy's own padding functions."""
        from jax_privacy import batch_selection

        rows = np.arange(b)
        if self.physical is not None:
            return batch_selection.split_and_pad_global_batch(rows, self.physical, self.microbatch)
        if b == 0:  # an empty Poisson batch: one all-padding block
            return [np.full(self.pad_multiple, -1)]
        return [batch_selection.pad_to_multiple_of(rows, self.pad_multiple)]

    def __call__(self, grads: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        b, width = grads.shape
        fns = self._compiled(width)
        if rng is not self._rng:  # a new training: a new privatizer from the training's generator
            self._rng = rng
            self._state = self.new_privatizer(self.key(rng)).init(fns.params)
        data = np.concatenate([grads.astype(np.float32), np.zeros((1, width), np.float32)])  # index -1: a zero row
        sums = [fns.clip(fns.params, data[block], block < 0) for block in self._blocks(b)]
        noised: list[int] = []

        def privatize(total: Any) -> Any:
            noisy, self._state = fns.noise(total, self._state)
            noised.append(1)
            return noisy

        noisy = privatize(_tree_sum(sums)) if self.accumulate is None else self.accumulate(sums, privatize)
        if self.divide is not None:
            update = np.asarray(noisy, dtype=np.float64) / self.divide
        else:
            update = np.asarray(fns.normalise(noisy, b), dtype=np.float64)
        self.last = Accounting(len(noised), self._physical_count(b, len(sums)), (self.rate,) * len(noised))
        return update

    def _physical_count(self, b: int, calls: int) -> int:
        """Physical batches of the logical batch: clipped_grad calls, or jax_privacy's real microbatches within one."""
        if self.physical is not None or self.microbatch is None:
            return calls
        return max(1, math.ceil(b / self.microbatch))


#: jitted clipped sums by their clipped_grad keywords: subjects of one clipping configuration share its compilations
_CLIPS: dict[tuple, Any] = {}


def _compiled_clip(jax_privacy: Any, options: dict[str, Any]) -> Any:
    """``clip(params, grads, is_padding) -> clipped sum``: jax_privacy's clipped_grad of the injection loss, jitted."""
    import jax

    try:
        key = tuple(sorted(options.items()))
        hash(key)
    except TypeError:  # an unhashable option value: compiled for this subject alone
        key = None
    if key is None or key not in _CLIPS:
        try:
            clipped = jax_privacy.clipped_grad(_injection_loss, **options)
        except (TypeError, ValueError) as err:  # an unknown keyword, or a value jax_privacy refuses: its words
            raise ValueError(
                f"jax_privacy_step: clipped_grad refuses clipped_grad_options={options!r}: {err}"
            ) from None
        compiled = jax.jit(lambda params, grads, pad: clipped(params, grads, is_padding_example=pad))
        if key is None:
            return compiled
        _CLIPS[key] = compiled
    return _CLIPS[key]


def _tree_sum(parts: list[Any]) -> Any:
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _clipping_options(options: Any) -> dict[str, Any]:
    if not isinstance(options, Mapping) or "l2_clip_norm" not in options:
        raise ValueError(
            "jax_privacy_step: clipped_grad_options must be a mapping of jax_privacy.clipped_grad keywords with "
            f"l2_clip_norm; got {options!r}"
        )
    reserved = sorted(set(options) & set(_RESERVED))
    if reserved:
        raise ValueError(
            f"jax_privacy_step: clipped_grad_options may not set {reserved}: the gradient-injection loss fixes them"
        )
    micro = options.get("microbatch_size")
    if micro is not None and (isinstance(micro, bool) or not isinstance(micro, int) or micro < 1):
        raise ValueError(f"jax_privacy_step: microbatch_size must be an integer >= 1; got {micro!r}")
    return dict(options)


def _normaliser(normalise: Any) -> tuple[float | None, Callable[..., Any] | None]:
    if callable(normalise):
        return None, normalise
    if isinstance(normalise, bool) or not isinstance(normalise, int | float) or not normalise > 0:
        raise ValueError(
            "jax_privacy_step: normalise must be a positive number (the noisy sum is divided by it: the expected "
            f"batch size, or 1) or normalise(noisy_sum, batch_size) -> update; got {normalise!r}"
        )
    return float(normalise), None


class JaxPrivacySubject(StepSubject):
    """The jax_privacy step behind the harness's interface, with what its accountant was told per call."""

    kind = "jax_privacy"

    def __init__(self, step: _JaxPrivacyStep) -> None:
        super().__init__(step)
        self.physical_batch_size = step.physical if step.physical is not None else step.microbatch

    def accounting(self) -> Accounting | None:
        return self.step.last


def jax_privacy_step(
    privatizer: Callable[[Any], Any],
    *,
    clipped_grad_options: Mapping[str, Any],
    normalise: float | Callable[..., Any],
    dp_params: Any,
    accountant: Any = None,
    max_physical_batch_size: int | None = None,
    accumulate: Callable[..., Any] | None = None,
    pad_multiple: int = 32,
) -> JaxPrivacySubject:
    """A jax_privacy DP-SGD step for :func:`dplens.check_dp_sgd`: jax_privacy's ``clipped_grad`` and privatizer on
    the crafted per-sample gradients (Abadi et al. 2016, Algorithm 1, as jax_privacy 2.0's blocks compose it).

    ``privatizer(prng_key)`` builds the privatizer of one training (an ``optax.GradientTransformation`` of
    ``jax_privacy.noise_addition``; its noise must be carried in its state, as ``gaussian_privatizer``'s is).
    ``clipped_grad_options``: the keywords of ``jax_privacy.clipped_grad`` (``l2_clip_norm``; ``nan_safe``,
    ``rescale_to_unit_norm``, ``normalize_by``, ``microbatch_size``, ``dtype``, ``pre_clipping_transform``).
    ``normalise``: the noisy sum is divided by this number (the expected batch size B, or 1), or
    ``normalise(noisy_sum, batch_size) -> update`` (jitted; ``batch_size`` the real examples of the logical batch).
    ``dp_params`` (``jax_privacy.accounting.DpParams``) and ``accountant`` (default ``DpsgdTrainingAccountant``): what
    the training's accountant is told. ``max_physical_batch_size``: split each logical batch into physical batches
    of this size, one ``clipped_grad`` call each; ``accumulate(clipped_sums, privatize) -> noisy_sum`` composes them
    with the noise (default: ``privatize(sum(clipped_sums))``). ``pad_multiple``: batches padded to a multiple of it.

    Example:
        >>> import jax_privacy  # doctest: +SKIP
        >>> from jax_privacy import accounting, noise_addition  # doctest: +SKIP
        >>> step = jax_privacy_step(  # doctest: +SKIP
        ...     lambda key: noise_addition.gaussian_privatizer(stddev=1.0, prng_key=key),
        ...     clipped_grad_options={"l2_clip_norm": 1.0}, normalise=50,
        ...     dp_params=accounting.DpParams(noise_multipliers=1.0, num_samples=5000, batch_size=50, delta=1e-5))
    """
    return JaxPrivacySubject(
        _JaxPrivacyStep(
            privatizer,
            clipped_grad_options,
            normalise,
            dp_params,
            accountant,
            max_physical_batch_size,
            accumulate,
            pad_multiple,
        )
    )


def batch_selection_sampler(strategy: Any) -> Callable[[int, np.random.Generator], Any]:
    """A ``sampler(dataset_size, rng)`` for :func:`dplens.check_dp_sgd` from a jax_privacy ``BatchSelectionStrategy``
    (``CyclicPoissonSampling``, ``BallsInBinsSampling``, ``FixedBatchSampling``, ``BMinSepSampling``, ...): its
    ``batch_iterator(dataset_size, rng=rng)`` with the padding entries (−1) removed. The strategy's ``iterations``
    must cover the T steps checked (an iterable that ends early is bad input).

    Example:
        >>> from jax_privacy import batch_selection  # doctest: +SKIP
        >>> sampler = batch_selection_sampler(  # doctest: +SKIP
        ...     batch_selection.CyclicPoissonSampling(sampling_prob=0.01, iterations=100))
    """
    jax_privacy = _require()
    if not isinstance(strategy, jax_privacy.batch_selection.BatchSelectionStrategy):
        raise ValueError(
            f"batch_selection_sampler: strategy must be a jax_privacy BatchSelectionStrategy; got {strategy!r}"
        )

    def sampler(dataset_size: int, rng: np.random.Generator):
        for batch in strategy.batch_iterator(dataset_size, rng=rng):
            batch = np.asarray(batch)
            yield batch[batch >= 0]

    sampler.__qualname__ = f"batch_selection_sampler({strategy!r})"
    return sampler
