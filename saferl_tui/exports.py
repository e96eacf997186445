"""What the TUI writes for a user, as pure functions (no widgets): file names that never overwrite. The
tables and figure of a view, and the selection recorded inside each file, are `cube.render.views`' (the
one code path of the TUI's exports and ``saferl render``), re-exported here.
"""

from __future__ import annotations

import os
from pathlib import Path

from cube.render.views import (
    FIGURE_KINDS,
    Files,
    figure_for_view,
    figure_kind,
    rendered_files,
    selection_comment,
    table_files,
    with_selection,
)

VIEW_KINDS = FIGURE_KINDS
"""The figure kind drawn for a TUI view id (`cube.render.views.FIGURE_KINDS`)."""

__all__ = ["VIEW_KINDS", "Files", "figure_for_view", "figure_kind", "free_names", "rendered_files",
           "selection_comment", "table_files", "with_selection"]


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


