"""What training records in the cube, and the store for a grid of runs (no jax here).

Per run and iterate: the completed training episodes (compacted from the trainer's slot buffers) and the
per-iterate variables `iterate_vars()`, whose diagnostics (`DIAGNOSTICS`, means over the iterate's updates)
the compiled loop computes under the same names; at evaluation iterates, the expl/greedy episodes. The
algorithms' own variables (each record's `iterate_vars`: PPO-PID's PID state, PPO-Saute's budget, CRPO's
regime) are in every store and NaN for the runs of other algorithms. `mean_step_reward` is the mean
reward the learner saw (PPO-Saute: the budget-shaped one); the episodes are always the env's own reward.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cube.errors import CubeError
from train.config import TrainConfig
from train.offpolicy.config import OFFPOLICY_DIAGNOSTICS
from train.registry import algorithm, algorithms
from train.tasks import task_spec

DIAGNOSTICS = ("policy_loss", "value_loss", "cost_value_loss", "entropy", "approx_kl", "clip_fraction",
               "mean_step_cost", "mean_step_reward")
"""Per-iterate diagnostics of the on-policy runs: means over the iterate's updates, computed by
`train.onpolicy.core.make_train`'s loop (`approx_kl`: the k3 estimate mean((rho - 1) - log rho))."""
OFFPOLICY_VARS = tuple(v for v in OFFPOLICY_DIAGNOSTICS if v not in DIAGNOSTICS)
"""The off-policy runs' own per-iterate variables (`train.offpolicy.config.OFFPOLICY_DIAGNOSTICS`: alpha, the
temperature after the iterate; critic/cost-critic/actor/temperature losses and the minibatch cost lambda moved
on, means over the iterate's gradient steps; replay_size); NaN for on-policy runs. lambda is `multiplier`."""
SHARED_VARS = ("env_steps", "multiplier", "n_updates", "dropped_episodes")
"""Per-iterate variables written for every run of either family."""


def iterate_vars() -> tuple[str, ...]:
    """Per-iterate variables of every store: the shared ones, the on-policy diagnostics, every registered
    algorithm's own (in registry order), the off-policy ones (NaN where a run has none)."""
    own = (v for a in algorithms() for v in a.iterate_vars)
    return tuple(dict.fromkeys((*SHARED_VARS, *DIAGNOSTICS, *own, *OFFPOLICY_VARS)))


def check_labels(algos: Sequence[str], tasks: Sequence[str], bounds: Sequence[float], seeds: Sequence[int],
                 known_tasks: Sequence[str] | None = None) -> None:
    """One-line CubeError for an unknown algorithm, task or level, a bound <= 0 or an empty list.

    `known_tasks`: extra task labels accepted besides the crax tasks of `train.tasks` (the test-only `toy`).
    """
    extra = tuple(known_tasks or ())
    for a in algos:
        algorithm(a)
    for t in tasks:
        if t not in extra:
            task_spec(t)
    for b in bounds:
        if not np.isfinite(b) or b <= 0:
            raise CubeError(f"safety bound must be a number > 0, got {b:g}")
    for name, vals in (("algorithm", algos), ("task", tasks), ("bound", bounds), ("seed", seeds)):
        if len(vals) == 0:
            raise CubeError(f"no {name} given")


def n_episode_slots(config: TrainConfig) -> int:
    """Episode slots E: every env's episodes of one iterate, or the eval episodes if more."""
    return max(config.num_envs * config.episodes_per_env_per_iterate, config.eval_episodes)


def eval_iterates(config: TrainConfig) -> list[int]:
    """Iterates after which the policy is evaluated and checkpointed (always the last one)."""
    J = config.n_iterates
    its = set(range(config.eval_every - 1, J, config.eval_every)) if config.eval_every else set()
    return sorted(its | {J - 1})


def prepare_store(out: str | Path, config: TrainConfig, algos: Sequence[str], tasks: Sequence[str],
                  bounds: Sequence[float], seeds: Sequence[int]) -> None:
    """Create the cube for the grid, or accept an existing one whose grid holds these runs."""
    from cube import create_store, open_cube

    J, E, variables = config.n_iterates, n_episode_slots(config), iterate_vars()
    attrs = {"description": "saferl train: crax-bench safety-task runs", "synthetic": False}
    try:
        create_store(out, algos=list(algos), tasks=list(tasks), bounds=[float(b) for b in bounds],
                     seeds=[int(s) for s in seeds], n_iterates=J, n_episodes=E, iterate_vars=variables,
                     attrs=attrs, exist_ok=True)
        return
    except CubeError as exc:
        if not Path(out).exists():
            raise
        first = exc
    ds = open_cube(out)  # raises CubeError for foreign / broken schemas
    labels = {"algo": algos, "task": tasks, "bound": [float(b) for b in bounds], "seed": seeds}
    subset = all(set(np.asarray(ds[d].values).tolist()) >= set(v) for d, v in labels.items())
    same = ds.sizes["iterate"] == J and ds.sizes["episode"] == E
    if not (subset and same):
        raise first
    missing = [v for v in variables if v not in ds]
    if missing:  # a store written before these variables existed: add them (NaN), nothing is rewritten
        from cube import grow_store

        grow_store(out, iterate_vars=missing)


def compact_episodes(reward: np.ndarray, cost: np.ndarray, count: np.ndarray,
                     capacity: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Completed episodes from `[S, n]` buffers (slot s of env i valid iff s < count[i]).

    Returns (reward [k], cost [k], dropped): episodes ordered slot-major, at most `capacity` of them;
    `dropped` counts episodes that did not fit a buffer slot or the store's capacity.
    """
    slots = reward.shape[0]
    valid = np.arange(slots)[:, None] < np.minimum(count, slots)[None, :]
    r, c = reward[valid], cost[valid]
    dropped = int(np.maximum(count - slots, 0).sum()) + max(0, r.size - capacity)
    return r[:capacity], c[:capacity], dropped
