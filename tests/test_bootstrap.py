"""Stratified bootstrap: the resampling law, stratification, reproducibility and CI behaviour."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

try:  # tests/ on sys.path (rootdir conftest) or the repo root (tests as a package)
    from statsdata import cube_ds, random_cube, ref_run
except ImportError:
    from tests.statsdata import cube_ds, random_cube, ref_run

from cube import stats
from cube.selection import Selection
from cube.stats import bootstrap, stratified_bootstrap_means


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
    u = stats.bootstrap_rng(5, "alg0", "train").random((300, 4, 4))
    reps = np.empty((300, kappa.size))
    for b in range(300):
        drawn = np.concatenate([x[p, int(u[b, p, i] * 4)] for p in range(4) for i in range(4)])
        drawn = drawn[~np.isnan(drawn)]
        reps[b] = (drawn[:, None] <= kappa[None, :]).sum(0) / drawn.size
    lo, hi = np.quantile(reps, [0.025, 0.975], axis=0)
    np.testing.assert_allclose(cdf["ci_low"].sel(algo="alg0", setting="train"), lo, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cdf["ci_high"].sel(algo="alg0", setting="train"), hi, rtol=1e-10, atol=1e-12)


def test_generator_is_seeded_by_rng_seed_and_the_crc32_of_label_and_setting():
    """The documented seeding (and so every published CI) must not change: pin the stream."""
    want = np.random.default_rng([7, zlib.crc32(b"ppo_lag"), zlib.crc32(b"final_greedy")]).random(5)
    np.testing.assert_array_equal(stats.bootstrap_rng(7, "ppo_lag", "final_greedy").random(5), want)


def plain_tier(dnorm: float, v: float, dplus: float, tol: float = 1e-9) -> int:
    """Table 1 written out, with the documented absolute slack."""
    if np.isnan(dnorm) or np.isnan(v) or np.isnan(dplus):
        return -1
    if dnorm > tol:
        return 0
    if abs(v) <= tol and abs(dplus) <= tol:
        return 4
    if v <= 0.1 + tol and dplus <= 0.1 + tol:
        return 3
    return 2 if v <= 0.5 + tol else 1


def reference_aggregate(ds, algo_index: int, setting: str, boot: int, rng_seed: int, ci: float = 0.95):
    """The aggregate table's value, CI and tier stability for one (algorithm, setting) by plain loops:
    per-run metrics from the raw episodes (statsdata.ref_run), then per replicate: in every condition
    with runs (task-major order), draw k seeds with replacement (seed floor(u * k) of its runs in seed
    order, u from the documented generator, one (boot, P, Kmax) block), seed means, IQM over conditions
    (scipy's trim_mean), and the tier of the replicate's IQMs."""
    metrics = stats.METRICS
    _, n_tasks, n_bounds, n_seeds = (ds.sizes[d] for d in ("algo", "task", "bound", "seed"))
    strata = []  # per condition with runs: array (k, F) of its runs' metrics
    for t in range(n_tasks):
        for b in range(n_bounds):
            runs = [ref_run(ds, algo_index, t, b, k, setting) for k in range(n_seeds)]
            vals = np.array([[r[m] for m in metrics] for r in runs])
            vals = vals[~np.isnan(vals).any(1)]
            if len(vals):
                strata.append(vals)
    value = scipy.stats.trim_mean([x.mean(0) for x in strata], 0.25, axis=0)
    kmax = max(len(x) for x in strata)
    algo = str(ds["algo"].values[algo_index])
    u = stats.bootstrap_rng(rng_seed, algo, setting).random((boot, len(strata), kmax))
    reps = np.empty((boot, len(metrics)))
    for r in range(boot):
        means = [x[(u[r, p, : len(x)] * len(x)).astype(int)].mean(0) for p, x in enumerate(strata)]
        reps[r] = scipy.stats.trim_mean(means, 0.25, axis=0)
    lo, hi = np.quantile(reps, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
    i = [metrics.index(m) for m in ("Dnorm", "V", "Dplus")]
    point = plain_tier(*value[i])
    rep_tiers = np.array([plain_tier(*rep[i]) for rep in reps])
    return value, lo, hi, point, rep_tiers


def test_aggregate_ci_equals_an_independent_per_replicate_loop():
    ds = random_cube(np.random.default_rng(21), shape=(2, 2, 3, 4, 2, 6), bounds=(10.0, 15.0, 25.0), ragged=True)
    for v in ("cost", "reward"):  # runs without greedy episodes: condition (0, 0) keeps 2 seeds, (1, 2) none
        ds[v].values[0, 0, 0, 1:3, :, :, 2] = np.nan
        ds[v].values[0, 1, 2, :, :, :, 2] = np.nan
    agg = stats.aggregate_table(stats.load_suffstats(ds), boot=300, rng_seed=11, ci=0.9)
    for ai, a in enumerate(("alg0", "alg1")):
        for s in stats.SETTINGS:
            value, lo, hi, point, _ = reference_aggregate(ds, ai, s, 300, 11, ci=0.9)
            got = agg.sel(algo=a, setting=s)
            np.testing.assert_allclose(got["value"], value, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(got["ci_low"], lo, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(got["ci_high"], hi, rtol=1e-9, atol=1e-12)
            assert int(got["tier"]) == point
    assert int(agg["n_conditions"].sel(algo="alg0", setting="final_greedy")) == 5


def threshold_cube() -> object:
    """4 conditions x 5 seeds, one train iterate of 10 episodes (cost 11 = violation of d = 10, else 1):
    the IQM of V lies just above 0.5, so replicates fall on both sides of the V <= 0.5 threshold."""
    k_viol = np.array([[3, 4, 6, 7, 8], [2, 5, 6, 6, 9], [4, 4, 5, 7, 8], [1, 5, 6, 7, 7]])
    cost = np.where(np.arange(10)[None, None, :] < k_viol[..., None], 11.0, 1.0)  # (P, S, E)
    cost = cost.reshape(1, 4, 1, 5, 1, 10, 1)
    return cube_ds(np.ones_like(cost), cost, ["a"], ["t0", "t1", "t2", "t3"], [10.0])


def test_tier_stability_is_the_share_of_replicates_in_exactly_the_point_tier():
    ds = threshold_cube()
    agg = stats.aggregate_table(stats.load_suffstats(ds), ["train"], boot=400, rng_seed=3)
    _, _, _, point, rep_tiers = reference_aggregate(ds, 0, "train", 400, 3)
    assert int(agg["tier"].item()) == point == 1
    assert np.any(rep_tiers > point) and np.any(rep_tiers == point)  # the data straddle the threshold
    assert float(agg["tier_stability"].item()) == np.mean(rep_tiers == point)
    ss = stats.load_suffstats(random_cube(np.random.default_rng(4), shape=(3, 2, 2, 5, 3, 6)))
    st_ = stats.aggregate_table(ss, boot=400)["tier_stability"].values
    assert np.all((st_ >= 0) & (st_ <= 1))
    assert np.all(np.isclose(st_ * 400, np.round(st_ * 400)))  # a count of replicates out of B


def test_batching_replicates_does_not_change_the_result(ss, monkeypatch):
    whole = stats.aggregate_table(ss, boot=300, rng_seed=4)
    cdf_whole = stats.cdf_curves(ss, ["train"], boot=300, rng_seed=4)
    monkeypatch.setattr(bootstrap, "BATCH", 7)
    np.testing.assert_array_equal(stats.aggregate_table(ss, boot=300, rng_seed=4)["ci_high"], whole["ci_high"])
    np.testing.assert_allclose(stats.cdf_curves(ss, ["train"], boot=300, rng_seed=4)["ci_low"], cdf_whole["ci_low"],
                               rtol=1e-12, atol=1e-15)
