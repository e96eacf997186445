"""A short human summary of a cube: grid, episode counts per mode, run status, synthetic label."""

from __future__ import annotations

from pathlib import Path

import dask
import numpy as np
from rich.table import Table

from cube.schema import RUN_DIMS, RUN_STATUS_NAMES
from cube.store import open_cube


def describe(source: str | Path, episode_counts: dict[str, int] | None = None) -> Table:
    """A rich table describing the cube at ``source``.

    ``episode_counts`` (episodes per mode, as ``validate`` reports them) saves a pass over ``cost``.
    """
    ds = open_cube(source)
    synthetic = bool(ds.attrs.get("synthetic", False))
    title = f"{source}" + ("  [bold yellow]SYNTHETIC DEMO DATA[/]" if synthetic else "")
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("item")
    table.add_column("value")
    for dim in ds["cost"].dims:
        labels = ds[dim].values
        shown = ", ".join(f"{v:g}" if isinstance(v, float | np.floating) else str(v) for v in labels[:8])
        if len(labels) > 8:
            shown += f", ... ({len(labels)})"
        table.add_row(dim, f"{len(labels)}: {shown}" if dim not in ("episode",) else str(len(labels)))
    if episode_counts is None:
        (counts,) = dask.compute(ds["cost"].notnull().sum(dim=[d for d in ds["cost"].dims if d != "mode"]).data)
        episode_counts = {str(m): int(n) for m, n in zip(ds["mode"].values, np.asarray(counts), strict=True)}
    for mode, count in episode_counts.items():
        table.add_row(f"episodes ({mode})", f"{count:,}")
    n_runs = int(np.prod([ds.sizes[d] for d in RUN_DIMS]))
    if "run_status" in ds:
        codes, freq = np.unique(ds["run_status"].values, return_counts=True)
        status = ", ".join(f"{RUN_STATUS_NAMES.get(int(c), c)} {n}" for c, n in zip(codes, freq, strict=True))
        table.add_row("runs", f"{n_runs} ({status})")
    else:
        table.add_row("runs", str(n_runs))
    table.add_row("schema version", str(ds.attrs.get("saferl_schema_version", "none (foreign cube)")))
    return table
