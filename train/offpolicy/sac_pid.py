"""SAC-PID (crax `agents/sac_pid`): SAC-Lag's losses, lambda set by a PID controller on the per-step cost error
after every gradient step (the same rule as PPO-PID's, without PPO-PID's once-per-update cadence)."""

from __future__ import annotations

from typing import Any

from train.offpolicy.base import OffPolicyAlgorithm
from train.offpolicy.config import OffPolicyConfig


def multiplier_update(config: OffPolicyConfig, lam: Any, pid: Any, mean_cost: Any, d_step: Any) -> tuple[Any, Any]:
    """crax's `pid_lambda_update` with the config's gains (see `losses.pid_update`)."""
    from train.offpolicy import losses as L

    c = config.sac_pid
    return L.pid_update(lam, pid, mean_cost, d_step, c.kp, c.ki, c.kd, c.integral_clip, c.lambda_clip,
                        c.deriv_ema_beta)


SAC_PID = OffPolicyAlgorithm("sac_pid", 2, "sac_pid", lambda c: c.sac_pid.init, multiplier_update)
