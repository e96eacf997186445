"""Reading a store: the lazy cube (`open_cube`), its consistent load (`load_consistent`, `ds.saferl.load()`),
run manifests, netCDF export. Every read of chunks here is inside `cube.store.damage.reading_store`: damaged
bytes leave as the one `DamagedStoreError`.

What each read guarantees while writers write: `open_cube` sees one published grid (`cube.store.grid`),
never a half-grown one, but a plain lazy read of its variables guarantees nothing across them (the rewards
of one write with the costs of another). `load_consistent` gives every run as one writer state, and the
statistics pass and validate settle runs written meanwhile the same way (`cube.store.locks`).
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from cube.errors import CubeError, DamagedStoreError
from cube.outputs import atomic_output
from cube.schema import (
    DIMS,
    RUN_DIMS,
    RUN_STATUS_NAMES,
    normalise,
    same_bound,
    schema_version_problems,
    structure_problems,
)
from cube.store.chunkfiles import read_run_array
from cube.store.damage import damaged_store_error, odd_chunk_files, reading_store
from cube.store.deferred_dask import defer_dask_imports
from cube.store.fs import PathLike
from cube.store.grid import GRID_ATTR, Sizes, open_view, published_sizes, view_store
from cube.store.location import is_remote, local_path, open_remote_dataset, redact, remote_root_meta
from cube.store.locks import WRITE_SEQ, read_runs, read_write_seqs, runs_written_since
from cube.store.remembered import arrays_key, cached_run_arrays, keep_run_arrays, keep_verified, verified


def read_manifests(path: PathLike, *, cache: bool = False) -> list[dict[str, Any]]:
    """Every run of the grid as a dict: its labels, ``status`` and the stored manifest fields (each run's
    manifest and status of one writer state). ``cache``: keep what was read in the store's `_derived` and
    take it from there while the arrays' files are unchanged (`cube.store.remembered`; local stores)."""
    sizes = published_sizes(path) if Path(path).is_dir() else None
    kept = _kept_manifests(Path(path), sizes) if cache and Path(path).is_dir() else None
    if kept is not None:
        return _manifest_rows(*kept)
    from cube.store.layout import open_group, read_coords

    group = open_group(path, mode="r", sizes=sizes)
    names = [n for n in ("run_status", "run_manifest") if n in group]
    keyed = (*names, WRITE_SEQ)
    key = arrays_key(path, keyed) if cache and names and Path(path).is_dir() else None
    with reading_store(path, f"read the run manifests of {path}"):
        coords = read_coords(group)
        arrays = cached_run_arrays(path, key, sizes) if key is not None else None
        if arrays is None or sorted(arrays) != sorted(names):
            arrays = None
            before = read_write_seqs(path, sizes)
            read = {n: _run_array(path, group, n, sizes) for n in names}
    if arrays is None:
        dirty = runs_written_since(before, read_write_seqs(path, sizes)) if before is not None and names else []
        # a run's manifest and status are one bracket: runs written meanwhile are read again, consistently
        for index, got in read_runs(path, names, dirty, coords, sizes, notes=[]):  # interrupted: status partial
            for n in names:
                read[n][index] = np.asarray(got.arrays[n]).item()  # the run's value (a string or a number)
        if key is not None and not dirty and arrays_key(path, keyed) == key:  # no file changed, no bracket open
            keep_run_arrays(path, key, sizes, read)
        arrays = read
    return _manifest_rows(coords, arrays)


def _kept_manifests(path: Path, sizes: Sizes | None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None:
    """(labels, per-run arrays) of `read_manifests` from what `cube.store.remembered` keeps, where the arrays' files
    are unchanged, read without zarr (`cube.store.direct`); None otherwise, or where the store is not a cube of
    this package's layout (`read_manifests` then opens it through zarr, which names what is wrong)."""
    from cube.store.direct import array_dtype, documents, read_labels

    got = documents(path)
    if got is None:
        return None
    attrs, arrays = got
    names = [n for n in ("run_status", "run_manifest") if n in arrays]
    floats = all(n in arrays and getattr(array_dtype(arrays[n]), "kind", "") == "f" for n in ("reward", "cost"))
    if not names or not floats or schema_version_problems(attrs) or any(d not in arrays for d in DIMS):
        return None
    kept = cached_run_arrays(path, arrays_key(path, (*names, WRITE_SEQ)), sizes)
    if kept is None or sorted(kept) != sorted(names):
        return None
    coords = read_labels(path, arrays, sizes)
    return None if coords is None else (coords, kept)


def _manifest_rows(coords: dict[str, np.ndarray], arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """`read_manifests`' rows from the grid's labels and the per-run arrays run_status and run_manifest."""
    status, texts = arrays.get("run_status"), arrays.get("run_manifest")
    rows = []
    for index in np.ndindex(*(len(coords[d]) for d in RUN_DIMS)):
        row: dict[str, Any] = {d: coords[d][i].item() for d, i in zip(RUN_DIMS, index, strict=True)}
        row["status"] = RUN_STATUS_NAMES.get(int(status[index]), "unknown") if status is not None else "unknown"
        if texts is not None and texts[index]:
            try:
                stored = json.loads(str(texts[index]))
            except ValueError:
                stored = None
            if not isinstance(stored, dict):
                stored = {"manifest_error": "the stored manifest is not a JSON object"}
            stored.pop("status", None)
            stored.pop("run", None)
            row.update(stored)
        rows.append(row)
    return rows


def _run_array(path: PathLike, group: Any, name: str, sizes: Sizes | None) -> np.ndarray:
    """The per-run array `name` cut to `sizes`: straight from its chunk files where it is in a layout this package
    writes (`cube.store.chunkfiles`, several times faster than zarr's per-chunk machinery), else through zarr
    (which also names a chunk that does not verify)."""
    fast = read_run_array(Path(path), name, sizes) if Path(path).is_dir() else None
    return fast if fast is not None else np.asarray(group[name][:])


def verify_run_arrays(path: PathLike, names: tuple[str, ...], *, cache: bool = False) -> None:
    """Read every chunk of the arrays `names` of the Zarr store `path` (those it has; one concurrent read
    each): `DamagedStoreError` naming the first chunk that does not decode. For commands that stand on
    per-run arrays without computing from them (a report beside its runs' env steps). ``cache``: an array
    whose files are as they were when it last verified is not read again (`cube.store.remembered`)."""
    if not Path(path).is_dir() or not (Path(path) / "zarr.json").exists():
        return
    keys = {name: arrays_key(path, (name,)) if cache else None for name in names}
    names = tuple(name for name in names if keys[name] is None or not verified(path, name, keys[name]))
    if not names:
        return  # every one verified as its files are: no zarr to load
    from cube.store.layout import open_group

    group = open_group(path, mode="r")
    with reading_store(path, f"read {', '.join(names)} of {path}"):
        for name in names:
            if name not in group:
                continue
            key = keys[name]
            if read_run_array(Path(path), name) is None:  # not in a layout read directly, or damaged:
                group[name][...]  # zarr reads it (and names the damaged chunk)
            if key is not None and arrays_key(path, (name,)) == key:
                keep_verified(path, name, key)


# --------------------------------------------------------------------------------------------------
# reading


def open_cube(
    source: PathLike | xr.Dataset, *, check: bool = True, chunks: dict[str, int] | None = None,
    lazy: bool = True, sizes: Sizes | None = None,
) -> xr.Dataset:
    """Open a cube lazily (dask) from a Zarr directory or a netCDF file, checking its structure.

    ``chunks`` sets dask chunk sizes per dimension (default: the store's chunks, one run each); larger
    dask chunks let one task fetch many store chunks in a single (concurrent) zarr read. ``lazy=False``
    opens without dask (lazily indexed arrays: reads of a few runs go straight to zarr; a local store of this
    package's layout opens without zarr until such a read, `cube.store.direct`). ``sizes``: the
    grid snapshot to see (default: the store's published grid now; kept in ``ds.encoding["saferl_grid"]``
    so later reads of the same pass see the same grid).

    Returns a Dataset whose string coordinates are plain numpy strings. Only the seven dimensions and
    ``reward``/``cost`` are required. Raises ``CubeError`` (one line) for a missing, corrupt or
    malformed store; value checks that need a pass over the data live in ``cube.store.validate``.
    While writers write, a lazy read guarantees one grid but nothing across variables: use
    ``ds.saferl.load()`` (`load_consistent`) for every run as one writer state.
    """
    defer_dask_imports()
    remote = is_remote(source)
    source = local_path(source)
    if isinstance(source, xr.Dataset):
        ds = source
        where = "dataset"
    elif remote:
        ds = open_remote_dataset(str(source), chunks or {}, lazy)
        where = redact(source)
    else:
        path = Path(source)
        with reading_store(path, f"read {path}"):
            if sizes is None and path.is_dir():
                sizes = published_sizes(path)
            ds = _open_dataset(path, chunks or {}, lazy, sizes)
        where = str(source)
    if check:
        problems = structure_problems(ds)
        if not isinstance(source, xr.Dataset) and not remote:
            problems += missing_coordinate_arrays(Path(source), ds)
        if problems:
            more = (f" (and {len(problems) - 1} more problem(s); run `saferl validate {where}`)"
                    if len(problems) > 1 else "")
            raise CubeError(f"{where} is not a valid saferl cube: {problems[0]}{more}")
        ds = normalise(ds)
    ds = ds.drop_vars(WRITE_SEQ, errors="ignore")  # the writers' seqlock, read by `read_write_seqs` only
    ds.attrs.pop(GRID_ATTR, None)
    if not isinstance(source, xr.Dataset):
        ds.encoding["saferl_source"] = str(source)  # lets ``ds.saferl`` reuse the store's cached statistics
        if remote:
            ds.encoding["saferl_remote"] = True
        if sizes:
            ds.encoding["saferl_grid"] = dict(sizes)
    return ds


def missing_coordinate_arrays(path: Path, ds: xr.Dataset) -> list[str]:
    """For a saferl Zarr store (it has a schema version): a problem line per dimension without its
    coordinate array (a store keeps labels for every dimension; foreign cubes may lack iterate/episode)."""
    if not (path / "zarr.json").exists() or "saferl_schema_version" not in ds.attrs:
        return []
    return [f"the store has no '{dim}' coordinate array (a saferl store keeps labels for every dimension); "
            "restore it from a copy" for dim in DIMS if not (path / dim / "zarr.json").exists()]


NETCDF_MAGIC = (b"CDF\x01", b"CDF\x02", b"CDF\x05", b"\x89HDF\r\n\x1a\n")
"""The first bytes of a netCDF file (classic, 64-bit offset, CDF-5, netCDF-4/HDF5)."""


def check_cube_path(path: PathLike) -> None:
    """CubeError (one line) unless `path` can be a cube: a Zarr store directory or a netCDF file. Reads
    nothing but the first bytes of a file; for a front door (`saferl-tui PATH`) to refuse at once."""
    if is_remote(path):
        remote_root_meta(str(path))  # missing, forbidden, not a store: one line
        return
    path = Path(local_path(path))
    if not path.exists():
        raise CubeError(f"{path} does not exist; give the path of a results store (.zarr directory or .nc file)")
    mode = path.stat().st_mode
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) \
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        raise CubeError(f"{path} is {kind}; give the path of a results store (.zarr directory or .nc file)")
    if stat.S_ISDIR(mode) and not ((path / "zarr.json").exists() or (path / ".zgroup").exists()):
        raise CubeError(f"{path} is a directory but not a Zarr store (no zarr.json); give a results store path")
    if stat.S_ISREG(mode):
        try:
            with open(path, "rb") as handle:
                head = handle.read(8)
        except OSError as exc:
            raise CubeError(f"cannot read {path} ({exc.strerror}); check its permissions") from None
        if not head.startswith(NETCDF_MAGIC):
            raise CubeError(f"cannot read {path}: it is a file but not a netCDF file; give a results store "
                            "(.zarr directory) or a netCDF export (.nc)")


def run_dask_chunks(path: Path) -> dict[str, int]:
    """Default dask chunks of a local v3 store: the store's own, except that a store chunked by mode and block of
    iterates (`cube.store.chunking`) gets one dask block per run over every iterate and mode, as the earlier
    layout had (a block per store chunk made a plain read of a paper-scale cube ~70,000 tasks, 7x slower)."""
    try:
        meta = json.loads((path / "reward" / "zarr.json").read_text())
        chunk = meta["chunk_grid"]["configuration"]["chunk_shape"]
        shape = meta["shape"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if len(chunk) == 7 == len(shape) and chunk[6] == 1 and (chunk[4] < shape[4] or shape[6] > 1):
        return {"iterate": -1, "mode": -1}
    return {}


def _open_direct(path: Path, sizes: Sizes | None) -> xr.Dataset | None:
    """`cube.store.direct.open_direct`: the store without zarr until an array other than the labels is read (a
    cached report reads none); None, for zarr to open it, where anything in it is not as this package writes."""
    from cube.store.direct import open_direct

    try:
        return open_direct(path, sizes)
    except Exception:  # noqa: BLE001 - zarr opens it then, and names what is wrong
        return None


def _open_dataset(path: Path, chunks: dict[str, int], lazy: bool = True, sizes: Sizes | None = None) -> xr.Dataset:
    check_cube_path(path)
    dask_chunks = chunks if lazy else None
    try:
        if path.is_dir():
            if (path / "zarr.json").exists():
                if lazy and not chunks:
                    dask_chunks = run_dask_chunks(path)
                direct = None if lazy else _open_direct(path, sizes)
                if direct is not None:
                    return direct
                return xr.open_zarr(view_store(path, sizes), consolidated=False, chunks=dask_chunks)
            if (path / ".zgroup").exists():
                return xr.open_zarr(path, consolidated=(path / ".zmetadata").exists(), chunks=dask_chunks)
            raise CubeError(f"{path} is a directory but not a Zarr store (no zarr.json); give a results store path")
        return xr.open_dataset(path, chunks=dask_chunks)
    except CubeError:
        raise
    except Exception as exc:  # backends raise many types for unreadable files
        if (path / "zarr.json").exists():
            raise  # a Zarr v3 store that does not decode: `open_cube`'s `reading_store` names the damage
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise CubeError(f"cannot read {path} as a Zarr store or netCDF file ({reason}); is it corrupt?") from None


# --------------------------------------------------------------------------------------------------
# the consistent load


def _run_positions(ds: xr.Dataset, coords: dict[str, np.ndarray]) -> list[tuple[str, Any, np.ndarray]]:
    """Per run dim: (dim, label(s) in `ds` (an array along a kept dim, a scalar for a selected one), the
    store positions of those labels). CubeError when a run dim's labels were dropped."""
    out = []
    for dim in RUN_DIMS:
        if dim not in ds.coords:
            raise CubeError(f"cannot load runs consistently without the '{dim}' labels: select with .sel/.isel "
                            "and keep the coordinates")
        labels = np.atleast_1d(ds[dim].values)
        store = coords[dim]
        if dim == "bound":
            pos = np.array([int(np.flatnonzero(same_bound(store, v))[0]) for v in labels])
        else:
            lookup = {str(v): i for i, v in enumerate(store.tolist())}
            pos = np.array([lookup[str(v)] for v in labels.tolist()])
        out.append((dim, ds[dim].values, pos))
    return out


def load_consistent(ds: xr.Dataset, tries: int = 200) -> xr.Dataset:
    """An in-memory copy of `ds` (a cube of `open_cube`, or any .sel/.isel of one) in which every run is
    one writer state: the runs a writer wrote while they were read (their write sequence moved or was
    odd) are read again alone while no writer is inside (holding writers off against one that never
    pauses, `cube.store.locks.RunReader`). A run whose writer died mid-write has the half-written slots
    blank and an `InterruptedWriteWarning` naming them. Datasets not read from a Zarr store with a
    seqlock (netCDF, in memory) are simply loaded."""
    source = ds.encoding.get("saferl_source")
    what = f"load the runs of {source or 'the cube'}"
    if not source or not Path(source).is_dir():
        with reading_store(source, what):
            return ds.compute()
    sizes = ds.encoding.get("saferl_grid") or published_sizes(source)
    before = read_write_seqs(source, sizes)
    with reading_store(source, what):
        out = ds.compute()
    if before is None:
        return out
    dirty = runs_written_since(before, read_write_seqs(source, sizes))
    if not dirty:
        return out
    from cube.store.layout import read_coords

    group = open_view(source, sizes)
    coords = read_coords(group)
    wanted = {dim: set(pos.tolist()) for dim, _, pos in _run_positions(out, coords)}
    selected = [index for index in dirty if all(index[k] in wanted[d] for k, d in enumerate(RUN_DIMS))]
    dims = {n: tuple(group[n].metadata.dimension_names or ()) for n in out.data_vars if n in group}
    dims = {n: d[len(RUN_DIMS):] for n, d in dims.items() if d[: len(RUN_DIMS)] == RUN_DIMS}
    if not selected or not dims:
        return out
    inner = {d: coords[d] for d in ("iterate", "episode", "mode")}
    for index, got in read_runs(source, list(dims), selected, coords, sizes, tries=tries):
        _place_run(out, got.arrays, dims, {d: coords[d][i] for d, i in zip(RUN_DIMS, index, strict=True)}, inner)
    return out


def _place_run(out: xr.Dataset, arrays: dict[str, np.ndarray], dims: dict[str, tuple[str, ...]],
               run: dict[str, Any], inner: dict[str, np.ndarray]) -> None:
    """Write one run's re-read arrays ({name: values without the run dims, along the store dims `dims`})
    into `out` at the run's labels `run`, keeping `out`'s selection along iterate, episode and mode."""
    for name, values in arrays.items():
        var = out[name]
        run_da = xr.DataArray(values, dims=dims[name], coords={d: inner[d] for d in dims[name]})
        sub = run_da.sel({d: out[d].values for d in run_da.dims if d in out.coords})
        loc = {d: run[d] for d in RUN_DIMS if d in var.dims}
        if loc:
            var.loc[loc] = sub.transpose(*[d for d in var.dims if d not in loc]).values
        else:
            var.values[...] = sub.values


def _netcdf_attr(value: Any) -> Any:
    """netCDF attributes hold numbers, strings and 1-D arrays only: booleans become 0/1, dicts JSON."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value


def export_netcdf(source: PathLike, out: PathLike) -> Path:
    """Write the cube (all variables and attrs) to a netCDF4 file; returns the path written.

    Every run in the file is one writer state: the file is written from a lazy read, then the runs a writer
    wrote meanwhile are read again consistently (`cube.store.locks.RunReader`) and rewritten in the file
    before it is renamed into place. Written beside `out`; a target that is not a regular file is refused.
    A full disk is one line saying so."""
    ds = open_cube(source)
    if Path(source).is_dir() and (Path(source) / "zarr.json").exists():
        odd = [line for name in ds.variables if name in ds.data_vars or name in ds.dims
               for line in odd_chunk_files(Path(source), str(name), ds[name].ndim)]
        if odd:
            raise DamagedStoreError.found(f"export {source}", odd[0] + (f" (and {len(odd) - 1} more)"
                                                                        if len(odd) > 1 else ""), advice="")
    attrs = {k: _netcdf_attr(v) for k, v in ds.attrs.items()}
    ds = ds.assign_attrs(attrs)
    encoding = {name: {"zlib": True, "complevel": 1} for name in ("reward", "cost")}
    sizes = ds.encoding.get("saferl_grid")
    before = read_write_seqs(source, sizes) if Path(source).is_dir() else None
    with atomic_output(out) as tmp:
        try:
            ds.to_netcdf(tmp, engine="netcdf4", encoding=encoding)
        except Exception as exc:  # the netCDF library reports a full disk as an HDF error or EACCES
            if _no_space_left(Path(out)):
                raise OSError(28, "No space left on device", str(out)) from None
            if isinstance(exc, OSError):
                raise
            raise damaged_store_error(exc, source, f"export {source}") from None
        if before is not None:
            dirty = runs_written_since(before, read_write_seqs(source, sizes))
            if dirty:
                _rewrite_runs(tmp, ds, source, dirty, sizes)
    return Path(out)


def _no_space_left(target: Path, margin: int = 1 << 20) -> bool:
    """Whether the file system of `target` has (almost) no space left for us."""
    import os

    try:
        st = os.statvfs(target.parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < margin


def _rewrite_runs(nc_path: Path, ds: xr.Dataset, source: PathLike, dirty: list[tuple[int, ...]],
                  sizes: Sizes | None) -> None:
    """Rewrite the runs at the store positions `dirty` in the netCDF file `nc_path` (written from `ds`)
    from a consistent read of each."""
    import netCDF4

    from cube.store.layout import read_coords

    group = open_view(source, sizes)
    coords = read_coords(group)
    names = [n for n in ds.data_vars if n in group
             and tuple(group[n].metadata.dimension_names or ())[: len(RUN_DIMS)] == RUN_DIMS]
    with netCDF4.Dataset(nc_path, "a") as nc:
        for index, got in read_runs(source, names, dirty, coords, sizes):
            for name, values in got.arrays.items():
                var = nc.variables[name]
                store_dims = tuple(group[name].metadata.dimension_names or ())[len(RUN_DIMS):]
                inner = [d for d in var.dimensions if d not in RUN_DIMS]
                values = np.transpose(values, [store_dims.index(d) for d in inner]) if inner else values
                key = tuple(index[RUN_DIMS.index(d)] if d in RUN_DIMS else slice(None) for d in var.dimensions)
                if values.ndim == 0:
                    var[key] = str(values) if values.dtype.kind in "OUST" else values.item()
                else:
                    var[key] = values
