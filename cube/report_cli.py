"""`saferl report`: the paper's tables from a results cube (IQM + stratified-bootstrap CIs, tiers, CDFs).

    saferl report CUBE [--kind aggregate|conditions|cdf|all] [--format markdown|csv|json|latex]
                       [--settings train,final_greedy] [--algos ..] [--tasks ..] [--bounds ..]
                       [--seeds 0-9] [--iterates J|LO:HI] [--boot 2000] [--ci 0.95] [--rng-seed 0]
                       [--baseline ppo] [--digits 2] [--output FILE|DIR] [--no-cache]
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path

import xarray as xr
from rich.progress import Progress

from cube import export, stats
from cube.errors import CubeError
from cube.selection import parse_selection

SUFFIX_FORMAT = {".csv": "csv", ".json": "json", ".md": "markdown", ".markdown": "markdown", ".tex": "latex"}
FORMAT_SUFFIX = {"csv": ".csv", "json": ".json", "markdown": ".md", "latex": ".tex"}
TITLES = {"aggregate": "Aggregate metrics (IQM over task-bound pairs, stratified-bootstrap CI)",
          "conditions": "Per-condition metrics (seed mean ± sample std)",
          "cdf": "Aggregate CDF of the normalized episodic cost deviation"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `report` subcommand."""
    p = subparsers.add_parser("report", help="the paper's metrics, CIs, safety tiers and CDFs of a cube",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", help="results cube (Zarr directory or netCDF file)")
    p.add_argument("--kind", choices=(*export.KINDS, "all"), default="aggregate",
                   help="table: aggregate (IQM, CI, tier), conditions (per task/bound), cdf, or all (default aggregate)")
    p.add_argument("--format", choices=export.FORMATS, default=None,
                   help="output format (default: from --output's suffix, else markdown)")
    p.add_argument("--settings",
                   help=f"comma-separated settings from {', '.join(stats.SETTINGS)} (default: all with episodes)")
    p.add_argument("--algos", help="comma-separated algorithms (default all)")
    p.add_argument("--tasks", help="comma-separated tasks (default all)")
    p.add_argument("--bounds", help="comma-separated safety bounds (default all)")
    p.add_argument("--seeds", help="seeds, e.g. 0-9 or 0,3,5 (default all)")
    p.add_argument("--iterates", help="training iterates: J (policy pi_J) or LO:HI inclusive (default all)")
    p.add_argument("--boot", type=int, default=2000, help="bootstrap replicates B (default 2000, as in the paper)")
    p.add_argument("--ci", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    p.add_argument("--rng-seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    p.add_argument("--baseline", help="unconstrained baseline algorithm, excluded from 'best' (e.g. ppo)")
    p.add_argument("--digits", type=int, default=2, help="decimals in markdown/latex tables (default 2)")
    p.add_argument("-o", "--output", help="write to this file (a directory for --kind all with csv/json/latex)")
    p.add_argument("--no-cache", action="store_true", help="recompute sufficient statistics, do not cache them")
    p.add_argument("--scheduler", help="run the pass over the episodes on this dask.distributed scheduler "
                   "(default: $DASK_SCHEDULER_ADDRESS, else local threads); see docs/cluster.md")
    p.set_defaults(func=run)


def _format(args: argparse.Namespace) -> str:
    if args.format:
        return args.format
    if args.output and args.kind != "all":
        return SUFFIX_FORMAT.get(Path(args.output).suffix.lower(), "markdown")
    return "markdown"


def _write(path: Path, text: str) -> None:
    """Write text atomically (temporary file, then rename)."""
    if path.is_dir():
        raise CubeError(f"{path} is a directory: give a file name for --output")
    if not path.parent.exists():
        raise CubeError(f"folder {path.parent} does not exist: create it or choose another --output")
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise CubeError(f"cannot write {path} ({exc.strerror or type(exc).__name__}): choose another --output") from None


def _notes(ss: xr.Dataset) -> list[str]:
    notes = []
    if ss.attrs.get("synthetic"):
        notes.append("this cube is SYNTHETIC demo data, not training results")
    if "run_status" in ss:
        incomplete = int((ss["run_status"] != 2).sum())
        if incomplete:
            notes.append(f"{incomplete} selected run(s) are not complete; they count with the episodes they have")
    return notes


def _tables(ss: xr.Dataset, kinds: tuple[str, ...], args: argparse.Namespace, settings: tuple[str, ...],
            bar: Progress) -> dict[str, xr.Dataset]:
    out = {}
    for kind in kinds:
        if kind == "conditions":
            out[kind] = stats.condition_table(ss, settings)
            continue
        task = bar.add_task(f"bootstrap {kind} (B={args.boot})", total=None)

        def tick(done: int, total: int, task=task) -> None:
            bar.update(task, completed=done, total=total)

        fn = stats.aggregate_table if kind == "aggregate" else stats.cdf_curves
        out[kind] = fn(ss, settings, boot=args.boot, rng_seed=args.rng_seed, ci=args.ci, progress=tick)
    return out


def run(args: argparse.Namespace) -> int:
    """Compute and print (or write) the requested tables; returns the exit code."""
    from cube.cli import err_console, progress_bar
    from cube.cluster import scheduler_context

    fmt = _format(args)
    kinds = export.KINDS if args.kind == "all" else (args.kind,)
    settings = (stats.settings_arg([s.strip() for s in args.settings.split(",") if s.strip()])
                if args.settings is not None else None)
    selection = parse_selection(args.algos, args.tasks, args.bounds, args.seeds, args.iterates)
    if args.boot < 1 or not 0 < args.ci < 1:
        raise CubeError("--boot must be >= 1 and --ci strictly between 0 and 1 (e.g. --boot 2000 --ci 0.95)")
    if not 0 <= args.digits <= 12:
        raise CubeError(f"--digits must be between 0 and 12, got {args.digits}")
    multi_file = args.kind == "all" and fmt != "markdown"
    if multi_file and not args.output:
        raise CubeError(f"--kind all with --format {fmt} writes one file per table: give --output DIR")
    with progress_bar() as bar:
        task = bar.add_task("sufficient statistics", total=None)
        with scheduler_context(args.scheduler):
            ss = stats.load_suffstats(args.path, cache=not args.no_cache,
                                      progress=lambda d, t: bar.update(task, completed=d, total=t))
        bar.update(task, visible=False)
        ss = stats.select(ss, selection)
        if args.baseline and args.baseline not in ss["algo"].values:
            raise CubeError(f"--baseline {args.baseline} is not among the selected algorithms "
                            f"({', '.join(map(str, ss['algo'].values))})")
        if settings is not None:
            stats.require_data(ss, settings)
        tables = _tables(ss, kinds, args, stats.settings_arg(settings, ss), bar)
    texts = {k: export.render(v, kind=k, fmt=fmt, baseline=args.baseline, digits=args.digits) for k, v in tables.items()}
    for note in _notes(ss):
        err_console.print(f"note: {note}", highlight=False)
    return _emit(texts, fmt, args)


def _emit(texts: dict[str, str], fmt: str, args: argparse.Namespace) -> int:
    if args.kind == "all" and fmt != "markdown":
        out = Path(args.output)
        if out.exists() and not out.is_dir():
            raise CubeError(f"{out} is a file: --kind all writes one file per table into a directory")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CubeError(f"cannot create {out} ({exc.strerror or type(exc).__name__}): choose another --output") from None
        for kind, text in texts.items():
            _write(out / f"{kind}{FORMAT_SUFFIX[fmt]}", text)
        print(f"wrote {', '.join(str(out / (k + FORMAT_SUFFIX[fmt])) for k in texts)}")
        return 0
    if len(texts) > 1:
        body = "\n".join(f"## {TITLES[k]}\n\n{t}" for k, t in texts.items())
    else:
        body = next(iter(texts.values()))
    if args.output:
        _write(Path(args.output), body)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(body)
    return 0
