"""The paper's metrics, tiers, IQM and CDF against hand-computed values and a plain-loop reference."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

try:  # tests/ on sys.path (rootdir conftest) or the repo root (tests as a package)
    from statsdata import cube_ds, random_cube, ref_run
except ImportError:
    from tests.statsdata import cube_ds, random_cube, ref_run

from cube import CubeError, stats
from cube.selection import Selection
from cube.suffstats import _block_stats, default_kappa

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
    # d = 15; costs 10, 20, 30 (+ a padded slot): C = 20, V = 2/3, Dnorm = 1/3, Dplus = (5 + 15) / (2 * 15)
    ds = one_run_ds([[10.0, 20.0, 30.0]], train_rewards=[[1.0, 2.0, 6.0]])
    got = rm_values(ds, "train")
    assert got == pytest.approx({"R": 3.0, "C": 20.0, "Dnorm": 1 / 3, "V": 2 / 3, "Dplus": 2 / 3})


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
        (0.0, 0.9, 5.0, 1),  # Dnorm <= 0 is enough for tier 1
        (-0.2, 0.5, 5.0, 2),  # V <= 0.5 inclusive
        (-0.2, 0.5000001, 0.0, 1),
        (-0.2, 0.1, 0.1, 3),  # both thresholds inclusive
        (-0.2, 0.1, 0.1000001, 2),
        (-0.2, 0.0, 0.0, 4),
        (-0.2, 1e-12, 0.0, 3),  # strict means exactly zero
        (np.nan, 0.0, 0.0, -1),
    ],
)
def test_tier_thresholds(dnorm, v, dplus, expected):
    assert int(stats.tier(dnorm, v, dplus)) == expected


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
    out = _block_stats(r, c, d, kappa)
    assert out.shape == (2, 3, 6 + kappa.size)
    for i, m in np.ndindex(2, 3):
        cc = c[i, :, m][~np.isnan(c[i, :, m])]
        dd = d[i, 0, 0]
        want = [cc.size, np.nansum(r[i, :, m]), cc.size, cc.sum(), (cc > dd).sum(), np.clip(cc - dd, 0, None).sum()]
        np.testing.assert_allclose(out[i, m, :6], want, rtol=1e-12)
        np.testing.assert_array_equal(out[i, m, 6:], [((cc - dd) / dd <= k).sum() for k in kappa])


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
    agg = stats.aggregate_table(ss, boot=10)
    assert list(agg["setting"].values) == ["train"]
    ct = stats.condition_table(ss, ["final_greedy"])  # named explicitly: NaN rows, tier -1
    assert ct["C_mean"].isnull().all() and (ct["tier"] == -1).all() and (ct["n_seeds"] == 0).all()
    with pytest.raises(CubeError, match="no 'greedy' episodes in the selection for setting 'final_greedy'"):
        stats.require_data(ss, ["train", "final_greedy"])
    foreign = cube_ds(np.ones((1, 1, 1, 1, 2, 2, 1)), np.ones((1, 1, 1, 1, 2, 2, 1)), ["a"], ["t"], [5.0])
    assert stats.available_settings(stats.load_suffstats(foreign)) == ("train",)
