"""Run-level performance profiles (Agarwal et al. 2021; rliable's `create_performance_profile`), for costs.

For an algorithm, a setting and a metric X, the profile at threshold tau is the fraction of its runs
(seed x condition, every run with a value counted once) that are at least as good as tau: X <= tau for
a cost-like metric (V, D_norm, D_norm+, ...), X >= tau for a reward-like one. It shows the whole
distribution of runs, not an average: a curve further up-left is better for costs. Band: the
stratified bootstrap of `cube.stats.bootstrap` (seeds resampled within each condition; the fraction is
linear in the draw counts, one matmul per batch), percentile interval. With the same seeds in every
condition, the pooled fraction equals rliable's mean over tasks of per-task fractions.

The metrics are data-driven (`profile_metrics`): every metric record of `cube.stats.metrics` that is
cost-like and comparable across tasks and bounds (normalized by the bound), so a new record (e.g. CVaR)
gets a profile with no change here.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from cube.compute import Progress
from cube.errors import CubeError
from cube.stats.bootstrap import bootstrap_rng, check_boot, interval, strata, weighted_means
from cube.stats.metrics import METRIC, METRICS, check_metrics
from cube.stats.packing import condition_values
from cube.stats.runs import run_metrics, settings_arg

__all__ = ["NOT_COMPARABLE", "PROFILE_POINTS", "profile_metrics", "profile_points", "default_tau",
           "profile_fraction", "performance_profiles", "profile_frame"]

NOT_COMPARABLE = frozenset({"C"})
"""Cost-like metrics in task units (C̄: episodic cost), not comparable across tasks and bounds: no
profile by default."""
N_TAU = 101
PROFILE_POINTS: dict[str, tuple[float, ...]] = {"V": (0.0, 0.1, 0.5), "Dnorm": (0.0,), "Dplus": (0.1,), "CVaR": (0.0,)}
"""Thresholds each default grid holds exactly, so tables can read the profile there: the tier criteria
(V = 0, V <= 0.1, V <= 0.5, D_norm <= 0, D_norm+ <= 0.1; Table 1) and a worst tail within the bound."""


def profile_points(metric: str) -> tuple[float, ...]:
    """The thresholds a table shows of `metric`'s profile (PROFILE_POINTS; 0 for a metric not listed)."""
    return PROFILE_POINTS.get(metric, (0.0,))


def profile_metrics() -> tuple[str, ...]:
    """The metrics profiled by default: the registry's cost-like ones, minus NOT_COMPARABLE (V, D_norm,
    D_norm+ today; any new cost-like record joins)."""
    return tuple(m for m in METRICS if not METRIC[m].higher_is_better and m not in NOT_COMPARABLE)


def default_tau(values: np.ndarray, metric: str, n_points: int = N_TAU) -> np.ndarray:
    """Thresholds for `metric` over the finite `values` (all algorithms, so their profiles share an axis).

    V: n_points evenly on [0, 1]. Others (deviations in units of the bound, like the CDF's kappa):
    n_points evenly from min(values, 0) to min(max(values, 0), 3), then 25 geometric steps on to the
    largest value when it is beyond 3, so the resolution stays where safe runs are and the unconstrained
    baseline's far tail still ends at 1. The grid point nearest each of `profile_points(metric)` inside the
    even part is that threshold exactly (it moves less than half a step: the grid stays increasing)."""
    if metric == "V":
        return np.linspace(0.0, 1.0, n_points)
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    lo, hi = (min(float(v.min()), 0.0), max(float(v.max()), 0.0)) if v.size else (0.0, 1.0)
    if hi - lo <= 0:
        hi = lo + 1.0
    grid = np.linspace(lo, min(hi, max(3.0, lo + 1.0)), n_points)
    for t in profile_points(metric):
        if grid[0] <= t <= grid[-1]:
            grid[int(np.argmin(np.abs(grid - t)))] = t
    if hi > grid[-1]:
        grid = np.concatenate([grid, np.geomspace(grid[-1], hi, 26)[1:]])
    return grid


def profile_fraction(values: np.ndarray, tau: np.ndarray, higher_is_better: bool = False) -> np.ndarray:
    """Fraction of runs at least as good as each tau: values (..., runs) with NaN = no run -> (..., T).
    NaN where there is no run."""
    v = np.asarray(values, dtype=np.float64)[..., None]
    ok = np.isfinite(v)
    good = (v >= tau) if higher_is_better else (v <= tau)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (good & ok).sum(-2) / ok.sum(-2)


def _one_profile(values: np.ndarray, valid: np.ndarray, tau: np.ndarray, higher: bool, boot: int,
                 rng: np.random.Generator, ci: float, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(fraction, ci_low, ci_high) (T,) and the number of runs, for one metric's values (P, K)."""
    nan = np.full(tau.size, np.nan)
    packed, k = strata(values[..., None], valid)
    if not k.size:
        return nan, nan, nan, 0
    present = np.arange(packed.shape[1]) < k[:, None]
    good = (packed >= tau) if higher else (packed <= tau)  # (P', Kmax, T); padding rows never drawn
    good = (good & present[..., None]).astype(np.float64)
    fraction = good.sum((0, 1)) / k.sum()
    est = interval([(k, packed.shape[1])], boot, rng, ci,
                   lambda w: weighted_means(w, good).sum(1) / k.sum(), what)
    lo, hi = (nan, nan) if est is None else est[:2]
    return fraction, lo, hi, int(k.sum())


def performance_profiles(ss: xr.Dataset, settings=None, metrics: str | Sequence[str] | None = None,
                         tau: Mapping[str, Sequence[float]] | None = None, n_points: int = N_TAU,
                         boot: int = 2000, rng_seed: int = 0, ci: float = 0.95, iterates=None,
                         progress: Progress | None = None) -> xr.Dataset:
    """Run-level performance profiles with stratified-bootstrap bands.

    Returns dims (algo, setting, metric, point): fraction, ci_low, ci_high (NaN where an algorithm has no
    run with the metric; NaN band with a StatsWarning when a condition has fewer than 2 seeds); tau
    (metric, point): the thresholds (`tau[metric]`, else `default_tau` over every selected run of the
    setting(s)); n_runs (algo, setting, metric). attrs: direction per metric ("<=" or ">="), boot, ci,
    rng_seed and the cube's attrs (synthetic, selection). Draws: one stream per (rng_seed, algo,
    "profile:<setting>:<metric>")."""
    settings = settings_arg(settings, ss)
    metrics = profile_metrics() if metrics is None else check_metrics(metrics)
    check_boot(boot, ci)
    if n_points < 2:
        raise CubeError(f"a profile needs at least 2 thresholds, got {n_points}")
    algos = [str(a) for a in ss["algo"].values]
    runs = {s: run_metrics(ss, s, iterates) for s in settings}
    grids = {}
    for m in metrics:
        given = None if tau is None else tau.get(m)
        if given is not None:
            grid = np.asarray(given, dtype=np.float64)
            if grid.ndim != 1 or grid.size < 2 or not np.isfinite(grid).all() or np.any(np.diff(grid) <= 0):
                raise CubeError(f"thresholds of {m} must be at least 2 increasing finite numbers")
            grids[m] = grid
        else:
            grids[m] = default_tau(np.concatenate([runs[s][m].values.ravel() for s in settings]), m, n_points)
    size = max(g.size for g in grids.values())
    shape = (len(algos), len(settings), len(metrics), size)
    frac, lo, hi = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    n_runs = np.zeros(shape[:3], dtype=np.int64)
    done, total = 0, len(algos) * len(settings)
    for si, s in enumerate(settings):
        for ai, a in enumerate(algos):
            values = condition_values(runs[s], a, metrics)
            for mi, m in enumerate(metrics):
                g = grids[m]
                res = _one_profile(values[..., mi], np.isfinite(values[..., mi]), g, METRIC[m].higher_is_better,
                                   boot, bootstrap_rng(rng_seed, a, f"profile:{s}:{m}"), ci,
                                   f"profile band of {a}, {s}, {m}")
                frac[ai, si, mi, :g.size], lo[ai, si, mi, :g.size], hi[ai, si, mi, :g.size], n_runs[ai, si, mi] = res
            done += 1
            if progress:
                progress(done, total)
    taus = np.full((len(metrics), size), np.nan)
    for mi, m in enumerate(metrics):
        taus[mi, :grids[m].size] = grids[m]
    dims = ("algo", "setting", "metric", "point")
    out = xr.Dataset({"fraction": (dims, frac), "ci_low": (dims, lo), "ci_high": (dims, hi),
                      "tau": (("metric", "point"), taus), "n_runs": (dims[:3], n_runs)},
                     coords={"algo": algos, "setting": list(settings), "metric": list(metrics),
                             "point": np.arange(size)})
    out.attrs.update(ss.attrs)
    out.attrs.update(boot=boot, ci=ci, rng_seed=rng_seed,
                     direction={m: ">=" if METRIC[m].higher_is_better else "<=" for m in metrics})
    return out


PROFILE_COLUMNS = ("algo", "setting", "metric", "tau", "fraction", "ci_low", "ci_high", "n_runs")


def profile_frame(profiles: xr.Dataset) -> pd.DataFrame:
    """A long, CSV-ready table of `performance_profiles`: PROFILE_COLUMNS and a last `reason` (the code of
    `cube.stats.reasons.REASONS` of the row's first missing number: no-episodes where the algorithm has no
    run with the metric, one-seed where the fraction stands without a band). Grid padding is dropped."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        df = profiles[["fraction", "ci_low", "ci_high", "tau", "n_runs"]].to_dataframe().reset_index()
    df = df[df["tau"].notna()][list(PROFILE_COLUMNS)].reset_index(drop=True)
    df["reason"] = np.where(df["fraction"].isna(), "no-episodes", np.where(df["ci_low"].isna(), "one-seed", ""))
    return df
