"""PPO-PID, PPO-Saute and CRPO end to end on the toy task: `saferl train` in vmapped groups, what lands in the
cube (episodes, multiplier, PID state, Saute budget, CRPO regime), `saferl status` / `report` / `evaluate`,
resuming with the algorithm state, and resume points written before runs carried one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")

from cube import open_cube, read_manifests, set_run_manifest  # noqa: E402
from cube.schema import RunKey  # noqa: E402
from tests.toyconfig import toy_config_toml  # noqa: E402
from train import checkpoint  # noqa: E402
from train.config import TrainConfig  # noqa: E402
from train.record import prepare_store  # noqa: E402
from train.runner import Runner  # noqa: E402
from train.toy import make_toy_env  # noqa: E402

NEW = ("ppo_pid", "ppo_saute", "crpo")
OWN_VARS = {"ppo_pid": ("pid_integral", "pid_error", "pid_derivative"),
            "ppo_saute": ("saute_budget", "saute_penalty_share"), "crpo": ("crpo_regime", "crpo_reward_share")}


def toy_factory(task: str, episode_length: int):  # noqa: ANN201
    return make_toy_env()


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import os

    from cube.cli.entry import main

    base = tmp_path_factory.mktemp("beyond")
    (base / "toy.toml").write_text(toy_config_toml(4, 8))
    out = base / "new.zarr"
    old = {k: os.environ.get(k) for k in ("SAFERL_ENABLE_TOY", "SAFERL_JAX_CACHE")}
    os.environ.update(SAFERL_ENABLE_TOY="1", SAFERL_JAX_CACHE=str(base / "jax"))
    try:
        rc = main(["train", "--preset", "smoke", "--config", str(base / "toy.toml"), "--algos", ",".join(NEW),
                   "--tasks", "toy", "--bounds", "3", "--seeds", "0,1", "--parallel-runs", "2", "--no-progress",
                   "--out", str(out)])
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert rc == 0
    return out


def test_episodes_and_algorithm_variables_land_in_the_cube(cli_store: Path) -> None:
    ds = open_cube(cli_store)
    assert set(ds["algo"].values) == set(NEW) and ds.sizes["iterate"] == 4
    train = ds["cost"].sel(mode="train", task="toy").load()
    assert (train.notnull().sum("episode") == 8).all()  # every env's episode, every iterate, every run
    for mode in ("expl", "greedy"):  # evaluations at iterates 1 and 3 (eval_every = 2), paired
        n = ds["cost"].sel(mode=mode).notnull().sum("episode").load()
        assert (n.sel(iterate=[1, 3]) == 5).all() and (n.sel(iterate=[0, 2]) == 0).all()
    for algo in NEW:
        run = ds.sel(algo=algo, task="toy", bound=3.0)
        mult = run["multiplier"].values
        assert np.isfinite(mult).all() if algo == "ppo_pid" else np.isnan(mult).all(), algo
        for other, names in OWN_VARS.items():
            for name in names:
                values = run[name].values
                assert (np.isfinite(values).all() if other == algo else np.isnan(values).all()), (algo, name)
    pid = ds.sel(algo="ppo_pid", task="toy", bound=3.0)
    assert (np.abs(pid["pid_integral"].values) <= TrainConfig().ppo_pid.integral_clip + 1e-6).all()
    assert (pid["multiplier"].values >= 0).all() and (pid["multiplier"].values > 0).any()  # cost > d at first
    crpo = ds.sel(algo="crpo", task="toy", bound=3.0)
    assert set(np.unique(crpo["crpo_regime"].values)) <= {0.0, 1.0}
    share = crpo["crpo_reward_share"].values
    assert ((share >= 0) & (share <= 1)).all() and (share < 1).any()  # a random start is over d: cost steps
    saute = ds.sel(algo="ppo_saute", task="toy", bound=3.0)
    assert ((saute["saute_budget"].values >= 0) & (saute["saute_budget"].values <= 9.0)).all()  # in [0, 3d]
    np.testing.assert_allclose(saute["reward"].sel(mode="train").values, saute["cost"].sel(mode="train").values,
                               rtol=1e-5)  # the env's reward (= cost on the toy), not the shaped one


def test_manifests_status_and_report_show_them(cli_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cube.cli.entry import main
    from train.cli import status_variant

    rows = read_manifests(cli_store)
    assert {r["algo"] for r in rows} == set(NEW) and all(r["status"] == "complete" for r in rows)
    assert all(r["group_size"] == 2 for r in rows)  # seeds 0 and 1 vmapped together
    variants = {r["algo"]: status_variant(r) for r in rows}  # what `saferl status` shows
    assert variants == {"ppo_pid": "crax", "crpo": "crax", "ppo_saute": "saute.gamma_b=1 saute.reset=episode"}
    assert all(r["config"]["ppo_saute"]["budget_discount"] == 1.0 for r in rows)  # the choice is in the manifest
    assert main(["status", str(cli_store), "--all", "--wide"]) == 0
    assert "saute.gamma_b=1" in capsys.readouterr().out
    assert main(["report", str(cli_store)]) == 0
    text = capsys.readouterr().out
    for algo in NEW:
        assert algo in text


def test_evaluate_restores_a_saute_checkpoint(cli_store: Path, tmp_path: Path) -> None:
    """The budget program's evaluation (observed budget from d) from a stored checkpoint reproduces the
    paired episodes written during training."""
    import shutil

    from train.evaluate import evaluate_store

    store = tmp_path / "copy.zarr"
    shutil.copytree(cli_store, store)
    before = open_cube(store)["cost"].sel(algo="ppo_saute", iterate=3).load().copy()
    n = evaluate_store(store, 3, algos=["ppo_saute"], env_factory=toy_factory, report=lambda s: None)
    assert n == 2
    after = open_cube(store)["cost"].sel(algo="ppo_saute", iterate=3).load()
    for mode in ("expl", "greedy"):
        np.testing.assert_allclose(after.sel(mode=mode), before.sel(mode=mode), rtol=1e-5, atol=1e-6)


SMALL = TrainConfig(total_env_steps=4 * 8 * 20, episode_length=20, num_envs=8, unroll_length=4, batch_size=8,
                    num_minibatches=2, num_epochs=1, policy_hidden=(8,), value_hidden=(8,), cost_value_hidden=(8,),
                    eval_episodes=5, eval_every=2)


class _StopAfter:
    """Progress stub that presses Ctrl-C after iterate `n`."""

    def __init__(self, n: int) -> None:
        self.n = n

    def start_run(self, key, config):  # noqa: ANN001, ANN201
        return 0

    def advance(self, tid, steps, res, key, elapsed):  # noqa: ANN001, ANN201
        if res.iterates_done == self.n:
            raise KeyboardInterrupt

    def finish_run(self, tid):  # noqa: ANN001, ANN201
        pass


def test_resume_carries_the_pid_state_and_old_resume_points_load(tmp_path: Path) -> None:
    """An interrupted PPO-PID run resumes with its PID state: the same numbers as an uninterrupted one; a
    resume point written before runs carried an algorithm state (a PPO-Lag run of an older saferl) resumes
    instead of starting over."""
    runs = {}
    for name, stop in (("whole", None), ("cut", 3)):
        out = tmp_path / f"{name}.zarr"
        prepare_store(out, SMALL, ["ppo_pid", "ppo_lag"], ["toy"], [2.0], [0])
        runner = Runner(out, SMALL, "toy", toy_factory)
        if stop:
            with pytest.raises(KeyboardInterrupt):
                runner.run("ppo_pid", 2.0, 0, progress=_StopAfter(stop))
        res = runner.run("ppo_pid", 2.0, 0)
        assert res.resumed_from == (1 if stop else None)
        runs[name] = open_cube(out).sel(algo="ppo_pid", task="toy", bound=2.0, seed=0)
    for var in ("multiplier", "pid_integral", "pid_error", "pid_derivative"):
        np.testing.assert_allclose(runs["cut"][var].values, runs["whole"][var].values, rtol=1e-5, err_msg=var)
    np.testing.assert_allclose(runs["cut"]["cost"].sel(mode="train").values,
                               runs["whole"]["cost"].sel(mode="train").values, rtol=1e-5)

    # a resume point as saferl wrote it before `algo_state` existed: the same leaves without it
    out = tmp_path / "cut.zarr"
    runner = Runner(out, SMALL, "toy", toy_factory)
    key = RunKey("ppo_lag", "toy", 2.0, 0)
    with pytest.raises(KeyboardInterrupt):
        runner.run("ppo_lag", 2.0, 0, progress=_StopAfter(3))
    program = runner.program_for(["ppo_lag"])
    template = jax.tree_util.tree_map(jax.numpy.zeros_like, program.init([key]))
    j, state, steps = checkpoint.load_resume(out, key, template)
    assert j == 1
    checkpoint.save_resume(out, key, j, state._replace(algo_state=None), steps)
    assert checkpoint.load_resume(out, key, template) is None  # the new structure does not take it
    set_run_manifest(out, key, status="partial", manifest={})
    res = runner.run("ppo_lag", 2.0, 0)
    assert res.resumed_from == 1 and res.status == "complete"
