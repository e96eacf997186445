"""The synthetic demo cube: valid, labeled synthetic, deterministic, and shaped like the paper says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from cube import open_cube, validate
from cube.cli import main
from cube.io.demo import make_demo_cube


def test_small_demo_is_valid_and_synthetic(small_demo_cube: Path) -> None:
    assert validate(small_demo_cube) == []
    ds = xr.open_zarr(small_demo_cube, consolidated=False)
    assert ds.attrs["synthetic"] is True and "SYNTHETIC" in ds.attrs["description"]
    assert set(ds.algo.values) == {"ppo", "ppo_lag", "p3o", "focops"}
    assert (ds.run_status.values == 2).all()


def test_demo_counts(small_demo_cube: Path) -> None:
    ds = open_cube(small_demo_cube)
    counts = ds.cost.notnull().sum("episode").compute()
    assert (counts.sel(mode="train") == 16).all()
    final = counts.isel(iterate=-1)
    assert (final.sel(mode="expl") == 10).all() and (final.sel(mode="greedy") == 10).all()
    assert (counts.sel(mode=["expl", "greedy"]).isel(iterate=slice(None, -1)) == 0).all()
    assert np.isnan(ds.multiplier.sel(algo="ppo")).all()
    assert ds.multiplier.sel(algo="ppo_lag").notnull().all()


def test_demo_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    kwargs = {"tasks": ("circle",), "bounds": (15.0,), "n_seeds": 2, "n_iterates": 3, "n_train_episodes": 8,
              "n_eval_episodes": 4}
    a = open_cube(make_demo_cube(tmp_path / "a.zarr", seed=3, **kwargs)).cost.compute()
    b = open_cube(make_demo_cube(tmp_path / "b.zarr", seed=3, **kwargs)).cost.compute()
    c = open_cube(make_demo_cube(tmp_path / "c.zarr", seed=4, **kwargs)).cost.compute()
    xr.testing.assert_identical(a, b)
    assert not a.equals(c)


def test_demo_behaves_like_the_paper(tmp_path: Path) -> None:
    """PPO far above d; Lagrangian methods near d with many violations; greedy violates more than expl."""
    path = make_demo_cube(tmp_path / "d.zarr", n_seeds=4, n_iterates=30, n_train_episodes=64, n_eval_episodes=100)
    ds = open_cube(path)
    d = ds.bound
    train_ratio = (ds.cost.sel(mode="train").mean(["seed", "iterate", "episode"]) / d).compute()
    assert (train_ratio.sel(algo="ppo") > 2.0).all()
    lag = train_ratio.sel(algo="ppo_lag").drop_sel(task=[]).median()
    assert 0.7 < float(lag) < 1.6
    final = ds.cost.isel(iterate=-1)
    viol = (final > d).where(final.notnull()).mean(["episode", "seed"]).compute()
    safe = viol.sel(algo=["ppo_lag", "p3o", "focops"])
    assert float((safe.sel(mode="greedy") > safe.sel(mode="expl")).mean()) > 0.8
    assert float(viol.sel(algo="ppo_lag", mode="expl").mean()) > 0.1  # many small violations
    reward = ds.reward.sel(mode="train").mean(["seed", "iterate", "episode"]).compute()
    collapsed = float(reward.sel(algo="p3o", task="circle", bound=15.0))
    assert collapsed < 0.1 * float(reward.sel(algo="p3o", task="circle", bound=25.0))


def test_cli_demo_writes_a_valid_cube(tmp_path: Path) -> None:
    out = tmp_path / "cli.zarr"
    assert main(["demo", str(out), "--seeds", "2", "--iterates", "3", "--episodes", "8", "--eval-episodes", "5"]) == 0
    assert validate(out) == []
    assert main(["demo", str(out), "--seeds", "2"]) == 2  # exists, no --force
    assert main(["demo", str(out), "--seeds", "2", "--iterates", "2", "--force"]) == 0
    assert open_cube(out).sizes["iterate"] == 2
