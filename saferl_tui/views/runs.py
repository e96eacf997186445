"""The Runs view (key 6): the run manifest (status, env steps, iterates, config) of every selected run."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from saferl_tui.model import CubeModel, UISelection
from saferl_tui.views.base import Files, ResultView, add_columns, table_files

STATUS_STYLE = {"complete": "green", "partial": "yellow", "pending": "red"}


class RunsView(ResultView):
    """The run manifest: status, env steps, iterates and config of every selected run."""

    VIEW_ID = "runs"
    TITLE = "Runs"
    KEY = "6"
    HEADER = ("algo", "task", "bound", "seed", "status", "steps", "iterates", "config")

    def compose_body(self) -> ComposeResult:
        yield Static("", id="runs-title", classes="table-title")
        yield DataTable(id="runs-table", zebra_stripes=True, cursor_type="row")

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> list[dict]:
        return model.runs(sel)

    def render_data(self, rows: list[dict]) -> None:
        table = self.query_one("#runs-table", DataTable)
        table.clear(columns=True)
        all_cells = [[Text(r["algo"]), Text(r["task"]), Text(f"{r['bound']:g}"), Text(str(r["seed"])),
                      Text(r["status"], style=STATUS_STYLE.get(r["status"], "")),
                      Text(_steps(r["steps"]), justify="right"), Text(str(r["iterates"]), justify="right"),
                      Text(r["config"])] for r in rows]
        add_columns(table, [(h, h) for h in self.HEADER], all_cells)
        for i, cells in enumerate(all_cells):
            table.add_row(*cells, key=str(i))
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        self.query_one("#runs-title", Static).update(
            f"{len(rows)} runs · " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))

    def export_tables(self) -> Files:
        if self.data is None:
            return []
        rows = [[r[h] for h in self.HEADER] for r in self.data]
        return table_files("saferl_runs", self.HEADER, rows, "Run manifest")


def _steps(v: float) -> str:
    """Env steps as shown: 1.2M from a million on, else with thousands separators ("–" for NaN)."""
    if not math.isfinite(v):
        return "–"
    return f"{v / 1e6:.1f}M" if v >= 1e6 else f"{v:,.0f}"
