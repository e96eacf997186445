"""Parity of the off-policy core with crax-bench's own SAC, SAC-Lag and SAC-PID on the same batch.

crax's loss closures come from its module-level `make_losses` (sac, sac_lag); its whole gradient step
(`sgd_step`: temperature, critic, cost critic, actor, soft target updates, lambda/PID update, in crax's order
and with crax's key splits) and its lambda update closures are captured from `train()` itself: `jax.pmap` is
replaced while `train()` runs, and the closure variables of the function it hands to `jax.pmap(training_epoch)`
are read before `train()` is stopped (no env, no compile of MJX). The same batch, parameters, normaliser and
keys then go through crax's code and `train.offpolicy`: losses to rtol 1e-5, every gradient leaf to rtol 2e-4
/ atol 1e-6, whole steps (new networks, targets, Adam states, log alpha, lambda, PID state) to rtol 1e-4 /
atol 1e-6. The replay buffer is checked against crax's `UniformSamplingQueue`: the very same samples.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.crax
pytest.importorskip("crax")
jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from train.envs import import_crax  # noqa: E402
from train.multipliers import PidConfig, PIDState, pid_init  # noqa: E402
from train.nets import normalizer_init, normalizer_update  # noqa: E402
from train.offpolicy import OffPolicyConfig, SacLagConfig  # noqa: E402
from train.offpolicy import losses as L  # noqa: E402
from train.offpolicy.base import OffPolicyAlgorithm  # noqa: E402
from train.offpolicy.core import Learner, OffPolicyParams, OptStates, TargetParams, make_offpolicy_train  # noqa: E402
from train.offpolicy.replay import replay_init, replay_insert, replay_sample  # noqa: E402
from train.offpolicy.sac_lag import SAC_LAG  # noqa: E402
from train.offpolicy.sac_pid import SAC_PID  # noqa: E402
from train.registry import algorithm  # noqa: E402
from train.toy import make_toy_env  # noqa: E402

import_crax()
sac_losses = importlib.import_module("crax.training.agents.sac.losses")
sac_networks = importlib.import_module("crax.training.agents.sac.networks")
sac_train = importlib.import_module("crax.training.agents.sac.train")
lag_losses = importlib.import_module("crax.training.agents.sac_lag.losses")
lag_networks = importlib.import_module("crax.training.agents.sac_lag.networks")
lag_train = importlib.import_module("crax.training.agents.sac_lag.train")
pid_train = importlib.import_module("crax.training.agents.sac_pid.train")
running_statistics = importlib.import_module("crax.training.acme.running_statistics")
replay_buffers = importlib.import_module("crax.training.replay_buffers")
crax_types = importlib.import_module("crax.training.types")

OBS, ACT, B, T, BOUND = 6, 2, 32, 40, 2.0
HIDDEN = (16, 16)
CFG = OffPolicyConfig(episode_length=T, num_envs=4, batch_size=B, grad_updates_per_step=2, max_replay_size=1000,
                      hidden=HIDDEN, learning_rate=1e-3, reward_scaling=0.1,
                      sac_lag=SacLagConfig(lr=5.0, init=0.0, lambda_max=2.0))
LOSS_RTOL, GRAD_RTOL, GRAD_ATOL = 1e-5, 2e-4, 1e-6
STEP_RTOL, STEP_ATOL = 1e-4, 1e-6


@pytest.fixture(scope="module", autouse=True)
def _compile_cache() -> None:
    """The persistent compile cache `saferl train` uses (SAFERL_JAX_CACHE; "" disables it)."""
    cache = os.environ.get("SAFERL_JAX_CACHE", str(Path.home() / ".cache" / "saferl" / "jax"))
    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


class _Stop(Exception):
    """Raised in place of crax's `jax.pmap(training_epoch)`: everything needed has been captured."""


def _closure(fn: Any) -> dict[str, Any]:
    return dict(inspect.getclosurevars(fn).nonlocals)


def crax_step(monkeypatch: pytest.MonkeyPatch, algo: str, cfg: OffPolicyConfig, bound: float) -> dict[str, Any]:
    """crax's `sgd_step` (and, for SAC-Lag/PID, `lambda_update_fn`) as built by `<algo>.train()`.

    Every value is passed explicitly from `cfg` (crax's keyword defaults differ from its CLI's)."""
    captured: dict[str, Any] = {}

    def fake_pmap(fn: Any, *args: Any, **kwargs: Any) -> Any:
        if fn.__name__ == "training_epoch":
            step = _closure(_closure(fn)["training_step"])["sgd_step"]
            captured["sgd_step"] = step
            captured.update({k: v for k, v in _closure(step).items() if k in ("lambda_update_fn", "tau")})
            raise _Stop
        return fn

    env = SimpleNamespace(observation_size=OBS, action_size=ACT)
    lag_factory = functools.partial(lag_networks.make_sac_lag_networks, hidden_layer_sizes=cfg.hidden)
    common = dict(environment=env, num_timesteps=100_000, episode_length=cfg.episode_length, wrap_env=False,
                  num_envs=cfg.num_envs, learning_rate=cfg.learning_rate, discounting=cfg.discount, seed=0,
                  batch_size=cfg.batch_size, normalize_observations=cfg.normalize_observations,
                  reward_scaling=cfg.reward_scaling, tau=cfg.tau, min_replay_size=cfg.min_replay_size,
                  max_replay_size=cfg.max_replay_size, grad_updates_per_step=cfg.grad_updates_per_step)
    with monkeypatch.context() as m:
        m.setattr(jax, "pmap", fake_pmap)
        with pytest.raises(_Stop):
            if algo == "sac":
                sac_train.train(**common, network_factory=functools.partial(
                    sac_networks.make_sac_networks, hidden_layer_sizes=cfg.hidden))
            elif algo == "sac_lag":
                c = cfg.sac_lag
                lag_train.train(**common, network_factory=lag_factory, safety_bound=bound, lagrangian_lr=c.lr,
                                initial_lambda=c.init, lambda_max=c.lambda_max)
            else:
                c = cfg.sac_pid
                pid_train.train(**common, network_factory=lag_factory, safety_bound=bound, initial_lambda=c.init,
                                pid_kp=c.kp, pid_ki=c.ki, pid_kd=c.kd, pid_integral_clip=c.integral_clip,
                                pid_lambda_clip=c.lambda_max, pid_deriv_ema_beta=c.derivative_ema)
    return captured


def crax_nets(algo: str, normalize: bool = True) -> Any:
    pre = running_statistics.normalize if normalize else crax_types.identity_observation_preprocessor
    if algo == "sac":
        return sac_networks.make_sac_networks(OBS, ACT, preprocess_observations_fn=pre, hidden_layer_sizes=HIDDEN)
    return lag_networks.make_sac_lag_networks(OBS, ACT, preprocess_observations_fn=pre, hidden_layer_sizes=HIDDEN)


def make_batch(seed: int, n: int = B) -> L.Transition:
    """A replay batch: terminations, truncations (done, discount 0) and 0/0.1 costs in it."""
    rng = np.random.default_rng(seed)
    f = functools.partial(jnp.asarray, dtype=jnp.float32)
    term = rng.random(n) < 0.1
    trunc = (rng.random(n) < 0.15) & ~term
    return L.Transition(f(rng.normal(1.0, 2.0, (n, OBS))), f(np.tanh(rng.normal(0.0, 1.0, (n, ACT)))),
                        f(rng.normal(1.0, 1.0, n)), f(0.1 * (rng.random(n) < 0.4)), f(1.0 - (term | trunc)),
                        f(trunc), f(rng.normal(1.0, 2.0, (n, OBS))))


def to_crax(data: L.Transition, with_cost: bool = True) -> Any:
    extras = {"truncation": data.truncation, **({"cost": data.cost} if with_cost else {})}
    return crax_types.Transition(observation=data.obs, action=data.action, reward=data.reward,
                                 discount=data.discount, next_observation=data.next_obs,
                                 extras={"policy_extras": {}, "state_extras": extras})


def normalizers(seed: int) -> tuple[Any, Any]:
    rng = np.random.default_rng(100 + seed)
    ours = normalizer_update(normalizer_init(OBS), jnp.asarray(rng.normal(1.0, 2.0, (64, OBS)), jnp.float32))
    theirs = running_statistics.RunningStatisticsState(mean=ours.mean, std=ours.std, count=ours.count,
                                                       summed_variance=ours.summed_variance)
    return ours, theirs


@functools.cache
def our_step(cost_critic: bool) -> Any:
    """Our jitted `sgd_step` (one compile per program kind for the whole module)."""
    return jax.jit(our_trainer(cost_critic).sgd_step)


def our_trainer(cost_critic: bool = True) -> Any:
    """Our trainer for OBS/ACT-sized batches (its `sgd_step` touches no env: the toy's functions, other sizes)."""
    env = make_toy_env()._replace(obs_size=OBS, action_size=ACT)
    return make_offpolicy_train(CFG, env, cost_critic=cost_critic, memory=(2**40, "test"))


def init_params(seed: int) -> OffPolicyParams:
    nets = lag_networks.make_sac_lag_networks(OBS, ACT, preprocess_observations_fn=running_statistics.normalize,
                                              hidden_layer_sizes=HIDDEN)
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    return OffPolicyParams(nets.policy_network.init(k1), nets.q_network.init(k2), nets.qc_network.init(k3))


def our_nets() -> Any:
    from train.offpolicy.networks import make_sac_networks

    return make_sac_networks(OBS, ACT, HIDDEN, True)


def assert_close(ours: Any, theirs: Any, what: str, rtol: float = GRAD_RTOL, atol: float = GRAD_ATOL) -> None:
    flat_o, flat_t = jax.tree_util.tree_leaves_with_path(ours), jax.tree_util.tree_leaves(theirs)
    assert len(flat_o) == len(flat_t), what
    for (path, a), b in zip(flat_o, flat_t, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol,
                                   err_msg=f"{what} {jax.tree_util.keystr(path)}")


# ------------------------------------------------------------------------------------------ networks
def test_networks_are_crax_networks() -> None:
    """crax's parameter trees load into ours unchanged and give the same outputs."""
    cn, nets = crax_nets("sac_lag"), our_nets()
    params = init_params(0)
    ours = OffPolicyParams(nets.policy_network.init(jax.random.PRNGKey(1)), nets.q_network.init(jax.random.PRNGKey(2)),
                           nets.cost_q_network.init(jax.random.PRNGKey(3)))
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(params)
    assert [x.shape for x in jax.tree_util.tree_leaves(ours)] == [x.shape for x in jax.tree_util.tree_leaves(params)]
    norm, cnorm = normalizers(0)
    data = make_batch(0)
    np.testing.assert_allclose(nets.policy_network.apply(norm, params.policy, data.obs),
                               cn.policy_network.apply(cnorm, params.policy, data.obs), rtol=1e-6, atol=1e-6)
    q = nets.q_network.apply(norm, params.q, data.obs, data.action)
    assert q.shape == (B, 2) and not np.allclose(q[:, 0], q[:, 1])  # two independent heads
    np.testing.assert_allclose(q, cn.q_network.apply(cnorm, params.q, data.obs, data.action), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(nets.cost_q_network.apply(norm, params.cost_q, data.obs, data.action),
                               cn.qc_network.apply(cnorm, params.cost_q, data.obs, data.action), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------ losses
@pytest.mark.parametrize("seed, log_alpha", [(0, 0.0), (1, -1.3)])
def test_alpha_loss_and_gradient_equal_crax(seed: int, log_alpha: float) -> None:
    cn, nets, params = crax_nets("sac"), our_nets(), init_params(seed)
    norm, cnorm = normalizers(seed)
    data, key = make_batch(seed), jax.random.PRNGKey(10 + seed)
    c_alpha, _, _ = sac_losses.make_losses(cn, CFG.reward_scaling, CFG.discount, ACT)
    la = jnp.float32(log_alpha)
    ours = jax.value_and_grad(L.alpha_loss)(la, params.policy, norm, data.obs, key, nets, -0.5 * ACT)
    theirs = jax.value_and_grad(c_alpha)(la, params.policy, cnorm, to_crax(data, False), key)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=LOSS_RTOL)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=GRAD_RTOL)
    assert abs(float(ours[1])) > 1e-3  # a real gradient


@pytest.mark.parametrize("seed, alpha", [(0, 1.0), (1, 0.2)])
def test_critic_losses_and_gradients_equal_crax(seed: int, alpha: float) -> None:
    cn, nets, params = crax_nets("sac_lag"), our_nets(), init_params(seed)
    target = init_params(seed + 50)  # targets differ from the online networks
    norm, cnorm = normalizers(seed)
    data, key = make_batch(seed), jax.random.PRNGKey(20 + seed)
    _, c_critic, c_cost, _ = lag_losses.make_losses(cn, CFG.reward_scaling, CFG.discount, ACT)
    a = jnp.float32(alpha)
    ours = jax.value_and_grad(L.critic_loss)(params.q, params.policy, norm, target.q, a, data, key, nets,
                                             CFG.reward_scaling, CFG.discount)
    theirs = jax.value_and_grad(c_critic)(params.q, params.policy, cnorm, target.q, a, to_crax(data), key)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=LOSS_RTOL)
    assert_close(ours[1], theirs[1], "critic")
    ours = jax.value_and_grad(L.cost_critic_loss)(params.cost_q, params.policy, norm, target.cost_q, data, key, nets,
                                                  CFG.discount)
    theirs = jax.value_and_grad(c_cost)(params.cost_q, params.policy, cnorm, target.cost_q, to_crax(data), key)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=LOSS_RTOL)
    assert_close(ours[1], theirs[1], "cost critic")
    # plain SAC's critic closure is the same function
    _, s_critic, _ = sac_losses.make_losses(crax_nets("sac"), CFG.reward_scaling, CFG.discount, ACT)
    np.testing.assert_allclose(L.critic_loss(params.q, params.policy, norm, target.q, a, data, key, nets,
                                             CFG.reward_scaling, CFG.discount),
                               s_critic(params.q, params.policy, cnorm, target.q, a, to_crax(data, False), key),
                               rtol=LOSS_RTOL)


def test_truncated_steps_carry_no_critic_signal() -> None:
    """Masking is real: a batch whose every step is truncated has zero critic and cost-critic loss."""
    nets, params, (norm, _) = our_nets(), init_params(3), normalizers(3)
    data = make_batch(3)
    data = data._replace(truncation=jnp.ones_like(data.truncation), discount=jnp.zeros_like(data.discount))
    key = jax.random.PRNGKey(0)
    assert float(L.critic_loss(params.q, params.policy, norm, params.q, 1.0, data, key, nets, 0.1, 0.99)) == 0.0
    assert float(L.cost_critic_loss(params.cost_q, params.policy, norm, params.cost_q, data, key, nets, 0.99)) == 0.0


@pytest.mark.parametrize("algo, lam, alpha, seed", [("sac", 0.0, 1.0, 0), ("sac_lag", 0.0, 0.5, 1),
                                                    ("sac_lag", 0.7, 0.5, 2), ("sac_lag", 2.0, 0.1, 3)])
def test_actor_loss_and_gradient_equal_crax(algo: str, lam: float, alpha: float, seed: int) -> None:
    cn, nets, params = crax_nets(algo), our_nets(), init_params(seed)
    norm, cnorm = normalizers(seed)
    data, key = make_batch(seed), jax.random.PRNGKey(30 + seed)
    a = jnp.float32(alpha)
    if algo == "sac":
        _, _, c_actor = sac_losses.make_losses(cn, CFG.reward_scaling, CFG.discount, ACT)
        theirs = jax.value_and_grad(c_actor)(params.policy, cnorm, params.q, a, to_crax(data, False), key)
        qc = None
    else:
        _, _, _, c_actor = lag_losses.make_losses(cn, CFG.reward_scaling, CFG.discount, ACT)
        theirs = jax.value_and_grad(c_actor)(params.policy, cnorm, params.q, params.cost_q, a, jnp.float32(lam),
                                             to_crax(data), key)
        qc = params.cost_q
    ours = jax.value_and_grad(L.actor_loss)(params.policy, norm, params.q, qc, a, jnp.float32(lam), data.obs, key,
                                            nets)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=LOSS_RTOL)
    assert_close(ours[1], theirs[1], f"{algo} actor")
    if lam > 0:  # the penalty really enters: without it the loss differs
        plain = L.actor_loss(params.policy, norm, params.q, None, a, jnp.float32(lam), data.obs, key, nets)
        assert abs(float(plain) - float(ours[0])) > 1e-4


# ------------------------------------------------------------------------------------------ multipliers
MEAN_COSTS = (0.0, 0.02, BOUND / T, 0.08, 0.5, 3.0)
"""Minibatch mean per-step costs below, at and above d/T = 0.05."""


def test_lagrange_update_equals_crax(monkeypatch: pytest.MonkeyPatch) -> None:
    fn = crax_step(monkeypatch, "sac_lag", CFG, BOUND)["lambda_update_fn"]
    d = jnp.float32(BOUND / T)
    capped = 0
    for lam in (0.0, 0.01, 1.0, 1.999, 2.0):
        for c in MEAN_COSTS:
            theirs, _, _ = fn(jnp.float32(lam), (), jnp.float32(c))
            ours, _ = SAC_LAG.multiplier_update(CFG, jnp.float32(lam), pid_init(), jnp.float32(c), d)
            np.testing.assert_allclose(float(ours), float(theirs), rtol=1e-6, atol=1e-8, err_msg=f"{lam} {c}")
            capped += float(ours) == CFG.sac_lag.lambda_max
    assert capped >= 3  # the cap at lambda_max was exercised


def test_pid_update_equals_crax(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = OffPolicyConfig(episode_length=T, num_envs=4, batch_size=B, max_replay_size=1000, hidden=HIDDEN,
                          sac_pid=PidConfig(lambda_max=3.0, integral_clip=0.2))
    fn = crax_step(monkeypatch, "sac_pid", cfg, BOUND)["lambda_update_fn"]
    rng = np.random.default_rng(0)
    lam_c, aux = jnp.float32(0.0), (jnp.float32(0.0),) * 3
    lam_o, pid = jnp.float32(0.0), pid_init()
    seen = set()
    for i in range(60):
        c = jnp.float32(rng.choice(MEAN_COSTS) if i % 3 else rng.uniform(0, 0.1))
        lam_c, aux, _ = fn(lam_c, aux, c)
        lam_o, pid = SAC_PID.multiplier_update(cfg, lam_o, pid, c, jnp.float32(BOUND / T))
        np.testing.assert_allclose(float(lam_o), float(lam_c), rtol=1e-5, atol=1e-7, err_msg=f"step {i}")
        np.testing.assert_allclose(np.array(pid), np.array(aux), rtol=1e-5, atol=1e-7, err_msg=f"step {i}")
        seen.add("clip" if float(lam_o) == 3.0 else "zero" if float(lam_o) == 0.0 else "free")
        seen.add("windup" if abs(float(pid.integral)) == float(np.float32(0.2)) else "")
    assert {"clip", "zero", "free", "windup"} <= seen


# ------------------------------------------------------------------------------------------ whole steps
def _learner(seed: int, lam: float, pid: PIDState) -> Learner:
    """A learner a few steps into training: targets off the online nets, Adam moments non-zero."""
    import optax

    params, target = init_params(seed), init_params(seed + 7)
    tx = optax.adam(CFG.learning_rate)
    rng = np.random.default_rng(seed)

    def moved(tree: Any) -> Any:
        state = tx.init(tree)
        for _ in range(2):
            g = jax.tree_util.tree_map(lambda x: jnp.asarray(rng.normal(0, 0.1, x.shape), x.dtype), tree)
            _, state = tx.update(g, state)
        return state

    log_alpha = jnp.float32(-0.4)
    alpha_opt = optax.adam(CFG.alpha_learning_rate).init(log_alpha)
    return Learner(params, TargetParams(target.q, target.cost_q), log_alpha,
                   OptStates(moved(params.policy), moved(params.q), moved(params.cost_q), alpha_opt),
                   jnp.float32(lam), pid)


def _crax_state(mod: Any, ln: Learner, cnorm: Any, algo: str) -> Any:
    zero = crax_types.UInt64(hi=0, lo=0)
    common = dict(policy_optimizer_state=ln.opt_state.policy, policy_params=ln.params.policy,
                  q_optimizer_state=ln.opt_state.q, q_params=ln.params.q, target_q_params=ln.target.q,
                  gradient_steps=zero, env_steps=zero, alpha_optimizer_state=ln.opt_state.alpha,
                  alpha_params=ln.log_alpha, normalizer_params=cnorm)
    if algo == "sac":
        return mod.TrainingState(**common)
    aux = tuple(ln.pid) if algo == "sac_pid" else ()
    return mod.TrainingState(**common, qc_optimizer_state=ln.opt_state.cost_q, qc_params=ln.params.cost_q,
                             target_qc_params=ln.target.cost_q, lambda_lagr=ln.multiplier, aux_state=aux)


@pytest.mark.parametrize("algo, lam, seed", [("sac", 0.0, 0), ("sac_lag", 0.3, 1), ("sac_lag", 1.99, 2),
                                             ("sac_pid", 0.5, 3)])
def test_whole_gradient_step_equals_crax(monkeypatch: pytest.MonkeyPatch, algo: str, lam: float, seed: int) -> None:
    """crax's sgd_step and ours from the same state, batch and key: networks, targets, Adam states, log alpha,
    lambda and the PID state after the step, and the step's losses."""
    cap = crax_step(monkeypatch, algo, CFG, BOUND)
    mod = {"sac": sac_train, "sac_lag": lag_train, "sac_pid": lag_train}[algo]
    pid = PIDState(jnp.float32(0.1), jnp.float32(0.02), jnp.float32(-0.01)) if algo == "sac_pid" else pid_init()
    ln = _learner(seed, lam, pid)
    norm, cnorm = normalizers(seed)
    data, key = make_batch(seed), jax.random.PRNGKey(40 + seed)
    cstate = _crax_state(mod, ln, cnorm, algo)
    one = functools.partial(jax.tree_util.tree_map, lambda x: jnp.asarray(x)[None])
    (c_new, c_key), c_mets = jax.vmap(cap["sgd_step"], axis_name="i")(one((cstate, key)),
                                                                      one(to_crax(data, algo != "sac")))
    c_new, c_key, c_mets = jax.tree_util.tree_map(lambda x: x[0], (c_new, c_key, c_mets))
    new, new_key, mets = our_step(algo != "sac")(ln, key, data, norm, jnp.int32(algorithm(algo, OffPolicyAlgorithm).id),
                                                   jnp.float32(BOUND / T))
    np.testing.assert_array_equal(new_key, c_key)  # same key stream
    kw = dict(rtol=STEP_RTOL, atol=STEP_ATOL)
    assert_close(new.params.policy, c_new.policy_params, "policy", **kw)
    assert_close(new.params.q, c_new.q_params, "q", **kw)
    assert_close(new.target.q, c_new.target_q_params, "target q", **kw)
    assert_close(new.opt_state.policy, c_new.policy_optimizer_state, "policy adam", **kw)
    assert_close(new.opt_state.q, c_new.q_optimizer_state, "q adam", **kw)
    assert_close(new.opt_state.alpha, c_new.alpha_optimizer_state, "alpha adam", **kw)
    np.testing.assert_allclose(new.log_alpha, c_new.alpha_params, **kw)
    for name in ("critic_loss", "actor_loss", "alpha_loss"):
        np.testing.assert_allclose(mets[name], c_mets[name], rtol=LOSS_RTOL, err_msg=name)
    # the step moved things (so equality is not vacuous); targets move by tau only
    assert not np.allclose(new.params.q["params"]["MLP_0"]["hidden_0"]["kernel"],
                           ln.params.q["params"]["MLP_0"]["hidden_0"]["kernel"])
    if algo == "sac":
        assert_close(new.params.cost_q, ln.params.cost_q, "untouched cost q", rtol=0, atol=0)
        return
    assert_close(new.params.cost_q, c_new.qc_params, "cost q", **kw)
    assert_close(new.target.cost_q, c_new.target_qc_params, "target cost q", **kw)
    assert_close(new.opt_state.cost_q, c_new.qc_optimizer_state, "cost q adam", **kw)
    np.testing.assert_allclose(mets["cost_critic_loss"], c_mets["cost_critic_loss"], rtol=LOSS_RTOL)
    np.testing.assert_allclose(mets["batch_cost"], c_mets["mean_cost"], rtol=1e-6)
    np.testing.assert_allclose(new.multiplier, c_new.lambda_lagr, rtol=1e-6, atol=1e-8)
    assert float(new.multiplier) != lam
    if algo == "sac_pid":
        np.testing.assert_allclose(np.array(new.pid), np.array(c_new.aux_state), rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------------------------------ replay
@pytest.mark.parametrize("capacity, n, m", [(10, 3, 8), (12, 4, 5), (7, 7, 20)])
def test_replay_samples_equal_crax_uniform_queue(capacity: int, n: int, m: int) -> None:
    """Same inserts (wrapping, capacity not a multiple of the insert size) and key: the very same rows."""
    width = 5
    queue = replay_buffers.UniformSamplingQueue(max_replay_size=capacity, dummy_data_sample=jnp.zeros(width),
                                                sample_batch_size=m)
    key = jax.random.PRNGKey(7)
    theirs, ours = queue.init(key), replay_init(capacity, width, key)
    rng = np.random.default_rng(capacity)
    for i in range(9):
        rows = jnp.asarray(rng.normal(size=(n, width)) + 100 * i, jnp.float32)
        theirs, ours = queue.insert(theirs, rows), replay_insert(ours, rows)
        assert int(ours.size) == int(queue.size(theirs)) == min((i + 1) * n, capacity)
        theirs, t_rows = queue.sample(theirs)
        ours, o_rows = replay_sample(ours, m)
        np.testing.assert_array_equal(np.asarray(o_rows), np.asarray(t_rows), err_msg=f"insert {i}")
    inserts = (np.asarray(o_rows)[:, 0] + 50) // 100  # which insert each sampled row came from
    assert inserts.min() >= 9 - math.ceil(capacity / n)  # only the last `capacity` rows are left
