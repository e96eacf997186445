"""Sufficient statistics of the episode cube: the one dask pass over a store, kept current through its cache.

For every (algo, task, bound, seed, iterate, mode) cell the pass computes the statistics of
`cube.stats.kernel` (counts, sums, violations, overshoot and CDF counts). Through the cache
(`cube.stats.cache`), after new episodes are written only the runs that changed are recomputed (all of
them when the grid changed, or when more than half the runs did); the patched cache is written back once
more than WRITE_BACK_FRACTION of the runs differ from it. Runs a writer wrote while the pass read them are
recomputed from a consistent read (`cube.store.locks.StillRunReader`), so a report never mixes two writes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import xarray as xr

from cube.compute import Progress, compute
from cube.errors import CubeError
from cube.schema import MEANS_ONLY, RUN_DIMS
from cube.stats.cache import (
    grid_fingerprint,
    read_cache,
    run_fingerprints,
    store_fingerprint,
    write_cache,
    write_cache_in_background,
    zarr_run_status,
)
from cube.stats.kernel import CELL_DIMS, SUM_VARS, BadEpisodes, cell_stats, kappa_grid
from cube.store.locks import StillRunReader, read_write_seqs, runs_written_since
from cube.store.read import damaged_store_error, open_cube

# A patched cache is written back only when more than this share of runs changed: re-patching a few
# runs costs milliseconds, rewriting the cache (hundreds of MB at the paper's scale) seconds.
WRITE_BACK_FRACTION = 0.02


def _locator(labels: dict[str, np.ndarray], origin: tuple[int, ...]) -> Callable[[tuple[int, ...]], str]:
    """index (a, t, b, s, j, e, m) relative to `origin` -> 'algo=.. task=.. bound=.. seed=.. iterate=.. mode=..'."""
    def where(idx: tuple[int, ...]) -> str:
        idx = (0,) * (len(origin) - len(idx)) + tuple(idx)  # a one-run block has no run dims
        pos = [o + i for o, i in zip(origin, idx, strict=True)]
        names = (*RUN_DIMS, "iterate", "episode", "mode")
        return " ".join(f"{n}={labels[n][p]}" for n, p in zip(names, pos, strict=False) if n != "episode")
    return where


def _map_block(r: np.ndarray, c: np.ndarray, d: np.ndarray, kappa: np.ndarray, labels: dict[str, np.ndarray],
               origin: tuple[int, ...], le_dtype: type,
               written: Callable[[tuple[int, ...]], bool] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One dask task: the (..., M, 6) float64 sums and (..., M, G) CDF counts of a block of episodes
    (..., E, M) whose first element sits at `origin` in the cube.

    `written(run position)` tells whether a run was written while the pass read it (`WrittenSince`):
    bad values in such a run are a reader's torn view, not a broken cube, so the run is left out here
    (all zero) and recomputed from a consistent read afterwards; elsewhere they are a one-line error."""
    while True:
        try:
            cells, rows, sums, le = cell_stats(r, c, d, kappa, _locator(labels, origin))
            break
        except BadEpisodes as exc:
            run_dims = r.ndim - 3  # 4 for blocks of runs, 0 for one run's (J, E, M)
            if written is None or exc.block_index is None:
                raise
            run = tuple(o + i for o, i in zip(origin[:4], (*exc.block_index[:run_dims], 0, 0, 0, 0), strict=False))
            if not written(run):
                raise
            r, c = np.array(r, copy=True), np.array(c, copy=True)
            blank = exc.block_index[:run_dims]
            r[blank], c[blank] = np.nan, np.nan
    out_sums = np.zeros((int(np.prod(cells)), len(SUM_VARS)), dtype=np.float64)
    out_le = np.zeros((out_sums.shape[0], kappa.size), dtype=le_dtype)
    out_sums[rows] = sums
    out_le[rows] = le
    return out_sums.reshape(*cells, len(SUM_VARS)), out_le.reshape(*cells, kappa.size)


class WrittenSince:
    """Picklable test for `_map_block`: was the run at a position written since `before` (the writers'
    seqlock read before the pass; see `cube.store.layout.read_write_seqs`)?"""

    def __init__(self, path: Path, before: np.ndarray) -> None:
        self.path, self.before = str(path), before

    def __call__(self, run: tuple[int, ...]) -> bool:
        now = read_write_seqs(self.path)
        return now is not None and bool(runs_written_since(self.before[run][None], now[run][None]))


def _episodes(ds: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray]:
    missing = [v for v in ("reward", "cost") if v not in ds]
    if missing:
        raise CubeError(f"the cube has no {' or '.join(missing)} variable: is this a saferl results cube?")
    dims = (*RUN_DIMS, "iterate", "episode", "mode")
    try:
        return ds["reward"].transpose(*dims), ds["cost"].transpose(*dims)
    except ValueError:
        raise CubeError(f"reward/cost must have dims {dims}, found {ds['cost'].dims}") from None


def _check_bounds(ds: xr.Dataset) -> np.ndarray:
    bounds = np.asarray(ds["bound"].values, dtype=np.float64)
    if np.any(~(bounds > 0)):
        raise CubeError(f"safety bounds must be > 0 (found {bounds[~(bounds > 0)].tolist()}): "
                        "fix the cube's bound labels")
    return bounds


def _le_dtype(n_episodes: int) -> type:
    """CDF counts never exceed the episode slots E: uint16 when E fits (halves the cache), else int32."""
    return np.uint16 if n_episodes <= np.iinfo(np.uint16).max else np.int32


def compute_suffstats(ds: xr.Dataset, kappa: np.ndarray | None = None, progress: Progress | None = None,
                      written: Callable[[tuple[int, ...]], bool] | None = None) -> xr.Dataset:
    """One pass over the episodes of `ds` -> in-memory sufficient statistics (see module docstring).

    One dask task per block of runs and iterates (all episodes and modes of them), returning that
    block's sums and CDF counts, which are then copied into place."""
    kappa = kappa_grid(kappa)
    bounds = _check_bounds(ds)
    reward, cost = _episodes(ds)
    r = da.asarray(reward.data).rechunk({5: -1, 6: -1})
    c = da.asarray(cost.data).rechunk(r.chunks)
    r_blocks, c_blocks = r.to_delayed(), c.to_delayed()
    starts = [np.concatenate([[0], np.cumsum(ch)[:-1]]) for ch in r.chunks[:5]]
    labels, le_dtype = _labels(ds), _le_dtype(ds.sizes["episode"])
    tasks, places = [], []
    for idx in np.ndindex(*r.numblocks[:5]):
        origin = tuple(int(starts[k][i]) for k, i in enumerate(idx))
        place = tuple(slice(o, o + r.chunks[k][i]) for k, (o, i) in enumerate(zip(origin, idx, strict=True)))
        d = bounds[place[2]].reshape(1, 1, -1, 1, 1, 1, 1)  # broadcasts against the block (..., E, M)
        tasks.append(dask.delayed(_map_block)(r_blocks[(*idx, 0, 0)], c_blocks[(*idx, 0, 0)], d, kappa, labels,
                                              (*origin, 0, 0), le_dtype, written))
        places.append(place)
    sums = np.empty((*r.shape[:5], r.shape[6], len(SUM_VARS)), dtype=np.float64)
    le = np.empty((*r.shape[:5], r.shape[6], kappa.size), dtype=le_dtype)
    for place, (block_sums, block_le) in zip(places, _read(tasks, progress, ds.encoding.get("saferl_source")),
                                             strict=True):
        sums[place], le[place] = block_sums, block_le
    return _to_dataset(sums, le, ds, kappa)


def _to_dataset(sums: np.ndarray, le: np.ndarray, ds: xr.Dataset, kappa: np.ndarray) -> xr.Dataset:
    """(A, T, B, S, J, M, 6) sums and (A, T, B, S, J, M, G) counts -> the suffstats Dataset."""
    coords = {d: ds[d].values for d in CELL_DIMS}
    data = {v: (CELL_DIMS, np.ascontiguousarray(sums[..., i])) for i, v in enumerate(SUM_VARS)}
    data["le"] = ((*CELL_DIMS, "kappa"), le)
    ss = xr.Dataset(data, coords={**coords, "kappa": kappa})
    for v in ("n_r", "n", "n_viol"):
        ss[v] = ss[v].astype(np.int64)
    return ss


def _labels(ds: xr.Dataset) -> dict[str, np.ndarray]:
    return {d: ds[d].values for d in (*RUN_DIMS, "iterate", "episode", "mode")}


def _read(thing, progress: Progress | None, source: str | None = None):
    """compute(thing) with unreadable data (a corrupt or missing chunk) turned into one CubeError line
    naming the damaged chunk and its run when `source` (the store) is known."""
    try:
        return compute(thing, progress)
    except Exception as exc:  # codec, I/O and shape errors of a damaged store all end here
        raise damaged_store_error(exc, source) from None


def _update_runs(ss: xr.Dataset, ds: xr.Dataset, runs: np.ndarray, progress: Progress | None,
                 written: Callable[[tuple[int, ...]], bool] | None = None) -> xr.Dataset:
    """Recompute the statistics of the runs at positions `runs` ((n, 4) indices) in place; returns ss."""
    kappa, bounds = ss["kappa"].values, _check_bounds(ds)
    reward, cost = _episodes(ds)
    r, c = da.asarray(reward.data), da.asarray(cost.data)
    labels, le_dtype = _labels(ds), ss["le"].dtype
    tasks = [dask.delayed(_map_block)(r[tuple(i)], c[tuple(i)], bounds[i[2]], kappa, labels,
                                      (*map(int, i), 0, 0, 0), le_dtype, written) for i in runs]
    blocks = _read(tasks, progress, ds.encoding.get("saferl_source"))
    idx = tuple(runs.T)
    for f, v in enumerate(SUM_VARS):
        ss[v].values[idx] = np.stack([sums[..., f] for sums, _ in blocks])
    ss["le"].values[idx] = np.stack([le for _, le in blocks])
    return ss


def _from_cache(path: Path, ds: xr.Dataset, kappa: np.ndarray, progress: Progress | None,
                background: bool = False, written: Callable[[tuple[int, ...]], bool] | None = None) -> xr.Dataset:
    """Cached statistics brought up to date: reused, patched run by run, or recomputed; a cache write
    runs in a background thread when `background`."""
    write = write_cache_in_background if background else write_cache
    grid = grid_fingerprint(ds, kappa)
    run_fp = run_fingerprints(path, ds)  # taken before any data is read: a later write makes it stale
    attrs = {"grid": grid, "store": store_fingerprint(path) if run_fp is None else ""}
    cached = read_cache(path)
    if cached is not None and cached.attrs.get("grid") == grid:
        if run_fp is None and cached.attrs.get("store") == attrs["store"]:
            return cached.drop_vars("run_fp", errors="ignore")
        if run_fp is not None and "run_fp" in cached:
            stale = np.argwhere(cached["run_fp"].values != run_fp)
            if stale.shape[0] == 0:
                return cached.drop_vars("run_fp")
            if stale.shape[0] <= run_fp.size // 2:
                ss = _update_runs(cached.drop_vars("run_fp"), ds, stale, progress, written)
                if stale.shape[0] > WRITE_BACK_FRACTION * run_fp.size:
                    write(path, ss, attrs, run_fp)
                return ss
    ss = compute_suffstats(_open_for_full_pass(path, ds), kappa, progress, written)
    write(path, ss, attrs, run_fp)
    return ss


FULL_PASS_BLOCK_BYTES = 64 * 2**20


def _open_for_full_pass(path: Path, ds: xr.Dataset) -> xr.Dataset:
    """The cube with dask blocks of several seeds (<= FULL_PASS_BLOCK_BYTES per variable).

    Each dask task then fetches many one-run store chunks in one zarr read, which zarr decodes
    concurrently: about half the time of one task per chunk (bench/report_speed.py).
    """
    run_bytes = ds.sizes["iterate"] * ds.sizes["episode"] * ds.sizes["mode"] * ds["cost"].dtype.itemsize
    seeds = int(max(1, min(ds.sizes["seed"], FULL_PASS_BLOCK_BYTES // max(run_bytes, 1))))
    if seeds == 1 or not path.is_dir():
        return ds
    return open_cube(path, chunks={"seed": seeds})



def load_suffstats(source: str | os.PathLike | xr.Dataset, progress: Progress | None = None,
                   kappa: np.ndarray | None = None, cache: bool = True,
                   background_write: bool = False) -> xr.Dataset:
    """Sufficient statistics for a cube path or Dataset; cached in Zarr stores (see module docstring).

    Returns an in-memory Dataset with dims (algo, task, bound, seed, iterate, mode[, kappa]).
    In a Zarr store chunked one run per chunk, only runs whose chunk files changed since the cache
    was written are recomputed. `progress(done, total)` is called as dask tasks finish. With
    `background_write`, a new or patched cache is written by a background thread while the caller goes
    on (a second of the paper-scale report); `wait_for_cache_writes()` waits for it, and so does exit.
    """
    kappa = kappa_grid(kappa)
    if isinstance(source, xr.Dataset):
        return _attach_run_info(compute_suffstats(source, kappa, progress), source)
    path = Path(source)
    ds = open_cube(path)
    before = read_write_seqs(path)  # the writers' seqlock, read before any episode
    written = WrittenSince(path, before) if before is not None else None
    if cache and path.is_dir():
        ss = _from_cache(path, ds, kappa, progress, background_write, written)
    else:
        ss = compute_suffstats(_open_for_full_pass(path, ds), kappa, progress, written)
    if before is not None:
        ss = _settle_written_runs(ss, path, ds, before)
    return _attach_run_info(ss, ds, path if path.is_dir() else None, cache)


def _settle_written_runs(ss: xr.Dataset, path: Path, ds: xr.Dataset, before: np.ndarray) -> xr.Dataset:
    """Recompute, from a consistent read, the runs a writer wrote while they were being read (their write
    sequence moved or was odd): so a report never mixes the rewards of one write with the costs of
    another. A cache written meanwhile holds such a run under its older fingerprint and is patched next time."""
    dirty = runs_written_since(before, read_write_seqs(path))
    if not dirty:
        return ss
    reader = StillRunReader(path)
    kappa, bounds, labels = ss["kappa"].values, _check_bounds(ds), _labels(ds)
    ss = ss.copy(deep=True)
    for index in dirty:
        reward, cost = reader.read(index)
        sums, le = _map_block(reward, cost, bounds[index[2]], kappa, labels, (*index, 0, 0, 0), ss["le"].dtype)
        for f, v in enumerate(SUM_VARS):
            ss[v].values[index] = sums[..., f]
        ss["le"].values[index] = le
    return ss


def _attach_run_info(ss: xr.Dataset, ds: xr.Dataset, path: Path | None = None, cache: bool = False) -> xr.Dataset:
    """Carry the cube's run_status, `means_only` flags and `synthetic` flag (not cached: they change
    without new episodes)."""
    if "run_status" in ds:
        status = zarr_run_status(path, ds, cache) if path is not None else None
        ss["run_status"] = status if status is not None else ds["run_status"].transpose(*RUN_DIMS).load()
    if MEANS_ONLY in ds:
        ss[MEANS_ONLY] = ds[MEANS_ONLY].transpose(*RUN_DIMS, "mode").load().astype(bool)
    ss.attrs["synthetic"] = bool(ds.attrs.get("synthetic", False))
    if ds.attrs.get("imported_from"):
        ss.attrs["imported_from"] = str(ds.attrs["imported_from"])
    return ss
