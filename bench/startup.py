"""Start-up of the command line (issue 37): a bare `python -c pass`, `saferl --help` and a warm (statistics cached)
`saferl report` of a 1/24-scale cube, side by side as whole processes.

    nice -n 19 .venv/bin/python bench/startup.py [--cube bench/out/c24.zarr] [--rounds 5]

The cube is written by `bench/write_cube.py --scale 1/24 --keep` when it is not there (1,440 runs x 122 iterates x
85 training episodes; minutes). One report first warms the statistics cache; then each round runs the three
commands one after another (alternating, so a busy machine slows all of them alike) and the fastest of each is
printed with its ratio to `python -c pass`, beside the targets (--help < 0.5 s, warm report < 2 s). The console
script itself is run (`.venv/bin/saferl`), as a user runs it, output to /dev/null.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAFERL = Path(sys.executable).with_name("saferl")
TARGETS = {"saferl --help": 0.5, "saferl report (warm)": 2.0}


def wall(argv: list[str]) -> float:
    """Seconds one command takes as a whole process; it must succeed."""
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=ROOT)
    return time.perf_counter() - start


def ensure_cube(path: Path) -> None:
    if not path.exists():
        print(f"writing the 1/24-scale cube at {path} (bench/write_cube.py --scale 1/24) ...", flush=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "write_cube.py"), str(path), "--keep", "--scale", "1/24"],
                       check=True, cwd=ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cube", default=str(ROOT / "bench" / "out" / "c24.zarr"), help="a 1/24-scale cube")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds; the fastest of each is kept")
    args = ap.parse_args()
    cube = Path(args.cube)
    ensure_cube(cube)
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "saferl --help": [str(SAFERL), "--help"],
        "saferl report (warm)": [str(SAFERL), "report", str(cube)],
    }
    wall(commands["saferl report (warm)"])  # warms the statistics cache (and the page cache)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, argv in commands.items():
            times[name].append(wall(argv))
    load = os.getloadavg()
    print(f"bench/startup.py: {args.rounds} alternating rounds, fastest of each; cube {cube}; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    base = min(times["python -c pass"])
    for name, values in times.items():
        best = min(values)
        target = f"   target < {TARGETS[name]:.1f} s: {'met' if best < TARGETS[name] else 'NOT met'}" \
            if name in TARGETS else ""
        print(f"  {name:22s} {best:6.3f} s  ({best / base:6.1f}x python -c pass; median "
              f"{sorted(values)[len(values) // 2]:.3f} s){target}")


if __name__ == "__main__":
    main()
