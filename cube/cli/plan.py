"""`saferl plan`: how many seeds per condition a cube needs, projected from its own per-seed values.

    saferl plan CUBE [--halfwidth 0.05 | V=0.02,Dnorm=0.1] [--metrics V,Dnorm,Dplus] [--poi X,Y] [--power 0.8]
                     [--max-seeds 500] [--format table|csv|json|markdown] [--out FILE] [--digits 3]
                     [--settings train,final_greedy] [--algo ..] [--task ..] [--bound ..] [--seed 0-9]
                     [--iterates J|LO:HI] [--boot 2000] [--ci 0.95] [--rng-seed 0] [--baseline auto|none|ALGO]
                     [--no-cache] [--scheduler ADDRESS]

For every algorithm, setting and metric (default: the cost-like ones compared across tasks, V, D_norm,
D_norm+): the CI half-width of the IQM today and the seeds per condition that bring it to --halfwidth
(default 0.05), found by drawing K' seeds per condition from the cube's own and running the report's
stratified bootstrap on them (docs/statistics.md, "How many seeds"). With --poi X,Y also the seeds (of each
algorithm) for the CI of P(X better than Y) to exclude 0.5 with --power (default 0.8). The baseline
(--baseline) is greyed in the terminal table.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from cube.errors import CubeError, CubeWarning
from cube.outputs import write_text
from cube.selection import (
    add_selection_arguments,
    add_statistics_arguments,
    check_statistics_arguments,
    count_at_most,
    parse_names,
    parse_pair,
    parse_settings,
    selection_from_args,
)

SUFFIX_FORMAT = {".csv": "csv", ".json": "json", ".md": "markdown", ".markdown": "markdown"}
MAX_SEEDS = 10_000


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `plan` subcommand."""
    p = subparsers.add_parser("plan", help="seeds per condition needed for a CI half-width or a PoI decision",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", help="results cube (Zarr directory or netCDF file)")
    p.add_argument("--halfwidth", default="0.05", metavar="W|METRIC=W,..",
                   help="target CI half-width of the IQM: one number for every metric, or per metric "
                        "(V=0.02,Dnorm=0.1; the others 0.05). Default 0.05")
    p.add_argument("--metrics", "--metric", dest="metrics",
                   help="metrics to plan (default: V, Dnorm, Dplus: the cost-like metrics comparable across tasks)")
    p.add_argument("--poi", metavar="X,Y", help="also the seeds for P(X better than Y) to exclude 0.5")
    p.add_argument("--power", type=float, default=0.8, help="power of the --poi decision (default 0.8)")
    p.add_argument("--max-seeds", type=count_at_most(MAX_SEEDS), default=500,
                   help="largest number of seeds per condition to try (default 500)")
    p.add_argument("--format", choices=("table", "csv", "json", "markdown"), default=None,
                   help="output format (default: from --out's suffix, else a table on screen)")
    p.add_argument("-o", "--out", "--output", dest="output", metavar="FILE", help="write to this file")
    p.add_argument("--digits", type=int, default=3, help="decimals in table/markdown output (default 3)")
    add_selection_arguments(p)
    add_statistics_arguments(p, "the not-safe baseline, greyed in the table: auto (default: the unconstrained "
                                "algorithms, e.g. ppo), none, or an algorithm")
    p.add_argument("--no-cache", action="store_true", help="recompute sufficient statistics, do not cache them")
    p.add_argument("--scheduler", help="run the pass over the episodes on this dask.distributed scheduler")
    p.set_defaults(func=run)


def parse_halfwidth(text: str) -> float | dict[str, float]:
    """'0.05' -> 0.05; 'V=0.02,Dnorm=0.1' -> {'V': 0.02, 'Dnorm': 0.1}; CubeError naming the bad part."""
    text = text.strip()
    try:
        if "=" not in text:
            return float(text)
        out = {}
        for part in text.split(","):
            name, _, value = part.partition("=")
            out[name.strip()] = float(value)
        return out
    except ValueError:
        raise CubeError(f"cannot read --halfwidth {text!r}: give a number (0.05) or METRIC=W pairs "
                        "(V=0.02,Dnorm=0.1)") from None


def _format(args: argparse.Namespace) -> str:
    if args.format:
        return args.format
    if args.output:
        suffix = Path(args.output).suffix.lower()
        if suffix not in SUFFIX_FORMAT:
            raise CubeError(f"cannot tell the format of {args.output}: use .csv, .json or .md, or --format")
        return SUFFIX_FORMAT[suffix]
    return "table"


def run(args: argparse.Namespace) -> int:
    """Load the cube's statistics, project the seeds and print (or write) the plan table."""
    from cube.stats.cache import wait_for_cache_writes

    try:
        return _run(args)
    finally:
        wait_for_cache_writes()


def _run(args: argparse.Namespace) -> int:
    from cube import stats
    from cube.cli.console import err_console, print_recorded_warnings, progress_bar
    from cube.compute import scheduler_context
    from cube.render.plan_table import plan_rich_tables, plan_text
    from cube.stats.planning import halfwidth_targets, plan_frame, plan_poi, plan_seeds
    from cube.stats.profiles import profile_metrics

    fmt = _format(args)
    check_statistics_arguments(args.boot, args.ci, args.rng_seed)
    if not 0 <= args.digits <= 12:
        raise CubeError(f"--digits must be between 0 and 12, got {args.digits}")
    if not 0.0 < args.power < 1.0:
        raise CubeError(f"--power must be strictly between 0 and 1, got {args.power}")
    halfwidth = parse_halfwidth(args.halfwidth)
    metrics = parse_names(args.metrics, "metrics") if args.metrics else profile_metrics()
    stats_metrics = stats.METRICS
    unknown = [m for m in metrics if m not in stats_metrics]
    if unknown:
        raise CubeError(f"unknown metric {', '.join(unknown)}: use one or more of {', '.join(stats_metrics)}")
    halfwidth_targets(halfwidth, metrics)  # bad targets fail before any work
    pair = parse_pair(args.poi, "--poi") if args.poi is not None else None
    settings = parse_settings(args.settings)
    settings = stats.settings_arg(settings) if settings is not None else None
    selection = selection_from_args(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stats.StatsWarning)
        warnings.simplefilter("always", CubeWarning)
        with progress_bar() as bar:
            task = bar.add_task("sufficient statistics", total=None)
            with scheduler_context(args.scheduler):
                ss = stats.load_suffstats(args.path, cache=not args.no_cache, background_write=True,
                                          progress=lambda d, t: bar.update(task, completed=d, total=t))
            bar.update(task, visible=False)
            ss = stats.select(ss, selection.check_iterates(ss.sizes["iterate"]))
            marked = stats.not_safe(ss["algo"].values, args.baseline or "auto")
            if settings is not None:
                stats.require_data(ss, settings)
            use = stats.settings_arg(settings, ss)
            kw = {"boot": args.boot, "rng_seed": args.rng_seed, "ci": args.ci, "iterates": selection.iterates,
                  "max_seeds": args.max_seeds, "metrics": metrics}
            task = bar.add_task(f"projecting seeds (B={args.boot})", total=None)
            seeds = plan_seeds(ss, use, halfwidth=halfwidth, progress=lambda d, t: bar.update(task, completed=d,
                                                                                              total=t), **kw)
            poi = None
            if pair is not None:
                task = bar.add_task(f"power of P({pair[0]} > {pair[1]})", total=None)
                poi = plan_poi(ss, pair[0], pair[1], use, power=args.power,
                               progress=lambda d, t: bar.update(task, completed=d, total=t), **kw)
    if ss.attrs.get("synthetic"):
        err_console.print("note: this cube is SYNTHETIC demo data, not training results", highlight=False,
                          markup=False)
    print_recorded_warnings(caught)
    frame = plan_frame(seeds, poi)
    conditions = None if poi is None else {(str(s), str(m)): int(poi["n_conditions"].sel(setting=s, metric=m))
                                           for s in poi["setting"].values for m in poi["metric"].values}
    synthetic = bool(ss.attrs.get("synthetic"))
    if fmt == "table" and not args.output:
        _print_rich(plan_rich_tables(frame, args.digits, conditions, synthetic, marked))
        return 0
    meta = {"boot": args.boot, "ci": args.ci, "rng_seed": args.rng_seed, "max_seeds": args.max_seeds,
            "power": args.power if pair else None, "selection": ss.attrs.get("selection")}
    if fmt == "table":
        raise CubeError("the terminal table is not written to a file: use --format csv, json or markdown")
    text = plan_text(frame, fmt, args.digits, meta, synthetic, conditions)
    if args.output:
        write_text(Path(args.output), text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def _print_rich(tables: list) -> None:
    from rich.console import Console

    console = Console(file=sys.stdout) if sys.stdout.isatty() else Console(file=sys.stdout, width=200,
                                                                               color_system=None)
    for table in tables:
        console.print(table)
