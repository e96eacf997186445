"""The plot views: their panel grid (all panels when they fit, else one at a time), ticks, and the
(task, bound) condition cycler of the per-condition views.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.widget import Widget
from textual.widgets import Static
from textual_plotext import PlotextPlot

from cube.render.style import focus_limits
from saferl_tui.views.base import ResultView
from saferl_tui.views.format import condition_label, nice_ticks, padded_range, tick_label


def set_ticks(plt: Any, axis: str, lo: float, hi: float, n: int = 5, integer: bool = False) -> None:
    """Round ticks on ``axis`` ("x" or "y") of a plotext figure, and the axis limits to [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return
    if hi <= lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    ticks = nice_ticks(lo, hi, n, integer)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    top = max((abs(t) for t in ticks), default=None)
    labels = [tick_label(t, step, top) for t in ticks]
    if axis == "x":
        plt.xlim(lo, hi)
        plt.xticks(ticks, labels)
    else:
        plt.ylim(lo, hi)
        plt.yticks(ticks, labels)


# ======================================================================== plot views
MIN_PLOT_W = 34
"""The narrowest plot (columns) that is still readable: y ticks, 5 x ticks and a title."""
MIN_PLOT_H = 8
"""The lowest plot (rows) that is still readable: title, 5 data rows, x ticks, axis labels (no frame)."""
BANDS_MIN_ROWS = 14
"""Plots lower than this are drawn without a frame, and curves without their ± std lines (which would hide
the curves)."""


def grid_shape(n: int, width: int, height: int, min_height: int = MIN_PLOT_H) -> tuple[int, int] | None:
    """(columns, rows) of a grid holding ``n`` plots of at least MIN_PLOT_W columns x ``min_height`` rows
    in ``width`` x ``height`` cells, or None when they do not fit: the fewest empty cells first (four
    plots make 2 x 2, not 3 + one stretched across the width), then the fewest rows."""
    fits = []
    for cols in range(min(n, max(width // MIN_PLOT_W, 1)), 0, -1):
        rows = math.ceil(n / cols)
        if cols * MIN_PLOT_W <= width and rows * min_height <= height:
            fits.append((cols * rows - n, rows, cols))
    if not fits:
        return None
    _, rows, cols = min(fits)
    return cols, rows


class PlotView(ResultView):
    """A view of several plots in a grid, with the legend on its own line above them (never over data).

    All plots are shown when the view is large enough for each to be readable (MIN_PLOT_W x MIN_PLOT_H);
    otherwise one at a time, ``p`` cycles them, and a one-line note says so. ``p`` also cycles from
    "all" to each plot alone when everything fits.
    """

    PANEL_BINDINGS: ClassVar[list[BindingType]] = []
    CHROME_ROWS: ClassVar[int] = 3
    """Rows of the view that are not plots: title, legend and note."""
    GRID_MIN_H: ClassVar[int] = MIN_PLOT_H
    """The fewest rows a plot gets when all plots share the view (below: one at a time)."""

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
        return grid_shape(n, w, h, self.GRID_MIN_H)

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

    def view_options(self) -> dict:
        """The plot shown alone (``p``), by name, saved with the view (None: all plots)."""
        names = self.panel_names()
        return {"panel": names[self.panel % len(names)] if self.panel is not None and names else None}

    def apply_view_options(self, options: dict) -> None:
        names = self.panel_names()
        if options.get("panel") in names:
            self.panel = names.index(options["panel"])
            self.arrange_plots()

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

    def plot_columns(self, widget: Widget | None = None) -> int:
        """Columns of one plot (of ``widget``, which may span several grid columns) in the current layout
        (0 before the first layout)."""
        if self._layout is None:
            return 0
        span = int(widget.styles.column_span or 1) if widget is not None else 1
        return self.size.width * span // max(self._layout[2], 1)

    def plot_rows(self) -> int:
        """Rows of one plot in the current layout (for what fits in it)."""
        if self._layout is None:
            return 0
        return max(0, (self.size.height - self.CHROME_ROWS) // max(self._layout[3], 1))


def fitted_title(width: int, *candidates: str) -> str:
    """The first of ``candidates`` (longest first) that fits a plot ``width`` columns wide (`PlotView.
    plot_columns`): plotext drops a title wider than its plot, leaving a panel without one."""
    room = width - 2  # the frame's corners
    for text in candidates:
        if room <= 0 or cell_len(text) <= room:
            return text
    return candidates[-1][:max(room, 1)]


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

    def figure_condition(self) -> tuple[str, float] | None:
        return self.condition()

    def view_options(self) -> dict:
        return {**super().view_options(), "condition": self.condition()}

    def apply_view_options(self, options: dict) -> None:
        super().apply_view_options(options)
        cond = options.get("condition")
        conds = self.conditions()
        if cond is not None and (cond[0], float(cond[1])) in conds:
            self.cond_index = conds.index((cond[0], float(cond[1])))

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


def focused_range(values: dict[str, list[np.ndarray]], not_safe: Sequence[str], refs: Sequence[float] = ()
                  ) -> tuple[float, float, list[str]]:
    """A plot's y range (low, high) and the not-safe algorithms left off it: the range follows the other
    algorithms when the not-safe ones lie far outside them (`cube.render.style.focus_limits`, the rule of
    the figures), else it holds everything (`padded_range`). `values`: arrays per algorithm."""
    safe = [v for a, vs in values.items() if a not in not_safe for v in vs]
    base = [v for a, vs in values.items() if a in not_safe for v in vs]
    if safe and base:
        flat = np.concatenate([np.ravel(np.asarray(v, float)) for v in safe])
        lims, side = focus_limits(flat, np.concatenate([np.ravel(np.asarray(v, float)) for v in base]), refs)
        if lims is not None:
            return lims[0], lims[1], [a for a in values if a in not_safe]
    lo, hi = padded_range(*[v for vs in values.values() for v in vs], *([np.asarray(refs, float)] if refs else []))
    return lo, hi, []
