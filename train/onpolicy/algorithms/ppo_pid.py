"""PPO-PID: PPO-Lag's surrogate on A_r - lambda A_c, lambda from a PID controller on the per-step cost error.

As crax-bench's `ppo_pid` trains it (Stooke et al. 2020): once per update, after SGD, with v = the batch
mean per-step cost - d/T, the state (integral, previous error, derivative estimate) and lambda move by
`train.losses.pid_update`; the loss is crax's PPO-Lag loss (`ppo_lag_policy_loss`, cost advantage normalised).
"""

from __future__ import annotations

from typing import Any

from train.algorithms.base import Algorithm, LossInputs, StateVar, cost_advantage
from train.config import TrainConfig


def policy_loss(config: TrainConfig, x: LossInputs) -> Any:
    from train import losses as L

    return L.ppo_lag_policy_loss(x.ratio, x.adv, cost_advantage(config, config.ppo_pid, x.cost_adv), x.multiplier,
                                 config.clip_epsilon)


def update(config: TrainConfig, mult: Any, state: Any, mean_cost: Any, d_step: Any) -> tuple[Any, Any]:
    """(lambda, state) after an update; the PID state in slots 0-2 (integral, previous error, derivative)."""
    from train import losses as L

    pc = config.ppo_pid
    lam, pid = L.pid_update(mult, state[:3], mean_cost, d_step, pc.kp, pc.ki, pc.kd, pc.integral_clip,
                            pc.lambda_max, pc.derivative_ema)
    return lam, state.at[:3].set(pid)


PPO_PID = Algorithm("ppo_pid", 4, "ppo_pid", lambda c: c.ppo_pid.init, policy_loss, update=update,
                    initial_state=lambda c: (0.0, 0.0, 0.0),
                    state_vars=(StateVar("pid_integral", 0), StateVar("pid_error", 1), StateVar("pid_derivative", 2)),
                    title="PPO-PID")
"""λ is the multiplier; `pid_integral`, `pid_error` (the last update's v) and `pid_derivative` after each iterate."""
