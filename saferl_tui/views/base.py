"""What every view shares: the :class:`ResultView` base class, the (task, bound) condition cycler, and
the formatting and export helpers.

A view is a widget with a reactive ``data`` attribute that the screen sets when a worker has computed
it (attributes down); a view that needs new data because one of its own parameters changed posts
:class:`~saferl_tui.messages.ViewParamsChanged` (messages up). ``fetch`` is the blocking computation the
screen runs in a thread worker; it only touches the model, never widgets.

Labels, directions and tiers come from :mod:`cube.metrics`; nothing here defines its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import xarray as xr
from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import DataTable, Static

from cube import export
from cube.metrics import SETTING, TIER_LABELS
from saferl_tui.messages import ViewParamsChanged
from saferl_tui.model import CubeModel, UISelection

PALETTE = ("blue", "red", "green", "orange", "magenta", "cyan", "yellow", "white")
Files = list[tuple[str, str]]
"""(file name, text) pairs that a view exports."""


# ======================================================================== formatting
def fmt(v: float, digits: int = 2) -> str:
    """A number as shown on screen (fixed decimals; "–" for NaN)."""
    v = float(v)
    return "–" if not math.isfinite(v) else f"{v:.{digits}f}"


def fmt_tier(t: float) -> str:
    """A tier as shown on screen (integer, "–" when undefined)."""
    t = float(t)
    return "–" if not math.isfinite(t) or t < 0 else str(int(t))


def tier_name(t: float) -> str:
    """The name of a tier ("Moderate"; "" when undefined), from ``cube.metrics``."""
    t = float(t)
    return "" if not math.isfinite(t) or t < 0 else TIER_LABELS[int(t)]


def iter_text(sel: UISelection) -> str:
    """The training iterates of the selection as a parenthesised suffix ("" for all iterates)."""
    if sel.iterates is None:
        return ""
    if isinstance(sel.iterates, int):
        return f" (iterate {sel.iterates})"
    return f" (iterates {sel.iterates[0]}..{sel.iterates[1]})"


def setting_title(sel: UISelection, setting: str) -> str:
    """The setting's label, with the training iterates for train ("Train (iterates 1..3)")."""
    return SETTING[setting].label + (iter_text(sel) if setting == "train" else "")


def algo_colors(algos: tuple[str, ...], baseline: str | None) -> dict[str, str]:
    """A stable plotext colour per algorithm (the baseline is gray)."""
    out, i = {}, 0
    for a in algos:
        if a == baseline:
            out[a] = "gray"
        else:
            out[a] = PALETTE[i % len(PALETTE)]
            i += 1
    return out


def condition_label(task: str, bound: float) -> str:
    """'goal d=25' style label of a (task, bound) condition."""
    return f"{task} d={bound:g}"


def nan_none(a: np.ndarray) -> list[float]:
    """plotext cannot skip NaN: carry the nearest previous finite value (the first finite one, or 0, before it)."""
    out, last = [], None
    arr = np.asarray(a, float)
    first = arr[np.isfinite(arr)][0] if np.isfinite(arr).any() else 0.0
    for v in arr:
        if math.isfinite(v):
            last = float(v)
        out.append(last if last is not None else float(first))
    return out


def add_columns(table: DataTable, columns: list[tuple[str | Text, str]], rows: list[list[Text]]) -> None:
    """Add columns sized to their widest line: DataTable's own measure under-sizes multi-line cells and
    labels (and not always the same way), which would truncate numbers."""
    for i, (label, key) in enumerate(columns):
        plain = label.plain if isinstance(label, Text) else label
        lines = [line for r in rows for line in r[i].plain.split("\n")] + plain.split("\n")
        table.add_column(label, key=key, width=max(cell_len(line) for line in lines))


# ======================================================================== exports
def rendered_files(stem: str, kind: str, obj: xr.Dataset, baseline: str | None) -> Files:
    """``cube.export.render`` of a statistics table (kind aggregate, conditions or cdf) as CSV and LaTeX."""
    if baseline is not None and baseline not in [str(a) for a in obj["algo"].values]:
        baseline = None
    return [(f"{stem}.{ext}", export.render(obj, kind=kind, fmt=fmt, baseline=baseline))
            for ext, fmt in (("csv", "csv"), ("tex", "latex"))]


def table_files(stem: str, header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str) -> Files:
    """A plain table (header and rows) as CSV and LaTeX (``cube.export.table_csv`` / ``table_latex``)."""
    return [(f"{stem}.csv", export.table_csv(header, rows)),
            (f"{stem}.tex", export.table_latex(header, rows, caption))]


# ======================================================================== base class
class ResultView(Vertical):
    """Base class of a view: a status line, a body and the data it shows."""

    VIEW_ID: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    KEY: ClassVar[str] = ""
    NARROW: ClassVar[int] = 0
    """Below this width (columns) the view draws its narrow layout (0: the view has one layout)."""
    data: reactive[Any] = reactive(None, always_update=True, init=False)

    can_focus = True

    def __init__(self) -> None:
        super().__init__(id=f"view-{self.VIEW_ID}", classes="result-view")
        self.selection: UISelection | None = None
        """The selection the view shows or is waiting for (set by the screen when it asks for data)."""
        self.data_token: tuple | None = None
        """(view id, selection, params) ``data`` was computed for (set by the screen with ``data``)."""
        self._narrow_layout: bool | None = None

    def token(self) -> tuple:
        """What the view needs now: (view id, selection, params)."""
        return (self.VIEW_ID, self.selection, self.params())

    def is_current(self) -> bool:
        """Whether ``data`` matches the current selection and parameters (false while new data is
        being computed, when redrawing would mix old data with new settings)."""
        return self.data is not None and self.selection is not None and self.data_token == self.token()

    def redraw(self) -> None:
        """Draw ``data`` again after a change that needs no new data (layout, sort, x-range), if current."""
        if self.is_current():
            self.render_data(self.data)

    def narrow(self) -> bool:
        """Whether the view is now narrower than ``NARROW``."""
        return 0 < self.size.width < self.NARROW

    def layout_narrow(self) -> bool:
        """Whether to draw the narrow layout now (remembered: a resize across ``NARROW`` redraws)."""
        self._narrow_layout = self.narrow()
        return self._narrow_layout

    def on_resize(self) -> None:
        if self._narrow_layout is not None and self.narrow() != self._narrow_layout:
            self.redraw()

    def focus_body(self) -> None:
        """Focus the view's main table, or the view itself (so its key bindings apply)."""
        tables = self.query(DataTable)
        (tables.first() if tables else self).focus()

    def compose(self) -> ComposeResult:
        yield Static("", classes="view-status")
        yield from self.compose_body()

    def compose_body(self) -> ComposeResult:  # pragma: no cover - overridden
        yield from ()

    # ---------------------------------------------------------------- contract with the screen
    def params(self) -> tuple:
        """View-specific parameters that change the data it needs (part of the request token)."""
        return ()

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> Any:  # pragma: no cover
        """Blocking computation of the view's data (runs in a thread worker)."""
        raise NotImplementedError

    def watch_data(self, data: Any) -> None:
        if data is not None and self.selection is not None:
            self.set_status("")
            self.render_data(data)

    def render_data(self, data: Any) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def set_status(self, text: str, error: bool = False) -> None:
        """Show a one-line status (computing..., or an error) above the body."""
        status = self.query_one(".view-status", Static)
        status.update(text)
        status.set_class(bool(text), "-visible")
        status.set_class(error, "-error")
        self.set_class(error, "-failed")

    def export_tables(self) -> Files:
        """(file name, text) pairs holding exactly what the view shows, in CSV and LaTeX."""
        return []

    def request_data(self) -> None:
        """Ask the screen for new data after a view parameter changed."""
        self.post_message(ViewParamsChanged(self.VIEW_ID))


# ======================================================================== condition cycling
def condition_bindings(view_id: str) -> list[BindingType]:
    """The c / C bindings of a view that shows one (task, bound) condition at a time."""
    return [
        Binding("c", "next_condition", "Next condition", id=f"{view_id}.next"),
        Binding("C", "prev_condition", "Prev condition", id=f"{view_id}.prev"),
    ]


class ConditionCycler(ResultView):
    """A view that shows one (task, bound) condition of the selection at a time, cycled with c / C."""

    cond_index: int = 0

    def conditions(self) -> list[tuple[str, float]]:
        """Every (task, bound) condition of the selection."""
        sel = self.selection
        if sel is None:
            return []
        return [(t, b) for t in sel.tasks for b in sel.bounds]

    def condition(self) -> tuple[str, float] | None:
        """The condition on screen."""
        conds = self.conditions()
        return conds[self.cond_index % len(conds)] if conds else None

    def condition_text(self, task: str, bound: float) -> str:
        """'goal d=25 (2/4, c / C)': a condition, its place among the conditions and the keys that cycle it."""
        n = max(len(self.conditions()), 1)
        return f"{condition_label(task, bound)} ({self.cond_index % n + 1}/{n}, c / C)"

    def step_condition(self, step: int) -> None:
        n = len(self.conditions())
        if n:
            self.cond_index = (self.cond_index + step) % n
            self.condition_changed()

    def condition_changed(self) -> None:
        """New data is needed for the new condition (overridden where the data holds every condition)."""
        self.request_data()

    def action_next_condition(self) -> None:
        """Show the next (task, bound) condition."""
        self.step_condition(1)

    def action_prev_condition(self) -> None:
        """Show the previous (task, bound) condition."""
        self.step_condition(-1)
