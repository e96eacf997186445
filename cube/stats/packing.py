"""Per-run values of one algorithm and setting packed by condition, for the statistics beyond the paper
(honest intervals, performance profiles, the reward-cost front, seed planning).

A *condition* is a (task, bound) pair; its runs are its seeds. `condition_values` gives an algorithm's
per-run metric values as (P, K, F) (P = task x bound in the cube's order, K = seeds, F = metrics) with
NaN for runs left out of the setting; `run_episodes` how many episodes each run's value of a setting
was computed from (the cluster size of the honest intervals). Packing by stratum for the bootstrap is
`cube.stats.bootstrap.strata`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from cube.schema import RUN_DIMS, final_iterate
from cube.selection import Selection
from cube.stats.metrics import SETTING
from cube.stats.subset import select

__all__ = ["run_episodes", "condition_values", "condition_labels", "unpack"]


def run_episodes(ss: xr.Dataset, setting: str, iterates=None) -> xr.DataArray:
    """Episodes behind each run's value of `setting`: dims (algo, task, bound, seed), float64.

    `train`: the episodes of every training iterate in the window `iterates` (None = all; int j; (lo, hi)
    inclusive); the final settings: the episodes of the run's last iterate holding episodes of the
    setting's mode. 0 where the run has none."""
    mode = SETTING[setting].mode
    if SETTING[setting].final:
        n = ss["n"].sel(mode=mode).transpose(*RUN_DIMS, "iterate")
        counts = n.values
        idx = final_iterate(counts)
        picked = np.take_along_axis(counts, np.maximum(idx, 0)[..., None], axis=-1)[..., 0]
        values = np.where(idx >= 0, picked, 0).astype(np.float64)
    else:
        window = ss if iterates is None else select(ss, Selection(iterates=iterates))
        values = window["n"].sel(mode=mode).sum("iterate").transpose(*RUN_DIMS).values.astype(np.float64)
    coords = {d: ss[d].values for d in RUN_DIMS}
    return xr.DataArray(values, dims=RUN_DIMS, coords=coords)


def condition_values(runs: xr.Dataset, algo: str, names: Sequence[str]) -> np.ndarray:
    """(P, K, F) float64 values of `names` (variables of `runs` with the run dims) for one algorithm;
    P = task x bound (task-major, the cube's order), NaN where a run has no value."""
    one = runs.sel(algo=algo)
    arr = np.stack([one[m].transpose("task", "bound", "seed").values.astype(np.float64) for m in names], -1)
    return arr.reshape(-1, arr.shape[2], arr.shape[3])


def condition_labels(runs: xr.Dataset) -> list[tuple[str, float]]:
    """The (task, bound) of each of the P rows of `condition_values`, in order."""
    return [(str(t), float(b)) for t in runs["task"].values for b in runs["bound"].values]


def unpack(values: np.ndarray, keep: np.ndarray, fill=np.nan) -> np.ndarray:
    """Per-stratum results (P', ...) of the kept conditions back onto all P conditions (`keep` (P,) bool),
    `fill` elsewhere."""
    out = np.full((keep.size, *np.shape(values)[1:]), fill, dtype=np.result_type(values, type(fill)))
    out[keep] = values
    return out
