"""The statistics kernel as one compiled loop (numba): the same numbers as `cube.stats.kernel`'s numpy
kernel, bit for bit, at a fraction of its CPU time.

The numpy kernel makes about thirty passes over a block's episodes (NaN masks, a gathered copy, the CDF
bucket, a histogram, five sums); this loop reads each episode once. It is an accelerator, not a second
definition: counts are exact in both, the CDF counts use the same thresholds (`cost_thresholds`) and the
same bucket tables (`grid_locate`), and every float64 sum adds the episodes in episode order, as the numpy
kernel does (an accumulation along the episodes of an (E, k) array). A block
breaking the episode rule returns `broken`; the numpy kernel then names the first bad episode.

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

    def cells(r3, c3, selected, d, at_most_d, t, top, inv_h, below, inside, use_table, sums, le, has_cost):
        """r3, c3: (n, E, M) rewards and costs; selected (n, M) bool: the cells of bound d. Fills, for the
        selected cells with a cost, sums[cell] (6,) float64, le[cell] (G,) int64 and has_cost[cell]
        (cell = i * M + m). Returns True when an episode breaks the cube's episode rule."""
        n, n_eps, n_modes = c3.shape
        g = t.size
        last = below.size - 1
        hist = np.zeros(g + 1, dtype=np.int64)
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
                sums[cell, 0] = n_r
                sums[cell, 1] = sum_r
                sums[cell, 2] = n_c
                sums[cell, 3] = sum_c
                sums[cell, 4] = n_viol
                sums[cell, 5] = sum_over
                running = 0
                for j in range(g):
                    running += hist[j]
                    le[cell, j] = running
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
               t: np.ndarray, table: tuple | None, sums: np.ndarray, le: np.ndarray, has_cost: np.ndarray) -> bool:
    """Run the compiled loop on C-contiguous (n, E, M) rewards and costs of one float dtype (see `cells`);
    `table`: `kernel`'s bucket table for `t`, or None for a binary search. Returns whether the block breaks
    the episode rule (then the outputs are incomplete)."""
    dtype = c3.dtype
    if table is None:
        top, inv_h, below, inside = 0.0, 1.0, np.zeros(1, np.int32), np.zeros(1, dtype)
    else:
        top, inv_h, below, inside = table[:4]
    return bool(_compiled()(r3, c3, selected, float(d), dtype.type(at_most_d), t,
                            np.array([top], dtype=dtype), np.array([inv_h], dtype=dtype), below,
                            np.asarray(inside, dtype=dtype), table is not None, sums, le, has_cost))
