"""CRPO: a reward step or a cost step per update (Xu et al. 2021), as crax-bench's `crpo` trains it.

State slot 0 is the regime (1: reward step, 0: cost step), 1 before the first update. An update's loss is
the clipped surrogate on A_r in a reward step and on -A_c (cost advantage normalised, as crax) in a cost
step; after its SGD the next regime is a reward step iff the batch mean per-step cost <= d/T + eta. Both
critics always train; no multiplier. Per iterate: `crpo_regime` (the regime of the next update) and
`crpo_reward_share` (the share of the iterate's updates that were reward steps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from train.config import TrainConfig
from train.onpolicy.algorithms.base import Algorithm, LossInputs, StateVar, cost_advantage

if TYPE_CHECKING:
    import jax


def policy_loss(config: TrainConfig, x: LossInputs) -> jax.Array:
    from train.onpolicy import losses as L

    return L.crpo_policy_loss(x.ratio, x.adv, cost_advantage(config, config.crpo, x.cost_adv), x.state[0],
                              config.clip_epsilon)


def update(config: TrainConfig, mult: jax.Array, state: jax.Array, mean_cost: jax.Array,
           d_step: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(multiplier unchanged, state with the next regime in slot 0)."""
    from train.onpolicy import losses as L

    return mult, state.at[0].set(L.crpo_regime(mean_cost, d_step, config.crpo.eta))


CRPO = Algorithm(name="crpo", title="CRPO", config_section="crpo", policy_loss=policy_loss, update=update,
                 initial_state=lambda c: (1.0,), uses_multiplier=False,
                 state_vars=(StateVar("crpo_regime", 0), StateVar("crpo_reward_share", 0, mean=True)))
