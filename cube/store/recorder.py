"""Record any trainer's episodes into a results cube, a few lines in a PyTorch, numpy or JAX loop.

    import cube
    with cube.Recorder("results.zarr", algo="my_lag", task="SafetyPointGoal1", bound=25.0, seed=3) as rec:
        for iterate in range(n_iterates):
            ...                                          # train; collect finished episodes
            rec.train_episodes(iterate, rewards, costs)  # any number of calls per iterate
            rec.iterate_vars(iterate, multiplier=lam, env_steps=steps)
            rec.eval_episodes(iterate, "greedy", greedy_rewards, greedy_costs)

The store is created on first use and grown as needed (a new run label, more iterates or more episodes
than it holds) without rewriting existing chunks. Episodes are buffered and written once per iterate
and mode (when a later iterate arrives, on `flush()`, and on exit). The run is marked `partial` while
the recorder is open and `complete` when the `with` block ends without an exception. Several processes
may record different runs into one store at the same time: growing the grid is serialised by a lock,
and each run's episodes live in chunks of its own.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.schema import DEFAULT_ITERATE_VARS, MODES, RunKey
from cube.store.layout import check_iterate_var_name, create_store, extend_store, grow_store
from cube.store.writer import CubeWriter

CHUNK_ITERATES = 16  # iterates per chunk of a store the recorder creates (it grows by whole chunks)
MIN_EPISODE_SLOTS = 64  # episode slots per chunk of a store the recorder creates


class Recorder:
    """Writes one run's episodes (and per-iterate variables) into a cube at `path`.

    algo, task: any names. bound: the safety bound d > 0 that the run was trained for. seed: an
    integer. manifest: JSON-able facts about the run (config, code version) stored with it.
    """

    def __init__(self, path: str | os.PathLike[str], *, algo: str, task: str, bound: float, seed: int,
                 manifest: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.key = RunKey(str(algo), str(task), float(bound), int(seed))
        self.manifest = {"recorder": "cube.Recorder", "host": platform.node(), "pid": os.getpid(),
                         "python": sys.version.split()[0], **(manifest or {})}
        self._episodes: dict[tuple[str, int], tuple[list[float], list[float]]] = {}
        self._vars: dict[int, dict[str, float]] = defaultdict(dict)
        self._written: set[tuple[str, int]] = set()  # (mode, iterate) already in the store
        self._writer: CubeWriter | None = None
        self._started = 0.0

    # ----------------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> Recorder:
        self.open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(complete=exc_type is None)

    def open(self) -> None:
        """Create or grow the store for this run and mark the run partial."""
        self._started = time.time()
        self._ensure_run()
        self._set_status("partial")

    def close(self, complete: bool = True) -> None:
        """Write what is buffered; mark the run complete (or leave it partial after a failure)."""
        if self._writer is None:
            return
        try:
            self.flush()
        finally:
            self._set_status("complete" if complete else "partial")
            self._writer = None

    # ------------------------------------------------------------------------------------ recording
    def train_episodes(self, iterate: int, rewards: Any, costs: Any) -> None:
        """Finished training episodes (exploration on) of policy iterate `iterate`: 1-D rewards and
        costs, one entry per episode (rewards may be None when only costs are known)."""
        self._add("train", iterate, rewards, costs)

    def eval_episodes(self, iterate: int, mode: str, rewards: Any, costs: Any) -> None:
        """Evaluation episodes of policy iterate `iterate` with mode "expl" (exploration noise on) or
        "greedy" (deterministic policy)."""
        if mode not in ("expl", "greedy"):
            raise CubeError(f"unknown evaluation mode {mode!r}: use 'expl' or 'greedy'")
        self._add(mode, iterate, rewards, costs)

    def iterate_vars(self, iterate: int, **values: float) -> None:
        """Per-iterate scalars such as multiplier=lambda, env_steps=n, or any diagnostic name."""
        self._check_open()
        _check_iterate(iterate)
        for name, value in values.items():
            check_iterate_var_name(name)
            self._vars[iterate][name] = float(np.asarray(value))
        self._flush_before(iterate)

    def flush(self) -> None:
        """Write every buffered iterate now."""
        self._flush_before(None)

    # ------------------------------------------------------------------------------------ internals
    def _add(self, mode: str, iterate: int, rewards: Any, costs: Any) -> None:
        self._check_open()
        _check_iterate(iterate)
        cost = np.atleast_1d(np.asarray(costs, dtype=np.float64))
        reward = (np.full(cost.shape, np.nan) if rewards is None
                  else np.atleast_1d(np.asarray(rewards, dtype=np.float64)))
        if cost.ndim != 1 or reward.shape != cost.shape:
            raise CubeError(f"run {self.key}, iterate {iterate}: give 1-D rewards and costs of equal length, "
                            f"got shapes {reward.shape} and {cost.shape}")
        if (mode, iterate) in self._written:
            raise CubeError(f"run {self.key}: {mode} episodes of iterate {iterate} were already written "
                            "(a later iterate had begun); record each iterate's episodes before moving on")
        buf = self._episodes.setdefault((mode, iterate), ([], []))
        buf[0].extend(reward.tolist())
        buf[1].extend(cost.tolist())
        self._flush_before(iterate)

    def _flush_before(self, iterate: int | None) -> None:
        """Write the buffered iterates below `iterate` (all when None): a later iterate means the
        earlier ones are finished."""
        done_eps = sorted(k for k in self._episodes if iterate is None or k[1] < iterate)
        done_vars = sorted(j for j in self._vars if iterate is None or j < iterate)
        if not done_eps and not done_vars:
            return
        need_iterates = 1 + max([j for _, j in done_eps] + done_vars)
        need_episodes = max((len(self._episodes[k][1]) for k in done_eps), default=0)
        names = sorted({n for j in done_vars for n in self._vars[j]})
        self._make_room(need_iterates, need_episodes, names)
        writer = self._writer
        assert writer is not None
        for key in done_eps:
            mode, j = key
            reward, cost = (np.asarray(x) for x in self._episodes.pop(key))
            if np.isnan(reward).all():
                reward = None
            writer.write_episodes(self.key, mode, j, reward if reward is not None else np.full(cost.shape, np.nan),
                                  cost)
            self._written.add(key)
        for j in done_vars:
            writer.write_iterate_vars(self.key, j, self._vars.pop(j))

    def _make_room(self, n_iterates: int, n_episodes: int, names: list[str]) -> None:
        writer = self._writer
        assert writer is not None
        have_it, have_ep = len(writer.coords["iterate"]), len(writer.coords["episode"])
        missing = [n for n in names if n not in writer.group]
        if n_iterates > have_it or n_episodes > have_ep or missing:
            grow_store(self.path, n_iterates=n_iterates, n_episodes=n_episodes, iterate_vars=missing)
            writer.refresh()

    def _ensure_run(self) -> None:
        key = self.key
        if not self.path.exists():
            try:
                create_store(self.path, algos=[key.algo], tasks=[key.task], bounds=[key.bound], seeds=[key.seed],
                             n_iterates=1, n_episodes=1, modes=MODES, iterate_vars=DEFAULT_ITERATE_VARS,
                             chunk_iterates=CHUNK_ITERATES, chunk_episodes=MIN_EPISODE_SLOTS)
            except (CubeError, OSError):
                if not (self.path / "zarr.json").exists():  # not a race lost to another recorder
                    raise
        extend_store(self.path, algos=[key.algo], tasks=[key.task], bounds=[key.bound], seeds=[key.seed])
        self._writer = CubeWriter(self.path)

    def _set_status(self, status: str) -> None:
        assert self._writer is not None
        body = dict(self.manifest)
        body["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._started))
        if status == "complete":
            body["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._writer.set_run_manifest(self.key, status=status, manifest=body)

    def _check_open(self) -> None:
        if self._writer is None:
            raise CubeError("the recorder is not open: use it in a `with cube.Recorder(...) as rec:` block")


def _check_iterate(iterate: int) -> None:
    if int(iterate) != iterate or iterate < 0:
        raise CubeError(f"iterate {iterate!r} is not a non-negative integer")
