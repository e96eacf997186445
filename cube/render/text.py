"""Render the statistics tables (`cube.stats`) as a rich table, CSV, JSON, Markdown or LaTeX text.

Kinds: `aggregate` (stats.aggregate_table), `conditions` (stats.condition_table), `cdf` (stats.cdf_curves),
`poi` (stats.probability_of_improvement), `gap` (stats.greedy_expl_gap).
CSV is long and tidy with full precision (NaN -> empty): aggregate `algo,setting,metric,value,ci_low,
ci_high` (metric in R, C, Dnorm, V, Dplus, tier; the tier row has no CI); conditions `algo,task,bound,
setting,metric,mean,std,n_seeds` (the tier row: mean = tier from the seed means, no std); cdf `algo,
setting,kappa,cdf,ci_low,ci_high`; poi `x,y,setting,metric,value,ci_low,ci_high`; gap `algo,metric,value,
ci_low,ci_high`. JSON carries the same numbers (null for NaN) and the run's metadata. `table` (a rich
table, like the paper's Table 2: one row per algorithm and setting), Markdown and LaTeX are rounded to
`digits` decimals; Markdown tier cells add the share of bootstrap replicates that give the same tier,
e.g. `2 (83%)`. In aggregate tables the best value of each column is bold (highest IQM(R), lowest of the
others) over the algorithms other than `baseline`, which is shown grey (LaTeX, table) or italic
(Markdown), like PPO in the paper's Table 2; LaTeX shows CIs as subscripts and needs booktabs, multirow,
xcolor and amsmath. Tables of synthetic cubes say so (JSON `synthetic`, a first line otherwise).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.render import beyond, data, latex, terminal
from cube.render.choices import TABLE_FORMATS, TABLE_KINDS
from cube.render.claims import FEW_MARK, claim_notes, conditions_claim_note, few_note, few_seeds, tier_cell
from cube.render.style import algo_label, table_cvar_note
from cube.stats.metrics import METRIC, METRICS, SETTING, best_label, directions
from cube.stats.reasons import reason_codes

KINDS = TABLE_KINDS
FORMATS = TABLE_FORMATS
CDF_TABLE_KAPPA = (-0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 2.0)
SYNTHETIC_MARK = {"markdown": "> SYNTHETIC DEMO DATA, not training results\n\n",
                  "latex": "% SYNTHETIC DEMO DATA, not training results\n",
                  "table": "SYNTHETIC DEMO DATA, not training results\n"}


# ----------------------------------------------------------------------------------------- helpers
def _fmt(x: float, digits: int) -> str:
    return "–" if data.num(x) is None else f"{float(x):.{digits}f}"


def _tier_text(t: int) -> str:
    return "–" if t < 0 else str(int(t))


def _mlabel(m: str) -> str:
    """Screen label of a metric from the registry (the name itself for an unknown one)."""
    return METRIC[m].label if m in METRIC else str(m)


def _mtex(m: str) -> str:
    return METRIC[m].tex if m in METRIC else str(m)


def _slabel(s: str) -> str:
    return SETTING[s].label if s in SETTING else str(s)


def _higher() -> str:
    """Labels of the metrics where higher is better ('R̄'), from the registry."""
    return "/".join(METRIC[m].label for m in METRICS if METRIC[m].higher_is_better)


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------- aggregate
def _best(ds: xr.Dataset, marked: Sequence[str]) -> dict[tuple[str, str], str | None]:
    """(setting, metric) -> algo with the best value among the algos that are not marked not safe (None if
    no data)."""
    return {(s, m): best_label({a: ds["value"].sel(algo=a, setting=s, metric=m).item() for a in ds["algo"].values},
                               m, marked)
            for s in ds["setting"].values for m in ds["metric"].values}


NOT_AVAILABLE = "n/a"


def _unavailable(ds: xr.Dataset, metric: str | None = None, **at: Any) -> bool:
    """Whether a cell is "not available" because its runs hold only per-epoch means (`means_only`, see
    `cube.stats.runs`): the metrics that need every episode (metric None = the tier)."""
    if "means_only" not in ds or (metric is not None and not METRIC[metric].needs_episodes):
        return False
    return bool(ds["means_only"].sel(at).item())


def _na_cells(ds: xr.Dataset):
    """`unavailable(algo, setting, metric)` of an aggregate table (metric None = the tier)."""
    return lambda a, s, m: _unavailable(ds, m, algo=a, setting=s)


def _na_note(ds: xr.Dataset, kind: str = "aggregate") -> str:
    """One note per reason a number of the table is missing (`cube.stats.reasons`): "n/a: <why>" for a
    missing value, "–: <why>" for a missing interval or std; "" when nothing is missing."""
    try:
        why = reason_codes(ds, kind)
    except CubeError:
        return ""
    values = {str(c) for v in ("value", "tier") if v in why for c in np.ravel(why[v].values) if c}
    intervals = {str(c) for c in np.ravel(why["interval"].values) if c} - values
    notes = [f"{NOT_AVAILABLE}: {text}" for text in data.reason_sentences(ds, values).values()]
    notes += [f"–: {text}" for text in data.reason_sentences(ds, intervals).values()]
    return "; ".join(notes)


def _notes(ds: xr.Dataset, kind: str) -> str:
    """The notes under a table: why numbers are missing (`_na_note`), what its CVaR column is, and the tiers
    that rest on V = 0 observed and the few-seeds mark (`cube.render.claims`)."""
    honest: list[str] = []
    if kind == "aggregate":
        honest = [*claim_notes(ds), few_note(ds)]
    elif kind == "conditions":
        honest = [conditions_claim_note(ds), few_note(ds)]
    first = "; ".join(p for p in (_na_note(ds, kind), table_cvar_note(ds)) if p)
    return "\n\n".join(p for p in (first, *honest) if p)


def _agg_cell(ds: xr.Dataset, a: str, s: str, m: str, digits: int) -> str:
    if _unavailable(ds, m, algo=a, setting=s):
        return NOT_AVAILABLE
    v = ds.sel(algo=a, setting=s, metric=m)
    return (f"{_fmt(v['value'].item(), digits)} "
            f"[{_fmt(v['ci_low'].item(), digits)}, {_fmt(v['ci_high'].item(), digits)}]")


def _stability(ds: xr.Dataset, a: str, s: str) -> float:
    return ds["tier_stability"].sel(algo=a, setting=s).item() if "tier_stability" in ds else float("nan")


def _tier_md(ds: xr.Dataset, a: str, s: str) -> str:
    """Tier with the share of bootstrap replicates that agree, e.g. '2 (83%)'."""
    if _unavailable(ds, algo=a, setting=s):
        return NOT_AVAILABLE
    t, p = int(ds["tier"].sel(algo=a, setting=s).item()), _stability(ds, a, s)
    text = _tier_text(t) if t < 0 or math.isnan(p) else f"{t} ({100 * p:.0f}%)"
    return tier_cell(ds, text, " →", algo=a, setting=s) + (FEW_MARK if few_seeds(ds, algo=a, setting=s) else "")


def _aggregate(ds: xr.Dataset, fmt: str, opt: Options) -> str:
    algos, settings, metrics = (list(ds[d].values) for d in ("algo", "setting", "metric"))
    marked, digits = opt.marked, opt.digits
    if fmt == "table":
        return terminal.aggregate(ds, marked, digits, opt.width, opt.ci, _na_cells(ds), NOT_AVAILABLE, _na_note(ds))
    if fmt == "latex":
        return latex.aggregate(ds, marked, digits, opt.style, _na_cells(ds))
    best = _best(ds, marked)
    cols = [(m, s) for m in metrics for s in settings]
    header = ["Algorithm", *[f"IQM({m}) {s}" for m, s in cols], *[f"Tier {s}" for s in settings]]
    rows = []
    for a in algos:
        cells = []
        for m, s in cols:
            c = _agg_cell(ds, a, s, m, digits)
            cells.append(f"**{c}**" if best[(s, m)] == a else c)
        tiers = [_tier_md(ds, a, s) for s in settings]
        name = f"*{a} {terminal.NOT_SAFE_MARK}*" if a in marked else a
        rows.append([name, *cells, *tiers])
    note = f"\n{terminal.NOT_SAFE_NOTE}\n" if marked else ""
    return _markdown(header, rows) + note


def _rich(title: str, header: Sequence[str], rows: Sequence[Sequence[str]], styles: Sequence[str] | None = None,
          caption: str = ""):
    """A rich Table (imported lazily: only the `table` format needs rich)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, header_style="bold", title_justify="left", caption=caption or None,
                  caption_justify="left")
    for h in header:
        table.add_column(h, justify="left" if h in ("Algorithm", "Setting", "Task") else "right", no_wrap=True)
    for i, r in enumerate(rows):  # cells are data: a label like `[/x]` is text, never rich markup
        table.add_row(*(Text(c) if isinstance(c, str) else c for c in r), style=(styles[i] if styles else None) or None)
    return table


# -------------------------------------------------------------------------------------- conditions
def _conditions(ds: xr.Dataset, fmt: str, opt: Options) -> str:
    marked, digits = opt.marked, opt.digits
    keys = [(a, t, b, s) for a in ds["algo"].values for t in ds["task"].values
            for b in ds["bound"].values for s in ds["setting"].values]

    def cell(key, var):
        a, t, b, s = key
        return ds[var].sel(algo=a, task=t, bound=b, setting=s).item()

    def na(key, metric=None) -> bool:
        return _unavailable(ds, metric, algo=key[0], task=key[1], bound=key[2], setting=key[3])

    if fmt == "table":
        return terminal.conditions(ds, marked, digits, opt.width, opt.ci,
                                   lambda a, t, b, s, m: na((a, t, b, s), m), NOT_AVAILABLE,
                                   _na_note(ds, "conditions"))
    if fmt == "latex":
        return latex.conditions(ds, marked, digits, lambda a, t, b, s, m: na((a, t, b, s), m))
    rows = []
    for k in keys:
        vals = [NOT_AVAILABLE if na(k, m) else
                f"{_fmt(cell(k, m + '_mean'), digits)} ± {_fmt(cell(k, m + '_std'), digits)}" for m in METRICS]
        name = f"*{k[0]} {terminal.NOT_SAFE_MARK}*" if k[0] in marked else k[0]
        at = {"algo": k[0], "task": k[1], "bound": k[2], "setting": k[3]}
        tier = _tier_text(int(cell(k, "tier")))
        rows.append([name, k[1], f"{k[2]:g}", _slabel(k[3]), *vals,
                     str(int(cell(k, "n_seeds"))) + (FEW_MARK if few_seeds(ds, **at) else ""),
                     NOT_AVAILABLE if na(k) else tier_cell(ds, tier, **at) if tier != "–" else tier])
    note = f"\n{terminal.NOT_SAFE_NOTE}\n" if marked else ""
    return _markdown(["Algorithm", "Task", "d", "Setting", *METRICS, "Seeds", "Tier"], rows) + note


# --------------------------------------------------------------------------------------------- cdf
def _cdf(ds: xr.Dataset, fmt: str, opt: Options) -> str:
    digits = opt.digits
    kappa = ds["kappa"].values
    pairs = [(a, s) for a in ds["algo"].values for s in ds["setting"].values]
    shown = [k for k in CDF_TABLE_KAPPA if np.any(np.isclose(kappa, k))] or list(kappa[:: max(1, kappa.size // 7)])
    idx = [int(np.argmin(np.abs(kappa - k))) for k in shown]
    rows = []
    for a, s in pairs:
        sel = ds.sel(algo=a, setting=s)
        cells = [f"{_fmt(sel['cdf'].values[i], digits)} [{_fmt(sel['ci_low'].values[i], digits)}, "
                 f"{_fmt(sel['ci_high'].values[i], digits)}]" for i in idx]
        rows.append([a, _slabel(s), *cells])
    if fmt == "markdown":
        return _markdown(["Algorithm", "Setting", *[f"CDF(κ={k:g})" for k in shown]], rows)
    if fmt == "table":
        return _rich("Aggregate CDF of (c - d)/d at selected κ, pooled episodes [CI] (csv/json: the full grid)",
                     ["Algorithm", "Setting", *[f"CDF(κ={k:g})" for k in shown]], rows)
    header = ["Algorithm", "Setting", *[rf"$\kappa={k:g}$" for k in shown]]
    rows = [[latex.escape(algo_label(a)), _slabel(s),
             *[latex.stacked(*(ds[v].sel(algo=a, setting=s).values[i] for v in ("cdf", "ci_low", "ci_high")), digits)
               for i in idx]] for a, s in pairs]
    return latex.float_table("ll" + "c" * len(shown), header, rows,
                             r"Aggregate CDF of the normalized episodic cost deviation $(c - d)/d$ at selected "
                             r"$\kappa$, with its stratified-bootstrap CI.", "tab:saferl_cdf",
                             [a in opt.marked for a, _ in pairs])


# ------------------------------------------------------------------------------------ poi and gap
def _poi(ds: xr.Dataset, fmt: str, opt: Options) -> str:
    digits = opt.digits
    x, y = str(ds.attrs.get("x")), str(ds.attrs.get("y"))
    settings, metrics = list(ds["setting"].values), list(ds["metric"].values)

    def get(s, m, k):
        return ds[k].sel(setting=s, metric=m).item()

    title = f"P({x} improves on {y}): {directions()}; ties count 1/2; 0.5 = no difference"
    if fmt == "latex":
        rows = [[_slabel(s), *[latex.stacked(get(s, m, "value"), get(s, m, "ci_low"), get(s, m, "ci_high"), digits)
                               for m in metrics]] for s in settings]
        caption = (f"Probability that {latex.escape(algo_label(x))} improves on {latex.escape(algo_label(y))} "
                   r"(Mann--Whitney over seeds, higher $\bar{R}$ or lower cost metrics; ties count 1/2; 0.5 = no "
                   f"difference), with its stratified-bootstrap CI.{latex.cvar_sentence(ds)}")
        return latex.float_table("l" + "c" * len(metrics), ["Setting", *[f"${_mtex(m)}$" for m in metrics]], rows,
                                 caption, "tab:saferl_poi")
    rows = [[_slabel(s), *[f"{_fmt(get(s, m, 'value'), digits)} [{_fmt(get(s, m, 'ci_low'), digits)}, "
                                         f"{_fmt(get(s, m, 'ci_high'), digits)}]" for m in metrics]] for s in settings]
    header = ["Setting", *[_mlabel(m) for m in metrics]]
    if fmt == "table":
        return _rich(title, header, rows, caption=table_cvar_note(ds))
    return f"{title}\n\n" + _markdown(header, rows)


def _gap(ds: xr.Dataset, fmt: str, opt: Options) -> str:
    marked, digits = opt.marked, opt.digits
    algos, metrics = list(ds["algo"].values), list(ds["metric"].values)

    def get(a, m, k):
        return ds[k].sel(algo=a, metric=m).item()

    title = "Greedy minus exploration at the final iterate, per run; IQM over conditions of seed means [CI]"
    if fmt == "latex":
        rows = [[latex.escape(algo_label(a)),
                 *[latex.stacked(get(a, m, "value"), get(a, m, "ci_low"), get(a, m, "ci_high"), digits)
                   for m in metrics]] for a in algos]
        return latex.float_table("l" + "c" * len(metrics), ["Algorithm", *[rf"$\Delta {_mtex(m)}$" for m in metrics]],
                                 rows, latex.escape(title) + latex.cvar_sentence(ds), "tab:saferl_gap",
                                 [a in marked for a in algos])
    rows = [[f"{a} {terminal.NOT_SAFE_MARK}" if a in marked else a,
             *[f"{_fmt(get(a, m, 'value'), digits)} [{_fmt(get(a, m, 'ci_low'), digits)}, "
               f"{_fmt(get(a, m, 'ci_high'), digits)}]" for m in metrics]] for a in algos]
    header = ["Algorithm", *[f"Δ{_mlabel(m)}" for m in metrics]]
    if fmt == "table":
        return _rich(title, header, rows, ["grey50" if a in marked else "" for a in algos], table_cvar_note(ds))
    return f"{title}\n\n" + _markdown(header, rows)


# ---------------------------------------------------------------------------------------------- api
def rich_table(obj: xr.Dataset, kind: str = "aggregate", baseline: str | None = None, digits: int = 2,
               not_best: Sequence[str] = (), *, width: int | None = None, ci: bool = True):
    """The `table` format as a rich renderable (for printing with colours to a terminal), laid out to fit
    `width` columns (None: as wide as it needs); `ci` False: values without CIs or stds."""
    opt = _options(obj, kind, "table", baseline, digits, not_best, "default", width, ci)
    return _dispatch(obj, kind, "table", opt)


@dataclass(frozen=True)
class Options:
    """How a table is rendered: `marked` the not-safe algorithms (grey or marked, never best, see
    `cube.stats.metrics.not_safe`), `digits` decimals, LaTeX `style`, terminal `width` and `ci`."""

    marked: tuple[str, ...] = ()
    digits: int = 2
    style: str = "default"
    width: int | None = None
    ci: bool = True


def _options(obj: xr.Dataset, kind: str, fmt: str, baseline: str | None, digits: int, not_best: Sequence[str],
             style: str, width: int | None, ci: bool) -> Options:
    if kind not in KINDS:
        raise CubeError(f"unknown table kind {kind!r}: use one of {', '.join(KINDS)}")
    if fmt not in FORMATS:
        raise CubeError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    algos = [str(a) for a in obj["algo"].values] if "algo" in obj.dims else []
    if baseline is not None and algos and baseline not in algos:
        raise CubeError(f"baseline {baseline!r} is not among the algorithms ({', '.join(algos)})")
    marked = tuple(dict.fromkeys(a for a in (*not_best, *((baseline,) if baseline else ())) if a in algos))
    return Options(marked, digits, style, width, ci)


def _dispatch(obj: xr.Dataset, kind: str, fmt: str, opt: Options):
    if kind == "profile":
        return beyond.profile(obj, fmt, opt.marked, opt.digits, opt.width, opt.ci)
    if kind == "front":
        return beyond.front(obj, fmt, opt.marked, opt.digits, opt.width)
    if fmt in data.FORMATS:
        return data.RENDER[kind](obj, fmt, opt.marked)
    render_kind = {"aggregate": _aggregate, "conditions": _conditions, "poi": _poi, "gap": _gap, "cdf": _cdf}
    return render_kind[kind](obj, fmt, opt)


def _table_text(table) -> str:
    """Plain text of a rich table, as wide as it needs (no terminal, no colour codes)."""
    from rich.console import Console

    console = Console(record=True, width=max(400, terminal.width_of(table)), file=io.StringIO(), color_system=None)
    console.print(table)
    lines = console.export_text(styles=False).splitlines()
    return "\n".join(line.rstrip() for line in lines) + "\n"


def render(obj: xr.Dataset, kind: str = "aggregate", fmt: str = "markdown", baseline: str | None = None,
           digits: int = 2, not_best: Sequence[str] = (), *, style: str = "default", width: int | None = None,
           ci: bool = True) -> str:
    """Text of a stats table: kind in KINDS, fmt in FORMATS. `baseline` and `not_best`: the not-safe
    algorithms (`cube.stats.metrics.not_safe`), greyed or marked and never "best" in every format. `style`:
    the LaTeX layout (`cube.render.latex.STYLES`); `width` and `ci`: the `table` format's terminal width and
    whether it shows CIs."""
    opt = _options(obj, kind, fmt, baseline, digits, not_best, style, width, ci)
    text = _dispatch(obj, kind, fmt, opt)
    if fmt == "table":
        text = _table_text(text)
    if fmt == "latex":
        text = latex.preamble(style) + text
    # CSV and JSON say it in their cells (and `cvar_alpha`); LaTeX says what CVaR is in its captions
    note = _notes(obj, kind) if fmt == "markdown" else _na_note(obj, kind) if fmt == "latex" else ""
    if note:
        text += {"markdown": "\n", "latex": "% "}[fmt] + note + "\n"
    if obj.attrs.get("synthetic") and fmt in SYNTHETIC_MARK:
        text = SYNTHETIC_MARK[fmt] + (latex.mark_synthetic(text) if fmt == "latex" else text)
    return text


# ------------------------------------------------------------- small header + rows tables (TUI views)
def _cell_text(v: Any) -> str:
    """Plain text for a table cell (floats with 10 significant digits, NaN empty)."""
    if isinstance(v, float | np.floating):
        return "" if not np.isfinite(v) else format(float(v), ".10g")
    return str(v)


def table_csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """RFC 4180 CSV of a header and rows (quotes fields holding commas, quotes or newlines)."""
    return data.csv_text(header, [[_cell_text(v) for v in row] for row in rows])


def table_latex(header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> str:
    """A booktabs ``tabular`` of a header and rows (cells escaped), wrapped in a ``table``."""
    cols = "l" + "r" * (len(header) - 1)
    lines = [r"\begin{table}[h]", r"\centering", r"\small"]
    if caption:
        lines.append(rf"\caption{{{latex.escape(caption)}}}")
    lines += [rf"\begin{{tabular}}{{{cols}}}", r"\toprule", " & ".join(latex.escape(h) for h in header) + r" \\",
              r"\midrule"]
    lines += [" & ".join(latex.escape(_cell_text(v)) for v in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)
