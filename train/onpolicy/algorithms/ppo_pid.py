"""PPO-PID: PPO-Lag's surrogate on A_r - lambda A_c, lambda from a PID controller on the per-step cost error.

As crax-bench's `ppo_pid` trains it (Stooke et al. 2020): once per update, after SGD, with v = the batch
mean per-step cost - d/T, the state (integral, previous error, derivative estimate) and lambda move by
`train.multipliers.pid_update` (the rule SAC-PID applies per gradient step); the loss is crax's PPO-Lag loss
(`ppo_lag_policy_loss`, cost advantage normalised).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from train.config import TrainConfig
from train.onpolicy.algorithms.base import Algorithm, LossInputs, StateVar, cost_advantage

if TYPE_CHECKING:
    import jax


def policy_loss(config: TrainConfig, x: LossInputs) -> jax.Array:
    from train.onpolicy import losses as L

    return L.ppo_lag_policy_loss(x.ratio, x.adv, cost_advantage(config, config.ppo_pid, x.cost_adv), x.multiplier,
                                 config.clip_epsilon)


def update(config: TrainConfig, mult: jax.Array, state: jax.Array, mean_cost: jax.Array,
           d_step: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(lambda, state) after an update; the PID state in slots 0-2 (integral, previous error, derivative)."""
    import jax.numpy as jnp

    from train.multipliers import pid_step

    lam, pid = pid_step(config.ppo_pid, mult, state[:3], mean_cost, d_step)
    return lam, state.at[:3].set(jnp.stack(pid).astype(state.dtype))


PPO_PID = Algorithm(name="ppo_pid", title="PPO-PID", config_section="ppo_pid",
                    initial_multiplier=lambda c: c.ppo_pid.init,
                    policy_loss=policy_loss, update=update, initial_state=lambda c: (0.0, 0.0, 0.0),
                    state_vars=(StateVar("pid_integral", 0), StateVar("pid_error", 1), StateVar("pid_derivative", 2)))
"""λ is the multiplier; `pid_integral`, `pid_error` (the last update's v) and `pid_derivative` after each iterate."""
