"""Sufficient statistics of the episode cube: the one dask pass over a store, kept current through its cache.

For every (algo, task, bound, seed, iterate, mode) cell the pass computes the statistics of
`cube.stats.kernel` (counts, sums, violations, overshoot and CDF counts). Through the cache
(`cube.stats.cache`), after new episodes are written only the runs that changed are recomputed (all of
them when the grid changed, or when more than half the runs did), and the cache on disk is patched for
those runs only (`patch_cache`). Runs a writer wrote while the pass read them are recomputed from a
consistent read (`cube.store.locks.RunReader`), so a report never mixes two writes.

Following a store being written (the TUI's follow mode): `load_suffstats_at` gives the statistics and the
write sequences they are at, and `update_suffstats` brings them up to date by reading again only the runs
whose write sequence moved since (each one writer state), growing them with the grid (new labels: runs
without episodes; new iterates or episode slots) and patching the cache run by run; the result equals a
full pass (`load_suffstats(path, cache=False)`) of the store as it was read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import xarray as xr

from cube.compute import Progress, active_client, compute
from cube.errors import CubeError
from cube.schema import MEANS_ONLY, RUN_DIMS, RUN_STATUS
from cube.stats.blocks import Block, BlockSpec, Sink, map_block, put_block
from cube.stats.cache import (
    cache_attrs,
    grid_fingerprint,
    in_background,
    patch_cache,
    read_cache,
    write_cache,
    write_cache_in_background,
)
from cube.stats.fingerprint import (
    RunChunks,
    fingerprint_cutoff,
    fingerprints_now,
    run_chunks,
    run_fingerprints,
    store_fingerprint,
)
from cube.stats.kernel import kappa_grid
from cube.stats.runinfo import attach_run_info, read_status_meanwhile
from cube.stats.suffvars import ALPHA_DIM, CDF_VAR, CELL_DIMS, COUNT_VARS, CVAR_VAR, STATS_VARS, SUM_VARS
from cube.stats.tail import cvar_alphas as tail_alphas
from cube.store.chunking import Observed, PerThread, fast_layouts, run_blocks
from cube.store.damage import damaged_store_error
from cube.store.grid import Sizes
from cube.store.location import is_remote, local_path
from cube.store.locks import WrittenSince, read_runs, read_write_seqs, runs_written_since
from cube.store.read import open_cube


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
                      written: Callable[[tuple[int, ...]], bool] | None = None, kernel: str | None = None,
                      cvar_alphas: Sequence[float] | None = None) -> xr.Dataset:
    """One pass over the episodes of `ds` -> in-memory sufficient statistics (see module docstring).

    One dask task per block of runs and iterates (all episodes and modes of them), returning that
    block's sums, CDF counts and CVaRs, which are then copied into place. `kernel`: "auto" (None: the
    default, `cube.stats.kernel.default_kernel`), "numpy" or "fused"; the same numbers either way.
    `cvar_alphas`: CVaR alphas besides `cube.stats.tail.CVAR_ALPHAS` (always computed)."""
    import dask
    import dask.array as da

    kappa = kappa_grid(kappa)
    bounds = _check_bounds(ds)
    reward, cost = _episodes(ds)
    r = da.asarray(reward.data).rechunk({5: -1, 6: -1})
    c = da.asarray(cost.data).rechunk(r.chunks)
    r_blocks, c_blocks = r.to_delayed(), c.to_delayed()
    starts = [np.concatenate([[0], np.cumsum(ch)[:-1]]) for ch in r.chunks[:5]]
    labels = _labels(ds)
    spec = BlockSpec(kappa, _le_dtype(ds.sizes["episode"]), tail_alphas(cvar_alphas), kernel)
    tasks, places = [], []
    for idx in np.ndindex(*r.numblocks[:5]):
        origin = tuple(int(starts[k][i]) for k, i in enumerate(idx))
        place = tuple(slice(o, o + r.chunks[k][i]) for k, (o, i) in enumerate(zip(origin, idx, strict=True)))
        d = bounds[place[2]].reshape(1, 1, -1, 1, 1, 1, 1)  # broadcasts against the block (..., E, M)
        tasks.append(dask.delayed(map_block)(r_blocks[(*idx, 0, 0)], c_blocks[(*idx, 0, 0)], d, labels,
                                              (*origin, 0, 0), spec, written))
        places.append(place)
    cells = (*r.shape[:5], r.shape[6])
    ss = _empty_suffstats(ds, cells, spec)
    for place, block in zip(places, _read(tasks, progress, ds.encoding.get("saferl_source")), strict=True):
        put_block(ss, place, block)
    for v in COUNT_VARS:
        ss[v] = ss[v].astype(np.int64)
    return ss


def _files_pass(path: Path, layouts: dict, ds: xr.Dataset, kappa: np.ndarray | None, progress: Progress | None,
                written: Callable[[tuple[int, ...]], bool] | None, kernel: str | None,
                cvar_alphas: Sequence[float] | None, fingerprint: tuple[RunChunks, int] | None = None
                ) -> tuple[xr.Dataset, np.ndarray | None]:
    """`compute_suffstats` of a store in the layout of `cube.store.chunking`, the same numbers: one dask task
    per group of seeds of a condition reads and decodes their chunk files that exist and runs the kernel on
    those; cells of absent chunks keep the statistics of no episodes (zero, as NaN filler gives). With
    `fingerprint` (`_full_pass`), each run's fingerprint too, from what its task saw of its files."""
    import dask

    bounds, labels, sizes = _check_bounds(ds), _labels(ds), dict(ds.sizes)
    spec = BlockSpec(kappa_grid(kappa), _le_dtype(sizes["episode"]), tail_alphas(cvar_alphas), kernel)
    run_bytes = 2 * sizes["iterate"] * sizes["episode"] * 4  # one mode's reward and cost: the bulk of a run
    group = int(max(1, min(sizes["seed"], FULL_PASS_BLOCK_BYTES // max(run_bytes, 1))))
    ss = _empty_suffstats(ds, tuple(sizes[d] for d in CELL_DIMS), spec)
    sink = Sink(ss) if active_client() is None else None  # a cluster's workers send their blocks back
    task = partial(_read_map_block, path, layouts, sizes=sizes, labels=labels, spec=spec, written=written,
                   scratch=PerThread(), fingerprint=fingerprint, sink=sink)
    tasks, task_runs = [], []  # named here, so dask does not hash the shared arguments of every task
    for a, t, b in np.ndindex(sizes["algo"], sizes["task"], sizes["bound"]):
        for s0 in range(0, sizes["seed"], group):
            runs = [(a, t, b, s) for s in range(s0, min(sizes["seed"], s0 + group))]
            tasks.append(dask.delayed(task)(runs, float(bounds[b]), dask_key_name=f"_read_map_block-{len(tasks)}"))
            task_runs.append(runs)
    run_fp = None if fingerprint is None else np.empty(tuple(sizes[d] for d in RUN_DIMS), dtype=np.uint64)
    for runs, (got, fps) in zip(task_runs, _read(tasks, progress, ds.encoding.get("saferl_source")), strict=True):
        for place, block in got:
            put_block(ss, place, block)
        if run_fp is not None:
            for run, fp in zip(runs, fps, strict=True):
                run_fp[run] = fp
    for v in COUNT_VARS:
        ss[v] = ss[v].astype(np.int64)
    return ss, run_fp


def _read_map_block(path: Path, layouts: dict, runs: list[tuple[int, ...]], d: float, *, sizes: dict[str, int],
                    labels: dict[str, np.ndarray], spec: BlockSpec, written: Callable[[tuple[int, ...]], bool] | None,
                    scratch: PerThread, fingerprint: tuple[RunChunks, int] | None, sink: Sink | None = None
                    ) -> tuple[list[tuple[tuple, Block]], list[np.uint64] | None]:
    """One dask task of `_files_pass`: [(place in the cells, statistics)] of each stored block of `runs`
    (read into this thread's buffers of `scratch`, free again when the task returns; written into `sink`
    instead where given: then []), and with `fingerprint` ((`RunChunks`, settled cutoff)) each run's
    fingerprint as of what was read."""
    a, t, b, s0 = runs[0]
    observed = None if fingerprint is None else Observed()
    out = []
    for m, (j0, arrays) in run_blocks(path, layouts, runs, sizes, scratch.get(), observed).items():
        r, c = (arrays[n][None, None, None, ..., None] for n in ("reward", "cost"))  # (1, 1, 1, S, J', E, 1)
        block = map_block(r, c, d, labels, (a, t, b, s0, j0, 0, m), spec, written)
        place = (a, t, b, slice(s0, s0 + len(runs)), slice(j0, j0 + r.shape[4]), slice(m, m + 1))
        if sink is not None:
            sink.put(place, {name: values[0, 0, 0] for name, values in block.items()})
        else:
            out.append((place, {name: values[0, 0, 0] for name, values in block.items()}))
    if fingerprint is None or observed is None:
        return out, None
    chunks, settled = fingerprint
    return out, [chunks.observed_fingerprint(run, settled, observed) for run in runs]


def _empty_suffstats(ds: xr.Dataset, cells: tuple[int, ...], spec: BlockSpec) -> xr.Dataset:
    """A suffstats Dataset of the cells (A, T, B, S, J, M) of `ds`, to be filled: SUM_VARS float64, the CDF
    counts (..., G) of `spec.le_dtype` and the CVaRs (..., A) float64."""
    coords = {d: ds[d].values for d in CELL_DIMS}
    data = {v: (CELL_DIMS, np.zeros(cells, dtype=np.float64)) for v in SUM_VARS}  # zero: no episode
    data[CDF_VAR] = ((*CELL_DIMS, "kappa"), np.zeros((*cells, spec.kappa.size), dtype=spec.le_dtype))
    data[CVAR_VAR] = ((*CELL_DIMS, ALPHA_DIM), np.zeros((*cells, len(spec.alphas)), dtype=np.float64))
    return xr.Dataset(data, coords={**coords, "kappa": spec.kappa, ALPHA_DIM: np.array(spec.alphas)})


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
                 written: Callable[[tuple[int, ...]], bool] | None = None, kernel: str | None = None) -> xr.Dataset:
    """Recompute the statistics of the runs at positions `runs` ((n, 4) indices) in place; returns ss."""
    import dask
    import dask.array as da

    bounds, spec = _check_bounds(ds), BlockSpec.of(ss, kernel)
    reward, cost = _episodes(ds)
    r, c = da.asarray(reward.data), da.asarray(cost.data)
    labels = _labels(ds)
    tasks = [dask.delayed(map_block)(r[tuple(i)], c[tuple(i)], bounds[i[2]], labels, (*map(int, i), 0, 0, 0),
                                      spec, written) for i in runs]
    for index, block in zip(map(tuple, runs), _read(tasks, progress, ds.encoding.get("saferl_source")), strict=True):
        put_block(ss, index, block)
    return ss


def _from_cache(path: Path, ds: xr.Dataset, kappa: np.ndarray, progress: Progress | None,
                background: bool = False, written: Callable[[tuple[int, ...]], bool] | None = None,
                kernel: str | None = None, cvar_alphas: Sequence[float] | None = None) -> xr.Dataset:
    """Cached statistics brought up to date: reused, patched run by run, or recomputed; a cache write
    runs in a background thread when `background`. A cache without one of the CVaR alphas asked for is
    recomputed (a full pass) with the default alphas and those asked for, and written so."""
    write = write_cache_in_background if background else write_cache
    grid = grid_fingerprint(ds, kappa)
    cached = read_cache(path)
    store_fp = None  # the whole store's fingerprint, for stores not chunked one run per chunk
    if cached is not None and cached.attrs.get("grid") == grid and _holds_alphas(cached, cvar_alphas):
        settled = fingerprint_cutoff(cached.attrs)  # its fingerprints' (`cache.py`), so unchanged runs match
        run_fp = run_fingerprints(path, ds, settled)  # before any episode is read: a later write makes it stale
        if run_fp is None and cached.attrs.get("store") == (store_fp := store_fingerprint(path)):
            return cached.drop_vars("run_fp", errors="ignore")
        if run_fp is not None and "run_fp" in cached:
            stale = np.argwhere(cached["run_fp"].values != run_fp)
            if stale.shape[0] == 0:
                return cached.drop_vars("run_fp")
            if stale.shape[0] <= run_fp.size // 2:
                attrs = {"grid": grid, "store": "", "settled": str(settled)}
                ss = _update_runs(cached.drop_vars("run_fp"), _dask_view(path, ds), stale, progress, written, kernel)
                _save_patch(path, ss, attrs, run_fp, stale, background)
                return ss
    # a full pass: fingerprints with a cutoff of now (fewer files read whole next time), taken as it reads
    settled = fingerprint_cutoff(None)
    chunks = run_chunks(path, dict(ds.sizes))
    if chunks is None and store_fp is None:
        store_fp = store_fingerprint(path)  # before any episode is read
    attrs = {"grid": grid, "store": store_fp or "", "settled": str(settled)}
    ss, run_fp = _full_pass(path, ds, kappa, progress, written, kernel, cvar_alphas,
                            None if chunks is None else (chunks, settled))
    write(path, ss, attrs, run_fp, written.before if isinstance(written, WrittenSince) else None)
    return ss


def _holds_alphas(ss: xr.Dataset, cvar_alphas: Sequence[float] | None) -> bool:
    """Whether statistics hold the CVaRs of the default alphas and of `cvar_alphas`."""
    return CVAR_VAR in ss and set(tail_alphas(cvar_alphas)) <= {float(a) for a in ss[ALPHA_DIM].values}


def _save_patch(path: Path, ss: xr.Dataset, attrs: dict[str, str], run_fp: np.ndarray | Callable[[], np.ndarray],
                runs: np.ndarray, background: bool, fps: np.ndarray | None = None) -> None:
    """Patch the cache on disk with the runs `runs` ((n, 4) positions; `run_fp` every run's fingerprint,
    taken before its episodes were read, or a function giving it, called only when the cache is written
    whole; `fps`: the fingerprints of `runs` alone, when `run_fp` is a function), or write it whole where
    it cannot be patched (another grid, a damaged chunk); in a background thread when `background`."""
    out = ss.copy(deep=False)
    if fps is None:
        assert not callable(run_fp)
        fps = run_fp[tuple(np.asarray(runs).T)]

    def job() -> None:
        if not patch_cache(path, out, runs, fps, attrs["grid"], int(attrs["settled"])):
            write_cache(path, out, attrs, run_fp() if callable(run_fp) else run_fp)

    if background:
        in_background(path, job)
    else:
        job()


FULL_PASS_BLOCK_BYTES = 64 * 2**20


def _full_pass(path: Path, ds: xr.Dataset, kappa: np.ndarray, progress: Progress | None,
               written: Callable[[tuple[int, ...]], bool] | None, kernel: str | None,
               cvar_alphas: Sequence[float] | None, fingerprint: tuple[RunChunks, int] | None = None
               ) -> tuple[xr.Dataset, np.ndarray | None]:
    """`compute_suffstats` over the whole store at `path` (its chunk files, where `fast_layouts` reads them),
    and with `fingerprint` (the store's `RunChunks`, a `settled` cutoff) every run's fingerprint as of the
    episodes read: taken from what the pass saw of each file as it read it (`RunChunks.observed_fingerprint`),
    or all before the pass reads anything where it reads through zarr; else None."""
    layouts = fast_layouts(path, ds.encoding.get("saferl_grid") or dict(ds.sizes)) if path.is_dir() else None
    if layouts is not None:
        return _files_pass(path, layouts, ds, kappa, progress, written, kernel, cvar_alphas, fingerprint)
    run_fp = None
    if fingerprint is not None:
        run_fp = fingerprint[0].fingerprints(tuple(ds.sizes[d] for d in RUN_DIMS), fingerprint[1])
    ss = compute_suffstats(_open_for_full_pass(path, ds), kappa, progress, written, kernel, cvar_alphas)
    return ss, run_fp


def _open_for_full_pass(path: Path, ds: xr.Dataset) -> xr.Dataset:
    """The cube with dask blocks of several seeds (<= FULL_PASS_BLOCK_BYTES per variable).

    Each dask task then fetches many one-run store chunks in one zarr read, which zarr decodes
    concurrently: about half the time of one task per chunk (bench/report_speed.py).
    """
    run_bytes = ds.sizes["iterate"] * ds.sizes["episode"] * ds.sizes["mode"] * ds["cost"].dtype.itemsize
    seeds = int(max(1, min(ds.sizes["seed"], FULL_PASS_BLOCK_BYTES // max(run_bytes, 1))))
    if seeds == 1 or not path.is_dir():
        return _dask_view(path, ds)
    return open_cube(path, chunks={"seed": seeds}, sizes=ds.encoding.get("saferl_grid"))  # the same grid


def _dask_view(path: Path, ds: xr.Dataset) -> xr.Dataset:
    """`ds` with dask arrays (one block per store chunk): itself when it has them, else the store at `path`
    opened again with dask at the grid `ds` sees (`load_suffstats_at` opens a store without dask)."""
    if ds["cost"].chunks is not None or not path.is_dir():
        return ds
    return open_cube(path, sizes=ds.encoding.get("saferl_grid"))



def load_suffstats(source: str | os.PathLike | xr.Dataset, progress: Progress | None = None,
                   kappa: np.ndarray | None = None, cache: bool = True,
                   background_write: bool = False, kernel: str | None = None,
                   cvar_alphas: Sequence[float] | None = None) -> xr.Dataset:
    """Sufficient statistics for a cube path or Dataset; cached in Zarr stores (see module docstring).

    Returns an in-memory Dataset with dims (algo, task, bound, seed, iterate, mode[, kappa]).
    In a Zarr store chunked one run per chunk, only runs whose chunk files changed since the cache
    was written are recomputed. `progress(done, total)` is called as dask tasks finish. With
    `background_write`, a new or patched cache is written by a background thread while the caller goes
    on (a second of the paper-scale report); `wait_for_cache_writes()` waits for it, and so does exit.
    `kernel`: the statistics kernel, "auto" (None: the default, `cube.stats.kernel.default_kernel`),
    "numpy" or "fused"; the same numbers either way. `cvar_alphas`: CVaR alphas besides the ones always
    computed and cached (`cube.stats.tail.CVAR_ALPHAS`: 0.1, 0.05); a cache lacking one is recomputed.
    """
    return load_suffstats_at(source, progress, kappa, cache, background_write, kernel, cvar_alphas)[0]


def load_suffstats_at(source: str | os.PathLike | xr.Dataset, progress: Progress | None = None,
                      kappa: np.ndarray | None = None, cache: bool = True,
                      background_write: bool = False, kernel: str | None = None,
                      cvar_alphas: Sequence[float] | None = None) -> tuple[xr.Dataset, np.ndarray | None]:
    """`load_suffstats`, and the write sequences it is at ((algo, task, bound, seed) int64): every run's
    statistics are of its data at that sequence or later. The baseline of `update_suffstats`; None for
    sources without write sequences (Datasets, netCDF files, foreign stores)."""
    kappa = kappa_grid(kappa)
    if isinstance(source, xr.Dataset):
        return attach_run_info(compute_suffstats(source, kappa, progress, kernel=kernel, cvar_alphas=cvar_alphas),
                               source), None
    if is_remote(source):
        return _remote_suffstats(str(source), progress, kappa, cache, kernel, cvar_alphas), None
    path = Path(local_path(source))
    # one grid snapshot (`cube.store.grid`) for every read of this pass; a store opens without dask: a fresh cache
    # needs no graph (and no dask import), a pass opens its dask view of the same grid (`_dask_view`)
    ds = open_cube(path, lazy=not path.is_dir())
    sizes = ds.encoding.get("saferl_grid")
    before = read_write_seqs(path, sizes)  # the writers' seqlock, read before any episode
    written = WrittenSince(path, before, sizes) if before is not None else None
    status = read_status_meanwhile(path, ds, cache)
    if cache and path.is_dir():
        ss = _from_cache(path, ds, kappa, progress, background_write, written, kernel, cvar_alphas)
    else:
        ss = _full_pass(path, ds, kappa, progress, written, kernel, cvar_alphas)[0]
    interrupted: list[tuple[int, ...]] = []
    if before is not None:
        ss = _settle_written_runs(ss, path, ds, before, interrupted, kernel)
    ss = attach_run_info(ss, ds, status)
    if interrupted and "run_status" in ss:
        for index in interrupted:  # a run holding an interrupted write is partial, whatever it says
            ss["run_status"].values[index] = min(int(ss["run_status"].values[index]), RUN_STATUS["partial"])
    return ss, before


def _remote_suffstats(url: str, progress: Progress | None, kappa: np.ndarray, cache: bool, kernel: str | None,
                      cvar_alphas: Sequence[float] | None) -> xr.Dataset:
    """The statistics of a published store at `url`: no seqlock to settle (a snapshot is immutable); cached in a
    local folder keyed by the snapshot's id (`cube.store.location.remote_cache_folder`), so a second report of
    the URL costs what a local repeated report costs. Dask blocks of several seeds: one task's store chunks
    are requested concurrently."""
    from cube.store.location import REMOTE_BLOCK_RUNS, REMOTE_WORKERS, prefetch_pass, remote_blocks, remote_cache_folder

    ds = open_cube(url)
    run_bytes = ds.sizes["iterate"] * ds.sizes["episode"] * ds.sizes["mode"] * ds["cost"].dtype.itemsize
    blocks = remote_blocks(dict(ds.sizes), max(1, min(REMOTE_BLOCK_RUNS, FULL_PASS_BLOCK_BYTES // max(run_bytes, 1))))
    folder = remote_cache_folder(url) if cache else None
    grid = grid_fingerprint(ds, kappa)
    cached = read_cache(folder) if folder is not None else None
    if cached is not None and cached.attrs.get("grid") == grid and _holds_alphas(cached, cvar_alphas):
        ss = cached.drop_vars("run_fp", errors="ignore")
    else:
        import dask

        prefetch_pass(url, ("reward", "cost"))  # every chunk requested at once, in the background
        with dask.config.set(num_workers=REMOTE_WORKERS):  # tasks wait on the network: more of them at once
            ss = compute_suffstats(open_cube(url, chunks=blocks), kappa, progress, None, kernel, cvar_alphas)
        if folder is not None:
            write_cache(folder, ss, {"grid": grid, "store": folder.name}, None)
    return attach_run_info(ss, ds)


def _settle_written_runs(ss: xr.Dataset, path: Path, ds: xr.Dataset, before: np.ndarray,
                         interrupted: list[tuple[int, ...]] | None = None, kernel: str | None = None) -> xr.Dataset:
    """Recompute, from a consistent read, the runs a writer wrote while they were being read (their write
    sequence moved or was odd): so a report never mixes the rewards of one write with the costs of
    another. A cache written meanwhile holds such a run under its older fingerprint and is patched next time.
    A write its writer died in is left out, with one `InterruptedWriteWarning` line; its run's position
    goes to `interrupted`."""
    sizes = ds.encoding.get("saferl_grid")
    dirty = runs_written_since(before, read_write_seqs(path, sizes))
    if not dirty:
        return ss
    spec, bounds, labels = BlockSpec.of(ss, kernel), _check_bounds(ds), _labels(ds)
    ss = ss.copy(deep=True)
    for index, got in read_runs(path, ("reward", "cost"), dirty, labels, sizes):
        reward, cost = got.arrays["reward"], got.arrays["cost"]
        if got.interrupted is not None and interrupted is not None:
            interrupted.append(index)
        put_block(ss, index, map_block(reward, cost, bounds[index[2]], labels, (*index, 0, 0, 0), spec))
    return ss


# --------------------------------------------------------------------------------------------- following
def update_suffstats(ss: xr.Dataset, path: str | os.PathLike, seqs_before: np.ndarray | None, *,
                     seqs_after: np.ndarray | None = None, cache: bool = True, background_write: bool = False,
                     kernel: str | None = None) -> tuple[xr.Dataset, np.ndarray, np.ndarray | None]:
    """The statistics `ss` of the store at `path` brought up to date: only the runs whose write sequence
    moved since `seqs_before` (the sequences `ss` is at: `load_suffstats_at`, or an earlier update) are read
    again, each as one writer state (`RunReader`: a write its writer died in is left out, with one
    `InterruptedWriteWarning`, and its run counts as partial); a grown grid (labels appended, more iterates or
    episode slots) adds runs and cells without episodes; the cache on disk is patched for the runs read (or
    written whole for a new grid), in a background thread when `background_write`. `seqs_after`: the
    sequences now, when the caller just read them (a `cube.store.locks.SeqWatch`). `kernel`: as in
    `load_suffstats`.

    Returns (statistics: a new Dataset, `ss` is left as it is; the positions (n, 4) of the runs read again,
    in the new grid; the sequences the result is at). Falls back to `load_suffstats_at` (every run) for a
    store without write sequences, a grid that lost or reordered labels, or when more than half the runs
    changed. CubeError (one line) when the store is gone or cannot be read."""
    from cube.store.grid import open_view, published_sizes
    from cube.store.layout import read_coords

    path = Path(path)
    sizes = published_sizes(path) if path.is_dir() else None
    if sizes is None:
        raise CubeError(f"{path} is no longer a results store (deleted or moved away)")
    group = open_view(path, sizes)
    coords = read_coords(group)
    after = read_write_seqs(path, sizes) if seqs_after is None else seqs_after
    grown = _regrid(ss, seqs_before, coords) if seqs_before is not None and after is not None else None
    n_runs = int(np.prod([len(coords[d]) for d in RUN_DIMS]))
    if grown is not None:
        ss, before = grown
        changed = np.argwhere(before != after)
        if changed.shape[0] > max(n_runs // 2, 1):
            grown = None
    if grown is None:
        fresh, at = load_suffstats_at(path, kappa=ss["kappa"].values, cache=cache, background_write=background_write,
                                      kernel=kernel, cvar_alphas=tuple(float(a) for a in ss[ALPHA_DIM].values))
        changed = np.argwhere(np.ones(tuple(len(coords[d]) for d in RUN_DIMS), dtype=bool))
        return fresh, changed, at
    regridded = not all(np.array_equal(ss[d].values, coords[d]) for d in CELL_DIMS) or seqs_before.shape != after.shape
    if changed.shape[0] == 0 and not regridded:
        return ss, changed, after
    # a store keeping one run per chunk: its cache is keyed, and patched, run by run
    chunks = run_chunks(path, {d: len(v) for d, v in coords.items()}) if cache else None
    settled = fingerprint_cutoff(cache_attrs(path)) if chunks else -1  # the cache's, so its other runs still match
    fps = [chunks.fingerprint(tuple(i), settled) for i in changed] if chunks else []  # before any episode is read
    ss = _reread_runs(ss, path, group, sizes, coords, changed, kernel)
    if chunks is not None:
        grid = grid_fingerprint(coords, ss["kappa"].values)
        attrs, shape = {"grid": grid, "store": "", "settled": str(settled)}, ss["n"].shape[: len(RUN_DIMS)]
        if regridded:  # the cache is written whole: every run's fingerprint now
            _save_patch(path, ss, attrs, fingerprints_now(chunks, shape, after, sizes, changed, fps, settled), changed,
                        background_write)
        else:  # patched run by run: the others' fingerprints only if that fails (1,440 stat calls saved)
            whole = partial(fingerprints_now, chunks, shape, after, sizes, changed, fps, settled)
            _save_patch(path, ss, attrs, whole, changed, background_write, np.asarray(fps, dtype=np.uint64))
    return ss, changed, after


def _regrid(ss: xr.Dataset, before: np.ndarray, coords: dict[str, np.ndarray]
            ) -> tuple[xr.Dataset, np.ndarray] | None:
    """`ss` and its sequences `before` on the grid `coords` (labels appended to `ss`'s: runs and cells
    without episodes, sequence 0); None when a label of `ss` is gone or moved (then read everything)."""
    if before.shape != ss["n"].shape[: len(RUN_DIMS)]:
        return None
    positions = {}
    for d in CELL_DIMS:
        old, new = [str(v) for v in ss[d].values.tolist()], [str(v) for v in coords[d].tolist()]
        if new[: len(old)] != old:
            return None
        positions[d] = np.arange(len(old))
    le_dtype = _le_dtype(len(coords["episode"]))
    if all(len(coords[d]) == ss.sizes[d] for d in CELL_DIMS) and ss[CDF_VAR].dtype == le_dtype:
        return ss, before
    grown = ss.reindex({d: coords[d] for d in CELL_DIMS}, fill_value=0)
    grown[CDF_VAR] = grown[CDF_VAR].astype(np.promote_types(ss[CDF_VAR].dtype, le_dtype))
    if MEANS_ONLY in grown:
        grown[MEANS_ONLY] = grown[MEANS_ONLY].astype(bool)
    for v in ss.data_vars:
        grown[v] = grown[v].astype(ss[v].dtype) if v != CDF_VAR else grown[v]
    moved = np.zeros(tuple(len(coords[d]) for d in RUN_DIMS), dtype=before.dtype)
    moved[np.ix_(*(positions[d] for d in RUN_DIMS))] = before
    return grown, moved


def _reread_runs(ss: xr.Dataset, path: Path, group, sizes: Sizes, coords: dict[str, np.ndarray],
                 runs: np.ndarray, kernel: str | None = None) -> xr.Dataset:
    """A copy of `ss` with the runs at `runs` read again, each as one writer state."""
    names = ["reward", "cost", *[n for n in ("run_status", MEANS_ONLY) if n in group and n in ss]]
    out = ss.copy(deep=False)
    for v in (*STATS_VARS, *names[2:]):
        out[v] = (ss[v].dims, np.array(ss[v].values, copy=True))
    if not runs.shape[0]:
        return out
    spec, labels = BlockSpec.of(ss, kernel), {d: coords[d] for d in (*RUN_DIMS, "iterate", "episode", "mode")}
    bounds = _check_bounds(xr.Dataset(coords={"bound": coords["bound"]}))
    for index, got in read_runs(path, names, map(tuple, runs), coords, sizes):
        put_block(out, index, map_block(got.arrays["reward"], got.arrays["cost"], bounds[index[2]], labels,
                                    (*index, 0, 0, 0), spec))
        if "run_status" in names:
            status = int(got.arrays["run_status"])
            out["run_status"].values[index] = min(status, RUN_STATUS["partial"]) if got.interrupted else status
        if MEANS_ONLY in names:
            out[MEANS_ONLY].values[index] = np.asarray(got.arrays[MEANS_ONLY]).astype(bool)
    return out
