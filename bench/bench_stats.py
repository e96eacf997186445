"""Benchmark of the report pipeline against the obvious implementations, printed side by side.

    .venv/bin/python bench/bench_stats.py [--cube PATH] [--seeds 10] [--iterates 60] [--episodes 256] [--boot 2000]

1. Sufficient statistics (one dask pass: sums, violation counts, CDF counts at every kappa) versus a
   plain xarray/dask computation of only the five per-iterate metrics (no CDF), the cached load, and a
   reload after one run was rewritten (as while training writes: only that run is recomputed).
2. aggregate_table (vectorized stratified bootstrap, B replicates, all algos x 3 settings) versus an
   rliable-style bootstrap that loops over replicates and strata in Python (same statistic).
The cube is written with the demo generator (synthetic) under bench/out/ unless --cube is given.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import dask
import numpy as np
import scipy.stats
import xarray as xr

from cube import stats
from cube.io.demo import make_demo_cube
from cube.schema import RunKey
from cube.stats.cache import CACHE_GROUP
from cube.store.read import open_cube
from cube.store.writer import CubeWriter


def naive_metrics(ds: xr.Dataset) -> dict[str, np.ndarray]:
    """Per-iterate R, C, V, Dnorm, Dplus with xarray reductions over the lazy cube (no CDF)."""
    c, r = ds["cost"].astype("float64"), ds["reward"].astype("float64")
    d = ds["bound"]
    n = c.notnull().sum("episode")
    viol = (c > d).sum("episode")
    out = {
        "R": r.mean("episode"), "C": c.mean("episode"), "V": viol / n.where(n > 0),
        "Dnorm": (c.mean("episode") - d) / d,
        "Dplus": xr.where(viol > 0, (c - d).clip(min=0).sum("episode") / (viol * d), 0.0),
    }
    (vals,) = dask.compute({k: v.data for k, v in out.items()}, scheduler="threads")
    return vals


def loop_bootstrap(rm: xr.Dataset, algo: str, boot: int, rng: np.random.Generator) -> np.ndarray:
    """rliable-style: per replicate, per stratum draw seeds, seed means, IQM over strata. Returns (boot, 5)."""
    arr = np.stack([rm[m].sel(algo=algo).values for m in stats.METRICS], -1)  # (T, B, S, 5)
    strata = [arr[t, b][~np.isnan(arr[t, b]).any(-1)] for t in range(arr.shape[0]) for b in range(arr.shape[1])]
    strata = [s for s in strata if len(s)]
    reps = np.empty((boot, len(stats.METRICS)))
    for i in range(boot):
        means = [s[rng.integers(0, len(s), len(s))].mean(0) for s in strata]
        reps[i] = scipy.stats.trim_mean(np.array(means), 0.25, axis=0)
    return reps


def timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cube", help="existing cube to use (default: write a demo cube under bench/out/)")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--iterates", type=int, default=60)
    p.add_argument("--episodes", type=int, default=256)
    p.add_argument("--boot", type=int, default=2000)
    args = p.parse_args()
    if args.cube:
        path = Path(args.cube)
    else:
        path = Path(__file__).parent / "out" / f"demo_s{args.seeds}_j{args.iterates}_e{args.episodes}.zarr"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            _, dt = timed(make_demo_cube, path, seed=0, n_seeds=args.seeds, n_iterates=args.iterates,
                          n_train_episodes=args.episodes)
            print(f"wrote demo cube {path} in {dt:.1f} s")
    shutil.rmtree(path / CACHE_GROUP, ignore_errors=True)
    ds = open_cube(path)
    n_eps = int(np.prod([ds.sizes[d] for d in ds["cost"].dims]))
    print(f"cube: {dict(ds.sizes)} = {n_eps:,} episode slots per variable")

    _, t_naive = timed(naive_metrics, ds)
    ss, t_cold = timed(stats.load_suffstats, path)
    _, t_warm = timed(stats.load_suffstats, path)
    key = RunKey(*(ds[d].values[0].item() for d in ("algo", "task", "bound", "seed")))
    run = ds.isel(algo=0, task=0, bound=0, seed=0)
    CubeWriter(path).write_run(key, run["reward"].values, run["cost"].values)  # same data, new chunk files
    _, t_patch = timed(stats.load_suffstats, path)

    settings = stats.SETTINGS
    _, t_agg = timed(stats.aggregate_table, ss, settings, boot=args.boot)
    t_loop = 0.0
    for s in settings:
        rm = stats.run_metrics(ss, s)
        for a in ss["algo"].values:
            _, dt = timed(loop_bootstrap, rm, a, args.boot, np.random.default_rng(0))
            t_loop += dt
    _, t_cdf = timed(stats.cdf_curves, ss, settings, boot=args.boot)

    print(f"\n{'step':<52}{'ours (s)':>10}{'baseline (s)':>14}{'speed-up':>10}")
    print(f"{'per-iterate metrics, one pass (ours adds CDF counts)':<52}{t_cold:>10.2f}{t_naive:>14.2f}"
          f"{t_naive / t_cold:>9.1f}x")
    print(f"{'  same, from the cache':<52}{t_warm:>10.2f}{t_naive:>14.2f}{t_naive / t_warm:>9.1f}x")
    print(f"{'  same, cache + 1 rewritten run':<52}{t_patch:>10.2f}{t_naive:>14.2f}{t_naive / t_patch:>9.1f}x")
    print(f"{f'aggregate_table, B={args.boot}, 3 settings':<52}{t_agg:>10.2f}{t_loop:>14.2f}{t_loop / t_agg:>9.1f}x")
    label = f"cdf_curves, B={args.boot}, 3 settings, {ss.sizes['kappa']} kappa"
    print(f"{label:<52}{t_cdf:>10.2f}{'-':>14}{'-':>10}")


if __name__ == "__main__":
    main()
