"""`saferl plot`: the paper's figures from a results cube (matplotlib; PDF, PNG or SVG).

    saferl plot CUBE KIND [--out FILE|DIR] [--format pdf|png|svg] [--style paper|screen]
                [--algo ..] [--task ..] [--bound ..] [--seed 0-9] [--iterates J|LO:HI]
                [--settings train,final_greedy] [--baseline auto|none|ALGO] [--boot 2000] [--rng-seed 0] [--ci 0.95]
                [--cvar-alpha 0.1]
                [--xmax 2|none] [--window 5] [--var multiplier] [--bins 20] [--by auto|iterate|env_steps]
                [--pair X,Y ...] [--front-cost Dnorm]
                [--no-cache]

KIND: cdf (Figure 2; --xmax none: Figure A.1), curves (reward, cost with the bound, and the multiplier per
iterate per condition; --var NAME another per-iterate variable in its place: pid_integral, pid_error,
pid_derivative, saute_budget, saute_penalty_share, crpo_regime, crpo_reward_share, alpha, ...; --var list
prints those the selection has), hist (final cost, exploration vs greedy, per condition), intervals (IQM and CI
of every metric per algorithm and setting, with the tier), poi (probability of improvement of pairs of
algorithms), aggregate-curve (IQM over conditions per iterate with its CI band; --out FILE.csv or .json
writes its numbers instead), profile (run-level performance profiles of D_norm, V, D_norm+ and CVaR with
bootstrap bands, a row per setting), front (the reward-cost front across bounds per task at the final greedy
setting, or the last of --settings: points filled on the front, P(front) beside each; --front-cost CVaR for
CVaR on the x axis), or all (the whole set into the --out directory, one file per figure, plus
aggregate_curve.csv). Without --out: <cube>-figures/<kind>.pdf next to the cube.
Needs matplotlib: pip install 'saferl[plot]'.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from cube.cli.report import add_cvar_argument, add_front_cost_argument
from cube.errors import CubeError, CubeWarning
from cube.outputs import figures_folder, write_text
from cube.render.choices import DEFAULT_WINDOW, FIGURE_FORMATS, FIGURE_KINDS, FIGURE_STYLES
from cube.selection import (
    add_selection_arguments,
    add_statistics_arguments,
    check_statistics_arguments,
    count_at_most,
    parse_pair,
    parse_settings,
    selection_from_args,
)
from cube.stats.tail import check_alpha

KINDS = (*FIGURE_KINDS, "all")
FORMATS = FIGURE_FORMATS
DATA_SUFFIXES = {".csv": "csv", ".json": "json"}
MAX_BINS = 1000
"""More histogram bins than this are a typo (a panel is a few hundred points wide)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `plot` subcommand (imports nothing heavy: matplotlib only when a figure is made)."""
    p = subparsers.add_parser("plot",
                              help="the paper's figures of a cube (CDFs, curves, histograms, CIs) as PDF/PNG/SVG",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", help="results cube (Zarr directory or netCDF file)")
    p.add_argument("kind", choices=KINDS, metavar="KIND", help=f"figure: {', '.join(KINDS)}")
    p.add_argument("-o", "--out", "--output", dest="output", metavar="FILE|DIR",
                   help="file to write (.pdf, .png, .svg; aggregate-curve also .csv, .json); a directory for all "
                        "(default: <cube>-figures/ next to the cube)")
    p.add_argument("--format", choices=FORMATS, help="figure format (default: from --out's suffix; pdf for all)")
    p.add_argument("--style", choices=FIGURE_STYLES, default="paper",
                   help="paper: serif, 8 pt, 3.25/6.75 in wide, fonts embedded (default); screen: larger")
    add_selection_arguments(p)
    add_cvar_argument(p)
    add_statistics_arguments(p, "the not-safe baseline, drawn grey and never setting an axis: auto (default: the "
                                "unconstrained algorithms, e.g. ppo), none, or an algorithm")
    p.add_argument("--xmax", default="2", help="cdf: right end of the x axis (default 2, as Figure 2); "
                   "none = up to where every curve reaches 1 (Figure A.1)")
    p.add_argument("--window", type=int, default=None,
                   help=f"curves: moving-average window in iterates (default {DEFAULT_WINDOW}, at most the cube's)")
    p.add_argument("--var", default="multiplier", metavar="NAME",
                   help="curves: the per-iterate variable of the third row (default multiplier; e.g. pid_integral, "
                        "saute_budget, crpo_regime, alpha); list: print those the selection has")
    p.add_argument("--bins", type=count_at_most(MAX_BINS), default=20, help="hist: bins per panel (default 20)")
    p.add_argument("--by", choices=("auto", "iterate", "env_steps"), default="auto",
                   help="aggregate-curve x axis: iterates, env-step bins, or auto (env steps when runs differ "
                        "in steps per iterate)")
    p.add_argument("--pair", action="append", metavar="X,Y", dest="pairs",
                   help="poi: a pair of algorithms (repeatable; default every pair, the baseline second)")
    add_front_cost_argument(p)
    p.add_argument("--no-cache", action="store_true", help="recompute sufficient statistics, do not cache them")
    p.set_defaults(func=run)


def _xmax(text: str) -> float | None:
    if text.strip().lower() in ("none", "full", "all", ""):
        return None
    try:
        value = float(text)
    except ValueError:
        raise CubeError(f"cannot read --xmax {text!r}: give a number (e.g. 2) or none") from None
    if not value > -1.0:
        raise CubeError(f"--xmax must be above -1 (the smallest normalized deviation), got {text}")
    return value


def _pairs(items: list[str] | None) -> tuple[tuple[str, str], ...] | None:
    return tuple(parse_pair(text, "--pair") for text in items) if items else None


def _check(args: argparse.Namespace) -> None:
    check_statistics_arguments(args.boot, args.ci, args.rng_seed)
    check_alpha(args.cvar_alpha)
    if (args.window is not None and args.window < 1) or args.bins < 1:
        raise CubeError("--window and --bins must be >= 1")
    args.window = _window(args.path, args.window)


def _window(path: str, window: int | None) -> int:
    """The moving-average window: `window`, or DEFAULT_WINDOW cut to the cube's iterates when none was given.
    CubeError when a given window is longer than the cube's iterates (it would average each curve into one
    flat line without a word); iterates read from the store's published grid."""
    from cube.store.grid import published_sizes
    from cube.store.layout import MAX_ITERATES

    sizes = published_sizes(path) if Path(path).is_dir() else None
    most = sizes["iterate"] if sizes else MAX_ITERATES
    if window is None:
        return max(1, min(DEFAULT_WINDOW, most))
    if window > most:
        raise CubeError(f"--window {window:,} is longer than the {most:,} iterates "
                        f"{'of the cube' if sizes else 'a store holds'}: give at most {most:,}")
    return window


def _default_out(path: str, kind: str, fmt: str) -> Path:
    folder = figures_folder(path)
    return folder if kind == "all" else folder / f"{kind.replace('-', '_')}.{fmt}"


def _target(args: argparse.Namespace) -> tuple[Path, str]:
    """(output path, format): format from --format, else from the suffix ('csv'/'json' for curve data)."""
    kind = args.kind
    if args.output is None:
        fmt = args.format or "pdf"
        out = _default_out(args.path, kind, fmt)
        if kind != "all":
            out.parent.mkdir(parents=True, exist_ok=True)
        return out, fmt
    out = Path(args.output)
    if kind == "all":
        if out.exists() and not out.is_dir():
            raise CubeError(f"{out} is a file: `plot all` writes one file per figure into a directory")
        return out, args.format or "pdf"
    suffix = out.suffix.lower()
    if kind == "aggregate-curve" and suffix in DATA_SUFFIXES and args.format is None:
        return out, DATA_SUFFIXES[suffix]
    fmt = args.format or suffix.lstrip(".")
    if fmt not in FORMATS:
        extra = " (aggregate-curve also .csv or .json)" if kind == "aggregate-curve" else ""
        raise CubeError(f"cannot tell the format of --out {out}: give a .pdf, .png or .svg file{extra}, or --format")
    if out.is_dir():
        raise CubeError(f"{out} is a directory: give a file name for --out")
    if not out.parent.exists():
        raise CubeError(f"folder {out.parent} does not exist: create it or choose another --out")
    return out, fmt


def _list_vars(args: argparse.Namespace) -> int:
    """`--var list`: the per-iterate variables with values in the selection, with the algorithms that have them."""
    import numpy as np

    from cube.render.style import iterate_var_label
    from cube.stats.curves import iterate_var_names
    from cube.stats.subset import select_runs
    from cube.store.read import open_cube

    ds = select_runs(open_cube(args.path), selection_from_args(args))
    having: dict[str, list[str]] = {}  # each variable read once: the algorithms with a value of it
    for name in iterate_var_names(ds):
        values = np.asarray(ds[name].transpose("algo", ...).values, dtype=np.float64)
        algos = [str(a) for a, v in zip(ds["algo"].values, values, strict=True) if np.isfinite(v).any()]
        if algos:
            having[name] = algos
    if not having:
        print("no per-iterate variable has values in this selection")
        return 0
    width = max(len(n) for n in having)
    for name, algos in having.items():
        print(f"{name:<{width}}  {iterate_var_label(name)} ({', '.join(algos)})")
    return 0


def run(args: argparse.Namespace) -> int:
    """Make the figure(s) and write them; returns the exit code."""
    from cube.stats.cache import wait_for_cache_writes

    try:
        return _run(args)
    finally:
        wait_for_cache_writes()


def _run(args: argparse.Namespace) -> int:
    from cube import stats
    from cube.cli.console import err_console, print_recorded_warnings, progress_bar

    _check(args)
    if args.var == "list":
        return _list_vars(args)
    out, fmt = _target(args)
    if fmt not in DATA_SUFFIXES.values():
        from cube.render.style import require_matplotlib

        require_matplotlib()
    from cube.render import figures
    from cube.render.data import learning_curve_csv, learning_curve_json
    from cube.render.maker import FigureMaker, PlotOptions

    selection = selection_from_args(args)
    settings = parse_settings(args.settings)
    settings = stats.settings_arg(settings) if settings is not None else None
    options = PlotOptions(settings=settings, baseline=args.baseline or "auto", boot=args.boot, rng_seed=args.rng_seed,
                                  ci=args.ci, xmax=_xmax(args.xmax), style=args.style, window=args.window,
                                  bins=args.bins, by=args.by, pairs=_pairs(args.pairs), var=args.var,
                                  cvar_alpha=args.cvar_alpha, front_cost=args.front_cost)
    written: list[Path] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stats.StatsWarning)
        warnings.simplefilter("always", CubeWarning)
        with progress_bar() as bar:
            tasks: dict[str, object] = {}

            def progress(what: str, done: int, total: int) -> None:
                if what not in tasks:
                    tasks[what] = bar.add_task(what, total=total)
                bar.update(tasks[what], completed=done, total=total)

            ss = None
            if args.no_cache:
                ss = stats.load_suffstats(args.path, cache=False, cvar_alphas=(args.cvar_alpha,),
                                          progress=lambda d, t: progress("sufficient statistics", d, t))
            maker = FigureMaker(args.path, selection, options, ss=ss, progress=progress)
            if args.kind == "all":
                out.mkdir(parents=True, exist_ok=True)
                draw = bar.add_task("drawing figures", total=None)
                for stem, fig in maker.all_figures():
                    written.append(figures.save_figure(fig, out / f"{stem}.{fmt}", fmt))
                    bar.update(draw, advance=1)
                path = out / "aggregate_curve.csv"
                write_text(path, learning_curve_csv(maker.learning_curve()))
                written.append(path)
            elif fmt in DATA_SUFFIXES.values():
                curve = maker.learning_curve()
                write_text(out, learning_curve_csv(curve) if fmt == "csv" else learning_curve_json(curve))
                written.append(out)
            else:
                written.append(figures.save_figure(maker.figure(args.kind), out, fmt))
    if maker.means_only:
        err_console.print(f"note: V, D_norm+, CVaR, tiers and CDFs are not available for the {maker.means_only} "
                          "selected (run, mode) pair(s) that hold means of several episodes, not episodes; the "
                          "figures say so",
                          highlight=False, markup=False)
    if maker.synthetic:
        err_console.print("note: this cube is SYNTHETIC demo data, not training results; the figures say so",
                          highlight=False)
    print_recorded_warnings(caught)
    if len(written) == 1:
        print(f"wrote {written[0]}")
    else:
        print(f"wrote {len(written)} files to {out}: {', '.join(p.name for p in written)}")
    return 0
