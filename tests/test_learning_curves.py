"""Aggregate learning curves (cube.stats.learning_curves): numbers against a plain-numpy reference on random
cubes, the band against cube.stats, reproducibility, env-step bins, exports."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import xarray as xr
from scipy.stats import trim_mean

from cube import stats
from cube.errors import CubeError
from cube.render.data import learning_curve_csv, learning_curve_json
from cube.selection import Selection
from cube.stats.learning_curves import (
    aggregate_learning_curve,
    per_run_curves,
    steps_differ,
)
from cube.stats.metrics import iqm

try:
    from statsdata import random_cube, ref_fixed_policy
except ImportError:  # pragma: no cover
    from tests.statsdata import random_cube, ref_fixed_policy

METRICS = ("R", "C", "Dnorm", "V", "Dplus", "CVaR")  # CVaR_0.1 of (c - d)/d: `statsdata.ref_cvar`
BOOT = 200


def _reference(ds: xr.Dataset) -> np.ndarray:
    """Plain loops: per run and iterate eqs. 1-4 from the raw train episodes, seed mean per condition
    (seeds with episodes at that iterate), trim_mean(0.25) over the conditions that have any. (A, F, J)."""
    r = ds["reward"].values.astype(np.float64)
    c = ds["cost"].values.astype(np.float64)
    a_n, t_n, b_n, k_n, j_n = c.shape[:5]
    out = np.full((a_n, len(METRICS), j_n), np.nan)
    for a in range(a_n):
        for j in range(j_n):
            cond_means = []
            for t in range(t_n):
                for b in range(b_n):
                    d = float(ds["bound"].values[b])
                    per_seed = [ref_fixed_policy(r[a, t, b, k, j, :, 0], c[a, t, b, k, j, :, 0], d) for k in range(k_n)]
                    per_seed = [p for p in per_seed if not np.isnan(p["C"])]
                    if per_seed:
                        cond_means.append([np.mean([p[m] for p in per_seed]) for m in METRICS])
            if cond_means:
                out[a, :, j] = trim_mean(np.array(cond_means), 0.25, axis=0)
    return out


@pytest.fixture(scope="module")
def rand() -> tuple[xr.Dataset, xr.Dataset]:
    """A random ragged cube (3 algos x 2 tasks x 3 bounds x 4 seeds x 5 iterates) with one run missing an
    iterate's episodes and one run without any training episode."""
    ds = random_cube(np.random.default_rng(11), shape=(3, 2, 3, 4, 5, 7), bounds=(10.0, 20.0, 40.0))
    cost, reward = ds["cost"].values.copy(), ds["reward"].values.copy()
    cost[1, 0, 1, 2, 3, :, 0] = np.nan  # one run lacks iterate 3
    reward[1, 0, 1, 2, 3, :, 0] = np.nan
    cost[2, 1, 0, 0, :, :, 0] = np.nan  # one run has no training episode at all
    reward[2, 1, 0, 0, :, :, 0] = np.nan
    ds = ds.copy(data={"reward": reward, "cost": cost})
    return ds, stats.load_suffstats(ds)


def test_matches_plain_numpy_reference(rand):
    ds, ss = rand
    curve = aggregate_learning_curve(ss, boot=BOOT, rng_seed=1)
    assert curve["value"].dims == ("algo", "metric", "iterate")
    assert list(curve["metric"].values) == list(METRICS)
    np.testing.assert_allclose(curve["value"].transpose("algo", "metric", "iterate").values, _reference(ds),
                               rtol=1e-9, atol=1e-12)
    assert curve.attrs["boot"] == BOOT and curve.attrs["by"] == "iterate"
    assert int(curve["n_conditions"].sel(algo="alg0").min()) == 6
    assert np.all(curve["ci_low"] <= curve["value"] + 1e-12) and np.all(curve["value"] <= curve["ci_high"] + 1e-12)


def test_band_reproducible_and_seeded(rand):
    _, ss = rand
    a = aggregate_learning_curve(ss, boot=BOOT, rng_seed=5)
    b = aggregate_learning_curve(ss, boot=BOOT, rng_seed=5)
    c = aggregate_learning_curve(ss, boot=BOOT, rng_seed=6)
    for v in ("value", "ci_low", "ci_high"):
        np.testing.assert_array_equal(a[v].values, b[v].values)
    assert not np.allclose(a["ci_low"].values, c["ci_low"].values)
    np.testing.assert_array_equal(a["value"].values, c["value"].values)
    # an algorithm's band does not depend on the other algorithms selected
    one = aggregate_learning_curve(stats.select(ss, Selection(algos=("alg1",))), boot=BOOT, rng_seed=5)
    np.testing.assert_allclose(one["ci_high"].sel(algo="alg1").values, a["ci_high"].sel(algo="alg1").values)


def test_band_equals_aggregate_table_at_each_iterate(small_demo_cube):
    """On a complete cube the band at iterate j is the CI of the train setting of pi_j (same draws)."""
    ss = stats.load_suffstats(small_demo_cube)
    curve = aggregate_learning_curve(ss, boot=BOOT, rng_seed=3)
    for j in (0, 2, 4):
        agg = stats.aggregate_table(stats.select(ss, Selection(iterates=j)), "train", boot=BOOT, rng_seed=3)
        for v in ("value", "ci_low", "ci_high"):
            np.testing.assert_allclose(curve[v].sel(iterate=j).transpose("algo", "metric").values,
                                       agg[v].sel(setting="train").transpose("algo", "metric").values,
                                       rtol=1e-9, atol=1e-12)


def test_iterate_window_drops_other_iterates(small_demo_cube):
    ss = stats.select(stats.load_suffstats(small_demo_cube), Selection(iterates=(1, 3)))
    curve = aggregate_learning_curve(ss, metrics=("C", "V"), boot=50)
    assert list(curve["iterate"].values) == [1, 2, 3]
    assert list(curve["metric"].values) == ["C", "V"]


def test_one_seed_condition_gives_nan_ci(rand):
    _, ss = rand
    ss1 = stats.select(ss, Selection(seeds=(0,)))
    with pytest.warns(stats.StatsWarning, match="fewer than 2 seeds"):
        curve = aggregate_learning_curve(ss1, boot=50)
    assert np.isnan(curve["ci_low"].values).all()
    assert np.isfinite(curve["value"].sel(algo="alg0").values).all()


def test_nan_iqm_is_trim_mean_of_finite_values():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(13, 7))
    np.testing.assert_allclose(iqm(x, axis=0, ignore_nan=True), trim_mean(x, 0.25, axis=0), rtol=1e-12)
    x[[0, 3, 5], 2] = np.nan
    np.testing.assert_allclose(iqm(x, axis=0, ignore_nan=True)[2], trim_mean(x[~np.isnan(x[:, 2]), 2], 0.25))
    x[:, 4] = np.nan
    assert np.isnan(iqm(x, axis=0, ignore_nan=True)[4])


def _with_steps(ss: xr.Dataset, per_iter: np.ndarray) -> xr.DataArray:
    dims = ("algo", "task", "bound", "seed", "iterate")
    shape = tuple(ss.sizes[d] for d in dims)
    return xr.DataArray(np.broadcast_to(per_iter, shape).copy(), dims=dims, coords={d: ss[d].values for d in dims})


def test_env_step_bins(rand):
    ds, ss = rand
    uniform = _with_steps(ss, 1000.0 * (np.arange(ss.sizes["iterate"]) + 1))
    assert not steps_differ(uniform)
    by_it = aggregate_learning_curve(ss, boot=BOOT, rng_seed=2)
    # one bin per iterate: the same numbers as by iterate
    edges = 1000.0 * np.arange(ss.sizes["iterate"] + 1) + 500.0
    binned = aggregate_learning_curve(ss, boot=BOOT, rng_seed=2, by="env_steps", env_steps=uniform, bins=edges)
    assert binned["value"].dims == ("algo", "metric", "step_bin")
    np.testing.assert_allclose(binned["value"].values, by_it["value"].values, rtol=1e-12)
    np.testing.assert_allclose(binned["ci_low"].values, by_it["ci_low"].values, rtol=1e-12)
    assert aggregate_learning_curve(ss, boot=10, by="auto", env_steps=uniform).attrs["by"] == "iterate"

    # runs with twice the steps per iterate for one algorithm: two iterates share a bin
    steps = uniform.copy()
    steps.loc[{"algo": "alg1"}] = steps.sel(algo="alg1") * 2
    assert steps_differ(steps)
    curve = aggregate_learning_curve(ss, boot=BOOT, by="auto", env_steps=steps, bins=5)
    assert curve.attrs["by"] == "env_steps"
    runs = per_run_curves(ss, by="env_steps", env_steps=steps, bins=5)
    # bin edges 0, 2000, ..., 10000: alg1's iterates 0 (2000) -> bin 0, iterates 1 and 2 -> bins 1 and 2
    x = per_run_curves(ss)["C"].sel(algo="alg1").values
    np.testing.assert_allclose(runs["C"].sel(algo="alg1").isel(step_bin=0).values, x[..., 0])
    # alg0: iterates 0 (1000) and 1 (2000) both in bin 0: the mean of the two
    x0 = per_run_curves(ss)["C"].sel(algo="alg0").values
    np.testing.assert_allclose(runs["C"].sel(algo="alg0").isel(step_bin=0).values, np.nanmean(x0[..., :2], -1))
    with pytest.raises(CubeError, match="env_steps"):
        aggregate_learning_curve(ss, boot=10, by="env_steps")


def test_bad_arguments(rand):
    _, ss = rand
    for kw, msg in (({"metrics": ("X",)}, "unknown metric"), ({"boot": 0}, "positive integer"),
                    ({"ci": 1.5}, "confidence"), ({"by": "time"}, "unknown curve axis")):
        with pytest.raises(CubeError, match=msg):
            aggregate_learning_curve(ss, **kw)


def test_csv_and_json_exports(small_demo_cube):
    ss = stats.load_suffstats(small_demo_cube)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        curve = aggregate_learning_curve(ss, boot=50)
    text = learning_curve_csv(curve)
    lines = text.strip().splitlines()
    assert lines[0] == "algo,metric,iterate,value,ci_low,ci_high,n_conditions"
    assert len(lines) == 1 + curve.sizes["algo"] * curve.sizes["metric"] * curve.sizes["iterate"]
    first = lines[1].split(",")
    assert float(first[3]) == curve["value"].isel(algo=0, metric=0, iterate=0).item()
    doc = json.loads(learning_curve_json(curve))
    assert doc["kind"] == "aggregate_curve" and doc["synthetic"] is True and doc["boot"] == 50
    assert doc["iterate"] == list(range(5))
    assert len(doc["curves"]) == curve.sizes["algo"] * curve.sizes["metric"]
    assert doc["curves"][0]["value"][0] == pytest.approx(curve["value"].isel(algo=0, metric=0, iterate=0).item())


def test_means_only_runs_count_for_means_only(rand):
    """A run flagged means_only (per-epoch means, no episodes) has no V or D_norm+, but R, C, Dnorm."""
    _, ss = rand
    flag = xr.zeros_like(ss["n"].isel(iterate=0), dtype=bool).drop_vars("iterate", errors="ignore")
    flag.loc[{"algo": "alg0", "task": "task0", "bound": 10.0, "seed": 0, "mode": "train"}] = True
    flagged = ss.assign(means_only=flag.transpose("algo", "task", "bound", "seed", "mode"))
    runs = per_run_curves(flagged)
    one = runs.sel(algo="alg0", task="task0", bound=10.0, seed=0)
    assert np.isnan(one["V"]).all() and np.isnan(one["Dplus"]).all() and np.isfinite(one["R"]).all()
    curve = aggregate_learning_curve(flagged, boot=BOOT)
    plain = aggregate_learning_curve(ss, boot=BOOT)
    np.testing.assert_allclose(curve["value"].sel(metric=["R", "C", "Dnorm"]).values,
                               plain["value"].sel(metric=["R", "C", "Dnorm"]).values, rtol=1e-12)
    v = runs["V"].sel(algo="alg0").stack(cond=("task", "bound")).transpose("cond", "seed", "iterate").values
    want = iqm(np.nanmean(v, axis=1), axis=0, ignore_nan=True)
    np.testing.assert_allclose(curve["value"].sel(algo="alg0", metric="V").values, want, rtol=1e-12)
