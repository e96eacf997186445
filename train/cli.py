"""`saferl train` and `saferl evaluate`, and our hooks of `saferl status` (no jax import at module level).

    saferl train --algos ppo,ppo_lag,p3o,focops --tasks goal,circle,push,button --bounds 15,25,50 \
        --seeds 0-29 --out results.zarr [--config file.toml] [--preset paper|crax-suite|smoke] [--part K/N] \
        [--executor local|slurm|dask ADDRESS]
    saferl train --algos ppo_pid,crpo --tasks goal_l2,velocity_hopper_l3 --bounds 250 --seeds 0-4 --out x.zarr
    saferl train --algo ppo_lag --task circle --bound 25 --seed 0 --out runs.zarr   (single-run spelling)
    saferl status results.zarr
    saferl evaluate runs.zarr --iterate 121
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.progress import ProgressColumn, Task
from rich.text import Text

from cube.errors import CubeError
from cube.selection import parse_floats, parse_ints, parse_names
from cube.store.progress import WINDOW, Progress
from train.algorithm import OFFPOLICY
from train.config import TrainConfig
from train.overrides import load_toml, with_overrides
from train.registry import algo_names, algorithm, algorithms
from train.sweep import PRESETS, Plan
from train.tasks import FAMILIES, LEVELS, TASK_SPECS, known_labels

if TYPE_CHECKING:
    from cube.schema import RunKey
    from train.executors import Executor, RunOutcome
    from train.progress import RunView
    from train.runner import GroupLabel


def train_summary() -> str:
    """`saferl --help`'s line for train: the trainers, the task labels and the presets that exist."""
    names = [a.title for a in algorithms()]
    return (f"train the {len(names)} trainers ({', '.join(names)}) on crax-bench's {len(FAMILIES)} safety tasks x "
            f"{len(LEVELS)} levels ({len(TASK_SPECS)} task labels: goal, goal_l2, goal_l3, ...); presets "
            f"{', '.join(sorted(PRESETS))}")


def config_tables() -> list[str]:
    """The TOML tables a --config file may hold: TrainConfig's sections and their subsections."""
    tables = []
    for field in dataclasses.fields(TrainConfig):
        value = getattr(TrainConfig(), field.name)
        if dataclasses.is_dataclass(value):
            tables.append(f"[{field.name}]")
            tables += [f"[{field.name}.{sub.name}]" for sub in dataclasses.fields(value)
                       if dataclasses.is_dataclass(getattr(value, sub.name))]
    return tables


def register(subparsers: Any) -> None:
    """Add the `train` and `evaluate` subcommands, and hooks to cube's `status` (our configs' names)."""
    from train.executors import add_executor_arguments

    p = subparsers.add_parser("train", help=train_summary(),
                              description="Create the grid algos x tasks x bounds x seeds in a results store and "
                              "train its runs (complete runs are skipped, partial ones resume).")
    p.add_argument("--out", required=True, help="results store (Zarr directory) to create or fill")
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="a named grid and config: paper (its 4 algorithms x 4 Point tasks x d 15/25/50 x 30 seeds), "
                   f"crax-suite (the {len(PRESETS['crax-suite']['algos'])} on-policy algorithms on the "
                   f"{len(FAMILIES)} tasks at level 1, the paper's bounds scaled per task, 10 seeds), smoke (tiny "
                   "sizes, 4 algorithms on circle at a d that binds); --algos/--tasks/--bounds/--seeds replace its "
                   "lists")
    for flag, alias, what in (("--algos", "--algo", f"algorithm(s): {', '.join(algo_names())}"),
                              ("--tasks", "--task", f"task label(s) <task>_l<level>: {known_labels()}"),
                              ("--bounds", "--bound", "safety bound(s) d > 0 (episodic cost), e.g. 15,25,50"),
                              ("--seeds", "--seed", "training seed(s): list and ranges, e.g. 0-29")):
        p.add_argument(flag, alias, dest=flag[2:], action="append", nargs="+", metavar="X", help=what)
    p.add_argument("--part", metavar="K/N", help="train only the K-th of N contiguous slices of the grid's runs")
    p.add_argument("--parallel-runs", type=int, metavar="N",
                   help="runs of one algorithm and task vmapped into one program (default: as many as fit); "
                   "runs started before resume in the group they were started in")
    p.add_argument("--regroup", action="store_true",
                   help="resume started runs in new groups of --parallel-runs instead of the groups they were "
                   "started in (their numbers then differ from an uninterrupted sweep's by float noise)")
    p.add_argument("--config", help=f"TOML file overriding TrainConfig fields: top-level keys and the tables "
                   f"{', '.join(config_tables())} (docs/training.md); a [cluster] table sets the executor")
    p.add_argument("--iterates", type=int, help="number of iterates J (sets total_env_steps)")
    p.add_argument("--eval-every", type=int, help="evaluate and checkpoint every K iterates (default: end)")
    p.add_argument("--eval-episodes", type=int, help="evaluation episodes per mode (default 100)")
    p.add_argument("--no-progress", action="store_true", help="plain log lines instead of a live display")
    add_executor_arguments(p)
    p.set_defaults(func=run)

    e = subparsers.add_parser("evaluate", help="roll out stored checkpoints and add expl/greedy episodes",
                              description="Evaluate checkpoints stored next to a cube at one iterate.")
    e.add_argument("path", help="results store written by saferl train")
    e.add_argument("--iterate", type=int, required=True, help="iterate J whose checkpoints to roll out")
    e.add_argument("--algo", nargs="+")
    e.add_argument("--task", nargs="+")
    e.add_argument("--bound", nargs="+")
    e.add_argument("--seed", nargs="+")
    e.set_defaults(func=run_evaluate)

    from cube.cli.status import set_status_hooks  # `saferl status` is cube's; it shows our configs' names

    set_status_hooks(subparsers, total_iterates=status_total_iterates, variant=status_variant)


def require_train_extra() -> None:
    """CubeError if the training extra is missing; otherwise set up jax (persistent compile cache)."""
    for mod in ("jax", "flax", "optax", "crax"):
        if importlib.util.find_spec(mod) is None:
            raise CubeError(f"'{mod}' is not installed; install the training extra: pip install 'saferl[train]'")
    from train.sweep_run import setup_jax

    setup_jax()


ONCE_EXAMPLES = {"--algos": "ppo_pid,crpo", "--tasks": "goal,circle_l2", "--bounds": "15,25,50",
                 "--seeds": "0-29"}
"""An example list for each option `_once` takes (its one-line error shows it)."""


def _once(values: list[list[str]] | None, flag: str) -> list[str]:
    """The words of an option that may be given once (argparse `append` collects repeats)."""
    if values and len(values) > 1:
        example = ONCE_EXAMPLES.get(flag, "a,b")
        raise CubeError(f"{flag} given twice; give one list (e.g. {flag} {example})")
    return values[0] if values else []


def build_plan(args: argparse.Namespace) -> Plan:
    """The sweep (`train.sweep.Plan`) from the arguments; every check that needs no compile happens here."""
    from train.record import check_labels
    from train.sweep import extra_tasks, parse_part

    task_bounds = None
    if args.preset:
        preset = PRESETS[args.preset]
        config: TrainConfig = preset["config"]
        algos, tasks = list(preset["algos"]), list(preset["tasks"])
        bounds, seeds = list(preset["bounds"] or ()), list(preset["seeds"])
        task_bounds = preset.get("task_bounds")
    else:
        config = TrainConfig()
        algos, tasks, bounds, seeds = [], [], [], []
    given = {flag: _once(getattr(args, flag), f"--{flag}") for flag in ("algos", "tasks", "bounds", "seeds")}
    algos = list(parse_names(given["algos"], "algos")) if given["algos"] else algos
    tasks = list(parse_names(given["tasks"], "tasks")) if given["tasks"] else tasks
    if given["bounds"]:
        bounds, task_bounds = list(parse_floats(given["bounds"], "bounds")), None
    seeds = list(parse_ints(given["seeds"], "seeds")) if given["seeds"] else seeds
    check_labels(algos or ["ppo"], tasks or ["circle"], bounds or [1.0], seeds or [0], extra_tasks())
    per_task = tuple((t, tuple(task_bounds(t))) for t in tasks) if task_bounds else ()
    for name, vals in (("--algo", algos), ("--task", tasks), ("--bound", bounds or per_task), ("--seed", seeds)):
        if not vals:
            raise CubeError(f"{name} is required (or use --preset {'/'.join(sorted(PRESETS))})")
    if args.config:
        config = load_toml(args.config, base=config)
    overrides: dict[str, Any] = {}
    if args.eval_every is not None:
        overrides["eval_every"] = args.eval_every
    if args.eval_episodes is not None:
        overrides["eval_episodes"] = args.eval_episodes
    if args.iterates is not None:
        if args.iterates < 1:
            raise CubeError(f"--iterates must be >= 1, got {args.iterates}")
        overrides["total_env_steps"] = args.iterates * config.num_envs * config.episode_length
    config = with_overrides(config, overrides)
    if args.parallel_runs is not None and args.parallel_runs < 1:
        raise CubeError(f"--parallel-runs must be >= 1, got {args.parallel_runs}")
    plan = Plan(config, tuple(algos), tuple(tasks), tuple(float(b) for b in bounds), tuple(seeds),
                parse_part(args.part), per_task)
    plan.keys()  # an empty selection fails here
    return plan


class SweepProgress:
    """Rich live display of a sweep, read from the store's progress records (`cube.store.progress`, the model
    `saferl status` and the TUI read too): all runs (done of total, steps/s of the runs training now, the
    sweep's ETA counting pending runs' compiles), one bar of runs done per task, and one bar of iterates per
    run or vmapped group training (phase with its elapsed time, steps/s and what it is measured over, ETA).

    `start_run`/`advance`/`finish_run` are the Runner's hooks; `run_done(outcome)` counts a finished run.
    While the live display runs, the process's stderr (XLA's compile alarms) goes to `log_path`, named on screen.
    """

    def __init__(self, keys: list[RunKey], config: TrainConfig, plain: bool = False, out: str | Path = "",
                 remote: bool = False) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn

        self.console = Console(stderr=True)
        self.plain = plain or not self.console.is_terminal
        self.out, self.config, self.keys = Path(out), config, list(keys)
        self.log_path = self.out.with_name(self.out.name + ".stderr.log")
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(bar_width=12),
                            TextColumn("{task.completed:.0f}/{task.total:.0f}{task.fields[unit]}"),
                            _LiveColumn(self), console=self.console, refresh_per_second=2)
        self.overall = self.bar.add_task("all runs", total=len(keys), unit=" runs", info="")
        self.groups: dict[str, int] = {}
        for key in keys:
            if key.task not in self.groups:
                n = sum(k.task == key.task for k in keys)
                self.groups[key.task] = self.bar.add_task(f"  {key.task}", total=n, unit=" runs", info="")
        self.active: dict[int, list[RunKey]] = {}
        self.done: set[RunKey] = set()
        self.measured_run_s: float | None = None
        self.remote, self.t_start = remote, time.time()
        self.idle_since = self.t_start  # since when no run trains in this process
        self._saved_fd: int | None = None

    def __enter__(self) -> SweepProgress:
        self.console.print("starting: each task builds its env, then compiles its program (a first compile on a "
                           "CPU takes minutes; later ones come from the cache). steps/s: over each run's last "
                           f"{WINDOW} iterates, compile excluded; the all-runs ETA counts pending runs' compiles",
                           highlight=False, soft_wrap=True)
        if not self.plain:
            self._quiet_stderr()
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.plain:
            self.bar.stop()
            self._restore_stderr()

    def _quiet_stderr(self) -> None:
        """Send fd 2 (XLA's `slow_operation_alarm` and other C++ logs) to `log_path`; the display keeps the terminal."""
        import os
        import sys

        try:
            log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError:
            return
        sys.stderr.flush()
        self._saved_fd = os.dup(2)
        self.console.file = os.fdopen(os.dup(self._saved_fd), "w")
        os.dup2(log, 2)
        os.close(log)
        self.console.print(f"compiler messages (XLA) go to {self.log_path}", highlight=False, soft_wrap=True)

    def _restore_stderr(self) -> None:
        import os
        import sys

        if self._saved_fd is None:
            return
        sys.stderr.flush()
        os.dup2(self._saved_fd, 2)
        os.close(self._saved_fd)
        self._saved_fd = None
        self.console.file.close()
        self.console.file = sys.stderr
        try:
            if self.log_path.stat().st_size == 0:
                self.log_path.unlink()
            else:
                self.console.print(f"compiler messages (XLA) of this sweep: {self.log_path}", highlight=False,
                                   soft_wrap=True)
        except OSError:
            pass

    # ------------------------------------------------------------------ the model, read from the store
    def state(self, now: float | None = None) -> dict[str, Progress]:
        """{str(run): its progress now} of every run training (its store record): those of this process (the
        runner's hooks), or with `remote` (dask, SLURM: no hooks here) every unfinished run whose record
        changed since this sweep began."""
        from cube.store.progress import read_record, run_progress

        keys = ([k for k in self.keys if k not in self.done] if self.remote
                else [k for ks in self.active.values() for k in ks])
        out = {}
        for k in keys:
            record = read_record(self.out, k)
            if record is not None and (not self.remote or float(record.get("since") or 0.0) >= self.t_start):
                out[str(k)] = run_progress(record, now)
        return out

    def sweep(self, now: float | None = None) -> Progress:
        """The sweep now: steps/s of the runs training, the ETA of all runs left (`cube.store.progress.sweep_eta`:
        pending runs' compiles counted)."""
        from cube.store.progress import combine, run_seconds, sweep_eta

        state = self.state(now)
        runs = list(state.values())
        for p in runs:
            self.measured_run_s = run_seconds(p) or self.measured_run_s
        pending = sum(k not in self.done and str(k) not in state for k in self.keys)
        whole = combine(runs) if runs else Progress("pending")
        return replace(whole, eta_s=sweep_eta(runs, pending, self.measured_run_s))

    def cell(self, tid: int) -> str:
        """The live text of a bar: phase and elapsed time, steps/s over what, ETA (the cube's formatter)."""
        from cube.store.progress import combine
        from cube.store.runstatus import duration, eta_text, phase_text, rate_text

        if tid == self.overall:
            if len(self.done) >= len(self.keys):
                return "done"
            if not self.active and not self.remote:
                return f"next runs: building env, compiling {duration(time.time() - self.idle_since)}"
            p = self.sweep()
            rate = rate_text(p.steps_per_s)
            return f"{rate + ' steps/s · ' if rate else ''}ETA {eta_text(p.eta_s, True)}"
        keys = self.active.get(tid)
        if keys is None:
            return ""
        state = self.state()
        runs = [state[str(k)] for k in keys if str(k) in state]
        if not runs:
            return "starting"
        p = combine(runs)
        rate = rate_text(p.steps_per_s)
        rate = f"{rate} steps/s (last {p.over} it)" if rate else "steps/s after 2 it"
        return f"{phase_text(p.phase, p.phase_s)} · {rate} · ETA {eta_text(p.eta_s, True)}"

    # ------------------------------------------------------------------ the runner's hooks
    def start_run(self, key: RunKey | GroupLabel, config: TrainConfig) -> int:
        from cube.store.progress import read_record

        keys = list(getattr(key, "keys", [key]))
        record = read_record(self.out, keys[0]) or {}
        first = int(record.get("first") or 0)  # a resumed run's bar starts where it stands
        unit = " it"
        tid = self.bar.add_task(f"    {key}", total=config.n_iterates, completed=first, unit=unit, info="")
        self.active[tid] = keys
        if self.plain:
            self.console.print(f"{key}: compiling (a first compile on a CPU takes minutes)", highlight=False,
                               soft_wrap=True)
        return tid

    def advance(self, tid: int, steps: int, res: RunView, key: RunKey | GroupLabel, elapsed: float) -> None:
        done = min(res.iterates_done, self.config.n_iterates)
        self.bar.update(tid, completed=done)
        if self.plain:
            info = f"iter {res.iterates_done}/{self.config.n_iterates}: cost {res.final_cost:.2f} vs d={key.bound:g}"
            self.console.print(f"{key} {info}; {self.cell(tid)} ({elapsed:.0f}s)", highlight=False, soft_wrap=True)

    def finish_run(self, tid: int) -> None:
        self.bar.remove_task(tid)
        self.active.pop(tid, None)
        self.idle_since = time.time()

    def run_done(self, outcome: RunOutcome) -> None:
        """Count a finished run (any executor) and print one line about it."""
        result = outcome.result or {}
        steps = result.get("env_steps", 0.0)
        self.done.add(outcome.key)
        self.bar.update(self.overall, completed=min(len(self.done), len(self.keys)))
        task = self.groups[outcome.key.task]
        self.bar.update(task, completed=min(sum(k.task == outcome.key.task for k in self.done),
                                            self.bar.tasks[task].total or 0))
        where = f" on {outcome.host}" + (f" (SLURM job {outcome.slurm_job_id})" if outcome.slurm_job_id else "")
        if outcome.status != "complete":
            line = f"{outcome.key}: FAILED after {outcome.retries} retries{where}: {outcome.error}"
        elif result.get("status") == "skipped":
            line = f"{outcome.key}: already complete, skipped"
        elif result.get("status") == "claimed":
            line = f"{outcome.key}: claimed by {result.get('claimed_by')}, left to that process"
        else:
            resumed = result.get("resumed_from")
            line = (f"{outcome.key}: complete, {result.get('iterates_done')} iterates, {steps:,.0f} env steps"
                    f"{'' if resumed is None else f', resumed after iterate {resumed}'}{where}")
        self.console.print(line, highlight=False, soft_wrap=True)


class _LiveColumn(ProgressColumn):
    """A bar's text, read from the progress records at each refresh (`SweepProgress.cell`)."""

    def __init__(self, owner: SweepProgress) -> None:
        super().__init__()
        self.owner = owner

    def render(self, task: Task) -> Text:
        return Text(self.owner.cell(task.id) + (f"  {task.fields['info']}" if task.fields.get("info") else ""))


def _group_size(args: argparse.Namespace, plan: Plan, executor: Executor, todo: list[RunKey]) -> int:
    """Runs per vmapped program: --parallel-runs, checked against memory, or as many as fit (local).

    Remote executors default to 1 (one run per worker); SLURM checks a given value against --memory.
    """
    from collections import Counter

    from train.memory import memory_budget, parallel_runs

    largest = max(Counter((k.task, k.algo) for k in todo).values())
    if executor.name == "dask" or (executor.name == "slurm" and args.parallel_runs is None):
        return args.parallel_runs or 1
    budget = None
    if executor.name == "slurm":
        from dask.utils import parse_bytes

        budget = (int(0.7 * parse_bytes(executor.spec.memory)), f"a SLURM job's --memory {executor.spec.memory}")
    if any(algorithm(a).family == OFFPOLICY for a in plan.algos):  # replay buffers: refused before any write
        from train.offpolicy.family import offpolicy_group_fit
        from train.sweep import make_env

        print(f"building the env of {len(plan.tasks)} task(s) to size the replay buffers...", flush=True)
        envs = [make_env(t, plan.config.episode_length) for t in plan.tasks]
        return min(min(offpolicy_group_fit(plan.config, e.obs_size, e.action_size, args.parallel_runs,
                                           budget or memory_budget()), largest) for e in envs)
    print(f"sizing the vmapped groups: building the env of {len(plan.tasks)} task(s) and tracing its program "
          "(no compile)...", flush=True)
    return min(parallel_runs(plan.config, task, args.parallel_runs, largest, budget) for task in plan.tasks)


def run(args: argparse.Namespace) -> int:
    """Entry of `saferl train`: plan (no jax), store, then the runs through the chosen executor."""
    from cube.store.location import refuse_url
    from train.executors import executor_from_args, read_cluster_table, record_outcome
    from train.grouping import make_units, split_outcome
    from train.offpolicy.family import check_offpolicy_plan
    from train.overrides import config_to_dict
    from train.record import prepare_store
    from train.sweep import check_store_config
    from train.sweep_run import SweepRun

    refuse_url(args.out, "train into")
    plan = build_plan(args)
    check_offpolicy_plan(plan.config, plan.algos)  # a batch larger than the replay buffer fails here
    executor = executor_from_args(args, read_cluster_table(args.config))
    keys = plan.keys()
    if Path(args.out).exists():  # a store of another grid or config fails before jax is imported
        prepare_store(args.out, plan.config, plan.algos, plan.tasks, plan.all_bounds(), plan.seeds)
        check_store_config(args.out, plan.config)
    if executor.name == "local" or (executor.name == "slurm" and args.parallel_runs is not None):
        print("importing jax and the training code (takes up to a minute on a busy CPU)...", flush=True)
        require_train_extra()
    size = _group_size(args, plan, executor, keys)  # a --parallel-runs that does not fit fails here
    prepare_store(args.out, plan.config, plan.algos, plan.tasks, plan.all_bounds(), plan.seeds)
    stored = check_store_config(args.out, plan.config)
    todo = [k for k in keys if stored.get(str(k)) != "complete"]
    n_partial = sum(stored.get(str(k)) == "partial" for k in todo)
    print(f"{args.out}: {len(keys)} runs selected: {len(keys) - len(todo)} complete (skipped), "
          f"{n_partial} partial (resume), {len(todo) - n_partial} pending; executor {executor.name}", flush=True)
    if not todo:
        return 0
    units = make_units(todo, args.out, size, regroup=args.regroup, report=lambda line: print(line, flush=True))
    groups = [u for u in units if isinstance(u, tuple)]
    if groups:
        print(f"{len(units)} program(s); {len(groups)} vmapped group(s) of up to {max(map(len, groups))} runs",
              flush=True)
    written = set(todo)
    riders = {k for u in groups for k in u} - written
    if riders:
        print(f"{len(riders)} complete or unselected run(s) ride along unwritten: a resumed run keeps its group",
              flush=True)
    local = executor.name == "local"
    t0 = time.perf_counter()
    outcomes: list[RunOutcome] = []
    with SweepProgress(todo, plan.config, plain=args.no_progress, out=args.out, remote=not local) as progress, \
            executor:
        # the live display shows the run training in this process (local executor only)
        run_one = SweepRun(str(args.out), config_to_dict(plan.config), claims=local,
                           progress=progress if local else None, write=frozenset(todo) if riders else None)

        def on_done(outcome: RunOutcome) -> None:
            for one in split_outcome(outcome, written):
                if (one.result or {}).get("status") == "claimed":
                    progress.run_done(one)
                    continue  # another process trains it and records its own outcome
                record_outcome(args.out, one)
                progress.run_done(one)
                outcomes.append(one)

        try:
            executor.map(run_one, units, on_done=on_done)
        except KeyboardInterrupt:
            progress.console.print(f"interrupted: {args.out} is valid; unfinished runs are partial and resume "
                                   "when you run the same command again")
            return 130
    failed = [o for o in outcomes if o.status != "complete"]
    print(f"{len(outcomes) - len(failed)} of {len(outcomes)} runs complete in {args.out} after "
          f"{time.perf_counter() - t0:.0f}s ({plan.config.n_iterates} iterates each)"
          + (f"; {len(failed)} failed (run the same command again to retry them)" if failed else ""))
    return 1 if failed else 0


def status_total_iterates(row: dict[str, Any]) -> int | None:
    """Iterates J of a run when complete, from its manifest's config (`saferl status`; None without one)."""
    cfg = row.get("config") or {}
    keys = ("total_env_steps", "num_envs", "episode_length")
    return TrainConfig(**{k: v for k, v in cfg.items() if k in keys}).n_iterates if cfg else None


def status_variant(row: dict[str, Any]) -> str:
    """The formulation a run was trained with ("crax", "legacy", the options that differ; `saferl status`)."""
    from train.variants import variant_label

    cfg, algo = row.get("config") or {}, str(row.get("algo", ""))
    return variant_label(cfg, algo if algo in algo_names() else None) if cfg else ""


def run_evaluate(args: argparse.Namespace) -> int:
    """Entry of `saferl evaluate`: one line per run, and one before each compile."""
    print("importing jax and the training code (takes up to a minute on a busy CPU)...", flush=True)
    require_train_extra()
    from train.evaluate import evaluate_store

    n = evaluate_store(args.path, args.iterate,
                       algos=parse_names(args.algo, "algos") if args.algo else None,
                       tasks=parse_names(args.task, "tasks") if args.task else None,
                       bounds=parse_floats(args.bound, "bounds") if args.bound else None,
                       seeds=parse_ints(args.seed, "seeds") if args.seed else None,
                       report=lambda line: print(line, flush=True))
    print(f"added expl and greedy episodes at iterate {args.iterate} for {n} runs in {args.path}")
    return 0
