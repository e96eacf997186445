"""What every algorithm record says, whichever family trains it (no jax): the entry type of `train.registry`.

A family's record type extends `AlgorithmRecord` with the hooks its core calls: `train.onpolicy.algorithms.base.
Algorithm` (the PPO family: a policy loss, a multiplier or state update once per update, an env adapter) and
`train.offpolicy.base.OffPolicyAlgorithm` (the SAC family: a multiplier update after every gradient step).
The registry gives each registered record its `id`, its branch in its family's `lax.switch`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from train.config import TrainConfig
    from train.offpolicy.config import OffPolicyConfig

ONPOLICY = "onpolicy"
"""The PPO family (`train.onpolicy`): rollouts of unroll_length steps, SGD epochs on them."""
OFFPOLICY = "offpolicy"
"""The SAC family (`train.offpolicy`): a replay buffer, gradient steps after every actor step."""
FAMILIES = (ONPOLICY, OFFPOLICY)
FAMILY_TITLES = {ONPOLICY: "on-policy", OFFPOLICY: "off-policy"}
"""How messages name the families."""


def no_multiplier(config: Any) -> float:
    """The initial multiplier of an algorithm without one."""
    return 0.0


@dataclass(frozen=True, kw_only=True)
class AlgorithmRecord:
    """One algorithm: its name and family, what it needs of its program, where its settings are."""

    name: str
    """As stored in the cube's `algo` coordinate (and given to `saferl train --algos`)."""
    family: str
    """`ONPOLICY` or `OFFPOLICY`: which core trains it."""
    title: str = ""
    """Display name (e.g. "PPO-PID")."""
    config_section: str | None = None
    """The config field holding its settings, its TOML table (`ppo_lag` of TrainConfig, `sac_pid` of the
    `[offpolicy]` table); None: it has none. The section's dataclass defaults are the algorithm's defaults."""
    initial_multiplier: Callable[[Any], float] = no_multiplier
    """config -> lambda_0 (the family's config: TrainConfig on-policy, OffPolicyConfig off-policy)."""
    uses_multiplier: bool = True
    """False: the multiplier stays 0 and is stored as NaN (PPO, PPO-Saute, CRPO, SAC)."""
    constrained: bool = True
    """Whether it acts on the safety bound at all (the manifest's `constrained`; False: PPO, SAC)."""
    cost_critic: bool = True
    """Whether its program trains a cost critic (crax's PPO, PPO-Saute and SAC have none)."""
    paper: bool = False
    """One of the paper's four (`train.registry.PAPER_ALGOS`, the `paper` preset)."""
    id: int = -1
    """Its branch in its family's `lax.switch`: set by `train.registry.register` (its position among the
    family's registered records); -1 on a record that is not registered."""

    @property
    def iterate_vars(self) -> tuple[str, ...]:
        """Per-iterate cube variables of its own beside the family's (NaN for the runs of other algorithms)."""
        return ()


def d_step(config: TrainConfig | OffPolicyConfig, bound: float) -> float:
    """The per-step cost budget d / T (T: the config's `episode_length`) every multiplier rule compares with."""
    return bound / config.episode_length
