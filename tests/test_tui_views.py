"""cube.stats.curves, cube.store.summary.run_rows, cube.render.text.table_*: the pure-data helpers behind the TUI views,
checked against plain loops and numpy."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from cube import open_cube, stats
from cube.render import text as export
from cube.selection import Selection
from cube.stats import curves
from cube.stats.subset import select_runs
from cube.store import summary


def naive_moving_average(x: np.ndarray, window: int) -> np.ndarray:
    """Loop reference: trailing window mean of the finite values, NaN when the window has none."""
    out = np.full(x.shape, np.nan)
    for j in range(x.shape[-1]):
        win = x[..., max(0, j - window + 1): j + 1]
        for idx in np.ndindex(*x.shape[:-1]):
            w = win[idx]
            w = w[np.isfinite(w)]
            if w.size:
                out[idx + (j,)] = w.sum() / w.size
    return out


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 3), st.integers(1, 12)),
           elements=st.one_of(st.floats(-1e3, 1e3), st.just(np.nan))),
    st.integers(1, 15),
)
def test_moving_average_matches_loop(x: np.ndarray, window: int) -> None:
    np.testing.assert_allclose(curves.moving_average(x, window), naive_moving_average(x, window), rtol=1e-9,
                               atol=1e-9)


def test_moving_average_hand_values_and_axis() -> None:
    x = np.array([1.0, 2.0, np.nan, 6.0])
    np.testing.assert_allclose(curves.moving_average(x, 2), [1.0, 1.5, 2.0, 6.0])
    np.testing.assert_allclose(curves.moving_average(x, 1), x)
    m = np.stack([x, 2 * x])  # (2, 4); smooth along axis 0 instead
    np.testing.assert_allclose(curves.moving_average(m, 2, axis=0)[1], [1.5, 3.0, np.nan, 9.0])


def _im(values: np.ndarray) -> xr.Dataset:
    """iterate-metrics-like dataset from R values of shape (algo, task, bound, seed, iterate); C = 2 R."""
    dims = ("algo", "task", "bound", "seed", "iterate")
    coords = {"algo": ["a", "b"][: values.shape[0]], "task": ["t"], "bound": [10.0],
              "seed": list(range(values.shape[3])), "iterate": list(range(values.shape[4]))}
    return xr.Dataset({"R": (dims, values), "C": (dims, 2 * values)}, coords=coords)


def test_training_curves_seed_mean_and_sample_std() -> None:
    r = np.array([[1.0, 3.0, 5.0], [3.0, 5.0, 9.0]])  # 2 seeds x 3 iterates
    cur = curves.training_curves(_im(r[None, None, None]), window=1)
    np.testing.assert_allclose(cur["R_mean"].values.ravel(), [2.0, 4.0, 7.0])
    np.testing.assert_allclose(cur["R_std"].values.ravel(), np.std(r, axis=0, ddof=1))
    np.testing.assert_allclose(cur["C_mean"].values.ravel(), [4.0, 8.0, 14.0])
    smooth = curves.training_curves(_im(r[None, None, None]), window=2)
    # per-seed trailing means: seed0 [1, 2, 4], seed1 [3, 4, 7] -> mean [2, 3, 5.5]
    np.testing.assert_allclose(smooth["R_mean"].values.ravel(), [2.0, 3.0, 5.5])
    assert smooth["R_mean"].dims == ("algo", "task", "bound", "iterate")


def test_training_curves_single_seed_std_is_nan() -> None:
    cur = curves.training_curves(_im(np.ones((1, 1, 1, 1, 4))), window=3)
    assert np.isnan(cur["R_std"].values).all()
    np.testing.assert_allclose(cur["R_mean"].values.ravel(), 1.0)


def test_final_iterate() -> None:
    counts = np.array([[0, 3, 0, 2, 0], [0, 0, 0, 0, 0], [5, 0, 0, 0, 0]])
    np.testing.assert_array_equal(curves.final_iterate(counts), [3, -1, 0])


def test_final_costs_and_histograms_on_demo_cube(small_demo_cube: Path) -> None:
    ds = open_cube(small_demo_cube)
    costs = curves.final_costs(ds, stats.load_suffstats(small_demo_cube), "goal", 15.0)
    raw = ds["cost"].sel(task="goal", bound=15.0).values  # (algo, seed, iterate, episode, mode)
    modes = list(ds["mode"].values)
    for a, algo in enumerate(ds["algo"].values):
        for mode in ("expl", "greedy"):
            m = modes.index(mode)
            expect = []
            for k in range(raw.shape[1]):
                per_it = raw[a, k, :, :, m]
                have = [j for j in range(per_it.shape[0]) if np.isfinite(per_it[j]).any()]
                if have:
                    row = per_it[have[-1]]
                    expect.append(row[np.isfinite(row)])
            np.testing.assert_allclose(costs[str(algo)][mode], np.concatenate(expect))
    ss = stats.load_suffstats(small_demo_cube)
    final = curves.final_episode_costs(ds["cost"].sel(task=["goal"], bound=[15.0]), ss["n"].sel(task=["goal"],
                                                                                                 bound=[15.0]))
    panels = curves.hist_panels(final, bins=7, tail=1.0, own_scale=("ppo",))
    safe_edges = panels[("goal", 15.0, "p3o")].edges
    for (_t, _d, algo), p in panels.items():
        assert p.edges.size == 8 and p.edges[0] <= 0.0 and p.edges[-1] >= 15.0
        if algo != "ppo":
            np.testing.assert_array_equal(p.edges, safe_edges)  # one x scale for the safe algorithms
        for mode in ("expl", "greedy"):
            assert p.counts[mode].sum() == costs[algo][mode].size
            np.testing.assert_array_equal(p.counts[mode], np.histogram(costs[algo][mode], bins=p.edges)[0])


def test_hist_panels_constant_values() -> None:
    costs = xr.DataArray(np.zeros((1, 1, 1, 1, 2, 2)), dims=("algo", "task", "bound", "seed", "episode", "mode"),
                         coords={"algo": ["a"], "task": ["t"], "bound": [0.0001], "seed": [0], "episode": [0, 1],
                                 "mode": ["expl", "greedy"]})
    costs[..., 1] = np.nan
    p = curves.hist_panels(costs, bins=4)[("t", 0.0001, "a")]
    assert p.edges[0] <= 0.0 < p.edges[-1]
    assert p.counts["expl"].sum() == 2 and "greedy" not in p.counts


def test_multiplier_curves_match_numpy(small_demo_cube: Path) -> None:
    ds = open_cube(small_demo_cube)
    mult = curves.multiplier_curves(ds, window=1)
    raw = ds["multiplier"].transpose("algo", "task", "bound", "seed", "iterate").values
    assert mult is not None
    ppo = list(ds["algo"].values).index("ppo")
    assert np.isnan(mult["mult_mean"].values[ppo]).all()
    lag = list(ds["algo"].values).index("ppo_lag")
    np.testing.assert_allclose(mult["mult_mean"].values[lag], raw[lag].mean(axis=2))
    np.testing.assert_allclose(mult["mult_std"].values[lag], raw[lag].std(axis=2, ddof=1))
    assert curves.multiplier_curves(ds.drop_vars("multiplier")) is None


def test_training_curves_from_stats(small_demo_cube: Path) -> None:
    ss = stats.select(stats.load_suffstats(small_demo_cube), Selection(algos=("p3o",)))
    cur = curves.training_curves(stats.iterate_metrics(ss), window=1)
    ds = open_cube(small_demo_cube).sel(algo=["p3o"], mode="train")
    per_run = ds["reward"].mean("episode", skipna=True).transpose("algo", "task", "bound", "seed", "iterate").values
    np.testing.assert_allclose(cur["R_mean"].values, per_run.mean(axis=3), rtol=1e-5)


def test_select_runs_and_run_rows(small_demo_cube: Path) -> None:
    ds = open_cube(small_demo_cube)
    sub = select_runs(ds, Selection(algos=("focops",), seeds=(0, 2)))
    rows = summary.run_rows(sub)
    assert len(rows) == 1 * ds.sizes["task"] * ds.sizes["bound"] * 2
    assert {r["algo"] for r in rows} == {"focops"} and {r["seed"] for r in rows} == {0, 2}
    steps = ds["env_steps"].sel(algo="focops", seed=0).isel(iterate=-1).values
    assert rows[0]["steps"] == float(steps.ravel()[0])
    assert all(r["status"] == "complete" for r in rows)
    assert rows[0]["iterates"] == ds.sizes["iterate"]
    assert "num_envs=16" in rows[0]["config"]


def test_config_summary_handles_bad_json() -> None:
    assert summary.config_summary("not json{") == "not json{"
    assert summary.config_summary(json.dumps({"config": {"lr": 0.1, "nested": {"x": 1}}})) == "lr=0.1"
    long = summary.config_summary(json.dumps({"k" * 100: 1}), width=10)
    assert len(long) == 10 and long.endswith("…")


def test_table_csv_round_trip() -> None:
    header = ["name", "value"]
    rows = [["a,b", 1.5], ['q"uote', float("nan")], ["plain", 3]]
    parsed = list(csv.reader(io.StringIO(export.table_csv(header, rows))))
    assert parsed == [header, ["a,b", "1.5"], ['q"uote', ""], ["plain", "3"]]


def test_table_latex_escapes() -> None:
    tex = export.table_latex(["algo_name", "x"], [["ppo_lag", 0.5]], caption="50% & more")
    assert r"ppo\_lag & 0.5 \\" in tex
    assert r"\caption{50\% \& more}" in tex
    assert tex.count(r"\begin{tabular}{lr}") == 1


@pytest.mark.parametrize("window", [1, 4])
def test_training_curves_keep_nan_iterates(window: int) -> None:
    r = np.array([[1.0, np.nan, 3.0]])
    cur = curves.training_curves(_im(r[None, None, None]), window=window)
    expect = naive_moving_average(r, window)[0]
    np.testing.assert_allclose(cur["R_mean"].values.ravel(), expect)
