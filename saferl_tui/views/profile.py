"""The Profiles view (key 9): run-level performance profiles, beyond the paper (rliable's performance profile,
for costs): for the current setting (t), per metric the share of runs (seed x condition) with X <= tau as a
step curve per algorithm, with the edges of its stratified-bootstrap band and the tier thresholds
(`cube.stats.performance_profiles`).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import xarray as xr
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual_plotext import PlotextPlot

from cube.render.style import TIER_GUIDES
from cube.stats.metrics import METRIC, SETTING
from cube.stats.profiles import profile_metrics
from saferl_tui.exports import Files, rendered_files
from saferl_tui.model import CubeModel
from saferl_tui.selection import UISelection
from saferl_tui.views.format import REF_COLOR, REF_RICH, incomplete_note, legend_text, nan_none
from saferl_tui.views.plot import BANDS_MIN_ROWS, PlotView, set_ticks


def steps(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A step function drawn as a line (value y[i] from x[i] up to x[i+1]): (2n - 1,) points each."""
    return np.repeat(x, 2)[1:], np.repeat(y, 2)[:-1]


def x_window(tau: np.ndarray, fractions: dict[str, np.ndarray], not_safe: tuple[str, ...], metric: str
             ) -> tuple[float, float, list[str]]:
    """The tau range drawn: V on [0, 1]; otherwise from the grid's start to where every safe-RL algorithm's
    profile has reached 1 (a fifth more, within the grid), so the region where safe runs differ is not
    squeezed by an unconstrained baseline's far tail. Returns (lo, hi, algorithms cut off on the right)."""
    if metric == "V" or tau.size < 2:
        return float(tau[0]), float(tau[-1]), []
    lo, top = float(tau[0]), float(tau[-1])
    safe = [f for a, f in fractions.items() if a not in not_safe and np.isfinite(f).any()]
    if not safe:
        return lo, top, []
    reach = [float(tau[np.argmax(f >= 1.0)]) if (f >= 1.0).any() else top for f in safe]
    hi = min(top, max(reach) + 0.2 * (max(reach) - lo))
    if hi <= lo:
        return lo, top, []
    last = int(np.searchsorted(tau, hi, side="right")) - 1
    return lo, hi, [a for a, f in fractions.items() if a in not_safe and np.isfinite(f[last]) and f[last] < 1.0]


class ProfileView(PlotView):
    """Share of runs with X <= tau per metric, algorithm and tau, with bootstrap band edges."""

    VIEW_ID = "profile"
    TITLE = "Profiles"
    KEY = "9"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "next_panel", "Next plot / all", id="profile.panels"),
    ]

    def compose_plots(self) -> ComposeResult:
        yield from self.plot_grid("profile-plots", [(f"profile-{m}", METRIC[m].label) for m in profile_metrics()],
                                  "profile-plot")

    @staticmethod
    def fetch(model: CubeModel, sel: UISelection, params: tuple) -> xr.Dataset:
        return model.profiles(sel, sel.setting)

    def figure_settings(self) -> tuple[str, ...] | None:
        return (self.selection.setting,) if self.selection is not None else None

    def render_data(self, prof: xr.Dataset) -> None:
        sel = self.selection
        assert sel is not None
        self.arrange_plots()
        s = str(prof["setting"].values[0])
        colors = self.colors_of([str(a) for a in prof["algo"].values])
        for m in profile_metrics():
            widget = self.query_one(f"#profile-{m}", PlotextPlot)
            plt = widget.plt
            plt.clear_figure()
            plt.frame(self.plot_rows() >= BANDS_MIN_ROWS)
            if m not in prof["metric"].values:
                widget.refresh()
                continue
            tau_all = prof["tau"].sel(metric=m).values
            ok = np.isfinite(tau_all)
            tau = tau_all[ok]
            one = prof.sel(setting=s, metric=m)
            fractions = {a: one["fraction"].sel(algo=a).values[ok] for a in colors}
            lo, hi, cut = x_window(tau, fractions, sel.not_safe, m)
            keep = tau <= hi
            x = np.append(tau[keep], hi)  # the last step runs on to the window's edge, never past it

            def values(v: np.ndarray, keep: np.ndarray = keep) -> np.ndarray:
                return np.asarray(nan_none(np.append(v[keep], v[keep][-1:])), dtype=float)

            for a, c in colors.items():  # band edges first, the profile drawn over them
                for k in ("ci_low", "ci_high"):
                    plt.plot(*steps(x, values(one[k].sel(algo=a).values[ok])), color=c, marker="·")
            for a, c in colors.items():
                plt.plot(*steps(x, values(fractions[a])), color=c, marker="hd")
            for t in TIER_GUIDES.get(m, ()):
                plt.vline(t, REF_COLOR)
            plt.title(f"{METRIC[m].label}: runs ≤ τ" + (f" · {', '.join(cut)} off scale →" if cut else ""))
            plt.xlabel(f"τ ({METRIC[m].label})")
            plt.ylabel("share")
            set_ticks(plt, "y", 0.0, 1.0, 4)
            set_ticks(plt, "x", lo, hi, 5)
            widget.refresh()
        self.set_legend(legend_text(colors, [("┃ tier threshold", REF_RICH), ("· 95% CI band", "")]))
        text = Text(f"Profiles, {SETTING[s].label if s in SETTING else s} (t): share of runs (seed × condition) with "
                    f"X ≤ τ, 95% band (B={prof.attrs.get('boot', '?')}); up-left is safer ")
        text.append_text(incomplete_note(self.incomplete))
        self.set_title(text)

    def export_tables(self) -> Files:
        if self.data is None or self.selection is None:
            return []
        return rendered_files("profile", "profile", self.data, self.selection.not_safe)
