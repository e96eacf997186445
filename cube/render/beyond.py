"""Tables of the statistics beyond the paper's point estimates, in every format of `saferl report`:
run-level performance profiles (`cube.stats.profiles.performance_profiles`, kind ``profile``) and the
reward-cost front across bounds (`cube.stats.front.reward_cost_front`, kind ``front``).

* CSV: the long frames of the statistics modules (`profile_frame`: every threshold of the grid;
  `front_frame`: every (setting, task, algorithm, bound) point), full precision, a `not_safe` column and
  the `reason` of the row's first missing number, as every CSV of the report.
* JSON: the same numbers (null for NaN) with the metadata; the front adds the per-algorithm counts of
  tasks on the front (`front_counts_frame`: R̄ is never averaged across tasks).
* table (rich), Markdown, LaTeX: the profile read at the thresholds every default grid holds exactly
  (`cube.stats.profiles.profile_points`: the tier criteria), fraction [CI]; the front as the counts per
  algorithm and the points per task (● on the front, P(front)).

Rendering only; `cube.render.text.render` dispatches here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from cube.render import data, latex, terminal
from cube.render.style import algo_label, table_cvar_note
from cube.stats.front import front_counts_frame, front_frame
from cube.stats.metrics import METRIC, SETTING
from cube.stats.profiles import profile_frame, profile_points
from cube.stats.reasons import REASONS

__all__ = ["profile", "front", "profile_points_table", "ON_FRONT"]

ON_FRONT = ("●", "○")
"""The front column: on the front (from the seed means) or not."""
TEX_ON_FRONT = r"$\bullet$"


def _fmt(x: float, digits: int) -> str:
    return "–" if data.num(x) is None else f"{float(x):.{digits}f}"


def _label(m: str) -> str:
    return METRIC[m].label if m in METRIC else str(m)


def _slabel(s: str) -> str:
    return SETTING[s].label if s in SETTING else str(s)


def _frame_csv(df: pd.DataFrame, marked: Sequence[str], algo_col: str = "algo") -> str:
    """A frame as the report's CSV: floats in full precision (NaN empty), bools 0/1, `not_safe` before `reason`."""
    df = df.copy()
    df.insert(len(df.columns) - 1, "not_safe", df[algo_col].isin(list(marked)).astype(int))
    rows = []
    for rec in df.itertuples(index=False):
        rows.append([data.full(v) if isinstance(v, float | np.floating) else
                     int(v) if isinstance(v, bool | np.bool_) else v for v in rec])
    return data.csv_text(list(df.columns), rows)


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for rec in df.to_dict("records"):
        out.append({k: (data.num(v) if isinstance(v, float | np.floating) else
                        bool(v) if isinstance(v, np.bool_) else int(v) if isinstance(v, np.integer) else v)
                    for k, v in rec.items()})
    return out


def _reasons(df: pd.DataFrame) -> dict[str, str]:
    return {c: REASONS[c] for c in sorted(set(df["reason"])) if c}


# ------------------------------------------------------------------------------------------ profiles
def profile_points_table(ds: xr.Dataset) -> list[tuple[str, float, int | None]]:
    """(metric, tau, grid index) of the thresholds a human table shows: `profile_points` of each metric; the
    index of the grid point equal to tau, -1 past the grid's end (exact there only where the fraction at the
    end is 1: every run is at least as good), None where tau is not on the grid."""
    out = []
    for m in (str(x) for x in ds["metric"].values):
        tau = ds["tau"].sel(metric=m).values
        ok = np.flatnonzero(np.isfinite(tau))
        for t in profile_points(m):
            hit = ok[np.isclose(tau[ok], t, rtol=0, atol=1e-12)]
            out.append((m, t, int(hit[0]) if hit.size else (-1 if ok.size and t > tau[ok[-1]] else None)))
    return out


def _at(ds: xr.Dataset, a: str, s: str, m: str, idx: int | None) -> tuple[float, float, float]:
    """(fraction, ci_low, ci_high) at a grid index of `profile_points_table`; NaN where not exact."""
    if idx is None:
        return (np.nan,) * 3
    one = ds.sel(algo=a, setting=s, metric=m)
    frac = one["fraction"].values
    if idx < 0:
        idx = int(np.flatnonzero(np.isfinite(ds["tau"].sel(metric=m).values))[-1])
        direction = ds.attrs.get("direction", {}).get(m, "<=")
        if direction != "<=" or not frac[idx] == 1.0:
            return (np.nan,) * 3
    return float(frac[idx]), float(one["ci_low"].values[idx]), float(one["ci_high"].values[idx])


def _point_head(m: str, t: float, ds: xr.Dataset) -> str:
    sign = "≥" if ds.attrs.get("direction", {}).get(m) == ">=" else "≤"
    return f"{_label(m)}={t:g}" if (m == "V" and t == 0) else f"{_label(m)}{sign}{t:g}"


def _point_tex(m: str, t: float, ds: xr.Dataset) -> str:
    sign = r"\ge" if ds.attrs.get("direction", {}).get(m) == ">=" else r"\le"
    tex = METRIC[m].tex if m in METRIC else latex.escape(m)
    return f"${tex} = 0$" if (m == "V" and t == 0) else f"${tex} {sign} {t:g}$"


def _profile_title(ds: xr.Dataset) -> str:
    level = 100 * float(ds.attrs.get("ci", 0.95))
    return (f"Performance profiles: share of runs (seed x condition) at or better than each threshold, "
            f"{level:g}% stratified-bootstrap CI (B={ds.attrs.get('boot', '?')}); csv/json: the whole grid")


def profile(ds: xr.Dataset, fmt: str, marked: Sequence[str], digits: int = 2, width: int | None = None,
            ci: bool = True):
    """The profile table of `ds` in `fmt` (csv, json, table (a rich Table), markdown, latex)."""
    if fmt == "csv":
        return _frame_csv(profile_frame(ds), marked)
    if fmt == "json":
        df = profile_frame(ds)
        doc = {**data.meta(ds, "profile"), "direction": ds.attrs.get("direction", {}),
               "rows": _records(df.assign(not_safe=df["algo"].isin(list(marked)))), "reasons": _reasons(df)}
        return json.dumps(doc, indent=1) + "\n"
    points = profile_points_table(ds)
    pairs = [(str(a), str(s)) for a in ds["algo"].values for s in ds["setting"].values]
    heads = [_point_head(m, t, ds) for m, t, _ in points]

    def cells(a: str, s: str, sep: str) -> list[str]:
        out = []
        for m, _t, idx in points:
            v, lo, hi = _at(ds, a, s, m, idx)
            out.append(_fmt(v, digits) + (f"{sep}[{_fmt(lo, digits)}, {_fmt(hi, digits)}]" if sep else ""))
        return out

    note = "; ".join(x for x in (table_cvar_note(ds), terminal.NOT_SAFE_NOTE if marked else "") if x)
    if fmt == "latex":
        rows = [[latex.escape(algo_label(a)), latex.escape(_slabel(s)),
                 *[latex.stacked(*_at(ds, a, s, m, idx), digits) for m, _t, idx in points]] for a, s in pairs]
        head = ["Algorithm", "Setting", *[_point_tex(m, t, ds) for m, t, _ in points]]
        caption = latex.escape(_profile_title(ds).replace("; csv/json: the whole grid", ".")) + latex.cvar_sentence(ds)
        return latex.float_table("ll" + "c" * len(points), head, rows, caption, "tab:saferl_profile",
                                 [a in marked for a, _ in pairs])
    if fmt == "markdown":
        rows = [[f"*{a} {terminal.NOT_SAFE_MARK}*" if a in marked else a, _slabel(s), *cells(a, s, " ")]
                for a, s in pairs]
        return f"{_profile_title(ds)}\n\n" + _markdown(["Algorithm", "Setting", *heads], rows) + \
            (f"\n{terminal.NOT_SAFE_NOTE}\n" if marked else "")

    def build(layout: str):
        table = terminal.styled_table(_profile_title(ds), note, layout != "beside")
        table.add_column("Algorithm", no_wrap=True)
        table.add_column("Setting", no_wrap=True)
        for h in heads:
            table.add_column(h + (" [CI]" if layout == "beside" else ""), justify="right", no_wrap=True)
        sep = {"beside": " ", "under": "\n"}.get(layout, "")
        for a, s in pairs:
            table.add_row(terminal.marked_name(a, marked), terminal.label(SETTING[s].short if s in SETTING else s),
                          *cells(a, s, sep), style="grey50" if a in marked else None)
        return table

    return terminal.fit(build, width, ("beside", "under", "values") if ci else ("values",))


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------- front
def _front_words(ds: xr.Dataset) -> tuple[str, str]:
    return _label(ds.attrs.get("reward", "R")), _label(ds.attrs.get("cost", "Dnorm"))


def _setting_text(s: str, short: bool) -> str:
    return SETTING[s].short if short and s in SETTING else _slabel(s)


def _counts_rows(ds: xr.Dataset, digits: int, short: bool = False) -> list[list[str]]:
    df = front_counts_frame(ds)
    return [[r.algo, _setting_text(r.setting, short), str(int(r.n_tasks)), str(int(r.tasks_on_front)),
             _fmt(r.expected_tasks_on_front, digits)] for r in df.itertuples(index=False)]


def _point_rows(ds: xr.Dataset, digits: int, short: bool = False) -> list[list[str]]:
    df = front_frame(ds)
    df = df[df["n_seeds"] > 0]
    return [[_setting_text(r.setting, short), r.task, r.algo, f"{r.bound:g}", _fmt(r.reward, digits),
             _fmt(r.cost, digits),
             str(int(r.n_seeds)), ON_FRONT[0] if r.on_front else ON_FRONT[1], _fmt(r.p_front, digits)]
            for r in df.itertuples(index=False)]


COUNT_HEAD = ("Algorithm", "Setting", "Tasks", "On front", "Expected")
POINT_HEAD = ("Setting", "Task", "Algorithm", "d", "{r}", "{c}", "Seeds", "Front", "P(front)")


def _front_titles(ds: xr.Dataset, tex: bool = False) -> tuple[str, str]:
    """The titles of the counts and the points tables (`tex`: LaTeX captions, the labels as math)."""
    r, c = _front_words(ds)
    if tex:
        r, c = (f"${METRIC[m].tex}$" if m in METRIC else latex.escape(m) for m in
                (ds.attrs.get("reward", "R"), ds.attrs.get("cost", "Dnorm")))
    return ((f"Reward-cost front across bounds: per algorithm, the tasks where it has a point, where one of its "
             f"bounds is on the front, and the expected number over B={ds.attrs.get('boot', '?')} bootstrap "
             f"replicates ({r} is in task units: never averaged across tasks)"),
            (f"Points per task: seed means of {r} (higher is better) and {c} (lower is better); "
             f"{TEX_ON_FRONT if tex else ON_FRONT[0]} on the front of the task, P(front) over the bootstrap "
             "replicates"))


def front(ds: xr.Dataset, fmt: str, marked: Sequence[str], digits: int = 2, width: int | None = None):
    """The front of `ds` in `fmt` (csv: the points; json: points and counts; table, markdown, latex: both)."""
    if fmt == "csv":
        return _frame_csv(front_frame(ds), marked)
    if fmt == "json":
        df = front_frame(ds)
        counts = front_counts_frame(ds)
        doc = {**data.meta(ds, "front"), "reward": ds.attrs.get("reward", "R"), "cost": ds.attrs.get("cost", "Dnorm"),
               "points": _records(df.assign(not_safe=df["algo"].isin(list(marked)))),
               "counts": _records(counts.assign(not_safe=counts["algo"].isin(list(marked)))), "reasons": _reasons(df)}
        return json.dumps(doc, indent=1) + "\n"
    r, c = _front_words(ds)
    point_head = [h.format(r=r, c=c) for h in POINT_HEAD]
    short = fmt == "table"
    counts, points = _counts_rows(ds, digits, short), _point_rows(ds, digits, short)
    t_counts, t_points = _front_titles(ds)
    note = "; ".join(x for x in (table_cvar_note(ds), terminal.NOT_SAFE_NOTE if marked else "") if x)
    if fmt == "latex":
        esc = [[latex.escape(algo_label(x[0])), *map(latex.escape, x[1:])] for x in counts]
        pts = [[latex.escape(x[0]), latex.escape(x[1]), latex.escape(algo_label(x[2])), *x[3:7],
                TEX_ON_FRONT if x[7] == ON_FRONT[0] else r"$\circ$", x[8]] for x in points]
        tex_counts, tex_points = _front_titles(ds, tex=True)
        tex_head = [f"${METRIC[m].tex}$" if m in METRIC else latex.escape(m) for m in
                    (ds.attrs.get("reward", "R"), ds.attrs.get("cost", "Dnorm"))]
        tex_head = ["Setting", "Task", "Algorithm", "$d$", *tex_head, "Seeds", "Front", "P(front)"]
        return (latex.float_table("llccc", list(COUNT_HEAD), esc, tex_counts + ".", "tab:saferl_front_counts",
                                  [x[0] in marked for x in counts]) + "\n" +
                latex.float_table("lllrrrrcr", tex_head, pts, tex_points + "." + latex.cvar_sentence(ds),
                                  "tab:saferl_front", [x[2] in marked for x in points]))
    if fmt == "markdown":
        mark = [[f"*{x[0]} {terminal.NOT_SAFE_MARK}*" if x[0] in marked else x[0], *x[1:]] for x in counts]
        return (f"{t_counts}\n\n" + _markdown(COUNT_HEAD, mark) + f"\n{t_points}\n\n" + _markdown(point_head, points)
                + (f"\n{terminal.NOT_SAFE_NOTE}\n" if marked else ""))
    from rich.console import Group

    first = terminal.styled_table(t_counts, "", False)
    for i, h in enumerate(COUNT_HEAD):
        first.add_column(h, justify="left" if i < 2 else "right", no_wrap=True)
    for x in counts:
        first.add_row(terminal.marked_name(x[0], marked), *x[1:], style="grey50" if x[0] in marked else None)
    second = terminal.styled_table(t_points, note, False)
    for i, h in enumerate(point_head):
        second.add_column(h, justify="left" if i < 3 else "right", no_wrap=True)
    for x in points:
        second.add_row(*map(terminal.label, x[:2]), terminal.marked_name(x[2], marked), *x[3:],
                       style="grey50" if x[2] in marked else ("bold" if x[7] == ON_FRONT[0] else None))
    return Group(first, second)
