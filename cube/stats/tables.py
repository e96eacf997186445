"""The statistics tables of the paper (Spoor et al., sec. 3 and A.1) from sufficient statistics.

Per run (algo a, task m, bound d, seed k) and policy iterate j, the metrics of `cube.stats.metrics` (formulas
from the sufficient statistics of `cube.stats.suffstats`). Settings: `train` averages X^j over the training
iterates that hold episodes (eq. 5; the paper's 1/J over j = 0..J is read as the mean over iterates);
`final_expl` and `final_greedy` take X at the final evaluation (the last iterate holding episodes of
mode `expl` / `greedy`). A run with no episodes for a setting is left out of that setting.

Per condition (m, d): seed mean and sample std (ddof=1). Aggregate over conditions: the IQM with a
stratified-bootstrap CI (`cube.stats.bootstrap`), tiers from the IQMs. CDF(kappa) (eq. 9) = pooled ratio of
the episodes with (c - d)/d <= kappa. Beyond the paper: the probability of improvement between two
algorithms and the paired greedy-minus-exploration gap. Every table is an xarray Dataset.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import xarray as xr

from cube.compute import Progress
from cube.errors import CubeError
from cube.schema import MEANS_ONLY, RUN_DIMS, RunKey, final_iterate, same_bound
from cube.selection import Selection
from cube.stats.bootstrap import (
    StatsWarning,
    bootstrap_rng,
    check_boot,
    interval,
    iqm_interval,
    strata,
)
from cube.stats.metrics import (
    METRIC,
    METRICS,
    SETTING,
    SETTINGS,
    check_metrics,
    directions,
    metric_values,
    tier,
)
from cube.stats.suffvars import STATS_VARS, SUM_VARS

__all__ = [
    "select", "run_metrics", "iterate_metrics", "condition_table", "aggregate_table", "cdf_curves",
    "probability_of_improvement", "greedy_expl_gap", "settings_arg", "available_settings", "require_data",
    "runs_without", "some_labels", "seed_mean_std", "not_available_text", "Progress",
]



# ----------------------------------------------------------------------------------------- selection
def _match(ss: xr.Dataset, dim: str, wanted: Sequence) -> list:
    have = list(ss[dim].values)
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


def select(ss: xr.Dataset, selection: Selection) -> xr.Dataset:
    """Restrict suffstats to a Selection; CubeError for unknown labels or an empty result.

    Run labels are subset; `selection.iterates` blanks (zero counts) `train` cells outside the window,
    so iterate-resolved views keep their iterate axis and the final evaluations are untouched.
    """
    for dim, wanted in zip(RUN_DIMS, (selection.algos, selection.tasks, selection.bounds, selection.seeds),
                           strict=True):
        if wanted is not None:
            ss = ss.sel({dim: _match(ss, dim, wanted)})
    if any(ss.sizes[d] == 0 for d in RUN_DIMS):
        raise CubeError("the selection leaves no runs: widen --algos/--tasks/--bounds/--seeds")
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


def _iterate_window(ss: xr.Dataset, iterates) -> xr.Dataset:
    return ss if iterates is None else select(ss, Selection(iterates=iterates))


def _mode(setting: str) -> str:
    """The cube mode a setting reads; CubeError for an unknown setting."""
    if setting not in SETTING:
        raise CubeError(f"unknown setting {setting!r}: use one of {', '.join(SETTINGS)}")
    return SETTING[setting].mode


# ------------------------------------------------------------------------------- per-run metrics
def _cell_metrics(ss: xr.Dataset) -> xr.Dataset:
    """Metrics X^j per cell (the dims of `n`); NaN where the cell has no episodes. The registry's
    formulas on plain numpy arrays (xarray's alignment of a dozen operations costs more than the arithmetic)."""
    dims = ss["n"].dims
    d = ss["bound"].values.astype(np.float64).reshape([-1 if x == "bound" else 1 for x in dims])
    out = metric_values({v: ss[v].transpose(*dims).values for v in SUM_VARS}, d)
    means_only = _means_only(ss)
    if means_only is not None:  # means of windows of episodes: no per-episode metric exists there
        for name in METRICS:
            if METRIC[name].needs_episodes:
                out[name] = np.where(means_only.broadcast_like(ss["n"]).transpose(*dims).values, np.nan, out[name])
    return xr.Dataset({k: (dims, v) for k, v in out.items()}, coords=dict(ss["n"].coords))


def _means_only(ss: xr.Dataset) -> xr.DataArray | None:
    """Where the cube holds per-epoch means instead of episodes (run dims [+ mode]); None if nowhere."""
    if MEANS_ONLY not in ss or not bool(ss[MEANS_ONLY].any()):
        return None
    return ss[MEANS_ONLY]


def _mark_means_only(out: xr.Dataset, ss: xr.Dataset, settings: Sequence[str], over: Sequence[str]) -> xr.Dataset:
    """Add `means_only` (dims `over` + setting): where a selected run holds only per-epoch means for the
    setting's mode, so the metrics that need every episode are "not available" there (and say why in
    attrs `not_available`). Nothing is added for cubes of episodes."""
    flag = _means_only(ss)
    if flag is None:
        return out
    parts = [flag.sel(mode=SETTING[s].mode).drop_vars("mode", errors="ignore")
             .any([d for d in RUN_DIMS if d not in over])
             for s in settings]
    out["means_only"] = xr.concat(parts, dim=xr.DataArray(list(settings), dims="setting", name="setting")
                                  ).transpose(*over, "setting")
    out.attrs["not_available"] = not_available_text(ss.attrs)
    return out


def not_available_text(attrs: dict) -> str:
    """Why V, D_norm+, tiers and CDFs are missing for means-only runs, from a cube's (or its suffstats')
    attrs: what the stored means are (`means_notes`, written by `saferl import`), else which source kept
    only means."""
    notes = attrs.get("means_notes")
    if isinstance(notes, dict) and notes:
        return "not available from means of several episodes: " + "; ".join(str(n) for n in notes.values())
    source = attrs.get("imported_from") or "the source"
    return f"not available: {source} keeps only means of several episodes, not episodes"


def means_only_runs(ss: xr.Dataset) -> int:
    """How many (run, mode) pairs of `ss` hold only per-epoch means (no V, D_norm+, tier or CDF there)."""
    flag = _means_only(ss)
    return 0 if flag is None else int(flag.sum())


def iterate_metrics(ss: xr.Dataset, mode: str = "train") -> xr.Dataset:
    """Metrics of each fixed policy pi_j: dims (algo, task, bound, seed, iterate); vars METRICS + n."""
    if mode not in ss["mode"].values:
        raise CubeError(f"unknown mode {mode!r}: the cube has modes {', '.join(map(str, ss['mode'].values))}")
    one = ss.sel(mode=mode)
    out = _cell_metrics(one)
    out["n"] = one["n"]
    return out.drop_vars("mode").transpose(*RUN_DIMS, "iterate")


def _final_index(n: xr.DataArray) -> xr.DataArray:
    """Per run: position of the last iterate with episodes (-1 if none). n: (..., iterate)."""
    return xr.DataArray(final_iterate(n.values), dims=n.dims[:-1], coords={k: n[k] for k in n.dims[:-1]})


def _at_final(x: xr.DataArray, idx: xr.DataArray, fill=np.nan) -> xr.DataArray:
    """x (..., iterate [, kappa]) at each run's final iterate `idx`; `fill` for runs without episodes."""
    picked = x.isel(iterate=idx.clip(min=0))
    return picked.where(idx >= 0, fill).drop_vars("iterate", errors="ignore")


def run_metrics(ss: xr.Dataset, setting: str, iterates=None) -> xr.Dataset:
    """Per-run metrics for a setting: dims (algo, task, bound, seed); vars METRICS (NaN = run left out).

    iterates (train only): None = all, int j = the fixed policy pi_j, (lo, hi) = inclusive window.
    """
    mode = _mode(setting)
    if mode not in ss["mode"].values:
        raise CubeError(f"the cube has no {mode!r} episodes, needed for setting {setting!r}")
    if not SETTING[setting].final:
        per_it = iterate_metrics(_iterate_window(ss, iterates), mode)
        rm = per_it[list(METRICS)].mean("iterate", skipna=True)
    else:
        one = ss.sel(mode=mode)
        cell, idx = _cell_metrics(one), _final_index(one["n"])
        rm = xr.Dataset({m: _at_final(cell[m], idx) for m in METRICS})
    rm = rm.drop_vars([c for c in ("mode", "iterate") if c in rm.coords])
    return rm.where(rm["C"].notnull())  # a run counts where it has costs; its reward may be unknown (NaN)


def _run_cdf_counts(ss: xr.Dataset, setting: str, iterates=None) -> tuple[xr.DataArray, xr.DataArray]:
    """Per run, the episodes of a setting pooled: L = #{(c - d)/d <= kappa} (algo, task, bound, seed,
    kappa) and N = #episodes (algo, task, bound, seed). For `train` both are summed over the iterates
    (in the window); for the final settings they are those of the run's final iterate of that mode."""
    mode = _mode(setting)
    if not SETTING[setting].final:
        one = _iterate_window(ss, iterates).sel(mode=mode)
        le = one["le"].sum("iterate", dtype=np.float64)
        n = one["n"].sum("iterate").astype(np.float64)
    else:
        one = ss.sel(mode=mode)
        idx = _final_index(one["n"])
        # pick the final iterate first: a float64 copy of every iterate's counts is ~1 s at paper scale
        le, n = (_at_final(one[v], idx, 0).astype(np.float64) for v in ("le", "n"))
    means_only = _means_only(ss)
    if means_only is not None:  # window means are no episodes: such runs have no CDF
        keep = ~means_only.sel(mode=mode).drop_vars("mode", errors="ignore")
        le, n = le.where(keep, 0.0), n.where(keep, 0.0)
    return le.drop_vars("mode", errors="ignore"), n.drop_vars("mode", errors="ignore")


# ------------------------------------------------------------------------------ settings and data
def available_settings(ss: xr.Dataset) -> tuple[str, ...]:
    """The settings whose mode holds at least one episode in `ss` (in SETTINGS order)."""
    modes = list(ss["mode"].values)
    return tuple(s for s in SETTINGS
                 if SETTING[s].mode in modes and int(ss["n"].sel(mode=SETTING[s].mode).sum()) > 0)


def settings_arg(settings: str | Sequence[str] | None, ss: xr.Dataset | None = None) -> tuple[str, ...]:
    """Normalize a settings argument and check the names; None = every setting with episodes in `ss`
    (all SETTINGS when `ss` is not given). A named setting without data gives NaN rows (tier -1)."""
    if settings is None:
        out = SETTINGS if ss is None else available_settings(ss)
        if not out:
            raise CubeError("the selection holds no episodes at all: pick other runs or write episodes first")
        return out
    out = (settings,) if isinstance(settings, str) else tuple(settings)
    for s in out:
        _mode(s)
    if not out:
        raise CubeError(f"no settings given: use one or more of {', '.join(SETTINGS)}")
    return out


def require_data(ss: xr.Dataset, settings: Sequence[str]) -> None:
    """CubeError when a requested setting has no episodes at all in `ss` (the tables would be empty)."""
    have = available_settings(ss)
    missing = [s for s in settings if s not in have]
    if missing:
        lack = runs_without(ss, missing[0])
        raise CubeError(f"no {SETTING[missing[0]].mode!r} episodes in the selection for setting {missing[0]!r} "
                        f"(all {len(lack)} selected runs lack them: {some_labels(lack)}): "
                        f"use settings with data ({', '.join(have) or 'none'})")


def runs_without(ss: xr.Dataset, setting: str, iterates=None) -> list[str]:
    """Labels (`RunKey`) of the runs that hold no episodes for `setting` (left out of it)."""
    mode = _mode(setting)
    if mode not in ss["mode"].values:
        n = xr.zeros_like(ss["n"].isel(iterate=0, mode=0))
    else:
        window = iterates if not SETTING[setting].final else None
        n = _iterate_window(ss, window)["n"].sel(mode=mode).sum("iterate")
    n = n.transpose(*RUN_DIMS)
    return [str(RunKey.at(ss, idx)) for idx in np.argwhere(n.values == 0)]


def some_labels(labels: Sequence[str], k: int = 3) -> str:
    """'a, b, c and 5 more' (at most k labels shown)."""
    shown = ", ".join(labels[:k])
    return shown + (f" and {len(labels) - k} more" if len(labels) > k else "")


# ------------------------------------------------------------------------------ condition table
def seed_mean_std(da: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray]:
    """Mean and sample std (ddof=1) over ``seed`` ignoring NaN; mean NaN without values, std NaN for
    fewer than 2 (no warning). Coordinates of the other dims are kept."""
    arr = da.values
    ax = da.dims.index("seed")
    finite = np.isfinite(arr)
    n = finite.sum(axis=ax)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, np.nansum(arr, axis=ax) / np.maximum(n, 1), np.nan)
        dev = np.where(finite, arr - np.expand_dims(mean, ax), 0.0)
        var = np.where(n > 1, (dev**2).sum(axis=ax) / np.maximum(n - 1, 1), np.nan)
    dims = tuple(d for d in da.dims if d != "seed")
    coords = {d: da.coords[d] for d in dims if d in da.coords}
    return xr.DataArray(mean, dims=dims, coords=coords), xr.DataArray(np.sqrt(var), dims=dims, coords=coords)


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
    return _mark_means_only(ct, ss, settings, ("algo", "task", "bound"))


# ------------------------------------------------------------------------------ bootstrap tables
def _stacked(rm: xr.Dataset, algo, metrics: Sequence[str] = METRICS) -> tuple[np.ndarray, np.ndarray]:
    """(P, K, F=len(metrics)) values for one algorithm (P = task x bound) and run validity (P, K)."""
    arr = np.stack([rm[m].sel(algo=algo).transpose("task", "bound", "seed").values for m in metrics], -1)
    arr = arr.reshape(-1, arr.shape[2], arr.shape[3])
    return arr, ~np.isnan(arr).any(-1)


def _availability_groups(values: np.ndarray) -> list[tuple[list[int], np.ndarray]]:
    """Metric columns of values (P, K, F) grouped by the runs that hold them: [(columns, valid (P, K))].

    One group when every run holds every metric (episodes throughout); otherwise, e.g., R, C, D_norm
    over all runs and V, D_norm+ over the runs with per-episode data, each aggregated on its own runs."""
    held = ~np.isnan(values)
    groups: dict[bytes, list[int]] = {}
    for f in range(values.shape[-1]):
        if held[..., f].any():
            groups.setdefault(held[..., f].tobytes(), []).append(f)
    return [(cols, held[..., cols[0]]) for cols in groups.values()]


def _grouped_iqm(values: np.ndarray, boot: int, rng_seed: int, label: str, setting: str, ci: float,
                 what: str, names: Sequence[str] = METRICS):
    """`iqm_interval` per availability group of metric columns. The first group draws from the
    (rng_seed, label, setting) stream (so cubes of episodes give exactly the classic single-group
    result); others from streams named by their metrics. Returns value, ci_low, ci_high (F,),
    n_strata of the first group, and reps (boot, F) when one group holds every column, else None."""
    f = values.shape[-1]
    value, lo, hi = _nan(f), _nan(f), _nan(f)
    n_strata, reps_all = 0, None
    for g, (cols, valid) in enumerate(_availability_groups(values)):
        tag = setting if g == 0 else f"{setting}:{','.join(names[c] for c in cols)}"
        v, low, high, k, reps = iqm_interval(values[..., cols], valid, boot, bootstrap_rng(rng_seed, label, tag),
                                             ci, what)
        value[cols], lo[cols], hi[cols] = v, low, high
        if g == 0:
            n_strata = k
            reps_all = reps if len(cols) == f else None
    return value, lo, hi, n_strata, reps_all


def _nan(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan)


def _each(outer: Sequence, inner: Sequence, progress: Progress | None,
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


def _table(data: dict, coords: dict, ss: xr.Dataset, **attrs) -> xr.Dataset:
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
    value, lo, hi = _nan(*shape), _nan(*shape), _nan(*shape)
    n_cond = np.zeros(shape[:2], dtype=np.int64)
    stability = _nan(*shape[:2])
    tier_ok = np.zeros(shape[:2], dtype=bool)
    mi = [METRICS.index(m) for m in ("Dnorm", "V", "Dplus")]
    for si, ai, a, rm in _each(settings, algos, progress, lambda s: run_metrics(ss, s, iterates)):
        s = settings[si]
        values, _ = _stacked(rm, a)
        res = _grouped_iqm(values, boot, rng_seed, a, s, ci, f"CI of {a}, {s}")
        value[ai, si], lo[ai, si], hi[ai, si], n_cond[ai, si], reps = res
        # A tier needs D_norm, V and D_norm+ of the same runs: never from means-only runs.
        tier_ok[ai, si] = any(set(mi) <= set(cols) for cols, _ in _availability_groups(values))
        if reps is not None:
            point = tier(*value[ai, si, mi])
            stability[ai, si] = np.mean(tier(*reps[:, mi].T) == point)
    im = {m: np.where(tier_ok, value[..., i], np.nan) for i, m in enumerate(METRICS)}
    dims3, dims2 = ("algo", "setting", "metric"), ("algo", "setting")
    out = _table({"value": (dims3, value), "ci_low": (dims3, lo), "ci_high": (dims3, hi),
                  "tier": (dims2, tier(im["Dnorm"], im["V"], im["Dplus"])), "tier_stability": (dims2, stability),
                  "n_conditions": (dims2, n_cond)},
                 {"algo": algos, "setting": list(settings), "metric": list(METRICS)}, ss,
                 boot=boot, rng_seed=rng_seed, ci=ci)
    return _mark_means_only(out, ss, settings, ("algo",))


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
    cdf, lo, hi = _nan(*shape), _nan(*shape), _nan(*shape)
    for si, ai, a, (le, n) in _each(settings, algos, progress, lambda s: _run_cdf_counts(ss, s, iterates)):
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
    out = _table({"cdf": (dims, cdf), "ci_low": (dims, lo), "ci_high": (dims, hi)},
                 {"algo": algos, "setting": list(settings), "kappa": kappa}, ss,
                 boot=boot, rng_seed=rng_seed, ci=ci)
    return _mark_means_only(out, ss, settings, ("algo",))


def _ratio(sums: np.ndarray) -> np.ndarray:
    """(b, G + 1) drawn sums [L(kappa)..., N] -> (b, G) pooled fractions."""
    return sums[:, :-1] / sums[:, -1:]


def _improves(x: np.ndarray, y: np.ndarray, higher: np.ndarray) -> np.ndarray:
    """Pairwise scores (P, Kx, Ky, F): 1 where x_i improves on y_j, 1/2 on a tie, else 0.

    x (P, Kx, F), y (P, Ky, F); higher (F,) bool: whether larger is better for each metric."""
    xi, yj = x[:, :, None, :], y[:, None, :, :]
    better = np.where(higher, xi > yj, xi < yj)
    return better + 0.5 * (xi == yj)


def _poi_statistic(scores: np.ndarray, kx: np.ndarray, ky: np.ndarray) -> Callable[..., np.ndarray]:
    """Replicate statistic (wx, wy) -> (b, F): the mean over strata of U / (kx ky), where with draw
    counts wx, wy the stratum's U is wx^T S wy (one batched matmul)."""
    p, kxm, kym, f = scores.shape
    flat = scores.reshape(p, kxm, kym * f)

    def statistic(wx: np.ndarray, wy: np.ndarray) -> np.ndarray:
        b = wx.shape[0]
        wx, wy = (np.ascontiguousarray(w.transpose(1, 0, 2)) for w in (wx, wy))  # (P, b, K)
        t = np.matmul(wx, flat).reshape(p, b, kym, f)
        return (np.einsum("pbjf,pbj->pbf", t, wy) / (kx * ky)[:, None, None]).mean(0)

    return statistic


def probability_of_improvement(ss: xr.Dataset, x: str, y: str, setting: str | Sequence[str] | None = None,
                               metric: str | Sequence[str] | None = None, boot: int = 2000, rng_seed: int = 0,
                               ci: float = 0.95, iterates=None) -> xr.Dataset:
    """P(X improves on Y): per condition the Mann-Whitney U over seeds / (n_x n_y), averaged over conditions.

    Per condition (task, bound) with seeds of both algorithms, U counts the pairs (x_i, y_j) of per-run
    values where x_i improves on y_j (in each metric's direction of `cube.stats.metrics`: higher R, lower C,
    Dnorm, V, Dplus), ties counting 1/2. The estimate is the mean over those conditions of U / (n_x n_y);
    0.5 = no difference. CI: stratified bootstrap, seeds of X and of Y resampled independently within
    every condition, percentile interval (NaN with a warning when a condition has fewer than 2 seeds of
    either). Returns dims (setting, metric): value, ci_low, ci_high; n_conditions (setting); attrs x, y.
    """
    settings = settings_arg(setting, ss)
    metrics = check_metrics(metric)
    check_boot(boot, ci)
    have = [str(a) for a in ss["algo"].values]
    for a in (x, y):
        if a not in have:
            raise CubeError(f"unknown algo {a} for the probability of improvement: the selection has {', '.join(have)}")
    higher = np.array([METRIC[m].higher_is_better for m in metrics])
    shape = (len(settings), len(metrics))
    value, lo, hi = _nan(*shape), _nan(*shape), _nan(*shape)
    n_cond = np.zeros(shape, dtype=np.int64)
    for si, s in enumerate(settings):
        rm = run_metrics(ss, s, iterates)[list(metrics)]
        vx, vy = _stacked(rm, x, metrics)[0], _stacked(rm, y, metrics)[0]
        # Each metric over the runs that hold it (means-only runs hold R, C, D_norm, not V, D_norm+): the
        # first group draws from the classic stream, so cubes of episodes give exactly the one-group result.
        for g, (cols, okx, oky) in enumerate(_pair_groups(vx, vy)):
            keep = okx.any(1) & oky.any(1)
            n_cond[si, cols] = int(keep.sum())
            if not keep.any():
                continue
            (px, kx), (py, ky) = strata(vx[keep][..., cols], okx[keep]), strata(vy[keep][..., cols], oky[keep])
            scores = _improves(px, py, higher[cols])
            # Padding rows are zeroed by the valid masks, so they add nothing to U.
            mx = (np.arange(px.shape[1]) < kx[:, None]).astype(np.float64)
            my = (np.arange(py.shape[1]) < ky[:, None]).astype(np.float64)
            value[si, cols] = (np.einsum("pi,pijf,pj->pf", mx, scores, my) / (kx * ky)[:, None]).mean(0)
            tag = s if g == 0 else f"{s}:{','.join(metrics[c] for c in cols)}"
            est = interval([(kx, px.shape[1]), (ky, py.shape[1])], boot, bootstrap_rng(rng_seed, f"{x}>{y}", tag),
                           ci, _poi_statistic(scores, kx, ky), f"CI of P({x} > {y}), {s}")
            if est is not None:
                lo[si, cols], hi[si, cols], _ = est
    dims = ("setting", "metric")
    out = _table({"value": (dims, value), "ci_low": (dims, lo), "ci_high": (dims, hi),
                  "n_conditions": ("setting", n_cond.max(1)), "n_conditions_metric": (dims, n_cond)},
                 {"setting": list(settings), "metric": list(metrics)}, ss,
                 x=x, y=y, boot=boot, rng_seed=rng_seed, ci=ci,
                 convention=f"P(x improves on y): {directions('name')}; ties count 1/2")
    return _mark_means_only(out, ss.sel(algo=[x, y]), settings, ())


def _pair_groups(vx: np.ndarray, vy: np.ndarray) -> list[tuple[list[int], np.ndarray, np.ndarray]]:
    """Metric columns of two algorithms' values (P, K, F) grouped by the runs of both that hold them:
    [(columns, valid x (P, Kx), valid y (P, Ky))]; columns no run of x or of y holds are left out."""
    hx, hy = ~np.isnan(vx), ~np.isnan(vy)
    groups: dict[bytes, list[int]] = {}
    for f in range(vx.shape[-1]):
        if hx[..., f].any() and hy[..., f].any():
            groups.setdefault(hx[..., f].tobytes() + b"|" + hy[..., f].tobytes(), []).append(f)
    return [(cols, hx[..., cols[0]], hy[..., cols[0]]) for cols in groups.values()]


def greedy_expl_gap(ss: xr.Dataset, boot: int = 2000, rng_seed: int = 0, ci: float = 0.95,
                    progress: Progress | None = None) -> xr.Dataset:
    """Paired greedy-minus-exploration gap of every final metric, aggregated like aggregate_table.

    Per run: X(final_greedy) - X(final_expl), each at its mode's final iterate (runs lacking either are
    left out). Then the seed mean per condition, the IQM over conditions and a stratified-bootstrap CI in
    which a seed's (greedy, expl) pair is resampled together. Returns dims (algo, metric): value, ci_low,
    ci_high; n_conditions (algo).
    """
    check_boot(boot, ci)
    for s in ("final_expl", "final_greedy"):
        if s not in available_settings(ss):
            raise CubeError(f"the greedy-expl gap needs {SETTING[s].mode!r} episodes, but no selected run has "
                            f"them ({some_labels(runs_without(ss, s))}): evaluate the final policies first")
    diff = run_metrics(ss, "final_greedy") - run_metrics(ss, "final_expl")
    algos = list(ss["algo"].values)
    shape = (len(algos), len(METRICS))
    value, lo, hi = _nan(*shape), _nan(*shape), _nan(*shape)
    n_cond = np.zeros(len(algos), dtype=np.int64)
    for _, ai, a, _ in _each(("gap",), algos, progress):
        values, _ = _stacked(diff, a)
        value[ai], lo[ai], hi[ai], n_cond[ai], _ = _grouped_iqm(values, boot, rng_seed, a, "gap", ci,
                                                                f"CI of the greedy-expl gap of {a}")
    dims = ("algo", "metric")
    return _table({"value": (dims, value), "ci_low": (dims, lo), "ci_high": (dims, hi),
                   "n_conditions": ("algo", n_cond)}, {"algo": algos, "metric": list(METRICS)}, ss,
                  boot=boot, rng_seed=rng_seed, ci=ci)
