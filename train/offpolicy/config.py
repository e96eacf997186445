"""Off-policy training configuration (SAC, SAC-Lag, SAC-PID): a documented frozen dataclass (no jax here).

Every default is what crax-bench 0.1.0 trains with when run the way its paper's runs were made, i.e. its CLI
(`crax/training/config.py`, which passes every flag it knows to `train()` through `filter_kwargs_for_fn`);
where crax's `train()` keyword default, its CLI and common SAC practice differ, the comment beside the
field names all three and says which one is taken. The short version:

- CLI over `train()`: `num_envs` 2048 (train() 1), `learning_rate` 5e-4 (1e-4), `batch_size` 1024 (256),
  `reward_scaling` 0.1 (1.0), `normalize_observations` true (false), `max_replay_size` 1e6 (SAC: None =
  num_timesteps; SAC-Lag: 1e7; SAC-PID: None, which crashes in `int(None)` unless passed). The CLI shares
  these flags with the PPO family, so they equal `TrainConfig`'s (the paper's table).
- Values crax hard-codes (not settable there) are fields here with crax's value: the temperature's Adam
  learning rate 3e-4, initial log alpha 0 (alpha = 1), target entropy -0.5 |A| (SAC paper: -|A|), the
  networks (policy and twin Q, 256 x 2, ReLU, LeCun-uniform: `make_sac_networks`' defaults).
- crax's choices that common practice does not share are kept, and noted: 32 gradient steps per actor step
  of all `num_envs` envs (so 32 / 2048 updates per env step), no warm-up (`min_replay_size` 0), SAC-Lag's
  lambda updated at every gradient step from the minibatch with lr / T and capped at lambda_max = 2,
  SAC-PID's gains applied per gradient step without the 1/T.

An iterate is `steps_per_iterate` env steps (0, the default: `num_envs * episode_length`, one episode of
every env, so J = total_env_steps / (num_envs T) as for the on-policy trainers and runs of both families
share one cube). `replay_bytes` and `check_replay_memory` size the buffer before anything is allocated.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from cube.errors import CubeError
from train.multipliers import PidConfig

RESETS = ("replay", "fresh")
"""`OffPolicyConfig.reset` choices (first: crax's AutoResetWrapper)."""

OFFPOLICY_DIAGNOSTICS = ("critic_loss", "cost_critic_loss", "actor_loss", "alpha_loss", "alpha", "batch_cost",
                         "mean_step_cost", "mean_step_reward", "replay_size")
"""Per-iterate diagnostics the off-policy core returns (`core.OffPolicyIterateOut.metrics`; here so that jax-free
code such as `train.record` can name them): the four losses and `batch_cost` (the minibatch mean per-step cost
lambda is updated from) are means over the iterate's gradient steps (0 if none); `alpha` is the temperature after
the iterate; `mean_step_cost`/`mean_step_reward` are means over its env steps; `replay_size` the buffer's
transitions after it. lambda is the state's `multiplier`."""

REPLAY_FLOATS_EXTRA = 4
"""Float32 scalars stored per transition besides obs, next obs and action: reward, cost, discount, truncation
(crax's flattened transition holds the same 2 obs + action + 4)."""


@dataclass(frozen=True)
class SacLagConfig:
    """SAC-Lag: lambda <- min(relu(lambda + lr / T (c - d/T)), lambda_max) at every gradient step, c the
    minibatch's mean per-step cost (crax `sac_lag/train.py`)."""

    lr: float = 0.01
    """crax train() `lagrangian_lr` 0.01 = CLI `--lagrangian_lr` 0.01 (per-episode scale: applied as lr / T per
    gradient step). Taken: 0.01 (both agree)."""
    init: float = 0.0
    """train() `initial_lambda` 0.0 = CLI `--initial_lambda` 0.0."""
    lambda_max: float = 2.0
    """train() `lambda_max` 2.0 = CLI `--lambda_max` 2.0: a hard cap on enforcement (a cost Q of order 1/(1 -
    gamma) times the per-step cost can outweigh 2x the reward Q). Taken: 2.0, as crax."""


@dataclass(frozen=True)
class OffPolicyConfig:
    """Settings of the off-policy core (units: env steps, transitions, plain floats).

    One actor step steps all `num_envs` envs once and inserts their `num_envs` transitions; then, once the
    buffer held `min_replay_size` transitions before the step, `grad_updates_per_step` gradient steps follow,
    each on `batch_size` transitions sampled uniformly with replacement (crax samples them all at once).
    """

    total_env_steps: int = 500_000_000
    """CLI `--num_timesteps` 5e8 (train() has no default); the paper's budget, as `TrainConfig`."""
    episode_length: int = 2000
    """The paper's T (CLI default: the task's own, 1000 or 2000), as `TrainConfig`."""
    num_envs: int = 2048
    """CLI `--num_envs` 2048; train() 1; common SAC practice 1. Taken: 2048 (crax's runs)."""
    learning_rate: float = 5e-4
    """Adam lr of policy, Q and cost Q. CLI 5e-4; train() 1e-4; SAC paper 3e-4. Taken: 5e-4 (CLI)."""
    alpha_learning_rate: float = 3e-4
    """Adam lr of log alpha: hard-coded 3e-4 in crax (= SAC paper)."""
    init_log_alpha: float = 0.0
    """Initial log temperature: hard-coded 0 in crax (alpha = 1; SAC paper implementations: 0 or log 0.1)."""
    target_entropy_scale: float = 0.5
    """Target entropy = -scale * action_size: crax hard-codes -0.5 |A| (brax's); SAC paper -|A|. Taken: 0.5."""
    discount: float = 0.99
    """train() `discounting` 0.99 = CLI = SAC paper."""
    batch_size: int = 1024
    """Transitions per gradient step. CLI 1024 (shared with PPO); train() 256; SAC paper 256. Taken: 1024."""
    grad_updates_per_step: int = 32
    """Gradient steps per actor step (of all num_envs envs). train() 32 = CLI 32; SAC paper 1 per env step."""
    reward_scaling: float = 0.1
    """Reward multiplier in the critic target. CLI 0.1 (shared with PPO); train() 1.0; SAC paper 1 (v1: 5-20).
    Taken: 0.1 (CLI). The cost critic is never scaled (crax)."""
    normalize_observations: bool = True
    """Running mean/std of observations. CLI true; train() false. Taken: true (CLI)."""
    tau: float = 0.005
    """Soft target update target <- (1 - tau) target + tau online, every gradient step: train() = CLI = paper."""
    min_replay_size: int = 0
    """Transitions in the buffer before learning starts. train() 0 = CLI 0; common practice ~1e4 (often with
    random actions). Taken: 0 (crax): learning starts at the first actor step."""
    max_replay_size: int = 1_000_000
    """Replay capacity in transitions (FIFO). CLI 1e6; SAC train() None (= num_timesteps, 5e8 transitions:
    ~260 GB at goal's obs size); SAC-Lag train() 1e7; SAC-PID train() None (crashes in int(None)); SAC paper
    1e6. Taken: 1e6 (CLI)."""
    hidden: tuple[int, ...] = (256, 256)
    """Hidden sizes of the policy and each Q network (ReLU): crax's `make_sac_networks` default; the CLI sets
    none for SAC; SAC paper 256 x 2."""
    steps_per_iterate: int = 0
    """Env steps per iterate (a multiple of num_envs); 0 = num_envs * episode_length (4,096,000 at the
    defaults: one episode of every env, the on-policy iterate, so both families share J). crax logs every
    `training_metrics_steps` = 1e6 env steps instead."""
    reset: str = "replay"
    """What a finished env restarts from: "replay" (crax's AutoResetWrapper: its first state) or "fresh"."""
    eval_episodes: int = 100
    """Paired expl/greedy evaluation episodes at evaluation iterates (as `TrainConfig`)."""
    eval_every: int = 0
    """Evaluate (and checkpoint) every k iterates; 0 = only after the final iterate (as `TrainConfig`)."""
    sac_lag: SacLagConfig = field(default_factory=SacLagConfig)
    sac_pid: PidConfig = field(default_factory=PidConfig)
    """SAC-PID's controller (`train.multipliers.PidConfig`, PPO-PID's config), applied at every gradient step with
    v = c - d/T, c the minibatch mean cost (crax `sac_pid/train.py`; its gains per gradient step without 1/T)."""

    # ------------------------------------------------------------------------------ derived sizes
    @property
    def iterate_env_steps(self) -> int:
        """Env steps of one iterate (`steps_per_iterate`, or num_envs * episode_length when 0)."""
        return self.steps_per_iterate or self.num_envs * self.episode_length

    @property
    def actor_steps_per_iterate(self) -> int:
        """Actor steps (all envs stepped once) per iterate."""
        return self.iterate_env_steps // self.num_envs

    @property
    def grad_steps_per_iterate(self) -> int:
        """Gradient steps per iterate once learning has started."""
        return self.actor_steps_per_iterate * self.grad_updates_per_step

    @property
    def sample_size(self) -> int:
        """Transitions sampled per actor step (batch_size * grad_updates_per_step, one draw as crax)."""
        return self.batch_size * self.grad_updates_per_step

    @property
    def n_iterates(self) -> int:
        """Iterates J = floor(total_env_steps / iterate_env_steps), at least 1."""
        return max(1, self.total_env_steps // self.iterate_env_steps)

    @property
    def episodes_per_env_per_iterate(self) -> int:
        """Most episodes one env completes in an iterate without early termination (an episode that straddles
        two iterates is written in the one it ends in)."""
        return math.ceil(self.actor_steps_per_iterate / self.episode_length)

    def validate(self) -> None:
        """Raise CubeError (one line, with the numbers) for inconsistent settings, a batch larger than the
        replay buffer among them. Memory is checked by `check_replay_memory` (it needs the env's sizes)."""
        positive = ("total_env_steps", "episode_length", "num_envs", "batch_size", "grad_updates_per_step",
                    "max_replay_size", "eval_episodes")
        for name in positive:
            if getattr(self, name) <= 0:
                raise CubeError(f"config: {name} must be > 0, got {getattr(self, name)}")
        for name in ("min_replay_size", "steps_per_iterate", "eval_every"):
            if getattr(self, name) < 0:
                raise CubeError(f"config: {name} must be >= 0, got {getattr(self, name)}")
        if self.iterate_env_steps % self.num_envs:
            raise CubeError(f"config: steps_per_iterate ({self.steps_per_iterate}) must be a multiple of num_envs "
                            f"({self.num_envs})")
        cap = self.max_replay_size
        if self.batch_size > cap:
            raise CubeError(f"config: batch_size ({self.batch_size}) exceeds the replay buffer (max_replay_size "
                            f"{cap}); lower batch_size or raise max_replay_size")
        if self.num_envs > cap:
            raise CubeError(f"config: one actor step inserts num_envs ({self.num_envs}) transitions, more than the "
                            f"replay buffer holds (max_replay_size {cap})")
        if self.min_replay_size > cap:
            raise CubeError(f"config: min_replay_size ({self.min_replay_size}) exceeds max_replay_size ({cap}): "
                            "learning would never start")
        if not 0 < self.discount <= 1 or not 0 < self.tau <= 1:
            raise CubeError(f"config: discount and tau must be in (0, 1], got {self.discount} and {self.tau}")
        if not self.hidden or any(h <= 0 for h in self.hidden):
            raise CubeError(f"config: hidden must be a non-empty list of positive sizes, got {list(self.hidden)}")
        if self.reset not in RESETS:
            raise CubeError(f"config: reset must be one of {', '.join(repr(r) for r in RESETS)}, got {self.reset!r}")
        if self.sac_lag.lambda_max < 0 or self.sac_pid.lambda_max < 0:
            raise CubeError("config: sac_lag.lambda_max and sac_pid.lambda_max must be >= 0")
        if not 0 <= self.sac_pid.derivative_ema <= 1:
            raise CubeError(f"config: sac_pid.derivative_ema must be in [0, 1], got {self.sac_pid.derivative_ema}")


@dataclass(frozen=True)
class OffPolicySection:
    """The `[offpolicy]` table of `train.config.TrainConfig`: the off-policy fields `TrainConfig` does not share
    (`SHARED_FIELDS` are taken from it), each defaulting to `OffPolicyConfig`'s (whose docstrings give every
    default's source: crax's `train()`, its CLI, the SAC paper). An iterate stays `TrainConfig`'s (num_envs x
    episode_length env steps), so runs of both families share one cube's iterate axis."""

    grad_updates_per_step: int = OffPolicyConfig.grad_updates_per_step
    """Gradient steps per actor step of all envs (crax 32; so 32 / num_envs per env step)."""
    max_replay_size: int = OffPolicyConfig.max_replay_size
    """Replay capacity, transitions per run (crax CLI 1e6); sized against memory before training."""
    min_replay_size: int = OffPolicyConfig.min_replay_size
    """Transitions before learning starts (crax 0)."""
    tau: float = OffPolicyConfig.tau
    """Polyak rate of the target networks per gradient step (crax = SAC paper 0.005)."""
    alpha_learning_rate: float = OffPolicyConfig.alpha_learning_rate
    """Adam lr of log alpha (crax hard-codes 3e-4)."""
    init_log_alpha: float = OffPolicyConfig.init_log_alpha
    """Initial log temperature (crax hard-codes 0: alpha = 1)."""
    target_entropy_scale: float = OffPolicyConfig.target_entropy_scale
    """Target entropy -scale |A| (crax hard-codes 0.5)."""
    hidden: tuple[int, ...] = OffPolicyConfig.hidden
    """Hidden sizes of the policy and each Q network (crax `make_sac_networks`: 256 x 2)."""
    sac_lag: SacLagConfig = field(default_factory=SacLagConfig)
    """SAC-Lag's lambda rule (crax: lr 0.01 / T per gradient step, init 0, lambda_max 2)."""
    sac_pid: PidConfig = field(default_factory=PidConfig)
    """SAC-PID's controller (crax: kp 10, ki 0.01, kd 0.01, integral clip 1, lambda_max 1e6, derivative EMA 0.95;
    the names `lambda_clip` and `deriv_ema_beta` of earlier versions are read too)."""


SHARED_FIELDS = ("total_env_steps", "episode_length", "num_envs", "learning_rate", "discount", "batch_size",
                 "reward_scaling", "normalize_observations", "reset", "eval_episodes", "eval_every")
"""Fields with the same name and meaning in `train.config.TrainConfig`: crax's CLI passes one flag to every
trainer for each of them, so a sweep that sets them sets them for both families (`from_train_config`)."""


def from_train_config(train_config: Any, **overrides: Any) -> OffPolicyConfig:
    """An OffPolicyConfig whose `SHARED_FIELDS` are taken from `train_config` (a TrainConfig or any object with
    those attributes; missing ones keep the default) and the fields of its `offpolicy` table
    (`OffPolicySection`) if it has one, then `overrides` applied (validated)."""
    shared = {name: getattr(train_config, name) for name in SHARED_FIELDS if hasattr(train_config, name)}
    section = getattr(train_config, "offpolicy", None)
    if section is not None:  # TrainConfig's [offpolicy] table
        shared.update({f.name: getattr(section, f.name) for f in dataclasses.fields(section)})
    config = dataclasses.replace(OffPolicyConfig(), **{**shared, **overrides})
    config.validate()
    return config


# ------------------------------------------------------------------------------------------ memory
def replay_transition_bytes(obs_size: int, action_size: int) -> int:
    """Bytes of one stored transition: float32 obs, next obs, action, reward, cost, discount, truncation."""
    return 4 * (2 * obs_size + action_size + REPLAY_FLOATS_EXTRA)


def replay_bytes(config: OffPolicyConfig, obs_size: int, action_size: int) -> int:
    """Bytes of one run's replay buffer (allocated whole at init, as crax's)."""
    return config.max_replay_size * replay_transition_bytes(obs_size, action_size)


def run_replay_bytes(config: OffPolicyConfig, obs_size: int, action_size: int) -> int:
    """Replay bytes one run needs on the device: the buffer plus one actor step's sampled transitions."""
    return (config.max_replay_size + config.sample_size) * replay_transition_bytes(obs_size, action_size)


def fmt_bytes(n: float) -> str:
    """Human size: '1.5 GiB', '12.0 MiB', '3.0 KiB'."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1024:.1f} KiB"


def check_replay_memory(config: OffPolicyConfig, obs_size: int, action_size: int, n_runs: int,
                        budget: tuple[int, str]) -> int:
    """Refuse (one-line CubeError with the numbers) a group of `n_runs` whose replay buffers and sampled
    batches do not fit `budget` = (bytes, where); returns the bytes needed. Computed from sizes only, before
    anything is allocated."""
    per_run = run_replay_bytes(config, obs_size, action_size)
    need = n_runs * per_run
    limit, where = budget
    if need > limit:
        fit = limit // per_run
        hint = f"at most {fit} runs per group fit" if fit >= 1 else "lower max_replay_size"
        raise CubeError(
            f"replay buffer does not fit: {n_runs} run(s) x ({config.max_replay_size:,} + {config.sample_size:,} "
            f"sampled) transitions x {replay_transition_bytes(obs_size, action_size)} B = {fmt_bytes(need)}, but "
            f"{fmt_bytes(limit)} of {where} are available; {hint}")
    return need
