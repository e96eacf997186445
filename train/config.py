"""Training configuration: `TrainConfig` and its per-algorithm sections, the smoke sizes (no jax here).

TOML files and stored configs are read by `train.overrides`; `train.variants` names a run's formulation.

Defaults are the hyperparameter table of the paper (appendix A.1): 5e8 env steps, T = 2000, 2048 envs,
unroll 8, batch 1024, 32 minibatches, 6 SGD epochs, lr 5e-4, gamma 0.99, GAE 0.95, clip 0.3, entropy
5e-3, reward scaling 0.1, observation normalisation; PPO-Lag lambda_lr 3.0, lambda_0 0; FOCOPS nu_0 0.1,
nu_lr 1, nu_max 100, temperature 1.5, KL threshold 0.02; P3O kappa_0 0.01, x1.1, kappa_max 50. The three
algorithms beyond the paper take crax-bench's own values (its CLI, `crax/training/config.py`, which agrees
with its `train()` keyword defaults for these): PPO-PID kp 10, ki 0.01, kd 0.01, integral clip 1, lambda
clip 1e6, derivative EMA 0.95, lambda_0 0; PPO-Saute penalty -1, budget observation normalised, budget
clipped to [0, 3d]; CRPO eta 0.

The formulation options default to what crax-bench's own trainers do (the code that produced the paper's
numbers): `reset = "replay"`, `advantage = "brax"`, the cost advantage normalised for PPO-Lag only,
`p3o.violation = "previous_update"`, `focops.loss = "crax"`. The alternatives (fresh layouts at every
reset, textbook GAE, normalised cost advantages, the per-minibatch P3O gap, the FOCOPS paper's per-state
loss) are this project's earlier behaviour; `train.variants.LEGACY_OPTIONS` lists them and `variant_label`
names a run's choice (docs/training.md explains each difference). One documented exception: PPO-Saute's budget
is undiscounted (gamma_b = 1) and restarts at d every episode by default, since crax's choice (gamma_b = the
discount, the budget reset only at a termination) does not enforce the undiscounted episodic bound the
metrics measure; crax's choice is the option `ppo_saute.budget_discount = 0.99, reset_budget = "termination"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from cube.errors import CubeError
from train.multipliers import PidConfig
from train.offpolicy.config import OffPolicySection
from train.tasks import TASK_SPECS

TASKS: dict[str, str] = {label: spec.env for label, spec in TASK_SPECS.items()}
"""Every trainable cube task label -> its crax-bench env name (`train.tasks` has the levels)."""


RESETS = ("replay", "fresh")
"""`TrainConfig.reset` choices (first: crax's)."""
ADVANTAGES = ("brax", "gae")
"""`TrainConfig.advantage` choices (first: crax's)."""
P3O_VIOLATIONS = ("previous_update", "minibatch")
"""`P3OConfig.violation` choices (first: crax's)."""
FOCOPS_LOSSES = ("crax", "crax_stop_gradient", "paper")
"""`FocopsConfig.loss` choices (first: crax's)."""
SAUTE_RESETS = ("episode", "termination")
"""`SauteConfig.reset_budget` choices (first: this project's default; second: crax's)."""


@dataclass(frozen=True)
class LagrangeConfig:
    """PPO-Lag: lambda <- relu(lambda + lr * (mean per-step cost - d/T)) once per update."""

    lr: float = 3.0
    init: float = 0.0
    normalize_cost_advantage: bool = True
    """Normalise the cost advantage per minibatch like the reward advantage (crax: yes for PPO-Lag)."""


@dataclass(frozen=True)
class P3OConfig:
    """P3O: kappa x `increase` on violation (<= kappa_max), else x `decay` (>= kappa_init)."""

    kappa_init: float = 0.01
    increase: float = 1.1
    decay: float = 0.9
    kappa_max: float = 50.0
    normalize_cost_advantage: bool = False
    """Normalise the cost advantage per minibatch (crax: no, P3O keeps its raw scale)."""
    violation: str = "previous_update"
    """J_c - d/T in the penalty: "previous_update" (crax: the previous update's batch mean per-step cost,
    0 before the first update, plus crax's gradient-free 0.1 relu(violation) term) or "minibatch" (the
    current minibatch's mean per-step cost)."""


@dataclass(frozen=True)
class FocopsConfig:
    """FOCOPS: nu <- clip(nu + nu_lr * (mean per-step cost - d/T), 0, nu_max); temperature lambda, KL mask eta."""

    nu_init: float = 0.1
    nu_lr: float = 1.0
    nu_max: float = 100.0
    temperature: float = 1.5
    kl_threshold: float = 0.02
    normalize_cost_advantage: bool = False
    """Normalise the cost advantage per minibatch (crax: no, FOCOPS keeps its raw scale)."""
    loss: str = "crax"
    """"crax": -mean(rho (A_r - nu A_c) / (1 + nu)) / temperature, times 1 if the minibatch's approximate KL
    mean((rho - 1) - log rho) <= kl_threshold else kl_threshold / KL, the factor differentiated;
    "crax_stop_gradient": the same with the factor held constant in the gradient (crax's differentiated factor
    can drive the KL up without bound: docs/training.md); "paper": the FOCOPS paper's per-state
    mean[(KL_s - rho (A_r - nu A_c) / ((1 + nu) temperature)) 1[KL_s <= kl_threshold]]."""


@dataclass(frozen=True)
class PpoPidConfig(PidConfig):
    """PPO-PID (Stooke et al. 2020, as crax-bench's `ppo_pid` trains it): PPO-Lag's loss, lambda from the PID
    controller (`train.multipliers.PidConfig`, SAC-PID's too) once per update on the error v = batch mean
    per-step cost - d/T. Defaults: crax's (CLI and `train()`)."""

    normalize_cost_advantage: bool = True
    """Normalise the cost advantage per minibatch (crax: yes, PPO-Lag's loss)."""


@dataclass(frozen=True)
class SauteConfig:
    """PPO-Saute (Sootla et al. 2022): the remaining budget b (b_0 = d) is appended to the observation, after
    each step b <- (b - c) / budget_discount, and the learner's reward is `penalty` on a step whose new budget
    is below 0; plain PPO on top. The cube records the env's reward, not this shaped one."""

    budget_discount: float = 1.0
    """gamma_b. 1 (default) enforces the undiscounted episodic bound; crax uses the discount (0.99), under
    which the budget grows back by 1% per safe step and the episodic bound is not enforced."""
    penalty: float = -1.0
    """The learner's reward on a step that overdraws the budget (before reward_scaling; crax: -1)."""
    clip_budget: bool = True
    """Clip the budget to [0, 3d] after each step (crax: yes; with a budget of 0 each further costly step is
    penalised). False: the Saute paper's unclipped budget (once it is overdrawn, every later step is)."""
    normalize_budget_obs: bool = True
    """The observed budget is clip(b / d, 0, 2) (crax: yes), else b."""
    reset_budget: str = "episode"
    """"episode": every episode starts with b = d (the Saute definition). "termination" (crax's training):
    b is reset only when the env terminates; at a time-limit restart it carries on from the last episode,
    while the first observation shows a full budget (crax restores the first observation, not the budget)."""


@dataclass(frozen=True)
class CrpoConfig:
    """CRPO (Xu et al. 2021, as crax-bench's `crpo` trains it): each update takes a reward step (PPO's clipped
    surrogate on A_r) if the previous update's batch mean per-step cost was <= d/T + eta, else a cost step
    (the clipped surrogate on -A_c); the first update is a reward step. Both critics always train."""

    eta: float = 0.0
    """Tolerance on the per-step cost (crax: 0)."""
    normalize_cost_advantage: bool = True
    """Normalise the cost advantage per minibatch (crax: yes)."""


@dataclass(frozen=True)
class TrainConfig:
    """Shared PPO-core settings (units: env steps, episodes, plain floats).

    One update collects `batch_size * num_minibatches / num_envs` unrolls of `unroll_length` steps from
    every env (brax semantics), then runs `num_epochs` passes of `num_minibatches` SGD steps. An iterate
    is the cycle in which every env completes one episode of `episode_length` steps.
    """

    total_env_steps: int = 500_000_000
    episode_length: int = 2000
    num_envs: int = 2048
    unroll_length: int = 8
    batch_size: int = 1024
    num_minibatches: int = 32
    num_epochs: int = 6
    learning_rate: float = 5e-4
    discount: float = 0.99
    gae_lambda: float = 0.95
    clip_epsilon: float = 0.3
    entropy_cost: float = 5e-3
    reward_scaling: float = 0.1
    normalize_observations: bool = True
    normalize_advantage: bool = True
    """Normalise the reward advantage per minibatch (and the cost advantage where the algorithm's
    `normalize_cost_advantage` says so)."""
    reset: str = "replay"
    """What an env that finished an episode starts from: "replay" (crax's AutoResetWrapper: its own first
    state again, so training sees num_envs fixed layouts; for CRAX envs the physics state and observation
    are restored, `info` carries on, exactly as crax does) or "fresh" (a new reset from a new key: a new
    layout every episode). Evaluation always resets fresh from the evaluation keys."""
    advantage: str = "brax"
    """Advantage estimator: "brax" (crax/brax's compute_gae: A_t = r_t + gamma v_{t+1} - V(s_t), v the
    lambda-return) or "gae" (textbook GAE, sum of discounted TD errors). Value targets are the same."""
    max_grad_norm: float = 0.0
    """Global gradient-norm clip; 0 disables it (the paper's table sets none)."""
    policy_hidden: tuple[int, ...] = (32, 32, 32, 32)
    value_hidden: tuple[int, ...] = (256, 256, 256, 256, 256)
    cost_value_hidden: tuple[int, ...] = (256, 256, 256, 256, 256)
    eval_episodes: int = 100
    eval_every: int = 0
    """Evaluate (and checkpoint) every k iterates; 0 = only after the final iterate."""
    ppo_lag: LagrangeConfig = field(default_factory=LagrangeConfig)
    p3o: P3OConfig = field(default_factory=P3OConfig)
    focops: FocopsConfig = field(default_factory=FocopsConfig)
    ppo_pid: PpoPidConfig = field(default_factory=PpoPidConfig)
    ppo_saute: SauteConfig = field(default_factory=SauteConfig)
    crpo: CrpoConfig = field(default_factory=CrpoConfig)
    offpolicy: OffPolicySection = field(default_factory=OffPolicySection)
    """SAC, SAC-Lag, SAC-PID: their own fields (`train.offpolicy.config.OffPolicySection`, every default's
    source there); the shared ones (num_envs, learning_rate, batch_size, ...) are this config's."""

    @property
    def unrolls_per_update(self) -> int:
        """Unrolls of `unroll_length` steps collected from every env per update."""
        return self.batch_size * self.num_minibatches // self.num_envs

    @property
    def steps_per_update(self) -> int:
        """Env steps per env per update."""
        return self.unrolls_per_update * self.unroll_length

    @property
    def n_iterates(self) -> int:
        """Iterates J = floor(total_env_steps / (num_envs * episode_length)), at least 1."""
        return max(1, self.total_env_steps // (self.num_envs * self.episode_length))

    @property
    def episodes_per_env_per_iterate(self) -> int:
        """Most episodes one env completes in an iterate (1 unless an update outlasts an episode)."""
        return math.ceil(self.steps_per_update / self.episode_length)

    def validate(self) -> None:
        """Raise CubeError (one line) for inconsistent sizes."""
        positive = ("total_env_steps", "episode_length", "num_envs", "unroll_length", "batch_size",
                    "num_minibatches", "num_epochs", "eval_episodes")
        for name in positive:
            if getattr(self, name) <= 0:
                raise CubeError(f"config: {name} must be > 0, got {getattr(self, name)}")
        if (self.batch_size * self.num_minibatches) % self.num_envs:
            raise CubeError(
                f"config: batch_size*num_minibatches ({self.batch_size * self.num_minibatches}) must be a "
                f"multiple of num_envs ({self.num_envs})")
        if self.eval_every < 0:
            raise CubeError("config: eval_every must be >= 0")
        if not 0 < self.discount <= 1 or not 0 <= self.gae_lambda <= 1:
            raise CubeError("config: discount must be in (0, 1] and gae_lambda in [0, 1]")
        for name, value, allowed in (("reset", self.reset, RESETS), ("advantage", self.advantage, ADVANTAGES),
                                     ("p3o.violation", self.p3o.violation, P3O_VIOLATIONS),
                                     ("focops.loss", self.focops.loss, FOCOPS_LOSSES),
                                     ("ppo_saute.reset_budget", self.ppo_saute.reset_budget, SAUTE_RESETS)):
            if value not in allowed:
                raise CubeError(f"config: {name} must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")
        if not 0 < self.ppo_saute.budget_discount <= 1:
            raise CubeError(f"config: ppo_saute.budget_discount must be in (0, 1], "
                            f"got {self.ppo_saute.budget_discount}")
        pid = self.ppo_pid
        if pid.integral_clip < 0 or pid.lambda_max <= 0 or not 0 <= pid.derivative_ema <= 1:
            raise CubeError("config: ppo_pid needs integral_clip >= 0, lambda_max > 0 and derivative_ema in [0, 1]")


SMOKE = TrainConfig(
    total_env_steps=3 * 16 * 64,
    episode_length=64,
    num_envs=16,
    unroll_length=8,
    batch_size=16,
    num_minibatches=4,
    num_epochs=2,
    policy_hidden=(32, 32),
    value_hidden=(64, 64),
    cost_value_hidden=(64, 64),
    eval_episodes=8,
    offpolicy=OffPolicySection(grad_updates_per_step=2, max_replay_size=2048, hidden=(32, 32)),
)
"""Tiny sizes for the smoke preset (`train.sweep.PRESETS`): 3 iterates of 16 episodes of 64 steps, 8 eval episodes."""
