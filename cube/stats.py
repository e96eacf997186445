"""The paper's metrics (Spoor et al., sec. 3 and A.1) over sufficient statistics of the results cube.

Per run (algo a, task m, bound d, seed k) and policy iterate j, over the N^j episodes present:

    R^j = mean reward        C^j = mean cost        V^j = #{c > d} / N^j        Dnorm^j = (C^j - d) / d
    Dplus^j = sum (c - d)^+ / (N+ d) if N+ = #{c > d} > 0, else 0

Settings: `train` averages X^j over the training iterates (exploration noise, mode `train`) that hold
episodes (eq. 5; the paper's 1/J over j = 0..J is read as the mean over iterates); `final_expl` and
`final_greedy` take X at the final evaluation (the last iterate holding episodes of mode `expl` /
`greedy`). A run with no episodes for a setting is left out of that setting (its seed does not count).

Per condition (m, d): seed mean and sample std (ddof=1). Aggregate over conditions P: the IQM
(scipy.stats.trim_mean(x, 0.25)), with a stratified bootstrap CI (seeds resampled with replacement within
each condition, independently per algorithm and setting; percentile interval). Tiers follow Table 1.
CDF(kappa) (eq. 6) = mean over conditions of the seed mean of each run's fraction of episodes with
(c - d)/d <= kappa; with equal seeds and episodes per condition this is the paper's pooled ratio.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.selection import Selection
from cube.suffstats import RUN_DIMS, SUM_VARS, load_suffstats

__all__ = [
    "SETTINGS", "METRICS", "TIER_LABELS", "load_suffstats", "select", "run_metrics", "iterate_metrics",
    "condition_table", "aggregate_table", "cdf_curves", "iqm", "tier", "settings_arg",
    "available_settings", "require_data", "stratified_bootstrap_means", "stratified_bootstrap_weights",
]

SETTINGS = ("train", "final_expl", "final_greedy")
METRICS = ("R", "C", "Dnorm", "V", "Dplus")
TIER_LABELS = ("Unsafe", "Minimal", "Moderate", "Substantial", "Strict")
_MODE = {"train": "train", "final_expl": "expl", "final_greedy": "greedy"}
Progress = Callable[[int, int], None]


# ----------------------------------------------------------------------------------------- selection
def _match(ss: xr.Dataset, dim: str, wanted: Sequence) -> list:
    have = list(ss[dim].values)
    if dim == "bound":
        picked, unknown = [], []
        for w in wanted:
            hits = [h for h in have if np.isclose(h, w, rtol=1e-9, atol=0)]
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
        for v in (*SUM_VARS, "le"):
            if v in ss:
                ss[v] = ss[v].where(keep, 0).astype(ss[v].dtype)
    ss.attrs["selection"] = selection.to_json()
    return ss


# ------------------------------------------------------------------------------- per-iterate metrics
def _cell_metrics(ss: xr.Dataset) -> xr.Dataset:
    """Metrics X^j per cell (algo, task, bound, seed, iterate, mode); NaN where the cell has no episodes."""
    d = ss["bound"].astype(np.float64)
    n = ss["n"].where(ss["n"] > 0)
    c_bar = ss["sum_c"] / n
    dplus = xr.where(ss["n_viol"] > 0, ss["sum_over"] / (ss["n_viol"] * d), 0.0).where(ss["n"] > 0)
    return xr.Dataset({
        "R": ss["sum_r"] / ss["n_r"].where(ss["n_r"] > 0),
        "C": c_bar,
        "Dnorm": (c_bar - d) / d,
        "V": ss["n_viol"] / n,
        "Dplus": dplus,
    })


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
    has = (n > 0).values
    last = has.shape[-1] - 1 - np.argmax(has[..., ::-1], axis=-1)
    return xr.DataArray(np.where(has.any(-1), last, -1), dims=n.dims[:-1], coords={k: n[k] for k in n.dims[:-1]})


def _at_final(x: xr.DataArray, n: xr.DataArray) -> xr.DataArray:
    """x (..., iterate [, kappa]) at each run's final iterate; NaN for runs without episodes."""
    idx = _final_index(n)
    picked = x.isel(iterate=idx.clip(min=0))
    return picked.where(idx >= 0).drop_vars("iterate", errors="ignore")


def _iterate_window(ss: xr.Dataset, iterates) -> xr.Dataset:
    if iterates is None:
        return ss
    return select(ss, Selection(iterates=iterates))


def _check_setting(setting: str) -> str:
    if setting not in SETTINGS:
        raise CubeError(f"unknown setting {setting!r}: use one of {', '.join(SETTINGS)}")
    return _MODE[setting]


def run_metrics(ss: xr.Dataset, setting: str, iterates=None) -> xr.Dataset:
    """Per-run metrics for a setting: dims (algo, task, bound, seed); vars METRICS (NaN = run left out).

    iterates (train only): None = all, int j = the fixed policy pi_j, (lo, hi) = inclusive window.
    """
    mode = _check_setting(setting)
    if mode not in ss["mode"].values:
        raise CubeError(f"the cube has no {mode!r} episodes, needed for setting {setting!r}")
    if mode == "train":
        per_it = iterate_metrics(_iterate_window(ss, iterates), "train")
        rm = per_it[list(METRICS)].mean("iterate", skipna=True)
    else:
        one = ss.sel(mode=mode)
        cell = _cell_metrics(one)
        rm = xr.Dataset({m: _at_final(cell[m], one["n"]) for m in METRICS})
    rm = rm.drop_vars([c for c in ("mode", "iterate") if c in rm.coords])
    return rm.where(rm["C"].notnull() & rm["R"].notnull())


def _run_cdf(ss: xr.Dataset, setting: str, iterates=None) -> xr.DataArray:
    """Per-run fraction of episodes with (c - d)/d <= kappa: dims (algo, task, bound, seed, kappa)."""
    mode = _check_setting(setting)
    if mode == "train":
        one = _iterate_window(ss, iterates).sel(mode="train")
        frac = one["le"] / one["n"].where(one["n"] > 0)
        return frac.mean("iterate", skipna=True).drop_vars("mode")
    one = ss.sel(mode=mode)
    frac = one["le"] / one["n"].where(one["n"] > 0)
    return _at_final(frac, one["n"]).drop_vars("mode")


# ---------------------------------------------------------------------------------- tiers and IQM
def tier(dnorm, v, dplus) -> np.ndarray:
    """Safety tier 0..4 (Table 1) from IQM(Dnorm), IQM(V), IQM(Dplus); arrays broadcast. NaN -> -1."""
    dnorm, v, dplus = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (dnorm, v, dplus)))
    t = np.zeros(dnorm.shape, dtype=np.int64)
    ok = dnorm <= 0
    t[ok] = 1
    t[ok & (v <= 0.5)] = 2
    t[ok & (v <= 0.1) & (dplus <= 0.1)] = 3
    t[ok & (v == 0) & (dplus == 0)] = 4
    t[np.isnan(dnorm) | np.isnan(v) | np.isnan(dplus)] = -1
    return t


def iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean = scipy.stats.trim_mean(x, 0.25, axis): drop floor(n/4) values at each end."""
    x = np.sort(np.asarray(x, dtype=np.float64), axis=axis)
    n = x.shape[axis]
    cut = int(0.25 * n)
    return np.take(x, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def available_settings(ss: xr.Dataset) -> tuple[str, ...]:
    """The settings whose mode holds at least one episode in `ss` (in SETTINGS order)."""
    modes = list(ss["mode"].values)
    return tuple(s for s in SETTINGS if _MODE[s] in modes and int(ss["n"].sel(mode=_MODE[s]).sum()) > 0)


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
        _check_setting(s)
    if not out:
        raise CubeError(f"no settings given: use one or more of {', '.join(SETTINGS)}")
    return out


def require_data(ss: xr.Dataset, settings: Sequence[str]) -> None:
    """CubeError when a requested setting has no episodes at all in `ss` (the tables would be empty)."""
    have = available_settings(ss)
    missing = [s for s in settings if s not in have]
    if missing:
        raise CubeError(f"no {_MODE[missing[0]]!r} episodes in the selection for setting {missing[0]!r}: "
                        f"use settings with data ({', '.join(have) or 'none'})")


# ------------------------------------------------------------------------------ condition table
def _seed_stats(x: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray]:
    return x.mean("seed", skipna=True), x.std("seed", ddof=1, skipna=True)


def condition_table(ss: xr.Dataset, settings=None, iterates=None) -> xr.Dataset:
    """Per condition: dims (algo, task, bound, setting); vars {m}_mean, {m}_std (over seeds, ddof=1),
    n_seeds (runs with episodes in that setting) and tier (from the seed means; -1 = no data)."""
    settings = settings_arg(settings, ss)
    parts = []
    for s in settings:
        rm = run_metrics(ss, s, iterates)
        out = xr.Dataset()
        for m in METRICS:
            out[f"{m}_mean"], out[f"{m}_std"] = _seed_stats(rm[m])
        out["n_seeds"] = rm["C"].notnull().sum("seed")
        parts.append(out)
    ct = xr.concat(parts, dim=xr.DataArray(list(settings), dims="setting", name="setting"))
    ct["tier"] = xr.apply_ufunc(tier, ct["Dnorm_mean"], ct["V_mean"], ct["Dplus_mean"])
    ct = ct.transpose("algo", "task", "bound", "setting")
    ct.attrs.update(ss.attrs)
    return ct


# --------------------------------------------------------------------- stratified bootstrap engine
def _rng(rng_seed: int, algo: str, setting: str) -> np.random.Generator:
    """Generator per (algo, setting), so one algorithm's CI does not depend on which others are selected."""
    return np.random.default_rng([rng_seed, zlib.crc32(str(algo).encode()), zlib.crc32(setting.encode())])


def _strata(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """values (P, K, F), valid (P, K) -> per-stratum valid values packed first (P', Kmax, F), counts (P',).
    Strata (conditions) without any valid seed are dropped."""
    k = valid.sum(1)
    keep = k > 0
    order = np.argsort(~valid, axis=1, kind="stable")
    packed = np.take_along_axis(values, order[..., None], axis=1)
    return np.where(np.isnan(packed), 0.0, packed)[keep], k[keep]


def stratified_bootstrap_weights(k: np.ndarray, kmax: int, boot: int, rng: np.random.Generator) -> np.ndarray:
    """How often each seed is drawn: (boot, P, kmax) counts; row p of a replicate sums to k[p].

    Each replicate draws k[p] seeds uniformly with replacement from stratum p's first k[p] seeds
    (seed floor(u * k[p]) for u ~ U[0, 1) from rng.random((boot, P, kmax))); strata are independent.
    """
    p = k.size
    u = rng.random((boot, p, kmax))
    idx = np.minimum((u * k[None, :, None]).astype(np.int64), k[None, :, None] - 1)
    use = np.broadcast_to(np.arange(kmax)[None, None, :] < k[None, :, None], idx.shape)
    flat = ((np.arange(boot)[:, None, None] * p + np.arange(p)[None, :, None]) * kmax + idx)[use]
    return np.bincount(flat, minlength=boot * p * kmax).reshape(boot, p, kmax).astype(np.float64)


def stratified_bootstrap_means(values: np.ndarray, k: np.ndarray, boot: int,
                               rng: np.random.Generator) -> np.ndarray:
    """Seed means per stratum under resampling of seeds with replacement within each stratum.

    values: (P, Kmax, F), the first k[p] rows of stratum p valid (the rest finite padding);
    returns (boot, P, F).
    """
    return _weighted_means(stratified_bootstrap_weights(k, values.shape[1], boot, rng) / k[None, :, None], values)


def _weighted_means(w: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(B, P, Kmax) weights x (P, Kmax, F) values -> (B, P, F), one batched matmul over strata."""
    return np.matmul(w.transpose(1, 0, 2), values).transpose(1, 0, 2)


_BATCH = 2048  # replicates per batch: bounds memory; the random stream (and so the result) is the same


def _replicates(packed: np.ndarray, k: np.ndarray, boot: int, rng: np.random.Generator,
                stat: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Stack stat(w) over batches of replicates; w = (b, P, Kmax) resampling weights / k[p]."""
    out = []
    for start in range(0, boot, _BATCH):
        b = min(_BATCH, boot - start)
        out.append(stat(stratified_bootstrap_weights(k, packed.shape[1], b, rng) / k[None, :, None]))
    return np.concatenate(out)


def _percentile_ci(reps: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray]:
    alpha = (1.0 - ci) / 2.0
    lo, hi = np.quantile(reps, [alpha, 1.0 - alpha], axis=0)
    return lo, hi


def _check_boot(boot: int, ci: float) -> None:
    if not (isinstance(boot, int | np.integer) and boot >= 1):
        raise CubeError(f"bootstrap replicates must be a positive integer, got {boot!r}")
    if not 0.0 < ci < 1.0:
        raise CubeError(f"confidence level must be in (0, 1), got {ci!r}")


def _stacked(rm: xr.Dataset, algo) -> tuple[np.ndarray, np.ndarray]:
    """(P, K, F=len(METRICS)) values for one algorithm (P = task x bound) and run validity (P, K)."""
    arr = np.stack([rm[m].sel(algo=algo).transpose("task", "bound", "seed").values for m in METRICS], -1)
    arr = arr.reshape(-1, arr.shape[2], arr.shape[3])
    return arr, ~np.isnan(arr).any(-1)


# ------------------------------------------------------------------------------- aggregate table
def aggregate_table(ss: xr.Dataset, settings=None, boot: int = 2000, rng_seed: int = 0, ci: float = 0.95,
                    iterates=None, progress: Progress | None = None) -> xr.Dataset:
    """IQM over conditions of seed means, with stratified-bootstrap percentile CIs, and the tier.

    Returns dims (algo, setting, metric): value, ci_low, ci_high; (algo, setting): tier (-1 = no data),
    tier_stability (fraction of bootstrap replicates whose IQMs give the same tier: how close the tier
    is to a threshold, cf. the paper's discussion) and n_conditions (conditions with at least one run).
    """
    settings = settings_arg(settings, ss)
    _check_boot(boot, ci)
    algos = list(ss["algo"].values)
    shape = (len(algos), len(settings), len(METRICS))
    value, lo, hi = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    n_cond = np.zeros(shape[:2], dtype=np.int64)
    stability = np.full(shape[:2], np.nan)
    mi = {m: METRICS.index(m) for m in ("Dnorm", "V", "Dplus")}
    total, done = len(algos) * len(settings), 0
    for si, s in enumerate(settings):
        rm = run_metrics(ss, s, iterates)
        for ai, a in enumerate(algos):
            values, valid = _stacked(rm, a)
            packed, k = _strata(values, valid)
            n_cond[ai, si] = k.size
            if k.size:
                value[ai, si] = iqm(packed.sum(1) / k[:, None], axis=0)
                reps = _replicates(packed, k, boot, _rng(rng_seed, a, s),
                                   lambda w, x=packed: iqm(_weighted_means(w, x), axis=1))
                lo[ai, si], hi[ai, si] = _percentile_ci(reps, ci)
                point = tier(*(value[ai, si, mi[m]] for m in mi))
                stability[ai, si] = np.mean(tier(*(reps[:, mi[m]] for m in mi)) == point)
            done += 1
            if progress:
                progress(done, total)
    im = {m: value[..., i] for i, m in enumerate(METRICS)}
    coords = {"algo": algos, "setting": list(settings), "metric": list(METRICS)}
    dims3, dims2 = ("algo", "setting", "metric"), ("algo", "setting")
    out = xr.Dataset(
        {"value": (dims3, value), "ci_low": (dims3, lo), "ci_high": (dims3, hi),
         "tier": (dims2, tier(im["Dnorm"], im["V"], im["Dplus"])), "tier_stability": (dims2, stability),
         "n_conditions": (dims2, n_cond)},
        coords=coords,
    )
    out.attrs.update(ss.attrs)
    out.attrs.update({"boot": boot, "rng_seed": rng_seed, "ci": ci})
    return out


# ----------------------------------------------------------------------------------------- CDFs
def cdf_curves(ss: xr.Dataset, settings=None, boot: int = 2000, rng_seed: int = 0, ci: float = 0.95,
               iterates=None, progress: Progress | None = None) -> xr.Dataset:
    """Aggregate empirical CDF of (c - d)/d at the grid `kappa` (eq. 6) with stratified-bootstrap CIs.

    Returns dims (algo, setting, kappa): cdf, ci_low, ci_high (NaN where an algorithm has no data).
    """
    settings = settings_arg(settings, ss)
    _check_boot(boot, ci)
    if "le" not in ss:
        raise CubeError("these sufficient statistics have no CDF counts: recompute them with load_suffstats")
    algos, kappa = list(ss["algo"].values), ss["kappa"].values
    shape = (len(algos), len(settings), kappa.size)
    cdf, lo, hi = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    total, done = len(algos) * len(settings), 0
    for si, s in enumerate(settings):
        frac = _run_cdf(ss, s, iterates)
        for ai, a in enumerate(algos):
            arr = frac.sel(algo=a).transpose("task", "bound", "seed", "kappa").values
            arr = arr.reshape(-1, arr.shape[2], arr.shape[3])
            packed, k = _strata(arr, ~np.isnan(arr[..., 0]))
            if k.size:
                cdf[ai, si] = (packed.sum(1) / k[:, None]).mean(0)
                # The CDF is linear in the seed means: each replicate is one weighted sum over all runs.
                flat = packed.reshape(-1, packed.shape[2]) / k.size
                reps = _replicates(packed, k, boot, _rng(rng_seed, a, s),
                                   lambda w, x=flat: w.reshape(w.shape[0], -1) @ x)
                lo[ai, si], hi[ai, si] = _percentile_ci(reps, ci)
            done += 1
            if progress:
                progress(done, total)
    dims = ("algo", "setting", "kappa")
    out = xr.Dataset({"cdf": (dims, cdf), "ci_low": (dims, lo), "ci_high": (dims, hi)},
                     coords={"algo": algos, "setting": list(settings), "kappa": kappa})
    out.attrs.update(ss.attrs)
    out.attrs.update({"boot": boot, "rng_seed": rng_seed, "ci": ci})
    return out
