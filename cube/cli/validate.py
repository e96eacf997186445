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
    from cube.store.location import redact
    from cube.store.summary import describe
    from cube.store.validate import validate

    episode_counts: dict[str, int] = {}
    notes: list[str] = []
    problems = validate(args.path, episode_counts, notes)
    shown = redact(args.path)  # a URL without user info or query: no secret is printed
    for note in notes:
        print_warning(f"{shown}: {note}")
    if problems:
        for problem in problems:
            print(f"{shown}: {problem}", file=sys.stderr)
        print(f"{shown}: INVALID ({len(problems)} problem(s))", file=sys.stderr)
        return 1
    Console().print(describe(args.path, episode_counts))
    print(f"{shown}: valid saferl cube")
    return 0
