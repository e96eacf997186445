"""Integration: the paper's four algorithms, PPO-PID and CRPO for a few iterates on CRAX Safe Circle Point (tiny
sizes), the cube they write, and `saferl evaluate` restoring episodes from a stored checkpoint (PPO-Saute, which
needs a program of its own, trains on the toy task in tests/test_train_beyond.py and on circle in
bench/learning_parity.py).

One module-scoped training grid shares a single compile of the training loop and of the evaluation
rollout (circle compiles fastest). A persistent compilation cache in a temporary folder lets
`saferl evaluate` reuse the evaluation compile.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.crax, pytest.mark.slow]
pytest.importorskip("crax")
jax = pytest.importorskip("jax")

from cube import open_cube, read_manifests, write_episodes  # noqa: E402
from cube.schema import RunKey  # noqa: E402
from train.config import TrainConfig  # noqa: E402
from train.record import prepare_store  # noqa: E402
from train.registry import PAPER_ALGOS  # noqa: E402
from train.runner import Runner  # noqa: E402
from train.sweep import make_env  # noqa: E402

CFG = TrainConfig(total_env_steps=3 * 8 * 32, episode_length=32, num_envs=8, unroll_length=4, batch_size=8,
                  num_minibatches=2, num_epochs=1, policy_hidden=(16, 16), value_hidden=(16, 16),
                  cost_value_hidden=(16, 16), eval_episodes=4, eval_every=2)
BOUND = 1.0
ALGOS = (*PAPER_ALGOS, "ppo_pid", "crpo")
"""One compile for PPO, one for the five constrained ones (a `lax.switch` over the algorithm)."""


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    cache = tmp_path_factory.mktemp("jaxcache")
    jax.config.update("jax_compilation_cache_dir", str(cache))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    out = tmp_path_factory.mktemp("crax") / "circle.zarr"
    prepare_store(out, CFG, ALGOS, ["circle"], [BOUND], [0])
    runner = Runner(out, CFG, "circle", make_env)
    for algo in ALGOS:
        runner.run(algo, BOUND, 0)
    return out, cache


def test_train_episodes_every_iterate(trained: tuple[Path, Path]) -> None:
    ds = open_cube(trained[0])
    assert ds.sizes["iterate"] == 3 and ds.sizes["episode"] == 8
    cost = ds["cost"].sel(mode="train").load()
    assert (cost.notnull().sum("episode") == CFG.num_envs).all()  # each env's episode, each iterate
    assert float(cost.min()) >= 0 and np.isfinite(ds["reward"].sel(mode="train").load()).all()
    # episodes are cut at T: a circle step costs at most 0.1 outside the boundary
    assert float(cost.max()) <= 0.1 * CFG.episode_length + 1e-4
    steps = ds["env_steps"].load()
    assert (steps.isel(iterate=-1) >= 3 * CFG.num_envs * CFG.episode_length).all()


def test_expl_and_greedy_present_and_paired(trained: tuple[Path, Path]) -> None:
    ds = open_cube(trained[0])
    for mode in ("expl", "greedy"):
        n = ds["cost"].sel(mode=mode).notnull().sum("episode").load()
        assert (n.sel(iterate=[1, 2]) == CFG.eval_episodes).all()
        assert (n.sel(iterate=0) == 0).all()
    expl = ds["cost"].sel(mode="expl").notnull().load()
    assert (expl == ds["cost"].sel(mode="greedy").notnull().load()).all()


def test_multiplier_and_diagnostics_recorded(trained: tuple[Path, Path]) -> None:
    ds = open_cube(trained[0])
    mult = ds["multiplier"].load()
    assert mult.sel(algo="ppo").isnull().all()
    for algo in ("ppo_lag", "p3o", "focops", "ppo_pid"):
        assert mult.sel(algo=algo).notnull().all()
    assert mult.sel(algo="crpo").isnull().all() and (mult.sel(algo="ppo_pid") >= 0).all()
    for name in ("pid_integral", "pid_error", "pid_derivative"):
        assert ds[name].sel(algo="ppo_pid").notnull().all() and ds[name].sel(algo="ppo_lag").isnull().all()
    # the PID error is the last update's mean per-step cost (circle: 0 or 0.1 a step) minus d/T = 1/32
    err = ds["pid_error"].sel(algo="ppo_pid").values
    assert ((err >= -1 / 32 - 1e-6) & (err <= 0.1 - 1 / 32 + 1e-6)).all()
    regime = ds["crpo_regime"].sel(algo="crpo").values
    assert set(np.unique(regime)) <= {0.0, 1.0} and ds["crpo_regime"].sel(algo="focops").isnull().all()
    assert (mult.sel(algo="ppo_lag") >= 0).all()
    assert (mult.sel(algo="p3o") >= CFG.p3o.kappa_init - 1e-9).all()
    assert ((mult.sel(algo="focops") >= 0) & (mult.sel(algo="focops") <= CFG.focops.nu_max)).all()
    for name in ("policy_loss", "value_loss", "entropy", "mean_step_cost", "n_updates"):
        assert ds[name].notnull().all()
    assert (ds["dropped_episodes"] == 0).all()


def test_manifest_complete(trained: tuple[Path, Path]) -> None:
    rows = read_manifests(trained[0])
    assert len(rows) == len(ALGOS)
    for row in rows:
        assert row["status"] == "complete" and row["iterates_done"] == 3
        assert row["env"] == "safe_circle_point" and row["config"]["episode_length"] == 32
        for field in ("started", "finished", "host", "versions", "checkpoints"):
            assert row[field], field
        assert "crax-bench" in row["versions"] and row["eval_iterates"] == [1, 2]


def test_saferl_evaluate_restores_episodes_from_checkpoint(trained: tuple[Path, Path],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from cube.cli.entry import main

    out, cache = trained
    monkeypatch.setenv("SAFERL_JAX_CACHE", str(cache))
    key = RunKey("ppo_lag", "circle", BOUND, 0)
    before = open_cube(out)["cost"].sel(algo="ppo_lag", seed=0, iterate=1).load().copy()
    for mode in ("expl", "greedy"):
        write_episodes(out, key, mode, 1, [], [])  # blank the stored evaluation
    assert open_cube(out)["cost"].sel(algo="ppo_lag", mode="greedy", iterate=1).isnull().all()
    assert main(["evaluate", str(out), "--iterate", "1", "--algo", "ppo_lag"]) == 0
    after = open_cube(out)["cost"].sel(algo="ppo_lag", seed=0, iterate=1).load()
    for mode in ("expl", "greedy"):
        assert int(after.sel(mode=mode).notnull().sum()) == CFG.eval_episodes
        # same checkpoint, same (seed, iterate) keys -> the very same paired rollouts
        np.testing.assert_allclose(after.sel(mode=mode), before.sel(mode=mode), rtol=1e-5, atol=1e-6)
