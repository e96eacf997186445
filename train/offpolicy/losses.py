"""Pure loss and update functions of SAC, SAC-Lag and SAC-PID, term by term as crax computes them.

Sources: `crax/training/agents/sac/losses.py` (alpha, critic, actor), `sac_lag/losses.py` (cost critic,
Lagrange-penalised actor), `sac_lag/train.py` (soft target update, step order); the lambda updates (SAC-Lag's
capped Lagrange step, SAC-PID's PID) are the floor's `train.multipliers`. Shapes: a batch has one leading
axis `[B]` (obs `[B, O]`, action `[B, A]`, scalars `[B]`); Q networks return `[B, n_critics]`. Costs are per
step; `d_step` = d / T.
Every loss takes its own PRNG key (one action sample per transition, `normal(key, [B, A])`, as crax).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from train.envs import PyTree
from train.nets import Normalizer
from train.offpolicy.networks import SACNetworks


class Transition(NamedTuple):
    """One stored env step (leading axes `[...]`): obs `[..., O]`, the squashed action the env received
    `[..., A]`, reward, cost, discount = 1 - done (done: terminated or time limit), truncation (time limit
    without termination; such steps carry no learning signal), next obs `[..., O]` (the true next state's)."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    cost: jax.Array
    discount: jax.Array
    truncation: jax.Array
    next_obs: jax.Array


def _sample(nets: SACNetworks, normalizer: Normalizer, policy_params: PyTree, obs: jax.Array,
            key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(squashed action `[B, A]`, its log-density `[B]`) of one reparameterised policy sample per row."""
    dist = nets.parametric_action_distribution
    logits = nets.policy_network.apply(normalizer, policy_params, obs)
    raw = dist.create_dist(logits).sample(key)
    return dist.postprocess(raw), dist.log_prob(logits, raw)


def alpha_loss(log_alpha: jax.Array, policy_params: PyTree, normalizer: Normalizer, obs: jax.Array, key: jax.Array,
               nets: SACNetworks, target_entropy: float) -> jax.Array:
    """Temperature loss mean(alpha * sg(-log pi(a|s) - target_entropy)), alpha = exp(log_alpha) (SAC eq. 18)."""
    _, log_prob = _sample(nets, normalizer, policy_params, obs, key)
    return jnp.mean(jnp.exp(log_alpha) * jax.lax.stop_gradient(-log_prob - target_entropy))


def critic_loss(q_params: PyTree, policy_params: PyTree, normalizer: Normalizer, target_q_params: PyTree,
                alpha: jax.Array, data: Transition, key: jax.Array, nets: SACNetworks, reward_scaling: float,
                discount: float) -> jax.Array:
    """Twin-Q soft Bellman loss 0.5 mean_{B, heads}(((Q_k(s, a) - y) (1 - trunc))^2),
    y = sg(r reward_scaling + discount_flag gamma (min_k Q'_k(s', a') - alpha log pi(a'|s'))), a' ~ pi(s')."""
    q_old = nets.q_network.apply(normalizer, q_params, data.obs, data.action)
    next_action, next_log_prob = _sample(nets, normalizer, policy_params, data.next_obs, key)
    next_q = nets.q_network.apply(normalizer, target_q_params, data.next_obs, next_action)
    next_v = jnp.min(next_q, axis=-1) - alpha * next_log_prob
    target = jax.lax.stop_gradient(data.reward * reward_scaling + data.discount * discount * next_v)
    err = (q_old - target[..., None]) * (1 - data.truncation)[..., None]
    return 0.5 * jnp.mean(jnp.square(err))


def cost_critic_loss(cost_q_params: PyTree, policy_params: PyTree, normalizer: Normalizer, target_cost_q_params: PyTree,
                     data: Transition, key: jax.Array, nets: SACNetworks, discount: float) -> jax.Array:
    """Cost twin-Q loss: as `critic_loss` with the per-step cost, unscaled, and no entropy term in the target
    (y = sg(c + discount_flag gamma min_k Qc'_k(s', a')), crax's CMDP convention)."""
    qc_old = nets.cost_q_network.apply(normalizer, cost_q_params, data.obs, data.action)
    next_action, _ = _sample(nets, normalizer, policy_params, data.next_obs, key)
    next_qc = nets.cost_q_network.apply(normalizer, target_cost_q_params, data.next_obs, next_action)
    target = jax.lax.stop_gradient(data.cost + data.discount * discount * jnp.min(next_qc, axis=-1))
    err = (qc_old - target[..., None]) * (1 - data.truncation)[..., None]
    return 0.5 * jnp.mean(jnp.square(err))


def actor_loss(policy_params: PyTree, normalizer: Normalizer, q_params: PyTree, cost_q_params: PyTree | None,
               alpha: jax.Array, lam: jax.Array, obs: jax.Array, key: jax.Array, nets: SACNetworks) -> jax.Array:
    """mean(alpha log pi(a|s) - min_k Q_k(s, a) + lambda min_k Qc_k(s, a)), a ~ pi(s) reparameterised.

    crax's SAC-Lag penalises the *smaller* of the two cost heads (as written in its losses); with
    `cost_q_params=None` (SAC) the cost term is left out and the cost Q not evaluated."""
    action, log_prob = _sample(nets, normalizer, policy_params, obs, key)
    min_q = jnp.min(nets.q_network.apply(normalizer, q_params, obs, action), axis=-1)
    loss = alpha * log_prob - min_q
    if cost_q_params is not None:
        loss = loss + lam * jnp.min(nets.cost_q_network.apply(normalizer, cost_q_params, obs, action), axis=-1)
    return jnp.mean(loss)


def soft_update(target: PyTree, online: PyTree, tau: float) -> PyTree:
    """Polyak averaging of every leaf: target (1 - tau) + online tau."""
    return jax.tree_util.tree_map(lambda x, y: x * (1 - tau) + y * tau, target, online)
