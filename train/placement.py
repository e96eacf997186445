"""Where the calling code runs: host, pid, SLURM job id and dask worker (no jax, no dask needed)."""

from __future__ import annotations

import os
import platform
from typing import Any


def current_placement() -> dict[str, Any]:
    """Where the calling code runs: host, pid, SLURM job id (if any) and dask worker address (if any).

    A run puts this in its own manifest when it starts, so ``saferl status`` shows it live; the executors
    record it for every attempt.
    """
    out: dict[str, Any] = {"host": platform.node(), "pid": os.getpid()}
    job = os.environ.get("SLURM_JOB_ID")
    if job:
        out["slurm_job_id"] = job
    try:
        from distributed import get_worker

        out["worker"] = get_worker().address
    except (ImportError, ValueError):
        pass
    return out
