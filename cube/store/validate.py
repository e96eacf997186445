"""Checks of the cube contract: values (one pass over the data) after the structure check of `cube.schema`."""

from __future__ import annotations

from pathlib import Path

import dask
import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.schema import EPISODE_RULES, RUN_DIMS, RUN_STATUS, RunKey, normalise, structure_problems
from cube.store.damage import damaged_chunks, reading_store
from cube.store.locks import read_runs, read_write_seqs, runs_written_since
from cube.store.read import missing_coordinate_arrays, open_cube


def _per_run_checks(ds: xr.Dataset) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One dask pass: per run, the count of episodes of each bad kind ({what: (run dims)}) and the
    episodes per mode ((run dims..., mode))."""
    cost, reward = ds["cost"], ds["reward"]
    inner = ["iterate", "episode", "mode"]
    checks = {what: mask(reward, cost).sum(inner).transpose(*RUN_DIMS).data
              for what, mask in ((r.name, r.mask) for r in EPISODE_RULES)}
    per_mode = cost.notnull().sum(["iterate", "episode"]).transpose(*RUN_DIMS, "mode").data
    counts, per_mode = dask.compute(checks, per_mode)
    return {k: np.asarray(v) for k, v in counts.items()}, np.asarray(per_mode)


def _consistent_checks(ds: xr.Dataset, tries: int = 200, notes: list[str] | None = None
                       ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """`_per_run_checks` as of a moment when no writer was inside a write: a run written while it was
    read (its write sequence changed or is odd, see `cube.store.locks.read_write_seqs`) is read again alone,
    straight from its two chunks, so a reader never sees one variable of an iterate without the other. A
    write its writer died in (an interrupted write) is left out and named in `notes`."""
    source = ds.encoding.get("saferl_source")
    sizes = ds.encoding.get("saferl_grid")
    try:
        before = read_write_seqs(source, sizes) if source else None
    except CubeError:  # a damaged sequence chunk: `damaged_chunks` names it; the values are checked as they are
        before = None
    counts, per_mode = _per_run_checks(ds)
    if before is None:
        return counts, per_mode
    dirty = runs_written_since(before, read_write_seqs(source, sizes))
    if not dirty:
        return counts, per_mode
    for index, got in read_runs(source, ("reward", "cost"), dirty, ds, sizes, tries=tries,
                                notes=[] if notes is None else notes):
        reward, cost = got.arrays["reward"], got.arrays["cost"]
        for what, mask in ((r.name, r.mask) for r in EPISODE_RULES):
            counts[what][index] = int(mask(reward, cost).sum())
        per_mode[index] = (~np.isnan(cost)).sum(axis=(0, 1))
    return counts, per_mode


def value_problems(ds: xr.Dataset, episode_counts: dict[str, int] | None = None,
                   notes: list[str] | None = None) -> list[str]:
    """Contract violations in the values (one dask pass over reward and cost).

    If ``episode_counts`` is given it is filled with the number of episodes per mode, counted in the
    same pass (so a summary need not read the data again). Runs being written during the pass are read
    again once their writer has finished the iterate (see `_consistent_checks`); interrupted writes are
    named in `notes`.
    """
    try:
        with reading_store(ds.encoding.get("saferl_source"), "read the stored data"):
            counts, per_run_mode = _consistent_checks(ds, notes=notes)
    except CubeError as exc:  # a damaged chunk (`DamagedStoreError`), a writer stuck inside a write
        return [str(exc)]
    modes = per_run_mode.reshape(-1, per_run_mode.shape[-1]).sum(0)
    if episode_counts is not None:
        episode_counts.update({str(m): int(n) for m, n in zip(ds["mode"].values, modes, strict=True)})
    problems = []
    for what, per_run in counts.items():
        if int(per_run.sum()):
            problems.append(f"{int(per_run.sum())} episode(s) with {what} (first in run {_run_label(ds, per_run)}); "
                            "fix or drop them")
    try:
        problems.extend(_status_problems(ds, per_run_mode.sum(-1), int(modes.sum())))
    except Exception:  # noqa: BLE001 - a damaged status chunk: `damaged_chunks` names it
        pass
    return problems


def _run_label(ds: xr.Dataset, per_run: np.ndarray) -> str:
    """The label (`RunKey`) of the first run where ``per_run`` (run dims) is non-zero."""
    return str(RunKey.at(ds, np.argwhere(per_run)[0]))


def _status_problems(ds: xr.Dataset, per_run: np.ndarray, total: int) -> list[str]:
    """What the recorded run status contradicts: a run marked complete without a single episode; a cube
    with no episodes at all, unless its runs are still pending or partial (training has not written yet).
    per_run: episodes per run (run dims)."""
    if "run_status" not in ds:
        return [] if total else ["the cube holds no episodes at all (every reward/cost is NaN)"]
    empty_complete = (ds["run_status"].transpose(*RUN_DIMS).values == RUN_STATUS["complete"]) & (per_run == 0)
    if not empty_complete.any():
        return []
    return [f"{int(empty_complete.sum())} run(s) marked complete hold no episodes (first: "
            f"{_run_label(ds, empty_complete)}); rerun them or mark them pending"]


def validate(source: str | Path | xr.Dataset, episode_counts: dict[str, int] | None = None,
             notes: list[str] | None = None) -> list[str]:
    """All contract violations of a cube, one line each (empty list when valid): its structure, every
    episode's values, and, for a Zarr store, every chunk of every array (checksums, chunk files that are
    folders or links, missing coordinate arrays).

    ``episode_counts``, if given, receives the episodes per mode when the values were checked. ``notes``,
    if given, receives lines about what is left out without making the cube invalid (a write its writer
    died in: those slots read as empty until the run's next write clears them).
    """
    try:
        ds = open_cube(source, check=False)
    except CubeError as exc:
        return [str(exc)]
    problems = structure_problems(ds)
    store = ds.encoding.get("saferl_source") if not isinstance(source, xr.Dataset) else None
    if store:
        problems += missing_coordinate_arrays(Path(store), ds)
    if problems:
        return problems
    problems = value_problems(normalise(ds), episode_counts, notes)
    if store and Path(store).is_dir():
        problems += damaged_chunks(store, skip=("reward", "cost"))  # those were decoded by the value pass
    return problems
