"""Write a 1/8-paper-scale cube and report write throughput and store size.

Grid: 4 algos x 4 tasks x 3 bounds x 30 seeds x 122 iterates x 256 training episodes, plus final
expl/greedy x 100 episodes (1,440 runs). Usage: ``python bench/write_cube.py [OUT] [--keep] [--scale 1/8|1/24]``;
``--scale 1/24``: the same grid with 85 training episodes per iterate (2,048 / 24; bench/startup.py and
bench/pass_floor.py use it).

Times the store writes (``CubeWriter.write_run`` + per-iterate vars + manifest) apart from generating
the synthetic numbers, and side by side writes the same arrays as raw ``.npy`` files (no compression,
no metadata) as a disk-speed baseline; prints both and their ratio, and the store's size on disk.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from cube import CubeWriter, RunKey, create_store
from cube.io.demo import DEMO_ALGOS as ALGOS
from cube.io.demo import DEMO_BOUNDS, synthetic_run
from cube.io.demo import DEMO_TASKS as TASKS

SCALES = {"1/8": {"n_seeds": 30, "n_iterates": 122, "n_train_episodes": 256, "n_eval_episodes": 100},
          "1/24": {"n_seeds": 30, "n_iterates": 122, "n_train_episodes": 2048 // 24, "n_eval_episodes": 100}}
SCALE = SCALES["1/8"]


def _size_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", nargs="?", default="bench/out/eighth.zarr")
    parser.add_argument("--keep", action="store_true", help="keep the store (other benchmarks reuse it)")
    parser.add_argument("--scale", choices=sorted(SCALES), default="1/8",
                        help="episodes per iterate: 1/8 (256, default) or 1/24 (85) of the paper's 2,048")
    args = parser.parse_args()
    write(Path(args.out), SCALES[args.scale], keep=args.keep)


def write(out: Path, scale: dict[str, int], keep: bool = True) -> None:
    """Write the synthetic cube of `scale` at `out` (replacing it) and print the timings."""
    SCALE = scale  # noqa: N806 - the grid of this call
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    n_seeds, n_iter = SCALE["n_seeds"], SCALE["n_iterates"]
    n_slots = max(SCALE["n_train_episodes"], SCALE["n_eval_episodes"])
    create_store(out, algos=ALGOS, tasks=TASKS, bounds=DEMO_BOUNDS, seeds=range(n_seeds),
                 n_iterates=n_iter, n_episodes=n_slots, attrs={"synthetic": True,
                 "description": "SYNTHETIC benchmark cube (bench/write_cube.py)"})
    writer = CubeWriter(out)
    npy_dir = Path(tempfile.mkdtemp(prefix="npy-baseline-", dir=out.parent))
    t_gen = t_store = t_npy = 0.0
    runs = 0
    for a, algo in enumerate(ALGOS):
        for t, task in enumerate(TASKS):
            for b, bound in enumerate(DEMO_BOUNDS):
                rng = np.random.default_rng([0, a, t, b])
                for seed in range(n_seeds):
                    key = RunKey(algo, task, bound, seed)
                    t0 = time.perf_counter()
                    run = synthetic_run(rng, key, n_iter, SCALE["n_train_episodes"], SCALE["n_eval_episodes"], n_slots)
                    t1 = time.perf_counter()
                    writer.write_run(key, run["reward"], run["cost"])
                    writer.write_iterate_vars(key, 0, {"env_steps": run["env_steps"], "multiplier": run["multiplier"]})
                    writer.set_run_manifest(key, status="complete", manifest={"synthetic": True})
                    t2 = time.perf_counter()
                    np.save(npy_dir / f"{runs}_r.npy", run["reward"])
                    np.save(npy_dir / f"{runs}_c.npy", run["cost"])
                    t3 = time.perf_counter()
                    t_gen, t_store, t_npy = t_gen + t1 - t0, t_store + t2 - t1, t_npy + t3 - t2
                    runs += 1
    episodes = runs * (n_iter * SCALE["n_train_episodes"] + 2 * SCALE["n_eval_episodes"])
    raw = runs * n_iter * n_slots * 3 * 4 * 2
    size = _size_bytes(out)
    npy_size = _size_bytes(npy_dir)
    shutil.rmtree(npy_dir)
    print(f"runs written            : {runs}  ({episodes:,} episodes)")
    print(f"synthetic generation    : {t_gen:.1f} s (not counted below)")
    print(f"cube store writes       : {t_store:.1f} s = {runs / t_store:.0f} runs/s, "
          f"{episodes / t_store / 1e6:.2f} M episodes/s, {raw / t_store / 2**20:.0f} MiB/s of raw slots")
    print(f"raw .npy baseline       : {t_npy:.1f} s = {raw / t_npy / 2**20:.0f} MiB/s")
    print(f"ratio store/npy time    : {t_store / t_npy:.2f}x")
    print(f"store size on disk      : {size / 2**20:.0f} MiB vs raw {npy_size / 2**20:.0f} MiB "
          f"(compression ratio {size / npy_size:.2f})")
    if not keep:
        shutil.rmtree(out)


if __name__ == "__main__":
    main()
