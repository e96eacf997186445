"""`saferl import FORMAT SRC... --out CUBE`: results of other tools into a saferl cube.

    saferl import episodes episodes.csv --out mine.zarr                 # one row per episode
    saferl import saferl-eval results/ --out paper.zarr                 # SafeRLEval *_summary.csv (+ history)
    saferl import omnisafe runs/ --out omnisafe.zarr                    # progress.csv + config.json per run
    saferl import safepo runs/ --out safepo.zarr --bound 25             # the cost limit when config.json lacks it

Labels (algo, task, bound, seed) come from the files; --algo/--task/--bound/--seed override them for
every run read. Sources that keep only windowed means (OmniSafe, SafePO, SafeRLEval's training log) are
flagged as such: `saferl report` gives R, C and D_norm from them, never V, D_norm+, tiers or CDFs.
"""

from __future__ import annotations

import argparse

from cube.errors import CubeError
from cube.io.importers import FORMATS, apply_labels, read_runs, write_runs


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `import` subcommand."""
    p = subparsers.add_parser("import", help="read other tools' results (episodes table, SafeRLEval, OmniSafe, "
                              "SafePO) into a cube", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("format", choices=FORMATS, help="the source format")
    p.add_argument("sources", nargs="+", metavar="SRC", help="files, or folders searched for them")
    p.add_argument("--out", required=True, help="the cube to write (a new Zarr store)")
    p.add_argument("--force", action="store_true", help="replace an existing store at --out")
    p.add_argument("--algo", help="algorithm label for every run read")
    p.add_argument("--task", help="task label for every run read")
    p.add_argument("--bound", type=float, help="safety bound d for every run read (the cost limit)")
    p.add_argument("--seed", type=int, help="seed for every run read")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cube.cli.console import progress_bar

    if args.bound is not None and not args.bound > 0:
        raise CubeError(f"--bound must be a number > 0, got {args.bound:g}")
    with progress_bar() as bar:
        task = bar.add_task(f"reading {args.format}", total=None)
        runs = read_runs(args.format, args.sources, bound=args.bound)
        runs = apply_labels(runs, {"algo": args.algo, "task": args.task, "bound": args.bound, "seed": args.seed})
        bar.update(task, description=f"writing {len(runs)} run(s)", total=len(runs), completed=0)
        write_runs(runs, args.out, fmt=args.format, force=args.force,
                   progress=lambda done, total: bar.update(task, completed=done, total=total))
    means = sum(1 for r in runs if r.means_only)
    print(f"imported {len(runs)} run(s) from {args.format} into {args.out}"
          + (f"; {means} hold only windowed means (no V, D_norm+, tiers or CDFs from those)" if means else ""))
    return 0
