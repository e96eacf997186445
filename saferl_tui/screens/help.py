"""The help screen: every key binding of the app, generated from the binding tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

from saferl_tui.views import VIEW_CLASSES
from saferl_tui.widgets import (
    PickList,
)

if TYPE_CHECKING:  # pragma: no cover
    from saferl_tui.screens.main import MainScreen


def key_text(b: Binding) -> str:
    """The key(s) of a binding as shown in the key bar ('c/j', '+', '[')."""
    names = {"plus": "+", "minus": "−", "equals_sign": "=", "left_square_bracket": "[", "right_square_bracket": "]",
             "less_than_sign": "<", "greater_than_sign": ">", "enter": "enter", "slash": "/", "down": "↓",
             "up": "↑"}
    keys = [names.get(k.strip(), k.strip()) for k in b.key.split(",")][:2]
    return "/".join(keys)


def help_rows(screen: MainScreen) -> list[tuple[str, str, str]]:
    """(where, key, description) for every binding of the app, the screen, the views and widgets."""
    rows: list[tuple[str, str, str]] = []

    def add(where: str, bindings: list[BindingType]) -> None:
        for b in bindings:
            if isinstance(b, Binding):
                keys = ", ".join(screen.app.get_key_display(Binding(k, b.action)) for k in b.key.split(","))
                rows.append((where, keys, b.description or b.action))

    add("anywhere", list(screen.app.BINDINGS))
    rows.append(("anywhere", screen.app.get_key_display(Binding("ctrl+p", "command_palette")),
                 "Command palette (views, exports, selections, not-safe algorithms)"))
    add("main", list(type(screen).BINDINGS))
    for cls in VIEW_CLASSES:
        add(cls.TITLE, list(getattr(cls, "BINDINGS", [])))
    from saferl_tui.views.table import NAV_BINDINGS

    add("tables", NAV_BINDINGS)
    rows.append(("tables", "↑ ↓ ← → pgup pgdn", "Move"))
    add("selection lists", list(PickList.BINDINGS))
    rows.append(("selection lists", "space / enter", "Toggle the highlighted entry"))
    rows.append(("runs still training", "◐", "Counted, their latest iterate as final"))
    rows.append(("follow mode", "w", "Polls every --follow-interval s; header: last update"))
    rows.append(("training variables", "approx_kl", "k3 KL estimate mean((ρ−1) − log ρ), mean over an iterate"))
    rows.append(("training variables", "iterate 0", "Large KL, clip_fraction: normalizer updated before SGD, as crax"))
    return rows


HELP_WIDTH = 90
"""The help box's width (`#help-box` in saferl_tui.tcss), less on a narrower terminal."""


class HelpScreen(ModalScreen[None]):
    """Every key binding, generated from the binding tables."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close help", id="help.close"),
        Binding("j", "cursor('down')", "Down", show=False),
        Binding("k", "cursor('up')", "Up", show=False),
    ]

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Label(Text("Key bindings  (esc / ? closes, ↑↓ j k scroll)", style="bold"))
            yield DataTable(id="help-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        where_w, key_w, action_w = self.column_widths(self.app.size.width)
        table.add_column("Where", width=where_w)
        table.add_column("Key", width=key_w)
        table.add_column("Action", width=action_w)
        for row in self.rows:  # long texts wrap onto more lines of their row, never cut at the edge
            table.add_row(*(Text(cell) for cell in row), height=None)
        table.focus()

    def column_widths(self, screen_width: int) -> tuple[int, int, int]:
        """(where, key, action) column widths that fill the help box at ``screen_width`` columns: where and
        key as wide as their longest entry (at most 19 and 14, wrapping beyond), action the rest."""
        box = min(HELP_WIDTH, screen_width) - 4  # the box's border and padding
        where_w = min(max(len(r[0]) for r in self.rows), 19)
        key_w = min(max(len(r[1]) for r in self.rows), 14)
        return where_w, key_w, max(box - where_w - key_w - 3 * 2 - 2, 20)  # cell padding, scrollbar

    def action_cursor(self, where: str) -> None:
        table = self.query_one(DataTable)
        (table.action_cursor_down if where == "down" else table.action_cursor_up)()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
