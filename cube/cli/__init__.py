"""The `saferl` command line: the entry point and one module per command."""

from cube.cli.entry import main, register

__all__ = ["main", "register"]
