"""Parity with crax-bench's own trainers: the same batch through crax's loss and update code and ours.

For each algorithm one batch (observations, raw actions, behaviour log-probs, rewards, costs, termination
and truncation flags, the networks' values, the multiplier) goes through crax's loss function - the very
closure its `train()` hands to the PPO core, captured by replacing `ppo_train.train` - and through
`train.core.make_loss`; losses and every gradient leaf must agree to float32 tolerance. The multiplier
updates go through crax's `post_step_fn` (same capture) and `train.algorithms`; the advantage estimator
through crax's `compute_gae` and `train.losses.brax_gae`; the reset semantics through crax's
AutoResetWrapper and `reset = "replay"` on a tiny fake env. No MJX is compiled: a few seconds in all.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.crax
pytest.importorskip("crax")
jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from train import losses as L  # noqa: E402
from train.algorithms import algorithm, d_step  # noqa: E402
from train.config import TrainConfig, with_overrides  # noqa: E402
from train.core import LossContext, Params, Transition, make_loss, make_train  # noqa: E402
from train.envs import EnvFns, autoreset_restore, import_crax  # noqa: E402
from train.nets import make_networks, normalizer_init, normalizer_update  # noqa: E402

import_crax()
ppo_train = importlib.import_module("crax.training.agents.ppo.train")
ppo_losses = importlib.import_module("crax.training.agents.ppo.losses")
ppo_networks = importlib.import_module("crax.training.agents.ppo.networks")
running_statistics = importlib.import_module("crax.training.acme.running_statistics")
crax_types = importlib.import_module("crax.training.types")

OBS, ACT, B, U = 6, 2, 16, 5
T, BOUND = 40, 2.0
CFG = TrainConfig(episode_length=T, num_envs=16, unroll_length=U, batch_size=B, num_minibatches=5,
                  policy_hidden=(16, 16), value_hidden=(16, 16), cost_value_hidden=(16, 16))
LOSS_RTOL, GRAD_RTOL, GRAD_ATOL = 1e-5, 2e-4, 1e-6
"""Float32 tolerances: the two codes reduce in different orders (normalisation over [U, B] vs flat)."""


def crax_hooks(monkeypatch: pytest.MonkeyPatch, algo: str, cfg: TrainConfig, bound: float) -> dict[str, Any]:
    """The keyword arguments crax's `<algo>.train()` passes to its PPO core (loss_fn, post_step_fn, ...).

    Every value is passed explicitly from `cfg` (crax's keyword defaults differ from the paper's).
    """
    captured: dict[str, Any] = {}
    monkeypatch.setattr(ppo_train, "train", lambda **kw: captured.update(kw))
    common = dict(environment=None, num_timesteps=1, episode_length=cfg.episode_length, num_envs=cfg.num_envs,
                  learning_rate=cfg.learning_rate, entropy_cost=cfg.entropy_cost, discounting=cfg.discount,
                  unroll_length=cfg.unroll_length, batch_size=cfg.batch_size,
                  num_minibatches=cfg.num_minibatches, num_updates_per_batch=cfg.num_epochs,
                  normalize_observations=True, reward_scaling=cfg.reward_scaling, gae_lambda=cfg.gae_lambda,
                  normalize_advantage=cfg.normalize_advantage, seed=0, safety_bound=bound)
    mod = importlib.import_module(f"crax.training.agents.{algo}.train")
    if algo == "ppo_lag":
        mod.train(**common, clipping_epsilon=cfg.clip_epsilon, lagrangian_coef_rate=cfg.ppo_lag.lr,
                  initial_lambda_lagr=cfg.ppo_lag.init)
    elif algo == "p3o":
        mod.train(**common, clipping_epsilon=cfg.clip_epsilon, initial_kappa=cfg.p3o.kappa_init,
                  kappa_increase_factor=cfg.p3o.increase, kappa_max=cfg.p3o.kappa_max)
    elif algo == "focops":
        mod.train(**common, initial_nu=cfg.focops.nu_init, nu_lr=cfg.focops.nu_lr, nu_max=cfg.focops.nu_max,
                  focops_lam=cfg.focops.temperature, focops_eta=cfg.focops.kl_threshold)
    else:
        raise ValueError(algo)
    return captured


def crax_networks(cfg: TrainConfig) -> Any:
    return ppo_networks.make_ppo_networks(OBS, ACT, preprocess_observations_fn=running_statistics.normalize,
                                          policy_hidden_layer_sizes=cfg.policy_hidden,
                                          value_hidden_layer_sizes=cfg.value_hidden,
                                          cost_value_hidden_layer_sizes=cfg.cost_value_hidden)


def make_batch(seed: int, nets: Any, params: Params, normalizer: Any, log_prob_noise: float) -> Transition:
    """A batch `[B, U]` as a rollout would leave it; behaviour log-probs are the current policy's plus
    noise, so ratios spread over both sides of the clip range (noise sets how far)."""
    rng = np.random.default_rng(seed)
    obs = jnp.asarray(rng.normal(1.0, 2.0, (B, U + 1, OBS)), jnp.float32)
    raw = jnp.asarray(rng.normal(0.0, 1.0, (B, U, ACT)), jnp.float32)
    logits = nets.policy_network.apply(normalizer, params.policy, obs[:, :-1])
    dist = nets.parametric_action_distribution
    log_prob = dist.log_prob(logits, raw) + jnp.asarray(rng.normal(0.0, log_prob_noise, (B, U)), jnp.float32)
    gauss = dist.create_dist(logits)
    term = rng.random((B, U)) < 0.05
    trunc = (rng.random((B, U)) < 0.1) & ~term
    f32 = functools.partial(jnp.asarray, dtype=jnp.float32)
    return Transition(obs[:, :-1], raw, log_prob, gauss.loc, gauss.scale, f32(rng.normal(1.0, 1.0, (B, U))),
                      f32(0.1 * (rng.random((B, U)) < 0.4)), f32(term), f32(trunc), obs[:, 1:])


def to_crax(data: Transition) -> Any:
    """The same batch as crax's Transition (discount = 1 - done, done = termination or truncation)."""
    done = jnp.maximum(data.termination, data.truncation)
    return crax_types.Transition(
        observation=data.obs, action=jnp.tanh(data.raw_action), reward=data.reward, discount=1.0 - done,
        next_observation=data.next_obs,
        extras={"policy_extras": {"raw_action": data.raw_action, "log_prob": data.log_prob},
                "state_extras": {"truncation": data.truncation, "cost": data.cost}})


def setup(cfg: TrainConfig, seed: int, noise: float) -> tuple[Any, Any, Params, Any, Any, Transition]:
    cnets = crax_networks(cfg)
    nets = make_networks(OBS, ACT, cfg.policy_hidden, cfg.value_hidden, cfg.cost_value_hidden, True)
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    params = Params(cnets.policy_network.init(k1), cnets.value_network.init(k2),
                    cnets.cost_value_network.init(k3))
    rng = np.random.default_rng(100 + seed)
    normalizer = normalizer_update(normalizer_init(OBS), jnp.asarray(rng.normal(1.0, 2.0, (64, OBS)), jnp.float32))
    crax_norm = running_statistics.RunningStatisticsState(mean=normalizer.mean, std=normalizer.std,
                                                          count=normalizer.count,
                                                          summed_variance=normalizer.summed_variance)
    return cnets, nets, params, normalizer, crax_norm, make_batch(seed, nets, params, normalizer, noise)


def assert_trees_close(ours: Any, theirs: Any, what: str) -> None:
    flat_o, flat_t = jax.tree_util.tree_leaves_with_path(ours), jax.tree_util.tree_leaves(theirs)
    assert len(flat_o) == len(flat_t)
    for (path, a), b in zip(flat_o, flat_t, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=GRAD_RTOL, atol=GRAD_ATOL,
                                   err_msg=f"{what} {jax.tree_util.keystr(path)}")


def our_loss_and_grads(cfg: TrainConfig, nets: Any, params: Params, normalizer: Any, data: Transition,
                       algo: str, mult: float, last_violation: float, key: jax.Array) -> tuple[Any, Any, Any]:
    loss = make_loss(cfg, nets, cost_critic=algorithm(algo).uses_multiplier)  # as the runner builds it
    ctx = LossContext(jnp.int32(algorithm(algo).id), jnp.float32(mult), jnp.float32(d_step(cfg, BOUND)),
                      jnp.float32(last_violation))
    (total, mets), grads = jax.value_and_grad(loss, has_aux=True)(params, normalizer, data, ctx, key)
    return total, mets, grads


def crax_loss_and_grads(monkeypatch: pytest.MonkeyPatch, cfg: TrainConfig, cnets: Any, params: Params,
                        crax_norm: Any, data: Transition, algo: str, aux: Any, key: jax.Array) -> tuple[Any, Any]:
    cparams = ppo_losses.PPONetworkParams(policy=params.policy, value=params.value, cost_value=params.cost_value)
    cdata = to_crax(data)
    if algo == "ppo":  # crax's PPO core: compute_ppo_loss with the core's own arguments
        loss = functools.partial(ppo_losses.compute_ppo_loss, ppo_network=cnets, entropy_cost=cfg.entropy_cost,
                                 discounting=cfg.discount, reward_scaling=cfg.reward_scaling,
                                 gae_lambda=cfg.gae_lambda, clipping_epsilon=cfg.clip_epsilon,
                                 normalize_advantage=cfg.normalize_advantage)

        def wrapped(p: Any) -> Any:
            return loss(p, crax_norm, cdata, key)
    else:  # the custom loss closure exactly as crax's core binds and calls it
        kw = crax_hooks(monkeypatch, algo, cfg, BOUND)
        loss = functools.partial(kw["loss_fn"], ppo_network=cnets, entropy_cost=kw["entropy_cost"],
                                 discounting=kw["discounting"], reward_scaling=kw["reward_scaling"],
                                 gae_lambda=kw["gae_lambda"], clipping_epsilon=kw["clipping_epsilon"],
                                 normalize_advantage=kw["normalize_advantage"])

        def wrapped(p: Any) -> Any:
            return loss(p, crax_norm, cdata, key, aux_state=aux)
    (total, mets), grads = jax.value_and_grad(wrapped, has_aux=True)(cparams)
    return total, grads


# ------------------------------------------------------------------------------------------ losses
CASES = [  # (algo, multiplier, last violation, log-prob noise, seed)
    ("ppo", 0.0, 0.0, 0.3, 0),
    ("ppo", 0.0, 0.0, 0.8, 1),
    ("ppo_lag", 0.0, 0.0, 0.3, 2),
    ("ppo_lag", 1.7, 0.0, 0.5, 3),
    ("p3o", 0.01, 0.0, 0.3, 4),      # first update: violation 0
    ("p3o", 3.0, 0.04, 0.4, 5),      # violated: relu terms on
    ("p3o", 8.0, -0.05, 0.4, 6),     # satisfied with margin: the penalty's relu is off
    ("focops", 0.1, 0.0, 0.05, 7),   # approximate KL <= eta: factor 1
    ("focops", 2.5, 0.0, 0.6, 8),    # approximate KL > eta: factor eta / KL (differentiated)
]


def _aux(algo: str, mult: float, violation: float) -> Any:
    if algo == "p3o":
        return (jnp.array([mult], jnp.float32), jnp.array([violation], jnp.float32))
    return jnp.array([mult], jnp.float32)


@pytest.mark.parametrize("algo, mult, violation, noise, seed", CASES)
def test_loss_and_gradients_equal_crax(monkeypatch: pytest.MonkeyPatch, algo: str, mult: float, violation: float,
                                       noise: float, seed: int) -> None:
    cnets, nets, params, normalizer, crax_norm, data = setup(CFG, seed, noise)
    key = jax.random.PRNGKey(1000 + seed)  # the entropy estimate's sample: same key for both
    total, mets, grads = our_loss_and_grads(CFG, nets, params, normalizer, data, algo, mult, violation, key)
    c_total, c_grads = crax_loss_and_grads(monkeypatch, CFG, cnets, params, crax_norm, data, algo,
                                           _aux(algo, mult, violation), key)
    if algo == "ppo":  # crax's PPO has no cost critic; PPO programs of ours neither use nor train theirs
        assert float(mets["cost_value_loss"]) == 0.0
        assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree_util.tree_leaves(grads.cost_value))
        c_grads = c_grads.replace(cost_value=grads.cost_value)
    np.testing.assert_allclose(float(total), float(c_total), rtol=LOSS_RTOL, atol=1e-7)
    assert_trees_close(grads, Params(c_grads.policy, c_grads.value, c_grads.cost_value), algo)
    if algo == "focops":  # both branches of crax's batch KL factor are exercised
        logits = nets.policy_network.apply(normalizer, params.policy, data.obs)
        log_ratio = nets.parametric_action_distribution.log_prob(logits, data.raw_action) - data.log_prob
        batch_kl = float(jnp.mean(jnp.exp(log_ratio) - 1.0 - log_ratio))
        assert (batch_kl <= CFG.focops.kl_threshold) == (noise < 0.1), batch_kl


def test_legacy_options_differ_from_crax(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept alternatives really are other formulations (so the parity above is not vacuous)."""
    legacy = with_overrides(CFG, {"advantage": "gae", "p3o": {"normalize_cost_advantage": True,
                                                              "violation": "minibatch"},
                                  "focops": {"normalize_cost_advantage": True, "loss": "paper"}})
    for algo, mult, violation, noise, seed in (CASES[5], CASES[8]):
        cnets, nets, params, normalizer, crax_norm, data = setup(CFG, seed, noise)
        key = jax.random.PRNGKey(seed)
        total, _, _ = our_loss_and_grads(legacy, nets, params, normalizer, data, algo, mult, violation, key)
        c_total, _ = crax_loss_and_grads(monkeypatch, CFG, cnets, params, crax_norm, data, algo,
                                         _aux(algo, mult, violation), key)
        assert abs(float(total) - float(c_total)) > 1e-3, algo


# ------------------------------------------------------------------------------- multiplier updates
MEAN_COSTS = (0.0, 0.03, BOUND / T, 0.08, 0.5)
"""Per-step mean costs below, at and above d/T = 0.05."""


@pytest.mark.parametrize("algo, starts", [("ppo_lag", (0.0, 0.02, 1.3)), ("p3o", (0.01, 0.02, 49.0, 50.0)),
                                          ("focops", (0.0, 0.1, 99.99, 100.0))])
def test_multiplier_updates_equal_crax(monkeypatch: pytest.MonkeyPatch, algo: str, starts: tuple[float, ...]) -> None:
    kw = crax_hooks(monkeypatch, algo, CFG, BOUND)
    init = kw["init_aux_state_fn"]()
    ours0 = algorithm(algo).initial_multiplier(CFG)
    np.testing.assert_allclose(float(np.ravel(init[0] if algo == "p3o" else init)[0]), ours0, rtol=1e-7)
    rng = np.random.default_rng(0)
    for start in starts:
        for mean_cost in MEAN_COSTS:
            # crax averages the last epoch's per-minibatch mean costs: the batch mean, minibatches equal-sized
            mb = rng.permutation(np.full(CFG.num_minibatches * 4, mean_cost, np.float32)
                                 + rng.normal(0, 0.01, CFG.num_minibatches * 4).astype(np.float32))
            per_mb = mb.reshape(CFG.num_minibatches, 4).mean(1)
            metrics = {"mean_cost": jnp.asarray(np.stack([per_mb * 0 + 9.0, per_mb]))}  # [epochs, minibatches]
            state = ppo_train.TrainingState(optimizer_state=None, params=None, normalizer_params=None,
                                            env_steps=None, aux_state=_aux(algo, start, 0.0))
            new, _ = kw["post_step_fn"](state, metrics)
            batch_mean = jnp.float32(mb.mean())
            ours = algorithm(algo).multiplier_update(CFG, jnp.float32(start), batch_mean,
                                                     jnp.float32(d_step(CFG, BOUND)))
            theirs = new.aux_state[0] if algo == "p3o" else new.aux_state
            np.testing.assert_allclose(float(ours), float(np.ravel(theirs)[0]), rtol=1e-6, atol=1e-7,
                                       err_msg=f"{algo} start {start} cost {mean_cost}")
            if algo == "p3o":  # the violation the next update's loss sees (core: last_violation)
                np.testing.assert_allclose(float(batch_mean - d_step(CFG, BOUND)),
                                           float(np.ravel(new.aux_state[1])[0]), rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------------------------- advantage estimator
@pytest.mark.parametrize("seed", range(4))
def test_brax_gae_equals_crax_compute_gae(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_t, n_b = 9, 7
    f = functools.partial(jnp.asarray, dtype=jnp.float32)
    r, v, boot = f(rng.normal(size=(n_t, n_b))), f(rng.normal(size=(n_t, n_b))), f(rng.normal(size=n_b))
    term = rng.random((n_t, n_b)) < 0.15
    trunc = f((rng.random((n_t, n_b)) < 0.15) & ~term)
    vs, adv = L.brax_gae(r, v, boot, f(term), trunc, 0.99, 0.95)
    c_vs, c_adv = ppo_losses.compute_gae(truncation=trunc, termination=f(term), rewards=r, values=v,
                                         bootstrap_value=boot, lambda_=0.95, discount=0.99)
    np.testing.assert_allclose(vs, c_vs, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(adv, c_adv, rtol=1e-6, atol=1e-6)
    g_vs, g_adv = L.gae(r, v, boot, f(term), trunc, 0.99, 0.95)
    np.testing.assert_allclose(g_vs, c_vs, rtol=1e-6, atol=1e-6)  # same value targets
    assert not np.allclose(g_adv, c_adv, atol=1e-3)  # other advantages


# ------------------------------------------------------------------------------------- resets
class _LayoutEnv:
    """A fake crax env: reset draws a 'layout' u into the physics state; every step pays reward u and
    advances a counter in `info` (which crax's AutoResetWrapper does not restore)."""

    def reset(self, rng: jax.Array) -> Any:
        from crax.envs.base import State

        u = jax.random.uniform(rng, ())
        zero = jnp.zeros(())
        return State(pipeline_state=jnp.stack([u, zero]), obs=jnp.stack([u, zero, zero]), reward=zero, done=zero,
                     metrics={"cost": zero}, info={"cost": zero, "counter": zero})

    def step(self, state: Any, action: jax.Array) -> Any:
        u, t = state.pipeline_state[0], state.pipeline_state[1] + 1.0
        counter = state.info["counter"] + 1.0
        return state.replace(pipeline_state=jnp.stack([u, t]), obs=jnp.stack([u, t, counter]), reward=u,
                             done=jnp.zeros(()), info={**state.info, "counter": counter})


def test_replay_reset_matches_crax_autoreset() -> None:
    from crax.envs.wrappers.training import wrap

    env, n, t_len = _LayoutEnv(), 3, 4
    wrapped = wrap(env, episode_length=t_len)
    state = wrapped.reset(jax.random.split(jax.random.PRNGKey(0), n))
    crax_obs, crax_counter = [], []
    step = jax.jit(wrapped.step)
    for _ in range(3 * t_len):
        crax_obs.append(np.asarray(state.obs))
        crax_counter.append(np.asarray(state.info["counter"]))
        state = step(state, jnp.zeros((n, 1)))
    crax_obs = np.stack(crax_obs)  # [3T, n, 3]

    fns = EnvFns(reset=env.reset, step=env.step,
                 observe=lambda s: (s.obs, s.reward, s.info["cost"], s.done), obs_size=3, action_size=1,
                 name="layout", restore=autoreset_restore)
    cfg = TrainConfig(total_env_steps=3 * n * t_len, episode_length=t_len, num_envs=n, unroll_length=t_len,
                      batch_size=n, num_minibatches=1, num_epochs=1, policy_hidden=(4,), value_hidden=(4,),
                      cost_value_hidden=(4,), eval_episodes=2)
    for reset in ("replay", "fresh"):
        tr = make_train(with_overrides(cfg, {"reset": reset}), fns)
        st, iterate = tr.init(jax.random.PRNGKey(0), 0, 0.0, 0.1), jax.jit(tr.iterate)
        rewards = []
        for _ in range(3):
            st, out = iterate(st)
            rewards.append(np.asarray(out.episodes.reward[0]))
        rewards = np.stack(rewards)  # [iterates, n]: T u per episode
        if reset == "replay":  # the same layout every episode, as crax
            np.testing.assert_allclose(rewards, np.broadcast_to(rewards[0], rewards.shape), rtol=1e-6)
        else:
            assert not np.allclose(rewards[1], rewards[0])
    # crax: obs at the start of every episode is the first obs (u, t=0) while info's counter carries on
    for k in range(3):
        np.testing.assert_allclose(crax_obs[k * t_len, :, :2], crax_obs[0, :, :2])
    assert (crax_counter[2 * t_len] == 2 * t_len).all()
    # ours restores the same way: pipeline state and obs from the first state, info carried on
    first = env.reset(jax.random.PRNGKey(1))
    later = env.step(env.step(first, jnp.zeros(1)), jnp.zeros(1))
    back = autoreset_restore(first, later)
    np.testing.assert_array_equal(back.obs, first.obs)
    np.testing.assert_array_equal(back.pipeline_state, first.pipeline_state)
    assert float(back.info["counter"]) == 2.0
