"""Task matrix: build every crax-bench safety task at every level, step it, print compile and step times.

For each cube label (`train.tasks`: 16 tasks x levels 1-3) this builds the env through the adapter
`saferl train` uses (`train.envs.make_crax_env`, crax's default backend, the level passed the way crax takes
it), checks that the level took effect where crax's own `get_environment(name, level=k)` would not
(`safe_lift_humanoid`: difficulty; `safe_velocity_*`: the speed threshold), then compiles a vmapped reset
and a scan of `--steps` vmapped steps under uniform random actions, and reports: build s, reset compile s,
step compile s, env steps/s (a second, compiled call), obs/action sizes, mean reward and cost per step, the
share of envs that terminated, and whether anything was NaN. A failing task is reported and the others go
on; the exit status is 1 if any failed.

    .venv/bin/python bench/task_matrix.py                              # all 48, CPU: about an hour
    .venv/bin/python bench/task_matrix.py --tasks circle,goal_l3,velocity_hopper_l2 --num-envs 64
    .venv/bin/python bench/task_matrix.py --levels 1                   # the 16 tasks at level 1
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default="", help="comma-separated cube labels (default: all)")
    p.add_argument("--levels", default="1,2,3", help="levels to include when --tasks is not given")
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--steps", type=int, default=64, help="steps per compiled call")
    p.add_argument("--episode-length", type=int, default=1000)
    p.add_argument("--cache", default="", help="persistent jax compile cache folder (default: none, so compile "
                   "times are real)")
    return p.parse_args()


def level_check(task: str, env: Any) -> str:
    """'' if the built env is at the label's level (where it can be read from the env), else what is wrong."""
    from train.tasks import task_spec

    spec = task_spec(task)
    base = env.unwrapped
    if spec.family.level_via == "difficulty":
        return "" if int(base.difficulty) == spec.level else f"difficulty {base.difficulty} != {spec.level}"
    if spec.family.level_via == "velocity_threshold":
        from crax.envs.safe_velocity import get_threshold_for_level

        want = get_threshold_for_level(spec.velocity_agent, spec.level)
        have = float(base._velocity_threshold)
        return "" if abs(have - want) < 1e-9 else f"threshold {have} != {want}"
    return ""


def measure(task: str, a: argparse.Namespace) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    from train.envs import crax_environment, make_crax_env

    t0 = time.perf_counter()
    fns = make_crax_env(task, a.episode_length)
    build_s = time.perf_counter() - t0
    problem = level_check(task, crax_environment(task, a.episode_length))
    n, steps = a.num_envs, a.steps
    reset = jax.jit(jax.vmap(fns.reset))
    v_step, v_observe = jax.vmap(fns.step), jax.vmap(fns.observe)

    @jax.jit
    def run(state: Any, key: jax.Array) -> tuple[Any, tuple[jax.Array, ...]]:
        def body(s: Any, k: jax.Array) -> tuple[Any, tuple[jax.Array, ...]]:
            s = v_step(s, jax.random.uniform(k, (n, fns.action_size), minval=-1.0, maxval=1.0))
            obs, r, c, d = v_observe(s)
            return s, (r, c, d, jnp.isfinite(obs).all())

        return jax.lax.scan(body, state, jax.random.split(key, steps))

    t0 = time.perf_counter()
    state = jax.block_until_ready(reset(jax.random.split(jax.random.PRNGKey(0), n)))
    reset_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, (r, c, d, finite) = jax.block_until_ready(run(state, jax.random.PRNGKey(1)))
    step_compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(run(state, jax.random.PRNGKey(2)))  # same input types: no recompile
    run_s = time.perf_counter() - t0
    r, c, d = (np.asarray(x) for x in (r, c, d))
    nan = not (bool(np.asarray(finite).all()) and np.isfinite(r).all() and np.isfinite(c).all())
    return {"build_s": build_s, "reset_s": reset_s, "step_compile_s": step_compile_s - run_s,
            "sps": n * steps / run_s, "obs": fns.obs_size, "act": fns.action_size, "reward": float(r.mean()),
            "cost": float(c.mean()), "terminated": float((d > 0.5).any(0).mean()), "nan": nan,
            "problem": problem or ("NaN in obs/reward/cost" if nan else "")}


def main() -> int:
    a = _args()
    import jax

    from train.tasks import TASK_SPECS

    if a.cache:
        jax.config.update("jax_compilation_cache_dir", a.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    levels = {int(x) for x in a.levels.split(",")}
    tasks = a.tasks.split(",") if a.tasks else [t for t, s in TASK_SPECS.items() if s.level in levels]
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}); {len(tasks)} task(s); {a.num_envs} envs, "
          f"{a.steps} steps per call, T {a.episode_length}; compile cache {'on' if a.cache else 'off'}", flush=True)
    head = (f"{'task':<24} {'env':<26} {'obs':>4} {'act':>3} {'build s':>8} {'reset s':>8} {'step compile s':>15} "
            f"{'steps/s':>9} {'r/step':>8} {'c/step':>8} {'term':>5}  status")
    print(head, flush=True)
    failed = []
    t_all = time.perf_counter()
    for task in tasks:
        try:
            m = measure(task, a)
        except Exception as exc:  # report and go on with the next task
            failed.append(task)
            print(f"{task:<24} FAILED: {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc(limit=2)
            continue
        if m["problem"]:
            failed.append(task)
        print(f"{task:<24} {TASK_SPECS[task].env:<26} {m['obs']:>4} {m['act']:>3} {m['build_s']:>8.1f} "
              f"{m['reset_s']:>8.1f} {m['step_compile_s']:>15.1f} {m['sps']:>9,.0f} {m['reward']:>8.3f} "
              f"{m['cost']:>8.3f} {m['terminated']:>5.2f}  {m['problem'] or 'ok'}", flush=True)
    print(f"{len(tasks) - len(failed)} of {len(tasks)} ok in {time.perf_counter() - t_all:.0f} s"
          + (f"; failed: {', '.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
