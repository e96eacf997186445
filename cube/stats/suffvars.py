"""The sufficient statistics of a cell, named once: every kernel, the pass, the cache and the metric formulas
read their names and order from here.

A cell is one run's iterate in one mode (dims CELL_DIMS). Over its episodes present (NaN = no episode), with
costs c_i, rewards r_i and bound d (definitions: `cube.stats.kernel`):

    SUM_VARS  n_r, sum_r, n, sum_c, n_viol, sum_over   float64 columns of the kernels' output, in this order
    CDF_VAR   le                                       the empirical-CDF counts (dim `kappa`)
    CVAR_VAR  cvar_c                                   CVaR_alpha of the costs (dim `cvar_alpha`; `cube.stats.tail`)

COUNT_VARS are the integer-valued ones among SUM_VARS; STATS_VARS everything a suffstats Dataset holds per cell.
"""

from __future__ import annotations

from cube.schema import RUN_DIMS

CELL_DIMS = (*RUN_DIMS, "iterate", "mode")
"""The dims of one cell of statistics (a run's iterate in one mode)."""

SUM_VARS: tuple[str, ...] = ("n_r", "sum_r", "n", "sum_c", "n_viol", "sum_over")
"""The per-cell sums and counts, in the order of the columns the kernels fill."""

COLUMN: dict[str, int] = {name: i for i, name in enumerate(SUM_VARS)}
"""The kernels' output column of each of SUM_VARS."""

COUNT_VARS: tuple[str, ...] = ("n_r", "n", "n_viol")
"""The counts among SUM_VARS (exact integers; int64 in a suffstats Dataset)."""

CDF_VAR = "le"
"""The CDF counts: le[g] = #{i: (c_i - d) / d <= kappa[g]} (dims CELL_DIMS + kappa)."""

CVAR_VAR = "cvar_c"
"""The upper-tail means: cvar_c[a] = CVaR_alpha[a] of the cell's costs, in cost units (dims CELL_DIMS +
ALPHA_DIM; 0 where the cell has no episodes)."""
ALPHA_DIM = "cvar_alpha"
"""The dim of CVAR_VAR: the alphas the statistics hold (coordinate values, e.g. 0.1 and 0.05)."""

STATS_VARS: tuple[str, ...] = (*SUM_VARS, CDF_VAR, CVAR_VAR)
"""Every per-cell statistic of a suffstats Dataset (what the cache stores, what a selection blanks)."""
