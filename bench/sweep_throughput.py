"""Sweep throughput: aggregate env steps/s of 1, 4 and 16 runs vmapped into one program on one task.

Each group is trained through `Runner.run_group` (the path `saferl train` uses), so every iterate's
episodes and per-iterate variables of every run are transferred and written to a results cube. The
first iterate includes the compile and is reported apart; the rate uses the later iterates only.

`--paper` takes the paper's sizes (2048 envs, batch 1024 x 32 minibatches, 6 epochs, unroll 8, T=2000);
an explicit `--episode-length` still applies, so a short T measures the paper-sized update loop (env
steps/s do not depend on T) in a fraction of the time of T=2000 iterates.

    .venv/bin/python bench/sweep_throughput.py                       # small CPU config, task goal
    .venv/bin/python bench/sweep_throughput.py --task toy            # the pure-JAX toy task
    .venv/bin/python bench/sweep_throughput.py --paper --runs 1,8,32,90 --iterates 3   # GPU, paper sizes
    .venv/bin/python bench/sweep_throughput.py --paper --episode-length 100 --runs 1,8,32,90 --iterates 2
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
    p.add_argument("--episode-length", type=int, default=None,
                   help="steps per episode T (default 128, or 2000 with --paper)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--iterates", type=int, default=3, help="iterates per group (the first one includes compile)")
    p.add_argument("--paper", action="store_true",
                   help="the paper's sizes (2048 envs, batch 1024 x 32, 6 epochs, T=2000 unless --episode-length)")
    return p.parse_args()


def _config(a: argparse.Namespace):  # noqa: ANN202
    from train.config import TrainConfig

    if a.paper:
        paper = TrainConfig()
        T = paper.episode_length if a.episode_length is None else a.episode_length
        base = TrainConfig(episode_length=T)
    else:
        base = TrainConfig(
            num_envs=a.num_envs, episode_length=128 if a.episode_length is None else a.episode_length,
            batch_size=a.batch_size,
            num_minibatches=a.num_minibatches, num_epochs=a.epochs, eval_episodes=8)
    cfg = TrainConfig(**{**base.__dict__, "total_env_steps": a.iterates * base.num_envs * base.episode_length,
                         "eval_every": 10**6})
    cfg.validate()
    return cfg


def _peak_gib() -> tuple[float, float] | None:
    """(peak bytes in use, bytes limit) of device 0 in GiB, or None where the backend keeps no stats (CPU)."""
    import jax

    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # a backend without memory stats
        return None
    if not stats or "peak_bytes_in_use" not in stats:
        return None
    return stats["peak_bytes_in_use"] / 2**30, stats.get("bytes_limit", float("nan")) / 2**30


def measure(cfg, task: str, algo: str, n: int) -> dict[str, float]:  # noqa: ANN001
    """Train a group of n runs (seeds 0..n-1, bound 25) for cfg.n_iterates iterates; rates in env steps/s."""
    from train.record import prepare_store
    from train.runner import Runner
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
    from train.cli import require_train_extra

    require_train_extra()
    import jax

    cfg = _config(a)
    sizes = [int(x) for x in a.runs.split(",")]
    print(f"task {a.task}, {a.algo}, device {jax.devices()[0].device_kind}: "
          f"{cfg.num_envs} envs x T={cfg.episode_length}, "
          f"batch {cfg.batch_size} x {cfg.num_minibatches} minibatches x {cfg.num_epochs} epochs, "
          f"{cfg.n_iterates} iterates per run (first includes compile; rate from the others)")
    print(f"{'runs':>5} {'compile+1st it [s]':>19} {'agg steps/s':>12} {'per run':>10} {'vs 1 run':>9} "
          f"{'wall [s]':>9} {'peak mem [GiB]':>15}  (wall: whole group incl. compile and eval; peak: so far)",
          flush=True)
    base = None
    rates: dict[int, float] = {}
    for n in sizes:
        try:
            m = measure(cfg, a.task, a.algo, n)
        except Exception as exc:  # e.g. out of device memory: report it and go on with the next size
            print(f"{n:>5} failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:400],
                  flush=True)
            continue
        rates[n] = m["rate"]
        base = base if base == base and base else m["rate"]
        peak = _peak_gib()
        mem = f"{peak[0]:>15.2f}" if peak else f"{'n/a':>15}"
        print(f"{n:>5} {m['compile_s']:>19.1f} {m['rate']:>12,.0f} {m['rate'] / n:>10,.0f} {m['rate'] / base:>8.2f}x "
              f"{m['wall_s']:>9.1f} {mem}", flush=True)
    peak = _peak_gib()
    if peak:
        print(f"max GPU memory: {peak[0]:.2f} GiB peak in use of {peak[1]:.2f} GiB limit "
              f"(device 0 peak_bytes_in_use over all groups)")
    else:
        print("max GPU memory: n/a (the backend reports no memory stats)")
    measured = {n: r for n, r in rates.items() if r == r and r > 0}  # drop nan (a single iterate measures no rate)
    if a.paper and measured:
        best = max(measured, key=measured.get)
        rate = measured[best]
        run_steps = 5e8
        grid_steps = 1440 * run_steps
        print(f"paper grid: 1440 runs x {run_steps:.0e} steps = {grid_steps:.2e} steps; at the best rate above "
              f"({rate:,.0f} agg steps/s with {best} runs vmapped, {rate / best:,.0f} steps/s per run; "
              f"measured at T={cfg.episode_length}, steps/s do not depend on T) that is "
              f"{grid_steps / rate / 3600:,.0f} device-hours, {run_steps / (rate / best) / 3600:,.1f} h per group "
              f"of {best} runs (paper: 2,880 L4 GPU-hours, 2 h per run)")


if __name__ == "__main__":
    main()
