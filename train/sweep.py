"""Sweeps: the grid of runs, presets and selection, the picklable `run_one`, `saferl status` (no jax here).

A sweep is algos x tasks x bounds x seeds (`PRESETS` names three; the crax-suite preset's bounds depend on
the task). `saferl train` creates the whole grid in the store (or accepts an existing store holding it),
then trains the selected runs that are not complete yet through an executor (`train.executors`).
`SweepRun(unit)` trains or resumes one run (a RunKey) or a vmapped group (a tuple of them) in whatever
process it lands in, caching one compiled `Runner` per (store, task, config) there. A run that was started
before resumes in the group it was started in (`make_units`).

Test-only: with `SAFERL_ENABLE_TOY=1` the task `toy` (the pure-JAX task of `train/toy.py`) is accepted,
so tests can run real sweeps without compiling MJX.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.schema import RunKey
from train.algorithms import ALGOS, PAPER_ALGOS
from train.config import (
    SMOKE,
    TASKS,
    TrainConfig,
    config_to_dict,
    upgrade_stored_config,
    with_overrides,
)
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


def make_env(task: str, episode_length: int) -> Any:
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
        "bounds": (2.0,),
        "seeds": (0, 1),
    },
}
"""Named run grids: config plus the algos x tasks x bounds x seeds to train. `paper`: the paper's grid
(its four algorithms on the four Point tasks at level 1, d in 15/25/50, 30 seeds, the paper's config).
`crax-suite`: every on-policy algorithm on every crax-bench task at level 1 with the paper's config (T =
2000 on every task, as the paper), its bounds per task (`task_bounds`: `crax_suite_bounds`), 10 seeds.
`smoke`: tiny sizes on circle. `--algos`/`--tasks`/`--bounds`/`--seeds` given beside a preset replace its
lists (with --bounds, every task gets those bounds)."""


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


# ------------------------------------------------------------------------------------------ run_one
_RUNNERS: dict[tuple[str, str, str], Any] = {}
"""The compiled Runners of this process, per (store, task, config)."""


def setup_jax() -> None:
    """Persistent compile cache (SAFERL_JAX_CACHE, "" disables it), as `saferl train` sets it."""
    import jax

    cache = os.environ.get("SAFERL_JAX_CACHE", str(Path.home() / ".cache" / "saferl" / "jax"))
    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


@dataclass(frozen=True)
class SweepRun:
    """Picklable `run_one(unit)` for executors: trains or resumes one run of the store `out` (a RunKey unit;
    returns a JSON-able summary of this attempt) or a vmapped group (a tuple of RunKeys; returns
    {str(key): summary} for each run it writes).

    `config` is the plain dict of the TrainConfig (`config_to_dict`). Complete runs are skipped; partial
    ones resume from their newest resume point. `write`: the runs to write (None: every run of a unit);
    the other members of a group unit ride along unwritten (see `make_units`).
    With `claims`, a run claimed by another live `saferl train` process is left to it (local sweeps);
    dask and SLURM executors hand each run to one worker themselves and retry lost ones elsewhere,
    where a dead claimant on another host could not be told from a live one, so they run without.
    `progress`: the live display of this process (the local executor's); a pickled copy goes without it.
    """

    out: str
    config: dict[str, Any]
    claims: bool = True
    progress: Any = field(default=None, compare=False, repr=False)
    write: frozenset[RunKey] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "progress": None}

    def _claim_all(self, keys: Sequence[RunKey]) -> RunKey | None:
        """Claim every run of `keys` (in order), or none: returns the run claimed by another process (after
        releasing those taken here), or None when all are ours. A group is trained whole or not at all."""
        from train.claims import release, try_claim

        if not self.claims:
            return None
        taken: list[RunKey] = []
        for k in keys:
            if not try_claim(self.out, k):
                for t in taken:
                    release(self.out, t)
                return k
            taken.append(k)
        return None

    def runner(self, task: str) -> Any:
        """The cached compiled Runner of `task` in this process."""
        ck = (self.out, task, json.dumps(self.config, sort_keys=True))
        if ck not in _RUNNERS:
            from train.runner import Runner

            setup_jax()
            config = with_overrides(TrainConfig(), json.loads(json.dumps(self.config)))  # tuples -> lists
            _RUNNERS[ck] = Runner(self.out, config, task, make_env)
        return _RUNNERS[ck]

    def __call__(self, unit: RunKey | tuple[RunKey, ...]) -> dict[str, Any]:
        if isinstance(unit, RunKey):
            return self.train((unit,))[str(unit)]
        return self.train(unit, grouped=True)

    def train(self, keys: tuple[RunKey, ...], grouped: bool = False) -> dict[str, Any]:
        """Train `keys` (one task) as one group if this process can claim every run it writes;
        {str(key): summary} for those runs. `grouped` adds the group's size to each summary."""
        from train.claims import release
        from train.placement import current_placement

        mine = [k for k in keys if self.write is None or k in self.write]
        blocker = self._claim_all(mine)
        if blocker is not None:
            return {str(k): claimed_elsewhere(self.out, blocker) for k in mine}
        try:
            where = current_placement()
            results = self.runner(keys[0].task).run_group(keys, self.progress, write=mine)
        finally:
            if self.claims:
                for k in mine:
                    release(self.out, k)
        group = {"group_size": len(keys)} if grouped else {}
        return {str(res.key): {"status": res.status, "iterates_done": res.iterates_done,
                               "env_steps": res.env_steps, "compile_s": res.compile_s,
                               "train_s": res.train_s, "resumed_from": res.resumed_from,
                               **group, **where} for res in results}


def claimed_elsewhere(out: str, key: RunKey) -> dict[str, Any]:
    """The summary of a run left to the process that holds the claim of `key` (the run, or the member of
    its group another process claimed)."""
    from train.claims import read_claim

    holder = read_claim(out, key) or {}
    return {"status": "claimed", "claimed_by": f"{holder.get('host', '?')}:{holder.get('pid', '?')}"}


# ------------------------------------------------------------------------------ vmapped run groups
def run_bytes(config: TrainConfig, task: str) -> int:
    """Estimated device memory of one run in a vmapped group, bytes (traced shapes, nothing compiles; a
    PPO-Saute run's one extra observation column is left out).

    Training state (params, optimiser, env states; from `jax.eval_shape`) twice (loop carry in and out),
    plus one update's transitions `[unrolls, unroll_length, num_envs]` three times (rollout, the
    shuffled copy, minibatch activations/gradients), plus the evaluation's 2 x eval_episodes env states.
    """
    import jax
    import jax.numpy as jnp

    from train.core import make_train

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
        raise CubeError(f"--parallel-runs {requested} needs about {_size(requested * per_run)} "
                        f"({_size(per_run)} per run) but {_size(limit)} of {where} are usable; "
                        f"use --parallel-runs {fit} or less")
    return requested


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1024:.1f} KiB"


def make_units(keys: Sequence[RunKey], out: str | Path, size: int, regroup: bool = False,
               report: Callable[[str], None] = print) -> list[Any]:
    """Units of work for `keys`: RunKeys (one run) and tuples of RunKeys (one vmapped group, in program order).

    A run started before (a partial run: an interrupted or failed attempt) goes back into the group it was
    started in, as its manifest records it (`group`; none recorded: it ran alone), whatever `size` is now:
    a vmapped program's floats depend on its members and their number, and training is chaotic, so only
    the same group reproduces the numbers an uninterrupted sweep would have given. Members of that group
    outside `keys` (complete or not selected) ride along unwritten. With `regroup`, or when the members'
    records disagree (one was trained in another group since; a line is reported), started runs are
    grouped like new ones. New runs: keys of one task and algorithm with the same resume iterate, in
    chunks of `size` (size 1 gives plain RunKeys).
    """
    from cube import read_manifests
    from train import checkpoint

    rows = {RunKey.from_dict(r): r for r in read_manifests(out)}
    units: list[Any] = []
    fresh: list[RunKey] = []
    placed: set[RunKey] = set()
    for k in keys:
        if k in placed:
            continue
        group = None if regroup else started_group(rows.get(k))
        if group is not None and not all(m in rows and started_group(rows[m]) in (group, ()) for m in group):
            report(f"{k}: cannot rebuild the group it was started in (a member was trained in another group "
                   "since); it is trained in a new group, so its numbers may differ from an uninterrupted "
                   "run's by float noise")
            group = None
        if group is None:
            fresh.append(k)
            continue
        units.append(group if len(group) > 1 else group[0])
        placed.update(group)
    if size <= 1:
        return units + fresh
    by_start: dict[tuple[str, str, int], list[RunKey]] = {}
    for k in fresh:
        its = checkpoint.resume_iterates(out, k)
        by_start.setdefault((k.task, k.algo, its[-1] if its else -1), []).append(k)
    for members in by_start.values():
        units.extend(tuple(members[i:i + size]) for i in range(0, len(members), size))
    return units


def started_group(row: dict[str, Any] | None) -> tuple[RunKey, ...] | None:
    """The group a run was started in, in program order, from its manifest row: its recorded `group`, or
    the run alone for a partial run without one; `()` for a complete run without one (it may ride along
    in any group); None for a run never started (or no row)."""
    if row is None or row.get("status") not in ("partial", "complete"):
        return None
    members = row.get("group")
    if not members:
        return (RunKey.from_dict(row),) if row["status"] == "partial" else ()
    return tuple(RunKey.from_dict(m) if isinstance(m, dict) else parse_run_label(m) for m in members)


def parse_run_label(text: str) -> RunKey:
    """The RunKey of `str(key)` ("algo/task/d=25/seed=3"), as manifests written before 2026-11-26 record
    group members."""
    algo, task, bound, seed = str(text).rsplit("/", 3)
    return RunKey(algo, task, float(bound.removeprefix("d=")), int(seed.removeprefix("seed=")))


def split_outcome(outcome: Any, written: Collection[RunKey] | None = None) -> list[Any]:
    """Per-run RunOutcomes from the outcome of a unit (a RunKey, or a tuple of them run as a group), for
    the runs in `written` (None: all; members that rode along have no outcome of their own)."""
    import dataclasses

    if isinstance(outcome.key, RunKey):
        return [outcome]
    results = outcome.result or {}
    return [dataclasses.replace(outcome, key=k, result=results.get(str(k))) for k in outcome.key
            if written is None or k in written]
