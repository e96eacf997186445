"""`saferl publish CUBE DEST [--consolidate] [--partial]`: an immutable snapshot of a cube in a folder or at an
S3/GCS URL, and the command that reproduces Table 2 from it."""

from __future__ import annotations

import argparse
import shlex


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("publish", help="write an immutable snapshot of a cube to a folder or an s3:// / gs:// URL")
    p.add_argument("path", help="the local Zarr store to publish")
    p.add_argument("dest", help="a new folder, or a URL (s3://bucket/name.zarr, gs://...) where no store is yet")
    p.add_argument("--consolidate", action="store_true", default=True,
                   help="keep every array's metadata in the root zarr.json: opening it is one request (default; "
                        "needed over HTTP)")
    p.add_argument("--no-consolidate", dest="consolidate", action="store_false",
                   help="leave the metadata unconsolidated (readers then list the store: not over HTTP)")
    p.add_argument("--partial", action="store_true",
                   help="publish unfinished runs too (default: complete runs only)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cube.cli.console import err_console, progress_bar
    from cube.store.publish import publish_store

    with progress_bar() as bar:
        task = bar.add_task("publishing chunks", total=None)
        out = publish_store(args.path, args.dest, partial=args.partial, consolidate=args.consolidate,
                            progress=lambda done, total: bar.update(task, completed=done, total=total))
    for note in out.notes:
        err_console.print(note)
    kept = "every run" if out.runs == out.total else f"{out.runs} of {out.total} runs"
    print(f"published {kept} to {out.dest} (snapshot {out.snapshot})")
    print("reproduce Table 2 from it with:")
    print(f"  saferl report {shlex.quote(out.dest)} --format latex --style paper")
    return 0
