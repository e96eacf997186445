"""`saferl validate PATH`: check a cube against the contract, one line per problem (exit 1 if invalid)."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a cube against the schema, one line per problem")
    p.add_argument("path", help="Zarr store directory or netCDF file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cube.cli.console import print_warning
    from cube.store.summary import describe
    from cube.store.validate import validate

    episode_counts: dict[str, int] = {}
    notes: list[str] = []
    problems = validate(args.path, episode_counts, notes)
    for note in notes:
        print_warning(f"{args.path}: {note}")
    if problems:
        for problem in problems:
            print(f"{args.path}: {problem}", file=sys.stderr)
        print(f"{args.path}: INVALID ({len(problems)} problem(s))", file=sys.stderr)
        return 1
    Console().print(describe(args.path, episode_counts))
    print(f"{args.path}: valid saferl cube")
    return 0
