"""Training configuration: documented frozen dataclasses, TOML overrides, the smoke sizes (no jax here).

Defaults are the hyperparameter table of the paper (appendix A.1): 5e8 env steps, T = 2000, 2048 envs,
unroll 8, batch 1024, 32 minibatches, 6 SGD epochs, lr 5e-4, gamma 0.99, GAE 0.95, clip 0.3, entropy
5e-3, reward scaling 0.1, observation normalisation; PPO-Lag lambda_lr 3.0, lambda_0 0; FOCOPS nu_0 0.1,
nu_lr 1, nu_max 100, temperature 1.5, KL threshold 0.02; P3O kappa_0 0.01, x1.1, kappa_max 50.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cube.errors import CubeError

TASKS: dict[str, str] = {
    "goal": "safe_goal_point",
    "circle": "safe_circle_point",
    "push": "safe_push_point",
    "button": "safe_button_point",
}
"""Short cube task name -> CRAX environment name (all Level 1)."""


@dataclass(frozen=True)
class LagrangeConfig:
    """PPO-Lag: lambda <- relu(lambda + lr * (mean per-step cost - d/T)) once per update."""

    lr: float = 3.0
    init: float = 0.0


@dataclass(frozen=True)
class P3OConfig:
    """P3O: kappa x `increase` on violation (<= kappa_max), else x `decay` (>= kappa_init)."""

    kappa_init: float = 0.01
    increase: float = 1.1
    decay: float = 0.9
    kappa_max: float = 50.0


@dataclass(frozen=True)
class FocopsConfig:
    """FOCOPS: nu <- clip(nu + nu_lr * (mean per-step cost - d/T), 0, nu_max); temperature lambda, KL mask eta."""

    nu_init: float = 0.1
    nu_lr: float = 1.0
    nu_max: float = 100.0
    temperature: float = 1.5
    kl_threshold: float = 0.02


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


def _coerce(name: str, value: Any, default: Any) -> Any:
    if isinstance(default, tuple):
        if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
            raise CubeError(f"config: {name} must be a list of integers")
        return tuple(value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise CubeError(f"config: {name} must be true or false")
        return value
    if isinstance(default, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise CubeError(f"config: {name} must be an integer")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CubeError(f"config: {name} must be a number")
    return float(value)


def _apply(obj: Any, overrides: dict[str, Any], prefix: str = "") -> Any:
    known = {f.name: f for f in dataclasses.fields(obj)}
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        name = f"{prefix}{key}"
        if key not in known:
            raise CubeError(f"config: unknown key '{name}' (known: {', '.join(sorted(known))})")
        default = getattr(obj, key)
        if dataclasses.is_dataclass(default):
            if not isinstance(value, dict):
                raise CubeError(f"config: '{name}' must be a table")
            changes[key] = _apply(default, value, prefix=f"{name}.")
        else:
            changes[key] = _coerce(name, value, default)
    return dataclasses.replace(obj, **changes)


def with_overrides(config: TrainConfig, overrides: dict[str, Any]) -> TrainConfig:
    """Return `config` with nested `overrides` applied (unknown keys -> CubeError)."""
    new = _apply(config, overrides)
    new.validate()
    return new


NON_CONFIG_TABLES = ("cluster",)
"""TOML tables that are not TrainConfig overrides (`[cluster]` is read by `train.executors`)."""


def load_toml(path: str | Path, base: TrainConfig | None = None) -> TrainConfig:
    """Load a TOML file of overrides (top-level TrainConfig keys, tables [ppo_lag], [p3o], [focops]).

    The `[cluster]` table (executor settings, see docs/cluster.md) is ignored here.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise CubeError(f"config file not found: {p}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CubeError(f"config file {p} is not valid TOML: {exc}") from None
    for name in NON_CONFIG_TABLES:
        data.pop(name, None)
    return with_overrides(base or TrainConfig(), data)


def config_to_dict(config: TrainConfig) -> dict[str, Any]:
    """Plain JSON-able dict of the config (tuples become lists)."""
    return dataclasses.asdict(config)


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
)
"""Tiny sizes for the smoke preset (`train.sweep.PRESETS`): 3 iterates of 16 episodes of 64 steps, 8 eval episodes."""
