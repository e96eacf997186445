"""The off-policy core on its own: config and bad input, hand-computed losses and multiplier updates, the replay
buffer, tiny SAC / SAC-Lag / SAC-PID runs on the toy task, a vmapped group against its runs one by one, and
the resume point (state saved after iterate k and restored gives bit-identical iterates k+1..).

About a minute on 2 CPU cores (a handful of toy-sized compiles, cached in SAFERL_JAX_CACHE).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")
import jax.numpy as jnp  # noqa: E402

from cube.errors import CubeError  # noqa: E402
from cube.schema import RunKey  # noqa: E402
from train import checkpoint  # noqa: E402
from train.acting import eval_key  # noqa: E402
from train.algorithm import OFFPOLICY  # noqa: E402
from train.config import TrainConfig  # noqa: E402
from train.multipliers import pid_init, pid_update  # noqa: E402
from train.nets import normalizer_init  # noqa: E402
from train.offpolicy import OffPolicyConfig, SacLagConfig  # noqa: E402
from train.offpolicy import losses as L  # noqa: E402
from train.offpolicy.base import OffPolicyAlgorithm  # noqa: E402
from train.registry import algo_names, algorithm  # noqa: E402

OFFPOLICY_ALGOS = algo_names(OFFPOLICY)


def offpolicy_algorithm(name: str) -> OffPolicyAlgorithm:
    return algorithm(name, OffPolicyAlgorithm)
from train.offpolicy.config import (  # noqa: E402
    OFFPOLICY_DIAGNOSTICS,
    check_replay_memory,
    from_train_config,
    replay_bytes,
    replay_transition_bytes,
)
from train.offpolicy.core import checkpoint_payload, example_transition, make_offpolicy_train  # noqa: E402
from train.offpolicy.networks import make_sac_networks  # noqa: E402
from train.offpolicy.replay import (  # noqa: E402
    pack,
    replay_init,
    replay_insert,
    replay_ordered,
    replay_sample,
    row_layout,
    unpack,
)
from train.toy import make_toy_env  # noqa: E402

T, N = 20, 8
CFG = OffPolicyConfig(total_env_steps=N * T * 6, episode_length=T, num_envs=N, batch_size=64, grad_updates_per_step=4,
                      max_replay_size=2000, hidden=(32, 32), eval_episodes=4, learning_rate=3e-3,
                      alpha_learning_rate=3e-3, reward_scaling=1.0, init_log_alpha=-2.0, sac_lag=SacLagConfig(lr=0.5))
"""Toy sizes that learn within a few iterates: one 20-step episode of 8 envs per iterate, 4 x 64 per actor step."""
BOUND = 6.0
"""d = 6 of a possible 20 (a = -0.4 per step)."""
MEMORY = (2**40, "test memory")


@pytest.fixture(scope="module", autouse=True)
def _compile_cache() -> None:
    """The persistent compile cache `saferl train` uses (SAFERL_JAX_CACHE; "" disables it)."""
    cache = os.environ.get("SAFERL_JAX_CACHE", str(Path.home() / ".cache" / "saferl" / "jax"))
    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


@pytest.fixture(scope="module")
def program() -> dict[str, Any]:
    """One run's jitted init / iterate / evaluate on the toy task (the SAC-Lag/PID program)."""
    t = make_offpolicy_train(CFG, make_toy_env(), memory=MEMORY)
    return {"trainer": t, "init": jax.jit(t.init), "iterate": jax.jit(t.iterate), "evaluate": jax.jit(t.evaluate)}


def start(program: dict[str, Any], algo: str, seed: int, bound: float = BOUND) -> Any:
    a = offpolicy_algorithm(algo)
    return program["init"](jax.random.PRNGKey(seed), a.id, a.initial_multiplier(CFG), bound / T)


def run(program: dict[str, Any], state: Any, n: int) -> tuple[Any, list[Any]]:
    outs = []
    for _ in range(n):
        state, out = program["iterate"](state)
        outs.append(jax.device_get(out))
    return state, outs


# ------------------------------------------------------------------------------------------ config
def test_defaults_are_crax_cli_values() -> None:
    c = OffPolicyConfig()
    assert (c.num_envs, c.batch_size, c.learning_rate, c.reward_scaling, c.normalize_observations) == \
        (2048, 1024, 5e-4, 0.1, True)  # the CLI's, not train()'s (1, 256, 1e-4, 1.0, False)
    assert (c.grad_updates_per_step, c.tau, c.min_replay_size, c.max_replay_size, c.discount) == \
        (32, 0.005, 0, 1_000_000, 0.99)
    assert (c.alpha_learning_rate, c.init_log_alpha, c.target_entropy_scale, c.hidden) == \
        (3e-4, 0.0, 0.5, (256, 256))
    assert (c.sac_lag.lr, c.sac_lag.lambda_max, c.sac_pid.kp, c.sac_pid.ki, c.sac_pid.kd) == \
        (0.01, 2.0, 10.0, 0.01, 0.01)
    assert c.iterate_env_steps == 2048 * 2000 and c.actor_steps_per_iterate == 2000
    assert c.n_iterates == TrainConfig().n_iterates == 122  # one iterate axis for both families
    assert c.grad_steps_per_iterate == 64_000 and c.sample_size == 32_768
    assert OFFPOLICY_ALGOS == ("sac", "sac_lag", "sac_pid")
    with pytest.raises(CubeError, match="unknown off-policy algorithm 'ppo'"):
        offpolicy_algorithm("ppo")


def test_from_train_config_takes_the_shared_flags() -> None:
    tc = TrainConfig(total_env_steps=12_345, episode_length=64, num_envs=16, batch_size=16, num_minibatches=4,
                     learning_rate=1e-3, eval_episodes=8, eval_every=3, reset="fresh")
    c = from_train_config(tc, grad_updates_per_step=2, max_replay_size=4096)
    assert (c.total_env_steps, c.episode_length, c.num_envs, c.batch_size, c.learning_rate) == \
        (12_345, 64, 16, 16, 1e-3)
    assert (c.eval_episodes, c.eval_every, c.reset, c.grad_updates_per_step, c.max_replay_size) == \
        (8, 3, "fresh", 2, 4096)
    assert c.n_iterates == tc.n_iterates


@pytest.mark.parametrize("over, words", [
    ({"batch_size": 4096, "max_replay_size": 1000}, ["batch_size (4096) exceeds the replay buffer", "1000"]),
    ({"num_envs": 64, "max_replay_size": 32, "batch_size": 8}, ["num_envs (64)", "max_replay_size 32"]),
    ({"min_replay_size": 5000, "max_replay_size": 1000}, ["min_replay_size (5000) exceeds max_replay_size (1000)"]),
    ({"steps_per_iterate": 100}, ["steps_per_iterate (100) must be a multiple of num_envs (8)"]),
    ({"tau": 0.0}, ["tau"]),
    ({"reset": "sometimes"}, ["reset must be one of"]),
])
def test_bad_config_refused_in_one_line(over: dict[str, Any], words: list[str]) -> None:
    import dataclasses

    cfg = dataclasses.replace(CFG, **over)
    with pytest.raises(CubeError) as exc:
        make_offpolicy_train(cfg, make_toy_env(), memory=MEMORY)
    msg = str(exc.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_replay_bytes_at_paper_sizes() -> None:
    """Bytes per run at crax's default capacity (1e6) for the Point tasks' observation sizes, action size 2."""
    c = OffPolicyConfig()
    sizes = {name: replay_bytes(c, obs, 2) for name, obs in (("goal", 62), ("circle", 28), ("push", 68),
                                                              ("button", 62))}
    assert sizes == {"goal": 520_000_000, "circle": 248_000_000, "push": 568_000_000, "button": 520_000_000}
    assert replay_transition_bytes(62, 2) == 4 * (62 + 62 + 2 + 4)  # as crax's flattened transition


def test_memory_refused_before_allocation() -> None:
    per_run = (CFG.max_replay_size + CFG.sample_size) * replay_transition_bytes(4, 1)
    assert check_replay_memory(CFG, 4, 1, 2, (2 * per_run, "x")) == 2 * per_run
    with pytest.raises(CubeError) as exc:
        check_replay_memory(CFG, 4, 1, 3, (2 * per_run + 1, "the test GPU"))
    msg = str(exc.value)
    assert "\n" not in msg and "3 run(s) x (2,000 + 256 sampled) transitions x 52 B" in msg
    assert "the test GPU" in msg and "at most 2 runs per group fit" in msg
    # a buffer no machine holds: refused by make_offpolicy_train from the sizes alone (no MemoryError)
    import dataclasses

    huge = dataclasses.replace(CFG, max_replay_size=10**12)
    with pytest.raises(CubeError, match="replay buffer does not fit: 1 run"):
        make_offpolicy_train(huge, make_toy_env())


# ------------------------------------------------------------------------------------------ hand values
def test_lagrange_update_hand_values() -> None:
    cfg = CFG  # lr 0.5 / T 20 = 0.025 per gradient step, lambda_max 2
    d = jnp.float32(0.3)

    def upd(lam: float, c: float) -> float:
        return float(offpolicy_algorithm("sac_lag").multiplier_update(cfg, jnp.float32(lam), pid_init(),
                                                                       jnp.float32(c), d)[0])

    assert upd(0.3, 0.5) == pytest.approx(0.305, abs=1e-7)
    assert upd(1.99, 10.0) == 2.0  # capped at lambda_max
    assert upd(0.001, 0.0) == 0.0  # projected onto lambda >= 0
    lam, pid = offpolicy_algorithm("sac").multiplier_update(cfg, jnp.float32(0.0), pid_init(), jnp.float32(9.0), d)
    assert float(lam) == 0.0  # SAC has none


def test_pid_update_hand_values() -> None:
    """kp 10, ki 0.01, kd 0.01, integral clip 1, beta 0.95, d/T 0.05; costs 0.15, 0, 0, 0."""
    lam, pid, d = jnp.float32(0.0), pid_init(), jnp.float32(0.05)
    expected = [(1.00105, 0.1, 0.1, 0.005), (0.5015225, 0.05, -0.05, -0.00275),
                (0.001496375, 0.0, -0.05, -0.0026125), (0.0, -0.05, -0.05, -0.002481875)]
    for c, (e_lam, e_int, e_prev, e_der) in zip((0.15, 0.0, 0.0, 0.0), expected, strict=True):
        lam, pid = pid_update(lam, pid, jnp.float32(c), d, 10.0, 0.01, 0.01, 1.0, 1e6, 0.95)
        np.testing.assert_allclose([float(lam), *map(float, pid)], [e_lam, e_int, e_prev, e_der], atol=2e-6)


def test_soft_update_hand_values() -> None:
    target = {"a": jnp.float32(1.0), "b": {"c": jnp.array([0.0, 4.0], jnp.float32)}}
    online = {"a": jnp.float32(3.0), "b": {"c": jnp.array([4.0, 0.0], jnp.float32)}}
    out = L.soft_update(target, online, 0.25)
    assert float(out["a"]) == 1.5 and out["b"]["c"].tolist() == [1.0, 3.0]


def _constant_nets(obs: int, act: int, loc: float, raw_scale: float, q: tuple[float, float]) -> tuple[Any, Any, Any]:
    """Networks with zero kernels: the policy's logits are its last bias, each Q head its own last bias."""
    nets = make_sac_networks(obs, act, (4,), True)
    pol = jax.tree_util.tree_map(jnp.zeros_like, nets.policy_network.init(jax.random.PRNGKey(0)))
    pol["params"]["hidden_1"]["bias"] = jnp.array([loc] * act + [raw_scale] * act, jnp.float32)

    def qnet(values: tuple[float, float]) -> Any:
        p = jax.tree_util.tree_map(jnp.zeros_like, nets.q_network.init(jax.random.PRNGKey(1)))
        for k, v in enumerate(values):
            p["params"][f"MLP_{k}"]["hidden_1"]["bias"] = jnp.array([v], jnp.float32)
        return p

    return nets, pol, qnet


def _logp(x: np.ndarray, eps: np.ndarray, scale: float) -> np.ndarray:
    """log density of tanh(x), x = loc + scale eps, summed over actions (float64)."""
    base = -0.5 * eps**2 - 0.5 * np.log(2 * np.pi) - np.log(scale)
    return (base - 2 * (np.log(2) - x - np.logaddexp(0, -2 * x))).sum(-1)


def test_losses_hand_values() -> None:
    """Critic, cost critic, temperature and actor losses against the formulas evaluated in numpy."""
    obs, act, b = 3, 2, 16
    loc, raw_scale = 0.3, 0.5
    scale = np.log1p(np.exp(raw_scale)) + 1e-3
    nets, pol, qnet = _constant_nets(obs, act, loc, raw_scale, (0.0, 0.0))
    q, q_target, qc, qc_target = qnet((1.0, 2.0)), qnet((0.5, 0.8)), qnet((0.2, 0.4)), qnet((0.3, 0.1))
    rng = np.random.default_rng(0)
    trunc = (rng.random(b) < 0.25).astype(np.float32)
    disc = np.where(trunc > 0, 0.0, (rng.random(b) > 0.2).astype(np.float32)).astype(np.float32)
    data = L.Transition(jnp.asarray(rng.normal(size=(b, obs)), jnp.float32), jnp.zeros((b, act), jnp.float32),
                        jnp.asarray(rng.normal(size=b), jnp.float32), jnp.asarray(rng.random(b), jnp.float32),
                        jnp.asarray(disc), jnp.asarray(trunc), jnp.asarray(rng.normal(size=(b, obs)), jnp.float32))
    norm, key = normalizer_init(obs), jax.random.PRNGKey(5)
    eps = np.asarray(jax.random.normal(key, (b, act)), np.float64)
    x = loc + scale * eps
    logp = _logp(x, eps, scale)
    r, c, gamma, alpha, rs = np.asarray(data.reward, np.float64), np.asarray(data.cost, np.float64), 0.99, 0.4, 0.1
    y = r * rs + disc * gamma * (0.5 - alpha * logp)
    want = 0.5 * np.mean(np.stack([((1.0 - y) * (1 - trunc)) ** 2, ((2.0 - y) * (1 - trunc)) ** 2]))
    got = L.critic_loss(q, pol, norm, q_target, jnp.float32(alpha), data, key, nets, rs, gamma)
    assert float(got) == pytest.approx(want, rel=1e-5)
    yc = c + disc * gamma * 0.1  # min of the cost target heads, no entropy term
    want = 0.5 * np.mean(np.stack([((0.2 - yc) * (1 - trunc)) ** 2, ((0.4 - yc) * (1 - trunc)) ** 2]))
    got = L.cost_critic_loss(qc, pol, norm, qc_target, data, key, nets, gamma)
    assert float(got) == pytest.approx(want, rel=1e-5)
    la = -0.7
    got = L.alpha_loss(jnp.float32(la), pol, norm, data.obs, key, nets, -0.5 * act)
    assert float(got) == pytest.approx(np.exp(la) * np.mean(-logp + 0.5 * act), rel=1e-5)
    lam = 1.5
    got = L.actor_loss(pol, norm, q, qc, jnp.float32(alpha), jnp.float32(lam), data.obs, key, nets)
    assert float(got) == pytest.approx(np.mean(alpha * logp - 1.0 + lam * 0.2), rel=1e-5)
    got = L.actor_loss(pol, norm, q, None, jnp.float32(alpha), jnp.float32(lam), data.obs, key, nets)
    assert float(got) == pytest.approx(np.mean(alpha * logp - 1.0), rel=1e-5)


# ------------------------------------------------------------------------------------------ replay
def test_replay_ring_keeps_the_newest_in_age_order() -> None:
    state = replay_init(5, 2, jax.random.PRNGKey(0))
    rows = jnp.arange(12, dtype=jnp.float32).reshape(6, 2)  # row i = [2i, 2i + 1]
    state = replay_insert(state, rows[:3])
    assert (int(state.size), int(state.position)) == (3, 3)
    np.testing.assert_array_equal(replay_ordered(state), rows[:3])
    state = replay_insert(state, rows[3:])  # wraps: row 0 is evicted
    assert (int(state.size), int(state.position)) == (5, 1)
    np.testing.assert_array_equal(replay_ordered(state), rows[1:])
    state, sample = replay_sample(state, 5000)
    ids, counts = np.unique(np.asarray(sample[:, 0]) // 2, return_counts=True)
    assert ids.tolist() == [1, 2, 3, 4, 5]  # only valid rows, every one of them
    assert counts.min() > 850 and counts.max() < 1150  # uniform: 1000 each, sd ~28
    state2, sample2 = replay_sample(state, 5000)
    assert not np.array_equal(sample, sample2) and not np.array_equal(state.key, state2.key)  # key advances


def test_pack_unpack_round_trip() -> None:
    layout = row_layout(example_transition(3, 2))
    assert layout.width == replay_transition_bytes(3, 2) // 4 == 12
    rng = np.random.default_rng(1)
    tr = L.Transition(*(jnp.asarray(rng.normal(size=(4, *s)), jnp.float32) for s in layout.shapes))
    back = unpack(layout, pack(layout, tr))
    for a, b in zip(tr, back, strict=True):
        np.testing.assert_array_equal(a, b)
    assert unpack(layout, jnp.zeros((2, 3, 12))).obs.shape == (2, 3, 3)


# ------------------------------------------------------------------------------------------ training
def test_tiny_runs_learn_and_return_every_episode(program: dict[str, Any]) -> None:
    results = {}
    for algo in OFFPOLICY_ALGOS:
        state, outs = run(program, start(program, algo, 0), 6)
        for out in outs:  # every env finishes exactly one episode per iterate; the toy's reward equals its cost
            assert out.episodes.count.tolist() == [1] * N
            r, c = out.episodes.reward[0], out.episodes.cost[0]
            assert np.isnan(out.episodes.reward[1:]).all()
            np.testing.assert_allclose(r, c, rtol=1e-6)
            assert ((r >= 0) & (r <= T)).all()
            assert int(out.n_updates) == CFG.grad_steps_per_iterate and int(out.env_steps) == N * T
            assert set(out.metrics) == set(OFFPOLICY_DIAGNOSTICS)
        results[algo] = {"cost": [float(np.mean(o.episodes.cost[0])) for o in outs], "lam": float(state.multiplier),
                         "alpha": [float(o.metrics["alpha"]) for o in outs],
                         "replay": float(outs[-1].metrics["replay_size"])}
    sac, lag = results["sac"], results["sac_lag"]
    assert np.mean(sac["cost"][-3:]) > 15.0  # random actions give 10; SAC pushes a -> 1
    assert sac["lam"] == 0.0 and sac["replay"] == 6 * N * T
    assert np.mean(lag["cost"][-3:]) < BOUND + 2 < np.mean(sac["cost"][-3:])  # the bound is (about) enforced
    assert 0.0 < lag["lam"] <= CFG.sac_lag.lambda_max
    assert len(set(sac["alpha"])) > 1  # the temperature is learned


def test_pid_lambda_is_not_capped_at_two(program: dict[str, Any]) -> None:
    """SAC-PID's clip is 1e6 (crax): lambda goes far above SAC-Lag's cap of 2 while the cost exceeds d/T."""
    state, _ = run(program, start(program, "sac_pid", 1, bound=0.5), 1)
    assert float(state.multiplier) > CFG.sac_lag.lambda_max


def test_steps_per_iterate_and_warm_up() -> None:
    """Half an episode per iterate: episodes end every other iterate; learning waits for min_replay_size
    transitions before an actor step (crax's prefill: ceil(25 / 8) = 4 actor steps without updates)."""
    import dataclasses

    cfg = dataclasses.replace(CFG, steps_per_iterate=N * T // 2, min_replay_size=25)
    t = make_offpolicy_train(cfg, make_toy_env(), memory=MEMORY)
    st = t.init(jax.random.PRNGKey(0), 1, 0.0, BOUND / T)
    iterate = jax.jit(t.iterate)
    counts, updates = [], []
    for _ in range(4):
        st, out = iterate(st)
        counts.append(out.episodes.count.tolist())
        updates.append(int(out.n_updates))
        assert int(out.env_steps) == N * T // 2
    assert counts == [[0] * N, [1] * N, [0] * N, [1] * N]
    assert updates == [(T // 2 - 4) * cfg.grad_updates_per_step] + [T // 2 * cfg.grad_updates_per_step] * 3
    assert t.slots == 2 and int(st.actor_steps) == 2 * T


def test_vmapped_group_equals_runs_one_by_one(program: dict[str, Any]) -> None:
    """Three runs (two algorithms, three seeds, three bounds) as one vmapped program, and alone: equal to float
    rounding (batched matmuls reduce in another order), which training amplifies chaotically, as for the
    on-policy groups: 1e-6 in the first iterates, ~1e-3 by the third (240 gradient steps at lr 3e-3)."""
    members = [("sac_lag", 0, 6.0), ("sac_pid", 1, 4.0), ("sac_lag", 2, 9.0)]
    t = make_offpolicy_train(CFG, make_toy_env(), axis_name="runs", n_runs=3, memory=MEMORY)
    ids = jnp.asarray([offpolicy_algorithm(a).id for a, _, _ in members], jnp.int32)
    state = jax.jit(jax.vmap(t.init))(jnp.stack([jax.random.PRNGKey(s) for _, s, _ in members]), ids,
                                      jnp.zeros(3, jnp.float32), jnp.asarray([b / T for *_, b in members], jnp.float32))
    iterate = jax.jit(jax.vmap(t.iterate, axis_name="runs"))
    group = []
    for _ in range(3):
        state, out = iterate(state)
        group.append((jax.device_get(out), np.asarray(state.multiplier)))
    keys = jnp.stack([eval_key(s, 2) for _, s, _ in members])
    ev = jax.jit(jax.vmap(t.evaluate))(state.params, state.normalizer, keys)
    rtols = (1e-5, 1e-5, 1e-2)
    for i, (algo, seed, bound) in enumerate(members):
        alone = start(program, algo, seed, bound)
        for j, rtol in enumerate(rtols):
            alone, out = program["iterate"](alone)
            g_out, g_mult = group[j]
            msg = f"{algo} seed {seed} iterate {j}"
            np.testing.assert_allclose(g_out.episodes.reward[i], out.episodes.reward, rtol=rtol, atol=10 * rtol,
                                       err_msg=msg)
            np.testing.assert_allclose(g_mult[i], float(alone.multiplier), rtol=rtol, atol=rtol, err_msg=msg)
            for name in ("critic_loss", "actor_loss", "alpha"):
                np.testing.assert_allclose(g_out.metrics[name][i], out.metrics[name], rtol=10 * rtol, err_msg=msg)
        e = program["evaluate"](alone.params, alone.normalizer, eval_key(seed, 2))
        np.testing.assert_allclose(ev.greedy_cost[i], e.greedy_cost, rtol=1e-2, atol=1e-2)
    rewards = [group[-1][0].episodes.reward[i, 0] for i in range(3)]
    assert not np.allclose(rewards[0], rewards[2])  # the members really differ


def test_resume_point_round_trip_is_bit_identical(program: dict[str, Any], tmp_path: Path) -> None:
    """State saved after iterate 1 through the runner's resume-point files and restored: iterates 2..3 equal the
    uninterrupted run bit for bit (replay buffer, optimisers, targets, PID state and keys are all in it)."""
    full, outs = run(program, start(program, "sac_pid", 3), 4)
    state, _ = run(program, start(program, "sac_pid", 3), 2)
    store, key = tmp_path / "store", RunKey("sac_pid", "toy", BOUND, 3)
    store.mkdir()
    checkpoint.save_resume(store, key, 1, state, 2 * N * T)
    size = (checkpoint.run_dir(store, key) / "resume_1.msgpack").stat().st_size
    assert size > CFG.max_replay_size * replay_transition_bytes(4, 1)  # the whole buffer is in it
    template = jax.tree_util.tree_map(jnp.zeros_like, start(program, "sac_pid", 0))
    j, restored, env_steps = checkpoint.load_resume(store, key, template)
    assert (j, env_steps) == (1, 2 * N * T)
    resumed, again = run(program, restored, 2)
    for a, b in zip(outs[2:], again, strict=True):
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
            np.testing.assert_array_equal(x, y)
    for x, y in zip(jax.tree_util.tree_leaves(full), jax.tree_util.tree_leaves(resumed), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # the evaluation checkpoint (policy, critics, normaliser, lambda, log alpha) round-trips through the template
    payload = checkpoint_payload(state.params, state.normalizer, state.multiplier, state.learner.log_alpha)
    checkpoint.save(store, key, 1, payload)
    back = checkpoint.load(store, key, 1, program["trainer"].template())
    for x, y in zip(jax.tree_util.tree_leaves(payload), jax.tree_util.tree_leaves(back), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # and the buffer is not a by-stander: a state with an emptied buffer diverges
    emptied = restored._replace(replay=restored.replay._replace(data=jnp.zeros_like(restored.replay.data)))
    _, other = run(program, emptied, 1)
    assert not np.array_equal(other[0].episodes.reward, again[0].episodes.reward)


def test_evaluate_pairs_expl_and_greedy(program: dict[str, Any]) -> None:
    state = start(program, "sac", 4)
    a = program["evaluate"](state.params, state.normalizer, eval_key(4, 0))
    b = program["evaluate"](state.params, state.normalizer, eval_key(4, 0))
    c = program["evaluate"](state.params, state.normalizer, eval_key(4, 1))
    assert a.expl_reward.shape == a.greedy_reward.shape == (CFG.eval_episodes,)
    np.testing.assert_array_equal(a.greedy_reward, b.greedy_reward)  # same key, same episodes
    assert not np.allclose(a.expl_reward, a.greedy_reward)
    assert not np.allclose(a.greedy_reward, c.greedy_reward)  # another iterate: other initial states
    assert math.isfinite(float(np.sum(a.expl_cost)))


def test_runner_program_call_signatures(program: dict[str, Any]) -> None:
    """`train.program.GroupProgram` calls init with the PPO core's algorithm state and evaluate with d/T: accepted and
    ignored (the off-policy state has its own PID state), same results."""
    a = offpolicy_algorithm("sac_pid")
    plain = start(program, "sac_pid", 5)
    extra = program["init"](jax.random.PRNGKey(5), a.id, 0.0, BOUND / T, jnp.zeros(3, jnp.float32))
    for x, y in zip(jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(extra), strict=True):
        np.testing.assert_array_equal(x, y)
    e1 = program["evaluate"](plain.params, plain.normalizer, eval_key(5, 0))
    e2 = program["evaluate"](plain.params, plain.normalizer, eval_key(5, 0), plain.d_step)
    np.testing.assert_array_equal(e1.expl_cost, e2.expl_cost)
    np.testing.assert_array_equal(e1.greedy_reward, e2.greedy_reward)
