"""PPO-Lag: PPO's surrogate on A_r - lambda A_c, lambda by gradient ascent on the per-step cost error."""

from __future__ import annotations

from typing import Any

from train.algorithms.base import Algorithm, LossInputs, cost_advantage
from train.config import TrainConfig


def policy_loss(config: TrainConfig, x: LossInputs) -> Any:
    from train import losses as L

    return L.ppo_lag_policy_loss(x.ratio, x.adv, cost_advantage(config, config.ppo_lag, x.cost_adv), x.multiplier,
                                 config.clip_epsilon)


def multiplier_update(config: TrainConfig, mult: Any, mean_cost: Any, d_step: Any) -> Any:
    from train import losses as L

    return L.lagrange_update(mult, mean_cost, d_step, config.ppo_lag.lr)


PPO_LAG = Algorithm("ppo_lag", 1, "ppo_lag", lambda c: c.ppo_lag.init, policy_loss, multiplier_update, title="PPO-Lag")
