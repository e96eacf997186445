"""Config, TOML overrides and `saferl train` bad-input errors (no jax needed, nothing compiles)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cube.errors import CubeError
from train.config import SMOKE, TrainConfig
from train.overrides import config_to_dict, load_toml, with_overrides
from train.sweep import PRESETS, SMOKE_BOUND
from train.tasks import task_spec
from train.variants import LEGACY_OPTIONS, legacy_overrides, variant_label


def test_defaults_are_the_paper_table() -> None:
    c = TrainConfig()
    assert (c.total_env_steps, c.episode_length, c.num_envs, c.unroll_length) == (500_000_000, 2000, 2048, 8)
    assert (c.batch_size, c.num_minibatches, c.num_epochs, c.learning_rate) == (1024, 32, 6, 5e-4)
    assert (c.discount, c.gae_lambda, c.clip_epsilon, c.entropy_cost, c.reward_scaling) == (
        0.99, 0.95, 0.3, 5e-3, 0.1)
    assert (c.ppo_lag.lr, c.ppo_lag.init) == (3.0, 0.0)
    assert (c.focops.nu_init, c.focops.nu_lr, c.focops.nu_max) == (0.1, 1.0, 100.0)
    assert (c.focops.temperature, c.focops.kl_threshold) == (1.5, 0.02)
    assert (c.p3o.kappa_init, c.p3o.increase, c.p3o.kappa_max) == (0.01, 1.1, 50.0)
    # 2048 envs x 2000 steps per iterate: 122 iterates for 5e8 steps; 16 unrolls of 8 steps per update
    assert c.n_iterates == 122 and c.unrolls_per_update == 16 and c.steps_per_update == 128


def test_formulation_defaults_are_crax_and_legacy_is_available(tmp_path: Path) -> None:
    c = TrainConfig()
    assert (c.reset, c.advantage) == ("replay", "brax")
    assert (c.ppo_lag.normalize_cost_advantage, c.p3o.normalize_cost_advantage,
            c.focops.normalize_cost_advantage) == (True, False, False)
    assert (c.p3o.violation, c.focops.loss) == ("previous_update", "crax")
    legacy = with_overrides(c, legacy_overrides())
    assert (legacy.reset, legacy.advantage, legacy.p3o.violation, legacy.focops.loss) == (
        "fresh", "gae", "minibatch", "paper")
    assert legacy.p3o.normalize_cost_advantage and legacy.focops.normalize_cost_advantage
    d = config_to_dict(c)  # the manifest records every option
    assert d["reset"] == "replay" and d["advantage"] == "brax" and d["focops"]["loss"] == "crax"
    assert variant_label(d) == "crax" and variant_label(config_to_dict(legacy)) == "legacy"
    assert variant_label({"num_envs": 8}) == "legacy"  # a manifest from before the options
    assert variant_label(config_to_dict(with_overrides(c, {"reset": "fresh"}))) == "reset=fresh"
    held = config_to_dict(with_overrides(c, {"focops": {"loss": "crax_stop_gradient"}}))
    assert variant_label(held, "focops") == "focops.loss=crax_stop_gradient" and variant_label(held, "ppo") == "crax"
    assert len(LEGACY_OPTIONS) == 7
    p = tmp_path / "c.toml"
    p.write_text('reset = "fresh"\nadvantage = "gae"\n[focops]\nloss = "paper"\n')
    t = load_toml(p)
    assert (t.reset, t.advantage, t.focops.loss) == ("fresh", "gae", "paper")


def test_toml_overrides_nested(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text("num_envs = 64\nbatch_size = 64\nnum_minibatches = 4\npolicy_hidden = [8, 8]\n"
                 "[ppo_lag]\nlr = 0.5\n[focops]\nnu_max = 10\n")
    c = load_toml(p)
    assert c.num_envs == 64 and c.policy_hidden == (8, 8) and c.ppo_lag.lr == 0.5 and c.focops.nu_max == 10.0
    assert c.learning_rate == 5e-4  # untouched


@pytest.mark.parametrize("text, match", [
    ("nope = 1\n", "unknown key 'nope'"),
    ("[p3o]\nkappa = 1\n", "unknown key 'p3o.kappa'"),
    ("num_envs = 'many'\n", "num_envs must be an integer"),
    ("num_envs = 3\n", "multiple of num_envs"),
    ('reset = "auto"\n', "reset must be one of 'replay', 'fresh'"),
    ("reset = 1\n", "reset must be a string"),
    ('[focops]\nloss = "kl"\n', "focops.loss must be one of 'crax', 'crax_stop_gradient', 'paper'"),
    ('[p3o]\nviolation = "now"\n', "p3o.violation must be one of"),
])
def test_toml_errors_are_one_line(tmp_path: Path, text: str, match: str) -> None:
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(CubeError, match=match) as info:
        load_toml(p)
    assert "\n" not in str(info.value)


def test_smoke_config_is_consistent() -> None:
    SMOKE.validate()
    assert with_overrides(SMOKE, {}).n_iterates == 3


def test_smoke_preset_trains_a_dense_reward_under_a_bound_that_binds() -> None:
    """The smoke preset looked broken: d = 2 on circle never bound (lambda stayed 0) and goal's sparse reward
    gives 64-step episodes 0. Its tasks have dense rewards; that its d binds is measured by training
    (bench/smoke_binds.py: compiles take minutes on a CPU, too long for the suite)."""
    smoke = PRESETS["smoke"]
    assert smoke["bounds"] == (SMOKE_BOUND,)
    for task in smoke["tasks"]:
        assert task_spec(task).family.dense_reward, task
    assert task_spec("goal_l2").family.dense_reward is False  # what the issue ran into


def _saferl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from cube.cli.entry import main

    rc = main(list(args))
    return rc, capsys.readouterr().err


def test_bad_input_is_caught_before_jax_is_imported(tmp_path: Path) -> None:
    code = ("import sys; from cube.cli.entry import main; "
            "rc = main(['train', '--algo', 'trpo', '--task', 'circle', '--bound', '1', '--seed', '0', "
            f"'--out', {str(tmp_path / 'c.zarr')!r}]); "
            "assert 'jax' not in sys.modules, 'jax imported'; sys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "unknown algorithm 'trpo'" in res.stderr, res.stderr


@pytest.mark.parametrize("args, match", [
    (["--algo", "trpo", "--task", "circle", "--bound", "25", "--seed", "0"], "unknown algorithm 'trpo'"),
    (["--algo", "ppo", "--task", "maze", "--bound", "25", "--seed", "0"], "unknown task 'maze'"),
    (["--algo", "ppo", "--task", "circle", "--bound", "0", "--seed", "0"], "safety bound must be a number > 0"),
    (["--algo", "ppo", "--task", "circle", "--bound", "-3", "--seed", "0"], "safety bound must be a number > 0"),
    (["--algo", "ppo", "--task", "circle", "--seed", "0"], "--bound is required"),
])
def test_train_bad_input_one_line_error(capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str],
                                        match: str) -> None:
    rc, err = _saferl(capsys, "train", "--out", str(tmp_path / "c.zarr"), *args)
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "error:" in lines[0] and match in lines[0], err
    assert not (tmp_path / "c.zarr").exists()


def test_train_unknown_config_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("learning_rat = 1e-3\n")
    rc, err = _saferl(capsys, "train", "--preset", "smoke", "--config", str(cfg), "--out", str(tmp_path / "c.zarr"))
    assert rc == 2 and "unknown key 'learning_rat'" in err and "Traceback" not in err


def test_train_refuses_cube_of_other_grid(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from cube import create_store

    out = tmp_path / "other.zarr"
    create_store(out, algos=["ppo"], tasks=["goal"], bounds=[15.0], seeds=[0], n_iterates=5, n_episodes=7)
    rc, err = _saferl(capsys, "train", "--preset", "smoke", "--out", str(out))
    assert rc == 2 and "different grid" in err and "Traceback" not in err, err


def test_evaluate_without_checkpoints_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("crax")
    monkeypatch.setenv("SAFERL_JAX_CACHE", str(tmp_path / "jaxcache"))
    from cube import create_store

    out = tmp_path / "c.zarr"
    create_store(out, algos=["ppo"], tasks=["circle"], bounds=[15.0], seeds=[0], n_iterates=2, n_episodes=3)
    rc, err = _saferl(capsys, "evaluate", str(out), "--iterate", "1")
    assert rc == 2 and "no checkpoint at iterate 1" in err, err


# ------------------------------------------------------------------- tasks, levels, presets, new algorithms
def _plan(*argv: str):  # noqa: ANN202
    import argparse

    from train.cli import build_plan, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return build_plan(parser.parse_args(["train", "--out", "unused.zarr", *argv]))


def test_task_labels_cover_every_crax_task_and_level() -> None:
    from train.tasks import FAMILIES, TASK_SPECS, task_spec

    assert len(FAMILIES) == 16 and len(TASK_SPECS) == 48
    assert {s.env for s in TASK_SPECS.values()} == {f.env for f in FAMILIES}
    # the paper's Point level-1 labels are unchanged (existing stores keep working)
    for short in ("goal", "circle", "push", "button"):
        assert task_spec(short).level == 1 and task_spec(short).env == f"safe_{short}_point"
    assert task_spec("goal_l2").level == 2 and task_spec("circle_l3").env == "safe_circle_point"
    assert task_spec("velocity_walker2d_l3").velocity_agent == "walker2d"
    assert task_spec("lift_humanoid_l2").family.level_via == "difficulty"
    assert task_spec("lift_ant_l1").family.episode_length == 500
    assert task_spec("reacher_l2").family.episode_length == 200


@pytest.mark.parametrize("label, match", [
    ("maze", "unknown task 'maze'; choose from goal, circle, push, button (Point, level 1)"),
    ("goal_l4", "crax-bench has levels 1-3 of goal, not 4"),
    ("lift_ant_l0", "crax-bench has levels 1-3 of lift_ant, not 0"),
    ("goal_l1", "Point level 1 is labelled 'goal'"),
    ("lift_ant", "needs a level: lift_ant_l1, lift_ant_l2, lift_ant_l3"),
    ("safe_velocity_hopper", "crax's env name; saferl labels it by level: velocity_hopper_l1"),
])
def test_bad_task_or_level_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, label: str,
                                       match: str) -> None:
    rc, err = _saferl(capsys, "train", "--out", str(tmp_path / "c.zarr"), "--algo", "ppo_pid", "--task", label,
                      "--bound", "25", "--seed", "0")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and match in lines[0], err
    assert not (tmp_path / "c.zarr").exists()


@pytest.mark.parametrize("args, match", [
    (["--algos", "ppo_pid,crpo", "--tasks", "circle,lift_ant_l5"], "crax-bench has levels 1-3 of lift_ant, not 5"),
    (["--algos", "ppo_pid,ppo_saut"], "unknown algorithm 'ppo_saut'; choose from ppo, ppo_lag, p3o, focops, ppo_pid"),
    (["--tasks", "goal_l2", "--task", "circle"], "--tasks given twice; give one list (e.g. --tasks goal,circle_l2)"),
    (["--algos", "crpo", "--algo", "ppo"], "--algos given twice; give one list (e.g. --algos ppo_pid,crpo)"),
])
def test_preset_with_bad_lists_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str],
                                           match: str) -> None:
    rc, err = _saferl(capsys, "train", "--preset", "smoke", "--out", str(tmp_path / "c.zarr"), *args)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and match in lines[0], err
    assert not (tmp_path / "c.zarr").exists()


def test_unknown_algorithm_lists_the_new_ones(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, err = _saferl(capsys, "train", "--out", str(tmp_path / "c.zarr"), "--algo", "sac_pidx", "--task", "goal_l2",
                      "--bound", "25", "--seed", "0")
    assert rc == 2 and "choose from ppo, ppo_lag, p3o, focops, ppo_pid, ppo_saute, crpo, sac, sac_lag, sac_pid" in err
    assert not (tmp_path / "c.zarr").exists()


def test_presets() -> None:
    from train.tasks import TASK_SPECS

    paper = _plan("--preset", "paper")
    assert paper.algos == ("ppo", "ppo_lag", "p3o", "focops") and paper.tasks == ("goal", "circle", "push", "button")
    assert paper.all_bounds() == (15.0, 25.0, 50.0) and len(paper.grid_keys()) == 4 * 4 * 3 * 30
    suite = _plan("--preset", "crax-suite")
    assert suite.algos == ("ppo", "ppo_lag", "p3o", "focops", "ppo_pid", "ppo_saute", "crpo")
    assert len(suite.tasks) == 16 and all(TASK_SPECS[t].level == 1 for t in suite.tasks)
    assert suite.bounds_of("circle") == (15.0, 25.0, 50.0) == suite.bounds_of("height_humanoid_l1")
    assert suite.bounds_of("velocity_hopper_l1") == (150.0, 250.0, 500.0) == suite.bounds_of("lift_ant_l1")
    assert suite.all_bounds() == (15.0, 25.0, 50.0, 150.0, 250.0, 500.0)
    assert len(suite.grid_keys()) == 7 * 16 * 3 * 10  # only each task's own bounds are runs
    assert {k.bound for k in suite.grid_keys() if k.task == "reacher_l1"} == {150.0, 250.0, 500.0}
    assert suite.config == TrainConfig()
    # --tasks / --bounds beside a preset replace its lists; the smoke preset works with any algorithms and tasks
    some = _plan("--preset", "crax-suite", "--tasks", "goal_l2,velocity_ant_l3", "--seeds", "0")
    assert some.bounds_of("velocity_ant_l3") == (150.0, 250.0, 500.0)
    assert some.bounds_of("goal_l2") == (15.0, 25.0, 50.0)
    fixed = _plan("--preset", "crax-suite", "--bounds", "7", "--seeds", "0")
    assert fixed.all_bounds() == (7.0,) and len(fixed.grid_keys()) == 7 * 16
    smoke = _plan("--preset", "smoke", "--algos", "ppo_pid,ppo_saute,crpo", "--tasks", "lift_ant_l2,circle_l3")
    assert smoke.config == SMOKE and smoke.algos == ("ppo_pid", "ppo_saute", "crpo")
    assert smoke.tasks == ("lift_ant_l2", "circle_l3") and smoke.all_bounds() == (SMOKE_BOUND,)
    assert _plan("--preset", "smoke").algos == ("ppo", "ppo_lag", "p3o", "focops")  # as README says


def test_new_algorithm_defaults_and_variant_labels() -> None:
    c = TrainConfig()
    pid = c.ppo_pid  # crax-bench's ppo_pid defaults (its CLI and train())
    assert (pid.kp, pid.ki, pid.kd, pid.integral_clip, pid.lambda_max, pid.derivative_ema, pid.init) == (
        10.0, 0.01, 0.01, 1.0, 1e6, 0.95, 0.0)
    assert pid.normalize_cost_advantage and c.crpo.normalize_cost_advantage and c.crpo.eta == 0.0
    sc = c.ppo_saute  # ours: gamma_b = 1 and a full budget every episode; crax's penalty, clip and observation
    assert (sc.budget_discount, sc.reset_budget, sc.penalty, sc.clip_budget, sc.normalize_budget_obs) == (
        1.0, "episode", -1.0, True, True)
    d = config_to_dict(c)
    assert variant_label(d, "ppo_pid") == "crax" == variant_label(d, "crpo") == variant_label(d, "ppo")
    assert variant_label(d, "ppo_saute") == "saute.gamma_b=1 saute.reset=episode"
    crax_saute = with_overrides(c, {"ppo_saute": {"budget_discount": 0.99, "reset_budget": "termination"}})
    assert variant_label(config_to_dict(crax_saute), "ppo_saute") == "crax"
    assert variant_label(d) == "crax"  # no algorithm: the shared options and the paper's algorithms'
    lag = config_to_dict(with_overrides(c, {"focops": {"loss": "paper"}}))
    assert variant_label(lag, "ppo_lag") == "crax" and variant_label(lag, "focops") == "focops.loss=paper"
    assert variant_label({"num_envs": 8}, "ppo_lag") == "legacy"


def test_stored_configs_before_the_new_sections_still_match() -> None:
    from train.overrides import ADDED_SECTIONS, upgrade_stored_config

    old = {k: v for k, v in config_to_dict(TrainConfig()).items() if k not in ADDED_SECTIONS}
    assert upgrade_stored_config(old) == config_to_dict(TrainConfig())
    changed = {**old, "ppo_saute": {**config_to_dict(TrainConfig())["ppo_saute"], "penalty": -2.0}}
    assert upgrade_stored_config(changed)["ppo_saute"]["penalty"] == -2.0  # a stored section is kept as is


@pytest.mark.parametrize("text, match", [
    ("[ppo_saute]\nbudget_discount = 0\n", "ppo_saute.budget_discount must be in (0, 1]"),
    ('[ppo_saute]\nreset_budget = "never"\n', "ppo_saute.reset_budget must be one of 'episode', 'termination'"),
    ("[ppo_pid]\nderivative_ema = 2\n", "derivative_ema in [0, 1]"),
    ("[crpo]\nkappa = 1\n", "unknown key 'crpo.kappa'"),
])
def test_new_sections_toml_errors_are_one_line(tmp_path: Path, text: str, match: str) -> None:
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(CubeError, match=match.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")) as info:
        load_toml(p)
    assert "\n" not in str(info.value)
