"""Figures of the statistics beyond the paper, drawing only: run-level performance profiles
(`cube.stats.profiles.performance_profiles`) and the reward-cost front across bounds
(`cube.stats.front.reward_cost_front`), as matplotlib Figures (object-oriented API, no pyplot state).

Both follow the look of `cube.render.figures`: colours fixed per algorithm (`algo_colors`, the baseline
grey and dashed), labels from the metric registry, the word SYNTHETIC across figures of synthetic cubes,
`style` "paper" or "screen"; elements carry gids (``line:<algo>:<setting>:<metric>``,
``band:<algo>:<setting>:<metric>``, ``point:<algo>:<bound>:<task>``, ``front:<task>``) for tests and tools.
Save with `cube.render.figures.save_figure`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from cube.render.canvas import legend, mark_synthetic, new_figure, note_empty, order_algos
from cube.render.style import (
    REFERENCE_COLOR,
    TIER_GUIDE_LABELS,
    TIER_GUIDES,
    UNITS,
    algo_colors,
    algo_label,
    focus_limits,
    metric_axis_label,
    setting_label,
    styled,
    task_label,
    tex_symbol,
)
from cube.stats.runs import cvar_alpha

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["profile_figure", "front_figure", "BOUND_MARKERS"]

BOUND_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
"""Marker per bound (in the cube's bound order), the same in every panel."""


def _figure(style: str, panels: tuple[int, int], height: float) -> tuple[Figure, np.ndarray]:
    """A figure of rows x columns panels, each `height` inches high (`cube.render.canvas.new_figure`)."""
    fig = new_figure(style, "double" if panels[1] > 1 else "single", height * panels[0])
    return fig, fig.subplots(*panels, squeeze=False)


# ------------------------------------------------------------------------------------------ profiles
def profile_figure(profiles: xr.Dataset, settings: Sequence[str] | None = None, baseline: str | None = None,
                   colors: Mapping[str, str] | None = None, style: str = "paper") -> Figure:
    """One row per setting, one panel per metric: the fraction of runs at least as good as tau per
    algorithm with its band, tier thresholds dotted. Metrics whose grid reaches past 3 get an asinh x-axis
    (linear near 0, logarithmic in the far tail an unconstrained baseline reaches)."""
    settings = [str(s) for s in (settings or profiles["setting"].values)]
    metrics = [str(m) for m in profiles["metric"].values]
    algos = order_algos(profiles["algo"].values, baseline)
    colors = colors or algo_colors(algos, baseline)
    direction = profiles.attrs.get("direction", {})
    with styled(style):
        fig, axes = _figure(style, (len(settings), len(metrics)), 1.9 if style == "paper" else 3.2)
        for r, s in enumerate(settings):
            for c, m in enumerate(metrics):
                ax = axes[r, c]
                tau = profiles["tau"].sel(metric=m).values
                ok = np.isfinite(tau)
                for a in algos:
                    one = profiles.sel(algo=a, setting=s, metric=m)
                    _step_band(ax, tau[ok], one["fraction"].values[ok], one["ci_low"].values[ok],
                               one["ci_high"].values[ok], colors[a], f"{a}:{s}:{m}", a == baseline)
                _guides(ax, m)
                _tau_axis(ax, np.nanmin(tau), np.nanmax(tau))
                ax.set_ylim(0.0, 1.02)
                sign = "≥" if direction.get(m) == ">=" else "≤"
                unit = UNITS.get(m)
                symbol = tex_symbol(m, cvar_alpha(profiles) if m == "CVaR" else None)
                ax.set_xlabel(f"τ: {symbol}" + (f"\n({unit})" if unit else ""))
                ax.set_title(f"{setting_label(s)}: runs with X {sign} τ" if c == 0 else setting_label(s))
                if c == 0:
                    ax.set_ylabel("fraction of runs")
                note_empty(ax, [profiles["fraction"].sel(setting=s, metric=m).values], "no runs")
        legend(fig, algos, colors, baseline=baseline)
        mark_synthetic(fig, bool(profiles.attrs.get("synthetic")))
    return fig


def _tau_axis(ax: Axes, lo: float, hi: float) -> None:
    """Linear up to 3; beyond, asinh (linear near 0, logarithmic far out) with round ticks."""
    if hi > 3.0:
        ax.set_xscale("asinh", linear_width=0.5)
        ticks = [t for t in (-1, -0.5, 0, 0.5, 1, 3, 10, 30, 100, 300, 1000) if lo <= t <= hi]
        ax.set_xticks(ticks, [f"{t:g}".replace("-", "\u2212") for t in ticks])
        ax.set_xticks([], minor=True)
    ax.set_xlim(lo, hi)


def _step_band(ax: Axes, x, y, lo, hi, color: str, gid: str, baseline: bool) -> None:
    """A profile is a step function of tau: drawn as steps (post), its band filled the same way."""
    ax.step(x, y, where="post", color=color, ls="--" if baseline else "-", zorder=2 if baseline else 3,
            gid=f"line:{gid}")
    band = np.isfinite(lo) & np.isfinite(hi)
    if band.any():
        ax.fill_between(x, lo, hi, where=band, step="post", color=color, alpha=0.2, lw=0, gid=f"band:{gid}")


def _guides(ax: Axes, metric: str) -> None:
    for t in TIER_GUIDES.get(metric, ()):
        ax.axvline(t, color=REFERENCE_COLOR, ls=":", lw=0.8, zorder=1, gid=f"guide:{metric}:{t:g}")
        label = TIER_GUIDE_LABELS.get((metric, t))
        if label:
            ax.text(t, 1.0, f" {label}", transform=ax.get_xaxis_transform(), fontsize="x-small", va="top",
                    color=REFERENCE_COLOR)


# --------------------------------------------------------------------------------------------- front
def front_figure(front: xr.Dataset, setting: str | None = None, tasks: Sequence[str] | None = None,
                 baseline: str | None = None, colors: Mapping[str, str] | None = None, style: str = "paper"
                 ) -> Figure:
    """One panel per task: each (algorithm, bound) at (cost, R̄), colour per algorithm and marker per
    bound; points on the front filled and joined by the front's staircase, the others hollow; each point's
    P(front) written beside it; cost = 0 (the bound, for D_norm) dashed."""
    setting = str(setting or front["setting"].values[0])
    one = front.sel(setting=setting)
    tasks = [str(t) for t in (tasks or one["task"].values)]
    algos = order_algos(one["algo"].values, baseline)
    colors = colors or algo_colors(algos, baseline)
    bounds = [float(b) for b in one["bound"].values]
    cols = min(len(tasks), 2 if style == "paper" else 3)
    rows = -(-len(tasks) // cols)
    with styled(style):
        fig, axes = _figure(style, (rows, cols), 2.3 if style == "paper" else 3.6)
        for i, ax in enumerate(axes.ravel()):
            if i >= len(tasks):
                ax.set_visible(False)
                continue
            _front_panel(ax, one.sel(task=tasks[i]), tasks[i], algos, bounds, colors, baseline)
        cost = front.attrs.get("cost", "Dnorm")
        for ax in axes[-1]:
            alpha = cvar_alpha(front) if cost == "CVaR" else None
            ax.set_xlabel(metric_axis_label(cost, alpha=alpha) + " (lower is better)")
        for ax in axes[:, 0]:
            ax.set_ylabel(metric_axis_label(front.attrs.get("reward", "R")) + " (higher is better)")
        from matplotlib.lines import Line2D

        extra = [(Line2D([], [], color=REFERENCE_COLOR, marker=BOUND_MARKERS[j % len(BOUND_MARKERS)], ls="none"),
                  f"d = {b:g}") for j, b in enumerate(bounds)]
        extra.append((Line2D([], [], color=REFERENCE_COLOR, lw=1.0), "front (filled: on it; number: P(front))"))
        legend(fig, algos, colors, extra, baseline, where="lower")
        fig.suptitle(f"Reward-cost front across bounds: {setting_label(setting)}", fontsize="medium")
        mark_synthetic(fig, bool(front.attrs.get("synthetic")))
    return fig


def _front_panel(ax: Axes, task: xr.Dataset, name: str, algos: Sequence[str], bounds: Sequence[float],
                 colors: Mapping[str, str], baseline: str | None) -> None:
    xs, ys = [], []
    for a in algos:
        for j, b in enumerate(bounds):
            pt = task.sel(algo=a, bound=b)
            x, y = float(pt["cost"]), float(pt["reward"])
            if not (np.isfinite(x) and np.isfinite(y)):
                continue
            on = bool(pt["on_front"])
            ax.plot([x], [y], marker=BOUND_MARKERS[j % len(BOUND_MARKERS)], ls="none", ms=5,
                    color=colors[a], mfc=colors[a] if on else "white", mew=1.0, zorder=4 if on else 3,
                    gid=f"point:{a}:{b:g}:{name}", alpha=0.6 if a == baseline else 1.0)
            p = float(pt["p_front"])
            if np.isfinite(p) and p >= 0.05:  # a point that is almost never on the front needs no number
                ax.annotate(f"{p:.2f}", (x, y), xytext=(3, 3), textcoords="offset points", fontsize="xx-small",
                            color=colors[a], gid=f"p:{a}:{b:g}:{name}")
            if on:
                xs.append(x)
                ys.append(y)
    if xs:
        order = np.argsort(xs)
        ax.step(np.asarray(xs)[order], np.asarray(ys)[order], where="post", color=REFERENCE_COLOR, lw=0.8,
                zorder=2, gid=f"front:{name}")
    ax.axvline(0.0, color=REFERENCE_COLOR, ls="--", lw=0.6, zorder=1, gid="cost0")
    ax.set_title(task_label(name))
    _focus(ax, task, algos, baseline)
    if not xs:
        ax.text(0.5, 0.5, "no runs", transform=ax.transAxes, ha="center", va="center", style="italic",
                color=REFERENCE_COLOR, gid="not-available")


def _focus(ax: Axes, task: xr.Dataset, algos: Sequence[str], baseline: str | None) -> None:
    """The baseline never sets an axis (`cube.render.style.focus_limits`): when its points lie far from the
    others', the axes follow the others and a note names the baseline off scale."""
    if baseline is None or baseline not in algos or len(algos) < 2:
        return
    others = task.sel(algo=[a for a in algos if a != baseline])
    base = task.sel(algo=baseline)
    xlim, xside = focus_limits(others["cost"].values, base["cost"].values, (0.0,))
    ylim, yside = focus_limits(others["reward"].values, base["reward"].values)
    if xlim is not None:
        ax.set_xlim(*xlim)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if xside or yside:
        # mathtext arrows: the paper style's serif font has no arrow glyphs
        arrow = {1: r"$\rightarrow$", -1: r"$\leftarrow$"}.get(xside, "") + {1: r"$\uparrow$",
                                                                             -1: r"$\downarrow$"}.get(yside, "")
        ax.text(0.98, 0.02, f"{algo_label(baseline)} off scale {arrow}", transform=ax.transAxes, ha="right",
                va="bottom", fontsize="x-small", color=REFERENCE_COLOR, style="italic", gid="offscale")
