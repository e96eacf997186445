"""The Runs view (key 6): the run manifest (status, env steps, iterates, config) of every selected run,
incomplete runs first, sortable (> / r) and filterable (/ status:partial algo:ppo task:goal); under the
title, the runs' conventions (`cube.io.conventions`), or the one line saying in which they differ.
"""

from __future__ import annotations

import math
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import DataTable, Static

from cube.errors import CubeError
from cube.io.conventions import conventions_of, conventions_text, difference_line
from cube.render.viewrows import RUN_HEADER, RUN_STATUS_ORDER, run_files, shown_runs
from cube.store.read import read_manifests
from saferl_tui.exports import Files
from saferl_tui.model import CubeModel
from saferl_tui.selection import UISelection
from saferl_tui.views.base import ResultView
from saferl_tui.views.format import rich_color
from saferl_tui.views.table import SORT_BINDINGS, NavTable, SortableTable, add_columns

STATUS_STYLE = {"complete": "green", "partial": "bold dark_orange", "pending": "bold red"}
STATUS_ORDER = RUN_STATUS_ORDER
"""Default order: the runs that need attention first."""


class RunsView(SortableTable, ResultView):
    """The run manifest: status, env steps, iterates and config of every selected run."""

    VIEW_ID = "runs"
    TITLE = "Runs"
    KEY = "6"
    FILTERABLE = True
    HEADER = RUN_HEADER
    SORT_KEYS = HEADER
    BINDINGS: ClassVar[list[BindingType]] = list(SORT_BINDINGS)

    def __init__(self) -> None:
        super().__init__()
        self.sort_key = "status"
        self.sort_desc = False

    def compose_body(self) -> ComposeResult:
        yield Static("", id="runs-title", classes="table-title")
        yield NavTable(id="runs-table", zebra_stripes=True, cursor_type="row")

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> list[dict]:
        return _with_conventions(model.path, model.runs(sel))

    def describe_params(self) -> dict:
        return {"sort": self.sort_key, "descending": self.sort_desc, "filter": self.filter_text}

    def shown_rows(self) -> list[dict]:
        """The rows on screen: filtered, then sorted (status: incomplete first; ties in cube order)."""
        return shown_runs(self.data or [], self.sort_key, self.sort_desc, self.filter_text)

    def render_data(self, rows: list[dict]) -> None:
        sel = self.selection
        assert sel is not None
        table = self.query_one("#runs-table", NavTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        colors = self.colors_of(sel.algos)
        shown = self.shown_rows()
        all_cells = [[Text(r["algo"], style=rich_color(colors[r["algo"]]) if r["algo"] in colors else ""),
                      Text(r["task"]), Text(f"{r['bound']:g}"), Text(str(r["seed"])),
                      Text(r["status"], style=STATUS_STYLE.get(r["status"], "")),
                      Text(_steps(r["steps"]), justify="right"), Text(str(r["iterates"]), justify="right"),
                      Text(r["config"])] for r in shown]
        labels = [h + ((" ▼" if self.sort_desc else " ▲") if h == self.sort_key else "") for h in self.HEADER]
        add_columns(table, list(zip(labels, self.HEADER, strict=True)), all_cells)
        for i, cells in enumerate(all_cells):
            table.add_row(*cells, key=str(i))
        if table.row_count:
            table.move_cursor(row=min(cursor, table.row_count - 1))
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        title = Text(f"{len(rows)} runs · ")
        for i, (k, v) in enumerate(sorted(counts.items(), key=lambda kv: STATUS_ORDER.get(kv[0], 2))):
            title.append(", " if i else "")
            title.append(f"{k}: {v}", style=STATUS_STYLE.get(k, ""))
        title.append(f" · sorted by {self.sort_key} (> next, r reverse) · / filters (status:partial algo:ppo)"
                     f"{self.filter_suffix(len(shown), len(rows))}")
        manifests = [r["manifest"] for r in rows if r.get("manifest") is not None and r["status"] != "pending"]
        if manifests:
            differ = difference_line(manifests)
            title.append("\n" + (differ or "conventions: " + conventions_text(conventions_of(manifests[0]))),
                         style="bold dark_orange" if differ else "")
        self.query_one("#runs-title", Static).update(title)

    def view_options(self) -> dict:
        return {**super().view_options(), "condition": self.figure_condition()}

    def figure_condition(self) -> tuple[str, float] | None:
        """The highlighted run's (task, bound): its curves, not every condition's (a figure a page long)."""
        rows = self.shown_rows()
        table = self.query_one("#runs-table", DataTable)
        if not rows or not 0 <= table.cursor_row < len(rows):
            return None
        return str(rows[table.cursor_row]["task"]), float(rows[table.cursor_row]["bound"])

    def export_tables(self) -> Files:
        return run_files(self.shown_rows()) if self.data is not None else []


def _with_conventions(path: str, rows: list[dict]) -> list[dict]:
    """The rows with each run's stored manifest (`manifest`: its conventions are read from it); rows of a
    cube without manifests (a netCDF export) are returned as they are."""
    try:
        stored = {(m["algo"], m["task"], float(m["bound"]), int(m["seed"])): m for m in read_manifests(path)}
    except (CubeError, OSError, KeyError, ValueError):
        return rows
    return [{**r, "manifest": stored.get((r["algo"], r["task"], r["bound"], r["seed"]))} for r in rows]


def _steps(v: float) -> str:
    """Env steps as shown: 1.2M from a million on, else with thousands separators ("–" for NaN)."""
    if not math.isfinite(v):
        return "–"
    return f"{v / 1e6:.1f}M" if v >= 1e6 else f"{v:,.0f}"
