"""The pure-numpy kernel of the sufficient statistics (no dask, no store).

For every (algo, task, bound, seed, iterate, mode) cell, with costs c_i and rewards r_i of the episodes
present (NaN = no episode) and bound d:

    n_r      = #{i: r_i not NaN}               sum_r    = sum_i r_i
    n        = #{i: c_i not NaN}               sum_c    = sum_i c_i
    n_viol   = #{i: c_i > d}                   sum_over = sum_i (c_i - d)^+
    le[g]    = #{i: (c_i - d) / d <= kappa[g]}   (dim `kappa`, the empirical-CDF counts)
    cvar_c[a] = CVaR_alpha[a] of the c_i          (dim `alpha`, the upper-tail means: `cube.stats.tail`)

Sums are float64 accumulations of the float32 episodes; counts are exact. Every paper metric and CDF is a
function of these. Their names and order are declared once, in `cube.stats.suffvars`.

Two kernels compute them, bit for bit alike: this module's numpy kernel and the compiled loop of
`cube.stats.fused` (numba). `cell_stats(..., kernel=)` chooses: "auto" (the default) takes the compiled loop
for blocks of at least FUSED_MIN_VALUES episode slots where numba is installed, else numpy; "numpy" and
"fused" force one ("fused" falls back to numpy without numba). The environment variable SAFERL_KERNEL, when
set, replaces the default (for benchmarks); an explicit `kernel` always wins.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from cube.errors import CubeError
from cube.schema import EPISODE_RULE_HINT, first_broken_episode
from cube.stats import fused
from cube.stats.suffvars import COLUMN, SUM_VARS
from cube.stats.tail import CVAR_ALPHAS, tail_table

KERNELS = ("auto", "numpy", "fused")
DEFAULT_KERNEL = "auto"


def default_kappa() -> np.ndarray:
    """Default CDF grid of normalized cost deviations: step 0.025 on [-1, 3], then a sparse tail to 100."""
    fine = np.round(np.linspace(-1.0, 3.0, 161), 6)
    tail = np.array([3.5, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 50.0, 100.0])
    return np.concatenate([fine, tail])


class CellStats(NamedTuple):
    """The statistics of the cells of a block that hold episodes: `cells` the cell shape (..., M), `rows` the
    flat indices (k,) of the non-empty cells in it, `sums` their SUM_VARS (k, 6) float64, `le` their CDF
    counts (k, G) int64 and `cvar` their CVaR_alpha of the costs (k, A) float64, one column per alpha."""

    cells: tuple[int, ...]
    rows: np.ndarray
    sums: np.ndarray
    le: np.ndarray
    cvar: np.ndarray


def block_stats(reward: np.ndarray, cost: np.ndarray, d: np.ndarray, kappa: np.ndarray,
                 where: Callable[[tuple[int, ...]], str] | None = None, kernel: str | None = None,
                 alphas: Sequence[float] = CVAR_ALPHAS) -> np.ndarray:
    """Per-cell statistics of one block.

    reward, cost: (..., E, M) in the store's layout (episode, then mode); d: bounds broadcastable to
    (..., 1, 1); kappa: (G,) sorted. Returns (..., M, 6 + G + A) float64: SUM_VARS, le[0..G-1], then
    cvar_c[0..A-1] (one per alpha of `alphas`).
    Raises CubeError for a negative or infinite cost, or a NaN cost of an episode with a reward;
    `where(index into the (..., E, M) block)` names the cell in that message. `kernel`: see `cell_stats`.
    """
    got = cell_stats(reward, cost, d, kappa, where, kernel, alphas)
    out = np.zeros((int(np.prod(got.cells)), len(SUM_VARS) + kappa.size + len(alphas)), dtype=np.float64)
    out[got.rows] = np.concatenate([got.sums, got.le, got.cvar], axis=1)
    return out.reshape(*got.cells, out.shape[-1])


def cell_stats(reward: np.ndarray, cost: np.ndarray, d: np.ndarray, kappa: np.ndarray,
               where: Callable[[tuple[int, ...]], str] | None, kernel: str | None = None,
               alphas: Sequence[float] = CVAR_ALPHAS) -> CellStats:
    """The statistics of the cells of a block that hold episodes (most expl/greedy cells are empty), as
    `CellStats`. Same arguments as `block_stats`; `alphas`: the CVaR alphas (`cube.stats.tail`).
    `kernel`: "auto", "numpy" or "fused" (None = `default_kernel()`, see the module docstring); both give
    the same numbers, bit for bit. A block breaking the episode rule always ends in the numpy kernel, which
    names its first bad episode.
    """
    reward, cost = _as_float(reward), _as_float(cost)
    alphas = tuple(float(a) for a in alphas)
    if _use_fused(cost.size, check_kernel(kernel)):
        got = _fused_cell_stats(reward, cost, d, kappa, alphas)
        if got is not None:
            return got
    return _numpy_cell_stats(reward, cost, d, kappa, where, alphas)


FUSED_MIN_VALUES = 1 << 21
"""Blocks of fewer episode slots stay in numpy under kernel "auto": numba's import and cached compile
(0.4-0.6 s) cost more than numpy's CPU on such a block (a paper-scale run, 0.75 M slots, takes 10 ms in
numpy), so a small report, or following runs one at a time, never pays it; once a process has the loop
(`fused.loaded`), every block uses it (the evaluation blocks of a full pass: 4x less CPU than numpy's)."""


def default_kernel() -> str:
    """The kernel used when none is given: DEFAULT_KERNEL ("auto"), or $SAFERL_KERNEL where it is set (a
    benchmark's override)."""
    choice = os.environ.get("SAFERL_KERNEL", "").strip().lower()
    if not choice:
        return DEFAULT_KERNEL
    if choice not in KERNELS:
        raise CubeError(f"SAFERL_KERNEL={choice!r} is not a kernel: use numpy, fused or auto")
    return choice


def check_kernel(kernel: str | None) -> str:
    """A kernel name checked ("auto", "numpy" or "fused"); None = `default_kernel()`."""
    if kernel is None:
        return default_kernel()
    if kernel not in KERNELS:
        raise CubeError(f"{kernel!r} is not a statistics kernel: use {', '.join(KERNELS)}")
    return kernel


def _use_fused(n_values: int, choice: str) -> bool:
    if choice == "numpy" or not fused.available():
        return False
    return choice == "fused" or n_values >= FUSED_MIN_VALUES or fused.loaded()


FUSED_COLUMNS = np.array([COLUMN[name] for name in fused.OUTPUTS], dtype=np.int64)
"""Where the compiled loop puts each statistic it computes (`fused.OUTPUTS`) in the output columns."""


def _fused_cell_stats(reward: np.ndarray, cost: np.ndarray, d: np.ndarray, kappa: np.ndarray,
                      alphas: tuple[float, ...]) -> CellStats | None:
    """`cell_stats` by the compiled loop; None when the block breaks the episode rule."""
    n_eps, n_modes = cost.shape[-2:]
    cells = (*cost.shape[:-2], n_modes)
    r_3d = np.ascontiguousarray(reward.reshape(-1, n_eps, n_modes))
    c_3d = np.ascontiguousarray(cost.reshape(-1, n_eps, n_modes))
    d_cells = np.broadcast_to(np.asarray(d, dtype=np.float64), cost.shape)[..., 0, :].reshape(-1)
    n_cells = d_cells.size
    sums = np.empty((n_cells, len(SUM_VARS)), dtype=np.float64)
    le = np.empty((n_cells, kappa.size), dtype=np.int64)
    cvar = np.empty((n_cells, len(alphas)), dtype=np.float64)
    has_cost = np.zeros(n_cells, dtype=bool)
    k_tab, an_tab = tail_table(alphas, n_eps)
    for bound in np.unique(d_cells):
        at_most_d, le_kappa = cost_thresholds(float(bound), kappa, c_3d.dtype)
        selected = d_cells == bound
        if fused.fill_cells(r_3d, c_3d, selected, float(bound), at_most_d, le_kappa,
                            _bucket_table(le_kappa, c_3d.dtype), sums, le, has_cost, FUSED_COLUMNS,
                            k_tab, an_tab, cvar):
            return None
    rows = np.flatnonzero(has_cost)
    if rows.size == n_cells:  # every cell holds episodes (training blocks): no gathered copy
        return CellStats(cells, rows, sums, le, cvar)
    return CellStats(cells, rows, sums[rows], le[rows], cvar[rows])



def _numpy_cell_stats(reward: np.ndarray, cost: np.ndarray, d: np.ndarray, kappa: np.ndarray,
                      where: Callable[[tuple[int, ...]], str] | None, alphas: tuple[float, ...]) -> CellStats:
    """`cell_stats` in numpy: the non-empty cells gathered episode-major, (E, k)."""
    n_eps, n_modes = cost.shape[-2:]
    cells = (*cost.shape[:-2], n_modes)
    r_3d, c_3d = reward.reshape(-1, n_eps, n_modes), cost.reshape(-1, n_eps, n_modes)
    def gather(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Contiguous (k, E) rows of the cells `rows`, in the stored dtype."""
        return r_3d[rows // n_modes, :, rows % n_modes], c_3d[rows // n_modes, :, rows % n_modes]

    def gather_by_episode(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The same cells as (E, k) columns, for sums in episode order (as `cube.stats.fused` adds them)."""
        run, mode = rows // n_modes, rows % n_modes
        return r_3d.transpose(1, 0, 2)[:, run, mode], c_3d.transpose(1, 0, 2)[:, run, mode]

    no_cost = _all_nan(c_3d).reshape(-1)
    rows = np.flatnonzero(~no_cost)
    r_rows, c_rows = gather(rows)
    if np.count_nonzero(~np.isnan(r_rows)) != np.count_nonzero(~np.isnan(reward)):
        rows = np.flatnonzero(~(no_cost & _all_nan(r_3d).reshape(-1)))  # rewards without costs: an error below
        r_rows, c_rows = gather(rows)
    d_rows = np.broadcast_to(np.asarray(d, dtype=np.float64), cost.shape)[..., 0, :].reshape(-1)[rows]
    sums = np.empty((rows.size, len(SUM_VARS)), dtype=np.float64)
    le = np.empty((rows.size, kappa.size), dtype=np.int64)
    cvar = np.empty((rows.size, len(alphas)), dtype=np.float64)
    for bound in np.unique(d_rows):
        sel = slice(None) if np.all(d_rows == bound) else np.flatnonzero(d_rows == bound)
        locate = _row_locator(where, rows[sel], cells)
        _check_episodes(r_rows[sel], c_rows[sel], locate)
        le[sel] = _row_cdf_counts(c_rows[sel], float(bound), kappa)
        r_cols, c_cols = gather_by_episode(rows[sel])
        sums[sel] = _column_sums(r_cols, c_cols, float(bound), kappa)
        cvar[sel] = _cell_cvar(c_rows[sel], c_cols, sums[sel, COLUMN["n"]].astype(np.int64), alphas)
    return CellStats(cells, rows, sums, le, cvar)


def _all_nan(x: np.ndarray) -> np.ndarray:
    """(n, E, M) -> (n, M): whether every episode is NaN. Through a (n, M, E) copy of the mask: numpy
    reduces the contiguous last axis many times faster than the middle one of three."""
    return np.ascontiguousarray(np.isnan(x).transpose(0, 2, 1)).all(-1)


def _as_float(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def _row_cdf_counts(c: np.ndarray, d: float, kappa: np.ndarray) -> np.ndarray:
    """CDF counts (k, G) int64 of cells given as rows of costs c (k, E) (any float dtype) sharing the
    bound d. Comparisons run in the stored dtype against thresholds that decide exactly what the float64
    (c - d)/d <= kappa decides (see `cost_thresholds`). Row-major on purpose: neighbouring costs of one
    cell fall in neighbouring buckets, so the table lookups of `grid_locate` stay in cache."""
    _, le_kappa = cost_thresholds(d, kappa, c.dtype)
    g, k = kappa.size, c.shape[0]
    loc = grid_locate(le_kappa, c).astype(np.int64)  # NaN -> G: the bin dropped below
    loc += (np.arange(k, dtype=np.int64) * (g + 1))[:, None]
    hist = np.bincount(loc.ravel(), minlength=k * (g + 1)).reshape(-1, g + 1)
    return np.cumsum(hist[:, :g], axis=1)


def _column_sums(r: np.ndarray, c: np.ndarray, d: float, kappa: np.ndarray) -> np.ndarray:
    """SUM_VARS (k, 6) float64 of cells given as columns of r, c (E, k) sharing the bound d; each float64
    sum adds the column's episodes in episode order. A violation is c > t_d in the stored
    dtype (`cost_thresholds`: the same decision as the float64 c > d)."""
    at_most_d, _ = cost_thresholds(d, kappa, c.dtype)
    has_r, has_c = ~np.isnan(r), ~np.isnan(c)
    over = np.subtract(c, d, dtype=np.float64)
    np.fmax(over, 0.0, out=over)  # fmax: a missing episode (NaN) adds 0
    values = {"n_r": np.count_nonzero(has_r, axis=0), "sum_r": _in_order(np.where(has_r, r, 0)),
              "n": np.count_nonzero(has_c, axis=0), "sum_c": _in_order(np.where(has_c, c, 0)),
              "n_viol": np.count_nonzero(c > at_most_d, axis=0), "sum_over": _in_order(over)}
    return np.stack([values[name] for name in SUM_VARS], axis=-1)


def _cell_cvar(c_rows: np.ndarray, c_cols: np.ndarray, n: np.ndarray, alphas: tuple[float, ...]) -> np.ndarray:
    """CVaR_alpha of the costs (`cube.stats.tail`) of cells given as rows c_rows (k, E) and as columns c_cols
    (E, k) (the same cells, NaN = no episode), with n (k,) episodes each: (k, A) float64, 0 for a cell without
    episodes. v = c_(k) by a partition of each row (no episode sorts below every cost); S added in episode
    order down the columns, the evaluation `cube.stats.fused` makes."""
    n_cells, n_eps = c_rows.shape
    k_tab, an_tab = tail_table(alphas, n_eps)
    out = np.zeros((n_cells, len(alphas)), dtype=np.float64)
    filled = np.where(np.isnan(c_rows), -np.inf, c_rows)
    for count in np.unique(n):
        if count == 0:
            continue
        sel = np.flatnonzero(n == count)
        kth = n_eps - k_tab[:, count]  # the ascending position of c_(k), per alpha
        v = np.partition(filled[sel], np.unique(kth), axis=-1)[:, kth]  # (s, A), in the stored dtype
        cols = c_cols[:, sel]
        for a in range(len(alphas)):
            above = cols > v[:, a]  # NaN is never above
            m = np.count_nonzero(above, axis=0)
            an = an_tab[a, count]
            out[sel, a] = (_in_order(np.where(above, cols, 0)) + (an - m) * v[:, a].astype(np.float64)) / an
    return out


def _in_order(x: np.ndarray) -> np.ndarray:
    """(E, k) -> (k,) float64 column sums, adding x[0], x[1], ... in that order: an accumulation is
    sequential by definition (a plain sum may add pairwise, as numpy does along contiguous memory)."""
    if x.shape[0] == 0:
        return np.zeros(x.shape[1], dtype=np.float64)
    return np.cumsum(x, axis=0, dtype=np.float64)[-1]


def _row_locator(where: Callable[[tuple[int, ...]], str] | None, rows: np.ndarray,
                 cells: tuple[int, ...]) -> Callable[[tuple[int, ...]], str] | None:
    """Maps `_check_episodes`'s (episode, row) index of the gathered rows back to the block's (..., E, M)
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


def _check_episodes(r: np.ndarray, c: np.ndarray, where: Callable[[tuple[int, ...]], str] | None) -> None:
    """One-line BadEpisodes (a CubeError) when rewards and costs (k, E) break the cube's episode rule
    (`cube.schema.EPISODE_RULES`)."""
    broken = first_broken_episode(r, c)
    if broken is None:
        return
    rule, bad = broken
    row, episode = (int(i) for i in np.argwhere(bad)[0])  # the first cell's first bad episode
    block_index = getattr(where, "block_index", lambda i: None)((episode, row))
    loc = where((episode, row)) if where else f"block index {(row, episode)}"
    raise BadEpisodes(f"invalid cube: {rule.count_text(int(bad.sum()))} (first at {loc}); {EPISODE_RULE_HINT}: "
                      "fix the writer, or check the store with saferl validate", block_index)


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
    x = np.asarray(x)
    entry = _bucket_table(kappa, x.dtype)
    if entry is None:
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


def _bucket_table(kappa: np.ndarray, dtype: np.dtype) -> tuple[float, float, np.ndarray, np.ndarray, float] | None:
    """`grid_locate`'s bucket table (top, 1/h, below, inside, scale) for locating values of `dtype` on
    `kappa`, or None where a binary search must do it."""
    key = kappa.tobytes() + kappa.dtype.str.encode()
    if key not in _LOCATE_TABLES:
        _LOCATE_TABLES[key] = _locate_table(kappa)
    entry = _LOCATE_TABLES[key]
    # the bucket index must be right to well within h/4: a few rounding errors of x's dtype per span
    if entry is None or np.dtype(dtype).kind != "f" or np.finfo(dtype).eps * entry[4] > 0.01:
        return None
    return entry


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


def kappa_grid(kappa: np.ndarray | None) -> np.ndarray:
    """The CDF grid (default_kappa() if None), checked: finite, strictly increasing, non-empty."""
    kappa = default_kappa() if kappa is None else np.asarray(kappa, dtype=np.float64)
    if kappa.ndim != 1 or kappa.size == 0 or np.any(np.diff(kappa) <= 0) or not np.isfinite(kappa).all():
        raise CubeError("the kappa grid must be a non-empty, strictly increasing 1-D list of finite numbers")
    return kappa
