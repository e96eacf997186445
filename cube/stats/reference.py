"""A cube's tables next to published reference numbers (pure functions on Datasets).

The reference tables come from `cube.io.reference.load_reference` (the statistics wing does not import io: the
caller passes both Datasets). Labels are matched exactly for algo, task, setting and metric, and bounds with
`cube.schema.same_bound`; only labels for which the reference prints at least one number count as present, so a
setting the paper does not print per condition (final_expl) is not compared.

Conditions: z = (mean - ref_mean) / ref_std, the difference of our seed mean from the reference's in units of the
reference's seed standard deviation (NaN where ref_std is 0, as printed, or missing). Aggregates: our IQM against
the reference's IQM and CI, and whether each lies inside the other's CI.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.schema import same_bound
from cube.stats.metrics import METRICS, PAPER_METRICS

__all__ = ["compare_conditions", "compare_aggregate"]

Z_CONVENTION = ("z = (mean - ref_mean) / ref_std: our seed mean minus the reference's, in units of the reference's "
                "seed std (NaN where ref_std is 0 or missing; the reference's numbers are rounded as printed)")
CI_CONVENTION = ("inside_ref_ci: ours within the reference's CI, ref_inside_ci: the reference's value within ours "
                 "(1 yes, 0 no, NaN where either is missing; bounds inclusive)")


# ------------------------------------------------------------------------------------------- matching
def _name(ref: xr.Dataset) -> str:
    return str(ref.attrs.get("reference") or ref.attrs.get("source") or "reference")


def _fmt(label) -> str:
    return f"{label:g}" if isinstance(label, float | np.floating) else str(label)


def _present(ref: xr.Dataset, held: xr.DataArray, dim: str) -> list:
    """The labels of `dim` at which the reference holds at least one number (`held`: bool, with `dim`)."""
    keep = held.any([d for d in held.dims if d != dim])
    return [label for label, ok in zip(ref[dim].values.tolist(), keep.values, strict=True) if ok]


def _pairs(ours: xr.Dataset, ref: xr.Dataset, held: xr.DataArray, dims: Sequence[str]) -> dict[str, tuple[list, list]]:
    """Per dim: (our labels, the reference's matching labels), in our order; CubeError when a dim has none."""
    have = {d: _present(ref, held, d) for d in dims}
    out = {}
    for d in dims:
        mine, theirs = [], []
        for label in ours[d].values.tolist():
            if d == "bound":
                hits = [b for b in have[d] if same_bound([b], label)[0]]
            else:
                hits = [x for x in have[d] if x == label]
            if hits:
                mine.append(label)
                theirs.append(hits[0])
        if not mine:
            shown = "; ".join(f"{x}s {', '.join(_fmt(v) for v in have[x])}" for x in dims)
            raise CubeError(f"the reference {_name(ref)} has none of these {d}s "
                            f"({', '.join(_fmt(v) for v in ours[d].values.tolist())}): it has {shown}")
        out[d] = (mine, theirs)
    return out


def _pick(ds: xr.Dataset, pairs: dict[str, tuple[list, list]], side: int) -> xr.Dataset:
    """`ds` at the matched labels of one side (0 ours, 1 the reference's), relabelled with ours."""
    picked = ds.sel({d: p[side] for d, p in pairs.items()})
    return picked.assign_coords({d: p[0] for d, p in pairs.items()})


def _require(ds: xr.Dataset, names: Sequence[str], what: str) -> None:
    missing = [v for v in names if v not in ds.data_vars]
    if missing:
        raise CubeError(f"not {what}: it lacks {', '.join(missing)} (use the table of cube.stats or load_reference)")


def _stack(ds: xr.Dataset, pattern: str, metrics: Sequence[str]) -> xr.DataArray:
    """Variables pattern.format(m) of `ds` stacked along a new last dim ``metric``."""
    parts = [ds[pattern.format(m)].astype(np.float64) for m in metrics]
    return xr.concat(parts, dim=xr.DataArray(list(metrics), dims="metric", name="metric"))


def _ref_attrs(ref: xr.Dataset) -> dict:
    return {"reference": _name(ref), "reference_citation": str(ref.attrs.get("citation", "")),
            "reference_means_only": bool(ref.attrs.get("means_only", False))}


# ------------------------------------------------------------------------------------------ conditions
def compare_conditions(ct: xr.Dataset, ref_ct: xr.Dataset) -> xr.Dataset:
    """A condition table next to a reference's, for the algos, tasks, bounds and settings present in both.

    ct, ref_ct: dims (algo, task, bound, setting); vars ``{m}_mean``, ``{m}_std``, ``n_seeds``, ``tier``
    (`cube.stats.condition_table`, `cube.io.reference.load_reference(...).conditions`); the metrics compared are
    those the reference has (the paper's: no CVaR).
    Returns dims (algo, task, bound, setting, metric), our labels (the reference's bound as coord ``ref_bound``):
    ``mean``, ``std`` (ours), ``ref_mean``, ``ref_std``, ``diff`` = mean - ref_mean (the metric's units) and ``z`` =
    diff / ref_std (NaN where ref_std is 0 or missing); dims (algo, task, bound, setting): ``n_seeds``,
    ``ref_n_seeds``, ``tier``, ``ref_tier`` (-1 = none), and ours' ``means_only`` if it has one. Attrs: ours plus
    reference, reference_citation, reference_means_only, z (the convention). CubeError when nothing matches.
    """
    metrics = tuple(m for m in METRICS if f"{m}_mean" in ref_ct) or PAPER_METRICS  # what the reference prints
    need = [f"{m}_{s}" for m in metrics for s in ("mean", "std")] + ["n_seeds", "tier"]
    _require(ct, need, "a condition table")
    _require(ref_ct, need, "a reference condition table")
    dims = ("algo", "task", "bound", "setting")
    held = _stack(ref_ct, "{}_mean", metrics).notnull().any("metric")
    pairs = _pairs(ct, ref_ct, held, dims)
    ours, ref = _pick(ct, pairs, 0), _pick(ref_ct, pairs, 1)
    mean, std = _stack(ours, "{}_mean", metrics), _stack(ours, "{}_std", metrics)
    ref_mean, ref_std = _stack(ref, "{}_mean", metrics), _stack(ref, "{}_std", metrics)
    diff = mean - ref_mean
    z = diff / ref_std.where(ref_std > 0)
    out = xr.Dataset({"mean": mean, "std": std, "ref_mean": ref_mean, "ref_std": ref_std, "diff": diff, "z": z,
                      "n_seeds": ours["n_seeds"], "ref_n_seeds": ref["n_seeds"], "tier": ours["tier"],
                      "ref_tier": ref["tier"]})
    if "means_only" in ours:
        out["means_only"] = ours["means_only"]
    out = out.transpose(*dims, "metric", missing_dims="ignore")
    out = out.assign_coords(ref_bound=("bound", np.asarray(pairs["bound"][1], dtype=np.float64)))
    out.attrs.update(ct.attrs)
    out.attrs.update(_ref_attrs(ref_ct), z=Z_CONVENTION)
    return out


# ------------------------------------------------------------------------------------------- aggregate
def _inside(x: xr.DataArray, lo: xr.DataArray, hi: xr.DataArray) -> xr.DataArray:
    """1.0 where lo <= x <= hi, 0.0 where not, NaN where any of them is missing."""
    known = x.notnull() & lo.notnull() & hi.notnull()
    return ((x >= lo) & (x <= hi)).astype(np.float64).where(known)


def compare_aggregate(agg: xr.Dataset, ref_agg: xr.Dataset) -> xr.Dataset:
    """An aggregate table next to a reference's, for the algos, settings and metrics present in both.

    agg, ref_agg: dims (algo, setting, metric); vars ``value`` (IQM), ``ci_low``, ``ci_high``; ``tier`` (algo,
    setting) (`cube.stats.aggregate_table`, `cube.io.reference.load_reference(...).aggregate`).
    Returns dims (algo, setting, metric): ``value``, ``ci_low``, ``ci_high`` (ours), ``ref_value``, ``ref_ci_low``,
    ``ref_ci_high``, ``diff`` = value - ref_value (the metric's units), ``inside_ref_ci`` (ours within the
    reference's CI) and ``ref_inside_ci`` (the reference's IQM within our CI), each 1.0 / 0.0 / NaN (missing);
    dims (algo, setting): ``tier``, ``ref_tier`` (-1 = none). CubeError when nothing matches.
    """
    need = ["value", "ci_low", "ci_high", "tier"]
    _require(agg, need, "an aggregate table")
    _require(ref_agg, need, "a reference aggregate table")
    dims = ("algo", "setting", "metric")
    pairs = _pairs(agg, ref_agg, ref_agg["value"].notnull(), dims)
    ours, ref = _pick(agg, pairs, 0), _pick(ref_agg, pairs, 1)
    v, lo, hi = (ours[k].astype(np.float64) for k in ("value", "ci_low", "ci_high"))
    rv, rlo, rhi = (ref[k].astype(np.float64) for k in ("value", "ci_low", "ci_high"))
    out = xr.Dataset({"value": v, "ci_low": lo, "ci_high": hi, "ref_value": rv, "ref_ci_low": rlo,
                      "ref_ci_high": rhi, "diff": v - rv, "inside_ref_ci": _inside(v, rlo, rhi),
                      "ref_inside_ci": _inside(rv, lo, hi), "tier": ours["tier"], "ref_tier": ref["tier"]})
    out = out.transpose(*dims, missing_dims="ignore")
    out.attrs.update(agg.attrs)
    out.attrs.update(_ref_attrs(ref_agg), ci_check=CI_CONVENTION)
    return out
