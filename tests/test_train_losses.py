"""Losses, GAE, multiplier updates, distribution and normaliser of `train` vs hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")
import jax.numpy as jnp  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from train.multipliers import lagrange_update, pid_update  # noqa: E402
from train.nets import TanhGaussian, normalizer_init, normalizer_update  # noqa: E402
from train.onpolicy import losses as L  # noqa: E402
from train.onpolicy.saute import saute_observation, saute_step  # noqa: E402

RATIO = jnp.array([0.5, 1.0, 1.5])
ADV_R = jnp.array([1.0, -1.0, 2.0])
ADV_C = jnp.array([0.5, 1.0, -1.0])


def col(x: list[float]) -> jax.Array:
    return jnp.array(x)[:, None]


def test_gae_hand_computed() -> None:
    # gamma 0.9, lambda 0.8: deltas 1.4, 2.35, 3.3; A2 = 3.3, A1 = 2.35 + .72 * 3.3, A0 = 1.4 + .72 * A1
    r, v, z = col([1.0, 2.0, 3.0]), col([0.5, 1.0, 1.5]), col([0.0, 0.0, 0.0])
    vs, adv = L.gae(r, v, jnp.array([2.0]), z, z, 0.9, 0.8)
    np.testing.assert_allclose(adv[:, 0], [4.80272, 4.726, 3.3], rtol=1e-6)
    np.testing.assert_allclose(vs[:, 0], [5.30272, 5.726, 4.8], rtol=1e-6)


def test_gae_termination_and_truncation() -> None:
    r, v, z = col([1.0, 2.0, 3.0]), col([0.5, 1.0, 1.5]), col([0.0, 0.0, 0.0])
    flag = col([0.0, 1.0, 0.0])
    # terminated after step 1: delta1 = 2 - 1 = 1, no continuation into step 2
    _, adv = L.gae(r, v, jnp.array([2.0]), flag, z, 0.9, 0.8)
    np.testing.assert_allclose(adv[:, 0], [1.4 + 0.72 * 1.0, 1.0, 3.3], rtol=1e-6)
    # truncated after step 1: that step carries no signal and does not continue
    _, adv = L.gae(r, v, jnp.array([2.0]), z, flag, 0.9, 0.8)
    np.testing.assert_allclose(adv[:, 0], [1.4, 0.0, 3.3], rtol=1e-6)


def _gae_numpy(r, v, boot, term, trunc, g, lam):
    T = r.shape[0]
    adv = np.zeros_like(r)
    acc = np.zeros_like(boot)
    for t in reversed(range(T)):
        nv = boot if t == T - 1 else v[t + 1]
        delta = (r[t] + g * (1 - term[t]) * nv - v[t]) * (1 - trunc[t])
        acc = delta + g * lam * (1 - term[t]) * (1 - trunc[t]) * acc
        adv[t] = acc
    return adv


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.5, 1.0), st.floats(0.0, 1.0))
def test_gae_matches_numpy_loop(seed: int, g: float, lam: float) -> None:
    rng = np.random.default_rng(seed)
    T, B = 6, 3
    r, v = rng.normal(size=(T, B)), rng.normal(size=(T, B))
    boot = rng.normal(size=B)
    term = (rng.random((T, B)) < 0.2).astype(float)
    trunc = ((rng.random((T, B)) < 0.2) & (term == 0)).astype(float)
    _, adv = L.gae(*(jnp.asarray(x, jnp.float32) for x in (r, v, boot, term, trunc)), g, lam)
    np.testing.assert_allclose(adv, _gae_numpy(r, v, boot, term, trunc, g, lam), rtol=1e-4, atol=1e-4)


def test_ppo_clipped_surrogate() -> None:
    # per sample min(rho A, clip(rho) A): 0.5, -1, 2.4 (clip 1.2 * 2)
    assert float(L.ppo_policy_loss(RATIO, ADV_R, 0.2)) == pytest.approx(-(0.5 - 1 + 2.4) / 3, rel=1e-6)


def test_ppo_lag_loss() -> None:
    # A = A_r - 2 A_c = [0, -3, 4]; min terms 0, -3, 4.8
    loss = L.ppo_lag_policy_loss(RATIO, ADV_R, ADV_C, jnp.asarray(2.0), 0.2)
    assert float(loss) == pytest.approx(-(0 - 3 + 4.8) / 3, rel=1e-6)


def test_p3o_loss_active_and_inactive_penalty() -> None:
    # cost surrogate max(rho Ac, clip(rho) Ac) = 0.4, 1, -1.2 -> mean 0.2/3; gap 0.01 * (0.05 - 0.02)
    loss = L.p3o_policy_loss(RATIO, ADV_R, ADV_C, jnp.asarray(2.0), jnp.asarray(0.05), jnp.asarray(0.02),
                             0.2, 0.99)
    expected = -(1.9 / 3) + 2.0 * (0.2 / 3 + 0.01 * 0.03)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    # cost surrogate -0.9 plus a small gap: relu -> 0, only the reward surrogate is left
    loss = L.p3o_policy_loss(RATIO, ADV_R, -jnp.ones(3), jnp.asarray(2.0), jnp.asarray(0.05),
                             jnp.asarray(0.02), 0.2, 0.99)
    assert float(loss) == pytest.approx(-(1.9 / 3), rel=1e-6)


def test_focops_loss_and_kl_mask() -> None:
    kl = jnp.array([0.01, 0.03, 0.0])
    # A = (A_r - 1 * A_c) / 2 = [0.25, -1, 1.5]; sample 1 masked (KL 0.03 > 0.02)
    loss = L.focops_policy_loss(RATIO, ADV_R, ADV_C, kl, jnp.asarray(1.0), 1.5, 0.02)
    expected = ((0.01 - 0.5 * 0.25 / 1.5) + 0.0 + (0.0 - 1.5 * 1.5 / 1.5)) / 3
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    grad = jax.grad(lambda r: L.focops_policy_loss(r, ADV_R, ADV_C, kl, jnp.asarray(1.0), 1.5, 0.02))(RATIO)
    np.testing.assert_allclose(grad, [-0.25 / 1.5 / 3, 0.0, -1.5 / 1.5 / 3], rtol=1e-6)


def test_gaussian_kl() -> None:
    kl = L.gaussian_kl(jnp.array([0.0]), jnp.array([1.0]), jnp.array([1.0]), jnp.array([2.0]))
    assert float(kl) == pytest.approx(np.log(2.0) + 2.0 / 8.0 - 0.5, rel=1e-6)


def test_lagrange_update() -> None:
    assert float(lagrange_update(jnp.asarray(0.5), 0.02, 0.0125, 3.0)) == pytest.approx(0.5225, rel=1e-6)
    assert float(lagrange_update(jnp.asarray(0.01), 0.0, 0.0125, 3.0)) == 0.0


def test_p3o_kappa_update() -> None:
    def up(k: float, cost: float) -> float:
        return float(L.p3o_kappa_update(jnp.asarray(k), jnp.asarray(cost), jnp.asarray(0.0125),
                                         0.01, 1.1, 0.9, 50.0))

    assert up(1.0, 0.02) == pytest.approx(1.1)
    assert up(49.0, 0.02) == pytest.approx(50.0)
    assert up(1.0, 0.01) == pytest.approx(0.9)
    assert up(1.0, 0.0125) == pytest.approx(0.9)  # at the bound: no violation
    assert up(0.0105, 0.0) == pytest.approx(0.01)


def test_focops_nu_update() -> None:
    assert float(L.focops_nu_update(jnp.asarray(0.1), 0.02, 0.0125, 1.0, 100.0)) == pytest.approx(0.1075)
    assert float(L.focops_nu_update(jnp.asarray(0.001), 0.0, 0.0125, 1.0, 100.0)) == 0.0
    assert float(L.focops_nu_update(jnp.asarray(99.99), 1.0, 0.0, 1.0, 100.0)) == pytest.approx(100.0)


def test_tanh_gaussian_log_prob_and_mode() -> None:
    dist = TanhGaussian(2)
    logits = jnp.array([[0.3, -0.2, 0.1, -1.0]])
    raw = jnp.array([[0.5, -1.5]])
    loc, scale = np.array([0.3, -0.2]), np.log1p(np.exp([0.1, -1.0])) + 1e-3
    x = np.array([0.5, -1.5])
    ref = np.sum(-0.5 * ((x - loc) / scale) ** 2 - np.log(scale * np.sqrt(2 * np.pi)) - np.log(1 - np.tanh(x) ** 2))
    assert float(dist.log_prob(logits, raw)[0]) == pytest.approx(ref, rel=1e-5)
    np.testing.assert_allclose(dist.mode(logits)[0], np.tanh(loc), rtol=1e-6)


def test_normalizer_matches_numpy_over_batches() -> None:
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 4)).astype(np.float32) for n in (5, 17, 9)]
    state = normalizer_init(4)
    for b in batches:
        state = normalizer_update(state, jnp.asarray(b))
    allx = np.concatenate(batches)
    np.testing.assert_allclose(state.mean, allx.mean(0), rtol=1e-5)
    np.testing.assert_allclose(state.std, allx.std(0), rtol=1e-4)
    assert float(state.count) == len(allx)


# ----------------------------------------------------------------- PPO-PID, CRPO, PPO-Saute by hand
def test_pid_update_hand_computed() -> None:
    # d/T 0.0125, cost 0.0325: v = 0.02; I = 0 + 0.02; D = 0.95 * 0 + 0.05 * (0.02 - 0) = 0.001
    # lambda = relu(0.5 + 10 * 0.02 + 0.01 * 0.02 + 0.01 * 0.001) = 0.70021
    lam, st = pid_update(jnp.asarray(0.5), jnp.zeros(3), jnp.asarray(0.0325), jnp.asarray(0.0125),
                           10.0, 0.01, 0.01, 1.0, 1e6, 0.95)
    assert float(lam) == pytest.approx(0.70021, rel=1e-6)
    np.testing.assert_allclose(st, [0.02, 0.02, 0.001], rtol=1e-5)
    # second update at cost 0.0025: v = -0.01; I = 0.01; D = 0.95 * 0.001 + 0.05 * (-0.03) = -0.00055
    # lambda = 0.70021 - 0.1 + 0.0001 - 0.0000055 = 0.6003045
    lam, st = pid_update(lam, st, jnp.asarray(0.0025), jnp.asarray(0.0125), 10.0, 0.01, 0.01, 1.0, 1e6, 0.95)
    assert float(lam) == pytest.approx(0.6003045, rel=1e-5)
    np.testing.assert_allclose(st, [0.01, -0.01, -0.00055], rtol=1e-4)
    # anti-windup: the integral stays in [-1, 1]; lambda never below 0 nor above lambda_max
    lam, st = pid_update(jnp.asarray(0.0), jnp.array([0.95, 0.0, 0.0]), jnp.asarray(0.2), jnp.asarray(0.1),
                           10.0, 0.01, 0.01, 1.0, 0.5, 0.95)
    assert float(st[0]) == 1.0 and float(lam) == 0.5
    lam, _ = pid_update(jnp.asarray(0.3), jnp.zeros(3), jnp.asarray(0.0), jnp.asarray(0.1), 10.0, 0.01, 0.01,
                          1.0, 1e6, 0.95)
    assert float(lam) == 0.0


def test_crpo_loss_switches_objective() -> None:
    # reward step: PPO's surrogate on A_r; cost step: on -A_c = [-0.5, -1, 1]: min(rho A, clip(rho) A) =
    # min(-0.25, 0.8 * -0.5) = -0.4, -1, min(1.5, 1.2) = 1.2
    reward_step = L.crpo_policy_loss(RATIO, ADV_R, ADV_C, jnp.asarray(1.0), 0.2)
    cost_step = L.crpo_policy_loss(RATIO, ADV_R, ADV_C, jnp.asarray(0.0), 0.2)
    assert float(reward_step) == pytest.approx(-(0.5 - 1 + 2.4) / 3, rel=1e-6)
    assert float(cost_step) == pytest.approx(-(-0.4 - 1 + 1.2) / 3, rel=1e-6)
    grad = jax.grad(lambda r: L.crpo_policy_loss(r, ADV_R, ADV_C, jnp.asarray(0.0), 0.2))(RATIO)
    np.testing.assert_allclose(grad, [0.0, 1.0 / 3, 0.0], rtol=1e-6)  # samples 0 and 2 on the clipped side


def test_crpo_regime() -> None:
    assert float(L.crpo_regime(jnp.asarray(0.0125), jnp.asarray(0.0125), 0.0)) == 1.0  # at the bound: reward
    assert float(L.crpo_regime(jnp.asarray(0.013), jnp.asarray(0.0125), 0.0)) == 0.0
    assert float(L.crpo_regime(jnp.asarray(0.013), jnp.asarray(0.0125), 0.001)) == 1.0  # within eta


def test_saute_step_hand_computed() -> None:
    d = jnp.asarray(2.0)
    cost = jnp.array([0.5, 1.5, 0.0, 0.3])
    reward = jnp.array([1.0, 2.0, 3.0, 4.0])
    b = jnp.array([2.0, 1.0, 0.0, 5.9])
    # gamma_b = 1: b - c = [1.5, -0.5, 0, 5.6]; step 1 overdraws (reward -> penalty); clipped to [0, 3d = 6]
    new, r, over = saute_step(b, cost, reward, d, 1.0, -1.0, True)
    np.testing.assert_allclose(new, [1.5, 0.0, 0.0, 5.6], rtol=1e-6)
    np.testing.assert_allclose(r, [1.0, -1.0, 3.0, 4.0])
    np.testing.assert_array_equal(over, [0, 1, 0, 0])
    # unclipped (the Saute paper's): the overdrawn budget stays negative
    new, _, _ = saute_step(b, cost, reward, d, 1.0, -1.0, False)
    np.testing.assert_allclose(new, [1.5, -0.5, 0.0, 5.6], rtol=1e-6)
    # crax's gamma_b = 0.99: the budget grows back, (5.9 - 0.3) / 0.99 = 5.6566 and then 6 is the cap
    new, _, _ = saute_step(b, cost, reward, d, 0.99, -1.0, True)
    np.testing.assert_allclose(new, [1.5 / 0.99, 0.0, 0.0, 5.6 / 0.99], rtol=1e-6)
    new, _, _ = saute_step(jnp.asarray(5.99), jnp.asarray(0.0), jnp.asarray(1.0), d, 0.99, -1.0, True)
    assert float(new) == 6.0
    obs = saute_observation(jnp.zeros((2, 3)), jnp.array([1.0, 5.0]), d, True)
    np.testing.assert_allclose(obs[:, -1], [0.5, 2.0])  # b / d clipped to [0, 2]
    assert obs.shape == (2, 4)
    np.testing.assert_allclose(saute_observation(jnp.zeros((2, 3)), jnp.array([1.0, 5.0]), d, False)[:, -1],
                               [1.0, 5.0])
