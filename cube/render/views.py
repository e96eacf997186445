"""A view's tables and figure as files: the one code path of the TUI's exports (``e``, ``P``) and of
``saferl render`` (a saved view, `cube.render.viewfile`, rendered with no terminal).

`view_data` derives what a view shows from the sufficient statistics (the same `cube.stats` calls, with
the same bootstrap settings, as the TUI's model); `view_tables` turns it into (file name, text) pairs;
`export_text` adds the selection recorded inside each file; `figure_for_view` draws the view's figure.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from cube import stats
from cube.errors import CubeError
from cube.outputs import figures_folder
from cube.render import text as export
from cube.render import viewrows
from cube.render.data import learning_curve_rows
from cube.render.figures import save_figure
from cube.render.maker import FigureMaker, PlotOptions, safe_name
from cube.render.style import KINDS, require_matplotlib
from cube.render.viewfile import ViewFile
from cube.render.viewrows import Files, table_files
from cube.selection import Selection
from cube.stats.metrics import SETTING, SETTINGS
from cube.store.runstatus import STALL_S

TABLE_VIEWS = ("summary", "conditions", "cdf", "profile", "front", "learning", "histograms", "curves", "runs",
               "runstatus")
"""Views whose tables `view_tables` writes from `view_data` (headless as in the TUI): every view kind."""
FIGURE_KINDS = {"summary": "intervals", "conditions": "intervals", "cdf": "cdf", "curves": "curves",
                "histograms": "hist", "runs": "curves", "aggregate-curve": "aggregate-curve",
                "learning": "aggregate-curve", "profile": "profile", "front": "front"}
"""The figure kind drawn for a view id."""
TABLE_FORMATS = {"csv": "csv", "tex": "latex", "json": "json", "md": "markdown", "txt": "table"}
"""File suffix -> `cube.render.text.render` format of a statistics table (plain tables: csv and tex)."""
FIGURE_FORMATS = ("pdf", "png", "svg")
DEFAULT_KAPPA_RANGE = (-1.0, 2.0)
DEFAULT_BINS = 20


# ---------------------------------------------------------------------------------------- file texts
def selection_comment(meta: dict) -> str:
    """The selection as one line of JSON, safe inside CSV (#), LaTeX (%) and XML (<!-- -->) comments."""
    return json.dumps(meta, separators=(",", ":")).replace("--", "-\\u002d")


def with_selection(name: str, text: str, meta: dict) -> str:
    """An exported file's text with the selection recorded: a comment line first (CSV #, LaTeX %, Markdown
    and text: an HTML comment / # line), a ``saferl_tui_selection`` field (JSON), or an XML comment after
    the opening tag (SVG)."""
    line = selection_comment(meta)
    ext = name.rsplit(".", 1)[-1]
    if ext in ("csv", "txt"):
        return f"# saferl-tui selection: {line}\n{text}"
    if ext == "tex":
        return f"% saferl-tui selection: {line}\n{text}"
    if ext == "md":
        return f"<!-- saferl-tui selection: {line} -->\n{text}"
    if ext == "json":
        obj = json.loads(text)
        return json.dumps({"saferl_tui_selection": meta, **obj} if isinstance(obj, dict) else
                          {"saferl_tui_selection": meta, "data": obj}, indent=1)
    if ext == "svg":
        end = text.find(">", text.find("<svg")) + 1
        return f"{text[:end]}\n<!-- saferl-tui selection: {line} -->{text[end:]}"
    return text


def rendered_files(what: str, kind: str, obj: xr.Dataset, not_safe: Sequence[str],
                   exts: Sequence[str] = ("csv", "tex")) -> Files:
    """``cube.render.text.render`` of a statistics table (a kind of `cube.render.text.KINDS`) in each of
    ``exts`` (`TABLE_FORMATS`), "best" never a not-safe algorithm."""
    return [(f"{what}.{ext}", export.render(obj, kind=kind, fmt=TABLE_FORMATS[ext], not_best=tuple(not_safe)))
            for ext in exts]


def export_meta(view: ViewFile, cube: str | None, view_params: dict) -> dict:
    """What an export records: the cube, view, selection, bootstrap settings and view parameters."""
    it = view.iterates
    return {"view": view.view, "cube": cube, "algos": list(view.algos or ()), "tasks": list(view.tasks or ()),
            "bounds": [float(b) for b in view.bounds or ()], "seeds": [int(s) for s in view.seeds or ()],
            "setting": view.setting, "iterates": list(it) if isinstance(it, tuple) else it,
            "baseline": view.baseline, "not_safe": list(view.not_safe or ()), "reference": view.reference,
            "boot": view.boot, "rng_seed": view.rng_seed, "view_params": view_params}


def view_params(view: ViewFile) -> dict:
    """The view's own parameters as recorded in its exports."""
    if view.view == "cdf":
        lo, hi = view.kappa_range or DEFAULT_KAPPA_RANGE
        return {"all_settings": bool(view.all_settings), "kappa_range": [lo, hi] if math.isfinite(hi) else "full"}
    if view.view == "front":
        return {"cost": view.cost or "Dnorm", "task": view.condition[0] if view.condition else None}
    if view.view == "histograms":
        cond = view.condition
        return {"condition": None if cond is None else {"task": cond[0], "bound": cond[1]},
                "bins": view.bins or DEFAULT_BINS}
    if view.view == "curves":
        task, bound = first_condition(view)
        return {"condition": {"task": task, "bound": bound}, "window": view.window or 1,
                "x": view.x_axis or "iterate", "episodes": SETTING[view.setting].mode,
                "var": view.curve_var or "multiplier"}
    if view.view in ("runs", "runstatus"):
        key, desc = viewrows.parse_sort(view.sort, viewrows.SORT_KEYS[view.view])
        return {"sort": key, "descending": desc, "filter": view.filter or ""}
    return {}


def first_condition(view: ViewFile) -> tuple[str, float]:
    """The (task, bound) a per-condition view shows: its ``condition``, else the selection's first."""
    if view.condition is not None:
        return view.condition
    if not view.tasks or not view.bounds:
        raise CubeError(f"the {view.view} view shows one condition: fit the view to the cube first (against)")
    return view.tasks[0], float(view.bounds[0])


# ---------------------------------------------------------------------------------------- data and tables
def render_time() -> float:
    """The time (s since the epoch) a headless render shows the Status view at: now."""
    return time.time()


def cube_selection(view: ViewFile) -> Selection:
    """The statistics selection of a view (labels None: all)."""
    return Selection(algos=view.algos, tasks=view.tasks, bounds=view.bounds, seeds=view.seeds, iterates=view.iterates)


def condition_histograms(cost: xr.DataArray, n: xr.DataArray, task: str, bound: float, algos: Sequence[str] | None,
                          seeds: Sequence[int] | None, bins: int, not_safe: Sequence[str]) -> dict:
    """Final-episode cost histograms of one condition: {algo: `cube.stats.curves.HistPanel`} (edges shared
    by the algorithms, the not-safe ones on a scale of their own). cost: the cube's ``cost`` (all dims);
    n: the statistics' episode counts."""
    from cube.stats import curves

    cost, n = cost.sel(task=task, bound=bound), n.sel(task=task, bound=bound)
    if algos is not None:
        cost, n = cost.sel(algo=list(algos)), n.sel(algo=list(algos))
    if seeds is not None:
        cost, n = cost.sel(seed=list(seeds)), n.sel(seed=list(seeds))
    final = curves.final_episode_costs(cost, n)
    if final is None:
        return {}
    final = final.expand_dims(task=[task], bound=[float(bound)])
    panels = curves.hist_panels(final, bins, own_scale=tuple(not_safe))
    return {a: p for (_t, _b, a), p in panels.items()}


def histogram_files(condition: tuple[str, float], panels: dict, exts: Sequence[str] = ("csv", "tex")) -> Files:
    """The Histograms view's table: per algorithm and bin, the expl and greedy counts."""
    task, bound = condition
    header = ["algo", "bin_low", "bin_high", "expl", "greedy"]
    rows = [[a, float(p.edges[i]), float(p.edges[i + 1]),
             *(int(p.counts[m][i]) if m in p.counts else 0 for m in ("expl", "greedy"))]
            for a, p in panels.items() for i in range(len(p.edges) - 1)]
    return table_files(f"hist_{task}_d{bound:g}", header, rows,
                       f"Final episodic cost histogram, {task} d={bound:g} (counts)", exts)


def view_data(view: ViewFile, ss: xr.Dataset, raw: xr.Dataset | None = None, *,
              path: str | os.PathLike | None = None, now: float | None = None, stall_s: float = STALL_S) -> Any:
    """What a table view shows, derived from the cube's sufficient statistics ``ss`` (unselected), as the
    TUI's model derives it: the statistics of `cube.stats` with the view's bootstrap size, seed and CI.
    raw: the cube (`open_cube`), for the views that read runs (histograms, curves, runs). path, now,
    stall_s: the Status view's cube path, time (s since the epoch; None: now) and stall limit (s)."""
    if view.view in ("histograms", "curves", "runs") and raw is None:
        raise CubeError(f"the {view.view} view reads runs: give the opened cube")
    if view.view == "curves":
        return viewrows.curve_data_of_cube(ss, raw, cube_selection(view), view.window or 1,
                                           view.curve_var or "multiplier", SETTING[view.setting].mode)
    if view.view == "runs":
        return viewrows.run_rows_of_cube(raw, cube_selection(view))
    if view.view == "runstatus":
        if path is None:
            raise CubeError("the status view reads the runs' progress: give the cube's path")
        at = time.time() if now is None else now
        return [viewrows.status_row(r, at) for r in viewrows.statuses_of_cube(path, cube_selection(view), at, stall_s)]
    if view.view == "histograms":
        cond = view.condition or ((view.tasks or ())[0], (view.bounds or ())[0])
        panels = condition_histograms(raw["cost"], ss["n"], cond[0], cond[1], view.algos, view.seeds,
                                      view.bins or DEFAULT_BINS, view.not_safe or ())
        return cond, panels
    if view.view not in TABLE_VIEWS:
        raise CubeError(f"the {view.view} view has no headless table: views with tables are {', '.join(TABLE_VIEWS)}")
    sel = cube_selection(view)
    small = stats.select(ss.drop_vars("le", errors="ignore"), sel)
    kw = {"boot": view.boot, "rng_seed": view.rng_seed}
    s = view.setting
    if view.view == "summary":
        agg = xr.concat([stats.aggregate_table(small, (x,), ci=view.ci, **kw) for x in SETTINGS], dim="setting")
        agg = agg.transpose("algo", "setting", "metric")
        honest = [stats.honest_tables(small, (x,), ci=view.ci, **kw).aggregate for x in SETTINGS]
        agg = stats.with_honest(agg, xr.concat(honest, dim="setting"))
        try:
            gap: Any = stats.greedy_expl_gap(small, ci=view.ci, **kw)
        except CubeError as exc:
            gap = str(exc)
        return agg, gap
    if view.view == "conditions":
        return stats.with_honest(stats.condition_table(small, (s,)),
                                 stats.honest_tables(small, (s,), ci=view.ci, **kw).conditions)
    if view.view == "cdf":
        return stats.cdf_curves(stats.select(ss, sel), SETTINGS if view.all_settings else (s,), ci=view.ci, **kw)
    if view.view == "profile":
        return stats.performance_profiles(small, (s,), ci=view.ci, **kw)
    if view.view == "front":
        return stats.reward_cost_front(small, (s,), cost=view.cost or "Dnorm", baseline="auto", **kw)
    return stats.aggregate_learning_curve(stats.select(ss, sel), **kw)


def view_tables(view: ViewFile, data: Any, exts: Sequence[str] = ("csv", "tex")) -> Files:
    """The (file name, text) pairs of a table view's ``data`` (from `view_data`, or the TUI's view), in
    each format of ``exts``; names ``{what}.{ext}``."""
    not_safe = view.not_safe or ()
    if view.view == "summary":
        agg, gap = data[0], data[1]  # the TUI's data carry the reference third
        files = rendered_files("summary", "aggregate", agg, not_safe, exts)
        if not isinstance(gap, str):
            files += rendered_files("summary_gap", "gap", gap, not_safe, exts)
        return files
    if view.view == "conditions":
        return rendered_files("conditions", "conditions", data.sel(setting=[view.setting]), not_safe, exts)
    if view.view == "cdf":
        settings = list(SETTINGS) if view.all_settings else [view.setting]
        lo, hi = view.kappa_range or DEFAULT_KAPPA_RANGE
        k = data["kappa"].values
        shown = data.sel(setting=settings).isel(kappa=np.flatnonzero((k >= lo) & (k <= hi)))
        return rendered_files("cdf", "cdf", shown, not_safe, exts)
    if view.view in ("profile", "front"):
        return rendered_files(view.view, view.view, data, not_safe, exts)
    if view.view == "histograms":
        return histogram_files(data[0], data[1], exts) if data is not None else []
    if view.view == "curves":
        return viewrows.curve_files(data, first_condition(view), SETTING[view.setting].mode, view.window or 1,
                                    view.curve_var or "multiplier", exts)
    if view.view in ("runs", "runstatus"):
        key, desc = viewrows.parse_sort(view.sort, viewrows.SORT_KEYS[view.view])
        if view.view == "runs":
            return viewrows.run_files(viewrows.shown_runs(data, key, desc, view.filter or ""), exts)
        return viewrows.status_files(viewrows.shown_statuses(data, key, desc, view.filter or ""), exts)
    if view.view == "learning":
        header, rows = learning_curve_rows(data)
        return table_files("learning", header, rows, "Aggregate learning curves (IQM over conditions, 95% CI)", exts)
    raise CubeError(f"the {view.view} view has no headless table: views with tables are {', '.join(TABLE_VIEWS)}")


def export_text(view: ViewFile, name: str, text: str, cube: str | None) -> str:
    """The text of an exported table file: ``text`` with the view's selection recorded inside."""
    return with_selection(name, text, export_meta(view, cube, view_params(view)))


# ---------------------------------------------------------------------------------------- figures
def figure_kind(view: str) -> str:
    """The figure kind drawn for a view id (or a kind given as is)."""
    return FIGURE_KINDS.get(view, view)


def figure_settings(view: ViewFile) -> tuple[str, ...] | None:
    """The settings a view's figure draws (those on screen; None: every setting with episodes)."""
    if view.view == "cdf":
        return SETTINGS if view.all_settings else (view.setting,)
    if view.view in ("conditions", "profile", "front"):
        return (view.setting,)
    return None


def figure_for_view(view: str, source: str | os.PathLike | xr.Dataset, selection: Selection | None = None,
                    out_path: str | os.PathLike | None = None, *, ss: xr.Dataset | None = None,
                    condition: tuple[str, float] | None = None, options: PlotOptions | None = None) -> Path:
    """Write the figure of a view and return where it went.

    view: a view id (summary, conditions -> intervals; cdf; curves, runs -> curves; histograms -> hist;
    learning -> aggregate-curve; profile; front) or a figure kind. source: the cube's path (or Dataset,
    then `out_path` is needed). ss: the sufficient statistics (unselected), so nothing is read again.
    condition: (task, bound) of a per-condition view. out_path: default
    `<cube>.figures/<view>[_<task>_d<bound>].pdf` next to the cube. Raises CubeError (one line) without
    matplotlib or data.
    """
    require_matplotlib()
    kind = figure_kind(view)
    if kind not in KINDS:
        raise CubeError(f"no figure for view {view!r}: views with figures are {', '.join(sorted(FIGURE_KINDS))}")
    maker = FigureMaker(source, selection, options or PlotOptions(), ss=ss)
    task, bound = condition if condition is not None else (None, None)
    if kind not in ("curves", "hist"):
        task = bound = None
    if out_path is None:
        if isinstance(source, xr.Dataset):
            raise CubeError("give out_path when the cube is not a path")
        folder = figures_folder(source)
        folder.mkdir(parents=True, exist_ok=True)
        suffix = f"_{safe_name(task)}_d{bound:g}" if task is not None and bound is not None else ""
        out_path = folder / f"{kind.replace('-', '_')}{suffix}.pdf"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = maker.figure(kind, task=task, bound=bound)
    return save_figure(fig, out_path)


def view_figure(view: ViewFile, source: str | os.PathLike, out_path: str | os.PathLike,
                ss: xr.Dataset | None = None) -> Path:
    """The figure of a saved view (its selection, settings, condition and bootstrap) at ``out_path``."""
    shown_not_safe = [a for a in view.not_safe or () if view.algos is None or a in view.algos]
    xmax: float | None = 2.0  # the paper's Figure 2; a view's κ window ends where it ends ([-inf, inf]: all)
    if view.kappa_range is not None:
        xmax = view.kappa_range[1] if math.isfinite(view.kappa_range[1]) else None
    options = PlotOptions(baseline=shown_not_safe[0] if shown_not_safe else None, settings=figure_settings(view),
                          boot=view.boot, rng_seed=view.rng_seed, xmax=xmax)
    return figure_for_view(view.view, source, cube_selection(view), out_path, ss=ss, condition=view.condition,
                           options=options)
