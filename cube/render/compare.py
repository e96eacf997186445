"""A cube's tables beside reference numbers (`cube.stats.reference`) as text: a rich table for the terminal
(fitted to its width), Markdown, CSV and JSON.

Aggregate: our IQM and the reference's, ✓ where ours lies inside the reference's CI, ✗ where not.
Conditions: our seed mean and the reference's mean ± std, with z = (ours - reference) / reference std,
"how many of the paper's seed standard deviations away"; |z| > 2 is highlighted.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence

import xarray as xr
from rich.table import Table
from rich.text import Text

from cube.render import terminal
from cube.stats.metrics import METRIC, SETTING

FORMATS = ("table", "markdown", "csv", "json")
Z_HIGHLIGHT = 2.0


def _f(x: float, digits: int) -> str:
    return "–" if x is None or math.isnan(float(x)) else f"{float(x):.{digits}f}"


def _z(x: float) -> str:
    return "–" if math.isnan(float(x)) else f"{float(x):+.1f}"


def _inside(x: float) -> str:
    return "" if math.isnan(float(x)) else ("✓" if x else "✗")


def _reference(cmp: xr.Dataset) -> str:
    return str(cmp.attrs.get("reference", "reference"))


def _setting(s: str) -> str:
    return SETTING[s].short if s in SETTING else s


# ------------------------------------------------------------------------------------ aggregate
def aggregate(cmp: xr.Dataset, fmt: str = "table", digits: int = 2, width: int | None = None,
              not_safe: Sequence[str] = ()):
    """`compare_aggregate` output in `fmt` (a rich Table for "table")."""
    algos, settings = [str(a) for a in cmp["algo"].values], [str(s) for s in cmp["setting"].values]
    metrics = [str(m) for m in cmp["metric"].values]
    ref = _reference(cmp)
    if fmt in ("csv", "json"):
        rows = [{"algo": a, "setting": s, "metric": m,
                 **{k: _num(cmp[k].sel(algo=a, setting=s, metric=m)) for k in
                    ("value", "ci_low", "ci_high", "ref_value", "ref_ci_low", "ref_ci_high", "diff",
                     "inside_ref_ci", "ref_inside_ci")}}
                for a in algos for s in settings for m in metrics]
        return _csv_or_json(rows, fmt, {"kind": "reference_aggregate", "reference": ref})
    title = (f"Ours vs {ref}: IQM per algorithm and setting; first line ours, second the {ref}'s; "
             f"✓/✗ after ours: inside / outside the {ref}'s CI")
    if fmt == "markdown":
        header = ["Algorithm", "Setting", *[f"IQM({METRIC[m].label}) ours / {ref}" for m in metrics],
                  f"Tier ours / {ref}"]
        lines = []
        for a in algos:
            for s in settings:
                at = {"algo": a, "setting": s}
                cells = [f"{_f(_at(cmp, 'value', at, m), digits)} / "
                         f"{_f(_at(cmp, 'ref_value', at, m), digits)} "
                         f"{_inside(_at(cmp, 'inside_ref_ci', at, m))}".rstrip() for m in metrics]
                tiers = f"{_tier(cmp['tier'].sel(at))} / {_tier(cmp['ref_tier'].sel(at))}"
                lines.append([a, _setting(s), *cells, tiers])
        return f"{title}\n\n" + _markdown(header, lines)

    def build(layout: str) -> Table:
        table = Table(title=title, title_justify="left", header_style="bold", box=None, padding=(0, 1),
                      caption=terminal.NOT_SAFE_NOTE if not_safe else None, caption_justify="left")
        table.add_column("Algorithm", no_wrap=True)
        table.add_column("Setting", no_wrap=True)
        for m in metrics:
            table.add_column(f"IQM({METRIC[m].label})", justify="right", no_wrap=True)
        table.add_column("Tier", justify="right", no_wrap=True)
        for a in algos:
            for i, s in enumerate(settings):
                at = {"algo": a, "setting": s}
                cells = []
                for m in metrics:
                    text = Text(_f(_at(cmp, "value", at, m), digits))
                    mark = _inside(_at(cmp, "inside_ref_ci", at, m))
                    text.append(f" {mark}" if mark else "", style="green" if mark == "✓" else "red")
                    sep = " " if layout == "beside" else "\n"
                    text.append(f"{sep}{_f(_at(cmp, 'ref_value', at, m), digits)}", style="dim")
                    cells.append(text)
                tier = Text(_tier(cmp["tier"].sel(at)))
                tier.append(("/" if layout == "beside" else "\n") + _tier(cmp["ref_tier"].sel(at)), style="dim")
                table.add_row(terminal.marked_name(a, not_safe) if i == 0 else "", terminal.label(_setting(s)),
                              *cells, tier,
                              style="grey50" if a in not_safe else None)
        return table

    return terminal.fit(build, width, ("beside", "under"))


# ----------------------------------------------------------------------------------- conditions
def conditions(cmp: xr.Dataset, fmt: str = "table", digits: int = 2, width: int | None = None,
               not_safe: Sequence[str] = ()):
    """`compare_conditions` output in `fmt` (a rich Table for "table")."""
    keys = [(str(a), str(t), float(b), str(s)) for a in cmp["algo"].values for t in cmp["task"].values
            for b in cmp["bound"].values for s in cmp["setting"].values]
    metrics = [str(m) for m in cmp["metric"].values]
    ref = _reference(cmp)
    if fmt in ("csv", "json"):
        rows = [{"algo": a, "task": t, "bound": b, "setting": s, "metric": m,
                 **{k: _num(cmp[k].sel(algo=a, task=t, bound=b, setting=s, metric=m))
                    for k in ("mean", "std", "ref_mean", "ref_std", "diff", "z")}}
                for a, t, b, s in keys for m in metrics]
        return _csv_or_json(rows, fmt, {"kind": "reference_conditions", "reference": ref,
                                        "z": "(mean - ref_mean) / ref_std"})
    title = (f"Ours vs {ref} per condition: our seed mean, then z = (ours - {ref}) / {ref}'s seed std "
             f"(|z| > {Z_HIGHLIGHT:g} highlighted)")
    if fmt == "markdown":
        header = ["Algorithm", "Task", "d", "Setting",
                  *[f"{METRIC[m].label} ours (z) / {ref} mean ± std" for m in metrics]]
        lines = []
        for a, t, b, s in keys:
            at = {"algo": a, "task": t, "bound": b, "setting": s}
            lines.append([a, t, f"{b:g}", _setting(s),
                          *[f"{_f(_at(cmp, 'mean', at, m), digits)} ({_z(_at(cmp, 'z', at, m))}) / "
                            f"{_f(_at(cmp, 'ref_mean', at, m), digits)} ± "
                            f"{_f(_at(cmp, 'ref_std', at, m), digits)}" for m in metrics]])
        return f"{title}\n\n" + _markdown(header, lines)

    def build(layout: str) -> Table:
        table = Table(title=title, title_justify="left", header_style="bold", box=None, padding=(0, 1))
        for head in ("Algorithm", "Task", "d", "Setting"):
            table.add_column(head, no_wrap=True, justify="right" if head == "d" else "left")
        for m in metrics:
            table.add_column(METRIC[m].label, justify="right", no_wrap=True)
        previous = None
        for a, t, b, s in keys:
            at = {"algo": a, "task": t, "bound": b, "setting": s}
            cells = []
            for m in metrics:
                z = float(_at(cmp, "z", at, m))
                text = Text(_f(_at(cmp, "mean", at, m), digits))
                text.append((" " if layout == "beside" else "\n") + f"z{_z(z)}",
                            style="bold red" if abs(z) > Z_HIGHLIGHT else "dim")
                cells.append(text)
            first = (a, t, b) != previous
            previous = (a, t, b)
            table.add_row(terminal.marked_name(a, not_safe) if first else "", terminal.label(t) if first else "",
                          f"{b:g}" if first else "", terminal.label(_setting(s)), *cells,
                          style="grey50" if a in not_safe else None)
        return table

    return terminal.fit(build, width, ("beside", "under"))


# ---------------------------------------------------------------------------------------- helpers
def _at(cmp: xr.Dataset, var: str, at: dict, metric: str) -> float:
    return float(cmp[var].sel({**at, "metric": metric}))


def _num(x) -> float | None:
    v = float(x)
    return None if math.isnan(v) else v


def _tier(x) -> str:
    v = float(x)
    return "–" if math.isnan(v) or v < 0 else str(int(v))


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def _csv_or_json(rows: list[dict], fmt: str, meta: dict) -> str:
    if fmt == "json":
        return json.dumps({**meta, "rows": rows}, indent=2) + "\n"
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(rows[0]) if rows else [])
    for r in rows:
        writer.writerow(["" if v is None else (repr(v) if isinstance(v, float) else v) for v in r.values()])
    return buf.getvalue()
