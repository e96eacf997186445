"""A vmapped group of 4 toy runs (different seeds and bounds) equals the same runs trained one by one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")

from cube import RunKey, open_cube, read_manifests  # noqa: E402
from train.config import TrainConfig  # noqa: E402
from train.record import prepare_store  # noqa: E402
from train.runner import Runner  # noqa: E402
from train.sweep import make_env  # noqa: E402

CFG = TrainConfig(total_env_steps=4 * 8 * 20, episode_length=20, num_envs=8, unroll_length=4, batch_size=8,
                  num_minibatches=2, num_epochs=2, policy_hidden=(8,), value_hidden=(8,), cost_value_hidden=(8,),
                  eval_episodes=5, eval_every=2, learning_rate=3e-3)
KEYS = [RunKey("ppo_lag", "toy", b, s) for b, s in ((4.0, 0), (4.0, 1), (8.0, 0), (12.0, 3))]


def _store(path: Path) -> Path:
    prepare_store(path, CFG, ["ppo_lag"], ["toy"], [4.0, 8.0, 12.0], [0, 1, 3])
    return path


def test_vmapped_group_equals_runs_one_by_one(tmp_path: Path) -> None:
    alone, group = _store(tmp_path / "alone.zarr"), _store(tmp_path / "group.zarr")
    runner = Runner(alone, CFG, "toy", make_env)
    for k in KEYS:
        assert runner.run(k.algo, k.bound, k.seed).status == "complete"
    results = Runner(group, CFG, "toy", make_env).run_group(KEYS)
    assert [r.status for r in results] == ["complete"] * 4
    a, g = open_cube(alone).load(), open_cube(group).load()
    sel = {"bound": [4.0, 8.0, 12.0], "seed": [0, 1, 3]}
    for var in ("reward", "cost", "env_steps", "multiplier", "policy_loss", "value_loss", "approx_kl"):
        np.testing.assert_allclose(g[var].sel(sel).values, a[var].sel(sel).values, rtol=2e-4, atol=1e-5,
                                   err_msg=var)
    # the 4 runs really differ from each other (own RNG stream and bound), and untouched runs stay empty
    train_cost = g["cost"].sel(mode="train")
    per_run = [train_cost.sel(bound=k.bound, seed=k.seed).values for k in KEYS]
    assert all(not np.allclose(per_run[0], x, equal_nan=True) for x in per_run[1:])
    assert np.isnan(train_cost.sel(bound=12.0, seed=0).values).all()
    rows = {(r["bound"], r["seed"]): r for r in read_manifests(group) if r["status"] == "complete"}
    assert len(rows) == 4 and all(r["group_size"] == 4 for r in rows.values())
    # a second call skips the complete runs
    assert [r.status for r in Runner(group, CFG, "toy", make_env).run_group(KEYS)] == ["skipped"] * 4


def test_parallel_runs_memory_check(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from cube.cli import main
    from cube.errors import CubeError
    from train.memory import parallel_runs, run_bytes

    per_run = run_bytes(CFG, "toy")
    assert per_run > CFG.num_envs * 4 * 4  # at least the observations of one batch
    budget = (10 * per_run + 1, "test budget")
    assert parallel_runs(CFG, "toy", None, 4, budget) == 4 and parallel_runs(CFG, "toy", None, 64, budget) == 10
    assert parallel_runs(CFG, "toy", 10, 64, budget) == 10
    with pytest.raises(CubeError, match="use --parallel-runs 10 or less"):
        parallel_runs(CFG, "toy", 11, 64, budget)
    monkeypatch.setenv("SAFERL_ENABLE_TOY", "1")
    monkeypatch.setenv("SAFERL_JAX_CACHE", "")
    rc = main(["train", "--algos", "ppo", "--tasks", "toy", "--bounds", "4", "--seeds", "0-3", "--iterates", "2",
               "--parallel-runs", str(10**12), "--out", str(tmp_path / "c.zarr")])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "--parallel-runs 1000000000000 needs about" in lines[0], err
    assert "or less" in lines[0] and not (tmp_path / "c.zarr").exists()
