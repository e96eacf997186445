"""The Histograms view (key 5): final episodic cost distribution of one condition, expl vs greedy, one
plot per algorithm, the bound d marked."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.widgets import Static
from textual_plotext import PlotextPlot

from saferl_tui.model import CubeModel, UISelection
from saferl_tui.views.base import ConditionCycler, Files, condition_bindings, condition_label, table_files


class HistogramsView(ConditionCycler):
    """Final episodic cost distribution, expl vs greedy, per algorithm, for one condition; d marked."""

    VIEW_ID = "histograms"
    TITLE = "Histograms"
    KEY = "5"
    BINDINGS: ClassVar[list[BindingType]] = [
        *condition_bindings(VIEW_ID),
        Binding("plus,equals_sign", "bins(5)", "Bins +", id="histograms.bins_up"),
        Binding("minus", "bins(-5)", "Bins −", id="histograms.bins_down"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.bins = 20
        self._plots: list[str] = []

    def compose_body(self) -> ComposeResult:
        yield Static("", id="hist-title", classes="table-title")
        yield Grid(id="hist-grid")

    def params(self) -> tuple:
        return (self.condition(), self.bins)

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
        await grid.mount_all([PlotextPlot(classes="hist-plot") for _ in algos])
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
        for widget, a in zip(self.query(".hist-plot").results(PlotextPlot), hists, strict=False):
            edges, counts = hists[a]
            centers = 0.5 * (edges[:-1] + edges[1:])
            width = float(edges[1] - edges[0])
            plt = widget.plt
            plt.clear_figure()
            plt.bar((centers - width / 4).tolist(), counts["expl"].tolist(), color="blue", label="expl", width=0.4)
            plt.bar((centers + width / 4).tolist(), counts["greedy"].tolist(), color="orange", label="greedy",
                    width=0.4)
            plt.vline(bound, "red")
            ticks = np.linspace(edges[0], edges[-1], 5)
            plt.xticks(ticks.tolist(), [f"{t:.3g}" for t in ticks])
            plt.xlim(float(edges[0]), float(edges[-1]))
            n_e, n_g = costs[a]["expl"].size, costs[a]["greedy"].size
            plt.title(f"{a}  (expl n={n_e}, greedy n={n_g})")
            plt.xlabel("final episodic cost (red: d)")
            widget.refresh()
        self.query_one("#hist-title", Static).update(
            f"{self.condition_text(task, bound)} · final policy episodic cost, selected seeds pooled · blue expl,"
            f" orange greedy · {self.bins} bins (+ / −) · red line: d")

    def action_bins(self, step: int) -> None:
        """More or fewer histogram bins (5..100)."""
        new = max(5, min(100, self.bins + step))
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
        return table_files(f"saferl_hist_{task}_d{bound:g}", header, rows,
                           f"Final episodic cost histogram, {condition_label(task, bound)} (counts)")
