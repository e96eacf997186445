"""The statistics tables as rich tables for a terminal, laid out to fit its width without cutting a number.

Each table has layouts from the widest to the narrowest: CIs (or ± std) beside the value, then under it
(two-line cells), then values only (the table says the CIs were left out and how to see them), then values
of the paper's metrics only (CVaR left out, saying so); the first layout that fits `width` is drawn. The
not-safe baseline (`cube.stats.metrics.not_safe`) is grey and marked with a dagger, never bold.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence

import xarray as xr
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cube.render.style import table_cvar_note
from cube.stats.metrics import METRIC, SETTING, TIER_LABELS, best_label

LAYOUTS = ("beside", "under", "values", "paper")
VALUES_ONLY = ("values", "paper")
NOT_SAFE_MARK = "†"
NOT_SAFE_NOTE = f"{NOT_SAFE_MARK} not safe RL (no cost constraint): grey, never best"


def _fmt(x: float, digits: int) -> str:
    return "–" if x is None or math.isnan(float(x)) else f"{float(x):.{digits}f}"


def width_of(table: Table) -> int:
    """Columns the table needs when nothing is squeezed."""
    console = Console(width=100_000, file=io.StringIO(), color_system=None, record=True)
    console.print(table)
    return max((len(line.rstrip()) for line in console.export_text(styles=False).splitlines()), default=0)


def fit(build: Callable[[str], Table], width: int | None, layouts: Sequence[str] = LAYOUTS) -> Table:
    """The first layout of `layouts` whose table fits `width` columns (None: the first), else the last."""
    for layout in layouts:
        table = build(layout)
        if width is None or width_of(table) <= width:
            return table
    return table


def _table(title: str, caption: str, narrow: bool) -> Table:
    return Table(title=title, caption=caption or None, title_justify="left", caption_justify="left",
                 header_style="bold", box=box.SIMPLE_HEAD if narrow else box.HEAVY_HEAD,
                 padding=(0, 1), collapse_padding=narrow, pad_edge=not narrow)


def marked_name(a: str, not_safe: Sequence[str]) -> Text:
    """The algorithm as a table shows it (as text, never markup: a label like `[/x]` is data), with the
    not-safe mark when it is one."""
    return Text(f"{a} {NOT_SAFE_MARK}" if a in not_safe else a)


def label(text: object) -> Text:
    """A label cell: the text as it is, never rich markup."""
    return Text(str(text))


def _caption(layout: str, not_safe: Sequence[str], extra: str, what: str, asked: bool = False,
             table: xr.Dataset | None = None) -> str:
    notes = []
    if layout in VALUES_ONLY:
        notes.append(f"{what} left out (--no-ci)" if asked else
                     f"{what} left out to fit the terminal: widen it, or use --format markdown / --out FILE")
    if not_safe:
        notes.append(NOT_SAFE_NOTE)
    if extra:
        notes.append(extra)
    cvar = table_cvar_note(table) if table is not None else ""
    if cvar and layout == "paper":
        notes.append("CVaR left out to fit the terminal: widen it, or use --format markdown / --out FILE")
    elif cvar:
        notes.append(cvar)
    return "; ".join(notes)


def _shown(metrics: Sequence[str], layout: str) -> list[str]:
    """The metrics a layout shows: all, or the paper's only in the narrowest."""
    return [m for m in metrics if layout != "paper" or METRIC[m].paper]


def _layouts(ci: bool) -> tuple[str, ...]:
    return LAYOUTS if ci else VALUES_ONLY


# ------------------------------------------------------------------------------------ aggregate
def aggregate(agg: xr.Dataset, not_safe: Sequence[str] = (), digits: int = 2, width: int | None = None,
              ci: bool = True, unavailable: Callable[..., bool] | None = None, na_text: str = "n/a",
              note: str = "") -> Table:
    """IQM [CI] of every metric and the tier per algorithm and setting, fitted to `width` columns; `ci`
    False draws values only. `unavailable(algo, setting, metric)` marks means-only cells."""
    na = unavailable or (lambda a, s, m: False)
    algos, settings = [str(a) for a in agg["algo"].values], [str(s) for s in agg["setting"].values]
    metrics = [str(m) for m in agg["metric"].values]
    best = {(s, m): best_label({a: float(agg["value"].sel(algo=a, setting=s, metric=m)) for a in algos}, m, not_safe)
            for s in settings for m in metrics}
    level = 100 * float(agg.attrs.get("ci", 0.95))
    title = (f"IQM over task-bound conditions of seed means, {level:g}% stratified-bootstrap CI "
             f"(B={agg.attrs.get('boot', '?')}); bold = best; lower is better except "
             f"{', '.join(METRIC[m].label for m in METRIC if METRIC[m].higher_is_better)}")

    def build(layout: str) -> Table:
        narrow = layout != "beside"
        shown = _shown(metrics, layout)
        table = _table(title, _caption(layout, not_safe, note, "CIs", not ci, agg), narrow)
        table.add_column("Algorithm", no_wrap=True)
        table.add_column("Setting", no_wrap=True)
        for m in shown:  # values only: the bare labels (the title says IQM), so six metrics fit 80 columns
            head = METRIC[m].label if layout in VALUES_ONLY else f"IQM({METRIC[m].label})"
            table.add_column(head + (" [CI]" if layout == "beside" else ""), justify="right", no_wrap=True)
        table.add_column("Tier", justify="right" if narrow else "left", no_wrap=True)
        for ai, a in enumerate(algos):
            for si, s in enumerate(settings):
                cells = []
                for m in shown:
                    if na(a, s, m):
                        cells.append(Text(na_text))
                        continue
                    v = agg.sel(algo=a, setting=s, metric=m)
                    text = Text(_fmt(float(v["value"]), digits),
                                style="bold" if best[(s, m)] == a else "")
                    lo, hi = _fmt(float(v["ci_low"]), digits), _fmt(float(v["ci_high"]), digits)
                    if layout == "beside":
                        text.append(f" [{lo}, {hi}]", style="dim")
                    elif layout == "under":
                        text.append(f"\n[{lo}, {hi}]", style="dim")
                    cells.append(text)
                t = int(agg["tier"].sel(algo=a, setting=s))
                tier = na_text if na(a, s, None) else ("–" if t < 0 else
                                                      (str(t) if narrow else f"{t} {TIER_LABELS[t]}"))
                setting = label(SETTING[s].short if s in SETTING else s)
                table.add_row(marked_name(a, not_safe) if si == 0 else "", setting,
                              *cells, tier, style="grey50" if a in not_safe else None,
                              end_section=si == len(settings) - 1 and ai < len(algos) - 1)
        return table

    return fit(build, width, _layouts(ci))


# ----------------------------------------------------------------------------------- conditions
def conditions(ct: xr.Dataset, not_safe: Sequence[str] = (), digits: int = 2, width: int | None = None,
               ci: bool = True, unavailable: Callable[..., bool] | None = None, na_text: str = "n/a",
               note: str = "") -> Table:
    """Seed mean ± std of every metric and the tier per algorithm, task, bound and setting, fitted to
    `width`; `ci` False leaves the std out. `unavailable(algo, task, bound, setting, metric)`."""
    na = unavailable or (lambda *k: False)
    metrics = [m for m in METRIC if f"{m}_mean" in ct]
    keys = [(str(a), str(t), float(b), str(s)) for a in ct["algo"].values for t in ct["task"].values
            for b in ct["bound"].values for s in ct["setting"].values]
    title = "Per condition: seed mean ± sample std (ddof=1); tier from the seed means"

    seeds = sorted({int(v) for v in ct["n_seeds"].values.ravel()})
    seeds_note = f"seeds per condition: {seeds[0]}" + (f"-{seeds[-1]}" if len(seeds) > 1 else "") if seeds else ""

    def build(layout: str) -> Table:
        narrow = layout != "beside"
        with_seeds = layout not in VALUES_ONLY
        shown = _shown(metrics, layout)
        extra = "; ".join(x for x in (note, "" if with_seeds else seeds_note) if x)
        table = _table(title, _caption(layout, not_safe, extra, "± std", not ci, ct), narrow)
        for head in ("Algorithm", "Task", "d", "Setting"):
            table.add_column(head, no_wrap=True, justify="right" if head == "d" else "left")
        for m in shown:
            table.add_column(METRIC[m].label, justify="right", no_wrap=True)
        if with_seeds:
            table.add_column("Seeds", justify="right", no_wrap=True)
        table.add_column("Tier", justify="right", no_wrap=True)
        previous = None
        for a, t, b, s in keys:
            at = {"algo": a, "task": t, "bound": b, "setting": s}
            cells = []
            for m in shown:
                if na(a, t, b, s, m):
                    cells.append(Text(na_text))
                    continue
                text = Text(_fmt(float(ct[m + "_mean"].sel(at)), digits))
                std = _fmt(float(ct[m + "_std"].sel(at)), digits)
                if layout == "beside":
                    text.append(f" ± {std}", style="dim")
                elif layout == "under":
                    text.append(f"\n± {std}", style="dim")
                cells.append(text)
            tier = int(ct["tier"].sel(at))
            first = (a, t, b) != previous
            previous = (a, t, b)
            n_seeds = [str(int(ct["n_seeds"].sel(at)))] if with_seeds else []
            table.add_row(marked_name(a, not_safe) if first else "", label(t) if first else "",
                          f"{b:g}" if first else "", label(SETTING[s].short if s in SETTING else s), *cells, *n_seeds,
                          na_text if na(a, t, b, s, None) else ("–" if tier < 0 else str(tier)),
                          style="grey50" if a in not_safe else None)
        return table

    return fit(build, width, _layouts(ci))
