"""`ds.saferl` after a plain `import cube` gives the same numbers as the functional API."""

from __future__ import annotations

from pathlib import Path

import xarray as xr

import cube
from cube import stats


def test_accessor_is_registered_and_matches_functions(small_demo_cube: Path) -> None:
    ds = cube.open_cube(small_demo_cube)
    assert ds.encoding["saferl_source"] == str(small_demo_cube)
    via_accessor = ds.saferl.aggregate(boot=50, rng_seed=3)
    direct = stats.aggregate_table(stats.load_suffstats(small_demo_cube), boot=50, rng_seed=3)
    xr.testing.assert_allclose(via_accessor, direct)
    rm = ds.saferl.run_metrics("final_greedy")
    assert set(rm.data_vars) >= set(stats.METRICS)


def test_accessor_has_the_statistics_beyond_the_paper(small_demo_cube: Path) -> None:
    ds = cube.open_cube(small_demo_cube)
    ss = stats.load_suffstats(small_demo_cube)
    kw = {"boot": 30, "rng_seed": 2}
    xr.testing.assert_identical(ds.saferl.honest(["final_greedy"], **kw).aggregate,
                                stats.honest_tables(ss, ["final_greedy"], **kw).aggregate)
    xr.testing.assert_identical(ds.saferl.profiles(["train"], **kw), stats.performance_profiles(ss, ["train"], **kw))
    xr.testing.assert_identical(ds.saferl.front(["final_greedy"], **kw),
                                stats.reward_cost_front(ss, ["final_greedy"], **kw))
    xr.testing.assert_identical(ds.saferl.plan(["train"], metrics="V", **kw),
                                stats.plan_seeds(ss, ["train"], metrics="V", **kw))
    poi = ds.saferl.plan_poi("ppo_lag", "p3o", ["final_greedy"], metrics="V", max_seeds=10, **kw)
    assert poi.attrs["x"] == "ppo_lag" and "power_now" in poi
