"""The public statistics API (a facade): the paper's metrics, tables, bootstrap CIs and tiers.

Everything exported here is defined in one of these modules and re-exported unchanged:

* `cube.stats.metrics`   the registry (names, labels, directions, formulas), settings, tiers, IQM;
* `cube.stats.suffstats` `load_suffstats`: the one pass over the episodes, kept current through its cache;
* `cube.stats.subset`    `select`: a `Selection` applied to sufficient statistics (the one selection engine);
* `cube.stats.runs`      run and iterate metrics, the settings a cube has, the seed mean and std, the CVaR
                         alpha of the tables (`with_cvar_alpha`);
* `cube.stats.tail`      CVaR's definition and alphas;
* `cube.stats.tables`    condition and aggregate tables, CDFs;
* `cube.stats.compare`   probability of improvement, greedy-expl gap;
* `cube.stats.bootstrap` the one interval-estimate engine (stratified bootstrap over seeds, percentile CIs);
* `cube.stats.learning_curves` aggregate learning curves (IQM over conditions per iterate, bootstrap band);
* `cube.stats.honest`    intervals of V honest at 0 and the tier claims at their bound (`honest_tables`, `with_honest`);
* `cube.stats.profiles`  run-level performance profiles (`performance_profiles`);
* `cube.stats.front`     the reward-cost front across bounds (`reward_cost_front`);
* `cube.stats.planning`  how many seeds (`plan_seeds`, `plan_poi`, `plan_footer`);
* `cube.stats.reasons`   why a number is missing (`REASONS`) and what a mark says (`MARKS`);
* `cube.stats.accessor`  the `ds.saferl` Dataset accessor (registered by the first name taken from this facade
                         or from `cube`).

Below the facade: `suffvars` (the names of the sufficient statistics), `kernel` and `fused` (the numpy and
compiled kernels), `cache`, `curves` (per-condition curves and histograms), `reasons` (why a number is
missing), `reference` (a cube's tables beside published numbers), `coverage` (the simulation of the honest
intervals) and `packing` (per-run values by condition, which the statistics beyond the paper share).

Definitions and the choices the paper leaves open: docs/statistics.md.
"""

from __future__ import annotations

import importlib
from typing import Any

# The facade is lazy (PEP 562): `import cube.stats` or `from cube.stats.tail import ...` costs nothing, so the
# command line parses its arguments without xarray, dask, zarr, pandas or scipy; a name is imported from its
# module the first time it is used. Any use of the facade registers the ``ds.saferl`` accessor.
_EXPORTS: dict[str, str] = {  # public name -> the module that defines it
    "Selection": "cube.selection",
    "SaferlAccessor": "cube.stats.accessor",
    "StatsWarning": "cube.stats.bootstrap",
    "bootstrap_rng": "cube.stats.bootstrap",
    "stratified_bootstrap_means": "cube.stats.bootstrap",
    "stratified_bootstrap_weights": "cube.stats.bootstrap",
    "greedy_expl_gap": "cube.stats.compare",
    "probability_of_improvement": "cube.stats.compare",
    "front_counts_frame": "cube.stats.front",
    "front_frame": "cube.stats.front",
    "reward_cost_front": "cube.stats.front",
    "FEW_SEEDS": "cube.stats.honest",
    "ICC_FLOOR": "cube.stats.honest",
    "HonestTables": "cube.stats.honest",
    "honest_frame": "cube.stats.honest",
    "honest_tables": "cube.stats.honest",
    "with_honest": "cube.stats.honest",
    "aggregate_learning_curve": "cube.stats.learning_curves",
    "HIGHER_IS_BETTER": "cube.stats.metrics",
    "METRICS": "cube.stats.metrics",
    "PAPER_METRICS": "cube.stats.metrics",
    "SETTINGS": "cube.stats.metrics",
    "TIER_LABELS": "cube.stats.metrics",
    "TIER_TOL": "cube.stats.metrics",
    "iqm": "cube.stats.metrics",
    "not_safe": "cube.stats.metrics",
    "tier": "cube.stats.metrics",
    "plan_footer": "cube.stats.planning",
    "plan_frame": "cube.stats.planning",
    "plan_poi": "cube.stats.planning",
    "plan_seeds": "cube.stats.planning",
    "performance_profiles": "cube.stats.profiles",
    "profile_frame": "cube.stats.profiles",
    "profile_metrics": "cube.stats.profiles",
    "MARKS": "cube.stats.reasons",
    "REASONS": "cube.stats.reasons",
    "available_settings": "cube.stats.runs",
    "cvar_alpha": "cube.stats.runs",
    "iterate_metrics": "cube.stats.runs",
    "means_only_runs": "cube.stats.runs",
    "require_data": "cube.stats.runs",
    "run_metrics": "cube.stats.runs",
    "runs_without": "cube.stats.runs",
    "settings_arg": "cube.stats.runs",
    "some_labels": "cube.stats.runs",
    "with_cvar_alpha": "cube.stats.runs",
    "select": "cube.stats.subset",
    "load_suffstats": "cube.stats.suffstats",
    "Progress": "cube.stats.tables",
    "aggregate_table": "cube.stats.tables",
    "cdf_curves": "cube.stats.tables",
    "condition_table": "cube.stats.tables",
    "CVAR_ALPHAS": "cube.stats.tail",
    "DEFAULT_CVAR_ALPHA": "cube.stats.tail",
    "check_alpha": "cube.stats.tail",
}

__all__ = [
    "SETTINGS", "METRICS", "TIER_LABELS", "load_suffstats", "select", "run_metrics", "iterate_metrics",
    "condition_table", "aggregate_table", "cdf_curves", "iqm", "tier", "settings_arg",
    "available_settings", "require_data", "stratified_bootstrap_means", "stratified_bootstrap_weights",
    "probability_of_improvement", "greedy_expl_gap", "runs_without", "StatsWarning", "TIER_TOL",
    "HIGHER_IS_BETTER", "SaferlAccessor", "bootstrap_rng", "some_labels", "Selection", "Progress",
    "means_only_runs", "aggregate_learning_curve", "not_safe", "PAPER_METRICS", "with_cvar_alpha", "cvar_alpha",
    "CVAR_ALPHAS", "DEFAULT_CVAR_ALPHA", "check_alpha",
    "honest_tables", "HonestTables", "honest_frame", "with_honest", "FEW_SEEDS", "ICC_FLOOR",
    "performance_profiles", "profile_frame", "profile_metrics",
    "reward_cost_front", "front_frame", "front_counts_frame",
    "plan_seeds", "plan_poi", "plan_frame", "plan_footer", "REASONS", "MARKS",
]


def __getattr__(name: str) -> Any:
    """The facade's name `name`, imported from its module on first use (and the accessor registered)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cube.stats' has no attribute {name!r}")
    importlib.import_module("cube.stats.accessor")  # registers ``ds.saferl``
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
