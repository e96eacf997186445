"""The CDF view (key 3): empirical CDF of the normalized episodic cost deviation κ with the edges of its
bootstrap band, for the current setting or all three."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import xarray as xr
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Static
from textual_plotext import PlotextPlot

from cube.metrics import SETTINGS
from saferl_tui.model import CubeModel, UISelection
from saferl_tui.views.base import Files, ResultView, algo_colors, nan_none, rendered_files, setting_title

XMAX_STEPS = (0.5, 1.0, 2.0, 4.0, 8.0, math.inf)
"""The x-ranges ([ / ] step through them; inf: the full range)."""


class CdfView(ResultView):
    """Empirical CDF of the normalized episodic cost deviation with bootstrap band edges."""

    VIEW_ID = "cdf"
    TITLE = "CDF"
    KEY = "3"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "toggle_panels", "All settings / one", id="cdf.panels"),
        Binding("right_square_bracket", "wider", "x-range +", id="cdf.wider"),
        Binding("left_square_bracket", "narrower", "x-range −", id="cdf.narrower"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.all_panels = False
        self.xmax = 2.0

    def compose_body(self) -> ComposeResult:
        yield Static("", id="cdf-title", classes="table-title")
        with Horizontal(id="cdf-plots"):
            for s in SETTINGS:
                yield PlotextPlot(id=f"cdf-{s}", classes="cdf-plot")

    def params(self) -> tuple:
        return (self.all_panels,)

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> xr.Dataset:
        return model.cdf(sel, SETTINGS if params[0] else (sel.setting,))

    def shown_settings(self) -> tuple[str, ...]:
        """The settings drawn: all three, or the current one."""
        assert self.selection is not None
        return SETTINGS if self.all_panels else (self.selection.setting,)

    def shown(self) -> xr.Dataset:
        """The CDF data on screen: shown settings, kappa within the x-range."""
        cdf = self.data
        assert cdf is not None
        k = cdf["kappa"].values
        keep = k <= self.xmax if math.isfinite(self.xmax) else np.ones(k.shape, bool)
        return cdf.sel(setting=list(self.shown_settings())).isel(kappa=np.flatnonzero(keep))

    def render_data(self, cdf: xr.Dataset) -> None:
        sel = self.selection
        assert sel is not None
        shown = self.shown()
        colors = algo_colors(tuple(str(a) for a in shown["algo"].values), sel.baseline)
        kappa = shown["kappa"].values.astype(float)
        for s in SETTINGS:
            widget = self.query_one(f"#cdf-{s}", PlotextPlot)
            widget.display = s in self.shown_settings()
            if not widget.display:
                continue
            plt = widget.plt
            plt.clear_figure()
            for a, c in colors.items():  # band edges first, so the curves are drawn over them
                p = shown.sel(algo=a, setting=s)
                plt.plot(kappa, nan_none(p["ci_low"].values), color=c, marker="·")
                plt.plot(kappa, nan_none(p["ci_high"].values), color=c, marker="·")
            for a, c in colors.items():
                plt.plot(kappa, nan_none(shown["cdf"].sel(algo=a, setting=s).values), color=c, label=a,
                         marker="braille")
            plt.vline(0.0, "gray")
            plt.title(setting_title(sel, s))
            plt.xlabel("κ = (c − d)/d")
            plt.ylim(0, 1)
            if kappa.size:
                plt.xlim(float(kappa.min()), float(kappa.max()))
            widget.refresh()
        xr_txt = "full" if not math.isfinite(self.xmax) else f"≤ {self.xmax:g}"
        self.query_one("#cdf-title", Static).update(
            f"CDF of normalized cost deviation · lines: CDF, dots: 95% CI band edges · gray: κ=0 · x {xr_txt}"
            " ([ / ]) · p: all settings / one")

    def action_toggle_panels(self) -> None:
        """Show all three settings side by side, or only the current one."""
        self.all_panels = not self.all_panels
        self.request_data()

    def action_wider(self) -> None:
        """Extend the x-range (0.5, 1, 2, 4, 8, full)."""
        i = XMAX_STEPS.index(self.xmax)
        self.xmax = XMAX_STEPS[min(i + 1, len(XMAX_STEPS) - 1)]
        self.redraw()

    def action_narrower(self) -> None:
        """Shrink the x-range."""
        i = XMAX_STEPS.index(self.xmax)
        self.xmax = XMAX_STEPS[max(i - 1, 0)]
        self.redraw()

    def export_tables(self) -> Files:
        if self.data is None or self.selection is None:
            return []
        return rendered_files("saferl_cdf", "cdf", self.shown(), self.selection.baseline)
