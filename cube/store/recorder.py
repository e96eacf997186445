"""Record any trainer's episodes into a results cube, a few lines in a PyTorch, numpy or JAX loop.

    import cube
    with cube.Recorder("results.zarr", algo="my_lag", task="SafetyPointGoal1", bound=25.0, seed=3) as rec:
        for iterate in range(n_iterates):
            ...                                          # train; collect finished episodes
            rec.train_episodes(iterate, rewards, costs)  # any number of calls per iterate
            rec.iterate_vars(iterate, multiplier=lam, env_steps=steps)
            rec.eval_episodes(iterate, "greedy", greedy_rewards, greedy_costs)

With a vectorised env, `rec.step(rewards, costs, dones, iterate=j)` after every env step sums each env's
episode and records it when it finishes (`cube.io.gym.RecordEpisodes` wraps a Gymnasium-style env so).

The store is created on first use and grown as needed (a new run label, more iterates or more episodes
than it holds) without rewriting existing chunks. Episodes are buffered and written when a later iterate
arrives, on `flush()` and on exit, each flush one writer state for readers (`CubeWriter.bracket`). The run
is marked `partial` while the recorder is open and `complete` when the `with` block ends without an
exception. Several processes may record different runs into one store at the same time: growing the grid
is serialised by a lock, and each run's episodes live in chunks of its own.

A run that already holds data is refused unless `existing` says what to do: "resume" goes on after the
last iterate a recorder finished (`rec.next_iterate`; what a killed recorder left beyond it is dropped),
"replace" records the run anew (the old data stays readable until the new run's first iterate lands,
and is never mixed with it: that first flush marks the run partial with no iterate done in a bracket of its
own, then empties the old run and writes the new iterates in one bracket, so a kill anywhere leaves the old
run or the new one's completed prefix, never a run marked complete without its episodes). Failures of the
file system (a full disk, a read-only store) are one `CubeError` line.

A recorder owns its run for its whole life: it claims the run when it opens (`cube.store.claims`, the
claims `saferl train` and `saferl import --into` take too) and releases it when it closes; a second writer
of the run gets `ClaimRefused`, one line naming the holder (host, pid, since when), whatever `existing`
says. A claim whose process is provably dead (same host, pid gone) is taken over.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.schema import DEFAULT_ITERATE_VARS, MODES, RunKey, seed_label, utc_stamp
from cube.store.claims import RunClaims, take_claims
from cube.store.fs import store_write_error
from cube.store.layout import MAX_ITERATES, check_iterate_var_name, create_store, extend_store, grow_store
from cube.store.location import local_path, refuse_url
from cube.store.locks import EVERYTHING, Intent
from cube.store.mounts import check_store_locks
from cube.store.writer import EXISTING, CubeWriter

CHUNK_ITERATES = 16  # iterates per chunk of a store the recorder creates (it grows by whole chunks)
MIN_EPISODE_SLOTS = 64  # episode slots per chunk of a store the recorder creates


class Recorder:
    """Writes one run's episodes (and per-iterate variables) into a cube at `path`.

    algo, task: any names. bound: the safety bound d > 0 that the run was trained for. seed: an
    integer. manifest: JSON-able facts about the run (config, code version) stored with it.
    existing: what to do when the run already holds data: "refuse" (default), "resume" or "replace"
    (module docstring).
    """

    def __init__(self, path: str | os.PathLike[str], *, algo: str, task: str, bound: float, seed: int,
                 manifest: dict[str, Any] | None = None, existing: str = "refuse") -> None:
        if existing not in EXISTING:
            raise CubeError(f"existing={existing!r} is not a choice: use one of {', '.join(EXISTING)}")
        refuse_url(path, "record into")
        self.path = Path(local_path(path))
        self.key = RunKey(str(algo), str(task), float(bound), seed_label(seed))
        self.existing = existing
        self.next_iterate = 0
        """The first iterate this recorder may write: after the recorded ones when resuming, else 0."""
        self._replacing = False  # "replace" of a run with data: the old run goes with the first flush
        self.manifest = {"writer": "cube.Recorder", "host": platform.node(), "pid": os.getpid(),
                         "python": sys.version.split()[0], **(manifest or {})}
        self._episodes: dict[tuple[str, int], tuple[list[float], list[float]]] = {}
        self._vars: dict[int, dict[str, float]] = defaultdict(dict)
        self._written: set[tuple[str, int]] = set()  # (mode, iterate) already in the store
        self._running: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # mode -> per-env sums of unfinished episodes
        self._progress: dict[str, float] = {}  # iterates_done, env_steps: what the manifest says is written
        self._writer: CubeWriter | None = None
        self._claims: RunClaims | None = None
        self._started = 0.0

    # ----------------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> Recorder:
        self.open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(complete=exc_type is None)

    def open(self) -> None:
        """Create or grow the store for this run, claim the run (one writer for the recording's whole life:
        `ClaimRefused`, one line naming the holder, while another live writer holds it), settle what a killed
        writer left, apply `existing`, and mark the run partial (when replacing, the old run stays as it is
        until the first flush)."""
        self._started = time.time()
        check_store_locks(self.path)  # before anything is created: locks that do not work are refused
        with self._one_line("open the run"):
            self._ensure_run()
            self._claims = take_claims(self.path, [self.key], "cube.Recorder")
            try:
                self._apply_existing()
            except BaseException:
                self._writer = None
                self._release()
                raise

    def _apply_existing(self) -> None:
        writer = self._writer
        assert writer is not None
        writer.repair_run(self.key)  # a killed writer's half-written bracket: blank before it is counted
        start = writer.existing_run(self.key, self.existing, "record")
        has_data = writer.recorded_iterates(self.key) > 0
        if self.existing == "resume" and has_data:
            self.next_iterate = start
            self._progress["iterates_done"] = start
            with writer.bracket(self.key):
                writer.clear_run(self.key, start)  # what a killed recorder left after its last flush
                self._set_status("partial")
            return
        self._replacing = self.existing == "replace" and has_data
        if not self._replacing:
            self._set_status("partial")

    def close(self, complete: bool = True) -> None:
        """Write what is buffered; mark the run complete (or leave it partial after a failure); release the
        run's claim. A replacing recorder that recorded nothing leaves the old run as it was."""
        if self._writer is None:
            return
        try:
            self.flush()
        finally:
            try:
                if not self._replacing:
                    with self._one_line("mark the run"):
                        self._set_status("complete" if complete else "partial")
            finally:
                self._writer = None
                self._release()

    def _release(self) -> None:
        if self._claims is not None:
            self._claims.release()
            self._claims = None

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

    def iterate_vars(self, iterate: int, **values: Any) -> None:
        """Per-iterate scalars such as multiplier=lambda, env_steps=n, or any diagnostic name: floats, or
        any one-element array-like (numpy, a torch tensor on any device, jax), taken with `float()`."""
        self._check_open()
        _check_iterate(iterate)
        self._check_resumed(iterate)
        for name, value in values.items():
            check_iterate_var_name(name)
            self._vars[iterate][name] = _scalar(name, value)
        self._flush_before(iterate)

    def step(self, rewards: Any, costs: Any, dones: Any, *, iterate: int, mode: str = "train") -> None:
        """One step of a vectorised env: per-env rewards, costs and done flags (shape (n_envs,), or scalars
        for one env; terminated | truncated). Sums each env's episode as it runs and records it as an
        episode of `iterate` when it finishes (the step's reward and cost are the episode's last); an
        episode still running at the end of an iterate is carried into the next and counts there, where it
        finishes. Episodes unfinished when the recorder closes are dropped (they are no episodes)."""
        self._check_open()
        _check_iterate(iterate)
        if mode not in MODES:
            raise CubeError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
        reward, cost = (_host_array(x, what, self.key) for x, what in ((rewards, "rewards"), (costs, "costs")))
        done = np.atleast_1d(np.asarray(_host_array(dones, "dones", self.key), dtype=bool))
        if not reward.shape == cost.shape == done.shape or reward.ndim != 1:
            raise CubeError(f"run {self.key}: step() takes 1-D rewards, costs and dones of one length (one per env), "
                            f"got shapes {reward.shape}, {cost.shape} and {done.shape}")
        sums = self._running.get(mode)
        if sums is not None and sums[0].shape != reward.shape:
            raise CubeError(f"run {self.key}: step() got {reward.size} envs after {sums[0].size}; "
                            "keep the number of envs of a run fixed")
        if sums is None:
            sums = self._running[mode] = (np.zeros(reward.shape), np.zeros(reward.shape))
        sums[0][:] += reward
        sums[1][:] += cost
        if done.any():
            self._add(mode, iterate, sums[0][done], sums[1][done])
            sums[0][done] = 0.0
            sums[1][done] = 0.0

    def drop_running(self, mode: str = "train") -> None:
        """Forget the episodes `step` is summing for `mode` (the envs were reset: they never finish)."""
        self._running.pop(mode, None)

    def flush(self) -> None:
        """Write every buffered iterate now."""
        self._flush_before(None)

    @contextmanager
    def _one_line(self, what: str) -> Iterator[None]:
        """OS errors of the store (a full disk, a read-only file system, no permission) as one CubeError."""
        try:
            yield
        except OSError as exc:
            raise store_write_error(exc, self.path, f"{what} {self.key}") from None

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
        self._check_resumed(iterate)
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
        with self._one_line("record"):
            self._make_room(need_iterates, need_episodes, names)
            writer = self._writer
            assert writer is not None
            first = min([j for _, j in done_eps] + done_vars)
            intent = EVERYTHING if self._replacing else Intent(
                ("reward", "cost", *names, "run_manifest", "run_status"), (first, need_iterates - 1))
            if self._replacing:  # first its own bracket: partial, 0 iterates done (never complete and empty)
                self._progress["iterates_done"] = 0
                self._set_status("partial")
            with writer.bracket(self.key, intent):  # readers see the whole flush or none of it
                if self._replacing:
                    writer.clear_run(self.key)  # the old run goes as the new one's first iterate lands
                self._write_flush(writer, done_eps, done_vars, need_iterates)
                self._replacing = False

    def _write_flush(self, writer: CubeWriter, done_eps: list[tuple[str, int]], done_vars: list[int],
                     need_iterates: int) -> None:
        for key in done_eps:
            mode, j = key
            reward, cost = (np.asarray(x) for x in self._episodes.pop(key))
            if np.isnan(reward).all():
                reward = None
            writer.write_episodes(self.key, mode, j, reward if reward is not None else np.full(cost.shape, np.nan),
                                  cost)
            self._written.add(key)
        for j in done_vars:
            values = self._vars.pop(j)
            writer.write_iterate_vars(self.key, j, values)
            if np.isfinite(values.get("env_steps", np.nan)):
                self._progress["env_steps"] = values["env_steps"]
        if need_iterates > self._progress.get("iterates_done", 0):
            self._progress["iterates_done"] = need_iterates
            self._set_status("partial")  # `saferl status` shows the progress while the run records

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
        body = {**self.manifest, **self._progress}  # the keys of cube.schema.MANIFEST_KEYS it knows
        body["started"] = utc_stamp(self._started)
        if status == "complete":
            body["finished"] = utc_stamp()
        self._writer.set_run_manifest(self.key, status=status, manifest=body)

    def _check_resumed(self, iterate: int) -> None:
        if iterate < self.next_iterate:
            raise CubeError(f"run {self.key}: iterate {iterate} is recorded already (resuming after iterate "
                            f"{self.next_iterate - 1}): record from iterate {self.next_iterate} (rec.next_iterate) on")

    def _check_open(self) -> None:
        if self._writer is None:
            raise CubeError("the recorder is not open: use it in a `with cube.Recorder(...) as rec:` block")


def _scalar(name: str, value: Any) -> float:
    """A per-iterate value as a float: anything `float()` takes (a torch tensor on any device, a jax or
    numpy scalar or one-element array); CubeError naming the variable otherwise."""
    for convert in (float, lambda v: float(v.item())):  # numpy 2 refuses float() of a (1,) array; .item() not
        try:
            return convert(value)
        except (TypeError, ValueError, RuntimeError, AttributeError):  # RuntimeError: torch, several elements
            continue
    shape = getattr(value, "shape", None)
    raise CubeError(f"iterate variable {name}: {type(value).__name__}"
                    f"{f' of shape {tuple(shape)}' if shape is not None else ''} is not one number; "
                    "give a scalar (e.g. loss.item())")


def _host_array(values: Any, what: str, key: RunKey) -> np.ndarray:
    """Per-env values (numpy, lists, scalars, torch tensors on any device, jax arrays) as a 1-D float64
    numpy array (booleans of `dones` stay exact as 0/1)."""
    if hasattr(values, "detach"):  # torch: leave the graph and the device first
        values = values.detach()
    if hasattr(values, "cpu") and not isinstance(values, np.ndarray):
        values = values.cpu()
    try:
        return np.atleast_1d(np.asarray(values, dtype=np.float64))
    except (TypeError, ValueError):
        raise CubeError(f"run {key}: step() {what} are not numbers ({type(values).__name__})") from None


def _check_iterate(iterate: int) -> None:
    try:
        whole = int(iterate) == iterate
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole or iterate < 0:
        raise CubeError(f"iterate {iterate!r} is not a non-negative integer")
    if iterate >= MAX_ITERATES:
        raise CubeError(f"iterate {iterate:,} is beyond the limit of {MAX_ITERATES:,} iterates per store: check "
                        "the iterate counter (env steps are not iterates)")
