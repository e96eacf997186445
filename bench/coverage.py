"""Coverage of the 95% intervals of a condition's V and of IQM(V): the paper's stratified bootstrap
beside the honest interval saferl ships (`cube.stats.honest`), by simulation (`cube.stats.coverage`).

    .venv/bin/python bench/coverage.py [--reps 2000] [--iqm-reps 1000] [--boot 1000] [--iqm-boot 500]
                                      [--rng-seed 0]
                                      [--concentration 10] [--icc-floor 0.05] [--levels condition,iqm]
                                      [--out FILE.md]

Grid: p in {0, 0.001, 0.01, 0.05, 0.3}; seeds K in {3, 5, 10, 30}; episodes N in {10, 100, 2048}; per-seed
p_k ~ Beta(mean p, concentration) ("beta") or p_k = p ("identical"). Truth: p for a condition, IQM of
the 12 conditions' p_c for IQM(V). Prints one row per cell (coverage of each interval and its median
upper bound) and the least coverage over the cells with K >= 5; exits 1 when the shipped interval falls
below 0.94 in such a cell. `--out` writes the same as a Markdown table.
"""

from __future__ import annotations

if __name__ == "coverage":  # imported as the `coverage` package (numba looks for it) from a script run in bench/
    raise ImportError("bench/coverage.py is saferl's interval-coverage script, not the coverage package")

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from cube.stats.coverage import coverage_grid
from cube.stats.honest import ICC_FLOOR

TARGET = 0.94


def markdown(df: pd.DataFrame) -> str:
    """The grid as a Markdown table, one row per (level, spread, K, N) and the p columns side by side
    (`plain / shipped` coverage, shipped median upper bound in brackets)."""
    ps = sorted(df["p"].unique())
    head = "| level | spread | K | N | " + " | ".join(f"p = {p:g}" for p in ps) + " |"
    lines = [head, "|" + "---|" * (4 + len(ps))]
    for (lv, sp, k, n), g in df.groupby(["level", "spread", "K", "N"], sort=False):
        cells = []
        for p in ps:
            r = g[g["p"] == p].iloc[0]
            mark = "**" if r["K"] >= 5 and r["shipped"] < TARGET else ""
            cells.append(f"{r['plain']:.3f} / {mark}{r['shipped']:.3f}{mark} [{r['shipped_high']:.3g}]")
        lines.append(f"| {lv} | {sp} | {k} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def summary(df: pd.DataFrame) -> str:
    lines = []
    for lv, g in df.groupby("level", sort=False):
        five = g[g["K"] >= 5]
        worst = five.loc[five["shipped"].idxmin()]
        lines.append(f"{lv}: K >= 5 cells {len(five)}: least coverage shipped {five['shipped'].min():.3f} "
                     f"(spread {worst['spread']}, K {worst['K']}, N {worst['N']}, p {worst['p']:g}), plain bootstrap "
                     f"{five['plain'].min():.3f}; cells below {TARGET}: shipped {(five['shipped'] < TARGET).sum()}, "
                     f"plain {(five['plain'] < TARGET).sum()}; "
                     f"K = 3 shipped least {g[g['K'] == 3]['shipped'].min():.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000, help="replications per condition-level cell")
    ap.add_argument("--iqm-reps", type=int, default=1000, help="replications per IQM-level cell")
    ap.add_argument("--boot", type=int, default=1000, help="bootstrap replicates per condition-level interval")
    ap.add_argument("--iqm-boot", type=int, default=500, help="bootstrap replicates per IQM-level interval")
    ap.add_argument("--rng-seed", type=int, default=0)
    ap.add_argument("--concentration", type=float, default=10.0, help="Beta concentration of the seeds' p_k")
    ap.add_argument("--icc-floor", type=float, default=ICC_FLOOR, help="the honest interval's rho_min")
    ap.add_argument("--levels", default="condition,iqm", help="condition, iqm or both (default both)")
    ap.add_argument("--out", type=Path, help="also write the table as Markdown here")
    args = ap.parse_args(argv)
    start = time.perf_counter()

    def tick(done: int, total: int) -> None:
        print(f"\r{done}/{total} cells, {time.perf_counter() - start:.0f} s", end="", file=sys.stderr, flush=True)

    levels = tuple(x.strip() for x in args.levels.split(",") if x.strip())
    if not levels or set(levels) - {"condition", "iqm"}:
        ap.error(f"--levels takes condition and/or iqm, got {args.levels!r}")
    df = coverage_grid(levels=levels, concentration=args.concentration, reps=args.reps, iqm_reps=args.iqm_reps,
                       boot=args.boot, iqm_boot=args.iqm_boot, icc_floor=args.icc_floor, rng_seed=args.rng_seed,
                       progress=tick)
    print(file=sys.stderr)
    table = markdown(df)
    text = summary(df)
    header = (f"coverage of 95% intervals: plain stratified bootstrap / shipped honest interval [median shipped "
              f"upper bound]; reps {args.reps} (condition) {args.iqm_reps} (IQM), boot {args.boot} (condition) "
              f"{args.iqm_boot} (IQM), concentration "
              f"{args.concentration:g}, icc floor {args.icc_floor:g}, rng seed {args.rng_seed}; "
              f"{time.perf_counter() - start:.0f} s")
    print(header)
    print(table)
    print(text)
    if args.out:
        args.out.write_text(f"{header}\n\n{table}\n{text}\n")
    five = df[df["K"] >= 5]
    return 1 if (five["shipped"] < TARGET).any() else 0


if __name__ == "__main__":
    sys.exit(main())
