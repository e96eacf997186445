"""`saferl migrate CUBE`: rewrite a store of an earlier chunk layout into the current one, atomically
(`cube.store.migrate`), with a progress bar."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("migrate", help="rewrite a store of an earlier chunk layout into the current one "
                                       "(absent evaluation episodes stop costing space and time)")
    p.add_argument("path", help="the local Zarr store to rewrite in place (atomically: a crash leaves it as it was)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cube.cli.console import progress_bar
    from cube.store.location import refuse_url
    from cube.store.migrate import migrate_store, needs_migration

    refuse_url(args.path, "migrate")
    if not needs_migration(args.path):
        print(f"{args.path} is already in the current layout; nothing to do")
        return 0
    with progress_bar() as bar:
        task = bar.add_task("rewriting runs", total=None)
        out = migrate_store(args.path, progress=lambda done, total: bar.update(task, completed=done, total=total))
    if out.already:
        print(f"{out.path} is already in the current layout; nothing to do")
    else:
        print(f"migrated {out.path}: {out.runs:,} runs rewritten into the current layout (statistics cache dropped)")
    return 0
