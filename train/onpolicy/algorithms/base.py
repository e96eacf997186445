"""What an on-policy algorithm record is made of: `Algorithm`, the policy-loss inputs and the cost advantage.

Losses and updates bind the config's settings to the pure functions of `train.onpolicy.losses` and
`train.multipliers`, which they import when first called, so the registry (and the CLI that lists the names)
needs no jax.

Beyond a multiplier, an algorithm may carry a small state vector of its own through training (PPO-PID's
integral, previous error and derivative; CRPO's regime), updated with the multiplier once per update and
recorded per iterate (`state_vars`); and it may train on an adapted task (`env_adapter`: PPO-Saute's budget
in the observation and its shaped reward, `train.onpolicy.saute`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from train.algorithm import ONPOLICY, AlgorithmRecord
from train.config import TrainConfig

if TYPE_CHECKING:
    import jax

    from train.envs import EnvFns

STATE_SIZE = 3
"""Length of the state vector every on-policy run carries (an algorithm uses its first
`len(initial_state(config))` slots, the others stay 0): the longest built-in state, PPO-PID's."""

EnvAdapter = Callable[[TrainConfig, "EnvFns", "jax.Array | None"], "EnvFns"]
"""(config, env, bound d in cost units (a traced scalar)) -> the task the learner trains on."""


class LossInputs(NamedTuple):
    """Per-sample policy-loss inputs `[N]` (probability ratio and its log, reward advantage (normalised
    if the config says so), raw cost advantage, closed-form KL to the old policy) and the run's scalars:
    multiplier, mean per-step cost of the minibatch, d_step = d/T, and the previous update's violation (its
    batch mean per-step cost - d/T; 0 before the first update); `state`: the algorithm's own state
    `[STATE_SIZE]` (see `Algorithm.initial_state`; None where a caller has none)."""

    ratio: jax.Array
    log_ratio: jax.Array
    adv: jax.Array
    cost_adv: jax.Array
    kl: jax.Array
    multiplier: jax.Array
    mean_cost: jax.Array
    d_step: jax.Array
    last_violation: jax.Array
    state: jax.Array | None = None


@dataclass(frozen=True)
class StateVar:
    """A per-iterate cube variable taken from slot `slot` of an algorithm's state vector: its value after the
    iterate, or (`mean`) the mean over the iterate's updates of the value each update used."""

    name: str
    slot: int
    mean: bool = False


def no_state(config: TrainConfig) -> tuple[float, ...]:
    """The state of an algorithm without one."""
    return ()


@dataclass(frozen=True, kw_only=True)
class Algorithm(AlgorithmRecord):
    """One algorithm of the PPO core: how it starts, which policy loss it minimises, how it moves its
    multiplier (and its own state), what it records, which task it trains on.

    `policy_loss(config, inputs)` -> scalar loss. The update after each update's SGD is either
    `multiplier_update(config, multiplier, mean_cost, d_step)` -> multiplier, or, for an algorithm with a state
    of its own, `update(config, multiplier, state, mean_cost, d_step)` -> (multiplier, state), state a vector
    `[STATE_SIZE]` of which the algorithm uses the first `len(initial_state(config))` slots (mean_cost: the
    update's batch mean per-step cost, d_step = d/T). `Algorithm.step` calls whichever is given.
    """

    family: str = ONPOLICY
    policy_loss: Callable[[TrainConfig, LossInputs], jax.Array]
    multiplier_update: Callable[[TrainConfig, jax.Array, jax.Array, jax.Array], jax.Array] | None = None
    update: Callable[[TrainConfig, jax.Array, jax.Array, jax.Array, jax.Array],
                     tuple[jax.Array, jax.Array]] | None = None
    initial_state: Callable[[TrainConfig], tuple[float, ...]] = no_state
    state_vars: tuple[StateVar, ...] = ()
    """Its state recorded per iterate, beside the multiplier."""
    diagnostics: tuple[str, ...] = ()
    """Per-iterate diagnostics of its program beyond the shared ones (`train.record.DIAGNOSTICS`): its env
    adapter's per-step `info` names, averaged over the iterate's steps."""
    env_adapter: EnvAdapter | None = None
    """The task it trains on, made from the env (PPO-Saute: `train.onpolicy.saute.saute_adapter`); None: the
    env itself. Runs of one program share one adapter."""

    def __post_init__(self) -> None:
        if (self.multiplier_update is None) == (self.update is None):
            raise ValueError(f"{self.name}: give exactly one of multiplier_update and update")
        if len(self.initial_state(TrainConfig())) > STATE_SIZE:
            raise ValueError(f"{self.name}: a state of more than STATE_SIZE = {STATE_SIZE} slots")

    def step(self, config: TrainConfig, multiplier: jax.Array, state: jax.Array, mean_cost: jax.Array,
             d_step: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(multiplier, state) after an update (see the class docstring)."""
        if self.update is not None:
            return self.update(config, multiplier, state, mean_cost, d_step)
        assert self.multiplier_update is not None
        return self.multiplier_update(config, multiplier, mean_cost, d_step), state

    def start_state(self, config: TrainConfig) -> tuple[float, ...]:
        """The state vector `[STATE_SIZE]` a run starts with (its own slots, then zeros)."""
        own = tuple(float(x) for x in self.initial_state(config))
        return own + (0.0,) * (STATE_SIZE - len(own))

    @property
    def iterate_vars(self) -> tuple[str, ...]:
        """The per-iterate cube variables of its own (state and diagnostics)."""
        return tuple(v.name for v in self.state_vars) + self.diagnostics


class CostAdvantageOption(Protocol):
    """A config section with the option to normalise its algorithm's cost advantage."""

    @property
    def normalize_cost_advantage(self) -> bool: ...


def cost_advantage(config: TrainConfig, section: CostAdvantageOption, cost_adv: jax.Array) -> jax.Array:
    """The cost advantage an algorithm's loss uses: normalised per minibatch iff `normalize_advantage` and
    its section's `normalize_cost_advantage`, else raw (crax keeps P3O's and FOCOPS's raw)."""
    from train.onpolicy import losses as L

    return L.normalize(cost_adv) if config.normalize_advantage and section.normalize_cost_advantage else cost_adv
