"""The multiplier controllers of both families, once: a Lagrange step with an optional cap and a PID controller
with one config (OmniSafe's `common/pid_lagrange.py` serves its cppo_pid, sac_pid and td3_pid the same way).

Every rule compares a mean per-step cost `mean_cost` with `d_step` = d / T (cost units per env step) and
returns the next multiplier (a float32 scalar, or any shape that broadcasts). Who calls them, and how often:
PPO-Lag and PPO-PID once per update after SGD, from the update's batch mean (`train.onpolicy.algorithms`);
SAC-Lag and SAC-PID after every gradient step, from the minibatch mean (`train.offpolicy`), SAC-Lag with the
rate divided by T and capped at 2 (crax's choices). Importing this module needs no jax (the config is read by
`train.config` and `train.offpolicy.config`); the functions import it when first called.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import jax

    Scalar = jax.Array | float
else:
    Scalar = object


@dataclass(frozen=True)
class PidConfig:
    """The PID controller (Stooke et al. 2020, as crax-bench's `ppo_pid` and `sac_pid` train it) on the error
    v = mean per-step cost - d/T:
    I <- clip(I + v, -integral_clip, integral_clip); D <- derivative_ema D + (1 - derivative_ema)(v - v_prev);
    lambda <- clip(relu(lambda + (kp v + ki I + kd D)), 0, lambda_max).
    Defaults: crax's (its CLI and both `train()`s: `pid_kp`, `pid_ki`, `pid_kd`, `pid_integral_clip`,
    `pid_lambda_clip`, `pid_deriv_ema_beta`, `initial_lambda[_lagr]`)."""

    kp: float = 10.0
    ki: float = 0.01
    kd: float = 0.01
    integral_clip: float = 1.0
    """Anti-windup bound of the integral term (per-step cost units summed over updates)."""
    lambda_max: float = 1e6
    """Upper clip of lambda (crax `pid_lambda_clip`; 1e6: in effect no cap, unlike SAC-Lag's 2)."""
    derivative_ema: float = 0.95
    """Smoothing of the derivative term: weight of the previous derivative estimate (crax `pid_deriv_ema_beta`)."""
    init: float = 0.0
    """lambda_0."""


PID_RENAMED: dict[str, str] = {"lambda_clip": "lambda_max", "deriv_ema_beta": "derivative_ema"}
"""Field names SAC-PID's own config used before the two PID configs became `PidConfig` (`[offpolicy.sac_pid]`
of TOML files and stored manifests): still read, under their `PidConfig` name (`train.overrides`)."""


class PIDState(NamedTuple):
    """The PID controller's state (float32 scalars): clipped error integral, previous error, derivative EMA."""

    integral: Scalar
    prev_error: Scalar
    deriv_ema: Scalar


def pid_init() -> PIDState:
    """All zeros (crax's `init_aux_state_fn`)."""
    import jax.numpy as jnp

    z = jnp.zeros((), jnp.float32)
    return PIDState(z, z, z)


def lagrange_update(lam: Scalar, mean_cost: Scalar, d_step: Scalar, lr: float,
                    lam_max: float | None = None) -> jax.Array:
    """Projected gradient ascent on the per-step cost error: lambda <- relu(lambda + lr (mean_cost - d/T)), then
    min(., lam_max) where a cap is given (SAC-Lag: crax passes lr = lagrangian_lr / T and lam_max = 2)."""
    import jax
    import jax.numpy as jnp

    lam = jax.nn.relu(lam + lr * (mean_cost - d_step))
    return lam if lam_max is None else jnp.minimum(lam, jnp.asarray(lam_max, jnp.float32))


def pid_update(lam: Scalar, pid: Sequence[Scalar], mean_cost: Scalar, d_step: Scalar, kp: float, ki: float,
               kd: float, integral_clip: float, lambda_max: float,
               derivative_ema: float) -> tuple[jax.Array, PIDState]:
    """One PID step (see `PidConfig`), in crax's order of operations (`lambda + pid_output`).

    `pid`: (I, v_prev, D), a PIDState or any length-3 sequence (PPO-PID keeps it in its state vector).
    Returns (lambda', PIDState(I', v, D'))."""
    import jax
    import jax.numpy as jnp

    integral, prev, deriv = pid
    v = mean_cost - d_step
    integral = jnp.clip(integral + v, -integral_clip, integral_clip)
    deriv = derivative_ema * deriv + (1.0 - derivative_ema) * (v - prev)
    output = kp * v + ki * integral + kd * deriv
    return jnp.clip(jax.nn.relu(lam + output), 0.0, lambda_max), PIDState(integral, v, deriv)


def pid_step(config: PidConfig, lam: Scalar, pid: Sequence[Scalar], mean_cost: Scalar,
             d_step: Scalar) -> tuple[jax.Array, PIDState]:
    """`pid_update` with the gains of `config`."""
    return pid_update(lam, pid, mean_cost, d_step, config.kp, config.ki, config.kd, config.integral_clip,
                      config.lambda_max, config.derivative_ema)
