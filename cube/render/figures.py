"""The paper's figures from any cube, as matplotlib Figures (object-oriented API, no pyplot state).

Kinds (`KINDS`), each a function of `cube.stats` / `cube.stats.curves` / `cube.stats.learning_curves` output:

* ``cdf`` (:func:`cdf_figure`): Figure 2 / A.1, one panel per setting (train, final expl, final greedy),
  one curve per algorithm with its stratified-bootstrap band, kappa = 0 dashed; x cut at ``xmax``
  (Figure 2: 2) or, with ``xmax=None``, up to where every curve reached 1 (Figure A.1).
* ``curves`` (:func:`curves_figure`): per condition (column: bound; row group: task) the reward, the
  cost with the bound d drawn, and the Lagrange multiplier per iterate: seed mean +- 1 sigma after a
  trailing moving average (the paper: window 5).
* ``hist`` (:func:`hist_figure`): per condition and algorithm, the final episodic cost of the policy
  with exploration noise vs greedy: per-seed histograms (share of that seed's episodes per bin) averaged
  over seeds, error bars 1 sigma over seeds, d marked.
* ``intervals`` (:func:`intervals_figure`): IQM and CI of every metric per algorithm and setting, the
  tier written beside each row (rliable's interval-estimate plot).
* ``poi`` (:func:`poi_figure`): probability of improvement of pairs of algorithms with CIs.
* ``aggregate-curve`` (:func:`aggregate_curve_figure`): IQM over conditions per iterate with its band.

Every figure: colours fixed per algorithm (:func:`algo_colors`: the cube's sorted algorithm names on a
colour-blind-safe palette; the baseline grey), labels from the metric registry (`cube.stats.metrics`), the word
SYNTHETIC across figures of synthetic cubes, and ``style="paper"`` (serif, 8 pt, 3.25 in / 6.75 in wide,
PDF fonts embedded as TrueType, Type 42) or ``"screen"``. Lines and bands carry a gid
(``line:<algo>:<panel>``, ``band:<algo>:<panel>``) so tests and tools can find them.

:class:`FigureMaker` computes what the figures need from a cube (path or Dataset) and a Selection, and
:func:`figure_for_view` gives the TUI the figure of one of its views. matplotlib is an optional extra
(``pip install 'saferl[plot]'``); it is imported only when a figure is made, so ``import cube`` never
needs it, and :func:`require_matplotlib` raises a one-line ``CubeError`` when it is missing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.outputs import atomic_output
from cube.render.style import (
    BASELINE_COLOR,
    FORMATS,
    MULTIPLIER_SYMBOL,
    REFERENCE_COLOR,
    TIER_GUIDE_LABELS,
    TIER_GUIDES,
    UNITS,
    WIDTH,
    algo_colors,
    algo_label,
    direction_text,
    focus_limits,
    iterate_var_label,
    metric_axis_label,
    setting_label,
    styled,
    task_label,
    tex_symbol,
    value_span,
)
from cube.stats.curves import HistPanel
from cube.stats.metrics import METRIC, tier_label

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def _new_figure(style: str, width: str | float, height: float) -> Figure:
    from matplotlib.figure import Figure

    w = WIDTH[style][1 if width == "double" else 0] if isinstance(width, str) else float(width)
    fig = Figure(figsize=(w, height), layout="constrained")
    fig.saferl_style = style  # read by save_figure
    return fig


def save_figure(fig: Figure, path: str | os.PathLike, fmt: str | None = None) -> Path:
    """Write `fig` atomically (`cube.outputs`: beside the target, then renamed) as PDF, PNG or SVG (from the suffix
    unless `fmt`), in the figure's style (PDF: TrueType fonts embedded, Type 42). Returns the path."""
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in FORMATS:
        raise CubeError(f"cannot write a figure as {fmt or 'a file without suffix'!r}: use .pdf, .png or .svg")
    meta = {"Creator": "saferl plot"} if fmt in ("pdf", "svg") else {"Software": "saferl plot"}
    with atomic_output(path) as tmp, styled(getattr(fig, "saferl_style", "paper")):
        fig.savefig(tmp, format=fmt, metadata=meta)
    return path


def _mark_synthetic(fig: Figure, synthetic: bool) -> None:
    """The word SYNTHETIC across the figure (light, behind nothing that matters) of a synthetic cube."""
    if not synthetic:
        return
    size = 30 if getattr(fig, "saferl_style", "paper") == "paper" else 48
    fig.text(0.5, 0.5, "SYNTHETIC", fontsize=size, color="#D00000", alpha=0.13, rotation=20, ha="center",
             va="center", fontweight="bold", zorder=10, gid="synthetic")


def _note_empty(ax: Axes, values: Sequence, note: str) -> None:
    """Write `note` across a panel that has nothing to draw (no finite value in `values`), so an empty
    panel says why (e.g. "not available: means only") instead of looking like a failure."""
    if any(np.isfinite(np.asarray(v, dtype=np.float64)).any() for v in values):
        return
    ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", fontsize="small",
            color=REFERENCE_COLOR, style="italic", gid="not-available")


def _legend(fig: Figure, algos: Sequence[str], colors: Mapping[str, str], extra=(),
            baseline: str | None = None) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[a], lw=2.0, ls="--" if a == baseline else "-") for a in algos]
    handles += [h for h, _ in extra]
    labels = [algo_label(a) for a in algos] + [lab for _, lab in extra]
    fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 6), handlelength=1.6,
               columnspacing=1.2)


def _line_band(ax: Axes, x, y, lo, hi, color: str, gid: str, baseline: bool = False, lw: float | None = None,
               alpha: float = 0.2) -> None:
    """A curve with its band (fill_between, only where the band is finite)."""
    y, lo, hi = (np.asarray(v, dtype=np.float64) for v in (y, lo, hi))
    z = 2 if baseline else 3
    ax.plot(x, y, color=color, lw=lw, zorder=z, gid=f"line:{gid}",
            ls="--" if baseline else "-", label=gid.split(":")[0])
    ok = np.isfinite(lo) & np.isfinite(hi)
    if ok.any():
        ax.fill_between(x, lo, hi, where=ok if not ok.all() else None, color=color, alpha=alpha, lw=0,
                        zorder=z - 1, gid=f"band:{gid}")


def _order(algos: Sequence[str], baseline: str | None) -> list[str]:
    """Algorithms in the cube's order with the baseline last (drawn under the others, listed last)."""
    algos = [str(a) for a in algos]
    return [a for a in algos if a != baseline] + [a for a in algos if a == baseline]


# ---------------------------------------------------------------------------------------------- CDF
def cdf_figure(cdf: xr.Dataset, xmax: float | None = 2.0, baseline: str | None = None,
               colors: Mapping[str, str] | None = None, style: str = "paper", empty_note: str = "no episodes"
               ) -> Figure:
    """Figure 2 (``xmax=2``) / Figure A.1 (``xmax=None``) from `stats.cdf_curves` output: one panel per
    setting, one curve per algorithm with its CI band, kappa = 0 dashed (gid ``kappa0``)."""
    settings = [str(s) for s in cdf["setting"].values]
    algos = _order(cdf["algo"].values, baseline)
    colors = colors or algo_colors(algos, baseline)
    kappa = cdf["kappa"].values.astype(np.float64)
    right = xmax if xmax is not None else _full_range(cdf)
    with styled(style):
        fig = _new_figure(style, "double", 2.35 if style == "paper" else 4.2)
        axes = fig.subplots(1, len(settings), sharey=True, squeeze=False)[0]
        for ax, s in zip(axes, settings, strict=True):
            for a in algos:
                one = cdf.sel(algo=a, setting=s)
                _line_band(ax, kappa, one["cdf"].values, one["ci_low"].values, one["ci_high"].values,
                           colors[a], f"{a}:{s}", a == baseline)
            ax.axvline(0.0, color=REFERENCE_COLOR, ls="--", lw=0.8, zorder=4, gid="kappa0")
            _note_empty(ax, [cdf["cdf"].sel(setting=s).values], empty_note)
            ax.set_xlim(kappa.min(), right)
            if xmax is None:  # Figure A.1: the tail spans decades. asinh is linear near 0 and logarithmic far
                # out with no kink between (symlog's switch at its threshold reads like a feature of the data)
                ax.set_xscale("asinh", linear_width=0.5)
                ticks = [t for t in (-1, -0.5, 0, 0.5, 1, 3, 10, 30, 100, 300, 1000) if t <= right]
                ax.set_xticks(ticks, [f"{t:g}".replace("-", "\u2212") for t in ticks])
                ax.set_xticks([], minor=True)
                ax.set_xlim(kappa.min(), right)
            ax.set_ylim(0.0, 1.02)
            ax.set_title(setting_label(s))
            ax.grid(True)
        fig.supxlabel(r"normalised episodic cost deviation $\kappa = (c - d)/d$"
                      + (" (asinh axis: linear near 0, logarithmic in the tail)" if xmax is None else ""),
                      fontsize="medium")
        axes[0].set_ylabel(r"CDF: share of episodes $\leq \kappa$")
        extra = []
        from matplotlib.lines import Line2D

        extra.append((Line2D([], [], color=REFERENCE_COLOR, ls="--", lw=0.8), r"$\kappa = 0$ (cost = $d$)"))
        _legend(fig, algos, colors, extra, baseline)
        _mark_synthetic(fig, bool(cdf.attrs.get("synthetic")))
    return fig


def _full_range(cdf: xr.Dataset) -> float:
    """Figure A.1's right end: the first grid point where every curve and band reached 1 (+5%)."""
    kappa = cdf["kappa"].values.astype(np.float64)
    lows = np.stack([cdf[v].values for v in ("cdf", "ci_low")], 0).reshape(-1, kappa.size)
    lows = lows[np.isfinite(lows).any(1)]
    if not lows.size:
        return float(kappa.max())
    done = np.all(np.nan_to_num(lows, nan=1.0) >= 1.0 - 1e-12, axis=0)
    idx = np.flatnonzero(done)
    end = float(kappa[idx[0]]) if idx.size else float(kappa.max())
    return max(end * 1.15 if end > 1 else end + 0.1, 0.5)


# ------------------------------------------------------------------------------------------ curves
def curves_figure(tc: xr.Dataset, mult: xr.Dataset | None = None, baseline: str | None = None,
                  colors: Mapping[str, str] | None = None, style: str = "paper", window: int = 5,
                  synthetic: bool = False, x: xr.DataArray | None = None) -> Figure:
    """Per-condition training curves from `curves.training_curves` (vars R_mean, R_std, C_mean, C_std;
    dims algo, task, bound, iterate) and optionally `curves.multiplier_curves` (mult_mean, mult_std):
    one column per bound, per task a group of rows R̄, C̄ (bound d drawn, gid ``bound``) and the
    multiplier or the per-iterate variable ``mult.attrs["var"]`` (algorithms that have one). Mean +- 1 sigma
    over seeds after a moving average."""
    algos = _order(tc["algo"].values, baseline)
    colors = colors or algo_colors(algos, baseline)
    tasks, bounds = [str(t) for t in tc["task"].values], tc["bound"].values.astype(np.float64)
    has_mult = mult is not None and bool(np.isfinite(mult["mult_mean"].values).any())
    rows = ["R", "C"] + (["mult"] if has_mult else [])
    floor_mult = mult is not None and bool(mult.attrs.get("nonnegative", 1))
    iters = tc["iterate"].values
    xs = iters if x is None else x.values
    paper = style == "paper"
    row_h = 1.05 if paper else 2.0
    with styled(style):
        fig = _new_figure(style, "double" if len(bounds) > 1 else "single", 0.45 + row_h * len(rows) * len(tasks))
        axes = fig.subplots(len(rows) * len(tasks), len(bounds), squeeze=False, sharex=True)
        for ti, t in enumerate(tasks):
            for bi, d in enumerate(bounds):
                for ri, row in enumerate(rows):
                    ax = axes[ti * len(rows) + ri, bi]
                    others, base = [], None
                    for a in algos:
                        if row == "mult":
                            one = mult.sel(algo=a, task=t, bound=d)
                            m, s = one["mult_mean"].values, one["mult_std"].values
                            if not np.isfinite(m).any():
                                continue
                        else:
                            one = tc.sel(algo=a, task=t, bound=d)
                            m, s = one[f"{row}_mean"].values, one[f"{row}_std"].values
                        # costs and multipliers are >= 0 by construction: a 1-sigma band stops at 0
                        low = np.maximum(m - s, 0.0) if row == "C" or (row == "mult" and floor_mult) else m - s
                        _line_band(ax, xs, m, low, m + s, colors[a], f"{a}:{t}:{d:g}:{row}", a == baseline,
                                   alpha=0.18)
                        if a == baseline:
                            base = m
                        else:
                            others += [m - np.nan_to_num(s), m + np.nan_to_num(s)]
                    _focus_y(ax, others, base, baseline, (d,) if row == "C" else ())
                    if row == "C":
                        ax.axhline(d, color=REFERENCE_COLOR, ls="--", lw=0.8, zorder=4, gid="bound")
                        ax.annotate(f"$d = {d:g}$", (1.0, d), xycoords=("axes fraction", "data"),
                                    xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom",
                                    fontsize="small", color=REFERENCE_COLOR)
                    if ri == 0:
                        ax.set_title(f"{task_label(t)}, $d = {d:g}$" if len(tasks) > 1 or paper
                                     else f"{task_label(t)}, d = {d:g}")
                    if bi == 0:
                        ax.set_ylabel(_row_label(row, algos, mult))
                    if ti == len(tasks) - 1 and ri == len(rows) - 1:
                        ax.set_xlabel("policy iterate $j$" if x is None else "environment steps")
        extra = []
        if window > 1:
            from matplotlib.patches import Patch

            extra.append((Patch(color="#999999", alpha=0.35, lw=0), rf"mean $\pm 1\sigma$ over seeds, "
                          f"moving average {window}"))
        _legend(fig, algos, colors, extra, baseline)
        _mark_synthetic(fig, synthetic or bool(tc.attrs.get("synthetic")))
    return fig


def _row_label(row: str, algos: Sequence[str], mult: xr.Dataset | None) -> str:
    if row != "mult":
        return metric_axis_label(row)
    var = str(mult.attrs.get("var", "multiplier")) if mult is not None else "multiplier"
    if var != "multiplier":
        return iterate_var_label(var)
    have = [a for a in algos if mult is not None and np.isfinite(mult["mult_mean"].sel(algo=a).values).any()]
    syms = [MULTIPLIER_SYMBOL[a] for a in have if a in MULTIPLIER_SYMBOL]
    return f"multiplier ${', '.join(syms)}$" if syms else "multiplier"


def hist_figure(panels: Mapping[tuple[str, float, str], HistPanel], baseline: str | None = None,
                colors: Mapping[str, str] | None = None, style: str = "paper", synthetic: bool = False,
                algos: Sequence[str] | None = None) -> Figure:
    """Final episodic cost, exploration (filled bars) vs greedy (hatched outline), per condition: one row
    per task and algorithm, one column per bound; seed mean of the per-seed shares with 1-sigma error
    bars; the bound d marked (gid ``bound``)."""
    if not panels:
        raise CubeError("no final evaluation episodes (modes expl/greedy) in the selection: nothing to histogram")
    keys = list(panels)
    tasks = list(dict.fromkeys(k[0] for k in keys))
    bounds = sorted({k[1] for k in keys})
    algos = _order(algos if algos is not None else list(dict.fromkeys(k[2] for k in keys)), baseline)
    algos = [a for a in algos if any(k[2] == a for k in keys)]
    colors = colors or algo_colors(algos, baseline)
    paper = style == "paper"
    rows = [(t, a) for t in tasks for a in algos]
    with styled(style):
        fig = _new_figure(style, "double" if len(bounds) > 1 else "single",
                          0.5 + (0.95 if paper else 1.8) * len(rows))
        axes = fig.subplots(len(rows), len(bounds), squeeze=False)
        for ri, (t, a) in enumerate(rows):
            for bi, d in enumerate(bounds):
                ax = axes[ri, bi]
                p = panels.get((t, d, a))
                if p is None:
                    ax.set_axis_off()
                    continue
                _draw_hist(ax, p, colors[a], f"{a}:{t}:{d:g}")
                ax.axvline(d, color=REFERENCE_COLOR, ls="--", lw=0.9, zorder=5, gid="bound")
                ax.annotate(f"$d = {d:g}$", (d, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -2),
                            textcoords="offset points", ha="left", va="top", fontsize="small")
                if ri == 0 or rows[ri - 1][0] != t:
                    ax.set_title(f"{task_label(t)}, $d = {d:g}$")
                if bi == 0:
                    ax.set_ylabel(f"{algo_label(a)}\nshare of episodes")
                if ri == len(rows) - 1 or rows[ri + 1][0] != t:
                    ax.set_xlabel("final episodic cost $c$")
                ax.set_ylim(bottom=0.0)
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        n = {m: max((p.n_episodes.get(m, 0) // max(p.n_seeds.get(m, 1), 1)) for p in panels.values())
             for m in ("expl", "greedy")}
        extra = [(Patch(facecolor="#777777", alpha=0.8, lw=0), f"exploration (N = {n['expl']} per seed)"),
                 (Patch(facecolor="white", edgecolor="#333333", hatch="//////", lw=0.5),
                  f"greedy (N = {n['greedy']} per seed)"),
                 (Line2D([], [], color="#333333", lw=0.5), r"$\pm 1\sigma$ over seeds (last bin holds the top 1%)")]
        fig.legend([h for h, _ in extra], [lab for _, lab in extra], loc="outside upper center", ncols=3)
        _mark_synthetic(fig, synthetic)
    return fig


def _draw_hist(ax: Axes, p: HistPanel, color: str, gid: str) -> None:
    """Side by side in every bin: exploration (left half, filled) and greedy (right half, hatched), each
    with its 1-sigma error bar over seeds. One step patch per mode (gid ``hist:<algo>:<task>:<d>:<mode>``,
    its values: the bar heights in the even (expl) or odd (greedy) half-bins)."""
    n = p.edges.size - 1
    mids = 0.5 * (p.edges[:-1] + p.edges[1:])
    halves = np.empty(2 * n + 1)
    halves[0::2], halves[1::2] = p.edges, mids
    for mode, offset in (("expl", 0), ("greedy", 1)):
        if mode not in p.mean:
            continue
        heights = np.zeros(2 * n)
        heights[offset::2] = p.mean[mode]
        if mode == "expl":
            ax.stairs(heights, halves, fill=True, color=color, alpha=0.8, lw=0, gid=f"hist:{gid}:{mode}")
        else:
            ax.stairs(heights, halves, fill=True, facecolor="white", edgecolor=_darker(color), hatch="//////",
                      lw=0.5, gid=f"hist:{gid}:{mode}")
        err = p.std[mode]
        x = 0.5 * (halves[offset:-1:2] + halves[offset + 1::2])
        ok = np.isfinite(err) & (err > 0)
        if ok.any():
            m = p.mean[mode][ok]
            ax.vlines(x[ok], m - err[ok], m + err[ok], color="#333333", lw=0.5, zorder=4, gid=f"err:{gid}:{mode}")


def _darker(color: str, f: float = 0.65) -> tuple[float, float, float]:
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(color)
    return (r * f, g * f, b * f)


# ------------------------------------------------------------------------------------ intervals, poi
def _interval_rows(ax: Axes, labels: Sequence[str], value, lo, hi, colors: Sequence[str], gid: str,
                   faded: Sequence[bool] = ()) -> None:
    """rliable's interval estimate: a bar from lo to hi per row and a tick at the point value. The bar has
    an outline in the algorithm's colour, so a narrow CI still shows as a coloured band; the tick is thin,
    dark and taller than the bar, so it never hides the bar."""
    y = np.arange(len(labels))[::-1]
    for i in range(len(labels)):
        v, l_, h = float(value[i]), float(lo[i]), float(hi[i])
        if not np.isfinite(v):
            continue
        alpha = 0.3 if (faded and faded[i]) else 0.55
        if np.isfinite(l_) and np.isfinite(h):
            ax.barh(y[i], h - l_, left=l_, height=0.5, color=colors[i], alpha=alpha, zorder=2,
                    gid=f"ci:{gid}:{labels[i]}")
            ax.barh(y[i], h - l_, left=l_, height=0.5, fill=False, edgecolor=colors[i], lw=1.2, zorder=3,
                    gid=f"ci-edge:{gid}:{labels[i]}")
        ax.vlines(v, y[i] - 0.36, y[i] + 0.36, color=_darker(colors[i], 0.45), lw=0.9, zorder=4,
                  gid=f"point:{gid}:{labels[i]}")
    ax.set_yticks(y, [algo_label(lab) if ":" not in lab else lab for lab in labels])
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.grid(True, axis="x")
    ax.grid(False, axis="y")


def _offscale_note(ax: Axes, baseline: str, value: float, side: int, axis: str = "y") -> None:
    """'PPO: 160 ↑' in grey at the edge of an axis whose limits leave the baseline out (gid offscale:<algo>)."""
    arrow = {("y", 1): "↑", ("y", -1): "↓", ("x", 1): "→", ("x", -1): "←"}[(axis, side)]
    text = f"{algo_label(baseline)} {value:.3g} {arrow}"
    if axis == "y":
        ax.annotate(text, (0.99, 0.97 if side > 0 else 0.03), xycoords="axes fraction", ha="right",
                    va="top" if side > 0 else "bottom", fontsize="small", color=BASELINE_COLOR,
                    gid=f"offscale:{baseline}")
    else:
        ax.annotate(text, (0.99 if side > 0 else 0.01, 0), xycoords=("axes fraction", "data"),
                    ha="right" if side > 0 else "left", va="center", fontsize="small", color=BASELINE_COLOR,
                    gid=f"offscale:{baseline}")


def _focus_y(ax: Axes, others: list[np.ndarray], base: np.ndarray | None, baseline: str | None,
             refs: Sequence[float] = ()) -> None:
    """Let a panel's y axis follow the non-baseline curves when the baseline lies far outside them."""
    if baseline is None or base is None or not others:
        return
    lims, side = focus_limits(np.concatenate([np.ravel(o) for o in others]), base, refs)
    if lims is not None:
        ax.set_ylim(*lims)
        _offscale_note(ax, baseline, float(np.nanmedian(base)), side, "y")


def intervals_figure(agg: xr.Dataset, baseline: str | None = None, colors: Mapping[str, str] | None = None,
                     style: str = "paper", empty_note: str = "no episodes") -> Figure:
    """IQM and CI of every metric (columns) per algorithm (rows of a panel) and setting (panel rows) from
    `stats.aggregate_table`, with the tier (`metrics.tier_label`) written beside each algorithm. A column
    shares its x axis over the settings; when the baseline lies far outside the other algorithms, the
    axis follows the others and the baseline's value is written at the edge with an arrow."""
    settings = [str(s) for s in agg["setting"].values]
    metrics = [str(m) for m in agg["metric"].values]
    algos = _order(agg["algo"].values, baseline)
    colors = colors or algo_colors(algos, baseline)
    paper = style == "paper"
    with styled(style):
        fig = _new_figure(style, "double", 0.55 + (0.22 if paper else 0.4) * (len(algos) + 1.6) * len(settings))
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
                _interval_rows(ax, algos, *vals, [colors[a] for a in algos], f"{s}:{m}", list(is_base))
                _note_empty(ax, [vals[0]], empty_note)
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
                    ax.set_title(f"{tex_symbol(m)}  ({'↑' if METRIC[m].higher_is_better else '↓'})")
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
        _mark_synthetic(fig, bool(agg.attrs.get("synthetic")))
    return fig


def _tier_text(t: int) -> str:
    return "–" if t < 0 else tier_label(t)


def poi_pairs(algos: Sequence[str], baseline: str | None = None) -> list[tuple[str, str]]:
    """Every unordered pair once: X before Y in the cube's order, and the baseline always as Y."""
    algos = _order(algos, baseline)
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
        fig = _new_figure(style, "double", 0.6 + (0.2 if paper else 0.38) * (len(pairs) + 1.6) * len(settings))
        axes = fig.subplots(len(settings), len(metrics), squeeze=False, sharey=True, sharex=True)
        for si, s in enumerate(settings):
            for mi, m in enumerate(metrics):
                ax = axes[si, mi]
                vals = [np.array([p[v].sel(setting=s, metric=m).item() for p in pois]) for v in
                        ("value", "ci_low", "ci_high")]
                _interval_rows(ax, [f"{x}:{y}" for x, y in pairs], *vals, [colors[x] for x, _ in pairs], f"{s}:{m}")
                ax.set_yticks(np.arange(len(pairs))[::-1], labels)
                ax.axvline(0.5, color=REFERENCE_COLOR, ls=":", lw=0.8, zorder=1, gid="half")
                ax.set_xlim(-0.03, 1.03)
                ax.tick_params(axis="y", length=0)
                if si == 0:
                    ax.set_title(f"{tex_symbol(m)}  ({'↑' if METRIC[m].higher_is_better else '↓'})")
                if si == len(settings) - 1:
                    ax.set_xlabel(r"$P(X > Y)$")
            axes[si, 0].set_ylabel(setting_label(s))
        ci = float(pois[0].attrs.get("ci", 0.95))
        fig.suptitle(f"Probability that X improves on Y (higher R̄, lower cost metrics; ties ½), {ci:.0%} CI",
                     fontsize="medium")
        _mark_synthetic(fig, bool(pois[0].attrs.get("synthetic")))
    return fig


# -------------------------------------------------------------------------------- aggregate curve
def aggregate_curve_figure(curve: xr.Dataset, baseline: str | None = None, colors: Mapping[str, str] | None = None,
                           style: str = "paper", empty_note: str = "no episodes") -> Figure:
    """The aggregate learning curve (`learning_curves.aggregate_learning_curve`): one panel per metric,
    IQM over conditions per iterate (or env-step bin) with its CI band per algorithm."""
    metrics = [str(m) for m in curve["metric"].values]
    algos = _order(curve["algo"].values, baseline)
    colors = colors or algo_colors(algos, baseline)
    col = "iterate" if "iterate" in curve.dims else "step_bin"
    x = curve[col].values
    ncols = 3 if len(metrics) > 2 else len(metrics)
    nrows = math.ceil((len(metrics) + 1) / ncols) if len(metrics) > 2 else 1
    paper = style == "paper"
    with styled(style):
        fig = _new_figure(style, "double", (1.55 if paper else 3.0) * nrows + 0.35)
        axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True).ravel()
        xlabel = "policy iterate $j$" if col == "iterate" else "environment steps"
        for i, (ax, m) in enumerate(zip(axes, metrics, strict=False)):
            others, base = [], None
            for a in algos:
                one = curve.sel(algo=a, metric=m)
                v, lo, hi = one["value"].values, one["ci_low"].values, one["ci_high"].values
                _line_band(ax, x, v, lo, hi, colors[a], f"{a}:{m}", a == baseline)
                if a == baseline:
                    base = v
                else:
                    others += [v, lo, hi]
            if m == "Dnorm":
                ax.axhline(0.0, color=REFERENCE_COLOR, ls="--", lw=0.8, zorder=4, gid="bound")
            _note_empty(ax, [curve["value"].sel(metric=m).values], empty_note)
            _focus_y(ax, others, base, baseline, (0.0,) if m == "Dnorm" else ())
            ax.set_ylabel(f"IQM {metric_axis_label(m)}")
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
        _mark_synthetic(fig, bool(curve.attrs.get("synthetic")))
    return fig
