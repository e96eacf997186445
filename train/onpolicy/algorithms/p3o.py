"""P3O: the clipped reward surrogate plus kappa times the ReLU of the clipped cost surrogate's violation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from train.config import TrainConfig
from train.onpolicy.algorithms.base import Algorithm, LossInputs, cost_advantage

if TYPE_CHECKING:
    import jax


def policy_loss(config: TrainConfig, x: LossInputs) -> jax.Array:
    from train.onpolicy import losses as L

    cadv = cost_advantage(config, config.p3o, x.cost_adv)
    if config.p3o.violation == "previous_update":
        return L.p3o_crax_policy_loss(x.ratio, x.adv, cadv, x.multiplier, x.last_violation, config.clip_epsilon,
                                      config.discount)
    return L.p3o_policy_loss(x.ratio, x.adv, cadv, x.multiplier, x.mean_cost, x.d_step, config.clip_epsilon,
                             config.discount)


def multiplier_update(config: TrainConfig, mult: jax.Array, mean_cost: jax.Array, d_step: jax.Array) -> jax.Array:
    from train.onpolicy import losses as L

    pc = config.p3o
    return L.p3o_kappa_update(mult, mean_cost, d_step, pc.kappa_init, pc.increase, pc.decay, pc.kappa_max)


P3O = Algorithm(name="p3o", title="P3O", config_section="p3o", initial_multiplier=lambda c: c.p3o.kappa_init,
                policy_loss=policy_loss, multiplier_update=multiplier_update, paper=True)
