"""``saferl-tui [PATH]``: open a results cube in the explorer (the bundled demo cube without PATH)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from cube.compute import Progress, resolve_address, scheduler_context
from cube.render.viewfile import VIEW_ALIASES, VIEW_KINDS, ViewFile, read_view
from cube.selection import check_statistics_arguments, parse_selection
from cube.stats.metrics import SETTINGS
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
    p.add_argument("--boot", type=int, default=None, help="bootstrap replicates for the CIs (default 2000, "
                   "or the --view file's)")
    p.add_argument("--seed", type=int, default=None, help="bootstrap random seed (default 0, or the --view file's)")
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
    links = p.add_argument_group("open straight into a view (deep links; the flags of saferl report)")
    links.add_argument("--view", metavar="FILE", help="open a saved view (.saferl-view.toml, saved with S)")
    links.add_argument("--open", metavar="VIEW", dest="open_view",
                       help=f"open this view: {', '.join(VIEW_KINDS)}")
    links.add_argument("--algos", "--algo", dest="algos", help="comma-separated algorithms (default all)")
    links.add_argument("--tasks", "--task", dest="tasks", help="comma-separated tasks (default all)")
    links.add_argument("--bounds", "--bound", dest="bounds", help="comma-separated safety bounds (default all)")
    links.add_argument("--seeds", dest="seeds", help="seeds, e.g. 0-9 or 0,3,5 (default all)")
    links.add_argument("--iterates", help="training iterates: J or LO:HI inclusive (default all)")
    links.add_argument("--setting", choices=SETTINGS, help="the setting shown (default train)")
    serve = p.add_argument_group("serve the app to a browser (pip install 'saferl[serve]')")
    serve.add_argument("--serve", action="store_true", help="serve the TUI over HTTP (textual-serve) instead of "
                       "drawing it here; reach it through an SSH tunnel")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port to serve on (default 8000)")
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


def view_from_args(args: argparse.Namespace) -> ViewFile | None:
    """The view to open: ``--view FILE`` (read and checked: a bad file is one CubeError line), with
    ``--open`` and the selection flags over it; None when none of them is given."""
    from cube.errors import CubeError

    flags = (args.open_view, args.algos, args.tasks, args.bounds, args.seeds, args.iterates, args.setting)
    if args.view is None and all(f is None for f in flags):
        return None
    vf = read_view(args.view) if args.view is not None else None
    name = args.open_view or (vf.view if vf is not None else "summary")
    name = VIEW_ALIASES.get(name, name)
    if name not in VIEW_KINDS:
        raise CubeError(f"--open {args.open_view}: no such view; use one of {', '.join(VIEW_KINDS)}")
    sel = parse_selection(args.algos, args.tasks, args.bounds, args.seeds, args.iterates)
    base = vf or ViewFile(view=name)
    given = {k: getattr(sel, k) for k in ("algos", "tasks", "bounds", "seeds", "iterates")
             if getattr(sel, k) is not None}
    boot = {"boot": args.boot} if args.boot is not None else {}
    seed = {"rng_seed": args.seed} if args.seed is not None else {}
    return replace(base, view=name, setting=args.setting or base.setting, **given, **boot, **seed)


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
        view_file = view_from_args(args)
        if view_file is not None:  # the view's bootstrap unless the flags say otherwise
            args.boot, args.seed = view_file.boot, view_file.rng_seed
        args.boot = 2000 if args.boot is None else args.boot
        args.seed = 0 if args.seed is None else args.seed
        check_statistics_arguments(args.boot, 0.95, args.seed, seed_flag="--seed")
        check_follow_arguments(args.follow_interval, args.stall)
        if builder is None:
            check_cube_path(path)  # a missing path, a plain file, a folder that is no store: one line, exit 2
        if args.serve:
            from saferl_tui.serve import serve

            return serve(argv if argv is not None else sys.argv[1:], args.host, args.port)
        with ExitStack() as stack:
            stack.enter_context(scheduler_context(args.scheduler))
            app = build_app(path, export_dir=args.export_dir, boot=args.boot, rng_seed=args.seed,
                            demo_builder=builder, scheduler=resolve_address(args.scheduler),
                            exit_after_load=bool(os.environ.get(EXIT_AFTER_LOAD)), follow=args.follow,
                            follow_interval=args.follow_interval, stall_s=args.stall, view_file=view_file)
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
