"""Applying a `cube.selection.Selection`: the one engine that picks runs by their labels, for a cube of
episodes and for its sufficient statistics alike, and the training-iterate window of the statistics.

`select_runs(ds, selection)` keeps the selected algorithms, tasks, bounds and seeds of any Dataset with the run
dims (a cube, its per-run variables, its suffstats): labels matched exactly, bounds with
`cube.schema.same_bound`, a label given twice counted once, an unknown label or an empty result one
`CubeError` line. `select(ss, selection)` does that to sufficient statistics and applies the iterate window.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.schema import RUN_DIMS, same_bound
from cube.selection import Iterates, Selection
from cube.stats.suffvars import STATS_VARS

__all__ = ["select", "select_runs", "iterate_window"]


def _match(ds: xr.Dataset, dim: str, wanted: Sequence) -> list:
    have = list(ds[dim].values)
    if dim == "bound":
        picked, unknown = [], []
        for w in wanted:
            hits = [h for h in have if same_bound(h, w)]
            (picked.extend(hits) if hits else unknown.append(w))
    else:
        picked = [w for w in wanted if w in have]
        unknown = [w for w in wanted if w not in have]
    if unknown:
        shown = ", ".join(str(h) for h in have)
        raise CubeError(f"unknown {dim} {', '.join(map(str, unknown))}: the cube has {shown}")
    return list(dict.fromkeys(picked))  # a label given twice must not count twice


def select_runs(ds: xr.Dataset, selection: Selection) -> xr.Dataset:
    """`ds` restricted to the selected runs (labels along the run dims present; None = all). Lazy: a cube
    opened with dask reads nothing here. Iterates are not touched (see `select`). CubeError for unknown
    labels or when no run is left."""
    for dim, wanted in zip(RUN_DIMS, (selection.algos, selection.tasks, selection.bounds, selection.seeds),
                           strict=True):
        if wanted is not None and dim in ds.dims:
            ds = ds.sel({dim: _match(ds, dim, wanted)})
    if any(ds.sizes.get(d, 1) == 0 for d in RUN_DIMS):
        raise CubeError("the selection leaves no runs: widen --algos/--tasks/--bounds/--seeds")
    return ds


def select(ss: xr.Dataset, selection: Selection) -> xr.Dataset:
    """Restrict suffstats to a Selection; CubeError for unknown labels or an empty result.

    Run labels are subset (`select_runs`); `selection.iterates` blanks (zero counts) `train` cells outside
    the window, so iterate-resolved views keep their iterate axis and the final evaluations are untouched.
    """
    ss = select_runs(ss, selection)
    it = selection.iterates
    if it is not None:
        lo, hi = (it, it) if isinstance(it, int) else it
        iters = ss["iterate"].values
        if not np.any((iters >= lo) & (iters <= hi)):
            raise CubeError(f"no iterates in {lo}..{hi}: the cube has iterates {iters.min()}..{iters.max()}")
        keep = (ss["mode"] != "train") | ((ss["iterate"] >= lo) & (ss["iterate"] <= hi))
        ss = ss.copy()
        for v in STATS_VARS:
            if v in ss:
                ss[v] = ss[v].where(keep, 0).astype(ss[v].dtype)
    ss.attrs["selection"] = selection.to_json()
    return ss


def iterate_window(ss: xr.Dataset, iterates: Iterates) -> xr.Dataset:
    """Suffstats with only the training iterates `iterates` (None = all, j, or (lo, hi) inclusive) counted."""
    return ss if iterates is None else select(ss, Selection(iterates=iterates))
