"""The trainers' update wiring, by hand, without crax (issue 36): what each on-policy algorithm record feeds its
multiplier (or state) update and its policy loss — which config fields, which cost statistic, which advantage,
the previous update's violation — checked against values worked out here. Before, five such mutations (a
swapped field, the wrong cost statistic, a normalised cost advantage where crax keeps it raw, ...) were caught
only by the crax parity tests, so without crax-bench installed nothing caught them. Every config value below
is distinct, so a record reading the wrong one gives another number."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from train.algorithm import d_step  # noqa: E402
from train.config import TrainConfig  # noqa: E402
from train.onpolicy import losses as L  # noqa: E402
from train.onpolicy.algorithms.base import LossInputs  # noqa: E402
from train.registry import algorithm  # noqa: E402

MEAN, D_STEP = 0.03, 0.0125  # the update's batch mean per-step cost; d/T
V = MEAN - D_STEP  # 0.0175, the error every update moves on


def _config() -> TrainConfig:
    c = TrainConfig()
    return replace(c, ppo_lag=replace(c.ppo_lag, lr=2.5),
                   p3o=replace(c.p3o, kappa_init=0.02, increase=1.3, decay=0.7, kappa_max=0.05),
                   focops=replace(c.focops, nu_lr=4.0, nu_max=0.2),
                   ppo_pid=replace(c.ppo_pid, kp=7.0, ki=0.3, kd=0.2, integral_clip=0.01, lambda_max=5.0,
                                   derivative_ema=0.6),
                   crpo=replace(c.crpo, eta=0.01))


def _step(name: str, mult: float, state: tuple[float, ...] = (), mean: float = MEAN) -> tuple[float, np.ndarray]:
    m, s = algorithm(name).step(_config(), jnp.float32(mult), jnp.asarray(state or (0.0,), jnp.float32),
                                jnp.float32(mean), jnp.float32(D_STEP))
    return float(m), np.asarray(s)


def test_d_step_is_the_bound_over_the_episode_length() -> None:
    assert d_step(replace(TrainConfig(), episode_length=400), 25.0) == 25.0 / 400


def test_ppo_lag_moves_lambda_by_its_own_rate_on_the_per_step_error() -> None:
    assert _step("ppo_lag", 0.5)[0] == pytest.approx(0.5 + 2.5 * V)
    assert _step("ppo_lag", 0.01, mean=0.0)[0] == 0.0  # relu: never below 0


def test_p3o_grows_kappa_on_violation_up_to_its_max_and_decays_it_to_its_init() -> None:
    assert _step("p3o", 0.03)[0] == pytest.approx(0.039)  # x1.3
    assert _step("p3o", 0.045)[0] == pytest.approx(0.05)  # capped at kappa_max
    assert _step("p3o", 0.04, mean=0.01)[0] == pytest.approx(0.028)  # x0.7 under the budget
    assert _step("p3o", 0.025, mean=0.01)[0] == pytest.approx(0.02)  # not below kappa_init


def test_focops_moves_nu_by_its_rate_within_zero_and_its_max() -> None:
    assert _step("focops", 0.1)[0] == pytest.approx(0.1 + 4.0 * V)
    assert _step("focops", 0.19)[0] == pytest.approx(0.2)
    assert _step("focops", 0.01, mean=0.0)[0] == 0.0


def test_ppo_pid_moves_lambda_and_its_state_by_hand() -> None:
    integral, prev, deriv = 0.005, 0.004, 0.1
    lam, state = _step("ppo_pid", 1.0, (integral, prev, deriv))
    i2 = min(integral + V, 0.01)  # clipped at integral_clip
    d2 = 0.6 * deriv + 0.4 * (V - prev)
    assert lam == pytest.approx(1.0 + 7.0 * V + 0.3 * i2 + 0.2 * d2, rel=1e-6)
    np.testing.assert_allclose(state[:3], [i2, V, d2], rtol=1e-6)
    assert _step("ppo_pid", 4.99, (0.0, 0.0, 0.0))[0] == pytest.approx(5.0)  # lambda_max


def test_crpo_sets_the_next_regime_from_the_error_and_eta() -> None:
    assert _step("crpo", 0.0, (1.0,))[1][0] == 0.0  # V = 0.0175 > eta 0.01: a cost step next
    assert _step("crpo", 0.0, (0.0,), mean=0.02)[1][0] == 1.0  # 0.0075 <= eta: a reward step
    assert _step("crpo", 0.7, (1.0,))[0] == pytest.approx(0.7)  # no multiplier moves


def test_ppo_has_no_multiplier_to_move() -> None:
    assert not algorithm("ppo").uses_multiplier and algorithm("ppo_lag").uses_multiplier


# ------------------------------------------------------------------------------------ policy losses
RATIO = np.array([0.9, 1.1, 1.3, 0.6], np.float32)
ADV = np.array([1.0, -0.5, 0.25, 2.0], np.float32)
CADV = np.array([3.0, 1.0, -1.0, 5.0], np.float32)  # mean 2, not unit scale: normalising shows


def _inputs(mult: float = 0.5, last_violation: float = 0.004) -> LossInputs:
    return LossInputs(jnp.asarray(RATIO), jnp.log(jnp.asarray(RATIO)), jnp.asarray(ADV), jnp.asarray(CADV),
                      jnp.asarray(np.full(4, 0.01, np.float32)), jnp.float32(mult), jnp.float32(MEAN),
                      jnp.float32(D_STEP), jnp.float32(last_violation), jnp.asarray([1.0, 0.0, 0.0], jnp.float32))


def _clipped(ratio: np.ndarray, adv: np.ndarray, eps: float) -> float:
    """-mean(min(rho A, clip(rho, 1 - eps, 1 + eps) A)), by hand."""
    return -float(np.mean(np.minimum(ratio * adv, np.clip(ratio, 1 - eps, 1 + eps) * adv)))


def _normalised(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / (x.std() + 1e-8)


def test_ppo_lag_loss_uses_the_normalised_cost_advantage_and_lambda() -> None:
    """The clipped surrogate on A_r - lambda A_c, A_c normalised over the minibatch (crax's PPO-Lag)."""
    config = _config()
    eps = config.clip_epsilon
    got = float(algorithm("ppo_lag").policy_loss(config, _inputs(mult=0.5)))
    assert got == pytest.approx(_clipped(RATIO, ADV - 0.5 * _normalised(CADV), eps), rel=1e-5)
    assert got != pytest.approx(_clipped(RATIO, ADV - 0.5 * CADV, eps), rel=1e-3)  # the raw one differs
    pid = float(algorithm("ppo_pid").policy_loss(config, _inputs(mult=0.5)))
    assert pid == pytest.approx(got, rel=1e-6)  # PPO-PID trains crax's PPO-Lag loss


def test_p3o_loss_takes_the_previous_updates_violation_and_the_raw_cost_advantage() -> None:
    """crax's form (the default): the penalty's gap is the violation passed in from the previous update, not the
    minibatch's mean cost; the cost advantage is kept raw."""
    config = _config()
    assert config.p3o.violation == "previous_update" and not config.p3o.normalize_cost_advantage
    record = algorithm("p3o")
    small, large = (float(record.policy_loss(config, _inputs(mult=0.5, last_violation=v))) for v in (0.0, 0.3))
    assert small != large  # the violation passed in moves the loss
    want = float(L.p3o_crax_policy_loss(jnp.asarray(RATIO), jnp.asarray(ADV), jnp.asarray(CADV), 0.5, 0.3,
                                        config.clip_epsilon, config.discount))
    assert large == pytest.approx(want, rel=1e-6)
    normalised = float(L.p3o_crax_policy_loss(jnp.asarray(RATIO), jnp.asarray(ADV), jnp.asarray(_normalised(CADV)),
                                              0.5, 0.3, config.clip_epsilon, config.discount))
    assert large != pytest.approx(normalised, rel=1e-4)


def test_focops_loss_is_crax_form_on_the_raw_cost_advantage() -> None:
    """(A_r - nu A_c)/(1 + nu) times rho, over the temperature; scaled down where the batch KL (k3, from the
    log ratio) exceeds the threshold."""
    config = _config()
    fc = config.focops
    got = float(algorithm("focops").policy_loss(config, _inputs(mult=0.5)))
    kl = float(np.mean((RATIO - 1) - np.log(RATIO)))
    base = -float(np.mean(RATIO * (ADV - 0.5 * CADV) / 1.5)) / fc.temperature
    want = base * (1.0 if kl <= fc.kl_threshold else fc.kl_threshold / kl)
    assert got == pytest.approx(want, rel=1e-5)
    assert not math.isclose(got, base * (fc.kl_threshold / kl if kl <= fc.kl_threshold else 1.0), rel_tol=1e-4)


def test_crpo_loss_follows_the_regime_in_the_state() -> None:
    config = _config()
    record = algorithm("crpo")
    reward_step = float(record.policy_loss(config, _inputs()))
    cost_step = float(record.policy_loss(config, _inputs()._replace(state=jnp.asarray([0.0, 0.0, 0.0]))))
    eps = config.clip_epsilon
    assert reward_step == pytest.approx(_clipped(RATIO, ADV, eps), rel=1e-5)
    assert cost_step == pytest.approx(_clipped(RATIO, -_normalised(CADV), eps), rel=1e-4)
