"""The one look of saferl's outputs: palette (shared by the figures and the TUI), display names, units,
matplotlib rc of the two styles, and the optional-matplotlib guard. No drawing and no statistics here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.render.choices import DEFAULT_WINDOW as DEFAULT_WINDOW  # re-exported: the figures use it
from cube.render.choices import FIGURE_FORMATS, FIGURE_KINDS, FIGURE_STYLES
from cube.stats.metrics import METRIC, SETTING
from cube.stats.runs import cvar_alpha

if TYPE_CHECKING:  # pragma: no cover

    pass


KINDS = FIGURE_KINDS
STYLES = FIGURE_STYLES
FORMATS = FIGURE_FORMATS
INSTALL_HINT = "matplotlib is not installed; pip install 'saferl[plot]'"

# Okabe & Ito's colour-blind-safe palette (black and yellow left out: black is for reference lines,
# yellow is hard to see on white), ordered so the first colours read on white paper and on dark terminals
# alike; then two of Tol's. Grey is reserved for the baseline. The TUI uses the same colours.
PALETTE = ("#e69f00", "#56b4e9", "#009e73", "#cc79a7", "#d55e00", "#0072b2", "#882255", "#44aa99")
BASELINE_COLOR = "#8c8c8c"
REFERENCE_COLOR = "#222222"
WIDTH = {"paper": (3.25, 6.75), "screen": (5.0, 10.0)}  # single column, full width (inches)
# Display names of the paper's algorithms and the symbol of their multiplier; anything else as it is.
ALGO_LABELS = {"ppo": "PPO", "ppo_lag": "PPO-Lag", "p3o": "P3O", "focops": "FOCOPS"}
MULTIPLIER_SYMBOL = {"ppo_lag": r"\lambda", "p3o": r"\kappa", "focops": r"\nu"}
# Per-iterate variables a curve can show (`cube.stats.curves.iterate_var_names`), as an axis label; any other
# variable by its name. Written by the trainers: PID state (PPO-PID, SAC-PID), Saute's budget, CRPO's regime,
# SAC's temperature and losses.
ITERATE_VAR_LABELS = {
    "multiplier": "multiplier", "pid_integral": "PID integral", "pid_error": "PID error (cost/step − d/T)",
    "pid_derivative": "PID derivative", "saute_budget": "Saute budget left", "saute_penalty_share":
    "share of steps penalised", "crpo_regime": "CRPO regime (1 reward, 0 cost)", "crpo_reward_share":
    "share of reward steps", "alpha": "temperature α", "mean_step_cost": "cost per step",
    "mean_step_reward": "reward per step (learner's)", "batch_cost": "minibatch cost per step",
}


def iterate_var_label(name: str) -> str:
    """Axis label of a per-iterate variable (ITERATE_VAR_LABELS, else its name with spaces)."""
    return ITERATE_VAR_LABELS.get(name, name.replace("_", " "))


# Short units for axis labels (used when the metric registry has no `unit` field).
UNITS = {"R": "episodic return", "C": "episodic cost", "Dnorm": "(C̄ − d)/d", "V": "share of episodes",
         "Dplus": "(c − d)/d", "CVaR": "(c − d)/d, worst episodes"}
TASK_LABELS = {"goal": "Safe Goal Point", "circle": "Safe Circle Point", "push": "Safe Push Point",
               "button": "Safe Button Point"}
TIER_GUIDE_LABELS = {("Dnorm", 0.0): "tier ≥1", ("V", 0.1): "tier 3", ("V", 0.5): "tier ≥2",
                     ("Dplus", 0.1): "tier 3"}
"""What a tier guide line marks: the tier that needs the metric at or below it."""
TIER_GUIDES = {"Dnorm": (0.0,), "V": (0.1, 0.5), "Dplus": (0.1,)}
"""Dotted guide lines at the tier thresholds of Table 1, per metric."""
MODE_LABELS = {"expl": "exploration", "greedy": "greedy"}


class MatplotlibMissing(CubeError):
    """matplotlib (the optional extra `plot`) is not installed."""


def require_matplotlib():
    """The matplotlib module with the Agg backend; MatplotlibMissing (a CubeError, one line) if absent."""
    try:
        import matplotlib
    except ImportError:
        raise MatplotlibMissing(INSTALL_HINT) from None
    return matplotlib


# -------------------------------------------------------------------------------------------- style
def rc_params(style: str) -> dict[str, Any]:
    if style not in STYLES:
        raise CubeError(f"unknown style {style!r}: use {' or '.join(STYLES)}")
    common = {
        "pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "path", "axes.spines.top": False,
        "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.25, "grid.linewidth": 0.5,
        "legend.frameon": False, "axes.axisbelow": True, "figure.constrained_layout.use": True,
        "savefig.bbox": None, "axes.unicode_minus": True,
        "hatch.linewidth": 0.6,
    }
    if style == "paper":
        return {**common, "font.family": "serif", "font.serif": ["STIXGeneral", "DejaVu Serif"],
                "mathtext.fontset": "stix", "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8,
                "xtick.labelsize": 7, "ytick.labelsize": 7, "legend.fontsize": 7, "lines.linewidth": 1.0,
                "axes.linewidth": 0.6, "xtick.major.width": 0.6, "ytick.major.width": 0.6,
                "xtick.major.size": 2.5, "ytick.major.size": 2.5, "savefig.dpi": 300,
                "figure.constrained_layout.h_pad": 0.02, "figure.constrained_layout.w_pad": 0.02}
    return {**common, "font.family": "sans-serif", "font.sans-serif": ["DejaVu Sans"], "mathtext.fontset": "dejavusans",
            "font.size": 11, "axes.titlesize": 11, "axes.labelsize": 11, "xtick.labelsize": 10,
            "ytick.labelsize": 10, "legend.fontsize": 10, "lines.linewidth": 1.6, "savefig.dpi": 150}


@contextlib.contextmanager
def styled(style: str = "paper") -> Iterator[None]:
    """matplotlib rcParams of `style` for the block (figures keep their fonts after it; saving needs it
    again for the PDF font type: use :func:`save_figure`)."""
    mpl = require_matplotlib()
    with mpl.rc_context(rc_params(style)):
        yield


# ------------------------------------------------------------------------------------ labels, colours
def algo_colors(algos: Sequence[str], baseline: str | None = None) -> dict[str, str]:
    """A fixed colour per algorithm: sorted names on the palette (so a colour does not depend on which
    algorithms are selected or on the baseline), the baseline grey."""
    out = {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(sorted({str(a) for a in algos}))}
    if baseline is not None:
        out[str(baseline)] = BASELINE_COLOR
    return out


def hex_rgb(color: str) -> tuple[int, int, int]:
    """'#e69f00' -> (230, 159, 0)."""
    c = color.lstrip("#")
    return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16)


def algo_label(algo: str) -> str:
    return ALGO_LABELS.get(str(algo), str(algo))


def tex_symbol(metric: str, alpha: float | None = None) -> str:
    """The registry's LaTeX symbol in $...$; `alpha`: the CVaR alpha written in place of its \\alpha."""
    tex = METRIC[metric].tex
    return f"${tex if alpha is None else tex.replace(chr(92) + 'alpha', f'{alpha:g}')}$"


def metric_axis_label(metric: str, with_unit: bool = True, alpha: float | None = None) -> str:
    """'$\\bar{C}$ (episodic cost)': the registry's LaTeX symbol and a short unit (`alpha`: see `tex_symbol`)."""
    m = METRIC[metric]
    unit = getattr(m, "unit", None) or UNITS.get(metric)
    return f"{tex_symbol(metric, alpha)} ({unit})" if with_unit and unit else tex_symbol(metric, alpha)


def cvar_note(alpha: float) -> str:
    """What the CVaR column of a table is, at `alpha` (one sentence for notes and captions)."""
    return (f"CVaR: CVaR at alpha = {alpha:g} of (c - d)/d, the mean over the worst {100 * alpha:g}% of a run's "
            "episodes (Rockafellar-Uryasev), aggregated like the other metrics")


def shows_cvar(table: xr.Dataset) -> bool:
    """Whether a statistics table has a CVaR column (a `metric` label, or `CVaR_mean`)."""
    return ("metric" in table.coords and "CVaR" in table["metric"].values) or "CVaR_mean" in table


def table_cvar_note(table: xr.Dataset) -> str:
    """`cvar_note` of a statistics table that has a CVaR column, else ""."""
    return cvar_note(cvar_alpha(table)) if shows_cvar(table) else ""


def direction_text(metric: str) -> str:
    return "higher is better" if METRIC[metric].higher_is_better else "lower is better"


def setting_label(setting: str) -> str:
    return SETTING[setting].label if setting in SETTING else str(setting)


def task_label(task: str) -> str:
    return TASK_LABELS.get(str(task), str(task))


# ------------------------------------------------------------------------------------ axis ranges
def value_span(values: np.ndarray, refs: Sequence[float] = ()) -> tuple[float, float] | None:
    """(min, max) of the finite `values` and `refs`; None when there are none."""
    v = np.concatenate([np.ravel(np.asarray(values, dtype=np.float64)), np.asarray(refs, dtype=np.float64)])
    v = v[np.isfinite(v)]
    return (float(v.min()), float(v.max())) if v.size else None


def focus_limits(others: np.ndarray, base: np.ndarray | None, refs: Sequence[float] = (),
                  pad: float = 0.08, far: float = 0.5) -> tuple[tuple[float, float] | None, int]:
    """The one rule by which the not-safe baseline never sets an axis (figures and the TUI alike):
    axis limits that follow `others` (and the reference values `refs`) when the baseline's values lie
    far outside them (more than `far` times their span beyond them): ((lo, hi), +1 above / -1 below),
    else (None, 0)."""
    o = value_span(others, refs)
    b = value_span(base) if base is not None else None
    if o is None or b is None:
        return None, 0
    lo, hi = o
    span = max(hi - lo, 0.05 * max(abs(lo), abs(hi)), 1e-9)
    if b[0] > hi + far * span:
        side = 1
    elif b[1] < lo - far * span:
        side = -1
    else:
        return None, 0
    return (lo - pad * span, hi + pad * span), side
