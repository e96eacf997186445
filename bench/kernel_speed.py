"""The compiled statistics loop (`cube.stats.fused`) of this checkout against the one of another revision (the
old loop), side by side on the same paper-size blocks in one process: CPU time per block, ns per episode slot,
the ratio, and whether new, old and the numpy kernel agree bit for bit.

    nice -n 19 .venv/bin/python bench/kernel_speed.py [--store /tmp/lead/paperm.zarr] [--against e32388b]
                                                      [--rounds 15]

Blocks: what one task of the statistics pass hands the kernel. From a store chunked by mode (the layout of
`cube.store.chunking`), the 30 runs of one condition as `run_blocks` reads them: the training block
(30, 122, 2048) and the two evaluation blocks (30, J, 2048), called as `_read_map_block` calls the kernel; from
an older store, its first 30 runs (30, 122, 2048, 3); without a store, synthetic blocks of paper size. Then
one run alone (what following reads again per changed run). Timings are process CPU time of `cell_stats`
(kernel "fused"), fastest of --rounds, old and new alternated; the old loop is loaded from `git show
REV:cube/stats/{fused,kernel}.py` (its numba cache kept under bench/out/).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# bench/ itself off the path: its coverage.py would shadow the `coverage` package numba imports
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

from cube.stats import fused, kernel  # noqa: E402

SEEDS = 30
Block = tuple[str, np.ndarray, np.ndarray, float]


def old_kernel(rev: str):
    """`cube.stats.kernel` as of `rev`, running `cube.stats.fused` as of `rev` (both from git, loaded under
    other names; the rest of `cube` is this checkout's)."""
    folder = ROOT / "bench" / "out" / f"kernel_{rev}"
    folder.mkdir(parents=True, exist_ok=True)
    modules = {}
    for name in ("fused", "kernel"):
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:cube/stats/{name}.py"], check=True,
                              capture_output=True, text=True).stdout
        path = folder / f"{name}_{rev}.py"
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        spec = importlib.util.spec_from_file_location(f"kernel_speed_{name}_{rev}", path)
        modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(modules[name])
    modules["kernel"].fused = modules["fused"]
    return modules["kernel"]


def synthetic_blocks(seeds: int) -> list[Block]:
    """A training block and two evaluation blocks (one iterate of 10 with 10 episodes, the rest NaN)."""
    rng = np.random.default_rng(0)
    cost = rng.gamma(2.0, 60.0, (seeds, 122, 2048)).astype(np.float32)
    reward = rng.normal(10.0, 5.0, cost.shape).astype(np.float32)
    blocks: list[Block] = [("train", reward, cost, 15.0)]
    for mode in ("expl", "greedy"):
        c = np.full((seeds, 10, 2048), np.nan, dtype=np.float32)
        c[:, -1, :10] = rng.gamma(2.0, 60.0, (seeds, 10))
        r = np.where(np.isnan(c), np.nan, rng.normal(10.0, 5.0, c.shape)).astype(np.float32)
        blocks.append((mode, r, c, 15.0))
    return [(name, r[..., None], c[..., None], d) for name, r, c, d in blocks]


def stored_blocks(store: Path, seeds: int) -> list[Block]:
    """The blocks of the first `seeds` runs of condition (0, 0, 0) of a store, as the pass hands them over."""
    import zarr

    from cube.store.chunking import fast_layouts, run_blocks

    group = zarr.open_group(str(store), mode="r")
    sizes = {dim: group[dim].shape[0] for dim in ("algo", "task", "bound", "seed", "iterate", "episode", "mode")}
    bound = float(group["bound"][0])
    layouts = fast_layouts(store, sizes)
    if layouts is None:  # an older store: every mode in a chunk
        return [("all modes", group["reward"][0, 0, 0, :seeds], group["cost"][0, 0, 0, :seeds], bound)]
    names = {0: "train", 1: "expl", 2: "greedy"}
    got = run_blocks(store, layouts, [(0, 0, 0, s) for s in range(seeds)], sizes)
    return [(names.get(m, f"mode {m}"), arrays["reward"][..., None], arrays["cost"][..., None], bound)
            for m, (_, arrays) in sorted(got.items())]


def cpu(run, *args) -> tuple[float, object]:
    start = time.process_time()
    out = run(*args)
    return time.process_time() - start, out


def compare(label: str, blocks: list[Block], old, rounds: int) -> bool:
    kappa = kernel.default_kappa()
    lay = [(name, r[None, None, None], c[None, None, None], np.array(d)) for name, r, c, d in blocks]
    runs = {"old": lambda r, c, d: old.cell_stats(r, c, d, kappa, None, kernel="fused"),
            "new": lambda r, c, d: kernel.cell_stats(r, c, d, kappa, None, kernel="fused")}
    for _, r, c, d in lay:  # numba's import and compile (or cache load), not timed
        for run in runs.values():
            run(r[..., :1, :, :], c[..., :1, :, :], d)
    best = {(name, which): np.inf for name, *_ in lay for which in runs}
    outs = {}
    for _ in range(rounds):
        for name, r, c, d in lay:
            for which, run in runs.items():
                seconds, outs[name, which] = cpu(run, r, c, d)
                best[name, which] = min(best[name, which], seconds)
    ok = True
    print(f"{label}:")
    print(f"  {'block':10s} {'shape':>18s} {'old ms':>8s} {'new ms':>8s} {'old ns/slot':>12s} {'new ns/slot':>12s}"
          f" {'old/new':>8s}  bit for bit (new = old = numpy)")
    for name, r, c, d in lay:
        reference = kernel.cell_stats(r, c, d, kappa, None, kernel="numpy")
        same = all(_same(outs[name, which], reference) for which in runs)
        ok &= same
        old_s, new_s = best[name, "old"], best[name, "new"]
        shape = "x".join(str(n) for n in c.shape[3:-1])
        print(f"  {name:10s} {shape:>18s} {old_s * 1e3:8.1f} {new_s * 1e3:8.1f} {old_s / c.size * 1e9:12.2f}"
              f" {new_s / c.size * 1e9:12.2f} {old_s / new_s:7.1f}x  {'yes' if same else 'NO'}")
    old_total = sum(best[name, "old"] for name, *_ in lay)
    new_total = sum(best[name, "new"] for name, *_ in lay)
    print(f"  {'all':10s} {'':>18s} {old_total * 1e3:8.1f} {new_total * 1e3:8.1f} {'':>12s} {'':>12s}"
          f" {old_total / new_total:7.1f}x")
    return ok


def _same(a: kernel.CellStats, b: kernel.CellStats) -> bool:
    return a.cells == b.cells and all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a[1:], b[1:],
                                                                                                   strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=ROOT / "bench" / "out" / "paper.zarr")
    parser.add_argument("--against", default="e32388b", help="the revision of the old loop (default e32388b)")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    if not fused.available():
        sys.exit("numba is not installed: pip install numba (a dependency of saferl) and run again")
    old = old_kernel(args.against)
    source = f"{args.store}" if args.store.is_dir() else "synthetic (no --store)"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"bench/kernel_speed.py: old loop {args.against} vs this checkout; blocks from {source}; process CPU "
          f"time of cell_stats, fastest of {args.rounds}, alternated; load average {load}")
    ok = True
    for label, seeds in ((f"one task ({SEEDS} runs of a condition)", SEEDS), ("one run", 1)):
        blocks = stored_blocks(args.store, seeds) if args.store.is_dir() else synthetic_blocks(seeds)
        ok &= compare(label, blocks, old, args.rounds)
    if not ok:
        sys.exit("the kernels disagree")


if __name__ == "__main__":
    main()
