"""`saferl report`: the paper's tables from a results cube (IQM + stratified-bootstrap CIs, tiers, CDFs).

    saferl report CUBE [--format table|csv|json|markdown|latex] [--style default|paper] [--out FILE|DIR]
                       [--per-condition] [--cdf] [--poi X,Y] [--gap]
                       [--kind aggregate|conditions|cdf|poi|gap|profile|front|all] [--front-cost Dnorm]
                       [--reference paper] [--settings train,final_greedy] [--algo ..] [--task ..] [--bound ..]
                       [--seed 0-9] [--iterates J|LO:HI] [--boot 2000] [--ci 0.95] [--rng-seed 0]
                       [--baseline auto|none|ALGO] [--cvar-alpha 0.1] [--no-ci] [--digits 2] [--no-cache]
                       [--scheduler ADDRESS]

Without options it prints the aggregate table (rich, like the paper's Table 2, with CVaR after D_norm+:
the mean (c - d)/d of a run's worst --cvar-alpha share of episodes). --per-condition (= --kind
conditions) and --cdf (= --kind cdf) pick other tables, --poi X,Y adds the probability that X improves on
Y, --gap the greedy-minus-exploration gap; several of them print one after another. --algo/--task/--bound/
--seed are the same as --algos/--tasks/--bounds/--seeds, --out the same as -o/--output.

Beyond the paper: the aggregate and per-condition tables carry an honest interval of V (CSV/JSON
honest_low, honest_high and the claim, beside the paper's CI, which stays as it is); where a tier rests on
an observed V = 0 the tables show the tier at that bound (4→3) and say the claim; conditions with fewer than
5 seeds are marked ‡. --kind profile: run-level performance profiles (CSV: the whole grid); --kind front:
the reward-cost front across bounds per task, P(front) per point and the tasks on the front per algorithm.

The not-safe baseline (--baseline; auto = the unconstrained algorithms such as ppo) is greyed or marked
and never "best" in every format. On a terminal the table fits its width: CIs beside the values, under
them, or left out (--no-ci leaves them out always). --format latex --style paper writes the paper's Table 2
and its appendix CI table. --reference paper adds the paper's published numbers beside the cube's.
"""

from __future__ import annotations

import argparse
import sys
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from cube import stats  # a lazy facade: its names load their modules when a command runs, not at --help
from cube.errors import CubeError, CubeWarning, DamagedStoreError
from cube.io.reference import REFERENCES
from cube.outputs import write_text
from cube.render.choices import LATEX_STYLES, TABLE_FORMATS, TABLE_KINDS
from cube.schema import same_bound
from cube.selection import (
    add_selection_arguments,
    add_statistics_arguments,
    check_statistics_arguments,
    count_at_most,
    parse_pair,
    parse_settings,
    selection_from_args,
)
from cube.stats.tail import CVAR_ALPHAS, DEFAULT_CVAR_ALPHA

if TYPE_CHECKING:  # the heavy modules load inside the command (`saferl --help` and argument errors stay fast)
    import xarray as xr
    from rich.progress import Progress

SUFFIX_FORMAT = {".csv": "csv", ".json": "json", ".md": "markdown", ".markdown": "markdown", ".tex": "latex",
                 ".txt": "table"}
FORMAT_SUFFIX = {"csv": ".csv", "json": ".json", "markdown": ".md", "latex": ".tex", "table": ".txt"}
TITLES = {"aggregate": "Aggregate metrics (IQM over task-bound pairs, stratified-bootstrap CI)",
          "conditions": "Per-condition metrics (seed mean ± sample std)",
          "cdf": "Aggregate CDF of the normalized episodic cost deviation",
          "poi": "Probability of improvement",
          "gap": "Greedy minus exploration gap",
          "profile": "Run-level performance profiles",
          "front": "Reward-cost front across bounds",
          "reference_aggregate": "Beside the reference: aggregate metrics",
          "reference_conditions": "Beside the reference: per-condition metrics"}
ALL = ("aggregate", "conditions", "cdf", "profile", "front")


def add_cvar_argument(parser: argparse.ArgumentParser) -> None:
    """`--cvar-alpha`, shared by `saferl report` and `saferl plot`."""
    parser.add_argument("--cvar-alpha", type=float, default=DEFAULT_CVAR_ALPHA, metavar="ALPHA",
                        help="the CVaR column: the mean (c - d)/d of a run's worst ALPHA share of episodes (default "
                             f"{DEFAULT_CVAR_ALPHA:g}; {' and '.join(f'{a:g}' for a in CVAR_ALPHAS)} "
                             "are computed in the one pass and cached, another alpha computes the pass once more)")


def add_front_cost_argument(parser: argparse.ArgumentParser) -> None:
    """`--front-cost`, shared by `saferl report --kind front` and `saferl plot front`."""
    parser.add_argument("--front-cost", default="Dnorm", metavar="METRIC",
                        help="the reward-cost front's cost axis: a lower-is-better metric (Dnorm default, CVaR, V, "
                             "Dplus, C)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `report` subcommand."""
    p = subparsers.add_parser("report", help="the paper's metrics, CIs, safety tiers and CDFs of a cube",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", help="results cube (Zarr directory or netCDF file)")
    p.add_argument("--kind", choices=(*TABLE_KINDS, "all"), default=None,
                   help="table: aggregate (IQM, CI, tier; default), conditions, cdf, poi, gap, profile (run-level "
                        "performance profiles), front (the reward-cost front across bounds), or all (aggregate, "
                        "conditions, cdf, profile, front, plus poi/gap when asked for)")
    p.add_argument("--per-condition", action="store_true", help="per task and bound: seed mean ± std and tier "
                   "(= --kind conditions)")
    p.add_argument("--cdf", action="store_true", help="aggregate CDF curve and band on the kappa grid (= --kind cdf)")
    p.add_argument("--poi", metavar="X,Y", help="probability that algorithm X improves on Y (Mann-Whitney over seeds)")
    p.add_argument("--gap", action="store_true", help="greedy-minus-exploration gap of every final metric")
    add_front_cost_argument(p)
    p.add_argument("--format", choices=TABLE_FORMATS, default=None,
                   help="output format (default: from --out's suffix, else table on screen)")
    add_selection_arguments(p)
    add_statistics_arguments(p, "the not-safe baseline, greyed and never 'best': auto (default: the unconstrained "
                                "algorithms, e.g. ppo), none, or an algorithm")
    add_cvar_argument(p)
    p.add_argument("--no-ci", action="store_true", help="values without CIs (or stds) in the terminal table")
    p.add_argument("--width", type=count_at_most(10_000), default=None, metavar="COLUMNS",
                   help="lay the terminal table out for this many columns (default: the terminal's; piped: as "
                        "wide as it needs)")
    p.add_argument("--style", choices=LATEX_STYLES, default="default",
                   help="LaTeX layout: default (fits \\textwidth of a two-column paper) or paper (Table 2 and "
                        "its appendix CI table)")
    p.add_argument("--reference", choices=REFERENCES,
                   help="show published numbers beside the cube's (paper: the paper's Table 2 and tables 4-7)")
    p.add_argument("--digits", type=int, default=2, help="decimals in table/markdown/latex output (default 2)")
    p.add_argument("-o", "--out", "--output", dest="output", metavar="FILE",
                   help="write to this file (a directory when several tables go to csv/json/latex)")
    p.add_argument("--no-cache", action="store_true", help="recompute sufficient statistics, do not cache them")
    p.add_argument("--scheduler", help="run the pass over the episodes on this dask.distributed scheduler "
                   "(default: $DASK_SCHEDULER_ADDRESS, else local threads); see docs/cluster.md")
    p.set_defaults(func=run)


def _kinds(args: argparse.Namespace) -> tuple[str, ...]:
    """The tables asked for, in a fixed order; aggregate when nothing is asked."""
    asked = set()
    if args.kind == "all":
        asked.update(ALL)
    elif args.kind:
        asked.add(args.kind)
    asked.update(k for k, flag in (("conditions", args.per_condition), ("cdf", args.cdf),
                                   ("poi", args.poi is not None), ("gap", args.gap)) if flag)
    if args.kind == "all" and args.poi is None:
        asked.discard("poi")
    if "poi" in asked and args.poi is None:
        raise CubeError("--kind poi needs --poi X,Y: the two algorithms to compare")
    return tuple(k for k in TABLE_KINDS if k in asked) or ("aggregate",)


def _format(args: argparse.Namespace, kinds: tuple[str, ...]) -> str:
    if args.format:
        return args.format
    if args.output and len(kinds) == 1:
        return SUFFIX_FORMAT.get(Path(args.output).suffix.lower(), "markdown")
    if args.output:
        return "markdown"
    return "table"


def _multi_file(kinds: tuple[str, ...], fmt: str) -> bool:
    """Several tables in a machine format go to one file each (a directory)."""
    return len(kinds) > 1 and fmt not in ("markdown", "table")


def _write(path: Path, text: str) -> None:
    """Write text atomically beside the target (`cube.outputs`); links, FIFOs, devices refused."""
    write_text(path, text)


def _notes(ss: xr.Dataset) -> list[str]:
    notes = []
    if ss.attrs.get("synthetic"):
        notes.append("this cube is SYNTHETIC demo data, not training results")
    if "run_status" in ss:
        incomplete = int((ss["run_status"] != 2).sum())
        if incomplete:
            notes.append(f"{incomplete} selected run(s) are not complete; they count with the episodes they have")
    means_only = stats.means_only_runs(ss)
    if means_only:
        notes.append(f"{means_only} selected (run, mode) pair(s) hold means of several episodes, not episodes: "
                     "R̄, C̄ and D_norm come from the means; V, D_norm+, CVaR, tiers and CDFs are not available "
                     "for them (left blank)")
        described = ss.attrs.get("means_notes")
        if isinstance(described, dict):  # what each source's means are (a sliding window, ...)
            notes += [f"{source}: {text}" for source, text in described.items()]
    return notes


def _convention_notes(manifests: RunArrays, ss: xr.Dataset, reference: str | None) -> list[str]:
    """What the selected runs' conventions are (`cube.io.conventions`), one line when they differ, and one
    line when they differ from the reference's; from the run manifests `manifests` read."""
    from cube.io import conventions

    try:
        rows = manifests.manifests()
    except DamagedStoreError:
        raise  # a manifest or status chunk that does not decode: one line naming it, never a silent report
    except (CubeError, OSError, KeyError, ValueError):  # a netCDF export keeps no manifests
        return []
    chosen = {str(k): set(ss[k].values.tolist()) for k in ("algo", "task", "seed")}
    bounds = ss["bound"].values  # once: a lookup per row costs a DataArray each (seconds at 10,000 runs)
    selected: dict[float, bool] = {}  # per bound label, not per run (a NaN label, never equal, is looked up each time)

    def bound_selected(bound: float) -> bool:
        if bound not in selected:
            selected[bound] = bool(same_bound(bounds, bound).any())
        return selected[bound]

    rows = [r for r in rows if r.get("status") != "pending" and all(r[k] in v for k, v in chosen.items())
            and bound_selected(r["bound"])]
    if not rows:
        return []
    out = [conventions.difference_line(rows) or "conventions: " + conventions.conventions_text(
        conventions.conventions_of(rows[0]))]
    if reference:
        from cube.io.reference import load_reference

        ref = load_reference(reference)
        out.append(conventions.reference_line(rows, ref.conventions, reference)
                   or f"the cube's conventions are {reference}'s")
    return out


class RunArrays:
    """The per-run arrays a report stands on besides the episodes: the runs' env steps verified (damage is one
    line; unchanged files verified before are not read again) and their manifests read
    (`cube.store.read.read_manifests`). Read in a thread of their own once the pass is done (`start`), beside
    the tables and the statistics cache's background write; else on first demand. ``cache``: both kept in the
    store's `_derived` while their files are unchanged. Errors reach the caller where it asks for each. Not
    beside the pass: both cores decode there, and a third thread's Python (0.3 s alone at paper scale,
    2.5-4.1 s of wall time beside the pass) held the GIL against the decode threads' hand-offs
    (docs/performance.md, fifth and sixth rounds)."""

    def __init__(self, path: str, cache: bool) -> None:
        self._path, self._cache = path, cache
        self._errors: dict[str, BaseException] | None = None
        self._rows: list[dict] = []
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Read them in a thread of their own from now on (after the pass: beside the tables)."""
        self._thread = threading.Thread(target=self._read_now, name="saferl-run-arrays")
        self._thread.start()

    def _read(self) -> dict[str, BaseException]:
        if self._thread is not None:
            self._thread.join()
        return self._read_now()

    def _read_now(self) -> dict[str, BaseException]:
        if self._errors is not None:
            return self._errors
        from cube.store.read import read_manifests, verify_run_arrays

        self._errors = {}
        try:
            verify_run_arrays(self._path, ("env_steps",), cache=self._cache)
        except BaseException as exc:  # noqa: BLE001 - raised where the caller asks (`verify`)
            self._errors["verify"] = exc
        try:
            self._rows = read_manifests(self._path, cache=self._cache)
        except BaseException as exc:  # noqa: BLE001 - raised where the caller asks (`manifests`)
            self._errors["manifests"] = exc
        return self._errors

    def verify(self) -> None:
        """The env steps' check; raise what it raised."""
        if "verify" in self._read():
            raise self._errors["verify"]

    def manifests(self) -> list[dict]:
        """The runs' manifest rows (`read_manifests`); raise what reading them raised."""
        if "manifests" in self._read():
            raise self._errors["manifests"]
        return self._rows


def _tables(ss: xr.Dataset, kinds: tuple[str, ...], args: argparse.Namespace, settings: tuple[str, ...],
            bar: Progress) -> dict[str, xr.Dataset]:
    out = {}
    kw = {"boot": args.boot, "rng_seed": args.rng_seed, "ci": args.ci}

    def ticker(what: str):
        task = bar.add_task(f"{what} (B={args.boot})", total=None)
        return lambda done, total: bar.update(task, completed=done, total=total)

    honest = None
    if "aggregate" in kinds or "conditions" in kinds:  # both parts from one bootstrap of V
        honest = stats.honest_tables(ss, settings, progress=ticker("honest intervals of V"), **kw)
    for kind in kinds:
        if kind == "conditions":
            out[kind] = stats.with_honest(stats.condition_table(ss, settings), honest.conditions)
            continue
        if kind == "profile":
            out[kind] = stats.performance_profiles(ss, settings, progress=ticker("performance profiles"), **kw)
            continue
        if kind == "front":
            out[kind] = stats.reward_cost_front(ss, settings, cost=args.front_cost, boot=args.boot,
                                                rng_seed=args.rng_seed, baseline=args.baseline or "auto",
                                                progress=ticker("reward-cost front"))
            continue
        if kind == "poi":
            x, y = (parse_pair(args.poi, "--poi") if args.poi is not None else None)
            out[kind] = stats.probability_of_improvement(ss, x, y, settings, **kw)
            continue
        task = bar.add_task(f"bootstrap {kind} (B={args.boot})", total=None)

        def tick(done: int, total: int, task=task) -> None:
            bar.update(task, completed=done, total=total)

        if kind == "gap":
            out[kind] = stats.greedy_expl_gap(ss, progress=tick, **kw)
            continue
        if kind == "aggregate":
            out[kind] = stats.with_honest(stats.aggregate_table(ss, settings, progress=tick, **kw), honest.aggregate)
            continue
        out[kind] = stats.cdf_curves(ss, settings, progress=tick, **kw)
    return out


def _check_args(args: argparse.Namespace, kinds: tuple[str, ...], fmt: str) -> None:
    check_statistics_arguments(args.boot, args.ci, args.rng_seed)
    stats.check_alpha(args.cvar_alpha)
    if args.output is not None and not str(args.output).strip():
        raise CubeError("--out needs a file name (it was empty); leave it out to print the table here")
    if not 0 <= args.digits <= 12:
        raise CubeError(f"--digits must be between 0 and 12, got {args.digits}")
    if _multi_file(kinds, fmt) and not args.output:
        raise CubeError(f"{len(kinds)} tables with --format {fmt} are written one file per table: give --out DIR")
    if args.poi is not None:
        parse_pair(args.poi, "--poi")


def _warn_left_out(ss: xr.Dataset, settings: tuple[str, ...]) -> None:
    """One warning per setting that some (not all) selected runs lack: they are left out of it."""
    for s in settings:
        lack = stats.runs_without(ss, s)
        if lack:
            warnings.warn(f"setting {s}: {len(lack)} run(s) have no episodes and are left out "
                          f"({stats.some_labels(lack)})", stats.StatsWarning, stacklevel=2)


def run(args: argparse.Namespace) -> int:
    """Compute and print (or write) the requested tables; returns the exit code. A new statistics
    cache is written in the background meanwhile, and waited for before returning."""
    from cube.cli.console import work_done
    from cube.stats.cache import wait_for_cache_writes

    try:
        return _run(args)
    finally:
        wait_for_cache_writes()
        work_done()  # the cache written, the tables out: nothing left for the interpreter's exit


def _run(args: argparse.Namespace) -> int:
    from cube.cli.console import err_console, freeze_survivors, print_recorded_warnings, progress_bar
    from cube.compute import scheduler_context
    from cube.render import text as export

    kinds = _kinds(args)
    fmt = _format(args, kinds)
    settings = parse_settings(args.settings)
    settings = stats.settings_arg(settings) if settings is not None else None
    selection = selection_from_args(args)
    _check_args(args, kinds, fmt)
    runs = RunArrays(args.path, cache=not args.no_cache)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stats.StatsWarning)
        warnings.simplefilter("always", CubeWarning)
        with progress_bar() as bar:
            task = bar.add_task("sufficient statistics", total=None)
            with scheduler_context(args.scheduler):
                ss = stats.load_suffstats(args.path, cache=not args.no_cache, background_write=True,
                                          progress=lambda d, t: bar.update(task, completed=d, total=t),
                                          cvar_alphas=(args.cvar_alpha,))
            bar.update(task, visible=False)
            freeze_survivors()  # the statistics and the modules live until the command ends
            runs.start()
            ss = stats.with_cvar_alpha(stats.select(ss, selection.check_iterates(ss.sizes["iterate"])), args.cvar_alpha)
            marked = stats.not_safe(ss["algo"].values, args.baseline or "auto")
            if settings is not None:
                stats.require_data(ss, settings)
            use = stats.settings_arg(settings, ss)
            _warn_left_out(ss, use)
            tables = _tables(ss, kinds, args, use, bar)
    runs.verify()  # the runs' lengths beside their manifests: damage is one line
    for note in _notes(ss) + _convention_notes(runs, ss, args.reference):
        err_console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    print_recorded_warnings(caught)
    comparisons = _comparisons(tables, args.reference) if args.reference else {}
    if fmt == "table" and not args.output:
        return _print_rich(tables, comparisons, marked, args)
    texts = {k: export.render(v, kind=k, fmt=fmt, not_best=marked, digits=args.digits, style=args.style)
             for k, v in tables.items()}
    texts.update({f"reference_{k}": _compare_text(k, v, fmt, args.digits, marked) for k, v in comparisons.items()})
    return _emit(texts, fmt, args)


def _comparisons(tables: dict[str, xr.Dataset], name: str) -> dict[str, xr.Dataset]:
    """The cube's aggregate and condition tables beside the reference `name` (`cube.stats.reference`)."""
    from cube.io.reference import load_reference
    from cube.stats.reference import compare_aggregate, compare_conditions

    ref = load_reference(name)
    out = {}
    if "aggregate" in tables:
        out["aggregate"] = compare_aggregate(tables["aggregate"], ref.aggregate).assign_attrs(reference=name)
    if "conditions" in tables:
        out["conditions"] = compare_conditions(tables["conditions"], ref.conditions).assign_attrs(reference=name)
    if not out:
        raise CubeError("--reference compares the aggregate table and --per-condition; ask for one of them")
    return out


def _compare_text(kind: str, cmp: xr.Dataset, fmt: str, digits: int, marked: tuple[str, ...]) -> str:
    from cube.render import compare

    if fmt not in compare.FORMATS:
        raise CubeError(f"--reference is shown as a table, markdown, csv or json, not {fmt}")
    fn = compare.aggregate if kind == "aggregate" else compare.conditions
    return fn(cmp, fmt, digits, not_safe=marked)


def _print_rich(tables: dict[str, xr.Dataset], comparisons: dict[str, xr.Dataset], marked: tuple[str, ...],
                args: argparse.Namespace) -> int:
    """Rich tables to stdout, laid out to fit the terminal (or $COLUMNS) without cutting a number; as wide
    as they need when piped without $COLUMNS."""
    from rich.console import Console

    from cube.render import compare
    from cube.render import text as export

    if args.width is not None:
        console, width = Console(file=sys.stdout, width=args.width), args.width
    elif sys.stdout.isatty():  # rich takes the terminal's width ($COLUMNS where set)
        console = Console(file=sys.stdout)
        width = console.width
    else:  # piped: as wide as the table needs, never cut
        console, width = Console(file=sys.stdout, width=100_000, color_system=None), None
    for kind, obj in tables.items():
        if obj.attrs.get("synthetic"):
            console.print(export.SYNTHETIC_MARK["table"].strip(), style="bold red", highlight=False)
        console.print(export.rich_table(obj, kind, not_best=marked, digits=args.digits, width=width,
                                        ci=not args.no_ci))
    for kind, cmp in comparisons.items():
        fn = compare.aggregate if kind == "aggregate" else compare.conditions
        console.print(fn(cmp, "table", args.digits, width, marked))
    return 0


def _emit(texts: dict[str, str], fmt: str, args: argparse.Namespace) -> int:
    if _multi_file(tuple(texts), fmt):
        out = Path(args.output)
        if out.exists() and not out.is_dir():
            raise CubeError(f"{out} is a file: several tables are written one file per table into a directory")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CubeError(f"cannot create {out} ({exc.strerror or type(exc).__name__}): "
                            "choose another --out") from None
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
