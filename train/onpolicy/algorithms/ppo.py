"""PPO: the clipped surrogate on the reward advantage; no multiplier (stored as NaN), no cost critic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from train.config import TrainConfig
from train.onpolicy.algorithms.base import Algorithm, LossInputs

if TYPE_CHECKING:
    import jax


def policy_loss(config: TrainConfig, x: LossInputs) -> jax.Array:
    from train.onpolicy import losses as L

    return L.ppo_policy_loss(x.ratio, x.adv, config.clip_epsilon)


def no_update(config: TrainConfig, mult: jax.Array, mean_cost: jax.Array, d_step: jax.Array) -> jax.Array:
    """The multiplier of an algorithm without one: unchanged."""
    return mult


PPO = Algorithm(name="ppo", title="PPO", policy_loss=policy_loss, multiplier_update=no_update,
                uses_multiplier=False, constrained=False, cost_critic=False, paper=True)
