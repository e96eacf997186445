"""What an off-policy algorithm record is made of (no jax at import: the registry and the CLI need none).

An `OffPolicyAlgorithm` says how a run starts (its initial lambda), whether it trains the cost critic, and how
lambda moves after every gradient step; the networks, losses and replay are shared by all three (SAC is
SAC-Lag without the cost critic and with lambda fixed at 0, exactly as crax's two trainers differ).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from train.offpolicy.config import OffPolicyConfig


@dataclass(frozen=True)
class OffPolicyAlgorithm:
    """One off-policy algorithm.

    `multiplier_update(config, lam, pid, mean_cost, d_step) -> (lam, pid)` runs after every gradient step
    (mean_cost: the minibatch's mean per-step cost; d_step = d/T; pid: a `losses.PIDState`, carried by all
    algorithms, used by SAC-PID only).
    """

    name: str
    """As stored in the cube's `algo` coordinate."""
    id: int
    """Its `lax.switch` branch in the off-policy program (its position in OFFPOLICY_ALGORITHMS)."""
    config_section: str | None
    """The OffPolicyConfig field holding its settings (`sac_lag`, `sac_pid`); None: SAC (no multiplier)."""
    initial_multiplier: Callable[[OffPolicyConfig], float]
    multiplier_update: Callable[[OffPolicyConfig, Any, Any, Any, Any], tuple[Any, Any]]

    @property
    def uses_multiplier(self) -> bool:
        """False for SAC, whose lambda stays 0 (stored as NaN)."""
        return self.config_section is not None

    @property
    def uses_cost_critic(self) -> bool:
        """Whether it trains the cost Q network (SAC-Lag, SAC-PID; crax's SAC has none)."""
        return self.uses_multiplier
