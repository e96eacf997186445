"""The seed plan (`cube.stats.planning.plan_frame`) as text: a rich table for the terminal, CSV, JSON
and Markdown. Rendering only; the numbers come from `cube.stats.planning`."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from cube.errors import CubeError
from cube.render.text import SYNTHETIC_MARK
from cube.stats.metrics import METRIC

__all__ = ["PLAN_FORMATS", "plan_text", "plan_rich_tables", "TITLES"]

PLAN_FORMATS = ("table", "csv", "json", "markdown")
TITLES = {"halfwidth": "Seeds per condition for a CI half-width of each metric's IQM (projected from the "
                       "cube's seeds)",
          "poi": "Seeds per condition (of each algorithm) for P(X better than Y) to exclude 0.5"}
HEADERS = {"halfwidth": ("algo", "setting", "metric", "IQM", "seeds now", "± now", "± target", "seeds needed",
                         "± there"),
           "poi": ("X>Y", "setting", "metric", "PoI", "conditions", "power now", "power target", "seeds needed",
                   "power there")}


def _num(x, digits: int) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _seeds(row: pd.Series) -> str:
    if not np.isnan(row["seeds_needed"]):
        return str(int(row["seeds_needed"]))
    if not np.isnan(row["more_than"]):
        return f"> {int(row['more_than'])}"
    return "n/a"


def _rows(df: pd.DataFrame, goal: str, digits: int, conditions: dict[tuple[str, str], int] | None = None
          ) -> list[tuple[str, ...]]:
    out = []
    for _, r in df[df["goal"] == goal].iterrows():
        label = METRIC[r["metric"]].label if r["metric"] in METRIC else r["metric"]
        now = "" if np.isnan(r["seeds_now"]) else str(int(r["seeds_now"]))
        if goal == "poi":
            now = str((conditions or {}).get((r["setting"], r["metric"]), ""))
        value = "n/a" if np.isnan(r["value"]) else _num(r["value"], digits)
        current = "–" if np.isnan(r["current"]) and not np.isnan(r["value"]) else _num(r["current"], digits)
        out.append((r["algo"], r["setting"], label, value, now, current, _num(r["target"], digits), _seeds(r),
                    _num(r["projected"], digits)))
    return out


def _notes(df: pd.DataFrame) -> list[str]:
    notes = []
    if (df["reason"] == "one-seed").any():
        notes.append("–: a condition has only 1 seed: nothing to resample")
    if (df["reason"] == "no-episodes").any():
        notes.append("n/a: no selected run holds this metric here")
    if df["more_than"].notna().any():
        notes.append("> N: the target is not met within --max-seeds (a PoI near 0.5 may never be)")
    notes.append("projection: K' seeds drawn per condition from the cube's own, the report's stratified bootstrap "
                 "at K' (docs/statistics.md, 'How many seeds')")
    return notes


def plan_rich_tables(df: pd.DataFrame, digits: int = 3, conditions: dict[tuple[str, str], int] | None = None,
                     synthetic: bool = False, marked: Sequence[str] = ()) -> list:
    """rich renderables: one table per goal present (half-width, then PoI), notes under the last; the rows
    of the `marked` (not-safe baseline) algorithms dimmed."""
    from rich.table import Table
    from rich.text import Text

    out: list = []
    if synthetic:
        out.append(Text(SYNTHETIC_MARK["table"].strip(), style="bold red"))
    goals = [g for g in ("halfwidth", "poi") if (df["goal"] == g).any()]
    for i, goal in enumerate(goals):
        table = Table(title=TITLES[goal], title_justify="left", header_style="bold",
                      caption="\n".join(_notes(df)) if i == len(goals) - 1 else None, caption_justify="left")
        for j, h in enumerate(HEADERS[goal]):
            table.add_column(h, justify="left" if j < 3 else "right", no_wrap=j < 3)
        for row in _rows(df, goal, digits, conditions):
            table.add_row(*row, style="dim" if row[0] in marked else None)
        out.append(table)
    return out


def plan_text(df: pd.DataFrame, fmt: str, digits: int = 3, meta: dict | None = None, synthetic: bool = False,
              conditions: dict[tuple[str, str], int] | None = None) -> str:
    """The plan as `fmt`: csv (full precision, empty cells for missing numbers, a `reason` column), json
    (rows per goal, `meta`, `synthetic`) or markdown (the terminal's tables as pipes, notes under them)."""
    if fmt not in PLAN_FORMATS or fmt == "table":
        raise CubeError(f"unknown format {fmt!r} for the plan: use csv, json or markdown (or the terminal table)")
    if fmt == "csv":  # machine-readable as the report's CSVs: synthetic is said on stderr and in JSON
        return df.to_csv(index=False, float_format="%.10g")
    if fmt == "json":
        clean = df.astype(object).where(df.notna(), None)
        doc = {"synthetic": synthetic, "meta": meta or {},
               **{g: clean[clean["goal"] == g].drop(columns="goal").to_dict("records") for g in ("halfwidth", "poi")
                  if (df["goal"] == g).any()}}
        return json.dumps(doc, indent=2, default=_json_default) + "\n"
    parts = [SYNTHETIC_MARK["markdown"]] if synthetic else []
    for goal in ("halfwidth", "poi"):
        if not (df["goal"] == goal).any():
            continue
        parts.append(f"**{TITLES[goal]}**\n\n" + _markdown(HEADERS[goal], _rows(df, goal, digits, conditions)))
    parts.append("\n".join(f"- {n}" for n in _notes(df)) + "\n")
    return "\n".join(parts)


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    align = "|".join("---" if i < 3 else "---:" for i in range(len(header)))
    lines = ["| " + " | ".join(header) + " |", f"|{align}|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _json_default(x):
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return None if np.isnan(x) else float(x)
    if isinstance(x, np.bool_):
        return bool(x)
    raise TypeError(type(x).__name__)
