"""PPO-Saute: plain PPO on a budget-augmented task (Sootla et al. 2022), as crax-bench's `ppo_saute`.

Its task is the env seen through `train.onpolicy.saute.saute_adapter` (OmniSafe's `SauteAdapter`): each env
keeps its remaining budget b (b_0 = d), the observation carries it, and the learner gets `penalty` instead of
the env's reward on a step that overdraws it; the cube records the env's reward. The loss is PPO's clipped
surrogate; no multiplier, no cost critic (crax trains it with its plain PPO). Per iterate: the mean remaining
budget the iterate's steps paid from (`saute_budget`, cost units) and the share of its steps whose reward was
replaced (`saute_penalty_share`).
"""

from __future__ import annotations

from train.onpolicy.algorithms.base import Algorithm
from train.onpolicy.algorithms.ppo import no_update, policy_loss
from train.onpolicy.saute import SAUTE_INFO, saute_adapter

PPO_SAUTE = Algorithm(name="ppo_saute", title="PPO-Saute", config_section="ppo_saute", policy_loss=policy_loss,
                      multiplier_update=no_update, diagnostics=SAUTE_INFO, uses_multiplier=False, cost_critic=False,
                      env_adapter=saute_adapter)
