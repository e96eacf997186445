"""SAC (crax `agents/sac`): twin-Q soft actor-critic with a learned temperature; no cost critic, lambda 0."""

from __future__ import annotations

from typing import Any

from train.offpolicy.base import OffPolicyAlgorithm
from train.offpolicy.config import OffPolicyConfig


def no_update(config: OffPolicyConfig, lam: Any, pid: Any, mean_cost: Any, d_step: Any) -> tuple[Any, Any]:
    """SAC has no multiplier: lambda and the PID state stay as they are."""
    return lam, pid


SAC = OffPolicyAlgorithm(name="sac", title="SAC", multiplier_update=no_update, uses_multiplier=False,
                         constrained=False, cost_critic=False)
