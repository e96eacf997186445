"""A local Zarr v3 store read without zarr where that is all a command needs: its metadata documents, its labels
(`cube.store.chunkfiles.read_array`) and a Dataset whose arrays load zarr on their first read.

A report whose statistics are cached reads no episode: it needs the grid's labels, the root attributes and the
runs' metadata, all plain JSON and a few small chunk files. Importing zarr for them (its codecs, numcodecs,
fsspec and donfig) is about 0.3 s of a 2 s command on a 2-core machine (docs/performance.md, ninth round). This
module gives the same values zarr would, and None wherever a store is not as this package writes it (another
chunk grid or codec chain, a document that does not parse): the callers then open it through zarr, which judges
it and names what is wrong.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from xarray.backends import BackendArray
from xarray.backends.common import AbstractDataStore
from xarray.backends.store import StoreBackendEntrypoint
from xarray.backends.zarr import FillValueCoder  # xarray's zarr backend module: it loads no zarr
from xarray.core import indexing

from cube.schema import DIMS, as_str_array
from cube.store.chunkfiles import read_array


def documents(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]] | None:
    """(root attributes, {array name: its zarr.json document}) of the local v3 store at `path`, arrays in the
    order the folder lists them (zarr's order); None when a document does not parse or is not v3."""
    try:
        root = json.loads((path / "zarr.json").read_bytes())
        if not isinstance(root, dict) or root.get("zarr_format") != 3 or root.get("node_type") != "group":
            return None
        arrays = {}
        for entry in os.scandir(path):
            if entry.name.startswith((".", "_")) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                meta = json.loads(Path(entry.path, "zarr.json").read_bytes())
            except FileNotFoundError:
                continue  # a folder that is no node
            if not isinstance(meta, dict) or meta.get("zarr_format") != 3:
                return None
            if meta.get("node_type") == "array":
                arrays[entry.name] = meta
    except (OSError, ValueError):
        return None
    attrs = root.get("attributes") or {}
    return (attrs, arrays) if isinstance(attrs, dict) else None


def cut_shape(meta: Mapping[str, Any], sizes: Mapping[str, int] | None) -> tuple[int, ...] | None:
    """An array's shape cut to the grid `sizes` along its named dims (`cube.store.gridview.cut_metadata`); None
    when its document has no dimension name per axis."""
    try:
        names, shape = list(meta.get("dimension_names") or ()), [int(n) for n in meta["shape"]]
    except (KeyError, TypeError, ValueError):
        return None
    if len(names) != len(shape):
        return None
    sizes = sizes or {}
    return tuple(min(n, int(sizes[d])) if d in sizes else n for d, n in zip(names, shape, strict=True))


def array_dtype(meta: Mapping[str, Any]) -> np.dtype | None:
    """The dtype zarr reads an array's document as (numpy's StringDType for strings); None for any other
    data type than numbers, booleans and strings."""
    kind = meta.get("data_type")
    if kind == "string":
        return np.dtypes.StringDType()
    try:
        dtype = np.dtype(str(kind))
    except TypeError:
        return None
    return dtype if dtype.kind in "biuf" else None


def read_labels(path: Path, arrays: Mapping[str, Mapping[str, Any]], sizes: Mapping[str, int] | None,
                dims: tuple[str, ...] = DIMS) -> dict[str, np.ndarray] | None:
    """Each dimension's labels cut to `sizes`, as `cube.store.layout.read_coords` reads them (strings as plain
    numpy strings); None where one is missing or not in a layout `read_array` reads."""
    out = {}
    for dim in dims:
        meta = arrays.get(dim)
        shape = cut_shape(meta, sizes) if meta is not None else None
        got = read_array(path / dim) if shape is not None and len(shape) == 1 else None
        if got is None or got[1] != (dim,):
            return None
        values = got[0][: shape[0]]
        out[dim] = as_str_array(values) if values.dtype.kind in "OTUS" else values
    return out


class ZarrOnFirstRead(BackendArray):
    """An xarray backend array of one array of a store, which opens it through zarr (`cube.store.grid.open_view`,
    the grid `sizes`) when it is first read and reads through xarray's own wrapper from then on."""

    def __init__(self, path: Path, name: str, sizes: Mapping[str, int] | None, shape: tuple[int, ...],
                 dtype: np.dtype) -> None:
        self.path, self.name, self.sizes = path, name, dict(sizes) if sizes else None
        self.shape, self.dtype = shape, dtype
        self._wrapper: Any = None
        self._lock = threading.Lock()

    def wrapper(self) -> Any:
        """xarray's wrapper of the zarr array (made once)."""
        with self._lock:
            if self._wrapper is None:
                from xarray.backends.zarr import ZarrArrayWrapper

                from cube.store.grid import open_view

                self._wrapper = ZarrArrayWrapper(open_view(self.path, self.sizes)[self.name])
            return self._wrapper

    def __getitem__(self, key: Any) -> Any:
        return self.wrapper()[key]

    def __getstate__(self) -> dict[str, Any]:  # pickled (a process pool, dask) as where to read, not as a read
        return {k: v for k, v in self.__dict__.items() if k not in ("_wrapper", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _wrapper=None, _lock=threading.Lock())


def open_direct(path: Path, sizes: Mapping[str, int] | None) -> xr.Dataset | None:
    """The store at `path` as ``xr.open_zarr(view_store(path, sizes), consolidated=False, chunks=None)`` opens
    it (the same variables, dims, attributes, values and CF decoding; the codecs left out of the variables'
    encoding), its labels read straight from their chunk files and every other array by zarr on its first read;
    None where the store is not as this package writes it."""
    got = documents(path)
    if got is None:
        return None
    attrs, arrays = got
    labels = read_labels(path, arrays, sizes, tuple(d for d in DIMS if d in arrays))
    if labels is None:
        return None
    variables = {}
    for name, meta in arrays.items():
        shape, dtype = cut_shape(meta, sizes), array_dtype(meta)
        grid = meta.get("chunk_grid") or {}
        if shape is None or dtype is None or grid.get("name") != "regular":
            return None
        dims = tuple(meta["dimension_names"])
        chunks = tuple(int(n) for n in (grid.get("configuration") or {}).get("chunk_shape") or ())
        attributes = dict(meta.get("attributes") or {})
        if "_FillValue" in attributes:
            attributes["_FillValue"] = FillValueCoder.decode(attributes["_FillValue"], dtype)
        encoding = {"chunks": chunks, "preferred_chunks": dict(zip(dims, chunks, strict=True)),
                    "fill_value": _fill_value(meta.get("fill_value"), dtype)}
        if dtype.kind == "T":
            encoding["dtype"] = dtype
        if name in labels:
            data: Any = labels[name].astype(dtype)  # strings as zarr gives them (numpy's StringDType)
        else:
            data = indexing.LazilyIndexedArray(ZarrOnFirstRead(path, name, sizes, shape, dtype))
        variables[name] = xr.Variable(dims, data, attributes, encoding)

    # the engine as a class: xarray takes it as it is, where a name has it list every installed backend first
    return xr.open_dataset(Documents(variables, attrs), engine=StoreBackendEntrypoint, chunks=None)


class Documents(AbstractDataStore):
    """Variables and root attributes made from a store's documents, for xarray's "store" engine (its CF decoding,
    indexes and caching, as for a store xarray opens through zarr)."""

    def __init__(self, variables: dict[str, xr.Variable], attrs: Mapping[str, Any]) -> None:
        self.variables, self.attrs = variables, attrs

    def load(self) -> tuple[dict[str, xr.Variable], dict[str, Any]]:
        return self.variables, {k: v for k, v in self.attrs.items() if not k.lower().startswith("_nc")}


def _fill_value(value: Any, dtype: np.dtype) -> Any:
    """An array document's fill value as zarr gives it (NaN and infinities from their JSON names)."""
    if isinstance(value, str) and dtype.kind == "f":
        return dtype.type(float(value))
    return value
