"""Host side of training: the run grid, cube writes, checkpoints, progress, Ctrl-C handling.

Per iterate the compiled `iterate` returns the completed episodes' sums in one transfer; the host
compacts them (NaN slots dropped), writes them as mode `train`, writes the per-iterate variables and,
at evaluation iterates, N paired expl/greedy episodes plus a checkpoint.
"""

from __future__ import annotations

import contextlib
import platform
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from cube.errors import CubeError
from cube.schema import RunKey
from train import checkpoint
from train.config import ALGOS, TASKS, TrainConfig, config_to_dict

DIAGNOSTICS = ("policy_loss", "value_loss", "cost_value_loss", "entropy", "approx_kl", "clip_fraction",
               "mean_step_cost", "mean_step_reward")
ITERATE_VARS = ("env_steps", "multiplier", "n_updates", "dropped_episodes", *DIAGNOSTICS)
"""Per-iterate variables written for every run (diagnostics are means over the iterate's updates)."""


def multiplier_init(algo: str, config: TrainConfig) -> float:
    """Initial multiplier: PPO-Lag lambda_0, P3O kappa_0, FOCOPS nu_0; 0 for PPO (stored as NaN)."""
    return {"ppo": 0.0, "ppo_lag": config.ppo_lag.init, "p3o": config.p3o.kappa_init,
            "focops": config.focops.nu_init}[algo]


def check_labels(algos: Sequence[str], tasks: Sequence[str], bounds: Sequence[float], seeds: Sequence[int],
                 known_tasks: Sequence[str] | None = None) -> None:
    """One-line CubeError for an unknown algorithm/task, a bound <= 0 or an empty list."""
    known_tasks = tuple(TASKS) if known_tasks is None else tuple(known_tasks)
    for a in algos:
        if a not in ALGOS:
            raise CubeError(f"unknown algorithm '{a}'; choose from {', '.join(ALGOS)}")
    for t in tasks:
        if t not in known_tasks:
            raise CubeError(f"unknown task '{t}'; choose from {', '.join(known_tasks)}")
    for b in bounds:
        if not np.isfinite(b) or b <= 0:
            raise CubeError(f"safety bound must be a number > 0, got {b:g}")
    for name, vals in (("algorithm", algos), ("task", tasks), ("bound", bounds), ("seed", seeds)):
        if len(vals) == 0:
            raise CubeError(f"no {name} given")


def n_episode_slots(config: TrainConfig) -> int:
    """Episode slots E: every env's episodes of one iterate, or the eval episodes if more."""
    return max(config.num_envs * config.episodes_per_env_per_iterate, config.eval_episodes)


def eval_iterates(config: TrainConfig) -> list[int]:
    """Iterates after which the policy is evaluated and checkpointed (always the last one)."""
    J = config.n_iterates
    its = set(range(config.eval_every - 1, J, config.eval_every)) if config.eval_every else set()
    return sorted(its | {J - 1})


def prepare_store(out: str | Path, config: TrainConfig, algos: Sequence[str], tasks: Sequence[str],
                  bounds: Sequence[float], seeds: Sequence[int]) -> None:
    """Create the cube for the grid, or accept an existing one whose grid holds these runs."""
    from cube import create_store, open_cube

    J, E = config.n_iterates, n_episode_slots(config)
    attrs = {"description": "saferl train: CRAX Safe Point Level-1 runs", "synthetic": False}
    try:
        create_store(out, algos=list(algos), tasks=list(tasks), bounds=[float(b) for b in bounds],
                     seeds=[int(s) for s in seeds], n_iterates=J, n_episodes=E, iterate_vars=ITERATE_VARS,
                     attrs=attrs, exist_ok=True)
        return
    except CubeError as exc:
        if not Path(out).exists():
            raise
        first = exc
    ds = open_cube(out)  # raises CubeError for foreign / broken schemas
    labels = {"algo": algos, "task": tasks, "bound": [float(b) for b in bounds], "seed": seeds}
    subset = all(set(np.asarray(ds[d].values).tolist()) >= set(v) for d, v in labels.items())
    same = ds.sizes["iterate"] == J and ds.sizes["episode"] == E and all(v in ds for v in ITERATE_VARS)
    if not (subset and same):
        raise first


@dataclass
class RunResult:
    """Summary of one finished (or interrupted) run."""

    key: RunKey
    status: str
    iterates_done: int
    env_steps: float
    compile_s: float
    train_s: float
    final_cost: float = float("nan")
    notes: list[str] = field(default_factory=list)
    iterate_steps: list[int] = field(default_factory=list)
    """Env steps of each iterate."""
    iterate_wall_s: list[float] = field(default_factory=list)
    """Wall time of each iterate: compiled loop, transfer and cube writes (evaluation excluded)."""
    resumed_from: int | None = None
    """Iterate whose resume point this attempt started from (None: from scratch)."""


class _SigintGuard:
    """Defers Ctrl-C while a store write is in progress, then raises KeyboardInterrupt."""

    def __init__(self) -> None:
        self.pending = False

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        try:
            old = signal.signal(signal.SIGINT, self._handler)
        except ValueError:  # not the main thread
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, old)
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def _handler(self, signum: int, frame: Any) -> None:
        self.pending = True


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for pkg in ("jax", "jaxlib", "flax", "optax", "crax-bench", "mujoco-mjx", "saferl"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def _placement() -> dict[str, Any]:
    """Where this attempt runs: host, pid, SLURM job id and dask worker (where known)."""
    from train.executors import current_placement

    return current_placement()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_index(writer: Any, key: RunKey) -> tuple[int, int, int, int]:
    """Position of a run in the grid of a `cube.CubeWriter`'s store (CubeError if it is not there)."""
    from cube.schema import RUN_DIMS

    index = []
    for dim, value in zip(RUN_DIMS, (key.algo, key.task, key.bound, key.seed), strict=True):
        labels = writer.coords[dim]
        hits = (np.flatnonzero(np.isclose(labels.astype(float), float(value))) if dim == "bound"
                else np.flatnonzero(labels.astype(str) == str(value)))
        if hits.size == 0:
            raise CubeError(f"run {key} is not in the store's grid; extend the store first")
        index.append(int(hits[0]))
    return tuple(index)  # type: ignore[return-value]


def stored_status(writer: Any, key: RunKey) -> str:
    """Status of one run as stored (`pending`/`partial`/`complete`), read from its own chunk only."""
    from cube.schema import RUN_STATUS_NAMES

    if "run_status" not in writer.group:
        return "pending"
    return RUN_STATUS_NAMES.get(int(writer.group["run_status"][run_index(writer, key)]), "pending")


def stored_manifest(writer: Any, key: RunKey) -> dict[str, Any]:
    """The stored manifest of one run (without `status`/`run`), read from its own chunk only."""
    import json

    if "run_manifest" not in writer.group:
        return {}
    text = str(writer.group["run_manifest"][run_index(writer, key)])
    body = json.loads(text) if text else {}
    body.pop("status", None)
    body.pop("run", None)
    return body


def compact_episodes(reward: np.ndarray, cost: np.ndarray, count: np.ndarray,
                     capacity: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Completed episodes from `[S, n]` buffers (slot s of env i valid iff s < count[i]).

    Returns (reward [k], cost [k], dropped): episodes ordered slot-major, at most `capacity` of them;
    `dropped` counts episodes that did not fit a buffer slot or the store's capacity.
    """
    slots = reward.shape[0]
    valid = np.arange(slots)[:, None] < np.minimum(count, slots)[None, :]
    r, c = reward[valid], cost[valid]
    dropped = int(np.maximum(count - slots, 0).sum()) + max(0, r.size - capacity)
    return r[:capacity], c[:capacity], dropped


class Runner:
    """Trains runs of one task with shared compiled functions and writes them to the cube."""

    def __init__(self, out: str | Path, config: TrainConfig, task: str, env_factory: Callable[..., Any],
                 progress: Any | None = None) -> None:
        import jax

        from train.core import make_train

        self.out, self.config, self.task = Path(out), config, task
        self.env = env_factory(task, config.episode_length)
        self.trainer = make_train(config, self.env)
        self.init = jax.jit(self.trainer.init)
        self.iterate = jax.jit(self.trainer.iterate)
        self.evaluate = jax.jit(self.trainer.evaluate)
        self.progress = progress
        self.guard = _SigintGuard()
        self.capacity = n_episode_slots(config)

    def _manifest(self, key: RunKey, started: str, **extra: Any) -> dict[str, Any]:
        return {"config": config_to_dict(self.config), "algo": key.algo, "task": key.task,
                "env": self.env.name, "bound": float(key.bound), "seed": int(key.seed),
                "versions": _versions(), **_placement(), "start_time": started,
                "checkpoints": str(checkpoint.run_dir(self.out, key).relative_to(self.out)), **extra}

    def _record_iterate(self, writer: Any, key: RunKey, res: RunResult, j: int, out: Any, mult: float,
                        dt: float, *, first: bool, t_it: float) -> None:
        """Book one finished iterate of one run: timings, its training episodes and per-iterate variables.

        `out` is the run's host copy of the iterate's output (episode buffers, n_updates, metrics).
        """
        cfg = self.config
        if first:
            res.compile_s += dt  # first call: compile + one iterate
        else:
            res.train_s += dt
        steps = int(out.n_updates) * cfg.steps_per_update * cfg.num_envs
        res.env_steps += steps
        r, c, dropped = compact_episodes(np.asarray(out.episodes.reward), np.asarray(out.episodes.cost),
                                         np.asarray(out.episodes.count), self.capacity)
        values = {"env_steps": res.env_steps, "multiplier": np.nan if key.algo == "ppo" else mult,
                  "n_updates": int(out.n_updates), "dropped_episodes": dropped,
                  **{k: float(v) for k, v in out.metrics.items()}}
        with self.guard.hold():
            writer.write_episodes(key, "train", j, r, c)
            writer.write_iterate_vars(key, j, values)
        res.iterate_steps.append(steps)
        res.iterate_wall_s.append(time.perf_counter() - t_it)
        if dropped:
            res.notes.append(f"iterate {j}: {dropped} episodes did not fit the buffer")
        res.iterates_done = j + 1
        res.final_cost = float(np.mean(c)) if c.size else float("nan")

    def run(self, algo: str, bound: float, seed: int) -> RunResult:
        """Train (or resume) one run; KeyboardInterrupt marks it partial (store stays valid) and propagates.

        A run already marked complete in the store is skipped (status "skipped"). A partial one resumes
        from its newest resume point (saved at every evaluation iterate) or starts from scratch; the
        iterates after that point are written again, which replaces all their episode slots.
        """
        from cube import CubeWriter

        key = RunKey(algo, self.task, float(bound), int(seed))
        writer = CubeWriter(self.out)
        if stored_status(writer, key) == "complete":
            return RunResult(key, "skipped", self.config.n_iterates, float("nan"), 0.0, 0.0,
                             notes=["already complete in the store"])
        started = _now()
        res = RunResult(key, "partial", 0, 0.0, 0.0, 0.0)
        with self.guard.hold():
            writer.set_run_manifest(key, status="partial", manifest=self._manifest(key, started, notes="running"))
            checkpoint.write_run_meta(self.out, key, {**key.as_dict(), "config": config_to_dict(self.config),
                                                      "env": self.env.name})
        try:
            self._train(writer, key, res)
            res.status = "complete"
        except KeyboardInterrupt:
            res.notes.append(f"interrupted by the user after {res.iterates_done} iterates")
            raise
        finally:
            with self.guard.hold():
                writer.set_run_manifest(key, status=res.status, manifest=self._manifest(
                    key, started, end_time=_now(), iterates_done=res.iterates_done, env_steps=res.env_steps,
                    compile_s=round(res.compile_s, 3), train_s=round(res.train_s, 3),
                    resumed_from=res.resumed_from,
                    eval_iterates=checkpoint.available_iterates(self.out, key), notes="; ".join(res.notes)))
        return res

    def _start_state(self, key: RunKey, res: RunResult) -> tuple[Any, int]:
        """Fresh initial state, or the newest resume point's state; returns (state, first iterate)."""
        import jax
        import jax.numpy as jnp

        from train.losses import ALGO_IDS

        cfg = self.config
        args = (jax.random.PRNGKey(key.seed), ALGO_IDS[key.algo], multiplier_init(key.algo, cfg),
                key.bound / cfg.episode_length)
        state = self.init(*args)
        template = jax.tree_util.tree_map(jnp.zeros_like, state)
        found = checkpoint.load_resume(self.out, key, template)
        if found is None:
            return state, 0
        j, state, env_steps = found
        res.env_steps, res.iterates_done, res.resumed_from = env_steps, j + 1, j
        res.notes.append(f"resumed after iterate {j}")
        return state, j + 1

    def _train(self, writer: Any, key: RunKey, res: RunResult) -> None:
        import jax

        from train.core import checkpoint_payload, eval_key

        cfg = self.config
        t0 = time.perf_counter()
        state, start = self._start_state(key, res)
        evals = set(eval_iterates(cfg))
        task_id = self.progress.start_run(key, cfg) if self.progress else None
        for j in range(start, cfg.n_iterates):
            t_it = time.perf_counter()
            state, out = self.iterate(state)
            out, mult = jax.device_get((out, state.multiplier))  # the one transfer of this iterate
            dt = time.perf_counter() - t_it
            self._record_iterate(writer, key, res, j, out, float(mult), dt, first=j == start, t_it=t_it)
            if j in evals:
                ev = jax.device_get(self.evaluate(state.params, state.normalizer, eval_key(key.seed, j)))
                with self.guard.hold():
                    writer.write_episodes(key, "expl", j, ev.expl_reward, ev.expl_cost)
                    writer.write_episodes(key, "greedy", j, ev.greedy_reward, ev.greedy_cost)
                    checkpoint.save(self.out, key, j, checkpoint_payload(state.params, state.normalizer,
                                                                         state.multiplier))
                    checkpoint.save_resume(self.out, key, j, state, res.env_steps)
            if self.progress:
                self.progress.advance(task_id, res.iterate_steps[-1], res, key, time.perf_counter() - t0)
        if self.progress:
            self.progress.finish_run(task_id)


    # ---------------------------------------------------------------------------------- vmapped groups
    def _vmapped(self) -> tuple[Any, Any, Any]:
        """jit(vmap(init / iterate / evaluate)): one program for a group of runs (built on first use)."""
        if not hasattr(self, "_vfns"):
            import jax

            from train.core import make_train

            t = make_train(self.config, self.env, axis_name="runs")
            self._vfns = (jax.jit(jax.vmap(t.init)), jax.jit(jax.vmap(t.iterate, axis_name="runs")),
                          jax.jit(jax.vmap(t.evaluate)))
        return self._vfns

    def _group_start(self, keys: Sequence[RunKey], results: list[RunResult]) -> tuple[Any, int]:
        """Stacked initial states of `keys`, or their resume points if all have one at the same iterate."""
        import jax
        import jax.numpy as jnp

        from train.losses import ALGO_IDS

        cfg = self.config
        vinit = self._vmapped()[0]
        state = vinit(jnp.stack([jax.random.PRNGKey(k.seed) for k in keys]),
                      jnp.asarray([ALGO_IDS[k.algo] for k in keys], jnp.int32),
                      jnp.asarray([multiplier_init(k.algo, cfg) for k in keys], jnp.float32),
                      jnp.asarray([k.bound / cfg.episode_length for k in keys], jnp.float32))
        template = jax.tree_util.tree_map(lambda x: jnp.zeros_like(x[0]), state)
        found = [checkpoint.load_resume(self.out, k, template) for k in keys]
        its = {f[0] if f else None for f in found}
        if len(its) != 1 or None in its:
            return state, 0  # no common resume point: the whole group starts from scratch
        j = its.pop()
        for f, res in zip(found, results, strict=True):
            res.env_steps, res.iterates_done, res.resumed_from = f[2], j + 1, j
            res.notes.append(f"resumed after iterate {j}")
        stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[f[1] for f in found])
        return stacked, j + 1

    def run_group(self, keys: Sequence[RunKey]) -> list[RunResult]:
        """Train runs of this task in one vmapped program (each its own RNG stream, multiplier, normaliser)
        and write each to its own region. Complete runs are skipped; a group whose members all have a
        resume point at the same iterate resumes there, otherwise it starts from scratch."""
        from cube import CubeWriter

        writer = CubeWriter(self.out)
        keys = [RunKey(k.algo, self.task, float(k.bound), int(k.seed)) for k in keys]
        skipped = [k for k in keys if stored_status(writer, k) == "complete"]
        todo = [k for k in keys if k not in skipped]
        done = {k: RunResult(k, "skipped", self.config.n_iterates, float("nan"), 0.0, 0.0,
                             notes=["already complete in the store"]) for k in skipped}
        if not todo:
            return [done[k] for k in keys]
        started = _now()
        results = [RunResult(k, "partial", 0, 0.0, 0.0, 0.0) for k in todo]
        group = {"group_size": len(todo), "group": [str(k) for k in todo]}
        with self.guard.hold():
            for k in todo:
                writer.set_run_manifest(k, status="partial", manifest=self._manifest(k, started, notes="running",
                                                                                      **group))
                checkpoint.write_run_meta(self.out, k, {**k.as_dict(), "config": config_to_dict(self.config),
                                                        "env": self.env.name})
        try:
            self._train_group(writer, todo, results)
            for res in results:
                res.status = "complete"
        except KeyboardInterrupt:
            for res in results:
                res.notes.append(f"interrupted by the user after {res.iterates_done} iterates")
            raise
        finally:
            with self.guard.hold():
                for k, res in zip(todo, results, strict=True):
                    writer.set_run_manifest(k, status=res.status, manifest=self._manifest(
                        k, started, end_time=_now(), iterates_done=res.iterates_done, env_steps=res.env_steps,
                        compile_s=round(res.compile_s, 3), train_s=round(res.train_s, 3),
                        resumed_from=res.resumed_from, eval_iterates=checkpoint.available_iterates(self.out, k),
                        notes="; ".join(res.notes), **group))
        done.update(zip(todo, results, strict=True))
        return [done[k] for k in keys]

    def _train_group(self, writer: Any, keys: list[RunKey], results: list[RunResult]) -> None:
        import jax
        import jax.numpy as jnp

        from train.core import checkpoint_payload, eval_key

        cfg = self.config
        _, viterate, vevaluate = self._vmapped()
        t0 = time.perf_counter()
        state, start = self._group_start(keys, results)
        evals = set(eval_iterates(cfg))
        label = GroupLabel(keys)
        task_id = self.progress.start_run(label, cfg) if self.progress else None
        for j in range(start, cfg.n_iterates):
            t_it = time.perf_counter()
            state, out = viterate(state)
            out, mult = jax.device_get((out, state.multiplier))  # the one transfer of this iterate
            dt = time.perf_counter() - t_it
            costs = []
            for i, (key, res) in enumerate(zip(keys, results, strict=True)):
                one = jax.tree_util.tree_map(lambda x, i=i: np.asarray(x[i]), out)
                self._record_iterate(writer, key, res, j, one, float(mult[i]), dt, first=j == start, t_it=t_it)
                costs.append(res.final_cost)
            if j in evals:
                ekeys = jnp.stack([eval_key(k.seed, j) for k in keys])
                ev = jax.device_get(vevaluate(state.params, state.normalizer, ekeys))
                with self.guard.hold():
                    for i, (key, res) in enumerate(zip(keys, results, strict=True)):
                        writer.write_episodes(key, "expl", j, ev.expl_reward[i], ev.expl_cost[i])
                        writer.write_episodes(key, "greedy", j, ev.greedy_reward[i], ev.greedy_cost[i])
                        one = jax.tree_util.tree_map(lambda x, i=i: x[i], state)
                        checkpoint.save(self.out, key, j, checkpoint_payload(one.params, one.normalizer,
                                                                             one.multiplier))
                        checkpoint.save_resume(self.out, key, j, one, res.env_steps)
            if self.progress:
                label.update(results, costs)
                self.progress.advance(task_id, sum(res.iterate_steps[-1] for res in results), label, label,
                                      time.perf_counter() - t0)
        if self.progress:
            self.progress.finish_run(task_id)


class GroupLabel:
    """Progress view of a vmapped group: looks like a RunKey and a RunResult to the progress hooks."""

    def __init__(self, keys: Sequence[RunKey]) -> None:
        self.keys = list(keys)
        self.bound = float(np.mean([k.bound for k in keys]))
        self.env_steps, self.train_s, self.iterates_done, self.final_cost = 0.0, 0.0, 0, float("nan")

    def update(self, results: Sequence[RunResult], costs: Sequence[float]) -> None:
        self.env_steps = sum(r.env_steps for r in results)
        self.train_s = max(r.train_s for r in results)
        self.iterates_done = max(r.iterates_done for r in results)
        self.final_cost = float(np.nanmean(costs)) if len(costs) else float("nan")

    def __str__(self) -> str:
        k = self.keys[0]
        return f"{k.algo}/{k.task} x{len(self.keys)} (seeds {','.join(str(x.seed) for x in self.keys)})"


def run_grid(out: str | Path, config: TrainConfig, algos: Sequence[str], tasks: Sequence[str],
             bounds: Sequence[float], seeds: Sequence[int], env_factory: Callable[..., Any] | None = None,
             progress: Any | None = None, known_tasks: Sequence[str] | None = None) -> list[RunResult]:
    """Check inputs, create the store, then train every run (task-major, sharing compiles per task)."""
    check_labels(algos, tasks, bounds, seeds, known_tasks)
    config.validate()
    prepare_store(out, config, algos, tasks, bounds, seeds)
    if env_factory is None:
        from train.envs import make_crax_env

        env_factory = make_crax_env
    results = []
    for task in tasks:
        runner = Runner(out, config, task, env_factory, progress)
        for algo in algos:
            for bound in bounds:
                for seed in seeds:
                    results.append(runner.run(algo, bound, seed))
    return results


def evaluate_store(store: str | Path, iterate: int, algos: Sequence[str] | None = None,
                   tasks: Sequence[str] | None = None, bounds: Sequence[float] | None = None,
                   seeds: Sequence[int] | None = None, env_factory: Callable[..., Any] | None = None,
                   report: Callable[[str], None] = print) -> int:
    """Roll out stored checkpoints at `iterate` and write their expl/greedy episodes; returns runs done."""
    import jax

    from cube import CubeWriter, read_manifests
    from train.config import with_overrides
    from train.core import Params, eval_key, make_train
    from train.nets import Normalizer

    if env_factory is None:
        from train.envs import make_crax_env

        env_factory = make_crax_env
    rows = read_manifests(store)

    def wanted(row: dict[str, Any]) -> bool:
        return ((algos is None or row["algo"] in algos) and (tasks is None or row["task"] in tasks)
                and (bounds is None or any(np.isclose(row["bound"], b) for b in bounds))
                and (seeds is None or row["seed"] in seeds))

    keys = [RunKey(r["algo"], r["task"], float(r["bound"]), int(r["seed"])) for r in rows if wanted(r)]
    keys = [k for k in keys if iterate in checkpoint.available_iterates(store, k)]
    if not keys:
        raise CubeError(f"no checkpoint at iterate {iterate} in {store} for the selected runs; "
                        "train with --eval-every or pick an evaluated iterate")
    writer = CubeWriter(store)
    cache: dict[tuple[str, str], Any] = {}
    for key in keys:
        meta = checkpoint.read_run_meta(store, key)
        cfg = with_overrides(TrainConfig(), meta["config"])
        ck = (key.task, repr(cfg))
        if ck not in cache:
            trainer = make_train(cfg, env_factory(key.task, cfg.episode_length))
            cache[ck] = (trainer, jax.jit(trainer.evaluate))
        trainer, evaluate = cache[ck]
        payload = checkpoint.load(store, key, iterate, trainer.template())
        params = Params(payload["policy"], payload["value"], payload["cost_value"])
        normalizer = Normalizer(**payload["normalizer"])
        ev = jax.device_get(evaluate(params, normalizer, eval_key(key.seed, iterate)))
        writer.write_episodes(key, "expl", iterate, ev.expl_reward, ev.expl_cost)
        writer.write_episodes(key, "greedy", iterate, ev.greedy_reward, ev.greedy_cost)
        report(f"{key}: iterate {iterate}: expl cost {np.mean(ev.expl_cost):.2f}, "
               f"greedy cost {np.mean(ev.greedy_cost):.2f} (d={key.bound:g}, {len(ev.expl_cost)} episodes each)")
    return len(keys)
