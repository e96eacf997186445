"""The statistics tables in the machine formats, CSV and JSON: full precision, long and tidy.

A number that cannot be given is an empty CSV cell or a JSON null, never text in a numeric field, and
its reason is always said (docs/statistics.md, "Numbers not available"): CSV rows end with a `reason`
column (the code of the row's first missing number), JSON objects holding a null carry `"reason"`, and
the document lists the sentence of every code it uses under `"reasons"`. The not-safe baseline
(`cube.stats.metrics.not_safe`) is a `not_safe` column / field.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import xarray as xr

from cube.render.style import shows_cvar
from cube.stats.metrics import METRICS, TIER_LABELS
from cube.stats.reasons import REASONS, reason_codes
from cube.stats.runs import cvar_alpha

FORMATS = ("csv", "json")


def full(x: Any) -> str:
    """Full-precision CSV number (shortest round-trip repr); NaN or None -> empty."""
    v = num(x)
    return "" if v is None else repr(v)


def num(x: Any) -> float | None:
    """A JSON number: float, or None for NaN and None."""
    if x is None:
        return None
    v = float(x)
    return None if math.isnan(v) else v


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """RFC 4180 CSV text of a header and rows."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def meta(ds: xr.Dataset, kind: str) -> dict:
    """What a JSON document says about its table: kind, synthetic, bootstrap settings, selection, and the
    alpha of its CVaR (`cvar_alpha`) when it has a CVaR column."""
    out = {"kind": kind, "synthetic": bool(ds.attrs.get("synthetic", False))}
    for k in ("boot", "ci", "rng_seed"):
        if k in ds.attrs:
            out[k] = ds.attrs[k].item() if hasattr(ds.attrs[k], "item") else ds.attrs[k]
    if "selection" in ds.attrs:
        out["selection"] = json.loads(ds.attrs["selection"])
    if shows_cvar(ds):
        out["cvar_alpha"] = cvar_alpha(ds)
    return out


def reason_sentences(ds: xr.Dataset, codes: Iterable[str]) -> dict[str, str]:
    """{code: sentence} for the codes used; the means-only sentence is the table's own (what its means are)."""
    out = {}
    for code in sorted({c for c in codes if c}):
        out[code] = str(ds.attrs["not_available"]) if code == "means-only" and "not_available" in ds.attrs \
            else REASONS[code]
    return out


def _first(*codes: str) -> str:
    return next((c for c in codes if c), "")


def _code(codes: xr.DataArray, **at: Any) -> str:
    return str(codes.sel(at).item())


# ------------------------------------------------------------------------------------ aggregate
def aggregate(ds: xr.Dataset, fmt: str, marked: Sequence[str]) -> str:
    algos, settings, metrics = ([str(x) for x in ds[d].values] for d in ("algo", "setting", "metric"))
    why = reason_codes(ds, "aggregate")
    used = []
    if fmt == "csv":
        rows = []
        for a in algos:
            for s in settings:
                for m in metrics:
                    at = {"algo": a, "setting": s, "metric": m}
                    code = _first(_code(why["value"], **at), _code(why["interval"], **at))
                    rows.append([a, s, m, *(full(ds[k].sel(at).item()) for k in ("value", "ci_low", "ci_high")),
                                 int(a in marked), code])
                t = int(ds["tier"].sel(algo=a, setting=s).item())
                rows.append([a, s, "tier", "" if t < 0 else str(t), "", "", int(a in marked),
                             _code(why["tier"], algo=a, setting=s)])
        return csv_text(["algo", "setting", "metric", "value", "ci_low", "ci_high", "not_safe", "reason"], rows)
    rows = []
    for a in algos:
        for s in settings:
            t = int(ds["tier"].sel(algo=a, setting=s).item())
            stability = ds["tier_stability"].sel(algo=a, setting=s).item() if "tier_stability" in ds else None
            row = {"algo": a, "setting": s, "baseline": a in marked, "not_safe": a in marked, "tier": t,
                   "tier_label": TIER_LABELS[t] if t >= 0 else None, "tier_stability": num(stability),
                   "n_conditions": (int(ds["n_conditions"].sel(algo=a, setting=s).item())
                                    if "n_conditions" in ds else None), "metrics": {}}
            for m in metrics:
                at = {"algo": a, "setting": s, "metric": m}
                cell = {k: num(ds[k].sel(at).item()) for k in ("value", "ci_low", "ci_high")}
                code = _first(_code(why["value"], **at), _code(why["interval"], **at))
                if code:
                    cell["reason"] = code
                    used.append(code)
                row["metrics"][m] = cell
            tier_code = _code(why["tier"], algo=a, setting=s)
            if tier_code:
                row["tier_reason"] = tier_code
                used.append(tier_code)
            rows.append(row)
    return json.dumps({**meta(ds, "aggregate"), "rows": rows, "reasons": reason_sentences(ds, used)},
                      indent=2) + "\n"


# ----------------------------------------------------------------------------------- conditions
def conditions(ds: xr.Dataset, fmt: str, marked: Sequence[str]) -> str:
    keys = [(str(a), str(t), float(b), str(s)) for a in ds["algo"].values for t in ds["task"].values
            for b in ds["bound"].values for s in ds["setting"].values]
    why = reason_codes(ds, "conditions")
    used = []

    def at(k: tuple) -> dict:
        return {"algo": k[0], "task": k[1], "bound": k[2], "setting": k[3]}

    if fmt == "csv":
        rows = []
        for k in keys:
            n, flag = int(ds["n_seeds"].sel(at(k)).item()), int(k[0] in marked)
            for m in METRICS:
                code = _first(_code(why["value"], **at(k), metric=m), _code(why["interval"], **at(k), metric=m))
                rows.append([k[0], k[1], full(k[2]), k[3], m, full(ds[f"{m}_mean"].sel(at(k)).item()),
                             full(ds[f"{m}_std"].sel(at(k)).item()), n, flag, code])
            t = int(ds["tier"].sel(at(k)).item())
            rows.append([k[0], k[1], full(k[2]), k[3], "tier", "" if t < 0 else str(t), "", n, flag,
                         _code(why["tier"], **at(k))])
        return csv_text(["algo", "task", "bound", "setting", "metric", "mean", "std", "n_seeds", "not_safe",
                         "reason"], rows)
    rows = []
    for k in keys:
        row = {"algo": k[0], "task": k[1], "bound": k[2], "setting": k[3], "baseline": k[0] in marked,
               "not_safe": k[0] in marked, "n_seeds": int(ds["n_seeds"].sel(at(k)).item()),
               "tier": int(ds["tier"].sel(at(k)).item())}
        reasons = {}
        for m in METRICS:
            for x in ("mean", "std"):
                row[f"{m}_{x}"] = num(ds[f"{m}_{x}"].sel(at(k)).item())
            code = _first(_code(why["value"], **at(k), metric=m), _code(why["interval"], **at(k), metric=m))
            if code:
                reasons[m] = code
        tier_code = _code(why["tier"], **at(k))
        if tier_code:
            reasons["tier"] = tier_code
        if reasons:
            row["reason"] = reasons
            used += reasons.values()
        rows.append(row)
    return json.dumps({**meta(ds, "conditions"), "rows": rows, "reasons": reason_sentences(ds, used)},
                      indent=2) + "\n"


# ---------------------------------------------------------------------------------- cdf, poi, gap
def cdf(ds: xr.Dataset, fmt: str, marked: Sequence[str]) -> str:
    kappa = ds["kappa"].values
    pairs = [(str(a), str(s)) for a in ds["algo"].values for s in ds["setting"].values]
    why = reason_codes(ds, "cdf")
    if fmt == "csv":
        rows = []
        for a, s in pairs:
            code = _code(why["value"], algo=a, setting=s)
            arrs = [ds[v].sel(algo=a, setting=s).values for v in ("cdf", "ci_low", "ci_high")]
            rows += [[a, s, full(k), *(full(x[i]) for x in arrs), int(a in marked), code] for i, k in enumerate(kappa)]
        return csv_text(["algo", "setting", "kappa", "cdf", "ci_low", "ci_high", "not_safe", "reason"], rows)
    curves, used = [], []
    for a, s in pairs:
        curve = {"algo": a, "setting": s, "not_safe": a in marked,
                 **{v: [num(x) for x in ds[v].sel(algo=a, setting=s).values] for v in ("cdf", "ci_low", "ci_high")}}
        code = _code(why["value"], algo=a, setting=s)
        if code:
            curve["reason"] = code
            used.append(code)
        curves.append(curve)
    return json.dumps({**meta(ds, "cdf"), "kappa": [float(k) for k in kappa], "curves": curves,
                       "reasons": reason_sentences(ds, used)}) + "\n"


def poi(ds: xr.Dataset, fmt: str, marked: Sequence[str]) -> str:
    x, y = str(ds.attrs.get("x")), str(ds.attrs.get("y"))
    cells = [(str(s), str(m)) for s in ds["setting"].values for m in ds["metric"].values]
    why = reason_codes(ds, "poi")
    codes = {(s, m): _first(_code(why["value"], setting=s, metric=m), _code(why["interval"], setting=s, metric=m))
             for s, m in cells}
    values = {(s, m): [ds[k].sel(setting=s, metric=m).item() for k in ("value", "ci_low", "ci_high")] for s, m in cells}
    if fmt == "csv":
        rows = [[x, y, s, m, *(full(v) for v in values[(s, m)]), codes[(s, m)]] for s, m in cells]
        return csv_text(["x", "y", "setting", "metric", "value", "ci_low", "ci_high", "reason"], rows)
    rows = [{"setting": s, "metric": m, **dict(zip(("value", "ci_low", "ci_high"), map(num, values[(s, m)]),
                                                  strict=True)),
             **({"reason": codes[(s, m)]} if codes[(s, m)] else {})} for s, m in cells]
    doc = {**meta(ds, "poi"), "x": x, "y": y, "convention": ds.attrs.get("convention"), "rows": rows,
           "reasons": reason_sentences(ds, codes.values())}
    return json.dumps(doc, indent=2) + "\n"


def gap(ds: xr.Dataset, fmt: str, marked: Sequence[str]) -> str:
    cells = [(str(a), str(m)) for a in ds["algo"].values for m in ds["metric"].values]
    why = reason_codes(ds, "gap")
    codes = {(a, m): _first(_code(why["value"], algo=a, metric=m), _code(why["interval"], algo=a, metric=m))
             for a, m in cells}
    values = {(a, m): [ds[k].sel(algo=a, metric=m).item() for k in ("value", "ci_low", "ci_high")] for a, m in cells}
    if fmt == "csv":
        rows = [[a, m, *(full(v) for v in values[(a, m)]), int(a in marked), codes[(a, m)]] for a, m in cells]
        return csv_text(["algo", "metric", "value", "ci_low", "ci_high", "not_safe", "reason"], rows)
    rows = [{"algo": a, "baseline": a in marked, "not_safe": a in marked, "metric": m,
             **dict(zip(("value", "ci_low", "ci_high"), map(num, values[(a, m)]), strict=True)),
             **({"reason": codes[(a, m)]} if codes[(a, m)] else {})} for a, m in cells]
    return json.dumps({**meta(ds, "gap"), "rows": rows, "reasons": reason_sentences(ds, codes.values())},
                      indent=2) + "\n"


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
    return csv_text(header, [[full(v) if isinstance(v, float) else v for v in row] for row in rows])


def learning_curve_json(curve: xr.Dataset) -> str:
    """JSON with the metadata (boot, ci, rng_seed, by, selection, synthetic), the x values and one entry
    per (algo, metric) with value, ci_low, ci_high (null for NaN) and n_conditions per algo."""
    col, xcols = _curve_columns(curve)
    meta = {"kind": "aggregate_curve", "synthetic": bool(curve.attrs.get("synthetic", False))}
    if shows_cvar(curve):
        meta["cvar_alpha"] = cvar_alpha(curve)
    for k in ("boot", "ci", "rng_seed", "by", "setting", "statistic"):
        if k in curve.attrs:
            v = curve.attrs[k]
            meta[k] = v.item() if hasattr(v, "item") else v
    if "selection" in curve.attrs:
        meta["selection"] = json.loads(curve.attrs["selection"])
    x = {c: [int(v) if col == "iterate" else float(v) for v in curve[c].values] for c in xcols}
    curves = [{"algo": str(a), "metric": str(m),
               **{k: [num(v) for v in curve[k].sel(algo=a, metric=m).values]
                  for k in ("value", "ci_low", "ci_high")}}
              for a in curve["algo"].values for m in curve["metric"].values]
    n_cond = {str(a): [int(v) for v in curve["n_conditions"].sel(algo=a).values] for a in curve["algo"].values}
    return json.dumps({**meta, **x, "n_conditions": n_cond, "curves": curves}) + "\n"


RENDER = {"aggregate": aggregate, "conditions": conditions, "cdf": cdf, "poi": poi, "gap": gap}
"""The machine-format renderer of each table kind."""
