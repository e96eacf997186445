"""The statistics kernel, numpy against the compiled loop (`cube.stats.fused`), side by side on the same
blocks in one process: CPU time per block, the ratio, and whether the two agree bit for bit.

    .venv/bin/python bench/kernel_speed.py [--store bench/out/paper.zarr] [--rounds 5]

Blocks: one full-pass block (the seeds `_open_for_full_pass` groups, all iterates, episodes and modes) and
one run (what following reads again per changed run), read from --store when it exists, else synthetic
ones of paper size (122 iterates x 2,048 episodes x 3 modes, evaluation modes empty but every 10th iterate,
as bench/scale.py writes them). Timings are process CPU time, fastest of --rounds, the kernels alternated.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# bench/ itself off the path: its coverage.py would shadow the `coverage` package numba imports
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

from cube.stats import fused, kernel  # noqa: E402
from cube.stats.suffstats import FULL_PASS_BLOCK_BYTES  # noqa: E402


def synthetic_block(seeds: int, iterates: int = 122, episodes: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    shape = (seeds, iterates, episodes, 3)
    cost = rng.gamma(2.0, 12.5, shape).astype(np.float32)
    reward = rng.normal(10.0, 5.0, shape).astype(np.float32)
    evaluated = np.zeros(iterates, dtype=bool)
    evaluated[::10] = True
    for m in (1, 2):
        cost[:, ~evaluated, :, m] = np.nan
        cost[:, evaluated, 100:, m] = np.nan  # 100 evaluation episodes
    reward[np.isnan(cost)] = np.nan
    return reward, cost


def stored_block(store: Path, seeds: int) -> tuple[np.ndarray, np.ndarray, float]:
    import zarr

    group = zarr.open_group(str(store), mode="r")
    return group["reward"][0, 0, 0, :seeds], group["cost"][0, 0, 0, :seeds], float(group["bound"][0])


def time_kernel(choice: str, reward: np.ndarray, cost: np.ndarray, bound: float, kappa: np.ndarray):
    start = time.process_time()
    out = kernel.cell_stats(reward, cost, np.array(bound), kappa, None, kernel=choice)
    return time.process_time() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=ROOT / "bench" / "out" / "paper.zarr")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not fused.available():
        sys.exit("numba is not installed: pip install numba (a dependency of saferl) and run again")
    run_bytes = 122 * 2048 * 3 * 4
    seeds = max(1, FULL_PASS_BLOCK_BYTES // run_bytes)
    kappa = kernel.default_kappa()
    source = f"{args.store}" if args.store.is_dir() else "synthetic (no --store)"
    print(f"bench/kernel_speed.py: blocks from {source}; process CPU time, fastest of {args.rounds}")
    for name, n in (("full-pass block", seeds), ("one run", 1)):
        reward, cost, bound = stored_block(args.store, n) if args.store.is_dir() else (*synthetic_block(n), 25.0)
        time_kernel("fused", reward[:1, :2], cost[:1, :2], bound, kappa)  # numba's import and compile, not timed
        best = {"numpy": np.inf, "fused": np.inf}
        outs = {}
        for _ in range(args.rounds):
            for choice in best:
                seconds, outs[choice] = time_kernel(choice, reward, cost, bound, kappa)
                best[choice] = min(best[choice], seconds)
        same = all(np.array_equal(a, b) for a, b in zip(outs["numpy"][1:], outs["fused"][1:], strict=True))
        print(f"  {name:16s} {cost.shape}  numpy {best['numpy'] * 1e3:7.1f} ms   fused {best['fused'] * 1e3:7.1f} ms"
              f"   numpy / fused {best['numpy'] / best['fused']:5.1f}x   bit for bit: {'yes' if same else 'NO'}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
