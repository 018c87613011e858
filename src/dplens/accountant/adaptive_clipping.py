"""Adaptive clipping (Andrew, Thakkar, McMahan, Ramaswamy, NeurIPS 2021, arXiv 1905.03871) as one event.

Each step releases two Gaussian sums over the same Poisson-sampled batch (q = B/N): the clipped gradients (ℓ2
sensitivity C, noise σ_eff·C) and the count of records whose gradient norm is below the current clipping norm, from
which the norm's private quantile estimate moves C (Algorithm 1 of the paper: b̃ = (Σᵢ bᵢ + N(0, σ_b²))/m for an
expected batch size m). Opacus's ``AdaClipDPOptimizer`` centres the indicators (bᵢ − ½), so one record moves the sum
by at most ½ under add/remove: the count query is a Gaussian mechanism of noise multiplier 2σ_b. Both queries see the
record together, so one step is the Poisson-subsampled Gaussian of the combined multiplier
(σ_eff⁻² + (2σ_b)⁻²)^(−1/2) (a Gaussian mechanism on the concatenated release; dp-accounting's
``_effective_gaussian_noise_multiplier``, arXiv 1812.06210 §3). Andrew et al. §3 (and Opacus 1.6, issues 757/779,
PR 807) pick σ_eff = (σ⁻² − (2σ_b)⁻²)^(−1/2) so that the combined multiplier is the σ the user asked for: the run is
then accounted exactly as plain DP-SGD at σ — **provided** 2σ_b > σ (else no σ_eff exists: the count alone would
spend more than the whole budget).

Opacus 1.6 (``opacus/optimizers/adaclipoptimizer.py``, read at 1.6.0) does not match that analysis on two counts:
``clip_and_accumulate`` adds the *raw* count Σᵢ bᵢ (``unclipped_num``, sensitivity 1, not ½) and noises it with std
σ_u, while ``add_noise`` sets σ_eff = (σ⁻² − (2σ_u)⁻²)^(−1/2) and the accountant is charged σ; and
``update_max_grad_norm`` divides the noisy count by ``sample_size``, the *realised* batch size. For the first, this
event's ``count_sensitivity=1.0`` gives the run Opacus actually performs: the two queries amount to
(σ_eff⁻² + σ_u⁻²)^(−1/2) < σ, so the ε charged at σ is too small (see the privacy-unit guide for numbers). The second
is not covered by any Gaussian accounting.

The division by m is a post-processing only because m is public (the expected batch size); dividing by the realised
batch size would release it, which Poisson add/remove does not allow for free — this event accounts the expected-size
estimator of the paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dplens.accountant import events as ev

__all__ = ["AdaptiveClipping", "effective_noise_multiplier"]


def effective_noise_multiplier(noise_multiplier: float, count_noise: float) -> float:
    """σ_eff = (σ⁻² − (2σ_b)⁻²)^(−1/2): the gradient noise that leaves the total at σ (Andrew et al. 2021, §3).

    Example:
        >>> round(effective_noise_multiplier(1.0, 10.0), 6)  # σ_b = 10 (the paper's m/20 for m = 200) costs little
        1.001252
    """
    for name, value in (("noise_multiplier", noise_multiplier), ("count_noise", count_noise)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not (0 < value < math.inf):
            raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    if 2.0 * count_noise <= noise_multiplier:
        raise ValueError(
            f"count_noise must exceed noise_multiplier / 2 = {noise_multiplier / 2:g} (the count query alone would "
            f"spend the whole budget); got count_noise={count_noise!r}"
        )
    return (noise_multiplier**-2 - (2.0 * count_noise) ** -2) ** -0.5


@ev.register_event
@dataclass(frozen=True, slots=True, kw_only=True)
class AdaptiveClipping(ev.Event):
    """``steps`` Poisson-sampled steps (rate q) releasing the clipped gradient sum at noise ``gradient_noise``·C and
    the centred clipped count at noise ``count_noise`` (σ_b, in counts), under add/remove.

    Build it from the total σ with :meth:`from_total` (σ_eff as Andrew et al.), or give the gradient noise directly.

    Example (the composed Gaussians are DP-SGD at σ itself):
        >>> from dplens.accountant.compose import Accountant
        >>> ada = AdaptiveClipping.from_total(noise_multiplier=1.1, count_noise=12.8, sampling_rate=0.004, steps=1000)
        >>> plain = ev.PoissonSampled(sampling_rate=0.004, event=ev.Gaussian(noise_multiplier=1.1))
        >>> a = Accountant().compose(ada).epsilon(1e-5, method="rdp")
        >>> b = Accountant().compose(plain, count=1000).epsilon(1e-5, method="rdp")
        >>> abs(a - b) < 1e-9 * b
        True
    """

    gradient_noise: float
    count_noise: float
    sampling_rate: float
    steps: int
    neighboring: ev.NeighboringRelation = ev.ADD_REMOVE
    count_sensitivity: float = 0.5  # ½: the centred count of Andrew et al.; 1: a raw count Σ bᵢ (Opacus 1.6)
    # The quantile estimator's settings (Andrew et al. 2021, Algorithm 1: C ← C·exp(−η_C·(b̃ − γ)), clamped to
    # [min, max]): a post-processing of the noisy count, so they do not enter the ε; kept so the ledger names the run
    # (dplens.integrations.opacus_accountant reads them from Opacus's AdaClipDPOptimizer).
    target_unclipped_quantile: float | None = None
    clipbound_learning_rate: float | None = None
    max_clipbound: float | None = None
    min_clipbound: float | None = None

    def __post_init__(self) -> None:
        for name in ("gradient_noise", "count_noise"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not (0 < value < math.inf):
                raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
        q = self.sampling_rate
        if isinstance(q, bool) or not isinstance(q, int | float) or not (0 < q <= 1):
            raise ValueError(f"sampling_rate must be in (0, 1]; got {q!r}")
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps must be an integer >= 1; got {self.steps!r}")
        if self.count_sensitivity not in (0.5, 1.0):
            raise ValueError(
                f"count_sensitivity must be 0.5 (centred count) or 1.0 (raw count); got {self.count_sensitivity!r}"
            )
        if self.neighboring is not ev.ADD_REMOVE:
            raise ValueError(f"adaptive clipping is accounted under add/remove; got neighboring={self.neighboring!r}")
        self._check_estimator()

    def _check_estimator(self) -> None:
        for name in ("target_unclipped_quantile", "clipbound_learning_rate", "max_clipbound", "min_clipbound"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0
            ):
                raise ValueError(f"{name} must be a finite number >= 0 or None; got {value!r}")
        quantile = self.target_unclipped_quantile
        if quantile is not None and quantile > 1:
            raise ValueError(f"target_unclipped_quantile must be in [0, 1]; got {quantile!r}")
        low, high = self.min_clipbound, self.max_clipbound
        if low is not None and high is not None and low >= high:
            raise ValueError(f"min_clipbound must be < max_clipbound={high!r}; got {low!r}")

    @classmethod
    def from_total(
        cls, *, noise_multiplier: float, count_noise: float, sampling_rate: float, steps: int
    ) -> AdaptiveClipping:
        """The run whose two queries together are DP-SGD at ``noise_multiplier`` (σ_eff from Andrew et al. §3)."""
        return cls(
            gradient_noise=effective_noise_multiplier(noise_multiplier, count_noise),
            count_noise=float(count_noise),
            sampling_rate=sampling_rate,
            steps=steps,
        )

    @property
    def total_noise_multiplier(self) -> float:
        """(σ_eff⁻² + (2σ_b)⁻²)^(−1/2): the single Gaussian the two queries of a step amount to."""
        return (self.gradient_noise**-2 + (self.count_noise / self.count_sensitivity) ** -2) ** -0.5

    def standard_event(self) -> ev.Event:
        """Per step, the Poisson-sampled pair (gradient at σ_eff, count at σ_b / its sensitivity), ``steps`` times."""
        pair = ev.Composed(
            events=(
                ev.Gaussian(noise_multiplier=self.gradient_noise),
                ev.Gaussian(noise_multiplier=self.count_noise / self.count_sensitivity),
            )
        )
        return ev.SelfComposed(event=ev.PoissonSampled(sampling_rate=self.sampling_rate, event=pair), count=self.steps)

    def to_dp_accounting(self):
        return ev.to_dp_accounting(self.standard_event())


def _register_interpreters() -> None:
    from dplens.accountant import pld, rdp

    @rdp.rdp_curve.register(AdaptiveClipping)
    def _(event: AdaptiveClipping):
        return rdp.rdp_curve(event.standard_event())

    @pld.privacy_profile.register(AdaptiveClipping)
    def _(event: AdaptiveClipping):
        return pld.privacy_profile(event.standard_event())


_register_interpreters()
