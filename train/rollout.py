"""What both families' rollouts share (jax): the per-env rollout state, the episode book and the restarts.

Both cores step `num_envs` envs with their policy and keep, per env, the running episode sums; an episode
ends when the env terminates or at T steps (`book_step` writes its undiscounted reward and cost sums into
the env's next slot of an `EpisodeBuffer [S, n]`), and a finished env restarts before its next step
(`restart_pending`: with `reset = "replay"` from its first state, as brax's AutoResetWrapper; with
`"fresh"` from a new reset). Shapes: `n` envs, `S` slots per env and iterate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, TypeVar

import jax
import jax.numpy as jnp

from train.envs import EnvFns, EnvState, PyTree

T = TypeVar("T")


class RolloutState(NamedTuple):
    """Batched env state plus per-env flags and episode accumulators (`[n]` each).

    `pending` marks envs whose episode ended; they restart before their next step: with `reset =
    "replay"` from `first` (each env's state after the initial reset, crax's AutoResetWrapper), with
    `reset = "fresh"` from a new reset with a fresh key (`first` is None; at init every env is pending,
    so no reset is compiled outside the loop).
    """

    env_state: EnvState
    pending: jax.Array
    t: jax.Array
    ep_reward: jax.Array
    ep_cost: jax.Array
    first: EnvState | None = None


class EpisodeBuffer(NamedTuple):
    """Completed-episode sums of one iterate: reward/cost `[S, n]` (NaN = empty), count `[n]`."""

    reward: jax.Array
    cost: jax.Array
    count: jax.Array


class StepEnd(NamedTuple):
    """One env step's episode bookkeeping, each `[n]`: why episodes ended (bool), and the rollout's counters
    after the step (steps into the episode, running reward/cost sums; 0 where an episode ended)."""

    buf: EpisodeBuffer
    term: jax.Array
    time_up: jax.Array
    done: jax.Array
    t: jax.Array
    ep_reward: jax.Array
    ep_cost: jax.Array


class EvalOut(NamedTuple):
    """Undiscounted episodic sums `[N]` for exploring and greedy rollouts from the same initial states."""

    expl_reward: jax.Array
    expl_cost: jax.Array
    greedy_reward: jax.Array
    greedy_cost: jax.Array


class VecEnv(NamedTuple):
    """An `EnvFns` mapped over a leading env axis (`vectorize`); `restore` defaults to the first state,
    `keep` and `shaping` stay None where the env has none."""

    reset: Callable[[jax.Array], EnvState]
    step: Callable[[EnvState, jax.Array], EnvState]
    observe: Callable[[EnvState], tuple[jax.Array, jax.Array, jax.Array, jax.Array]]
    restore: Callable[[EnvState, EnvState], EnvState]
    keep: Callable[[EnvState, EnvState], EnvState] | None
    shaping: Callable[[EnvState], tuple[jax.Array, dict[str, jax.Array]]] | None


def vectorize(env: EnvFns) -> VecEnv:
    """`env`'s functions vmapped over envs."""
    restore = jax.vmap(env.restore) if env.restore is not None else (lambda first, state: first)
    return VecEnv(jax.vmap(env.reset), jax.vmap(env.step), jax.vmap(env.observe), restore,
                  jax.vmap(env.keep) if env.keep is not None else None,
                  jax.vmap(env.shaping) if env.shaping is not None else None)


def strong_types(tree: T) -> T:
    """Drop weak types (env resets produce some) so a compiled loop's carry types never change (and a restored
    state compiles the same)."""
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype=jnp.asarray(x).dtype), tree)


def where_done(done: jax.Array, new: PyTree, old: PyTree) -> PyTree:
    """Per env, `new` where `done [n]` else `old` (pytrees with a leading env axis)."""
    def sel(a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), a, b)

    return jax.tree_util.tree_map(sel, new, old)


def initial_rollout(venv: VecEnv, key: jax.Array, n: int, replay: bool) -> RolloutState:
    """The rollout state of `n` envs before their first step: under `replay` each env's first state (its layout
    for the whole run), from `split(key, n)`; else placeholder zeros, every env pending (reset in the loop)."""
    zeros = jnp.zeros((n,), jnp.float32)
    if replay:
        first = strong_types(venv.reset(jax.random.split(key, n)))
        return RolloutState(first, jnp.zeros((n,), bool), jnp.zeros((n,), jnp.int32), zeros, zeros, first)
    shapes = jax.eval_shape(venv.reset, jax.random.split(key, n))
    env_state = jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)
    return RolloutState(env_state, jnp.ones((n,), bool), jnp.zeros((n,), jnp.int32), zeros, zeros)


def restart_pending(venv: VecEnv, ro: RolloutState, key: jax.Array, replay: bool,
                    axis_name: str | None = None) -> EnvState:
    """The env states `[n, ...]` to step from: the pending envs restarted (see the module docstring), the others
    as they are. The restart is a `lax.cond` branch taken when any env (of the whole vmapped group of runs
    `axis_name`, so the branch stays unbatched) is pending; values are identical either way."""
    n = ro.pending.shape[0]

    def restart(state: EnvState) -> EnvState:
        if replay:
            return where_done(ro.pending, venv.restore(ro.first, state), state)
        fresh = strong_types(venv.reset(jax.random.split(key, n)))
        return where_done(ro.pending, fresh if venv.keep is None else venv.keep(fresh, state), state)

    any_pending = ro.pending.any()
    if axis_name is not None:
        any_pending = jax.lax.psum(any_pending.astype(jnp.int32), axis_name) > 0
    return jax.lax.cond(any_pending, restart, lambda s: s, ro.env_state)


def empty_buffer(slots: int, n: int) -> EpisodeBuffer:
    """An episode buffer of `slots` empty slots per env (NaN sums, zero counts)."""
    nan = jnp.full((slots, n), jnp.nan, jnp.float32)
    return EpisodeBuffer(nan, nan, jnp.zeros((n,), jnp.int32))


def book_step(ro: RolloutState, buf: EpisodeBuffer, reward: jax.Array, cost: jax.Array, term: jax.Array,
              T: int, slots: int) -> StepEnd:
    """Add one step's reward and cost `[n]` to the running episode sums and write every episode that ended
    (terminated, `term` > 0.5, or at T steps) into its env's next slot of `buf` (the last of `slots` when full);
    the on- and off-policy cores share it, so both record episodes alike."""
    term = term > 0.5
    t = ro.t + 1
    time_up = t >= T
    done = term | time_up
    ep_r, ep_c = ro.ep_reward + reward, ro.ep_cost + cost
    slot, idx = jnp.minimum(buf.count, slots - 1), jnp.arange(reward.shape[0])
    buf = EpisodeBuffer(buf.reward.at[slot, idx].set(jnp.where(done, ep_r, buf.reward[slot, idx])),
                        buf.cost.at[slot, idx].set(jnp.where(done, ep_c, buf.cost[slot, idx])),
                        buf.count + done.astype(jnp.int32))
    zero = jnp.zeros_like(ep_r)
    return StepEnd(buf, term, time_up, done, jnp.where(done, 0, t), jnp.where(done, zero, ep_r),
                   jnp.where(done, zero, ep_c))
