"""Reading a store: the lazy cube (`open_cube`), run manifests, damaged-chunk diagnosis, netCDF export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import zarr

from cube.errors import CubeError
from cube.outputs import atomic_output
from cube.schema import (
    RUN_DIMS,
    RUN_STATUS_NAMES,
    RunKey,
    normalise,
    structure_problems,
)
from cube.store.fs import PathLike
from cube.store.layout import open_group, read_coords
from cube.store.locks import WRITE_SEQ


def read_manifests(path: PathLike) -> list[dict[str, Any]]:
    """Every run of the grid as a dict: its labels, ``status`` and the stored manifest fields."""
    group = open_group(path, mode="r")
    coords = read_coords(group)
    status = np.asarray(group["run_status"][:]) if "run_status" in group else None
    texts = np.asarray(group["run_manifest"][:]) if "run_manifest" in group else None
    rows = []
    for index in np.ndindex(*(len(coords[d]) for d in RUN_DIMS)):
        row: dict[str, Any] = {d: coords[d][i].item() for d, i in zip(RUN_DIMS, index, strict=True)}
        row["status"] = RUN_STATUS_NAMES.get(int(status[index]), "unknown") if status is not None else "unknown"
        if texts is not None and texts[index]:
            stored = json.loads(str(texts[index]))
            stored.pop("status", None)
            stored.pop("run", None)
            row.update(stored)
        rows.append(row)
    return rows


def unreadable_chunk(source: str | Path | None) -> str | None:
    """Name the first chunk of a Zarr store that cannot be read (checksum mismatch, bad compression):
    'chunk cost/c/0/1/0/2/0/0/0 of run ppo/goal/15.0/2 is damaged (checksum mismatch)'; None if every chunk reads or the
    source is not a Zarr directory. Reads the store chunk by chunk: for error messages, not hot paths."""
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
                run = RunKey.at(labels, index)
                kind = "checksum mismatch" if "checksum" in str(exc).lower() else type(exc).__name__
                return f"chunk {name}/{chunk} of run {run} is damaged ({kind})"
    return None


def damaged_store_error(exc: BaseException, source: str | Path | None, what: str = "read the cube's episodes"
                        ) -> CubeError:
    """The one line for data of a store that could not be read (a checksum mismatch, a damaged or missing
    chunk, a codec error): naming the damaged chunk and its run when `source` is a store where one is
    found, else the error's type and first line. A CubeError is returned as it is."""
    if isinstance(exc, CubeError):
        return exc
    try:
        where = unreadable_chunk(source)
    except Exception:  # noqa: BLE001 - the original error is the one to report then
        where = None
    if where:
        return CubeError(f"cannot {what}, the store is corrupt: {where}: restore that run from a copy or rerun it "
                         "(saferl validate lists every problem)")
    detail = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
    return CubeError(f"cannot {what} ({type(exc).__name__}{': ' + detail if detail else ''}): the store may be "
                     "corrupt; check it with saferl validate or rewrite the damaged runs")


# --------------------------------------------------------------------------------------------------
# reading


def open_cube(
    source: PathLike | xr.Dataset, *, check: bool = True, chunks: dict[str, int] | None = None
) -> xr.Dataset:
    """Open a cube lazily (dask) from a Zarr directory or a netCDF file, checking its structure.

    ``chunks`` sets dask chunk sizes per dimension (default: the store's chunks, one run each); larger
    dask chunks let one task fetch many store chunks in a single (concurrent) zarr read.

    Returns a Dataset whose string coordinates are plain numpy strings. Only the seven dimensions and
    ``reward``/``cost`` are required. Raises ``CubeError`` (one line) for a missing, corrupt or
    malformed store; value checks that need a pass over the data live in ``cube.store.validate``.
    """
    if isinstance(source, xr.Dataset):
        ds = source
        where = "dataset"
    else:
        ds = _open_dataset(Path(source), chunks or {})
        where = str(source)
    if check:
        problems = structure_problems(ds)
        if problems:
            more = (f" (and {len(problems) - 1} more problem(s); run `saferl validate {where}`)"
                    if len(problems) > 1 else "")
            raise CubeError(f"{where} is not a valid saferl cube: {problems[0]}{more}")
        ds = normalise(ds)
    ds = ds.drop_vars(WRITE_SEQ, errors="ignore")  # the writers' seqlock, read by `read_write_seqs` only
    if not isinstance(source, xr.Dataset):
        ds.encoding["saferl_source"] = str(source)  # lets ``ds.saferl`` reuse the store's cached statistics
    return ds


def _open_dataset(path: Path, chunks: dict[str, int]) -> xr.Dataset:
    if not path.exists():
        raise CubeError(f"{path} does not exist; give the path of a results store (.zarr directory or .nc file)")
    try:
        if path.is_dir():
            if (path / "zarr.json").exists():
                return xr.open_zarr(path, consolidated=False, chunks=chunks)
            if (path / ".zgroup").exists():
                return xr.open_zarr(path, consolidated=(path / ".zmetadata").exists(), chunks=chunks)
            raise CubeError(f"{path} is a directory but not a Zarr store (no zarr.json); give a results store path")
        return xr.open_dataset(path, chunks=chunks)
    except CubeError:
        raise
    except Exception as exc:  # backends raise many types for unreadable files
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise CubeError(f"cannot read {path} as a Zarr store or netCDF file ({reason}); is it corrupt?") from None


def _netcdf_attr(value: Any) -> Any:
    """netCDF attributes hold numbers, strings and 1-D arrays only: booleans become 0/1, dicts JSON."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value


def export_netcdf(source: PathLike, out: PathLike) -> Path:
    """Write the cube (all variables and attrs) to a netCDF4 file; returns the path written.

    Written beside `out` and renamed into place; a target that is not a regular file is refused."""
    ds = open_cube(source)
    attrs = {k: _netcdf_attr(v) for k, v in ds.attrs.items()}
    ds = ds.assign_attrs(attrs)
    encoding = {name: {"zlib": True, "complevel": 1} for name in ("reward", "cost")}
    with atomic_output(out) as tmp:
        ds.to_netcdf(tmp, engine="netcdf4", encoding=encoding)
    return Path(out)
