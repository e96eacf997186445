"""The Histograms view (key 5): final episodic cost distribution of one condition, expl vs greedy, one
plot per algorithm in its colour (expl ░ and greedy ▓ side by side in each bin, neither hiding the other),
on one x scale for the safe algorithms (the not-safe baseline on its own), the bound d marked. The bins
come from the one histogram engine the figures use (`cube.stats.curves.hist_panels`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual_plotext import PlotextPlot

from cube.render.views import histogram_files
from saferl_tui.exports import Files
from saferl_tui.model import CubeModel
from saferl_tui.selection import UISelection
from saferl_tui.views.format import REF_COLOR, REF_RICH
from saferl_tui.views.plot import BANDS_MIN_ROWS, ConditionCycler, condition_bindings, set_ticks

EXPL_MARK, GREEDY_MARK = "░", "▓"


class HistogramsView(ConditionCycler):
    """Final episodic cost distribution, expl vs greedy, per algorithm, for one condition; d marked."""

    VIEW_ID = "histograms"
    TITLE = "Histograms"
    KEY = "5"
    BINDINGS: ClassVar[list[BindingType]] = [
        *condition_bindings(VIEW_ID),
        Binding("plus,equals_sign", "adjust(1)", "Bins +", id="histograms.bins_up"),
        Binding("minus", "adjust(-1)", "Bins −", id="histograms.bins_down"),
        Binding("p", "next_panel", "Next plot / all", id="histograms.panels"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.bins = 20
        self._plots: list[str] = []

    def compose_plots(self) -> ComposeResult:
        yield Grid(id="hist-grid", classes="plot-grid")

    def view_options(self) -> dict:
        return {**super().view_options(), "bins": self.bins}

    def apply_view_options(self, options: dict) -> None:
        super().apply_view_options(options)
        if options.get("bins") is not None:
            self.bins = int(options["bins"])

    def params(self) -> tuple:
        return (self.condition(), self.bins)

    def describe_params(self) -> dict:
        cond = self.condition()
        return {"condition": None if cond is None else {"task": cond[0], "bound": cond[1]}, "bins": self.bins}

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> Any:
        cond, bins = params
        if cond is None:
            return None
        return (cond, model.histograms(sel, cond[0], cond[1], bins))

    async def _ensure_plots(self, algos: list[str]) -> None:
        if self._plots == algos:
            return
        grid = self.query_one("#hist-grid", Grid)
        await grid.remove_children()
        plots = []
        for a in algos:
            plot = PlotextPlot(classes="hist-plot plot-panel")
            plot.panel_name = a  # type: ignore[attr-defined]
            plots.append(plot)
        await grid.mount_all(plots)
        self._plots = list(algos)

    def watch_data(self, data: Any) -> None:
        if data is not None and self.selection is not None:
            self.set_status("")
            self.run_worker(self._render_async(data), exclusive=True, group="hist-render")

    async def _render_async(self, data: Any) -> None:
        _cond, panels = data
        await self._ensure_plots(list(panels))
        self.render_data(data)

    def render_data(self, data: Any) -> None:
        sel = self.selection
        assert sel is not None
        (task, bound), panels = data
        self.arrange_plots()
        colors = self.colors_of(list(panels))
        top = max((int(c.max()) for p in panels.values() for c in p.counts.values()), default=1)
        for widget, a in zip(self.query(".hist-plot").results(PlotextPlot), panels, strict=False):
            p = panels[a]
            centers = 0.5 * (p.edges[:-1] + p.edges[1:])
            width = float(p.edges[1] - p.edges[0])
            plt = widget.plt
            plt.clear_figure()
            plt.frame(self.plot_rows() >= BANDS_MIN_ROWS)
            c = colors[a]
            for mode, mark, shift in (("expl", EXPL_MARK, -0.25), ("greedy", GREEDY_MARK, 0.25)):
                if mode in p.counts:  # side by side, each a quarter bin wide: neither hides the other
                    plt.bar((centers + shift * width).tolist(), p.counts[mode].tolist(), color=c, marker=mark,
                            width=0.2)
            plt.vline(bound, REF_COLOR)
            set_ticks(plt, "x", float(p.edges[0]), float(p.edges[-1]), 4)
            set_ticks(plt, "y", 0.0, top * 1.05, 3, integer=True)
            own = " · own x scale" if a in sel.not_safe else ""
            plt.title(f"{a} (n={p.n_episodes.get('expl', 0)}/{p.n_episodes.get('greedy', 0)}){own}")
            plt.xlabel("final episodic cost")
            plt.ylabel("episodes")
            widget.refresh()
        self.set_legend(Text.assemble(
            (f" {EXPL_MARK}{EXPL_MARK} expl  ", "bold"), (f"{GREEDY_MARK}{GREEDY_MARK} greedy", "bold"),
            ("  ┃ bound d", REF_RICH), ("  · colour: algorithm · same x and y scales", "dim")))
        title = self.condition_text(task, bound)
        title.append(f" · final policy, seeds pooled · n = expl/greedy episodes · {self.bins} bins (+/−)")
        self.set_title(title)

    def action_adjust(self, step: int) -> None:
        """More or fewer histogram bins (5..100)."""
        new = max(5, min(100, self.bins + 5 * step))
        if new != self.bins:
            self.bins = new
            self.request_data()

    def export_tables(self) -> Files:
        if self.data is None:
            return []
        return histogram_files(*self.data)
