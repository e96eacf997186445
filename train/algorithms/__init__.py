"""The algorithm registry: one record per algorithm, each in its own module of this package.

`core.make_train` builds its `lax.switch` branches from `ALGORITHMS` in order (an algorithm's `id` is
its position); the host side takes the names, initial multipliers and `uses_multiplier` from the same
records. A new algorithm is a module here with its `Algorithm` record, appended to `ALGORITHMS`.
"""

from __future__ import annotations

from cube.errors import CubeError
from train.algorithms.base import Algorithm, LossInputs, cost_advantage, d_step
from train.algorithms.focops import FOCOPS
from train.algorithms.p3o import P3O
from train.algorithms.ppo import PPO
from train.algorithms.ppo_lag import PPO_LAG

ALGORITHMS: tuple[Algorithm, ...] = (PPO, PPO_LAG, P3O, FOCOPS)
"""The registry, in switch order (PPO, PPO-Lag lambda, P3O kappa, FOCOPS nu)."""
assert [a.id for a in ALGORITHMS] == list(range(len(ALGORITHMS)))

ALGOS: tuple[str, ...] = tuple(a.name for a in ALGORITHMS)
"""Algorithm names as stored in the cube's `algo` coordinate."""


def algorithm(name: str) -> Algorithm:
    """The record of `name` (one-line CubeError for an unknown name)."""
    for a in ALGORITHMS:
        if a.name == name:
            return a
    raise CubeError(f"unknown algorithm '{name}'; choose from {', '.join(ALGOS)}")


__all__ = ["ALGORITHMS", "ALGOS", "Algorithm", "LossInputs", "algorithm", "cost_advantage", "d_step"]
