"""Speed of `saferl report` against a plain one-pass read of the cube, printed side by side.

    .venv/bin/python bench/report_speed.py [CUBE] [--boot 2000]

CUBE defaults to the 1/8-paper-scale cube bench/out/eighth.zarr (4 algos x 4 tasks x 3 bounds x 30 seeds
x 122 iterates x 256 training episodes + final expl/greedy x 100), written by
`python bench/write_cube.py bench/out/eighth.zarr --keep` when missing. In one run it prints:
1. a plain one-pass read of `cost`: `ds.cost.sum().compute()`;
2. the full report (derived-statistics cache deleted first): sufficient statistics (one pass, cached),
   aggregate table of all settings with B bootstrap replicates, per-condition table, CDFs of all
   settings with their bootstrap bands (what `saferl report --kind all` computes);
3. their ratio (target <= 2);
4. the same report again, reusing the cached derived statistics (target < 2 s);
5. (extra) probability of improvement of one pair and the greedy-expl gap, from the cache;
6. peak memory: the process's maximum resident set size (`resource.getrusage(RUSAGE_SELF).ru_maxrss`,
   covering everything above; target < 2 GiB).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from cube import stats
from cube.stats.cache import CACHE_GROUP, wait_for_cache_writes
from cube.store.read import open_cube

DEFAULT = Path(__file__).parent / "out" / "eighth.zarr"


def full_report(path: Path, boot: int) -> None:
    """What `saferl report --kind all` computes: sufficient statistics (from the cache if valid; a new
    cache written in the background meanwhile), aggregate table and CDFs of all settings with B
    replicates, per-condition table."""
    ss = stats.load_suffstats(path, background_write=True)  # as `saferl report` does
    settings = stats.settings_arg(None, ss)
    stats.aggregate_table(ss, settings, boot=boot)
    stats.condition_table(ss, settings)
    stats.cdf_curves(ss, settings, boot=boot)
    wait_for_cache_writes()  # counted: the report is done when the cache is on disk


def extras(path: Path, boot: int) -> None:
    """Beyond the paper: probability of improvement of the first two algorithms, greedy-expl gap."""
    ss = stats.load_suffstats(path)
    x, y = (str(a) for a in ss["algo"].values[:2])
    stats.probability_of_improvement(ss, x, y, boot=boot)
    stats.greedy_expl_gap(ss, boot=boot)


def timed(fn, *args) -> float:
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cube", nargs="?", default=str(DEFAULT))
    p.add_argument("--boot", type=int, default=2000)
    args = p.parse_args()
    path = Path(args.cube)
    if not path.exists():
        subprocess.run([sys.executable, str(Path(__file__).parent / "write_cube.py"), str(path), "--keep"], check=True)
    ds = open_cube(path)
    print(f"cube {path}: {dict(ds.sizes)}")
    t_read = timed(lambda: ds.cost.sum().compute())
    shutil.rmtree(path / CACHE_GROUP, ignore_errors=True)
    t_full = timed(full_report, path, args.boot)
    t_again = timed(full_report, path, args.boot)
    t_extra = timed(extras, path, args.boot)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB -> GiB
    print(f"{'plain one-pass read  ds.cost.sum().compute()':<52}{t_read:>9.2f} s")
    print(f"{f'full report (cache cleared, B={args.boot}, CDFs)':<52}{t_full:>9.2f} s")
    print(f"{'ratio full report / one-pass read (target <= 2)':<52}{t_full / t_read:>9.2f} x")
    print(f"{'repeated report, cached statistics (target < 2 s)':<52}{t_again:>9.2f} s")
    print(f"{'(extra) PoI of one pair + greedy-expl gap, cached':<52}{t_extra:>9.2f} s")
    print(f"{'peak memory, ru_maxrss of the process (< 2 GiB)':<52}{peak:>9.2f} GiB")


if __name__ == "__main__":
    main()
