"""``saferl render VIEW... [--cube CUBE] (--out FILE | --out-dir DIR)``: saved views (``*.saferl-view.toml``,
saved in saferl-tui with S) rendered with no terminal, byte for byte what the TUI's export of the same view
writes (`cube.render.views`, the one code path).

  saferl render views/cdf_goal.saferl-view.toml --out cdf.pdf
  saferl render views/*.saferl-view.toml --cube results.zarr --out-dir paper/   # every table and figure

Tables: .csv .json .md .tex .txt; figures: .pdf .png .svg. A cube written since the view was saved (its
fingerprint differs) is said in one line and rendered anyway, unless --strict.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cube.errors import CubeError

DEFAULT_FORMATS = "csv,tex,pdf"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `render` subcommand (matplotlib only when a figure is made)."""
    p = subparsers.add_parser("render", help="saved TUI views (.saferl-view.toml) as tables and figures, headless",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("views", nargs="+", metavar="VIEW", help="view files (.saferl-view.toml)")
    p.add_argument("--cube", help="the results cube (default: the cube each view was saved from)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="FILE",
                       help="the file to write (one view): .csv .json .md .tex .txt (table) or .pdf .png .svg (figure)")
    where.add_argument("--out-dir", metavar="DIR", help="write each view as <name>.<format> here")
    p.add_argument("--formats", default=DEFAULT_FORMATS,
                   help=f"--out-dir: comma-separated formats of each view (default {DEFAULT_FORMATS}; a view "
                        "without a table or figure skips that format)")
    p.add_argument("--strict", action="store_true", help="refuse a view whose cube changed since it was saved")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Render every view; returns the exit code."""
    from cube.cli.console import err_console
    from cube.render.viewfile import SUFFIX, read_view
    from cube.render.views import FIGURE_FORMATS, TABLE_FORMATS

    if args.out is not None and len(args.views) > 1:
        raise CubeError(f"--out names one file but {len(args.views)} views were given: use --out-dir DIR")
    formats = [f.strip().lstrip(".").lower() for f in args.formats.split(",") if f.strip()]
    known = (*TABLE_FORMATS, *FIGURE_FORMATS)
    bad = [f for f in formats if f not in known]
    if bad:
        raise CubeError(f"--formats {bad[0]!r} is unknown: use {', '.join(known)}")
    views = [(path, read_view(path)) for path in args.views]  # every file checked before anything is written
    written: list[Path] = []
    for path, view in views:
        if args.out is not None:
            targets = [Path(args.out)]
        else:
            name = Path(path).name
            stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else Path(path).stem
            targets = [Path(args.out_dir) / f"{stem}.{f}" for f in formats]
        written += render_one(path, view, args.cube, targets, strict=args.strict, explicit=args.out is not None,
                              say=lambda line: err_console.print(line, markup=False, highlight=False, soft_wrap=True))
    for p in written:
        print(p)
    return 0


def render_one(path: str, view, cube: str | None, targets: list[Path], *, strict: bool, explicit: bool,
               say) -> list[Path]:
    """Render one view (`ViewFile`) to each target file; ``say(line)`` gets the lines about the cube."""
    from cube.outputs import write_text
    from cube.render.views import (
        FIGURE_KINDS,
        TABLE_FORMATS,
        TABLE_VIEWS,
        export_text,
        render_time,
        view_data,
        view_figure,
    )
    from cube.render.views import view_tables as tables_of
    from cube.stats.suffstats import load_suffstats_at
    from cube.store.fingerprint import cube_fingerprint
    from cube.store.read import check_cube_path, open_cube

    source = cube or view.cube
    if source is None:
        raise CubeError(f"{path}: the view names no cube: give --cube CUBE")
    check_cube_path(source)
    ds = open_cube(source)
    now = cube_fingerprint(ds, source)
    if view.fingerprint is not None and view.fingerprint != now:
        if strict:
            raise CubeError(f"{path}: the cube changed since the view was saved (fingerprint {view.fingerprint}, "
                            f"now {now}): --strict refuses; save the view again or leave --strict out")
        say(f"{path}: the cube changed since the view was saved (fingerprint {view.fingerprint}, now {now}): "
            "rendering it as it is now")
    labels = ([str(a) for a in ds["algo"].values], [str(t) for t in ds["task"].values],
              [float(b) for b in ds["bound"].values], [int(s) for s in ds["seed"].values])
    fitted, missing = view.against(*(tuple(x) for x in labels))
    if missing:
        say(f"{path}: {missing}")
    if fitted.not_safe is None:  # as the TUI: the cube's unconstrained algorithms are never "best"
        from dataclasses import replace

        from cube.stats import not_safe

        fitted = replace(fitted, not_safe=tuple(not_safe(tuple(labels[0]))))
    ss, _ = load_suffstats_at(source)
    out: list[Path] = []
    data = None
    for target in targets:
        ext = target.suffix.lstrip(".").lower()
        if ext in TABLE_FORMATS:
            if fitted.view not in TABLE_VIEWS:
                if explicit:
                    raise CubeError(f"{path}: the {fitted.view} view has no headless table: write a figure "
                                    f"(.pdf, .png, .svg) or use one of {', '.join(TABLE_VIEWS)}")
                continue
            if data is None:
                reads_runs = fitted.view in ("histograms", "curves", "runs")
                raw = open_cube(source, check=False, lazy=False) if reads_runs else None
                data = view_data(fitted, ss, raw, path=source, now=render_time())
            try:
                files = tables_of(fitted, data, (ext,))
            except CubeError:
                if explicit:
                    raise
                continue
            main_what = files[0][0].rsplit(".", 1)[0]
            for name, text in files:
                what = name.rsplit(".", 1)[0]
                dest = target if what == main_what else target.with_name(
                    f"{target.stem}{what[len(main_what):]}{target.suffix}")
                dest.parent.mkdir(parents=True, exist_ok=True)
                out.append(write_text(dest, export_text(fitted, name, text, str(source))))
        elif ext in ("pdf", "png", "svg"):
            if fitted.view not in FIGURE_KINDS:
                if explicit:
                    raise CubeError(f"{path}: the {fitted.view} view has no figure")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            out.append(view_figure(fitted, source, target, ss=ss))
        else:
            raise CubeError(f"cannot write {target}: use .csv .json .md .tex .txt (table) or .pdf .png .svg (figure)")
    return out
