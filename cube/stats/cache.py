"""The statistics cache inside a store: `_derived/suffstats` (keyed by a fingerprint of the grid and
one per run: size, mtime and tail of its reward and cost chunk files; stores not chunked one run per chunk
are keyed by all their episode files) and `_derived/run_status.npz`. Written whole as a store of its own and
moved in, so readers never see a partial cache; or patched run by run (`patch_cache`: the chunks of the
conditions whose runs changed, one (algo, task, bound) per chunk), statistics first and fingerprints last,
while readers read the fingerprints first. Best effort (a read-only store is simply not cached). The CVaRs
are kept for the alphas they were computed with (`cvar_alpha`: 0.1 and 0.05, and another one last asked for);
asking for an alpha the cache lacks recomputes the statistics once (`cube.stats.suffstats`).

Writers of the cache (whole or patched) hold `_derived/.suffstats.lock` and, under it, take the fingerprint
of every run they write again: a run written since its statistics were read keeps what the cache holds
(or an unknown fingerprint, never trusted), so no writer puts older statistics under a current fingerprint,
and a reader that mixes the fingerprints of one writer with the statistics of another still only trusts
statistics of the data its fingerprint names.

The cache is checked like the data: every chunk carries a CRC-32C (and every chunk is written, so no
value comes from a fill value), the dtypes and shapes it was written with are kept in its attributes, and
`run_status.npz` holds a digest of its values. A cache that does not verify is not used: the statistics
are computed again from the episodes, with one `CacheWarning` line. `_derived` is never followed when it
is a link (it would make the cache write, and delete, outside the store).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import xarray as xr
import zarr

from cube.errors import CubeError, CubeWarning
from cube.schema import RUN_DIMS
from cube.stats.bootstrap import StatsWarning
from cube.stats.suffvars import ALPHA_DIM, CELL_DIMS, STATS_VARS
from cube.store.chunking import layout_of
from cube.store.fs import pid_alive, refuse_links, side_folder
from cube.store.grid import open_view
from cube.store.layout import CHUNK_COMPRESSORS

CACHE_GROUP = "_derived/suffstats"
CACHE_LOCK = "_derived/.suffstats.lock"
SUFFSTATS_VERSION = 3
"""1: sums added pairwise (numpy); 2: in episode order, by both kernels (`cube.stats.fused`); 3: with the CVaRs
(`cvar_c`, dim `cvar_alpha`). A cache of another version is of another grid: recomputed, never misread."""
UNKNOWN_FP = np.uint64(0)
"""The fingerprint of a run whose cached statistics are of no known data (never equal to a real one but
with odds of 2^-64): written for a run that changed while its statistics were computed."""


class CacheWarning(CubeWarning, StatsWarning):
    """The statistics cache did not verify (or sits behind a link) and is not used (a StatsWarning too, so the
    commands that show the statistics' warnings show it)."""


def _cache_folder_ok(path: Path) -> bool:
    """Whether `_derived` (and the cache group) may be used: no link planted in their place (one warning)."""
    try:
        refuse_links(path, path / CACHE_GROUP)
    except CubeError as exc:
        warnings.warn(f"the statistics cache is not used: {exc}", CacheWarning, stacklevel=3)
        return False
    return True


def layout_digest(ds: xr.Dataset) -> str:
    """Hash of every variable's name, dtype and shape (coordinates included; strings as one kind): what the
    cache's metadata must still say when it is read back."""
    h = hashlib.sha256()
    for name in sorted(map(str, ds.variables)):
        var = ds.variables[name]
        kind = "str" if var.dtype.kind in "OUST" else var.dtype.str
        h.update(f"{name}:{kind}:{tuple(var.shape)};".encode())
    return h.hexdigest()[:32]


# ------------------------------------------------------------------------------------------ cache
def grid_fingerprint(ds: xr.Dataset | Mapping[str, np.ndarray], kappa: np.ndarray) -> str:
    """Hash of the schema version, the kappa grid and every dimension's labels (the cache's shape); `ds`: a
    Dataset or its coordinates (dim -> labels)."""
    h = hashlib.sha256(f"v{SUFFSTATS_VERSION}".encode())
    h.update(np.ascontiguousarray(kappa, dtype=np.float64).tobytes())
    for d in (*CELL_DIMS, "episode"):
        h.update(f"{d}:{[str(v) for v in np.asarray(ds[d])]};".encode())
    return h.hexdigest()[:32]


def _stat_key(path: str | Path) -> bytes:
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


class RunChunks:
    """Where a store keeps each run's reward and cost: one chunk file per run and array (stores before issue 37),
    or a chunk file per mode and block of iterates (`cube.store.chunking`; absent ones count as absent),
    located through zarr's own metadata of the two arrays (their chunk grid and chunk-key encoding). The one
    place the cache looks at a store's chunk files (to fingerprint them); `run_chunks` makes one where every
    chunk holds one run."""

    def __init__(self, path: Path, keys: Mapping[str, Callable[[tuple[int, ...]], str]],
                 blocks: tuple[int, int] = (1, 1)) -> None:
        self.path, self.keys, self.blocks = Path(path), dict(keys), blocks

    def files(self, index: tuple[int, ...]) -> list[Path]:
        """Every reward and cost chunk file the run at `index` (positions along the run dims) may have."""
        chunks = [(*(int(i) for i in index), k, 0, m) for k in range(self.blocks[0]) for m in range(self.blocks[1])]
        return [self.path / name / self.keys[name](chunk) for name in ("reward", "cost") for chunk in chunks]

    def fingerprint(self, index: tuple[int, ...]) -> np.uint64:
        """The run's fingerprint: a hash of the size, mtime and tail of its chunk files (`_stat_key`); in folders
        of chunk files (keys c/.../k/0/m), one listing per folder says which exist (absent ones: absent)."""
        if self.blocks == (1, 1) or "/" not in self.keys["cost"]((*index, 0, 0, 0)):
            keys = [_stat_key(f) for f in self.files(index)]
        else:
            keys = []
            for name in ("reward", "cost"):
                for k in range(self.blocks[0]):
                    folder = os.path.join(self.path, name, os.path.dirname(self.keys[name]((*index, k, 0, 0))))
                    try:
                        held = sorted(os.listdir(folder))
                    except FileNotFoundError:
                        held = []
                    keys.append(f"{name}/{k}:{','.join(held)}".encode())
                    keys.extend(_stat_key(os.path.join(folder, m)) for m in held)
        h = hashlib.blake2b(b"|".join(keys), digest_size=8)
        return np.uint64(int.from_bytes(h.digest(), "little"))

    def fingerprints(self, shape: tuple[int, ...]) -> np.ndarray:
        """Every run's fingerprint, (algo, task, bound, seed) uint64."""
        out = np.empty(shape, dtype=np.uint64)
        for idx in np.ndindex(*shape):
            out[idx] = self.fingerprint(idx)
        return out


def run_chunks(path: Path, sizes: Mapping[str, int] | None = None) -> RunChunks | None:
    """The store's `RunChunks` when reward and cost are stored one run per chunk (unsharded, dims in the cube's
    order, each chunk holding all iterates, episodes and modes of the grid `sizes` (dim -> length; None: not
    checked), or all episode slots of one mode (`cube.store.chunking`)); None otherwise, or when the arrays'
    metadata does not read."""
    keys, blocks = {}, (1, 1)
    try:
        group = zarr.open_group(str(path), mode="r")
        for name in ("reward", "cost"):
            meta = group[name].metadata
            shape = list(meta.chunk_grid.chunk_shape)
            full = list(meta.shape[4:]) if sizes is None else [int(sizes[d]) for d in ("iterate", "episode", "mode")]
            if layout_of(meta) is not None and shape[5] == full[1]:  # a chunk per mode and block of iterates
                blocks = (-(-int(meta.shape[4]) // shape[4]), int(meta.shape[6]))
            elif shape[4:] != (full if sizes is not None else shape[4:]):
                return None
            if (shape[:4] != [1, 1, 1, 1] or meta.shards is not None
                    or tuple(meta.dimension_names or ()) != (*RUN_DIMS, "iterate", "episode", "mode")):
                return None
            keys[name] = meta.encode_chunk_key
    except Exception:  # noqa: BLE001 - no v3 arrays there (a netCDF file, a foreign store): not one run per chunk
        return None
    return RunChunks(Path(path), keys, blocks)


def run_fingerprints(path: Path, ds: xr.Dataset) -> np.ndarray | None:
    """Per run (algo, task, bound, seed): uint64 hash of the size, mtime and tail of its reward and cost chunk
    files; None when the store is not chunked one run per chunk (then the whole store is hashed)."""
    chunks = run_chunks(path, dict(ds.sizes))
    return None if chunks is None else chunks.fingerprints(tuple(ds.sizes[d] for d in RUN_DIMS))


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
    """The cached statistics, verified (checksums of every chunk, the dtypes and shapes they were written
    with); None when there is none, and None with one `CacheWarning` when it does not verify."""
    wait_for_cache_writes(path)
    if not _cache_folder_ok(path) or not _cache_present(path):
        return None
    try:
        cached = xr.open_zarr(path / CACHE_GROUP, consolidated=False, chunks=None)
        if "run_fp" in cached:  # the fingerprints first: patches write them last (module docstring)
            run_fp = cached["run_fp"].values
            cached = cached.drop_vars("run_fp").load()
            cached["run_fp"] = (RUN_DIMS, run_fp)
        else:
            cached = cached.load()
        layout = cached.attrs.get("layout")
        if layout is not None and layout != layout_digest(cached):
            raise ValueError("its dtypes or shapes changed")
    except Exception as exc:  # a damaged or half-replaced cache is recomputed, saying so
        if layout_written(path):
            warnings.warn(f"the statistics cache of {path} does not verify ({_reason(exc)}); computing the "
                          "statistics from the episodes again", CacheWarning, stacklevel=3)
        return None
    if "layout" not in cached.attrs:
        return None  # written before caches were checked: no checksums to trust, so computed again
    return cached.assign_coords({d: np.array([str(v) for v in cached[d].values]) for d in ("algo", "task", "mode")})


def _cache_present(path: Path) -> bool:
    """Whether the store has a cache group (readable or not: one that does not read is reported, then recomputed)."""
    try:
        zarr.open_group(str(path / CACHE_GROUP), mode="r")
    except FileNotFoundError:
        return False
    except Exception:  # noqa: BLE001 - there, but damaged
        return True
    return True


def layout_written(path: Path) -> bool:
    """Whether the cache's metadata reads and says it was written with checks (older caches were not)."""
    try:
        return "layout" in zarr.open_group(str(path / CACHE_GROUP), mode="r").attrs
    except Exception:  # noqa: BLE001 - metadata that does not read: a cache written with checks, now damaged
        return True


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:100] if str(exc).strip() else ""
    return "checksum mismatch" if "checksum" in text.lower() else f"{type(exc).__name__}{': ' + text if text else ''}"


@contextmanager
def cache_lock(path: Path) -> Iterator[bool]:
    """Hold the cache writers' lock (an exclusive flock on `_derived/.suffstats.lock`); yields False, holding
    nothing, where it cannot be made (a read-only store: nothing is written then)."""
    import fcntl

    try:
        side_folder((path / CACHE_GROUP).parent)
        handle = open(path / CACHE_LOCK, "a+")  # noqa: SIM115 - closed below
    except OSError:
        yield False
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _cache_encoding(out: xr.Dataset) -> dict[str, dict]:
    """One chunk per condition (algo, task, bound: all seeds, iterates and modes): few, large chunks read back
    several times faster than zarr's default, and a patch of a few runs rewrites few of them. Every chunk is
    checksummed and written (none left to a fill value in metadata that is not)."""
    enc: dict[str, dict] = {v: {"compressors": CHUNK_COMPRESSORS} for v in out.variables}
    for v in out.data_vars:
        if out[v].ndim >= len(RUN_DIMS) and out[v].dims[: len(RUN_DIMS)] == RUN_DIMS:
            enc[v]["chunks"] = (1, 1, 1, *out[v].shape[3:])
    return enc


def write_cache(path: Path, ss: xr.Dataset, attrs: dict[str, str], run_fp: np.ndarray | None) -> None:
    """Write the cache to a temporary group, then swap it in, so readers never see a partial cache.

    `run_fp`: the runs' fingerprints taken before their episodes were read. Under the cache lock they are
    taken again: a run written meanwhile keeps the current cache's statistics where those are of its data
    now, else gets UNKNOWN_FP. Best effort: a read-only store just leaves the cache as it is.
    """
    out = ss.drop_vars(["run_status", "run_fp"], errors="ignore")
    for name in ("algo", "task", "mode"):
        out[name] = out[name].astype(object)
        out[name].encoding = {}
    if not _cache_folder_ok(path):
        return
    _remove_dead_writers_leftovers(path)
    tmp_group = f"{CACHE_GROUP}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    target, tmp, trash = path / CACHE_GROUP, path / tmp_group, path / f"{tmp_group}.old"
    with cache_lock(path) as locked:
        if not locked:
            return
        try:
            if run_fp is not None:
                out = _settle_moved_runs(path, out, run_fp, attrs.get("grid"))
            out.attrs = {**attrs, "layout": layout_digest(out)}
            # Written as a store of its own, then moved in as the group: written as a group of the cube, zarr
            # would touch the cube's root metadata (a transient file that readers listing the cube meanwhile
            # warn about on stderr, where the TUI draws).
            side_folder(target.parent)
            out.to_zarr(tmp, mode="w", consolidated=False, encoding=_cache_encoding(out), zarr_format=3,
                        write_empty_chunks=True)
            if target.exists():
                os.replace(target, trash)
            os.replace(tmp, target)
        except OSError:
            pass
        finally:
            for leftover in (tmp, trash):
                shutil.rmtree(leftover, ignore_errors=True)


def _settle_moved_runs(path: Path, out: xr.Dataset, run_fp: np.ndarray, grid: str | None) -> xr.Dataset:
    """`out` with its fingerprints `run_fp` (taken before the episodes were read), where runs written since
    then keep the statistics of the cache on disk when its fingerprint is theirs now, else UNKNOWN_FP."""
    chunks = run_chunks(path)
    now = chunks.fingerprints(run_fp.shape) if chunks is not None else np.full_like(run_fp, UNKNOWN_FP)
    fp = np.array(run_fp, dtype=np.uint64, copy=True)
    moved = np.argwhere(now != fp)
    if moved.shape[0]:
        fp[tuple(moved.T)] = UNKNOWN_FP
        old = _open_cache(path, grid, out[ALPHA_DIM].values)
        if old is not None:
            keep = moved[old["run_fp"][tuple(moved.T)] == now[tuple(moved.T)]]
            if keep.shape[0]:
                out = out.copy(deep=False)
                for v in STATS_VARS:
                    values = np.array(out[v].values, copy=True)
                    for idx in map(tuple, keep):
                        values[idx] = old[v][idx]
                    out[v] = (out[v].dims, values)
                fp[tuple(keep.T)] = now[tuple(keep.T)]
    out["run_fp"] = (RUN_DIMS, fp)
    return out


def _open_cache(path: Path, grid: str | None, alphas: np.ndarray) -> zarr.Group | None:
    """The cache on disk as zarr arrays when it is of grid `grid`, holds the CVaRs of `alphas` (no more, no
    fewer) and keeps run fingerprints, else None."""
    try:
        group = zarr.open_group(path / CACHE_GROUP, mode="r+")
        if grid is None or group.attrs.get("grid") != grid or "run_fp" not in group:
            return None
        if not np.array_equal(np.asarray(group[ALPHA_DIM][...]), np.asarray(alphas, dtype=np.float64)):
            return None
        return group
    except Exception:  # noqa: BLE001 - no cache, or one that does not open: nothing to keep or patch
        return None


def patch_cache(path: Path, ss: xr.Dataset, runs: np.ndarray, run_fp: np.ndarray, grid: str) -> bool:
    """Write the statistics of `runs` ((n, 4) positions) of `ss` into the cache on disk, chunk by chunk: the
    chunks of their conditions, statistics first and fingerprints (`run_fp`, (n,), taken before the runs'
    episodes were read) last, under the cache lock, leaving every other run as the cache holds it. A run
    written since its fingerprint was taken is left out. False (nothing written) when the cache on disk is
    not of this grid (`grid_fingerprint`) or cannot be patched: write it whole then."""
    blocks = _patch_blocks(ss, runs, run_fp)
    if not _cache_folder_ok(path):
        return True  # no cache is used here: nothing to patch, nothing to write
    chunks = run_chunks(path)
    if chunks is None:
        return False
    with cache_lock(path) as locked:
        if not locked:
            return True
        group = _open_cache(path, grid, ss[ALPHA_DIM].values)
        if group is None:
            return False
        try:
            fps = np.asarray(group["run_fp"][...])
            if fps.shape != ss["n"].shape[: len(RUN_DIMS)]:
                return False
            for condition, seeds in blocks.items():
                current = [s for s, fp in seeds.items() if chunks.fingerprint((*condition, s)) == fp]
                if not current:
                    continue
                for v in STATS_VARS:
                    chunk = np.asarray(group[v][condition])
                    for s in current:
                        chunk[s] = ss[v].values[(*condition, s)]
                    group[v][condition] = chunk
                for s in current:
                    fps[(*condition, s)] = seeds[s]
                group["run_fp"][condition] = fps[condition]
        except Exception:  # noqa: BLE001 - a damaged chunk or a full disk: rewrite the cache whole
            return False
    return True


def _patch_blocks(ss: xr.Dataset, runs: np.ndarray, run_fp: np.ndarray) -> dict[tuple[int, ...], dict[int, np.uint64]]:
    """{(a, t, b) condition: {seed position: fingerprint}} of the runs to patch."""
    out: dict[tuple[int, ...], dict[int, np.uint64]] = {}
    for idx, fp in zip(map(tuple, np.asarray(runs).reshape(-1, len(RUN_DIMS))), run_fp, strict=True):
        out.setdefault(tuple(int(i) for i in idx[:3]), {})[int(idx[3])] = np.uint64(fp)
    return out


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
    out = ss.copy(deep=False)
    in_background(path, lambda: write_cache(path, out, attrs, run_fp))


def in_background(path: Path, job: Callable[[], None]) -> None:
    """Run a cache write `job` of the store at `path` in a (non-daemon) thread, after the store's earlier
    one; `wait_for_cache_writes` waits for it. Best effort, as the writes themselves: a cache that is not
    written is recomputed."""
    wait_for_cache_writes(path)

    def run() -> None:
        try:
            job()
        except Exception:  # noqa: BLE001 - best effort (see above)
            pass

    thread = threading.Thread(target=run, name=f"saferl-cache-write:{path.name}")
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
        arr = open_view(path, ds.encoding.get("saferl_grid"))["run_status"]  # the grid `ds` was read with
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


def _status_digest(key: str, values: np.ndarray) -> str:
    return hashlib.sha256(f"{key}:{values.dtype.str}:{values.shape}:".encode() + values.tobytes()).hexdigest()[:32]


def _cached_status(path: Path, key: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """The cached run status if it is for these files and verifies (its digest); else None."""
    import zipfile

    if not _cache_folder_ok(path):
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
    if not _cache_folder_ok(path):
        return
    target = path / STATUS_CACHE
    tmp = target.with_name(f".run_status.{uuid.uuid4().hex[:8]}.npz")
    try:
        side_folder(target.parent)
        np.savez(tmp, key=np.array(key), values=values, digest=np.array(_status_digest(key, values)))
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)
