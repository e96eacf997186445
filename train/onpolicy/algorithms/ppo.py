"""PPO: the clipped surrogate on the reward advantage; no multiplier (stored as NaN)."""

from __future__ import annotations

from typing import Any

from train.algorithms.base import Algorithm, LossInputs
from train.config import TrainConfig


def policy_loss(config: TrainConfig, x: LossInputs) -> Any:
    from train import losses as L

    return L.ppo_policy_loss(x.ratio, x.adv, config.clip_epsilon)


def no_update(config: TrainConfig, mult: Any, mean_cost: Any, d_step: Any) -> Any:
    """The multiplier of an algorithm without one: unchanged."""
    return mult


PPO = Algorithm("ppo", 0, None, lambda c: 0.0, policy_loss, no_update, uses_multiplier=False, cost_critic=False,
                title="PPO")
