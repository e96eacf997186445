"""How numbers, tiers, labels and colours look on screen (labels, directions and tiers come from
`cube.stats.metrics`, colours from `cube.render.style`: the figures' palette).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from rich.text import Text

from cube.render.style import algo_colors, hex_rgb
from cube.stats.metrics import SETTING, TIER_LABELS
from saferl_tui.selection import UISelection

# ======================================================================== colours
REF_COLOR = "gray"
"""Reference lines (the bound d, κ = 0): a colour no algorithm gets."""
REF_RICH = "grey50"


def algo_palette(all_algos: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    """A fixed colour per algorithm of the cube, the figures' (`cube.render.style.algo_colors`: by sorted
    name, not by the selection), so an algorithm has the same colour in every view and every figure."""
    return {a: hex_rgb(c) for a, c in algo_colors(all_algos).items()}


def rich_color(rgb: tuple[int, int, int]) -> str:
    """The Rich style of an RGB colour."""
    return f"rgb({rgb[0]},{rgb[1]},{rgb[2]})"


def legend_text(colors: dict[str, tuple[int, int, int]], extra: Sequence[tuple[str, str]] = ()) -> Text:
    """One line: '━━ ppo  ━━ ppo_lag …' in each algorithm's colour, then (text, style) extras."""
    text = Text(" ")
    for a, rgb in colors.items():
        text.append("━━ ", style=rich_color(rgb))
        text.append(a + "  ", style=f"bold {rich_color(rgb)}")
    for item, style in extra:
        text.append(item + "  ", style=style)
    return text


# ======================================================================== formatting
def fmt(v: float, digits: int = 2) -> str:
    """A number as shown on screen (fixed decimals; "–" for NaN; a value that rounds to zero unsigned: 0.00,
    never -0.00)."""
    v = float(v)
    return "–" if not math.isfinite(v) else _unsigned_zero(f"{v:.{digits}f}")


def fmt_signed(v: float, digits: int = 2) -> str:
    """A difference as shown on screen (+1.20 / -0.30, the ASCII minus of every other number on screen; "–"
    for NaN; 0.00 for one that rounds to zero)."""
    v = float(v)
    return "–" if not math.isfinite(v) else _unsigned_zero(f"{v:+.{digits}f}")


def _unsigned_zero(text: str) -> str:
    """'-0.00' and '+0.00' as '0.00' (a zero has no sign); any other number as it is."""
    return text.lstrip("+-") if text.strip("+-0.") == "" else text


def fmt_tier(t: float) -> str:
    """A tier as shown on screen (integer, "–" when undefined)."""
    t = float(t)
    return "–" if not math.isfinite(t) or t < 0 else str(int(t))


def tier_name(t: float) -> str:
    """The name of a tier ("Moderate"; "" when undefined), from ``cube.stats.metrics``."""
    t = float(t)
    return "" if not math.isfinite(t) or t < 0 else TIER_LABELS[int(t)]


def iter_text(sel: UISelection) -> str:
    """The training iterates of the selection as a parenthesised suffix ("" for all iterates)."""
    if sel.iterates is None:
        return ""
    if isinstance(sel.iterates, int):
        return f" (iterate {sel.iterates})"
    return f" (iterates {sel.iterates[0]}..{sel.iterates[1]})"


def setting_title(sel: UISelection, setting: str) -> str:
    """The setting's label, with the training iterates for train ("Train (iterates 1..3)")."""
    return SETTING[setting].label + (iter_text(sel) if setting == "train" else "")


def condition_label(task: str, bound: float) -> str:
    """'goal d=25' style label of a (task, bound) condition."""
    return f"{task} d={bound:g}"


def incomplete_note(counts: dict | None) -> Text:
    """'◐ 3 incomplete runs included (latest iterate as final)' (warning style), or nothing when every selected
    run is complete. The one rule for runs still training: they count, their latest iterate's episodes as
    their final ones (`cube.schema.final_iterate`), and every table and plot says so with this mark."""
    n = sum(counts.values()) if counts else 0
    if not n:
        return Text("")
    return Text(f"  ◐ {n} incomplete run{'s' if n != 1 else ''} included, latest iterate as final (6 Runs)",
                style="bold dark_orange")


def nice_step(span: float, n: int) -> float:
    """A 1-2-5 step giving about ``n`` intervals over ``span``."""
    if not math.isfinite(span) or span <= 0:
        return 1.0
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def nice_ticks(lo: float, hi: float, n: int = 5, integer: bool = False) -> list[float]:
    """Round tick values (multiples of a 1-2-5 step) inside [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    step = nice_step(hi - lo, n)
    if integer:
        step = max(1.0, round(step))
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    v = first
    while v <= hi + 1e-9 * step:
        ticks.append(0.0 if abs(v) < 1e-12 * step else v)
        v = first + len(ticks) * step
    return ticks


UNITS = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
"""Suffixes of large tick values (env steps reach 1e9 and more)."""


def tick_label(v: float, step: float, top: float | None = None) -> str:
    """A tick value as short text: 1.5M, 250k, 2G, 0.25, 40. ``top``: the largest |tick| of the axis,
    which picks one unit for the whole axis (0.5M, 1M, 1.5M; never 1e+06M nor 750G beside 1.00T); the
    step decides the decimals."""
    a = abs(v) if top is None else abs(top)
    if a >= 1e15:
        return f"{v:.2g}"
    for scale, unit in UNITS:
        if a >= (1e4 if unit == "k" else scale):
            return "0" if v == 0 else decimals_text(v / scale, step / scale) + unit
    return decimals_text(v, step)


def decimals_text(v: float, step: float) -> str:
    """``v`` with as many decimals as a tick ``step`` needs (40, 0.25, 2.5)."""
    if not math.isfinite(step) or step <= 0 or step >= 1:
        return f"{v:.0f}"
    digits = max(0, -math.floor(math.log10(step) + 1e-9))
    if abs(step * 10 ** digits - round(step * 10 ** digits)) > 1e-6:
        digits += 1
    return f"{v:.{digits}f}"


def padded_range(*arrays: Any) -> tuple[float, float]:
    """(low, high) of the finite values of ``arrays`` with a little room, NaN-safe."""
    vals = np.concatenate([np.asarray(a, float).ravel() for a in arrays]) if arrays else np.array([])
    vals = vals[np.isfinite(vals)]
    if not vals.size:
        return (0.0, 1.0)
    lo, hi = float(vals.min()), float(vals.max())
    pad = (hi - lo) * 0.05 or (abs(hi) * 0.1 or 1.0)
    return lo - pad, hi + pad


def nan_none(a: np.ndarray) -> list[float]:
    """plotext cannot skip NaN: carry the nearest previous finite value (the first finite one, or 0, before it)."""
    out, last = [], None
    arr = np.asarray(a, float)
    first = arr[np.isfinite(arr)][0] if np.isfinite(arr).any() else 0.0
    for v in arr:
        if math.isfinite(v):
            last = float(v)
        out.append(last if last is not None else float(first))
    return out
