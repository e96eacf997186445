"""Per-condition curves and histograms: the paper's training curves and final-cost histograms as data.

Everything here takes and returns numpy arrays or xarray objects, so the TUI and figures stay thin
presentation layers and these functions can be tested on their own:

* :func:`moving_average` / :func:`training_curves`: per-iterate seed mean and sample std of the
  reward and cost after a trailing moving average (input: ``stats.iterate_metrics``; the seed
  statistics are ``cube.stats.runs.seed_mean_std``, as in the condition table).
* :func:`multiplier_curves`: seed mean/std of the per-iterate multiplier (lambda, kappa, nu) or of any
  other per-iterate variable (:func:`iterate_var_names`: a PID state, a Saute budget, CRPO's regime, SAC's
  temperature ...).
* :func:`final_costs` / :func:`hist_panels` (with ``cube.schema.final_iterate``): the final evaluation
  episodes of one condition (task, bound) for the ``expl`` and ``greedy`` modes and their
  histograms on shared bin edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from cube.compute import Progress
from cube.schema import RUN_DIMS, final_iterate
from cube.stats.runs import seed_mean_std

__all__ = ["moving_average", "training_curves", "multiplier_curves", "iterate_var_names",
           "final_iterate", "final_costs",
           "final_episode_costs", "hist_panels", "HistPanel"]


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


NOT_CURVES = ("env_steps",)
"""Per-iterate variables that are an x axis, not a curve."""


def iterate_var_names(ds: xr.Dataset, with_values: bool = False) -> tuple[str, ...]:
    """The cube's per-iterate variables (dims algo, task, bound, seed, iterate) other than ``env_steps``:
    ``multiplier`` first, then by name. ``with_values``: only those with a finite value in ``ds``
    (reads them; each is one float per run and iterate)."""
    names = [str(n) for n, v in ds.data_vars.items()
             if set(v.dims) == {*RUN_DIMS, "iterate"} and n not in NOT_CURVES]
    names.sort(key=lambda n: (n != "multiplier", n))
    if with_values:
        names = [n for n in names if bool(np.isfinite(np.asarray(ds[n].values, dtype=np.float64)).any())]
    return tuple(names)


def multiplier_curves(ds: xr.Dataset, window: int = 1, var: str = "multiplier") -> xr.Dataset | None:
    """Seed mean/std per iterate of the multiplier, or of another per-iterate variable ``var``
    (:func:`iterate_var_names`), smoothed like :func:`training_curves`.

    ``ds`` is the (selected) cube; returns dims (algo, task, bound, iterate) with vars ``mult_mean``,
    ``mult_std`` and attrs ``var`` (the name) and ``nonnegative`` (1 when no value is below 0, so a
    1-sigma band may stop at 0), or None when the cube has no ``var``. Runs without it are all NaN.
    """
    if var not in ds:
        return None
    da = ds[var].transpose(*RUN_DIMS, "iterate").load()
    values = np.asarray(da.values, dtype=np.float64)
    smooth = da.copy(data=moving_average(values, window, axis=-1))
    mean, std = seed_mean_std(smooth)
    finite = values[np.isfinite(values)]
    nonnegative = int(finite.size == 0 or bool(finite.min() >= 0))
    return xr.Dataset({"mult_mean": mean, "mult_std": std}, attrs={"var": var, "nonnegative": nonnegative})


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
    counts: dict[str, np.ndarray]
    """Per mode: episodes per bin pooled over seeds (costs beyond the last edge in the last bin)."""


def _edges(vals: np.ndarray, d: float, bins: int, tail: float) -> np.ndarray:
    """`bins + 1` edges from 0 (or the minimum) to the `tail` quantile of `vals` (at least d and a bit
    beyond)."""
    top = float(np.quantile(vals, tail)) if tail < 1 else float(vals.max())
    lo, hi = min(0.0, float(vals.min())), max(top, 1.05 * float(d))
    return np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)


def hist_panels(costs: xr.DataArray, bins: int = 20, tail: float = 0.99,
                own_scale: Sequence[str] = ()) -> dict[tuple[str, float, str], HistPanel]:
    """The one histogram engine of final costs (figures and the TUI). From final-iterate costs with dims
    (algo, task, bound, seed, episode, mode) (NaN = no episode; :func:`final_episode_costs`): per (task,
    bound, algo) the per-seed histograms (`mean`, `std`: share of a seed's episodes per bin) and the
    pooled `counts`, on edges shared by every algorithm of the condition and its modes, so panels compare
    at a glance. The edges span 0 (or the minimum) to the `tail` quantile of the pooled costs (at least d
    and a bit beyond); costs above it count in the last bin, so a long tail does not squeeze the bulk
    (`tail=1`: up to the maximum). Algorithms in `own_scale` (the not-safe baseline, whose costs are often
    far above the rest) get edges of their own and do not widen the others'."""
    costs = costs.transpose("algo", "task", "bound", "seed", "episode", "mode")
    arr = np.asarray(costs.values, dtype=np.float64)
    modes = [str(m) for m in costs["mode"].values]
    algos = [str(a) for a in costs["algo"].values]
    shared = np.array([a not in own_scale for a in algos])
    out = {}
    for ti, t in enumerate(costs["task"].values):
        for bi, d in enumerate(costs["bound"].values.astype(np.float64)):
            pooled = arr[shared, ti, bi]
            pooled = pooled[np.isfinite(pooled)]
            common = _edges(pooled, d, bins, tail) if pooled.size else None
            for ai, a in enumerate(algos):
                block = arr[ai, ti, bi]  # (K, E, M)
                vals = block[np.isfinite(block)]
                if not vals.size:
                    continue
                edges = common if shared[ai] and common is not None else _edges(vals, d, bins, tail)
                panel = _panel(block, edges, modes)
                if panel is not None:
                    out[(str(t), float(d), a)] = panel
    return out


def _panel(block: np.ndarray, edges: np.ndarray, modes: Sequence[str]) -> HistPanel | None:
    """One (task, bound, algo) panel of `hist_panels` from its costs (K seeds, E episodes, M modes)."""
    bins = edges.size - 1
    mean, std, n_seeds, n_eps, counts = {}, {}, {}, {}, {}
    for mi, mode in enumerate(modes):
        per_seed = []
        for k in range(block.shape[0]):
            c = block[k, :, mi]
            c = c[np.isfinite(c)]
            if c.size:
                per_seed.append(np.histogram(np.clip(c, edges[0], edges[-1]), bins=edges)[0])
        if not per_seed:
            continue
        h = np.stack(per_seed).astype(np.float64)
        share = h / h.sum(1, keepdims=True)
        mean[mode] = share.mean(0)
        std[mode] = share.std(0, ddof=1) if len(per_seed) > 1 else np.full(bins, np.nan)
        n_seeds[mode] = len(per_seed)
        n_eps[mode] = int(h.sum())
        counts[mode] = h.sum(0).astype(np.int64)
    return HistPanel(edges, mean, std, n_seeds, n_eps, counts) if mean else None
