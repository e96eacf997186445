"""SAC, SAC-Lag and SAC-PID through `saferl train` (issue 23 phase 2): the runner's path for off-policy runs.

One module-scoped sweep on the toy task (8 envs, 4 iterates, evaluation and resume point every 2 iterates, a
256-transition replay buffer): vmapped groups of two seeds, training episodes every iterate, paired expl/greedy
evaluations at the evaluation iterates, lambda and the temperature per iterate; `saferl report`, `saferl plot`
and the TUI's model read the store; a group interrupted after iterate 3 and resumed through the runner equals
the uninterrupted one bit for bit; bad replay sizes are refused before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")

from cube import RunKey, open_cube, read_manifests  # noqa: E402
from cube.cli import main  # noqa: E402
from tests.toyconfig import toy_config_toml  # noqa: E402
from train.overrides import load_toml  # noqa: E402
from train.record import prepare_store  # noqa: E402
from train.runner import Runner  # noqa: E402
from train.sweep import make_env  # noqa: E402

N_ITERATES, N_ENVS, N_EVAL = 4, 8, 5
OFFPOLICY = "\n[offpolicy]\ngrad_updates_per_step = 2\nmax_replay_size = 256\nhidden = [8]\n"
CONFIG = toy_config_toml(N_ITERATES, N_ENVS) + OFFPOLICY
ALGOS = ("sac_lag", "sac_pid", "sac")
SEEDS = (0, 1)


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


def _train(out: Path, config: Path, algos: str = ",".join(ALGOS), *extra: str) -> int:
    return main(["train", "--config", str(config), "--algos", algos, "--tasks", "toy", "--bounds", "2",
                 "--seeds", "0,1", "--out", str(out), "--no-progress", *extra])


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The uninterrupted sweep, and a sac_lag group interrupted after iterate 3 then resumed by the CLI."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SAFERL_ENABLE_TOY", "1")
    base = tmp_path_factory.mktemp("offpolicy")
    (base / "toy.toml").write_text(CONFIG)
    ref, resumed = base / "ref.zarr", base / "resumed.zarr"
    assert _train(ref, base / "toy.toml") == 0
    config = load_toml(base / "toy.toml")
    prepare_store(resumed, config, ["sac_lag"], ["toy"], [2.0], list(SEEDS))
    keys = [RunKey("sac_lag", "toy", 2.0, s) for s in SEEDS]
    with pytest.raises(KeyboardInterrupt):
        Runner(resumed, config, "toy", make_env).run_group(keys, InterruptAfter(3))
    assert _train(resumed, base / "toy.toml", "sac_lag") == 0
    mp.undo()
    return {"ref": ref, "resumed": resumed, "config": base / "toy.toml", "base": base}


def _sel(ds: Any, var: str, algo: str, **kw: Any) -> np.ndarray:
    return np.asarray(ds[var].sel(algo=algo, task="toy", bound=2.0, **kw).values)


def test_episodes_written_every_iterate_and_paired_evaluations(stores: dict[str, Path]) -> None:
    ds = open_cube(stores["ref"])
    for algo in ALGOS:
        cost = _sel(ds, "cost", algo)  # [seed, iterate, episode, mode]
        train = np.isfinite(cost[..., list(ds["mode"].values).index("train")]).sum(axis=-1)
        assert (train == N_ENVS).all(), (algo, train)  # one 20-step episode per env and iterate
        for mode in ("expl", "greedy"):
            n = np.isfinite(cost[..., list(ds["mode"].values).index(mode)]).sum(axis=-1)
            assert (n[:, [1, 3]] == N_EVAL).all() and (n[:, [0, 2]] == 0).all(), (algo, mode, n)
    rows = {(r["algo"], r["seed"]): r for r in read_manifests(stores["ref"])}
    assert {r["status"] for r in rows.values()} == {"complete"}
    assert {r["group_size"] for r in rows.values()} == {2}  # the two seeds trained as one vmapped group
    assert rows[("sac", 0)]["constrained"] is False and rows[("sac_lag", 0)]["constrained"] is True


def test_lambda_and_temperature_recorded_per_iterate(stores: dict[str, Path]) -> None:
    ds = open_cube(stores["ref"])
    for algo in ALGOS:
        alpha = _sel(ds, "alpha", algo)
        assert np.isfinite(alpha).all() and (alpha < 1).all() and (np.diff(alpha, axis=-1) != 0).all()
        steps = _sel(ds, "env_steps", algo)
        assert (steps == N_ENVS * 20 * np.arange(1, N_ITERATES + 1)).all()
        assert (_sel(ds, "n_updates", algo) == 20 * 2).all()  # 20 actor steps x 2 gradient steps each
        assert np.isfinite(_sel(ds, "critic_loss", algo)).all()
        assert np.isnan(_sel(ds, "policy_loss", algo)).all()  # on-policy diagnostics stay NaN
    assert np.isnan(_sel(ds, "multiplier", "sac")).all()
    for algo in ("sac_lag", "sac_pid"):
        lam = _sel(ds, "multiplier", algo)
        assert np.isfinite(lam).all() and (lam > 0).all()  # the toy's cost exceeds d: lambda rises


def test_resume_through_the_runner_is_bit_identical(stores: dict[str, Path]) -> None:
    ref, res = open_cube(stores["ref"]), open_cube(stores["resumed"])
    for var in ("reward", "cost", "multiplier", "alpha", "env_steps", "critic_loss", "actor_loss", "replay_size"):
        a = _sel(ref, var, "sac_lag", seed=list(SEEDS))
        b = _sel(res, var, "sac_lag", seed=list(SEEDS))
        np.testing.assert_array_equal(a, b, err_msg=var)
    rows = read_manifests(stores["resumed"])
    assert {r["resumed_from"] for r in rows} == {1} and {r["status"] for r in rows} == {"complete"}


def test_evaluate_restores_offpolicy_checkpoints(stores: dict[str, Path], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`saferl evaluate` of SAC / SAC-Lag / SAC-PID checkpoints: the episodes of iterate 3, blanked first, come
    back equal to the paired evaluation written during training (same compiled rollout, same key)."""
    import shutil

    from cube import CubeWriter
    from train.evaluate import evaluate_store

    monkeypatch.setenv("SAFERL_ENABLE_TOY", "1")
    store = tmp_path / "copy.zarr"
    shutil.copytree(stores["ref"], store)
    before = open_cube(store)["cost"].sel(iterate=3, mode=["expl", "greedy"]).load().copy()
    writer = CubeWriter(store)
    for algo in ALGOS:
        for seed in SEEDS:
            for mode in ("expl", "greedy"):
                writer.write_episodes(RunKey(algo, "toy", 2.0, seed), mode, 3, np.zeros(0), np.zeros(0))
    assert np.isnan(open_cube(store)["cost"].sel(iterate=3, mode=["expl", "greedy"]).values).all()
    lines: list[str] = []
    assert evaluate_store(store, 3, env_factory=make_env, report=lines.append) == len(ALGOS) * len(SEEDS)
    assert sum("expl cost" in line for line in lines) == len(ALGOS) * len(SEEDS)  # one line per run
    assert "compiling the evaluation" in lines[1], lines[:2]  # said before the first compile, not after
    after = open_cube(store)["cost"].sel(iterate=3, mode=["expl", "greedy"]).load()
    np.testing.assert_allclose(after.values, before.values, rtol=1e-5, atol=1e-6)
    assert np.isfinite(after.values).sum() == len(ALGOS) * len(SEEDS) * 2 * N_EVAL


def test_report_plot_and_tui_read_the_runs(stores: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    from saferl_tui.model import CubeModel, load_model

    assert main(["report", str(stores["ref"]), "--boot", "20", "--format", "csv"]) == 0
    text = capsys.readouterr().out
    assert all(a in text for a in ALGOS)
    out = stores["base"] / "plots"
    assert main(["plot", str(stores["ref"]), "all", "--out", str(out), "--boot", "20"]) == 0
    assert (out / "curves_toy.pdf").stat().st_size > 0
    info, err = load_model(CubeModel(stores["ref"], boot=20), lambda: False, lambda f, t: None)
    assert err is None and info is not None and set(info.algos) == set(ALGOS)


@pytest.mark.parametrize(("table", "message"), [
    ("[offpolicy]\nmax_replay_size = 16\n", "batch_size (64) exceeds the replay buffer (max_replay_size 16)"),
    ("[offpolicy]\nmax_replay_size = 1000000000000\n", "replay buffer does not fit: 1 run(s) x"),
])
def test_bad_replay_sizes_refused_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, table: str,
        message: str) -> None:
    monkeypatch.setenv("SAFERL_ENABLE_TOY", "1")
    config = tmp_path / "bad.toml"
    config.write_text(toy_config_toml(N_ITERATES, N_ENVS).replace("batch_size = 8", "batch_size = 64") + table)
    out = tmp_path / "x.zarr"
    assert _train(out, config, "sac_lag") != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0], err
    assert not out.exists()


def test_gpu_suite_offpolicy_runs_on_cpu_at_tiny_sizes(tmp_path: Path) -> None:
    """bench/gpu_suite_offpolicy.sh with its sizes as arguments (toy task: part 1 only) prints one OFFPOLICY
    line per run with a measured throughput, lambda for the constrained two and alpha."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "TASK": "toy", "OUT": str(tmp_path), "PYTHON": sys.executable, "ALGOS": "sac,sac_lag"}
    res = subprocess.run(["bash", str(root / "bench" / "gpu_suite_offpolicy.sh"), "8", "20", "2", "2", "256", "8",
                          "2", "8"], cwd=root, env=env, capture_output=True, text=True, timeout=900)
    log = (tmp_path / "gpu_suite_offpolicy.log").read_text()
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    lines = [dict(kv.split("=", 1) for kv in ln.split()[1:]) for ln in log.splitlines() if ln.startswith("OFFPOLICY ")]
    assert sorted((d["algo"], d["seed"]) for d in lines) == [("sac", "0"), ("sac", "1"), ("sac_lag", "0"),
                                                             ("sac_lag", "1")]
    for d in lines:
        assert d["status"] == "complete" and d["iterates"] == "2" and d["group"] == "2" and float(d["sps"]) > 0
        assert 0 < float(d["alpha"]) < 1 and (d["lambda"] == "nan") == (d["algo"] == "sac")


@pytest.mark.crax
@pytest.mark.slow
def test_smoke_preset_sac_lag_on_circle(tmp_path: Path) -> None:
    """`saferl train --preset smoke --algos sac_lag` on crax's circle (MJX; minutes of compile on a CPU): every
    training episode, paired evaluations, lambda and alpha in the cube."""
    pytest.importorskip("crax")
    out = tmp_path / "smoke.zarr"
    assert main(["train", "--preset", "smoke", "--algos", "sac_lag", "--seeds", "0", "--out", str(out),
                 "--no-progress"]) == 0
    ds = open_cube(out)
    one = ds.sel(algo="sac_lag", task="circle", seed=0).isel(bound=0)
    modes = list(ds["mode"].values)
    cost = np.asarray(one["cost"].values)  # [iterate, episode, mode]
    assert (np.isfinite(cost[..., modes.index("train")]).sum(axis=-1) == 16).all()
    assert np.isfinite(cost[-1, :, modes.index("greedy")]).sum() == 8
    assert np.isfinite(np.asarray(one["multiplier"].values)).all()
    assert (np.asarray(one["alpha"].values) < 1).all()
