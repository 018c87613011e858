"""A noisy gradient release, as DP-SGD makes one: the sum of clipped per-example gradients plus Gaussian noise.

Each record is the coordinate its clipped gradient points along (clipping norm 1: a record adds 1 there); the
release adds N(0, σ²) noise to every coordinate, σ = ``NOISE_MULTIPLIER`` (the Gaussian mechanism, sensitivity 1
under adding or removing a record), in float32 like a training framework. ``slipped`` variants halve the noise on
coordinate 0: a bug that doubles that coordinate's sensitivity relative to its noise. Audit them with::

    dplens audit --target gradients:release_100k_slipped --pair gradients_pair.json \\
        --claim-epsilon 1.993 --claim-delta 1e-5 --trials 20000

(the claim is the Gaussian mechanism's ε at δ = 10⁻⁵ for σ = 2; the pair adds one record along coordinate 0).
"""

import numpy as np

NOISE_MULTIPLIER = 2.0


def release(data, rng, size, *, dimension, slipped=False):
    """``size`` releases of the noisy gradient sum of the records ``data`` (their coordinates)."""
    gradient = np.zeros(dimension, dtype=np.float32)
    np.add.at(gradient, np.asarray(data, dtype=np.int64), np.float32(1.0))
    noise = rng.standard_normal((size, dimension), dtype=np.float32)
    noise *= np.float32(NOISE_MULTIPLIER)
    if slipped:
        noise[:, 0] *= np.float32(0.5)
    noise += gradient
    return noise


def _variant(dimension, slipped):
    def target(data, rng, size):
        return release(data, rng, size, dimension=dimension, slipped=slipped)

    target.dplens_batched = True
    slip = ", coordinate 0 slipped" if slipped else ""
    target.__doc__ = f"The gradient release of {dimension} coordinates{slip}."
    return target


release_2k = _variant(2_000, False)
release_2k_slipped = _variant(2_000, True)
release_100k = _variant(100_000, False)
release_100k_slipped = _variant(100_000, True)
release_200k = _variant(200_000, False)
