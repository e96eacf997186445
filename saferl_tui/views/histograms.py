"""The Histograms view (key 5): final episodic cost distribution of one condition, expl vs greedy, one
plot per algorithm in its colour (expl ░, greedy █), the bound d marked.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual_plotext import PlotextPlot

from saferl_tui.exports import Files, table_files
from saferl_tui.model import CubeModel, UISelection
from saferl_tui.views.format import REF_COLOR, REF_RICH, condition_label
from saferl_tui.views.plot import BANDS_MIN_ROWS, ConditionCycler, condition_bindings, set_ticks

EXPL_MARK, GREEDY_MARK = "░", "█"


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
        _cond, (hists, _costs) = data
        await self._ensure_plots(list(hists))
        self.render_data(data)

    def render_data(self, data: Any) -> None:
        sel = self.selection
        assert sel is not None
        (task, bound), (hists, costs) = data
        self.arrange_plots()
        colors = self.colors_of(list(hists))
        top = max((int(max(c["expl"].max(), c["greedy"].max())) for _, c in hists.values()), default=1)
        for widget, a in zip(self.query(".hist-plot").results(PlotextPlot), hists, strict=False):
            edges, counts = hists[a]
            centers = 0.5 * (edges[:-1] + edges[1:])
            width = float(edges[1] - edges[0])
            plt = widget.plt
            plt.clear_figure()
            plt.frame(self.plot_rows() >= BANDS_MIN_ROWS)
            c = colors[a]
            plt.bar((centers - width / 4).tolist(), counts["expl"].tolist(), color=c, marker=EXPL_MARK, width=0.4)
            plt.bar((centers + width / 4).tolist(), counts["greedy"].tolist(), color=c, marker=GREEDY_MARK,
                    width=0.4)
            plt.vline(bound, REF_COLOR)
            set_ticks(plt, "x", float(edges[0]), float(edges[-1]), 4)
            set_ticks(plt, "y", 0.0, top * 1.05, 3, integer=True)
            n_e, n_g = costs[a]["expl"].size, costs[a]["greedy"].size
            plt.title(f"{a} (n={n_e}/{n_g})")
            plt.xlabel("final episodic cost")
            plt.ylabel("episodes")
            widget.refresh()
        self.set_legend(Text.assemble(
            (f" {EXPL_MARK}{EXPL_MARK} expl  ", "bold"), (f"{GREEDY_MARK}{GREEDY_MARK} greedy", "bold"),
            ("  ┃ bound d", REF_RICH), ("  · colour: algorithm · same y scale", "dim")))
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
        (task, bound), (hists, _costs) = self.data
        header = ["algo", "bin_low", "bin_high", "expl", "greedy"]
        rows = [[a, float(edges[i]), float(edges[i + 1]), int(counts["expl"][i]), int(counts["greedy"][i])]
                for a, (edges, counts) in hists.items() for i in range(len(edges) - 1)]
        return table_files(f"hist_{task}_d{bound:g}", header, rows,
                           f"Final episodic cost histogram, {condition_label(task, bound)} (counts)")
