"""Unit tests with hand-computed values for what only the crax parity tests covered (issue 26 item 4):
FOCOPS's crax-form policy loss, the advantage-estimator choice, and the raw (unnormalised) cost advantage."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from train.config import TrainConfig  # noqa: E402
from train.onpolicy import losses as L  # noqa: E402
from train.onpolicy.algorithms.base import cost_advantage  # noqa: E402

RATIO = np.array([1.0, 2.0], dtype=np.float32)
ADV_R = np.array([1.0, 2.0], dtype=np.float32)
ADV_C = np.array([0.5, 1.0], dtype=np.float32)
# (A_r - nu A_c) / (1 + nu) at nu = 1: [0.25, 0.5]; rho times it: [0.25, 1.0], mean 0.625
KL = ((1.0 - 1.0) - math.log(1.0) + (2.0 - 1.0) - math.log(2.0)) / 2  # mean((rho - 1) - log rho) = 0.1534264


def _focops(kl_threshold: float, temperature: float = 0.5) -> float:
    return float(L.focops_crax_policy_loss(jnp.asarray(RATIO), jnp.log(RATIO), jnp.asarray(ADV_R),
                                           jnp.asarray(ADV_C), jnp.float32(1.0), temperature, kl_threshold))


def test_focops_crax_loss_inside_the_kl_threshold() -> None:
    assert _focops(kl_threshold=1.0) == pytest.approx(-0.625 / 0.5, rel=1e-6)
    assert _focops(kl_threshold=1.0, temperature=2.0) == pytest.approx(-0.625 / 2.0, rel=1e-6)
    assert _focops(kl_threshold=KL + 1e-6) == pytest.approx(-1.25, rel=1e-6)  # k <= threshold: factor 1


def test_focops_crax_loss_beyond_the_kl_threshold_is_scaled_down() -> None:
    assert _focops(kl_threshold=0.05) == pytest.approx(-1.25 * 0.05 / (KL + 1e-8), rel=1e-5)  # -0.40736


def test_focops_crax_loss_differentiates_the_batch_factor() -> None:
    """d/d rho_1 of -mean(rho adv) / T * eta / k with k = mean((rho - 1) - log rho), at rho = (1, 2):
    -(0.5 / 2) / 0.5 * eta / k + 1.25 * eta / k^2 * (1 - 1/2) / 2."""
    eta = 0.05

    def loss(ratio: jax.Array) -> jax.Array:
        return L.focops_crax_policy_loss(ratio, jnp.log(ratio), jnp.asarray(ADV_R), jnp.asarray(ADV_C),
                                         jnp.float32(1.0), 0.5, eta)

    grad = np.asarray(jax.grad(loss)(jnp.asarray(RATIO)))
    want = -(0.5 / 2) / 0.5 * eta / KL + 1.25 * eta / KL**2 * (1 - 1 / 2) / 2
    assert grad[1] == pytest.approx(want, rel=1e-4)


def test_focops_held_kl_factor_keeps_the_value_and_drops_its_gradient() -> None:
    """loss = "crax_stop_gradient": the same value; d/d rho_1 only the surrogate's -(0.5 / 2) / 0.5 * eta / k."""
    eta = 0.05

    def loss(ratio: jax.Array, differentiate_kl: bool) -> jax.Array:
        return L.focops_crax_policy_loss(ratio, jnp.log(ratio), jnp.asarray(ADV_R), jnp.asarray(ADV_C),
                                         jnp.float32(1.0), 0.5, eta, differentiate_kl=differentiate_kl)

    ratio = jnp.asarray(RATIO)
    assert float(loss(ratio, False)) == pytest.approx(float(loss(ratio, True)), rel=1e-7)
    grad = np.asarray(jax.grad(loss)(ratio, False))
    assert grad[1] == pytest.approx(-(0.5 / 2) / 0.5 * eta / KL, rel=1e-4)


def test_focops_crax_loss_raises_the_kl_while_its_surrogate_is_positive() -> None:
    """Why crax's FOCOPS can run away (tests/test_train_toy.py FOCOPS_NOTE): with every advantage negative
    the surrogate -mean(rho A) / T is positive, and beyond eta the loss falls as the policy moves away from
    the old one, so a gradient step raises k; held constant, the step lowers the ratios (the surrogate's
    own direction) and k with them."""
    eta = 0.05
    adv = -jnp.asarray(ADV_R)

    def loss(log_ratio: jax.Array, differentiate_kl: bool) -> jax.Array:
        return L.focops_crax_policy_loss(jnp.exp(log_ratio), log_ratio, adv, jnp.zeros(2), jnp.float32(0.0), 0.5,
                                         eta, differentiate_kl=differentiate_kl)

    log_ratio = jnp.log(jnp.asarray(RATIO))  # k = 0.153 > eta
    for differentiate_kl, kl_rises in ((True, True), (False, False)):
        stepped = log_ratio - 0.01 * jax.grad(loss)(log_ratio, differentiate_kl)
        k0, k1 = (float(L.approx_kl(jnp.exp(x), x)) for x in (log_ratio, stepped))
        assert (k1 > k0) == kl_rises, (differentiate_kl, k0, k1)


# rewards (1, 2), values (0.5, 1), V(s_T) = 2, gamma 0.9, lambda 0.5, one env (B = 1)
ARGS = dict(rewards=jnp.array([[1.0], [2.0]]), values=jnp.array([[0.5], [1.0]]), bootstrap_value=jnp.array([2.0]),
            discount=0.9, lam=0.5)


def _estimate(name: str, termination=(0.0, 0.0), truncation=(0.0, 0.0)) -> tuple[np.ndarray, np.ndarray]:
    fn = L.ADVANTAGE_ESTIMATORS[name]
    vs, adv = fn(termination=jnp.array(termination)[:, None], truncation=jnp.array(truncation)[:, None], **ARGS)
    return np.asarray(vs)[:, 0], np.asarray(adv)[:, 0]


def test_gae_by_hand() -> None:
    """delta = (1 + 0.9 * 1 - 0.5, 2 + 0.9 * 2 - 1) = (1.4, 2.8); A_1 = 2.8, A_0 = 1.4 + 0.45 * 2.8 = 2.66."""
    vs, adv = _estimate("gae")
    np.testing.assert_allclose(adv, [2.66, 2.8], rtol=1e-6)
    np.testing.assert_allclose(vs, [3.16, 3.8], rtol=1e-6)
    _, adv = _estimate("gae", termination=(1.0, 0.0))  # episode ends after step 0: no bootstrap, no carry
    np.testing.assert_allclose(adv, [0.5, 2.8], rtol=1e-6)
    _, adv = _estimate("gae", truncation=(1.0, 0.0))  # cut at the time limit: step 0 carries no signal
    np.testing.assert_allclose(adv, [0.0, 2.8], rtol=1e-6)


def test_brax_advantages_by_hand() -> None:
    """brax: the same targets v = (3.16, 3.8); A_t = r_t + 0.9 v_{t+1} - V(s_t) with v_2 = V(s_T) = 2:
    (1 + 0.9 * 3.8 - 0.5, 2 + 0.9 * 2 - 1) = (3.92, 2.8)."""
    vs, adv = _estimate("brax")
    np.testing.assert_allclose(vs, [3.16, 3.8], rtol=1e-6)
    np.testing.assert_allclose(adv, [3.92, 2.8], rtol=1e-6)
    _, adv = _estimate("brax", truncation=(1.0, 0.0))
    np.testing.assert_allclose(adv, [0.0, 2.8], rtol=1e-6)


def test_the_advantage_estimator_is_chosen_by_the_config() -> None:
    assert L.ADVANTAGE_ESTIMATORS == {"brax": L.brax_gae, "gae": L.gae}
    assert TrainConfig().advantage == "brax"  # crax's formulation is the default
    assert TrainConfig(advantage="gae").advantage == "gae"
    TrainConfig(advantage="gae").validate()
    with pytest.raises(Exception, match="advantage must be one of 'brax', 'gae'"):
        TrainConfig(advantage="td0").validate()


def test_the_cost_advantage_is_raw_unless_both_switches_say_normalise() -> None:
    x = jnp.array([1.0, 2.0, 3.0])
    normalised = [-math.sqrt(1.5), 0.0, math.sqrt(1.5)]  # (x - 2) / std, std = sqrt(2/3)
    for config_on, section_on in ((True, False), (False, True), (False, False)):
        out = cost_advantage(SimpleNamespace(normalize_advantage=config_on),
                             SimpleNamespace(normalize_cost_advantage=section_on), x)
        assert out is x  # the raw advantage itself, not a copy
    out = cost_advantage(SimpleNamespace(normalize_advantage=True), SimpleNamespace(normalize_cost_advantage=True), x)
    np.testing.assert_allclose(np.asarray(out), normalised, rtol=1e-5)
    config = TrainConfig()
    assert (config.ppo_lag.normalize_cost_advantage, config.p3o.normalize_cost_advantage,
            config.focops.normalize_cost_advantage) == (True, False, False)  # crax: raw for P3O and FOCOPS
