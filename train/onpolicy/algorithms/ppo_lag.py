"""PPO-Lag: PPO's surrogate on A_r - lambda A_c, lambda by gradient ascent on the per-step cost error."""

from __future__ import annotations

from typing import TYPE_CHECKING

from train.config import TrainConfig
from train.onpolicy.algorithms.base import Algorithm, LossInputs, cost_advantage

if TYPE_CHECKING:
    import jax


def policy_loss(config: TrainConfig, x: LossInputs) -> jax.Array:
    from train.onpolicy import losses as L

    return L.ppo_lag_policy_loss(x.ratio, x.adv, cost_advantage(config, config.ppo_lag, x.cost_adv), x.multiplier,
                                 config.clip_epsilon)


def multiplier_update(config: TrainConfig, mult: jax.Array, mean_cost: jax.Array, d_step: jax.Array) -> jax.Array:
    """lambda <- relu(lambda + lr (mean per-step cost - d/T)) (`train.multipliers.lagrange_update`, no cap)."""
    from train.multipliers import lagrange_update

    return lagrange_update(mult, mean_cost, d_step, config.ppo_lag.lr)


PPO_LAG = Algorithm(name="ppo_lag", title="PPO-Lag", config_section="ppo_lag",
                    initial_multiplier=lambda c: c.ppo_lag.init,
                    policy_loss=policy_loss, multiplier_update=multiplier_update, paper=True)
