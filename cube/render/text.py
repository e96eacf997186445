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

import csv
import io
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.stats.metrics import METRIC, METRICS, SETTING, TIER_LABELS, best_label, directions, tier_label

KINDS = ("aggregate", "conditions", "cdf", "poi", "gap")
FORMATS = ("table", "csv", "json", "markdown", "latex")
LATEX_PREAMBLE = "% needs \\usepackage{booktabs,multirow,xcolor,amsmath}\n"
CDF_TABLE_KAPPA = (-0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 2.0)
SYNTHETIC_MARK = {"markdown": "> SYNTHETIC DEMO DATA, not training results\n\n",
                  "latex": "% SYNTHETIC DEMO DATA, not training results\n",
                  "table": "SYNTHETIC DEMO DATA, not training results\n"}


# ----------------------------------------------------------------------------------------- helpers
def _num(x: float) -> float | None:
    return None if x is None or (isinstance(x, float | np.floating) and math.isnan(x)) else float(x)


def _full(x: float) -> str:
    """Full-precision CSV number (shortest round-trip repr); NaN -> empty."""
    return "" if _num(x) is None else repr(float(x))


def _fmt(x: float, digits: int) -> str:
    return "–" if _num(x) is None else f"{float(x):.{digits}f}"


def _tier_text(t: int) -> str:
    return "–" if t < 0 else str(int(t))


def _meta(ds: xr.Dataset, kind: str) -> dict:
    meta = {"kind": kind, "synthetic": bool(ds.attrs.get("synthetic", False))}
    for k in ("boot", "ci", "rng_seed"):
        if k in ds.attrs:
            meta[k] = ds.attrs[k].item() if hasattr(ds.attrs[k], "item") else ds.attrs[k]
    if "selection" in ds.attrs:
        meta["selection"] = json.loads(ds.attrs["selection"])
    return meta


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """RFC 4180 CSV of a header and rows, cells as given (quotes fields holding commas, quotes or newlines)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(header))
    w.writerows(rows)
    return buf.getvalue()


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


def _latex(colspec: str, header_lines: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = [rf"\begin{{tabular}}{{{colspec}}}", r"\toprule", *header_lines, r"\midrule"]
    out += [" & ".join(r) + r" \\" for r in rows]
    out += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------- aggregate
def _best(ds: xr.Dataset, baseline: str | None, not_best: Sequence[str] = ()) -> dict[tuple[str, str], str | None]:
    """(setting, metric) -> algo with the best value among the algos that are neither the baseline nor
    in `not_best` (e.g. not safe RL), None if no data."""
    exclude = (*not_best, *(() if baseline is None else (baseline,)))
    return {(s, m): best_label({a: ds["value"].sel(algo=a, setting=s, metric=m).item() for a in ds["algo"].values},
                               m, exclude)
            for s in ds["setting"].values for m in ds["metric"].values}


NOT_AVAILABLE = "n/a"


def _unavailable(ds: xr.Dataset, metric: str | None = None, **at: Any) -> bool:
    """Whether a cell is "not available" because its runs hold only per-epoch means (`means_only`, see
    `cube.stats.tables`): the metrics that need every episode (metric None = the tier)."""
    if "means_only" not in ds or (metric is not None and not METRIC[metric].needs_episodes):
        return False
    return bool(ds["means_only"].sel(at).item())


def _na_note(ds: xr.Dataset) -> str:
    """'n/a = not available: omnisafe logs only per-epoch means' (empty without such cells)."""
    return f"{NOT_AVAILABLE} = {ds.attrs['not_available']}" if "means_only" in ds else ""


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
    return _tier_text(t) if t < 0 or math.isnan(p) else f"{t} ({100 * p:.0f}%)"


def _aggregate(ds: xr.Dataset, fmt: str, baseline: str | None, digits: int, not_best: Sequence[str] = ()) -> str:
    algos, settings, metrics = (list(ds[d].values) for d in ("algo", "setting", "metric"))
    if fmt == "csv":
        rows = [[a, s, m, NOT_AVAILABLE, "", ""] if _unavailable(ds, m, algo=a, setting=s) else
                [a, s, m, *(_full(ds[k].sel(algo=a, setting=s, metric=m).item())
                            for k in ("value", "ci_low", "ci_high"))]
                for a in algos for s in settings for m in metrics]
        rows += [[a, s, "tier", NOT_AVAILABLE if _unavailable(ds, algo=a, setting=s) else
                  _tier_csv(int(ds["tier"].sel(algo=a, setting=s).item())), "", ""]
                 for a in algos for s in settings]
        rows.sort(key=lambda r: (algos.index(r[0]), settings.index(r[1])))  # stable: metrics, then tier
        return csv_text(["algo", "setting", "metric", "value", "ci_low", "ci_high"], rows)
    if fmt == "json":
        rows = []
        for a in algos:
            for s in settings:
                t = int(ds["tier"].sel(algo=a, setting=s).item())
                rows.append({
                    "algo": a, "setting": s, "baseline": a == baseline, "tier": t,
                    "tier_label": TIER_LABELS[t] if t >= 0 else None, "tier_stability": _num(_stability(ds, a, s)),
                    "n_conditions": (int(ds["n_conditions"].sel(algo=a, setting=s).item())
                                     if "n_conditions" in ds else None),
                    "metrics": {m: {k: _num(ds[k].sel(algo=a, setting=s, metric=m).item())
                                    for k in ("value", "ci_low", "ci_high")} for m in metrics},
                })
                for m in [*metrics, None]:
                    if _unavailable(ds, m, algo=a, setting=s):
                        target = rows[-1]["metrics"][m] if m is not None else rows[-1]
                        target["not_available" if m is not None else "tier_not_available"] = ds.attrs["not_available"]
        return json.dumps({**_meta(ds, "aggregate"), "rows": rows}, indent=2) + "\n"
    best = _best(ds, baseline, not_best)
    cols = [(m, s) for m in metrics for s in settings]
    if fmt == "table":
        return _aggregate_rich(ds, best, baseline, digits)
    if fmt == "markdown":
        header = ["Algorithm", *[f"IQM({m}) {s}" for m, s in cols], *[f"Tier {s}" for s in settings]]
        rows = []
        for a in algos:
            cells = []
            for m, s in cols:
                c = _agg_cell(ds, a, s, m, digits)
                cells.append(f"**{c}**" if best[(s, m)] == a else c)
            tiers = [_tier_md(ds, a, s) for s in settings]
            name = f"*{a} (baseline)*" if a == baseline else a
            rows.append([name, *cells, *tiers])
        return _markdown(header, rows)
    ns = len(settings)
    head1 = " & ".join([r"\multirow{2}{*}{\textbf{Algorithm}}"]
                       + [rf"\multicolumn{{{ns}}}{{c}}{{$\text{{IQM}}({_mtex(m)})$}}" for m in metrics]
                       + [rf"\multicolumn{{{ns}}}{{c}}{{Tier}}"]) + r" \\"
    head2 = " & " + " & ".join([_slabel(s) for _ in range(len(metrics) + 1) for s in settings]) + r" \\"
    rows = []
    for a in algos:
        cells = []
        for m, s in cols:
            v = ds.sel(algo=a, setting=s, metric=m)
            cells.append(NOT_AVAILABLE if _unavailable(ds, m, algo=a, setting=s) else
                         _tex_ci(v["value"].item(), v["ci_low"].item(), v["ci_high"].item(), digits,
                                 bold=best[(s, m)] == a))
        cells += [NOT_AVAILABLE if _unavailable(ds, algo=a, setting=s) else
                  _tier_text(int(ds["tier"].sel(algo=a, setting=s).item())) for s in settings]
        row = [latex_escape(a), *cells]
        if a == baseline:
            row = [rf"\textcolor{{gray}}{{{c}}}" for c in row]
        rows.append(row)
    return _latex("l" + "c" * (ns * (len(metrics) + 1)), [head1, head2], rows)


def _tex_num(x: float, digits: int) -> str:
    return "-" if _num(x) is None else f"{float(x):.{digits}f}"


def _tex_ci(value: float, lo: float, hi: float, digits: int, bold: bool = False) -> str:
    """'$0.12_{[0.10, 0.14]}$': the value with its CI as a subscript (bold value if best)."""
    num = _tex_num(value, digits)
    num = rf"\mathbf{{{num}}}" if bold else num
    if _num(lo) is None and _num(hi) is None:
        return f"${num}$"
    return f"${num}_{{[{_tex_num(lo, digits)}, {_tex_num(hi, digits)}]}}$"


def _tier_csv(t: int) -> str:
    return "" if t < 0 else str(t)


def _rich(title: str, header: Sequence[str], rows: Sequence[Sequence[str]], styles: Sequence[str] | None = None):
    """A rich Table (imported lazily: only the `table` format needs rich)."""
    from rich.table import Table

    table = Table(title=title, header_style="bold", title_justify="left")
    for h in header:
        table.add_column(h, justify="left" if h in ("Algorithm", "Setting", "Task") else "right", no_wrap=True)
    for i, r in enumerate(rows):
        table.add_row(*r, style=(styles[i] if styles else None) or None)
    return table


def _aggregate_rich(ds: xr.Dataset, best: dict, baseline: str | None, digits: int):
    """Rich table like the paper's Table 2: per algorithm and setting, IQM [CI] of each metric and the tier."""
    rows, styles = [], []
    for a in ds["algo"].values:
        for s in ds["setting"].values:
            cells = []
            for m in ds["metric"].values:
                c = _agg_cell(ds, a, s, m, digits)
                cells.append(f"[bold]{c}[/bold]" if best[(s, m)] == a and a != baseline else c)
            t = int(ds["tier"].sel(algo=a, setting=s).item())
            tier_txt = NOT_AVAILABLE if _unavailable(ds, algo=a, setting=s) else tier_label(t)
            name = f"{a} (baseline)" if a == baseline else str(a)
            rows.append([name, _slabel(s), *cells, tier_txt])
            styles.append("grey50" if a == baseline else "")
    header = ["Algorithm", "Setting", *[f"IQM({_mlabel(m)}) [CI]" for m in ds["metric"].values], "Tier"]
    ci = ds.attrs.get("ci", 0.95)
    title = (f"IQM over task-bound conditions of seed means, {100 * float(ci):g}% stratified-bootstrap CI "
             f"(B={ds.attrs.get('boot', '?')}); bold = best excl. baseline; lower is better except {_higher()}"
             + (f"; {_na_note(ds)}" if _na_note(ds) else ""))
    return _rich(title, header, rows, styles)


# -------------------------------------------------------------------------------------- conditions
def _conditions(ds: xr.Dataset, fmt: str, baseline: str | None, digits: int) -> str:
    keys = [(a, t, b, s) for a in ds["algo"].values for t in ds["task"].values
            for b in ds["bound"].values for s in ds["setting"].values]

    def cell(key, var):
        a, t, b, s = key
        return ds[var].sel(algo=a, task=t, bound=b, setting=s).item()

    def na(key, metric=None) -> bool:
        return _unavailable(ds, metric, algo=key[0], task=key[1], bound=key[2], setting=key[3])

    if fmt in ("csv", "json"):
        names = [f"{m}_{x}" for m in METRICS for x in ("mean", "std")]
        if fmt == "csv":
            rows = []
            for k in keys:
                n = int(cell(k, "n_seeds"))
                rows += [[k[0], k[1], _full(k[2]), k[3], m, NOT_AVAILABLE, "", n] if na(k, m) else
                         [k[0], k[1], _full(k[2]), k[3], m, _full(cell(k, m + "_mean")), _full(cell(k, m + "_std")), n]
                         for m in METRICS]
                rows.append([k[0], k[1], _full(k[2]), k[3], "tier",
                             NOT_AVAILABLE if na(k) else _tier_csv(int(cell(k, "tier"))), "", n])
            return csv_text(["algo", "task", "bound", "setting", "metric", "mean", "std", "n_seeds"], rows)
        rows = [{"algo": k[0], "task": k[1], "bound": float(k[2]), "setting": k[3], "baseline": k[0] == baseline,
                 "n_seeds": int(cell(k, "n_seeds")), "tier": int(cell(k, "tier")),
                 **{n: _num(cell(k, n)) for n in names},
                 **({"not_available": {"metrics": [m for m in METRICS if na(k, m)] + ["tier"],
                                       "why": ds.attrs["not_available"]}} if na(k) else {})} for k in keys]
        return json.dumps({**_meta(ds, "conditions"), "rows": rows}, indent=2) + "\n"
    sep = r" $\pm$ " if fmt == "latex" else " ± "
    rows = []
    for k in keys:
        vals = [NOT_AVAILABLE if na(k, m) else
                f"{_fmt(cell(k, m + '_mean'), digits)}{sep}{_fmt(cell(k, m + '_std'), digits)}"
                for m in METRICS]
        rows.append([k[0], k[1], f"{k[2]:g}", _slabel(k[3]), *vals,
                     str(int(cell(k, "n_seeds"))), NOT_AVAILABLE if na(k) else _tier_text(int(cell(k, "tier")))])
    if fmt == "markdown":
        return _markdown(["Algorithm", "Task", "d", "Setting", *METRICS, "Seeds", "Tier"], rows)
    if fmt == "table":
        styles = ["grey50" if k[0] == baseline else "" for k in keys]
        return _rich("Per condition: seed mean ± sample std (ddof=1); tier from the seed means"
                     + (f"; {_na_note(ds)}" if _na_note(ds) else ""),
                     ["Algorithm", "Task", "d", "Setting", *[_mlabel(m) for m in METRICS], "Seeds", "Tier"],
                     rows, styles)
    header = " & ".join(["Algorithm", "Task", "$d$", "Setting", *[f"${_mtex(m)}$" for m in METRICS],
                         "$K$", "Tier"]) + r" \\"
    rows = [[latex_escape(c) if i < 4 else c for i, c in enumerate(r)] for r in rows]
    return _latex("lllr" + "c" * (len(METRICS) + 2), [header], rows)


# --------------------------------------------------------------------------------------------- cdf
def _cdf(ds: xr.Dataset, fmt: str, digits: int) -> str:
    kappa = ds["kappa"].values
    pairs = [(a, s) for a in ds["algo"].values for s in ds["setting"].values]
    if fmt == "csv":
        arrs = {a_s: [ds[v].sel(algo=a_s[0], setting=a_s[1]).values for v in ("cdf", "ci_low", "ci_high")]
                for a_s in pairs}
        rows = [[a, s, _full(k), *(_full(x[i]) for x in arrs[(a, s)])] for a, s in pairs for i, k in enumerate(kappa)]
        return csv_text(["algo", "setting", "kappa", "cdf", "ci_low", "ci_high"], rows)
    if fmt == "json":
        curves = [{"algo": a, "setting": s, **{v: [_num(x) for x in ds[v].sel(algo=a, setting=s).values]
                                               for v in ("cdf", "ci_low", "ci_high")}} for a, s in pairs]
        return json.dumps({**_meta(ds, "cdf"), "kappa": [float(k) for k in kappa], "curves": curves}) + "\n"
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
    header = " & ".join(["Algorithm", "Setting", *[rf"$\kappa={k:g}$" for k in shown]]) + r" \\"
    rows = [[latex_escape(a), _slabel(s),
             *[_tex_ci(*(ds[v].sel(algo=a, setting=s).values[i] for v in ("cdf", "ci_low", "ci_high")), digits)
               for i in idx]] for a, s in pairs]
    return _latex("ll" + "c" * len(shown), [header], rows)


# ------------------------------------------------------------------------------------ poi and gap
def _poi(ds: xr.Dataset, fmt: str, digits: int) -> str:
    x, y = str(ds.attrs.get("x")), str(ds.attrs.get("y"))
    settings, metrics = list(ds["setting"].values), list(ds["metric"].values)

    def get(s, m, k):
        return ds[k].sel(setting=s, metric=m).item()

    if fmt == "csv":
        rows = [[x, y, s, m, *(_full(get(s, m, k)) for k in ("value", "ci_low", "ci_high"))]
                for s in settings for m in metrics]
        return csv_text(["x", "y", "setting", "metric", "value", "ci_low", "ci_high"], rows)
    if fmt == "json":
        rows = [{"setting": s, "metric": m, **{k: _num(get(s, m, k)) for k in ("value", "ci_low", "ci_high")}}
                for s in settings for m in metrics]
        meta = {**_meta(ds, "poi"), "x": x, "y": y, "convention": ds.attrs.get("convention")}
        return json.dumps({**meta, "rows": rows}, indent=2) + "\n"
    title = f"P({x} improves on {y}): {directions()}; ties count 1/2; 0.5 = no difference"
    if fmt == "latex":
        head = " & ".join(["Setting", *[f"${_mtex(m)}$" for m in metrics]]) + r" \\"
        rows = [[_slabel(s), *[_tex_ci(get(s, m, "value"), get(s, m, "ci_low"), get(s, m, "ci_high"),
                                                    digits) for m in metrics]] for s in settings]
        return f"% {title}\n" + _latex("l" + "c" * len(metrics), [head], rows)
    rows = [[_slabel(s), *[f"{_fmt(get(s, m, 'value'), digits)} [{_fmt(get(s, m, 'ci_low'), digits)}, "
                                         f"{_fmt(get(s, m, 'ci_high'), digits)}]" for m in metrics]] for s in settings]
    header = ["Setting", *[_mlabel(m) for m in metrics]]
    if fmt == "table":
        return _rich(title, header, rows)
    return f"{title}\n\n" + _markdown(header, rows)


def _gap(ds: xr.Dataset, fmt: str, baseline: str | None, digits: int) -> str:
    algos, metrics = list(ds["algo"].values), list(ds["metric"].values)

    def get(a, m, k):
        return ds[k].sel(algo=a, metric=m).item()

    if fmt == "csv":
        rows = [[a, m, *(_full(get(a, m, k)) for k in ("value", "ci_low", "ci_high"))] for a in algos for m in metrics]
        return csv_text(["algo", "metric", "value", "ci_low", "ci_high"], rows)
    if fmt == "json":
        rows = [{"algo": a, "baseline": a == baseline, "metric": m,
                 **{k: _num(get(a, m, k)) for k in ("value", "ci_low", "ci_high")}} for a in algos for m in metrics]
        return json.dumps({**_meta(ds, "gap"), "rows": rows}, indent=2) + "\n"
    title = "Greedy minus exploration at the final iterate, per run; IQM over conditions of seed means [CI]"
    if fmt == "latex":
        head = " & ".join(["Algorithm", *[rf"$\Delta {_mtex(m)}$" for m in metrics]]) + r" \\"
        rows = []
        for a in algos:
            row = [latex_escape(a), *[_tex_ci(get(a, m, "value"), get(a, m, "ci_low"), get(a, m, "ci_high"), digits)
                                     for m in metrics]]
            rows.append([rf"\textcolor{{gray}}{{{c}}}" for c in row] if a == baseline else row)
        return f"% {title}\n" + _latex("l" + "c" * len(metrics), [head], rows)
    rows = [[a, *[f"{_fmt(get(a, m, 'value'), digits)} [{_fmt(get(a, m, 'ci_low'), digits)}, "
                  f"{_fmt(get(a, m, 'ci_high'), digits)}]" for m in metrics]] for a in algos]
    header = ["Algorithm", *[f"Δ{_mlabel(m)}" for m in metrics]]
    if fmt == "table":
        return _rich(title, header, rows, ["grey50" if a == baseline else "" for a in algos])
    return f"{title}\n\n" + _markdown(header, rows)


# ---------------------------------------------------------------------------------------------- api
def rich_table(obj: xr.Dataset, kind: str = "aggregate", baseline: str | None = None, digits: int = 2,
               not_best: Sequence[str] = ()):
    """The `table` format as a rich renderable (for printing with colours to a terminal)."""
    _check(obj, kind, "table", baseline)
    return _dispatch(obj, kind, "table", baseline, digits, not_best)


def _check(obj: xr.Dataset, kind: str, fmt: str, baseline: str | None) -> None:
    if kind not in KINDS:
        raise CubeError(f"unknown table kind {kind!r}: use one of {', '.join(KINDS)}")
    if fmt not in FORMATS:
        raise CubeError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    if baseline is not None and "algo" in obj.dims and baseline not in obj["algo"].values:
        raise CubeError(f"baseline {baseline!r} is not among the algorithms "
                        f"({', '.join(map(str, obj['algo'].values))})")


def _dispatch(obj: xr.Dataset, kind: str, fmt: str, baseline: str | None, digits: int,
              not_best: Sequence[str] = ()):
    if kind == "aggregate":
        return _aggregate(obj, fmt, baseline, digits, not_best)
    if kind == "conditions":
        return _conditions(obj, fmt, baseline, digits)
    if kind == "poi":
        return _poi(obj, fmt, digits)
    if kind == "gap":
        return _gap(obj, fmt, baseline, digits)
    return _cdf(obj, fmt, digits)


def _table_text(table) -> str:
    """Plain text of a rich table, as wide as it needs (no terminal, no colour codes)."""
    from rich.console import Console

    console = Console(record=True, width=400, file=io.StringIO(), color_system=None)
    console.print(table)
    lines = console.export_text(styles=False).splitlines()
    return "\n".join(line.rstrip() for line in lines) + "\n"


def render(obj: xr.Dataset, kind: str = "aggregate", fmt: str = "markdown", baseline: str | None = None,
           digits: int = 2, not_best: Sequence[str] = ()) -> str:
    """Text of a stats table: kind in KINDS, fmt in FORMATS. `baseline`: the algorithm to compare
    against (shown grey, never "best"); `not_best`: algorithms never marked best either (e.g. those
    that are not safe RL, like PPO), listed apart from the baseline."""
    _check(obj, kind, fmt, baseline)
    not_best = [a for a in not_best if "algo" in obj.dims and a in obj["algo"].values]
    text = _dispatch(obj, kind, fmt, baseline, digits, not_best)
    if fmt == "table":
        text = _table_text(text)
    if fmt == "latex":
        text = LATEX_PREAMBLE + text
    if _na_note(obj) and fmt in ("markdown", "latex"):  # CSV and JSON say it in their cells
        text += {"markdown": "\n", "latex": "% "}[fmt] + _na_note(obj) + "\n"
    if obj.attrs.get("synthetic") and fmt in SYNTHETIC_MARK:
        text = SYNTHETIC_MARK[fmt] + text
    return text


# ------------------------------------------------------------- small header + rows tables (TUI views)
def _cell_text(v: Any) -> str:
    """Plain text for a table cell (floats with 10 significant digits, NaN empty)."""
    if isinstance(v, float | np.floating):
        return "" if not np.isfinite(v) else format(float(v), ".10g")
    return str(v)


def table_csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """RFC 4180 CSV of a header and rows (quotes fields holding commas, quotes or newlines)."""
    return csv_text(header, [[_cell_text(v) for v in row] for row in rows])


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters in plain text."""
    return "".join(_LATEX_ESCAPES.get(c, c) for c in str(text))


def table_latex(header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> str:
    """A booktabs ``tabular`` of a header and rows (cells escaped), wrapped in a ``table``."""
    cols = "l" + "r" * (len(header) - 1)
    lines = [r"\begin{table}[h]", r"\centering", r"\small"]
    if caption:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    lines += [rf"\begin{{tabular}}{{{cols}}}", r"\toprule", " & ".join(latex_escape(h) for h in header) + r" \\",
              r"\midrule"]
    lines += [" & ".join(latex_escape(_cell_text(v)) for v in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- learning curves
def _curve_columns(curve: xr.Dataset) -> tuple[str, list[str]]:
    col = "iterate" if "iterate" in curve.dims else "step_bin"
    return col, (["iterate"] if col == "iterate" else ["step_bin", "step_lo", "step_hi"])


def learning_curve_rows(curve: xr.Dataset) -> tuple[list[str], list[list[Any]]]:
    """The aggregate learning curve (`cube.stats.learning_curves.aggregate_learning_curve`) as one long
    table: header algo,metric,iterate (or step_bin,step_lo,step_hi),value,ci_low,ci_high,n_conditions and
    one row per (algo, metric, column), numbers as floats (NaN where undefined)."""
    col, xcols = _curve_columns(curve)
    header = ["algo", "metric", *xcols, "value", "ci_low", "ci_high", "n_conditions"]
    xs = [curve[c].values for c in xcols]
    rows = []
    for a in curve["algo"].values:
        n = curve["n_conditions"].sel(algo=a).values
        for m in curve["metric"].values:
            v = [curve[k].sel(algo=a, metric=m).values for k in ("value", "ci_low", "ci_high")]
            for i in range(curve.sizes[col]):
                x = [int(xs[0][i])] if col == "iterate" else [float(c[i]) for c in xs]
                rows.append([str(a), str(m), *x, *(float(arr[i]) for arr in v), int(n[i])])
    return header, rows


def learning_curve_csv(curve: xr.Dataset) -> str:
    """`learning_curve_rows` as tidy CSV: full precision, NaN as an empty cell."""
    header, rows = learning_curve_rows(curve)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for row in rows:
        w.writerow([_full(v) if isinstance(v, float) else v for v in row])
    return buf.getvalue()


def learning_curve_json(curve: xr.Dataset) -> str:
    """JSON with the metadata (boot, ci, rng_seed, by, selection, synthetic), the x values and one entry
    per (algo, metric) with value, ci_low, ci_high (null for NaN) and n_conditions per algo."""
    col, xcols = _curve_columns(curve)
    meta = {"kind": "aggregate_curve", "synthetic": bool(curve.attrs.get("synthetic", False))}
    for k in ("boot", "ci", "rng_seed", "by", "setting", "statistic"):
        if k in curve.attrs:
            v = curve.attrs[k]
            meta[k] = v.item() if hasattr(v, "item") else v
    if "selection" in curve.attrs:
        meta["selection"] = json.loads(curve.attrs["selection"])
    x = {c: [int(v) if col == "iterate" else float(v) for v in curve[c].values] for c in xcols}
    curves = [{"algo": str(a), "metric": str(m),
               **{k: [_num(v) for v in curve[k].sel(algo=a, metric=m).values] for k in ("value", "ci_low", "ci_high")}}
              for a in curve["algo"].values for m in curve["metric"].values]
    n_cond = {str(a): [int(v) for v in curve["n_conditions"].sel(algo=a).values] for a in curve["algo"].values}
    return json.dumps({**meta, **x, "n_conditions": n_cond, "curves": curves}) + "\n"
