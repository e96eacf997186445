"""Round trips of `saferl import`: the same episodes recorded with `cube.Recorder` give the same V, D_norm+,
R, C, tiers and CDFs as the imported ones."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from cube import Recorder, stats

Episodes = dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]
"""(mode, iterate) -> (rewards, costs) of one run."""


def record(path: Path, episodes: Episodes, *, algo: str, task: str, bound: float, seed: int) -> Path:
    """The episodes of one run written through `cube.Recorder` (iterates in order, modes as given)."""
    with Recorder(path, algo=algo, task=task, bound=bound, seed=seed) as rec:
        for (mode, j), (rewards, costs) in sorted(episodes.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            if mode == "train":
                rec.train_episodes(j, rewards, costs)
            else:
                rec.eval_episodes(j, mode, rewards, costs)
    return path


def stored_episodes(path: Path, mode: str = "train") -> Episodes:
    """Every (mode, iterate) cell of the (single-run) cube at `path` holding episodes: (rewards, costs)."""
    from cube import open_cube

    ds = open_cube(path).squeeze(["algo", "task", "bound", "seed"]).sel(mode=mode).compute()
    out: Episodes = {}
    for j in range(ds.sizes["iterate"]):
        costs = ds.cost.values[j]
        keep = ~np.isnan(costs)
        if keep.any():
            out[(mode, j)] = (ds.reward.values[j][keep], costs[keep])
    return out


def _same(a: xr.Dataset, b: xr.Dataset, what: str) -> None:
    for name in a.data_vars:
        x, y = np.asarray(a[name].values), np.asarray(b[name].values)
        if x.dtype.kind in "fc":
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-9, equal_nan=True, err_msg=f"{what} {name}")
        else:
            np.testing.assert_array_equal(x, y, err_msg=f"{what} {name}")


def assert_same_metrics(imported: Path, recorded: Path, settings: tuple[str, ...] = ("train",)) -> None:
    """V, D_norm+, R, C per run, the condition table (tiers) and the aggregate CDFs agree."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.StatsWarning)  # one seed per condition: stds and bands are NaN
        _assert_same(imported, recorded, settings)


def _assert_same(imported: Path, recorded: Path, settings: tuple[str, ...]) -> None:
    a, b = stats.load_suffstats(imported, cache=False), stats.load_suffstats(recorded, cache=False)
    for setting in settings:
        _same(stats.run_metrics(a, setting), stats.run_metrics(b, setting), f"run metrics {setting}")
    _same(stats.condition_table(a, settings), stats.condition_table(b, settings), "condition table")
    _same(stats.cdf_curves(a, settings, boot=20), stats.cdf_curves(b, settings, boot=20), "CDFs")
    tiers = stats.condition_table(a, settings)["tier"].values
    assert (tiers >= 0).all(), "every condition has a tier"
