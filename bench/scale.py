"""The full paper-scale cube: write time, store size, `saferl report` (full and repeated), the TUI.

    .venv/bin/python bench/scale.py [--out bench/out/paper.zarr] [--keep] [--skip-write] [--boot 2000]

The paper's grid: 4 algorithms x 4 tasks x 3 bounds x 30 seeds = 1,440 runs, 122 iterates of 2,048
training episodes each, plus final exploration and greedy evaluations of 100 episodes: about 360
million episodes (synthetic, from `cube.io.demo.synthetic_run`, labelled synthetic). Each step runs in
a child process of its own, which prints its wall time and its peak memory (ru_maxrss), side by side:

1. writing the store (generation excluded) and its size on disk;
2. one plain read pass of reward and cost (`(ds.reward.sum() + ds.cost.sum()).compute()`);
3. the full report with the statistics cache deleted (sufficient statistics, aggregate table of every
   setting with B bootstrap replicates, per-condition table, CDFs with bands: `saferl report --kind all`),
   and its ratio to step 2 (target <= 1.5x), peak memory (target < 4 GiB);
4. the same report again, from the warm cache;
5. the TUI from a warm cache: start to the rendered Summary (target < 3 s) and a re-slice
   (`bench/tui_speed.py` on this cube).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCALE = {"n_seeds": 30, "n_iterates": 122, "n_train_episodes": 2048, "n_eval_episodes": 100}

WRITE = """
import time, numpy as np
from cube import CubeWriter, RunKey, create_store
from cube.io.demo import DEMO_ALGOS, DEMO_BOUNDS, DEMO_TASKS, synthetic_run
out, s = {out!r}, {scale!r}
create_store(out, algos=DEMO_ALGOS, tasks=DEMO_TASKS, bounds=DEMO_BOUNDS, seeds=range(s["n_seeds"]),
             n_iterates=s["n_iterates"], n_episodes=s["n_train_episodes"],
             attrs={{"synthetic": True, "description": "SYNTHETIC paper-scale benchmark cube (bench/scale.py)"}})
writer = CubeWriter(out)
t_store = 0.0
for a, algo in enumerate(DEMO_ALGOS):
    for t, task in enumerate(DEMO_TASKS):
        for b, bound in enumerate(DEMO_BOUNDS):
            rng = np.random.default_rng([0, a, t, b])
            for seed in range(s["n_seeds"]):
                key = RunKey(algo, task, bound, seed)
                run = synthetic_run(rng, key, s["n_iterates"], s["n_train_episodes"], s["n_eval_episodes"],
                                    s["n_train_episodes"])
                t0 = time.perf_counter()
                writer.write_run(key, run["reward"], run["cost"])
                writer.write_iterate_vars(key, 0, {{"env_steps": run["env_steps"], "multiplier": run["multiplier"]}})
                writer.set_run_manifest(key, status="complete", manifest={{"synthetic": True}})
                t_store += time.perf_counter() - t0
print(f"RESULT seconds={{t_store:.2f}}")
"""

READ = """
import time
from cube import open_cube
ds = open_cube({out!r})
t0 = time.perf_counter()
(ds.reward.sum() + ds.cost.sum()).compute()
print(f"RESULT seconds={{time.perf_counter() - t0:.2f}}")
"""

REPORT = """
import time
from cube.cli import main
t0 = time.perf_counter()
code = main(["report", {out!r}, "--kind", "all", "--format", "json", "--boot", "{boot}", "--out", {tables!r}])
assert code == 0, code
print(f"RESULT seconds={{time.perf_counter() - t0:.2f}}")
"""

PEAK = """
import resource, sys
print(f"PEAK gib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f}")
"""


def child(code: str) -> tuple[float, float, str]:
    """(seconds reported by the child, its peak RSS in GiB, its output) of `python -c code`."""
    done = subprocess.run([sys.executable, "-c", code + PEAK], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"step failed:\n{done.stdout}\n{done.stderr}")
    seconds = float(done.stdout.split("RESULT seconds=")[1].split()[0])
    peak = float(done.stdout.split("PEAK gib=")[1].split()[0])
    return seconds, peak, done.stdout


def size_gib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**30


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "paper.zarr"))
    ap.add_argument("--keep", action="store_true", help="keep the cube afterwards")
    ap.add_argument("--skip-write", action="store_true", help="reuse an existing cube at --out")
    ap.add_argument("--boot", type=int, default=2000)
    ap.add_argument("--no-tui", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    runs = 4 * 4 * 3 * SCALE["n_seeds"]
    episodes = runs * (SCALE["n_iterates"] * SCALE["n_train_episodes"] + 2 * SCALE["n_eval_episodes"])
    print(f"paper scale: {runs:,} runs x {SCALE['n_iterates']} iterates x {SCALE['n_train_episodes']} training "
          f"episodes (+ 2 x {SCALE['n_eval_episodes']} final) = {episodes / 1e6:.0f} M episodes")
    if not args.skip_write:
        shutil.rmtree(out, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        write_s, write_peak, _ = child(WRITE.format(out=str(out), scale=SCALE))
        print(f"1. store writes (generation excluded)   {write_s:8.1f} s  "
              f"({episodes / write_s / 1e6:.1f} M episodes/s; "
              f"{time.perf_counter() - t0:.0f} s with generation)  peak {write_peak:.2f} GiB")
    print(f"   store size on disk                    {size_gib(out):8.2f} GiB")
    read_s, read_peak, _ = child(READ.format(out=str(out)))
    print(f"2. one read pass of reward and cost      {read_s:8.1f} s  peak {read_peak:.2f} GiB")
    shutil.rmtree(out / "_derived", ignore_errors=True)
    tables = out.parent / "paper_tables"
    shutil.rmtree(tables, ignore_errors=True)
    full_s, full_peak, _ = child(REPORT.format(out=str(out), boot=args.boot, tables=str(tables)))
    print(f"3. saferl report --kind all, no cache    {full_s:8.1f} s  peak {full_peak:.2f} GiB (target < 4 GiB)")
    print(f"   ratio report / read pass              {full_s / read_s:8.2f} x  (target <= 1.5 x)")
    shutil.rmtree(tables, ignore_errors=True)
    again_s, again_peak, _ = child(REPORT.format(out=str(out), boot=args.boot, tables=str(tables)))
    print(f"4. saferl report --kind all, warm cache  {again_s:8.1f} s  peak {again_peak:.2f} GiB")
    shutil.rmtree(tables, ignore_errors=True)
    if not args.no_tui:
        print("5. TUI on this cube, warm cache (bench/tui_speed.py):", flush=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "tui_speed.py"), "--only", "eighth", "--eighth",
                        str(out), "--boot", str(args.boot)], cwd=ROOT, check=False)
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
