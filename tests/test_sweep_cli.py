"""`saferl train` sweep flags and `saferl status`: parsing and bad input (no jax, nothing compiles)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cube import RunKey, create_store, set_run_manifest
from cube.errors import CubeError
from cube.selection import parse_floats, parse_ints
from train.config import TrainConfig
from train.overrides import config_to_dict, load_toml
from train.sweep import Plan, parse_part


def parse_seeds(words: list[str]) -> list[int]:
    return list(parse_ints(words, "seeds"))


def parse_bounds(words: list[str]) -> list[float]:
    return list(parse_floats(words, "bounds"))


def test_seed_ranges_and_lists() -> None:
    assert parse_seeds(["0-3"]) == [0, 1, 2, 3]
    assert parse_seeds(["0-2,7", "9"]) == [0, 1, 2, 7, 9]
    assert parse_bounds(["15,25", "50"]) == [15.0, 25.0, 50.0]
    for words, match in ((["0-3,2"], "seed 2 given twice"), (["5-3"], "empty"), (["a"], "integers")):
        with pytest.raises(CubeError, match=match):
            parse_seeds(words)
    with pytest.raises(CubeError, match="bound 25 given twice"):
        parse_bounds(["15,25,25.0"])


def test_part_slices_cover_the_grid_once() -> None:
    plan = Plan(TrainConfig(), ("ppo", "p3o"), ("goal", "push"), (15.0, 25.0, 50.0), tuple(range(5)))
    every = plan.grid_keys()
    assert len(every) == 60 and len(set(every)) == 60
    assert every[0] == RunKey("ppo", "goal", 15.0, 0) and every[-1] == RunKey("p3o", "push", 50.0, 4)
    parts = [Plan(**{**plan.__dict__, "part": parse_part(f"{k}/7")}).keys() for k in range(1, 8)]
    assert [k for p in parts for k in p] == every  # contiguous slices, in order, nothing twice
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    with pytest.raises(CubeError, match="selects no run"):
        Plan(**{**plan.__dict__, "part": (1, 100)}).keys()
    for text in ("0/4", "5/4", "x/4", "3"):
        with pytest.raises(CubeError, match="--part"):
            parse_part(text)


def test_cluster_table_is_not_a_config_key(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text('num_envs = 64\nbatch_size = 64\nnum_minibatches = 4\n[cluster]\nexecutor = "slurm"\njobs = 4\n')
    assert load_toml(p).num_envs == 64


def _train(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from cube.cli import main

    rc = main(["train", *args])
    return rc, capsys.readouterr().err


GRID = ["--algos", "ppo,ppo_lag", "--tasks", "goal", "--bounds", "15,25", "--seeds", "0-2"]


@pytest.mark.parametrize("args, match", [
    (["--algos", "ppo", "--tasks", "goal", "--bounds", "15", "--seeds", "0-2", "--seed", "5"], "--seeds given twice"),
    (["--algos", "ppo", "--tasks", "goal", "--bounds", "15", "--bound", "25", "--seeds", "0"], "--bounds given twice"),
    (["--algos", "ppo", "--tasks", "goal", "--bounds", "15,25,15", "--seeds", "0"], "bound 15 given twice"),
    (["--algos", "ppo", "--tasks", "goal", "--bounds", "15", "--seeds", "0-4,3"], "seed 3 given twice"),
    ([*GRID, "--part", "1/13"], "selects no run"),
    (["--algos", "ppo", "--tasks", "toy", "--bounds", "15", "--seeds", "0"], "unknown task 'toy'"),
    ([*GRID, "--parallel-runs", "0"], "--parallel-runs must be >= 1"),
    ([*GRID, "--executor", "dask"], "needs a scheduler address"),
])
def test_sweep_bad_input_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  args: list[str], match: str) -> None:
    monkeypatch.delenv("SAFERL_ENABLE_TOY", raising=False)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    rc, err = _train(capsys, "--out", str(tmp_path / "c.zarr"), *args)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and match in lines[0], err
    assert not (tmp_path / "c.zarr").exists()


def test_store_of_another_config_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "c.zarr"
    from train.record import iterate_vars, n_episode_slots

    cfg = TrainConfig()
    create_store(out, algos=["ppo", "ppo_lag"], tasks=["goal"], bounds=[15.0, 25.0], seeds=[0, 1, 2],
                 n_iterates=cfg.n_iterates, n_episodes=n_episode_slots(cfg), iterate_vars=iterate_vars())
    other = {**config_to_dict(cfg), "learning_rate": 1e-3}
    set_run_manifest(out, RunKey("ppo", "goal", 25.0, 1), status="partial", manifest={"config": other})
    rc, err = _train(capsys, "--out", str(out), *GRID)
    assert rc == 2 and "trained with another config (differs in learning_rate)" in err, err


def test_status_lists_runs_without_jax(tmp_path: Path) -> None:
    out = tmp_path / "c.zarr"
    create_store(out, algos=["ppo"], tasks=["goal"], bounds=[15.0], seeds=[0, 1, 2], n_iterates=3, n_episodes=2)
    cfg = {"total_env_steps": 3 * 8 * 20, "num_envs": 8, "episode_length": 20}
    set_run_manifest(out, RunKey("ppo", "goal", 15.0, 0), status="complete",
                     manifest={"config": cfg, "iterates_done": 3, "env_steps": 480.0, "host": "node7",
                               "slurm_job_id": "4242", "retries": 1, "start_time": "2026-01-01T00:00:00+00:00",
                               "end_time": "2026-01-01T01:02:03+00:00"})
    set_run_manifest(out, RunKey("ppo", "goal", 15.0, 1), status="partial",
                     manifest={"config": cfg, "iterates_done": 1, "env_steps": 160.0, "host": "node8"})
    code = ("import sys; from cube.cli import main; rc = main(['status', sys.argv[1], '--all', '--wide']); "
            "assert 'jax' not in sys.modules, 'jax imported'; sys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "3 runs: 1 complete, 1 partial, 1 pending" in res.stdout
    row = next(ln for ln in res.stdout.splitlines() if "node7" in ln)
    for cell in ("complete", "3/3", "480", "1:02:03", "4242", " 1 ", "legacy"):
        assert cell in row, (cell, row)
    assert "1/3" in next(ln for ln in res.stdout.splitlines() if "node8" in ln)


def test_status_tells_stopped_runs_from_running_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A partial run whose claim holder is gone is 'stopped' and its wall time ends at its last write;
    one claimed by a live process is 'running'."""
    import json
    import multiprocessing as mp
    import os
    import socket

    from cube import CubeWriter
    from cube.cli import main
    from cube.store.fs import side_folder
    from cube.store.runstatus import read_run_status
    from train.claims import claim_path

    out = tmp_path / "c.zarr"
    create_store(out, algos=["ppo"], tasks=["goal"], bounds=[15.0], seeds=[0, 1], n_iterates=3, n_episodes=2)
    dead = mp.get_context("spawn").Process(target=int)
    dead.start()
    dead.join()
    for seed, pid in ((0, dead.pid), (1, os.getpid())):
        key = RunKey("ppo", "goal", 15.0, seed)
        set_run_manifest(out, key, status="partial", manifest={"start_time": "2026-01-01T00:00:00+00:00"})
        CubeWriter(out).write_episodes(key, "train", 0, [1.0], [1.0])
        path = claim_path(out, key)
        side_folder(out / "_claims")  # as try_claim makes it: a zarr group, so opening the store never warns
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"host": socket.gethostname(), "pid": pid}))
    last = (out / "write_seq" / "c" / "0" / "0" / "0" / "0").stat().st_mtime
    os.utime(out / "write_seq" / "c" / "0" / "0" / "0" / "0", (last, 1767229200.0))  # 2026-01-01T01:00:00Z
    rows = {r.key.seed: r for r in read_run_status(out)}
    assert rows[0].status == "stopped" and rows[0].wall_s == 3600.0  # its claim's process is gone
    assert rows[1].status == "running" and rows[1].wall_s > 3600 * 24
    assert main(["status", str(out), "--wide"]) == 0
    text = capsys.readouterr().out
    assert "1 partial run(s) stopped (no live process)" in text and "partial (stopped)" in text
