"""Stratified bootstrap: the resampling law, stratification, reproducibility and CI behaviour."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

try:  # tests/ on sys.path (rootdir conftest) or the repo root (tests as a package)
    from statsdata import random_cube
except ImportError:
    from tests.statsdata import random_cube

from cube import stats
from cube.selection import Selection
from cube.stats import stratified_bootstrap_means


def test_engine_equals_per_replicate_loop_with_the_same_draws():
    rng_vals = np.random.default_rng(1)
    k = np.array([3, 1, 4])
    values = rng_vals.normal(size=(3, 4, 2))
    values[0, 3] = values[1, 1:] = np.nan  # padding beyond k[p]
    packed = np.where(np.isnan(values), 0.0, values)
    got = stratified_bootstrap_means(packed, k, 30, np.random.default_rng(9))
    u = np.random.default_rng(9).random((30, 3, 4))  # the documented draw: seed floor(u * k[p]) of stratum p
    for b in range(30):
        for p in range(3):
            idx = np.minimum((u[b, p, : k[p]] * k[p]).astype(int), k[p] - 1)
            np.testing.assert_allclose(got[b, p], values[p, idx].mean(0), rtol=1e-12)


def test_resampling_law_for_two_seeds():
    # Stratum with seeds {0, 1}: the bootstrap mean is 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4.
    means = stratified_bootstrap_means(np.array([[[0.0], [1.0]]]), np.array([2]), 40_000,
                                       np.random.default_rng(0))[:, 0, 0]
    freq = [np.mean(means == v) for v in (0.0, 0.5, 1.0)]
    np.testing.assert_allclose(freq, [0.25, 0.5, 0.25], atol=0.01)


@settings(max_examples=40, deadline=None)
@given(k=st.lists(st.integers(1, 6), min_size=1, max_size=5), seed=st.integers(0, 2**32 - 1))
def test_resampling_stays_within_each_stratum(k, seed):
    rng = np.random.default_rng(seed)
    kmax, p = max(k), len(k)
    values = np.full((p, kmax, 1), 1e9)  # padding that must never be drawn
    for i, ki in enumerate(k):
        values[i, :ki, 0] = 10.0 * i + rng.random(ki)
    means = stratified_bootstrap_means(values, np.array(k), 200, rng)[..., 0]
    for i, ki in enumerate(k):
        assert means[:, i].min() >= values[i, :ki, 0].min() - 1e-9
        assert means[:, i].max() <= values[i, :ki, 0].max() + 1e-9


def test_identical_seeds_give_a_zero_width_ci():
    ds = random_cube(np.random.default_rng(2), shape=(1, 2, 2, 3, 2, 5), ragged=False)
    cost = ds["cost"].values.copy()
    cost[:] = cost[:, :, :, :1]  # every seed equals seed 0
    ds["cost"].values[:] = cost
    ds["reward"].values[:] = ds["reward"].values[:, :, :, :1]
    agg = stats.aggregate_table(stats.load_suffstats(ds), boot=100)
    np.testing.assert_allclose(agg["ci_low"], agg["value"], rtol=1e-12)
    np.testing.assert_allclose(agg["ci_high"], agg["value"], rtol=1e-12)
    assert np.all(agg["tier_stability"] == 1.0)


@pytest.fixture(scope="module")
def ss():
    return stats.load_suffstats(random_cube(np.random.default_rng(4), shape=(3, 2, 2, 5, 3, 6)))


def test_reproducible_and_seed_dependent(ss):
    a = stats.aggregate_table(ss, boot=300, rng_seed=1)
    b = stats.aggregate_table(ss, boot=300, rng_seed=1)
    c = stats.aggregate_table(ss, boot=300, rng_seed=2)
    np.testing.assert_array_equal(a["ci_low"], b["ci_low"])
    assert not np.array_equal(a["ci_low"].values, c["ci_low"].values)
    np.testing.assert_array_equal(a["value"], c["value"])


def test_an_algorithms_ci_does_not_depend_on_the_other_algorithms(ss):
    full = stats.aggregate_table(ss, boot=200)
    alone = stats.aggregate_table(stats.select(ss, Selection(algos=("alg1",))), boot=200)
    np.testing.assert_array_equal(full["ci_low"].sel(algo="alg1"), alone["ci_low"].sel(algo="alg1"))


def test_ci_brackets_point_and_widens_with_level(ss):
    a90 = stats.aggregate_table(ss, boot=500, ci=0.90)
    a99 = stats.aggregate_table(ss, boot=500, ci=0.99)
    assert np.all(a99["ci_low"] <= a90["ci_low"]) and np.all(a99["ci_high"] >= a90["ci_high"])
    assert np.all(a90["ci_low"] < a90["ci_high"])


def test_conditions_without_runs_are_dropped_from_the_iqm():
    ds = random_cube(np.random.default_rng(8), shape=(1, 2, 2, 3, 2, 5))
    ds["cost"].values[0, 0, 0, :, :, :, 2] = np.nan  # no greedy episodes in one condition
    ds["reward"].values[0, 0, 0, :, :, :, 2] = np.nan
    agg = stats.aggregate_table(stats.load_suffstats(ds), ["final_greedy", "train"], boot=50)
    assert agg["n_conditions"].sel(setting="final_greedy").item() == 3
    assert agg["n_conditions"].sel(setting="train").item() == 4


def test_cdf_band_equals_a_per_replicate_loop_of_the_pooled_ratio():
    """The CDF's one-matmul bootstrap equals, replicate by replicate, drawing seeds within each condition
    (the documented law) and pooling the drawn seeds' episodes: sum of counts <= kappa / sum of episodes."""
    ds = random_cube(np.random.default_rng(6), shape=(1, 2, 2, 4, 2, 6))  # ragged episode counts
    ss = stats.load_suffstats(ds)
    cdf = stats.cdf_curves(ss, ["train"], boot=300, rng_seed=5)
    c = ds["cost"].values.astype(np.float64)[0, ..., 0]  # (T, B, S, J, E)
    d = ds["bound"].values[None, :, None, None, None]
    x = ((c - d) / d).reshape(4, 4, -1)  # (condition, seed, pooled episodes of all iterates)
    kappa = ss["kappa"].values
    u = stats._rng(5, "alg0", "train").random((300, 4, 4))
    reps = np.empty((300, kappa.size))
    for b in range(300):
        drawn = np.concatenate([x[p, int(u[b, p, i] * 4)] for p in range(4) for i in range(4)])
        drawn = drawn[~np.isnan(drawn)]
        reps[b] = (drawn[:, None] <= kappa[None, :]).sum(0) / drawn.size
    lo, hi = np.quantile(reps, [0.025, 0.975], axis=0)
    np.testing.assert_allclose(cdf["ci_low"].sel(algo="alg0", setting="train"), lo, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cdf["ci_high"].sel(algo="alg0", setting="train"), hi, rtol=1e-10, atol=1e-12)


def test_tier_stability_is_the_share_of_replicates_in_the_point_tier(ss):
    agg = stats.aggregate_table(ss, boot=400)
    st_ = agg["tier_stability"].values
    assert np.all((st_ >= 0) & (st_ <= 1))
    assert np.all(np.isclose(st_ * 400, np.round(st_ * 400)))  # a count of replicates out of B


def test_batching_replicates_does_not_change_the_result(ss, monkeypatch):
    whole = stats.aggregate_table(ss, boot=300, rng_seed=4)
    cdf_whole = stats.cdf_curves(ss, ["train"], boot=300, rng_seed=4)
    monkeypatch.setattr(stats, "_BATCH", 7)
    np.testing.assert_array_equal(stats.aggregate_table(ss, boot=300, rng_seed=4)["ci_high"], whole["ci_high"])
    np.testing.assert_allclose(stats.cdf_curves(ss, ["train"], boot=300, rng_seed=4)["ci_low"], cdf_whole["ci_low"],
                               rtol=1e-12, atol=1e-15)
