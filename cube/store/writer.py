"""Writing runs into an existing store: episodes, per-iterate variables, status and manifests."""

from __future__ import annotations

import json
from collections.abc import Sequence
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
    RUN_STATUS,
    RUN_STATUS_NAMES,
    RunKey,
    first_broken_episode,
    manifest_json,
)
from cube.store.fs import PathLike, side_folder
from cube.store.layout import mode_index, open_group, read_coords, run_index
from cube.store.locks import WRITE_SEQ, publishing

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


class CubeWriter:
    """Writes runs into an existing store; holds the open group and its labels across writes.

    Use one writer per process for many writes (opening a store costs several metadata reads).
    Each method checks everything before writing anything.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        self.refresh()

    def refresh(self) -> None:
        """Re-read the grid (labels, sizes, arrays): after this or another process grew the store."""
        self.group = open_group(self.path)
        self.coords = read_coords(self.group)
        self._arrays: dict[str, zarr.Array] = {}
        self._lock_folder: Path | None = None

    def _array(self, name: str) -> zarr.Array:
        """The store's array ``name``, opened once per writer (each open reads its metadata)."""
        if name not in self._arrays:
            self._arrays[name] = self.group[name]
        return self._arrays[name]

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
        with self._publishing(index):
            for name, values in (("reward", reward), ("cost", cost)):
                arr = self._array(name)  # its shape, not the labels read earlier: the store may have grown
                block = np.full((k, max(arr.shape[-2], n)), np.nan, dtype=np.float32)
                block[:, :n] = values
                arr[(*index, slice(iterate, iterate + k), slice(0, block.shape[1]), m)] = block

    def _publishing(self, index: tuple[int, ...]):
        """The run's write bracket (`cube.store.locks.publishing`); stores written before the seqlock have
        no sequence to bump."""
        if WRITE_SEQ not in self.group:
            return publishing(self.path, None, index)
        if self._lock_folder is None:
            self._lock_folder = side_folder(self.path / "_locks")
        return publishing(self.path, self._array(WRITE_SEQ), index)

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
        present = ~np.isnan(cost)  # an episode exists where its cost does; its reward may be unknown (NaN)
        if (~np.isnan(reward) & ~present).any():
            raise CubeError(f"{where}: a reward without a cost; an episode needs its cost (NaN marks no episode)")
        _check_episode_values(reward[present], cost[present], where)
        with self._publishing(index):
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
        for name, arr in arrays.items():
            self._array(name)[(*index, slice(iterate, iterate + arr.size))] = arr


    def set_run_manifest(
        self, key: RunKey, *, status: str, manifest: dict[str, Any] | None = None
    ) -> None:
        """Record a run's status (``pending``/``partial``/``complete``) and its manifest (JSON-able dict)."""
        if status not in RUN_STATUS:
            raise CubeError(f"unknown run status {status!r}; use one of {', '.join(RUN_STATUS)}")
        index = run_index(self.coords, key)
        body = dict(manifest or {})
        body["status"] = status
        body.setdefault("run", key.as_dict())
        self._array("run_manifest")[index] = manifest_json(body)
        self._array("run_status")[index] = RUN_STATUS[status]

    def set_means_only(self, key: RunKey, mode: str, means_only: bool = True) -> None:
        """Flag one run's `mode` as holding per-epoch means instead of episodes (store needs the flag
        array: create it with `create_store(..., means_only_flags=True)`)."""
        name = next((n for n in (MEANS_ONLY, LEGACY_MEANS_ONLY) if n in self.group), None)
        if name is None:
            raise CubeError(f"{self.path} has no '{MEANS_ONLY}' flags; create it with means_only_flags=True")
        index = run_index(self.coords, key)
        self._array(name)[(*index, mode_index(self.coords, mode))] = int(means_only)

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
        body = json.loads(text) if text else {}
        body.pop("status", None)
        body.pop("run", None)
        return body


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
