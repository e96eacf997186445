"""Pure-data helpers behind the TUI views that are not statistics of the report.

Everything here takes and returns numpy arrays or xarray objects (no textual imports), so the
TUI stays a thin presentation layer and these functions can be tested on their own:

* :func:`moving_average` / :func:`training_curves`: per-iterate seed mean and sample std of the
  reward and cost after a trailing moving average (input: ``stats.iterate_metrics``).
* :func:`multiplier_curves`: seed mean/std of the per-iterate multiplier (lambda, kappa, nu).
* :func:`final_iterate` / :func:`final_costs` / :func:`cost_histograms`: the final evaluation
  episodes of one condition (task, bound) for the ``expl`` and ``greedy`` modes and their
  histograms on shared bin edges.
* :func:`run_rows`: the run manifest (status, steps, config) as plain rows.
* :func:`table_csv` / :func:`table_latex`: write any small header + rows table (used to export
  views that ``cube.export`` has no kind for).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

RUN_DIMS = ("algo", "task", "bound", "seed")
STATUS_NAMES = {0: "pending", 1: "partial", 2: "complete"}


def moving_average(x: np.ndarray, window: int, axis: int = -1) -> np.ndarray:
    """Trailing moving average over ``axis`` ignoring NaN.

    ``out[..., j] = nanmean(x[..., max(0, j - window + 1) : j + 1])``; positions whose window holds
    no finite value are NaN. ``window <= 1`` returns a float copy. Shape is unchanged.
    """
    x = np.asarray(x, dtype=np.float64)
    if window <= 1:
        return x.copy()
    x = np.moveaxis(x, axis, -1)
    finite = np.isfinite(x)
    pad = [(0, 0)] * (x.ndim - 1) + [(1, 0)]
    csum = np.cumsum(np.pad(np.where(finite, x, 0.0), pad), axis=-1)
    ccnt = np.cumsum(np.pad(finite.astype(np.int64), pad), axis=-1)
    n = x.shape[-1]
    hi = np.arange(1, n + 1)
    lo = np.maximum(hi - window, 0)
    total = csum[..., hi] - csum[..., lo]
    count = ccnt[..., hi] - ccnt[..., lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return np.moveaxis(out, -1, axis)


def _seed_mean_std(da: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray]:
    """Mean and sample std (ddof=1) over ``seed`` ignoring NaN; std is NaN for fewer than 2 seeds."""
    arr = da.values
    ax = da.dims.index("seed")
    finite = np.isfinite(arr)
    n = finite.sum(axis=ax)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, np.nansum(arr, axis=ax) / np.maximum(n, 1), np.nan)
        dev = np.where(finite, arr - np.expand_dims(mean, ax), 0.0)
        var = np.where(n > 1, (dev**2).sum(axis=ax) / np.maximum(n - 1, 1), np.nan)
    dims = tuple(d for d in da.dims if d != "seed")
    coords = {d: da.coords[d] for d in dims if d in da.coords}
    return xr.DataArray(mean, dims=dims, coords=coords), xr.DataArray(np.sqrt(var), dims=dims, coords=coords)


def training_curves(im: xr.Dataset, window: int = 1, metrics: Sequence[str] = ("R", "C")) -> xr.Dataset:
    """Seed mean and std per iterate of smoothed per-run metrics.

    ``im`` has dims (algo, task, bound, seed, iterate) (``stats.iterate_metrics``). Each run's
    series is first smoothed with :func:`moving_average` (trailing ``window`` iterates), then
    reduced over seeds. Returns dims (algo, task, bound, iterate) with vars ``{m}_mean``, ``{m}_std``.
    """
    out = {}
    for m in metrics:
        da = im[m].transpose(*RUN_DIMS, "iterate")
        smooth = da.copy(data=moving_average(da.values, window, axis=-1))
        out[f"{m}_mean"], out[f"{m}_std"] = _seed_mean_std(smooth)
    return xr.Dataset(out)


def multiplier_curves(ds: xr.Dataset, window: int = 1, var: str = "multiplier") -> xr.Dataset | None:
    """Seed mean/std per iterate of the multiplier, smoothed like :func:`training_curves`.

    ``ds`` is the (selected) cube; returns dims (algo, task, bound, iterate) with vars
    ``mult_mean``, ``mult_std``, or None when the cube has no ``var``. PPO rows are all NaN.
    """
    if var not in ds:
        return None
    da = ds[var].transpose(*RUN_DIMS, "iterate").load()
    smooth = da.copy(data=moving_average(da.values, window, axis=-1))
    mean, std = _seed_mean_std(smooth)
    return xr.Dataset({"mult_mean": mean, "mult_std": std})


def select_cube(ds: xr.Dataset, selection: Any) -> xr.Dataset:
    """Label-select a cube by a ``Selection``-like object (attributes algos, tasks, bounds, seeds;
    None means all). Iterates are not restricted here. Lazy; no data is read."""
    idx = {}
    for dim, attr in (("algo", "algos"), ("task", "tasks"), ("bound", "bounds"), ("seed", "seeds")):
        labels = getattr(selection, attr, None)
        if labels is not None:
            idx[dim] = list(labels)
    return ds.sel(idx) if idx else ds


def final_iterate(counts: np.ndarray) -> np.ndarray:
    """Index of the last iterate with at least one episode.

    ``counts`` has the iterate axis last (episode counts per iterate); returns an int array of the
    leading shape, -1 where a run has no episode at all.
    """
    has = np.asarray(counts) > 0
    n = has.shape[-1]
    last = n - 1 - np.argmax(has[..., ::-1], axis=-1)
    return np.where(has.any(axis=-1), last, -1)


def final_costs(ds: xr.Dataset, task: str, bound: float, modes: Sequence[str] = ("expl", "greedy")) -> dict:
    """Final-iterate episodic costs of one condition.

    For every algorithm and mode, the costs of the episodes at each seed's last iterate that has
    episodes in that mode, pooled over seeds (1-D float64, NaN dropped). Returns
    ``{algo: {mode: costs}}``. Reads one (task, bound) slice of ``cost`` (dims algo, seed, iterate,
    episode for each mode).
    """
    sub = ds["cost"].sel(task=task, bound=bound, mode=list(modes)).transpose("algo", "seed", "mode", "iterate", "episode")
    arr = np.asarray(sub.values, dtype=np.float64)  # (A, K, M, J, E)
    counts = np.isfinite(arr).sum(axis=-1)  # (A, K, M, J)
    last = final_iterate(counts)  # (A, K, M)
    out: dict = {}
    for a, algo in enumerate(sub["algo"].values.tolist()):
        out[algo] = {}
        for mi, mode in enumerate(modes):
            parts = [arr[a, k, mi, last[a, k, mi]] for k in range(arr.shape[1]) if last[a, k, mi] >= 0]
            vals = np.concatenate(parts) if parts else np.empty(0)
            out[algo][mode] = vals[np.isfinite(vals)]
    return out


def cost_histograms(costs: Mapping[str, Mapping[str, np.ndarray]], bins: int = 20,
                    include: Sequence[float] = ()) -> dict[str, tuple[np.ndarray, dict[str, np.ndarray]]]:
    """Histogram counts per algorithm, on edges shared by that algorithm's modes.

    ``costs`` is :func:`final_costs` output. For each algorithm the ``bins + 1`` edges span
    min(0, costs, include)..max(costs, include) (``include``: values that must be on the axis, e.g.
    the bound d; a unit range around a constant). Returns ``{algo: (edges, {mode: counts})}``; the
    counts of a mode sum to its number of episodes.
    """
    out = {}
    for algo, modes in costs.items():
        pooled = [v for v in modes.values() if v.size] + [np.asarray(include, dtype=np.float64)]
        allv = np.concatenate(pooled) if pooled else np.zeros(1)
        allv = allv if allv.size else np.zeros(1)
        lo, hi = min(0.0, float(allv.min())), float(allv.max())
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        edges = np.linspace(lo, hi, bins + 1)
        out[algo] = (edges, {m: np.histogram(v, bins=edges)[0] for m, v in modes.items()})
    return out


def _config_summary(manifest: str, width: int = 60) -> str:
    """Compact ``k=v`` summary of a manifest's ``config`` (or the whole JSON object), truncated."""
    try:
        obj = json.loads(manifest) if manifest else {}
    except (TypeError, ValueError):
        return str(manifest)[:width]
    cfg = obj.get("config", obj) if isinstance(obj, dict) else obj
    if isinstance(cfg, dict):
        text = " ".join(f"{k}={v}" for k, v in cfg.items() if not isinstance(v, dict | list))
    else:
        text = json.dumps(cfg)
    return text if len(text) <= width else text[: width - 1] + "…"


def run_rows(ds: xr.Dataset) -> list[dict]:
    """One row per run of a (selected) cube: algo, task, bound, seed, status, steps, iterates, config.

    ``status`` comes from ``run_status`` (missing: "unknown"), ``steps`` is the last finite
    ``env_steps`` (missing: NaN), ``iterates`` the number of iterates with training episodes when
    cheap to know (``env_steps`` finite count), ``config`` a one-line summary of ``run_manifest``.
    """
    shape = tuple(ds.sizes[d] for d in RUN_DIMS)
    status = ds["run_status"].transpose(*RUN_DIMS).values if "run_status" in ds else np.full(shape, -1)
    manifest = ds["run_manifest"].transpose(*RUN_DIMS).values if "run_manifest" in ds else np.full(shape, "")
    if "env_steps" in ds:
        steps_arr = ds["env_steps"].transpose(*RUN_DIMS, "iterate").values.astype(np.float64)
        finite = np.isfinite(steps_arr)
        n_it = finite.sum(axis=-1)
        last = final_iterate(finite.astype(np.int64))
        steps = np.where(last >= 0, np.take_along_axis(steps_arr, np.maximum(last, 0)[..., None], -1)[..., 0], np.nan)
    else:
        steps = np.full(shape, np.nan)
        n_it = np.full(shape, -1)
    rows = []
    for idx in np.ndindex(*shape):
        a, t, b, s = (ds[d].values[i] for d, i in zip(RUN_DIMS, idx, strict=True))
        rows.append(
            {
                "algo": str(a),
                "task": str(t),
                "bound": float(b),
                "seed": int(s),
                "status": STATUS_NAMES.get(int(status[idx]), "unknown"),
                "steps": float(steps[idx]),
                "iterates": int(n_it[idx]),
                "config": _config_summary(str(manifest[idx]) if manifest[idx] is not None else ""),
            }
        )
    return rows


def _fmt(v: Any) -> str:
    """Plain text for a table cell (floats with 10 significant digits, NaN empty)."""
    if isinstance(v, float | np.floating):
        return "" if not np.isfinite(v) else format(float(v), ".10g")
    return str(v)


def table_csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """RFC 4180 CSV of a header and rows (quotes fields holding commas, quotes or newlines)."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(header))
    for row in rows:
        writer.writerow([_fmt(v) for v in row])
    return buf.getvalue()


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters in plain text."""
    return "".join(_LATEX_ESCAPES.get(c, c) for c in text)


def table_latex(header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> str:
    """A booktabs ``tabular`` of a header and rows (cells escaped), wrapped in a ``table``."""
    cols = "l" + "r" * (len(header) - 1)
    lines = [r"\begin{table}[h]", r"\centering", r"\small"]
    if caption:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    lines += [rf"\begin{{tabular}}{{{cols}}}", r"\toprule", " & ".join(latex_escape(h) for h in header) + r" \\",
              r"\midrule"]
    lines += [" & ".join(latex_escape(_fmt(v)) for v in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)
