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
* ``intervals``, ``poi``, ``aggregate-curve``: the figures of aggregate statistics, in
  `cube.render.aggregate_figures` (interval estimates, probability of improvement, aggregate learning curves).

The drawing helpers they share (legend, bands, the SYNTHETIC mark, ...) are in `cube.render.canvas`;
:func:`save_figure` writes any of them.

Every figure: colours fixed per algorithm (:func:`algo_colors`: the cube's sorted algorithm names on a
colour-blind-safe palette; the baseline grey), labels from the metric registry (`cube.stats.metrics`), the word
SYNTHETIC across figures of synthetic cubes, and ``style="paper"`` (serif, 8 pt, 3.25 in / 6.75 in wide,
PDF fonts embedded as TrueType, Type 42) or ``"screen"``. Lines and bands carry a gid
(``line:<algo>:<panel>``, ``band:<algo>:<panel>``) so tests and tools can find them.

:class:`FigureMaker` computes what the figures need from a cube (path or Dataset) and a Selection, and
:func:`cube.render.views.figure_for_view` gives the TUI the figure of one of its views. matplotlib is an optional extra
(``pip install 'saferl[plot]'``); it is imported only when a figure is made, so ``import cube`` never
needs it, and :func:`require_matplotlib` raises a one-line ``CubeError`` when it is missing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.outputs import atomic_output
from cube.render.canvas import darker, focus_y, legend, line_band, mark_synthetic, new_figure, note_empty, order_algos
from cube.render.style import (
    DEFAULT_WINDOW,
    FORMATS,
    MULTIPLIER_SYMBOL,
    REFERENCE_COLOR,
    algo_colors,
    algo_label,
    iterate_var_label,
    metric_axis_label,
    setting_label,
    styled,
    task_label,
)
from cube.stats.curves import HistPanel

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def save_figure(fig: Figure, path: str | os.PathLike, fmt: str | None = None) -> Path:
    """Write `fig` atomically (`cube.outputs`: beside the target, then renamed) as PDF, PNG or SVG (from the suffix
    unless `fmt`), in the figure's style (PDF: TrueType fonts embedded, Type 42). Returns the path."""
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in FORMATS:
        raise CubeError(f"cannot write a figure as {fmt or 'a file without suffix'!r}: use .pdf, .png or .svg")
    # No dates and no random ids: the same figure is the same bytes (saferl render == the TUI's export).
    meta = {"pdf": {"Creator": "saferl plot", "Producer": "saferl plot", "CreationDate": None},
            "svg": {"Creator": "saferl plot", "Date": None}}.get(fmt, {"Software": "saferl plot"})
    import matplotlib as mpl

    with atomic_output(path) as tmp, styled(getattr(fig, "saferl_style", "paper")), \
            mpl.rc_context({"svg.hashsalt": "saferl"}):
        fig.savefig(tmp, format=fmt, metadata=meta)
    return path


# ---------------------------------------------------------------------------------------------- CDF
def cdf_figure(cdf: xr.Dataset, xmax: float | None = 2.0, baseline: str | None = None,
               colors: Mapping[str, str] | None = None, style: str = "paper", empty_note: str = "no episodes"
               ) -> Figure:
    """Figure 2 (``xmax=2``) / Figure A.1 (``xmax=None``) from `stats.cdf_curves` output: one panel per
    setting, one curve per algorithm with its CI band, kappa = 0 dashed (gid ``kappa0``)."""
    settings = [str(s) for s in cdf["setting"].values]
    algos = order_algos(cdf["algo"].values, baseline)
    colors = colors or algo_colors(algos, baseline)
    kappa = cdf["kappa"].values.astype(np.float64)
    right = xmax if xmax is not None else _full_range(cdf)
    with styled(style):
        fig = new_figure(style, "double", 2.35 if style == "paper" else 4.2)
        axes = fig.subplots(1, len(settings), sharey=True, squeeze=False)[0]
        for ax, s in zip(axes, settings, strict=True):
            for a in algos:
                one = cdf.sel(algo=a, setting=s)
                line_band(ax, kappa, one["cdf"].values, one["ci_low"].values, one["ci_high"].values,
                           colors[a], f"{a}:{s}", a == baseline)
            ax.axvline(0.0, color=REFERENCE_COLOR, ls="--", lw=0.8, zorder=4, gid="kappa0")
            note_empty(ax, [cdf["cdf"].sel(setting=s).values], empty_note)
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
        fig.supxlabel(r"normalized episodic cost deviation $\kappa = (c - d)/d$"
                      + (" (asinh axis: linear near 0, logarithmic in the tail)" if xmax is None else ""),
                      fontsize="medium")
        axes[0].set_ylabel(r"CDF: share of episodes $\leq \kappa$")
        extra = []
        from matplotlib.lines import Line2D

        extra.append((Line2D([], [], color=REFERENCE_COLOR, ls="--", lw=0.8), r"$\kappa = 0$ (cost = $d$)"))
        legend(fig, algos, colors, extra, baseline)
        mark_synthetic(fig, bool(cdf.attrs.get("synthetic")))
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
                  colors: Mapping[str, str] | None = None, style: str = "paper", window: int = DEFAULT_WINDOW,
                  synthetic: bool = False, x: xr.DataArray | None = None) -> Figure:
    """Per-condition training curves from `curves.training_curves` (vars R_mean, R_std, C_mean, C_std;
    dims algo, task, bound, iterate) and optionally `curves.multiplier_curves` (mult_mean, mult_std):
    one column per bound, per task a group of rows R̄, C̄ (bound d drawn, gid ``bound``) and the
    multiplier or the per-iterate variable ``mult.attrs["var"]`` (algorithms that have one). Mean +- 1 sigma
    over seeds after a moving average."""
    algos = order_algos(tc["algo"].values, baseline)
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
        fig = new_figure(style, "double" if len(bounds) > 1 else "single", 0.45 + row_h * len(rows) * len(tasks))
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
                        line_band(ax, xs, m, low, m + s, colors[a], f"{a}:{t}:{d:g}:{row}", a == baseline,
                                   alpha=0.18)
                        if a == baseline:
                            base = m
                        else:
                            others += [m - np.nan_to_num(s), m + np.nan_to_num(s)]
                    focus_y(ax, others, base, baseline, (d,) if row == "C" else ())
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
        legend(fig, algos, colors, extra, baseline)
        mark_synthetic(fig, synthetic or bool(tc.attrs.get("synthetic")))
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
    algos = order_algos(algos if algos is not None else list(dict.fromkeys(k[2] for k in keys)), baseline)
    algos = [a for a in algos if any(k[2] == a for k in keys)]
    colors = colors or algo_colors(algos, baseline)
    paper = style == "paper"
    rows = [(t, a) for t in tasks for a in algos]
    with styled(style):
        fig = new_figure(style, "double" if len(bounds) > 1 else "single",
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
        mark_synthetic(fig, synthetic)
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
            ax.stairs(heights, halves, fill=True, facecolor="white", edgecolor=darker(color), hatch="//////",
                      lw=0.5, gid=f"hist:{gid}:{mode}")
        err = p.std[mode]
        x = 0.5 * (halves[offset:-1:2] + halves[offset + 1::2])
        ok = np.isfinite(err) & (err > 0)
        if ok.any():
            m = p.mean[mode][ok]
            ax.vlines(x[ok], m - err[ok], m + err[ok], color="#333333", lw=0.5, zorder=4, gid=f"err:{gid}:{mode}")
