"""The Status view (key 8): every selected run of a store being written, as `saferl status` shows it
(`cube.store.runstatus`, the progress model of `cube.store.progress`): status (a trained run's phase:
compiling, training, evaluating, writing), iterates done of total, env steps, steps/s, ETA, host, SLURM job, time
since the last write and what needs attention (stalled, failed), runs that need attention first; sortable
(> / r) and filterable (/ status:running flags:stalled); totals per algorithm and task below.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import Static

from cube.render.viewrows import STATUS_HEADER, STATUS_ORDER, shown_statuses, status_files, status_row
from cube.store.progress import WINDOW
from cube.store.runstatus import STATUSES, totals, totals_text
from saferl_tui.exports import Files
from saferl_tui.model import CubeModel
from saferl_tui.selection import UISelection
from saferl_tui.views.base import ResultView
from saferl_tui.views.format import rich_color
from saferl_tui.views.table import SORT_BINDINGS, NavTable, SortableTable, add_columns

STATUS_STYLE = {"running": "bold cyan", "stopped": "bold dark_orange", "failed": "bold red", "pending": "dim",
                "complete": "green"}
ORDER = STATUS_ORDER
"""Default order: running, stopped, failed, pending, complete (the runs that need attention first)."""
HEADER = STATUS_HEADER
TOTALS_HEADER = ("algo", "task", "runs", *STATUSES, "stalled", "steps", "steps/s", "eta")


def _cells(row: dict[str, Any]) -> dict[str, str]:
    """A row as text (what the filter matches and the exports write)."""
    return row["text"]


class RunStatusView(SortableTable, ResultView):
    """Every selected run's status (iterate of total, steps/s, ETA, ...) and the totals per algorithm and task."""

    VIEW_ID = "status"
    TITLE = "Status"
    KEY = "8"
    FILTERABLE = True
    SORT_KEYS = HEADER
    BINDINGS: ClassVar[list[BindingType]] = list(SORT_BINDINGS)

    def __init__(self) -> None:
        super().__init__()
        self.sort_key = "status"
        self.sort_desc = False

    def compose_body(self) -> ComposeResult:
        yield Static("", id="status-title", classes="table-title")
        yield NavTable(id="status-table", zebra_stripes=True, cursor_type="row")
        yield Static("", id="status-totals-title", classes="table-title section-title")
        yield NavTable(id="status-totals", zebra_stripes=True, cursor_type="row")

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        runs, now = model.run_statuses(sel)
        return [status_row(r, now) for r in runs], totals(runs)

    def describe_params(self) -> dict:
        return {"sort": self.sort_key, "descending": self.sort_desc, "filter": self.filter_text}

    def shown_rows(self) -> list[dict[str, Any]]:
        """The rows on screen: filtered, then sorted (status: attention first; unknown values last)."""
        return shown_statuses((self.data or ([], []))[0], self.sort_key, self.sort_desc, self.filter_text)

    def render_data(self, data: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
        rows, groups = data
        sel = self.selection
        assert sel is not None
        table = self.query_one("#status-table", NavTable)
        cursor, scroll = table.cursor_row, table.scroll_offset
        table.clear(columns=True)
        colors = self.colors_of(sel.algos)
        shown = self.shown_rows()
        right = {"iterates", "steps", "steps/s", "eta", "last write"}
        all_cells = []
        for r in shown:
            text = _cells(r)
            style = {"algo": rich_color(colors[r["algo"]]) if r["algo"] in colors else "",
                     "status": STATUS_STYLE.get(r["status"], ""), "flags": "bold red"}
            all_cells.append([Text(text[h], style=style.get(h, ""), justify="right" if h in right else "left")
                              for h in HEADER])
        labels = [h + ((" ▼" if self.sort_desc else " ▲") if h == self.sort_key else "") for h in HEADER]
        add_columns(table, list(zip(labels, HEADER, strict=True)), all_cells)
        for i, cells in enumerate(all_cells):
            table.add_row(*cells, key=str(i))
        if table.row_count:
            table.move_cursor(row=min(cursor, table.row_count - 1), scroll=False)
        table.scroll_to(scroll.x, scroll.y, animate=False, immediate=True)
        self.query_one("#status-title", Static).update(self._title(rows, len(shown)))
        self._totals(groups)

    def _title(self, rows: list[dict[str, Any]], n_shown: int) -> Text:
        counts = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
        title = Text(f"{len(rows)} runs · ")
        parts = [(s, n) for s, n in counts.items() if n]
        for i, (s, n) in enumerate(parts):
            title.append(", " if i else "")
            title.append(f"{s}: {n}", style=STATUS_STYLE.get(s, ""))
        stalled = sum(bool(r["stalled"]) for r in rows)
        if stalled:
            title.append(f", stalled: {stalled}", style="bold red")
        title.append(f" · sorted by {self.sort_key} (> next, r reverse) · / filters (status:running)"
                     f"{self.filter_suffix(n_shown, len(rows))}")
        return title

    def _totals(self, groups: list[dict[str, Any]]) -> None:
        table = self.query_one("#status-totals", NavTable)
        table.clear(columns=True)
        cells = []
        for g in groups:
            text = totals_text(g)
            cells.append([Text(str(g["algo"])), Text(str(g["task"])), Text(text["runs"], justify="right"),
                          *[Text(text[s], justify="right", style=STATUS_STYLE[s] if g[s] else "dim") for s in STATUSES],
                          Text(text["stalled"], justify="right", style="bold red" if g["stalled"] else "dim"),
                          *[Text(text[k], justify="right") for k in ("env steps", "steps/s", "ETA")]])
        add_columns(table, [(h, h) for h in TOTALS_HEADER], cells)
        for i, row in enumerate(cells):
            table.add_row(*row, key=str(i))
        self.query_one("#status-totals-title", Static).update(
            Text(f"Totals per algorithm and task (steps/s: last {WINDOW} iterates, compile excluded)"))

    def table_data(self) -> list[dict[str, Any]] | None:
        return self.data[0] if self.data is not None else None

    def export_tables(self) -> Files:
        return status_files(self.shown_rows()) if self.data is not None else []
