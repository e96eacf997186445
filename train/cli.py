"""`saferl train` and `saferl evaluate` (no jax import at module level).

    saferl train --preset smoke --out runs.zarr
    saferl train --algo ppo_lag --task circle --bound 25 --seed 0 --out runs.zarr [--config cfg.toml]
    saferl evaluate runs.zarr --iterate 121
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from pathlib import Path
from typing import Any

from cube.errors import CubeError
from train.config import ALGOS, PRESETS, TASKS, TrainConfig, load_toml, with_overrides


def _split(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(x for x in v.split(",") if x)
    return out


def _floats(values: list[str] | None, what: str) -> list[float]:
    try:
        return [float(v) for v in _split(values)]
    except ValueError:
        raise CubeError(f"{what} must be numbers, got {' '.join(values or [])}") from None


def _ints(values: list[str] | None, what: str) -> list[int]:
    try:
        return [int(v) for v in _split(values)]
    except ValueError:
        raise CubeError(f"{what} must be integers, got {' '.join(values or [])}") from None


def register(subparsers: Any) -> None:
    """Add the `train` and `evaluate` subcommands."""
    p = subparsers.add_parser("train", help="train PPO / PPO-Lag / P3O / FOCOPS on CRAX Safe Point tasks",
                              description="Train runs and write every episode into a results cube.")
    p.add_argument("--out", required=True, help="results store (Zarr directory) to create or fill")
    p.add_argument("--preset", choices=sorted(PRESETS), help="a named grid and config (e.g. smoke)")
    p.add_argument("--algo", nargs="+", help=f"algorithm(s): {', '.join(ALGOS)}")
    p.add_argument("--task", nargs="+", help=f"task(s): {', '.join(TASKS)}")
    p.add_argument("--bound", nargs="+", help="safety bound(s) d > 0 (episodic cost)")
    p.add_argument("--seed", nargs="+", help="training seed(s)")
    p.add_argument("--config", help="TOML file overriding TrainConfig fields ([ppo_lag], [p3o], [focops])")
    p.add_argument("--iterates", type=int, help="number of iterates J (sets total_env_steps)")
    p.add_argument("--eval-every", type=int, help="evaluate and checkpoint every K iterates (default: end)")
    p.add_argument("--eval-episodes", type=int, help="evaluation episodes per mode (default 100)")
    p.add_argument("--no-progress", action="store_true", help="plain log lines instead of a live display")
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


def _need_train_extra() -> None:
    """CubeError if the training extra is missing; otherwise set up jax (persistent compile cache)."""
    for mod in ("jax", "flax", "optax", "crax"):
        if importlib.util.find_spec(mod) is None:
            raise CubeError(f"'{mod}' is not installed; install the training extra: pip install 'saferl[train]'")
    import jax

    cache = os.environ.get("SAFERL_JAX_CACHE", str(Path.home() / ".cache" / "saferl" / "jax"))
    if cache:  # SAFERL_JAX_CACHE="" disables it
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def build_plan(args: argparse.Namespace) -> tuple[TrainConfig, list[str], list[str], list[float], list[int]]:
    """Config and grid from the arguments; every check that needs no compile happens here."""
    from train.runner import check_labels

    if args.preset:
        preset = PRESETS[args.preset]
        config: TrainConfig = preset["config"]
        algos, tasks = list(preset["algos"]), list(preset["tasks"])
        bounds, seeds = list(preset["bounds"]), list(preset["seeds"])
    else:
        config = TrainConfig()
        algos, tasks = [], []
        bounds, seeds = [], []
    algos = _split(args.algo) or algos
    tasks = _split(args.task) or tasks
    bounds = _floats(args.bound, "bounds") or bounds
    seeds = _ints(args.seed, "seeds") or seeds
    for name, vals in (("--algo", algos), ("--task", tasks), ("--bound", bounds), ("--seed", seeds)):
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
    check_labels(algos, tasks, bounds, seeds)
    return config, algos, tasks, bounds, seeds


class TrainProgress:
    """Rich live display: one bar over all runs and one for the current run (steps/s, ETA, cost vs d)."""

    def __init__(self, n_runs: int, plain: bool = False) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = Console(stderr=True)
        self.plain = plain or not self.console.is_terminal
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"),
                            TimeRemainingColumn(), TextColumn("{task.fields[info]}"), console=self.console)
        self.overall = self.bar.add_task("runs", total=n_runs, rate="", info="")
        self._t0: dict[int, float] = {}

    def __enter__(self) -> TrainProgress:
        if not self.plain:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.plain:
            self.bar.stop()

    def start_run(self, key: Any, config: TrainConfig) -> int:
        total = config.n_iterates * config.num_envs * config.episode_length
        tid = self.bar.add_task(str(key), total=total, rate="compiling...", info="")
        self._t0[tid] = time.perf_counter()
        return tid

    def advance(self, tid: int, steps: int, res: Any, key: Any, elapsed: float) -> None:
        rate = res.env_steps / res.train_s if res.train_s > 0 else float("nan")
        rate_s = f"{rate:,.0f} steps/s" if rate == rate else "first iterate"
        info = f"iter {res.iterates_done}: cost {res.final_cost:.2f} vs d={key.bound:g}"
        self.bar.update(tid, advance=steps, rate=rate_s, info=info)
        if self.plain:
            self.console.print(f"{key} {info} ({rate_s}, {elapsed:.0f}s)", highlight=False)

    def finish_run(self, tid: int) -> None:
        self.bar.remove_task(tid)
        self.bar.update(self.overall, advance=1)


def run(args: argparse.Namespace) -> int:
    """Entry of `saferl train`."""
    config, algos, tasks, bounds, seeds = build_plan(args)
    _need_train_extra()
    from train.runner import prepare_store, run_grid

    prepare_store(args.out, config, algos, tasks, bounds, seeds)
    n_runs = len(algos) * len(tasks) * len(bounds) * len(seeds)
    t0 = time.perf_counter()
    with TrainProgress(n_runs, plain=args.no_progress) as progress:
        try:
            results = run_grid(args.out, config, algos, tasks, bounds, seeds, progress=progress)
        except KeyboardInterrupt:
            progress.console.print(f"interrupted: {args.out} is valid; the interrupted run is marked partial")
            return 130
    for r in results:
        print(f"{r.key}: {r.status}, {r.iterates_done} iterates, {r.env_steps:,.0f} env steps, "
              f"{r.env_steps / r.train_s if r.train_s else float('nan'):,.0f} steps/s after compile "
              f"({r.compile_s:.1f}s compile + first iterate), last train cost {r.final_cost:.2f}")
    print(f"wrote {len(results)} runs to {args.out} in {time.perf_counter() - t0:.0f}s "
          f"({config.n_iterates} iterates each)")
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    """Entry of `saferl evaluate`."""
    _need_train_extra()
    from train.runner import evaluate_store

    n = evaluate_store(args.path, args.iterate, algos=_split(args.algo) or None, tasks=_split(args.task) or None,
                       bounds=_floats(args.bound, "bounds") or None, seeds=_ints(args.seed, "seeds") or None)
    print(f"added expl and greedy episodes at iterate {args.iterate} for {n} runs in {args.path}")
    return 0
