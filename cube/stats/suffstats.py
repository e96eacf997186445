"""Sufficient statistics of the episode cube: one dask pass, cached in the store.

For every (algo, task, bound, seed, iterate, mode) cell, with costs c_i and rewards r_i of the episodes
present (NaN = no episode) and bound d:

    n_r      = #{i: r_i not NaN}               sum_r    = sum_i r_i
    n        = #{i: c_i not NaN}               sum_c    = sum_i c_i
    n_viol   = #{i: c_i > d}                   sum_over = sum_i (c_i - d)^+
    le[g]    = #{i: (c_i - d) / d <= kappa[g]}   (dim `kappa`, the empirical-CDF counts)

Sums are float64 accumulations of the float32 episodes; counts are exact. Every paper metric and CDF is a
function of these. The result is cached in a Zarr store under the group `_derived/suffstats`, keyed by a
fingerprint of the grid (labels, kappa) and one per run (size and mtime of its reward and cost chunk
files): after new episodes are written only the runs that changed are recomputed (all of them when the
grid changed, or when more than half the runs did); the patched cache is written back once more than
WRITE_BACK_FRACTION of the runs differ from it. Stores not chunked one run per chunk are keyed by
all their episode files instead. The cache is replaced atomically (temporary group, then a rename).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import xarray as xr
import zarr

from cube.compute import compute
from cube.errors import CubeError
from cube.schema import AGGREGATE_ONLY, RUN_DIMS
from cube.store.layout import (
    StillRunReader,
    open_cube,
    pid_alive,
    read_write_seqs,
    runs_written_since,
    side_folder,
    unreadable_chunk,
)

CELL_DIMS = (*RUN_DIMS, "iterate", "mode")
SUM_VARS = ("n_r", "sum_r", "n", "sum_c", "n_viol", "sum_over")
CACHE_GROUP = "_derived/suffstats"
SUFFSTATS_VERSION = 1
# A patched cache is written back only when more than this share of runs changed: re-patching a few
# runs costs milliseconds, rewriting the cache (hundreds of MB at the paper's scale) seconds.
WRITE_BACK_FRACTION = 0.02
Progress = Callable[[int, int], None]


def default_kappa() -> np.ndarray:
    """Default CDF grid of normalized cost deviations: step 0.025 on [-1, 3], then a sparse tail to 100."""
    fine = np.round(np.linspace(-1.0, 3.0, 161), 6)
    tail = np.array([3.5, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 50.0, 100.0])
    return np.concatenate([fine, tail])


def block_stats(reward: np.ndarray, cost: np.ndarray, d: np.ndarray, kappa: np.ndarray,
                 where: Callable[[tuple[int, ...]], str] | None = None) -> np.ndarray:
    """Per-cell statistics of one block.

    reward, cost: (..., E, M) in the store's layout (episode, then mode); d: bounds broadcastable to
    (..., 1, 1); kappa: (G,) sorted. Returns (..., M, 6 + G) float64: SUM_VARS then le[0..G-1].
    Raises CubeError for a negative or infinite cost, or a NaN cost of an episode with a reward;
    `where(index into the (..., E, M) block)` names the cell in that message.
    """
    cells, rows, sums, le = _cell_stats(reward, cost, d, kappa, where)
    out = np.zeros((int(np.prod(cells)), len(SUM_VARS) + kappa.size), dtype=np.float64)
    out[rows, : len(SUM_VARS)] = sums
    out[rows, len(SUM_VARS):] = le
    return out.reshape(*cells, out.shape[-1])


def _cell_stats(reward: np.ndarray, cost: np.ndarray, d: np.ndarray, kappa: np.ndarray,
                where: Callable[[tuple[int, ...]], str] | None
                ) -> tuple[tuple[int, ...], np.ndarray, np.ndarray, np.ndarray]:
    """The statistics of the cells of a block that hold episodes (most expl/greedy cells are empty).

    Same arguments as `block_stats`. Returns (cells, rows, sums, le): the cell shape (..., M), the flat
    indices (k,) of the non-empty cells in it, their SUM_VARS (k, 6) float64 and CDF counts (k, G) int64.
    """
    reward, cost = _as_float(reward), _as_float(cost)
    n_eps, n_modes = cost.shape[-2:]
    cells = (*cost.shape[:-2], n_modes)
    r_3d, c_3d = reward.reshape(-1, n_eps, n_modes), cost.reshape(-1, n_eps, n_modes)
    def gather(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Contiguous (k, E) rows of the cells `rows`, in the stored dtype (sums accumulate in float64)."""
        return r_3d[rows // n_modes, :, rows % n_modes], c_3d[rows // n_modes, :, rows % n_modes]

    no_cost = _all_nan(c_3d).reshape(-1)
    rows = np.flatnonzero(~no_cost)
    r_rows, c_rows = gather(rows)
    if np.count_nonzero(~np.isnan(r_rows)) != np.count_nonzero(~np.isnan(reward)):
        rows = np.flatnonzero(~(no_cost & _all_nan(r_3d).reshape(-1)))  # rewards without costs: an error below
        r_rows, c_rows = gather(rows)
    d_rows = np.broadcast_to(np.asarray(d, dtype=np.float64), cost.shape)[..., 0, :].reshape(-1)[rows]
    sums = np.empty((rows.size, len(SUM_VARS)), dtype=np.float64)
    le = np.empty((rows.size, kappa.size), dtype=np.int64)
    for bound in np.unique(d_rows):
        sel = slice(None) if np.all(d_rows == bound) else np.flatnonzero(d_rows == bound)
        locate = _row_locator(where, rows[sel], cells)
        sums[sel], le[sel] = _row_stats(r_rows[sel], c_rows[sel], float(bound), kappa, locate)
    return cells, rows, sums, le


def _all_nan(x: np.ndarray) -> np.ndarray:
    """(n, E, M) -> (n, M): whether every episode is NaN. Through a (n, M, E) copy of the mask: numpy
    reduces the contiguous last axis many times faster than the middle one of three."""
    return np.ascontiguousarray(np.isnan(x).transpose(0, 2, 1)).all(-1)


def _as_float(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def _row_stats(r: np.ndarray, c: np.ndarray, d: float, kappa: np.ndarray,
               where: Callable[[tuple[int, ...]], str] | None) -> tuple[np.ndarray, np.ndarray]:
    """Statistics of cells given as rows r, c (k, E) (any float dtype) sharing the bound d: SUM_VARS
    (k, 6) float64 and CDF counts (k, G) int64.

    Comparisons run in the stored dtype against thresholds chosen so that they decide exactly what the
    float64 expressions c > d and (c - d)/d <= kappa decide (see `cost_thresholds`): no float64 copy
    of the episodes is made except for the overshoots."""
    has_r, has_c = ~np.isnan(r), ~np.isnan(c)
    _check_costs(c, has_r, has_c, where)
    at_most_d, le_kappa = cost_thresholds(d, kappa, c.dtype)
    g = kappa.size
    loc = grid_locate(le_kappa, c).astype(np.int64)  # NaN -> G: the bin dropped below
    loc += (np.arange(c.shape[0], dtype=np.int64) * (g + 1))[:, None]
    hist = np.bincount(loc.ravel(), minlength=c.shape[0] * (g + 1)).reshape(-1, g + 1)
    over = np.subtract(c, d, dtype=np.float64)
    np.fmax(over, 0.0, out=over)  # fmax: a missing episode (NaN) adds 0
    sums = np.stack([np.count_nonzero(has_r, axis=-1), np.where(has_r, r, 0).sum(-1, dtype=np.float64),
                     np.count_nonzero(has_c, axis=-1), np.where(has_c, c, 0).sum(-1, dtype=np.float64),
                     np.count_nonzero(c > at_most_d, axis=-1), over.sum(-1)], axis=-1)
    return sums, np.cumsum(hist[:, :g], axis=1)


def _row_locator(where: Callable[[tuple[int, ...]], str] | None, rows: np.ndarray,
                 cells: tuple[int, ...]) -> Callable[[tuple[int, ...]], str] | None:
    """Maps `_check_costs`'s (episode, row) index of the gathered rows back to the block's (..., E, M)
    index, for error messages."""
    if where is None:
        return None

    def block_index(index: tuple[int, ...]) -> tuple[int, ...]:
        episode, row = int(index[-2]), int(index[-1])
        cell = np.unravel_index(int(rows[row]), cells)
        return tuple(int(i) for i in cell[:-1]) + (episode, int(cell[-1]))

    def locate(index: tuple[int, ...]) -> str:
        return where(block_index(index))

    locate.block_index = block_index  # type: ignore[attr-defined]
    return locate


class BadEpisodes(CubeError):
    """Values a cube must not hold, found by the pass; `block_index` is the first one's (..., E, M) index
    in its block (so the pass can tell a run caught mid-write from a broken one)."""

    def __init__(self, message: str, block_index: tuple[int, ...] | None) -> None:
        super().__init__(message)
        self.block_index = block_index


def _check_costs(c: np.ndarray, has_r: np.ndarray, has_c: np.ndarray,
                 where: Callable[[tuple[int, ...]], str] | None) -> None:
    """One-line BadEpisodes (a CubeError) when costs (..., M, E) hold values a cube must not hold."""
    for bad, what in ((has_r & ~has_c, "NaN cost(s) of episodes with a reward"),
                      (c < 0, "negative cost(s)"), (np.isinf(c), "infinite cost(s)")):
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            block_index = getattr(where, "block_index", lambda i: None)(first[:-2] + (first[-1], first[-2]))
            loc = where(first[:-2] + (first[-1], first[-2])) if where else f"block index {first}"
            raise BadEpisodes(f"invalid cube: {int(bad.sum())} {what} (first at {loc}); costs must be finite "
                              f"and >= 0 for every episode: fix the writer, or check the store with saferl validate",
                              block_index)


_LOCATE_TABLES: dict[bytes, tuple[float, float, np.ndarray, np.ndarray, float] | None] = {}



def grid_locate(kappa: np.ndarray, x: np.ndarray) -> np.ndarray:
    """#{kappa < x} for every element of x (= np.searchsorted(kappa, x, 'left'); NaN -> kappa.size).

    Exact, and several times faster than searchsorted. x is bucketed on a uniform grid of width h, half
    the smallest kappa spacing, counted down from a top edge above the grid (so that NaN, which np.fmax
    sends to bucket 0, lands above every grid point); the bucket index is computed in x's float dtype.
    Each bucket has a window reaching h/4 beyond its edges, narrower than the spacing, so it holds at
    most one grid point s_q; a table keeps #{kappa below the window} and s_q. Rounding moves the computed
    bucket by far less than h/4, so x lies in its bucket's window and the answer is below_q + (s_q < x).
    Falls back to searchsorted for grids too fine for that.
    """
    key = kappa.tobytes() + kappa.dtype.str.encode()
    if key not in _LOCATE_TABLES:
        _LOCATE_TABLES[key] = _locate_table(kappa)
    entry = _LOCATE_TABLES[key]
    x = np.asarray(x)
    # the bucket index must be right to well within h/4: a few rounding errors of x's dtype per span
    if entry is None or x.dtype.kind != "f" or np.finfo(x.dtype).eps * entry[4] > 0.01:
        return np.searchsorted(kappa, x, side="left")
    top, inv_h, below, inside, _ = entry
    with np.errstate(over="ignore", invalid="ignore"):
        q = (top - x) * inv_h  # Python floats: computed in x's dtype
    np.fmax(q, 0, out=q)  # NaN -> 0
    np.fmin(q, below.size - 1, out=q)
    q = q.astype(np.int32)
    idx = np.take(below, q)
    idx += np.take(inside, q) < x
    return idx


def _locate_table(kappa: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray, float] | None:
    """(top, 1/h, below, inside, scale) for `grid_locate`, or None when the grid needs more than 2^20
    buckets. Bucket q spans (top - (q+1) h, top - q h]; rounding a bucket index of x (near the grid)
    errs by at most a few eps * scale buckets."""
    h = float(np.min(np.diff(kappa))) / 2 if kappa.size > 1 else 1.0
    span = (float(kappa[-1]) - float(kappa[0])) / h if h > 1e-12 else np.inf
    if not (np.isfinite(span) and span < 1 << 20):
        return None
    top = float(kappa[-1]) + 2 * h
    edges = top - h * np.arange(int(span) + 5)  # decreasing; the last one is below kappa[0] - h
    lo = np.searchsorted(kappa, edges[1:] - h / 4, side="left")
    hi = np.searchsorted(kappa, edges[:-1] + h / 4, side="left")
    assert np.all(hi - lo <= 1)  # a window is narrower than the grid spacing
    padded = np.append(kappa, np.inf).astype(kappa.dtype)
    inside = np.where(hi > lo, padded[np.minimum(lo, kappa.size)], np.inf).astype(kappa.dtype)
    scale = lo.size + abs(top) / h  # top itself is rounded to x's dtype
    return top, 1.0 / h, lo.astype(np.int32), inside, scale


_THRESHOLDS: dict[tuple[float, bytes, str], tuple[np.generic, np.ndarray]] = {}


def cost_thresholds(d: float, kappa: np.ndarray, dtype: np.dtype) -> tuple[np.generic, np.ndarray]:
    """Thresholds in a float dtype that decide the float64 tests of its costs exactly.

    Returns (t_d, t) with, for every cost c of that dtype (as float64, the value the metrics use):
        c > t_d     <=>  c > d                      (a violation)
        c <= t[g]   <=>  (c - d) / d <= kappa[g]    (CDF counts, with the float64 rounding of eq. 9)
    Both right-hand sides are monotone in c, so each set of costs passing them is a down-set of the
    dtype's values and has a largest member: the threshold, found from its approximation d(1 + kappa)
    by stepping one unit in the last place at a time. Comparing float32 costs with these float32
    thresholds then needs no float64 copy of the episodes.
    """
    dtype = np.dtype(dtype)
    key = (float(d), kappa.tobytes(), dtype.str)
    if key not in _THRESHOLDS:
        t_d = _largest_passing(lambda v: v <= d, np.array([d]), dtype)[0]
        with np.errstate(over="ignore"):
            t = _largest_passing(lambda v: (v - d) / d <= kappa, d * (1.0 + kappa), dtype)
        _THRESHOLDS[key] = (t_d, t)
    return _THRESHOLDS[key]


def _largest_passing(passes: Callable[[np.ndarray], np.ndarray], guess: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Elementwise, the largest finite value v of `dtype` with passes(float64(v)), for a predicate
    monotone in v (true up to a point, then false) that holds for the dtype's lowest finite value.

    Bisection on the values' order keys (their bit patterns, made monotone), bracketed by the guess:
    exact, and at most 64 steps even where many values pass alike (all tiny costs give (c - d)/d = -1)."""
    bits = np.dtype(f"i{dtype.itemsize}")
    magnitude = np.iinfo(bits).max

    def key(v: np.ndarray) -> np.ndarray:
        b = v.astype(dtype).view(bits).astype(np.int64)
        return np.where(b < 0, -(b & magnitude), b)

    def value(k: np.ndarray) -> np.ndarray:
        return np.where(k < 0, (-k) | np.int64(np.iinfo(bits).min), k).astype(bits).view(dtype)

    info = np.finfo(dtype)
    k_min, k_max = int(key(np.array([info.min]))[0]), int(key(np.array([info.max]))[0])
    if not passes(np.full(1, info.min, dtype=np.float64)).all():
        raise CubeError(f"cannot place the CDF grid on {dtype} costs: store costs as float32 or float64")
    start = key(np.clip(guess, info.min, info.max))
    start_passes = passes(value(start).astype(np.float64))
    lo = np.where(start_passes, start, k_min)  # passes
    hi = np.where(start_passes, k_max + 1, start)  # fails, or is beyond the largest finite value
    while np.any(hi > lo + 1):
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)  # no int64 overflow
        ok = passes(value(mid).astype(np.float64))
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return value(lo)


def _kappa_grid(kappa: np.ndarray | None) -> np.ndarray:
    """The CDF grid (default_kappa() if None), checked: finite, strictly increasing, non-empty."""
    kappa = default_kappa() if kappa is None else np.asarray(kappa, dtype=np.float64)
    if kappa.ndim != 1 or kappa.size == 0 or np.any(np.diff(kappa) <= 0) or not np.isfinite(kappa).all():
        raise CubeError("the kappa grid must be a non-empty, strictly increasing 1-D list of finite numbers")
    return kappa


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
            cells, rows, sums, le = _cell_stats(r, c, d, kappa, _locator(labels, origin))
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
        raise CubeError(f"safety bounds must be > 0 (found {bounds[~(bounds > 0)].tolist()}): fix the cube's bound labels")
    return bounds


def _le_dtype(n_episodes: int) -> type:
    """CDF counts never exceed the episode slots E: uint16 when E fits (halves the cache), else int32."""
    return np.uint16 if n_episodes <= np.iinfo(np.uint16).max else np.int32


def compute_suffstats(ds: xr.Dataset, kappa: np.ndarray | None = None, progress: Progress | None = None,
                      written: Callable[[tuple[int, ...]], bool] | None = None) -> xr.Dataset:
    """One pass over the episodes of `ds` -> in-memory sufficient statistics (see module docstring).

    One dask task per block of runs and iterates (all episodes and modes of them), returning that
    block's sums and CDF counts, which are then copied into place."""
    kappa = _kappa_grid(kappa)
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
    for place, (block_sums, block_le) in zip(places, _read(tasks, progress, ds.encoding.get("saferl_source")), strict=True):
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
    except CubeError:
        raise
    except Exception as exc:  # codec, I/O and shape errors of a damaged store all end here
        detail = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
        where = unreadable_chunk(source)
        if where:
            raise CubeError(f"cannot read the cube's episodes: {where}: restore that run from a copy or rerun it "
                            "(saferl validate lists every problem)") from None
        raise CubeError(f"cannot read the cube's episodes ({type(exc).__name__}{': ' + detail if detail else ''}): "
                        "the store may be corrupt; check it with saferl validate or rewrite the damaged runs") from None


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


def _read_cache(path: Path) -> xr.Dataset | None:
    wait_for_cache_writes(path)
    if not (path / CACHE_GROUP / "zarr.json").exists():
        return None
    try:
        cached = xr.open_zarr(path, group=CACHE_GROUP, consolidated=False, chunks=None).load()
    except Exception:  # a broken or half-replaced cache is simply recomputed
        return None
    return cached.assign_coords({d: np.array([str(v) for v in cached[d].values]) for d in ("algo", "task", "mode")})


def _write_cache(path: Path, ss: xr.Dataset, attrs: dict[str, str], run_fp: np.ndarray | None) -> None:
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


def _write_cache_in_background(path: Path, ss: xr.Dataset, attrs: dict[str, str], run_fp: np.ndarray | None) -> None:
    """`_write_cache` in a (non-daemon) thread, so the caller works on the statistics meanwhile; the
    next cache read of the store, `wait_for_cache_writes` and interpreter exit wait for it. The
    statistics are not modified in place by anyone, so the writer can share their arrays."""
    wait_for_cache_writes(path)
    out = ss.copy(deep=False)

    def write() -> None:
        try:
            _write_cache(path, out, attrs, run_fp)
        except Exception:  # best effort, as _write_cache itself: a cache that is not written is recomputed
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


def _from_cache(path: Path, ds: xr.Dataset, kappa: np.ndarray, progress: Progress | None,
                background: bool = False, written: Callable[[tuple[int, ...]], bool] | None = None) -> xr.Dataset:
    """Cached statistics brought up to date: reused, patched run by run, or recomputed; a cache write
    runs in a background thread when `background`."""
    write = _write_cache_in_background if background else _write_cache
    grid = grid_fingerprint(ds, kappa)
    run_fp = run_fingerprints(path, ds)  # taken before any data is read: a later write makes it stale
    attrs = {"grid": grid, "store": store_fingerprint(path) if run_fp is None else ""}
    cached = _read_cache(path)
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
    kappa = _kappa_grid(kappa)
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
    """Carry the cube's run_status, `aggregate_only` flags and `synthetic` flag (not cached: they change
    without new episodes)."""
    if "run_status" in ds:
        status = _zarr_run_status(path, ds, cache) if path is not None else None
        ss["run_status"] = status if status is not None else ds["run_status"].transpose(*RUN_DIMS).load()
    if AGGREGATE_ONLY in ds:
        ss[AGGREGATE_ONLY] = ds[AGGREGATE_ONLY].transpose(*RUN_DIMS, "mode").load().astype(bool)
    ss.attrs["synthetic"] = bool(ds.attrs.get("synthetic", False))
    if ds.attrs.get("imported_from"):
        ss.attrs["imported_from"] = str(ds.attrs["imported_from"])
    return ss


STATUS_CACHE = "_derived/run_status.npz"


def _zarr_run_status(path: Path, ds: xr.Dataset, cache: bool = True) -> xr.DataArray | None:
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
