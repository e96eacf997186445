"""SAC-Lag (crax `agents/sac_lag`): SAC plus a twin cost Q; the actor minimises alpha log pi - Q + lambda Qc and
lambda moves by projected gradient ascent after every gradient step, capped at lambda_max."""

from __future__ import annotations

from typing import TYPE_CHECKING

from train.offpolicy.base import OffPolicyAlgorithm
from train.offpolicy.config import OffPolicyConfig

if TYPE_CHECKING:
    import jax

    from train.multipliers import PIDState


def multiplier_update(config: OffPolicyConfig, lam: jax.Array, pid: PIDState, mean_cost: jax.Array,
                      d_step: jax.Array) -> tuple[jax.Array, PIDState]:
    """lambda <- min(relu(lambda + lr / T (mean_cost - d/T)), lambda_max) (crax's `effective_lagrangian_lr`;
    `train.multipliers.lagrange_update` with its cap)."""
    from train.multipliers import lagrange_update

    c = config.sac_lag
    lr = c.lr / max(config.episode_length, 1)
    return lagrange_update(lam, mean_cost, d_step, lr, c.lambda_max), pid


SAC_LAG = OffPolicyAlgorithm(name="sac_lag", title="SAC-Lag", config_section="sac_lag",
                             initial_multiplier=lambda c: c.sac_lag.init, multiplier_update=multiplier_update)
