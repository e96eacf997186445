"""SAC-PID (crax `agents/sac_pid`): SAC-Lag's losses, lambda set by the PID controller on the per-step cost error
after every gradient step (`train.multipliers`: PPO-PID's rule and config, applied per gradient step)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from train.offpolicy.base import OffPolicyAlgorithm
from train.offpolicy.config import OffPolicyConfig

if TYPE_CHECKING:
    import jax

    from train.multipliers import PIDState


def multiplier_update(config: OffPolicyConfig, lam: jax.Array, pid: PIDState, mean_cost: jax.Array,
                      d_step: jax.Array) -> tuple[jax.Array, PIDState]:
    """crax's `pid_lambda_update` with the config's gains (`train.multipliers.pid_step`)."""
    from train.multipliers import pid_step

    return pid_step(config.sac_pid, lam, pid, mean_cost, d_step)


SAC_PID = OffPolicyAlgorithm(name="sac_pid", title="SAC-PID", config_section="sac_pid",
                             initial_multiplier=lambda c: c.sac_pid.init, multiplier_update=multiplier_update)
