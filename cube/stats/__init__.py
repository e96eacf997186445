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
* `cube.stats.accessor`  the `ds.saferl` Dataset accessor (registered by importing this module).

Below the facade: `suffvars` (the names of the sufficient statistics), `kernel` and `fused` (the numpy and
compiled kernels), `cache`, `curves` (per-condition curves and histograms), `reasons` (why a number is
missing), `reference` (a cube's tables beside published numbers), and the statistics beyond the paper's
point estimates, imported from their modules: `honest` (intervals of V honest at 0, tier claims), `profiles`
(run-level performance profiles), `front` (the reward-cost front), `planning` (how many seeds), `coverage`
(their simulation) and `packing` (per-run values by condition, which they share).

Definitions and the choices the paper leaves open: docs/statistics.md.
"""

from __future__ import annotations

from cube.selection import Selection
from cube.stats.accessor import SaferlAccessor
from cube.stats.bootstrap import (
    StatsWarning,
    bootstrap_rng,
    stratified_bootstrap_means,
    stratified_bootstrap_weights,
)
from cube.stats.compare import greedy_expl_gap, probability_of_improvement
from cube.stats.learning_curves import aggregate_learning_curve
from cube.stats.metrics import (
    HIGHER_IS_BETTER,
    METRICS,
    PAPER_METRICS,
    SETTINGS,
    TIER_LABELS,
    TIER_TOL,
    iqm,
    not_safe,
    tier,
)
from cube.stats.runs import (
    available_settings,
    cvar_alpha,
    iterate_metrics,
    means_only_runs,
    require_data,
    run_metrics,
    runs_without,
    settings_arg,
    some_labels,
    with_cvar_alpha,
)
from cube.stats.subset import select
from cube.stats.suffstats import load_suffstats
from cube.stats.tables import Progress, aggregate_table, cdf_curves, condition_table
from cube.stats.tail import CVAR_ALPHAS, DEFAULT_CVAR_ALPHA, check_alpha

__all__ = [
    "SETTINGS", "METRICS", "TIER_LABELS", "load_suffstats", "select", "run_metrics", "iterate_metrics",
    "condition_table", "aggregate_table", "cdf_curves", "iqm", "tier", "settings_arg",
    "available_settings", "require_data", "stratified_bootstrap_means", "stratified_bootstrap_weights",
    "probability_of_improvement", "greedy_expl_gap", "runs_without", "StatsWarning", "TIER_TOL",
    "HIGHER_IS_BETTER", "SaferlAccessor", "bootstrap_rng", "some_labels", "Selection", "Progress",
    "means_only_runs", "aggregate_learning_curve", "not_safe", "PAPER_METRICS", "with_cvar_alpha", "cvar_alpha",
    "CVAR_ALPHAS", "DEFAULT_CVAR_ALPHA", "check_alpha",
]
