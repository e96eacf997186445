"""Our trainer's throughput, two source trees side by side: `bench/train_throughput.py --skip-crax` of tree A and
of tree B run alternately (A B A B ...) in fresh processes on this machine, each tree's own code on its own
`PYTHONPATH`, same interpreter and packages. Prints every round's env steps/s (compile excluded, every episode
written to a cube), the per-round ratios B / A, and their median: a change of the trainer that slows it down
shows as a median below 1 beyond the rounds' spread.

    git worktree add /tmp/before <commit>
    .venv/bin/python bench/train_throughput_ab.py --a /tmp/before --b . --rounds 4
    git worktree remove /tmp/before

Arguments after `--` go to both trees' `train_throughput.py` (default: its small CPU config, 4 iterates,
a persistent compile cache per tree so rounds after the first do not compile again).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROW = re.compile(r"^saferl\s+([\d,]+)\s+([\d.]+)", re.MULTILINE)
"""The `saferl` row of train_throughput.py's table: env steps/s, compile s."""


def one_run(tree: Path, extra: list[str], cache: Path) -> float:
    """Env steps/s of one process of `tree`'s bench (RuntimeError with its output's tail if it has none)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(tree / "bench" / "train_throughput.py"), "--skip-crax", "--cache", str(cache), *extra]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree)
    found = ROW.search(run.stdout)
    if run.returncode or not found:
        raise RuntimeError(f"{tree}: exit {run.returncode}\n{(run.stdout + run.stderr)[-2000:]}")
    return float(found.group(1).replace(",", ""))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", type=Path, required=True, help="the reference tree (e.g. a worktree of the old commit)")
    p.add_argument("--b", type=Path, required=True, help="the tree measured against it")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("extra", nargs="*", help="arguments for train_throughput.py (after --)")
    a = p.parse_args()
    extra = a.extra or ["--iterates", "4"]
    trees = {"A": a.a.resolve(), "B": a.b.resolve()}
    with tempfile.TemporaryDirectory() as tmp:
        caches = {name: Path(tmp) / name for name in trees}
        print(f"A = {trees['A']}\nB = {trees['B']}\ntrain_throughput.py --skip-crax {' '.join(extra)}; a warm-up "
              f"round (compiles), then {a.rounds} rounds A B", flush=True)
        for name, tree in trees.items():
            one_run(tree, extra, caches[name])
        sps: dict[str, list[float]] = {"A": [], "B": []}
        for r in range(a.rounds):
            for name, tree in trees.items():
                sps[name].append(one_run(tree, extra, caches[name]))
            print(f"round {r + 1}: A {sps['A'][-1]:,.0f}  B {sps['B'][-1]:,.0f} env steps/s  "
                  f"B/A {sps['B'][-1] / sps['A'][-1]:.3f}", flush=True)
    ratios = [b / x for b, x in zip(sps["B"], sps["A"], strict=True)]
    print(f"median env steps/s: A {statistics.median(sps['A']):,.0f}, B {statistics.median(sps['B']):,.0f}; "
          f"B/A per round {min(ratios):.3f}..{max(ratios):.3f}, median {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
