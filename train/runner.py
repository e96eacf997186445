"""Host side of training: one path for a group of runs of either family (a single run is a group of one).

`Runner(out, config, task, env_factory).run_group(keys)` trains runs of one task together through one
`train.program.GroupProgram`: a group of one with the plain compiled trainer, a larger group as one vmapped
program. Per iterate the compiled `iterate` returns the completed episodes' sums in one transfer; the host
compacts them (NaN slots dropped), writes them as mode `train` with the per-iterate variables and, at
evaluation iterates, N paired expl/greedy episodes plus a checkpoint and a resume point per run, all through
`cube.CubeWriter`. Ctrl-C is deferred while a store write is in progress. `train.evaluate.evaluate_store` rolls
out stored checkpoints again.
"""

from __future__ import annotations

import contextlib
import platform
import signal
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from cube import CubeWriter
from cube.schema import RunKey, utc_stamp
from train import checkpoint
from train.config import TrainConfig
from train.envs import EnvFns
from train.overrides import config_to_dict
from train.placement import current_placement
from train.program import Flags, GroupProgram, IterateOutput, RunState, trainer_family
from train.progress import TrainProgress
from train.record import compact_episodes, eval_iterates, n_episode_slots
from train.registry import algorithm, family_of
from train.variants import variant_label

WRITER = "saferl train"
"""The manifests' `writer` (`cube.schema.MANIFEST_KEYS`)."""


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

    def _handler(self, signum: int, frame: FrameType | None) -> None:
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


class Runner:
    """Trains runs of one task with shared compiled functions and writes them to the cube."""

    def __init__(self, out: str | Path, config: TrainConfig, task: str,
                 env_factory: Callable[[str, int], EnvFns]) -> None:
        self.out, self.config, self.task = Path(out), config, task
        self.env = env_factory(task, config.episode_length)
        self.guard = _SigintGuard()
        self.capacity = n_episode_slots(config)
        self._programs: dict[tuple[str, int, Flags], GroupProgram] = {}

    def program_for(self, algos: Sequence[str], n_runs: int = 1) -> GroupProgram:
        """The compiled program that trains runs of `algos` (one family; `TrainerFamily.flags`: e.g. no cost critic for
        PPO or SAC alone) in groups of `n_runs`, built on first use, then shared."""
        fam = trainer_family(family_of(algos))
        key = (fam.name, n_runs, fam.flags(algos))
        if key not in self._programs:
            self._programs[key] = GroupProgram(fam, self.config, self.env, key[2], n_runs)
        return self._programs[key]

    def run(self, algo: str, bound: float, seed: int, progress: TrainProgress | None = None) -> RunResult:
        """Train (or resume) one run: the group of one of `run_group`."""
        return self.run_group([RunKey(algo, self.task, float(bound), int(seed))], progress)[0]

    def run_group(self, keys: Sequence[RunKey], progress: TrainProgress | None = None,
                  write: Collection[RunKey] | None = None) -> list[RunResult]:
        """Train (or resume) runs of this task together, as one program over `keys` in this order, and write
        each to its own region; one result per written key (`write`, default all `keys`, in `keys` order).

        Runs already complete in the store are skipped (status "skipped"). Members that are complete or not
        in `write` ride along: trained in the program, nothing of theirs written, so that the others get the
        numbers of the group they were first trained in (a vmapped program's floats depend on its members;
        see `train.sweep.make_units`). The members resume from their newest common resume point (saved at
        every evaluation iterate), otherwise the group starts from scratch; the iterates after that point
        are written again, which replaces all their episode slots. Each written run's manifest records the
        group (`group`, `group_size`). KeyboardInterrupt marks the runs partial (the store stays valid) and
        propagates. `progress`: the live display's hooks (`train.progress.TrainProgress`).
        """
        writer = CubeWriter(self.out)
        keys = [self._key(k) for k in keys]
        chosen = set(keys) if write is None else {self._key(k) for k in write}
        wanted = [k for k in keys if k in chosen]
        done = {k: RunResult(k, "skipped", self.config.n_iterates, float("nan"), 0.0, 0.0,
                             notes=["already complete in the store"])
                for k in wanted if writer.run_status(k) == "complete"}
        todo = [k for k in wanted if k not in done]
        if not todo:
            return [done[k] for k in wanted]
        started = utc_stamp()
        results = {k: RunResult(k, "partial", 0, 0.0, 0.0, 0.0) for k in keys}
        group = {"group_size": len(keys), "group": [k.as_dict() for k in keys]}
        with self.guard.hold():
            for k in todo:
                writer.set_run_manifest(k, status="partial", manifest=self._manifest(k, started, notes="running",
                                                                                      **group))
                checkpoint.write_run_meta(self.out, k, {**k.as_dict(), "config": config_to_dict(self.config),
                                                        "env": self.env.name})
        try:
            self._train(writer, keys, set(todo), results, progress, started)
            for k in todo:
                results[k].status = "complete"
        except KeyboardInterrupt:
            for k in todo:
                results[k].notes.append(f"interrupted by the user after {results[k].iterates_done} iterates")
            raise
        finally:
            with self.guard.hold():
                for k in todo:
                    res = results[k]
                    writer.set_run_manifest(k, status=res.status, manifest=self._manifest(
                        k, started, finished=utc_stamp(), iterates_done=res.iterates_done, env_steps=res.env_steps,
                        compile_s=round(res.compile_s, 3), train_s=round(res.train_s, 3),
                        resumed_from=res.resumed_from, eval_iterates=checkpoint.available_iterates(self.out, k),
                        notes="; ".join(res.notes), **group))
        done.update((k, results[k]) for k in todo)
        return [done[k] for k in wanted]

    def _key(self, key: RunKey) -> RunKey:
        return RunKey(key.algo, self.task, float(key.bound), int(key.seed))

    def _manifest(self, key: RunKey, started: str, **extra: Any) -> dict[str, Any]:
        from train.tasks import TASK_SPECS

        config = config_to_dict(self.config)
        spec = TASK_SPECS.get(key.task)
        return {"writer": WRITER, "config": config, "algo": key.algo, "task": key.task,
                "env": self.env.name, **({"level": spec.level} if spec else {}),
                "variant": variant_label(config, key.algo), "constrained": algorithm(key.algo).constrained,
                "family": algorithm(key.algo).family, "bound": float(key.bound), "seed": int(key.seed),
                "versions": _versions(), **current_placement(), "started": started,
                "checkpoints": str(checkpoint.run_dir(self.out, key).relative_to(self.out)), **extra}

    def _start(self, program: GroupProgram, keys: Sequence[RunKey],
               results: dict[RunKey, RunResult]) -> tuple[RunState, int]:
        """Initial group state, or the runs' states at their newest common resume point (in today's structure or
        one of the family's older ones, `TrainerFamily.resume_templates`); returns (state, first iterate)."""
        import jax
        import jax.numpy as jnp

        state = program.init(keys)
        template = jax.tree_util.tree_map(jnp.zeros_like, program.member(state, 0))
        common = set.intersection(*(set(checkpoint.resume_iterates(self.out, k)) for k in keys))
        templates = [template, *program.family.resume_templates(template)]
        for j in sorted(common, reverse=True):
            for tpl in templates:
                found = [checkpoint.load_resume(self.out, k, tpl, j) for k in keys]
                if all(found):
                    break
            else:
                continue
            break
        else:
            return state, 0  # no common resume point: the whole group starts from scratch
        loaded = []
        for i, (k, f) in enumerate(zip(keys, found, strict=True)):
            assert f is not None
            res = results[k]
            res.env_steps, res.iterates_done, res.resumed_from = f[2], j + 1, j
            res.notes.append(f"resumed after iterate {j}")
            loaded.append(program.family.upgrade(f[1], program.member(state, i)))
        return program.stack(loaded), j + 1

    def _train(self, writer: CubeWriter, keys: list[RunKey], written: set[RunKey],
               results: dict[RunKey, RunResult], progress: TrainProgress | None, started: str = "") -> None:
        """Train the group `keys`; only the runs in `written` are written to the store, each with its progress
        record (`cube.store.progress.ProgressLog`: phase, iterate times) as it changes."""
        import jax

        from cube.store.progress import ProgressLog

        cfg = self.config
        shown = [k for k in keys if k in written]
        log = ProgressLog(self.out, shown, cfg.n_iterates, 0, {}, started)  # compiling from here on
        program = self.program_for([k.algo for k in keys], len(keys))
        t0 = time.perf_counter()
        state, start = self._start(program, keys, results)
        log.start_at(start, {k: results[k].env_steps for k in shown})
        evals = set(eval_iterates(cfg))
        label = shown[0] if len(shown) == 1 else GroupLabel(shown)
        task_id = progress.start_run(label, cfg) if progress else None
        for j in range(start, cfg.n_iterates):
            t_it = time.perf_counter()
            state, out, mult = program.iterate(state)
            dt = time.perf_counter() - t_it
            for i, key in enumerate(keys):
                if key in written:
                    one = jax.tree_util.tree_map(lambda x, i=i: np.asarray(x[i]), out)
                    steps, values = program.record(key.algo, one, float(mult[i]))
                    self._record_iterate(writer, key, results[key], j, one, steps, values, dt, first=j == start,
                                         t_it=t_it)
            log.iterate(j, {k: results[k].env_steps for k in shown}, time.perf_counter() - t_it)
            if j in evals:
                log.phase("evaluating")
                ev = program.evaluate(state, [k.seed for k in keys], j)
                log.phase("writing")
                with self.guard.hold():
                    for i, key in enumerate(keys):
                        if key not in written:
                            continue
                        writer.write_episodes(key, "expl", j, ev.expl_reward[i], ev.expl_cost[i])
                        writer.write_episodes(key, "greedy", j, ev.greedy_reward[i], ev.greedy_cost[i])
                        one = program.member(state, i)
                        checkpoint.save(self.out, key, j, program.payload(one))
                        checkpoint.save_resume(self.out, key, j, one, results[key].env_steps)
                log.phase("training" if j + 1 < cfg.n_iterates else "writing")
            if progress:
                view = results[shown[0]] if len(shown) == 1 else label.update([results[k] for k in shown])
                progress.advance(task_id, sum(results[k].iterate_steps[-1] for k in shown), view, label,
                                 time.perf_counter() - t0)
        if progress:
            progress.finish_run(task_id)

    def _record_iterate(self, writer: CubeWriter, key: RunKey, res: RunResult, j: int, out: IterateOutput, steps: int,
                        values: dict[str, float], dt: float, *, first: bool, t_it: float) -> None:
        """Book one finished iterate of one run: timings, its training episodes and per-iterate variables.

        `out` is the run's host copy of the iterate's output (episode buffers); `steps`, `values`: its env
        steps and per-iterate variables (`GroupProgram.record`).
        """
        if first:
            res.compile_s += dt  # first call: compile + one iterate
        else:
            res.train_s += dt
        res.env_steps += steps
        r, c, dropped = compact_episodes(np.asarray(out.episodes.reward), np.asarray(out.episodes.cost),
                                         np.asarray(out.episodes.count), self.capacity)
        values = {"env_steps": res.env_steps, "dropped_episodes": dropped, **values}
        with self.guard.hold():
            writer.write_episodes(key, "train", j, r, c)
            writer.write_iterate_vars(key, j, values)
        res.iterate_steps.append(steps)
        res.iterate_wall_s.append(time.perf_counter() - t_it)
        if dropped:
            res.notes.append(f"iterate {j}: {dropped} episodes did not fit the buffer")
        res.iterates_done = j + 1
        res.final_cost = float(np.mean(c)) if c.size else float("nan")


class GroupLabel:
    """Progress view of a group of several runs: looks like a RunKey and a RunResult to the progress hooks."""

    def __init__(self, keys: Sequence[RunKey]) -> None:
        self.keys = list(keys)
        self.bound = float(np.mean([k.bound for k in keys]))
        self.env_steps, self.train_s, self.iterates_done, self.final_cost = 0.0, 0.0, 0, float("nan")

    def update(self, results: Sequence[RunResult]) -> GroupLabel:
        """Take the group's totals from its runs' results; returns itself."""
        self.env_steps = sum(r.env_steps for r in results)
        self.train_s = max(r.train_s for r in results)
        self.iterates_done = max(r.iterates_done for r in results)
        self.final_cost = float(np.nanmean([r.final_cost for r in results]))
        return self

    def __str__(self) -> str:
        k = self.keys[0]
        return f"{k.algo}/{k.task} x{len(self.keys)} (seeds {','.join(str(x.seed) for x in self.keys)})"
