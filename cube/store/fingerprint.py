"""The fingerprint of a cube: what a saved view (`cube.io.viewfile`) remembers of the cube it was saved from.

It changes when the cube's labels or sizes change (runs, seeds, iterates added), when a run's status
changes, or when any run is written again (the writers' sequence numbers); it does not change when the
cube is only read or copied elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import xarray as xr

from cube.store.locks import read_write_seqs

PREFIX = "sha256:"


def cube_fingerprint(ds: xr.Dataset, source: str | os.PathLike | None = None) -> str:
    """``sha256:<16 hex>`` of the coordinates of ``ds`` (run labels, iterate/episode sizes), its run
    statuses and (for a Zarr store at ``source``) every run's write sequence."""
    h = hashlib.sha256()
    coords = {d: [str(v) for v in ds[d].values] for d in ("algo", "task", "bound", "seed", "mode") if d in ds.coords}
    coords["sizes"] = {k: int(v) for k, v in sorted(ds.sizes.items())}
    h.update(json.dumps(coords, sort_keys=True).encode())
    if "run_status" in ds:
        h.update(np.ascontiguousarray(np.asarray(ds["run_status"].values, dtype=np.int8)).tobytes())
    seqs = read_write_seqs(source) if source is not None and os.path.isdir(source) else None
    if seqs is not None:
        h.update(np.ascontiguousarray(np.asarray(seqs, dtype=np.int64)).tobytes())
    return PREFIX + h.hexdigest()[:16]
