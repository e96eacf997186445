"""Sweeps: the grid of runs, its presets and selection, the env factory, the stored configs' check (no jax).

A sweep is algos x tasks x bounds x seeds (`PRESETS` names three; the crax-suite preset's bounds depend on
the task). `saferl train` creates the whole grid in the store (or accepts an existing store holding it),
then trains the selected runs that are not complete yet through an executor (`train.executors`): in units
of one run or one vmapped group (`train.grouping`, sized by `train.memory`), each trained by the picklable
`train.sweep_run.SweepRun` in whatever process it lands in.

Test-only: with `SAFERL_ENABLE_TOY=1` the task `toy` (the pure-JAX task of `train/toy.py`) is accepted,
so tests can run real sweeps without compiling MJX.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cube.errors import CubeError
from cube.schema import RunKey
from train.config import SMOKE, TASKS, TrainConfig
from train.envs import EnvFns
from train.overrides import config_to_dict, upgrade_stored_config
from train.registry import ALGOS, PAPER_ALGOS
from train.tasks import LEVEL1_TASKS, PAPER_TASKS, crax_bound

TOY_ENV_VAR = "SAFERL_ENABLE_TOY"
"""Set to 1 to accept `--task toy` (tests only)."""


def known_tasks() -> tuple[str, ...]:
    """Task labels `saferl train` accepts: every crax task and level (`train.tasks`), plus `toy` when
    SAFERL_ENABLE_TOY=1."""
    return (*TASKS, "toy") if os.environ.get(TOY_ENV_VAR) == "1" else tuple(TASKS)


def extra_tasks() -> tuple[str, ...]:
    """Task labels accepted beside the crax tasks (`toy` when SAFERL_ENABLE_TOY=1)."""
    return ("toy",) if os.environ.get(TOY_ENV_VAR) == "1" else ()


def make_env(task: str, episode_length: int) -> EnvFns:
    """Env factory of sweeps: the toy task for `toy`, otherwise the CRAX task (module level: picklable)."""
    if task == "toy":
        from train.toy import make_toy_env

        return make_toy_env()
    from train.envs import make_crax_env

    return make_crax_env(task, episode_length)


PAPER_BOUNDS = (15.0, 25.0, 50.0)
"""The paper's safety bounds d (episodic cost at T = 2000)."""


def crax_suite_bounds(task: str) -> tuple[float, ...]:
    """The crax-suite preset's bounds of `task`: the paper's, times the task's `bound_scale` (x1 where a
    violating step costs about 0.1 as on the Point tasks, x10 where it costs about 1; `train.tasks`)."""
    return tuple(crax_bound(task, b) for b in PAPER_BOUNDS)


SMOKE_BOUND = 0.25
"""The smoke preset's d on circle (dense reward; 0.1 per step outside the boundary): 2.5 violating steps of a
64-step episode. Measured (bench/smoke_binds.py, PPO-Lag seed 0, 3 iterates): the training cost per episode
falls 1.19 -> 0.57 -> 0.38, so the bound binds at every iterate and lambda rises 0.088 -> 0.118 -> 0.130;
at d = 1 lambda is back at 0 after the first iterate, at d = 2 (the old smoke bound) it never moves."""

PRESETS: dict[str, dict[str, Any]] = {
    "paper": {
        "config": TrainConfig(),
        "algos": PAPER_ALGOS,
        "tasks": PAPER_TASKS,
        "bounds": PAPER_BOUNDS,
        "seeds": tuple(range(30)),
    },
    "crax-suite": {
        "config": TrainConfig(),
        "algos": ALGOS,
        "tasks": LEVEL1_TASKS,
        "bounds": None,
        "task_bounds": crax_suite_bounds,
        "seeds": tuple(range(10)),
    },
    "smoke": {
        "config": SMOKE,
        "algos": PAPER_ALGOS,
        "tasks": ("circle",),
        "bounds": (SMOKE_BOUND,),
        "seeds": (0, 1),
    },
}
"""Named run grids: config plus the algos x tasks x bounds x seeds to train. `paper`: the paper's grid
(its four algorithms on the four Point tasks at level 1, d in 15/25/50, 30 seeds, the paper's config).
`crax-suite`: every on-policy algorithm on every crax-bench task at level 1 with the paper's config (T =
2000 on every task, as the paper), its bounds per task (`task_bounds`: `crax_suite_bounds`), 10 seeds.
`smoke`: tiny sizes on circle (a dense reward) at d = `SMOKE_BOUND`, which binds (PPO-Lag's lambda moves).
`--algos`/`--tasks`/`--bounds`/`--seeds` given beside a preset replace its lists (with --bounds, every task
gets those bounds)."""


# ------------------------------------------------------------------------------------------ parsing
def parse_part(text: str | None) -> tuple[int, int] | None:
    """`--part K/N` (1 <= K <= N): the K-th of N contiguous slices of the grid's runs."""
    if text is None:
        return None
    k, sep, n = text.partition("/")
    try:
        kk, nn = int(k), int(n)
    except ValueError:
        raise CubeError(f"--part must look like K/N (e.g. 3/16), got '{text}'") from None
    if not sep or not 1 <= kk <= nn:
        raise CubeError(f"--part K/N needs 1 <= K <= N, got '{text}'")
    return kk, nn


# --------------------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class Plan:
    """A sweep: the config, the grid, and the part of it to train."""

    config: TrainConfig
    algos: tuple[str, ...]
    tasks: tuple[str, ...]
    bounds: tuple[float, ...]
    seeds: tuple[int, ...]
    part: tuple[int, int] | None = None
    task_bounds: tuple[tuple[str, tuple[float, ...]], ...] = ()
    """Per-task bounds replacing `bounds` for those tasks (the crax-suite preset); the store's bound
    coordinate is then the union, and the (task, bound) pairs outside the grid stay pending and empty."""

    def bounds_of(self, task: str) -> tuple[float, ...]:
        """The bounds trained on `task`."""
        return dict(self.task_bounds).get(task, self.bounds)

    def all_bounds(self) -> tuple[float, ...]:
        """Every bound of the grid (the store's bound coordinate), ascending."""
        return tuple(sorted({float(b) for t in self.tasks for b in self.bounds_of(t)}))

    def grid_keys(self) -> list[RunKey]:
        """Every run of the grid, task-major then algo, bound, seed (runs sharing a compile are adjacent)."""
        return [RunKey(a, t, float(b), int(s)) for t in self.tasks for a in self.algos for b in self.bounds_of(t)
                for s in self.seeds]

    def keys(self) -> list[RunKey]:
        """The selected runs: all, or the K-th of N contiguous slices (sizes differ by at most one; CubeError
        if the slice is empty)."""
        keys = self.grid_keys()
        if self.part is not None:
            k, n = self.part
            keys = keys[(k - 1) * len(keys) // n: k * len(keys) // n]
        if not keys:
            raise CubeError(f"--part {self.part[0]}/{self.part[1]} selects no run of this {len(self.grid_keys())}-run "
                            "grid; use fewer parts" if self.part else "the selection is empty")
        return keys


def check_store_config(out: str | Path, config: TrainConfig) -> dict[str, str]:
    """Stored status of every run; CubeError if a started run was trained with another config."""
    from cube import read_manifests

    want = json.loads(json.dumps(config_to_dict(config)))
    status: dict[str, str] = {}
    for row in read_manifests(out):
        key = RunKey.from_dict(row)
        status[str(key)] = row["status"]
        have = row.get("config")
        have = None if have is None else upgrade_stored_config(have)
        if row["status"] in ("partial", "complete") and have is not None and have != want:
            diff = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
            raise CubeError(f"{out} holds run {key} trained with another config (differs in {', '.join(diff)}); "
                            "use the same config (and --iterates) or another --out")
    return status
