"""What a statistics pass carries beside the episodes' statistics: the runs' status (read in a thread of its
own while the pass runs), means-only flags and the synthetic flag (`cube.stats.suffstats`)."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import xarray as xr

from cube.schema import MEANS_ONLY, RUN_DIMS
from cube.stats.cache import zarr_run_status
from cube.store.damage import reading_store


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
