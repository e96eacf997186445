"""The Front view (key 0): the reward-cost front across bounds, beyond the paper, one task at a time (c / C):
each (algorithm, bound) of the current setting (t) at (cost, R̄) of seed means, filled where it is on the
front (the staircase drawn), hollow where dominated, and beside the plot each point's bootstrap probability of
being on the front; the title counts, per algorithm, the tasks on whose front it stands
(`cube.stats.reward_cost_front`; R̄ is in task units, so nothing is averaged across tasks). x toggles the cost
axis between D_norm and CVaR.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import xarray as xr
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal
from textual.widgets import Static
from textual_plotext import PlotextPlot

from cube.stats.metrics import METRIC, SETTING
from saferl_tui.exports import Files, rendered_files
from saferl_tui.model import CubeModel
from saferl_tui.selection import UISelection
from saferl_tui.views.format import REF_COLOR, REF_RICH, fmt, incomplete_note, legend_text, rich_color
from saferl_tui.views.plot import PlotView, focused_range, set_ticks

COSTS = ("Dnorm", "CVaR")
"""The cost axes x cycles through (lower is better, in units of the bound)."""
FILLED = ("●", "■", "▲", "◆")
HOLLOW = ("○", "□", "△", "◇")
"""Markers per bound (in the cube's bound order): filled on the front, hollow off it."""
NOT_SAFE_MARK = "†"


class FrontView(PlotView):
    """One task's (cost, R̄) points per algorithm and bound, the front, and P(front) per point."""

    VIEW_ID = "front"
    TITLE = "Front"
    KEY = "0"
    CHROME_ROWS = 4
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c,j,down", "next_condition", "Next task", id="front.next"),
        Binding("C,k,up", "prev_condition", "Prev task", id="front.prev"),
        Binding("x", "toggle_x", "x: D_norm / CVaR", id="front.x"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.cost = COSTS[0]
        self.task_index = 0

    def compose_plots(self) -> ComposeResult:
        with Horizontal(id="front-body"):
            with Grid(id="front-plots", classes="plot-grid"):
                plot = PlotextPlot(id="front-plot", classes="plot-panel")
                plot.panel_name = "front"  # type: ignore[attr-defined]
                yield plot
            yield Static("", id="front-side")

    def params(self) -> tuple:
        return (self.cost,)

    def describe_params(self) -> dict:
        return {"cost": self.cost, "task": self.task()}

    def view_options(self) -> dict:
        return {"cost": self.cost}

    def apply_view_options(self, options: dict) -> None:
        if options.get("cost") in COSTS:
            self.cost = options["cost"]

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> xr.Dataset:
        return model.front(sel, sel.setting, params[0])

    def figure_settings(self) -> tuple[str, ...] | None:
        return (self.selection.setting,) if self.selection is not None else None

    # ------------------------------------------------------------------ tasks
    def tasks(self) -> list[str]:
        return list(self.selection.tasks) if self.selection is not None else []

    def task(self) -> str | None:
        tasks = self.tasks()
        return tasks[self.task_index % len(tasks)] if tasks else None

    def _step(self, step: int) -> None:
        if self.tasks():
            self.task_index = (self.task_index + step) % len(self.tasks())
            self.redraw()

    def action_next_condition(self) -> None:
        """Show the next task's front."""
        self._step(1)

    def action_prev_condition(self) -> None:
        """Show the previous task's front."""
        self._step(-1)

    def action_toggle_x(self) -> None:
        """The cost axis: D_norm, then CVaR."""
        self.cost = COSTS[(COSTS.index(self.cost) + 1) % len(COSTS)]
        self.request_data()

    # ------------------------------------------------------------------ drawing
    def render_data(self, front: xr.Dataset) -> None:
        sel = self.selection
        task = self.task()
        assert sel is not None and task is not None
        self.arrange_plots()
        s = str(front["setting"].values[0])
        one = front.sel(setting=s, task=task)
        algos = [str(a) for a in one["algo"].values]
        colors = self.colors_of(algos)
        bounds = [float(b) for b in one["bound"].values]
        cost_label = METRIC[self.cost].label
        widget = self.query_one("#front-plot", PlotextPlot)
        plt = widget.plt
        plt.clear_figure()
        on = one["on_front"].values.astype(bool)
        x, y = one["cost"].values, one["reward"].values
        order = np.argsort(x[on])
        if order.size:  # the front's staircase first, the points over it
            fx, fy = x[on][order], y[on][order]
            plt.plot(np.repeat(fx, 2)[1:], np.repeat(fy, 2)[:-1], color=REF_COLOR, marker="·")
        for i, a in enumerate(algos):
            for j, _b in enumerate(bounds):
                if np.isfinite(x[i, j]) and np.isfinite(y[i, j]):
                    marks = FILLED if on[i, j] else HOLLOW
                    plt.scatter([x[i, j]], [y[i, j]], color=colors[a], marker=marks[j % len(marks)])
        plt.vline(0.0, REF_COLOR)
        xlo, xhi, xoff = focused_range({a: [x[i]] for i, a in enumerate(algos)}, sel.not_safe, (0.0,))
        ylo, yhi, yoff = focused_range({a: [y[i]] for i, a in enumerate(algos)}, sel.not_safe)
        off = sorted(set(xoff) | set(yoff))
        plt.title(f"{task} · {SETTING[s].short if s in SETTING else s}" + (f" · {', '.join(off)} off scale"
                                                                            if off else ""))
        plt.xlabel(f"{cost_label} (lower is better)")
        plt.ylabel("R̄")
        if np.isfinite(x).any():
            set_ticks(plt, "x", xlo, xhi, 4)
            set_ticks(plt, "y", ylo, yhi, 4)
        widget.refresh()
        self.query_one("#front-side", Static).update(self._side(one, algos, bounds, colors, sel, cost_label))
        shapes = " ".join(f"{FILLED[j % 4]}{HOLLOW[j % 4]} d={b:g}" for j, b in enumerate(bounds))
        self.set_legend(legend_text(colors, [(f"{shapes} (filled: on the front)", REF_RICH)]))
        self.set_title(self._title(front, s, task, sel))

    def _title(self, front: xr.Dataset, s: str, task: str, sel: UISelection) -> Text:
        tasks = self.tasks()
        text = Text(f"Front {task} ({self.task_index % len(tasks) + 1}/{len(tasks)}, c/C) · "
                    f"{SETTING[s].label if s in SETTING else s} (t) · tasks on the front: ", style="")
        counts = front.sel(setting=s)
        for a in (str(a) for a in counts["algo"].values):
            n, k = int(counts["n_tasks"].sel(algo=a)), int(counts["tasks_on_front"].sel(algo=a))
            e = float(counts["expected_tasks_on_front"].sel(algo=a))
            text.append(f"{a} {k}/{n}" + (f" (E {e:.1f})" if np.isfinite(e) else "") + "  ",
                        style=rich_color(self.colors_of([a])[a]))
        text.append_text(incomplete_note(self.incomplete))
        return text

    @staticmethod
    def _side(one: xr.Dataset, algos: list[str], bounds: list[float], colors: dict, sel: UISelection,
              cost_label: str) -> Table:
        """Each point of the task: algorithm, d, R̄, cost, on the front, P(front) over the replicates."""
        table = Table(box=None, padding=(0, 1), header_style="bold", show_edge=False)
        for head in ("Algo", "d", "R̄", cost_label, "", "P"):
            table.add_column(head, justify="left" if head == "Algo" else "right", no_wrap=True)
        for i, a in enumerate(algos):
            for j, b in enumerate(bounds):
                pt = one.isel(algo=i, bound=j)
                if int(pt["n_seeds"]) == 0:
                    continue
                on = bool(pt["on_front"])
                marks = FILLED if on else HOLLOW
                name = Text(a + (NOT_SAFE_MARK if a in sel.not_safe else ""), style=rich_color(colors[a]))
                table.add_row(name, f"{b:g}", fmt(float(pt["reward"])), fmt(float(pt["cost"])),
                              Text(marks[j % len(marks)], style=rich_color(colors[a])), fmt(float(pt["p_front"])),
                              style="bold" if on else "dim" if a in sel.not_safe else None)
        table.caption = "P: share of bootstrap replicates on the front"
        table.caption_style = "italic"
        return table

    def export_tables(self) -> Files:
        if self.data is None or self.selection is None:
            return []
        return rendered_files("front", "front", self.data, self.selection.not_safe)
