"""The off-policy core: SAC, SAC-Lag and SAC-PID as one pure, vmappable program (beside the PPO core,
`train.onpolicy.core.make_train`).

`make_offpolicy_train(config, env)` builds pure, jittable functions with the on-policy trainer's signatures,
so the group program (`train.program.GroupProgram`) drives either:

- `init(key, algo_id, multiplier0, d_step[, algo_state0]) -> OffPolicyState`
- `iterate(state) -> (state, OffPolicyIterateOut)`: `config.actor_steps_per_iterate` actor steps (all
  `num_envs` envs stepped once each); after each, the transitions go into the replay buffer and, once the
  buffer held `min_replay_size` transitions before the step, `grad_updates_per_step` gradient steps follow
  on `batch_size` transitions each (crax's `training_step`). Episodes that ended in the iterate come back as
  undiscounted reward/cost sums in `[S, num_envs]` buffers (NaN = empty, `count [num_envs]`), the on-policy
  floor's `train.rollout.EpisodeBuffer`, with S = ceil(actor steps / T) + 1.
- `evaluate(params, normalizer, key[, d_step]) -> EvalOut`: the paired evaluator both families share
  (`train.acting`: N episodes of T steps, exploring and greedy from the same N initial states).

One gradient step (`sgd_step`) is crax's `sgd_step`, in its order and with its key splits: temperature,
reward critic, cost critic (programs with `cost_critic`), actor (on the step's *old* Q networks, alpha and
lambda), soft target updates, then lambda from the minibatch's mean cost by the algorithm's rule (a traced
`lax.switch` index, so one compile serves all algorithms, bounds and seeds of a task).

The state (`OffPolicyState`) is everything the loop carries: networks, target networks, log alpha, the four
Adam states, lambda and the PID state, the observation normaliser, env states and episode accumulators, the
replay buffer (data, size, position, its key) and the loop key. Saving it after iterate k and restoring it
gives bit-identical iterates k+1.. (tests/test_offpolicy_core.py).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from train.acting import Evaluate, make_evaluator
from train.algorithm import OFFPOLICY
from train.envs import EnvFns, PyTree
from train.multipliers import PIDState, pid_init
from train.nets import Normalizer, normalizer_init, normalizer_update
from train.offpolicy import losses as L
from train.offpolicy.base import OffPolicyAlgorithm
from train.offpolicy.config import OFFPOLICY_DIAGNOSTICS, OffPolicyConfig, check_replay_memory
from train.offpolicy.networks import SACNetworks, make_sac_networks
from train.offpolicy.replay import (
    ReplayState,
    RowLayout,
    memory_available,
    pack,
    replay_init,
    replay_insert,
    replay_sample,
    row_layout,
    unpack,
)
from train.registry import algorithms
from train.rollout import (
    EpisodeBuffer,
    RolloutState,
    book_step,
    empty_buffer,
    initial_rollout,
    restart_pending,
    strong_types,
    vectorize,
)

DIAGNOSTICS = OFFPOLICY_DIAGNOSTICS
"""Per-iterate diagnostics in `OffPolicyIterateOut.metrics` (see `config.OFFPOLICY_DIAGNOSTICS`)."""
Metrics = dict[str, jax.Array]
"""Named scalar diagnostics."""
LOSSES = ("critic_loss", "cost_critic_loss", "actor_loss", "alpha_loss", "batch_cost")


class OffPolicyParams(NamedTuple):
    """Online networks: policy, reward twin-Q, cost twin-Q (flax param trees)."""

    policy: PyTree
    q: PyTree
    cost_q: PyTree


class TargetParams(NamedTuple):
    """Target networks (Polyak averages of the online Q networks)."""

    q: PyTree
    cost_q: PyTree


class OptStates(NamedTuple):
    """Adam states of policy, Q, cost Q and log alpha (crax keeps four optimisers)."""

    policy: PyTree
    q: PyTree
    cost_q: PyTree
    alpha: PyTree


class Learner(NamedTuple):
    """What a gradient step reads and writes: networks, targets, log alpha, optimisers, lambda, PID state."""

    params: OffPolicyParams
    target: TargetParams
    log_alpha: jax.Array
    opt_state: OptStates
    multiplier: jax.Array
    pid: PIDState


class OffPolicyState(NamedTuple):
    """Everything the compiled loop carries (a pytree; vmaps over runs, saved whole as the resume point).

    d_step = d/T; algo_id: the run's branch among the registry's off-policy records; actor_steps: actor steps
    done so far (env steps = actor_steps * num_envs). `params`, `multiplier` are shortcuts the host path reads.
    """

    learner: Learner
    normalizer: Normalizer
    d_step: jax.Array
    algo_id: jax.Array
    rollout: RolloutState
    replay: ReplayState
    key: jax.Array
    actor_steps: jax.Array

    @property
    def params(self) -> OffPolicyParams:
        """The online networks."""
        return self.learner.params

    @property
    def multiplier(self) -> jax.Array:
        """lambda (0 for SAC)."""
        return self.learner.multiplier


class OffPolicyIterateOut(NamedTuple):
    """One iterate's output: episodes `[S, n]` (NaN = empty) with counts `[n]`, gradient steps taken, env steps
    taken, and `DIAGNOSTICS`."""

    episodes: EpisodeBuffer
    n_updates: jax.Array
    env_steps: jax.Array
    metrics: dict[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class OffPolicyTrainer:
    """Compiled-friendly functions of one (config, env) pair; see the module docstring."""

    config: OffPolicyConfig
    env: EnvFns
    networks: SACNetworks
    layout: RowLayout
    init: Callable[..., OffPolicyState]
    iterate: Callable[[OffPolicyState], tuple[OffPolicyState, OffPolicyIterateOut]]
    evaluate: Evaluate
    template: Callable[[], dict[str, PyTree]]
    slots: int
    sgd_step: Callable[..., tuple[Learner, jax.Array, dict[str, jax.Array]]]
    """`sgd_step(learner, key, batch, normalizer, algo_id, d_step) -> (learner, key, metrics)`: one gradient
    step on a batch `Transition [B, ...]` (crax's `sgd_step`; the parity tests call it)."""
    replay_bytes: int
    """Bytes the replay buffers and sampled batches of the `n_runs` it was checked for take."""


def checkpoint_payload(params: OffPolicyParams, normalizer: Normalizer, multiplier: jax.Array,
                       log_alpha: jax.Array) -> dict[str, PyTree]:
    """The evaluation checkpoint: policy, both twin-Q networks, normaliser, lambda, log alpha (the resume point
    is the whole `OffPolicyState`)."""
    return {"policy": params.policy, "q": params.q, "cost_q": params.cost_q,
            "normalizer": {"count": normalizer.count, "mean": normalizer.mean,
                           "summed_variance": normalizer.summed_variance, "std": normalizer.std},
            "multiplier": multiplier, "log_alpha": log_alpha}


def example_transition(obs_size: int, action_size: int) -> L.Transition:
    """A zero transition without batch axis (fixes the replay row layout)."""
    z = jnp.zeros((), jnp.float32)
    return L.Transition(jnp.zeros((obs_size,), jnp.float32), jnp.zeros((action_size,), jnp.float32), z, z, z, z,
                        jnp.zeros((obs_size,), jnp.float32))


def make_offpolicy_train(config: OffPolicyConfig, env: EnvFns, axis_name: str | None = None,
                         cost_critic: bool = True, n_runs: int = 1,
                         memory: tuple[int, str] | None = None) -> OffPolicyTrainer:
    """Build the off-policy trainer's pure functions for `config` on `env` (call `jax.jit` on them).

    Refuses (one-line CubeError) an invalid config, a batch larger than the buffer, or `n_runs` replay buffers
    that do not fit `memory` = (bytes, where) (default: the device's limit or this machine's available memory),
    before anything is allocated or compiled. `axis_name`: the `jax.vmap` axis of a group of runs (the reset and
    warm-up branches then stay real branches for the whole group). `cost_critic=False`: a program for SAC runs
    only (crax's SAC has no cost critic; its parameters stay as initialised and its key is not split off).
    """
    config.validate()
    need = check_replay_memory(config, env.obs_size, env.action_size, n_runs, memory or memory_available())
    nets = make_sac_networks(env.obs_size, env.action_size, config.hidden, config.normalize_observations)
    dist = nets.parametric_action_distribution
    n, T = config.num_envs, config.episode_length
    K, G, B = config.actor_steps_per_iterate, config.grad_updates_per_step, config.batch_size
    slots = math.ceil(K / T) + 1
    layout = row_layout(example_transition(env.obs_size, env.action_size))
    tx, alpha_tx = optax.adam(config.learning_rate), optax.adam(config.alpha_learning_rate)
    target_entropy = -config.target_entropy_scale * env.action_size
    venv = vectorize(env)
    replay_reset = config.reset == "replay"
    records = [a for a in algorithms(OFFPOLICY) if isinstance(a, OffPolicyAlgorithm)]
    branches = [functools.partial(a.multiplier_update, config) for a in records]

    # ------------------------------------------------------------------------------- init
    def init_params(key: jax.Array) -> OffPolicyParams:
        k_pol, k_q, k_qc = jax.random.split(key, 3)
        return OffPolicyParams(nets.policy_network.init(k_pol), nets.q_network.init(k_q),
                               nets.cost_q_network.init(k_qc))

    def init(key: jax.Array, algo_id: jax.Array, multiplier0: jax.Array, d_step: jax.Array,
             algo_state0: jax.Array | None = None) -> OffPolicyState:
        """A run's initial state; `algo_state0` (the PPO core's algorithm state vector) is accepted and ignored,
        so either family's `init_args` can feed the group program (the PID state starts at zero, as crax's)."""
        k_par, k_env, k_replay, k_loop = jax.random.split(key, 4)
        params = init_params(k_par)
        log_alpha = jnp.asarray(config.init_log_alpha, jnp.float32)
        opt = OptStates(tx.init(params.policy), tx.init(params.q), tx.init(params.cost_q), alpha_tx.init(log_alpha))
        learner = Learner(params, TargetParams(params.q, params.cost_q), log_alpha, opt,
                          jnp.asarray(multiplier0, jnp.float32), pid_init())
        rollout = initial_rollout(venv, k_env, n, replay_reset)  # replay: each env's layout for the whole run
        state = OffPolicyState(learner, normalizer_init(env.obs_size), jnp.asarray(d_step, jnp.float32),
                               jnp.asarray(algo_id, jnp.int32), rollout,
                               replay_init(config.max_replay_size, layout.width, k_replay), k_loop,
                               jnp.zeros((), jnp.int32))
        return strong_types(state)

    # ------------------------------------------------------------------------------- acting
    def env_step(ro: RolloutState, buf: EpisodeBuffer, key: jax.Array, policy_params: PyTree,
                 normalizer: Normalizer) -> tuple[RolloutState, EpisodeBuffer, L.Transition]:
        """Step every env once with a policy sample; book finished episodes; the transitions `[n, ...]`."""
        k_act, k_reset = jax.random.split(key)
        env_state = restart_pending(venv, ro, k_reset, replay_reset, axis_name)
        obs = venv.observe(env_state)[0]
        action = dist.sample(nets.policy_network.apply(normalizer, policy_params, obs), k_act)
        env_state = venv.step(env_state, action)
        next_obs, reward, cost, term = venv.observe(env_state)
        end = book_step(ro, buf, reward, cost, term, T, slots)
        buf, term, time_up, done = end.buf, end.term, end.time_up, end.done
        ro = RolloutState(env_state, done, end.t, end.ep_reward, end.ep_cost, ro.first)
        tr = L.Transition(obs, action, reward.astype(jnp.float32), cost.astype(jnp.float32),
                          1.0 - done.astype(jnp.float32), (time_up & ~term).astype(jnp.float32), next_obs)
        return ro, buf, tr

    # ------------------------------------------------------------------------------- learning
    def sgd_step(learner: Learner, key: jax.Array, batch: L.Transition, normalizer: Normalizer,
                 algo_id: jax.Array, d_step: jax.Array) -> tuple[Learner, jax.Array, dict[str, jax.Array]]:
        """crax's `sgd_step` (SAC: 4-way key split without the cost critic; SAC-Lag/PID: 5-way)."""
        p, tgt, opt = learner.params, learner.target, learner.opt_state
        if cost_critic:
            key, k_alpha, k_critic, k_cost, k_actor = jax.random.split(key, 5)
        else:
            key, k_alpha, k_critic, k_actor = jax.random.split(key, 4)
        a_loss, a_grad = jax.value_and_grad(
            lambda la: L.alpha_loss(la, p.policy, normalizer, batch.obs, k_alpha, nets, target_entropy)
        )(learner.log_alpha)
        upd, alpha_opt = alpha_tx.update(a_grad, opt.alpha)
        log_alpha = optax.apply_updates(learner.log_alpha, upd)
        alpha = jnp.exp(learner.log_alpha)  # the step's critic and actor use the old temperature (crax)
        c_loss, q_grad = jax.value_and_grad(
            lambda q: L.critic_loss(q, p.policy, normalizer, tgt.q, alpha, batch, k_critic, nets,
                                    config.reward_scaling, config.discount))(p.q)
        upd, q_opt = tx.update(q_grad, opt.q)
        q = optax.apply_updates(p.q, upd)
        if cost_critic:
            cc_loss, qc_grad = jax.value_and_grad(
                lambda qc: L.cost_critic_loss(qc, p.policy, normalizer, tgt.cost_q, batch, k_cost, nets,
                                              config.discount))(p.cost_q)
            upd, qc_opt = tx.update(qc_grad, opt.cost_q)
            qc = optax.apply_updates(p.cost_q, upd)
        else:
            cc_loss, qc, qc_opt = jnp.zeros((), jnp.float32), p.cost_q, opt.cost_q
        act_loss, pol_grad = jax.value_and_grad(
            lambda pol: L.actor_loss(pol, normalizer, p.q, p.cost_q if cost_critic else None, alpha,
                                     learner.multiplier, batch.obs, k_actor, nets))(p.policy)
        upd, pol_opt = tx.update(pol_grad, opt.policy)
        policy = optax.apply_updates(p.policy, upd)
        target = TargetParams(L.soft_update(tgt.q, q, config.tau),
                              L.soft_update(tgt.cost_q, qc, config.tau) if cost_critic else tgt.cost_q)
        mean_cost = jnp.mean(batch.cost)
        lam, pid = jax.lax.switch(algo_id, branches, learner.multiplier, learner.pid, mean_cost, d_step)
        new = Learner(OffPolicyParams(policy, q, qc), target, log_alpha, OptStates(pol_opt, q_opt, qc_opt, alpha_opt),
                      lam, pid)
        mets = {"critic_loss": c_loss, "cost_critic_loss": cc_loss, "actor_loss": act_loss, "alpha_loss": a_loss,
                "batch_cost": mean_cost}
        return new, key, mets

    def learn(replay: ReplayState, learner: Learner, key: jax.Array, normalizer: Normalizer,
              state: OffPolicyState) -> tuple[ReplayState, Learner, dict[str, jax.Array]]:
        """Sample G x B transitions in one draw, then G gradient steps (crax's reshape and scan)."""
        replay, rows = replay_sample(replay, G * B)
        batches = unpack(layout, rows.reshape(G, B, layout.width))

        def body(c: tuple[Learner, jax.Array], batch: L.Transition) -> tuple[tuple[Learner, jax.Array], Metrics]:
            lr, k, mets = sgd_step(c[0], c[1], batch, normalizer, state.algo_id, state.d_step)
            return (lr, k), mets

        (learner, _), mets = jax.lax.scan(body, (learner, key), batches)
        return replay, learner, {k: v.sum() for k, v in mets.items()}

    def train_step(carry: tuple[OffPolicyState, EpisodeBuffer, dict[str, jax.Array]],
                   key: jax.Array) -> tuple[tuple[OffPolicyState, EpisodeBuffer, Metrics], None]:
        """One actor step of all envs, the buffer insert, then the gradient steps (crax's `training_step`)."""
        state, buf, acc = carry
        k_exp, k_train = jax.random.split(key)
        ro, buf, tr = env_step(state.rollout, buf, k_exp, state.learner.params.policy, state.normalizer)
        normalizer = normalizer_update(state.normalizer, tr.obs)  # crax updates it also when unused
        warm = state.replay.size >= config.min_replay_size  # before this insert: crax's prefill steps
        replay = replay_insert(state.replay, pack(layout, tr))
        zero = {k: jnp.zeros((), jnp.float32) for k in LOSSES}

        def go(operand: tuple[ReplayState, Learner]) -> tuple[ReplayState, Learner, dict[str, jax.Array], jax.Array]:
            rp, lr, mets = learn(operand[0], operand[1], k_train, normalizer, state)
            return rp, lr, mets, jnp.int32(G)

        def wait(operand: tuple[ReplayState, Learner]) -> tuple[ReplayState, Learner, dict[str, jax.Array], jax.Array]:
            return operand[0], operand[1], zero, jnp.int32(0)

        if config.min_replay_size <= 0:
            replay, learner, mets, steps = go((replay, state.learner))
        else:
            if axis_name is not None:  # all members have equal sizes; keep the branch unbatched
                warm = jax.lax.psum(warm.astype(jnp.int32), axis_name) == jax.lax.psum(jnp.int32(1), axis_name)
            replay, learner, mets, steps = jax.lax.cond(warm, go, wait, (replay, state.learner))
        acc = {**{k: acc[k] + mets[k] for k in LOSSES}, "grad_steps": acc["grad_steps"] + steps,
               "reward": acc["reward"] + tr.reward.sum(), "cost": acc["cost"] + tr.cost.sum()}
        state = state._replace(learner=learner, normalizer=normalizer, rollout=ro, replay=replay,
                               actor_steps=state.actor_steps + 1)
        return (state, buf, acc), None

    # ------------------------------------------------------------------------------- iterate
    def iterate(state: OffPolicyState) -> tuple[OffPolicyState, OffPolicyIterateOut]:
        buf = empty_buffer(slots, n)
        acc = {k: jnp.zeros((), jnp.float32) for k in (*LOSSES, "reward", "cost")}
        acc["grad_steps"] = jnp.zeros((), jnp.int32)
        key, k_loop = jax.random.split(state.key)
        (state, buf, acc), _ = jax.lax.scan(train_step, (state._replace(key=key), buf, acc),
                                            jax.random.split(k_loop, K))
        steps = acc["grad_steps"]
        metrics = {k: acc[k] / jnp.maximum(steps, 1).astype(jnp.float32) for k in LOSSES}
        metrics["alpha"] = jnp.exp(state.learner.log_alpha)
        metrics["mean_step_cost"] = acc["cost"] / (K * n)
        metrics["mean_step_reward"] = acc["reward"] / (K * n)
        metrics["replay_size"] = state.replay.size.astype(jnp.float32)
        return state, OffPolicyIterateOut(buf, steps, jnp.int32(K * n), metrics)

    # ------------------------------------------------------------------------------- evaluate
    evaluate = make_evaluator(lambda bound: env, nets.policy_network.apply, dist, config.eval_episodes, T)
    """`evaluate(params, normalizer, key, d_step=None)`: `d_step` (PPO-Saute's budget needs it on-policy) is
    accepted and ignored."""

    def template() -> dict[str, PyTree]:
        params = jax.eval_shape(init_params, jax.random.PRNGKey(0))
        params = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), params)
        zero = jnp.zeros((), jnp.float32)
        return checkpoint_payload(params, normalizer_init(env.obs_size), zero, zero)

    return OffPolicyTrainer(config, env, nets, layout, init, iterate, evaluate, template, slots, sgd_step, need)
