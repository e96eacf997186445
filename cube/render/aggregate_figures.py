"""Figures of the aggregate statistics (drawing only): interval estimates of every metric per algorithm and
setting with the tier (rliable's interval-estimate plot), the probability of improvement of pairs of
algorithms, and the aggregate learning curve (IQM over conditions per iterate with its band). Conventions as in
`cube.render.figures`; shared helpers in `cube.render.canvas`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.render.canvas import focus_y, interval_rows, line_band, mark_synthetic, new_figure, note_empty, order_algos
from cube.render.style import (
    BASELINE_COLOR,
    REFERENCE_COLOR,
    TIER_GUIDE_LABELS,
    TIER_GUIDES,
    UNITS,
    algo_colors,
    algo_label,
    direction_text,
    focus_limits,
    metric_axis_label,
    setting_label,
    styled,
    tex_symbol,
    value_span,
)
from cube.stats.metrics import METRIC, tier_label
from cube.stats.runs import cvar_alpha

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure


def intervals_figure(agg: xr.Dataset, baseline: str | None = None, colors: Mapping[str, str] | None = None,
                     style: str = "paper", empty_note: str = "no episodes") -> Figure:
    """IQM and CI of every metric (columns) per algorithm (rows of a panel) and setting (panel rows) from
    `stats.aggregate_table`, with the tier (`metrics.tier_label`) written beside each algorithm. A column
    shares its x axis over the settings; when the baseline lies far outside the other algorithms, the
    axis follows the others and the baseline's value is written at the edge with an arrow."""
    settings = [str(s) for s in agg["setting"].values]
    metrics = [str(m) for m in agg["metric"].values]
    algos = order_algos(agg["algo"].values, baseline)
    colors = colors or algo_colors(algos, baseline)
    paper = style == "paper"
    with styled(style):
        fig = new_figure(style, "double", 0.55 + (0.22 if paper else 0.4) * (len(algos) + 1.6) * len(settings))
        axes = fig.subplots(len(settings), len(metrics), squeeze=False, sharey=True, sharex="col")
        for mi, m in enumerate(metrics):
            col = agg.sel(metric=m)
            data = {v: col[v].sel(algo=algos, setting=settings).values for v in ("value", "ci_low", "ci_high")}
            every = np.stack(list(data.values()))  # (3, A, S)
            is_base = np.array([a == baseline for a in algos])
            guides = TIER_GUIDES.get(m, ())
            lims, side = (None, 0)
            if baseline is not None and is_base.any() and (~is_base).any():
                lims, side = focus_limits(every[:, ~is_base], every[:, is_base], guides, far=1.5)
            if lims is None:
                span = value_span(every, guides) or (0.0, 1.0)
                width = max(span[1] - span[0], 1e-9)
                lims = (span[0] - 0.08 * width, span[1] + 0.08 * width)
            for si, s in enumerate(settings):
                ax = axes[si, mi]
                vals = [data[v][:, si] for v in ("value", "ci_low", "ci_high")]
                interval_rows(ax, algos, *vals, [colors[a] for a in algos], f"{s}:{m}", list(is_base))
                note_empty(ax, [vals[0]], empty_note)
                ax.set_xlim(*lims)
                for g in guides:
                    ax.axvline(g, color=REFERENCE_COLOR, ls=":", lw=0.7, zorder=1, gid=f"tier-guide:{m}")
                    if si == 0 and lims[0] <= g <= lims[1]:
                        ax.annotate(TIER_GUIDE_LABELS.get((m, g), ""), (g, 1.0), xycoords=("data", "axes fraction"),
                                    xytext=(2, -1), textcoords="offset points", ha="left", va="top",
                                    fontsize="x-small", color=REFERENCE_COLOR, gid=f"tier-guide-label:{m}:{g:g}")
                if side:
                    i = algos.index(baseline)
                    v = float(vals[0][i])
                    if np.isfinite(v) and not lims[0] <= v <= lims[1]:
                        ax.annotate(f"{v:.3g} {'→' if v > lims[1] else '←'}",
                                    (0.99 if v > lims[1] else 0.01, len(algos) - 1 - i),
                                    xycoords=("axes fraction", "data"), ha="right" if v > lims[1] else "left",
                                    va="center", fontsize="small", color=BASELINE_COLOR, gid=f"offscale:{baseline}")
                if si == 0:
                    ax.set_title(f"{tex_symbol(m, cvar_alpha(agg))}  ({'↑' if METRIC[m].higher_is_better else '↓'})")
                if si == len(settings) - 1:
                    ax.set_xlabel(UNITS.get(m, ""), fontsize="small")
                ax.tick_params(axis="y", length=0)
        for si, s in enumerate(settings):
            axes[si, 0].set_ylabel(setting_label(s))
            last = axes[si, -1]
            if "tier" in agg:
                for i, a in enumerate(algos):
                    t = int(agg["tier"].sel(algo=a, setting=s))
                    last.text(1.05, len(algos) - 1 - i, _tier_text(t), transform=last.get_yaxis_transform(),
                              va="center", ha="left", fontsize="small", gid=f"tier:{a}:{s}",
                              color=BASELINE_COLOR if a == baseline else "black")
        if "tier" in agg:
            axes[0, -1].text(1.05, 1.02, "tier", transform=axes[0, -1].transAxes, ha="left", va="bottom",
                             fontsize="small", fontweight="bold")
        ci = float(agg.attrs.get("ci", 0.95))
        fig.suptitle(f"IQM over task–bound conditions with {ci:.0%} stratified-bootstrap CI "
                     f"(↑/↓: higher/lower is better)", fontsize="medium")
        mark_synthetic(fig, bool(agg.attrs.get("synthetic")))
    return fig


def _tier_text(t: int) -> str:
    return "–" if t < 0 else tier_label(t)


def poi_pairs(algos: Sequence[str], baseline: str | None = None) -> list[tuple[str, str]]:
    """Every unordered pair once: X before Y in the cube's order, and the baseline always as Y."""
    algos = order_algos(algos, baseline)
    return [(x, y) for i, x in enumerate(algos) for y in algos[i + 1:]]


def poi_figure(pois: Sequence[xr.Dataset], colors: Mapping[str, str] | None = None, style: str = "paper",
               baseline: str | None = None) -> Figure:
    """Probability that X improves on Y (rows: pairs X vs Y; columns: metrics; panel rows: settings) from
    `stats.probability_of_improvement` outputs, with CIs; 0.5 (no difference) dotted (gid ``half``)."""
    if not pois:
        raise CubeError("the probability of improvement needs at least two algorithms in the selection")
    settings = [str(s) for s in pois[0]["setting"].values]
    metrics = [str(m) for m in pois[0]["metric"].values]
    pairs = [(str(p.attrs["x"]), str(p.attrs["y"])) for p in pois]
    colors = colors or algo_colors({a for p in pairs for a in p}, baseline)
    labels = [f"{algo_label(x)} vs {algo_label(y)}" for x, y in pairs]
    paper = style == "paper"
    with styled(style):
        fig = new_figure(style, "double", 0.6 + (0.2 if paper else 0.38) * (len(pairs) + 1.6) * len(settings))
        axes = fig.subplots(len(settings), len(metrics), squeeze=False, sharey=True, sharex=True)
        for si, s in enumerate(settings):
            for mi, m in enumerate(metrics):
                ax = axes[si, mi]
                vals = [np.array([p[v].sel(setting=s, metric=m).item() for p in pois]) for v in
                        ("value", "ci_low", "ci_high")]
                interval_rows(ax, [f"{x}:{y}" for x, y in pairs], *vals, [colors[x] for x, _ in pairs], f"{s}:{m}")
                ax.set_yticks(np.arange(len(pairs))[::-1], labels)
                ax.axvline(0.5, color=REFERENCE_COLOR, ls=":", lw=0.8, zorder=1, gid="half")
                ax.set_xlim(-0.03, 1.03)
                ax.tick_params(axis="y", length=0)
                if si == 0:
                    arrow = "↑" if METRIC[m].higher_is_better else "↓"
                    ax.set_title(f"{tex_symbol(m, cvar_alpha(pois[0]))}  ({arrow})")
                if si == len(settings) - 1:
                    ax.set_xlabel(r"$P(X > Y)$")
            axes[si, 0].set_ylabel(setting_label(s))
        ci = float(pois[0].attrs.get("ci", 0.95))
        fig.suptitle(f"Probability that X improves on Y (higher R̄, lower cost metrics; ties ½), {ci:.0%} CI",
                     fontsize="medium")
        mark_synthetic(fig, bool(pois[0].attrs.get("synthetic")))
    return fig


# -------------------------------------------------------------------------------- aggregate curve
def aggregate_curve_figure(curve: xr.Dataset, baseline: str | None = None, colors: Mapping[str, str] | None = None,
                           style: str = "paper", empty_note: str = "no episodes") -> Figure:
    """The aggregate learning curve (`learning_curves.aggregate_learning_curve`): one panel per metric,
    IQM over conditions per iterate (or env-step bin) with its CI band per algorithm."""
    metrics = [str(m) for m in curve["metric"].values]
    algos = order_algos(curve["algo"].values, baseline)
    colors = colors or algo_colors(algos, baseline)
    col = "iterate" if "iterate" in curve.dims else "step_bin"
    x = curve[col].values
    ncols = 3 if len(metrics) > 2 else len(metrics)
    nrows = math.ceil(len(metrics) / ncols)  # a spare panel holds the legend, else it goes above
    paper = style == "paper"
    with styled(style):
        fig = new_figure(style, "double", (1.55 if paper else 3.0) * nrows + 0.35)
        axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True).ravel()
        xlabel = "policy iterate $j$" if col == "iterate" else "environment steps"
        for i, (ax, m) in enumerate(zip(axes, metrics, strict=False)):
            others, base = [], None
            for a in algos:
                one = curve.sel(algo=a, metric=m)
                v, lo, hi = one["value"].values, one["ci_low"].values, one["ci_high"].values
                line_band(ax, x, v, lo, hi, colors[a], f"{a}:{m}", a == baseline)
                if a == baseline:
                    base = v
                else:
                    others += [v, lo, hi]
            if m == "Dnorm":
                ax.axhline(0.0, color=REFERENCE_COLOR, ls="--", lw=0.8, zorder=4, gid="bound")
            note_empty(ax, [curve["value"].sel(metric=m).values], empty_note)
            focus_y(ax, others, base, baseline, (0.0,) if m == "Dnorm" else ())
            ax.set_ylabel(f"IQM {metric_axis_label(m, alpha=cvar_alpha(curve))}")
            ax.set_title(direction_text(m), fontsize="small", style="italic")
            if i + ncols >= len(metrics) or len(metrics) <= 2:  # nothing drawn below this panel
                ax.set_xlabel(xlabel)
            ax.xaxis.set_tick_params(labelbottom=True)
        ci = float(curve.attrs.get("ci", 0.95))
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        handles = [Line2D([], [], color=colors[a], lw=2.0, ls="--" if a == baseline else "-") for a in algos]
        labels = [algo_label(a) for a in algos]
        handles.append(Patch(color="#999999", alpha=0.35, lw=0))
        labels.append(f"{ci:.0%} stratified-bootstrap CI")
        spare = axes[len(metrics):]
        for ax in spare:
            ax.set_axis_off()
        if len(spare):
            spare[0].legend(handles, labels, loc="center", title="IQM over task–bound conditions",
                            title_fontsize="small")
        else:
            fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 6))
        mark_synthetic(fig, bool(curve.attrs.get("synthetic")))
    return fig
