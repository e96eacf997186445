"""Per-run metrics of the paper (Spoor et al., sec. 3) from sufficient statistics, and the settings they are
taken in.

Per run (algo a, task m, bound d, seed k) and policy iterate j, the metrics of `cube.stats.metrics` (formulas
from the sufficient statistics of `cube.stats.suffvars`). Settings: `train` averages X^j over the training
iterates that hold episodes (eq. 5; the paper's 1/J over j = 0..J is read as the mean over iterates);
`final_expl` and `final_greedy` take X at the final evaluation (the last iterate holding episodes of
mode `expl` / `greedy`). A run with no episodes for a setting is left out of that setting. Runs that hold
only means of several episodes (`means_only`) have no metric that needs every episode.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.schema import MEANS_ONLY, RUN_DIMS, RunKey, final_iterate
from cube.stats.metrics import METRIC, METRICS, SETTING, SETTINGS, metric_values
from cube.stats.subset import iterate_window
from cube.stats.suffvars import ALPHA_DIM, CVAR_VAR, SUM_VARS
from cube.stats.tail import DEFAULT_CVAR_ALPHA, check_alpha

__all__ = [
    "run_metrics", "iterate_metrics", "run_cdf_counts", "settings_arg", "available_settings", "require_data",
    "runs_without", "some_labels", "seed_mean_std", "not_available_text", "means_only_runs", "mark_means_only",
    "setting_mode", "cvar_alpha", "with_cvar_alpha", "formula_inputs",
]


def setting_mode(setting: str) -> str:
    """The cube mode a setting reads; CubeError for an unknown setting."""
    if setting not in SETTING:
        raise CubeError(f"unknown setting {setting!r}: use one of {', '.join(SETTINGS)}")
    return SETTING[setting].mode


# ------------------------------------------------------------------------------------------- CVaR
def cvar_alpha(ss: xr.Dataset) -> float:
    """The alpha of the CVaR metric of statistics (or of a table made from them): the one chosen with
    `with_cvar_alpha`, else DEFAULT_CVAR_ALPHA (0.1)."""
    return float(ss.attrs.get("cvar_alpha", DEFAULT_CVAR_ALPHA))


def with_cvar_alpha(ss: xr.Dataset, alpha: float) -> xr.Dataset:
    """Statistics whose CVaR metric is CVaR_alpha (every table made from them, and its exports, say so:
    attrs `cvar_alpha`). CubeError when they do not hold that alpha: load them with `cvar_alphas=(alpha,)`."""
    alpha = check_alpha(alpha)
    _alpha_position(ss, alpha)
    return ss.assign_attrs(cvar_alpha=alpha)


def formula_inputs(cells: xr.Dataset, dims: Sequence[str]) -> dict[str, np.ndarray]:
    """The registry formulas' inputs from statistics `cells` as numpy arrays with dims `dims`: SUM_VARS and
    the upper-tail means CVAR_VAR at the chosen alpha (`cvar_alpha`; NaN where the statistics lack them)."""
    out = {v: cells[v].transpose(*dims).values for v in SUM_VARS}
    if CVAR_VAR in cells and ALPHA_DIM in cells[CVAR_VAR].dims:
        at = float(cells[ALPHA_DIM].values[_alpha_position(cells, cvar_alpha(cells))])
        out[CVAR_VAR] = cells[CVAR_VAR].sel({ALPHA_DIM: at}).transpose(*dims).values
    else:
        out[CVAR_VAR] = np.full(out["n"].shape, np.nan)
    return out


def _alpha_position(cells: xr.Dataset, alpha: float) -> int:
    """Where `alpha` is along the statistics' ALPHA_DIM; CubeError (one line) when they do not hold it."""
    held = np.asarray(cells[ALPHA_DIM].values, dtype=np.float64) if ALPHA_DIM in cells.coords else np.empty(0)
    hits = np.flatnonzero(held == alpha)
    if not hits.size:
        have = ", ".join(f"{a:g}" for a in held) or "none"
        raise CubeError(f"these statistics hold CVaR at alpha {have}, not {alpha:g}: "
                        f"load them with load_suffstats(..., cvar_alphas=({alpha:g},))")
    return int(hits[0])


# ------------------------------------------------------------------------------- per-run metrics
def _cell_metrics(ss: xr.Dataset) -> xr.Dataset:
    """Metrics X^j per cell (the dims of `n`); NaN where the cell has no episodes. The registry's
    formulas on plain numpy arrays (xarray's alignment of a dozen operations costs more than the arithmetic)."""
    dims = ss["n"].dims
    d = ss["bound"].values.astype(np.float64).reshape([-1 if x == "bound" else 1 for x in dims])
    out = metric_values(formula_inputs(ss, dims), d)
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


def mark_means_only(out: xr.Dataset, ss: xr.Dataset, settings: Sequence[str], over: Sequence[str]) -> xr.Dataset:
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
    """Why V, D_norm+, CVaR, tiers and CDFs are missing for means-only runs, from a cube's (or its suffstats')
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
    mode = setting_mode(setting)
    if mode not in ss["mode"].values:
        raise CubeError(f"the cube has no {mode!r} episodes, needed for setting {setting!r}")
    if not SETTING[setting].final:
        per_it = iterate_metrics(iterate_window(ss, iterates), mode)
        rm = per_it[list(METRICS)].mean("iterate", skipna=True)
    else:
        one = ss.sel(mode=mode)
        cell, idx = _cell_metrics(one), _final_index(one["n"])
        rm = xr.Dataset({m: _at_final(cell[m], idx) for m in METRICS})
    rm = rm.drop_vars([c for c in ("mode", "iterate") if c in rm.coords])
    return rm.where(rm["C"].notnull())  # a run counts where it has costs; its reward may be unknown (NaN)


def run_cdf_counts(ss: xr.Dataset, setting: str, iterates=None) -> tuple[xr.DataArray, xr.DataArray]:
    """Per run, the episodes of a setting pooled: L = #{(c - d)/d <= kappa} (algo, task, bound, seed,
    kappa) and N = #episodes (algo, task, bound, seed). For `train` both are summed over the iterates
    (in the window); for the final settings they are those of the run's final iterate of that mode."""
    mode = setting_mode(setting)
    if not SETTING[setting].final:
        one = iterate_window(ss, iterates).sel(mode=mode)
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
        setting_mode(s)
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
    mode = setting_mode(setting)
    if mode not in ss["mode"].values:
        n = xr.zeros_like(ss["n"].isel(iterate=0, mode=0))
    else:
        window = iterates if not SETTING[setting].final else None
        n = iterate_window(ss, window)["n"].sel(mode=mode).sum("iterate")
    n = n.transpose(*RUN_DIMS)
    return [str(RunKey.at(ss, idx)) for idx in np.argwhere(n.values == 0)]


def some_labels(labels: Sequence[str], k: int = 3) -> str:
    """'a, b, c and 5 more' (at most k labels shown)."""
    shown = ", ".join(labels[:k])
    return shown + (f" and {len(labels) - k} more" if len(labels) > k else "")



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

