"""cube.Recorder: any trainer's episodes into a cube, growing the store, several processes at once."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import numpy as np
import pytest

import cube
from cube import CubeError, Recorder, open_cube, read_manifests, validate


def _run(path: Path, **labels) -> object:
    ds = open_cube(path)
    return ds.sel(**labels).compute()


def test_record_a_run_from_nothing(tmp_path: Path) -> None:
    path = tmp_path / "mine.zarr"
    rng = np.random.default_rng(0)
    kept = {}
    with Recorder(path, algo="my_lag", task="SafetyPointGoal1", bound=25.0, seed=3,
                  manifest={"lr": 3e-4}) as rec:
        assert read_manifests(path)[0]["status"] == "partial"
        for j in range(20):  # more iterates than one chunk holds: the store grows
            n = 3 + j % 5
            r, c = rng.normal(size=n), rng.gamma(2.0, 10.0, size=n)
            for i in range(n):  # one call per finished episode: buffered, one write per iterate
                rec.train_episodes(j, r[i:i + 1], c[i:i + 1])
            rec.iterate_vars(j, multiplier=0.1 * j, env_steps=1000 * (j + 1), kl=0.01)
            kept[j] = (r, c)
        rec.eval_episodes(19, "greedy", np.ones(100), np.arange(100.0))  # more episodes than slots
    assert validate(path) == []
    run = _run(path, algo="my_lag", task="SafetyPointGoal1", bound=25.0, seed=3)
    assert run.sizes["iterate"] == 20 and run.sizes["episode"] == 100
    for j, (r, c) in kept.items():
        got = run.cost.sel(mode="train", iterate=j).values
        np.testing.assert_allclose(got[: len(c)], c.astype(np.float32))
        assert np.isnan(got[len(c):]).all()
        np.testing.assert_allclose(run.reward.sel(mode="train", iterate=j).values[: len(r)], r.astype(np.float32))
    np.testing.assert_allclose(run.cost.sel(mode="greedy", iterate=19).values, np.arange(100.0))
    np.testing.assert_allclose(run.multiplier.values, 0.1 * np.arange(20))
    np.testing.assert_allclose(run["kl"].values, 0.01)
    row = read_manifests(path)[0]
    assert row["status"] == "complete" and row["lr"] == 3e-4 and "finished" in row


def test_costs_without_rewards_and_stats(tmp_path: Path) -> None:
    path = tmp_path / "costs.zarr"
    with Recorder(path, algo="a", task="t", bound=10.0, seed=0) as rec:
        rec.eval_episodes(0, "greedy", None, [5.0, 15.0, 20.0])
    ss = cube.stats.load_suffstats(path, cache=False)
    im = cube.stats.iterate_metrics(ss, "greedy").isel(iterate=0).squeeze()
    assert float(im["V"]) == pytest.approx(2 / 3) and float(im["C"]) == pytest.approx(40 / 3)
    assert np.isnan(float(im["R"]))


def test_a_failure_leaves_the_run_partial_with_what_was_recorded(tmp_path: Path) -> None:
    path = tmp_path / "crash.zarr"
    with pytest.raises(RuntimeError), Recorder(path, algo="a", task="t", bound=10.0, seed=0) as rec:
        rec.train_episodes(0, [1.0], [2.0])
        raise RuntimeError("trainer crashed")
    assert read_manifests(path)[0]["status"] == "partial"
    assert int(open_cube(path).cost.count()) == 1


def test_second_run_into_an_existing_store_keeps_the_first(tmp_path: Path) -> None:
    path = tmp_path / "two.zarr"
    with Recorder(path, algo="a", task="t", bound=10.0, seed=0) as rec:
        rec.train_episodes(0, [1.0, 2.0], [3.0, 4.0])
    chunks = {p: p.read_bytes() for p in (path / "cost" / "c").rglob("*") if p.is_file()}
    with Recorder(path, algo="b", task="t2", bound=20.0, seed=7) as rec:
        rec.train_episodes(2, [1.0] * 70, [1.0] * 70)
    after = {p: p.read_bytes() for p in (path / "cost" / "c").rglob("*") if p.is_file()}
    assert all(after[p] == data for p, data in chunks.items())  # no existing chunk rewritten
    np.testing.assert_allclose(_run(path, algo="a", task="t", bound=10.0, seed=0).cost.sel(
        mode="train", iterate=0).values[:2], [3.0, 4.0])
    assert validate(path) == []


@pytest.mark.parametrize(("call", "message"), [
    (lambda r: r.train_episodes(-1, [1.0], [1.0]), "non-negative integer"),
    (lambda r: r.train_episodes(0, [1.0, 2.0], [1.0]), "equal length"),
    (lambda r: r.eval_episodes(0, "test", [1.0], [1.0]), "unknown evaluation mode"),
    (lambda r: r.iterate_vars(0, cost=1.0), "reserved or invalid name"),
])
def test_bad_calls_are_one_line_errors(tmp_path: Path, call, message: str) -> None:
    with pytest.raises(CubeError, match=message), Recorder(tmp_path / "x.zarr", algo="a", task="t",
                                                           bound=1.0, seed=0) as rec:
        call(rec)
        rec.flush()


def test_negative_cost_refused_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "neg.zarr"
    with pytest.raises(CubeError, match="negative"), Recorder(path, algo="a", task="t", bound=1.0, seed=0) as rec:
        rec.train_episodes(0, [1.0], [-2.0])
    assert int(open_cube(path).cost.count()) == 0


def _record_in_process(path: str, algo: str, seed: int, start: object) -> None:
    start.wait()  # type: ignore[attr-defined]
    with Recorder(path, algo=algo, task=f"task_{seed % 2}", bound=10.0 + seed, seed=seed) as rec:
        for j in range(18):
            rec.train_episodes(j, np.full(3 + seed, j), np.full(3 + seed, seed * 100.0 + j))
            rec.iterate_vars(j, multiplier=float(seed), **{f"diag_{algo}": 1.0})


def test_processes_recording_different_runs_at_once_lose_nothing(tmp_path: Path) -> None:
    """Four processes create the store, add labels, grow iterates and episodes and add variables at the
    same moments: every episode of every run is there afterwards."""
    path = tmp_path / "shared.zarr"
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(4)
    jobs = [("alg_a", 0), ("alg_b", 1), ("alg_a", 2), ("alg_c", 3)]
    procs = [ctx.Process(target=_record_in_process, args=(str(path), a, s, start)) for a, s in jobs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    assert validate(path) == []
    ds = open_cube(path)
    for algo, seed in jobs:
        run = ds.sel(algo=algo, task=f"task_{seed % 2}", bound=10.0 + seed, seed=seed).compute()
        costs = run.cost.sel(mode="train").values
        for j in range(18):
            np.testing.assert_array_equal(costs[j, : 3 + seed], seed * 100.0 + j)
            assert np.isnan(costs[j, 3 + seed:]).all()
        np.testing.assert_array_equal(run.multiplier.values[:18], float(seed))
        assert np.isfinite(run[f"diag_{algo}"].values[:18]).all()
    statuses = {(r["algo"], r["task"], r["bound"], r["seed"]): r["status"] for r in read_manifests(path)}
    assert all(statuses[(a, f"task_{s % 2}", 10.0 + s, s)] == "complete" for a, s in jobs)
    assert sum(v == "complete" for v in statuses.values()) == len(jobs)  # the rest of the grid is pending


def test_an_iterate_written_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "twice.zarr"
    with Recorder(path, algo="a", task="t", bound=10.0, seed=0) as rec:
        rec.train_episodes(0, [1.0], [2.0])
        rec.train_episodes(1, [1.0], [3.0])  # iterate 0 is written now
        with pytest.raises(CubeError, match="iterate 0 were already written"):
            rec.train_episodes(0, [5.0], [5.0])
    np.testing.assert_array_equal(open_cube(path).cost.sel(mode="train", episode=0).squeeze().values, [2.0, 3.0])


def _record_until_killed(path: str, started: object) -> None:
    with Recorder(path, algo="a", task="t", bound=10.0, seed=0) as rec:
        for j in range(10_000):
            rec.train_episodes(j, np.ones(5), np.full(5, float(j)))
            if j == 3:
                started.set()  # type: ignore[attr-defined]


def test_a_recorder_killed_mid_run_leaves_a_partial_run_and_a_valid_store(tmp_path: Path) -> None:
    import os
    import signal

    path = tmp_path / "killed.zarr"
    ctx = mp.get_context("spawn")
    started = ctx.Event()
    proc = ctx.Process(target=_record_until_killed, args=(str(path), started))
    proc.start()
    assert started.wait(120)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    assert validate(path) == []
    assert read_manifests(path)[0]["status"] == "partial"
    costs = open_cube(path).cost.sel(mode="train").squeeze().values[:, 0]
    kept = costs[np.isfinite(costs)]
    np.testing.assert_array_equal(kept, np.arange(kept.size))  # every written iterate whole, none torn
    assert kept.size >= 3
