"""Honest intervals of V (cube.stats.honest) and their coverage logic (cube.stats.coverage), against
hand-computed values and plain-numpy oracles."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from statsdata import cube_ds, random_cube

from cube import CubeError, stats
from cube.stats.bootstrap import percentile_ci, stratified_bootstrap_weights
from cube.stats.coverage import coverage_cell, coverage_grid, draw_rates
from cube.stats.honest import (
    ICC_FLOOR,
    clopper_pearson,
    cluster_interval,
    honest_bounds,
    honest_frame,
    honest_iqm_bounds,
    honest_tables,
    iqm_level,
    round_up,
    tier_at_bound,
    tier_claims,
)

Z = scipy.stats.norm.ppf(0.975)


def oracle_cluster(v: list[float], n: list[float], ci=0.95, floor=ICC_FLOOR) -> tuple[float, float]:
    """Korn-Graubard by hand, one condition, plain Python + scipy's beta quantiles."""
    k = len(v)
    p = sum(v) / k
    s2 = sum((x - p) ** 2 for x in v) / (k - 1)
    n_tot = sum(n)
    cap = n_tot / (1 + (n_tot / k - 1) * floor)
    design = p * (1 - p) / (s2 / k) if s2 > 0 else math.inf
    a = (1 - ci) / 2
    n_eff = min(design, cap) * (scipy.stats.norm.ppf(1 - a) / scipy.stats.t.ppf(1 - a, k - 1)) ** 2
    x = p * n_eff
    lo = 0.0 if x == 0 else scipy.stats.beta.ppf(a, x, n_eff - x + 1)
    hi = 1.0 if x >= n_eff else scipy.stats.beta.ppf(1 - a, x + 1, n_eff - x)
    return lo, hi


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_clopper_pearson_equals_scipys_exact_interval_on_integer_counts(xn):
    x, n = xn
    lo, hi = clopper_pearson(np.array([x]), np.array([n]))
    want = scipy.stats.binomtest(x, n).proportion_ci(0.95, method="exact")
    assert lo[0] == pytest.approx(want.low, abs=1e-10) and hi[0] == pytest.approx(want.high, abs=1e-10)


def test_zero_in_n_gives_the_exact_upper_bound_about_three_over_n():
    lo, hi = clopper_pearson(0.0, 1000.0)
    assert lo == 0 and hi == pytest.approx(1 - 0.025 ** (1 / 1000)) and 3.0 / 1000 < hi < 3.8 / 1000


def test_cluster_interval_by_hand_spread_seeds():
    lo, hi, n_eff = cluster_interval(np.array([0.1, 0.2, 0.3]), np.array([100.0, 100.0, 100.0]))
    # p = 0.2, s^2 = 0.01, design n = 0.16 * 3 / 0.01 = 48 < cap 300 / 5.95; t_2 shrink (1.96 / 4.303)^2
    assert n_eff == pytest.approx(48 * (Z / scipy.stats.t.ppf(0.975, 2)) ** 2)
    assert (lo, hi) == pytest.approx(oracle_cluster([0.1, 0.2, 0.3], [100] * 3), abs=1e-12)


def test_no_violation_is_bounded_by_the_icc_floor_not_by_the_pooled_episodes():
    v, n = np.zeros(5), np.full(5, 100.0)
    lo, hi, n_eff = cluster_interval(v, n)
    cap = 500 / (1 + 99 * ICC_FLOOR)
    assert n_eff == pytest.approx(cap * (Z / scipy.stats.t.ppf(0.975, 4)) ** 2)
    assert lo == 0 and hi == pytest.approx(1 - 0.025 ** (1 / n_eff))
    pooled = 1 - 0.025 ** (1 / 500)  # independent episodes would claim this: seeds cluster them
    assert hi > 5 * pooled
    assert hi == pytest.approx(oracle_cluster([0.0] * 5, [100] * 5)[1])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=2, max_size=8), st.integers(50, 3000), st.floats(0.0, 0.5))
def test_cluster_interval_matches_the_plain_oracle(counts, n, floor):
    v = [c / n for c in counts]
    lo, hi, _ = cluster_interval(np.array(v), np.full(len(v), float(n)), icc_floor=floor)
    want = oracle_cluster(v, [n] * len(v), floor=floor)
    assert (float(lo), float(hi)) == pytest.approx(want, abs=1e-9)
    assert 0 <= lo <= np.mean(v) <= hi <= 1


def test_missing_seeds_are_left_out_and_one_seed_has_no_interval():
    lo, hi, _ = cluster_interval(np.array([[0.1, np.nan, 0.3, 0.2], [0.5, np.nan, np.nan, np.nan]]),
                                 np.array([[100, 0, 100, 100], [100, 0, 0, 0]], dtype=float))
    assert (lo[0], hi[0]) == pytest.approx(oracle_cluster([0.1, 0.3, 0.2], [100] * 3))
    assert np.isnan(lo[1]) and np.isnan(hi[1])


def test_honest_bounds_hold_the_bootstrap_interval_and_the_cluster_one():
    rng = np.random.default_rng(1)
    v = rng.binomial(100, 0.2, (7, 6)) / 100
    w = stratified_bootstrap_weights(np.full(7, 6), 6, 400, rng)
    reps = (w * v).sum(-1) / 6
    lo, hi = honest_bounds(v, np.full(v.shape, 100.0), reps)
    b_lo, b_hi = percentile_ci(reps, 0.95)
    c_lo, c_hi, _ = cluster_interval(v, np.full(v.shape, 100.0))
    assert np.array_equal(lo, np.minimum(b_lo, c_lo)) and np.array_equal(hi, np.maximum(b_hi, c_hi))


def test_iqm_level_by_hand():
    assert iqm_level(1) == pytest.approx(0.95)
    assert iqm_level(12) == pytest.approx(2 * scipy.stats.norm.cdf(Z / math.sqrt(6)) - 1)  # the IQM keeps 6
    assert iqm_level(12) == pytest.approx(0.5763, abs=1e-4)


def test_honest_iqm_interval_by_hand():
    rng = np.random.default_rng(2)
    v = rng.binomial(50, np.linspace(0.0, 0.4, 8)[:, None], (8, 5)) / 50  # first condition never violates
    n = np.full(v.shape, 50.0)
    w = stratified_bootstrap_weights(np.full(8, 5), 5, 300, rng)
    reps = (w * v).sum(-1) / 5  # (300, 8)
    lo, hi = honest_iqm_bounds(v, n, reps)
    level = iqm_level(8)
    cond = [oracle_cluster(list(v[p]), [50] * 5, ci=level) for p in range(8)]
    b_lo, b_hi = percentile_ci(reps, level)
    c_lo = [min(c[0], b) for c, b in zip(cond, b_lo, strict=True)]
    c_hi = [max(c[1], b) for c, b in zip(cond, b_hi, strict=True)]
    iqm_reps = scipy.stats.trim_mean(reps, 0.25, axis=1)
    i_lo, i_hi = np.quantile(iqm_reps, [0.025, 0.975])
    assert lo == pytest.approx(min(i_lo, scipy.stats.trim_mean(c_lo, 0.25)), abs=1e-12)
    assert hi == pytest.approx(max(i_hi, scipy.stats.trim_mean(c_hi, 0.25)), abs=1e-12)
    assert lo <= i_lo and hi >= i_hi


def test_claim_text_and_rounding_up():
    assert tier_at_bound(-0.5, 0.0015, 0.0) == 3 and tier_at_bound(-0.5, 0.0, 0.0) == 4
    text = tier_claims(np.array([4, 3, -1]), np.array([3, 3, -1]), np.array([0.00141, 0.04, np.nan]))
    assert text[0] == "tier 4 observed; V ≤ 0.0015 at 95%: tier 3 at the bound"
    assert text[1] == "tier 3 observed; V ≤ 0.04 at 95%: tier 3 holds at the bound" and text[2] == ""
    assert round_up(0.0015) == 0.0015 and round_up(0.00150001) == 0.0016 and round_up(0.999) == 1.0


@settings(max_examples=60, deadline=None)
@given(st.floats(1e-9, 1.0))
def test_round_up_never_shrinks_a_bound(x):
    r = round_up(x)
    assert r >= x and r <= x * 1.1 + 1e-15


# ------------------------------------------------------------------------------------ named-dim tables
def violation_cube(counts: np.ndarray, n_eps: int = 20, d: float = 10.0):
    """A final-greedy-only cube: counts (A, T, B, S) violating episodes of n_eps (cost 2d vs d/2)."""
    a, t, b, s = counts.shape
    cost = np.full((a, t, b, s, 1, n_eps, 3), np.nan)
    ep = np.arange(n_eps)
    cost[..., 0, :, 2] = np.where(ep < counts[..., None], 2 * d, d / 2)
    cost[..., 0, :, 0] = d / 2
    reward = np.where(np.isnan(cost), np.nan, 1.0)
    return cube_ds(reward, cost, [f"alg{i}" for i in range(a)], [f"task{i}" for i in range(t)], [d] * 1 if b == 1
                   else [d * (i + 1) for i in range(b)])


def test_tables_keep_the_papers_interval_and_bound_an_observed_zero():
    counts = np.zeros((2, 2, 1, 5), dtype=int)
    counts[1] = [[[0, 1, 3, 2, 0]], [[4, 0, 1, 1, 2]]]  # alg0 never violates
    ss = stats.load_suffstats(violation_cube(counts))
    agg = stats.aggregate_table(ss, ["final_greedy"], boot=300, rng_seed=4).sel(metric="V")
    h = honest_tables(ss, ["final_greedy"], boot=300, rng_seed=4)
    a = h.aggregate.sel(setting="final_greedy")
    for name in ("ci_low", "ci_high"):
        assert np.array_equal(a[name].values, agg[name].sel(setting="final_greedy").values)  # draw for draw
    zero = a.sel(algo="alg0")
    assert float(zero["V"]) == 0 and float(zero["ci_high"]) == 0 and int(zero["tier"]) == 4
    assert bool(zero["rests_on_zero"]) and float(zero["honest_high"]) > 0
    cond = h.conditions.sel(algo="alg0", task="task0", setting="final_greedy").isel(bound=0)
    assert float(cond["honest_high"]) == pytest.approx(oracle_cluster([0.0] * 5, [20] * 5)[1])
    assert int(cond["n_seeds"]) == 5 and float(cond["n_episodes"]) == 100 and not bool(cond["few_seeds"])
    assert int(zero["tier_at_bound"]) < 4 and zero["claim"].item().startswith("tier 4 observed; V ≤ ")
    assert int(a["tier"].sel(algo="alg1")) == int(stats.aggregate_table(ss, ["final_greedy"], boot=10)["tier"]
                                                  .sel(algo="alg1", setting="final_greedy"))


def test_three_seeds_are_marked_few_and_one_seed_has_no_interval():
    counts = np.zeros((1, 2, 1, 3), dtype=int)
    ds = violation_cube(counts)
    for var in ("cost", "reward"):
        ds[var][0, 1, 0, 1:] = np.nan  # task1 keeps one seed
    ss = stats.load_suffstats(ds)
    h = honest_tables(ss, ["final_greedy"], boot=50)
    c = h.conditions.sel(algo="alg0", setting="final_greedy").isel(bound=0)
    assert list(c["n_seeds"].values) == [3, 1] and list(c["few_seeds"].values) == [True, True]
    high = c["honest_high"].values
    assert np.isfinite(high[0]) and np.isnan(high[1])
    a = h.aggregate.sel(algo="alg0", setting="final_greedy")
    assert bool(a["few_seeds"]) and int(a["min_seeds"]) == 1 and np.isnan(float(a["honest_high"]))
    df = honest_frame(h.aggregate)
    assert list(df.columns)[-1] == "reason" and df["reason"].tolist() == ["one-seed"]
    dc = honest_frame(h.conditions)
    assert dc["reason"].tolist() == ["", "one-seed"] and dc["few_seeds"].all()


def test_bad_floor_is_one_clear_error():
    ss = stats.load_suffstats(violation_cube(np.zeros((1, 1, 1, 2), dtype=int)))
    with pytest.raises(CubeError, match="correlation floor"):
        honest_tables(ss, icc_floor=1.5)


# ------------------------------------------------------------------------------------------- coverage
def test_draw_rates_identical_and_zero():
    rng = np.random.default_rng(0)
    v = draw_rates(rng, np.array([0.0, 0.3]), 4, 50, 300, None)
    assert v.shape == (300, 2, 4) and not v[:, 0].any()
    assert v[:, 1].mean() == pytest.approx(0.3, abs=0.01)
    het = draw_rates(rng, np.array([0.3]), 4, 2000, 500, 10.0)[:, 0]
    # Beta(3, 7) seeds: the seeds' spread is about sd(p_k) = sqrt(0.21 / 11), far above binomial noise
    assert het.std(axis=1, ddof=1).mean() == pytest.approx(math.sqrt(0.21 / 11), rel=0.2)


def test_coverage_on_a_small_grid_shows_the_bootstrap_failing_at_rare_violations_and_the_honest_holding():
    rng = np.random.default_rng(3)
    rare = coverage_cell(rng, 0.01, 10, 100, "condition", 10.0, reps=300, boot=200)
    assert rare["plain"] < 0.85 and rare["shipped"] >= 0.94  # bootstrap: [0, 0] whenever no seed violates
    zero = coverage_cell(rng, 0.0, 5, 10, "condition", None, reps=50, boot=50)
    assert zero["plain"] == zero["shipped"] == 1.0 and zero["plain_high"] == 0 < zero["shipped_high"]
    many = coverage_cell(rng, 0.3, 5, 100, "iqm", 10.0, reps=60, boot=100)
    assert many["shipped"] >= many["plain"] and many["shipped_high"] >= many["plain_high"]
    grid = coverage_grid(levels=("condition",), spreads=("identical",), seeds=(5,), episodes=(10,),
                         probabilities=(0.0, 0.3), reps=30, boot=30)
    assert list(grid.columns) == ["level", "spread", "K", "N", "p", "plain", "shipped", "plain_high", "shipped_high"]
    assert len(grid) == 2 and grid["shipped"].between(0, 1).all()


def test_episodes_behind_a_run_follow_the_setting_and_the_iterate_window():
    from cube.stats.packing import run_episodes

    ds = random_cube(np.random.default_rng(8), shape=(1, 1, 1, 2, 4, 6), ragged=True)
    ss = stats.load_suffstats(ds)
    cost = ds["cost"].values[0, 0, 0]  # (seed, iterate, episode, mode)
    have = ~np.isnan(cost)
    train = run_episodes(ss, "train").values[0, 0, 0]
    window = run_episodes(ss, "train", iterates=(1, 2)).values[0, 0, 0]
    greedy = run_episodes(ss, "final_greedy").values[0, 0, 0]
    assert list(train) == list(have[:, :, :, 0].sum((1, 2)))
    assert list(window) == list(have[:, 1:3, :, 0].sum((1, 2)))
    assert list(greedy) == list(have[:, -1, :, 2].sum(1))  # the last iterate holds the final evaluation


def test_quantiles_without_scipy_stats_are_scipy_stats_bit_for_bit() -> None:
    """`beta_ppf`, `t_ppf`, `norm_ppf`, `norm_cdf` (scipy.special only) give scipy.stats' numbers exactly,
    invalid shapes (0, negative, NaN) and infinite ones included."""
    from scipy import stats as sps

    from cube.stats.honest import beta_ppf, norm_cdf, norm_ppf, t_ppf

    rng = np.random.default_rng(37)
    edge = np.array([np.nan, -1.0, 0.0, 1e-300, 0.5, 1.0, 2.0, 1e6, np.inf])
    a = np.concatenate([rng.uniform(0, 3, 3000), rng.uniform(0, 3000, 3000), np.repeat(edge, edge.size)])
    b = np.concatenate([rng.uniform(0, 3, 3000), rng.uniform(0, 3000, 3000), np.tile(edge, edge.size)])
    df = np.concatenate([rng.integers(1, 200, 500).astype(np.float64), edge])
    with np.errstate(invalid="ignore", divide="ignore"):
        for q in (0.005, 0.025, 0.3, 0.975, 0.995):
            np.testing.assert_array_equal(beta_ppf(q, a, b), sps.beta.ppf(q, a, b), strict=True)
            np.testing.assert_array_equal(t_ppf(q, df), sps.t.ppf(q, df), strict=True)
            assert norm_ppf(q) == sps.norm.ppf(q)
        for x in (-40.0, -1.96, 0.0, 0.3, 1.959963984540054, 9.0):
            assert norm_cdf(x) == sps.norm.cdf(x)
