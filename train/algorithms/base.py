"""What every algorithm record is made of: `Algorithm`, the policy-loss inputs, d/T and the cost advantage.

Losses and updates bind the config's settings to the pure functions of `train.losses`, which they import
when first called, so the registry (and the CLI that lists the names) needs no jax.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from train.config import TrainConfig


class LossInputs(NamedTuple):
    """Per-sample policy-loss inputs `[N]` (probability ratio and its log, reward advantage (normalised
    if the config says so), raw cost advantage, KL to the old policy) and the run's scalars: multiplier,
    mean per-step cost of the minibatch, d_step = d/T, and the previous update's violation (its batch mean
    per-step cost - d/T; 0 before the first update)."""

    ratio: Any
    log_ratio: Any
    adv: Any
    cost_adv: Any
    kl: Any
    multiplier: Any
    mean_cost: Any
    d_step: Any
    last_violation: Any


@dataclass(frozen=True)
class Algorithm:
    """One algorithm of the PPO core: how it starts, which policy loss it minimises, how it moves its multiplier.

    `policy_loss(config, inputs)` -> scalar loss; `multiplier_update(config, multiplier, mean_cost, d_step)`
    -> the multiplier after an update (mean_cost: the update's mean per-step cost, d_step = d/T).
    """

    name: str
    """As stored in the cube's `algo` coordinate."""
    id: int
    """Index of its `lax.switch` branch (its position in ALGORITHMS)."""
    config_section: str | None
    """The TrainConfig field holding its settings (a `[ppo_lag]`/`[p3o]`/`[focops]` TOML table); None: PPO."""
    initial_multiplier: Callable[[TrainConfig], float]
    policy_loss: Callable[[TrainConfig, LossInputs], Any]
    multiplier_update: Callable[[TrainConfig, Any, Any, Any], Any]

    @property
    def uses_multiplier(self) -> bool:
        """False for PPO, whose multiplier stays 0 and is stored as NaN."""
        return self.config_section is not None


def d_step(config: TrainConfig, bound: float) -> float:
    """The per-step cost budget d / T every multiplier update and the P3O penalty compare against."""
    return bound / config.episode_length


def cost_advantage(config: TrainConfig, section: Any, cost_adv: Any) -> Any:
    """The cost advantage an algorithm's loss uses: normalised per minibatch iff `normalize_advantage` and
    its section's `normalize_cost_advantage`, else raw (crax keeps P3O's and FOCOPS's raw)."""
    from train import losses as L

    return L.normalize(cost_adv) if config.normalize_advantage and section.normalize_cost_advantage else cost_adv
