"""The CDF view (key 3): empirical CDF of the normalized episodic cost deviation κ with the edges of its
bootstrap band, for the current setting or all three (p).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import xarray as xr
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual_plotext import PlotextPlot

from cube.stats.metrics import SETTING, SETTINGS
from saferl_tui.exports import Files, rendered_files
from saferl_tui.model import CubeModel
from saferl_tui.selection import UISelection
from saferl_tui.views.format import REF_COLOR, REF_RICH, incomplete_note, legend_text, nan_none, setting_title
from saferl_tui.views.plot import BANDS_MIN_ROWS, PlotView, set_ticks

XRANGES: tuple[tuple[float, float], ...] = ((-0.5, 0.5), (-1.0, 1.0), (-1.0, 2.0), (-1.0, 4.0), (-1.0, 8.0),
                                            (-math.inf, math.inf))
"""The κ windows that [ (narrower) and ] (wider) step through; both limits move (κ ≥ −1 always: a cost
of 0 is κ = −1); the last is the full range."""


class CdfView(PlotView):
    """Empirical CDF of the normalized episodic cost deviation with bootstrap band edges."""

    VIEW_ID = "cdf"
    TITLE = "CDF"
    KEY = "3"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "next_panel", "All settings / one", id="cdf.panels"),
        Binding("right_square_bracket", "wider", "κ range wider", id="cdf.wider"),
        Binding("left_square_bracket", "narrower", "κ range narrower", id="cdf.narrower"),
    ]

    GRID_MIN_H = 12
    """Three CDFs share the view only where each gets 9 data rows: at 80x24 five rows drew the algorithms'
    steps on top of each other (ppo_lag hidden under focops), so one setting is shown (t cycles)."""

    def __init__(self) -> None:
        super().__init__()
        self.all_panels = False
        self.xrange = XRANGES[2]

    @property
    def xmax(self) -> float:
        """The upper end of the κ window."""
        return self.xrange[1]

    def compose_plots(self) -> ComposeResult:
        yield from self.plot_grid("cdf-plots", [(f"cdf-{s}", SETTING[s].short) for s in SETTINGS], "cdf-plot")

    def params(self) -> tuple:
        return (self.all_panels,)

    def describe_params(self) -> dict:
        return {"all_settings": self.all_panels, "kappa_range": [self.xrange[0], self.xrange[1]]
                if math.isfinite(self.xrange[1]) else "full"}

    def view_options(self) -> dict:
        return {"all_settings": self.all_panels, "kappa_range": self.xrange}

    def apply_view_options(self, options: dict) -> None:
        if options.get("all_settings") is not None:
            self.all_panels = bool(options["all_settings"])
        wanted = options.get("kappa_range")
        if wanted is not None and float(wanted[0]) < float(wanted[1]):  # any window a view file names
            self.xrange = (float(wanted[0]), float(wanted[1]))

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> xr.Dataset:
        return model.cdf(sel, SETTINGS if params[0] else (sel.setting,))

    def figure_settings(self) -> tuple[str, ...] | None:
        return self.shown_settings() if self.selection is not None else None

    def shown_settings(self) -> tuple[str, ...]:
        """The settings drawn: all three, or the current one."""
        assert self.selection is not None
        return SETTINGS if self.all_panels else (self.selection.setting,)

    def panels(self) -> list:
        return [self.query_one(f"#cdf-{s}", PlotextPlot) for s in self.shown_settings()] if self.selection else []

    def single_index(self, n: int, fits: bool) -> int:
        assert self.selection is not None
        shown = self.shown_settings()
        return shown.index(self.selection.setting) if self.selection.setting in shown else 0

    def single_note(self, idx: int, n: int, fits: bool) -> str:
        size = f"{self.app.size.width}x{self.app.size.height}"
        return f" {size}: too small for 3 plots, one setting shown (t: next)"

    def shown(self) -> xr.Dataset:
        """The CDF data on screen: shown settings, kappa within the x-range."""
        cdf = self.data
        assert cdf is not None
        k = cdf["kappa"].values
        lo, hi = self.xrange
        keep = (k >= lo) & (k <= hi)
        return cdf.sel(setting=list(self.shown_settings())).isel(kappa=np.flatnonzero(keep))

    def render_data(self, cdf: xr.Dataset) -> None:
        sel = self.selection
        assert sel is not None
        self.arrange_plots()
        shown = self.shown()
        colors = self.colors_of([str(a) for a in shown["algo"].values])
        kappa = shown["kappa"].values.astype(float)
        for s in self.shown_settings():
            widget = self.query_one(f"#cdf-{s}", PlotextPlot)
            plt = widget.plt
            plt.clear_figure()
            plt.frame(self.plot_rows() >= BANDS_MIN_ROWS)
            for a, c in colors.items():  # band edges first, so the curves are drawn over them
                p = shown.sel(algo=a, setting=s)
                plt.plot(kappa, nan_none(p["ci_low"].values), color=c, marker="·")
                plt.plot(kappa, nan_none(p["ci_high"].values), color=c, marker="·")
            for a, c in colors.items():
                plt.plot(kappa, nan_none(shown["cdf"].sel(algo=a, setting=s).values), color=c, marker="hd")
            plt.vline(0.0, REF_COLOR)
            plt.title(setting_title(sel, s))
            plt.xlabel("κ = (c − d)/d")
            plt.ylabel("P(κ_ep ≤ κ)")
            set_ticks(plt, "y", 0.0, 1.0, 4)
            if kappa.size:
                set_ticks(plt, "x", float(kappa.min()), float(kappa.max()), 5)
            widget.refresh()
        lo, hi = self.xrange
        xr_txt = "full" if not math.isfinite(hi) else f"{lo:g}..{hi:g}"
        self.set_legend(legend_text(colors, [("┃ κ=0 (cost = d)", REF_RICH), ("· 95% CI band", "")]))
        text = Text(f"CDF of normalized episodic cost deviation κ, episodes pooled per algorithm · "
                    f"κ {xr_txt} ([ / ]) · p: all settings / one")
        text.append_text(incomplete_note(self.incomplete))
        self.set_title(text)

    def action_next_panel(self) -> None:
        """Show all three settings side by side, or only the current one."""
        self.all_panels = not self.all_panels
        self.panel = None
        self.request_data()

    def _step(self, step: int) -> None:
        if self.xrange not in XRANGES:  # a window from a view file: the next preset wider / narrower
            width = self.xrange[1] - self.xrange[0]
            wider = [r for r in XRANGES if r[1] - r[0] > width]
            narrower = [r for r in XRANGES if r[1] - r[0] < width]
            if step > 0:
                self.xrange = wider[0] if wider else XRANGES[-1]
            else:
                self.xrange = narrower[-1] if narrower else XRANGES[0]
        else:
            i = XRANGES.index(self.xrange)
            self.xrange = XRANGES[max(0, min(len(XRANGES) - 1, i + step))]
        self.redraw()

    def action_wider(self) -> None:
        """Widen the κ window (both ends): −0.5..0.5, −1..1, −1..2, −1..4, −1..8, full."""
        self._step(1)

    def action_narrower(self) -> None:
        """Narrow the κ window."""
        self._step(-1)

    def export_tables(self) -> Files:
        if self.data is None or self.selection is None:
            return []
        return rendered_files("cdf", "cdf", self.shown(), self.selection.not_safe)
