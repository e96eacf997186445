"""The PPO core (brax/purejaxrl style) with the on-policy algorithms as switchable loss/update rules.

`make_train(config, env)` builds pure, jittable functions:
- `init(key, algo_id, multiplier0, d_step, algo_state0) -> TrainState`
- `iterate(state) -> (state, IterateOut)`: updates until every env has completed an episode; the
  completed episodes' undiscounted reward/cost sums come back in `[S, num_envs]` buffers (NaN = empty).
- `evaluate(params, normalizer, key, d_step) -> EvalOut`: the paired evaluator (`train.acting`).
The algorithm is a traced index: its policy loss and its multiplier/state update are `lax.switch` branches
built from the registry's on-policy records (`train.registry`), so one compile serves all algorithms and all
bounds and seeds of a task; a program built with `cost_critic=False` (PPO-only groups, as the runner does)
skips the cost critic's work, as crax's PPO has none. Every run carries its algorithm's small state vector
(`algo_state [STATE_SIZE]`: PPO-PID's PID terms, CRPO's regime) beside the multiplier. A program built with an
`adapter` trains on the adapted task (PPO-Saute: `train.onpolicy.saute`, the budget in the observation and the
shaped reward for the learner); the episode sums are always the env's own reward and cost.

Parameters start as crax's `ppo/train.py` starts them, from the same key derivation: the policy from
`key_policy`, the reward critic and the cost critic both from `key_value` (with equal hidden sizes V_c starts as
an exact copy of V_r).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from train.acting import Evaluate, make_evaluator
from train.algorithm import ONPOLICY
from train.config import TrainConfig
from train.envs import EnvFns, PyTree
from train.nets import Networks, Normalizer, make_networks, normalizer_init, normalizer_update
from train.onpolicy import losses as L
from train.onpolicy.algorithms.base import STATE_SIZE, Algorithm, EnvAdapter, LossInputs
from train.record import DIAGNOSTICS
from train.registry import algorithms
from train.rollout import (
    EpisodeBuffer,
    RolloutState,
    VecEnv,
    book_step,
    empty_buffer,
    initial_rollout,
    restart_pending,
    vectorize,
)

Metrics = dict[str, jax.Array]
"""Named scalar diagnostics."""
Payload = dict[str, PyTree]
"""An evaluation checkpoint (`checkpoint_payload`)."""


class Params(NamedTuple):
    """Network parameters: policy, reward critic, cost critic (flax param trees)."""

    policy: PyTree
    value: PyTree
    cost_value: PyTree


class TrainState(NamedTuple):
    """Everything the compiled loop carries. multiplier: lambda / kappa / nu (0 for PPO); d_step = d/T;
    last_violation: the previous update's batch mean per-step cost - d/T (0 before the first update);
    algo_state: the algorithm's own state `[STATE_SIZE]` (None only in the resume points of saferl
    versions before it existed, which the family upgrades)."""

    params: Params
    opt_state: PyTree
    normalizer: Normalizer
    multiplier: jax.Array
    d_step: jax.Array
    algo_id: jax.Array
    rollout: RolloutState
    key: jax.Array
    last_violation: jax.Array
    algo_state: jax.Array | None = None


class Transition(NamedTuple):
    """One env step of one env; old policy's Gaussian (loc, scale) kept for the closed-form KL. `reward` is the
    learner's reward (an adapted task's: PPO-Saute's budget-shaped one); `obs`/`next_obs` are the task's
    (PPO-Saute: with the observed budget); `info`: the adapter's per-step values by name (None without one)."""

    obs: jax.Array
    raw_action: jax.Array
    log_prob: jax.Array
    loc: jax.Array
    scale: jax.Array
    reward: jax.Array
    cost: jax.Array
    termination: jax.Array
    truncation: jax.Array
    next_obs: jax.Array
    info: dict[str, jax.Array] | None = None


class IterateOut(NamedTuple):
    """One iterate's output: episodes, number of updates, mean diagnostics over its updates, the algorithm
    state after the iterate and the mean over its updates of the state each update used (`[STATE_SIZE]`)."""

    episodes: EpisodeBuffer
    n_updates: jax.Array
    metrics: Metrics
    algo_state: jax.Array | None = None
    algo_state_mean: jax.Array | None = None


class LossContext(NamedTuple):
    """The run's scalars a minibatch loss needs: algorithm index, multiplier, d/T, the previous update's
    violation (batch mean per-step cost - d/T; 0 before the first update), the algorithm's state
    `[STATE_SIZE]` (None: zeros)."""

    algo_id: jax.Array
    multiplier: jax.Array
    d_step: jax.Array
    last_violation: jax.Array
    algo_state: jax.Array | None = None


Loss = Callable[[Params, Normalizer, Transition, LossContext, jax.Array], tuple[jax.Array, Metrics]]
"""`loss(params, normalizer, data, ctx, key) -> (total, diagnostics)`."""


@dataclasses.dataclass(frozen=True)
class Trainer:
    """Compiled-friendly functions of one (config, env) pair; see the module docstring."""

    config: TrainConfig
    env: EnvFns
    networks: Networks
    init: Callable[..., TrainState]
    iterate: Callable[[TrainState], tuple[TrainState, IterateOut]]
    evaluate: Evaluate
    template: Callable[[], Payload]
    slots: int
    loss: Loss
    """`make_loss(config, networks)`: the minibatch loss the SGD steps differentiate."""
    unroll: Callable[[TrainState, int], tuple[TrainState, Transition]]
    """`unroll(state, length)`: `length` env steps of every env with the current policy, no learning (the
    rollout every update collects); returns the advanced state and the transitions `[length, num_envs]`.
    `length` is static (jit with static_argnums=1). For tests and benches."""
    adapter: EnvAdapter | None = None
    obs_size: int = 0
    """The networks' input size (the task's: the env's, + 1 under PPO-Saute's adapter)."""


def on_policy_algorithms() -> tuple[Algorithm, ...]:
    """The registered on-policy records, in switch order."""
    return tuple(a for a in algorithms(ONPOLICY) if isinstance(a, Algorithm))


def make_loss(config: TrainConfig, nets: Networks, cost_critic: bool = True) -> Loss:
    """The minibatch loss `loss(params, normalizer, data, ctx, key) -> (total, diagnostics)`.

    data: a Transition with leading axes `[B, U]` (sequences of unroll_length steps, as crax's loss takes
    them); ctx: a LossContext. Total = policy loss (the algorithm's `lax.switch` branch) + both critics'
    losses - entropy_cost * entropy, crax's composition term by term (tests/test_train_parity.py).
    `cost_critic=False` (programs that only train PPO, like crax's PPO): the cost critic is neither
    evaluated nor trained (zero cost advantage, loss 0, its parameters stay as initialised).
    Diagnostics: the losses, the entropy, `approx_kl` = mean((rho - 1) - log rho) (the k3 sample estimate of
    KL(old || new), crax's FOCOPS estimator) and `clip_fraction` (share of |rho - 1| > clip_epsilon).
    """
    dist = nets.parametric_action_distribution
    estimator = L.ADVANTAGE_ESTIMATORS[config.advantage]
    records = on_policy_algorithms()

    def policy_loss(algo_id: jax.Array, x: LossInputs) -> jax.Array:
        return jax.lax.switch(algo_id, [lambda a=a: a.policy_loss(config, x) for a in records])

    def loss(params: Params, normalizer: Normalizer, data: Transition, ctx: LossContext,
             key: jax.Array) -> tuple[jax.Array, Metrics]:
        data = jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 0, 1), data)  # [U, B, ...]
        logits = nets.policy_network.apply(normalizer, params.policy, data.obs)
        values = nets.value_network.apply(normalizer, params.value, data.obs)
        last = data.next_obs[-1]
        boot = nets.value_network.apply(normalizer, params.value, last)
        vs, adv = estimator(data.reward * config.reward_scaling, values, boot, data.termination,
                            data.truncation, config.discount, config.gae_lambda)
        if cost_critic:
            cvalues = nets.cost_value_network.apply(normalizer, params.cost_value, data.obs)
            cboot = nets.cost_value_network.apply(normalizer, params.cost_value, last)
            cvs, cadv = estimator(data.cost, cvalues, cboot, data.termination, data.truncation, config.discount,
                                  config.gae_lambda)
        else:
            cvs = cvalues = cadv = jnp.zeros_like(values)
        if config.normalize_advantage:
            adv = L.normalize(adv)  # the cost advantage: per algorithm, see base.cost_advantage
        log_ratio = dist.log_prob(logits, data.raw_action) - data.log_prob
        ratio = jnp.exp(log_ratio)
        gauss = dist.create_dist(logits)
        kl = L.gaussian_kl(gauss.loc, gauss.scale, data.loc, data.scale)
        mean_cost = data.cost.mean()
        algo_state = jnp.zeros((STATE_SIZE,), jnp.float32) if ctx.algo_state is None else ctx.algo_state
        pl = policy_loss(ctx.algo_id, LossInputs(ratio.ravel(), log_ratio.ravel(), adv.ravel(), cadv.ravel(),
                                                 kl.ravel(), ctx.multiplier, mean_cost, ctx.d_step,
                                                 ctx.last_violation, algo_state))
        vl, cvl = L.value_loss(vs, values), L.value_loss(cvs, cvalues)
        entropy = jnp.mean(dist.entropy(logits, key))
        total = pl + vl + cvl - config.entropy_cost * entropy
        clip_frac = jnp.mean((jnp.abs(ratio - 1.0) > config.clip_epsilon).astype(jnp.float32))
        return total, {"policy_loss": pl, "value_loss": vl, "cost_value_loss": cvl, "entropy": entropy,
                       "approx_kl": L.approx_kl(ratio, log_ratio), "clip_fraction": clip_frac}

    return loss


def make_train(config: TrainConfig, env: EnvFns, axis_name: str | None = None, cost_critic: bool = True,
               adapter: EnvAdapter | None = None) -> Trainer:
    """Build the trainer's pure functions for `config` on `env` (call `jax.jit` on them).

    `axis_name`: name of a `jax.vmap` axis over runs the functions will be mapped over (vmapped groups).
    The "any env needs a reset" test is then taken over the whole group, so the reset stays a real
    branch instead of being computed every step for every run (values are identical either way).
    `cost_critic=False`: a program for PPO runs only, without the cost critic's work (see `make_loss`).
    `adapter`: the task the runs train on, `adapter(config, env, bound)` (PPO-Saute's record's
    `env_adapter`), built inside the compiled functions for each run's bound d = d_step T; its per-step info
    (`EnvFns.info_names`) is averaged into the diagnostics.
    """
    config.validate()

    def task(bound: jax.Array | None) -> EnvFns:
        return env if adapter is None else adapter(config, env, bound)

    shape = task(jnp.float32(1.0))  # sizes and names only
    obs_size, info_names = shape.obs_size, shape.info_names
    nets = make_networks(obs_size, env.action_size, config.policy_hidden, config.value_hidden,
                         config.cost_value_hidden, config.normalize_observations)
    dist = nets.parametric_action_distribution
    n, T = config.num_envs, config.episode_length
    slots = config.episodes_per_env_per_iterate + 1
    tx = optax.adam(config.learning_rate)
    if config.max_grad_norm > 0:
        tx = optax.chain(optax.clip_by_global_norm(config.max_grad_norm), tx)
    replay = config.reset == "replay"
    diagnostics = DIAGNOSTICS + info_names
    records = on_policy_algorithms()

    def init_params(key: jax.Array) -> Params:
        """crax's `key_policy, key_value, key_cost_value, key_encoder = split(global_key, 4)`; both critics from
        `key_value`, as crax initialises them."""
        k_policy, k_value, _, _ = jax.random.split(key, 4)
        return Params(nets.policy_network.init(k_policy), nets.value_network.init(k_value),
                      nets.cost_value_network.init(k_value))

    def init(key: jax.Array, algo_id: jax.Array, multiplier0: jax.Array, d_step: jax.Array,
             algo_state0: jax.Array | None = None) -> TrainState:
        global_key, local_key = jax.random.split(key)  # crax's seed derivation (process 0)
        k_loop, k_env, _ = jax.random.split(jax.random.fold_in(local_key, 0), 3)
        params = init_params(global_key)
        d_step = jnp.asarray(d_step, jnp.float32)
        rollout = initial_rollout(vectorize(task(d_step * T)), k_env, n, replay)
        algo_state = jnp.zeros((STATE_SIZE,), jnp.float32) if algo_state0 is None else algo_state0
        return TrainState(params, tx.init(params), normalizer_init(obs_size), jnp.asarray(multiplier0, jnp.float32),
                          d_step, jnp.asarray(algo_id, jnp.int32), rollout, k_loop, jnp.zeros((), jnp.float32),
                          jnp.asarray(algo_state, jnp.float32))

    def env_step(carry: tuple[RolloutState, EpisodeBuffer], key: jax.Array, policy_params: PyTree,
                 normalizer: Normalizer, venv: VecEnv) -> tuple[tuple[RolloutState, EpisodeBuffer], Transition]:
        ro, buf = carry
        k_act, k_reset = jax.random.split(key)
        env_state = restart_pending(venv, ro, k_reset, replay, axis_name)
        obs = venv.observe(env_state)[0]
        logits = nets.policy_network.apply(normalizer, policy_params, obs)
        gauss = dist.create_dist(logits)
        raw = gauss.sample(k_act)
        log_prob = dist.log_prob(logits, raw)
        env_state = venv.step(env_state, dist.postprocess(raw))
        next_obs, reward, cost, term = venv.observe(env_state)
        end = book_step(ro, buf, reward, cost, term, T, slots)
        learner_reward, info = (reward, None) if venv.shaping is None else venv.shaping(env_state)
        new_ro = RolloutState(env_state, end.done, end.t, end.ep_reward, end.ep_cost, ro.first)
        tr = Transition(obs, raw, log_prob, gauss.loc, gauss.scale, learner_reward, cost,
                        end.term.astype(jnp.float32), (end.time_up & ~end.term).astype(jnp.float32), next_obs, info)
        return (new_ro, end.buf), tr

    def algo_update(algo_id: jax.Array, mult: jax.Array, algo_state: jax.Array, mean_cost: jax.Array,
                    d_step: jax.Array) -> tuple[jax.Array, jax.Array]:
        def branch(a: Algorithm) -> Callable[[], tuple[jax.Array, jax.Array]]:
            def run() -> tuple[jax.Array, jax.Array]:
                m, st = a.step(config, mult, algo_state, mean_cost, d_step)
                return jnp.asarray(m, jnp.float32), jnp.asarray(st, jnp.float32)

            return run

        return jax.lax.switch(algo_id, [branch(a) for a in records])

    minibatch_loss = make_loss(config, nets, cost_critic)

    def loss_fn(params: Params, normalizer: Normalizer, data: Transition, state: TrainState,
                key: jax.Array) -> tuple[jax.Array, Metrics]:
        ctx = LossContext(state.algo_id, state.multiplier, state.d_step, state.last_violation, state.algo_state)
        return minibatch_loss(params, normalizer, data, ctx, key)

    grad_fn = jax.grad(loss_fn, has_aux=True)

    def sgd_step(carry: tuple[Params, PyTree], xs: tuple[Transition, jax.Array], normalizer: Normalizer,
                 state: TrainState) -> tuple[tuple[Params, PyTree], Metrics]:
        params, opt_state = carry
        mb, key = xs
        grads, mets = grad_fn(params, normalizer, mb, state, key)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), mets

    def sgd_epoch(carry: tuple[Params, PyTree], key: jax.Array, data: Transition, normalizer: Normalizer,
                  state: TrainState) -> tuple[tuple[Params, PyTree], Metrics]:
        k_perm, k_mb = jax.random.split(key)
        perm = jax.random.permutation(k_perm, data.obs.shape[0])
        mbs = jax.tree_util.tree_map(
            lambda x: x[perm].reshape((config.num_minibatches, config.batch_size) + x.shape[1:]), data)
        keys = jax.random.split(k_mb, config.num_minibatches)
        return jax.lax.scan(lambda c, xs: sgd_step(c, xs, normalizer, state), carry, (mbs, keys))

    def collect(state: TrainState, buf: EpisodeBuffer, key: jax.Array,
                shape: tuple[int, int]) -> tuple[RolloutState, EpisodeBuffer, Transition]:
        """`shape[0]` unrolls of `shape[1]` steps of every env: transitions `[K, U, n, ...]`."""
        step = jax.tree_util.Partial(env_step, policy_params=state.params.policy, normalizer=state.normalizer,
                                     venv=vectorize(task(state.d_step * T)))

        Carry = tuple[RolloutState, EpisodeBuffer]

        def unroll(carry: Carry, k: jax.Array) -> tuple[Carry, Transition]:
            return jax.lax.scan(step, carry, jax.random.split(k, shape[1]))

        (rollout, buf), data = jax.lax.scan(unroll, (state.rollout, buf), jax.random.split(key, shape[0]))
        return rollout, buf, data

    def update(state: TrainState, buf: EpisodeBuffer) -> tuple[TrainState, EpisodeBuffer, Metrics]:
        key, k_roll, k_sgd = jax.random.split(state.key, 3)
        rollout, buf, data = collect(state, buf, k_roll, (config.unrolls_per_update, config.unroll_length))
        # [K, U, n, ...] -> [K * n, U, ...]: sequences of unroll_length steps
        data = jax.tree_util.tree_map(
            lambda x: jnp.swapaxes(x, 1, 2).reshape((-1, config.unroll_length) + x.shape[3:]), data)
        normalizer = state.normalizer
        if config.normalize_observations:  # before the SGD epochs, as crax (iterate 0's ratios are far from 1)
            normalizer = normalizer_update(normalizer, data.obs)
        (params, opt_state), mets = jax.lax.scan(
            lambda c, k: sgd_epoch(c, k, data._replace(info=None), normalizer, state),
            (state.params, state.opt_state), jax.random.split(k_sgd, config.num_epochs))
        mets = jax.tree_util.tree_map(jnp.mean, mets)
        mean_cost = data.cost.mean()
        mets["mean_step_cost"] = mean_cost
        mets["mean_step_reward"] = data.reward.mean()
        mets.update({name: data.info[name].mean() for name in info_names})
        mult, algo_state = algo_update(state.algo_id, state.multiplier, state.algo_state, mean_cost, state.d_step)
        new = state._replace(params=params, opt_state=opt_state, normalizer=normalizer, multiplier=mult,
                             rollout=rollout, key=key, last_violation=mean_cost - state.d_step, algo_state=algo_state)
        return new, buf, mets

    max_updates = math.ceil(T / config.steps_per_update) + 1

    def iterate(state: TrainState) -> tuple[TrainState, IterateOut]:
        buf = empty_buffer(slots, n)
        msum = {k: jnp.zeros((), jnp.float32) for k in diagnostics}
        Carry = tuple[TrainState, EpisodeBuffer, jax.Array, Metrics, jax.Array]

        def cond(c: Carry) -> jax.Array:
            return (c[1].count.min() < 1) & (c[2] < max_updates)

        def body(c: Carry) -> Carry:
            st, b, k, ms, used = c
            used = used + st.algo_state  # the state this update trains with
            st, b, mets = update(st, b)
            return st, b, k + 1, {name: ms[name] + mets[name] for name in diagnostics}, used

        state, buf, k, msum, used = jax.lax.while_loop(
            cond, body, (state, buf, jnp.zeros((), jnp.int32), msum, jnp.zeros((STATE_SIZE,), jnp.float32)))
        kk = jnp.maximum(k, 1)
        metrics = {name: v / kk for name, v in msum.items()}
        return state, IterateOut(buf, k, metrics, state.algo_state, used / kk)

    def unroll_steps(state: TrainState, length: int) -> tuple[TrainState, Transition]:
        key, k_roll = jax.random.split(state.key)
        rollout, _, data = collect(state, empty_buffer(slots, n), k_roll, (1, length))
        return state._replace(rollout=rollout, key=key), jax.tree_util.tree_map(lambda x: x[0], data)

    evaluate = make_evaluator(task, nets.policy_network.apply, dist, config.eval_episodes, T)

    def template() -> Payload:
        params = jax.eval_shape(init_params, jax.random.PRNGKey(0))
        params = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), params)
        return checkpoint_payload(params, normalizer_init(obs_size), jnp.zeros((), jnp.float32))

    return Trainer(config, env, nets, init, iterate, evaluate, template, slots, minibatch_loss, unroll_steps,
                   adapter, obs_size)


def checkpoint_payload(params: Params, normalizer: Normalizer, multiplier: jax.Array) -> Payload:
    """The checkpointed pytree: policy, both critics, observation normaliser, multiplier."""
    return {"policy": params.policy, "value": params.value, "cost_value": params.cost_value,
            "normalizer": {"count": normalizer.count, "mean": normalizer.mean,
                           "summed_variance": normalizer.summed_variance, "std": normalizer.std},
            "multiplier": multiplier}
