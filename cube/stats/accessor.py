"""The `ds.saferl` Dataset accessor: the tables of `cube.stats` on a cube Dataset or on its suffstats.

Registered when this module is imported: the first name taken from `cube` or `cube.stats` does it (both are
lazy facades, so that `import cube` alone loads no xarray). The tables a report does not always ask for (PoI,
gap, front, honest intervals, profiles, plans, learning curves) are imported by their method when it is used:
the honest intervals need scipy, a second of a warm report's start-up (issue 37).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import xarray as xr

from cube.selection import Selection
from cube.stats.runs import iterate_metrics, run_metrics
from cube.stats.subset import select
from cube.stats.suffstats import load_suffstats
from cube.stats.tables import aggregate_table, cdf_curves, condition_table
from cube.store.read import load_consistent

if TYPE_CHECKING:
    from cube.stats.honest import HonestTables

__all__ = ["SaferlAccessor"]


@xr.register_dataset_accessor("saferl")
class SaferlAccessor:
    """`ds.saferl`: the statistics tables on a cube Dataset (episodes) or on its suffstats.

    ds.saferl.load(): the cube (any selection of `cube.open_cube(...)`) in memory, every run one writer
    state (`cube.store.read.load_consistent`), the way to read episodes while writers write.
    ds.saferl.suffstats, .select(Selection), .run_metrics(setting), .iterate_metrics(mode),
    .conditions(settings), .aggregate(settings, boot=..), .cdf(settings, boot=..), .poi(x, y, setting),
    .gap(boot=..), .honest(settings), .profiles(settings), .front(settings), .plan(settings),
    .plan_poi(x, y): each returns the xarray object of the `cube.stats` function of the same meaning.
    """

    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds
        self._ss: xr.Dataset | None = None

    def load(self) -> xr.Dataset:
        """An in-memory copy of this cube or selection of one in which every run is one writer state: runs a
        writer wrote while they were read are read again consistently (`cube.store.read.load_consistent`);
        a plain ``.load()`` / ``.values`` guarantees nothing across variables while writers write."""
        return load_consistent(self._ds)

    @property
    def suffstats(self) -> xr.Dataset:
        """The sufficient statistics (computed once from the episodes; the Dataset itself if it is one)."""
        if self._ss is None:
            is_ss = "n" in self._ds and "le" in self._ds
            source = self._ds.encoding.get("saferl_source", self._ds)
            self._ss = self._ds if is_ss else load_suffstats(source)
        return self._ss

    def select(self, selection: Selection) -> xr.Dataset:
        return select(self.suffstats, selection)

    def run_metrics(self, setting: str, iterates=None) -> xr.Dataset:
        return run_metrics(self.suffstats, setting, iterates)

    def iterate_metrics(self, mode: str = "train") -> xr.Dataset:
        return iterate_metrics(self.suffstats, mode)

    def conditions(self, settings=None, iterates=None) -> xr.Dataset:
        return condition_table(self.suffstats, settings, iterates)

    def aggregate(self, settings=None, **kwargs) -> xr.Dataset:
        return aggregate_table(self.suffstats, settings, **kwargs)

    def cdf(self, settings=None, **kwargs) -> xr.Dataset:
        return cdf_curves(self.suffstats, settings, **kwargs)

    def poi(self, x: str, y: str, setting=None, **kwargs) -> xr.Dataset:
        from cube.stats.compare import probability_of_improvement

        return probability_of_improvement(self.suffstats, x, y, setting, **kwargs)

    def gap(self, **kwargs) -> xr.Dataset:
        from cube.stats.compare import greedy_expl_gap

        return greedy_expl_gap(self.suffstats, **kwargs)

    def learning_curve(self, **kwargs) -> xr.Dataset:
        """`cube.stats.learning_curves.aggregate_learning_curve` of this cube (kwargs: metrics, boot, by, ...)."""
        from cube.stats.learning_curves import aggregate_learning_curve

        return aggregate_learning_curve(self.suffstats, **kwargs)

    def honest(self, settings=None, **kwargs) -> HonestTables:
        """`cube.stats.honest.honest_tables`: honest intervals of V, the tier at their bound and its claim."""
        from cube.stats.honest import honest_tables

        return honest_tables(self.suffstats, settings, **kwargs)

    def profiles(self, settings=None, **kwargs) -> xr.Dataset:
        """`cube.stats.profiles.performance_profiles`: run-level profiles with bootstrap bands."""
        from cube.stats.profiles import performance_profiles

        return performance_profiles(self.suffstats, settings, **kwargs)

    def front(self, settings=None, **kwargs) -> xr.Dataset:
        """`cube.stats.front.reward_cost_front`: the reward-cost front across bounds per task, P(front)."""
        from cube.stats.front import reward_cost_front

        return reward_cost_front(self.suffstats, settings, **kwargs)

    def plan(self, settings=None, **kwargs) -> xr.Dataset:
        """`cube.stats.planning.plan_seeds`: seeds per condition for a CI half-width of each IQM."""
        from cube.stats.planning import plan_seeds

        return plan_seeds(self.suffstats, settings, **kwargs)

    def plan_poi(self, x: str, y: str, settings=None, **kwargs) -> xr.Dataset:
        """`cube.stats.planning.plan_poi`: seeds for P(X improves on Y) to exclude 0.5 with a power."""
        from cube.stats.planning import plan_poi

        return plan_poi(self.suffstats, x, y, settings, **kwargs)
