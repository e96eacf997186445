"""The statistics cache inside a store: `_derived/suffstats` (keyed by a fingerprint of the grid and
one per run: the stat keys of its reward and cost chunk files, `cube.stats.fingerprint`, taken with the cutoff
kept in its `settled` attribute; stores not chunked one run per chunk are keyed by all their episode files)
and `_derived/run_status.npz`. A report reads it straight from its chunk files (`_cache_from_files`).
Written whole as a store of its own and moved in, so
readers never see a partial cache; or patched run by run (`patch_cache`: the chunks of the
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

import base64
import functools
import hashlib
import json
import os
import shutil
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from cube.errors import CubeError, CubeWarning
from cube.schema import RUN_DIMS
from cube.stats.bootstrap import StatsWarning
from cube.stats.fingerprint import (  # noqa: F401 - the cache's keys, named here as before
    UNKNOWN_FP,
    RunChunks,
    fingerprint_cutoff,
    run_chunks,
    run_fingerprints,
    settled_cutoff,
    store_fingerprint,
)
from cube.stats.suffvars import ALPHA_DIM, CELL_DIMS, STATS_VARS
from cube.store.chunkfiles import read_array
from cube.store.fs import pid_alive, refuse_links, side_folder
from cube.store.locks import read_write_seqs, runs_written_since

if TYPE_CHECKING:  # zarr loads where a cache is written or judged the slow way: a warm report reads without it
    import zarr

CACHE_GROUP = "_derived/suffstats"
CACHE_LOCK = "_derived/.suffstats.lock"
SUFFSTATS_VERSION = 3
"""1: sums added pairwise (numpy); 2: in episode order, by both kernels (`cube.stats.fused`); 3: with the CVaRs
(`cvar_c`, dim `cvar_alpha`). A cache of another version is of another grid: recomputed, never misread."""


class CacheWarning(CubeWarning, StatsWarning):
    """The statistics cache did not verify (or sits behind a link) and is not used (a StatsWarning too, so the
    commands that show the statistics' warnings show it)."""


def cache_folder_ok(path: Path) -> bool:
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


def cache_attrs(path: Path) -> dict[str, object] | None:
    """The attributes of the cache on disk (its grid, `settled` cutoff, ...); None when there is none readable."""
    try:
        attrs = json.loads((path / CACHE_GROUP / "zarr.json").read_text())["attributes"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return attrs if isinstance(attrs, dict) else None


def read_cache(path: Path) -> xr.Dataset | None:
    """The cached statistics, verified (checksums of every chunk, the dtypes and shapes they were written
    with); None when there is none, and None with one `CacheWarning` when it does not verify."""
    wait_for_cache_writes(path)
    if not cache_folder_ok(path):
        return None
    cached = _cache_from_files(path / CACHE_GROUP)
    if cached is not None:
        return cached
    if not _cache_present(path):
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


NAN_FILL = "AAAAAAAA+H8="
"""The `_FillValue` attribute xarray writes for a float64 array filled with NaN (its 8 bytes in base64): masking
NaN as NaN changes nothing."""


def _cache_from_files(folder: Path) -> xr.Dataset | None:
    """What `read_cache` gives, read straight from the cache's chunk files (`cube.store.chunkfiles.read_array`:
    every chunk's CRC-32C checked, zstd-decoded): several times faster than through zarr and xarray. The
    fingerprints first (patches write them last). None where anything is not as this module writes it (an
    attribute xarray would decode, a chunk that is missing or does not verify): `read_cache` reads it the
    slow way then, which judges it."""
    try:
        attrs = json.loads((folder / "zarr.json").read_text())["attributes"]
        names = sorted((e.name for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)),
                       key=lambda n: (n != "run_fp", n))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(attrs, dict) or "layout" not in attrs or any(n.startswith(".") for n in names):
        return None
    coords, data = {}, {}
    for name in names:
        got = read_array(folder / name)
        if got is None:
            return None
        values, dims, kept = got
        if kept and not (kept == {"_FillValue": NAN_FILL} and values.dtype == np.float64):
            return None
        if dims == (name,):
            coords[name] = np.array([str(v) for v in values]) if values.dtype == object else values
        elif values.dtype != object:
            data[name] = (dims, values)
        else:
            return None
    try:
        cached = xr.Dataset(data, coords=coords, attrs=attrs)
    except ValueError:  # dims that do not agree: the slow way names the problem
        return None
    return cached if attrs["layout"] == layout_digest(cached) else None


def _cache_present(path: Path) -> bool:
    """Whether the store has a cache group (readable or not: one that does not read is reported, then recomputed)."""
    import zarr

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
        import zarr

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
    checksummed and written (none left to a fill value in metadata that is not). The per-cell numbers are
    byte-shuffled Blosc-LZ4 (`cache_compressors`), labels zstd; their chunk files lie side by side in the
    array's folder (`CACHE_KEYS`)."""
    from cube.store.layout import CHUNK_COMPRESSORS

    enc: dict[str, dict] = {v: {"compressors": CHUNK_COMPRESSORS} for v in out.variables}
    for v in out.data_vars:
        if out[v].ndim >= len(RUN_DIMS) and out[v].dims[: len(RUN_DIMS)] == RUN_DIMS:
            enc[v]["chunks"] = (1, 1, 1, *out[v].shape[3:])
            enc[v]["chunk_key_encoding"] = CACHE_KEYS
            if out[v].dtype.kind in "biuf":
                enc[v]["compressors"] = cache_compressors()
    return enc


CACHE_KEYS = {"name": "default", "separator": "."}
"""The chunk keys of the cache's per-run arrays: ``c.0.1.2.0.0.0``, one file each in the array's folder, where
zarr's default (``c/0/1/2/0/0/0``) makes a folder for every level: 1,441 folders beside 409 files for a
paper-scale cache, each created, and deleted with the cache it replaces (docs/performance.md, seventh round)."""


@functools.cache
def cache_compressors() -> tuple:
    """The codecs of the cache's numbers (about 200 MB of CDF counts at paper scale): about twice as fast as zstd to
    write and to read back (bench/codec_sweep.py on episode data), the CRC-32C kept; typesize from the dtype. One
    tuple, built once: zarr loads with the first cache written, not with a report that reads one."""
    from zarr.codecs import BloscCodec, Crc32cCodec

    return BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"), Crc32cCodec()


def write_cache(path: Path, ss: xr.Dataset, attrs: dict[str, str], run_fp: np.ndarray | None,
                seqs_before: np.ndarray | None = None) -> None:
    """Write the cache to a temporary group, then swap it in, so readers never see a partial cache.

    `run_fp`: the runs' fingerprints taken before their episodes were read. Under the cache lock they are
    taken again: a run written meanwhile keeps the current cache's statistics where those are of its data
    now, else gets UNKNOWN_FP. `seqs_before`: the writers' sequences read before the fingerprints were taken
    (`cube.store.locks.read_write_seqs`): then only runs whose sequence moved since are looked at again (a
    store's writers move it), not every run's files. Best effort: a read-only store just leaves the cache
    as it is.
    """
    from cube.store.chunkwrite import CodecMismatch  # the writing modules (and zarr) load with a write

    out = ss.drop_vars(["run_status", "run_fp"], errors="ignore")
    for name in ("algo", "task", "mode"):
        out[name] = out[name].astype(object)
        out[name].encoding = {}
    if not cache_folder_ok(path):
        return
    _remove_dead_writers_leftovers(path)
    tmp_group = f"{CACHE_GROUP}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    target, tmp, trash = path / CACHE_GROUP, path / tmp_group, path / f"{tmp_group}.old"
    with cache_lock(path) as locked:
        if not locked:
            return
        try:
            if run_fp is not None:
                out = _settle_moved_runs(path, out, run_fp, attrs.get("grid"), _settled_of(attrs), seqs_before)
            out.attrs = {**attrs, "layout": layout_digest(out)}
            # Written as a store of its own, then moved in as the group: written as a group of the cube, zarr
            # would touch the cube's root metadata (a transient file that readers listing the cube meanwhile
            # warn about on stderr, where the TUI draws).
            side_folder(target.parent)
            _write_group(tmp, out)
            if target.exists():
                os.replace(target, trash)
            os.replace(tmp, target)
        except (OSError, CodecMismatch):  # the cache stays as it was; the statistics are computed again
            pass
        finally:
            for leftover in (tmp, trash):
                shutil.rmtree(leftover, ignore_errors=True)


def _write_group(folder: Path, out: xr.Dataset) -> None:
    """`out` as a new v3 store at `folder`, file for file as ``out.to_zarr`` writes it with `_cache_encoding`:
    the labels and attributes through xarray, the per-cell numbers (`cache_compressors`, plain variables)
    straight to their chunk files (`cube.store.chunkwrite`; about half the CPU time of the write), by a second
    thread while zarr writes their metadata (zarr's event loop and Blosc both let the other run)."""
    from cube.store.chunkwrite import writes_straight

    encoding = _cache_encoding(out)
    straight = {v: _straight_spec(out[v], encoding[v]) for v in out.data_vars
                if encoding[v].get("compressors") is cache_compressors() and not out[v].attrs
                and writes_straight(cache_compressors(), out[v].values)}
    rest = out.drop_vars(list(straight))
    rest.to_zarr(folder, mode="w", consolidated=False, encoding={v: encoding[v] for v in rest.variables},
                 zarr_format=3, write_empty_chunks=True)  # first: mode "w" empties the folder
    import zarr

    from cube.store.chunkwrite import write_chunks, write_metadata

    with ThreadPoolExecutor(1, thread_name_prefix="saferl-cache-chunks") as pool:
        chunks = pool.submit(lambda: [write_chunks(folder, v, out[v].values, **spec) for v, (spec, _) in
                                      straight.items()])
        group = zarr.open_group(str(folder), mode="a", zarr_format=3)
        for v, (spec, attributes) in straight.items():
            write_metadata(group, v, out[v].values, dims=out[v].dims, attributes=attributes, **spec)
        chunks.result()


def _straight_spec(array: xr.DataArray, encoding: Mapping) -> tuple[dict, dict]:
    """(chunks, compressors, fill value and key separator of a cache array written straight, its attributes)."""
    attributes, fill = {}, 0
    if array.dtype.kind == "f":  # xarray's CF fill value for floats: NaN, an attribute too
        fill = np.nan
        attributes["_FillValue"] = base64.standard_b64encode(np.array(fill, array.dtype).tobytes()).decode()
    return ({"chunks": encoding["chunks"], "compressors": cache_compressors(), "fill_value": fill,
             "separator": encoding["chunk_key_encoding"]["separator"]}, attributes)


def _settled_of(attrs: Mapping[str, str]) -> int:
    """The `settled` cutoff fingerprints written with `attrs` were taken with (-1: every file read whole)."""
    try:
        return int(attrs.get("settled", -1))
    except ValueError:
        return -1


def _settle_moved_runs(path: Path, out: xr.Dataset, run_fp: np.ndarray, grid: str | None,
                       settled: int, seqs_before: np.ndarray | None = None) -> xr.Dataset:
    """`out` with its fingerprints `run_fp` (taken before the episodes were read, with the cutoff `settled`),
    where runs written since then keep the statistics of the cache on disk when its fingerprint is theirs now,
    else UNKNOWN_FP. With `seqs_before` (`write_cache`), the runs looked at again are those whose write
    sequence moved since (or was odd): the fingerprints of the others stand as taken."""
    chunks = run_chunks(path)
    now = _fingerprints_again(path, chunks, run_fp, settled, seqs_before)
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


def _fingerprints_again(path: Path, chunks: RunChunks | None, run_fp: np.ndarray, settled: int,
                        seqs_before: np.ndarray | None) -> np.ndarray:
    """The runs' fingerprints now (UNKNOWN_FP everywhere without `chunks`): every run's, or with `seqs_before`
    those of the runs written since (`runs_written_since`), `run_fp` for the others."""
    if chunks is None:
        return np.full_like(run_fp, UNKNOWN_FP)
    try:
        seqs_now = read_write_seqs(path) if seqs_before is not None else None
    except CubeError:  # a damaged sequence chunk: the reader of the store names it; here, look at every run
        seqs_now = None
    if seqs_now is None or seqs_now.shape != run_fp.shape or seqs_before.shape != run_fp.shape:
        return chunks.fingerprints(run_fp.shape, settled)
    now = np.array(run_fp, dtype=np.uint64, copy=True)
    for idx in runs_written_since(seqs_before, seqs_now):
        now[idx] = chunks.fingerprint(idx, settled)
    return now


def _open_cache(path: Path, grid: str | None, alphas: np.ndarray) -> zarr.Group | None:
    """The cache on disk as zarr arrays when it is of grid `grid`, holds the CVaRs of `alphas` (no more, no
    fewer) and keeps run fingerprints, else None."""
    try:
        import zarr

        group = zarr.open_group(path / CACHE_GROUP, mode="r+")
        if grid is None or group.attrs.get("grid") != grid or "run_fp" not in group:
            return None
        if not np.array_equal(np.asarray(group[ALPHA_DIM][...]), np.asarray(alphas, dtype=np.float64)):
            return None
        return group
    except Exception:  # noqa: BLE001 - no cache, or one that does not open: nothing to keep or patch
        return None


def patch_cache(path: Path, ss: xr.Dataset, runs: np.ndarray, run_fp: np.ndarray, grid: str,
                settled: int = -1) -> bool:
    """Write the statistics of `runs` ((n, 4) positions) of `ss` into the cache on disk, chunk by chunk: the
    chunks of their conditions, statistics first and fingerprints (`run_fp`, (n,), taken before the runs'
    episodes were read, with the cutoff `settled`) last, under the cache lock, leaving every other run as the
    cache holds it. A run written since its fingerprint was taken is left out. False (nothing written) when
    the cache on disk is not of this grid (`grid_fingerprint`), keeps fingerprints of another cutoff, or
    cannot be patched: write it whole then."""
    blocks = _patch_blocks(ss, runs, run_fp)
    if not cache_folder_ok(path):
        return True  # no cache is used here: nothing to patch, nothing to write
    chunks = run_chunks(path)
    if chunks is None:
        return False
    with cache_lock(path) as locked:
        if not locked:
            return True
        group = _open_cache(path, grid, ss[ALPHA_DIM].values)
        if group is None or _settled_of(dict(group.attrs)) != settled:
            return False
        try:
            fps = np.asarray(group["run_fp"][...])
            if fps.shape != ss["n"].shape[: len(RUN_DIMS)]:
                return False
            for condition, seeds in blocks.items():
                current = [s for s, fp in seeds.items() if chunks.fingerprint((*condition, s), settled) == fp]
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


def write_cache_in_background(path: Path, ss: xr.Dataset, attrs: dict[str, str], run_fp: np.ndarray | None,
                              seqs_before: np.ndarray | None = None) -> None:
    """`write_cache` in a (non-daemon) thread, so the caller works on the statistics meanwhile; the
    next cache read of the store, `wait_for_cache_writes` and interpreter exit wait for it. The
    statistics are not modified in place by anyone, so the writer can share their arrays."""
    out = ss.copy(deep=False)
    in_background(path, lambda: write_cache(path, out, attrs, run_fp, seqs_before))


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
"""The runs' status as last read (`cube.stats.runinfo.zarr_run_status`), keyed by its files."""
