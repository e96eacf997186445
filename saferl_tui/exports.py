"""What the TUI writes for a user, as pure functions (no widgets): file names that never overwrite, the
selection recorded inside each file, a view's tables as CSV + LaTeX, and the paper-style figure of a view.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import xarray as xr

from cube.errors import CubeError
from cube.outputs import figures_folder
from cube.render import text as export
from cube.render.figures import save_figure
from cube.render.maker import FigureMaker, PlotOptions, safe_name
from cube.render.style import KINDS, require_matplotlib

if TYPE_CHECKING:  # pragma: no cover
    from cube.selection import Selection
    from saferl_tui.selection import UISelection

Files = list[tuple[str, str]]
"""(file name, text) pairs that a view exports: ``{what}.{csv,tex}``; the screen adds the selection tag,
a counter when the name is taken, and the selection as a comment line."""


# ---------------------------------------------------------------------------------------- file names
def selection_comment(meta: dict) -> str:
    """The selection as one line of JSON, safe inside CSV (#), LaTeX (%) and XML (<!-- -->) comments."""
    return json.dumps(meta, separators=(",", ":")).replace("--", "-\\u002d")


def with_selection(name: str, text: str, meta: dict) -> str:
    """An exported file's text with the selection recorded: a comment line first (CSV #, LaTeX %), a
    ``saferl_tui_selection`` field (JSON), or an XML comment after the opening tag (SVG)."""
    line = selection_comment(meta)
    ext = name.rsplit(".", 1)[-1]
    if ext == "csv":
        return f"# saferl-tui selection: {line}\n{text}"
    if ext == "tex":
        return f"% saferl-tui selection: {line}\n{text}"
    if ext == "json":
        obj = json.loads(text)
        return json.dumps({"saferl_tui_selection": meta, **obj} if isinstance(obj, dict) else
                          {"saferl_tui_selection": meta, "data": obj}, indent=1)
    if ext == "svg":
        end = text.find(">", text.find("<svg")) + 1
        return f"{text[:end]}\n<!-- saferl-tui selection: {line} -->{text[end:]}"
    return text


def free_names(out_dir: Path, names: list[str]) -> list[Path]:
    """``names`` in ``out_dir``, all with the same counter (-2, -3, ...) when any of them exists: an
    export never overwrites a file and its CSV and LaTeX keep matching names."""
    k = 1
    while True:
        suffix = "" if k == 1 else f"-{k}"
        paths = []
        for n in names:
            stem, _, ext = n.rpartition(".")
            paths.append(out_dir / f"{stem}{suffix}.{ext}")
        if not any(os.path.lexists(p) for p in paths):  # a dangling link takes a name too
            return paths
        k += 1


# ----------------------------------------------------------------------------------------- tables
def rendered_files(what: str, kind: str, obj: xr.Dataset, sel: UISelection) -> Files:
    """``cube.render.text.render`` of a statistics table (a kind of `cube.render.text.KINDS`) as CSV and
    LaTeX, "best" chosen as on screen: never a not-safe algorithm (the TUI's baseline is only what the
    deltas compare against, so it is not left out of "best" here)."""
    return [(f"{what}.{ext}", export.render(obj, kind=kind, fmt=fmt, not_best=sel.not_safe))
            for ext, fmt in (("csv", "csv"), ("tex", "latex"))]


def table_files(what: str, header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str) -> Files:
    """A plain table (header and rows) as CSV and LaTeX (``cube.render.text.table_csv`` / ``table_latex``)."""
    return [(f"{what}.csv", export.table_csv(header, rows)),
            (f"{what}.tex", export.table_latex(header, rows, caption))]


# ----------------------------------------------------------------------------------------- for the TUI
VIEW_KINDS = {"summary": "intervals", "conditions": "intervals", "cdf": "cdf", "curves": "curves",
              "histograms": "hist", "runs": "curves", "aggregate-curve": "aggregate-curve",
              "learning": "aggregate-curve", "profile": "profile", "front": "front"}


def figure_kind(view: str) -> str:
    """The figure kind drawn for a TUI view id (or a kind given as is)."""
    return VIEW_KINDS.get(view, view)


def figure_for_view(view: str, source: str | os.PathLike | xr.Dataset, selection: Selection | None = None,
                    out_path: str | os.PathLike | None = None, *, ss: xr.Dataset | None = None,
                    condition: tuple[str, float] | None = None, options: PlotOptions | None = None) -> Path:
    """Write the figure of a TUI view and return where it went.

    view: a TUI view id (summary, conditions -> intervals; cdf; curves, runs -> curves; histograms ->
    hist; learning -> aggregate-curve; profile; front) or a figure kind. source: the cube's path (or
    Dataset, then `out_path` is needed). ss: the TUI's sufficient statistics (unselected), so nothing is
    read again. condition: (task, bound) of a per-condition view. out_path: default
    `<cube>.figures/<view>[_<task>_d<bound>].pdf` next to the cube. Raises CubeError (one line) without
    matplotlib or data.
    """
    require_matplotlib()
    kind = figure_kind(view)
    if kind not in KINDS:
        raise CubeError(f"no figure for view {view!r}: views with figures are {', '.join(sorted(VIEW_KINDS))}")
    maker = FigureMaker(source, selection, options or PlotOptions(), ss=ss)
    task, bound = condition if condition is not None else (None, None)
    if kind not in ("curves", "hist"):
        task = bound = None
    if out_path is None:
        if isinstance(source, xr.Dataset):
            raise CubeError("give out_path when the cube is not a path")
        folder = figures_folder(source)
        folder.mkdir(parents=True, exist_ok=True)
        suffix = f"_{safe_name(task)}_d{bound:g}" if task is not None and bound is not None else ""
        out_path = folder / f"{kind.replace('-', '_')}{suffix}.pdf"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = maker.figure(kind, task=task, bound=bound)
    return save_figure(fig, out_path)
