"""`saferl import sb3-monitor|wandb`: files written by Stable-Baselines3's Monitor and the wandb SDK (committed
under tests/fixtures/ with the scripts that wrote them and the writers' versions), round-tripped episode for
episode against `cube.Recorder`; bad files are one line and leave a cube as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cube import open_cube, read_manifests
from cube.cli import main
from tests.import_roundtrip import assert_same_metrics, record, stored_episodes

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SB3_RUN = FIXTURES / "sb3" / "ppo" / "CostlyWalk-v0_1"
WANDB = FIXTURES / "wandb"


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def _tree(cube: Path) -> dict:
    return {p.relative_to(cube): p.read_bytes() for p in sorted(cube.rglob("*")) if p.is_file()}


def _by_iterate(episodes: list[dict], step: str, per_iterate: int) -> dict:
    """The truth's episodes grouped as the importers do: env steps 1..N are iterate 0."""
    out: dict = {}
    for e in episodes:
        r, c = out.setdefault(("train", (e[step] - 1) // per_iterate), ([], []))
        r.append(e["reward"])
        c.append(e["cost"])
    return {k: (np.array(r, np.float64), np.array(c, np.float64)) for k, (r, c) in out.items()}


def _assert_episodes(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for cell, (r, c) in expected.items():
        np.testing.assert_allclose(got[cell][0], r, rtol=1e-6)
        np.testing.assert_array_equal(got[cell][1], c)


# ------------------------------------------------------------------------------------ SB3 Monitor
SB3_ARGS = ["--cost-column", "episode_cost", "--cost-kind", "episode", "--steps-per-iterate", "100", "--seed", "3",
            "--bound", "5"]


def test_sb3_monitor_files_merge_by_time_and_round_trip(tmp_path: Path, capsys) -> None:
    truth = json.loads((FIXTURES / "sb3" / "truth.json").read_text())
    out = tmp_path / "sb3.zarr"
    assert main(["import", "sb3-monitor", str(SB3_RUN), "--out", str(out), *SB3_ARGS]) == 0
    assert "conventions: cost undiscounted;" in capsys.readouterr().out
    expected = _by_iterate(truth["episodes"], "num_timesteps", 100)
    _assert_episodes(stored_episodes(out), expected)
    row = read_manifests(out)[0]
    assert (row["algo"], row["task"], row["seed"], row["envs"]) == ("ppo", "CostlyWalk-v0", 3, 2)  # zoo layout
    assert row["env_steps"] == max(e["num_timesteps"] for e in truth["episodes"])
    recorded = record(tmp_path / "rec.zarr", expected, algo="ppo", task="CostlyWalk-v0", bound=5.0, seed=3)
    assert_same_metrics(out, recorded)


@pytest.mark.parametrize(("args", "message"), [
    (["--cost-column", "cost", "--cost-kind", "last-step"], "holds each episode's last-step cost"),
    (["--cost-column", "cost"], "say what it holds with --cost-kind episode"),
    ([], "has a column 'episode_cost': name it with --cost-column episode_cost"),
    (["--cost-column", "c", "--cost-kind", "episode"], "has no column 'c'"),
])
def test_sb3_costs_only_from_a_named_episode_column(tmp_path: Path, capsys, args: list[str], message: str) -> None:
    out = tmp_path / "sb3.zarr"
    assert main(["import", "sb3-monitor", str(SB3_RUN), "--out", str(out), "--steps-per-iterate", "100", "--seed",
                 "3", "--bound", "5", *args]) == 2
    line = _err(capsys)
    assert message in line and not out.exists()
    if "last-step" in args:  # why (no V) and how to record the episode's sum instead
        assert "cannot give V" in line and "cube.io.gym.RecordEpisodes" in line


def _empty(folder: Path) -> None:
    (folder / "0.monitor.csv").write_text("")


def _no_header(folder: Path) -> None:
    path = folder / "1.monitor.csv"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[1:]))


@pytest.mark.parametrize(("damage", "message"), [
    (_empty, "0.monitor.csv is empty: a Monitor file starts with"),
    (_no_header, "1.monitor.csv does not start with SB3 Monitor's"),
])
def test_bad_monitor_files_are_one_line_and_leave_the_cube(tmp_path: Path, capsys, damage, message: str) -> None:
    cube = tmp_path / "mine.zarr"
    assert main(["import", "sb3-monitor", str(SB3_RUN), "--out", str(cube), *SB3_ARGS]) == 0
    before = _tree(cube)
    folder = tmp_path / "ppo" / "CostlyWalk-v0_1"
    shutil.copytree(SB3_RUN, folder)
    damage(folder)
    capsys.readouterr()
    assert main(["import", "sb3-monitor", str(folder), "--into", str(cube), *SB3_ARGS[:-4], "--seed", "4",
                 "--bound", "5"]) == 2
    assert message in _err(capsys)
    assert _tree(cube) == before


# ----------------------------------------------------------------------------------------- W&B
def test_wandb_history_export_round_trips_with_its_config(tmp_path: Path, capsys) -> None:
    truth = json.loads((WANDB / "truth.json").read_text())
    out = tmp_path / "wb.zarr"
    assert main(["import", "wandb", str(WANDB / "run-fx01-history.csv"), "--out", str(out),
                 "--steps-per-iterate", "512"]) == 0
    assert "history complete" in capsys.readouterr().out
    expected = _by_iterate(truth["episodes"], "global_step", 512)
    _assert_episodes(stored_episodes(out), expected)
    row = read_manifests(out)[0]
    assert (row["algo"], row["task"], row["seed"], row["bound"]) == ("ppo_lag", "SafetyPointGoal1-v0", 2, 25.0)
    assert row["conventions"]["history"] == {"value": "complete", "from": "every _step gap is 1"}
    recorded = record(tmp_path / "rec.zarr", expected, algo="ppo_lag", task="SafetyPointGoal1-v0", bound=25.0, seed=2)
    assert_same_metrics(out, recorded)


def test_wandb_parquet_export_reads_the_same(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    folder = tmp_path / "export"
    folder.mkdir()
    pd.read_csv(WANDB / "run-fx01-history.csv", index_col=0).to_parquet(folder / "run-fx01-history.parquet")
    shutil.copy(WANDB / "config.yaml", folder / "config.yaml")
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    assert main(["import", "wandb", str(folder / "run-fx01-history.parquet"), "--out", str(a),
                 "--steps-per-iterate", "512"]) == 0
    assert main(["import", "wandb", str(WANDB / "run-fx01-history.csv"), "--out", str(b),
                 "--steps-per-iterate", "512"]) == 0
    _assert_episodes(stored_episodes(a), stored_episodes(b))


def test_a_sampled_wandb_history_is_detected_and_said(tmp_path: Path, capsys) -> None:
    out = tmp_path / "wb.zarr"
    assert main(["import", "wandb", str(WANDB / "sampled"), "--out", str(out), "--steps-per-iterate", "512"]) == 0
    printed = capsys.readouterr().out
    assert "the history looks sampled (its _step gaps vary" in printed and "run.scan_history()" in printed
    assert "history sampled" in printed
    assert read_manifests(out)[0]["conventions"]["history"]["value"] == "sampled"
    out2 = tmp_path / "wb2.zarr"
    assert main(["import", "wandb", str(WANDB / "sampled"), "--out", str(out2), "--steps-per-iterate", "512",
                 "--complete"]) == 0
    assert read_manifests(out2)[0]["conventions"]["history"] == {"value": "complete", "from": "--complete"}


def test_a_wandb_export_without_step_is_one_line_and_leaves_the_cube(tmp_path: Path, capsys) -> None:
    cube = tmp_path / "mine.zarr"
    assert main(["import", "wandb", str(WANDB / "run-fx01-history.csv"), "--out", str(cube),
                 "--steps-per-iterate", "512"]) == 0
    before = _tree(cube)
    folder = tmp_path / "export"
    folder.mkdir()
    pd.read_csv(WANDB / "run-fx01-history.csv", index_col=0).drop(columns=["_step"]).to_csv(folder / "h.csv")
    shutil.copy(WANDB / "config.yaml", folder / "config.yaml")
    capsys.readouterr()
    assert main(["import", "wandb", str(folder / "h.csv"), "--into", str(cube), "--steps-per-iterate", "512",
                 "--seed", "5"]) == 2
    assert "has no _step column: a W&B history export" in _err(capsys)
    assert _tree(cube) == before


def test_wandb_means_rows_are_iterates(tmp_path: Path) -> None:
    """OmniSafe's wandb logging: one row per epoch of Metrics/EpCost (a sliding window of 50 episodes)."""
    rows = pd.DataFrame({"_step": [0, 1, 2], "_runtime": [1.0, 2.0, 3.0], "Metrics/EpCost": [40.0, 30.0, 20.0],
                         "Metrics/EpRet": [1.0, 2.0, 3.0], "TotalEnvSteps": [2000, 4000, 6000]})
    rows.to_csv(tmp_path / "omni.csv", index=False)
    (tmp_path / "config.json").write_text(json.dumps({"algo": "PPOLag", "env_id": "Goal", "seed": 0,
                                                      "lagrange_cfgs": {"cost_limit": 25.0}}))
    out = tmp_path / "wb.zarr"
    assert main(["import", "wandb", str(tmp_path / "omni.csv"), "--out", str(out)]) == 0
    ds = open_cube(out).squeeze(["algo", "task", "bound", "seed"])
    assert ds.cost.sel(mode="train", episode=0).values.tolist() == [40.0, 30.0, 20.0]
    assert bool(ds.means_only.sel(mode="train")) and ds.env_steps.values.tolist() == [2000, 4000, 6000]
    assert read_manifests(out)[0]["conventions"]["window"]["value"] == "sliding, 50 episodes"
