"""FOCOPS: the first-order projection loss on (A_r - nu A_c)/(1 + nu), nu by projected gradient ascent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from train.config import TrainConfig
from train.onpolicy.algorithms.base import Algorithm, LossInputs, cost_advantage

if TYPE_CHECKING:
    import jax


def policy_loss(config: TrainConfig, x: LossInputs) -> jax.Array:
    from train.onpolicy import losses as L

    fc = config.focops
    cadv = cost_advantage(config, fc, x.cost_adv)
    if fc.loss in ("crax", "crax_stop_gradient"):
        return L.focops_crax_policy_loss(x.ratio, x.log_ratio, x.adv, cadv, x.multiplier, fc.temperature,
                                         fc.kl_threshold, differentiate_kl=fc.loss == "crax")
    return L.focops_policy_loss(x.ratio, x.adv, cadv, x.kl, x.multiplier, fc.temperature, fc.kl_threshold)


def multiplier_update(config: TrainConfig, mult: jax.Array, mean_cost: jax.Array, d_step: jax.Array) -> jax.Array:
    from train.onpolicy import losses as L

    return L.focops_nu_update(mult, mean_cost, d_step, config.focops.nu_lr, config.focops.nu_max)


FOCOPS = Algorithm(name="focops", title="FOCOPS", config_section="focops",
                   initial_multiplier=lambda c: c.focops.nu_init,
                   policy_loss=policy_loss, multiplier_update=multiplier_update, paper=True)
