"""``saferl-tui [PATH]``: open a results cube in the explorer (the bundled demo cube without PATH)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from cube.compute import Progress, resolve_address, scheduler_context
from cube.selection import check_statistics_arguments
from cube.store.runstatus import STALL_S
from saferl_tui.app import build_app
from saferl_tui.follow import DEFAULT_INTERVAL_S

EXIT_AFTER_LOAD = "SAFERL_TUI_EXIT_AFTER_LOAD"
"""Set (to anything) to exit once the first Summary is shown: README's `make demo` runs in CI this way."""


def demo_path() -> Path:
    """Where the demo cube lives: ./demo/results.zarr if present, else ~/.cache/saferl/demo.zarr."""
    local = Path("demo") / "results.zarr"
    if local.exists():
        return local
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "saferl" / "demo.zarr"
    return cache


def build_demo(path: str, progress: Progress) -> None:
    """Create the default synthetic demo cube at ``path`` (parents created).

    Written under a temporary name and renamed when complete, so an interrupted build never leaves a
    half-written cube at ``path``.
    """
    from cube.io.demo import make_demo_cube

    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_name(final.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    make_demo_cube(partial, seed=0, progress=progress)
    os.replace(partial, final)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="saferl-tui",
        description="Explore a saferl results cube: Summary, Conditions, CDF, Curves, Histograms, Runs, Learning, "
        "Status; follows a store being written. "
        "Press ? inside the app for every key.",
    )
    p.add_argument("path", nargs="?", help="results cube (.zarr directory or .nc file); default: the demo cube")
    p.add_argument("--export-dir", default=None, help="where e (CSV + LaTeX), s (SVG) and P (PDF) write "
                   "(default: <cube>-figures/ next to the cube)")
    p.add_argument("--boot", type=int, default=2000, help="bootstrap replicates for the CIs (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap random seed (default 0)")
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="run the reductions on this dask.distributed scheduler "
        "(default: $DASK_SCHEDULER_ADDRESS, else local threads)",
    )
    p.add_argument("--follow", dest="follow", action="store_true", default=None,
                   help="follow the store as it is written (default: on when some run is partial or "
                   "pending; w toggles)")
    p.add_argument("--no-follow", dest="follow", action="store_false", help="never follow the store")
    p.add_argument("--follow-interval", type=float, default=DEFAULT_INTERVAL_S, metavar="SECONDS",
                   help=f"seconds between two polls of a followed store (default {DEFAULT_INTERVAL_S:g})")
    p.add_argument("--stall", type=float, default=STALL_S, metavar="SECONDS",
                   help=f"Status view: a running run that wrote nothing for this long is stalled "
                   f"(default {STALL_S:g})")
    return p


def check_follow_arguments(interval: float, stall: float) -> None:
    """One clear line (CubeError) for a follow interval or stall time that is not a positive number."""
    import math

    from cube.errors import CubeError

    for flag, value in (("--follow-interval", interval), ("--stall", stall)):
        if not math.isfinite(value) or value <= 0:
            raise CubeError(f"{flag} must be a positive number of seconds, not {value:g}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``saferl-tui`` console script: one error boundary, one line per failure."""
    from cube.cli.console import drain_zarr_io_at_exit, print_error
    from cube.store.location import is_remote, local_path
    from cube.store.read import check_cube_path

    args = parser().parse_args(argv)
    if args.path is None:
        path, builder = demo_path(), build_demo
    else:
        path, builder = (args.path if is_remote(args.path) else Path(local_path(args.path))), None
    drain_zarr_io_at_exit()  # reads a closing app left in zarr's loop end before zarr's exit hook closes it
    try:
        check_statistics_arguments(args.boot, 0.95, args.seed, seed_flag="--seed")
        check_follow_arguments(args.follow_interval, args.stall)
        if builder is None:
            check_cube_path(path)  # a missing path, a plain file, a folder that is no store: one line, exit 2
        with ExitStack() as stack:
            stack.enter_context(scheduler_context(args.scheduler))
            app = build_app(path, export_dir=args.export_dir, boot=args.boot, rng_seed=args.seed,
                            demo_builder=builder, scheduler=resolve_address(args.scheduler),
                            exit_after_load=bool(os.environ.get(EXIT_AFTER_LOAD)), follow=args.follow,
                            follow_interval=args.follow_interval, stall_s=args.stall)
            shown = app.run()
        if shown:
            print(f"saferl-tui: {shown} ({EXIT_AFTER_LOAD} is set)")
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the boundary: one line, never a traceback (unless asked for)
        if os.environ.get("SAFERL_DEBUG"):
            raise
        print_error(exc)
        return 2
    return int(app.return_code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
