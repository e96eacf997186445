"""The Curves view (key 4): reward, cost (bound drawn) and multiplier per training iterate of one
condition: seed mean ± std after a moving average."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import xarray as xr
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.widgets import Static
from textual_plotext import PlotextPlot

from cube.metrics import METRIC
from saferl_tui.model import CubeModel, UISelection
from saferl_tui.views.base import (
    ConditionCycler,
    Files,
    algo_colors,
    condition_bindings,
    condition_label,
    nan_none,
    table_files,
)

WINDOWS = (1, 2, 3, 5, 10, 20, 50)
"""Moving-average windows (iterates) that + / − step through."""


class CurvesView(ConditionCycler):
    """Reward, cost (bound drawn) and multiplier per iterate: seed mean ± std, moving average."""

    VIEW_ID = "curves"
    TITLE = "Curves"
    KEY = "4"
    BINDINGS: ClassVar[list[BindingType]] = [
        *condition_bindings(VIEW_ID),
        Binding("plus,equals_sign", "window(1)", "Window +", id="curves.window_up"),
        Binding("minus", "window(-1)", "Window −", id="curves.window_down"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.window = 1

    def compose_body(self) -> ComposeResult:
        yield Static("", id="curves-title", classes="table-title")
        with Grid(id="curves-grid"):
            yield PlotextPlot(id="curves-reward")
            yield PlotextPlot(id="curves-cost")
            yield PlotextPlot(id="curves-mult")

    def params(self) -> tuple:
        return (self.window,)

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> tuple:
        return model.curves(sel, params[0])

    def shown(self) -> tuple[xr.Dataset, xr.Dataset | None, tuple[str, float]] | None:
        """(curves, multiplier, condition) of the condition on screen."""
        cond = self.condition()
        if self.data is None or cond is None:
            return None
        curves, mult = self.data
        t, b = cond
        return curves.sel(task=t, bound=b), (mult.sel(task=t, bound=b) if mult is not None else None), cond

    def render_data(self, data: tuple) -> None:
        sel = self.selection
        assert sel is not None
        shown = self.shown()
        if shown is None:
            return
        cur, mult, (task, bound) = shown
        colors = algo_colors(tuple(str(a) for a in cur["algo"].values), sel.baseline)
        x = cur["iterate"].values.astype(float).tolist()
        for wid, var, title in (("curves-reward", "R", f"Reward {METRIC['R'].label}"),
                                ("curves-cost", "C", f"Cost {METRIC['C'].label} (d={bound:g})")):
            plt = self.query_one(f"#{wid}", PlotextPlot).plt
            plt.clear_figure()
            for a, c in colors.items():
                _band(plt, x, cur[f"{var}_mean"].sel(algo=a).values, cur[f"{var}_std"].sel(algo=a).values, c, a)
            if var == "C":
                plt.hline(bound, "gray")
            plt.title(title)
            plt.xlabel("iterate")
            _int_ticks(plt, x)
            self.query_one(f"#{wid}", PlotextPlot).refresh()
        mplot = self.query_one("#curves-mult", PlotextPlot)
        plt = mplot.plt
        plt.clear_figure()
        if mult is not None:
            for a, c in colors.items():
                m = mult["mult_mean"].sel(algo=a).values
                if np.isfinite(m).any():
                    _band(plt, x, m, mult["mult_std"].sel(algo=a).values, c, a)
        plt.title("Multiplier (λ / κ / ν)" if mult is not None else "no multiplier in this cube")
        plt.xlabel("iterate")
        _int_ticks(plt, x)
        mplot.refresh()
        self.query_one("#curves-title", Static).update(
            f"{self.condition_text(task, bound)} · train episodes · seed mean ± std (dots) · moving average "
            f"{self.window} iterate{'s' if self.window > 1 else ''} (+ / −)")

    def condition_changed(self) -> None:
        self.redraw()  # the data holds every condition

    def action_window(self, step: int) -> None:
        """Grow or shrink the moving-average window along 1, 2, 3, 5, 10, 20, 50 iterates."""
        i = WINDOWS.index(self.window) if self.window in WINDOWS else 0
        new = WINDOWS[max(0, min(len(WINDOWS) - 1, i + step))]
        if new != self.window:
            self.window = new
            self.request_data()

    def export_tables(self) -> Files:
        shown = self.shown()
        if shown is None:
            return []
        cur, mult, (task, bound) = shown
        header = ["algo", "task", "bound", "iterate", "window", "R_mean", "R_std", "C_mean", "C_std",
                  "mult_mean", "mult_std"]
        rows = []
        for a in cur["algo"].values:
            for j in cur["iterate"].values:
                p = cur.sel(algo=a, iterate=j)
                mm = mult.sel(algo=a, iterate=j) if mult is not None else None
                rows.append([str(a), task, bound, int(j), self.window, float(p["R_mean"]), float(p["R_std"]),
                             float(p["C_mean"]), float(p["C_std"]),
                             float(mm["mult_mean"]) if mm is not None else math.nan,
                             float(mm["mult_std"]) if mm is not None else math.nan])
        return table_files(f"saferl_curves_{task}_d{bound:g}", header, rows,
                           f"Training curves, {condition_label(task, bound)}, moving average {self.window}")


def _band(plt: Any, x: list[float], mean: np.ndarray, std: np.ndarray, color: str, label: str) -> None:
    """Plot a mean line (labelled) and mean ± std as dotted lines of the same colour."""
    plt.plot(x, nan_none(mean - std), color=color, marker="·")
    plt.plot(x, nan_none(mean + std), color=color, marker="·")
    plt.plot(x, nan_none(mean), color=color, label=label, marker="braille")


def _int_ticks(plt: Any, x: list[float], n: int = 6) -> None:
    """Integer x ticks (iterates) spread over the axis."""
    if x:
        ticks = sorted({int(round(t)) for t in np.linspace(min(x), max(x), min(n, len(x)))})
        plt.xticks(ticks, [str(t) for t in ticks])
