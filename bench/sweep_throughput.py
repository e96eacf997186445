"""Sweep throughput: aggregate env steps/s of 1, 4 and 16 runs vmapped into one program on one task.

Each group is trained through `Runner.run_group` (the path `saferl train` uses), so every iterate's
episodes and per-iterate variables of every run are transferred and written to a results cube. The
first iterate includes the compile and is reported apart; the rate uses the later iterates only.

    .venv/bin/python bench/sweep_throughput.py                       # small CPU config, task goal
    .venv/bin/python bench/sweep_throughput.py --task toy            # the pure-JAX toy task
    .venv/bin/python bench/sweep_throughput.py --paper --runs 1,8,32,90 --iterates 3   # GPU, paper sizes
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from cube import RunKey


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="goal", help="goal/circle/push/button (CRAX, MJX) or toy")
    p.add_argument("--algo", default="ppo_lag")
    p.add_argument("--runs", default="1,4,16", help="group sizes to measure")
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--episode-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--iterates", type=int, default=3, help="iterates per group (the first one includes compile)")
    p.add_argument("--paper", action="store_true", help="the paper's sizes (2048 envs, T=2000, ...)")
    return p.parse_args()


def _config(a: argparse.Namespace):  # noqa: ANN202
    from train.config import TrainConfig

    base = TrainConfig() if a.paper else TrainConfig(
        num_envs=a.num_envs, episode_length=a.episode_length, batch_size=a.batch_size,
        num_minibatches=a.num_minibatches, num_epochs=a.epochs, eval_episodes=8)
    return TrainConfig(**{**base.__dict__, "total_env_steps": a.iterates * base.num_envs * base.episode_length,
                          "eval_every": 10**6})


def measure(cfg, task: str, algo: str, n: int) -> dict[str, float]:  # noqa: ANN001
    """Train a group of n runs (seeds 0..n-1, bound 25) for cfg.n_iterates iterates; rates in env steps/s."""
    from train.runner import Runner, prepare_store
    from train.sweep import make_env

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.zarr"
        prepare_store(out, cfg, [algo], [task], [25.0], list(range(n)))
        runner = Runner(out, cfg, task, make_env)
        t0 = time.perf_counter()
        results = runner.run_group([RunKey(algo, task, 25.0, s) for s in range(n)])
        wall = time.perf_counter() - t0
    first = results[0]
    later_steps = sum(sum(r.iterate_steps[1:]) for r in results)
    return {"compile_s": first.compile_s, "train_s": first.train_s, "steps": later_steps,
            "rate": later_steps / first.train_s if first.train_s else float("nan"), "wall_s": wall}


def main() -> None:
    a = _args()
    from train.cli import _need_train_extra

    _need_train_extra()
    import jax

    cfg = _config(a)
    sizes = [int(x) for x in a.runs.split(",")]
    print(f"task {a.task}, {a.algo}, device {jax.devices()[0].device_kind}: {cfg.num_envs} envs x T={cfg.episode_length}, "
          f"batch {cfg.batch_size} x {cfg.num_minibatches} minibatches x {cfg.num_epochs} epochs, "
          f"{cfg.n_iterates} iterates per run (first includes compile; rate from the others)")
    print(f"{'runs':>5} {'compile+1st it [s]':>19} {'agg steps/s':>12} {'per run':>10} {'vs 1 run':>9}")
    base = None
    for n in sizes:
        m = measure(cfg, a.task, a.algo, n)
        base = base or m["rate"]
        print(f"{n:>5} {m['compile_s']:>19.1f} {m['rate']:>12,.0f} {m['rate'] / n:>10,.0f} {m['rate'] / base:>8.2f}x",
              flush=True)
    if a.paper:
        grid_steps = 1440 * 5e8
        print(f"paper grid: 1440 runs x 5e8 steps = {grid_steps:.2e} steps; at the best rate above that is "
              f"{grid_steps / max(base, m['rate']) / 3600:,.0f} device-hours (paper: 2,880 L4 GPU-hours)")


if __name__ == "__main__":
    main()
