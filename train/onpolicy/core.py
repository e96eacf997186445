"""The PPO core (brax/purejaxrl style) with the algorithms as switchable loss/update rules.

`make_train(config, env)` builds pure, jittable functions:
- `init(key, algo_id, multiplier0, d_step, algo_state0) -> TrainState`
- `iterate(state) -> (state, IterateOut)`: updates until every env has completed an episode; the
  completed episodes' undiscounted reward/cost sums come back in `[S, num_envs]` buffers (NaN = empty).
- `evaluate(params, normalizer, key, d_step) -> EvalOut`: N episodes of T steps, exploring and greedy (the
  tanh-Gaussian mode) from the same N initial states.
The algorithm is a traced index: its policy loss and its multiplier/state update are `lax.switch` branches
built from `train.algorithms.ALGORITHMS`, so one compile serves all algorithms and all bounds and seeds of
a task; a program built with `cost_critic=False` (PPO-only groups, as the runner does) skips the cost
critic's work, as crax's PPO has none. Every run carries its algorithm's small state vector (`algo_state`:
PPO-PID's PID terms, CRPO's regime) beside the multiplier. A program built with `budget=True` (PPO-Saute)
keeps each env's remaining safety budget, appends it to the observation and hands the learner the
budget-shaped reward; the episode sums are the env's own reward and cost.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from train import losses as L
from train.algorithms import ALGORITHMS, STATE_SIZE, LossInputs
from train.algorithms.ppo_saute import DIAGNOSTICS as BUDGET_DIAGNOSTICS
from train.config import TrainConfig
from train.envs import EnvFns
from train.record import DIAGNOSTICS

EVAL_TAG = 0x5AFE


class Params(NamedTuple):
    """Network parameters: policy, reward critic, cost critic (flax param trees)."""

    policy: Any
    value: Any
    cost_value: Any


class RolloutState(NamedTuple):
    """Batched env state plus per-env flags and episode accumulators (`[n]` each).

    `pending` marks envs whose episode ended; they restart before their next step: with `reset =
    "replay"` from `first` (each env's state after the initial reset, crax's AutoResetWrapper), with
    `reset = "fresh"` from a new reset with a fresh key (`first` is None; at init every env is pending,
    so no reset is compiled outside the loop). `budget`: each env's remaining safety budget (cost units;
    budget programs only, else None).
    """

    env_state: Any
    pending: jax.Array
    t: jax.Array
    ep_reward: jax.Array
    ep_cost: jax.Array
    first: Any = None
    budget: Any = None


class TrainState(NamedTuple):
    """Everything the compiled loop carries. multiplier: lambda / kappa / nu (0 for PPO); d_step = d/T;
    last_violation: the previous update's batch mean per-step cost - d/T (0 before the first update);
    algo_state: the algorithm's own state `[STATE_SIZE]` (None only in the resume points of saferl
    versions before it existed, which the runner upgrades)."""

    params: Params
    opt_state: Any
    normalizer: Any
    multiplier: jax.Array
    d_step: jax.Array
    algo_id: jax.Array
    rollout: RolloutState
    key: jax.Array
    last_violation: jax.Array
    algo_state: Any = None


class Transition(NamedTuple):
    """One env step of one env; old policy's Gaussian (loc, scale) kept for the FOCOPS KL. `reward` is the
    learner's reward (PPO-Saute: the budget-shaped one); `obs`/`next_obs` include the observed budget in
    budget programs, where `budget` (before the step, cost units) and `overdrawn` (1 where the step's reward
    was replaced by the penalty) are kept too (None elsewhere)."""

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
    budget: Any = None
    overdrawn: Any = None


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


class IterateOut(NamedTuple):
    """One iterate's output: episodes, number of updates, mean diagnostics over its updates, the algorithm
    state after the iterate and the mean over its updates of the state each update used (`[STATE_SIZE]`)."""

    episodes: EpisodeBuffer
    n_updates: jax.Array
    metrics: dict[str, jax.Array]
    algo_state: Any = None
    algo_state_mean: Any = None


class EvalOut(NamedTuple):
    """Undiscounted episodic sums `[N]` for exploring and greedy rollouts from the same initial states."""

    expl_reward: jax.Array
    expl_cost: jax.Array
    greedy_reward: jax.Array
    greedy_cost: jax.Array


@dataclasses.dataclass(frozen=True)
class Trainer:
    """Compiled-friendly functions of one (config, env) pair; see the module docstring."""

    config: TrainConfig
    env: EnvFns
    networks: Any
    init: Callable[..., TrainState]
    iterate: Callable[[TrainState], tuple[TrainState, IterateOut]]
    evaluate: Callable[..., EvalOut]
    template: Callable[[], dict[str, Any]]
    slots: int
    loss: Callable[..., tuple[jax.Array, dict[str, jax.Array]]]
    """`make_loss(config, networks)`: the minibatch loss the SGD steps differentiate."""
    unroll: Callable[[TrainState, int], tuple[TrainState, Transition]]
    """`unroll(state, length)`: `length` env steps of every env with the current policy, no learning (the
    rollout every update collects); returns the advanced state and the transitions `[length, num_envs]`.
    `length` is static (jit with static_argnums=1). For tests and benches."""
    budget: bool = False
    obs_size: int = 0
    """The networks' input size (the env's, + 1 in budget programs)."""


def _networks(config: TrainConfig, env: EnvFns, budget: bool = False) -> Any:
    from train.nets import make_networks

    return make_networks(env.obs_size + int(budget), env.action_size, config.policy_hidden, config.value_hidden,
                         config.cost_value_hidden, config.normalize_observations)


def _strong(tree: Any) -> Any:
    """Drop weak types (env resets produce some) so the compiled loop's carry types never change."""
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype=jnp.asarray(x).dtype), tree)


def _select(done: jax.Array, new: Any, old: Any) -> Any:
    def sel(a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), a, b)

    return jax.tree_util.tree_map(sel, new, old)


class LossContext(NamedTuple):
    """The run's scalars a minibatch loss needs: algorithm index, multiplier, d/T, the previous update's
    violation (batch mean per-step cost - d/T; 0 before the first update), the algorithm's state
    `[STATE_SIZE]` (None: zeros)."""

    algo_id: jax.Array
    multiplier: jax.Array
    d_step: jax.Array
    last_violation: jax.Array
    algo_state: Any = None


def make_loss(config: TrainConfig, nets: Any,
              cost_critic: bool = True) -> Callable[..., tuple[jax.Array, dict[str, jax.Array]]]:
    """The minibatch loss `loss(params, normalizer, data, ctx, key) -> (total, diagnostics)`.

    data: a Transition with leading axes `[B, U]` (sequences of unroll_length steps, as crax's loss takes
    them); ctx: a LossContext. Total = policy loss (the algorithm's `lax.switch` branch) + both critics'
    losses - entropy_cost * entropy, crax's composition term by term (tests/test_train_parity.py).
    `cost_critic=False` (programs that only train PPO, like crax's PPO): the cost critic is neither
    evaluated nor trained (zero cost advantage, loss 0, its parameters stay as initialised).
    """
    dist = nets.parametric_action_distribution
    estimator = L.ADVANTAGE_ESTIMATORS[config.advantage]

    def policy_loss(algo_id: jax.Array, x: LossInputs) -> jax.Array:
        return jax.lax.switch(algo_id, [lambda a=a: a.policy_loss(config, x) for a in ALGORITHMS])

    def loss(params: Params, normalizer: Any, data: Transition, ctx: LossContext,
             key: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
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
            adv = L.normalize(adv)  # the cost advantage: per algorithm, see algorithms.cost_advantage
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
                       "approx_kl": jnp.mean(kl), "clip_fraction": clip_frac}

    return loss


def make_train(config: TrainConfig, env: EnvFns, axis_name: str | None = None, cost_critic: bool = True,
               budget: bool = False) -> Trainer:
    """Build the trainer's pure functions for `config` on `env` (call `jax.jit` on them).

    `axis_name`: name of a `jax.vmap` axis over runs the functions will be mapped over (vmapped groups).
    The "any env needs a reset" test is then taken over the whole group, so the reset stays a real
    branch instead of being computed every step for every run (values are identical either way).
    `cost_critic=False`: a program for PPO runs only, without the cost critic's work (see `make_loss`).
    `budget=True`: a PPO-Saute program (`config.ppo_saute`): budget-augmented observations (obs_size + 1),
    the learner's reward shaped by the budget, the env's reward and cost in the episode sums.
    """
    from train.nets import normalizer_init, normalizer_update

    config.validate()
    nets = _networks(config, env, budget)
    dist = nets.parametric_action_distribution
    n, T = config.num_envs, config.episode_length
    obs_size = env.obs_size + int(budget)
    slots = config.episodes_per_env_per_iterate + 1
    tx = optax.adam(config.learning_rate)
    if config.max_grad_norm > 0:
        tx = optax.chain(optax.clip_by_global_norm(config.max_grad_norm), tx)
    v_reset, v_step, v_observe = jax.vmap(env.reset), jax.vmap(env.step), jax.vmap(env.observe)
    replay = config.reset == "replay"
    v_restore = jax.vmap(env.restore) if env.restore is not None else (lambda first, state: first)
    sc = config.ppo_saute
    diagnostics = DIAGNOSTICS + (BUDGET_DIAGNOSTICS if budget else ())

    def init_params(key: jax.Array) -> Params:
        k1, k2, k3 = jax.random.split(key, 3)
        return Params(nets.policy_network.init(k1), nets.value_network.init(k2),
                      nets.cost_value_network.init(k3))

    def init(key: jax.Array, algo_id: jax.Array, multiplier0: jax.Array, d_step: jax.Array,
             algo_state0: jax.Array | None = None) -> TrainState:
        k_par, k_env, k_loop = jax.random.split(key, 3)
        params = init_params(k_par)
        zeros = jnp.zeros((n,), jnp.float32)
        d_step = jnp.asarray(d_step, jnp.float32)
        budget0 = zeros + d_step * T if budget else None  # every env starts with the whole budget d
        if replay:  # each env's layout for the whole run
            first = _strong(v_reset(jax.random.split(k_env, n)))
            rollout = RolloutState(first, jnp.zeros((n,), bool), jnp.zeros((n,), jnp.int32), zeros, zeros, first,
                                   budget0)
        else:
            shapes = jax.eval_shape(v_reset, jax.random.split(k_env, n))
            env_state = jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)
            rollout = RolloutState(env_state, jnp.ones((n,), bool), jnp.zeros((n,), jnp.int32), zeros, zeros,
                                   None, budget0)
        algo_state = jnp.zeros((STATE_SIZE,), jnp.float32) if algo_state0 is None else algo_state0
        return TrainState(params, tx.init(params), normalizer_init(obs_size), jnp.asarray(multiplier0, jnp.float32),
                          d_step, jnp.asarray(algo_id, jnp.int32), rollout, k_loop, jnp.zeros((), jnp.float32),
                          jnp.asarray(algo_state, jnp.float32))

    def budget_in(ro: RolloutState, bound: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(budget the step pays from, budget the policy observes) of every env at a step's start."""
        if sc.reset_budget == "episode":  # a restarting env starts with the whole budget
            b = jnp.where(ro.pending, bound, ro.budget)
            return b, b
        # crax: a time-limit restart carries the budget on; its first observation shows a full one
        return ro.budget, jnp.where(ro.pending, bound, ro.budget)

    def env_step(carry: tuple[RolloutState, EpisodeBuffer], key: jax.Array, policy_params: Any,
                 normalizer: Any, bound: jax.Array) -> tuple[tuple[RolloutState, EpisodeBuffer], Transition]:
        ro, buf = carry
        k_act, k_reset = jax.random.split(key)

        def reset_pending(state: Any) -> Any:
            if replay:
                return _select(ro.pending, v_restore(ro.first, state), state)
            return _select(ro.pending, _strong(v_reset(jax.random.split(k_reset, n))), state)

        any_pending = ro.pending.any()
        if axis_name is not None:
            any_pending = jax.lax.psum(any_pending.astype(jnp.int32), axis_name) > 0
        env_state = jax.lax.cond(any_pending, reset_pending, lambda s: s, ro.env_state)
        obs = v_observe(env_state)[0]
        if budget:
            b, shown = budget_in(ro, bound)
            obs = L.saute_observation(obs, shown, bound, sc.normalize_budget_obs)
        logits = nets.policy_network.apply(normalizer, policy_params, obs)
        gauss = dist.create_dist(logits)
        raw = gauss.sample(k_act)
        log_prob = dist.log_prob(logits, raw)
        env_state = v_step(env_state, dist.postprocess(raw))
        next_obs, reward, cost, term = v_observe(env_state)
        end = book_step(ro, buf, reward, cost, term, T, slots)
        buf, term, time_up, done = end.buf, end.term, end.time_up, end.done
        learner_reward, b_next, extra = reward, None, {}
        if budget:
            b_next, learner_reward, over = L.saute_step(b, cost, reward, bound, sc.budget_discount, sc.penalty,
                                                        sc.clip_budget)
            if sc.reset_budget == "termination":  # crax resets the budget when the env terminates
                b_next = jnp.where(term, bound, b_next)
            next_obs = L.saute_observation(next_obs, b_next, bound, sc.normalize_budget_obs)
            extra = {"budget": b, "overdrawn": over}
        new_ro = RolloutState(env_state, done, end.t, end.ep_reward, end.ep_cost, ro.first, b_next)
        tr = Transition(obs, raw, log_prob, gauss.loc, gauss.scale, learner_reward, cost, term.astype(jnp.float32),
                        (time_up & ~term).astype(jnp.float32), next_obs, **extra)
        return (new_ro, buf), tr

    def algo_update(algo_id: jax.Array, mult: jax.Array, algo_state: jax.Array, mean_cost: jax.Array,
                    d_step: jax.Array) -> tuple[jax.Array, jax.Array]:
        def branch(a: Any) -> Callable[[], tuple[jax.Array, jax.Array]]:
            def run() -> tuple[jax.Array, jax.Array]:
                m, st = a.step(config, mult, algo_state, mean_cost, d_step)
                return jnp.asarray(m, jnp.float32), jnp.asarray(st, jnp.float32)

            return run

        return jax.lax.switch(algo_id, [branch(a) for a in ALGORITHMS])

    minibatch_loss = make_loss(config, nets, cost_critic)

    def loss_fn(params: Params, normalizer: Any, data: Transition, state: TrainState,
                key: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        ctx = LossContext(state.algo_id, state.multiplier, state.d_step, state.last_violation, state.algo_state)
        return minibatch_loss(params, normalizer, data, ctx, key)

    grad_fn = jax.grad(loss_fn, has_aux=True)

    def sgd_step(carry: tuple[Params, Any], xs: tuple[Transition, jax.Array], normalizer: Any,
                 state: TrainState) -> tuple[tuple[Params, Any], dict[str, jax.Array]]:
        params, opt_state = carry
        mb, key = xs
        grads, mets = grad_fn(params, normalizer, mb, state, key)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), mets

    def sgd_epoch(carry: tuple[Params, Any], key: jax.Array, data: Transition, normalizer: Any,
                  state: TrainState) -> tuple[tuple[Params, Any], dict[str, jax.Array]]:
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
                                     bound=state.d_step * T)

        def unroll(carry: Any, k: jax.Array) -> tuple[Any, Transition]:
            return jax.lax.scan(step, carry, jax.random.split(k, shape[1]))

        (rollout, buf), data = jax.lax.scan(unroll, (state.rollout, buf), jax.random.split(key, shape[0]))
        return rollout, buf, data

    def update(state: TrainState, buf: EpisodeBuffer) -> tuple[TrainState, EpisodeBuffer, dict]:
        key, k_roll, k_sgd = jax.random.split(state.key, 3)
        rollout, buf, data = collect(state, buf, k_roll, (config.unrolls_per_update, config.unroll_length))
        # [K, U, n, ...] -> [K * n, U, ...]: sequences of unroll_length steps
        data = jax.tree_util.tree_map(
            lambda x: jnp.swapaxes(x, 1, 2).reshape((-1, config.unroll_length) + x.shape[3:]), data)
        normalizer = state.normalizer
        if config.normalize_observations:
            normalizer = normalizer_update(normalizer, data.obs)
        sgd_data = data._replace(budget=None, overdrawn=None)
        (params, opt_state), mets = jax.lax.scan(
            lambda c, k: sgd_epoch(c, k, sgd_data, normalizer, state), (state.params, state.opt_state),
            jax.random.split(k_sgd, config.num_epochs))
        mets = jax.tree_util.tree_map(jnp.mean, mets)
        mean_cost = data.cost.mean()
        mets["mean_step_cost"] = mean_cost
        mets["mean_step_reward"] = data.reward.mean()
        if budget:
            mets["saute_budget"] = data.budget.mean()
            mets["saute_penalty_share"] = data.overdrawn.mean()
        mult, algo_state = algo_update(state.algo_id, state.multiplier, state.algo_state, mean_cost, state.d_step)
        new = state._replace(params=params, opt_state=opt_state, normalizer=normalizer, multiplier=mult,
                             rollout=rollout, key=key, last_violation=mean_cost - state.d_step, algo_state=algo_state)
        return new, buf, mets

    max_updates = math.ceil(T / config.steps_per_update) + 1

    def empty_buffer() -> EpisodeBuffer:
        nan = jnp.full((slots, n), jnp.nan, jnp.float32)
        return EpisodeBuffer(nan, nan, jnp.zeros((n,), jnp.int32))

    def iterate(state: TrainState) -> tuple[TrainState, IterateOut]:
        buf = empty_buffer()
        msum = {k: jnp.zeros((), jnp.float32) for k in diagnostics}

        def cond(c: Any) -> jax.Array:
            return (c[1].count.min() < 1) & (c[2] < max_updates)

        def body(c: Any) -> Any:
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
        rollout, _, data = collect(state, empty_buffer(), k_roll, (1, length))
        return state._replace(rollout=rollout, key=key), jax.tree_util.tree_map(lambda x: x[0], data)

    def evaluate(params: Params, normalizer: Any, key: jax.Array, d_step: jax.Array | None = None) -> EvalOut:
        n_eval = config.eval_episodes
        k_reset, k_act = jax.random.split(key)
        start = _strong(v_reset(jax.random.split(k_reset, n_eval)))
        # expl rollouts in rows [0, N), greedy ones in [N, 2N): same initial states, one env trace
        start = jax.tree_util.tree_map(lambda x: jnp.concatenate([x, x]), start)
        greedy = (jnp.arange(2 * n_eval) >= n_eval)[:, None]
        if budget and d_step is None:
            raise ValueError("a budget program evaluates with the run's d_step")
        bound = None if d_step is None else jnp.asarray(d_step, jnp.float32) * T

        def body(c: Any, k: jax.Array) -> Any:
            s, alive, r_sum, c_sum, b = c
            obs = v_observe(s)[0]
            if budget:
                obs = L.saute_observation(obs, b, bound, sc.normalize_budget_obs)
            logits = nets.policy_network.apply(normalizer, params.policy, obs)
            action = jnp.where(greedy, dist.mode(logits), dist.sample(logits, k))
            s = v_step(s, action)
            _, r, cost, term = v_observe(s)
            if budget:
                b = L.saute_step(b, cost, r, bound, sc.budget_discount, sc.penalty, sc.clip_budget)[0]
            r_sum, c_sum = r_sum + alive * r, c_sum + alive * cost
            return (s, alive * (term < 0.5), r_sum, c_sum, b), None

        zero = jnp.zeros((2 * n_eval,), jnp.float32)
        b0 = zero + bound if budget else None
        (_, _, r_sum, c_sum, _), _ = jax.lax.scan(body, (start, zero + 1.0, zero, zero, b0),
                                                  jax.random.split(k_act, T))
        return EvalOut(r_sum[:n_eval], c_sum[:n_eval], r_sum[n_eval:], c_sum[n_eval:])

    def template() -> dict[str, Any]:
        params = jax.eval_shape(init_params, jax.random.PRNGKey(0))
        params = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), params)
        return checkpoint_payload(params, normalizer_init(obs_size), jnp.zeros((), jnp.float32))

    return Trainer(config, env, nets, init, iterate, evaluate, template, slots, minibatch_loss, unroll_steps,
                   budget, obs_size)


def checkpoint_payload(params: Params, normalizer: Any, multiplier: jax.Array) -> dict[str, Any]:
    """The checkpointed pytree: policy, both critics, observation normaliser, multiplier."""
    return {"policy": params.policy, "value": params.value, "cost_value": params.cost_value,
            "normalizer": {"count": normalizer.count, "mean": normalizer.mean,
                           "summed_variance": normalizer.summed_variance, "std": normalizer.std},
            "multiplier": multiplier}


def eval_key(seed: int, iterate: int) -> jax.Array:
    """Evaluation key of (seed, iterate): identical for every algorithm, so rollouts are paired."""
    return jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(EVAL_TAG), seed), iterate)
