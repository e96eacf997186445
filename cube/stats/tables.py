"""The statistics tables of the paper (Spoor et al., sec. 3 and A.1) from sufficient statistics.

Per condition (m, d): seed mean and sample std (ddof=1) of the per-run metrics (`cube.stats.runs`). Aggregate
over conditions: the IQM with a stratified-bootstrap CI (`cube.stats.bootstrap`), tiers from the IQMs.
CDF(kappa) (eq. 9) = pooled ratio of the episodes with (c - d)/d <= kappa. Every table is an xarray Dataset;
the comparisons beyond the paper (probability of improvement, greedy-minus-exploration gap) are in
`cube.stats.compare`, built on the helpers here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import xarray as xr

from cube.compute import Progress
from cube.errors import CubeError
from cube.stats.bootstrap import StatsWarning, bootstrap_rng, check_boot, interval, iqm_interval, strata
from cube.stats.metrics import METRICS, tier
from cube.stats.runs import mark_means_only, run_cdf_counts, run_metrics, seed_mean_std, settings_arg

__all__ = ["condition_table", "aggregate_table", "cdf_curves", "Progress"]


def condition_table(ss: xr.Dataset, settings=None, iterates=None) -> xr.Dataset:
    """Per condition: dims (algo, task, bound, setting); vars {m}_mean, {m}_std (over seeds, ddof=1),
    n_seeds (runs with episodes in that setting) and tier (from the seed means; -1 = no data)."""
    settings = settings_arg(settings, ss)
    parts = []
    for s in settings:
        rm = run_metrics(ss, s, iterates)
        out = xr.Dataset()
        for m in METRICS:
            out[f"{m}_mean"], out[f"{m}_std"] = seed_mean_std(rm[m])
        out["n_seeds"] = rm["C"].notnull().sum("seed")
        one = int((out["n_seeds"] == 1).sum())
        if one:
            warnings.warn(f"{one} condition(s) of setting {s} have only 1 seed: std reported as NaN",
                          StatsWarning, stacklevel=2)
        parts.append(out)
    ct = xr.concat(parts, dim=xr.DataArray(list(settings), dims="setting", name="setting"))
    ct["tier"] = xr.apply_ufunc(tier, ct["Dnorm_mean"], ct["V_mean"], ct["Dplus_mean"])
    ct = ct.transpose("algo", "task", "bound", "setting")
    ct.attrs.update(ss.attrs)
    return mark_means_only(ct, ss, settings, ("algo", "task", "bound"))



# ------------------------------------------------------------------------------ bootstrap tables
def stacked(rm: xr.Dataset, algo, metrics: Sequence[str] = METRICS) -> tuple[np.ndarray, np.ndarray]:
    """(P, K, F=len(metrics)) values for one algorithm (P = task x bound) and run validity (P, K)."""
    arr = np.stack([rm[m].sel(algo=algo).transpose("task", "bound", "seed").values for m in metrics], -1)
    arr = arr.reshape(-1, arr.shape[2], arr.shape[3])
    return arr, ~np.isnan(arr).any(-1)


def availability_groups(values: np.ndarray) -> list[tuple[list[int], np.ndarray]]:
    """Metric columns of values (P, K, F) grouped by the runs that hold them: [(columns, valid (P, K))].

    One group when every run holds every metric (episodes throughout); otherwise, e.g., R, C, D_norm
    over all runs and V, D_norm+ over the runs with per-episode data, each aggregated on its own runs."""
    held = ~np.isnan(values)
    groups: dict[bytes, list[int]] = {}
    for f in range(values.shape[-1]):
        if held[..., f].any():
            groups.setdefault(held[..., f].tobytes(), []).append(f)
    return [(cols, held[..., cols[0]]) for cols in groups.values()]


def grouped_iqm(values: np.ndarray, boot: int, rng_seed: int, label: str, setting: str, ci: float,
                 what: str, names: Sequence[str] = METRICS):
    """`iqm_interval` per availability group of metric columns. The first group draws from the
    (rng_seed, label, setting) stream (so cubes of episodes give exactly the classic single-group
    result); others from streams named by their metrics. Returns value, ci_low, ci_high (F,),
    n_strata of the first group, and reps (boot, F) when one group holds every column, else None."""
    f = values.shape[-1]
    value, lo, hi = nan_array(f), nan_array(f), nan_array(f)
    n_strata, reps_all = 0, None
    for g, (cols, valid) in enumerate(availability_groups(values)):
        tag = setting if g == 0 else f"{setting}:{','.join(names[c] for c in cols)}"
        v, low, high, k, reps = iqm_interval(values[..., cols], valid, boot, bootstrap_rng(rng_seed, label, tag),
                                             ci, what)
        value[cols], lo[cols], hi[cols] = v, low, high
        if g == 0:
            n_strata = k
            reps_all = reps if len(cols) == f else None
    return value, lo, hi, n_strata, reps_all


def nan_array(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan)


def each(outer: Sequence, inner: Sequence, progress: Progress | None,
          prepare: Callable[[object], object] = lambda x: None) -> Iterator[tuple[int, int, object, object]]:
    """(i, j, inner[j], prepare(outer[i])) over outer x inner, calling progress(done, total) after each."""
    total, done = len(outer) * len(inner), 0
    for i, o in enumerate(outer):
        data = prepare(o)
        for j, x in enumerate(inner):
            yield i, j, x, data
            done += 1
            if progress:
                progress(done, total)


def result_table(data: dict, coords: dict, ss: xr.Dataset, **attrs) -> xr.Dataset:
    """A result Dataset carrying the suffstats' attrs (selection, synthetic) and the bootstrap's."""
    out = xr.Dataset(data, coords=coords)
    out.attrs.update(ss.attrs)
    out.attrs.update(attrs)
    return out


def aggregate_table(ss: xr.Dataset, settings=None, boot: int = 2000, rng_seed: int = 0, ci: float = 0.95,
                    iterates=None, progress: Progress | None = None) -> xr.Dataset:
    """IQM over conditions of seed means, with stratified-bootstrap percentile CIs, and the tier.

    Returns dims (algo, setting, metric): value, ci_low, ci_high; (algo, setting): tier (-1 = no data),
    tier_stability (fraction of bootstrap replicates whose IQMs give the same tier: how close the tier
    is to a threshold, cf. the paper's discussion) and n_conditions (conditions with at least one run).
    """
    settings = settings_arg(settings, ss)
    check_boot(boot, ci)
    algos = list(ss["algo"].values)
    shape = (len(algos), len(settings), len(METRICS))
    value, lo, hi = nan_array(*shape), nan_array(*shape), nan_array(*shape)
    n_cond = np.zeros(shape[:2], dtype=np.int64)
    stability = nan_array(*shape[:2])
    tier_ok = np.zeros(shape[:2], dtype=bool)
    mi = [METRICS.index(m) for m in ("Dnorm", "V", "Dplus")]
    for si, ai, a, rm in each(settings, algos, progress, lambda s: run_metrics(ss, s, iterates)):
        s = settings[si]
        values, _ = stacked(rm, a)
        res = grouped_iqm(values, boot, rng_seed, a, s, ci, f"CI of {a}, {s}")
        value[ai, si], lo[ai, si], hi[ai, si], n_cond[ai, si], reps = res
        # A tier needs D_norm, V and D_norm+ of the same runs: never from means-only runs.
        tier_ok[ai, si] = any(set(mi) <= set(cols) for cols, _ in availability_groups(values))
        if reps is not None:
            point = tier(*value[ai, si, mi])
            stability[ai, si] = np.mean(tier(*reps[:, mi].T) == point)
    im = {m: np.where(tier_ok, value[..., i], np.nan) for i, m in enumerate(METRICS)}
    dims3, dims2 = ("algo", "setting", "metric"), ("algo", "setting")
    out = result_table({"value": (dims3, value), "ci_low": (dims3, lo), "ci_high": (dims3, hi),
                  "tier": (dims2, tier(im["Dnorm"], im["V"], im["Dplus"])), "tier_stability": (dims2, stability),
                  "n_conditions": (dims2, n_cond)},
                 {"algo": algos, "setting": list(settings), "metric": list(METRICS)}, ss,
                 boot=boot, rng_seed=rng_seed, ci=ci)
    return mark_means_only(out, ss, settings, ("algo",))


def cdf_curves(ss: xr.Dataset, settings=None, boot: int = 2000, rng_seed: int = 0, ci: float = 0.95,
               iterates=None, progress: Progress | None = None) -> xr.Dataset:
    """Aggregate empirical CDF of (c - d)/d at the grid `kappa` (eq. 9) with stratified-bootstrap CIs.

    CDF(kappa) = sum over conditions, seeds and episodes of 1[(c - d)/d <= kappa] / number of those
    episodes: the pooled ratio, every seed weighted by its episode count (for `train`, the episodes of
    all iterates pooled). A bootstrap replicate resamples seeds with replacement within each condition
    and recomputes the same pooled ratio (sum of drawn L / sum of drawn N). Returns dims
    (algo, setting, kappa): cdf, ci_low, ci_high (NaN where an algorithm has no data; NaN band with a
    warning when a condition has fewer than 2 seeds).
    """
    settings = settings_arg(settings, ss)
    check_boot(boot, ci)
    if "le" not in ss:
        raise CubeError("these sufficient statistics have no CDF counts: recompute them with load_suffstats")
    algos, kappa = list(ss["algo"].values), ss["kappa"].values
    shape = (len(algos), len(settings), kappa.size)
    cdf, lo, hi = nan_array(*shape), nan_array(*shape), nan_array(*shape)
    for si, ai, a, (le, n) in each(settings, algos, progress, lambda s: run_cdf_counts(ss, s, iterates)):
        s = settings[si]
        cnt = le.sel(algo=a).transpose("task", "bound", "seed", "kappa").values
        nn = n.sel(algo=a).transpose("task", "bound", "seed").values
        vals = np.concatenate([cnt, nn[..., None]], -1).reshape(-1, nn.shape[2], kappa.size + 1)
        packed, k = strata(vals, (nn > 0).reshape(-1, nn.shape[2]))
        if not k.size:
            continue
        cdf[ai, si] = packed[..., :-1].sum((0, 1)) / packed[..., -1].sum()
        # Numerator and denominator are linear in the draw counts: one matmul per batch.
        flat = packed.reshape(-1, packed.shape[2])
        est = interval([(k, packed.shape[1])], boot, bootstrap_rng(rng_seed, a, s), ci,
                       lambda w, x=flat: _ratio(w.reshape(w.shape[0], -1) @ x), f"CDF band of {a}, {s}")
        if est is not None:
            lo[ai, si], hi[ai, si], _ = est
    dims = ("algo", "setting", "kappa")
    out = result_table({"cdf": (dims, cdf), "ci_low": (dims, lo), "ci_high": (dims, hi)},
                 {"algo": algos, "setting": list(settings), "kappa": kappa}, ss,
                 boot=boot, rng_seed=rng_seed, ci=ci)
    return mark_means_only(out, ss, settings, ("algo",))



def _ratio(sums: np.ndarray) -> np.ndarray:
    """(b, G + 1) drawn sums [L(kappa)..., N] -> (b, G) pooled fractions."""
    return sums[:, :-1] / sums[:, -1:]

