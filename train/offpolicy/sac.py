"""SAC (crax `agents/sac`): twin-Q soft actor-critic with a learned temperature; no cost critic, lambda 0."""

from __future__ import annotations

from typing import TYPE_CHECKING

from train.offpolicy.base import OffPolicyAlgorithm
from train.offpolicy.config import OffPolicyConfig

if TYPE_CHECKING:
    import jax

    from train.multipliers import PIDState


def no_update(config: OffPolicyConfig, lam: jax.Array, pid: PIDState, mean_cost: jax.Array,
              d_step: jax.Array) -> tuple[jax.Array, PIDState]:
    """SAC has no multiplier: lambda and the PID state stay as they are."""
    return lam, pid


SAC = OffPolicyAlgorithm(name="sac", title="SAC", multiplier_update=no_update, uses_multiplier=False,
                         constrained=False, cost_critic=False)
