"""Why a number of a statistics table is missing: one code per value and interval, which every format
writes beside an empty cell (docs/statistics.md, "Numbers not available")."""

from __future__ import annotations

import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.stats.metrics import METRIC, METRICS

__all__ = ["REASONS", "reason_codes"]


REASONS: dict[str, str] = {
    "means-only": "the runs hold means of several episodes, not episodes (V, D_norm+, CVaR, tiers and CDFs need "
                  "every episode's cost)",
    "no-reward": "the source kept no rewards of these episodes",
    "no-episodes": "no selected run has episodes here",
    "few-seeds": "a condition has fewer than 2 seeds: the value stands, its interval (or std) does not",
}
"""Why a number of a table is missing: the codes every format writes beside an empty cell (CSV column
`reason`, JSON key `reason`, a note under human tables); see docs/statistics.md, "Numbers not available"."""


def reason_codes(table: xr.Dataset, kind: str) -> xr.Dataset:
    """The reason code (REASONS; "" where the number is there) of every value of a table and of its
    interval: vars `value` and `interval` over the table's value dims (per-condition tables: a `metric`
    dim over their `{m}_mean` / `{m}_std`; CDFs: (algo, setting), for the whole curve), plus `tier`
    (aggregate: (algo, setting); conditions: (algo, task, bound, setting)) where the table has tiers.

    kind: "aggregate", "conditions", "cdf", "poi" or "gap" (the tables of `aggregate_table`,
    `condition_table`, `cdf_curves`, `probability_of_improvement`, `greedy_expl_gap`)."""
    if kind == "conditions":
        metrics = list(METRICS)
        dim = xr.DataArray(metrics, dims="metric", name="metric")
        value = xr.concat([table[f"{m}_mean"] for m in metrics], dim=dim)
        spread = xr.concat([table[f"{m}_std"] for m in metrics], dim=dim)
    elif kind == "cdf":
        value, spread = table["cdf"].isnull().all("kappa"), table["ci_low"].isnull().all("kappa")
        value = xr.where(value, np.nan, 0.0)
        spread = xr.where(spread, np.nan, 0.0)
    elif kind in ("aggregate", "poi", "gap"):
        value, spread = table["value"], table["ci_low"]
    else:
        raise CubeError(f"unknown table kind {kind!r}: use aggregate, conditions, cdf, poi or gap")
    flag = table["means_only"] if "means_only" in table else xr.zeros_like(value, dtype=bool)
    if "metric" in value.dims:
        needs = xr.DataArray([METRIC[m].needs_episodes for m in value["metric"].values], dims="metric",
                             coords={"metric": value["metric"]})
        cost_there = value.sel(metric="C").notnull() if "C" in value["metric"].values else False
        is_reward = value["metric"] == "R"
    else:
        needs, cost_there, is_reward = True, False, False
    missing = value.isnull()
    code = xr.where(missing & flag & needs, "means-only",
                    xr.where(missing & is_reward & cost_there, "no-reward",
                             xr.where(missing, "no-episodes", "")))
    out = xr.Dataset({"value": code.astype(object),
                      "interval": xr.where(~missing & spread.isnull(), "few-seeds", code).astype(object)})
    if "tier" in table:
        no_tier = table["tier"] < 0
        tier_flag = flag if "means_only" in table else False
        out["tier"] = xr.where(no_tier & tier_flag, "means-only", xr.where(no_tier, "no-episodes", "")).astype(object)
    return out
