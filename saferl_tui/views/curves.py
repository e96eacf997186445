"""The Curves view (key 4): reward, cost (bound drawn) and multiplier of one condition, seed mean ± std
after a moving average, against training iterates or env steps (x). The setting (t) picks the episodes:
train, or the expl / greedy evaluations at the iterates the cube evaluated. `v` puts another per-iterate
variable in the multiplier's place (a PID state, Saute's budget, CRPO's regime, SAC's temperature ...).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import xarray as xr
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual_plotext import PlotextPlot

from cube.render.style import iterate_var_label
from cube.render.viewrows import curve_files
from cube.stats.metrics import METRIC, SETTING
from saferl_tui.exports import Files
from saferl_tui.model import CubeModel
from saferl_tui.selection import UISelection
from saferl_tui.views.format import REF_COLOR, REF_RICH, legend_text, nan_none, padded_range
from saferl_tui.views.plot import (
    BANDS_MIN_ROWS,
    ConditionCycler,
    condition_bindings,
    fitted_title,
    focused_range,
    set_ticks,
)

WINDOWS = (1, 2, 3, 5, 10, 20, 50)
"""Moving-average windows (iterates) that + / − step through."""
PANELS = (("curves-reward", "reward"), ("curves-cost", "cost"), ("curves-mult", "multiplier"))


class CurvesView(ConditionCycler):
    """Reward, cost (bound drawn) and multiplier per iterate or env step: seed mean ± std, moving average."""

    VIEW_ID = "curves"
    TITLE = "Curves"
    KEY = "4"
    BINDINGS: ClassVar[list[BindingType]] = [
        *condition_bindings(VIEW_ID),
        Binding("x", "toggle_x", "x: iterates / env steps", id="curves.x"),
        Binding("plus,equals_sign", "adjust(1)", "Smoothing +", id="curves.window_up"),
        Binding("minus", "adjust(-1)", "Smoothing −", id="curves.window_down"),
        Binding("p", "next_panel", "Next plot / all", id="curves.panels"),
        Binding("v", "next_var", "Third plot: multiplier → PID state, budget, regime, α …", id="curves.var"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.window = 1
        self.by_steps = False
        self.var = "multiplier"
        """The per-iterate variable of the third plot."""
        self.listing = False
        """Whether fetches also list the variables with values (after the first `v`: it reads each once)."""
        self._advance = False

    def compose_plots(self) -> ComposeResult:
        yield from self.plot_grid("curves-grid", PANELS)

    def mode(self) -> str:
        """Which episodes: train, or the expl / greedy evaluations (from the setting, t)."""
        return SETTING[self.selection.setting].mode if self.selection is not None else "train"

    def params(self) -> tuple:
        return (self.window, self.mode(), self.var, self.listing)

    def view_options(self) -> dict:
        return {**super().view_options(), "window": self.window, "curve_var": self.var,
                "x_axis": "env_steps" if self.by_steps else "iterate"}

    def apply_view_options(self, options: dict) -> None:
        super().apply_view_options(options)
        if options.get("window") is not None:
            self.window = int(options["window"])
        if options.get("curve_var") is not None:
            self.var = str(options["curve_var"])
            self.listing = self.var != "multiplier"  # the fetch checks the variable has values
        if options.get("x_axis") is not None:
            self.by_steps = options["x_axis"] == "env_steps"

    def describe_params(self) -> dict:
        cond = self.condition()
        return {"condition": None if cond is None else {"task": cond[0], "bound": cond[1]}, "window": self.window,
                "x": "env_steps" if self.by_steps else "iterate", "episodes": self.mode(), "var": self.var}

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> tuple:
        """(curves, per-iterate variable curves, env steps, names of the variables with values or ())."""
        window, mode, var, listing = params
        names = model.iterate_vars(sel) if listing else ()
        if var not in names and listing:
            var = "multiplier"  # a selection without the variable: back to the multiplier
        return (*model.curves(sel, window, mode, var), names)

    def shown(self) -> tuple[xr.Dataset, xr.Dataset | None, tuple[str, float]] | None:
        """(curves, multiplier, condition) of the condition on screen."""
        cond = self.condition()
        if self.data is None or cond is None:
            return None
        curves, mult = self.data[0], self.data[1]
        t, b = cond
        return curves.sel(task=t, bound=b), (mult.sel(task=t, bound=b) if mult is not None else None), cond

    def _x(self, iterates: np.ndarray, algo: str, cond: tuple[str, float]) -> np.ndarray:
        """The x values of an algorithm's curve: iterates, or its seed-mean env steps at those iterates."""
        steps = self.data[2] if self.data is not None and len(self.data) > 2 else None
        if not self.by_steps or steps is None:
            return iterates.astype(float)
        s = steps.sel(algo=algo, task=cond[0], bound=cond[1]).sel(iterate=iterates)
        return np.asarray(s.values, dtype=float)

    def render_data(self, data: tuple) -> None:
        sel = self.selection
        assert sel is not None
        shows = data[1].attrs.get("var", self.var) if data[1] is not None else self.var
        self.query_one("#curves-mult").panel_name = str(shows)  # type: ignore[attr-defined]
        self.arrange_plots()
        if self._advance_var(data):
            return
        shown = self.shown()
        if shown is None:
            return
        cur, mult, cond = shown
        task, bound = cond
        colors = self.colors_of([str(a) for a in cur["algo"].values])
        iters = cur["iterate"].values
        has_steps = len(data) > 2 and data[2] is not None
        xlabel = "env steps (seed mean)" if self.by_steps and has_steps else "iterate"
        mode = self.mode()
        episodes = "train episodes" if mode == "train" else f"{mode} evaluations"
        xs = {a: self._x(iters, a, cond) for a in colors}
        xall = np.concatenate(list(xs.values())) if xs else np.array([0.0])
        if mult is not None and colors:  # the whole training range: evaluations sit where they were made
            xall = np.concatenate([xall, *[self._x(mult["iterate"].values, a, cond) for a in colors]])
        bands = self.plot_rows() >= BANDS_MIN_ROWS
        for wid, var, title in (("curves-reward", "R", f"Reward {METRIC['R'].label} ({mode})"),
                                ("curves-cost", "C", f"Cost {METRIC['C'].label} ({mode})")):
            widget = self.query_one(f"#{wid}", PlotextPlot)
            plt = widget.plt
            plt.clear_figure()
            plt.frame(self.plot_rows() >= BANDS_MIN_ROWS)
            ys: dict[str, list[np.ndarray]] = {}
            floor = 0.0 if var == "C" else None  # costs are >= 0: the ± std band stops at 0
            for a, c in colors.items():
                m, s = cur[f"{var}_mean"].sel(algo=a).values, cur[f"{var}_std"].sel(algo=a).values
                _band(plt, xs[a], m, s if bands else None, c, floor)
                ys[a] = [_floored(m - s, floor), m + s] if bands else [m]
            ylo, yhi, off = focused_range(ys, sel.not_safe, (bound,) if var == "C" else ())
            if var == "C":
                plt.hline(bound, REF_COLOR)
            width = self.plot_columns(widget)
            plt.title(fitted_title(width, title + (f" · {', '.join(off)} off scale" if off else ""), title,
                                   title.split(" (")[0]))
            plt.xlabel(xlabel)
            plt.ylabel(f"{METRIC[var].label} per episode")
            set_ticks(plt, "x", *_xrange(xall), 5, integer=not self.by_steps)
            set_ticks(plt, "y", ylo, yhi, 4)
            widget.refresh()
        self._render_mult(mult, colors, xall, xlabel, cond, bands)
        n_eval = int(np.isfinite(cur["R_mean"].values).any(axis=0).sum()) if cur["R_mean"].ndim > 1 else 0
        legend_extra = [("━ bound d", REF_RICH),
                        ("· ± std over seeds" if bands else "(± std: taller plots, p)", "dim")]
        self.set_legend(legend_text(colors, legend_extra))
        title = self.condition_text(task, bound)
        smooth = f"smoothed over {self.window} {'evaluation' if mode != 'train' else 'iterate'}" + (
            "s" if self.window > 1 else "")
        title.append(f" · {episodes}" + (f" at {n_eval} evaluated iterate{'s' if n_eval != 1 else ''}"
                                         if mode != "train" else "")
                     + f" (t) · seed mean, {smooth} (+/−) · x: {'env steps' if self.by_steps else 'iterate'} (x)")
        if self.by_steps and not has_steps:
            title.append(" · this cube has no env steps", style="dark_orange")
        self.set_title(title)

    def _render_mult(self, mult: xr.Dataset | None, colors: dict, xall: np.ndarray, xlabel: str,
                     cond: tuple[str, float], bands: bool) -> None:
        widget = self.query_one("#curves-mult", PlotextPlot)
        plt = widget.plt
        plt.clear_figure()
        plt.frame(bands)
        var = str(mult.attrs.get("var", self.var)) if mult is not None else self.var
        floor = 0.0 if mult is None or mult.attrs.get("nonnegative", 1) else None  # a multiplier is >= 0
        any_mult = False
        ys = []
        if mult is not None:
            it = mult["iterate"].values
            for a, c in colors.items():
                m = mult["mult_mean"].sel(algo=a).values
                if np.isfinite(m).any():
                    s = mult["mult_std"].sel(algo=a).values
                    _band(plt, self._x(it, a, cond), m, s if bands else None, c, floor)
                    ys += [_floored(m - s, floor), m + s] if bands else [m]
                    any_mult = True
            x_mult = np.concatenate([self._x(it, a, cond) for a in colors]) if colors else xall
        else:
            x_mult = xall
        label = "Multiplier λ/κ/ν" if var == "multiplier" else iterate_var_label(var)
        width, low = self.plot_columns(widget), label.lower()
        if any_mult:
            plt.title(fitted_title(width, f"{label} (train) · v: next variable", f"{label} (train) · v: next",
                                   f"{label} · v", label))
        else:
            plt.title(fitted_title(width, f"no {low} (in this cube or selection) · v: next variable",
                                   f"no {low} in this selection · v: next", f"no {low} · v"))
        plt.xlabel(xlabel)
        plt.ylabel(iterate_var_label(var))
        set_ticks(plt, "x", *_xrange(x_mult), 5, integer=not self.by_steps)
        if any_mult:
            set_ticks(plt, "y", *padded_range(*ys), 4)
        widget.refresh()

    def action_next_var(self) -> None:
        """Show the next per-iterate variable with values in the selection in the third plot (the first press
        lists them: one read of each)."""
        self._advance = True
        if not self.listing:
            self.listing = True
            self.request_data()
            return
        if self.data is not None:
            self._advance_var(self.data)

    def _advance_var(self, data: tuple) -> bool:
        """After `v`: move to the variable after the one shown and fetch it; True when a fetch was asked for."""
        if not self._advance or len(data) < 4 or not self.listing:
            return False
        self._advance = False
        names = list(data[3])
        if len(names) <= 1:
            self.notify("no other per-iterate variable has values in this selection", timeout=4)
            return False
        now = names.index(self.var) if self.var in names else -1
        self.var = names[(now + 1) % len(names)]
        self.request_data()
        return True

    def condition_changed(self) -> None:
        self.redraw()  # the data holds every condition

    def action_toggle_x(self) -> None:
        """Plot against training iterates or against env steps (seed mean per iterate)."""
        self.by_steps = not self.by_steps
        self.redraw()

    def action_adjust(self, step: int) -> None:
        """Grow or shrink the moving-average window along 1, 2, 3, 5, 10, 20, 50 iterates."""
        i = WINDOWS.index(self.window) if self.window in WINDOWS else 0
        new = WINDOWS[max(0, min(len(WINDOWS) - 1, i + step))]
        if new != self.window:
            self.window = new
            self.request_data()

    def export_tables(self) -> Files:
        cond = self.condition()
        if self.data is None or cond is None:
            return []
        return curve_files(self.data, cond, self.mode(), self.window, self.var)


def _xrange(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    return (float(x.min()), float(x.max())) if x.size else (0.0, 1.0)


def _floored(x: np.ndarray, floor: float | None) -> np.ndarray:
    return x if floor is None else np.maximum(x, floor)


def _band(plt: Any, x: np.ndarray, mean: np.ndarray, std: np.ndarray | None, color: Any,
          floor: float | None = None) -> None:
    """Plot a mean line and (``std`` not None) mean ± std as dotted lines of the same colour (points where
    x and the mean are finite; a lone point gets a marker); the lower edge no lower than `floor`."""
    x = np.asarray(x, float)
    ok = np.isfinite(x) & np.isfinite(mean)
    if not ok.any():
        return
    xs = x[ok].tolist()
    if std is not None and np.isfinite(std[ok]).any():
        lo, hi = _floored(mean - std, floor)[ok], (mean + std)[ok]
        plt.plot(xs, nan_none(lo), color=color, marker="·")
        plt.plot(xs, nan_none(hi), color=color, marker="·")
    plt.plot(xs, mean[ok].tolist(), color=color, marker="hd" if ok.sum() > 1 else "●")
