"""The paper's metrics, tiers, IQM and CDF against hand-computed values and a plain-loop reference."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

try:  # tests/ on sys.path (rootdir conftest) or the repo root (tests as a package)
    from statsdata import cube_ds, random_cube, ref_cvar, ref_run
except ImportError:
    from tests.statsdata import cube_ds, random_cube, ref_cvar, ref_run

from cube import CubeError, stats
from cube.selection import Selection
from cube.stats.kernel import block_stats, default_kappa

METRICS = stats.METRICS


def one_run_ds(train_costs, d=15.0, train_rewards=None, expl=None, greedy=None, n_slots=6):
    """One run (1 algo/task/bound/seed); train_costs: list per iterate of episode costs."""
    j = len(train_costs)
    cost = np.full((1, 1, 1, 1, j, n_slots, 3), np.nan)
    reward = np.full_like(cost, np.nan)
    for it, cs in enumerate(train_costs):
        cost[0, 0, 0, 0, it, : len(cs), 0] = cs
        rs = train_rewards[it] if train_rewards else np.ones(len(cs))
        reward[0, 0, 0, 0, it, : len(cs), 0] = rs
    for m, evals in ((1, expl), (2, greedy)):
        for it, cs in (evals or {}).items():
            cost[0, 0, 0, 0, it, : len(cs), m] = cs
            reward[0, 0, 0, 0, it, : len(cs), m] = 2.0
    return cube_ds(reward, cost, ["a"], ["t"], [d])


def rm_values(ds, setting):
    rm = stats.run_metrics(stats.load_suffstats(ds), setting)
    return {m: float(rm[m].values.ravel()[0]) for m in METRICS}


def test_fixed_policy_metrics_by_hand():
    # d = 15; costs 10, 20, 30 (+ a padded slot): C = 20, V = 2/3, Dnorm = 1/3, Dplus = (5 + 15) / (2 * 15);
    # CVaR_0.1: alpha N = 0.3 < 1, so the worst episode alone: (30 - 15) / 15 = 1
    ds = one_run_ds([[10.0, 20.0, 30.0]], train_rewards=[[1.0, 2.0, 6.0]])
    got = rm_values(ds, "train")
    assert got == pytest.approx({"R": 3.0, "C": 20.0, "Dnorm": 1 / 3, "V": 2 / 3, "Dplus": 2 / 3, "CVaR": 1.0})


def test_cost_equal_to_bound_is_not_a_violation_and_dplus_is_zero_without_violations():
    got = rm_values(one_run_ds([[15.0, 5.0]]), "train")
    assert got["V"] == 0.0 and got["Dplus"] == 0.0  # Dplus = 0 (not NaN) when N+ = 0
    assert got["Dnorm"] == pytest.approx((10.0 - 15.0) / 15.0)


def test_train_setting_averages_per_iterate_metrics_not_pooled_episodes():
    # iterate 0: one episode of cost 30 (V=1); iterate 1: three of cost 0 (V=0); iterate 2: no episodes.
    ds = one_run_ds([[30.0], [0.0, 0.0, 0.0], []])
    got = rm_values(ds, "train")
    assert got["V"] == pytest.approx(0.5)  # pooled would give 0.25
    assert got["C"] == pytest.approx(15.0)
    assert got["Dplus"] == pytest.approx((1.0 + 0.0) / 2)  # mean of per-iterate Dplus (1 and 0)


def test_final_settings_use_last_iterate_with_episodes_of_that_mode():
    ds = one_run_ds([[1.0], [1.0], [1.0]], expl={0: [100.0], 1: [30.0, 0.0]}, greedy={2: [16.0]})
    expl, greedy = rm_values(ds, "final_expl"), rm_values(ds, "final_greedy")
    assert expl["C"] == pytest.approx(15.0) and expl["V"] == pytest.approx(0.5)
    assert greedy["C"] == pytest.approx(16.0) and greedy["Dplus"] == pytest.approx(1 / 15)


def test_run_without_final_episodes_is_left_out_of_the_condition():
    cost = np.full((1, 1, 1, 3, 2, 2, 3), np.nan)
    cost[..., 0] = 1.0
    cost[0, 0, 0, 0, 1, :, 2] = [10.0, 20.0]  # seed 0 has a greedy evaluation
    cost[0, 0, 0, 2, 1, :, 2] = [30.0, 30.0]  # seed 2 too; seed 1 does not
    ds = cube_ds(np.where(np.isnan(cost), np.nan, 1.0), cost, ["a"], ["t"], [15.0])
    ct = stats.condition_table(stats.load_suffstats(ds), ["final_greedy"])
    row = ct.sel(algo="a", task="t", bound=15.0, setting="final_greedy")
    assert int(row["n_seeds"]) == 2
    assert float(row["C_mean"]) == pytest.approx(22.5)
    assert float(row["C_std"]) == pytest.approx(np.std([15.0, 30.0], ddof=1))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ragged=st.booleans())
def test_run_metrics_match_plain_loop_reference(seed, ragged):
    ds = random_cube(np.random.default_rng(seed), shape=(1, 2, 2, 2, 3, 5), ragged=ragged)
    ss = stats.load_suffstats(ds)
    for setting in stats.SETTINGS:
        rm = stats.run_metrics(ss, setting)
        for idx in np.ndindex(1, 2, 2, 2):
            ref = ref_run(ds, *idx, setting)
            got = {m: float(rm[m].values[idx]) for m in METRICS}
            assert got == pytest.approx(ref, rel=1e-9, abs=1e-12, nan_ok=True)


def test_iterate_metrics_fixed_policy_and_iterate_windows():
    ds = one_run_ds([[30.0], [0.0, 0.0], [16.0, 14.0]])
    ss = stats.load_suffstats(ds)
    im = stats.iterate_metrics(ss)
    assert im["V"].dims == ("algo", "task", "bound", "seed", "iterate")
    assert im["V"].values.ravel().tolist() == [1.0, 0.0, 0.5]
    assert im["n"].values.ravel().tolist() == [1, 2, 2]
    assert float(stats.run_metrics(ss, "train", iterates=2)["C"].item()) == pytest.approx(15.0)
    assert float(stats.run_metrics(ss, "train", iterates=(1, 2))["V"].item()) == pytest.approx(0.25)
    sel = stats.select(ss, Selection(iterates=(0, 1)))
    assert float(stats.run_metrics(sel, "train")["V"].item()) == pytest.approx(0.5)


# ------------------------------------------------------------------------------------- IQM, tiers
@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 40)),
                  elements=st.floats(-1e6, 1e6, allow_nan=False)))
def test_iqm_equals_scipy_trim_mean(x):
    np.testing.assert_allclose(stats.iqm(x, axis=1), scipy.stats.trim_mean(x, 0.25, axis=1), rtol=1e-12, atol=1e-6)


def test_iqm_by_hand():
    # 8 values: drop the 2 lowest and 2 highest, mean of the middle 4.
    assert stats.iqm(np.array([100.0, 1, 2, 3, 4, 5, 6, -100])) == pytest.approx(3.5)


@pytest.mark.parametrize(
    ("dnorm", "v", "dplus", "expected"),
    [
        (0.06, 0.0, 0.0, 0),  # FOCOPS in the paper: Dnorm just above 0 -> tier 0 whatever V is
        (0.0, 0.9, 5.0, 1),  # D = 0: Dnorm <= 0 is enough for tier 1
        (1e-6, 0.9, 5.0, 0),  # just beyond D = 0
        (-0.2, 0.5, 5.0, 2),  # V <= 0.5 inclusive
        (-0.2, 0.5 + 1e-6, 0.0, 1),
        (-0.2, 0.1, 0.1, 3),  # both thresholds inclusive
        (-0.2, 0.1 + 1e-6, 0.0, 2),
        (-0.2, 0.1, 0.1 + 1e-6, 2),
        (-0.2, 0.0, 0.0, 4),  # V = 0 and D+ = 0 exactly
        (-0.2, 1e-6, 0.0, 3),  # one violation in a million episodes is not V = 0
        (-0.2, 0.0, 1e-6, 3),
        (np.nan, 0.0, 0.0, -1),
    ],
)
def test_tier_thresholds(dnorm, v, dplus, expected):
    assert int(stats.tier(dnorm, v, dplus)) == expected


def test_float_noise_of_averaging_does_not_move_a_tier():
    v = np.mean([0.1, 0.1, 0.1])
    assert v > 0.1  # 0.10000000000000002 in float64
    assert int(stats.tier(0.0, v, np.mean([0.1, 0.1, 0.1]))) == 3
    assert int(stats.tier(np.mean([0.3, 0.3, 0.3]) - 0.9, np.mean([0.5] * 7), 1.0)) == 2
    assert int(stats.tier(-0.1, np.mean([1e-17, -1e-17]), 0.0)) == 4


def test_real_float_noise_at_every_threshold_keeps_the_tier():
    """Values that are mathematically on a threshold but carry genuine rounding noise (not exactly
    representable inputs): every threshold, the equalities of tier 4 included, has the TIER_TOL slack."""
    dnorm_noise = (np.mean([0.1, 0.1, 0.1]) - 0.1) / 0.1  # mathematically 0
    assert dnorm_noise > 0
    assert int(stats.tier(dnorm_noise, 0.9, 5.0)) == 1  # Dnorm <= 0 up to noise
    v_half = np.mean([0.2, 0.4, 0.6, 0.6, 0.6, 0.6])  # mathematically 1/2
    assert v_half > 0.5
    assert int(stats.tier(-0.2, v_half, 5.0)) == 2  # V <= 0.5 up to noise
    for zero in (0.1 + 0.2 - 0.3, 0.3 - 0.1 - 0.2):  # mathematically 0, +5.6e-17 and -2.8e-17
        assert zero != 0
        assert int(stats.tier(-0.2, zero, 0.0)) == 4  # V = 0 up to noise
        assert int(stats.tier(-0.2, 0.0, zero)) == 4  # Dplus = 0 up to noise
    assert int(stats.tier(-0.2, 2 * stats.TIER_TOL, 0.0)) == 3  # beyond the slack it is not V = 0


def one_episode_set_cube(costs_per_seed, d=10.0):
    """One condition (algo a, task t, bound d), one train iterate; seed k's episodes have costs_per_seed[k]."""
    e = max(len(c) for c in costs_per_seed)
    cost = np.full((1, 1, 1, len(costs_per_seed), 1, e, 1), np.nan)
    for k, cs in enumerate(costs_per_seed):
        cost[0, 0, 0, k, 0, : len(cs), 0] = cs
    return cube_ds(np.where(np.isnan(cost), np.nan, 1.0), cost, ["a"], ["t"], [d])


def test_seed_mean_noise_at_dnorm_zero_and_v_half_keeps_the_tier_end_to_end():
    # Dnorm: runs with C = 5.2, 9.8, 15 at d = 10 have Dnorm -0.48, -0.02, 0.5; their mean is 3.7e-17, not 0.
    ds = one_episode_set_cube([[6, 6] + [5] * 8, [10] * 8 + [9, 9], [15] * 10])
    ss = stats.load_suffstats(ds)
    ct = stats.condition_table(ss, ["train"])
    assert 0 < float(ct["Dnorm_mean"].item()) < 1e-15
    assert int(ct["tier"].item()) == 2  # Dnorm <= 0 (noise), V = 1/3 <= 0.5
    agg = stats.aggregate_table(ss, ["train"], boot=20)
    assert float(agg["value"].sel(metric="Dnorm").item()) > 0 and int(agg["tier"].item()) == 2
    # V: six seeds with 2, 4, 6, 6, 6, 6 violations of 10 episodes: the seed mean of V is 0.5000000000000001.
    ds = one_episode_set_cube([[11] * k + [1] * (10 - k) for k in (2, 4, 6, 6, 6, 6)])
    ss = stats.load_suffstats(ds)
    ct = stats.condition_table(ss, ["train"])
    assert float(ct["V_mean"].item()) > 0.5
    assert int(ct["tier"].item()) == 2
    assert int(stats.aggregate_table(ss, ["train"], boot=20)["tier"].item()) == 2


def test_tiers_from_three_seeds_at_the_v_threshold_end_to_end():
    # 3 seeds, each with V = 1/10 and D+ = 0.1 exactly at d = 10 (one episode of cost 11 among 10).
    cost = np.full((1, 1, 1, 3, 1, 10, 1), 5.0)
    cost[..., 0, :] = 11.0
    ds = cube_ds(np.ones_like(cost), cost, ["a"], ["t"], [10.0])
    ss = stats.load_suffstats(ds)
    ct = stats.condition_table(ss, ["train"])
    assert int(ct["tier"].item()) == 3
    assert int(stats.aggregate_table(ss, ["train"], boot=20)["tier"].item()) == 3


# ------------------------------------------------------------------------------- aggregate and CDF
def test_aggregate_point_estimate_is_iqm_of_seed_means_over_conditions():
    ds = random_cube(np.random.default_rng(3), shape=(2, 2, 2, 3, 3, 5), ragged=True)
    ss = stats.load_suffstats(ds)
    agg = stats.aggregate_table(ss, ["train", "final_greedy"], boot=50)
    assert agg["value"].dims == ("algo", "setting", "metric")
    for ai, a in enumerate(ds["algo"].values):
        for s in ("train", "final_greedy"):
            seed_means = {m: [] for m in METRICS}
            for t in range(2):
                for b in range(2):
                    runs = [ref_run(ds, ai, t, b, k, s) for k in range(3)]
                    for m in METRICS:
                        seed_means[m].append(np.nanmean([r[m] for r in runs]))
            for m in METRICS:
                want = scipy.stats.trim_mean(seed_means[m], 0.25)
                assert float(agg["value"].sel(algo=a, setting=s, metric=m)) == pytest.approx(want, rel=1e-9)
            v = {m: scipy.stats.trim_mean(seed_means[m], 0.25) for m in ("Dnorm", "V", "Dplus")}
            assert int(agg["tier"].sel(algo=a, setting=s)) == int(stats.tier(v["Dnorm"], v["V"], v["Dplus"]))


def test_cdf_equals_pooled_ratio_of_eq6_when_balanced():
    rng = np.random.default_rng(11)
    ds = random_cube(rng, shape=(1, 2, 2, 3, 2, 8), ragged=False, final_only=False)
    ss = stats.load_suffstats(ds)
    cdf = stats.cdf_curves(ss, boot=20)
    c = ds["cost"].values.astype(np.float64)[0]  # (T, B, S, J, E, M)
    d = ds["bound"].values[None, :, None, None, None]
    for s, m, iters in (("train", 0, slice(None)), ("final_expl", 1, slice(-1, None)),
                        ("final_greedy", 2, slice(-1, None))):
        x = ((c[..., m] - d) / d)[:, :, :, iters, :]
        for kappa in (-0.5, 0.0, 0.5, 1.0, 3.0):
            want = (x <= kappa).sum() / x.size  # |P| K N (x J for training) in the denominator
            got = float(cdf["cdf"].sel(algo="alg0", setting=s, kappa=kappa))
            assert got == pytest.approx(want, rel=1e-12)


def test_cdf_is_monotone_in_kappa_and_ci_brackets_it():
    ds = random_cube(np.random.default_rng(5), shape=(2, 2, 2, 4, 3, 6))
    cdf = stats.cdf_curves(stats.load_suffstats(ds), boot=200)
    assert np.all(np.diff(cdf["cdf"].values, axis=-1) >= 0)
    assert np.all(cdf["ci_low"].values <= cdf["cdf"].values + 1e-12)
    assert np.all(cdf["ci_high"].values >= cdf["cdf"].values - 1e-12)
    assert np.all((cdf["cdf"].values >= 0) & (cdf["cdf"].values <= 1))


def test_cdf_pools_episodes_with_ragged_counts_not_mean_of_fractions():
    # One condition, 2 seeds; d = 10 so kappa = 0 means cost <= 10.
    # seed 0: iterate 0 has 1 episode (cost 20: above), iterate 1 has 3 episodes (5, 5, 5: below)
    # seed 1: iterate 0 has 4 episodes (5, 5, 5, 20), iterate 1 has 0 episodes
    cost = np.full((1, 1, 1, 2, 2, 4, 1), np.nan)
    cost[0, 0, 0, 0, 0, :1, 0] = [20.0]
    cost[0, 0, 0, 0, 1, :3, 0] = [5.0, 5.0, 5.0]
    cost[0, 0, 0, 1, 0, :, 0] = [5.0, 5.0, 5.0, 20.0]
    ds = cube_ds(np.where(np.isnan(cost), np.nan, 1.0), cost, ["a"], ["t"], [10.0])
    cdf = stats.cdf_curves(stats.load_suffstats(ds), ["train"], boot=50)
    got = float(cdf["cdf"].sel(algo="a", setting="train", kappa=0.0))
    assert got == pytest.approx(6 / 8)  # eq. 9: 6 of the 8 pooled episodes have (c - d)/d <= 0
    # the mean of per-iterate fractions would be mean(mean(0, 1), 3/4) = 0.625
    assert float(cdf["cdf"].sel(algo="a", setting="train", kappa=1.0)) == pytest.approx(1.0)
    assert float(cdf["cdf"].sel(algo="a", setting="train", kappa=-0.6)) == 0.0


def test_cdf_matches_plain_numpy_pooled_ratio_on_ragged_random_cubes():
    ds = random_cube(np.random.default_rng(21), shape=(2, 2, 2, 3, 3, 7), ragged=True)
    ss = stats.load_suffstats(ds)
    cdf = stats.cdf_curves(ss, boot=10)
    c = ds["cost"].values.astype(np.float64)
    d = ds["bound"].values[None, :, None, None, None]
    for a in range(2):
        for s, m in (("train", 0), ("final_expl", 1), ("final_greedy", 2)):
            x = (c[a, ..., m] - d) / d  # (T, B, S, J, E); expl/greedy only at the last iterate
            for kappa in (-0.5, 0.0, 0.5, 2.0):
                want = np.sum(x <= kappa) / np.sum(~np.isnan(x))
                got = float(cdf["cdf"].sel(algo=f"alg{a}", setting=s, kappa=kappa))
                assert got == pytest.approx(want, rel=1e-12)


def test_block_stats_match_direct_counts():
    rng = np.random.default_rng(0)
    c = rng.gamma(2.0, 10.0, (2, 7, 3))  # (bound, episode, mode): the store's layout
    c[0, 3:, 1] = np.nan
    c[1, :, 2] = np.nan
    c[1, 0, 0] = 25.0  # exactly at the bound
    r = rng.normal(size=c.shape)
    r[np.isnan(c)] = np.nan
    d = np.array([15.0, 25.0]).reshape(2, 1, 1)
    kappa = default_kappa()
    out = block_stats(r, c, d, kappa)
    g = kappa.size
    assert out.shape == (2, 3, 6 + g + len(stats.CVAR_ALPHAS))
    for i, m in np.ndindex(2, 3):
        cc = c[i, :, m][~np.isnan(c[i, :, m])]
        dd = d[i, 0, 0]
        want = [cc.size, np.nansum(r[i, :, m]), cc.size, cc.sum(), (cc > dd).sum(), np.clip(cc - dd, 0, None).sum()]
        np.testing.assert_allclose(out[i, m, :6], want, rtol=1e-12)
        np.testing.assert_array_equal(out[i, m, 6:6 + g], [((cc - dd) / dd <= k).sum() for k in kappa])
        cvar = [ref_cvar(c[i, :, m], a) if cc.size else 0.0 for a in stats.CVAR_ALPHAS]
        np.testing.assert_allclose(out[i, m, 6 + g:], cvar, rtol=1e-12)


def test_bad_settings_and_bootstrap_arguments_are_cube_errors():
    ss = stats.load_suffstats(one_run_ds([[1.0]]))
    with pytest.raises(CubeError, match="unknown setting"):
        stats.aggregate_table(ss, ["final"])
    with pytest.raises(CubeError, match="replicates"):
        stats.aggregate_table(ss, ["train"], boot=0)
    with pytest.raises(CubeError, match="confidence"):
        stats.cdf_curves(ss, ["train"], ci=1.5)


def test_default_settings_are_those_with_episodes():
    train_only = one_run_ds([[1.0], [20.0]])
    ss = stats.load_suffstats(train_only)
    assert stats.available_settings(ss) == ("train",)
    with pytest.warns(stats.StatsWarning, match="fewer than 2 seeds"):
        agg = stats.aggregate_table(ss, boot=10)
    assert list(agg["setting"].values) == ["train"]
    ct = stats.condition_table(ss, ["final_greedy"])  # named explicitly: NaN rows, tier -1
    assert ct["C_mean"].isnull().all() and (ct["tier"] == -1).all() and (ct["n_seeds"] == 0).all()
    with pytest.raises(CubeError, match="no 'greedy' episodes in the selection for setting 'final_greedy'"):
        stats.require_data(ss, ["train", "final_greedy"])
    foreign = cube_ds(np.ones((1, 1, 1, 1, 2, 2, 1)), np.ones((1, 1, 1, 1, 2, 2, 1)), ["a"], ["t"], [5.0])
    assert stats.available_settings(stats.load_suffstats(foreign)) == ("train",)


# ------------------------------------------------------------------ probability of improvement, gap
def per_run_cube(r: np.ndarray, c: np.ndarray, d: float = 10.0):
    """Cube whose runs have one train episode: per-run R = r, C = c; r, c shaped (A, T, S)."""
    a, t, s = r.shape
    shape = (a, t, 1, s, 1, 1, 1)
    return cube_ds(r.reshape(shape), c.reshape(shape), [f"alg{i}" for i in range(a)],
                   [f"task{i}" for i in range(t)], [d])


def test_probability_of_improvement_by_hand():
    # condition 0: R of x = (1, 2, 3), y = (2, 2, 0): U = 1 + (0.5 + 0.5 + 1) + 3 = 6 -> 6/9
    # condition 1: R of x = (5, 5, 5), y = (5, 5, 5): all ties -> 1/2.  Mean: (2/3 + 1/2) / 2 = 7/12
    r = np.array([[[1, 2, 3], [5, 5, 5]], [[2, 2, 0], [5, 5, 5]]], dtype=float)
    # costs: x = (10, 20, 30) vs y = (15, 15, 15), lower is better: 10 beats all 3 -> U = 3 -> 1/3; cond 1 ties.
    c = np.array([[[10, 20, 30], [4, 4, 4]], [[15, 15, 15], [4, 4, 4]]], dtype=float)
    ss = stats.load_suffstats(per_run_cube(r, c))
    poi = stats.probability_of_improvement(ss, "alg0", "alg1", "train", boot=200)
    assert poi["value"].dims == ("setting", "metric")
    assert float(poi["value"].sel(setting="train", metric="R")) == pytest.approx(7 / 12)
    assert float(poi["value"].sel(setting="train", metric="C")) == pytest.approx((1 / 3 + 0.5) / 2)
    back = stats.probability_of_improvement(ss, "alg1", "alg0", "train", boot=200)
    np.testing.assert_allclose(poi["value"] + back["value"], 1.0)  # P(x > y) + P(y > x) = 1 with ties halved
    same = stats.probability_of_improvement(ss, "alg0", "alg0", "train", metric="V", boot=10)
    assert float(same["value"].item()) == 0.5 and list(same["metric"].values) == ["V"]
    with pytest.raises(CubeError, match="unknown algo nope"):
        stats.probability_of_improvement(ss, "alg0", "nope")
    with pytest.raises(CubeError, match="unknown metric"):
        stats.probability_of_improvement(ss, "alg0", "alg1", metric="X")


def test_probability_of_improvement_equals_mannwhitneyu_averaged_over_conditions():
    ds = random_cube(np.random.default_rng(12), shape=(2, 2, 2, 4, 3, 5))
    ss = stats.load_suffstats(ds)
    poi = stats.probability_of_improvement(ss, "alg1", "alg0", boot=20)
    for s in stats.SETTINGS:
        runs = {(a, t, b): [ref_run(ds, a, t, b, k, s) for k in range(4)]
                for a in range(2) for t in range(2) for b in range(2)}
        for m in METRICS:
            per_cond = []
            for t in range(2):
                for b in range(2):
                    x = np.array([r[m] for r in runs[(1, t, b)]])
                    y = np.array([r[m] for r in runs[(0, t, b)]])
                    x, y = x[~np.isnan(x)], y[~np.isnan(y)]
                    u = (scipy.stats.mannwhitneyu(x, y).statistic if m == "R"
                         else scipy.stats.mannwhitneyu(y, x).statistic)  # lower cost is the improvement
                    per_cond.append(u / (x.size * y.size))
            got = float(poi["value"].sel(setting=s, metric=m))
            assert got == pytest.approx(np.mean(per_cond), rel=1e-12)


@pytest.mark.parametrize("ragged", [False, True])
def test_probability_of_improvement_ci_equals_a_per_replicate_loop(ragged):
    rng = np.random.default_rng(4)
    r, c = rng.normal(size=(2, 3, 4)).round(1), rng.gamma(2.0, 5.0, (2, 3, 4)).round(0)  # rounding: ties
    if ragged:  # y (alg1) lacks its last seed in condition 0, x (alg0) its first in condition 2
        r[1, 0, 3] = c[1, 0, 3] = np.nan
        r[0, 2, 0] = c[0, 2, 0] = np.nan
    ss = stats.load_suffstats(per_run_cube(r, c))
    poi = stats.probability_of_improvement(ss, "alg0", "alg1", "train", metric=("R", "C"), boot=200, rng_seed=7)
    gen = stats.bootstrap_rng(7, "alg0>alg1", "train")
    ux, uy = gen.random((200, 3, 4)), gen.random((200, 3, 4))  # x's draws, then y's (one batch)
    reps = np.empty((200, 2))
    for b in range(200):
        for f, (vals, lower) in enumerate(((r, False), (c, True))):
            us = []
            for p in range(3):
                xs, ys = vals[0, p][~np.isnan(vals[0, p])], vals[1, p][~np.isnan(vals[1, p])]  # seeds in order
                kx, ky = xs.size, ys.size
                x, y = xs[(ux[b, p, :kx] * kx).astype(int)], ys[(uy[b, p, :ky] * ky).astype(int)]
                sign = -1.0 if lower else 1.0
                us.append(np.mean((sign * x[:, None] > sign * y[None, :]) + 0.5 * (x[:, None] == y[None, :])))
            reps[b, f] = np.mean(us)
    lo, hi = np.quantile(reps, [0.025, 0.975], axis=0)
    np.testing.assert_allclose(poi["ci_low"].sel(setting="train"), lo, rtol=1e-12)
    np.testing.assert_allclose(poi["ci_high"].sel(setting="train"), hi, rtol=1e-12)
    again = stats.probability_of_improvement(ss, "alg0", "alg1", "train", metric=("R", "C"), boot=200, rng_seed=7)
    np.testing.assert_array_equal(again["ci_low"], poi["ci_low"])


def test_greedy_expl_gap_matches_reference_and_pairs_seeds():
    ds = random_cube(np.random.default_rng(9), shape=(2, 2, 2, 3, 2, 5))
    ss = stats.load_suffstats(ds)
    gap = stats.greedy_expl_gap(ss, boot=100)
    assert gap["value"].dims == ("algo", "metric")
    for a in range(2):
        for m in METRICS:
            means = [np.mean([ref_run(ds, a, t, b, k, "final_greedy")[m] - ref_run(ds, a, t, b, k, "final_expl")[m]
                              for k in range(3)]) for t in range(2) for b in range(2)]
            assert float(gap["value"].sel(algo=f"alg{a}", metric=m)) == pytest.approx(
                scipy.stats.trim_mean(means, 0.25), rel=1e-9, abs=1e-12)
    # greedy = expl + 1 in every run: the seeds' expl values differ, their pairs' differences do not.
    cost = ds["cost"].values.copy()
    cost[..., 2] = cost[..., 1] + 1.0
    ds["cost"].values[:] = cost
    ds["reward"].values[..., 2] = ds["reward"].values[..., 1]
    gap = stats.greedy_expl_gap(stats.load_suffstats(ds), boot=100)
    for part in ("value", "ci_low", "ci_high"):
        assert float(gap[part].sel(algo="alg0", metric="C")) == pytest.approx(1.0, rel=1e-9)
        assert float(gap[part].sel(algo="alg0", metric="R")) == pytest.approx(0.0, abs=1e-9)


def test_gap_without_final_evaluations_names_the_runs():
    ss = stats.load_suffstats(one_run_ds([[1.0]]))
    with pytest.raises(CubeError, match="no selected run has them \\(a/t/d=15/seed=0\\)"):
        stats.greedy_expl_gap(ss)


def test_accessor_returns_the_same_objects_as_the_functions():
    ds = random_cube(np.random.default_rng(1), shape=(2, 2, 2, 3, 2, 4))
    ss = stats.load_suffstats(ds)
    xr_agg = ds.saferl.aggregate(["train"], boot=30)
    np.testing.assert_array_equal(xr_agg["ci_low"], stats.aggregate_table(ss, ["train"], boot=30)["ci_low"])
    assert ds.saferl.suffstats is ds.saferl.suffstats  # computed once
    assert ss.saferl.suffstats is ss
    np.testing.assert_array_equal(ss.saferl.poi("alg0", "alg1", "train", boot=10)["value"],
                                  stats.probability_of_improvement(ss, "alg0", "alg1", "train", boot=10)["value"])
    assert ss.saferl.gap(boot=10)["value"].dims == ("algo", "metric")
    assert ss.saferl.cdf(["train"], boot=10)["cdf"].dims == ("algo", "setting", "kappa")
    assert ss.saferl.conditions(["train"])["tier"].dims == ("algo", "task", "bound", "setting")


# ----------------------------------------------------------------------------- fewer than 2 seeds
def test_one_seed_conditions_give_nan_std_and_ci_with_a_warning():
    ds = random_cube(np.random.default_rng(2), shape=(1, 2, 1, 1, 2, 4))
    ss = stats.load_suffstats(ds)
    with pytest.warns(stats.StatsWarning, match="only 1 seed: std reported as NaN"):
        ct = stats.condition_table(ss, ["train"])
    assert ct["C_std"].isnull().all() and ct["C_mean"].notnull().all()
    with pytest.warns(stats.StatsWarning, match="fewer than 2 seeds, CI reported as NaN"):
        agg = stats.aggregate_table(ss, ["train"], boot=20)
    assert agg["ci_low"].isnull().all() and agg["value"].notnull().all()
    with pytest.warns(stats.StatsWarning):
        cdf = stats.cdf_curves(ss, ["train"], boot=20)
    assert cdf["ci_low"].isnull().all() and cdf["cdf"].notnull().all()


# ------------------------------------------------------------------------ property tests, dask = numpy
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), scale=st.floats(0.1, 100.0))
def test_properties_v_in_unit_interval_dplus_nonnegative(seed, scale):
    rng = np.random.default_rng(seed)
    ds = random_cube(rng, shape=(1, 2, 2, 3, 2, 5))
    ds["cost"].values[:] = ds["cost"].values * np.float32(scale / 10.0)
    ss = stats.load_suffstats(ds)
    for s in stats.SETTINGS:
        rm = stats.run_metrics(ss, s)
        v, dp = rm["V"].values, rm["Dplus"].values
        assert np.all((v[~np.isnan(v)] >= 0) & (v[~np.isnan(v)] <= 1)) and np.all(dp[~np.isnan(dp)] >= 0)
    im = stats.iterate_metrics(ss)
    assert float(im["V"].min()) >= 0 and float(im["V"].max()) <= 1 and float(im["Dplus"].min()) >= 0
    agg = stats.aggregate_table(ss, boot=50)
    for part in ("value", "ci_low", "ci_high"):
        v, dp = agg[part].sel(metric="V").values, agg[part].sel(metric="Dplus").values
        assert np.all((v >= 0) & (v <= 1)) and np.all(dp >= 0)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_property_ci_contains_the_point_estimate(seed):
    # Ordinary case: continuous costs, 5 seeds in each of 4 conditions.
    ds = random_cube(np.random.default_rng(seed), shape=(1, 2, 2, 5, 2, 8), ragged=False)
    ss = stats.load_suffstats(ds)
    agg = stats.aggregate_table(ss, boot=400, rng_seed=seed % 1000)
    assert np.all(agg["ci_low"] <= agg["value"] + 1e-12) and np.all(agg["value"] <= agg["ci_high"] + 1e-12)
    gap = stats.greedy_expl_gap(ss, boot=400)
    assert np.all(gap["ci_low"] <= gap["value"] + 1e-12) and np.all(gap["value"] <= gap["ci_high"] + 1e-12)


def plain_suffstats(ds, kappa) -> dict[str, np.ndarray]:
    """The definitions of cube.stats.suffstats written out cell by cell over the raw episodes (float64):
    NaN slots are not episodes, a violation is c > d (strict), le[g] = #{(c - d)/d <= kappa[g]}."""
    r_all = ds["reward"].values.astype(np.float64)
    c_all = ds["cost"].values.astype(np.float64)
    cells = c_all.shape[:5] + c_all.shape[6:]  # (A, T, B, S, J, M)
    out = {v: np.zeros(cells) for v in ("n_r", "sum_r", "n", "sum_c", "n_viol", "sum_over")}
    out["le"] = np.zeros((*cells, kappa.size))
    for a, t, b, s, j, m in np.ndindex(*cells):
        d = float(ds["bound"].values[b])
        r, c = r_all[a, t, b, s, j, :, m], c_all[a, t, b, s, j, :, m]
        r, c = r[~np.isnan(r)], c[~np.isnan(c)]
        cell = (a, t, b, s, j, m)
        out["n_r"][cell], out["sum_r"][cell] = r.size, sum(r.tolist())
        out["n"][cell], out["sum_c"][cell] = c.size, sum(c.tolist())
        out["n_viol"][cell] = sum(1 for x in c if x > d)
        out["sum_over"][cell] = sum(x - d for x in c if x > d)
        out["le"][cell] = [sum(1 for x in c if (x - d) / d <= k) for k in kappa]
    return out


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), chunk_seed=st.integers(1, 3), chunk_it=st.integers(1, 3))
def test_property_dask_pass_equals_plain_numpy(seed, chunk_seed, chunk_it):
    ds = random_cube(np.random.default_rng(seed), shape=(2, 1, 2, 3, 3, 5))
    lazy = ds.chunk({"seed": chunk_seed, "iterate": chunk_it, "episode": 2})
    a, b = stats.load_suffstats(ds), stats.load_suffstats(lazy)
    plain = plain_suffstats(ds, a["kappa"].values)  # the oracle: loops over the raw episodes, no project code
    assert plain["n"].sum() < ds["cost"].size  # the cube has NaN padding, and ...
    assert np.any(ds["cost"].values == ds["bound"].values[None, None, :, None, None, None, None])  # ... c = d
    for v in ("n_r", "sum_r", "n", "sum_c", "n_viol", "sum_over"):
        np.testing.assert_allclose(a[v].values, plain[v], rtol=1e-12, err_msg=v)
        np.testing.assert_allclose(b[v].values, plain[v], rtol=1e-12, err_msg=v)
    np.testing.assert_array_equal(a["le"].values, plain["le"])
    np.testing.assert_array_equal(b["le"].values, plain["le"])
    np.testing.assert_array_equal(stats.aggregate_table(a, boot=30)["ci_low"],
                                  stats.aggregate_table(b, boot=30)["ci_low"])


# ------------------------------------------------------------------- one registry, one definition
def test_facade_reexports_the_one_definition_of_each_name():
    """`cube.stats` is a facade: every public name is the object of the module that defines it."""
    from cube import schema
    from cube.stats import accessor, bootstrap, compare, curves, metrics, runs, subset, tables

    for name in stats.__all__:
        assert hasattr(stats, name), name
    for name, module in (("tier", metrics), ("iqm", metrics), ("TIER_TOL", metrics), ("METRICS", metrics),
                         ("SETTINGS", metrics), ("TIER_LABELS", metrics), ("HIGHER_IS_BETTER", metrics),
                         ("bootstrap_rng", bootstrap), ("StatsWarning", bootstrap),
                         ("stratified_bootstrap_weights", bootstrap), ("aggregate_table", tables),
                         ("some_labels", runs), ("run_metrics", runs), ("select", subset),
                         ("greedy_expl_gap", compare), ("SaferlAccessor", accessor)):
        assert getattr(stats, name) is getattr(module, name), name
    assert curves.final_iterate is schema.final_iterate  # one definition, in the core


def test_one_selection_engine_for_cubes_and_statistics():
    """`select_runs` picks runs of a cube and of its suffstats alike (bounds within tolerance, a label twice
    counted once, unknown labels one line); `select` is it plus the iterate window."""
    from cube.stats import subset

    ds = random_cube(np.random.default_rng(4))
    ss = stats.load_suffstats(ds)
    sel = Selection(algos=("alg1", "alg1"), bounds=(25.0 + 1e-12,), seeds=(0, 2))
    cube = subset.select_runs(ds, sel)
    picked = stats.select(ss, sel)
    for d, want in (("algo", ["alg1"]), ("bound", [25.0]), ("seed", [0, 2])):
        assert list(cube[d].values) == list(picked[d].values) == want
    assert subset.select_runs(ds.copy(), sel).identical(cube)
    with pytest.raises(CubeError, match="unknown task nope: the cube has task0, task1"):
        subset.select_runs(ds, Selection(tasks=("nope",)))


def test_directions_come_from_the_registry():
    from cube.stats import metrics

    assert stats.HIGHER_IS_BETTER == {m.name for m in metrics.METRIC_LIST if m.higher_is_better} == {"R"}
    assert metrics.directions() == "higher R̄, lower C̄/D_norm/V/D_norm+/CVaR"
    assert metrics.directions(names=stats.PAPER_METRICS) == "higher R̄, lower C̄/D_norm/V/D_norm+"
    assert stats.PAPER_METRICS == ("R", "C", "Dnorm", "V", "Dplus") and stats.METRICS == (*stats.PAPER_METRICS, "CVaR")
    assert metrics.best_label({"a": 1.0, "b": 3.0, "c": np.nan}, "R") == "b"
    assert metrics.best_label({"a": 1.0, "b": 3.0, "c": np.nan}, "C") == "a"
    assert metrics.best_label({"a": 1.0, "b": 3.0}, "C", exclude=("a",)) == "b"
    assert metrics.best_label({"a": np.nan}, "V") is None


def test_some_labels_is_public_and_shortens_long_lists():
    assert stats.some_labels(["a", "b"]) == "a, b"
    assert stats.some_labels([f"r{i}" for i in range(5)]) == "r0, r1, r2 and 2 more"
