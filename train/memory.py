"""How many runs of a task fit one vmapped program: a run's device memory, estimated from traced shapes, against
the accelerator's limit or this machine's memory (jax imported when called; the off-policy replay buffers are
checked by `train.offpolicy.config.check_replay_memory`)."""

from __future__ import annotations

import os

import numpy as np

from cube.errors import CubeError
from train.config import TrainConfig
from train.offpolicy.config import fmt_bytes
from train.sweep import make_env


def run_bytes(config: TrainConfig, task: str) -> int:
    """Estimated device memory of one run in a vmapped group, bytes (traced shapes, nothing compiles; a
    PPO-Saute run's one extra observation column is left out).

    Training state (params, optimiser, env states; from `jax.eval_shape`) twice (loop carry in and out),
    plus one update's transitions `[unrolls, unroll_length, num_envs]` three times (rollout, the
    shuffled copy, minibatch activations/gradients), plus the evaluation's 2 x eval_episodes env states.
    """
    import jax
    import jax.numpy as jnp

    from train.onpolicy.core import make_train

    trainer = make_train(config, make_env(task, config.episode_length))
    shapes = jax.eval_shape(trainer.init, jax.random.PRNGKey(0), jnp.int32(0), jnp.float32(0), jnp.float32(0))
    state = sum(int(np.prod(x.shape)) * x.dtype.itemsize for x in jax.tree_util.tree_leaves(shapes))
    env_bytes = sum(int(np.prod(x.shape)) * x.dtype.itemsize
                    for x in jax.tree_util.tree_leaves(shapes.rollout.env_state)) / config.num_envs
    obs, act = trainer.env.obs_size, trainer.env.action_size
    steps = config.unrolls_per_update * config.unroll_length * config.num_envs
    transitions = steps * (2 * obs + 3 * act + 6) * 4
    evals = 2 * config.eval_episodes * env_bytes
    return int(2 * state + 3 * transitions + evals)


def memory_budget(fraction: float = 0.7) -> tuple[int, str]:
    """(bytes, where) usable by one program: the accelerator's limit, or this machine's physical memory."""
    import jax

    dev = jax.devices()[0]
    stats = dev.memory_stats() if dev.platform != "cpu" else None
    if stats and stats.get("bytes_limit"):
        return int(fraction * stats["bytes_limit"]), f"{dev.device_kind} memory"
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(fraction * total), "this machine's memory"


def parallel_runs(config: TrainConfig, task: str, requested: int | None, largest_group: int,
                  budget: tuple[int, str] | None = None) -> int:
    """Runs per vmapped program: `requested` (CubeError with a suggestion if it does not fit), or as many as
    fit (at most `largest_group`)."""
    per_run = run_bytes(config, task)
    limit, where = budget or memory_budget()
    fit = max(1, limit // max(per_run, 1))
    if requested is None:
        return int(min(fit, largest_group))
    if requested > fit:
        raise CubeError(f"--parallel-runs {requested} needs about {fmt_bytes(requested * per_run)} "
                        f"({fmt_bytes(per_run)} per run) but {fmt_bytes(limit)} of {where} are usable; "
                        f"use --parallel-runs {fit} or less")
    return requested
