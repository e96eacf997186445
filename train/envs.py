"""Environment adapters: a minimal functional protocol shared by CRAX tasks and the toy task.

`EnvFns.reset(key) -> state` and `EnvFns.step(state, action) -> state` act on ONE env (the trainer
vmaps them); `EnvFns.observe(state) -> (obs [obs_size], reward, cost, terminated)` reads a state;
`EnvFns.restore(first, state) -> state` is what a finished episode restarts from under `reset =
"replay"` (None: the first state itself). Time limits and resets are handled by the trainer, never by
the env (no brax wrappers): `reset = "replay"` does what brax's AutoResetWrapper does, `"fresh"` draws
a new layout from a fresh key.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

from train.config import TASKS


class EnvFns(NamedTuple):
    """Single-env functional interface (see module docstring)."""

    reset: Callable[[Any], Any]
    step: Callable[[Any, Any], Any]
    observe: Callable[[Any], tuple[Any, Any, Any, Any]]
    obs_size: int
    action_size: int
    name: str
    restore: Callable[[Any, Any], Any] | None = None


def import_crax() -> Any:
    """Import `crax.envs` with mujoco's "Failed to import warp" prints silenced."""
    with contextlib.redirect_stdout(io.StringIO()):
        import crax.envs

    return crax.envs


def autoreset_restore(first: Any, state: Any) -> Any:
    """What brax's (crax's) AutoResetWrapper restarts a finished env from: the first state's physics state
    (`pipeline_state`) and observation; everything else (`info`, `metrics`) carries on as in crax."""
    return state.replace(pipeline_state=first.pipeline_state, obs=first.obs)


def make_crax_env(task: str, episode_length: int) -> EnvFns:
    """CRAX Safe Point Level-1 task `task` (short name: goal/circle/push/button), MJX backend."""
    import jax.numpy as jnp

    envs = import_crax()
    name = TASKS[task]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Brax System", category=UserWarning)
        env = envs.get_environment(name, level=1, episode_length=episode_length)

    def observe(state: Any) -> tuple[Any, Any, Any, Any]:
        cost = state.info["cost"]
        return state.obs, state.reward, jnp.asarray(cost, jnp.float32), state.done

    return EnvFns(reset=env.reset, step=env.step, observe=observe, obs_size=int(env.observation_size),
                  action_size=int(env.action_size), name=name, restore=autoreset_restore)
