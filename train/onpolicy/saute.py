"""PPO-Saute's task: the env with a safety budget (Sootla et al. 2022), as an env adapter (OmniSafe's
`adapter/saute_adapter.py`); the PPO core trains on it unchanged.

`saute_adapter(config, env, bound)` wraps one env (`train.envs.EnvFns`) for a run of bound d = `bound` (cost
units; a traced scalar, so the core builds the adapter inside its compiled functions). Its state carries the
remaining budget b: every episode of a reset starts with b = d; after each step b <- (b - c) / budget_discount
(`saute_step`), clipped to [0, 3d] by default; a step whose new budget is below 0 overdraws it and the learner's
reward (`shaping`) is the penalty instead of the env's. The observation is the env's with the budget appended
(`saute_observation`: clip(b / d, 0, 2) by default), so obs_size grows by 1. `observe` keeps returning the env's
own reward and cost: the cube records those. `reset_budget = "termination"` (crax's training) resets b only when
the env terminates: a restart at the time limit (`restore` under reset = "replay", `keep` under "fresh")
carries b on, while the first observation shows a full budget (crax restores the first observation, not b).

Importing this module needs no jax (the registry imports it); its functions import jax when first called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import jax

    from train.config import TrainConfig
    from train.envs import EnvFns, EnvState

SAUTE_INFO = ("saute_budget", "saute_penalty_share")
"""The adapter's per-step info (`shaping`): the budget the step paid from (cost units) and 1 where the step
overdrew it (0 elsewhere); the core averages them over an update as per-iterate diagnostics."""


class SauteState(NamedTuple):
    """One env's state on the Saute task: the env's own state (`inner`) and, as float32 scalars, the budget the
    next step pays from, the budget the observation shows, the budget the last step paid from, the learner's
    reward and overdrawn flag of the last step; `live`: False only in a placeholder state the core builds
    before the first reset (reset = "fresh"), whose budget is no budget."""

    inner: EnvState
    budget: jax.Array
    shown: jax.Array
    paid_from: jax.Array
    learner_reward: jax.Array
    overdrawn: jax.Array
    live: jax.Array


def saute_step(budget: jax.Array, cost: jax.Array, reward: jax.Array, bound: jax.Array, budget_discount: float,
               penalty: float, clip_budget: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One Saute step: the budget after paying `cost`, and the learner's reward.

    b' = (b - c) / budget_discount; the step overdraws the budget iff b' < 0, and then the learner's reward is
    `penalty` instead of `reward`; with `clip_budget` the stored budget is clip(b', 0, 3 d) (crax's
    SauteWrapper). All arrays in cost units, shapes broadcast (`[n]` per env). Returns (b', reward, overdrawn
    in {0, 1}).
    """
    import jax.numpy as jnp

    candidate = (budget - cost) / budget_discount
    over = candidate < 0.0
    new = jnp.clip(candidate, 0.0, 3.0 * bound) if clip_budget else candidate
    return new, jnp.where(over, penalty, reward), over.astype(reward.dtype)


def saute_observation(obs: jax.Array, budget: jax.Array, bound: jax.Array, normalize: bool) -> jax.Array:
    """The observation with the budget appended (`[..., O]` -> `[..., O + 1]`): clip(b / d, 0, 2) if
    `normalize` (crax's SauteWrapper), else b."""
    import jax.numpy as jnp

    b = jnp.clip(budget / bound, 0.0, 2.0) if normalize else budget
    return jnp.concatenate([obs, jnp.asarray(b, obs.dtype)[..., None]], axis=-1)


def saute_adapter(config: TrainConfig, env: EnvFns, bound: jax.Array | None) -> EnvFns:
    """`env` as PPO-Saute's task for bound d = `bound` (see the module docstring; `config.ppo_saute`)."""
    import jax.numpy as jnp

    if bound is None:
        raise ValueError("the Saute task needs the run's bound d")
    sc = config.ppo_saute
    carry_on = sc.reset_budget == "termination"

    def full(inner: EnvState, budget: jax.Array) -> SauteState:
        zero = jnp.zeros((), jnp.float32)
        b = jnp.asarray(bound, jnp.float32)
        return SauteState(inner, jnp.asarray(budget, jnp.float32), b, b, zero, zero, jnp.ones((), bool))

    def reset(key: jax.Array) -> SauteState:
        return full(env.reset(key), bound)

    def step(state: SauteState, action: jax.Array) -> SauteState:
        inner = env.step(state.inner, action)
        _, reward, cost, term = env.observe(inner)
        budget, learner_reward, over = saute_step(state.budget, cost, reward, bound, sc.budget_discount, sc.penalty,
                                                  sc.clip_budget)
        if carry_on:  # crax resets the budget when the env terminates
            budget = jnp.where(term > 0.5, bound, budget)
        return SauteState(inner, budget, budget, state.budget, learner_reward, over, state.live)

    def observe(state: SauteState) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        obs, reward, cost, term = env.observe(state.inner)
        return saute_observation(obs, state.shown, bound, sc.normalize_budget_obs), reward, cost, term

    def restore(first: SauteState, state: SauteState) -> SauteState:
        inner = env.restore(first.inner, state.inner) if env.restore is not None else first.inner
        return full(inner, state.budget if carry_on else bound)

    def keep(new: SauteState, old: SauteState) -> SauteState:
        return new._replace(budget=jnp.where(old.live, old.budget, new.budget)) if carry_on else new

    def shaping(state: SauteState) -> tuple[jax.Array, dict[str, jax.Array]]:
        return state.learner_reward, {"saute_budget": state.paid_from, "saute_penalty_share": state.overdrawn}

    return env._replace(reset=reset, step=step, observe=observe, restore=restore, keep=keep, shaping=shaping,
                        info_names=SAUTE_INFO, obs_size=env.obs_size + 1)
