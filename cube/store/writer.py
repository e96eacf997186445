"""Writing runs into an existing store: episodes, per-iterate variables, status and manifests."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from cube.errors import CubeError
from cube.schema import (
    DIMS,
    EPISODE_RULE_HINT,
    LEGACY_MEANS_ONLY,
    MEANS_ONLY,
    RUN_DIMS,
    RUN_STATUS,
    RUN_STATUS_NAMES,
    RunKey,
    first_broken_episode,
    manifest_json,
)
from cube.store.fs import PathLike, refuse_links, side_folder, store_write_error
from cube.store.layout import mode_index, open_group, read_coords, run_index
from cube.store.location import local_path, refuse_url
from cube.store.locks import EVERYTHING, WRITE_SEQ, Intent, publishing, read_seq, read_write_seqs
from cube.store.mounts import check_store_locks

EXISTING = ("refuse", "resume", "replace")
"""What a writer does with a run that already holds data: refuse (the default), resume after its last
recorded iterate, or replace it as a whole."""

# --------------------------------------------------------------------------------------------------
# writing runs


def _check_episode_values(reward: np.ndarray, cost: np.ndarray, where: str) -> None:
    """Refuse episodes that break the cube's rule (`cube.schema.EPISODE_RULES`) before anything is written;
    every written slot is an episode, so its cost is given."""
    if reward.shape != cost.shape:
        raise CubeError(f"{where}: reward shape {reward.shape} != cost shape {cost.shape}")
    if np.isnan(cost).any():
        raise CubeError(f"{where}: NaN cost in a written episode; pass only completed episodes "
                        "(a reward may be NaN where it is unknown)")
    broken = first_broken_episode(reward, cost)
    if broken is not None:
        rule, mask = broken
        first = (cost if "cost" in rule.name else reward)[mask].flat[0]
        raise CubeError(f"{where}: {rule.count_text(int(mask.sum()))} (first {first:g}); {EPISODE_RULE_HINT}")
    limit = float(np.finfo(np.float32).max)
    for name, values in (("reward", reward), ("cost", cost)):
        big = np.abs(np.asarray(values, dtype=np.float64)) > limit
        if big.any():
            raise CubeError(f"{where}: {name} {values[big].flat[0]:g} does not fit the store's float32 (at most "
                            f"{limit:.4g}); it would be stored as infinite: {EPISODE_RULE_HINT}")


def check_episode_block(reward: np.ndarray, cost: np.ndarray, where: str) -> None:
    """Refuse a run's (iterate, episode, mode) block that breaks the cube's rules before it is written: a
    reward without its cost, and every written episode's values (`cube.schema.EPISODE_RULES`)."""
    present = ~np.isnan(cost)  # an episode exists where its cost does; its reward may be unknown (NaN)
    if (~np.isnan(reward) & ~present).any():
        raise CubeError(f"{where}: a reward without a cost; an episode needs its cost (NaN marks no episode)")
    _check_episode_values(reward[present], cost[present], where)


def manifest_text(key: RunKey, status: str, manifest: dict[str, Any] | None) -> str:
    """The stored JSON of a run's manifest: its fields, the status and the run's labels."""
    body = dict(manifest or {})
    body["status"] = status
    body.setdefault("run", key.as_dict())
    return manifest_json(body)


class CubeWriter:
    """Writes runs into an existing store; holds the open group and its labels across writes.

    Use one writer per process for many writes (opening a store costs several metadata reads).
    Each method checks everything before writing anything.
    """

    def __init__(self, path: PathLike) -> None:
        refuse_url(path, "write into")
        self.path = Path(local_path(path))
        self._open_brackets: set[tuple[int, ...]] = set()
        self.refresh()
        check_store_locks(self.path)

    def refresh(self) -> None:
        """Re-read the grid (labels, sizes, arrays): after this or another process grew the store."""
        self.group = open_group(self.path)
        self.coords = read_coords(self.group)
        self._arrays: dict[str, zarr.Array] = {}
        self._lock_folder: Path | None = None

    def _array(self, name: str) -> zarr.Array:
        """The store's array ``name``, opened once per writer (each open reads its metadata); a link
        planted in its place is refused (writes would land outside the store)."""
        if name not in self._arrays:
            refuse_links(self.path, self.path / name / "c")
            self._arrays[name] = self.group[name]
        return self._arrays[name]

    # ------------------------------------------------------------------------------- write brackets
    @contextmanager
    def bracket(self, key: RunKey, intent: Intent = EVERYTHING) -> Iterator[None]:
        """Make the writes of the block one writer state of run `key` for readers (one seqlock bracket,
        `cube.store.locks.publishing`): they see all of them or none. `intent` names what the block writes
        (default: anything of the run), so a kill inside is undone. Brackets nest (the outer one counts).
        OS errors (a full disk, a read-only store) end as one CubeError line."""
        with self._bracket(run_index(self.coords, key), intent, key):
            yield

    @contextmanager
    def _bracket(self, index: tuple[int, ...], intent: Intent, key: Any) -> Iterator[None]:
        if index in self._open_brackets:
            yield
            return
        try:
            seq = self._seq()
            with publishing(self.path, seq, index, intent) as dead:
                self._open_brackets.add(index)
                try:
                    if dead is not None:
                        self._blank(index, dead)  # a dead writer's half-written slots: empty for good
                    yield
                finally:
                    self._open_brackets.discard(index)
        except OSError as exc:
            raise store_write_error(exc, self.path, f"write run {key}") from None

    def _seq(self) -> zarr.Array | None:
        """The run sequences (None for stores written before the seqlock); creates `_locks` once."""
        if WRITE_SEQ not in self.group:
            return None
        if self._lock_folder is None:
            self._lock_folder = side_folder(self.path / "_locks")
        return self._array(WRITE_SEQ)

    def _run_arrays(self) -> list[str]:
        """The float arrays holding one value or more per run and iterate (episodes, per-iterate variables)."""
        names = []
        for name in self.group.array_keys():
            arr = self.group[name]
            dims = tuple(arr.metadata.dimension_names or ())
            if dims[: len(RUN_DIMS)] == RUN_DIMS and "iterate" in dims and arr.dtype.kind == "f":
                names.append(name)
        return names

    def _blank(self, index: tuple[int, ...], intent: Intent) -> None:
        """Write NaN into the slots `intent` names of the run at `index` (inside its bracket)."""
        for name in self._run_arrays():
            if intent.names is not None and name not in intent.names:
                continue
            arr = self._array(name)
            its = slice(None) if intent.iterates is None else slice(intent.iterates[0], intent.iterates[1] + 1)
            if arr.ndim == len(DIMS):
                for m in (intent.modes if intent.modes is not None else range(arr.shape[-1])):
                    arr[(*index, its, slice(None), int(m))] = np.nan
            else:
                arr[(*index, its)] = np.nan

    def clear_run(self, key: RunKey, from_iterate: int = 0) -> None:
        """Empty run `key` from iterate `from_iterate` on: its episodes (every mode) and per-iterate
        variables become NaN, in one bracket (inside an open bracket of the run, part of that one)."""
        intent = Intent(tuple(self._run_arrays()), None if from_iterate == 0 else
                        (from_iterate, max(from_iterate, len(self.coords["iterate"]) - 1)), None)
        index = run_index(self.coords, key)
        with self._bracket(index, intent, key):
            self._blank(index, intent)

    # ----------------------------------------------------------------------------- what a run holds
    def recorded_iterates(self, key: RunKey) -> int:
        """How many iterates of run `key` hold data (the last one with an episode or a per-iterate value,
        + 1; 0 for an empty run), as of one writer state."""
        index = run_index(self.coords, key)
        last = -1
        for name in self._run_arrays():
            values = np.asarray(self._array(name)[index], dtype=np.float64)
            has = ~np.isnan(values).reshape(values.shape[0], -1).all(axis=1)
            if has.any():
                last = max(last, int(np.flatnonzero(has)[-1]))
        return last + 1

    def existing_run(self, key: RunKey, existing: str = "refuse", what: str = "record") -> int:
        """Apply the policy `existing` (see EXISTING) to run `key` before writing it; returns the first
        iterate to write: 0 for an empty run or for "replace" (the caller replaces the run as a whole,
        see `replace_run` / `clear_run` inside a `bracket`), the iterate after the last recorded one for
        "resume". CubeError, one line naming the choices, for "refuse" when the run holds data."""
        if existing not in EXISTING:
            raise CubeError(f"existing={existing!r} is not a choice: use one of {', '.join(EXISTING)}")
        done = self.recorded_iterates(key) if key_in_grid(self.coords, key) else 0
        if done == 0 or existing == "replace":
            return 0
        if existing == "resume":
            stored = self.run_manifest(key).get("iterates_done")
            return int(stored) if isinstance(stored, int | float) and 0 <= stored <= done else done
        raise CubeError(f"run {key} already holds data in {self.path} ({done} iterate(s), status "
                        f"{self.run_status(key)}); to {what} it, choose existing='resume' (go on after iterate "
                        f"{done - 1}) or existing='replace' (replace the whole run)")

    def repair_run(self, key: RunKey) -> bool:
        """Blank, for good, what a writer that died inside a bracket of run `key` left half-written (the slots
        its intent names; see `cube.store.locks`); True if there was such a bracket. Call it holding the
        run's claim, before counting what the run holds."""
        index = run_index(self.coords, key)
        seq = self._seq()
        if seq is None or read_seq(seq, index) % 2 == 0:
            return False
        with self._bracket(index, Intent((), (0, 0), ()), key):  # publishing repairs the dead bracket first
            pass
        return True

    def repair_runs(self, keys: Sequence[RunKey]) -> None:
        """`repair_run` of each run of `keys` in the grid whose write sequence is odd (read once for all)."""
        seqs = read_write_seqs(self.path) if self._seq() is not None else None
        if seqs is None:
            return
        for key in keys:
            if key_in_grid(self.coords, key) and seqs[run_index(self.coords, key)] % 2:
                self.repair_run(key)

    def mark_replacing(self, key: RunKey, manifest: dict[str, Any] | None = None) -> None:
        """Before a replacement empties run `key`: a run marked complete is marked partial with no iterate
        done, in a bracket of its own, so a kill inside the replacement never leaves a run marked complete
        without its episodes (and a resume after it starts again from iterate 0)."""
        if self.run_status(key) == "complete":
            self.set_run_manifest(key, status="partial", manifest={**(manifest or {}), "iterates_done": 0})

    def replace_run(self, key: RunKey, reward: np.ndarray, cost: np.ndarray,
                    iterate_vars: dict[str, np.ndarray] | None = None, *, status: str = "complete",
                    manifest: dict[str, Any] | None = None, means_only: dict[str, bool] | None = None) -> None:
        """Replace run `key` as a whole: readers see the old run or the new one, never a mix, and a kill at
        any point leaves the old run, an empty partial one or the new one marked partial: a run marked
        complete is first marked partial in a bracket of its own (`mark_replacing`); one bracket then
        empties it and writes the new data; the status and manifest come last, in a bracket of their own
        (a status written inside the data's bracket would stay behind when a kill blanks that bracket).
        reward, cost: (J, E, M) as in `write_run`; iterate_vars: {name: (J,) values}; every other
        per-iterate variable of the run becomes NaN; means_only: {mode: flag} set with the data."""
        self.mark_replacing(key, manifest)
        with self.bracket(key, EVERYTHING):
            self.clear_run(key)
            self.write_run(key, reward, cost)
            if iterate_vars:
                self.write_iterate_vars(key, 0, iterate_vars)
            for mode, flag in (means_only or {}).items():
                self.set_means_only(key, mode, flag)
        self.set_run_manifest(key, status=status, manifest=manifest)

    def write_episodes(
        self,
        key: RunKey,
        mode: str,
        iterate: int,
        reward: np.ndarray | Sequence[float],
        cost: np.ndarray | Sequence[float],
    ) -> None:
        """Write the completed episodes of one run at one iterate (1-D) or consecutive iterates (2-D).

        ``reward``/``cost``: shape (n,) for iterate ``iterate``, or (k, n) for iterates ``iterate`` ..
        ``iterate + k - 1``; n <= E episodes each, the remaining slots are set to NaN (so rewriting an
        iterate replaces it completely). Everything is checked before anything is written.
        """
        coords = self.coords
        index = run_index(coords, key)
        m = mode_index(coords, mode)
        reward = np.asarray(reward, dtype=np.float64)
        cost = np.asarray(cost, dtype=np.float64)
        if reward.ndim == 1:
            reward = reward[None, :]
        if cost.ndim == 1:
            cost = cost[None, :]
        where = f"run {key}, mode {mode}, iterate {iterate}"
        if reward.ndim != 2 or cost.ndim != 2:
            raise CubeError(f"{where}: episode arrays must be 1-D (episodes) or 2-D (iterates, episodes)")
        _check_episode_values(reward, cost, where)
        n_iter, n_eps = len(coords["iterate"]), len(coords["episode"])
        k, n = reward.shape
        if not 0 <= iterate or iterate + k > n_iter:
            raise CubeError(f"{where}: iterates {iterate}..{iterate + k - 1} outside the grid's 0..{n_iter - 1}")
        if n > n_eps:
            raise CubeError(f"{where}: {n} episodes do not fit the store's {n_eps} episode slots")
        with self._bracket(index, Intent(("reward", "cost"), (iterate, iterate + k - 1), (m,)), key):
            for name, values in (("reward", reward), ("cost", cost)):
                arr = self._array(name)  # its shape, not the labels read earlier: the store may have grown
                block = np.full((k, max(arr.shape[-2], n)), np.nan, dtype=np.float32)
                block[:, :n] = values
                arr[(*index, slice(iterate, iterate + k), slice(0, block.shape[1]), m)] = block

    def write_run(self, key: RunKey, reward: np.ndarray, cost: np.ndarray) -> None:
        """Write all episodes of one run at once: arrays (J, E, M) in the store's iterate/episode/mode order.

        NaN marks a missing episode; where one of reward/cost is NaN the other must be too. This is one
        chunk write per variable, the fast path for importing results or writing synthetic cubes.
        """
        coords = self.coords
        index = run_index(coords, key)
        shape = (len(coords["iterate"]), len(coords["episode"]), len(coords["mode"]))
        reward = np.asarray(reward, dtype=np.float32)
        cost = np.asarray(cost, dtype=np.float32)
        where = f"run {key}"
        if reward.shape != shape or cost.shape != shape:
            raise CubeError(f"{where}: arrays must have shape {shape} (iterate, episode, mode), got {reward.shape}")
        check_episode_block(reward, cost, where)
        with self._bracket(index, Intent(("reward", "cost")), key):
            self._array("reward")[index] = reward
            self._array("cost")[index] = cost


    def write_iterate_vars(self, key: RunKey, iterate: int, values: dict[str, Any]) -> None:
        """Write per-iterate variables (``env_steps``, ``multiplier``, diagnostics) of one run.

        Each value is a scalar for ``iterate`` or a 1-D array for ``iterate`` .. ``iterate + k - 1``.
        """
        group, coords = self.group, self.coords
        index = run_index(coords, key)
        n_iter = len(coords["iterate"])
        arrays = {}
        for name, value in values.items():
            if name in DIMS or name in ("reward", "cost", "run_status", "run_manifest") or name not in group:
                known = sorted(k for k in group.array_keys() if group[k].ndim == 5)
                raise CubeError(f"per-iterate variable {name!r} is not in the store (it has {', '.join(known)})")
            arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
            if arr.ndim != 1 or not 0 <= iterate or iterate + arr.size > n_iter:
                raise CubeError(f"{name} for run {key}: iterates {iterate}..{iterate + arr.size - 1} "
                                f"outside 0..{n_iter - 1}")
            arrays[name] = arr
        if not arrays:
            return
        size = max(arr.size for arr in arrays.values())
        with self._bracket(index, Intent(tuple(arrays), (iterate, iterate + size - 1)), key):
            for name, arr in arrays.items():
                self._array(name)[(*index, slice(iterate, iterate + arr.size))] = arr


    def set_run_manifest(
        self, key: RunKey, *, status: str, manifest: dict[str, Any] | None = None
    ) -> None:
        """Record a run's status (``pending``/``partial``/``complete``) and its manifest (JSON-able dict)."""
        if status not in RUN_STATUS:
            raise CubeError(f"unknown run status {status!r}; use one of {', '.join(RUN_STATUS)}")
        index = run_index(self.coords, key)
        with self._bracket(index, Intent(("run_manifest", "run_status")), key):
            self._array("run_manifest")[index] = manifest_text(key, status, manifest)
            self._array("run_status")[index] = RUN_STATUS[status]

    def set_means_only(self, key: RunKey, mode: str, means_only: bool = True) -> None:
        """Flag one run's `mode` as holding per-epoch means instead of episodes (store needs the flag
        array: create it with `create_store(..., means_only_flags=True)`)."""
        name = next((n for n in (MEANS_ONLY, LEGACY_MEANS_ONLY) if n in self.group), None)
        if name is None:
            raise CubeError(f"{self.path} has no '{MEANS_ONLY}' flags; create it with means_only_flags=True")
        index, m = run_index(self.coords, key), mode_index(self.coords, mode)
        with self._bracket(index, Intent((name,), None, (m,)), key):
            self._array(name)[(*index, m)] = int(means_only)

    def run_status(self, key: RunKey) -> str:
        """A run's stored status (``pending``/``partial``/``complete``), read from its own chunk only."""
        if "run_status" not in self.group:
            return "pending"
        return RUN_STATUS_NAMES.get(int(self._array("run_status")[run_index(self.coords, key)]), "pending")

    def run_manifest(self, key: RunKey) -> dict[str, Any]:
        """A run's stored manifest fields (without ``status`` and ``run``), read from its own chunk only."""
        if "run_manifest" not in self.group:
            return {}
        text = str(self._array("run_manifest")[run_index(self.coords, key)])
        try:
            body = json.loads(text) if text else {}
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        body.pop("status", None)
        body.pop("run", None)
        return body


def key_in_grid(coords: dict[str, np.ndarray], key: RunKey) -> bool:
    """Whether the labels of `key` are all in the grid `coords`."""
    try:
        run_index(coords, key)
    except CubeError:
        return False
    return True


def write_episodes(
    path: PathLike, key: RunKey, mode: str, iterate: int, reward: np.ndarray | Sequence[float],
    cost: np.ndarray | Sequence[float],
) -> None:
    """Write episodes of one run at one or more iterates; see ``CubeWriter.write_episodes``."""
    CubeWriter(path).write_episodes(key, mode, iterate, reward, cost)


def write_run(path: PathLike, key: RunKey, reward: np.ndarray, cost: np.ndarray) -> None:
    """Write all episodes of one run at once; see ``CubeWriter.write_run``."""
    CubeWriter(path).write_run(key, reward, cost)


def write_iterate_vars(path: PathLike, key: RunKey, iterate: int, values: dict[str, Any]) -> None:
    """Write per-iterate variables of one run; see ``CubeWriter.write_iterate_vars``."""
    CubeWriter(path).write_iterate_vars(key, iterate, values)


def set_run_manifest(path: PathLike, key: RunKey, *, status: str, manifest: dict[str, Any] | None = None) -> None:
    """Record a run's status and manifest; see ``CubeWriter.set_run_manifest``."""
    CubeWriter(path).set_run_manifest(key, status=status, manifest=manifest)
