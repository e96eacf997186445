"""The algorithm registry: one record per algorithm, each in its own module of this package.

`core.make_train` builds its `lax.switch` branches from `ALGORITHMS` in order (an algorithm's `id` is
its position); the host side takes the names, initial multipliers and `uses_multiplier` from the same
records. A new algorithm is a module here with its `Algorithm` record, appended to `ALGORITHMS`.
"""

from __future__ import annotations

from collections.abc import Sequence

from cube.errors import CubeError
from train.algorithms.base import Algorithm, LossInputs, StateVar, cost_advantage, d_step
from train.algorithms.crpo import CRPO
from train.algorithms.focops import FOCOPS
from train.algorithms.p3o import P3O
from train.algorithms.ppo import PPO
from train.algorithms.ppo_lag import PPO_LAG
from train.algorithms.ppo_pid import PPO_PID
from train.algorithms.ppo_saute import PPO_SAUTE
from train.config import TrainConfig
from train.offpolicy import OFFPOLICY_ALGOS, OffPolicyAlgorithm, offpolicy_algorithm

ALGORITHMS: tuple[Algorithm, ...] = (PPO, PPO_LAG, P3O, FOCOPS, PPO_PID, PPO_SAUTE, CRPO)
"""The registry, in switch order (PPO, PPO-Lag lambda, P3O kappa, FOCOPS nu, PPO-PID lambda, PPO-Saute, CRPO)."""
assert [a.id for a in ALGORITHMS] == list(range(len(ALGORITHMS)))

ALGOS: tuple[str, ...] = tuple(a.name for a in ALGORITHMS)
"""Algorithm names as stored in the cube's `algo` coordinate."""
PAPER_ALGOS: tuple[str, ...] = ("ppo", "ppo_lag", "p3o", "focops")
"""The paper's four."""
STATE_SIZE: int = max(len(a.initial_state(TrainConfig())) for a in ALGORITHMS)
"""Length of the state vector every run carries (the longest algorithm state; unused slots stay 0)."""
ALGORITHM_VARS: tuple[str, ...] = tuple(dict.fromkeys(v for a in ALGORITHMS for v in a.iterate_vars))
"""Every algorithm's own per-iterate variables, in registry order (NaN for the runs of other algorithms)."""


def algorithm(name: str) -> Algorithm:
    """The record of `name` (one-line CubeError for an unknown name)."""
    for a in ALGORITHMS:
        if a.name == name:
            return a
    raise CubeError(f"unknown algorithm '{name}'; choose from {', '.join(ALGOS)}")

ALL_ALGOS: tuple[str, ...] = ALGOS + OFFPOLICY_ALGOS
"""Every name `saferl train --algos` accepts: the on-policy registry, then the off-policy one (`train.offpolicy`:
sac, sac_lag, sac_pid), whose runs train in their own programs (`train.offpolicy.program`)."""


def is_offpolicy(name: str) -> bool:
    """Whether `name` is an off-policy algorithm (trained by `train.offpolicy`)."""
    return name in OFFPOLICY_ALGOS


def any_algorithm(name: str) -> Algorithm | OffPolicyAlgorithm:
    """The record of `name` in either registry (one-line CubeError naming every algorithm for an unknown one)."""
    if is_offpolicy(name):
        return offpolicy_algorithm(name)
    if name in ALGOS:
        return algorithm(name)
    raise CubeError(f"unknown algorithm '{name}'; choose from {', '.join(ALL_ALGOS)}")


def initial_state(name: str, config: TrainConfig) -> tuple[float, ...]:
    """The state vector `[STATE_SIZE]` a run of `name` starts with (its own slots, then zeros)."""
    own = tuple(float(x) for x in algorithm(name).initial_state(config))
    return own + (0.0,) * (STATE_SIZE - len(own))


def program_flags(names: Sequence[str]) -> tuple[bool, bool]:
    """(cost_critic, budget) of one program training runs of `names`: the cost critic if any needs it; the
    budget observation for all or none (CubeError for a mix: their networks differ)."""
    algos = [algorithm(n) for n in names]
    budgets = {a.budget for a in algos}
    if len(budgets) > 1:
        raise CubeError(f"{', '.join(sorted({a.name for a in algos if a.budget}))} cannot share a program with "
                        f"{', '.join(sorted({a.name for a in algos if not a.budget}))} (budget-augmented observations)")
    return any(a.cost_critic for a in algos), budgets.pop()


__all__ = ["ALGORITHMS", "ALGORITHM_VARS", "ALGOS", "ALL_ALGOS", "PAPER_ALGOS", "STATE_SIZE", "Algorithm",
           "LossInputs", "StateVar", "algorithm", "any_algorithm", "cost_advantage", "d_step", "initial_state",
           "is_offpolicy", "program_flags"]
