"""The store's layout: creating a cube, growing its grid, opening its group and locating runs.

Layout: one Zarr group holding 1-D coordinate arrays for the seven dimensions, ``reward`` and ``cost``
(float32, fill NaN) chunked one run and one mode per chunk ``(1, 1, 1, 1, 16, E, 1)``, chunks that hold no
episode not written (`cube.store.chunking`; stores written before issue 37: one chunk per run, every mode in
it, read the same), per-iterate variables
(float64, one chunk per run), ``run_status`` (int8) and ``run_manifest`` (JSON string) with one chunk
per run. Writers of different runs therefore never touch the same chunk, so separate processes can
fill one store at the same time. Growing the grid (``extend_store``) resizes arrays along a run
dimension whose chunk length is 1: existing chunks keep their keys and are never rewritten.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec, ZstdCodec

from cube.errors import CubeError, DamagedStoreError
from cube.schema import (
    DEFAULT_ITERATE_VARS,
    DIMS,
    LEGACY_MEANS_ONLY,
    MEANS_ONLY,
    MODES,
    RUN_DIMS,
    RUN_STATUS,
    SCHEMA_VERSION,
    RunKey,
    as_str_array,
    same_bound,
    schema_version_problems,
    seed_label,
    utc_stamp,
)
from cube.schema import MAX_CHUNK_BYTES as MAX_CHUNK_BYTES  # re-exported: the grid's limits
from cube.schema import MAX_EPISODE_SLOTS as MAX_EPISODE_SLOTS
from cube.schema import MAX_ITERATES as MAX_ITERATES
from cube.store.chunking import episode_chunking
from cube.store.damage import reading_store
from cube.store.fs import PathLike, remove_stale_staging, side_folder, staging_path
from cube.store.grid import GRID_ATTR, Sizes, open_view, publish, published_sizes
from cube.store.location import is_remote, local_path, open_remote_group, redact, refuse_url
from cube.store.locks import WRITE_SEQ, grid_lock

# Every chunk is zstd-compressed (zarr's default) and then carries a CRC-32C checksum, so a flipped bit
# in a stored chunk fails loudly on read instead of giving plausible wrong numbers.
CHUNK_COMPRESSORS = (ZstdCodec(level=0, checksum=False), Crc32cCodec())
# Reward and cost, the bulk of a store, are byte-shuffled float32 in Blosc-LZ4 instead: as small as zstd on
# episode data and about twice as fast to decode (the codec sweep of docs/performance.md), CRC-32C kept.
EPISODE_COMPRESSORS = (BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=4), Crc32cCodec())


# --------------------------------------------------------------------------------------------------
# label checks


def clean_labels(dim: str, labels: Iterable[Any]) -> np.ndarray:
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
        arr = np.array([seed_label(v) for v in values], dtype=np.int64)
    if len(set(arr.tolist())) != len(arr):
        dupes = sorted({v for v in arr.tolist() if arr.tolist().count(v) > 1}, key=str)
        raise CubeError(f"{dim} {dupes[0]!r} is given twice; each {dim} label must be unique")
    return arr


# --------------------------------------------------------------------------------------------------
# creation


def _create_coord(group: zarr.Group, dim: str, values: np.ndarray) -> None:
    if values.dtype == object or values.dtype.kind in "US":
        arr = group.create_array(dim, shape=values.shape, dtype=str, fill_value="", dimension_names=(dim,),
                                 compressors=CHUNK_COMPRESSORS)
        arr[:] = values.astype(str)
    else:
        arr = group.create_array(dim, shape=values.shape, dtype=values.dtype, dimension_names=(dim,),
                                 compressors=CHUNK_COMPRESSORS)
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

    Chunks hold one run and one mode each; along iterates and episodes a chunk spans ``chunk_iterates`` x
    ``chunk_episodes`` slots (default: all of them; at most 16 iterates, `cube.store.chunking`). Smaller
    chunks suit stores that
    grow while recorded (`cube.Recorder`): growing adds chunks and never rewrites one.
    """
    refuse_url(path, "create a store at")
    path = Path(local_path(path))
    labels = {
        "algo": clean_labels("algo", algos),
        "task": clean_labels("task", tasks),
        "bound": clean_labels("bound", bounds),
        "seed": clean_labels("seed", seeds),
    }
    for dim, arr in labels.items():
        if arr.size == 0:
            raise CubeError(f"no {dim} given; a cube needs at least one label per dimension")
    if n_iterates < 1 or n_episodes < 1:
        raise CubeError(f"n_iterates and n_episodes must be >= 1, got {n_iterates} and {n_episodes}")
    check_grid_size(n_iterates=n_iterates, n_episodes=n_episodes, chunk_iterates=chunk_iterates,
                    chunk_episodes=chunk_episodes, n_modes=len(modes))
    bad_modes = [m for m in modes if m not in MODES]
    if bad_modes or not modes:
        raise CubeError(f"unknown mode {bad_modes[:1] or modes!r}; modes are {', '.join(MODES)}")
    if path.exists():
        if exist_ok:
            _check_same_grid(path, labels, n_iterates, n_episodes, tuple(modes), tuple(iterate_vars))
            return
        raise CubeError(f"{path} already exists; choose another path or remove it first")

    remove_stale_staging(path)
    tmp = staging_path(path, "tmp")
    try:
        chunk = (chunk_iterates or n_iterates, chunk_episodes or n_episodes)
        _build_store(tmp, labels, n_iterates, n_episodes, tuple(modes), tuple(iterate_vars), attrs or {}, chunk)
        if means_only_flags:
            zarr.open_group(tmp, mode="r+").create_array(
                MEANS_ONLY, shape=(*(len(labels[d]) for d in RUN_DIMS), len(modes)), chunks=(1, 1, 1, 1, len(modes)),
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
        "created": utc_stamp(),
        "description": "saferl results cube: episodic reward and cost per run, iterate and mode",
    }
    root_attrs.update(attrs)
    coords = dict(labels)
    coords["iterate"] = np.arange(n_iterates, dtype=np.int64)
    coords["episode"] = np.arange(n_episodes, dtype=np.int64)
    coords["mode"] = np.array(modes, dtype=object)
    root_attrs[GRID_ATTR] = {dim: len(coords[dim]) for dim in DIMS}  # the published grid (`cube.store.grid`)
    group = zarr.open_group(path, mode="w", zarr_format=3, attributes=root_attrs)
    for dim in DIMS:
        _create_coord(group, dim, coords[dim])

    run_shape = tuple(len(labels[d]) for d in RUN_DIMS)
    one_run = (1, 1, 1, 1)
    for name, units in (("reward", "undiscounted episodic return"), ("cost", "undiscounted episodic cost")):
        arr = group.create_array(
            name,
            shape=(*run_shape, n_iterates, n_episodes, len(modes)),
            chunks=episode_chunking(n_iterates, n_episodes, *chunk),
            dtype="float32",
            fill_value=np.nan,
            dimension_names=DIMS,
            compressors=EPISODE_COMPRESSORS,
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
    group = open_group(path, mode="r")
    coords = read_coords(group)
    problems = []
    for dim, want in labels.items():
        have = coords[dim]
        if dim == "bound":
            same = have.shape == want.shape and bool(same_bound(have, want).all())
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


def open_group(path: PathLike, mode: str = "r+", sizes: Sizes | None = None) -> zarr.Group:
    """The store's root group seen through its published grid (`cube.store.gridview.GridView`; `sizes`: a
    snapshot taken earlier). The grid's sizes change only through `extend_store` / `grow_store`. CubeError
    for a missing, foreign or corrupt store."""
    if is_remote(path):
        if mode != "r":
            refuse_url(path, "write into")
        group = open_remote_group(str(path))
    else:
        group = _open_local_group(Path(local_path(path)), mode, sizes)
    _check_group(group, redact(path))
    return group


def _open_local_group(path: Path, mode: str, sizes: Sizes | None) -> zarr.Group:
    if not path.exists():
        raise CubeError(f"{path} does not exist; create it first (saferl demo / saferl train)")
    if not (path / "zarr.json").exists():
        raise CubeError(f"{path} is not a saferl Zarr v3 store (no zarr.json); give the path of a results store")
    with reading_store(path, f"open {path}"):  # zarr raises many types for damaged metadata
        return open_view(path, sizes, mode="r" if mode == "r" else "r+")


def _check_group(group: zarr.Group, path: str) -> None:
    """CubeError unless `group` holds a saferl cube of a schema this saferl reads."""
    with reading_store(None if "://" in path else path, f"open {path}"):
        version = schema_version_problems(group.attrs)
        if version:
            raise CubeError(f"{path} is not a store this saferl can read or write: {version[0]}")
        for name in (*DIMS, "reward", "cost"):
            if name not in group:
                raise CubeError(f"{path} lacks the array '{name}'; it is not a writable saferl cube")
        for name in ("reward", "cost"):
            dtype = group[name].dtype
            if dtype.kind != "f":
                raise DamagedStoreError.found(f"open {path}", f"the array '{name}' says dtype {dtype} where a "
                                              "cube holds floats: its metadata disagree with the data",
                                              advice="restore its zarr.json from a copy")


def read_coords(group: zarr.Group) -> dict[str, np.ndarray]:
    coords = {}
    for dim in DIMS:
        values = np.asarray(group[dim][:])
        coords[dim] = as_str_array(values) if values.dtype.kind in "OTUS" else values
    return coords


def run_index(coords: dict[str, np.ndarray], key: RunKey) -> tuple[int, int, int, int]:
    """Position of a run in the grid; refuses labels that are not in it."""
    index = []
    for dim, value in zip(RUN_DIMS, (key.algo, key.task, key.bound, key.seed), strict=True):
        labels = coords[dim]
        if dim == "bound":
            hits = np.flatnonzero(same_bound(labels, value))
        else:
            hits = np.flatnonzero(labels.astype(str) == str(value))
        if hits.size == 0:
            shown = ", ".join(f"{v:g}" if dim == "bound" else str(v) for v in labels)
            raise CubeError(f"{dim} {value!r} is not in the cube's grid ({shown}); extend the store first")
        index.append(int(hits[0]))
    return tuple(index)  # type: ignore[return-value]


def mode_index(coords: dict[str, np.ndarray], mode: str) -> int:
    modes = [str(m) for m in coords["mode"]]
    if mode not in modes:
        raise CubeError(f"unknown mode {mode!r}; modes are {', '.join(modes)}")
    return modes.index(mode)


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
    unchanged), the new labels are written, and the new sizes are published last (`_grow`): safe while
    other processes read, write and grow the store. Returns the labels actually added per dimension.
    """
    wanted = {"algo": algos, "task": tasks, "bound": bounds, "seed": seeds}
    cleaned = {dim: clean_labels(dim, new) for dim, new in wanted.items() if len(new)}
    added: dict[str, list[Any]] = {}
    with grid_lock(path):
        coords = read_coords(open_group(path, mode="r"))
        fresh_labels: dict[str, list[Any]] = {}
        for dim, clean in cleaned.items():
            have = coords[dim]
            if dim == "bound":
                fresh = [v for v in clean if not same_bound(have, v).any()]
            else:
                have_str = set(have.astype(str).tolist())
                fresh = [v for v in clean if str(v) not in have_str]
            if fresh:
                fresh_labels[dim] = fresh
                added[dim] = [v.item() if hasattr(v, "item") else v for v in fresh]
        if fresh_labels:
            _grow(path, labels=fresh_labels)
    return added


def grow_store(path: PathLike, *, n_iterates: int = 0, n_episodes: int = 0,
               iterate_vars: Sequence[str] = (), means_only_flags: bool = False) -> bool:
    """Make room for at least `n_iterates` iterates and `n_episodes` episode slots, and add missing
    per-iterate variables (and, with `means_only_flags`, the means-only flags, all 0), without rewriting
    any chunk (arrays are resized; new slots are NaN).

    Safe while other processes read, write and grow the same store (under the store's grid lock; the new
    sizes are published last, see `_grow`); writers that hold a `CubeWriter` call `refresh()` afterwards.
    Returns whether anything changed."""
    check_grid_size(n_iterates=n_iterates, n_episodes=n_episodes)
    for name in iterate_vars:
        check_iterate_var_name(name)
    with grid_lock(path):
        group = open_group(path, mode="r")
        sizes = published_sizes(path) or {}
        counts = {d: n for d, n in (("iterate", n_iterates), ("episode", n_episodes)) if n > sizes.get(d, 0)}
        missing = [name for name in dict.fromkeys(iterate_vars) if name not in group]
        flags = means_only_flags and MEANS_ONLY not in group and LEGACY_MEANS_ONLY not in group
        if not counts and not missing and not flags:
            return False
        _grow(path, counts=counts, new_vars=missing, means_only_flags=flags)
    return True




def check_grid_size(*, n_iterates: int = 0, n_episodes: int = 0, chunk_iterates: int | None = None,
                    chunk_episodes: int | None = None, n_modes: int = len(MODES)) -> None:
    """CubeError (one line naming the value and the limit) for a grid no store should hold: more iterates
    or episode slots than MAX_ITERATES / MAX_EPISODE_SLOTS, or reward/cost chunks above MAX_CHUNK_BYTES."""
    limits = (("iterates", n_iterates, MAX_ITERATES), ("episode slots", n_episodes, MAX_EPISODE_SLOTS))
    for what, value, limit in limits:
        if not 0 <= int(value) <= limit:
            raise CubeError(f"{int(value):,} {what} is beyond the limit of {limit:,} per store: "
                            "check the iterate / episode counts (env steps are not iterates)")
    chunk = (chunk_iterates or n_iterates) * (chunk_episodes or n_episodes) * n_modes * 4
    if chunk > MAX_CHUNK_BYTES:
        raise CubeError(f"one run's reward/cost chunk would hold {chunk / 2**20:,.0f} MiB (limit "
                        f"{MAX_CHUNK_BYTES / 2**20:,.0f} MiB): pass chunk_iterates / chunk_episodes to split it")


def check_iterate_var_name(name: str) -> None:
    """CubeError if `name` cannot be a per-iterate variable (a dimension or one of the cube's own arrays)."""
    reserved = ("reward", "cost", "run_status", "run_manifest", WRITE_SEQ, MEANS_ONLY, LEGACY_MEANS_ONLY)
    if name in DIMS or name in reserved or not name.isidentifier():
        raise CubeError(f"{name!r} is a reserved or invalid name; choose another name for a per-iterate variable")


def _grow(path: PathLike, *, labels: dict[str, list[Any]] | None = None, counts: dict[str, int] | None = None,
          new_vars: Sequence[str] = (), means_only_flags: bool = False) -> None:
    """Grow the grid under the grid lock, all-or-nothing for readers: append `labels` along run dims, make
    `counts` (iterate / episode) the new sizes, add the per-iterate variables `new_vars` (and the means-only
    flags with `means_only_flags`), each in one rename (`_add_array`).

    Every array (coordinates included) is resized to the new sizes and the new labels are written while
    readers still see the published sizes (`cube.store.gridview.GridView`); publishing the new sizes is one
    atomic rename at the end. A grower killed before that leaves arrays longer than published: nobody sees
    them, and this function, run next, resizes every array to the sizes it publishes (cutting such
    leftovers back, where it grows less), so the store never stays half-grown."""
    raw = zarr.open_group(Path(path), mode="r+")  # the plain store: growers see (and fix) every real shape
    published = published_sizes(path)
    if published is None:
        raise CubeError(f"{path} has no readable coordinate arrays; restore it from a copy")
    if GRID_ATTR not in raw.attrs:
        publish(path, published)  # a store from before the published grid: publish what readers see now
    sizes: Sizes = dict(published)
    for dim, fresh in (labels or {}).items():
        sizes[dim] = published[dim] + len(fresh)
    for dim, n in (counts or {}).items():
        sizes[dim] = max(published[dim], int(n))
    for name in list(raw.array_keys()):
        arr = raw[name]
        dims = tuple(arr.metadata.dimension_names or ())
        if len(dims) != arr.ndim or not set(dims) <= set(sizes):
            continue  # not an array of the grid (a foreign extra): left as it is
        want = tuple(sizes[d] for d in dims)
        if arr.shape != want:
            arr.resize(want)
    for dim in DIMS:
        if sizes[dim] == published[dim]:
            continue
        coord = raw[dim]
        fresh = (labels or {}).get(dim)
        values = np.array(fresh if fresh is not None else range(published[dim], sizes[dim]),
                          dtype=object if dim in ("algo", "task") else None)
        coord[published[dim]:sizes[dim]] = values.astype(str if dim in ("algo", "task") else coord.dtype)
    run_shape = tuple(sizes[d] for d in RUN_DIMS)
    chunk_iterates = raw["cost"].chunks[len(RUN_DIMS)]
    for name in new_vars:
        if name not in raw:
            _add_array(path, name, lambda g, n=name: _create_iterate_var(g, n, (*run_shape, sizes["iterate"]),
                                                                          chunk_iterates))
    if means_only_flags and MEANS_ONLY not in raw and LEGACY_MEANS_ONLY not in raw:
        _add_array(path, MEANS_ONLY, lambda g: g.create_array(
            MEANS_ONLY, shape=(*run_shape, sizes["mode"]), chunks=(1, 1, 1, 1, sizes["mode"]), dtype="int8",
            fill_value=0, dimension_names=(*RUN_DIMS, "mode"), compressors=CHUNK_COMPRESSORS))
    publish(path, sizes)


def _add_array(path: PathLike, name: str, create: Callable[[zarr.Group], Any]) -> None:
    """Add an (empty) array to the store in one rename: made in a group of its own under `_locks`, then moved
    in, so a reader listing the store never meets its folder without its metadata."""
    staging = Path(tempfile.mkdtemp(prefix=".new-array-", dir=side_folder(Path(path) / "_locks")))
    try:
        create(zarr.open_group(staging, mode="w", zarr_format=3))
        os.rename(staging / name, Path(path) / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
