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
