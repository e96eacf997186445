"""Run-level performance profiles (cube.stats.profiles) and the reward-cost front (cube.stats.front)
against plain loops; their figures drawn and saved (cube.render.profile_front)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from statsdata import cube_ds, random_cube

from cube import CubeError, stats
from cube.stats import metrics as registry
from cube.stats import profiles as profiles_module
from cube.stats.bootstrap import bootstrap_rng, percentile_ci, replicates, strata
from cube.stats.front import front_counts_frame, front_frame, non_dominated, reward_cost_front
from cube.stats.profiles import default_tau, performance_profiles, profile_fraction, profile_frame, profile_metrics


# ------------------------------------------------------------------------------------------- profiles
def test_profile_metrics_follow_the_registry(monkeypatch):
    assert profile_metrics() == ("Dnorm", "V", "Dplus", "CVaR")  # cost-like and comparable across tasks: not C̄
    tail = registry.Metric("ES", "ES", "ES", "another tail metric of (c - d)/d", False, True,
                           lambda s, d: s["n"] * 0.0)
    monkeypatch.setattr(profiles_module, "METRICS", (*registry.METRICS, "ES"))
    monkeypatch.setitem(registry.METRIC, "ES", tail)
    assert profile_metrics() == ("Dnorm", "V", "Dplus", "CVaR", "ES")  # a new record needs no change


def test_profile_fraction_by_hand():
    v = np.array([0.0, 0.1, 0.1, 0.5, np.nan])
    assert list(profile_fraction(v, np.array([-1.0, 0.0, 0.1, 0.4, 1.0]))) == [0, 0.25, 0.75, 0.75, 1.0]
    assert list(profile_fraction(v, np.array([0.1]), higher_is_better=True)) == [0.75]
    assert np.isnan(profile_fraction(np.full(3, np.nan), np.array([0.0]))[0])


def test_default_tau_grids():
    assert np.array_equal(default_tau(np.array([0.2]), "V"), np.linspace(0, 1, 101))
    grid = default_tau(np.array([-0.4, 0.2, 12.0]), "Dnorm")
    assert grid[0] == -0.4 and grid[-1] == pytest.approx(12.0) and np.all(np.diff(grid) > 0)
    assert np.isclose(grid, 0.0).sum() <= 1 and (grid <= 3.0).sum() == 101  # fine up to 3, then geometric


def test_profiles_equal_a_plain_loop_and_their_band_the_engines_draws():
    ds = random_cube(np.random.default_rng(11), shape=(2, 2, 2, 4, 3, 6), ragged=True)
    ss = stats.load_suffstats(ds)
    out = performance_profiles(ss, ["final_greedy", "train"], boot=200, rng_seed=5)
    rm = stats.run_metrics(ss, "final_greedy")
    for a in ("alg0", "alg1"):
        for m in ("V", "Dnorm"):
            tau = out["tau"].sel(metric=m).values
            runs = rm[m].sel(algo=a).values.ravel()
            runs = runs[np.isfinite(runs)]
            want = [np.mean(runs <= t) for t in tau]  # rliable's per-task mean too: every condition has 4 seeds
            got = out["fraction"].sel(algo=a, setting="final_greedy", metric=m).values
            assert got == pytest.approx(want, abs=1e-12)
            assert int(out["n_runs"].sel(algo=a, setting="final_greedy", metric=m)) == runs.size
    # the band: the engine's draws for (rng_seed, algo, "profile:<setting>:<metric>"), recomputed by a loop
    values = rm["V"].sel(algo="alg1").transpose("task", "bound", "seed").values.reshape(4, 4)
    packed, k = strata(values[..., None], np.isfinite(values))
    tau = out["tau"].sel(metric="V").values
    reps = replicates([(k, 4)], 200, bootstrap_rng(5, "alg1", "profile:final_greedy:V"), lambda w: w)
    loop = np.array([[sum(w[p, i] * (packed[p, i, 0] <= t) for p in range(4) for i in range(4)) / k.sum()
                      for t in tau] for w in reps])
    lo, hi = percentile_ci(loop, 0.95)
    one = out.sel(algo="alg1", setting="final_greedy", metric="V")
    assert one["ci_low"].values == pytest.approx(lo) and one["ci_high"].values == pytest.approx(hi)
    assert np.all(one["ci_low"].values <= one["fraction"].values + 1e-12)


def test_given_thresholds_and_bad_ones():
    ss = stats.load_suffstats(random_cube(np.random.default_rng(2), shape=(1, 1, 2, 3, 2, 4)))
    out = performance_profiles(ss, "final_greedy", metrics="V", tau={"V": [0.0, 0.5, 1.0]}, boot=20)
    assert list(out["tau"].sel(metric="V").values) == [0.0, 0.5, 1.0]
    df = profile_frame(out)
    assert list(df.columns) == ["algo", "setting", "metric", "tau", "fraction", "ci_low", "ci_high", "n_runs",
                                "reason"] and len(df) == 3
    with pytest.raises(CubeError, match="increasing"):
        performance_profiles(ss, "final_greedy", metrics="V", tau={"V": [0.5, 0.1]}, boot=20)
    with pytest.raises(CubeError, match="unknown metric"):
        performance_profiles(ss, "final_greedy", metrics="VaR", boot=20)
    cvar = performance_profiles(ss, "final_greedy", metrics="CVaR", boot=20)  # the tail is profiled like the rest
    assert list(cvar["metric"].values) == ["CVaR"] and np.isfinite(cvar["fraction"].values).any()


# ---------------------------------------------------------------------------------------------- front
def test_non_dominated_by_hand():
    r = np.array([1.0, 2.0, 2.0, 0.5, 3.0, np.nan, 2.0])
    c = np.array([0.0, 0.5, 0.2, -0.1, 2.0, -5.0, 0.2])
    # (2, 0.2) twice: equal points are both on it; (2, 0.5) is dominated by them; NaN never is
    assert list(non_dominated(r, c)) == [True, False, True, True, True, False, True]


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 9), st.just(2)),
                  elements=st.sampled_from([0.0, 1.0, 2.0, 3.5])))
def test_non_dominated_equals_a_loop(points):
    r, c = points[:, 0], points[:, 1]
    want = [not any((r[j] >= r[i] and c[j] <= c[i]) and (r[j] > r[i] or c[j] < c[i]) for j in range(len(r)))
            for i in range(len(r))]
    assert list(non_dominated(r, c)) == want


def front_cube(seed: int = 0, n_seeds: int = 5) -> xr.Dataset:
    """2 algos x 2 tasks x 2 bounds: alg0 cheaper and poorer, alg1 richer and costlier (final greedy only)."""
    rng = np.random.default_rng(seed)
    shape = (2, 2, 2, n_seeds, 1, 8, 3)
    d = np.array([10.0, 20.0])[None, None, :, None, None, None, None]
    level = np.array([0.6, 1.4])[:, None, None, None, None, None, None]
    cost = np.full(shape, np.nan)
    reward = np.full(shape, np.nan)
    cost[..., 2] = (d * level * rng.uniform(0.8, 1.2, shape))[..., 2]
    reward[..., 2] = (level * 10 + rng.normal(0, 0.5, shape))[..., 2]
    cost[..., 0], reward[..., 0] = 1.0, 1.0
    return cube_ds(reward, cost, ["alg0", "alg1"], ["t0", "t1"], [10.0, 20.0])


def test_front_points_probabilities_and_counts():
    ss = stats.load_suffstats(front_cube())
    fr = reward_cost_front(ss, "final_greedy", boot=300, rng_seed=1)
    one = fr.sel(setting="final_greedy")
    rm = stats.run_metrics(ss, "final_greedy")
    assert one["reward"].sel(task="t0", algo="alg1", bound=10.0) == pytest.approx(
        float(rm["R"].sel(algo="alg1", task="t0", bound=10.0).mean()))
    for t in ("t0", "t1"):
        want = non_dominated(one["reward"].sel(task=t).values.ravel(), one["cost"].sel(task=t).values.ravel())
        assert list(one["on_front"].sel(task=t).values.ravel()) == list(want)
    p = one["p_front"].values
    assert np.all((p >= 0) & (p <= 1))
    assert np.all(p[one["on_front"].values] > 0)  # a point on the front is on it in some replicates
    # P(front) by a loop over the engine's draws of task t1
    vals = np.stack([rm[m].sel(task="t1").transpose("algo", "bound", "seed").values.reshape(4, 5)
                     for m in ("R", "Dnorm")], -1)
    packed, k = strata(vals, np.isfinite(vals).all(-1))
    draws = replicates([(k, 5)], 300, bootstrap_rng(1, "front:t1", "final_greedy"), lambda w: w)
    hits = np.zeros(4)
    for w in draws:
        means = np.einsum("pk,pkf->pf", w, packed) / k[:, None]
        hits += non_dominated(means[:, 0], means[:, 1])
    assert one["p_front"].sel(task="t1").values.ravel() == pytest.approx(hits / 300)
    counts = front_counts_frame(fr)
    assert list(counts.columns) == ["setting", "algo", "n_tasks", "tasks_on_front", "expected_tasks_on_front"]
    assert (counts["tasks_on_front"] <= counts["n_tasks"]).all() and (counts["n_tasks"] == 2).all()
    assert list(front_frame(fr).columns)[-1] == "reason" and len(front_frame(fr)) == 8


def test_front_refuses_a_reward_as_cost():
    ss = stats.load_suffstats(front_cube(n_seeds=2))
    with pytest.raises(CubeError, match="lower-is-better"):
        reward_cost_front(ss, "final_greedy", cost="R", boot=10)


# -------------------------------------------------------------------------------------------- figures
def test_profile_and_front_figures_draw_and_save(tmp_path: Path, small_demo_cube: Path):
    pytest.importorskip("matplotlib")
    from cube.render.figures import save_figure
    from cube.render.profile_front import front_figure, profile_figure

    ss = stats.load_suffstats(small_demo_cube)
    prof = performance_profiles(ss, ["final_greedy"], boot=50)
    fig = profile_figure(prof, baseline="ppo")
    gids = {a.get_gid() for ax in fig.axes for a in ax.get_children()}
    assert {"line:ppo_lag:final_greedy:V", "band:p3o:final_greedy:Dnorm", "synthetic"} <= gids | {
        t.get_gid() for t in fig.texts}
    assert save_figure(fig, tmp_path / "profile.png").stat().st_size > 10_000
    fr = reward_cost_front(ss, ["final_greedy"], boot=50)
    fig = front_figure(fr, baseline="ppo")
    gids = {a.get_gid() for ax in fig.axes for a in ax.get_children()}
    assert {"front:goal", "front:circle", "point:focops:15:goal", "cost0"} <= gids
    assert save_figure(fig, tmp_path / "front.png").stat().st_size > 10_000
