"""Aggregate learning curves with stratified-bootstrap bands (beyond the paper; rliable's sample-efficiency
curve): per training iterate, or per bin of environment steps when runs differ in steps per iterate.

For every algorithm and column c (an iterate j, or an env-step bin):

1. per run, the metric X of the training episodes of that column, from the per-iterate sufficient
   statistics through the registry formulas (`cube.stats.metrics.metric_values`): R̄, C̄, D_norm, V, D_norm+
   and CVaR of the fixed policy pi_j (for a bin: the mean of X^j over the run's iterates in the bin, like
   eq. 5);
2. per condition (task, bound), the mean over the seeds that have episodes in that column;
3. the IQM over the conditions that have such seeds (`scipy.stats.trim_mean(x, 0.25)`);
4. a stratified-bootstrap percentile CI: a replicate draws, within every condition, as many seeds as it
   has (seeds with training episodes), with replacement, and recomputes 2 and 3 at every column with
   the same draws (a seed is resampled as its whole curve, all metrics together). The draws come from
   `stats.bootstrap_rng(rng_seed, algo, "train")` through `stats.stratified_bootstrap_weights`, so at an
   iterate j of a complete cube the band is the CI of `stats.aggregate_table(..., iterates=j)` of the
   `train` setting, and an algorithm's band does not depend on which other algorithms are selected.

Each metric counts the seeds that have a value for it (V, D_norm+ and CVaR need every episode's cost, so
runs that hold only per-epoch means, flagged `means_only`, count for R̄, C̄ and D_norm only).
A column where an included condition has fewer than 2 seeds gets a NaN CI (a `StatsWarning` says so), as
everywhere in `cube.stats`. Columns without any training episode (outside a `--iterates` window) are
dropped. `cube.render.data.learning_curve_csv` / `learning_curve_json` export the result.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import xarray as xr

from cube.compute import Progress
from cube.errors import CubeError
from cube.schema import MEANS_ONLY, RUN_DIMS
from cube.stats.bootstrap import StatsWarning, bootstrap_rng, check_boot, percentile_ci, replicates, strata
from cube.stats.metrics import METRIC, check_metrics, iqm, metric_values
from cube.stats.runs import formula_inputs

__all__ = ["aggregate_learning_curve", "per_run_curves", "steps_differ"]

BY = ("iterate", "env_steps", "auto")
CURVE_BATCH = 256  # replicates per batch: a replicate is a whole curve (columns x metrics), so smaller batches


def _train_cells(ss: xr.Dataset, metrics: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per-run per-iterate metrics of the `train` episodes: values and validity, both (A, T, B, K, J, F).

    A cell counts where it holds episodes (finite C̄; R̄ may be unknown); a metric that needs every episode's cost
    (V, D_norm+) is left out where the cube holds only per-epoch means (`means_only`)."""
    if "train" not in ss["mode"].values:
        raise CubeError("the cube has no 'train' mode: learning curves need training episodes")
    one = ss.sel(mode="train")
    arrays = formula_inputs(one, (*RUN_DIMS, "iterate"))
    d = ss["bound"].values.astype(np.float64).reshape(1, 1, -1, 1, 1)
    vals = metric_values(arrays, d, tuple(dict.fromkeys(("R", "C", *metrics))))
    cell = (arrays["n"] > 0) & np.isfinite(vals["C"])  # a cell counts where it has costs
    means_only = None
    if MEANS_ONLY in one and bool(one[MEANS_ONLY].any()):
        means_only = one[MEANS_ONLY].transpose(*RUN_DIMS).values.astype(bool)[..., None]
    valid = []
    for m in metrics:
        ok = cell & np.isfinite(vals[m])
        if means_only is not None and METRIC[m].needs_episodes:
            ok &= ~means_only
        valid.append(ok)
    return np.stack([vals[m] for m in metrics], -1), np.stack(valid, -1)


def steps_differ(env_steps: xr.DataArray | None) -> bool:
    """Whether runs differ in env steps at the same iterate (then per-step bins are the fair x-axis)."""
    if env_steps is None:
        return False
    arr = np.asarray(env_steps.transpose(*RUN_DIMS, "iterate").values, dtype=np.float64)
    arr = arr.reshape(-1, arr.shape[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        spread = np.nanmax(arr, axis=0) - np.nanmin(arr, axis=0)
    return bool(np.any(spread[np.isfinite(spread)] > 0))


def _bin(values: np.ndarray, valid: np.ndarray, steps: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per run and bin (edges[b], edges[b+1]] (the first bin closed): mean of the valid per-iterate values.

    values, valid (..., J, F), steps (..., J) -> values, valid (..., NB, F)."""
    nb = edges.size - 1
    lead = steps.shape[:-1]
    runs = int(np.prod(lead))
    b = np.clip(np.searchsorted(edges, steps, side="left") - 1, 0, nb - 1)
    inside = np.isfinite(steps) & (steps >= edges[0]) & (steps <= edges[-1])
    index = np.arange(runs).reshape(*lead, 1) * nb + b
    sums, counts = [], []
    for f in range(values.shape[-1]):
        ok = valid[..., f] & inside
        counts.append(np.bincount(index[ok], minlength=runs * nb).reshape(*lead, nb))
        sums.append(np.bincount(index[ok], weights=values[..., f][ok], minlength=runs * nb).reshape(*lead, nb))
    count, total = np.stack(counts, -1), np.stack(sums, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan), count > 0


def per_run_curves(ss: xr.Dataset, metrics: Sequence[str] | None = None, by: str = "iterate",
                   env_steps: xr.DataArray | None = None, bins: int | Sequence[float] | None = None
                   ) -> xr.Dataset:
    """Per-run training curves: dims (algo, task, bound, seed, iterate|step_bin); one var per metric
    (NaN where the run has no training episode in the column).

    by="iterate": X of pi_j. by="env_steps": the mean of X^j over the run's iterates whose `env_steps`
    (cube variable, run dims + iterate) lie in the bin; `bins` = the number of equal bins on
    [0, max env steps] (default: the number of iterates, at most 100) or the bin edges.
    """
    metrics = check_metrics(metrics)
    values, valid = _train_cells(ss, metrics)
    coords = {d: ss[d].values for d in RUN_DIMS}
    if by == "iterate":
        col, extra = "iterate", {"iterate": ss["iterate"].values}
    elif by == "env_steps":
        if env_steps is None:
            raise CubeError("learning curves by env steps need the cube's env_steps variable, which it lacks: "
                            "use by='iterate'")
        steps = np.asarray(env_steps.sel({d: coords[d] for d in RUN_DIMS}).sel(iterate=ss["iterate"].values)
                           .transpose(*RUN_DIMS, "iterate").values, dtype=np.float64)
        if isinstance(bins, int | np.integer) or bins is None:
            used = valid.any(-1) & np.isfinite(steps)
            top = float(steps[used].max()) if used.any() else np.nan
            if not np.isfinite(top) or top <= 0:
                raise CubeError("no run has env_steps for its training iterates: use by='iterate'")
            n_bins = int(bins) if bins is not None else min(int(ss.sizes["iterate"]), 100)
            if n_bins < 1:
                raise CubeError(f"bins must be >= 1, got {n_bins}")
            edges = np.linspace(0.0, float(top), n_bins + 1)
        else:
            edges = np.asarray(bins, dtype=np.float64)
            if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
                raise CubeError("bin edges must be an increasing sequence of at least two numbers")
        values, valid = _bin(values, valid, steps, edges)
        col = "step_bin"
        extra = {"step_bin": 0.5 * (edges[:-1] + edges[1:]), "step_lo": ("step_bin", edges[:-1]),
                 "step_hi": ("step_bin", edges[1:])}
    else:
        raise CubeError(f"unknown curve axis {by!r}: use iterate or env_steps")
    dims = (*RUN_DIMS, col)
    out = xr.Dataset({m: (dims, np.where(valid[..., i], values[..., i], np.nan)) for i, m in enumerate(metrics)},
                     coords={**coords, **extra})
    out.attrs.update(ss.attrs)
    return out


def _algo_curve(values: np.ndarray, valid: np.ndarray, boot: int, rng: np.random.Generator, ci: float,
                what: str) -> tuple[np.ndarray, ...]:
    """One algorithm: values, valid (P, K, C, F) -> value, lo, hi (C, F), n_conditions (C,).

    The bootstrap's unit is a seed with training episodes (its whole curve is resampled); each column's
    condition mean is over the drawn seeds that have a value there."""
    n_col, n_f = values.shape[2], values.shape[3]
    nan = np.full((n_col, n_f), np.nan)
    run_ok = valid.any((-1, -2))  # (P, K)
    flat = (*values.shape[:2], n_col * n_f)
    xm, k = strata(np.where(valid, values, 0.0).reshape(flat), run_ok)  # (P', Kmax, C*F), (P',)
    if not k.size:
        return nan, nan.copy(), nan.copy(), np.zeros(n_col, dtype=np.int64)
    m, _ = strata(valid.reshape(flat).astype(np.float64), run_ok)
    seeds_at = m.sum(1)  # (P', C*F) seeds with a value in each column
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(seeds_at > 0, xm.sum(1) / seeds_at, np.nan)
    value = iqm(means, axis=0, ignore_nan=True).reshape(n_col, n_f)
    n_cond = (seeds_at.reshape(-1, n_col, n_f).max(-1) > 0).sum(0)
    few = (seeds_at == 1).any(0).reshape(n_col, n_f)  # an included condition with a single seed -> NaN CI
    if few.any():
        warnings.warn(f"{what}: {int(few.any(-1).sum())} column(s) hold a condition with fewer than 2 seeds, "
                      "CI reported as NaN there", StatsWarning, stacklevel=4)
    complete = bool(np.all(seeds_at == k[:, None]))  # every seed has every column: plain means, plain IQM
    cut = k.size // 4

    def statistic(w: np.ndarray) -> np.ndarray:  # (b, P', Kmax) draw counts -> (b, C*F)
        w = np.ascontiguousarray(w.transpose(1, 0, 2))
        num = np.matmul(w, xm)
        if complete:
            num /= k[:, None, None]
            num.sort(axis=0)
            return num[cut:k.size - cut].mean(0)
        den = np.matmul(w, m)
        with np.errstate(invalid="ignore", divide="ignore"):
            return iqm(np.where(den > 0, num / den, np.nan), axis=0, ignore_nan=True)

    reps = replicates([(k, xm.shape[1])], boot, rng, statistic, batch=CURVE_BATCH)
    lo, hi = (x.reshape(n_col, n_f) for x in percentile_ci(reps, ci, skip_nan=not complete))
    lo[few], hi[few] = np.nan, np.nan
    return value, lo, hi, n_cond


def aggregate_learning_curve(ss: xr.Dataset, metrics: Sequence[str] | None = None, boot: int = 2000,
                             rng_seed: int = 0, ci: float = 0.95, by: str = "iterate",
                             bins: int | Sequence[float] | None = None, progress: Progress | None = None,
                             env_steps: xr.DataArray | None = None) -> xr.Dataset:
    """IQM over task-bound conditions of per-condition seed means of each metric, per training iterate
    (or env-step bin), with a stratified-bootstrap percentile CI (see the module docstring).

    ss: sufficient statistics (`stats.load_suffstats`, optionally `stats.select`ed). metrics: None = all
    of R, C, Dnorm, V, Dplus, CVaR (at `stats.with_cvar_alpha`'s alpha, 0.1 by default). by: "iterate",
    "env_steps" (needs `env_steps`, the cube's variable with
    dims run dims + iterate; `bins` = number of equal bins or edges) or "auto" (env steps when they are
    given and differ between runs at the same iterate, else iterates).
    Returns dims (algo, metric, iterate|step_bin): value, ci_low, ci_high; (algo, iterate|step_bin):
    n_conditions. attrs: boot, rng_seed, ci, by, setting="train", plus those of `ss` (synthetic,
    selection).
    """

    metrics = check_metrics(metrics)
    check_boot(boot, ci)
    if by not in BY:
        raise CubeError(f"unknown curve axis {by!r}: use one of {', '.join(BY)}")
    if by == "auto":
        by = "env_steps" if steps_differ(env_steps) else "iterate"
    runs = per_run_curves(ss, metrics, by, env_steps, bins)
    col = "iterate" if by == "iterate" else "step_bin"
    arr = np.stack([runs[m].transpose(*RUN_DIMS, col).values for m in metrics], -1)  # (A, T, B, K, C, F)
    valid = np.isfinite(arr)
    a_n, t_n, b_n, k_n, c_n, f_n = arr.shape
    arr = arr.reshape(a_n, t_n * b_n, k_n, c_n, f_n)
    valid = valid.reshape(a_n, t_n * b_n, k_n, c_n, f_n)
    algos = [str(a) for a in runs["algo"].values]
    shape = (a_n, f_n, c_n)
    value, lo, hi = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    n_cond = np.zeros((a_n, c_n), dtype=np.int64)
    for ai, algo in enumerate(algos):
        v, l_, h, n = _algo_curve(arr[ai], valid[ai], boot, bootstrap_rng(rng_seed, algo, "train"), ci,
                                  f"learning-curve band of {algo}")
        value[ai], lo[ai], hi[ai], n_cond[ai] = v.T, l_.T, h.T, n
        if progress:
            progress(ai + 1, a_n)
    keep = n_cond.any(0)
    if not keep.any():
        raise CubeError("the selection holds no training episodes: learning curves need mode 'train'")
    dims3, dims2 = ("algo", "metric", col), ("algo", col)
    coords = {"algo": algos, "metric": list(metrics), col: runs[col].values}
    coords.update({c: (col, runs[c].values) for c in ("step_lo", "step_hi") if c in runs.coords})
    out = xr.Dataset({"value": (dims3, value), "ci_low": (dims3, lo), "ci_high": (dims3, hi),
                      "n_conditions": (dims2, n_cond)}, coords=coords).isel({col: np.flatnonzero(keep)})
    out.attrs.update(ss.attrs)
    out.attrs.update({"boot": int(boot), "rng_seed": int(rng_seed), "ci": float(ci), "by": by, "setting": "train",
                      "statistic": "IQM over task-bound conditions of per-condition seed means; "
                                   "stratified-bootstrap percentile CI over seeds"})
    return out


# ------------------------------------------------------------------------------------------ export
