"""`saferl import dsrl|fsrl|rllib`: DSRL's HDF5 datasets (written with h5py in the test), FSRL's progress.txt
(written as its BaseLogger writes it) and RLlib's result.json (old stack de-overlapped, new stack means)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cube import open_cube, read_manifests
from cube.cli import main
from tests.import_roundtrip import assert_same_metrics, record, stored_episodes

h5py = pytest.importorskip("h5py")


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


# ------------------------------------------------------------------------------------------ DSRL
def _dsrl_file(path: Path, lengths: list[int], tail: int = 0, seed: int = 0) -> tuple[list[float], list[float]]:
    """A dataset shaped as DSRL's (`dsrl/offline_env.py` keys), episodes of `lengths` steps ending by a
    terminal or a timeout, then `tail` steps of an unfinished episode. Returns each episode's sums."""
    rng = np.random.default_rng(seed)
    n = sum(lengths) + tail
    rewards = rng.normal(0.5, 1.0, n).astype(np.float32)
    costs = (rng.random(n) < 0.1).astype(np.float32)
    terminals, timeouts = np.zeros(n, bool), np.zeros(n, bool)
    sums_r, sums_c, at = [], [], 0
    for k, length in enumerate(lengths):
        end = at + length - 1
        (terminals if k % 3 == 0 else timeouts)[end] = True
        sums_r.append(float(sum(float(x) for x in rewards[at:end + 1])))
        sums_c.append(float(sum(float(x) for x in costs[at:end + 1])))
        at = end + 1
    with h5py.File(path, "w") as f:
        f["observations"] = rng.normal(size=(n, 8)).astype(np.float32)
        f["next_observations"] = rng.normal(size=(n, 8)).astype(np.float32)
        f["actions"] = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
        for name, values in (("rewards", rewards), ("costs", costs), ("terminals", terminals), ("timeouts", timeouts)):
            f[name] = values
    return sums_r, sums_c


def test_dsrl_episodes_are_exact_sums_and_round_trip(tmp_path: Path, capsys, monkeypatch) -> None:
    from cube.io import dsrl

    monkeypatch.setattr(dsrl, "CHUNK", 37)  # episodes spanning the chunks read
    lengths = [50, 80, 1, 120, 33, 200, 64]
    sums_r, sums_c = _dsrl_file(tmp_path / "OfflineCarCircle-v0.hdf5", lengths, tail=17)
    out = tmp_path / "dsrl.zarr"
    assert main(["import", "dsrl", str(tmp_path / "OfflineCarCircle-v0.hdf5"), "--out", str(out), "--bound", "10"]) == 0
    printed = capsys.readouterr().out
    assert "its last 17 step(s) end no episode" in printed
    conventions = "conventions: cost undiscounted; window none; evaluation none; normalization raw; history complete"
    assert conventions in printed
    got = stored_episodes(out)
    np.testing.assert_allclose(got[("train", 0)][1], sums_c, rtol=1e-6)
    np.testing.assert_allclose(got[("train", 0)][0], sums_r, rtol=1e-5)
    row = read_manifests(out)[0]
    assert (row["algo"], row["task"], row["seed"], row["episodes"]) == ("dataset", "OfflineCarCircle-v0", 0, 7)
    episodes = {("train", 0): (got[("train", 0)][0].astype(np.float64), got[("train", 0)][1].astype(np.float64))}
    recorded = record(tmp_path / "rec.zarr", episodes, algo="dataset", task="OfflineCarCircle-v0", bound=10.0, seed=0)
    assert_same_metrics(out, recorded)


def test_dsrl_bad_files(tmp_path: Path, capsys) -> None:
    with h5py.File(tmp_path / "x.hdf5", "w") as f:
        f["rewards"] = np.zeros(3)
    assert main(["import", "dsrl", str(tmp_path / "x.hdf5"), "--out", str(tmp_path / "o.zarr"), "--bound", "1"]) == 2
    assert "lacks costs, terminals, timeouts" in _err(capsys)
    (tmp_path / "y.hdf5").write_bytes(b"not hdf5")
    assert main(["import", "dsrl", str(tmp_path / "y.hdf5"), "--out", str(tmp_path / "o.zarr"), "--bound", "1"]) == 2
    assert "cannot read" in _err(capsys) and not (tmp_path / "o.zarr").exists()


# ------------------------------------------------------------------------------------------ FSRL
def _fsrl_run(folder: Path) -> None:
    """progress.txt as FSRL's BaseLogger.write writes it ('Steps' + the keys in store order, tab-separated,
    `map(str, vals)`), and config.yaml as save_config dumps it."""
    folder.mkdir(parents=True)
    keys = ["update/episode", "update/cum_cost", "train/reward", "train/cost", "train/length", "loss/actor",
            "test/reward", "test/cost", "test/length", "update/env_step"]
    rows = [[10000, 20, 200.0, -3.5, 31.25, 500.0, 0.1, 12.0, 10.5, 1000.0, 10000],
            [20000, 40, 410.0, 1.5, 22.75, 500.0, 0.05, 15.0, 4.0, 1000.0, 20000]]
    lines = ["\t".join(["Steps", *keys])] + ["\t".join(map(str, r)) for r in rows]
    (folder / "progress.txt").write_text("\n".join(lines) + "\n")
    (folder / "config.yaml").write_text(  # yaml.dump of FSRL's TrainCfg: tuples get a python tag
        "task: SafetyCarCircle-v0\ncost_limit: 10\nseed: 4\nprefix: ppol\nhidden_sizes: !!python/tuple\n- 128\n- 128\n")


def test_fsrl_epoch_means_train_and_greedy_test(tmp_path: Path) -> None:
    _fsrl_run(tmp_path / "logs" / "SafetyCarCircle-v0-cost-10" / "ppol_seed4")
    out = tmp_path / "fsrl.zarr"
    assert main(["import", "fsrl", str(tmp_path / "logs"), "--out", str(out)]) == 0
    ds = open_cube(out).squeeze(["algo", "task", "bound", "seed"])
    assert ds.cost.sel(mode="train", episode=0).values.tolist() == [31.25, 22.75]
    assert ds.cost.sel(mode="greedy", episode=0).values.tolist() == [10.5, 4.0]
    assert ds.env_steps.values.tolist() == [10000, 20000]
    assert ds.means_only.sel(mode="train") and ds.means_only.sel(mode="greedy")
    row = read_manifests(out)[0]
    assert (row["algo"], row["task"], row["bound"], row["seed"]) == ("ppol", "SafetyCarCircle-v0", 10.0, 4)
    assert row["conventions"]["evaluation"]["value"] == "deterministic"
    assert row["conventions"]["window"]["value"] == "epoch"
    out2 = tmp_path / "fsrl2.zarr"
    assert main(["import", "fsrl", str(tmp_path / "logs"), "--out", str(out2), "--eval", "stochastic"]) == 0
    assert open_cube(out2).cost.sel(mode="expl", episode=0).squeeze().values.tolist() == [10.5, 4.0]
    assert read_manifests(out2)[0]["conventions"]["evaluation"] == {"value": "stochastic", "from": "flag --eval"}


# ----------------------------------------------------------------------------------------- RLlib
def _old_stack_results(folder: Path, per_iter: list[int], window: int = 5) -> list[tuple[float, float]]:
    """result.json of RLlib's old API stack as Tune's JsonLoggerCallback writes it (one json.dumps per line):
    hist_stats lists over the last `window` episodes (metrics_num_episodes_for_smoothing), episodes_this_iter
    the new ones; a callback's `episode.hist_data["episode_cost"]`. Returns every episode (reward, cost)."""
    folder.mkdir(parents=True)
    (folder / "params.json").write_text(json.dumps({"env": "SafetyPointGoal1-v0", "seed": 7,
                                                    "metrics_num_episodes_for_smoothing": window}))
    history: list[tuple[float, float]] = []
    lines = []
    for i, new in enumerate(per_iter):
        history += [(float(10 * i + k), float((7 * i + 3 * k) % 11)) for k in range(new)]
        last = history[-window:]
        lines.append(json.dumps({
            "training_iteration": i + 1, "timesteps_total": 4000 * (i + 1), "episodes_this_iter": new,
            "episode_reward_mean": float(np.mean([r for r, _ in last])) if last else None,
            "hist_stats": {"episode_reward": [r for r, _ in last], "episode_cost": [c for _, c in last],
                           "episode_lengths": [1000] * len(last)},
            "info": {"learner": {"default_policy": {"learner_stats": {"kl": 0.01}}}}}))
    (folder / "result.json").write_text("\n".join(lines) + "\n")
    return history


def test_rllib_old_stack_hist_stats_are_de_overlapped(tmp_path: Path) -> None:
    folder = tmp_path / "ray_results" / "PPO_2026" / "PPO_SafetyPointGoal1-v0_1a2b3_00000_0_2026-11-27"
    history = _old_stack_results(folder, [3, 0, 4, 2])
    out = tmp_path / "rllib.zarr"
    assert main(["import", "rllib", str(tmp_path / "ray_results"), "--out", str(out), "--bound", "5"]) == 0
    got = stored_episodes(out)
    expected, at = {}, 0
    for j, n in enumerate([3, 0, 4, 2]):
        if n:
            expected[("train", j)] = (np.array([r for r, _ in history[at:at + n]]),
                                      np.array([c for _, c in history[at:at + n]]))
        at += n
    assert got.keys() == expected.keys()
    for cell in expected:
        np.testing.assert_array_equal(got[cell][0], expected[cell][0])
        np.testing.assert_array_equal(got[cell][1], expected[cell][1])
    row = read_manifests(out)[0]
    assert (row["algo"], row["task"], row["seed"]) == ("PPO", "SafetyPointGoal1-v0", 7)
    assert row["conventions"]["history"]["value"] == "complete"
    recorded = record(tmp_path / "rec.zarr", {k: (v[0], v[1]) for k, v in expected.items()}, algo="PPO",
                      task="SafetyPointGoal1-v0", bound=5.0, seed=7)
    assert_same_metrics(out, recorded)


RLLIB = Path(__file__).resolve().parent / "fixtures" / "rllib"


def test_rllib_result_json_written_by_tune_round_trips(tmp_path: Path) -> None:
    """tests/fixtures/rllib: 5 iterations of PPO on the old API stack, written by Tune (make_rllib_fixtures.py)."""
    truth = json.loads((RLLIB / "truth.json").read_text())["episodes"]
    out = tmp_path / "rllib.zarr"
    assert main(["import", "rllib", str(RLLIB), "--out", str(out), "--bound", "8"]) == 0
    expected: dict = {}
    for e in truth:
        r, c = expected.setdefault(("train", e["iteration"] - 1), ([], []))
        r.append(e["reward"])
        c.append(e["cost"])
    expected = {k: (np.array(r), np.array(c)) for k, (r, c) in expected.items()}
    got = stored_episodes(out)
    assert got.keys() == expected.keys()
    for cell, (r, c) in expected.items():
        np.testing.assert_allclose(got[cell][0], r, rtol=1e-6)
        np.testing.assert_array_equal(got[cell][1], c)
    row = read_manifests(out)[0]
    assert (row["algo"], row["task"], row["seed"]) == ("PPO", "CostlyWalk-v0", 7)  # trial folder, params.json
    assert row["env_steps"] == 1500 and row["conventions"]["history"]["value"] == "complete"
    recorded = record(tmp_path / "rec.zarr", expected, algo="PPO", task="CostlyWalk-v0", bound=8.0, seed=7)
    assert_same_metrics(out, recorded)


def test_rllib_episodes_beyond_the_window_are_said_lost(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "PPO_SafetyPointGoal1-v0_00000"
    _old_stack_results(folder, [3, 8], window=5)
    out = tmp_path / "rllib.zarr"
    assert main(["import", "rllib", str(folder), "--out", str(out), "--bound", "5"]) == 0
    assert "3 episode(s) finished in iterations whose new episodes outnumber hist_stats' 5" in capsys.readouterr().out
    assert read_manifests(out)[0]["conventions"]["history"]["value"] == "sampled"
    assert [c.size for c in (v[1] for v in stored_episodes(out).values())] == [3, 5]


def test_rllib_new_stack_is_means_only(tmp_path: Path) -> None:
    folder = tmp_path / "PPO_SafetyPointGoal1-v0_00000"
    folder.mkdir()
    rows = [{"training_iteration": i + 1,
             "env_runners": {"episode_return_mean": 5.0 + i, "episode_cost": 20.0 - i, "num_episodes": 4,
                             "num_env_steps_sampled_lifetime": 4000 * (i + 1)}} for i in range(3)]
    (folder / "result.json").write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "rllib.zarr"
    assert main(["import", "rllib", str(folder), "--out", str(out), "--bound", "5", "--seed", "1", "--task", "goal",
                 "--cost-key", "episode_cost"]) == 0
    ds = open_cube(out).squeeze(["algo", "task", "bound", "seed"])
    assert ds.cost.sel(mode="train", episode=0).values.tolist() == [20.0, 19.0, 18.0]
    assert ds.reward.sel(mode="train", episode=0).values.tolist() == [5.0, 6.0, 7.0]
    assert bool(ds.means_only.sel(mode="train")) and ds.env_steps.values.tolist() == [4000, 8000, 12000]
    assert read_manifests(out)[0]["means"]["train"]["window_episodes"] == 100


def test_rllib_without_any_cost_says_which_keys_exist(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "PPO_x_0"
    folder.mkdir()
    (folder / "result.json").write_text(json.dumps({"episode_reward_mean": 1.0, "episodes_this_iter": 2}) + "\n")
    assert main(["import", "rllib", str(folder), "--out", str(tmp_path / "o.zarr"), "--bound", "5", "--seed", "0",
                 "--task", "t"]) == 2
    assert "no cost 'episode_cost_mean' in its results" in _err(capsys)
