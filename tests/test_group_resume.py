"""A run resumes in the vmapped group it was started in, so a rerun reproduces its numbers (issue 16, item 11).

A vmapped program's floats depend on its members (a group of 2 differs from the run alone by ~1e-6 per
step, which chaotic training amplifies), so an interrupted or failed run must go back into the same group.
Members that are complete or not selected ride along unwritten. The toy task keeps this fast: one group of
two ppo_lag runs, 12 iterates, evaluation and resume point every 2.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")

from cube import CubeWriter, RunKey, open_cube, read_manifests  # noqa: E402
from tests.toyconfig import toy_config_toml  # noqa: E402
from train import checkpoint  # noqa: E402
from train.grouping import make_units, parse_run_label, started_group  # noqa: E402
from train.overrides import load_toml  # noqa: E402
from train.record import prepare_store  # noqa: E402
from train.runner import Runner  # noqa: E402
from train.sweep import make_env  # noqa: E402

N_ITERATES, N_ENVS = 12, 8
CONFIG = toy_config_toml(N_ITERATES, N_ENVS)
S0, S1 = (RunKey("ppo_lag", "toy", 4.0, s) for s in (0, 1))
VARS = ("reward", "cost", "env_steps", "multiplier", "n_updates", "policy_loss", "value_loss", "approx_kl")


class InterruptAfter:
    """Progress hooks that press Ctrl-C once the group has finished `n` iterates."""

    def __init__(self, n: int) -> None:
        self.n = n

    def start_run(self, label: Any, cfg: Any) -> int:
        return 0

    def advance(self, task_id: int, steps: int, view: Any, label: Any, elapsed: float) -> None:
        if view.iterates_done >= self.n:
            raise KeyboardInterrupt

    def finish_run(self, task_id: int) -> None:
        pass


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The config file, the uninterrupted group's store, and a store whose group was interrupted after
    iterate 5 (resume points at 3 and 5 for both runs)."""
    base = tmp_path_factory.mktemp("group")
    (base / "toy.toml").write_text(CONFIG)
    config = load_toml(base / "toy.toml")
    stores = {name: base / f"{name}.zarr" for name in ("reference", "interrupted")}
    for path in stores.values():
        prepare_store(path, config, ["ppo_lag"], ["toy"], [4.0], [0, 1])
    runner = Runner(stores["reference"], config, "toy", make_env)
    assert [r.status for r in runner.run_group([S0, S1])] == ["complete"] * 2
    with pytest.raises(KeyboardInterrupt):
        Runner(stores["interrupted"], config, "toy", make_env).run_group([S0, S1], InterruptAfter(6))
    assert [r["status"] for r in read_manifests(stores["interrupted"])] == ["partial", "partial"]
    assert checkpoint.resume_iterates(stores["interrupted"], S0) == [3, 5]
    return {"base": base, **stores}


def _train(setup: dict[str, Any], out: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    from cube.cli import main

    monkeypatch.setenv("SAFERL_ENABLE_TOY", "1")
    monkeypatch.setenv("SAFERL_JAX_CACHE", str(setup["base"] / "jax"))
    return main(["train", "--algos", "ppo_lag", "--tasks", "toy", "--bounds", "4", "--config",
                 str(setup["base"] / "toy.toml"), "--no-progress", "--out", str(out), *args])


def _run(ds: Any, key: RunKey, var: str) -> np.ndarray:
    return ds[var].sel(algo=key.algo, task=key.task, bound=key.bound, seed=key.seed).values


def test_a_resumed_run_gets_the_numbers_of_its_group_whatever_parallel_runs_says(
        setup: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.zarr"
    shutil.copytree(setup["interrupted"], out)
    # a process killed between the two runs' saves at iterate 5: seed 1 holds only the one at 3
    (checkpoint.run_dir(out, S1) / "resume_5.msgpack").unlink()
    before = open_cube(out).load()
    # seed 0 only, one run per program: seed 0 resumes in its group, seed 1 rides along unwritten
    assert _train(setup, out, monkeypatch, "--seeds", "0", "--parallel-runs", "1") == 0
    ref, ds = open_cube(setup["reference"]).load(), open_cube(out).load()
    for var in VARS:
        np.testing.assert_array_equal(_run(ds, S0, var), _run(ref, S0, var), err_msg=var)
        np.testing.assert_array_equal(_run(ds, S1, var), _run(before, S1, var), err_msg=var)
    printed = capsys.readouterr().out
    assert "1 complete or unselected run(s) ride along unwritten" in printed, printed
    rows = {r["seed"]: r for r in read_manifests(out)}
    assert rows[0]["status"] == "complete" and rows[1]["status"] == "partial"
    assert rows[0]["resumed_from"] == 3  # the newest resume point both runs hold
    assert started_group(rows[0]) == (S0, S1) and rows[0]["group_size"] == 2
    # then seed 1, with seed 0 (complete, its resume points at 9 and 11) riding along: no common resume
    # point, so the group starts over, and seed 1 still gets its numbers
    end_0 = rows[0]["finished"]
    assert _train(setup, out, monkeypatch, "--seeds", "0-1", "--parallel-runs", "1") == 0
    ds = open_cube(out).load()
    for var in VARS:
        np.testing.assert_array_equal(_run(ds, S1, var), _run(ref, S1, var), err_msg=var)
        np.testing.assert_array_equal(_run(ds, S0, var), _run(ref, S0, var), err_msg=var)
    rows = {r["seed"]: r for r in read_manifests(out)}
    assert rows[1]["status"] == "complete" and rows[1]["resumed_from"] is None and rows[0]["finished"] == end_0


def test_regroup_resumes_in_a_new_group_and_the_numbers_drift(setup: dict[str, Any], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: resumed alone (--regroup), seed 0 continues from the same state but in another program,
    and its numbers leave the group's by float noise. This is what the rebuilt group prevents."""
    out = tmp_path / "s.zarr"
    shutil.copytree(setup["interrupted"], out)
    assert _train(setup, out, monkeypatch, "--seeds", "0", "--parallel-runs", "1", "--regroup") == 0
    ref, ds = open_cube(setup["reference"]).load(), open_cube(out).load()
    got, want = _run(ds, S0, "reward"), _run(ref, S0, "reward")
    np.testing.assert_array_equal(got[:6], want[:6])  # iterates before the resume point: as written
    assert not np.array_equal(got[6:], want[6:], equal_nan=True)
    np.testing.assert_allclose(got[6:], want[6:], rtol=0.05, atol=0.05)
    row = next(r for r in read_manifests(out) if r["seed"] == 0)
    assert row["resumed_from"] == 5 and started_group(row) == (S0,)


# ------------------------------------------------------------------------------ make_units, no training
def _store_with(tmp_path: Path, rows: dict[RunKey, tuple[str, dict[str, Any]]]) -> Path:
    out = tmp_path / "m.zarr"
    config = load_toml(_config_file(tmp_path))
    prepare_store(out, config, ["ppo", "ppo_lag"], ["toy"], [4.0], [0, 1, 2, 3])
    writer = CubeWriter(out)
    for key, (status, manifest) in rows.items():
        writer.set_run_manifest(key, status=status, manifest=manifest)
    return out


def _config_file(tmp_path: Path) -> Path:
    path = tmp_path / "toy.toml"
    path.write_text(CONFIG)
    return path


def _key(algo: str, seed: int) -> RunKey:
    return RunKey(algo, "toy", 4.0, seed)


def _group(*keys: RunKey) -> dict[str, Any]:
    return {"group": [k.as_dict() for k in keys], "group_size": len(keys)}


def test_units_rebuild_recorded_groups_and_group_new_runs_by_size(tmp_path: Path) -> None:
    a0, a1, a2, a3 = (_key("ppo", s) for s in range(4))
    b0, b1, b2, b3 = (_key("ppo_lag", s) for s in range(4))
    out = _store_with(tmp_path, {
        a0: ("partial", _group(a1, a0)), a1: ("partial", _group(a1, a0)),  # program order is kept
        a2: ("partial", {}),  # started alone (no group recorded)
        b0: ("complete", _group(b0, b1)), b1: ("partial", _group(b0, b1)),  # b0 rides along
    })
    lines: list[str] = []
    units = make_units([a0, a1, a2, a3, b1, b2, b3], out, 4, report=lines.append)
    assert units == [(a1, a0), a2, (b0, b1), (a3,), (b2, b3)] and lines == []
    assert make_units([a0, a2], out, 1) == [(a1, a0), a2]  # a1 not selected: rides along
    # --regroup: started runs are grouped as new ones (by resume iterate, here none)
    assert make_units([a0, a1, a2, a3], out, 4, regroup=True) == [(a0, a1, a2, a3)]


def test_units_refuse_to_rebuild_a_group_whose_members_disagree(tmp_path: Path) -> None:
    a0, a1, a2 = (_key("ppo", s) for s in range(3))
    out = _store_with(tmp_path, {a0: ("partial", _group(a0, a1)), a1: ("partial", _group(a1, a2)),
                                 a2: ("partial", _group(a1, a2))})
    lines: list[str] = []
    units = make_units([a0], out, 2, report=lines.append)
    assert units == [(a0,)] and len(lines) == 1 and "cannot rebuild the group" in lines[0]
    assert "ppo/toy/d=4/seed=0" in lines[0]


def test_groups_recorded_as_labels_by_earlier_versions_are_read() -> None:
    key = RunKey("ppo_lag", "circle", 25.0, 12)
    assert parse_run_label(str(key)) == key
    row = {**key.as_dict(), "status": "partial", "group": [str(key), "ppo_lag/circle/d=25/seed=13"]}
    assert started_group(row) == (key, RunKey("ppo_lag", "circle", 25.0, 13))
    assert started_group({**key.as_dict(), "status": "pending"}) is None
    assert started_group({**key.as_dict(), "status": "complete"}) == ()
