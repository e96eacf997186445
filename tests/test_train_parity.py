"""Parity with crax-bench's own trainers: the same batch through crax's loss and update code and ours.

For each algorithm one batch (observations, raw actions, behaviour log-probs, rewards, costs, termination
and truncation flags, the networks' values, the multiplier) goes through crax's loss function - the very
closure its `train()` hands to the PPO core, captured by replacing `ppo_train.train` - and through
`train.onpolicy.core.make_loss`; losses and every gradient leaf must agree to float32 tolerance. The
multiplier updates (PPO-PID's whole PID state, CRPO's regime switch) go through crax's `post_step_fn` (same
capture) and `train.onpolicy.algorithms`; the advantage estimator through crax's `compute_gae` and
`train.onpolicy.losses.brax_gae`; the initial parameters of the policy and both critics through crax's own
`train()` (captured where it builds them); the reset semantics through crax's AutoResetWrapper and `reset =
"replay"` on a tiny fake env; PPO-Saute's budget, observed budget and shaped reward through crax's
SauteWrapper (inside crax's training wrappers) and our rollout of the Saute adapter on a fake env with
costs, terminations and time limits. No MJX is compiled: a minute in all.
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

from train.algorithm import d_step  # noqa: E402
from train.config import TrainConfig  # noqa: E402
from train.envs import EnvFns, autoreset_restore, import_crax  # noqa: E402
from train.nets import make_networks, normalizer_init, normalizer_update  # noqa: E402
from train.onpolicy import losses as L  # noqa: E402
from train.onpolicy.algorithms.base import STATE_SIZE  # noqa: E402
from train.onpolicy.core import LossContext, Params, Transition, make_loss, make_train  # noqa: E402
from train.overrides import with_overrides  # noqa: E402
from train.registry import algorithm  # noqa: E402

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
    elif algo == "ppo_pid":
        pc = cfg.ppo_pid
        mod.train(**common, clipping_epsilon=cfg.clip_epsilon, initial_lambda_lagr=pc.init, pid_kp=pc.kp,
                  pid_ki=pc.ki, pid_kd=pc.kd, pid_integral_clip=pc.integral_clip, pid_lambda_clip=pc.lambda_max,
                  pid_deriv_ema_beta=pc.derivative_ema)
    elif algo == "crpo":
        mod.train(**common, clipping_epsilon=cfg.clip_epsilon, crpo_eta=cfg.crpo.eta)
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
                       algo: str, mult: float, last_violation: float, key: jax.Array,
                       state: tuple[float, ...] = ()) -> tuple[Any, Any, Any]:
    loss = make_loss(cfg, nets, cost_critic=algorithm(algo).cost_critic)  # as the runner builds it
    ctx = LossContext(jnp.int32(algorithm(algo).id), jnp.float32(mult), jnp.float32(d_step(cfg, BOUND)),
                      jnp.float32(last_violation), jnp.asarray(state + (0.0,) * (STATE_SIZE - len(state)), jnp.float32))
    (total, mets), grads = jax.value_and_grad(loss, has_aux=True)(params, normalizer, data, ctx, key)
    return total, mets, grads


def crax_loss_and_grads(monkeypatch: pytest.MonkeyPatch, cfg: TrainConfig, cnets: Any, params: Params,
                        crax_norm: Any, data: Transition, algo: str, aux: Any, key: jax.Array) -> tuple[Any, Any]:
    cparams = ppo_losses.PPONetworkParams(policy=params.policy, value=params.value, cost_value=params.cost_value)
    cdata = to_crax(data)
    if algo in ("ppo", "ppo_saute"):  # crax's PPO core (PPO-Saute: on the Saute env): compute_ppo_loss
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
        # the recorded approx_kl is this very estimate (crax's k3, not the closed-form Gaussian KL)
        np.testing.assert_allclose(float(mets["approx_kl"]), batch_kl, rtol=1e-5, atol=1e-7)


BEYOND_CASES = [  # (algo, multiplier, algorithm state, log-prob noise, seed)
    ("ppo_pid", 0.0, (0.0, 0.0, 0.0), 0.3, 12),
    ("ppo_pid", 2.3, (0.4, 0.01, -0.002), 0.5, 13),   # lambda and PID state as after some updates
    ("crpo", 0.0, (1.0,), 0.4, 14),                   # reward step
    ("crpo", 0.0, (0.0,), 0.4, 15),                   # cost step: the clipped surrogate on -A_c
    ("ppo_saute", 0.0, (), 0.3, 17),                  # plain PPO on the Saute env's batch
]


def _crax_aux(algo: str, mult: float, state: tuple[float, ...]) -> Any:
    if algo == "ppo_pid":  # crax: (lambda, integral, previous error, derivative EMA), each [1]
        return tuple(jnp.array([x], jnp.float32) for x in (mult, *state))
    if algo == "crpo":
        return jnp.array([state[0]], jnp.float32)
    return None


@pytest.mark.parametrize("algo, mult, state, noise, seed", BEYOND_CASES)
def test_beyond_paper_losses_and_gradients_equal_crax(monkeypatch: pytest.MonkeyPatch, algo: str, mult: float,
                                                      state: tuple[float, ...], noise: float, seed: int) -> None:
    cnets, nets, params, normalizer, crax_norm, data = setup(CFG, seed, noise)
    key = jax.random.PRNGKey(1000 + seed)
    total, mets, grads = our_loss_and_grads(CFG, nets, params, normalizer, data, algo, mult, 0.0, key, state)
    c_total, c_grads = crax_loss_and_grads(monkeypatch, CFG, cnets, params, crax_norm, data, algo,
                                           _crax_aux(algo, mult, state), key)
    if algo == "ppo_saute":  # crax trains it with its plain PPO: no cost critic, as our Saute programs
        assert float(mets["cost_value_loss"]) == 0.0
        c_grads = c_grads.replace(cost_value=grads.cost_value)
    np.testing.assert_allclose(float(total), float(c_total), rtol=LOSS_RTOL, atol=1e-7)
    assert_trees_close(grads, Params(c_grads.policy, c_grads.value, c_grads.cost_value), algo)
    if algo == "crpo":  # the two regimes are different objectives (so the parity above is not vacuous)
        other, _, _ = our_loss_and_grads(CFG, nets, params, normalizer, data, algo, mult, 0.0, key,
                                         (1.0 - state[0],))
        assert abs(float(other) - float(total)) > 1e-3


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


@pytest.mark.parametrize("lambda0, kp", [(0.0, 10.0), (1.3, 10.0), (0.2, 3.0)])
def test_pid_updates_equal_crax(monkeypatch: pytest.MonkeyPatch, lambda0: float, kp: float) -> None:
    """A sequence of updates: crax's post_step_fn and ours carry lambda and the PID state along."""
    cfg = with_overrides(CFG, {"ppo_pid": {"init": lambda0, "kp": kp, "integral_clip": 0.05}})
    kw = crax_hooks(monkeypatch, "ppo_pid", cfg, BOUND)
    aux = kw["init_aux_state_fn"]()
    spec = algorithm("ppo_pid")
    mult, state = jnp.float32(spec.initial_multiplier(cfg)), jnp.zeros((STATE_SIZE,), jnp.float32)
    np.testing.assert_allclose(float(aux[0][0]), float(mult))
    rng = np.random.default_rng(int(10 * lambda0 + kp))
    # below, at, above d/T = 0.05, long enough for the integral to hit its clip and lambda to reach 0
    for mean_cost in (0.09, 0.12, 0.08, 0.05, 0.0, 0.0, 0.01, 0.3, 0.06, 0.0, 0.0, 0.0, 0.0):
        mb = (mean_cost + rng.normal(0, 0.005, CFG.num_minibatches * 4)).astype(np.float32)
        per_mb = mb.reshape(CFG.num_minibatches, 4).mean(1)
        ts = ppo_train.TrainingState(optimizer_state=None, params=None, normalizer_params=None, env_steps=None,
                                     aux_state=aux)
        new, _ = kw["post_step_fn"](ts, {"mean_cost": jnp.asarray(np.stack([per_mb * 0 + 9.0, per_mb]))})
        aux = new.aux_state
        mult, state = spec.step(cfg, mult, state, jnp.float32(mb.mean()), jnp.float32(d_step(cfg, BOUND)))
        theirs = [float(np.ravel(x)[0]) for x in aux]
        np.testing.assert_allclose([float(mult), *map(float, state[:3])], theirs, rtol=1e-5, atol=1e-6,
                                   err_msg=f"cost {mean_cost}")
    assert abs(float(state[0])) == pytest.approx(0.05)  # the anti-windup clip was reached


@pytest.mark.parametrize("eta", [0.0, 0.02])
def test_crpo_regime_switch_equals_crax(monkeypatch: pytest.MonkeyPatch, eta: float) -> None:
    cfg = with_overrides(CFG, {"crpo": {"eta": eta}})
    kw = crax_hooks(monkeypatch, "crpo", cfg, BOUND)
    spec = algorithm("crpo")
    np.testing.assert_allclose(np.ravel(kw["init_aux_state_fn"]()), spec.initial_state(cfg))  # a reward step first
    rng = np.random.default_rng(3)
    regimes = []
    for mean_cost in (0.0, 0.04, 0.06, 0.065, 0.08, 0.2):  # d/T = 0.05; d/T + 0.02 = 0.07
        mb = (mean_cost + rng.normal(0, 0.001, CFG.num_minibatches * 4)).astype(np.float32)
        per_mb = mb.reshape(CFG.num_minibatches, 4).mean(1)
        for before in (0.0, 1.0):
            ts = ppo_train.TrainingState(optimizer_state=None, params=None, normalizer_params=None, env_steps=None,
                                         aux_state=jnp.array([before], jnp.float32))
            new, _ = kw["post_step_fn"](ts, {"mean_cost": jnp.asarray(np.stack([per_mb, per_mb]))})
            state = jnp.array([before, 0.0, 0.0], jnp.float32)
            mult, state = spec.step(cfg, jnp.float32(0.0), state, jnp.float32(mb.mean()),
                                    jnp.float32(d_step(cfg, BOUND)))
            assert float(state[0]) == float(np.ravel(new.aux_state)[0]), (mean_cost, before)
            assert float(mult) == 0.0
        regimes.append(float(state[0]))
    assert regimes == ([1.0, 1.0, 0.0, 0.0, 0.0, 0.0] if eta == 0 else [1.0, 1.0, 1.0, 1.0, 0.0, 0.0])


# ----------------------------------------------------------------------------------- initial parameters
class _CapturedParams(Exception):
    """Raised by the stand-in for crax's `PPONetworkParams`: carries the initial parameters `train()` built."""


def crax_initial_params(monkeypatch: pytest.MonkeyPatch, seed: int) -> dict[str, Any]:
    """The policy and critic parameters crax's own `ppo.train()` starts seed `seed` from (on a 3-observation,
    1-action fake env, `CFG`'s hidden sizes), captured where it builds them, before anything is compiled."""

    class Env(_LayoutEnv):
        observation_size, action_size = 3, 1

    def capture(**params: Any) -> Any:
        raise _CapturedParams(params)

    monkeypatch.setattr(ppo_losses, "PPONetworkParams", capture)
    factory = functools.partial(ppo_networks.make_ppo_networks, policy_hidden_layer_sizes=CFG.policy_hidden,
                                value_hidden_layer_sizes=CFG.value_hidden,
                                cost_value_hidden_layer_sizes=CFG.cost_value_hidden)
    with pytest.raises(_CapturedParams) as info:
        ppo_train.train(environment=Env(), num_timesteps=1, episode_length=4, num_envs=4, batch_size=4,
                        num_minibatches=1, unroll_length=2, seed=seed, network_factory=factory,
                        normalize_observations=True)
    return info.value.args[0]


@pytest.mark.parametrize("seed", [0, 7])
def test_initial_parameters_equal_crax(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Seed for seed, our runs start from crax's parameters: the policy from its `key_policy`, the reward critic
    and the cost critic both from its `key_value` (so V_c starts as an exact copy of V_r)."""
    theirs = crax_initial_params(monkeypatch, seed)
    fns = EnvFns(reset=_LayoutEnv().reset, step=_LayoutEnv().step,
                 observe=lambda s: (s.obs, s.reward, s.info["cost"], s.done), obs_size=3, action_size=1,
                 name="layout", restore=autoreset_restore)
    cfg = TrainConfig(total_env_steps=16, episode_length=4, num_envs=4, unroll_length=2, batch_size=4,
                      num_minibatches=2, policy_hidden=CFG.policy_hidden, value_hidden=CFG.value_hidden,
                      cost_value_hidden=CFG.cost_value_hidden)
    ours = make_train(cfg, fns).init(jax.random.PRNGKey(seed), algorithm("ppo_lag").id, 0.0, 0.1).params
    for name in ("policy", "value", "cost_value"):
        leaves_o, leaves_t = jax.tree_util.tree_leaves(getattr(ours, name)), jax.tree_util.tree_leaves(theirs[name])
        assert len(leaves_o) == len(leaves_t) > 0, name
        for a, b in zip(leaves_o, leaves_t, strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
    for a, b in zip(jax.tree_util.tree_leaves(ours.value), jax.tree_util.tree_leaves(ours.cost_value), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # V_c = V_r at the start, as crax


# ------------------------------------------------------------------------------------ PPO-Saute budget
class _BudgetEnv:
    """A fake crax env for the Saute budget: reset draws u into the physics state; step t (counted in the
    physics state, so a replayed start restarts it) costs 0.6 every third step and 0.1 otherwise, pays reward
    1 + 0.1 t, and terminates at t = 4 where u < 0.4 (the others run into the time limit)."""

    def reset(self, rng: jax.Array) -> Any:
        from crax.envs.base import State

        u = jax.random.uniform(rng, ())
        zero = jnp.zeros(())
        return State(pipeline_state=jnp.stack([u, zero]), obs=jnp.stack([u, zero]), reward=zero, done=zero,
                     metrics={"cost": zero}, info={"cost": zero})

    def step(self, state: Any, action: jax.Array) -> Any:
        u, t = state.pipeline_state[0], state.pipeline_state[1] + 1.0
        cost = jnp.where(jnp.mod(t, 3.0) == 0.0, 0.6, 0.1)
        done = ((u < 0.4) & (t >= 4.0)).astype(jnp.float32)
        return state.replace(pipeline_state=jnp.stack([u, t]), obs=jnp.stack([u, t]), reward=1.0 + 0.1 * t,
                             done=done, info={**state.info, "cost": cost}, metrics={**state.metrics, "cost": cost})


@pytest.mark.parametrize("options", ["crax", "ours"])
def test_saute_budget_and_reward_equal_crax(options: str) -> None:
    """crax's SauteWrapper inside its training wrappers vs our rollout, step by step over restarts after
    terminations and time limits: observed budget, budget paid from, learner's reward. With crax's options
    (gamma_b = discount, reset at termination only) they agree; with ours (gamma_b = 1, a full budget every
    episode) they differ exactly after a time-limit restart."""
    from crax.envs.wrappers.saute import SauteWrapper
    from crax.envs.wrappers.training import wrap

    env, n, t_len, steps, bound = _BudgetEnv(), 6, 7, 30, 1.5
    cfg = TrainConfig(total_env_steps=n * t_len, episode_length=t_len, num_envs=n, unroll_length=t_len,
                      batch_size=n, num_minibatches=1, num_epochs=1, policy_hidden=(4,), value_hidden=(4,),
                      cost_value_hidden=(4,), eval_episodes=2)
    crax_cfg = with_overrides(cfg, {"ppo_saute": {"budget_discount": cfg.discount, "reset_budget": "termination"}})
    key = jax.random.PRNGKey(4)
    # crax: gamma_budget = the discount (its default), penalty -1, normalised budget observation
    wrapped = wrap(SauteWrapper(env, safety_bound=bound, gamma_budget=cfg.discount, violation_penalty=-1.0,
                                normalize_budget_obs=True), episode_length=t_len)
    state = wrapped.reset(jax.random.split(jax.random.split(key, 3)[1], n))  # the layouts our init draws
    step = jax.jit(wrapped.step)
    c_shown, c_budget, c_reward = [], [], []
    for _ in range(steps):
        c_shown.append(np.asarray(state.obs[:, -1]))
        c_budget.append(np.asarray(state.info["saute_budget"]))
        state = step(state, jnp.zeros((n, 1)))
        c_reward.append(np.asarray(state.reward))
    c_shown, c_budget, c_reward = map(np.stack, (c_shown, c_budget, c_reward))

    fns = EnvFns(reset=env.reset, step=env.step, observe=lambda s: (s.obs, s.reward, s.info["cost"], s.done),
                 obs_size=2, action_size=1, name="budget", restore=autoreset_restore)
    spec = algorithm("ppo_saute")
    tr = make_train(crax_cfg if options == "crax" else cfg, fns, cost_critic=False, adapter=spec.env_adapter)
    st = tr.init(key, spec.id, 0.0, bound / t_len)
    _, data = jax.jit(tr.unroll, static_argnums=1)(st, steps)
    shown, reward = np.asarray(data.obs[..., -1]), np.asarray(data.reward)
    budget = np.asarray(data.info["saute_budget"])  # the budget each step paid from
    assert tr.obs_size == 3 and data.obs.shape == (steps, n, 3)
    terminated = np.asarray(data.termination).any(0)
    assert terminated.any() and not terminated.all()  # both kinds of restart happen
    overdrawn = np.asarray(data.info["saute_penalty_share"])
    assert (overdrawn > 0).any() and (c_reward == -1.0).any()  # the penalty is exercised
    if options == "crax":
        np.testing.assert_allclose(shown, c_shown, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(budget, c_budget, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(reward, c_reward, rtol=1e-6)
        # crax's quirk, reproduced: after a time-limit restart the budget carries on, the observation is full
        late = ~terminated
        assert (c_budget[t_len, late] < bound - 1e-3).all() and np.allclose(c_shown[t_len, late], 1.0)
    else:
        np.testing.assert_allclose(budget[::t_len][:, ~terminated], bound, rtol=1e-6)  # full every episode
        assert not np.allclose(budget, c_budget, atol=1e-3)
        paid = np.concatenate([[0.0], np.cumsum([0.1, 0.1, 0.6, 0.1, 0.1, 0.6])])  # before steps 1..7
        late = budget[:t_len][:, ~terminated]  # gamma_b = 1: b_t = max(d - costs paid, 0)
        np.testing.assert_allclose(late, np.broadcast_to((bound - paid).clip(min=0.0)[:, None], late.shape), atol=1e-5)


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
