"""DP-SGD with jax_privacy 2.x, accounted and calibrated by dplens's dp_accounting accountant.

    pip install "dplens[jax]"
    python examples/jax_privacy_dpsgd.py

A logistic regression on synthetic data trained with jax_privacy's building blocks: Poisson batches
(``batch_selection.CyclicPoissonSampling``), per-example clipping (``clipped_grad``), Gaussian noise of standard
deviation σ·C on the clipped sum. The noise multiplier σ is calibrated by jax_privacy's own
``accounting.calibrate_noise_multiplier`` with its ``DpsgdTrainingAccountant`` — whose accountant config is dplens's
(:func:`dplens.integrations.dp_accounting.jax_privacy_config`: a ``PldAccountantConfig`` that builds dplens's
``PLDAccountant``). The training's ε is then reported with its certified bracket, next to jax_privacy's own PLD
answer for the same training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TrainingResult:
    noise_multiplier: float
    epsilon: float  # dplens's PLD upper bound on the training's ε at delta
    epsilon_lower: float  # its certified lower end
    epsilon_jax_privacy_pld: float  # jax_privacy's default accountant (dp_accounting's PLD at 1e-4) at the same σ
    delta: float
    accuracy: float
    steps: int


def train(
    *,
    num_examples: int = 2_000,
    expected_batch_size: int = 100,
    steps: int = 200,
    target_epsilon: float = 2.0,
    delta: float = 1e-5,
    clip_norm: float = 1.0,
    learning_rate: float = 0.5,
    seed: int = 0,
) -> TrainingResult:
    """Calibrate σ for (target ε, δ) with dplens inside jax_privacy, train, and account the training."""
    import jax
    import jax.numpy as jnp
    from jax_privacy import accounting, batch_selection, clipped_grad

    from dplens.integrations.dp_accounting import jax_privacy_config

    rng = np.random.default_rng(seed)
    features = rng.normal(size=(num_examples, 5)).astype(np.float32)
    labels = (features @ np.array([1.0, -2.0, 0.5, 0.0, 1.5]) + 0.3 * rng.normal(size=num_examples) > 0).astype(
        np.float32
    )

    # Accounting: jax_privacy's DP-SGD accountant with dplens's PLD accountant inside.
    dplens_accountant = accounting.DpsgdTrainingAccountant(dp_accountant_config=jax_privacy_config())
    noise_multiplier = accounting.calibrate_noise_multiplier(
        target_epsilon=target_epsilon,
        accountant=dplens_accountant,
        batch_sizes=expected_batch_size,
        num_updates=steps,
        num_samples=num_examples,
        target_delta=delta,
        tol=1e-3,
    )

    def loss(params, x, y, mask):
        logits = x @ params["w"] + params["b"]
        return jnp.mean(mask * (jnp.logaddexp(0.0, logits) - y * logits))  # padding rows (mask 0) add nothing

    # The clipped per-example gradients' sum: ℓ2 sensitivity clip_norm under add/remove (jax_privacy's guarantee).
    gradient_sum = clipped_grad(loss, l2_clip_norm=clip_norm, batch_argnums=(1, 2, 3))

    @jax.jit
    def step(params, x, y, mask, key):
        grads = gradient_sum(params, x, y, mask)
        keys = jax.random.split(key, 2)
        stddev = noise_multiplier * clip_norm
        noisy = {
            "w": grads["w"] + stddev * jax.random.normal(keys[0], grads["w"].shape),
            "b": grads["b"] + stddev * jax.random.normal(keys[1], grads["b"].shape),
        }
        return jax.tree_util.tree_map(lambda p, g: p - learning_rate * g / expected_batch_size, params, noisy)

    params = {"w": jnp.zeros(5), "b": jnp.zeros(())}
    sampler = batch_selection.CyclicPoissonSampling(
        sampling_prob=expected_batch_size / num_examples,
        iterations=steps,
        partition_type=batch_selection.PartitionType.INDEPENDENT,  # add/remove adjacency
    )
    key = jax.random.key(seed)
    for indices in sampler.batch_iterator(num_examples, rng=seed):
        # Poisson batches vary in size: padded to a multiple of 32 (index -1, mask 0) so the step compiles a few times.
        padded = batch_selection.pad_to_multiple_of(indices, multiple=32)
        mask = (padded >= 0).astype(np.float32)
        rows = np.where(padded >= 0, padded, 0)
        key, subkey = jax.random.split(key)
        params = step(params, features[rows], labels[rows], mask, subkey)

    accuracy = float(jnp.mean(((features @ params["w"] + params["b"]) > 0) == (labels > 0.5)))
    dp_params = accounting.DpParams(
        noise_multipliers=noise_multiplier, num_samples=num_examples, batch_size=expected_batch_size, delta=delta
    )
    epsilon = dplens_accountant.compute_epsilon(steps, dp_params)
    theirs = accounting.DpsgdTrainingAccountant(dp_accountant_config=accounting.PldAccountantConfig())
    # The bracket: the same events composed into dplens's accountant directly.
    from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent

    from dplens.integrations.dp_accounting import PLDAccountant

    bracket = (
        PLDAccountant()
        .compose(PoissonSampledDpEvent(expected_batch_size / num_examples, GaussianDpEvent(noise_multiplier)), steps)
        .get_epsilon_bracket(delta)
    )
    return TrainingResult(
        noise_multiplier=float(noise_multiplier),
        epsilon=float(epsilon),
        epsilon_lower=float(bracket.epsilon_lower),
        epsilon_jax_privacy_pld=float(theirs.compute_epsilon(steps, dp_params)),
        delta=delta,
        accuracy=accuracy,
        steps=steps,
    )


if __name__ == "__main__":
    result = train()
    print(
        f"σ = {result.noise_multiplier:.4f}: ε = {result.epsilon:.4f} (certified ≥ {result.epsilon_lower:.4f}; "
        f"jax_privacy's own PLD: {result.epsilon_jax_privacy_pld:.4f}) at δ = {result.delta:g}, "
        f"accuracy {result.accuracy:.3f} after {result.steps} steps"
    )
    assert result.epsilon <= 2.0 and math.isfinite(result.epsilon)
