"""The table views' widgets: a DataTable with vim keys, column sizing, the `/` filter and sorting."""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Input

from cube.errors import CubeError
from cube.render.viewrows import parse_sort, sort_text


def add_columns(table: DataTable, columns: list[tuple[str | Text, str]], rows: list[list[Text]]) -> None:
    """Add columns sized to their widest line: DataTable's own measure under-sizes multi-line cells and
    labels (and not always the same way), which would truncate numbers."""
    for i, (label, key) in enumerate(columns):
        plain = label.plain if isinstance(label, Text) else label
        lines = [line for r in rows for line in r[i].plain.split("\n")] + plain.split("\n")
        table.add_column(label, key=key, width=max(cell_len(line) for line in lines))


# ======================================================================== tables
NAV_BINDINGS: list[BindingType] = [
    Binding("j", "cursor_down", "Down", show=False, id="table.down"),
    Binding("k", "cursor_up", "Up", show=False, id="table.up"),
    Binding("h", "scroll_left", "Left", show=False, id="table.left"),
    Binding("l", "scroll_right", "Right", show=False, id="table.right"),
    Binding("g,home", "scroll_top", "Top", show=False, id="table.top"),
    Binding("G,end", "scroll_bottom", "Bottom", show=False, id="table.bottom"),
]


class NavTable(DataTable):
    """A DataTable with vim keys: j / k rows, h / l columns, g / G first / last row."""

    BINDINGS: ClassVar[list[BindingType]] = NAV_BINDINGS

    def action_scroll_top(self) -> None:
        if self.row_count:
            self.move_cursor(row=0)
        self.scroll_home(animate=False)

    def action_scroll_bottom(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)
        self.scroll_end(animate=False)


class FilterInput(Input):
    """The ``/`` filter line of a table view: typing filters live, enter keeps the filter and returns to
    the table, esc clears it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "clear", "Clear filter", id="filter.clear")]

    def action_clear(self) -> None:
        """Clear the filter and return to the table."""
        self.value = ""
        self.post_message(self.Submitted(self, ""))


SORT_BINDINGS: list[BindingType] = [
    Binding("greater_than_sign", "sort_next", "Sort: next column", id="table.sort_next"),
    Binding("less_than_sign", "sort_prev", "Sort: previous column", show=False, id="table.sort_prev"),
    Binding("r", "sort_reverse", "Reverse sort", id="table.sort_reverse"),
]
"""Sorting keys shared by the table views (one meaning everywhere)."""


class SortableTable:
    """Mixin of a table view sorted by one of its SORT_KEYS: `>` / `<` the next / previous column, `r`
    reverses, a click on a column header sorts by it (again: reverses). The view sets `sort_key` and
    `sort_desc` in its constructor and redraws (`redraw`) from them."""

    SORT_KEYS: ClassVar[tuple[str, ...]] = ()
    sort_key: str
    sort_desc: bool
    filter_text: str

    def view_options(self) -> dict:
        """The sort (``"-steps"``: descending) and the filter, saved with the view."""
        return {"sort": sort_text(self.sort_key, self.sort_desc), "filter": self.filter_text or None}

    def apply_view_options(self, options: dict) -> None:
        """Take a saved sort and filter (a column the table lacks: the view's own sort)."""
        try:
            self.sort_key, self.sort_desc = parse_sort(options.get("sort"), self.SORT_KEYS, self.sort_key)
        except CubeError:
            pass
        if options.get("filter") is not None:
            self.filter_text = str(options["filter"])
            if self.is_mounted:  # type: ignore[attr-defined]
                field = self.query_one(FilterInput)  # type: ignore[attr-defined]
                field.value = self.filter_text
                field.set_class(bool(self.filter_text), "-visible")

    def _step_sort(self, step: int) -> None:
        i = self.SORT_KEYS.index(self.sort_key)
        self.sort_key = self.SORT_KEYS[(i + step) % len(self.SORT_KEYS)]
        self.redraw()

    def action_sort_next(self) -> None:
        """Sort by the next column."""
        self._step_sort(1)

    def action_sort_prev(self) -> None:
        """Sort by the previous column."""
        self._step_sort(-1)

    def action_sort_reverse(self) -> None:
        """Reverse the sort order."""
        self.sort_desc = not self.sort_desc
        self.redraw()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        if key not in self.SORT_KEYS:
            return
        if key == self.sort_key:
            self.sort_desc = not self.sort_desc
        else:
            self.sort_key, self.sort_desc = key, False
        self.redraw()
