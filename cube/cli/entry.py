"""The ``saferl`` command and its plugin mechanism.

Subcommands come from the entry-point group ``saferl.commands`` (pyproject.toml): each entry names a
``register(subparsers)`` function that adds its parsers and sets ``func`` to a ``run(args) -> int``.
This package registers ``validate``, ``demo`` and ``export`` (here) and ``report`` (``cube.cli.report``);
any installed package (the trainer, a third party) adds its own the same way, and this module never
names them. User errors raise ``CubeError`` and end as one ``error:`` line with exit 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from cube.errors import CubeError

COMMAND_GROUP = "saferl.commands"  # entry-point group of subcommand plugins

err_console = Console(stderr=True)


def progress_bar(console: Console | None = None) -> Progress:
    """The progress display used by every long CLI job."""
    console = console or err_console
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def _cmd_validate(args: argparse.Namespace) -> int:
    from cube.store.summary import describe
    from cube.store.validate import validate

    episode_counts: dict[str, int] = {}
    problems = validate(args.path, episode_counts)
    if problems:
        for problem in problems:
            print(f"{args.path}: {problem}", file=sys.stderr)
        print(f"{args.path}: INVALID ({len(problems)} problem(s))", file=sys.stderr)
        return 1
    Console().print(describe(args.path, episode_counts))
    print(f"{args.path}: valid saferl cube")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from cube.io.demo import make_demo_cube
    from cube.store.layout import staged_store

    # Written beside the target and swapped in only once complete (see `staged_store`).
    with staged_store(args.path, force=args.force) as staging, progress_bar() as bar:
        task = bar.add_task("writing synthetic cube", total=None)

        def report(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        make_demo_cube(
            staging,
            seed=args.seed,
            n_seeds=args.seeds,
            n_iterates=args.iterates,
            n_train_episodes=args.episodes,
            n_eval_episodes=args.eval_episodes,
            progress=report,
        )
    print(f"wrote SYNTHETIC demo cube to {args.path}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from cube.store.layout import export_netcdf

    out = export_netcdf(args.path, args.out)
    print(f"wrote {out}")
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    """Add the cube's own subcommands: validate, demo, export."""
    p = sub.add_parser("validate", help="check a cube against the schema, one line per problem")
    p.add_argument("path", help="Zarr store directory or netCDF file")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("demo", help="write a synthetic demo cube shaped like the paper's experiment")
    p.add_argument("path", help="where to write the Zarr store")
    p.add_argument("--seed", type=int, default=0, help="random seed of the synthetic data (default 0)")
    p.add_argument("--seeds", type=_positive_int, default=10, help="training seeds per condition (default 10)")
    p.add_argument("--iterates", type=_positive_int, default=60, help="policy iterates (default 60)")
    p.add_argument("--episodes", type=_positive_int, default=256, help="training episodes per iterate (default 256)")
    p.add_argument("--eval-episodes", type=_positive_int, default=100, help="final evaluation episodes (default 100)")
    p.add_argument("--force", action="store_true", help="replace an existing store at PATH")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("export", help="export a cube to a netCDF file")
    p.add_argument("path", help="Zarr store directory")
    p.add_argument("out", help="netCDF file to write (.nc)")
    p.set_defaults(func=_cmd_export)


def command_plugins() -> list[EntryPoint]:
    """The installed ``saferl.commands`` entry points, ordered by name (one per registering module)."""
    return sorted(entry_points(group=COMMAND_GROUP), key=lambda ep: ep.name)


def build_parser(plugins: Sequence[EntryPoint] | None = None) -> argparse.ArgumentParser:
    """The ``saferl`` parser with the subcommands of every plugin (default: the installed ones).

    A plugin that fails to load is reported in one line and left out, so the other commands still work.
    """
    parser = argparse.ArgumentParser(
        prog="saferl", description="Evaluation suite for safe RL: results cube, paper metrics, training."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    plugins = command_plugins() if plugins is None else plugins
    if not plugins:
        raise CubeError(f"no saferl commands are installed (entry-point group {COMMAND_GROUP!r} is empty): "
                        "install the package, e.g. pip install -e .")
    for ep in plugins:
        try:
            ep.load()(sub)
        except Exception as exc:  # a broken plugin must not take the other commands down
            err_console.print(f"warning: saferl command plugin {ep.name!r} ({ep.value}) could not be loaded: "
                              f"{type(exc).__name__}: {exc}", highlight=False, markup=False, soft_wrap=True)
    return parser


def error_line(exc: BaseException) -> str:
    """One line for a failure of a command: what went wrong, with which path, and what to do.

    CubeError already carries such a line; OS errors (permissions, a full disk, a missing folder) name
    the path and the remedy; anything else becomes its type and first line, so no traceback reaches the
    user (set SAFERL_DEBUG=1 to see it)."""
    if isinstance(exc, CubeError):
        return str(exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        what = exc.strerror or str(exc) or type(exc).__name__
        remedy = {28: "free some space and run the command again",
                  13: "check the permissions of the path or choose another one",
                  30: "the file system is read-only: choose another path"}.get(exc.errno or 0,
                                                                                "check the path and try again")
        return f"{where}{what}; {remedy}"
    first = (str(exc).splitlines() or [""])[0][:200]
    return f"unexpected {type(exc).__name__}: {first} (run with SAFERL_DEBUG=1 for the traceback)"


def _explained(exc: BaseException, path: str | None) -> BaseException:
    """A decode error of a store (a checksum mismatch, a damaged chunk) as a CubeError naming the chunk."""
    if isinstance(exc, CubeError | OSError) or path is None:
        return exc
    from cube.store.layout import unreadable_chunk

    try:
        where = unreadable_chunk(path)
    except Exception:  # noqa: BLE001 - the original error is the one to report then
        return exc
    if where is None:
        return exc
    return CubeError(f"{path}: {where}: restore that run from a copy or rerun it")


def print_error(exc: BaseException) -> None:
    """`error: <one line>` on stderr, the message printed literally (no rich markup in user text).

    zarr's event loop may still hold read tasks that the error cut short; asyncio would log "Task was
    destroyed but it is pending!" for each at exit, after our one line: those are silenced."""
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    err_console.print(Text.assemble(("error:", "bold red"), " ", error_line(exc)), highlight=False, soft_wrap=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``saferl`` console script: the one error boundary of every subcommand."""
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    warnings.filterwarnings("ignore", module="zarr")
    try:
        parser = build_parser()
    except CubeError as exc:
        print_error(exc)
        return 2
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    except Exception as exc:  # the boundary: one line, never a traceback (unless asked for)
        if os.environ.get("SAFERL_DEBUG"):
            raise
        print_error(_explained(exc, getattr(args, "path", None)))
        return 2


if __name__ == "__main__":
    sys.exit(main())
