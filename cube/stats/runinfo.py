"""What a statistics pass carries beside the episodes' statistics: the runs' status (read in a thread of its
own while the pass runs), means-only flags and the synthetic flag (`cube.stats.suffstats`)."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import xarray as xr

from cube.schema import MEANS_ONLY, RUN_DIMS
from cube.stats.cache import STATUS_CACHE, cache_folder_ok
from cube.stats.fingerprint import files_fingerprint
from cube.store.chunkfiles import read_run_array
from cube.store.damage import reading_store
from cube.store.direct import array_dtype, cut_shape
from cube.store.fs import side_folder
from cube.store.grid import open_view


def read_status_meanwhile(path: Path, ds: xr.Dataset, cache: bool) -> Future | None:
    """`zarr_run_status` in a thread of its own, started before the pass: reading 1,440 one-run chunk files
    waits on the disk, which the pass's CPU work then hides (about 2 s of a cold paper-scale report).
    A status read before the episodes is never newer than them, so a run it calls complete is complete in
    the statistics too. None when there is no status to read that way."""
    if "run_status" not in ds or not path.is_dir():
        return None
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="saferl-status")
    try:
        return pool.submit(zarr_run_status, path, ds, cache)
    finally:
        pool.shutdown(wait=False)  # its thread ends with this one read


def attach_run_info(ss: xr.Dataset, ds: xr.Dataset, status: Future | None = None) -> xr.Dataset:
    """Carry the cube's run_status (from `status`, a `_read_status_meanwhile`, when it read one), `means_only`
    flags and `synthetic` flag (not cached: they change without new episodes)."""
    if "run_status" in ds:
        values = status.result() if status is not None else None
        with reading_store(ds.encoding.get("saferl_source"), "read the runs' status"):
            ss["run_status"] = values if values is not None else ds["run_status"].transpose(*RUN_DIMS).load()
    if MEANS_ONLY in ds:
        ss[MEANS_ONLY] = ds[MEANS_ONLY].transpose(*RUN_DIMS, "mode").load().astype(bool)
    ss.attrs["synthetic"] = bool(ds.attrs.get("synthetic", False))
    if ds.attrs.get("imported_from"):
        ss.attrs["imported_from"] = str(ds.attrs["imported_from"])
    if isinstance(ds.attrs.get("means_notes"), dict):  # what an import's means are (a sliding window, ...)
        ss.attrs["means_notes"] = dict(ds.attrs["means_notes"])
    return ss


def zarr_run_status(path: Path, ds: xr.Dataset, cache: bool = True) -> xr.DataArray | None:
    """run_status read straight from its chunk files (`cube.store.chunkfiles.read_run_array`; else by zarr in
    one concurrent call: one chunk per run makes dask's per-chunk tasks several times slower, and zarr's event
    loop is a third thread of Python beside the pass's two); None when the store does not hold it as a plain
    (algo, task, bound, seed) array.

    The values are kept in `_derived/run_status.npz` keyed by the names, sizes and mtimes of the array's
    files (stat calls only), so an unchanged status is not decoded again chunk by chunk."""
    sizes = ds.encoding.get("saferl_grid")  # the grid `ds` was read with
    try:
        meta = json.loads((path / "run_status" / "zarr.json").read_bytes())  # its document: no zarr for a cached one
        shape, dtype = cut_shape(meta, sizes), array_dtype(meta)
        if tuple(meta.get("dimension_names") or ()) != RUN_DIMS or shape is None or dtype is None:
            return None
        key = files_fingerprint(path, "run_status")
        values = _cached_status(path, key, shape) if cache else None
        if values is None:
            values = read_run_array(path, "run_status", sizes)  # straight from its files
            if values is None or values.shape != shape or values.dtype != dtype:
                values = np.asarray(open_view(path, sizes)["run_status"][:])  # another layout, or a chunk that
                # does not verify: zarr judges it
            if cache:
                _save_status(path, key, values)
    except Exception:  # not a Zarr v3 array: let xarray read it
        return None
    return xr.DataArray(values, dims=RUN_DIMS, coords={d: ds[d].values for d in RUN_DIMS}, name="run_status")


def _status_digest(key: str, values: np.ndarray) -> str:
    return hashlib.sha256(f"{key}:{values.dtype.str}:{values.shape}:".encode() + values.tobytes()).hexdigest()[:32]


def _cached_status(path: Path, key: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """The cached run status if it is for these files and verifies (its digest); else None."""
    import zipfile

    if not cache_folder_ok(path):
        return None
    try:
        with np.load(path / STATUS_CACHE) as z:
            values = z["values"]
            if str(z["key"]) == key and values.shape == shape and str(z["digest"]) == _status_digest(key, values):
                return values
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
        pass
    return None


def _save_status(path: Path, key: str, values: np.ndarray) -> None:
    """Best effort (a read-only store is simply not cached); written to a temporary file, then renamed."""
    if not cache_folder_ok(path):
        return
    target = path / STATUS_CACHE
    tmp = target.with_name(f".run_status.{uuid.uuid4().hex[:8]}.npz")
    try:
        side_folder(target.parent)
        np.savez(tmp, key=np.array(key), values=values, digest=np.array(_status_digest(key, values)))
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)
