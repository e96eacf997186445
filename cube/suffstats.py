"""Sufficient statistics of the episode cube: one dask pass, cached in the store.

For every (algo, task, bound, seed, iterate, mode) cell, with costs c_i and rewards r_i of the episodes
present (NaN = no episode) and bound d:

    n_r      = #{i: r_i not NaN}               sum_r    = sum_i r_i
    n        = #{i: c_i not NaN}               sum_c    = sum_i c_i
    n_viol   = #{i: c_i > d}                   sum_over = sum_i (c_i - d)^+
    le[g]    = #{i: (c_i - d) / d <= kappa[g]}   (dim `kappa`, the empirical-CDF counts)

Sums are float64 accumulations of the float32 episodes; counts are exact. Every paper metric and CDF is a
function of these. The result is cached in a Zarr store under the group `_derived/suffstats`, keyed by a
fingerprint of the episode arrays' files and the kappa grid, and recomputed when they change.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import xarray as xr
from dask.callbacks import Callback

from cube.errors import CubeError
from cube.store import open_cube

RUN_DIMS = ("algo", "task", "bound", "seed")
CELL_DIMS = (*RUN_DIMS, "iterate", "mode")
SUM_VARS = ("n_r", "sum_r", "n", "sum_c", "n_viol", "sum_over")
CACHE_GROUP = "_derived/suffstats"
SUFFSTATS_VERSION = 1
Progress = Callable[[int, int], None]


def default_kappa() -> np.ndarray:
    """Default CDF grid of normalized cost deviations: step 0.025 on [-1, 3], then a sparse tail to 100."""
    fine = np.round(np.linspace(-1.0, 3.0, 161), 6)
    tail = np.array([3.5, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 50.0, 100.0])
    return np.concatenate([fine, tail])


def _block_stats(reward: np.ndarray, cost: np.ndarray, d: np.ndarray, kappa: np.ndarray) -> np.ndarray:
    """Per-cell statistics of one block.

    reward, cost: (..., E) episodes last; d: bounds broadcastable to (..., 1); kappa: (G,) sorted.
    Returns (..., 6 + G) float64: SUM_VARS then le[0..G-1].
    """
    r = reward.astype(np.float64)
    c = cost.astype(np.float64)
    has_c = ~np.isnan(c)
    viol = c > d  # NaN compares False
    fields = [
        (~np.isnan(r)).sum(-1),
        np.nansum(r, -1),
        has_c.sum(-1),
        np.nansum(c, -1),
        viol.sum(-1),
        np.where(viol, c - d, 0.0).sum(-1),
    ]
    g = kappa.size
    x = (c - d) / d
    # idx = number of grid points strictly below x; the episode counts at every g >= idx.
    idx = np.where(has_c, np.searchsorted(kappa, x, side="left"), g)
    rows = int(np.prod(idx.shape[:-1]))
    flat = (np.arange(rows).reshape(idx.shape[:-1] + (1,)) * (g + 1) + idx).ravel()
    hist = np.bincount(flat, minlength=rows * (g + 1)).reshape(rows, g + 1)
    le = np.cumsum(hist, axis=1)[:, :g].reshape(idx.shape[:-1] + (g,))
    out = np.concatenate([np.stack(fields, -1), le.astype(np.float64)], axis=-1)
    return out


def _map_block(r, c, *, bounds: np.ndarray, kappa: np.ndarray, block_info=None) -> np.ndarray:
    lo, hi = block_info[0]["array-location"][2]
    d = bounds[lo:hi].reshape(1, 1, -1, 1, 1, 1, 1)
    return _block_stats(r, c, d, kappa)


class _DaskProgress(Callback):
    """Report finished dask tasks to a `progress(done, total)` callable."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self._progress = progress
        self._done = 0
        self._total = 0

    def _start_state(self, dsk, state) -> None:
        self._total = sum(len(state[k]) for k in ("ready", "waiting", "running", "finished"))
        self._progress(0, self._total)

    def _posttask(self, key, result, dsk, state, worker_id) -> None:
        self._done += 1
        self._progress(self._done, self._total)


def _episodes(ds: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray]:
    missing = [v for v in ("reward", "cost") if v not in ds]
    if missing:
        raise CubeError(f"the cube has no {' or '.join(missing)} variable: is this a saferl results cube?")
    dims = (*RUN_DIMS, "iterate", "mode", "episode")
    try:
        return ds["reward"].transpose(*dims), ds["cost"].transpose(*dims)
    except ValueError:
        raise CubeError(f"reward/cost must have dims {dims}, found {ds['cost'].dims}") from None


def compute_suffstats(ds: xr.Dataset, kappa: np.ndarray | None = None, progress: Progress | None = None) -> xr.Dataset:
    """One pass over the episodes of `ds` -> in-memory sufficient statistics (see module docstring)."""
    kappa = default_kappa() if kappa is None else np.asarray(kappa, dtype=np.float64)
    if kappa.ndim != 1 or kappa.size == 0 or np.any(np.diff(kappa) <= 0):
        raise CubeError("the kappa grid must be a non-empty, strictly increasing 1-D list of numbers")
    bounds = np.asarray(ds["bound"].values, dtype=np.float64)
    if np.any(~(bounds > 0)):
        raise CubeError(f"safety bounds must be > 0 (found {bounds[~(bounds > 0)].tolist()}): fix the cube's bound labels")
    reward, cost = _episodes(ds)
    r = da.asarray(reward.data).rechunk({6: -1})
    c = da.asarray(cost.data).rechunk(r.chunks)
    nf = len(SUM_VARS) + kappa.size
    out = da.map_blocks(_map_block, r, c, bounds=bounds, kappa=kappa, dtype=np.float64,
                        chunks=(*r.chunks[:6], (nf,)))
    with dask.config.set(scheduler="threads"), _DaskProgress(progress) if progress else nullcontext():
        arr = np.asarray(out.compute())
    coords = {d: ds[d].values for d in CELL_DIMS}
    data = {v: (CELL_DIMS, arr[..., i]) for i, v in enumerate(SUM_VARS)}
    data["le"] = ((*CELL_DIMS, "kappa"), arr[..., len(SUM_VARS):].astype(np.int32))
    ss = xr.Dataset(data, coords={**coords, "kappa": kappa})
    for v in ("n_r", "n", "n_viol"):
        ss[v] = ss[v].astype(np.int64)
    return ss


def fingerprint(path: Path, kappa: np.ndarray) -> str:
    """Hash of the names, sizes and mtimes of the files that hold episodes and coords, plus the grid."""
    h = hashlib.sha256()
    h.update(f"v{SUFFSTATS_VERSION}".encode())
    h.update(np.ascontiguousarray(kappa, dtype=np.float64).tobytes())
    for name in ("reward", "cost", *CELL_DIMS, "episode"):
        top = path / name
        if not top.exists():
            continue
        for root, _dirs, files in sorted(os.walk(top)):
            for f in sorted(files):
                st = os.stat(os.path.join(root, f))
                h.update(f"{os.path.relpath(os.path.join(root, f), path)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:32]


def _read_cache(path: Path, fp: str) -> xr.Dataset | None:
    if not (path / CACHE_GROUP).exists():
        return None
    try:
        cached = xr.open_zarr(path, group=CACHE_GROUP, consolidated=False)
    except Exception:  # a broken cache is simply recomputed
        return None
    if cached.attrs.get("fingerprint") != fp:
        return None
    cached = cached.load()
    return cached.assign_coords({d: np.array([str(v) for v in cached[d].values]) for d in ("algo", "task", "mode")})


def _write_cache(path: Path, ss: xr.Dataset, fp: str) -> None:
    """Write the cache to a temporary group, then swap it in, so readers never see a partial cache.

    Best effort: a read-only store or a concurrent writer just leaves the cache as it is.
    """
    out = ss.drop_vars("run_status", errors="ignore")
    out.attrs = {"fingerprint": fp}
    for name in ("algo", "task", "mode"):
        out[name] = out[name].astype(object)
        out[name].encoding = {}
    tmp_group = f"{CACHE_GROUP}.tmp-{uuid.uuid4().hex[:8]}"
    target, tmp, trash = path / CACHE_GROUP, path / tmp_group, path / f"{tmp_group}.old"
    try:
        out.to_zarr(path, group=tmp_group, mode="w", consolidated=False)
        if target.exists():
            os.replace(target, trash)
        os.replace(tmp, target)
    except OSError:
        pass
    finally:
        for leftover in (tmp, trash):
            shutil.rmtree(leftover, ignore_errors=True)


def load_suffstats(source: str | os.PathLike | xr.Dataset, progress: Progress | None = None,
                   kappa: np.ndarray | None = None, cache: bool = True) -> xr.Dataset:
    """Sufficient statistics for a cube path or Dataset; cached in Zarr stores (see module docstring).

    Returns an in-memory Dataset with dims (algo, task, bound, seed, iterate, mode[, kappa]).
    `progress(done, total)` is called as dask tasks finish (not called on a cache hit).
    """
    kappa = default_kappa() if kappa is None else np.asarray(kappa, dtype=np.float64)
    if isinstance(source, xr.Dataset):
        return _attach_run_info(compute_suffstats(source, kappa, progress), source)
    path = Path(source)
    ds = open_cube(path)
    zarr_dir = path.is_dir() and cache
    fp = fingerprint(path, kappa) if zarr_dir else ""
    ss = _read_cache(path, fp) if zarr_dir else None
    if ss is None:
        ss = compute_suffstats(ds, kappa, progress)
        if zarr_dir:
            _write_cache(path, ss, fp)
    return _attach_run_info(ss, ds)


def _attach_run_info(ss: xr.Dataset, ds: xr.Dataset) -> xr.Dataset:
    """Carry the cube's run_status and `synthetic` flag (not cached: they change without new episodes)."""
    if "run_status" in ds:
        ss["run_status"] = ds["run_status"].transpose(*RUN_DIMS).load()
    ss.attrs["synthetic"] = bool(ds.attrs.get("synthetic", False))
    return ss
