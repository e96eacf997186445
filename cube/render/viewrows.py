"""The tables of the views that list rows or one condition's curves: Curves (one condition, seed mean ± std
per iterate), Runs (the run manifest) and Status (every run's progress). Each has a function that derives
its rows from the cube and one that writes them, called by the TUI's view (``e``) and by ``saferl render``
(`cube.render.views`) alike, so both write the same bytes. The row order of Runs and Status is a sort
(``"status"``, ``"-steps"``: descending) and a filter (`row_matches`), as the view file saves them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.render.text import table_csv, table_latex
from cube.schema import RUN_DIMS, same_bound
from cube.selection import Selection
from cube.stats import curves
from cube.stats.subset import select_runs
from cube.store.runstatus import STATUSES, RunStatus, row_text

Files = list[tuple[str, str]]

RUN_HEADER = ("algo", "task", "bound", "seed", "status", "steps", "iterates", "config")
RUN_STATUS_ORDER = {"pending": 0, "partial": 1, "unknown": 2, "complete": 3}
"""Runs' default order: the runs that need attention first."""
STATUS_HEADER = ("algo", "task", "bound", "seed", "status", "iterates", "steps", "steps/s", "eta", "host", "slurm",
                 "last write", "flags")
STATUS_ORDER = {s: i for i, s in enumerate(STATUSES)}
"""Status' default order: running, stopped, failed, pending, complete."""
TEXT_FIELD = {"steps": "env steps", "eta": "ETA", "slurm": "job"}
"""The Status table's short column names for the fields of `cube.store.runstatus.row_text`."""
SORT_KEYS = {"runs": RUN_HEADER, "runstatus": STATUS_HEADER}
DEFAULT_SORT = "status"


def table_files(what: str, header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str,
                exts: Sequence[str] = ("csv", "tex")) -> Files:
    """A plain table (header and rows) as CSV and LaTeX (`cube.render.text.table_csv` / ``table_latex``)."""
    bad = [e for e in exts if e not in ("csv", "tex")]
    if bad:
        raise CubeError(f"this view's table is written as .csv or .tex, not .{bad[0]}")
    texts = {"csv": lambda: table_csv(header, rows), "tex": lambda: table_latex(header, rows, caption)}
    return [(f"{what}.{ext}", texts[ext]()) for ext in exts]


# ---------------------------------------------------------------------------------------- sort and filter
def parse_sort(text: str | None, keys: Sequence[str], default: str = DEFAULT_SORT) -> tuple[str, bool]:
    """(column, descending) of a saved sort: ``"steps"`` ascending, ``"-steps"`` descending; None: the
    default. CubeError (one line) for a column the table lacks."""
    if not text:
        return default, False
    desc = text.startswith("-")
    key = text.removeprefix("-")
    if key not in keys:
        raise CubeError(f"sort {text!r}: this table sorts by {', '.join(keys)} (a leading - reverses)")
    return key, desc


def sort_text(key: str, desc: bool) -> str:
    """The saved form of a sort (`parse_sort` reads it back)."""
    return f"-{key}" if desc else key


def row_matches(cells: dict[str, str], query: str) -> bool:
    """Whether a row matches a filter: every whitespace-separated term must match; ``col:value`` (or
    ``col=value``) matches the start of that column (case-insensitive), a bare word any cell's text."""
    for term in query.lower().split():
        col, sep, value = term.replace("=", ":").partition(":")
        if sep and col in cells:
            if not cells[col].lower().startswith(value):
                return False
        elif not any(term in v.lower() for v in cells.values()):
            return False
    return True


def sorted_rows(rows: Sequence[dict], key: str, desc: bool, order: dict[str, int],
                tie: Callable[[dict], Any] = lambda r: 0) -> list[dict]:
    """Rows sorted by column ``key`` (status: by ``order``, then ``tie``; NaN / None last), stable."""

    def sort_key(r: dict) -> tuple:
        v = r[key]
        if key == "status":
            return (0, order.get(v, len(order)), tie(r))
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return (1, 0)
        return (0, v)

    return sorted(rows, key=sort_key, reverse=desc)


# ---------------------------------------------------------------------------------------- curves
def curve_data(im: xr.Dataset, run: xr.Dataset, window: int, var: str, mode: str
               ) -> tuple[xr.Dataset, xr.Dataset | None, xr.DataArray | None]:
    """What the Curves view shows of every selected condition: (smoothed seed mean/std of R and C per
    iterate, `curves.training_curves`; the per-iterate variable ``var``'s, None if absent; the seed-mean env
    steps per iterate, None if the cube has none). im: `stats.iterate_metrics` of ``mode`` episodes (train,
    expl, greedy: evaluations are smoothed over the evaluated iterates only); run: the selected runs' ``var``
    and ``env_steps``."""
    if mode != "train":
        keep = np.flatnonzero(np.isfinite(im["R"].values).reshape(-1, im.sizes["iterate"]).any(0)
                              | np.isfinite(im["C"].values).reshape(-1, im.sizes["iterate"]).any(0))
        im = im.isel(iterate=keep)
    mult = curves.multiplier_curves(run, window, var)
    steps = None
    if "env_steps" in run:
        steps = run["env_steps"].transpose(*RUN_DIMS, "iterate").mean("seed", skipna=True)
    return curves.training_curves(im, window), mult, steps


def curve_data_of_cube(ss: xr.Dataset, raw: xr.Dataset, sel: Selection, window: int, var: str, mode: str) -> tuple:
    """`curve_data` read from a cube: ``ss`` its sufficient statistics (unselected), ``raw`` the cube
    (`open_cube`); every iterate of the selection's runs."""
    from dataclasses import replace

    from cube import stats

    full = replace(sel, iterates=None)
    im = stats.iterate_metrics(stats.select(ss.drop_vars("le", errors="ignore"), full), mode=mode)
    have = [n for n in (var, "env_steps") if n in raw.data_vars]
    return curve_data(im, select_runs(raw[have].load(), full), window, var, mode)


def curve_files(data: tuple, condition: tuple[str, float], mode: str, window: int, var: str,
                exts: Sequence[str] = ("csv", "tex")) -> Files:
    """The Curves view's table of one condition: per algorithm and iterate, env steps, R, C and ``var``
    (seed mean and std after a ``window``-iterate moving average)."""
    task, bound = condition
    cur, mult, steps = data[0].sel(task=task, bound=bound), data[1], data[2]
    mult = mult.sel(task=task, bound=bound) if mult is not None else None
    var = str(mult.attrs.get("var", var)) if mult is not None else var
    header = ["algo", "task", "bound", "iterate", "env_steps", "episodes", "window", "R_mean", "R_std",
              "C_mean", "C_std", f"{var}_mean", f"{var}_std"]
    rows = []
    for a in cur["algo"].values:
        for j in cur["iterate"].values:
            p = cur.sel(algo=a, iterate=j)
            mm = mult.sel(algo=a, iterate=j) if mult is not None else None
            st = float(steps.sel(algo=a, task=task, bound=bound, iterate=j)) if steps is not None else math.nan
            rows.append([str(a), task, bound, int(j), st, mode, window,
                         float(p["R_mean"]), float(p["R_std"]), float(p["C_mean"]), float(p["C_std"]),
                         float(mm["mult_mean"]) if mm is not None else math.nan,
                         float(mm["mult_std"]) if mm is not None else math.nan])
    label = f"{task} d={bound:g}"
    return table_files(f"curves_{task}_d{bound:g}", header, rows,
                       f"Curves ({mode} episodes), {label}, moving average {window}", exts)


# ---------------------------------------------------------------------------------------- runs
def run_rows_of_cube(raw: xr.Dataset, sel: Selection) -> list[dict]:
    """The Runs view's rows (`cube.store.summary.run_rows`) of the selected runs, in cube order."""
    from cube.store import summary

    have = [n for n in ("run_status", "run_manifest", "env_steps") if n in raw.data_vars]
    return summary.run_rows(select_runs(raw[have].load(), sel))


def run_cells(r: dict) -> dict[str, str]:
    """A run row as the text the filter matches."""
    return {"algo": r["algo"], "task": r["task"], "bound": f"{r['bound']:g}", "d": f"{r['bound']:g}",
            "seed": str(r["seed"]), "status": r["status"], "config": r["config"]}


def shown_runs(rows: Sequence[dict], key: str, desc: bool, query: str = "") -> list[dict]:
    """The Runs rows shown: filtered, then sorted (status: incomplete first; ties in cube order)."""
    kept = [r for r in rows if not query or row_matches(run_cells(r), query)]
    return sorted_rows(kept, key, desc, RUN_STATUS_ORDER)


def run_files(rows: Sequence[dict], exts: Sequence[str] = ("csv", "tex")) -> Files:
    """The Runs view's table of the rows shown (`shown_runs`)."""
    return table_files("runs", RUN_HEADER, [[r[h] for h in RUN_HEADER] for r in rows], "Run manifest", exts)


# ---------------------------------------------------------------------------------------- status
def status_row(r: RunStatus, now: float) -> dict[str, Any]:
    """One run as the values the table sorts by (times as seconds; None where unknown) and, under "text",
    its cells: the text `saferl status` shows (`row_text`), but the status column the status alone (the
    table colours and sorts by it), or for a run its trainer follows, its phase ('compiling 2m')."""
    text = row_text(r, now)
    cells = {h: text[TEXT_FIELD.get(h, h)] for h in STATUS_HEADER}
    cells.update(status=text["phase"] if r.progress is not None else r.status, d=text["bound"])
    return {"algo": str(r.key.algo), "task": str(r.key.task), "bound": float(r.key.bound), "seed": int(r.key.seed),
            "status": r.status, "phase": r.phase, "iterates": r.iterates, "n_iterates": r.n_iterates,
            "steps": r.env_steps, "steps/s": r.steps_per_s, "eta": r.eta_s, "host": r.host_text(),
            "slurm": r.slurm_job_id or "",
            "last write": None if r.last_write is None else max(now - r.last_write, 0.0), "flags": text["flags"],
            "stalled": r.stalled, "text": cells}


def selected_statuses(runs: Sequence[RunStatus], sel: Selection) -> list[RunStatus]:
    """The runs of a selection (labels None: all)."""
    return [r for r in runs if (sel.algos is None or r.key.algo in sel.algos)
            and (sel.tasks is None or r.key.task in sel.tasks)
            and (sel.seeds is None or int(r.key.seed) in {int(s) for s in sel.seeds})
            and (sel.bounds is None or same_bound(sel.bounds, r.key.bound).any())]


def statuses_of_cube(path: str | os.PathLike, sel: Selection, now: float, stall_s: float) -> list[RunStatus]:
    """Every selected run's status at time ``now`` (s since the epoch), stalled after ``stall_s`` s."""
    from cube.store.runstatus import RunStatusReader

    return selected_statuses(RunStatusReader(path, stall_s).read(now=now), sel)


def shown_statuses(rows: Sequence[dict], key: str, desc: bool, query: str = "") -> list[dict]:
    """The Status rows shown: filtered, then sorted (status: attention first, stalled first; unknown last)."""
    kept = [r for r in rows if not query or row_matches(r["text"], query)]
    return sorted_rows(kept, key, desc, STATUS_ORDER, tie=lambda r: bool(not r["stalled"]))


def status_files(rows: Sequence[dict], exts: Sequence[str] = ("csv", "tex")) -> Files:
    """The Status view's table of the rows shown (`shown_statuses`)."""
    return table_files("status", STATUS_HEADER, [[r["text"][h] for h in STATUS_HEADER] for r in rows],
                       "Status of every run", exts)
