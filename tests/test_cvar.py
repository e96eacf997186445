"""CVaR_alpha of the normalised cost deviation (issue 33): the Rockafellar-Uryasev empirical estimator per cell,
checked against a plain sort (`statsdata.ref_cvar`) and by hand, in both kernels, through the paper's
aggregation, with the alphas of the cache; means-only runs never have one."""

from __future__ import annotations

import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings

try:
    from statsdata import cube_ds, random_cube, ref_cvar, ref_run
except ImportError:  # pragma: no cover - run from the repository root
    from tests.statsdata import cube_ds, random_cube, ref_cvar, ref_run

from cube import CubeError, stats
from cube.stats import fused, kernel, runs
from cube.stats.suffvars import ALPHA_DIM, CVAR_VAR
from cube.stats.tail import check_alpha, cvar_alphas, tail_table

KERNELS = ("numpy", "fused") if fused.available() else ("numpy",)


def _cvar_of(costs, d: float, alpha: float = 0.1) -> float:
    """The metric of one cell from the kernel: (CVaR_alpha(c) - d) / d."""
    c = np.asarray(costs, dtype=np.float32).reshape(1, -1, 1)
    r = np.where(np.isnan(c), np.nan, 1.0).astype(np.float32)
    got = kernel.cell_stats(r, c, np.array(d), kernel.default_kappa(), None, "numpy", (alpha,))
    return (float(got.cvar[0, 0]) - d) / d


@pytest.mark.parametrize(("costs", "d", "alpha", "want"), [
    (np.arange(10.0) * 10, 50.0, 0.1, (90 - 50) / 50),  # alpha N = 1: the worst episode
    (np.arange(10.0) * 10, 50.0, 0.05, (90 - 50) / 50),  # alpha N = 0.5 < 1: still the worst one
    (np.arange(15.0), 10.0, 0.1, ((14 + 0.5 * 13) / 1.5 - 10) / 10),  # alpha N = 1.5: k = 2, w = 1/2
    (np.arange(30.0), 10.0, 0.1, ((29 + 28 + 27) / 3 - 10) / 10),  # 0.1 x 30 = 3 exactly, not 3.0000000000000004
    (np.arange(20.0), 4.0, 0.25, ((19 + 18 + 17 + 16 + 15) / 5 - 4) / 4),  # alpha N = 5
    ([5.0, 5.0, 5.0, 5.0], 10.0, 0.1, -0.5),  # ties
    ([7.0], 14.0, 0.05, -0.5),  # one episode
    ([30.0, np.nan, np.nan, 10.0], 15.0, 0.1, 1.0),  # NaN is no episode: N = 2
    ([0.0] * 12, 25.0, 0.1, -1.0),  # no cost at all
    ([1.0, 2.0, 3.0, 4.0], 2.0, 1.0, 0.25),  # alpha = 1: the mean, D_norm
])
def test_cvar_by_hand(costs, d, alpha, want):
    assert _cvar_of(costs, d, alpha) == pytest.approx(want, rel=1e-12)
    assert ref_cvar((np.asarray(costs, dtype=np.float64) - d) / d, alpha) == pytest.approx(want, rel=1e-12)


def test_alpha_n_is_exact_in_the_table():
    k, an = tail_table((0.1, 0.05, 0.3), 40)
    assert k[0, 30] == 3 and an[0, 30] == 3.0 and k[0, 31] == 4 and an[0, 31] == pytest.approx(3.1)
    assert k[1, 20] == 1 and an[1, 20] == 1.0 and k[1, 21] == 2
    assert k[2, 10] == 3 and an[2, 10] == 3.0  # 0.3 x 10 = 3.0000000000000004 in floats
    assert k[:, 0].tolist() == [0, 0, 0]


def test_alpha_arguments():
    assert cvar_alphas() == (0.1, 0.05) and cvar_alphas(0.2) == (0.1, 0.05, 0.2) and cvar_alphas([0.05]) == (0.1, 0.05)
    for bad in (0, -0.1, 1.5, float("nan"), "x"):
        with pytest.raises(CubeError, match="CVaR alpha"):
            check_alpha(bad)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_eps=st.integers(1, 90), dtype=st.sampled_from([np.float32, np.float64]),
       alphas=st.sampled_from([(0.1, 0.05), (0.1, 0.05, 0.3), (0.5, 1.0, 0.01), (0.2,)]),
       ties=st.sampled_from([0.0, 0.5, 1.0]))
def test_cvar_equals_a_plain_sort_on_random_cells(seed, n_eps, dtype, alphas, ties):
    """Random cells with NaN episodes (whole cells empty too), ties (costs rounded to integers, zeros), alpha N
    integer and not, one episode: both kernels within 1e-9 of the sort-based oracle, and equal bit for bit."""
    rng = np.random.default_rng(seed)
    shape = (3, 4, n_eps, 3)
    c = rng.gamma(2.0, 10.0, shape)
    c = np.where(rng.random(shape) < ties, np.round(c), c)
    c[rng.random(shape) < 0.1] = 0.0
    c[rng.random(shape) < 0.2] = np.nan
    c[:, 0, :, 1] = np.nan  # cells without episodes
    c = c.astype(dtype)
    r = np.where(np.isnan(c), np.nan, 1.0).astype(dtype)
    d = np.array([10.0, 25.0, 40.0]).reshape(3, 1, 1, 1)
    got = {k: kernel.cell_stats(r, c, d, kernel.default_kappa(), None, k, alphas) for k in KERNELS}
    np.testing.assert_array_equal(got["numpy"].cvar, got[KERNELS[-1]].cvar)
    c3 = c.reshape(-1, n_eps, 3)
    for row, cvar in zip(got["numpy"].rows, got["numpy"].cvar, strict=True):
        i, m = divmod(int(row), 3)
        for a, alpha in enumerate(alphas):
            want = ref_cvar(c3[i, :, m], alpha)
            assert cvar[a] == pytest.approx(want, rel=1e-9, abs=1e-9)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ragged=st.booleans(), alpha=st.sampled_from([0.1, 0.05]))
def test_run_metric_is_the_papers_aggregation_of_the_cell_cvar(seed, ragged, alpha):
    """Per run: the mean over training iterates of CVaR^j (train), CVaR at the final iterate (final settings)."""
    ds = random_cube(np.random.default_rng(seed), shape=(1, 2, 2, 2, 3, 11), ragged=ragged)
    ss = stats.with_cvar_alpha(stats.load_suffstats(ds), alpha)
    for setting in stats.SETTINGS:
        rm = stats.run_metrics(ss, setting)
        for idx in np.ndindex(1, 2, 2, 2):
            want = ref_run(ds, *idx, setting, alpha)["CVaR"]
            assert float(rm["CVaR"].values[idx]) == pytest.approx(want, rel=1e-9, abs=1e-12, nan_ok=True)


def test_aggregate_cvar_is_the_iqm_of_seed_means_with_a_bootstrap_ci():
    ds = random_cube(np.random.default_rng(3), shape=(2, 2, 2, 4, 3, 12), ragged=True)
    ss = stats.load_suffstats(ds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.StatsWarning)
        agg = stats.aggregate_table(ss, ["train"], boot=200)
    rm = stats.run_metrics(ss, "train")
    for a in ("alg0", "alg1"):
        means = rm["CVaR"].sel(algo=a).mean("seed").values.ravel()
        assert agg["value"].sel(algo=a, setting="train", metric="CVaR").item() == pytest.approx(stats.iqm(means))
        lo, hi = (agg[v].sel(algo=a, setting="train", metric="CVaR").item() for v in ("ci_low", "ci_high"))
        assert lo <= stats.iqm(means) <= hi and lo < hi
    assert list(agg["metric"].values) == [*stats.PAPER_METRICS, "CVaR"]
    # the paper's columns do not move: the same draws, CVaR one more column beside them
    paper = stats.aggregate_table(ss.drop_vars(CVAR_VAR), ["train"], boot=200)
    for v in ("value", "ci_low", "ci_high"):
        np.testing.assert_allclose(agg[v].sel(metric=list(stats.PAPER_METRICS)).values,
                                   paper[v].sel(metric=list(stats.PAPER_METRICS)).values, rtol=1e-12)
    assert np.isnan(paper["value"].sel(metric="CVaR").values).all()


def test_an_alpha_is_chosen_and_said_and_others_are_computed_on_demand():
    ds = random_cube(np.random.default_rng(5), shape=(1, 1, 1, 2, 2, 40), ragged=False)
    ss = stats.load_suffstats(ds)
    assert ss[ALPHA_DIM].values.tolist() == [0.1, 0.05] and ss[CVAR_VAR].dims[-1] == ALPHA_DIM
    assert stats.cvar_alpha(ss) == 0.1
    five = stats.with_cvar_alpha(ss, 0.05)
    assert stats.aggregate_table(five, ["train"], boot=20).attrs["cvar_alpha"] == 0.05
    c = ds["cost"].values[0, 0, 0, 0, 0, :, 0].astype(np.float64)
    d = float(ds["bound"].values[0])
    assert stats.iterate_metrics(five)["CVaR"].values[0, 0, 0, 0, 0] == pytest.approx(ref_cvar((c - d) / d, 0.05))
    with pytest.raises(CubeError, match=r"hold CVaR at alpha 0.1, 0.05, not 0.2: load them with"):
        stats.with_cvar_alpha(ss, 0.2)
    more = stats.load_suffstats(ds, cvar_alphas=(0.2,))
    assert more[ALPHA_DIM].values.tolist() == [0.1, 0.05, 0.2]
    got = stats.iterate_metrics(stats.with_cvar_alpha(more, 0.2))["CVaR"].values[0, 0, 0, 0, 0]
    assert got == pytest.approx(ref_cvar((c - d) / d, 0.2))


def test_a_cell_without_episodes_and_means_only_runs_have_no_cvar():
    cost = np.full((1, 1, 1, 2, 2, 5, 3), np.nan)
    cost[..., 0, :, 0] = [[1.0, 2.0, 30.0, 4.0, 5.0]]
    ds = cube_ds(np.where(np.isnan(cost), np.nan, 1.0), cost, ["a"], ["t"], [10.0])
    ss = stats.load_suffstats(ds)
    im = stats.iterate_metrics(ss)
    assert np.isfinite(im["CVaR"].values[..., 0]).all() and np.isnan(im["CVaR"].values[..., 1]).all()
    flag = xr.zeros_like(ss["n"].isel(iterate=0), dtype=bool).drop_vars("iterate", errors="ignore")
    flag.loc[{"seed": 0, "mode": "train"}] = True
    flagged = ss.assign(means_only=flag.transpose("algo", "task", "bound", "seed", "mode"))
    rm = stats.run_metrics(flagged, "train")
    assert np.isnan(rm["CVaR"].sel(seed=0).item()) and np.isnan(rm["V"].sel(seed=0).item())
    assert rm["CVaR"].sel(seed=1).item() == pytest.approx(2.0) and np.isfinite(rm["C"].sel(seed=0).item())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.StatsWarning)
        agg = stats.aggregate_table(flagged, ["train"], boot=20)
    from cube.stats.reasons import reason_codes

    assert reason_codes(agg.assign(value=agg["value"].where(agg["metric"] != "CVaR")), "aggregate")[
        "value"].sel(algo="a", setting="train", metric="CVaR").item() == "means-only"


def test_formula_inputs_take_the_chosen_alpha():
    ds = random_cube(np.random.default_rng(8), shape=(1, 1, 1, 2, 2, 9), ragged=False)
    ss = stats.load_suffstats(ds)
    dims = ss["n"].dims
    inputs = runs.formula_inputs(stats.with_cvar_alpha(ss, 0.05), dims)
    np.testing.assert_array_equal(inputs[CVAR_VAR], ss[CVAR_VAR].sel({ALPHA_DIM: 0.05}).transpose(*dims).values)
    assert np.isnan(runs.formula_inputs(ss.drop_vars(CVAR_VAR), dims)[CVAR_VAR]).all()
