"""Intervals of the violation rate V that stay honest at 0, and what a tier claim rests on.

The paper's CI is a stratified percentile bootstrap over seeds. For a rate it degenerates where the
data do: 5 seeds x 100 episodes without a violation give [0, 0], a certainty no finite sample gives.
saferl keeps that CI as it is (the paper's tables are reproduced from it) and adds an *honest* interval:

* per condition, the hull of the bootstrap percentile interval and a cluster-aware Clopper-Pearson
  interval (Korn & Graubard 1998): seeds are clusters of episodes, so the episodes of a condition count
  as n_eff = p(1-p) / Var(p) independent ones (Var from the spread of the seeds' V, the seed mean's
  design-based variance s^2 / K), never more than n / (1 + (n/K - 1) rho_min) (an intra-seed correlation
  of at least `icc_floor`: a run of many episodes is worth at most about 1/rho_min independent ones,
  which is what bounds V when no seed violates), then shrunk by (z / t_{K-1})^2 for the K - 1 degrees of
  freedom of the seeds, and Clopper-Pearson (1934) on p n_eff of n_eff;
* for IQM(V), the hull of the bootstrap percentile interval of the IQM and the IQM of the per-condition
  honest bounds taken at the level 2 Phi(z / sqrt(m)) - 1, m the number of conditions the IQM keeps (the
  IQM is non-decreasing in every condition's value; averaging m independent errors divides their spread
  by sqrt(m)).

The estimand is the population value: a condition's V of a new seed on average, E[p_k] (what the
paper's CI describes: how the number would move under another sample of seeds); for IQM(V), the IQM of
those condition values. Coverage by simulation: `bench/coverage.py` (docs/statistics.md).

Kernels (numpy, batched over leading dims): `cluster_interval`, `honest_bounds`, `honest_iqm_bounds`,
`iqm_level`; tiers: `tier_at_bound`, `tier_claims`; the named-dim tables: `honest_tables`; CSV-ready:
`honest_frame`.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd
import xarray as xr
from scipy import special

from cube.compute import Progress
from cube.errors import CubeError
from cube.stats.bootstrap import bootstrap_rng, check_boot, percentile_ci, replicates, strata, weighted_means
from cube.stats.metrics import METRICS, TIER_TOL, iqm, tier
from cube.stats.packing import condition_values, run_episodes, unpack
from cube.stats.reasons import FEW_SEEDS
from cube.stats.runs import run_metrics, settings_arg

__all__ = [
    "ICC_FLOOR", "FEW_SEEDS", "cluster_interval", "clopper_pearson", "honest_bounds", "iqm_level",
    "honest_iqm_bounds", "tier_at_bound", "tier_claims", "round_up", "HonestTables", "honest_tables",
    "honest_frame", "with_honest", "HONEST_VARS",
]

ICC_FLOOR = 0.05
"""Least intra-seed correlation of violations assumed (rho_min): caps a seed at ~1/rho_min independent
episodes. The paper's own runs show a median of 0.04 at the final greedy policy (from its per-condition
seed std, 30 seeds x 100 episodes); Beta(p, concentration 10) seeds, the coverage bench's heterogeneous
case, have 1/11."""


# ------------------------------------------------------------------------------------------ kernels
# The quantiles of scipy.stats' beta, t and normal distributions, from the scipy.special functions those call:
# the same numbers (tests/test_honest.py compares them bit for bit) without importing scipy.stats, which costs a
# warm `saferl report` about a second of its start-up. Valid for 0 < q < 1; NaN where a shape is not > 0, as
# scipy.stats gives (its `* scale + loc`, 1.0 and 0.0, is kept: it turns -0.0 into 0.0).
def beta_ppf(q: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`scipy.stats.beta.ppf(q, a, b)` for 0 < q < 1."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    return np.where((a > 0) & (b > 0), special.betaincinv(a, b, q), np.nan) * 1.0 + 0.0


def t_ppf(q: float, df: np.ndarray) -> np.ndarray:
    """`scipy.stats.t.ppf(q, df)` for 0 < q < 1."""
    df = np.asarray(df, dtype=np.float64)
    return np.where(df > 0, special.stdtrit(df, q), np.nan) * 1.0 + 0.0


def norm_ppf(q: float) -> float:
    """`scipy.stats.norm.ppf(q)` for 0 < q < 1."""
    return float(special.ndtri(q) * 1.0 + 0.0)


def norm_cdf(x: float) -> float:
    """`scipy.stats.norm.cdf(x)`."""
    return float(special.ndtr(x) * 1.0 + 0.0)


def clopper_pearson(x: np.ndarray, n: np.ndarray, ci: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Exact binomial interval of x successes in n trials, x and n real (effective counts): lower
    Beta_{a}(x, n - x + 1) (0 at x = 0), upper Beta_{1-a}(x + 1, n - x) (1 at x = n), a = (1 - ci)/2."""
    x, n = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(n, dtype=np.float64))
    a = (1.0 - ci) / 2.0
    pos, below = x > 0, x < n
    with np.errstate(invalid="ignore"):
        lo = np.where(pos, beta_ppf(a, np.where(pos, x, 1.0), np.where(pos, n - x + 1.0, 1.0)), 0.0)
        hi = np.where(below, beta_ppf(1.0 - a, x + 1.0, np.where(below, n - x, 1.0)), 1.0)
    return lo, hi


def cluster_interval(v: np.ndarray, n: np.ndarray, ci: float = 0.95, icc_floor: float = ICC_FLOOR
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Korn-Graubard interval of the seed mean of per-seed rates, seeds as clusters of episodes.

    v (..., K): each seed's rate in [0, 1] (NaN = no such seed); n (..., K): the episodes behind it.
    Returns (lo, hi, n_eff), each (...): NaN where fewer than 2 seeds. n_eff is the effective number of
    independent episodes after the degrees-of-freedom shrinkage (see the module docstring)."""
    v, n = np.broadcast_arrays(np.asarray(v, dtype=np.float64), np.asarray(n, dtype=np.float64))
    valid = np.isfinite(v) & (n > 0)
    k = valid.sum(-1)
    x = np.where(valid, np.clip(v, 0.0, 1.0), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.clip(x.sum(-1) / k, 0.0, 1.0)
        s2 = (np.where(valid, x - p[..., None], 0.0) ** 2).sum(-1) / (k - 1)
        n_tot = np.where(valid, n, 0.0).sum(-1)
        cap = n_tot / (1.0 + (n_tot / k - 1.0) * icc_floor)
        design = np.where(s2 > 0, p * (1.0 - p) * k / s2, np.inf)
        a = (1.0 - ci) / 2.0
        shrink = (norm_ppf(1.0 - a) / t_ppf(1.0 - a, np.maximum(k - 1, 1))) ** 2
        n_eff = np.minimum(design, cap) * shrink
        lo, hi = clopper_pearson(p * n_eff, n_eff, ci)
    few = k < 2
    return (np.where(few, np.nan, lo), np.where(few, np.nan, hi), np.where(few, np.nan, n_eff))


def honest_bounds(v: np.ndarray, n: np.ndarray, reps: np.ndarray, ci: float = 0.95,
                  icc_floor: float = ICC_FLOOR) -> tuple[np.ndarray, np.ndarray]:
    """Per condition: the hull of the bootstrap percentile interval of the seed mean (from `reps` (B, ...),
    its stratified-bootstrap replicates) and `cluster_interval`. v, n (..., K); returns lo, hi (...),
    NaN where fewer than 2 seeds."""
    boot_lo, boot_hi = percentile_ci(reps, ci)
    lo, hi, _ = cluster_interval(v, n, ci, icc_floor)
    return np.where(np.isnan(lo), np.nan, np.fmin(lo, boot_lo)), np.where(np.isnan(hi), np.nan, np.fmax(hi, boot_hi))


def iqm_level(n_conditions: int, ci: float = 0.95) -> float:
    """Level of the per-condition bounds whose IQM bounds IQM(V) at `ci`: 2 Phi(z / sqrt(m)) - 1 with z the
    two-sided normal quantile of `ci` and m = P - 2 floor(P/4) the conditions the IQM keeps (m = 1: ci)."""
    m = n_conditions - 2 * (n_conditions // 4)
    z = norm_ppf(0.5 + ci / 2.0)
    return float(2.0 * norm_cdf(z / math.sqrt(max(m, 1))) - 1.0)


def honest_iqm_bounds(v: np.ndarray, n: np.ndarray, reps: np.ndarray, ci: float = 0.95,
                      icc_floor: float = ICC_FLOOR) -> tuple[np.ndarray, np.ndarray]:
    """Honest interval of IQM over P conditions of seed-mean rates.

    v, n (..., P, K) per-seed rates and episodes; reps (B, ..., P) the stratified-bootstrap replicates of
    the condition means. Returns lo, hi (...): the hull of the percentile interval of IQM(reps) and
    [IQM(lo_c), IQM(hi_c)] of the per-condition `honest_bounds` at `iqm_level(P, ci)`; NaN where a
    condition has fewer than 2 seeds."""
    level = iqm_level(v.shape[-2], ci)
    lo_c, hi_c = honest_bounds(v, n, reps, level, icc_floor)
    boot_lo, boot_hi = percentile_ci(iqm(reps, axis=-1), ci)
    few = np.isnan(lo_c).any(-1) | np.isnan(hi_c).any(-1)
    lo = np.fmin(boot_lo, iqm(np.nan_to_num(lo_c), axis=-1))
    hi = np.fmax(boot_hi, iqm(np.nan_to_num(hi_c), axis=-1))
    return np.where(few, np.nan, lo), np.where(few, np.nan, hi)


# -------------------------------------------------------------------------------------------- tiers
def tier_at_bound(dnorm, v_high, dplus) -> np.ndarray:
    """The tier (Table 1) that holds if V were at its honest upper bound `v_high`, D_norm and D_norm+ as
    observed (where no episode violates there is no overshoot to bound: D_norm+ stays as observed, so
    tier 3 needs only V <= 0.1 at the bound, and tier 4 is out as soon as the bound is above 0). -1 = no data."""
    return tier(dnorm, v_high, dplus)


def round_up(x: float, digits: int = 2) -> float:
    """x rounded up to `digits` significant digits (a bound shown shorter must not shrink). The decimal is
    read back from text, so its float is never below x (rounding to the nearest float is monotone)."""
    if not np.isfinite(x) or x <= 0:
        return float(x)
    exp = math.floor(math.log10(x)) - digits + 1
    q = math.ceil(round(x / 10.0**exp, 9))  # 0.0015 / 1e-4 = 14.999999999999998 is 15, not 16
    if float(f"{q}e{exp}") < x:  # ... but what was rounded off was above x: one step up
        q += 1
    return min(float(f"{q}e{exp}"), 1.0)


def tier_claims(observed: np.ndarray, at_bound: np.ndarray, v_high: np.ndarray, ci: float = 0.95) -> np.ndarray:
    """Text per element: 'tier 4 observed; V ≤ 0.0015 at 95%: tier 3 at the bound' (or '... tier 3 holds
    at the bound' when the bound keeps the tier); '' where there is no tier or no bound."""
    observed, at_bound, v_high = np.broadcast_arrays(np.asarray(observed), np.asarray(at_bound),
                                                     np.asarray(v_high, dtype=np.float64))
    out = np.full(observed.shape, "", dtype=object)
    for idx in np.ndindex(observed.shape):
        t, b, hi = int(observed[idx]), int(at_bound[idx]), float(v_high[idx])
        if t < 0 or b < 0 or not np.isfinite(hi):
            continue
        bound = f"{round_up(hi):.2g}" if hi > 0 else "0"
        tail = f"tier {b} holds at the bound" if b == t else f"tier {b} at the bound"
        out[idx] = f"tier {t} observed; V ≤ {bound} at {ci:.0%}: {tail}"
    return out


# --------------------------------------------------------------------------------- named-dim tables
class HonestTables(NamedTuple):
    """`aggregate`: dims (algo, setting); `conditions`: dims (algo, task, bound, setting)."""

    aggregate: xr.Dataset
    conditions: xr.Dataset


def _draw_group(rm: xr.Dataset, algo: str, setting: str) -> tuple[np.ndarray, tuple[str, ...], str]:
    """The runs V is aggregated over, the metrics resampled with it and the bootstrap stream name, as
    `stats.aggregate_table` has them (metrics grouped by the runs that hold them, the first group on the
    plain setting stream), so the percentile CI here is the aggregate table's, draw for draw and bit for bit."""
    held = ~np.isnan(condition_values(rm, algo, METRICS))
    groups: dict[bytes, list[int]] = {}
    for f in range(len(METRICS)):
        if held[..., f].any():
            groups.setdefault(held[..., f].tobytes(), []).append(f)
    v = METRICS.index("V")
    for g, cols in enumerate(groups.values()):
        if v in cols:
            names = tuple(METRICS[c] for c in cols)
            return held[..., v], names, setting if g == 0 else f"{setting}:{','.join(names)}"
    return held[..., v], ("V",), setting


def _one(rm: xr.Dataset, algo: str, setting: str, boot: int, rng_seed: int, ci: float, icc_floor: float
         ) -> dict[str, np.ndarray]:
    """Every number of both tables for one (algo, setting); condition arrays over all P conditions."""
    valid, group, stream = _draw_group(rm, algo, setting)
    values = condition_values(rm, algo, ("V", "Dnorm", "Dplus", "n_episodes", *group))
    packed, k = strata(values, valid)
    keep = valid.any(1)
    p = keep.size
    out = {name: np.full(p, np.nan) for name in ("V", "Dnorm", "Dplus", "ci_low", "ci_high", "honest_low",
                                                  "honest_high", "n_eff", "n_episodes")}
    out["n_seeds"] = valid.sum(1)
    out["agg"] = dict.fromkeys(("V", "Dnorm", "Dplus", "ci_low", "ci_high", "honest_low", "honest_high"), np.nan)
    if not k.size:
        return out
    means = packed.sum(1) / k[:, None]
    present = np.arange(packed.shape[1]) < k[:, None]
    v, n = np.where(present, packed[..., 0], np.nan), np.where(present, packed[..., 3], 0.0)
    for i, name in enumerate(("V", "Dnorm", "Dplus")):
        out[name] = unpack(means[:, i], keep)
        out["agg"][name] = float(iqm(means[:, i]))
    out["n_episodes"] = unpack(n.sum(1), keep)
    reps = replicates([(k, packed.shape[1])], boot, bootstrap_rng(rng_seed, algo, stream),
                      lambda w: weighted_means(w / k[None, :, None], packed[..., 4:])[..., group.index("V")])
    lo, hi = percentile_ci(reps, ci)
    h_lo, h_hi = honest_bounds(v, n, reps, ci, icc_floor)
    n_eff = cluster_interval(v, n, ci, icc_floor)[2]
    two = k >= 2  # a stratum of one seed resamples itself: no interval there
    for name, arr in (("ci_low", lo), ("ci_high", hi), ("honest_low", h_lo), ("honest_high", h_hi), ("n_eff", n_eff)):
        out[name] = unpack(np.where(two, arr, np.nan), keep)
    if two.all():
        agg_lo, agg_hi = percentile_ci(iqm(reps, axis=-1), ci)
        a_lo, a_hi = honest_iqm_bounds(v, n, reps, ci, icc_floor)
        out["agg"].update(ci_low=float(agg_lo), ci_high=float(agg_hi), honest_low=float(a_lo), honest_high=float(a_hi))
    return out


def honest_tables(ss: xr.Dataset, settings=None, boot: int = 2000, rng_seed: int = 0, ci: float = 0.95,
                  iterates=None, icc_floor: float = ICC_FLOOR, progress: Progress | None = None) -> HonestTables:
    """Honest intervals of V and the tier at their upper bound, per algorithm and setting and per condition.

    aggregate (algo, setting): V (IQM over conditions of seed means), ci_low / ci_high (the paper's
    stratified percentile bootstrap: `stats.aggregate_table`'s V interval, same draws), honest_low /
    honest_high (`honest_iqm_bounds`), Dnorm, Dplus (IQMs), tier (observed), tier_at_bound (V at
    honest_high), rests_on_zero (V = 0 observed), claim (text), n_conditions, min_seeds, few_seeds
    (some condition has fewer than FEW_SEEDS seeds).
    conditions (algo, task, bound, setting): V, Dnorm, Dplus (seed means), ci_low / ci_high (bootstrap
    percentile of the seed mean), honest_low / honest_high (`honest_bounds`), n_seeds, n_episodes,
    n_eff (effective independent episodes), tier, tier_at_bound, rests_on_zero, claim, few_seeds.
    Runs holding only means have no V (left out). Intervals are NaN with fewer than 2 seeds (aggregate:
    in any condition)."""
    settings = settings_arg(settings, ss)
    check_boot(boot, ci)
    if not 0.0 <= icc_floor <= 1.0:
        raise CubeError(f"the intra-seed correlation floor must be in [0, 1], got {icc_floor!r}")
    algos = [str(a) for a in ss["algo"].values]
    rows: dict[tuple[int, int], dict] = {}
    total = len(settings) * len(algos)
    for si, s in enumerate(settings):
        rm = run_metrics(ss, s, iterates)
        rm["n_episodes"] = run_episodes(ss, s, iterates).where(rm["V"].notnull())
        for ai, a in enumerate(algos):
            rows[ai, si] = _one(rm, a, s, boot, rng_seed, ci, icc_floor)
            if progress:
                progress(si * len(algos) + ai + 1, total)
    return HonestTables(_aggregate(rows, algos, settings, ss, ci), _conditions(rows, algos, settings, ss, ci))


def _with_tiers(out: xr.Dataset, ci: float) -> xr.Dataset:
    out["tier"] = (out["V"].dims, tier(out["Dnorm"].values, out["V"].values, out["Dplus"].values))
    out["tier_at_bound"] = (out["V"].dims, tier_at_bound(out["Dnorm"].values, out["honest_high"].values,
                                                         out["Dplus"].values))
    out["rests_on_zero"] = np.abs(out["V"]) <= TIER_TOL
    out["claim"] = (out["V"].dims, tier_claims(out["tier"].values, out["tier_at_bound"].values,
                                               out["honest_high"].values, ci))
    return out


def _attrs(out: xr.Dataset, ss: xr.Dataset, ci: float) -> xr.Dataset:
    out.attrs.update(ss.attrs)
    out.attrs.update(ci=ci, interval="hull of the stratified percentile bootstrap and a seed-clustered "
                     "Clopper-Pearson (Korn-Graubard) interval; docs/statistics.md")
    return out


def _aggregate(rows: dict, algos: list[str], settings: tuple[str, ...], ss: xr.Dataset, ci: float) -> xr.Dataset:
    shape = (len(algos), len(settings))
    dims = ("algo", "setting")
    out = xr.Dataset(coords={"algo": algos, "setting": list(settings)})
    for name in ("V", "ci_low", "ci_high", "honest_low", "honest_high", "Dnorm", "Dplus"):
        out[name] = (dims, np.array([[rows[a, s]["agg"][name] for s in range(shape[1])] for a in range(shape[0])]))
    seeds = np.array([[rows[a, s]["n_seeds"] for s in range(shape[1])] for a in range(shape[0])])  # (A, S, P)
    out["n_conditions"] = (dims, (seeds > 0).sum(-1))
    least = np.where(seeds > 0, seeds, np.iinfo(np.int64).max).min(-1) if seeds.shape[-1] else seeds.sum(-1)
    out["min_seeds"] = (dims, np.where((seeds > 0).any(-1), least, 0))
    out["few_seeds"] = (out["n_conditions"] > 0) & (out["min_seeds"] < FEW_SEEDS)
    return _attrs(_with_tiers(out, ci), ss, ci)


def _conditions(rows: dict, algos: list[str], settings: tuple[str, ...], ss: xr.Dataset, ci: float) -> xr.Dataset:
    tasks, bounds = ss["task"].values, ss["bound"].values
    dims = ("algo", "task", "bound", "setting")
    out = xr.Dataset(coords={"algo": algos, "task": tasks, "bound": bounds, "setting": list(settings)})
    for name in ("V", "ci_low", "ci_high", "honest_low", "honest_high", "Dnorm", "Dplus", "n_seeds", "n_episodes",
                 "n_eff"):
        arr = np.stack([np.stack([rows[a, s][name] for s in range(len(settings))], -1) for a in range(len(algos))])
        out[name] = (dims, arr.reshape(len(algos), tasks.size, bounds.size, len(settings)))
    out["few_seeds"] = (out["n_seeds"] > 0) & (out["n_seeds"] < FEW_SEEDS)
    return _attrs(_with_tiers(out, ci), ss, ci)


# ----------------------------------------------------------------------------------------- exports
AGGREGATE_COLUMNS = ("algo", "setting", "V", "ci_low", "ci_high", "honest_low", "honest_high", "tier",
                     "tier_at_bound", "rests_on_zero", "claim", "n_conditions", "min_seeds", "few_seeds")
CONDITION_COLUMNS = ("algo", "task", "bound", "setting", "V", "ci_low", "ci_high", "honest_low", "honest_high",
                     "n_seeds", "n_episodes", "n_eff", "tier", "tier_at_bound", "rests_on_zero", "claim", "few_seeds")


def honest_frame(table: xr.Dataset) -> pd.DataFrame:
    """A long, CSV-ready table of `honest_tables` output (either part): one row per algo x setting (or
    algo x task x bound x setting), the columns AGGREGATE_COLUMNS / CONDITION_COLUMNS and a last `reason`:
    the code (`cube.stats.reasons.REASONS`) of the row's first missing number: no-episodes (no V: no run
    holds episodes here, or they hold only means), one-seed (V stands, a condition has 1 seed: no
    interval); `few_seeds` marks rows whose intervals stand on fewer than FEW_SEEDS seeds (the
    `few-seeds` mark of `cube.stats.reasons.MARKS`)."""
    columns = CONDITION_COLUMNS if "task" in table.dims else AGGREGATE_COLUMNS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        df = table[[c for c in columns if c in table.data_vars]].to_dataframe().reset_index()
    df = df[list(columns)]
    df["reason"] = np.where(df["V"].isna(), "no-episodes", np.where(df["honest_high"].isna(), "one-seed", ""))
    return df


HONEST_VARS = ("honest_low", "honest_high", "tier_at_bound", "rests_on_zero", "claim", "few_seeds")
"""What `with_honest` adds to a table (aggregate: also `min_seeds`; conditions: also `n_eff`)."""


def with_honest(table: xr.Dataset, honest: xr.Dataset) -> xr.Dataset:
    """`table` (`stats.aggregate_table`, dims (algo, setting, metric), or `stats.condition_table`, dims (algo,
    task, bound, setting)) with the matching part of `honest_tables` beside it: HONEST_VARS (the honest
    interval of V, the tier at its upper bound, whether the tier rests on V = 0 observed, the claim, the
    few-seeds mark) over the table's dims without `metric`. The paper's CI and tier stay as they are."""
    extra = [*HONEST_VARS, "min_seeds" if "min_seeds" in honest else "n_eff"]
    part = honest[[v for v in extra if v in honest]]
    at = {d: table[d].values for d in part.dims}
    part = part.sel(at)
    return table.assign({v: part[v].drop_vars([c for c in part[v].coords if c not in part[v].dims])
                         .assign_coords({d: table[d] for d in part[v].dims}) for v in part.data_vars})
