"""The Learning view (key 7): aggregate learning curves, beyond the paper (rliable's sample-efficiency
curve): per training iterate, the IQM over task-bound conditions of the per-condition seed means of each
metric, with the edges of its stratified-bootstrap band (`cube.stats.aggregate_learning_curve`).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import xarray as xr
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual_plotext import PlotextPlot

from cube.render.data import learning_curve_rows
from cube.stats.metrics import METRIC, METRICS
from saferl_tui.exports import Files, table_files
from saferl_tui.model import CubeModel
from saferl_tui.selection import UISelection
from saferl_tui.views.format import REF_COLOR, REF_RICH, incomplete_note, legend_text, nan_none
from saferl_tui.views.plot import BANDS_MIN_ROWS, PlotView, focused_range, set_ticks


class LearningView(PlotView):
    """IQM over conditions per iterate of R̄, C̄, D_norm, V, D_norm+ with bootstrap band edges."""

    VIEW_ID = "learning"
    TITLE = "Learning"
    KEY = "7"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "next_panel", "Next plot / all", id="learning.panels"),
    ]

    def compose_plots(self) -> ComposeResult:
        yield from self.plot_grid("learning-plots", [(f"learning-{m}", METRIC[m].label) for m in METRICS],
                                  "learning-plot")

    def params(self) -> tuple:
        return ()

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> xr.Dataset:
        return model.learning_curve(sel)

    def render_data(self, curve: xr.Dataset) -> None:
        sel = self.selection
        assert sel is not None
        self.arrange_plots()
        colors = self.colors_of([str(a) for a in curve["algo"].values])
        x = curve["iterate"].values.astype(float)
        for m in METRICS:
            widget = self.query_one(f"#learning-{m}", PlotextPlot)
            plt = widget.plt
            plt.clear_figure()
            plt.frame(self.plot_rows() >= BANDS_MIN_ROWS)
            one = curve.sel(metric=m)
            for a, c in colors.items():  # band edges first, the IQM drawn over them
                plt.plot(x, nan_none(one["ci_low"].sel(algo=a).values), color=c, marker="·")
                plt.plot(x, nan_none(one["ci_high"].sel(algo=a).values), color=c, marker="·")
            for a, c in colors.items():
                plt.plot(x, nan_none(one["value"].sel(algo=a).values), color=c, marker="hd")
            if m in ("Dnorm",):
                plt.hline(0.0, REF_COLOR)
            values = {a: [one[k].sel(algo=a).values for k in ("value", "ci_low", "ci_high")] for a in colors}
            ylo, yhi, off = focused_range(values, sel.not_safe, (0.0,) if m == "Dnorm" else ())
            plt.title(f"IQM {METRIC[m].label}" + (f" · {', '.join(off)} off scale" if off else ""))
            plt.xlabel("iterate")
            plt.ylabel(METRIC[m].label)
            if any(np.isfinite(v).any() for vs in values.values() for v in vs):
                set_ticks(plt, "y", ylo, yhi, 4)
            if x.size:
                set_ticks(plt, "x", float(x.min()), float(x.max()), 5)
            widget.refresh()
        self.set_legend(legend_text(colors, [("─ D_norm = 0 (C̄ = d)", REF_RICH), ("· 95% CI band", "")]))
        n_cond = len(sel.tasks) * len(sel.bounds)
        text = Text(f"Learning: IQM over {n_cond} conditions of seed means per iterate, 95% band "
                    f"(B={curve.attrs.get('boot', '?')}) ")
        text.append_text(incomplete_note(self.incomplete))
        self.set_title(text)

    def export_tables(self) -> Files:
        if self.data is None or self.selection is None:
            return []
        header, rows = learning_curve_rows(self.data)
        return table_files("learning", header, rows, "Aggregate learning curves (IQM over conditions, 95% CI)")
