"""Sweeps through train.executors: local and dask executors, and a real SLURM cluster (marked `slurm`).

The SLURM test needs a running SLURM with an idle node (`.ci/slurm_setup.sh` starts one on localhost);
it is skipped with the reason otherwise. It runs a sweep of 4 synthetic runs as 2 concurrent SLURM jobs,
holds two runs mid-way (behind a gate file) on two different jobs, cancels one of those jobs with
`scancel`, then opens the gate, and checks that every run completes with each iterate written once.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from cube import CubeError, CubeWriter, RunKey, create_store, open_cube, read_manifests
from train.executors import (
    DaskExecutor,
    LocalExecutor,
    SlurmExecutor,
    SlurmSpec,
    add_executor_arguments,
    executor_from_args,
    read_cluster_table,
    record_outcome,
)
from train.placement import current_placement

N_ITERATES = 4
N_SLOTS = 6
HOLD_AT = 2  # runs wait at this iterate until the gate file exists
KEYS = [RunKey(a, "goal", 25.0, s) for a in ("ppo", "ppo_lag") for s in (0, 1)]


def expected_episodes(key: RunKey, j: int) -> tuple[np.ndarray, np.ndarray]:
    """The deterministic episodes of run `key` at iterate j: 3..5 of them (reward, cost)."""
    n = 3 + (j + key.seed + len(key.algo)) % 3
    base = 100.0 * key.seed + 10.0 * j + (0.5 if key.algo == "ppo" else 0.0)
    return base + np.arange(n), base / 4 + np.arange(n)


def iterates_done(store: Path, key: RunKey) -> int:
    """Leading iterates already committed (env_steps is written after the episodes of an iterate)."""
    steps = open_cube(store)["env_steps"].sel(algo=key.algo, task=key.task, bound=key.bound, seed=key.seed).values
    return int(np.argmin(np.append(~np.isnan(steps), False)))


def wait_for(what: str, check: Callable[[], bool], deadline_s: float, every_s: float = 0.2) -> None:
    """Poll `check` until it holds; fail the test naming `what` after `deadline_s` seconds."""
    end = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > end:
            pytest.fail(f"timed out after {deadline_s:g}s waiting for {what}")
        time.sleep(every_s)


@dataclass(frozen=True)
class SyntheticRun:
    """run_one for the tests: resumable, writes N_ITERATES iterates of synthetic episodes, then `complete`.

    Each iterate written appends "iterate placement-json" to `log_dir/<run>.log`, so a test can count
    how often every iterate was written across attempts. `gate`: if set, the run waits before
    iterate HOLD_AT until that file exists.
    """

    store: str
    log_dir: str
    gate: str | None = None
    fail_first: bool = False

    def __call__(self, key: RunKey) -> dict:
        writer = CubeWriter(self.store)
        where = current_placement()
        writer.set_run_manifest(key, status="partial", manifest={**where, "notes": "running"})
        log = Path(self.log_dir) / f"{key.algo}-{key.seed}.log"
        if self.fail_first and not log.exists():
            log.write_text("")
            raise RuntimeError("first attempt fails on purpose")
        start = iterates_done(Path(self.store), key)
        for j in range(start, N_ITERATES):
            if j == HOLD_AT and self.gate is not None:
                self._wait_gate()
            reward, cost = expected_episodes(key, j)
            writer.write_episodes(key, "train", j, reward, cost)
            writer.write_iterate_vars(key, j, {"env_steps": 1000.0 * (j + 1)})
            with log.open("a") as f:
                f.write(f"{j} {json.dumps(where)}\n")
        writer.set_run_manifest(key, status="complete", manifest={**where, "iterates": N_ITERATES})
        return {"resumed_at": start, **where}

    def _wait_gate(self) -> None:
        end = time.monotonic() + 300
        while not Path(self.gate).exists():
            if time.monotonic() > end:
                raise TimeoutError(f"gate {self.gate} never opened")
            time.sleep(0.1)


def make_store(tmp_path: Path) -> Path:
    store = tmp_path / "sweep.zarr"
    create_store(store, algos=["ppo", "ppo_lag"], tasks=["goal"], bounds=[25.0], seeds=[0, 1],
                 n_iterates=N_ITERATES, n_episodes=N_SLOTS)
    (tmp_path / "logs").mkdir()
    return store


def written(tmp_path: Path, key: RunKey) -> list[tuple[int, dict]]:
    path = tmp_path / "logs" / f"{key.algo}-{key.seed}.log"
    if not path.exists():
        return []
    rows = [line.split(" ", 1) for line in path.read_text().splitlines() if line]
    return [(int(j), json.loads(w)) for j, w in rows]


def check_store(store: Path, tmp_path: Path) -> None:
    """Every run complete, each iterate written exactly once, episodes exactly the expected ones."""
    ds = open_cube(store)
    for key in KEYS:
        one = ds.sel(algo=key.algo, task=key.task, bound=key.bound, seed=key.seed, mode="train")
        for j in range(N_ITERATES):
            reward, cost = expected_episodes(key, j)
            got_r, got_c = one["reward"].values[j], one["cost"].values[j]
            assert np.count_nonzero(~np.isnan(got_c)) == reward.size, (key, j)
            np.testing.assert_array_equal(got_r[: reward.size], reward.astype(np.float32))
            np.testing.assert_array_equal(got_c[: cost.size], cost.astype(np.float32))
        assert sorted(j for j, _ in written(tmp_path, key)) == list(range(N_ITERATES)), key
    rows = read_manifests(store)
    assert [r["status"] for r in rows] == ["complete"] * len(KEYS)


# ------------------------------------------------------------------------------ without a cluster
def test_local_executor_runs_and_retries(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    seen = []
    with LocalExecutor(retries=1) as ex:
        out = ex.map(SyntheticRun(str(store), str(tmp_path / "logs"), fail_first=True), KEYS, seen.append)
    assert [o.key for o in out] == KEYS and seen == out
    assert all(o.status == "complete" and o.retries == 1 and o.host for o in out)
    assert out[0].manifest_fields()["retries"] == 1
    check_store(store, tmp_path)
    for o in out:
        record_outcome(store, o)
    rows = read_manifests(store)
    assert [(r["status"], r["retries"], r["executor"], len(r["attempts"])) for r in rows] == [
        ("complete", 1, "local", 2)] * len(KEYS)
    assert all(r["iterates"] == N_ITERATES for r in rows)  # the run's own manifest fields are kept


def test_local_executor_gives_up_after_retries(tmp_path: Path) -> None:
    store = make_store(tmp_path)

    def broken(key: RunKey) -> dict:
        CubeWriter(store).set_run_manifest(key, status="partial", manifest={"notes": "running"})
        raise ValueError(f"bad run {key.seed}")

    out = LocalExecutor(retries=2).map(broken, KEYS[:1])
    assert out[0].status == "failed" and out[0].retries == 2
    assert out[0].error == "ValueError: bad run 0"
    record_outcome(store, out[0])
    row = read_manifests(store)[0]
    assert (row["status"], row["retries"], row["error"]) == ("partial", 2, "ValueError: bad run 0")


def test_dask_executor_on_local_cluster(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    store = make_store(tmp_path)
    # LocalCluster's worker processes inherit sys.path, so they import this module like pytest did.
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0") as lc:
        with DaskExecutor(lc.scheduler_address, retries=1) as ex:
            out = ex.map(SyntheticRun(str(store), str(tmp_path / "logs"), fail_first=True), KEYS)
        workers = set(lc.scheduler_info["workers"])
    assert all(o.status == "complete" for o in out), [o.error for o in out]
    assert all(o.retries == 1 and o.worker in workers and o.executor == "dask" for o in out)
    check_store(store, tmp_path)


def test_executor_flags_and_cluster_table(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_executor_arguments(parser)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cluster]\nexecutor = "slurm"\npartition = "gpu"\naccount = "rl"\ngpus-per-job = 1\n'
                   'walltime = "02:30:00"\njobs = 8\nretries = 3\nprologue = ["source venv/bin/activate"]\n')
    table = read_cluster_table(cfg)
    ex = executor_from_args(parser.parse_args(["--jobs", "16", "--memory", "32GB"]), table)
    assert isinstance(ex, SlurmExecutor) and ex.retries == 3
    assert ex.spec == SlurmSpec(partition="gpu", account="rl", gpus_per_job=1, walltime="02:30:00", jobs=16,
                                memory="32GB", prologue=("source venv/bin/activate",))
    assert isinstance(executor_from_args(parser.parse_args([]), {}), LocalExecutor)
    dask_ex = executor_from_args(parser.parse_args(["--executor", "dask", "tcp://h:8786"]), table)
    assert isinstance(dask_ex, DaskExecutor) and dask_ex.address == "tcp://h:8786"
    for argv, match in ((["--executor", "pbs"], "unknown executor"), (["--executor", "local", "x"], "no argument"),
                        (["--executor", "slurm", "--walltime", "2h"], "walltime"),
                        (["--executor", "slurm", "--jobs", "0"], "jobs"),
                        (["--executor", "slurm", "--memory", "lots"], "memory")):
        with pytest.raises(CubeError, match=match):
            executor_from_args(parser.parse_args(argv), {})
    with pytest.raises(CubeError, match="unknown key 'nodes'"):
        SlurmSpec.from_table({"nodes": 2})


def test_slurm_job_script_has_the_requested_resources() -> None:
    pytest.importorskip("dask_jobqueue")
    spec = SlurmSpec(partition="gpu", account="rl", gpus_per_job=2, gpu_type="a100", cpus_per_job=8, memory="32GB",
                     walltime="1-00:00:00", prologue=("module load cuda",), job_extra=("--qos=high",))
    script = SlurmExecutor(spec).job_script()
    for line in ("#SBATCH -p gpu", "#SBATCH -A rl", "#SBATCH --cpus-per-task=8", "#SBATCH -t 1-00:00:00",
                 "#SBATCH --gres=gpu:a100:2", "#SBATCH --qos=high", "module load cuda", "--resources run=1",
                 sys.executable):
        assert line in script, line


def test_slurm_executor_without_sbatch_is_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("dask_jobqueue")
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    with pytest.raises(CubeError, match="needs sbatch on PATH"):
        SlurmExecutor(SlurmSpec()).map(len, ["x"])


# ---------------------------------------------------------------------------------------- SLURM
def _idle_slurm() -> str | None:
    """None if a SLURM node is idle (or partly used), else why the test cannot run."""
    if shutil.which("sinfo") is None or shutil.which("squeue") is None:
        return "SLURM is not installed (no sinfo/squeue); run .ci/slurm_setup.sh as root to start one"
    try:
        res = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 10s: slurmctld is not running (run .ci/slurm_setup.sh)"
    states = res.stdout.split()
    if res.returncode != 0 or not any(s in ("idle", "mix") for s in states):
        return f"no idle SLURM node (sinfo: {(res.stdout + res.stderr).strip()[:120] or 'nothing'})"
    return None


def _need_idle_slurm() -> None:
    """Skip the calling test, saying why, unless a SLURM node is idle and dask-jobqueue is installed."""
    reason = _idle_slurm()
    if reason:
        pytest.skip(reason)
    pytest.importorskip("dask_jobqueue")


def _squeue(name: str) -> dict[str, str]:
    res = subprocess.run(["squeue", "-h", "-n", name, "-o", "%i %T"], capture_output=True, text=True, check=True)
    return dict(line.split() for line in res.stdout.splitlines() if line.strip())


@pytest.mark.slurm
def test_slurm_sweep_survives_a_cancelled_job(tmp_path: Path) -> None:
    _need_idle_slurm()
    store = make_store(tmp_path)
    gate = tmp_path / "gate"
    # The jobs' workers unpickle SyntheticRun by reference: put this test directory on their path.
    spec = SlurmSpec(cpus_per_job=1, memory="2GB", walltime="00:10:00", jobs=2, job_name="saferl-test",
                     log_directory=str(tmp_path / "slurm-logs"),
                     prologue=(f'export PYTHONPATH="{Path(__file__).parent}:$PYTHONPATH"',))
    run_one = SyntheticRun(str(store), str(tmp_path / "logs"), gate=str(gate))
    outcomes: list = []
    errors: list[BaseException] = []
    t0 = time.perf_counter()
    ex = SlurmExecutor(spec, retries=2)
    name = ex.job_name

    def sweep() -> None:
        try:
            outcomes.extend(ex.map(run_one, KEYS))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=sweep, daemon=True)
    thread.start()
    try:
        # Two runs reach the gate on two different, concurrently running jobs.
        def held() -> dict[str, RunKey]:
            at_gate = {}
            for key in KEYS:
                rows = written(tmp_path, key)
                if len(rows) == HOLD_AT:
                    at_gate[rows[-1][1]["slurm_job_id"]] = key
            return at_gate

        # 300 s: two dask workers start under SLURM and import the stack while the suite runs beside them.
        try:
            wait_for("two runs held mid-way on two SLURM jobs", lambda: len(held()) >= 2 or not thread.is_alive(),
                     300)
        except BaseException:
            rows = {f"{k.algo}/{k.seed}": len(written(tmp_path, k)) for k in KEYS}
            print(f"iterates written per run: {rows}; jobs: {_squeue(name)}; errors: {errors}")
            raise
        assert thread.is_alive(), f"the sweep ended early: {errors or [o.error for o in outcomes]}"
        at_gate = held()
        jobs = _squeue(name)
        assert all(jobs.get(j) == "RUNNING" for j in at_gate), (at_gate, jobs)
        victim_job = sorted(at_gate)[0]
        victim = at_gate[victim_job]
        subprocess.run(["scancel", victim_job], check=True)
        wait_for(f"job {victim_job} to end", lambda: victim_job not in _squeue(name), 60)
        gate.touch()
        thread.join(timeout=150)
        assert not thread.is_alive(), "the sweep did not finish within 150s of the cancellation"
        assert not errors, errors
    finally:
        gate.touch()
        ex.close()
    took = time.perf_counter() - t0
    wait_for(f"the sweep's jobs ({name}) to be gone", lambda: not _squeue(name), 30)
    print(f"\nSLURM sweep of {len(KEYS)} runs on 2 jobs, one cancelled: {took:.1f}s")

    by_key = {o.key: o for o in outcomes}
    assert set(by_key) == set(KEYS) and all(o.status == "complete" for o in outcomes), [o.error for o in outcomes]
    lost = by_key[victim]
    assert lost.retries >= 1 and lost.attempts[0]["slurm_job_id"] == victim_job
    assert lost.slurm_job_id not in (None, victim_job) and lost.result["resumed_at"] == HOLD_AT
    assert all(o.slurm_job_id and o.host for o in outcomes)
    check_store(store, tmp_path)
    history = written(tmp_path, victim)
    assert {w["slurm_job_id"] for j, w in history if j < HOLD_AT} == {victim_job}
    assert victim_job not in {w["slurm_job_id"] for j, w in history if j >= HOLD_AT}
    manifests = {(r["algo"], r["seed"]): r for r in read_manifests(store)}
    assert manifests[(victim.algo, victim.seed)]["slurm_job_id"] == lost.slurm_job_id


@pytest.mark.slurm
def test_slurm_refusal_is_one_line_error(tmp_path: Path) -> None:
    _need_idle_slurm()
    ex = SlurmExecutor(SlurmSpec(partition="no-such-partition", walltime="00:05:00", memory="1GB"))
    with pytest.raises(CubeError, match="SLURM refuses the job .*partition") as err, ex:
        ex.map(SyntheticRun(str(tmp_path), str(tmp_path)), KEYS)
    assert "\n" not in str(err.value)
    assert not _squeue(ex.job_name)


def _zarr_iterates(store: Path, row: dict) -> int:
    """Iterates with env_steps written for one run, read with zarr directly (no dask: a distributed client
    is active in the sweep's thread)."""
    import zarr

    steps = np.asarray(zarr.open_array(store / "env_steps", mode="r")[:])
    algos = [str(a) for a in zarr.open_array(store / "algo", mode="r")[:]]
    seeds = [int(s) for s in zarr.open_array(store / "seed", mode="r")[:]]
    return int((~np.isnan(steps[algos.index(row["algo"]), 0, 0, seeds.index(row["seed"])])).sum())


@pytest.mark.slurm
def test_saferl_train_executor_slurm_toy_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`saferl train --executor slurm` on the toy task: 4 runs on 2 jobs, one job cancelled mid-run; every
    run completes once, the lost run resumes on another job from its last resume point."""
    _need_idle_slurm()
    pytest.importorskip("jax")
    from cube.cli import main

    n_it, n_envs = 120, 8
    cfg = tmp_path / "toy.toml"
    cfg.write_text(f"total_env_steps = {n_it * n_envs * 20}\nepisode_length = 20\nnum_envs = {n_envs}\n"
                   "unroll_length = 4\nbatch_size = 8\nnum_minibatches = 2\nnum_epochs = 1\npolicy_hidden = [8]\n"
                   "value_hidden = [8]\ncost_value_hidden = [8]\neval_episodes = 5\neval_every = 4\n"
                   f'[cluster]\nexecutor = "slurm"\njobs = 2\ncpus-per-job = 1\nmemory = "3GB"\n'
                   f'walltime = "00:10:00"\nretries = 2\nlog-directory = "{tmp_path / "slurm-logs"}"\n')
    out = tmp_path / "sweep.zarr"
    monkeypatch.setenv("SAFERL_ENABLE_TOY", "1")
    monkeypatch.setenv("SAFERL_JAX_CACHE", str(tmp_path / "jax"))  # exported to the jobs by sbatch
    rc: list[int] = []
    thread = threading.Thread(target=lambda: rc.append(main(
        ["train", "--algos", "ppo,ppo_lag", "--tasks", "toy", "--bounds", "4", "--seeds", "0-1", "--out", str(out),
         "--config", str(cfg), "--no-progress"])), daemon=True)
    t0 = time.perf_counter()
    thread.start()

    def victim() -> dict | None:
        if not (out / "zarr.json").exists():
            return None
        try:
            rows = read_manifests(out)
        except Exception:  # a manifest chunk being replaced
            return None
        for row in rows:
            if row["status"] == "partial" and row.get("slurm_job_id") and _zarr_iterates(out, row) >= 6:
                return row
        return None

    wait_for("a run past its first resume point on a SLURM job", lambda: victim() is not None or not thread.is_alive(),
             240, every_s=0.05)
    assert thread.is_alive(), f"the sweep ended before a job could be cancelled (rc {rc})"
    lost = victim()
    subprocess.run(["scancel", lost["slurm_job_id"]], check=True)
    thread.join(timeout=300)
    assert not thread.is_alive() and rc == [0], rc
    print(f"\nsaferl train --executor slurm, 4 toy runs on 2 jobs, one cancelled: {time.perf_counter() - t0:.1f}s")
    rows = {(r["algo"], r["seed"]): r for r in read_manifests(out)}
    assert all(r["status"] == "complete" and r["executor"] == "slurm" for r in rows.values())
    again = rows[(lost["algo"], lost["seed"])]
    assert again["retries"] >= 1 and again["slurm_job_id"] != lost["slurm_job_id"]
    assert again["resumed_from"] is not None and again["resumed_from"] % 4 == 3
    import dask

    with dask.config.set(scheduler="threads"):
        ds = open_cube(out).load()
    assert (ds["cost"].sel(mode="train").notnull().sum("episode") == n_envs).all()  # every iterate once, whole
    assert (np.diff(ds["env_steps"].values.reshape(4, n_it), axis=1) > 0).all()
