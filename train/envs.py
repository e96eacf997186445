"""Environment adapters: a minimal functional protocol shared by CRAX tasks and the toy task.

`EnvFns.reset(key) -> state` and `EnvFns.step(state, action) -> state` act on ONE env (the trainer
vmaps them); `EnvFns.observe(state) -> (obs [obs_size], reward, cost, terminated)` reads a state;
`EnvFns.restore(first, state) -> state` is what a finished episode restarts from under `reset =
"replay"` (None: the first state itself). Time limits and resets are handled by the trainer, never by
the env (no brax wrappers): `reset = "replay"` does what brax's AutoResetWrapper does, `"fresh"` draws
a new layout from a fresh key. An env adapter (PPO-Saute's budget, `train.onpolicy.saute`) may add what a
fresh restart keeps of the last state (`keep`) and the learner's own reward with per-step info (`shaping`).
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from train.tasks import TaskSpec, task_spec

if TYPE_CHECKING:
    import jax

EnvState = Any
"""One env's state: a pytree of arrays of the env's own structure (crax's `State`, the toy's `ToyState`, an
adapter's `SauteState`); the trainer only vmaps, selects and stores it."""
PyTree = Any
"""A pytree of arrays of a structure the code does not look into (network parameters, optimiser states)."""


class EnvFns(NamedTuple):
    """Single-env functional interface (see module docstring)."""

    reset: Callable[[jax.Array], EnvState]
    step: Callable[[EnvState, jax.Array], EnvState]
    observe: Callable[[EnvState], tuple[jax.Array, jax.Array, jax.Array, jax.Array]]
    obs_size: int
    action_size: int
    name: str
    restore: Callable[[EnvState, EnvState], EnvState] | None = None
    keep: Callable[[EnvState, EnvState], EnvState] | None = None
    """`keep(new, old)`: an env restarting from a fresh reset (`reset = "fresh"`) with what it keeps of its last
    state (None: nothing)."""
    shaping: Callable[[EnvState], tuple[jax.Array, dict[str, jax.Array]]] | None = None
    """`shaping(state) -> (learner's reward, info)` of the step that led to `state`: the reward the learner
    trains on and per-step values named `info_names` (None: the env's reward, no info)."""
    info_names: tuple[str, ...] = ()


def import_crax() -> Any:
    """Import `crax.envs` with mujoco's "Failed to import warp" prints silenced."""
    with contextlib.redirect_stdout(io.StringIO()):
        import crax.envs

    _mend_fluid_clip()
    return crax.envs


class _ClipTakingOldKeywords:
    """jax.numpy whose `clip` also takes the `a_min`/`a_max` keywords that jax has removed."""

    def __init__(self, jnp: Any) -> None:
        self._jnp = jnp

    def __getattr__(self, name: str) -> Any:
        return getattr(self._jnp, name)

    def clip(self, x: Any, min: Any = None, max: Any = None, *, a_min: Any = None, a_max: Any = None) -> Any:  # noqa: A002
        return self._jnp.clip(x, a_min if min is None else min, a_max if max is None else max)


def _mend_fluid_clip() -> None:
    """crax's fluid model (`crax/fluid.py`, the swimmer's viscosity) calls `jp.clip(x, a_min=...)`, which the
    installed jax rejects, so every `velocity_swimmer` level failed at its first step: that module alone gets
    a jax.numpy whose clip takes both spellings (same numbers)."""
    import inspect

    import crax.fluid as fluid
    import jax.numpy as jnp

    if "a_min" not in inspect.signature(jnp.clip).parameters and fluid.jp is jnp:
        fluid.jp = _ClipTakingOldKeywords(jnp)


def autoreset_restore(first: EnvState, state: EnvState) -> EnvState:
    """What brax's (crax's) AutoResetWrapper restarts a finished env from: the first state's physics state
    (`pipeline_state`) and observation; everything else (`info`, `metrics`) carries on as in crax."""
    return state.replace(pipeline_state=first.pipeline_state, obs=first.obs)


def crax_level_arguments(spec: TaskSpec) -> tuple[int | None, dict[str, Any]]:
    """(`level`, constructor kwargs) that build `spec`'s level with `crax.envs.get_environment`.

    crax's two pitfalls: `safe_lift_humanoid` reads its level only from `difficulty=`, the `safe_velocity_*`
    tasks only from `velocity_threshold=` (crax's own threshold of that level); `level=k` would print a
    warning and build level 1 for both.
    """
    via = spec.family.level_via
    if via == "level":
        return spec.level, {}
    if via == "difficulty":
        return None, {"difficulty": spec.level}
    if via == "velocity_threshold":
        import_crax()
        from crax.envs.safe_velocity import get_threshold_for_level

        return None, {"velocity_threshold": float(get_threshold_for_level(spec.velocity_agent, spec.level))}
    raise ValueError(f"unknown level_via {via!r}")


def crax_environment(task: str, episode_length: int) -> Any:
    """crax-bench's own env of the cube label `task` (e.g. `goal_l2`, `velocity_hopper_l3`), as its trainers
    take it (`crax.envs.get_environment`, the env's default backend), at `task`'s level."""
    envs = import_crax()
    spec = task_spec(task)
    level, kwargs = crax_level_arguments(spec)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.filterwarnings("ignore", message="Brax System", category=UserWarning)
        return envs.get_environment(spec.env, level=level, episode_length=episode_length, **kwargs)


def make_crax_env(task: str, episode_length: int) -> EnvFns:
    """The crax-bench safety task of the cube label `task` (see `train.tasks`), its default backend."""
    import jax.numpy as jnp

    env = crax_environment(task, episode_length)

    def observe(state: EnvState) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        cost = state.info["cost"]
        return state.obs, state.reward, jnp.asarray(cost, jnp.float32), state.done

    return EnvFns(reset=_reset_with_step_entries(env), step=env.step, observe=observe,
                  obs_size=int(env.observation_size), action_size=int(env.action_size), name=task_spec(task).env,
                  restore=autoreset_restore)


def _reset_with_step_entries(env: Any) -> Callable[[jax.Array], EnvState]:
    """env.reset, with the entries its step adds to `metrics` and `info` already there (as 0): a scan over
    steps needs the state to keep one structure. crax's `safe_lift_humanoid` at level 3 adds
    `airtime_reward` in step only, so that level failed at its first step."""
    if not getattr(env, "_airtime_reward_weight", 0) > 0:
        return env.reset

    def reset(rng: jax.Array) -> EnvState:
        import jax.numpy as jnp

        state = env.reset(rng)
        zero = jnp.zeros((), jnp.float32)
        return state.replace(metrics={**state.metrics, "airtime_reward": zero},
                             info={**state.info, "airtime_reward": zero})

    return reset
