"""The paired evaluator of both families (brax's `training/acting.py` `Evaluator` serves PPO and SAC alike).

The paper's final-policy protocol: N episodes of T steps exploring (a policy sample per step) and N greedy
(the tanh-Gaussian mode) from the same N initial states, with the evaluation key `eval_key(seed, iterate)`,
which is the same for every algorithm, so rollouts pair across algorithms, modes and families. An episode's
sums stop at its termination (the env keeps stepping, unrecorded). Shapes: `[N]` per mode.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from train.envs import EnvFns, EnvState, PyTree
from train.nets import Normalizer, TanhGaussian
from train.rollout import EvalOut, strong_types, vectorize

EVAL_TAG = 0x5AFE
"""Folded into every evaluation key: evaluation streams never meet a training stream of the same seed."""

PolicyApply = Callable[[Normalizer, PyTree, jax.Array], jax.Array]
"""(normalizer, policy params, obs `[..., O]`) -> logits `[..., 2A]`."""
Evaluate = Callable[..., EvalOut]
"""`evaluate(params, normalizer, key, d_step=None) -> EvalOut`; `params.policy` the policy's parameters."""


def eval_key(seed: int, iterate: int) -> jax.Array:
    """Evaluation key of (seed, iterate): identical for every algorithm, so rollouts are paired."""
    return jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(EVAL_TAG), seed), iterate)


def make_evaluator(env_at: Callable[[jax.Array | None], EnvFns], policy_apply: PolicyApply, dist: TanhGaussian,
                   n_episodes: int, episode_length: int) -> Evaluate:
    """The paired evaluation of one family's policy (jittable, vmappable over runs).

    `env_at(bound)`: the task evaluated for bound d = d_step T (the env itself, or its adapter: PPO-Saute's
    budget observation; `bound` is None when `evaluate` gets no d_step). `policy_apply`, `dist`: the family's
    policy network and action distribution.
    """
    n, T = n_episodes, episode_length

    def evaluate(params: PyTree, normalizer: Normalizer, key: jax.Array, d_step: jax.Array | None = None) -> EvalOut:
        env = env_at(None if d_step is None else jnp.asarray(d_step, jnp.float32) * T)
        venv = vectorize(env)
        k_reset, k_act = jax.random.split(key)
        start = strong_types(venv.reset(jax.random.split(k_reset, n)))
        # expl rollouts in rows [0, N), greedy ones in [N, 2N): same initial states, one env trace
        start = jax.tree_util.tree_map(lambda x: jnp.concatenate([x, x]), start)
        greedy = (jnp.arange(2 * n) >= n)[:, None]

        Carry = tuple[EnvState, jax.Array, jax.Array, jax.Array]

        def body(c: Carry, k: jax.Array) -> tuple[Carry, None]:
            s, alive, r_sum, c_sum = c
            logits = policy_apply(normalizer, params.policy, venv.observe(s)[0])
            action = jnp.where(greedy, dist.mode(logits), dist.sample(logits, k))
            s = venv.step(s, action)
            _, r, cost, term = venv.observe(s)
            r_sum, c_sum = r_sum + alive * r, c_sum + alive * cost
            return (s, alive * (term < 0.5), r_sum, c_sum), None

        zero = jnp.zeros((2 * n,), jnp.float32)
        (_, _, r_sum, c_sum), _ = jax.lax.scan(body, (start, zero + 1.0, zero, zero), jax.random.split(k_act, T))
        return EvalOut(r_sum[:n], c_sum[:n], r_sum[n:], c_sum[n:])

    return evaluate
