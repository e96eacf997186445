"""Per-condition curves and histograms: the paper's training curves and final-cost histograms as data.

Everything here takes and returns numpy arrays or xarray objects, so the TUI and figures stay thin
presentation layers and these functions can be tested on their own:

* :func:`moving_average` / :func:`training_curves`: per-iterate seed mean and sample std of the
  reward and cost after a trailing moving average (input: ``stats.iterate_metrics``; the seed
  statistics are ``cube.stats.tables.seed_mean_std``, as in the condition table).
* :func:`multiplier_curves`: seed mean/std of the per-iterate multiplier (lambda, kappa, nu).
* :func:`final_costs` / :func:`cost_histograms` (with ``cube.schema.final_iterate``): the final evaluation
  episodes of one condition (task, bound) for the ``expl`` and ``greedy`` modes and their
  histograms on shared bin edges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from cube.compute import Progress
from cube.schema import RUN_DIMS, final_iterate
from cube.stats.tables import seed_mean_std

__all__ = ["moving_average", "training_curves", "multiplier_curves", "select_cube", "final_iterate", "final_costs",
           "final_episode_costs", "cost_histograms"]


def moving_average(x: np.ndarray, window: int, axis: int = -1) -> np.ndarray:
    """Trailing moving average over ``axis`` ignoring NaN.

    ``out[..., j] = nanmean(x[..., max(0, j - window + 1) : j + 1])``; positions whose window holds
    no finite value are NaN. ``window <= 1`` returns a float copy. Shape is unchanged.
    """
    x = np.asarray(x, dtype=np.float64)
    if window <= 1:
        return x.copy()
    x = np.moveaxis(x, axis, -1)
    finite = np.isfinite(x)
    pad = [(0, 0)] * (x.ndim - 1) + [(1, 0)]
    csum = np.cumsum(np.pad(np.where(finite, x, 0.0), pad), axis=-1)
    ccnt = np.cumsum(np.pad(finite.astype(np.int64), pad), axis=-1)
    n = x.shape[-1]
    hi = np.arange(1, n + 1)
    lo = np.maximum(hi - window, 0)
    total = csum[..., hi] - csum[..., lo]
    count = ccnt[..., hi] - ccnt[..., lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return np.moveaxis(out, -1, axis)


def training_curves(im: xr.Dataset, window: int = 1, metrics: Sequence[str] = ("R", "C")) -> xr.Dataset:
    """Seed mean and std per iterate of smoothed per-run metrics.

    ``im`` has dims (algo, task, bound, seed, iterate) (``stats.iterate_metrics``). Each run's
    series is first smoothed with :func:`moving_average` (trailing ``window`` iterates), then
    reduced over seeds. Returns dims (algo, task, bound, iterate) with vars ``{m}_mean``, ``{m}_std``.
    """
    out = {}
    for m in metrics:
        da = im[m].transpose(*RUN_DIMS, "iterate")
        smooth = da.copy(data=moving_average(da.values, window, axis=-1))
        out[f"{m}_mean"], out[f"{m}_std"] = seed_mean_std(smooth)
    return xr.Dataset(out)


def multiplier_curves(ds: xr.Dataset, window: int = 1, var: str = "multiplier") -> xr.Dataset | None:
    """Seed mean/std per iterate of the multiplier, smoothed like :func:`training_curves`.

    ``ds`` is the (selected) cube; returns dims (algo, task, bound, iterate) with vars
    ``mult_mean``, ``mult_std``, or None when the cube has no ``var``. PPO rows are all NaN.
    """
    if var not in ds:
        return None
    da = ds[var].transpose(*RUN_DIMS, "iterate").load()
    smooth = da.copy(data=moving_average(da.values, window, axis=-1))
    mean, std = seed_mean_std(smooth)
    return xr.Dataset({"mult_mean": mean, "mult_std": std})


def select_cube(ds: xr.Dataset, selection: Any) -> xr.Dataset:
    """Label-select a cube by a ``Selection``-like object (attributes algos, tasks, bounds, seeds;
    None means all). Iterates are not restricted here. Lazy; no data is read."""
    idx = {}
    for dim, attr in (("algo", "algos"), ("task", "tasks"), ("bound", "bounds"), ("seed", "seeds")):
        labels = getattr(selection, attr, None)
        if labels is not None:
            idx[dim] = list(labels)
    return ds.sel(idx) if idx else ds


def final_episode_costs(cost: xr.DataArray, n: xr.DataArray, modes: Sequence[str] = ("expl", "greedy"),
                        progress: Progress | None = None) -> xr.DataArray | None:
    """Costs of each run's final evaluation per mode: dims (run dims present..., episode, mode); NaN =
    no episode; None when no run has episodes in `modes`.

    cost: the cube's `cost` (any subset of runs; select scalar labels such as one task and bound on it
    first, so the store is read with plain slices). n: the sufficient statistics' episode counts of the
    same runs (dims run dims, iterate, mode), which say where each run's final evaluation is. One read
    of one iterate slice per distinct final iterate (usually one), never the whole run."""
    modes = [m for m in modes if m in n["mode"].values]
    if not modes:
        return None
    run_dims = [d for d in RUN_DIMS if d in cost.dims]
    counts = n.sel(mode=modes).transpose(*run_dims, "mode", "iterate").values
    last = final_iterate(counts)  # (runs..., M)
    if not np.any(last >= 0):
        return None
    iterates = n["iterate"].values
    out = None
    todo = np.unique(last[last >= 0])
    for i, j in enumerate(todo):
        block = cost.sel(iterate=iterates[j]).transpose(*run_dims, "episode", "mode")
        vals = np.asarray(block.values, dtype=np.float32)
        vals = vals[..., [list(block["mode"].values).index(m) for m in modes]]
        if out is None:
            out = np.full(vals.shape, np.nan, dtype=np.float32)
        out = np.where((last == j)[..., None, :], vals, out)
        if progress:
            progress(i + 1, todo.size)
    coords = {d: cost[d].values for d in run_dims}
    coords.update(episode=cost["episode"].values, mode=modes)
    return xr.DataArray(out, dims=(*run_dims, "episode", "mode"), coords=coords)


def final_costs(ds: xr.Dataset, ss: xr.Dataset, task: str, bound: float, modes: Sequence[str] = ("expl", "greedy"),
                algos: Sequence[str] | None = None, seeds: Sequence[int] | None = None) -> dict:
    """Final-evaluation episodic costs of one condition, pooled over seeds: ``{algo: {mode: costs}}``
    (1-D float64, NaN dropped; empty where no seed has that mode). ds: the cube; ss: its sufficient
    statistics (for the final iterates); algos / seeds: a subset (None = all)."""
    cost = ds["cost"].sel(task=task, bound=bound)
    n = ss["n"].sel(task=task, bound=bound)
    if algos is not None:
        cost, n = cost.sel(algo=list(algos)), n.sel(algo=list(algos))
    if seeds is not None:
        cost, n = cost.sel(seed=list(seeds)), n.sel(seed=list(seeds))
    final = final_episode_costs(cost, n, modes)
    out: dict = {}
    for algo in [str(a) for a in cost["algo"].values]:
        out[algo] = {}
        for mode in modes:
            vals = (np.asarray(final.sel(algo=algo, mode=mode).values, dtype=np.float64).ravel()
                    if final is not None and mode in final["mode"].values else np.empty(0))
            out[algo][mode] = vals[np.isfinite(vals)]
    return out


def cost_histograms(costs: Mapping[str, Mapping[str, np.ndarray]], bins: int = 20,
                    include: Sequence[float] = ()) -> dict[str, tuple[np.ndarray, dict[str, np.ndarray]]]:
    """Histogram counts per algorithm, on edges shared by that algorithm's modes.

    ``costs`` is :func:`final_costs` output. For each algorithm the ``bins + 1`` edges span
    min(0, costs, include)..max(costs, include) (``include``: values that must be on the axis, e.g.
    the bound d; a unit range around a constant). Returns ``{algo: (edges, {mode: counts})}``; the
    counts of a mode sum to its number of episodes.
    """
    out = {}
    for algo, modes in costs.items():
        pooled = [v for v in modes.values() if v.size] + [np.asarray(include, dtype=np.float64)]
        allv = np.concatenate(pooled) if pooled else np.zeros(1)
        allv = allv if allv.size else np.zeros(1)
        lo, hi = min(0.0, float(allv.min())), float(allv.max())
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        edges = np.linspace(lo, hi, bins + 1)
        out[algo] = (edges, {m: np.histogram(v, bins=edges)[0] for m, v in modes.items()})
    return out


# ------------------------------------------------------------------------------------- histograms
@dataclass(frozen=True)
class HistPanel:
    """Per-seed cost histograms of one (task, bound, algo): shared edges, per mode the mean and std over
    seeds of the share of a seed's episodes per bin, the number of seeds and of episodes."""

    edges: np.ndarray
    mean: dict[str, np.ndarray]
    std: dict[str, np.ndarray]
    n_seeds: dict[str, int]
    n_episodes: dict[str, int]


def hist_panels(costs: xr.DataArray, bins: int = 20, tail: float = 0.99) -> dict[tuple[str, float, str], HistPanel]:
    """From final-iterate costs with dims (algo, task, bound, seed, episode, mode) (NaN = no episode;
    :meth:`FigureMaker.final_costs`): per (task, bound, algo) the per-seed histograms on edges shared by
    the modes. The edges span 0 (or the minimum) to the `tail` quantile of the pooled costs (at least d
    and a bit beyond); costs above it count in the last bin, so a long tail does not squeeze the bulk
    (`tail=1`: up to the maximum)."""
    costs = costs.transpose("algo", "task", "bound", "seed", "episode", "mode")
    arr = np.asarray(costs.values, dtype=np.float64)
    modes = [str(m) for m in costs["mode"].values]
    out = {}
    for ai, a in enumerate(costs["algo"].values):
        for ti, t in enumerate(costs["task"].values):
            for bi, d in enumerate(costs["bound"].values.astype(np.float64)):
                block = arr[ai, ti, bi]  # (K, E, M)
                vals = block[np.isfinite(block)]
                if not vals.size:
                    continue
                top = float(np.quantile(vals, tail)) if tail < 1 else float(vals.max())
                lo, hi = min(0.0, float(vals.min())), max(top, 1.05 * float(d))
                edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
                mean, std, n_seeds, n_eps = {}, {}, {}, {}
                for mi, mode in enumerate(modes):
                    per_seed = []
                    for k in range(block.shape[0]):
                        c = block[k, :, mi]
                        c = c[np.isfinite(c)]
                        if c.size:
                            per_seed.append(np.histogram(np.clip(c, edges[0], edges[-1]), bins=edges)[0] / c.size)
                    if not per_seed:
                        continue
                    h = np.stack(per_seed)
                    mean[mode] = h.mean(0)
                    std[mode] = h.std(0, ddof=1) if len(per_seed) > 1 else np.full(bins, np.nan)
                    n_seeds[mode] = len(per_seed)
                    n_eps[mode] = int(np.isfinite(block[:, :, mi]).sum())
                if mean:
                    out[(str(t), float(d), str(a))] = HistPanel(edges, mean, std, n_seeds, n_eps)
    return out
