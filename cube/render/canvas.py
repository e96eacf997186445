"""The drawing helpers every figure shares (matplotlib, object-oriented API, no pyplot state): a figure of a
style, the SYNTHETIC mark, a note on an empty panel, the legend, a line with its band, the baseline's order and
its off-scale note, rliable's interval rows. Drawing only: no statistics are computed here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from cube.render.style import BASELINE_COLOR, REFERENCE_COLOR, WIDTH, algo_label, focus_limits

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def new_figure(style: str, width: str | float, height: float) -> Figure:
    """An empty Figure of `style` ("paper" or "screen"), `width` "single"/"double" column (or inches), `height`
    inches, constrained layout; `save_figure` reads its style."""
    from matplotlib.figure import Figure

    w = WIDTH[style][1 if width == "double" else 0] if isinstance(width, str) else float(width)
    fig = Figure(figsize=(w, height), layout="constrained")
    fig.saferl_style = style  # read by save_figure
    return fig


def mark_synthetic(fig: Figure, synthetic: bool) -> None:
    """The word SYNTHETIC across the figure (light, behind nothing that matters) of a synthetic cube."""
    if not synthetic:
        return
    size = 30 if getattr(fig, "saferl_style", "paper") == "paper" else 48
    fig.text(0.5, 0.5, "SYNTHETIC", fontsize=size, color="#D00000", alpha=0.13, rotation=20, ha="center",
             va="center", fontweight="bold", zorder=10, gid="synthetic")


def note_empty(ax: Axes, values: Sequence, note: str) -> None:
    """Write `note` across a panel that has nothing to draw (no finite value in `values`), so an empty
    panel says why (e.g. "not available: means only") instead of looking like a failure."""
    if any(np.isfinite(np.asarray(v, dtype=np.float64)).any() for v in values):
        return
    ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", fontsize="small",
            color=REFERENCE_COLOR, style="italic", gid="not-available")


def legend(fig: Figure, algos: Sequence[str], colors: Mapping[str, str], extra=(),
           baseline: str | None = None, where: str = "upper") -> None:
    """One legend for the figure, outside the panels (`where`: "upper" or "lower"): a line per algorithm in its
    colour (the baseline dashed), then `extra` (handle, label) pairs; in rows of at most 6 entries, fewer where
    the figure is too narrow for them (a one-panel figure), so no entry is cut at the figure's edges."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[a], lw=2.0, ls="--" if a == baseline else "-") for a in algos]
    handles += [h for h, _ in extra]
    labels = [algo_label(a) for a in algos] + [lab for _, lab in extra]
    for ncols in range(min(len(labels), 6), 0, -1):  # as many columns as the figure's width holds
        box = fig.legend(handles, labels, loc=f"outside {where} center", ncols=ncols, handlelength=1.6,
                         columnspacing=1.2)
        if ncols == 1 or box.get_window_extent().width <= 0.98 * fig.bbox.width:
            break
        box.remove()


def line_band(ax: Axes, x, y, lo, hi, color: str, gid: str, baseline: bool = False, lw: float | None = None,
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


def order_algos(algos: Sequence[str], baseline: str | None) -> list[str]:
    """Algorithms in the cube's order with the baseline last (drawn under the others, listed last)."""
    algos = [str(a) for a in algos]
    return [a for a in algos if a != baseline] + [a for a in algos if a == baseline]


def darker(color: str, f: float = 0.65) -> tuple[float, float, float]:
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(color)
    return (r * f, g * f, b * f)


def interval_rows(ax: Axes, labels: Sequence[str], value, lo, hi, colors: Sequence[str], gid: str,
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
        ax.vlines(v, y[i] - 0.36, y[i] + 0.36, color=darker(colors[i], 0.45), lw=0.9, zorder=4,
                  gid=f"point:{gid}:{labels[i]}")
    ax.set_yticks(y, [algo_label(lab) if ":" not in lab else lab for lab in labels])
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.grid(True, axis="x")
    ax.grid(False, axis="y")


def offscale_note(ax: Axes, baseline: str, value: float, side: int, axis: str = "y") -> None:
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


def focus_y(ax: Axes, others: list[np.ndarray], base: np.ndarray | None, baseline: str | None,
             refs: Sequence[float] = ()) -> None:
    """Let a panel's y axis follow the non-baseline curves when the baseline lies far outside them."""
    if baseline is None or base is None or not others:
        return
    lims, side = focus_limits(np.concatenate([np.ravel(o) for o in others]), base, refs)
    if lims is not None:
        ax.set_ylim(*lims)
        offscale_note(ax, baseline, float(np.nanmedian(base)), side, "y")
