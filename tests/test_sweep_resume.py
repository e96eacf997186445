"""Real `saferl train` sweeps on the toy task: SIGKILL mid-sweep then resume, and the dask executor.

Each sweep trains 2 algos x 1 bound x 2 seeds = 4 toy runs of 24 iterates (8 envs, one 20-step episode
per env per iterate, evaluation and resume point every 2 iterates). A reference sweep run without
interruption gives the exact numbers every other store must hold: a resumed run restarts from the full
training state (optimiser, env states, RNG key), so its numbers are the uninterrupted ones.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")

from cube import open_cube, read_manifests  # noqa: E402
from tests.toyconfig import toy_config_toml  # noqa: E402

N_ITERATES = 24
N_ENVS = 8
CONFIG = toy_config_toml(N_ITERATES, N_ENVS) + """
[cluster]
executor = "local"
"""
GRID = ["--algos", "ppo,ppo_lag", "--tasks", "toy", "--bounds", "4", "--seeds", "0-1", "--no-progress"]
RUNS = [(a, s) for a in ("ppo", "ppo_lag") for s in (0, 1)]


@pytest.fixture(scope="module")
def sweep_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Config file and environment (toy task enabled, one persistent compile cache for the module)."""
    base = tmp_path_factory.mktemp("sweep")
    (base / "toy.toml").write_text(CONFIG)
    return {"config": str(base / "toy.toml"), "SAFERL_ENABLE_TOY": "1", "SAFERL_JAX_CACHE": str(base / "jax")}


def _in_process(sweep_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    from cube.cli import main

    for name in ("SAFERL_ENABLE_TOY", "SAFERL_JAX_CACHE"):
        monkeypatch.setenv(name, sweep_env[name])
    return main(["train", *GRID, "--config", sweep_env["config"], *args])


@pytest.fixture(scope="module")
def reference(sweep_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted sweep (local executor, in this process)."""
    out = tmp_path_factory.mktemp("ref") / "ref.zarr"
    with pytest.MonkeyPatch.context() as mp:
        assert _in_process(sweep_env, mp, "--out", str(out)) == 0
    return out


def check_complete_and_equal(store: Path, reference: Path) -> None:
    """Every run complete; every iterate holds exactly N_ENVS train episodes (evals 5 at even-numbered ends);
    all numbers equal the reference sweep's."""
    assert [r["status"] for r in read_manifests(store)] == ["complete"] * len(RUNS)
    ds, ref = open_cube(store).load(), open_cube(reference).load()
    n = ds["cost"].notnull().sum("episode")
    assert (n.sel(mode="train") == N_ENVS).all()
    evals = np.arange(N_ITERATES) % 2 == 1
    for mode in ("expl", "greedy"):
        assert (n.sel(mode=mode).values[..., evals] == 5).all() and (n.sel(mode=mode).values[..., ~evals] == 0).all()
    for var in ("reward", "cost", "env_steps", "multiplier", "n_updates"):
        np.testing.assert_allclose(ds[var].values, ref[var].values, rtol=1e-5, atol=1e-6, err_msg=var)
    steps = ds["env_steps"].values.reshape(len(RUNS), N_ITERATES)
    assert (np.diff(steps, axis=1) > 0).all()


def _progress(store: Path) -> tuple[list[str], np.ndarray] | None:
    """(status per run, iterates with env_steps per run) read straight from the store; None mid-write."""
    import zarr

    try:
        status = [r["status"] for r in read_manifests(store)]
        steps = np.asarray(zarr.open_array(store / "env_steps", mode="r")[:]).reshape(len(RUNS), N_ITERATES)
    except Exception:  # a chunk being replaced or the store not created yet
        return None
    return status, (~np.isnan(steps)).sum(axis=1)


def test_sigkill_mid_sweep_then_restart(sweep_env: dict[str, str], reference: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "killed.zarr"
    env = {**os.environ, "SAFERL_ENABLE_TOY": "1", "SAFERL_JAX_CACHE": sweep_env["SAFERL_JAX_CACHE"]}
    code = "import sys; from cube.cli import main; sys.exit(main(sys.argv[1:]))"
    cmd = [sys.executable, "-c", code, "train", *GRID, "--config", sweep_env["config"], "--out", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 150
    try:
        # kill once a run is partial and past its first resume point (iterate 1), i.e. mid-run
        while True:
            seen = _progress(out) if (out / "zarr.json").exists() else None
            if seen and any(s == "partial" and k >= 4 for s, k in zip(*seen, strict=True)):
                break
            assert proc.poll() is None, f"the sweep ended before it could be killed: {proc.stderr.read()}"
            assert time.monotonic() < deadline, "no run got past iterate 3 within 150s"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    status, done = _progress(out)
    assert "partial" in status and status.count("complete") < len(RUNS)
    victim = RUNS[status.index("partial")]
    assert _in_process(sweep_env, monkeypatch, "--out", str(out)) == 0
    check_complete_and_equal(out, reference)
    rows = {(r["algo"], r["seed"]): r for r in read_manifests(out)}
    assert rows[victim]["resumed_from"] >= 1 and rows[victim]["resumed_from"] % 2 == 1
    # a third run finds everything complete and trains nothing
    assert _in_process(sweep_env, monkeypatch, "--out", str(out)) == 0
    assert {(r["algo"], r["seed"]): r["finished"] for r in read_manifests(out)} == {
        k: r["finished"] for k, r in rows.items()}


def test_dask_executor_fills_the_store_once(sweep_env: dict[str, str], reference: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip("distributed")
    out = tmp_path / "dask.zarr"
    for name in ("SAFERL_ENABLE_TOY", "SAFERL_JAX_CACHE"):
        monkeypatch.setenv(name, sweep_env[name])  # inherited by the worker processes
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0") as lc:
        rc = _in_process(sweep_env, monkeypatch, "--out", str(out), "--executor", "dask", lc.scheduler_address)
        workers = set(lc.scheduler_info["workers"])
    assert rc == 0
    check_complete_and_equal(out, reference)
    rows = read_manifests(out)
    assert all(r["executor"] == "dask" and r["retries"] == 0 and len(r["attempts"]) == 1 for r in rows)
    assert {r["attempts"][0]["worker"] for r in rows} <= workers


def test_two_processes_fill_one_store_concurrently(sweep_env: dict[str, str], reference: Path,
                                                   tmp_path: Path) -> None:
    """Two `saferl train` processes given the same grid: each run is trained by exactly one of them
    (per-run claims), the store holds every run once, and the numbers equal the reference sweep's."""
    out = tmp_path / "shared.zarr"
    env = {**os.environ, "SAFERL_ENABLE_TOY": "1", "SAFERL_JAX_CACHE": sweep_env["SAFERL_JAX_CACHE"]}
    code = "import sys; from cube.cli import main; sys.exit(main(sys.argv[1:]))"
    cmd = [sys.executable, "-c", code, "train", *GRID, "--config", sweep_env["config"], "--out", str(out)]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    logs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in logs]
    lines = [line for out_, err in logs for line in (out_ + err).splitlines()]
    trained = [line.split(":")[0] for line in lines if ": complete," in line]
    assert len(trained) == len(RUNS) and len(set(trained)) == len(RUNS), trained
    check_complete_and_equal(out, reference)
    assert not any((out / "_claims").rglob("*.claim"))  # every claim released
