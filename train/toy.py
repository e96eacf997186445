"""A tiny pure-JAX constrained task for tests: reward and cost pull the same way.

One action a in [-1, 1]; every step pays reward (1 + a) / 2 and cost (1 + a) / 2, so an unconstrained
learner drives a -> 1 and the episodic cost -> T, while a constrained learner must keep the mean
per-step cost at d / T, i.e. a = 2 d / T - 1. Observation: [sin, cos] of the step phase, a bias 1 and
a noise value. Never terminates (the trainer cuts episodes at T). Compiles in about a second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from train.config import TrainConfig
from train.envs import EnvFns

if TYPE_CHECKING:
    import jax


TOY_BOUND = 8.0
"""The toy's cost bound d: a = -0.5 holds it exactly."""
TOY_CONFIG = TrainConfig(total_env_steps=400 * 64 * 32, episode_length=32, num_envs=64, unroll_length=8,
                         batch_size=64, num_minibatches=4, num_epochs=4, learning_rate=1e-3, reward_scaling=1.0,
                         policy_hidden=(16, 16), value_hidden=(32, 32), cost_value_hidden=(32, 32), eval_episodes=16)
"""400 iterates of 64 episodes: the tests' and `bench/focops_kl.py`'s training run on the toy."""


class ToyState(NamedTuple):
    """State of one toy env: step counter, observation, last reward/cost, key."""

    t: jax.Array
    obs: jax.Array
    reward: jax.Array
    cost: jax.Array
    key: jax.Array


def make_toy_env(period: int = 16) -> EnvFns:
    """The toy task (obs size 4, action size 1)."""
    import jax
    import jax.numpy as jnp

    def _obs(t: jax.Array, key: jax.Array) -> jax.Array:
        phase = 2.0 * jnp.pi * t / period
        noise = jax.random.normal(key, ())
        return jnp.stack([jnp.sin(phase), jnp.cos(phase), jnp.ones(()), noise]).astype(jnp.float32)

    def reset(key: jax.Array) -> ToyState:
        k_obs, k_next = jax.random.split(key)
        t = jax.random.randint(key, (), 0, period)
        zero = jnp.zeros((), jnp.float32)
        return ToyState(t=t, obs=_obs(t, k_obs), reward=zero, cost=zero, key=k_next)

    def step(state: ToyState, action: jax.Array) -> ToyState:
        k_obs, k_next = jax.random.split(state.key)
        a = jnp.clip(action[0], -1.0, 1.0)
        value = (1.0 + a) / 2.0
        t = state.t + 1
        return ToyState(t=t, obs=_obs(t, k_obs), reward=value, cost=value, key=k_next)

    def observe(state: ToyState) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        return state.obs, state.reward, state.cost, jnp.zeros((), jnp.float32)

    return EnvFns(reset=reset, step=step, observe=observe, obs_size=4, action_size=1, name="toy")
