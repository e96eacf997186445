"""PPO-Saute: plain PPO on a budget-augmented task (Sootla et al. 2022), as crax-bench's `ppo_saute`.

The program (`budget=True`) keeps each env's remaining budget b (b_0 = d), appends it to the observation,
moves it after every step by `train.losses.saute_step` and hands the learner `penalty` instead of the env's
reward on a step that overdraws it; the cube records the env's reward. The loss is PPO's clipped surrogate;
no multiplier, no cost critic (crax trains it with its plain PPO). Per iterate: the mean remaining budget of
the iterate's steps (`saute_budget`, cost units) and the share of its steps whose reward was replaced
(`saute_penalty_share`).
"""

from __future__ import annotations

from typing import Any

from train.algorithms.base import Algorithm, LossInputs
from train.algorithms.ppo import no_update
from train.config import TrainConfig

DIAGNOSTICS = ("saute_budget", "saute_penalty_share")
"""What a budget program adds to the per-update diagnostics (`train.core` computes them)."""


def policy_loss(config: TrainConfig, x: LossInputs) -> Any:
    from train import losses as L

    return L.ppo_policy_loss(x.ratio, x.adv, config.clip_epsilon)


PPO_SAUTE = Algorithm("ppo_saute", 5, "ppo_saute", lambda c: 0.0, policy_loss, no_update, diagnostics=DIAGNOSTICS,
                      uses_multiplier=False, cost_critic=False, budget=True, title="PPO-Saute")
