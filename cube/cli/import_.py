"""`saferl import FORMAT SRC... (--out CUBE | --into CUBE)`: results of other tools into a saferl cube.

    saferl import episodes episodes.csv --out mine.zarr                 # one row per episode
    saferl import saferl-eval results/ --out paper.zarr                 # SafeRLEval *_summary.csv (+ history)
    saferl import omnisafe runs/ --out omnisafe.zarr                    # progress.csv + config.json per run
    saferl import tensorboard runs/ --out cleanrl.zarr --bound 25       # CleanRL-style charts/episodic_* events
    saferl import sb3-monitor logs/ --out sb3.zarr --cost-column c --cost-kind episode --steps-per-iterate 2048
    saferl import omnisafe runs/ --into mine.zarr                       # add them to an existing cube

The formats are records of `cube.io.registry.Importer`, found through the entry-point group
`saferl.importers` (another package can add one); `saferl import FORMAT --help` lists a format's own
options. Labels (algo, task, bound, seed) come from the files; --algo/--task/--bound/--seed fill or
override them for every run read. Sources that keep only means of several episodes are flagged as such,
and each run's manifest says what the means are: `saferl report` gives R, C and D_norm from them, never V,
D_norm+, tiers or CDFs. Each run's manifest also records its conventions (cost discounting, window,
evaluation, normalization, complete or sampled history) from the files, else from --cost-discount/--eval/
--normalization, else "unknown". --into adds the runs to an existing cube (any source, or runs recorded
with cube.Recorder) and refuses a run that already holds data there unless --replace is given.
"""

from __future__ import annotations

import argparse

from cube.cli.entry import CommandParser
from cube.errors import CubeError
from cube.io.conventions import CONVENTIONS, conventions_of, conventions_text, difference_line, flag_dest
from cube.io.registry import Importer, import_runs, importers


def _common() -> argparse.ArgumentParser:
    """The arguments every format takes (a parent parser)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("sources", nargs="+", metavar="SRC", help="files, or folders searched for them")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", help="the cube to write (a new Zarr store)")
    target.add_argument("--into", metavar="CUBE", help="an existing cube to add the runs to")
    p.add_argument("--force", action="store_true", help="with --out: replace an existing store there")
    p.add_argument("--replace", action="store_true",
                   help="with --into: overwrite runs that already hold data there (all of their data)")
    p.add_argument("--algo", help="algorithm label for every run read")
    p.add_argument("--task", help="task label for every run read")
    p.add_argument("--bound", type=float, help="safety bound d for every run read (the cost limit)")
    p.add_argument("--seed", type=int, help="seed for every run read")
    for conv in CONVENTIONS:
        if conv.flag:
            p.add_argument(conv.flag, dest=f"convention_{conv.name}", choices=conv.choices,
                           help=f"{conv.help}, where the files do not say (recorded in each run's manifest)")
    return p


def _description(record: Importer) -> str:
    return (f"{record.reads}.\n\ngives: {record.gives_text}\ncannot give: {record.cannot_text}"
            + (f"\n\n    {record.example}" if record.example else ""))


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `import` subcommand; its sub-parsers, one per installed format, when it is parsed (loading every
    importer takes 0.1-0.2 s that ``saferl --help`` and the other commands need not pay)."""
    p = subparsers.add_parser("import", help="read other tools' results (TensorBoard, SB3, W&B, OmniSafe, SafePO, "
                              "SafeRLEval, FSRL, RLlib, DSRL, episode tables) into a cube", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    if isinstance(p, CommandParser):
        p.defer(add_formats)
    else:
        add_formats(p)


def add_formats(p: argparse.ArgumentParser) -> None:
    """One sub-parser of `p` per installed import format, with the common arguments and the format's own."""
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    common = _common()
    for name, record in importers().items():
        sp = formats.add_parser(name, parents=[common], help=f"{record.reads} ({record.gives})",
                                description=_description(record),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        for option in record.options:
            option.add_to(sp)
        sp.set_defaults(func=run, importer_options=tuple(o.dest for o in record.options))


def run(args: argparse.Namespace) -> int:
    from cube.cli.console import progress_bar
    from cube.io.writing import add_runs, write_runs  # the store's writers: loaded when the command runs
    from cube.store.location import refuse_url

    refuse_url(args.into or args.out, "import into")
    if args.force and args.into:
        raise CubeError("--force replaces a whole store given with --out; with --into use --replace for runs")
    if args.replace and args.out:
        raise CubeError("--replace overwrites runs of an existing cube given with --into; with --out use --force")
    labels = {"algo": args.algo, "task": args.task, "bound": args.bound, "seed": args.seed}
    options = {dest: getattr(args, dest) for dest in args.importer_options}
    flags = {c.name: getattr(args, f"convention_{c.name}", None) for c in CONVENTIONS if flag_dest(c)}
    with progress_bar() as bar:
        task = bar.add_task(f"reading {args.format}", total=None)
        runs = import_runs(args.format, args.sources, labels, options, flags)
        bar.update(task, description=f"writing {len(runs)} run(s)", total=len(runs), completed=0)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        if args.into:
            add_runs(runs, args.into, fmt=args.format, replace=args.replace, progress=advance)
        else:
            write_runs(runs, args.out, fmt=args.format, force=args.force, progress=advance)
    print(summary_line(runs, args.format, args.into or args.out, added=bool(args.into)))
    for note in dict.fromkeys(n for r in runs for n in [r.means_note(), *r.notes] if n):
        print(f"note: {note}")
    rows = [r.manifest for r in runs]
    differ = difference_line(rows)
    print(f"conventions: {differ}" if differ else f"conventions: {conventions_text(conventions_of(rows[0]))}")
    return 0


def summary_line(runs: list, fmt: str, target: str, added: bool = False) -> str:
    """'imported 3 run(s) from omnisafe into omni.zarr; ...': what came in, what is means only, and (once)
    where saferl's D_norm+ differs from SafeRLEval's printed number."""
    line = f"imported {len(runs)} run(s) from {fmt} {'into' if not added else 'and added them to'} {target}"
    means = sum(1 for r in runs if r.means_only)
    if means:
        line += f"; {means} hold only means of several episodes (no V, D_norm+, tiers or CDFs from those)"
    from cube.io.importers import runs_without_violation

    no_violation = runs_without_violation(runs) if fmt == "saferl-eval" else 0
    if no_violation:
        line += (f"; {no_violation} run(s) have a final evaluation without a violating episode: their D_norm+ is 0 "
                 "(the paper's definition), which SafeRLEval's printed point estimate leaves out, so its D_norm+ "
                 "can be higher (docs/statistics.md)")
    return line
