"""Throughput: this project's trainer vs CRAX's own trainer (default PPO-Lag on safe_circle_point).

Same machine, same process, same config (envs, episode length, unroll, batch, minibatches, epochs,
networks, normalisation, reward scaling), side by side: ours, then crax with its training-metric logging
on (`log_training_metrics=True`, its default) and off (its per-step env-metric host callback runs either
way). Prints env steps/s after compilation for each, the compile time of each (reported apart), and the
ratios ours / crax. Ours is measured through the full runner: each iterate's every episode is
transferred and written to a results cube, so logging is included. crax's per-epoch evaluator is
replaced by a no-op (it is outside the timed epochs anyway).

    .venv/bin/python bench/train_throughput.py                 # small CPU config
    .venv/bin/python bench/train_throughput.py --num-envs 2048 --episode-length 2000 \\
        --batch-size 1024 --num-minibatches 32 --iterates 4      # the paper's sizes (GPU)

`--group N` measures ours as a vmapped group of N runs (seeds 0..N-1 through `Runner.run_group`, the path
`saferl train --parallel-runs N` takes) against crax one run at a time, and prints a `GRID` line: the device
hours of `--grid-runs` runs of `--grid-steps` env steps each (the paper: 90 runs = 3 bounds x 30 seeds per
task and algorithm, 5e8 steps) both ways, ours = ceil(runs / N) groups x (steps / per-run steps/s in the group
+ compile), crax = runs x (steps / its steps/s + its compile), and their ratio. `bench/gpu_suite.sh` sums
them over the paper's grid.

`--profile` adds where one update of ours spends its time, each phase compiled and timed on its own:
the env's physics alone (its `step` under random actions), the rollout (physics plus policy inference),
the whole compiled update (rollout, advantages, normaliser, SGD, multiplier), and the host's share
(transfer and cube writes). crax runs the same `env.step`, so physics-alone steps/s over crax's steps/s
is the most any trainer of that env could gain over crax on this device.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import io
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--episode-length", type=int, default=256)
    p.add_argument("--unroll-length", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--num-minibatches", type=int, default=8)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--iterates", type=int, default=3, help="our iterates (the first one includes compile)")
    p.add_argument("--bound", type=float, default=25.0)
    p.add_argument("--task", default="circle")
    p.add_argument("--algo", default="ppo_lag")
    p.add_argument("--crax-log", choices=("on", "off", "both"), default="both")
    p.add_argument("--skip-crax", action="store_true")
    p.add_argument("--skip-ours", action="store_true")
    p.add_argument("--profile", action="store_true", help="time the phases of one of our updates")
    p.add_argument("--group", type=int, default=0, help="ours as a vmapped group of N runs (0: one run)")
    p.add_argument("--grid-runs", type=int, default=90, help="runs per task and algorithm for the GRID line")
    p.add_argument("--grid-steps", type=float, default=5e8, help="env steps per run for the GRID line")
    p.add_argument("--tiny", action="store_true", help="8-unit networks and 2 eval episodes (CPU checks)")
    p.add_argument("--cache", default="", help="persistent jax compile cache folder (default: none)")
    return p.parse_args()


def run_ours(cfg: Any, bound: float, task: str, algo: str) -> dict[str, float]:
    from train.envs import make_crax_env
    from train.record import prepare_store
    from train.runner import Runner

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.zarr"
        prepare_store(out, cfg, [algo], [task], [bound], [0])
        runner = Runner(out, cfg, task, make_crax_env)
        t0 = time.perf_counter()
        res = runner.run(algo, bound, 0)
        total = time.perf_counter() - t0
    steps, wall = np.array(res.iterate_steps[1:]), np.array(res.iterate_wall_s[1:])
    first_work = res.iterate_steps[0] * wall.sum() / steps.sum()  # time iterate 0 would take compiled
    return {"sps": steps.sum() / wall.sum(), "compile_s": res.iterate_wall_s[0] - first_work,
            "measured_steps": float(steps.sum()), "total_s": total}


def run_ours_group(cfg: Any, bound: float, task: str, algo: str, n: int) -> dict[str, float]:
    """A vmapped group of n runs (seeds 0..n-1): aggregate and per-run env steps/s (iterates 2.., every
    episode written to a cube) and the compile (the first iterate minus what it would take compiled)."""
    from cube import RunKey
    from train.envs import make_crax_env
    from train.record import prepare_store
    from train.runner import Runner

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.zarr"
        prepare_store(out, cfg, [algo], [task], [bound], list(range(n)))
        runner = Runner(out, cfg, task, make_crax_env)
        t0 = time.perf_counter()
        results = runner.run_group([RunKey(algo, task, bound, s) for s in range(n)])
        total = time.perf_counter() - t0
    steps = np.sum([r.iterate_steps for r in results], axis=0).astype(float)  # [iterates], all runs
    wall = np.max([r.iterate_wall_s for r in results], axis=0)  # a group iterate ends with its last write
    agg = steps[1:].sum() / wall[1:].sum()
    return {"sps": agg, "per_run_sps": agg / n, "compile_s": wall[0] - steps[0] / agg,
            "measured_steps": float(steps[1:].sum()), "total_s": total}


def grid_hours(ours: dict[str, float], crax: dict[str, float], group: int, runs: int,
               steps: float) -> tuple[float, float]:
    """(ours, crax) device hours of `runs` runs of `steps` env steps: ours in groups of `group`, crax one at a time."""
    ours_h = math.ceil(runs / group) * (steps / ours["per_run_sps"] + max(ours["compile_s"], 0.0)) / 3600
    crax_h = runs * (steps / crax["sps"] + max(crax["compile_s"], 0.0)) / 3600
    return ours_h, crax_h


def run_crax(cfg: Any, bound: float, task: str, algo: str, log: bool) -> dict[str, float]:
    import importlib
    from unittest import mock

    from learning_parity import NoEvaluator, crax_kwargs

    from train.envs import crax_environment, import_crax
    from train.registry import algorithm

    import_crax()
    mod = importlib.import_module(f"crax.training.agents.{algo}.train")  # the module, not the function
    acting = importlib.import_module("crax.training.acting")

    env = crax_environment(task, cfg.episode_length)  # the label's level, as crax takes it
    epochs: list[dict[str, float]] = []

    def progress(step: int, metrics: dict[str, Any]) -> None:
        if "training/sps" in metrics and all(e["step"] != step for e in epochs):
            epochs.append({"step": step, "sps": float(metrics["training/sps"]),
                           "walltime": float(metrics["training/walltime"])})

    per_epoch = (cfg.n_iterates - 1) * cfg.num_envs * cfg.episode_length  # same measured work as ours
    networks = importlib.import_module("crax.training.agents.ppo.networks")
    factory = functools.partial(networks.make_ppo_networks, policy_hidden_layer_sizes=cfg.policy_hidden,
                                value_hidden_layer_sizes=cfg.value_hidden,
                                cost_value_hidden_layer_sizes=cfg.cost_value_hidden if algorithm(algo).cost_critic
                                else None)
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), mock.patch.object(acting, "Evaluator", NoEvaluator):
        mod.train(
            environment=env, num_timesteps=2 * per_epoch, episode_length=cfg.episode_length,
            num_envs=cfg.num_envs, learning_rate=cfg.learning_rate, entropy_cost=cfg.entropy_cost,
            discounting=cfg.discount, unroll_length=cfg.unroll_length, batch_size=cfg.batch_size,
            num_minibatches=cfg.num_minibatches, num_updates_per_batch=cfg.num_epochs,
            normalize_observations=True, reward_scaling=cfg.reward_scaling, gae_lambda=cfg.gae_lambda, seed=0,
            num_evals=3, num_eval_envs=1, log_training_metrics=log, progress_fn=progress, network_factory=factory,
            **crax_kwargs(algo, cfg, bound))
    total = time.perf_counter() - t0
    first, second = epochs[0], epochs[1]
    t1 = first["walltime"]
    t2 = second["walltime"] - first["walltime"]
    return {"sps": second["sps"], "compile_s": t1 - t2, "measured_steps": float(second["step"] - first["step"]),
            "total_s": total}


def _best_time(fn: Any, *args: Any, repeats: int = 3) -> float:
    """Seconds of the fastest of `repeats` calls of the compiled `fn` (compiled by a first call)."""
    import jax

    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return min(times)


def profile_ours(cfg: Any, bound: float, task: str, algo: str) -> dict[str, float]:
    """Seconds per update of each phase of our trainer (one run, compile excluded): physics alone,
    rollout (physics + policy), the whole compiled update; and env steps per update."""
    import jax
    import jax.numpy as jnp

    from train.algorithm import d_step
    from train.envs import make_crax_env
    from train.onpolicy.algorithms.base import Algorithm
    from train.onpolicy.core import make_train
    from train.registry import algorithm

    env = make_crax_env(task, cfg.episode_length)
    spec = algorithm(algo, Algorithm)
    if spec.env_adapter is not None:
        raise SystemExit("--profile times the plain observation path; it does not cover ppo_saute")
    trainer = make_train(cfg, env, cost_critic=spec.cost_critic)
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0), jnp.int32(spec.id),
                                  jnp.float32(spec.initial_multiplier(cfg)), jnp.float32(d_step(cfg, bound)),
                                  jnp.asarray(spec.start_state(cfg), jnp.float32))
    v_step, n, steps = jax.vmap(env.step), cfg.num_envs, cfg.steps_per_update
    dist = trainer.networks.parametric_action_distribution
    policy = trainer.networks.policy_network

    @jax.jit
    def physics(env_state: Any, key: jax.Array) -> Any:
        def body(s: Any, k: jax.Array) -> tuple[Any, None]:
            return v_step(s, jax.random.uniform(k, (n, env.action_size), minval=-1.0, maxval=1.0)), None

        return jax.lax.scan(body, env_state, jax.random.split(key, steps))[0]

    @jax.jit
    def rollout(env_state: Any, key: jax.Array, params: Any, normalizer: Any) -> Any:
        def body(s: Any, k: jax.Array) -> tuple[Any, jax.Array]:
            logits = policy.apply(normalizer, params, s.obs)
            raw = dist.create_dist(logits).sample(k)
            return v_step(s, dist.postprocess(raw)), raw

        return jax.lax.scan(body, env_state, jax.random.split(key, steps))

    key = jax.random.PRNGKey(1)
    env_state = state.rollout.env_state
    iterate = jax.jit(trainer.iterate)
    state, out = iterate(state)  # compile, and one iterate's number of updates
    t_iterate = _best_time(iterate, state, repeats=2)
    n_updates = int(out.n_updates)
    return {"physics_s": _best_time(physics, env_state, key),
            "rollout_s": _best_time(rollout, env_state, key, state.params.policy, state.normalizer),
            "update_s": t_iterate / n_updates, "steps_per_update": float(n * steps)}


def print_profile(prof: dict[str, float], rows: dict[str, dict[str, float]]) -> None:
    """The phases per update (ms and share), and what they bound."""
    per = prof["steps_per_update"]
    phases = {"physics (env.step)": prof["physics_s"],
              "policy inference and sampling": prof["rollout_s"] - prof["physics_s"],
              "advantages, normaliser, SGD, multiplier": prof["update_s"] - prof["rollout_s"]}
    wall = per / rows["saferl"]["sps"] if "saferl" in rows else None
    if wall is not None:
        phases["host: transfer and cube writes (runner wall - compiled)"] = wall - prof["update_s"]
    total = wall if wall is not None else prof["update_s"]
    print(f"one update of ours = {per:,.0f} env steps; time per update by phase (compile excluded):")
    for name, t in phases.items():
        if t < 0:  # a difference of two timings, each the best of a few: noise can make a small one negative
            print(f"  {name:<58} {'~0':>9} ms  (within timing noise: {1e3 * t:.1f} ms)")
            continue
        print(f"  {name:<58} {1e3 * t:>9.1f} ms  {100 * t / total:>5.1f}%")
    physics_sps = per / prof["physics_s"]
    print(f"  physics alone: {physics_sps:,.0f} env steps/s; the compiled update: {per / prof['update_s']:,.0f}")
    for name in (n for n in rows if n != "saferl"):
        print(f"ceiling over {name}: physics alone / {name} = {physics_sps / rows[name]['sps']:.2f}x "
              "(no trainer of this env can beat crax by more on this device)")


def main() -> int:
    a = _args()
    from train.config import TrainConfig

    cfg = TrainConfig(total_env_steps=a.iterates * a.num_envs * a.episode_length, episode_length=a.episode_length,
                      num_envs=a.num_envs, unroll_length=a.unroll_length, batch_size=a.batch_size,
                      num_minibatches=a.num_minibatches, num_epochs=a.epochs, eval_episodes=8)
    if a.tiny:
        cfg = dataclasses.replace(cfg, policy_hidden=(8, 8), value_hidden=(8, 8), cost_value_hidden=(8, 8),
                                  eval_episodes=2)
    cfg.validate()
    import jax

    if a.cache:
        jax.config.update("jax_compilation_cache_dir", a.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)

    print(f"device: {jax.devices()[0].device_kind} x{len(jax.devices())}; {a.algo} on {a.task}; "
          f"envs {cfg.num_envs}, T {cfg.episode_length}, unroll {cfg.unroll_length}, batch {cfg.batch_size}, "
          f"minibatches {cfg.num_minibatches}, epochs {cfg.num_epochs}, networks policy {cfg.policy_hidden} "
          f"value/cost {cfg.value_hidden}", flush=True)
    rows = {}
    if not a.skip_ours:
        if a.group:
            rows["saferl"] = run_ours_group(cfg, a.bound, a.task, a.algo, a.group)
        else:
            rows["saferl"] = run_ours(cfg, a.bound, a.task, a.algo)
        print(f"saferl{f' x{a.group} vmapped' if a.group else ''}: {rows['saferl']}", flush=True)
    if not a.skip_crax:
        for log in (("on", "off") if a.crax_log == "both" else (a.crax_log,)):
            rows[f"crax log {log}"] = run_crax(cfg, a.bound, a.task, a.algo, log == "on")
            print(f"crax log {log}: {rows[f'crax log {log}']}", flush=True)
    print(f"{'trainer':<13} {'env steps/s':>12} {'compile s':>10} {'measured steps':>15} {'total s':>8}")
    for name, r in rows.items():
        print(f"{name:<13} {r['sps']:>12,.0f} {r['compile_s']:>10.1f} {r['measured_steps']:>15,.0f} "
              f"{r['total_s']:>8.1f}")
    for name in (n for n in rows if n != "saferl"):
        if "saferl" in rows:
            print(f"ratio saferl / {name}: {rows['saferl']['sps'] / rows[name]['sps']:.2f}x "
                  "(saferl writes every episode to a cube)")
    if not a.group and "saferl" in rows and len(rows) > 1:
        name = next(n for n in rows if n != "saferl")
        print(f"THROUGHPUT task={a.task} algo={a.algo} ours_sps={rows['saferl']['sps']:.0f} "
              f"crax_sps={rows[name]['sps']:.0f} ratio={rows['saferl']['sps'] / rows[name]['sps']:.3f} "
              f"ours_compile_s={rows['saferl']['compile_s']:.1f} crax_compile_s={rows[name]['compile_s']:.1f} "
              f"crax={name.replace(' ', '_')}", flush=True)
    if a.group and "saferl" in rows and len(rows) > 1:
        name = next(n for n in rows if n != "saferl")
        ours_h, crax_h = grid_hours(rows["saferl"], rows[name], a.group, a.grid_runs, a.grid_steps)
        print(f"GRID task={a.task} algo={a.algo} group={a.group} runs={a.grid_runs} steps={a.grid_steps:.3g} "
              f"ours_run_sps={rows['saferl']['per_run_sps']:.0f} ours_agg_sps={rows['saferl']['sps']:.0f} "
              f"crax_sps={rows[name]['sps']:.0f} ours_h={ours_h:.4g} crax_h={crax_h:.4g} "
              f"ratio={ours_h / crax_h:.3f} crax={name.replace(' ', '_')}", flush=True)
    if a.profile:
        print_profile(profile_ours(cfg, a.bound, a.task, a.algo), rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
