"""A short human summary of a cube: grid, episode counts per mode, run status, synthetic label."""

from __future__ import annotations

import json
from pathlib import Path

import dask
import numpy as np
import xarray as xr
from rich.table import Table
from rich.text import Text

from cube.schema import MEANS_ONLY, RUN_DIMS, RUN_STATUS_NAMES, final_iterate
from cube.store.location import redact
from cube.store.read import open_cube


def describe(source: str | Path, episode_counts: dict[str, int] | None = None) -> Table:
    """A rich table describing the cube at ``source``.

    ``episode_counts`` (episodes per mode, as ``validate`` reports them) saves a pass over ``cost``.
    """
    ds = open_cube(source)
    synthetic = bool(ds.attrs.get("synthetic", False))
    title = Text(redact(source))  # paths and labels are data, never rich markup; a URL without its secrets
    if synthetic:
        title.append("  SYNTHETIC DEMO DATA", style="bold yellow")
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("item")
    table.add_column("value")
    for dim in ds["cost"].dims:
        labels = ds[dim].values
        shown = ", ".join(f"{v:g}" if isinstance(v, float | np.floating) else str(v) for v in labels[:8])
        if len(labels) > 8:
            shown += f", ... ({len(labels)})"
        table.add_row(dim, Text(f"{len(labels)}: {shown}" if dim not in ("episode",) else str(len(labels))))
    if episode_counts is None:
        (counts,) = dask.compute(ds["cost"].notnull().sum(dim=[d for d in ds["cost"].dims if d != "mode"]).data)
        episode_counts = {str(m): int(n) for m, n in zip(ds["mode"].values, np.asarray(counts), strict=True)}
    means = _means_counts(ds)
    for mode, count in episode_counts.items():
        held = means.get(mode, 0)
        if count - held or not held:
            table.add_row(Text(f"episodes ({mode})"), f"{count - held:,}")
        if held:  # an import's means of several episodes are no episodes (docs/statistics.md)
            table.add_row(Text(f"means ({mode})"), f"{held:,}")
    n_runs = int(np.prod([ds.sizes[d] for d in RUN_DIMS]))
    if "run_status" in ds:
        codes, freq = np.unique(ds["run_status"].values, return_counts=True)
        status = ", ".join(f"{RUN_STATUS_NAMES.get(int(c), c)} {n}" for c, n in zip(codes, freq, strict=True))
        table.add_row("runs", Text(f"{n_runs} ({status})"))
    else:
        table.add_row("runs", str(n_runs))
    table.add_row("schema version", Text(str(ds.attrs.get("saferl_schema_version", "none (foreign cube)"))))
    return table


def _means_counts(ds) -> dict[str, int]:
    """Per mode, how many stored values are means of several episodes (runs flagged `means_only`)."""
    if MEANS_ONLY not in ds or not bool(ds[MEANS_ONLY].any()):
        return {}
    flag = ds[MEANS_ONLY].astype(bool)
    (counts,) = dask.compute((ds["cost"].notnull() & flag).sum(dim=[d for d in ds["cost"].dims if d != "mode"]).data)
    return {str(m): int(n) for m, n in zip(ds["mode"].values, np.asarray(counts), strict=True)}


def config_summary(manifest: str, width: int = 60) -> str:
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
                "status": RUN_STATUS_NAMES.get(int(status[idx]), "unknown"),
                "steps": float(steps[idx]),
                "iterates": int(n_it[idx]),
                "config": config_summary(str(manifest[idx]) if manifest[idx] is not None else ""),
            }
        )
    return rows
