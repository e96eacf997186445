"""Issue 26 item 4: SafeRLEval labels taken from file names only (no label columns; two-digit seeds and a
fractional bound), which no test exercised before: a broken file-name pattern passed every test."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cube import open_cube, read_manifests
from cube.cli import main

pytestmark = pytest.mark.faults


@pytest.mark.parametrize(("name", "labels"), [
    ("safe_goal_point_Level_1_ppo_lag_bound25_seed12_20261126-101010", ("ppo_lag", "goal", 25.0, 12)),
    ("safe_circle_point_Level_2_focops_bound12.5_seed7_20261126-1", ("focops", "circle", 12.5, 7)),
    ("safe_push_point_Level_1_p3o_bound50_seed103_t", ("p3o", "push", 50.0, 103)),
])
def test_saferl_eval_labels_from_the_file_name(tmp_path: Path, name: str, labels: tuple) -> None:
    src = tmp_path / "src"
    src.mkdir()
    row = {"train_reward": 1.0, "train_cost": 2.0, "test_episode_costs": json.dumps([1.0, 3.0]),
           "det_test_episode_costs": json.dumps([2.0])}  # no env, algo, bound, seed or level column
    pd.DataFrame([row]).to_csv(src / f"{name}_summary.csv", index=False)
    out = tmp_path / "o.zarr"
    assert main(["import", "saferl-eval", str(src), "--out", str(out)]) == 0
    (run,) = read_manifests(out)
    assert (run["algo"], run["task"], run["bound"], run["seed"]) == labels
    algo, task, bound, seed = labels
    costs = open_cube(out)["cost"].sel(algo=algo, task=task, bound=bound, seed=seed)
    np.testing.assert_array_equal(np.sort(costs.sel(mode="expl").values[np.isfinite(costs.sel(mode="expl").values)]),
                                  [1.0, 3.0])
