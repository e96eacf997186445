"""Dispatch the independent runs of a sweep: in this process, on a dask cluster, or as SLURM jobs.

A unit of work is a picklable callable ``run_one(key) -> dict`` that trains (or resumes) one run and
writes only its own region of one store on a filesystem every worker sees. It must be idempotent:
started again after being killed, it resumes from its last checkpoint (or from scratch) and never marks
a half-written run complete. The executors only place and retry such calls; scheduling is dask's:

    local             in-process, one run after another
    dask ADDRESS      an existing dask.distributed scheduler (``dask scheduler`` + ``dask worker``)
    slurm             dask-jobqueue's SLURMCluster: ``jobs`` SLURM jobs, each one dask worker that runs
                      one run at a time (worker resource ``run=1``)

Lost work (an exception, a worker or job killed, a node failure, the walltime) is retried up to
``retries`` times: dask's ``retries=`` for exceptions, the scheduler's ``allowed-failures`` for tasks
whose worker died (rescheduled on another worker), and for SLURM, jobs that disappeared are resubmitted
so the sweep keeps ``jobs`` workers. Every attempt reports where it started (host, SLURM job id,
worker) as a dask event; :class:`RunOutcome` returns that with the retry count, for the run manifest.

``distributed`` and ``dask_jobqueue`` are imported only when a dask or SLURM executor is used.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from cube.errors import CubeError
from train.placement import current_placement

EXECUTORS = ("local", "dask", "slurm")
DEFAULT_RETRIES = 2
RUN_RESOURCE = "run"
EVENT_TOPIC = "saferl-run"
RunOne = Callable[[Any], dict]
OnDone = Callable[["RunOutcome"], None]

__all__ = ["EXECUTORS", "SlurmSpec", "RunOutcome", "Executor", "LocalExecutor", "DaskExecutor", "SlurmExecutor",
           "record_outcome", "make_executor", "add_executor_arguments", "executor_from_args",
           "read_cluster_table"]


def _attempt(run_one: RunOne, key: Any, topic: str) -> dict[str, Any]:
    """Run ``run_one(key)`` on a dask worker, first logging where this attempt starts under ``topic``."""
    from distributed import get_worker

    where = current_placement()
    get_worker().log_event(topic, {**where, "start": time.time()})
    t0 = time.perf_counter()
    result = run_one(key)
    return {"result": result, "where": where, "elapsed_s": time.perf_counter() - t0}


@dataclass
class RunOutcome:
    """What happened to one run of a sweep.

    status: "complete" (run_one returned) or "failed" (retries exhausted; ``error`` says why).
    host / slurm_job_id / worker: where the last attempt ran (None where unknown or not applicable).
    attempts: one placement dict per started attempt, oldest first; retries = len(attempts) - 1.
    """

    key: Any
    status: str
    result: dict | None = None
    error: str | None = None
    host: str | None = None
    slurm_job_id: str | None = None
    worker: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = float("nan")
    executor: str = "local"

    @property
    def retries(self) -> int:
        return max(0, len(self.attempts) - 1)

    def manifest_fields(self) -> dict[str, Any]:
        """JSON-able fields for the run manifest: executor, host, slurm_job_id, retries, attempts."""
        out: dict[str, Any] = {"executor": self.executor, "host": self.host, "retries": self.retries,
                               "attempts": [dict(a) for a in self.attempts]}
        if self.slurm_job_id is not None:
            out["slurm_job_id"] = self.slurm_job_id
        if self.error is not None:
            out["error"] = self.error
        return out


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


# ------------------------------------------------------------------------------------------- executors
class Executor:
    """Runs ``run_one`` for every key of a sweep; ``map`` returns one RunOutcome per key, in order."""

    name = "base"

    def __init__(self, retries: int = DEFAULT_RETRIES) -> None:
        if retries < 0:
            raise CubeError(f"retries must be >= 0, got {retries}")
        self.retries = retries

    def map(self, run_one: RunOne, keys: Sequence[Any], on_done: OnDone | None = None) -> list[RunOutcome]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the executor holds (connections, SLURM jobs)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalExecutor(Executor):
    """In this process, one run after another; an exception is retried up to ``retries`` times."""

    name = "local"

    def map(self, run_one: RunOne, keys: Sequence[Any], on_done: OnDone | None = None) -> list[RunOutcome]:
        outcomes = []
        for key in keys:
            outcome = RunOutcome(key, "failed", executor=self.name)
            t0 = time.perf_counter()
            while outcome.status != "complete" and len(outcome.attempts) <= self.retries:
                where = current_placement()
                outcome.attempts.append({**where, "start": time.time()})
                outcome.host, outcome.slurm_job_id = where["host"], where.get("slurm_job_id")
                try:
                    outcome.result = run_one(key)
                    outcome.status, outcome.error = "complete", None
                except Exception as exc:  # retried, then reported in the outcome
                    outcome.error = _one_line(exc)
            outcome.elapsed_s = time.perf_counter() - t0
            outcomes.append(outcome)
            if on_done:
                on_done(outcome)
        return outcomes


class DaskExecutor(Executor):
    """Submits every run to a dask.distributed scheduler and waits for all of them.

    ``address``: an existing scheduler (CubeError if it cannot be reached). Subclasses provide their own
    cluster through ``_client()``. Runs are submitted with ``retries`` (exceptions); a run whose worker
    died is rescheduled by the scheduler up to its ``distributed.scheduler.allowed-failures``.
    """

    name = "dask"
    poll_s = 2.0

    def __init__(self, address: str | None = None, retries: int = DEFAULT_RETRIES,
                 connect_timeout: float = 10.0) -> None:
        super().__init__(retries)
        self.address = address
        self.connect_timeout = connect_timeout
        self.client: Any = None

    def _client(self) -> Any:
        if self.client is None:
            from cube.compute import connect

            if not self.address:
                raise CubeError("--executor dask needs a scheduler address, e.g. --executor dask tcp://host:8786")
            self.client = connect(self.address, timeout=self.connect_timeout)
        return self.client

    def _submit_options(self) -> dict[str, Any]:
        return {}

    def _tick(self, n_pending: int) -> None:
        """Called every ``poll_s`` seconds while runs are pending (SLURM: replace lost jobs)."""

    def map(self, run_one: RunOne, keys: Sequence[Any], on_done: OnDone | None = None) -> list[RunOutcome]:
        from distributed import wait

        client = self._client()
        sweep = uuid.uuid4().hex[:8]
        topics = [f"{EVENT_TOPIC}-{sweep}-{i}" for i in range(len(keys))]
        futures = [client.submit(_attempt, run_one, key, topic, key=f"saferl-run-{sweep}-{i}", pure=False,
                                 retries=self.retries, **self._submit_options())
                   for i, (key, topic) in enumerate(zip(keys, topics, strict=True))]
        index = {f.key: i for i, f in enumerate(futures)}
        outcomes: list[RunOutcome | None] = [None] * len(keys)
        t0 = time.perf_counter()
        pending = set(futures)
        try:
            while pending:
                try:
                    with client.as_current():
                        done = wait(list(pending), timeout=self.poll_s, return_when="FIRST_COMPLETED").done
                except TimeoutError:
                    done = set()
                for fut in done:
                    pending.discard(fut)
                    i = index[fut.key]
                    outcomes[i] = self._outcome(client, fut, keys[i], topics[i], time.perf_counter() - t0)
                    fut.release()
                    if on_done:
                        on_done(outcomes[i])
                if pending:
                    self._tick(len(pending))
        except BaseException:
            client.cancel(list(pending))
            raise
        return [o for o in outcomes if o is not None]

    def _outcome(self, client: Any, fut: Any, key: Any, topic: str, elapsed: float) -> RunOutcome:
        attempts = [dict(msg) for _, msg in client.get_events(topic)]
        out = RunOutcome(key, "failed", attempts=attempts, elapsed_s=elapsed, executor=self.name)
        if fut.status == "finished":
            value = fut.result()
            out.status, out.result, where = "complete", value["result"], value["where"]
            out.elapsed_s = value["elapsed_s"]
        else:
            exc = fut.exception() if fut.status == "error" else None
            out.error = _one_line(exc) if exc is not None else f"run {fut.status}"
            where = attempts[-1] if attempts else {}
        out.host, out.slurm_job_id, out.worker = where.get("host"), where.get("slurm_job_id"), where.get("worker")
        return out

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


# ----------------------------------------------------------------------------------------------- SLURM
_WALLTIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")


@dataclass(frozen=True)
class SlurmSpec:
    """What each SLURM job asks for, and how many jobs (= dask workers, one run at a time each).

    memory: per job ("16GB"), also the dask worker's memory limit. walltime: SLURM syntax
    ("HH:MM:SS", "D-HH:MM:SS"). gpus_per_job > 0 adds ``--gres=gpu[:gpu_type]:N``. prologue: shell lines
    run before the worker starts (``source /path/venv/bin/activate``, ``module load cuda``). job_extra:
    more ``#SBATCH`` options ("--qos=normal"). python: the interpreter on the compute nodes (default:
    this one). interface: network interface the workers reach the scheduler on (e.g. "ib0").
    """

    partition: str | None = None
    account: str | None = None
    gpus_per_job: int = 0
    gpu_type: str | None = None
    cpus_per_job: int = 4
    memory: str = "16GB"
    walltime: str = "04:00:00"
    jobs: int = 1
    python: str | None = None
    prologue: tuple[str, ...] = ()
    job_extra: tuple[str, ...] = ()
    interface: str | None = None
    log_directory: str | None = None
    local_directory: str | None = None
    job_name: str = "saferl-worker"

    def __post_init__(self) -> None:
        from dask.utils import parse_bytes

        for name in ("gpus_per_job", "cpus_per_job", "jobs"):
            value = getattr(self, name)
            low = 0 if name == "gpus_per_job" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise CubeError(f"cluster {name.replace('_', '-')} must be an integer >= {low}, got {value!r}")
        if not _WALLTIME.match(str(self.walltime)):
            raise CubeError(f"cluster walltime {self.walltime!r} is not SLURM syntax: use HH:MM:SS or D-HH:MM:SS")
        try:
            parse_bytes(str(self.memory))
        except (ValueError, TypeError):
            raise CubeError(f"cluster memory {self.memory!r} is not a size: use e.g. 16GB or 4000MB") from None

    @classmethod
    def from_table(cls, table: Mapping[str, Any] | None = None, **overrides: Any) -> SlurmSpec:
        """A spec from a ``[cluster]`` TOML table (keys as the fields, '-' or '_'), then non-None overrides."""
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for raw, value in {**(table or {}), **{k: v for k, v in overrides.items() if v is not None}}.items():
            name = raw.replace("-", "_")
            if name in ("executor", "scheduler", "retries"):
                continue
            if name not in known:
                raise CubeError(f"unknown key {raw!r} in [cluster]: use {', '.join(sorted(known))}")
            values[name] = tuple(value) if name in ("prologue", "job_extra") else value
        return cls(**values)

    def cluster_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``dask_jobqueue.SLURMCluster`` (one worker process per job)."""
        extra = list(self.job_extra)
        if self.gpus_per_job:
            gpu = f"gpu:{self.gpu_type}:{self.gpus_per_job}" if self.gpu_type else f"gpu:{self.gpus_per_job}"
            extra.append(f"--gres={gpu}")
        kwargs: dict[str, Any] = {
            "queue": self.partition, "account": self.account, "cores": self.cpus_per_job, "processes": 1,
            "memory": self.memory, "walltime": self.walltime, "job_name": self.job_name,
            "python": self.python or sys.executable, "job_extra_directives": extra,
            "job_script_prologue": list(self.prologue), "worker_extra_args": ["--resources", f"{RUN_RESOURCE}=1"],
            "death_timeout": 120, "scheduler_options": {"dashboard_address": ":0"},
        }
        for name in ("interface", "log_directory", "local_directory"):
            if getattr(self, name) is not None:
                kwargs[name] = getattr(self, name)
        return kwargs


def _test_submit(script: str) -> None:
    """CubeError (one line) if SLURM would refuse this batch script (``sbatch --test-only``, submits nothing)."""
    with tempfile.NamedTemporaryFile("w", suffix=".sh", prefix="saferl-job-") as f:
        f.write(script)
        f.flush()
        try:
            res = subprocess.run(["sbatch", "--test-only", f.name], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            raise CubeError("sbatch --test-only did not answer within 60s: is slurmctld reachable?") from None
    if res.returncode != 0:
        lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
        reason = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else f"exit {res.returncode}")
        raise CubeError(f"SLURM refuses the job ({reason}): check --partition, --account, --gpus-per-job, "
                        "--memory and --walltime (or the [cluster] table)")


class SlurmExecutor(DaskExecutor):
    """Runs as SLURM jobs through dask-jobqueue; the scheduler lives in this (the submitting) process.

    Each job is one dask worker holding resource ``run=1``, so it trains one run at a time. A task whose
    job is killed (scancel, node failure, walltime) is rescheduled up to ``retries`` times, and the
    missing job is resubmitted after ``lost_worker_timeout``.
    """

    name = "slurm"

    def __init__(self, spec: SlurmSpec, retries: int = DEFAULT_RETRIES, lost_worker_timeout: str = "5s") -> None:
        super().__init__(None, retries)
        self.spec = spec
        self.lost_worker_timeout = lost_worker_timeout
        self.cluster: Any = None
        self._n_jobs = 0
        self._config: Any = None
        # A name unique to this executor, so its jobs can be found (squeue -n) and cleaned up (scancel -n).
        self.job_name = f"{spec.job_name}-{uuid.uuid4().hex[:6]}"

    def job_script(self) -> str:
        """The batch script each job runs (for inspection; starts no job)."""
        from dask_jobqueue import SLURMCluster

        with SLURMCluster(**self._cluster_kwargs()) as cluster:
            return cluster.job_script()

    def _client(self) -> Any:
        if self.client is None:
            import dask

            try:
                from dask_jobqueue import SLURMCluster
            except ImportError:
                raise CubeError("--executor slurm needs dask-jobqueue: pip install dask-jobqueue") from None
            if shutil.which("sbatch") is None:
                raise CubeError("--executor slurm needs sbatch on PATH: run saferl train on a SLURM login node")
            self._config = dask.config.set({"distributed.scheduler.allowed-failures": self.retries,
                                             "distributed.deploy.lost-worker-timeout": self.lost_worker_timeout})
            self._config.__enter__()
            self.cluster = SLURMCluster(**self._cluster_kwargs())
            try:
                _test_submit(self.cluster.job_script())
            except CubeError:
                self.close()
                raise
            from distributed import Client

            self.client = Client(self.cluster, set_as_default=False)
        return self.client

    def _cluster_kwargs(self) -> dict[str, Any]:
        return {**self.spec.cluster_kwargs(), "job_name": self.job_name}

    def _submit_options(self) -> dict[str, Any]:
        return {"resources": {RUN_RESOURCE: 1}}

    def map(self, run_one: RunOne, keys: Sequence[Any], on_done: OnDone | None = None) -> list[RunOutcome]:
        self._client()
        self._n_jobs = min(self.spec.jobs, len(keys))
        if self._n_jobs:
            self.cluster.scale(jobs=self._n_jobs)
        return super().map(run_one, keys, on_done)

    def _tick(self, n_pending: int) -> None:
        # Re-asserting the job count makes the cluster resubmit jobs whose worker vanished.
        self.cluster.scale(jobs=self._n_jobs)

    def _cancel_leftovers(self) -> None:
        """Cancel any job of this executor the cluster lost track of (e.g. one submitted while closing)."""
        import getpass

        if shutil.which("scancel"):
            subprocess.run(["scancel", "--name", self.job_name, "--user", getpass.getuser()],
                           capture_output=True, timeout=30, check=False)

    def close(self) -> None:
        super().close()
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None
            self._cancel_leftovers()
        if self._config is not None:
            self._config.__exit__(None, None, None)
            self._config = None


def record_outcome(store: str | os.PathLike, outcome: RunOutcome) -> None:
    """Merge where a run ran and its retries (``outcome.manifest_fields()``) into its stored manifest.

    ``outcome.key`` is the run's RunKey. The run's status is kept as the run itself wrote it, so a failed
    outcome never marks a run complete.
    """
    from cube import CubeWriter
    from cube.schema import RunKey

    key = outcome.key
    if not isinstance(key, RunKey):
        raise CubeError(f"record_outcome needs RunKey keys, got {type(key).__name__}")
    writer = CubeWriter(store)  # reads only this run's chunks (sweeps record thousands of outcomes)
    writer.set_run_manifest(key, status=writer.run_status(key),
                            manifest={**writer.run_manifest(key), **outcome.manifest_fields()})


# ------------------------------------------------------------------------------------- construction
def make_executor(kind: str = "local", address: str | None = None, spec: SlurmSpec | None = None,
                  retries: int = DEFAULT_RETRIES) -> Executor:
    """An executor by name: "local", "dask" (needs ``address``) or "slurm" (``spec``, default SlurmSpec())."""
    if kind == "local":
        return LocalExecutor(retries)
    if kind == "dask":
        from cube.compute import resolve_address

        address = resolve_address(address)
        if address is None:
            raise CubeError("--executor dask needs a scheduler address: --executor dask tcp://host:8786 "
                            "(or set DASK_SCHEDULER_ADDRESS)")
        return DaskExecutor(address, retries)
    if kind == "slurm":
        return SlurmExecutor(spec or SlurmSpec(), retries)
    raise CubeError(f"unknown executor {kind!r}: use one of {', '.join(EXECUTORS)}")


def read_cluster_table(path: str | os.PathLike | None) -> dict[str, Any]:
    """The ``[cluster]`` table of a config TOML file ({} if no file or no table)."""
    if path is None:
        return {}
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise CubeError(f"cannot read config {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CubeError(f"config {path} is not valid TOML: {exc}") from None
    table = data.get("cluster", {})
    if not isinstance(table, dict):
        raise CubeError(f"config {path}: 'cluster' must be a table ([cluster])")
    return table


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --executor and the SLURM flags; None = not given (the [cluster] table or defaults apply)."""
    g = parser.add_argument_group("cluster", "where runs execute (flags override the config's [cluster] table)")
    g.add_argument("--executor", nargs="+", metavar="KIND",
                   help="local (default: this process), slurm (SLURM jobs via dask-jobqueue) or dask ADDRESS")
    g.add_argument("--partition", help="SLURM partition (queue)")
    g.add_argument("--account", help="SLURM account to charge")
    g.add_argument("--gpus-per-job", type=int, help="GPUs per SLURM job (--gres=gpu:N)")
    g.add_argument("--cpus-per-job", type=int, help="CPUs per SLURM job (default 4)")
    g.add_argument("--memory", help="memory per SLURM job, e.g. 16GB (default 16GB)")
    g.add_argument("--walltime", help="walltime per SLURM job, HH:MM:SS (default 04:00:00)")
    g.add_argument("--jobs", type=int, help="SLURM jobs at once, each training one run at a time (default 1)")
    g.add_argument("--retries", type=int, help=f"retries of a lost or failed run (default {DEFAULT_RETRIES})")


def executor_from_args(args: argparse.Namespace, table: Mapping[str, Any] | None = None) -> Executor:
    """The executor the flags (over the ``[cluster]`` table) ask for; CubeError for bad combinations."""
    table = dict(table or {})
    words = list(getattr(args, "executor", None) or [])
    if not words:
        words = [str(table.get("executor", "local"))]
        if table.get("scheduler"):
            words.append(str(table["scheduler"]))
    kind, rest = words[0], words[1:]
    if kind not in EXECUTORS:
        raise CubeError(f"unknown executor {kind!r}: use one of local, slurm, dask ADDRESS")
    if (rest and kind != "dask") or len(rest) > 1:
        raise CubeError(f"--executor {kind} takes {'one address' if kind == 'dask' else 'no argument'}, "
                        f"got {' '.join(rest)}")
    retries = args.retries if getattr(args, "retries", None) is not None else table.get("retries", DEFAULT_RETRIES)
    spec = None
    if kind == "slurm":
        flags = {n: getattr(args, n, None) for n in ("partition", "account", "gpus_per_job", "cpus_per_job",
                                                     "memory", "walltime", "jobs")}
        spec = SlurmSpec.from_table(table, **flags)
    return make_executor(kind, rest[0] if rest else None, spec, int(retries))

