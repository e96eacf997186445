"""The Conditions view (key 2): seed mean ± std per (algorithm, task, bound) with per-condition tiers
(paper tables 4-7), sortable by any column."""

from __future__ import annotations

import math
from typing import ClassVar

import xarray as xr
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from cube.metrics import METRIC, METRICS
from saferl_tui.model import CubeModel, UISelection
from saferl_tui.views.base import Files, ResultView, add_columns, fmt, fmt_tier, rendered_files, setting_title


class ConditionsView(ResultView):
    """Seed mean ± std per (algorithm, task, bound) with per-condition tiers (paper tables 4-7)."""

    VIEW_ID = "conditions"
    TITLE = "Conditions"
    KEY = "2"
    SORT_KEYS = ("algo", "task", "bound", *METRICS, "n_seeds", "tier")
    HEADS: ClassVar[dict[str, str]] = {"algo": "Algorithm", "task": "Task", "bound": "d", "n_seeds": "Seeds",
                                       "tier": "Tier"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "sort_next", "Sort column", id="conditions.sort"),
        Binding("O", "sort_reverse", "Reverse sort", id="conditions.reverse"),
    ]
    NARROW = 112
    """Below this width (columns): mean and ± std on two lines, no seeds column (counts in the title)."""

    def __init__(self) -> None:
        super().__init__()
        self.sort_key = "algo"
        self.sort_desc = False

    def compose_body(self) -> ComposeResult:
        yield Static("", id="conditions-title", classes="table-title")
        yield DataTable(id="conditions-table", zebra_stripes=True, cursor_type="row", header_height=2)

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> xr.Dataset:
        return model.conditions(sel, (sel.setting,))

    def rows(self) -> list[dict]:
        """Rows of the current setting as plain values, in the current sort order."""
        ct = self.data
        sel = self.selection
        assert ct is not None and sel is not None
        sub = ct.sel(setting=sel.setting)
        rows = []
        for a in sub["algo"].values:
            for t in sub["task"].values:
                for b in sub["bound"].values:
                    p = sub.sel(algo=a, task=t, bound=b)
                    row = {"algo": str(a), "task": str(t), "bound": float(b),
                           "n_seeds": int(p["n_seeds"]), "tier": float(p["tier"])}
                    for m in METRICS:
                        row[m] = float(p[f"{m}_mean"])
                        row[f"{m}_std"] = float(p[f"{m}_std"])
                    rows.append(row)

        def key(r: dict) -> tuple:
            v = r[self.sort_key]
            if isinstance(v, float) and not math.isfinite(v):
                return (1, 0.0)
            return (0, v)

        rows.sort(key=key, reverse=self.sort_desc)
        return rows

    def render_data(self, ct: xr.Dataset) -> None:
        sel = self.selection
        assert sel is not None
        narrow = self.layout_narrow()
        table = self.query_one("#conditions-table", DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        table.header_height = 1 if narrow else 2
        keys = [k for k in self.SORT_KEYS if not (narrow and k == "n_seeds")]
        labels = []
        for k in keys:
            label = self.HEADS.get(k) or (METRIC[k].label if narrow else f"{METRIC[k].label}\nmean ± std")
            labels.append(label + ((" ▼" if self.sort_desc else " ▲") if k == self.sort_key else ""))
        rows = self.rows()
        sep = "\n±" if narrow else " ± "
        all_cells = []
        for r in rows:
            dim = "dim" if r["algo"] == sel.baseline else ""
            cells = [Text(r["algo"], style=dim), Text(r["task"], style=dim), Text(f"{r['bound']:g}", style=dim)]
            cells += [Text(f"{fmt(r[m])}{sep}{fmt(r[m + '_std'])}", style=dim, justify="right") for m in METRICS]
            if not narrow:
                cells.append(Text(str(r["n_seeds"]), style=dim, justify="right"))
            cells.append(Text(fmt_tier(r["tier"]), style=dim, justify="right"))
            all_cells.append(cells)
        add_columns(table, list(zip(labels, keys, strict=True)), all_cells)
        for i, cells in enumerate(all_cells):
            table.add_row(*cells, key=str(i), height=2 if narrow else 1)
        if table.row_count:
            table.move_cursor(row=min(cursor, table.row_count - 1))
        seeds = sorted({r["n_seeds"] for r in rows})
        n_seeds = f" · seeds per condition: {seeds[0]}" + (f"–{seeds[-1]}" if len(seeds) > 1 else "") if seeds else ""
        self.query_one("#conditions-title", Static).update(
            f"{setting_title(sel, sel.setting)}: seed mean ± std per condition{n_seeds if narrow else ''}"
            f" · sorted by {self.sort_key} {'desc' if self.sort_desc else 'asc'} (o / O, or click a header)")

    def action_sort_next(self) -> None:
        """Sort by the next column."""
        i = self.SORT_KEYS.index(self.sort_key)
        self.sort_key = self.SORT_KEYS[(i + 1) % len(self.SORT_KEYS)]
        self.redraw()

    def action_sort_reverse(self) -> None:
        """Reverse the sort order."""
        self.sort_desc = not self.sort_desc
        self.redraw()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        if key == self.sort_key:
            self.sort_desc = not self.sort_desc
        else:
            self.sort_key, self.sort_desc = key, False
        self.redraw()

    def export_tables(self) -> Files:
        if self.data is None or self.selection is None:
            return []
        s = self.selection.setting
        return rendered_files(f"saferl_conditions_{s}", "conditions", self.data.sel(setting=[s]),
                              self.selection.baseline)
