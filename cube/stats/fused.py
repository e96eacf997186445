"""The statistics kernel as one compiled loop (numba): the same numbers as `cube.stats.kernel`'s numpy
kernel, bit for bit, at a fraction of its CPU time.

The numpy kernel makes about thirty passes over a block's episodes (NaN masks, a gathered copy, the CDF
bucket, a histogram, five sums); this loop reads each episode once. It is an accelerator, not a second
definition: counts are exact in both, the CDF counts use the same thresholds (`cost_thresholds`) and the
same bucket tables (`grid_locate`), and every float64 sum adds the episodes in episode order, as the numpy
kernel does (an accumulation along the episodes of an (E, k) array). CVaR (`cube.stats.tail`) takes the
cell's costs as the loop kept them: the k-th largest, v, is found in the CDF bin where the counts from the
top reach k (a quickselect of the few costs of those bins, exact), then S sums the costs above v in episode
order, as the numpy kernel does after a partition. A block breaking the episode rule returns `broken`; the numpy
kernel then names the first bad episode.

numba is imported on first use only (about 0.3 s, and a compile of 2-5 s per dtype the first time on a
machine, cached next to this file after that); `available()` says whether it can be.
"""

from __future__ import annotations

import importlib.util
import threading
from functools import cache
from typing import Any

import numpy as np

_COMPILE_LOCK = threading.Lock()

OUTPUTS = ("n_r", "sum_r", "n", "sum_c", "n_viol", "sum_over")
"""The statistics the loop computes, in the order of its `col` argument (each one's output column is
`cube.stats.suffvars.COLUMN[name]`: the loop does not fix the output order)."""


def available() -> bool:
    """Whether numba is installed (without importing it)."""
    return importlib.util.find_spec("numba") is not None


def _compiled() -> Any:
    """The compiled loop; dask's threads ask for it at once on the first block, so they take turns."""
    with _COMPILE_LOCK:
        return _define()


@cache
def _define() -> Any:
    import numba

    def cells(r3, c3, selected, d, at_most_d, t, top, inv_h, below, inside, use_table, sums, le, has_cost, col,
              k_tab, an_tab, cvar):
        """r3, c3: (n, E, M) rewards and costs; selected (n, M) bool: the cells of bound d. Fills, for the
        selected cells with a cost, sums[cell] (6,) float64 (OUTPUTS[k] in column col[k]), le[cell] (G,)
        int64, cvar[cell] (A,) float64 (CVaR_alpha of the costs, from k_tab and an_tab: `tail.tail_table`)
        and has_cost[cell] (cell = i * M + m). Returns True when an episode breaks the cube's episode rule."""
        n, n_eps, n_modes = c3.shape
        g = t.size
        last = below.size - 1
        hist = np.zeros(g + 1, dtype=np.int64)
        n_alpha = k_tab.shape[0]
        costs = np.empty_like(c3[0, :, 0])  # the cell's costs in episode order, NaN left out
        kept = np.empty_like(costs)  # the costs of the bins that hold the v of every alpha
        rank = np.empty(n_alpha, dtype=np.int64)
        v = np.empty(n_alpha, dtype=np.float64)
        for i in range(n):
            for m in range(n_modes):
                if not selected[i, m]:
                    continue
                hist[:] = 0
                n_r = n_c = n_viol = 0
                sum_r = sum_c = sum_over = 0.0
                for e in range(n_eps):
                    x = c3[i, e, m]
                    y = r3[i, e, m]
                    if np.isnan(x):
                        if not np.isnan(y):
                            return True
                        continue
                    if x < 0 or np.isinf(x) or np.isinf(y):
                        return True
                    if not np.isnan(y):
                        n_r += 1
                        sum_r += np.float64(y)
                    costs[n_c] = x
                    n_c += 1
                    sum_c += np.float64(x)
                    if x > at_most_d:
                        n_viol += 1
                    over = np.float64(x) - d
                    if over > 0.0:
                        sum_over += over
                    if use_table:
                        q = (top[0] - x) * inv_h[0]
                        q = min(max(q, 0), last)
                        k = np.int64(np.int32(q))
                        at = np.int64(below[k]) + (1 if inside[k] < x else 0)
                    else:
                        at = np.searchsorted(t, x)
                    hist[at] += 1
                if n_c == 0:
                    continue
                cell = i * n_modes + m
                has_cost[cell] = True
                sums[cell, col[0]] = n_r
                sums[cell, col[1]] = sum_r
                sums[cell, col[2]] = n_c
                sums[cell, col[3]] = sum_c
                sums[cell, col[4]] = n_viol
                sums[cell, col[5]] = sum_over
                running = 0
                for j in range(g):
                    running += hist[j]
                    le[cell, j] = running
                # CVaR: v = c_(k), the k-th largest cost, lies in the CDF bin where the counts from the top reach
                # k. One scan keeps the costs of the bins of every alpha (from the lowest to the highest of them),
                # each alpha's v is a quickselect among those few; one more scan adds the costs above each v.
                b_low, b_high = g, 0
                for a in range(n_alpha):
                    k = k_tab[a, n_c]
                    b = g
                    reached = hist[g]
                    while reached < k:
                        b -= 1
                        reached += hist[b]
                    rank[a] = k
                    b_low, b_high = min(b_low, b), max(b_high, b)
                above = 0  # the costs above the kept bins
                for j in range(b_high + 1, g + 1):
                    above += hist[j]
                lower = np.float64(t[b_low - 1]) if b_low > 0 else -np.inf  # bin b: t[b - 1] < c <= t[b]
                upper = np.float64(t[b_high]) if b_high < g else np.inf
                n_kept = 0
                for e in range(n_c):
                    x = costs[e]
                    if x > lower and x <= upper:
                        kept[n_kept] = x
                        n_kept += 1
                done = -1  # the position of the last v found: kept is partitioned around it
                for a in range(n_alpha):
                    lo, hi, want = 0, n_kept - 1, rank[a] - above - 1  # v's position in descending order
                    if done >= 0 and want < done:
                        hi = done - 1
                    elif done >= 0 and want > done:
                        lo = done + 1
                    elif done >= 0:
                        v[a] = v[a - 1]
                        continue
                    while True:
                        if lo >= hi:
                            v[a] = np.float64(kept[lo])
                            done = lo
                            break
                        p1, p2, p3 = kept[lo], kept[(lo + hi) // 2], kept[hi]
                        pivot = max(min(p1, p2), min(max(p1, p2), p3))  # the median of three
                        lt, e, gt = lo, lo, hi  # [lo, lt) > pivot, [lt, e) == pivot, (gt, hi] < pivot
                        while e <= gt:
                            if kept[e] > pivot:
                                kept[lt], kept[e] = kept[e], kept[lt]
                                lt += 1
                                e += 1
                            elif kept[e] < pivot:
                                kept[gt], kept[e] = kept[e], kept[gt]
                                gt -= 1
                            else:
                                e += 1
                        if want < lt:
                            hi = lt - 1
                        elif want > gt:
                            lo = gt + 1
                        else:
                            v[a] = np.float64(pivot)
                            done = want
                            break
                a = 0
                while a < n_alpha:  # S: the costs above v, added in episode order (two alphas per scan)
                    second = a + 1 if a + 1 < n_alpha else a
                    cut1, cut2 = v[a], v[second]
                    total1 = total2 = 0.0
                    count1 = count2 = 0
                    for e in range(n_c):
                        x = np.float64(costs[e])
                        if x > cut1:
                            total1 += x
                            count1 += 1
                        if x > cut2:
                            total2 += x
                            count2 += 1
                    an = an_tab[a, n_c]
                    cvar[cell, a] = (total1 + (an - count1) * cut1) / an
                    an = an_tab[second, n_c]
                    cvar[cell, second] = (total2 + (an - count2) * cut2) / an
                    a += 2
        return False

    try:
        cached = numba.njit(cache=True, nogil=True)(cells)
    except RuntimeError:  # no folder to cache in (a read-only install, no writable home): compile per process
        return numba.njit(nogil=True)(cells)
    return CacheFallback(cached, lambda: numba.njit(nogil=True)(cells))


class CacheFallback:
    """The cached compiled loop, and the same loop compiled in this process, uncached, from the first call
    that fails: numba reads its cache folder at the first call of each dtype, and a damaged file there
    (truncated by a kill, garbage, another numba's) raises from that read. The loop itself never raises."""

    def __init__(self, cached: Any, uncached: Any) -> None:
        self._cached, self._make_uncached = cached, uncached
        self._uncached: Any = None

    def __call__(self, *args: Any) -> Any:
        if self._uncached is None:
            try:
                return self._cached(*args)
            except Exception:  # noqa: BLE001 - a cache file numba cannot read
                with _COMPILE_LOCK:
                    if self._uncached is None:
                        self._uncached = self._make_uncached()
        return self._uncached(*args)


def fill_cells(r3: np.ndarray, c3: np.ndarray, selected: np.ndarray, d: float, at_most_d: np.generic,
               t: np.ndarray, table: tuple | None, sums: np.ndarray, le: np.ndarray, has_cost: np.ndarray,
               col: np.ndarray, k_tab: np.ndarray, an_tab: np.ndarray, cvar: np.ndarray) -> bool:
    """Run the compiled loop on C-contiguous (n, E, M) rewards and costs of one float dtype (see `cells`);
    `table`: `kernel`'s bucket table for `t`, or None for a binary search; `col` (6,) int64: the output
    column of each of OUTPUTS; `k_tab`, `an_tab` (A, E + 1): `cube.stats.tail.tail_table`, `cvar` (cells, A)
    its output. Returns whether the block breaks the episode rule (then the outputs are incomplete)."""
    dtype = c3.dtype
    if table is None:
        top, inv_h, below, inside = 0.0, 1.0, np.zeros(1, np.int32), np.zeros(1, dtype)
    else:
        top, inv_h, below, inside = table[:4]
    return bool(_compiled()(r3, c3, selected, float(d), dtype.type(at_most_d), t,
                            np.array([top], dtype=dtype), np.array([inv_h], dtype=dtype), below,
                            np.asarray(inside, dtype=dtype), table is not None, sums, le, has_cost, col,
                            k_tab, an_tab, cvar))
