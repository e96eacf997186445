"""Start-up of the command line (issue 37): a bare `python -c pass`, `saferl --help` and a warm (statistics cached)
`saferl report` of a 1/24-scale cube, side by side as whole processes.

    nice -n 19 .venv/bin/python bench/startup.py [--cube bench/out/c24.zarr] [--rounds 5] [--against REV]

The cube is written by `bench/write_cube.py --scale 1/24 --keep` when it is not there (1,440 runs x 122 iterates x
85 training episodes; minutes). One report first warms the statistics cache; then each round runs the three
commands one after another (alternating, so a busy machine slows all of them alike) and the fastest of each is
printed with its ratio to `python -c pass`, beside the targets (--help < 0.5 s, warm report < 2 s). `saferl` runs
as the console script runs it (`cube.cli.entry.console_main`), output to /dev/null. With ``--against REV`` the
same two commands of another revision (a detached git worktree in a temporary folder, first on PYTHONPATH, this
venv's packages) join the rounds, and each pair's ratio is printed: on a busy machine the absolute times swing,
the ratios of one run much less. The other revision reports on a copy of the cube of its own (`--against-cube`,
default: a copy made in a temporary folder beside the cube): two revisions whose caches differ (another
fingerprint) would otherwise rewrite each other's cache on every round and time cold reports.

The commands run with Python's bytecode cache on, as an installed `saferl` runs (pip compiles the package's
modules; an editable checkout writes its `__pycache__` on the first run): PYTHONDONTWRITEBYTECODE, where the
calling shell sets it, is dropped for them (`--no-bytecode` keeps it: a checkout without a `__pycache__` yet then
compiles every module of its own again on every start, which a user never pays; bytecode already written is
still read). The report is `saferl report CUBE --cdf` (two tables: the
aggregate and the CDFs, as issue 37's profile was taken).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pass_floor import ensure_cube  # the same 1/24-scale cube (bench/ is on sys.path: run as a script)

ROOT = Path(__file__).resolve().parents[1]
CONSOLE = "import sys; from cube.cli.entry import console_main; sys.argv[0] = 'saferl'; sys.exit(console_main())"
TARGETS = {"saferl --help": 0.5, "saferl report (warm)": 2.0}


def wall(argv: list[str], pythonpath: str | None = None, bytecode: bool = True) -> float:
    """Seconds one command takes as a whole process; it must succeed. Run outside this checkout (`python -c`
    puts its folder first on sys.path, before PYTHONPATH); `bytecode`: with Python's bytecode cache (the
    module docstring)."""
    env = dict(os.environ, PYTHONPATH=pythonpath) if pythonpath else dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=tempfile.gettempdir(),
                   env=env)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cube", default=str(ROOT / "bench" / "out" / "c24.zarr"), help="a 1/24-scale cube")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds; the fastest of each is kept")
    ap.add_argument("--against", metavar="REV", help="also time this git revision's --help and warm report")
    ap.add_argument("--against-cube", metavar="PATH",
                    help="the cube REV reports on (default: a copy of --cube, made in a temporary folder beside it)")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="keep PYTHONDONTWRITEBYTECODE where set (no bytecode written for the checkout's modules)")
    args = ap.parse_args()
    bytecode = not args.no_bytecode
    cube = Path(args.cube).resolve()
    ensure_cube(cube)
    saferl = [sys.executable, "-c", CONSOLE]
    commands: dict[str, tuple[list[str], str | None]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], None),
        "saferl --help": ([*saferl, "--help"], None),
        "saferl report (warm)": ([*saferl, "report", str(cube), "--cdf"], None),
    }
    other = copies = None
    if args.against:
        other = Path(tempfile.mkdtemp(prefix="startup-against-"))
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(other), args.against], check=True, cwd=ROOT)
        if args.against_cube:
            their_cube = Path(args.against_cube).resolve()
        else:  # the same episodes, a cache of its own
            copies = Path(tempfile.mkdtemp(prefix="startup-cube-", dir=cube.parent))
            their_cube = copies / cube.name
            shutil.copytree(cube, their_cube, symlinks=True, ignore=shutil.ignore_patterns("_derived"))
        commands[f"{args.against}: saferl --help"] = ([*saferl, "--help"], str(other))
        commands[f"{args.against}: saferl report (warm)"] = ([*saferl, "report", str(their_cube), "--cdf"], str(other))
    times: dict[str, list[float]] = {name: [] for name in commands}
    try:
        for name, (argv, path) in commands.items():
            if name != "python -c pass":
                wall(argv, path, bytecode)  # warms its statistics cache (the page cache, the bytecode cache)
        for _ in range(args.rounds):
            for name, (argv, path) in commands.items():
                times[name].append(wall(argv, path, bytecode))
    finally:
        if other is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, check=False)
            shutil.rmtree(other, ignore_errors=True)
        if copies is not None:
            shutil.rmtree(copies, ignore_errors=True)
    load = os.getloadavg()
    print(f"bench/startup.py: {args.rounds} alternating rounds, fastest of each; cube {cube}"
          f"{f' ({args.against} on a copy)' if args.against else ''}; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores; "
          f"bytecode cache {'on' if bytecode else 'off (PYTHONDONTWRITEBYTECODE kept)'}")
    base = min(times["python -c pass"])
    for name, values in times.items():
        best = min(values)
        target = f"   target < {TARGETS[name]:.1f} s: {'met' if best < TARGETS[name] else 'NOT met'}" \
            if name in TARGETS else ""
        print(f"  {name:36s} {best:6.3f} s  ({best / base:6.1f}x python -c pass; median "
              f"{sorted(values)[len(values) // 2]:.3f} s){target}")
    if args.against:
        for name in ("saferl --help", "saferl report (warm)"):
            print(f"  {name}: this checkout / {args.against}'s: "
                  f"{min(times[name]) / min(times[f'{args.against}: {name}']):.2f}x")


if __name__ == "__main__":
    main()
