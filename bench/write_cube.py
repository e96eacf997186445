"""Write a 1/8-paper-scale cube and report write throughput and store size.

Grid: 4 algos x 4 tasks x 3 bounds x 30 seeds x 122 iterates x 256 training episodes, plus final
expl/greedy x 100 episodes (1,440 runs). Usage: ``python bench/write_cube.py [OUT] [--keep]``.
Prints wall time, runs/s, episodes/s, MB/s of raw float32 reward+cost and the store's size on disk.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from cube.demo import make_demo_cube

SCALE = {"n_seeds": 30, "n_iterates": 122, "n_train_episodes": 256, "n_eval_episodes": 100}


def _size_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", nargs="?", default="bench/out/eighth.zarr")
    parser.add_argument("--keep", action="store_true", help="keep the store (other benchmarks reuse it)")
    args = parser.parse_args()
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    make_demo_cube(out, seed=0, **SCALE)
    elapsed = time.perf_counter() - start
    runs = 4 * 4 * 3 * SCALE["n_seeds"]
    episodes = runs * SCALE["n_iterates"] * SCALE["n_train_episodes"] + runs * 2 * SCALE["n_eval_episodes"]
    raw = runs * SCALE["n_iterates"] * SCALE["n_train_episodes"] * 3 * 4 * 2  # slots x modes x f32 x vars
    size = _size_bytes(out)
    print(f"runs written        : {runs}")
    print(f"episodes written    : {episodes:,}")
    print(f"wall time           : {elapsed:.1f} s (includes generating the synthetic numbers)")
    print(f"throughput          : {runs / elapsed:.1f} runs/s, {episodes / elapsed / 1e6:.2f} M episodes/s, "
          f"{raw / elapsed / 2**20:.0f} MiB/s raw")
    print(f"store size on disk  : {size / 2**20:.0f} MiB (raw float32 slots {raw / 2**20:.0f} MiB, ratio {size / raw:.2f})")
    if not args.keep:
        shutil.rmtree(out)


if __name__ == "__main__":
    main()
