"""The ``saferl`` command and its plugin mechanism.

Subcommands come from the entry-point group ``saferl.commands`` (pyproject.toml): each entry names a
``register(subparsers)`` function that adds its parsers and sets ``func`` to a ``run(args) -> int``.
This package registers ``validate``, ``demo``, ``export`` and ``status`` (here) and ``report`` (``cube.cli.report``);
any installed package (the trainer, a third party) adds its own the same way, and this module never
names them. User errors raise ``CubeError`` and end as one ``error:`` line with exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from importlib.metadata import EntryPoint, entry_points

from cube.cli.console import err_console, print_error, show_cube_warnings
from cube.errors import CubeError

COMMAND_GROUP = "saferl.commands"  # entry-point group of subcommand plugins


class CommandParser(argparse.ArgumentParser):
    """The parser of one subcommand. Its plugin may `defer` adding arguments that take modules to describe (the
    import formats: every importer and numpy) until the command is parsed or its help shown, so that ``saferl
    --help`` and the other commands load none of them."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.deferred: list[Callable[[argparse.ArgumentParser], None]] = []

    def defer(self, add_arguments: Callable[[argparse.ArgumentParser], None]) -> None:
        """Call `add_arguments(self)` before this parser first parses or formats its help or usage."""
        self.deferred.append(add_arguments)

    def complete(self) -> None:
        """Add the deferred arguments now (once)."""
        while self.deferred:
            self.deferred.pop(0)(self)

    def parse_known_args(self, args=None, namespace=None):
        self.complete()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self.complete()
        return super().format_help()

    def format_usage(self) -> str:
        self.complete()
        return super().format_usage()


def register(sub: argparse._SubParsersAction) -> None:
    """Add the cube's own subcommands: validate, demo, export, status, publish (one module each)."""
    from cube.cli import demo, export, migrate, publish, status, validate

    for command in (validate, demo, export, status, publish, migrate):
        command.register(sub)


def command_plugins() -> list[EntryPoint]:
    """The installed ``saferl.commands`` entry points, ordered by name (one per registering module)."""
    return sorted(entry_points(group=COMMAND_GROUP), key=lambda ep: ep.name)


def build_parser(plugins: Sequence[EntryPoint] | None = None) -> argparse.ArgumentParser:
    """The ``saferl`` parser with the subcommands of every plugin (default: the installed ones).

    A plugin that fails to load is reported in one line and left out, so the other commands still work.
    """
    return _parser_and_commands(command_plugins() if plugins is None else plugins)[0]


def _parser_and_commands(plugins: Sequence[EntryPoint]) -> tuple[argparse.ArgumentParser, set[str]]:
    """`build_parser` of `plugins`, and the names of the subcommands they registered."""
    parser = argparse.ArgumentParser(
        prog="saferl", description="Evaluation suite for safe RL: results cube, paper metrics, training."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=CommandParser)
    if not plugins:
        raise CubeError(f"no saferl commands are installed (entry-point group {COMMAND_GROUP!r} is empty): "
                        "install the package, e.g. pip install -e .")
    for ep in plugins:
        try:
            ep.load()(sub)
        except Exception as exc:  # a broken plugin must not take the other commands down
            err_console.print(f"warning: saferl command plugin {ep.name!r} ({ep.value}) could not be loaded: "
                              f"{type(exc).__name__}: {exc}", highlight=False, markup=False, soft_wrap=True)
    return parser, set(sub.choices)


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser `main` parses `argv` with: only the plugin named after the command where that plugin registers
    it (``saferl report`` loads no trainer, plotter or importer: 0.2 s of every such command's start-up); every
    plugin otherwise (``saferl --help``, a mistyped command, a command its plugin registers under another name),
    so help and errors list every command."""
    plugins = command_plugins()
    command = argv[0] if argv else ""
    named = [ep for ep in plugins if ep.name == command]
    if named:
        parser, commands = _parser_and_commands(named)
        if command in commands:
            return parser
    return build_parser(plugins)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``saferl`` console script: the one error boundary of every subcommand."""
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    warnings.filterwarnings("ignore", module="zarr")
    show_cube_warnings()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = parser_for(argv)
    except CubeError as exc:
        print_error(exc)
        return 2
    args = parser.parse_args(argv)
    if isinstance(getattr(args, "path", None), str):
        from cube.store.location import local_path

        args.path = local_path(args.path)  # file:///x is the local store /x: its locks and seqlock apply
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    except Exception as exc:  # the boundary: one line, never a traceback (unless asked for)
        if os.environ.get("SAFERL_DEBUG"):
            raise
        print_error(exc)
        return 2


def console_main() -> int:
    """The ``saferl`` console script: `main` in a process tuned for large array work
    (`cube.compute.keep_freed_memory`, `cube.compute.one_blas_thread`), ended without the interpreter's
    teardown when the command said its work is done (`cube.cli.console.work_done`)."""
    from cube.cli.console import console_script_process, end_now
    from cube.compute import keep_freed_memory, one_blas_thread

    one_blas_thread()
    keep_freed_memory()
    console_script_process()
    code = main()
    end_now(code)  # a command whose work is done ends here, without the interpreter's teardown
    return code


if __name__ == "__main__":
    sys.exit(console_main())
