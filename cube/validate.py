"""Checks of the cube contract: values (one pass over the data) after the structure check of `cube.schema`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import dask
import numpy as np
import xarray as xr

from cube.errors import CubeError
from cube.schema import RUN_DIMS, RUN_STATUS, normalise, structure_problems
from cube.store import open_cube

_BAD_VALUES: dict[str, Callable[[xr.DataArray, xr.DataArray], xr.DataArray]] = {
    "negative cost": lambda reward, cost: cost < 0,
    "infinite cost": lambda reward, cost: np.isinf(cost),
    "infinite reward": lambda reward, cost: np.isinf(reward),
    "cost NaN where reward present": lambda reward, cost: cost.isnull() & reward.notnull(),
    "reward NaN where cost present": lambda reward, cost: reward.isnull() & cost.notnull(),
}
"""Masks of episodes a cube must not hold, by the words that name them in a problem line."""


def value_problems(ds: xr.Dataset, episode_counts: dict[str, int] | None = None) -> list[str]:
    """Contract violations in the values (one dask pass over reward and cost).

    If ``episode_counts`` is given it is filled with the number of episodes per mode, counted in the
    same pass (so a summary need not read the data again).
    """
    cost, reward = ds["cost"], ds["reward"]
    checks = {what: mask(reward, cost).sum() for what, mask in _BAD_VALUES.items()}
    per_run_mode = cost.notnull().sum(dim=["iterate", "episode"])  # (run dims..., mode), same pass
    try:
        counts, per_run_mode = dask.compute({k: v.data for k, v in checks.items()}, per_run_mode)
    except Exception as exc:  # codecs raise many types for damaged chunks
        where = unreadable_chunk(ds.encoding.get("saferl_source"))
        return [f"the stored data are corrupt or unreadable ({where or type(exc).__name__ + ': ' + str(exc)[:80]}); "
                "restore that run from a copy or rerun it"]
    modes = per_run_mode.sum(RUN_DIMS).transpose("mode").values
    if episode_counts is not None:
        episode_counts.update({str(m): int(n) for m, n in zip(ds["mode"].values, np.asarray(modes), strict=True)})
    problems = []
    for what, count in counts.items():
        if int(count):
            example = _first_run_with(ds, _BAD_VALUES[what](reward, cost))
            problems.append(f"{int(count)} episode(s) with {what} (first in run {example}); fix or drop them")
    problems.extend(_status_problems(ds, per_run_mode.sum("mode"), int(np.sum(modes))))
    return problems


def unreadable_chunk(source: str | Path | None) -> str | None:
    """Name the first chunk of a Zarr store that cannot be read (checksum mismatch, bad compression):
    'chunk cost/c/0/1/0/2/0/0/0 of run ppo/goal/15.0/2 (Crc32c...)'; None if every chunk reads or the
    source is not a Zarr directory. Reads the store chunk by chunk: for error messages, not hot paths."""
    import zarr

    if source is None or not (Path(source) / "zarr.json").exists():
        return None
    group = zarr.open_group(str(source), mode="r")
    labels = {d: group[d][:] for d in RUN_DIMS}
    for name, arr in group.arrays():
        if arr.ndim < len(RUN_DIMS) or tuple(arr.metadata.dimension_names or ())[:4] != RUN_DIMS:
            continue
        for index in np.ndindex(*arr.shape[: len(RUN_DIMS)]):
            try:
                arr[index]
            except Exception as exc:  # noqa: BLE001 - any decode failure is what we are looking for
                chunk = "/".join(["c", *map(str, index), *["0"] * (arr.ndim - len(RUN_DIMS))])
                run = "/".join(str(labels[d][i]) for d, i in zip(RUN_DIMS, index, strict=True))
                return f"chunk {name}/{chunk} of run {run}: {type(exc).__name__}: {str(exc)[:60]}"
    return None


def _status_problems(ds: xr.Dataset, per_run: xr.DataArray, total: int) -> list[str]:
    """What the recorded run status contradicts: a run marked complete without a single episode; a cube
    with no episodes at all, unless its runs are still pending or partial (training has not written yet).
    per_run: episodes per run (run dims)."""
    if "run_status" not in ds:
        return [] if total else ["the cube holds no episodes at all (every reward/cost is NaN)"]
    status = ds["run_status"].transpose(*RUN_DIMS).values
    per_run = per_run.transpose(*RUN_DIMS).values
    empty_complete = np.argwhere((status == RUN_STATUS["complete"]) & (per_run == 0))
    problems = []
    if len(empty_complete):
        first = "/".join(str(ds[d].values[i]) for d, i in zip(RUN_DIMS, empty_complete[0], strict=True))
        problems.append(f"{len(empty_complete)} run(s) marked complete hold no episodes (first: {first}); "
                        "rerun them or mark them pending")
    elif total == 0 and not (status != RUN_STATUS["complete"]).any():
        problems.append("the cube holds no episodes at all (every reward/cost is NaN)")
    return problems


def _first_run_with(ds: xr.Dataset, mask: xr.DataArray) -> str:
    """Labels "algo/task/bound/seed" of the first run where ``mask`` holds."""
    per_run = mask.any(dim=["iterate", "episode", "mode"]).compute()
    where = np.argwhere(per_run.transpose(*RUN_DIMS).values)
    if not len(where):
        return "?"
    labels = [str(ds[d].values[i]) for d, i in zip(RUN_DIMS, where[0], strict=True)]
    return "/".join(labels)


def validate(source: str | Path | xr.Dataset, episode_counts: dict[str, int] | None = None) -> list[str]:
    """All contract violations of a cube, one line each (empty list when valid).

    ``episode_counts``, if given, receives the episodes per mode when the values were checked.
    """
    try:
        ds = open_cube(source, check=False)
    except CubeError as exc:
        return [str(exc)]
    problems = structure_problems(ds)
    if problems:
        return problems
    return value_problems(normalise(ds), episode_counts)
