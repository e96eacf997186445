"""The four algorithms, one record each: name, switch index, multiplier, policy loss, multiplier update.

`core.make_train` builds its `lax.switch` branches from `ALGORITHMS` in order (an algorithm's `id` is
its position); the host side takes the names, initial multipliers and `uses_multiplier` from the same
records. Losses and updates bind the config's settings to the pure functions of `train.losses`, which
they import when first called, so this module (and the CLI that lists the names) needs no jax.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from cube.errors import CubeError
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


# ------------------------------------------------------------------------------------ the four rules
def _ppo_loss(config: TrainConfig, x: LossInputs) -> Any:
    from train import losses as L

    return L.ppo_policy_loss(x.ratio, x.adv, config.clip_epsilon)


def _no_update(config: TrainConfig, mult: Any, mean_cost: Any, d_step: Any) -> Any:
    return mult


def _ppo_lag_loss(config: TrainConfig, x: LossInputs) -> Any:
    from train import losses as L

    return L.ppo_lag_policy_loss(x.ratio, x.adv, cost_advantage(config, config.ppo_lag, x.cost_adv), x.multiplier,
                                 config.clip_epsilon)


def _ppo_lag_update(config: TrainConfig, mult: Any, mean_cost: Any, d_step: Any) -> Any:
    from train import losses as L

    return L.lagrange_update(mult, mean_cost, d_step, config.ppo_lag.lr)


def _p3o_loss(config: TrainConfig, x: LossInputs) -> Any:
    from train import losses as L

    cadv = cost_advantage(config, config.p3o, x.cost_adv)
    if config.p3o.violation == "previous_update":
        return L.p3o_crax_policy_loss(x.ratio, x.adv, cadv, x.multiplier, x.last_violation, config.clip_epsilon,
                                      config.discount)
    return L.p3o_policy_loss(x.ratio, x.adv, cadv, x.multiplier, x.mean_cost, x.d_step, config.clip_epsilon,
                             config.discount)


def _p3o_update(config: TrainConfig, mult: Any, mean_cost: Any, d_step: Any) -> Any:
    from train import losses as L

    pc = config.p3o
    return L.p3o_kappa_update(mult, mean_cost, d_step, pc.kappa_init, pc.increase, pc.decay, pc.kappa_max)


def _focops_loss(config: TrainConfig, x: LossInputs) -> Any:
    from train import losses as L

    fc = config.focops
    cadv = cost_advantage(config, fc, x.cost_adv)
    if fc.loss == "crax":
        return L.focops_crax_policy_loss(x.ratio, x.log_ratio, x.adv, cadv, x.multiplier, fc.temperature,
                                         fc.kl_threshold)
    return L.focops_policy_loss(x.ratio, x.adv, cadv, x.kl, x.multiplier, fc.temperature, fc.kl_threshold)


def _focops_update(config: TrainConfig, mult: Any, mean_cost: Any, d_step: Any) -> Any:
    from train import losses as L

    return L.focops_nu_update(mult, mean_cost, d_step, config.focops.nu_lr, config.focops.nu_max)


ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm("ppo", 0, None, lambda c: 0.0, _ppo_loss, _no_update),
    Algorithm("ppo_lag", 1, "ppo_lag", lambda c: c.ppo_lag.init, _ppo_lag_loss, _ppo_lag_update),
    Algorithm("p3o", 2, "p3o", lambda c: c.p3o.kappa_init, _p3o_loss, _p3o_update),
    Algorithm("focops", 3, "focops", lambda c: c.focops.nu_init, _focops_loss, _focops_update),
)
"""The registry, in switch order (PPO, PPO-Lag lambda, P3O kappa, FOCOPS nu)."""
assert [a.id for a in ALGORITHMS] == list(range(len(ALGORITHMS)))

ALGOS: tuple[str, ...] = tuple(a.name for a in ALGORITHMS)
"""Algorithm names as stored in the cube's `algo` coordinate."""


def algorithm(name: str) -> Algorithm:
    """The record of `name` (one-line CubeError for an unknown name)."""
    for a in ALGORITHMS:
        if a.name == name:
            return a
    raise CubeError(f"unknown algorithm '{name}'; choose from {', '.join(ALGOS)}")
