"""Pure loss and update functions of the PPO core and its algorithms (jax); the Lagrange and PID rules are the
floor's (`train.multipliers`), PPO-Saute's budget step its adapter's (`train.onpolicy.saute`).

Shapes: time-major `[T, B]` for GAE inputs; the policy losses take flat per-sample arrays `[N]`.
All costs are per-step (undiscounted episodic cost / T is the per-step scale); `d_step = d / T`.
`train.onpolicy.algorithms` binds each algorithm's policy loss and multiplier update to the config's settings.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def gae(rewards: jax.Array, values: jax.Array, bootstrap_value: jax.Array, termination: jax.Array,
        truncation: jax.Array, discount: float, lam: float) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation over a time-major unroll.

    rewards, values, termination, truncation: `[T, B]` (termination/truncation in {0, 1}: the env
    terminated / was cut at the time limit after step t); bootstrap_value: `[B]`, V(s_T).
    delta_t = r_t + gamma (1 - term_t) V(s_{t+1}) - V(s_t), zeroed where truncated (the next state
    belongs to a new episode, so the step carries no learning signal); A_t = delta_t + gamma lam
    (1 - done_t) A_{t+1}. Returns (value targets A + V, advantages A), both `[T, B]`, gradients stopped.
    """
    next_values = jnp.concatenate([values[1:], bootstrap_value[None]], axis=0)
    keep = 1.0 - truncation
    deltas = (rewards + discount * (1.0 - termination) * next_values - values) * keep
    cont = discount * lam * (1.0 - termination) * keep

    def step(acc: jax.Array, xs: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        delta, c = xs
        acc = delta + c * acc
        return acc, acc

    _, adv = jax.lax.scan(step, jnp.zeros_like(bootstrap_value), (deltas, cont), reverse=True)
    return jax.lax.stop_gradient(adv + values), jax.lax.stop_gradient(adv)


def brax_gae(rewards: jax.Array, values: jax.Array, bootstrap_value: jax.Array, termination: jax.Array,
             truncation: jax.Array, discount: float, lam: float) -> tuple[jax.Array, jax.Array]:
    """brax's (and crax's) `compute_gae`: the same value targets v (lambda-returns) as `gae`, advantages
    A_t = (r_t + gamma (1 - term_t) v_{t+1} - V(s_t)) (1 - trunc_t), with v_T = V(s_T) (the bootstrap).

    Same arguments and returns as `gae` (value targets, advantages; gradients stopped).
    """
    vs, _ = gae(rewards, values, bootstrap_value, termination, truncation, discount, lam)
    vs_next = jnp.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    adv = (rewards + discount * (1.0 - termination) * vs_next - values) * (1.0 - truncation)
    return vs, jax.lax.stop_gradient(adv)


ADVANTAGE_ESTIMATORS = {"brax": brax_gae, "gae": gae}
"""`TrainConfig.advantage` -> estimator."""


def normalize(x: jax.Array) -> jax.Array:
    """(x - mean) / (std + 1e-8) over all elements."""
    return (x - x.mean()) / (x.std() + 1e-8)


def clipped_surrogate(ratio: jax.Array, adv: jax.Array, eps: float) -> jax.Array:
    """PPO loss -mean(min(rho A, clip(rho, 1-eps, 1+eps) A)) (scalar; lower is better)."""
    return -jnp.mean(jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - eps, 1 + eps) * adv))


def ppo_policy_loss(ratio: jax.Array, adv_r: jax.Array, eps: float) -> jax.Array:
    """PPO: clipped surrogate on the reward advantage."""
    return clipped_surrogate(ratio, adv_r, eps)


def ppo_lag_policy_loss(ratio: jax.Array, adv_r: jax.Array, adv_c: jax.Array, lam: jax.Array,
                        eps: float) -> jax.Array:
    """PPO-Lag: clipped surrogate on A_r - lambda A_c."""
    return clipped_surrogate(ratio, adv_r - lam * adv_c, eps)


def p3o_policy_loss(ratio: jax.Array, adv_r: jax.Array, adv_c: jax.Array, kappa: jax.Array,
                    mean_cost: jax.Array, d_step: jax.Array, eps: float, discount: float) -> jax.Array:
    """P3O: clipped reward surrogate + kappa relu(L_c + (1 - gamma)(J_c - d/T)).

    L_c = mean(max(rho A_c, clip(rho) A_c)) is the pessimistic clipped cost surrogate; J_c is the
    mean per-step cost of the batch and d_step = d/T (same per-step scale).
    """
    cost_surr = jnp.mean(jnp.maximum(ratio * adv_c, jnp.clip(ratio, 1 - eps, 1 + eps) * adv_c))
    penalty = jax.nn.relu(cost_surr + (1.0 - discount) * (mean_cost - d_step))
    return clipped_surrogate(ratio, adv_r, eps) + kappa * penalty


def p3o_crax_policy_loss(ratio: jax.Array, adv_r: jax.Array, adv_c: jax.Array, kappa: jax.Array,
                         violation: jax.Array, eps: float, discount: float) -> jax.Array:
    """P3O as crax trains it: clipped reward surrogate + kappa (relu(L_c + (1 - gamma) v) + 0.1 relu(v)).

    v = `violation`: the previous update's batch mean per-step cost minus d/T (a constant here, so the
    0.1 relu(v) term moves the loss value, not its gradient); L_c as in `p3o_policy_loss`.
    """
    cost_surr = jnp.mean(jnp.maximum(ratio * adv_c, jnp.clip(ratio, 1 - eps, 1 + eps) * adv_c))
    penalty = jax.nn.relu(cost_surr + (1.0 - discount) * violation) + 0.1 * jax.nn.relu(violation)
    return clipped_surrogate(ratio, adv_r, eps) + kappa * penalty


def focops_crax_policy_loss(ratio: jax.Array, log_ratio: jax.Array, adv_r: jax.Array, adv_c: jax.Array,
                            nu: jax.Array, temperature: float, kl_threshold: float,
                            differentiate_kl: bool = True) -> jax.Array:
    """FOCOPS as crax trains it: -mean(rho (A_r - nu A_c) / (1 + nu)) / temperature times a batch factor,
    1 if the minibatch's approximate KL k = mean((rho - 1) - log rho) <= kl_threshold, else
    kl_threshold / (k + 1e-8); no KL term.

    differentiate_kl: crax differentiates the factor, so while the surrogate -mean(rho A) is positive and
    k > kl_threshold the gradient raises k without bound (docs/training.md, "FOCOPS's KL factor"); False
    holds the factor constant (`jax.lax.stop_gradient`): the same value, only the surrogate's gradient."""
    adv = (adv_r - nu * adv_c) / (1.0 + nu)
    kl = approx_kl(ratio, log_ratio)
    if not differentiate_kl:
        kl = jax.lax.stop_gradient(kl)
    factor = jnp.where(kl <= kl_threshold, 1.0, kl_threshold / (kl + 1e-8))
    return -jnp.mean(ratio * adv) / temperature * factor


def focops_policy_loss(ratio: jax.Array, adv_r: jax.Array, adv_c: jax.Array, kl: jax.Array,
                       nu: jax.Array, temperature: float, kl_threshold: float) -> jax.Array:
    """FOCOPS: mean[(KL_s - ratio (A_r - nu A_c) / ((1 + nu) lambda)) * 1[KL_s <= eta]].

    kl: per-sample KL(pi_theta || pi_old) at each state `[N]`; the mask is not differentiated.
    """
    mask = jax.lax.stop_gradient((kl <= kl_threshold).astype(ratio.dtype))
    adv = (adv_r - nu * adv_c) / (1.0 + nu)
    return jnp.mean((kl - ratio * adv / temperature) * mask)


def gaussian_kl(loc_p: jax.Array, scale_p: jax.Array, loc_q: jax.Array, scale_q: jax.Array) -> jax.Array:
    """KL(p || q) of diagonal Gaussians, summed over the last axis (`[..., A]` -> `[...]`).

    Tanh is a bijection, so this is also the KL of the tanh-squashed policies.
    """
    var_p, var_q = scale_p**2, scale_q**2
    kl = jnp.log(scale_q / scale_p) + (var_p + (loc_p - loc_q) ** 2) / (2.0 * var_q) - 0.5
    return kl.sum(axis=-1)


def approx_kl(ratio: jax.Array, log_ratio: jax.Array) -> jax.Array:
    """mean((rho - 1) - log rho) over all samples: the k3 sample estimate of KL(old || new) (never negative;
    crax's FOCOPS estimator), the `approx_kl` diagnostic."""
    return jnp.mean((ratio - 1.0) - log_ratio)


def value_loss(targets: jax.Array, values: jax.Array) -> jax.Array:
    """Critic loss 0.25 mean((targets - values)^2) (brax's 0.5 * 0.5 convention)."""
    return 0.25 * jnp.mean((targets - values) ** 2)


def p3o_kappa_update(kappa: jax.Array, mean_cost: jax.Array, d_step: jax.Array, kappa_init: float,
                     increase: float, decay: float, kappa_max: float) -> jax.Array:
    """P3O: kappa * increase (<= kappa_max) if mean per-step cost > d/T, else kappa * decay (>= kappa_init)."""
    return jnp.where(mean_cost > d_step, jnp.minimum(kappa * increase, kappa_max),
                     jnp.maximum(kappa * decay, kappa_init))


def focops_nu_update(nu: jax.Array, mean_cost: jax.Array, d_step: jax.Array, lr: float,
                     nu_max: float) -> jax.Array:
    """FOCOPS: nu <- clip(nu + lr (mean per-step cost - d/T), 0, nu_max)."""
    return jnp.clip(nu + lr * (mean_cost - d_step), 0.0, nu_max)


def crpo_policy_loss(ratio: jax.Array, adv_r: jax.Array, adv_c: jax.Array, regime: jax.Array,
                     eps: float) -> jax.Array:
    """CRPO: the clipped surrogate on A_r (a reward step, regime > 0.5) or on -A_c (a cost step)."""
    return jnp.where(regime > 0.5, clipped_surrogate(ratio, adv_r, eps), clipped_surrogate(ratio, -adv_c, eps))


def crpo_regime(mean_cost: jax.Array, d_step: jax.Array, eta: float) -> jax.Array:
    """CRPO's next regime: 1 (reward step) if mean per-step cost - d/T <= eta, else 0 (cost step)."""
    return jnp.where(mean_cost - d_step > eta, 0.0, 1.0)
