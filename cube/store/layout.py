"""Create, write, extend and open the results cube (a Zarr v3 directory store).

Layout: one Zarr group holding 1-D coordinate arrays for the seven dimensions, ``reward`` and ``cost``
(float32, fill NaN) chunked one run per chunk ``(1, 1, 1, 1, J, E, M)``, per-iterate variables
(float64, one chunk per run), ``run_status`` (int8) and ``run_manifest`` (JSON string) with one chunk
per run. Writers of different runs therefore never touch the same chunk, so separate processes can
fill one store at the same time. Growing the grid (``extend_store``) resizes arrays along a run
dimension whose chunk length is 1: existing chunks keep their keys and are never rewritten.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from cube.errors import CubeError
from cube.outputs import atomic_output
from cube.schema import (
    AGGREGATE_ONLY,
    DEFAULT_ITERATE_VARS,
    DIMS,
    MODES,
    RUN_DIMS,
    RUN_STATUS,
    RUN_STATUS_NAMES,
    SCHEMA_VERSION,
    RunKey,
    as_str_array,
    manifest_json,
    normalise,
    structure_problems,
)

PathLike = str | os.PathLike[str]

# Every chunk is zstd-compressed (zarr's default) and then carries a CRC-32C checksum, so a flipped bit
# in a stored chunk fails loudly on read instead of giving plausible wrong numbers.
CHUNK_COMPRESSORS = (ZstdCodec(level=0, checksum=False), Crc32cCodec())

# Per run, a sequence number (a seqlock): odd while a writer is between its reward and cost chunk writes,
# bumped again when both are written. A reader that sees it change or odd around its read of a run reads
# that run again, so nobody ever sees the rewards of an iterate without its costs. Writers also hold the
# run's lock file (`run_lock_path`) exclusively while they write, so a reader that keeps meeting writes
# (a writer that never pauses) can hold writers off for one read instead of retrying forever.
WRITE_SEQ = "write_seq"


# --------------------------------------------------------------------------------------------------
# label checks


def _clean_labels(dim: str, labels: Iterable[Any]) -> np.ndarray:
    """Return labels of one run dimension as a numpy array, refusing empty/duplicate/invalid ones."""
    values = list(labels)
    if dim in ("algo", "task"):
        arr = np.array([str(v) for v in values], dtype=object)
        if any(not v or v != v.strip() for v in arr):
            raise CubeError(f"empty or padded {dim} name in {values!r}; use plain names like 'ppo_lag'")
    elif dim == "bound":
        try:
            arr = np.array([float(v) for v in values], dtype=np.float64)
        except (TypeError, ValueError):
            raise CubeError(f"bounds must be numbers, got {values!r}") from None
        bad = arr[~np.isfinite(arr) | (arr <= 0)]
        if bad.size:
            raise CubeError(f"safety bound d must be a finite number > 0, got {bad[0]:g}; pass bounds like 15,25,50")
    else:
        try:
            arr = np.array([int(v) for v in values], dtype=np.int64)
        except (TypeError, ValueError):
            raise CubeError(f"{dim} labels must be integers, got {values!r}") from None
        if dim == "seed" and any(float(v) != int(v) for v in values):
            raise CubeError(f"seeds must be integers, got {values!r}")
    if len(set(arr.tolist())) != len(arr):
        dupes = sorted({v for v in arr.tolist() if arr.tolist().count(v) > 1}, key=str)
        raise CubeError(f"{dim} {dupes[0]!r} is given twice; each {dim} label must be unique")
    return arr


# --------------------------------------------------------------------------------------------------
# creation


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _create_coord(group: zarr.Group, dim: str, values: np.ndarray) -> None:
    if values.dtype == object or values.dtype.kind in "US":
        arr = group.create_array(dim, shape=values.shape, dtype=str, fill_value="", dimension_names=(dim,), compressors=CHUNK_COMPRESSORS)
        arr[:] = values.astype(str)
    else:
        arr = group.create_array(dim, shape=values.shape, dtype=values.dtype, dimension_names=(dim,), compressors=CHUNK_COMPRESSORS)
        arr[:] = values


def create_store(
    path: PathLike,
    *,
    algos: Sequence[str],
    tasks: Sequence[str],
    bounds: Sequence[float],
    seeds: Sequence[int],
    n_iterates: int,
    n_episodes: int,
    modes: Sequence[str] = MODES,
    iterate_vars: Sequence[str] = DEFAULT_ITERATE_VARS,
    attrs: dict[str, Any] | None = None,
    exist_ok: bool = False,
    chunk_iterates: int | None = None,
    chunk_episodes: int | None = None,
    means_only_flags: bool = False,
) -> None:
    """Create an empty cube for a grid of runs (all values NaN, every run pending).

    ``n_iterates`` is J (iterates 0..J-1) and ``n_episodes`` is E, the number of episode slots per
    (run, iterate, mode). With ``exist_ok`` an existing store with exactly this grid is accepted as is;
    a store of another grid or schema is refused. The store is built in a temporary folder and renamed
    into place, so a crash never leaves a half-created store at ``path``.

    Chunks hold one run each; along iterates and episodes a chunk spans ``chunk_iterates`` x
    ``chunk_episodes`` slots (default: all of them, one chunk per run). Smaller chunks suit stores that
    grow while recorded (`cube.Recorder`): growing adds chunks and never rewrites one.
    """
    path = Path(path)
    labels = {
        "algo": _clean_labels("algo", algos),
        "task": _clean_labels("task", tasks),
        "bound": _clean_labels("bound", bounds),
        "seed": _clean_labels("seed", seeds),
    }
    for dim, arr in labels.items():
        if arr.size == 0:
            raise CubeError(f"no {dim} given; a cube needs at least one label per dimension")
    if n_iterates < 1 or n_episodes < 1:
        raise CubeError(f"n_iterates and n_episodes must be >= 1, got {n_iterates} and {n_episodes}")
    bad_modes = [m for m in modes if m not in MODES]
    if bad_modes or not modes:
        raise CubeError(f"unknown mode {bad_modes[:1] or modes!r}; modes are {', '.join(MODES)}")
    if path.exists():
        if exist_ok:
            _check_same_grid(path, labels, n_iterates, n_episodes, tuple(modes), tuple(iterate_vars))
            return
        raise CubeError(f"{path} already exists; choose another path or remove it first")

    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        chunk = (chunk_iterates or n_iterates, chunk_episodes or n_episodes)
        _build_store(tmp, labels, n_iterates, n_episodes, tuple(modes), tuple(iterate_vars), attrs or {}, chunk)
        if means_only_flags:
            zarr.open_group(tmp, mode="r+").create_array(
                AGGREGATE_ONLY, shape=(*(len(labels[d]) for d in RUN_DIMS), len(modes)), chunks=(1, 1, 1, 1, len(modes)),
                dtype="int8", fill_value=0, dimension_names=(*RUN_DIMS, "mode"), compressors=CHUNK_COMPRESSORS)
        try:
            os.replace(tmp, path)
        except OSError:
            if not (exist_ok and path.exists()):
                raise
            # another process created the store meanwhile: accept it if it is the same grid
            _check_same_grid(path, labels, n_iterates, n_episodes, tuple(modes), tuple(iterate_vars))
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _build_store(
    path: Path,
    labels: dict[str, np.ndarray],
    n_iterates: int,
    n_episodes: int,
    modes: tuple[str, ...],
    iterate_vars: tuple[str, ...],
    attrs: dict[str, Any],
    chunk: tuple[int, int],
) -> None:
    root_attrs = {
        "saferl_schema_version": SCHEMA_VERSION,
        "synthetic": False,
        "created": _now(),
        "description": "saferl results cube: episodic reward and cost per run, iterate and mode",
    }
    root_attrs.update(attrs)
    group = zarr.open_group(path, mode="w", zarr_format=3, attributes=root_attrs)
    coords = dict(labels)
    coords["iterate"] = np.arange(n_iterates, dtype=np.int64)
    coords["episode"] = np.arange(n_episodes, dtype=np.int64)
    coords["mode"] = np.array(modes, dtype=object)
    for dim in DIMS:
        _create_coord(group, dim, coords[dim])

    run_shape = tuple(len(labels[d]) for d in RUN_DIMS)
    one_run = (1, 1, 1, 1)
    for name, units in (("reward", "undiscounted episodic return"), ("cost", "undiscounted episodic cost")):
        arr = group.create_array(
            name,
            shape=(*run_shape, n_iterates, n_episodes, len(modes)),
            chunks=(*one_run, *chunk, len(modes)),
            dtype="float32",
            fill_value=np.nan,
            dimension_names=DIMS,
            compressors=CHUNK_COMPRESSORS,
        )
        arr.attrs["long_name"] = units
    for name in iterate_vars:
        _create_iterate_var(group, name, (*run_shape, n_iterates), chunk[0])
    status = group.create_array(
        "run_status", shape=run_shape, chunks=one_run, dtype="int8", fill_value=0, dimension_names=RUN_DIMS,
        compressors=CHUNK_COMPRESSORS,
    )
    status.attrs["flag_meanings"] = " ".join(RUN_STATUS)
    status.attrs["flag_values"] = list(RUN_STATUS.values())
    group.create_array(
        "run_manifest", shape=run_shape, chunks=one_run, dtype=str, fill_value="", dimension_names=RUN_DIMS,
        compressors=CHUNK_COMPRESSORS,
    )
    seq = group.create_array(
        WRITE_SEQ, shape=run_shape, chunks=one_run, dtype="int64", fill_value=0, dimension_names=RUN_DIMS,
        compressors=CHUNK_COMPRESSORS,
    )
    seq.attrs["long_name"] = "episode writes of the run so far, x2; odd while a write is in progress"


@contextmanager
def staged_store(path: PathLike, *, force: bool = False) -> Iterator[Path]:
    """Yield a staging path beside `path` to write a whole store into; when the block ends without an
    exception the complete store replaces `path`, else it is removed and `path` is left as it was.

    An existing `path` is replaced only with `force`, and only if it is a Zarr store directory (never a
    file, a link or another folder). A full disk or Ctrl-C never loses the old store or leaves half a
    new one at `path`."""
    target = Path(path)
    if target.exists() or target.is_symlink():
        if not force:
            raise CubeError(f"{target} already exists; pass --force to replace it or choose another path")
        if target.is_symlink() or not target.is_dir():
            raise CubeError(f"{target} exists and is not a Zarr store directory; refusing to replace it: "
                            "remove it yourself or choose another path")
        if not (target / "zarr.json").exists():
            raise CubeError(f"{target} is a directory that is not a Zarr store; refusing to delete it")
    if not target.parent.is_dir():
        raise CubeError(f"the folder {target.parent} does not exist; create it or write elsewhere")
    staging = target.with_name(f".{target.name}.new-{uuid.uuid4().hex[:8]}")
    try:
        yield staging
        old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
        had_old = target.exists()
        if had_old:
            os.rename(target, old)
        try:
            os.rename(staging, target)
        except OSError:
            if had_old:
                os.rename(old, target)  # put the old store back
            raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _create_iterate_var(group: zarr.Group, name: str, shape: tuple[int, ...], chunk_iterates: int) -> None:
    """A per-iterate variable (run dims + iterate), NaN until written, one run per chunk."""
    group.create_array(
        name,
        shape=shape,
        chunks=(1, 1, 1, 1, chunk_iterates),
        dtype="float64",
        fill_value=np.nan,
        dimension_names=(*RUN_DIMS, "iterate"),
        compressors=CHUNK_COMPRESSORS,
    )


def _check_same_grid(
    path: Path,
    labels: dict[str, np.ndarray],
    n_iterates: int,
    n_episodes: int,
    modes: tuple[str, ...],
    iterate_vars: tuple[str, ...],
) -> None:
    group = _open_group(path, mode="r")
    coords = _read_coords(group)
    problems = []
    for dim, want in labels.items():
        have = coords[dim]
        if dim == "bound":
            same = have.shape == want.shape and np.allclose(have, want)
        else:
            same = [str(v) for v in have] == [str(v) for v in want]
        if not same:
            problems.append(f"{dim} {list(have)} != {list(want)}")
    if len(coords["iterate"]) != n_iterates:
        problems.append(f"{len(coords['iterate'])} iterates != {n_iterates}")
    if len(coords["episode"]) != n_episodes:
        problems.append(f"{len(coords['episode'])} episode slots != {n_episodes}")
    if tuple(coords["mode"]) != modes:
        problems.append(f"modes {list(coords['mode'])} != {list(modes)}")
    missing = [v for v in iterate_vars if v not in group]
    if missing:
        problems.append(f"missing per-iterate variables {missing}")
    if problems:
        raise CubeError(
            f"{path} is a cube of a different grid ({'; '.join(problems)}); "
            "write to a new path, or use the same grid"
        )


# --------------------------------------------------------------------------------------------------
# opening the group and locating runs


def side_folder(path: PathLike, attributes: dict[str, Any] | None = None) -> Path:
    """Create (if needed) a folder inside a store for saferl's own files (derived statistics, locks, run
    claims, checkpoints), marked as an empty zarr group: zarr lists a store's members when xarray opens it,
    and warns about entries that are neither groups nor arrays. So the folder appears with its marker in
    one rename, built beside the store (a reader listing the store never sees it unmarked); where that
    folder is not writable, it is made in place. `attributes`: the marker's. Safe against concurrent
    callers."""
    folder = Path(path)
    if (folder / "zarr.json").exists():
        return folder
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.new-", dir=folder.parent.parent))
    except OSError:
        staging = None
    if staging is not None:
        try:
            _write_group_marker(staging, attributes)
            os.rename(staging, folder)  # fails when another caller (or an unmarked folder) is there first
        except OSError:
            pass
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "zarr.json").exists():
        _write_group_marker(folder, attributes)
    return folder


def _write_group_marker(folder: Path, attributes: dict[str, Any] | None) -> None:
    """Write `folder/zarr.json` (an empty zarr group) via a temporary file: never half a file."""
    tmp = folder / f".zarr.json.{uuid.uuid4().hex[:8]}"
    try:
        tmp.write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": attributes or {}}))
        os.replace(tmp, folder / "zarr.json")
    finally:
        tmp.unlink(missing_ok=True)  # a full disk must not leave an empty temporary file behind


def pid_alive(pid: int) -> bool:
    """Whether a process of this host with this pid exists (to tell a dead writer's leftovers)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _open_group(path: PathLike, mode: str = "r+") -> zarr.Group:
    path = Path(path)
    if not path.exists():
        raise CubeError(f"{path} does not exist; create it first (saferl demo / saferl train)")
    if not (path / "zarr.json").exists():
        raise CubeError(f"{path} is not a saferl Zarr v3 store (no zarr.json); give the path of a results store")
    try:
        group = zarr.open_group(path, mode=mode)
    except Exception as exc:  # zarr raises many types for damaged metadata
        raise CubeError(f"{path} is a corrupt Zarr store ({type(exc).__name__}); restore it from a copy") from None
    for name in (*DIMS, "reward", "cost"):
        if name not in group:
            raise CubeError(f"{path} lacks the array '{name}'; it is not a writable saferl cube")
    return group


def _read_coords(group: zarr.Group) -> dict[str, np.ndarray]:
    coords = {}
    for dim in DIMS:
        values = np.asarray(group[dim][:])
        coords[dim] = as_str_array(values) if values.dtype.kind in "OTUS" else values
    return coords


def _run_index(coords: dict[str, np.ndarray], key: RunKey) -> tuple[int, int, int, int]:
    """Position of a run in the grid; refuses labels that are not in it."""
    index = []
    for dim, value in zip(RUN_DIMS, (key.algo, key.task, key.bound, key.seed), strict=True):
        labels = coords[dim]
        if dim == "bound":
            hits = np.flatnonzero(np.isclose(labels.astype(float), float(value), rtol=1e-12, atol=0))
        else:
            hits = np.flatnonzero(labels.astype(str) == str(value))
        if hits.size == 0:
            shown = ", ".join(f"{v:g}" if dim == "bound" else str(v) for v in labels)
            raise CubeError(f"{dim} {value!r} is not in the cube's grid ({shown}); extend the store first")
        index.append(int(hits[0]))
    return tuple(index)  # type: ignore[return-value]


def _mode_index(coords: dict[str, np.ndarray], mode: str) -> int:
    modes = [str(m) for m in coords["mode"]]
    if mode not in modes:
        raise CubeError(f"unknown mode {mode!r}; modes are {', '.join(modes)}")
    return modes.index(mode)


# --------------------------------------------------------------------------------------------------
# writing runs


def _check_episode_values(reward: np.ndarray, cost: np.ndarray, where: str) -> None:
    if reward.shape != cost.shape:
        raise CubeError(f"{where}: reward shape {reward.shape} != cost shape {cost.shape}")
    if np.isnan(cost).any():
        raise CubeError(f"{where}: NaN cost in a written episode; pass only completed episodes "
                        "(a reward may be NaN where it is unknown)")
    if np.isinf(reward).any() or np.isinf(cost).any():
        raise CubeError(f"{where}: infinite reward or cost; check the environment's outputs")
    if (cost < 0).any():
        raise CubeError(f"{where}: negative episode cost {cost.min():g}; costs must be >= 0")


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
        self.group = _open_group(self.path)
        self.coords = _read_coords(self.group)
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
        index = _run_index(coords, key)
        m = _mode_index(coords, mode)
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

    @contextmanager
    def _publishing(self, index: tuple[int, ...]) -> Iterator[None]:
        """Bracket the chunk writes of one run by its write sequence (odd inside, even after)."""
        if WRITE_SEQ not in self.group:  # stores written before the seqlock: nothing to bump
            yield
            return
        import fcntl

        seq = self._array(WRITE_SEQ)
        if self._lock_folder is None:
            self._lock_folder = side_folder(self.path / "_locks")
        with open(run_lock_path(self.path, index), "a+") as lock:  # one open file per write: sweeps of
            fcntl.flock(lock, fcntl.LOCK_EX)                        # thousands of runs stay under ulimit -n
            start = int(seq[index])
            seq[index] = start + 1 + start % 2  # odd: a write is in progress
            try:
                yield
            finally:
                seq[index] = start + 2 + start % 2


    def write_run(self, key: RunKey, reward: np.ndarray, cost: np.ndarray) -> None:
        """Write all episodes of one run at once: arrays (J, E, M) in the store's iterate/episode/mode order.

        NaN marks a missing episode; where one of reward/cost is NaN the other must be too. This is one
        chunk write per variable, the fast path for importing results or writing synthetic cubes.
        """
        coords = self.coords
        index = _run_index(coords, key)
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
        index = _run_index(coords, key)
        n_iter = len(coords["iterate"])
        arrays = {}
        for name, value in values.items():
            if name in DIMS or name in ("reward", "cost", "run_status", "run_manifest") or name not in group:
                known = sorted(k for k in group.array_keys() if group[k].ndim == 5)
                raise CubeError(f"per-iterate variable {name!r} is not in the store (it has {', '.join(known)})")
            arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
            if arr.ndim != 1 or not 0 <= iterate or iterate + arr.size > n_iter:
                raise CubeError(f"{name} for run {key}: iterates {iterate}..{iterate + arr.size - 1} outside 0..{n_iter - 1}")
            arrays[name] = arr
        for name, arr in arrays.items():
            self._array(name)[(*index, slice(iterate, iterate + arr.size))] = arr


    def set_run_manifest(
        self, key: RunKey, *, status: str, manifest: dict[str, Any] | None = None
    ) -> None:
        """Record a run's status (``pending``/``partial``/``complete``) and its manifest (JSON-able dict)."""
        if status not in RUN_STATUS:
            raise CubeError(f"unknown run status {status!r}; use one of {', '.join(RUN_STATUS)}")
        index = _run_index(self.coords, key)
        body = dict(manifest or {})
        body["status"] = status
        body.setdefault("run", key.as_dict())
        self._array("run_manifest")[index] = manifest_json(body)
        self._array("run_status")[index] = RUN_STATUS[status]

    def set_means_only(self, key: RunKey, mode: str, means_only: bool = True) -> None:
        """Flag one run's `mode` as holding per-epoch means instead of episodes (store needs the flag
        array: create it with `create_store(..., means_only_flags=True)`)."""
        if AGGREGATE_ONLY not in self.group:
            raise CubeError(f"{self.path} has no '{AGGREGATE_ONLY}' flags; create it with means_only_flags=True")
        index = _run_index(self.coords, key)
        self._array(AGGREGATE_ONLY)[(*index, _mode_index(self.coords, mode))] = int(means_only)

    def run_status(self, key: RunKey) -> str:
        """A run's stored status (``pending``/``partial``/``complete``), read from its own chunk only."""
        if "run_status" not in self.group:
            return "pending"
        return RUN_STATUS_NAMES.get(int(self._array("run_status")[_run_index(self.coords, key)]), "pending")

    def run_manifest(self, key: RunKey) -> dict[str, Any]:
        """A run's stored manifest fields (without ``status`` and ``run``), read from its own chunk only."""
        if "run_manifest" not in self.group:
            return {}
        text = str(self._array("run_manifest")[_run_index(self.coords, key)])
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


def read_manifests(path: PathLike) -> list[dict[str, Any]]:
    """Every run of the grid as a dict: its labels, ``status`` and the stored manifest fields."""
    group = _open_group(path, mode="r")
    coords = _read_coords(group)
    status = np.asarray(group["run_status"][:]) if "run_status" in group else None
    texts = np.asarray(group["run_manifest"][:]) if "run_manifest" in group else None
    rows = []
    for index in np.ndindex(*(len(coords[d]) for d in RUN_DIMS)):
        row: dict[str, Any] = {d: coords[d][i].item() for d, i in zip(RUN_DIMS, index, strict=True)}
        row["status"] = RUN_STATUS_NAMES.get(int(status[index]), "unknown") if status is not None else "unknown"
        if texts is not None and texts[index]:
            stored = json.loads(str(texts[index]))
            stored.pop("status", None)
            stored.pop("run", None)
            row.update(stored)
        rows.append(row)
    return rows


def read_write_seqs(source: PathLike | None) -> np.ndarray | None:
    """Every run's write sequence (run dims; odd = a write in progress); None for stores without one
    (foreign cubes, netCDF, stores written before the seqlock). Readers call this twice per pass, so
    the chunks (8 bytes each, one per run) are read straight from their files when they are in the
    codec chain this module writes; otherwise through zarr."""
    if source is None or not (Path(source) / WRITE_SEQ / "zarr.json").exists():
        return None
    folder = Path(source) / WRITE_SEQ
    try:
        meta = json.loads((folder / "zarr.json").read_text())
        if [c["name"] for c in meta["codecs"]] == ["bytes", "zstd", "crc32c"] and \
                meta["chunk_grid"]["configuration"]["chunk_shape"] == [1] * len(RUN_DIMS):
            return _read_seq_files(folder, tuple(meta["shape"]))
        return np.asarray(zarr.open_array(folder, mode="r")[...])
    except Exception:  # noqa: BLE001 - an unreadable sequence is reported by the data read it guards
        return None


def _read_seq_files(folder: Path, shape: tuple[int, ...]) -> np.ndarray:
    """The int64 of each one-element chunk file (bytes -> zstd -> crc32c); 0 where none was written.
    ValueError on a checksum mismatch."""
    import google_crc32c
    from numcodecs import Zstd

    zstd = Zstd()
    out = np.zeros(shape, dtype=np.int64)
    for index in np.ndindex(*shape):
        try:
            data = (folder / "c" / "/".join(map(str, index))).read_bytes()
        except FileNotFoundError:
            continue
        body, crc = data[:-4], data[-4:]
        if google_crc32c.value(body).to_bytes(4, "little") != crc:
            raise ValueError(f"checksum mismatch in {folder.name} chunk {index}")
        out[index] = np.frombuffer(zstd.decode(body), dtype="<i8")[0]
    return out


def runs_written_since(before: np.ndarray, after: np.ndarray | None) -> list[tuple[int, ...]]:
    """Run positions whose write sequence moved between two `read_write_seqs`, or was odd (a write in
    progress) at the first: their data read in between may mix two writes."""
    if after is None or after.shape != before.shape:
        return []
    return [tuple(int(i) for i in ix) for ix in np.argwhere((before != after) | (before % 2 == 1))]


def run_lock_path(path: PathLike, index: tuple[int, ...]) -> Path:
    """The lock file of the run at `index` (its position along the run dims): writers of its episodes
    hold it exclusively, a reader that keeps meeting their writes shares it for one read."""
    return Path(path) / "_locks" / f"run-{'.'.join(str(int(i)) for i in index)}.lock"


class StillRunReader:
    """Reads one run's reward and cost (iterate, episode, mode) straight from its chunks while its write
    sequence stands still and even: both variables of the same write, never one without the other."""

    OPTIMISTIC_TRIES = 3
    """Reads tried without a lock before holding writers off (a writer pauses between iterates)."""

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        self.arrays = {name: zarr.open_array(self.path / name, mode="r") for name in ("reward", "cost", WRITE_SEQ)}

    def read(self, index: tuple[int, ...], tries: int = 200) -> tuple[np.ndarray, np.ndarray]:
        """Read while no write is in progress: a few short waits first; then, against a writer that never
        pauses, with the run's lock shared (writers wait for the read, milliseconds). CubeError if the run
        was being written at every one of `tries` attempts (a writer holding its lock that long is stuck)."""
        for attempt in range(tries):
            got = self._read_still(index)
            if got is None and attempt >= self.OPTIMISTIC_TRIES:
                got = self._read_locked(index)
            if got is not None:
                return got
            time.sleep(0.001 * min(attempt + 1, 20))
        raise CubeError("a run was being written during every read of it; stop its writer or try again")

    def _read_still(self, index: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | None:
        seq_array = self.arrays[WRITE_SEQ]
        seq = int(seq_array[index])
        reward, cost = self.arrays["reward"][index], self.arrays["cost"][index]
        if seq % 2 == 0 and int(seq_array[index]) == seq:
            return reward, cost
        return None

    def _read_locked(self, index: tuple[int, ...], spin_s: float = 0.05) -> tuple[np.ndarray, np.ndarray] | None:
        """One read holding the run's lock shared, taken within `spin_s` seconds (None otherwise: no lock
        file, as with writers from before the lock, or a writer kept it). The lock is polled, not waited
        for: a blocking wait could not be bounded, and a writer that never pauses still lets go of it for
        tens of microseconds between two writes, which polling catches."""
        import fcntl

        try:
            handle = open(run_lock_path(self.path, index), "rb")  # noqa: SIM115 - closed below
        except OSError:
            return None
        with handle:
            deadline = time.perf_counter() + spin_s
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.perf_counter() > deadline:
                        return None
                    time.sleep(0)
            try:
                return self._read_still(index)
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def unreadable_chunk(source: str | Path | None) -> str | None:
    """Name the first chunk of a Zarr store that cannot be read (checksum mismatch, bad compression):
    'chunk cost/c/0/1/0/2/0/0/0 of run ppo/goal/15.0/2 is damaged (checksum mismatch)'; None if every chunk reads or the
    source is not a Zarr directory. Reads the store chunk by chunk: for error messages, not hot paths."""
    if source is None or not (Path(source) / "zarr.json").exists():
        return None
    group = zarr.open_group(str(source), mode="r")
    labels = {d: group[d][:] for d in RUN_DIMS}
    for name, arr in group.arrays():
        if arr.ndim < len(RUN_DIMS) or tuple(arr.metadata.dimension_names or ())[:4] != RUN_DIMS:
            continue
        for index in np.ndindex(*arr.shape[: len(RUN_DIMS)]):
            try:
                arr[index]
            except Exception as exc:  # noqa: BLE001 - any decode failure is what we are looking for
                chunk = "/".join(["c", *map(str, index), *["0"] * (arr.ndim - len(RUN_DIMS))])
                run = "/".join(str(labels[d][i]) for d, i in zip(RUN_DIMS, index, strict=True))
                kind = "checksum mismatch" if "checksum" in str(exc).lower() else type(exc).__name__
                return f"chunk {name}/{chunk} of run {run} is damaged ({kind})"
    return None


# --------------------------------------------------------------------------------------------------
# extending the grid


def extend_store(
    path: PathLike,
    *,
    algos: Sequence[str] = (),
    tasks: Sequence[str] = (),
    bounds: Sequence[float] = (),
    seeds: Sequence[int] = (),
) -> dict[str, list[Any]]:
    """Add labels to run dimensions without rewriting existing data; labels already present are skipped.

    Arrays are resized along each grown dimension (chunk length 1 there, so existing chunk keys are
    unchanged) and the new labels are appended to the coordinate. Do not run this while other
    processes are writing to the store. Returns the labels actually added per dimension.
    """
    wanted = {"algo": algos, "task": tasks, "bound": bounds, "seed": seeds}
    cleaned = {dim: _clean_labels(dim, new) for dim, new in wanted.items() if len(new)}
    added: dict[str, list[Any]] = {}
    with grid_lock(path):
        group = _open_group(path)
        coords = _read_coords(group)
        for dim, clean in cleaned.items():
            have = coords[dim]
            if dim == "bound":
                fresh = [v for v in clean if not np.isclose(have.astype(float), v, rtol=1e-12, atol=0).any()]
            else:
                have_str = set(have.astype(str).tolist())
                fresh = [v for v in clean if str(v) not in have_str]
            if fresh:
                _grow_dim(group, dim, len(have), fresh)
                added[dim] = [v.item() if hasattr(v, "item") else v for v in fresh]
    return added


def grow_store(path: PathLike, *, n_iterates: int = 0, n_episodes: int = 0,
               iterate_vars: Sequence[str] = ()) -> bool:
    """Make room for at least `n_iterates` iterates and `n_episodes` episode slots, and add missing
    per-iterate variables, without rewriting any chunk (arrays are resized; new slots are NaN).

    Safe while other processes write and grow the same store (under the store's grid lock); writers
    that hold a `CubeWriter` call `refresh()` afterwards. Returns whether anything changed."""
    with grid_lock(path):
        group = _open_group(path)
        sizes = {d: group[d].shape[0] for d in ("iterate", "episode")}
        changed = False
        for dim, wanted in (("iterate", n_iterates), ("episode", n_episodes)):
            if wanted > sizes[dim]:
                _grow_dim(group, dim, sizes[dim], list(range(sizes[dim], wanted)))
                sizes[dim] = wanted
                changed = True
        run_shape = tuple(group[d].shape[0] for d in RUN_DIMS)
        chunk_iterates = group["cost"].chunks[len(RUN_DIMS)]
        for name in iterate_vars:
            check_iterate_var_name(name)
            if name not in group:
                _create_iterate_var(group, name, (*run_shape, sizes["iterate"]), chunk_iterates)
                changed = True
    return changed


def check_iterate_var_name(name: str) -> None:
    """CubeError if `name` cannot be a per-iterate variable (a dimension or one of the cube's own arrays)."""
    if name in DIMS or name in ("reward", "cost", "run_status", "run_manifest", WRITE_SEQ) or not name.isidentifier():
        raise CubeError(f"{name!r} is a reserved or invalid name; choose another name for a per-iterate variable")


@contextmanager
def grid_lock(path: PathLike) -> Iterator[None]:
    """Hold the store's grid lock (an exclusive flock on `<store>/_locks/grid.lock`) while the grid's
    labels or sizes change, so concurrent growers never lose each other's labels."""
    import fcntl

    folder = side_folder(Path(path) / "_locks")
    with open(folder / "grid.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _grow_dim(group: zarr.Group, dim: str, old_size: int, fresh: list[Any]) -> None:
    """Resize every array along `dim` by len(fresh) and append the labels `fresh` to its coordinate."""
    new_size = old_size + len(fresh)
    for name in group.array_keys():
        arr = group[name]
        dims = tuple(arr.metadata.dimension_names or ())
        if dim in dims and name != dim:
            shape = list(arr.shape)
            shape[dims.index(dim)] = new_size
            arr.resize(tuple(shape))
    coord = group[dim]
    coord.resize((new_size,))
    coord[old_size:] = np.array(fresh, dtype=object if dim in ("algo", "task") else None).astype(
        str if dim in ("algo", "task") else coord.dtype
    )


# --------------------------------------------------------------------------------------------------
# reading


def open_cube(
    source: PathLike | xr.Dataset, *, check: bool = True, chunks: dict[str, int] | None = None
) -> xr.Dataset:
    """Open a cube lazily (dask) from a Zarr directory or a netCDF file, checking its structure.

    ``chunks`` sets dask chunk sizes per dimension (default: the store's chunks, one run each); larger
    dask chunks let one task fetch many store chunks in a single (concurrent) zarr read.

    Returns a Dataset whose string coordinates are plain numpy strings. Only the seven dimensions and
    ``reward``/``cost`` are required. Raises ``CubeError`` (one line) for a missing, corrupt or
    malformed store; value checks that need a pass over the data live in ``cube.store.validate``.
    """
    if isinstance(source, xr.Dataset):
        ds = source
        where = "dataset"
    else:
        ds = _open_dataset(Path(source), chunks or {})
        where = str(source)
    if check:
        problems = structure_problems(ds)
        if problems:
            more = f" (and {len(problems) - 1} more problem(s); run `saferl validate {where}`)" if len(problems) > 1 else ""
            raise CubeError(f"{where} is not a valid saferl cube: {problems[0]}{more}")
        ds = normalise(ds)
    ds = ds.drop_vars(WRITE_SEQ, errors="ignore")  # the writers' seqlock, read by `read_write_seqs` only
    if not isinstance(source, xr.Dataset):
        ds.encoding["saferl_source"] = str(source)  # lets ``ds.saferl`` reuse the store's cached statistics
    return ds


def _open_dataset(path: Path, chunks: dict[str, int]) -> xr.Dataset:
    if not path.exists():
        raise CubeError(f"{path} does not exist; give the path of a results store (.zarr directory or .nc file)")
    try:
        if path.is_dir():
            if (path / "zarr.json").exists():
                return xr.open_zarr(path, consolidated=False, chunks=chunks)
            if (path / ".zgroup").exists():
                return xr.open_zarr(path, consolidated=(path / ".zmetadata").exists(), chunks=chunks)
            raise CubeError(f"{path} is a directory but not a Zarr store (no zarr.json); give a results store path")
        return xr.open_dataset(path, chunks=chunks)
    except CubeError:
        raise
    except Exception as exc:  # backends raise many types for unreadable files
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise CubeError(f"cannot read {path} as a Zarr store or netCDF file ({reason}); is it corrupt?") from None


def _netcdf_attr(value: Any) -> Any:
    """netCDF attributes hold numbers, strings and 1-D arrays only: booleans become 0/1, dicts JSON."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value


def export_netcdf(source: PathLike, out: PathLike) -> Path:
    """Write the cube (all variables and attrs) to a netCDF4 file; returns the path written.

    Written beside `out` and renamed into place; a target that is not a regular file is refused."""
    ds = open_cube(source)
    attrs = {k: _netcdf_attr(v) for k, v in ds.attrs.items()}
    ds = ds.assign_attrs(attrs)
    encoding = {name: {"zlib": True, "complevel": 1} for name in ("reward", "cost")}
    with atomic_output(out) as tmp:
        ds.to_netcdf(tmp, engine="netcdf4", encoding=encoding)
    return Path(out)
