"""The statistics kernel as one compiled loop (numba, `cube.stats.fused_loop`): the same numbers as
`cube.stats.kernel`'s numpy kernel, bit for bit, at a fraction of its CPU time.

The numpy kernel makes about thirty passes over a block's episodes (NaN masks, a gathered copy, the CDF
bucket, a histogram, five sums); the loop reads a cell's episodes from memory once and works on them in
cache, a few short passes per cell: flags (a NaN, a bad value) in a vectorised check, the NaN left out only
where there is one; what the sums add (float64 rewards, overshoots, the CDF bucket index) in a vectorised
pass; then one scalar pass with the three float64 sums side by side and the CDF histogram. It is an
accelerator, not a second definition: counts are exact in both, the CDF counts use the same thresholds
(`cost_thresholds`) and the same bucket tables (`grid_locate`), and every float64 sum adds the episodes in
episode order, as the numpy kernel does (an accumulation along the episodes of an (E, k) array); no
fast-math anywhere. CVaR (`cube.stats.tail`): the k-th largest cost, v, lies in the CDF bin where the
counts from the top reach k; the costs of those bins are binned again, finely, and a quickselect among the
few of the right fine bin gives v exactly; S sums the costs above v in episode order, as the numpy kernel
does after a partition. A block breaking the episode rule returns `broken`; the numpy kernel then names the
first bad episode.

numba is imported on first use only (about 0.3 s, and a compile of 4-8 s per dtype the first time on a
machine, cached next to `fused_loop` after that); `available()` says whether it can be. Where
`cube.stats.prebuilt` has built the loop ahead of time for this machine, that module serves instead: no numba
import and no cache load (about a second of a cold process, holding the GIL).
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
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


def loaded() -> bool:
    """Whether this process has the compiled loop already (a block of FUSED_MIN_VALUES came first): smaller
    blocks then cost it nothing more to use."""
    return _define.cache_info().currsize > 0


def reload() -> None:
    """Forget the loop this process has: the next block takes it again (a prebuilt module built since, or
    $SAFERL_PREBUILT changed; tests)."""
    with _COMPILE_LOCK:
        _define.cache_clear()


def compiled() -> Any:
    """The compiled loop; dask's threads ask for it at once on the first block, so they take turns."""
    with _COMPILE_LOCK:
        return _define()


@cache
def _define() -> Any:
    from cube.stats import prebuilt

    modules = prebuilt.load()
    if modules is not None:
        return Prebuilt(modules, _jit)
    prebuilt.build_in_background()  # for the processes after this one
    return _jit()


@cache
def _jit() -> Any:
    """The loop compiled by numba's JIT (cached in numba's cache folder where it can be)."""
    import numba

    from cube.stats import fused_loop

    options = {"nogil": True, "error_model": "numpy"}
    try:
        cached = numba.njit(cache=True, **options)(fused_loop.cells)
    except RuntimeError:  # no folder to cache in (a read-only install, no writable home): compile per process
        return numba.njit(**options)(fused_loop.cells)
    return CacheFallback(cached, lambda: numba.njit(**options)(fused_loop.cells))


class Prebuilt:
    """The loop of `cube.stats.prebuilt`'s module for the dtypes it holds; the JIT's (`jit()`, compiled on
    first need) for the others."""

    def __init__(self, modules: dict[np.dtype, Any], jit: Callable[[], Any]) -> None:
        self._modules, self._jit = modules, jit

    def __call__(self, *args: Any) -> Any:
        compiled = self._modules.get(args[1].dtype)
        if compiled is not None:
            try:
                return compiled(*args)
            except TypeError:  # arguments of other types than the module's signature: nothing ran yet
                pass
        with _COMPILE_LOCK:
            compiled = self._jit()
        return compiled(*args)


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
    return bool(compiled()(r3, c3, selected, float(d), dtype.type(at_most_d), t, dtype.type(top),
                            dtype.type(inv_h), below, np.asarray(inside, dtype=dtype), table is not None, sums,
                            le, has_cost, col, k_tab, an_tab, cvar))
