"""Networks, tanh-Gaussian policy distribution and running observation statistics (flax + jax).

Same design as brax's (and CRAX's vendored brax) PPO networks, so that throughput comparisons use
identical architectures: MLPs with swish activations and LeCun-uniform kernels, a policy head that
outputs `2 * action_size` logits (loc, softplus scale + 1e-3), tanh squashing with the log-det
Jacobian in log-probabilities, and Welford running mean/std of observations (std clamped to
[1e-6, 1e6]). Shapes: observations `[..., obs_size]`, logits `[..., 2A]`, values `[...]`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import linen


class MLP(linen.Module):
    """Dense layers with `activation` between them (none after the last)."""

    layer_sizes: Sequence[int]
    activation: Callable[[jax.Array], jax.Array] = linen.swish

    @linen.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i, size in enumerate(self.layer_sizes):
            x = linen.Dense(size, kernel_init=jax.nn.initializers.lecun_uniform(), name=f"hidden_{i}")(x)
            if i != len(self.layer_sizes) - 1:
                x = self.activation(x)
        return x


class Normalizer(NamedTuple):
    """Running statistics of observations: count (scalar), mean/summed_variance/std `[obs_size]`."""

    count: jax.Array
    mean: jax.Array
    summed_variance: jax.Array
    std: jax.Array


def normalizer_init(obs_size: int) -> Normalizer:
    """Empty statistics (mean 0, std 1)."""
    z = jnp.zeros((obs_size,), jnp.float32)
    return Normalizer(jnp.zeros((), jnp.float32), z, z, z + 1.0)


def normalizer_update(state: Normalizer, batch: jax.Array) -> Normalizer:
    """Merge a batch `[..., obs_size]` into the statistics (Welford / Chan parallel update)."""
    x = batch.reshape(-1, batch.shape[-1])
    count = state.count + x.shape[0]
    diff_old = x - state.mean
    mean = state.mean + diff_old.sum(axis=0) / count
    summed_variance = state.summed_variance + (diff_old * (x - mean)).sum(axis=0)
    std = jnp.clip(jnp.sqrt(jnp.maximum(summed_variance, 0.0) / count), 1e-6, 1e6)
    return Normalizer(count, mean, summed_variance, std)


def normalize_obs(obs: jax.Array, state: Normalizer) -> jax.Array:
    """(obs - mean) / std."""
    return (obs - state.mean) / state.std


class Gaussian(NamedTuple):
    """Diagonal Gaussian over pre-tanh actions."""

    loc: jax.Array
    scale: jax.Array

    def sample(self, key: jax.Array) -> jax.Array:
        """A pre-tanh sample, shape of loc."""
        return self.loc + self.scale * jax.random.normal(key, self.loc.shape)


def _tanh_log_det(x: jax.Array) -> jax.Array:
    return 2.0 * (jnp.log(2.0) - x - jax.nn.softplus(-2.0 * x))


class TanhGaussian:
    """Tanh-squashed diagonal Gaussian parameterised by logits `[..., 2A]`; greedy action = tanh(loc)."""

    def __init__(self, action_size: int, min_std: float = 1e-3) -> None:
        self.param_size = 2 * action_size
        self.min_std = min_std

    def create_dist(self, logits: jax.Array) -> Gaussian:
        """Split logits into (loc, softplus(scale) + min_std)."""
        loc, s = jnp.split(logits, 2, axis=-1)
        return Gaussian(loc, jax.nn.softplus(s) + self.min_std)

    def log_prob(self, logits: jax.Array, raw: jax.Array) -> jax.Array:
        """log density of tanh(raw) (pre-tanh `raw`), summed over action dims."""
        g = self.create_dist(logits)
        z = (raw - g.loc) / g.scale
        logp = -0.5 * z**2 - 0.5 * jnp.log(2.0 * jnp.pi) - jnp.log(g.scale)
        return (logp - _tanh_log_det(raw)).sum(axis=-1)

    def postprocess(self, raw: jax.Array) -> jax.Array:
        """Squash to [-1, 1]."""
        return jnp.tanh(raw)

    def sample(self, logits: jax.Array, key: jax.Array) -> jax.Array:
        """Squashed sample."""
        return jnp.tanh(self.create_dist(logits).sample(key))

    def mode(self, logits: jax.Array) -> jax.Array:
        """Greedy action tanh(loc)."""
        return jnp.tanh(self.create_dist(logits).loc)

    def entropy(self, logits: jax.Array, key: jax.Array) -> jax.Array:
        """One-sample estimate of the squashed entropy (Gaussian entropy + E log|d tanh|), `[...]`."""
        g = self.create_dist(logits)
        ent = 0.5 + 0.5 * jnp.log(2.0 * jnp.pi) + jnp.log(g.scale)
        return (ent + _tanh_log_det(g.sample(key))).sum(axis=-1)


class Network(NamedTuple):
    """init(key) -> params; apply(normalizer, params, obs) -> output."""

    init: Callable[[jax.Array], Any]
    apply: Callable[[Normalizer, Any, jax.Array], jax.Array]


class Networks(NamedTuple):
    """Policy, reward critic, cost critic and the action distribution."""

    policy_network: Network
    value_network: Network
    cost_value_network: Network
    parametric_action_distribution: TanhGaussian


def _network(module: MLP, obs_size: int, normalize: bool, squeeze: bool) -> Network:
    def apply(normalizer: Normalizer, params: Any, obs: jax.Array) -> jax.Array:
        x = normalize_obs(obs, normalizer) if normalize else obs
        out = module.apply(params, x)
        return out.squeeze(-1) if squeeze else out

    return Network(lambda key: module.init(key, jnp.zeros((1, obs_size))), apply)


def make_networks(obs_size: int, action_size: int, policy_hidden: Sequence[int], value_hidden: Sequence[int],
                  cost_value_hidden: Sequence[int], normalize: bool,
                  activation: Callable[[jax.Array], jax.Array] = linen.swish) -> Networks:
    """Build the three MLPs (see module docstring)."""
    dist = TanhGaussian(action_size)
    pol = MLP(tuple(policy_hidden) + (dist.param_size,), activation)
    val = MLP(tuple(value_hidden) + (1,), activation)
    cval = MLP(tuple(cost_value_hidden) + (1,), activation)
    return Networks(_network(pol, obs_size, normalize, False), _network(val, obs_size, normalize, True),
                    _network(cval, obs_size, normalize, True), dist)
