"""SAC networks as crax builds them (`crax/training/agents/sac{,_lag}/networks.py`), from train/nets.py parts.

crax's SAC differs from its PPO networks in activation (ReLU, not swish), sizes (256 x 2 for both) and the
critic: a Q network on the concatenation [normalised obs, action] with `n_critics` = 2 independent MLP heads
(flax submodules `MLP_0`, `MLP_1`, layers `hidden_<i>`), output `[..., n_critics]`. The cost Q network
(SAC-Lag, SAC-PID) is a second network of the same shape. Policy: the same MLP and tanh-Gaussian as
`train.nets` (logits `[..., 2A]`, scale softplus + 1e-3). crax's parameter trees load into these unchanged
(tests/test_offpolicy_parity.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import linen

from train.nets import MLP, Network, Normalizer, TanhGaussian, normalize_obs


class TwinQ(linen.Module):
    """`n_critics` MLPs `hidden_layer_sizes + (1,)` on [obs, action]; output `[..., n_critics]`."""

    hidden_layer_sizes: Sequence[int]
    n_critics: int = 2
    activation: Callable[[jax.Array], jax.Array] = linen.relu

    @linen.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        x = jnp.concatenate([obs, action], axis=-1)
        heads = [MLP(tuple(self.hidden_layer_sizes) + (1,), self.activation)(x) for _ in range(self.n_critics)]
        return jnp.concatenate(heads, axis=-1)


class QNetwork(NamedTuple):
    """init(key) -> params; apply(normalizer, params, obs `[..., O]`, action `[..., A]`) -> Q `[..., n_critics]`."""

    init: Callable[[jax.Array], Any]
    apply: Callable[[Normalizer, Any, jax.Array, jax.Array], jax.Array]


class SACNetworks(NamedTuple):
    """Policy (logits `[..., 2A]`), reward Q and cost Q (twin heads each) and the action distribution."""

    policy_network: Network
    q_network: QNetwork
    cost_q_network: QNetwork
    parametric_action_distribution: TanhGaussian


def make_sac_networks(obs_size: int, action_size: int, hidden: Sequence[int] = (256, 256), normalize: bool = True,
                      activation: Callable[[jax.Array], jax.Array] = linen.relu, n_critics: int = 2) -> SACNetworks:
    """Build crax's SAC(-Lag) networks: policy MLP `hidden + (2A,)`, reward and cost Q `TwinQ(hidden)`,
    LeCun-uniform kernels, observations normalised by the running statistics iff `normalize`."""
    dist = TanhGaussian(action_size)
    policy = MLP(tuple(hidden) + (dist.param_size,), activation)
    q = TwinQ(tuple(hidden), n_critics, activation)

    def policy_apply(normalizer: Normalizer, params: Any, obs: jax.Array) -> jax.Array:
        return policy.apply(params, normalize_obs(obs, normalizer) if normalize else obs)

    def q_apply(normalizer: Normalizer, params: Any, obs: jax.Array, action: jax.Array) -> jax.Array:
        return q.apply(params, normalize_obs(obs, normalizer) if normalize else obs, action)

    dummy_obs, dummy_act = jnp.zeros((1, obs_size)), jnp.zeros((1, action_size))
    policy_net = Network(lambda key: policy.init(key, dummy_obs), policy_apply)
    q_net = QNetwork(lambda key: q.init(key, dummy_obs, dummy_act), q_apply)
    return SACNetworks(policy_net, q_net, q_net, dist)
