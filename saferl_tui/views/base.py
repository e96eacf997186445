"""What every view shares: the :class:`ResultView` base class, the navigable/filterable table, the plot
views' panel layout and the (task, bound) condition cycler, and the formatting, colour and export helpers.

A view is a widget with a reactive ``data`` attribute that the screen sets when a worker has computed
it (attributes down); a view that needs new data because one of its own parameters changed posts
:class:`~saferl_tui.messages.ViewParamsChanged` (messages up). ``fetch`` is the blocking computation the
screen runs in a thread worker; it only touches the model, never widgets.

Labels, directions and tiers come from :mod:`cube.stats.metrics`; nothing here defines its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import xarray as xr
from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Vertical
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static
from textual_plotext import PlotextPlot

from cube.render import text as export
from cube.stats.metrics import SETTING, TIER_LABELS
from saferl_tui.messages import ViewParamsChanged
from saferl_tui.model import CubeModel, UISelection

Files = list[tuple[str, str]]
"""(file name, text) pairs that a view exports: ``{what}.{csv,tex}``; the screen adds the selection tag,
a counter when the name is taken, and the selection as a comment line."""

# ======================================================================== colours
ALGO_RGB: tuple[tuple[int, int, int], ...] = (
    (230, 159, 0),    # orange
    (86, 180, 233),   # sky blue
    (0, 158, 115),    # bluish green
    (204, 121, 167),  # reddish purple
    (213, 94, 0),     # vermillion
    (0, 114, 178),    # blue
)
"""Okabe-Ito colours (colour-blind safe, readable on dark and light backgrounds; no yellow, no grey)."""
REF_COLOR = "gray"
"""Reference lines (the bound d, κ = 0): a colour no algorithm gets."""
REF_RICH = "grey50"


def algo_palette(all_algos: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    """A fixed colour per algorithm of the cube (by its place in the cube, not in the selection), so an
    algorithm has the same colour in every view whatever is selected."""
    return {str(a): ALGO_RGB[i % len(ALGO_RGB)] for i, a in enumerate(all_algos)}


def rich_color(rgb: tuple[int, int, int]) -> str:
    """The Rich style of an RGB colour."""
    return f"rgb({rgb[0]},{rgb[1]},{rgb[2]})"


def legend_text(colors: dict[str, tuple[int, int, int]], extra: Sequence[tuple[str, str]] = ()) -> Text:
    """One line: '━━ ppo  ━━ ppo_lag …' in each algorithm's colour, then (text, style) extras."""
    text = Text(" ")
    for a, rgb in colors.items():
        text.append("━━ ", style=rich_color(rgb))
        text.append(a + "  ", style=f"bold {rich_color(rgb)}")
    for item, style in extra:
        text.append(item + "  ", style=style)
    return text


# ======================================================================== formatting
def fmt(v: float, digits: int = 2) -> str:
    """A number as shown on screen (fixed decimals; "–" for NaN)."""
    v = float(v)
    return "–" if not math.isfinite(v) else f"{v:.{digits}f}"


def fmt_signed(v: float, digits: int = 2) -> str:
    """A difference as shown on screen (+1.20 / −0.30; "–" for NaN)."""
    v = float(v)
    return "–" if not math.isfinite(v) else f"{v:+.{digits}f}".replace("-", "−")


def fmt_tier(t: float) -> str:
    """A tier as shown on screen (integer, "–" when undefined)."""
    t = float(t)
    return "–" if not math.isfinite(t) or t < 0 else str(int(t))


def tier_name(t: float) -> str:
    """The name of a tier ("Moderate"; "" when undefined), from ``cube.stats.metrics``."""
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


def condition_label(task: str, bound: float) -> str:
    """'goal d=25' style label of a (task, bound) condition."""
    return f"{task} d={bound:g}"


def incomplete_note(counts: dict | None) -> Text:
    """'◐ 3 incomplete runs included' (warning style), or nothing when every selected run is complete."""
    n = sum(counts.values()) if counts else 0
    if not n:
        return Text("")
    return Text(f"  ◐ {n} incomplete run{'s' if n != 1 else ''} included (6 Runs)",
                style="bold dark_orange")


def nice_step(span: float, n: int) -> float:
    """A 1-2-5 step giving about ``n`` intervals over ``span``."""
    if not math.isfinite(span) or span <= 0:
        return 1.0
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def nice_ticks(lo: float, hi: float, n: int = 5, integer: bool = False) -> list[float]:
    """Round tick values (multiples of a 1-2-5 step) inside [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    step = nice_step(hi - lo, n)
    if integer:
        step = max(1.0, round(step))
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    v = first
    while v <= hi + 1e-9 * step:
        ticks.append(0.0 if abs(v) < 1e-12 * step else v)
        v = first + len(ticks) * step
    return ticks


def tick_label(v: float, step: float) -> str:
    """A tick value as short text: 1.5M, 250k, 0.25, 40."""
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    if step >= 1:
        return f"{v:.0f}"
    digits = max(0, -math.floor(math.log10(step) + 1e-9))
    if abs(step * 10 ** digits - round(step * 10 ** digits)) > 1e-6:
        digits += 1
    return f"{v:.{digits}f}"


def set_ticks(plt: Any, axis: str, lo: float, hi: float, n: int = 5, integer: bool = False) -> None:
    """Round ticks on ``axis`` ("x" or "y") of a plotext figure, and the axis limits to [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return
    if hi <= lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    ticks = nice_ticks(lo, hi, n, integer)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    labels = [tick_label(t, step) for t in ticks]
    if axis == "x":
        plt.xlim(lo, hi)
        plt.xticks(ticks, labels)
    else:
        plt.ylim(lo, hi)
        plt.yticks(ticks, labels)


def padded_range(*arrays: Any) -> tuple[float, float]:
    """(low, high) of the finite values of ``arrays`` with a little room, NaN-safe."""
    vals = np.concatenate([np.asarray(a, float).ravel() for a in arrays]) if arrays else np.array([])
    vals = vals[np.isfinite(vals)]
    if not vals.size:
        return (0.0, 1.0)
    lo, hi = float(vals.min()), float(vals.max())
    pad = (hi - lo) * 0.05 or (abs(hi) * 0.1 or 1.0)
    return lo - pad, hi + pad


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
def rendered_files(what: str, kind: str, obj: xr.Dataset, sel: UISelection) -> Files:
    """``cube.render.text.render`` of a statistics table (kind aggregate, conditions, cdf or gap) as CSV and
    LaTeX, "best" chosen as on screen: never a not-safe algorithm (the TUI's baseline is only what the
    deltas compare against, so it is not left out of "best" here)."""
    return [(f"{what}.{ext}", export.render(obj, kind=kind, fmt=fmt, not_best=sel.not_safe))
            for ext, fmt in (("csv", "csv"), ("tex", "latex"))]


def table_files(what: str, header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str) -> Files:
    """A plain table (header and rows) as CSV and LaTeX (``cube.render.text.table_csv`` / ``table_latex``)."""
    return [(f"{what}.csv", export.table_csv(header, rows)),
            (f"{what}.tex", export.table_latex(header, rows, caption))]


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


def row_matches(cells: dict[str, str], query: str) -> bool:
    """Whether a row matches a filter: every whitespace-separated term must match; ``col:value`` (or
    ``col=value``) matches the start of that column (case-insensitive), a bare word any cell's text."""
    for term in query.lower().split():
        col, sep, value = term.replace("=", ":").partition(":")
        if sep and col in cells:
            if not cells[col].lower().startswith(value):
                return False
        elif not any(term in v.lower() for v in cells.values()):
            return False
    return True


class FilterInput(Input):
    """The ``/`` filter line of a table view: typing filters live, enter keeps the filter and returns to
    the table, esc clears it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "clear", "Clear filter", id="filter.clear")]

    def action_clear(self) -> None:
        """Clear the filter and return to the table."""
        self.value = ""
        self.post_message(self.Submitted(self, ""))


# ======================================================================== base class
class ResultView(Vertical):
    """Base class of a view: a status line, a body and the data it shows."""

    VIEW_ID: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    KEY: ClassVar[str] = ""
    NARROW: ClassVar[int] = 0
    """Below this width (columns) the view draws its narrow layout (0: the view has one layout)."""
    FILTERABLE: ClassVar[bool] = False
    """Whether ``/`` filters the view's table."""
    data: reactive[Any] = reactive(None, always_update=True, init=False)

    can_focus = True

    def __init__(self) -> None:
        super().__init__(id=f"view-{self.VIEW_ID}", classes="result-view")
        self.selection: UISelection | None = None
        """The selection the view shows or is waiting for (set by the screen when it asks for data)."""
        self.data_token: tuple | None = None
        """(view id, selection, params) ``data`` was computed for (set by the screen with ``data``)."""
        self.algo_colors: dict[str, tuple[int, int, int]] = {}
        """Colour per algorithm of the cube (set by the screen when the cube is loaded)."""
        self.incomplete: dict[tuple[str, str, float], int] = {}
        """Incomplete (partial or pending) runs per (algo, task, bound) of the shown selection."""
        self.filter_text = ""
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

    def colors_of(self, algos: Sequence[str]) -> dict[str, tuple[int, int, int]]:
        """The fixed colours of ``algos`` (a fallback palette for algorithms the screen did not colour)."""
        fallback = algo_palette(algos)
        return {str(a): self.algo_colors.get(str(a), fallback[str(a)]) for a in algos}

    def compose(self) -> ComposeResult:
        yield Static("", classes="view-status")
        yield from self.compose_body()
        if self.FILTERABLE:
            yield FilterInput(placeholder="filter: words, or col:value (status:partial algo:ppo task:goal)",
                              id=f"{self.VIEW_ID}-filter", classes="table-filter")

    def compose_body(self) -> ComposeResult:  # pragma: no cover - overridden
        yield from ()

    # ---------------------------------------------------------------- filter (/)
    def start_filter(self) -> bool:
        """Show and focus the filter line (False when the view has no table to filter)."""
        if not self.FILTERABLE:
            return False
        field = self.query_one(FilterInput)
        field.add_class("-visible")
        field.value = self.filter_text
        field.focus()
        return True

    @on(Input.Changed, ".table-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.filter_text = event.value.strip()
        self.redraw()

    @on(Input.Submitted, ".table-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.filter_text = event.value.strip()
        field = self.query_one(FilterInput)
        field.set_class(bool(self.filter_text), "-visible")
        self.redraw()
        self.focus_body()

    def filter_suffix(self, shown: int, total: int) -> str:
        """' · 12 of 480 rows match /partial' when a filter is set."""
        if not self.filter_text:
            return ""
        return f" · {shown} of {total} rows match /{self.filter_text} (/ edits, esc in it clears)"

    # ---------------------------------------------------------------- contract with the screen
    def params(self) -> tuple:
        """View-specific parameters that change the data it needs (part of the request token)."""
        return ()

    def describe_params(self) -> dict:
        """The view's own parameters, for the selection recorded in exports."""
        return {}

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


# ======================================================================== plot views
MIN_PLOT_W = 34
"""The narrowest plot (columns) that is still readable: y ticks, 5 x ticks and a title."""
MIN_PLOT_H = 8
"""The lowest plot (rows) that is still readable: title, 5 data rows, x ticks, axis labels (no frame)."""
BANDS_MIN_ROWS = 14
"""Plots lower than this are drawn without a frame, and curves without their ± std lines (which would hide
the curves)."""


def grid_shape(n: int, width: int, height: int) -> tuple[int, int] | None:
    """(columns, rows) of a grid holding ``n`` plots of at least MIN_PLOT_W x MIN_PLOT_H in
    ``width`` x ``height`` cells, or None when they do not fit (fewest rows first)."""
    for cols in range(min(n, max(width // MIN_PLOT_W, 1)), 0, -1):
        rows = math.ceil(n / cols)
        if cols * MIN_PLOT_W <= width and rows * MIN_PLOT_H <= height:
            return cols, rows
    return None


class PlotView(ResultView):
    """A view of several plots in a grid, with the legend on its own line above them (never over data).

    All plots are shown when the view is large enough for each to be readable (MIN_PLOT_W x MIN_PLOT_H);
    otherwise one at a time, ``p`` cycles them, and a one-line note says so. ``p`` also cycles from
    "all" to each plot alone when everything fits.
    """

    PANEL_BINDINGS: ClassVar[list[BindingType]] = []
    CHROME_ROWS: ClassVar[int] = 3
    """Rows of the view that are not plots: title, legend and note."""

    def __init__(self) -> None:
        super().__init__()
        self.panel: int | None = None
        """The plot shown alone (index into :meth:`panels`), or None for all plots."""
        self._layout: tuple | None = None

    def compose_body(self) -> ComposeResult:
        yield Static("", classes="table-title plot-title")
        yield Static("", classes="plot-legend")
        yield Static("", classes="plot-note")
        yield from self.compose_plots()

    def compose_plots(self) -> ComposeResult:  # pragma: no cover - overridden
        yield from ()

    @staticmethod
    def plot_grid(grid_id: str, panels: Sequence[tuple[str, str]], classes: str = "") -> ComposeResult:
        """A grid of plot panels [(widget id, short name)] for `compose_plots`."""
        with Grid(id=grid_id, classes="plot-grid"):
            for wid, name in panels:
                plot = PlotextPlot(id=wid, classes=f"{classes} plot-panel".strip())
                plot.panel_name = name  # type: ignore[attr-defined]
                yield plot

    def panels(self) -> list[Widget]:
        """The plot widgets that have something to show now, in order."""
        return list(self.query(".plot-panel").results(Widget))

    def panel_names(self) -> list[str]:
        """A short name per panel (for the note)."""
        return [str(getattr(w, "panel_name", i + 1)) for i, w in enumerate(self.panels())]

    def fits_all(self, n: int) -> tuple[int, int] | None:
        """The grid shape for all ``n`` panels at the current size, or None."""
        w, h = self.size.width, self.size.height - self.CHROME_ROWS
        if w <= 0 or h <= 0:
            return (min(n, 2), math.ceil(n / 2)) if n else None
        return grid_shape(n, w, h)

    def single_note(self, idx: int, n: int, fits: bool) -> str:
        """The note shown when one of ``n`` plots is shown alone."""
        names = self.panel_names()
        why = "" if fits else f"{self.app.size.width}x{self.app.size.height}: too small for all {n} plots · "
        return f" {why}p: next plot ({idx + 1}/{n}: {names[idx]})"

    def single_index(self, n: int, fits: bool) -> int:
        """Which plot to show alone."""
        return (self.panel or 0) % n

    def arrange_plots(self) -> None:
        """Show all panels in a grid when they fit (and ``p`` has not picked one), else one of them."""
        panels = self.panels()
        n = len(panels)
        grid = self.query_one(Grid)
        shape = self.fits_all(n) if n else None
        note = ""
        if n and (self.panel is None and shape is not None):
            shown = panels
            cols, rows = shape
        else:
            idx = self.single_index(n, shape is not None) if n else 0
            shown = panels[idx:idx + 1]
            cols, rows = 1, 1
            if n > 1:
                note = self.single_note(idx, n, shape is not None)
        w, h = self.size.width, self.size.height - self.CHROME_ROWS
        style = "italic"
        if 0 < w < MIN_PLOT_W or 0 < h < MIN_PLOT_H:
            note, style = (f" terminal {self.app.size.width}x{self.app.size.height} is too small for a readable "
                           "plot: make it at least 60x20"), "bold dark_orange"
        for w_ in self.query(".plot-panel").results(Widget):
            w_.display = w_ in shown
            w_.styles.column_span = 1
        if shown and len(shown) < cols * rows:
            shown[-1].styles.column_span = cols * rows - len(shown) + 1
        grid.styles.grid_size_columns = cols
        grid.styles.grid_size_rows = rows
        note_w = self.query_one(".plot-note", Static)
        note_w.update(Text(note, style=style))
        note_w.display = bool(note)
        self._layout = (self.size, len(shown), cols, rows)

    def on_resize(self) -> None:
        super().on_resize()
        if self._layout is not None and self._layout[0] != self.size:
            before = self._layout[1:]
            self.arrange_plots()
            if self._layout[1:] != before:
                self.redraw()

    def action_next_panel(self) -> None:
        """Show the next plot alone; after the last, all plots again (when they fit)."""
        n = len(self.panels())
        if not n:
            return
        fits = self.fits_all(n) is not None
        if self.panel is None:
            self.panel = 0 if fits else 1 % n
        elif self.panel + 1 >= n:
            self.panel = None if fits else 0
        else:
            self.panel += 1
        self.arrange_plots()
        self.redraw()

    def set_legend(self, text: Text) -> None:
        self.query_one(".plot-legend", Static).update(text)

    def set_title(self, text: str | Text) -> None:
        self.query_one(".plot-title", Static).update(Text(text) if isinstance(text, str) else text)

    def plot_rows(self) -> int:
        """Rows of one plot in the current layout (for what fits in it)."""
        if self._layout is None:
            return 0
        return max(0, (self.size.height - self.CHROME_ROWS) // max(self._layout[3], 1))


# ======================================================================== condition cycling
def condition_bindings(view_id: str) -> list[BindingType]:
    """The keys of a view that shows one (task, bound) condition at a time."""
    return [
        Binding("c,j,down", "next_condition", "Next condition", id=f"{view_id}.next"),
        Binding("C,k,up", "prev_condition", "Prev condition", id=f"{view_id}.prev"),
    ]


class ConditionCycler(PlotView):
    """A plot view that shows one (task, bound) condition of the selection at a time (c / j next,
    C / k previous)."""

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

    def show_condition(self, task: str, bound: float) -> None:
        """Make (task, bound) the condition on screen (from Enter on a Conditions row)."""
        conds = self.conditions()
        if (task, bound) in conds:
            self.cond_index = conds.index((task, bound))
            self.condition_changed()

    def condition_text(self, task: str, bound: float) -> Text:
        """'goal d=25 (2/4, c/C)': a condition, its place among the conditions and the keys that cycle it;
        '◐' when the condition includes incomplete runs."""
        n = max(len(self.conditions()), 1)
        text = Text(f"{condition_label(task, bound)} ({self.cond_index % n + 1}/{n}, c/C)", style="bold")
        sel = self.selection
        k = sum(v for (a, t, b), v in self.incomplete.items()
                if t == task and b == bound and (sel is None or a in sel.algos))
        if k:
            text.append(f"  ◐ {k} incomplete run{'s' if k != 1 else ''}", style="bold dark_orange")
        return text

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
