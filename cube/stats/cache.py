"""The statistics cache inside a store: `_derived/suffstats` (keyed by a fingerprint of the grid and
one per run: size, mtime and tail of its reward and cost chunk files; stores not chunked one run per chunk
are keyed by all their episode files) and `_derived/run_status.npz`. Written as a store of its own and moved
in, so readers never see a partial cache; best effort (a read-only store is simply not cached).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import uuid
from pathlib import Path

import numpy as np
import xarray as xr
import zarr

from cube.schema import RUN_DIMS
from cube.stats.kernel import CELL_DIMS
from cube.store.fs import pid_alive, side_folder

CACHE_GROUP = "_derived/suffstats"
SUFFSTATS_VERSION = 1


# ------------------------------------------------------------------------------------------ cache
def grid_fingerprint(ds: xr.Dataset, kappa: np.ndarray) -> str:
    """Hash of the schema version, the kappa grid and every dimension's labels (the cache's shape)."""
    h = hashlib.sha256(f"v{SUFFSTATS_VERSION}".encode())
    h.update(np.ascontiguousarray(kappa, dtype=np.float64).tobytes())
    for d in (*CELL_DIMS, "episode"):
        h.update(f"{d}:{[str(v) for v in ds[d].values]};".encode())
    return h.hexdigest()[:32]


def _stat_key(path: Path) -> bytes:
    """Size, mtime and last 8 bytes of a chunk file. The tail holds the chunk's CRC-32C (stores written
    with checksums) or the end of its compressed stream, so a change that keeps the size and restores
    the mtime (`touch -r`) still changes the key."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            f.seek(max(st.st_size - 8, 0))
            tail = f.read(8)
    except FileNotFoundError:
        return b"-"
    return f"{st.st_size}:{st.st_mtime_ns}:".encode() + tail


def _one_run_chunks(path: Path, ds: xr.Dataset) -> bool:
    """Whether reward and cost are stored one run per chunk with '/'-separated default chunk keys."""
    for name in ("reward", "cost"):
        try:
            meta = json.loads((path / name / "zarr.json").read_text())
            shape = meta["chunk_grid"]["configuration"]["chunk_shape"]
            enc = meta["chunk_key_encoding"]
        except (OSError, KeyError, ValueError):
            return False
        full = [ds.sizes[d] for d in ("iterate", "episode", "mode")]
        sharded = any(c.get("name") == "sharding_indexed" for c in meta.get("codecs", []))
        if (shape[:4] != [1, 1, 1, 1] or shape[4:] != full or sharded or enc.get("name") != "default"
                or enc.get("configuration", {}).get("separator", "/") != "/"
                or meta.get("dimension_names") != [*RUN_DIMS, "iterate", "episode", "mode"]):
            return False
    return True


def run_fingerprints(path: Path, ds: xr.Dataset) -> np.ndarray | None:
    """Per run (algo, task, bound, seed): uint64 hash of the size and mtime of its reward and cost chunk
    files; None when the store is not chunked one run per chunk (then the whole store is hashed)."""
    if not _one_run_chunks(path, ds):
        return None
    shape = tuple(ds.sizes[d] for d in RUN_DIMS)
    out = np.empty(shape, dtype=np.uint64)
    tail = "/".join("0" * 3)
    for idx in np.ndindex(*shape):
        key = "/".join(map(str, idx)) + "/" + tail
        h = hashlib.blake2b(_stat_key(path / "reward" / "c" / key) + b"|" + _stat_key(path / "cost" / "c" / key),
                            digest_size=8)
        out[idx] = int.from_bytes(h.digest(), "little")
    return out


def store_fingerprint(path: Path) -> str:
    """Hash of the names, sizes and mtimes of every file of the reward and cost arrays."""
    h = hashlib.sha256()
    for name in ("reward", "cost"):
        _hash_files(h, path, name)
    return h.hexdigest()[:32]


def _hash_files(h, path: Path, name: str) -> None:
    """Feed the relative names, sizes and mtimes of the files below path/name into the hash h."""
    for root, _dirs, files in sorted(os.walk(path / name)):
        for f in sorted(files):
            full = os.path.join(root, f)
            h.update(f"{os.path.relpath(full, path)}:".encode() + _stat_key(Path(full)) + b";")


def read_cache(path: Path) -> xr.Dataset | None:
    wait_for_cache_writes(path)
    if not (path / CACHE_GROUP / "zarr.json").exists():
        return None
    try:
        cached = xr.open_zarr(path, group=CACHE_GROUP, consolidated=False, chunks=None).load()
    except Exception:  # a broken or half-replaced cache is simply recomputed
        return None
    return cached.assign_coords({d: np.array([str(v) for v in cached[d].values]) for d in ("algo", "task", "mode")})


def write_cache(path: Path, ss: xr.Dataset, attrs: dict[str, str], run_fp: np.ndarray | None) -> None:
    """Write the cache to a temporary group, then swap it in, so readers never see a partial cache.

    Best effort: a read-only store or a concurrent writer just leaves the cache as it is.
    """
    out = ss.drop_vars(["run_status", "run_fp"], errors="ignore")
    if run_fp is not None:
        out["run_fp"] = (RUN_DIMS, run_fp)
    out.attrs = dict(attrs)
    for name in ("algo", "task", "mode"):
        out[name] = out[name].astype(object)
        out[name].encoding = {}
    _remove_dead_writers_leftovers(path)
    tmp_group = f"{CACHE_GROUP}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    target, tmp, trash = path / CACHE_GROUP, path / tmp_group, path / f"{tmp_group}.old"
    try:
        # One chunk per algorithm: few, large chunks read back several times faster than zarr's default.
        enc = {v: {"chunks": (1, *out[v].shape[1:])} for v in out.data_vars if out[v].ndim >= len(CELL_DIMS)}
        # Written as a store of its own, then moved in as the group: written as a group of the cube, zarr
        # would touch the cube's root metadata (a transient file that readers listing the cube meanwhile
        # warn about on stderr, where the TUI draws).
        side_folder(target.parent)
        out.to_zarr(tmp, mode="w", consolidated=False, encoding=enc)
        if target.exists():
            os.replace(target, trash)
        os.replace(tmp, target)
    except OSError:
        pass
    finally:
        for leftover in (tmp, trash):
            shutil.rmtree(leftover, ignore_errors=True)


def _remove_dead_writers_leftovers(path: Path) -> None:
    """Remove temporary cache groups left by cache writers that were killed (their pid is gone)."""
    for leftover in (path / CACHE_GROUP).parent.glob(f"{Path(CACHE_GROUP).name}.tmp-*"):
        pid = leftover.name.split(".tmp-", 1)[1].split("-", 1)[0]
        if not pid.isdigit() or not pid_alive(int(pid)):
            shutil.rmtree(leftover, ignore_errors=True)


_PENDING_WRITES: dict[Path, threading.Thread] = {}


def write_cache_in_background(path: Path, ss: xr.Dataset, attrs: dict[str, str], run_fp: np.ndarray | None) -> None:
    """`write_cache` in a (non-daemon) thread, so the caller works on the statistics meanwhile; the
    next cache read of the store, `wait_for_cache_writes` and interpreter exit wait for it. The
    statistics are not modified in place by anyone, so the writer can share their arrays."""
    wait_for_cache_writes(path)
    out = ss.copy(deep=False)

    def write() -> None:
        try:
            write_cache(path, out, attrs, run_fp)
        except Exception:  # best effort, as write_cache itself: a cache that is not written is recomputed
            pass

    thread = threading.Thread(target=write, name=f"saferl-cache-write:{path.name}")
    _PENDING_WRITES[path.resolve()] = thread
    thread.start()


def wait_for_cache_writes(path: Path | None = None) -> None:
    """Wait until the background cache writes of `path` (of every store if None) are on disk."""
    keys = list(_PENDING_WRITES) if path is None else [Path(path).resolve()]
    for key in keys:
        thread = _PENDING_WRITES.pop(key, None)
        if thread is not None:
            thread.join()


STATUS_CACHE = "_derived/run_status.npz"


def zarr_run_status(path: Path, ds: xr.Dataset, cache: bool = True) -> xr.DataArray | None:
    """run_status read by zarr in one concurrent call (one chunk per run makes dask's per-chunk tasks
    several times slower); None when the store does not hold it as a plain (algo, task, bound, seed) array.

    The values are kept in `_derived/run_status.npz` keyed by the names, sizes and mtimes of the array's
    files (stat calls only), so an unchanged status is not decoded again chunk by chunk."""
    try:
        arr = zarr.open_array(path / "run_status", mode="r")
        if tuple(arr.metadata.dimension_names or ()) != RUN_DIMS:
            return None
        key = _files_fingerprint(path, "run_status")
        values = _cached_status(path, key, arr.shape) if cache else None
        if values is None:
            values = np.asarray(arr[:])
            if cache:
                _save_status(path, key, values)
    except Exception:  # not a Zarr v3 array: let xarray read it
        return None
    return xr.DataArray(values, dims=RUN_DIMS, coords={d: ds[d].values for d in RUN_DIMS}, name="run_status")


def _files_fingerprint(path: Path, name: str) -> str:
    h = hashlib.sha256()
    _hash_files(h, path, name)
    return h.hexdigest()[:32]


def _cached_status(path: Path, key: str, shape: tuple[int, ...]) -> np.ndarray | None:
    try:
        with np.load(path / STATUS_CACHE) as z:
            if str(z["key"]) == key and z["values"].shape == shape:
                return z["values"]
    except (OSError, KeyError, ValueError):
        pass
    return None


def _save_status(path: Path, key: str, values: np.ndarray) -> None:
    """Best effort (a read-only store is simply not cached); written to a temporary file, then renamed."""
    target = path / STATUS_CACHE
    tmp = target.with_name(f".run_status.{uuid.uuid4().hex[:8]}.npz")
    try:
        side_folder(target.parent)
        np.savez(tmp, key=np.array(key), values=values)
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)
