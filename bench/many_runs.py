"""10,000 runs (issue 36): `saferl import episodes` of a 10,000-run table, `saferl report`, `saferl status` and
the TUI's first screen, each against the same work on 100 runs scaled linearly, and peak memory.

    .venv/bin/python bench/many_runs.py [--runs 10000] [--small 100] [--middle 1000] [--iterates 5]
                                        [--episodes 8] [--out DIR] [--keep]

The tables are synthetic (one algorithm, task and bound; seeds 0..N-1, `--iterates` iterates of `--episodes`
training episodes each: 10,000 labels on one dimension, as the audit's import). For each size, each step runs
in a child process of its own (its peak memory is its ru_maxrss); its imports come before the clock starts:

1. import: `saferl import episodes TABLE --out STORE` (the store is new);
2. report: `saferl report STORE` with no statistics cache yet (the cold pass, as after an import);
3. status: `saferl status STORE`;
4. TUI: `build_app(STORE)` headless at 80x24 until the Summary table has rows (cache warm from step 2).

Printed per step: seconds at each size, the ratio t(N) / (N/small x t(small)) (the issue's "within 2x of the
same work on 100 runs scaled linearly": target <= 2), the stricter t(N) / (N/middle x t(middle)) (fixed costs
diluted: what a superlinear step shows in), and peak memory (target < 2 GiB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RATIO_TARGET = 2.0
MEMORY_TARGET_GIB = 2.0
STEPS = ("import", "report", "status", "tui")


def write_table(path: Path, runs: int, iterates: int, episodes: int) -> None:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    seeds = np.repeat(np.arange(runs), iterates * episodes)
    iterate = np.tile(np.repeat(np.arange(iterates), episodes), runs)
    pd.DataFrame({"algo": "ppo_lag", "task": "goal", "bound": 25.0, "seed": seeds, "iterate": iterate,
                  "mode": "train", "reward": rng.normal(10, 3, seeds.size).round(3),
                  "cost": rng.gamma(2.0, 10.0, seeds.size).round(3)}).to_csv(path, index=False)


# ------------------------------------------------------------------------------------- child side
def child(step: str, table: str, store: str) -> float:
    """Run one step in this process; returns its seconds (imports done before the clock starts)."""
    import warnings

    warnings.filterwarnings("ignore")
    from cube.cli import main
    from cube.compute import keep_freed_memory

    keep_freed_memory()  # as the console script sets the process up
    if step == "tui":
        return _tui_first_screen(store)
    argv = {"import": ["import", "episodes", table, "--out", store], "report": ["report", store],
            "status": ["status", store]}[step]
    devnull = open(os.devnull, "w")  # noqa: SIM115 - the tables are not what is measured
    sys.stdout = devnull
    t0 = time.perf_counter()
    code = main(argv)
    seconds = time.perf_counter() - t0
    sys.stdout = sys.__stdout__
    if code != 0:
        raise SystemExit(f"{step} exited {code}")
    return seconds


def _tui_first_screen(store: str) -> float:
    import asyncio

    from textual.widgets import DataTable

    from saferl_tui.app import build_app
    from saferl_tui.screens.main import MainScreen

    async def drive() -> float:
        t0 = time.perf_counter()
        app = build_app(store)
        async with app.run_test(size=(80, 24)):
            while True:
                screen = app.screen
                if isinstance(screen, MainScreen) and screen.model.info is not None:
                    table = screen.query_one("#summary-table", DataTable)
                    if table.row_count and screen.shown_selection("summary") == screen.selection:
                        return time.perf_counter() - t0
                await asyncio.sleep(0.01)

    return asyncio.run(drive())


# ------------------------------------------------------------------------------------ parent side
def run_step(step: str, table: Path, store: Path) -> tuple[float, float]:
    """(seconds, peak GiB) of one step in a child process."""
    result = store.with_name(store.name + f".{step}.json")
    code = (f"import json, sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); import many_runs; "
            f"json.dump(many_runs.child({step!r}, {str(table)!r}, {str(store)!r}), open({str(result)!r}, 'w'))")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{step} on {store} failed ({proc.returncode})")
    return float(json.loads(result.read_text())), usage.ru_maxrss / 2**20


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=10_000)
    p.add_argument("--small", type=int, default=100)
    p.add_argument("--middle", type=int, default=1_000)
    p.add_argument("--iterates", type=int, default=5)
    p.add_argument("--episodes", type=int, default=8)
    p.add_argument("--out", default=None, help="folder for the tables and stores (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the tables and stores")
    args = p.parse_args()
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="many_runs-"))
    folder.mkdir(parents=True, exist_ok=True)
    sizes = [args.small, args.middle, args.runs]
    print(f"many_runs: {', '.join(f'{n:,}' for n in sizes)} runs x {args.iterates} iterates x {args.episodes} "
          f"training episodes; python {sys.version.split()[0]}, {os.cpu_count()} cpus", flush=True)
    times: dict[tuple[str, int], float] = {}
    peaks: dict[tuple[str, int], float] = {}
    try:
        for n in sizes:
            table, store = folder / f"episodes_{n}.csv", folder / f"runs_{n}.zarr"
            write_table(table, n, args.iterates, args.episodes)
            shutil.rmtree(store, ignore_errors=True)
            for step in STEPS:
                times[step, n], peaks[step, n] = run_step(step, table, store)
                print(f"  {n:>6,} runs  {step:<7} {times[step, n]:8.2f} s  peak {peaks[step, n]:.2f} GiB", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    ok = True
    print(f"\n{'step':<8} {'t(small)':>9} {'t(middle)':>10} {'t(N)':>9} {'vs small':>9} {'vs middle':>10} "
          f"{'peak GiB':>9}  (targets: ratios <= {RATIO_TARGET:g}, peak < {MEMORY_TARGET_GIB:g} GiB)")
    for step in STEPS:
        small, middle, big = (times[step, n] for n in sizes)
        vs_small = big / (small * args.runs / args.small)
        vs_middle = big / (middle * args.runs / args.middle)
        peak = max(peaks[step, n] for n in sizes)
        good = vs_small <= RATIO_TARGET and vs_middle <= RATIO_TARGET and peak < MEMORY_TARGET_GIB
        ok &= good
        print(f"{step:<8} {small:9.2f} {middle:10.2f} {big:9.2f} {vs_small:9.3f} {vs_middle:10.3f} {peak:9.2f}"
              f"  {'ok' if good else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
