"""train/ as two families over one floor: each shared idea defined once, one registry, adding a trainer in one
record (trained through `saferl train` on the toy task), one PID config whose old SAC-PID names still load."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cube.errors import CubeError
from tests.toyconfig import toy_config_toml
from train.algorithm import OFFPOLICY, ONPOLICY
from train.config import TrainConfig
from train.multipliers import PidConfig
from train.offpolicy.config import OffPolicyConfig
from train.onpolicy.algorithms.base import Algorithm, LossInputs
from train.overrides import config_to_dict, load_toml, upgrade_stored_config
from train.registry import PAPER_ALGOS, algo_names, algorithm, register, unregister

ROOT = Path(__file__).resolve().parents[1]
TRAIN = sorted((ROOT / "train").rglob("*.py"))


def _definitions() -> Counter[str]:
    """How often each function or class name is defined at module level (or as a method) across train/."""
    names: Counter[str] = Counter()
    for path in TRAIN:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names[node.name] += 1
    return names


@pytest.mark.parametrize("name", ["lagrange_update", "pid_update", "PidConfig", "PIDState", "make_evaluator",
                                  "eval_key", "GroupProgram", "TrainerFamily", "algorithm", "book_step",
                                  "restart_pending", "strong_types", "where_done", "variant_label",
                                  "with_overrides"])
def test_each_shared_idea_is_defined_once(name: str) -> None:
    assert _definitions()[name] == 1, f"{name} is defined {_definitions()[name]} times in train/"


def test_copies_of_old_are_gone_and_paper_algos_is_assigned_once() -> None:
    names = _definitions()
    for gone in ("_strong", "_select", "offpolicy_algorithm", "any_algorithm", "program_flags", "OffPolicyProgram",
                 "SacPidConfig", "_now"):
        assert names[gone] == 0, gone
    assigned = [p for p in TRAIN for node in ast.walk(ast.parse(p.read_text()))
                if isinstance(node, ast.AnnAssign | ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "PAPER_ALGOS"
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))]
    assert len(assigned) == 1 and PAPER_ALGOS == ("ppo", "ppo_lag", "p3o", "focops")


def test_the_runner_names_no_algorithm() -> None:
    """The runner asks the registry (constrained, family, cost critic); no algorithm name is a literal there."""
    strings = {n.value for n in ast.walk(ast.parse((ROOT / "train" / "runner.py").read_text()))
               if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not strings & set(algo_names()), strings & set(algo_names())


def test_one_registry_says_family_constrained_and_cost_critic() -> None:
    assert algo_names(ONPOLICY) == ("ppo", "ppo_lag", "p3o", "focops", "ppo_pid", "ppo_saute", "crpo")
    assert algo_names(OFFPOLICY) == ("sac", "sac_lag", "sac_pid")
    assert [algorithm(n).id for n in algo_names(OFFPOLICY)] == [0, 1, 2]
    assert {n for n in algo_names() if not algorithm(n).constrained} == {"ppo", "sac"}
    assert {n for n in algo_names() if not algorithm(n).cost_critic} == {"ppo", "ppo_saute", "sac"}
    with pytest.raises(CubeError, match="unknown algorithm 'trpo'; choose from ppo, ppo_lag, .*, sac_pid$"):
        algorithm("trpo")
    with pytest.raises(CubeError, match=r"unknown on-policy algorithm 'sac' \(it is off-policy\); choose from ppo,"):
        algorithm("sac", Algorithm)


def test_one_pid_config_and_the_old_sac_pid_names_still_load(tmp_path: Path) -> None:
    assert isinstance(TrainConfig().ppo_pid, PidConfig) and type(OffPolicyConfig().sac_pid) is PidConfig
    old = tmp_path / "old.toml"
    old.write_text("[offpolicy.sac_pid]\nlambda_clip = 3.0\nderiv_ema_beta = 0.9\n")
    pid = load_toml(old).offpolicy.sac_pid
    assert (pid.lambda_max, pid.derivative_ema) == (3.0, 0.9)
    both = tmp_path / "both.toml"
    both.write_text("[offpolicy.sac_pid]\nlambda_clip = 3.0\nlambda_max = 2.0\n")
    with pytest.raises(CubeError, match=r"give offpolicy.sac_pid.lambda_max only \(lambda_clip is its old name\)"):
        load_toml(both)
    # a manifest written before the rename reads as today's config (so its store accepts the same sweep)
    stored = config_to_dict(TrainConfig())
    sac_pid = stored["offpolicy"]["sac_pid"]
    sac_pid["lambda_clip"], sac_pid["deriv_ema_beta"] = sac_pid.pop("lambda_max"), sac_pid.pop("derivative_ema")
    assert upgrade_stored_config(stored) == config_to_dict(TrainConfig())


# ------------------------------------------------------------------------------ adding a trainer
MARK = 100.0
"""A constant the toy algorithm adds to its policy loss: no gradient, but the recorded `policy_loss` shows
which switch branch trained the run."""


def toy_policy_loss(config: TrainConfig, x: LossInputs) -> Any:
    """PPO's clipped surrogate on A_r - lambda A_c (raw cost advantage), plus MARK."""
    from train.onpolicy import losses as L

    return L.clipped_surrogate(x.ratio, x.adv - x.multiplier * x.cost_adv, config.clip_epsilon) + MARK


def toy_multiplier_update(config: TrainConfig, mult: Any, mean_cost: Any, d_step: Any) -> Any:
    """lambda <- relu(lambda + 0.5 (mean per-step cost - d/T))."""
    from train.multipliers import lagrange_update

    return lagrange_update(mult, mean_cost, d_step, 0.5)


TOY_LAG = Algorithm(name="toy_lag", title="Toy-Lag", policy_loss=toy_policy_loss,
                    multiplier_update=toy_multiplier_update, initial_multiplier=lambda c: 0.25)
"""The whole trainer: one record (its losses and update bound here, no config section)."""


@pytest.fixture
def toy_lag() -> Iterator[Algorithm]:
    yield register(TOY_LAG)
    unregister(TOY_LAG.name)


def test_a_trainer_added_in_one_record_trains_through_saferl_train(toy_lag: Algorithm, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("jax")
    from cube import open_cube, read_manifests
    from cube.cli.entry import main

    assert toy_lag.id == len(algo_names(ONPOLICY)) - 1 and algorithm("toy_lag") == toy_lag
    toml = tmp_path / "toy.toml"
    toml.write_text(toy_config_toml(3, 8))
    monkeypatch.setenv("SAFERL_ENABLE_TOY", "1")
    out = tmp_path / "toy.zarr"
    rc = main(["train", "--algos", "toy_lag", "--tasks", "toy", "--bounds", "4", "--seeds", "0", "--config",
               str(toml), "--no-progress", "--out", str(out)])
    assert rc == 0
    (row,) = read_manifests(out)
    assert (row["algo"], row["status"], row["family"], row["constrained"]) == ("toy_lag", "complete", ONPOLICY, True)
    ds = open_cube(out).sel(algo="toy_lag", task="toy", bound=4.0, seed=0)
    assert (ds["cost"].sel(mode="train").notnull().sum("episode").values == 8).all()  # every env's episode
    assert (ds["cost"].sel(mode="greedy").notnull().sum("episode").values[[1, 2]] == 5).all()
    assert (ds["policy_loss"].values > MARK / 2).all()  # its own switch branch trained it
    mult = ds["multiplier"].values
    assert (mult >= 0).all() and (mult != 0.25).all()  # its multiplier, moved by its own rule
    unregister("toy_lag")
    with pytest.raises(CubeError, match="unknown algorithm 'toy_lag'"):
        algorithm("toy_lag")
    register(TOY_LAG)  # the fixture unregisters it again
