"""What `saferl --help`, `saferl train --help`, README's train section and docs/training.md say about training
names what exists: the ten trainers, the 48 task labels, the presets, the --config tables, each task's reward
(no jax needed, nothing compiles)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cube.cli.entry import main
from train.cli import config_tables
from train.registry import algo_names, algorithms
from train.sweep import PRESETS
from train.tasks import FAMILIES, TASK_SPECS

ROOT = Path(__file__).resolve().parents[1]


def _help(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit):
        main([*args, "--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines anywhere: compare words


def test_saferl_help_names_the_trainers_tasks_and_presets(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    assert len(algorithms()) == 10 and len(TASK_SPECS) == 48
    for a in algorithms():
        assert a.title in text.replace("- ", "-"), a.title  # argparse may break "PPO-Saute" after its hyphen
    assert "10 trainers" in text and "48 task labels" in text
    for preset in PRESETS:
        assert preset in text


def test_config_help_names_every_section_of_the_config(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "train")
    config = text.split("--config CONFIG", 2)[-1]
    tables = config_tables()
    assert {"[ppo_lag]", "[p3o]", "[focops]", "[ppo_pid]", "[ppo_saute]", "[crpo]", "[offpolicy]",
            "[offpolicy.sac_lag]"} <= set(tables)
    for table in tables:
        assert table in config, table
    assert "[cluster]" in config


def test_readme_train_section_names_what_is_there() -> None:
    readme = ROOT.joinpath("README.md").read_text()
    section = readme.split("### `saferl train`", 1)[1].split("\n### ", 1)[0]
    for name in algo_names():
        assert f"`{name}`" in section, name
    for family in FAMILIES:
        stem = family.name.removeprefix("velocity_")
        assert stem in section, family.name
    assert "`_l1`/`_l2`/`_l3`" in section and "48 labels" in section
    for preset in PRESETS:
        assert f"`{preset}`" in section, preset
    assert "trains PPO, PPO-Lag, P3O and FOCOPS on the CRAX Safe Point tasks" not in readme  # the stale opening


def test_task_table_has_each_tasks_reward() -> None:
    doc = ROOT.joinpath("docs", "training.md").read_text()
    header = next(line for line in doc.splitlines() if line.startswith("| labels | crax env"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert "reward per step" in columns
    rows = [line for line in doc.splitlines() if re.match(r"\| `\w", line) and "safe_" in line]
    for family in FAMILIES:
        row = next(r for r in rows if f"| {family.env} |" in r or (family.env.startswith("safe_velocity_")
                                                                  and "| safe_velocity_* |" in r))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == len(columns), row
        assert cells[columns.index("reward per step")] == family.reward, family.name
        assert family.reward.split(":")[0] in ("dense", "sparse")
