"""Speed of `saferl plot CUBE all` (every figure, PDF) on the 1/8-paper-scale cube, statistics cache warm.

    .venv/bin/python bench/plot_speed.py [CUBE] [--boot 2000] [--out DIR]

CUBE defaults to bench/out/eighth.zarr (4 algos x 4 tasks x 3 bounds x 30 seeds x 122 iterates x 256
training episodes + final expl/greedy x 100), written by `python bench/write_cube.py bench/out/eighth.zarr
--keep` when missing. The derived-statistics cache is warmed first (untimed: `stats.load_suffstats`);
then `saferl plot CUBE all --out DIR` runs in a fresh process, as a user would run it, and is timed end to
end (interpreter start, imports, cache read, bootstrap of CDF bands, IQM CIs, probability of improvement
and learning-curve bands, the final-evaluation read for the histograms, drawing and writing every file).
Target: under 20 s on the 2-core development machine. It also prints the command's CPU time and the load
average, since other processes on the machine lengthen the wall time.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT = Path(__file__).parent / "out" / "eighth.zarr"
TARGET_S = 20.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cube", nargs="?", default=str(DEFAULT))
    p.add_argument("--boot", type=int, default=2000)
    p.add_argument("--out", help="directory for the figures (default: a temporary one)")
    args = p.parse_args()
    path = Path(args.cube)
    if not path.exists():
        subprocess.run([sys.executable, str(Path(__file__).parent / "write_cube.py"), str(path), "--keep"], check=True)

    from cube import stats
    from cube.stats.cache import wait_for_cache_writes

    t = time.perf_counter()
    stats.load_suffstats(path)  # warm the cache (written in this process if missing or stale)
    wait_for_cache_writes()
    print(f"cache warm-up (not counted)                      {time.perf_counter() - t:9.2f} s")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="saferl-plot-"))
    saferl = Path(sys.executable).with_name("saferl")
    cmd = [str(saferl) if saferl.exists() else sys.executable, *([] if saferl.exists() else ["-m", "cube.cli"]),
           "plot", str(path), "all", "--out", str(out), "--boot", str(args.boot), "--baseline", "ppo"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    files = sorted(q.name for q in out.iterdir())
    print(f"{len(files)} files in {out}: {', '.join(files)}")
    verdict = "OK" if took < TARGET_S else "SLOWER than the target"
    print(f"saferl plot CUBE all (B={args.boot}, cache warm)      {took:9.2f} s   target < {TARGET_S:g} s: {verdict}")
    print(f"  its CPU time (user + sys)                       {cpu:9.2f} s   load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other work slows the wall time)")


if __name__ == "__main__":
    main()
